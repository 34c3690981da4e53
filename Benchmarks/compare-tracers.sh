#!/usr/bin/env bash
# The tracer beside ltrace and uftrace on two real workloads: the sqlite3 shell on
# `:memory:` inserting 20,000 rows and scanning them, and gzip compressing a 50 MB file. Each
# runs plain, under ffi-hook-tracer, under `ltrace -c` and under `uftrace record --force`,
# with the same functions selected (the sqlite3_* functions the shell calls; every libc
# function gzip calls). Prints a Markdown table of wall times (median of the runs) and of the
# call counts each tool saw for the functions they share.
#
#     Benchmarks/compare-tracers.sh [--runs N] [--ltrace-runs N] [--only sqlite|gzip] [--output FILE]
#
# Installs Debian's sqlite3, ltrace, uftrace and gzip when they are missing; builds the
# tracer (Programs/, release). Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
for package in sqlite3 ltrace uftrace gzip python3; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    echo "== installing ${missing[*]}" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi

echo "== building the tracer (release)" >&2
(cd Programs && swift build -c release --product FFIHookTracer >&2 && swift build -c release --product ffi-hook-tracer >&2)
bin=$(cd Programs && swift build -c release --show-bin-path)

exec python3 Benchmarks/compare-tracers.py --tracer "$bin/ffi-hook-tracer" "$@"
