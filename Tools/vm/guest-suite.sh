#!/bin/bash
# The VM test suite, run INSIDE the guest by Tools/vm/run-tests.sh (cwd = repo root, root,
# BLE_HCI_IN_VM=1). Each step has its own timeout; the suite's exit code is the number of
# failed steps (0 = all passed).
#   VM_BUILD_DIR    where the host build is (default .build/debug): ble-hci and the test bundle
#   VM_TEST_FILTER  swift-testing filter (a regular expression on test IDs such as
#                   `VirtualControllerTests.VMTests/userChannelIsExclusive()`, as --list-tests
#                   prints them) for the Swift part (default: the VMTests suite, the user-channel
#                   tests that need this kernel)
#   VM_TEST_BUNDLE  the built test bundle (default: $VM_BUILD_DIR/ble-hciPackageTests.xctest)
#   VM_STEPS        which steps to run: a comma list of smoke,swift,cli,extra (default: all)
set -u
failed=0
BUILD=${VM_BUILD_DIR:-.build/debug}
STEPS=",${VM_STEPS:-smoke,swift,cli,extra},"
step() {  # step NAME TIMEOUT CMD...
    local name=$1 t=$2; shift 2
    echo "=== vm-test: $name"
    local s=$(date +%s.%N)
    timeout -k 5 "$t" "$@"
    local rc=$?
    local d=$(echo "$(date +%s.%N) - $s" | bc)
    if [ "$rc" = 0 ]; then echo "=== vm-test: $name PASSED (${d}s)"
    else
        [ "$rc" = 124 ] && echo "=== vm-test: $name TIMED OUT after ${t}s"
        [ "$rc" = 69 ] && echo "=== vm-test: $name: exit 69 = no test matched the filter (while --list-tests listed some): a failure"
        echo "=== vm-test: $name FAILED (exit $rc, ${d}s)"; failed=$((failed + 1))
    fi
}

[[ $STEPS == *,smoke,* ]] &&
    step "kernel user channel smoke test (Tools/vm/smoke_vhci.py)" 60 /usr/bin/python3 Tools/vm/smoke_vhci.py

BUNDLE=${VM_TEST_BUNDLE:-$BUILD/ble-hciPackageTests.xctest}
# Runs the matching Swift tests; a test that skips itself here (e.g. BLE_HCI_IN_VM unset) is
# a failure: in the guest every selected test must run.
swift_tests() {  # swift_tests BUNDLE FILTER
    local out rc
    out=$("$1" --testing-library swift-testing --filter "$2" 2>&1)
    rc=$?
    echo "$out"
    if echo "$out" | grep -E 'Test [A-Za-z0-9_]+\(.*\) skipped|Suite [A-Za-z0-9_]+ skipped'; then
        echo "=== vm-test: the tests above skipped themselves in the guest"; return 1
    fi
    return $rc
}
FILTER=${VM_TEST_FILTER:-'\.VMTests/'}
if [[ $STEPS == *,swift,* ]]; then
    if [ -x "$BUNDLE" ]; then
        # Run the Swift part only when the bundle has tests that match; then exit 69
        # ("no test matched") cannot happen silently: it is a failure.
        matching=$(timeout 60 "$BUNDLE" --testing-library swift-testing --list-tests 2>/dev/null | grep -cE "$FILTER")
        if [ "${matching:-0}" -gt 0 ]; then
            step "Swift tests matching '$FILTER' ($matching)" 180 \
                bash -c "$(declare -f swift_tests); swift_tests \"\$@\"" swift_tests "$BUNDLE" "$FILTER"
        else
            echo "=== vm-test: no Swift test in $BUNDLE matches '$FILTER': FAILED"; failed=$((failed + 1))
        fi
    else
        echo "=== vm-test: no $BUNDLE (build it on the host first: swift build --build-tests): FAILED"; failed=$((failed + 1))
    fi
fi

# The CLI on the real kernel: controllers --listen vhci, peripheral/central/scan over user
# channels, error paths, BlueZ (hcitool, gatttool) as the peer.
if [[ $STEPS == *,cli,* ]]; then
    if [ -x "$BUILD/ble-hci" ]; then
        BLE_HCI_BIN="$BUILD/ble-hci" step "ble-hci CLI on the kernel (Tools/vm/cli_tests.py)" 200 \
            /usr/bin/python3 Tools/vm/cli_tests.py
    else
        echo "=== vm-test: no $BUILD/ble-hci (build it on the host: swift build): FAILED"; failed=$((failed + 1))
    fi
fi

# Further guest-side steps: every executable Tools/vm/tests.d/*, in name order.
if [[ $STEPS == *,extra,* ]]; then
    for t in Tools/vm/tests.d/*; do
        [ -x "$t" ] && [ -f "$t" ] && step "$t" 180 "$t"
    done
fi

echo "=== vm-test: $failed step(s) failed"
exit "$failed"
