#!/bin/bash
# Runs a command inside the ble-hci test VM and returns its exit code.
#
#   Tools/vm/run.sh CMD [ARG...]
#
# The guest (a stock Debian kernel with Bluetooth + hci_vhci loaded) chroots into the host's
# root, shared read-only over 9p, and runs CMD as root with cwd = the repository root and
# BLE_HCI_IN_VM=1. /tmp, /run, /dev/shm are guest tmpfs. $BLE_HCI_VM_SHARE (a host temp dir,
# mounted at the same path in the guest) is the one writable place the host sees afterwards.
# CMD's output is streamed to stdout; the guest console goes to a log that is printed when
# the VM fails (no exit code, timeout) and kept with VM_KEEP=1.
#
# Env: VM_CPU (TCG cpu model, default max), VM_TIMEOUT (s, default 240), VM_MEM (MiB, default 2048), VM_KEEP=1 (keep the share dir),
#      VM_SHARE_DIR (use this existing dir as the share; it is kept),
#      VM_INTERACTIVE=1 (console on this terminal, busybox shell after CMD; needs a tty),
#      VM_REPO (cwd in the guest, default: this repository), VM_APPEND (extra kernel args).
# Exit: CMD's exit code; 124 on timeout; 125 when the VM failed before CMD finished.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=${VM_REPO:-$(cd "$HERE/../.." && pwd)}
CACHE="$HERE/cache"
TIMEOUT=${VM_TIMEOUT:-240}

if [ $# -eq 0 ]; then echo "usage: $0 CMD [ARG...]" >&2; exit 2; fi

"$HERE/prepare.sh" || { echo "vm/run: prepare.sh failed" >&2; exit 125; }

if [ -n "${VM_SHARE_DIR:-}" ]; then
    # The caller's directory (it reads what the guest wrote, and removes it itself).
    SHARE=$(cd "$VM_SHARE_DIR" && pwd) || { echo "vm/run: VM_SHARE_DIR=$VM_SHARE_DIR is not a directory" >&2; exit 125; }
    OWN_SHARE=0
else
    SHARE=$(mktemp -d "${TMPDIR:-/tmp}/ble-hci-vm.XXXXXX")
    OWN_SHARE=1
fi
chmod 1777 "$SHARE"   # the guest's tests also write there as a non-root user
LOG="$SHARE/console.log"
cleanup() {
    [ -n "${TAILPID:-}" ] && kill "$TAILPID" 2>/dev/null
    if [ "${VM_KEEP:-0}" = 1 ] || [ "$OWN_SHARE" = 0 ]; then echo "vm/run: kept $SHARE (console.log, output, dmesg, rc)" >&2
    else rm -rf "$SHARE"; fi
}
trap cleanup EXIT

# The command script the guest's init runs inside the chroot.
{
    echo '#!/bin/bash'
    echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
    echo 'export HOME=/tmp LANG=C.UTF-8 BLE_HCI_IN_VM=1'
    printf 'export BLE_HCI_VM_SHARE=%q\n' "$SHARE"
    printf 'cd %q || exit 125\n' "$REPO"
    printf 'exec'; printf ' %q' "$@"; printf '\n'
} > "$SHARE/cmd.sh"
: > "$SHARE/output"

# Acceleration: KVM only when it is a real one. The PVM flavour of /dev/kvm cannot boot a
# stock kernel (it aborts or hangs after the BIOS), so it means TCG.
if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] && [ "${VM_ACCEL:-}" != tcg ]; then
    ACCEL=(-accel kvm -cpu host)
else
    ACCEL=(-accel tcg -cpu "${VM_CPU:-max}")
fi

APPEND="console=ttyS0 quiet loglevel=4 panic=-1 oops=panic rdinit=/init vm.share=$SHARE vm.repo=$REPO ${VM_APPEND:-}"
if [ "${VM_INTERACTIVE:-0}" = 1 ]; then
    APPEND="$APPEND vm.shell=1"
    SERIAL=()   # -nographic: serial console + monitor (Ctrl-a x quits) on this terminal
else
    SERIAL=(-serial "file:$LOG" -monitor none)
fi

QEMU=(qemu-system-x86_64 "${ACCEL[@]}" -m "${VM_MEM:-2048}" -smp 1 -nographic -nic none -no-reboot
      -kernel "$CACHE/vmlinuz" -initrd "$CACHE/initramfs.cpio.gz" -append "$APPEND"
      "${SERIAL[@]}"
      -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
      -virtfs "local,path=$SHARE,mount_tag=vmshare,security_model=none,multidevs=remap")

start=$(date +%s.%N)
if [ "${VM_INTERACTIVE:-0}" = 1 ]; then
    timeout --foreground -k 5 "$TIMEOUT" "${QEMU[@]}"
    qrc=$?
else
    # Stream CMD's output live while the VM runs.
    tail -n +1 -f "$SHARE/output" & TAILPID=$!
    timeout -k 5 "$TIMEOUT" "${QEMU[@]}" < /dev/null > "$SHARE/qemu.stderr" 2>&1
    qrc=$?
    sleep 0.2; kill "$TAILPID" 2>/dev/null; wait "$TAILPID" 2>/dev/null; TAILPID=
fi
secs=$(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo "?")

rc=$(cat "$SHARE/rc" 2>/dev/null || true)
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
    echo "vm/run: TIMEOUT after ${TIMEOUT}s (VM_TIMEOUT); guest console follows" >&2
    rc=124
elif [ -z "$rc" ]; then
    echo "vm/run: the VM stopped (qemu exit $qrc) before the command finished; guest console follows" >&2
    rc=125
fi
if [ "$rc" != 0 ] && [ "${VM_INTERACTIVE:-0}" != 1 ]; then
    echo "----- qemu stderr -----" >&2; cat "$SHARE/qemu.stderr" >&2 2>/dev/null
    echo "----- guest console ($LOG) -----" >&2; cat "$LOG" >&2 2>/dev/null
    if [ -s "$SHARE/dmesg" ]; then echo "----- guest dmesg (last 60 lines) -----" >&2; tail -n 60 "$SHARE/dmesg" >&2; fi
    echo "----- end of guest console -----" >&2
fi
echo "vm/run: exit $rc after ${secs}s (${ACCEL[*]})" >&2
exit "$rc"
