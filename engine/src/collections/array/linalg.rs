//! Linear algebra on chunked arrays, as `dask.array.linalg`: QR and SVD of
//! tall-and-skinny arrays by the direct TSQR method (Benson, Gleich and
//! Demmel), randomized SVD, solves, least squares and norms.

use std::sync::Arc;

use super::base::{Array, Ctx, array_task, block, finish};
use super::chunks::{AxisChunks, ChunkSpec};
use super::elementwise::{Operand, binary, unary};
use super::matmul::matmul;
use super::rechunk::rechunk;
use super::reduction::reduction;
use crate::array::create::Dist;
use crate::array::dtype::{DType, Scalar};
use crate::array::elementwise::{BinOp, UnOp};
use crate::array::error::ArrayError;
use crate::array::error::fmt_shape;
use crate::array::op::ArrayOp;
use crate::array::reduce::Reduction;
use crate::array::shape::AxisSlice;
use crate::graph::layer::{Layer, LayerRef};
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::Arg;

/// One block of a single-block result (`[0, 0]`) built on `layer`.
fn single(name: &Arc<str>, layer: LayerRef, shape: &[usize], dtype: DType) -> Array {
    Array {
        layer,
        name: name.clone(),
        chunks: Arc::new(shape.iter().map(|&n| vec![n]).collect()),
        dtype,
        unknown: false,
    }
}

/// The largest array whose TSQR skips stage one under the GPU backend.
const WHOLE_ON_GPU: usize = 4 << 30;

/// `qr(x)` → `(q, r)` for a tall-and-skinny 2-d array: one block along
/// axis 1, each row block at least as tall as the array is wide.
pub fn qr(ctx: &Ctx, x: &Array) -> Result<(Array, Array), ArrayError> {
    x.known("qr")?;
    let shape = x.shape();
    if x.ndim() != 2 {
        return Err(ArrayError::Shape(format!("qr needs a 2-d array, got shape {}", fmt_shape(&shape))));
    }
    let n = shape[1];
    if x.chunks[1].len() != 1 {
        return Err(ArrayError::Value(format!(
            "qr and svd need one block along axis 1 (tall-and-skinny), but the chunks are {:?}; use x.rechunk([r, -1])",
            x.chunks[1]
        )));
    }
    if let Some(&short) = x.chunks[0].iter().find(|&&r| r < n) {
        return Err(ArrayError::Value(format!(
            "qr and svd need row blocks at least as tall as the array is wide ({n}), but one has {short} rows; use fewer, taller blocks"
        )));
    }
    let dtype = x.dtype.to_float();
    let at_once = ctx.gpu && x.nbytes() <= WHOLE_ON_GPU;
    let mut t = Tokenizer::new();
    // The two layouts factor differently (signs may differ): other keys.
    t.str(if at_once { "tsqr-whole" } else { "tsqr" }).str(&x.name);
    let tok = t.finish();
    let blocks: Arc<str> = Arc::from(format!("qr-block-{tok}"));
    let stage2: Arc<str> = Arc::from(format!("qr-stack-{tok}"));
    let q2: Arc<str> = Arc::from(format!("qr-q2-{tok}"));
    let q_name: Arc<str> = Arc::from(format!("qr-q-{tok}"));
    let r_name: Arc<str> = Arc::from(format!("qr-r-{tok}"));
    let rows = &x.chunks[0];
    // A block less than twice as tall as wide goes to stage two whole (its
    // Q is the identity): factoring it first would cost as much as stage
    // two saves. Under the GPU backend every block does while the array is
    // small next to a GPU's memory: one device factors the stacked blocks
    // at once far faster than block by block, each of whose QRs is a long
    // chain of small kernels (as CuPy factors the whole array). Stage two
    // stacks each block's contribution at `offsets`.
    let factored: Vec<bool> = rows.iter().map(|&r| r >= 2 * n && !at_once).collect();
    let mut offsets = Vec::with_capacity(rows.len());
    let mut stacked = 0;
    for (&r, &f) in rows.iter().zip(&factored) {
        offsets.push(stacked);
        stacked += if f { n } else { r };
    }
    let mut tasks = Vec::new();
    let mut parts = Vec::with_capacity(rows.len());
    for (i, &f) in factored.iter().enumerate() {
        if f {
            tasks.push(array_task(
                ctx,
                block(&blocks, &[i]),
                ArrayOp::Qr,
                vec![Arg::Dep(0)],
                vec![x.block_key(&[i, 0])],
            ));
            parts.push(block(&blocks, &[i]));
        } else {
            parts.push(x.block_key(&[i, 0]));
        }
    }
    tasks.push(array_task(
        ctx,
        block(&stage2, &[]),
        ArrayOp::QrStack,
        (0..parts.len()).map(|i| Arg::Dep(i as u32)).collect(),
        parts.clone(),
    ));
    tasks.push(array_task(
        ctx,
        block(&q2, &[]),
        ArrayOp::QrFormQ,
        vec![Arg::Dep(0)],
        vec![block(&stage2, &[])],
    ));
    let inner = Layer::new(format!("qr-{tok}"), tasks, vec![x.layer.clone()]);
    // Q: each row block's Q times its rows of stage two's Q (just those
    // rows for a block that went to stage two whole).
    let q_tasks = (0..rows.len())
        .map(|i| {
            let key = block(&q_name, &[i, 0]);
            if factored[i] {
                array_task(
                    ctx,
                    key,
                    ArrayOp::QrQ { offset: offsets[i], rows: n },
                    vec![Arg::Dep(0), Arg::Dep(1)],
                    vec![parts[i].clone(), block(&q2, &[])],
                )
            } else {
                let span = |start, stop| (AxisSlice { start, stop, step: 1 }, false);
                array_task(
                    ctx,
                    key,
                    ArrayOp::Slice(vec![span(offsets[i], offsets[i] + rows[i]), span(0, n)]),
                    vec![Arg::Dep(0)],
                    vec![block(&q2, &[])],
                )
            }
        })
        .collect();
    let q =
        finish(q_name.to_string(), q_tasks, vec![inner.clone()], vec![x.chunks[0].clone(), vec![n]], dtype);
    let r_task = array_task(
        ctx,
        block(&r_name, &[0, 0]),
        ArrayOp::Item(1),
        vec![Arg::Dep(0)],
        vec![block(&stage2, &[])],
    );
    let r = finish(r_name.to_string(), vec![r_task], vec![inner], vec![vec![n], vec![n]], dtype);
    Ok((q, r))
}

/// The SVD of a single-block array: `(u, s, vt)`.
fn svd_block(ctx: &Ctx, x: &Array) -> Result<(Array, Array, Array), ArrayError> {
    let shape = x.shape();
    let (m, n) = (shape[0], shape[1]);
    let k = m.min(n);
    let dtype = x.dtype.to_float();
    let mut t = Tokenizer::new();
    t.str("svd").str(&x.name);
    let tok = t.finish();
    let f: Arc<str> = Arc::from(format!("svd-{tok}"));
    let fact = array_task(ctx, block(&f, &[]), ArrayOp::Svd, vec![Arg::Dep(0)], vec![x.block_key(&[0, 0])]);
    let layer = Layer::new(f.to_string(), vec![fact], vec![x.layer.clone()]);
    let part = |item: usize, label: &str, idx: &[usize], shape: &[usize]| -> Array {
        let name: Arc<str> = Arc::from(format!("{label}-{tok}"));
        let task =
            array_task(ctx, block(&name, idx), ArrayOp::Item(item), vec![Arg::Dep(0)], vec![block(&f, &[])]);
        let l = Layer::new(name.to_string(), vec![task], vec![layer.clone()]);
        single(&name, l, shape, dtype)
    };
    Ok((part(0, "svd-u", &[0, 0], &[m, k]), part(1, "svd-s", &[0], &[k]), part(2, "svd-v", &[0, 0], &[k, n])))
}

/// `svd(x)` → `(u, s, vt)` with `x = u · diag(s) · vt`: directly for a
/// single block, by TSQR for tall-and-skinny arrays (as `da.linalg.svd`).
pub fn svd(ctx: &Ctx, x: &Array) -> Result<(Array, Array, Array), ArrayError> {
    x.known("svd")?;
    if x.ndim() != 2 {
        return Err(ArrayError::Shape(format!("svd needs a 2-d array, got shape {}", fmt_shape(&x.shape()))));
    }
    if x.nblocks() == 1 {
        return svd_block(ctx, x);
    }
    let (q, r) = qr(ctx, x)?;
    let (ur, s, vt) = svd_block(ctx, &r)?;
    Ok((matmul(ctx, &q, &ur)?, s, vt))
}

/// `svd_compressed(x, k)`: the k leading singular triplets by a randomized
/// range finder (Halko et al., as `da.linalg.svd_compressed`), with
/// `oversample` extra columns and `n_power_iter` power iterations.
pub fn svd_compressed(
    ctx: &Ctx,
    x: &Array,
    k: usize,
    seed: u64,
    oversample: usize,
    n_power_iter: usize,
) -> Result<(Array, Array, Array), ArrayError> {
    let shape = x.shape();
    if x.ndim() != 2 {
        return Err(ArrayError::Shape(format!(
            "svd_compressed needs a 2-d array, got shape {}",
            fmt_shape(&shape)
        )));
    }
    let (m, n) = (shape[0], shape[1]);
    if k == 0 || k > m.min(n) {
        return Err(ArrayError::Value(format!(
            "svd_compressed: k must be between 1 and {}, got {k}",
            m.min(n)
        )));
    }
    let l = (k + oversample).min(m.min(n));
    let omega_spec = ChunkSpec::PerAxis(vec![AxisChunks::Sizes(x.chunks[1].to_vec()), AxisChunks::Size(-1)]);
    let omega = super::create::random(
        ctx,
        &[n, l],
        &omega_spec,
        seed,
        Dist::Normal { mean: 0.0, std: 1.0 },
        DType::F64,
    )?;
    let omega = place_like(ctx, &omega, x)?;
    let mut y = matmul(ctx, x, &omega)?;
    let xt = super::matmul::transpose(ctx, x, None)?;
    for _ in 0..n_power_iter {
        let (q, _) = qr(ctx, &y)?;
        y = matmul(ctx, x, &matmul(ctx, &xt, &q)?)?;
    }
    let (q, _) = qr(ctx, &y)?;
    let b = matmul(ctx, &super::matmul::transpose(ctx, &q, None)?, x)?;
    let b = rechunk(ctx, &b, &ChunkSpec::PerAxis(vec![AxisChunks::Size(-1), AxisChunks::Size(-1)]))?;
    let (ub, s, vt) = svd_block(ctx, &b)?;
    let u = matmul(ctx, &q, &ub)?;
    let keep = |a: &Array, idx: &[super::slicing::Index]| super::slicing::slice(ctx, a, idx);
    let r = super::slicing::Index::Range { start: Some(0), stop: Some(k as i64), step: 1 };
    Ok((keep(&u, &[super::slicing::Index::Full, r])?, keep(&s, &[r])?, keep(&vt, &[r])?))
}

/// `omega` (blocks along axis 0 matching `x`'s along axis 1) moved to
/// where `x`'s blocks are, host or GPU: the test matrix follows the array.
fn place_like(ctx: &Ctx, omega: &Array, x: &Array) -> Result<Array, ArrayError> {
    let mut t = Tokenizer::new();
    t.str("place-like").str(&omega.name).str(&x.name);
    let name = t.name("place-like");
    let key: Arc<str> = Arc::from(name.as_str());
    let tasks = (0..omega.chunks[0].len())
        .map(|i| {
            array_task(
                ctx,
                block(&key, &[i, 0]),
                ArrayOp::PlaceLike,
                vec![Arg::Dep(0), Arg::Dep(1)],
                vec![omega.block_key(&[i, 0]), x.block_key(&[0, i])],
            )
        })
        .collect();
    Ok(finish(name, tasks, vec![omega.layer.clone(), x.layer.clone()], omega.chunks.to_vec(), omega.dtype))
}

/// Both operands in single blocks (small systems are solved in one task).
fn whole(ctx: &Ctx, a: &Array) -> Result<Array, ArrayError> {
    rechunk(ctx, a, &ChunkSpec::PerAxis(vec![AxisChunks::Size(-1); a.ndim()]))
}

/// `solve(a, b)` for a square `a`: LU with partial pivoting, in one task.
pub fn solve(ctx: &Ctx, a: &Array, b: &Array) -> Result<Array, ArrayError> {
    a.known("solve")?;
    b.known("solve")?;
    let (sa, sb) = (a.shape(), b.shape());
    if a.ndim() != 2 || sa[0] != sa[1] {
        return Err(ArrayError::Shape(format!("solve needs a square matrix, got shape {}", fmt_shape(&sa))));
    }
    if b.ndim() > 2 || sb.first() != Some(&sa[0]) {
        return Err(ArrayError::Shape(format!(
            "solve: shapes {} and {} do not match",
            fmt_shape(&sa),
            fmt_shape(&sb)
        )));
    }
    let (a, b) = (whole(ctx, a)?, whole(ctx, b)?);
    two_block_op(ctx, "solve", ArrayOp::Solve, &a, &b, &sb)
}

/// `inv(a)`: `solve(a, eye(n))`, in one task.
pub fn inv(ctx: &Ctx, a: &Array) -> Result<Array, ArrayError> {
    a.known("inv")?;
    let sa = a.shape();
    if a.ndim() != 2 || sa[0] != sa[1] {
        return Err(ArrayError::Shape(format!("inv needs a square matrix, got shape {}", fmt_shape(&sa))));
    }
    let eye = super::create::eye(
        ctx,
        sa[0],
        &ChunkSpec::PerAxis(vec![AxisChunks::Size(-1); 2]),
        a.dtype.to_float(),
    )?;
    solve(ctx, a, &eye)
}

/// `cholesky(a, lower)`: the factor of a symmetric positive-definite `a`,
/// in one task (`U` with `a = Uᵀ U` unless `lower`, as `da.linalg.cholesky`).
pub fn cholesky(ctx: &Ctx, a: &Array, lower: bool) -> Result<Array, ArrayError> {
    a.known("cholesky")?;
    let sa = a.shape();
    if a.ndim() != 2 || sa[0] != sa[1] {
        return Err(ArrayError::Shape(format!(
            "cholesky needs a square matrix, got shape {}",
            fmt_shape(&sa)
        )));
    }
    let w = whole(ctx, a)?;
    let mut t = Tokenizer::new();
    t.str("cholesky").str(&w.name).serde(&lower);
    let name = t.name("cholesky");
    let task = array_task(
        ctx,
        Key::block(Arc::from(name.as_str()), &[0, 0]),
        ArrayOp::Cholesky { lower },
        vec![Arg::Dep(0)],
        vec![w.block_key(&[0, 0])],
    );
    Ok(finish(name, vec![task], vec![w.layer.clone()], vec![vec![sa[0]], vec![sa[0]]], a.dtype.to_float()))
}

fn two_block_op(
    ctx: &Ctx,
    label: &str,
    op: ArrayOp,
    a: &Array,
    b: &Array,
    shape: &[usize],
) -> Result<Array, ArrayError> {
    let mut t = Tokenizer::new();
    t.str(label).str(&a.name).str(&b.name);
    let name = t.name(label);
    let zero: Vec<usize> = vec![0; b.ndim()];
    let idx: Vec<u32> = vec![0; shape.len()];
    let task = array_task(
        ctx,
        Key::block(Arc::from(name.as_str()), &idx),
        op,
        vec![Arg::Dep(0), Arg::Dep(1)],
        vec![a.block_key(&[0, 0]), b.block_key(&zero)],
    );
    let dtype = DType::promote(a.dtype.to_float(), b.dtype.to_float());
    Ok(finish(
        name,
        vec![task],
        vec![a.layer.clone(), b.layer.clone()],
        shape.iter().map(|&n| vec![n]).collect(),
        dtype,
    ))
}

/// `lstsq(a, b)` → `(x, residuals, rank, s)` as `da.linalg.lstsq`: by TSQR,
/// `x = R⁻¹ Qᵀ b`; residuals are the squared norms of `a x - b`'s columns,
/// `s` the singular values of `a` and `rank` how many exceed the cutoff.
pub fn lstsq(ctx: &Ctx, a: &Array, b: &Array) -> Result<(Array, Array, Array, Array), ArrayError> {
    let (sa, sb) = (a.shape(), b.shape());
    if a.ndim() != 2 || b.ndim() > 2 || sb.first() != sa.first() {
        return Err(ArrayError::Shape(format!(
            "lstsq: shapes {} and {} do not match",
            fmt_shape(&sa),
            fmt_shape(&sb)
        )));
    }
    let (q, r) = qr(ctx, a)?;
    let qtb = whole(ctx, &matmul(ctx, &super::matmul::transpose(ctx, &q, None)?, b)?)?;
    let out_shape: Vec<usize> = if b.ndim() == 1 { vec![sa[1]] } else { vec![sa[1], sb[1]] };
    let x = two_block_op(ctx, "lstsq-solve", ArrayOp::SolveUpper, &r, &qtb, &out_shape)?;
    let ax = matmul(ctx, a, &x)?;
    let diff = binary(ctx, BinOp::Sub, &Operand::Array(ax), &Operand::Array(b.clone()))?;
    let sq = binary(ctx, BinOp::Mul, &Operand::Array(diff.clone()), &Operand::Array(diff))?;
    // A 1-d b gives residuals of shape (1,), as NumPy and Dask do.
    let residuals = reduction(ctx, &sq, Reduction::Sum, Some(&[0]), b.ndim() == 1, None)?;
    let (_, s, _) = svd_block(ctx, &r)?;
    // NumPy's cutoff: rcond = eps * max(M, N), relative to the largest value.
    let cutoff = f64::EPSILON * sa[0].max(sa[1]) as f64;
    let smax = reduction(ctx, &s, Reduction::Max, None, false, None)?;
    let tol = binary(ctx, BinOp::Mul, &Operand::Array(smax), &Operand::Scalar(Scalar::Float(cutoff)))?;
    let above = binary(ctx, BinOp::Gt, &Operand::Array(s.clone()), &Operand::Array(tol))?;
    let rank = reduction(ctx, &above, Reduction::Sum, None, false, None)?;
    Ok((x, residuals, rank, s))
}

/// `norm(x)`: the Frobenius norm of a matrix, the 2-norm of a vector
/// (NumPy's default), over every element.
pub fn norm(ctx: &Ctx, x: &Array) -> Result<Array, ArrayError> {
    let f = unary(ctx, UnOp::Abs, &super::elementwise::astype(ctx, x, x.dtype.to_float())?)?;
    let sq = binary(ctx, BinOp::Mul, &Operand::Array(f.clone()), &Operand::Array(f))?;
    let total = reduction(ctx, &sq, Reduction::Sum, None, false, None)?;
    unary(ctx, UnOp::Sqrt, &total)
}

/// `tensordot(a, b, (axes_a, axes_b))`: sum over the paired axes, as NumPy:
/// the contracted axes are moved together, both arrays reshaped to
/// matrices, multiplied blockwise, and the result reshaped back.
pub fn tensordot(
    ctx: &Ctx,
    a: &Array,
    b: &Array,
    axes_a: &[i64],
    axes_b: &[i64],
) -> Result<Array, ArrayError> {
    if axes_a.len() != axes_b.len() {
        return Err(ArrayError::Value(format!(
            "tensordot: {} axes of the first array paired with {} of the second",
            axes_a.len(),
            axes_b.len()
        )));
    }
    let ca = crate::array::error::norm_axes(axes_a, a.ndim()).and_then(|_| {
        axes_a.iter().map(|&x| crate::array::error::norm_axis(x, a.ndim())).collect::<Result<Vec<_>, _>>()
    })?;
    let cb = crate::array::error::norm_axes(axes_b, b.ndim()).and_then(|_| {
        axes_b.iter().map(|&x| crate::array::error::norm_axis(x, b.ndim())).collect::<Result<Vec<_>, _>>()
    })?;
    let (sa, sb) = (a.shape(), b.shape());
    for (&x, &y) in ca.iter().zip(&cb) {
        if sa[x] != sb[y] {
            return Err(ArrayError::Shape(format!(
                "tensordot: shape-mismatch for sum: axis {x} of {} has length {} but axis {y} of {} has length {}",
                fmt_shape(&sa),
                sa[x],
                fmt_shape(&sb),
                sb[y]
            )));
        }
    }
    let free_a: Vec<usize> = (0..a.ndim()).filter(|d| !ca.contains(d)).collect();
    let free_b: Vec<usize> = (0..b.ndim()).filter(|d| !cb.contains(d)).collect();
    let perm_a: Vec<i64> = free_a.iter().chain(&ca).map(|&d| d as i64).collect();
    let perm_b: Vec<i64> = cb.iter().chain(&free_b).map(|&d| d as i64).collect();
    let m: usize = free_a.iter().map(|&d| sa[d]).product();
    let k: usize = ca.iter().map(|&d| sa[d]).product();
    let n: usize = free_b.iter().map(|&d| sb[d]).product();
    let a2 = super::structure::reshape(
        ctx,
        &super::matmul::transpose(ctx, a, Some(&perm_a))?,
        &[m as i64, k as i64],
    )?;
    let b2 = super::structure::reshape(
        ctx,
        &super::matmul::transpose(ctx, b, Some(&perm_b))?,
        &[k as i64, n as i64],
    )?;
    let c = matmul(ctx, &a2, &b2)?;
    let out: Vec<i64> =
        free_a.iter().map(|&d| sa[d] as i64).chain(free_b.iter().map(|&d| sb[d] as i64)).collect();
    super::structure::reshape(ctx, &c, &out)
}
