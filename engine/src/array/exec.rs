//! Running one array task on its dependency values.

use super::chunk::Chunk;
use super::create;
use super::dtype::Scalar;
use super::elementwise::{self, BinOp, Operand};
use super::error::ArrayError;
use super::op::ArrayOp;
use super::reduce::{self, Reduction};
use super::shape::{self, AxisSlice};
use crate::value::Value;

fn chunk_arg(v: &Value) -> Result<&Chunk, ArrayError> {
    match v {
        Value::Array(c) => Ok(c),
        other => Err(ArrayError::Value(format!("expected an array block, got {}", other.type_name()))),
    }
}

fn operand(v: &Value) -> Result<Operand<'_>, ArrayError> {
    Ok(match v {
        Value::Array(c) => Operand::Chunk(c),
        Value::Bool(b) => Operand::Scalar(Scalar::Bool(*b)),
        Value::Int(i) => Operand::Scalar(Scalar::Int(*i)),
        Value::Float(f) => Operand::Scalar(Scalar::Float(*f)),
        other => {
            return Err(ArrayError::Value(format!(
                "expected an array or a number, got {}",
                other.type_name()
            )));
        }
    })
}

fn partial_arg(v: &Value) -> Result<Vec<Chunk>, ArrayError> {
    match v {
        Value::List(items) => items.iter().map(|x| chunk_arg(x).cloned()).collect(),
        other => Err(ArrayError::Value(format!("expected a reduction partial, got {}", other.type_name()))),
    }
}

/// A QR value on the host: `[Q, R]`. The GPU's factored form (`[H, R,
/// tau]`) never comes here: its consumers all run on the device.
fn qr_parts(v: &Value) -> Result<Vec<Chunk>, ArrayError> {
    let parts = partial_arg(v)?;
    if parts.len() != 2 {
        return Err(ArrayError::Value(format!("a QR value has 2 parts, got {}", parts.len())));
    }
    Ok(parts)
}

fn partial_value(p: Vec<Chunk>) -> Value {
    Value::list(p.into_iter().map(Value::array).collect())
}

fn merged(red: Reduction, args: &[Value]) -> Result<Vec<Chunk>, ArrayError> {
    let mut it = args.iter();
    let mut acc = partial_arg(it.next().ok_or_else(|| ArrayError::Value("no partials to combine".into()))?)?;
    for v in it {
        acc = reduce::merge(red, &acc, &partial_arg(v)?)?;
    }
    Ok(acc)
}

fn arity(op: &ArrayOp, args: &[Value], n: usize) -> Result<(), ArrayError> {
    if args.len() == n {
        Ok(())
    } else {
        Err(ArrayError::Value(format!("{} takes {n} argument(s), got {}", op.name(), args.len())))
    }
}

/// Check that `map_blocks`' function gave a block of the promised shape
/// (`None`: any length on that axis).
pub fn check_block(v: &Value, promised: &[Option<usize>]) -> Result<(), ArrayError> {
    let fmt = |s: &[Option<usize>]| {
        let parts: Vec<String> = s.iter().map(|d| d.map_or("?".to_string(), |n| n.to_string())).collect();
        if parts.len() == 1 { format!("({},)", parts[0]) } else { format!("({})", parts.join(", ")) }
    };
    let Value::Array(c) = v else {
        return Err(ArrayError::Shape(format!(
            "map_blocks/blockwise: the function returned a value of type {}, not a block of shape {}; say what it returns (map_blocks: #{{chunks}}; blockwise: adjust_chunks, new_axes), or use a Delayed for other values",
            v.type_name(),
            fmt(promised)
        )));
    };
    let shape = c.shape();
    let fits =
        shape.len() == promised.len() && shape.iter().zip(promised).all(|(&n, p)| p.is_none_or(|p| p == n));
    if fits {
        return Ok(());
    }
    Err(ArrayError::Shape(format!(
        "map_blocks/blockwise: the function returned a block of shape {} where the array's chunks promise {}; say what it returns (map_blocks: #{{chunks}}, drop_axis; blockwise: adjust_chunks, new_axes)",
        super::error::fmt_shape(shape),
        fmt(promised)
    )))
}

/// Refuse a new block of `shape` that would not fit in memory.
fn fits(what: &str, shape: &[usize], dtype: super::dtype::DType) -> Result<(), ArrayError> {
    let elems = shape.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64));
    crate::memory::check(crate::memory::times(elems, dtype.itemsize() as u64), || {
        format!("a {what} block of shape {} {dtype}", super::error::fmt_shape(shape))
    })?;
    Ok(())
}

/// Run one array task: on a GPU when its blocks are there (or it makes
/// them there), else here.
pub fn execute(op: &ArrayOp, args: &[Value]) -> Result<Value, ArrayError> {
    if super::gpu::exec::wants_gpu(op, args) {
        return super::gpu::exec::execute(op, args, &execute_host);
    }
    execute_host(op, args)
}

/// Run one array task on host blocks.
pub fn execute_host(op: &ArrayOp, args: &[Value]) -> Result<Value, ArrayError> {
    // Blocks made from nothing are checked against the memory budget before
    // they are allocated; the others are no bigger than their inputs, or
    // (joins) are checked where they join.
    match op {
        ArrayOp::Random { shape, dtype, .. } => fits("random", shape, *dtype)?,
        ArrayOp::Full { shape, dtype, .. } => fits("full", shape, *dtype)?,
        ArrayOp::Arange { n, dtype, .. } | ArrayOp::Linspace { n, dtype, .. } => {
            fits(&op.name(), &[*n], *dtype)?
        }
        ArrayOp::Eye { rows, cols, dtype, .. } => fits("eye", &[*rows, *cols], *dtype)?,
        ArrayOp::Concat { .. } => {
            let bytes = args
                .iter()
                .map(|v| if let Value::Array(c) = v { c.nbytes() } else { 0 })
                .fold(0u64, u64::saturating_add);
            crate::memory::check(bytes, || format!("joining {} blocks", args.len()))?;
        }
        _ => {}
    }
    let one = |args: &[Value]| -> Result<Chunk, ArrayError> {
        arity(op, args, 1)?;
        chunk_arg(&args[0]).cloned()
    };
    Ok(match op {
        ArrayOp::Random { seed, shape, dist, dtype } => {
            Value::array(create::random(*seed, shape, *dist, *dtype))
        }
        ArrayOp::Full { shape, value, dtype } => Value::array(Chunk::full(shape, *value, *dtype)),
        ArrayOp::Arange { start, step, n, dtype } => Value::array(create::arange(*start, *step, *n, *dtype)),
        ArrayOp::Linspace { start, stop, total, offset, n, dtype } => {
            Value::array(create::linspace(*start, *stop, *total, *offset, *n, *dtype))
        }
        ArrayOp::Eye { rows, cols, k, dtype } => Value::array(create::eye(*rows, *cols, *k, *dtype)),
        ArrayOp::Binary(b) => {
            arity(op, args, 2)?;
            Value::array(elementwise::binary(*b, operand(&args[0])?, operand(&args[1])?)?)
        }
        ArrayOp::Unary(u) => Value::array(elementwise::unary(*u, &one(args)?)?),
        ArrayOp::Where => {
            arity(op, args, 3)?;
            Value::array(elementwise::where_(operand(&args[0])?, operand(&args[1])?, operand(&args[2])?)?)
        }
        ArrayOp::AsType(t) => Value::array(one(args)?.astype(*t)),
        ArrayOp::FromValue { shape, dtype } => {
            arity(op, args, 1)?;
            Value::array(super::from_value::block_of_value(&args[0], shape, *dtype)?)
        }
        ArrayOp::Partial { red, axes, place } => {
            partial_value(reduce::partial(*red, &one(args)?, axes, place)?)
        }
        ArrayOp::Combine { red } => partial_value(merged(*red, args)?),
        ArrayOp::Aggregate { red, axes, keepdims, out } => {
            Value::array(reduce::finalize(*red, &merged(*red, args)?, axes, *keepdims, *out)?)
        }
        ArrayOp::Transpose(axes) => Value::array(shape::transpose(&one(args)?, axes)?),
        ArrayOp::Slice(ranges) => Value::array(shape::slice(&one(args)?, ranges)?),
        ArrayOp::Concat { numblocks } => {
            let blocks = args.iter().map(|v| chunk_arg(v).cloned()).collect::<Result<Vec<_>, _>>()?;
            Value::array(shape::concat_grid(&blocks, numblocks)?)
        }
        ArrayOp::Matmul { nk } => {
            arity(op, args, 2 * nk)?;
            let blocks = args.iter().map(|v| chunk_arg(v).cloned()).collect::<Result<Vec<_>, _>>()?;
            Value::array(super::linalg::matmul_sum(&blocks[..*nk], &blocks[*nk..])?)
        }
        ArrayOp::Gram { nk } => {
            arity(op, args, *nk)?;
            let blocks = args.iter().map(|v| chunk_arg(v).cloned()).collect::<Result<Vec<_>, _>>()?;
            Value::array(super::linalg::gram_sum(&blocks)?)
        }
        ArrayOp::Item(k) => match args {
            [Value::List(items)] => items
                .get(*k)
                .cloned()
                .ok_or_else(|| ArrayError::Value(format!("no item {k} in a list of {}", items.len())))?,
            _ => return Err(ArrayError::Value("getitem expects one list".into())),
        },
        ArrayOp::FrameRows => match args {
            [Value::Frame(f)] => Value::array(Chunk::from_vec(&[1], vec![f.height() as i64])?),
            _ => return Err(ArrayError::Value("lengths expects one frame partition".into())),
        },
        ArrayOp::FromFrame { dtype, rows, flat } => match args {
            [Value::Frame(f)] => {
                Value::array(crate::frame::to_block::frame_block(&f.0, *dtype, *rows, *flat)?)
            }
            _ => return Err(ArrayError::Value("values expects one frame partition".into())),
        },
        ArrayOp::Qr => Value::list(super::linalg::qr(&one(args)?)?.into_iter().map(Value::array).collect()),
        ArrayOp::QrStack => {
            // A list is a stage-one `[Q, R]`; a block skipped stage one.
            let rs = args
                .iter()
                .map(|v| match v {
                    Value::List(_) => qr_parts(v)?
                        .get(1)
                        .cloned()
                        .ok_or_else(|| ArrayError::Value("QR parts missing".into())),
                    other => chunk_arg(other).cloned(),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let stacked = super::linalg::vstack(&rs)?;
            Value::list(super::linalg::qr(&stacked)?.into_iter().map(Value::array).collect())
        }
        ArrayOp::PlaceLike => {
            arity(op, args, 2)?;
            args[0].clone()
        }
        ArrayOp::QrFormQ => {
            arity(op, args, 1)?;
            Value::array(qr_parts(&args[0])?.swap_remove(0))
        }
        ArrayOp::QrQ { offset, rows } => {
            arity(op, args, 2)?;
            let (block, q2) = (qr_parts(&args[0])?, chunk_arg(&args[1])?);
            let Some(q) = block.first() else {
                return Err(ArrayError::Value("QR parts missing".into()));
            };
            let cols = q2.shape().get(1).copied().unwrap_or(0);
            let piece = shape::slice(
                q2,
                &[
                    (AxisSlice { start: *offset, stop: offset + rows, step: 1 }, false),
                    (AxisSlice { start: 0, stop: cols, step: 1 }, false),
                ],
            )?;
            Value::array(super::linalg::matmul_sum(std::slice::from_ref(q), &[piece])?)
        }
        ArrayOp::Svd => Value::list(super::linalg::svd(&one(args)?)?.into_iter().map(Value::array).collect()),
        ArrayOp::SvdVals => Value::list(vec![
            Value::Unit,
            Value::array(super::linalg::singular_values(&one(args)?)?),
            Value::Unit,
        ]),
        ArrayOp::Solve => {
            arity(op, args, 2)?;
            Value::array(super::linalg::solve(chunk_arg(&args[0])?, chunk_arg(&args[1])?)?)
        }
        ArrayOp::SolveUpper => {
            arity(op, args, 2)?;
            Value::array(super::linalg::solve_upper(chunk_arg(&args[0])?, chunk_arg(&args[1])?)?)
        }
        ArrayOp::AddAll => {
            let mut it = args.iter();
            let first =
                chunk_arg(it.next().ok_or_else(|| ArrayError::Value("nothing to add".into()))?)?.clone();
            let mut acc = first;
            for v in it {
                acc = elementwise::binary(BinOp::Add, Operand::Chunk(&acc), Operand::Chunk(chunk_arg(v)?))?;
            }
            Value::array(acc)
        }
        ArrayOp::NpyRead { path, header, rows, ranges } => {
            let band = super::npy::read_rows(std::path::Path::new(path), header, rows.0, rows.1)?;
            let r: Vec<(AxisSlice, bool)> = ranges.iter().map(|&x| (x, false)).collect();
            Value::array(shape::slice(&band, &r)?.to_contiguous())
        }
        ArrayOp::Mask => {
            arity(op, args, 2)?;
            Value::array(shape::mask(chunk_arg(&args[0])?, chunk_arg(&args[1])?)?)
        }
        ArrayOp::Unique => {
            let blocks = args
                .iter()
                .map(|v| chunk_arg(v).map(|c| shape::reshape(c, &[c.len()])))
                .collect::<Result<Result<Vec<_>, _>, _>>()??;
            let joined = shape::concat_grid(&blocks, &[blocks.len()])?;
            Value::array(shape::unique(&joined))
        }
        ArrayOp::Len => Value::Int(one(args)?.shape().first().copied().unwrap_or(1) as i64),
        ArrayOp::ZarrRead { path, ranges } => {
            let r: Vec<std::ops::Range<usize>> = ranges.iter().map(|&(a, b)| a..b).collect();
            Value::array(super::zarr::read(std::path::Path::new(path), &r)?)
        }
        ArrayOp::ZarrWrite { path, start } => {
            super::zarr::write(std::path::Path::new(path), start, &one(args)?)?;
            Value::Unit
        }
        ArrayOp::ExpandDims(axis) => Value::array(shape::expand_dims(&one(args)?, *axis)?),
        ArrayOp::Reshape(to) => Value::array(shape::reshape(&one(args)?, to)?),
        ArrayOp::ArgWhere { offset, shape, axis } => {
            Value::array(shape::argwhere(&one(args)?, *offset, shape, *axis)?)
        }
        ArrayOp::IsIn(values) => Value::array(shape::isin(&one(args)?, values)),
        ArrayOp::Cholesky { lower } => Value::array(super::linalg::cholesky(&one(args)?, *lower)?),
        ArrayOp::TakeRows(rows) => Value::array(shape::take_rows(&one(args)?, rows)?),
        ArrayOp::Tri { k, upper, row0, col0 } => {
            Value::array(shape::tri(&one(args)?, *k, *upper, *row0, *col0)?)
        }
        ArrayOp::Cumsum(axis) => Value::array(reduce::cumulative(&one(args)?, *axis, false)?),
        ArrayOp::Cumprod(axis) => Value::array(reduce::cumulative(&one(args)?, *axis, true)?),
        ArrayOp::Quantile { qs, axes, keepdims, q_axis, median } => {
            Value::array(super::order::quantile(&one(args)?, qs, axes, *keepdims, *q_axis, *median)?)
        }
        ArrayOp::TopK { k, axis, offset } => {
            let (v, i) = super::order::topk(&one(args)?, None, *k, *axis, *offset)?;
            partial_value(vec![v, i])
        }
        ArrayOp::TopKMerge { k, axis, indices } => {
            let mut vals = Vec::with_capacity(args.len());
            let mut pos = Vec::with_capacity(args.len());
            for a in args {
                let [v, i] = <[Chunk; 2]>::try_from(partial_arg(a)?).map_err(|_| {
                    ArrayError::Value("internal: a topk candidate is [values, indices]".into())
                })?;
                vals.push(v);
                pos.push(i);
            }
            let mut grid = vec![1; vals.first().map_or(1, Chunk::ndim)];
            if let Some(g) = grid.get_mut(*axis) {
                *g = vals.len();
            }
            let (v, i) = super::order::topk(
                &shape::concat_grid(&vals, &grid)?,
                Some(&shape::concat_grid(&pos, &grid)?),
                *k,
                *axis,
                0,
            )?;
            Value::array(if *indices { i } else { v })
        }
        ArrayOp::Histogram { bins, lo, hi } => Value::array(reduce::histogram(&one(args)?, *bins, *lo, *hi)?),
        ArrayOp::OnGpu(_) | ArrayOp::ToGpu => {
            return Err(ArrayError::Value(format!("{} runs on a GPU", op.name())));
        }
        ArrayOp::ToCpu => one(args).map(Value::array)?,
        ArrayOp::Kernel(_)
        | ArrayOp::KernelPartial { .. }
        | ArrayOp::KernelCombine { .. }
        | ArrayOp::KernelAggregate { .. }
        | ArrayOp::RawBlocks { .. } => {
            return Err(ArrayError::Value(format!(
                "the GPU kernel {} takes GPU arrays, and this block is in host memory: move the array with x.to_gpu(), or make it with config(#{{\"array.backend\": \"gpu\"}})",
                op.name()
            )));
        }
        ArrayOp::Ml(ml) => ml.run(args)?,
        ArrayOp::Rechunk { pieces, numblocks } => {
            arity(op, args, pieces.len())?;
            let mut blocks = Vec::with_capacity(args.len());
            for (v, ranges) in args.iter().zip(pieces) {
                let r: Vec<(AxisSlice, bool)> = ranges.iter().map(|&x| (x, false)).collect();
                blocks.push(shape::slice(chunk_arg(v)?, &r)?);
            }
            Value::array(shape::concat_grid(&blocks, numblocks)?)
        }
    })
}
