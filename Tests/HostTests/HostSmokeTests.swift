import Testing
import Host

// Placeholder until this layer has real tests.
@Test func HostModuleLinks() { #expect(Bool(true)) }
