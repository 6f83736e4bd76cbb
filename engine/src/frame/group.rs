//! What a groupby computes: key columns and, per output, a column and a
//! reduction; and the names of the partial columns that carry it between
//! tasks.

use serde::{Deserialize, Serialize};

use super::dtype::DType;
use super::red::Red;

/// Separates a partial column's kind from the column it is of.
pub(crate) const SEP: char = '\u{1}';

/// A groupby aggregation: key columns and, per output column, its source
/// column and reduction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupSpec {
    pub by: Vec<String>,
    /// (output name, source column, reduction, source type)
    pub aggs: Vec<(String, String, Red, DType)>,
}

pub(crate) fn partial_name(kind: &str, col: &str) -> String {
    format!("{kind}{SEP}{col}")
}

/// The partial columns of `g` as (kind, source column) pairs, in order.
pub(crate) fn partial_names(g: &GroupSpec) -> Vec<(String, String)> {
    g.partials()
        .into_iter()
        .map(|(n, _)| match n.split_once(SEP) {
            Some((k, c)) => (k.to_string(), c.to_string()),
            None => (n, String::new()),
        })
        .collect()
}
