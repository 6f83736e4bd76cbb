//! `PoissonRegression` (scikit-learn's `PoissonRegressor`): a log-link
//! linear model of counts, fitted by L-BFGS on the mean half Poisson
//! deviance plus ½·alpha·‖w‖² (the intercept not penalised), as
//! scikit-learn's `lbfgs` solver does, starting from the intercept
//! log(mean y). Each evaluation of the loss and its gradient is one pass
//! over X (`kernels::poisson_loss` per block, summed in a tree).

use std::sync::Arc;

use super::graph::{map_row_blocks, row_blocks, row_statistic, rows_like};
use super::logistic::lbfgs;
use super::op::MlOp;
use super::stats::{Moments, unpacked};
use super::{MlError, Runner, features_match, samples_features};
use crate::array::dtype::DType;
use crate::collections::array::{Array, Ctx};

#[derive(Clone, Debug, PartialEq)]
pub struct Poisson {
    /// The L2 penalty's strength (scikit-learn's `alpha`).
    pub alpha: f64,
    pub fit_intercept: bool,
    pub max_iter: usize,
    pub tol: f64,
}

/// A fitted Poisson regression.
#[derive(Clone, Debug, PartialEq)]
pub struct PoissonFit {
    /// The weights then the intercept (p + 1).
    pub coef: Vec<f64>,
    pub p: usize,
    pub n_iter: usize,
    pub n_passes: usize,
}

impl Poisson {
    pub fn fit(&self, ctx: &Ctx, x: &Array, y: &Array, runner: &dyn Runner) -> Result<PoissonFit, MlError> {
        let (n, p) = samples_features(x)?;
        if !(self.alpha >= 0.0 && self.alpha.is_finite()) {
            return Err(MlError::Input(format!(
                "PoissonRegression: alpha must be a number ≥ 0, got {}",
                self.alpha
            )));
        }
        if !(self.tol > 0.0 && self.tol.is_finite()) {
            return Err(MlError::Input(format!("PoissonRegression: tol must be positive, got {}", self.tol)));
        }
        let rows = row_blocks(ctx, x)?;
        let y = rows_like(ctx, y, &rows)?;
        // y's mean (the starting intercept) and its smallest value, in one pass.
        let (count, mean, low) = y_moments(ctx, &y, runner)?;
        if count < n as f64 || !mean.is_finite() || !low.is_finite() {
            return Err(MlError::Input("PoissonRegression: y contains NaN or infinity".into()));
        }
        if low < 0.0 {
            return Err(MlError::Input(
                "PoissonRegression: some values of y are negative, which Poisson regression does not allow"
                    .into(),
            ));
        }
        if mean <= 0.0 {
            return Err(MlError::Input(
                "PoissonRegression: y is all zeros; the sum of y must be positive".into(),
            ));
        }
        let mut passes = 1;
        let alpha = self.alpha;
        let fit_intercept = self.fit_intercept;
        let mut objective = |w: &[f64]| -> Result<(f64, Vec<f64>), MlError> {
            let op = MlOp::Poisson { coef: Arc::new(w.to_vec()) };
            let stat = row_statistic(ctx, &rows, Some(&y), op, MlOp::MergeSum, p + 2)?;
            let v = unpacked(&runner.compute(&[stat])?[0]);
            if v.len() != p + 2 {
                return Err(MlError::Compute(format!(
                    "a loss and gradient of {} values, not {}",
                    v.len(),
                    p + 2
                )));
            }
            passes += 1;
            let mut f = v[0] / n as f64;
            let mut g: Vec<f64> = v[1..].iter().map(|x| x / n as f64).collect();
            for j in 0..p {
                f += 0.5 * alpha * w[j] * w[j];
                g[j] += alpha * w[j];
            }
            if !fit_intercept {
                g[p] = 0.0;
            }
            if !f.is_finite() || g.iter().any(|x| !x.is_finite()) {
                return Err(MlError::Input(
                    "PoissonRegression: X contains NaN or infinity, or the model overflowed".into(),
                ));
            }
            Ok((f, g))
        };
        let mut start = vec![0.0; p + 1];
        if fit_intercept {
            start[p] = mean.ln();
        }
        let (coef, n_iter, _) = lbfgs(&mut objective, start, self.max_iter, self.tol)?;
        Ok(PoissonFit { coef, p, n_iter, n_passes: passes })
    }
}

impl PoissonFit {
    pub fn weights(&self) -> Vec<f64> {
        self.coef[..self.p].to_vec()
    }

    pub fn intercept(&self) -> f64 {
        self.coef[self.p]
    }

    /// The expected counts exp(X·w + b), lazily.
    pub fn predict(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        features_match("PoissonRegression", x, self.p)?;
        let op = MlOp::PoissonPredict { coef: Arc::new(self.coef.clone()) };
        Ok(map_row_blocks(ctx, x, op, None, DType::F64)?)
    }

    /// D², the share of the Poisson deviance explained (scikit-learn's
    /// `score`): 1 − D(y, μ)/D(y, ȳ).
    pub fn score(&self, ctx: &Ctx, x: &Array, y: &Array, runner: &dyn Runner) -> Result<f64, MlError> {
        let mu = self.predict(ctx, x)?;
        let rows = row_blocks(ctx, &mu)?;
        let y = rows_like(ctx, y, &rows)?;
        let (_, mean, _) = y_moments(ctx, &y, runner)?;
        let op = MlOp::PoissonDeviance { mean };
        let stat = row_statistic(ctx, &y, Some(&rows), op, MlOp::MergeSum, 2)?;
        let v = unpacked(&runner.compute(&[stat])?[0]);
        let [dev, null] = v[..] else {
            return Err(MlError::Compute(format!("two deviances expected, got {} values", v.len())));
        };
        Ok(if null > 0.0 { 1.0 - dev / null } else { f64::NAN })
    }
}

/// y's count, mean and smallest value, in one pass (a statistic that comes
/// back without its column is an error, not an index out of bounds).
fn y_moments(ctx: &Ctx, y: &Array, runner: &dyn Runner) -> Result<(f64, f64, f64), MlError> {
    let stat = row_statistic(ctx, y, None, MlOp::Moments, MlOp::MergeMoments, 5)?;
    let m = Moments::unpack(&unpacked(&runner.compute(&[stat])?[0]))
        .map_err(|e| MlError::Compute(e.to_string()))?;
    match (m.n.first(), m.mean.first(), m.min.first()) {
        (Some(&n), Some(&mean), Some(&low)) => Ok((n, mean, low)),
        _ => Err(MlError::Compute("y's moments came back without its column".into())),
    }
}
