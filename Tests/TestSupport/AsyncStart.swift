import Foundation

extension BumbleControllers {
    /// Starts a fresh controllers process from an async test without holding a thread of the
    /// cooperative pool while it waits for the ready line (see `offPool`).
    public static func start(count: Int = 2, timeout: TimeInterval = 30) async throws -> BumbleControllers {
        try await offPool { try BumbleControllers(count: count, timeout: timeout) }
    }
}
