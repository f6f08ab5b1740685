import Synchronization

/// What a batch reader finds in a queue's state under its lock: everything waiting, the end
/// (nil for a normal end, else the error to throw), or nothing yet.
public enum BatchTake<Batch: Sendable>: Sendable {
    case batch(Batch)
    case end((any Error)?)
    case wait
}

extension Mutex where Value: ~Copyable {
    /// The reader's side of a queue handed out in batches (one lock and at most one resume of
    /// the reader's task per batch, not per value): returns what `take` finds, else parks the
    /// task (`park` stores its continuation in the state; the producer resumes it with the
    /// next batch, or with the end). `ended` is what a normal end returns, also when the task
    /// is cancelled before it parks; `onCancel` wakes a parked reader when the task is
    /// cancelled. Shared by `PacketInbox` (HCI packets) and `GATTNotificationStream`; each
    /// keeps its own state (limits, executor delivery, indications) and says what a take finds.
    /// A batch that is there is taken on the caller's executor (`nonisolated(nonsending)`), with
    /// no executor switch. A wait leaves it: the cancellation handler's operation, a closure
    /// formed here, is not isolated and runs on the generic executor (the task's preferred
    /// one, when it has one), the resumption comes there, and the return is a hop back
    /// (docs/performance.md, Round 21: capturing an `isolated` parameter instead saves no time).
    public nonisolated(nonsending) borrowing func takeBatch<Batch: Sendable>(
        ended: Batch,
        take: (inout Value) -> BatchTake<Batch>,
        park: (inout Value, CheckedContinuation<Batch, any Error>) -> Void,
        onCancel: @Sendable () -> Void
    ) async throws -> Batch {
        switch withLock({ take(&$0) }) {
        case .batch(let b): return b
        case .end(let e?): throw e
        case .end(nil): return ended
        case .wait: break
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Batch, any Error>) in
                let now: BatchTake<Batch> = withLock { s in
                    let n = take(&s)
                    if case .wait = n {
                        if Task.isCancelled { return .end(nil) }
                        park(&s, c)
                    }
                    return n
                }
                switch now {
                case .batch(let b): c.resume(returning: b)
                case .end(let e?): c.resume(throwing: e)
                case .end(nil): c.resume(returning: ended)
                case .wait: break
                }
            }
        } onCancel: {
            onCancel()
        }
    }
}
