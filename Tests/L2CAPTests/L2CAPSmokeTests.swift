import Testing
import L2CAP

// Placeholder until this layer has real tests.
@Test func L2CAPModuleLinks() { #expect(Bool(true)) }
