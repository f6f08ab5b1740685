import Testing
import HCI
import ATT
@testable import GATT

/// Multiple Handle Value Notifications (Core v5.4 Vol 3 Part F 3.4.7.4): the PDU is the opcode
/// and, per value, a 2-octet handle, a 2-octet length and the value, at most ATT_MTU octets.
@Suite struct MultipleNotificationTests {
    @Test func valuesArePackedIntoPDUsThatFitATTMTU() {
        let five = (1...4).map { ATTHandleValue(handle: UInt16($0), value: [UInt8](repeating: UInt8($0), count: 5)) }
        // ATT_MTU 23: 1 + 9 + 9 = 19 fits, a third value (28) does not.
        let batches = GATTServer.batches(five, mtu: 23)
        #expect(batches.map { $0.map(\.handle) } == [[1, 2], [3, 4]])
        for b in batches { #expect(ATTPDU.multipleHandleValueNotification(b).encodedSize <= 23) }
        // Exactly full: 1 + 9 + 9 + 4 = 23 with an empty third value.
        let full = [five[0], five[1], ATTHandleValue(handle: 9, value: [])]
        #expect(GATTServer.batches(full, mtu: 23).count == 1)
        #expect(ATTPDU.multipleHandleValueNotification(full).encodedSize == 23)
    }
}
