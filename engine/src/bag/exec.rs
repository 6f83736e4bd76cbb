//! Running one bag task on its dependency values.

use super::op::{BagOp, Source};
use super::records::{BATCH, Runner};
use super::stage::Stage;
use super::vkey::VKey;
use super::{agg, text};
use crate::error::TaskError;
use crate::runner::{TaskContext, UdfRunner};
use crate::value::Value;

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
            let mut run = Runner::new(udfs, ctx, part);
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
                    let bytes = crate::io::read_block(path, *start, *end)?;
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
            let mut run = Runner::new(udfs, ctx, part);
            agg::combine(a, args, &mut run)
        }
        BagOp::Finish(a) => {
            let mut run = Runner::new(udfs, ctx, part);
            agg::finish(a, args.first().cloned().unwrap_or_default(), &mut run)
        }
        BagOp::Split { key, parts, input, pieces } => {
            let records = records_of(args.first(), "a bag partition")?;
            let mut run = Runner::new(udfs, ctx, part);
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
            Ok(pieces.sizes(sizes))
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
        BagOp::Zip => {
            let parts =
                args.iter().map(|a| records_of(Some(a), "a bag partition")).collect::<Result<Vec<_>, _>>()?;
            let n = parts.iter().map(Vec::len).min().unwrap_or(0);
            Ok(Value::list(
                (0..n).map(|i| Value::list(parts.iter().map(|p| p[i].clone()).collect())).collect(),
            ))
        }
        BagOp::Slice { part, of } => {
            let records = records_of(args.first(), "a bag partition")?;
            let (n, of) = (records.len(), (*of).max(1) as usize);
            let part = (*part as usize).min(of);
            Ok(Value::list(records[n * part / of..n * (part + 1).min(of) / of].to_vec()))
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
