#!/usr/bin/env python3
"""Checks the tracer's call log (--log) of Tests/Fixtures/TracerFixture/log-program.c.

    tracer-log-check.py decoded LOG PID WORKER   signatures given, libc's write, read, strlen, exit
    tracer-log-check.py inline LOG PID WORKER    signatures given, liblogged.so traced inline
    tracer-log-check.py raw LOG PID WORKER       no signature: the registers raw

Every line must have the form THREAD SECONDS +DURATION CALL. Decoded, the main thread's calls
must be exactly the expected ones, in order (a call's line follows those of the calls made
inside it), with their arguments and results, the nested call indented and inside its caller's
time; the other thread's call on its own thread ID. Raw, each call shows six registers and rax
in hexadecimal.
"""

import re
import sys

LINE = re.compile(r"^(\d+) (\d+\.\d{6}) \+(\d+\.\d{6}) ( *)(\S.*)$")
# logged_raw has no signature: its first two registers, then whatever the caller left.
RAW = r"\((0x[0-9a-f]+, ){5}0x[0-9a-f]+\) = 0x[0-9a-f]+"
LONG = "\\x1b[1m" + "0123456789" * 6
EXPECTED = [
    (0, 'logged_call(-7, "say \\"hi\\"\\n", 2.5, 1234567890123) = -6'),
    (0, "logged_call(42, NULL, -0.125, -1) = 43"),
    (0, "logged_call(0, 0x1 <unreadable>, 1e+20, 0) = 1"),
    (0, 'logged_call(1, "abc"<unreadable>, 0, 0) = 2'),
    (0, f'logged_call(5, "{LONG}"..., 0, 0) = 6'),
    (0, "logged_scale(1.5, 4) = 6"),
    (0, "logged_half(3) = 1.5"),
    (0, "logged_many(1, 2, 3, 4, 5, 6, 7, 8) = 36"),
    (1, 'logged_call(3, "inner", 0.5, 3) = 4'),
    (0, "logged_outer(3) = 40"),
    (0, re.compile(r"logged_raw\(0x11, 0x22, (0x[0-9a-f]+, ){3}0x[0-9a-f]+\) = 0x33")),
]
LIBC = [
    (0, 'write(21, "ab\\ncd", 5) = 5'),
    (0, 'read(20, "ab\\ncd", 64) = 5'),
    (0, re.compile(r"read\(-1, 0x[0-9a-f]+, 10\) = -1")),
    (0, 'write(1, "hello\\n", 6) = 6'),
    (0, 'strlen("twelve chars") = 12'),
    (0, "exit(0) <no return>"),
]
WORKER = [(0, 'logged_call(100, "thread", 1, 1) = 101')]


def fail(message):
    print(f"log check: {message}")
    sys.exit(1)


def read(path):
    """The log's lines as (thread, start, duration, depth, call)."""
    calls = []
    for number, text in enumerate(open(path, encoding="utf-8").read().splitlines(), 1):
        match = LINE.match(text)
        if not match:
            fail(f"{path}:{number}: not THREAD SECONDS +DURATION CALL: {text!r}")
        thread, start, duration, indent, call = match.groups()
        if len(indent) % 2:
            fail(f"{path}:{number}: an odd indentation: {text!r}")
        calls.append((int(thread), float(start), float(duration), len(indent) // 2, call))
    return calls


def same(expected, call):
    return expected.fullmatch(call) if isinstance(expected, re.Pattern) else expected == call


def compare(name, calls, expected):
    got = [(depth, call) for _, _, _, depth, call in calls]
    if len(got) != len(expected) or not all(
        depth == wanted_depth and same(wanted, call) for (depth, call), (wanted_depth, wanted) in zip(got, expected)
    ):
        shown = "\n".join(f"  {'  ' * depth}{call}" for depth, call in got)
        wanted = "\n".join(
            f"  {'  ' * depth}{call.pattern if isinstance(call, re.Pattern) else call}" for depth, call in expected
        )
        fail(f"{name}: the calls logged are\n{shown}\nnot\n{wanted}")


def main():
    mode, path, pid, worker = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    calls = read(path)
    threads = {thread for thread, *_ in calls}
    if threads != {pid, worker}:
        fail(f"threads {sorted(threads)}, expected the main thread {pid} and the worker {worker}")
    main_calls = [call for call in calls if call[0] == pid]
    worker_calls = [call for call in calls if call[0] == worker]
    if mode == "raw":
        for thread, _, _, _, call in calls:
            if not re.fullmatch(r"logged_\w+" + RAW, call):
                fail(f"without a signature, {call!r} is not raw")
        first = main_calls[0][4]
        # -7 in edi (the upper half zeroed by the 32-bit move), -6 in rax.
        if not first.startswith("logged_call(0xfffffff9, ") or not first.endswith(" = 0xfffffffffffffffa"):
            fail(f"the first raw call is {first!r}")
        if len(main_calls) != len(EXPECTED) or len(worker_calls) != 1:
            fail(f"{len(main_calls)} and {len(worker_calls)} calls logged raw, expected {len(EXPECTED)} and 1")
        print(f"log {mode}: {len(calls)} calls, each raw")
        return
    compare("the main thread", main_calls, EXPECTED + (LIBC if mode == "decoded" else []))
    compare("the worker thread", worker_calls, WORKER)
    # The nested call lies within its caller's time (both rounded to the microsecond).
    inner = next(call for call in main_calls if call[3] == 1)
    outer = next(call for call in main_calls if call[4].startswith("logged_outer"))
    if not (outer[1] <= inner[1] + 1e-6 and inner[1] + inner[2] <= outer[1] + outer[2] + 2e-6):
        fail(f"the nested call {inner} is not inside {outer}")
    starts = [start for _, start, _, depth, _ in main_calls if depth == 0]
    if starts != sorted(starts):
        fail(f"the main thread's outermost calls do not start in order: {starts}")
    print(f"log {mode}: {len(calls)} calls, arguments and results as expected")


main()
