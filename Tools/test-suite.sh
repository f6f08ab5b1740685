#!/bin/bash
# Runs one `make test` suite and records its outcome in .build/test-status/NAME: "passed",
# "skipped: REASON" (the command exited 77, the automake convention for "could not run here";
# its last stderr line is the reason) or "failed". A skipped suite is never reported as
# passed; under CI=true it fails. Tools/test-summary.sh prints the outcomes.
#   Tools/test-suite.sh NAME CMD [ARG...]
set -uo pipefail
name=$1; shift
mkdir -p .build/test-status
errlog=$(mktemp)
"$@" 2> >(tee "$errlog" >&2)
rc=$?
wait
case $rc in
    0) echo passed > ".build/test-status/$name" ;;
    77)
        reason=$(grep -v '^#*$' "$errlog" | grep -v '^##*$' | sed 's/^## *//' | grep -v '^SKIPPED' | tail -1)
        echo "skipped: ${reason:-no reason given}" > ".build/test-status/$name"
        echo "$name: SKIPPED: ${reason:-no reason given}" >&2
        rm -f "$errlog"
        if [ "${CI:-}" = true ]; then echo "$name: a suite that cannot run fails under CI=true" >&2; exit 1; fi
        exit 0 ;;
    *) echo failed > ".build/test-status/$name" ;;
esac
rm -f "$errlog"
exit $rc
