//! brisk's CUDA layer, beneath the engine's GPU chunks: the devices of this
//! machine (found at run time; none is a plain `no GPU: <reason>`), one
//! stream per device, device memory from the driver's stream-ordered pool
//! (kept for reuse, as RMM's pool), kernels compiled with NVRTC and cached
//! on disk, cuBLAS and cuSOLVER. It knows nothing of arrays: the engine writes the
//! kernels and decides the layouts.

// This crate is brisk's one FFI boundary to CUDA: unsafe is allowed here, and
// only here, each block with its SAFETY reason; everything it exports is safe.
#![allow(unsafe_code)]

mod blas;
mod buffer;
mod device;
mod error;
mod ipc;
mod kernel;
mod solver;

pub use blas::{Mat, Real};
pub use buffer::Buffer;
pub use device::{Device, Runtime, available, opened, runtime};
pub use error::{GpuError, Result, bytes};
pub use ipc::{Exported, Lease};
pub use kernel::{KArg, Kernel, Launch, cache_dir};
pub use solver::Lapack;

#[cfg(test)]
mod tests {
    use super::*;

    /// On any machine: devices, or `no GPU: <reason>`, never a panic. With
    /// `BRISK_REQUIRE_GPU` set (scripts/gpu-tests.sh) a device must be found.
    #[test]
    fn runtime_opens_or_says_why() {
        match runtime() {
            Ok(rt) => {
                assert!(!rt.devices().is_empty());
                let d = &rt.devices()[0];
                assert!(d.total_memory() > 0);
                eprintln!("GPU 0: {} ({} SMs)", d.name(), d.sm_count());
            }
            Err(e) => {
                assert!(e.to_string().starts_with("no GPU: "), "{e}");
                assert!(std::env::var_os("BRISK_REQUIRE_GPU").is_none(), "a GPU was required: {e}");
                eprintln!("skipped: {e}");
            }
        }
    }

    /// A kernel compiles, runs and round-trips through device memory; the
    /// second request comes from the cache.
    #[test]
    fn kernel_round_trip() {
        let Ok(rt) = runtime() else {
            eprintln!("skipped: no GPU");
            return;
        };
        let d = &rt.devices()[0];
        let src = r#"extern "C" __global__ void axpb(double* y, const double* x, unsigned long long n) {
            for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = 2.0 * x[i] + 1.0;
        }"#;
        let k = d.kernel(src, "axpb").expect("compiles");
        let k2 = d.kernel(src, "axpb").expect("cached");
        assert!(std::sync::Arc::ptr_eq(&k, &k2));
        let xs: Vec<f64> = (0..100_000).map(f64::from).collect();
        let bytes: Vec<u8> = xs.iter().flat_map(|v| v.to_le_bytes()).collect();
        let x = Buffer::upload(d, &bytes, &|| "x".into()).expect("upload");
        let y = Buffer::alloc(d, bytes.len(), &|| "y".into()).expect("alloc");
        d.launch(
            &k,
            Launch::linear(d, xs.len(), 256),
            &[KArg::U64(y.ptr()), KArg::U64(x.ptr()), KArg::U64(xs.len() as u64)],
        )
        .expect("launch");
        let out = y.download().expect("download");
        for (i, c) in out.chunks_exact(8).enumerate() {
            let v = f64::from_le_bytes(c.try_into().expect("8 bytes"));
            assert_eq!(v, 2.0 * i as f64 + 1.0);
        }
        let err = d.kernel("this is not CUDA", "nothing").expect_err("must not compile");
        assert!(err.to_string().contains("did not compile"), "{err}");
    }

    #[test]
    fn impossible_allocation_is_a_clear_error() {
        let Ok(rt) = runtime() else {
            eprintln!("skipped: no GPU");
            return;
        };
        let d = &rt.devices()[0];
        let e = Buffer::alloc(d, (d.total_memory() * 2) as usize, &|| "a test block".into())
            .expect_err("too big");
        let msg = e.to_string();
        assert!(msg.starts_with("out of GPU memory on device 0") && msg.contains("a test block"), "{msg}");
    }
}
