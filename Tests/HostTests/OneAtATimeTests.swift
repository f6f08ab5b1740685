// OneAtATime: the one-at-a-time turn an ATT bearer's indications and a credit-based channel's
// SDUs take (Core v5.4 Vol 3 Part F 3.3.2: one indication outstanding; Part A 3.4: one SDU's
// K-frames at a time). Driven from one actor, as a layer drives it from its host's isolation.
import Testing
import TestSupport
import Host

struct TurnClosed: Error, Equatable {}

/// The layer's side: takes the turn, holds it until told, passes it. `log` records "asked x"
/// when x asks and "took x" when it has the turn; a taker that finds the turn held is parked in
/// the same job as its "asked", so once the log shows it, it waits in line.
actor TurnOwner {
    let turn = OneAtATime()
    let log = Watched<[String]>([])
    var closed = false
    var release: [String: CheckedContinuation<Void, Never>] = [:]

    func hold(_ name: String) async throws {
        log.withLock { $0.append("asked \(name)") }
        try await turn.take { closed ? TurnClosed() : nil }
        log.withLock { $0.append("took \(name)") }
        await withCheckedContinuation { release[name] = $0 }
        turn.pass()
    }
    /// Lets `name` pass the turn once it holds it ("took" and its wait are one job of the actor).
    func letGo(_ name: String) async throws {
        try await log.until("\(name) holds the turn") { $0.contains("took \(name)") }
        release.removeValue(forKey: name)?.resume()
    }
    func close() { closed = true; turn.fail(TurnClosed()) }
    var isFree: Bool { turn.isFree }
}

@Suite(.timeLimit(.minutes(1))) struct OneAtATimeTests {
    @Test func turnsGoFirstComeFirstServedOneAtATime() async throws {
        let owner = TurnOwner()
        #expect(await owner.isFree)
        let a = Task { try await owner.hold("a") }
        try await owner.log.until("a holds the turn") { $0 == ["asked a", "took a"] }
        let b = Task { try await owner.hold("b") }
        try await owner.log.until("b waits") { $0.last == "asked b" }
        let c = Task { try await owner.hold("c") }
        try await owner.log.until("c waits") { $0.last == "asked c" }
        #expect(await !owner.isFree)
        try await owner.letGo("a")
        try await owner.letGo("b")
        try await owner.letGo("c")
        for t in [a, b, c] { try await t.value }
        #expect(owner.log.value == ["asked a", "took a", "asked b", "asked c", "took b", "took c"])
        #expect(await owner.isFree)
    }

    @Test func closingEndsEveryWaitAndRefusesNewTakers() async throws {
        let owner = TurnOwner()
        let a = Task { try await owner.hold("a") }
        try await owner.log.until("a holds the turn") { $0.last == "took a" }
        let b = Task { try await owner.hold("b") }
        try await owner.log.until("b waits") { $0.last == "asked b" }
        await owner.close()
        await #expect(throws: TurnClosed()) { try await b.value }
        await #expect(throws: TurnClosed()) { try await owner.hold("late") }
        // The holder keeps the turn until it passes it; nobody is left to take it then.
        try await owner.letGo("a")
        try await a.value
        #expect(owner.log.value == ["asked a", "took a", "asked b", "asked late"])
        #expect(await owner.isFree)
    }
}
