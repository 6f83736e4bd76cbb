//! Element-wise operations with NumPy broadcasting and type promotion, and
//! `map_blocks` with user closures.

use std::sync::Arc;

use super::base::{Array, Ctx, block, finish, grid};
use super::rechunk::{rechunk_to, refine};
use crate::array::dtype::{DType, Scalar};
use crate::array::elementwise::{BinOp, UnOp, broadcast_shapes, result_dtype, unary_dtype};
use crate::array::error::ArrayError;
use crate::array::op::ArrayOp;
use crate::graph::task::Task;
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::{Arg, BlockCall, Func, Op};
use crate::value::Value;

/// One side of an elementwise expression.
#[derive(Clone, Debug)]
pub enum Operand {
    Array(Array),
    Scalar(Scalar),
}

/// An elementwise operation over arrays and scalars with broadcasting;
/// arrays whose chunks differ are first rechunked to common boundaries
/// (Dask's `unify_chunks`).
pub fn elementwise(
    ctx: &Ctx,
    label: &str,
    op: ArrayOp,
    inputs: &[Operand],
    out_dtype: DType,
) -> Result<Array, ArrayError> {
    let arrays: Vec<&Array> = inputs
        .iter()
        .filter_map(|o| match o {
            Operand::Array(a) => Some(a),
            Operand::Scalar(_) => None,
        })
        .collect();
    let Some(first) = arrays.first() else {
        return Err(ArrayError::Value(format!("{label} needs at least one array")));
    };
    if arrays.iter().any(|a| a.unknown) {
        return elementwise_unknown(ctx, label, op, inputs, &arrays, out_dtype);
    }
    let mut out_shape = first.shape();
    for a in &arrays[1..] {
        out_shape = broadcast_shapes(&out_shape, &a.shape())?;
    }
    let nd = out_shape.len();
    // Output chunks: per axis, the common refinement of the inputs that
    // span it (a broadcast axis of length 1 spans nothing).
    let mut out_chunks = Vec::with_capacity(nd);
    for (d, &n) in out_shape.iter().enumerate() {
        let spanning: Vec<&Vec<usize>> = arrays
            .iter()
            .filter_map(|a| {
                let k = d as isize - (nd - a.ndim()) as isize;
                (k >= 0 && a.shape()[k as usize] == n).then(|| &a.chunks[k as usize])
            })
            .collect();
        out_chunks.push(if spanning.is_empty() { vec![n] } else { refine(&spanning) });
    }
    // Rechunk inputs whose blocks differ from the common ones.
    let mut unified = Vec::with_capacity(inputs.len());
    for o in inputs {
        unified.push(match o {
            Operand::Array(a) => {
                let off = nd - a.ndim();
                let want: Vec<Vec<usize>> = (0..a.ndim())
                    .map(|k| {
                        if a.shape()[k] == out_shape[k + off] {
                            out_chunks[k + off].clone()
                        } else {
                            a.chunks[k].clone()
                        }
                    })
                    .collect();
                Operand::Array(rechunk_to(ctx, a, want)?)
            }
            s => s.clone(),
        });
    }
    let mut t = Tokenizer::new();
    t.str(label).serde(&op);
    for o in &unified {
        match o {
            Operand::Array(a) => t.str(&a.name),
            Operand::Scalar(s) => t.serde(s),
        };
    }
    let name = t.name(label);
    let key_name: Arc<str> = Arc::from(name.as_str());
    let op = Arc::new(op);
    let numblocks: Vec<usize> = out_chunks.iter().map(Vec::len).collect();
    let mut tasks = Vec::with_capacity(numblocks.iter().product());
    for idx in grid(&numblocks) {
        let mut deps = Vec::new();
        let mut args = Vec::with_capacity(unified.len());
        for o in &unified {
            args.push(match o {
                Operand::Array(a) => {
                    let off = nd - a.ndim();
                    let bidx: Vec<usize> = (0..a.ndim())
                        .map(|k| if a.chunks[k].len() == 1 { 0 } else { idx[k + off] })
                        .collect();
                    let key = a.block_key(&bidx);
                    let pos = deps.iter().position(|k| k == &key).unwrap_or_else(|| {
                        deps.push(key);
                        deps.len() - 1
                    });
                    Arg::Dep(pos as u32)
                }
                Operand::Scalar(s) => Arg::Lit(match *s {
                    Scalar::Bool(b) => Value::Bool(b),
                    Scalar::Int(i) => Value::Int(i),
                    Scalar::Float(f) => Value::Float(f),
                }),
            });
        }
        let key = block(&key_name, &idx);
        let mut task = Task::new(key, Op::Call { func: Func::Array(op.clone()), args }, deps);
        task.annotations = ctx.annotations.clone();
        tasks.push(task);
    }
    let layers = unified
        .iter()
        .filter_map(|o| match o {
            Operand::Array(a) => Some(a.layer.clone()),
            Operand::Scalar(_) => None,
        })
        .collect();
    Ok(finish(name, tasks, layers, out_chunks, out_dtype))
}

/// Elementwise work on arrays of unknown chunk sizes: allowed block by
/// block when every array has the same blocks (as `x[m] * 2 + x[m]`).
pub(super) fn elementwise_unknown(
    ctx: &Ctx,
    label: &str,
    op: ArrayOp,
    inputs: &[Operand],
    arrays: &[&Array],
    out_dtype: DType,
) -> Result<Array, ArrayError> {
    let first = arrays[0];
    if arrays.iter().any(|a| !a.unknown || a.chunks != first.chunks) {
        first.known(label)?;
        arrays.iter().find(|a| a.unknown).map_or(Ok(()), |a| a.known(label))?;
    }
    let mut t = Tokenizer::new();
    t.str(label).serde(&op);
    for o in inputs {
        match o {
            Operand::Array(a) => t.str(&a.name),
            Operand::Scalar(s) => t.serde(s),
        };
    }
    let name = t.name(label);
    let key_name: Arc<str> = Arc::from(name.as_str());
    let op = Arc::new(op);
    let tasks = first
        .block_indices()
        .into_iter()
        .map(|idx| {
            let mut deps = Vec::new();
            let args = inputs
                .iter()
                .map(|o| match o {
                    Operand::Array(a) => {
                        deps.push(a.block_key(&idx));
                        Arg::Dep(deps.len() as u32 - 1)
                    }
                    Operand::Scalar(s) => Arg::Lit(match *s {
                        Scalar::Bool(b) => Value::Bool(b),
                        Scalar::Int(i) => Value::Int(i),
                        Scalar::Float(f) => Value::Float(f),
                    }),
                })
                .collect();
            let key = block(&key_name, &idx);
            let mut task = Task::new(key, Op::Call { func: Func::Array(op.clone()), args }, deps);
            task.annotations = ctx.annotations.clone();
            task
        })
        .collect();
    let mut r = finish(
        name,
        tasks,
        arrays.iter().map(|a| a.layer.clone()).collect(),
        first.chunks.to_vec(),
        out_dtype,
    );
    r.unknown = true;
    Ok(r)
}

pub(super) fn operand_dtype(o: &Operand) -> (Option<DType>, Option<Scalar>) {
    match o {
        Operand::Array(a) => (Some(a.dtype), None),
        Operand::Scalar(s) => (None, Some(*s)),
    }
}

/// `a op b`.
pub fn binary(ctx: &Ctx, op: BinOp, a: &Operand, b: &Operand) -> Result<Array, ArrayError> {
    let (da, sa) = operand_dtype(a);
    let (db, sb) = operand_dtype(b);
    let out = result_dtype(op, da, db, [sa, sb]).map_err(|e| match e {
        ArrayError::Value(_) => ArrayError::DType(format!("{} needs an array on one side", op.symbol())),
        e => e,
    })?;
    elementwise(ctx, op.name(), ArrayOp::Binary(op), &[a.clone(), b.clone()], out)
}

/// `f(a)`.
pub fn unary(ctx: &Ctx, op: UnOp, a: &Array) -> Result<Array, ArrayError> {
    let out = unary_dtype(op, a.dtype)?;
    elementwise(ctx, op.name(), ArrayOp::Unary(op), &[Operand::Array(a.clone())], out)
}

/// `where(cond, a, b)`.
pub fn where_(ctx: &Ctx, cond: &Operand, a: &Operand, b: &Operand) -> Result<Array, ArrayError> {
    let out = match (operand_dtype(a), operand_dtype(b)) {
        ((Some(x), _), (Some(y), _)) => DType::promote(x, y),
        ((Some(x), _), (None, Some(s))) | ((None, Some(s)), (Some(x), _)) => x.promote_scalar(s),
        ((None, Some(x)), (None, Some(y))) => {
            let c = |s: Scalar| match s {
                Scalar::Bool(_) => DType::Bool,
                Scalar::Int(_) => DType::I64,
                Scalar::Float(_) => DType::F64,
            };
            DType::promote(c(x), c(y))
        }
        _ => DType::F64,
    };
    elementwise(ctx, "where", ArrayOp::Where, &[cond.clone(), a.clone(), b.clone()], out)
}

/// `a.astype(dtype)`.
pub fn astype(ctx: &Ctx, a: &Array, dtype: DType) -> Result<Array, ArrayError> {
    if a.dtype == dtype {
        return Ok(a.clone());
    }
    elementwise(ctx, "astype", ArrayOp::AsType(dtype), &[Operand::Array(a.clone())], dtype)
}

/// `x.to_gpu()`: every block copied to the GPU (`map_blocks(cupy.asarray)`).
/// Refused at once where there is no GPU.
pub fn to_gpu(ctx: &Ctx, a: &Array) -> Result<Array, ArrayError> {
    crate::array::gpu::default_device()?;
    elementwise(ctx, "to_gpu", ArrayOp::ToGpu, &[Operand::Array(a.clone())], a.dtype)
}

/// `x.to_cpu()`: every block copied to the host (`map_blocks(cupy.asnumpy)`).
pub fn to_cpu(ctx: &Ctx, a: &Array) -> Result<Array, ArrayError> {
    elementwise(ctx, "to_cpu", ArrayOp::ToCpu, &[Operand::Array(a.clone())], a.dtype)
}

/// A function to run on every block.
#[derive(Clone, Debug)]
pub struct BlockFn {
    pub func: Func,
    /// The function's name, for keys (`lambda` for closures).
    pub label: String,
    /// Identifies the function (its source and captured values).
    pub token: String,
}

/// `x.map_blocks(f)`: `f` called on every block; the result has `chunks`
/// (the input's, less `drop_axes`, when `None`) and `dtype`.
pub fn map_blocks(
    ctx: &Ctx,
    a: &Array,
    f: &BlockFn,
    chunks: Option<Vec<Vec<usize>>>,
    drop_axes: &[usize],
    dtype: DType,
) -> Result<Array, ArrayError> {
    for &d in drop_axes {
        if d >= a.ndim() {
            return Err(ArrayError::Axis { axis: d as i64, ndim: a.ndim() });
        }
        if a.chunks[d].len() != 1 {
            return Err(ArrayError::Value(format!(
                "map_blocks: axis {d} is dropped but has {} blocks; rechunk it whole (-1) first",
                a.chunks[d].len()
            )));
        }
    }
    let kept: Vec<usize> = (0..a.ndim()).filter(|d| !drop_axes.contains(d)).collect();
    let chunks_given = chunks.is_some();
    let chunks = chunks.unwrap_or_else(|| kept.iter().map(|&d| a.chunks[d].clone()).collect());
    let numblocks: Vec<usize> = chunks.iter().map(Vec::len).collect();
    let want: Vec<usize> = kept.iter().map(|&d| a.chunks[d].len()).collect();
    if numblocks != want {
        return Err(ArrayError::Value(format!(
            "map_blocks: chunks {chunks:?} give {numblocks:?} blocks, but the input has {want:?}"
        )));
    }
    let mut t = Tokenizer::new();
    t.str("map_blocks").str(&f.label).str(&f.token).str(&a.name).serde(&chunks).serde(&dtype);
    let name = t.name(&f.label);
    let key_name: Arc<str> = Arc::from(name.as_str());
    let unknown0 = a.unknown && !chunks_given && !drop_axes.contains(&0);
    let tasks = a
        .block_indices()
        .into_iter()
        .map(|idx| {
            let out: Vec<u32> = kept.iter().map(|&d| idx[d] as u32).collect();
            let shape = (0..chunks.len())
                .map(|d| (!(unknown0 && d == 0)).then(|| chunks[d][out[d] as usize]))
                .collect();
            let func = Func::Block(Arc::new(BlockCall { func: f.func.clone(), shape }));
            let key = Key::block(key_name.clone(), &out);
            let mut task =
                Task::new(key, Op::Call { func, args: vec![Arg::Dep(0)] }, vec![a.block_key(&idx)]);
            task.annotations = ctx.annotations.clone();
            task
        })
        .collect();
    let given = chunks_given;
    let mut r = finish(name, tasks, vec![a.layer.clone()], chunks, dtype);
    r.unknown = a.unknown && !given && !drop_axes.contains(&0);
    Ok(r)
}
