#!/usr/bin/env python3
"""Attaches frida-gum's Interceptor to every function a library exports, in a running process.

Usage: frida-library.py HOOKBENCH LIBRARY

Starts `HOOKBENCH --library-child host`, a process that has loaded LIBRARY (libcrypto.so.3),
read its pages once and warmed up, attaches frida to it, and in one JavaScript turn (frida
batches the writes of one turn, and Interceptor.flush() ends it) attaches empty onEnter and
onLeave listeners (compiled C, through CModule) to every function
the library exports. Prints one line of JSON: frida's version, the functions, how many were
attached and how many refused, the milliseconds the attaching took (in the agent, the flush
included), and the resident memory the process gained from frida's agent and from the
attaching (KiB, from /proc/PID/status). Needs Python's frida package (pip install frida).
"""

import json
import subprocess
import sys

import frida

AGENT = r"""
const listeners = new CModule(`
#include <gum/guminterceptor.h>

void on_enter (GumInvocationContext * context) {}
void on_leave (GumInvocationContext * context) {}
`);

rpc.exports = {
  attachAll(name) {
    const module = Process.getModuleByName(name);
    const functions = module.enumerateExports().filter(e => e.type === 'function');
    const seen = new Set();
    let attached = 0;
    let refused = 0;
    const start = Date.now();
    for (const f of functions) {
      const key = f.address.toString();
      if (seen.has(key)) continue;
      seen.add(key);
      try {
        Interceptor.attach(f.address, { onEnter: listeners.on_enter, onLeave: listeners.on_leave });
        attached++;
      } catch (e) {
        refused++;
      }
    }
    Interceptor.flush();
    return { functions: seen.size, attached, refused, milliseconds: Date.now() - start };
  }
};
"""


def resident(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def main():
    hookbench, library = sys.argv[1], sys.argv[2]
    host = subprocess.Popen([hookbench, "--library-child", "host"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = host.stdout.readline().split()
        if len(line) != 2 or line[0] != "ready":
            raise SystemExit(f"the host did not start: {line}")
        pid = int(line[1])
        before = resident(pid)
        session = frida.attach(pid)
        script = session.create_script(AGENT)
        script.load()
        loaded = resident(pid)
        result = script.exports_sync.attach_all(library)
        after = resident(pid)
        result.update(
            {
                "frida": frida.__version__,
                "residentKiBAgent": loaded - before,
                "residentKiBAttach": after - loaded,
            }
        )
        print(json.dumps(result), flush=True)
    finally:
        # The measurement is done: the host goes with frida's hooks in it (undoing 5,000 of
        # them is not what is measured, and can take a long while).
        host.kill()
        host.wait()


if __name__ == "__main__":
    main()
