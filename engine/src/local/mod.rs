//! The embedded default executor: the scheduler state machine behind one
//! mutex, driving a pool of threads in this process. Results stay in memory
//! as shared `Value`s (zero-copy: dependents get `Arc` clones). A worker
//! thread reports a finished task and takes its next one under a single
//! lock acquisition. `sync` mode runs the very same loop on the calling
//! thread (STYLE habit 3): no pool, tasks run while a client waits.

use std::any::Any;
use std::collections::BinaryHeap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

use crate::client::{CancelToken, Cell, Client, Future, FutureHost, Status};
use crate::coordination::{Coordinator, LocalBoard};
use crate::diagnostics::{Event, Hub, Snapshot};
use crate::error::panic_message;
use crate::error::{EngineError, TaskError};
use crate::exec::execute_timed;
use crate::graph;
use crate::graph::task::Graph;
use crate::key::Key;
use crate::ops::Op;
use crate::runner::{Seat, TaskContext, UdfRunner};
use crate::scheduler::{Action, NewTask, Priority, Scheduler, SchedulerConfig, TaskId, WorkerId, WorkerSpec};
use crate::value::Value;

/// How a local runtime runs tasks.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalConfig {
    /// Worker threads (default: one per core).
    pub threads: usize,
    /// Run everything on the calling thread (`scheduler: "sync"`).
    pub sync: bool,
    /// Fuse linear chains before running (`graph::fuse`).
    pub fuse: bool,
    /// Abstract resources the local worker offers (`GPU` where one is present).
    pub resources: Vec<(String, f64)>,
}

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            sync: false,
            fuse: true,
            resources: Vec::new(),
        }
    }
}

/// The local runtime. Dropping it stops its threads; futures that outlive
/// it report `Shutdown`.
pub struct Runtime {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

pub(crate) struct Shared {
    state: Mutex<State>,
    work: Condvar,
    udfs: Arc<dyn UdfRunner>,
    config: LocalConfig,
    started: Instant,
    /// Itself, for its tasks' client (`worker_client`) and lent threads.
    me: Weak<Shared>,
    /// `Variable`, `Queue`, `Lock`… of this runtime's session and tasks.
    board: Arc<dyn Coordinator>,
}

/// A task's operation with leases on the shuffle folders it names, so a
/// folder stays while a task that names it is defined or running, and
/// goes (with the pieces a failed graph left) when none is.
struct Held {
    op: Op,
    /// How long one run may take (`annotate(#{timeout})`).
    timeout: Option<Duration>,
    _leases: Vec<crate::pieces::Lease>,
}

impl Held {
    fn new(op: Op, timeout: Option<Duration>) -> Held {
        let leases = op.shuffle_pieces().into_iter().map(crate::pieces::Lease::new).collect();
        Held { op, timeout, _leases: leases }
    }
}

struct Spec {
    op: Arc<Held>,
    /// The task's dependencies in `Arg::Dep` order.
    inputs: Vec<TaskId>,
}

struct Job {
    priority: Priority,
    task: TaskId,
    run: u32,
    key: Key,
    op: Arc<Held>,
    inputs: Vec<Value>,
    cancel: Arc<AtomicBool>,
}

impl PartialEq for Job {
    fn eq(&self, other: &Self) -> bool {
        (self.priority, self.task) == (other.priority, other.task)
    }
}
impl Eq for Job {}
impl PartialOrd for Job {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Job {
    /// The heap pops the *smallest* priority first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.priority, other.task).cmp(&(self.priority, self.task))
    }
}

struct State {
    core: Scheduler,
    worker: WorkerId,
    specs: FxHashMap<TaskId, Spec>,
    store: FxHashMap<TaskId, (Value, u64)>,
    jobs: BinaryHeap<Job>,
    running: FxHashMap<TaskId, Arc<AtomicBool>>,
    cells: FxHashMap<TaskId, Vec<Weak<Cell>>>,
    memory_bytes: u64,
    busy: usize,
    /// Threads asleep on `work`: wake-ups are syscalls, so only for them.
    idle: usize,
    /// Worker threads running, and how many should: one more for each task
    /// that lent its thread while it waits (`seat`).
    threads_alive: usize,
    threads_wanted: usize,
    /// Running tasks that lent their thread.
    seceded: FxHashSet<TaskId>,
    hub: Hub,
    shutdown: bool,
    /// Actions the scheduler decided and `apply` has not carried out yet.
    out: Vec<Action>,
    /// The GPUs offered as the `GPU` resource (0 until a graph needs one).
    gpus: usize,
}

impl State {
    /// What the worker offers: the configured resources and its GPUs.
    fn resources(&self, config: &LocalConfig) -> Vec<(String, f64)> {
        let mut r = config.resources.clone();
        if self.gpus > 0 {
            r.push((crate::array::gpu::resource::GPU.into(), self.gpus as f64));
        }
        r
    }
}

/// The `GPU` a task on GPU blocks takes: a whole one, as Dask's
/// `resources={"GPU": 1}`, so as many at once as there are devices. A task
/// only queues kernels (the device runs them later), so the device stays
/// busy; on an H100, a sum of 64 tiny blocks took 1.9 ms this way against
/// 2.3, 2.4 and 2.8 ms with two, four and a hundred at a time (threads
/// queuing on one stream get in each other's way), and G1–G4 did not
/// change.
const GPU_TASK_SHARE: f64 = 1.0;

/// The one worker's address, as `workers()` and `who_has` give it.
pub(crate) const LOCAL_ADDRESS: &str = "inproc://local";

impl Runtime {
    pub fn new(config: LocalConfig, udfs: Arc<dyn UdfRunner>) -> Runtime {
        let threads = config.threads.max(1);
        let mut core = Scheduler::new(SchedulerConfig {
            // Keep one task in hand per thread so threads never wait on the lock holder.
            worker_saturation: 2.0,
            story_capacity: 0,
            ..SchedulerConfig::default()
        });
        let mut out = Vec::new();
        let spec = WorkerSpec {
            name: "local".into(),
            nthreads: threads as u32,
            resources: config.resources.clone(),
        };
        let worker = core.add_worker(spec, &mut out);
        let state = State {
            core,
            worker,
            specs: FxHashMap::default(),
            store: FxHashMap::default(),
            jobs: BinaryHeap::new(),
            running: FxHashMap::default(),
            cells: FxHashMap::default(),
            memory_bytes: 0,
            busy: 0,
            idle: 0,
            threads_alive: if config.sync { 0 } else { threads },
            threads_wanted: if config.sync { 0 } else { threads },
            seceded: FxHashSet::default(),
            hub: Hub::default(),
            shutdown: false,
            out,
            gpus: 0,
        };
        let shared = Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            state: Mutex::new(state),
            work: Condvar::new(),
            udfs,
            config: LocalConfig { threads, ..config },
            started: Instant::now(),
            board: Arc::new(LocalBoard::new()),
        });
        let mut handles = Vec::new();
        if !shared.config.sync {
            for i in 0..threads {
                let s = shared.clone();
                let h = std::thread::Builder::new()
                    .name(format!("brisk-worker-{i}"))
                    .spawn(move || s.worker_loop(i))
                    .ok();
                handles.extend(h);
            }
        }
        Runtime { shared, threads: handles }
    }

    pub fn config(&self) -> &LocalConfig {
        &self.shared.config
    }

    pub fn validate(&self) -> Result<(), String> {
        self.shared.lock().core.validate()
    }
}

impl Drop for Runtime {
    /// Stop every thread; whatever is still pending fails, so no waiter hangs.
    fn drop(&mut self) {
        self.shared.break_down("the runtime shut down");
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn submit(self: &Arc<Self>, graph: Graph, outputs: &[Key]) -> Result<Vec<Future>, EngineError> {
        let (optimized, order) = {
            let st = self.lock();
            graph::optimize(graph, outputs, self.config.fuse, |k| st.core.lookup(k).is_some())
        };
        let mut tasks = optimized.into_tasks();
        self.take_gpus(&mut tasks);
        self.check_resources(&tasks)?;
        let new: Vec<NewTask> = tasks
            .iter()
            .zip(order)
            .map(|(t, o)| NewTask {
                key: t.key.clone(),
                deps: t.deps.clone(),
                order: o,
                annotations: t.annotations.clone(),
            })
            .collect();
        let mut st = self.lock();
        if st.shutdown {
            return Err(EngineError::Shutdown);
        }
        let st = &mut *st;
        if let Err(e) = st.core.submit(new, outputs, &mut st.out) {
            return Err(EngineError::Scheduler(e));
        }
        for t in tasks {
            let Some(id) = st.core.lookup(&t.key) else { continue };
            if st.specs.contains_key(&id) {
                continue;
            }
            // The scheduler checked every dependency, so all are known; a
            // task left without a definition fails when run, it cannot hang.
            let inputs: Option<Vec<TaskId>> = t.deps.iter().map(|d| st.core.lookup(d)).collect();
            if let Some(inputs) = inputs {
                let timeout = t.annotations.as_ref().and_then(|a| a.timeout).map(Duration::from_secs_f64);
                st.specs.insert(id, Spec { op: Arc::new(Held::new(t.op, timeout)), inputs });
            }
        }
        // The scheduler checked the outputs too; nothing below can fail, so
        // no reference it counted for them can leak.
        let mut futures = Vec::with_capacity(outputs.len());
        let host: Weak<dyn FutureHost> = Arc::downgrade(self) as Weak<dyn FutureHost>;
        for (k, task) in outputs.iter().filter_map(|k| st.core.lookup(k).map(|t| (k, t))) {
            let (future, cell) = Future::pending(k.clone(), task.to_bits(), host.clone());
            st.cells.entry(task).or_default().push(Arc::downgrade(&cell));
            futures.push(future);
        }
        self.apply(st);
        Ok(futures)
    }

    /// Tasks on GPU blocks take a share of the `GPU` resource, of which the
    /// worker offers one per device from the first graph that has them, or
    /// that asks for it (`run_command(..., #{resources: #{GPU: 1}})`: the
    /// devices are counted by NVML, no CUDA context is made for it).
    /// Without a usable GPU nothing changes: such tasks fail when run, with
    /// the reason there is no GPU.
    fn take_gpus(&self, tasks: &mut [crate::graph::task::Task]) {
        use crate::array::gpu::resource;
        let asks = tasks.iter().any(|t| {
            t.annotations.as_ref().is_some_and(|a| a.resources.iter().any(|(n, _)| n == resource::GPU))
        });
        if asks && self.lock().gpus == 0 {
            let count = match crate::gpu::probe() {
                crate::gpu::Gpus::Devices(d) => d.len(),
                crate::gpu::Gpus::None(_) => 0,
            };
            let mut st = self.lock();
            if count > 0 && st.gpus == 0 {
                let st = &mut *st;
                st.gpus = count;
                st.core.set_resource(st.worker, resource::GPU, count as f64, &mut st.out);
            }
        }
        let runtime = match brisk_gpu::opened() {
            Some(rt) => rt,
            None if resource::makes_gpu_blocks(tasks) => match brisk_gpu::runtime() {
                Ok(rt) => rt,
                Err(_) => return,
            },
            None => return,
        };
        let devices = runtime.devices().len();
        if devices == 0 {
            return;
        }
        let mut st = self.lock();
        let on_gpu = |k: &Key| {
            st.core
                .lookup(k)
                .and_then(|id| st.store.get(&id))
                .is_some_and(|(v, _)| matches!(v, Value::Gpu(_)))
        };
        if resource::take_gpu(tasks, true, on_gpu, GPU_TASK_SHARE) > 0 && st.gpus == 0 {
            let st = &mut *st;
            st.gpus = devices;
            st.core.set_resource(st.worker, resource::GPU, devices as f64, &mut st.out);
        }
    }

    /// A task that needs a resource the local worker lacks would wait forever.
    fn check_resources(&self, tasks: &[crate::graph::task::Task]) -> Result<(), EngineError> {
        let offered = self.lock().resources(&self.config);
        for t in tasks {
            let Some(a) = &t.annotations else { continue };
            for (name, amount) in &a.resources {
                let have: f64 =
                    // A fold from 0.0: an empty float sum is -0.0, which prints as "-0".
                    offered.iter().filter(|(n, _)| n == name).fold(0.0, |s, (_, x)| s + x);
                if have < *amount {
                    return Err(EngineError::MissingResource {
                        task: t.key.clone(),
                        name: name.clone(),
                        need: *amount,
                        have,
                    });
                }
            }
        }
        Ok(())
    }

    /// Drop one want (a future went away).
    fn release_task(&self, task: TaskId, cell: &Arc<Cell>) {
        let mut st = self.lock();
        if st.shutdown {
            return;
        }
        let st = &mut *st;
        if let Some(list) = st.cells.get_mut(&task) {
            list.retain(|w| w.upgrade().is_some_and(|c| !Arc::ptr_eq(&c, cell)));
        }
        st.core.release(task, &mut st.out);
        self.apply(st);
    }

    /// Carry out the scheduler's decisions (lock held).
    fn apply(&self, st: &mut State) {
        while !st.out.is_empty() {
            let actions = std::mem::take(&mut st.out);
            let mut failures: Vec<(TaskId, u32, TaskError)> = Vec::new();
            for a in actions {
                match a {
                    Action::Run { task, run, priority, .. } => {
                        let Some(spec) = st.specs.get(&task) else {
                            failures.push((
                                task,
                                run,
                                TaskError::internal("no definition for a task to run"),
                            ));
                            continue;
                        };
                        let inputs: Option<Vec<Value>> =
                            spec.inputs.iter().map(|i| st.store.get(i).map(|(v, _)| v.clone())).collect();
                        let Some(inputs) = inputs else {
                            failures.push((
                                task,
                                run,
                                TaskError::internal("an input of a task is not in memory"),
                            ));
                            continue;
                        };
                        let cancel = Arc::new(AtomicBool::new(false));
                        st.running.insert(task, cancel.clone());
                        let key = st.core.key(task).cloned().unwrap_or_else(|| Key::new("?"));
                        st.jobs.push(Job { priority, task, run, key, op: spec.op.clone(), inputs, cancel });
                        if st.idle > 0 {
                            self.work.notify_one();
                        }
                    }
                    Action::Cancel { task, .. } => {
                        if let Some(flag) = st.running.remove(&task) {
                            flag.store(true, Ordering::SeqCst);
                        }
                    }
                    Action::Free { task, .. } => {
                        if let Some((_, n)) = st.store.remove(&task) {
                            st.memory_bytes = st.memory_bytes.saturating_sub(n);
                        }
                    }
                    Action::Done { task } => {
                        let value = st.store.get(&task).map(|(v, _)| v.clone());
                        for c in st.cells.remove(&task).into_iter().flatten().filter_map(|w| w.upgrade()) {
                            match &value {
                                Some(v) => c.finish(v.clone()),
                                None => c.fail(TaskError::internal("result missing from memory")),
                            }
                        }
                    }
                    Action::Erred { task, error } => {
                        for c in st.cells.remove(&task).into_iter().flatten().filter_map(|w| w.upgrade()) {
                            c.fail((*error).clone());
                        }
                        if !st.hub.is_empty()
                            && let Some(key) = st.core.key(task).cloned()
                        {
                            st.hub.publish(Event::TaskErred { key, error: (*error).clone() });
                        }
                    }
                    Action::Forget { task } => {
                        st.specs.remove(&task);
                        st.cells.remove(&task);
                    }
                    // One worker: there is nowhere to copy to (and it is off).
                    Action::Replicate { .. } => {}
                }
            }
            let w = st.worker;
            for (task, run, e) in failures {
                st.core.task_failed(w, task, run, e, &mut st.out);
            }
        }
    }

    /// A worker thread. A panic outside the task itself (a bug in the
    /// runtime) must not leave waiters hanging: the runtime is shut down and
    /// every pending result fails with the reason.
    fn worker_loop(self: Arc<Self>, index: usize) {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| self.work_loop(index))) {
            self.break_down(&format!("a worker thread failed: {}", panic_message(&*panic)));
        }
    }

    fn work_loop(&self, index: usize) {
        let mut st = self.lock();
        loop {
            if st.shutdown {
                return;
            }
            if st.threads_alive > st.threads_wanted {
                st.threads_alive -= 1;
                return;
            }
            let Some(job) = pop_job(&mut st) else {
                st.idle += 1;
                st = self.work.wait(st).unwrap_or_else(|e| e.into_inner());
                st.idle -= 1;
                continue;
            };
            st.busy += 1;
            drop(st);
            let start = self.started.elapsed();
            let result = self.run_job(&job, None);
            let stop = self.started.elapsed();
            st = self.lock();
            st.busy -= 1;
            self.seat_ended(&mut st, job.task, false);
            self.finish(&mut st, job, result, index, start, stop);
        }
    }

    /// Stop the runtime (when it is dropped, or after an internal failure):
    /// no new work, every pending future fails with `reason`, every thread
    /// wakes up and exits.
    fn break_down(&self, reason: &str) {
        let cells: Vec<Arc<Cell>> = {
            let mut st = self.lock();
            st.shutdown = true;
            for flag in st.running.values() {
                flag.store(true, Ordering::SeqCst);
            }
            st.cells.drain().flat_map(|(_, v)| v).filter_map(|w| w.upgrade()).collect()
        };
        self.work.notify_all();
        for c in cells {
            c.fail(TaskError::internal(reason));
        }
    }

    fn run_job(&self, job: &Job, interrupt: Option<&CancelToken>) -> Result<Value, TaskError> {
        let output = |line: &str| {
            let mut st = self.lock();
            if !st.hub.is_empty() {
                st.hub.publish(Event::Output { key: job.key.clone(), line: line.into() });
            }
        };
        // Tasks submit through this runtime; a thread lent while waiting
        // only where there are threads (not inline, in sync mode).
        let me = self.me.upgrade();
        let client: Option<Arc<dyn Client>> = me.clone().map(|s| s as Arc<dyn Client>);
        // In sync mode a waiting task runs what it waits on inline: its
        // seat frees its slot, and no thread is started.
        let seat: Option<Arc<dyn Seat>> = me.map(|s| s as Arc<dyn Seat>);
        let ctx = TaskContext {
            key: &job.key,
            cancelled: &job.cancel,
            interrupt: interrupt.map(CancelToken::flag),
            device: None,
            workdir: None,
            output: Some(&output),
            coordinator: Some(&self.board),
            client: client.as_ref().map(|c| c as &(dyn Any + Send + Sync)),
            seat: seat.as_ref(),
        };
        execute_timed(&job.op.op, &job.inputs, &*self.udfs, &ctx, job.op.timeout)
    }

    fn finish(
        &self,
        st: &mut State,
        job: Job,
        result: Result<Value, TaskError>,
        thread: usize,
        start: Duration,
        stop: Duration,
    ) {
        if st.running.get(&job.task).is_some_and(|f| Arc::ptr_eq(f, &job.cancel)) {
            st.running.remove(&job.task);
        }
        let w = st.worker;
        let ok = result.is_ok();
        if ok && st.core.current_run(job.task) != Some(job.run) {
            // A cancelled attempt finished late: its result belongs to nobody.
            return;
        }
        match result {
            Ok(v) => {
                let n = v.nbytes();
                if let Some((_, old)) = st.store.insert(job.task, (v, n)) {
                    st.memory_bytes = st.memory_bytes.saturating_sub(old);
                }
                st.memory_bytes += n;
                let micros = (stop - start).as_secs_f64() * 1e6;
                st.core.task_finished(w, job.task, job.run, n, micros, &mut st.out);
            }
            Err(e) => st.core.task_failed(w, job.task, job.run, e, &mut st.out),
        }
        self.apply(st);
        if !st.hub.is_empty() {
            let ev = Event::TaskRan {
                key: job.key,
                thread,
                start_us: start.as_micros() as u64,
                stop_us: stop.as_micros() as u64,
                ok,
            };
            st.hub.publish(ev);
            let bytes = st.memory_bytes;
            st.hub.publish(Event::Memory { bytes });
        }
    }

    /// Sync mode: run the next job on this thread. An interrupt of the
    /// waiting client stops the job and puts it back: the task did not fail.
    fn run_one_inline(&self, interrupt: &CancelToken) -> Result<(), EngineError> {
        let mut st = self.lock();
        if st.shutdown {
            return Err(EngineError::Shutdown);
        }
        let Some(job) = pop_job(&mut st) else {
            return Err(EngineError::Internal("nothing left to run, but results are still pending".into()));
        };
        st.busy += 1;
        drop(st);
        let start = self.started.elapsed();
        let result = self.run_job(&job, Some(interrupt));
        let stop = self.started.elapsed();
        let finished = catch_unwind(AssertUnwindSafe(|| {
            let mut st = self.lock();
            st.busy -= 1;
            let interrupted = interrupt.is_cancelled() && !job.cancel.load(Ordering::Relaxed);
            // The task lent its slot while it waited: it runs again holding one.
            let requeued =
                interrupted && matches!(&result, Err(e) if e.kind == crate::error::TaskErrorKind::Cancelled);
            self.seat_ended(&mut st, job.task, requeued);
            if requeued {
                st.jobs.push(job);
                return Err(EngineError::Cancelled);
            }
            self.finish(&mut st, job, result, 0, start, stop);
            Ok(())
        }));
        finished.unwrap_or_else(|panic| {
            let reason = format!("the scheduler failed: {}", panic_message(&*panic));
            self.break_down(&reason);
            Err(EngineError::Internal(reason))
        })
    }

    fn wait_cells(&self, cells: &[Arc<Cell>], cancel: &CancelToken) -> Result<(), EngineError> {
        for cell in cells {
            loop {
                if cell.status() != Status::Pending {
                    break;
                }
                if cancel.is_cancelled() {
                    return Err(EngineError::Cancelled);
                }
                if self.config.sync {
                    self.run_one_inline(cancel)?;
                } else if cell.wait_timeout(Duration::from_millis(50)) != Status::Pending {
                    break;
                }
            }
        }
        Ok(())
    }

    fn snapshot(&self) -> Snapshot {
        let st = self.lock();
        Snapshot {
            groups: st.core.groups().iter().map(Into::into).collect(),
            memory_bytes: st.memory_bytes,
            threads: self.config.threads,
            busy_threads: st.busy,
            transitions: st.core.transition_count(),
            tasks_held: st.core.ntasks(),
        }
    }
}

impl FutureHost for Shared {
    fn release(&self, id: u64, _key: &Key, cell: &Arc<Cell>) {
        self.release_task(TaskId::from_bits(id), cell);
    }

    fn wait_for(&self, cells: &[Arc<Cell>], cancel: &CancelToken) -> Result<(), EngineError> {
        self.wait_cells(cells, cancel)
    }

    fn run_inline(&self, cancel: &CancelToken) -> Option<Result<(), EngineError>> {
        self.config.sync.then(|| self.run_one_inline(cancel))
    }
}

/// The next job worth running: jobs whose attempt was cancelled are dropped.
fn pop_job(st: &mut State) -> Option<Job> {
    loop {
        let job = st.jobs.pop()?;
        if !job.cancel.load(Ordering::Relaxed) {
            return Some(job);
        }
    }
}

mod client;
mod seat;
#[cfg(test)]
mod tests;
