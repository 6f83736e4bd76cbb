//! What can go wrong on a GPU, typed; the engine reports it once, at the edge.

/// A GPU failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GpuError {
    /// No usable GPU on this machine, and why (no driver library, no device,
    /// a library of the toolkit missing).
    #[error("no GPU: {0}")]
    NoGpu(String),
    /// A device allocation that does not fit, even after pending frees.
    #[error(
        "out of GPU memory on device {device} ({name}): {what} needs {}, {} of {} is free",
        bytes(*requested),
        bytes(*free),
        bytes(*total)
    )]
    OutOfMemory { device: usize, name: String, what: String, requested: u64, free: u64, total: u64 },
    /// A driver, cuBLAS or cuSOLVER call failed.
    #[error("GPU error on device {device}: {what}: {detail}")]
    Call { device: usize, what: String, detail: String },
    /// A kernel did not compile (a brisk bug, or a user's kernel).
    #[error("CUDA kernel {name} did not compile:\n{log}")]
    Compile { name: String, log: String },
    /// A source that compiled but defines no kernel by that name (a
    /// user's `raw_kernel` without `extern "C"`, or misnamed).
    #[error(
        "the compiled source has no kernel named {name}; declare it extern \"C\" __global__ void {name}(...) ({detail})"
    )]
    NoKernel { name: String, detail: String },
}

pub type Result<T> = std::result::Result<T, GpuError>;

/// Bytes as people read them (binary units).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{v:.2} {}", UNITS[u]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_device_and_sizes() {
        let e = GpuError::OutOfMemory {
            device: 0,
            name: "NVIDIA H100".into(),
            what: "a random block of shape (40000, 40000) f64".into(),
            requested: 12_800_000_000,
            free: 1 << 30,
            total: 80 << 30,
        };
        assert_eq!(
            e.to_string(),
            "out of GPU memory on device 0 (NVIDIA H100): a random block of shape (40000, 40000) f64 needs 11.92 GiB, 1.00 GiB of 80.00 GiB is free"
        );
        assert_eq!(GpuError::NoGpu("no NVIDIA driver".into()).to_string(), "no GPU: no NVIDIA driver");
    }
}
