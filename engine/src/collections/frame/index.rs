//! What a frame's index gives a Dask user: `get_partition(i)`, `loc` by
//! index value on a frame `set_index` sorted, `iloc` on column positions,
//! and `reset_index`. brisk keeps the index as the frame's first column
//! (with the divisions `set_index` computed), so these are stages and
//! projections over that column.

use std::sync::Arc;

use super::dataframe::{DataFrame, Series};
use super::shuffle::invalid;
use crate::frame::error::FrameError;
use crate::frame::expr::{BinOp, Expr};
use crate::graph::token::Tokenizer;
use crate::value::Value;

impl DataFrame {
    /// `df.get_partition(i)`: partition `i` alone, as a frame (negative
    /// counts from the end).
    pub fn get_partition(&self, i: i64) -> Result<DataFrame, FrameError> {
        let n = self.npartitions() as i64;
        let at = if i < 0 { i + n } else { i };
        if !(0..n).contains(&at) {
            return Err(invalid(format!("get_partition: partition {i} of a frame of {n} partitions")));
        }
        let mut f = self.clone();
        f.parts = Arc::new(vec![self.parts[at as usize].clone()]);
        f.rows = Tokenizer::new().str(&self.rows).str("get_partition").u64(at as u64).finish();
        f.token = Tokenizer::new().str(&self.token).str("get_partition").u64(at as u64).finish();
        f.label = "get_partition";
        // One partition's bounds would need the divisions task; unknown.
        f.divisions = None;
        Ok(f)
    }

    /// The index column `set_index` made, while the frame still has it.
    fn index_column(&self, what: &str) -> Result<String, FrameError> {
        self.divisions.as_ref().map(|d| d.on.clone()).ok_or_else(|| {
            invalid(format!("{what} needs an index: set_index(column) first (divisions are unknown)"))
        })
    }

    /// `df.loc(value)` or `df.loc(lo, hi)` (both ends included, `()` for
    /// an open end), by the index `set_index` made, as pandas' `.loc`.
    pub fn loc(&self, lo: &Value, hi: Option<&Value>) -> Result<DataFrame, FrameError> {
        let on = self.index_column("loc")?;
        let col = self.column(&on)?;
        let cmp = |op: BinOp, v: &Value| Expr::bin(op, Expr::col(&on), Expr::Lit(v.clone()));
        let e = match hi {
            None => cmp(BinOp::Eq, lo),
            Some(hi) => match (lo, hi) {
                (Value::Unit, Value::Unit) => return Ok(self.clone()),
                (Value::Unit, hi) => cmp(BinOp::Le, hi),
                (lo, Value::Unit) => cmp(BinOp::Ge, lo),
                (lo, hi) => Expr::bin(BinOp::And, cmp(BinOp::Ge, lo), cmp(BinOp::Le, hi)),
            },
        };
        let dtype = e.dtype(&self.schema)?;
        if dtype != Some(crate::frame::dtype::DType::Bool) {
            return Err(invalid("loc: the index does not compare with the value given"));
        }
        let mask = Series { expr: e, name: on, dtype: crate::frame::dtype::DType::Bool, ..col };
        self.filter(&mask)
    }

    /// `df.iloc(cols)`: the columns at these positions (negative from the
    /// end), as Dask's `df.iloc[:, cols]` (rows by position are not
    /// supported by Dask either).
    pub fn iloc(&self, positions: &[i64]) -> Result<DataFrame, FrameError> {
        let names: Vec<String> = self.schema.names().map(String::from).collect();
        let n = names.len() as i64;
        let cols = positions
            .iter()
            .map(|&p| {
                let at = if p < 0 { p + n } else { p };
                usize::try_from(at)
                    .ok()
                    .and_then(|i| names.get(i).cloned())
                    .ok_or_else(|| invalid(format!("iloc: column position {p} of a frame of {n} columns")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.project(&cols)
    }

    /// `df.reset_index(#{drop})`: the frame without its index: the
    /// divisions forgotten and the column kept (or dropped with `drop`).
    /// A frame without an index is returned as it is: brisk has no
    /// separate row labels to turn into a column.
    pub fn reset_index(&self, drop: bool) -> Result<DataFrame, FrameError> {
        let Some(d) = &self.divisions else { return Ok(self.clone()) };
        let mut f = if drop {
            let keep: Vec<String> = self.schema.names().filter(|n| *n != d.on).map(String::from).collect();
            self.project(&keep)?
        } else {
            self.clone()
        };
        f.divisions = None;
        f.token = Tokenizer::new().str(&f.token).str("reset_index").finish();
        f.label = "reset_index";
        Ok(f)
    }
}
