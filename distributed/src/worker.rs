//! A worker process: it registers with the scheduler, runs the tasks it is
//! given on a pool of threads, holds their results, serves them to peers
//! and clients on its data port, and fetches the inputs it lacks straight
//! from the workers that hold them (never through the scheduler).
//!
//! I/O runs on a small tokio runtime; tasks run on plain threads (they are
//! CPU-bound and may block), sharing one lock with the I/O side. Reports to
//! the scheduler queue on a channel whose writer sends everything queued
//! as one frame, so a burst of finished tasks is one message.

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use brisk_engine::error::TaskError;
use brisk_engine::exec::execute_caught;
use brisk_engine::key::Key;
use brisk_engine::ops::Op;
use brisk_engine::runner::{TaskContext, UdfRunner};
use brisk_engine::value::Value;
use rustc_hash::{FxHashMap, FxHashSet};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::comm::{self, CommError, Conn, PeerPool};
use crate::log;
use crate::protocol::{Blob, DepAt, PeerMsg, PeerReply, Role, ToWorker, WorkerMsg};
use crate::security::Security;

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
    pub heartbeat: Duration,
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
            heartbeat: Duration::from_millis(500),
        }
    }
}

/// Why a worker stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("cannot reach the scheduler at {address}: {error}")]
    Connect { address: String, error: CommError },
    #[error("lost the scheduler: {0}")]
    Lost(String),
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
}

#[derive(Default)]
struct WState {
    /// Results of tasks run here (the scheduler knows of them).
    data: FxHashMap<Key, Value>,
    data_bytes: u64,
    /// Inputs fetched from peers, with the number of tasks here that need them.
    fetched: FxHashMap<Key, (Value, u32)>,
    tasks: FxHashMap<Key, WTask>,
    ready: BinaryHeap<Ready>,
    /// Inputs on their way, and the tasks waiting for each.
    fetching: FxHashMap<Key, Vec<Key>>,
    running: u32,
    closing: bool,
}

struct Shared {
    state: Mutex<WState>,
    work: Condvar,
    udfs: Arc<dyn UdfRunner>,
    reports: mpsc::UnboundedSender<Vec<WorkerMsg>>,
    security: Security,
    peers: PeerPool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, WState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn report(&self, msg: WorkerMsg) {
        let _ = self.reports.send(vec![msg]);
    }
}

async fn serve(options: WorkerOptions, udfs: Arc<dyn UdfRunner>) -> Result<(), WorkerError> {
    let name = options.name.clone().unwrap_or_else(|| format!("worker-{}", std::process::id()));
    let connect_err = |error| WorkerError::Connect { address: options.scheduler.clone(), error };
    let conn = comm::connect(&options.scheduler, Role::Worker, &name, &options.security)
        .await
        .map_err(connect_err)?;
    // Serve data where the scheduler's connection left this machine, unless told.
    let host = match &options.host {
        Some(h) => h.clone(),
        None => conn.local.map_or_else(|| "127.0.0.1".into(), |a| a.ip().to_string()),
    };
    let listener = TcpListener::bind((host.as_str(), 0)).await?;
    let port = listener.local_addr()?.port();
    let address =
        if host.contains(':') { format!("tcp://[{host}]:{port}") } else { format!("tcp://{host}:{port}") };

    let (reports_tx, reports_rx) = mpsc::unbounded_channel::<Vec<WorkerMsg>>();
    let gpu = match brisk_engine::gpu::probe() {
        brisk_engine::gpu::Gpus::Devices(d) => d
            .first()
            .map(|g| format!("{}, {}", g.name, brisk_engine::memory::fmt_bytes(g.memory_total)))
            .unwrap_or_else(|| "no GPU".into()),
        brisk_engine::gpu::Gpus::None(_) => "no GPU".into(),
    };
    let register = WorkerMsg::Register {
        nthreads: options.nthreads.max(1) as u32,
        memory_limit: options.memory_limit,
        resources: options.resources.clone(),
        address: address.clone(),
        gpu,
        pid: std::process::id(),
    };
    let _ = reports_tx.send(vec![register]);
    let shared = Arc::new(Shared {
        state: Mutex::new(WState::default()),
        work: Condvar::new(),
        udfs,
        reports: reports_tx,
        security: options.security.clone(),
        peers: PeerPool::new(options.security.clone(), &name),
    });
    log::info("worker", &format!("{name} serving data at {address}, scheduler {}", options.scheduler));

    let mut threads = Vec::new();
    for i in 0..options.nthreads.max(1) {
        let s = shared.clone();
        threads
            .push(std::thread::Builder::new().name(format!("brisk-task-{i}")).spawn(move || s.task_loop())?);
    }
    let data_server = tokio::spawn(data_server(listener, shared.clone()));

    let Conn { mut reader, writer, .. } = conn;
    let writer_task = tokio::spawn(comm::send_batches(writer, reports_rx));
    let heartbeat = {
        let s = shared.clone();
        let every = options.heartbeat;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let (memory, running) = {
                    let st = s.lock();
                    (st.data_bytes + st.fetched.values().map(|(v, _)| v.nbytes()).sum::<u64>(), st.running)
                };
                if s.reports.send(vec![WorkerMsg::Heartbeat { memory, running }]).is_err() {
                    return;
                }
            }
        })
    };

    let outcome = loop {
        match reader.next::<Vec<ToWorker>>().await {
            Ok(Some(batch)) => {
                if let Some(reason) = handle_batch(&shared, batch) {
                    log::info("worker", &format!("{name} closing: {reason}"));
                    break Ok(());
                }
            }
            Ok(None) => break Err(WorkerError::Lost("the scheduler closed the connection".into())),
            Err(e) => break Err(WorkerError::Lost(e.to_string())),
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
    writer_task.abort();
    for t in threads {
        let _ = t.join();
    }
    outcome
}

/// Carry out a batch from the scheduler; `Some(reason)` when told to close.
fn handle_batch(shared: &Arc<Shared>, batch: Vec<ToWorker>) -> Option<String> {
    let mut to_fetch: FxHashMap<Vec<String>, Vec<Key>> = FxHashMap::default();
    let mut woke = 0;
    {
        let mut st = shared.lock();
        for msg in batch {
            match msg {
                ToWorker::Compute { key, run, op, deps, priority } => {
                    if compute(&mut st, key, run, op, deps, priority, &mut to_fetch) {
                        woke += 1;
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
                        if let Some(v) = st.data.remove(&k) {
                            st.data_bytes = st.data_bytes.saturating_sub(v.nbytes());
                        }
                    }
                }
                ToWorker::Close { reason } => return Some(reason),
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
fn compute(
    st: &mut WState,
    key: Key,
    run: u32,
    op: Blob,
    deps: Vec<DepAt>,
    priority: (i64, u64, u32),
    to_fetch: &mut FxHashMap<Vec<String>, Vec<Key>>,
) -> bool {
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
        if st.data.contains_key(&d.key) || !seen.insert(d.key.clone()) {
        } else if let Some((_, refs)) = st.fetched.get_mut(&d.key) {
            *refs += 1;
            holds.push(d.key.clone());
        } else if let Some(waiting) = st.fetching.get_mut(&d.key) {
            waiting.push(key.clone());
            missing += 1;
        } else {
            st.fetching.insert(d.key.clone(), vec![key.clone()]);
            to_fetch.entry(d.who_has).or_default().push(d.key.clone());
            missing += 1;
        }
        dep_keys.push(d.key);
    }
    let ready = missing == 0;
    if ready {
        st.ready.push(Ready { priority, key: key.clone(), run });
    }
    let cancel = Arc::new(AtomicBool::new(false));
    st.tasks.insert(key, WTask { run, op, deps: dep_keys, missing, holds, priority, cancel });
    ready
}

fn release_holds(st: &mut WState, holds: &[Key]) {
    for k in holds {
        if let Some((_, refs)) = st.fetched.get_mut(k) {
            *refs -= 1;
            if *refs == 0 {
                st.fetched.remove(k);
            }
        }
    }
}

/// Bring `keys` from one of `who_has`; the tasks waiting for them run once
/// all their inputs are here. A peer that fails is tried again, then the
/// next one; inputs no peer can give fail their tasks (the scheduler
/// retries them where it can).
async fn fetch(shared: Arc<Shared>, keys: Vec<Key>, who_has: Vec<String>) {
    let mut left = keys;
    let mut last_error = String::from("no worker holds it");
    'attempts: for attempt in 0..6u32 {
        for addr in &who_has {
            match shared.peers.get_data(addr, left.clone()).await {
                Ok(values) => {
                    let mut still = Vec::new();
                    for (k, v) in values {
                        match v {
                            Some(v) => land(&shared, k, Ok(v)),
                            None => still.push(k),
                        }
                    }
                    left = still;
                    if left.is_empty() {
                        return;
                    }
                    last_error = format!("{addr} does not hold it");
                }
                Err(e) => last_error = format!("{addr}: {e}"),
            }
            if left.is_empty() {
                break 'attempts;
            }
        }
        // Nobody waits any more (the scheduler cancelled the tasks): stop.
        // Checked and forgotten under one lock, so a task that starts
        // waiting meanwhile is not left without its fetch.
        {
            let mut st = shared.lock();
            let nobody = |st: &WState, k: &Key| {
                st.fetching.get(k).is_none_or(|w| w.iter().all(|t| !st.tasks.contains_key(t)))
            };
            if left.iter().all(|k| nobody(&st, k)) {
                for k in &left {
                    st.fetching.remove(k);
                }
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
    }
    for k in left {
        let error = TaskError::user(format!("could not fetch input {k}: {last_error}"));
        land(&shared, k, Err(error));
    }
}

/// An input arrived (or cannot): the tasks waiting for it move on.
fn land(shared: &Shared, key: Key, value: Result<Value, TaskError>) {
    let mut woke = 0;
    {
        let mut st = shared.lock();
        let mut waiting = st.fetching.remove(&key).unwrap_or_default();
        // A task cancelled and given again while the fetch ran is listed twice.
        waiting.sort_unstable();
        waiting.dedup();
        waiting.retain(|t| st.tasks.contains_key(t));
        match value {
            Ok(v) => {
                if !waiting.is_empty() {
                    st.fetched.insert(key.clone(), (v, waiting.len() as u32));
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
            Err(e) => {
                for t in waiting {
                    if let Some(task) = st.tasks.remove(&t) {
                        release_holds(&mut st, &task.holds);
                        shared.report(WorkerMsg::Failed { key: t, run: task.run, error: e.clone() });
                    }
                }
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
        let (tcp, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors, say: wait instead of spinning.
                log::warn("worker", &format!("cannot accept a connection: {e}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let (_, mut conn) = match comm::accept(tcp, &shared.security, &[Role::Peer]).await {
                Ok(x) => x,
                Err(e) => {
                    log::warn("worker", &format!("dropped a connection from {peer}: {e}"));
                    return;
                }
            };
            loop {
                let msg = match conn.reader.next::<PeerMsg>().await {
                    Ok(Some(m)) => m,
                    Ok(None) => return,
                    Err(e) => {
                        log::warn("worker", &format!("dropped {peer}: {e}"));
                        return;
                    }
                };
                let PeerMsg::GetData { keys } = msg;
                let values = {
                    let st = shared.lock();
                    keys.into_iter()
                        .map(|k| {
                            let v = st
                                .data
                                .get(&k)
                                .cloned()
                                .or_else(|| st.fetched.get(&k).map(|(v, _)| v.clone()));
                            (k, v)
                        })
                        .collect()
                };
                if conn.writer.send(&PeerReply::Data { values }).await.is_err() {
                    return;
                }
            }
        });
    }
}

impl Shared {
    /// A task thread: take the best ready task, run it, store and report.
    fn task_loop(&self) {
        let mut st = self.lock();
        loop {
            if st.closing {
                return;
            }
            let Some(next) = st.ready.pop() else {
                st = self.work.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            let Some(task) = st.tasks.get(&next.key).filter(|t| t.run == next.run) else { continue };
            let inputs: Option<Vec<Value>> = task
                .deps
                .iter()
                .map(|d| st.data.get(d).cloned().or_else(|| st.fetched.get(d).map(|(v, _)| v.clone())))
                .collect();
            let op = task.op.clone();
            let cancel = task.cancel.clone();
            st.running += 1;
            drop(st);
            let start = Instant::now();
            let result = match inputs {
                Some(inputs) => self.run_task(&next.key, &op, &inputs, &cancel),
                None => Err(TaskError::internal("an input of the task is not on this worker")),
            };
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
            match result {
                Ok(v) => {
                    let nbytes = v.nbytes();
                    if let Some(old) = st.data.insert(next.key.clone(), v) {
                        st.data_bytes = st.data_bytes.saturating_sub(old.nbytes());
                    }
                    st.data_bytes += nbytes;
                    self.report(WorkerMsg::Finished {
                        key: next.key,
                        run: next.run,
                        nbytes,
                        duration_us: micros,
                    });
                }
                Err(error) => self.report(WorkerMsg::Failed { key: next.key, run: next.run, error }),
            }
        }
    }

    fn run_task(
        &self,
        key: &Key,
        op: &Blob,
        inputs: &[Value],
        cancel: &Arc<AtomicBool>,
    ) -> Result<Value, TaskError> {
        let op: Op = crate::protocol::decode(&op.0)
            .map_err(|e| TaskError::internal(format!("the task's operation cannot be read: {e}")))?;
        let ctx = TaskContext { key, cancelled: cancel, interrupt: None };
        execute_caught(&op, inputs, &*self.udfs, &ctx)
    }
}
