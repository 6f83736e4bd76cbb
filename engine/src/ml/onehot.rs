//! `OneHotEncoder` as scikit-learn's on numeric columns: one pass that
//! gathers each column's distinct values (per block, then unions merged in
//! a tree), then a lazy transform that writes one 0/1 column per category,
//! chunked like X's rows. The output is dense (brisk has no sparse
//! arrays; scikit-learn's default is sparse).

use std::sync::Arc;

use super::categories::{category, find, list, unpack_distinct, width};
use super::graph::{map_row_blocks, row_blocks, row_statistic};
use super::op::MlOp;
use super::stats::unpacked;
use super::{MlError, Runner, features_match, samples_features};
use crate::array::dtype::DType;
use crate::collections::array::{Array, Ctx};

/// Which category of a feature gets no column (scikit-learn's `drop`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drop {
    None,
    First,
    /// The first, only for features with two categories.
    IfBinary,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OneHotEncoder {
    /// Given categories per feature (sorted, distinct), or found by `fit`.
    pub categories: Option<Vec<Vec<f64>>>,
    /// `handle_unknown: "ignore"`: an unknown value gives a row of zeros
    /// for its feature, where "error" (the default) fails the transform.
    pub ignore_unknown: bool,
    pub drop: Drop,
}

/// A fitted `OneHotEncoder`.
#[derive(Clone, Debug, PartialEq)]
pub struct OneHotFit {
    /// Each feature's categories, sorted.
    pub categories: Vec<Vec<f64>>,
    /// The category of each feature that has no column.
    pub drop_idx: Vec<Option<usize>>,
    pub ignore_unknown: bool,
    /// X's type: categories come back in it (integers stay integers).
    pub dtype: DType,
}

impl OneHotEncoder {
    pub fn fit(&self, ctx: &Ctx, x: &Array, runner: &dyn Runner) -> Result<OneHotFit, MlError> {
        let (_, p) = samples_features(x)?;
        let rows = row_blocks(ctx, x)?;
        // The lengths of the merged values are known only once computed.
        let stat = row_statistic(ctx, &rows, None, MlOp::Distinct, MlOp::MergeDistinct, 0)?;
        let out = runner.compute(&[stat])?;
        let seen = unpack_distinct(&unpacked(
            out.first().ok_or_else(|| MlError::Compute("the categories were not computed".into()))?,
        ))?;
        if seen.len() != p {
            return Err(MlError::Compute(format!(
                "distinct values of {} columns for {p} features",
                seen.len()
            )));
        }
        let categories = match &self.categories {
            None => seen,
            Some(given) => {
                if given.len() != p {
                    return Err(MlError::Input(format!(
                        "OneHotEncoder: categories has {} lists, but X has {p} features",
                        given.len()
                    )));
                }
                for (j, (g, s)) in given.iter().zip(&seen).enumerate() {
                    if g.is_empty() {
                        return Err(MlError::Input(format!(
                            "OneHotEncoder: the categories of feature {j} are empty"
                        )));
                    }
                    let sorted = g.windows(2).all(|w| w[0].total_cmp(&w[1]).is_lt());
                    if !sorted || g.iter().any(|v| category(*v).total_cmp(v).is_ne()) {
                        return Err(MlError::Input(format!(
                            "OneHotEncoder: the categories of feature {j} must be sorted and distinct (numbers); got {g:?}"
                        )));
                    }
                    let unknown: Vec<f64> = s.iter().copied().filter(|v| find(g, *v).is_none()).collect();
                    if !self.ignore_unknown && !unknown.is_empty() {
                        return Err(MlError::Input(format!(
                            "OneHotEncoder: found unknown categories {} in column {j} during fit",
                            list(&unknown)
                        )));
                    }
                }
                given.clone()
            }
        };
        let drop_idx = categories
            .iter()
            .map(|c| match self.drop {
                Drop::None => None,
                Drop::First => Some(0),
                Drop::IfBinary => (c.len() == 2).then_some(0),
            })
            .collect();
        Ok(OneHotFit { categories, drop_idx, ignore_unknown: self.ignore_unknown, dtype: x.dtype })
    }
}

impl OneHotFit {
    /// The number of output columns.
    pub fn width(&self) -> usize {
        width(&self.categories, &self.drop_idx)
    }

    /// The 0/1 columns of X's rows, f64, lazy and chunked like X's rows.
    pub fn transform(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        features_match("OneHotEncoder", x, self.categories.len())?;
        let op = MlOp::OneHot {
            categories: Arc::new(self.categories.clone()),
            drop: Arc::new(self.drop_idx.clone()),
            ignore: self.ignore_unknown,
        };
        Ok(map_row_blocks(ctx, x, op, Some(self.width()), DType::F64)?)
    }
}
