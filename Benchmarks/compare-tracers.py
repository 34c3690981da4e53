#!/usr/bin/env python3
"""Runs the tracer comparison (see compare-tracers.sh) and prints its Markdown tables.

Per workload, every tool runs the same program with the same functions selected:

- plain: the program alone;
- ffi-hook-tracer: import-table mode (the calls that go through import tables);
- ffi-hook-tracer --inline: the same functions patched where they start (every call);
- ltrace -c: a breakpoint on each PLT entry (ptrace), a summary at exit;
- uftrace record: its PLT hooks (libmcount, --force for programs not built with -pg);
- frida-trace: frida's Interceptor on each function's first instructions, with handlers
  written here that only count calls (no log() call, so nothing is printed per call) and a
  session script that writes the counts to a file when the process calls exit().

Each tool is timed on the workload and on an idle run of the same program (the start
cost), the median of its runs taken; per call is (added − added on the idle run) ÷ calls.
"""

import argparse
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

TRACER = "ffi-hook-tracer"
INLINE = "ffi-hook-tracer --inline"
LTRACE = "ltrace -c"
UFTRACE = "uftrace record"
FRIDA = "frida-trace"
TOOLS = ["plain", TRACER, INLINE, LTRACE, UFTRACE, FRIDA]
# Tools that see calls where they go through an import table (PLT and GOT entries), and
# tools that see them where the function starts: their counts are compared within a group.
IMPORT_TABLE_TOOLS = [TRACER, LTRACE, UFTRACE]
FUNCTION_START_TOOLS = [INLINE, FRIDA]


# ---------------------------------------------------------------------------- inputs


def sqlite_script(path):
    """20,000 inserts in one transaction, then a scan that prints every row and a sum."""
    with open(path, "w") as script:
        script.write("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, value REAL);\nBEGIN;\n")
        for row in range(20000):
            script.write(f"INSERT INTO t VALUES({row}, 'row-{row}', {row * 0.5});\n")
        script.write("COMMIT;\nSELECT id, name, value FROM t WHERE value >= 0;\nSELECT count(*), sum(value) FROM t;\n")


def gzip_input(path, size=50 * 1000 * 1000):
    """50 MB of text from a fixed seed: lines of words from a small vocabulary (compressible)."""
    generator = random.Random(25)
    words = [f"word{index}" for index in range(2000)] + ["the", "a", "of", "and", "to", "in"] * 50
    with open(path, "w") as output:
        written = 0
        while written < size:
            line = " ".join(generator.choices(words, k=12)) + "\n"
            output.write(line)
            written += len(line)


def build_dlopen_program(work):
    """Compiles Peers/dlopen-zlib.c and its plugin; returns (program, plugin)."""
    peers = os.path.join(HERE, "Peers")
    program = os.path.join(work, "dlopen-zlib")
    plugin = os.path.join(work, "libzlib-plugin.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", plugin, os.path.join(peers, "zlib-plugin.c"), "-lz"],
                   check=True)
    subprocess.run(["cc", "-O2", "-o", program, os.path.join(peers, "dlopen-zlib.c"), "-ldl"], check=True)
    return program, plugin


def build_dlopen_timer(work):
    """Compiles Peers/dlopen-time.c; returns the program."""
    program = os.path.join(work, "dlopen-time")
    subprocess.run(["cc", "-O2", "-o", program, os.path.join(HERE, "Peers", "dlopen-time.c"), "-ldl"], check=True)
    return program


def attach_at_dlopen(options, work, say):
    """The cost of attaching to a library loaded after the program started: one dlopen of
    libsqlite3.so.0 (every function it exports), timed inside the program, plain and under
    the tracer (which attaches to every import-table entry of the library's functions as the
    dlopen returns) and under ltrace (breakpoints on them); the tools take turns, medians."""
    timer = build_dlopen_timer(work)
    library = "libsqlite3.so.0"
    functions = len(exported_functions(library_path(library)))
    variants = [
        ("plain", [], options.runs),
        (TRACER, [options.tracer, "--library", library, "--"], options.runs),
        (f"{TRACER} --scope all", [options.tracer, "--library", library, "--scope", "all", "--"], options.runs),
        (INLINE, [options.tracer, "--library", library, "--inline", "--"], options.runs),
        (LTRACE, ["ltrace", "-c", "-o", os.devnull, "-e", "sqlite3_*"], min(options.runs, options.ltrace_runs)),
    ]
    times = {name: [] for name, _, _ in variants}
    for round in range(options.runs):
        for name, prefix, runs in variants:
            if round >= runs:
                continue
            result = subprocess.run(prefix + [timer, library], capture_output=True, text=True)
            if result.returncode != 0:
                sys.exit(f"{name}: dlopen-time failed ({result.returncode}):\n{result.stderr[-2000:]}")
            times[name].append(float(result.stdout.split()[0]) / 1e6)
    plain = statistics.median(times["plain"])
    say(f"### A library loaded later: the attach at its dlopen ({library}, {functions:,} functions)")
    say("")
    say(f"One `dlopen(\"{library}\", RTLD_NOW)` by a program that does not link it "
        "(`Peers/dlopen-time.c`), timed inside the program from before the call to after its return: "
        "what a tool that follows loads adds is its attach to the library's functions (for the tracer, "
        "every import-table entry that leads to one, the library's calls of its own functions included). "
        "The target: under 5 ms for 1,500 functions.")
    say("")
    say("| tool | runs | dlopen (median) | min | max | added | under 5 ms |")
    say("|---|---:|---:|---:|---:|---:|---|")
    for name, _, _ in variants:
        values = times[name]
        median = statistics.median(values)
        added = "" if name == "plain" else ms(median - plain)
        met = "" if name == "plain" else ("**met**" if median - plain < 0.005 else "**not met**")
        say(f"| {name} | {len(values)} | {ms(median)} | {ms(min(values))} | {ms(max(values))} | {added} | {met} |")
    say("")
    print(json.dumps({"workload": "attach at dlopen", "samples": times}), file=sys.stderr)


def library_path(soname):
    """The file a soname resolves to (frida names a module by its file, not its soname)."""
    for line in subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout.splitlines():
        fields = line.split(" => ")
        if len(fields) == 2 and fields[0].strip().startswith(soname + " ") and "x86-64" in fields[0]:
            return os.path.realpath(fields[1].strip())
    sys.exit(f"{soname} not found by ldconfig")


def exported_functions(path, prefix=""):
    """Names of the functions a library exports (defined, type T), starting with prefix."""
    output = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    return sorted({fields[2].split("@")[0] for fields in map(str.split, output.splitlines())
                   if len(fields) == 3 and fields[1] in "Ti" and fields[2].startswith(prefix)})


def imported_functions(path, version_prefix="GLIBC_"):
    """Names of the functions an executable imports with a symbol version (here: from libc)."""
    output = subprocess.run(["nm", "-D", "--undefined-only", path], capture_output=True, text=True, check=True).stdout
    return sorted({name.split("@")[0] for name in output.split() if "@" + version_prefix in name})


# ---------------------------------------------------------------------------- frida-trace


FRIDA_SESSION = r"""
// Writes the calls the handlers counted (in frida-trace's shared `state` object) to
// parameters.out when the process calls exit(): one JSON object, function -> calls.
Interceptor.attach(Module.getGlobalExportByName('exit'), {
  onEnter() {
    const file = new File(parameters.out, 'w');
    file.write(JSON.stringify(state));
    file.close();
  }
});
"""


def frida_setup(directory, module_file, functions):
    """Writes frida-trace's handlers (one per function, counting only) and session script
    into `directory`, where frida-trace runs (it reads __handlers__/MODULE/FUNCTION.js from
    its working directory and writes a logging one only for a function that has none)."""
    handlers = os.path.join(directory, "__handlers__", os.path.basename(module_file))
    os.makedirs(handlers, exist_ok=True)
    for function in functions:
        with open(os.path.join(handlers, function + ".js"), "w") as handler:
            handler.write(
                "defineHandler({\n"
                f"  onEnter(log, args, state) {{ state['{function}'] = (state['{function}'] || 0) + 1; }}\n"
                "});\n")
    session = os.path.join(directory, "count-session.js")
    with open(session, "w") as file:
        file.write(FRIDA_SESSION)
    return session


# ---------------------------------------------------------------------------- running


def timed(command, stdin, stdout, cwd=None, any_status=False):
    """Wall time of one run in seconds; fails on a non-zero status unless any_status
    (frida-trace exits 1 when the process it spawned terminates)."""
    with open(stdin or os.devnull) as source, open(stdout, "w") as sink:
        started = time.perf_counter()
        result = subprocess.run(command, stdin=source, stdout=sink, stderr=subprocess.PIPE, cwd=cwd)
        elapsed = time.perf_counter() - started
    if result.returncode != 0 and not any_status:
        sys.exit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


def ltrace_counts(path):
    """Calls per function from an `ltrace -c` summary."""
    counts = {}
    for line in open(path):
        fields = line.split()
        if len(fields) == 5 and fields[3].isdigit():
            name = fields[4].split("@")[0]
            counts[name] = counts.get(name, 0) + int(fields[3])
    return counts


def uftrace_counts(directory):
    """Calls per function from `uftrace report` (none when it recorded nothing)."""
    result = subprocess.run(["uftrace", "report", "-d", directory, "--no-pager"], capture_output=True, text=True)
    counts = {}
    for line in result.stdout.splitlines():
        # A call that never returned (exit) has no times.
        match = re.match(r"\s*(?:[\d.]+ \S+\s+[\d.]+ \S+\s+)?(\d+)\s+(\S+)\s*$", line)
        if match:
            name = match.group(2).split("@")[0]
            counts[name] = counts.get(name, 0) + int(match.group(1))
    return counts


def json_counts(path):
    """Calls per function from the tracer's --json file."""
    return {row["name"]: row["calls"] for row in json.load(open(path))["functions"]}


def frida_counts(path):
    return json.load(open(path)) if os.path.exists(path) else {}


class Workload:
    """A program, its idle variant and what each tool is asked to trace in it."""

    def __init__(self, name, title, command, idle_command, stdin, tracer_import, tracer_inline, ltrace, uftrace,
                 frida_module, frida_functions, frida_patterns):
        self.name, self.title = name, title
        self.command, self.idle_command, self.stdin = command, idle_command, stdin
        self.tracer_import, self.tracer_inline = tracer_import, tracer_inline
        self.ltrace, self.uftrace = ltrace, uftrace
        self.frida_module, self.frida_functions, self.frida_patterns = frida_module, frida_functions, frida_patterns


def run_workload(workload, options, work):
    """Times each tool on the idle run and on the workload; returns the medians, the idle
    medians, the counts of each tool's last workload run and the commands."""
    name = workload.name
    output = os.path.join(work, f"{name}.out")
    paths = {
        TRACER: os.path.join(work, f"{name}.json"),
        INLINE: os.path.join(work, f"{name}.inline.json"),
        LTRACE: os.path.join(work, f"{name}.ltrace"),
        UFTRACE: os.path.join(work, f"{name}.uftrace"),
        FRIDA: os.path.join(work, f"{name}.frida.json"),
    }
    frida_dir = os.path.join(work, f"frida-{name}")
    session = frida_setup(frida_dir, workload.frida_module, workload.frida_functions)

    def commands(program):
        frida = [options.frida_trace, "--quiet", "-S", session, "-P", json.dumps({"out": paths[FRIDA]})]
        for pattern in workload.frida_patterns:
            frida += ["-i", pattern]
        return {
            "plain": program,
            TRACER: [options.tracer] + workload.tracer_import + ["--json", paths[TRACER], "--"] + program,
            INLINE: [options.tracer] + workload.tracer_inline + ["--json", paths[INLINE], "--"] + program,
            LTRACE: ["ltrace", "-c", "-o", paths[LTRACE]] + workload.ltrace + program,
            UFTRACE: ["uftrace", "record", "--force", "--no-event", "-d", paths[UFTRACE]] + workload.uftrace + program,
            # frida-trace -f wants the program's path: it does not search the PATH.
            FRIDA: frida + ["-f", shutil.which(program[0]), "--"] + program[1:],
        }

    runs_of = {LTRACE: options.ltrace_runs, FRIDA: options.frida_runs}

    def measure(tools, stdin):
        """Runs the tools in turn, round after round, so that a slow spell of the shared
        machine falls on every tool alike; returns each tool's median."""
        times = {tool: [] for tool in tools if runs_of.get(tool, options.runs) > 0}
        for run in range(options.runs):
            for tool in times:
                if run >= runs_of.get(tool, options.runs):
                    continue
                # uftrace refuses an existing directory; frida's file is written only at exit.
                if tool == UFTRACE:
                    shutil.rmtree(paths[UFTRACE], ignore_errors=True)
                if tool == FRIDA and os.path.exists(paths[FRIDA]):
                    os.unlink(paths[FRIDA])
                times[tool].append(timed(tools[tool], stdin, output, cwd=frida_dir if tool == FRIDA else None,
                                         any_status=tool == FRIDA))
                # frida-trace's status says nothing; its counts file says the program ran to exit().
                if tool == FRIDA and not os.path.exists(paths[FRIDA]):
                    sys.exit(f"frida-trace wrote no counts: {' '.join(tools[tool])}\n{open(output).read()[-2000:]}")
        return {tool: statistics.median(values) for tool, values in times.items()}, times

    idle, _ = measure(commands(workload.idle_command), workload.stdin[1])
    # The counts are those each tool left from its last run on the workload.
    tools = commands(workload.command)
    medians, samples = measure(tools, workload.stdin[0])
    counts = {
        TRACER: json_counts(paths[TRACER]),
        INLINE: json_counts(paths[INLINE]),
        LTRACE: ltrace_counts(paths[LTRACE]) if options.ltrace_runs else {},
        UFTRACE: uftrace_counts(paths[UFTRACE]),
        FRIDA: frida_counts(paths[FRIDA]) if options.frida_runs else {},
    }
    return medians, idle, samples, counts, tools


# ---------------------------------------------------------------------------- report


def ms(seconds):
    return f"{seconds * 1000:.0f} ms" if abs(seconds) >= 0.0095 else f"{seconds * 1000:.1f} ms"


def ratio_cell(ours, theirs, target):
    """ours ÷ theirs and whether it is at most `target` (a fifth, a twentieth)."""
    if theirs <= 0:
        return "–", "no basis (theirs ≤ 0)"
    value = ours / theirs
    return f"{value:.3f}", "**met**" if value <= target else "**not met**"


def shown(command, options, work):
    """A command as printed in the tables: the tracer's path shortened, temporary files as
    …/NAME, and long lists (gzip's 77 functions) cut to their first three."""
    words = []
    repeated = 0
    for index, word in enumerate(command):
        if word == options.tracer:
            word = "ffi-hook-tracer"
        elif word == options.frida_trace:
            word = "frida-trace"
        elif work in word:
            word = word.replace(work + "/", "…/")
        names = word.split(",")
        if len(names) > 5:
            word = ",".join(names[:3]) + f",… ({len(names)} names)"
        # frida-trace's -i options, one a function: the first three, then how many in all.
        if word == "-i" and index + 1 < len(command):
            repeated += 1
            total = sum(1 for other in command if other == "-i")
            if repeated == 4 and total > 5:
                words.append(f"… ({total} -i options in all)")
            if repeated > 3 and total > 5:
                continue
        elif index > 0 and command[index - 1] == "-i" and repeated > 3 and sum(1 for o in command if o == "-i") > 5:
            continue
        words.append(word)
    return " ".join(words)


def report_workload(workload, medians, idle, samples, counts, tools, options, work, say, summary):
    plain, idle_plain = medians["plain"], idle["plain"]
    say(f"### {workload.title}")
    say("")
    say(f"Plain: `{shown(workload.command, options, work)}`{' < ' + os.path.basename(workload.stdin[0]) if workload.stdin[0] else ''}; "
        f"idle run: `{shown(workload.idle_command, options, work)}`"
        f"{' < ' + os.path.basename(workload.stdin[1]) if workload.stdin[1] else ''}.")
    say("")
    say("| tool | asked to trace | runs | wall time | × plain | added | added on an idle run | calls seen | "
        "added per call (less idle) |")
    say("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for tool in medians:
        if tool == "plain":
            say(f"| plain | | {len(samples[tool])} | {ms(plain)} | 1.00 | | | | |")
            continue
        added = medians[tool] - plain
        idle_added = idle[tool] - idle_plain
        calls = sum(counts[tool].values())
        per_call = f"{(added - idle_added) / calls * 1e9:,.0f} ns" if calls else "no calls seen"
        say(f"| {tool} | `{shown(tools[tool][:-len(workload.command)] if tool != FRIDA else tools[tool], options, work)}` "
            f"| {len(samples[tool])} | {ms(medians[tool])} | {medians[tool] / plain:.2f} | {ms(added)} | "
            f"{ms(idle_added)} | {calls:,} | {per_call} |")
    say("")
    for ours in (TRACER, INLINE):
        added = medians[ours] - plain
        idle_added = idle[ours] - idle_plain
        row = [workload.name, ours]
        for theirs, target in ((UFTRACE, 1 / 5), (FRIDA, 1 / 20)):
            if theirs not in medians:
                row += ["–", "not run"]
                continue
            value, met = ratio_cell(added, medians[theirs] - plain, target)
            idle_value, idle_met = ratio_cell(idle_added, idle[theirs] - idle_plain, target)
            row += [f"{value} ({met})", f"{idle_value} ({idle_met})"]
        summary.append(row)

    # Counts side by side, every function any tool saw, the most called first.
    names = sorted(set().union(*[set(c) for c in counts.values()]),
                   key=lambda n: (-max(c.get(n, 0) for c in counts.values()), n))
    columns = [TRACER, LTRACE, UFTRACE, INLINE, FRIDA]
    ran = set(medians)
    say("| function | " + " | ".join(columns) + " | import-table tools agree | function-start tools agree |")
    say("|---|" + "---:|" * len(columns) + "---|---|")

    def agree(row_tools, function):
        # A tool that saw no call at all (uftrace and frida-trace on the dlopen workload)
        # counts as disagreeing: it was asked for these functions.
        values = [counts[tool].get(function) for tool in row_tools if tool in ran]
        if len(values) < 2:
            return ""
        return "yes" if len(set(values)) == 1 and None not in values else "**no**"

    for function in names:
        cells = ["–" if counts[tool].get(function) is None else f"{counts[tool][function]:,}" for tool in columns]
        say(f"| {function} | {' | '.join(cells)} | {agree(IMPORT_TABLE_TOOLS, function)} | "
            f"{agree(FUNCTION_START_TOOLS, function)} |")
    say(f"| *all* | {' | '.join(f'{sum(counts[tool].values()):,}' for tool in columns)} | | |")
    say("")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tracer", required=True)
    parser.add_argument("--frida-trace", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ltrace-runs", type=int, default=1)
    parser.add_argument("--frida-runs", type=int, default=3)
    parser.add_argument("--only", choices=["sqlite", "gzip", "dlopen", "attach"])
    parser.add_argument("--output")
    options = parser.parse_args()

    work = tempfile.mkdtemp(prefix="compare-tracers-")
    try:
        sql = os.path.join(work, "workload.sql")
        sqlite_script(sql)
        idle_sql = os.path.join(work, "idle.sql")
        with open(idle_sql, "w") as file:
            file.write("SELECT 1;\n")
        data = os.path.join(work, "data.txt")
        tiny = os.path.join(work, "tiny.txt")
        with open(tiny, "w") as file:
            file.write("\n")
        program, plugin = build_dlopen_program(work)
        sqlite_library = library_path("libsqlite3.so.0")
        libc = library_path("libc.so.6")
        gzip_imports = imported_functions(shutil.which("gzip"))
        zlib_functions = ["adler32", "crc32", "zlibVersion"]

        workloads = [
            Workload(
                "sqlite",
                "sqlite3 `:memory:`: 20,000 inserts, then a scan (the sqlite3_* functions of libsqlite3.so.0)",
                # The script is read with .read, not from standard input: frida-trace spawns
                # the program without passing its own standard input on.
                ["sqlite3", ":memory:", f".read {sql}"], ["sqlite3", ":memory:", f".read {idle_sql}"], (None, None),
                ["--library", "libsqlite3.so.0", "--symbols", "sqlite3_*", "--scope", "main"],
                ["--library", "libsqlite3.so.0", "--symbols", "sqlite3_*", "--inline"],
                # @MAIN: the shell's calls, not libsqlite3's calls of its own functions.
                ["-e", "sqlite3_*@MAIN"], ["--match", "glob", "-F", "sqlite3_*"],
                sqlite_library, exported_functions(sqlite_library, "sqlite3_"), ["libsqlite3.so*!sqlite3_*"],
            ),
            Workload(
                "gzip",
                "gzip -c of a 50 MB text file (the libc.so.6 functions gzip imports)",
                ["gzip", "-6", "-c", data], ["gzip", "-6", "-c", tiny], (None, None),
                ["--library", "libc.so.6", "--scope", "main"],
                ["--library", "libc.so.6", "--symbols", ",".join(gzip_imports), "--inline"],
                [], [],
                libc, gzip_imports, [f"libc.so.6!{function}" for function in gzip_imports],
            ),
            Workload(
                "dlopen",
                "a program that dlopens a zlib plugin after it starts: 200,000 rounds of crc32 and adler32 "
                "(libz.so.1, loaded by the dlopen)",
                [program, plugin, "200000"], [program, plugin, "0"], (None, None),
                ["--library", "libz.so.1", "--symbols", ",".join(zlib_functions)],
                ["--library", "libz.so.1", "--symbols", ",".join(zlib_functions), "--inline"],
                ["-e", "+".join(zlib_functions)], [arg for f in zlib_functions for arg in ("-F", f)],
                library_path("libz.so.1"), zlib_functions, [f"libz.so*!{function}" for function in zlib_functions],
            ),
        ]
        versions = {
            "ltrace": subprocess.run(["ltrace", "--version"], capture_output=True, text=True).stdout.splitlines()[0],
            "uftrace": subprocess.run(["uftrace", "--version"], capture_output=True, text=True).stdout.strip(),
            "frida-trace": subprocess.run([options.frida_trace, "--version"], capture_output=True,
                                          text=True).stdout.strip(),
            "sqlite3": subprocess.run(["sqlite3", "--version"], capture_output=True, text=True).stdout.split()[0],
            "gzip": subprocess.run(["gzip", "--version"], capture_output=True, text=True).stdout.splitlines()[0],
        }

        lines = []
        say = lines.append
        say(f"Machine: {os.cpu_count()} processors, Linux {platform.release()}. Wall time: median of "
            f"{options.runs} runs ({min(options.runs, options.frida_runs)} for frida-trace, "
            f"{min(options.runs, options.ltrace_runs)} for ltrace, "
            f"whose runs take up to minutes); the tools take turns in each round.")
        say("")
        say("Versions: " + "; ".join(f"{tool} `{version}`" for tool, version in versions.items()) + ".")
        say("")
        summary = []
        for workload in workloads:
            if options.only and workload.name != options.only:
                continue
            if workload.name == "gzip" and not os.path.exists(data):
                gzip_input(data)
            print(f"== {workload.name}", file=sys.stderr)
            medians, idle, samples, counts, tools = run_workload(workload, options, work)
            report_workload(workload, medians, idle, samples, counts, tools, options, work, say, summary)
            # Every sample, for whoever wants to see the spread behind a median.
            print(json.dumps({"workload": workload.name, "samples": samples}), file=sys.stderr)

        if not options.only or options.only == "attach":
            print("== attach at dlopen", file=sys.stderr)
            attach_at_dlopen(options, work, say)

        if summary:
            say("### Against the targets")
            say("")
            say("Ours ÷ theirs, from the medians above; the targets: at most 1/5 (0.200) of uftrace's added "
                "time and 1/20 (0.050) of frida-trace's.")
            say("")
            say("| workload | mode | ÷ uftrace, added | ÷ uftrace, idle run | ÷ frida-trace, added | ÷ frida-trace, idle run |")
            say("|---|---|---|---|---|---|")
            for row in summary:
                say("| " + " | ".join(row) + " |")
            say("")
        text = "\n".join(lines)
        print(text)
        if options.output:
            with open(options.output, "w") as output:
                output.write(text + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
