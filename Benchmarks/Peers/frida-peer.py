#!/usr/bin/env python3
"""Hooks one function of a running hookbench with frida-gum's Interceptor, on request.

hookbench --peers starts this program with its own process id and the address of the
function to hook, then talks to it in lines: this program answers "ready frida VERSION"
once it has attached, then reads one command per line and answers "ok" or "error: WHY":

  install fridaAttach        Interceptor.attach with empty onEnter and onLeave written in C
  install fridaReplace       Interceptor.replace with a C replacement that calls the original
                             (by calling the function itself, which the interceptor routes
                             to the original)
  install fridaReplaceFast   Interceptor.replaceFast with a C replacement that calls the
                             original through the trampoline replaceFast returns
  remove                     undoes the installed one

When its standard input closes it undoes what is installed, unloads the script, detaches and
exits. The listeners and replacements are compiled by frida's CModule; the function must be
`int (int, int)` and at least 16 bytes long. Needs Python's frida package (pip install frida).
"""

import sys

try:
    import frida
except ImportError:
    print("error: Python's frida package is missing (pip install frida)", flush=True)
    sys.exit(1)

# The agent: three C modules and the commands. State that C code reads (the trampoline of
# replaceFast) lives in memory from Memory.alloc, handed to the module as a symbol.
AGENT = r"""
const target = ptr(TARGET);

const listeners = new CModule(`
#include <gum/guminterceptor.h>

void on_enter (GumInvocationContext * context) {}
void on_leave (GumInvocationContext * context) {}
`);

const replacing = new CModule(`
extern int target (int a, int b);

int replacement (int a, int b) { return target (a, b); }
`, { target });

const trampoline = Memory.alloc(Process.pointerSize);
const replacingFast = new CModule(`
extern void * trampoline;

int replacement (int a, int b) { return ((int (*) (int, int)) trampoline) (a, b); }
`, { trampoline });

let undo = null;

function install(mechanism) {
  if (undo !== null) throw new Error('something is installed already');
  switch (mechanism) {
    case 'fridaAttach': {
      const listener = Interceptor.attach(target, { onEnter: listeners.on_enter, onLeave: listeners.on_leave });
      undo = () => listener.detach();
      break;
    }
    case 'fridaReplace':
      Interceptor.replace(target, replacing.replacement);
      undo = () => Interceptor.revert(target);
      break;
    case 'fridaReplaceFast':
      trampoline.writePointer(Interceptor.replaceFast(target, replacingFast.replacement));
      undo = () => Interceptor.revert(target);
      break;
    default:
      throw new Error('unknown mechanism ' + mechanism);
  }
  Interceptor.flush();
}

function remove() {
  if (undo === null) return;
  undo();
  undo = null;
  Interceptor.flush();
}

rpc.exports = {
  version: () => Frida.version,
  install,
  remove,
};
"""


def main():
    if len(sys.argv) != 3:
        print("error: usage: frida-peer.py PID ADDRESS", flush=True)
        return 2
    pid = int(sys.argv[1])
    address = int(sys.argv[2], 0)
    try:
        session = frida.attach(pid)
        script = session.create_script(AGENT.replace("TARGET", repr(hex(address))))
        script.on("message", lambda message, data: print("frida-peer:", message, file=sys.stderr))
        script.load()
        agent = script.exports_sync
        print("ready frida", agent.version(), flush=True)
    except Exception as error:  # frida raises several types; the message is what matters
        print(f"error: cannot attach to process {pid}: {error}", flush=True)
        return 1
    for line in sys.stdin:
        words = line.split()
        try:
            if words[:1] == ["install"] and len(words) == 2:
                agent.install(words[1])
            elif words == ["remove"]:
                agent.remove()
            else:
                raise ValueError(f"unknown command {line.strip()!r}")
            print("ok", flush=True)
        except Exception as error:
            print("error:", str(error).splitlines()[0], flush=True)
    # Revert before unloading: unloading with a replaceFast still in place crashed the target.
    agent.remove()
    script.unload()
    session.detach()
    return 0


if __name__ == "__main__":
    sys.exit(main())
