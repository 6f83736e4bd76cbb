//! What every kernel runs with: the context of its task, and the runner of
//! user closures. User closures appear only as `Udf` (source text, an entry
//! point and the captured values); the engine runs them through the
//! `UdfRunner` trait that the script layer implements, so the engine never
//! depends on Rhai. This sits below the kernels; `crate::exec` above them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::TaskError;
use crate::key::Key;
use crate::value::Value;

/// A user closure in shipped form: the source chunks that define it, the name
/// of the function to call and the values it captured. Every executor, local
/// or remote, compiles the chunks (cached per thread) and calls `entry`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Udf {
    /// For keys and messages: `"inc"`, or `"lambda"` for anonymous closures.
    pub label: String,
    pub entry: String,
    pub code: Arc<Code>,
    /// Captured values, passed before the call's own arguments.
    pub curry: Vec<Value>,
}

/// The source text a closure needs, as separately compiled chunks (one per
/// REPL input or script file, so positions and closure names reproduce).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Code {
    /// Hash of every chunk: executors cache compiled code by it.
    pub id: u128,
    pub chunks: Vec<SourceChunk>,
}

impl Code {
    /// Code of `chunks`, with its id: a hash of every chunk's origin and text.
    pub fn new(chunks: Vec<SourceChunk>) -> Code {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for c in &chunks {
            h.update(&(c.origin.len() as u64).to_le_bytes());
            h.update(c.origin.as_bytes());
            h.update(&(c.text.len() as u64).to_le_bytes());
            h.update(c.text.as_bytes());
        }
        Code { id: h.digest128(), chunks }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SourceChunk {
    /// Where the text came from (a file name or `"<input 3>"`), for messages.
    pub origin: Arc<str>,
    pub text: Arc<str>,
}

/// What a running task can see of its surroundings.
pub struct TaskContext<'a> {
    pub key: &'a Key,
    /// Set when the scheduler cancels this attempt.
    pub cancelled: &'a Arc<AtomicBool>,
    /// Set when the client that runs this task inline (sync mode) is
    /// interrupted (Ctrl-C): the task stops, and is not failed.
    pub interrupt: Option<&'a Arc<AtomicBool>>,
}

impl TaskContext<'_> {
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed) || self.interrupt.is_some_and(|i| i.load(Ordering::Relaxed))
    }
}

/// Runs shipped closures. Implemented by the script layer.
pub trait UdfRunner: Send + Sync {
    fn call(&self, udf: &Udf, args: Vec<Value>, ctx: &TaskContext<'_>) -> Result<Value, TaskError>;

    /// `udf(x)` for each item (bag `map`, `filter`, keys): a runner can look
    /// the closure up once for all of them. An error comes with the index
    /// of the item that caused it.
    fn call_each(
        &self,
        udf: &Udf,
        items: &[Value],
        ctx: &TaskContext<'_>,
    ) -> Result<Vec<Value>, (usize, TaskError)> {
        items
            .iter()
            .enumerate()
            .map(|(i, x)| self.call(udf, vec![x.clone()], ctx).map_err(|e| (i, e)))
            .collect()
    }
}

/// A runner for graphs without closures (tests, the scheduler benchmark).
pub struct NoUdfs;

impl UdfRunner for NoUdfs {
    fn call(&self, udf: &Udf, _: Vec<Value>, _: &TaskContext<'_>) -> Result<Value, TaskError> {
        Err(TaskError::user(format!("no script engine here to run closure '{}'", udf.label)))
    }
}
