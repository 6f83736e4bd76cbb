//! The scheduling state machine, pure and synchronous (STYLE habits 1–2):
//! it takes stimuli (a graph submitted, a task finished or failed, a worker
//! joined or left, a client released a key) and appends decisions to an
//! outbox (`Action`s: run this task there, free that result, tell clients).
//! No I/O, no clocks, no threads: durations arrive as numbers in events, so
//! every path is tested deterministically (`test_env`) and simulated at scale
//! (`benches/scheduler.rs`). The local executor and, later, the distributed
//! scheduler server drive the same machine.
//!
//! Task states follow Dask's: released → waiting → queued (ready, no worker
//! yet) → processing → memory, or erred; a task is forgotten once nothing
//! wants it and no task that depends on it is left.

mod placement;
mod slab;
mod transitions;
mod validate;

#[cfg(test)]
mod test_env;
#[cfg(test)]
mod tests;

use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use rustc_hash::FxHashMap;

pub use crate::error::SchedulerError;
use crate::error::TaskError;
use crate::graph::task::Annotations;
use crate::key::Key;

use slab::Slab;
pub use slab::SlabId;

/// A task inside the scheduler.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct TaskId(SlabId);

impl TaskId {
    /// The id as one number, for handles outside the scheduler (futures).
    pub fn to_bits(self) -> u64 {
        (u64::from(self.0.generation) << 32) | u64::from(self.0.index)
    }

    pub fn from_bits(bits: u64) -> TaskId {
        TaskId(SlabId { index: bits as u32, generation: (bits >> 32) as u32 })
    }
}

/// A worker: a pool of threads with its own memory (a process, or the whole
/// local thread pool).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct WorkerId(SlabId);

/// The state of a task, as Dask's scheduler names them.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum TaskState {
    /// Known, not needed now, no result anywhere.
    Released,
    /// Needed; some dependencies are not in memory yet.
    Waiting,
    /// Ready to run, waiting for a worker (a free slot or resource).
    Queued,
    /// Assigned to a worker.
    Processing,
    /// Its result lives on at least one worker.
    Memory,
    /// Failed (or a dependency failed).
    Erred,
}

impl TaskState {
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Released => "released",
            TaskState::Waiting => "waiting",
            TaskState::Queued => "queued",
            TaskState::Processing => "processing",
            TaskState::Memory => "memory",
            TaskState::Erred => "erred",
        }
    }

    /// States in which a task still has to run, so its dependencies are needed.
    fn is_active(self) -> bool {
        matches!(self, TaskState::Waiting | TaskState::Queued | TaskState::Processing)
    }

    fn index(self) -> usize {
        self as usize
    }
}

const NSTATES: usize = 6;

/// When ties in priority must be broken: user priority (higher first), then
/// submission order (first come, first served), then the static graph order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Default, Hash)]
pub struct Priority {
    /// Negated user priority, so that smaller always means "run first".
    pub neg_user: i64,
    pub generation: u64,
    pub order: u32,
}

/// A task as submitted to the scheduler: the executor keeps the operation,
/// the scheduler only needs the structure.
#[derive(Clone, Debug)]
pub struct NewTask {
    pub key: Key,
    pub deps: Vec<Key>,
    /// Static order from `graph::order` (lower runs first).
    pub order: u32,
    pub annotations: Option<Arc<Annotations>>,
}

/// What a restarted scheduler knows of its tasks besides their definitions
/// (`Scheduler::restore`).
#[derive(Clone, Debug, Default)]
pub struct Known {
    /// Results workers still hold: the key, the worker, its bytes, and
    /// whether it is pinned there (see `TaskRec::pinned`).
    pub held: Vec<(Key, WorkerId, u64, bool)>,
    /// Keys that had failed, with their errors.
    pub erred: Vec<(Key, TaskError)>,
    /// Client references, counted per key (added after `submit`'s
    /// `wanted`, each entry one reference).
    pub wants: Vec<(Key, u32)>,
}

/// What a worker offers.
#[derive(Clone, Debug)]
pub struct WorkerSpec {
    pub name: String,
    pub nthreads: u32,
    /// Abstract resources, e.g. `("GPU", 1.0)`.
    pub resources: Vec<(String, f64)>,
}

/// Tunables (Dask's defaults unless said otherwise).
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// Root tasks are handed out only while a worker has fewer than
    /// `ceil(nthreads * worker_saturation)` tasks (Dask: 1.1).
    pub worker_saturation: f64,
    /// A task whose worker died this many times is failed as `KilledWorker`
    /// (Dask's `allowed-failures`: 3).
    pub allowed_failures: u32,
    /// Bytes per microsecond assumed for moving data between workers (100 MB/s).
    pub bandwidth_bytes_per_us: f64,
    /// Duration assumed for a task group never seen before, in µs.
    pub default_task_duration_us: f64,
    /// Work (µs of measured task time) a worker thread may have queued when
    /// root tasks are short; 0 keeps Dask's plain saturation limit. A cluster
    /// sets it to cover the round trip worker → scheduler → worker, so a
    /// thread running 5 µs tasks is not idle while the next one travels.
    /// Memory stays bounded: a task this short cannot make much data.
    pub backlog_us: f64,
    /// A small result that took at least this much work to make (its own
    /// run and its inputs', recursively, in µs) gets a copy on a second
    /// worker, so losing one worker does not mean computing it again: the
    /// partial sums of a reduction tree. 0: never (the local runtime).
    pub replicate_after_us: f64,
    /// Only results up to this size are copied.
    pub replicate_max_bytes: u64,
    /// Transitions kept for debugging (0 turns the story off).
    pub story_capacity: usize,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            worker_saturation: 1.1,
            allowed_failures: 3,
            bandwidth_bytes_per_us: 100.0,
            default_task_duration_us: 500.0,
            backlog_us: 0.0,
            replicate_after_us: 0.0,
            replicate_max_bytes: 1 << 20,
            story_capacity: 10_000,
        }
    }
}

/// A decision for the shell to carry out.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Run the task on the worker (its inputs are at `Scheduler::who_has`).
    /// `run` numbers the attempt; the worker's report must carry it back, so
    /// a late report of a cancelled attempt is never taken for a newer one.
    Run { worker: WorkerId, task: TaskId, run: u32, priority: Priority },
    /// Stop a task on a worker: nobody needs it any more (or it moved).
    Cancel { worker: WorkerId, task: TaskId },
    /// Drop a result from a worker's memory.
    Free { worker: WorkerId, task: TaskId },
    /// A wanted task is in memory: its clients can fetch it.
    Done { task: TaskId },
    /// A wanted task failed.
    Erred { task: TaskId, error: Arc<TaskError> },
    /// The task left the scheduler; its id is dead from now on.
    Forget { task: TaskId },
    /// Worker `to` should fetch a copy of the result from `from` and say
    /// so (`add_replica`): it cost much work and little memory.
    Replicate { task: TaskId, from: WorkerId, to: WorkerId },
}

/// One line of the story: which stimulus moved which task where.
#[derive(Clone, Debug, PartialEq)]
pub struct StoryEntry {
    pub stimulus: u64,
    pub key: Key,
    pub from: TaskState,
    pub to: TaskState,
    /// Where the task runs (into processing), where its result is (into
    /// memory), or where it ran (out of processing), when known.
    pub worker: Option<WorkerId>,
}

/// Progress of one task group (`inc`, `add`, …), as Dask's progress page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupStats {
    pub name: Arc<str>,
    /// Tasks ever added to the group.
    pub total: u64,
    /// Tasks that finished (memory or erred), counted once each.
    pub done: u64,
    pub erred: u64,
    /// Tasks in each state now (indexed by `TaskState as usize`).
    pub states: [u64; NSTATES],
    /// Sum of task durations reported, µs.
    pub duration_us: f64,
    pub finished_runs: u64,
}

impl GroupStats {
    pub fn in_state(&self, s: TaskState) -> u64 {
        self.states[s.index()]
    }
}

/// What the scheduler knows of a worker, for dashboards and tests.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerInfo {
    pub id: WorkerId,
    pub name: String,
    pub nthreads: u32,
    pub processing: usize,
    pub held: usize,
    pub held_bytes: u64,
}

#[derive(Debug)]
struct TaskRec {
    key: Key,
    state: TaskState,
    group: u32,
    deps: Vec<TaskId>,
    /// May hold ids of forgotten tasks; `live_dependents` is the true count.
    dependents: Vec<TaskId>,
    live_dependents: u32,
    /// Waiting: dependencies not in memory.
    waiting_on: u32,
    /// Active dependents (waiting/queued/processing) that need this result.
    waiters: u32,
    /// Client references (compute outputs, futures, persisted collections).
    wants: u32,
    priority: Priority,
    retries_left: u32,
    resources: Vec<(u16, f64)>,
    who_has: Vec<WorkerId>,
    processing_on: Option<WorkerId>,
    /// The current attempt (Dask's `run_id`), counted on every assignment.
    run: u32,
    nbytes: u64,
    /// Work (µs) to compute it again from nothing: its run and its inputs'.
    lineage_us: f64,
    /// The result names files only its worker has (a shuffle split's
    /// pieces): it is never copied to another worker.
    pinned: bool,
    /// Times a worker died while running this task.
    suspicious: u32,
    /// Counted in its group's `done` already.
    counted_done: bool,
    error: Option<Arc<TaskError>>,
}

#[derive(Debug)]
struct WorkerRec {
    name: String,
    nthreads: u32,
    /// Capacity and what is free, indexed by resource id.
    resources: Vec<f64>,
    available: Vec<f64>,
    processing: rustc_hash::FxHashSet<TaskId>,
    /// Of those, tasks that wait on others and gave their thread back
    /// (`secede`): they no longer count against its slots.
    seceded: rustc_hash::FxHashSet<TaskId>,
    has_what: rustc_hash::FxHashSet<TaskId>,
    held_bytes: u64,
    /// Position in `Scheduler::free` (workers below their root-task limit), if there.
    free_pos: Option<usize>,
    /// Its memory is short: it gets no new task (Dask's `paused` status).
    paused: bool,
    /// Leaving on purpose (`retire_worker`): paused for good.
    retiring: bool,
}

impl WorkerRec {
    /// Tasks that hold one of its threads now.
    fn active(&self) -> usize {
        self.processing.len() - self.seceded.len()
    }
}

/// A task's resource needs as a queue key: (resource id, amount's bits).
type Needs = Vec<(u16, u64)>;

/// The scheduler state machine.
#[derive(Debug)]
pub struct Scheduler {
    config: SchedulerConfig,
    tasks: Slab<TaskRec>,
    keys: FxHashMap<Key, TaskId>,
    workers: Slab<WorkerRec>,
    /// Workers with a free slot for root tasks, as an index set.
    free: Vec<WorkerId>,
    /// Root tasks a worker thread may hold now: the saturation limit, or
    /// more while the queue's head is a short task (`backlog_us`).
    depth: f64,
    /// Ready tasks without a worker: roots, and tasks waiting for any worker.
    queue: BinaryHeap<std::cmp::Reverse<(Priority, TaskId)>>,
    /// Ready tasks that need resources, dispatched only where they are
    /// free: a queue per set of needs (best priority first), so a dispatch
    /// stops at the head of each queue that does not fit instead of
    /// trying every waiting task (a GPU graph's tasks all need `GPU`).
    restricted: FxHashMap<Needs, BinaryHeap<std::cmp::Reverse<(Priority, TaskId)>>>,
    /// Something changed that may let a restricted task run.
    restricted_dirty: bool,
    resource_names: Vec<String>,
    groups: Vec<GroupStats>,
    group_index: FxHashMap<Arc<str>, u32>,
    last_group: u32,
    generation: u64,
    stimulus: u64,
    transitions: u64,
    story: VecDeque<StoryEntry>,
}

impl Scheduler {
    pub fn new(config: SchedulerConfig) -> Scheduler {
        Scheduler {
            depth: config.worker_saturation,
            config,
            tasks: Slab::default(),
            keys: FxHashMap::default(),
            workers: Slab::default(),
            free: Vec::new(),
            queue: BinaryHeap::new(),
            restricted: FxHashMap::default(),
            restricted_dirty: false,
            resource_names: Vec::new(),
            groups: Vec::new(),
            group_index: FxHashMap::default(),
            last_group: 0,
            generation: 0,
            stimulus: 0,
            transitions: 0,
            story: VecDeque::new(),
        }
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    // ---- queries -------------------------------------------------------

    pub fn lookup(&self, key: &Key) -> Option<TaskId> {
        self.keys.get(key).copied()
    }

    pub fn key(&self, t: TaskId) -> Option<&Key> {
        self.tasks.get(t.0).map(|r| &r.key)
    }

    pub fn state(&self, t: TaskId) -> Option<TaskState> {
        self.tasks.get(t.0).map(|r| r.state)
    }

    pub fn error(&self, t: TaskId) -> Option<Arc<TaskError>> {
        self.tasks.get(t.0).and_then(|r| r.error.clone())
    }

    pub fn priority(&self, t: TaskId) -> Option<Priority> {
        self.tasks.get(t.0).map(|r| r.priority)
    }

    pub fn dependencies(&self, t: TaskId) -> &[TaskId] {
        self.tasks.get(t.0).map_or(&[], |r| &r.deps)
    }

    pub fn who_has(&self, t: TaskId) -> &[WorkerId] {
        self.tasks.get(t.0).map_or(&[], |r| &r.who_has)
    }

    /// Bytes of `t`'s result, as its worker reported them.
    pub fn nbytes(&self, t: TaskId) -> u64 {
        self.tasks.get(t.0).map_or(0, |r| r.nbytes)
    }

    /// Whether `t`'s result is pinned to its worker (see `pin`).
    pub fn pinned(&self, t: TaskId) -> bool {
        self.tasks.get(t.0).is_some_and(|r| r.pinned)
    }

    pub fn processing_on(&self, t: TaskId) -> Option<WorkerId> {
        self.tasks.get(t.0).and_then(|r| r.processing_on)
    }

    /// The attempt a report must name to be accepted, while the task runs.
    pub fn current_run(&self, t: TaskId) -> Option<u32> {
        self.tasks.get(t.0).filter(|r| r.state == TaskState::Processing).map(|r| r.run)
    }

    pub fn wants(&self, t: TaskId) -> u32 {
        self.tasks.get(t.0).map_or(0, |r| r.wants)
    }

    pub fn ntasks(&self) -> usize {
        self.tasks.len()
    }

    pub fn nworkers(&self) -> usize {
        self.workers.len()
    }

    /// Task transitions made so far (for throughput figures).
    pub fn transition_count(&self) -> u64 {
        self.transitions
    }

    pub fn story(&self) -> impl Iterator<Item = &StoryEntry> {
        self.story.iter()
    }

    /// The story of one key: every transition still remembered.
    pub fn story_of(&self, key: &Key) -> Vec<&StoryEntry> {
        self.story.iter().filter(|e| &e.key == key).collect()
    }

    /// Transitions made by stimuli after `stimulus`, oldest first (a
    /// runtime notes why each stimulus came beside them).
    pub fn story_since(&self, stimulus: u64) -> impl Iterator<Item = &StoryEntry> {
        let newer = self.story.iter().rev().take_while(|e| e.stimulus > stimulus).count();
        self.story.range(self.story.len() - newer..)
    }

    /// The number of stimuli handled so far (each public call that changes
    /// the state is one).
    pub fn stimulus(&self) -> u64 {
        self.stimulus
    }

    pub fn groups(&self) -> &[GroupStats] {
        &self.groups
    }

    pub fn workers(&self) -> Vec<WorkerInfo> {
        self.workers
            .iter()
            .map(|(id, w)| WorkerInfo {
                id: WorkerId(id),
                name: w.name.clone(),
                nthreads: w.nthreads,
                processing: w.processing.len(),
                held: w.has_what.len(),
                held_bytes: w.held_bytes,
            })
            .collect()
    }

    /// Counts of tasks per state, over all groups.
    pub fn state_counts(&self) -> [u64; NSTATES] {
        let mut out = [0; NSTATES];
        for g in &self.groups {
            for (o, n) in out.iter_mut().zip(g.states) {
                *o += n;
            }
        }
        out
    }

    // ---- small internals shared by the submodules ----------------------

    fn rec(&self, t: TaskId) -> &TaskRec {
        match self.tasks.get(t.0) {
            Some(r) => r,
            None => panic!("scheduler invariant: task {t:?} is dead"),
        }
    }

    fn rec_mut(&mut self, t: TaskId) -> &mut TaskRec {
        match self.tasks.get_mut(t.0) {
            Some(r) => r,
            None => panic!("scheduler invariant: task {t:?} is dead"),
        }
    }

    fn is_live(&self, t: TaskId) -> bool {
        self.tasks.get(t.0).is_some()
    }

    /// Move a task to a new state, keeping group counts and the story.
    fn set_state(&mut self, t: TaskId, to: TaskState) {
        let stimulus = self.stimulus;
        let keep_story = self.config.story_capacity > 0;
        let r = self.rec_mut(t);
        let from = r.state;
        if from == to {
            return;
        }
        r.state = to;
        let group = r.group as usize;
        let key = keep_story.then(|| r.key.clone());
        let worker = r.processing_on.or_else(|| r.who_has.first().copied());
        let g = &mut self.groups[group];
        g.states[from.index()] -= 1;
        g.states[to.index()] += 1;
        self.transitions += 1;
        if let Some(key) = key {
            if self.story.len() == self.config.story_capacity {
                self.story.pop_front();
            }
            self.story.push_back(StoryEntry { stimulus, key, from, to, worker });
        }
    }

    fn group_of(&mut self, key: &Key) -> u32 {
        let name = key.group();
        // Consecutive tasks mostly share a group: skip the lookup then.
        if let Some(g) = self.groups.get(self.last_group as usize)
            && &*g.name == name
        {
            return self.last_group;
        }
        if let Some(&g) = self.group_index.get(name) {
            self.last_group = g;
            return g;
        }
        let name: Arc<str> = Arc::from(name);
        let g = self.groups.len() as u32;
        self.groups.push(GroupStats { name: name.clone(), ..GroupStats::default() });
        self.group_index.insert(name, g);
        g
    }

    fn resource_id(&mut self, name: &str) -> u16 {
        if let Some(i) = self.resource_names.iter().position(|n| n == name) {
            return i as u16;
        }
        self.resource_names.push(name.to_string());
        for (_, w) in self.workers.iter_mut() {
            w.resources.push(0.0);
            w.available.push(0.0);
        }
        (self.resource_names.len() - 1) as u16
    }
}
