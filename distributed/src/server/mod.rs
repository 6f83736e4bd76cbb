//! The scheduler process: the same state machine the local runtime drives
//! (`brisk_engine::scheduler`), behind TCP. One task owns the state and
//! takes events (a worker joined, reported, left; a client submitted,
//! released, asked) from the connection tasks in batches; what it decides
//! goes to each peer as one frame per batch. The scheduler never decodes an
//! operation and never holds task results: workers fetch their inputs from
//! each other and clients fetch results from the workers.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use brisk_engine::client::StoryRow;
use brisk_engine::diagnostics::Snapshot;
use brisk_engine::error::{SchedulerError, TaskError, TaskErrorKind};
use brisk_engine::graph::task::Annotations;
use brisk_engine::key::Key;
use brisk_engine::runner::Code;
use brisk_engine::scheduler::{
    Action, Known, NewTask, Scheduler, SchedulerConfig, TaskId, TaskState, WorkerId, WorkerSpec,
};
use rustc_hash::{FxHashMap, FxHashSet};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::comm::{self, CommError};
use crate::journal::{Entry, Journal, JournalError, Restored};
use crate::protocol::{
    Blob, ClientMsg, DepAt, HeldResult, Role, TaskDef, ToClient, ToWorker, WorkerMsg, WorkerRow,
};
use crate::security::Security;
use crate::{http, log};

mod coordinate;
mod run;
mod scaling;

/// How a scheduler runs (`brisk scheduler` flags).
#[derive(Clone, Debug)]
pub struct SchedulerOptions {
    pub host: String,
    /// 0: any free port.
    pub port: u16,
    pub security: Security,
    /// A worker silent for this long is removed (Dask's `worker-ttl`).
    pub worker_ttl: Duration,
    /// Deaths of workers running a task before it errs as `KilledWorker`.
    pub allowed_failures: u32,
    /// The HTTP port (`/health`, `/metrics`, `/api/v1/workers`); `None`:
    /// none. When the port asked for is taken, any free one is used.
    pub http_port: Option<u16>,
    /// Keep a journal here and carry on from it (see `journal`).
    pub journal: Option<PathBuf>,
}

/// Why a scheduler did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Comm(#[from] CommError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(
        "the journal's scheduler listened on port {port}, which is taken ({error}): \
         is that scheduler still running? Workers and clients come back to that port"
    )]
    PortTaken { port: u16, error: std::io::Error },
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            host: "127.0.0.1".into(),
            port: 8786,
            security: Security::default(),
            worker_ttl: Duration::from_secs(30),
            allowed_failures: 3,
            http_port: None,
            journal: None,
        }
    }
}

/// A running scheduler; dropping it (or `stop`) closes it.
pub struct SchedulerHandle {
    pub address: String,
    /// `http://host:port` of the HTTP port, if one is served.
    pub http_address: Option<String>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SchedulerHandle {
    /// Close every connection and stop.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SchedulerHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Bind and start serving on a thread of its own; returns once the port is
/// open, with the address workers and clients connect to.
pub fn start(options: SchedulerOptions) -> Result<SchedulerHandle, StartError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("brisk-scheduler")
        .enable_all()
        .build()?;
    let (journal, restored) = match &options.journal {
        Some(path) => {
            let (j, r) = Journal::open(path)?;
            (Some(j), r)
        }
        None => (None, Restored::default()),
    };
    // A scheduler carrying on from its journal listens where its workers
    // and clients look for it, unless told a port.
    let old_port = restored.address.as_deref().and_then(|a| comm::parse_address(a).ok()).map(|(_, p)| p);
    let listener = match old_port.filter(|_| options.port == 0 && !restored.is_empty()) {
        Some(port) => rt
            .block_on(TcpListener::bind((options.host.as_str(), port)))
            .map_err(|error| StartError::PortTaken { port, error })?,
        None => rt.block_on(TcpListener::bind((options.host.as_str(), options.port)))?,
    };
    let local: SocketAddr = listener.local_addr()?;
    let address = format!("{}://{}", options.security.scheme(), display_addr(&options.host, local));
    let http = match options.http_port {
        None => None,
        Some(port) => {
            let bound = match rt.block_on(TcpListener::bind((options.host.as_str(), port))) {
                Err(e) if port != 0 && e.kind() == std::io::ErrorKind::AddrInUse => {
                    log::warn("scheduler", &format!("HTTP port {port} is taken; using another"));
                    rt.block_on(TcpListener::bind((options.host.as_str(), 0)))?
                }
                other => other?,
            };
            let at = format!("http://{}", display_addr(&options.host, bound.local_addr()?));
            Some((bound, at))
        }
    };
    let http_address = http.as_ref().map(|(_, a)| a.clone());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let addr = address.clone();
    let thread = std::thread::Builder::new().name("brisk-scheduler".into()).spawn(move || {
        rt.block_on(serve(listener, http, options, addr, (journal, restored), stop_rx));
        rt.shutdown_timeout(Duration::from_secs(1));
    })?;
    Ok(SchedulerHandle { address, http_address, stop: Some(stop_tx), thread: Some(thread) })
}

fn display_addr(host: &str, local: SocketAddr) -> String {
    // Keep the name the user gave ("localhost"), with the port the OS chose.
    if host.parse::<std::net::IpAddr>().is_ok() {
        local.to_string()
    } else {
        format!("{host}:{}", local.port())
    }
}

type ConnId = u64;

enum Ev {
    WorkerJoined {
        conn: ConnId,
        name: String,
        reg: WorkerMsg,
        tx: mpsc::UnboundedSender<Vec<ToWorker>>,
    },
    FromWorker(ConnId, Vec<WorkerMsg>),
    ClientJoined {
        conn: ConnId,
        name: String,
        tx: mpsc::UnboundedSender<Vec<ToClient>>,
    },
    FromClient(ConnId, Vec<ClientMsg>),
    Gone {
        conn: ConnId,
        reason: String,
    },
    Tick,
    /// The HTTP port asks for a page.
    Http(http::Ask, tokio::sync::oneshot::Sender<http::Answer>),
}

/// Events waiting for the scheduler's loop before senders wait.
const EVENT_QUEUE: usize = 4096;

async fn serve(
    listener: TcpListener,
    http: Option<(TcpListener, String)>,
    options: SchedulerOptions,
    address: String,
    (journal, restored): (Option<Journal>, Restored),
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    // Bounded: a peer that sends faster than the loop handles waits (its
    // socket fills) instead of growing the scheduler's memory.
    let (ev_tx, mut ev_rx) = mpsc::channel::<Ev>(EVENT_QUEUE);
    let security = Arc::new(options.security.clone());
    let mut state = State::new(&options);
    state.dashboard = http.as_ref().map(|(_, at)| at.clone());
    state.address = address.clone();
    if let Some(j) = journal {
        state.begin_journal(j, restored);
    }
    let refusals = state.refusals.clone();
    log::info("scheduler", &format!("listening at {address}"));
    let http_server = http.map(|(l, _)| {
        let tx = ev_tx.clone();
        let ask: http::AskLoop = Arc::new(move |what, reply| tx.try_send(Ev::Http(what, reply)).is_ok());
        tokio::spawn(http::serve(l, options.security.token.clone(), ask))
    });
    let mut next_conn: ConnId = 1;
    let ticker = {
        let tx = ev_tx.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(500));
            loop {
                every.tick().await;
                if tx.send(Ev::Tick).await.is_err() {
                    return;
                }
            }
        })
    };
    loop {
        tokio::select! {
            _ = &mut stop => break,
            (tcp, _) = comm::next_connection(&listener, "scheduler") => {
                let conn = next_conn;
                next_conn += 1;
                tokio::spawn(connection(tcp, conn, security.clone(), ev_tx.clone(), refusals.clone()));
            }
            ev = ev_rx.recv() => {
                let Some(ev) = ev else { break };
                state.handle(ev);
                // Take what else arrived meanwhile, then send once per peer.
                let mut n = 0;
                while n < 10_000 {
                    let Ok(ev) = ev_rx.try_recv() else { break };
                    state.handle(ev);
                    n += 1;
                }
                state.flush();
            }
        }
    }
    ticker.abort();
    if let Some(h) = http_server {
        h.abort();
    }
    state.close_all("the scheduler is closing");
    log::info("scheduler", "closed");
}

/// One accepted socket: the handshake, then its messages become events.
async fn connection(
    tcp: tokio::net::TcpStream,
    conn: ConnId,
    security: Arc<Security>,
    events: mpsc::Sender<Ev>,
    refusals: Arc<AtomicU64>,
) {
    let peer = tcp.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
    let (hello, c) = match comm::accept(tcp, &security, &[Role::Worker, Role::Client]).await {
        Ok(x) => x,
        Err(e) => {
            refusals.fetch_add(1, Ordering::Relaxed);
            log::warn("scheduler", &format!("dropped a connection from {peer}: {e}"));
            return;
        }
    };
    let mut reader = c.reader;
    let name = if hello.name.is_empty() { peer.clone() } else { hello.name.clone() };
    let reason = match hello.role {
        Role::Worker => {
            // A worker registers at once; a silent one is not kept open.
            let first = tokio::time::timeout(comm::HANDSHAKE_TIMEOUT, reader.next::<Vec<WorkerMsg>>()).await;
            let (first, rest) = match first.unwrap_or(Err(CommError::Timeout(comm::HANDSHAKE_TIMEOUT))) {
                Ok(Some(mut batch)) if matches!(batch.first(), Some(WorkerMsg::Register { .. })) => {
                    // What came in the same frame is reported after joining.
                    let rest = batch.split_off(1);
                    (batch.remove(0), rest)
                }
                Ok(_) => {
                    log::warn("scheduler", &format!("worker {name} ({peer}) did not register; dropped"));
                    return;
                }
                Err(e) => {
                    log::warn("scheduler", &format!("worker {name} ({peer}): {e}; dropped"));
                    return;
                }
            };
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(comm::send_batches(c.writer, rx));
            if events.send(Ev::WorkerJoined { conn, name: name.clone(), reg: first, tx }).await.is_err()
                || (!rest.is_empty() && events.send(Ev::FromWorker(conn, rest)).await.is_err())
            {
                return;
            }
            pump(&mut reader, conn, &events, Ev::FromWorker).await
        }
        Role::Client | Role::Peer => {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(comm::send_batches(c.writer, rx));
            if events.send(Ev::ClientJoined { conn, name: name.clone(), tx }).await.is_err() {
                return;
            }
            pump(&mut reader, conn, &events, Ev::FromClient).await
        }
    };
    let _ = events.send(Ev::Gone { conn, reason }).await;
}

/// Read batches until the peer goes; returns why it went.
async fn pump<T: serde::de::DeserializeOwned>(
    reader: &mut comm::FrameReader,
    conn: ConnId,
    events: &mpsc::Sender<Ev>,
    wrap: fn(ConnId, Vec<T>) -> Ev,
) -> String {
    loop {
        match reader.next::<Vec<T>>().await {
            Ok(Some(batch)) => {
                if events.send(wrap(conn, batch)).await.is_err() {
                    return "the scheduler is closing".into();
                }
            }
            Ok(None) => return "closed the connection".into(),
            Err(e) => return e.to_string(),
        }
    }
}

/// A task's definition. Its key is kept here too: actions are carried out
/// after the state machine moved on, and a task it forgot in the same
/// stimulus (a cancelled task, a freed result) has no key there any more.
struct Spec {
    key: Key,
    op: Blob,
    deps: Vec<Key>,
    /// As submitted: a snapshot of the journal writes the task again.
    order: u32,
    annotations: Option<Arc<Annotations>>,
    /// The closures' code `op` refers to.
    codes: Vec<u128>,
    /// Seconds a run may take.
    timeout: Option<f64>,
}

/// Why a worker's message moved tasks (the story's causes).
enum Why {
    Finished,
    Failed(String),
    Missing(Key, String),
    Copied,
    Paused(bool),
    Leaving,
    Held,
    Nothing,
}

/// What the state machine needs of a task.
fn new_task(t: &TaskDef) -> NewTask {
    NewTask { key: t.key.clone(), deps: t.deps.clone(), order: t.order, annotations: t.annotations.clone() }
}

/// What the scheduler keeps of a task.
fn spec(t: TaskDef) -> Spec {
    let timeout = t.annotations.as_ref().and_then(|a| a.timeout);
    Spec {
        key: t.key,
        op: t.op,
        deps: t.deps,
        order: t.order,
        annotations: t.annotations,
        codes: t.codes,
        timeout,
    }
}

/// Both, for tasks read from the journal.
fn definitions(tasks: impl Iterator<Item = TaskDef>) -> (Vec<NewTask>, Vec<Spec>) {
    tasks.map(|t| (new_task(&t), spec(t))).unzip()
}

/// One transition in the story (see `State::chronicle`).
struct Step {
    time: f64,
    key: Key,
    from: TaskState,
    to: TaskState,
    worker: Option<Arc<str>>,
    cause: Arc<str>,
}

/// How long a retiring worker may take to hand its results over.
const RETIRE_WAIT: Duration = Duration::from_secs(10);

/// How long a scheduler carrying on from its journal waits for the workers
/// that held results before it computes again what they held.
const RESTORE_WAIT: Duration = Duration::from_secs(10);

/// How long the references of a client the journal names are kept for it
/// to come back (it tries for `client::RECONNECT_WAIT`).
const CLIENT_WAIT: Duration = Duration::from_secs(90);

/// Transitions the scheduler remembers for `story()`.
const STORY_STEPS: usize = 100_000;

struct WorkerConn {
    id: WorkerId,
    /// The worker process's own id (the same on every connection).
    uid: u64,
    name: Arc<str>,
    /// The story's cause for the tasks it finishes, made once.
    finished: Arc<str>,
    address: String,
    nthreads: u32,
    memory_limit: Option<u64>,
    resources: Vec<(String, f64)>,
    gpu: String,
    pid: u32,
    memory: u64,
    spilled: u64,
    /// A CUDA worker's device memory limit, device bytes of its results,
    /// and those moved off the device (its last heartbeat).
    device_memory_limit: Option<u64>,
    device_memory: u64,
    device_spilled: u64,
    device_transferred: u64,
    /// Bytes it fetched from peers (its last heartbeat).
    transferred: u64,
    last_seen: Instant,
    tx: mpsc::UnboundedSender<Vec<ToWorker>>,
    outbox: Vec<ToWorker>,
    /// The codes sent to it and not forgotten since.
    codes: FxHashSet<u128>,
}

struct ClientConn {
    /// The client's own id (`Attach`), the same on every connection.
    id: u64,
    name: String,
    /// `None`: a client the journal names that has not come back yet.
    tx: Option<mpsc::UnboundedSender<Vec<ToClient>>>,
    outbox: Vec<ToClient>,
    /// This client's references, per task.
    wants: FxHashMap<TaskId, u32>,
    /// Whether it asked for the task stream.
    stream: bool,
}

struct State {
    core: Scheduler,
    out: Vec<Action>,
    specs: FxHashMap<TaskId, Spec>,
    /// Closures' code, with the number of specs that refer to it.
    codes: FxHashMap<u128, (Arc<Code>, usize)>,
    workers: BTreeMap<ConnId, WorkerConn>,
    by_worker: FxHashMap<WorkerId, ConnId>,
    clients: BTreeMap<ConnId, ClientConn>,
    /// Clients to tell when a task finishes or fails.
    watchers: FxHashMap<TaskId, Vec<ConnId>>,
    worker_ttl: Duration,
    /// Connections refused in the handshake (counted by the connection tasks).
    refusals: Arc<AtomicU64>,
    /// Bytes moved between workers by workers that left.
    transferred_gone: u64,
    /// The task stream's clock starts here.
    t0: Instant,
    /// The story of the keys (`story()`): transitions with their causes.
    story: VecDeque<Step>,
    /// The last stimulus whose transitions are in `story`.
    story_seen: u64,
    /// Workers leaving on purpose, since when (see `check_retiring`).
    retiring: FxHashMap<ConnId, Instant>,
    /// The HTTP port's address, for clients' `dashboard_link`.
    dashboard: Option<String>,
    /// Where this scheduler listens (written in the journal).
    address: String,
    journal: Option<Journal>,
    /// Carrying on from the journal, until its workers are back.
    restoring: Option<Restoring>,
    /// Clients the journal named that have not come back, by id, with the
    /// connection id their references are kept under.
    absent: FxHashMap<u64, ConnId>,
    /// When the references of absent clients are dropped.
    absent_until: Option<Instant>,
    scaling: scaling::Scaling,
    /// `Variable`, `Queue`, `Lock`… of the cluster's clients and tasks.
    coordination: coordinate::Coordination,
    /// `c.run` calls waiting for their workers' answers.
    runs: run::Runs,
}

/// A scheduler started on a journal that says there is work, until the
/// workers that held results are back (or `RESTORE_WAIT` passed).
struct Restoring {
    since: Instant,
    restored: Restored,
    /// Workers (ids) that held results and have not come back.
    waiting: FxHashSet<u64>,
    /// What each worker that came back holds.
    held: Vec<(ConnId, Vec<HeldResult>)>,
    /// Clients' messages, handled once the graph is back.
    queued: Vec<(ConnId, ClientMsg)>,
}

/// Connection ids of clients the journal names (never a real connection's).
const ABSENT_CONN: ConnId = 1 << 62;

impl State {
    fn new(options: &SchedulerOptions) -> State {
        State {
            core: Scheduler::new(SchedulerConfig {
                // Drained into `story` after every stimulus.
                story_capacity: 10_000,
                // A few round trips' worth of short tasks wait on each thread.
                backlog_us: 2000.0,
                // A result that took a quarter of a second of work and fits
                // in 1 MiB is worth a copy: a lost worker then costs little.
                replicate_after_us: 250_000.0,
                allowed_failures: options.allowed_failures,
                ..SchedulerConfig::default()
            }),
            out: Vec::new(),
            specs: FxHashMap::default(),
            codes: FxHashMap::default(),
            workers: BTreeMap::new(),
            by_worker: FxHashMap::default(),
            clients: BTreeMap::new(),
            watchers: FxHashMap::default(),
            worker_ttl: options.worker_ttl,
            refusals: Arc::new(AtomicU64::new(0)),
            t0: Instant::now(),
            story: VecDeque::new(),
            story_seen: 0,
            retiring: FxHashMap::default(),
            transferred_gone: 0,
            dashboard: None,
            address: String::new(),
            journal: None,
            restoring: None,
            absent: FxHashMap::default(),
            absent_until: None,
            scaling: scaling::Scaling::default(),
            coordination: coordinate::Coordination::default(),
            runs: run::Runs::default(),
        }
    }

    /// Start journaling: a journal with work in it is carried on from
    /// once the workers that held results are back; an empty one is
    /// written anew.
    fn begin_journal(&mut self, journal: Journal, restored: Restored) {
        if let Some(d) = &restored.damage {
            log::warn(
                "scheduler",
                &format!(
                    "journal {}: {d}; the {} records before it are used (the file is kept as .damaged)",
                    journal.path().display(),
                    restored.records
                ),
            );
        }
        self.journal = Some(journal);
        if restored.is_empty() {
            self.write_journal_snapshot();
            return;
        }
        let waiting: FxHashSet<u64> = restored.holders().into_iter().collect();
        log::info(
            "scheduler",
            &format!(
                "carrying on from the journal: {} tasks, {} clients; waiting for {} workers that held results",
                restored.tasks.len(),
                restored.clients.len(),
                waiting.len()
            ),
        );
        self.restoring = Some(Restoring {
            since: Instant::now(),
            restored,
            waiting,
            held: Vec::new(),
            queued: Vec::new(),
        });
    }

    /// The graph from the journal goes back into the state machine, with
    /// the results the workers that came back hold; then the clients'
    /// messages that waited are handled.
    fn finish_restore(&mut self) {
        let Some(r) = self.restoring.take() else { return };
        let Restoring { restored, held, queued, waiting, .. } = r;
        if !waiting.is_empty() {
            let names: Vec<&str> =
                waiting.iter().filter_map(|id| restored.workers.get(id).map(String::as_str)).collect();
            log::warn(
                "scheduler",
                &format!(
                    "workers {} did not come back; what only they held is computed again",
                    names.join(", ")
                ),
            );
        }
        let Restored { tasks, codes, clients, erred, .. } = restored;
        let mut known = Known::default();
        for (conn, list) in held {
            let Some(w) = self.workers.get_mut(&conn) else { continue };
            let mut unknown = Vec::new();
            for h in list {
                if tasks.contains_key(&h.key) {
                    known.held.push((h.key, w.id, h.nbytes, h.pinned));
                } else {
                    unknown.push(h.key);
                }
            }
            if !unknown.is_empty() {
                w.outbox.push(ToWorker::Free { keys: unknown });
            }
        }
        known.erred = erred.into_iter().filter(|(k, _)| tasks.contains_key(k)).collect();
        for c in clients.values() {
            let wants = c.wants.iter().filter(|(k, _)| tasks.contains_key(*k));
            known.wants.extend(wants.map(|(k, n)| (k.clone(), *n)));
        }
        // Kept to free them should the graph not go back.
        let held_keys: Vec<(WorkerId, Key)> = known.held.iter().map(|(k, w, ..)| (*w, k.clone())).collect();
        let (new, defs) = definitions(tasks.into_values());
        let ntasks = new.len();
        if let Err(e) = self.core.restore(new, &[], known, &mut self.out) {
            log::warn("scheduler", &format!("the journal's graph cannot be restored ({e}); starting empty"));
            for (w, key) in held_keys.iter().cloned() {
                self.tell_worker(w, ToWorker::Free { keys: vec![key] });
            }
        } else {
            self.keep_specs(defs, &codes);
        }
        let nheld = held_keys.len();
        for (id, c) in clients {
            let conn = ABSENT_CONN + self.absent.len() as ConnId;
            self.absent.insert(id, conn);
            self.clients.insert(
                conn,
                ClientConn {
                    id,
                    name: c.name,
                    tx: None,
                    outbox: Vec::new(),
                    wants: FxHashMap::default(),
                    stream: false,
                },
            );
            for (k, n) in c.wants {
                if let Some(t) = self.core.lookup(&k) {
                    self.add_watch(conn, t, n);
                }
            }
        }
        self.absent_until = Some(Instant::now() + CLIENT_WAIT);
        log::info(
            "scheduler",
            &format!(
                "restored {ntasks} tasks from the journal, {nheld} results held by workers that came back"
            ),
        );
        self.chronicle(|_| Arc::from("restored from the journal after the scheduler restarted"));
        self.apply();
        self.write_journal_snapshot();
        for (conn, msg) in queued {
            if self.clients.contains_key(&conn) {
                self.on_client(conn, msg);
                self.apply();
            }
        }
    }

    /// Keep the definitions of the tasks the state machine now holds, and
    /// count their references to code.
    fn keep_specs(&mut self, defs: Vec<Spec>, sent: &FxHashMap<u128, Arc<Code>>) {
        for spec in defs {
            let Some(t) = self.core.lookup(&spec.key) else { continue };
            if let std::collections::hash_map::Entry::Vacant(e) = self.specs.entry(t) {
                for c in &spec.codes {
                    if let Some(entry) = self.codes.get_mut(c) {
                        entry.1 += 1;
                    } else if let Some(code) = sent.get(c) {
                        self.codes.insert(*c, (code.clone(), 1));
                    }
                }
                e.insert(spec);
            }
        }
    }

    /// Write the whole state as the journal (it then grows from there).
    fn write_journal_snapshot(&mut self) {
        if self.journal.is_none() {
            return;
        }
        let entries = self.snapshot_entries();
        if let Some(j) = self.journal.as_mut() {
            j.snapshot(entries);
        }
    }

    fn snapshot_entries(&self) -> Vec<Entry> {
        let mut out = vec![Entry::Address(self.address.clone())];
        for w in self.workers.values() {
            out.push(Entry::Worker { id: w.uid, name: w.name.to_string() });
        }
        let tasks: Vec<TaskDef> = self
            .specs
            .values()
            .map(|s| TaskDef {
                key: s.key.clone(),
                deps: s.deps.clone(),
                order: s.order,
                annotations: s.annotations.clone(),
                op: s.op.clone(),
                codes: s.codes.clone(),
            })
            .collect();
        out.extend(crate::journal::graph_entries(tasks, |id| self.codes.get(&id).map(|(c, _)| c.clone())));
        for c in self.clients.values() {
            let wants: Vec<(Key, u32)> =
                c.wants.iter().filter_map(|(t, n)| Some((self.key_of(*t)?, *n))).collect();
            if !wants.is_empty() {
                out.push(Entry::Wants { client: c.id, name: c.name.clone(), wants });
            }
        }
        let mut held: BTreeMap<u64, Vec<HeldResult>> = BTreeMap::new();
        for (t, s) in &self.specs {
            match self.core.state(*t) {
                Some(TaskState::Memory) => {
                    let h = HeldResult {
                        key: s.key.clone(),
                        nbytes: self.core.nbytes(*t),
                        pinned: self.core.pinned(*t),
                    };
                    for w in self.core.who_has(*t) {
                        if let Some(id) = self.uid_of(*w) {
                            held.entry(id).or_default().push(h.clone());
                        }
                    }
                }
                Some(TaskState::Erred) => {
                    if let Some(error) = self.core.error(*t) {
                        out.push(Entry::Erred { key: s.key.clone(), error: (*error).clone() });
                    }
                }
                _ => {}
            }
        }
        out.extend(held.into_iter().map(|(worker, held)| Entry::Held { worker, held }));
        out
    }

    /// The worker process's own id of state-machine worker `w`.
    fn uid_of(&self, w: WorkerId) -> Option<u64> {
        self.by_worker.get(&w).and_then(|c| self.workers.get(c)).map(|wc| wc.uid)
    }

    /// Add a record, if there is a journal (callers building costly
    /// records check `self.journal` first).
    fn journal(&mut self, e: Entry) {
        if let Some(j) = self.journal.as_mut() {
            j.add(e);
        }
    }

    /// Note in the journal that worker `w` holds `t`'s result, if the
    /// state machine took it.
    fn journal_held(&mut self, w: WorkerId, t: TaskId) {
        if self.journal.is_none() || !self.core.who_has(t).contains(&w) {
            return;
        }
        let (Some(key), Some(uid)) = (self.key_of(t), self.uid_of(w)) else { return };
        let held = vec![HeldResult { key, nbytes: self.core.nbytes(t), pinned: self.core.pinned(t) }];
        self.journal(Entry::Held { worker: uid, held });
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::WorkerJoined { conn, name, reg, tx } => self.worker_joined(conn, name, reg, tx),
            Ev::FromWorker(conn, batch) => {
                let Some(w) = self.workers.get_mut(&conn) else { return };
                w.last_seen = Instant::now();
                let wid = w.id;
                for msg in batch {
                    self.on_worker(conn, wid, msg);
                }
            }
            Ev::ClientJoined { conn, name, tx } => {
                log::info("scheduler", &format!("client {name} connected"));
                let client = ClientConn {
                    // Until it attaches with its own.
                    id: conn | (1 << 63),
                    name,
                    tx: Some(tx),
                    outbox: Vec::new(),
                    wants: FxHashMap::default(),
                    stream: false,
                };
                self.clients.insert(conn, client);
            }
            Ev::FromClient(conn, batch) => {
                if let Some(r) = self.restoring.as_mut() {
                    r.queued.extend(batch.into_iter().map(|m| (conn, m)));
                    return;
                }
                for msg in batch {
                    self.on_client(conn, msg);
                }
            }
            Ev::Gone { conn, reason } => self.gone(conn, &reason),
            Ev::Tick => self.tick(),
            Ev::Http(what, reply) => {
                let _ = reply.send(match what {
                    http::Ask::Metrics => Ok(self.metrics()),
                    http::Ask::Workers => {
                        Ok(serde_json::to_string(&self.rows()).unwrap_or_else(|_| "[]".into()))
                    }
                    http::Ask::AdaptiveTarget(t) => Ok(self.http_adaptive_target(t)),
                    http::Ask::GetWorkers => Ok(self.http_get_workers()),
                    http::Ask::CheckIdle => Ok(self.http_check_idle()),
                    http::Ask::RetireWorkers(body) => self.http_retire_workers(&body),
                });
            }
        }
        self.apply();
    }

    fn worker_joined(
        &mut self,
        conn: ConnId,
        name: String,
        reg: WorkerMsg,
        tx: mpsc::UnboundedSender<Vec<ToWorker>>,
    ) {
        let WorkerMsg::Register {
            nthreads,
            memory_limit,
            device_memory_limit,
            resources,
            address,
            gpu,
            pid,
            id: uid,
            held,
        } = reg
        else {
            return;
        };
        let taken = self.workers.values().any(|w| *w.name == *name);
        let name = if taken { format!("{name}-{conn}") } else { name };
        let spec = WorkerSpec { name: name.clone(), nthreads, resources: resources.clone() };
        let id = self.core.add_worker(spec, &mut self.out);
        log::info("scheduler", &format!("worker {name} joined at {address} ({nthreads} threads)"));
        // Retiring workers whose results had nowhere to go copy them here.
        let stranded: Vec<WorkerId> = self
            .retiring
            .keys()
            .filter_map(|c| self.workers.get(c).map(|w| w.id))
            .filter(|w| self.core.stranded(*w))
            .collect();
        for w in stranded {
            self.core.retire_worker(w, &mut self.out);
        }
        self.by_worker.insert(id, conn);
        let finished = Arc::from(format!("finished on {name}"));
        let registered = ToWorker::Registered { journaled: self.journal.is_some() };
        self.journal(Entry::Worker { id: uid, name: name.clone() });
        self.workers.insert(
            conn,
            WorkerConn {
                id,
                uid,
                name: Arc::from(name.as_str()),
                finished,
                address,
                nthreads,
                memory_limit,
                resources,
                gpu,
                pid,
                memory: 0,
                spilled: 0,
                device_memory_limit,
                device_memory: 0,
                device_spilled: 0,
                device_transferred: 0,
                transferred: 0,
                last_seen: Instant::now(),
                tx,
                outbox: vec![registered],
                codes: FxHashSet::default(),
            },
        );
        self.chronicle(|_| Arc::from(format!("worker {name} joined")));
        if let Some(r) = self.restoring.as_mut() {
            r.waiting.remove(&uid);
            r.held.push((conn, held));
            if r.waiting.is_empty() {
                self.finish_restore();
            }
        } else if !held.is_empty() {
            self.on_worker(conn, id, WorkerMsg::Holds { held });
        }
    }

    fn on_worker(&mut self, conn: ConnId, wid: WorkerId, msg: WorkerMsg) {
        let why = match &msg {
            WorkerMsg::Finished { .. } => Why::Finished,
            WorkerMsg::Failed { error, .. } => Why::Failed(error.to_string()),
            WorkerMsg::MissingData { dep, holders, .. } => Why::Missing(dep.clone(), holders.join(", ")),
            WorkerMsg::Replicated { .. } => Why::Copied,
            WorkerMsg::Paused { paused } => Why::Paused(*paused),
            WorkerMsg::Closing => Why::Leaving,
            WorkerMsg::Holds { .. } => Why::Held,
            WorkerMsg::Register { .. }
            | WorkerMsg::Heartbeat { .. }
            | WorkerMsg::GpuFailed { .. }
            | WorkerMsg::Output { .. }
            | WorkerMsg::RunResult { .. }
            | WorkerMsg::Seceded { .. } => Why::Nothing,
        };
        self.on_worker_msg(conn, wid, msg);
        self.chronicle(|s| {
            let Some(w) = s.workers.get(&conn) else { return Arc::from("a worker that left") };
            match why {
                Why::Finished => w.finished.clone(),
                Why::Failed(e) => Arc::from(format!("failed on {}: {e}", w.name)),
                Why::Missing(dep, from) => {
                    Arc::from(format!("{} could not fetch its input {dep} from {from}", w.name))
                }
                Why::Copied => Arc::from(format!("a copy made on {}", w.name)),
                Why::Paused(true) => Arc::from(format!("{} paused (memory)", w.name)),
                Why::Paused(false) => Arc::from(format!("{} running again", w.name)),
                Why::Leaving => {
                    Arc::from(format!("{} is leaving: its results move to other workers", w.name))
                }
                Why::Held => {
                    Arc::from(format!("{} still holds it from before the scheduler restarted", w.name))
                }
                Why::Nothing => Arc::from(format!("a message from {}", w.name)),
            }
        });
    }

    /// Note the transitions of the stimulus just handled in the story,
    /// with its time and `cause` (made only when there are any).
    fn chronicle(&mut self, cause: impl FnOnce(&State) -> Arc<str>) {
        self.chronicle_gone(cause, None);
    }

    /// As `chronicle`; `gone` names a worker already removed here.
    fn chronicle_gone(
        &mut self,
        cause: impl FnOnce(&State) -> Arc<str>,
        gone: Option<(WorkerId, &Arc<str>)>,
    ) {
        let now = self.core.stimulus();
        if now == self.story_seen {
            return;
        }
        let cause = cause(self);
        let time = self.t0.elapsed().as_secs_f64();
        for e in self.core.story_since(self.story_seen) {
            let worker = e.worker.and_then(|w| match gone {
                Some((id, name)) if id == w => Some(name.clone()),
                _ => self.by_worker.get(&w).and_then(|c| self.workers.get(c)).map(|r| r.name.clone()),
            });
            if self.story.len() == STORY_STEPS {
                self.story.pop_front();
            }
            let step =
                Step { time, key: e.key.clone(), from: e.from, to: e.to, worker, cause: cause.clone() };
            self.story.push_back(step);
        }
        self.story_seen = now;
    }

    /// The steps of `keys` still remembered, oldest first.
    fn story_of(&self, keys: &[Key]) -> Vec<StoryRow> {
        let keys: FxHashSet<&Key> = keys.iter().collect();
        self.story
            .iter()
            .filter(|s| keys.contains(&s.key))
            .map(|s| StoryRow {
                time: s.time,
                key: s.key.clone(),
                from: s.from.name().into(),
                to: s.to.name().into(),
                worker: s.worker.as_deref().map(str::to_string),
                cause: s.cause.to_string(),
            })
            .collect()
    }

    fn on_worker_msg(&mut self, conn: ConnId, wid: WorkerId, msg: WorkerMsg) {
        if self.restoring.is_some() {
            // Nothing is assigned yet: reports can only be late ones.
            match msg {
                WorkerMsg::Holds { held } => {
                    if let Some(r) = self.restoring.as_mut() {
                        r.held.push((conn, held));
                    }
                    return;
                }
                WorkerMsg::Finished { .. } | WorkerMsg::Failed { .. } | WorkerMsg::MissingData { .. } => {
                    return;
                }
                _ => {}
            }
        }
        match msg {
            WorkerMsg::Register { .. } => {}
            WorkerMsg::Holds { held } => {
                // Made for the scheduler before this one: kept where it
                // serves as a copy, freed where it does not.
                for h in held {
                    self.holds_copy(conn, wid, h.key);
                }
            }
            WorkerMsg::Finished { key, run, nbytes, duration_us, thread, pinned } => {
                self.stream(conn, &key, thread, duration_us, true);
                if let Some(t) = self.core.lookup(&key) {
                    if pinned {
                        self.core.pin(t);
                    }
                    self.core.task_finished(wid, t, run, nbytes, duration_us, &mut self.out);
                    self.journal_held(wid, t);
                } else if let Some(w) = self.workers.get_mut(&conn) {
                    // A result nobody knows any more: free it.
                    w.outbox.push(ToWorker::Free { keys: vec![key] });
                }
            }
            WorkerMsg::Failed { key, run, error } => {
                self.stream(conn, &key, 0, 0.0, false);
                if let Some(t) = self.core.lookup(&key) {
                    self.core.task_failed(wid, t, run, error, &mut self.out);
                }
            }
            WorkerMsg::MissingData { key, run, dep, holders } => {
                log::info(
                    "scheduler",
                    &format!("{key}: its input {dep} could not be fetched from {}", holders.join(", ")),
                );
                let holders: Vec<WorkerId> =
                    self.workers.values().filter(|w| holders.contains(&w.address)).map(|w| w.id).collect();
                if let Some(t) = self.core.lookup(&key) {
                    self.core.missing_data(wid, t, run, &dep, &holders, &mut self.out);
                }
            }
            WorkerMsg::Heartbeat {
                memory,
                transferred,
                spilled,
                device,
                device_spilled,
                device_transferred,
                ..
            } => {
                if let Some(w) = self.workers.get_mut(&conn) {
                    w.memory = memory;
                    w.transferred = transferred;
                    w.spilled = spilled;
                    w.device_memory = device;
                    w.device_spilled = device_spilled;
                    w.device_transferred = device_transferred;
                }
            }
            // Retiring workers are checked on the tick, not per copy:
            // `retired` looks at everything the worker holds.
            WorkerMsg::Replicated { key } => self.holds_copy(conn, wid, key),
            WorkerMsg::Paused { paused } => {
                if let Some(w) = self.workers.get(&conn) {
                    let what = if paused {
                        "paused (process memory past its pause threshold)"
                    } else {
                        "running again"
                    };
                    log::info("scheduler", &format!("worker {} {what}", w.name));
                }
                self.core.pause_worker(wid, paused, &mut self.out);
            }
            WorkerMsg::Closing => {
                self.retiring.entry(conn).or_insert_with(Instant::now);
                self.core.retire_worker(wid, &mut self.out);
                self.check_retiring();
            }
            WorkerMsg::GpuFailed { error } => {
                if let Some(w) = self.workers.get(&conn) {
                    log::warn(
                        "scheduler",
                        &format!("worker {}: its GPU ({}) failed: {error}", w.name, w.gpu),
                    );
                }
                self.gone(conn, &format!("its GPU failed: {error}"));
            }
            WorkerMsg::RunResult { id, result } => self.run_result(conn, id, result),
            WorkerMsg::Seceded { key, run, seceded } => {
                if let Some(t) = self.core.lookup(&key)
                    && self.core.current_run(t) == Some(run)
                {
                    if seceded {
                        self.core.secede(t, &mut self.out);
                    } else {
                        self.core.rejoin(t, &mut self.out);
                    }
                }
            }
            WorkerMsg::Output { key, line } => {
                let Some(worker) = self.workers.get(&conn).map(|w| w.name.to_string()) else { return };
                for c in self.clients.values_mut().filter(|c| c.stream) {
                    c.outbox.push(ToClient::Output {
                        key: key.clone(),
                        worker: worker.clone(),
                        line: line.clone(),
                    });
                }
            }
        }
    }

    /// Worker `wid` holds a copy of `key`'s result: counted where the
    /// result is in memory, freed there otherwise.
    fn holds_copy(&mut self, conn: ConnId, wid: WorkerId, key: Key) {
        match self.core.lookup(&key) {
            Some(t) => {
                self.core.add_replica(wid, t, &mut self.out);
                self.journal_held(wid, t);
                // Clients fetching it learn of the new copy: the worker
                // they were told of may be leaving (retired, scaled down).
                if let Some(conns) = self.watchers.get(&t).cloned()
                    && self.core.state(t) == Some(TaskState::Memory)
                {
                    let who_has = self.addresses(t);
                    for c in conns {
                        self.tell_client(
                            c,
                            ToClient::InMemory { key: key.clone(), who_has: who_has.clone() },
                        );
                    }
                }
            }
            None => {
                if let Some(w) = self.workers.get_mut(&conn) {
                    w.outbox.push(ToWorker::Free { keys: vec![key] });
                }
            }
        }
    }

    /// Tell the clients that asked for the stream that a task ran.
    fn stream(&mut self, conn: ConnId, key: &Key, thread: u32, duration_us: f64, ok: bool) {
        if !self.clients.values().any(|c| c.stream) {
            return;
        }
        let Some(worker) = self.workers.get(&conn).map(|w| w.name.clone()) else { return };
        let stop_us = self.t0.elapsed().as_micros() as u64;
        let start_us = stop_us.saturating_sub(duration_us as u64);
        for c in self.clients.values_mut().filter(|c| c.stream) {
            let ran = ToClient::TaskRan {
                key: key.clone(),
                worker: worker.to_string(),
                thread,
                start_us,
                stop_us,
                ok,
            };
            c.outbox.push(ran);
        }
    }

    fn on_client(&mut self, conn: ConnId, msg: ClientMsg) {
        let what = match &msg {
            ClientMsg::Attach { .. } => "attached",
            ClientMsg::UpdateGraph { .. } => "submitted",
            ClientMsg::Release { .. } => "released",
            ClientMsg::Restart { .. } => "restarted",
            ClientMsg::Retire { .. } | ClientMsg::RetireWorkers { .. } => "workers retired",
            _ => "asked",
        };
        self.on_client_msg(conn, msg);
        self.chronicle(|s| {
            let name = s.clients.get(&conn).map_or("?", |c| c.name.as_str());
            Arc::from(format!("{what} by client {name}"))
        });
    }

    fn on_client_msg(&mut self, conn: ConnId, msg: ClientMsg) {
        match msg {
            ClientMsg::Attach { id, wants } => self.attach(conn, id, wants),
            ClientMsg::Stream => {
                if let Some(c) = self.clients.get_mut(&conn) {
                    c.stream = true;
                }
            }
            ClientMsg::UpdateGraph { id, tasks, wants, codes } => {
                self.update_graph(conn, id, tasks, wants, codes)
            }
            ClientMsg::Release { keys } => {
                let mut released = Vec::new();
                for k in keys {
                    let Some(t) = self.core.lookup(&k) else { continue };
                    self.release_want(conn, t, 1);
                    if self.journal.is_some() {
                        released.push(k);
                    }
                }
                if let Some(client) = self.clients.get(&conn).map(|c| c.id) {
                    self.journal(Entry::Release { client, keys: released });
                }
            }
            ClientMsg::Info { id } => {
                let (workers, snapshot) = (self.rows(), self.snapshot());
                let dashboard = self.dashboard.clone();
                self.tell_client(conn, ToClient::Info { id, workers, snapshot, dashboard });
            }
            ClientMsg::Restart { id } => {
                self.restart();
                self.tell_client(conn, ToClient::Done { id });
            }
            ClientMsg::Validate { id } => {
                let error = self.validate().err();
                self.tell_client(conn, ToClient::Validated { id, error });
            }
            ClientMsg::Coordinate { id, op, wait } => self.coordinate(conn, id, op, wait),
            ClientMsg::Withdraw { id } => self.withdraw(conn, id),
            ClientMsg::Run { id, op } => self.run_everywhere(conn, id, op),
            ClientMsg::Story { id, keys } => {
                let rows = self.story_of(&keys);
                self.tell_client(conn, ToClient::Story { id, rows });
            }
            ClientMsg::Retire { id, n } => {
                self.retire(n as usize);
                self.tell_client(conn, ToClient::Done { id });
            }
            ClientMsg::RetireWorkers { id, names } => {
                self.retire_named(&names);
                self.tell_client(conn, ToClient::Done { id });
            }
            ClientMsg::Adaptive { id, rule } => {
                let answer = self.adaptive(&rule);
                self.tell_client(conn, ToClient::Adaptive { id, answer });
            }
        }
    }

    fn update_graph(
        &mut self,
        conn: ConnId,
        id: u64,
        tasks: Vec<TaskDef>,
        wants: Vec<Key>,
        codes: Vec<Arc<Code>>,
    ) {
        let sent: FxHashMap<u128, Arc<Code>> = codes.iter().map(|c| (c.id, c.clone())).collect();
        let missing = tasks.iter().find_map(|t| {
            let id = t.codes.iter().find(|c| !sent.contains_key(c) && !self.codes.contains_key(c))?;
            Some(SchedulerError::MissingCode { task: t.key.clone(), code: format!("{id:032x}") })
        });
        if let Some(error) = missing {
            self.tell_client(conn, ToClient::Refused { id, error });
            return;
        }
        let new: Vec<NewTask> = tasks.iter().map(new_task).collect();
        if let Err(error) = self.core.submit(new, &wants, &mut self.out) {
            self.tell_client(conn, ToClient::Refused { id, error });
            return;
        }
        if let Some(j) = self.journal.as_mut() {
            let client = self.clients.get(&conn).map_or(0, |c| c.id);
            j.add_graph(client, &tasks, &wants, &codes);
        }
        let defs = tasks.into_iter().map(spec).collect();
        self.keep_specs(defs, &sent);
        // Register the references before the actions (a result already in
        // memory is announced by them) are carried out.
        for k in &wants {
            if let Some(t) = self.core.lookup(k) {
                self.add_watch(conn, t, 1);
            }
        }
        self.tell_client(conn, ToClient::Accepted { id });
    }

    /// A client says who it is and which references it holds: a client
    /// the journal named gets its references back (and hears where each
    /// result stands now); the scheduler's count is made the client's.
    fn attach(&mut self, conn: ConnId, id: u64, wants: Vec<(Key, u32)>) {
        if !self.clients.contains_key(&conn) {
            return;
        }
        if let Some(absent) = self.absent.remove(&id)
            && let Some(old) = self.clients.remove(&absent)
        {
            for t in old.wants.keys() {
                if let Some(w) = self.watchers.get_mut(t) {
                    w.retain(|c| *c != absent);
                    if !w.contains(&conn) {
                        w.push(conn);
                    }
                }
            }
            if let Some(c) = self.clients.get_mut(&conn) {
                c.wants = old.wants;
                log::info("scheduler", &format!("client {} came back after the restart", c.name));
            }
        }
        let journaled = self.journal.is_some();
        let Some(c) = self.clients.get_mut(&conn) else { return };
        c.id = id;
        let had = !c.wants.is_empty();
        // The client's count wins: releases (and submissions it was told
        // failed) may not have reached the journal before the restart.
        let mut want: FxHashMap<TaskId, u32> = FxHashMap::default();
        let mut unknown = Vec::new();
        for (k, n) in wants {
            match self.core.lookup(&k) {
                Some(t) => {
                    let count = want.entry(t).or_insert(0);
                    *count = count.saturating_add(n);
                }
                None => unknown.push(k),
            }
        }
        let current = c.wants.clone();
        for (t, have) in &current {
            let keep = want.get(t).copied().unwrap_or(0);
            if keep < *have {
                self.release_want(conn, *t, have - keep);
            }
        }
        for (t, n) in want {
            let more = n.saturating_sub(current.get(&t).copied().unwrap_or(0));
            let Some(key) = self.core.key(t).cloned() else { continue };
            if more > 0 && self.core.want_n(&key, more, &mut self.out).is_ok() {
                self.add_watch(conn, t, more);
            }
        }
        let error = TaskError::internal(
            "the scheduler restarted and its journal does not know this key: submit it again",
        );
        for key in unknown {
            self.tell_client(conn, ToClient::Erred { key, error: error.clone() });
        }
        // Where each result stands now (who holds it may have changed).
        let held: Vec<TaskId> =
            self.clients.get(&conn).map(|c| c.wants.keys().copied().collect()).unwrap_or_default();
        for t in held {
            let Some(key) = self.key_of(t) else { continue };
            match self.core.state(t) {
                Some(TaskState::Memory) => {
                    let who_has = self.addresses(t);
                    self.tell_client(conn, ToClient::InMemory { key, who_has });
                }
                Some(TaskState::Erred) => {
                    if let Some(e) = self.core.error(t) {
                        self.tell_client(conn, ToClient::Erred { key, error: (*e).clone() });
                    }
                }
                _ => {}
            }
        }
        if had || self.clients.get(&conn).is_some_and(|c| !c.wants.is_empty()) {
            self.journal_wants(conn);
        }
        self.tell_client(conn, ToClient::Attached { journaled });
    }

    /// Note a client's references in the journal as they are now.
    fn journal_wants(&mut self, conn: ConnId) {
        if self.journal.is_none() {
            return;
        }
        let Some(c) = self.clients.get(&conn) else { return };
        let wants = c.wants.iter().filter_map(|(t, n)| Some((self.key_of(*t)?, *n))).collect();
        let e = Entry::Wants { client: c.id, name: c.name.clone(), wants };
        self.journal(e);
    }

    /// Count `n` references of client `conn` to `t` (the state machine
    /// counts them too, separately), and have it told about `t`.
    fn add_watch(&mut self, conn: ConnId, t: TaskId, n: u32) {
        let Some(c) = self.clients.get_mut(&conn) else { return };
        let count = c.wants.entry(t).or_insert(0);
        *count = count.saturating_add(n);
        let w = self.watchers.entry(t).or_default();
        if !w.contains(&conn) {
            w.push(conn);
        }
    }

    /// Drop `n` of client `conn`'s references to `t` (at most all it holds).
    fn release_want(&mut self, conn: ConnId, t: TaskId, n: u32) {
        let Some(c) = self.clients.get_mut(&conn) else { return };
        let Some(have) = c.wants.get_mut(&t) else { return };
        let n = n.min(*have);
        *have -= n;
        if *have == 0 {
            c.wants.remove(&t);
            if let Some(w) = self.watchers.get_mut(&t) {
                w.retain(|x| *x != conn);
            }
        }
        self.core.release_n(t, n, &mut self.out);
    }

    fn gone(&mut self, conn: ConnId, reason: &str) {
        self.remove(conn, reason, true);
    }

    /// Forget connection `conn`; a worker's work moves elsewhere, counted
    /// as a death of the worker unless it closed on purpose (`died`).
    fn remove(&mut self, conn: ConnId, reason: &str, died: bool) {
        if let Some(w) = self.workers.remove(&conn) {
            log::info("scheduler", &format!("worker {} left: {reason}", w.name));
            self.journal(Entry::WorkerGone { id: w.uid });
            self.transferred_gone += w.transferred;
            self.by_worker.remove(&w.id);
            if died {
                self.core.remove_worker(w.id, &mut self.out);
            } else {
                self.core.worker_closed(w.id, &mut self.out);
            }
            let cause = |_: &State| Arc::from(format!("worker {} left: {reason}", w.name));
            self.chronicle_gone(cause, Some((w.id, &w.name)));
            self.runs_lost(conn, reason);
        } else if let Some(c) = self.clients.remove(&conn) {
            log::info("scheduler", &format!("client {} left: {reason}", c.name));
            self.journal(Entry::ClientGone { client: c.id });
            self.absent.remove(&c.id);
            for (t, n) in c.wants {
                if let Some(w) = self.watchers.get_mut(&t) {
                    w.retain(|x| *x != conn);
                }
                self.core.release_n(t, n, &mut self.out);
            }
            self.chronicle(|_| Arc::from(format!("client {} left: {reason}", c.name)));
            self.coordination_gone(conn);
        }
    }

    /// Close the retiring workers whose results have copies elsewhere (or
    /// that waited `RETIRE_WAIT` for them).
    fn check_retiring(&mut self) {
        if self.retiring.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut done = Vec::new();
        self.retiring.retain(|conn, since| {
            let Some(w) = self.workers.get(conn) else { return false };
            // A worker whose results have nowhere to go yet (every other
            // worker leaves too: jobs reaching their lifetime together)
            // waits for one to join, up to RETIRE_WAIT.
            let waiting = self.core.stranded(w.id) && now.duration_since(*since) <= RETIRE_WAIT;
            let go = (self.core.retired(w.id) && !waiting) || now.duration_since(*since) > RETIRE_WAIT;
            if go {
                done.push(*conn);
            }
            !go
        });
        for conn in done {
            if let Some(w) = self.workers.get(&conn) {
                let _ = w.tx.send(vec![ToWorker::Close { reason: "retired".into(), restart: false }]);
            }
            self.remove(conn, "it retired", false);
        }
    }

    /// Remove workers that stopped answering.
    fn tick(&mut self) {
        if self.restoring.as_ref().is_some_and(|r| r.since.elapsed() > RESTORE_WAIT) {
            self.finish_restore();
        }
        if self.absent_until.is_some_and(|t| Instant::now() > t) {
            self.absent_until = None;
            let gone: Vec<ConnId> = self.absent.drain().map(|(_, c)| c).collect();
            for conn in gone {
                self.remove(conn, "it did not come back after the scheduler restarted", true);
            }
        }
        self.check_retiring();
        self.scaling_tick();
        let now = Instant::now();
        let silent: Vec<ConnId> = self
            .workers
            .iter()
            .filter(|(_, w)| now.duration_since(w.last_seen) > self.worker_ttl)
            .map(|(c, _)| *c)
            .collect();
        for conn in silent {
            if let Some(w) = self.workers.get(&conn) {
                let _ = w.tx.send(vec![ToWorker::Close {
                    reason: "no heartbeat within the worker TTL".into(),
                    restart: true,
                }]);
            }
            self.gone(conn, &format!("no heartbeat for {:?}", self.worker_ttl));
        }
    }

    /// Every wanted result goes; each client's futures err; workers drop everything.
    fn restart(&mut self) {
        let error = TaskError {
            kind: TaskErrorKind::Cancelled,
            message: "the cluster was restarted".into(),
            position: None,
        };
        let conns: Vec<ConnId> = self.clients.keys().copied().collect();
        for conn in conns {
            let Some(c) = self.clients.get_mut(&conn) else { continue };
            let wants = std::mem::take(&mut c.wants);
            let (client, name) = (c.id, c.name.clone());
            self.journal(Entry::Wants { client, name, wants: Vec::new() });
            for (t, n) in wants {
                if let Some(key) = self.core.key(t).cloned() {
                    self.tell_client(conn, ToClient::Erred { key, error: error.clone() });
                }
                self.watchers.remove(&t);
                self.core.release_n(t, n, &mut self.out);
            }
        }
    }

    /// Ask `n` workers to leave, those holding the least data first.
    fn retire(&mut self, n: usize) {
        let mut ws: Vec<(u64, ConnId)> = self.workers.iter().map(|(c, w)| (w.memory, *c)).collect();
        ws.sort_unstable();
        for (_, conn) in ws.into_iter().take(n) {
            let Some(w) = self.workers.get(&conn) else { continue };
            let id = w.id;
            self.retiring.entry(conn).or_insert_with(Instant::now);
            self.core.retire_worker(id, &mut self.out);
        }
        self.check_retiring();
    }

    /// The state machine's invariants, and this shell's agreement with it:
    /// every live worker is connected, every task it may run has a definition.
    fn validate(&self) -> Result<(), String> {
        self.core.validate()?;
        if self.core.nworkers() != self.workers.len() {
            return Err(format!(
                "{} workers in the state machine, {} connected",
                self.core.nworkers(),
                self.workers.len()
            ));
        }
        for w in self.workers.values() {
            if !self.by_worker.contains_key(&w.id) {
                return Err(format!("worker {} has no connection entry", w.name));
            }
        }
        for (t, clients) in &self.watchers {
            if self.core.key(*t).is_none() {
                return Err(format!("clients {clients:?} watch a forgotten task"));
            }
        }
        let mut refs: FxHashMap<u128, usize> = FxHashMap::default();
        for spec in self.specs.values() {
            for c in &spec.codes {
                *refs.entry(*c).or_default() += 1;
            }
        }
        for (id, (_, n)) in &self.codes {
            if refs.get(id) != Some(n) {
                return Err(format!(
                    "code {id:032x} counts {n} references, the tasks hold {:?}",
                    refs.get(id)
                ));
            }
        }
        if refs.len() != self.codes.len() {
            return Err("a task refers to code the scheduler does not hold".into());
        }
        for (conn, c) in &self.clients {
            for (t, n) in &c.wants {
                if self.core.wants(*t) < *n {
                    return Err(format!(
                        "client {conn} holds {n} references the state machine does not count"
                    ));
                }
            }
        }
        Ok(())
    }

    fn tell_client(&mut self, conn: ConnId, msg: ToClient) {
        if let Some(c) = self.clients.get_mut(&conn) {
            c.outbox.push(msg);
        }
    }

    fn tell_worker(&mut self, w: WorkerId, msg: ToWorker) {
        if let Some(conn) = self.by_worker.get(&w)
            && let Some(wc) = self.workers.get_mut(conn)
        {
            wc.outbox.push(msg);
        }
    }

    fn key_of(&self, t: TaskId) -> Option<Key> {
        self.specs.get(&t).map(|s| s.key.clone()).or_else(|| self.core.key(t).cloned())
    }

    fn addresses(&self, t: TaskId) -> Vec<String> {
        self.core
            .who_has(t)
            .iter()
            .filter_map(|w| {
                self.by_worker.get(w).and_then(|c| self.workers.get(c)).map(|wc| wc.address.clone())
            })
            .collect()
    }

    /// Carry out the state machine's decisions.
    fn apply(&mut self) {
        while !self.out.is_empty() {
            let actions = std::mem::take(&mut self.out);
            for a in actions {
                match a {
                    Action::Run { worker, task, run, priority } => {
                        if !self.specs.contains_key(&task) {
                            let e = TaskError::internal("the scheduler has no definition for this task");
                            self.core.task_failed(worker, task, run, e, &mut self.out);
                            continue;
                        }
                        self.send_codes(worker, task);
                        let Some(spec) = self.specs.get(&task) else { continue };
                        let key = spec.key.clone();
                        let op = spec.op.clone();
                        let deps = spec
                            .deps
                            .iter()
                            .map(|d| DepAt {
                                key: d.clone(),
                                who_has: self.core.lookup(d).map(|t| self.addresses(t)).unwrap_or_default(),
                            })
                            .collect();
                        let priority = (priority.neg_user, priority.generation, priority.order);
                        let timeout = spec.timeout;
                        let gpus = spec.annotations.as_ref().map_or(0.0, |a| {
                            a.resources.iter().filter(|(n, _)| n == "GPU").map(|(_, x)| x).sum()
                        });
                        self.note_run(&key);
                        self.tell_worker(
                            worker,
                            ToWorker::Compute { key, run, op, deps, priority, timeout, gpus },
                        );
                    }
                    Action::Cancel { worker, task } => {
                        if let Some(key) = self.key_of(task) {
                            self.tell_worker(worker, ToWorker::Cancel { key });
                        }
                    }
                    Action::Free { worker, task } => {
                        if let Some(key) = self.key_of(task) {
                            if self.journal.is_some()
                                && let Some(uid) = self.uid_of(worker)
                            {
                                self.journal(Entry::Freed { worker: uid, keys: vec![key.clone()] });
                            }
                            self.tell_worker(worker, ToWorker::Free { keys: vec![key] });
                        }
                    }
                    Action::Done { task } => {
                        let Some(key) = self.key_of(task) else { continue };
                        let who_has = self.addresses(task);
                        for conn in self.watchers.get(&task).cloned().unwrap_or_default() {
                            self.tell_client(
                                conn,
                                ToClient::InMemory { key: key.clone(), who_has: who_has.clone() },
                            );
                        }
                    }
                    Action::Erred { task, error } => {
                        let Some(key) = self.key_of(task) else { continue };
                        if self.journal.is_some() {
                            self.journal(Entry::Erred { key: key.clone(), error: (*error).clone() });
                        }
                        for conn in self.watchers.get(&task).cloned().unwrap_or_default() {
                            self.tell_client(
                                conn,
                                ToClient::Erred { key: key.clone(), error: (*error).clone() },
                            );
                        }
                    }
                    Action::Replicate { task, from, to } => {
                        let from = self.by_worker.get(&from).and_then(|c| self.workers.get(c));
                        if let (Some(key), Some(from)) = (self.key_of(task), from.map(|w| w.address.clone()))
                        {
                            self.tell_worker(to, ToWorker::Replicate { key, from });
                        }
                    }
                    Action::Forget { task } => {
                        if let Some(spec) = self.specs.remove(&task) {
                            self.drop_codes(&spec.codes);
                            if self.journal.is_some() {
                                self.journal(Entry::Forget { keys: vec![spec.key] });
                            }
                        }
                        self.watchers.remove(&task);
                    }
                }
            }
        }
    }

    /// Send `w` the codes the task refers to that it has not been sent.
    fn send_codes(&mut self, w: WorkerId, task: TaskId) {
        let Some(spec) = self.specs.get(&task) else { return };
        let Some(wc) = self.by_worker.get(&w).and_then(|c| self.workers.get_mut(c)) else { return };
        let new: Vec<Arc<Code>> = spec
            .codes
            .iter()
            .filter(|c| wc.codes.insert(**c))
            .filter_map(|c| self.codes.get(c).map(|(code, _)| code.clone()))
            .collect();
        if !new.is_empty() {
            wc.outbox.push(ToWorker::Codes { codes: new });
        }
    }

    /// One spec fewer refers to `codes`: forget those no spec refers to,
    /// here and on the workers that have them.
    fn drop_codes(&mut self, codes: &[u128]) {
        let mut gone = Vec::new();
        for c in codes {
            if let Some(entry) = self.codes.get_mut(c) {
                entry.1 -= 1;
                if entry.1 == 0 {
                    self.codes.remove(c);
                    gone.push(*c);
                }
            }
        }
        if gone.is_empty() {
            return;
        }
        for wc in self.workers.values_mut() {
            let ids: Vec<u128> = gone.iter().copied().filter(|c| wc.codes.remove(c)).collect();
            if !ids.is_empty() {
                wc.outbox.push(ToWorker::ForgetCodes { ids });
            }
        }
    }

    /// Send every outbox as one batch per peer, after the journal has
    /// what they are told.
    fn flush(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            j.flush();
            if j.wants_snapshot() && self.restoring.is_none() {
                self.write_journal_snapshot();
            }
        }
        for w in self.workers.values_mut() {
            if !w.outbox.is_empty() {
                let _ = w.tx.send(std::mem::take(&mut w.outbox));
            }
        }
        for c in self.clients.values_mut() {
            if !c.outbox.is_empty() {
                let batch = std::mem::take(&mut c.outbox);
                if let Some(tx) = &c.tx {
                    let _ = tx.send(batch);
                }
            }
        }
    }

    fn close_all(&mut self, reason: &str) {
        for w in self.workers.values() {
            let _ = w.tx.send(vec![ToWorker::Close { reason: reason.into(), restart: false }]);
        }
        self.workers.clear();
        self.clients.clear();
    }

    fn rows(&self) -> Vec<WorkerRow> {
        let info: FxHashMap<WorkerId, (usize, usize, u64)> =
            self.core.workers().into_iter().map(|w| (w.id, (w.processing, w.held, w.held_bytes))).collect();
        let mut rows: Vec<WorkerRow> = self
            .workers
            .values()
            .map(|w| {
                let (processing, held, held_bytes) = info.get(&w.id).copied().unwrap_or_default();
                WorkerRow {
                    name: w.name.to_string(),
                    address: w.address.clone(),
                    threads: w.nthreads,
                    processing: processing as u64,
                    in_memory: held as u64,
                    // The last heartbeat, or what the scheduler counted since.
                    memory: w.memory.max(held_bytes.saturating_sub(w.spilled)),
                    memory_limit: w.memory_limit,
                    spilled: w.spilled,
                    resources: w.resources.clone(),
                    gpu: w.gpu.clone(),
                    device_memory_limit: w.device_memory_limit,
                    device_memory: w.device_memory,
                    device_spilled: w.device_spilled,
                    device_transferred: w.device_transferred,
                    pid: w.pid,
                    transferred: w.transferred,
                }
            })
            .collect();
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows
    }

    /// `/metrics`: Prometheus' text format.
    fn metrics(&self) -> String {
        use brisk_engine::scheduler::TaskState as S;
        const STATES: [S; 6] = [S::Released, S::Waiting, S::Queued, S::Processing, S::Memory, S::Erred];
        let mut m = http::Metrics::default();
        let counts = self.core.state_counts();
        m.family("brisk_tasks", "gauge", "Tasks the scheduler holds, by state.");
        for s in STATES {
            m.sample("brisk_tasks", &[("state", s.name())], counts[s as usize] as f64);
        }
        m.family("brisk_group_tasks", "gauge", "Tasks by group and state.");
        for g in self.core.groups() {
            for s in STATES {
                let n = g.in_state(s);
                if n > 0 {
                    m.sample("brisk_group_tasks", &[("group", &g.name), ("state", s.name())], n as f64);
                }
            }
        }
        m.family("brisk_tasks_done_total", "counter", "Tasks finished, by group.");
        for g in self.core.groups() {
            m.sample("brisk_tasks_done_total", &[("group", &g.name)], g.done as f64);
        }
        m.single(
            "brisk_transitions_total",
            "counter",
            "Task state transitions.",
            self.core.transition_count() as f64,
        );
        m.single("brisk_workers", "gauge", "Workers connected.", self.workers.len() as f64);
        m.single("brisk_clients", "gauge", "Clients connected.", self.clients.len() as f64);
        m.single(
            "brisk_threads",
            "gauge",
            "Task threads over all workers.",
            self.workers.values().map(|w| w.nthreads as f64).sum(),
        );
        let rows = self.rows();
        m.family("brisk_worker_memory_bytes", "gauge", "Bytes of results each worker holds.");
        for r in &rows {
            m.sample("brisk_worker_memory_bytes", &[("worker", &r.name)], r.memory as f64);
        }
        m.family("brisk_worker_memory_limit_bytes", "gauge", "Each worker's memory limit.");
        for r in &rows {
            if let Some(l) = r.memory_limit {
                m.sample("brisk_worker_memory_limit_bytes", &[("worker", &r.name)], l as f64);
            }
        }
        m.family("brisk_worker_spilled_bytes", "gauge", "Bytes of results each worker spilled to disk.");
        for r in &rows {
            m.sample("brisk_worker_spilled_bytes", &[("worker", &r.name)], r.spilled as f64);
        }
        // Families for CUDA workers only.
        let cuda: Vec<&WorkerRow> = rows.iter().filter(|r| r.device_memory_limit.is_some()).collect();
        type Gauge = (&'static str, &'static str, fn(&WorkerRow) -> u64);
        let device: [Gauge; 4] = [
            ("brisk_worker_device_memory_bytes", "Device bytes of each CUDA worker's results.", |r| {
                r.device_memory
            }),
            ("brisk_worker_device_memory_limit_bytes", "Each CUDA worker's device memory limit.", |r| {
                r.device_memory_limit.unwrap_or_default()
            }),
            (
                "brisk_worker_device_spilled_bytes",
                "Bytes of each CUDA worker's GPU results moved to host memory or disk.",
                |r| r.device_spilled,
            ),
            (
                "brisk_worker_device_transferred_bytes",
                "Bytes of GPU blocks each CUDA worker received device to device (CUDA IPC).",
                |r| r.device_transferred,
            ),
        ];
        if !cuda.is_empty() {
            for (name, help, value) in device {
                m.family(name, "gauge", help);
                for r in &cuda {
                    m.sample(name, &[("worker", &r.name)], value(r) as f64);
                }
            }
        }
        m.family("brisk_worker_processing", "gauge", "Tasks assigned to each worker.");
        for r in &rows {
            m.sample("brisk_worker_processing", &[("worker", &r.name)], r.processing as f64);
        }
        let moved = self.transferred_gone + rows.iter().map(|r| r.transferred).sum::<u64>();
        m.single(
            "brisk_transferred_bytes_total",
            "counter",
            "Bytes workers fetched from other workers.",
            moved as f64,
        );
        let refused = self.refusals.load(Ordering::Relaxed) as f64;
        m.single(
            "brisk_handshake_refusals_total",
            "counter",
            "Connections refused in the handshake.",
            refused,
        );
        m.finish()
    }

    fn snapshot(&self) -> Snapshot {
        let info = self.core.workers();
        Snapshot {
            groups: self.core.groups().iter().map(Into::into).collect(),
            memory_bytes: self.workers.values().map(|w| w.memory).sum(),
            threads: self.workers.values().map(|w| w.nthreads as usize).sum(),
            busy_threads: info
                .iter()
                .map(|i| {
                    let threads =
                        self.by_worker.get(&i.id).and_then(|c| self.workers.get(c)).map_or(1, |w| w.nthreads);
                    i.processing.min(threads as usize)
                })
                .sum(),
            transitions: self.core.transition_count(),
            tasks_held: self.core.ntasks(),
        }
    }
}
