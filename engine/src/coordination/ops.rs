//! The requests to the coordination state and its answers, as they
//! travel between a client, a task and whoever holds the state.

use serde::{Deserialize, Serialize};

use super::error::CoordError;
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
    /// Free what these holders took (the Lock and Semaphore objects of a
    /// task that ended: nothing else can release it).
    DropHolders {
        holders: Vec<u64>,
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
