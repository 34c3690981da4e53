#!/usr/bin/env bash
# A whole library attached, this library beside frida-gum's Interceptor: every function that
# libcrypto.so.3 exports attached with empty enter and leave code, in a process that loaded it
# and read its pages. This library plans the library as one batch and attaches empty blocks to
# every function (hookbench --library-child attach); frida attaches empty C listeners to every
# export in one JavaScript turn from its injected agent (Benchmarks/Peers/frida-library.py).
# Prints one Markdown table of functions attached, refused, milliseconds and resident memory
# added (frida's agent apart). Makes the same virtual environment with PyPI's frida as
# Scripts/bench-peers.sh on first use (that needs the network). Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=Benchmarks/.build/frida-venv
if ! "$venv/bin/python3" -c "import frida" 2>/dev/null; then
    echo "== making $venv with PyPI's frida" >&2
    python3 -m venv "$venv" >&2
    "$venv/bin/python3" -m pip install --quiet frida >&2
fi
echo "== building Benchmarks/ (release)" >&2
swift build --package-path Benchmarks -c release --product hookbench >&2 ||
    swift build --package-path Benchmarks -c release --product hookbench >&2
hookbench="$(swift build --package-path Benchmarks -c release --show-bin-path)/hookbench"
runs=${1:-3}
echo "| run | tool | functions | attached | refused | ms | resident KiB added |"
echo "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"
for run in $(seq 1 "$runs"); do
    ours=$("$hookbench" --library-child attach)
    theirs=$("$venv/bin/python3" Benchmarks/Peers/frida-library.py "$hookbench" libcrypto.so.3)
    python3 - "$run" "$ours" "$theirs" <<'PY'
import json
import sys

run, ours, theirs = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
print(f"| {run} | swift-ffi-hook | {ours['functions']} | {ours['attached']} | {ours['refused']} "
      f"| {ours['milliseconds']:.0f} | {ours['residentKiB']} |")
print(f"| {run} | frida {theirs['frida']} | {theirs['functions']} | {theirs['attached']} | {theirs['refused']} "
      f"| {theirs['milliseconds']} | {theirs['residentKiBAttach']} (its agent: {theirs['residentKiBAgent']}) |")
PY
done
