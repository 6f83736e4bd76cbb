//! `LinearRegression` and `Ridge`: one pass over `[X | y]` for its
//! co-moments, then the normal equations on the centred cross-products
//! (scikit-learn centres too, so the intercept is not penalised), solved
//! by Cholesky, or for a singular system by the minimum-norm solution
//! (as `lstsq`) from its eigendecomposition.

use faer::linalg::solvers::Solve;
use faer::{Mat, Side};

use super::graph::{constant, float_of, product, row_blocks, row_statistic, rows_like};
use super::op::MlOp;
use super::stats::{CoMoments, unpacked};
use super::{MlError, Runner, check_finite, features_match, samples_features};
use crate::array::elementwise::BinOp;
use crate::collections::array::{Array, Ctx, Operand, binary};

#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    /// `LinearRegression` or `Ridge`, for messages.
    pub name: &'static str,
    /// The L2 penalty (0 for `LinearRegression`).
    pub alpha: f64,
    pub fit_intercept: bool,
}

/// A fitted linear model.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearFit {
    pub coef: Vec<f64>,
    pub intercept: f64,
    /// Passes over X the fit made.
    pub n_passes: usize,
}

/// The co-moments of `[X | y]` (or of X alone), in one pass.
pub fn co_moments(
    ctx: &Ctx,
    x: &Array,
    y: Option<&Array>,
    runner: &dyn Runner,
) -> Result<CoMoments, MlError> {
    let x = row_blocks(ctx, x)?;
    let y = y.map(|y| rows_like(ctx, y, &x)).transpose()?;
    let p = if x.ndim() == 1 { 1 } else { x.shape()[1] };
    let q = p + usize::from(y.is_some());
    let partial = MlOp::CoMoments { with_y: y.is_some() };
    let stat = row_statistic(ctx, &x, y.as_ref(), partial, MlOp::MergeCoMoments, 1 + q + q * q)?;
    let out = runner.compute(&[stat])?;
    let chunk = out.first().ok_or_else(|| MlError::Compute("the co-moments were not computed".into()))?;
    Ok(CoMoments::unpack(&unpacked(chunk))?)
}

impl Linear {
    pub fn fit(&self, ctx: &Ctx, x: &Array, y: &Array, runner: &dyn Runner) -> Result<LinearFit, MlError> {
        let (_, p) = samples_features(x)?;
        if !(self.alpha >= 0.0 && self.alpha.is_finite()) {
            return Err(MlError::Input(format!(
                "{}: alpha must be a non-negative number, got {}",
                self.name, self.alpha
            )));
        }
        let cm = co_moments(ctx, x, Some(y), runner)?;
        check_finite(self.name, &cm.pack())?;
        let q = p + 1;
        let (n, mu) = (cm.n, &cm.mean);
        // Centred unless there is no intercept: then the raw products.
        let raw = if self.fit_intercept { 0.0 } else { n };
        let a: Vec<f64> = (0..p * p)
            .map(|k| {
                let (i, j) = (k / p, k % p);
                cm.c[i * q + j] + raw * mu[i] * mu[j] + if i == j { self.alpha } else { 0.0 }
            })
            .collect();
        let b: Vec<f64> = (0..p).map(|i| cm.c[i * q + p] + raw * mu[i] * mu[p]).collect();
        let coef = solve_symmetric(&a, &b, p)?;
        let intercept =
            if self.fit_intercept { mu[p] - (0..p).map(|i| mu[i] * coef[i]).sum::<f64>() } else { 0.0 };
        Ok(LinearFit { coef, intercept, n_passes: 1 })
    }
}

impl LinearFit {
    /// `x @ coef + intercept`, chunked like X's rows.
    pub fn predict(&self, ctx: &Ctx, x: &Array, name: &str) -> Result<Array, MlError> {
        let p = features_match(name, x, self.coef.len())?;
        let dt = float_of(x);
        let xw = product(ctx, x, &constant(ctx, self.coef.clone(), &[p], dt)?)?;
        Ok(binary(
            ctx,
            BinOp::Add,
            &Operand::Array(xw),
            &Operand::Scalar(crate::array::dtype::Scalar::Float(self.intercept)),
        )?)
    }
}

/// `A x = b` for a symmetric positive semi-definite `A` (p × p, row-major):
/// Cholesky, or where `A` is singular the minimum-norm solution from its
/// eigendecomposition. `A` is first scaled to a unit diagonal, so features
/// of very different scales are judged dependent only when they are (the
/// Gram matrix squares their ratio); for dependent columns of equal scale,
/// as duplicated ones, this is `lstsq`'s minimum-norm answer.
pub fn solve_symmetric(a: &[f64], b: &[f64], p: usize) -> Result<Vec<f64>, MlError> {
    let d: Vec<f64> =
        (0..p).map(|i| a[i * p + i].sqrt()).map(|v| if v > 0.0 && v.is_finite() { v } else { 1.0 }).collect();
    let m = Mat::from_fn(p, p, |i, j| a[i * p + j] / (d[i] * d[j]));
    let b: Vec<f64> = (0..p).map(|i| b[i] / d[i]).collect();
    let rhs = Mat::from_fn(p, 1, |i, _| b[i]);
    let unscale = |x: Vec<f64>| x.iter().zip(&d).map(|(v, s)| v / s).collect::<Vec<f64>>();
    // A pivot that small on a unit diagonal means dependent columns:
    // Cholesky would give one of many solutions, not the minimum-norm one.
    if let Ok(l) = m.llt(Side::Lower)
        && (0..p).all(|i| l.L()[(i, i)].powi(2) > 1e-10)
    {
        let x = l.solve(rhs.as_ref());
        let v: Vec<f64> = (0..p).map(|i| x[(i, 0)]).collect();
        if v.iter().all(|x| x.is_finite()) {
            return Ok(unscale(v));
        }
    }
    let e = m
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| MlError::Compute(format!("the eigendecomposition did not converge ({e:?})")))?;
    let (u, s) = (e.U(), e.S());
    let s: Vec<f64> = (0..p).map(|i| s[i]).collect();
    let top = s.iter().fold(0.0f64, |a, &v| a.max(v.abs()));
    let cut = top * 10.0 * p as f64 * f64::EPSILON;
    let mut x = vec![0.0; p];
    for k in 0..p {
        if s[k] <= cut {
            continue;
        }
        let proj: f64 = (0..p).map(|i| u[(i, k)] * b[i]).sum::<f64>() / s[k];
        for (i, xi) in x.iter_mut().enumerate() {
            *xi += u[(i, k)] * proj;
        }
    }
    Ok(unscale(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_singular_system_gets_the_minimum_norm_solution() {
        // Two equal columns: the weight is shared equally between them.
        let a = [2.0, 2.0, 2.0, 2.0];
        let x = solve_symmetric(&a, &[4.0, 4.0], 2).expect("solve");
        assert!((x[0] - 1.0).abs() < 1e-12 && (x[1] - 1.0).abs() < 1e-12, "{x:?}");
        let x = solve_symmetric(&[4.0, 1.0, 1.0, 3.0], &[1.0, 2.0], 2).expect("solve");
        assert!((4.0 * x[0] + x[1] - 1.0).abs() < 1e-12 && (x[0] + 3.0 * x[1] - 2.0).abs() < 1e-12);
        // Scales 1e8 apart are not taken for dependence.
        let x = solve_symmetric(&[1e16, 0.0, 0.0, 1.0], &[1e16, 3.0], 2).expect("solve");
        assert!((x[0] - 1.0).abs() < 1e-12 && (x[1] - 3.0).abs() < 1e-12, "{x:?}");
    }
}
