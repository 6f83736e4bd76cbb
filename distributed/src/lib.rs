//! brisk-distributed: the cluster. A scheduler process (`server`) drives
//! the engine's scheduling state machine over TCP; worker processes
//! (`worker`) run tasks, hold results and fetch inputs from each other;
//! `client::RemoteClient` is the engine's `Client` seam for a session
//! connected to a scheduler; `cluster::LocalCluster` starts a scheduler and
//! workers as child processes. Everything on the wire is `protocol`'s typed
//! messages in length-delimited frames, after a versioned handshake with
//! the cluster's token (`security`).
//!
//! The engine stays free of sockets and async code: this crate is the only
//! one that brings tokio's network stack in.

pub mod client;
pub mod cluster;
pub mod comm;
pub mod cuda;
pub mod deploy;
mod http;
pub mod journal;
pub mod log;
pub mod protocol;
pub mod security;
pub mod server;
mod spill;
mod task_client;
pub mod worker;

pub use client::RemoteClient;
pub use cluster::{LocalCluster, LocalClusterOptions};
pub use security::{Security, TlsFiles};
pub use server::{SchedulerHandle, SchedulerOptions};
pub use worker::WorkerOptions;
