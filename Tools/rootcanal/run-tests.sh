#!/bin/bash
# `make rootcanal-test`: every Swift test that runs over Rootcanal (Android's virtual controller,
# PyPI `rootcanal`, docs/testing.md): the tests whose ID contains "Rootcanal", with
# BLE_HCI_ROOTCANAL=1 (without it they are disabled, so the plain `swift test` of `make
# swift-test` does not run them). Exit 0 = passed; 77 = skipped, only when Rootcanal cannot start
# on this machine (Tools/test-suite.sh reports it as skipped, and under CI=true as a failure);
# anything else = failed, also when a selected test skipped itself or none matched.
# Needs the test bundle built (`swift build --build-tests`, as the Makefile rule does).
#   Tools/rootcanal/run-tests.sh [SWIFT-TEST-ARG...]
set -uo pipefail
cd "$(dirname "$0")/../.."
SWIFT=${SWIFT:-swift}
FILTER=${ROOTCANAL_TEST_FILTER:-Rootcanal}

skip() {
    echo "##" >&2
    echo "## SKIPPED: the Rootcanal suite did NOT run (no interop over Rootcanal, no differential test):" >&2
    echo "## $1" >&2
    exit 77
}

[ -x .venv/bin/python ] || skip "no venv .venv: run \`make deps\` (Tools/setup.sh installs rootcanal==1.10.0 from Tools/requirements.txt)"
# Rootcanal starts here (package installed, binary runs on this glibc, ports to be had)?
probe=$(BLE_HCI_EXIT_ON_STDIN_EOF=0 timeout 40 .venv/bin/python Tools/rootcanal/serve.py --timeout 0.5 2>/dev/null </dev/null)
if ! grep -q '"event":"ready"' <<<"$probe"; then
    reason=$(grep -o '"message":"[^"]*"' <<<"$probe" | head -1 | sed 's/^"message":"//; s/"$//')
    skip "Rootcanal cannot start here: ${reason:-no ready line from Tools/rootcanal/serve.py within 40 s}"
fi

start=$(date +%s.%N)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
BLE_HCI_ROOTCANAL=1 $SWIFT test --skip-build --no-parallel --filter "$FILTER" "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
echo "=== rootcanal-test: swift test --filter '$FILTER' exited $rc after ${elapsed}s"
if grep -E '(Test|Suite) [A-Za-z0-9_]+(\(.*\))? skipped' "$out"; then
    echo "=== rootcanal-test: the tests above skipped themselves: FAILED"; exit 1
fi
if ! grep -qE 'Test run with [1-9][0-9]* tests? ' "$out"; then
    echo "=== rootcanal-test: no Swift Testing test matched '$FILTER': FAILED"; exit 1
fi
exit "$rc"
