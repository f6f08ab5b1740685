import Foundation
import Testing
import HCI
import GATT

/// The `--gatt` table parser (docs/cli.md "--gatt FILE") as a library, shared by `ble-hci
/// peripheral --gatt` and `BLETesting.FakePeripheral`: the table it makes of a file, and every
/// kind of bad input refused with the JSON path of the problem, never a trap.
@Suite struct GATTFileTests {
    static func parse(_ json: String) throws(GATTFileError) -> GATTFile { try GATTFile(data: Data(json.utf8)) }

    @Test func aTableBecomesServicesWithoutTheServersOwn() throws {
        let file = try Self.parse("""
        {"services":[
          {"uuid":"1800","characteristics":[{"uuid":"2a00","properties":["read"],"value":"6869"}]},
          {"uuid":"180f","primary":false,"characteristics":[{"uuid":"2a19","properties":["read","notify"],"value":"64",
            "descriptors":[{"uuid":"2902","value":"0100"},{"uuid":"2901","value":"6c6576656c"}]}]},
          {"uuid":"12345678-1234-5678-1234-56789abcdef0","includes":["180f"],"characteristics":[
            {"uuid":"fff1","properties":["write"],"permissions":["writeEncrypted"]}]}]}
        """)
        #expect(file.deviceName == "hi")
        #expect(file.services.map(\.uuid) == [0x180F, BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef0")!])
        #expect(file.services[0].primary == false && file.services[1].includes == [0x180F])
        let level = file.services[0].characteristics[0]
        #expect(level.properties == [.read, .notify])
        guard case .stored(let v) = level.value else { Issue.record("not stored"); return }
        #expect(v == [0x64])
        // A CCCD's value is each client's own, 0 to start with (Core v5.4 Vol 3 Part G 3.3.3.3).
        guard case .stored(let cccd) = level.descriptors[0].value else { Issue.record("not stored"); return }
        #expect(cccd == [0, 0])
        #expect(file.services[1].characteristics[0].permissions == [.writable, .writeEncryptionRequired])
        // Only primary 16-bit services are advertised.
        #expect(file.advertisedServices == [])
        #expect(file.warnings.isEmpty && file.handleProblem == nil)
    }

    /// The central's `--json` output as it is: the `gatt` line is the table.
    @Test func jsonLinesUseTheGATTLine() throws {
        let file = try Self.parse("""
        {"event":"connected","handle":64}
        {"event":"gatt","services":[{"uuid":"180d","characteristics":[{"uuid":"2a38","properties":["read"],"value":"01"}]}]}
        """)
        #expect(file.services.map(\.uuid) == [0x180D])
        #expect(file.advertisedServices == [0x180D])
    }

    /// Over the 512 octets of Core v5.4 Vol 3 Part F 3.2.9: served, with a warning naming the
    /// path; over what Read Blob's 16-bit offset reaches: refused.
    @Test func longValuesWarnThenAreRefused() throws {
        let long = String(repeating: "ab", count: 600)
        var heard: [String] = []
        let file = try GATTFile(data: Data(#"{"services":[{"uuid":"fff0","characteristics":[{"uuid":"fff1","properties":["read"],"value":"\#(long)"}]}]}"#.utf8)) {
            heard.append($0)
        }
        #expect(file.warnings == heard && heard.count == 1)
        #expect(heard.first?.hasPrefix("$.services[0].characteristics[0].value: 600 octets") == true)
        let huge = String(repeating: "00", count: 65536)
        #expect(throws: GATTFileError("$.services[0].characteristics[0].value", "65536 octets: more than Read Blob's 16-bit offset can reach")) {
            _ = try Self.parse(#"{"services":[{"uuid":"fff0","characteristics":[{"uuid":"fff1","properties":["read"],"value":"\#(huge)"}]}]}"#)
        }
    }

    /// Handles out of 1...0xFFFF (Core v5.4 Vol 3 Part F 3.2.2) are not an error: the table is
    /// served with handles assigned in order, and `handleProblem` says why.
    @Test func aHandleOutOfRangeIsReassigned() throws {
        let file = try Self.parse(#"{"services":[{"uuid":"fff0","start":0,"end":3,"characteristics":[{"uuid":"fff1","properties":["read"],"handle":2,"valueHandle":3}]}]}"#)
        #expect(file.handleProblem == "$.services[0].start is 0, not a handle (1 to 65535, Core v5.4 Vol 3 Part F 3.2.2)")
        #expect(file.services[0].startHandle == nil && file.services[0].characteristics[0].declarationHandle == nil)
    }

    /// An unknown permission is refused listing the names docs/cli.md gives, in its order.
    @Test func unknownPermissionListsTheKnownNames() {
        #expect(throws: GATTFileError("$.services[0].characteristics[0].permissions[1]",
                                      "unknown permission root (known: read, write, readEncrypted, writeEncrypted, readAuthenticated, writeAuthenticated)")) {
            _ = try Self.parse(#"{"services":[{"uuid":"fff0","characteristics":[{"uuid":"fff1","properties":["read"],"permissions":["read","root"]}]}]}"#)
        }
    }

    /// Hostile and malformed input: each refused with the path of the problem.
    @Test(arguments: [
        ("", "(file)"),
        ("[1,2", "(file)"),
        ("{\"event\":\"scan\"}\n{\"event\":\"done\"}", "(file)"),
        ("[]", "$"),
        ("{}", "$.services"),
        ("{\"services\":{}}", "$.services"),
        ("{\"services\":[7]}", "$.services[0]"),
        ("{\"services\":[{}]}", "$.services[0].uuid"),
        ("{\"services\":[{\"uuid\":\"18\"}]}", "$.services[0].uuid"),
        ("{\"services\":[{\"uuid\":\"180d\",\"characteristics\":{}}]}", "$.services[0].characteristics"),
        ("{\"services\":[{\"uuid\":\"180d\",\"characteristics\":[{\"uuid\":\"2a37\"}]}]}", "$.services[0].characteristics[0].properties"),
        ("{\"services\":[{\"uuid\":\"180d\",\"characteristics\":[{\"uuid\":\"2a37\",\"properties\":[1]}]}]}", "$.services[0].characteristics[0].properties[0]"),
        ("{\"services\":[{\"uuid\":\"180d\",\"characteristics\":[{\"uuid\":\"2a37\",\"properties\":[],\"value\":\"abc\"}]}]}", "$.services[0].characteristics[0].value"),
        ("{\"services\":[{\"uuid\":\"180d\",\"characteristics\":[{\"uuid\":\"2a37\",\"properties\":[],\"handle\":true}]}]}", "$.services[0].characteristics[0].handle"),
        ("{\"services\":[{\"uuid\":\"180d\",\"characteristics\":[{\"uuid\":\"2a37\",\"properties\":[],\"permissions\":[\"root\"]}]}]}", "$.services[0].characteristics[0].permissions[0]"),
        ("{\"services\":[{\"uuid\":\"180d\",\"characteristics\":[{\"uuid\":\"2a37\",\"properties\":[],\"descriptors\":[{\"uuid\":5}]}]}]}", "$.services[0].characteristics[0].descriptors[0].uuid"),
        ("{\"services\":[{\"uuid\":\"180d\",\"primary\":\"yes\"}]}", "$.services[0].primary"),
        ("{\"services\":[{\"uuid\":\"180d\",\"includes\":[\"180f\"]}]}", "$.services[0].includes[0]"),
    ])
    func badInputNamesTheJSONPath(_ json: String, _ path: String) {
        do {
            _ = try Self.parse(json)
            Issue.record("\(json) was taken")
        } catch {
            #expect(error.location == path, "\(error)")
        }
    }
}
