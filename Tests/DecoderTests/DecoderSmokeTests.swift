import Testing
import Decoder

// Placeholder until this layer has real tests.
@Test func DecoderModuleLinks() { #expect(Bool(true)) }
