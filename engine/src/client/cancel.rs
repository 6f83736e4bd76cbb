//! Stopping a wait from outside: Ctrl-C, a Jupyter interrupt.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A flag to stop waiting (Ctrl-C, a Jupyter interrupt). Passed in, never global.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>, Option<Arc<AtomicBool>>);

impl CancelToken {
    pub fn new() -> CancelToken {
        CancelToken::default()
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed) || self.1.as_ref().is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// A token on a task's flags: its cancel flag, and the interrupt of
    /// the client that runs it inline (sync mode), if any. `cancel()` sets
    /// the first.
    pub fn of_task(cancelled: Arc<AtomicBool>, interrupt: Option<Arc<AtomicBool>>) -> CancelToken {
        CancelToken(cancelled, interrupt)
    }

    /// The flag itself, for code that must poll it where a token cannot go.
    pub fn flag(&self) -> &Arc<AtomicBool> {
        &self.0
    }
}
