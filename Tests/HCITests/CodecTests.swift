import Testing
@testable import HCI

@Suite struct RegistryTests {
    @Test func noDuplicateCodes() {
        let ops = allCommandTypes.map { $0.opcode.rawValue }
        #expect(Set(ops).count == ops.count)
        let evs = allEventTypes.map { $0.eventCode }
        #expect(Set(evs).count == evs.count)
        let subs = allLESubeventTypes.map { $0.subeventCode }
        #expect(Set(subs).count == subs.count)
    }

    @Test func everyRegisteredTypeHasASample() {
        #expect(Set(commandSamples.map { type(of: $0).opcode.rawValue }) == Set(allCommandTypes.map { $0.opcode.rawValue }))
        #expect(Set(eventSamples.map { type(of: $0).eventCode }) == Set(allEventTypes.map { $0.eventCode }))
        #expect(Set(subeventSamples.map { type(of: $0).subeventCode }) == Set(allLESubeventTypes.map { $0.subeventCode }))
        // Every command with return parameters beyond Status has a return sample.
        let withReturn = allCommandTypes.filter { ObjectIdentifier($0.returnParametersType) != ObjectIdentifier(NoReturnParameters.self) }.map { $0.opcode.rawValue }
        #expect(Set(returnSamples.map { $0.0.opcode.rawValue }) == Set(withReturn))
    }

    @Test func opcodeNames() {
        #expect(LESetAdvertisingParameters.opcode.rawValue == 0x2006)
        #expect(LESetExtendedScanEnable.opcode.rawValue == 0x2042)
        #expect(ReadRSSI.opcode.rawValue == 0x1405)
        #expect(ReadEncryptionKeySize.opcode.rawValue == 0x1408)  // Core Vol 4 Part E 7.5.7
        #expect(WriteLEHostSupport.opcode.rawValue == 0x0C6D)
        #expect(HCIOpcode(rawValue: 0x200D).name == "LE Create Connection")
        #expect(HCIOpcode(rawValue: 0x2019).description == "LE Enable Encryption (0x2019)")
        // OGF 0x3F is the vendor-specific group (Core v5.4 Vol 4 Part E 5.4.1).
        #expect(HCIOpcode(rawValue: 0xFC01).name == "Vendor Command 0x0001 (opcode 0xfc01)")
        #expect(HCIOpcode(rawValue: 0x0C99).name == "Unknown Command (OGF 0x03, OCF 0x0099)")
        #expect(HCIEvents.name(code: 0x59) == "Encryption Change [v2]")
        #expect(HCIEvents.name(code: 0xF0) == "Unknown Event (0xf0)")
    }

    @Test func statusNames() {
        #expect(HCIStatus(0x3E).name == "Connection Failed to be Established / Synchronization Timeout")
        #expect(HCIStatus(0x16).name == "Connection Terminated By Local Host")
        #expect(HCIStatus(0x13).name == "Remote User Terminated Connection")
        #expect(HCIStatus(0x08).name == "Connection Timeout")
        #expect(HCIStatus(0x16).description == "Connection Terminated By Local Host (0x16)")
        #expect(HCIStatus(0xEE).name == "Unknown Error Code")
    }

    @Test func fieldNamesAreLowerCamelCase() {
        for c in commandSamples { #expect(allNamesLowerCamel(c.fields), "\(type(of: c).name)") }
        for (t, r) in returnSamples { #expect(allNamesLowerCamel(r.fields), "\(t.name)") }
        for e in eventSamples { #expect(allNamesLowerCamel(e.fields), "\(type(of: e).name)") }
    }
}

@Suite struct RoundTripTests {
    @Test func commands() throws {
        for c in commandSamples {
            let bytes = encoded(c)
            let decoded = try #require(try HCICommands.decode(HCICommandPacket(opcode: type(of: c).opcode, parameters: bytes)))
            #expect(type(of: decoded) == type(of: c))
            #expect(encoded(decoded) == bytes, "\(type(of: c).name)")
        }
    }

    @Test func returnParameters() throws {
        for (t, r) in returnSamples {
            let bytes = encoded(r)
            let decoded = try #require(try HCICommands.decodeReturn(opcode: t.opcode, bytes))
            #expect(encoded(decoded) == bytes, "\(t.name)")
            // And through a Command Complete event, as the host sees it.
            let cc = CommandComplete(opcode: t.opcode, returnParameters: [0x00] + bytes)
            let back = try #require(try HCIEvents.decode(cc.packet) as? CommandComplete)
            #expect(back == cc)
            #expect(!back.fields.contains { $0.name == "malformed" }, "\(t.name)")
        }
    }

    @Test func events() throws {
        for e in eventSamples {
            let packet = e.packet
            let decoded = try HCIEvents.decode(packet)
            #expect(type(of: decoded) == type(of: e))
            #expect(decoded.packet == packet, "\(e.fields)")
            if let meta = decoded as? LEMetaEvent { #expect(!(meta.subevent is UnknownLESubevent)) }
        }
    }
}

@Suite struct TruncationTests {
    @Test func everyCommandPrefixThrows() {
        for c in commandSamples {
            let bytes = encoded(c)
            for n in 0..<bytes.count {
                #expect(throws: DecodeError.self, "\(type(of: c).name) cut at \(n)") {
                    try HCICommands.decode(HCICommandPacket(opcode: type(of: c).opcode, parameters: Array(bytes.prefix(n))))
                }
            }
            // One octet too many is also malformed.
            #expect(throws: DecodeError.self) {
                try HCICommands.decode(HCICommandPacket(opcode: type(of: c).opcode, parameters: bytes + [0]))
            }
        }
    }

    @Test func everyReturnPrefixThrows() {
        for (t, r) in returnSamples {
            let bytes = encoded(r)
            for n in 0..<bytes.count {
                #expect(throws: DecodeError.self, "\(t.name) cut at \(n)") { try HCICommands.decodeReturn(opcode: t.opcode, Array(bytes.prefix(n))) }
            }
        }
    }

    @Test func everyEventPrefixThrows() {
        for e in eventSamples {
            let p = e.packet
            // Command Complete keeps everything after the opcode raw: only its header can be cut.
            let minimum = e is CommandComplete ? 3 : p.parameters.count
            for n in 0..<minimum {
                #expect(throws: DecodeError.self, "\(type(of: e).name) cut at \(n)") {
                    try HCIEvents.decode(HCIEventPacket(code: p.code, parameters: Array(p.parameters.prefix(n))))
                }
            }
            if !(e is CommandComplete) {
                #expect(throws: DecodeError.self) { try HCIEvents.decode(HCIEventPacket(code: p.code, parameters: p.parameters + [0])) }
            }
        }
    }

    @Test func lyingCountsAndLengthsThrow() {
        // Advertising report claiming 200 reports with one report's worth of bytes.
        #expect(throws: DecodeError.self) {
            try HCIEvents.decode(HCIEventPacket(code: 0x3E, parameters: [0x02, 200, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0xC4]))
        }
        // Legacy advertising data length 32 > 31.
        #expect(throws: DecodeError.self) { try LESetAdvertisingData.decode([32] + Array(repeating: 0, count: 31)) }
        // Extended advertising data with a length beyond what follows.
        #expect(throws: DecodeError.self) { try LESetExtendedAdvertisingData.decode([1, 3, 1, 10, 1, 2]) }
        // Reserved address type.
        #expect(throws: DecodeError.self) { try LESetRandomAddress.decode([1, 2, 3, 4, 5]) }
        #expect(throws: DecodeError.self) {
            try LECreateConnection.decode([0x60, 0, 0x60, 0, 0, 0x07, 1, 2, 3, 4, 5, 6, 0, 0x18, 0, 0x28, 0, 0, 0, 0x2A, 0, 0, 0, 0, 0])
        }
    }
}

@Suite struct UnknownCodeTests {
    @Test func unknownOpcodeIsNil() throws {
        #expect(try HCICommands.decode(HCICommandPacket(opcode: HCIOpcode(rawValue: 0xFC01), parameters: [1, 2])) == nil)
        #expect(try HCICommands.decodeReturn(opcode: HCIOpcode(rawValue: 0xFC01), [1, 2]) == nil)
        // Command Complete for an unknown opcode keeps the return parameters raw.
        let cc = CommandComplete(opcode: HCIOpcode(rawValue: 0xFC01), returnParameters: [0x00, 0xAB])
        #expect(cc.fields.last == .bytes("returnParameters", [0xAB]))
    }

    @Test func unknownEventKeepsBytes() throws {
        let e = try #require(try HCIEvents.decode(HCIEventPacket(code: 0xF0, parameters: [9, 8, 7])) as? UnknownEvent)
        #expect(e.code == 0xF0 && e.parameters == [9, 8, 7])
        #expect(e.packet == HCIEventPacket(code: 0xF0, parameters: [9, 8, 7]))
    }

    @Test func unknownSubeventKeepsBytes() throws {
        let meta = try #require(try HCIEvents.decode(HCIEventPacket(code: 0x3E, parameters: [0x7F, 1, 2])) as? LEMetaEvent)
        let sub = try #require(meta.subevent as? UnknownLESubevent)
        #expect(sub.code == 0x7F && sub.parameters == [1, 2])
        // The LE Meta event is Subevent_Code then the subevent's parameters (Core v5.4 Vol 4
        // Part E 7.7.65): an unknown one encodes back with the code it arrived with.
        #expect(meta.packet == HCIEventPacket(code: 0x3E, parameters: [0x7F, 1, 2]))
        #expect(meta.fields.first == .code("subeventCode", UInt8(0x7F), note: "Unknown LE Subevent"))
    }
}
