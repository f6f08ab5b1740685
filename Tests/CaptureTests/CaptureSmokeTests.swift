import Testing
import Capture

// Placeholder until this layer has real tests.
@Test func CaptureModuleLinks() { #expect(Bool(true)) }
