#!/usr/bin/env bash
# Builds the benchmarks in Benchmarks/ in release and runs hookbench with the given options
# (none: the full run, printed as a table; `--quick` for CI; `--help` lists the others).
# On a Debian machine with only the Swift toolchain it first installs what it needs; only
# hookbench's report goes to standard output (everything else to standard error), so
# `--json > results.json` is valid JSON on a fresh machine too.
set -euo pipefail
cd "$(dirname "$0")/.."

# libzydis-dev: the inline rows link FFIHookInline, whose relocator decodes with Zydis.
# libssl3: libcrypto.so.3, the library the library rows plan and patch whole.
packages=(libffi-dev pkg-config gcc gobjc libgnustep-base-dev libzydis-dev libssl3)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    echo "== installing ${missing[*]}" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi

echo "== building Benchmarks/ (release)" >&2
# SwiftPM 6.3 on Linux sometimes crashes (in libdispatch) while it runs package-benchmark's
# build-tool plugin; a second attempt goes through, so a crash is retried once.
swift build --package-path Benchmarks -c release --product hookbench >&2 ||
    swift build --package-path Benchmarks -c release --product hookbench >&2
echo "== hookbench $*" >&2
exec "$(swift build --package-path Benchmarks -c release --show-bin-path)/hookbench" "$@"
