#!/bin/sh
# Prepares the ble-hci test VM: a stock Debian kernel (with Bluetooth as modules) and a
# small busybox initramfs, cached under Tools/vm/cache/. Idempotent; takes well under a
# second when the cache is complete. See docs/vm.md.
#
# Output: Tools/vm/cache/vmlinuz, Tools/vm/cache/initramfs.cpio.gz
# Env: VM_REFRESH=1 re-resolves and re-unpacks the kernel even when one is cached.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE="$HERE/cache"
mkdir -p "$CACHE"

# Modules the guest loads, in this order after dependency resolution (each module's
# depends= is read from its .modinfo, so the list only needs the leaves).
MODULES="rfkill jitterentropy_rng drbg ecc ecdh_generic cmac crc16 bluetooth hci_vhci
virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
netfs fscache 9pnet 9pnet_virtio 9p"

say() { echo "vm/prepare: $*" >&2; }

# --- host packages: qemu and a static busybox -------------------------------------------
need_pkgs=
command -v qemu-system-x86_64 >/dev/null 2>&1 || need_pkgs="$need_pkgs qemu-system-x86"
dpkg -s busybox-static >/dev/null 2>&1 || need_pkgs="$need_pkgs busybox-static"
if [ -n "$need_pkgs" ]; then
    say "installing$need_pkgs"
    if [ "$(id -u)" != 0 ]; then say "not root: cannot apt-get install$need_pkgs"; exit 1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $need_pkgs >/dev/null 2>&1 ||
        { apt-get update >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $need_pkgs >/dev/null; }
fi
BUSYBOX=/bin/busybox

# --- fast path -------------------------------------------------------------------------
stamp_src=$(cat "$HERE/prepare.sh" "$HERE/init" | sha256sum | cut -c1-16)
if [ "${VM_REFRESH:-0}" != 1 ] && [ -f "$CACHE/vmlinuz" ] && [ -f "$CACHE/initramfs.cpio.gz" ] &&
   [ "$(cat "$CACHE/stamp" 2>/dev/null)" = "$stamp_src" ]; then
    exit 0
fi

# --- kernel package --------------------------------------------------------------------
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1)
if [ -z "$kpkg" ]; then
    if [ "$(id -u)" = 0 ]; then apt-get update >/dev/null 2>&1 || true; fi
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1)
fi
if [ -z "$kpkg" ]; then
    # offline and no package lists: fall back to whatever is cached
    kpkg=$(ls -d "$CACHE"/kernel/lib/modules/* 2>/dev/null | head -1 | sed 's|.*/|linux-image-|')
    [ -n "$kpkg" ] || { say "cannot resolve linux-image-amd64 (apt-cache depends) and nothing is cached"; exit 1; }
fi
kver=${kpkg#linux-image-}
say "kernel package $kpkg"

if [ ! -f "$CACHE/kernel/boot/vmlinuz-$kver" ] || [ "${VM_REFRESH:-0}" = 1 ]; then
    mkdir -p "$CACHE/deb"
    deb=$(ls "$CACHE/deb/${kpkg}_"*.deb 2>/dev/null | head -1 || true)
    if [ -z "$deb" ]; then
        say "apt-get download $kpkg"
        (cd "$CACHE/deb" && apt-get download "$kpkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) ||
            { [ "$(id -u)" = 0 ] && apt-get update >/dev/null 2>&1; cd "$CACHE/deb" && apt-get download "$kpkg"; }
        deb=$(ls "$CACHE/deb/${kpkg}_"*.deb | head -1)
    fi
    rm -rf "$CACHE/kernel.tmp"
    dpkg-deb -x "$deb" "$CACHE/kernel.tmp"
    rm -rf "$CACHE/kernel"
    mv "$CACHE/kernel.tmp" "$CACHE/kernel"
fi
KDIR="$CACHE/kernel/lib/modules/$kver"
[ -d "$KDIR" ] || { say "no $KDIR in the package"; exit 1; }

# --- initramfs -------------------------------------------------------------------------
root="$CACHE/initramfs.tmp"
rm -rf "$root"
mkdir -p "$root/bin" "$root/lib/modules" "$root/proc" "$root/sys" "$root/dev" "$root/host"
cp "$BUSYBOX" "$root/bin/busybox"
cp "$HERE/init" "$root/init"
chmod 755 "$root/init" "$root/bin/busybox"

# Resolve a module name to its file (.ko, .ko.xz, .ko.zst, .ko.gz); empty if absent.
modfile() { find "$KDIR/kernel" \( -name "$1.ko" -o -name "$1.ko.*" \) 2>/dev/null | head -1; }
builtin() { grep -qE "/$1\.ko$" "$KDIR/modules.builtin" 2>/dev/null; }
# Decompressed module bytes to stdout.
modcat() {
    case "$1" in
        *.ko) cat "$1" ;;
        *.ko.xz) xz -dc "$1" ;;
        *.ko.zst) zstd -qdc "$1" ;;
        *.ko.gz) gzip -dc "$1" ;;
    esac
}
moddeps() { modcat "$1" | tr '\0' '\n' | sed -n 's/^depends=//p' | tr ',' ' '; }

: > "$root/modules.list"
seen=" "
add_module() {  # depth-first: dependencies first
    local m f d
    m=$1
    case "$seen" in *" $m "*) return 0 ;; esac
    seen="$seen$m "
    f=$(modfile "$m")
    if [ -z "$f" ]; then
        if builtin "$m"; then say "  $m: built in"; else say "  $m: absent in $kver, skipped"; fi
        return 0
    fi
    for d in $(moddeps "$f"); do add_module "$d"; done
    modcat "$f" > "$root/lib/modules/$m.ko"
    echo "$m.ko" >> "$root/modules.list"
}
for m in $MODULES; do add_module "$m"; done
say "modules: $(tr '\n' ' ' < "$root/modules.list")"

(cd "$root" && find . | "$BUSYBOX" cpio -o -H newc 2>/dev/null) | gzip -1 > "$CACHE/initramfs.cpio.gz.tmp"
mv "$CACHE/initramfs.cpio.gz.tmp" "$CACHE/initramfs.cpio.gz"
rm -rf "$root"
cp "$CACHE/kernel/boot/vmlinuz-$kver" "$CACHE/vmlinuz"
echo "$kver" > "$CACHE/kernel-version"
echo "$stamp_src" > "$CACHE/stamp"
say "ready: $CACHE/vmlinuz ($kver), $CACHE/initramfs.cpio.gz"
