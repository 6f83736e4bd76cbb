//! Matrix products of GPU blocks through cuBLAS. Blocks are row-major and
//! cuBLAS column-major, so `C = A·B` is computed as `Cᵀ = Bᵀ·Aᵀ`: a C-ordered
//! block read column-major *is* its transpose, and a transposed view
//! (F-ordered, as `x.T`) is passed with cuBLAS' transpose flag instead of
//! being copied.

use brisk_gpu::{Mat, Real};

use super::chunk::GpuChunk;
use super::expr::{Expr, materialize};
use crate::array::dtype::DType;
use crate::array::error::{ArrayError, fmt_shape};

/// A 2-d block as the column-major operand holding its transpose.
fn as_transposed(x: &GpuChunk) -> Result<(GpuChunk, usize, bool), ArrayError> {
    let (r, c) = (x.shape()[0], x.shape()[1]);
    if x.is_c_contiguous() {
        // Column-major c×r with ld c: Xᵀ as stored.
        Ok((x.clone(), c.max(1), false))
    } else if x.is_f_contiguous() {
        // Column-major r×c with ld r: X; transposed by the flag.
        Ok((x.clone(), r.max(1), true))
    } else {
        let y = x.contiguous()?;
        Ok((y, c.max(1), false))
    }
}

fn typed(x: &GpuChunk, t: DType) -> Result<GpuChunk, ArrayError> {
    if x.dtype() == t { Ok(x.clone()) } else { materialize(&Expr::cast(Expr::leaf(x.clone()), t)) }
}

/// `Σ_t a_t @ b_t` for float blocks, or `None` for integer and bool ones
/// (the host computes those exactly).
pub fn matmul_sum(a: &[GpuChunk], b: &[GpuChunk]) -> Result<Option<GpuChunk>, ArrayError> {
    let (Some(a0), Some(b0)) = (a.first(), b.first()) else {
        return Err(ArrayError::Value("matmul without blocks".into()));
    };
    let t = a.iter().chain(b).map(GpuChunk::dtype).fold(a0.dtype(), DType::promote);
    if !t.is_float() || a.iter().chain(b).any(|x| x.ndim() != 2) || a.len() != b.len() {
        return Ok(None);
    }
    let (m, n) = (a0.shape()[0], b0.shape()[1]);
    let device = a0.device().clone();
    let out = GpuChunk::alloc(&device, t, &[m, n])?;
    let mut first = true;
    for (x, y) in a.iter().zip(b) {
        let k = x.shape()[1];
        if x.shape()[0] != m || y.shape()[1] != n || y.shape()[0] != k {
            return Err(ArrayError::Shape(format!(
                "matmul: shapes {} and {} not aligned",
                fmt_shape(x.shape()),
                fmt_shape(y.shape())
            )));
        }
        let (x, y) = (typed(x, t)?, typed(y, t)?);
        let (xt, ldx, tx) = as_transposed(&x)?;
        let (yt, ldy, ty) = as_transposed(&y)?;
        let lhs = Mat { buf: yt.buffer(), ld: ldy, trans: ty };
        let rhs = Mat { buf: xt.buffer(), ld: ldx, trans: tx };
        if xt.ptr() != xt.buffer().ptr() || yt.ptr() != yt.buffer().ptr() {
            // Views that start inside their buffer: copy to their own memory.
            return matmul_sum(
                &a.iter().map(GpuChunk::contiguous).collect::<Result<Vec<_>, _>>()?,
                &b.iter().map(GpuChunk::contiguous).collect::<Result<Vec<_>, _>>()?,
            );
        }
        let beta_zero = first;
        first = false;
        match t {
            DType::F32 => gemm::<f32>(&device, n, m, k, lhs, rhs, beta_zero, &out)?,
            _ => gemm::<f64>(&device, n, m, k, lhs, rhs, beta_zero, &out)?,
        }
    }
    if first {
        return Ok(Some(super::create::full(&device, &[m, n], crate::array::dtype::Scalar::Int(0), t)?));
    }
    Ok(Some(out))
}

#[allow(clippy::too_many_arguments)]
fn gemm<T: Real>(
    device: &std::sync::Arc<brisk_gpu::Device>,
    m: usize,
    n: usize,
    k: usize,
    a: Mat<'_>,
    b: Mat<'_>,
    beta_zero: bool,
    c: &GpuChunk,
) -> Result<(), ArrayError> {
    let beta = if beta_zero { T::zero() } else { T::one() };
    if k == 0 {
        if beta_zero {
            c.buffer().fill_bytes(0)?;
        }
        return Ok(());
    }
    device.gemm::<T>(m, n, k, T::one(), a, b, beta, c.buffer(), m.max(1))?;
    Ok(())
}

/// `Σ_t a_t @ a_tᵀ`.
pub fn gram_sum(a: &[GpuChunk]) -> Result<Option<GpuChunk>, ArrayError> {
    let ts: Vec<GpuChunk> = a.iter().map(|x| x.transpose(&[1, 0])).collect::<Result<_, _>>()?;
    matmul_sum(a, &ts)
}

// ---- factorizations (cuSOLVER) -------------------------------------------
//
// LAPACK works in column-major order, in place. A row-major block copied
// through its transpose view into a C-ordered `[n, m]` buffer *is* the
// column-major `m × n` matrix; results written column-major are read back
// as transposed (F-ordered) views, which every GPU op takes as they are.

/// The float type a factorization of `x` computes in (f32 stays f32).
fn float_of(x: &GpuChunk) -> DType {
    x.dtype().to_float()
}

/// A fresh column-major copy of the 2-d `x` in `t`: a C-ordered `[n, m]`
/// chunk whose buffer holds `x` column-major with leading dimension `m`.
fn col_major(x: &GpuChunk, t: DType) -> Result<GpuChunk, ArrayError> {
    let (m, n) = (x.shape()[0], x.shape()[1]);
    let out = GpuChunk::alloc(x.device(), t, &[n, m])?;
    super::expr::evaluate_into(&Expr::cast(Expr::leaf(x.transpose(&[1, 0])?), t), &out)?;
    Ok(out)
}

/// A fresh C-ordered copy of `x` in `t` (always new memory: LAPACK
/// overwrites it).
fn fresh(x: &GpuChunk, t: DType) -> Result<GpuChunk, ArrayError> {
    let out = GpuChunk::alloc(x.device(), t, x.shape())?;
    super::expr::evaluate_into(&Expr::cast(Expr::leaf(x.clone()), t), &out)?;
    Ok(out)
}

/// The upper `n × n` triangle of a column-major `m × n` factor (leading
/// dimension `m`), C-ordered, zeros below the diagonal.
fn upper_triangle(h: &GpuChunk, m: usize, n: usize) -> Result<GpuChunk, ArrayError> {
    let t = h.dtype();
    let ct = super::expr::ctype(t);
    let name = format!("brisk_triu_{ct}");
    let src = format!(
        "extern \"C\" __global__ void {name}({ct}* r, const {ct}* h, long long n, long long ld) {{
            for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n * n; k += (long long)gridDim.x * blockDim.x) {{
                long long i = k / n, j = k % n;
                r[k] = j >= i ? h[j * ld + i] : ({ct})0;
            }}
        }}"
    );
    let device = h.device().clone();
    let r = GpuChunk::alloc(&device, t, &[n, n])?;
    let kernel = device.kernel(&src, &name)?;
    device.launch(
        &kernel,
        brisk_gpu::Launch::linear(&device, n * n, 256),
        &[
            brisk_gpu::KArg::U64(r.ptr()),
            brisk_gpu::KArg::U64(h.ptr()),
            brisk_gpu::KArg::I64(n as i64),
            brisk_gpu::KArg::I64(m as i64),
        ],
    )?;
    Ok(r)
}

fn factorable(x: &GpuChunk) -> bool {
    x.ndim() == 2 && !x.is_empty() && matches!(float_of(x), DType::F32 | DType::F64)
}

/// Householder QR of a tall block (`m ≥ n`), kept in factored form:
/// `[H, R, tau]`, with `H` geqrf's column-major output (as a C-ordered
/// `[n, m]` chunk) and `Q` applied or formed only where it is needed
/// (`apply_q`, `form_q`): a computation that needs only `R` (singular
/// values) never forms it. `None` for shapes the host handles.
pub fn qr_factor(x: &GpuChunk) -> Result<Option<Vec<GpuChunk>>, ArrayError> {
    if !factorable(x) || x.shape()[0] < x.shape()[1] {
        return Ok(None);
    }
    let (m, n) = (x.shape()[0], x.shape()[1]);
    let t = float_of(x);
    let h = col_major(x, t)?;
    let device = h.device().clone();
    let tau = GpuChunk::alloc(&device, t, &[n])?;
    match t {
        DType::F32 => device.geqrf::<f32>(m, n, h.buffer(), m, tau.buffer())?,
        _ => device.geqrf::<f64>(m, n, h.buffer(), m, tau.buffer())?,
    }
    let r = upper_triangle(&h, m, n)?;
    Ok(Some(vec![h, r, tau]))
}

/// Whether a QR value is `qr_factor`'s factored form.
pub fn is_factored(parts: &[GpuChunk]) -> bool {
    parts.len() == 3 && parts[0].ndim() == 2 && parts[2].ndim() == 1
}

/// The thin `Q` (`m × n`) of a factored QR.
pub fn form_q(parts: &[GpuChunk]) -> Result<GpuChunk, ArrayError> {
    let [h, _, tau] = parts else {
        return Err(ArrayError::Value("QR parts missing".into()));
    };
    let (n, m) = (h.shape()[0], h.shape()[1]);
    let q = fresh(h, h.dtype())?;
    let device = q.device().clone();
    match q.dtype() {
        DType::F32 => device.orgqr::<f32>(m, n, n, q.buffer(), m, tau.buffer())?,
        _ => device.orgqr::<f64>(m, n, n, q.buffer(), m, tau.buffer())?,
    }
    q.transpose(&[1, 0])
}

/// `Q · c` for the thin `Q` of a factored QR and a `n × p` block `c`:
/// `c` is padded with zero rows to `m × p` and the reflectors applied.
pub fn apply_q(parts: &[GpuChunk], c: &GpuChunk) -> Result<GpuChunk, ArrayError> {
    let [h, _, tau] = parts else {
        return Err(ArrayError::Value("QR parts missing".into()));
    };
    let (n, m) = (h.shape()[0], h.shape()[1]);
    if c.ndim() != 2 || c.shape()[0] != n {
        return Err(ArrayError::Shape(format!(
            "cannot apply a QR factor of {n} columns to a block of shape {}",
            fmt_shape(c.shape())
        )));
    }
    let p = c.shape()[1];
    let t = h.dtype();
    let device = h.device().clone();
    // Column-major m × p: the first n rows are c, the rest zero.
    let out = GpuChunk::alloc(&device, t, &[p, m])?;
    out.buffer().fill_bytes(0)?;
    let top = out.slice(&[
        (crate::array::shape::AxisSlice { start: 0, stop: p, step: 1 }, false),
        (crate::array::shape::AxisSlice { start: 0, stop: n, step: 1 }, false),
    ])?;
    super::expr::evaluate_into(&Expr::cast(Expr::leaf(c.transpose(&[1, 0])?), t), &top)?;
    match t {
        DType::F32 => device.ormqr_left::<f32>(m, p, n, h.buffer(), m, tau.buffer(), out.buffer(), m)?,
        _ => device.ormqr_left::<f64>(m, p, n, h.buffer(), m, tau.buffer(), out.buffer(), m)?,
    }
    out.transpose(&[1, 0])
}

/// Thin SVD of a block: `[U, S, Vᵀ]`, as the host's `linalg::svd`.
pub fn svd(x: &GpuChunk) -> Result<Option<Vec<GpuChunk>>, ArrayError> {
    if !factorable(x) {
        return Ok(None);
    }
    let (m, n) = (x.shape()[0], x.shape()[1]);
    let t = float_of(x);
    let device = x.device().clone();
    // gesvd wants rows ≥ columns: a wide block is factored as its
    // transpose, which its C-ordered copy already is, column-major.
    let (a, rows, cols) = if m >= n { (col_major(x, t)?, m, n) } else { (fresh(x, t)?, n, m) };
    let k = cols;
    let s = GpuChunk::alloc(&device, t, &[k])?;
    let u = GpuChunk::alloc(&device, t, &[k, rows])?;
    let vt = GpuChunk::alloc(&device, t, &[k, k])?;
    match t {
        DType::F32 => {
            device.gesvd::<f32>(rows, cols, a.buffer(), s.buffer(), Some((u.buffer(), vt.buffer())))?
        }
        _ => device.gesvd::<f64>(rows, cols, a.buffer(), s.buffer(), Some((u.buffer(), vt.buffer())))?,
    }
    Ok(Some(if m >= n {
        // U column-major m × k, Vᵀ column-major k × n: transposed views.
        vec![u.transpose(&[1, 0])?, s, vt.transpose(&[1, 0])?]
    } else {
        // Of Xᵀ = U'·S·V'ᵀ: X's U is V'ᵀᵀ, whose C-ordered reading is the
        // column-major V'ᵀ buffer; X's Vᵀ likewise is U' read C-ordered.
        vec![vt, s, u]
    }))
}

/// The singular values of a block alone (gesvd without vectors).
pub fn singular_values(x: &GpuChunk) -> Result<Option<GpuChunk>, ArrayError> {
    if !factorable(x) {
        return Ok(None);
    }
    let (m, n) = (x.shape()[0], x.shape()[1]);
    let t = float_of(x);
    let device = x.device().clone();
    // A wide block has the singular values of its transpose, which its
    // C-ordered copy is, column-major.
    let (a, rows, cols) = if m >= n { (col_major(x, t)?, m, n) } else { (fresh(x, t)?, n, m) };
    let s = GpuChunk::alloc(&device, t, &[cols])?;
    match t {
        DType::F32 => device.gesvd::<f32>(rows, cols, a.buffer(), s.buffer(), None)?,
        _ => device.gesvd::<f64>(rows, cols, a.buffer(), s.buffer(), None)?,
    }
    Ok(Some(s))
}

/// `solve(a, b)` by LU with partial pivoting (getrf/getrs).
pub fn solve(a: &GpuChunk, b: &GpuChunk) -> Result<Option<GpuChunk>, ArrayError> {
    if !factorable(a)
        || b.ndim() > 2
        || a.shape()[0] != a.shape()[1]
        || b.shape().first() != Some(&a.shape()[0])
    {
        return Ok(None);
    }
    let n = a.shape()[0];
    let t = DType::promote(float_of(a), b.dtype().to_float());
    let lu = col_major(a, t)?;
    let (x, nrhs) = rhs(b, t)?;
    let device = lu.device().clone();
    let ok = match t {
        DType::F32 => device.lu_solve::<f32>(n, nrhs, lu.buffer(), x.buffer())?,
        _ => device.lu_solve::<f64>(n, nrhs, lu.buffer(), x.buffer())?,
    };
    if !ok {
        return Err(ArrayError::Value("solve: the matrix is singular".into()));
    }
    Ok(Some(solution(x, b.ndim())?))
}

/// `r x = b` for an upper-triangular `r` (cuBLAS trsm).
pub fn solve_upper(r: &GpuChunk, b: &GpuChunk) -> Result<Option<GpuChunk>, ArrayError> {
    if !factorable(r)
        || b.ndim() > 2
        || r.shape()[0] != r.shape()[1]
        || b.shape().first() != Some(&r.shape()[0])
    {
        return Ok(None);
    }
    let n = r.shape()[0];
    let t = DType::promote(float_of(r), b.dtype().to_float());
    let a = col_major(r, t)?;
    let (x, nrhs) = rhs(b, t)?;
    let device = a.device().clone();
    match t {
        DType::F32 => device.trsm_left::<f32>(false, false, n, nrhs, a.buffer(), x.buffer())?,
        _ => device.trsm_left::<f64>(false, false, n, nrhs, a.buffer(), x.buffer())?,
    }
    Ok(Some(solution(x, b.ndim())?))
}

/// The right-hand side column-major, and its column count.
fn rhs(b: &GpuChunk, t: DType) -> Result<(GpuChunk, usize), ArrayError> {
    if b.ndim() == 1 { Ok((fresh(b, t)?, 1)) } else { Ok((col_major(b, t)?, b.shape()[1])) }
}

/// A column-major solution as the block `solve` returns.
fn solution(x: GpuChunk, ndim: usize) -> Result<GpuChunk, ArrayError> {
    if ndim == 1 { Ok(x) } else { x.transpose(&[1, 0]) }
}
