import Testing
@testable import HCI

/// Controller privacy and directed advertising (issue 30) as bytes: directed LE Set Advertising
/// Parameters and LE Enhanced Connection Complete as Bumble's encoder writes them (bumble
/// 0.0.236, `bytes(HCI_LE_Set_Advertising_Parameters_Command(...))`, `bytes(HCI_LE_Enhanced_
/// Connection_Complete_Event(...))`); LE Read Local Resolvable Address, which Bumble lacks, from
/// the specification's tables (Core v5.4 Vol 4 Part E 7.8.43: OCF 0x002C, Peer_Identity_Address_Type
/// 1 octet and Peer_Identity_Address 6; returns Status 1 and Local_Resolvable_Address 6).
@Suite struct PrivacyVectorTests {
    let identity = BDAddress([0xC1, 0x02, 0x03, 0x04, 0x05, 0x06])

    /// ADV_DIRECT_IND low duty cycle (Advertising_Type 0x04) with Own_Address_Type 0x03 (7.8.5).
    @Test func directedAdvertisingParametersMatchBumble() throws {
        let c = LESetAdvertisingParameters(advertisingIntervalMin: 0xA0, advertisingIntervalMax: 0xA0, advertisingType: 0x04,
                                           ownAddressType: .randomIdentity, peerAddressType: .public, peerAddress: identity)
        let h4: [UInt8] = [0x01, 0x06, 0x20, 0x0F, 0xA0, 0x00, 0xA0, 0x00, 0x04, 0x03, 0x00, 0x06, 0x05, 0x04, 0x03, 0x02, 0xC1, 0x07, 0x00]
        #expect(HCIPacket.command(c.packet).h4 == h4)
        #expect(try LESetAdvertisingParameters.decode(Array(h4.dropFirst(4))) == c)
    }

    /// Local_Resolvable_Private_Address, the RPA the controller made for us (7.7.65.10).
    @Test func enhancedConnectionCompleteMatchesBumble() throws {
        let h4: [UInt8] = [0x04, 0x3E, 0x1F, 0x0A, 0x00, 0x40, 0x00, 0x01, 0x02, 0x06, 0x05, 0x04, 0x03, 0x02, 0xC1,
                           0x0F, 0x0E, 0x0D, 0x0C, 0x0B, 0x4A, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x18, 0x00, 0x00, 0x00, 0x48, 0x00, 0x00]
        var reader = ByteReader(Array(h4.dropFirst(4)))
        let e = try LEEnhancedConnectionComplete(parameters: &reader)
        #expect(e.localResolvablePrivateAddress == BDAddress([0x4A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F]))
        #expect(e.peerAddressType == .publicIdentity && e.peerAddress == identity)
        #expect(HCIPacket.event(e.packet).h4 == h4)
    }

    @Test func readLocalResolvableAddressAsTheSpecificationLaysItOut() throws {
        let c = LEReadLocalResolvableAddress(peerIdentityAddressType: 0, peerIdentityAddress: identity)
        #expect(HCIPacket.command(c.packet).h4 == [0x01, 0x2C, 0x20, 0x07, 0x00, 0x06, 0x05, 0x04, 0x03, 0x02, 0xC1])
        // Return parameters after Status: the address LSO first.
        var reader = ByteReader([0x0F, 0x0E, 0x0D, 0x0C, 0x0B, 0x4A])
        let ret = try LEReadLocalResolvableAddress.ReturnParameters(returnParameters: &reader)
        #expect(ret.localResolvableAddress == BDAddress([0x4A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F]))
    }
}
