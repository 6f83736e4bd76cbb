//! Order statistics of lazy arrays: `median` and `percentile` (exact: each
//! lane is brought into one block, as `da.median` does, where Dask's
//! `percentile` merges approximate per-block answers), and `topk` /
//! `argtopk` (each block's k candidates, then the k best of those).

use std::sync::Arc;

use super::base::{Array, Ctx, array_task, block, finish, grid, offsets};
use super::rechunk::rechunk_to;
use super::structure::reshape;
use crate::array::dtype::{DType, Scalar};
use crate::array::error::{ArrayError, norm_axes, norm_axis};
use crate::array::op::ArrayOp;
use crate::array::order::check_quantiles;
use crate::graph::token::Tokenizer;
use crate::ops::Arg;

/// Quantiles `qs` (fractions) of `a` over `axes` (all when `None`): with
/// `q_axis` a leading axis of `qs.len()`, else the one quantile `qs[0]`.
/// `median` averages the two middle values, as `np.median`.
pub fn quantile(
    ctx: &Ctx,
    a: &Array,
    qs: &[f64],
    q_axis: bool,
    axes: Option<&[i64]>,
    keepdims: bool,
    median: bool,
) -> Result<Array, ArrayError> {
    let what = if median { "median" } else { "percentile" };
    a.known(what)?;
    check_quantiles(qs)?;
    let nd = a.ndim();
    let axes: Vec<usize> = match axes {
        None => (0..nd).collect(),
        Some(ax) => norm_axes(ax, nd)?,
    };
    let shape = a.shape();
    // Every reduced axis in one block; the others as they are.
    let whole: Vec<Vec<usize>> =
        (0..nd).map(|d| if axes.contains(&d) { vec![shape[d]] } else { a.chunks[d].clone() }).collect();
    let r = rechunk_to(ctx, a, whole)?;
    let mut t = Tokenizer::new();
    t.str(what).str(&r.name).serde(&(qs, &axes, keepdims, q_axis, median));
    let name = t.name(what);
    let key_name: Arc<str> = Arc::from(name.as_str());
    let op = ArrayOp::Quantile { qs: qs.to_vec(), axes: axes.clone(), keepdims, q_axis, median };
    let tasks = r
        .block_indices()
        .into_iter()
        .map(|idx| {
            let mut out: Vec<usize> = if q_axis { vec![0] } else { Vec::new() };
            out.extend(
                idx.iter().enumerate().filter(|(d, _)| keepdims || !axes.contains(d)).map(|(_, &i)| i),
            );
            array_task(ctx, block(&key_name, &out), op.clone(), vec![Arg::Dep(0)], vec![r.block_key(&idx)])
        })
        .collect();
    let mut chunks: Vec<Vec<usize>> = if q_axis { vec![vec![qs.len()]] } else { Vec::new() };
    for (d, c) in r.chunks.iter().enumerate() {
        if !axes.contains(&d) {
            chunks.push(c.clone());
        } else if keepdims {
            chunks.push(vec![1]);
        }
    }
    Ok(finish(name, tasks, vec![r.layer.clone()], chunks, a.dtype.to_float()))
}

/// `topk(x, k, axis)` (`indices`: `argtopk`): the `k` largest along
/// `axis`, largest first (`k < 0`: the `|k|` smallest, smallest first),
/// as `da.topk`. Each block gives its candidates; one task per lane of
/// blocks picks the best of them.
pub fn topk(ctx: &Ctx, a: &Array, k: i64, axis: i64, indices: bool) -> Result<Array, ArrayError> {
    let what = if indices { "argtopk" } else { "topk" };
    a.known(what)?;
    let ax = norm_axis(axis, a.ndim())?;
    let n = a.shape()[ax];
    let want = k.unsigned_abs() as usize;
    if k == 0 || want > n {
        return Err(ArrayError::Value(format!(
            "{what} needs 0 < |k| <= {n} (the length of axis {ax}), got k = {k}"
        )));
    }
    let mut t = Tokenizer::new();
    t.str(what).str(&a.name).serde(&(k, ax));
    let tok = t.finish();
    let cand: Arc<str> = Arc::from(format!("{what}-chunk-{tok}"));
    let name = format!("{what}-{tok}");
    let out: Arc<str> = Arc::from(name.as_str());
    let starts = offsets(&a.chunks[ax]);
    let mut tasks = Vec::new();
    for idx in a.block_indices() {
        let op = ArrayOp::TopK { k, axis: ax, offset: starts[idx[ax]] };
        tasks.push(array_task(ctx, block(&cand, &idx), op, vec![Arg::Dep(0)], vec![a.block_key(&idx)]));
    }
    let mut numblocks = a.numblocks();
    let along = numblocks[ax];
    numblocks[ax] = 1;
    for base in grid(&numblocks) {
        let deps: Vec<_> = (0..along)
            .map(|j| {
                let mut i = base.clone();
                i[ax] = j;
                block(&cand, &i)
            })
            .collect();
        let args = (0..deps.len() as u32).map(Arg::Dep).collect();
        let op = ArrayOp::TopKMerge { k, axis: ax, indices };
        tasks.push(array_task(ctx, block(&out, &base), op, args, deps));
    }
    let mut chunks = a.chunks.to_vec();
    chunks[ax] = vec![want];
    let dtype = if indices { DType::I64 } else { a.dtype };
    Ok(finish(name, tasks, vec![a.layer.clone()], chunks, dtype))
}

/// `argwhere(x)` (`axis: None`, `[n, ndim]`) or one coordinate of
/// `nonzero(x)` (`axis: Some(d)`, 1-d): the positions of the non-zero
/// elements in C order, in blocks whose sizes are known once computed.
/// The array is flattened first (in row bands, as `mask` does), so the
/// blocks come in C order of the elements.
pub fn argwhere(ctx: &Ctx, x: &Array, axis: Option<usize>) -> Result<Array, ArrayError> {
    let what = if axis.is_some() { "nonzero" } else { "argwhere" };
    x.known(what)?;
    let shape = x.shape();
    let flat = if x.ndim() == 1 { x.clone() } else { reshape(ctx, x, &[-1])? };
    let starts = offsets(&flat.chunks[0]);
    let mut t = Tokenizer::new();
    t.str(what).str(&flat.name).serde(&(&shape, axis));
    let name = t.name(what);
    let key_name: Arc<str> = Arc::from(name.as_str());
    let mut tasks = Vec::new();
    for idx in flat.block_indices() {
        let op = ArrayOp::ArgWhere { offset: starts[idx[0]], shape: shape.clone(), axis };
        let out = if axis.is_some() { vec![idx[0]] } else { vec![idx[0], 0] };
        tasks.push(array_task(
            ctx,
            block(&key_name, &out),
            op,
            vec![Arg::Dep(0)],
            vec![flat.block_key(&idx)],
        ));
    }
    let mut chunks = vec![vec![0; flat.nblocks()]];
    if axis.is_none() {
        chunks.push(vec![shape.len()]);
    }
    let mut r = finish(name, tasks, vec![flat.layer.clone()], chunks, DType::I64);
    r.unknown = true;
    Ok(r)
}

/// `isin(x, values)`: whether each element equals one of `values`.
pub fn isin(ctx: &Ctx, x: &Array, values: &[Scalar]) -> Result<Array, ArrayError> {
    let mut t = Tokenizer::new();
    t.str("isin").str(&x.name).serde(&values);
    let name = t.name("isin");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let op = ArrayOp::IsIn(values.to_vec());
    let tasks = x
        .block_indices()
        .into_iter()
        .map(|idx| {
            array_task(ctx, block(&key_name, &idx), op.clone(), vec![Arg::Dep(0)], vec![x.block_key(&idx)])
        })
        .collect();
    let mut r = finish(name, tasks, vec![x.layer.clone()], x.chunks.to_vec(), DType::Bool);
    r.unknown = x.unknown;
    Ok(r)
}
