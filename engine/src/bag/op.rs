//! The bag task vocabulary: where a partition comes from, the record-wise
//! stages, and the tasks (`BagOp`) that read, fold, shuffle and write.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::agg::{Agg, Sink};
use super::stage::Stage;
use crate::pieces::Pieces;
use crate::runner::Udf;

/// Where a partition's records come from.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub enum Source {
    /// The task's first dependency: a list of records.
    Dep,
    /// Lines of bytes `[start, end)` of a text file, cut at line ends as
    /// Dask's `read_bytes(delimiter=b"\n")`: a block owns the lines that
    /// start inside it.
    Text { path: Arc<str>, start: u64, end: u64 },
}

/// A bag task.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum BagOp {
    /// Read the source, apply the stages, feed the sink.
    Run { source: Source, stages: Vec<Stage>, sink: Sink },
    /// Merge partial aggregates (the task's dependencies) into one.
    Combine(Agg),
    /// The final value of a merged aggregate.
    Finish(Agg),
    /// Shuffle, first half: split partition `input` into `parts` buckets
    /// by the hash of `key(record)`, written to disk as the engine's
    /// shuffle pieces; the result is the size of every piece.
    Split { key: Arc<Udf>, parts: u32, input: u32, pieces: Pieces },
    /// Shuffle, second half: bucket `part` of every split, read from disk,
    /// grouped by key into `[key, [records…]]` pairs.
    Group { key: Arc<Udf>, part: u32, pieces: Pieces },
    /// The records of every dependency, in order (a computed bag).
    Concat,
    /// Records of the dependencies paired up position by position, as
    /// Python's zip (the shortest partition decides), as `Bag.zip`.
    Zip,
    /// Write a partition's records as lines of a text file.
    WriteText { path: Arc<str> },
    /// Records `[len * part / of, len * (part + 1) / of)` of the input
    /// (`repartition` to more partitions).
    Slice { part: u32, of: u32 },
}

impl BagOp {
    /// The file this task reads, if any.
    pub fn file_read(&self) -> Option<&str> {
        match self {
            BagOp::Run { source: Source::Text { path, .. }, .. } => Some(path),
            _ => None,
        }
    }

    /// The shuffle folder this task writes or reads pieces in, if any.
    pub fn shuffle_pieces(&self) -> Option<&Pieces> {
        match self {
            BagOp::Split { pieces, .. } | BagOp::Group { pieces, .. } => Some(pieces),
            _ => None,
        }
    }

    /// The pieces this task writes, as (folder, input index), if a split.
    pub fn shuffle_split(&self) -> Option<(&Pieces, u32)> {
        match self {
            BagOp::Split { pieces, input, .. } => Some((pieces, *input)),
            _ => None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            BagOp::Run { .. } => "bag-run",
            BagOp::Combine(_) => "bag-combine",
            BagOp::Finish(_) => "bag-finish",
            BagOp::Split { .. } => "shuffle-split",
            BagOp::Group { .. } => "shuffle-group",
            BagOp::Concat => "bag-concat",
            BagOp::Zip => "zip",
            BagOp::WriteText { .. } => "to-textfiles",
            BagOp::Slice { .. } => "repartition",
        }
    }
}
