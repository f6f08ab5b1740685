// Shared by the libFuzzer targets in Tools/fuzz/Targets (docs/fuzzing.md). Each target's
// main.swift calls `runFuzzer` with the function libFuzzer calls once per input.
import CLibFuzzer

nonisolated(unsafe) private var currentTarget: ([UInt8]) -> Void = { _ in }

/// Hands control to libFuzzer (its command line: corpus directories, -max_total_time, ...);
/// `target` gets each input. The program's main is the target's main.swift (SwiftPM links it
/// as `main` with --defsym), so libFuzzer runs as a library, through LLVMFuzzerRunDriver.
public func runFuzzer(_ target: @escaping ([UInt8]) -> Void) -> Never {
    currentTarget = target
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzOneInput))
}

/// libFuzzer's per-input callback. Exported under the standard name as well: -sanitize=fuzzer
/// links libFuzzer's own main object, which refers to it (our main still wins, see above).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    currentTarget(size == 0 || data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

/// An invariant the code under test must keep: a violation is a finding (libFuzzer saves the input).
public func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("fuzz invariant violated: \(message())") }
}

/// Reads one fuzzer input as a sequence of values: single octets, and messages each preceded
/// by a 2-octet little-endian length (cut to what is left). Running out yields nil/empty.
public struct FuzzInput {
    public private(set) var bytes: [UInt8]
    private var offset = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var isAtEnd: Bool { offset >= bytes.count }

    public mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func message() -> [UInt8]? {
        guard let lo = byte() else { return nil }
        let hi = byte() ?? 0
        let length = min(Int(lo) | Int(hi) << 8, bytes.count - offset)
        defer { offset += length }
        return Array(bytes[offset..<offset + length])
    }

    /// Everything not read yet.
    public mutating func rest() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[min(offset, bytes.count)...])
    }
}

#if canImport(Glibc)
import Glibc
#endif
