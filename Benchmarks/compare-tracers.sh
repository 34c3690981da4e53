#!/usr/bin/env bash
# The tracer beside ltrace, uftrace and frida-trace on three workloads: the sqlite3 shell on
# `:memory:` inserting 20,000 rows and scanning them, gzip compressing a 50 MB file, and a
# small program that dlopens a zlib plugin after it starts and checksums a buffer 200,000
# times. Each runs plain, under ffi-hook-tracer (import-table mode and --inline), under
# `ltrace -c`, under `uftrace record --force` and under `frida-trace` (handlers that only
# count), with the same functions selected. Apart: how long one dlopen of libsqlite3 takes
# when a tool attaches to its 1,370 functions as it loads. Prints Markdown tables: wall times (median of
# the runs), what each tool adds on the workload and on an idle run, per call, the ratios to
# the targets, and the call counts each tool saw.
#
#     Benchmarks/compare-tracers.sh [--runs N] [--ltrace-runs N] [--frida-runs N]
#                                   [--only sqlite|gzip|dlopen|attach] [--output FILE]
#
# Installs Debian's sqlite3, ltrace, uftrace, gzip, gcc and zlib's headers when they are
# missing, and PyPI's frida-tools into a virtual environment (FRIDA_VENV, by default
# ~/.cache/compare-tracers-venv) when `frida-trace` is not on the PATH; builds the tracer
# (Programs/, release). Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
# The libraries built for the tracer make their generic types' metadata by accessors (the
# manifest's FFI_HOOK_DIRECT_METADATA): a traced process starts faster.
export FFI_HOOK_DIRECT_METADATA=1

missing=()
for package in sqlite3 ltrace uftrace gzip python3 python3-venv gcc zlib1g-dev; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    echo "== installing ${missing[*]}" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi

# frida-trace comes from PyPI (frida-tools), installed once into its own virtual environment.
frida_trace=$(command -v frida-trace || true)
if [ -z "$frida_trace" ]; then
    venv=${FRIDA_VENV:-$HOME/.cache/compare-tracers-venv}
    if [ ! -x "$venv/bin/frida-trace" ]; then
        echo "== installing frida-tools into $venv" >&2
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install --quiet frida-tools >&2
    fi
    frida_trace=$venv/bin/frida-trace
fi

echo "== building the tracer (release)" >&2
(cd Programs && swift build -c release --product FFIHookTracer >&2 &&
    swift build -c release --product FFIHookTracerStart >&2 &&
    swift build -c release --product ffi-hook-tracer >&2 &&
    swift build -c release --product ffi-hook-tracer-join >&2)
bin=$(cd Programs && swift build -c release --show-bin-path)

exec python3 Benchmarks/compare-tracers.py --tracer "$bin/ffi-hook-tracer" --frida-trace "$frida_trace" "$@"
