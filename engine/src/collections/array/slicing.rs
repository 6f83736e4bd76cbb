//! Basic indexing (`x.slice([0..100, 5, ()])`, `x[i]`): ranges with steps,
//! integers (which drop their axis) and whole axes. Each output block is a
//! view of one input block, so slicing never copies or joins blocks.

use std::sync::Arc;

use serde::Serialize;

use super::base::{Array, Ctx, array_task, block, finish, grid, offsets};
use crate::array::error::ArrayError;
use crate::array::error::fmt_shape;
use crate::array::op::ArrayOp;
use crate::array::shape::AxisSlice;
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::Arg;

/// One axis of an index expression.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Index {
    /// `start..stop` by `step`; `None` ends mean the axis's ends, negative
    /// positions count from the end (Python's rules).
    Range { start: Option<i64>, stop: Option<i64>, step: i64 },
    /// One position: the axis is dropped.
    Int(i64),
    /// `()`: the whole axis.
    Full,
}

/// For one axis: the input blocks kept, with the range inside each, and
/// whether the axis is dropped.
type AxisPlan = (Vec<(usize, AxisSlice)>, bool);

fn plan_axis(ix: Index, chunks: &[usize], axis: usize) -> Result<AxisPlan, ArrayError> {
    let n: usize = chunks.iter().sum();
    let offs = offsets(chunks);
    let ni = n as i64;
    match ix {
        Index::Int(i) => {
            let j = if i < 0 { i + ni } else { i };
            if j < 0 || j >= ni {
                return Err(ArrayError::Value(format!(
                    "index {i} is out of bounds for axis {axis} with size {n}"
                )));
            }
            let j = j as usize;
            let b = offs.iter().rposition(|&o| o <= j).unwrap_or(0);
            Ok((vec![(b, AxisSlice { start: j - offs[b], stop: j - offs[b] + 1, step: 1 })], true))
        }
        Index::Full => Ok((
            chunks.iter().enumerate().map(|(b, &c)| (b, AxisSlice { start: 0, stop: c, step: 1 })).collect(),
            false,
        )),
        Index::Range { start, stop, step } => {
            if step == 0 {
                return Err(ArrayError::Value("slice step cannot be zero".into()));
            }
            if step < 0 {
                return Ok((plan_reversed(start, stop, -step, chunks, &offs), false));
            }
            let clamp = |v: i64| -> usize { (if v < 0 { v + ni } else { v }).clamp(0, ni) as usize };
            let s = start.map(clamp).unwrap_or(0);
            let e = stop.map(clamp).unwrap_or(n).max(s);
            let step = step as usize;
            let mut kept = Vec::new();
            for (b, &c) in chunks.iter().enumerate() {
                let (lo, hi) = (offs[b], offs[b] + c);
                // The first selected position at or after lo.
                let first = if s >= lo { s } else { s + (lo - s).div_ceil(step) * step };
                let end = hi.min(e);
                if first < end {
                    kept.push((b, AxisSlice { start: first - lo, stop: end - lo, step: step as i64 }));
                }
            }
            if kept.is_empty() {
                kept.push((0, AxisSlice { start: 0, stop: 0, step: 1 }));
            }
            Ok((kept, false))
        }
    }
}

/// A negative step, by Python's rules: from `start` (default the last
/// position) down to just above `stop` (default: past the first), so the
/// blocks are visited last to first. Inside a block the range is ndarray's:
/// `lo..hi` read from its end by `-k`, i.e. `hi - 1, hi - 1 - k, ...`.
fn plan_reversed(
    start: Option<i64>,
    stop: Option<i64>,
    k: i64,
    chunks: &[usize],
    offs: &[usize],
) -> Vec<(usize, AxisSlice)> {
    let n = chunks.iter().sum::<usize>() as i64;
    // Positions as i64 in -1..n: -1 is "before the first element".
    let clamp = |v: i64| (if v < 0 { v + n } else { v }).clamp(-1, n - 1);
    let first = start.map(clamp).unwrap_or(n - 1);
    let last_bound = stop.map(clamp).unwrap_or(-1);
    let mut kept = Vec::new();
    for (b, &c) in chunks.iter().enumerate().rev() {
        let (lo, hi) = (offs[b] as i64, (offs[b] + c) as i64);
        // The largest selected position below hi, and the smallest one
        // in this block above the stop bound.
        let p = if first < hi { first } else { first - ((first - hi) / k + 1) * k };
        let bound = lo.max(last_bound + 1);
        if p < bound {
            continue;
        }
        let q = p - (p - bound) / k * k;
        kept.push((b, AxisSlice { start: (q - lo) as usize, stop: (p - lo + 1) as usize, step: -k }));
    }
    if kept.is_empty() {
        kept.push((0, AxisSlice { start: 0, stop: 0, step: 1 }));
    }
    kept
}

/// Elements kept by a range inside one block.
fn count(r: &AxisSlice) -> usize {
    if r.stop <= r.start { 0 } else { (r.stop - r.start).div_ceil(r.step.unsigned_abs().max(1) as usize) }
}

/// `x.blocks[i, j]` (Dask's block view): the block at a block index, as an
/// array of one block. Negative indices count from the end.
pub fn block_at(ctx: &Ctx, a: &Array, index: &[i64]) -> Result<Array, ArrayError> {
    a.known("blocks")?;
    let nd = a.ndim();
    if index.len() != nd {
        return Err(ArrayError::Value(format!(
            "blocks needs {nd} block indices (one per axis) for an array of {} blocks, got {}",
            fmt_shape(&a.numblocks()),
            index.len()
        )));
    }
    let ranges = index
        .iter()
        .zip(a.chunks.iter())
        .enumerate()
        .map(|(d, (&i, sizes))| {
            let n = sizes.len() as i64;
            let k = if i < 0 { i + n } else { i };
            if !(0..n).contains(&k) {
                return Err(ArrayError::Value(format!(
                    "block index {i} is out of bounds for axis {d} with {n} blocks"
                )));
            }
            let start = offsets(sizes)[k as usize];
            let stop = start + sizes[k as usize];
            Ok(Index::Range { start: Some(start as i64), stop: Some(stop as i64), step: 1 })
        })
        .collect::<Result<Vec<_>, _>>()?;
    slice(ctx, a, &ranges)
}

/// `x.blocks` listed: every block, in C order, as an array of one block.
pub fn all_blocks(ctx: &Ctx, a: &Array) -> Result<Vec<Array>, ArrayError> {
    a.known("blocks")?;
    grid(&a.numblocks())
        .into_iter()
        .map(|idx| block_at(ctx, a, &idx.iter().map(|&i| i as i64).collect::<Vec<_>>()))
        .collect()
}

/// Position `i` along an axis of `n` (negative from the end), or NumPy's
/// error naming the index and the size.
pub fn row_index(i: i64, n: usize) -> Result<usize, ArrayError> {
    if i < 0 { i.checked_add(n as i64) } else { Some(i) }
        .filter(|&r| r >= 0 && (r as u64) < n as u64)
        .map(|r| r as usize)
        .ok_or_else(|| ArrayError::Value(format!("index {i} is out of bounds for axis 0 with size {n}")))
}

/// `x[[i, j, k]]`: NumPy's fancy indexing along axis 0, the rows named in
/// that order (a negative index counts from the end). Each run of indices
/// that fall in one row block becomes one output block, cut by a task on
/// that block alone, so no block is read whole into another.
pub fn take(ctx: &Ctx, a: &Array, index: &[i64]) -> Result<Array, ArrayError> {
    a.known("fancy indexing")?;
    if a.ndim() == 0 {
        return Err(ArrayError::Shape(
            "too many indices for array: array is 0-dimensional, but 1 were indexed".into(),
        ));
    }
    let n = a.shape()[0];
    let starts = offsets(&a.chunks[0]);
    let mut pieces: Vec<(usize, Vec<usize>)> = Vec::new();
    for &i in index {
        let r = row_index(i, n)?;
        let b = starts.partition_point(|&s| s <= r).saturating_sub(1);
        let local = r - starts[b];
        match pieces.last_mut() {
            Some((pb, rows)) if *pb == b => rows.push(local),
            _ => pieces.push((b, vec![local])),
        }
    }
    if pieces.is_empty() {
        // No rows: one empty block, cut from the first.
        pieces.push((0, Vec::new()));
    }
    let mut t = Tokenizer::new();
    t.str("take").str(&a.name).serde(&index);
    let name: Arc<str> = Arc::from(format!("take-{}", t.finish()));
    let rest = a.numblocks()[1..].to_vec();
    let mut tasks = Vec::new();
    for (p, (b, rows)) in pieces.iter().enumerate() {
        for tail in grid(&rest) {
            let mut from = vec![*b];
            from.extend(&tail);
            let mut to = vec![p];
            to.extend(&tail);
            let op = ArrayOp::TakeRows(rows.clone());
            tasks.push(array_task(ctx, block(&name, &to), op, vec![Arg::Dep(0)], vec![a.block_key(&from)]));
        }
    }
    let mut chunks = a.chunks.as_ref().clone();
    chunks[0] = pieces.iter().map(|(_, r)| r.len()).collect();
    Ok(finish(name.to_string(), tasks, vec![a.layer.clone()], chunks, a.dtype))
}

/// `x.slice(index)`: missing trailing entries mean whole axes.
pub fn slice(ctx: &Ctx, a: &Array, index: &[Index]) -> Result<Array, ArrayError> {
    a.known("slicing")?;
    let nd = a.ndim();
    if index.len() > nd {
        return Err(ArrayError::Value(format!(
            "too many indices for array: array is {nd}-dimensional, but {} were indexed",
            index.len()
        )));
    }
    let plans: Vec<AxisPlan> = (0..nd)
        .map(|d| plan_axis(index.get(d).copied().unwrap_or(Index::Full), &a.chunks[d], d))
        .collect::<Result<_, _>>()?;
    let mut t = Tokenizer::new();
    t.str("getitem").str(&a.name).serde(index);
    let name = t.name("getitem");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let sub: Vec<usize> = plans.iter().map(|(k, _)| k.len()).collect();
    let mut tasks = Vec::new();
    for idx in grid(&sub) {
        let src: Vec<usize> = idx.iter().enumerate().map(|(d, &k)| plans[d].0[k].0).collect();
        let ranges: Vec<(AxisSlice, bool)> =
            idx.iter().enumerate().map(|(d, &k)| (plans[d].0[k].1, plans[d].1)).collect();
        let out: Vec<u32> =
            idx.iter().enumerate().filter(|(d, _)| !plans[*d].1).map(|(_, &k)| k as u32).collect();
        tasks.push(array_task(
            ctx,
            Key::block(key_name.clone(), &out),
            ArrayOp::Slice(ranges),
            vec![Arg::Dep(0)],
            vec![a.block_key(&src)],
        ));
    }
    let chunks: Vec<Vec<usize>> = plans
        .iter()
        .filter(|(_, drop)| !drop)
        .map(|(kept, _)| kept.iter().map(|(_, r)| count(r)).collect())
        .collect();
    Ok(finish(name, tasks, vec![a.layer.clone()], chunks, a.dtype))
}

/// The same index on one in-memory array: the range of each axis.
pub fn local_ranges(index: &[Index], shape: &[usize]) -> Result<Vec<(AxisSlice, bool)>, ArrayError> {
    if index.len() > shape.len() {
        return Err(ArrayError::Value(format!(
            "too many indices for array: array is {}-dimensional, but {} were indexed",
            shape.len(),
            index.len()
        )));
    }
    (0..shape.len())
        .map(|d| {
            let (kept, drop) = plan_axis(index.get(d).copied().unwrap_or(Index::Full), &[shape[d]], d)?;
            Ok((kept.first().map(|k| k.1).unwrap_or(AxisSlice { start: 0, stop: 0, step: 1 }), drop))
        })
        .collect()
}
