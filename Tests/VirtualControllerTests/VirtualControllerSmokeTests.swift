import Testing
import VirtualController

// Placeholder until this layer has real tests.
@Test func VirtualControllerModuleLinks() { #expect(Bool(true)) }
