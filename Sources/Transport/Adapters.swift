import CBluetooth
import Foundation
import HCI
import Glibc

/// One of the kernel's HCI adapters, as `HCIGETDEVINFO` and the management interface see it.
public struct HCIAdapter: Sendable {
    public var index: UInt16
    public var name: String
    public var address: BDAddress
    /// HCI_UP: initialised and running (by the kernel, or by a program's user channel).
    public var up: Bool
    /// Whether the kernel's management interface lists it (nil: could not ask). The kernel
    /// removes an adapter from that list while a program holds its HCI user channel.
    public var managedByKernel: Bool?

    /// Who has the adapter, in words, and the command that frees it (nil when it is free).
    public var state: (summary: String, free: String?) {
        switch (up, managedByKernel) {
        case (_, false?):
            return ("held by a program through its HCI user channel", "stop that program (another ble-hci, Bumble, btproxy...); the kernel takes hci\(index) back when it exits")
        case (true, _):
            return ("up: the kernel's Bluetooth stack (bluetoothd) uses it", "sudo btmgmt -i hci\(index) power off   (or: sudo systemctl stop bluetooth)")
        case (false, _):
            return ("down: free for ble-hci", nil)
        }
    }
}

public enum HCIAdapters {
    /// The kernel's adapters (HCIGETDEVLIST, then HCIGETDEVINFO for each). Throws with the
    /// user-channel advice when the kernel has no Bluetooth (EAFNOSUPPORT).
    public static func list() throws(TransportError) -> [HCIAdapter] {
        let fd = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), BTPROTO_HCI)
        guard fd >= 0 else {
            let e = errno
            let advice = e == EAFNOSUPPORT ? UserChannelTransport.noBluetoothAdvice : String(cString: strerror(e))
            throw TransportError(.open, "cannot open an HCI socket: \(advice)", errno: e)
        }
        defer { Glibc.close(fd) }
        var ids = [UInt16](repeating: 0, count: Int(HCI_MAX_DEV))
        let n = ble_hci_dev_list(fd, &ids, UInt16(HCI_MAX_DEV))
        guard n >= 0 else {
            let e = errno
            throw TransportError(.open, "HCIGETDEVLIST failed: \(String(cString: strerror(e))) (errno \(e))", errno: e)
        }
        let managed = managementIndexList()
        var adapters: [HCIAdapter] = []
        for id in ids.prefix(Int(n)) {
            var info = hci_dev_info()
            info.dev_id = id
            guard ble_hci_dev_info(fd, &info) == 0 else { continue }  // removed meanwhile
            let name = withUnsafeBytes(of: info.name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            let address = withUnsafeBytes(of: info.bdaddr) { BDAddress(littleEndian: Array($0.prefix(6))) }
            adapters.append(HCIAdapter(index: id, name: name.isEmpty ? "hci\(id)" : name, address: address,
                                       up: info.flags & (1 << UInt32(HCI_UP)) != 0,
                                       managedByKernel: managed.map { $0.contains(id) }))
        }
        return adapters
    }

    /// The management interface's Read Index List (BlueZ doc/mgmt-api.txt: command 0x0003 on
    /// HCI_CHANNEL_CONTROL, answered by Command Complete 0x0001 with Num_Controllers and the
    /// indexes). Allowed without privileges; nil when it cannot be asked or does not answer in 1 s.
    static func managementIndexList() -> Set<UInt16>? {
        let readIndexList: UInt16 = 0x0003, commandComplete: UInt16 = 0x0001
        let fd = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), BTPROTO_HCI)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var addr = sockaddr_hci(hci_family: sa_family_t(AF_BLUETOOTH), hci_dev: UInt16(HCI_DEV_NONE), hci_channel: UInt16(HCI_CHANNEL_CONTROL))
        let bound = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_hci>.size)) }
        }
        guard bound == 0 else { return nil }
        // Header: opcode, controller index (0xFFFF: none), parameter length; little-endian.
        let request: [UInt8] = [UInt8(readIndexList & 0xff), UInt8(readIndexList >> 8), 0xff, 0xff, 0, 0]
        guard request.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == request.count else { return nil }
        let deadline = Date().addingTimeInterval(1)
        var buffer = [UInt8](repeating: 0, count: 1024)
        while Date() < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000))) > 0 else { return nil }
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n >= 6 else { return nil }
            let b = Array(buffer[0..<n])
            func u16(_ o: Int) -> UInt16 { UInt16(b[o]) | UInt16(b[o + 1]) << 8 }
            // Command Complete: event header (6) + opcode (2) + status (1) + Num_Controllers (2) + indexes.
            guard u16(0) == commandComplete, n >= 11, u16(6) == readIndexList else { continue }  // other events
            guard b[8] == 0 else { return nil }
            let count = Int(u16(9))
            guard n >= 11 + 2 * count else { return nil }
            return Set((0..<count).map { u16(11 + 2 * $0) })
        }
        return nil
    }
}
