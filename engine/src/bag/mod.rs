//! Bag kernels: what one task does to one partition of records (Dask's
//! `dask.bag` per-partition functions). A partition is a `Value::List` of
//! records; a record is any `Value`.
//!
//! Per-partition transforms are not one task each: the lazy `Bag` keeps
//! them as a list of `Stage`s and runs them, with the source read and the
//! partial aggregation, in one `Run` task per partition. That is Dask's bag
//! fusion done when the expression is built, and it lets the common text
//! pipelines (`read_text().str_split().flatten().frequencies()`) run over
//! borrowed lines without building a value per word (`text::fast`).

pub mod agg;
pub mod text;
pub mod vkey;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::TaskError;
use crate::ops::{TaskContext, Udf, UdfRunner};
use crate::shuffle::Pieces;
use crate::value::Value;

pub use agg::{Agg, Sink};
pub use vkey::VKey;

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

/// A record-wise transform.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Stage {
    Map(Arc<Udf>),
    Filter(Arc<Udf>),
    /// The partition's whole list to the closure, which returns a list.
    MapPartitions(Arc<Udf>),
    Flatten,
    /// `x[key]`: an index into lists, a key into maps.
    Pluck(Value),
    /// Python's `str.split()` (runs of whitespace) or `str.split(sep)`.
    StrSplit(Option<Arc<str>>),
    StrLower,
    StrStrip,
}

impl Stage {
    pub fn name(&self) -> &'static str {
        match self {
            Stage::Map(_) => "map",
            Stage::Filter(_) => "filter",
            Stage::MapPartitions(_) => "map_partitions",
            Stage::Flatten => "flatten",
            Stage::Pluck(_) => "pluck",
            Stage::StrSplit(_) => "str_split",
            Stage::StrLower => "str_lower",
            Stage::StrStrip => "str_strip",
        }
    }
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
    /// Write a partition's records as lines of a text file.
    WriteText { path: Arc<str> },
}

impl BagOp {
    pub fn name(&self) -> &'static str {
        match self {
            BagOp::Run { .. } => "bag-run",
            BagOp::Combine(_) => "bag-combine",
            BagOp::Finish(_) => "bag-finish",
            BagOp::Split { .. } => "shuffle-split",
            BagOp::Group { .. } => "shuffle-group",
            BagOp::Concat => "bag-concat",
            BagOp::WriteText { .. } => "to-textfiles",
        }
    }
}

/// Run a bag task on its dependency values.
pub fn execute(
    op: &BagOp,
    args: &[Value],
    udfs: &dyn UdfRunner,
    ctx: &TaskContext<'_>,
) -> Result<Value, TaskError> {
    let part = ctx.key.index().first().copied().unwrap_or(0);
    match op {
        BagOp::Run { source, stages, sink } => {
            if let Source::Text { path, start, end } = source
                && let Some(v) = text::fast(path, *start, *end, stages, sink)?
            {
                return Ok(v);
            }
            let mut run = Runner { udfs, ctx, part, offset: 0 };
            let whole = agg::Acc::whole(sink) || stages.iter().any(|s| matches!(s, Stage::MapPartitions(_)));
            let batch = if whole { usize::MAX } else { BATCH };
            let mut acc = agg::Acc::new(sink);
            let mut feed = |records: Vec<Value>, offset: usize, run: &mut Runner<'_, '_>| {
                run.offset = offset;
                let out = stages.iter().try_fold(records, |r, s| run.stage(s, r))?;
                acc.push(sink, out, run)
            };
            match source {
                Source::Dep => {
                    let records = records_of(args.first(), "a bag partition")?;
                    if whole {
                        feed(records, 0, &mut run)?;
                    } else {
                        for (i, c) in records.chunks(batch).enumerate() {
                            feed(c.to_vec(), i * batch, &mut run)?;
                        }
                    }
                }
                Source::Text { path, start, end } => {
                    let bytes = text::read_block(path, *start, *end)?;
                    let block = text::as_text(path, *start, &bytes)?;
                    let mut pending = Vec::new();
                    let mut offset = 0;
                    for line in text::lines(block) {
                        pending.push(Value::str(&line));
                        if pending.len() >= batch {
                            let n = pending.len();
                            feed(std::mem::take(&mut pending), offset, &mut run)?;
                            offset += n;
                        }
                    }
                    feed(pending, offset, &mut run)?;
                }
            }
            run.offset = 0;
            acc.finish(sink, &mut run)
        }
        BagOp::Combine(a) => {
            let mut run = Runner { udfs, ctx, part, offset: 0 };
            agg::combine(a, args, &mut run)
        }
        BagOp::Finish(a) => {
            let mut run = Runner { udfs, ctx, part, offset: 0 };
            agg::finish(a, args.first().cloned().unwrap_or_default(), &mut run)
        }
        BagOp::Split { key, parts, input, pieces } => {
            let records = records_of(args.first(), "a bag partition")?;
            let mut run = Runner { udfs, ctx, part, offset: 0 };
            let keys = run.call_each(key, &records)?;
            let mut buckets = vec![Vec::new(); (*parts).max(1) as usize];
            for (k, r) in keys.iter().zip(records) {
                let b = (VKey::hash_of(k) % buckets.len() as u64) as usize;
                buckets[b].push(Value::list(vec![k.clone(), r]));
            }
            let mut sizes = Vec::with_capacity(buckets.len());
            for (out, b) in buckets.into_iter().enumerate() {
                sizes.push(Value::Int(b.len() as i64));
                if !b.is_empty() {
                    let bytes = rmp_serde::to_vec(&Value::list(b))
                        .map_err(|e| TaskError::user(format!("shuffle: a record cannot be written: {e}")))?;
                    pieces.write(out as u32, *input, |w| w.write_all(&bytes).map_err(|e| e.to_string()))?;
                }
            }
            Ok(Value::list(sizes))
        }
        BagOp::Group { part: bucket, pieces, .. } => {
            let mut groups: Vec<(Value, Vec<Value>)> = Vec::new();
            let mut index: std::collections::HashMap<VKey, usize> = std::collections::HashMap::new();
            for bytes in pieces.take(*bucket, args)? {
                let piece: Value = rmp_serde::from_slice(&bytes)
                    .map_err(|e| TaskError::user(format!("shuffle: a piece cannot be read back: {e}")))?;
                let Value::List(pairs) = piece else {
                    return Err(TaskError::internal("a shuffle piece is not a list"));
                };
                for pair in pairs.iter() {
                    let Value::List(kv) = pair else {
                        return Err(TaskError::internal("a malformed shuffle pair"));
                    };
                    let (k, v) = (kv[0].clone(), kv[1].clone());
                    match index.entry(VKey(k.clone())) {
                        std::collections::hash_map::Entry::Occupied(e) => groups[*e.get()].1.push(v),
                        std::collections::hash_map::Entry::Vacant(e) => {
                            e.insert(groups.len());
                            groups.push((k, vec![v]));
                        }
                    }
                }
            }
            Ok(Value::list(groups.into_iter().map(|(k, vs)| Value::list(vec![k, Value::list(vs)])).collect()))
        }
        BagOp::Concat => {
            let mut out = Vec::new();
            for a in args {
                out.extend(records_of(Some(a), "a bag partition")?);
            }
            Ok(Value::list(out))
        }
        BagOp::WriteText { path } => {
            let records = records_of(args.first(), "a bag partition")?;
            text::write_lines(path, &records)?;
            Ok(Value::str(path))
        }
    }
}

/// The records of a partition value.
fn records_of(v: Option<&Value>, what: &str) -> Result<Vec<Value>, TaskError> {
    match v {
        Some(Value::List(items)) => Ok(items.as_ref().clone()),
        Some(other) => {
            Err(TaskError::user(format!("{what} must be an array of records, not {}", other.type_name())))
        }
        None => Err(TaskError::internal(format!("{what} is missing"))),
    }
}

/// Calls closures and applies stages for one task, placing errors at the
/// record that caused them.
pub struct Runner<'a, 'b> {
    udfs: &'a dyn UdfRunner,
    ctx: &'a TaskContext<'b>,
    part: u32,
    /// Position of the current batch's first record in the partition.
    offset: usize,
}

/// Records a partition's stages take at a time: enough to amortize a
/// closure lookup, few enough that a partition never sits in memory whole.
const BATCH: usize = 4096;

impl Runner<'_, '_> {
    /// `f(x)` for every record; an error names the record's position.
    pub fn call_each(&mut self, f: &Udf, records: &[Value]) -> Result<Vec<Value>, TaskError> {
        self.udfs.call_each(f, records, self.ctx).map_err(|(i, e)| self.at_record(e, i))
    }

    /// `f(args…)` once (aggregations, map_partitions).
    pub fn call(&mut self, f: &Udf, args: Vec<Value>) -> Result<Value, TaskError> {
        self.udfs.call(f, args, self.ctx).map_err(|e| self.in_partition(e))
    }

    fn at_record(&self, mut e: TaskError, i: usize) -> TaskError {
        if e.kind == crate::error::TaskErrorKind::User {
            e.message = format!("{} (record {} of partition {})", e.message, self.offset + i, self.part);
        }
        e
    }

    fn in_partition(&self, mut e: TaskError) -> TaskError {
        if e.kind == crate::error::TaskErrorKind::User {
            e.message = format!("{} (partition {})", e.message, self.part);
        }
        e
    }

    fn stage(&mut self, stage: &Stage, records: Vec<Value>) -> Result<Vec<Value>, TaskError> {
        if self.ctx.is_cancelled() {
            return Err(TaskError::cancelled());
        }
        match stage {
            Stage::Map(f) => self.call_each(f, &records),
            Stage::Filter(f) => {
                let keep = self.call_each(f, &records)?;
                Ok(records.into_iter().zip(keep).filter(|(_, k)| truthy(k)).map(|(r, _)| r).collect())
            }
            Stage::MapPartitions(f) => match self.call(f, vec![Value::list(records)])? {
                Value::List(items) => Ok(items.as_ref().clone()),
                other => Err(self.in_partition(TaskError::user(format!(
                    "map_partitions: the closure must return an array of records, not {}",
                    other.type_name()
                )))),
            },
            Stage::Flatten => {
                let mut out = Vec::with_capacity(records.len());
                for (i, r) in records.into_iter().enumerate() {
                    match r {
                        // Usually the only holder: move the items out.
                        Value::List(items) => match Arc::try_unwrap(items) {
                            Ok(v) => out.extend(v),
                            Err(shared) => out.extend(shared.iter().cloned()),
                        },
                        other => {
                            return Err(self.at_record(
                                TaskError::user(format!(
                                    "flatten: a record is {}, not an array",
                                    other.type_name()
                                )),
                                i,
                            ));
                        }
                    }
                }
                Ok(out)
            }
            Stage::Pluck(key) => records
                .into_iter()
                .enumerate()
                .map(|(i, r)| pluck(&r, key).map_err(|e| self.at_record(TaskError::user(e), i)))
                .collect(),
            Stage::StrSplit(_) | Stage::StrLower | Stage::StrStrip => records
                .into_iter()
                .enumerate()
                .map(|(i, r)| match r {
                    Value::Str(s) => Ok(text::apply_str(stage, &s)),
                    other => Err(self.at_record(
                        TaskError::user(format!(
                            "{}: a record is {}, not a string",
                            stage.name(),
                            other.type_name()
                        )),
                        i,
                    )),
                })
                .collect(),
        }
    }
}

/// Python's truthiness, which `filter` follows.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Unit => false,
        Value::Bool(b) => *b,
        Value::Int(i) => *i != 0,
        Value::Float(f) => *f != 0.0,
        Value::Str(s) => !s.is_empty(),
        Value::Bytes(b) => !b.is_empty(),
        Value::List(l) => !l.is_empty(),
        Value::Map(m) => !m.is_empty(),
        Value::Array(c) => !c.is_empty(),
        Value::Frame(f) => f.0.height() > 0,
    }
}

/// `record[key]`.
pub fn pluck(record: &Value, key: &Value) -> Result<Value, String> {
    match (record, key) {
        (Value::List(items), Value::Int(i)) => {
            let n = items.len() as i64;
            let j = if *i < 0 { i + n } else { *i };
            items
                .get(j as usize)
                .filter(|_| j >= 0)
                .cloned()
                .ok_or_else(|| format!("pluck: index {i} out of range for a record of length {n}"))
        }
        (Value::Map(m), Value::Str(k)) => {
            m.get(&**k).cloned().ok_or_else(|| format!("pluck: no key \"{k}\" in a record"))
        }
        (r, k) => Err(format!("pluck: cannot take {} from {}", k.type_name(), r.type_name())),
    }
}

#[cfg(test)]
mod tests;
