import Testing
import BLE

// Placeholder until this layer has real tests.
@Test func BLEModuleLinks() { #expect(Bool(true)) }
