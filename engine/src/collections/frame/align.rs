//! A Series from a frame with the same rows but other columns (a
//! `shift` or a `cumsum` has this frame's rows, row for row, yet none of
//! its columns) brought alongside this frame's
//! partitions, so `assign` and masks can use it, as Dask aligns such
//! Series on their index. Each pair of partitions must have as many rows;
//! a pair that does not (a repartition in between) is an error.

use super::dataframe::{DataFrame, Series, block};
use super::shuffle::{deps_args, task};
use crate::collections::array::Ctx;
use crate::frame::error::FrameError;
use crate::frame::expr::Expr;
use crate::frame::op::FrameOp;
use crate::graph::layer::Layer;
use crate::graph::token::Tokenizer;

/// The prefix of the columns a Series is brought in as, dropped after use.
pub const ALIGNED: &str = "__brisk_aligned_";

impl DataFrame {
    /// `s` as an expression over the returned frame: this frame when `s`
    /// is built from its columns, else this frame with `s`'s values as one
    /// more column (named `ALIGNED…`; the caller drops it).
    pub(crate) fn aligned(&self, s: &Series) -> Result<(DataFrame, Expr), FrameError> {
        let err = match s.resolve_in(self) {
            Ok(e) => return Ok((self.clone(), e)),
            Err(e) => e,
        };
        if s.frame.rows != self.rows || s.frame.npartitions() != self.npartitions() {
            return Err(err);
        }
        let col = s.to_frame();
        let tok = Tokenizer::new().str(&self.token).str("align").str(&col.token).finish();
        let to = format!("{ALIGNED}{}", &tok[..tok.len().min(12)]);
        let ctx = Ctx::default();
        let (left, lparts) = self.partitions(&ctx);
        let (right, rparts) = col.partitions(&ctx);
        let name: std::sync::Arc<str> = std::sync::Arc::from(format!("align-{tok}"));
        let mut tasks = Vec::with_capacity(lparts.len());
        let mut keys = Vec::with_capacity(lparts.len());
        for (i, (l, r)) in lparts.into_iter().zip(rparts).enumerate() {
            let key = block(&name, i);
            let op = FrameOp::Zip { from: s.name.clone(), to: to.clone() };
            tasks.push(task(&ctx, key.clone(), op, deps_args(2), vec![l, r]));
            keys.push(key);
        }
        let mut schema = self.schema.as_ref().clone();
        schema.cols.push((to.clone(), s.dtype));
        let mut f = DataFrame::of_keys(Layer::new(name, tasks, vec![left, right]), keys, schema, "assign");
        let mut toks = self.col_tokens.as_ref().clone();
        toks.push(tok);
        f.col_tokens = std::sync::Arc::new(toks);
        f.categories = self.categories.clone();
        f.rows = self.rows.clone();
        f.divisions = self.divisions.clone();
        Ok((f, Expr::col(&to)))
    }

    /// This frame without the columns `aligned` brought in.
    pub(crate) fn without_aligned(&self) -> DataFrame {
        let temps: Vec<String> =
            self.schema.names().filter(|n| n.starts_with(ALIGNED)).map(String::from).collect();
        if temps.is_empty() {
            return self.clone();
        }
        self.drop(&temps).unwrap_or_else(|_| self.clone())
    }
}
