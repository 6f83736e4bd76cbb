//! The crate's one error type: what cannot be built, what the API said.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cluster's description cannot be made into objects.
    #[error("{0}")]
    Spec(String),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Other(String),
}
