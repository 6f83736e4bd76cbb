//! Frame-wide statistics: `df.sum()`, `mean`, `min`, `max`, `count`,
//! `std`, `var`, `median`, `quantile(q)`, and `corr`/`cov` of frames and
//! Series. With no hidden index, a reduction of every column is one row
//! whose columns are the frame's (pandas' Series indexed by column name,
//! turned on its side, as `describe` is); the matrices name their rows in
//! a first `index` column, as pandas' `reset_index` would.

use super::dataframe::{Assigned, DataFrame, Series, invalid};
use crate::collections::array::Ctx;
use crate::frame::dtype::{DType, Schema};
use crate::frame::error::FrameError;
use crate::frame::expr::Expr;
use crate::frame::op::{Finish, FrameOp, Sink};
use crate::frame::red::Red;
use crate::frame::stage::Stage;
use crate::graph::layer::Layer;
use crate::graph::layer::LayerRef;
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::Arg;

fn numeric(t: DType) -> bool {
    matches!(t, DType::Int64 | DType::Float64 | DType::Bool)
}

/// That a column is numeric (bools count, as in pandas' `numeric_only`).
fn numeric_for(what: &str) -> impl Fn(DType) -> Result<(), FrameError> + '_ {
    move |t| {
        if numeric(t) {
            Ok(())
        } else {
            Err(FrameError::DType(format!("{what} needs a numeric column, not {t}")))
        }
    }
}

impl DataFrame {
    /// The columns a frame-wide statistic reads: every column but the
    /// index, each of a type `ok` accepts; with `numeric_only` only the
    /// numeric ones `ok` accepts, else a column `ok` refuses is an error.
    fn stat_columns(
        &self,
        what: &str,
        numeric_only: bool,
        ok: impl Fn(DType) -> Result<(), FrameError>,
    ) -> Result<Vec<(String, DType)>, FrameError> {
        let index = self.divisions.as_ref().map(|d| d.on.as_str());
        let mut out = Vec::new();
        for (n, t) in &self.schema.cols {
            if Some(n.as_str()) == index || (numeric_only && (!numeric(*t) || ok(*t).is_err())) {
                continue;
            }
            if let Err(e) = ok(*t) {
                return Err(invalid(format!(
                    "{what}: column \"{n}\": {e} (select columns first, or give #{{numeric_only: true}})"
                )));
            }
            out.push((n.clone(), *t));
        }
        if out.is_empty() {
            return Err(invalid(format!("{what}: the frame has no column to reduce")));
        }
        Ok(out)
    }

    /// `df.sum()`, `df.mean()`, …: one row, the reduction of each column.
    pub fn reduce_all(&self, ctx: &Ctx, red: Red, numeric_only: bool) -> Result<DataFrame, FrameError> {
        if matches!(red, Red::Size | Red::NUnique) {
            return Err(invalid(format!("{} of a whole frame is not supported", red.name())));
        }
        let cols = self.stat_columns(red.name(), numeric_only, |t| red.dtype(t).map(|_| ()))?;
        let names: Vec<String> = cols.iter().map(|(n, _)| n.clone()).collect();
        let schema: Vec<(String, DType)> =
            cols.iter().map(|(n, t)| Ok((n.clone(), red.dtype(*t)?))).collect::<Result<_, FrameError>>()?;
        let (layer, key) = self.tree(ctx, red.name(), Sink::StatsOf(names), Finish::Row(red, cols));
        Ok(DataFrame::of_keys(layer, vec![key], Schema::new(schema), red.name()))
    }

    /// `df.median()` / `df.quantile(q)`: one row, each numeric column's
    /// quantile (approximate beyond 1,000 values a partition, as Dask's).
    pub fn quantile_all(&self, ctx: &Ctx, q: f64, numeric_only: bool) -> Result<DataFrame, FrameError> {
        if !(0.0..=1.0).contains(&q) {
            return Err(invalid(format!("quantile: q={q} is not between 0 and 1")));
        }
        let need = numeric_for("quantile");
        let cols = self.stat_columns("quantile", numeric_only, need)?;
        let names: Vec<String> = cols.iter().map(|(n, _)| n.clone()).collect();
        let schema = Schema::new(names.iter().map(|n| (n.clone(), DType::Float64)).collect());
        let (layer, key) =
            self.tree(ctx, "quantile", Sink::Describe(names.clone()), Finish::QuantileRow(names, q));
        Ok(DataFrame::of_keys(layer, vec![key], schema, "quantile"))
    }

    /// `df.corr()` / `df.cov(ddof)`: the matrix of every numeric column
    /// pair over the rows where both are present.
    pub fn moments(
        &self,
        ctx: &Ctx,
        corr: bool,
        ddof: u32,
        numeric_only: bool,
    ) -> Result<DataFrame, FrameError> {
        let what = if corr { "corr" } else { "cov" };
        let need = numeric_for(what);
        let names: Vec<String> =
            self.stat_columns(what, numeric_only, need)?.into_iter().map(|(n, _)| n).collect();
        let finish = Finish::Moments { columns: names.clone(), corr, ddof, pair: false };
        let (layer, key) = self.tree(ctx, what, Sink::Moments(names.clone()), finish);
        let mut schema = vec![("index".to_string(), DType::Str)];
        schema.extend(names.into_iter().map(|n| (n, DType::Float64)));
        Ok(DataFrame::of_keys(layer, vec![key], Schema::new(schema), what))
    }
}

impl DataFrame {
    /// `df.idxmax()` / `idxmin()`: one row, for each numeric column the
    /// label of the row where it is largest (smallest): the index value
    /// after `set_index`, else the row's position.
    pub fn idx_best(&self, ctx: &Ctx, max: bool, numeric_only: bool) -> Result<DataFrame, FrameError> {
        let what = if max { "idxmax" } else { "idxmin" };
        let need = numeric_for(what);
        let names: Vec<String> =
            self.stat_columns(what, numeric_only, need)?.into_iter().map(|(n, _)| n).collect();
        let index = self.divisions.as_ref().map(|d| d.on.clone());
        let label = index.as_ref().and_then(|i| self.schema.get(i)).unwrap_or(DType::Int64);
        let sink = Sink::ArgBest { columns: names.clone(), index, max };
        let finish = Finish::ArgBest { columns: names.clone(), label, scalar: false };
        let (layer, key) = self.tree(ctx, what, sink, finish);
        let schema = Schema::new(names.into_iter().map(|n| (n, label)).collect());
        Ok(DataFrame::of_keys(layer, vec![key], schema, what))
    }
}

impl DataFrame {
    /// `resample(rule).agg(...)` on the datetime column `on`: rows binned
    /// by `on` floored to `step` nanoseconds, each of `aggs` (column,
    /// reduction) per bin, and a row for every bin between the first and
    /// the last, as pandas (sums and counts 0 in an empty bin, others
    /// missing). One partition, sorted by bin.
    pub fn resample(
        &self,
        ctx: &Ctx,
        on: &str,
        step: i64,
        origin: i64,
        aggs: &[(String, Red)],
    ) -> Result<DataFrame, FrameError> {
        match self.schema.get(on) {
            Some(DType::Datetime) => {}
            Some(t) => return Err(invalid(format!("resample: column \"{on}\" is {t}, not datetime64[ns]"))),
            None => {
                return Err(FrameError::UnknownColumn {
                    column: on.to_string(),
                    columns: self.schema.listing(),
                });
            }
        }
        if step <= 0 {
            return Err(invalid(format!("resample: a bin of {step} ns")));
        }
        if aggs.is_empty() {
            return Err(invalid("resample: nothing to aggregate"));
        }
        let binned = Series::typed(
            self.clone(),
            Expr::Time(crate::frame::text::TimeOp::FloorFrom { step, origin }, Box::new(Expr::col(on))),
            on.to_string(),
        )?;
        let f = self.assign(vec![(on.to_string(), Assigned::Series(binned))])?;
        let spec: Vec<(String, String, Red)> = aggs.iter().map(|(c, r)| (c.clone(), c.clone(), *r)).collect();
        let grouped = f.groupby_agg(ctx, &[on.to_string()], &spec, 1)?;
        let zero: Vec<String> = aggs
            .iter()
            .filter(|(_, r)| matches!(r, Red::Sum | Red::Count | Red::Size))
            .map(|(c, _)| c.clone())
            .collect();
        let (layer, keys) = grouped.partitions(ctx);
        let name: std::sync::Arc<str> = std::sync::Arc::from(
            Tokenizer::new().str(&grouped.token).u64(step as u64).u64(origin as u64).name("resample"),
        );
        let key = super::dataframe::block(&name, 0);
        let op = FrameOp::FillBins { on: on.to_string(), step, zero };
        let args = (0..keys.len()).map(|i| Arg::Dep(i as u32)).collect();
        let t = super::shuffle::task(ctx, key.clone(), op, args, keys);
        Ok(DataFrame::of_keys(
            Layer::new(name, vec![t], vec![layer]),
            vec![key],
            grouped.schema.as_ref().clone(),
            "resample",
        ))
    }
}

impl Series {
    /// `s.idxmax()` / `idxmin()`: the label of the row where it is largest.
    pub fn idx_best(&self, ctx: &Ctx, max: bool) -> Result<(LayerRef, Key), FrameError> {
        let what = if max { "idxmax" } else { "idxmin" };
        if !numeric(self.dtype) {
            return Err(invalid(format!("{what} needs a numeric Series, not {}", self.dtype)));
        }
        let index = self.frame.divisions.as_ref().map(|d| d.on.clone());
        // The Series, beside the index column when it is not that.
        let f = match &index {
            Some(i) if *i != self.name => self
                .frame
                .assign(vec![(self.name.clone(), Assigned::Series(self.clone()))])?
                .project(&[i.clone(), self.name.clone()])?,
            _ => self.to_frame(),
        };
        let label = index.as_ref().and_then(|i| f.schema.get(i)).unwrap_or(DType::Int64);
        let sink = Sink::ArgBest { columns: vec![self.name.clone()], index, max };
        let finish = Finish::ArgBest { columns: vec![self.name.clone()], label, scalar: true };
        Ok(f.tree(ctx, what, sink, finish))
    }

    /// `s.corr(other)` / `s.cov(other, ddof)`: a scalar, over the rows
    /// where both are present.
    pub fn moment_with(
        &self,
        ctx: &Ctx,
        other: &Series,
        corr: bool,
        ddof: u32,
    ) -> Result<(LayerRef, Key), FrameError> {
        let what = if corr { "corr" } else { "cov" };
        for s in [self, other] {
            if !numeric(s.dtype) {
                return Err(invalid(format!(
                    "{what} needs numeric Series, not \"{}\" of type {}",
                    s.name, s.dtype
                )));
            }
        }
        // A Series of the same rows (a shift, a cumsum) comes alongside.
        let (base, rhs) = self.frame.aligned(other)?;
        let base = &base;
        let (a, b) = ("__brisk_a".to_string(), "__brisk_b".to_string());
        let tok = |e: &Expr| Tokenizer::new().str(&base.token).str(what).serde(e).finish();
        let mut schema = base.schema.as_ref().clone();
        let mut toks = base.col_tokens.as_ref().clone();
        for (n, e, t) in [(&a, &self.expr, self.dtype), (&b, &rhs, other.dtype)] {
            schema.cols.push((n.clone(), t));
            toks.push(tok(e));
        }
        let assign = Stage::Assign(vec![(a.clone(), self.expr.clone()), (b.clone(), rhs)]);
        let f = base.staged(assign, schema, toks.clone(), false);
        let kept = Schema::new(vec![(a.clone(), self.dtype), (b.clone(), other.dtype)]);
        let last = toks[toks.len() - 2..].to_vec();
        let f = f.staged(Stage::Project(vec![a.clone(), b.clone()]), kept, last, false);
        let finish = Finish::Moments { columns: vec![a.clone(), b.clone()], corr, ddof, pair: true };
        Ok(f.tree(ctx, what, Sink::Moments(vec![a, b]), finish))
    }
}
