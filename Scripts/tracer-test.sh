#!/usr/bin/env bash
# The tracer (Programs: ffi-hook-tracer and its preloaded FFIHookTracer library) on a C
# program that makes known numbers of calls: from the main program, from threads, through a
# variadic function, through recursion, from a library it loads with dlopen (which brings a
# traced library that was not loaded before), in a forked child, of libc's strlen (an
# IFUNC), and a tail call from one traced function into another. The counts in the tracer's JSON must equal the program's, in each scope.
# A program whose signal handler makes traced calls while a timer interrupts a loop of them:
# each is counted, or reported as not counted when it interrupted the tracer's own block; the
# same while the loop loads and unloads a library (the handler interrupting the tracer's walks).
# With --inline, the same program traced in the libraries' own code: calls libtracee makes
# directly to a hidden and a local function counted too, self times below totals, recursion
# counted once. A library loaded later that the executable's own (weak) import leads to, in
# every scope; a library named by another path to its file, or by the file's own name; a library
# unloaded and loaded again, three times. Libraries opened by bare name through the caller's own
# DT_RUNPATH (the program's, a library's, into a namespace of its own). A misspelt library name is reported with the loaded objects closest to it.
# The started process that loads no traced library reports without loading the tracer, in the
# tracer's own words, however it ends; the tracer loaded into it later (takeover.c): while a
# thread forks, after the environment was emptied, by a finalizer, or by a load that ends it.
# A Swift program's own runtime (libswiftCore.so), traced through its import table and inline.
# The event outputs (--chrome-trace, --folded, --flamegraph, --timeline) of the same program,
# with the default buffers and with buffers that fill up, and of a program whose signal handler
# calls a traced function (event-signals.c) and of one whose traced calls are left by longjmp
# (jumps.c): Scripts/tracer-outputs-check.py says what it checks.
# A signal that ends the program: the report first, then the death by the signal, wherever it
# finds the program (inside the allocator, inside dlopen and dlclose in a loop of them, a double
# free, a forked child, handlers set to run once, Python's KeyboardInterrupt).
# The call log (--log) of a program whose calls have known arguments and results, with and
# without signatures, through import tables and inline (Scripts/tracer-log-check.py), of a signal
# handler's calls, and of a forked child, to a file of its own (%p) or its parent's.
# --pid: a running process (joined.c) joined and left, its traced window counted exactly, its
# code and import tables as before, every signal sent meanwhile delivered; and the errors for a
# process the tracer cannot join (gone, traced already, another user's, killed meanwhile,
# static); a process that opens a library by bare name through a library's RUNPATH, joined; a
# process whose joiner is killed during the join's call goes on, its registers intact; a process
# caught before its loader mapped the C library, and a kernel thread, each told apart. The
# --pid part is skipped where Yama's ptrace_scope forbids ptrace. The wrapper's common run,
# made before the C library starts (fast.c), and main.c's: the same environment either way.
#
#     Scripts/tracer-test.sh [debug|release]
set -euo pipefail
cd "$(dirname "$0")/.."
# The libraries built for the tracer make their generic types' metadata by accessors (the
# manifest's FFI_HOOK_DIRECT_METADATA): a traced process starts faster.
export FFI_HOOK_DIRECT_METADATA=1
configuration=${1:-debug}

(cd Programs && swift build -c "$configuration" -Xswiftc -warnings-as-errors --product FFIHookTracer &&
    swift build -c "$configuration" -Xswiftc -warnings-as-errors --product FFIHookTracerStart &&
    swift build -c "$configuration" -Xswiftc -warnings-as-errors --product ffi-hook-tracer &&
    swift build -c "$configuration" -Xswiftc -warnings-as-errors --product ffi-hook-tracer-join)
bin=$(cd Programs && swift build -c "$configuration" --show-bin-path)

work=$(mktemp -d)
# A failed check exits at once: the processes it started in the background (the joined ones
# wait for a signal) are ended with it.
trap 'jobs -p | xargs -r kill -KILL 2>/dev/null; rm -rf "$work"' EXIT
fixture=Tests/Fixtures/TracerFixture
# tracee.c at -O0: the recursion stays a call through the library's own PLT entry; tail.c at
# -O2: its call becomes a tail jump.
gcc -O0 -fPIC -c -o "$work/tracee.o" "$fixture/tracee.c"
gcc -O2 -fPIC -c -o "$work/tail.o" "$fixture/tail.c"
gcc -shared -o "$work/libtracee.so" "$work/tracee.o" "$work/tail.o"
gcc -O0 -fPIC -shared -o "$work/liblate.so" "$fixture/late.c"
gcc -O0 -fPIC -shared -o "$work/plugin.so" "$fixture/plugin.c" -L"$work" -llate -ltracee -Wl,-rpath,"$work"
gcc -O0 -fno-builtin -o "$work/program" "$fixture/program.c" -L"$work" -ltracee -Wl,-rpath,"$work" -lpthread -ldl
gcc -O0 -o "$work/event-signals" "$fixture/event-signals.c" -L"$work" -ltracee -Wl,-rpath,"$work"
gcc -O0 -o "$work/closes-output" "$fixture/closes-output.c" -L"$work" -ltracee -Wl,-rpath,"$work"
gcc -O0 -o "$work/spawner" "$fixture/spawner.c" -L"$work" -ltracee -Wl,-rpath,"$work"
gcc -O0 -o "$work/crashes" "$fixture/crashes.c" -L"$work" -ltracee -Wl,-rpath,"$work"
gcc -O0 -o "$work/churns" "$fixture/churns.c"
gcc -O0 -o "$work/loader-lock" "$fixture/loader-lock.c"
gcc -O0 -pthread -o "$work/blocks-all" "$fixture/blocks-all.c"
gcc -O0 -pthread -o "$work/main-exits" "$fixture/main-exits.c" -L"$work" -ltracee -Wl,-rpath,"$work"
gcc -O1 -o "$work/sorts" "$fixture/sorts.c"
gcc -O0 -fPIC -shared -o "$work/libjump.so" "$fixture/jump.c"
gcc -O0 -o "$work/jumps" "$fixture/jumps.c" -L"$work" -ljump -Wl,-rpath,"$work"

export TRACEE_PLUGIN="$work/plugin.so"
trace() {
    local scope=$1 mode=(--scope "$1")
    if [ "$scope" = inline ]; then mode=(--inline); fi
    "$bin/ffi-hook-tracer" --library libtracee.so --library liblate.so --library libc.so.6 \
        --library libnothere.so.9 --symbols 'tracee_*,late_*' --symbols strlen "${mode[@]}" \
        --json "$work/$scope-%p.json" -- "$work/program" >"$work/$scope.out" 2>"$work/$scope.err"
    cat "$work/$scope.err"
}

# The three scopes of import-table tracing, then inline tracing (every call in the libraries'
# own code: the calls libtracee makes directly to a hidden and a local function too).
for scope in program main all inline; do
    echo "== tracer test: scope $scope"
    trace "$scope"
    # A --library that names no loaded object is reported, with the closest loaded ones; the
    # ones loaded (liblate.so by dlopen, after the start) are not.
    grep -q -- "--library libnothere.so.9 names none of the objects" "$work/$scope.err"
    if grep -q -- "--library liblate.so names none" "$work/$scope.err"; then
        echo "liblate.so, loaded with dlopen, was reported as loaded by no object" >&2
        exit 1
    fi
    python3 - "$work" "$scope" <<'PYTHON'
import json, sys

work, scope = sys.argv[1], sys.argv[2]
parent, child = open(f"{work}/{scope}.out").read().split()
# The program's constants (program.c).
adds, nothings, sums, depth, depths, threads, thread_adds = 1000, 777, 300, 100, 5, 4, 2500
plugin_runs, child_adds, strlens, tails, inners = 250, 42, 123, 64, 200
main_only = scope == "main"
inline = scope == "inline"
expected = {
    # tracee_tail's tail call of tracee_add goes through libtracee's own entry.
    "tracee_add": adds + threads * thread_adds + (0 if main_only else plugin_runs + tails),
    "tracee_tail": tails,
    "tracee_nothing": nothings,
    "tracee_sum": sums,
    "tracee_depth": depths * (1 if main_only else depth + 1),
    "tracee_deeper": 0 if main_only else depths * depth,
    "late_square": 0 if main_only else plugin_runs,
    "strlen": strlens,
    "tracee_inner": inners,
    # Called directly inside libtracee: seen in its own code only.
    "tracee_hidden": inners if inline else 0,
    "tracee_square": 2 * inners if inline else 0,
}
expected_child = {"tracee_add": child_adds}

def counts(pid):
    report = json.load(open(f"{work}/{scope}-{pid}.json"))
    assert report["pid"] == int(pid), report["pid"]
    return {row["name"]: row for row in report["functions"]}

failures = []
for pid, wanted in ((parent, expected), (child, expected_child)):
    seen = counts(pid)
    for name in sorted(set(wanted) | set(seen)):
        row = seen.get(name, {"calls": 0, "completed": 0})
        want = wanted.get(name, 0)
        # strlen in scope all: the Swift runtime's calls count too; inline, the C library's own.
        if scope in ("all", "inline") and name == "strlen":
            if row["calls"] < want:
                failures.append(f"pid {pid} {name}: {row['calls']} calls, expected at least {want}")
            continue
        if row["calls"] != want or row["completed"] != want:
            failures.append(f"pid {pid} {name}: {row['calls']} calls, {row['completed']} returned, expected {want}")
# Times: a function's self time is its total less the traced calls inside it, and a recursive
# call's time is counted once, in the outermost call.
rows = counts(parent)
def check(condition, message):
    if not condition:
        failures.append(message)
for name in ("tracee_add", "tracee_nothing") + (("tracee_square",) if inline else ()):
    row = rows[name]
    check(row["self_ns"] == row["total_ns"], f"{name} calls nothing traced: self {row['self_ns']} != total {row['total_ns']}")
for name, row in rows.items():
    check(row["self_ns"] <= row["total_ns"], f"{name}: self {row['self_ns']} > total {row['total_ns']}")
if not main_only:
    for name in ("tracee_depth", "tracee_deeper"):
        row = rows[name]
        # 5 outermost calls of about 100 nested ones each: the total is far below the sum of
        # every call's time (the mean times the calls).
        check(row["total_ns"] * 10 < row["mean_ns"] * row["completed"], f"{name}: recursion counted more than once: {row}")
    check(rows["tracee_tail"]["self_ns"] < rows["tracee_tail"]["total_ns"], "tracee_tail's tail call is not its child")
if inline:
    check(rows["tracee_inner"]["self_ns"] < rows["tracee_inner"]["total_ns"], "tracee_inner's calls are not its children")
if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"scope {scope}: counts right in the parent ({sum(expected.values())} calls) and the forked child")
PYTHON
done

echo "== tracer test: calls from a signal handler, also while the tracer walks the objects after dlopen and dlclose"
gcc -O0 -o "$work/signals" "$fixture/signals.c" -L"$work" -ltracee -Wl,-rpath,"$work" -ldl
"$bin/ffi-hook-tracer" --library libtracee.so --json "$work/signals.json" -- "$work/signals" \
    >"$work/signals.out" 2>"$work/signals.err"
"$bin/ffi-hook-tracer" --library libtracee.so --json "$work/signals-loads.json" -- "$work/signals" \
    "$work/liblate.so" >"$work/signals-loads.out" 2>"$work/signals-loads.err"
python3 - "$work" "$configuration" <<'PYTHON'
import json, sys

work, configuration = sys.argv[1], sys.argv[2]
for name in ("signals", "signals-loads"):
    rounds, handler_calls = map(int, open(f"{work}/{name}.out").read().split())
    report = json.load(open(f"{work}/{name}.json"))
    counted = {row["name"]: row["calls"] for row in report["functions"]}
    missed = report["missed_calls"]
    # Every loop call is counted; every handler call is counted or reported as missed (it
    # interrupted one of the tracer's blocks). The handler's calls that interrupt the tracer's
    # walk after a dlopen or a dlclose (its own work, whose calls it leaves alone) are the
    # program's: counted too.
    loop = counted.get("tracee_add") if name == "signals" else rounds
    if loop != rounds or counted.get("tracee_nothing", 0) + missed != handler_calls:
        print(f"{name}: loop {rounds}, handler {handler_calls}; counted {counted}, missed {missed}")
        sys.exit(1)
    # An optimised tracer's blocks run with nothing of the library's around them that a handler
    # could interrupt unseen (its blocks allow re-entry); an unoptimised one's Swift runtime calls do.
    if configuration == "release" and missed != 0:
        print(f"{name}, release: {missed} handler calls not counted")
        sys.exit(1)
    print(f"{name}: {rounds} rounds of the loop and {handler_calls} handler calls: {missed} reported as not counted")
PYTHON

echo "== tracer test: the tracer's library preloaded itself says what to preload, and the program runs"
# (Started from its own constructor, before the Swift runtime in it was initialized, it stopped
# the process with a fatal error at its first walk.)
FFI_HOOK_TRACER_LIBRARIES=libtracee.so TRACEE_PLUGIN="$work/plugin.so" LD_PRELOAD="$bin/libFFIHookTracer.so" \
    "$work/program" >"$work/itself.out" 2>"$work/itself.err"
grep -q "preloaded itself and traces nothing: preload libFFIHookTracerStart.so" "$work/itself.err"
if grep -q "Fatal error" "$work/itself.err"; then
    echo "the tracer's library preloaded itself stopped the program" >&2
    exit 1
fi

echo "== tracer test: processes the program starts load the tracer once a traced library is there"
# sh is the program the tracer starts; cat, its child, loads no traced library and maps only the
# small start library; the fixture program, which sh runs next (executing it in its own process
# or a child), brings libtracee and is traced.
TRACEE_PLUGIN="$work/plugin.so" "$bin/ffi-hook-tracer" --library libtracee.so -- \
    sh -c 'cat /proc/self/maps; "$0" > /dev/null' "$work/program" >"$work/start.out" 2>"$work/start.err"
grep -q "libFFIHookTracerStart.so" "$work/start.out"
if grep -q "libFFIHookTracer.so" "$work/start.out"; then
    echo "a process without a traced library loaded the tracer" >&2
    exit 1
fi
grep -Eq "ffi-hook-tracer: program \(pid [0-9]+\): [1-9][0-9,]* calls" "$work/start.err"
# A subshell is a fork of the started process, which has the tracer loaded: ending without a
# traced library, it says nothing (no empty table, no "names none of the objects"). Only the
# started bash, which runs the program as a child, reports (its empty table, the library it
# never loaded), and the program.
"$bin/ffi-hook-tracer" --library libtracee.so -- bash -c '(cat /dev/null); (true); x=$(echo y); "$0" > /dev/null' \
    "$work/program" 2>"$work/subshell.err"
if [ "$(grep -c "ffi-hook-tracer: bash (pid" "$work/subshell.err")" -gt 1 ] ||
    [ "$(grep -c "names none" "$work/subshell.err")" -gt 1 ] ||
    ! grep -Eq "ffi-hook-tracer: program \(pid [0-9]+\): [1-9]" "$work/subshell.err"; then
    echo "a subshell without a traced library reported:" >&2
    cat "$work/subshell.err" >&2
    exit 1
fi
# Subshells in a subshell: each fork is counted in the process that called it, and returned
# there; the fork a child returns from is its parent's call, not one it made (a child counted
# 1 fork and 2 returned).
mkdir -p "$work/nested"
"$bin/ffi-hook-tracer" --library libc.so.6 --symbols 'fork,__libc_fork,_Fork,waitpid' --json "$work/nested/%p.json" \
    -- bash -c '( ( /bin/true; true ); true ); true' 2>/dev/null
python3 - "$work/nested" <<'PYTHON'
import glob, json, sys

forks = 0
for path in glob.glob(f"{sys.argv[1]}/*.json"):
    for row in json.load(open(path))["functions"]:
        if row["completed"] != row["calls"]:
            sys.exit(f"{path}: {row['name']}: {row['calls']} calls, {row['completed']} returned")
        if "fork" in row["name"].lower():
            forks += row["calls"]
if forks < 3:
    sys.exit(f"only {forks} forks counted over the nested subshells")
print(f"nested subshells: {forks} forks, each returned once, in the process that made it")
PYTHON
# A JSON file named without %p is the started process's: the program, bash's child here, says
# that its calls are not in it.
"$bin/ffi-hook-tracer" --library libtracee.so --json "$work/shared.json" -- bash -c '"$0" > /dev/null; true' \
    "$work/program" 2>"$work/shared.err"
grep -Eq "the calls of program \(pid [0-9]+\) are in the table above only, not in $work/shared.json" "$work/shared.err"
# A child that counted no call has none to miss from the file: it says nothing of it.
"$bin/ffi-hook-tracer" --library libc.so.6 --symbols 'no_such_function_*' --json "$work/shared-none.json" \
    -- bash -c '/bin/true; true' 2>"$work/shared-none.err"
if grep -q "table above only" "$work/shared-none.err"; then
    echo "a child with no calls said its calls are not in the file:" >&2
    cat "$work/shared-none.err" >&2
    exit 1
fi

# Traces liblate.so in each scope and inline, running the program and arguments given: the
# counts in $work/$1-<scope>.json, the program's output in .out.
trace_late() {
    local name=$1 scope mode
    shift
    for scope in main program all inline; do
        mode=(--scope "$scope")
        if [ "$scope" = inline ]; then mode=(--inline); fi
        "$bin/ffi-hook-tracer" --library liblate.so "${mode[@]}" --json "$work/$name-$scope.json" -- "$@" \
            >"$work/$name-$scope.out" 2>"$work/$name-$scope.err"
    done
}

echo "== tracer test: a library loaded later that the executable's own import leads to, in every scope"
# weak-late.c imports late_square weakly and loads liblate.so with dlopen (RTLD_GLOBAL): its own
# PLT entry leads there from then on, so even the executable-only scope counts its calls.
gcc -O0 -o "$work/weak-late" "$fixture/weak-late.c" -ldl
trace_late weak "$work/weak-late" "$work/liblate.so"
python3 - "$work" <<'PYTHON'
import json, sys
work = sys.argv[1]
for scope in ("main", "program", "all", "inline"):
    report = json.load(open(f"{work}/weak-{scope}.json"))
    made = int(open(f"{work}/weak-{scope}.out").read())
    counted = {row["name"]: row["calls"] for row in report["functions"]}.get("late_square", 0)
    if counted != made:
        sys.exit(f"scope {scope}: late_square counted {counted} times, the program made {made} calls")
    print(f"scope {scope}: the {made} calls of late_square counted")
PYTHON

echo "== tracer test: --library by another path to the file, or by the file's own name"
# The program loads liblate.so through a symbolic link of another name: the library answers to
# any path that leads to the same file, and to the name of the file itself; a pattern with a
# slash is matched against the loader's path and against the file's.
mkdir -p "$work/links"
ln -sf ../liblate.so "$work/links/late-other.so"
ln -sf ../liblate.so "$work/links/late-alias.so"
for name in "$work/links/late-alias.so" liblate.so "$work/links/*-other.so" "$work/lib*te.so" "*/liblate.so"; do
    "$bin/ffi-hook-tracer" --library "$name" --json "$work/named.json" -- "$work/weak-late" "$work/links/late-other.so" \
        >"$work/named.out" 2>"$work/named.err"
    python3 - "$work/named.json" "$(cat "$work/named.out")" "$name" <<'PYTHON'
import json, sys
report = json.load(open(sys.argv[1]))
counted = {row["name"]: row["calls"] for row in report["functions"]}.get("late_square", 0)
if counted != int(sys.argv[2]):
    sys.exit(f"--library {sys.argv[3]}: late_square counted {counted} times, not {sys.argv[2]}")
print(f"--library {sys.argv[3]}: the library loaded as late-other.so traced")
PYTHON
done

echo "== tracer test: a library unloaded and loaded again, in every scope"
# reload.c loads plugin.so (and with it liblate.so) three times, unloading it after each run:
# each load is a new object, often at the address of the last, and is traced as one. Again with
# dlopen and dlclose called through the addresses dlsym gives, and with dlmopen into the program's
# own namespace: the loads are followed all the same.
gcc -O0 -o "$work/reload" "$fixture/reload.c" -ldl
trace_late reload "$work/reload" "$work/plugin.so" "$work/liblate.so"
trace_late reload-pointers "$work/reload" "$work/plugin.so" "$work/liblate.so" pointers
trace_late reload-dlmopen "$work/reload" "$work/plugin.so" "$work/liblate.so" dlmopen
python3 - "$work" <<'PYTHON'
import json, sys
work = sys.argv[1]
for run in ("reload", "reload-pointers", "reload-dlmopen"):
    for scope in ("main", "program", "all", "inline"):
        report = json.load(open(f"{work}/{run}-{scope}.json"))
        made, unloaded = (int(word) for word in open(f"{work}/{run}-{scope}.out").read().split())
        if not unloaded:
            sys.exit("liblate.so stayed loaded after dlclose: the test tests nothing")
        rows = {row["name"]: row["calls"] for row in report["functions"]}
        # The plugin's calls go through its own import table: not the executable's (main).
        want = 0 if scope == "main" else made
        if rows.get("late_square", 0) != want or len(rows) > (1 if want else 0):
            sys.exit(f"{run}, scope {scope}: {rows}, expected late_square {want} times in one row")
        print(f"{run}, scope {scope}: late_square counted {want} times over three loads")
PYTHON
# The tracer walks the objects after each load and unload, on the thread that called dlopen or
# dlclose: what the walk calls is its own, not the program's. reload.c never calls pthread_self,
# which the walk's locks do.
for mode in "--scope all" --inline; do
    # shellcheck disable=SC2086 # the mode is two words or one
    "$bin/ffi-hook-tracer" $mode --library libc.so.6 --symbols pthread_self --json "$work/reload-own.json" -- \
        "$work/reload" "$work/plugin.so" "$work/liblate.so" pointers >/dev/null 2>"$work/reload-own.err"
    python3 - "$work/reload-own.json" "$mode" <<'PYTHON'
import json, sys
rows = {row["name"]: row["calls"] for row in json.load(open(sys.argv[1]))["functions"]}
if rows.get("pthread_self", 0):
    sys.exit(f"{sys.argv[2]}: pthread_self counted {rows['pthread_self']} times: the tracer's own walks after loads")
print(f"{sys.argv[2]}: the tracer's walks after each load and unload counted none of their calls")
PYTHON
done

echo "== tracer test: libraries opened by bare name, found through the caller's own paths"
# bare-names.c opens libnear.so through its own DT_RUNPATH, from itself and from generated code,
# and libdeep.so through libopener.so's (dlopen, and dlmopen into a new namespace): the loader
# looks for a bare name in the paths of the object that called it, which the tracer's dlopen and
# dlmopen must leave it to see. Without the tracer, then traced in each mode: the same output, and
# deep_value's calls in the program's namespace counted.
mkdir -p "$work/bare/near" "$work/bare/deep"
echo 'int near_value(void) { return 7; }' >"$work/bare/near.c"
echo 'int deep_value(void) { return 11; }' >"$work/bare/deep.c"
gcc -O0 -fPIC -shared -o "$work/bare/near/libnear.so" "$work/bare/near.c"
cp "$work/bare/near/libnear.so" "$work/bare/near/libnear2.so"
gcc -O0 -fPIC -shared -o "$work/bare/deep/libdeep.so" "$work/bare/deep.c"
gcc -O0 -fPIC -shared -o "$work/bare/libopener.so" "$fixture/opener.c" -Wl,-rpath,'$ORIGIN/deep'
gcc -O0 -o "$work/bare/bare-names" "$fixture/bare-names.c" -L"$work/bare" -lopener -Wl,-rpath,'$ORIGIN/near:$ORIGIN'
"$work/bare/bare-names" 25 >"$work/bare/plain.out"
for mode in "--scope all" --inline; do
    # shellcheck disable=SC2086 # the mode is two words or one
    if ! "$bin/ffi-hook-tracer" --library libdeep.so $mode --json "$work/bare/traced.json" -- "$work/bare/bare-names" 25 \
        >"$work/bare/traced.out" 2>"$work/bare/traced.err" ||
        ! cmp -s "$work/bare/plain.out" "$work/bare/traced.out"; then
        echo "traced ($mode), bare-names opened its libraries differently:" >&2
        cat "$work/bare/traced.out" "$work/bare/traced.err" >&2
        exit 1
    fi
    python3 - "$work/bare/traced.json" "$(cat "$work/bare/plain.out")" "$mode" <<'PYTHON'
import json, sys
report = json.load(open(sys.argv[1]))
counted = {row["name"]: row["calls"] for row in report["functions"]}.get("deep_value", 0)
# Import-table tracing sees none: deep_value is called through dlsym's address.
want = int(sys.argv[2]) if sys.argv[3] == "--inline" else 0
if counted != want:
    sys.exit(f"{sys.argv[3]}: deep_value counted {counted} times, not {want}")
print(f"{sys.argv[3]}: every library opened by bare name, deep_value counted {counted} times")
PYTHON
done

echo "== tracer test: a misspelt --library"
"$bin/ffi-hook-tracer" --library libtrace.so -- "$work/program" >"$work/typo.out" 2>"$work/typo.err"
cat "$work/typo.err" | grep -- "--library" || true
grep -q -- "--library libtrace.so names none of the objects this process loaded, so none of its calls were traced; the closest loaded: libtracee.so" "$work/typo.err"
# What only the tracer brought is not suggested: the tracer's libraries, the Swift runtime, libffi.
"$bin/ffi-hook-tracer" --library libFFIHookTracr.so -- "$work/program" >"$work/own-typo.out" 2>"$work/own-typo.err"
if grep -- "--library libFFIHookTracr.so" "$work/own-typo.err" | sed 's/.*closest loaded://' |
    grep -q -e FFIHook -e libswift -e libffi; then
    echo "objects only the tracer brought were suggested:" >&2
    grep -- "--library" "$work/own-typo.err" >&2
    exit 1
fi
# A library only the tracer needs (libffi) is none of the program's: with the tracer loaded at
# the start (--json) as without it, the name answers to no object.
ffi=$(ldd "$bin/libFFIHookTracer.so" | grep -o 'libffi\.so\.[0-9]*' | head -n 1)
for json in "" "--json $work/tracer-only.json"; do
    # shellcheck disable=SC2086
    "$bin/ffi-hook-tracer" --library "$ffi" $json -- "$work/program" >"$work/tracer-only.out" 2>"$work/tracer-only.err"
    if ! grep -q -- "--library $ffi names none of the objects this process loaded" "$work/tracer-only.err"; then
        echo "--library $ffi ${json:+(with --json) }answered to an object only the tracer brought:" >&2
        cat "$work/tracer-only.err" >&2
        exit 1
    fi
done
# The started process that loads no traced library makes its report without the tracer (which
# it would load only to say so, about 3 ms): the same words as the tracer's own, which --json
# makes it load at start, on every way of ending: exit, _exit (dash), a signal, abort with the
# program's handler, standard error closed; the names repeated and spaced as given.
light_report() {
    local name=$1
    shift
    local light=0 full=0
    "$bin/ffi-hook-tracer" --library libtrace.so --library ' libzz ' --library libtrace.so -- "$@" \
        >"$work/light-$name.out" 2>"$work/light-$name.err" || light=$?
    "$bin/ffi-hook-tracer" --library libtrace.so --library ' libzz ' --library libtrace.so \
        --json "$work/light-$name.json" -- "$@" >"$work/full-$name.out" 2>"$work/full-$name.err" || full=$?
    sed -E 's/pid [0-9]+/pid N/' "$work/light-$name.err" >"$work/light-$name.said"
    sed -E 's/pid [0-9]+/pid N/' "$work/full-$name.err" >"$work/full-$name.said"
    if [ "$light" -ne "$full" ] || ! cmp -s "$work/light-$name.said" "$work/full-$name.said" ||
        [ "$(grep -c -- "names none of the objects" "$work/light-$name.said")" -ne 3 ] ||
        ! grep -q "0 calls of 0 functions" "$work/light-$name.said"; then
        echo "$name: the report without the tracer (status $light) differs from the tracer's (status $full):" >&2
        diff "$work/light-$name.said" "$work/full-$name.said" >&2 || true
        exit 1
    fi
    # (The fixture program prints process IDs; the others print the same either way.)
    if [ "$name" != exit ] && ! cmp -s "$work/light-$name.out" "$work/full-$name.out"; then
        echo "$name: the program's own output differs without the tracer loaded" >&2
        exit 1
    fi
}
TRACEE_PLUGIN="$work/plugin.so" light_report exit "$work/program"
light_report quick-exit sh -c 'exit 3'
light_report signal sh -c 'kill -TERM $$'
# Signals whose default action ends the process beyond the classic ones (SIGSTKFLT, SIGIO,
# SIGPWR): they ended it with no report. (The real-time signals still do: see start.c.)
light_report power sh -c 'kill -PWR $$'
light_report stack-fault sh -c 'kill -16 $$'
light_report input sh -c 'kill -IO $$'
light_report abort "$work/crashes" aborts handled
light_report closed-output sh -c 'exec 2>&-; "$0" >/dev/null' "$work/program"
grep -q "the closest loaded: libtracee.so" "$work/light-exit.said"
grep -q "ended by SIGTERM" "$work/light-signal.said"
grep -q "ended by SIGPWR" "$work/light-power.said"
grep -q "ended by SIGSTKFLT" "$work/light-stack-fault.said"
grep -q "ended by SIGPOLL" "$work/light-input.said"
grep -q "ended by SIGABRT" "$work/light-abort.said"
# Without the tracer loaded: its library is not among the process's objects (and is with --json).
"$bin/ffi-hook-tracer" --library libtrace.so -- cat /proc/self/maps >"$work/light-maps.out" 2>/dev/null
"$bin/ffi-hook-tracer" --library libtrace.so --json "$work/light-maps.json" -- cat /proc/self/maps \
    >"$work/full-maps.out" 2>/dev/null
if grep -q "libFFIHookTracer.so" "$work/light-maps.out" || ! grep -q "libFFIHookTracer.so" "$work/full-maps.out"; then
    echo "the started process loaded the tracer without a traced library, or did not with --json" >&2
    exit 1
fi
echo "a started process without a traced library: the tracer's report, without the tracer"
# The tracer loaded later into that process, at the dlopen of a traced library: while another
# thread forks (children that exit: the fork copied the load under way, whose lock hung them),
# after the program emptied its environment (the tracer reads the settings the process started
# with), and a handler on an 8 KiB alternate stack that ends it with _exit (the report has a stack
# of its own). A library whose constructor ends the process as it loads a traced one: the
# traced one is loaded, so no line says that nothing answers to its name.
gcc -O0 -o "$work/takeover" "$fixture/takeover.c" -lpthread -ldl
gcc -O0 -fPIC -shared -o "$work/libdies.so" "$fixture/dies.c" -L"$work" -ltracee -Wl,-rpath,"$work"
# (Each line: the mode, plugin_run's count, the table's count, the rounds.)
while read -r mode count shown rounds; do
    for round in $(seq "$rounds"); do
        status=0
        timeout 60 "$bin/ffi-hook-tracer" --library liblate.so -- "$work/takeover" "$mode" "$work/plugin.so" "$count" \
            >"$work/takeover.out" 2>"$work/takeover.err" || status=$?
        if [ "$status" -ne 0 ] || grep -q "forked while" "$work/takeover.err" ||
            ! grep -q "^ffi-hook-tracer: takeover (pid [0-9]*): $shown calls of 1 function" "$work/takeover.err"; then
            echo "takeover $mode, round $round: status $status" >&2
            cat "$work/takeover.err" >&2
            exit 1
        fi
    done
done <<'MODES'
forks 1000 1,000 5
clears 1000 1,000 1
finalizer 10 10 1
MODES
light_report altstack "$work/takeover" altstack
grep -q "^ffi-hook-tracer: takeover (pid N): 0 calls" "$work/light-altstack.said"
status=0
"$bin/ffi-hook-tracer" --library libtracee.so -- "$work/takeover" loads "$work/libdies.so" \
    >"$work/dies.out" 2>"$work/dies.err" || status=$?
if [ "$status" -ne 143 ] || grep -q "names none" "$work/dies.err" || ! grep -q "ended by SIGTERM" "$work/dies.err"; then
    echo "a constructor that ends the process as a traced library loads: status $status" >&2
    cat "$work/dies.err" >&2
    exit 1
fi
# Eighty names that nothing answers to: a line for each, then the table (more than 8 KiB).
"$bin/ffi-hook-tracer" $(for name in $(seq 80); do printf -- "--library libnone%s.so " "$name"; done) -- true \
    2>"$work/many.err"
if [ "$(grep -c "names none" "$work/many.err")" -ne 80 ] || ! grep -q "^function  calls" "$work/many.err"; then
    echo "eighty names that nothing answers to:" >&2
    tail -3 "$work/many.err" >&2
    exit 1
fi
echo "the tracer loaded later: forks meanwhile, an emptied environment, a finalizer's load, _exit on an 8 KiB alternate stack, a load that ends the process; a long report"
# A program linked statically runs no loader: nothing is preloaded into it, and the wrapper says so.
if printf 'int main(void) { return 0; }\n' | gcc -static -x c -o "$work/static-true" - 2>/dev/null; then
    "$bin/ffi-hook-tracer" --library libc.so.6 -- "$work/static-true" 2>"$work/static-true.err"
    grep -q "static-true is linked statically: no loader runs in it" "$work/static-true.err"
    echo "a statically linked program: named as one the tracer cannot enter"
fi
# A shared library run as the program (it has no interpreter either, and no entry point) is
# named as a library, not as a static program; it runs (and crashes) as it would untraced.
"$bin/ffi-hook-tracer" --library libc.so.6 -- "$work/libtracee.so" 2>"$work/library-run.err" || true
grep -q "libtracee.so is a shared library with no entry point, not a program" "$work/library-run.err"

echo "== tracer test: a program whose main thread ends with pthread_exit"
# The process ends when its last thread does (the C library's exit(0)), not kept alive by the
# tracer's report thread (it was, for ever); the report counts both threads' calls and names
# the program (the main thread's /proc links are gone by then).
status=0
timeout -s KILL 20 "$bin/ffi-hook-tracer" --library libtracee.so -- "$work/main-exits" \
    >"$work/main-exits.out" 2>"$work/main-exits.err" || status=$?
if [ "$status" -ne 0 ] || ! grep -q "^worker made 1000 calls$" "$work/main-exits.out" ||
    ! grep -Eq "^ffi-hook-tracer: main-exits \(pid [0-9]+\): 1,001 calls of 1 function" "$work/main-exits.err"; then
    echo "main thread ended by pthread_exit: status $status (137: it hung)" >&2
    cat "$work/main-exits.out" "$work/main-exits.err" >&2
    exit 1
fi
echo "main thread ended by pthread_exit: the process ended with status 0 after its last thread, 1,001 calls reported"

echo "== tracer test: a program that ends with _exit or _Exit"
# No atexit handler runs: the start library's _exit and _Exit have the report made first, with
# the program's status. A vfork child's _exit (on its parent's memory) makes none. dash, the
# Debian shell, always ends with _exit: its calls are reported (they were lost).
for mode in quick-exit quick-Exit quick-quick; do
    status=0
    timeout -s KILL 20 "$bin/ffi-hook-tracer" --library libtracee.so -- "$work/crashes" "$mode" \
        >/dev/null 2>"$work/quick-exit.err" || status=$?
    if [ "$status" -ne 7 ] || ! grep -Eq "^ffi-hook-tracer: crashes \(pid [0-9]+\): 101 calls of 1 function" "$work/quick-exit.err"; then
        echo "$mode: status $status" >&2
        cat "$work/quick-exit.err" >&2
        exit 1
    fi
done
status=0
timeout -s KILL 20 "$bin/ffi-hook-tracer" --library libtracee.so -- "$work/crashes" vfork-exit \
    >"$work/vfork-exit.out" 2>"$work/vfork-exit.err" || status=$?
if [ "$status" -ne 0 ] || ! grep -qx "child 3" "$work/vfork-exit.out" ||
    [ "$(grep -c "^ffi-hook-tracer: crashes" "$work/vfork-exit.err")" -ne 1 ] ||
    ! grep -Eq "^ffi-hook-tracer: crashes \(pid [0-9]+\): 11 calls of 1 function" "$work/vfork-exit.err"; then
    echo "a vfork child's _exit: status $status" >&2
    cat "$work/vfork-exit.out" "$work/vfork-exit.err" >&2
    exit 1
fi
if [ "$(readlink -f /bin/sh)" = "$(readlink -f "$(command -v dash 2>/dev/null || echo /nonexistent)")" ]; then
    status=0
    "$bin/ffi-hook-tracer" --library libc.so.6 --symbols write -- sh -c 'echo one; echo two; exit 3' \
        >/dev/null 2>"$work/dash.err" || status=$?
    if [ "$status" -ne 3 ] || ! grep -Eq "^ffi-hook-tracer: dash \(pid [0-9]+\): 2 calls of 1 function" "$work/dash.err"; then
        echo "dash ending with _exit: status $status" >&2
        cat "$work/dash.err" >&2
        exit 1
    fi
fi
# The report thread's descriptor is the tracer's own: a program that puts a file of its own at
# a low number (fd 3 was the tracer's eventfd, which dash's `exec 3>` replaced: 8 bytes were
# written into the file and the report given up after 3 s) or at bash's flock idiom's 200, or
# at 100 (where the tracer kept its duplicate of standard error: bash's `exec 100>` went there).
for shell_command in "sh -c 'exec 3>\"$work/fd.txt\"; echo hi >&3; exit 4'" \
    "bash -c 'exec 200>\"$work/fd.txt\"; echo hi >&200; exit 4'" \
    "bash -c 'exec 100>\"$work/fd.txt\"; echo hi >&100; exit 4'"; do
    rm -f "$work/fd.txt"
    status=0
    SECONDS=0
    eval "timeout -s KILL 20 \"\$bin/ffi-hook-tracer\" --library libc.so.6 --symbols malloc -- $shell_command" \
        2>"$work/fd.err" || status=$?
    if [ "$status" -ne 4 ] || [ "$(cat "$work/fd.txt")" != hi ] || [ "$(wc -c <"$work/fd.txt")" -ne 3 ] ||
        [ "$SECONDS" -ge 3 ] || ! grep -Eq "^ffi-hook-tracer: (dash|bash) \(pid [0-9]+\): [0-9,]+ calls" "$work/fd.err"; then
        echo "$shell_command: status $status, $SECONDS s, the file:" >&2
        od -c "$work/fd.txt" >&2
        cat "$work/fd.err" >&2
        exit 1
    fi
done
echo "_exit, _Exit and quick_exit: the report first, status 7; a vfork child's _exit makes none; dash's calls reported; files at fds 3, 100 and 200 the program's own"

echo "== tracer test: a program that executes another"
# The image an exec replaces prints the table of its calls first (they were lost); the new image
# reports its own. An exec that fails: the table before it, then one of the calls after it.
for case in "exec-self $work/crashes" "exec-fails /nonexistent/program"; do
    read -r mode executed <<<"$case"
    status=0
    "$bin/ffi-hook-tracer" --library libtracee.so -- "$work/crashes" "$mode" >/dev/null 2>"$work/exec.err" || status=$?
    if [ "$status" -ne 0 ] ||
        ! grep -Eq "^ffi-hook-tracer: crashes \(pid [0-9]+, before it executed $executed\): 11 calls of 1 function" "$work/exec.err" ||
        ! grep -Eq "^ffi-hook-tracer: crashes \(pid [0-9]+\): 5 calls of 1 function" "$work/exec.err"; then
        echo "$mode: status $status" >&2
        cat "$work/exec.err" >&2
        exit 1
    fi
done
echo "an exec: the table of the calls before it, then the new image's; after a failed one, the calls after it"

echo "== tracer test: a program that closes its standard error at exit, or reuses descriptors"
# The report goes to the standard error the program started with: coreutils close it at exit
# (the report was lost), and a program that takes the tracer's duplicate's number for a file of
# its own must not find the report in it.
for mode in close reuse; do
    "$bin/ffi-hook-tracer" --library libtracee.so -- "$work/closes-output" "$mode" "$work/own-$mode.txt" \
        >"$work/closes-$mode.out" 2>"$work/closes-$mode.err"
    if ! grep -Eq "^ *tracee_add +321 " "$work/closes-$mode.err"; then
        echo "closes-output $mode: the report did not reach standard error" >&2
        cat "$work/closes-$mode.err" >&2
        exit 1
    fi
    if [ -s "$work/own-$mode.txt" ]; then
        echo "closes-output $mode: the report was written to the program's own file" >&2
        exit 1
    fi
done
echo "standard error closed or its duplicate's number reused at exit: the report reached standard error"

echo "== tracer test: children that run on the program's memory (vfork, posix_spawn) until they exec"
# A vfork child, and the child posix_spawn runs, share the program's memory (thread-local
# storage included) until they exec: their calls (the vfork child's tracee_add and execl through
# the program's import table; inline, the C library's own dup2 and execve in posix_spawn's
# child) are not the program's, and the program's later calls are nested in none of them. vfork
# returns twice: its call is counted at once, and logged so.
for mode in vfork spawn; do
    for how in import inline; do
        options=(--library libtracee.so --library libc.so.6)
        if [ "$how" = inline ]; then options+=(--inline); fi
        "$bin/ffi-hook-tracer" "${options[@]}" --symbols 'tracee_*,vfork,execl,waitpid,posix_spawn,dup2,execve' \
            --json "$work/spawn-$mode-$how.json" --folded "$work/spawn-$mode-$how.folded" \
            --log "$work/spawn-$mode-$how.log" -- "$work/spawner" "$mode" >"$work/spawn-$mode-$how.out" \
            2>"$work/spawn-$mode-$how.err"
        python3 - "$work" "$mode" "$how" <<'PYTHON'
import json, sys
work, mode, how = sys.argv[1:]
name = f"{work}/spawn-{mode}-{how}"
rows = {row["name"]: row for row in json.load(open(f"{name}.json"))["functions"]}
expected = {"tracee_add": 100, "tracee_nothing": 1, "waitpid": 1, "execl": 0, "execve": 0, "dup2": 0,
            "vfork": 1 if mode == "vfork" else 0, "posix_spawn": 1 if mode == "spawn" else 0}
failures = []
for function, calls in expected.items():
    row = rows.get(function, {"calls": 0, "completed": 0})
    if row["calls"] != calls or row["completed"] != calls:
        failures.append(f"{function}: {row['calls']} calls, {row['completed']} returned, expected {calls}")
for line in open(f"{name}.folded"):
    stack = line.rsplit(" ", 1)[0]
    if ";" in stack and stack.split(";")[-1] in ("tracee_add", "tracee_nothing"):
        failures.append(f"folded stack {stack}: the program's later call nested inside another")
log = open(f"{name}.log").read().splitlines()
if any(line.endswith("<no return>") for line in log):
    failures.append("a call logged <no return>: " + next(line for line in log if line.endswith("<no return>")))
if mode == "vfork" and not any(" vfork(" in line and line.endswith("<returns twice>") for line in log):
    failures.append("vfork not logged as returning twice")
if failures:
    sys.exit(f"{mode} {how}:\n" + "\n".join(failures))
print(f"{mode} {how}: only the program's calls counted, none nested in the child's, the log without <no return>")
PYTHON
    done
done

echo "== tracer test: a reader that goes away, relative paths, the tracer's own start"
# The table written to a pipe whose reader has gone: no SIGPIPE ends the program, and the files
# are written. Relative file names are the tracer's directory's, wherever the program goes
# (cd). The events files hold the calls the table counts (not the start's own on its thread).
rm -f "$work"/pipe-*.folded
status=0
"$bin/ffi-hook-tracer" --library libtracee.so --events 10 --folded "$work/pipe-%p.folded" -- "$work/closes-output" reuse \
    "$work/own-pipe.txt" 2>&1 >/dev/null | head -1 >/dev/null || status=$?
pipe_status=${PIPESTATUS[0]}
if [ "$pipe_status" -ne 0 ] || ! ls "$work"/pipe-*.folded >/dev/null 2>&1; then
    echo "a reader gone: the traced program exited with $pipe_status, folded stacks written: $(ls "$work"/pipe-*.folded 2>/dev/null)" >&2
    exit 1
fi
mkdir -p "$work/elsewhere"
(cd "$work" && "$bin/ffi-hook-tracer" --library libc.so.6 --symbols 'strlen,malloc' --json relative-%p.json \
    --chrome-trace relative-%p.trace -- bash -c 'cd elsewhere && ls >/dev/null' 2>/dev/null)
if ls "$work"/elsewhere/relative-* >/dev/null 2>&1 || ! ls "$work"/relative-*.json >/dev/null 2>&1; then
    echo "relative file names followed the program's cd: $(cd "$work" && ls elsewhere relative-* 2>&1 | tr '\n' ' ')" >&2
    exit 1
fi
python3 - "$work" <<'PYTHON'
import glob, json, sys
work = sys.argv[1]
for name in glob.glob(f"{work}/relative-*.json"):
    counts = {row["name"]: row["calls"] for row in json.load(open(name))["functions"]}
    events = json.load(open(name[:-5] + ".trace"))
    events = events["traceEvents"] if isinstance(events, dict) else events
    begins = {}
    for event in events:
        if event.get("ph") == "B":
            begins[event["name"]] = begins.get(event["name"], 0) + 1
    for function in set(counts) | set(begins):
        if begins.get(function, 0) != counts.get(function, 0):
            sys.exit(f"{name}: {function}: {counts.get(function, 0)} calls in the table, {begins.get(function, 0)} in the trace")
print("events files hold the calls the table counts; relative names stay in the tracer's directory")
PYTHON
status=0
"$bin/ffi-hook-tracer" --library libc.so.6 --pid $$ --log "$work/joined.log" 2>"$work/pid-log.err" || status=$?
[ "$status" -eq 64 ] && grep -q -- "--log does not work with --pid" "$work/pid-log.err"
echo "a reader gone: the program exits 0 and the files are written; --log with --pid refused"

echo "== tracer test: the start library brings no Swift runtime; a traced program's crash is its own"
# Every process a traced program starts preloads the start library: it must need the C library
# alone (the Swift runtime it was linked with cost each process about 1.7 ms). Once the tracer
# is loaded, the Swift runtime it brings must not take over the program's crashes (it printed
# a Swift crash report for a C program's SIGSEGV).
if readelf -d "$bin/libFFIHookTracerStart.so" | grep NEEDED | grep -qv -e libc.so -e ld-linux; then
    echo "libFFIHookTracerStart.so needs more than the C library:" >&2
    readelf -d "$bin/libFFIHookTracerStart.so" | grep NEEDED >&2
    exit 1
fi
for command in "$work/crashes" "sh -c $work/crashes"; do
    status=0
    "$bin/ffi-hook-tracer" --library libtracee.so -- $command >"$work/crash.out" 2>"$work/crash.err" || status=$?
    # The report is made before the signal ends the process, which dies of it as it would have;
    # no Swift crash report. (A shell that runs the program as its child says "Segmentation
    # fault" itself.)
    if [ "$status" -ne 139 ] || ! grep -Eq "^ffi-hook-tracer: crashes \(pid [0-9]+, ended by SIGSEGV\): 1 call of 1 function" "$work/crash.err" ||
        grep -Eq "Program crashed|Backtrace|Fatal error" "$work/crash.err"; then
        echo "$command crashed under the tracer with status $status and this on standard error:" >&2
        head -5 "$work/crash.err" >&2
        exit 1
    fi
done
echo "the start library needs only the C library; a traced program's SIGSEGV ends it with status 139, after the report"

echo "== tracer test: a signal that ends the program, the report made first"
# SIGTERM, whose action the program leaves at the default: status 143, and the table and the
# JSON count the calls made up to it (the program writes a line after each; the first call
# comes before the loop, and the signal may come between a call and its line).
"$bin/ffi-hook-tracer" --library libtracee.so --json "$work/term.json" -- "$work/crashes" count \
    >"$work/term.out" 2>"$work/term.err" &
term_pid=$!
sleep 0.5
kill -TERM "$term_pid"
status=0
wait "$term_pid" || status=$?
python3 - "$work" "$status" <<'PYTHON'
import json, re, sys

work, status = sys.argv[1], int(sys.argv[2])
err = open(f"{work}/term.err").read()
lines = open(f"{work}/term.out").read().count("call\n")
heading = re.search(r"^ffi-hook-tracer: crashes \(pid \d+, ended by SIGTERM\): ([\d,]+) calls? of 1 function", err, re.M)
if status != 143 or not heading:
    sys.exit(f"SIGTERM: status {status}, standard error:\n{err}")
table = int(heading.group(1).replace(",", ""))
report = json.load(open(f"{work}/term.json"))
counted = {row["name"]: row["calls"] for row in report["functions"]}
if report["ended_by"] != "SIGTERM":
    sys.exit(f"SIGTERM: the JSON says it ended by {report['ended_by']}")
if not lines + 1 <= table <= lines + 2 or counted.get("tracee_add") != table or lines < 10:
    sys.exit(f"SIGTERM: {lines} lines written, {table} calls in the table, {counted} in the JSON")
print(f"SIGTERM: status 143, {table} calls in the table and the JSON for {lines} lines the program wrote")
PYTHON
# Waits up to five seconds for a line that reads $2 in the file $1; without it, the test fails.
wait_for_line() {
    for _ in $(seq 100); do
        grep -qx "$2" "$1" && return 0
        sleep 0.05
    done
    echo "no line \"$2\" in $1:" >&2
    cat "$1" >&2
    exit 1
}

# Waits for the process `$1`, its status in `status`; a watchdog ends it after 20 s (137). The
# watchdog goes by SIGKILL: a subshell sent SIGTERM before it has reset the traps it inherits
# runs this script's EXIT trap, which deletes the work directory.
wait_watched() {
    (sleep 20 && kill -KILL "$1" 2>/dev/null) &
    local watchdog=$!
    status=0
    wait "$1" || status=$?
    kill -KILL "$watchdog" 2>/dev/null || true
}
# A signal that finds the program inside the allocator (its lock held, which the report needs)
# comes again once the program has left it: the report, then the death by the signal (a
# process that waited for ever before). Ten times, at different moments.
for attempt in 1 2 3 4 5 6 7 8 9 10; do
    "$bin/ffi-hook-tracer" --library libc.so.6 --symbols write -- "$work/churns" >/dev/null 2>"$work/churn.err" &
    churn_pid=$!
    # The wrapper execs the program, which keeps its process ID: once it runs, and its tracer
    # has had time to start, the signal; a watchdog ends a process that hangs.
    for _ in $(seq 100); do
        [ "$(cat "/proc/$churn_pid/comm" 2>/dev/null)" = churns ] && break
        sleep 0.05
    done
    sleep "$(printf '0.%02d' $((30 + attempt * 5)))"
    kill -TERM "$churn_pid"
    wait_watched "$churn_pid"
    if [ "$status" -ne 143 ] || ! grep -q "ended by SIGTERM): 0 calls of 0 functions" "$work/churn.err"; then
        echo "SIGTERM during malloc and free, attempt $attempt: status $status (137: it hung)" >&2
        cat "$work/churn.err" >&2
        exit 1
    fi
done
echo "SIGTERM during malloc and free: the report and status 143, ten times of ten"
# A signal that finds the program inside dlopen or dlclose (the loader's lock held, which the
# report needs), in a loop of them that spends nearly all its time in the loader and the
# tracer's attach to libz: taken when the call returns. Sent again instead, it was found there
# again (a signal is delivered where a system call returns), or in the C library's mprotect
# called by the attach (the tracer's lock held), and 3 or 4 reports in 10 were lost.
for attempt in 1 2 3 4 5 6 7 8; do
    : >"$work/reloads.out"
    "$bin/ffi-hook-tracer" --library libz.so.1 -- "$work/crashes" reloads libz.so.1 \
        >"$work/reloads.out" 2>"$work/reloads.err" &
    reloads_pid=$!
    for _ in $(seq 100); do
        [ -s "$work/reloads.out" ] && break
        sleep 0.05
    done
    sleep "$(printf '0.%02d' $((20 + attempt * 7)))"
    kill -TERM "$(head -1 "$work/reloads.out")"
    wait_watched "$reloads_pid"
    if [ "$status" -ne 143 ] || ! grep -q "ended by SIGTERM): 0 calls of 0 functions" "$work/reloads.err"; then
        echo "SIGTERM during dlopen and dlclose, attempt $attempt: status $status" >&2
        cat "$work/reloads.err" >&2
        exit 1
    fi
done
echo "SIGTERM during dlopen and dlclose: the report and status 143, eight times of eight"
# A program that loads and unloads a traced library in a loop: the groups attached to each
# load (libz calls its own exports through its table; inline, its code) go at its unload. They
# were kept for the life of the process: 10.7 KB of heap a cycle, 157 KB inline. What stays is
# the tracer's tables growing now and then, not a share of each cycle: 2.9, 3.9 and 5.4 KB after
# 60, 240 and 960 cycles through the import tables, 1.2 to 6.8 KB after 60 inline and 5.6 to
# 7.7 KB after 240, so that one stretch of cycles went over the limit about once in 30 runs.
# Two stretches are measured: a share of each cycle shows in both, a table's growth in one.
for mode in imports inline; do
    flag=$([ "$mode" = inline ] && echo --inline || true)
    cycles=$([ "$mode" = inline ] && echo 100 || echo 200)
    # shellcheck disable=SC2086
    "$bin/ffi-hook-tracer" $flag --library libz.so.1 -- "$work/crashes" cycles libz.so.1 "$cycles" \
        >"$work/cycles.out" 2>"$work/cycles.err"
    read -r first second _ <"$work/cycles.out"
    if [ "$first" -gt $((cycles * 100)) ] && [ "$second" -gt $((cycles * 100)) ]; then
        echo "$mode: two stretches of $cycles loads and unloads of a traced library each left more than" \
            "$((cycles * 100)) bytes of heap in use: $first and $second" >&2
        cat "$work/cycles.err" >&2
        exit 1
    fi
    echo "$mode: two stretches of $cycles loads and unloads of a traced library left $first and $second bytes of heap in use"
done
# Python's ctypes makes a callback through libffi, which the tracer's own library uses too:
# traced in libffi's own code (--inline), the calls are the program's alone (the hooking
# library's walk after each dlopen prepared a closure of its own, which was counted), the same
# as through the import tables.
python=$(readlink -f /usr/bin/python3)
for mode in imports inline; do
    flag=$([ "$mode" = inline ] && echo --inline || true)
    # shellcheck disable=SC2086
    "$bin/ffi-hook-tracer" --library 'libffi.so*' $flag --json "$work/ctypes-$mode.json" -- "$python" -c \
        'import ctypes; print(ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 3)())' >"$work/ctypes-$mode.out" 2>/dev/null
done
python3 - "$work" <<'PYTHON'
import json, sys
work = sys.argv[1]
counts = {mode: {row["name"]: row["calls"] for row in json.load(open(f"{work}/ctypes-{mode}.json"))["functions"]}
          for mode in ("imports", "inline")}
if counts["imports"] != counts["inline"] or counts["inline"].get("ffi_prep_closure_loc") != 1:
    sys.exit(f"libffi's calls from Python's ctypes: {counts}")
print(f"libffi's calls from Python's ctypes, inline as through the import tables: {counts['inline']}")
PYTHON
# A library loaded only in a link-map namespace of its own (dlmopen), which the walks do not
# see: the error says so, rather than that nothing answers to the name.
gcc -O0 -o "$work/namespaces" "$fixture/namespaces.c"
"$bin/ffi-hook-tracer" --library libz.so.1 -- "$work/namespaces" >"$work/namespaces.out" 2>"$work/namespaces.err"
if [ "$(cat "$work/namespaces.out")" != 352441c2 ] ||
    ! grep -q "^ffi-hook-tracer: error: --library libz.so.1 names only objects loaded in another link-map namespace (by dlmopen), which the tracer does not trace: .*/libz.so.1$" "$work/namespaces.err"; then
    echo "a library loaded by dlmopen alone:" >&2
    cat "$work/namespaces.out" "$work/namespaces.err" >&2
    exit 1
fi
echo "a library loaded by dlmopen alone is named as in another namespace"
# SIGPIPE in the middle of a write traced in the C library's own code (--inline): what the
# handler calls while it waits for the report (write, clock_gettime, nanosleep) is not counted
# as the program's, nested in the interrupted write (the write counted one call too many, its
# self time above its total, and nanosleep and clock_gettime appeared), nor what the C library
# calls as it starts the tracer's report thread (__ctype_init). The JSON's scope is "inline",
# where no scope applies.
status=0
"$bin/ffi-hook-tracer" --library libc.so.6 --inline --symbols 'write,nanosleep,clock_gettime,clock_nanosleep,__ctype_init' \
    --json "$work/pipe.json" -- "$work/crashes" writes 2>"$work/pipe.err" | head -1 >/dev/null || status=$?
if [ "$status" -ne 141 ]; then
    echo "SIGPIPE during a write traced inline: status $status" >&2
    cat "$work/pipe.err" >&2
    exit 1
fi
python3 - "$work/pipe.json" <<'PYTHON'
import json, sys
report = json.load(open(sys.argv[1]))
rows = {row["name"]: row for row in report["functions"]}
write = rows.get("write")
if report.get("ended_by") != "SIGPIPE" or report.get("scope") != "inline" or set(rows) != {"write"} or write["calls"] != write["completed"] + 1 or \
        write["self_ns"] > write["total_ns"]:
    sys.exit(f"SIGPIPE during a write traced inline: {report}")
print(f"SIGPIPE during a write traced inline: {write['calls']} calls, one cut off, self time within total, nothing else")
PYTHON
# Handlers set to run once (SA_RESETHAND; sysv_signal, which programs built for strict ISO C
# call for signal): the program reads back what it would untraced, and the signal that comes
# after the handler ran, its action now the default, ends the process with the report.
status=0
"$work/crashes" one-shot >"$work/one-shot.plain" 2>/dev/null || status=$?
traced_status=0
"$bin/ffi-hook-tracer" --library libtracee.so -- "$work/crashes" one-shot >"$work/one-shot.traced" \
    2>"$work/one-shot.err" || traced_status=$?
if [ "$status" -ne 143 ] || [ "$traced_status" -ne 143 ] || ! cmp -s "$work/one-shot.plain" "$work/one-shot.traced" ||
    ! grep -Eq "^ffi-hook-tracer: crashes \(pid [0-9]+, ended by SIGTERM\): 11 calls of 1 function" "$work/one-shot.err"; then
    echo "handlers that run once: status $status untraced, $traced_status traced" >&2
    diff "$work/one-shot.plain" "$work/one-shot.traced" >&2
    cat "$work/one-shot.err" >&2
    exit 1
fi
echo "handlers that run once read back as untraced, and the signal after them was reported"
# abort() with a SIGABRT handler of the program's that returns, or SIGABRT ignored: the C
# library puts the default back past the tracer's sigaction and raises again, which ended the
# process without a report. The handler runs once, as untraced, and the report comes.
for disposition in handled ignored; do
    status=0
    "$work/crashes" aborts "$disposition" >"$work/aborts.plain" 2>/dev/null || status=$?
    traced_status=0
    "$bin/ffi-hook-tracer" --library libtracee.so -- "$work/crashes" aborts "$disposition" >"$work/aborts.traced" \
        2>"$work/aborts.err" || traced_status=$?
    if [ "$status" -ne 134 ] || [ "$traced_status" -ne 134 ] || ! cmp -s "$work/aborts.plain" "$work/aborts.traced" ||
        ! grep -Eq "^ffi-hook-tracer: crashes \(pid [0-9]+, ended by SIGABRT\): 11 calls of 1 function" \
            "$work/aborts.err"; then
        echo "abort() with SIGABRT $disposition: status $status untraced, $traced_status traced" >&2
        diff "$work/aborts.plain" "$work/aborts.traced" >&2
        cat "$work/aborts.err" >&2
        exit 1
    fi
done
echo "abort() with SIGABRT handled or ignored: status 134 and the report, the handler run once"
# SWIFT_BACKTRACE set for Swift programs, with the backtracer's path: the Swift runtime inside the
# tracer does not take over a C program's crash (no Swift crash report, no message of the
# runtime's), and the program dies of its signal after the tracer's report.
backtracer="$(dirname "$(command -v swiftc)")/../libexec/swift/linux/swift-backtrace"
if [ -x "$backtracer" ]; then
    status=0
    SWIFT_BACKTRACE="enable=yes,swift-backtrace=$backtracer" timeout 60 "$bin/ffi-hook-tracer" --library libtracee.so \
        -- "$work/crashes" segv >/dev/null 2>"$work/segv.err" || status=$?
    if [ "$status" -ne 139 ] || grep -Eiq "crashed|swift runtime|backtrac" "$work/segv.err" ||
        ! grep -Eq "^ffi-hook-tracer: crashes \(pid [0-9]+, ended by SIGSEGV\): 11 calls of 1 function" "$work/segv.err"; then
        echo "SWIFT_BACKTRACE set: status $status (139 expected)" >&2
        cat "$work/segv.err" >&2
        exit 1
    fi
    echo "SWIFT_BACKTRACE set: a C program's SIGSEGV stays its own, after the report"
fi
# The allocator aborts with its lock held (a block freed twice): where the report needs that
# lock, it stops, and the process dies of SIGABRT within seconds rather than waiting for ever,
# saying that its report stopped. (The report's thread may allocate from another arena of the
# allocator, whose lock is free: then the report is made. Both were seen.)
status=0
timeout 20 "$bin/ffi-hook-tracer" --library libc.so.6 --symbols 'malloc,free' --json "$work/double-free.json" \
    -- "$work/crashes" double-free >/dev/null 2>"$work/double-free.err" || status=$?
if [ "$status" -ne 134 ] || ! grep -Eq "ended by SIGABRT after its report stopped for 3 s|^ffi-hook-tracer: crashes \(pid [0-9]+, ended by SIGABRT\): [0-9]+ calls of" "$work/double-free.err"; then
    echo "a double free under the tracer: status $status (124: it hung)" >&2
    cat "$work/double-free.err" >&2
    exit 1
fi
if grep -q "report stopped" "$work/double-free.err"; then
    echo "a double free: the process died of SIGABRT, status 134, and said its report stopped"
else
    echo "a double free: the process died of SIGABRT, status 134, after its report (made from a free arena)"
fi
# A forked child that a signal ends, where the report thread is not (it is the parent's):
# the report is made in the handler, with the child's 50 calls.
"$bin/ffi-hook-tracer" --library libtracee.so -- "$work/crashes" child >"$work/child.out" 2>"$work/child.err"
read -r child_pid child_signal <"$work/child.out"
if [ "$child_signal" != 15 ] ||
    ! grep -Eq "^ffi-hook-tracer: crashes \(pid $child_pid, ended by SIGTERM\): 50 calls of 1 function" "$work/child.err"; then
    echo "a forked child raising SIGTERM: signal $child_signal" >&2
    cat "$work/child.err" >&2
    exit 1
fi
echo "a forked child that raised SIGTERM reported its 50 calls"
# What the program reads of its signals' actions is what it would read untraced: the defaults
# it left or set, with the flags and mask it set, and no alternate stack.
"$work/crashes" dispositions >"$work/dispositions.plain"
"$bin/ffi-hook-tracer" --library libtracee.so -- "$work/crashes" dispositions >"$work/dispositions.traced" 2>/dev/null
if ! cmp -s "$work/dispositions.plain" "$work/dispositions.traced"; then
    echo "the program reads other signal actions under the tracer:" >&2
    diff "$work/dispositions.plain" "$work/dispositions.traced" >&2
    exit 1
fi
echo "signal actions read back as untraced ($(wc -l <"$work/dispositions.plain") lines)"
# A handler the program installs replaces the tracer's (SIGUSR1 here, whose default action
# would end the process): the program's runs, and its crash after it is reported.
"$bin/ffi-hook-tracer" --library libtracee.so -- "$work/crashes" wait >"$work/usr1.out" 2>"$work/usr1.err" &
usr1_pid=$!
sleep 0.3
kill -USR1 "$usr1_pid"
status=0
wait "$usr1_pid" || status=$?
if [ "$status" -ne 139 ] || ! grep -Eq "ended by SIGSEGV\): [0-9,]+ calls" "$work/usr1.err"; then
    echo "SIGUSR1 to a program with its own handler: status $status" >&2
    cat "$work/usr1.err" >&2
    exit 1
fi
echo "a program's own SIGUSR1 handler ran, and its crash was reported"
# Python installs its KeyboardInterrupt handler only over a default action: it still sees the
# default (sigaction says SIG_DFL where the tracer's handler is) and installs it; after the
# traceback it puts the default back and dies of SIGINT, and the report is made first.
status=0
"$bin/ffi-hook-tracer" --library libc.so.6 --symbols getpid -- python3 -c \
    'import os, signal; print(signal.getsignal(signal.SIGINT).__name__); os.getpid(); os.kill(os.getpid(), signal.SIGINT)' \
    >"$work/python.out" 2>"$work/python.err" || status=$?
if [ "$status" -ne 130 ] || [ "$(cat "$work/python.out")" != default_int_handler ] ||
    ! grep -q "^KeyboardInterrupt" "$work/python.err" ||
    ! grep -Eq "^ffi-hook-tracer: python[0-9.]* \(pid [0-9]+, ended by SIGINT\): [1-9]" "$work/python.err"; then
    echo "python3 interrupted under the tracer: status $status, $(cat "$work/python.out")" >&2
    cat "$work/python.err" >&2
    exit 1
fi
echo "python3: KeyboardInterrupt as without the tracer, then the report, status 130"

echo "== tracer test: a --library pattern that matches the tracer's own objects, inline"
# lib*.so names libFFIHookTracer.so and libFFIHookTracerStart.so: they are left out with a
# message (patching them hung the traced program), and the program's libraries are traced.
status=0
timeout 120 "$bin/ffi-hook-tracer" --library 'lib*.so' --inline --json "$work/own.json" -- "$work/program" \
    >"$work/own.out" 2>"$work/own.err" || status=$?
if [ "$status" -ne 0 ]; then
    echo "--library 'lib*.so' --inline: exit status $status" >&2
    tail -5 "$work/own.err" >&2
    exit 1
fi
grep -q "libFFIHookTracer.so is not traced: it is part of the tracer" "$work/own.err"
python3 - "$work/own.json" <<'PYTHON'
import json, sys
rows = {row["name"]: row["calls"] for row in json.load(open(sys.argv[1]))["functions"]}
if rows.get("tracee_add", 0) == 0:
    sys.exit(f"--library 'lib*.so' --inline traced no call of tracee_add: {sorted(rows)[:10]}")
print(f"lib*.so --inline: the tracer's own objects left out, tracee_add counted {rows['tracee_add']} times")
PYTHON

echo "== tracer test: a Swift program's own runtime, through its import table and inline"
# The tracer carries its own Swift runtime, hidden: the program's libswiftCore.so is a library
# like any other, patched in its own code too while the program runs on it (swift_retain and
# swift_release included). swift_stdlib_random: one call for each number the program draws.
swiftc -O -o "$work/swift-program" "$fixture/swift-program.swift"
plain=$("$work/swift-program" 3000)
for mode in "--scope main" --inline; do
    # shellcheck disable=SC2086
    traced=$("$bin/ffi-hook-tracer" --library libswiftCore.so $mode --json "$work/swift.json" \
        --symbols 'swift_stdlib_random,swift_allocObject,swift_retain,swift_release' -- \
        "$work/swift-program" 3000 2>"$work/swift.err")
    if [ "$traced" != "$plain" ] || grep -q "not traced" "$work/swift.err"; then
        echo "$mode: the Swift program printed '$traced' (untraced: '$plain')" >&2
        cat "$work/swift.err" >&2
        exit 1
    fi
    python3 - "$work/swift.json" "$mode" <<'PYTHON'
import json, sys
rows = {row["name"]: row["calls"] for row in json.load(open(sys.argv[1]))["functions"]}
if rows.get("swift_stdlib_random") != 3000 or min(rows.get(name, 0) for name in ("swift_allocObject", "swift_retain", "swift_release")) < 3000:
    sys.exit(f"{sys.argv[2]}: the Swift program's runtime calls counted as {rows}")
print(f"{sys.argv[2]}: the Swift program's runtime traced: {rows}")
PYTHON
done

echo "== tracer test: C++ exceptions through traced calls, one of which tail-calls another"
# An exception thrown through two traced calls that share a return slot (a tail call from one to
# the other) reaches its handler (the unwinder took the outer thunk's frame for the handler's
# and aborted); the calls it leaves drop out as the next call from the same frame begins, so
# the returning calls after them nest in nothing and have their times. Through import tables
# (--scope all: the library's own jump goes through its PLT) and inline; and glibc's qsort,
# a jump to qsort_r, with a comparator that throws. Inline, a function whose first instructions
# hold a call (moved by the patch) lets the exception through to its caller as well, and gcc's
# split-off part of a function (throws_split.cold, jumped to) is refused, not patched.
gcc -O2 -fexceptions -fPIC -shared -o "$work/libthrows.so" "$fixture/throws.c"
g++ -O1 -o "$work/throws" "$fixture/throws.cpp" -L"$work" -lthrows -Wl,-rpath,"$work"
plain=$("$work/throws" 1000 2>/dev/null)
for mode in "--library libthrows.so --scope all" "--library libthrows.so --inline" \
    "--library libc.so.6 --symbols qsort,qsort_r --inline"; do
    status=0
    # shellcheck disable=SC2086
    traced=$(timeout 60 "$bin/ffi-hook-tracer" $mode --json "$work/throws.json" --folded "$work/throws.folded" \
        --log "$work/throws.log" -- "$work/throws" 1000 2>"$work/throws.err") || status=$?
    if [ "$status" -ne 0 ] || [ "$traced" != "$plain" ]; then
        echo "$mode: status $status, printed '$traced' (untraced: '$plain')" >&2
        cat "$work/throws.err" >&2
        exit 1
    fi
    python3 - "$work/throws.json" "$work/throws.folded" "$mode" "$work/throws.err" "$work/throws.log" <<'PYTHON'
import json, sys
rows = {row["name"]: row for row in json.load(open(sys.argv[1]))["functions"]}
# The log: a line for every call, those the exceptions left too (said so, without a time; those
# still in flight at exit say that).
lines = [line.rstrip() for line in open(sys.argv[5]) if line.strip()]
left = [line for line in lines if line.endswith("<left: longjmp or an exception>") or line.endswith("<no return>")]
calls, returned = sum(row["calls"] for row in rows.values()), sum(row["completed"] for row in rows.values())
if len(lines) != calls or len(left) != calls - returned:
    sys.exit(f"{sys.argv[3]}: {len(lines)} log lines ({len(left)} of calls left) for {calls} calls, {returned} returned")
# The table: a long name widens its own row only.
wide = [line for line in open(sys.argv[4]) if line.startswith("throws_") and "runs_longer" not in line and len(line) > 100]
if wide:
    sys.exit(f"{sys.argv[3]}: rows as wide as the longest name: {wide[0]!r}")
stacks = [line.rsplit(" ", 1)[0].split(";") for line in open(sys.argv[2]) if line.strip()]
deepest = max((len(stack) for stack in stacks), default=0)
if "libthrows" in sys.argv[3]:
    outer, inner, plain = rows.get("throws_outer"), rows.get("throws_inner"), rows.get("throws_plain")
    if not (outer and inner and plain) or (outer["calls"], inner["calls"], plain["calls"]) != (1000, 2000, 1000):
        sys.exit(f"{sys.argv[3]}: counts {rows}")
    if outer["completed"] != 0 or inner["completed"] != 0 or plain["completed"] != 1000:
        sys.exit(f"{sys.argv[3]}: calls left by the exceptions counted as returned, or returns lost: {rows}")
    if "inline" in sys.argv[3] and (rows.get("throws_wrapper", {}).get("calls") != 1000 or "throws_split.cold" in rows
                                    or rows.get("throws_split", {}).get("calls") != 6):
        sys.exit(f"{sys.argv[3]}: throws_wrapper, throws_split or its split-off part counted as {rows}")
    nested = [stack for stack in stacks if stack[-1] == "throws_plain" and len(stack) > 1]
    if deepest > 2 or nested:
        sys.exit(f"{sys.argv[3]}: calls the exceptions left stay open: stacks {deepest} deep, throws_plain under {nested[:1]}")
else:
    if rows.get("qsort", {}).get("calls") != 1 or rows.get("qsort_r", {}).get("calls") != 1:
        sys.exit(f"{sys.argv[3]}: qsort and qsort_r counted as {rows}")
print(f"{sys.argv[3]}: the exceptions were caught; stacks at most {deepest} deep")
PYTHON
done

echo "== tracer test: the log's durations agree with the table's"
# The log turns time-stamp counter ticks into seconds at a rate it measures as it opens, from
# readings of both clocks taken together (a thread preempted between two plain readings made
# the rate ten times too large on a busy machine); the table's rate is measured over the run.
"$bin/ffi-hook-tracer" --library libc.so.6 --symbols 'nanosleep,clock_nanosleep' --scope main \
    --log "$work/sleep.log" --json "$work/sleep.json" -- sleep 0.2 2>/dev/null
python3 - "$work/sleep.log" "$work/sleep.json" <<'PYTHON'
import json, re, sys
logged = [float(m.group(1)) for m in (re.match(r"^\d+ [\d.]+ \+([\d.]+) \w*sleep\(", line) for line in open(sys.argv[1])) if m]
rows = json.load(open(sys.argv[2]))["functions"]
table = sum(row["total_ns"] for row in rows) / 1e9
if len(logged) != 1 or not 0.19 < table < 2 or abs(logged[0] - table) > 0.1 * table:
    sys.exit(f"sleep 0.2: the log says {logged} s, the table {table:.6f} s")
print(f"sleep 0.2: the log says {logged[0]:.6f} s, the table {table:.6f} s")
PYTHON

echo "== tracer test: an empty --library or --symbols is refused, not taken for every one"
for option in "--library=" "--symbols=" "--symbols= , " "--json=" "--chrome-trace="; do
    status=0
    "$bin/ffi-hook-tracer" --library libtracee.so "$option" -- "$work/program" >"$work/empty.out" 2>"$work/empty.err" || status=$?
    if [ "$status" -ne 64 ] || ! head -1 "$work/empty.err" | grep -q "needs a"; then
        echo "'$option': exit status $status, $(head -1 "$work/empty.err")" >&2
        exit 1
    fi
    head -1 "$work/empty.err"
done

for events in 1 268435457 99999999999999; do
    status=0
    "$bin/ffi-hook-tracer" --library libtracee.so --events "$events" --folded /dev/null -- "$work/program" \
        >"$work/events.out" 2>"$work/events.err" || status=$?
    if [ "$status" -ne 64 ] || ! head -1 "$work/events.err" | grep -q "takes a number of events from 2 to"; then
        echo "--events $events: exit status $status, $(head -1 "$work/events.err")" >&2
        exit 1
    fi
done
echo "--events outside 2...268435456 refused"

# --signature without --log would change nothing: refused. A usage error prints the usage lines
# and a pointer to --help, not the whole help.
status=0
"$bin/ffi-hook-tracer" --library libtracee.so --signature tracee_add=iii -- "$work/program" \
    >"$work/signature-alone.out" 2>"$work/signature-alone.err" || status=$?
if [ "$status" -ne 64 ] || ! head -1 "$work/signature-alone.err" | grep -q "give --log FILE too" ||
    [ "$(wc -l <"$work/signature-alone.err")" -gt 10 ] || ! grep -q -- "--help describes" "$work/signature-alone.err"; then
    echo "--signature without --log: exit status $status" >&2
    cat "$work/signature-alone.err" >&2
    exit 1
fi
echo "--signature without --log refused, with the usage lines only"

# A signature with an empty name or encoding is refused, as the README says, not ignored.
for signature in crc32= =iii; do
    status=0
    "$bin/ffi-hook-tracer" --library libtracee.so --signature "$signature" --log /dev/null -- "$work/program" \
        >"$work/signature-empty.out" 2>"$work/signature-empty.err" || status=$?
    if [ "$status" -ne 64 ] || ! head -1 "$work/signature-empty.err" | grep -q "takes NAME=ENCODING"; then
        echo "--signature $signature: exit status $status, $(head -1 "$work/signature-empty.err")" >&2
        exit 1
    fi
done
echo "--signature with an empty name or encoding refused"

# An output file that cannot be written is refused before the program runs, not found at exit.
status=0
"$bin/ffi-hook-tracer" --library libtracee.so --json "$work/no-such-directory/counts.json" -- \
    sh -c "touch '$work/ran-anyway'" 2>"$work/unwritable.err" || status=$?
if [ "$status" -ne 64 ] || [ -e "$work/ran-anyway" ] ||
    ! head -1 "$work/unwritable.err" | grep -q "directory $work/no-such-directory does not exist"; then
    echo "--json in a missing directory: status $status" >&2
    cat "$work/unwritable.err" >&2
    exit 1
fi
# A directory whose file system takes no new file (/proc; root passes every access check): the
# same, found by making a file there.
status=0
"$bin/ffi-hook-tracer" --library libtracee.so --chrome-trace /proc/counts-%p.json -- \
    sh -c "touch '$work/ran-anyway'" 2>"$work/unwritable.err" || status=$?
if [ "$status" -ne 64 ] || [ -e "$work/ran-anyway" ] ||
    ! head -1 "$work/unwritable.err" | grep -q "no file can be made in /proc"; then
    echo "--chrome-trace in /proc: status $status" >&2
    cat "$work/unwritable.err" >&2
    exit 1
fi
echo "an output file in a missing directory, or in /proc, refused before the program runs"

# A file that opens but takes no byte (/dev/full): said at exit, the program's status kept.
status=0
"$bin/ffi-hook-tracer" --library libtracee.so --json /dev/full -- sh -c 'exit 3' \
    >/dev/null 2>"$work/full.err" || status=$?
if [ "$status" -ne 3 ] || ! grep -q "cannot write /dev/full: No space left on device" "$work/full.err"; then
    echo "--json /dev/full: status $status" >&2
    cat "$work/full.err" >&2
    exit 1
fi
echo "--json to a file that takes no byte: said, the program's status kept"

# `--` ends the options: not the value of the one before it.
status=0
"$bin/ffi-hook-tracer" --library libtracee.so --json -- "$work/program" >/dev/null 2>"$work/dashes.err" || status=$?
if [ "$status" -ne 64 ] || ! head -1 "$work/dashes.err" | grep -q -- "--json needs a value: -- ends the options" ||
    [ -e ./-- ]; then
    echo "--json --: status $status" >&2
    cat "$work/dashes.err" >&2
    exit 1
fi
echo "an option's value is never the -- that ends the options"

echo "== tracer test: a function with two names, traced inline under the one --symbols chose"
# strchr and index are one function in glibc (one address): the batch plans it once, under one
# name, and the report must use the name asked for, with every call of the function (where
# they are two functions, each its own).
gcc -O0 -fno-builtin -o "$work/aliases" "$fixture/aliases.c"
for name in strchr index; do
    "$bin/ffi-hook-tracer" --library libc.so.6 --symbols "$name" --inline --json "$work/alias-$name.json" \
        -- "$work/aliases" >/dev/null 2>"$work/alias-$name.err"
done
python3 - "$work" <<'PY'
import ctypes, json, sys
work = sys.argv[1]
libc = ctypes.CDLL("libc.so.6")
one = ctypes.cast(libc.strchr, ctypes.c_void_p).value == ctypes.cast(libc.index, ctypes.c_void_p).value
# Inline, a function's calls count whichever name the caller used.
for name, calls in (("strchr", 7 if one else 5), ("index", 7 if one else 2)):
    functions = {f["name"]: f["calls"] for f in json.load(open(f"{work}/alias-{name}.json"))["functions"]}
    if functions != {name: calls}:
        sys.exit(f"--symbols {name} --inline: expected {{{name!r}: {calls}}}, the report has {functions}")
PY

echo "== tracer test: timelines and flame graphs"
# libc's exit too: the forked child calls it, and it is still running when the files are written.
outputs() {
    "$bin/ffi-hook-tracer" --library libtracee.so --library liblate.so --library libc.so.6 \
        --symbols 'tracee_*,late_*,exit' --symbols strlen --json "$work/counts-%p.json" \
        --chrome-trace "$work/trace-%p.json" "$@" -- "$work/program"
}
outputs --folded "$work/folded-%p.txt" --flamegraph "$work/flame-%p.svg" --timeline "$work/timeline-%p.svg" \
    >"$work/outputs.out" 2>"$work/outputs.err"
if grep -q "events dropped" "$work/outputs.err"; then
    echo "events dropped with the default buffers" >&2
    exit 1
fi
read -r parent child <"$work/outputs.out"
python3 Scripts/tracer-outputs-check.py full "$work" "$parent" "$child"
# The main thread's buffer fills 50 calls deep into the first tracee_depth recursion, after its
# 1,000 + 777 + 300 calls (two events each); the worker threads' fill before their end.
capacity=$(((1000 + 777 + 300 + 50) * 2))
rm -f "$work"/trace-*.json
outputs --events "$capacity" >"$work/small.out" 2>"$work/small.err"
grep "events dropped" "$work/small.err"
read -r parent child <"$work/small.out"
python3 Scripts/tracer-outputs-check.py small "$work" "$parent" "$capacity"
# Events recorded from a signal handler while the interrupted thread records its own.
"$bin/ffi-hook-tracer" --library libtracee.so --json "$work/signals-counts-%p.json" \
    --chrome-trace "$work/signals-%p.json" -- "$work/event-signals" >"$work/event-signals.out" 2>"$work/event-signals.err"
read -r calls handled <"$work/event-signals.out"
pid=$(sed -n 's/.*event-signals (pid \([0-9]*\)).*/\1/p' "$work/event-signals.err")
python3 Scripts/tracer-outputs-check.py signals "$work" "$pid" "$handled"
# Calls left by longjmp.
"$bin/ffi-hook-tracer" --library libjump.so --chrome-trace "$work/jumps-%p.json" -- "$work/jumps" \
    >"$work/jumps.out" 2>"$work/jumps.err"
pid=$(sed -n 's/.*jumps (pid \([0-9]*\)).*/\1/p' "$work/jumps.err")
python3 Scripts/tracer-outputs-check.py jumps "$work" "$pid"

echo "== tracer test: the call log"
# Calls with known arguments and results (log-program.c): decoded by signatures given on the
# command line and in a file, and libc's write, read, strlen and exit by the built-in ones; the same
# traced inline; and without signatures, raw. Scripts/tracer-log-check.py says what it checks.
gcc -O0 -fPIC -shared -o "$work/liblogged.so" "$fixture/logged.c"
gcc -O0 -fno-builtin -o "$work/log-program" "$fixture/log-program.c" -L"$work" -llogged -Wl,-rpath,"$work" -lpthread
printf '# the rest of liblogged.so\nlogged_many=iiiiiiiii\n\nlogged_outer = qi\nlogged_half=ff\n' >"$work/signatures.txt"
signatures=(--signature 'logged_call=qi*dq' --signature logged_scale=ddi --signatures "$work/signatures.txt")
for mode in decoded inline raw; do
    case $mode in
    decoded) options=(--library liblogged.so --library libc.so.6 --symbols 'logged_*,write,read,strlen,exit' "${signatures[@]}") ;;
    inline) options=(--inline --library liblogged.so "${signatures[@]}") ;;
    raw) options=(--library liblogged.so) ;;
    esac
    "$bin/ffi-hook-tracer" "${options[@]}" --log "$work/log-$mode-%p.txt" -- "$work/log-program" \
        >"$work/log-$mode.out" 2>"$work/log-$mode.err"
    if grep -q "log.*misses calls\|signature" "$work/log-$mode.err"; then
        cat "$work/log-$mode.err" >&2
        exit 1
    fi
    read -r pid worker < <(tail -n 1 "$work/log-$mode.out")
    python3 Scripts/tracer-log-check.py "$mode" "$work/log-$mode-$pid.txt" "$pid" "$worker"
done
# The log stays out of the program's files: a shell that opens a file of its own on descriptor 3
# (which the log held) gets its own lines in it and nothing else, and the log gets the calls,
# in the shell and in the subshell it forks.
for mode in "" --inline; do
    rm -f "$work/own-3.txt" "$work/own-3.log"
    # shellcheck disable=SC2086 # the mode is one word or none
    "$bin/ffi-hook-tracer" $mode --library libc.so.6 --symbols strlen --log "$work/own-3.log" -- \
        bash -c "exec 3>'$work/own-3.txt'; echo hi >&3; (echo there >&3)" 2>"$work/own-3.err"
    if [ "$(cat "$work/own-3.txt")" != "$(printf 'hi\nthere')" ] || ! grep -q "strlen(" "$work/own-3.log"; then
        echo "--log $mode: the shell's own file on descriptor 3 holds:" >&2
        head -5 "$work/own-3.txt" "$work/own-3.err" >&2
        exit 1
    fi
done
echo "--log: a program's own file on descriptor 3 holds its own lines only"
# A signature that does not parse is named, with what is logged instead: the built-in one where
# the function has one, raw registers otherwise.
"$bin/ffi-hook-tracer" --library libc.so.6 --library liblogged.so --symbols 'strlen,logged_call' \
    --signature 'strlen=Q*(' --signature 'logged_call=i{' --log "$work/bad-signature.txt" -- "$work/log-program" \
    >/dev/null 2>"$work/bad-signature.err"
grep -q "signature strlen=Q\*(: .*; its built-in signature is used instead" "$work/bad-signature.err"
grep -q "signature logged_call=i{: .*; the function's calls are logged raw" "$work/bad-signature.err"
echo "signatures that do not parse: named, with the built-in one or raw registers used instead"
# Calls from a signal handler (signals.c) are logged like the others, each on a line of its own
# inside the call it interrupted: as many lines as counted calls, tracee_add's decoded. (A
# handler's call that interrupted the first run of a logging block in the debug build, as the
# Swift runtime made metadata for it under its lock, waited for that lock for ever: hence the
# time limit, which a hang would otherwise have been the whole run's.)
if ! timeout -s KILL 120 "$bin/ffi-hook-tracer" --library libtracee.so --signature tracee_add=iii \
    --json "$work/log-signals.json" --log "$work/log-signals.txt" -- "$work/signals" \
    >"$work/log-signals.out" 2>"$work/log-signals.err"; then
    echo "log with signals: the traced program did not finish in 2 minutes, or failed" >&2
    exit 1
fi
python3 - "$work" <<'PYTHON'
import json, re, sys

work = sys.argv[1]
calls, handler_calls = map(int, open(f"{work}/log-signals.out").read().split())
counted = {row["name"]: row["calls"] for row in json.load(open(f"{work}/log-signals.json"))["functions"]}
adds = nothings = nested = 0
for line in open(f"{work}/log-signals.txt").read().splitlines():
    add = re.fullmatch(r"\d+ \d+\.\d{6} \+\d+\.\d{6} tracee_add\((-?\d+), 1\) = (-?\d+)", line)
    nothing = re.fullmatch(r"\d+ \d+\.\d{6} \+\d+\.\d{6} ( *)tracee_nothing\((0x[0-9a-f]+, ){5}0x[0-9a-f]+\) = 0x[0-9a-f]+", line)
    if add and int(add.group(2)) == int(add.group(1)) + 1:
        adds += 1
    elif nothing:
        nothings += 1
        nested += len(nothing.group(1)) == 2
    else:
        print(f"log with signals: unexpected line {line!r}")
        sys.exit(1)
if adds != calls or adds != counted.get("tracee_add") or nothings != counted.get("tracee_nothing", 0) or nothings == 0:
    print(f"log with signals: {adds} tracee_add and {nothings} tracee_nothing lines; counted {counted}, loop {calls}")
    sys.exit(1)
print(f"log with signals: {adds} loop calls and {nothings} handler calls logged ({nested} inside the call they interrupted)")
PYTHON
# A forked child logs to a file of its own when the name has %p, else to its parent's file,
# each line whole: as many tracee_add lines as the counts say, in the parent and the child.
for name in 'fork-%p.txt' 'fork.txt'; do
    rm -f "$work"/fork*.txt
    "$bin/ffi-hook-tracer" --library libtracee.so --library liblate.so --symbols 'tracee_*,late_*' \
        --signature tracee_add=iii --json "$work/fork-%p.json" --log "$work/$name" -- "$work/program" \
        >"$work/fork.out" 2>"$work/fork.err"
    python3 - "$work" "$name" <<'PYTHON'
import glob, json, re, sys

work, name = sys.argv[1], sys.argv[2]
parent, child = map(int, open(f"{work}/fork.out").read().split())
adds = {}
for path in glob.glob(f"{work}/fork*.txt"):
    for line in open(path).read().splitlines():
        match = re.fullmatch(r"(\d+) \d+\.\d{6} \+\d+\.\d{6} ( *)(\w+)\((.*)\) = (\S+)", line)
        if not match:
            print(f"fork log {name}: unexpected line {line!r}")
            sys.exit(1)
        thread, _, function, arguments, result = match.groups()
        if function == "tracee_add":
            a, b = map(int, arguments.split(", "))
            assert int(result) == a + b, line
            # The child's own file holds only its lines; the parent's file its threads' too.
            process = child if int(thread) == child or (name == "fork-%p.txt" and str(child) in path) else parent
            adds[process] = adds.get(process, 0) + 1
files = sorted(glob.glob(f"{work}/fork*.txt"))
expected_files = 2 if name == "fork-%p.txt" else 1
for pid in (parent, child):
    counted = {row["name"]: row["calls"] for row in json.load(open(f"{work}/fork-{pid}.json"))["functions"]}
    if adds.get(pid) != counted["tracee_add"] or len(files) != expected_files:
        print(f"fork log {name}: {adds} tracee_add lines by process in {files}; process {pid} counted {counted['tracee_add']}")
        sys.exit(1)
print(f"fork log {name}: {adds[parent]} tracee_add lines of the parent, {adds[child]} of the child, in {len(files)} file(s)")
PYTHON
done
# 6,000 threads, more than hold log frames at once: every call logged, once, on more than 4,096
# threads (the kernel may give a thread the ID of one that ended).
gcc -O0 -o "$work/log-threads" "$fixture/log-threads.c" -L"$work" -llogged -Wl,-rpath,"$work" -lpthread
"$bin/ffi-hook-tracer" --library liblogged.so --signature 'logged_call=qi*dq' --log "$work/log-threads.txt" \
    -- "$work/log-threads" >/dev/null 2>"$work/log-threads.err"
if grep -q "misses calls" "$work/log-threads.err" ||
    [ "$(sed -n 's/^\([0-9]*\) .* logged_call(\([0-9]*\), "thread", 1, 2) = [0-9]*$/\1 \2/p' "$work/log-threads.txt" |
        sort -u | awk '{ threads[$1]; numbers[$2] } END { print (length(threads) > 4096), length(numbers), NR }')" != "1 6000 6000" ]; then
    echo "log threads: not every one of 6,000 threads' calls was logged once" >&2
    cat "$work/log-threads.err" >&2
    exit 1
fi
echo "log threads: 6,000 threads' calls logged, each once"
# A log whose reader goes away (a pipe to head): the program runs on and ends as it would (a
# write to the pipe must not raise SIGPIPE in it), and the log says why it stopped.
status=0
"$bin/ffi-hook-tracer" --library libtracee.so --log >(head -n 1 >/dev/null) -- "$work/program" \
    >/dev/null 2>"$work/log-pipe.err" || status=$?
if [ "$status" != 0 ] || ! grep -q "its reader went away" "$work/log-pipe.err"; then
    echo "log to a pipe whose reader went away: status $status" >&2
    cat "$work/log-pipe.err" >&2
    exit 1
fi
echo "log pipe: the program ran on after the log's reader went away"

echo "== tracer test: --pid, a running process joined and left"
# joined.c counts its own calls of tracee_add in a shared file and pauses between two calls
# when asked: the traced window's count must equal the calls it made while the tracer was in.
gcc -O0 -o "$work/joined" "$fixture/joined.c" -L"$work" -ltracee -Wl,-rpath,"$work"
gcc -O0 -static -o "$work/static" "$fixture/joined.c" "$work/tracee.o" "$work/tail.o" 2>/dev/null ||
    echo "(no static libc: the check of a process without libc.so.6 is skipped)"
scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo none)
if [ "$scope" = 3 ] || { [ "$scope" = 2 ] && [ "$(id -u)" != 0 ]; }; then
    echo "Yama's ptrace_scope is $scope here, which forbids ptrace for this user: --pid is not tested"
    exit 0
fi
# A container's seccomp profile or a security module may forbid ptrace whatever Yama says:
# a process tracing its own child tells.
gcc -o "$work/ptrace-probe" -x c - <<'C'
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    int allowed = ptrace(PTRACE_SEIZE, child, 0, 0) == 0;
    kill(child, SIGKILL);
    waitpid(child, 0, 0);
    return allowed ? 0 : 1;
}
C
if ! "$work/ptrace-probe"; then
    echo "ptrace is not permitted here (a seccomp profile or a security module): --pid is not tested"
    exit 0
fi
python3 - "$bin/ffi-hook-tracer" "$work" <<'PYTHON'
import json, mmap, os, re, shutil, signal, struct, subprocess, sys, threading, time

tracer, work = sys.argv[1], sys.argv[2]

class Joined:
    """A running joined.c and its shared counters: calls, ticks, request, paused, pid, (padding),
    real-time signals handled."""
    def __init__(self, name, *extra, program="joined"):
        self.path = f"{work}/{name}.shared"
        # Lazily bound (the default): the import entries of functions not called yet lead into
        # the PLT, and must do so again after the leave (an attach binds them first).
        self.process = subprocess.Popen([f"{work}/{program}", self.path, *extra])
        self.wait(lambda: os.path.exists(self.path) and os.path.getsize(self.path) == 4096 and self.field(4) != 0)
        self.pid = self.process.pid
    def field(self, index):
        with open(self.path, "rb") as file:
            return struct.unpack("QQIIIIQ", file.read(40))[index]
    def request(self, value):
        with open(self.path, "r+b") as file:
            shared = mmap.mmap(file.fileno(), 4096)
            shared[16:20] = struct.pack("I", value)
            shared.close()
    def pause(self):
        self.request(1)
        self.wait(lambda: self.field(3) == 1)
        return self.field(0)
    def resume(self):
        self.request(0)
        self.wait(lambda: self.field(3) == 0)
    def wait(self, condition, seconds=20):
        deadline = time.time() + seconds
        while not condition():
            if time.time() > deadline:
                sys.exit(f"{self.path}: timed out")
            time.sleep(0.005)
    def end(self):
        self.process.kill()
        self.process.wait()

def mappings(pid, names):
    """The bytes of every mapping of the files named (code, read-only data, GOT, data)."""
    found = {}
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as memory:
        for line in maps:
            fields = line.split()
            if len(fields) < 6 or os.path.basename(fields[5]) not in names or "r" not in fields[1]:
                continue
            start, end = (int(value, 16) for value in fields[0].split("-"))
            memory.seek(start)
            found[f"{os.path.basename(fields[5])} {fields[1]} {fields[2]}"] = memory.read(end - start)
    return found

def run_tracer(pid, *options, wait_for_join=True):
    log = open(f"{work}/pid-{pid}.err", "w+")
    process = subprocess.Popen([tracer, "--library", "libtracee.so", "--symbols", "tracee_*", *options,
                                "--pid", str(pid)], stderr=log)
    if wait_for_join:
        deadline = time.time() + 60
        while "joined process" not in open(log.name).read():
            if process.poll() is not None or time.time() > deadline:
                sys.exit(f"the tracer did not join process {pid}:\n{open(log.name).read()}")
            time.sleep(0.01)
    return process, log.name

failures = []
def check(good, what):
    if not good:
        failures.append(what)

# 1. A window of calls, exact: the loop is paused when the tracer joins and when it leaves.
joined = Joined("window")
objects = {"joined", "libtracee.so"}
before = mappings(joined.pid, objects)
start = joined.pause()
# Real-time signals sent all along (the kernel queues each one): those that arrive while the
# tracer runs a call in the process must be delivered after it, none lost.
sent, sending = 0, True
def send():
    global sent
    while sending:
        os.kill(joined.pid, signal.SIGRTMIN)
        sent += 1
        time.sleep(0.0002)
sender = threading.Thread(target=send)
sender.start()
# The loader's functions are traced too: the tracer's own calls of them in the process (to load
# the library, to find its functions) must not be counted in the window.
process, log = run_tracer(joined.pid, "--library", "libc.so.6", "--symbols", "dl*,_dl*", "--duration", "3",
                          "--json", f"{work}/pid-%p.json")
during = mappings(joined.pid, objects)
check(during != before, "no mapping of the program or libtracee changed while traced (no import entry hooked?)")
check(all(during[key] == before[key] for key in before if "x" in key.split()[1]),
      "code changed while traced")
joined.resume()
time.sleep(1)
end = joined.pause()
status = process.wait(timeout=60)
sending = False
sender.join()
report = open(log).read()
print(report, end="")
check(status == 0, f"the tracer exited with {status}")
deadline = time.time() + 10
while joined.field(6) != sent and time.time() < deadline:
    time.sleep(0.01)
check(joined.field(6) == sent, f"{joined.field(6)} of the {sent} real-time signals sent reached the handler")
rows = {row["name"]: row for row in json.load(open(f"{work}/pid-{joined.pid}.json"))["functions"]}
traced = rows.get("tracee_add", {"calls": 0, "completed": 0})
check(end - start > 0, "the process made no call in the window")
check(traced["calls"] == end - start and traced["completed"] == end - start,
      f"traced {traced['calls']} calls ({traced['completed']} returned); the process made {end - start}")
check(set(rows) == {"tracee_add"}, f"functions traced: {sorted(rows)}")
check(re.search(rf"joined \(pid {joined.pid}\): {end - start:,} calls of 1 function", report) is not None,
      "the table's heading does not give the window's calls")
# Left: code and import tables as before, the library loaded and idle, the process running on.
after = mappings(joined.pid, objects)
check(after == before, "after the leave, the program's or libtracee's mappings differ from before the join: "
      + ", ".join(key for key in before if after.get(key) != before[key]))
check("libFFIHookTracer.so" in open(f"/proc/{joined.pid}/maps").read(), "the library is not loaded any more")
joined.resume()
joined.wait(lambda: joined.field(0) > end + 1000)
ticks = joined.field(1)
joined.wait(lambda: joined.field(1) > ticks)
check(joined.process.poll() is None, "the process ended after the leave")
if not failures:
    print(f"--pid: {end - start} calls in the window, counted exactly; code and import tables restored; "
          f"the process runs on ({joined.field(0)} calls, {joined.field(1)} timer signals and all {sent} "
          "real-time signals handled)")

# 2. Joined again (the library is loaded and idle): a second window counts from zero, and the
#    process exits while traced: its report at exit is printed.
start = joined.pause()
process, log = run_tracer(joined.pid)
joined.resume()
time.sleep(0.5)
joined.request(2)
final = None
status = process.wait(timeout=60)
joined.process.wait()
final = joined.field(0)
report = open(log).read()
print(report, end="")
check(status == 0, f"the tracer exited with {status} when the process exited while traced")
check("ended while traced; the report above" in report, "the tracer did not say that the process ended")
check(re.search(rf"joined \(pid {joined.pid}\): {final - start:,} calls of 1 function", report) is not None,
      f"the report at exit does not give the {final - start} calls made since the second join")

# 2b. A joined process that SIGTERM ends while traced (its action the default) reports the
#     window first, as a started one does, and dies of the signal: the tracer stands in for the
#     default action while it traces. The loop is paused before the signal, so the count is exact.
#     SIGPWR too, whose default action ends a process as well.
for ending, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGUSR2, "SIGUSR2"), (signal.SIGPWR, "SIGPWR")):
    ended = Joined(f"ended-{name.replace(' ', '-')}")
    start = ended.pause()
    process, log = run_tracer(ended.pid)
    ended.resume()
    time.sleep(0.3)
    end = ended.pause()
    os.kill(ended.pid, ending)
    status = process.wait(timeout=60)
    ended.process.wait(timeout=60)
    report = open(log).read()
    check(status == 0, f"{name}: the tracer exited with {status} when the process was ended while traced")
    check(ended.process.returncode == -ending, f"{name}: the process ended with {ended.process.returncode}")
    check(re.search(rf"joined \(pid {ended.pid}, ended by {name}\): {end - start:,} calls of 1 function",
                    report) is not None, f"{name}: the report does not give the {end - start} calls:\n{report}")
    if not failures:
        print(f"--pid: a joined process ended by {name} while traced reported its {end - start} calls, "
              f"then died of the signal")

# 3. Errors: no such process, a process traced already, not permitted, no libc.so.6.
gone = subprocess.Popen(["true"])
gone.wait()
process, log = run_tracer(gone.pid, wait_for_join=False)
check(process.wait(timeout=60) == 3 and f"no process with ID {gone.pid}" in open(log).read(),
      f"a process that is gone: {open(log).read()}")
traced_already = Joined("traced", "traced")
time.sleep(0.2)
process, log = run_tracer(traced_already.pid, wait_for_join=False)
check(process.wait(timeout=60) == 2 and "is already traced by process" in open(log).read(),
      f"a process traced already: {open(log).read()}")
if os.getuid() == 0 and shutil.which("setpriv"):
    # The tracer run as nobody on a process of root's.
    refused = Joined("refused")
    log = f"{work}/pid-refused.err"
    with open(log, "w") as error:
        status = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", tracer,
                                 "--library", "libtracee.so", "--pid", str(refused.pid)], stderr=error).returncode
    check(status == 2 and "not permitted to trace process" in open(log).read()
          and "belongs to user ID 0" in open(log).read(), f"another user's process: {open(log).read()}")
    refused.end()
traced_already.end()
# A process started with the tracer: joining it is refused, it has its tracer.
started_log = open(f"{work}/pid-started.err", "w")
started = subprocess.Popen([tracer, "--library", "libtracee.so", "--", f"{work}/joined", f"{work}/started.shared"],
                           stderr=started_log)
deadline = time.time() + 30
while not (os.path.exists(f"{work}/started.shared") and os.path.getsize(f"{work}/started.shared") == 4096
           and struct.unpack("QQIII", open(f"{work}/started.shared", "rb").read(28))[4] != 0):
    check(time.time() < deadline, "the started process did not start")
    time.sleep(0.01)
process, log = run_tracer(started.pid, wait_for_join=False)
check(process.wait(timeout=60) == 2 and "is traced by ffi-hook-tracer already" in open(log).read(),
      f"a process started with the tracer: {open(log).read()}")
started.kill()
started.wait()
# A process killed while the tracer stops it or runs the join in it (TracerPid says when), or
# just after: the tracer says it ended and exits with 3.
victim = Joined("victim")
process, log = run_tracer(victim.pid, wait_for_join=False)
deadline = time.time() + 30
def tracer_pid():
    try:
        return int(re.search(r"TracerPid:\s+(\d+)", open(f"/proc/{victim.pid}/status").read()).group(1))
    except (OSError, AttributeError):
        return 0
while tracer_pid() == 0 and "joined process" not in open(log).read() and time.time() < deadline:
    time.sleep(0.0002)
victim.end()
status = process.wait(timeout=60)
text = open(log).read()
check(status == 3 and re.search(r"(was killed by signal 9|exited|ended while traced)", text) is not None,
      f"a process killed while being joined: status {status}: {text}")
print("--pid: a process killed while being joined: " + text.strip().splitlines()[-1])
if os.path.exists(f"{work}/static"):
    static = Joined("static", program="static")
    process, log = run_tracer(static.pid, wait_for_join=False)
    check(process.wait(timeout=60) == 4 and "has no libc.so.6 mapped" in open(log).read(),
          f"a static program: {open(log).read()}")
    check(static.process.poll() is None, "the static program ended")
    static.end()
if failures:
    print("\n".join(failures))
    sys.exit(1)
print("--pid: errors named for a process that is gone, one traced already (by another tracer, by this one), "
      "another user's, one killed meanwhile, a static one")
PYTHON

echo "== tracer test: --pid with --inline: a running process's code patched while traced, as it was after"
# joined.c again, traced in libtracee's own code: its calls are counted and the library's code
# pages hold the file's bytes again after the leave.
"$work/joined" "$work/inline-joined.count" >/dev/null 2>&1 &
inline_pid=$!
sleep 0.3
code_pages() {
    python3 - "$1" <<'PYTHON'
import hashlib, sys
pid = int(sys.argv[1])
digest = hashlib.sha256()
for line in open(f"/proc/{pid}/maps"):
    fields = line.split()
    if len(fields) > 5 and fields[5].endswith("/libtracee.so") and "x" in fields[1]:
        start, end = (int(value, 16) for value in fields[0].split("-"))
        with open(f"/proc/{pid}/mem", "rb") as memory:
            memory.seek(start)
            digest.update(memory.read(end - start))
print(digest.hexdigest())
PYTHON
}
before=$(code_pages "$inline_pid")
status=0
"$bin/ffi-hook-tracer" --inline --library libtracee.so --pid "$inline_pid" --duration 0.5 2>"$work/inline-joined.err" ||
    status=$?
if [ "$status" -ne 0 ]; then
    echo "--pid --inline on joined.c: status $status" >&2
    cat "$work/inline-joined.err" >&2
    exit 1
fi
after=$(code_pages "$inline_pid")
kill "$inline_pid"
cat "$work/inline-joined.err"
grep -Eq "tracee_add +[1-9]" "$work/inline-joined.err"
if [ "$before" != "$after" ]; then
    echo "libtracee's code differs after the leave of an inline trace" >&2
    exit 1
fi
echo "--pid --inline: calls counted in the library's own code, its code as before after the leave"

echo "== tracer test: --pid: a later join's --events sizes its own event buffers"
# A thread's buffer was made once, with the limit of the join that first recorded on it: a later
# join with a larger --events found the first join's 100-event buffers full. Now the later join
# retires them, and each thread makes one of the later limit at its next recorded call.
"$work/joined" "$work/events-joined.count" >/dev/null 2>&1 &
events_pid=$!
sleep 0.3
for limit in 100 100000; do
    status=0
    "$bin/ffi-hook-tracer" --library libtracee.so --chrome-trace "$work/events-$limit.json" --events "$limit" \
        --pid "$events_pid" --duration 0.3 2>"$work/events-$limit.err" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "--pid --events $limit: status $status" >&2
        cat "$work/events-$limit.err" >&2
        exit 1
    fi
done
kill "$events_pid"
# (The loop calls tracee_add over 100,000 times a second: 100 events fill, 100,000 do not.)
begins=$(grep -o '"ph": "B"' "$work/events-100000.json" | wc -l)
if ! grep -q "whose 100-event buffer filled" "$work/events-100.err" ||
    grep -q "events dropped" "$work/events-100000.err" || [ "$begins" -le 100 ]; then
    echo "--pid: the second join's buffers are not of its own --events ($begins calls begun in its trace)" >&2
    cat "$work/events-100.err" "$work/events-100000.err" >&2
    exit 1
fi
echo "--pid: a second join with --events 100000 recorded $begins calls on the thread whose first join's 100-event buffer filled, and dropped none"

echo "== tracer test: --pid: a process that exits as the tracer leaves keeps the report's files"
# The leave writes the report, here a Chrome trace of a million calls, which takes a while. A
# process whose exit came meanwhile ended the leave's thread as it wrote: no JSON file, part of
# the trace, and the tracer exited 0. The exit now waits for the leave's report. exiter.c's three
# threads call tracee_add until SIGUSR1, sent a little after the traced window, at three delays.
cat >"$work/exiter.c" <<'C'
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
int tracee_add(int a, int b);
static volatile sig_atomic_t ending;
static void end(int signal) { (void)signal; ending = 1; }
static void *call(void *unused) {
    (void)unused;
    for (int round = 0; !ending; round++) (void)tracee_add(round, 1);
    return NULL;
}
int main(void) {
    signal(SIGUSR1, end);
    pthread_t threads[2];
    for (int index = 0; index < 2; index++) pthread_create(&threads[index], NULL, call, NULL);
    call(NULL);
    for (int index = 0; index < 2; index++) pthread_join(threads[index], NULL);
    return 0;
}
C
gcc -O1 -o "$work/exiter" "$work/exiter.c" -L"$work" -ltracee -Wl,-rpath,"$work" -lpthread
for delay in 0.05 0.2 0.5; do
    "$work/exiter" &
    exiter=$!
    sleep 0.2
    status=0
    timeout -s KILL 120 "$bin/ffi-hook-tracer" --library libtracee.so --pid "$exiter" --duration 0.5 --events 300000 \
        --json "$work/exiter.json" --chrome-trace "$work/exiter-trace.json" 2>"$work/exiter.err" &
    tracer=$!
    for _ in $(seq 600); do
        grep -q "^ffi-hook-tracer: joined process" "$work/exiter.err" && break
        sleep 0.01
    done
    sleep 0.5
    sleep "$delay"
    kill -USR1 "$exiter"
    wait "$tracer" || status=$?
    wait "$exiter"
    if [ "$status" -ne 0 ] || ! python3 - "$work/exiter.json" "$work/exiter-trace.json" <<'PYTHON'; then
import json, sys
rows = {row["name"]: row["calls"] for row in json.load(open(sys.argv[1]))["functions"]}
events = json.load(open(sys.argv[2]))
events = events["traceEvents"] if isinstance(events, dict) else events
if not rows.get("tracee_add") or not events:
    sys.exit(f"counts {rows}, {len(events)} events")
PYTHON
        echo "--pid, the process exiting ${delay} s after the traced window: status $status, files as above" >&2
        cat "$work/exiter.err" >&2
        exit 1
    fi
    rm -f "$work/exiter.json" "$work/exiter-trace.json"
    echo "--pid: the process exiting ${delay} s after the traced window: status 0, the JSON and the trace whole"
done

echo "== tracer test: --pid: a tracer killed while the process runs its call"
# held.c checks, round after round, its callee-saved and vector registers, MXCSR, signal mask
# and alternate signal stack; the stand-in library's join entry (slow-join.c) sleeps a second,
# and the joiner is killed meanwhile (SIGKILL): the stopped thread must go back by itself to where
# it was stopped (in a sleep made by hand, or in a sort in the C library that the join let run
# towards its return into the program) and the process go on to its end.
gcc -O1 -o "$work/held" "$fixture/held.c"
gcc -O1 -fPIC -shared -o "$work/libslow-join.so" "$fixture/slow-join.c"
# "catches": the sleeps with SIGURG, SIGWINCH and SIGCHLD caught (as a Go program catches every
# signal), so that the join stops the thread with a signal the program handles (SIGWINCH), which
# the killed joiner leaves it to take once; it used to return to address 0 and die of SIGSEGV.
for mode in sleeps sorts catches; do
    rm -f "$work/held.marker"
    held_mode=$mode
    catches=
    if [ "$mode" = catches ]; then
        held_mode=sleeps
        catches=1
    fi
    HELD_CATCHES=$catches HELD_MARKER="$work/held.marker" "$work/held" "$held_mode" 4 >"$work/held.out" 2>&1 &
    held_pid=$!
    sleep 0.3
    "$bin/ffi-hook-tracer-join" "$held_pid" 5 "$work/libslow-join.so" >"$work/held-join.err" 2>&1 &
    joiner_pid=$!
    for attempt in $(seq 200); do
        if [ -e "$work/held.marker" ]; then break; fi
        sleep 0.05
    done
    kill -KILL "$joiner_pid"
    wait "$joiner_pid" 2>/dev/null || true
    status=0
    wait "$held_pid" || status=$?
    if [ ! -e "$work/held.marker" ] || [ "$status" -ne 0 ] || ! grep -q "^rounds [1-9]" "$work/held.out"; then
        echo "held $mode, its joiner killed during the join's call: status $status, marker $(ls "$work/held.marker" 2>&1)" >&2
        cat "$work/held.out" "$work/held-join.err" >&2
        exit 1
    fi
    echo "--pid: a joiner killed during its call in held $mode: the process went on ($(tail -1 "$work/held.out"))"
done

echo "== tracer test: --pid: a thread stopped in a signal handler on a small alternate stack"
# held.c's "handler" sleeps in a SIGALRM handler on a 16 KiB alternate stack most of the time,
# where the join stops it; the join's calls ran on that stack and wrote far below it (1 join in
# 2). They run on a stack mapped for them; the bytes around the small one must stay as they were.
"$work/held" handler 4 >"$work/handler.out" 2>&1 &
handler_pid=$!
sleep 0.3
for attempt in 1 2 3; do
    status=0
    "$bin/ffi-hook-tracer" --library libc.so.6 --pid "$handler_pid" --duration 0.2 2>"$work/handler-join.err" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "held handler, join $attempt: status $status" >&2
        cat "$work/handler-join.err" "$work/handler.out" >&2
        exit 1
    fi
done
status=0
wait "$handler_pid" || status=$?
if [ "$status" -ne 0 ] || ! grep -q "^rounds [1-9]" "$work/handler.out"; then
    echo "held handler, joined three times: status $status" >&2
    cat "$work/handler.out" >&2
    exit 1
fi
echo "--pid: a thread in a handler on a 16 KiB alternate stack joined three times, the bytes around it untouched ($(tail -1 "$work/handler.out"))"

echo "== tracer test: --pid: a process caught as it starts, and a kernel thread"
# A program stopped at its first instruction, in the dynamic loader before the C library is
# mapped (stopped-at-exec.c), was said to be static or not a glibc process: the join waits for
# the C library, says what it saw when it does not come, and joins once the program has run on.
gcc -O1 -o "$work/stopped-at-exec" "$fixture/stopped-at-exec.c"
"$work/stopped-at-exec" "$work/held" sleeps 3 >"$work/starting.pid" &
starter_pid=$!
for attempt in $(seq 100); do
    if [ -s "$work/starting.pid" ]; then break; fi
    sleep 0.05
done
starting_pid=$(cat "$work/starting.pid")
status=0
"$bin/ffi-hook-tracer" --library libc.so.6 --pid "$starting_pid" --duration 0.2 2>"$work/starting.err" || status=$?
if [ "$status" -ne 4 ] || ! grep -q "has not mapped the C library two seconds after its dynamic loader" "$work/starting.err"; then
    echo "a process stopped before its loader mapped the C library: status $status" >&2
    cat "$work/starting.err" >&2
    exit 1
fi
(sleep 0.5 && kill -CONT "$starting_pid") &
continuer_pid=$!
status=0
"$bin/ffi-hook-tracer" --library libc.so.6 --pid "$starting_pid" --duration 0.2 2>"$work/starting.err" || status=$?
wait "$continuer_pid"
if [ "$status" -ne 0 ] || ! grep -q "joined process $starting_pid" "$work/starting.err"; then
    echo "a process let go while the join waited for its C library: status $status" >&2
    cat "$work/starting.err" >&2
    exit 1
fi
kill -KILL "$starting_pid" "$starter_pid" 2>/dev/null || true
wait "$starter_pid" 2>/dev/null || true
echo "--pid: a process stopped before its C library was mapped: status 4 and why; joined once let go"
if [ "$(cat /proc/2/comm 2>/dev/null)" = kthreadd ]; then
    status=0
    "$bin/ffi-hook-tracer" --library libc.so.6 --pid 2 --duration 0.2 2>"$work/kernel-thread.err" || status=$?
    if [ "$status" -ne 4 ] || ! grep -q "is a kernel thread" "$work/kernel-thread.err"; then
        echo "--pid 2 (kthreadd): status $status" >&2
        cat "$work/kernel-thread.err" >&2
        exit 1
    fi
    echo "--pid 2: $(cat "$work/kernel-thread.err")"
fi

echo "== tracer test: --pid: a joined C process's crash stays its own after the leave"
# The join's dlopen brings the Swift runtime into a process that had none; its crash handler
# must not print a Swift crash report for the process's own SIGSEGV later. With SWIFT_BACKTRACE
# set in the process (and the backtracer's path, where there is one), the runtime must not see it
# (it would say it cannot find its backtracer, or take the crash over), and the process keeps it.
backtracer="$(dirname "$(command -v swiftc)")/../libexec/swift/linux/swift-backtrace"
backtrace_setting="enable=yes"
if [ -x "$backtracer" ]; then backtrace_setting="enable=yes,swift-backtrace=$backtracer"; fi
SWIFT_BACKTRACE="$backtrace_setting" "$work/crashes" wait >"$work/crashes-joined.out" 2>"$work/crashes-joined.err" &
crash_pid=$!
sleep 0.3
"$bin/ffi-hook-tracer" --library libtracee.so --pid "$crash_pid" --duration 0.3 2>"$work/crash-join.err"
grep -Eq "tracee_add +[1-9]" "$work/crash-join.err"
kill -USR1 "$crash_pid"
status=0
wait "$crash_pid" || status=$?
if [ "$status" -ne 139 ] || grep -q -v "^Segmentation fault" "$work/crashes-joined.err"; then
    echo "a joined process crashed with status $status and this on standard error:" >&2
    head -5 "$work/crashes-joined.err" >&2
    exit 1
fi
if [ "$(cat "$work/crashes-joined.out")" != "SWIFT_BACKTRACE $backtrace_setting" ]; then
    echo "a joined process's SWIFT_BACKTRACE after the leave: $(cat "$work/crashes-joined.out")" >&2
    exit 1
fi
echo "--pid: the process joined and left died of its SIGSEGV silently, status 139, its SWIFT_BACKTRACE kept and unseen"

echo "== tracer test: --pid: a process joined and left twenty times, then with other functions"
# Each join starts a watching thread on a stack the tracer maps (by which the thread's own calls
# are known as the tracer's); the stacks were never used again, and the 17th join's leave was
# refused, its thread taken for the program's, so the hooks stayed.
"$work/crashes" wait >/dev/null 2>&1 &
rejoined_pid=$!
sleep 0.3
for attempt in $(seq 20); do
    status=0
    "$bin/ffi-hook-tracer" --library libtracee.so --pid "$rejoined_pid" --duration 0.05 \
        >/dev/null 2>"$work/rejoins.err" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "--pid, join $attempt of the same process: status $status" >&2
        cat "$work/rejoins.err" >&2
        exit 1
    fi
done
# A join traces what its own command line names: an earlier join's functions (usleep here) are
# neither counted nor attached again (they were: the names of every earlier join were taken
# for this one's), and its events files hold the calls its table counts, no more.
"$bin/ffi-hook-tracer" --library libc.so.6 --symbols usleep --pid "$rejoined_pid" --duration 0.3 \
    2>"$work/rejoins.err"
grep -Eq "^usleep +[1-9]" "$work/rejoins.err"
# The leave finds a usleep in flight (the process is in one nearly all the time), whose return
# no hook sees: the next join of usleep counted every call inside it, out of the total time
# ("usleep 290 0 ns 300 ms"), until the process ended.
"$bin/ffi-hook-tracer" --library libc.so.6 --symbols usleep --pid "$rejoined_pid" --duration 0.3 \
    2>"$work/rejoins.err"
if ! grep -Eq "^usleep +[1-9][0-9,]* +[1-9][0-9.]* ms " "$work/rejoins.err"; then
    echo "--pid: usleep joined again after a leave mid-call has no total time" >&2
    cat "$work/rejoins.err" >&2
    exit 1
fi
"$bin/ffi-hook-tracer" --library libtracee.so --pid "$rejoined_pid" --duration 0.3 \
    --chrome-trace "$work/rejoin.trace.json" 2>"$work/rejoins.err"
# A --library name that answers to no object of the process: traced, reported, and status 1 (a
# script must not take it for a trace of that library). A file that cannot be written: refused
# before the join (status 64, the process not stopped).
status=0
"$bin/ffi-hook-tracer" --library libtracee.so --library libtraceee.so --pid "$rejoined_pid" --duration 0.1 \
    2>"$work/unmatched-join.err" || status=$?
if [ "$status" -ne 1 ] || ! grep -q "error: --library libtraceee.so names none of the objects" "$work/unmatched-join.err" ||
    ! grep -Eq "^tracee_add +[1-9]" "$work/unmatched-join.err"; then
    echo "--pid with a --library that matches nothing: status $status" >&2
    cat "$work/unmatched-join.err" >&2
    exit 1
fi
for output in "--json=$work/no-such-directory/report.json" "--chrome-trace=$work"; do
    status=0
    "$bin/ffi-hook-tracer" --library libtracee.so "$output" --pid "$rejoined_pid" --duration 0.1 \
        2>"$work/unwritable.err" || status=$?
    if [ "$status" -ne 64 ] || ! head -1 "$work/unwritable.err" | grep -q "cannot write" ||
        grep -q "joined process" "$work/unwritable.err"; then
        echo "--pid with $output: status $status" >&2
        cat "$work/unwritable.err" >&2
        exit 1
    fi
    head -1 "$work/unwritable.err"
done
# One that opens but takes no byte (/dev/full) fails as the process writes it: status 1.
status=0
"$bin/ffi-hook-tracer" --library libtracee.so --folded /dev/full --pid "$rejoined_pid" --duration 0.1 \
    2>"$work/unwritable.err" || status=$?
if [ "$status" -ne 1 ] || ! grep -q "cannot write /dev/full: No space left on device" "$work/unwritable.err"; then
    echo "--pid with --folded /dev/full: status $status" >&2
    cat "$work/unwritable.err" >&2
    exit 1
fi
echo "--pid: a --library that matches nothing, and a file the process cannot write, give status 1"
kill -KILL "$rejoined_pid"
wait "$rejoined_pid" 2>/dev/null || true

# A child forked while its parent is joined has the tracer's handler for SIGTERM too (the
# parent's stands in for the default action): the child dies of SIGTERM as by default, and the
# parent, traced on, neither reports nor ends.
"$work/crashes" forks >"$work/forks.out" 2>/dev/null &
forks_pid=$!
sleep 0.3
"$bin/ffi-hook-tracer" --library libtracee.so --pid "$forks_pid" --duration 1.5 2>"$work/forks.err" &
forks_tracer=$!
for _ in $(seq 100); do grep -q "joined process" "$work/forks.err" && break; sleep 0.05; done
kill -USR2 "$forks_pid"
status=0
wait "$forks_tracer" || status=$?
if [ "$status" -ne 0 ] || grep -q "ended by" "$work/forks.err" || ! grep -Eq "^[0-9]+ 15$" "$work/forks.out" ||
    ! kill -0 "$forks_pid" 2>/dev/null; then
    echo "a child forked by a joined process, ended by SIGTERM: tracer status $status, child: $(cat "$work/forks.out")" >&2
    cat "$work/forks.err" >&2
    exit 1
fi
kill -USR1 "$forks_pid"
wait "$forks_pid" 2>/dev/null || true
echo "--pid: a child the joined process forked died of its SIGTERM as by default; the parent traced on"
wait "$rejoined_pid" 2>/dev/null || true
python3 - "$work/rejoins.err" "$work/rejoin.trace.json" <<'PYTHON'
import json, re, sys
table = open(sys.argv[1]).read()
rows = re.findall(r"^(\S+) +([0-9,]+) ", table, re.M)
rows = [(name, int(calls.replace(",", ""))) for name, calls in rows if name != "function"]
events = json.load(open(sys.argv[2]))
events = events["traceEvents"] if isinstance(events, dict) else events
begins = sum(1 for event in events if event.get("ph") == "B")
if [name for name, _ in rows] != ["tracee_add"] or begins != rows[0][1] or begins == 0:
    sys.exit(f"a join after others: rows {rows}, {begins} begins in the trace\n{table}")
print(f"--pid: joined 22 times; the last join's table has its own function alone, "
      f"{begins} calls, and its trace {begins} begins")
PYTHON

echo "== tracer test: --pid: a process that loops on dlopen and dlclose, joined twelve times"
# Stopped inside the loader (a syscall the loader made, the loader's lists half changed), the
# process would run the join's own dlopen there: the loader asserted, or the process faulted,
# in 4 joins of 10. The join stops it again until it is outside the loader. The leave, made on
# the main thread, found it in the tracer's attach after a dlopen (its lock held) and faulted
# ("Recursive call to lock Mutex"): it runs on the tracer's watching thread. The join lets a
# thread in the loader run to a return into the program; stopped in dlclose, it took dlopen's
# stale return address for that, never got there, and passed over that address from then on,
# also where it was live (in dlopen): after a few joins, about 1 join in 20 found the process
# "inside the dynamic loader 5 of the 5 times" and failed (2 runs of this step in 6).
"$work/crashes" reloads libz.so.1 >"$work/reloads-joined.out" 2>"$work/reloads-joined.err" &
reloads_pid=$!
sleep 0.3
# With --inline, each load is planned and patched, and the leave's removal (on the tracer's
# watching thread) found that thread parked by the attach of a load on the main thread, in a
# signal handler with every signal blocked, where the fault guard cannot work: the leave
# faulted (1 join in 30); it is made again once the thread is back.
for attempt in $(seq 12); do
    mode=()
    if [ "$attempt" -gt 8 ]; then mode=(--inline); fi
    status=0
    "$bin/ffi-hook-tracer" "${mode[@]}" --library libz.so.1 --pid "$reloads_pid" --duration 0.2 \
        >/dev/null 2>"$work/reloads-join.err" || status=$?
    if [ "$status" -ne 0 ] || ! kill -0 "$reloads_pid" 2>/dev/null; then
        echo "--pid ${mode[*]} on a loop of dlopen and dlclose, join $attempt: status $status" >&2
        cat "$work/reloads-join.err" "$work/reloads-joined.err" >&2
        exit 1
    fi
    # No signal handler runs there: every call the report says it did not count would be the
    # tracer's own walk after a dlopen, taken for the program's (9 joins of 12 said "66 calls
    # not counted" while the report read the count during a walk).
    if grep -q "not counted" "$work/reloads-join.err"; then
        echo "--pid ${mode[*]} on a loop of dlopen and dlclose, join $attempt: calls reported not counted" >&2
        cat "$work/reloads-join.err" >&2
        exit 1
    fi
done
kill -KILL "$reloads_pid"
wait "$reloads_pid" 2>/dev/null || true
echo "--pid: a process looping on dlopen and dlclose joined and left twelve times (four --inline), each with status 0 and no call said not counted"

echo "== tracer test: --pid --inline: threads that each reload a library, joined fifteen times"
# Each library may be unloaded, and another copy loaded at its place, between the tracer's
# listing of its functions, their planning, their attaching and the leave: the join read an
# unloaded library's code and faulted (the join failed), and the leave made a page of the
# fresh copy read-only while the loader relocated it (the process died of SIGSEGV), together
# in about one join of ten. Later, the same process joined again and again: a page given its
# protection back between another thread's unload and load, or lifted while no object held
# it (the process died of SIGSEGV in the loader), and the block of an earlier join's hook put
# back for a moment by its follower, which ran during the next join's start and locked the
# state the start held (the join faulted with a fatal error), each in about one join of fifty.
"$work/crashes" reloads libz.so.1 libsqlite3.so.0 libz.so.1 libsqlite3.so.0 \
    >"$work/reloaders-joined.out" 2>"$work/reloaders-joined.err" &
reloaders_pid=$!
sleep 0.3
for attempt in $(seq 15); do
    status=0
    timeout -s KILL 60 "$bin/ffi-hook-tracer" --inline --library libz.so.1 --library libsqlite3.so.0 \
        --pid "$reloaders_pid" --duration 0.3 >/dev/null 2>"$work/reloaders-join.err" || status=$?
    if [ "$status" -ne 0 ] || ! kill -0 "$reloaders_pid" 2>/dev/null; then
        echo "--pid --inline on threads reloading libraries, join $attempt: status $status" >&2
        cat "$work/reloaders-join.err" "$work/reloaders-joined.err" >&2
        exit 1
    fi
done
kill -KILL "$reloaders_pid"
wait "$reloaders_pid" 2>/dev/null || true
echo "--pid --inline: a process whose four threads reload libz and libsqlite3 joined and left fifteen times, each with status 0, the process running on"

echo "== tracer test: --pid: a thread stopped holding the loader's lock word, with no owner recorded"
# pthread_mutex_unlock clears the owner before it frees the lock's word: a thread stopped there
# (dlclose ends in a jump to it, so no return address into the loader is on the stack) holds the
# loader's lock, and the join's dlopen on that thread waited for it forever; neither the process
# nor the tracer went on, and the tracer, blocking SIGTERM while it injects, outlived `timeout`.
# loader-lock.c stands there for good: the join must refuse, then work once the word is free.
"$work/loader-lock" >"$work/loader-lock.out" 2>&1 &
locked_pid=$!
wait_for_line "$work/loader-lock.out" held
status=0
timeout -s KILL 60 "$bin/ffi-hook-tracer" --library libc.so.6 --pid "$locked_pid" --duration 0.1 \
    >/dev/null 2>"$work/loader-lock.err" || status=$?
if [ "$status" -ne 1 ] || ! grep -q "was inside the dynamic loader" "$work/loader-lock.err" ||
    ! kill -0 "$locked_pid" 2>/dev/null; then
    echo "--pid on a thread holding the loader's lock word: status $status (137: it hung)" >&2
    cat "$work/loader-lock.err" >&2
    exit 1
fi
kill -USR1 "$locked_pid"
wait_for_line "$work/loader-lock.out" released
status=0
timeout -s KILL 60 "$bin/ffi-hook-tracer" --library libc.so.6 --pid "$locked_pid" --duration 0.1 \
    >/dev/null 2>"$work/loader-lock.err" || status=$?
if [ "$status" -ne 0 ] || ! kill -0 "$locked_pid" 2>/dev/null; then
    echo "--pid once the loader's lock word was free: status $status" >&2
    cat "$work/loader-lock.err" >&2
    exit 1
fi
kill -KILL "$locked_pid"
wait "$locked_pid" 2>/dev/null || true
echo "--pid: a thread holding the loader's lock word is not joined (status 1, said why); once it is free, joined"

echo "== tracer test: --pid: a process whose threads block every signal"
# blocks-all.c's threads block every signal. A call of the tracer's made on such a thread (or on
# the tracer's watching thread before its start has set its mask) that faulted under the fault
# guard, writing a read-only import entry, made the kernel put the process's SIGSEGV action
# back to the default: the leave "faulted", its hooks stayed, later joins failed or hung. Joined
# and left at once, eight times: every time must work, the process keeps the fault guard's
# SIGSEGV action, and each thread keeps its mask.
"$work/blocks-all" >"$work/blocks-all.out" 2>&1 &
blocking_pid=$!
wait_for_line "$work/blocks-all.out" ready
masks_before=$(cat /proc/"$blocking_pid"/task/*/status | grep "^SigBlk:" | sort | uniq -c)
for round in $(seq 8); do
    status=0
    timeout -s KILL 60 "$bin/ffi-hook-tracer" --library libc.so.6 --symbols malloc,free --pid "$blocking_pid" \
        --duration 0.001 >/dev/null 2>"$work/blocks-all.err" || status=$?
    if [ "$status" -ne 0 ] || ! kill -0 "$blocking_pid" 2>/dev/null; then
        echo "--pid on a process blocking every signal, join $round: status $status" >&2
        cat "$work/blocks-all.err" >&2
        exit 1
    fi
done
caught=$(sed -n 's/^SigCgt:\t//p' /proc/"$blocking_pid"/status)
masks_after=$(cat /proc/"$blocking_pid"/task/*/status | grep "^SigBlk:" | sort | uniq -c)
if [ $((0x$caught >> 10 & 1)) -ne 1 ] || [ "$masks_before" != "$masks_after" ]; then
    echo "--pid on a process blocking every signal: SigCgt $caught (SIGSEGV's bit must be set);" \
        "masks before: $masks_before; after: $masks_after" >&2
    exit 1
fi
kill -TERM "$blocking_pid"
wait "$blocking_pid"
echo "--pid: a process whose threads block every signal joined and left 8 times, its masks and SIGSEGV action kept"

echo "== tracer test: --pid: gzip, a stale return address into the loader on its stack"
# gzip compressing a file keeps, in a frame of its main loop, a word that once was a return
# address into the dynamic loader (from a lazy binding at its start). A join that took such a
# word for a call under way refused gzip at every stop ("inside the dynamic loader"); where the
# loader's locks can be read, they say whether a thread is inside it.
if command -v gzip >/dev/null; then
    head -c 100000000 /dev/urandom >"$work/random.bin"
    gzip -9 -c "$work/random.bin" >/dev/null &
    gzip_pid=$!
    sleep 0.3
    status=0
    timeout -s KILL 60 "$bin/ffi-hook-tracer" --library libc.so.6 --symbols read,write --pid "$gzip_pid" \
        --duration 0.2 >/dev/null 2>"$work/gzip.err" || status=$?
    kill -KILL "$gzip_pid" 2>/dev/null || true
    wait "$gzip_pid" 2>/dev/null || true
    rm -f "$work/random.bin"
    if [ "$status" -ne 0 ] || ! grep -Eq "^ffi-hook-tracer: gzip \(pid [0-9]+\): [1-9][0-9,]* calls? of" "$work/gzip.err"; then
        echo "--pid on gzip compressing a file: status $status" >&2
        cat "$work/gzip.err" >&2
        exit 1
    fi
    echo "--pid: gzip compressing a file joined, its reads and writes counted"
else
    echo "(no gzip here: the join of gzip is not tried)"
fi

echo "== tracer test: --pid: a process inside qsort, calling its comparator"
# sorts.c is inside the C library's qsort nearly all the time (a quarter of a second a sort),
# and in its own comparator the rest: a stop in the C library is let run towards its return into
# the program (50 ms, then twice as long each time, up to 800 ms), a stop in the comparator is
# taken once half the patience has gone. Joined four times: each must work.
"$work/sorts" >"$work/sorts.out" &
sorting_pid=$!
wait_for_line "$work/sorts.out" ready
for round in 1 2 3 4; do
    status=0
    timeout -s KILL 60 "$bin/ffi-hook-tracer" --library libc.so.6 --symbols malloc --pid "$sorting_pid" \
        --duration 0.1 >/dev/null 2>"$work/sorts.err" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "--pid on a process inside qsort, join $round: status $status" >&2
        cat "$work/sorts.err" >&2
        exit 1
    fi
done
kill -KILL "$sorting_pid"
wait "$sorting_pid" 2>/dev/null || true
echo "--pid: a process inside qsort joined four times"

echo "== tracer test: --pid: the tracer's library replaced while it traces"
# A rebuild replaces the tracer's library while a join traces: the process's mapping of it then
# reads "(deleted)". The leave took the library for unloaded and left its hooks in the process,
# whose later joins failed. A copy of the tracer whose library is replaced mid-window must
# leave with status 0, and a second join must work.
mkdir -p "$work/moved"
cp "$bin/ffi-hook-tracer" "$bin/ffi-hook-tracer-join" "$bin/libFFIHookTracer.so" "$bin/libFFIHookTracerStart.so" \
    "$work/moved/"
"$work/churns" &
churning_pid=$!
sleep 0.2
"$work/moved/ffi-hook-tracer" --library libc.so.6 --symbols malloc,free --pid "$churning_pid" --duration 1.5 \
    >/dev/null 2>"$work/moved.err" &
moved_pid=$!
for _ in $(seq 100); do
    grep -q "libFFIHookTracer.so" /proc/"$churning_pid"/maps && break
    sleep 0.05
done
sleep 0.2
cp "$work/moved/libFFIHookTracer.so" "$work/moved/replacement.so"
mv "$work/moved/replacement.so" "$work/moved/libFFIHookTracer.so"
status=0
wait "$moved_pid" || status=$?
grep -q "libFFIHookTracer.so (deleted)" /proc/"$churning_pid"/maps || {
    echo "the replaced library is not marked deleted in the process's maps" >&2
    exit 1
}
if [ "$status" -eq 0 ]; then
    timeout -s KILL 60 "$work/moved/ffi-hook-tracer" --library libc.so.6 --symbols malloc,free \
        --pid "$churning_pid" --duration 0.2 >/dev/null 2>>"$work/moved.err" || status=$?
fi
kill -KILL "$churning_pid"
wait "$churning_pid" 2>/dev/null || true
if [ "$status" -ne 0 ]; then
    echo "--pid with the tracer's library replaced while it traced: status $status" >&2
    cat "$work/moved.err" >&2
    exit 1
fi
echo "--pid: the tracer's library replaced while it traced; the leave and a later join worked"

echo "== tracer test: --pid: a joiner killed with SIGKILL, the joined process leaves by itself"
# A joiner cannot catch SIGKILL: the process it joined watches it, and when it ends before
# leaving, removes the hooks and the report's private directory itself; a later join works.
"$work/crashes" wait >/dev/null 2>&1 &
watched_pid=$!
sleep 0.3
# The joiner's report directory goes in a TMPDIR of the test's own, which the process must
# leave empty.
mkdir -p "$work/joiner-tmp"
# (malloc and free traced too: their import entries sit in read-only pages, whose writes at the
# leave fault under the fault guard on the watch's thread, which must not block SIGSEGV.)
TMPDIR="$work/joiner-tmp" "$bin/ffi-hook-tracer" --library libtracee.so --library libc.so.6 \
    --symbols 'tracee_*,malloc,free' --pid "$watched_pid" 2>"$work/killed-joiner.err" &
joiner_pid=$!
for _ in $(seq 100); do
    grep -q "^ffi-hook-watch$" /proc/"$watched_pid"/task/*/comm 2>/dev/null && break
    sleep 0.05
done
grep -q "^ffi-hook-watch$" /proc/"$watched_pid"/task/*/comm
if [ -z "$(ls -A "$work/joiner-tmp")" ]; then
    echo "the joiner made its report directory elsewhere than in TMPDIR" >&2
    exit 1
fi
kill -KILL "$joiner_pid"
wait "$joiner_pid" || true
for _ in $(seq 100); do
    grep -q "^ffi-hook-watch$" /proc/"$watched_pid"/task/*/comm 2>/dev/null || break
    sleep 0.05
done
if grep -q "^ffi-hook-watch$" /proc/"$watched_pid"/task/*/comm; then
    echo "the joined process still watches a joiner killed 5 s ago" >&2
    exit 1
fi
if [ -n "$(ls -A "$work/joiner-tmp")" ]; then
    echo "the killed joiner's report directory was left in its TMPDIR: $(ls -A "$work/joiner-tmp")" >&2
    exit 1
fi
if ! kill -0 "$watched_pid" 2>/dev/null; then
    echo "the joined process died when it left by itself after its joiner was killed" >&2
    exit 1
fi
"$bin/ffi-hook-tracer" --library libtracee.so --pid "$watched_pid" --duration 0.3 2>"$work/rejoined.err"
grep -Eq "tracee_add +[1-9]" "$work/rejoined.err"
kill -KILL "$watched_pid"
wait "$watched_pid" 2>/dev/null || true
echo "--pid: after its joiner was killed, the process left by itself and was joined again"

echo "== tracer test: --pid: a process that opens a library by bare name through its own RUNPATH"
# bare-names loop opens libdeep.so through libopener.so's DT_RUNPATH in a loop: joined (the
# tracer attaches to every object's dlopen to follow loads), its dlopen must still see
# libopener.so as its caller, or the open fails and the process exits.
"$work/bare/bare-names" loop 2>"$work/bare/loop.err" &
loop_pid=$!
sleep 0.2
for mode in "--scope all" --inline; do
    status=0
    # shellcheck disable=SC2086 # the mode is two words or one
    "$bin/ffi-hook-tracer" $mode --library libdeep.so --pid "$loop_pid" --duration 0.3 \
        >/dev/null 2>"$work/bare/loop-join.err" || status=$?
    if [ "$status" -ne 0 ] || ! kill -0 "$loop_pid" 2>/dev/null; then
        echo "--pid $mode on a loop of dlopen by bare name: status $status" >&2
        cat "$work/bare/loop-join.err" "$work/bare/loop.err" >&2
        exit 1
    fi
done
kill -KILL "$loop_pid"
wait "$loop_pid" 2>/dev/null || true
echo "--pid: a process opening a library by bare name through a library's RUNPATH joined twice, still opening it"

# traced_as_plain NAME LIBRARY PATTERN MODES COMMAND...: runs COMMAND plainly, then under the
# tracer with --library LIBRARY in each of MODES (options, "|" between modes; an empty one is
# the default scope), 30 s at most each; fails unless each run's standard output is the plain
# run's and its report has a line matching PATTERN (137: it hung).
traced_as_plain() {
    local name=$1 library=$2 pattern=$3 modes=$4 mode status
    shift 4
    "$@" >"$work/$name.plain"
    while IFS= read -r mode; do
        status=0
        # shellcheck disable=SC2086 # a mode is options, split into words
        timeout -s KILL 30 "$bin/ffi-hook-tracer" $mode --library "$library" -- "$@" \
            >"$work/$name.out" 2>"$work/$name.err" || status=$?
        if [ "$status" -ne 0 ] || ! cmp -s "$work/$name.plain" "$work/$name.out" || ! grep -Eq "$pattern" "$work/$name.err"; then
            echo "$name traced with --library $library ${mode:-(the default scope)}: status $status (137: it hung)" >&2
            cat "$work/$name.out" "$work/$name.err" >&2
            exit 1
        fi
    done <<<"${modes//|/$'\n'}"
}

echo "== tracer test: a library that compares the address it takes of its own function"
# libcrypto's CRYPTO_malloc calls the allocator it was given when that is not CRYPTO_malloc,
# comparing with the address libcrypto's own GOT entry holds: with a hook there (the default
# scope attached to it, as to an import), every allocation called itself for ever. Python's
# hashlib allocates through it.
digest_script='import hashlib; print(hashlib.sha256(b"tracer").hexdigest())'
traced_as_plain crypto libcrypto.so.3 "^ffi-hook-tracer: python3[.0-9]* \(pid [0-9]+\): [0-9,]+ calls of" \
    "|--scope all|--inline" python3 -c "$digest_script"
echo "libcrypto traced in the default scope, --scope all and --inline: hashlib's digest as without the tracer"

echo "== tracer test: a constructor that walks its stack while the traced program's dlopen runs it"
# The tracer's dlopen calls the loader through a `ret` in the caller's object (so that the
# loader sees the caller); an unwinder meets that `ret` as a return address and looks up the
# rule of the byte before it. Picked after a pop, the rule read the wrong slot: the walk lost
# every frame above dlopen, or crashed. The caller's library has a `ret` after an instruction
# that leaves the stack pointer alone, deep in a function (caller_plain: an inline patch of the
# function's start leaves it); the program calls dlopen itself too (its own code has none an
# unwinder describes: the walk stops there, whole up to it).
mkdir -p "$work/unwind"
cat >"$work/unwind/walker.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unwind.h>
static int frames, seen;
static _Unwind_Reason_Code visit(struct _Unwind_Context *context, void *unused) {
    (void)unused;
    Dl_info info;
    frames++;
    if (dladdr((void *)_Unwind_GetIP(context), &info) && info.dli_sname && strcmp(info.dli_sname, "load_from_lib") == 0)
        seen = 1;
    return _URC_NO_REASON;
}
__attribute__((constructor)) static void walk(void) {
    frames = seen = 0;
    _Unwind_Reason_Code status = _Unwind_Backtrace(visit, NULL);
    printf("walk: %s, load_from_lib %s\n", status == _URC_END_OF_STACK ? "to its end" : "cut short",
           seen ? "seen" : "not seen");
    fflush(stdout);
}
int walker_value(void) { return 5; }
C
cat >"$work/unwind/caller.c" <<'C'
#include <dlfcn.h>
/* A `ret` after `xor eax, eax`, 42 bytes into a function the unwind table describes. */
__asm__(".text\n.globl caller_plain\n.type caller_plain, @function\ncaller_plain:\n.cfi_startproc\n"
        ".rept 40\nnop\n.endr\nxor %eax, %eax\nret\nint3\n.cfi_endproc\n.size caller_plain, . - caller_plain\n");
__attribute__((noinline)) int load_from_lib(const char *path) {
    void *handle = dlopen(path, RTLD_NOW);
    if (!handle) return -1;
    int (*value)(void) = (int (*)(void))dlsym(handle, "walker_value");
    int result = value();
    dlclose(handle);
    return result;
}
C
cat >"$work/unwind/main.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int load_from_lib(const char *path);
int main(int argc, char **argv) {
    (void)argc;
    printf("from the library: %d\n", load_from_lib(argv[1]));
    void *handle = dlopen(argv[1], RTLD_NOW);
    printf("from the program: %s\n", handle ? "loaded" : "not loaded");
    return 0;
}
C
gcc -O2 -shared -fPIC -o "$work/unwind/libwalker.so" "$work/unwind/walker.c"
gcc -O2 -shared -fPIC -o "$work/unwind/libcaller.so" "$work/unwind/caller.c"
gcc -O2 -o "$work/unwind/main" "$work/unwind/main.c" -L"$work/unwind" -lcaller -Wl,-rpath,"$work/unwind"
"$work/unwind/main" "$work/unwind/libwalker.so" >"$work/unwind/plain.out"
for mode in "" --inline; do
    status=0
    # shellcheck disable=SC2086 # the mode is one word or none
    timeout -s KILL 30 "$bin/ffi-hook-tracer" $mode --library libcaller.so -- "$work/unwind/main" \
        "$work/unwind/libwalker.so" >"$work/unwind/traced.out" 2>"$work/unwind/traced.err" || status=$?
    if [ "$status" -ne 0 ] || ! cmp -s "$work/unwind/plain.out" "$work/unwind/traced.out"; then
        echo "a constructor's stack walk during the traced dlopen ${mode:-(import tables)}: status $status" >&2
        diff "$work/unwind/plain.out" "$work/unwind/traced.out" >&2 || true
        cat "$work/unwind/traced.err" >&2
        exit 1
    fi
done
cat "$work/unwind/plain.out"
echo "a constructor's stack walk during the traced dlopen: to its end, its caller seen, as without the tracer"

echo "== tracer test: --inline: threads that load and unload a library while calling it"
# Three threads each load libsqlite3, call one of its functions and unload it, 100 times: the
# library comes and goes, and comes back at the same address. One thread's dlclose and
# another's dlopen could both happen before the walk after the dlclose: the dlopen's walk took
# the new copy for the traced one (same path, same address) and its calls went untraced (a
# third lost in some runs). Every call counted, in every run.
cat >"$work/reloaders.c" <<'C'
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
static void *cycle(void *unused) {
    (void)unused;
    for (int round = 0; round < 100; round++) {
        void *library = dlopen("libsqlite3.so.0", RTLD_NOW);
        if (!library) return (void *)1;
        int (*version)(void) = (int (*)(void))dlsym(library, "sqlite3_libversion_number");
        if (!version || version() <= 0) return (void *)1;
        dlclose(library);
    }
    return NULL;
}
/* Busy threads, so that the loading threads are preempted anywhere, as on a loaded machine. */
static volatile int finished;
static void *spin(void *unused) {
    (void)unused;
    volatile unsigned long work = 0;
    while (!finished) work++;
    return NULL;
}
int main(void) {
    pthread_t threads[3], spinners[2];
    for (int index = 0; index < 2; index++) pthread_create(&spinners[index], NULL, spin, NULL);
    for (int index = 0; index < 3; index++) pthread_create(&threads[index], NULL, cycle, NULL);
    int failed = 0;
    for (int index = 0; index < 3; index++) {
        void *result;
        pthread_join(threads[index], &result);
        failed |= result != NULL;
    }
    finished = 1;
    for (int index = 0; index < 2; index++) pthread_join(spinners[index], NULL);
    printf("%s\n", failed ? "a call failed" : "300 calls made");
    return failed;
}
C
gcc -O2 -o "$work/reloaders" "$work/reloaders.c" -ldl -lpthread
for run in 1 2 3 4 5; do
    status=0
    timeout -s KILL 60 "$bin/ffi-hook-tracer" --inline --library libsqlite3.so.0 -- "$work/reloaders" \
        >"$work/reloaders.out" 2>"$work/reloaders.err" || status=$?
    if [ "$status" -ne 0 ] || ! grep -q "^300 calls made$" "$work/reloaders.out" ||
        ! grep -Eq "^sqlite3_libversion_number +300 " "$work/reloaders.err"; then
        echo "threads loading and unloading libsqlite3 under --inline, run $run: status $status" >&2
        cat "$work/reloaders.out" >&2
        grep -E "sqlite3_libversion_number|calls of" "$work/reloaders.err" >&2
        exit 1
    fi
done
echo "--inline: three threads loading, calling and unloading libsqlite3: 300 calls counted in each of 5 runs"

echo "== tracer test: a library unloaded unseen, or by another thread, and loaded again at its address"
# relinked.so imports relinked_double from librelinkedtarget.so (traced). The program loads it,
# calls it 5 times and unloads it, in rounds: with the C library's dlclose taken by dlvsym, which
# the tracer does not see (also with another library loaded while the first is gone and kept
# while it is loaded again: the walk after that load found the first gone, and the walk after the
# next load, with no unload between, took the copy loaded again for it), and from four threads at
# once, where one thread's dlclose
# and another's dlopen can both come before the walk after the dlclose. Either way the new copy,
# at the old address under the old path, has a fresh import table: a walk took it for the copy it
# had attached to, and its calls went uncounted (5 of 250 unseen; 4 in 1,000 from threads). Every
# call counted, in the import-table scopes and inline.
cat >"$work/relinkedtarget.c" <<'C'
/* Long enough for an inline patch. */
int relinked_double(int value) {
    volatile int twice = value * 2;
    return twice;
}
C
cat >"$work/relinked.c" <<'C'
int relinked_double(int);
int relinked_run(void) {
    int made = 0;
    for (int call = 0; call < 5; call++) made += relinked_double(call) == 2 * call;
    return made;
}
C
cat >"$work/relinker.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
static const char *path, *other;
static int (*unload)(void *);
static int rounds;
static void *cycle(void *unused) {
    (void)unused;
    long made = 0;
    for (int round = 0; round < rounds; round++) {
        void *library = dlopen(path, RTLD_NOW);
        if (!library) return NULL;
        int (*run)(void) = (int (*)(void))dlsym(library, "relinked_run");
        if (run) made += run();
        if (unload(library) != 0) return NULL;
        if (!other) continue;
        /* Another library loaded while the first is gone, and kept while that is loaded again. */
        void *between = dlopen(other, RTLD_NOW);
        library = dlopen(path, RTLD_NOW);
        if (!between || !library) return NULL;
        run = (int (*)(void))dlsym(library, "relinked_run");
        if (run) made += run();
        if (unload(library) != 0 || unload(between) != 0) return NULL;
    }
    return (void *)made;
}
int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) return 2;
    path = argv[1];
    other = argc == 4 ? argv[3] : NULL;
    int threads = 1;
    if (strcmp(argv[2], "unseen") == 0) {
        /* The C library's own dlclose, past the one the tracer's start library puts first. */
        unload = (int (*)(void *))dlvsym(RTLD_DEFAULT, "dlclose", "GLIBC_2.34");
        if (!unload) unload = (int (*)(void *))dlvsym(RTLD_DEFAULT, "dlclose", "GLIBC_2.2.5");
        rounds = 50;
    } else {
        unload = dlclose;
        threads = 4;
        rounds = 250;
    }
    if (!unload) return 2;
    pthread_t thread[4];
    for (int index = 0; index < threads; index++) pthread_create(&thread[index], NULL, cycle, NULL);
    long made = 0;
    for (int index = 0; index < threads; index++) {
        void *result;
        pthread_join(thread[index], &result);
        made += (long)result;
    }
    /* Unloaded at the end (nothing else keeps it), so each round had loaded a new copy. */
    void *left = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    printf("%ld %d\n", made, left == NULL);
    return 0;
}
C
gcc -O1 -shared -fPIC -o "$work/librelinkedtarget.so" "$work/relinkedtarget.c"
gcc -O1 -shared -fPIC -o "$work/relinked.so" "$work/relinked.c" -L"$work" -l:librelinkedtarget.so -Wl,-rpath,"$work"
# (Too big for the place the two others leave: they are loaded again there.)
cat >"$work/relinkedother.c" <<'C'
char relinked_other_buffer[1 << 20];
int relinked_other(void) { return relinked_other_buffer[0]; }
C
gcc -O1 -shared -fPIC -o "$work/librelinkedother.so" "$work/relinkedother.c"
gcc -O2 -o "$work/relinker" "$work/relinker.c" -ldl -lpthread
for how in unseen unseen-between threads; do
    for mode in "" "--scope all" --inline; do
        between=()
        if [ "$how" = unseen-between ]; then between=("$work/librelinkedother.so"); fi
        # shellcheck disable=SC2086 # the mode is two words, one or none
        timeout -s KILL 120 "$bin/ffi-hook-tracer" $mode --library librelinkedtarget.so --json "$work/relinker.json" -- \
            "$work/relinker" "$work/relinked.so" "${how%-between}" "${between[@]}" >"$work/relinker.out" 2>"$work/relinker.err"
        python3 - "$work/relinker.json" "$work/relinker.out" "$how" "${mode:-import tables}" <<'PYTHON'
import json, sys
made, unloaded = (int(word) for word in open(sys.argv[2]).read().split())
if made != {"unseen": 250, "unseen-between": 500}.get(sys.argv[3], 5000) or not unloaded:
    sys.exit(f"{sys.argv[3]}, {sys.argv[4]}: the program made {made} calls, unloaded at the end: {unloaded}")
rows = {row["name"]: row["calls"] for row in json.load(open(sys.argv[1]))["functions"]}
if rows.get("relinked_double", 0) != made:
    sys.exit(f"{sys.argv[3]}, {sys.argv[4]}: relinked_double counted {rows.get('relinked_double', 0)} of {made} times")
print(f"{sys.argv[3]} unloads, {sys.argv[4]}: all {made} calls counted")
PYTHON
    done
done

echo "== tracer test: a program built without PIE that takes the address of a traced function"
# A non-PIE program that takes strlen's address makes its own PLT entry strlen's address for
# every lookup (the loader's RTLD_DEFAULT among them): its lazily bound entry, bound to that
# before the hook went in, led to itself, and the first strlen call never returned.
cat >"$work/nopie.c" <<'C'
#include <stdio.h>
#include <string.h>
size_t (*volatile taken)(const char *) = strlen;
int main(int argc, char **argv) {
    (void)argc;
    printf("%zu %d\n", strlen(argv[0]), taken == strlen);
    return 0;
}
C
gcc -O2 -no-pie -fno-pie -o "$work/nopie" "$work/nopie.c"
traced_as_plain nopie libc.so.6 "^strlen +1 " "|--scope main|--scope all" "$work/nopie"
echo "a non-PIE program taking strlen's address: output as plain, its one strlen call counted, in three scopes"

echo "== tracer test: --inline: a local function whose caller keeps values in registers across the call"
# GCC's -fipa-ra (on at -O2) lets the caller of a function that binds locally (static, hidden)
# keep values in the caller-saved registers the function does not write: ipra_twice keeps its
# argument in edi and the first result in edx across its second call of ipra_helper. Traced
# inline, every register the function leaves alone must come back as it left: the attach path
# wrote rdi, rsi, r10 and r11, and the program computed wrong sums (14x + 9 expected).
cat >"$work/ipra.c" <<'C'
static __attribute__((noinline)) int ipra_helper(int x) { return x * 7 + 1; }
int ipra_twice(int x) { return ipra_helper(x) + ipra_helper(x + 1); }
C
cat >"$work/ipra-main.c" <<'C'
#include <stdio.h>
int ipra_twice(int);
int main(void) {
    int wrong = 0;
    for (int x = 0; x < 5; x++) wrong += ipra_twice(x) != 14 * x + 9;
    printf("%d wrong\n", wrong);
    return wrong != 0;
}
C
gcc -O2 -fipa-ra -fPIC -shared -o "$work/libipra.so" "$work/ipra.c"
gcc -O2 -o "$work/ipra" "$work/ipra-main.c" -L"$work" -lipra -Wl,-rpath,"$work"
# The premise: right after a call of ipra_helper, ipra_twice reads edi, which it did not save.
if ! objdump -d --no-show-raw-insn "$work/libipra.so" | grep -A1 "call.*<ipra_helper>" | grep -q "%edi"; then
    echo "premise: gcc's ipra_twice no longer reads edi after calling ipra_helper" >&2
    objdump -d --no-show-raw-insn "$work/libipra.so" | sed -n '/<ipra_twice>:/,/^$/p' >&2
    exit 1
fi
status=0
"$bin/ffi-hook-tracer" --inline --library libipra.so -- "$work/ipra" >"$work/ipra.out" 2>"$work/ipra.err" || status=$?
if [ "$status" -ne 0 ] || ! grep -q "^0 wrong$" "$work/ipra.out" || ! grep -Eq "^ipra_helper +10 " "$work/ipra.err" ||
    ! grep -Eq "^ipra_twice +5 " "$work/ipra.err"; then
    echo "--inline on a library whose caller keeps registers across a local call: status $status" >&2
    cat "$work/ipra.out" "$work/ipra.err" >&2
    exit 1
fi
echo "--inline: ipra_twice's five sums right with ipra_helper (static, called with edi and edx kept) traced, 10 and 5 calls"

echo "== tracer test: --log with %p: a forked child that execs keeps what it logged before the exec"
# The child logs three calls to its own file, then execs; the new image (same process ID)
# appends its call to that file. It made the file anew, and the three lines were lost.
cat >"$work/fork-exec.c" <<'C'
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc > 1) return strlen(argv[1]) != 5;
    pid_t child = fork();
    if (child == 0) {
        volatile size_t sum = 0;
        for (int round = 0; round < 3; round++) sum += strlen("before");
        execl("/proc/self/exe", argv[0], "after", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
C
gcc -O0 -fno-builtin -o "$work/fork-exec" "$work/fork-exec.c"
status=0
"$bin/ffi-hook-tracer" --library libc.so.6 --symbols strlen --log "$work/fork-exec-%p.log" -- "$work/fork-exec" \
    2>"$work/fork-exec.err" || status=$?
child_log=$(grep -l 'strlen("after")' "$work"/fork-exec-*.log 2>/dev/null | head -1)
if [ "$status" -ne 0 ] || [ -z "$child_log" ] || [ "$(grep -c 'strlen("before")' "$child_log")" -ne 3 ]; then
    echo "--log %p, a child that forks and execs: status $status, its file ${child_log:-none}:" >&2
    cat "$work"/fork-exec-*.log "$work/fork-exec.err" >&2
    exit 1
fi
echo "--log %p: a forked child's three lines and its exec'd image's one, in one file"

echo "== tracer test: two output options that name one file"
for pair in "--json --log" "--log --chrome-trace" "--flamegraph --timeline" "--json --folded"; do
    read -r first second <<<"$pair"
    status=0
    "$bin/ffi-hook-tracer" --library libc.so.6 "$first" "$work/shared.out" "$second" "$work/./shared.out" -- /bin/true \
        2>"$work/shared.err" || status=$?
    if [ "$status" -ne 64 ] || ! grep -qE -- "($first and $second|$second and $first) name the same file" "$work/shared.err"; then
        echo "$first and $second with one file: status $status" >&2
        cat "$work/shared.err" >&2
        exit 1
    fi
done
status=0
"$bin/ffi-hook-tracer" --library libc.so.6 --duration 2147483647 --pid 1 2>"$work/duration.err" || status=$?
if [ "$status" -ne 64 ] || ! grep -q -- "--duration takes fewer than 1000000000 seconds" "$work/duration.err"; then
    echo "--duration 2147483647: status $status" >&2
    cat "$work/duration.err" >&2
    exit 1
fi
echo "two outputs naming one file refused before the program runs (four pairs); --duration's limit named"

echo "== tracer test: a set-user-ID program is said to be untraced"
# The loader ignores LD_PRELOAD in a program that changes its user (secure mode): nothing of the
# tracer runs there, and it ended with no word at all.
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
    cp /bin/true "$work/setuid-true"
    chown nobody "$work/setuid-true"
    chmod 4755 "$work/setuid-true"
    status=0
    "$bin/ffi-hook-tracer" --library libc.so.6 -- "$work/setuid-true" 2>"$work/setuid.err" || status=$?
    if [ "$status" -ne 0 ] || ! grep -q "is set-user-ID, set-group-ID or has file capabilities" "$work/setuid.err"; then
        echo "a set-user-ID program: status $status" >&2
        cat "$work/setuid.err" >&2
        exit 1
    fi
    echo "a set-user-ID program: it runs, and the tracer says none of its calls are traced"
else
    echo "(not root: the set-user-ID case needs a file owned by another user)"
fi

echo "== tracer test: --log: a thread that ends inside a traced call"
# pthread_exit never returns: its call is in flight as the thread ends, and is written then,
# ending <no return>, as the help says of the thread that exits (it was never written).
cat >"$work/thread-exit.c" <<'C'
#include <pthread.h>
#include <stdio.h>
static void *body(void *unused) {
    (void)unused;
    pthread_exit(NULL);
}
int main(void) {
    pthread_t thread;
    pthread_create(&thread, NULL, body, NULL);
    pthread_join(thread, NULL);
    puts("joined");
    return 0;
}
C
gcc -O0 -o "$work/thread-exit" "$work/thread-exit.c" -lpthread
for mode in "" --inline; do
    rm -f "$work/thread-exit.log" "$work/thread-exit.json"
    status=0
    # shellcheck disable=SC2086 # the mode is one word or none
    "$bin/ffi-hook-tracer" $mode --library libc.so.6 --symbols pthread_exit --log "$work/thread-exit.log" \
        --chrome-trace "$work/thread-exit.json" -- \
        "$work/thread-exit" >"$work/thread-exit.out" 2>"$work/thread-exit.err" || status=$?
    if [ "$status" -ne 0 ] || [ "$(grep -c 'pthread_exit(.*<no return>$' "$work/thread-exit.log")" -ne 1 ]; then
        echo "--log $mode, a thread ended by pthread_exit: status $status, the log:" >&2
        cat "$work/thread-exit.log" "$work/thread-exit.err" >&2
        exit 1
    fi
    # The Chrome trace ends the call with its thread, as one that never returned (not as one
    # still running when the process exited, which it was not).
    python3 - "$work/thread-exit.json" <<'PY' || exit 1
import json, sys
trace = json.load(open(sys.argv[1]))
calls = [e for e in trace["traceEvents"] if e.get("name") == "pthread_exit" and e.get("ph") in ("X", "B", "E")]
endings = [e.get("args", {}).get("ended") for e in calls if e.get("ph") in ("X", "E")]
if endings != ["no return seen"]:
    sys.exit(f"--chrome-trace: pthread_exit's ending is {endings}, not ['no return seen']: {calls}")
PY
done
echo "--log and --chrome-trace: a thread's pthread_exit written as it ends, <no return>, through the import table and inline"
echo "== tracer test: a program that opens 150 libraries, some twice, then a traced one by a link"
# Until a traced library appears, each dlopen has the start library look at the loaded objects;
# then each later one has the tracer attach to the new object's entries alone. Objects looked at
# once are passed over after (a dlopen of a hundred-odd objects cost a walk of them all, with
# their links resolved, and the tracer pinned every object at every load): here the traced
# library comes after 150 others, some unloaded and loaded again, under a link whose target's
# name alone is the --library name, and every call of its function from the 60 libraries loaded
# after it (some unloaded and loaded again too) is counted.
mkdir -p "$work/many"
echo 'int target_call(int value) { return value + 1; }' >"$work/many/target.c"
gcc -O1 -fPIC -shared -Wl,-soname,libtarget.so.1 -o "$work/many/libtarget-real.so" "$work/many/target.c"
ln -sf libtarget-real.so "$work/many/libtarget.so.1"
ln -sf libtarget.so.1 "$work/many/libtarget.so"
for index in $(seq 0 149); do
    echo "int plain_$index(void) { return $index; }" >"$work/many/plain$index.c"
done
for index in $(seq 0 59); do
    printf 'int target_call(int);\nint user_%d(void) { return target_call(%d); }\n' "$index" "$index" >"$work/many/user$index.c"
done
# (Compiled two at a time by xargs: jobs of this shell would be left to the exit's kill.)
seq 0 149 | xargs -P 2 -I '{}' gcc -O1 -fPIC -shared -o "$work/many/libplain{}.so" "$work/many/plain{}.c"
seq 0 59 | xargs -P 2 -I '{}' gcc -O1 -fPIC -shared -o "$work/many/libuser{}.so" "$work/many/user{}.c" \
    -L"$work/many" -ltarget -Wl,-rpath,"$work/many"
cat >"$work/many/many.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
static void *load(const char *directory, const char *kind, int index) {
    char path[4096];
    snprintf(path, sizeof path, "%s/lib%s%d.so", directory, kind, index);
    void *handle = dlopen(path, RTLD_NOW);
    if (!handle) {
        fprintf(stderr, "%s\n", dlerror());
        exit(2);
    }
    return handle;
}
/* Calls user_INDEX of its library: one call of target_call. */
static long call(void *handle, int index) {
    char name[32];
    snprintf(name, sizeof name, "user_%d", index);
    int (*user)(void) = (int (*)(void))dlsym(handle, name);
    if (!user || user() != index + 1) exit(3);
    return 1;
}
int main(int argc, char **argv) {
    (void)argc;
    const char *directory = argv[1];
    for (int index = 0; index < 150; index++) {
        void *handle = load(directory, "plain", index);
        /* Every tenth unloaded and loaded again (where the loader may map it elsewhere). */
        if (index % 10 == 9) {
            dlclose(handle);
            load(directory, "plain", index);
        }
    }
    long calls = 0;
    for (int index = 0; index < 60; index++) {
        void *handle = load(directory, "user", index);
        calls += call(handle, index);
        if (index % 10 == 9) {
            dlclose(handle);
            calls += call(load(directory, "user", index), index);
        }
    }
    printf("%ld\n", calls);
    return 0;
}
C
gcc -O1 -o "$work/many/many" "$work/many/many.c" -ldl
# Also named by the end of its path, or of the path its link leads to (relative paths that do
# not lead anywhere from the program's working directory, /).
for run in "libtarget-real.so|" "libtarget-real.so|--scope all" "many/libtarget.so.1|" "many/libtarget-real.so|"; do
    library=${run%%|*}
    mode=${run#*|}
    # shellcheck disable=SC2086 # the mode is words or none
    (cd / && "$bin/ffi-hook-tracer" --library "$library" $mode --json "$work/many/counts.json" -- \
        "$work/many/many" "$work/many" >"$work/many/out" 2>"$work/many/err") || {
        echo "150 libraries then a traced one (--library $library $mode): the program failed" >&2
        cat "$work/many/err" >&2
        exit 1
    }
    python3 - "$work/many" "--library $library $mode" <<'PY' || exit 1
import json, sys
directory, mode = sys.argv[1], sys.argv[2]
made = int(open(f"{directory}/out").read())
counted = {row["name"]: row["calls"] for row in json.load(open(f"{directory}/counts.json"))["functions"]}
if made != 66 or counted.get("target_call") != made:
    sys.exit(f"150 libraries then a traced one ({mode}): {made} calls made, counted {counted}")
PY
done
# Without an output file the tracer loads only when the library appears (the start library's
# rule decides then): the table at exit counts the same.
(cd / && "$bin/ffi-hook-tracer" --library many/libtarget-real.so -- "$work/many/many" "$work/many" \
    >"$work/many/out" 2>"$work/many/err")
if ! grep -Eq '^target_call +66 ' "$work/many/err"; then
    echo "150 libraries then one named by the end of its link's target, loaded as it appears:" >&2
    cat "$work/many/err" >&2
    exit 1
fi
echo "150 libraries then a traced one by its link's target, or by the end of a path: each of 66 calls from 60 libraries loaded after it counted"
echo "== tracer test: a library that only a lazily bound object needed is unloaded with it"
# The tracer binds a lazy entry before attaching to it: looked up as the tracer's own library,
# the definition got a dependency of the tracer's on it and stayed loaded for good after the
# program's dlclose (a library rewritten in place and opened again then crashed the loader).
mkdir -p "$work/unload"
echo 'int unload_triple(int value) { return value * 3; }' >"$work/unload/definer.c"
printf 'int unload_triple(int);\nint unload_user(int value) { return unload_triple(value) + 1; }\n' >"$work/unload/user.c"
gcc -O1 -fPIC -shared -o "$work/unload/libunloaddef.so" "$work/unload/definer.c"
gcc -O1 -fPIC -shared -Wl,-z,lazy -o "$work/unload/libunloaduser.so" "$work/unload/user.c" -L"$work/unload" \
    -lunloaddef -Wl,-rpath,"$work/unload"
cat >"$work/unload/unload.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    (void)argc;
    char path[4096];
    snprintf(path, sizeof path, "%s/libunloaduser.so", argv[1]);
    void *handle = dlopen(path, RTLD_LAZY | RTLD_GLOBAL);
    if (!handle) return 2;
    int (*user)(int) = (int (*)(int))dlsym(handle, "unload_user");
    if (!user || user(4) != 13) return 3;
    dlclose(handle);
    snprintf(path, sizeof path, "%s/libunloaddef.so", argv[1]);
    puts(dlopen(path, RTLD_LAZY | RTLD_NOLOAD) ? "still loaded" : "unloaded");
    return 0;
}
C
gcc -O1 -o "$work/unload/unload" "$work/unload/unload.c" -ldl
for mode in "" "--scope all"; do
    # shellcheck disable=SC2086 # the mode is two words or none
    out=$("$bin/ffi-hook-tracer" --library libunloaddef.so $mode -- "$work/unload/unload" "$work/unload" 2>"$work/unload/err")
    if [ "$out" != "unloaded" ] || ! grep -Eq '^unload_triple +1 ' "$work/unload/err"; then
        echo "a lazily bound library's definition after its dlclose ($mode): $out" >&2
        cat "$work/unload/err" >&2
        exit 1
    fi
done
echo "a library that only a lazily bound object needed: its one call counted, unloaded with that object's dlclose"
echo "== tracer test: --inline, copies of one library loaded and unloaded: a row for each copy"
# A function's row is its file's (by path and offset), kept when the file is unloaded: the rows
# went by load address, so that a copy loaded after another was unloaded counted in that one's
# row, and the same copy loaded again in another. Three copies with one soname (the third is
# told apart by its path), loaded one at a time and then together.
mkdir -p "$work/twins"
echo 'int twin_work(int value) { volatile int local = value; return local + 1; }' >"$work/twins/twin.c"
for copy in 0 1 2; do
    gcc -O1 -fPIC -shared -Wl,-soname,libtwin.so -o "$work/twins/libtwin_$copy.so" "$work/twins/twin.c"
done
cat >"$work/twins/twins.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
static void *load(const char *directory, int copy) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libtwin_%d.so", directory, copy);
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}
static int call(void *handle, int times) {
    int (*work)(int) = (int (*)(int))dlsym(handle, "twin_work");
    int sum = 0;
    for (int index = 0; index < times; index++) sum += work(index);
    return sum;
}
int main(int argc, char **argv) {
    (void)argc;
    /* One at a time: copy 0 once, copy 1 twice, copy 2 three times, copy 0 again four times. */
    int sequence[4][2] = {{0, 1}, {1, 2}, {2, 3}, {0, 4}};
    for (int step = 0; step < 4; step++) {
        void *handle = load(argv[1], sequence[step][0]);
        if (!handle) return 2;
        call(handle, sequence[step][1]);
        dlclose(handle);
    }
    /* Together: 10, 20 and 30 calls. */
    void *handles[3];
    for (int copy = 0; copy < 3; copy++) {
        if (!(handles[copy] = load(argv[1], copy))) return 3;
    }
    for (int copy = 0; copy < 3; copy++) call(handles[copy], 10 * (copy + 1));
    for (int copy = 0; copy < 3; copy++) dlclose(handles[copy]);
    puts("done");
    return 0;
}
C
gcc -O1 -o "$work/twins/twins" "$work/twins/twins.c" -ldl
out=$("$bin/ffi-hook-tracer" --inline --library 'libtwin_*' --symbols twin_work -- "$work/twins/twins" "$work/twins" 2>"$work/twins/err")
rows=$(python3 - "$work/twins/err" <<'PY'
import re, sys
counts = {}
for line in open(sys.argv[1]):
    match = re.match(r"^(twin_work(?: \([^)]*\))?)\s+([\d,]+)\s", line)
    if match:
        counts[match.group(1)] = int(match.group(2).replace(",", ""))
plain = counts.get("twin_work")
print(" ".join(str(count) for count in sorted(counts.values())), "plain", plain, "names", len(counts))
PY
)
# Copy 0: 1 + 4 + 10; copy 1: 2 + 20; copy 2: 3 + 30. The plain row is the first copy's.
if [ "$out" != "done" ] || [ "$rows" != "15 22 33 plain 15 names 3" ]; then
    echo "--inline rows of three copies of one library: $out; $rows (expected 15 22 33, plain 15)" >&2
    cat "$work/twins/err" >&2
    exit 1
fi
grep -Eq '^twin_work \(libtwin\.so\+0x[0-9a-f]+\) +22 ' "$work/twins/err" &&
    grep -Eq "^twin_work \(.*/libtwin_2\.so\+0x[0-9a-f]+\) +33 " "$work/twins/err" || {
    echo "--inline rows of three copies: the second by its soname, the third by its path expected" >&2
    cat "$work/twins/err" >&2
    exit 1
}
echo "--inline, three copies of one library loaded one at a time, then again together: rows of 15, 22 and 33 calls, one for each copy"
echo "== tracer test: a child forked while a thread walks the loader's list reports at its exit"
# The loader's list stays locked for good in such a child (the walking thread is its parent's):
# the report's walk of the loaded objects waited for it for ever.
mkdir -p "$work/forkwalk"
cat >"$work/forkwalk/forkwalk.c" <<'C'
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
static volatile int inside;
static int hold(struct dl_phdr_info *info, size_t size, void *data) {
    (void)info; (void)size; (void)data;
    inside = 1;
    struct timespec pause = {0, 500 * 1000 * 1000};
    nanosleep(&pause, NULL);
    return 1;
}
static void *holder(void *unused) {
    (void)unused;
    dl_iterate_phdr(hold, NULL);
    return NULL;
}
int main(void) {
    pthread_t thread;
    pthread_create(&thread, NULL, holder, NULL);
    while (!inside) usleep(1000);
    pid_t child = fork();
    if (child == 0) {
        crc32(0, (const unsigned char *)"a", 1);
        exit(7);
    }
    int status = 0;
    for (int waited = 0; waited < 3000; waited++) {
        if (waitpid(child, &status, WNOHANG) == child) {
            pthread_join(thread, NULL);
            printf("child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            return 0;
        }
        usleep(1000);
    }
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    puts("child hung");
    return 1;
}
C
gcc -O1 -o "$work/forkwalk/forkwalk" "$work/forkwalk/forkwalk.c" -lz -lpthread
out=$("$bin/ffi-hook-tracer" --library libz.so.1 --symbols crc32 -- "$work/forkwalk/forkwalk" 2>"$work/forkwalk/err")
if [ "$out" != "child exited 7" ] || [ "$(grep -Ec '^crc32 +1 ' "$work/forkwalk/err")" != 1 ]; then
    echo "a child forked while a thread walked the loader's list: $out" >&2
    cat "$work/forkwalk/err" >&2
    exit 1
fi
echo "a child forked while a thread of its parent walked the loader's list: exited at once, its one call in its report"

echo "== tracer test: the wrapper's errors before the program runs, and a variable left in the environment"
mkdir -p "$work/installs/with space" "$work/installs/with:colon" "$work/installs/alone"
for place in "with space" "with:colon"; do
    cp "$bin/ffi-hook-tracer" "$bin/libFFIHookTracer.so" "$bin/libFFIHookTracerStart.so" "$work/installs/$place/"
    status=0
    "$work/installs/$place/ffi-hook-tracer" --library libtracee.so -- "$work/program" \
        >"$work/installs/out" 2>"$work/installs/err" || status=$?
    # The loader splits LD_PRELOAD at spaces and colons: said, and the program not run untraced.
    if [ "$status" != 127 ] || [ -s "$work/installs/out" ] || ! grep -q "space or a colon" "$work/installs/err"; then
        echo "the tracer in a directory named '$place': status $status" >&2
        cat "$work/installs/err" >&2
        exit 1
    fi
done
cp "$bin/ffi-hook-tracer" "$work/installs/alone/"
status=0
"$work/installs/alone/ffi-hook-tracer" --library libtracee.so -- "$work/program" 2>"$work/installs/err" || status=$?
if [ "$status" != 127 ] || ! grep -q "libFFIHookTracer.so is missing" "$work/installs/err" ||
    grep -q "usage:" "$work/installs/err"; then
    echo "the wrapper without its libraries: status $status" >&2
    cat "$work/installs/err" >&2
    exit 1
fi
printf 'not a program\n' >"$work/installs/not-executable"
status=0
"$bin/ffi-hook-tracer" --library libtracee.so -- "$work/installs/not-executable" 2>/dev/null || status=$?
missing=0
"$bin/ffi-hook-tracer" --library libtracee.so -- "$work/installs/no-such-program" 2>/dev/null || missing=$?
if [ "$status" != 126 ] || [ "$missing" != 127 ]; then
    echo "a program that cannot be run: $status (126 expected), one not found: $missing (127 expected)" >&2
    exit 1
fi
# FFI_HOOK_TRACER_OUTPUT is the join's, for the process it joins: one left exported in a shell
# must not send a started program's table to its file.
FFI_HOOK_TRACER_OUTPUT="$work/installs/leftover.txt" "$bin/ffi-hook-tracer" --library libtracee.so \
    --symbols tracee_nothing -- "$work/program" >/dev/null 2>"$work/installs/err"
if [ -e "$work/installs/leftover.txt" ] || ! grep -Eq '^tracee_nothing +777 ' "$work/installs/err"; then
    echo "a leftover FFI_HOOK_TRACER_OUTPUT took the table" >&2
    cat "$work/installs/err" >&2
    exit 1
fi
echo "the wrapper in a directory with a space or a colon, or without its libraries: 127 and why; 126 and 127 for programs that cannot run; a leftover output variable ignored"

echo "== tracer test: a recursion 100,000 calls deep in a flame graph, a versioned function's plain name, a thread that cannot be stopped"
# The flame graph is drawn depth first without recursion: one this deep overflowed the exiting
# thread's stack as the report was written (the program ended by SIGSEGV, the SVG cut short).
mkdir -p "$work/deep"
cat >"$work/deep/deep.c" <<'C'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef LIBRARY
__attribute__((noinline)) long deep_down(long n) {
    if (n == 0) return 0;
    long below = deep_down(n - 1);
    __asm__ volatile("");
    return below + 1;
}
#else
long deep_down(long n);
static void *run(void *depth) { return (void *)deep_down((long)depth); }
int main(int argc, char **argv) {
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setstacksize(&attributes, 1UL << 28);
    pthread_t thread;
    void *result;
    pthread_create(&thread, &attributes, run, (void *)atol(argv[1]));
    pthread_join(thread, &result);
    printf("%ld\n", (long)result);
    return 0;
}
#endif
C
gcc -O1 -fPIC -shared -o "$work/deep/libdeep.so" -DLIBRARY "$work/deep/deep.c"
gcc -O1 -pthread -o "$work/deep/deep" "$work/deep/deep.c" -L"$work/deep" -ldeep -Wl,-rpath,"$work/deep"
status=0
out=$("$bin/ffi-hook-tracer" --library libdeep.so --inline --flamegraph "$work/deep/deep.svg" \
    --events 300000 -- "$work/deep/deep" 100000 2>"$work/deep/err") || status=$?
if [ "$status" != 0 ] || [ "$out" != 100000 ] || [ "$(tail -1 "$work/deep/deep.svg")" != "</svg>" ] ||
    [ "$(grep -c 'deep_down' "$work/deep/deep.svg")" -lt 1000 ]; then
    echo "a recursion 100,000 deep: status $status, output '$out', SVG ending $(tail -c 40 "$work/deep/deep.svg")" >&2
    cat "$work/deep/err" >&2
    exit 1
fi
# Past the attach path's 512 nested calls of a thread, calls return without a leave block: the
# report says how many were counted without their time (100,001 calls, 512 of them timed).
if ! grep -q "^ffi-hook-tracer: 99,489 calls nested more than 512 traced calls deep on their thread counted without their time" \
    "$work/deep/err"; then
    echo "a recursion 100,000 deep: the calls counted without their time are not reported as 99,489" >&2
    cat "$work/deep/err" >&2
    exit 1
fi
# A symbol with two versions in the C library (pthread_cond_wait of GLIBC_2.3.2, which a program
# calls, and of GLIBC_2.2.5): the plain name is the current one's, as the loader binds it.
cat >"$work/deep/cond.c" <<'C'
#include <pthread.h>
#include <stdio.h>
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int ready;
static void *signal_it(void *unused) {
    pthread_mutex_lock(&lock);
    ready = 1;
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&lock);
    return unused;
}
int main(void) {
    pthread_t thread;
    pthread_mutex_lock(&lock);
    pthread_create(&thread, NULL, signal_it, NULL);
    while (!ready) pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    pthread_join(thread, NULL);
    puts("signalled");
    return 0;
}
C
gcc -O1 -pthread -o "$work/deep/cond" "$work/deep/cond.c"
"$bin/ffi-hook-tracer" --library libc.so.6 --inline --symbols 'pthread_cond_wait,pthread_cond_signal' -- \
    "$work/deep/cond" >/dev/null 2>"$work/deep/cond.err"
if ! grep -Eq '^pthread_cond_wait +1 ' "$work/deep/cond.err" || ! grep -Eq '^pthread_cond_signal +1 ' "$work/deep/cond.err"; then
    echo "pthread_cond_wait's current version was not reported by its plain name" >&2
    cat "$work/deep/cond.err" >&2
    exit 1
fi
# A thread that blocks every signal and never makes a system call cannot be stopped for the
# patching: the library is not traced, and the report says why.
cat >"$work/deep/spins.c" <<'C'
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static volatile int stop;
static void *spin(void *unused) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    unsigned long value = 0;
    while (!stop) value = value * 31 + 7;
    return unused;
}
int main(void) {
    pthread_t thread;
    pthread_create(&thread, NULL, spin, NULL);
    usleep(50000);
    void *zlib = dlopen("libz.so.1", RTLD_NOW);
    stop = 1;
    pthread_join(thread, NULL);
    puts(zlib ? "loaded" : "not loaded");
    return 0;
}
C
gcc -O1 -pthread -o "$work/deep/spins" "$work/deep/spins.c" -ldl
out=$("$bin/ffi-hook-tracer" --library libz.so.1 --inline -- "$work/deep/spins" 2>"$work/deep/spins.err")
if [ "$out" != loaded ] || ! grep -q "could not be attached to and are not traced: .*did not stop" "$work/deep/spins.err"; then
    echo "a thread blocking every signal: the report does not say why the library went untraced" >&2
    cat "$work/deep/spins.err" >&2
    exit 1
fi
echo "a recursion 100,000 deep drawn whole, 99,489 of its calls reported untimed; pthread_cond_wait and _signal under their plain names; a thread that cannot be stopped named"

echo "== tracer test: the wrapper's common run made before the C library starts, and the same environment either way"
# fast.c is the wrapper's entry point and runs before the C library has started: its object
# may name no symbol but the C library's start, which it goes on to when main.c is to run.
undefined=$(nm -u "$bin/CTracerFast.build/fast.c.o" | awk '{print $2}' | tr '\n' ' ')
if [ "$undefined" != "_start " ]; then
    echo "fast.c names symbols it does not define: $undefined" >&2
    exit 1
fi
# The common run executes the program with no system call of the C library's start before it
# (arch_prctl sets the thread pointer there); an option main.c takes starts the C library.
mkdir -p "$work/fast"
strace -f -o "$work/fast/common.strace" -e trace=execve,arch_prctl "$bin/ffi-hook-tracer" --library libtracee.so \
    --symbols 'tracee_*' --scope main --json "$work/fast/common.json" -- "$work/program" >/dev/null 2>&1
strace -f -o "$work/fast/full.strace" -e trace=execve,arch_prctl "$bin/ffi-hook-tracer" --library libtracee.so \
    --log "$work/fast/full.log" -- "$work/program" >/dev/null 2>&1
# The syscalls between the wrapper's execve and the program's.
before_program() { awk '/execve\(/ && /= 0$/ {n++; next} n == 1' "$1" | grep -c arch_prctl || true; }
if [ "$(before_program "$work/fast/common.strace")" != 0 ] || [ "$(before_program "$work/fast/full.strace")" = 0 ] ||
    ! grep -q '"tracee_nothing"' "$work/fast/common.json"; then
    echo "the common run did not skip the C library's start, or --log did not start it" >&2
    cat "$work/fast/common.strace" "$work/fast/full.strace" >&2
    exit 1
fi
# The same script with #! (executed at once) and without (the kernel refuses it: main.c then runs
# it through sh, as execvp does) sees the same environment: the variables set, those removed
# (left from a shell), LD_PRELOAD's first value kept after the start library and its other
# copies gone (the loader reads the last: the program ran untraced), a relative --json made
# absolute. The script is found through an empty entry of PATH, and named as execvp names it.
printf '#!/bin/sh\necho "$0"; env | grep -E "^(FFI_HOOK|LD_PRELOAD)" | grep -v "^FFI_HOOK_TRACER_PID=" | sort\n' \
    >"$work/fast/with"
tail -n +2 "$work/fast/with" >"$work/fast/without"
chmod +x "$work/fast/with" "$work/fast/without"
# Executes a program with the environment given, duplicates and all (env and shells merge them).
cat >"$work/fast/exact-environment.c" <<'C'
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int split = 1;
    while (split < argc && strcmp(argv[split], "--") != 0) split++;
    if (split + 1 >= argc) return 64;
    argv[split] = NULL;
    execve(argv[split + 1], argv + split + 1, argv + 1);
    return 127;
}
C
gcc -O1 -o "$work/fast/exact-environment" "$work/fast/exact-environment.c"
for script in with without; do
    (cd "$work/fast" && ./exact-environment FFI_HOOK_TRACER_OUTPUT=x FFI_HOOK_TRACER_LOG=y FFI_HOOK_TRACER_FOLDED=z \
        LD_PRELOAD=libm.so.6 LD_PRELOAD=libz.so.1 FFI_HOOK_TRACER_JSON=a FFI_HOOK_TRACER_JSON=b "PATH=:$PATH" -- \
        "$(command -v strace)" -f -o "$script.strace" -e trace=execve,arch_prctl "$bin/ffi-hook-tracer" \
        --library=libtracee.so --library libz.so.1 --symbols 'a*' --symbols=b --json=out.json --inline --scope all -- \
        "$script" >"$script.env" 2>/dev/null)
done
if ! diff <(tail -n +2 "$work/fast/with.env") <(tail -n +2 "$work/fast/without.env") >&2 ||
    [ "$(head -1 "$work/fast/with.env")" != with ] || [ "$(grep -c "^LD_PRELOAD=" "$work/fast/with.env")" != 1 ] ||
    [ "$(grep -c "^FFI_HOOK_TRACER_JSON=" "$work/fast/with.env")" != 1 ] ||
    ! grep -q "^FFI_HOOK_TRACER_JSON=$work/fast/out.json$" \
    "$work/fast/with.env" || ! grep -q "^LD_PRELOAD=$bin/libFFIHookTracerStart.so:libm.so.6$" "$work/fast/with.env" ||
    grep -q "FFI_HOOK_TRACER_OUTPUT\|FFI_HOOK_TRACER_LOG\|FFI_HOOK_TRACER_FOLDED" "$work/fast/with.env" ||
    [ "$(before_program "$work/fast/with.strace")" != 0 ] || [ "$(before_program "$work/fast/without.strace")" = 0 ]; then
    echo "the wrapper's two ways set different environments, or the common run started the C library" >&2
    cat "$work/fast/with.env" "$work/fast/with.strace" "$work/fast/without.strace" >&2
    exit 1
fi
echo "the common run executes the program before the C library starts; main.c's runs set the same environment"

echo "== tracer test: names with a semicolon or a control character in the folded stacks and the table"
mkdir -p "$work/names"
python3 - "$work/names/names.s" <<'PYTHON'
import sys
# (A tab: gas warns of a newline in a name, which takes the same way.)
names = ["semi;colon", "tab\there"]
with open(sys.argv[1], "w") as out:
    out.write(".text\n")
    for name in names:
        quoted = '"' + name + '"'
        out.write(f".globl {quoted}\n.type {quoted}, @function\n{quoted}:\n")
        out.write("  push %rbp\n  mov %rsp,%rbp\n  lea 1(%rdi),%eax\n  nop; nop; nop; nop; nop; nop; nop; nop\n")
        out.write(f"  pop %rbp\n  ret\n.size {quoted}, .-{quoted}\n")
    out.write('.section .note.GNU-stack,"",@progbits\n')
PYTHON
gcc -shared -o "$work/names/libnames.so" "$work/names/names.s"
cat >"$work/names/names.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *library = dlopen(argv[1], RTLD_NOW);
    const char *names[] = {"semi;colon", "tab\there"};
    int sum = 0;
    for (int name = 0; name < 2; name++) {
        int (*function)(int) = library ? (int (*)(int))dlsym(library, names[name]) : NULL;
        if (!function) return 2;
        for (int call = 0; call <= name; call++) sum += function(call);
    }
    printf("%d\n", sum);
    return 0;
}
C
gcc -O0 -o "$work/names/names" "$work/names/names.c" -ldl
"$bin/ffi-hook-tracer" --inline --library libnames.so --folded "$work/names/folded" --log "$work/names/log" \
    -- "$work/names/names" "$work/names/libnames.so" >/dev/null 2>"$work/names/err"
python3 - "$work/names" <<'PYTHON'
import sys
work = sys.argv[1]
lines = open(f"{work}/folded").read().splitlines()
# Each function called on its own: a stack of one frame each, its name's `;` and tab as `?`.
frames = sorted(line.rsplit(" ", 1)[0] for line in lines)
assert frames == ["semi?colon", "tab?here"], f"folded stacks: {lines}"
table = open(f"{work}/err").read().splitlines()
rows = {line.split()[0]: int(line.split()[1]) for line in table if line.startswith(("semi", "tab"))}
assert rows == {"semi;colon": 1, "tab?here": 2}, f"the table's rows: {table}"
# The log: a line a call, the tab written `?` there too.
log = open(f"{work}/log").read().splitlines()
calls = [line for line in log if "semi;colon" in line or "tab?here" in line]
assert len(calls) == 3 and sum("tab?here" in line for line in calls) == 2, f"the log: {log}"
assert not any("\t" in line for line in log), f"a tab in the log: {log}"
print("a name's semicolon and tab: one frame, one row and a log line a call each (calls 1 and 2)")
PYTHON

echo "== tracer test: a second copy of a library, loaded under another name, counts only its own calls"
mkdir -p "$work/copies"
cp "$(gcc -print-file-name=libz.so.1)" "$work/copies/copyz.so"
cat >"$work/copies/copies.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <zlib.h>
int main(int argc, char **argv) {
    /* The copy has libz's soname, exports crc32 too, and is never called: the program's own
       calls are bound to the libz it was linked with. */
    if (!dlopen(argv[1], RTLD_NOW)) return 2;
    unsigned long sum = 0;
    for (int call = 0; call < 5; call++) sum = crc32(sum, (const unsigned char *)"a", 1);
    printf("%lu\n", sum);
    return 0;
}
C
gcc -O0 -o "$work/copies/copies" "$work/copies/copies.c" -lz -ldl
for scope in program main all; do
    "$bin/ffi-hook-tracer" --scope "$scope" --library copyz.so --symbols crc32 \
        -- "$work/copies/copies" "$work/copies/copyz.so" >/dev/null 2>"$work/copies/copy.err"
    "$bin/ffi-hook-tracer" --scope "$scope" --library libz.so.1 --symbols crc32 \
        -- "$work/copies/copies" "$work/copies/copyz.so" >/dev/null 2>"$work/copies/both.err"
    # Named by its file name, the copy answers alone; by the soname, both do.
    if grep -Eq '^crc32 ' "$work/copies/copy.err" || ! grep -Eq '^crc32 +5 ' "$work/copies/both.err" ||
        grep -q "cannot hook" "$work/copies/copy.err" "$work/copies/both.err"; then
        echo "scope $scope: the copy's calls" >&2
        cat "$work/copies/copy.err" "$work/copies/both.err" >&2
        exit 1
    fi
done
echo "a copy of libz loaded under another name: none of the program's 5 crc32 calls counted as its, all 5 under the soname both answer to, in each scope"

echo "== tracer test: a program that calls neither malloc nor free, started, ended by a signal and joined: none of the tracer's own calls counted"
# The tracer's own calls just before and after the stretches of its own work were the
# program's: the Swift closure that carried the work into the stretch (boxed on the heap before
# it, freed after), the configuration and the join's strings (freed after the hooks were in). A
# program that called neither was reported with 4 calls of free and 2 of malloc started with
# --inline, and 24 and 6 joined with --inline. Then, with --inline: the start library's unlock
# after the tracer's load (one pthread_mutex_unlock more than the program's locks), the errno
# a signal's report saved (one __errno_location), and the join's munmap of the stack its calls
# ran on (one munmap at every join).
gcc -O0 -o "$work/quiet" "$fixture/quiet.c"
watched=malloc,free,calloc,realloc,mmap,munmap,__errno_location,pthread_mutex_lock,pthread_mutex_unlock
# The table's rows (name and calls) on standard input: none of the program's calls of the
# allocator, of mmap and munmap, or of __errno_location, and as many unlocks as locks (the C
# library's exit locks one mutex).
quiet_calls() {
    python3 -c '
import re, sys
rows = dict(re.findall(r"^(\S+) +(\d+) ", sys.stdin.read(), re.M))
wrong = {name: calls for name, calls in rows.items() if name not in ("pthread_mutex_lock", "pthread_mutex_unlock", "function")}
if wrong or rows.get("pthread_mutex_lock") != rows.get("pthread_mutex_unlock"):
    sys.exit(f"counted: {rows}")
'
}
for mode in "" --inline; do
    "$bin/ffi-hook-tracer" $mode --library libc.so.6 --symbols "$watched" -- "$work/quiet" \
        >/dev/null 2>"$work/quiet.err"
    if ! quiet_calls <"$work/quiet.err"; then
        echo "started ${mode:-through import tables}: calls counted in a program that makes none" >&2
        cat "$work/quiet.err" >&2
        exit 1
    fi
    # Ended by SIGTERM, its report made in the signal's handler.
    "$bin/ffi-hook-tracer" $mode --library libc.so.6 --symbols "$watched" -- "$work/quiet" wait \
        >"$work/quiet-ended.out" 2>"$work/quiet-ended.err" &
    tracer_pid=$!
    for attempt in $(seq 100); do
        [ -s "$work/quiet-ended.out" ] && break
        sleep 0.02
    done
    kill -TERM "$(head -1 "$work/quiet-ended.out")"
    wait "$tracer_pid" 2>/dev/null || true
    if ! grep -q "ended by SIGTERM" "$work/quiet-ended.err" || ! quiet_calls <"$work/quiet-ended.err"; then
        echo "started ${mode:-through import tables}, ended by SIGTERM: calls counted in a program that makes none" >&2
        cat "$work/quiet-ended.err" >&2
        exit 1
    fi
done
"$work/quiet" wait >"$work/quiet-wait.out" &
quiet_pid=$!
for attempt in $(seq 50); do
    [ -s "$work/quiet-wait.out" ] && break
    sleep 0.02
done
# Joined twice with --inline: the second join is made in a process whose tracer has left once.
for mode in "" --inline --inline; do
    "$bin/ffi-hook-tracer" $mode --library libc.so.6 --symbols "$watched" --pid "$quiet_pid" \
        --duration 0.3 >/dev/null 2>"$work/quiet-joined.err"
    if ! grep -q "(pid $quiet_pid): 0 calls of 0 functions" "$work/quiet-joined.err"; then
        echo "joined ${mode:-through import tables}: calls counted in a program that makes none" >&2
        cat "$work/quiet-joined.err" >&2
        exit 1
    fi
done
kill -KILL "$quiet_pid"
wait "$quiet_pid" 2>/dev/null || true
echo "a program that calls neither malloc nor free: none of the tracer's own calls counted, started, ended by SIGTERM or joined, with and without --inline"

echo "== tracer test: a program's threads, traced inline: the C library's calls for them as gdb counts them"
# The planning's sweep runs on a thread of the tracer's own. The C library kept that thread's
# stack in its cache, and the program's first pthread_create took it, freeing the thread-local
# blocks left in it (17 calls of free) and allocating none for itself (one calloc fewer): calls
# the program made only because the tracer had run a thread. gdb counts the calls of free,
# calloc and malloc from main (breakpoints at their first instructions) of the same program run
# alone; before main it calls none of them.
if command -v gdb >/dev/null; then
    {
        echo "set pagination off"
        echo "break main"
        echo "run"
        for function in free calloc malloc; do
            printf 'set $%s = 0\nbreak *%s\ncommands\nsilent\nset $%s = $%s + 1\ncontinue\nend\n' \
                "$function" "$function" "$function" "$function"
        done
        echo "continue"
        echo 'printf "counted free %d calloc %d malloc %d\n", $free, $calloc, $malloc'
    } >"$work/threads.commands"
    gdb -q -batch -x "$work/threads.commands" --args "$work/quiet" threads >"$work/threads.gdb" 2>&1
    "$bin/ffi-hook-tracer" --inline --library libc.so.6 --symbols free,calloc,malloc --json "$work/threads.json" \
        -- "$work/quiet" threads 2>/dev/null
    python3 - "$work/threads.gdb" "$work/threads.json" <<'PYTHON'
import json, re, sys
found = re.search(r"^counted free (\d+) calloc (\d+) malloc (\d+)$", open(sys.argv[1]).read(), re.M)
if not found:
    sys.exit("gdb did not count the calls: " + open(sys.argv[1]).read()[-2000:])
expected = dict(zip(("free", "calloc", "malloc"), map(int, found.groups())))
if expected["free"] == 0 and expected["calloc"] == 0:
    sys.exit(f"gdb counted no calls for the threads: the test tests nothing ({expected})")
report = json.load(open(sys.argv[2]))
counted = {name: 0 for name in expected}
for function in report["functions"]:
    if function["name"] in counted:
        counted[function["name"]] = function["calls"]
if counted != expected:
    sys.exit(f"four threads started and joined, traced inline: counted {counted}, gdb counted {expected}")
print(f"four threads started and joined, traced inline: {counted}, as gdb counts them")
PYTHON
else
    echo "gdb is not installed: skipped"
fi
