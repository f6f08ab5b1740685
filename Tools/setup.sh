#!/usr/bin/env bash
# Installs what building and testing ble-hci needs, on Debian 12, as root, non-interactively.
# Idempotent and fast when everything is present:
#   - Debian packages: only the missing ones are installed (apt-get update only then);
#   - the project-local venv .venv (Debian's /usr/bin/python3) with the pinned Python packages
#     of Tools/requirements.txt + Tools/constraints.txt, skipped when its stamp file holds the
#     hash of those two files.
#
# Usage: Tools/setup.sh [--system-only]   (--system-only: only the Debian packages the build
# needs, as `make build`, `make demo` and `make install` use it; no test tools, no venv)
set -euo pipefail
cd "$(dirname "$0")/.."
SYSTEM_ONLY=0
[[ "${1:-}" == "--system-only" ]] && SYSTEM_ONLY=1
ROOT=$PWD

# The build: headers and pkg-config for the CBluetooth and COpenSSL system-library targets.
BUILD_PACKAGES=(libbluetooth-dev libssl-dev pkg-config)
# The tests: tshark (capture oracle), the venv's python, the VM suite (qemu, busybox, BlueZ),
# man-db (`man -l` renders the generated ble-hci(1) in the CLI tests), zsh (its completion), chromium (screenshots of the SVG diagrams) and
# chromium-driver (Selenium drives it in the browser-test suite, `dump --html`), fonts-wqy-zenhei
# (CJK glyphs for the pages' font stack, seen in the browser test's screenshots).
TEST_PACKAGES=(tshark python3-venv qemu-system-x86 busybox-static bluez man-db zsh chromium chromium-driver fonts-wqy-zenhei)
APT_PACKAGES=("${BUILD_PACKAGES[@]}")
((SYSTEM_ONLY)) || APT_PACKAGES+=("${TEST_PACKAGES[@]}")

log() { echo "setup: $*" >&2; }

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        SUDO=sudo
        command -v sudo >/dev/null || { log "missing Debian packages (${missing[*]}) and not root: run as root"; exit 1; }
    else
        SUDO=
    fi
    log "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # tshark: do not ask whether non-root users may capture.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}"
else
    log "Debian packages present"
fi

((SYSTEM_ONLY)) && exit 0

VENV=$ROOT/.venv
STAMP=$VENV/.ble-hci-requirements.sha256
want=$(cat Tools/requirements.txt Tools/constraints.txt | sha256sum | cut -d' ' -f1)

if [[ -x $VENV/bin/python && -f $STAMP && "$(cat "$STAMP")" == "$want" ]] \
    && "$VENV/bin/python" -c 'import bumble, rootcanal.binaries, selenium' 2>/dev/null; then
    log "venv .venv up to date"
    exit 0
fi

if ! [[ -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
    log "creating venv .venv with /usr/bin/python3"
    rm -rf "$VENV"
    /usr/bin/python3 -m venv "$VENV"
fi
log "installing pinned Python packages into .venv"
"$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q \
    -r Tools/requirements.txt -c Tools/constraints.txt
"$VENV/bin/python" -c 'import bumble.controller, bumble.device'
# Rootcanal's binary is in the wheel; it must run on this glibc (1.10.0 does on Debian 12).
"$VENV/bin/python" -c 'import rootcanal.binaries, subprocess, sys; sys.exit(subprocess.run([rootcanal.binaries.get_package_binary_resource_path("rootcanal"), "-version"], capture_output=True).returncode)' \
    || { log "rootcanal's binary does not run here (rootcanal-test will be skipped)"; }
echo "$want" > "$STAMP"
log "venv .venv ready"
