#!/usr/bin/env bash
# hookbench --peers: frida-gum's Interceptor (attach with empty C listeners, replace and
# replaceFast with a C replacement that calls the original) beside this library's hooks and
# the floors, on one function, in one process: its slot hooks on the function called through
# a slot, its inline hooks and frida's patches on the same function called directly. Makes a
# Python virtual environment with PyPI's frida package under Benchmarks/.build/ on first use
# (that needs the network), then runs Scripts/bench.sh with --peers and the given options
# (--json, --markdown, --quick, --samples N).
# frida attaches through ptrace: Yama's ptrace_scope 2 asks for root (or CAP_SYS_PTRACE), 3
# forbids it; hookbench lifts mode 1's restriction for its own process.
# Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=Benchmarks/.build/frida-venv
if ! "$venv/bin/python3" -c "import frida" 2>/dev/null; then
    if ! python3 -c "import ensurepip, venv" 2>/dev/null; then
        echo "== installing python3-venv" >&2
        sudo=""
        if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
        $sudo apt-get update >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends python3-venv >&2
    fi
    echo "== making $venv with PyPI's frida" >&2
    python3 -m venv "$venv" >&2
    "$venv/bin/python3" -m pip install --quiet frida >&2
fi
PATH="$PWD/$venv/bin:$PATH" exec Scripts/bench.sh --peers Benchmarks/Peers/frida-peer.py "$@"
