//! Bag aggregations as tree reductions: a partial per partition (the
//! `Run` task's sink), partials merged by `Combine` tasks (Dask's
//! `split_every`, 8 for bags), and `Finish`. Numbers follow Python: `sum`
//! of ints is an int, a float anywhere makes it a float; `min`, `max` and
//! `topk` compare as Python does and refuse what Python refuses.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::collections::hash_map::Entry;

use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::records::{Runner, pluck};
use super::vkey::VKey;
use crate::error::TaskError;
use crate::runner::Udf;
use crate::value::Value;

/// How `topk` ranks records.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum KeyBy {
    Record,
    /// `record[i]` (or a map key).
    Item(Value),
    Closure(Arc<Udf>),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Agg {
    Count,
    Sum,
    Mean,
    Min,
    Max,
    Frequencies,
    Distinct,
    TopK {
        k: usize,
        key: KeyBy,
    },
    FoldBy {
        key: Arc<Udf>,
        binop: Arc<Udf>,
        initial: Value,
        combine: Arc<Udf>,
        combine_initial: Value,
    },
    Reduction {
        per_partition: Arc<Udf>,
        aggregate: Arc<Udf>,
    },
    /// Whether any (all) records are true, by Python's truthiness.
    Any,
    All,
    /// Variance (`std`: its square root) with `ddof`, as `Bag.var`.
    Var {
        ddof: u32,
        std: bool,
    },
    /// `Bag.fold`: `binop` over each partition's records from `initial`
    /// (else from its first record), `combine` over the partials.
    Fold {
        binop: Arc<Udf>,
        combine: Arc<Udf>,
        initial: Option<Value>,
    },
}

impl Agg {
    pub fn name(&self) -> &'static str {
        match self {
            Agg::Count => "count",
            Agg::Sum => "sum",
            Agg::Mean => "mean",
            Agg::Min => "min",
            Agg::Max => "max",
            Agg::Frequencies => "frequencies",
            Agg::Distinct => "distinct",
            Agg::TopK { .. } => "topk",
            Agg::FoldBy { .. } => "foldby",
            Agg::Reduction { .. } => "reduction",
            Agg::Any => "any",
            Agg::All => "all",
            Agg::Var { std: true, .. } => "std",
            Agg::Var { .. } => "var",
            Agg::Fold { .. } => "fold",
        }
    }

    /// Whether the result is a bag (a list of records) rather than one value.
    pub fn gives_records(&self) -> bool {
        matches!(self, Agg::Frequencies | Agg::Distinct | Agg::TopK { .. } | Agg::FoldBy { .. })
    }
}

/// What a `Run` task makes of its records.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Sink {
    /// The records themselves (a materialized partition).
    Records,
    /// The partial aggregate of the partition.
    Partial(Agg),
}

/// A partition's sink, fed batch by batch so that a partition's records
/// never all exist at once unless the sink needs them (`reduction`).
pub(super) enum Acc {
    Records(Vec<Value>),
    Count(i64),
    Sum(Value),
    Mean(f64, i64),
    Extreme(Vec<Value>),
    Freq(Counter),
    Distinct(Vec<Value>, FxHashSet<VKey>),
    /// The best records so far with their keys (each key computed once).
    Top(Vec<(Value, Value)>),
    Fold(Vec<(Value, Value)>, FxHashMap<VKey, usize>),
    Whole(Vec<Value>),
    Flag(bool),
    /// Count, mean and sum of squared deviations (Welford's update).
    Moments(f64, f64, f64),
    Folded(Option<Value>),
}

impl Acc {
    pub(super) fn new(s: &Sink) -> Acc {
        match s {
            Sink::Records => Acc::Records(Vec::new()),
            Sink::Partial(a) => match a {
                Agg::Count => Acc::Count(0),
                Agg::Sum => Acc::Sum(Value::Int(0)),
                Agg::Mean => Acc::Mean(0.0, 0),
                Agg::Min | Agg::Max => Acc::Extreme(Vec::new()),
                Agg::Frequencies => Acc::Freq(Counter::default()),
                Agg::Distinct => Acc::Distinct(Vec::new(), FxHashSet::default()),
                Agg::TopK { .. } => Acc::Top(Vec::new()),
                Agg::FoldBy { .. } => Acc::Fold(Vec::new(), FxHashMap::default()),
                Agg::Reduction { .. } => Acc::Whole(Vec::new()),
                Agg::Any => Acc::Flag(false),
                Agg::All => Acc::Flag(true),
                Agg::Var { .. } => Acc::Moments(0.0, 0.0, 0.0),
                Agg::Fold { initial, .. } => Acc::Folded(initial.clone()),
            },
        }
    }

    /// Whether the sink must see the whole partition at once.
    pub(super) fn whole(s: &Sink) -> bool {
        matches!(s, Sink::Partial(Agg::Reduction { .. }))
    }

    pub(super) fn push(
        &mut self,
        s: &Sink,
        records: Vec<Value>,
        run: &mut Runner<'_, '_>,
    ) -> Result<(), TaskError> {
        let agg = match s {
            Sink::Partial(a) => Some(a),
            Sink::Records => None,
        };
        match self {
            Acc::Records(v) | Acc::Whole(v) => v.extend(records),
            Acc::Count(n) => *n += records.len() as i64,
            Acc::Sum(total) => {
                for r in &records {
                    *total = add(total, r)?;
                }
            }
            Acc::Mean(sum, n) => {
                for (i, r) in records.iter().enumerate() {
                    *sum += number(r).ok_or_else(|| run.at_record(not_a_number("mean", r), i))?;
                }
                *n += records.len() as i64;
            }
            Acc::Extreme(best) => {
                let mut all = std::mem::take(best);
                all.extend(records);
                if let Some(a) = agg {
                    *best = list(&extreme(a, all)?).to_vec();
                }
            }
            Acc::Freq(c) => records.into_iter().for_each(|r| c.add(r, 1)),
            Acc::Distinct(out, seen) => {
                out.extend(records.into_iter().filter(|r| seen.insert(VKey(r.clone()))));
            }
            Acc::Top(best) => {
                if let Some(Agg::TopK { k, key }) = agg {
                    let keys = rank_keys(key, &records, run)?;
                    let mut all = std::mem::take(best);
                    all.extend(records.into_iter().zip(keys));
                    let (records, keys): (Vec<Value>, Vec<Value>) = all.into_iter().unzip();
                    *best = top(records, keys, *k)?;
                }
            }
            Acc::Flag(flag) => {
                let any = matches!(agg, Some(Agg::Any));
                for r in &records {
                    if super::records::truthy(r) == any {
                        *flag = any;
                        break;
                    }
                }
            }
            Acc::Moments(n, mean, m2) => {
                for (i, r) in records.iter().enumerate() {
                    let x = number(r).ok_or_else(|| run.at_record(not_a_number("variance", r), i))?;
                    *n += 1.0;
                    let d = x - *mean;
                    *mean += d / *n;
                    *m2 += d * (x - *mean);
                }
            }
            Acc::Folded(acc) => {
                if let Some(Agg::Fold { binop, .. }) = agg {
                    for r in records {
                        *acc = Some(match acc.take() {
                            None => r,
                            Some(a) => run.call(binop, vec![a, r])?,
                        });
                    }
                }
            }
            Acc::Fold(acc, index) => {
                if let Some(Agg::FoldBy { key, binop, initial, .. }) = agg {
                    let keys = run.call_each(key, &records)?;
                    for (k, r) in keys.into_iter().zip(records) {
                        let i = *index.entry(VKey(k.clone())).or_insert_with(|| {
                            acc.push((k, initial.clone()));
                            acc.len() - 1
                        });
                        let prev = std::mem::take(&mut acc[i].1);
                        acc[i].1 = run.call(binop, vec![prev, r])?;
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn finish(self, s: &Sink, run: &mut Runner<'_, '_>) -> Result<Value, TaskError> {
        Ok(match self {
            Acc::Records(v) | Acc::Distinct(v, _) | Acc::Extreme(v) => Value::list(v),
            Acc::Top(best) => Value::list(best.into_iter().map(|(r, _)| r).collect()),
            Acc::Count(n) => Value::Int(n),
            Acc::Sum(v) => v,
            Acc::Mean(sum, n) => Value::list(vec![Value::Float(sum), Value::Int(n)]),
            Acc::Freq(c) => c.into_pairs(),
            Acc::Fold(acc, _) => pairs(acc),
            Acc::Flag(b) => Value::Bool(b),
            Acc::Moments(n, mean, m2) => moments(n, mean, m2),
            Acc::Folded(v) => Value::list(v.into_iter().collect()),
            Acc::Whole(v) => match s {
                Sink::Partial(Agg::Reduction { per_partition, .. }) => {
                    run.call(per_partition, vec![Value::list(v)])?
                }
                _ => Value::list(v),
            },
        })
    }
}

pub(super) fn combine(agg: &Agg, parts: &[Value], run: &mut Runner<'_, '_>) -> Result<Value, TaskError> {
    Ok(match agg {
        Agg::Count | Agg::Sum => parts.iter().try_fold(Value::Int(0), |a, x| add(&a, x))?,
        Agg::Mean => {
            let (mut s, mut n) = (0.0, 0i64);
            for p in parts {
                if let Value::List(sn) = p
                    && let [Value::Float(ps), Value::Int(pn)] = sn.as_slice()
                {
                    s += ps;
                    n += pn;
                }
            }
            Value::list(vec![Value::Float(s), Value::Int(n)])
        }
        Agg::Min | Agg::Max => {
            let found: Vec<Value> = parts.iter().filter_map(|p| list(p).first().cloned()).collect();
            extreme(agg, found)?
        }
        Agg::Frequencies => {
            let mut counts = Counter::default();
            for p in parts {
                for pair in list(p).iter() {
                    if let Value::List(kv) = pair
                        && let [k, Value::Int(c)] = kv.as_slice()
                    {
                        counts.add(k.clone(), *c);
                    }
                }
            }
            counts.into_pairs()
        }
        Agg::Distinct => Value::list(distinct(parts.iter().flat_map(|p| list(p).to_vec()).collect())),
        Agg::TopK { k, key } => {
            let records: Vec<Value> = parts.iter().flat_map(|p| list(p).to_vec()).collect();
            let keys = rank_keys(key, &records, run)?;
            Value::list(top(records, keys, *k)?.into_iter().map(|(r, _)| r).collect())
        }
        Agg::FoldBy { combine, combine_initial, .. } => {
            let mut acc: Vec<(Value, Value)> = Vec::new();
            let mut index: HashMap<VKey, usize> = HashMap::new();
            for p in parts {
                for pair in list(p).iter() {
                    let Value::List(kv) = pair else { continue };
                    let [k, v] = kv.as_slice() else { continue };
                    let i = *index.entry(VKey(k.clone())).or_insert_with(|| {
                        acc.push((k.clone(), combine_initial.clone()));
                        acc.len() - 1
                    });
                    let prev = std::mem::take(&mut acc[i].1);
                    acc[i].1 = run.call(combine, vec![prev, v.clone()])?;
                }
            }
            pairs(acc)
        }
        Agg::Reduction { aggregate, .. } => run.call(aggregate, vec![Value::list(parts.to_vec())])?,
        Agg::Any => Value::Bool(parts.iter().any(|p| matches!(p, Value::Bool(true)))),
        Agg::All => Value::Bool(parts.iter().all(|p| matches!(p, Value::Bool(true)))),
        Agg::Var { .. } => {
            // Chan et al.'s merge of (n, mean, M2).
            let (mut n, mut mean, mut m2) = (0.0, 0.0, 0.0);
            for p in parts {
                let [Value::Float(pn), Value::Float(pm), Value::Float(pm2)] = list(p) else {
                    return Err(TaskError::internal("a malformed variance partial"));
                };
                let total = n + pn;
                if total > 0.0 {
                    let d = pm - mean;
                    mean += d * pn / total;
                    m2 += pm2 + d * d * n * pn / total;
                }
                n = total;
            }
            moments(n, mean, m2)
        }
        Agg::Fold { combine, initial, .. } => {
            // As Dask's aggregate: `reduce(combine, partials, initial)`.
            let mut acc = initial.clone();
            for v in parts.iter().flat_map(|p| list(p).iter().cloned()) {
                acc = Some(match acc.take() {
                    None => v,
                    Some(a) => run.call(combine, vec![a, v])?,
                });
            }
            Value::list(acc.into_iter().collect())
        }
    })
}

fn moments(n: f64, mean: f64, m2: f64) -> Value {
    Value::list(vec![Value::Float(n), Value::Float(mean), Value::Float(m2)])
}

pub(super) fn finish(agg: &Agg, merged: Value, _run: &mut Runner<'_, '_>) -> Result<Value, TaskError> {
    Ok(match agg {
        Agg::Mean => match list(&merged) {
            [Value::Float(_), Value::Int(0)] => return Err(TaskError::user("mean of an empty bag")),
            [Value::Float(s), Value::Int(n)] => Value::Float(s / *n as f64),
            _ => return Err(TaskError::internal("a malformed mean partial")),
        },
        Agg::Min | Agg::Max => match list(&merged).first() {
            Some(v) => v.clone(),
            None => return Err(TaskError::user(format!("{}() of an empty bag", agg.name()))),
        },
        Agg::Var { ddof, std } => match list(&merged) {
            [Value::Float(n), _, Value::Float(m2)] if *n > f64::from(*ddof) => {
                let v = m2 / (n - f64::from(*ddof));
                Value::Float(if *std { v.sqrt() } else { v })
            }
            [Value::Float(n), ..] => {
                return Err(TaskError::user(format!(
                    "{}() of {n} records with ddof={ddof}: needs more than {ddof}",
                    agg.name()
                )));
            }
            _ => return Err(TaskError::internal("a malformed variance partial")),
        },
        Agg::Fold { .. } => match list(&merged).first() {
            Some(v) => v.clone(),
            None => return Err(TaskError::user("fold() of an empty bag with no initial value")),
        },
        _ => merged,
    })
}

fn list(v: &Value) -> &[Value] {
    match v {
        Value::List(items) => items,
        _ => &[],
    }
}

fn pairs(acc: Vec<(Value, Value)>) -> Value {
    Value::list(acc.into_iter().map(|(k, v)| Value::list(vec![k, v])).collect())
}

/// Counts in first-seen order.
#[derive(Default)]
pub(super) struct Counter {
    index: FxHashMap<VKey, usize>,
    items: Vec<(Value, i64)>,
}

impl Counter {
    fn add(&mut self, v: Value, n: i64) {
        match self.index.entry(VKey(v)) {
            Entry::Occupied(e) => self.items[*e.get()].1 += n,
            Entry::Vacant(e) => {
                let v = e.key().0.clone();
                e.insert(self.items.len());
                self.items.push((v, n));
            }
        }
    }

    fn into_pairs(self) -> Value {
        pairs(self.items.into_iter().map(|(v, n)| (v, Value::Int(n))).collect())
    }
}

fn distinct(records: Vec<Value>) -> Vec<Value> {
    let mut seen = FxHashSet::default();
    records.into_iter().filter(|r| seen.insert(VKey(r.clone()))).collect()
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

fn not_a_number(what: &str, v: &Value) -> TaskError {
    TaskError::user(format!("{what}: a record is {}, not a number", v.type_name()))
}

/// Python's `+` on numbers (bools count as ints).
fn add(a: &Value, b: &Value) -> Result<Value, TaskError> {
    let int = |v: &Value| match v {
        Value::Int(i) => Some(*i),
        Value::Bool(b) => Some(i64::from(*b)),
        _ => None,
    };
    if let (Some(x), Some(y)) = (int(a), int(b)) {
        return x.checked_add(y).map(Value::Int).ok_or_else(|| TaskError::user("integer overflow in sum"));
    }
    match (number(a), number(b)) {
        (Some(x), Some(y)) => Ok(Value::Float(x + y)),
        _ => Err(not_a_number("sum", if number(a).is_none() { a } else { b })),
    }
}

/// Python's ordering where Python has one: numbers with numbers, strings
/// with strings, lists element by element.
pub fn compare(a: &Value, b: &Value) -> Result<Ordering, TaskError> {
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => Ok(x.cmp(y)),
        (Value::List(x), Value::List(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                match compare(p, q)? {
                    Ordering::Equal => {}
                    o => return Ok(o),
                }
            }
            Ok(x.len().cmp(&y.len()))
        }
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => Ok(x.partial_cmp(&y).unwrap_or(Ordering::Equal)),
            _ => Err(TaskError::user(format!(
                "cannot compare {} with {} (as Python's '<')",
                a.type_name(),
                b.type_name()
            ))),
        },
    }
}

fn extreme(agg: &Agg, records: Vec<Value>) -> Result<Value, TaskError> {
    let mut best: Option<Value> = None;
    for r in records {
        best = Some(match best {
            None => r,
            Some(b) => {
                let o = compare(&r, &b)?;
                let better =
                    if matches!(agg, Agg::Min) { o == Ordering::Less } else { o == Ordering::Greater };
                if better { r } else { b }
            }
        });
    }
    Ok(Value::list(best.into_iter().collect()))
}

fn rank_keys(key: &KeyBy, records: &[Value], run: &mut Runner<'_, '_>) -> Result<Vec<Value>, TaskError> {
    match key {
        KeyBy::Record => Ok(records.to_vec()),
        KeyBy::Item(i) => records
            .iter()
            .enumerate()
            .map(|(j, r)| pluck(r, i).map_err(|e| run.at_record(TaskError::user(format!("topk: {e}")), j)))
            .collect(),
        KeyBy::Closure(f) => run.call_each(f, records),
    }
}

/// The `k` largest records by key, largest first; ties keep the earlier
/// record first (as Python's `heapq.nlargest`).
fn top(records: Vec<Value>, keys: Vec<Value>, k: usize) -> Result<Vec<(Value, Value)>, TaskError> {
    let mut all: Vec<(Value, Value)> = records.into_iter().zip(keys).collect();
    let mut err = None;
    all.sort_by(|a, b| {
        compare(&b.1, &a.1).unwrap_or_else(|e| {
            err.get_or_insert(e);
            Ordering::Equal
        })
    });
    if let Some(e) = err {
        return Err(e);
    }
    all.truncate(k);
    Ok(all)
}
