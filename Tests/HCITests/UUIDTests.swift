import Testing
import HCI

/// Equality of UUIDs given in different widths: Core v5.4 Vol 3 Part B 2.5.1 — a 16-bit or
/// 32-bit UUID stands for the 128-bit value xxxxxxxx-0000-1000-8000-00805F9B34FB.
@Suite struct UUIDEqualityTests {
    static let heartRate128: [UInt8] = [0x00, 0x00, 0x18, 0x0D, 0x00, 0x00, 0x10, 0x00,
                                        0x80, 0x00, 0x00, 0x80, 0x5F, 0x9B, 0x34, 0xFB]

    @Test func sixteenBitEqualsItsThirtyTwoAndOneTwentyEightBitForms() {
        let u16 = BluetoothUUID(0x180D)
        #expect(u16 == BluetoothUUID(uuid32: 0x0000_180D))
        #expect(BluetoothUUID(uuid32: 0x0000_180D) == u16)
        #expect(u16 == BluetoothUUID(bigEndian: Self.heartRate128))
        #expect(Set([u16, BluetoothUUID(uuid32: 0x0000_180D)]).count == 1)
    }

    @Test func differentValuesDifferInEveryWidth() {
        #expect(BluetoothUUID(0x180D) != BluetoothUUID(0x180F))
        #expect(BluetoothUUID(0x180D) != BluetoothUUID(uuid32: 0x0001_180D))
        var other = Self.heartRate128
        other[15] ^= 1  // outside the Base UUID range: a distinct 128-bit UUID
        #expect(BluetoothUUID(0x180D) != BluetoothUUID(bigEndian: other))
        #expect(BluetoothUUID(bigEndian: other) != BluetoothUUID(bigEndian: Self.heartRate128))
    }
}
