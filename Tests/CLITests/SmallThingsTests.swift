import Foundation
import Testing
import TestSupport

extension CLITests {
    /// Issue 16 item 10: the small surprises.
    @Suite(.serialized) struct SmallThings {
        @Test func jsonVersionIsOneJSONObject() async throws {
            let r = try await BleHCI.run(["--json", "--version"])
            expectStatus(r, 0, "--json --version")
            expectPureJSON(r, "--json --version")
            #expect(r.events("version").first?["version"] as? String != nil, "\(r.stdout)")
        }

        @Test func unwritableCaptureIsNamedOnce() async throws {
            let r = try await BleHCI.run(["-t", "tcp:127.0.0.1:1", "-w", "/nonexistent-dir/x.pcap", "scan", "--duration", "1"])
            expectStatus(r, 1, "-w into a missing directory")
            #expect(r.stderr.components(separatedBy: "/nonexistent-dir/x.pcap").count == 2, "the path should appear once: \(r.stderr)")
            #expect(r.stderr.contains("No such file or directory"), "stderr: \(r.stderr)")
        }

        @Test func helpMentionsNoColourAndSignalExitCodes() async throws {
            let r = try await BleHCI.run(["--help"])
            let text = r.stdout.joined(separator: "\n")
            #expect(text.contains("NO_COLOR"))
            #expect(text.contains("130/143"))
        }

        /// scan and central say which transport and local controller they use, and scan ends with a summary.
        @Test func scanNamesItsControllerAndSummarises() async throws {
            try await withRig { rig in
                let r = try await rig.central(["scan", "--duration", "1", "--json"])
                expectStatus(r, 0, "scan --duration 1")
                expectPureJSON(r, "scan --json")
                // The virtual controllers' public addresses are F0:F1:F2:F3:F4:(index+1); the central's is the second.
                #expect(r.stderr.contains("Local controller F0:F1:F2:F3:F4:02 (public) on \(rig.centralSpec)"), "stderr: \(r.stderr)")
                #expect(r.stderr.contains("Scan ended: 1 advertiser seen"), "stderr: \(r.stderr)")
            }
        }
    }
}
