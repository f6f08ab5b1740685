#!/usr/bin/env bash
# Regenerate docs/tutorial.md from docs/tutorial.template.md with real ble-hci output
# (`--check`: exit 1 if docs/tutorial.md is stale). See generate-tutorial.py.
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/generate-tutorial.py" "$@"
