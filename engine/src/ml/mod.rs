//! Machine learning on brisk arrays, as dask-ml (scikit-learn's names,
//! defaults and answers): each fit reads X in as few passes as its
//! algorithm allows, every pass one graph of per-block statistics merged
//! in a tree, so only p or p² numbers reach the driver; `predict` and
//! `transform` are lazy arrays chunked like X's rows.
//!
//! `stats` holds the per-block statistics, `op` the tasks that compute and
//! merge them, `graph` the graphs; each estimator has its own module.

pub mod categories;
pub mod gpu;
pub mod graph;
pub mod kernels;
pub mod kmeans;
pub mod linear;
pub mod logistic;
pub mod metrics;
pub mod onehot;
pub mod op;
pub mod pca;
pub mod poisson;
pub mod scaler;
pub mod split;
pub mod stats;

use crate::array::chunk::Chunk;
use crate::array::error::ArrayError;
use crate::collections::array::Array;

#[derive(Debug, thiserror::Error)]
pub enum MlError {
    /// Bad input, found before any work ran.
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Array(#[from] ArrayError),
    /// Running a fit's graph failed (a task's error, a lost cluster).
    #[error("{0}")]
    Compute(String),
}

/// How a fit runs its graphs: the session computes them, on its local
/// runtime or its cluster.
pub trait Runner {
    /// Each array of `compute` whole, computed in one graph with the
    /// arrays of `persist`, which come back persisted (their blocks held
    /// by the session, for the next pass to read).
    fn run(&self, persist: &[Array], compute: &[Array]) -> Result<(Vec<Array>, Vec<Chunk>), MlError>;

    /// Each array whole, computed together in one graph.
    fn compute(&self, arrays: &[Array]) -> Result<Vec<Chunk>, MlError> {
        Ok(self.run(&[], arrays)?.1)
    }
}

/// scikit-learn's `_handle_zeros_in_scale`: a range of (nearly) zero, a
/// constant feature, becomes 1 so it is left as it is.
pub fn handle_zeros(scale: f64) -> f64 {
    if scale < 10.0 * f64::EPSILON { 1.0 } else { scale }
}

/// X's feature count, which must be the one the model was fitted on.
pub fn features_match(estimator: &str, x: &Array, fitted: usize) -> Result<usize, MlError> {
    let s = x.shape();
    match s[..] {
        [_, p] if p == fitted => Ok(p),
        [_, p] => Err(MlError::Input(format!(
            "{estimator}: X has {p} features, but the model was fitted on {fitted}"
        ))),
        _ => Err(MlError::Input(format!("{estimator}: X must be a 2-d array, got {} dimensions", s.len()))),
    }
}

/// The number of rows and features of X, refusing what is not a fit's input.
pub fn samples_features(x: &Array) -> Result<(usize, usize), MlError> {
    let s = x.shape();
    match s[..] {
        [n, p] => {
            if n == 0 || p == 0 {
                return Err(MlError::Input(format!(
                    "X has shape ({n}, {p}): a fit needs at least one sample and one feature"
                )));
            }
            Ok((n, p))
        }
        _ => Err(MlError::Input(format!(
            "X must be a 2-d array (samples × features), got {} dimensions; for one feature use x.reshape([-1, 1])",
            s.len()
        ))),
    }
}

/// A fit's statistic must be finite: NaN or infinity in X or y spreads
/// into it, and is refused with the estimator's name.
pub fn check_finite(estimator: &str, values: &[f64]) -> Result<(), MlError> {
    if values.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(MlError::Input(format!("{estimator}: X or y contains NaN or infinity")))
    }
}
