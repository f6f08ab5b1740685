# ble-hci: build, run and test. Two set-up commands: `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export PATH := $(PATH):/opt/swift/usr/bin

SWIFT ?= swift
SWIFT_FLAGS ?=

# `make test` runs these suites in order after deps and build. A new suite adds itself with
# `TEST_SUITES += name` here (before the `test` rule) and a rule for `name` below.
TEST_SUITES := swift-test docs-check vm-test

.PHONY: all deps sysdeps build demo test $(TEST_SUITES) bench fixtures clean docs

all: build

# Everything the tests need: Debian packages and the pinned Bumble venv (.venv). Idempotent.
deps:
	Tools/setup.sh

# Only the Debian packages the build needs (headers of libbluetooth-dev, libssl-dev, ...).
sysdeps:
	Tools/setup.sh --system-only

build: sysdeps
	$(SWIFT) build $(SWIFT_FLAGS)

# The main job on the embedded virtual controller: no adapter, no root, no venv needed.
demo: sysdeps
	$(SWIFT) run $(SWIFT_FLAGS) ble-hci demo

test: deps build $(TEST_SUITES)
	@echo "make test: all suites passed ($(TEST_SUITES))"

# Unit, stack and interop (Bumble) tests of the Swift package. One test at a time: many of
# them start Bumble and ble-hci processes, and on a 2-core machine running them all at once
# makes start-up times, not the code, decide the outcome (~2 min serial vs ~40 s parallel).
swift-test: deps build
	$(SWIFT) test --no-parallel $(SWIFT_FLAGS)

# The real kernel path (HCI user channel, vhci adapters, BlueZ as the peer) inside a VM
# (docs/vm.md). The guest runs the host's build: ble-hci and the test bundle in .build/debug.
vm-test: deps build
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	Tools/vm/run-tests.sh

# Performance report (docs/performance.md): ours vs Bumble / tshark in one run; always exits 0.
bench: deps
	bash Tools/bench/run.sh

# Re-create the Bumble capture fixtures in Tests/Fixtures (commit them afterwards).
fixtures: deps
	.venv/bin/python Tools/bumble/capture.py --out Tests/Fixtures

# Regenerate docs/tutorial.md (real dump excerpts) from docs/tutorial.template.md.
# `Tools/docs/generate-tutorial.sh --check` fails if it is stale.
docs: build
	BLE_HCI="$$($(SWIFT) build $(SWIFT_FLAGS) --show-bin-path)/ble-hci" Tools/docs/generate-tutorial.sh

# The tutorial's packet excerpts must still be what the tool prints (regenerate with `make docs`).
docs-check: build
	BLE_HCI="$$($(SWIFT) build $(SWIFT_FLAGS) --show-bin-path)/ble-hci" Tools/docs/generate-tutorial.sh --check

clean:
	rm -rf .build
