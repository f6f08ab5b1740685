import Testing
@testable import Host

@Suite struct ReassemblerTests {
    @Test func completeFrameInOneFragmentPassesThrough() {
        var r = L2CAPReassembler()
        let f = l2capFrame(10)
        #expect(r.push(f, start: true) == .frame(f))
        #expect(r.pendingCount == 0)
    }

    @Test func fragmentsAreJoinedInOrder() {
        var r = L2CAPReassembler()
        let f = l2capFrame(100)
        #expect(r.push(Array(f[0..<27]), start: true) == .pending)
        #expect(r.push(Array(f[27..<54]), start: false) == .pending)
        #expect(r.pendingCount == 54)
        #expect(r.push(Array(f[54...]), start: false) == .frame(f))
        #expect(r.pendingCount == 0)
        // And the next frame starts clean.
        let g = l2capFrame(3, seed: 7)
        #expect(r.push(g, start: true) == .frame(g))
    }

    @Test func headerSplitAcrossFragments() {
        var r = L2CAPReassembler()
        let f = l2capFrame(5)
        #expect(r.push(Array(f[0..<1]), start: true) == .pending)
        #expect(r.push(Array(f[1..<3]), start: false) == .pending)
        #expect(r.push(Array(f[3...]), start: false) == .frame(f))
    }

    @Test func continuationWithoutStartIsDropped() {
        var r = L2CAPReassembler()
        guard case .dropped(let why) = r.push([1, 2, 3], start: false) else { Issue.record("not dropped"); return }
        #expect(why.contains("without a start"))
        #expect(r.pendingCount == 0)
    }

    @Test func startWhilePendingDropsThePendingFrame() {
        var r = L2CAPReassembler()
        let f = l2capFrame(50)
        _ = r.push(Array(f[0..<20]), start: true)
        let g = l2capFrame(6, seed: 9)
        #expect(r.push(g, start: true) == .replaced(dropped: "start fragment while a frame was pending: dropped 20 octet(s) of the pending frame", frame: g))
        // The old frame's continuation is now orphaned-by-length: it overruns nothing pending → dropped.
        guard case .dropped = r.push(Array(f[20...]), start: false) else { Issue.record("continuation accepted"); return }
    }

    @Test func startWhilePendingThatIsItselfPartial() {
        var r = L2CAPReassembler()
        _ = r.push(Array(l2capFrame(50)[0..<20]), start: true)
        let g = l2capFrame(40, seed: 1)
        guard case .replaced(_, nil) = r.push(Array(g[0..<27]), start: true) else { Issue.record("expected replaced/pending"); return }
        #expect(r.push(Array(g[27...]), start: false) == .frame(g))
    }

    @Test func frameLongerThanTheLimitIsDroppedWithoutBuffering() {
        var r = L2CAPReassembler(maxFrame: 100)
        let f = l2capFrame(200)
        guard case .dropped(let why) = r.push(Array(f[0..<27]), start: true) else { Issue.record("accepted"); return }
        #expect(why.contains("exceeds the limit of 100"))
        #expect(r.pendingCount == 0)
        // Its continuations are then orphans, also dropped: memory stays bounded.
        guard case .dropped = r.push(Array(f[27..<54]), start: false) else { Issue.record("accepted"); return }
        #expect(r.pendingCount == 0)
    }

    @Test func limitCheckedWhenHeaderArrivesLate() {
        var r = L2CAPReassembler(maxFrame: 100)
        _ = r.push([0xFF], start: true)
        guard case .dropped = r.push([0xFF, 0x40, 0x00], start: false) else { Issue.record("accepted"); return }
        #expect(r.pendingCount == 0)
    }

    @Test func fragmentsOverrunningTheAnnouncedLengthAreDropped() {
        var r = L2CAPReassembler()
        let f = l2capFrame(30)
        _ = r.push(Array(f[0..<27]), start: true)
        guard case .dropped(let why) = r.push(Array(f[27...]) + [0xAA, 0xBB], start: false) else { Issue.record("accepted"); return }
        #expect(why.contains("announced 34"))
        #expect(r.pendingCount == 0)
        // A single start fragment longer than its header says.
        guard case .dropped = r.push(l2capFrame(4) + [1], start: true) else { Issue.record("accepted"); return }
    }

    @Test func emptyStartFragmentIsHarmless() {
        var r = L2CAPReassembler()
        #expect(r.push([], start: true) == .pending)
        let f = l2capFrame(2)
        #expect(r.push(f, start: false) == .frame(f))
    }
}
