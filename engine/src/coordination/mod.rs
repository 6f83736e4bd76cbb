//! Coordination between tasks and clients, as `distributed`'s `Variable`,
//! `Queue`, `Lock`, `Event`, `Semaphore` and published datasets: named
//! things held by whoever schedules (the local runtime, or the cluster's
//! scheduler), reached from the session and from inside tasks alike.
//!
//! [`Board`] is the state (pure); [`LocalBoard`] hosts one in a process and
//! makes its waits block with a deadline; the cluster's scheduler hosts
//! another behind its protocol.

mod board;
pub(crate) mod error;
mod ops;

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

pub use board::{Answers, Board, Ticket};
pub use error::CoordError;
pub use ops::{Batch, CoordOp, CoordReply};

use crate::client::cancel::CancelToken;
use crate::error::EngineError;

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
    use crate::value::Value;

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
