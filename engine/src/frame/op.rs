//! The frame task vocabulary: where a partition comes from, what a `Run`
//! task makes of it, and the tasks (`FrameOp`) that combine, finish,
//! shuffle and write.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::red::Red;

use super::csv::CsvSpec;
use super::cumulative::{CumAgg, CumStep};
use super::dtype::{DType, Schema};
use super::group::GroupSpec;
use super::rolling;
use super::shuffle::{JoinSpec, ShuffleSpec};
use super::stage::Stage;
use crate::pieces::Pieces;

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
    /// The partition as JSON lines, one object per row (`to_json`).
    WriteJson(Arc<str>),
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
    /// Statistics of each of these columns (`df.sum()`, `df.mean()`, …).
    StatsOf(Vec<String>),
    /// Pairwise co-moments of these columns (`corr`, `cov`).
    Moments(Vec<String>),
    /// Where each of these columns is largest (`max`) or smallest, as the
    /// `index` column's value there or the row's position (`argbest.rs`).
    ArgBest { columns: Vec<String>, index: Option<String>, max: bool },
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
    MapPartitions { udf: Arc<crate::runner::Udf>, schema: Arc<Schema> },
    /// A script closure on each group of the partition by `by`
    /// (`groupby(..).apply`, after a shuffle by `by`).
    Apply { udf: Arc<crate::runner::Udf>, by: Vec<String>, schema: Arc<Schema> },
    /// Grouped results with the same groups, sorted by key: the key
    /// columns once, then the other columns of each, in `columns` order.
    SideBySide { by: Vec<String>, columns: Vec<String> },
    /// A rolling aggregate of `columns` of the first input, the second
    /// input (if any) being the rows just before it.
    Rolling { window: rolling::Window, agg: rolling::RollAgg, columns: Vec<String> },
    /// `rolling("1h")`: `agg` of `columns` of the first input over windows
    /// of `span` ns of the datetime column `on`; the second input (if any)
    /// is the rows before it that those windows reach.
    RollingTime { span: i64, on: String, min_periods: usize, agg: rolling::RollAgg, columns: Vec<String> },
    /// The rows of the inputs (the edge before, if any, then a partition)
    /// less than `span` ns older than their last: what the next
    /// partition's time windows reach.
    TimeEdge { on: String, span: i64 },
    /// `rolling(..).apply(f)`: the closure on each window of each column.
    RollingApply { udf: Arc<crate::runner::Udf>, window: rolling::Window, columns: Vec<String> },
    /// `shift(periods)` (or `diff`) of `columns` of the first input, the
    /// second input (if any) being the rows next to it that move in.
    Shift { periods: i64, diff: bool, columns: Vec<String> },
    /// The partition with exactly these columns, in order: each cast to
    /// its type, one it lacks all missing (`concat`).
    Conform(Arc<Schema>),
    /// One step of a running aggregate of `columns` across partitions
    /// (`cumsum`, …): `cumulative.rs`.
    Cumulative { agg: CumAgg, columns: Vec<String>, step: CumStep },
    /// `ewm(..).mean()` of `columns` of the first input from the state
    /// (second input) the partition before left; with `state_only`, the
    /// state after this partition instead (`ewm.rs`).
    Ewm { spec: super::ewm::Ewm, columns: Vec<String>, state_only: bool },
    /// Another task's value as a partition of `schema`: a frame (its
    /// columns cast), an array of row maps or one row map (`from_delayed`).
    FromValue(Arc<Schema>),
    /// A 1-d or 2-d array block (the input) as a partition with these
    /// column names (`from_dask_array`).
    FromBlock(Vec<String>),
    /// A row for every bin of width `step` of column `on` between the
    /// first and last (`resample`): `zero` columns 0 there, others missing.
    FillBins { on: String, step: i64, zero: Vec<String> },
    /// The first input with column `from` of the second (as many rows)
    /// added as `to`: a Series of the same rows brought alongside.
    Zip { from: String, to: String },
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
    /// One row: the reduction of each column (`df.sum()`, …).
    Row(Red, Vec<(String, DType)>),
    /// One row: each column's `q` quantile, from `Describe` partials.
    QuantileRow(Vec<String>, f64),
    /// The correlation (or covariance with `ddof`) matrix of `columns`,
    /// as a frame with an `index` column naming the rows; or with
    /// `pair`, the one value of two columns.
    Moments { columns: Vec<String>, corr: bool, ddof: u32, pair: bool },
    /// `idxmax`/`idxmin`: one row of labels of type `label`, or with
    /// `scalar` the one label.
    ArgBest { columns: Vec<String>, label: DType, scalar: bool },
    /// Distinct (keys, value) rows to the number of distinct non-missing
    /// values per group, as column `out`, sorted by key.
    GroupNUnique { by: Vec<String>, col: String, out: String },
}

impl FrameOp {
    /// The file this task reads, if any.
    pub fn file_read(&self) -> Option<&str> {
        match self {
            FrameOp::Run {
                source: Source::Csv { path, .. } | Source::Json { path, .. } | Source::Parquet { path, .. },
                ..
            } => Some(path),
            _ => None,
        }
    }

    /// The shuffle folder this task writes or reads pieces in, if any.
    pub fn shuffle_pieces(&self) -> Option<&Pieces> {
        match self {
            FrameOp::Run { sink: Sink::Split(spec, _), .. } | FrameOp::Collect { spec, .. } => {
                Some(&spec.pieces)
            }
            _ => None,
        }
    }

    /// The pieces this task writes, as (folder, input index), if a split.
    pub fn shuffle_split(&self) -> Option<(&Pieces, u32)> {
        match self {
            FrameOp::Run { sink: Sink::Split(spec, input), .. } => Some((&spec.pieces, *input)),
            _ => None,
        }
    }

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
                Sink::WriteJson(_) => "to_json",
                Sink::Split(..) => "shuffle-split",
                Sink::Sample { .. } => "sample",
                Sink::Top { .. } => "top",
                Sink::Tail(_) => "tail",
                Sink::Distinct { .. } => "drop_duplicates",
                Sink::Describe(_) => "describe",
                Sink::StatsOf(_) => "reduce",
                Sink::Moments(_) => "moments",
                Sink::ArgBest { max: true, .. } => "idxmax",
                Sink::ArgBest { max: false, .. } => "idxmin",
            },
            FrameOp::Finish(_) => "finish",
            FrameOp::Collect { then: Then::Sort { .. }, .. } => "sort",
            FrameOp::Collect { then: Then::Group(_), .. } => "groupby",
            FrameOp::Collect { .. } => "shuffle",
            FrameOp::Join(_) => "merge",
            FrameOp::Slice { .. } => "repartition",
            FrameOp::Rolling { .. } | FrameOp::RollingApply { .. } | FrameOp::RollingTime { .. } => "rolling",
            FrameOp::TimeEdge { .. } => "rolling-edge",
            FrameOp::Shift { diff: false, .. } => "shift",
            FrameOp::Shift { diff: true, .. } => "diff",
            FrameOp::Conform(_) => "concat",
            FrameOp::Cumulative { agg, .. } => agg.name(),
            FrameOp::Zip { .. } => "align",
            FrameOp::FromValue(_) => "from_delayed",
            FrameOp::FromBlock(_) => "from_dask_array",
            FrameOp::FillBins { .. } => "resample",
            FrameOp::Ewm { .. } => "ewm",
            FrameOp::SideBySide { .. } => "groupby",
            FrameOp::MapPartitions { .. } => "map_partitions",
            FrameOp::Apply { .. } => "apply",
        }
    }
}

/// The flag column of `Keep::Unique` partials.
pub const DUPLICATED: &str = "__brisk_duplicated";
