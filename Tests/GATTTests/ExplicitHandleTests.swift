import Testing
import HCI
import ATT
@testable import GATT

/// A server whose application gives its handles, with gaps (Core v5.4 Vol 3 Part F 3.2.2:
/// handles need only be non-zero and increasing). Every expected handle is the one given.
@MainActor @Suite struct ExplicitHandles {
    static func sparseServices() -> [GATTService] {
        var level = GATTCharacteristic(uuid: 0x2A19, properties: [.read, .notify], value: [0x64])
        level.declarationHandle = 0x0042
        var cccd = GATTDescriptor(uuid: GATTUUID.clientCharacteristicConfiguration, permissions: .readWrite, value: [0, 0])
        cccd.handle = 0x0045
        var description = GATTDescriptor.userDescription("level")
        description.handle = 0x0048
        level.descriptors = [cccd, description]
        var battery = GATTService(uuid: 0x180F, characteristics: [level])
        battery.startHandle = 0x0040; battery.endHandle = 0x004F
        var name = GATTCharacteristic(uuid: 0xFFF1, properties: .read, value: [0x68, 0x69])
        name.declarationHandle = 0x0102
        var custom = GATTService(uuid: 0xFFF0, includes: [0x180F], characteristics: [name])
        custom.startHandle = 0x0100; custom.endHandle = 0x0110
        return [battery, custom]
    }

    @Test func servedAtTheGivenHandles() async throws {
        let services = Self.sparseServices()
        #expect(GATTServer.explicitHandleProblem(services) == nil)
        let server = GATTServer(services: services)
        let (client, link) = await Loopback.connect(server)
        let found = try await client.discoverServices()
        // 1800 at 1-5, 1801 at 6-13 (the server's own, before the first given handle 0x40).
        #expect(found.map { [$0.startHandle, $0.endHandle] } == [[1, 5], [6, 13], [0x40, 0x4F], [0x100, 0x110]])
        let battery = try #require(found.first { $0.uuid == BluetoothUUID(0x180F) })
        let chars = try await client.discoverCharacteristics(of: battery)
        #expect(chars.map { [$0.declarationHandle, $0.valueHandle] } == [[0x42, 0x43]])
        let descriptors = try await client.discoverDescriptors(of: try #require(chars.first))
        #expect(descriptors.map(\.handle) == [0x45, 0x48])
        // Include declaration right after its service declaration: 0x0101, naming 0x40-0x4F
        // (Core v5.4 Vol 3 Part G 3.2: start, end, 16-bit UUID).
        let custom = try #require(found.first { $0.uuid == BluetoothUUID(0xFFF0) })
        let included = try await client.discoverIncludedServices(of: custom)
        #expect(included.map { [$0.startHandle, $0.endHandle] } == [[0x40, 0x4F]])
        // A handle in a gap is not an attribute: Invalid Handle (Vol 3 Part F 3.4.4.3, 0x01).
        let gap = await link.raw(ATTPDU.readRequest(handle: 0x0044).bytes)
        #expect(gap == .errorResponse(requestOpcode: .readRequest, handle: 0x0044, error: .invalidHandle), "\(String(describing: gap))")
        // Find Information over a range with gaps lists only the attributes there.
        let info = await link.raw(ATTPDU.findInformationRequest(startHandle: 0x0044, endHandle: 0x0047).bytes)
        #expect(info == .findInformationResponse(format: .uuid16, information: [ATTHandleUUID(handle: 0x45, uuid: GATTUUID.clientCharacteristicConfiguration)]),
                "\(String(describing: info))")
        // Find By Type Value finds the service with its given group end (Vol 3 Part F 3.4.3.3).
        let byValue = await link.raw(ATTPDU.findByTypeValueRequest(startHandle: 1, endHandle: 0xFFFF, attributeType: 0x2800, attributeValue: [0xF0, 0xFF]).bytes)
        #expect(byValue == .findByTypeValueResponse([ATTHandlesInformation(foundAttributeHandle: 0x100, groupEndHandle: 0x110)]), "\(String(describing: byValue))")
    }

    @Test func ownServicesGoAfterWhenTheFirstHandlesAreTaken() {
        var services = Self.sparseServices()
        services[0].startHandle = 5
        #expect(GATTServer.explicitHandleProblem(services) == nil)
        let server = GATTServer(services: services)
        let types = server.attributeTypes
        // 1800 right after the last group (0x110), then 1801.
        #expect(types.first { $0.type == GATTUUID.primaryService && $0.handle > 0x110 }?.handle == 0x111)
        #expect(types.map(\.handle) == types.map(\.handle).sorted())
    }

    @Test func inconsistentHandlesAreAssignedFromOne() {
        var services = Self.sparseServices()
        services[1].startHandle = 0x0048  // overlaps 180F's group
        #expect(GATTServer.explicitHandleProblem(services)?.contains("inside or before the previous service") == true)
        let server = GATTServer(services: services)
        #expect(server.attributeTypes.map(\.handle) == Array(1...UInt16(server.attributeTypes.count)))
    }
}
