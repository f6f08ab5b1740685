import Testing
import HCI
import ATT
@testable import GATT

/// Handles and ranges a peer sends are checked before the client uses them (issue 13, defect 1).
@Suite struct ClientValidationTests {
    /// Regression: an Include declaration of 0x0010...0x0005 (start > end) was stored and the
    /// next characteristic discovery of it trapped on `start...end`. Core Vol 3 Part G 3.2: the
    /// included service's handles form a range starting at 0x0001 or above.
    @Test func includedServiceRangeStartAfterEndIsAnInvalidResponse() async throws {
        let peer = ScriptedServer([
            // Read By Type 0x2802 over 0x0001...0x0020 → one include: handle 0x0002, 0x0010...0x0005, UUID 0x180F.
            ("08 0100 2000 0228", "09 08 0200 1000 0500 0f18"),
            ("08 0300 2000 0228", "01 08 0300 0a"),   // Attribute Not Found: the end of the search
        ])
        let client = GATTClient(requester: peer)
        let service = GATTRemoteService(uuid: 0x180A, startHandle: 1, endHandle: 0x20)
        await #expect(throws: GATTClientError.self) { _ = try await client.discoverIncludedServices(of: service) }
        #expect(peer.unused == 0)
        // A hand-built service with such a range throws, never traps.
        let reversed = GATTRemoteService(uuid: 0x180F, primary: false, startHandle: 0x10, endHandle: 0x05)
        await #expect(throws: GATTClientError.invalidHandleRange(start: 0x10, end: 0x05)) {
            _ = try await client.discoverCharacteristics(of: reversed)
        }
        await #expect(throws: GATTClientError.invalidHandleRange(start: 0, end: 0x05)) {
            _ = try await client.discoverIncludedServices(of: GATTRemoteService(uuid: 0x180F, startHandle: 0, endHandle: 5))
        }
    }

    @Test func includedServiceStartingAtZeroIsAnInvalidResponse() async throws {
        let peer = ScriptedServer([("08 0100 2000 0228", "09 08 0200 0000 0500 0f18"),
                                   ("08 0300 2000 0228", "01 08 0300 0a")])
        let client = GATTClient(requester: peer)
        await #expect(throws: GATTClientError.self) {
            _ = try await client.discoverIncludedServices(of: GATTRemoteService(uuid: 0x180A, startHandle: 1, endHandle: 0x20))
        }
    }

    /// Primary services must start inside the range asked for, after the previous one, and end
    /// at or after their start (Core Vol 3 Part F 3.4.4.10, Part G 4.4.1).
    @Test(arguments: [
        "11 06 0100 0500 0018 0300 0800 0118",   // second group starts inside the first
        "11 06 0100 0500 0018 0900 0800 0118",   // second group ends before it starts
    ])
    func overlappingOrReversedServicesAreInvalidResponses(response: String) async throws {
        let peer = ScriptedServer([("10 0100 ffff 0028", response)])
        let client = GATTClient(requester: peer)
        await #expect(throws: GATTClientError.self) { _ = try await client.discoverServices() }
    }

    /// A characteristic's value handle lies after its declaration and inside its service
    /// (Core Vol 3 Part G 3.3).
    @Test(arguments: [
        ("09 07 0200 02 0900 012a", "08 0300 0500 0328"),   // value handle 0x0009 outside the service 0x0001...0x0005
        ("09 07 0300 02 0200 012a", "08 0400 0500 0328"),   // value handle before the declaration
    ])
    func characteristicValueOutsideItsServiceIsAnInvalidResponse(response: String, next: String) async throws {
        let peer = ScriptedServer([("08 0100 0500 0328", response), (next, "01 08 " + next.dropFirst(3).prefix(4) + " 0a")])
        let client = GATTClient(requester: peer)
        await #expect(throws: GATTClientError.self) {
            _ = try await client.discoverCharacteristics(of: GATTRemoteService(uuid: 0x180A, startHandle: 1, endHandle: 5))
        }
    }
}
