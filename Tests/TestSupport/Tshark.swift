import Foundation

/// tshark, the oracle of the capture and decoder tests: the fields of every frame of a capture.
public enum Tshark {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The installed tshark (make test installs it).
    public static func executable() throws -> String {
        guard let exe = ["/usr/bin/tshark", "/usr/local/bin/tshark"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw Failure(description: "tshark is not installed (make test installs it: apt-get install tshark)")
        }
        return exe
    }

    /// `fields` of every frame of `path`, one row per frame, one column per field; a field that
    /// occurs several times in a frame gives all its values joined by commas (`allOccurrences`),
    /// else its first. Throws when tshark fails.
    public static func fields(_ path: String, _ fields: [String], allOccurrences: Bool = true) throws -> [[String]] {
        let occurrence = allOccurrences ? ["-E", "occurrence=a", "-E", "aggregator=,"] : ["-E", "occurrence=f"]
        let data = try output(["-r", path, "-T", "fields", "-E", "separator=/t"] + occurrence + fields.flatMap { ["-e", $0] })
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map {
            $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        }
    }

    /// What `tshark ARGUMENTS` writes on stdout (stderr discarded); throws when it fails.
    public static func output(_ arguments: [String]) throws -> Data {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try executable())
        p.arguments = arguments
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw Failure(description: "tshark \(arguments.joined(separator: " ")) exited with \(p.terminationStatus)")
        }
        return data
    }
}
