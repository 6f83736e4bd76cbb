//! Errors of the engine. `TaskError` travels with a failed task (it is
//! serializable, so remote workers report it the same way); `EngineError`
//! covers what a client call can run into.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::key::Key;

/// Where in the user's script an error happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourcePos {
    /// File name or `<input N>`.
    pub origin: String,
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for SourcePos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.origin, self.line, self.column)
    }
}

/// Why a task failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskErrorKind {
    /// The task's own code raised an error (worth a retry only if flaky).
    User,
    /// The task panicked; the worker survived.
    Panic,
    /// The task was cancelled.
    Cancelled,
    /// A dependency failed, so this task never ran.
    DependencyFailed,
    /// The task was running on too many workers that died (Dask's `KilledWorker`).
    KilledWorker,
    /// A bug in brisk.
    Internal,
}

/// A failed task: a message, its kind and, for script errors, the position
/// inside the closure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub struct TaskError {
    pub kind: TaskErrorKind,
    pub message: String,
    pub position: Option<SourcePos>,
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(p) = &self.position {
            write!(f, " (at {p})")?;
        }
        Ok(())
    }
}

impl TaskError {
    pub fn user(message: impl Into<String>) -> TaskError {
        TaskError { kind: TaskErrorKind::User, message: message.into(), position: None }
    }
    pub fn internal(message: impl Into<String>) -> TaskError {
        TaskError { kind: TaskErrorKind::Internal, message: message.into(), position: None }
    }
    pub fn cancelled() -> TaskError {
        TaskError { kind: TaskErrorKind::Cancelled, message: "cancelled".into(), position: None }
    }
    pub fn panic(message: impl Into<String>) -> TaskError {
        TaskError { kind: TaskErrorKind::Panic, message: message.into(), position: None }
    }
    pub fn dependency_failed(dep: &Key, cause: &TaskError) -> TaskError {
        TaskError {
            kind: TaskErrorKind::DependencyFailed,
            message: format!("dependency {dep} failed: {}", cause.message),
            position: cause.position.clone(),
        }
    }
    pub fn with_position(mut self, pos: SourcePos) -> TaskError {
        self.position = Some(pos);
        self
    }
}

/// Errors of stimuli that carry client input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub enum SchedulerError {
    #[error("task {task} depends on {dep}, which is neither in the graph nor held by the scheduler")]
    MissingDependency { task: Key, dep: Key },
    #[error("the graph has a cycle through {0}")]
    Cycle(Key),
    #[error("key {0} is not known to the scheduler")]
    UnknownKey(Key),
    #[error("task {task} refers to closure code {code} that was not sent with the graph")]
    MissingCode { task: Key, code: String },
}

/// Errors of client calls on a runtime.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    #[error("task {key} failed: {error}")]
    Task { key: Key, error: TaskError },
    /// The wait was interrupted (Ctrl-C, a kernel interrupt).
    #[error("computation cancelled")]
    Cancelled,
    /// The future was cancelled with `cancel()` (Dask's `CancelledError`).
    #[error("future {0} was cancelled")]
    FutureCancelled(Key),
    #[error("key {0} is not known to the scheduler (it was released or never computed)")]
    UnknownKey(Key),
    #[error("the scheduler has shut down")]
    Shutdown,
    /// The graph was refused (a missing dependency, a cycle, an unknown output).
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// A task asks for more of a resource than any worker offers, so it would wait forever.
    #[error("task {task} needs resource {name}={need}, but the local worker has {name}={have}")]
    MissingResource { task: Key, name: String, need: f64, have: f64 },
    /// `story()` on the local scheduler, which keeps none (its per-task
    /// overhead is the point of it).
    #[error(
        "the local scheduler keeps no story of its tasks: run on a cluster (local_cluster(), brisk scheduler) for one"
    )]
    NoStory,
    /// A coordination request refused (`Lock.release` by a non-holder,
    /// an unknown dataset).
    #[error(transparent)]
    Coordination(#[from] crate::coordination::error::CoordError),
    /// A bug in brisk, with what went wrong.
    #[error("{0}")]
    Internal(String),
}

/// What a caught panic said, for messages.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
