#!/bin/bash
# Entry point of `make vm-test`: prepares the VM (kernel + initramfs, cached), runs the VM
# test suite (Tools/vm/guest-suite.sh) inside one guest, then the host-side checks of what
# the guest wrote (Tools/vm/host-checks.sh: tshark on the capture). Exit: 0 only when all
# passed; 77 = skipped (loud message), only when qemu cannot run at all on this machine
# (Tools/test-suite.sh reports it as skipped, and under CI=true as a failure).
#   VM_BUILD_DIR (default .build/debug: where ble-hci and the test bundle were built on the
#   host; outside the repository it must not be under /tmp, the guest's own tmpfs), VM_TEST_FILTER,
#   VM_TEST_BUNDLE, VM_STEPS, VM_TIMEOUT (default 290) and the run.sh variables (VM_KEEP=1,
#   VM_CPU, ...) are honoured. See docs/vm.md.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

skip() {
    echo "##############################################################################" >&2
    echo "## SKIPPED: the VM test suite (real kernel HCI user channel) did NOT run:" >&2
    echo "##   $*" >&2
    echo "##############################################################################" >&2
    exit 77
}

"$HERE/prepare.sh" || {
    command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 is not installed and could not be installed"
    echo "vm-test: Tools/vm/prepare.sh failed" >&2; exit 1
}
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 is not installed"
out=$(timeout 20 qemu-system-x86_64 -version 2>&1 </dev/null) || skip "qemu-system-x86_64 cannot run here: $out"

cd "$REPO"
BUILD=${VM_BUILD_DIR:-.build/debug}
case "$(readlink -f "$BUILD")" in
    "$REPO"/*) ;;  # the guest sees the repository at the same path, even under /tmp
    /tmp|/tmp/*) echo "vm-test: VM_BUILD_DIR=$BUILD is under /tmp (outside the repository), which the guest replaces with its own tmpfs; build inside the repository or elsewhere" >&2; exit 1 ;;
esac
for tool in hciconfig hcitool gatttool btmgmt; do
    command -v "$tool" >/dev/null || { echo "vm-test: $tool missing on the host (the guest uses the host's root): run Tools/setup.sh (Debian package bluez)" >&2; exit 1; }
done

SHARE=$(mktemp -d "${TMPDIR:-/tmp}/ble-hci-vmtest.XXXXXX")
cleanup() {
    if [ "${VM_KEEP:-0}" = 1 ]; then echo "vm-test: kept $SHARE" >&2; else rm -rf "$SHARE"; fi
}
trap cleanup EXIT

start=$(date +%s)
VM_SHARE_DIR=$SHARE VM_TIMEOUT=${VM_TIMEOUT:-290} "$HERE/run.sh" env \
    VM_BUILD_DIR="$BUILD" \
    VM_TEST_FILTER="${VM_TEST_FILTER:-\.VMTests/}" \
    VM_TEST_BUNDLE="${VM_TEST_BUNDLE:-$BUILD/ble-hciPackageTests.xctest}" \
    VM_STEPS="${VM_STEPS:-smoke,swift,cli,extra}" \
    Tools/vm/guest-suite.sh
rc=$?
vm_secs=$(( $(date +%s) - start ))

hrc=0
if [[ ",${VM_STEPS:-cli}," == *,cli,* ]]; then
    "$HERE/host-checks.sh" "$SHARE"
    hrc=$?
fi
echo "vm-test: guest suite exit $rc after ${vm_secs}s; host checks exit $hrc; total $(( $(date +%s) - start ))s" >&2
if [ "$rc" != 0 ] || [ "$hrc" != 0 ]; then
    echo "vm-test: FAILED" >&2
    exit 1
fi
echo "vm-test: all passed" >&2
exit 0
