//! Users' raw CUDA kernels (`raw_kernel`): compiled as written (NVRTC to
//! a CUBIN, cached on disk like brisk's own), launched once per block by
//! `map_blocks_gpu` as `name(in, out, n, args...)`, or from a task on host
//! arrays (`k.launch`). Each launch is waited for, so that a fault (an
//! illegal address) fails the task that launched it, named after the
//! kernel, rather than whatever reads the device next.

use serde::{Deserialize, Serialize};

use brisk_gpu::{GpuError, KArg, Launch};

use super::chunk::{GpuChunk, default_device};
use super::expr::{Expr, materialize};
use super::user::RawSpec;
use crate::array::chunk::Chunk;
use crate::array::dtype::{DType, Scalar};
use crate::array::error::ArrayError;

/// How the error of a user's kernel that failed on the device begins,
/// after the device's part (`GPU error on device N: `): a CUDA worker
/// fails the task with it (it would fail wherever it ran) before it
/// leaves for a new context.
pub const USER_KERNEL_FAILED: &str = "user kernel ";

/// The most threads one block may have on every NVIDIA GPU.
const MAX_BLOCK: u32 = 1024;

/// A launch of `map_blocks_gpu`: the grid (one thread per element when
/// `None`), the block, dynamic shared memory, the arguments after `n`, and
/// the output's type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RawLaunch {
    pub grid: Option<[u32; 3]>,
    pub block: [u32; 3],
    pub shared: u32,
    pub args: Vec<Scalar>,
    pub dtype: DType,
}

impl RawLaunch {
    /// Check sizes where the launch is written, not on the device.
    pub fn check(&self) -> Result<(), ArrayError> {
        check_dims(self.grid, self.block)
    }
}

fn check_dims(grid: Option<[u32; 3]>, block: [u32; 3]) -> Result<(), ArrayError> {
    let threads: u64 = block.iter().map(|&b| u64::from(b)).product();
    if threads == 0 || threads > u64::from(MAX_BLOCK) || block[2] > 64 {
        return Err(ArrayError::Value(format!(
            "a block of {block:?} threads: between 1 and {MAX_BLOCK} threads in all, at most 64 along z"
        )));
    }
    if let Some(g) = grid
        && (g.contains(&0) || g[1] > 65535 || g[2] > 65535 || g[0] > i32::MAX as u32)
    {
        return Err(ArrayError::Value(format!(
            "a grid of {g:?} blocks: at least 1 along each axis, at most 65535 along y and z"
        )));
    }
    Ok(())
}

/// A number as a kernel argument: ints as `long long`, floats as `double`,
/// bools as `int`.
fn karg(s: Scalar) -> KArg {
    match s {
        Scalar::Int(i) => KArg::I64(i),
        Scalar::Float(f) => KArg::F64(f),
        Scalar::Bool(b) => KArg::I32(i32::from(b)),
    }
}

/// Launch and wait: a failure on the device is this kernel's.
fn run(
    spec: &RawSpec,
    device: &std::sync::Arc<brisk_gpu::Device>,
    cfg: Launch,
    args: &[KArg],
) -> Result<(), ArrayError> {
    let k = device.kernel(&spec.source, &spec.name)?;
    let named = |e: GpuError| match e {
        GpuError::Call { device, detail, .. } => ArrayError::Gpu(
            GpuError::Call { device, what: format!("{USER_KERNEL_FAILED}{}", spec.name), detail }.to_string(),
        ),
        e => e.into(),
    };
    device.launch(&k, cfg, args).map_err(named)?;
    device.synchronize().map_err(named)
}

/// `map_blocks_gpu` on one block: `name(in, out, n, args...)` with `in`
/// the block in C order, `out` a new block of its shape, `n` its length.
pub fn map_block(spec: &RawSpec, l: &RawLaunch, x: &GpuChunk) -> Result<GpuChunk, ArrayError> {
    l.check()?;
    let x = if x.is_c_contiguous() { x.clone() } else { materialize(&Expr::leaf(x.clone()))? };
    let device = x.device().clone();
    let out = GpuChunk::alloc(&device, l.dtype, x.shape())?;
    let n = x.len();
    let per = l.block.iter().product::<u32>().max(1) as usize;
    let grid = l.grid.unwrap_or([n.div_ceil(per).clamp(1, i32::MAX as usize) as u32, 1, 1]);
    let cfg = Launch {
        grid: (grid[0], grid[1], grid[2]),
        block: (l.block[0], l.block[1], l.block[2]),
        shared: l.shared,
    };
    let mut args = vec![KArg::U64(x.ptr()), KArg::U64(out.ptr()), KArg::I64(n as i64)];
    args.extend(l.args.iter().map(|&s| karg(s)));
    run(spec, &device, cfg, &args)?;
    Ok(out)
}

/// An argument of `k.launch` from a task.
#[derive(Clone, Debug)]
pub enum HostArg {
    Array(Chunk),
    Scalar(Scalar),
}

/// `k.launch(#{grid, block, shared_mem, args})` in a task: the arrays go
/// to the GPU (a pointer each, in C order), the kernel runs, and the
/// arrays come back in their new state, in order: a kernel writes its
/// results into arrays it was given, as with CuPy's `RawKernel`.
pub fn launch_host(
    spec: &RawSpec,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    args: &[HostArg],
) -> Result<Vec<Chunk>, ArrayError> {
    check_dims(Some(grid), block)?;
    let device = default_device()?;
    let mut blocks = Vec::new();
    let mut kargs = Vec::with_capacity(args.len());
    for a in args {
        match a {
            HostArg::Array(c) => {
                let g = GpuChunk::from_host(c, &device)?;
                kargs.push(KArg::U64(g.ptr()));
                blocks.push(g);
            }
            HostArg::Scalar(s) => kargs.push(karg(*s)),
        }
    }
    let cfg = Launch { grid: (grid[0], grid[1], grid[2]), block: (block[0], block[1], block[2]), shared };
    run(spec, &device, cfg, &kargs)?;
    blocks.iter().map(GpuChunk::to_host).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_sizes_are_checked_before_the_device() {
        let l = |grid, block| RawLaunch { grid, block, shared: 0, args: vec![], dtype: DType::F64 }.check();
        assert!(l(None, [256, 1, 1]).is_ok());
        assert!(l(Some([4, 4, 1]), [16, 16, 1]).is_ok());
        assert!(l(None, [2048, 1, 1]).expect_err("refused").to_string().contains("between 1 and 1024"));
        assert!(l(None, [0, 1, 1]).is_err());
        assert!(l(Some([0, 1, 1]), [32, 1, 1]).expect_err("refused").to_string().contains("at least 1"));
        assert!(l(Some([1, 70000, 1]), [32, 1, 1]).is_err());
    }
}
