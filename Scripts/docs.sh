#!/usr/bin/env bash
# Builds the DocC documentation of FFIHook, FFIHookCore, FFIHookObjC and FFIHookInline as one combined archive, with every
# warning treated as an error: a broken ``symbol`` link, an undocumented parameter, a compiler
# warning while the symbol graphs are extracted. Exits non-zero on any of them.
#
#   Scripts/docs.sh [OUTPUT_DIR]
#
# With OUTPUT_DIR the combined archive is written there, ready for static hosting (open
# OUTPUT_DIR/index.html through a web server, or serve the directory as it is); without it,
# the archive stays in the scratch path. DOCS_SCRATCH_PATH overrides the scratch path
# (default .build-docs, kept apart from the package's .build).
set -euo pipefail
cd "$(dirname "$0")/.."

scratch="${DOCS_SCRATCH_PATH:-.build-docs}"
output_args=()
if (($# > 1)); then
    echo "usage: $0 [OUTPUT_DIR]" >&2
    exit 2
fi
if (($# == 1)); then
    mkdir -p "$1"
    output="$(cd "$1" && pwd)"
    output_args=(--allow-writing-to-directory "$output" generate-documentation --output-path "$output")
else
    output_args=(generate-documentation)
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT

echo "== building the documentation of FFIHook, FFIHookCore, FFIHookObjC and FFIHookInline" >&2
start=$SECONDS
status=0
swift package --scratch-path "$scratch" "${output_args[@]}" \
    --target FFIHookCore --target FFIHook --target FFIHookObjC --target FFIHookInline \
    --enable-experimental-combined-documentation \
    --warnings-as-errors 2>&1 | tee "$log" || status=$?

# docc turns its own warnings into errors; anything else that calls itself a warning (the
# compiler's, the plugin's) fails the build here.
warnings=$(grep -cE '(^|: )warning:' "$log" || true)
errors=$(grep -cE '(^|: )error:' "$log" || true)
echo "== documentation: $warnings warnings, $errors errors, $((SECONDS - start)) s" >&2
if ((status != 0 || warnings != 0 || errors != 0)); then
    echo "== the documentation build failed" >&2
    exit 1
fi
