// swift-tools-version:6.0
import PackageDescription

// One module per protocol layer (see docs/ARCHITECTURE.md). Dependencies point down only, and
// each target lists exactly the modules its code imports.
let package = Package(
    name: "ble-hci",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ble-hci", targets: ["ble-hci"]),
        .library(name: "BLE", targets: ["BLE"]),
    ],
    targets: [
        // C headers from Debian packages (libbluetooth-dev, libssl-dev).
        .systemLibrary(name: "CBluetooth", path: "Sources/CBluetooth"),
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl"),

        .target(name: "HCI"),
        .target(name: "Transport", dependencies: ["HCI", "CBluetooth"]),
        .target(name: "Capture", dependencies: ["HCI", "Transport"]),
        .target(name: "VirtualController", dependencies: ["HCI", "Transport", "COpenSSL"]),
        .target(name: "Host", dependencies: ["HCI", "Transport"]),
        .target(name: "L2CAP", dependencies: ["HCI", "Host"]),
        .target(name: "ATT", dependencies: ["HCI", "Host", "L2CAP"]),
        .target(name: "GATT", dependencies: ["HCI", "ATT", "COpenSSL"]),
        .target(name: "SMP", dependencies: ["HCI", "COpenSSL"]),
        .target(name: "Decoder", dependencies: ["HCI", "Capture", "Host", "L2CAP", "ATT", "GATT", "SMP"]),
        .target(name: "BLE", dependencies: ["HCI", "Transport", "Host", "L2CAP", "ATT", "GATT", "SMP"]),
        .executableTarget(name: "ble-hci", dependencies: ["HCI", "Transport", "Capture", "VirtualController", "Host", "ATT", "GATT", "SMP", "BLE", "Decoder"]),
        // Runnable examples of the Swift API, one per role (built by `make build`).
        .executableTarget(name: "example-central", dependencies: ["BLE", "HCI", "Transport"], path: "Tools/examples/Central"),
        .executableTarget(name: "example-peripheral", dependencies: ["BLE", "ATT", "GATT", "HCI", "Transport"], path: "Tools/examples/Peripheral"),
        .executableTarget(name: "ble-hci-bench", dependencies: ["BLE", "HCI", "GATT", "VirtualController", "Capture"], path: "Tools/bench/Swift"),

        .target(name: "StackTestSupport", dependencies: ["HCI", "Host", "L2CAP", "Transport", "TestSupport"], path: "Tests/StackTestSupport"),
        .testTarget(name: "HCITests", dependencies: ["HCI"]),
        .testTarget(name: "TransportTests", dependencies: ["HCI", "Transport", "TestSupport"]),
        .testTarget(name: "CaptureTests", dependencies: ["HCI", "Transport", "Capture"]),
        .testTarget(name: "VirtualControllerTests", dependencies: ["VirtualController", "HCI", "Transport", "TestSupport"]),
        .testTarget(name: "HostTests", dependencies: ["HCI", "Transport", "Host", "VirtualController", "TestSupport"]),
        .testTarget(name: "L2CAPTests", dependencies: ["HCI", "Transport", "Host", "L2CAP", "TestSupport", "StackTestSupport"]),
        .testTarget(name: "ATTTests", dependencies: ["HCI", "Transport", "Host", "L2CAP", "ATT", "TestSupport", "StackTestSupport"]),
        .testTarget(name: "GATTTests", dependencies: ["HCI", "ATT", "GATT", "TestSupport"]),
        .testTarget(name: "SMPTests", dependencies: ["HCI", "SMP"]),
        .testTarget(name: "DecoderTests", dependencies: ["Decoder", "HCI", "Transport", "Capture", "L2CAP", "ATT", "SMP", "TestSupport"]),
        .testTarget(name: "BLETests", dependencies: ["HCI", "Transport", "VirtualController", "Host", "L2CAP", "ATT", "GATT", "SMP", "BLE", "TestSupport"]),

        // Interop test harness (Bumble controllers and peer scripts as child processes).
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "InteropHarnessTests", dependencies: ["TestSupport"]),
        .testTarget(name: "InteropTests", dependencies: ["HCI", "Transport", "ATT", "GATT", "SMP", "BLE", "TestSupport"]),
        .testTarget(name: "CLITests", dependencies: ["HCI", "CBluetooth", "VirtualController", "BLE", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
