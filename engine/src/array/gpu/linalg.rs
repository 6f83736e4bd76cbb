//! Matrix products of GPU blocks through cuBLAS. Blocks are row-major and
//! cuBLAS column-major, so `C = A·B` is computed as `Cᵀ = Bᵀ·Aᵀ`: a C-ordered
//! block read column-major *is* its transpose, and a transposed view
//! (F-ordered, as `x.T`) is passed with cuBLAS' transpose flag instead of
//! being copied.

use brisk_gpu::{Mat, Real};

use super::GpuChunk;
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
