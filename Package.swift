// swift-tools-version:6.0
import PackageDescription

// Release link of the CLI (docs/performance.md, "Idle RSS"): lld packs the 78 000 relative
// relocations into RELR (1.8 MB of RELA read at every start otherwise), and the static runtime's
// `-export-dynamic` is undone so the dynamic symbol table holds only imports (9 465 → 533 symbols,
// fewer pages touched by the loader). The executable stays position-independent.
// Tools/release/ble-hci.order (made by Tools/release/order.sh) puts the code and data an idle
// peripheral touches first and together: the kernel maps code 64 KB around each fault, so
// scattered start-up code kept 7.5 MB of .text resident.
let releaseLinkFlags = ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                        "-Xlinker", "--no-export-dynamic",
                        "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/Tools/release/ble-hci.order",
                        "-Xlinker", "--no-warn-symbol-ordering"]

// One module per protocol layer (see docs/ARCHITECTURE.md). Dependencies point down only, and
// each target lists exactly the modules its code imports.
let package = Package(
    name: "ble-hci",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ble-hci", targets: ["ble-hci"]),
        .library(name: "BLE", targets: ["BLE"]),
        // Two stacks on an in-process virtual radio, for an application's tests (`swift test`):
        // TestBench, and FakePeripheral from a GATT table or a `--gatt` file.
        .library(name: "BLETesting", targets: ["BLETesting"]),
    ],
    targets: [
        // C headers from Debian packages (libbluetooth-dev, libssl-dev). libcrypto only: nothing uses
        // libssl (TLS), whose loading cost the idle peripheral 0.25 MB (docs/performance.md).
        .systemLibrary(name: "CBluetooth", path: "Sources/CBluetooth"),
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "libcrypto"),
        .systemLibrary(name: "CWideChar", path: "Sources/CWideChar"),
        // AES-128 and AES-CMAC over libcrypto, shared by SMP, GATT and the virtual controller.
        .target(name: "OpenSSLCrypto", dependencies: ["COpenSSL"]),

        .target(name: "HCI"),
        .target(name: "Transport", dependencies: ["HCI", "CBluetooth"]),
        .target(name: "Capture", dependencies: ["HCI", "Transport"]),
        .target(name: "VirtualController", dependencies: ["HCI", "Transport", "OpenSSLCrypto"]),
        .target(name: "Host", dependencies: ["HCI", "Transport"]),
        .target(name: "L2CAP", dependencies: ["HCI", "Transport", "Host"]),
        .target(name: "ATT", dependencies: ["HCI", "Transport", "Host", "L2CAP"]),
        .target(name: "GATT", dependencies: ["HCI", "Transport", "ATT", "OpenSSLCrypto"]),
        .target(name: "SMP", dependencies: ["HCI", "COpenSSL", "OpenSSLCrypto"]),
        .target(name: "Decoder", dependencies: ["HCI", "Capture", "Host", "L2CAP", "ATT", "GATT", "SMP", "CWideChar"]),
        .target(name: "BLE", dependencies: ["HCI", "Transport", "Host", "L2CAP", "ATT", "GATT", "SMP"]),
        .target(name: "BLETesting", dependencies: ["BLE", "VirtualController"]),
        .executableTarget(name: "ble-hci", dependencies: ["HCI", "Transport", "Capture", "VirtualController", "Host", "ATT", "GATT", "SMP", "BLE", "Decoder"],
                          linkerSettings: [.unsafeFlags(releaseLinkFlags, .when(platforms: [.linux], configuration: .release))]),
        // Runnable examples of the Swift API, one per role (built by `make build`).
        // Each imports only BLE (its product is all an application needs).
        .executableTarget(name: "example-central", dependencies: ["BLE"], path: "Tools/examples/Central"),
        .executableTarget(name: "example-peripheral", dependencies: ["BLE"], path: "Tools/examples/Peripheral"),
        .executableTarget(name: "ble-hci-bench", dependencies: ["BLE", "HCI", "GATT", "VirtualController", "Capture", "Transport"], path: "Tools/bench/Swift"),

        .target(name: "StackTestSupport", dependencies: ["HCI", "Host", "L2CAP", "ATT", "Transport", "VirtualController", "TestSupport"], path: "Tests/StackTestSupport"),
        .testTarget(name: "HCITests", dependencies: ["HCI"]),
        .testTarget(name: "TransportTests", dependencies: ["HCI", "Transport", "TestSupport", "StackTestSupport"]),
        .testTarget(name: "CaptureTests", dependencies: ["HCI", "Transport", "Capture", "TestSupport"]),
        .testTarget(name: "VirtualControllerTests", dependencies: ["VirtualController", "HCI", "Transport", "TestSupport"]),
        .testTarget(name: "HostTests", dependencies: ["HCI", "Transport", "Host", "VirtualController", "Capture", "TestSupport", "StackTestSupport"]),
        .testTarget(name: "L2CAPTests", dependencies: ["HCI", "Transport", "Host", "L2CAP", "TestSupport", "StackTestSupport"]),
        .testTarget(name: "ATTTests", dependencies: ["HCI", "Transport", "Host", "L2CAP", "ATT", "TestSupport", "StackTestSupport"]),
        .testTarget(name: "GATTTests", dependencies: ["HCI", "ATT", "GATT", "TestSupport"]),
        .testTarget(name: "SMPTests", dependencies: ["HCI", "SMP"]),
        .testTarget(name: "DecoderTests", dependencies: ["Decoder", "HCI", "Transport", "Capture", "L2CAP", "ATT", "SMP", "TestSupport"]),
        .testTarget(name: "BLETests", dependencies: ["HCI", "Transport", "VirtualController", "Host", "L2CAP", "ATT", "GATT", "SMP", "BLE", "BLETesting", "TestSupport", "StackTestSupport"]),

        // Interop test harness (Bumble controllers and peer scripts as child processes).
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "InteropHarnessTests", dependencies: ["TestSupport"]),
        .testTarget(name: "InteropTests", dependencies: ["HCI", "Transport", "ATT", "GATT", "SMP", "BLE", "TestSupport", "StackTestSupport"]),
        // The example test an application copies (Tools/examples/Testing).
        .testTarget(name: "ExampleTests", dependencies: ["BLE", "BLETesting"], path: "Tools/examples/Testing", exclude: ["heart-rate.json"]),
        .testTarget(name: "CLITests", dependencies: ["HCI", "CBluetooth", "VirtualController", "BLE", "Decoder", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)

// libFuzzer targets (Tools/fuzz, docs/fuzzing.md). Declared only when BLE_HCI_FUZZ is set: `make
// fuzz` builds them with -sanitize=fuzzer,address into .build/fuzz; a normal build never sees them.
if Context.environment["BLE_HCI_FUZZ"] != nil {
    let fuzzers: [(name: String, dependencies: [Target.Dependency])] = [
        ("h4", ["HCI", "Transport"]),
        ("hci", ["HCI", "Capture", "Decoder"]),
        ("acl", ["HCI", "Host", "L2CAP", "Capture", "Decoder"]),
        ("l2cap-signaling", ["HCI", "L2CAP"]),
        ("att-server", ["HCI", "ATT", "GATT"]),
        ("att-client", ["HCI", "ATT", "GATT"]),
        ("smp", ["HCI", "SMP"]),
        ("ad", ["HCI", "Host", "GATT"]),
        ("capture", ["HCI", "Capture", "Decoder"]),
        ("gatt-file", ["HCI", "GATT"]),
    ]
    package.targets.append(.systemLibrary(name: "CLibFuzzer", path: "Tools/fuzz/CLibFuzzer"))
    package.targets.append(.target(name: "FuzzSupport", dependencies: ["CLibFuzzer"], path: "Tools/fuzz/Support"))
    for f in fuzzers {
        package.targets.append(.executableTarget(name: "fuzz-\(f.name)", dependencies: ["FuzzSupport"] + f.dependencies,
                                                 path: "Tools/fuzz/Targets/\(f.name)"))
        package.products.append(.executable(name: "fuzz-\(f.name)", targets: ["fuzz-\(f.name)"]))
    }
}
