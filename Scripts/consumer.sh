#!/usr/bin/env bash
# Builds and runs Tests/Consumer, a package that depends on this one as users' packages do:
# by version, from a clone of this repository's HEAD tagged 1.0.0, with only the products
# the package declares. Its programs run the README's examples and the documentation's tasks
# and exit non-zero when one does not hold.
set -euo pipefail
cd "$(dirname "$0")/.."

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone --quiet . "$work/swift-ffi-hook"
git -C "$work/swift-ffi-hook" tag 1.0.0
mkdir -p "$work/consumer"
cp -R Tests/Consumer/. "$work/consumer/"
sed -i "s#SWIFT_FFI_HOOK_URL#file://$work/swift-ffi-hook#" "$work/consumer/Package.swift"
echo "== consumer: building against swift-ffi-hook 1.0.0 (HEAD $(git rev-parse --short HEAD))"
swift build --package-path "$work/consumer"
bin="$(swift build --package-path "$work/consumer" --show-bin-path)"
"$bin/Consumer"
"$bin/ConsumerObjC"
"$bin/ConsumerSwift5"
echo "== consumer: its tests (Swift Testing, in parallel)"
swift test --package-path "$work/consumer" --disable-xctest
