//! A worker process: it registers with the scheduler, runs the tasks it is
//! given on a pool of threads, holds their results, serves them to peers
//! and clients on its data port, and fetches the inputs it lacks straight
//! from the workers that hold them (never through the scheduler).
//!
//! I/O runs on a small tokio runtime; tasks run on plain threads (they are
//! CPU-bound and may block), sharing one lock with the I/O side. Reports to
//! the scheduler queue on a channel whose writer sends everything queued
//! as one frame, so a burst of finished tasks is one message.

use std::any::Any;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use brisk_engine::array::gpu::raw::USER_KERNEL_FAILED;
use brisk_engine::error::TaskError;
use brisk_engine::exec::execute_timed;
use brisk_engine::key::Key;
use brisk_engine::ops::Op;
use brisk_engine::pieces::Pieces;
use brisk_engine::runner::shipped::{self, CodeTable};
use brisk_engine::runner::{Seat, TaskContext, UdfRunner};
use brisk_engine::value::Value;
use rustc_hash::{FxHashMap, FxHashSet};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::comm::{self, CommError, Conn, PeerPool};
use crate::protocol::{
    Blob, DepAt, HeldResult, Home, LEND_AT_ONCE, LEND_FROM, PeerMsg, PeerReply, Role, ToWorker, WorkerMsg,
};
use crate::security::Security;
use crate::spill::{self, Lookup, SpillBuffer};
use crate::task_client::TaskClient;
use crate::{cuda, log};
use brisk_engine::array::gpu::place;
use brisk_engine::client::Client;
use brisk_engine::coordination::Coordinator;

/// How a worker runs (`brisk worker` flags).
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    pub scheduler: String,
    pub nthreads: usize,
    pub memory_limit: Option<u64>,
    pub name: Option<String>,
    pub resources: Vec<(String, f64)>,
    pub security: Security,
    /// Where to serve data; `None`: the address this machine reaches the
    /// scheduler from.
    pub host: Option<String>,
    /// Where this worker keeps shuffle pieces (in a folder of its own
    /// under it, removed when it ends); `None`: the temporary directory.
    pub local_directory: Option<PathBuf>,
    pub heartbeat: Duration,
    /// How often process memory is measured against the limit.
    pub memory_monitor: Duration,
    /// Where this worker kills itself, for the reliability tests.
    pub kill_at: Option<KillAt>,
    pub thresholds: MemoryThresholds,
    /// How long to keep trying to reach the scheduler, first and after
    /// losing one that keeps a journal (`None`: one try at first, 60 s later).
    pub death_timeout: Option<Duration>,
    /// Leave cleanly after this long (handing results over), as Dask's
    /// `--lifetime`: a batch job's worker goes before its walltime kills it.
    pub lifetime: Option<Duration>,
    /// The lifetime moves by up to this much either way, so the workers of
    /// jobs started together do not all leave at once.
    pub lifetime_stagger: Duration,
    /// A CUDA worker (`brisk cuda-worker`, `local_cuda_cluster`): it must
    /// see a GPU, and keeps its GPU results on the device up to this limit,
    /// the least recently used beyond it moved to host memory.
    pub device_memory_limit: Option<DeviceLimit>,
}

/// How much device memory a CUDA worker's results may hold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DeviceLimit {
    /// A fraction of the device's memory, in (0, 1] (dask-cuda's default is 0.8).
    Fraction(f64),
    Bytes(u64),
}

impl DeviceLimit {
    /// `0.8`, `"10GB"`, `"16GiB"`, or a number of bytes.
    pub fn parse(text: &str) -> Result<DeviceLimit, String> {
        let t = text.trim();
        if let Ok(x) = t.parse::<f64>()
            && x <= 1.0
        {
            if x > 0.0 {
                return Ok(DeviceLimit::Fraction(x));
            }
            return Err(format!("device memory limit {text:?}: a fraction must be in (0, 1]"));
        }
        match brisk_engine::memory::parse_size(t) {
            Ok(0) | Err(_) => Err(format!(
                "device memory limit {text:?} is neither a fraction of the device in (0, 1] nor a size such as \"16GiB\""
            )),
            Ok(b) => Ok(DeviceLimit::Bytes(b)),
        }
    }

    /// The limit in bytes on a device of `total` bytes (at most the device).
    pub fn bytes(self, total: u64) -> u64 {
        match self {
            DeviceLimit::Fraction(f) => (total as f64 * f) as u64,
            DeviceLimit::Bytes(b) => b.min(total),
        }
    }

    /// As a `brisk worker` flag's value.
    pub fn to_arg(self) -> String {
        match self {
            DeviceLimit::Fraction(f) => f.to_string(),
            DeviceLimit::Bytes(b) => b.to_string(),
        }
    }
}

/// A point where a worker started with `--kill-at` dies at once (as under
/// SIGKILL: no goodbye, no cleanup), the first time it gets there. The
/// reliability tests use it to kill a worker in one chosen phase of a
/// shuffle, which a signal sent from outside cannot time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillAt {
    /// A split task wrote its pieces but its result is not reported yet.
    Split,
    /// A peer asked for pieces this worker holds (the transfer phase).
    ServePieces,
    /// A collect task fetched pieces from a peer and has not finished.
    Collect,
}

impl std::str::FromStr for KillAt {
    type Err = String;
    fn from_str(s: &str) -> Result<KillAt, String> {
        match s {
            "split" => Ok(KillAt::Split),
            "serve-pieces" => Ok(KillAt::ServePieces),
            "collect" => Ok(KillAt::Collect),
            _ => Err(format!("{s:?} is not one of split, serve-pieces, collect")),
        }
    }
}

/// Die now if `at` is where this worker was told to.
fn die_if(kill_at: Option<KillAt>, at: KillAt) {
    if kill_at == Some(at) {
        log::warn("worker", &format!("killing this worker at {at:?}, as --kill-at asked"));
        std::process::abort();
    }
}

thread_local! {
    /// The peer a shuffle collect on this thread could not fetch pieces
    /// from: the task's failure is then lost data, not the user's error.
    static PIECES_LOST: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// The fractions of a worker's memory limit it acts at (Dask's
/// `distributed.worker.memory.*`): results beyond `target` go to disk,
/// least recently used first; past `spill` of process memory (what the
/// allocator holds beyond the results counted) spilling is forced; past
/// `pause` the worker starts no task until memory falls; past `terminate`
/// its nanny restarts it. `None` turns one off, as Dask's `False`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryThresholds {
    pub target: Option<f64>,
    pub spill: Option<f64>,
    pub pause: Option<f64>,
    pub terminate: Option<f64>,
}

impl Default for MemoryThresholds {
    fn default() -> Self {
        MemoryThresholds { target: Some(0.6), spill: Some(0.7), pause: Some(0.8), terminate: Some(0.95) }
    }
}

impl MemoryThresholds {
    /// The `brisk worker` flags that give these thresholds.
    pub fn to_args(&self) -> Vec<String> {
        let f = |x: Option<f64>| x.map_or_else(|| "off".to_string(), |x| x.to_string());
        vec![
            "--memory-target".into(),
            f(self.target),
            "--memory-spill".into(),
            f(self.spill),
            "--memory-pause".into(),
            f(self.pause),
            "--memory-terminate".into(),
            f(self.terminate),
        ]
    }
}

/// A threshold as written: a fraction of the limit in (0, 1], or `off`
/// (`false`, `none`) for none.
pub fn parse_threshold(text: &str) -> Result<Option<f64>, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "off" | "false" | "none" => Ok(None),
        t => match t.parse::<f64>() {
            Ok(x) if x > 0.0 && x <= 1.0 => Ok(Some(x)),
            _ => Err(format!("{text:?} is not a fraction of the memory limit in (0, 1], nor \"off\"")),
        },
    }
}

impl WorkerOptions {
    pub fn new(scheduler: &str) -> WorkerOptions {
        WorkerOptions {
            scheduler: scheduler.to_string(),
            nthreads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_limit: None,
            name: None,
            resources: Vec::new(),
            security: Security::default(),
            host: None,
            local_directory: None,
            heartbeat: Duration::from_millis(500),
            memory_monitor: Duration::from_millis(100),
            kill_at: None,
            thresholds: MemoryThresholds::default(),
            death_timeout: None,
            lifetime: None,
            lifetime_stagger: Duration::ZERO,
            device_memory_limit: None,
        }
    }
}

/// Why a worker stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("cannot reach the scheduler at {address}{}: {error}", .tried.map(|d| format!(" (tried for {}s)", d.as_secs())).unwrap_or_default())]
    Connect { address: String, tried: Option<Duration>, error: CommError },
    #[error("lost the scheduler: {0}")]
    Lost(String),
    /// The scheduler removed this worker (a nanny starts a new one).
    #[error("removed by the scheduler: {0}")]
    Removed(String),
    /// A CUDA worker that sees no GPU.
    #[error("a CUDA worker needs a GPU: {0}")]
    NoGpu(String),
    #[error("the local directory {path}: {error}")]
    LocalDirectory { path: PathBuf, error: std::io::Error },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Run a worker until the scheduler tells it to close (`Ok`) or goes away.
pub fn run(options: WorkerOptions, udfs: Arc<dyn UdfRunner>) -> Result<(), WorkerError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("brisk-worker-io")
        .enable_all()
        .build()?;
    rt.block_on(serve(options, udfs))
}

/// The next task to run: smallest priority first.
#[derive(PartialEq, Eq)]
struct Ready {
    priority: (i64, u64, u32),
    key: Key,
    run: u32,
}

impl PartialOrd for Ready {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ready {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&other.priority, &other.key).cmp(&(&self.priority, &self.key))
    }
}

struct WTask {
    run: u32,
    op: Blob,
    deps: Vec<Key>,
    /// Inputs still being fetched.
    missing: u32,
    /// Fetched inputs this task holds a reference on.
    holds: Vec<Key>,
    priority: (i64, u64, u32),
    cancel: Arc<AtomicBool>,
    timeout: Option<Duration>,
    /// Its `GPU` resource: it takes one of `Shared::gpu_slots`, if any.
    gpus: f64,
    /// The scheduler connection it was assigned on (see `WState::epoch`).
    epoch: u64,
}

/// One input on its way.
struct Fetching {
    /// The peers the current fetch asks.
    from: Vec<String>,
    /// The current fetch: only its failure fails the waiting tasks.
    id: u64,
    waiting: Vec<Key>,
}

struct WState {
    /// Results of tasks run here (the scheduler knows of them), in memory
    /// or spilled.
    data: SpillBuffer,
    /// Inputs fetched from peers, with the number of tasks here that need
    /// them and where they belong (a GPU value arrives as its host copy).
    fetched: FxHashMap<Key, (Value, u32, Home)>,
    tasks: FxHashMap<Key, WTask>,
    ready: BinaryHeap<Ready>,
    /// Inputs on their way, and the tasks waiting for each.
    fetching: FxHashMap<Key, Fetching>,
    /// Numbers the fetches, so that a fetch given up on is told apart.
    fetches: u64,
    /// Results here whose tasks wrote shuffle pieces: freeing the result
    /// removes the pieces.
    splits: FxHashMap<Key, Vec<(Pieces, u32)>>,
    running: u32,
    /// Task threads running, and how many should: one more for each task
    /// that lent its thread while it waits (`worker_seat`).
    threads_alive: usize,
    threads_wanted: usize,
    /// Running tasks that lent their thread.
    seceded: FxHashSet<Key>,
    closing: bool,
    /// Memory is past the pause threshold: no task starts.
    paused: bool,
    /// Counts the scheduler connections lost: a task assigned before the
    /// last loss was assigned by a scheduler that is gone.
    epoch: u64,
    /// Registered with a scheduler now (not waiting for one to come back).
    connected: bool,
}

impl WState {
    fn new(spill_dir: PathBuf) -> WState {
        WState {
            data: SpillBuffer::new(spill_dir),
            fetched: FxHashMap::default(),
            tasks: FxHashMap::default(),
            ready: BinaryHeap::new(),
            fetching: FxHashMap::default(),
            fetches: 0,
            splits: FxHashMap::default(),
            running: 0,
            threads_alive: 0,
            threads_wanted: 0,
            seceded: FxHashSet::default(),
            closing: false,
            paused: false,
            epoch: 0,
            connected: false,
        }
    }

    /// The results held here, as a scheduler that did not see them made
    /// is told.
    fn held(&self) -> Vec<HeldResult> {
        self.data
            .held()
            .map(|(k, nbytes)| HeldResult { key: k.clone(), nbytes, pinned: self.splits.contains_key(k) })
            .collect()
    }

    /// Bytes of results and fetched inputs in memory.
    fn managed(&self) -> u64 {
        self.data.memory() + self.fetched.values().map(|(v, ..)| v.nbytes()).sum::<u64>()
    }
}

struct Shared {
    state: Mutex<WState>,
    work: Condvar,
    udfs: Arc<dyn UdfRunner>,
    /// Where reports go: the channel of the scheduler connection now (a
    /// new one for each connection, so nothing meant for a scheduler that
    /// died reaches its successor).
    reports: Mutex<mpsc::UnboundedSender<Vec<WorkerMsg>>>,
    /// The scheduler keeps a journal: when it goes, wait for it to come back.
    journaled: AtomicBool,
    security: Security,
    peers: Arc<PeerPool>,
    /// Bytes fetched from peers (inputs and shuffle pieces).
    transferred: Arc<AtomicU64>,
    /// Of those, device bytes of GPU blocks that came device to device.
    device_transferred: AtomicU64,
    /// Closures' code the scheduler sent; tasks refer to it by id.
    codes: Arc<CodeTable>,
    /// Itself, for the threads tasks lend (`worker_seat`).
    me: Weak<Shared>,
    /// Where tasks' `Variable`, `Queue`, `Lock`… requests go, and the
    /// tasks they submit (both the worker's one `TaskClient`).
    task_client: Arc<dyn Coordinator>,
    task_submit: Arc<dyn Client>,
    memory_limit: Option<u64>,
    thresholds: MemoryThresholds,
    /// A CUDA worker's device memory limit for results, in bytes.
    device_limit: Option<u64>,
    /// Set once a spill failed (a full disk), so it is logged once.
    spill_failed: AtomicBool,
    kill_at: Option<KillAt>,
    /// A CUDA worker's host ([`cuda::host_id`]): GPU blocks move device to
    /// device between CUDA workers with the same one.
    ipc_host: Option<String>,
    /// Peers whose lent GPU blocks could not be copied here (the driver
    /// refused): they are asked for host copies.
    no_ipc: Mutex<FxHashSet<String>>,
    /// Devices dealt to GPU tasks, one each, where this worker offers
    /// several (`gpu_slots`); a flag marks one taken.
    gpu_slots: Vec<(String, AtomicBool)>,
    /// This worker's folder under `--local-directory`, where programs run
    /// by `run_command` write their files unless given a `cwd`.
    workdir: PathBuf,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, WState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The host to name when fetching from `addr`: this CUDA worker's,
    /// unless `addr`'s lent blocks could not be copied before.
    fn ipc_host_for(&self, addr: &str) -> Option<&str> {
        let refused = || self.no_ipc.lock().unwrap_or_else(|e| e.into_inner()).contains(addr);
        self.ipc_host.as_deref().filter(|_| !refused())
    }

    fn report(&self, msg: WorkerMsg) {
        let _ = self.reports.lock().unwrap_or_else(|e| e.into_inner()).send(vec![msg]);
    }

    /// The scheduler is gone: what it assigned and did not start is
    /// dropped (its successor assigns again); running tasks go on, and
    /// their results are kept, as every result here is.
    fn disconnect(&self) {
        let mut st = self.lock();
        st.epoch += 1;
        st.connected = false;
        let queued: FxHashSet<Key> = st.ready.drain().map(|r| r.key).collect();
        let dropped: Vec<Key> = st
            .tasks
            .iter()
            .filter(|(k, t)| t.missing > 0 || queued.contains(*k))
            .map(|(k, _)| k.clone())
            .collect();
        for k in dropped {
            if let Some(t) = st.tasks.remove(&k) {
                t.cancel.store(true, Ordering::SeqCst);
                release_holds(&mut st, &t.holds);
            }
        }
        st.fetching.clear();
        self.codes.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// A new scheduler connection: reports go to `tx` from now on, the
    /// first being `register` with every result held here (a restarted
    /// scheduler carries on with them).
    fn connect(
        &self,
        tx: mpsc::UnboundedSender<Vec<WorkerMsg>>,
        register: impl FnOnce(Vec<HeldResult>) -> WorkerMsg,
    ) {
        let mut st = self.lock();
        let held = st.held();
        st.connected = true;
        let mut reports = self.reports.lock().unwrap_or_else(|e| e.into_inner());
        *reports = tx;
        let mut first = vec![register(held)];
        if st.paused {
            first.push(WorkerMsg::Paused { paused: true });
        }
        let _ = reports.send(first);
    }
}

/// How an error of a device allocation that did not fit begins
/// (`brisk_gpu::GpuError::OutOfMemory`).
const GPU_OOM: &str = "out of GPU memory";

/// What the error of a failed CUDA call says (`brisk_gpu::GpuError::Call`).
const GPU_CALL_FAILED: &str = "GPU error on device";

/// The exit code of a CUDA worker whose GPU failed: its nanny starts a new
/// one, with a new CUDA context (which fails to start if the device is gone).
pub const EXIT_GPU_FAILED: u8 = 76;

/// How long a worker whose scheduler keeps a journal waits for it to come
/// back, unless `death_timeout` says.
const RECONNECT_WAIT: Duration = Duration::from_secs(60);

/// Reach the scheduler: once, or (with `death_timeout`) again every 250 ms
/// until it answers or the time is up. A refusal (a wrong token) is final.
async fn first_connect(options: &WorkerOptions, name: &str) -> Result<Conn, WorkerError> {
    let start = tokio::time::Instant::now();
    loop {
        match comm::connect(&options.scheduler, Role::Worker, name, &options.security).await {
            Ok(c) => return Ok(c),
            Err(error) => {
                let retry = matches!(error, CommError::Io(_) | CommError::Timeout(_));
                match options.death_timeout {
                    Some(d) if retry && start.elapsed() < d => {
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                    tried => {
                        return Err(WorkerError::Connect {
                            address: options.scheduler.clone(),
                            tried,
                            error,
                        });
                    }
                }
            }
        }
    }
}

/// Ask the worker to leave at its lifetime, moved by a random part of the stagger.
fn leave_at_lifetime(options: &WorkerOptions, name: &str) {
    let Some(life) = options.lifetime else { return };
    let stagger = options.lifetime_stagger.as_secs_f64();
    let shift = (comm::random_id() as f64 / u64::MAX as f64 * 2.0 - 1.0) * stagger;
    let at = Duration::from_secs_f64((life.as_secs_f64() + shift).max(0.0));
    let name = name.to_string();
    tokio::spawn(async move {
        tokio::time::sleep(at).await;
        log::info("worker", &format!("{name} reached its lifetime ({}s): leaving", at.as_secs()));
        request_close();
    });
}

/// The one GPU a CUDA worker runs on (the first it sees: its launcher
/// sets `CUDA_VISIBLE_DEVICES` to one device), or why there is none.
fn cuda_device() -> Result<Arc<brisk_gpu::Device>, WorkerError> {
    let rt = brisk_gpu::runtime().map_err(|e| WorkerError::NoGpu(e.to_string()))?;
    rt.devices().first().cloned().ok_or_else(|| WorkerError::NoGpu("no GPU device is visible".into()))
}

/// The devices a plain worker that offers several GPUs (`--resources
/// GPU=2`) deals out, one per running GPU task: those `CUDA_VISIBLE_DEVICES`
/// lists, else every device of the machine, as many as it offers. Empty
/// where it offers fewer than two or sees fewer than two (a CUDA worker has
/// one device, already its process's alone).
fn gpu_slots(resources: &[(String, f64)], cuda_worker: bool) -> Vec<(String, AtomicBool)> {
    let offered: f64 = resources.iter().filter(|(n, _)| n == "GPU").map(|(_, x)| x).sum();
    if cuda_worker || offered < 2.0 {
        return Vec::new();
    }
    let listed: Vec<String> = match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(v) => v.split(',').map(str::trim).filter(|d| !d.is_empty()).map(str::to_string).collect(),
        Err(_) => match brisk_engine::gpu::probe() {
            brisk_engine::gpu::Gpus::Devices(d) => d.iter().map(|g| g.index.to_string()).collect(),
            brisk_engine::gpu::Gpus::None(_) => Vec::new(),
        },
    };
    if listed.len() < 2 {
        return Vec::new();
    }
    listed.into_iter().take(offered as usize).map(|d| (d, AtomicBool::new(false))).collect()
}

/// What a plain worker's row shows of its GPU. Pinned as the seeds
/// describe (`CUDA_VISIBLE_DEVICES` naming one device of this machine), it
/// is that device's worker and offers `GPU: 1` unless told an amount;
/// programs it runs (`run_command`) inherit the variable and see that
/// device alone.
fn pinned_gpu(resources: &mut Vec<(String, f64)>) -> String {
    let devices = match brisk_engine::gpu::probe() {
        brisk_engine::gpu::Gpus::Devices(d) => d,
        brisk_engine::gpu::Gpus::None(_) => return "no GPU".into(),
    };
    let pinned = match std::env::var_os("CUDA_VISIBLE_DEVICES") {
        Some(_) => {
            cuda::visible_devices(None).ok().filter(|l| l.len() == 1).and_then(|l| l.into_iter().next())
        }
        None => None,
    };
    // NVML numbers every device of the machine, whatever the variable says.
    let shown = match &pinned {
        Some(v) => {
            v.parse::<u32>().ok().and_then(|i| devices.iter().find(|g| g.index == i)).or(devices.first())
        }
        None => devices.first(),
    };
    let Some(g) = shown else { return "no GPU".into() };
    if let Some(v) = &pinned {
        if !resources.iter().any(|(n, _)| n == "GPU") {
            resources.push(("GPU".into(), 1.0));
        }
        return format!("GPU {v}: {}, {}", g.name, brisk_engine::memory::fmt_bytes(g.memory_total));
    }
    format!("{}, {}", g.name, brisk_engine::memory::fmt_bytes(g.memory_total))
}

async fn serve(options: WorkerOptions, udfs: Arc<dyn UdfRunner>) -> Result<(), WorkerError> {
    let name = options.name.clone().unwrap_or_else(|| format!("worker-{}", std::process::id()));
    let mut resources = options.resources.clone();
    // A CUDA worker without its GPU stops before it joins.
    let (gpu, device_limit) = match options.device_memory_limit {
        Some(limit) => {
            let device = cuda_device()?;
            let bytes = limit.bytes(device.total_memory());
            // Named as its launcher named it (an index or a UUID).
            let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok().filter(|v| !v.contains(','));
            let gpu = format!(
                "{}{}, {}",
                visible.map(|v| format!("GPU {v}: ")).unwrap_or_default(),
                device.name(),
                brisk_engine::memory::fmt_bytes(device.total_memory())
            );
            (gpu, Some(bytes))
        }
        None => (pinned_gpu(&mut resources), None),
    };
    let conn = first_connect(&options, &name).await?;
    // Serve data where the scheduler's connection left this machine, unless told.
    let host = match &options.host {
        Some(h) => h.clone(),
        None => conn.local.map_or_else(|| "127.0.0.1".into(), |a| a.ip().to_string()),
    };
    let listener = TcpListener::bind((host.as_str(), 0)).await?;
    let port = listener.local_addr()?.port();
    let scheme = options.security.scheme();
    let address = if host.contains(':') {
        format!("{scheme}://[{host}]:{port}")
    } else {
        format!("{scheme}://{host}:{port}")
    };

    let peers = Arc::new(PeerPool::new(options.security.clone(), &name));
    let transferred = Arc::new(AtomicU64::new(0));
    let root = shuffle_here(&options, &address, peers.clone(), transferred.clone())?;

    let (reports_tx, reports_rx) = mpsc::unbounded_channel::<Vec<WorkerMsg>>();
    let uid = comm::random_id();
    let register = |held| WorkerMsg::Register {
        nthreads: options.nthreads.max(1) as u32,
        memory_limit: options.memory_limit,
        device_memory_limit: device_limit,
        resources: resources.clone(),
        address: address.clone(),
        gpu: gpu.clone(),
        pid: std::process::id(),
        id: uid,
        held,
    };
    let task_client = Arc::new(TaskClient::new(&options.scheduler, options.security.clone()));
    let shared = Arc::new_cyclic(|me| Shared {
        me: me.clone(),
        state: Mutex::new(WState::new(root.join("spill"))),
        work: Condvar::new(),
        udfs,
        // Nothing reaches the scheduler before `connect` sends `Register`
        // first: a heartbeat ticking sooner would make it drop this worker.
        reports: Mutex::new(mpsc::unbounded_channel().0),
        journaled: AtomicBool::new(false),
        security: options.security.clone(),
        peers: peers.clone(),
        transferred,
        device_transferred: AtomicU64::new(0),
        codes: Arc::default(),
        task_client: task_client.clone(),
        task_submit: task_client,
        memory_limit: options.memory_limit,
        thresholds: options.thresholds,
        device_limit,
        spill_failed: AtomicBool::new(false),
        kill_at: options.kill_at,
        ipc_host: device_limit.map(|_| cuda::host_id()),
        gpu_slots: gpu_slots(&resources, device_limit.is_some()),
        workdir: root.clone(),
        no_ipc: Mutex::default(),
    });
    log::info("worker", &format!("{name} serving data at {address}, scheduler {}", options.scheduler));
    leave_at_lifetime(&options, &name);

    let mut threads = Vec::new();
    {
        let mut st = shared.lock();
        st.threads_alive = options.nthreads.max(1);
        st.threads_wanted = options.nthreads.max(1);
    }
    for i in 0..options.nthreads.max(1) {
        let s = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("brisk-task-{i}"))
                .spawn(move || s.task_loop(i as u32))?,
        );
    }
    if options.memory_limit.is_some() {
        let s = shared.clone();
        let every = options.memory_monitor;
        std::thread::Builder::new().name("brisk-memory".into()).spawn(move || s.monitor_memory(every))?;
    }
    let data_server = tokio::spawn(data_server(listener, shared.clone()));

    let heartbeat = {
        let s = shared.clone();
        let every = options.heartbeat;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let (memory, running, spilled, device, device_spilled) = {
                    let st = s.lock();
                    (st.managed(), st.running, st.data.spilled().0, st.data.on_device(), st.data.off_device())
                };
                let transferred = s.transferred.load(Ordering::Relaxed);
                let device_transferred = s.device_transferred.load(Ordering::Relaxed);
                s.report(WorkerMsg::Heartbeat {
                    memory,
                    running,
                    transferred,
                    spilled,
                    device,
                    device_spilled,
                    device_transferred,
                });
            }
        })
    };

    let (mut conn, mut rx) = (conn, reports_rx);
    shared.connect(reports_tx, register);
    let outcome = loop {
        let Conn { reader, writer, .. } = conn;
        let writer_task = tokio::spawn(comm::send_batches(writer, rx));
        let ended = session(&shared, &name, reader).await;
        writer_task.abort();
        let reason = match ended {
            Ended::Done(outcome) => break outcome,
            Ended::Lost(reason) => reason,
        };
        if !shared.journaled.load(Ordering::SeqCst) {
            break Err(WorkerError::Lost(reason));
        }
        shared.disconnect();
        log::warn("worker", &format!("{name} lost the scheduler ({reason}); waiting for it to come back"));
        match reconnect(&options, &name).await {
            Reconnect::Back(c) => {
                log::info("worker", &format!("{name} is back with the scheduler; it keeps its results"));
                conn = c;
                let (tx, new_rx) = mpsc::unbounded_channel();
                rx = new_rx;
                shared.connect(tx, register);
            }
            Reconnect::Close => break Ok(()),
            Reconnect::GaveUp => {
                let wait = options.death_timeout.unwrap_or(RECONNECT_WAIT);
                break Err(WorkerError::Lost(format!("{reason}; it did not come back within {wait:?}")));
            }
        }
    };
    heartbeat.abort();
    data_server.abort();
    {
        let mut st = shared.lock();
        st.closing = true;
        for t in st.tasks.values() {
            t.cancel.store(true, Ordering::SeqCst);
        }
    }
    shared.work.notify_all();
    for t in threads {
        let _ = t.join();
    }
    outcome
}

/// How a scheduler connection ended.
enum Ended {
    /// The worker is done (told to close, or it left).
    Done(Result<(), WorkerError>),
    /// The scheduler went away.
    Lost(String),
}

/// Serve one scheduler connection until it ends.
async fn session(shared: &Arc<Shared>, name: &str, mut reader: comm::FrameReader) -> Ended {
    // Set once this worker said goodbye (`request_close`): the scheduler's
    // `Close` answer ends it, or this deadline does.
    let mut leaving: Option<tokio::time::Instant> = None;
    loop {
        let read = tokio::select! {
            read = reader.next::<Vec<ToWorker>>() => read,
            () = close_requested().notified(), if leaving.is_none() => {
                log::info("worker", &format!("{name} leaving: telling the scheduler"));
                shared.report(WorkerMsg::Closing);
                leaving = Some(tokio::time::Instant::now() + GOODBYE);
                continue;
            }
            () = tokio::time::sleep_until(leaving.unwrap_or_else(tokio::time::Instant::now)), if leaving.is_some() => {
                return Ended::Done(Ok(()));
            }
        };
        match read {
            Ok(Some(batch)) => {
                if let Some((reason, restart)) = handle_batch(shared, batch) {
                    log::info("worker", &format!("{name} closing: {reason}"));
                    return Ended::Done(if restart { Err(WorkerError::Removed(reason)) } else { Ok(()) });
                }
            }
            Ok(None) | Err(_) if leaving.is_some() => return Ended::Done(Ok(())),
            Ok(None) => return Ended::Lost("the scheduler closed the connection".into()),
            Err(e) => return Ended::Lost(e.to_string()),
        }
    }
}

enum Reconnect {
    Back(Conn),
    /// Told to leave (SIGTERM) while waiting.
    Close,
    GaveUp,
}

/// Try the scheduler's address again every 250 ms for `RECONNECT_WAIT`.
async fn reconnect(options: &WorkerOptions, name: &str) -> Reconnect {
    let deadline = tokio::time::Instant::now() + options.death_timeout.unwrap_or(RECONNECT_WAIT);
    while tokio::time::Instant::now() < deadline {
        tokio::select! {
            () = close_requested().notified() => return Reconnect::Close,
            () = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
        if let Ok(c) = comm::connect(&options.scheduler, Role::Worker, name, &options.security).await {
            return Reconnect::Back(c);
        }
    }
    Reconnect::GaveUp
}

/// How long a leaving worker waits for the scheduler's answer (it hands
/// its results over first, for up to 10 s).
const GOODBYE: Duration = Duration::from_secs(15);

fn close_requested() -> &'static tokio::sync::Notify {
    static CLOSE: std::sync::OnceLock<tokio::sync::Notify> = std::sync::OnceLock::new();
    CLOSE.get_or_init(tokio::sync::Notify::new)
}

/// Have the worker of this process leave cleanly (on SIGTERM): it tells
/// the scheduler, which moves its work elsewhere without counting it as a
/// death (as Dask's graceful close), then it ends.
pub fn request_close() {
    close_requested().notify_one();
}

/// Carry out a batch from the scheduler; `Some((reason, restart))` when
/// told to close.
fn handle_batch(shared: &Arc<Shared>, batch: Vec<ToWorker>) -> Option<(String, bool)> {
    let mut to_fetch: FxHashMap<Vec<String>, Vec<(Key, u64)>> = FxHashMap::default();
    let mut woke = 0;
    {
        let mut st = shared.lock();
        for msg in batch {
            match msg {
                ToWorker::Registered { journaled } => shared.journaled.store(journaled, Ordering::SeqCst),
                ToWorker::Compute { key, run, op, deps, priority, timeout, gpus } => {
                    let timeout = timeout.and_then(|t| brisk_engine::exec::deadline::seconds(t).ok());
                    let task = Assigned { key, run, op, deps, priority, timeout, gpus };
                    if compute(&mut st, task, &mut to_fetch) {
                        woke += 1;
                    }
                }
                ToWorker::Codes { codes } => {
                    let mut table = shared.codes.lock().unwrap_or_else(|e| e.into_inner());
                    for c in codes {
                        table.insert(c.id, c);
                    }
                }
                ToWorker::ForgetCodes { ids } => {
                    let mut table = shared.codes.lock().unwrap_or_else(|e| e.into_inner());
                    for id in ids {
                        table.remove(&id);
                    }
                }
                ToWorker::Cancel { key } => {
                    if let Some(t) = st.tasks.remove(&key) {
                        t.cancel.store(true, Ordering::SeqCst);
                        release_holds(&mut st, &t.holds);
                    }
                }
                ToWorker::Free { keys } => {
                    for k in keys {
                        st.data.remove(&k);
                        for (pieces, input) in st.splits.remove(&k).unwrap_or_default() {
                            pieces.remove_input(input);
                        }
                    }
                }
                ToWorker::Replicate { key, from } => {
                    tokio::spawn(replicate(shared.clone(), key, from));
                }
                ToWorker::Run { id, op } => {
                    let s = shared.clone();
                    let ran = std::thread::Builder::new()
                        .name("brisk-run".into())
                        .spawn(move || s.run_call(id, &op));
                    if let Err(e) = ran {
                        let error = TaskError::internal(format!("no thread to run the call on: {e}"));
                        shared.report(WorkerMsg::RunResult { id, result: Err(error) });
                    }
                }
                ToWorker::Close { reason, restart } => return Some((reason, restart)),
            }
        }
    }
    for _ in 0..woke {
        shared.work.notify_one();
    }
    for (who_has, keys) in to_fetch {
        tokio::spawn(fetch(shared.clone(), keys, who_has));
    }
    None
}

/// Take a task; `true` when it can run now.
/// A task the scheduler gave this worker (`ToWorker::Compute`).
struct Assigned {
    key: Key,
    run: u32,
    op: Blob,
    deps: Vec<DepAt>,
    priority: (i64, u64, u32),
    timeout: Option<Duration>,
    gpus: f64,
}

fn compute(st: &mut WState, task: Assigned, to_fetch: &mut FxHashMap<Vec<String>, Vec<(Key, u64)>>) -> bool {
    let Assigned { key, run, op, deps, priority, timeout, gpus } = task;
    if let Some(old) = st.tasks.remove(&key) {
        old.cancel.store(true, Ordering::SeqCst);
        release_holds(st, &old.holds);
    }
    let mut missing = 0;
    let mut holds = Vec::new();
    let mut dep_keys = Vec::with_capacity(deps.len());
    // A task may read one input many times (and 100,000 inputs): each is
    // looked at once.
    let mut seen = FxHashSet::default();
    for d in deps {
        if st.data.contains(&d.key) || !seen.insert(d.key.clone()) {
        } else if let Some((_, refs, _)) = st.fetched.get_mut(&d.key) {
            *refs += 1;
            holds.push(d.key.clone());
        } else {
            let id = st.fetches + 1;
            let started = match st.fetching.get_mut(&d.key) {
                Some(f) => {
                    f.waiting.push(key.clone());
                    // The scheduler names other holders (those asked before
                    // died or hang): ask them too; the first answer wins.
                    let other = !d.who_has.iter().any(|a| f.from.contains(a));
                    if other {
                        f.from = d.who_has.clone();
                        f.id = id;
                    }
                    other
                }
                None => {
                    let f = Fetching { from: d.who_has.clone(), id, waiting: vec![key.clone()] };
                    st.fetching.insert(d.key.clone(), f);
                    true
                }
            };
            if started {
                st.fetches = id;
                to_fetch.entry(d.who_has).or_default().push((d.key.clone(), id));
            }
            missing += 1;
        }
        dep_keys.push(d.key);
    }
    let ready = missing == 0;
    if ready {
        st.ready.push(Ready { priority, key: key.clone(), run });
    }
    let cancel = Arc::new(AtomicBool::new(false));
    let epoch = st.epoch;
    st.tasks.insert(
        key,
        WTask { run, op, deps: dep_keys, missing, holds, priority, cancel, timeout, gpus, epoch },
    );
    ready
}

fn release_holds(st: &mut WState, holds: &[Key]) {
    for k in holds {
        if let Some((_, refs, _)) = st.fetched.get_mut(k) {
            *refs -= 1;
            if *refs == 0 {
                st.fetched.remove(k);
            }
        }
    }
}

/// Bring `keys` from one of `who_has`; the tasks waiting for them run once
/// all their inputs are here. A peer that fails is tried again, then the
/// next one; for inputs no peer can give, the waiting tasks are handed back
/// to the scheduler (`MissingData`), which recomputes or refetches them.
async fn fetch(shared: Arc<Shared>, keys: Vec<(Key, u64)>, who_has: Vec<String>) {
    let mut left = keys;
    let mut last_error = String::from("no worker holds it");
    for attempt in 0..6u32 {
        for addr in &who_has {
            let ask = left.iter().map(|(k, _)| k.clone()).collect();
            let started = Instant::now();
            match shared.peers.get_data(addr, ask, shared.ipc_host_for(addr)).await {
                Ok(fetched) => {
                    if fetched.lent_bytes > 0 {
                        let secs = started.elapsed().as_secs_f64();
                        let rate = fetched.lent_bytes as f64 / secs / 1e9;
                        let n = fetched.lent_bytes;
                        log::info(
                            "worker",
                            &format!(
                                "{n} bytes device to device from {addr} in {secs:.4} s ({rate:.1} GB/s)"
                            ),
                        );
                    }
                    if let Some(e) = fetched.ipc_failed {
                        log::warn("worker", &format!("GPU blocks from {addr} come through the host: {e}"));
                        shared.no_ipc.lock().unwrap_or_else(|e| e.into_inner()).insert(addr.clone());
                    }
                    shared.device_transferred.fetch_add(fetched.lent_bytes, Ordering::Relaxed);
                    let on_device: FxHashSet<Key> = fetched.on_device.into_iter().collect();
                    let mut got: FxHashMap<Key, Value> =
                        fetched.values.into_iter().filter_map(|(k, v)| Some((k, v?))).collect();
                    left.retain(|(k, _)| match got.remove(k) {
                        Some(v) => {
                            shared.transferred.fetch_add(v.nbytes(), Ordering::Relaxed);
                            let home = if on_device.contains(k) { Home::Device } else { Home::Host };
                            land(&shared, k.clone(), v, home);
                            false
                        }
                        None => true,
                    });
                    if left.is_empty() {
                        return;
                    }
                    last_error = format!("{addr} does not hold it");
                }
                Err(e) => last_error = format!("{addr}: {e}"),
            }
        }
        // Stop when nobody waits any more (the scheduler cancelled the
        // tasks) or a newer fetch asks other holders. Checked and
        // forgotten under one lock, so a task that starts waiting meanwhile
        // is not left without its fetch.
        {
            let mut st = shared.lock();
            let st = &mut *st;
            let tasks = &st.tasks;
            left.retain(|(k, id)| {
                let Some(f) = st.fetching.get(k) else { return false };
                if f.id != *id {
                    return false;
                }
                if f.waiting.iter().all(|t| !tasks.contains_key(t)) {
                    st.fetching.remove(k);
                    return false;
                }
                true
            });
            if left.is_empty() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
    }
    log::info("worker", &format!("could not fetch {} inputs: {last_error}", left.len()));
    for (k, id) in left {
        missing(&shared, k, id, &who_has);
    }
}

/// Keep a copy of `key`, held by the worker at `from`, and say so. A copy
/// that cannot be had is no harm: nothing waits for it.
async fn replicate(shared: Arc<Shared>, key: Key, from: String) {
    let (value, home) = match shared.peers.get_data(&from, vec![key.clone()], None).await {
        Ok(mut got) => {
            let home = if got.on_device.contains(&key) { Home::Device } else { Home::Host };
            (got.values.pop().and_then(|(k, v)| v.filter(|_| k == key)), home)
        }
        Err(e) => {
            log::info("worker", &format!("no copy of {key} from {from}: {e}"));
            (None, Home::Host)
        }
    };
    let Some(value) = value else { return };
    shared.transferred.fetch_add(value.nbytes(), Ordering::Relaxed);
    let mut st = shared.lock();
    if !st.data.contains(&key) {
        // A copy of a GPU result stays a host copy until a task here reads it.
        st.data.insert_placed(key.clone(), value, home);
    }
    drop(st);
    shared.report(WorkerMsg::Replicated { key });
}

/// Input `key` cannot be fetched by fetch `id` (if still current): every
/// task waiting for it is dropped here and handed back to the scheduler.
fn missing(shared: &Shared, key: Key, id: u64, who_has: &[String]) {
    let mut st = shared.lock();
    if st.fetching.get(&key).is_none_or(|f| f.id != id) {
        return;
    }
    let waiting = st.fetching.remove(&key).map(|f| f.waiting).unwrap_or_default();
    for t in waiting {
        if let Some(task) = st.tasks.remove(&t) {
            release_holds(&mut st, &task.holds);
            let msg =
                WorkerMsg::MissingData { key: t, run: task.run, dep: key.clone(), holders: who_has.to_vec() };
            shared.report(msg);
        }
    }
}

/// An input arrived: the tasks waiting for it move on (whichever fetch
/// brought it).
fn land(shared: &Shared, key: Key, value: Value, home: Home) {
    let mut woke = 0;
    {
        let mut st = shared.lock();
        let mut waiting = st.fetching.remove(&key).map(|f| f.waiting).unwrap_or_default();
        // A task cancelled and given again while the fetch ran is listed twice.
        waiting.sort_unstable();
        waiting.dedup();
        waiting.retain(|t| st.tasks.contains_key(t));
        if !waiting.is_empty() {
            st.fetched.insert(key.clone(), (value, waiting.len() as u32, home));
        }
        for t in waiting {
            let Some(task) = st.tasks.get_mut(&t) else { continue };
            task.missing -= 1;
            task.holds.push(key.clone());
            if task.missing == 0 {
                let r = Ready { priority: task.priority, key: t.clone(), run: task.run };
                st.ready.push(r);
                woke += 1;
            }
        }
    }
    for _ in 0..woke {
        shared.work.notify_one();
    }
}

/// Serve held values to peers and clients.
async fn data_server(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let (tcp, peer) = comm::next_connection(&listener, "worker").await;
        let shared = shared.clone();
        tokio::spawn(async move {
            let (_, mut conn) = match comm::accept(tcp, &shared.security, &[Role::Peer]).await {
                Ok(x) => x,
                Err(e) => {
                    log::warn("worker", &format!("dropped a connection from {peer}: {e}"));
                    return;
                }
            };
            // Staging memory lent by the last answer, held until the peer
            // has copied it (it says `Release`) or goes.
            let mut lent: Vec<brisk_gpu::Lease> = Vec::new();
            loop {
                let msg = match conn.reader.next::<PeerMsg>().await {
                    Ok(Some(m)) => m,
                    Ok(None) => return,
                    Err(e) => {
                        log::warn("worker", &format!("dropped {peer}: {e}"));
                        return;
                    }
                };
                let mut hint = 0;
                lent.clear();
                let reply = match msg {
                    PeerMsg::Release => PeerReply::Released,
                    PeerMsg::GetData { mut keys, host } => {
                        // Device to device to a CUDA worker of this host.
                        let lend = host.is_some() && host == shared.ipc_host;
                        // A key asked for twice is sent once (a peer cannot
                        // make this worker encode one large value N times).
                        keys.sort_unstable();
                        keys.dedup();
                        let found = {
                            let st = shared.lock();
                            keys.into_iter()
                                .map(|k| {
                                    let at = match st.data.peek(&k) {
                                        Lookup::Missing => match st.fetched.get(&k) {
                                            Some((v, _, home)) => Lookup::Memory(v.clone(), *home),
                                            None => Lookup::Missing,
                                        },
                                        at => at,
                                    };
                                    (k, at)
                                })
                                .collect::<Vec<(Key, Lookup)>>()
                        };
                        // Spilled results are read for the peer, and GPU
                        // results copied to the host, off the I/O threads;
                        // both stay where they are.
                        let blocking = found.iter().any(|(_, at)| match at {
                            Lookup::Disk(..) => true,
                            Lookup::Memory(v, Home::Device) => place::device_bytes(v) > 0,
                            _ => false,
                        });
                        let read_all = move || answer(found, lend);
                        let (reply, leases) = if blocking {
                            let Ok(read) = tokio::task::spawn_blocking(read_all).await else { return };
                            read
                        } else {
                            read_all()
                        };
                        if let PeerReply::Data { values, .. } = &reply {
                            hint = values
                                .iter()
                                .filter_map(|(_, v)| v.as_ref())
                                .map(|v| v.nbytes() as usize)
                                .sum();
                        }
                        lent = leases;
                        reply
                    }
                    PeerMsg::GetPieces { name, out, inputs } => {
                        let read =
                            tokio::task::spawn_blocking(move || read_pieces(&name, out, &inputs)).await;
                        let pieces = read.unwrap_or_else(|e| Err(format!("reading the pieces failed: {e}")));
                        if let Ok(p) = &pieces {
                            hint = p.iter().map(|b| b.0.len()).sum();
                            die_if(shared.kill_at, KillAt::ServePieces);
                        }
                        PeerReply::Pieces { pieces }
                    }
                };
                if conn.writer.send_sized(&reply, hint + 4096).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// The answer to `GetData` for what was found: values in memory as they
/// are, spilled ones read back, GPU values copied to the host, except that
/// with `lend` (an asker of this host) GPU values of `LEND_FROM` bytes or
/// more are lent device to device, about `LEND_AT_ONCE` per answer (the
/// rest named `later`). The leases keep the lent staging memory until the
/// asker says `Release`.
fn answer(found: Vec<(Key, Lookup)>, lend: bool) -> (PeerReply, Vec<brisk_gpu::Lease>) {
    let (mut values, mut on_device, mut shipped, mut later) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut leases = Vec::new();
    let mut staged = 0;
    for (k, at) in found {
        let (v, home) = match at {
            Lookup::Memory(v, Home::Device) if lend && place::device_bytes(&v) >= LEND_FROM => {
                let bytes = place::device_bytes(&v);
                if staged > 0 && staged + bytes > LEND_AT_ONCE {
                    later.push(k);
                    continue;
                }
                staged += bytes;
                match place::export(&v, &mut leases) {
                    Ok(s) => {
                        shipped.push((k, s));
                        continue;
                    }
                    Err(e) => log::warn("worker", &format!("{k} goes through the host: cannot lend it: {e}")),
                }
                (Ok(v), Home::Device)
            }
            Lookup::Memory(v, home) => (Ok(v), home),
            Lookup::Disk(path, home) => (spill::read(&path), home),
            Lookup::Missing => {
                values.push((k, None));
                continue;
            }
        };
        let v = v.map_err(|e| e.to_string()).and_then(|v| match home {
            Home::Host => Ok(v),
            Home::Device => place::to_host(&v).map_err(|e| e.to_string()),
        });
        match v {
            Ok(v) => {
                if home == Home::Device {
                    on_device.push(k.clone());
                }
                values.push((k, Some(v)));
            }
            Err(e) => {
                log::warn("worker", &format!("cannot read back {k}: {e}"));
                values.push((k, None));
            }
        }
    }
    (PeerReply::Data { values, on_device, shipped, later }, leases)
}

/// Which of a collect's inputs is a split whose pieces are on `host` (its
/// result ends with the holder's address, see `Pieces::sizes`).
fn split_on(inputs: &[Value], host: &str) -> Option<usize> {
    inputs.iter().position(|v| match v {
        Value::List(items) => matches!(items.last(), Some(Value::Str(h)) if h.as_ref() == host),
        _ => false,
    })
}

/// Pieces this worker wrote, for a peer; only shuffle folders can be named.
fn read_pieces(name: &str, out: u32, inputs: &[u32]) -> Result<Vec<Blob>, String> {
    let pieces = Pieces::named(name).ok_or_else(|| format!("{name:?} is not a shuffle folder"))?;
    let bytes = pieces.read(out, inputs).map_err(|e| e.message)?;
    Ok(bytes.into_iter().map(|b| Blob(Arc::from(b))).collect())
}

/// Keep shuffle pieces in this worker's own folder under its local
/// directory, and fetch the pieces other workers wrote from them. Folders
/// of workers on this machine that are gone are removed first.
fn shuffle_here(
    options: &WorkerOptions,
    address: &str,
    peers: Arc<PeerPool>,
    transferred: Arc<AtomicU64>,
) -> Result<PathBuf, WorkerError> {
    let parent = options.local_directory.clone().unwrap_or_else(std::env::temp_dir);
    let dir_err = |path: &Path| {
        let path = path.to_path_buf();
        move |error| WorkerError::LocalDirectory { path, error }
    };
    remove_stale_workers(&parent);
    let root = parent.join(format!("{WORKER_DIR}{}", std::process::id()));
    std::fs::create_dir_all(&root).map_err(dir_err(&root))?;
    let handle = tokio::runtime::Handle::current();
    let kill_at = options.kill_at;
    let fetch = move |host: &str, pieces: &Pieces, out: u32, inputs: &[u32]| {
        let ask = peers.get_pieces(host, &pieces.name, out, inputs.to_vec());
        let got = match handle.block_on(async { tokio::time::timeout(PIECES_TIMEOUT, ask).await }) {
            Ok(Ok(Ok(blobs))) => {
                let n: usize = blobs.iter().map(|b| b.0.len()).sum();
                transferred.fetch_add(n as u64, Ordering::Relaxed);
                die_if(kill_at, KillAt::Collect);
                return Ok(blobs.into_iter().map(|b| b.0.to_vec()).collect());
            }
            Ok(Ok(Err(e))) => e,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer in {} s", PIECES_TIMEOUT.as_secs()),
        };
        // Whatever the cause (the holder died, hangs, or lost its files),
        // the pieces must be made again: the task loop tells the scheduler.
        PIECES_LOST.with(|l| *l.borrow_mut() = Some(host.to_string()));
        Err(TaskError::user(format!("shuffle: cannot fetch pieces from {host}: {got}")))
    };
    let remote = brisk_engine::pieces::Remote {
        root: root.clone(),
        host: address.to_string(),
        fetch: Box::new(fetch),
    };
    if brisk_engine::pieces::set_remote(remote).is_err() {
        log::warn("worker", "a second worker in one process shares the first one's shuffle folder");
    }
    Ok(root)
}

/// How long a peer may take to send shuffle pieces.
const PIECES_TIMEOUT: Duration = Duration::from_secs(120);

const WORKER_DIR: &str = "brisk-worker-";

/// Remove the folders `brisk-worker-PID` under `parent` whose process is gone.
fn remove_stale_workers(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let pid = name.to_str().and_then(|n| n.strip_prefix(WORKER_DIR)).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| !brisk_engine::pieces::alive(p)) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Shared {
    /// A task thread: take the best ready task, run it, store and report.
    fn task_loop(&self, thread: u32) {
        let mut st = self.lock();
        loop {
            if st.closing {
                return;
            }
            if st.threads_alive > st.threads_wanted {
                st.threads_alive -= 1;
                return;
            }
            let next = match st.ready.pop() {
                Some(next) if !st.paused => next,
                other => {
                    if let Some(next) = other {
                        st.ready.push(next);
                    }
                    st = self.work.wait(st).unwrap_or_else(|e| e.into_inner());
                    continue;
                }
            };
            let WState { tasks, data, fetched, .. } = &mut *st;
            let Some(task) = tasks.get(&next.key).filter(|t| t.run == next.run) else { continue };
            let inputs: Option<Vec<Lookup>> = task
                .deps
                .iter()
                .map(|d| match data.get(d) {
                    Lookup::Missing => fetched.get(d).map(|(v, _, home)| Lookup::Memory(v.clone(), *home)),
                    at => Some(at),
                })
                .collect();
            let op = task.op.clone();
            let cancel = task.cancel.clone();
            let timeout = task.timeout;
            let gpus = task.gpus;
            st.running += 1;
            drop(st);
            let slot = if gpus > 0.0 { self.take_gpu_slot() } else { None };
            let start = Instant::now();
            let from_disk = inputs.iter().flatten().any(|i| matches!(i, Lookup::Disk(..)));
            let mut retried = false;
            let (result, splits, lost) = loop {
                let loaded = match inputs.clone() {
                    Some(inputs) => self.load(&next.key, inputs),
                    None => Err(TaskError::internal("an input of the task is not on this worker")),
                };
                PIECES_LOST.with(|l| l.borrow_mut().take());
                let out = match loaded {
                    Ok(inputs) => {
                        let device = slot.and_then(|i| self.gpu_slots.get(i)).map(|(d, _)| d.as_str());
                        let (result, splits) =
                            self.run_task(&next.key, &op, &inputs, &cancel, timeout, device);
                        let lost = match (&result, PIECES_LOST.with(|l| l.borrow_mut().take())) {
                            (Err(_), Some(host)) => split_on(&inputs, &host).map(|i| (i, host)),
                            _ => None,
                        };
                        (result, splits, lost)
                    }
                    Err(e) => (Err(e), Vec::new(), None),
                };
                // Out of device memory with results still on the device:
                // they all go to the host, and the task runs once more
                // (dask-cuda spills on a failed allocation, too).
                let oom = out.0.as_ref().is_err_and(|e| e.message.starts_with(GPU_OOM));
                if oom && !retried && self.device_limit.is_some() {
                    retried = true;
                    let st = self.lock();
                    if st.data.unmoved() > 0 {
                        drop(self.move_while(st, |st| st.data.unmoved() > 0));
                        continue;
                    }
                }
                break out;
            };
            if let Some((_, taken)) = slot.and_then(|i| self.gpu_slots.get(i)) {
                taken.store(false, Ordering::Release);
            }
            if result.is_ok() && !splits.is_empty() {
                die_if(self.kill_at, KillAt::Split);
            }
            if let Err(e) = &result
                && self.device_limit.is_some()
                && e.message.contains(GPU_CALL_FAILED)
            {
                // A user's kernel that failed on the device fails its task
                // (it would fail wherever it ran) before the worker leaves.
                let own = e.message.contains(&format!(": {USER_KERNEL_FAILED}")).then(|| WorkerMsg::Failed {
                    key: next.key.clone(),
                    run: next.run,
                    error: e.clone(),
                });
                self.check_gpu(&e.message, own);
            }
            if from_disk {
                // Inputs read back for this task alone are freed now: hand
                // them back before they count against the limit.
                brisk_engine::memory::release();
            }
            let micros = start.elapsed().as_secs_f64() * 1e6;
            st = self.lock();
            st.running -= 1;
            let current =
                st.tasks.get(&next.key).is_some_and(|t| t.run == next.run && Arc::ptr_eq(&t.cancel, &cancel));
            if !current {
                continue; // cancelled meanwhile: nobody wants this result
            }
            let Some(task) = st.tasks.remove(&next.key) else { continue };
            release_holds(&mut st, &task.holds);
            if task.epoch != st.epoch {
                // Assigned by a scheduler that died: the result is kept and
                // the next scheduler hears of it with the others (`connect`)
                // or, if this worker registered meanwhile, now.
                if let Ok(v) = result {
                    let held =
                        HeldResult { key: next.key.clone(), nbytes: v.nbytes(), pinned: !splits.is_empty() };
                    st.data.insert(next.key.clone(), v);
                    if !splits.is_empty() {
                        st.splits.insert(next.key, splits);
                    }
                    if st.connected {
                        self.report(WorkerMsg::Holds { held: vec![held] });
                    }
                }
                continue;
            }
            if let Some((i, host)) = lost
                && let Some(dep) = task.deps.get(i)
            {
                log::info("worker", &format!("{}: the shuffle pieces on {host} are gone", next.key));
                let msg = WorkerMsg::MissingData {
                    key: next.key,
                    run: next.run,
                    dep: dep.clone(),
                    holders: vec![host],
                };
                self.report(msg);
                continue;
            }
            let pinned = !splits.is_empty();
            match result {
                Ok(v) => {
                    let nbytes = v.nbytes();
                    st.data.insert(next.key.clone(), v);
                    if !splits.is_empty() {
                        st.splits.insert(next.key.clone(), splits);
                    }
                    self.report(WorkerMsg::Finished {
                        thread,
                        key: next.key,
                        run: next.run,
                        nbytes,
                        duration_us: micros,
                        pinned,
                    });
                    // The thread that stored past the device limit moves
                    // the oldest GPU results to the host, and past the
                    // host target writes the oldest out, before it takes
                    // more work.
                    if let Some(limit) = self.device_limit {
                        st = self.move_while(st, |st| st.data.unmoved() > limit);
                    }
                    if let Some(target) = self.at(self.thresholds.target) {
                        st = self.spill_while(st, |st| st.data.unspilled() > target);
                    }
                }
                Err(error) => self.report(WorkerMsg::Failed { key: next.key, run: next.run, error }),
            }
        }
    }

    /// The inputs' values: spilled ones read back from disk (outside the
    /// lock), each returning to memory if it fits under the target; GPU
    /// results moved off the device put back on it (where this process has
    /// a GPU), each staying there if it fits under the device limit.
    fn load(&self, key: &Key, inputs: Vec<Lookup>) -> Result<Vec<Value>, TaskError> {
        let moved = |at: &Lookup| match at {
            Lookup::Disk(..) => true,
            Lookup::Memory(v, Home::Device) => place::device_bytes(v) == 0,
            _ => false,
        };
        if !inputs.iter().any(moved) {
            return Ok(inputs
                .into_iter()
                .filter_map(|i| if let Lookup::Memory(v, _) = i { Some(v) } else { None })
                .collect());
        }
        let gpu = brisk_gpu::runtime().is_ok_and(|rt| !rt.devices().is_empty());
        let upload = |i: usize, v: Value| -> Result<Value, TaskError> {
            if !gpu {
                return Ok(v);
            }
            place::to_device(&v).map_err(|e| {
                let mut e = TaskError::from(e);
                if !e.message.starts_with(GPU_OOM) {
                    e.message = format!("input {i} of {key} cannot go back to the GPU: {}", e.message);
                }
                e
            })
        };
        let mut values = Vec::with_capacity(inputs.len());
        let mut read: Vec<(usize, Option<PathBuf>, Value, Home)> = Vec::new();
        let mut from_disk = false;
        for (i, at) in inputs.into_iter().enumerate() {
            match at {
                Lookup::Memory(v, Home::Device) if place::device_bytes(&v) == 0 => {
                    let v = upload(i, v)?;
                    read.push((i, None, v.clone(), Home::Device));
                    values.push(v);
                }
                Lookup::Memory(v, _) => values.push(v),
                Lookup::Disk(path, home) => {
                    from_disk = true;
                    let v = spill::read(&path).map_err(|e| {
                        TaskError::internal(format!(
                            "input {i} of {key} was spilled to disk and cannot be read back: {e}"
                        ))
                    })?;
                    let v = if home == Home::Device { upload(i, v)? } else { v };
                    read.push((i, Some(path), v.clone(), home));
                    values.push(v);
                }
                Lookup::Missing => {
                    return Err(TaskError::internal("an input of the task is not on this worker"));
                }
            }
        }
        if from_disk {
            // The files' bytes are freed now; hand them back at once, or
            // they count as used (mimalloc keeps freed blocks for a second)
            // and a worker reading spilled inputs outgrows its limit.
            brisk_engine::memory::release();
        }
        let target = self.at(self.thresholds.target).unwrap_or(u64::MAX);
        let mut st = self.lock();
        let WState { tasks, data, fetched, .. } = &mut *st;
        if let Some(task) = tasks.get(key) {
            for (i, path, v, home) in &read {
                let Some(dep) = task.deps.get(*i) else { continue };
                match (home, path, self.device_limit) {
                    (Home::Host, Some(path), _) => data.read_back(dep, path, v, target),
                    // An input fetched from a peer stays on the device for
                    // the other tasks here that read it.
                    (Home::Device, None, _) if !data.contains(dep) => {
                        if let Some(f) = fetched.get_mut(dep)
                            && place::device_bytes(v) > 0
                        {
                            f.0 = v.clone();
                        }
                    }
                    (Home::Device, path, Some(limit)) => data.back_on_device(dep, path.as_deref(), v, limit),
                    _ => {}
                }
            }
        }
        Ok(values)
    }

    /// `fraction` of the memory limit, if there is one.
    /// Bytes of the memory limit at `fraction`; `None` without a limit
    /// or a threshold.
    fn at(&self, fraction: Option<f64>) -> Option<u64> {
        Some((self.memory_limit? as f64 * fraction?) as u64)
    }

    /// Spill the least recently used results, one at a time, while `more`
    /// holds and something is left to spill. Files are written without the
    /// lock; a failed write (a full disk) stops the spilling and the result
    /// stays in memory.
    fn spill_while<'a>(
        &'a self,
        mut st: MutexGuard<'a, WState>,
        mut more: impl FnMut(&WState) -> bool,
    ) -> MutexGuard<'a, WState> {
        while more(&st) {
            let Some(victim) = st.data.victim() else { break };
            drop(st);
            let written = spill::write(&victim.path, &victim.value);
            let failed = written.is_err();
            if let Err(e) = &written
                && !self.spill_failed.swap(true, Ordering::Relaxed)
            {
                let dir = victim.path.parent().map(|p| p.display().to_string()).unwrap_or_default();
                log::warn("worker", &format!("cannot spill to {dir} ({e}); results stay in memory"));
            }
            st = self.lock();
            st.data.spilled_to_disk(victim, written.map_err(|_| ()));
            if failed {
                break;
            }
            // The result's memory is free now: hand it back before the
            // next measure (outside the lock: it costs a few madvise calls).
            drop(st);
            brisk_engine::memory::release();
            st = self.lock();
        }
        st
    }

    /// A free device of `gpu_slots`, now taken by the caller.
    fn take_gpu_slot(&self) -> Option<usize> {
        self.gpu_slots.iter().position(|(_, taken)| {
            taken.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok()
        })
    }

    /// A task failed in a CUDA call: if the device no longer works (a
    /// sticky error, such as an illegal address, leaves the context
    /// unusable), say so to the scheduler, which runs this worker's work
    /// elsewhere, and leave at once; `first` (the task's failure, when the
    /// fault was its own kernel's) is reported before. A device that still
    /// works was the task's error alone.
    fn check_gpu(&self, error: &str, first: Option<WorkerMsg>) {
        let Err(broken) =
            cuda_device().and_then(|d| d.synchronize().map_err(|e| WorkerError::NoGpu(e.to_string())))
        else {
            return;
        };
        if let Some(m) = first {
            self.report(m);
        }
        let error = format!("{error} (the device then: {broken})");
        log::warn(
            "worker",
            &format!("the GPU failed: {error}; leaving, so that the work here runs elsewhere"),
        );
        self.report(WorkerMsg::GpuFailed { error });
        // Time for the writer to send it; then go as a crashed process goes.
        std::thread::sleep(Duration::from_millis(300));
        brisk_engine::pieces::Cleanup::now();
        std::process::exit(i32::from(EXIT_GPU_FAILED));
    }

    /// Move the least recently used GPU results to host memory, one at a
    /// time, while `more` holds and one is left on the device. The copies
    /// run without the lock; a failed one stops the moving and the result
    /// stays on the device.
    fn move_while<'a>(
        &'a self,
        mut st: MutexGuard<'a, WState>,
        mut more: impl FnMut(&WState) -> bool,
    ) -> MutexGuard<'a, WState> {
        while more(&st) {
            let Some(victim) = st.data.device_victim() else { break };
            drop(st);
            let copied = place::to_host(&victim.value);
            if let Err(e) = &copied {
                log::warn("worker", &format!("cannot move {} off the GPU: {e}", victim.key));
            }
            let failed = copied.is_err();
            st = self.lock();
            st.data.moved_to_host(victim, copied.map_err(|_| ()));
            if failed {
                break;
            }
        }
        st
    }

    /// Measure process memory every `every`: past the spill threshold,
    /// spill until it is back under the target; past the pause threshold,
    /// start no task until it falls below again (the scheduler is told, and
    /// sends none). A threshold turned off is never passed.
    fn monitor_memory(&self, every: Duration) {
        let t = self.thresholds;
        if self.memory_limit.is_none() || (t.spill.is_none() && t.pause.is_none()) {
            return;
        }
        let never = u64::MAX;
        let spill_at = self.at(t.spill).unwrap_or(never);
        let pause_at = self.at(t.pause).unwrap_or(never);
        // Forced spilling goes down to the target (or half the spill threshold).
        let target = self.at(t.target).unwrap_or(spill_at / 2).min(spill_at);
        let rss = || brisk_engine::memory::used(brisk_engine::memory::Counts::Resident);
        loop {
            std::thread::sleep(every);
            // Freed results the allocator still keeps are not in use.
            if rss() > target {
                brisk_engine::memory::release();
            }
            let mut st = self.lock();
            if st.closing {
                return;
            }
            if rss() > spill_at {
                st = self.spill_while(st, |_| rss() > target);
            }
            let paused = rss() > pause_at;
            if paused != st.paused {
                st.paused = paused;
                drop(st);
                let used = brisk_engine::memory::fmt_bytes(rss());
                let state =
                    if paused { "pausing: process memory" } else { "resuming: process memory back to" };
                log::info("worker", &format!("{state} {used}"));
                self.report(WorkerMsg::Paused { paused });
                if !paused {
                    self.work.notify_all();
                }
            }
        }
    }

    /// `c.run`'s call, on a thread of its own beside the tasks.
    fn run_call(&self, id: u64, op: &Blob) {
        let key = Key::new(format!("run-{id}").as_str());
        let cancel = Arc::new(AtomicBool::new(false));
        let result = match shipped::resolving(&self.codes, || crate::protocol::decode::<Op>(&op.0)) {
            Ok(op) => {
                let ctx = TaskContext {
                    key: &key,
                    cancelled: &cancel,
                    interrupt: None,
                    device: None,
                    workdir: Some(&self.workdir),
                    output: None,
                    coordinator: Some(&self.task_client),
                    client: Some(&self.task_submit as &(dyn Any + Send + Sync)),
                    seat: None,
                };
                execute_timed(&op, &[], &*self.udfs, &ctx, None)
            }
            Err(e) => Err(TaskError::internal(format!("the call cannot be read: {e}"))),
        };
        self.report(WorkerMsg::RunResult { id, result });
    }

    fn run_task(
        &self,
        key: &Key,
        op: &Blob,
        inputs: &[Value],
        cancel: &Arc<AtomicBool>,
        timeout: Option<Duration>,
        device: Option<&str>,
    ) -> (Result<Value, TaskError>, Vec<(Pieces, u32)>) {
        let op: Op = match shipped::resolving(&self.codes, || crate::protocol::decode(&op.0)) {
            Ok(op) => op,
            Err(e) => {
                let e = TaskError::internal(format!("the task's operation cannot be read: {e}"));
                return (Err(e), Vec::new());
            }
        };
        let output = |line: &str| self.report(WorkerMsg::Output { key: key.clone(), line: line.to_string() });
        let seat: Option<Arc<dyn Seat>> = self.me.upgrade().map(|s| s as Arc<dyn Seat>);
        let ctx = TaskContext {
            key,
            cancelled: cancel,
            interrupt: None,
            device,
            workdir: Some(&self.workdir),
            output: Some(&output),
            coordinator: Some(&self.task_client),
            client: Some(&self.task_submit as &(dyn Any + Send + Sync)),
            seat: seat.as_ref(),
        };
        let splits = op.shuffle_splits().into_iter().map(|(p, i)| (p.clone(), i)).collect();
        let result = execute_timed(&op, inputs, &*self.udfs, &ctx, timeout);
        self.seat_ended(&mut self.lock(), key);
        (result, splits)
    }
}

#[path = "worker_seat.rs"]
mod seat;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_limits_are_fractions_or_sizes() {
        assert_eq!(DeviceLimit::parse("0.8"), Ok(DeviceLimit::Fraction(0.8)));
        assert_eq!(DeviceLimit::parse("1"), Ok(DeviceLimit::Fraction(1.0)));
        assert_eq!(DeviceLimit::parse("16GiB"), Ok(DeviceLimit::Bytes(16 << 30)));
        assert_eq!(DeviceLimit::parse("2000000000"), Ok(DeviceLimit::Bytes(2_000_000_000)));
        for bad in ["0", "-0.5", "half", "", "0B"] {
            assert!(DeviceLimit::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(DeviceLimit::Fraction(0.5).bytes(80 << 30), 40 << 30);
        assert_eq!(DeviceLimit::Bytes(100 << 30).bytes(80 << 30), 80 << 30, "at most the device");
        for l in [DeviceLimit::Fraction(0.25), DeviceLimit::Bytes(12345)] {
            assert_eq!(DeviceLimit::parse(&l.to_arg()), Ok(l));
        }
    }

    #[test]
    fn thresholds_parse_and_travel_as_flags() {
        assert_eq!(parse_threshold("0.5"), Ok(Some(0.5)));
        assert_eq!(parse_threshold("1"), Ok(Some(1.0)));
        assert_eq!(parse_threshold(" OFF "), Ok(None));
        assert_eq!(parse_threshold("false"), Ok(None));
        for bad in ["0", "-0.1", "1.5", "NaN", "inf", "half", ""] {
            assert!(parse_threshold(bad).is_err(), "{bad:?}");
        }
        let t = MemoryThresholds { target: Some(0.25), spill: None, ..MemoryThresholds::default() };
        let args = t.to_args();
        let back: Vec<Option<f64>> =
            args.chunks(2).map(|p| parse_threshold(&p[1]).expect("parses back")).collect();
        assert_eq!(back, [Some(0.25), None, Some(0.8), Some(0.95)]);
    }
}
