import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
import TestSupport

/// Headless Chromium from Debian (Tools/setup.sh installs the `chromium` package).
let chromium = "/usr/bin/chromium"
/// Runs where Chromium is installed, and always under CI=true (where a missing one fails).
let chromiumOrCI = FileManager.default.isExecutableFile(atPath: chromium) || ProcessInfo.processInfo.environment["CI"] == "true"

extension CLITests {
    /// Issue 17: sequence diagrams (`dump --flow`, `--svg`) and `demo` recording both hosts.
    @Suite(.serialized) struct Flow {
        /// `demo -w FILE` records the central in FILE and the peripheral in FILE-peripheral;
        /// tshark finds the peripheral's advertising and the ATT requests it received.
        @Test func demoRecordsBothHosts() async throws {
            let dir = try TempDir()
            let path = dir.path("demo.pcap")
            let r = try await BleHCI.run(["demo", "-w", path], timeout: 20)
            expectStatus(r, 0, "ble-hci demo -w demo.pcap")
            let peripheral = dir.path("demo-peripheral.pcap")
            #expect(FileManager.default.fileExists(atPath: peripheral))
            // LE Set Extended Advertising Enable (Core v5.4 Vol 4 Part E 7.8.56, OCF 0x0039) with Enable = 1.
            let adv = try await runTool(tshark, ["-n", "-r", peripheral, "-Y", "bthci_cmd.opcode == 0x2039", "-T", "fields", "-e", "frame.number"])
            #expect(adv.status == 0 && !adv.stdout.filter { !$0.isEmpty }.isEmpty, "no advertising enable in the peripheral's capture")
            // Requests arrive at the peripheral (direction 1, controller → host): Read By Group Type 0x10.
            let att = try await runTool(tshark, ["-n", "-r", peripheral, "-Y", "hci_h4.direction == 1 && btatt.opcode == 0x10",
                                                 "-T", "fields", "-e", "frame.number"])
            #expect(!att.stdout.filter { !$0.isEmpty }.isEmpty, "the peripheral's capture has no received Read By Group Type Request")
            // Both hosts are traced, each line saying which.
            #expect(r.stdout.contains { $0.hasPrefix("[peripheral] #1 ") })
            #expect(r.stdout.contains { $0.hasPrefix("[central] #1 ") })
        }

        /// `dump --flow` prints one row per packet tshark reads, under numbered steps.
        @Test func flowPrintsEveryPacket() async throws {
            let fixture = Repo.root.appendingPathComponent("Tests/Fixtures/bumble-central.btsnoop").path
            let t = try await runTool(tshark, ["-n", "-r", fixture, "-T", "fields", "-e", "frame.number"])
            let r = try await BleHCI.run(["dump", fixture, "--flow"])
            expectStatus(r, 0, "ble-hci dump --flow")
            let rows = r.stdout.compactMap { line -> Int? in
                let cell = line.drop { $0 == " " }
                guard cell.hasPrefix("#") else { return nil }
                return Int(cell.dropFirst().prefix { $0.isNumber })
            }
            #expect(rows == t.stdout.filter { !$0.isEmpty }.compactMap { Int($0) })
            #expect(r.stdout.contains { $0.hasPrefix("── ") && $0.contains("centralManager.connect") })
        }

        @Test func flowAndJSONAreAlternatives() async throws {
            let fixture = Repo.root.appendingPathComponent("Tests/Fixtures/ble-hci-demo.pcap").path
            let r = try await BleHCI.run(["dump", fixture, "--flow", "--json"])
            #expect(r.status == 2)
        }

        /// The SVG opens in a real browser: headless Chromium screenshots it at the SVG's own
        /// size, and the picture is that size and not blank (several colours, many non-white pixels).
        @Test(.enabled(if: chromiumOrCI, "chromium is not installed (Tools/setup.sh installs it)"))
        func svgRendersInChromium() async throws {
            let dir = try TempDir()
            let svg = dir.path("flow.svg"), png = dir.path("flow.png")
            let fixture = Repo.root.appendingPathComponent("Tests/Fixtures/ble-hci-demo.pcap").path
            let r = try await BleHCI.run(["dump", fixture, "--svg", svg])
            expectStatus(r, 0, "ble-hci dump --svg")
            let data = try Data(contentsOf: URL(fileURLWithPath: svg))
            let size = SVGSize()
            let parser = XMLParser(data: data)
            parser.delegate = size
            #expect(parser.parse(), "the SVG is not well-formed XML: \(String(describing: parser.parserError))")
            let width = try #require(size.width), height = try #require(size.height)
            #expect(width > 500 && height > 500)

            let shot = try await runTool(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                                    "--user-data-dir=\(dir.path("profile"))", "--screenshot=\(png)",
                                                    "--window-size=\(width),\(height)", "file://\(svg)"], timeout: 90)
            #expect(shot.status == 0, "chromium: \(shot.stderr)")
            let image = try Data(contentsOf: URL(fileURLWithPath: png))
            let shotSize = try pngSize(image)
            #expect(shotSize.width == width && shotSize.height == height, "screenshot \(shotSize.width)×\(shotSize.height), SVG \(width)×\(height)")
            let pixels = try await pngPixels(image, in: dir)
            #expect(pixels.nonWhite > width * height / 100, "only \(pixels.nonWhite) non-white pixels: blank")
            #expect(pixels.colours >= 6, "only \(pixels.colours) distinct colours")
        }
    }
}

/// The root element's width and height attributes.
private final class SVGSize: NSObject, XMLParserDelegate, @unchecked Sendable {
    var width: Int?, height: Int?
    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        if name == "svg", width == nil { width = attributes["width"].flatMap { Int($0) }; height = attributes["height"].flatMap { Int($0) } }
    }
}

/// A PNG's size from its IHDR chunk (RFC 2083 4.1.1: width and height, big-endian, at octets 16–23).
private func pngSize(_ png: Data) throws -> (width: Int, height: Int) {
    let b = [UInt8](png.prefix(24))
    guard b.count == 24, b[0..<8] == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], b[12..<16] == Array("IHDR".utf8)[...] else {
        throw HarnessError("not a PNG")
    }
    func u32(_ at: Int) -> Int { b[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) } }
    return (u32(16), u32(20))
}

/// Non-white pixels and distinct colours (up to 64) of a PNG, counted by Chromium itself: a
/// page draws the PNG (as a data: URL) on a canvas and writes the counts into the DOM, which
/// `--dump-dom` prints once the page's scripts ran.
private func pngPixels(_ png: Data, in dir: TempDir) async throws -> (nonWhite: Int, colours: Int) {
    let html = """
    <!doctype html><html><body><pre id="r">pending</pre><script>
    const img = new Image();
    img.onload = () => {
      const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
      const g = c.getContext('2d'); g.drawImage(img, 0, 0);
      const d = g.getImageData(0, 0, c.width, c.height).data;
      let nonWhite = 0; const colours = new Set();
      for (let i = 0; i < d.length; i += 4) {
        if (d[i] !== 255 || d[i + 1] !== 255 || d[i + 2] !== 255) nonWhite++;
        if (colours.size < 64) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      }
      document.getElementById('r').textContent = `counts ${nonWhite} ${colours.size}`;
    };
    img.src = 'data:image/png;base64,\(png.base64EncodedString())';
    </script></body></html>
    """
    let page = dir.path("count.html")
    try Data(html.utf8).write(to: URL(fileURLWithPath: page))
    let r = try await runTool(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(dir.path("profile2"))",
                                         "--virtual-time-budget=10000", "--dump-dom", "file://\(page)"], timeout: 90)
    guard let line = r.stdout.first(where: { $0.contains("counts ") }),
          let range = line.range(of: #"counts \d+ \d+"#, options: .regularExpression) else {
        throw HarnessError("chromium did not count the screenshot's pixels: \(r.stdout.joined(separator: "\n").prefix(500)) \(r.stderr.prefix(500))")
    }
    let v = line[range].split(separator: " ").dropFirst().compactMap { Int($0) }
    return (v[0], v[1])
}
