//! Tree reductions (Dask's `reduction` with `split_every`): a partial per
//! block, then levels that each merge up to `split_every` neighbouring
//! partials along the reduced axes, then one aggregate per output block.
//! Memory stays bounded by the tree's width, whatever the array's size.

use std::sync::Arc;

use super::base::{Array, Ctx, array_task, block, finish, grid, offsets};
use crate::array::error::{ArrayError, norm_axes};
use crate::array::op::ArrayOp;
use crate::array::reduce::{BlockPlace, Reduction};
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::Arg;

/// Dask's default `split_every`: the fan-in of each tree node, shared out
/// over the reduced axes.
pub const SPLIT_EVERY: usize = 4;

/// `a.<red>(axis, keepdims)`; `axes = None` reduces every axis.
pub fn reduction(
    ctx: &Ctx,
    a: &Array,
    red: Reduction,
    axes: Option<&[i64]>,
    keepdims: bool,
    split_every: Option<usize>,
) -> Result<Array, ArrayError> {
    let nd = a.ndim();
    let axes: Vec<usize> = match axes {
        None => (0..nd).collect(),
        Some(ax) => norm_axes(ax, nd)?,
    };
    if red.is_arg() && axes.len() != 1 && axes.len() != nd {
        return Err(ArrayError::Value(format!(
            "{} takes one axis or none, got {} axes",
            red.name(),
            axes.len()
        )));
    }
    if matches!(red.plain(), Reduction::Min | Reduction::Max | Reduction::ArgMin | Reduction::ArgMax)
        && axes.iter().any(|&d| a.shape()[d] == 0)
    {
        return Err(ArrayError::Value(format!(
            "zero-size array to reduction operation {} which has no identity",
            red.name()
        )));
    }
    if red.is_arg() {
        a.known(red.name())?;
    }
    let out_dtype = red.out_dtype(a.dtype);
    let mut t = Tokenizer::new();
    // The whole reduction, ddof included: `std()` and `std(#{ddof: 1})`
    // of one array are different keys.
    t.str(red.name()).serde(&red).str(&a.name).serde(&(
        &axes,
        keepdims,
        split_every.unwrap_or(SPLIT_EVERY).max(2),
    ));
    let token = t.finish();
    let shape = a.shape();
    let offs: Vec<Vec<usize>> = a.chunks.iter().map(|c| offsets(c)).collect();
    let ops = TreeOps {
        partial: &|idx: &[usize]| {
            let place = if red.is_arg() {
                BlockPlace {
                    offsets: idx.iter().enumerate().map(|(d, &i)| offs[d][i]).collect(),
                    shape: shape.clone(),
                }
            } else {
                BlockPlace::default()
            };
            ArrayOp::Partial { red, axes: axes.clone(), place }
        },
        combine: &|| ArrayOp::Combine { red },
        aggregate: &|| ArrayOp::Aggregate { red, axes: axes.clone(), keepdims, out: out_dtype },
    };
    tree(ctx, a, &axes, keepdims, split_every, red.name(), &token, out_dtype, &ops)
}

/// The ops of each level of a tree reduction.
pub struct TreeOps<'a> {
    /// The chunk step of the block at this index.
    pub partial: &'a dyn Fn(&[usize]) -> ArrayOp,
    pub combine: &'a dyn Fn() -> ArrayOp,
    pub aggregate: &'a dyn Fn() -> ArrayOp,
}

/// A tree reduction of `a` over `axes` (sorted, checked) with `ops`.
#[allow(clippy::too_many_arguments)]
pub fn tree(
    ctx: &Ctx,
    a: &Array,
    axes: &[usize],
    keepdims: bool,
    split_every: Option<usize>,
    label: &str,
    token: &str,
    out_dtype: crate::array::dtype::DType,
    ops: &TreeOps<'_>,
) -> Result<Array, ArrayError> {
    let nd = a.ndim();
    let split = split_every.unwrap_or(SPLIT_EVERY).max(2);
    let per_axis = ((split as f64).powf(1.0 / axes.len().max(1) as f64) as usize).max(2);
    // Level 0: one partial per block.
    let chunk_name: Arc<str> = Arc::from(format!("{label}-chunk-{token}"));
    let mut numblocks = a.numblocks();
    let mut tasks = Vec::new();
    for idx in grid(&numblocks) {
        let op = (ops.partial)(&idx);
        tasks.push(array_task(ctx, block(&chunk_name, &idx), op, vec![Arg::Dep(0)], vec![a.block_key(&idx)]));
    }
    let mut prev = chunk_name;
    let mut level = 0;
    // Combine levels while some reduced axis would still need more than
    // one more merge.
    loop {
        let last = axes.iter().all(|&d| numblocks[d] <= per_axis);
        let next: Vec<usize> = (0..nd)
            .map(|d| {
                if axes.contains(&d) {
                    if last { 1 } else { numblocks[d].div_ceil(per_axis) }
                } else {
                    numblocks[d]
                }
            })
            .collect();
        let name: Arc<str> = if last {
            Arc::from(format!("{label}-aggregate-{token}"))
        } else {
            level += 1;
            Arc::from(format!("{label}-combine{level}-{token}"))
        };
        for idx in grid(&next) {
            // The inputs of this node: the group of previous blocks it covers.
            let ranges: Vec<(usize, usize)> = (0..nd)
                .map(|d| {
                    if axes.contains(&d) {
                        let w = if last { numblocks[d] } else { per_axis };
                        (idx[d] * w, ((idx[d] + 1) * w).min(numblocks[d]))
                    } else {
                        (idx[d], idx[d] + 1)
                    }
                })
                .collect();
            let sub: Vec<usize> = ranges.iter().map(|(s, e)| e - s).collect();
            let deps: Vec<Key> = grid(&sub)
                .into_iter()
                .map(|s| {
                    let src: Vec<usize> = s.iter().zip(&ranges).map(|(k, (lo, _))| lo + k).collect();
                    block(&prev, &src)
                })
                .collect();
            let args = (0..deps.len()).map(|i| Arg::Dep(i as u32)).collect();
            let op = if last { (ops.aggregate)() } else { (ops.combine)() };
            let out_idx: Vec<usize> = if last && !keepdims {
                idx.iter().enumerate().filter(|(d, _)| !axes.contains(d)).map(|(_, &i)| i).collect()
            } else {
                idx.clone()
            };
            tasks.push(array_task(ctx, block(&name, &out_idx), op, args, deps));
        }
        numblocks = next;
        prev = name;
        if last {
            break;
        }
    }
    let chunks: Vec<Vec<usize>> = (0..nd)
        .filter_map(|d| if axes.contains(&d) { keepdims.then(|| vec![1]) } else { Some(a.chunks[d].clone()) })
        .collect();
    // All levels live in one layer: they are one operation.
    let mut r = finish(prev.to_string(), tasks, vec![a.layer.clone()], chunks, out_dtype);
    r.unknown = a.unknown && !axes.contains(&0);
    Ok(r)
}

/// The user's functions of `reduction` (`da.reduction`): `chunk` makes
/// each block's partial, `combine` (when given) merges partials joined
/// along the reduced axes, `aggregate` makes the result from all of them
/// joined; each keeps the reduced axes at length 1.
pub struct UserReduction<'a> {
    pub chunk: &'a super::elementwise::BlockFn,
    pub combine: Option<&'a super::elementwise::BlockFn>,
    pub aggregate: &'a super::elementwise::BlockFn,
}

/// `reduction(x, chunk, aggregate, #{combine, axis, keepdims, ...})`:
/// `chunk` on every block, then partials joined `split_every` at a time
/// along the reduced axes and merged by `combine` until few are left, then
/// `aggregate` on all of them joined (Dask's `concatenate=True`).
pub fn user_tree(
    ctx: &Ctx,
    a: &Array,
    fns: &UserReduction<'_>,
    axes: Option<&[i64]>,
    keepdims: bool,
    split_every: Option<usize>,
    dtype: crate::array::dtype::DType,
) -> Result<Array, ArrayError> {
    use super::chunks::{AxisChunks, ChunkSpec};
    use super::elementwise::map_blocks;
    a.known("reduction")?;
    let nd = a.ndim();
    let axes: Vec<usize> = match axes {
        None => (0..nd).collect(),
        Some(ax) => norm_axes(ax, nd)?,
    };
    let split = split_every.unwrap_or(SPLIT_EVERY).max(2);
    let per_axis = ((split as f64).powf(1.0 / axes.len().max(1) as f64) as usize).max(2);
    // Each block's partial: length 1 along the reduced axes.
    let ones = |x: &Array| -> Vec<Vec<usize>> {
        (0..nd)
            .map(|d| if axes.contains(&d) { vec![1; x.chunks[d].len()] } else { x.chunks[d].clone() })
            .collect()
    };
    let mut p = map_blocks(ctx, a, fns.chunk, Some(ones(a)), &[], dtype)?;
    let joined = |x: &Array, group: Option<usize>| -> Result<Array, ArrayError> {
        let spec = (0..nd)
            .map(|d| match (axes.contains(&d), group) {
                (true, Some(g)) => AxisChunks::Size(g as i64),
                (true, None) => AxisChunks::Size(-1),
                (false, _) => AxisChunks::Sizes(x.chunks[d].clone()),
            })
            .collect();
        super::rechunk::rechunk(ctx, x, &ChunkSpec::PerAxis(spec))
    };
    if let Some(combine) = fns.combine {
        while axes.iter().map(|&d| p.chunks[d].len()).product::<usize>() > split {
            let grouped = joined(&p, Some(per_axis))?;
            p = map_blocks(ctx, &grouped, combine, Some(ones(&grouped)), &[], dtype)?;
        }
    }
    let all = joined(&p, None)?;
    let r = map_blocks(ctx, &all, fns.aggregate, Some(ones(&all)), &[], dtype)?;
    if keepdims {
        return Ok(r);
    }
    let drop: Vec<i64> = axes.iter().map(|&d| d as i64).collect();
    super::dims::squeeze(ctx, &r, Some(&drop))
}
