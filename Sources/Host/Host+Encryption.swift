import HCI

// Link encryption procedures (Core Vol 6 Part B 5.1.3; HCI Vol 4 Part E 7.8.24, 7.8.25, 7.8.26,
// 7.7.8, 7.7.39). The keys come from SMP above; the host only carries them.

extension Host {
    /// Central: encrypts the link (or refreshes its key) with `ltk` and waits for Encryption
    /// Change / Encryption Key Refresh Complete.
    ///
    /// Throws `HostError.encryptionFailed` with the controller's status when encryption does
    /// not start (PIN or Key Missing 0x06: the peripheral has no key for this EDIV/Rand — the
    /// bond is lost on its side), `HostError.disconnected` when the link drops meanwhile
    /// (Connection Terminated due to MIC Failure 0x3D: the keys differ), `HCIError` when the
    /// controller refuses the command, `HostError.procedureTimeout` when nothing comes back.
    /// The `HostEvent.encryptionChanged` event is emitted as well.
    public func startEncryption(handle: UInt16, ltk: [UInt8], ediv: UInt16, rand: UInt64,
                                timeout: Duration = .seconds(10)) async throws {
        guard ltk.count == 16 else { throw HostError.invalidArgument("an LTK has 16 octets, not \(ltk.count)") }
        guard links[handle] != nil else { throw HostError.unknownConnection(handle) }
        let w = try registerWaiter(.encryption, handle: handle)
        do {
            _ = try await execute(LEEnableEncryption(connectionHandle: handle, randomNumber: rand,
                                                     encryptedDiversifier: ediv, longTermKey: ltk))
        } catch {
            cancelWaiter(w)
            throw error
        }
        guard case .encryption(let status) = try await awaitWaiter(w, timeout: timeout,
                                                                   name: "encrypting \(hexCode(handle, digits: 4))") else {
            throw HostError.malformed("encryption: unexpected completion")
        }
        if !status.isSuccess { throw HostError.encryptionFailed(handle: handle, status: status) }
    }

    /// Peripheral: answers an LE Long Term Key Request with `ltk`, or with a negative reply
    /// when nil (no key for that EDIV/Rand: the central sees PIN or Key Missing).
    public func replyLongTermKey(handle: UInt16, ltk: [UInt8]?) async throws {
        if let ltk {
            guard ltk.count == 16 else { throw HostError.invalidArgument("an LTK has 16 octets, not \(ltk.count)") }
            _ = try await execute(LELongTermKeyRequestReply(connectionHandle: handle, longTermKey: ltk))
        } else {
            _ = try await execute(LELongTermKeyRequestNegativeReply(connectionHandle: handle))
        }
    }

    /// The controller's key size for an encrypted link (Read Encryption Key Size), in octets.
    public func readEncryptionKeySize(handle: UInt16) async throws -> Int {
        Int(try await execute(ReadEncryptionKeySize(connectionHandle: handle)).keySize)
    }

    /// Encryption Change / Key Refresh Complete: completes `startEncryption` and tells the layer above.
    func encryptionEvent(handle: UInt16, status: HCIStatus, enabled: Bool) {
        signal(.encryptionChanged(enabled: enabled, status: status), on: handle)
        complete(.encryption, handle: handle, with: .success(.encryption(status)))
        emit(.encryptionChanged(handle: handle, enabled: enabled, status: status))
    }
}
