import Foundation
import HCI
import ATT
import GATT

/// The `secure` profile of CLI.md: the encrypted characteristics of the seeds' peripheral tutorial.
///
/// | service | characteristic | properties | behaviour |
/// |---|---|---|---|
/// | ff66 | ff01 | read, write | needs an encrypted link; starts as "secret"; a write replaces it |
/// | ff66 | ff02 | read, notify | reading needs an authenticated (MITM) encrypted link; "authenticated"; CCCD writable only when encrypted; notifies once a second like fff1 |
///
/// Unencrypted, ff01 answers Insufficient Authentication (0x05), or Insufficient Encryption
/// (0x0F) to a central this peripheral holds a bond with (`ATTSecurity.keyAvailable`).
public enum SecureProfile {
    public static let service: BluetoothUUID = 0xFF66
    public static let secret: BluetoothUUID = 0xFF01
    public static let authenticated: BluetoothUUID = 0xFF02
    public static let advertisedServices: [BluetoothUUID] = [service]

    public static var services: [GATTService] {
        [
            GATTService(uuid: service, characteristics: [
                GATTCharacteristic(uuid: secret, properties: [.read, .write],
                                   permissions: [.readable, .writable, .readEncryptionRequired, .writeEncryptionRequired],
                                   value: Array("secret".utf8)),
                GATTCharacteristic(uuid: authenticated, properties: [.read, .notify],
                                   permissions: [.readable, .readAuthenticationRequired],
                                   value: Array("authenticated".utf8),
                                   descriptors: [GATTDescriptor(uuid: GATTUUID.clientCharacteristicConfiguration,
                                                                permissions: [.readable, .writable, .writeEncryptionRequired],
                                                                value: [0, 0])]),
            ]),
        ]
    }

    /// ff02's notifications: once a second while subscribed, the current second as two ASCII digits.
    public static func startTicker(on peripheral: Peripheral, interval: Duration = .seconds(1)) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                if !peripheral.subscribers(of: authenticated).isEmpty {
                    let second = Calendar(identifier: .gregorian).component(.second, from: Date())
                    _ = try? await peripheral.notify(DemoProfile.tick(second: second), for: authenticated)  // 2 octets: fits any link
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}
