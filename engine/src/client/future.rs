//! Futures: a client's reference to a key on whatever runs the graph.
//! Holding one keeps the result alive (the scheduler counts it as a
//! "want"); dropping the last clone releases it, as `distributed.Future`.
//! A future knows its host only through `FutureHost`, so futures of the
//! local runtime and of a remote scheduler are the same type.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use crate::error::{EngineError, TaskError};
use crate::key::Key;
use crate::value::Value;

use super::cancel::CancelToken;

/// What a future needs of the client that made it (implemented by the
/// runtimes: the local one here, the remote client in `brisk-distributed`).
pub trait FutureHost: Send + Sync {
    /// One reference to task `id` (key `key`) went away (the last clone of a
    /// future was dropped, or it was cancelled).
    fn release(&self, id: u64, key: &Key, cell: &Arc<Cell>);

    /// Block until every cell settled, or `cancel` fires.
    fn wait_for(&self, cells: &[Arc<Cell>], cancel: &CancelToken) -> Result<(), EngineError>;

    /// Hosts that run tasks on the waiting thread (the `sync` scheduler)
    /// run one here; `None` where tasks run elsewhere.
    fn run_inline(&self, _cancel: &CancelToken) -> Option<Result<(), EngineError>> {
        None
    }

    /// The value of a finished key that lives elsewhere (on a worker of a
    /// remote cluster); hosts that settle cells with their values never
    /// get asked.
    fn fetch(&self, key: &Key, _cancel: &CancelToken) -> Result<Value, EngineError> {
        Err(EngineError::Internal(format!("the result of {key} is not held by this client")))
    }
}

/// Where a future stands (`f.status` in scripts).
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    Pending,
    Finished,
    Error(TaskError),
    Cancelled,
}

impl Status {
    pub fn name(&self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Finished => "finished",
            Status::Error(_) => "error",
            Status::Cancelled => "cancelled",
        }
    }
}

/// What a cell holds: a status, and where a finished result is.
#[derive(Clone, Debug, PartialEq)]
enum Slot {
    Pending,
    /// Finished, with the value here.
    Value(Value),
    /// Finished; the value stays where it was computed (`FutureHost::fetch`).
    Elsewhere,
    Error(TaskError),
    Cancelled,
}

impl Slot {
    fn status(&self) -> Status {
        match self {
            Slot::Pending => Status::Pending,
            Slot::Value(_) | Slot::Elsewhere => Status::Finished,
            Slot::Error(e) => Status::Error(e.clone()),
            Slot::Cancelled => Status::Cancelled,
        }
    }
}

/// Where to announce that a cell settled: `as_completed` gets the position.
type Waker = (Sender<usize>, usize);

/// The completion slot the runtime fills in.
pub struct Cell {
    state: Mutex<(Slot, Vec<Waker>)>,
    cond: Condvar,
}

impl Cell {
    pub fn new() -> Arc<Cell> {
        Arc::new(Cell { state: Mutex::new((Slot::Pending, Vec::new())), cond: Condvar::new() })
    }

    fn lock(&self) -> MutexGuard<'_, (Slot, Vec<Waker>)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn put(&self, slot: Slot) {
        let mut g = self.lock();
        if g.0 != Slot::Pending {
            return;
        }
        g.0 = slot;
        for (s, index) in g.1.drain(..) {
            let _ = s.try_send(index);
        }
        self.cond.notify_all();
    }

    /// Finished with `value`. A cell settles once; later calls are ignored.
    pub fn finish(&self, value: Value) {
        self.put(Slot::Value(value));
    }

    /// Finished, the value held where it was computed.
    pub fn finish_elsewhere(&self) {
        self.put(Slot::Elsewhere);
    }

    pub fn fail(&self, error: TaskError) {
        self.put(Slot::Error(error));
    }

    pub fn cancel(&self) {
        self.put(Slot::Cancelled);
    }

    pub fn status(&self) -> Status {
        self.lock().0.status()
    }

    fn slot(&self) -> Slot {
        self.lock().0.clone()
    }

    /// Send `index` on `tx` once settled (at once if it already is).
    fn notify_on_settle(&self, tx: Sender<usize>, index: usize) {
        let mut g = self.lock();
        if g.0 != Slot::Pending {
            let _ = tx.try_send(index);
        } else {
            g.1.push((tx, index));
        }
    }

    /// Drop the announcements to `tx`'s channel (a wait that ended).
    fn forget(&self, tx: &Sender<usize>) {
        self.lock().1.retain(|(s, _)| !s.same_channel(tx));
    }

    /// Wait up to `timeout` for the cell to settle.
    pub fn wait_timeout(&self, timeout: Duration) -> Status {
        let g = self.lock();
        if g.0 != Slot::Pending {
            return g.0.status();
        }
        let (g, _) = self.cond.wait_timeout(g, timeout).unwrap_or_else(|e| e.into_inner());
        g.0.status()
    }
}

pub(crate) struct Inner {
    pub(crate) key: Key,
    /// The host's handle of the task.
    pub(crate) id: u64,
    pub(crate) cell: Arc<Cell>,
    pub(crate) host: Weak<dyn FutureHost>,
    /// The scheduler's reference is dropped once: by `cancel` or by drop.
    pub(crate) released: AtomicBool,
}

impl Inner {
    fn release_once(&self) {
        if self.released.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(host) = self.host.upgrade() {
            host.release(self.id, &self.key, &self.cell);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.release_once();
    }
}

/// A reference to a (possibly pending) result on a runtime.
#[derive(Clone)]
pub struct Future {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Future {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<Future: {}, key: {}>", self.status().name(), self.inner.key)
    }
}

impl Future {
    /// A pending future of task `id` on `host`, and the cell the host
    /// settles when the task is done.
    pub fn pending(key: Key, id: u64, host: Weak<dyn FutureHost>) -> (Future, Arc<Cell>) {
        let cell = Cell::new();
        let inner = Inner { key, id, cell: cell.clone(), host, released: AtomicBool::new(false) };
        (Future { inner: Arc::new(inner) }, cell)
    }

    /// A future of `key` settled through `cell`, which the host made
    /// (and registered) before the task could finish.
    pub fn for_cell(key: Key, id: u64, cell: Arc<Cell>, host: Weak<dyn FutureHost>) -> Future {
        let inner = Inner { key, id, cell, host, released: AtomicBool::new(false) };
        Future { inner: Arc::new(inner) }
    }

    pub fn key(&self) -> &Key {
        &self.inner.key
    }

    pub fn status(&self) -> Status {
        self.inner.cell.status()
    }

    pub fn done(&self) -> bool {
        self.status() != Status::Pending
    }

    /// Block until the result is there (running tasks inline in sync mode).
    pub fn result(&self, cancel: &CancelToken) -> Result<Value, EngineError> {
        if self.status() == Status::Pending {
            let host = self.inner.host.upgrade().ok_or(EngineError::Shutdown)?;
            host.wait_for(std::slice::from_ref(&self.inner.cell), cancel)?;
        }
        match self.inner.cell.slot() {
            Slot::Value(v) => Ok(v),
            Slot::Elsewhere => {
                let host = self.inner.host.upgrade().ok_or(EngineError::Shutdown)?;
                host.fetch(&self.inner.key, cancel)
            }
            Slot::Error(error) => Err(EngineError::Task { key: self.inner.key.clone(), error }),
            Slot::Cancelled => Err(EngineError::FutureCancelled(self.inner.key.clone())),
            Slot::Pending => Err(EngineError::Internal("future still pending after wait".into())),
        }
    }

    /// Stop caring about the result: this future (and its clones) report
    /// `cancelled`, and the task stops if nothing else needs it.
    pub fn cancel(&self) {
        self.inner.cell.cancel();
        self.inner.release_once();
    }
}

/// Wait for all futures to settle (`wait(futs)`). Futures may come from
/// different runtimes; a future whose runtime is gone cannot settle.
pub fn wait(futures: &[Future], cancel: &CancelToken) -> Result<(), EngineError> {
    for f in futures.iter().filter(|f| !f.done()) {
        let host = f.inner.host.upgrade().ok_or(EngineError::Shutdown)?;
        host.wait_for(std::slice::from_ref(&f.inner.cell), cancel)?;
    }
    Ok(())
}

/// What `wait_until` waits for (Dask's `return_when`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnWhen {
    AllCompleted,
    FirstCompleted,
    /// The first error, or all completed.
    FirstException,
}

/// Wait until the futures meet `when`, or `deadline` passes (Dask's
/// `wait(fs, timeout, return_when)`): whether they met it in time.
pub fn wait_until(
    futures: &[Future],
    cancel: &CancelToken,
    deadline: Option<Instant>,
    when: ReturnWhen,
) -> Result<bool, EngineError> {
    let (tx, rx) = crossbeam_channel::unbounded();
    for (i, f) in futures.iter().enumerate() {
        f.inner.cell.notify_on_settle(tx.clone(), i);
    }
    let out = wait_on(futures, cancel, deadline, when, &rx);
    // A cell that did not settle would otherwise keep this wait's sender.
    futures.iter().for_each(|f| f.inner.cell.forget(&tx));
    out
}

fn wait_on(
    futures: &[Future],
    cancel: &CancelToken,
    deadline: Option<Instant>,
    when: ReturnWhen,
    rx: &crossbeam_channel::Receiver<usize>,
) -> Result<bool, EngineError> {
    let met = || match when {
        ReturnWhen::AllCompleted => futures.iter().all(Future::done),
        ReturnWhen::FirstCompleted => futures.is_empty() || futures.iter().any(Future::done),
        ReturnWhen::FirstException => {
            futures.iter().all(Future::done) || futures.iter().any(|f| matches!(f.status(), Status::Error(_)))
        }
    };
    loop {
        if met() {
            return Ok(true);
        }
        if cancel.is_cancelled() {
            return Err(EngineError::Cancelled);
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(false);
        }
        let host = futures.iter().find(|f| !f.done()).and_then(|f| f.inner.host.upgrade());
        let Some(host) = host else { return Err(EngineError::Shutdown) };
        // Where nobody else runs tasks (sync mode), run one here.
        match host.run_inline(cancel) {
            Some(Err(e)) => return Err(e),
            Some(Ok(())) => {}
            None => {
                let step = Duration::from_millis(50);
                let _ =
                    rx.recv_timeout(deadline.map_or(step, |d| d.saturating_duration_since(now).min(step)));
            }
        }
    }
}

/// Keep `futures` until each settles, running nothing here (a waiting
/// thread of the sync scheduler would run tasks beside the script's own):
/// `fire_and_forget`. Returns early if their runtime is gone.
pub fn hold_until_settled(futures: Vec<Future>) {
    for f in &futures {
        while !f.done() {
            if f.inner.host.upgrade().is_none() {
                return;
            }
            f.inner.cell.wait_timeout(Duration::from_millis(200));
        }
    }
}

/// Wait for all futures and give the first error, without fetching any
/// value (a persisted result on a cluster stays on its worker).
pub fn wait_ok(futures: &[Future], cancel: &CancelToken) -> Result<(), EngineError> {
    wait(futures, cancel)?;
    for f in futures {
        match f.inner.cell.slot() {
            Slot::Error(error) => return Err(EngineError::Task { key: f.inner.key.clone(), error }),
            Slot::Cancelled => return Err(EngineError::FutureCancelled(f.inner.key.clone())),
            _ => {}
        }
    }
    Ok(())
}

/// Results of all futures, in order (`gather(futs)`); the first error wins.
pub fn gather(futures: &[Future], cancel: &CancelToken) -> Result<Vec<Value>, EngineError> {
    wait(futures, cancel)?;
    futures.iter().map(|f| f.result(cancel)).collect()
}

/// Futures in the order they finish (`as_completed(futs)`), as an iterator
/// that blocks for the next one.
pub struct AsCompleted {
    /// Futures not handed out yet, by their position in the input.
    slots: Vec<Option<Future>>,
    left: usize,
    /// Positions of settled futures, in the order they settled.
    rx: crossbeam_channel::Receiver<usize>,
    cancel: CancelToken,
}

impl AsCompleted {
    pub fn new(futures: Vec<Future>, cancel: CancelToken) -> AsCompleted {
        let (tx, rx) = crossbeam_channel::unbounded();
        for (i, f) in futures.iter().enumerate() {
            f.inner.cell.notify_on_settle(tx.clone(), i);
        }
        let left = futures.len();
        AsCompleted { slots: futures.into_iter().map(Some).collect(), left, rx, cancel }
    }

    fn take(&mut self, i: usize) -> Option<Future> {
        let f = self.slots.get_mut(i).and_then(Option::take)?;
        self.left -= 1;
        Some(f)
    }
}

impl Iterator for AsCompleted {
    type Item = Result<Future, EngineError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.left == 0 {
                return None;
            }
            if let Ok(i) = self.rx.try_recv()
                && let Some(f) = self.take(i)
            {
                return Some(Ok(f));
            }
            if self.cancel.is_cancelled() {
                return Some(Err(EngineError::Cancelled));
            }
            let any = self.slots.iter().flatten().next()?;
            let Some(host) = any.inner.host.upgrade() else {
                return Some(Err(EngineError::Shutdown));
            };
            // Where nobody else runs tasks (sync mode), run one here.
            match host.run_inline(&self.cancel) {
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok(())) => {}
                None => {
                    if let Ok(i) = self.rx.recv_timeout(Duration::from_millis(50))
                        && let Some(f) = self.take(i)
                    {
                        return Some(Ok(f));
                    }
                }
            }
        }
    }
}
