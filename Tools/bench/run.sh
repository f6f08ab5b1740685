#!/usr/bin/env bash
# `make bench`: performance report against peers measured in the same run (docs/performance.md).
# One line per metric: ours, the peer's, the ratio. A report, not a gate: always exits 0.
# Environment: BENCH_N (GATT exchanges, default 5000), BENCH_ROUNDS (rounds of the GATT lines, best
# of them against Bumble's best, default 3), BENCH_STACK_N (ours on the stacks' thread,
# default 20 × BENCH_N: at 5 000 such a run lasts about 20 ms, too short to time), BENCH_PACKETS (varied dump capture, default
# 50000), BENCH_FLOW_PACKETS (dump --flow/--svg, n and 2n, default 50000), BENCH_SCRATCH (release build dir, default .build), SWIFT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/opt/swift/usr/bin"
SWIFT=${SWIFT:-swift}
SCRATCH=${BENCH_SCRATCH:-.build}
N=${BENCH_N:-5000}
NS=${BENCH_STACK_N:-$((N * 20))}
PACKETS=${BENCH_PACKETS:-50000}
PY=.venv/bin/python
WORK=$(mktemp -d /tmp/ble-hci-bench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"; }
trap cleanup EXIT

echo "bench: building release (scratch $SCRATCH)..."
if ! $SWIFT build -c release --scratch-path "$SCRATCH" --product ble-hci >"$WORK/build.log" 2>&1 \
   || ! $SWIFT build -c release --scratch-path "$SCRATCH" --product ble-hci-bench >>"$WORK/build.log" 2>&1; then
    tail -20 "$WORK/build.log"; echo "bench: build failed, no figures"; exit 0
fi
BIN="$SCRATCH/release"

field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.1f", a / b }'; }
line() { printf '%-34s ours %12s   %-7s %12s   ratio %6s×  (%s)\n' "$1" "$2" "$3" "$4" "$5" "$6"; }

# 1. GATT reads and notifications on an in-process virtual link, ours vs Bumble's LocalLink.
# Ours three times: the application's task on the global pool (one thread switch each way per
# exchange), preferring the stacks' executor (`-on-stack`: one thread in all, like Bumble's one
# asyncio thread), and its code in the stacks' own isolation (`-in-stack`, `withStackIsolation`:
# also one thread, and no executor job to enter or leave the stack, as Bumble's code shares its
# loop).
# BENCH_ROUNDS rounds (default 3), each running every one of them once, Bumble included: the
# ratio is best against best, and the range of each is printed. On a shared machine a slow
# phase lasts seconds; a single run of each would compare a slow one with a quick one.
ROUNDS=${BENCH_ROUNDS:-3}
best() { tr ' ' '\n' | awk 'NF { v = $1 + 0; if (n++ == 0 || v > max) max = v } END { if (n) printf "%.1f", max }'; }
spread() { tr ' ' '\n' | awk 'NF { v = $1 + 0; if (n++ == 0 || v < min) min = v; if (v > max) max = v } END { if (n) printf "%.0f–%.0f", min, max }'; }
# Each round's ratio (ours and Bumble's run of the same round, minutes apart at most), "a/b/c".
rounds() { awk -v o="$1" -v p="$2" 'BEGIN { n = split(o, a, " "); split(p, b, " "); for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? "/" : ""), (b[i] + 0 > 0 && a[i] != "" ? sprintf("%.0f", a[i] / b[i]) : "?") }'; }
for metric in reads notifications; do
    pool=""; same=""; inside=""; peer=""; queued=""; hops=""; poolswitches=""; samecpu=""; insidecpu=""; qlost=0
    for _ in $(seq "$ROUNDS"); do
        out=$(timeout 60 "$BIN/ble-hci-bench" "$metric" "$N" 2>&1)
        pool+=" $(field rate <<<"$out")"; poolswitches=$(field context_switches_per_exchange <<<"$out")
        out=$(timeout 60 "$BIN/ble-hci-bench" "$metric-on-stack" "$NS" 2>&1)
        same+=" $(field rate <<<"$out")"; samecpu+=" $(field cpu_us_per_exchange <<<"$out")"
        out=$(timeout 60 "$BIN/ble-hci-bench" "$metric-in-stack" "$NS" 2>&1)
        inside+=" $(field rate <<<"$out")"; insidecpu+=" $(field cpu_us_per_exchange <<<"$out")"
        peer+=" $(timeout 120 "$PY" Tools/bench/bumble_bench.py "$metric" "$N" 2>&1 | field rate)"
        # The floor under a read from the pool: the same two thread switches with no work.
        if [ "$metric" = reads ]; then hops+=" $(timeout 60 "$BIN/ble-hci-bench" pool-hops "$((N * 4))" 2>&1 | field rate)"; fi
        if [ "$metric" = notifications ]; then
            # The application on the pool with the non-blocking call (Peripheral.updateValue,
            # then the ready event when refused: CoreBluetooth's pattern), none lost.
            out=$(timeout 60 "$BIN/ble-hci-bench" notifications-queued "$N" 2>&1)
            queued+=" $(field rate <<<"$out")"; qlost=$((qlost + $(field lost <<<"$out" | grep -E '^[0-9]+$' || echo 0)))
        fi
    done
    peerbest=$(best <<<"$peer"); poolbest=$(best <<<"$pool"); samebest=$(best <<<"$same"); insidebest=$(best <<<"$inside")
    if [ "$metric" = reads ]; then pooltarget="target ≥ 10×"; else pooltarget="awaiting each; updateValue's below has the target"; fi
    echo "gatt $metric: best of $ROUNDS rounds; bumble $(spread <<<"$peer")/s, ours pool $(spread <<<"$pool"), on-stack $(spread <<<"$same"), in-stack $(spread <<<"$inside")"
    line "gatt $metric/s (N=$N)" "${poolbest:-fail}" bumble "${peerbest:-fail}" "$(ratio "$poolbest" "$peerbest")" "pool; per round $(rounds "$pool" "$peer")×; ${poolswitches:-?} context switches per exchange; $pooltarget"
    if [ "$metric" = reads ]; then
        hopsbest=$(best <<<"$hops")
        line "pool round trips/s, no work (N=$((N * 4)))" "${hopsbest:-fail}" bumble "${peerbest:-fail}" "$(ratio "$hopsbest" "$peerbest")" "a pool task awaiting an actor on the stacks' kind of executor: the ceiling of pool reads"
    fi
    line "gatt $metric/s on-stack (N=$NS)" "${samebest:-fail}" bumble "${peerbest:-fail}" "$(ratio "$samebest" "$peerbest")" "preferring the stacks' thread; per round $(rounds "$same" "$peer")×; µs CPU per exchange${samecpu:-?}; target ≥ 50×"
    line "gatt $metric/s in-stack (N=$NS)" "${insidebest:-fail}" bumble "${peerbest:-fail}" "$(ratio "$insidebest" "$peerbest")" "in the stack's isolation, as Bumble; per round $(rounds "$inside" "$peer")×; µs CPU per exchange${insidecpu:-?}; target ≥ 50×"
    if [ "$metric" = notifications ]; then
        queuedbest=$(best <<<"$queued")
        line "gatt notifications/s updateValue (N=$N)" "${queuedbest:-fail}" bumble "${peerbest:-fail}" "$(ratio "$queuedbest" "$peerbest")" "pool, non-blocking; per round $(rounds "$queued" "$peer")×; lost ${qlost} in all rounds; target ≥ 20×"
    fi
done

# 2. dump (tree, to /dev/null) vs tshark -V on a capture of BENCH_PACKETS varied packets (issue
# 14: every ATT opcode, discovery, errors, notifications, SMP, signaling, no exchange repeated;
# `ble-hci-bench varied`), and ours on twice as many packets (time per packet must not grow).
# CPU time (user + sys) and wall clock of each run, with the load average: the machine is shared.
cpu_wall() {  # prints "cpu wall" seconds of one run of "$@", output discarded
    local TIMEFORMAT='%U %S %R' t
    t=$( { time "$@" >/dev/null 2>&1; } 2>&1 ) || return 1
    awk '{ printf "%.3f %.3f", $1 + $2, $3 }' <<<"$t"
}
if "$BIN/ble-hci-bench" varied "$WORK/varied1.btsnoop" "$PACKETS" >/dev/null \
   && "$BIN/ble-hci-bench" varied "$WORK/varied2.btsnoop" "$((PACKETS * 2))" >/dev/null; then
    echo "dump: load average $(cut -d' ' -f1-3 /proc/loadavg)"
    read -r ours ourswall < <(cpu_wall "$BIN/ble-hci" dump "$WORK/varied1.btsnoop")
    read -r ours2 ours2wall < <(cpu_wall "$BIN/ble-hci" dump "$WORK/varied2.btsnoop")
    if command -v tshark >/dev/null; then
        read -r peer peerwall < <(cpu_wall tshark -V -r "$WORK/varied1.btsnoop")
        malformed=$(tshark -V -r "$WORK/varied1.btsnoop" 2>/dev/null | grep -c Malformed)
    else peer=""; peerwall=""; malformed="n/a"; fi
    line "dump CPU s ($PACKETS varied packets)" "${ours:-fail}" tshark "${peer:-n/a}" "$(ratio "$peer" "$ours")" "tshark/ours; target ≥ 20×"
    line "dump wall s ($PACKETS varied packets)" "${ourswall:-fail}" tshark "${peerwall:-n/a}" "$(ratio "$peerwall" "$ourswall")" "tshark/ours, load-dependent"
    printf 'dump CPU s %7s packets %7s   %7s packets %7s   2n/n %s (linear: 2.0); tshark "Malformed": %s\n' \
        "$PACKETS" "$ours" "$((PACKETS * 2))" "$ours2" "$(ratio "$ours2" "$ours")" "$malformed"
else
    echo "dump: could not build the varied capture"
fi
# The demo's capture, used by 2b.
timeout 60 "$BIN/ble-hci" demo -w "$WORK/demo.btsnoop" >/dev/null 2>&1

# 2b. dump --flow / --svg of n and 2n packets (issue 17): the time must grow linearly.
FLOW_N=${BENCH_FLOW_PACKETS:-50000}
if [ -f "$WORK/demo.btsnoop" ] \
   && "$BIN/ble-hci-bench" capture "$WORK/demo.btsnoop" "$WORK/flow1.btsnoop" "$FLOW_N" >/dev/null \
   && "$BIN/ble-hci-bench" capture "$WORK/demo.btsnoop" "$WORK/flow2.btsnoop" "$((FLOW_N * 2))" >/dev/null; then
    secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N); awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'; }
    for mode in --flow --svg; do
        out=(); [ "$mode" = --svg ] && out=("$WORK/flow.svg")
        a=$(secs "$BIN/ble-hci" dump "$WORK/flow1.btsnoop" $mode "${out[@]}")
        b=$(secs "$BIN/ble-hci" dump "$WORK/flow2.btsnoop" $mode "${out[@]}")
        printf 'dump %-6s %7s packets %7s s   %7s packets %7s s   2n/n %s (linear: 2.0)\n' \
            "$mode" "$FLOW_N" "$a" "$((FLOW_N * 2))" "$b" "$(ratio "$b" "$a")"
    done
fi

# 2c. 32 links on one virtual link (issue 14): one Central, 32 Peripherals each notifying
# 720 values/s of 244 octets for 5 s, all in one process. No peer to compare with: a report.
# 251-octet ACL buffers (Data Length Extension, the issue's "251-octet PDUs") and 27 (no DLE:
# each 244-octet value is 10 ACL fragments). links-split runs the Central in its own process
# over H4/TCP, so its CPU (host CPU per link, target <= 1 % of a core) is its own.
for len in 251 27; do
    out=$(timeout 120 "$BIN/ble-hci-bench" links 32 720 5 $len 2>&1 | grep '^metric=links')
    echo "links: ${out:-fail}"
    out=$(timeout 120 "$BIN/ble-hci-bench" links-split 32 720 5 $len 2>&1 | grep '^metric=links-split')
    echo "links: ${out:-fail}"
done

# 2d. The airtime model of the virtual link (issue 29), on a manual clock: simulated throughput
# per link (1M/2M × 27/251-octet PDUs at 7.5 ms) against the limit computed from the PHY
# timings (within 5 %), read latency at 7.5 and 30 ms against the computed mean, and the CPU
# the model costs per simulated second with 1, 8 and 32 links (every link full).
airtime=$(timeout 300 "$BIN/ble-hci-bench" airtime 2>&1)
if grep -q '^metric=airtime-cpu links=32' <<<"$airtime"; then
    grep '^metric=airtime-throughput' <<<"$airtime" | while read -r l; do
        r=$(field ratio <<<"$l")
        printf 'airtime %-3s/%-3s PDUs/s %8s   limit %8s   ratio %s  (%s)\n' "$(field phy <<<"$l")" "$(field octets <<<"$l")" \
            "$(field pdus_per_s <<<"$l")" "$(field limit <<<"$l")" "$r" \
            "$(awk -v r="$r" 'BEGIN { print (r >= 0.95 && r <= 1.05) ? "within 5 %" : "OFF BY MORE THAN 5 %" }')"
    done
    grep '^metric=airtime-read-latency' <<<"$airtime" | while read -r l; do
        printf 'airtime read latency at %4s ms: mean %6s ms   computed %6s ms   (min %s, max %s)\n' "$(field interval_ms <<<"$l")" \
            "$(field mean_ms <<<"$l")" "$(field computed_mean_ms <<<"$l")" "$(field min_ms <<<"$l")" "$(field max_ms <<<"$l")"
    done
    grep '^metric=airtime-cpu' <<<"$airtime" | while read -r l; do
        printf 'airtime CPU per simulated second, %2s links: %7s ms\n' "$(field links <<<"$l")" "$(field cpu_ms_per_simulated_s <<<"$l")"
    done
else
    echo "airtime: fail: $(tail -3 <<<"$airtime")"
fi

# 3. Idle peripheral resident memory (ours and a Bumble peripheral on our TCP controllers),
# and ours again linked with the static Swift runtime (`make install`'s binary; its own
# scratch directory, so the build above is not redone).
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
anon() { awk '/^RssAnon/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
port=$(( 20000 + RANDOM % 20000 ))
"$BIN/ble-hci" controllers --listen "tcp:127.0.0.1:$port" --listen "tcp:127.0.0.1:$((port + 1))" >"$WORK/ctl.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do grep -q "listening on.*$((port + 1))" "$WORK/ctl.log" 2>/dev/null && break; sleep 0.1; done
"$BIN/ble-hci" -t "tcp:127.0.0.1:$port" peripheral --name bench >/dev/null 2>&1 &
ourpid=$!; PIDS+=($ourpid)
"$PY" Tools/bumble/peripheral.py --transport "tcp-client:127.0.0.1:$((port + 1))" --name bench >/dev/null 2>&1 &
peerpid=$!; PIDS+=($peerpid)
sleep 3
ours=$(rss $ourpid); peer=$(rss $peerpid); oursAnon=$(anon $ourpid)
# smaller is better: the ratio is the peer's RSS over ours
line "idle peripheral RSS (kB)" "${ours:-fail}" bumble "${peer:-fail}" "$(ratio "$peer" "$ours")" "bumble/ours; ours anonymous ${oursAnon:-?} kB; target ours < 15360 kB"
kill "$ourpid" 2>/dev/null; sleep 0.5  # the controller takes one host at a time
if $SWIFT build -c release --static-swift-stdlib --scratch-path "$SCRATCH/static-stdlib" --product ble-hci >>"$WORK/build.log" 2>&1; then
    "$SCRATCH/static-stdlib/release/ble-hci" -t "tcp:127.0.0.1:$port" peripheral --name bench >/dev/null 2>&1 &
    staticpid=$!; PIDS+=($staticpid)
    sleep 3
    ours=$(rss $staticpid); oursAnon=$(anon $staticpid)
    line "idle peripheral RSS, static (kB)" "${ours:-fail}" bumble "${peer:-fail}" "$(ratio "$peer" "$ours")" "--static-swift-stdlib; ours anonymous ${oursAnon:-?} kB; target < 15360 kB"
else
    echo "idle peripheral RSS, static: build failed"
fi
exit 0
