# ble-hci: build, run and test. Two set-up commands: `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export PATH := $(PATH):/opt/swift/usr/bin

SWIFT ?= swift
SWIFT_FLAGS ?=

# `make test` runs these suites in order after deps and build. A new suite adds itself with
# `TEST_SUITES += name` here (before the `test` rule) and a rule for `name` below that runs
# its command through Tools/test-suite.sh (exit 77 = skipped; see there).
TEST_SUITES := swift-test docs-check vm-test fuzz-smoke

# libFuzzer targets (Tools/fuzz/Targets, docs/fuzzing.md) and seconds per target for `make fuzz`.
FUZZ_TARGETS := h4 hci acl l2cap-signaling att-server att-client smp ad capture
FUZZ_SECONDS ?= 60

.PHONY: all deps sysdeps build demo test $(TEST_SUITES) bench fixtures clean docs fuzz fuzz-build tsan

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

# Every suite runs (-k: one failing does not hide the others); the last line says which
# passed, which were skipped and which failed. CI=true: a skipped suite fails the run.
test: deps build
	@rm -rf .build/test-status
	@$(MAKE) --no-print-directory -k $(TEST_SUITES) || true
	@Tools/test-summary.sh $(TEST_SUITES)

# Unit, stack and interop (Bumble) tests of the Swift package. One test at a time: many of
# them start Bumble and ble-hci processes, and on a 2-core machine running them all at once
# makes start-up times, not the code, decide the outcome (~2 min serial vs ~40 s parallel).
swift-test: deps build
	Tools/test-suite.sh $@ $(SWIFT) test --no-parallel $(SWIFT_FLAGS)

# The real kernel path (HCI user channel, vhci adapters, BlueZ as the peer) inside a VM
# (docs/vm.md). The guest runs the host's build: ble-hci and the test bundle in .build/debug.
vm-test: deps build
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	Tools/test-suite.sh $@ Tools/vm/run-tests.sh

# Each fuzz target for a few seconds on its seed corpus and saved regressions (docs/fuzzing.md).
fuzz-smoke: sysdeps
	Tools/fuzz/build.sh $(FUZZ_TARGETS)
	Tools/test-suite.sh $@ Tools/fuzz/run.sh 3 $(FUZZ_TARGETS)

# libFuzzer + AddressSanitizer, FUZZ_SECONDS per target (docs/fuzzing.md); a finding fails.
fuzz: sysdeps
	Tools/fuzz/build.sh $(FUZZ_TARGETS)
	Tools/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The Swift tests under ThreadSanitizer, in their own build directory (docs/tsan.md).
tsan: deps
	Tools/tsan.sh

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
	BLE_HCI="$$($(SWIFT) build $(SWIFT_FLAGS) --show-bin-path)/ble-hci" Tools/test-suite.sh $@ Tools/docs/generate-tutorial.sh --check

clean:
	rm -rf .build
