//! The client of a remote scheduler: the second implementation of the
//! engine's `Client` seam, so sessions run the same graphs on a cluster
//! without knowing it. Graphs are optimized here (cull, fuse, order) and
//! each operation is encoded once; futures settle when the scheduler says a
//! key is in memory, and a result is fetched from the worker that holds it
//! only when asked for (`persist` leaves results on the workers).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use brisk_engine::client::{CancelToken, Cell, Client, Future, FutureHost, RunResults, StoryRow, WorkerInfo};
use brisk_engine::coordination::{CoordOp, CoordReply, Coordinator, Deadline};
use brisk_engine::diagnostics::{Event, Snapshot};
use brisk_engine::error::{EngineError, TaskError};
use brisk_engine::graph::{self, Graph};
use brisk_engine::key::Key;
use brisk_engine::ops::Op;
use brisk_engine::runner::{Code, shipped};
use brisk_engine::value::Value;
use rustc_hash::FxHashMap;
use tokio::sync::mpsc;

use crate::comm::{self, CommError, Conn, PeerPool};
use crate::protocol::{Blob, ClientMsg, Role, TaskDef, ToClient, WorkerRow};
use crate::security::Security;

/// How long a request to the scheduler (a graph, `workers()`) may wait for its answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a client of a scheduler that keeps a journal waits for it to
/// come back; its futures wait meanwhile.
pub const RECONNECT_WAIT: Duration = Duration::from_secs(60);

/// How often a coordination request that waits looks at its deadline and
/// cancel token.
const COORD_POLL: Duration = Duration::from_millis(50);

/// A session's connection to a scheduler.
pub struct RemoteClient {
    shared: Arc<Shared>,
    rt: Mutex<Option<tokio::runtime::Runtime>>,
}

struct Shared {
    address: String,
    /// This client's id for the scheduler (`Attach`).
    id: u64,
    name: String,
    security: Security,
    fuse: bool,
    /// The channel of the scheduler connection now: each connection has its
    /// own, so nothing meant for a scheduler that died reaches the next.
    /// Sent on with the state locked, where references change.
    tx: Mutex<mpsc::UnboundedSender<Vec<ClientMsg>>>,
    /// The scheduler keeps a journal: when it goes, wait for it to come back.
    journaled: AtomicBool,
    handle: tokio::runtime::Handle,
    state: Mutex<State>,
    next_id: AtomicU64,
    peers: PeerPool,
}

#[derive(Default)]
struct State {
    /// Cells to settle per key.
    cells: FxHashMap<Key, Vec<Weak<Cell>>>,
    /// Where each finished key lives, while this client holds it.
    who_has: FxHashMap<Key, Vec<String>>,
    /// References this client holds on the scheduler, per key.
    held: FxHashMap<Key, u32>,
    replies: FxHashMap<u64, std::sync::mpsc::Sender<ToClient>>,
    /// Why the connection is gone, once it is.
    lost: Option<String>,
    /// Why the scheduler is away while this client waits for it to come
    /// back (requests fail at once meanwhile; futures wait).
    away: Option<String>,
    /// The references each unanswered graph added to `held`.
    pending_graphs: FxHashMap<u64, Vec<Key>>,
    /// Subscribers to the task stream (asked of the scheduler once).
    stream: brisk_engine::diagnostics::Hub,
    streaming: bool,
    /// Each (worker, thread) seen in the stream, as one row of the task stream.
    threads: FxHashMap<(String, u32), usize>,
    /// Results fetched ahead by `gather`, taken by `fetch`.
    prefetched: FxHashMap<Key, Value>,
}

impl RemoteClient {
    /// Connect to the scheduler at `address`.
    pub fn connect(address: &str, security: Security, fuse: bool) -> Result<RemoteClient, CommError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("brisk-client-io")
            .enable_all()
            .build()?;
        let name = format!("client-{}", std::process::id());
        let conn = rt.block_on(comm::connect(address, Role::Client, &name, &security))?;
        let (tx, rx) = mpsc::unbounded_channel::<Vec<ClientMsg>>();
        let shared = Arc::new(Shared {
            address: address.to_string(),
            id: comm::random_id(),
            peers: PeerPool::new(security.clone(), &name),
            name,
            security,
            fuse,
            tx: Mutex::new(tx),
            journaled: AtomicBool::new(false),
            handle: rt.handle().clone(),
            state: Mutex::new(State::default()),
            next_id: AtomicU64::new(1),
        });
        shared.attach(None);
        rt.spawn(connection(Arc::downgrade(&shared), conn, rx));
        Ok(RemoteClient { shared, rt: Mutex::new(Some(rt)) })
    }

    /// The connection is gone for good (not away for a restart).
    pub fn is_lost(&self) -> bool {
        self.shared.lock().lost.is_some()
    }

    pub fn address(&self) -> &str {
        &self.shared.address
    }

    fn info(&self) -> Result<(Vec<WorkerRow>, Snapshot), EngineError> {
        match self.shared.request(|id| ClientMsg::Info { id })? {
            ToClient::Info { workers, snapshot, .. } => Ok((workers, snapshot)),
            other => Err(EngineError::Internal(format!("unexpected answer {other:?}"))),
        }
    }

    /// The scheduler's HTTP address (`c.dashboard_link`), if it serves one.
    pub fn dashboard_link(&self) -> Result<Option<String>, EngineError> {
        match self.shared.request(|id| ClientMsg::Info { id })? {
            ToClient::Info { dashboard, .. } => Ok(dashboard),
            other => Err(EngineError::Internal(format!("unexpected answer {other:?}"))),
        }
    }

    /// The workers and the progress in one request (the dashboards' sample).
    pub fn workers_and_progress(&self) -> Result<(Vec<WorkerInfo>, Snapshot), EngineError> {
        let (rows, snapshot) = self.info()?;
        Ok((rows.into_iter().map(worker_info).collect(), snapshot))
    }

    /// The scheduler's workers now.
    pub fn worker_rows(&self) -> Result<Vec<WorkerRow>, EngineError> {
        Ok(self.info()?.0)
    }

    /// Restart the cluster's work: every result goes, futures held err.
    pub fn restart(&self) -> Result<(), EngineError> {
        self.shared.request(|id| ClientMsg::Restart { id }).map(drop)
    }

    /// Ask `n` workers to leave.
    pub fn retire(&self, n: u32) -> Result<(), EngineError> {
        self.shared.request(|id| ClientMsg::Retire { id, n }).map(drop)
    }

    /// Ask these workers to leave; their results move to other workers first.
    pub fn retire_workers(&self, names: Vec<String>) -> Result<(), EngineError> {
        self.shared.request(|id| ClientMsg::RetireWorkers { id, names }).map(drop)
    }

    /// The scheduler's view for adaptive scaling.
    pub fn adaptive(
        &self,
        rule: crate::protocol::AdaptiveRule,
    ) -> Result<crate::protocol::AdaptiveAnswer, EngineError> {
        match self.shared.request(|id| ClientMsg::Adaptive { id, rule })? {
            ToClient::Adaptive { answer, .. } => Ok(answer),
            other => Err(EngineError::Internal(format!("unexpected answer {other:?}"))),
        }
    }

    /// Ask the scheduler to check its invariants (tests run it after each case).
    pub fn validate(&self) -> Result<(), String> {
        match self.shared.request(|id| ClientMsg::Validate { id }) {
            Ok(ToClient::Validated { error: None, .. }) => Ok(()),
            Ok(ToClient::Validated { error: Some(e), .. }) => Err(e),
            Ok(other) => Err(format!("unexpected answer {other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Wait until at least `n` workers are connected.
    pub fn wait_for_workers(&self, n: usize, timeout: Duration) -> Result<(), EngineError> {
        let deadline = Instant::now() + timeout;
        loop {
            let have = self.worker_rows()?.len();
            if have >= n {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(EngineError::Internal(format!(
                    "only {have} of {n} workers joined the scheduler at {} within {timeout:?}",
                    self.shared.address
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The scheduler connection: its messages, and when the scheduler goes
/// and it keeps a journal, waiting for it to come back and attaching again.
async fn connection(weak: Weak<Shared>, first: Conn, rx: mpsc::UnboundedReceiver<Vec<ClientMsg>>) {
    let (mut conn, mut rx) = (first, rx);
    loop {
        let Conn { mut reader, writer, .. } = conn;
        let writer_task = tokio::spawn(comm::send_batches(writer, rx));
        let reason = loop {
            match reader.next::<Vec<ToClient>>().await {
                Ok(Some(batch)) => {
                    let Some(s) = weak.upgrade() else { return };
                    s.receive(batch);
                }
                Ok(None) => break "the scheduler closed the connection".to_string(),
                Err(e) => break e.to_string(),
            }
        };
        writer_task.abort();
        let Some(s) = weak.upgrade() else { return };
        if !s.journaled.load(Ordering::SeqCst) || s.lock().lost.is_some() {
            s.lose(&reason);
            return;
        }
        s.interrupt(&reason);
        let (address, name, security) = (s.address.clone(), s.name.clone(), s.security.clone());
        drop(s);
        let deadline = tokio::time::Instant::now() + RECONNECT_WAIT;
        let back = loop {
            if tokio::time::Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
            if weak.upgrade().is_none_or(|s| s.lock().lost.is_some()) {
                return;
            }
            if let Ok(c) = comm::connect(&address, Role::Client, &name, &security).await {
                break Some(c);
            }
        };
        let Some(s) = weak.upgrade() else { return };
        let Some(c) = back else {
            s.lose(&format!("{reason}; it did not come back within {RECONNECT_WAIT:?}"));
            return;
        };
        let (tx, new_rx) = mpsc::unbounded_channel();
        s.attach(Some(tx));
        (conn, rx) = (c, new_rx);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lost_error(&self, reason: &str) -> EngineError {
        EngineError::Internal(format!("lost the connection to the scheduler at {}: {reason}", self.address))
    }

    fn away_error(&self, reason: &str) -> EngineError {
        EngineError::Internal(format!(
            "the scheduler at {} is away ({reason}); waiting for it to come back from its journal: try again",
            self.address
        ))
    }

    /// Send on the connection now. Callers that change references hold
    /// the state's lock, so a reconnection's `Attach` is never overtaken.
    fn send(&self, msg: ClientMsg) -> Result<(), EngineError> {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        tx.send(vec![msg]).map_err(|_| self.lost_error("the connection is closed"))
    }

    /// Say who this client is and which references it holds, first on a
    /// new connection (`tx`; `None`: the first connection, already set).
    fn attach(&self, tx: Option<mpsc::UnboundedSender<Vec<ClientMsg>>>) {
        let mut st = self.lock();
        Shared::interrupted(&mut st);
        st.away = None;
        let wants = st.held.iter().map(|(k, n)| (k.clone(), *n)).collect();
        let mut first = vec![ClientMsg::Attach { id: self.id, wants }];
        if st.streaming {
            first.push(ClientMsg::Stream);
        }
        let mut now = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = tx {
            *now = tx;
        }
        let _ = now.send(first);
    }

    /// The scheduler went away and may come back: requests waiting for an
    /// answer fail now; futures wait.
    fn interrupt(&self, reason: &str) {
        let mut st = self.lock();
        st.away = Some(reason.to_string());
        Shared::interrupted(&mut st);
    }

    /// Fail the requests still waiting; the references of graphs not
    /// answered are dropped here (their callers are told they failed).
    fn interrupted(st: &mut State) {
        st.replies.clear();
        let pending: Vec<Key> = st.pending_graphs.drain().flat_map(|(_, keys)| keys).collect();
        for k in &pending {
            unhold(st, k);
        }
    }

    /// Send a request and wait for the answer with the same id.
    fn request(&self, make: impl FnOnce(u64) -> ClientMsg) -> Result<ToClient, EngineError> {
        let (id, rx) = self.ask(make)?;
        self.answer(id, rx)
    }

    /// Send a request; its answer comes on the receiver.
    fn ask(&self, make: impl FnOnce(u64) -> ClientMsg) -> Result<(u64, Receiver<ToClient>), EngineError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::channel();
        let mut st = self.lock();
        if let Some(reason) = &st.lost {
            return Err(self.lost_error(reason));
        }
        if let Some(reason) = &st.away {
            return Err(self.away_error(reason));
        }
        st.replies.insert(id, tx);
        self.send(make(id))?;
        Ok((id, rx))
    }

    /// A coordination request, waited for until `deadline`; past it (or
    /// cancelled) the scheduler is asked to withdraw it and its last word
    /// is taken, so an item a queue gave out just then is not lost.
    fn coordinate(
        &self,
        op: CoordOp,
        deadline: Deadline,
        cancel: &CancelToken,
    ) -> Result<CoordReply, EngineError> {
        let wait = deadline != Deadline::Now;
        let (id, rx) = self.ask(|id| ClientMsg::Coordinate { id, op, wait })?;
        let msg = if !wait {
            // Answered at once by the scheduler, waiting or not.
            self.answer(id, rx)?
        } else {
            loop {
                match rx.recv_timeout(deadline.slice(COORD_POLL)) {
                    Ok(msg) => break msg,
                    Err(RecvTimeoutError::Disconnected) => return Err(self.cut_off()),
                    Err(RecvTimeoutError::Timeout) if cancel.is_cancelled() || deadline.passed() => {
                        self.send(ClientMsg::Withdraw { id })?;
                        break self.answer(id, rx)?;
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                }
            }
        };
        match msg {
            ToClient::Coordinated { reply: CoordReply::TimedOut, .. } if cancel.is_cancelled() => {
                Err(EngineError::Cancelled)
            }
            ToClient::Coordinated { reply, .. } => Ok(reply),
            other => Err(EngineError::Internal(format!(
                "the scheduler answered {other:?} to a coordination request"
            ))),
        }
    }

    /// Why an answer will not come: the connection is lost or the
    /// scheduler away.
    fn cut_off(&self) -> EngineError {
        let st = self.lock();
        match (&st.lost, &st.away) {
            (_, Some(reason)) => self.away_error(reason),
            (Some(reason), _) => self.lost_error(reason),
            _ => self.lost_error("the connection is closed"),
        }
    }

    fn answer(&self, id: u64, rx: Receiver<ToClient>) -> Result<ToClient, EngineError> {
        match rx.recv_timeout(REQUEST_TIMEOUT) {
            Ok(reply) => Ok(reply),
            Err(_) => {
                let mut st = self.lock();
                st.replies.remove(&id);
                if let Some(reason) = &st.lost {
                    return Err(self.lost_error(reason));
                }
                if let Some(reason) = &st.away {
                    return Err(self.away_error(reason));
                }
                Err(self.lost_error(&format!("no answer within {REQUEST_TIMEOUT:?}")))
            }
        }
    }

    /// Messages from the scheduler.
    fn receive(&self, batch: Vec<ToClient>) {
        let mut st = self.lock();
        for msg in batch {
            match msg {
                ToClient::Attached { journaled } => self.journaled.store(journaled, Ordering::SeqCst),
                ToClient::Accepted { id } | ToClient::Done { id } => reply(&mut st, id, msg),
                ToClient::Refused { id, .. }
                | ToClient::Info { id, .. }
                | ToClient::Validated { id, .. }
                | ToClient::Story { id, .. }
                | ToClient::Adaptive { id, .. }
                | ToClient::Coordinated { id, .. }
                | ToClient::Ran { id, .. } => reply(&mut st, id, msg),
                ToClient::InMemory { key, who_has } => {
                    if st.held.contains_key(&key) {
                        st.who_has.insert(key.clone(), who_has);
                    }
                    for c in st.cells.remove(&key).into_iter().flatten().filter_map(|w| w.upgrade()) {
                        c.finish_elsewhere();
                    }
                }
                ToClient::Erred { key, error } => {
                    for c in st.cells.remove(&key).into_iter().flatten().filter_map(|w| w.upgrade()) {
                        c.fail(error.clone());
                    }
                }
                ToClient::TaskRan { key, worker, thread, start_us, stop_us, ok } => {
                    let next = st.threads.len();
                    let thread = *st.threads.entry((worker, thread)).or_insert(next);
                    st.stream.publish(Event::TaskRan { key, thread, start_us, stop_us, ok });
                }
                ToClient::Output { key, worker, line } => {
                    st.stream.publish(Event::Output { key, line: Arc::from(format!("{worker}: {line}")) });
                }
            }
        }
    }

    /// The connection is gone: every pending future fails with the reason.
    fn lose(&self, reason: &str) {
        let cells: Vec<Arc<Cell>> = {
            let mut st = self.lock();
            st.lost = Some(reason.to_string());
            st.replies.clear();
            st.cells.drain().flat_map(|(_, v)| v).filter_map(|w| w.upgrade()).collect()
        };
        let error = TaskError::internal(format!(
            "lost the connection to the scheduler at {}: {reason}",
            self.address
        ));
        for c in cells {
            c.fail(error.clone());
        }
    }

    /// Send `graph` for `outputs`; with `gpu`, its tasks on GPU blocks take
    /// the `GPU` resource.
    fn submit(
        self: &Arc<Self>,
        graph: Graph,
        outputs: &[Key],
        gpu: bool,
    ) -> Result<Vec<Future>, EngineError> {
        let (optimized, order) = {
            let st = self.lock();
            graph::optimize(graph, outputs, self.fuse, |k| st.held.contains_key(k))
        };
        let mut all = optimized.into_tasks();
        if gpu {
            brisk_engine::array::gpu::resource::take_gpu(&mut all, false, |_| false, 1.0);
        }
        let mut tasks = Vec::with_capacity(all.len());
        let mut codes: FxHashMap<u128, Arc<Code>> = FxHashMap::default();
        for (t, o) in all.into_iter().zip(order) {
            let (op, used) = shipped::by_reference(|| rmp_serde::to_vec(&t.op));
            let op = op.map_err(|e| {
                EngineError::Internal(format!("task {} cannot be sent to the cluster: {e}", t.key))
            })?;
            let ids = used.iter().map(|c| c.id).collect();
            for c in used {
                codes.entry(c.id).or_insert(c);
            }
            tasks.push(TaskDef {
                key: t.key,
                deps: t.deps,
                order: o,
                annotations: t.annotations,
                op: Blob(op.into()),
                codes: ids,
            });
        }
        let codes = codes.into_values().collect();
        // Cells first: the answer may come before this thread runs again.
        // References, the graph's entry among the pending ones and the
        // message go under one lock: a reconnection's `Attach` (which
        // counts `held`) is then either before all of them or after.
        let cells: Vec<Arc<Cell>> = outputs.iter().map(|_| Cell::new()).collect();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let mut st = self.lock();
            if let Some(reason) = &st.lost {
                return Err(self.lost_error(reason));
            }
            if let Some(reason) = &st.away {
                return Err(self.away_error(reason));
            }
            for (k, c) in outputs.iter().zip(&cells) {
                st.cells.entry(k.clone()).or_default().push(Arc::downgrade(c));
                *st.held.entry(k.clone()).or_insert(0) += 1;
            }
            st.pending_graphs.insert(id, outputs.to_vec());
            st.replies.insert(id, tx);
            self.send(ClientMsg::UpdateGraph { id, tasks, wants: outputs.to_vec(), codes })?;
        }
        let answer = self.answer(id, rx);
        let refused = match answer {
            Ok(ToClient::Accepted { .. }) => None,
            Ok(ToClient::Refused { error, .. }) => Some(EngineError::Scheduler(error)),
            Ok(other) => Some(EngineError::Internal(format!("unexpected answer {other:?}"))),
            Err(e) => Some(e),
        };
        let mut st = self.lock();
        // Gone from the pending ones: the scheduler went away and its
        // references were dropped then.
        let ours = st.pending_graphs.remove(&id).is_some();
        if let Some(e) = refused {
            for (k, c) in outputs.iter().zip(&cells) {
                if let Some(list) = st.cells.get_mut(k) {
                    list.retain(|w| w.upgrade().is_some_and(|x| !Arc::ptr_eq(&x, c)));
                }
                if ours {
                    unhold(&mut st, k);
                }
            }
            return Err(e);
        }
        drop(st);
        let host: Weak<dyn FutureHost> = Arc::downgrade(self) as Weak<dyn FutureHost>;
        Ok(outputs.iter().zip(cells).map(|(k, c)| Future::for_cell(k.clone(), 0, c, host.clone())).collect())
    }

    /// The value of `key` from a worker that holds it. A worker that died
    /// meanwhile is replaced by the one the scheduler recomputes it on.
    /// Fetch the results of `keys` with one request per holder (and per
    /// 512 keys) rather than one per key; `fetch` then takes them. A key a
    /// holder no longer has is left for `fetch` to look for.
    fn prefetch(&self, keys: &[Key], cancel: &CancelToken) -> Result<(), EngineError> {
        let mut by_holder: FxHashMap<String, Vec<Key>> = FxHashMap::default();
        {
            let st = self.lock();
            for k in keys {
                if let Some(a) = st.who_has.get(k).and_then(|w| w.first()) {
                    by_holder.entry(a.clone()).or_default().push(k.clone());
                }
            }
        }
        for (addr, keys) in by_holder {
            for batch in keys.chunks(512) {
                let got = self.handle.block_on(async {
                    tokio::select! {
                        r = self.peers.get_data(&addr, batch.to_vec(), None) => Some(r),
                        _ = cancelled(cancel) => None,
                    }
                });
                match got {
                    None => return Err(EngineError::Cancelled),
                    // Results that belong on a GPU come as host copies: the
                    // client keeps them there.
                    Some(Ok(got)) => {
                        let mut st = self.lock();
                        st.prefetched.extend(got.values.into_iter().filter_map(|(k, v)| Some((k, v?))));
                    }
                    // `fetch` tries again, and other holders.
                    Some(Err(_)) => {}
                }
            }
        }
        Ok(())
    }

    fn fetch_value(&self, key: &Key, cancel: &CancelToken) -> Result<Value, EngineError> {
        if let Some(v) = self.lock().prefetched.remove(key) {
            return Ok(v);
        }
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        let mut last = String::from("no worker holds it");
        loop {
            let who_has = {
                let st = self.lock();
                if let Some(reason) = &st.lost {
                    return Err(self.lost_error(reason));
                }
                st.who_has.get(key).cloned().unwrap_or_default()
            };
            for addr in &who_has {
                let got = self.handle.block_on(async {
                    tokio::select! {
                        r = self.peers.get_data(addr, vec![key.clone()], None) => Some(r),
                        _ = cancelled(cancel) => None,
                    }
                });
                match got {
                    None => return Err(EngineError::Cancelled),
                    Some(Ok(mut got)) => match got.values.pop().and_then(|(_, v)| v) {
                        Some(v) => return Ok(v),
                        None => last = format!("{addr} no longer holds it"),
                    },
                    Some(Err(e)) => last = format!("{addr}: {e}"),
                }
            }
            if cancel.is_cancelled() {
                return Err(EngineError::Cancelled);
            }
            if Instant::now() > deadline {
                return Err(EngineError::Internal(format!("cannot fetch the result of {key}: {last}")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn worker_info(w: WorkerRow) -> WorkerInfo {
    WorkerInfo {
        name: w.name,
        address: w.address,
        threads: w.threads as usize,
        running: w.processing as usize,
        in_memory: w.in_memory as usize,
        memory: w.memory,
        memory_limit: w.memory_limit,
        spilled: w.spilled,
        gpu: w.gpu,
        device: w.device_memory_limit.map(|limit| brisk_engine::client::DeviceMemory {
            used: w.device_memory,
            limit,
            spilled: w.device_spilled,
            transferred: w.device_transferred,
        }),
        resources: w.resources,
        pid: w.pid,
    }
}

fn reply(st: &mut State, id: u64, msg: ToClient) {
    if let Some(tx) = st.replies.remove(&id) {
        let _ = tx.send(msg);
    }
}

fn unhold(st: &mut State, key: &Key) {
    if let Some(n) = st.held.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            st.held.remove(key);
            st.who_has.remove(key);
        }
    }
}

async fn cancelled(cancel: &CancelToken) {
    while !cancel.is_cancelled() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl FutureHost for Shared {
    fn release(&self, _id: u64, key: &Key, cell: &Arc<Cell>) {
        {
            let mut st = self.lock();
            if st.lost.is_some() {
                return;
            }
            if let Some(list) = st.cells.get_mut(key) {
                list.retain(|w| w.upgrade().is_some_and(|c| !Arc::ptr_eq(&c, cell)));
                if list.is_empty() {
                    st.cells.remove(key);
                }
            }
            unhold(&mut st, key);
            let _ = self.send(ClientMsg::Release { keys: vec![key.clone()] });
        }
    }

    fn wait_for(&self, cells: &[Arc<Cell>], cancel: &CancelToken) -> Result<(), EngineError> {
        for cell in cells {
            while cell.wait_timeout(Duration::from_millis(50)) == brisk_engine::client::Status::Pending {
                if cancel.is_cancelled() {
                    return Err(EngineError::Cancelled);
                }
            }
        }
        Ok(())
    }

    fn fetch(&self, key: &Key, cancel: &CancelToken) -> Result<Value, EngineError> {
        self.fetch_value(key, cancel)
    }
}

impl Coordinator for RemoteClient {
    fn coordinate(
        &self,
        op: CoordOp,
        deadline: Deadline,
        cancel: &CancelToken,
    ) -> Result<CoordReply, EngineError> {
        self.shared.coordinate(op, deadline, cancel)
    }
}

impl Client for RemoteClient {
    fn submit(&self, graph: Graph, outputs: &[Key]) -> Result<Vec<Future>, EngineError> {
        // Tasks on GPU blocks take the `GPU` resource where only some
        // workers offer one, so that they run there. Where every worker
        // does (a CUDA cluster) they stay plain tasks: a worker runs one per
        // thread, as the resource would allow, but the scheduler hands it
        // the next ones ahead (its queue), where a resource taken per task
        // costs a round trip each: G3 ran 3.4 times slower so.
        let gpu = brisk_engine::array::gpu::resource::makes_gpu_blocks(graph.tasks()) && {
            let offers = |w: &WorkerRow| {
                w.resources.iter().any(|(k, v)| k == brisk_engine::array::gpu::resource::GPU && *v > 0.0)
            };
            let rows = self.worker_rows()?;
            rows.iter().any(offers) && !rows.iter().all(offers)
        };
        self.shared.submit(graph, outputs, gpu)
    }

    /// As the default, but the results come from each worker in batches.
    fn gather(&self, futures: &[Future], cancel: &CancelToken) -> Result<Vec<Value>, EngineError> {
        brisk_engine::client::wait(futures, cancel)?;
        let keys: Vec<Key> = futures
            .iter()
            .filter(|f| f.status() == brisk_engine::client::Status::Finished)
            .map(|f| f.key().clone())
            .collect();
        let out = self
            .shared
            .prefetch(&keys, cancel)
            .and_then(|()| futures.iter().map(|f| f.result(cancel)).collect::<Result<Vec<_>, _>>());
        // What a failure left unread is not kept.
        self.shared.lock().prefetched.clear();
        out
    }

    /// As Dask's: the data is on the workers (or the failure known) on
    /// return; unlike the default, nothing is fetched back to know it.
    fn scatter(&self, values: Vec<Value>, cancel: &CancelToken) -> Result<Vec<Future>, EngineError> {
        let (graph, keys) = brisk_engine::client::scatter_graph(values);
        let futures = self.submit(graph, &keys)?;
        brisk_engine::client::wait(&futures, cancel)?;
        for f in &futures {
            if let brisk_engine::client::Status::Error(error) = f.status() {
                return Err(EngineError::Task { key: f.key().clone(), error });
            }
        }
        Ok(futures)
    }

    fn workers(&self) -> Vec<WorkerInfo> {
        self.worker_rows().unwrap_or_default().into_iter().map(worker_info).collect()
    }

    fn run_everywhere(&self, op: Op, cancel: &CancelToken) -> Result<RunResults, EngineError> {
        // The closure's code goes inline: workers may not have it.
        let op = rmp_serde::to_vec(&op)
            .map_err(|e| EngineError::Internal(format!("the call cannot be sent: {e}")))?;
        let (id, rx) = self.shared.ask(|id| ClientMsg::Run { id, op: Blob(op.into()) })?;
        loop {
            match rx.recv_timeout(COORD_POLL) {
                Ok(ToClient::Ran { results, .. }) => return Ok(results),
                Ok(other) => return Err(EngineError::Internal(format!("unexpected answer {other:?}"))),
                Err(RecvTimeoutError::Disconnected) => return Err(self.shared.cut_off()),
                Err(RecvTimeoutError::Timeout) if cancel.is_cancelled() => {
                    self.shared.lock().replies.remove(&id);
                    return Err(EngineError::Cancelled);
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// From the scheduler's `InMemory` messages, which name where each key
    /// this client holds is.
    fn who_has(&self, keys: Option<&[Key]>) -> Vec<(Key, Vec<String>)> {
        let st = self.shared.lock();
        let mut out: Vec<(Key, Vec<String>)> = match keys {
            Some(keys) => {
                keys.iter().filter_map(|k| st.who_has.get(k).map(|w| (k.clone(), w.clone()))).collect()
            }
            None => st.who_has.iter().map(|(k, w)| (k.clone(), w.clone())).collect(),
        };
        if keys.is_none() {
            out.sort_by(|a, b| a.0.cmp(&b.0));
        }
        out
    }

    fn snapshot(&self) -> Snapshot {
        self.info().map(|(_, s)| s).unwrap_or_default()
    }

    fn story(&self, keys: &[Key]) -> Result<Vec<StoryRow>, EngineError> {
        match self.shared.request(|id| ClientMsg::Story { id, keys: keys.to_vec() })? {
            ToClient::Story { rows, .. } => Ok(rows),
            other => Err(EngineError::Internal(format!("unexpected answer {other:?}"))),
        }
    }

    /// The task stream of every worker of the cluster, one row per worker
    /// thread, on the scheduler's clock.
    fn subscribe(&self, capacity: usize) -> crossbeam_channel::Receiver<Event> {
        let (rx, first) = {
            let mut st = self.shared.lock();
            let first = !std::mem::replace(&mut st.streaming, true);
            (st.stream.subscribe(capacity), first)
        };
        if first {
            let _st = self.shared.lock();
            let _ = self.shared.send(ClientMsg::Stream);
        }
        rx
    }

    fn describe(&self) -> String {
        let (n, threads) = self
            .worker_rows()
            .map(|w| (w.len(), w.iter().map(|r| r.threads as usize).sum::<usize>()))
            .unwrap_or((0, 0));
        format!("<Client: {}, workers={n}, threads={threads}>", self.shared.address)
    }

    fn close(&self) {
        self.shared.lose("the client was closed");
        if let Some(rt) = self.rt.lock().unwrap_or_else(|e| e.into_inner()).take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for RemoteClient {
    fn drop(&mut self) {
        Client::close(self);
    }
}
