#!/bin/bash
# The VM test suite, run INSIDE the guest by Tools/vm/run-tests.sh (cwd = repo root, root,
# BLE_HCI_IN_VM=1). Each step has its own timeout; the suite's exit code is the number of
# failed steps (0 = all passed).
#   VM_TEST_FILTER  swift-testing filter for the Swift part (default: UserChannel)
#   VM_TEST_BUNDLE  the built test bundle (default: .build/debug/ble-hciPackageTests.xctest)
set -u
failed=0
step() {  # step NAME TIMEOUT CMD...
    local name=$1 t=$2; shift 2
    echo "=== vm-test: $name"
    local s=$(date +%s.%N)
    timeout -k 5 "$t" "$@"
    local rc=$?
    local d=$(echo "$(date +%s.%N) - $s" | bc)
    if [ "$rc" = 0 ]; then echo "=== vm-test: $name PASSED (${d}s)"
    elif [ "$rc" = 69 ] && [ "${ALLOW_NO_TESTS:-0}" = 1 ]; then
        echo "=== vm-test: $name: no test matched the filter (exit 69), not counted as a failure"
    else
        [ "$rc" = 124 ] && echo "=== vm-test: $name TIMED OUT after ${t}s"
        echo "=== vm-test: $name FAILED (exit $rc, ${d}s)"; failed=$((failed + 1))
    fi
}

step "kernel user channel smoke test (Tools/vm/smoke_vhci.py)" 60 /usr/bin/python3 Tools/vm/smoke_vhci.py

BUNDLE=${VM_TEST_BUNDLE:-.build/debug/ble-hciPackageTests.xctest}
if [ -x "$BUNDLE" ]; then
    ALLOW_NO_TESTS=1 step "Swift tests matching '${VM_TEST_FILTER:-UserChannel}'" 180 \
        "$BUNDLE" --testing-library swift-testing --filter "${VM_TEST_FILTER:-UserChannel}"
else
    echo "=== vm-test: no $BUNDLE (build it on the host first: swift build --build-tests); Swift part skipped"
fi

# Further guest-side steps: every executable Tools/vm/tests.d/*, in name order.
for t in Tools/vm/tests.d/*; do
    [ -x "$t" ] && [ -f "$t" ] && step "$t" 180 "$t"
done

echo "=== vm-test: $failed step(s) failed"
exit "$failed"
