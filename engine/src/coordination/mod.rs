//! Coordination between tasks and clients, as `distributed`'s `Variable`,
//! `Queue`, `Lock`, `Event`, `Semaphore` and published datasets: named
//! things held by whoever schedules (the local runtime, or the cluster's
//! scheduler), reached from the session and from inside tasks alike.
//!
//! [`Board`] is the state (pure); [`LocalBoard`] hosts one in a process and
//! makes its waits block with a deadline; the cluster's scheduler hosts
//! another behind its protocol.

mod board;

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

pub use board::{Answers, Board, Ticket};

use crate::client::cancel::CancelToken;
use crate::error::EngineError;
use crate::value::Value;

/// How many items a queue `get` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Batch {
    /// One item (waits for it).
    One,
    /// Exactly n items (waits until there are n).
    N(u64),
    /// Whatever is there now, perhaps none (never waits).
    All,
}

/// One request to the coordination state. Holders are random ids, one per
/// `Lock` or `Semaphore` object, so only the object that took a lock or
/// lease gives it back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CoordOp {
    SetVariable {
        name: String,
        value: Value,
    },
    /// Waits until the variable is set.
    GetVariable {
        name: String,
    },
    DeleteVariable {
        name: String,
    },
    /// Waits while the queue is full; `maxsize` 0 is unbounded, and the
    /// first `put` on a queue sets it.
    Put {
        queue: String,
        value: Value,
        maxsize: u64,
    },
    Get {
        queue: String,
        batch: Batch,
    },
    QueueSize {
        queue: String,
    },
    /// Waits while another holder has it.
    Acquire {
        lock: String,
        holder: u64,
    },
    Release {
        lock: String,
        holder: u64,
    },
    Locked {
        lock: String,
    },
    SetEvent {
        name: String,
    },
    ClearEvent {
        name: String,
    },
    /// Waits until the event is set.
    WaitEvent {
        name: String,
    },
    IsSet {
        name: String,
    },
    /// Waits while every lease is taken.
    AcquireLease {
        semaphore: String,
        max_leases: u64,
        holder: u64,
    },
    ReleaseLease {
        semaphore: String,
        max_leases: u64,
        holder: u64,
    },
    /// How many leases are taken now (Dask's `get_value`).
    Leases {
        semaphore: String,
        max_leases: u64,
    },
    Publish {
        name: String,
        value: Value,
        replace: bool,
    },
    Dataset {
        name: String,
    },
    Datasets,
    Unpublish {
        name: String,
    },
}

impl CoordOp {
    /// The holder a request takes something for, if any: a host frees what
    /// a holder took when the process that made it goes away.
    pub fn holder(&self) -> Option<u64> {
        match self {
            CoordOp::Acquire { holder, .. } | CoordOp::AcquireLease { holder, .. } => Some(*holder),
            _ => None,
        }
    }
}

/// The answer to one request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CoordReply {
    Done,
    Value(Value),
    Values(Vec<Value>),
    Flag(bool),
    Count(u64),
    Names(Vec<String>),
    /// It would have waited longer than it was allowed to.
    TimedOut,
    Failed(CoordError),
}

/// A request the state refuses.
#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum CoordError {
    #[error("release: lock '{lock}' is not held by this Lock (acquire it first)")]
    NotHeld { lock: String },
    #[error("release: this Semaphore holds no lease of '{semaphore}' (acquire one first)")]
    NoLease { semaphore: String },
    #[error("Semaphore '{semaphore}' exists with max_leases={has}, not {asked}")]
    LeasesDiffer { semaphore: String, has: u64, asked: u64 },
    #[error("dataset '{name}' is already published (unpublish it first, or publish with override)")]
    DatasetExists { name: String },
    #[error("no dataset named '{name}' is published (published: {})", list(known))]
    NoDataset { name: String, known: Vec<String> },
    /// A task asked where no client can be reached.
    #[error("{0}")]
    Unavailable(String),
}

fn list(names: &[String]) -> String {
    if names.is_empty() { "none".into() } else { names.join(", ") }
}

/// How long a request may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// Answer now (`blocking: false`, a zero timeout).
    Now,
    At(Instant),
    Never,
}

impl Deadline {
    /// `timeout` seconds from now (`None`: wait as long as it takes).
    pub fn after(timeout: Option<Duration>) -> Deadline {
        match timeout {
            None => Deadline::Never,
            Some(d) if d.is_zero() => Deadline::Now,
            Some(d) => Instant::now().checked_add(d).map_or(Deadline::Never, Deadline::At),
        }
    }

    pub fn passed(&self) -> bool {
        match self {
            Deadline::Now => true,
            Deadline::At(at) => Instant::now() >= *at,
            Deadline::Never => false,
        }
    }

    /// The next wait: until the deadline, at most `slice` (to look at the
    /// cancel token between).
    pub fn slice(&self, slice: Duration) -> Duration {
        match self {
            Deadline::Now => Duration::ZERO,
            Deadline::At(at) => at.saturating_duration_since(Instant::now()).min(slice),
            Deadline::Never => slice,
        }
    }
}

/// What answers coordination requests: a client (the session's, or the one
/// a task reaches its scheduler through).
pub trait Coordinator: Send + Sync {
    /// Handle `op`, waiting for it until `deadline` (then `TimedOut`) or
    /// until `cancel` fires (then `EngineError::Cancelled`).
    fn coordinate(
        &self,
        op: CoordOp,
        deadline: Deadline,
        cancel: &CancelToken,
    ) -> Result<CoordReply, EngineError>;
}

/// How often a waiting request looks at its cancel token.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// A [`Board`] in this process: requests from any thread, waits on a
/// condition variable.
#[derive(Default)]
pub struct LocalBoard {
    inner: Mutex<Inner>,
    changed: Condvar,
}

#[derive(Default)]
struct Inner {
    board: Board,
    answers: FxHashMap<Ticket, CoordReply>,
    next: Ticket,
}

impl LocalBoard {
    pub fn new() -> LocalBoard {
        LocalBoard::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn post(&self, inner: &mut Inner, answers: Answers, mine: Ticket) {
        let others = answers.iter().any(|(t, _)| *t != mine);
        inner.answers.extend(answers);
        if others {
            self.changed.notify_all();
        }
    }
}

impl Coordinator for LocalBoard {
    fn coordinate(
        &self,
        op: CoordOp,
        deadline: Deadline,
        cancel: &CancelToken,
    ) -> Result<CoordReply, EngineError> {
        let mut inner = self.lock();
        inner.next += 1;
        let ticket = inner.next;
        let answers = inner.board.request(ticket, op, deadline != Deadline::Now);
        self.post(&mut inner, answers, ticket);
        loop {
            if let Some(reply) = inner.answers.remove(&ticket) {
                return Ok(reply);
            }
            let cancelled = cancel.is_cancelled();
            if cancelled || deadline.passed() {
                return match inner.board.withdraw(ticket) {
                    Some(_) if cancelled => Err(EngineError::Cancelled),
                    Some(reply) => Ok(reply),
                    // Answered meanwhile: the answer is in.
                    None => Ok(inner.answers.remove(&ticket).unwrap_or(CoordReply::TimedOut)),
                };
            }
            let wait = deadline.slice(CANCEL_POLL);
            inner = self.changed.wait_timeout(inner, wait).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_local_get_waits_for_a_put_from_another_thread_and_times_out_alone() {
        let board = Arc::new(LocalBoard::new());
        let cancel = CancelToken::new();
        let get = CoordOp::Get { queue: "q".into(), batch: Batch::One };
        let b = board.clone();
        let getter = std::thread::spawn(move || b.coordinate(get, Deadline::Never, &CancelToken::new()));
        std::thread::sleep(Duration::from_millis(20));
        let put = CoordOp::Put { queue: "q".into(), value: Value::Int(7), maxsize: 0 };
        assert_eq!(board.coordinate(put, Deadline::Never, &cancel).ok(), Some(CoordReply::Done));
        assert_eq!(getter.join().ok().and_then(Result::ok), Some(CoordReply::Value(Value::Int(7))));
        let get = CoordOp::Get { queue: "q".into(), batch: Batch::One };
        let at = Deadline::after(Some(Duration::from_millis(30)));
        assert_eq!(board.coordinate(get.clone(), at, &cancel).ok(), Some(CoordReply::TimedOut));
        assert_eq!(board.coordinate(get.clone(), Deadline::Now, &cancel).ok(), Some(CoordReply::TimedOut));
        cancel.cancel();
        assert!(matches!(board.coordinate(get, Deadline::Never, &cancel), Err(EngineError::Cancelled)));
        assert_eq!(board.lock().board.waiting(), 0, "nothing left waiting");
    }
}
