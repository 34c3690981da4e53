#!/usr/bin/env python3
"""Checks the tracer's event outputs (--chrome-trace, --folded, --flamegraph, --timeline) from
runs of the tracer fixture (Tests/Fixtures/TracerFixture/program.c) in scope `program`.

    tracer-outputs-check.py full WORK PARENT_PID CHILD_PID
    tracer-outputs-check.py small WORK PARENT_PID CAPACITY
    tracer-outputs-check.py signals WORK PID HANDLED
    tracer-outputs-check.py jumps WORK PID

`full`: the files of a run with the default buffers, named NAME-PID.EXT in WORK:
- trace-PID.json, Chrome trace event JSON: valid JSON; every event has the fields the trace
  event format requires for its phase (name, ph, pid, tid, ts in microseconds for B and E;
  args.name for the process_name and thread_name metadata); per thread the B and E events
  nest (each E ends the innermost open B of the same name, times never decrease, nothing is
  left open); the number of B events per function equals the fixture's calls, in the parent
  and in the forked child; each worker thread made its 2,500 tracee_add calls; the call tree
  is the fixture's (5 tracee_depth calls each 201 calls deep, tracee_deeper always in
  tracee_depth, each tracee_tail with one tracee_add in it, every other call at the top); the
  durations per function add up to the totals of the --json report (so ts is in microseconds).
- folded-PID.txt, folded stacks: exactly the fixture's stacks (tracee_depth;tracee_deeper;...
  down to 201 levels, tracee_tail;tracee_add, and the top-level functions), each with a
  positive whole number of nanoseconds; their sum equals the time of the top-level calls in
  the Chrome trace.
- flame-PID.svg: well-formed XML; a frame (a <g> with a <title> and a <rect>) per stack of the
  folded file at least 0.1 px wide and none narrower (0.1 px of tolerance around the limit),
  on the level of its depth, as wide as its time, with the function's name in its title, plus
  the root.
- timeline-PID.svg: well-formed XML, a lane label per thread, a bar per level at least.

`small`: trace-PID.json of a run whose buffers hold CAPACITY events, CAPACITY chosen so that
the main thread fills its buffer 50 calls deep in the first tracee_depth recursion: the file
is still balanced and nested; each thread's recorded calls and dropped events account for
all its calls (2 per call); the main thread recorded every call before the recursion and a
chain of exactly 50 nested calls, each with its real end (no call closed without a return).

`signals`: signals-PID.json and signals-counts-PID.json of event-signals.c, whose SIGALRM handler
calls tracee_add (HANDLED times) while the main thread calls tracee_nothing 200,000 times:
balanced and nested (a handler's call at the top or inside tracee_nothing, never holding a
call), every tracee_nothing call recorded, and as many tracee_add calls as were counted (at
most HANDLED: a signal that lands in the attach code's own instructions runs no block).

`jumps`: jumps-PID.json of jumps.c (libjump.so traced), whose 10 jump_call calls are left by
longjmp and each followed by a jump_return called from a frame above: each jump_call ends
where jump_return begins, marked "no return seen", and neither holds the other.
"""
import json
import sys
import xml.etree.ElementTree as ElementTree

# The fixture's constants (program.c) and its calls in scope program.
ADDS, NOTHINGS, SUMS, DEPTH, DEPTHS, THREADS, THREAD_ADDS = 1000, 777, 300, 100, 5, 4, 2500
PLUGIN_RUNS, CHILD_ADDS, STRLENS, TAILS, INNERS = 250, 42, 123, 64, 200
EXPECTED = {
    "tracee_add": ADDS + THREADS * THREAD_ADDS + PLUGIN_RUNS + TAILS,
    "tracee_tail": TAILS,
    "tracee_nothing": NOTHINGS,
    "tracee_sum": SUMS,
    "tracee_depth": DEPTHS * (DEPTH + 1),
    "tracee_deeper": DEPTHS * DEPTH,
    "late_square": PLUGIN_RUNS,
    "strlen": STRLENS,
    # Its own calls inside libtracee are direct, not seen through import tables.
    "tracee_inner": INNERS,
}
MAIN_CALLS = sum(EXPECTED.values()) - THREADS * THREAD_ADDS
# The chain of one tracee_depth(DEPTH) call: depth, deeper, depth, ..., depth (201 calls).
CHAIN = ["tracee_depth" if level % 2 == 0 else "tracee_deeper" for level in range(2 * DEPTH + 1)]

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def calls_of(path):
    """The trace's calls per thread, from its B and E events, checking the format and nesting:
    {tid: [call]} with call = {name, begin, end, children, parent, args}; and the trace."""
    trace = json.load(open(path))
    check(isinstance(trace.get("traceEvents"), list), f"{path}: no traceEvents list")
    threads, open_calls, last = {}, {}, {}
    named_threads, process_named = set(), False
    for event in trace["traceEvents"]:
        phase = event.get("ph")
        if not check(phase in ("B", "E", "M"), f"{path}: phase {phase!r}"):
            continue
        check(isinstance(event.get("pid"), int) and isinstance(event.get("tid"), int), f"{path}: pid/tid {event}")
        check(isinstance(event.get("name"), str) and event["name"], f"{path}: name {event}")
        if phase == "M":
            check(isinstance(event.get("args"), dict), f"{path}: metadata without args {event}")
            if event["name"] == "thread_name":
                check(isinstance(event["args"].get("name"), str), f"{path}: thread_name without a name")
                named_threads.add(event["tid"])
            process_named |= event["name"] == "process_name"
            continue
        tid, ts = event["tid"], event.get("ts")
        if not check(isinstance(ts, (int, float)) and ts >= 0, f"{path}: ts {event}"):
            continue
        check(ts >= last.get(tid, 0), f"{path}: thread {tid}: time runs backwards at {event}")
        last[tid] = ts
        stack = open_calls.setdefault(tid, [])
        if phase == "B":
            call = {"name": event["name"], "begin": ts, "children": [], "args": {}}
            call["parent"] = stack[-1] if stack else None
            if stack:
                stack[-1]["children"].append(call)
            threads.setdefault(tid, []).append(call)
            stack.append(call)
        elif check(stack and stack[-1]["name"] == event["name"], f"{path}: thread {tid}: unmatched E {event}"):
            call = stack.pop()
            call["end"] = ts
            call["args"] = event.get("args", {})
    for tid, stack in open_calls.items():
        check(not stack, f"{path}: thread {tid}: {len(stack)} B events without an E")
    check(process_named, f"{path}: no process_name metadata")
    check(set(threads) <= named_threads, f"{path}: threads without a thread_name: {set(threads) - named_threads}")
    return threads, trace


def chain(call):
    """The names down the first-child chain from `call`."""
    names = []
    while call:
        names.append(call["name"])
        call = call["children"][0] if call["children"] else None
    return names


def check_full(work, parent, child):
    threads, trace = calls_of(f"{work}/trace-{parent}.json")
    everything = [call for calls in threads.values() for call in calls]
    counts = {}
    for call in everything:
        counts[call["name"]] = counts.get(call["name"], 0) + 1
    check(counts == EXPECTED, f"calls per function in the trace: {counts}, expected {EXPECTED}")
    check(trace["otherData"]["dropped_events"] == 0, f"dropped events: {trace['otherData']['dropped_events']}")
    check(trace["otherData"]["calls"] == sum(EXPECTED.values()), f"otherData calls {trace['otherData']['calls']}")
    main = threads.get(int(parent), [])
    workers = [tid for tid in threads if tid != int(parent)]
    check(len(workers) == THREADS, f"{len(workers)} worker threads with calls, expected {THREADS}")
    for tid in workers:
        names = {call["name"] for call in threads[tid]}
        check(len(threads[tid]) == THREAD_ADDS and names == {"tracee_add"}, f"thread {tid}: {len(threads[tid])} calls")
    check(len(main) == MAIN_CALLS, f"main thread: {len(main)} calls, expected {MAIN_CALLS}")
    # The call tree.
    tops = [call for call in everything if call["parent"] is None]
    depth_tops = [call for call in tops if call["name"] == "tracee_depth"]
    check(len(depth_tops) == DEPTHS, f"{len(depth_tops)} top-level tracee_depth calls, expected {DEPTHS}")
    for call in depth_tops:
        check(chain(call) == CHAIN, f"a tracee_depth recursion is {len(chain(call))} calls deep, expected {len(CHAIN)}")
    for call in everything:
        parent_name = call["parent"]["name"] if call["parent"] else None
        if call["name"] == "tracee_deeper":
            check(parent_name == "tracee_depth", f"tracee_deeper called in {parent_name}")
        elif call["name"] == "tracee_depth":
            check(parent_name in (None, "tracee_deeper"), f"tracee_depth called in {parent_name}")
        elif call["name"] == "tracee_tail":
            check([c["name"] for c in call["children"]] == ["tracee_add"], "tracee_tail without one tracee_add")
        elif call["name"] == "tracee_add" and parent_name is not None:
            check(parent_name == "tracee_tail", f"tracee_add called in {parent_name}")
        else:
            check(parent_name is None and not call["children"], f"{call['name']} nested: {parent_name}")
        check(not call["args"], f"{call['name']} ended without a return: {call['args']}")
    # Durations against the counts report (microseconds in the trace, nanoseconds there): every
    # call's time (the mean times the calls; the total counts a recursive call once).
    report = {row["name"]: row for row in json.load(open(f"{work}/counts-{parent}.json"))["functions"]}
    for name, want in EXPECTED.items():
        traced = sum(call["end"] - call["begin"] for call in everything if call["name"] == name) * 1000
        total = report[name]["mean_ns"] * report[name]["completed"]
        check(abs(traced - total) <= 2 * want + total / 1000, f"{name}: {traced:.0f} ns in the trace, {total} counted")
    # The forked child: its own calls, the last its call of exit, running when the files were
    # written (so ended then, and marked).
    child_threads, child_trace = calls_of(f"{work}/trace-{child}.json")
    child_calls = [call for calls in child_threads.values() for call in calls]
    check([call["name"] for call in child_calls] == ["tracee_add"] * CHILD_ADDS + ["exit"],
          f"the child's trace: {len(child_calls)} calls")
    check(all(not call["args"] for call in child_calls[:-1]), "a child call ended without a return")
    check(child_calls[-1]["args"] == {"ended": "running at exit"}, f"the child's exit: {child_calls[-1]['args']}")
    check(child_trace["otherData"]["calls_running_at_exit"] == 1, "the child's calls running at exit")

    # Folded stacks.
    folded = {}
    for line in open(f"{work}/folded-{parent}.txt"):
        stack, _, value = line.rstrip("\n").rpartition(" ")
        check(value.isdigit() and int(value) > 0, f"folded line {line!r}")
        check(stack not in folded, f"folded stack twice: {stack}")
        folded[stack] = int(value)
    stacks = {name for name in EXPECTED if name not in ("tracee_deeper",)} | {"tracee_tail;tracee_add"}
    stacks |= {";".join(CHAIN[: length + 1]) for length in range(len(CHAIN))}
    check(set(folded) == stacks, f"folded stacks: unexpected {sorted(set(folded) - stacks)[:5]}, "
          f"missing {sorted(stacks - set(folded))[:5]}")
    top_time = sum(call["end"] - call["begin"] for call in everything if call["parent"] is None) * 1000
    folded_time = sum(folded.values())
    check(abs(folded_time - top_time) <= len(folded) + len(everything) * 0.002 + top_time / 1000,
          f"folded stacks add up to {folded_time} ns, the top-level calls to {top_time:.0f} ns")

    # The flame graph: a frame per stack wide enough, at its depth, as wide as its time.
    svg = ElementTree.parse(f"{work}/flame-{parent}.svg").getroot()
    namespace = "{http://www.w3.org/2000/svg}"
    frames = []
    for group in svg.iter(f"{namespace}g"):
        title, rect = group.find(f"{namespace}title"), group.find(f"{namespace}rect")
        if check(title is not None and rect is not None, "a flame graph frame without a title or a rect"):
            frames.append((title.text.split(":")[0], float(rect.get("y")), float(rect.get("width"))))
    totals = {}
    for stack, value in folded.items():
        names = stack.split(";")
        for length in range(1, len(names) + 1):
            key = (length, names[length - 1], ";".join(names[:length]))
            totals[key] = totals.get(key, 0) + value
    scale = 1180 / folded_time
    bottom = max(y for _, y, _ in frames)
    drawn = {(round((bottom - y) / 17), name): width for name, y, width in frames}
    check(drawn.get((0, "all")) == 1180, f"the root frame: {drawn.get((0, 'all'))}")
    check(len(drawn) == len(frames), "two frames with the same name on one level")
    for (depth, name, _), total in totals.items():
        width = total * scale
        if width >= 0.11:
            if check((depth, name) in drawn, f"no frame for {name} at depth {depth} ({width:.2f} px)"):
                check(abs(drawn[(depth, name)] - width) <= 0.02 + width / 100,
                      f"{name} at depth {depth}: {drawn[(depth, name)]} px wide, expected {width:.2f}")
        elif width < 0.09:
            check((depth, name) not in drawn, f"a frame for {name} at depth {depth} ({width:.3f} px)")
    check(len(frames) - 1 <= len(totals), f"{len(frames)} frames for {len(totals)} stacks")

    # The timeline: well-formed, a lane per thread.
    timeline = ElementTree.parse(f"{work}/timeline-{parent}.svg").getroot()
    texts = [text.text or "" for text in timeline.iter(f"{namespace}text")]
    for tid in threads:
        check(any(text.endswith(f" {tid}") for text in texts), f"no timeline lane for thread {tid}")
    bars = len(list(timeline.iter(f"{namespace}rect"))) - 1
    check(bars >= len(threads), f"{bars} timeline bars")
    print(f"trace: {len(everything)} calls on {len(threads)} threads, balanced and nested as the fixture calls; "
          f"{len(folded)} folded stacks; {len(frames)} flame graph frames")


def check_small(work, parent, capacity):
    threads, trace = calls_of(f"{work}/trace-{parent}.json")
    dropped = {row["tid"]: row["dropped_events"] for row in trace["otherData"]["threads"]}
    check(trace["otherData"]["dropped_events"] == sum(dropped.values()) > 0, "no dropped events reported")
    for tid, calls in threads.items():
        made = MAIN_CALLS if tid == int(parent) else THREAD_ADDS
        check(2 * len(calls) + dropped.get(tid, 0) == 2 * made,
              f"thread {tid}: {len(calls)} calls recorded and {dropped.get(tid, 0)} events dropped of {made} calls")
        check(2 * len(calls) <= capacity, f"thread {tid}: {len(calls)} calls in a buffer of {capacity} events")
        for call in calls:
            check(not call["args"], f"thread {tid}: {call['name']} closed without its end")
    main = threads[int(parent)]
    before = ADDS + NOTHINGS + SUMS
    check([call["name"] for call in main[:before]] == ["tracee_add"] * ADDS + ["tracee_nothing"] * NOTHINGS
          + ["tracee_sum"] * SUMS, "the main thread's calls before the recursion")
    depth = (capacity - 2 * before) // 2
    check(len(main) == before + depth and chain(main[before]) == CHAIN[:depth],
          f"the recursion: {len(chain(main[before])) if len(main) > before else 0} calls recorded, expected {depth}")
    print(f"small buffers: {trace['otherData']['dropped_events']} events dropped, every recorded call balanced, "
          f"the recursion cut at {depth} calls deep with the ends of all of them")


def check_signals(work, pid, handled):
    """event-signals.c: tracee_nothing called in a loop, tracee_add from a SIGALRM handler."""
    threads, trace = calls_of(f"{work}/signals-{pid}.json")
    calls = [call for thread in threads.values() for call in thread]
    report = {row["name"]: row["calls"] for row in json.load(open(f"{work}/signals-counts-{pid}.json"))["functions"]}
    nothings = [call for call in calls if call["name"] == "tracee_nothing"]
    adds = [call for call in calls if call["name"] == "tracee_add"]
    check(len(nothings) == 200000, f"{len(nothings)} tracee_nothing calls in the trace, expected 200000")
    # A handler call that interrupted the thread's making of its buffer is counted, not
    # recorded (two events without a buffer each).
    unbuffered = trace["otherData"]["dropped_events_without_buffer"]
    check(len(adds) + unbuffered // 2 == report.get("tracee_add", 0), f"{len(adds)} tracee_add calls in the trace "
          f"and {unbuffered} events without a buffer, {report.get('tracee_add', 0)} counted")
    check(0 < len(adds) <= handled, f"{len(adds)} tracee_add calls in the trace, {handled} made by the handler")
    check(len(nothings) + len(adds) == len(calls), "calls of other functions")
    for call in calls:
        check(not call["args"], f"{call['name']} ended without a return")
        if call["name"] == "tracee_add":
            check(not call["children"], "a call in tracee_add")
            check(call["parent"] is None or call["parent"]["name"] == "tracee_nothing",
                  f"tracee_add in {call['parent'] and call['parent']['name']}")
    nested = sum(1 for call in adds if call["parent"] is not None)
    check(trace["otherData"]["dropped_events"] == unbuffered, "dropped events")
    print(f"signals: {len(nothings)} tracee_nothing calls and {len(adds)} handler calls of tracee_add "
          f"({nested} inside tracee_nothing) recorded, balanced and nested; the handler made {handled}")


def check_jumps(work, pid):
    """jumps.c: 10 jump_call calls left by longjmp, each followed by a jump_return from above."""
    threads, trace = calls_of(f"{work}/jumps-{pid}.json")
    calls = [call for thread in threads.values() for call in thread]
    check([call["name"] for call in calls] == ["jump_call", "jump_return"] * 10,
          f"the calls: {[call['name'] for call in calls][:6]}...")
    for call in calls:
        check(call["parent"] is None and not call["children"], f"{call['name']} nested")
        ended = {"ended": "no return seen"} if call["name"] == "jump_call" else {}
        check(call["args"] == ended, f"{call['name']} ended {call['args']}")
        # A call left by longjmp ends at the last event seen in it: its own begin here, as it
        # calls nothing traced (it was given the time up to the next call from its frame).
        if call["name"] == "jump_call":
            check(call["end"] == call["begin"], f"jump_call lasted {call['end'] - call['begin']} us")
    check(trace["otherData"]["calls_without_return"] == 10, "calls without return in otherData")
    print("longjmp: the 10 calls left by longjmp end at the last event seen in them, marked so")


if __name__ == "__main__":
    mode, work, parent, last = (sys.argv[1:] + [""])[:4]
    if mode == "full":
        check_full(work, parent, last)
    elif mode == "jumps":
        check_jumps(work, parent)
    elif mode == "signals":
        check_signals(work, parent, int(last))
    else:
        check_small(work, parent, int(last))
    if failures:
        print("\n".join(failures[:40]))
        sys.exit(1)
