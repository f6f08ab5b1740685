#!/bin/bash
# Entry point of `make vm-test`: prepares the VM (kernel + initramfs, cached) and runs the
# VM test suite (Tools/vm/guest-suite.sh) inside one guest. Exit: the suite's result.
# Skips (loud message, exit 0) only when qemu cannot run at all on this machine.
#   VM_TEST_FILTER (default UserChannel), VM_TEST_BUNDLE, VM_TIMEOUT (default 300) and the
#   run.sh variables (VM_KEEP=1, VM_CPU, ...) are honoured. See docs/vm.md.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

skip() {
    echo "##############################################################################" >&2
    echo "## SKIPPED: the VM test suite (real kernel HCI user channel) did NOT run:" >&2
    echo "##   $*" >&2
    echo "##############################################################################" >&2
    exit 0
}

"$HERE/prepare.sh" || {
    command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 is not installed and could not be installed"
    echo "vm-test: Tools/vm/prepare.sh failed" >&2; exit 1
}
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 is not installed"
out=$(timeout 20 qemu-system-x86_64 -version 2>&1 </dev/null) || skip "qemu-system-x86_64 cannot run here: $out"

cd "$REPO"
start=$(date +%s)
VM_TIMEOUT=${VM_TIMEOUT:-300} "$HERE/run.sh" env \
    VM_TEST_FILTER="${VM_TEST_FILTER:-UserChannel}" \
    VM_TEST_BUNDLE="${VM_TEST_BUNDLE:-.build/debug/ble-hciPackageTests.xctest}" \
    Tools/vm/guest-suite.sh
rc=$?
echo "vm-test: exit $rc after $(( $(date +%s) - start ))s" >&2
exit $rc
