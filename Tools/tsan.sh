#!/bin/bash
# `make tsan`: the Swift tests under ThreadSanitizer (docs/tsan.md), built in .build/tsan so the
# normal build is untouched. Runs the in-process test targets (TSAN_FILTER, a swift-testing
# regular expression on test IDs); the interop and CLI targets are left out: their concurrency
# is in child processes (Bumble, ble-hci) that TSan in this process cannot see.
# Exit: the test run's (a TSan report makes the test binary exit non-zero).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/opt/swift/usr/bin
FILTER=${TSAN_FILTER:-'^(HCITests|TransportTests|CaptureTests|VirtualControllerTests|HostTests|L2CAPTests|ATTTests|GATTTests|SMPTests|DecoderTests|BLETests)\.'}
${SWIFT:-swift} build --build-path .build/tsan --build-tests --sanitize=thread
# halt_on_error=0: every report is printed, not only the first.
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=0:second_deadlock_stack=1} \
    ${SWIFT:-swift} test --build-path .build/tsan --skip-build --sanitize=thread --no-parallel --filter "$FILTER"
