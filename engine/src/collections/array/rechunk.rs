//! Cutting an array into other blocks: `rechunk`, and the common refinement
//! that lines up the blocks of operands.

use std::sync::Arc;

use super::base::{Array, Ctx, array_task, block, finish, grid, offsets, token_chunks};
use super::chunks::{ChunkSpec, normalize_chunks};
use crate::array::error::ArrayError;
use crate::array::op::ArrayOp;
use crate::array::shape::AxisSlice;
use crate::graph::token::Tokenizer;
use crate::ops::Arg;

/// Cut `a` into new blocks. Each output block joins the pieces of the input
/// blocks it overlaps (Dask's simple rechunk; no intermediate stage).
pub fn rechunk(ctx: &Ctx, a: &Array, spec: &ChunkSpec) -> Result<Array, ArrayError> {
    a.known("rechunk")?;
    let shape = a.shape();
    let new = normalize_chunks(spec, &shape, a.dtype)?;
    rechunk_to(ctx, a, new)
}

pub(super) fn rechunk_to(ctx: &Ctx, a: &Array, new: Vec<Vec<usize>>) -> Result<Array, ArrayError> {
    if new == *a.chunks {
        return Ok(a.clone());
    }
    let mut t = Tokenizer::new();
    t.str("rechunk").str(&a.name);
    token_chunks(&mut t, &new);
    let name = t.name("rechunk");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let old_off: Vec<Vec<usize>> = a.chunks.iter().map(|c| offsets(c)).collect();
    let new_off: Vec<Vec<usize>> = new.iter().map(|c| offsets(c)).collect();
    // For each axis and new block: the old blocks it overlaps, and the
    // range inside each.
    let overlaps: Vec<Vec<Vec<(usize, AxisSlice)>>> = (0..new.len())
        .map(|d| {
            (0..new[d].len())
                .map(|j| {
                    let (lo, hi) = (new_off[d][j], new_off[d][j] + new[d][j]);
                    (0..a.chunks[d].len())
                        .filter_map(|i| {
                            let (olo, ohi) = (old_off[d][i], old_off[d][i] + a.chunks[d][i]);
                            let (s, e) = (lo.max(olo), hi.min(ohi));
                            (s < e || (lo == hi && i == 0)).then_some((
                                i,
                                AxisSlice { start: s.saturating_sub(olo), stop: e.max(s) - olo, step: 1 },
                            ))
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let numblocks: Vec<usize> = new.iter().map(Vec::len).collect();
    let mut tasks = Vec::new();
    for idx in grid(&numblocks) {
        let per_axis: Vec<&Vec<(usize, AxisSlice)>> =
            idx.iter().enumerate().map(|(d, &j)| &overlaps[d][j]).collect();
        let sub: Vec<usize> = per_axis.iter().map(|v| v.len()).collect();
        let mut deps = Vec::new();
        let mut pieces = Vec::new();
        for s in grid(&sub) {
            let old: Vec<usize> = s.iter().enumerate().map(|(d, &k)| per_axis[d][k].0).collect();
            pieces.push(s.iter().enumerate().map(|(d, &k)| per_axis[d][k].1).collect());
            deps.push(a.block_key(&old));
        }
        let args = (0..deps.len()).map(|i| Arg::Dep(i as u32)).collect();
        let key = block(&key_name, &idx);
        tasks.push(array_task(ctx, key, ArrayOp::Rechunk { pieces, numblocks: sub }, args, deps));
    }
    Ok(finish(name, tasks, vec![a.layer.clone()], new, a.dtype))
}

/// Common block boundaries of several chunkings of one axis.
pub(super) fn refine(chunkings: &[&Vec<usize>]) -> Vec<usize> {
    let mut cuts: Vec<usize> = chunkings.iter().flat_map(|c| offsets(c).into_iter().skip(1)).collect();
    let total: usize = chunkings.first().map(|c| c.iter().sum()).unwrap_or(0);
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut prev = 0;
    for c in cuts.into_iter().chain(std::iter::once(total)) {
        if c > prev {
            out.push(c - prev);
            prev = c;
        }
    }
    if out.is_empty() {
        out.push(0);
    }
    out
}
