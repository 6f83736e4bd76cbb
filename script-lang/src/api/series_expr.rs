//! A Series, lazy or computed, as the element-wise methods see it: a
//! column expression that can be extended. `dataframe.rs` implements it
//! for both kinds; `series_text.rs` registers its methods through it.

use brisk_engine::Value;
use brisk_engine::frame::expr::Expr;
use rhai::{Dynamic, EvalAltResult};

use crate::convert::to_value;
use crate::error::runtime;

/// A scalar argument of a Series method: a number, string, bool or `()`.
pub(super) fn scalar(d: &Dynamic, what: &str) -> Result<Value, Box<EvalAltResult>> {
    let v = to_value(d, what)?;
    match v {
        Value::Unit | Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::Str(_) => Ok(v),
        other => {
            Err(runtime(format!("{what} must be a number, string, bool or (), not {}", other.type_name())))
        }
    }
}

pub(super) trait ElementWise: Clone + Send + Sync + 'static {
    fn map_expr(&self, f: impl FnOnce(Box<Expr>) -> Expr) -> Result<Self, Box<EvalAltResult>>;

    /// An expression of this Series and `other` (of the same rows).
    fn map_expr2(
        &self,
        other: &Self,
        f: impl FnOnce(Box<Expr>, Box<Expr>) -> Expr,
    ) -> Result<Self, Box<EvalAltResult>>;

    /// Series of this one's rows side by side as a frame (lazy or computed
    /// as they are), named as given.
    fn side_by_side(&self, cols: Vec<(String, Self)>) -> Result<Dynamic, Box<EvalAltResult>>;

    /// `s.str.split(pat, n).explode()`: a row per part.
    fn explode(&self, pat: Option<String>, n: Option<usize>) -> Result<Self, Box<EvalAltResult>>;
}
