#!/bin/bash
# `make api-docs`: the DocC documentation of the BLE module (Sources/BLE/BLE.docc, its articles
# and the `///` comments of Sources/BLE), built with the toolchain's own `docc` (no
# swift-docc-plugin: no package is fetched). Builds BLE, extracts its symbol graph from the built
# module (swift-symbolgraph-extract; public symbols, those of the modules BLE re-exports
# included), then `docc convert` with warnings as errors: an unresolved ``link``, a misspelt
# symbol in the CoreBluetooth table or a malformed doc comment fails. Writes
# .build/docs/BLE.doccarchive. Exit 77 (skipped) when the toolchain has no docc.
#   Tools/docs/api-docs.sh [SWIFT_FLAGS...]
set -euo pipefail
cd "$(dirname "$0")/../.."
SWIFT=${SWIFT:-swift}
toolchain_bin=$(dirname "$(command -v "$SWIFT" || echo /opt/swift/usr/bin/swift)")
DOCC=${DOCC:-$(command -v docc || echo "$toolchain_bin/docc")}
EXTRACT=${SYMBOLGRAPH_EXTRACT:-$(command -v swift-symbolgraph-extract || echo "$toolchain_bin/swift-symbolgraph-extract")}
for tool in "$DOCC" "$EXTRACT"; do
    if [ ! -x "$tool" ]; then
        echo "## api-docs: no $(basename "$tool") at $tool (it comes with the Swift toolchain; DOCC= / SYMBOLGRAPH_EXTRACT= name another)" >&2
        exit 77
    fi
done

"$SWIFT" build --target BLE "$@"
bin=$("$SWIFT" build --show-bin-path "$@")
triple=$("$SWIFT" -print-target-info | sed -n 's/.*"triple": *"\([^"]*\)".*/\1/p' | head -1)
graphs=.build/docs/symbol-graphs
rm -rf "$graphs" .build/docs/BLE.doccarchive
mkdir -p "$graphs"
# The C modules (CBluetooth, COpenSSL) are found by their module maps, as the build finds them.
"$EXTRACT" -module-name BLE -target "$triple" -I "$bin/Modules" -I "$bin" \
    -Xcc -fmodule-map-file=Sources/CBluetooth/module.modulemap -Xcc -fmodule-map-file=Sources/COpenSSL/module.modulemap \
    -minimum-access-level public -skip-inherited-docs -output-dir "$graphs"
"$DOCC" convert Sources/BLE/BLE.docc --additional-symbol-graph-dir "$graphs" \
    --fallback-display-name BLE --fallback-bundle-identifier org.ble-hci.BLE \
    --warnings-as-errors --output-path .build/docs/BLE.doccarchive
echo "api-docs: .build/docs/BLE.doccarchive"
