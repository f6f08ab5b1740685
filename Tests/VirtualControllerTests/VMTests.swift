import Foundation
import Testing
import HCI
import TestSupport
import Transport
import VirtualController

/// In the VM guest of `make vm-test` (docs/vm.md), which sets BLE_HCI_IN_VM=1: a kernel with
/// Bluetooth and /dev/vhci. Elsewhere these tests report themselves skipped, never passed.
private let inVM = ProcessInfo.processInfo.environment["BLE_HCI_IN_VM"] == "1"

/// The HCI user channel on a real kernel: our virtual controller attached through /dev/vhci
/// as adapter hciN, and our UserChannelTransport bound to it. The guest suite selects these
/// by name (Tools/vm/guest-suite.sh's filter `VMTests`).
@Suite(.enabled(if: inVM, "needs the VM guest's kernel with Bluetooth and /dev/vhci (make vm-test)"), .serialized)
struct VMTests {
    /// Binds the user channel of `index`, retrying EBUSY while the kernel initialises the new
    /// adapter and powers it off again (no bluetoothd in the guest: Core-independent kernel behaviour).
    func openUserChannel(_ index: UInt16) throws -> FileDescriptorTransport {
        let deadline = Date().addingTimeInterval(15)
        while true {
            do { return try UserChannelTransport.open(index: index) } catch {
                if error.errno == EBUSY, Date() < deadline { continue }
                throw error
            }
        }
    }

    /// Sends `command` and returns the Command Complete for its opcode (Core v5.4 Vol 4 Part E
    /// 4.4: the controller answers every command; 7.7.14 Command Complete), within 5 s.
    func execute(_ command: HCICommandPacket, on t: FileDescriptorTransport) async throws -> CommandComplete {
        try t.send(.command(command))
        return try await withTimeout(.seconds(5), "Command Complete for \(command.opcode.name) over the user channel") {
            for try await packet in t.incoming {
                if case .event(let e) = packet, let cc = try? HCIEvents.decode(e) as? CommandComplete, cc.opcode == command.opcode {
                    return cc
                }
            }
            throw TransportError(.open, "the user channel ended before Command Complete for \(command.opcode.name)")
        }
    }

    @Test func userChannelCarriesCommandsToAVHCIAdapter() async throws {
        let vhci = try VHCIController(link: VirtualLink())
        defer { vhci.close() }
        let t = try openUserChannel(vhci.index)
        defer { t.close() }
        // HCI_Reset and HCI_Read_BD_ADDR through the kernel to our controller and back: status
        // 0x00 Success, and the address the controller has (Core v5.4 Vol 4 Part E 7.3.2, 7.4.6).
        let reset = try await execute(Reset().packet, on: t)
        #expect(reset.returnParameters == [0x00])
        let readAddress = try await execute(ReadBDADDR().packet, on: t)
        #expect(readAddress.returnParameters.first == 0x00)
        #expect(Array(readAddress.returnParameters.dropFirst()) == vhci.controller.publicAddress.littleEndian)
    }

    @Test func userChannelIsExclusive() throws {
        let vhci = try VHCIController(link: VirtualLink())
        defer { vhci.close() }
        let t = try openUserChannel(vhci.index)
        defer { t.close() }
        // A second bind on an adapter whose user channel is held fails (the kernel's
        // hci_sock_bind answers EBUSY) and says another program holds it.
        do {
            let second = try UserChannelTransport.open(index: vhci.index)
            second.close()
            Issue.record("a second user channel on hci\(vhci.index) opened")
        } catch {
            #expect(error.errno == EBUSY)
            #expect(error.message.contains("another program"))
        }
    }
}
