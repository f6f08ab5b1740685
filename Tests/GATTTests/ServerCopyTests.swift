import Testing
import HCI
import ATT
@testable import GATT

/// `GATTServer(copying:)`: the same database, its own state.
@Suite struct ServerCopyTests {
    @Test func copyServesTheSameDatabaseAndKeepsItsOwnValues() {
        let template = GATTServer(services: demoServices())
        let copy = GATTServer(copying: template)
        #expect(copy.databaseHash == template.databaseHash)
        #expect(copy.attributeTypes.map(\.handle) == template.attributeTypes.map(\.handle))
        #expect(copy.attributeTypes.map(\.type) == template.attributeTypes.map(\.type))

        #expect(copy.setValue([9], of: 0xFFE1))
        #expect(copy.value(of: 0xFFE1) == [9])
        #expect(template.value(of: 0xFFE1) == Array("read only".utf8))
        #expect(GATTServer(copying: template).value(of: 0xFFE1) == Array("read only".utf8))
    }
}
