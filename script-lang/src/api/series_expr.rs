//! A Series, lazy or computed, as the element-wise methods see it: a
//! column expression that can be extended. `dataframe.rs` implements it
//! for both kinds; `series_text.rs` registers its methods through it.

use brisk_engine::frame::expr::Expr;
use rhai::EvalAltResult;

pub(super) trait ElementWise: Clone + Send + Sync + 'static {
    fn map_expr(&self, f: impl FnOnce(Box<Expr>) -> Expr) -> Result<Self, Box<EvalAltResult>>;
}
