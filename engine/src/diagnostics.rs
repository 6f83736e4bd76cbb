//! One stream of diagnostics that progress bars, the dashboard, the kernel
//! and performance reports all read (STYLE habit 13): snapshots of per-group
//! progress and memory (polled), and events pushed to subscribers. Events
//! are lossy on purpose: a slow subscriber misses events rather than slowing
//! the computation (the channel is bounded and sends never block).

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, TrySendError};

use crate::error::TaskError;
use crate::key::Key;
use crate::scheduler::GroupStats;

/// Progress of one task group.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GroupProgress {
    pub name: Arc<str>,
    pub total: u64,
    pub done: u64,
    pub erred: u64,
    pub waiting: u64,
    pub queued: u64,
    pub processing: u64,
    pub in_memory: u64,
}

impl From<&GroupStats> for GroupProgress {
    fn from(g: &GroupStats) -> Self {
        use crate::scheduler::TaskState as S;
        GroupProgress {
            name: g.name.clone(),
            total: g.total,
            done: g.done,
            erred: g.erred,
            waiting: g.in_state(S::Waiting),
            queued: g.in_state(S::Queued),
            processing: g.in_state(S::Processing),
            in_memory: g.in_state(S::Memory),
        }
    }
}

/// A point-in-time view of a runtime.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    pub groups: Vec<GroupProgress>,
    /// Bytes of results held in memory.
    pub memory_bytes: u64,
    pub threads: usize,
    pub busy_threads: usize,
    pub transitions: u64,
    /// Tasks the scheduler holds (0 once nothing is referenced).
    pub tasks_held: usize,
}

impl Snapshot {
    /// (done, total) summed over groups.
    pub fn totals(&self) -> (u64, u64) {
        self.groups.iter().fold((0, 0), |(d, t), g| (d + g.done, t + g.total))
    }
}

/// Something that happened, pushed to subscribers.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A task ran on a thread from `start_us` to `stop_us` (µs since the
    /// runtime started), for task-stream views.
    TaskRan { key: Key, thread: usize, start_us: u64, stop_us: u64, ok: bool },
    /// A task failed (after its retries).
    TaskErred { key: Key, error: TaskError },
    /// Bytes of results in memory changed.
    Memory { bytes: u64 },
    /// A line a task's program printed (`run_command`), for the log view.
    Output { key: Key, line: Arc<str> },
}

/// The subscribers of a runtime.
#[derive(Default)]
pub struct Hub {
    subscribers: Vec<Sender<Event>>,
}

impl Hub {
    pub fn subscribe(&mut self, capacity: usize) -> Receiver<Event> {
        let (tx, rx) = crossbeam_channel::bounded(capacity.max(1));
        self.subscribers.push(tx);
        rx
    }

    pub fn is_empty(&self) -> bool {
        self.subscribers.is_empty()
    }

    /// Send to every live subscriber; drop the ones that went away.
    pub fn publish(&mut self, event: Event) {
        self.subscribers.retain(|s| match s.try_send(event.clone()) {
            Ok(()) | Err(TrySendError::Full(_)) => true,
            Err(TrySendError::Disconnected(_)) => false,
        });
    }
}
