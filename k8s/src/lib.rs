//! brisk on Kubernetes, shaped like the dask-kubernetes operator:
//!
//! - `crd`: the `BriskCluster` resource; `brisk k8s crd` prints its definition.
//! - `manifests`: the objects of a cluster, built with no I/O; `brisk k8s
//!   manifests` prints them for `kubectl apply`.
//! - `reconcile`: the operator's decisions, pure; `operator`: `brisk
//!   operator`, which sees, decides with `reconcile` and acts.
//! - `session`: `kube_cluster(#{...})`, which writes the resource from a session.
//! - `print`: what `brisk k8s` prints; `names`, `quantity`, `error`: leaves.
//!
//! None of this has run against a real API server: the machines it is
//! built on have none. It is tested against the API's schemas and an
//! in-memory emulator (`tests/kube.rs`).

pub mod crd;
pub mod error;
mod http;
pub mod manifests;
pub mod names;
pub mod operator;
pub mod print;
pub mod quantity;
pub mod reconcile;
pub mod session;
