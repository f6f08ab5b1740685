#!/usr/bin/env bash
# Regenerates Tools/release/ble-hci.order, the symbol order of the release link (Package.swift,
# docs/performance.md "Idle RSS"). The kernel maps a file's code 64 KB at a time around each page
# fault ("fault-around"), so code run at start-up scattered over a 17 MB .text keeps most of it
# resident. lld places the listed symbols first, together; the idle peripheral then touches few
# 64 KB windows. A stale list is harmless (missing names are ignored), only less effective.
# How: build the static release binary with the current list, run `controllers` and an idle
# `peripheral` under `perf record -e page-faults -d`, append every symbol of the executable that
# took a fault (code and data), relink, repeat (each round uncovers code that shared a window
# with code placed earlier). Needs perf. Usage: Tools/release/order.sh [rounds, default 12]
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/opt/swift/usr/bin"
ROUNDS=${1:-12}
ORDER=Tools/release/ble-hci.order
SCRATCH=.build/static-stdlib
WORK=$(mktemp -d /tmp/ble-hci-order.XXXXXX)
CTL=""; PER=""
cleanup() { [ -n "$PER" ] && kill "$PER" 2>/dev/null; [ -n "$CTL" ] && kill "$CTL" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
command -v perf >/dev/null || { echo "order.sh: perf not found" >&2; exit 1; }
touch "$ORDER"
for round in $(seq "$ROUNDS"); do
    bin="$(swift build -c release --static-swift-stdlib --scratch-path "$SCRATCH" --show-bin-path)/ble-hci"
    rm -f "$bin"  # the list is not an input SwiftPM tracks: force the relink
    nice swift build -c release --static-swift-stdlib --scratch-path "$SCRATCH" --product ble-hci >"$WORK/build.log" 2>&1 \
        || { tail -20 "$WORK/build.log"; exit 1; }
    port=$(( 20000 + RANDOM % 20000 ))
    "$bin" controllers --listen "tcp:127.0.0.1:$port" >"$WORK/ctl.log" 2>&1 & CTL=$!
    for _ in $(seq 50); do grep -q "listening on" "$WORK/ctl.log" 2>/dev/null && break; sleep 0.1; done
    perf record -q -e page-faults -c 1 -d -o "$WORK/pf.data" -- "$bin" -t "tcp:127.0.0.1:$port" peripheral --name order >/dev/null 2>&1 & PER=$!
    sleep 4; kill -INT "$PER"; wait "$PER" || true; PER=""
    kill "$CTL"; wait "$CTL" 2>/dev/null || true; CTL=""
    # addr, its symbol and object: keep the executable's named symbols
    perf script --no-demangle -i "$WORK/pf.data" -F addr,ip,sym,dso 2>/dev/null \
        | awk '$3 ~ /\/ble-hci\)$/ { print $2 }' \
        | grep -vE '^(got\.|__TMC_END__|__do_global|\[)' >"$WORK/new.txt" || true
    before=$(wc -l <"$ORDER")
    cat "$ORDER" "$WORK/new.txt" | awk '!seen[$0]++' >"$WORK/order" && cp "$WORK/order" "$ORDER"
    echo "round $round: $(wc -l <"$WORK/new.txt") faults in the executable, list $before → $(wc -l <"$ORDER") symbols"
done
