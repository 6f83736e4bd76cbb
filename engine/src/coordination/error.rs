//! What the coordination state refuses, apart from the state itself so
//! the engine's error type can hold it without reaching for values.

use serde::{Deserialize, Serialize};

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
