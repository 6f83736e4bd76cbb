//! Futures: a client's reference to a key on the runtime. Holding one keeps
//! the result alive (the scheduler counts it as a "want"); dropping the last
//! clone releases it, as `distributed.Future`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use crossbeam_channel::Sender;

use crate::error::{EngineError, TaskError};
use crate::graph::Key;
use crate::scheduler::TaskId;
use crate::value::Value;

use super::{CancelToken, Shared};

/// Where a future stands (`f.status` in scripts).
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    Pending,
    Finished(Value),
    Error(TaskError),
    Cancelled,
}

impl Status {
    pub fn name(&self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Finished(_) => "finished",
            Status::Error(_) => "error",
            Status::Cancelled => "cancelled",
        }
    }
}

/// The completion slot the runtime fills in.
pub(crate) struct Cell {
    state: Mutex<(Status, Vec<Sender<()>>)>,
    cond: Condvar,
}

impl Cell {
    pub(crate) fn new() -> Arc<Cell> {
        Arc::new(Cell { state: Mutex::new((Status::Pending, Vec::new())), cond: Condvar::new() })
    }

    fn lock(&self) -> MutexGuard<'_, (Status, Vec<Sender<()>>)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Settle the cell once; later calls are ignored.
    pub(crate) fn settle(&self, status: Status) {
        let mut g = self.lock();
        if g.0 != Status::Pending {
            return;
        }
        g.0 = status;
        for s in g.1.drain(..) {
            let _ = s.try_send(());
        }
        self.cond.notify_all();
    }

    pub(crate) fn status(&self) -> Status {
        self.lock().0.clone()
    }

    /// Register a wake-up for `as_completed`; returns false if already settled.
    fn notify_on_settle(&self, tx: Sender<()>) -> bool {
        let mut g = self.lock();
        if g.0 != Status::Pending {
            return false;
        }
        g.1.push(tx);
        true
    }

    /// Wait up to `timeout` for the cell to settle.
    fn wait_timeout(&self, timeout: Duration) -> Status {
        let g = self.lock();
        if g.0 != Status::Pending {
            return g.0.clone();
        }
        let (g, _) = self.cond.wait_timeout(g, timeout).unwrap_or_else(|e| e.into_inner());
        g.0.clone()
    }
}

pub(crate) struct Inner {
    pub(crate) key: Key,
    pub(crate) task: TaskId,
    pub(crate) cell: Arc<Cell>,
    pub(crate) runtime: Weak<Shared>,
    /// The scheduler's reference is dropped once: by `cancel` or by drop.
    pub(crate) released: AtomicBool,
}

impl Inner {
    fn release_once(&self) {
        if self.released.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(rt) = self.runtime.upgrade() {
            rt.release(self.task, &self.cell);
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
        let rt = self.inner.runtime.upgrade().ok_or(EngineError::Shutdown)?;
        rt.wait_for(std::slice::from_ref(&self.inner.cell), cancel)?;
        match self.status() {
            Status::Finished(v) => Ok(v),
            Status::Error(error) => Err(EngineError::Task { key: self.inner.key.clone(), error }),
            Status::Cancelled => Err(EngineError::FutureCancelled(self.inner.key.clone())),
            Status::Pending => Err(EngineError::Invalid("future still pending after wait".into())),
        }
    }

    /// Stop caring about the result: this future (and its clones) report
    /// `cancelled`, and the task stops if nothing else needs it.
    pub fn cancel(&self) {
        self.inner.cell.settle(Status::Cancelled);
        self.inner.release_once();
    }
}

/// Wait for all futures to settle (`wait(futs)`).
pub fn wait(futures: &[Future], cancel: &CancelToken) -> Result<(), EngineError> {
    let Some(rt) = futures.first().and_then(|f| f.inner.runtime.upgrade()) else { return Ok(()) };
    let cells: Vec<Arc<Cell>> = futures.iter().map(|f| f.inner.cell.clone()).collect();
    rt.wait_for(&cells, cancel)
}

/// Results of all futures, in order (`gather(futs)`); the first error wins.
pub fn gather(futures: &[Future], cancel: &CancelToken) -> Result<Vec<Value>, EngineError> {
    wait(futures, cancel)?;
    futures.iter().map(|f| f.result(cancel)).collect()
}

/// Futures in the order they finish (`as_completed(futs)`), as an iterator
/// that blocks for the next one.
pub struct AsCompleted {
    pending: Vec<Future>,
    rx: crossbeam_channel::Receiver<()>,
    cancel: CancelToken,
}

impl AsCompleted {
    pub fn new(futures: Vec<Future>, cancel: CancelToken) -> AsCompleted {
        let (tx, rx) = crossbeam_channel::unbounded();
        for f in &futures {
            f.inner.cell.notify_on_settle(tx.clone());
        }
        AsCompleted { pending: futures, rx, cancel }
    }
}

impl Iterator for AsCompleted {
    type Item = Result<Future, EngineError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.pending.is_empty() {
                return None;
            }
            if let Some(i) = self.pending.iter().position(Future::done) {
                return Some(Ok(self.pending.remove(i)));
            }
            if self.cancel.is_cancelled() {
                return Some(Err(EngineError::Cancelled));
            }
            let rt = self.pending[0].inner.runtime.upgrade();
            match rt {
                Some(rt) if rt.is_sync() => {
                    // Nobody else runs tasks in sync mode: run one here.
                    if let Err(e) = rt.run_one_inline(&self.cancel) {
                        return Some(Err(e));
                    }
                }
                Some(_) => {
                    let _ = self.rx.recv_timeout(Duration::from_millis(50));
                }
                None => return Some(Err(EngineError::Shutdown)),
            }
        }
    }
}

pub(crate) fn wait_cell(cell: &Cell, timeout: Duration) -> Status {
    cell.wait_timeout(timeout)
}
