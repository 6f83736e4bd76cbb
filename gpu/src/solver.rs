//! Dense factorizations through cuSOLVER (QR, SVD, LU solves) and cuBLAS'
//! triangular solve, on the device's stream. Everything is column-major and
//! in place, as LAPACK: callers pass buffers they own (copies of their
//! blocks), and workspaces come from the device's pool. Only the calls that
//! can fail on their input (an SVD that does not converge, a singular LU)
//! read their status back, which waits for the stream; the others are
//! checked before they are queued.

use std::sync::{Arc, Mutex};

use cudarc::cusolver::sys;

use crate::blas::Real;
use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::{GpuError, Result};

/// A cuSOLVER handle bound to the device's stream; calls are serialized.
pub struct Solver(Mutex<cudarc::cusolver::safe::DnHandle>);

type Int = ::core::ffi::c_int;

/// The LAPACK entry points of one float type.
pub trait Lapack: Real {
    /// # Safety
    /// cuSOLVER's contract for each call (valid handle, pointers and sizes).
    unsafe fn geqrf_ws(
        h: sys::cusolverDnHandle_t,
        m: Int,
        n: Int,
        a: *mut Self,
        lda: Int,
        lw: *mut Int,
    ) -> sys::cusolverStatus_t;
    /// # Safety
    /// cuSOLVER's (or cuBLAS') contract for the call.
    #[allow(clippy::too_many_arguments)]
    unsafe fn geqrf(
        h: sys::cusolverDnHandle_t,
        m: Int,
        n: Int,
        a: *mut Self,
        lda: Int,
        tau: *mut Self,
        w: *mut Self,
        lw: Int,
        info: *mut Int,
    ) -> sys::cusolverStatus_t;
    /// # Safety
    /// cuSOLVER's (or cuBLAS') contract for the call.
    #[allow(clippy::too_many_arguments)]
    unsafe fn orgqr_ws(
        h: sys::cusolverDnHandle_t,
        m: Int,
        n: Int,
        k: Int,
        a: *const Self,
        lda: Int,
        tau: *const Self,
        lw: *mut Int,
    ) -> sys::cusolverStatus_t;
    /// # Safety
    /// cuSOLVER's (or cuBLAS') contract for the call.
    #[allow(clippy::too_many_arguments)]
    unsafe fn orgqr(
        h: sys::cusolverDnHandle_t,
        m: Int,
        n: Int,
        k: Int,
        a: *mut Self,
        lda: Int,
        tau: *const Self,
        w: *mut Self,
        lw: Int,
        info: *mut Int,
    ) -> sys::cusolverStatus_t;
    /// # Safety
    /// cuSOLVER's (or cuBLAS') contract for the call.
    #[allow(clippy::too_many_arguments)]
    unsafe fn ormqr_ws(
        h: sys::cusolverDnHandle_t,
        side: sys::cublasSideMode_t,
        t: sys::cublasOperation_t,
        m: Int,
        n: Int,
        k: Int,
        a: *const Self,
        lda: Int,
        tau: *const Self,
        c: *const Self,
        ldc: Int,
        lw: *mut Int,
    ) -> sys::cusolverStatus_t;
    /// # Safety
    /// cuSOLVER's (or cuBLAS') contract for the call.
    #[allow(clippy::too_many_arguments)]
    unsafe fn ormqr(
        h: sys::cusolverDnHandle_t,
        side: sys::cublasSideMode_t,
        t: sys::cublasOperation_t,
        m: Int,
        n: Int,
        k: Int,
        a: *const Self,
        lda: Int,
        tau: *const Self,
        c: *mut Self,
        ldc: Int,
        w: *mut Self,
        lw: Int,
        info: *mut Int,
    ) -> sys::cusolverStatus_t;
    /// # Safety
    /// cuSOLVER's (or cuBLAS') contract for the call.
    unsafe fn gesvd_ws(h: sys::cusolverDnHandle_t, m: Int, n: Int, lw: *mut Int) -> sys::cusolverStatus_t;
    /// # Safety
    /// cuSOLVER's (or cuBLAS') contract for the call.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gesvd(
        h: sys::cusolverDnHandle_t,
        ju: i8,
        jv: i8,
        m: Int,
        n: Int,
        a: *mut Self,
        lda: Int,
        s: *mut Self,
        u: *mut Self,
        ldu: Int,
        vt: *mut Self,
        ldvt: Int,
        w: *mut Self,
        lw: Int,
        rw: *mut Self,
        info: *mut Int,
    ) -> sys::cusolverStatus_t;
    /// # Safety
    /// cuSOLVER's (or cuBLAS') contract for the call.
    unsafe fn getrf_ws(
        h: sys::cusolverDnHandle_t,
        m: Int,
        n: Int,
        a: *mut Self,
        lda: Int,
        lw: *mut Int,
    ) -> sys::cusolverStatus_t;
    /// # Safety
    /// cuSOLVER's (or cuBLAS') contract for the call.
    #[allow(clippy::too_many_arguments)]
    unsafe fn getrf(
        h: sys::cusolverDnHandle_t,
        m: Int,
        n: Int,
        a: *mut Self,
        lda: Int,
        w: *mut Self,
        piv: *mut Int,
        info: *mut Int,
    ) -> sys::cusolverStatus_t;
    /// # Safety
    /// cuSOLVER's (or cuBLAS') contract for the call.
    #[allow(clippy::too_many_arguments)]
    unsafe fn getrs(
        h: sys::cusolverDnHandle_t,
        t: sys::cublasOperation_t,
        n: Int,
        nrhs: Int,
        a: *const Self,
        lda: Int,
        piv: *const Int,
        b: *mut Self,
        ldb: Int,
        info: *mut Int,
    ) -> sys::cusolverStatus_t;
    /// # Safety
    /// cuSOLVER's (or cuBLAS') contract for the call.
    #[allow(clippy::too_many_arguments)]
    unsafe fn trsm(
        h: cudarc::cublas::sys::cublasHandle_t,
        side: cudarc::cublas::sys::cublasSideMode_t,
        uplo: cudarc::cublas::sys::cublasFillMode_t,
        t: cudarc::cublas::sys::cublasOperation_t,
        diag: cudarc::cublas::sys::cublasDiagType_t,
        m: Int,
        n: Int,
        alpha: *const Self,
        a: *const Self,
        lda: Int,
        b: *mut Self,
        ldb: Int,
    ) -> cudarc::cublas::sys::cublasStatus_t;
}

macro_rules! lapack {
    ($t:ty, $geqrf_ws:ident, $geqrf:ident, $orgqr_ws:ident, $orgqr:ident, $ormqr_ws:ident, $ormqr:ident,
     $gesvd_ws:ident, $gesvd:ident, $getrf_ws:ident, $getrf:ident, $getrs:ident, $trsm:ident) => {
        impl Lapack for $t {
            unsafe fn geqrf_ws(
                h: sys::cusolverDnHandle_t,
                m: Int,
                n: Int,
                a: *mut $t,
                lda: Int,
                lw: *mut Int,
            ) -> sys::cusolverStatus_t {
                unsafe { sys::$geqrf_ws(h, m, n, a, lda, lw) }
            }
            unsafe fn geqrf(
                h: sys::cusolverDnHandle_t,
                m: Int,
                n: Int,
                a: *mut $t,
                lda: Int,
                tau: *mut $t,
                w: *mut $t,
                lw: Int,
                info: *mut Int,
            ) -> sys::cusolverStatus_t {
                unsafe { sys::$geqrf(h, m, n, a, lda, tau, w, lw, info) }
            }
            unsafe fn orgqr_ws(
                h: sys::cusolverDnHandle_t,
                m: Int,
                n: Int,
                k: Int,
                a: *const $t,
                lda: Int,
                tau: *const $t,
                lw: *mut Int,
            ) -> sys::cusolverStatus_t {
                unsafe { sys::$orgqr_ws(h, m, n, k, a, lda, tau, lw) }
            }
            unsafe fn orgqr(
                h: sys::cusolverDnHandle_t,
                m: Int,
                n: Int,
                k: Int,
                a: *mut $t,
                lda: Int,
                tau: *const $t,
                w: *mut $t,
                lw: Int,
                info: *mut Int,
            ) -> sys::cusolverStatus_t {
                unsafe { sys::$orgqr(h, m, n, k, a, lda, tau, w, lw, info) }
            }
            unsafe fn ormqr_ws(
                h: sys::cusolverDnHandle_t,
                side: sys::cublasSideMode_t,
                t: sys::cublasOperation_t,
                m: Int,
                n: Int,
                k: Int,
                a: *const $t,
                lda: Int,
                tau: *const $t,
                c: *const $t,
                ldc: Int,
                lw: *mut Int,
            ) -> sys::cusolverStatus_t {
                unsafe { sys::$ormqr_ws(h, side, t, m, n, k, a, lda, tau, c, ldc, lw) }
            }
            unsafe fn ormqr(
                h: sys::cusolverDnHandle_t,
                side: sys::cublasSideMode_t,
                t: sys::cublasOperation_t,
                m: Int,
                n: Int,
                k: Int,
                a: *const $t,
                lda: Int,
                tau: *const $t,
                c: *mut $t,
                ldc: Int,
                w: *mut $t,
                lw: Int,
                info: *mut Int,
            ) -> sys::cusolverStatus_t {
                unsafe { sys::$ormqr(h, side, t, m, n, k, a, lda, tau, c, ldc, w, lw, info) }
            }
            unsafe fn gesvd_ws(
                h: sys::cusolverDnHandle_t,
                m: Int,
                n: Int,
                lw: *mut Int,
            ) -> sys::cusolverStatus_t {
                unsafe { sys::$gesvd_ws(h, m, n, lw) }
            }
            unsafe fn gesvd(
                h: sys::cusolverDnHandle_t,
                ju: i8,
                jv: i8,
                m: Int,
                n: Int,
                a: *mut $t,
                lda: Int,
                s: *mut $t,
                u: *mut $t,
                ldu: Int,
                vt: *mut $t,
                ldvt: Int,
                w: *mut $t,
                lw: Int,
                rw: *mut $t,
                info: *mut Int,
            ) -> sys::cusolverStatus_t {
                unsafe { sys::$gesvd(h, ju, jv, m, n, a, lda, s, u, ldu, vt, ldvt, w, lw, rw, info) }
            }
            unsafe fn getrf_ws(
                h: sys::cusolverDnHandle_t,
                m: Int,
                n: Int,
                a: *mut $t,
                lda: Int,
                lw: *mut Int,
            ) -> sys::cusolverStatus_t {
                unsafe { sys::$getrf_ws(h, m, n, a, lda, lw) }
            }
            unsafe fn getrf(
                h: sys::cusolverDnHandle_t,
                m: Int,
                n: Int,
                a: *mut $t,
                lda: Int,
                w: *mut $t,
                piv: *mut Int,
                info: *mut Int,
            ) -> sys::cusolverStatus_t {
                unsafe { sys::$getrf(h, m, n, a, lda, w, piv, info) }
            }
            unsafe fn getrs(
                h: sys::cusolverDnHandle_t,
                t: sys::cublasOperation_t,
                n: Int,
                nrhs: Int,
                a: *const $t,
                lda: Int,
                piv: *const Int,
                b: *mut $t,
                ldb: Int,
                info: *mut Int,
            ) -> sys::cusolverStatus_t {
                unsafe { sys::$getrs(h, t, n, nrhs, a, lda, piv, b, ldb, info) }
            }
            unsafe fn trsm(
                h: cudarc::cublas::sys::cublasHandle_t,
                side: cudarc::cublas::sys::cublasSideMode_t,
                uplo: cudarc::cublas::sys::cublasFillMode_t,
                t: cudarc::cublas::sys::cublasOperation_t,
                diag: cudarc::cublas::sys::cublasDiagType_t,
                m: Int,
                n: Int,
                alpha: *const $t,
                a: *const $t,
                lda: Int,
                b: *mut $t,
                ldb: Int,
            ) -> cudarc::cublas::sys::cublasStatus_t {
                unsafe { cudarc::cublas::sys::$trsm(h, side, uplo, t, diag, m, n, alpha, a, lda, b, ldb) }
            }
        }
    };
}

lapack!(
    f64,
    cusolverDnDgeqrf_bufferSize,
    cusolverDnDgeqrf,
    cusolverDnDorgqr_bufferSize,
    cusolverDnDorgqr,
    cusolverDnDormqr_bufferSize,
    cusolverDnDormqr,
    cusolverDnDgesvd_bufferSize,
    cusolverDnDgesvd,
    cusolverDnDgetrf_bufferSize,
    cusolverDnDgetrf,
    cusolverDnDgetrs,
    cublasDtrsm_v2
);
lapack!(
    f32,
    cusolverDnSgeqrf_bufferSize,
    cusolverDnSgeqrf,
    cusolverDnSorgqr_bufferSize,
    cusolverDnSorgqr,
    cusolverDnSormqr_bufferSize,
    cusolverDnSormqr,
    cusolverDnSgesvd_bufferSize,
    cusolverDnSgesvd,
    cusolverDnSgetrf_bufferSize,
    cusolverDnSgetrf,
    cusolverDnSgetrs,
    cublasStrsm_v2
);

fn int(v: usize, what: &str, device: &Device) -> Result<Int> {
    Int::try_from(v)
        .map_err(|_| device.fail("cuSOLVER", format!("{what} {v} exceeds cuSOLVER's 32-bit sizes")))
}

/// Check that a column-major `rows × cols` matrix with leading dimension
/// `ld` fits `buf`.
fn fits<T: Real>(buf: &Buffer, rows: usize, cols: usize, ld: usize, device: &Device) -> Result<()> {
    let need = if rows == 0 || cols == 0 { 0 } else { (ld * (cols - 1) + rows) * T::SIZE };
    if ld < rows.max(1) || need > buf.len() {
        return Err(device.fail("cuSOLVER", format!("a {rows}×{cols} operand does not fit its buffer")));
    }
    Ok(())
}

fn status(d: &Device, what: &str, st: sys::cusolverStatus_t) -> Result<()> {
    if st == sys::cusolverStatus_t::CUSOLVER_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(d.fail(&format!("cuSOLVER {what}"), st))
    }
}

/// The `info` a call left on the device (waits for the stream).
fn read_info(info: &Buffer) -> Result<i32> {
    let mut b = [0u8; 4];
    info.download_into(&mut b)?;
    Ok(i32::from_le_bytes(b))
}

impl Device {
    fn solver(&self) -> Result<&Solver> {
        self.solver
            .get_or_init(|| {
                // SAFETY: only asks the loader whether the library can be opened.
                if !unsafe { sys::is_culib_present() } {
                    return Err(
                        "the cuSOLVER library (libcusolver.so) of the CUDA toolkit could not be loaded"
                            .into(),
                    );
                }
                self.bind().map_err(|e| e.to_string())?;
                cudarc::cusolver::safe::DnHandle::new(self.stream.clone())
                    .map(|h| Solver(Mutex::new(h)))
                    .map_err(|e| format!("cuSOLVER: {e:?}"))
            })
            .as_ref()
            .map_err(|e| GpuError::NoGpu(e.clone()))
    }

    fn workspace<T: Real>(self: &Arc<Self>, elems: Int, what: &str) -> Result<Buffer> {
        let n = usize::try_from(elems.max(1)).unwrap_or(1);
        Buffer::alloc(self, n * T::SIZE, &|| format!("the workspace of {what}"))
    }

    fn info_buffer(self: &Arc<Self>) -> Result<Buffer> {
        let b = Buffer::alloc(self, 4, &|| "a cuSOLVER status".into())?;
        b.fill_bytes(0)?;
        Ok(b)
    }

    /// QR of the column-major `m × n` matrix in `a` (`m ≥ n`): `R` in its
    /// upper triangle, the Householder vectors below, their scales in `tau`
    /// (`n` elements).
    pub fn geqrf<T: Lapack>(
        self: &Arc<Self>,
        m: usize,
        n: usize,
        a: &Buffer,
        lda: usize,
        tau: &Buffer,
    ) -> Result<()> {
        fits::<T>(a, m, n, lda, self)?;
        fits::<T>(tau, m.min(n), 1, m.min(n).max(1), self)?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let s = self.solver()?;
        let h = s.0.lock().map_err(|_| self.fail("cuSOLVER", "poisoned"))?;
        self.bind()?;
        let (mi, ni, ldi) = (int(m, "m", self)?, int(n, "n", self)?, int(lda, "lda", self)?);
        let mut lw: Int = 0;
        // SAFETY: sizes checked against the buffers above.
        status(self, "geqrf", unsafe { T::geqrf_ws(h.cu(), mi, ni, a.ptr() as *mut T, ldi, &mut lw) })?;
        let (w, info) = (self.workspace::<T>(lw, "a QR")?, self.info_buffer()?);
        let st = unsafe {
            T::geqrf(
                h.cu(),
                mi,
                ni,
                a.ptr() as *mut T,
                ldi,
                tau.ptr() as *mut T,
                w.ptr() as *mut T,
                lw,
                info.ptr() as *mut Int,
            )
        };
        status(self, "geqrf", st)
    }

    /// The first `n` columns of `Q` from `geqrf`'s output (`k` reflectors),
    /// in place of `a`.
    pub fn orgqr<T: Lapack>(
        self: &Arc<Self>,
        m: usize,
        n: usize,
        k: usize,
        a: &Buffer,
        lda: usize,
        tau: &Buffer,
    ) -> Result<()> {
        fits::<T>(a, m, n, lda, self)?;
        fits::<T>(tau, k, 1, k.max(1), self)?;
        if k > n || n > m {
            return Err(self.fail("cuSOLVER orgqr", format!("needs m ≥ n ≥ k, got {m}, {n}, {k}")));
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let s = self.solver()?;
        let h = s.0.lock().map_err(|_| self.fail("cuSOLVER", "poisoned"))?;
        self.bind()?;
        let (mi, ni, ki, ldi) =
            (int(m, "m", self)?, int(n, "n", self)?, int(k, "k", self)?, int(lda, "lda", self)?);
        let (ap, tp) = (a.ptr() as *mut T, tau.ptr() as *const T);
        let mut lw: Int = 0;
        // SAFETY: sizes checked against the buffers above.
        status(self, "orgqr", unsafe { T::orgqr_ws(h.cu(), mi, ni, ki, ap, ldi, tp, &mut lw) })?;
        let (w, info) = (self.workspace::<T>(lw, "forming Q")?, self.info_buffer()?);
        let st = unsafe {
            T::orgqr(h.cu(), mi, ni, ki, ap, ldi, tp, w.ptr() as *mut T, lw, info.ptr() as *mut Int)
        };
        status(self, "orgqr", st)
    }

    /// `C = Q·C` for the `m × m` orthogonal `Q` of `geqrf`'s output in `a`
    /// (`k` reflectors) and the column-major `m × n` matrix `C`.
    #[allow(clippy::too_many_arguments)]
    pub fn ormqr_left<T: Lapack>(
        self: &Arc<Self>,
        m: usize,
        n: usize,
        k: usize,
        a: &Buffer,
        lda: usize,
        tau: &Buffer,
        c: &Buffer,
        ldc: usize,
    ) -> Result<()> {
        fits::<T>(a, m, k, lda, self)?;
        fits::<T>(tau, k, 1, k.max(1), self)?;
        fits::<T>(c, m, n, ldc, self)?;
        if k > m {
            return Err(self.fail("cuSOLVER ormqr", format!("{k} reflectors for {m} rows")));
        }
        if m == 0 || n == 0 || k == 0 {
            return Ok(());
        }
        let s = self.solver()?;
        let h = s.0.lock().map_err(|_| self.fail("cuSOLVER", "poisoned"))?;
        self.bind()?;
        let (mi, ni, ki) = (int(m, "m", self)?, int(n, "n", self)?, int(k, "k", self)?);
        let (ldai, ldci) = (int(lda, "lda", self)?, int(ldc, "ldc", self)?);
        let (side, t) = (sys::cublasSideMode_t::CUBLAS_SIDE_LEFT, sys::cublasOperation_t::CUBLAS_OP_N);
        let (ap, tp, cp) = (a.ptr() as *const T, tau.ptr() as *const T, c.ptr() as *mut T);
        let mut lw: Int = 0;
        // SAFETY: sizes checked against the buffers above.
        status(self, "ormqr", unsafe {
            T::ormqr_ws(h.cu(), side, t, mi, ni, ki, ap, ldai, tp, cp, ldci, &mut lw)
        })?;
        let (w, info) = (self.workspace::<T>(lw, "applying Q")?, self.info_buffer()?);
        let st = unsafe {
            T::ormqr(
                h.cu(),
                side,
                t,
                mi,
                ni,
                ki,
                ap,
                ldai,
                tp,
                cp,
                ldci,
                w.ptr() as *mut T,
                lw,
                info.ptr() as *mut Int,
            )
        };
        status(self, "ormqr", st)
    }

    /// Thin SVD of the column-major `m × n` matrix in `a` (`m ≥ n`,
    /// destroyed): `s` (`n`), and with `vectors` `U` (`m × n`, leading
    /// dimension `m`) and `Vᵀ` (`n × n`). Waits for the stream, to say
    /// whether it converged.
    pub fn gesvd<T: Lapack>(
        self: &Arc<Self>,
        m: usize,
        n: usize,
        a: &Buffer,
        s: &Buffer,
        vectors: Option<(&Buffer, &Buffer)>,
    ) -> Result<()> {
        if m < n {
            return Err(self.fail("cuSOLVER gesvd", format!("needs rows ≥ columns, got {m} × {n}")));
        }
        fits::<T>(a, m, n, m.max(1), self)?;
        fits::<T>(s, n, 1, n.max(1), self)?;
        if let Some((u, vt)) = vectors {
            fits::<T>(u, m, n, m.max(1), self)?;
            fits::<T>(vt, n, n, n.max(1), self)?;
        }
        if n == 0 {
            return Ok(());
        }
        let sv = self.solver()?;
        let h = sv.0.lock().map_err(|_| self.fail("cuSOLVER", "poisoned"))?;
        self.bind()?;
        let (mi, ni) = (int(m, "m", self)?, int(n, "n", self)?);
        let mut lw: Int = 0;
        // SAFETY: sizes checked against the buffers above.
        status(self, "gesvd", unsafe { T::gesvd_ws(h.cu(), mi, ni, &mut lw) })?;
        let (w, info) = (self.workspace::<T>(lw, "an SVD")?, self.info_buffer()?);
        let rw = self.workspace::<T>(ni, "an SVD")?;
        let (job, u, vt) = match vectors {
            Some((u, vt)) => (b'S' as i8, u.ptr() as *mut T, vt.ptr() as *mut T),
            None => (b'N' as i8, std::ptr::null_mut(), std::ptr::null_mut()),
        };
        let st = unsafe {
            T::gesvd(
                h.cu(),
                job,
                job,
                mi,
                ni,
                a.ptr() as *mut T,
                mi,
                s.ptr() as *mut T,
                u,
                mi,
                vt,
                ni,
                w.ptr() as *mut T,
                lw,
                rw.ptr() as *mut T,
                info.ptr() as *mut Int,
            )
        };
        status(self, "gesvd", st)?;
        drop(h);
        match read_info(&info)? {
            0 => Ok(()),
            i => Err(self.fail("cuSOLVER gesvd", format!("the SVD did not converge ({i} superdiagonals)"))),
        }
    }

    /// Solve `A·X = B` for the column-major `n × n` `A` (destroyed: its LU)
    /// and `n × nrhs` `B` (overwritten by `X`). `Ok(false)` when `A` is
    /// singular. Waits for the stream.
    pub fn lu_solve<T: Lapack>(
        self: &Arc<Self>,
        n: usize,
        nrhs: usize,
        a: &Buffer,
        b: &Buffer,
    ) -> Result<bool> {
        fits::<T>(a, n, n, n.max(1), self)?;
        fits::<T>(b, n, nrhs, n.max(1), self)?;
        if n == 0 {
            return Ok(true);
        }
        let sv = self.solver()?;
        let h = sv.0.lock().map_err(|_| self.fail("cuSOLVER", "poisoned"))?;
        self.bind()?;
        let (ni, ri) = (int(n, "n", self)?, int(nrhs, "nrhs", self)?);
        let ap = a.ptr() as *mut T;
        let mut lw: Int = 0;
        // SAFETY: sizes checked against the buffers above.
        status(self, "getrf", unsafe { T::getrf_ws(h.cu(), ni, ni, ap, ni, &mut lw) })?;
        let (w, info) = (self.workspace::<T>(lw, "an LU")?, self.info_buffer()?);
        let piv = Buffer::alloc(self, n * 4, &|| "LU pivots".into())?;
        let st = unsafe {
            T::getrf(h.cu(), ni, ni, ap, ni, w.ptr() as *mut T, piv.ptr() as *mut Int, info.ptr() as *mut Int)
        };
        status(self, "getrf", st)?;
        if read_info(&info)? > 0 {
            return Ok(false);
        }
        if nrhs > 0 {
            let st = unsafe {
                T::getrs(
                    h.cu(),
                    sys::cublasOperation_t::CUBLAS_OP_N,
                    ni,
                    ri,
                    ap,
                    ni,
                    piv.ptr() as *const Int,
                    b.ptr() as *mut T,
                    ni,
                    info.ptr() as *mut Int,
                )
            };
            status(self, "getrs", st)?;
        }
        Ok(true)
    }

    /// Solve `op(A)·X = B` for a triangular column-major `n × n` `A` (lower
    /// or upper, `op` transposing it or not) and `n × nrhs` `B`, in place.
    pub fn trsm_left<T: Lapack>(
        self: &Arc<Self>,
        lower: bool,
        trans: bool,
        n: usize,
        nrhs: usize,
        a: &Buffer,
        b: &Buffer,
    ) -> Result<()> {
        use cudarc::cublas::sys as cb;
        fits::<T>(a, n, n, n.max(1), self)?;
        fits::<T>(b, n, nrhs, n.max(1), self)?;
        if n == 0 || nrhs == 0 {
            return Ok(());
        }
        let blas = self.blas()?;
        let h = blas.0.lock().map_err(|_| self.fail("cuBLAS", "poisoned"))?;
        self.bind()?;
        let (ni, ri) = (int(n, "n", self)?, int(nrhs, "nrhs", self)?);
        let uplo = if lower {
            cb::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER
        } else {
            cb::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER
        };
        let t = if trans { cb::cublasOperation_t::CUBLAS_OP_T } else { cb::cublasOperation_t::CUBLAS_OP_N };
        let one = T::one();
        // SAFETY: sizes checked against the buffers above.
        let st = unsafe {
            T::trsm(
                *h.handle(),
                cb::cublasSideMode_t::CUBLAS_SIDE_LEFT,
                uplo,
                t,
                cb::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT,
                ni,
                ri,
                &one,
                a.ptr() as *const T,
                ni,
                b.ptr() as *mut T,
                ni,
            )
        };
        if st == cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            Ok(())
        } else {
            Err(self.fail("cuBLAS trsm", st))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upload(d: &Arc<Device>, v: &[f64]) -> Buffer {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        Buffer::upload(d, &bytes, &|| "a test matrix".into()).expect("upload")
    }

    fn download(b: &Buffer) -> Vec<f64> {
        b.download()
            .expect("download")
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8")))
            .collect()
    }

    /// Small systems with answers known by hand, column-major.
    #[test]
    fn factorizations_give_known_answers() {
        let Ok(rt) = crate::runtime() else {
            eprintln!("skipped: no GPU");
            return;
        };
        let d = &rt.devices()[0];
        // [[2, 1], [1, 3]] x = [3, 5] → x = [0.8, 1.4].
        let (a, b) = (upload(d, &[2.0, 1.0, 1.0, 3.0]), upload(d, &[3.0, 5.0]));
        assert!(d.lu_solve::<f64>(2, 1, &a, &b).expect("solve"));
        let x = download(&b);
        assert!((x[0] - 0.8).abs() < 1e-14 && (x[1] - 1.4).abs() < 1e-14, "{x:?}");
        let (a, b) = (upload(d, &[1.0, 2.0, 2.0, 4.0]), upload(d, &[1.0, 1.0]));
        assert!(!d.lu_solve::<f64>(2, 1, &a, &b).expect("singular is not an error here"));
        // diag(3, 4) padded to 3 × 2: singular values 4, 3.
        let a = upload(d, &[3.0, 0.0, 0.0, 0.0, 4.0, 0.0]);
        let s = Buffer::alloc(d, 16, &|| "s".into()).expect("s");
        d.gesvd::<f64>(3, 2, &a, &s, None).expect("svd");
        assert_eq!(download(&s), vec![4.0, 3.0]);
        // QR of [[3], [4]]: |R| = 5; Q·[1] applied by ormqr is ±[0.6, 0.8].
        let a = upload(d, &[3.0, 4.0]);
        let tau = Buffer::alloc(d, 8, &|| "tau".into()).expect("tau");
        d.geqrf::<f64>(2, 1, &a, 2, &tau).expect("qr");
        let r = download(&a)[0];
        assert!((r.abs() - 5.0).abs() < 1e-14, "{r}");
        let c = upload(d, &[1.0, 0.0]);
        d.ormqr_left::<f64>(2, 1, 1, &a, 2, &tau, &c, 2).expect("apply");
        let q = download(&c);
        assert!((q[0] * r.signum() - 0.6).abs() < 1e-14 && (q[1] * r.signum() - 0.8).abs() < 1e-14, "{q:?}");
        // Upper-triangular solve: [[2, 1], [0, 4]] x = [4, 8] → x = [1, 2].
        let (a, b) = (upload(d, &[2.0, 0.0, 1.0, 4.0]), upload(d, &[4.0, 8.0]));
        d.trsm_left::<f64>(false, false, 2, 1, &a, &b).expect("trsm");
        assert_eq!(download(&b), vec![1.0, 2.0]);
    }

    /// How long the factorizations of the GPU benchmark's shapes take
    /// (`cargo test -p brisk-gpu -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn solver_timings() {
        let Ok(rt) = crate::runtime() else { return };
        let d = &rt.devices()[0];
        let time = |what: &str, f: &mut dyn FnMut()| {
            f();
            d.synchronize().expect("sync");
            let t = std::time::Instant::now();
            f();
            d.synchronize().expect("sync");
            eprintln!("{what}: {:.2} ms", t.elapsed().as_secs_f64() * 1e3);
        };
        for (m, n, reps) in
            [(10000usize, 1000usize, 1usize), (100000, 100, 20), (2000, 100, 1), (1000, 1000, 1)]
        {
            let data: Vec<f64> = (0..m * n).map(|i| ((i * 7919) % 1013) as f64 / 1013.0).collect();
            let src = upload(d, &data);
            let a = Buffer::alloc(d, m * n * 8, &|| "a".into()).expect("a");
            let tau = Buffer::alloc(d, n * 8, &|| "tau".into()).expect("tau");
            time(&format!("{reps} × geqrf {m}×{n}"), &mut || {
                for _ in 0..reps {
                    a.copy_from(0, &src, 0, m * n * 8).expect("copy");
                    d.geqrf::<f64>(m, n, &a, m, &tau).expect("geqrf");
                }
            });
            time(&format!("{reps} × orgqr {m}×{n}"), &mut || {
                for _ in 0..reps {
                    d.orgqr::<f64>(m, n, n, &a, m, &tau).expect("orgqr");
                }
            });
            let s = Buffer::alloc(d, n * 8, &|| "s".into()).expect("s");
            let u = Buffer::alloc(d, m * n * 8, &|| "u".into()).expect("u");
            let vt = Buffer::alloc(d, n * n * 8, &|| "vt".into()).expect("vt");
            if m * n <= 1_000_000 {
                time(&format!("gesvd {m}×{n} values"), &mut || {
                    a.copy_from(0, &src, 0, m * n * 8).expect("copy");
                    d.gesvd::<f64>(m, n, &a, &s, None).expect("gesvd");
                });
                time(&format!("gesvd {m}×{n} vectors"), &mut || {
                    a.copy_from(0, &src, 0, m * n * 8).expect("copy");
                    d.gesvd::<f64>(m, n, &a, &s, Some((&u, &vt))).expect("gesvd");
                });
                time(&format!("gesvdj {m}×{n} vectors"), &mut || {
                    a.copy_from(0, &src, 0, m * n * 8).expect("copy");
                    gesvdj(d, m, n, &a, &s, &u, &vt);
                });
            }
        }
    }

    /// Jacobi SVD, for comparison with gesvd in the timings.
    fn gesvdj(d: &Arc<Device>, m: usize, n: usize, a: &Buffer, s: &Buffer, u: &Buffer, v: &Buffer) {
        let sv = d.solver().expect("solver");
        let h = sv.0.lock().expect("lock");
        d.bind().expect("bind");
        let (mi, ni) = (m as Int, n as Int);
        let mode = sys::cusolverEigMode_t::CUSOLVER_EIG_MODE_VECTOR;
        let mut params: sys::gesvdjInfo_t = std::ptr::null_mut();
        let mut lw: Int = 0;
        // SAFETY: buffers sized by the caller; params created and destroyed here.
        unsafe {
            status(d, "params", sys::cusolverDnCreateGesvdjInfo(&mut params)).expect("params");
            status(
                d,
                "gesvdj_ws",
                sys::cusolverDnDgesvdj_bufferSize(
                    h.cu(),
                    mode,
                    1,
                    mi,
                    ni,
                    a.ptr() as *const f64,
                    mi,
                    s.ptr() as *const f64,
                    u.ptr() as *const f64,
                    mi,
                    v.ptr() as *const f64,
                    ni,
                    &mut lw,
                    params,
                ),
            )
            .expect("ws");
            let w = d.workspace::<f64>(lw, "gesvdj").expect("w");
            let info = d.info_buffer().expect("info");
            status(
                d,
                "gesvdj",
                sys::cusolverDnDgesvdj(
                    h.cu(),
                    mode,
                    1,
                    mi,
                    ni,
                    a.ptr() as *mut f64,
                    mi,
                    s.ptr() as *mut f64,
                    u.ptr() as *mut f64,
                    mi,
                    v.ptr() as *mut f64,
                    ni,
                    w.ptr() as *mut f64,
                    lw,
                    info.ptr() as *mut Int,
                    params,
                ),
            )
            .expect("gesvdj");
            d.synchronize().expect("sync");
            sys::cusolverDnDestroyGesvdjInfo(params);
        }
    }
}
