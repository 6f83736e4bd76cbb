//! The lazy `DataFrame` and `Series` (Dask's `dask.dataframe`). A frame is
//! its partitions' sources (task results or CSV blocks), the per-partition
//! stages still to apply, and the schema those stages produce, so column
//! names and types are known before any data is read.
//!
//! Stages are not tasks: they run in the task that next needs the
//! partition, and when that task is built the columns it needs are walked
//! back through the stages and pushed into the reader (projection
//! pushdown), so `read_csv(..)["x"].sum()` parses one column.
//!
//! A `Series` is an expression over the columns of the frame it came from.
//! Series built from one frame combine into one expression; a Series can
//! be used with another frame when that frame has the same rows (no filter
//! in between) and the columns the Series reads unchanged.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::collections::array::Ctx;
use crate::frame::csv::CsvSpec;
use crate::frame::dtype::{DType, Schema};
use crate::frame::error::FrameError;
use crate::frame::expr::Expr;
use crate::frame::group::GroupSpec;
use crate::frame::op::{Finish, FrameOp, Keep, Sink, Source};
use crate::frame::parquet::GroupStats;
use crate::frame::red::Red;
use crate::frame::stage::Stage;
use crate::graph::layer::{Layer, LayerRef, files_read};
use crate::graph::task::Task;
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::{Arg, Func, Op};
use crate::staging::Staged;
use crate::value::Value;

/// Partials merged per combine task (Dask's `split_every` for frames).
pub const SPLIT_EVERY: usize = 8;

/// The most partitions one frame may have.
pub const MAX_PARTITIONS: usize = crate::collections::array::MAX_BLOCKS;

/// Refuse `n` output partitions of `what` (shuffle, repartition,
/// `split_out`) beyond `MAX_PARTITIONS` or the memory their tasks take:
/// a mistyped count must be an error, not an abort.
pub(crate) fn check_npartitions(what: &str, n: usize, inputs: usize) -> Result<(), FrameError> {
    if n > MAX_PARTITIONS {
        return Err(invalid(format!("{what}: at most {MAX_PARTITIONS} partitions, got {n}")));
    }
    // A shuffle writes a piece for every (input, output) pair.
    let tasks = (n as u64).saturating_mul(2).saturating_add(inputs as u64);
    crate::memory::check_tasks(tasks, || format!("{what} into {n} partitions"))?;
    Ok(())
}

/// Dask's `read_csv` blocksize when none is given (64 MB).
pub const DEFAULT_BLOCKSIZE: u64 = 64_000_000;

pub(super) fn invalid(s: impl Into<String>) -> FrameError {
    FrameError::Invalid(s.into())
}

/// Where one partition comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Key(Key),
    Csv {
        path: Arc<str>,
        start: u64,
        end: u64,
    },
    Json {
        path: Arc<str>,
        start: u64,
        end: u64,
    },
    /// A row group, with its statistics for skipping it.
    Parquet {
        path: Arc<str>,
        offset: u64,
        len: u64,
        stats: Arc<GroupStats>,
    },
}

#[derive(Clone, Debug)]
pub struct DataFrame {
    pub parts: Arc<Vec<Part>>,
    pub deps: Vec<LayerRef>,
    pub csv: Option<Arc<CsvSpec>>,
    /// The columns at the source, before any stage.
    pub source_schema: Arc<Schema>,
    pub stages: Arc<Vec<Stage>>,
    pub schema: Arc<Schema>,
    /// One identity per column of `schema`: equal when the values are.
    pub col_tokens: Arc<Vec<String>>,
    /// Identity of the rows: changes only when rows are dropped or moved.
    pub rows: String,
    pub token: String,
    /// What made the frame, for its summary (`"read_csv"`, `"assign"`).
    pub label: &'static str,
    /// The divisions of a frame `set_index` made; `None` when unknown.
    pub divisions: Option<Divisions>,
    /// The known categories of category columns, by column identity (a
    /// `col_tokens` entry): a column keeps them while its values do.
    pub categories: Arc<BTreeMap<String, Arc<Vec<String>>>>,
}

/// Known divisions: the task that computes them (`npartitions + 1`
/// values of column `on`) and the identity of `on` they hold for. Stages
/// keep them while that column is unchanged, as Dask keeps a frame's
/// divisions through filters and new columns: rows never leave their
/// partition in a stage.
#[derive(Clone, Debug)]
pub struct Divisions {
    pub task: (LayerRef, Key),
    pub on: String,
    pub token: String,
}

/// A column expression over a frame.
#[derive(Clone, Debug)]
pub struct Series {
    pub frame: DataFrame,
    pub expr: Expr,
    pub name: String,
    pub dtype: DType,
}

pub(super) fn task(ctx: &Ctx, key: Key, op: FrameOp, args: Vec<Arg>, deps: Vec<Key>) -> Task {
    let mut t = Task::new(key, Op::Call { func: Func::Frame(Arc::new(op)), args }, deps);
    t.annotations = ctx.annotations.clone();
    t
}

pub(crate) fn block(name: &Arc<str>, i: usize) -> Key {
    Key::block(name.clone(), &[i as u32])
}

pub(super) fn col_token(source: &str, name: &str) -> String {
    Tokenizer::new().str(source).str("column").str(name).finish()
}

impl DataFrame {
    pub(crate) fn new_source(
        parts: Vec<Part>,
        deps: Vec<LayerRef>,
        csv: Option<Arc<CsvSpec>>,
        schema: Schema,
        token: String,
        label: &'static str,
    ) -> DataFrame {
        let col_tokens = schema.cols.iter().map(|(n, _)| col_token(&token, n)).collect();
        let schema = Arc::new(schema);
        DataFrame {
            parts: Arc::new(parts),
            deps,
            csv,
            source_schema: schema.clone(),
            stages: Arc::new(Vec::new()),
            schema,
            col_tokens: Arc::new(col_tokens),
            rows: token.clone(),
            token,
            label,
            divisions: None,
            categories: Arc::default(),
        }
    }

    pub fn npartitions(&self) -> usize {
        self.parts.len()
    }

    pub(crate) fn col_token(&self, name: &str) -> Option<&String> {
        self.schema.cols.iter().position(|(n, _)| n == name).map(|i| &self.col_tokens[i])
    }

    /// This frame with one more stage, the schema and column identities
    /// after it, and whether it drops rows.
    pub(crate) fn staged(
        &self,
        stage: Stage,
        schema: Schema,
        col_tokens: Vec<String>,
        drops_rows: bool,
    ) -> DataFrame {
        let label = stage.name();
        let token = Tokenizer::new().str(&self.token).str(label).serde(&stage).finish();
        let mut stages = self.stages.as_ref().clone();
        stages.push(stage);
        let divisions = self.divisions.clone().filter(|d| {
            schema.cols.iter().position(|(n, _)| *n == d.on).is_some_and(|i| col_tokens[i] == d.token)
        });
        DataFrame {
            stages: Arc::new(stages),
            schema: Arc::new(schema),
            col_tokens: Arc::new(col_tokens),
            rows: if drops_rows {
                Tokenizer::new().str(&self.rows).str(&token).finish()
            } else {
                self.rows.clone()
            },
            divisions,
            token,
            label,
            ..self.clone()
        }
    }

    pub(crate) fn check_columns<'a>(
        &self,
        cols: impl IntoIterator<Item = &'a String>,
    ) -> Result<(), FrameError> {
        for c in cols {
            if !self.schema.contains(c) {
                return Err(FrameError::UnknownColumn {
                    column: c.to_string(),
                    columns: self.schema.listing(),
                });
            }
        }
        Ok(())
    }

    /// `df[["a", "b"]]`.
    pub fn project(&self, cols: &[String]) -> Result<DataFrame, FrameError> {
        self.check_columns(cols)?;
        let mut seen = BTreeSet::new();
        if let Some(d) = cols.iter().find(|c| !seen.insert(c.as_str())) {
            return Err(invalid(format!("column \"{d}\" is selected twice")));
        }
        let schema =
            Schema::new(cols.iter().map(|c| (c.clone(), self.schema.get(c).unwrap_or(DType::Str))).collect());
        let toks = cols.iter().map(|c| self.col_token(c).cloned().unwrap_or_default()).collect();
        Ok(self.staged(Stage::Project(cols.to_vec()), schema, toks, false))
    }

    /// `df["x"]`.
    pub fn column(&self, name: &str) -> Result<Series, FrameError> {
        let dtype = self.schema.get(name).ok_or_else(|| FrameError::UnknownColumn {
            column: name.to_string(),
            columns: self.schema.listing(),
        })?;
        Ok(Series { frame: self.clone(), expr: Expr::col(name), name: name.to_string(), dtype })
    }

    /// `df[mask]`.
    pub fn filter(&self, mask: &Series) -> Result<DataFrame, FrameError> {
        if mask.dtype != DType::Bool {
            return Err(invalid(format!("a row mask must be a bool Series, not {}", mask.dtype)));
        }
        let (base, e) = self.aligned(mask)?;
        let mut f = base.staged(
            Stage::Filter(e.clone()),
            base.schema.as_ref().clone(),
            base.col_tokens.as_ref().clone(),
            true,
        );
        if base.token == self.token {
            f.parts = self.pruned(&e);
        }
        Ok(f.without_aligned())
    }

    /// Predicate pushdown: the Parquet row groups that may hold a row for
    /// which `e` holds, judged by their statistics. Only when the stages
    /// so far keep column names and values as the file has them.
    pub(crate) fn pruned(&self, e: &Expr) -> Arc<Vec<Part>> {
        let plain = self.stages.iter().all(|s| matches!(s, Stage::Project(_) | Stage::Filter(_)));
        if !plain || !self.parts.iter().all(|p| matches!(p, Part::Parquet { .. })) {
            return self.parts.clone();
        }
        let kept: Vec<Part> = self
            .parts
            .iter()
            .filter(|p| match p {
                Part::Parquet { stats, .. } => crate::frame::prune::may_match(e, stats),
                _ => true,
            })
            .cloned()
            .collect();
        if kept.len() == self.parts.len() {
            return self.parts.clone();
        }
        match (kept.is_empty(), self.parts.first()) {
            // Nothing can match: one empty read keeps the frame's shape.
            (true, Some(Part::Parquet { path, stats, .. })) => {
                Arc::new(vec![Part::Parquet { path: path.clone(), offset: 0, len: 0, stats: stats.clone() }])
            }
            _ => Arc::new(kept),
        }
    }

    /// `assign(#{z: series_or_scalar})`: columns in the map's order.
    pub fn assign(&self, cols: Vec<(String, Assigned)>) -> Result<DataFrame, FrameError> {
        // Series of these rows but other columns first come alongside.
        let mut base = self.clone();
        let mut resolved = Vec::with_capacity(cols.len());
        let mut carried = Vec::new();
        for (name, a) in cols {
            resolved.push(match a {
                Assigned::Series(s) => {
                    if let Some(cats) = s.known_categories() {
                        carried.push((name.clone(), cats));
                    }
                    let (b, e) = base.aligned(&s)?;
                    base = b;
                    (name, Ok((e, s.dtype)))
                }
                Assigned::Scalar(v) => (name, Err(v)),
            });
        }
        let mut schema = base.schema.as_ref().clone();
        let mut toks = base.col_tokens.as_ref().clone();
        let mut exprs = Vec::new();
        for (name, a) in resolved {
            let (e, t) = match a {
                Ok(typed) => typed,
                Err(v) => {
                    let t = match &v {
                        Value::Int(_) => DType::Int64,
                        Value::Float(_) | Value::Unit => DType::Float64,
                        Value::Bool(_) => DType::Bool,
                        Value::Str(_) => DType::Str,
                        other => {
                            return Err(invalid(format!(
                                "assign: a {} cannot be a column",
                                other.type_name()
                            )));
                        }
                    };
                    let e = if matches!(v, Value::Unit) {
                        Expr::Cast(Box::new(Expr::Lit(v)), t)
                    } else {
                        Expr::Lit(v)
                    };
                    (e, t)
                }
            };
            let tok = Tokenizer::new().str(&base.token).str("assign").serde(&e).finish();
            match schema.cols.iter().position(|(n, _)| *n == name) {
                Some(i) => {
                    schema.cols[i].1 = t;
                    toks[i] = tok;
                }
                None => {
                    schema.cols.push((name.clone(), t));
                    toks.push(tok);
                }
            }
            exprs.push((name, e));
        }
        Ok(base.staged(Stage::Assign(exprs), schema, toks, false).without_aligned().keeping(carried))
    }

    pub fn drop(&self, cols: &[String]) -> Result<DataFrame, FrameError> {
        self.check_columns(cols)?;
        let keep: Vec<usize> =
            (0..self.schema.cols.len()).filter(|&i| !cols.contains(&self.schema.cols[i].0)).collect();
        let schema = Schema::new(keep.iter().map(|&i| self.schema.cols[i].clone()).collect());
        let toks = keep.iter().map(|&i| self.col_tokens[i].clone()).collect();
        Ok(self.staged(Stage::Drop(cols.to_vec()), schema, toks, false))
    }

    pub fn rename(&self, pairs: Vec<(String, String)>) -> Result<DataFrame, FrameError> {
        // pandas ignores names that are not columns; so do we.
        let pairs: Vec<(String, String)> =
            pairs.into_iter().filter(|(o, _)| self.schema.contains(o)).collect();
        let mut schema = self.schema.as_ref().clone();
        for (old, new) in &pairs {
            if let Some(c) = schema.cols.iter_mut().find(|(n, _)| n == old) {
                c.0 = new.clone();
            }
        }
        let mut seen = BTreeSet::new();
        if let Some((d, _)) = schema.cols.iter().find(|(n, _)| !seen.insert(n.clone())) {
            return Err(invalid(format!("rename: two columns would be named \"{d}\"")));
        }
        Ok(self.staged(Stage::Rename(pairs), schema, self.col_tokens.as_ref().clone(), false))
    }

    pub fn astype(&self, cols: Vec<(String, DType)>) -> Result<DataFrame, FrameError> {
        self.check_columns(cols.iter().map(|(c, _)| c))?;
        let mut schema = self.schema.as_ref().clone();
        let mut toks = self.col_tokens.as_ref().clone();
        for (name, t) in &cols {
            if let Some(i) = schema.cols.iter().position(|(n, _)| n == name) {
                crate::frame::expr::category_from(Some(schema.cols[i].1), *t)?;
                // String and category hold the same values: same identity,
                // so divisions on the column stay known.
                if schema.cols[i].1.values() != t.values() {
                    toks[i] = Tokenizer::new().str(&toks[i]).str("astype").str(t.name()).finish();
                }
                schema.cols[i].1 = *t;
            }
        }
        Ok(self.staged(Stage::Cast(cols), schema, toks, false))
    }

    /// `fillna(v)` on every column whose type can hold `v`, or `fillna(#{col: v})`.
    pub fn fillna(&self, fill: Vec<(String, Value)>) -> Result<DataFrame, FrameError> {
        self.check_columns(fill.iter().map(|(c, _)| c))?;
        let mut schema = self.schema.as_ref().clone();
        let mut toks = self.col_tokens.as_ref().clone();
        let mut kept = Vec::new();
        for (name, v) in &fill {
            let i = schema.cols.iter().position(|(n, _)| n == name).unwrap_or(0);
            let mut t = Expr::FillNa(Box::new(Expr::col(name)), v.clone())
                .dtype(&self.schema)?
                .unwrap_or(DType::Float64);
            if schema.cols[i].1 == DType::Category {
                // pandas fills a category only with one of its categories.
                if let Some(cats) = self.known_categories(name) {
                    if !matches!(v, Value::Str(s) if cats.iter().any(|c| c.as_str() == &**s)) {
                        return Err(FrameError::DType(format!(
                            "fillna: {v} is not among the categories of \"{name}\" (cannot fill a category with a new category, as pandas)"
                        )));
                    }
                    kept.push((name.clone(), cats));
                }
                t = DType::Category;
            }
            schema.cols[i].1 = t;
            toks[i] = Tokenizer::new().str(&toks[i]).str("fillna").value(v).finish();
        }
        Ok(self.staged(Stage::FillNa(fill), schema, toks, false).keeping(kept))
    }

    pub fn dropna(&self, subset: Option<Vec<String>>) -> Result<DataFrame, FrameError> {
        let subset = match subset {
            Some(s) => {
                self.check_columns(&s)?;
                s
            }
            None => self.schema.names().map(String::from).collect(),
        };
        Ok(self.staged(
            Stage::DropNa(subset),
            self.schema.as_ref().clone(),
            self.col_tokens.as_ref().clone(),
            true,
        ))
    }

    /// The columns a sink reads, walked back through the stages to the
    /// source: the projection pushed into the reader (`None`: all).
    pub(crate) fn pushdown(&self, sink_needs: BTreeSet<String>) -> Option<Vec<String>> {
        let mut need = sink_needs;
        for s in self.stages.iter().rev() {
            need = s.needs(&need);
        }
        let cols: Vec<String> =
            self.source_schema.names().filter(|n| need.contains(*n)).map(String::from).collect();
        if cols.len() == self.source_schema.cols.len() { None } else { Some(cols) }
    }

    pub(crate) fn sink_needs(&self, sink: &Sink) -> BTreeSet<String> {
        match sink {
            Sink::Frame
            | Sink::Head(_)
            | Sink::Tail(_)
            | Sink::WriteCsv(_)
            | Sink::WriteParquet(_)
            | Sink::WriteJson(_)
            | Sink::Split(..)
            | Sink::Top { .. }
            | Sink::Distinct { .. } => self.schema.names().map(String::from).collect(),
            Sink::Stats(c) | Sink::Unique(c) | Sink::Sample { on: c, .. } => [c.clone()].into(),
            Sink::Describe(cols) | Sink::StatsOf(cols) | Sink::Moments(cols) => {
                cols.iter().cloned().collect()
            }
            Sink::ArgBest { columns, index, .. } => columns.iter().chain(index).cloned().collect(),
            Sink::Group(spec) => spec
                .by
                .iter()
                .chain(spec.aggs.iter().map(|a| &a.1))
                .filter(|c| !c.is_empty())
                .cloned()
                .collect(),
        }
    }

    /// One `Run` task per partition feeding `sink`.
    pub(crate) fn run_layer(
        &self,
        ctx: &Ctx,
        prefix: &str,
        sink: &Sink,
        extra: &str,
        indices: &[usize],
    ) -> (LayerRef, Vec<Key>) {
        self.run_layer_each(ctx, prefix, extra, indices, &[], &|_| sink.clone())
    }

    /// One `Run` task per partition in `indices`, partition `i` feeding
    /// `sink(i)`; every task also takes `more` as its last inputs.
    pub(crate) fn run_layer_each(
        &self,
        ctx: &Ctx,
        prefix: &str,
        extra: &str,
        indices: &[usize],
        more: &[(LayerRef, Key)],
        sink: &dyn Fn(usize) -> Sink,
    ) -> (LayerRef, Vec<Key>) {
        let mut t = Tokenizer::new();
        t.str(&self.token).str(prefix).str(extra);
        more.iter().for_each(|(_, k)| {
            t.key(k);
        });
        let name: Arc<str> = Arc::from(t.name(prefix));
        let columns = self.pushdown(self.sink_needs(&sink(indices.first().copied().unwrap_or(0))));
        let mut tasks = Vec::with_capacity(indices.len());
        let mut keys = Vec::with_capacity(indices.len());
        for &i in indices {
            let key = block(&name, i);
            let (source, mut args, mut deps) = match &self.parts[i] {
                Part::Key(k) => (Source::Dep, vec![Arg::Dep(0)], vec![k.clone()]),
                Part::Csv { path, start, end } => {
                    let spec = self.csv.clone().unwrap_or_default();
                    (Source::Csv { spec, path: path.clone(), start: *start, end: *end }, vec![], vec![])
                }
                Part::Json { path, start, end } => {
                    let schema = self.source_schema.clone();
                    (Source::Json { schema, path: path.clone(), start: *start, end: *end }, vec![], vec![])
                }
                Part::Parquet { path, offset, len, .. } => {
                    let schema = self.source_schema.clone();
                    (
                        Source::Parquet { schema, path: path.clone(), offset: *offset, len: *len },
                        vec![],
                        vec![],
                    )
                }
            };
            for (_, k) in more {
                args.push(Arg::Dep(deps.len() as u32));
                deps.push(k.clone());
            }
            let op = FrameOp::Run {
                source,
                columns: columns.clone(),
                stages: self.stages.as_ref().clone(),
                sink: sink(i),
            };
            tasks.push(task(ctx, key.clone(), op, args, deps));
            keys.push(key);
        }
        let mut deps = self.deps.clone();
        deps.extend(more.iter().map(|(l, _)| l.clone()));
        (Layer::new(name, tasks, deps), keys)
    }

    /// The partitions as tasks whose results are frames.
    pub fn partitions(&self, ctx: &Ctx) -> (LayerRef, Vec<Key>) {
        if self.stages.is_empty()
            && self.deps.len() == 1
            && self.parts.iter().all(|p| matches!(p, Part::Key(_)))
        {
            let keys =
                self.parts.iter().filter_map(|p| if let Part::Key(k) = p { Some(k.clone()) } else { None });
            return (self.deps[0].clone(), keys.collect());
        }
        let all: Vec<usize> = (0..self.parts.len()).collect();
        self.run_layer(ctx, self.label, &Sink::Frame, "", &all)
    }

    /// A tree over the partitions: `sink` per partition, combines of
    /// `SPLIT_EVERY`, then `finish`.
    pub fn tree(&self, ctx: &Ctx, label: &str, sink: Sink, finish: Finish) -> (LayerRef, Key) {
        let all: Vec<usize> = (0..self.parts.len()).collect();
        let extra = Tokenizer::new().serde(&finish).finish();
        let (part_layer, level) = self.run_layer(ctx, label, &sink, &extra, &all);
        let tok = Tokenizer::new().str(&part_layer.name).finish();
        let (last, level) =
            crate::collections::combine_tree(label, &tok, part_layer, level, SPLIT_EVERY, 0, |key, group| {
                let args = (0..group.len()).map(|i| Arg::Dep(i as u32)).collect();
                task(ctx, key, FrameOp::Combine(sink.clone()), args, group.to_vec())
            });
        let name = format!("{label}-{tok}");
        let key = Key::new(name.as_str());
        let t = task(ctx, key.clone(), FrameOp::Finish(finish), vec![Arg::Dep(0)], level);
        (Layer::new(name, vec![t], vec![last]), key)
    }

    /// All partitions stacked into one frame (what `compute` returns).
    pub fn finalize(&self) -> (LayerRef, Key) {
        let ctx = Ctx::default();
        let (layer, parts) = self.partitions(&ctx);
        let name = format!("finalize-{}", Tokenizer::new().str(&self.token).str(&layer.name).finish());
        let key = Key::new(name.as_str());
        let args = (0..parts.len()).map(|i| Arg::Dep(i as u32)).collect();
        let t = task(&ctx, key.clone(), FrameOp::Combine(Sink::Frame), args, parts);
        (Layer::new(name, vec![t], vec![layer]), key)
    }

    /// The first `n` rows of partition `i` (for `head`, which reads
    /// partitions one by one until it has enough).
    pub fn head_of(&self, i: usize, n: usize) -> (LayerRef, Key) {
        let (layer, keys) = self.run_layer(&Ctx::default(), "head", &Sink::Head(n), &n.to_string(), &[i]);
        let key = keys.into_iter().next().unwrap_or_else(|| Key::new("head-empty"));
        (layer, key)
    }

    /// The last `n` rows of partition `i` (for `tail`, which reads
    /// partitions from the end until it has enough).
    pub fn tail_of(&self, i: usize, n: usize) -> (LayerRef, Key) {
        let (layer, keys) = self.run_layer(&Ctx::default(), "tail", &Sink::Tail(n), &n.to_string(), &[i]);
        let key = keys.into_iter().next().unwrap_or_else(|| Key::new("tail-empty"));
        (layer, key)
    }

    /// A frame of one partition per key of `layer`.
    pub fn of_keys(layer: LayerRef, keys: Vec<Key>, schema: Schema, label: &'static str) -> DataFrame {
        let mut t = Tokenizer::new();
        keys.iter().for_each(|k| {
            t.key(k);
        });
        DataFrame::new_source(
            keys.into_iter().map(Part::Key).collect(),
            vec![layer],
            None,
            schema,
            t.finish(),
            label,
        )
    }

    /// The aggregation of a groupby and its result's schema, checked.
    pub(crate) fn group_spec(
        &self,
        by: &[String],
        aggs: &[(String, String, Red)],
    ) -> Result<(GroupSpec, Schema), FrameError> {
        if by.is_empty() {
            return Err(invalid("groupby needs at least one key column"));
        }
        self.check_columns(by)?;
        let mut spec = GroupSpec { by: by.to_vec(), aggs: Vec::new() };
        let mut schema: Vec<(String, DType)> =
            by.iter().map(|b| (b.clone(), self.schema.get(b).unwrap_or(DType::Str))).collect();
        for (out, col, red) in aggs {
            let t = if *red == Red::Size {
                DType::Int64
            } else {
                self.check_columns([col])?;
                if by.contains(col) {
                    return Err(invalid(format!(
                        "groupby: \"{col}\" is a key column; it cannot also be aggregated"
                    )));
                }
                self.schema.get(col).unwrap_or(DType::Str)
            };
            let rt =
                red.dtype(t).map_err(|e| FrameError::DType(format!("groupby: {e} (column \"{col}\")")))?;
            spec.aggs.push((out.clone(), col.clone(), *red, t));
            schema.push((out.clone(), rt));
        }
        Ok((spec, Schema::new(schema)))
    }

    /// `groupby(by).agg(...)`: a tree into one partition (Dask's default,
    /// `split_out=1`), or a hash shuffle of the partials into `split_out`.
    pub fn groupby_agg(
        &self,
        ctx: &Ctx,
        by: &[String],
        aggs: &[(String, String, Red)],
        split_out: usize,
    ) -> Result<DataFrame, FrameError> {
        let (spec, schema) = self.group_spec(by, aggs)?;
        if spec.aggs.iter().any(|a| a.2 == Red::NUnique) {
            return self.groupby_with_nunique(ctx, spec, schema);
        }
        let spec = Arc::new(spec);
        if split_out > 1 {
            check_npartitions("groupby split_out", split_out, self.npartitions())?;
            return Ok(self.groupby_split(ctx, spec, schema, split_out));
        }
        let (layer, key) = self.tree(ctx, "groupby-agg", Sink::Group(spec.clone()), Finish::Group(spec));
        Ok(DataFrame::of_keys(layer, vec![key], schema, "groupby-agg"))
    }

    /// A groupby with `nunique` columns: one tree per `nunique` column over
    /// the distinct (keys, value) rows, one for the other aggregations,
    /// and their results (each every group, sorted by key) side by side.
    pub(crate) fn groupby_with_nunique(
        &self,
        ctx: &Ctx,
        spec: GroupSpec,
        schema: Schema,
    ) -> Result<DataFrame, FrameError> {
        let by = spec.by.clone();
        let (nunique, rest): (Vec<_>, Vec<_>) = spec.aggs.into_iter().partition(|a| a.2 == Red::NUnique);
        let mut pieces: Vec<(LayerRef, Key)> = Vec::new();
        if !rest.is_empty() {
            let main = Arc::new(GroupSpec { by: by.clone(), aggs: rest });
            pieces.push(self.tree(ctx, "groupby-agg", Sink::Group(main.clone()), Finish::Group(main)));
        }
        for (out, col, _, _) in nunique {
            let mut cols = by.clone();
            cols.push(col.clone());
            let f = self.project(&cols)?.dropna(Some(by.clone()))?;
            let fin = Finish::GroupNUnique { by: by.clone(), col, out };
            pieces.push(f.tree(
                ctx,
                "groupby-nunique",
                Sink::Distinct { subset: None, keep: Keep::First },
                fin,
            ));
        }
        let names: Vec<String> = schema.names().map(String::from).collect();
        let mut t = Tokenizer::new();
        pieces.iter().for_each(|(_, k)| {
            t.key(k);
        });
        let name = t.name("groupby-agg");
        let key = Key::new(name.as_str());
        let op = FrameOp::SideBySide { by, columns: names };
        let (layers, keys): (Vec<LayerRef>, Vec<Key>) = pieces.into_iter().unzip();
        let args = (0..keys.len()).map(|i| Arg::Dep(i as u32)).collect();
        let tk = task(ctx, key.clone(), op, args, keys);
        Ok(DataFrame::of_keys(Layer::new(name, vec![tk], layers), vec![key], schema, "groupby-agg"))
    }

    /// Write each partition to `N.part` (Dask's `to_csv(dir)` names) in
    /// the staging folder of `staged`, for the caller to run and commit.
    /// Appending needs the header of the parts already there.
    pub fn to_csv(&self, ctx: &Ctx, staged: &mut Staged) -> Result<(LayerRef, Vec<Key>), FrameError> {
        if let Some(old) = staged.appending_to() {
            let old = old.display().to_string();
            if !crate::frame::csv::same_header(&old, &self.schema)? {
                return Err(FrameError::Invalid(format!(
                    "to_csv: cannot append: the header of {old} is not this frame's columns ({})",
                    self.schema.names().collect::<Vec<_>>().join(", ")
                )));
            }
        }
        self.write_files(ctx, staged, "to_csv", Sink::WriteCsv)
    }

    /// Write each partition as JSON lines to `N.part` (Dask's `to_json`
    /// names) in the staging folder of `staged`.
    pub fn to_json(&self, ctx: &Ctx, staged: &mut Staged) -> Result<(LayerRef, Vec<Key>), FrameError> {
        self.write_files(ctx, staged, "to_json", Sink::WriteJson)
    }

    /// Write each partition to `part.N.parquet` (Dask's names) in the
    /// staging folder of `staged`. Appending needs the columns and types
    /// of the parts already there, as Dask's `append`.
    pub fn to_parquet(&self, ctx: &Ctx, staged: &mut Staged) -> Result<(LayerRef, Vec<Key>), FrameError> {
        if let Some(old) = staged.appending_to() {
            let old = old.display().to_string();
            let (schema, _) = crate::frame::parquet::inspect(&old)?;
            if schema != *self.schema {
                let typed = |s: &Schema| {
                    s.cols.iter().map(|(n, t)| format!("{n}: {}", t.name())).collect::<Vec<_>>().join(", ")
                };
                return Err(FrameError::Invalid(format!(
                    "to_parquet: cannot append: {old} has columns ({}), this frame ({})",
                    typed(&schema),
                    typed(&self.schema)
                )));
            }
        }
        self.write_files(ctx, staged, "to_parquet", Sink::WriteParquet)
    }

    /// One task per partition writing its part into the staging folder;
    /// refused when the frame reads a file inside the target.
    fn write_files(
        &self,
        ctx: &Ctx,
        staged: &mut Staged,
        label: &str,
        sink: impl Fn(Arc<str>) -> Sink,
    ) -> Result<(LayerRef, Vec<Key>), FrameError> {
        let paths = staged.part_paths(self.parts.len() as u64);
        let all: Vec<usize> = (0..self.parts.len()).collect();
        let extra = staged.path().display().to_string();
        let (layer, keys) = self.run_layer_each(ctx, label, &extra, &all, &[], &|i| {
            sink(Arc::from(paths.get(i).map(|p| p.display().to_string()).unwrap_or_default()))
        });
        staged.refuse_inputs(files_read(std::slice::from_ref(&layer)).iter().map(String::as_str))?;
        Ok((layer, keys))
    }
}

impl crate::collections::Collection for DataFrame {
    fn partitions(&self) -> (LayerRef, Vec<Key>) {
        DataFrame::partitions(self, &Ctx::default())
    }

    fn finalize(&self) -> (LayerRef, Key) {
        DataFrame::finalize(self)
    }

    /// Same columns, rows and identities: Series of this frame still fit
    /// the persisted one, and known divisions stay known.
    fn persisted(&self, keys: Vec<Key>, futures: Vec<crate::client::Future>) -> DataFrame {
        let layer = crate::collections::held_layer(format!("persisted-{}", self.token), futures);
        DataFrame {
            parts: Arc::new(keys.into_iter().map(Part::Key).collect()),
            deps: vec![layer],
            csv: None,
            source_schema: self.schema.clone(),
            stages: Arc::new(Vec::new()),
            ..self.clone()
        }
    }
}

impl crate::collections::Collection for Series {
    fn partitions(&self) -> (LayerRef, Vec<Key>) {
        self.to_frame().partitions(&Ctx::default())
    }

    fn finalize(&self) -> (LayerRef, Key) {
        self.to_frame().finalize()
    }

    fn persisted(&self, keys: Vec<Key>, futures: Vec<crate::client::Future>) -> Series {
        let frame = self.to_frame().persisted(keys, futures);
        Series { frame, expr: Expr::Col(self.name.clone()), name: self.name.clone(), dtype: self.dtype }
    }
}

/// What `assign` puts in a column.
#[derive(Clone, Debug)]
pub enum Assigned {
    Series(Series),
    Scalar(Value),
}

#[cfg(test)]
mod tests {
    use super::super::read::from_columns;
    use super::*;
    use crate::frame::expr::BinOp;

    fn small() -> DataFrame {
        let schema = Schema::new(vec![
            ("k".into(), DType::Str),
            ("x".into(), DType::Int64),
            ("y".into(), DType::Float64),
        ]);
        let cols = vec![
            vec![Value::str("a"), Value::str("b"), Value::str("a")],
            vec![Value::Int(1), Value::Int(2), Value::Unit],
            vec![Value::Float(0.5), Value::Float(1.5), Value::Float(2.5)],
        ];
        from_columns(&Ctx::default(), schema, cols, 2).expect("frame")
    }

    #[test]
    fn schema_follows_the_stages() {
        let df = small();
        let z = df.column("x").expect("x").scalar(BinOp::Mul, Value::Float(2.0), false).expect("mul");
        let df2 = df.assign(vec![("z".into(), Assigned::Series(z))]).expect("assign");
        assert_eq!(df2.schema.get("z"), Some(DType::Float64));
        let df3 = df2.rename(vec![("x".into(), "xx".into())]).expect("rename");
        // A Series of the frame before the rename still fits: same rows, same values.
        let m = df.column("x").expect("x").scalar(BinOp::Gt, Value::Int(1), false).expect("gt");
        let f = df3.filter(&m).expect("filter");
        assert!(matches!(f.stages.last(), Some(Stage::Filter(e)) if format!("{e:?}").contains("xx")));
        // After a filter the rows differ.
        let e = f.filter(&m).expect_err("other rows");
        assert!(e.to_string().contains("does not have this frame's rows"), "{e}");
        let e = df.column("nope").expect_err("unknown");
        assert!(matches!(&e, FrameError::UnknownColumn { column, .. } if column == "nope"), "{e:?}");
        assert_eq!(e.to_string(), "unknown column \"nope\" (columns: k, x, y)");
        let e = df.project(&["k".to_string(), "zz".to_string()]).expect_err("unknown");
        assert!(matches!(&e, FrameError::UnknownColumn { column, .. } if column == "zz"), "{e:?}");
        let e = df.column("x").expect("x").scalar(BinOp::Add, Value::str("s"), false).expect_err("type");
        assert!(matches!(&e, FrameError::DType(_)), "{e:?}");
    }

    #[test]
    fn projections_reach_the_source() {
        let df = small();
        let s = df.column("y").expect("y");
        let f = s.to_frame();
        assert_eq!(f.pushdown(f.sink_needs(&Sink::Stats("y".into()))), Some(vec!["y".to_string()]));
        let g = df.dropna(Some(vec!["x".into()])).expect("dropna");
        assert_eq!(g.pushdown(["y".to_string()].into()), Some(vec!["x".to_string(), "y".to_string()]));
    }
}
