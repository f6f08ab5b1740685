import Testing
import ATT

// Placeholder until this layer has real tests.
@Test func ATTModuleLinks() { #expect(Bool(true)) }
