import Foundation
import Testing
import TestSupport
import BLE
import HCI

/// Issue 25: LE credit-based channels through the `BLE` API against Bumble's L2CAP
/// (Tools/bumble/l2cap_coc.py) over Bumble's controllers, both ways: our central opens a
/// channel to Bumble's echo server; Bumble's central opens one to the channel our peripheral
/// publishes, and we echo. SDUs are longer than the MPS and the credits are few, so
/// segmentation and credit returns are exercised (Core v5.4 Vol 3 Part A 3.4.3, 10.1).
@Suite(.serialized, .timeLimit(.minutes(2))) struct L2CAPChannelInteropTests {
    /// SDU `i` as the script builds it: 100 + 37 × i octets, octet k = (7k + i) & 0xFF.
    static func pattern(_ i: Int) -> [UInt8] { (0..<(100 + 37 * i)).map { UInt8(truncatingIfNeeded: $0 * 7 + i) } }

    @Test func ourCentralOpensBumblesChannel() async throws {
        try await interop { scope in
            let bumble = try scope.script("l2cap_coc.py", ["--transport", scope.controllers.bumbleTransport(1), "--psm", "0x0085",
                                                          "--mtu", "1024", "--mps", "48", "--credits", "3", "--timeout", "60"])
            let ready = try await bumble.event("ready", timeout: .seconds(15))
            let address = try #require((ready["address"] as? String).flatMap(BDAddress.init(string:)))
            let central = try await scope.central(on: 0)
            let remote = try await central.connect(to: DeviceAddress(address, type: .random))
            let channel = try await remote.openL2CAPChannel(psm: 0x0085, mtu: 1500, mps: 100, credits: 4)
            // Bumble's receive parameters, as it was started with (4.23).
            #expect(channel.peerMTU == 1024 && channel.peerMPS == 48)
            let sdus = (0..<20).map(Self.pattern)
            let sending = Task { for s in sdus { try await channel.send(s) } }
            var echoed: [[UInt8]] = []
            for try await sdu in channel.sdus {
                echoed.append(sdu)
                if echoed.count == sdus.count { break }
            }
            try await sending.value
            #expect(echoed == sdus)
            let total = sdus.reduce(0) { $0 + $1.count }
            _ = try await bumble.event("sdu", timeout: .seconds(5)) { $0["total"] as? Int == total }
            try await channel.close()
            _ = try await bumble.event("channelClosed", timeout: .seconds(5))
        }
    }

    @Test func bumblesCentralOpensOurPublishedChannel() async throws {
        try await interop { scope in
            let (peripheral, _) = try await scope.peripheral(on: 0, services: [], name: "coc-ours")
            let published = try await peripheral.publishL2CAPChannel(mtu: 1200, mps: 40, credits: 2)
            // Ours echoes every SDU on the channel it accepted.
            let echo = Task {
                for await channel in published.channels {
                    for try await sdu in channel.sdus { try await channel.send(sdu) }
                }
            }
            defer { echo.cancel() }
            try await peripheral.startAdvertising(AdvertisingOptions(name: "coc-ours"))
            let address = await peripheral.address
            let bumble = try scope.script("l2cap_coc.py", [
                "--transport", scope.controllers.bumbleTransport(1), "--connect", "\(address.address)/\(address.type == .public ? "public" : "random")",
                "--psm", String(published.psm), "--mtu", "900", "--mps", "64", "--credits", "4", "--sdus", "20", "--timeout", "60"])
            let opened = try await bumble.event("channel", timeout: .seconds(20))
            // Our receive parameters as published (4.22, 4.23).
            #expect(opened["peerMtu"] as? Int == 1200 && opened["peerMps"] as? Int == 40)
            let echoed = try await bumble.event("echoed", timeout: .seconds(30))
            #expect(echoed["ok"] as? Bool == true)
            #expect(echoed["count"] as? Int == 20)
            #expect(echoed["total"] as? Int == (0..<20).map(Self.pattern).reduce(0) { $0 + $1.count })
        }
    }
}
