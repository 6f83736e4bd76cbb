//! Metrics as scikit-learn's: `r2_score` and `mean_squared_error` from one
//! pass of co-moments of `[y_pred | y_true]` (no cancellation, one read of
//! each), `accuracy_score` from one mean of the matches.

use super::linear::co_moments;
use super::{MlError, Runner, check_finite};
use crate::array::elementwise::BinOp;
use crate::array::reduce::Reduction;
use crate::collections::array::{Array, Ctx, Operand, binary, reduction};

/// The two 1-d arrays a metric compares, refused unless they match.
fn pair(metric: &str, y_true: &Array, y_pred: &Array) -> Result<usize, MlError> {
    let (a, b) = (y_true.shape(), y_pred.shape());
    if a.len() != 1 || b.len() != 1 {
        return Err(MlError::Input(format!(
            "{metric}: y_true and y_pred must be 1-d arrays, got shapes {a:?} and {b:?}"
        )));
    }
    if a[0] != b[0] {
        return Err(MlError::Input(format!(
            "{metric}: y_true has {} values but y_pred has {}: they must have as many",
            a[0], b[0]
        )));
    }
    if a[0] == 0 {
        return Err(MlError::Input(format!("{metric}: no values to score")));
    }
    Ok(a[0])
}

/// (Σ (y − ŷ)², Σ (y − ȳ)², n).
fn residuals(
    metric: &str,
    ctx: &Ctx,
    y_true: &Array,
    y_pred: &Array,
    runner: &dyn Runner,
) -> Result<(f64, f64, f64), MlError> {
    pair(metric, y_true, y_pred)?;
    let cm = co_moments(ctx, y_pred, Some(y_true), runner)?;
    check_finite(metric, &cm.pack())?;
    // z = [ŷ, y]: c = [[Cŷŷ, Cŷy], [Cyŷ, Cyy]].
    let d = cm.mean[0] - cm.mean[1];
    let ss_res = (cm.c[0] + cm.c[3] - 2.0 * cm.c[1] + cm.n * d * d).max(0.0);
    Ok((ss_res, cm.c[3], cm.n))
}

/// `r2_score(y_true, y_pred)`: 1 − SS_res / SS_tot; for a constant y_true,
/// 1 when predicted exactly and 0 otherwise (scikit-learn's `force_finite`).
pub fn r2_score(ctx: &Ctx, y_true: &Array, y_pred: &Array, runner: &dyn Runner) -> Result<f64, MlError> {
    let (res, tot, _) = residuals("r2_score", ctx, y_true, y_pred, runner)?;
    Ok(if tot == 0.0 { if res == 0.0 { 1.0 } else { 0.0 } } else { 1.0 - res / tot })
}

pub fn mean_squared_error(
    ctx: &Ctx,
    y_true: &Array,
    y_pred: &Array,
    runner: &dyn Runner,
) -> Result<f64, MlError> {
    let (res, _, n) = residuals("mean_squared_error", ctx, y_true, y_pred, runner)?;
    Ok(res / n)
}

/// The fraction of labels predicted exactly.
pub fn accuracy_score(
    ctx: &Ctx,
    y_true: &Array,
    y_pred: &Array,
    runner: &dyn Runner,
) -> Result<f64, MlError> {
    pair("accuracy_score", y_true, y_pred)?;
    let hits = binary(ctx, BinOp::Eq, &Operand::Array(y_true.clone()), &Operand::Array(y_pred.clone()))?;
    let mean = reduction(ctx, &hits, Reduction::Mean, None, false, None)?;
    let out = runner.compute(&[mean])?;
    let c = out.first().ok_or_else(|| MlError::Compute("the accuracy was not computed".into()))?;
    c.cast::<f64>().iter().next().copied().ok_or_else(|| MlError::Compute("an empty accuracy".into()))
}
