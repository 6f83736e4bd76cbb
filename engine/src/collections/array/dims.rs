//! Axes added, dropped or masked without moving data between blocks:
//! `squeeze`, `expand_dims`, `tril`/`triu`, `broadcast_to`. Each is one
//! task per block, so the chunking carries through.

use std::sync::Arc;

use super::base::{Array, Ctx, array_task, block, finish, offsets};
use super::chunks::ChunkSpec;
use super::create::full;
use super::elementwise::{Operand, where_};
use crate::array::dtype::{DType, Scalar};
use crate::array::error::{ArrayError, fmt_shape, norm_axes, norm_axis};
use crate::array::op::ArrayOp;
use crate::graph::token::Tokenizer;
use crate::ops::Arg;

/// One task per block of `a`: `op(block)` at the index `index(idx)`.
fn per_block(
    ctx: &Ctx,
    a: &Array,
    name: String,
    chunks: Vec<Vec<usize>>,
    dtype: DType,
    step: impl Fn(&[usize]) -> (Vec<usize>, ArrayOp),
) -> Array {
    let key_name: Arc<str> = Arc::from(name.as_str());
    let tasks = a
        .block_indices()
        .into_iter()
        .map(|idx| {
            let (out, op) = step(&idx);
            array_task(ctx, block(&key_name, &out), op, vec![Arg::Dep(0)], vec![a.block_key(&idx)])
        })
        .collect();
    finish(name, tasks, vec![a.layer.clone()], chunks, dtype)
}

/// `x.squeeze(axis)`: drop axes of length 1 (all of them when `None`);
/// naming an axis of another length is an error, as NumPy's.
pub fn squeeze(ctx: &Ctx, a: &Array, axes: Option<&[i64]>) -> Result<Array, ArrayError> {
    a.known("squeeze")?;
    let shape = a.shape();
    let drop: Vec<usize> = match axes {
        None => (0..a.ndim()).filter(|&d| shape[d] == 1).collect(),
        Some(ax) => norm_axes(ax, a.ndim())?,
    };
    if let Some(&d) = drop.iter().find(|&&d| shape[d] != 1) {
        return Err(ArrayError::Value(format!(
            "cannot select an axis to squeeze out which has size not equal to one (axis {d} of shape {})",
            fmt_shape(&shape)
        )));
    }
    if drop.is_empty() {
        return Ok(a.clone());
    }
    let mut t = Tokenizer::new();
    t.str("squeeze").str(&a.name).serde(&drop);
    let chunks: Vec<Vec<usize>> =
        a.chunks.iter().enumerate().filter(|(d, _)| !drop.contains(d)).map(|(_, c)| c.clone()).collect();
    Ok(per_block(ctx, a, t.name("squeeze"), chunks, a.dtype, |idx| {
        let out: Vec<usize> =
            idx.iter().enumerate().filter(|(d, _)| !drop.contains(d)).map(|(_, &i)| i).collect();
        let bshape: Vec<usize> =
            idx.iter().enumerate().filter(|(d, _)| !drop.contains(d)).map(|(d, &i)| a.chunks[d][i]).collect();
        (out, ArrayOp::Reshape(bshape))
    }))
}

/// `expand_dims(x, axis)`: a new axis of length 1 at `axis` (counted in
/// the result, so `-1` appends).
pub fn expand_dims(ctx: &Ctx, a: &Array, axis: i64) -> Result<Array, ArrayError> {
    a.known("expand_dims")?;
    let ax = norm_axis(axis, a.ndim() + 1)?;
    let mut t = Tokenizer::new();
    t.str("expand_dims").str(&a.name).u64(ax as u64);
    let mut chunks = a.chunks.to_vec();
    chunks.insert(ax, vec![1]);
    Ok(per_block(ctx, a, t.name("expand_dims"), chunks, a.dtype, |idx| {
        let mut out = idx.to_vec();
        out.insert(ax, 0);
        (out, ArrayOp::ExpandDims(ax))
    }))
}

/// `tril(x, k)` / `triu(x, k)` of a 2-d array.
pub fn tri(ctx: &Ctx, a: &Array, k: i64, upper: bool) -> Result<Array, ArrayError> {
    let what = if upper { "triu" } else { "tril" };
    a.known(what)?;
    if a.ndim() != 2 {
        return Err(ArrayError::Value(format!("{what} needs a 2-d array, got {} dimensions", a.ndim())));
    }
    let (rows, cols) = (offsets(&a.chunks[0]), offsets(&a.chunks[1]));
    let mut t = Tokenizer::new();
    t.str(what).str(&a.name).serde(&k);
    Ok(per_block(ctx, a, t.name(what), a.chunks.to_vec(), a.dtype, |idx| {
        (idx.to_vec(), ArrayOp::Tri { k, upper, row0: rows[idx[0]], col0: cols[idx[1]] })
    }))
}

/// `broadcast_to(x, shape)`: `x` repeated along new or length-1 axes, as
/// NumPy's broadcasting; an error where the shapes do not broadcast to
/// exactly `shape`.
pub fn broadcast_to(ctx: &Ctx, a: &Array, shape: &[usize]) -> Result<Array, ArrayError> {
    let ones = full(ctx, shape, &ChunkSpec::Auto, Scalar::Bool(true), DType::Bool)?;
    let refuse = || {
        ArrayError::Shape(format!(
            "cannot broadcast an array of shape {} to {}",
            fmt_shape(&a.shape()),
            fmt_shape(shape)
        ))
    };
    if a.ndim() > shape.len() {
        return Err(refuse());
    }
    let out = where_(ctx, &Operand::Array(ones), &Operand::Array(a.clone()), &Operand::Array(a.clone()))
        .map_err(|_| refuse())?;
    if out.shape() != shape {
        return Err(refuse());
    }
    Ok(out)
}
