//! brisk-engine: lazy task graphs over chunked collections, the scheduling
//! state machine, and the executors that run it. No Rhai, no terminal, no
//! Jupyter here: the engine is usable from plain Rust.
//!
//! The shape of a computation: collection → graph layers → optimized graph
//! (`graph::{cull, fuse, order}`) → `scheduler` state machine → executor
//! (`local` threads) → result.

pub mod array;
pub mod bag;
pub mod client;
pub mod collections;
pub mod coordination;
pub mod diagnostics;
pub mod error;
pub mod exec;
pub mod frame;
#[cfg(test)]
mod fuzz;
pub mod gpu;
pub mod graph;
pub mod host;
pub mod io;
pub mod key;
pub mod local;
pub mod memory;
pub mod ml;
pub mod ops;
pub mod pieces;
pub mod runner;
pub mod scheduler;
pub mod staging;
pub mod value;

#[cfg(test)]
mod testing;

pub use client::{CancelToken, Client, Future};
pub use error::{EngineError, SourcePos, TaskError, TaskErrorKind};
pub use graph::{Graph, Task};
pub use key::Key;
pub use value::Value;
