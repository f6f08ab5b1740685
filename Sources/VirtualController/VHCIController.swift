import Foundation
import HCI
import Transport
#if canImport(Glibc)
import Glibc
#endif

/// Attaches a controller of a link to the Linux kernel through /dev/vhci, as a primary
/// adapter (hciN): the kernel (and BlueZ, or `ble-hci` over a user channel) use it as a real one.
public final class VHCIController: Sendable {
    public let controller: VirtualController
    /// The hciN index the kernel gave the new adapter.
    public let index: UInt16
    let connection: H4Connection
    public static let devicePath = "/dev/vhci"

    /// Opens /dev/vhci, creates a primary device (0xff 0x00), reads the index and starts
    /// H4 in both directions. Throws a TransportError saying what to do when it can't.
    public init(link: VirtualLink, path: String = VHCIController.devicePath) throws(TransportError) {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            let e = errno
            let advice: String
            switch e {
            case ENOENT: advice = "this kernel has no virtual HCI driver: load it with `modprobe hci_vhci` (needs a kernel with Bluetooth), or serve over tcp:HOST:PORT / unix:PATH instead"
            case EACCES, EPERM: advice = "permission denied: run as root (or give this user access to \(path))"
            default: advice = "cannot use the virtual HCI driver"
            }
            throw TransportError(.open, "\(path): open failed: \(String(cString: strerror(e))) (errno \(e)); \(advice)", errno: e)
        }
        var create: [UInt8] = [0xFF, 0x00]
        guard write(fd, &create, 2) == 2 else {
            let e = errno
            Glibc.close(fd)
            throw TransportError(.open, "\(path): cannot create a device: \(String(cString: strerror(e))) (errno \(e))", errno: e)
        }
        var answer = [UInt8](repeating: 0, count: 4)
        var got = 0
        while got < 4 {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 2000) > 0 else {
                Glibc.close(fd)
                throw TransportError(.open, "\(path): the kernel did not answer the create-device request within 2 s")
            }
            let n = answer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, 4 - got) }
            if n <= 0 {
                let e = errno
                if n < 0 && e == EINTR { continue }
                Glibc.close(fd)
                throw TransportError(.open, "\(path): reading the device index failed: \(String(cString: strerror(e)))", errno: e)
            }
            got += n
        }
        guard answer[0] == 0xFF, answer[1] == 0x00 else {
            Glibc.close(fd)
            throw TransportError(.open, "\(path): unexpected answer \(answer) to the create-device request")
        }
        index = UInt16(answer[2]) | UInt16(answer[3]) << 8
        controller = link.addController()
        connection = H4Connection(fd: fd, name: "vhci hci\(index)", isSocket: false)
        let c = controller
        let conn = connection
        let name = "vhci hci\(index)"
        c.powerCycle()
        c.attachHost { packet in conn.send(packet) }
        conn.start(packet: { c.receive(fromHost: $0) }, backlog: { c.queuedFromHost }, ended: { reason in
            c.attachHost(nil)
            link.note("\(name): \(reason)")
        })
    }

    public func close() {
        controller.attachHost(nil)
        connection.close()
    }
}
