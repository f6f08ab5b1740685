import Testing
import SMP

// Placeholder until this layer has real tests.
@Test func SMPModuleLinks() { #expect(Bool(true)) }
