//! Users' GPU kernels on lazy arrays: an `elementwise_kernel` is one more
//! elementwise layer (broadcasting and chunk alignment as `+`, and fused
//! with its neighbours at run time); a `reduction_kernel` is its map as an
//! elementwise layer and a tree reduction with the user's fold;
//! `map_blocks_gpu` launches a `raw_kernel` on every block.

use std::sync::Arc;

use super::base::{Array, Ctx};
use super::elementwise::{Operand, elementwise};
use super::reduction::{TreeOps, tree};
use crate::array::error::{ArrayError, norm_axes};
use crate::array::gpu::raw::RawLaunch;
use crate::array::gpu::user::{ArgType, ElementwiseSpec, RawSpec, ReductionSpec};
use crate::array::op::ArrayOp;
use crate::graph::token::Tokenizer;

fn arg_types(inputs: &[Operand]) -> Vec<ArgType> {
    inputs
        .iter()
        .map(|o| match o {
            Operand::Array(a) => ArgType::Array(a.dtype),
            Operand::Scalar(s) => ArgType::Scalar(*s),
        })
        .collect()
}

/// `k.call(x, y, ...)` for an `elementwise_kernel`.
pub fn user_elementwise(ctx: &Ctx, spec: &ElementwiseSpec, inputs: &[Operand]) -> Result<Array, ArrayError> {
    let f = spec.bind(&arg_types(inputs))?;
    let out = f.out.1;
    elementwise(ctx, &spec.name, ArrayOp::Kernel(f), inputs, out)
}

/// `k.call(x, ..., #{axis, keepdims})` for a `reduction_kernel`: the map
/// over the broadcast inputs, folded over `axes` (all when `None`).
pub fn user_reduction(
    ctx: &Ctx,
    spec: &ReductionSpec,
    inputs: &[Operand],
    axes: Option<&[i64]>,
    keepdims: bool,
) -> Result<Array, ArrayError> {
    let b = spec.bind(&arg_types(inputs))?;
    let mapped =
        elementwise(ctx, &format!("{}-map", spec.name), ArrayOp::Kernel(b.map.clone()), inputs, b.fold.acc)?;
    let nd = mapped.ndim();
    let axes: Vec<usize> = match axes {
        None => (0..nd).collect(),
        Some(ax) => norm_axes(ax, nd)?,
    };
    // `_in_ind.size()` and `_out_ind.size()` need every length.
    mapped.known(&spec.name)?;
    let shape = mapped.shape();
    let in_n: usize = axes.iter().map(|&d| shape[d]).product();
    let out_n: usize = (0..nd).filter(|d| !axes.contains(d)).map(|d| shape[d]).product();
    let sizes = (in_n as i64, out_n as i64);
    let mut t = Tokenizer::new();
    t.str(&spec.name).serde(spec).str(&mapped.name).serde(&(&axes, keepdims));
    let token = t.finish();
    let (fold, post) = (b.fold.clone(), b.post.clone());
    let ops = TreeOps {
        partial: &|_: &[usize]| ArrayOp::KernelPartial { fold: fold.clone(), axes: axes.clone() },
        combine: &|| ArrayOp::KernelCombine { fold: fold.clone() },
        aggregate: &|| ArrayOp::KernelAggregate {
            fold: fold.clone(),
            post: post.clone(),
            axes: axes.clone(),
            keepdims,
            sizes,
        },
    };
    tree(ctx, &mapped, &axes, keepdims, None, &spec.name, &token, post.out.1, &ops)
}

/// `x.map_blocks_gpu(k, #{grid, block, shared_mem, args, dtype})`.
pub fn map_blocks_gpu(
    ctx: &Ctx,
    a: &Array,
    kernel: &RawSpec,
    launch: RawLaunch,
) -> Result<Array, ArrayError> {
    launch.check()?;
    let dtype = launch.dtype;
    let op = ArrayOp::RawBlocks { kernel: Arc::new(kernel.clone()), launch };
    elementwise(ctx, &kernel.name, op, &[Operand::Array(a.clone())], dtype)
}
