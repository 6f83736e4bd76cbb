//! Series operations: typing an expression over a frame's columns, using a
//! Series with another frame of the same rows, reductions and distinct
//! values.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::dataframe::{DataFrame, Series, invalid};
use crate::collections::array::Ctx;
use crate::frame::call::Call;
use crate::frame::dtype::{DType, Schema};
use crate::frame::error::FrameError;
use crate::frame::expr::{BinOp, Expr};
use crate::frame::group::GroupSpec;
use crate::frame::op::{Finish, Sink};
use crate::frame::red::Red;
use crate::frame::stage::Stage;
use crate::graph::layer::LayerRef;
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::runner::Udf;
use crate::value::Value;

impl DataFrame {
    /// `df.apply(f, #{axis: 1})`: the closure on each row (a map of every
    /// column), as a Series `name` of type `dtype`; `what` names the
    /// method in messages.
    pub fn apply_rows(
        &self,
        udf: Arc<Udf>,
        dtype: DType,
        name: &str,
        what: &str,
    ) -> Result<Series, FrameError> {
        let names: Vec<String> = self.schema.names().map(String::from).collect();
        let args = names.iter().map(|n| Expr::col(n)).collect();
        let call = Call { udf, fields: Some(names), dtype, skip_missing: false, what: what.into() };
        let e = Expr::Call(Box::new(call), args);
        Series::typed(self.clone(), e, name.to_string())
    }

    /// `df.query("x > 1 and k == 'a'")`, `@name` standing for `vars[name]`.
    pub fn query(&self, src: &str, vars: &BTreeMap<String, Value>) -> Result<DataFrame, FrameError> {
        let e = crate::frame::query::parse(src, &self.schema, vars)?;
        self.filter(&Series::typed(self.clone(), e, "query".into())?)
    }
}

impl Series {
    /// This Series' expression in terms of `f`'s columns.
    pub fn resolve_in(&self, f: &DataFrame) -> Result<Expr, FrameError> {
        if self.frame.token == f.token {
            return Ok(self.expr.clone());
        }
        if self.frame.rows != f.rows {
            return Err(invalid(format!(
                "the Series \"{}\" does not have this frame's rows (one of them was filtered or repartitioned since); build it from this frame",
                self.name
            )));
        }
        let mut cols = BTreeSet::new();
        self.expr.columns(&mut cols);
        let mut map = Vec::new();
        for c in cols {
            let tok = self.frame.col_token(&c);
            let found = f
                .schema
                .cols
                .iter()
                .zip(f.col_tokens.iter())
                .find(|(_, t)| Some(*t) == tok)
                .map(|((n, _), _)| n.clone());
            match found {
                Some(n) => map.push((c, n)),
                None => {
                    return Err(invalid(format!(
                        "the Series \"{}\" reads column \"{c}\", which this frame does not have unchanged; build it from this frame",
                        self.name
                    )));
                }
            }
        }
        Ok(self
            .expr
            .map_columns(&|c| map.iter().find(|(a, _)| a == c).map_or(c.to_string(), |(_, b)| b.clone())))
    }

    pub(crate) fn typed(frame: DataFrame, expr: Expr, name: String) -> Result<Series, FrameError> {
        let dtype = expr.dtype(&frame.schema)?.unwrap_or(DType::Float64);
        Ok(Series { frame, expr, name, dtype })
    }

    /// `a op b` with another Series (of the same rows).
    pub fn binary(&self, op: BinOp, other: &Series) -> Result<Series, FrameError> {
        let (frame, rhs) = self.frame.aligned(other)?;
        Series::typed(frame, Expr::bin(op, self.expr.clone(), rhs), self.name.clone())
    }

    /// `a op k` (or `k op a` when `flipped`).
    pub fn scalar(&self, op: BinOp, k: Value, flipped: bool) -> Result<Series, FrameError> {
        let (a, b) = (self.expr.clone(), Expr::Lit(k));
        let e = if flipped { Expr::bin(op, b, a) } else { Expr::bin(op, a, b) };
        Series::typed(self.frame.clone(), e, self.name.clone())
    }

    /// An expression of this Series and `other` (of this frame's rows).
    pub fn map_expr2(
        &self,
        other: &Series,
        f: impl FnOnce(Box<Expr>, Box<Expr>) -> Expr,
    ) -> Result<Series, FrameError> {
        let (frame, rhs) = self.frame.aligned(other)?;
        Series::typed(frame, f(Box::new(self.expr.clone()), Box::new(rhs)), self.name.clone())
    }

    pub fn map_expr(&self, f: impl FnOnce(Box<Expr>) -> Expr) -> Result<Series, FrameError> {
        Series::typed(self.frame.clone(), f(Box::new(self.expr.clone())), self.name.clone())
    }

    /// `s.map(f)` / `s.apply(f)`: the closure on each value, its results
    /// of type `dtype`.
    pub fn call_each(
        &self,
        udf: Arc<Udf>,
        dtype: DType,
        skip_missing: bool,
        what: &str,
    ) -> Result<Series, FrameError> {
        self.map_expr(|x| {
            Expr::Call(Box::new(Call { udf, fields: None, dtype, skip_missing, what: what.into() }), vec![*x])
        })
    }

    pub fn rename(&self, name: &str) -> Series {
        Series { name: name.to_string(), ..self.clone() }
    }

    /// The Series as a one-column frame.
    pub fn to_frame(&self) -> DataFrame {
        let base = &self.frame;
        let name = self.name.clone();
        let f = if self.expr == Expr::Col(name.clone()) {
            base.clone()
        } else {
            let tok = Tokenizer::new().str(&base.token).str("series").serde(&self.expr).finish();
            let mut schema = base.schema.as_ref().clone();
            let mut toks = base.col_tokens.as_ref().clone();
            match schema.cols.iter().position(|(n, _)| *n == name) {
                Some(i) => {
                    schema.cols[i].1 = self.dtype;
                    toks[i] = tok;
                }
                None => {
                    schema.cols.push((name.clone(), self.dtype));
                    toks.push(tok);
                }
            }
            base.staged(Stage::Assign(vec![(name.clone(), self.expr.clone())]), schema, toks, false)
        };
        let tok = f.col_token(&name).cloned().unwrap_or_default();
        f.staged(Stage::Project(vec![name.clone()]), Schema::new(vec![(name, self.dtype)]), vec![tok], false)
    }

    /// `s.sum()`, `s.mean()`, …: a scalar, as a tree.
    pub fn reduce(&self, ctx: &Ctx, red: Red) -> Result<(LayerRef, Key), FrameError> {
        red.dtype(self.dtype).map_err(|e| FrameError::DType(format!("{e} (Series \"{}\")", self.name)))?;
        let f = self.to_frame();
        Ok(match red {
            Red::NUnique => f.tree(ctx, "nunique", Sink::Unique(self.name.clone()), Finish::NUnique),
            _ => f.tree(ctx, red.name(), Sink::Stats(self.name.clone()), Finish::Reduce(red, self.dtype)),
        })
    }

    /// `unique()`: a one-partition frame of the distinct values.
    pub fn unique(&self, ctx: &Ctx) -> Series {
        let f = self.to_frame();
        let (layer, key) = f.tree(ctx, "unique", Sink::Unique(self.name.clone()), Finish::Unique);
        let frame = DataFrame::of_keys(
            layer,
            vec![key],
            Schema::new(vec![(self.name.clone(), self.dtype)]),
            "unique",
        );
        Series { expr: Expr::col(&self.name), frame, name: self.name.clone(), dtype: self.dtype }
    }

    /// `value_counts()`: columns `[name, "count"]`, largest count first.
    pub fn value_counts(&self, ctx: &Ctx) -> DataFrame {
        let f = self.to_frame();
        let spec = Arc::new(GroupSpec {
            by: vec![self.name.clone()],
            aggs: vec![("count".into(), String::new(), Red::Size, DType::Int64)],
        });
        let (layer, key) =
            f.tree(ctx, "value-counts", Sink::Group(spec), Finish::ValueCounts { column: self.name.clone() });
        let schema = Schema::new(vec![(self.name.clone(), self.dtype), ("count".into(), DType::Int64)]);
        DataFrame::of_keys(layer, vec![key], schema, "value-counts")
    }
}
