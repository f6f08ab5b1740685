#!/bin/bash
# The last line of `make test`: which suites passed, which were skipped (and why), which
# failed or never ran. Exit 1 when any failed or did not run, or (CI=true) was skipped.
#   Tools/test-summary.sh SUITE...
set -u
passed=() skipped=() failed=()
for s in "$@"; do
    status=$(cat ".build/test-status/$s" 2>/dev/null || echo "did not run")
    case $status in
        passed) passed+=("$s") ;;
        skipped*) skipped+=("$s (${status#skipped: })") ;;
        *) failed+=("$s ($status)") ;;
    esac
done
join() { local IFS=,; echo "${*:-none}" | sed 's/,/, /g'; }
line="make test: passed: $(join "${passed[@]}"); skipped: $(join "${skipped[@]}")"
[ ${#failed[@]} -gt 0 ] && line="$line; FAILED: $(join "${failed[@]}")"
echo "$line"
[ ${#failed[@]} -eq 0 ] || exit 1
if [ ${#skipped[@]} -gt 0 ] && [ "${CI:-}" = true ]; then echo "make test: CI=true: a skipped suite fails the run" >&2; exit 1; fi
exit 0
