//! How a fit reads X: one statistic task per row block, merged in a tree
//! (fan-in 4, as Dask's `split_every`) into one packed block. X is taken
//! as a matrix of row blocks (one block across its columns); y, when given,
//! is cut as X's rows are.

use std::sync::Arc;

use super::op::MlOp;
use crate::array::chunk::Chunk;
use crate::array::dtype::DType;
use crate::array::elementwise::BinOp;
use crate::array::error::ArrayError;
use crate::array::op::ArrayOp;
use crate::collections::array::{
    Array, AxisChunks, ChunkSpec, Ctx, Operand, array_task, binary, block, finish, from_chunk, rechunk,
};
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::Arg;

/// Fan-in of each merge.
const FAN_IN: usize = 4;

/// `x` as row blocks spanning all its columns (a 1-d `x` is one column).
pub fn row_blocks(ctx: &Ctx, x: &Array) -> Result<Array, ArrayError> {
    x.known("a fit")?;
    match x.ndim() {
        1 => Ok(x.clone()),
        2 if x.chunks[1].len() == 1 => Ok(x.clone()),
        2 => rechunk(
            ctx,
            x,
            &ChunkSpec::PerAxis(vec![AxisChunks::Sizes(x.chunks[0].clone()), AxisChunks::Size(-1)]),
        ),
        n => {
            Err(ArrayError::Shape(format!("X must be a 2-d array (samples × features), got {n} dimensions")))
        }
    }
}

/// `y` cut into the row blocks of `x`.
pub fn rows_like(ctx: &Ctx, y: &Array, x: &Array) -> Result<Array, ArrayError> {
    y.known("a fit")?;
    if y.ndim() != 1 {
        return Err(ArrayError::Shape(format!("y must be a 1-d array, got {} dimensions", y.ndim())));
    }
    let (ny, nx) = (y.shape()[0], x.shape()[0]);
    if ny != nx {
        return Err(ArrayError::Shape(format!(
            "X has {nx} rows but y has {ny}: they must have the same number"
        )));
    }
    if y.chunks[0] == x.chunks[0] {
        return Ok(y.clone());
    }
    rechunk(ctx, y, &ChunkSpec::PerAxis(vec![AxisChunks::Sizes(x.chunks[0].clone())]))
}

/// The statistic `partial` of each row block of `x` (with `y`'s block as a
/// second argument), merged by `merge` into one block of `len` values.
pub fn row_statistic(
    ctx: &Ctx,
    x: &Array,
    y: Option<&Array>,
    partial: MlOp,
    merge: MlOp,
    len: usize,
) -> Result<Array, ArrayError> {
    let label = partial.name();
    let mut t = Tokenizer::new();
    t.str(label).str(&x.name).str(y.map_or("", |y| &y.name)).serde(&partial);
    let token = t.finish();
    let chunk_name: Arc<str> = Arc::from(format!("{label}-chunk-{token}"));
    let mut tasks = Vec::new();
    let nblocks = x.chunks[0].len();
    for i in 0..nblocks {
        let mut deps = vec![x.block_key(&vec![i, 0][..x.ndim()])];
        if let Some(y) = y {
            deps.push(y.block_key(&vec![i, 0][..y.ndim()]));
        }
        let args = (0..deps.len()).map(|k| Arg::Dep(k as u32)).collect();
        tasks.push(array_task(ctx, block(&chunk_name, &[i]), ArrayOp::Ml(partial.clone()), args, deps));
    }
    let mut prev = chunk_name;
    let mut n = nblocks;
    let mut level = 0;
    // At least one merge, so a one-block X gives its result under the final name.
    loop {
        let last = n <= FAN_IN;
        let next = if last { 1 } else { n.div_ceil(FAN_IN) };
        level += 1;
        let name: Arc<str> = Arc::from(if last {
            format!("{label}-{token}")
        } else {
            format!("{label}-merge{level}-{token}")
        });
        for j in 0..next {
            let deps: Vec<Key> =
                (j * FAN_IN..((j + 1) * FAN_IN).min(n)).map(|i| block(&prev, &[i])).collect();
            let deps = if last { (0..n).map(|i| block(&prev, &[i])).collect() } else { deps };
            let args = (0..deps.len()).map(|k| Arg::Dep(k as u32)).collect();
            tasks.push(array_task(ctx, block(&name, &[j]), ArrayOp::Ml(merge.clone()), args, deps));
        }
        prev = name;
        n = next;
        if last {
            break;
        }
    }
    let mut layers = vec![x.layer.clone()];
    if let Some(y) = y {
        layers.push(y.layer.clone());
    }
    Ok(finish(prev.to_string(), tasks, layers, vec![vec![len]], DType::F64))
}

/// Constants of a fitted model as a one-block array of `dtype` (X's float
/// type, so a transform of f32 data stays f32, as scikit-learn's does).
pub fn constant(ctx: &Ctx, values: Vec<f64>, shape: &[usize], dtype: DType) -> Result<Array, ArrayError> {
    let chunk = Chunk::from_vec(shape, values)?.astype(dtype);
    let whole = ChunkSpec::PerAxis(shape.iter().map(|_| AxisChunks::Size(-1)).collect());
    from_chunk(ctx, &chunk, &whole)
}

/// A one-block constant `c` moved to where `like`'s first block is: onto
/// its GPU when it has one (a task may not mix host and GPU blocks),
/// unchanged on the host.
pub fn placed_like(ctx: &Ctx, c: &Array, like: &Array) -> Result<Array, ArrayError> {
    if c.nblocks() != 1 || like.nblocks() == 0 {
        return Ok(c.clone());
    }
    let mut t = Tokenizer::new();
    t.str("place-like").str(&c.name).str(&like.name);
    let name = t.name("place-like");
    let key: Arc<str> = Arc::from(name.as_str());
    let idx = vec![0; c.ndim()];
    let task = array_task(
        ctx,
        block(&key, &idx),
        ArrayOp::PlaceLike,
        vec![Arg::Dep(0), Arg::Dep(1)],
        vec![c.block_key(&idx), like.block_key(&vec![0; like.ndim()])],
    );
    Ok(finish(name, vec![task], vec![c.layer.clone(), like.layer.clone()], c.chunks.to_vec(), c.dtype))
}

/// `a op b`, elementwise with broadcasting; `b`, a model's constant, is
/// placed where `a` is.
pub fn apply(ctx: &Ctx, op: BinOp, a: &Array, b: &Array) -> Result<Array, ArrayError> {
    let b = placed_like(ctx, b, a)?;
    binary(ctx, op, &Operand::Array(a.clone()), &Operand::Array(b))
}

/// `x @ w` for a model's constant `w`, placed where `x` is.
pub fn product(ctx: &Ctx, x: &Array, w: &Array) -> Result<Array, ArrayError> {
    crate::collections::array::matmul(ctx, x, &placed_like(ctx, w, x)?)
}

/// The float type a model's outputs on `x` have: f32 stays, the rest is f64.
pub fn float_of(x: &Array) -> DType {
    if x.dtype == DType::F32 { DType::F32 } else { DType::F64 }
}

/// `op` on each row block of `x`: a lazy array chunked like X's rows, with
/// `cols` columns (1-d without).
pub fn map_row_blocks(
    ctx: &Ctx,
    x: &Array,
    op: MlOp,
    cols: Option<usize>,
    dtype: DType,
) -> Result<Array, ArrayError> {
    let rows = row_blocks(ctx, x)?;
    let mut t = Tokenizer::new();
    t.str(op.name()).str(&rows.name).serde(&op);
    let name: Arc<str> = Arc::from(format!("{}-{}", op.name(), t.finish()));
    let tasks = (0..rows.chunks[0].len())
        .map(|i| {
            let idx: Vec<usize> = if cols.is_some() { vec![i, 0] } else { vec![i] };
            let src = rows.block_key(&vec![i, 0][..rows.ndim()]);
            array_task(ctx, block(&name, &idx), ArrayOp::Ml(op.clone()), vec![Arg::Dep(0)], vec![src])
        })
        .collect();
    let mut chunks = vec![rows.chunks[0].clone()];
    if let Some(c) = cols {
        chunks.push(vec![c]);
    }
    Ok(finish(name.to_string(), tasks, vec![rows.layer.clone()], chunks, dtype))
}
