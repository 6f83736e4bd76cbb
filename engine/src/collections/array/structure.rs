//! Operations that rearrange blocks: `concatenate`, `stack`, `reshape`,
//! and the scans and counts that run along them (`cumsum`, `histogram`).

use std::sync::Arc;

use super::base::{Array, Ctx, array_task, block, finish, grid};
use super::rechunk::{rechunk_to, refine};
use crate::array::dtype::DType;
use crate::array::elementwise::BinOp;
use crate::array::error::fmt_shape;
use crate::array::error::{ArrayError, norm_axis};
use crate::array::op::ArrayOp;
use crate::array::shape::AxisSlice;
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::Arg;

/// `concatenate([a, b, ...], axis)`: the arrays must agree on every other
/// axis (their blocks there are unified); the result's type is promoted.
pub fn concatenate(ctx: &Ctx, arrays: &[Array], axis: i64) -> Result<Array, ArrayError> {
    for a in arrays {
        a.known("concatenate")?;
    }
    let Some(first) = arrays.first() else {
        return Err(ArrayError::Value("concatenate needs at least one array".into()));
    };
    let nd = first.ndim();
    if nd == 0 {
        return Err(ArrayError::Value("zero-dimensional arrays cannot be concatenated".into()));
    }
    let ax = norm_axis(axis, nd)?;
    let shape0 = first.shape();
    for a in arrays {
        let s = a.shape();
        if a.ndim() != nd || (0..nd).any(|d| d != ax && s[d] != shape0[d]) {
            return Err(ArrayError::Shape(format!(
                "all the input array dimensions except for the concatenation axis must match exactly, but shapes {} and {} differ (axis {ax})",
                fmt_shape(&shape0),
                fmt_shape(&s)
            )));
        }
    }
    let dtype = arrays.iter().fold(first.dtype, |t, a| DType::promote(t, a.dtype));
    // Common blocks on the other axes.
    let mut common: Vec<Vec<usize>> = Vec::with_capacity(nd);
    for d in 0..nd {
        common.push(if d == ax {
            Vec::new()
        } else {
            refine(&arrays.iter().map(|a| &a.chunks[d]).collect::<Vec<_>>())
        });
    }
    let mut unified = Vec::with_capacity(arrays.len());
    for a in arrays {
        let want: Vec<Vec<usize>> =
            (0..nd).map(|d| if d == ax { a.chunks[d].clone() } else { common[d].clone() }).collect();
        unified.push(rechunk_to(ctx, a, want)?);
    }
    let mut t = Tokenizer::new();
    t.str("concatenate").u64(ax as u64).str(dtype.name());
    for a in &unified {
        t.str(&a.name);
    }
    let name = t.name("concatenate");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let mut tasks = Vec::new();
    let mut offset = 0;
    for a in &unified {
        for idx in a.block_indices() {
            let mut out = idx.clone();
            out[ax] += offset;
            tasks.push(array_task(
                ctx,
                block(&key_name, &out),
                ArrayOp::AsType(dtype),
                vec![Arg::Dep(0)],
                vec![a.block_key(&idx)],
            ));
        }
        offset += a.chunks[ax].len();
    }
    let mut chunks = common;
    chunks[ax] = unified.iter().flat_map(|a| a.chunks[ax].iter().copied()).collect();
    Ok(finish(name, tasks, unified.iter().map(|a| a.layer.clone()).collect(), chunks, dtype))
}

/// `stack([a, b, ...], axis)`: equal shapes, joined along a new axis.
pub fn stack(ctx: &Ctx, arrays: &[Array], axis: i64) -> Result<Array, ArrayError> {
    let Some(first) = arrays.first() else {
        return Err(ArrayError::Value("stack needs at least one array".into()));
    };
    let shape0 = first.shape();
    if let Some(a) = arrays.iter().find(|a| a.shape() != shape0) {
        return Err(ArrayError::Shape(format!(
            "all input arrays must have the same shape to stack, but {} and {} differ",
            fmt_shape(&shape0),
            fmt_shape(&a.shape())
        )));
    }
    let ax = norm_axis(axis, first.ndim() + 1)?;
    let mut expanded = Vec::with_capacity(arrays.len());
    for a in arrays {
        let mut t = Tokenizer::new();
        t.str("expand_dims").str(&a.name).u64(ax as u64);
        let name = t.name("stack");
        let key_name: Arc<str> = Arc::from(name.as_str());
        let tasks = a
            .block_indices()
            .into_iter()
            .map(|idx| {
                let mut out = idx.clone();
                out.insert(ax, 0);
                array_task(
                    ctx,
                    block(&key_name, &out),
                    ArrayOp::ExpandDims(ax),
                    vec![Arg::Dep(0)],
                    vec![a.block_key(&idx)],
                )
            })
            .collect();
        let mut chunks = a.chunks.to_vec();
        chunks.insert(ax, vec![1]);
        expanded.push(finish(name, tasks, vec![a.layer.clone()], chunks, a.dtype));
    }
    concatenate(ctx, &expanded, ax as i64)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The shape `shape` names for `total` elements, its one -1 (if any)
/// worked out, as NumPy's `reshape`.
pub fn new_shape(total: usize, shape: &[i64]) -> Result<Vec<usize>, ArrayError> {
    let unknown = shape.iter().filter(|&&d| d == -1).count();
    if unknown > 1 || shape.iter().any(|&d| d < -1) {
        return Err(ArrayError::Value(format!(
            "reshape: can only specify one unknown dimension (-1), got {shape:?}"
        )));
    }
    let known = shape.iter().filter(|&&d| d >= 0).try_fold(1usize, |p, &d| p.checked_mul(d as usize));
    let Some(known) = known else {
        return Err(ArrayError::Shape(format!("cannot reshape array of size {total} into shape {shape:?}")));
    };
    let new: Vec<usize> = shape
        .iter()
        .map(|&d| if d == -1 { total.checked_div(known).unwrap_or(0) } else { d as usize })
        .collect();
    if new.iter().try_fold(1usize, |p, &d| p.checked_mul(d)) != Some(total) {
        return Err(ArrayError::Shape(format!(
            "cannot reshape array of size {total} into shape {}",
            fmt_shape(&new)
        )));
    }
    Ok(new)
}

/// `x.reshape(shape)` (one entry may be -1). The array is first cut into
/// bands of whole rows whose flat length is a multiple of both shapes' row
/// sizes, so every band reshapes on its own; band size follows the input's
/// block size.
pub fn reshape(ctx: &Ctx, a: &Array, shape: &[i64]) -> Result<Array, ArrayError> {
    a.known("reshape")?;
    let old = a.shape();
    let total: usize = old.iter().product();
    let new = new_shape(total, shape)?;
    if new == old {
        return Ok(a.clone());
    }
    let mut t = Tokenizer::new();
    t.str("reshape").str(&a.name).serde(&new);
    let name = t.name("reshape");
    let key_name: Arc<str> = Arc::from(name.as_str());
    if total == 0 || a.ndim() == 0 || new.is_empty() {
        // Nothing to split: one block in, one block out.
        let whole = rechunk_to(ctx, a, old.iter().map(|&n| vec![n]).collect())?;
        let zero = vec![0; whole.ndim()];
        let task = array_task(
            ctx,
            block(&key_name, &vec![0; new.len()]),
            ArrayOp::Reshape(new.clone()),
            vec![Arg::Dep(0)],
            vec![whole.block_key(&zero)],
        );
        return Ok(finish(
            name,
            vec![task],
            vec![whole.layer.clone()],
            new.iter().map(|&n| vec![n]).collect(),
            a.dtype,
        ));
    }
    let row_in: usize = old[1..].iter().product();
    let row_out: usize = new[1..].iter().product();
    let unit = row_in / gcd(row_in, row_out) * row_out;
    // Bands of about the input's largest block (in elements), at least one unit.
    let target: usize = a.chunksize().iter().product::<usize>().max(1);
    let band = (target / unit).max(1) * unit;
    let rows_in = band / row_in;
    let mut in_chunks: Vec<Vec<usize>> = old.iter().map(|&n| vec![n]).collect();
    in_chunks[0] = super::chunks::regular(old[0], rows_in);
    let banded = rechunk_to(ctx, a, in_chunks)?;
    let mut out0 = Vec::new();
    let mut tasks = Vec::new();
    for (i, &r) in banded.chunks[0].iter().enumerate() {
        let elems = r * row_in;
        let out_rows = elems / row_out;
        let mut bshape = new.clone();
        bshape[0] = out_rows;
        out0.push(out_rows);
        let mut src = vec![0; banded.ndim()];
        src[0] = i;
        let mut dst = vec![0; new.len()];
        dst[0] = i;
        tasks.push(array_task(
            ctx,
            block(&key_name, &dst),
            ArrayOp::Reshape(bshape),
            vec![Arg::Dep(0)],
            vec![banded.block_key(&src)],
        ));
    }
    let mut chunks: Vec<Vec<usize>> = new.iter().map(|&n| vec![n]).collect();
    chunks[0] = out0;
    Ok(finish(name, tasks, vec![banded.layer.clone()], chunks, a.dtype))
}

/// `x.cumsum(axis)`: a scan within each block, then each block adds the
/// running total of the blocks before it along the axis (a chain).
pub fn cumsum(ctx: &Ctx, a: &Array, axis: i64) -> Result<Array, ArrayError> {
    cumulative(ctx, a, axis, false)
}

/// `x.cumprod(axis)`: as `cumsum`, multiplying.
pub fn cumprod(ctx: &Ctx, a: &Array, axis: i64) -> Result<Array, ArrayError> {
    cumulative(ctx, a, axis, true)
}

fn cumulative(ctx: &Ctx, a: &Array, axis: i64, prod: bool) -> Result<Array, ArrayError> {
    let what = if prod { "cumprod" } else { "cumsum" };
    a.known(what)?;
    let ax = norm_axis(axis, a.ndim())?;
    let dtype = a.dtype.sum_type();
    let (scan_op, carry_op) =
        if prod { (ArrayOp::Cumprod(ax), BinOp::Mul) } else { (ArrayOp::Cumsum(ax), BinOp::Add) };
    let mut t = Tokenizer::new();
    t.str(what).str(&a.name).u64(ax as u64);
    let tok = t.finish();
    let scan: Arc<str> = Arc::from(format!("{what}-block-{tok}"));
    let last: Arc<str> = Arc::from(format!("{what}-last-{tok}"));
    let carry: Arc<str> = Arc::from(format!("{what}-carry-{tok}"));
    let out: Arc<str> = Arc::from(format!("{what}-{tok}"));
    let mut tasks = Vec::new();
    for idx in a.block_indices() {
        tasks.push(array_task(
            ctx,
            block(&scan, &idx),
            scan_op.clone(),
            vec![Arg::Dep(0)],
            vec![a.block_key(&idx)],
        ));
        // The block's last slice along the axis, kept as length 1.
        let shape: Vec<usize> = idx.iter().enumerate().map(|(d, &i)| a.chunks[d][i]).collect();
        let ranges: Vec<(AxisSlice, bool)> = shape
            .iter()
            .enumerate()
            .map(|(d, &n)| {
                if d == ax {
                    (AxisSlice { start: n.saturating_sub(1), stop: n, step: 1 }, false)
                } else {
                    (AxisSlice { start: 0, stop: n, step: 1 }, false)
                }
            })
            .collect();
        tasks.push(array_task(
            ctx,
            block(&last, &idx),
            ArrayOp::Slice(ranges),
            vec![Arg::Dep(0)],
            vec![block(&scan, &idx)],
        ));
    }
    // carry(j) = carry(j-1) + last(j-1); block j = scan(j) + carry(j).
    let mut numblocks = a.numblocks();
    let along = numblocks[ax];
    numblocks[ax] = 1;
    for base in grid(&numblocks) {
        for j in 0..along {
            let mut idx = base.clone();
            idx[ax] = j;
            if j == 0 {
                tasks.push(array_task(
                    ctx,
                    block(&out, &idx),
                    ArrayOp::AsType(dtype),
                    vec![Arg::Dep(0)],
                    vec![block(&scan, &idx)],
                ));
                continue;
            }
            let mut prev = base.clone();
            prev[ax] = j - 1;
            let carry_in = if j == 1 { block(&last, &prev) } else { block(&carry, &prev) };
            if j + 1 < along {
                tasks.push(array_task(
                    ctx,
                    block(&carry, &idx),
                    ArrayOp::Binary(carry_op),
                    vec![Arg::Dep(0), Arg::Dep(1)],
                    vec![carry_in.clone(), block(&last, &idx)],
                ));
            }
            tasks.push(array_task(
                ctx,
                block(&out, &idx),
                ArrayOp::Binary(carry_op),
                vec![Arg::Dep(0), Arg::Dep(1)],
                vec![block(&scan, &idx), carry_in],
            ));
        }
    }
    Ok(finish(out.to_string(), tasks, vec![a.layer.clone()], a.chunks.to_vec(), dtype))
}

/// `histogram(x, bins, range)` → `(counts, edges)`: counts per block,
/// summed; the edges as `linspace(lo, hi, bins + 1)`.
pub fn histogram(ctx: &Ctx, a: &Array, bins: usize, lo: f64, hi: f64) -> Result<(Array, Array), ArrayError> {
    crate::array::reduce::check_histogram(bins, lo, hi)?;
    let mut t = Tokenizer::new();
    t.str("histogram").str(&a.name).u64(bins as u64).u64(lo.to_bits()).u64(hi.to_bits());
    let tok = t.finish();
    let per: Arc<str> = Arc::from(format!("histogram-block-{tok}"));
    let name = format!("histogram-{tok}");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let op = ArrayOp::Histogram { bins, lo, hi };
    let mut tasks = Vec::new();
    let mut parts = Vec::new();
    for (k, idx) in a.block_indices().into_iter().enumerate() {
        let key = block(&per, &[k]);
        tasks.push(array_task(ctx, key.clone(), op.clone(), vec![Arg::Dep(0)], vec![a.block_key(&idx)]));
        parts.push(key);
    }
    // Sum the counts in a tree of fan-in 8.
    let mut level = 0;
    while parts.len() > 1 {
        level += 1;
        let name: Arc<str> = Arc::from(format!("histogram-sum{level}-{tok}"));
        let mut next = Vec::new();
        for (g, group) in parts.chunks(8).enumerate() {
            let key = block(&name, &[g]);
            let args = (0..group.len()).map(|i| Arg::Dep(i as u32)).collect();
            tasks.push(array_task(ctx, key.clone(), ArrayOp::AddAll, args, group.to_vec()));
            next.push(key);
        }
        parts = next;
    }
    let root = parts.pop().ok_or_else(|| ArrayError::Value("histogram of an array without blocks".into()))?;
    tasks.push(array_task(
        ctx,
        Key::block(key_name.clone(), &[0]),
        ArrayOp::AsType(DType::I64),
        vec![Arg::Dep(0)],
        vec![root],
    ));
    let counts = finish(name, tasks, vec![a.layer.clone()], vec![vec![bins]], DType::I64);
    let edges = super::create::linspace(ctx, lo, hi, bins + 1, &super::chunks::ChunkSpec::Auto, DType::F64)?;
    Ok((counts, edges))
}

/// `x.mask(cond)` (NumPy's `x[cond]`): the elements where `cond` is true,
/// in C order, as a 1-d array whose block sizes are unknown until computed.
pub fn mask(ctx: &Ctx, x: &Array, cond: &Array) -> Result<Array, ArrayError> {
    x.known("mask")?;
    cond.known("mask")?;
    if x.shape() != cond.shape() {
        return Err(ArrayError::Shape(format!(
            "boolean index of shape {} does not match the array's shape {}",
            fmt_shape(&cond.shape()),
            fmt_shape(&x.shape())
        )));
    }
    // Blocks in C order of elements: n-d arrays are flattened first.
    let (x, cond) = if x.ndim() > 1 {
        let c = rechunk_to(ctx, cond, x.chunks.to_vec())?;
        (reshape(ctx, x, &[-1])?, reshape(ctx, &c, &[-1])?)
    } else {
        (x.clone(), rechunk_to(ctx, cond, x.chunks.to_vec())?)
    };
    let mut t = Tokenizer::new();
    t.str("mask").str(&x.name).str(&cond.name);
    let name = t.name("getitem-mask");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let tasks = x
        .block_indices()
        .into_iter()
        .map(|idx| {
            array_task(
                ctx,
                block(&key_name, &idx),
                ArrayOp::Mask,
                vec![Arg::Dep(0), Arg::Dep(1)],
                vec![x.block_key(&idx), cond.block_key(&idx)],
            )
        })
        .collect();
    let mut r =
        finish(name, tasks, vec![x.layer.clone(), cond.layer.clone()], vec![vec![0; x.nblocks()]], x.dtype);
    r.unknown = true;
    Ok(r)
}

/// `unique(x)`: the sorted distinct elements, one block of unknown size.
pub fn unique(ctx: &Ctx, x: &Array) -> Result<Array, ArrayError> {
    let mut t = Tokenizer::new();
    t.str("unique").str(&x.name);
    let tok = t.finish();
    let per: Arc<str> = Arc::from(format!("unique-block-{tok}"));
    let name = format!("unique-{tok}");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let mut tasks = Vec::new();
    let mut parts = Vec::new();
    for (k, idx) in x.block_indices().into_iter().enumerate() {
        let key = block(&per, &[k]);
        tasks.push(array_task(ctx, key.clone(), ArrayOp::Unique, vec![Arg::Dep(0)], vec![x.block_key(&idx)]));
        parts.push(key);
    }
    let args = (0..parts.len()).map(|i| Arg::Dep(i as u32)).collect();
    tasks.push(array_task(ctx, block(&key_name, &[0]), ArrayOp::Unique, args, parts));
    let mut r = finish(name, tasks, vec![x.layer.clone()], vec![vec![0]], x.dtype);
    r.unknown = true;
    Ok(r)
}

/// The tasks that measure each block of an array of unknown chunk sizes,
/// for `compute_chunk_sizes` (one `Len` task per block, in block order).
pub fn chunk_size_tasks(x: &Array) -> (crate::graph::layer::LayerRef, Vec<Key>) {
    let mut t = Tokenizer::new();
    t.str("chunk-sizes").str(&x.name);
    let name: Arc<str> = Arc::from(t.name("chunk-size").as_str());
    let mut tasks = Vec::new();
    let mut keys = Vec::new();
    for idx in x.block_indices() {
        let key = block(&name, &idx);
        tasks.push(array_task(
            &Ctx::default(),
            key.clone(),
            ArrayOp::Len,
            vec![Arg::Dep(0)],
            vec![x.block_key(&idx)],
        ));
        keys.push(key);
    }
    (crate::graph::layer::Layer::new(name.to_string(), tasks, vec![x.layer.clone()]), keys)
}
