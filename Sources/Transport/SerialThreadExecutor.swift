// The executor a host stack runs on: one thread, jobs in order, shared by the `Host` actor (and
// with it the link layers that live in its isolation) and the transport's deliveries.
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A serial executor that runs its jobs, in the order they were enqueued, on one thread of its
/// own: the thread a host stack runs on (issue 14, "one serial executor per Host shared with
/// the transport reader").
///
/// - Enqueueing from the executor's own thread while it runs a job only appends the job (no
///   wake, no lock contention): a received packet, the answer it causes and the waiting task's
///   resume all run on this thread one after the other. Enqueueing from another thread signals
///   the thread when it sleeps (one wake per burst: jobs that arrive while it is awake are run in
///   the same pass).
/// - A job is never run inside `enqueue` (whoever enqueues may hold a lock or be a cancellation
///   handler): it runs when the thread's loop reaches it.
/// - The thread is started on the first job and exits after `idleTimeout` without work, or as
///   soon as it is idle after `shutdownWhenIdle()`; a later job starts a thread again. So hosts
///   that are dropped (hundreds in the tests) leave no thread behind, and no job is ever lost.
/// - Its `taskExecutor` is the same thread as a `TaskExecutor`: a task started with
///   `withTaskExecutorPreference(executor.taskExecutor)` (SE-0417) runs its nonisolated code
///   here, so awaiting the stack costs no thread switch. (A separate object, not a second
///   conformance: the runtime calls the same `enqueue` for both, and a job must run with the
///   task executor only when its task prefers it, or every hop of an ordinary task between
///   actors of this executor would be re-enqueued behind other jobs.)
///
/// Nothing that blocks (a sleep, a semaphore, a blocking socket write) may run on it: it would
/// stop every host that shares the executor.
///
/// `@unchecked Sendable`: its queue and thread state sit under a `pthread_mutex_t` with a
/// condition variable (its thread sleeps on them, which a `Mutex` cannot express). Sound
/// because its stored `var`s (`state`, `currentTaskExecutor`) are read and written with
/// `mutex` locked only, and `runningThread` is an `Atomic`.
public final class SerialThreadExecutor: SerialExecutor, @unchecked Sendable {
    private enum Job {
        /// An actor's job (or a task's isolated to one).
        case serial(UnownedJob)
        /// A job of a task that prefers `taskExecutor` (the one it was enqueued through).
        case task(UnownedJob, UnownedTaskExecutor)
        case work(@Sendable () -> Void)
    }

    /// This executor's thread as a `TaskExecutor`, for `withTaskExecutorPreference` and
    /// `Task(executorPreference:)`. It keeps its executor alive (a task preferring it may
    /// outlive every host of the executor, and its jobs must still run).
    public final class ThreadTaskExecutor: TaskExecutor, Sendable {
        let owner: SerialThreadExecutor
        fileprivate init(owner: SerialThreadExecutor) { self.owner = owner }
        public func enqueue(_ job: consuming ExecutorJob) {
            owner.push(.task(UnownedJob(job), asUnownedTaskExecutor()))
        }
    }
    /// The one `ThreadTaskExecutor` in use (weak: it holds the executor). Under `mutex`.
    private weak var currentTaskExecutor: ThreadTaskExecutor?
    /// See `ThreadTaskExecutor`: the same object as long as anyone holds it.
    public var taskExecutor: ThreadTaskExecutor {
        pthread_mutex_lock(mutex); defer { pthread_mutex_unlock(mutex) }
        if let t = currentTaskExecutor { return t }
        let t = ThreadTaskExecutor(owner: self)
        currentTaskExecutor = t
        return t
    }

    private struct State {
        var jobs: [Job] = []
        var threadRunning = false
        var sleeping = false
        var shutdownRequested = false
        var wakes = 0
        var threadsStarted = 0
        /// Jobs run so far (counted after each batch).
        var jobsRun = 0
        /// `whenIdle` callbacks, run when the thread finds no job, once more than `after` jobs ran.
        var idleWaiters: [(after: Int, body: @Sendable () -> Void)] = []
        /// `whenThreadExits` callbacks, run when the running thread has exited.
        var exitWaiters: [@Sendable () -> Void] = []

        /// What `push` does for a job it has queued, under the lock.
        enum Wake { case none, signal, startThread }

        // The steps of `push` and `run` are mutating methods: one access to `state` each
        // (a stored property of a class is checked for exclusivity at every access, and these
        // run once per job).

        /// Queues `job`; whether the thread must be started or woken for it.
        mutating func queue(_ job: Job) -> Wake {
            jobs.append(job)
            if !threadRunning {
                threadRunning = true
                threadsStarted += 1
                return .startThread
            }
            guard sleeping else { return .none }
            sleeping = false
            wakes += 1
            return .signal
        }

        /// Counts the `ran` jobs of the last batch, then moves the queued jobs into `batch`
        /// (empty, so the queue keeps its buffer); false when none is queued.
        mutating func takeJobs(into batch: inout [Job], afterRunning ran: Int) -> Bool {
            jobsRun += ran
            guard !jobs.isEmpty else { return false }
            swap(&batch, &jobs)
            return true
        }
    }

    /// What the executor is for (diagnostics).
    public let name: String
    /// How long the thread waits for work before it exits.
    public let idleTimeout: Duration

    // pthread primitives: the thread waits on a condition, which `Mutex` has not.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var state = State()  // under `mutex`
    /// The running thread's `pthread_self()`, 0 when none: read without the lock by `isCurrent`.
    private let runningThread = Atomic<UInt>(0)

    public init(name: String, idleTimeout: Duration = .seconds(2)) {
        self.name = name
        self.idleTimeout = idleTimeout
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        // The running thread holds a reference: there is none when this runs.
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    // MARK: - Enqueueing

    /// SerialExecutor: queues an actor's job.
    public func enqueue(_ job: consuming ExecutorJob) {
        push(.serial(UnownedJob(job)))
    }

    /// Queues `work` to run on the executor's thread after every job queued before it. For
    /// code that is not a task: a transport handing packets to its host, a timer firing.
    /// Inside `work`, `actor.assumeIsolated` holds for every actor on this executor.
    public func submit(_ work: @escaping @Sendable () -> Void) {
        push(.work(work))
    }

    private func push(_ job: Job) {
        pthread_mutex_lock(mutex)
        let wake = state.queue(job)
        if wake == .signal { pthread_cond_signal(condition) }
        pthread_mutex_unlock(mutex)
        if wake == .startThread { startThread() }
    }

    /// Lets the thread exit as soon as it has nothing to run (not after `idleTimeout`). Jobs
    /// enqueued later still run (on a new thread).
    public func shutdownWhenIdle() {
        pthread_mutex_lock(mutex)
        state.shutdownRequested = true
        if state.sleeping {
            state.sleeping = false
            pthread_cond_signal(condition)
        }
        pthread_mutex_unlock(mutex)
    }

    // MARK: - Isolation

    /// Whether the calling thread is this executor's thread (running one of its jobs).
    public var isCurrent: Bool {
        let t = runningThread.load(ordering: .acquiring)
        return t != 0 && t == UInt(pthread_self())
    }

    public func checkIsolated() {
        precondition(isCurrent, "not on the \(name) executor's thread")
    }

    public func isIsolatingCurrentContext() -> Bool? { isCurrent }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(complexEquality: self)
    }

    public func isSameExclusiveExecutionContext(other: SerialThreadExecutor) -> Bool { self === other }

    // MARK: - Observation (tests, diagnostics)

    /// How many times a sleeping thread was woken by `enqueue`/`submit` from another thread
    /// (thread starts not included). Enqueues from the executor's own thread never add to it.
    public var wakeCount: Int {
        pthread_mutex_lock(mutex); defer { pthread_mutex_unlock(mutex) }
        return state.wakes
    }

    /// How many threads were started so far (one more after each idle exit that was followed by work).
    public var threadStartCount: Int {
        pthread_mutex_lock(mutex); defer { pthread_mutex_unlock(mutex) }
        return state.threadsStarted
    }

    /// Whether a thread is running (busy or waiting for work).
    public var hasThread: Bool {
        pthread_mutex_lock(mutex); defer { pthread_mutex_unlock(mutex) }
        return state.threadRunning
    }

    /// Whether the thread is parked waiting for work (none queued). False with no thread.
    public var isSleeping: Bool {
        pthread_mutex_lock(mutex); defer { pthread_mutex_unlock(mutex) }
        return state.sleeping
    }

    /// Runs `body` once the executor has nothing to run: at once (on the calling thread) when
    /// it has no thread or its thread is parked; else on its thread, when it has run every job
    /// queued and is about to park (`isSleeping` is then already true, so a job enqueued from
    /// another thread after `body` counts as a wake). For tests that wait for a host to have
    /// handled what it was given, instead of sleeping.
    ///
    /// With `after`, only once more than that many jobs have run (`completedJobCount`): a
    /// waiter registered from inside a job with the count then (the jobs before it) runs when
    /// that job's batch is done; registered from an idle callback, when another job has run.
    /// A callback run on the executor's thread may reach its actors with `assumeIsolated`.
    public func whenIdle(after jobs: Int = -1, _ body: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        let now = (!state.threadRunning || (state.sleeping && state.jobs.isEmpty)) && state.jobsRun > jobs
        if !now { state.idleWaiters.append((jobs, body)) }
        pthread_mutex_unlock(mutex)
        if now { body() }
    }

    /// How many jobs the thread has run (counted after each batch).
    public var completedJobCount: Int {
        pthread_mutex_lock(mutex); defer { pthread_mutex_unlock(mutex) }
        return state.jobsRun
    }

    /// Runs `body` once no thread runs: at once when none does, else when the running thread
    /// has exited (idle timeout or `shutdownWhenIdle`). For tests of the thread's lifetime.
    public func whenThreadExits(_ body: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        let now = !state.threadRunning
        if !now { state.exitWaiters.append(body) }
        pthread_mutex_unlock(mutex)
        if now { body() }
    }

    // MARK: - The thread

    private func startThread() {
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let r = pthread_create(&thread, nil, { raw in
            let executor = Unmanaged<SerialThreadExecutor>.fromOpaque(raw!).takeRetainedValue()
            executor.run()
            return nil
        }, context)
        precondition(r == 0, "\(name): pthread_create failed (errno \(r))")
        pthread_detach(thread)
    }

    private func run() {
        runningThread.store(UInt(pthread_self()), ordering: .releasing)
        let serial = asUnownedSerialExecutor()
        var batch: [Job] = []
        var heldTaskExecutor: ThreadTaskExecutor?
        var ran = 0
        pthread_mutex_lock(mutex)
        while true {
            let taken = state.takeJobs(into: &batch, afterRunning: ran)
            ran = 0
            if taken {
                // The task executor the jobs run on, held until the thread next sleeps (read
                // once per wake: the weak reference's load and release take the runtime's slow
                // path).
                if heldTaskExecutor == nil { heldTaskExecutor = currentTaskExecutor }
                let taskExecutor = heldTaskExecutor?.asUnownedTaskExecutor()
                pthread_mutex_unlock(mutex)
                for job in batch {
                    switch job {
                    // An actor's job runs isolated to `serial` and on this thread's task
                    // executor, both true: they are this one thread. The runtime compares the
                    // task executor it runs on with the one its task prefers at every hop, so
                    // run without one, each hop of a task preferring this thread (an exchange
                    // of the BLE API, the deadline sweeper) between the host's functions, even
                    // to the same host, was enqueued again: 9 per GATT read. A task preferring
                    // none pays that instead, one enqueue per hop inside the host; the API
                    // gives its exchanges the preference.
                    case .serial(let j):
                        if let taskExecutor { j.runSynchronously(isolatedTo: serial, taskExecutor: taskExecutor) } else { j.runSynchronously(on: serial) }
                    // A job enqueued through the task executor is nonisolated code of a task
                    // preferring it (the runtime sends a task's actor-isolated jobs to the
                    // actor's executor): run it as that, on the generic executor with the task
                    // executor, so the hops between its nonisolated functions (one at each
                    // entry and after each await) need no switch. Run as isolated to `serial`,
                    // each of those hops was re-enqueued (14 per notification sent and received).
                    case .task(let j, let task): j.runSynchronously(on: task)
                    case .work(let w): w()
                    }
                }
                ran = batch.count
                batch.removeAll(keepingCapacity: true)
                pthread_mutex_lock(mutex)
                continue
            }
            if state.shutdownRequested { break }
            // (Its last release may free it under the lock: it takes none, and frees no `self`,
            // which the thread holds.)
            heldTaskExecutor = nil
            state.sleeping = true
            if state.idleWaiters.contains(where: { $0.after < state.jobsRun }) {
                // Run outside the lock (a waiter may enqueue here); a job that came meanwhile
                // cleared `sleeping` (and counted a wake): run it instead of parking.
                let done = state.jobsRun
                let waiters = state.idleWaiters.filter { $0.after < done }
                state.idleWaiters.removeAll { $0.after < done }
                pthread_mutex_unlock(mutex)
                for w in waiters { w.body() }
                pthread_mutex_lock(mutex)
                if !state.sleeping || !state.jobs.isEmpty || state.shutdownRequested {
                    state.sleeping = false
                    continue
                }
            }
            var deadline = timespec()
            clock_gettime(CLOCK_MONOTONIC, &deadline)
            let (s, a) = idleTimeout.components
            let nanos = Int(deadline.tv_nsec) + Int(a / 1_000_000_000)
            deadline.tv_sec += Int(s) + nanos / 1_000_000_000
            deadline.tv_nsec = nanos % 1_000_000_000
            let r = pthread_cond_timedwait(condition, mutex, &deadline)
            state.sleeping = false
            if r == ETIMEDOUT && state.jobs.isEmpty { break }
        }
        state.shutdownRequested = false
        state.threadRunning = false
        let idle = state.idleWaiters, exited = state.exitWaiters
        state.idleWaiters = []
        state.exitWaiters = []
        runningThread.store(0, ordering: .releasing)
        pthread_mutex_unlock(mutex)
        for w in idle { w.body() }
        for w in exited { w() }
    }
}
