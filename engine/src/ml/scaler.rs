//! `StandardScaler` and `MinMaxScaler`: one pass of column moments (NaN
//! skipped, as scikit-learn's scalers skip it), then a lazy elementwise
//! transform that fuses with what follows it.

use super::graph::{apply, constant, float_of, row_blocks, row_statistic};
use super::op::MlOp;
use super::stats::{Moments, unpacked};
use super::{MlError, Runner, features_match, handle_zeros, samples_features};
use crate::array::elementwise::BinOp;
use crate::collections::array::{Array, Ctx};

/// The column moments of X, in one pass.
pub fn moments(ctx: &Ctx, x: &Array, runner: &dyn Runner) -> Result<Moments, MlError> {
    let (_, p) = samples_features(x)?;
    let x = row_blocks(ctx, x)?;
    let stat = row_statistic(ctx, &x, None, MlOp::Moments, MlOp::MergeMoments, 5 * p)?;
    let out = runner.compute(&[stat])?;
    let chunk = out.first().ok_or_else(|| MlError::Compute("the moments were not computed".into()))?;
    Ok(Moments::unpack(&unpacked(chunk))?)
}

#[derive(Clone, Debug, PartialEq)]
pub struct StandardScaler {
    pub with_mean: bool,
    pub with_std: bool,
}

impl Default for StandardScaler {
    fn default() -> Self {
        StandardScaler { with_mean: true, with_std: true }
    }
}

/// A fitted `StandardScaler` (scikit-learn's attributes).
#[derive(Clone, Debug, PartialEq)]
pub struct StandardFit {
    pub mean: Vec<f64>,
    /// Population variance (ddof 0).
    pub var: Vec<f64>,
    /// √var, with constant features' 0 made 1.
    pub scale: Vec<f64>,
    /// Values seen per feature (NaN not counted).
    pub n_samples_seen: Vec<f64>,
    pub with_mean: bool,
    pub with_std: bool,
}

impl StandardScaler {
    pub fn fit(&self, ctx: &Ctx, x: &Array, runner: &dyn Runner) -> Result<StandardFit, MlError> {
        let m = moments(ctx, x, runner)?;
        if m.n.contains(&0.0) {
            return Err(MlError::Input("StandardScaler: a feature of X has no values but NaN".into()));
        }
        let var: Vec<f64> = m.m2.iter().zip(&m.n).map(|(m2, n)| m2 / n).collect();
        // scikit-learn's `_is_constant_feature`: a variance within rounding
        // of zero, given the mean and count, is a constant feature's.
        let eps = f64::EPSILON;
        let scale = (0..var.len())
            .map(|j| {
                let (v, mu, n) = (var[j], m.mean[j], m.n[j]);
                if v <= n * eps * v + (n * mu * eps).powi(2) { 1.0 } else { v.sqrt() }
            })
            .collect();
        Ok(StandardFit {
            mean: m.mean,
            var,
            scale,
            n_samples_seen: m.n,
            with_mean: self.with_mean,
            with_std: self.with_std,
        })
    }
}

impl StandardFit {
    /// `(x − mean) / scale`, each step as the options ask.
    pub fn transform(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        let p = self.features(x)?;
        let dt = float_of(x);
        let mut out = x.clone();
        if self.with_mean {
            out = apply(ctx, BinOp::Sub, &out, &constant(ctx, self.mean.clone(), &[p], dt)?)?;
        }
        if self.with_std {
            out = apply(ctx, BinOp::Div, &out, &constant(ctx, self.scale.clone(), &[p], dt)?)?;
        }
        if !self.with_mean && !self.with_std {
            out = crate::collections::array::astype(ctx, &out, dt)?;
        }
        Ok(out)
    }

    pub fn inverse_transform(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        let p = self.features(x)?;
        let dt = float_of(x);
        let mut out = crate::collections::array::astype(ctx, x, dt)?;
        if self.with_std {
            out = apply(ctx, BinOp::Mul, &out, &constant(ctx, self.scale.clone(), &[p], dt)?)?;
        }
        if self.with_mean {
            out = apply(ctx, BinOp::Add, &out, &constant(ctx, self.mean.clone(), &[p], dt)?)?;
        }
        Ok(out)
    }

    fn features(&self, x: &Array) -> Result<usize, MlError> {
        features_match("StandardScaler", x, self.mean.len())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct MinMaxScaler {
    pub feature_range: (f64, f64),
}

impl Default for MinMaxScaler {
    fn default() -> Self {
        MinMaxScaler { feature_range: (0.0, 1.0) }
    }
}

/// A fitted `MinMaxScaler` (scikit-learn's attributes).
#[derive(Clone, Debug, PartialEq)]
pub struct MinMaxFit {
    pub data_min: Vec<f64>,
    pub data_max: Vec<f64>,
    pub data_range: Vec<f64>,
    pub scale: Vec<f64>,
    pub min: Vec<f64>,
}

impl MinMaxScaler {
    pub fn fit(&self, ctx: &Ctx, x: &Array, runner: &dyn Runner) -> Result<MinMaxFit, MlError> {
        let (lo, hi) = self.feature_range;
        if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
            return Err(MlError::Input(format!(
                "MinMaxScaler: feature_range must be [min, max] with min < max, got [{lo}, {hi}]"
            )));
        }
        let m = moments(ctx, x, runner)?;
        if m.n.contains(&0.0) {
            return Err(MlError::Input("MinMaxScaler: a feature of X has no values but NaN".into()));
        }
        let data_range: Vec<f64> = m.max.iter().zip(&m.min).map(|(a, b)| a - b).collect();
        let scale: Vec<f64> = data_range.iter().map(|&r| (hi - lo) / handle_zeros(r)).collect();
        let min = m.min.iter().zip(&scale).map(|(d, s)| lo - d * s).collect();
        Ok(MinMaxFit { data_min: m.min, data_max: m.max, data_range, scale, min })
    }
}

impl MinMaxFit {
    /// `x * scale + min`, as scikit-learn computes it.
    pub fn transform(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        let p = features_match("MinMaxScaler", x, self.scale.len())?;
        let dt = float_of(x);
        let out = apply(ctx, BinOp::Mul, x, &constant(ctx, self.scale.clone(), &[p], dt)?)?;
        Ok(apply(ctx, BinOp::Add, &out, &constant(ctx, self.min.clone(), &[p], dt)?)?)
    }

    pub fn inverse_transform(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        let p = features_match("MinMaxScaler", x, self.scale.len())?;
        let dt = float_of(x);
        let out = apply(ctx, BinOp::Sub, x, &constant(ctx, self.min.clone(), &[p], dt)?)?;
        Ok(apply(ctx, BinOp::Div, &out, &constant(ctx, self.scale.clone(), &[p], dt)?)?)
    }
}
