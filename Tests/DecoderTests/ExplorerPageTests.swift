import Foundation
import Testing
import TestSupport
import HCI
import Capture
@testable import Decoder

// `dump --html`'s page model. The links are checked against tshark's own request/response
// pairing (`btatt.request_in_frame`); the embedded JSON against Foundation's JSON parser (an
// independent reader of RFC 8259), the page's self-containment by what it must not reference.

private func page(_ path: String, explain: ExplorerPage.Explain? = nil) throws -> String {
    var reader = try CaptureReader(path: path)
    let (records, error) = reader.readAll()
    if let error { throw error }
    let decoder = PacketDecoder(attributes: true, fieldRanges: true)
    var page = ExplorerPage(title: "</script><b>title", explain: explain)
    for r in records { page.add(decoder.decode(r), raw: r.raw) }
    return page.render(servers: decoder.attributes() ?? [])
}

/// The model embedded in the page, parsed by Foundation.
private func model(_ html: String) throws -> [String: Any] {
    let open = "<script id=\"model\" type=\"application/json\">"
    let start = try #require(html.range(of: open))
    let end = try #require(html.range(of: "</script>", range: start.upperBound..<html.endIndex))
    let json = try JSONSerialization.jsonObject(with: Data(html[start.upperBound..<end.lowerBound].utf8))
    return try #require(json as? [String: Any])
}

@Suite("dump --html page model")
struct ExplorerPageTests {
    @Test("every ATT response and HCI Command Complete / Status is linked as tshark pairs them (Core v5.4 Vol 3 Part F 3.3.2, Vol 4 Part E 4.4)",
          arguments: ["bumble-central.btsnoop", "bumble-peripheral.btsnoop", "ble-hci-demo.pcap"])
    func linksAsTshark(fixture: String) throws {
        let m = try model(try page(fixturePath(fixture)))
        let links = try #require(m["links"] as? [String: Int])
        // tshark also ties a command's later completion event (LE Connection Complete) to it;
        // the link is the command's own answer, Command Complete (0x0e) or Command Status (0x0f).
        for answer in ["btatt.request_in_frame", "bthci_evt.command_in_frame"] {
            let pairs = try Tshark.fields(fixturePath(fixture), ["frame.number", answer, "bthci_evt.code"])
                .compactMap { row -> (Int, Int)? in
                    guard row.count == 3, let response = Int(row[0]), let request = Int(row[1]),
                          row[2].isEmpty || row[2] == "0x0e" || row[2] == "0x0f" else { return nil }
                    return (request, response)
                }
            #expect(pairs.count > 5, "tshark pairs \(pairs.count) by \(answer) in \(fixture)")
            for (request, response) in pairs {
                #expect(links[String(request)] == response, "\(fixture): #\(request) → \(links[String(request)].map(String.init) ?? "nil"), tshark #\(response)")
                #expect(links[String(response)] == request, "\(fixture): #\(response) ← \(links[String(response)].map(String.init) ?? "nil"), tshark #\(request)")
            }
        }
    }

    @Test("the model is JSON that a \"</script>\" cannot end, and the page fetches nothing")
    func selfContained() throws {
        let html = try page(fixturePath("bumble-central.btsnoop"))
        let m = try model(html)
        #expect(m["title"] as? String == "</script><b>title")
        #expect((m["packets"] as? [Any])?.count == (try decodeCapture(fixturePath("bumble-central.btsnoop"))).count)
        // Two script elements (the model and the code), so exactly two closing tags.
        #expect(html.components(separatedBy: "</script>").count - 1 == 2)
        #expect(html.contains("<title>&lt;/script&gt;&lt;b&gt;title — ble-hci explorer</title>"))
        for reference in ["http:", "https:", "src=", "@import", "url(", "<link", "fetch(", "XMLHttpRequest"] {
            #expect(!html.contains(reference), "the page references \(reference)")
        }
    }

    @Test("a field's range in the model is the one the decoder gave it, H4 indicator at 0")
    func rangesInModel() throws {
        let m = try model(try page(fixturePath("bumble-central.btsnoop")))
        let packets = try #require(m["packets"] as? [[String: Any]])
        // The first ATT Read Request: opcode at 9 (H4 1 + ACL header 4 + L2CAP header 4,
        // Vol 4 Part E 5.4.2, Vol 3 Part A 3.1), its handle at 10..<12 (Vol 3 Part F 3.4.4.3).
        let read = try #require(packets.first { ($0["s"] as? String) == "ATT Read Request" })
        let layers = try #require(read["l"] as? [[String: Any]])
        let att = try #require(layers.first { $0["n"] as? String == "att" })
        #expect(att["r"] as? [Int] == [9, 12])
        let fields = try #require(att["f"] as? [[String: Any]])
        #expect(fields.first { $0["n"] as? String == "opcode" }?["r"] as? [Int] == [9, 10])
        #expect(fields.first { $0["n"] as? String == "handle" }?["r"] as? [Int] == [10, 12])
    }

    @Test("a field's explain text, when one is given, is in the model for that field only")
    func explainIsCarried() throws {
        let m = try model(try page(fixturePath("bumble-central.btsnoop")) { field, layer, _ in
            layer.name == "att" && field.name == "opcode" ? "The PDU's kind <Vol 3 Part F 3.3>" : nil
        })
        let packets = try #require(m["packets"] as? [[String: Any]])
        var explained = 0, others = 0
        for p in packets {
            for layer in p["l"] as? [[String: Any]] ?? [] {
                for f in layer["f"] as? [[String: Any]] ?? [] {
                    if let e = f["e"] as? String {
                        #expect(layer["n"] as? String == "att" && f["n"] as? String == "opcode" && e == "The PDU's kind <Vol 3 Part F 3.3>")
                        explained += 1
                    } else if layer["n"] as? String == "att" && f["n"] as? String == "opcode" {
                        others += 1
                    }
                }
            }
        }
        #expect(explained > 10 && others == 0, "explained \(explained), att opcodes without: \(others)")
    }

    /// `dump --html`'s tooltips are `dump --explain`'s text: an ATT opcode field's says what the
    /// opcode's bits are and where (Core v5.4 Vol 3 Part F 3.3.1: method in bits 0–5, Command
    /// flag bit 6, Authentication Signature flag bit 7).
    @Test func tooltipsAreTheExplanations() throws {
        let m = try model(try page(fixturePath("bumble-central.btsnoop"), explain: ExplorerPage.fieldExplanations))
        let packets = try #require(m["packets"] as? [[String: Any]])
        let tips = packets.flatMap { p in (p["l"] as? [[String: Any]] ?? []).filter { $0["n"] as? String == "att" } }
            .flatMap { $0["f"] as? [[String: Any]] ?? [] }.filter { $0["n"] as? String == "opcode" }.compactMap { $0["e"] as? String }
        #expect(!tips.isEmpty)
        #expect(tips.allSatisfy { $0.contains("bit 6 Command") && $0.contains("Vol 3 Part F 3.3.1") }, "\(tips.first ?? "")")
    }
}
