import Testing
import GATT

// Placeholder until this layer has real tests.
@Test func GATTModuleLinks() { #expect(Bool(true)) }
