//! Frame operations that move rows between partitions: `shuffle(on)`,
//! groupby with `split_out`, `merge`, `sort_values`, `set_index`,
//! `repartition`, and the tree-shaped `drop_duplicates` and `nlargest`.
//! Every row move goes through the one disk-backed shuffle of
//! `crate::frame::shuffle`: split tasks (fused with the partition's read
//! and stages) write pieces, collect tasks gather one output each.

use std::sync::Arc;

use super::dataframe::{DataFrame, Divisions, Series, block};
use crate::collections::array::Ctx;
use crate::frame::dtype::{DType, Schema};
use crate::frame::error::FrameError;
use crate::frame::group::GroupSpec;
use crate::frame::op::{DUPLICATED, Finish, FrameOp, Keep, Sink, Then};
use crate::frame::rolling::{RollAgg, Window};
use crate::frame::shuffle::{JoinHow, JoinSpec, Partitioner, ShuffleSpec};
use crate::graph::layer::{Layer, LayerRef};
use crate::graph::task::Task;
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::{Arg, Func, Op};
use crate::runner::Udf;

/// A side of a join with at most this many partitions is sent whole to
/// every partition of the other side (a broadcast join) instead of both
/// sides being shuffled.
pub const BROADCAST_PARTS: usize = 4;

/// Sample points per partition for sort boundaries.
const SAMPLE_POINTS: usize = 256;

pub(super) fn invalid(s: impl Into<String>) -> FrameError {
    FrameError::Invalid(s.into())
}

pub(super) fn task(ctx: &Ctx, key: Key, op: FrameOp, args: Vec<Arg>, deps: Vec<Key>) -> Task {
    let mut t = Task::new(key, Op::Call { func: Func::Frame(Arc::new(op)), args }, deps);
    t.annotations = ctx.annotations.clone();
    t
}

pub(super) fn deps_args(n: usize) -> Vec<Arg> {
    (0..n).map(|i| Arg::Dep(i as u32)).collect()
}

/// What a shuffle makes: rows moved into `outputs` partitions by `by`,
/// each output then becoming `then`, a frame of `schema`. `bounds` is a
/// range shuffle's divisions task.
struct Plan {
    by: Partitioner,
    outputs: usize,
    bounds: Option<(LayerRef, Key)>,
    then: Then,
    schema: Schema,
}

impl DataFrame {
    fn shuffled(&self, ctx: &Ctx, label: &'static str, plan: Plan) -> DataFrame {
        let Plan { by, outputs, bounds, then, schema: out_schema } = plan;
        let mut t = Tokenizer::new();
        t.str(&self.token).str(label).serde(&by).serde(&then).u64(outputs as u64);
        if let Some((_, k)) = &bounds {
            t.key(k);
        }
        let token = t.finish();
        let spec = Arc::new(ShuffleSpec::new(&token, outputs as u32, by));
        let all: Vec<usize> = (0..self.npartitions()).collect();
        let more: Vec<(LayerRef, Key)> = bounds.into_iter().collect();
        let (split_layer, splits) = self.run_layer_each(ctx, "shuffle-split", &token, &all, &more, &|i| {
            Sink::Split(spec.clone(), i as u32)
        });
        let name: Arc<str> = Arc::from(format!("{label}-{token}"));
        let schema = Arc::new(out_schema.clone());
        let mut tasks = Vec::with_capacity(outputs);
        let mut keys = Vec::with_capacity(outputs);
        for j in 0..outputs {
            let key = block(&name, j);
            let op = FrameOp::Collect {
                spec: spec.clone(),
                out: j as u32,
                schema: schema.clone(),
                then: then.clone(),
            };
            tasks.push(task(ctx, key.clone(), op, deps_args(splits.len()), splits.clone()));
            keys.push(key);
        }
        DataFrame::of_keys(Layer::new(name, tasks, vec![split_layer]), keys, out_schema, label)
            .inheriting(&[self])
    }

    /// `shuffle(on)`: rows with equal values of `on` in one partition.
    pub fn shuffle(
        &self,
        ctx: &Ctx,
        on: &[String],
        npartitions: Option<usize>,
    ) -> Result<DataFrame, FrameError> {
        self.check_columns(on)?;
        if on.is_empty() {
            return Err(invalid("shuffle needs at least one column"));
        }
        let n = npartitions.unwrap_or(self.npartitions()).max(1);
        super::dataframe::check_npartitions("shuffle", n, self.npartitions())?;
        Ok(self.shuffled(
            ctx,
            "shuffle",
            Plan {
                by: Partitioner::Hash(on.to_vec()),
                outputs: n,
                bounds: None,
                then: Then::Rows,
                schema: self.schema.as_ref().clone(),
            },
        ))
    }

    /// `groupby(by).agg(..)` with `split_out` partitions: partials per
    /// partition, hash-shuffled by key, merged and finished per output.
    /// Each output is sorted by key; the outputs are not.
    pub(crate) fn groupby_split(
        &self,
        ctx: &Ctx,
        spec: Arc<GroupSpec>,
        schema: Schema,
        split_out: usize,
    ) -> DataFrame {
        let all: Vec<usize> = (0..self.npartitions()).collect();
        let (layer, keys) = self.run_layer_each(
            ctx,
            "groupby-partial",
            &Tokenizer::new().serde(&spec).finish(),
            &all,
            &[],
            &|_| Sink::Group(spec.clone()),
        );
        let key_schema = Schema::new(spec.by.iter().map(|b| (b.clone(), DType::Str)).collect());
        let partials = DataFrame::of_keys(layer, keys, key_schema, "groupby-partial");
        partials.shuffled(
            ctx,
            "groupby-agg",
            Plan {
                by: Partitioner::Hash(spec.by.clone()),
                outputs: split_out,
                bounds: None,
                then: Then::Group(spec),
                schema,
            },
        )
    }

    /// `sort_values(by, ascending)`: divisions from sampled quantiles of
    /// the first column, a range shuffle, a stable sort per output.
    pub fn sort_values(&self, ctx: &Ctx, by: &[String], ascending: &[bool]) -> Result<DataFrame, FrameError> {
        if by.is_empty() {
            return Err(invalid("sort_values needs at least one column"));
        }
        self.check_columns(by)?;
        if ascending.len() != by.len() {
            return Err(invalid(format!(
                "sort_values: {} ascending flags for {} columns",
                ascending.len(),
                by.len()
            )));
        }
        let descending: Vec<bool> = ascending.iter().map(|a| !a).collect();
        let then = Then::Sort { by: by.to_vec(), descending: descending.clone() };
        let schema = self.schema.as_ref().clone();
        if self.npartitions() == 1 {
            return Ok(self.shuffled(
                ctx,
                "sort_values",
                Plan { by: Partitioner::Hash(vec![]), outputs: 1, bounds: None, then, schema },
            ));
        }
        let bounds = self.divisions_task(ctx, &by[0]);
        let by0 = Partitioner::Range { on: by[0].clone(), descending: descending[0] };
        Ok(self.shuffled(
            ctx,
            "sort_values",
            Plan { by: by0, outputs: self.npartitions(), bounds: Some(bounds), then, schema },
        ))
    }

    /// The divisions of `on` for as many outputs as this frame has
    /// partitions: a tree over per-partition samples.
    pub(crate) fn divisions_task(&self, ctx: &Ctx, on: &str) -> (LayerRef, Key) {
        let n = self.npartitions();
        let k = SAMPLE_POINTS.max(4 * n).min(4096);
        self.tree(
            ctx,
            "divisions",
            Sink::Sample { on: on.to_string(), k },
            Finish::Divisions { on: on.to_string(), outputs: n },
        )
    }

    /// `set_index(col)`: sorted by `col`, which becomes the first column
    /// (a brisk frame has no hidden index), with known divisions.
    pub fn set_index(&self, ctx: &Ctx, col: &str) -> Result<DataFrame, FrameError> {
        let sorted = self.sort_values(ctx, &[col.to_string()], &[true])?;
        let mut order = vec![col.to_string()];
        order.extend(self.schema.names().filter(|n| *n != col).map(String::from));
        let mut f = sorted.project(&order)?;
        f.label = "set_index";
        // The same task the sort's split tasks read (tokens are deterministic).
        let token = f.col_token(col).cloned().unwrap_or_default();
        f.divisions = Some(Divisions { task: self.divisions_task(ctx, col), on: col.to_string(), token });
        Ok(f)
    }

    /// `repartition(npartitions)`: neighbours stacked, or partitions cut
    /// into row slices; row order is kept.
    pub fn repartition(&self, ctx: &Ctx, n: usize) -> Result<DataFrame, FrameError> {
        if n == 0 {
            return Err(invalid("repartition: npartitions must be at least 1"));
        }
        super::dataframe::check_npartitions("repartition", n, self.npartitions())?;
        if n > super::dataframe::MAX_PARTITIONS {
            return Err(invalid(format!(
                "repartition: at most {} partitions",
                super::dataframe::MAX_PARTITIONS
            )));
        }
        let have = self.npartitions();
        if n == have {
            return Ok(self.clone());
        }
        let (layer, parts) = self.partitions(ctx);
        let name: Arc<str> =
            Arc::from(Tokenizer::new().str(&self.token).str("repartition").u64(n as u64).name("repartition"));
        let mut tasks = Vec::new();
        let mut keys = Vec::new();
        if n < have {
            for j in 0..n {
                let group = parts[j * have / n..(j + 1) * have / n].to_vec();
                let key = block(&name, j);
                tasks.push(task(
                    ctx,
                    key.clone(),
                    FrameOp::Combine(Sink::Frame),
                    deps_args(group.len()),
                    group,
                ));
                keys.push(key);
            }
        } else {
            for (i, p) in parts.iter().enumerate() {
                let of = (i + 1) * n / have - i * n / have;
                for part in 0..of {
                    let key = block(&name, keys.len());
                    let op = FrameOp::Slice { part: part as u32, of: of as u32 };
                    tasks.push(task(ctx, key.clone(), op, vec![Arg::Dep(0)], vec![p.clone()]));
                    keys.push(key);
                }
            }
        }
        let mut f = DataFrame::of_keys(
            Layer::new(name, tasks, vec![layer]),
            keys,
            self.schema.as_ref().clone(),
            "repartition",
        );
        f.col_tokens = self.col_tokens.clone();
        f.categories = self.categories.clone();
        f.rows = self.rows.clone();
        Ok(f)
    }

    /// `drop_duplicates(subset)`: the first row of each distinct value of
    /// `subset` (all columns when `None`), in order, as one partition.
    pub fn drop_duplicates(
        &self,
        ctx: &Ctx,
        subset: Option<Vec<String>>,
        keep: Keep,
    ) -> Result<DataFrame, FrameError> {
        if let Some(s) = &subset {
            self.check_columns(s)?;
            if s.is_empty() {
                return Err(invalid("drop_duplicates: subset is empty"));
            }
        }
        if self.schema.get(DUPLICATED).is_some() {
            return Err(invalid(format!("drop_duplicates: a column may not be named {DUPLICATED}")));
        }
        let fin = if keep == Keep::Unique { Finish::Singles } else { Finish::Unique };
        let (layer, key) = self.tree(ctx, "drop_duplicates", Sink::Distinct { subset, keep }, fin);
        Ok(DataFrame::of_keys(layer, vec![key], self.schema.as_ref().clone(), "drop_duplicates")
            .inheriting(&[self]))
    }

    /// `nlargest(n, col)` / `nsmallest(n, col)`: one partition, in order.
    pub fn top(&self, ctx: &Ctx, n: usize, on: &str, largest: bool) -> Result<DataFrame, FrameError> {
        let t = self.schema.get(on).ok_or_else(|| FrameError::UnknownColumn {
            column: on.to_string(),
            columns: self.schema.listing(),
        })?;
        if !(t.is_numeric() || t == DType::Datetime) {
            let f = if largest { "nlargest" } else { "nsmallest" };
            return Err(invalid(format!("{f}: column \"{on}\" is {t}, not numeric")));
        }
        let sink = Sink::Top { on: on.to_string(), n, largest };
        let fin = Finish::Top { on: on.to_string(), n, largest };
        let label = if largest { "nlargest" } else { "nsmallest" };
        let (layer, key) = self.tree(ctx, label, sink, fin);
        Ok(DataFrame::of_keys(layer, vec![key], self.schema.as_ref().clone(), label).inheriting(&[self]))
    }
}

impl DataFrame {
    /// `rolling(window).agg()` over the numeric columns: each partition
    /// with the `window - 1` rows before it (gathered across as many
    /// partitions as it takes), as Dask's `map_overlap`.
    pub fn rolling(&self, ctx: &Ctx, win: Window, agg: RollAgg) -> Result<DataFrame, FrameError> {
        self.windowed(ctx, win, agg.name(), |window, columns| FrameOp::Rolling { window, agg, columns })
    }

    /// `rolling(window).apply(f)`: the shipped closure on every window.
    pub fn rolling_apply(
        &self,
        ctx: &Ctx,
        win: Window,
        udf: Arc<Udf>,
        token: &str,
    ) -> Result<DataFrame, FrameError> {
        let label = format!("apply-{token}");
        self.windowed(ctx, win, &label, |window, columns| FrameOp::RollingApply {
            udf: udf.clone(),
            window,
            columns,
        })
    }

    fn windowed(
        &self,
        ctx: &Ctx,
        win: Window,
        what: &str,
        op: impl Fn(Window, Vec<String>) -> FrameOp,
    ) -> Result<DataFrame, FrameError> {
        let window = win.window;
        if window == 0 {
            return Err(invalid("rolling: window must be at least 1"));
        }
        if let Some((n, t)) = self.schema.cols.iter().find(|(_, t)| !t.is_numeric()) {
            return Err(invalid(format!(
                "rolling: column \"{n}\" is {t}; select numeric columns first (df[[...]])"
            )));
        }
        let columns: Vec<String> = self.schema.names().map(String::from).collect();
        let (layer, parts) = self.partitions(ctx);
        let tok = Tokenizer::new().str(&self.token).str("rolling").serde(&win).str(what).finish();
        let tails: Arc<str> = Arc::from(format!("rolling-edge-{tok}"));
        let name: Arc<str> = Arc::from(format!("rolling-{tok}"));
        let mut edge_tasks = Vec::new();
        let mut tasks = Vec::new();
        let mut keys = Vec::new();
        let mut prev: Option<Key> = None;
        for (i, p) in parts.iter().enumerate() {
            let key = block(&name, i);
            let mut deps = vec![p.clone()];
            deps.extend(prev.clone());
            tasks.push(task(ctx, key.clone(), op(win, columns.clone()), deps_args(deps.len()), deps.clone()));
            keys.push(key);
            if window > 1 && i + 1 < parts.len() {
                // The rows before partition i + 1: the tail of the rows
                // before i followed by partition i.
                let edge = block(&tails, i);
                let mut deps = prev.clone().into_iter().collect::<Vec<_>>();
                deps.push(p.clone());
                let op = FrameOp::Combine(Sink::Tail(window - 1));
                edge_tasks.push(task(ctx, edge.clone(), op, deps_args(deps.len()), deps));
                prev = Some(edge);
            }
        }
        let edges = Layer::new(tails, edge_tasks, vec![layer.clone()]);
        let schema = Schema::new(columns.iter().map(|c| (c.clone(), DType::Float64)).collect());
        let mut f = DataFrame::of_keys(Layer::new(name, tasks, vec![layer, edges]), keys, schema, "rolling");
        // Row for row the same rows, in the same partitions.
        f.rows = self.rows.clone();
        Ok(f)
    }
}

impl DataFrame {
    /// `describe()`: count, mean, std, min, quartiles and max of every
    /// numeric column, as one partition with a `statistic` column first.
    pub fn describe(&self, ctx: &Ctx) -> Result<DataFrame, FrameError> {
        let cols: Vec<(String, DType)> = self
            .schema
            .cols
            .iter()
            .filter(|(_, t)| matches!(t, DType::Int64 | DType::Float64))
            .cloned()
            .collect();
        if cols.is_empty() {
            return Err(invalid("describe: the frame has no numeric column"));
        }
        let names: Vec<String> = cols.iter().map(|(n, _)| n.clone()).collect();
        let (layer, key) = self.tree(ctx, "describe", Sink::Describe(names), Finish::Describe(cols.clone()));
        let mut schema = vec![("statistic".to_string(), DType::Str)];
        schema.extend(cols.into_iter().map(|(n, _)| (n, DType::Float64)));
        Ok(DataFrame::of_keys(layer, vec![key], Schema::new(schema), "describe"))
    }
}

impl DataFrame {
    /// `map_partitions(f)`: a shipped closure on every partition; its
    /// results are frames of `schema` (found by the caller, as Dask's meta).
    pub fn map_partitions(&self, ctx: &Ctx, udf: Arc<Udf>, token: &str, schema: Schema) -> DataFrame {
        let (layer, parts) = self.partitions(ctx);
        let name: Arc<str> =
            Arc::from(Tokenizer::new().str(&self.token).str(token).serde(&schema).name("map_partitions"));
        let schema_arc = Arc::new(schema.clone());
        let mut tasks = Vec::with_capacity(parts.len());
        let mut keys = Vec::with_capacity(parts.len());
        for (i, p) in parts.into_iter().enumerate() {
            let key = block(&name, i);
            let op = FrameOp::MapPartitions { udf: udf.clone(), schema: schema_arc.clone() };
            tasks.push(task(ctx, key.clone(), op, vec![Arg::Dep(0)], vec![p]));
            keys.push(key);
        }
        DataFrame::of_keys(Layer::new(name, tasks, vec![layer]), keys, schema, "map_partitions")
    }

    /// `groupby(by).apply(f)`: rows shuffled so each group is whole in one
    /// partition, then the closure on every group.
    pub fn groupby_apply(
        &self,
        ctx: &Ctx,
        by: &[String],
        udf: Arc<Udf>,
        token: &str,
        schema: Schema,
    ) -> Result<DataFrame, FrameError> {
        self.check_columns(by)?;
        let n = self.npartitions();
        let plan = Plan {
            by: Partitioner::Hash(by.to_vec()),
            outputs: n,
            bounds: None,
            then: Then::Rows,
            schema: self.schema.as_ref().clone(),
        };
        let shuffled = if n == 1 { self.clone() } else { self.shuffled(ctx, "groupby-shuffle", plan) };
        let (layer, parts) = shuffled.partitions(ctx);
        let name: Arc<str> = Arc::from(
            Tokenizer::new().str(&shuffled.token).str(token).serde(by).serde(&schema).name("apply"),
        );
        let schema_arc = Arc::new(schema.clone());
        let mut tasks = Vec::with_capacity(parts.len());
        let mut keys = Vec::with_capacity(parts.len());
        for (i, p) in parts.into_iter().enumerate() {
            let key = block(&name, i);
            let op = FrameOp::Apply { udf: udf.clone(), by: by.to_vec(), schema: schema_arc.clone() };
            tasks.push(task(ctx, key.clone(), op, vec![Arg::Dep(0)], vec![p]));
            keys.push(key);
        }
        Ok(DataFrame::of_keys(Layer::new(name, tasks, vec![layer]), keys, schema, "apply"))
    }
}

impl Series {
    /// `quantile(q)`: from per-partition samples (exact when partitions
    /// are no larger than the sample), as Dask's approximate quantiles.
    pub fn quantile(&self, ctx: &Ctx, qs: &[f64], list: bool) -> Result<(LayerRef, Key), FrameError> {
        if !matches!(self.dtype, DType::Int64 | DType::Float64) {
            return Err(invalid(format!(
                "quantile: Series \"{}\" is {}, not numeric",
                self.name, self.dtype
            )));
        }
        if let Some(q) = qs.iter().find(|q| !(0.0..=1.0).contains(*q)) {
            return Err(invalid(format!("quantile: q must be between 0 and 1, got {q}")));
        }
        let f = self.to_frame();
        let sink = Sink::Sample { on: self.name.clone(), k: crate::frame::quantile::POINTS };
        let fin = Finish::Quantile { on: self.name.clone(), qs: qs.to_vec(), list };
        Ok(f.tree(ctx, "quantile", sink, fin))
    }

    /// `s.nlargest(n)` / `s.nsmallest(n)`.
    pub fn top(&self, ctx: &Ctx, n: usize, largest: bool) -> Result<Series, FrameError> {
        let f = self.to_frame().top(ctx, n, &self.name, largest)?;
        f.column(&self.name)
    }
}

/// Checked arguments of `merge`.
#[derive(Clone, Debug)]
pub struct MergeArgs {
    pub how: JoinHow,
    pub left_on: Vec<String>,
    pub right_on: Vec<String>,
    /// pandas' `suffixes`.
    pub suffixes: (String, String),
}

/// `merge(left, right)`: a broadcast join when a side that may be
/// broadcast is small, a hash join of both sides shuffled otherwise.
pub fn merge(ctx: &Ctx, left: &DataFrame, right: &DataFrame, a: &MergeArgs) -> Result<DataFrame, FrameError> {
    let (spec, schema) = join_spec(left, right, a)?;
    let spec = Arc::new(spec);
    let (nl, nr) = (left.npartitions(), right.npartitions());
    let mut t = Tokenizer::new();
    t.str(&left.token).str(&right.token).serde(&spec);
    let token = t.finish();
    let name: Arc<str> = Arc::from(format!("merge-{token}"));
    let mut tasks = Vec::new();
    let mut keys = Vec::new();
    let broadcast_right =
        matches!(a.how, JoinHow::Inner | JoinHow::Left) && nr <= BROADCAST_PARTS && nr <= nl;
    let broadcast_left = matches!(a.how, JoinHow::Inner | JoinHow::Right) && nl <= BROADCAST_PARTS && nl < nr;
    let layers = if broadcast_right || broadcast_left {
        let (big, small) = if broadcast_right { (left, right) } else { (right, left) };
        let (big_layer, big_keys) = big.partitions(ctx);
        let (small_layer, small_key) = small.finalize();
        for (i, k) in big_keys.into_iter().enumerate() {
            let key = block(&name, i);
            let deps = if broadcast_right { vec![k, small_key.clone()] } else { vec![small_key.clone(), k] };
            tasks.push(task(ctx, key.clone(), FrameOp::Join(spec.clone()), deps_args(2), deps));
            keys.push(key);
        }
        vec![big_layer, small_layer]
    } else {
        let n = nl.max(nr);
        let l = left.shuffled(
            ctx,
            "merge-left",
            Plan {
                by: Partitioner::Hash(a.left_on.clone()),
                outputs: n,
                bounds: None,
                then: Then::Rows,
                schema: left.schema.as_ref().clone(),
            },
        );
        let r = right.shuffled(
            ctx,
            "merge-right",
            Plan {
                by: Partitioner::Hash(a.right_on.clone()),
                outputs: n,
                bounds: None,
                then: Then::Rows,
                schema: right.schema.as_ref().clone(),
            },
        );
        let (ll, lk) = l.partitions(ctx);
        let (rl, rk) = r.partitions(ctx);
        for (j, (lk, rk)) in lk.into_iter().zip(rk).enumerate() {
            let key = block(&name, j);
            tasks.push(task(ctx, key.clone(), FrameOp::Join(spec.clone()), deps_args(2), vec![lk, rk]));
            keys.push(key);
        }
        vec![ll, rl]
    };
    Ok(DataFrame::of_keys(Layer::new(name, tasks, layers), keys, schema, "merge").inheriting(&[left, right]))
}

/// The join's renames, casts and result schema, checked before anything runs.
pub(super) fn join_spec(
    left: &DataFrame,
    right: &DataFrame,
    a: &MergeArgs,
) -> Result<(JoinSpec, Schema), FrameError> {
    if a.left_on.is_empty() || a.left_on.len() != a.right_on.len() {
        return Err(invalid(format!(
            "merge: {} left key(s) and {} right key(s); give `on`, or `left_on` and `right_on` of the same length",
            a.left_on.len(),
            a.right_on.len()
        )));
    }
    let side = |f: &DataFrame, keys: &[String], which: &str| -> Result<Vec<DType>, FrameError> {
        keys.iter()
            .map(|k| {
                f.schema.get(k).ok_or_else(|| {
                    invalid(format!(
                        "merge: the {which} frame has no column \"{k}\" (columns: {})",
                        f.schema.listing()
                    ))
                })
            })
            .collect()
    };
    let lt = side(left, &a.left_on, "left")?;
    let rt = side(right, &a.right_on, "right")?;
    let mut left_cast = Vec::new();
    let mut right_cast = Vec::new();
    let mut key_types = Vec::new();
    for ((lk, l), (rk, r)) in a.left_on.iter().zip(&lt).zip(a.right_on.iter().zip(&rt)) {
        let t = match (l, r) {
            (x, y) if x == y => *x,
            // A category's values are strings: the key is a string column.
            (x, y) if x.values() == y.values() => x.values(),
            (DType::Int64, DType::Float64) => {
                left_cast.push(lk.clone());
                DType::Float64
            }
            (DType::Float64, DType::Int64) => {
                right_cast.push(rk.clone());
                DType::Float64
            }
            _ => {
                return Err(invalid(format!(
                    "merge: the key \"{lk}\" is {l} on the left but \"{rk}\" is {r} on the right"
                )));
            }
        };
        key_types.push(t);
    }
    let same = a.left_on == a.right_on;
    let lcols: Vec<(String, DType)> = left.schema.cols.clone();
    let rcols: Vec<(String, DType)> =
        right.schema.cols.iter().filter(|(n, _)| !(same && a.right_on.contains(n))).cloned().collect();
    let is_key_l = |n: &str| same && a.left_on.iter().any(|k| k == n);
    let mut left_rename = Vec::new();
    let mut right_rename = Vec::new();
    for (n, _) in &lcols {
        if !is_key_l(n) && rcols.iter().any(|(m, _)| m == n) {
            left_rename.push((n.clone(), format!("{n}{}", a.suffixes.0)));
            right_rename.push((n.clone(), format!("{n}{}", a.suffixes.1)));
        }
    }
    let renamed = |n: &str, rn: &[(String, String)]| {
        rn.iter().find(|(o, _)| o == n).map_or(n.to_string(), |(_, x)| x.clone())
    };
    let typed = |n: &str, t: DType, keys: &[String]| match keys.iter().position(|k| k == n) {
        Some(i) => key_types[i],
        None => t,
    };
    let mut out: Vec<(String, DType)> =
        lcols.iter().map(|(n, t)| (renamed(n, &left_rename), typed(n, *t, &a.left_on))).collect();
    out.extend(rcols.iter().map(|(n, t)| (renamed(n, &right_rename), typed(n, *t, &a.right_on))));
    let mut seen = std::collections::BTreeSet::new();
    if let Some((d, _)) = out.iter().find(|(n, _)| !seen.insert(n.clone())) {
        return Err(invalid(format!(
            "merge: two result columns would be named \"{d}\"; choose other suffixes"
        )));
    }
    let spec = JoinSpec {
        how: a.how,
        left_on: a.left_on.iter().map(|k| renamed(k, &left_rename)).collect(),
        right_on: a.right_on.iter().map(|k| renamed(k, &right_rename)).collect(),
        left_rename,
        right_rename,
        left_cast,
        right_cast,
        columns: out.iter().map(|(n, _)| n.clone()).collect(),
    };
    Ok((spec, Schema::new(out)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{CancelToken, Client};
    use crate::diagnostics::Event;
    use crate::frame::red::Red;
    use crate::graph::layer::materialize;
    use crate::local::{LocalConfig, Runtime};
    use crate::runner::NoUdfs;
    use crate::value::Value;
    use std::collections::BTreeSet;

    /// A shuffle whose graph fails half-way (a bad row in the last block)
    /// leaves no folder: the finished splits' pieces go with the graph's
    /// tasks, not at the process's exit.
    #[test]
    fn a_failed_shuffle_leaves_no_pieces() {
        let dir = std::env::temp_dir().join(format!("brisk-shuffle-fail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("data.csv");
        let mut text = String::from("k,x\n");
        // Past the 256 kB the column types are inferred from.
        for i in 0..40_000u64 {
            text += &format!("{},{}.5\n", i * 7_919 % 40_000, i % 977);
        }
        text += "not a number,1.5\n";
        std::fs::write(&path, &text).expect("write");
        let paths = vec![path.display().to_string()];
        let df = super::super::read::read_csv(&paths, Some(text.len() as u64 / 20), b',', true, &[], None)
            .expect("frame");
        let ctx = Ctx::default();
        let shuffled = df.shuffle(&ctx, &["k".to_string()], None).expect("shuffle");
        let (layer, key) = shuffled.column("k").expect("k").reduce(&ctx, Red::Min).expect("min");
        let graph = materialize(std::slice::from_ref(&layer));
        let folders: BTreeSet<String> = graph
            .tasks()
            .iter()
            .flat_map(|t| t.op.shuffle_pieces())
            .map(|p| p.dir().display().to_string())
            .collect();
        assert_eq!(folders.len(), 1, "one shuffle");
        let rt = Runtime::new(LocalConfig { threads: 2, ..LocalConfig::default() }, Arc::new(NoUdfs));
        let events = rt.subscribe(1 << 16);
        let err = rt.compute(graph, &[key], &CancelToken::new()).expect_err("the bad row fails the graph");
        assert!(err.to_string().contains("not a number") || err.to_string().contains("line"), "{err}");
        // Splits that finished wrote pieces, so the folder was there.
        let splits_done = events
            .try_iter()
            .filter(
                |e| matches!(e, Event::TaskRan { key, ok: true, .. } if key.to_string().contains("split")),
            )
            .count();
        assert!(splits_done > 0, "no split finished before the failure");
        // A split still running when the graph failed holds its folder
        // until it ends; then it goes too.
        let gone = |f: &str| {
            (0..500).any(|_| {
                !std::path::Path::new(f).exists() || {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    false
                }
            })
        };
        for f in &folders {
            assert!(gone(f), "{f} is left after the failed graph");
        }
        drop(rt);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A sort of data many times larger than one partition holds at most a
    /// few partitions' worth of results in memory at any time: the pieces
    /// wait on disk, not in the scheduler.
    #[test]
    fn a_sort_keeps_memory_bounded_by_partitions_not_data() {
        let dir = std::env::temp_dir().join(format!("brisk-shuffle-mem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("data.csv");
        let mut text = String::from("k,x,pad\n");
        let rows = 60_000u64;
        for i in 0..rows {
            // A scrambled key, so every partition sends rows everywhere.
            let k = (i * 7_919) % rows;
            text += &format!("{k},{}.5,{}\n", i % 977, "p".repeat(40));
        }
        std::fs::write(&path, &text).expect("write");
        let paths = vec![path.display().to_string()];
        let blocksize = text.len() as u64 / 30;
        let df = super::super::read::read_csv(&paths, Some(blocksize), b',', true, &[], None).expect("frame");
        assert!(df.npartitions() >= 30);
        let ctx = Ctx::default();
        let sorted = df.sort_values(&ctx, &["k".to_string()], &[true]).expect("sort");
        // Each sorted partition's first key: a reduction that keeps no partition.
        let (layer, key) = sorted.column("k").expect("k").reduce(&ctx, Red::Min).expect("min");
        let rt = Runtime::new(LocalConfig { threads: 2, ..LocalConfig::default() }, Arc::new(NoUdfs));
        let events = rt.subscribe(1 << 16);
        let out = rt
            .compute(materialize(std::slice::from_ref(&layer)), &[key], &CancelToken::new())
            .expect("compute");
        assert_eq!(out, vec![Value::Int(0)]);
        let peak = events
            .try_iter()
            .filter_map(|e| if let Event::Memory { bytes } = e { Some(bytes) } else { None })
            .max()
            .unwrap_or(0);
        let data = text.len() as u64;
        // Frames in memory are about the CSV's size; all of them would be
        // about `data`. Two threads hold a few partitions at a time.
        eprintln!("peak {peak} B of results for {data} B of CSV");
        assert!(peak > 0, "memory was measured");
        assert!(peak < data / 3, "peak {peak} B of results in memory for {data} B of data");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
