import HCI
import Transport

extension Host {
    /// Brings the controller up and starts reading its packets.
    ///
    /// Reset, Read Local Version Information, Read Local Supported Commands, Read Local
    /// Supported Features, LE Read Local Supported Features, buffer sizes (LE Read Buffer Size
    /// v2 → v1 → Read Buffer Size), Read BD_ADDR, Set Event Mask, LE Set Event Mask. Optional
    /// commands are sent only when the controller lists them as supported.
    public func start() async throws -> ControllerInfo {
        try checkAlive()
        if let controller { return controller }
        startReader()
        // Reset answers with Command Complete once the controller is ready; allow it time.
        _ = try await execute(Reset(), timeout: .seconds(Swift.max(5, Int(configuration.commandTimeout.components.seconds))))
        var info = ControllerInfo()

        let version = try await execute(ReadLocalVersionInformation())
        info.hciVersion = version.hciVersion
        info.hciSubversion = version.hciSubversion
        info.lmpVersion = version.lmpVersion
        info.lmpSubversion = version.lmpSubversion
        info.companyIdentifier = version.companyIdentifier

        // Mandatory since 1.2; tolerate a controller that rejects it (then only mandatory LE commands are used).
        do {
            info.supportedCommands = try await execute(ReadLocalSupportedCommands()).supportedCommands
        } catch let e as HCIError {
            warn("Read Local Supported Commands failed (\(e)); assuming only mandatory commands")
        }
        let supported = info  // for `supports`
        func has(_ opcode: HCIOpcode) -> Bool { supported.supportedCommands.isEmpty || supported.supports(opcode) }

        if has(ReadLocalSupportedFeatures.opcode) {
            info.features = try await execute(ReadLocalSupportedFeatures()).lmpFeatures
        }
        if has(LEReadLocalSupportedFeatures.opcode) {
            info.leFeatures = try await execute(LEReadLocalSupportedFeatures()).leFeatures.rawValue
        }

        // Buffers: v2 → v1 → shared BR/EDR buffers.
        var leLength = 0
        var leCount = 0
        if !info.supportedCommands.isEmpty, info.supports(LEReadBufferSizeV2.opcode) {
            let b = try await execute(LEReadBufferSizeV2())
            leLength = Int(b.leACLDataPacketLength)
            leCount = Int(b.totalNumLEACLDataPackets)
            info.isoDataLength = Int(b.isoDataPacketLength)
            info.isoBufferCount = Int(b.totalNumISODataPackets)
        } else {
            let b = try await execute(LEReadBufferSize())
            leLength = Int(b.leACLDataPacketLength)
            leCount = Int(b.totalNumLEACLDataPackets)
        }
        if leLength == 0 || leCount == 0 {
            let b = try await execute(ReadBufferSize())
            leLength = Int(b.aclDataPacketLength)
            leCount = Int(b.totalNumACLDataPackets)
        }
        guard leLength > 0, leCount > 0 else {
            throw HostError.unsupported("the controller reports no ACL buffers (length \(leLength), count \(leCount))")
        }
        info.aclDataLength = leLength
        info.aclBufferCount = leCount
        configureACL(dataLength: leLength, bufferCount: leCount)

        info.address = try await execute(ReadBDADDR()).address

        _ = try await execute(SetEventMask(.leHost))
        _ = try await execute(LESetEventMask(.host))

        controller = info
        localAddressForConnections = DeviceAddress(info.address, type: .public)
        return info
    }

    /// The identity address of this host (Core Vol 6 Part B 1.3): the public address, or the random
    /// static one when the controller has none. Bonds are filed under it; an RPA never is.
    public var identityAddress: DeviceAddress {
        effectiveOwnAddress(.public) == .public ? DeviceAddress(controller?.address ?? .zero, type: .public)
                                                : DeviceAddress(staticRandomAddress, type: .random)
    }

    /// The address advertising goes out from now: with Own_Address_Type 0x03 the RPA the
    /// controller made (LE Read Local Resolvable Address, Core v5.4 Vol 4 Part E 7.8.43), else
    /// `advertisingAddress` (also when the controller cannot say).
    public func currentAdvertisingAddress() async -> DeviceAddress {
        guard advertising, let peer = advertisingResolvingListPeer,
              let rpa = try? await execute(LEReadLocalResolvableAddress(peerIdentityAddressType: peer.identityParameter.type.rawValue,
                                                                        peerIdentityAddress: peer.address)).localResolvableAddress,
              rpa != .zero else { return advertisingAddress }
        return DeviceAddress(rpa, type: .random)
    }

    /// The own address used for advertising (and so the local address of peripheral links).
    public var advertisingAddress: DeviceAddress {
        if let advertisingRandomAddress { return DeviceAddress(advertisingRandomAddress, type: .random) }
        return DeviceAddress(controller?.address ?? .zero, type: .public)
    }
}

