//! Dataframe partitions and their kernels (Dask's "pandas per partition").
//! A partition is a polars `DataFrame`; the operations a task runs on it
//! form the closed, serializable `FrameOp` vocabulary. The lazy frame that
//! builds these tasks is `crate::collections::dataframe`.

pub mod agg;
pub mod csv;
mod decimal;
pub mod dtype;
pub mod expr;
pub mod fastagg;
pub mod json;
pub mod parquet;
pub mod prune;
pub mod quantile;
pub mod rolling;
pub mod shuffle;
pub mod stage;
pub mod udf;

use std::sync::Arc;

use polars::prelude::*;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::TaskError;
use crate::value::Value;
use agg::{GroupSpec, Red, Stats};
use csv::CsvSpec;
use dtype::{DType, Schema};
use shuffle::{JoinSpec, ShuffleSpec};
use stage::Stage;

/// A partition or a computed frame. Serialized as an Arrow IPC stream,
/// the format every Arrow reader understands.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame(pub DataFrame);

/// One side of an operator on computed Series.
pub enum Operand<'a> {
    Series(&'a Frame),
    Scalar(Value),
}

impl Frame {
    pub fn height(&self) -> usize {
        self.0.height()
    }

    pub fn column_names(&self) -> Vec<String> {
        self.0.get_column_names().iter().map(|c| c.to_string()).collect()
    }

    /// One column as a frame of its own.
    pub fn select_one(&self, name: &str) -> Option<Frame> {
        self.0.select([name]).ok().map(Frame)
    }

    /// The column of a computed Series (a one-column frame).
    fn series_column(&self) -> Result<&Column, String> {
        self.0.columns().first().ok_or_else(|| "a Series without a column".to_string())
    }

    /// `a op b` on computed Series (one-column frames), or on one and a
    /// scalar: the lazy path's typing (an ill-typed operator is refused
    /// with the reason) and kernels, on local data. The result is named
    /// after the first Series operand.
    pub fn series_binary(op: expr::BinOp, a: Operand<'_>, b: Operand<'_>) -> Result<Frame, String> {
        let mut cols = Vec::new();
        let mut name = None;
        let mut height = None;
        let mut side = |o: Operand<'_>, tag: &str| -> Result<expr::Expr, String> {
            match o {
                Operand::Scalar(v) => Ok(expr::Expr::Lit(v)),
                Operand::Series(f) => {
                    let c = f.series_column()?;
                    if let Some(h) = height
                        && h != c.len()
                    {
                        return Err(format!(
                            "the Series have {h} and {} rows; an operator on two Series needs the same rows",
                            c.len()
                        ));
                    }
                    height = Some(c.len());
                    name.get_or_insert_with(|| c.name().to_string());
                    cols.push(c.clone().with_name(tag.into()));
                    Ok(expr::Expr::col(tag))
                }
            }
        };
        let e = expr::Expr::bin(op, side(a, "a")?, side(b, "b")?);
        let name = name.ok_or("an operator on Series needs a Series")?;
        Frame::evaluate(DataFrame::new(height.unwrap_or(0), cols).map_err(|e| e.to_string())?, &e, &name)
    }

    /// The rows where `mask` (a computed bool Series of the same rows) is
    /// true; a missing value keeps no row, as the lazy filter does.
    pub fn rows_where(&self, mask: &Frame) -> Result<Frame, String> {
        let c = mask.series_column()?;
        let m = c.as_materialized_series().bool().map_err(|_| {
            let t =
                DType::of_polars(c.dtype()).map_or_else(|| c.dtype().to_string(), |t| t.name().to_string());
            format!("a row mask must be a bool Series, not one of type {t}")
        })?;
        if m.len() != self.height() {
            return Err(format!("the mask has {} rows and the frame {}", m.len(), self.height()));
        }
        self.0
            .filter(&m.fill_null_with_values(false).map_err(|e| e.to_string())?)
            .map(Frame)
            .map_err(|e| e.to_string())
    }

    /// `f` of a computed Series' column (an element-wise method).
    pub fn series_map(a: &Frame, f: impl FnOnce(Box<expr::Expr>) -> expr::Expr) -> Result<Frame, String> {
        let c = a.series_column()?;
        let name = c.name().to_string();
        let df = DataFrame::new(c.len(), vec![c.clone().with_name("a".into())]).map_err(|e| e.to_string())?;
        Frame::evaluate(df, &f(Box::new(expr::Expr::col("a"))), &name)
    }

    fn evaluate(df: DataFrame, e: &expr::Expr, name: &str) -> Result<Frame, String> {
        let mut cols = Vec::new();
        for c in df.columns() {
            let t = DType::of_polars(c.dtype())
                .ok_or_else(|| format!("a Series of type {} takes no operators or methods", c.dtype()))?;
            cols.push((c.name().to_string(), t));
        }
        e.dtype(&Schema::new(cols)).map_err(|e| e.0)?;
        let s = e.eval(&df).map_err(|e| e.to_string())?.with_name(name.into());
        DataFrame::new(s.len(), vec![s.into_column()]).map(Frame).map_err(|e| e.to_string())
    }

    /// Frames stacked in order; an empty frame of `schema` when there are none.
    pub fn stack(parts: &[Arc<Frame>], schema: &Schema) -> Result<Frame, String> {
        if parts.is_empty() {
            return Ok(Frame(DataFrame::empty_with_schema(&schema.to_polars())));
        }
        let refs: Vec<&DataFrame> = parts.iter().map(|f| &f.0).collect();
        concat(&refs).map(Frame).map_err(|e| e.to_string())
    }

    pub fn nbytes(&self) -> u64 {
        self.0.estimated_size() as u64
    }

    pub fn to_ipc(&self) -> PolarsResult<Vec<u8>> {
        let mut buf = Vec::new();
        let mut df = self.0.clone();
        IpcStreamWriter::new(&mut buf).finish(&mut df)?;
        Ok(buf)
    }

    pub fn from_ipc(bytes: &[u8]) -> PolarsResult<Frame> {
        Ok(Frame(IpcStreamReader::new(std::io::Cursor::new(bytes)).finish()?))
    }
}

impl Serialize for Frame {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes = self.to_ipc().map_err(serde::ser::Error::custom)?;
        s.serialize_bytes(&bytes)
    }
}

impl<'de> Deserialize<'de> for Frame {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Frame, D::Error> {
        let bytes: serde_bytes_compat::Bytes = Deserialize::deserialize(d)?;
        Frame::from_ipc(&bytes.0).map_err(serde::de::Error::custom)
    }
}

/// Bytes that deserialize from either a byte string or a sequence of
/// numbers (formats differ in how they carry `serialize_bytes`).
mod serde_bytes_compat {
    use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};

    pub struct Bytes(pub Vec<u8>);

    impl<'de> Deserialize<'de> for Bytes {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Bytes;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("bytes")
                }
                fn visit_bytes<E>(self, v: &[u8]) -> Result<Bytes, E> {
                    Ok(Bytes(v.to_vec()))
                }
                fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Bytes, E> {
                    Ok(Bytes(v))
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
                    let mut out = Vec::new();
                    while let Some(b) = seq.next_element::<u8>()? {
                        out.push(b);
                    }
                    Ok(Bytes(out))
                }
            }
            d.deserialize_byte_buf(V)
        }
    }
}

/// Where a partition comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Source {
    /// The task's first input, a frame.
    Dep,
    /// A block of a CSV file.
    Csv { spec: Arc<CsvSpec>, path: Arc<str>, start: u64, end: u64 },
    /// The task's first input, a list of records (maps): a bag partition
    /// (`to_dataframe`), with the columns of `schema`.
    Records(Arc<Schema>),
    /// A block of a JSON lines file, as frames of `schema`.
    Json { schema: Arc<Schema>, path: Arc<str>, start: u64, end: u64 },
    /// Rows `[offset, offset + len)` (a row group) of a Parquet file whose
    /// columns have the brisk types of `schema`.
    Parquet { schema: Arc<Schema>, path: Arc<str>, offset: u64, len: u64 },
}

/// What a `Run` task makes of its partition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Sink {
    /// The partition itself.
    Frame,
    /// Its first `n` rows.
    Head(usize),
    /// Statistics of one column, for `Red`uctions.
    Stats(String),
    /// Distinct values of one column (`unique`, `nunique`).
    Unique(String),
    /// A grouped aggregation's partial.
    Group(Arc<GroupSpec>),
    /// Write the partition to a CSV file; the result is the path.
    WriteCsv(Arc<str>),
    /// Write the partition to a Parquet file; the result is the path.
    WriteParquet(Arc<str>),
    /// Cut the partition (input `.1` of the shuffle) into the shuffle's
    /// pieces on disk; a range shuffle's boundaries are the last input.
    Split(Arc<ShuffleSpec>, u32),
    /// Points of a column's distribution, for sort boundaries.
    Sample { on: String, k: usize },
    /// The `n` rows with the largest (or smallest) values of `on`.
    Top { on: String, n: usize, largest: bool },
    /// Its last `n` rows.
    Tail(usize),
    /// Rows with distinct values of these columns (all when `None`), the
    /// one `keep` says of each, in their original order.
    Distinct { subset: Option<Vec<String>>, keep: Keep },
    /// Statistics and sample points of these columns (`describe`).
    Describe(Vec<String>),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FrameOp {
    /// Read or receive a partition, apply the stages, feed the sink.
    /// `columns` is the projection pushed into the reader (all when `None`).
    Run { source: Source, columns: Option<Vec<String>>, stages: Vec<Stage>, sink: Sink },
    /// Merge partials of a sink (stack the inputs for `Frame`).
    Combine(Sink),
    /// The answer from merged partials.
    Finish(Finish),
    /// Output partition `out` of a shuffle, from the piece counts of its
    /// splits (the inputs), then `then`.
    Collect { spec: Arc<ShuffleSpec>, out: u32, schema: Arc<Schema>, then: Then },
    /// Join a left and a right partition.
    Join(Arc<JoinSpec>),
    /// Rows `[len * part / of, len * (part + 1) / of)` of the input frame
    /// (`repartition` to more partitions).
    Slice { part: u32, of: u32 },
    /// A script closure on the partition (`map_partitions`), its result a
    /// frame of `schema`.
    MapPartitions { udf: Arc<crate::ops::Udf>, schema: Arc<Schema> },
    /// A script closure on each group of the partition by `by`
    /// (`groupby(..).apply`, after a shuffle by `by`).
    Apply { udf: Arc<crate::ops::Udf>, by: Vec<String>, schema: Arc<Schema> },
    /// Grouped results with the same groups, sorted by key: the key
    /// columns once, then the other columns of each, in `columns` order.
    SideBySide { by: Vec<String>, columns: Vec<String> },
    /// A rolling aggregate of `columns` of the first input, the second
    /// input (if any) being the rows just before it.
    Rolling { window: usize, agg: rolling::RollAgg, columns: Vec<String> },
}

/// What a shuffle's output partition becomes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Then {
    /// The collected rows (`shuffle(on)`, the sides of a join).
    Rows,
    /// Sorted by these columns, missing values last, ties in input order.
    Sort { by: Vec<String>, descending: Vec<bool> },
    /// Groupby partials merged and finished (`split_out`).
    Group(Arc<GroupSpec>),
}

/// Which row of duplicates `drop_duplicates` keeps (pandas' `keep`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Keep {
    First,
    Last,
    /// None of them: only rows whose values occur once. Partials keep the
    /// first row of each value with a flag column, `DUPLICATED`, set when
    /// the value occurs more than once in the rows it stands for; the
    /// finish drops the flagged rows and the flag.
    Unique,
}

/// The flag column of `Keep::Unique` partials.
pub const DUPLICATED: &str = "__brisk_duplicated";

/// How a tree of partials ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Finish {
    /// A reduction of a column of type `DType`: a scalar.
    Reduce(Red, DType),
    /// The number of distinct values: a scalar.
    NUnique,
    /// The distinct values: a frame of one column.
    Unique,
    /// The rows of `Keep::Unique` partials not flagged duplicated.
    Singles,
    /// The grouped result, sorted by key.
    Group(Arc<GroupSpec>),
    /// `value_counts`: a grouped size, sorted by count, largest first.
    ValueCounts { column: String },
    /// The first `n` rows.
    Head(usize),
    /// Sort boundaries from stacked samples: `outputs + 1` divisions.
    Divisions { on: String, outputs: usize },
    /// `nlargest`/`nsmallest`: the kept rows in order.
    Top { on: String, n: usize, largest: bool },
    /// Quantiles of a column from merged samples: a float, or a list of
    /// floats when `list`.
    Quantile { on: String, qs: Vec<f64>, list: bool },
    /// The `describe` table of these columns.
    Describe(Vec<(String, DType)>),
    /// Distinct (keys, value) rows to the number of distinct non-missing
    /// values per group, as column `out`, sorted by key.
    GroupNUnique { by: Vec<String>, col: String, out: String },
}

impl FrameOp {
    pub fn name(&self) -> &'static str {
        match self {
            FrameOp::Run { sink: Sink::Frame, stages, .. } => stages.last().map_or("partition", Stage::name),
            FrameOp::Run { sink, .. } | FrameOp::Combine(sink) => match sink {
                Sink::Frame => "concat",
                Sink::Head(_) => "head",
                Sink::Stats(_) => "reduce",
                Sink::Unique(_) => "unique",
                Sink::Group(_) => "groupby",
                Sink::WriteCsv(_) => "to_csv",
                Sink::WriteParquet(_) => "to_parquet",
                Sink::Split(..) => "shuffle-split",
                Sink::Sample { .. } => "sample",
                Sink::Top { .. } => "top",
                Sink::Tail(_) => "tail",
                Sink::Distinct { .. } => "drop_duplicates",
                Sink::Describe(_) => "describe",
            },
            FrameOp::Finish(_) => "finish",
            FrameOp::Collect { then: Then::Sort { .. }, .. } => "sort",
            FrameOp::Collect { then: Then::Group(_), .. } => "groupby",
            FrameOp::Collect { .. } => "shuffle",
            FrameOp::Join(_) => "merge",
            FrameOp::Slice { .. } => "repartition",
            FrameOp::Rolling { .. } => "rolling",
            FrameOp::SideBySide { .. } => "groupby",
            FrameOp::MapPartitions { .. } => "map_partitions",
            FrameOp::Apply { .. } => "apply",
        }
    }
}

fn frame_arg(v: &Value) -> Result<&DataFrame, TaskError> {
    match v {
        Value::Frame(f) => Ok(&f.0),
        other => Err(TaskError::internal(format!("a frame kernel got a {}", other.type_name()))),
    }
}

fn frames(args: &[Value]) -> Result<Vec<&DataFrame>, TaskError> {
    args.iter().map(frame_arg).collect()
}

fn err(e: PolarsError) -> TaskError {
    TaskError::user(e.to_string().lines().next().unwrap_or("polars error").to_string())
}

fn frame(df: DataFrame) -> Value {
    Value::Frame(Arc::new(Frame(df)))
}

/// Stack frames of one schema.
pub fn concat(parts: &[&DataFrame]) -> PolarsResult<DataFrame> {
    let mut it = parts.iter();
    let Some(first) = it.next() else { return Ok(DataFrame::empty()) };
    let mut out = (*first).clone();
    for p in it {
        out.vstack_mut(p)?;
    }
    Ok(out)
}

/// Run a frame kernel (closures through `udfs`). Polars may panic on
/// input it does not expect; a panic becomes the task's error, never the
/// worker's death.
pub fn execute(
    op: &FrameOp,
    args: &[Value],
    udfs: &dyn crate::ops::UdfRunner,
    ctx: &crate::ops::TaskContext<'_>,
) -> Result<Value, TaskError> {
    let first = || frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?);
    match op {
        FrameOp::MapPartitions { udf, schema } => {
            return Ok(frame(udf::map_partition(udf, schema, first()?, udfs, ctx)?));
        }
        FrameOp::Apply { udf, by, schema } => {
            return Ok(frame(udf::apply(udf, by, schema, first()?, udfs, ctx)?));
        }
        _ => {}
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(op, args))) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            Err(TaskError::panic(format!("dataframe kernel failed: {msg}")))
        }
    }
}

fn run(op: &FrameOp, args: &[Value]) -> Result<Value, TaskError> {
    match op {
        FrameOp::Run { source, columns, stages, sink } => {
            if let (Source::Csv { spec, path, start, end }, Sink::Group(g)) = (source, sink)
                && let Some(partial) = csv::read_group(spec, path, *start, *end, stages, g)?
            {
                return Ok(frame(partial));
            }
            let mut df = match source {
                Source::Dep => {
                    let df = frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?)?;
                    match columns {
                        Some(cols) => df.select(cols.iter().map(|c| c.as_str())).map_err(err)?,
                        None => df.clone(),
                    }
                }
                Source::Csv { spec, path, start, end } => {
                    csv::read(spec, path, *start, *end, columns.as_deref())?
                }
                Source::Json { schema, path, start, end } => {
                    json::read(schema, path, *start, *end, columns.as_deref())?
                }
                Source::Parquet { schema, path, offset, len } => {
                    parquet::read(path, *offset, *len, columns.as_deref(), schema)?
                }
                Source::Records(schema) => {
                    records(schema, args.first().ok_or_else(|| TaskError::internal("no input records"))?)?
                }
            };
            for s in stages {
                df = s.apply(df).map_err(err)?;
            }
            partial(sink, df, args)
        }
        FrameOp::Combine(sink) => combine(sink, args),
        FrameOp::Finish(f) => finish(f, args),
        FrameOp::Collect { spec, out, schema, then } => {
            let Some(df) = shuffle::collect(spec, *out, args)? else {
                return Ok(frame(DataFrame::empty_with_schema(&schema.to_polars())));
            };
            Ok(frame(match then {
                Then::Rows => df,
                Then::Sort { by, descending } => sort(&df, by, descending).map_err(err)?,
                Then::Group(g) => g.finish(&g.regroup(&df).map_err(err)?).map_err(err)?,
            }))
        }
        FrameOp::Join(spec) => {
            let [l, r] = args else { return Err(TaskError::internal("a join needs two inputs")) };
            Ok(frame(shuffle::join(spec, frame_arg(l)?, frame_arg(r)?).map_err(err)?))
        }
        FrameOp::Slice { part, of } => {
            let df = frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?)?;
            let (h, of) = (df.height(), (*of).max(1) as usize);
            let lo = h * *part as usize / of;
            let hi = h * (*part as usize + 1) / of;
            Ok(frame(df.slice(lo as i64, hi - lo)))
        }
        FrameOp::MapPartitions { .. } | FrameOp::Apply { .. } => {
            Err(TaskError::internal("a closure kernel without a script engine"))
        }
        FrameOp::SideBySide { by, columns } => {
            let all = frames(args)?;
            let Some(first) = all.first() else { return Err(TaskError::internal("no grouped results")) };
            let mut out: Vec<Column> =
                by.iter().map(|b| first.column(b).cloned()).collect::<PolarsResult<_>>().map_err(err)?;
            for df in &all {
                for c in df.columns() {
                    if !by.iter().any(|b| b.as_str() == c.name().as_str()) {
                        out.push(c.clone());
                    }
                }
            }
            let df = DataFrame::new(first.height(), out).map_err(err)?;
            Ok(frame(df.select(columns.iter().map(String::as_str)).map_err(err)?))
        }
        FrameOp::Rolling { window, agg, columns } => {
            let part = frame_arg(args.first().ok_or_else(|| TaskError::internal("no input frame"))?)?;
            let before = args.get(1).map(frame_arg).transpose()?;
            Ok(frame(rolling::rolling(part, before, *window, *agg, columns).map_err(err)?))
        }
    }
}

/// A stable sort with missing values last (pandas' `na_position="last"`).
fn sort(df: &DataFrame, by: &[String], descending: &[bool]) -> PolarsResult<DataFrame> {
    df.sort(
        by.iter().map(String::as_str),
        SortMultipleOptions::default()
            .with_order_descending_multi(descending.iter().copied())
            .with_nulls_last(true)
            .with_maintain_order(true),
    )
}

/// The rows with the `n` largest (or smallest) values of `on`, in that
/// order; ties keep the earlier row (pandas' `keep="first"`).
fn top(df: &DataFrame, on: &str, n: usize, largest: bool) -> PolarsResult<DataFrame> {
    let df = df.drop_nulls(Some(&[on.to_string()]))?;
    Ok(sort(&df, &[on.to_string()], &[largest])?.head(Some(n)))
}

fn partial(sink: &Sink, df: DataFrame, args: &[Value]) -> Result<Value, TaskError> {
    Ok(match sink {
        Sink::Frame => frame(df),
        Sink::Head(n) => frame(df.head(Some(*n))),
        Sink::Stats(c) => {
            let s = df.column(c).map_err(err)?.as_materialized_series().clone();
            Stats::of(&s).map_err(err)?.to_value()
        }
        Sink::Unique(c) => {
            let col = df.select([c.as_str()]).map_err(err)?.drop_nulls::<String>(None).map_err(err)?;
            frame(col.unique_stable(None, UniqueKeepStrategy::First, None).map_err(err)?)
        }
        Sink::Group(spec) => frame(spec.partial(&df).map_err(err)?),
        Sink::WriteCsv(path) => {
            let mut df = df;
            csv::write(path, &mut df)?;
            Value::Str(path.clone())
        }
        Sink::WriteParquet(path) => {
            let mut df = df;
            parquet::write(path, &mut df)?;
            Value::Str(path.clone())
        }
        Sink::Split(spec, input) => {
            let bounds = match spec.by {
                shuffle::Partitioner::Range { .. } => {
                    Some(frame_arg(args.last().ok_or_else(|| TaskError::internal("no sort boundaries"))?)?)
                }
                shuffle::Partitioner::Hash(_) => None,
            };
            shuffle::split(spec, *input, &df, bounds)?
        }
        Sink::Sample { on, k } => frame(shuffle::sample(&df, on, *k).map_err(err)?),
        Sink::Top { on, n, largest } => frame(top(&df, on, *n, *largest).map_err(err)?),
        Sink::Tail(n) => frame(df.tail(Some(*n))),
        Sink::Distinct { subset, keep } => {
            frame(distinct(&df, subset.as_deref(), *keep, false).map_err(err)?)
        }
        Sink::Describe(cols) => quantile::describe_partial(&df, cols).map_err(err)?,
    })
}

/// The distinct rows of `df` (a partition, or stacked partials when
/// `stacked`) by `subset`. Partials concatenate in partition order, so
/// keeping the first (or last) row per partition and again per combine
/// keeps the global first (last).
fn distinct(df: &DataFrame, subset: Option<&[String]>, keep: Keep, stacked: bool) -> PolarsResult<DataFrame> {
    match keep {
        Keep::First => df.unique_stable(subset, UniqueKeepStrategy::First, None),
        Keep::Last => df.unique_stable(subset, UniqueKeepStrategy::Last, None),
        Keep::Unique => {
            // A value is duplicated if it occurs twice here, or if any of
            // the partials it came in already says so.
            let cols: Vec<String> = match subset {
                Some(s) => s.to_vec(),
                None => df
                    .get_column_names()
                    .into_iter()
                    .filter(|c| c.as_str() != DUPLICATED)
                    .map(|c| c.to_string())
                    .collect(),
            };
            let mut dup = df.select(cols.iter().map(|c| c.as_str()))?.is_duplicated()?;
            if stacked {
                dup = &dup | df.column(DUPLICATED)?.bool()?;
            }
            let mut flagged = df.clone();
            flagged.with_column(dup.with_name(DUPLICATED.into()).into_column())?;
            // The first row of each value carries the flag of all of them.
            flagged.unique_stable(Some(&cols), UniqueKeepStrategy::First, None)
        }
    }
}

fn combine(sink: &Sink, args: &[Value]) -> Result<Value, TaskError> {
    Ok(match sink {
        Sink::Frame => frame(concat(&frames(args)?).map_err(err)?),
        Sink::Head(n) => frame(concat(&frames(args)?).map_err(err)?.head(Some(*n))),
        Sink::Stats(_) => {
            let mut st = Stats::default();
            for a in args {
                st.merge(&Stats::from_value(a).ok_or_else(|| TaskError::internal("bad statistics partial"))?);
            }
            st.to_value()
        }
        Sink::Unique(_) => {
            let all = concat(&frames(args)?).map_err(err)?;
            frame(all.unique_stable(None, UniqueKeepStrategy::First, None).map_err(err)?)
        }
        Sink::Group(spec) => frame(spec.regroup(&concat(&frames(args)?).map_err(err)?).map_err(err)?),
        Sink::WriteCsv(_) | Sink::WriteParquet(_) | Sink::Split(..) => Value::list(args.to_vec()),
        Sink::Sample { .. } => frame(concat(&frames(args)?).map_err(err)?),
        Sink::Tail(n) => frame(concat(&frames(args)?).map_err(err)?.tail(Some(*n))),
        Sink::Top { on, n, largest } => {
            frame(top(&concat(&frames(args)?).map_err(err)?, on, *n, *largest).map_err(err)?)
        }
        Sink::Distinct { subset, keep } => frame(
            distinct(&concat(&frames(args)?).map_err(err)?, subset.as_deref(), *keep, true).map_err(err)?,
        ),
        Sink::Describe(_) => quantile::describe_combine(args)
            .map_err(err)?
            .ok_or_else(|| TaskError::internal("bad describe partial"))?,
    })
}

fn finish(f: &Finish, args: &[Value]) -> Result<Value, TaskError> {
    let one = args.first().ok_or_else(|| TaskError::internal("finish without input"))?;
    Ok(match f {
        Finish::Reduce(red, t) => Stats::from_value(one)
            .ok_or_else(|| TaskError::internal("bad statistics partial"))?
            .finish(*red, *t),
        Finish::NUnique => Value::Int(frame_arg(one)?.height() as i64),
        Finish::Unique => one.clone(),
        Finish::Singles => {
            let df = frame_arg(one)?;
            let dup = df.column(DUPLICATED).map_err(err)?.bool().map_err(err)?;
            frame(df.filter(&!dup).map_err(err)?.drop(DUPLICATED).map_err(err)?)
        }
        Finish::Head(n) => frame(frame_arg(one)?.head(Some(*n))),
        Finish::Group(spec) => frame(spec.finish(frame_arg(one)?).map_err(err)?),
        Finish::ValueCounts { column } => {
            let df = frame_arg(one)?;
            let spec = GroupSpec {
                by: vec![column.clone()],
                aggs: vec![("count".into(), String::new(), Red::Size, DType::Int64)],
            };
            let out = spec.finish(df).map_err(err)?;
            let sorted = out
                .sort(
                    ["count", column.as_str()],
                    SortMultipleOptions::default().with_order_descending_multi([true, false]),
                )
                .map_err(err)?;
            frame(sorted)
        }
        Finish::Divisions { on, outputs } => {
            frame(shuffle::divisions(frame_arg(one)?, on, *outputs).map_err(err)?)
        }
        Finish::Quantile { on, qs, list } => {
            let q = quantile::quantiles(frame_arg(one)?, on, qs).map_err(err)?;
            if *list {
                Value::list(q.into_iter().map(Value::Float).collect())
            } else {
                Value::Float(q.first().copied().unwrap_or(f64::NAN))
            }
        }
        Finish::GroupNUnique { by, col, out } => {
            // Each row is a distinct (keys, value): count the present values.
            let df = frame_arg(one)?;
            let present =
                !expr::missing(df.column(col).map_err(err)?.as_materialized_series()).map_err(err)?;
            let ones =
                present.into_series().cast(&DataType::Int64).map_err(err)?.with_name(out.as_str().into());
            let mut keyed = df.select(by.iter().map(String::as_str)).map_err(err)?;
            keyed.with_column(ones.into_column()).map_err(err)?;
            let gb = keyed.group_by(by.iter().map(String::as_str)).map_err(err)?;
            #[allow(deprecated)]
            let summed = gb.select([out.as_str()]).sum().map_err(err)?;
            let mut counted = summed;
            let last = counted.get_column_names().last().map(|n| n.to_string()).unwrap_or_default();
            counted.rename(&last, out.as_str().into()).map_err(err)?;
            frame(sort(&counted, by, &vec![false; by.len()]).map_err(err)?)
        }
        Finish::Describe(cols) => frame(
            quantile::describe_finish(one, cols)
                .map_err(err)?
                .ok_or_else(|| TaskError::internal("bad describe partial"))?,
        ),
        Finish::Top { on, n, largest } => frame(top(frame_arg(one)?, on, *n, *largest).map_err(err)?),
    })
}

/// A frame of `schema` from columns of values (`from_columns`, `from_maps`):
/// each column is built with its declared type.
pub fn from_values(schema: &Schema, columns: &[Vec<Value>]) -> Result<DataFrame, String> {
    let height = columns.first().map_or(0, Vec::len);
    let mut cols = Vec::with_capacity(columns.len());
    for ((name, t), vals) in schema.cols.iter().zip(columns) {
        let bad = |v: &Value| format!("column \"{name}\" is {t}, but holds a {}", v.type_name());
        let name: PlSmallStr = name.as_str().into();
        let s = match t {
            DType::Int64 => {
                let v: Vec<Option<i64>> = vals
                    .iter()
                    .map(|v| match v {
                        Value::Int(i) => Ok(Some(*i)),
                        Value::Unit => Ok(None),
                        other => Err(bad(other)),
                    })
                    .collect::<Result<_, _>>()?;
                Series::new(name, v)
            }
            DType::Float64 => {
                let v: Vec<Option<f64>> = vals
                    .iter()
                    .map(|v| match v {
                        Value::Int(i) => Ok(Some(*i as f64)),
                        Value::Float(f) => Ok(Some(*f)),
                        Value::Unit => Ok(None),
                        other => Err(bad(other)),
                    })
                    .collect::<Result<_, _>>()?;
                Series::new(name, v)
            }
            DType::Bool => {
                let v: Vec<Option<bool>> = vals
                    .iter()
                    .map(|v| match v {
                        Value::Bool(b) => Ok(Some(*b)),
                        Value::Unit => Ok(None),
                        other => Err(bad(other)),
                    })
                    .collect::<Result<_, _>>()?;
                Series::new(name, v)
            }
            DType::Str | DType::Datetime => {
                let v: Vec<Option<&str>> = vals
                    .iter()
                    .map(|v| match v {
                        Value::Str(s) => Ok(Some(s.as_ref())),
                        Value::Unit => Ok(None),
                        other => Err(bad(other)),
                    })
                    .collect::<Result<_, _>>()?;
                let s = Series::new(name, v);
                if *t == DType::Datetime { expr::cast(&s, *t).map_err(|e| e.to_string())? } else { s }
            }
        };
        cols.push(s.into_column());
    }
    DataFrame::new(height, cols).map_err(|e| e.to_string())
}

/// A bag partition of maps as a frame of `schema`; a key a record lacks
/// is a missing value.
fn records(schema: &Schema, v: &Value) -> Result<DataFrame, TaskError> {
    let Value::List(items) = v else {
        return Err(TaskError::user(format!("to_dataframe: a partition is {}, not records", v.type_name())));
    };
    let mut cols: Vec<Vec<Value>> = vec![Vec::with_capacity(items.len()); schema.cols.len()];
    for (i, r) in items.iter().enumerate() {
        let Value::Map(m) = r else {
            return Err(TaskError::user(format!("to_dataframe: record {i} is {}, not a map", r.type_name())));
        };
        for ((name, _), col) in schema.cols.iter().zip(cols.iter_mut()) {
            col.push(m.get(name).cloned().unwrap_or(Value::Unit));
        }
    }
    from_values(schema, &cols).map_err(|e| TaskError::user(format!("to_dataframe: {e}")))
}

/// The type a column of script values takes: int, float if any float,
/// bool, string; `None` when there is nothing but missing values.
pub fn infer_dtype(name: &str, vals: &[Value]) -> Result<DType, String> {
    let mut t: Option<DType> = None;
    for v in vals {
        let vt = match v {
            Value::Unit => continue,
            Value::Int(_) => DType::Int64,
            Value::Float(_) => DType::Float64,
            Value::Bool(_) => DType::Bool,
            Value::Str(_) => DType::Str,
            other => {
                return Err(format!("column \"{name}\" holds a {}, which a frame cannot", other.type_name()));
            }
        };
        t = Some(match (t, vt) {
            (None, x) => x,
            (Some(a), b) if a == b => a,
            (Some(DType::Int64), DType::Float64) | (Some(DType::Float64), DType::Int64) => DType::Float64,
            (Some(a), b) => {
                return Err(format!("column \"{name}\" mixes {} and {} values", a.name(), b.name()));
            }
        });
    }
    Ok(t.unwrap_or(DType::Float64))
}

/// One cell as a script value (datetimes as ISO text).
pub fn cell(av: AnyValue<'_>) -> Value {
    match av {
        AnyValue::Null => Value::Unit,
        AnyValue::Boolean(b) => Value::Bool(b),
        AnyValue::Int64(i) => Value::Int(i),
        AnyValue::Int32(i) => Value::Int(i64::from(i)),
        AnyValue::UInt32(i) => Value::Int(i64::from(i)),
        AnyValue::UInt64(i) => Value::Int(i as i64),
        AnyValue::Float64(f) => Value::Float(f),
        AnyValue::Float32(f) => Value::Float(f64::from(f)),
        AnyValue::String(s) => Value::str(s),
        AnyValue::StringOwned(s) => Value::str(s.as_str()),
        other => Value::str(&other.to_string()),
    }
}

/// Rows as maps of column name to value (`to_maps`).
pub fn rows(df: &DataFrame) -> Vec<Value> {
    let names: Vec<String> = df.get_column_names().iter().map(|n| n.to_string()).collect();
    (0..df.height())
        .map(|i| {
            let m = df
                .columns()
                .iter()
                .zip(&names)
                .map(|(c, n)| (n.clone(), c.get(i).map(cell).unwrap_or(Value::Unit)))
                .collect();
            Value::Map(Arc::new(m))
        })
        .collect()
}

/// A reduction of a local frame's first column (a computed Series), with
/// the lazy path's rules: missing values (and NaN) skipped, pandas' NaN
/// for the mean of nothing, `nunique` over the values present.
pub fn reduce_column(df: &DataFrame, red: Red) -> Result<Value, String> {
    let col = df.columns().first().ok_or("the series has no column")?;
    let t =
        DType::of_polars(col.dtype()).ok_or_else(|| format!("a {} column cannot be reduced", col.dtype()))?;
    red.dtype(t)?;
    let s = col.as_materialized_series();
    if red == Red::NUnique {
        let present = s.drop_nulls();
        return present.n_unique().map(|n| Value::Int(n as i64)).map_err(|e| e.to_string());
    }
    Ok(Stats::of(s).map_err(|e| e.to_string())?.finish(red, t))
}

/// One column's values.
pub fn column_values(df: &DataFrame, name: &str) -> Vec<Value> {
    match df.column(name) {
        Ok(c) => (0..c.len()).map(|i| c.get(i).map(cell).unwrap_or(Value::Unit)).collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_through_ipc_and_msgpack() {
        let df = df!("a" => [Some(1i64), None], "s" => ["x", "y"]).expect("df");
        let v = frame(df);
        let bytes = rmp_serde::to_vec(&v).expect("encode");
        let back: Value = rmp_serde::from_slice(&bytes).expect("decode");
        assert_eq!(v, back);
    }

    #[test]
    fn values_build_typed_columns() {
        let schema = Schema::new(vec![("a".into(), DType::Float64), ("b".into(), DType::Str)]);
        let df =
            from_values(&schema, &[vec![Value::Int(1), Value::Unit], vec![Value::str("x"), Value::Unit]])
                .expect("frame");
        assert_eq!(df.column("a").expect("a").dtype(), &DataType::Float64);
        let e = from_values(&schema, &[vec![Value::str("no")], vec![Value::Unit]]).expect_err("bad");
        assert!(e.contains("column \"a\" is float64, but holds a string"), "{e}");
        assert_eq!(infer_dtype("c", &[Value::Int(1), Value::Float(2.0)]), Ok(DType::Float64));
        assert!(infer_dtype("c", &[Value::Int(1), Value::str("x")]).is_err());
        let r = rows(&df);
        assert_eq!(r[0].to_json(), r#"{"a":1.0,"b":"x"}"#);
    }
}
