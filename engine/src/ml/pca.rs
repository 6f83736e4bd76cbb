//! `PCA` as scikit-learn's: `covariance_eigh` (one pass for the centred
//! cross-products, then a p × p eigendecomposition; what `"auto"` picks
//! for tall data, as scikit-learn ≥ 1.5 does) or `tsqr` (the exact SVD of
//! the centred X by TSQR, two passes). Signs follow scikit-learn's
//! `svd_flip`: each component's largest entry is positive.

use faer::{Mat, Side};

use super::graph::{apply, constant, float_of};
use super::linear::co_moments;
use super::{MlError, Runner, check_finite, features_match, samples_features};
use crate::array::elementwise::BinOp;
use crate::collections::array::{Array, Ctx, matmul, svd};

#[derive(Clone, Debug, PartialEq)]
pub enum Solver {
    Auto,
    CovarianceEigh,
    Tsqr,
}

impl Solver {
    pub fn parse(s: &str) -> Result<Solver, MlError> {
        Ok(match s {
            "auto" => Solver::Auto,
            "covariance_eigh" => Solver::CovarianceEigh,
            "tsqr" | "full" => Solver::Tsqr,
            other => {
                return Err(MlError::Input(format!(
                    "PCA: svd_solver must be \"auto\", \"covariance_eigh\", \"tsqr\" or \"full\", got \"{other}\""
                )));
            }
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Pca {
    pub n_components: Option<usize>,
    pub whiten: bool,
    pub solver: Solver,
}

/// A fitted PCA (scikit-learn's attributes).
#[derive(Clone, Debug, PartialEq)]
pub struct PcaFit {
    /// k × p, row-major.
    pub components: Vec<f64>,
    pub explained_variance: Vec<f64>,
    pub explained_variance_ratio: Vec<f64>,
    pub singular_values: Vec<f64>,
    pub mean: Vec<f64>,
    pub noise_variance: f64,
    pub n_samples: usize,
    pub whiten: bool,
    pub n_passes: usize,
    /// The solver that ran.
    pub solver: &'static str,
}

impl Pca {
    pub fn fit(&self, ctx: &Ctx, x: &Array, runner: &dyn Runner) -> Result<PcaFit, MlError> {
        let (n, p) = samples_features(x)?;
        let most = n.min(p);
        let k = self.n_components.unwrap_or(most);
        if k == 0 || k > most {
            return Err(MlError::Input(format!(
                "PCA: n_components={k} must be between 1 and min(n_samples, n_features)={most}"
            )));
        }
        if n < 2 {
            return Err(MlError::Input("PCA: a fit needs at least 2 samples".into()));
        }
        let tall = p < 1000 && n >= 10 * p;
        let cm = co_moments(ctx, x, None, runner)?;
        check_finite("PCA", &cm.pack())?;
        let (values, vectors, passes, solver) = match (&self.solver, tall) {
            (Solver::CovarianceEigh, _) | (Solver::Auto, true) => {
                let (v, w) = covariance_eigh(&cm.c, p, n)?;
                (v, w, 1, "covariance_eigh")
            }
            _ => {
                let (v, w) = tsqr(ctx, x, &cm.mean, n, runner)?;
                (v, w, 2, "tsqr")
            }
        };
        // All p (or min(n, p)) variances, largest first; rows of `vectors`.
        let total: f64 = values.iter().sum();
        let explained_variance = values[..k].to_vec();
        let noise_variance =
            if k < most { values[k..most].iter().sum::<f64>() / (most - k) as f64 } else { 0.0 };
        let mut components = vectors[..k * p].to_vec();
        for row in components.chunks_mut(p) {
            let big = row.iter().copied().fold(0.0f64, |m, v| if v.abs() > m.abs() { v } else { m });
            if big < 0.0 {
                row.iter_mut().for_each(|v| *v = -*v);
            }
        }
        Ok(PcaFit {
            components,
            explained_variance_ratio: explained_variance
                .iter()
                .map(|v| if total > 0.0 { v / total } else { 0.0 })
                .collect(),
            singular_values: explained_variance.iter().map(|v| (v * (n - 1) as f64).sqrt()).collect(),
            explained_variance,
            mean: cm.mean,
            noise_variance,
            n_samples: n,
            whiten: self.whiten,
            n_passes: passes,
            solver,
        })
    }
}

/// Eigenvalues of the covariance (largest first, negatives from rounding
/// made 0) and its eigenvectors as rows.
fn covariance_eigh(c: &[f64], p: usize, n: usize) -> Result<(Vec<f64>, Vec<f64>), MlError> {
    let m = Mat::from_fn(p, p, |i, j| c[i * p + j] / (n - 1) as f64);
    let e = m
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| MlError::Compute(format!("PCA: the eigendecomposition did not converge ({e:?})")))?;
    let (u, s) = (e.U(), e.S());
    let order: Vec<usize> = (0..p).rev().collect();
    let values = order.iter().map(|&i| s[i].max(0.0)).collect();
    let vectors = order.iter().flat_map(|&i| (0..p).map(move |r| u[(r, i)])).collect();
    Ok((values, vectors))
}

/// The SVD of the centred X by TSQR: variances s²/(n − 1) and Vᵀ's rows.
fn tsqr(
    ctx: &Ctx,
    x: &Array,
    mean: &[f64],
    n: usize,
    runner: &dyn Runner,
) -> Result<(Vec<f64>, Vec<f64>), MlError> {
    let p = mean.len();
    let rows = super::graph::row_blocks(ctx, x)?;
    if let Some(&short) = rows.chunks[0].iter().find(|&&r| r < p) {
        return Err(MlError::Input(format!(
            "PCA: svd_solver \"tsqr\" needs row blocks at least as tall as X is wide ({p}), but one has {short} rows; use svd_solver \"covariance_eigh\" or fewer, taller blocks"
        )));
    }
    let centred =
        apply(ctx, BinOp::Sub, &rows, &constant(ctx, mean.to_vec(), &[p], crate::array::dtype::DType::F64)?)?;
    let (_, s, vt) = svd(ctx, &centred)?;
    let out = runner.compute(&[s, vt])?;
    let [s, vt] = &out[..] else { return Err(MlError::Compute("the SVD was not computed".into())) };
    let values = s.cast::<f64>().iter().map(|v| v * v / (n - 1) as f64).collect();
    Ok((values, vt.cast::<f64>().iter().copied().collect()))
}

impl PcaFit {
    /// `(x − mean) @ componentsᵀ`, divided by √explained_variance when whitening.
    pub fn transform(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        let p = features_match("PCA", x, self.mean.len())?;
        let k = self.explained_variance.len();
        let dt = float_of(x);
        let centred = apply(ctx, BinOp::Sub, x, &constant(ctx, self.mean.clone(), &[p], dt)?)?;
        let mut w: Vec<f64> = (0..p * k).map(|i| self.components[(i % k) * p + i / k]).collect();
        if self.whiten {
            for (i, v) in w.iter_mut().enumerate() {
                *v /= self.explained_variance[i % k].sqrt();
            }
        }
        Ok(matmul(ctx, &centred, &constant(ctx, w, &[p, k], dt)?)?)
    }

    /// Back to X's space: `z @ components + mean` (whitening undone).
    pub fn inverse_transform(&self, ctx: &Ctx, z: &Array) -> Result<Array, MlError> {
        let k = self.explained_variance.len();
        let p = self.mean.len();
        features_match("PCA.inverse_transform", z, k)?;
        let dt = float_of(z);
        let mut w = self.components.clone();
        if self.whiten {
            for (i, v) in w.iter_mut().enumerate() {
                *v *= self.explained_variance[i / p].sqrt();
            }
        }
        let back = matmul(ctx, z, &constant(ctx, w, &[k, p], dt)?)?;
        Ok(apply(ctx, BinOp::Add, &back, &constant(ctx, self.mean.clone(), &[p], dt)?)?)
    }
}
