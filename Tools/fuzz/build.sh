#!/bin/bash
# Builds the libFuzzer targets (Tools/fuzz/Targets/NAME → .build/fuzz/$FUZZ_CONFIG/fuzz-NAME,
# FUZZ_CONFIG debug (default) or release) with
# AddressSanitizer and libFuzzer's coverage, in their own build directory so the normal
# build is untouched. BLE_HCI_FUZZ=1 makes Package.swift declare them. lld links: gold
# fails on these objects (internal error in format_file_lineno).
#   Tools/fuzz/build.sh NAME...
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PATH:/opt/swift/usr/bin
for t in "$@"; do
    BLE_HCI_FUZZ=1 ${SWIFT:-swift} build --build-path .build/fuzz -c "${FUZZ_CONFIG:-debug}" \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld --product "fuzz-$t" 2>&1 \
        | grep -v "Cannot export local symbol" || { echo "fuzz: building fuzz-$t failed" >&2; exit 1; }
done
