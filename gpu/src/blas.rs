//! Matrix products through cuBLAS, on the device's stream. cuBLAS is
//! column-major; callers that hold row-major blocks swap the operands
//! (`Cᵀ = Bᵀ·Aᵀ`), which costs nothing.

use std::sync::{Arc, Mutex};

use cudarc::cublas::{CudaBlas, sys};

use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::{GpuError, Result};

/// A cuBLAS handle bound to the device's stream; calls are serialized (one
/// handle, many task threads).
pub struct Blas(pub(crate) Mutex<CudaBlas>);

/// f32 or f64, with their cuBLAS and cuSOLVER entry points.
pub trait Real: Copy + Send + Sync + 'static {
    const SIZE: usize;
    fn one() -> Self;
    fn zero() -> Self;
    /// # Safety
    /// cuBLAS' contract for `gemm` (valid handle, pointers and leading dimensions).
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        h: sys::cublasHandle_t,
        ta: sys::cublasOperation_t,
        tb: sys::cublasOperation_t,
        m: i32,
        n: i32,
        k: i32,
        alpha: *const Self,
        a: *const Self,
        lda: i32,
        b: *const Self,
        ldb: i32,
        beta: *const Self,
        c: *mut Self,
        ldc: i32,
    ) -> sys::cublasStatus_t;
    /// # Safety
    /// cuBLAS' contract for `gemmStridedBatched`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_batched(
        h: sys::cublasHandle_t,
        ta: sys::cublasOperation_t,
        tb: sys::cublasOperation_t,
        m: i32,
        n: i32,
        k: i32,
        alpha: *const Self,
        a: (*const Self, i32, i64),
        b: (*const Self, i32, i64),
        beta: *const Self,
        c: (*mut Self, i32, i64),
        batches: i32,
    ) -> sys::cublasStatus_t;
    /// # Safety
    /// cuBLAS' contract for `syrk`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn syrk(
        h: sys::cublasHandle_t,
        uplo: sys::cublasFillMode_t,
        t: sys::cublasOperation_t,
        n: i32,
        k: i32,
        alpha: *const Self,
        a: *const Self,
        lda: i32,
        beta: *const Self,
        c: *mut Self,
        ldc: i32,
    ) -> sys::cublasStatus_t;
}

impl Real for f64 {
    const SIZE: usize = 8;
    fn one() -> f64 {
        1.0
    }
    fn zero() -> f64 {
        0.0
    }
    unsafe fn gemm(
        h: sys::cublasHandle_t,
        ta: sys::cublasOperation_t,
        tb: sys::cublasOperation_t,
        m: i32,
        n: i32,
        k: i32,
        alpha: *const f64,
        a: *const f64,
        lda: i32,
        b: *const f64,
        ldb: i32,
        beta: *const f64,
        c: *mut f64,
        ldc: i32,
    ) -> sys::cublasStatus_t {
        unsafe { sys::cublasDgemm_v2(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) }
    }
    unsafe fn gemm_batched(
        h: sys::cublasHandle_t,
        ta: sys::cublasOperation_t,
        tb: sys::cublasOperation_t,
        m: i32,
        n: i32,
        k: i32,
        alpha: *const f64,
        a: (*const f64, i32, i64),
        b: (*const f64, i32, i64),
        beta: *const f64,
        c: (*mut f64, i32, i64),
        batches: i32,
    ) -> sys::cublasStatus_t {
        unsafe {
            sys::cublasDgemmStridedBatched(
                h, ta, tb, m, n, k, alpha, a.0, a.1, a.2, b.0, b.1, b.2, beta, c.0, c.1, c.2, batches,
            )
        }
    }
    unsafe fn syrk(
        h: sys::cublasHandle_t,
        uplo: sys::cublasFillMode_t,
        t: sys::cublasOperation_t,
        n: i32,
        k: i32,
        alpha: *const f64,
        a: *const f64,
        lda: i32,
        beta: *const f64,
        c: *mut f64,
        ldc: i32,
    ) -> sys::cublasStatus_t {
        unsafe { sys::cublasDsyrk_v2(h, uplo, t, n, k, alpha, a, lda, beta, c, ldc) }
    }
}

impl Real for f32 {
    const SIZE: usize = 4;
    fn one() -> f32 {
        1.0
    }
    fn zero() -> f32 {
        0.0
    }
    unsafe fn gemm(
        h: sys::cublasHandle_t,
        ta: sys::cublasOperation_t,
        tb: sys::cublasOperation_t,
        m: i32,
        n: i32,
        k: i32,
        alpha: *const f32,
        a: *const f32,
        lda: i32,
        b: *const f32,
        ldb: i32,
        beta: *const f32,
        c: *mut f32,
        ldc: i32,
    ) -> sys::cublasStatus_t {
        unsafe { sys::cublasSgemm_v2(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) }
    }
    unsafe fn gemm_batched(
        h: sys::cublasHandle_t,
        ta: sys::cublasOperation_t,
        tb: sys::cublasOperation_t,
        m: i32,
        n: i32,
        k: i32,
        alpha: *const f32,
        a: (*const f32, i32, i64),
        b: (*const f32, i32, i64),
        beta: *const f32,
        c: (*mut f32, i32, i64),
        batches: i32,
    ) -> sys::cublasStatus_t {
        unsafe {
            sys::cublasSgemmStridedBatched(
                h, ta, tb, m, n, k, alpha, a.0, a.1, a.2, b.0, b.1, b.2, beta, c.0, c.1, c.2, batches,
            )
        }
    }
    unsafe fn syrk(
        h: sys::cublasHandle_t,
        uplo: sys::cublasFillMode_t,
        t: sys::cublasOperation_t,
        n: i32,
        k: i32,
        alpha: *const f32,
        a: *const f32,
        lda: i32,
        beta: *const f32,
        c: *mut f32,
        ldc: i32,
    ) -> sys::cublasStatus_t {
        unsafe { sys::cublasSsyrk_v2(h, uplo, t, n, k, alpha, a, lda, beta, c, ldc) }
    }
}

/// A column-major matrix operand: a buffer, its leading dimension and
/// whether it is used transposed.
#[derive(Clone, Copy, Debug)]
pub struct Mat<'a> {
    pub buf: &'a Buffer,
    pub ld: usize,
    pub trans: bool,
}

fn int(v: usize, what: &str, device: &Device) -> Result<i32> {
    i32::try_from(v).map_err(|_| device.fail("cuBLAS", format!("{what} {v} exceeds cuBLAS' 32-bit sizes")))
}

fn op(t: bool) -> sys::cublasOperation_t {
    if t { sys::cublasOperation_t::CUBLAS_OP_T } else { sys::cublasOperation_t::CUBLAS_OP_N }
}

/// Check that a column-major operand of `rows × cols` (as stored) fits its buffer.
fn fits<T: Real>(m: &Mat<'_>, rows: usize, cols: usize, device: &Device) -> Result<()> {
    let need = if rows == 0 || cols == 0 { 0 } else { (m.ld * (cols - 1) + rows) * T::SIZE };
    if m.ld < rows.max(1) || need > m.buf.len() {
        return Err(device.fail("cuBLAS", format!("a {rows}×{cols} operand does not fit its buffer")));
    }
    Ok(())
}

impl Device {
    pub(crate) fn blas(&self) -> Result<&Blas> {
        self.blas
            .get_or_init(|| {
                // SAFETY: only asks the loader whether the library can be opened.
                if !unsafe { sys::is_culib_present() } {
                    return Err(
                        "the cuBLAS library (libcublas.so) of the CUDA toolkit could not be loaded".into()
                    );
                }
                self.bind().map_err(|e| e.to_string())?;
                CudaBlas::new(self.stream.clone())
                    .map(|b| Blas(Mutex::new(b)))
                    .map_err(|e| format!("cuBLAS: {e:?}"))
            })
            .as_ref()
            .map_err(|e| GpuError::NoGpu(e.clone()))
    }

    /// `C = alpha·op(A)·op(B) + beta·C`, column-major, `C` of `m × n`.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm<T: Real>(
        self: &Arc<Self>,
        m: usize,
        n: usize,
        k: usize,
        alpha: T,
        a: Mat<'_>,
        b: Mat<'_>,
        beta: T,
        c: &Buffer,
        ldc: usize,
    ) -> Result<()> {
        let (ar, ac) = if a.trans { (k, m) } else { (m, k) };
        let (br, bc) = if b.trans { (n, k) } else { (k, n) };
        fits::<T>(&a, ar, ac, self)?;
        fits::<T>(&b, br, bc, self)?;
        fits::<T>(&Mat { buf: c, ld: ldc, trans: false }, m, n, self)?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let blas = self.blas()?;
        let h = blas.0.lock().map_err(|_| self.fail("cuBLAS", "poisoned"))?;
        self.bind()?;
        let (mi, ni, ki) = (int(m, "m", self)?, int(n, "n", self)?, int(k, "k", self)?);
        let (lda, ldb, ldc) = (int(a.ld, "lda", self)?, int(b.ld, "ldb", self)?, int(ldc, "ldc", self)?);
        // SAFETY: sizes checked against the buffers above.
        let st = unsafe {
            T::gemm(
                *h.handle(),
                op(a.trans),
                op(b.trans),
                mi,
                ni,
                ki,
                &alpha,
                a.buf.ptr() as *const T,
                lda,
                b.buf.ptr() as *const T,
                ldb,
                &beta,
                c.ptr() as *mut T,
                ldc,
            )
        };
        status(self, "gemm", st)
    }

    /// `C = Aᵀ·A` (lower triangle only), column-major `A` of `k × n`, `C` of `n × n`.
    pub fn syrk_lower_t<T: Real>(
        self: &Arc<Self>,
        n: usize,
        k: usize,
        a: Mat<'_>,
        c: &Buffer,
        ldc: usize,
    ) -> Result<()> {
        self.syrk_lower::<T>(true, n, k, a, c, ldc)
    }

    /// `C_b = A_b·A_bᵀ` for `batches` column-major `n × k` slabs `A_b`
    /// lying one after another (leading dimension `n`), each `C_b` `n × n`
    /// likewise: the cross-products of a tall block's columns, slab by slab,
    /// so a product with a long inner dimension and a small result still
    /// fills the device (a single SYRK or GEMM parallelizes over the
    /// result's tiles only).
    pub fn cross_batched<T: Real>(
        self: &Arc<Self>,
        n: usize,
        k: usize,
        batches: usize,
        a: &Buffer,
        c: &Buffer,
    ) -> Result<()> {
        let need = |cols: usize| {
            n.checked_mul(cols).and_then(|v| v.checked_mul(batches)).and_then(|v| v.checked_mul(T::SIZE))
        };
        if need(k).is_none_or(|b| b > a.len()) || need(n).is_none_or(|b| b > c.len()) {
            return Err(self.fail("cuBLAS", format!("{batches} slabs of {n}×{k} do not fit their buffers")));
        }
        if n == 0 || batches == 0 {
            return Ok(());
        }
        let blas = self.blas()?;
        let h = blas.0.lock().map_err(|_| self.fail("cuBLAS", "poisoned"))?;
        self.bind()?;
        let (alpha, beta) = (T::one(), T::zero());
        let (ni, ki, bi) = (int(n, "n", self)?, int(k, "k", self)?, int(batches, "batches", self)?);
        let (sa, sc) = ((n * k) as i64, (n * n) as i64);
        // SAFETY: sizes checked against the buffers above.
        let st = unsafe {
            T::gemm_batched(
                *h.handle(),
                op(false),
                op(true),
                ni,
                ni,
                ki,
                &alpha,
                (a.ptr() as *const T, ni, sa),
                (a.ptr() as *const T, ni, sa),
                &beta,
                (c.ptr() as *mut T, ni, sc),
                bi,
            )
        };
        status(self, "gemm (batched)", st)
    }

    fn syrk_lower<T: Real>(
        self: &Arc<Self>,
        trans: bool,
        n: usize,
        k: usize,
        a: Mat<'_>,
        c: &Buffer,
        ldc: usize,
    ) -> Result<()> {
        if trans {
            fits::<T>(&a, k, n, self)?;
        } else {
            fits::<T>(&a, n, k, self)?;
        }
        fits::<T>(&Mat { buf: c, ld: ldc, trans: false }, n, n, self)?;
        if n == 0 {
            return Ok(());
        }
        let blas = self.blas()?;
        let h = blas.0.lock().map_err(|_| self.fail("cuBLAS", "poisoned"))?;
        self.bind()?;
        let (alpha, beta) = (T::one(), T::zero());
        // SAFETY: sizes checked against the buffers above.
        let st = unsafe {
            T::syrk(
                *h.handle(),
                sys::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
                op(trans),
                int(n, "n", self)?,
                int(k, "k", self)?,
                &alpha,
                a.buf.ptr() as *const T,
                int(a.ld, "lda", self)?,
                &beta,
                c.ptr() as *mut T,
                int(ldc, "ldc", self)?,
            )
        };
        status(self, "syrk", st)
    }
}

fn status(d: &Device, what: &str, st: sys::cublasStatus_t) -> Result<()> {
    if st == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(d.fail(&format!("cuBLAS {what}"), st))
    }
}
