#!/usr/bin/env python3
"""Runs the tracer comparison (see compare-tracers.sh) and prints its Markdown table."""

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


def timed(command, stdin, stdout, env=None):
    """Wall time of one run in seconds; fails on a non-zero status."""
    with open(stdin or os.devnull) as source, open(stdout, "w") as sink:
        started = time.perf_counter()
        result = subprocess.run(command, stdin=source, stdout=sink, stderr=subprocess.PIPE, env=env)
        elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


def ltrace_counts(path):
    """Calls per function from an `ltrace -c` summary."""
    counts = {}
    for line in open(path):
        fields = line.split()
        if len(fields) == 5 and fields[3].isdigit():
            counts[fields[4].split("@")[0]] = counts.get(fields[4].split("@")[0], 0) + int(fields[3])
    return counts


def uftrace_counts(directory):
    """Calls per function from `uftrace report`."""
    report = subprocess.run(
        ["uftrace", "report", "-d", directory, "--no-pager"], capture_output=True, text=True, check=True
    ).stdout
    counts = {}
    for line in report.splitlines():
        # A call that never returned (exit) has no times.
        match = re.match(r"\s*(?:[\d.]+ \S+\s+[\d.]+ \S+\s+)?(\d+)\s+(\S+)\s*$", line)
        if match:
            name = match.group(2).split("@")[0]
            counts[name] = counts.get(name, 0) + int(match.group(1))
    return counts


def tracer_counts(path):
    return {row["name"]: row["calls"] for row in json.load(open(path))["functions"]}


def run_workload(name, command, stdin, idle_stdin, options, tracer, work, runs, ltrace_runs):
    """Times each tool `runs` times (ltrace `ltrace_runs` times: it takes minutes where the others
    take milliseconds), on the workload and on an idle run of the same program (`idle_stdin`,
    or the command's last argument replaced by a 1-byte file), which measures what a tool adds
    before and after the calls. Returns the medians, the idle medians, the counts of the last
    run and the commands."""
    tracer_options, ltrace_filter, uftrace_filter = options
    output = os.path.join(work, f"{name}.out")
    json_path = os.path.join(work, f"{name}.json")
    ltrace_path = os.path.join(work, f"{name}.ltrace")
    uftrace_dir = os.path.join(work, f"{name}.uftrace")

    def tools_for(command):
        tools = {
            "plain": command,
            "ffi-hook-tracer": [tracer] + tracer_options + ["--json", json_path, "--"] + command,
            "ltrace -c": ["ltrace", "-c", "-o", ltrace_path] + ltrace_filter + command,
            "uftrace record": ["uftrace", "record", "--force", "--no-event", "-d", uftrace_dir]
            + uftrace_filter + command,
        }
        if ltrace_runs == 0:
            del tools["ltrace -c"]
        return tools

    def measure(tools, stdin):
        times = {tool: [] for tool in tools}
        for run in range(runs):
            for tool, arguments in tools.items():
                if tool == "ltrace -c" and run >= ltrace_runs:
                    continue
                if tool == "uftrace record":
                    shutil.rmtree(uftrace_dir, ignore_errors=True)
                times[tool].append(timed(arguments, stdin, output))
        return {tool: statistics.median(values) for tool, values in times.items()}

    idle_command = command
    if idle_stdin is None:
        tiny = os.path.join(work, f"{name}.tiny")
        with open(tiny, "w") as file:
            file.write("\n")
        idle_command = command[:-1] + [tiny]
    idle = measure(tools_for(idle_command), idle_stdin)
    tools = tools_for(command)
    medians = measure(tools, stdin)
    counts = {
        "ffi-hook-tracer": tracer_counts(json_path),
        "ltrace -c": ltrace_counts(ltrace_path) if ltrace_runs else {},
        "uftrace record": uftrace_counts(uftrace_dir),
    }
    return medians, idle, counts, tools


def milliseconds(seconds):
    return f"{seconds * 1000:.0f} ms"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tracer", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ltrace-runs", type=int, default=1)
    parser.add_argument("--only", choices=["sqlite", "gzip"])
    parser.add_argument("--output")
    options = parser.parse_args()

    work = tempfile.mkdtemp(prefix="compare-tracers-")
    try:
        sql = os.path.join(work, "workload.sql")
        sqlite_script(sql)
        data = os.path.join(work, "data.txt")
        gzip_input(data)
        idle_sql = os.path.join(work, "idle.sql")
        with open(idle_sql, "w") as file:
            file.write("SELECT 1;\n")
        workloads = [
            (
                "sqlite",
                "sqlite3 `:memory:`: 20,000 inserts, then a scan (sqlite3_* of libsqlite3.so.0 called by the shell)",
                ["sqlite3", ":memory:"], sql, idle_sql,
                (
                    ["--library", "libsqlite3.so.0", "--symbols", "sqlite3_*", "--scope", "main"],
                    # @MAIN: the shell's calls, not libsqlite3's calls of its own functions.
                    ["-e", "sqlite3_*@MAIN"], ["--match", "glob", "-F", "sqlite3_*"],
                ),
            ),
            (
                "gzip",
                "gzip -c of a 50 MB text file (every libc.so.6 function gzip calls)",
                ["gzip", "-6", "-c", data], None, None,
                (["--library", "libc.so.6", "--scope", "main"], [], []),
            ),
        ]
        lines = []
        say = lines.append
        say(
            f"Machine: {os.cpu_count()} processors, Linux {platform.release()}; wall time: median of "
            f"{options.runs} runs ({options.ltrace_runs} for ltrace, whose runs take minutes).")
        say("")
        for name, title, command, stdin, idle_stdin, tool_options in workloads:
            if options.only and name != options.only:
                continue
            print(f"== {name}", file=sys.stderr)
            medians, idle, counts, tools = run_workload(
                name, command, stdin, idle_stdin, tool_options, options.tracer, work, options.runs,
                options.ltrace_runs)
            plain = medians["plain"]
            say(f"### {title}")
            say("")
            say(
                "| tool | command | wall time | × plain | added | added on an idle run | "
                "added per call seen | added ÷ tracer's |")
            say("|---|---|---:|---:|---:|---:|---:|---:|")
            tracer_added = medians["ffi-hook-tracer"] - plain
            for tool, seconds in medians.items():
                shown = " ".join(
                    "ffi-hook-tracer" if a == options.tracer else "…" + a[len(work):] if a.startswith(work) else a
                    for a in tools[tool])
                if tool == "plain":
                    say(f"| {tool} | `{shown}` | {milliseconds(seconds)} | 1.00 | | | | |")
                    continue
                added = seconds - plain
                idle_added = idle[tool] - idle["plain"]
                calls = sum(counts[tool].values())
                # Left out where the difference is within the noise of the run.
                per_call = f"{(added - idle_added) / calls * 1e9:.0f} ns" if calls and added > idle_added else ""
                ratio = f"{added / tracer_added:.1f}" if tracer_added > 0 else ""
                say(
                    f"| {tool} | `{shown}` | {milliseconds(seconds)} | {seconds / plain:.2f} | {milliseconds(added)} | "
                    f"{milliseconds(idle_added)} | {per_call} | {ratio} |")
            say("")
            names = sorted(set().union(*[set(c) for c in counts.values()]),
                           key=lambda n: -max(c.get(n, 0) for c in counts.values()))
            say("| function | ffi-hook-tracer | ltrace -c | uftrace | agree |")
            say("|---|---:|---:|---:|---|")
            disagreements = 0
            for function in names:
                row = [counts[tool].get(function) for tool in ("ffi-hook-tracer", "ltrace -c", "uftrace record")]
                seen = {value for value in row if value is not None}
                agree = "yes" if len(seen) == 1 and None not in row else "**no**"
                disagreements += agree != "yes"
                cells = ["–" if value is None else f"{value:,}" for value in row]
                say(f"| {function} | {' | '.join(cells)} | {agree} |")
            total = [sum(counts[tool].values()) for tool in ("ffi-hook-tracer", "ltrace -c", "uftrace record")]
            say(f"| *all* | {' | '.join(f'{value:,}' for value in total)} | |")
            say("")
            say(f"{len(names) - disagreements} of {len(names)} functions agree.")
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
