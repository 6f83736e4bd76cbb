//! The execution seam: the one interface through which everything above
//! the engine runs graphs. The local runtime (`crate::local`) is its first
//! implementation; a client of a remote scheduler will be the second, and
//! nothing that builds graphs or shows results needs to know which one it
//! talks to (Dask's `Client`).

pub(crate) mod cancel;
mod future;

pub use cancel::CancelToken;
pub use future::{
    AsCompleted, Future, ReturnWhen, Status, gather, hold_until_settled, wait, wait_ok, wait_until,
};
pub use future::{Cell, FutureHost};

use std::sync::Arc;

use crate::coordination::Coordinator;
use crate::diagnostics::{Event, Snapshot};
use crate::error::{EngineError, TaskError};
use crate::graph::task::{Graph, Task};
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::Op;
use crate::runner::TaskContext;
use crate::value::Value;

/// The client a running task submits tasks through, if whoever runs it
/// gave one (`TaskContext::client`).
pub fn task_client(ctx: &TaskContext<'_>) -> Option<Arc<dyn Client>> {
    ctx.client.and_then(|c| c.downcast_ref::<Arc<dyn Client>>()).cloned()
}

/// The graph that puts `values` on the workers: one literal task each, keyed
/// by the value's content, so scattering equal data twice gives one key.
pub fn scatter_graph(values: Vec<Value>) -> (Graph, Vec<Key>) {
    let mut tasks = Vec::with_capacity(values.len());
    let mut keys = Vec::with_capacity(values.len());
    for v in values {
        let key = Key::new(Tokenizer::new().value(&v).name("scatter").as_str());
        keys.push(key.clone());
        tasks.push(Task::new(key, Op::Literal(v), vec![]));
    }
    (Graph::from_tasks(tasks), keys)
}

/// What a CUDA worker's results hold of its GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceMemory {
    /// Device bytes of results on the GPU.
    pub used: u64,
    /// Past this, the least recently used go to host memory.
    pub limit: u64,
    /// Bytes of GPU results now in host memory or on disk.
    pub spilled: u64,
    /// Bytes of GPU blocks that came from other CUDA workers device to
    /// device (CUDA IPC) rather than through the host.
    #[serde(default)]
    pub transferred: u64,
}

/// What `Client::run_everywhere` gave: per worker, its address and result.
pub type RunResults = Vec<(String, Result<Value, TaskError>)>;

/// One worker as a client sees it (`c.workers()`, the dashboard).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkerInfo {
    pub name: String,
    pub address: String,
    pub threads: usize,
    /// Tasks running (or assigned) now.
    pub running: usize,
    /// Results held.
    pub in_memory: usize,
    /// Bytes of results held.
    pub memory: u64,
    /// `None`: no limit is enforced.
    pub memory_limit: Option<u64>,
    /// Bytes spilled to disk.
    pub spilled: u64,
    /// The GPU's name and memory, or "no GPU".
    pub gpu: String,
    /// A CUDA worker's results in device memory (`None`: not a CUDA worker).
    #[serde(default)]
    pub device: Option<DeviceMemory>,
    /// Abstract resources offered (`GPU: 1`).
    pub resources: Vec<(String, f64)>,
    /// The process that runs its tasks.
    pub pid: u32,
}

impl WorkerInfo {
    /// Its GPU in one line, with what a CUDA worker's results hold of it:
    /// `GPU 0: NAME, 80 GiB · 1.2 GiB / 64 GiB, 3 GiB moved off`.
    pub fn gpu_line(&self) -> String {
        match &self.device {
            None => self.gpu.clone(),
            Some(d) => format!(
                "{} · {} / {}, {} moved off",
                self.gpu,
                crate::memory::fmt_bytes(d.used),
                crate::memory::fmt_bytes(d.limit),
                crate::memory::fmt_bytes(d.spilled)
            ),
        }
    }
}

/// One step in a key's story (`story()`, beyond Dask: why a task failed,
/// where it ran, which worker died under it).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoryRow {
    /// Seconds since the scheduler started.
    pub time: f64,
    pub key: Key,
    pub from: String,
    pub to: String,
    /// Where it ran, runs or is held, when the step has a worker.
    pub worker: Option<String>,
    /// What the scheduler was handling: "finished on w1", "worker w0
    /// left: connection lost", "submitted by a client".
    pub cause: String,
}

/// What runs graphs: submit, gather, cancel, scatter, persist, the workers,
/// the diagnostics stream and close. Every method may be called from any
/// thread.
///
/// Every client also answers coordination requests (`Variable`, `Queue`,
/// `Lock`…), held where its graphs are scheduled.
pub trait Client: Coordinator + Send + Sync {
    /// Optimize `graph` for `outputs` and start computing it; one future per
    /// output, in order. Keys the graph uses but does not define must be
    /// held already (futures, persisted results).
    fn submit(&self, graph: Graph, outputs: &[Key]) -> Result<Vec<Future>, EngineError>;

    /// Submit, wait for every output and return their values.
    fn compute(
        &self,
        graph: Graph,
        outputs: &[Key],
        cancel: &CancelToken,
    ) -> Result<Vec<Value>, EngineError> {
        let futures = self.submit(graph, outputs)?;
        self.gather(&futures, cancel)
    }

    /// The results of `futures`, in order; the first error wins.
    fn gather(&self, futures: &[Future], cancel: &CancelToken) -> Result<Vec<Value>, EngineError> {
        gather(futures, cancel)
    }

    /// Stop caring about `futures`: they report `cancelled`, and their tasks
    /// stop where nothing else needs them.
    fn cancel(&self, futures: &[Future]) {
        futures.iter().for_each(Future::cancel);
    }

    /// Put `values` on the workers; one future per value, finished when this
    /// returns (as Dask's `scatter`). Keys come from the values' content, so
    /// scattering equal data twice gives the same key.
    fn scatter(&self, values: Vec<Value>, cancel: &CancelToken) -> Result<Vec<Future>, EngineError> {
        let (graph, keys) = scatter_graph(values);
        let futures = self.submit(graph, &keys)?;
        // As Dask's: the data is on the workers (or the failure known) on return.
        self.gather(&futures, cancel)?;
        Ok(futures)
    }

    /// Compute `outputs` and keep them in the workers' memory for as long as
    /// the returned futures live. Waits until they are there (as Dask's local
    /// schedulers do), so a failure shows here, not at a later compute.
    fn persist(
        &self,
        graph: Graph,
        outputs: &[Key],
        cancel: &CancelToken,
    ) -> Result<Vec<Future>, EngineError> {
        let futures = self.submit(graph, outputs)?;
        future::wait_ok(&futures, cancel)?;
        Ok(futures)
    }

    /// The workers now.
    fn workers(&self) -> Vec<WorkerInfo>;

    /// Run `op` (a call with literal arguments) once on every worker now,
    /// beside its tasks (Dask's `Client.run`): each worker's address and
    /// what the call gave there.
    fn run_everywhere(&self, op: Op, cancel: &CancelToken) -> Result<RunResults, EngineError>;

    /// Where results are held (Dask's `who_has`): each of `keys` (`None`:
    /// every result this client can see) that is in memory, with the
    /// addresses of the workers that hold it.
    fn who_has(&self, keys: Option<&[Key]>) -> Vec<(Key, Vec<String>)>;

    /// Per-group progress and memory, now.
    fn snapshot(&self) -> Snapshot;

    /// What the scheduler remembers of `keys`: their transitions, where
    /// they ran and why each happened, oldest first.
    fn story(&self, keys: &[Key]) -> Result<Vec<StoryRow>, EngineError>;

    /// Events as they happen (bounded, lossy: see `diagnostics`).
    fn subscribe(&self, capacity: usize) -> crossbeam_channel::Receiver<Event>;

    /// One line for `print(client())`.
    fn describe(&self) -> String;

    /// Stop: pending futures fail, workers go. Later calls report `Shutdown`.
    fn close(&self);
}
