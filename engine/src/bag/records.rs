//! Records and the closures run on them: `Runner` calls a task's closures
//! and places an error at the record that caused it; Python's truthiness
//! and `x[key]` on records.

use std::sync::Arc;

use super::stage::Stage;
use crate::error::TaskError;
use crate::runner::{TaskContext, Udf, UdfRunner};
use crate::value::Value;

/// Calls closures and applies stages for one task, placing errors at the
/// record that caused them.
pub struct Runner<'a, 'b> {
    udfs: &'a dyn UdfRunner,
    ctx: &'a TaskContext<'b>,
    part: u32,
    /// Position of the current batch's first record in the partition.
    pub(crate) offset: usize,
    /// Each join stage's other items by key (the stage's position in the
    /// task's stages), found once for all of a partition's batches.
    joins: std::collections::HashMap<usize, Arc<JoinTable>>,
}

/// The positions of `other`'s items by key (`join_key`).
type JoinTable = std::collections::HashMap<String, Vec<usize>>;

/// A join key as text; a whole float is its integer, as Python's `1 == 1.0`.
fn join_key(k: &Value) -> String {
    match k {
        Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::Int(*f as i64).to_json(),
        other => other.to_json(),
    }
}

/// Records a partition's stages take at a time: enough to amortize a
/// closure lookup, few enough that a partition never sits in memory whole.
pub(crate) const BATCH: usize = 4096;

impl<'a, 'b> Runner<'a, 'b> {
    /// A runner for partition `part` of a task.
    pub(crate) fn new(udfs: &'a dyn UdfRunner, ctx: &'a TaskContext<'b>, part: u32) -> Runner<'a, 'b> {
        Runner { udfs, ctx, part, offset: 0, joins: Default::default() }
    }
}

impl Runner<'_, '_> {
    /// `f(x)` for every record; an error names the record's position.
    pub fn call_each(&mut self, f: &Udf, records: &[Value]) -> Result<Vec<Value>, TaskError> {
        self.udfs.call_each(f, records, self.ctx).map_err(|(i, e)| self.at_record(e, i))
    }

    /// `f(args…)` once (aggregations, map_partitions).
    pub fn call(&mut self, f: &Udf, args: Vec<Value>) -> Result<Value, TaskError> {
        self.udfs.call(f, args, self.ctx).map_err(|e| self.in_partition(e))
    }

    pub(crate) fn at_record(&self, mut e: TaskError, i: usize) -> TaskError {
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

    pub(crate) fn stage(&mut self, stage: &Stage, records: Vec<Value>) -> Result<Vec<Value>, TaskError> {
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
                // One allocation for all the items (a doubling Vec would copy them ~twice).
                let total = records.iter().map(|r| if let Value::List(l) = r { l.len() } else { 1 }).sum();
                let mut out = Vec::with_capacity(total);
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
            Stage::StarMap(f) => {
                let mut out = Vec::with_capacity(records.len());
                for (i, r) in records.into_iter().enumerate() {
                    let Value::List(args) = r else {
                        return Err(self.at_record(
                            TaskError::user(format!("starmap: a record is {}, not an array", r.type_name())),
                            i,
                        ));
                    };
                    let v = self
                        .udfs
                        .call(f, args.as_ref().clone(), self.ctx)
                        .map_err(|e| self.at_record(e, i))?;
                    out.push(v);
                }
                Ok(out)
            }
            Stage::RandomSample { prob, seed } => {
                // A draw per record from the seed, the partition and the
                // record's position, so however a partition is batched the
                // same records are kept.
                let offset = self.offset as u64;
                Ok(records
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| {
                        let at = offset + *i as u64;
                        let h = crate::array::create::block_seed(
                            *seed,
                            &[self.part, at as u32, (at >> 32) as u32],
                        );
                        ((h >> 11) as f64 / (1u64 << 53) as f64) < *prob
                    })
                    .map(|(_, r)| r)
                    .collect())
            }
            Stage::Join { other, on_self, on_other } => {
                let id = std::ptr::from_ref(stage) as usize;
                let table = match self.joins.get(&id) {
                    Some(t) => t.clone(),
                    None => {
                        let keys = self.udfs.call_each(on_other, other, self.ctx).map_err(|(i, mut e)| {
                            e.message = format!("join: {} (item {i} of the other sequence)", e.message);
                            e
                        })?;
                        let mut t = JoinTable::new();
                        for (i, k) in keys.iter().enumerate() {
                            t.entry(join_key(k)).or_default().push(i);
                        }
                        let t = Arc::new(t);
                        self.joins.insert(id, t.clone());
                        t
                    }
                };
                let keys = self.call_each(on_self, &records)?;
                let mut out = Vec::new();
                for (r, k) in records.into_iter().zip(keys) {
                    for &i in table.get(&join_key(&k)).map_or(&[][..], Vec::as_slice) {
                        out.push(Value::list(vec![other[i].clone(), r.clone()]));
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
                    Value::Str(s) => Ok(apply_str(stage, &s)),
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
        Value::Gpu(g) => !g.is_empty(),
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

/// Python's `str.split()`: runs of whitespace, no empty words.
pub(crate) fn split_whitespace(s: &str) -> impl Iterator<Item = &str> {
    s.split(char::is_whitespace).filter(|w| !w.is_empty())
}

/// A string stage on one string.
pub fn apply_str(stage: &Stage, s: &str) -> Value {
    match stage {
        Stage::StrLower => Value::str(&s.to_lowercase()),
        Stage::StrStrip => Value::str(s.trim()),
        Stage::StrSplit(None) => Value::list(split_whitespace(s).map(Value::str).collect()),
        Stage::StrSplit(Some(sep)) => Value::list(s.split(&**sep).map(Value::str).collect()),
        _ => Value::str(s),
    }
}
