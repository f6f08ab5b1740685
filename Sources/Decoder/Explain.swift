// `dump --explain` (and the tooltips of a page drawn from a capture): for a decoded field, what
// it means, its unit, where the specification defines it and what CoreBluetooth calls it; for
// bit fields the bits set, one per line as btmon prints them; for the values of standard
// characteristics the value decoded per the GATT Specification Supplement. Nothing here parses
// a PDU: it reads the fields the layers' codecs produced.
import HCI
import GATT

/// What one decoded field means. `explanation(of:in:of:)` makes one.
public struct FieldExplanation: Sendable, Equatable {
    /// What the field is, in a sentence.
    public var meaning: String
    /// The unit of its number ("1.25 ms", "dBm", "octets"), when it has one.
    public var unit: String?
    /// Where the specification defines it ("Core v5.4 Vol 4 Part E 7.7.65.10").
    public var specSection: String?
    /// CoreBluetooth's counterpart, when an app sees this field there.
    public var coreBluetooth: String?
    /// The value decoded: one line per bit set in a bit field (btmon's "Name (Octet 0 - Bit 5)"),
    /// or one per part of a standard characteristic's value ("Heart Rate: 72 bpm").
    public var decoded: [String]

    public init(meaning: String, unit: String? = nil, specSection: String? = nil, coreBluetooth: String? = nil,
                decoded: [String] = []) {
        self.meaning = meaning
        self.unit = unit
        self.specSection = specSection
        self.coreBluetooth = coreBluetooth
        self.decoded = decoded
    }

    /// One line: "meaning (unit: U; Core v5.4 ...; CoreBluetooth: X)".
    public var summary: String {
        var parts: [String] = []
        if let unit { parts.append("unit: " + unit) }
        if let specSection { parts.append(specSection) }
        if let coreBluetooth { parts.append("CoreBluetooth: " + coreBluetooth) }
        return parts.isEmpty ? meaning : meaning + " (" + parts.joined(separator: "; ") + ")"
    }
}

/// The explanation of `field`, one of the fields of `layer` (a layer of `packet`, or a field
/// nested in one of its fields), or nil when there is none. The packet gives the context a
/// field's name alone lacks: the characteristic whose value an ATT `value` is (its GATT
/// layer's `uuid`), the command whose parameters a field belongs to.
public func explanation(of field: Field, in layer: DecodedLayer, of packet: DecodedPacket) -> FieldExplanation? {
    var e = FieldMeanings.entry(layer: layer.name, field: field.name) ?? FieldMeanings.catalogParameter(field.name, layer)
    switch (layer.kind, field.name, field.value) {
    case (.hci, "supportedCommands", .bytes(let mask)):
        e?.decoded = HCIBitFields.supportedCommands(mask).map { "\($0.name) (Octet \($0.octet) - Bit \($0.bitInOctet))" }
    case (.hci, "eventMask", .code(let s)):
        e?.decoded = bitLines(HCIBitFields.eventMask(mask(s)))
    case (.hci, "eventMaskPage2", .code(let s)):
        e?.decoded = bitLines(HCIBitFields.eventMaskPage2(mask(s)))
    case (.hci, "leEventMask", .code(let s)):
        e?.decoded = bitLines(HCIBitFields.leEventMask(mask(s)))
    case (.hci, "leFeatures", .code(let s)):
        e?.decoded = bitLines(HCIBitFields.leFeatures(mask(s)))
    case (.hci, "lmpFeatures", .code(let s)):
        e?.decoded = bitLines(HCIBitFields.lmpFeatures(mask(s)))
    case (.att, "value", .bytes(let v)):
        // A value read, written or notified: decoded when GATT knows its characteristic.
        guard let uuid = packet.layer("gatt").flatMap({ textField("uuid", $0) }),
              let standard = StandardValues.explain(uuid: uuid, value: v) else { break }
        return standard
    case (.gatt, "properties", .code(let s)):
        e?.decoded = PropertyBits.lines(UInt8(truncatingIfNeeded: mask(s)))
    case (.att, "errorCode", .code(let s)):
        if let revealed = ErrorPermissions.revealed(UInt8(truncatingIfNeeded: mask(s))) { e?.decoded = [revealed] }
    default:
        break
    }
    return e
}

private func bitLines(_ bits: [NamedBit]) -> [String] { bits.map { "\($0.name) (bit \($0.bit))" } }

/// "0x0000000000031e5f" → its number (0 when it is not hex).
private func mask(_ code: String) -> UInt64 {
    UInt64(code.hasPrefix("0x") ? String(code.dropFirst(2)) : code, radix: 16) ?? 0
}

private func textField(_ name: String, _ fields: [Field]) -> String? {
    for f in fields where f.name == name { if case .text(let s) = f.value { return s } }
    return nil
}

// MARK: - Characteristic properties and what errors reveal

enum PropertyBits {
    /// Core v5.4 Vol 3 Part G 3.3.1.1 Characteristic Properties, with CBCharacteristicProperties' names.
    static let bits: [(UInt8, String, String)] = [
        (0x01, "Broadcast: the value may be in the server's advertising data (Server Characteristic Configuration)", ".broadcast"),
        (0x02, "Read", ".read"),
        (0x04, "Write Without Response (Write Command)", ".writeWithoutResponse"),
        (0x08, "Write (Write Request, answered)", ".write"),
        (0x10, "Notify (Handle Value Notification, not acknowledged)", ".notify"),
        (0x20, "Indicate (Handle Value Indication, confirmed)", ".indicate"),
        (0x40, "Authenticated Signed Writes (Signed Write Command)", ".authenticatedSignedWrites"),
        (0x80, "Extended Properties: see the Characteristic Extended Properties descriptor", ".extendedProperties"),
    ]

    static func lines(_ p: UInt8) -> [String] {
        bits.filter { p & $0.0 != 0 }.map { "\($0.1) — CoreBluetooth \($0.2)" }
    }
}

enum ErrorPermissions {
    /// Attribute permissions are never sent (Core v5.4 Vol 3 Part F 3.2.5): an Error Response is
    /// where a client learns them. Each code with CBAttributePermissions' word for what it reveals.
    static func revealed(_ code: UInt8) -> String? {
        switch code {
        case 0x02: return "reveals: the attribute is not readable (no CBAttributePermissions .readable)"
        case 0x03: return "reveals: the attribute is not writable (no CBAttributePermissions .writeable)"
        case 0x05: return "reveals: the attribute needs an authenticated link (.readEncryptionRequired / .writeEncryptionRequired on iOS); pairing, then the request again, may succeed"
        case 0x08: return "reveals: the attribute needs an authorized client (the server's application decides)"
        case 0x0C: return "reveals: the attribute needs an encryption key longer than the link's"
        case 0x0F: return "reveals: the attribute needs an encrypted link; encrypting with the bond's keys, then the request again, may succeed"
        default: return nil
        }
    }
}

// MARK: - Standard characteristic values

enum StandardValues {
    /// The value of the characteristic or descriptor `uuid` (4 hex digits, as the GATT layer
    /// writes 16-bit UUIDs) decoded, or nil when it is not one of those known here or does not
    /// have the length its definition gives.
    static func explain(uuid: String, value v: [UInt8]) -> FieldExplanation? {
        let gss = "GATT Specification Supplement"
        func u16(_ i: Int) -> Int { Int(v[i]) | Int(v[i + 1]) << 8 }
        switch uuid {
        case "2a00":
            guard let name = String(validating: v, as: UTF8.self) else { return nil }
            return FieldExplanation(meaning: "Device Name: the device's name, UTF-8, no terminator", specSection: "Core v5.4 Vol 3 Part C 12.1",
                                    coreBluetooth: "CBPeripheral.name", decoded: ["\"\(name)\""])
        case "2a01":
            guard v.count == 2 else { return nil }
            let a = UInt16(u16(0))
            let name = AssignedNumbers.appearanceName(a) ?? "unknown category \(a >> 6)"
            return FieldExplanation(meaning: "Appearance: the device's kind, category (bits 15–6) and subcategory (bits 5–0)",
                                    specSection: "Core v5.4 Vol 3 Part C 12.2; Assigned Numbers 2.6",
                                    decoded: ["\(name) (\(hexCode(a)))"])
        case "2a04":
            guard v.count == 8 else { return nil }
            func interval(_ i: Int) -> String { u16(i) == 0xFFFF ? "no specific value" : formatMilliseconds(Double(u16(i)) * 1.25) }
            return FieldExplanation(meaning: "Peripheral Preferred Connection Parameters", unit: "intervals 1.25 ms, timeout 10 ms",
                                    specSection: "Core v5.4 Vol 3 Part C 12.3",
                                    decoded: ["Minimum Connection Interval: \(interval(0))", "Maximum Connection Interval: \(interval(2))",
                                              "Peripheral Latency: \(u16(4)) connection events",
                                              "Connection Supervision Timeout: " + (u16(6) == 0xFFFF ? "no specific value" : formatMilliseconds(Double(u16(6)) * 10))])
        case "2a05":
            guard v.count == 4 else { return nil }
            return FieldExplanation(meaning: "Service Changed: the handles whose attributes changed; the client discovers them again",
                                    specSection: "Core v5.4 Vol 3 Part G 7.1",
                                    coreBluetooth: "peripheral(_:didModifyServices:)",
                                    decoded: ["Start of Affected Attribute Handle Range: \(u16(0))", "End of Affected Attribute Handle Range: \(u16(2))"])
        case "2a19":
            guard v.count == 1 else { return nil }
            return FieldExplanation(meaning: "Battery Level: the battery's charge", unit: "percent (0–100)", specSection: gss + ", Battery Level",
                                    decoded: [v[0] <= 100 ? "\(v[0]) %" : "\(v[0]): reserved (above 100)"])
        case "2a37":
            return heartRateMeasurement(v)
        case "2a38":
            guard v.count == 1 else { return nil }
            let names = ["Other", "Chest", "Wrist", "Finger", "Hand", "Ear Lobe", "Foot"]
            return FieldExplanation(meaning: "Body Sensor Location of the heart rate sensor", specSection: gss + ", Body Sensor Location",
                                    decoded: [v[0] < names.count ? names[Int(v[0])] : "reserved (\(hexCode(v[0])))"])
        case "2a24", "2a25", "2a26", "2a27", "2a28", "2a29":
            guard let s = String(validating: v, as: UTF8.self) else { return nil }
            let what = ["2a24": "Model Number String", "2a25": "Serial Number String", "2a26": "Firmware Revision String",
                        "2a27": "Hardware Revision String", "2a28": "Software Revision String", "2a29": "Manufacturer Name String"][uuid]!
            return FieldExplanation(meaning: what + ", UTF-8", specSection: gss + ", " + what, decoded: ["\"\(s)\""])
        case "2902":
            guard v.count == 2 else { return nil }
            let bits = u16(0)
            var lines: [String] = []
            if bits & 1 != 0 { lines.append("Notification enabled (bit 0)") }
            if bits & 2 != 0 { lines.append("Indication enabled (bit 1)") }
            if bits & ~3 != 0 { lines.append("reserved bits \(hexCode(UInt16(bits & ~3)))") }
            return FieldExplanation(meaning: "Client Characteristic Configuration: what this client wants sent",
                                    specSection: "Core v5.4 Vol 3 Part G 3.3.3.3",
                                    coreBluetooth: "peripheral.setNotifyValue(_:for:) writes it; characteristic.isNotifying",
                                    decoded: lines.isEmpty ? ["Notifications and indications disabled"] : lines)
        case "2b29":
            guard !v.isEmpty else { return nil }
            let names = ["Robust Caching", "Enhanced ATT bearer", "Multiple Handle Value Notifications"]
            return FieldExplanation(meaning: "Client Supported Features: the GATT features this client supports",
                                    specSection: "Core v5.4 Vol 3 Part G 7.2",
                                    decoded: names.indices.filter { v[0] & (1 << $0) != 0 }.map { "\(names[$0]) (bit \($0))" })
        case "2b2a":
            guard v.count == 16 else { return nil }
            return FieldExplanation(meaning: "Database Hash: AES-CMAC of the server's attribute database; a client that cached the database compares it",
                                    specSection: "Core v5.4 Vol 3 Part G 7.3")
        case "2b3a":
            guard !v.isEmpty else { return nil }
            return FieldExplanation(meaning: "Server Supported Features", specSection: "Core v5.4 Vol 3 Part G 7.4",
                                    decoded: v[0] & 1 != 0 ? ["Enhanced ATT bearer (bit 0)"] : [])
        default:
            return nil
        }
    }

    /// Heart Rate Measurement (GATT Specification Supplement, Heart Rate Measurement; Heart Rate
    /// Service 3.1): Flags, then the fields the flags say are present.
    static func heartRateMeasurement(_ v: [UInt8]) -> FieldExplanation? {
        guard let flags = v.first else { return nil }
        var i = 1
        func u16() -> Int? {
            guard i + 2 <= v.count else { return nil }
            defer { i += 2 }
            return Int(v[i]) | Int(v[i + 1]) << 8
        }
        var lines = ["Flags: \(hexCode(flags))"]
        let bpm: Int?
        if flags & 0x01 == 0 {
            bpm = i < v.count ? Int(v[i]) : nil
            i += 1
        } else {
            bpm = u16()
        }
        guard let bpm else { return nil }
        lines.append("Heart Rate: \(bpm) bpm (\(flags & 1 == 0 ? "UINT8" : "UINT16"))")
        switch (flags >> 1) & 0x03 {
        case 2: lines.append("Sensor Contact: not detected")
        case 3: lines.append("Sensor Contact: detected")
        default: lines.append("Sensor Contact: not supported")
        }
        if flags & 0x08 != 0 {
            guard let kj = u16() else { return nil }
            lines.append("Energy Expended: \(kj) kJ")
        }
        if flags & 0x10 != 0 {
            while let rr = u16() {
                lines.append("RR-Interval: \(rr)/1024 s (\(formatMilliseconds(Double(rr) * 1000 / 1024)))")
            }
        }
        guard i == v.count else { return nil }  // octets the flags do not account for
        return FieldExplanation(meaning: "Heart Rate Measurement", unit: "bpm; Energy Expended kJ; RR-Interval 1/1024 s",
                                specSection: "GATT Specification Supplement, Heart Rate Measurement",
                                coreBluetooth: "characteristic.value in peripheral(_:didUpdateValueFor:error:)",
                                decoded: lines)
    }
}

// MARK: - The fields' meanings

/// What each field the layers' codecs name means, by layer ("layer.field").
enum FieldMeanings {
    static func entry(layer: String, field: String) -> FieldExplanation? {
        let layer = layer == "monitor" || layer == "note" ? "hci" : layer
        return table[layer + "." + field]
    }

    /// A parameter of a command or event only the catalog decodes (Tools/pdl/hci-catalog.pdl):
    /// its specification name and the section of its command or event, which defines it.
    static func catalogParameter(_ name: String, _ layer: DecodedLayer) -> FieldExplanation? {
        guard layer.kind == .hci, !["name", "opcode", "eventCode", "subeventCode", "subevent", "commandOpcode"].contains(name) else { return nil }
        func code(_ key: String) -> Int? {
            guard case .code(let s)? = layer.fields.first(where: { $0.name == key })?.value else { return nil }
            return Int(s.dropFirst(2), radix: 16)
        }
        let entry: CatalogEntry?
        if let op = code("commandOpcode") ?? code("opcode") {
            entry = HCICatalog.command(HCIOpcode(rawValue: UInt16(truncatingIfNeeded: op)))
        } else if let sub = code("subeventCode") {
            entry = HCICatalog.leSubevent(UInt8(truncatingIfNeeded: sub))
        } else {
            entry = code("eventCode").flatMap { HCICatalog.event(UInt8(truncatingIfNeeded: $0)) }
        }
        // Its parameters, the elements of its lists and their inline counts.
        func names(_ ps: [CatalogParameter]) -> [String] {
            ps.flatMap { p -> [String] in
                guard case .list(let count, let items) = p.type else { return [p.name] }
                if case .inline(let n) = count { return [p.name, n] + names(items) }
                return [p.name] + names(items)
            }
        }
        guard let entry, names(entry.parameters + entry.returnParameters).contains(name) else { return nil }
        return FieldExplanation(meaning: "\(specName(name)), a parameter of \(entry.name)", specSection: entry.source)
    }

    /// "connectionHandle" → "Connection_Handle", "leACLDataPacketLength" → "LE_ACL_Data_Packet_Length":
    /// the specification's spelling of a parameter from its lowerCamelCase field name.
    static func specName(_ camel: String) -> String {
        var words: [String] = []
        var word = ""
        let chars = Array(camel)
        for (i, c) in chars.enumerated() {
            let next = i + 1 < chars.count ? chars[i + 1] : nil
            // A word starts at an uppercase letter after a lowercase one, or at the last
            // capital of an acronym followed by lowercase ("ACLData" → "ACL", "Data").
            if !word.isEmpty, c.isUppercase, word.last!.isLowercase || word.last!.isNumber || (next?.isLowercase ?? false) {
                words.append(word)
                word = ""
            }
            word.append(c)
        }
        if !word.isEmpty { words.append(word) }
        return words.map { w in acronyms.contains(w.lowercased()) ? w.uppercased() : w.prefix(1).uppercased() + w.dropFirst() }
            .joined(separator: "_")
    }

    /// Words the specification writes in capitals whatever the field name's case.
    static let acronyms: Set<String> = ["le", "bd", "addr", "lap", "acl", "sco", "esco", "iso", "cis", "cig", "big", "phy", "rssi",
                                        "oob", "ltk", "irk", "ediv", "mws", "afh", "cte", "lmp", "hci", "sdu", "pdu", "rf", "tx", "rx"]

    private static func e(_ meaning: String, _ unit: String? = nil, _ spec: String? = nil, cb: String? = nil) -> FieldExplanation {
        FieldExplanation(meaning: meaning, unit: unit, specSection: spec, coreBluetooth: cb)
    }

    private static let hci = "Core v5.4 Vol 4 Part E"
    private static let att = "Core v5.4 Vol 3 Part F"
    private static let smp = "Core v5.4 Vol 3 Part H"
    private static let l2cap = "Core v5.4 Vol 3 Part A"
    private static let gatt = "Core v5.4 Vol 3 Part G"

    static let table: [String: FieldExplanation] = [
        // HCI (Core v5.4 Vol 4 Part E)
        "hci.opcode": e("Command opcode: OGF (6 bits, the command group) and OCF (10 bits)", nil, hci + " 5.4.1"),
        "hci.eventCode": e("Event code", nil, hci + " 5.4.4"),
        "hci.subeventCode": e("LE Meta subevent code", nil, hci + " 7.7.65"),
        "hci.numHCICommandPackets": e("How many more commands the controller accepts now (command flow control)", "commands", hci + " 7.7.14"),
        "hci.commandOpcode": e("The opcode of the command this event answers", nil, hci + " 7.7.14"),
        "hci.status": e("The outcome: 0x00 Success, else an error code", nil, "Core v5.4 Vol 1 Part F 1.3"),
        "hci.reason": e("Why the link ended or was refused (an error code)", nil, "Core v5.4 Vol 1 Part F 1.3",
                        cb: "the error of centralManager(_:didDisconnectPeripheral:error:)"),
        "hci.handle": e("Connection handle of the ACL data (12 bits)", nil, hci + " 5.4.2"),
        "hci.pb": e("Packet Boundary flag: 0b00 first non-flushable, 0b01 continuing fragment, 0b10 first flushable", nil, hci + " 5.4.2"),
        "hci.bc": e("Broadcast flag (0b00 point-to-point)", nil, hci + " 5.4.2"),
        "hci.length": e("Length of the data that follows", "octets", hci + " 5.4.2"),
        "hci.connectionHandle": e("The controller's number for one link", nil, hci + " 5.4.2", cb: "none: CBPeripheral stands for the link"),
        "hci.numHandles": e("How many handles the event reports", nil, hci + " 7.7.19"),
        "hci.numCompletedPackets": e("ACL packets the controller has sent (or flushed) since the last report: their buffers are free again", "packets", hci + " 7.7.19"),
        "hci.supportedCommands": e("The commands the controller supports, one bit each", nil, hci + " 6.27 (Read Local Supported Commands 7.4.2)"),
        "hci.lmpFeatures": e("BR/EDR and LE link-manager features, one bit each (octet 4 bit 6: LE Supported (Controller))", nil, "Core v5.4 Vol 2 Part C 3.3"),
        "hci.leFeatures": e("LE features of the link layer, one bit each", nil, "Core v5.4 Vol 6 Part B 4.6"),
        "hci.eventMask": e("Which events the controller may send, one bit each", nil, hci + " 7.3.1"),
        "hci.eventMaskPage2": e("Which events 0x40 and above the controller may send, one bit each", nil, hci + " 7.3.69"),
        "hci.leEventMask": e("Which LE Meta subevents the controller may send, one bit each", nil, hci + " 7.8.1"),
        "hci.hciVersion": e("HCI version of the controller (Assigned Numbers 2.1)", nil, hci + " 7.4.1"),
        "hci.lmpVersion": e("Link layer version (Assigned Numbers 2.1)", nil, hci + " 7.4.1"),
        "hci.companyIdentifier": e("The controller's manufacturer (Assigned Numbers, Company Identifiers)", nil, hci + " 7.4.1"),
        "hci.leACLDataPacketLength": e("Largest ACL data payload the controller takes in one HCI packet", "octets", hci + " 7.8.2"),
        "hci.totalNumLEACLDataPackets": e("How many ACL packets the controller can hold; the host sends no more until Number Of Completed Packets frees some", "packets", hci + " 7.8.2"),
        "hci.aclDataPacketLength": e("Largest ACL data payload per HCI packet (shared BR/EDR buffers)", "octets", hci + " 7.4.5"),
        "hci.totalNumACLDataPackets": e("How many ACL packets the shared buffers hold", "packets", hci + " 7.4.5"),
        "hci.bdAddr": e("The controller's public device address", nil, hci + " 7.4.6", cb: "hidden: CoreBluetooth shows CBPeer.identifier"),
        "hci.ownAddressType": e("Which of this device's addresses to use: 0 public, 1 random, 2/3 resolvable private from the resolving list", nil, hci + " 7.8.5"),
        "hci.randomAddress": e("The random device address this controller uses", nil, hci + " 7.8.4"),
        "hci.peerAddress": e("The other device's address", nil, hci + " 7.7.65.10", cb: "hidden: CBPeripheral.identifier"),
        "hci.peerAddressType": e("0 public, 1 random, 2/3 identity address after resolution", nil, hci + " 7.7.65.10"),
        "hci.address": e("The advertiser's address", nil, hci + " 7.7.65.13", cb: "hidden: CBPeripheral.identifier"),
        "hci.addressType": e("0 public, 1 random, 2/3 identity address after resolution, 0xFF anonymous", nil, hci + " 7.7.65.13"),
        "hci.role": e("This device's role on the link: 0x00 Central, 0x01 Peripheral", nil, hci + " 7.7.65.10"),
        "hci.connectionInterval": e("Time between two connection events", "1.25 ms", hci + " 7.7.65.10", cb: "none: the system chooses it"),
        "hci.peripheralLatency": e("Connection events the peripheral may skip", "connection events", hci + " 7.7.65.10"),
        "hci.supervisionTimeout": e("The link is lost after this long without a packet", "10 ms", hci + " 7.7.65.10"),
        "hci.centralClockAccuracy": e("The central's sleep clock accuracy (0x00 500 ppm … 0x07 20 ppm)", nil, hci + " 7.7.65.10"),
        "hci.localResolvablePrivateAddress": e("The resolvable private address this device used, when it used one", nil, hci + " 7.7.65.10"),
        "hci.peerResolvablePrivateAddress": e("The resolvable private address the peer used, when it used one", nil, hci + " 7.7.65.10"),
        "hci.rssi": e("Received signal strength", "dBm", hci + " 7.7.65.13", cb: "RSSI of centralManager(_:didDiscover:advertisementData:rssi:)"),
        "hci.txPower": e("Transmit power the advertiser reports (127: not available)", "dBm", hci + " 7.7.65.13"),
        "hci.eventType": e("What was received: connectable, scannable, directed, scan response, legacy PDU, data status", nil, hci + " 7.7.65.13",
                           cb: "CBAdvertisementDataIsConnectable"),
        "hci.primaryPHY": e("PHY of the advertising on the primary channels", nil, hci + " 7.7.65.13"),
        "hci.secondaryPHY": e("PHY of the auxiliary packets (0: none)", nil, hci + " 7.7.65.13"),
        "hci.advertisingSID": e("Advertising set identifier (0xFF: none)", nil, hci + " 7.7.65.13"),
        "hci.periodicAdvertisingInterval": e("Interval of the periodic advertising (0: none)", "1.25 ms", hci + " 7.7.65.13"),
        "hci.data": e("Advertising data: AD structures (length, type, data)", nil, "Core v5.4 Vol 3 Part C 11",
                      cb: "advertisementData of centralManager(_:didDiscover:advertisementData:rssi:)"),
        "hci.advertisingData": e("Advertising data: AD structures (length, type, data)", nil, "Core v5.4 Vol 3 Part C 11",
                                 cb: "the dictionary given to peripheralManager.startAdvertising(_:)"),
        "hci.adType": e("AD type (Assigned Numbers 2.3)", nil, "Core Specification Supplement Part A 1"),
        "hci.localName": e("Local name in the advertising data", nil, "Core Specification Supplement Part A 1.2", cb: "CBAdvertisementDataLocalNameKey"),
        "hci.uuids": e("Service UUIDs the advertiser offers", nil, "Core Specification Supplement Part A 1.1", cb: "CBAdvertisementDataServiceUUIDsKey"),
        "hci.serviceData": e("Service data: a service UUID and its data", nil, "Core Specification Supplement Part A 1.11", cb: "CBAdvertisementDataServiceDataKey"),
        "hci.txPowerLevel": e("Transmit power in the advertising data", "dBm", "Core Specification Supplement Part A 1.5", cb: "CBAdvertisementDataTxPowerLevelKey"),
        "hci.flags": e("AD Flags: discoverable mode and BR/EDR support", nil, "Core Specification Supplement Part A 1.3"),
        "hci.scanInterval": e("How often the controller starts scanning a channel", "0.625 ms", hci + " 7.8.64"),
        "hci.scanWindow": e("How long each scan lasts", "0.625 ms", hci + " 7.8.64"),
        "hci.leScanInterval": e("How often the controller starts scanning a channel", "0.625 ms", hci + " 7.8.10"),
        "hci.leScanWindow": e("How long each scan lasts", "0.625 ms", hci + " 7.8.10"),
        "hci.scanType": e("0x00 passive (listen only), 0x01 active (send scan requests)", nil, hci + " 7.8.64",
                          cb: "none: CoreBluetooth scans actively in the foreground"),
        "hci.filterDuplicates": e("Whether the controller reports each advertiser only once", nil, hci + " 7.8.65",
                                  cb: "CBCentralManagerScanOptionAllowDuplicatesKey (inverted)"),
        "hci.enable": e("0x00 off, 0x01 on", nil, hci + " 7.8.56 / 7.8.65"),
        "hci.duration": e("How long to scan or advertise (0: until told to stop)", "10 ms", hci + " 7.8.56 / 7.8.65"),
        "hci.period": e("Time between the starts of scan durations (0: not periodic)", "1.28 s", hci + " 7.8.65"),
        "hci.advertisingHandle": e("The host's number for one advertising set", nil, hci + " 7.8.53"),
        "hci.advertisingEventProperties": e("Kind of advertising: connectable, scannable, directed, legacy, anonymous, include TX power", nil, hci + " 7.8.53"),
        "hci.primaryAdvertisingIntervalMin": e("Shortest time between advertising events", "0.625 ms", hci + " 7.8.53"),
        "hci.primaryAdvertisingIntervalMax": e("Longest time between advertising events", "0.625 ms", hci + " 7.8.53"),
        "hci.primaryAdvertisingChannelMap": e("Primary advertising channels used: bit 0 channel 37, bit 1 38, bit 2 39", nil, hci + " 7.8.53"),
        "hci.advertisingFilterPolicy": e("Which scanners and initiators the advertiser answers (the Filter Accept List or all)", nil, hci + " 7.8.53"),
        "hci.advertisingTxPower": e("Largest transmit power the host allows (127: no preference)", "dBm", hci + " 7.8.53"),
        "hci.selectedTxPower": e("Transmit power the controller chose", "dBm", hci + " 7.8.53"),
        "hci.scanRequestNotificationEnable": e("Whether LE Scan Request Received events are sent", nil, hci + " 7.8.53"),
        "hci.operation": e("Which part of the data this command carries (0x03: all of it)", nil, hci + " 7.8.54"),
        "hci.fragmentPreference": e("Whether the controller may fragment the data", nil, hci + " 7.8.54"),
        "hci.advertisingDataLength": e("Length of the advertising data", "octets", hci + " 7.8.54"),
        "hci.numSets": e("How many advertising sets the command names", nil, hci + " 7.8.56"),
        "hci.maxExtendedAdvertisingEvents": e("Advertising events after which the set stops (0: no limit)", "events", hci + " 7.8.56"),
        "hci.numCompletedExtendedAdvertisingEvents": e("Advertising events the set completed", "events", hci + " 7.7.65.18"),
        "hci.initiatorFilterPolicy": e("Whether to connect to the peer named here (0) or to any device on the Filter Accept List (1)", nil, hci + " 7.8.66"),
        "hci.initiatingPHYs": e("The PHYs to connect on, one bit each: 1M, 2M, Coded", nil, hci + " 7.8.66"),
        "hci.scanningPHYs": e("The PHYs to scan on, one bit each: 1M, Coded", nil, hci + " 7.8.64"),
        "hci.scanningFilterPolicy": e("Which advertisers to report (all, or the Filter Accept List)", nil, hci + " 7.8.64"),
        "hci.connectionIntervalMin": e("Shortest acceptable connection interval", "1.25 ms", hci + " 7.8.66"),
        "hci.connectionIntervalMax": e("Longest acceptable connection interval", "1.25 ms", hci + " 7.8.66"),
        "hci.maxLatency": e("Largest peripheral latency", "connection events", hci + " 7.8.66"),
        "hci.minCELength": e("Shortest connection event the host wants", "0.625 ms", hci + " 7.8.66"),
        "hci.maxCELength": e("Longest connection event the host wants", "0.625 ms", hci + " 7.8.66"),
        "hci.suggestedMaxTxOctets": e("Link-layer data payload the host suggests for new links", "octets", hci + " 7.8.35"),
        "hci.suggestedMaxTxTime": e("Air time of the largest packet the host suggests for new links", "µs", hci + " 7.8.35"),
        "hci.longTermKey": e("The key the link is encrypted with; it goes from a host to its own controller, never on the air", nil, hci + " 7.8.24"),
        "hci.encryptionEnabled": e("0x00 off, 0x01 on (AES-CCM on LE)", nil, hci + " 7.7.8"),
        // L2CAP (Core v5.4 Vol 3 Part A)
        "l2cap.length": e("Length of the information payload (the basic header's 4 octets not counted)", "octets", l2cap + " 3.1"),
        "l2cap.cid": e("Channel identifier: 0x0004 ATT, 0x0005 LE signaling, 0x0006 SMP, 0x0040 and up dynamic", nil, l2cap + " 2.1"),
        "l2cap.channel": e("The channel named by the CID", nil, l2cap + " 2.1"),
        "l2cap.fragment": e("This ACL packet carries part of an L2CAP frame (Packet Boundary 0b01: continuing)", nil, hci + " 5.4.2"),
        "signaling.identifier": e("Matches a response to its request", nil, l2cap + " 4"),
        "signaling.mtu": e("Largest SDU the sender of this PDU can receive on the channel", "octets", l2cap + " 4.22"),
        "signaling.mps": e("Largest K-frame payload the sender can receive", "octets", l2cap + " 4.22"),
        "signaling.initialCredits": e("K-frames the peer may send before it is given more credits", "K-frames", l2cap + " 4.22"),
        "signaling.credits": e("More K-frames the peer may send", "K-frames", l2cap + " 4.24"),
        "signaling.spsm": e("Simplified Protocol/Service Multiplexer: the service the channel is for", nil, l2cap + " 4.22", cb: "CBL2CAPPSM"),
        "signaling.intervalMin": e("Shortest connection interval asked for", "1.25 ms", l2cap + " 4.20"),
        "signaling.intervalMax": e("Longest connection interval asked for", "1.25 ms", l2cap + " 4.20"),
        "signaling.latency": e("Peripheral latency asked for", "connection events", l2cap + " 4.20"),
        "signaling.timeout": e("Supervision timeout asked for", "10 ms", l2cap + " 4.20"),
        // ATT (Core v5.4 Vol 3 Part F)
        "att.opcode": e("ATT opcode: bits 0–5 the method, bit 6 Command (no response), bit 7 Authentication Signature", nil, att + " 3.3.1"),
        "att.handle": e("Attribute handle: the attribute's place in the server's table", nil, att + " 3.2.2", cb: "none: CoreBluetooth hides handles behind CBCharacteristic"),
        "att.clientRxMtu": e("Largest ATT PDU the client can receive", "octets", att + " 3.4.2.1", cb: "peripheral.maximumWriteValueLength(for:) is MTU − 3"),
        "att.serverRxMtu": e("Largest ATT PDU the server can receive", "octets", att + " 3.4.2.2", cb: "central.maximumUpdateValueLength is MTU − 3"),
        "att.startHandle": e("First handle of the range asked about", nil, att + " 3.4.4.1"),
        "att.endHandle": e("Last handle of the range asked about", nil, att + " 3.4.4.1"),
        "att.type": e("Attribute type asked for: 2800 services, 2802 includes, 2803 characteristic declarations", nil, att + " 3.4.4.1"),
        "att.length": e("Length of each entry of the list that follows", "octets", att + " 3.4.4.2"),
        "att.attributeDataList": e("Handle and value of each attribute found", nil, att + " 3.4.4.2"),
        "att.informationData": e("Handle and type of each attribute found", nil, att + " 3.4.3.2"),
        "att.format": e("0x01 16-bit UUIDs, 0x02 128-bit UUIDs", nil, att + " 3.4.3.2"),
        "att.value": e("The attribute value", nil, att + " 3.4.4.4", cb: "characteristic.value / descriptor.value"),
        "att.valueOffset": e("Where in the value this part starts", "octets", att + " 3.4.4.5"),
        "att.requestOpcodeInError": e("The opcode of the request refused", nil, att + " 3.4.1.1"),
        "att.attributeHandleInError": e("The handle the refusal is about", nil, att + " 3.4.1.1"),
        "att.errorCode": e("Why the request was refused", nil, att + " 3.4.1.1", cb: "CBATTError.Code (the same numbers) in the error of the delegate callback"),
        "att.flags": e("0x00 cancel the prepared writes, 0x01 write them all", nil, att + " 3.4.6.3"),
        "att.authenticationSignature": e("CMAC signature over the PDU with the CSRK, and a sign counter", nil, "Core v5.4 Vol 3 Part H 2.4.5"),
        // GATT (what discovery taught the decoder; Core v5.4 Vol 3 Part G)
        "gatt.uuid": e("The attribute's type (16-bit UUIDs from Assigned Numbers)", nil, gatt + " 3", cb: "CBUUID"),
        "gatt.name": e("The Assigned Numbers name of the UUID", nil, "Assigned Numbers 3.4–3.8"),
        "gatt.properties": e("Characteristic Properties: the procedures the characteristic allows, one octet. CoreBluetooth's "
                             + ".notifyEncryptionRequired and .indicateEncryptionRequired never appear on the air: a server says an "
                             + "attribute needs encryption only by refusing a request (0x05, 0x0F)", nil, gatt + " 3.3.1.1",
                             cb: "CBCharacteristicProperties"),
        "gatt.valueHandle": e("Handle of the characteristic's value", nil, gatt + " 3.3.1.2"),
        "gatt.declaration": e("What the attribute read declares", nil, gatt + " 3.3.1"),
        "gatt.requestType": e("Attribute type the request asked for", nil, gatt + " 4"),
        "gatt.meaning": e("What the Client Characteristic Configuration value written asks for", nil, gatt + " 3.3.3.3",
                          cb: "peripheral.setNotifyValue(_:for:)"),
        // SMP (Core v5.4 Vol 3 Part H)
        "smp.code": e("SMP command code", nil, smp + " 3.3"),
        "smp.ioCapability": e("What the device can show and enter: with the other side's, it picks the pairing method", nil, smp + " 3.5.1 (table 2.8)"),
        "smp.oobDataFlag": e("Whether out-of-band data from the peer is present", nil, smp + " 3.5.1"),
        "smp.authReq": e("Bonding flags, MITM, Secure Connections, Keypress, CT2", nil, smp + " 3.5.1"),
        "smp.maxEncryptionKeySize": e("Largest key the device takes; the smaller of the two is used", "octets (7–16)", smp + " 3.5.1"),
        "smp.initiatorKeyDistribution": e("Keys the initiator (central) will send: EncKey, IdKey, SignKey, LinkKey", nil, smp + " 3.6.1"),
        "smp.responderKeyDistribution": e("Keys the responder (peripheral) will send", nil, smp + " 3.6.1"),
        "smp.confirmValue": e("Commitment to the random value sent next (c1 or f4)", nil, smp + " 3.5.3"),
        "smp.randomValue": e("The random value the confirm value committed to", nil, smp + " 3.5.4"),
        "smp.reason": e("Why pairing failed", nil, smp + " 3.5.5"),
        "smp.publicKeyX": e("X coordinate of the P-256 public key", nil, smp + " 3.5.6"),
        "smp.publicKeyY": e("Y coordinate of the P-256 public key", nil, smp + " 3.5.6"),
        "smp.dhKeyCheck": e("Proof that both sides computed the same DHKey (f6)", nil, smp + " 3.5.7"),
        "smp.longTermKey": e("The key later links are encrypted with (legacy pairing)", nil, smp + " 3.6.2"),
        "smp.ediv": e("Identifies the LTK with Rand (legacy pairing)", nil, smp + " 3.6.3"),
        "smp.rand": e("Identifies the LTK with EDIV (legacy pairing)", nil, smp + " 3.6.3"),
        "smp.identityResolvingKey": e("IRK: resolves the sender's resolvable private addresses", nil, smp + " 3.6.4"),
        "smp.signatureKey": e("CSRK: verifies the sender's signed writes", nil, smp + " 3.6.6"),
    ]
}
