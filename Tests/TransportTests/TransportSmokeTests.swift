import Testing
import Transport

// Placeholder until this layer has real tests.
@Test func TransportModuleLinks() { #expect(Bool(true)) }
