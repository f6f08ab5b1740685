#!/bin/bash
# Runs each libFuzzer target for SECONDS (built by Tools/fuzz/build.sh), on its corpus:
# .build/fuzz/corpus/NAME (kept between runs, grows) plus the seeds Tools/fuzz/seed-corpus.py
# cuts from Tests/Fixtures, and first replays Tools/fuzz/regressions/NAME/* (inputs that
# once crashed). A finding is saved as .build/fuzz/findings/NAME-crash-<sha1> and fails the run.
# Prints one line per target: executions, seconds, exec/s, corpus size, result (and appends
# them to .build/fuzz/summary.txt). FUZZ_CONFIG=release runs the release build.
#   Tools/fuzz/run.sh SECONDS NAME...
set -uo pipefail
cd "$(dirname "$0")/../.."
seconds=$1; shift
bin=.build/fuzz/${FUZZ_CONFIG:-debug}
mkdir -p .build/fuzz/findings .build/fuzz/logs
# Seeds of this run (several runs may go on at once, each on its own targets).
seeds=$(mktemp -d .build/fuzz/seeds.XXXXXX)
trap 'rm -rf "$seeds"' EXIT
python3 Tools/fuzz/seed-corpus.py "$seeds" 2>/dev/null || { echo "fuzz: seed-corpus.py failed" >&2; exit 1; }
failed=()
summary=()
for t in "$@"; do
    exe=$bin/fuzz-$t
    [ -x "$exe" ] || { echo "fuzz: $exe missing (Tools/fuzz/build.sh $t)" >&2; failed+=("$t (not built)"); continue; }
    if [ -d "Tools/fuzz/regressions/$t" ] && [ -n "$(ls -A "Tools/fuzz/regressions/$t")" ]; then
        if ! "$exe" -detect_leaks=0 Tools/fuzz/regressions/"$t"/* > ".build/fuzz/logs/$t-regressions.$$.log" 2>&1; then
            echo "fuzz: $t: a saved regression input fails again (.build/fuzz/logs/$t-regressions.$$.log)" >&2
            failed+=("$t (regression)"); continue
        fi
    fi
    # Inputs longer than the format can carry only cost time: an HCI command's or event's
    # parameters are at most 255 octets (the harness's input is 3 octets of selector and
    # opcode/event code, then parameters: 258), advertising data at most 1650 octets (LE
    # Read Maximum Advertising Data Length, Core v5.4 Vol 4 Part E 7.8.57). Others: libFuzzer's
    # default (4096, or the largest seed).
    case $t in
        hci) limit=(-max_len=258) ;;
        ad) limit=(-max_len=1650) ;;
        *) limit=() ;;
    esac
    corpus=.build/fuzz/corpus/$t
    mkdir -p "$corpus"
    log=.build/fuzz/logs/$t.$$.log  # per run: runs may go on at once
    # Leak detection off: the Swift runtime keeps metadata and caches for the process's
    # life, which LeakSanitizer reports at exit. -rss_limit_mb bounds memory growth per input.
    # No allocation stacks while fuzzing (malloc_context_size=0: ~10% faster, the harnesses
    # allocate on every input); detection is unchanged, and replaying a finding by hand
    # (.build/fuzz/release/fuzz-NAME FILE) reports them in full.
    ASAN_OPTIONS=${FUZZ_ASAN_OPTIONS-malloc_context_size=0} "$exe" -max_total_time="$seconds" -print_final_stats=1 -detect_leaks=0 -rss_limit_mb=1024 -timeout=10 \
        "${limit[@]}" -artifact_prefix=".build/fuzz/findings/$t-" "$corpus" "$seeds/$t" > "$log" 2>&1
    rc=$?
    execs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    secs=$(grep -ao 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' | tail -1)
    size=$(ls "$corpus" | wc -l)
    if [ $rc = 0 ]; then result="no finding"; else result="FINDING (exit $rc): $(grep -a -m1 -E 'ERROR|fuzz invariant|Fatal error|deadly signal' "$log"; grep -ao 'Test unit written to .*' "$log" | tail -1)"; failed+=("$t"); fi
    line=$(printf '%-22s %12s execs %6ss %8s exec/s corpus %5s  %s' "fuzz-$t" "${execs:-?}" "${secs:-?}" \
        "$([ -n "${execs:-}" ] && [ -n "${secs:-}" ] && [ "$secs" -gt 0 ] && echo $((execs / secs)) || echo '?')" "$size" "$result")
    echo "$line"
    summary+=("$line")
done
# Every run's lines, kept: the figures in docs/fuzzing.md come from here.
printf "$(date -u +%FT%TZ) ${FUZZ_CONFIG:-debug} %s\n" "${summary[@]}" >> .build/fuzz/summary.txt
if [ ${#failed[@]} -gt 0 ]; then echo "fuzz: FAILED: ${failed[*]} (logs in .build/fuzz/logs)" >&2; exit 1; fi
echo "fuzz: no finding in $# target(s), ${seconds}s each" >&2
