//! DataFrame operations that move rows between partitions, in Rhai:
//! `merge`/`join`, `sort_values`, `set_index` and its `divisions`,
//! `shuffle`, `repartition`, `drop_duplicates`, `nlargest`/`nsmallest`,
//! `tail`, the shifts across partition edges (`shift`, `diff`),
//! `concat` and the row count (`len`, `shape`).

use std::sync::Arc;

use brisk_engine::collections::frame::DataFrame;
use brisk_engine::collections::frame::{self as cf, MergeArgs};
use brisk_engine::frame::op::Keep;
use brisk_engine::frame::partition::Frame;
use brisk_engine::frame::shuffle::JoinHow;
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, Map};

use super::args::{ctx, positive};
use super::args::{options, shipped};
use super::dataframe::{compute_one, dtype_of, err, frame_value, strings};
use super::fndoc::{FnDoc, doc};
use crate::convert::to_dynamic;
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::{Delayed, GroupBy, LazyArray, LazyFrame, LazySeries, LocalFrame, LocalSeries};
use brisk_engine::array::Chunk;
use brisk_engine::frame::dtype::Schema;
use brisk_engine::frame::udf;
use rhai::{FnPtr, NativeCallContext};

type Res<T> = Result<T, Box<EvalAltResult>>;

fn shift_frame(state: &SessionState, f: &DataFrame, periods: i64, diff: bool) -> Res<LazyFrame> {
    Ok(LazyFrame { f: f.shift(&ctx(state), periods, diff).map_err(err)? })
}

fn shift_series(state: &SessionState, s: &LazySeries, periods: i64, diff: bool) -> Res<LazySeries> {
    let f = s.s.to_frame().shift(&ctx(state), periods, diff).map_err(err)?;
    Ok(LazySeries { s: f.column(&s.s.name).map_err(err)? })
}

/// `len(df)`: each partition's rows counted by a small task, summed.
fn frame_len(state: &SessionState, f: &DataFrame) -> Res<i64> {
    let lengths = cf::to_array::lengths(&ctx(state), f);
    let d = compute_one(state, Dynamic::from(LazyArray { a: lengths }))?;
    let c =
        d.read_lock::<Chunk>().ok_or_else(|| runtime("len: the partitions' lengths were not computed"))?;
    Ok(c.cast::<f64>().iter().sum::<f64>() as i64)
}

fn merge(
    state: &SessionState,
    l: &DataFrame,
    r: &DataFrame,
    m: Option<Map>,
    function: &str,
    how: &str,
) -> Res<LazyFrame> {
    let m = options(m, function, &["on", "left_on", "right_on", "how", "suffixes"])?;
    let how_s = match m.get("how") {
        Some(d) => {
            d.clone().into_string().map_err(|_| runtime(format!("{function}: how must be a string")))?
        }
        None => how.to_string(),
    };
    let how = JoinHow::parse(&how_s).ok_or_else(|| {
        runtime(format!(
            "{function}: how must be \"inner\", \"left\", \"right\" or \"outer\", not \"{how_s}\""
        ))
    })?;
    let get = |k: &str| m.get(k).map(|d| strings(d, &format!("{function}: {k}"))).transpose();
    let (left_on, right_on) = match (get("on")?, get("left_on")?, get("right_on")?) {
        (Some(on), None, None) => (on.clone(), on),
        (None, Some(l), Some(r)) => (l, r),
        (None, None, None) => {
            // pandas: the columns both frames have.
            let common: Vec<String> =
                l.schema.names().filter(|n| r.schema.contains(n)).map(String::from).collect();
            if common.is_empty() {
                return Err(runtime(format!(
                    "{function}: the frames have no column in common; give on, or left_on and right_on"
                )));
            }
            (common.clone(), common)
        }
        _ => {
            return Err(runtime(format!("{function}: give either on, or both left_on and right_on")));
        }
    };
    let suffixes = match m.get("suffixes") {
        Some(d) => {
            let s = strings(d, &format!("{function}: suffixes"))?;
            match <[String; 2]>::try_from(s) {
                Ok([a, b]) if a != b => (a, b),
                _ => return Err(runtime(format!("{function}: suffixes must be two different strings"))),
            }
        }
        None => ("_x".to_string(), "_y".to_string()),
    };
    let args = MergeArgs { how, left_on, right_on, suffixes };
    Ok(LazyFrame { f: cf::merge(&ctx(state), l, r, &args).map_err(err)? })
}

fn ascending(m: Option<Map>, n: usize) -> Res<Vec<bool>> {
    let m = options(m, "sort_values", &["ascending"])?;
    let Some(d) = m.get("ascending") else { return Ok(vec![true; n]) };
    if let Ok(b) = d.as_bool() {
        return Ok(vec![b; n]);
    }
    let a = d
        .read_lock::<RArray>()
        .ok_or_else(|| runtime("sort_values: ascending must be a bool or an array of bools"))?
        .iter()
        .map(|x| {
            x.as_bool().map_err(|_| runtime("sort_values: ascending must be a bool or an array of bools"))
        })
        .collect::<Res<Vec<bool>>>()?;
    if a.len() != n {
        return Err(runtime(format!("sort_values: {} ascending flags for {n} columns", a.len())));
    }
    Ok(a)
}

fn count(n: i64, function: &str) -> Res<usize> {
    usize::try_from(n).map_err(|_| runtime(format!("{function}: n must be 0 or more, got {n}")))
}

/// The last `n` rows, reading partitions from the end until it has them.
fn tail(state: &SessionState, f: &DataFrame, n: i64) -> Res<Arc<Frame>> {
    let n = count(n, "tail")?;
    let mut got: Vec<Arc<Frame>> = Vec::new();
    let mut rows = 0;
    for i in (0..f.npartitions()).rev() {
        if rows >= n {
            break;
        }
        let (layer, key) = f.tail_of(i, n - rows);
        let d = compute_one(state, Dynamic::from(Delayed { layer, key }))?;
        let part = frame_value(&d).ok_or_else(|| runtime("tail: a partition did not give a frame"))?;
        rows += part.0.height();
        got.push(part);
    }
    got.reverse();
    Ok(Arc::new(Frame::stack(&got, &f.schema).map_err(err)?))
}

/// `df.melt(#{id_vars, value_vars, var_name, value_name})`.
fn melt(f: &LazyFrame, m: Option<Map>) -> Res<LazyFrame> {
    let m = options(m, "melt", &["id_vars", "value_vars", "var_name", "value_name"])?;
    let ids = match m.get("id_vars") {
        Some(d) => strings(d, "melt: id_vars")?,
        None => Vec::new(),
    };
    let values = m.get("value_vars").map(|d| strings(d, "melt: value_vars")).transpose()?;
    let name = |k: &str, default: &str| -> Res<String> {
        match m.get(k) {
            None => Ok(default.to_string()),
            Some(d) => d.clone().into_string().map_err(|_| runtime(format!("melt: {k} must be a string"))),
        }
    };
    let (var, value) = (name("var_name", "variable")?, name("value_name", "value")?);
    Ok(LazyFrame { f: f.f.melt(&ids, values.as_deref(), &var, &value).map_err(err)? })
}

fn divisions(state: &SessionState, f: &DataFrame) -> Res<RArray> {
    let Some((layer, key)) = f.divisions.clone().map(|d| d.task) else {
        return Ok(vec![Dynamic::UNIT; f.npartitions() + 1]);
    };
    let d = compute_one(state, Dynamic::from(Delayed { layer, key }))?;
    let frame = frame_value(&d).ok_or_else(|| runtime("divisions: the task did not give a frame"))?;
    let name = frame.column_names().into_iter().next().unwrap_or_default();
    Ok(brisk_engine::value::column_values(&frame.0, &name).iter().map(to_dynamic).collect())
}

/// The columns a closure's results have: `meta` when given (as Dask's
/// `meta`), else what the closure gives on `sample`, run here now.
fn meta_or_sample(
    cx: &NativeCallContext<'_>,
    f: &FnPtr,
    meta: Option<&Dynamic>,
    sample: impl FnOnce() -> Res<Option<Arc<Frame>>>,
    function: &str,
) -> Res<Schema> {
    if let Some(m) = meta {
        let m = m
            .read_lock::<Map>()
            .ok_or_else(|| runtime(format!("{function}: meta must be a map of column to dtype")))?;
        let cols = m
            .iter()
            .map(|(k, v)| Ok((k.to_string(), dtype_of(v, &format!("{function}: meta"))?)))
            .collect::<Res<Vec<_>>>()?;
        if cols.is_empty() {
            return Err(runtime(format!("{function}: meta names no column")));
        }
        return Ok(Schema::new(cols));
    }
    let Some(part) = sample()? else {
        return Err(runtime(format!(
            "{function}: there is no data to learn the result's columns from; give #{{meta: #{{column: dtype}}}}"
        )));
    };
    let got: Dynamic = f.call_within_context(cx, (Dynamic::from(LocalFrame(part)),))?;
    let v = crate::convert::to_value(&got, function)?;
    let schema = udf::infer_schema(&v).map_err(|e| runtime(format!("{function}: {e}")))?;
    if schema.cols.is_empty() {
        return Err(runtime(format!(
            "{function}: the closure gave no columns on the first partition; give #{{meta: #{{column: dtype}}}}"
        )));
    }
    Ok(schema)
}

/// Partition `i`, computed now.
fn partition(state: &SessionState, f: &DataFrame, i: usize) -> Res<Arc<Frame>> {
    let (layer, key) = f.head_of(i, usize::MAX);
    let d = compute_one(state, Dynamic::from(Delayed { layer, key }))?;
    frame_value(&d).ok_or_else(|| runtime("a partition did not give a frame"))
}

fn map_partitions(
    cx: &NativeCallContext<'_>,
    state: &SessionState,
    f: &DataFrame,
    fp: &FnPtr,
    m: Option<Map>,
) -> Res<LazyFrame> {
    let m = options(m, "map_partitions", &["meta"])?;
    let (u, token) = shipped(state, fp)?;
    let schema =
        meta_or_sample(cx, fp, m.get("meta"), || partition(state, f, 0).map(Some), "map_partitions")?;
    Ok(LazyFrame { f: f.map_partitions(&ctx(state), u, &token, schema) })
}

fn apply(
    cx: &NativeCallContext<'_>,
    state: &SessionState,
    g: &GroupBy,
    fp: &FnPtr,
    m: Option<Map>,
) -> Res<LazyFrame> {
    let m = options(m, "apply", &["meta"])?;
    let (u, token) = shipped(state, fp)?;
    let first_group = || -> Res<Option<Arc<Frame>>> {
        for i in 0..g.f.npartitions() {
            let part = partition(state, &g.f, i)?;
            let groups = udf::groups(&part.0, &g.by).map_err(|e| runtime(format!("apply: {e}")))?;
            if let Some(first) = groups.into_iter().next() {
                return Ok(Some(Arc::new(Frame(first))));
            }
        }
        Ok(None)
    };
    let mut schema = meta_or_sample(cx, fp, m.get("meta"), first_group, "apply")?;
    // Key columns the result lacks come first, as ordinary columns.
    let missing: Vec<(String, brisk_engine::frame::dtype::DType)> =
        g.by.iter()
            .filter(|k| !schema.contains(k))
            .map(|k| (k.clone(), g.f.schema.get(k).unwrap_or(brisk_engine::frame::dtype::DType::Str)))
            .collect();
    if !missing.is_empty() {
        let mut cols = missing;
        cols.extend(schema.cols);
        schema = Schema::new(cols);
    }
    Ok(LazyFrame { f: g.f.groupby_apply(&ctx(state), &g.by, u, &token, schema).map_err(err)? })
}

fn npartitions(m: Option<Map>, function: &str) -> Res<Option<usize>> {
    let m = options(m, function, &["npartitions"])?;
    m.get("npartitions").map(|d| positive(d, &format!("{function}: npartitions"))).transpose()
}

/// This area's entries of the API reference (`docs::all` chains the areas
/// in the order of the guide).
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "divisions",
        "df.divisions -> array",
        "The index boundaries of the partitions (`npartitions + 1` values): known after `set_index` (reading them computes the sampled quantiles) and through filters and new columns that leave the index column unchanged; `()` each otherwise.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]}, #{npartitions: 2});\ndf.set_index(\"x\").divisions",
    ),
    doc(
        "merge",
        "merge(left, right, #{on, left_on, right_on, how, suffixes}) -> DataFrame",
        "Join two frames as pandas' merge: `how` is inner (default), left, right or outer; keys named alike come out once, other shared names get `_x`/`_y`; missing keys match each other. A small side (at most 4 partitions) is broadcast, otherwise both sides are hash-shuffled.",
        "let a = from_columns(#{k: [\"a\", \"b\"], x: [1, 2]});\nlet b = from_columns(#{k: [\"a\", \"c\"], y: [10, 30]});\nmerge(a, b, #{on: \"k\", how: \"outer\"}).compute()",
    ),
    doc(
        "join",
        "df.join(other, #{on, how, ...}) -> DataFrame",
        "`merge` with `how` left by default (a brisk frame has no hidden index, so give `on`).",
        "let a = from_columns(#{k: [\"a\", \"b\"], x: [1, 2]});\na.join(from_columns(#{k: [\"a\"], y: [10]}), #{on: \"k\"}).compute()",
    ),
    doc(
        "sort_values",
        "df.sort_values(col_or_cols, #{ascending}) -> DataFrame",
        "Sorted rows, missing values last, ties in their original order: divisions from sampled quantiles of the first column, then a range shuffle. `ascending` is a bool or one per column.",
        "from_columns(#{x: [3, 1, (), 2]}, #{npartitions: 2}).sort_values(\"x\", #{ascending: false}).compute()",
    ),
    doc(
        "get_partition",
        "df.get_partition(i) -> DataFrame",
        "Partition `i` alone (negative from the end), as Dask's get_partition.",
        "from_columns(#{x: [1, 2, 3, 4]}, #{npartitions: 2}).get_partition(1).compute()",
    ),
    doc(
        "loc",
        "df.loc(value) / df.loc(lo, hi) -> DataFrame",
        "The rows whose index (the column `set_index` made) equals `value`, or lies in [lo, hi] (`()` for an open end), as pandas' .loc; the frame keeps its divisions. An error on a frame without an index.",
        "from_columns(#{k: [3, 1, 2], v: [\"c\", \"a\", \"b\"]}).set_index(\"k\").loc(2, ()).compute()",
    ),
    doc(
        "iloc",
        "df.iloc(cols) -> DataFrame",
        "The columns at these positions (a number or an array; negative from the end), as Dask's df.iloc[:, cols].",
        "from_columns([[\"a\", [1]], [\"b\", [2]], [\"c\", [3]]]).iloc([2, 0]).compute()",
    ),
    doc(
        "melt",
        "df.melt(#{id_vars, value_vars, var_name, value_name}) -> DataFrame",
        "Wide to long, as pandas' melt: for each value column (default: every column not in id_vars) the id columns, its name under `var_name` (\"variable\") and its values under `value_name` (\"value\"); int and float values meet as float. Partition by partition, as Dask's, so rows come grouped per partition.",
        "from_columns(#{id: [1, 2], a: [10, 20], b: [30, 40]}).melt(#{id_vars: [\"id\"]}).compute()",
    ),
    doc(
        "reset_index",
        "df.reset_index(#{drop}) -> DataFrame",
        "The frame without its index: the divisions set_index made are forgotten, the index column stays a column (or goes, with `drop: true`). brisk frames have no separate row labels, so a frame without an index comes back as it is.",
        "from_columns(#{k: [2, 1], v: [5, 6]}).set_index(\"k\").reset_index(#{drop: true}).compute()",
    ),
    doc(
        "set_index",
        "df.set_index(col) -> DataFrame",
        "Sorted by `col`, which becomes the first column (there is no hidden index), with known `divisions`.",
        "let df = from_columns(#{a: [3, 1, 2], b: [\"x\", \"y\", \"z\"]}, #{npartitions: 2});\ndf.set_index(\"b\").compute()",
    ),
    doc(
        "shuffle",
        "df.shuffle(col_or_cols, #{npartitions}) -> DataFrame",
        "Rows with equal values of the columns in one partition (a hash shuffle through files on disk, so memory stays bounded by the partition size).",
        "from_columns(#{k: [1, 2, 1, 2]}, #{npartitions: 2}).shuffle(\"k\").npartitions",
    ),
    doc(
        "repartition",
        "df.repartition(#{npartitions}) -> DataFrame",
        "The same rows in order, in `npartitions` partitions: neighbours stacked or partitions cut.",
        "from_columns(#{a: [1, 2, 3, 4]}, #{npartitions: 4}).repartition(#{npartitions: 2}).npartitions",
    ),
    doc(
        "drop_duplicates",
        "df.drop_duplicates(#{subset, keep}) -> DataFrame",
        "The first row (`keep: \"last\"`: the last; `keep: false`: none) of each distinct value of `subset` (all columns by default), in order.",
        "from_columns(#{a: [1, 1, 2], b: [\"x\", \"y\", \"x\"]}).drop_duplicates(#{subset: [\"a\"], keep: false}).compute()",
    ),
    doc(
        "nlargest",
        "s.nlargest(n) -> Series / df.nlargest(n, col) -> DataFrame",
        "The `n` largest values (rows), largest first; ties keep the earlier row; missing values are skipped.",
        "from_columns(#{x: [3, 1, 4, 1, 5]})[\"x\"].nlargest(2).compute()",
    ),
    doc(
        "nsmallest",
        "s.nsmallest(n) -> Series / df.nsmallest(n, col) -> DataFrame",
        "The `n` smallest values (rows), smallest first.",
        "let df = from_columns(#{x: [3, 1, 4], k: [\"a\", \"b\", \"c\"]});\ndf.nsmallest(2, \"x\").compute()",
    ),
    doc(
        "tail",
        "df.tail(n) -> LocalDataFrame",
        "The last `n` rows (5 by default), computed now, reading partitions from the end only as far as it needs.",
        "from_columns(#{a: [1, 2, 3, 4]}, #{npartitions: 2}).tail(3)",
    ),
    doc(
        "dt_year",
        "s.dt_year() -> Series",
        "The year of each datetime (as pandas' `dt.year`).",
        "let df = from_columns(#{t: [\"2024-02-29 10:00:00\"]}).astype(#{t: \"datetime64[ns]\"});\ndf[\"t\"].dt_year().compute()",
    ),
    doc(
        "dt_month",
        "s.dt_month() -> Series",
        "The month (1 to 12) of each datetime.",
        "let df = from_columns(#{t: [\"2024-02-29 10:00:00\"]}).astype(#{t: \"datetime64[ns]\"});\ndf[\"t\"].dt_month().compute()",
    ),
    doc(
        "dt_day",
        "s.dt_day() -> Series",
        "The day of the month of each datetime.",
        "let df = from_columns(#{t: [\"2024-02-29 10:00:00\"]}).astype(#{t: \"datetime64[ns]\"});\ndf[\"t\"].dt_day().compute()",
    ),
    doc(
        "shift",
        "df.shift(periods = 1) / s.shift(periods = 1) -> DataFrame / Series",
        "Values moved down `periods` rows (up, for a negative number), across partition edges: each partition gets the rows next to it, as Dask's map_overlap. The rows moved in from outside the frame are missing and an integer column becomes float64, as pandas'; an index set by `set_index` stays where it is.",
        "from_columns(#{x: [1, 2, 3, 4, 5]}, #{npartitions: 3}).shift(2).compute();\nfrom_columns(#{x: [1, 2, 3, 4, 5]}, #{npartitions: 3})[\"x\"].shift(-1).compute()",
    ),
    doc(
        "diff",
        "df.diff(periods = 1) / s.diff(periods = 1) -> DataFrame / Series",
        "Each value minus the one `periods` rows before it (after it, for a negative number), across partition edges, as pandas': float64, missing where the other row is outside the frame. Integer and float columns only (pandas' diff of bools compares them).",
        "from_columns(#{x: [1, 4, 9, 16, 25]}, #{npartitions: 2})[\"x\"].diff().compute()",
    ),
    doc(
        "concat",
        "concat([df1, df2, ...]) -> DataFrame / concat([b1, b2, ...]) -> Bag",
        "The frames' rows one after another, their partitions in order (Dask's `dd.concat`); of bags, their partitions one after another (`db.concat`). Columns are the union in order of first appearance, as pandas': a frame that lacks one gives missing values there; integer and float columns meet as float64 (and an integer column some frame lacks becomes float64); other types must agree.",
        "let a = from_columns(#{x: [1, 2]});\nlet b = from_columns(#{x: [3.5], y: [\"z\"]});\nconcat([a, b]).compute()",
    ),
    doc(
        "len",
        "len(x) -> int",
        "The length of `x`: of a DataFrame or Series its rows, counted now (one small task per partition, summed, as Dask's `len`); of a Rhai array or string as Rhai's own `len`.",
        "len(from_columns(#{x: [1, 2, 3, 4, 5]}, #{npartitions: 3}))",
    ),
    doc(
        "shape",
        "df.shape -> [rows, columns] / s.shape -> [rows]",
        "The frame's shape, its rows counted now as `len`. A column named `shape` is still `df[\"shape\"]`.",
        "from_columns(#{x: [1, 2, 3], y: [0.5, 1.5, 2.5]}, #{npartitions: 2}).shape",
    ),
    doc(
        "quantile",
        "s.quantile(q) -> Delayed (a float, or an array for an array of q)",
        "Quantiles by linear interpolation, from up to 1,000 sample points per partition (Dask's approach): exact when no partition has more values than that, close otherwise.",
        "from_columns(#{x: [1, 2, 4, 8]}, #{npartitions: 2})[\"x\"].quantile([0.25, 0.5]).compute()",
    ),
    doc(
        "describe",
        "df.describe() -> DataFrame",
        "count, mean, std, min, 25%, 50%, 75% and max of every numeric column, one row each, named in a first `statistic` column; quartiles as `quantile`.",
        "from_columns(#{x: [1, 2, 4, 8], y: [0.5, (), 1.5, 2.5]}).describe().compute()",
    ),
    doc(
        "map_partitions",
        "df.map_partitions(|part| ..., #{meta}) -> DataFrame",
        "A closure on every partition (a LocalDataFrame; `to_maps()`, `num_rows()`, `p[\"col\"]`), giving a frame, an array of row maps, one row map or one value (a row of one column, `0`). The result's columns come from `meta` (`#{col: dtype}`), or from running the closure on the first partition now.",
        "let df = from_columns(#{x: [1, 2, 3]}, #{npartitions: 2});\ndf.map_partitions(|p| p.to_maps().map(|r| #{x2: r.x * 2})).compute()",
    ),
    doc(
        "apply",
        "g.apply(|group| ..., #{meta}) -> DataFrame",
        "A closure on every group (a LocalDataFrame), after a shuffle that puts each group in one partition. It gives a frame, rows, one row map or one value (a column named `0`, as pandas' `reset_index` names it, or the one column of `meta`); key columns it lacks are put first. Columns from `meta`, or from the first group, run now. A group's columns (`g[\"x\"]`, computed Series) take the Series operators, element-wise methods and reductions at once, and a bool one selects rows (`g[g[\"x\"] > 1]`).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1, 2, 3]});\ndf.groupby(\"k\").apply(|g| #{n: g.num_rows()}).compute();\ndf.groupby(\"k\").apply(|g| g.num_rows() * 10, #{meta: #{n10: \"int64\"}}).compute();\ndf.groupby(\"k\").apply(|g| (g[\"x\"] * 2 + 1).sum()).compute()",
    ),
];

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    for (name, diff) in [("shift", false), ("diff", true)] {
        let st = state.clone();
        engine.register_fn(name, move |f: &mut LazyFrame| shift_frame(&st, &f.f, 1, diff));
        let st = state.clone();
        engine.register_fn(name, move |f: &mut LazyFrame, p: i64| shift_frame(&st, &f.f, p, diff));
        let st = state.clone();
        engine.register_fn(name, move |s: &mut LazySeries| shift_series(&st, s, 1, diff));
        let st = state.clone();
        engine.register_fn(name, move |s: &mut LazySeries, p: i64| shift_series(&st, s, p, diff));
    }
    let st = state.clone();
    engine.register_fn("concat", move |frames: RArray| -> Res<Dynamic> {
        if frames.first().is_some_and(|d| d.is::<crate::types::LazyBag>()) {
            return super::bag_more::concat(&st, &frames).map(Dynamic::from);
        }
        let frames = frames
            .iter()
            .enumerate()
            .map(|(i, d)| {
                d.read_lock::<LazyFrame>().map(|f| f.f.clone()).ok_or_else(|| {
                    runtime(format!("concat: item {i} is {}, not a DataFrame", crate::types::type_name(d)))
                })
            })
            .collect::<Res<Vec<DataFrame>>>()?;
        Ok(Dynamic::from(LazyFrame { f: DataFrame::concat(&ctx(&st), &frames).map_err(err)? }))
    });
    let st = state.clone();
    engine.register_fn("len", move |f: &mut LazyFrame| frame_len(&st, &f.f));
    let st = state.clone();
    engine.register_fn("len", move |s: &mut LazySeries| frame_len(&st, &s.s.to_frame()));
    let st = state.clone();
    engine.register_get("shape", move |f: &mut LazyFrame| -> Res<RArray> {
        Ok(vec![Dynamic::from(frame_len(&st, &f.f)?), Dynamic::from(f.f.schema.cols.len() as i64)])
    });
    let st = state.clone();
    engine.register_get("shape", move |s: &mut LazySeries| -> Res<RArray> {
        Ok(vec![Dynamic::from(frame_len(&st, &s.s.to_frame())?)])
    });
    let st = state.clone();
    engine.register_fn("merge", move |l: LazyFrame, r: LazyFrame| {
        merge(&st, &l.f, &r.f, None, "merge", "inner")
    });
    let st = state.clone();
    engine.register_fn("merge", move |l: LazyFrame, r: LazyFrame, m: Map| {
        merge(&st, &l.f, &r.f, Some(m), "merge", "inner")
    });
    let st = state.clone();
    engine.register_fn("join", move |l: &mut LazyFrame, r: LazyFrame| {
        merge(&st, &l.f, &r.f, None, "join", "left")
    });
    let st = state.clone();
    engine.register_fn("join", move |l: &mut LazyFrame, r: LazyFrame, m: Map| {
        merge(&st, &l.f, &r.f, Some(m), "join", "left")
    });

    let st = state.clone();
    let sort = move |f: &mut LazyFrame, by: Dynamic, m: Option<Map>| -> Res<LazyFrame> {
        let by = strings(&by, "sort_values: columns")?;
        let asc = ascending(m, by.len())?;
        Ok(LazyFrame { f: f.f.sort_values(&ctx(&st), &by, &asc).map_err(err)? })
    };
    let s2 = sort.clone();
    engine.register_fn("sort_values", move |f: &mut LazyFrame, by: Dynamic| s2(f, by, None));
    engine.register_fn("sort_values", move |f: &mut LazyFrame, by: Dynamic, m: Map| sort(f, by, Some(m)));
    let st = state.clone();
    engine.register_fn("set_index", move |f: &mut LazyFrame, col: &str| -> Res<LazyFrame> {
        Ok(LazyFrame { f: f.f.set_index(&ctx(&st), col).map_err(err)? })
    });
    let st = state.clone();
    engine.register_get("divisions", move |f: &mut LazyFrame| divisions(&st, &f.f));
    engine.register_fn("get_partition", |f: &mut LazyFrame, i: i64| -> Res<LazyFrame> {
        Ok(LazyFrame { f: f.f.get_partition(i).map_err(err)? })
    });
    engine.register_fn("loc", |f: &mut LazyFrame, v: Dynamic| -> Res<LazyFrame> {
        let v = super::dataframe::scalar(&v, "loc")?;
        Ok(LazyFrame { f: f.f.loc(&v, None).map_err(err)? })
    });
    engine.register_fn("loc", |f: &mut LazyFrame, lo: Dynamic, hi: Dynamic| -> Res<LazyFrame> {
        let (lo, hi) = (super::dataframe::scalar(&lo, "loc")?, super::dataframe::scalar(&hi, "loc")?);
        Ok(LazyFrame { f: f.f.loc(&lo, Some(&hi)).map_err(err)? })
    });
    engine.register_fn("iloc", |f: &mut LazyFrame, cols: Dynamic| -> Res<LazyFrame> {
        let positions: Vec<i64> = match cols.read_lock::<RArray>() {
            Some(list) => list
                .iter()
                .map(|d| d.as_int().map_err(|_| runtime("iloc: column positions are integers")))
                .collect::<Res<_>>()?,
            None => vec![cols.as_int().map_err(|_| runtime("iloc: column positions are integers"))?],
        };
        Ok(LazyFrame { f: f.f.iloc(&positions).map_err(err)? })
    });
    let reset = |f: &mut LazyFrame, m: Option<Map>| -> Res<LazyFrame> {
        let m = options(m, "reset_index", &["drop"])?;
        let drop = match m.get("drop") {
            None => false,
            Some(b) => b.as_bool().map_err(|_| runtime("reset_index: drop must be true or false"))?,
        };
        Ok(LazyFrame { f: f.f.reset_index(drop).map_err(err)? })
    };
    engine.register_fn("melt", |f: &mut LazyFrame| melt(f, None));
    engine.register_fn("melt", |f: &mut LazyFrame, m: Map| melt(f, Some(m)));
    engine.register_fn("reset_index", move |f: &mut LazyFrame| reset(f, None));
    engine.register_fn("reset_index", move |f: &mut LazyFrame, m: Map| reset(f, Some(m)));

    let st = state.clone();
    let shuffle = move |f: &mut LazyFrame, on: Dynamic, m: Option<Map>| -> Res<LazyFrame> {
        let on = strings(&on, "shuffle: columns")?;
        let n = npartitions(m, "shuffle")?;
        Ok(LazyFrame { f: f.f.shuffle(&ctx(&st), &on, n).map_err(err)? })
    };
    let s2 = shuffle.clone();
    engine.register_fn("shuffle", move |f: &mut LazyFrame, on: Dynamic| s2(f, on, None));
    engine.register_fn("shuffle", move |f: &mut LazyFrame, on: Dynamic, m: Map| shuffle(f, on, Some(m)));
    let st = state.clone();
    engine.register_fn("repartition", move |f: &mut LazyFrame, m: Map| -> Res<LazyFrame> {
        let n = npartitions(Some(m), "repartition")?
            .ok_or_else(|| runtime("repartition: give #{npartitions: N}"))?;
        Ok(LazyFrame { f: f.f.repartition(&ctx(&st), n).map_err(err)? })
    });

    let st = state.clone();
    let dedup = move |f: &mut LazyFrame, m: Option<Map>| -> Res<LazyFrame> {
        let m = options(m, "drop_duplicates", &["subset", "keep"])?;
        let subset = m.get("subset").map(|d| strings(d, "drop_duplicates: subset")).transpose()?;
        // pandas' keep: "first", "last", or false (no row of a duplicated value).
        let keep = match m.get("keep") {
            None => Keep::First,
            Some(k) if k.clone().into_string().is_ok_and(|k| k == "first") => Keep::First,
            Some(k) if k.clone().into_string().is_ok_and(|k| k == "last") => Keep::Last,
            Some(k) if k.as_bool() == Ok(false) => Keep::Unique,
            Some(k) => {
                return Err(runtime(format!(
                    "drop_duplicates: keep must be \"first\", \"last\" or false, not {k}"
                )));
            }
        };
        Ok(LazyFrame { f: f.f.drop_duplicates(&ctx(&st), subset, keep).map_err(err)? })
    };
    let d2 = dedup.clone();
    engine.register_fn("drop_duplicates", move |f: &mut LazyFrame| d2(f, None));
    engine.register_fn("drop_duplicates", move |f: &mut LazyFrame, m: Map| dedup(f, Some(m)));

    for (name, largest) in [("nlargest", true), ("nsmallest", false)] {
        let st = state.clone();
        engine.register_fn(name, move |s: &mut LazySeries, n: i64| -> Res<LazySeries> {
            let n = count(n, name)?;
            Ok(LazySeries { s: s.s.top(&ctx(&st), n, largest).map_err(err)? })
        });
        let st = state.clone();
        engine.register_fn(name, move |f: &mut LazyFrame, n: i64, col: &str| -> Res<LazyFrame> {
            let n = count(n, name)?;
            Ok(LazyFrame { f: f.f.top(&ctx(&st), n, col, largest).map_err(err)? })
        });
    }

    let st = state.clone();
    engine.register_fn("map_partitions", move |cx: NativeCallContext<'_>, f: &mut LazyFrame, fp: FnPtr| {
        map_partitions(&cx, &st, &f.f, &fp, None)
    });
    let st = state.clone();
    engine.register_fn(
        "map_partitions",
        move |cx: NativeCallContext<'_>, f: &mut LazyFrame, fp: FnPtr, m: Map| {
            map_partitions(&cx, &st, &f.f, &fp, Some(m))
        },
    );
    let st = state.clone();
    engine.register_fn("apply", move |cx: NativeCallContext<'_>, g: &mut GroupBy, fp: FnPtr| {
        apply(&cx, &st, g, &fp, None)
    });
    let st = state.clone();
    engine.register_fn("apply", move |cx: NativeCallContext<'_>, g: &mut GroupBy, fp: FnPtr, m: Map| {
        apply(&cx, &st, g, &fp, Some(m))
    });
    let st = state.clone();
    engine.register_fn("describe", move |f: &mut LazyFrame| -> Res<LazyFrame> {
        Ok(LazyFrame { f: f.f.describe(&ctx(&st)).map_err(err)? })
    });
    let st = state.clone();
    engine.register_fn("quantile", move |s: &mut LazySeries, q: Dynamic| -> Res<Delayed> {
        let num = |d: &Dynamic| {
            d.as_float().or_else(|_| d.as_int().map(|i| i as f64)).map_err(|_| {
                runtime(format!("quantile: q must be a number or an array of numbers, not {}", d.type_name()))
            })
        };
        let (qs, list) = match q.read_lock::<RArray>() {
            Some(a) => (a.iter().map(num).collect::<Res<Vec<f64>>>()?, true),
            None => (vec![num(&q)?], false),
        };
        let (layer, key) = s.s.quantile(&ctx(&st), &qs, list).map_err(err)?;
        Ok(Delayed { layer, key })
    });
    let st = state.clone();
    engine.register_fn("tail", move |f: &mut LazyFrame| tail(&st, &f.f, 5).map(LocalFrame));
    let st = state.clone();
    engine.register_fn("tail", move |f: &mut LazyFrame, n: i64| tail(&st, &f.f, n).map(LocalFrame));
    let st = state.clone();
    engine.register_fn("tail", move |s: &mut LazySeries, n: i64| {
        tail(&st, &s.s.to_frame(), n).map(LocalSeries)
    });
}
