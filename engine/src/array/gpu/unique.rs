//! `unique` of a GPU block with few distinct values (labels, categories,
//! flags: what a classifier's `classes_` or a groupby's keys read), without
//! a sort: each round is one pass that finds the smallest value above the
//! last one found, so `d` distinct values take `d + 1` passes over the
//! block, all queued on the device, rounds launched in batches that double
//! until one finds nothing. Values are compared by their total order (as
//! the CPU path's `total_cmp`: -0.0 before 0.0). A block with NaN or with
//! more than `CAP` distinct values answers `None`, and the host sorts it.

use std::fmt::Write;

use brisk_gpu::{KArg, Launch};

use super::chunk::GpuChunk;
use super::expr::{PRELUDE, store_type};
use crate::array::chunk::Chunk;
use crate::array::dtype::DType;
use crate::array::error::ArrayError;

/// The most distinct values found on the device.
const CAP: usize = 1024;
const THREADS: u32 = 256;

pub fn few_distinct(x: &GpuChunk) -> Result<Option<GpuChunk>, ArrayError> {
    let x = x.contiguous()?;
    let n = x.len();
    let device = x.device().clone();
    let key = match x.dtype() {
        DType::F64 => {
            "u64 b = (u64)__double_as_longlong(v); return (b >> 63) ? ~b : (b | 0x8000000000000000ULL);"
        }
        DType::F32 => {
            "unsigned int b = __float_as_uint(v); return (u64)((b >> 31) ? ~b : (b | 0x80000000u));"
        }
        DType::I64 => "return (u64)v ^ 0x8000000000000000ULL;",
        DType::Bool => "return (u64)(v != 0);",
    };
    let mut src = String::from(PRELUDE);
    let _ = write!(
        src,
        r#"
typedef {xt} XT;
__device__ __forceinline__ u64 order_key(XT v) {{ {key} }}
/// Round r: the smallest key above keys[r - 1] (any key when r = 0), per
/// thread block; nothing once a round has found nothing.
extern "C" __global__ void brisk_unique_round(const XT* __restrict__ x, u64 n, const u64* __restrict__ keys,
    const int* __restrict__ has, int r, u64* __restrict__ part, int* __restrict__ part_has, int* __restrict__ nan) {{
  __shared__ u64 bk[{t}];
  __shared__ int bh[{t}];
  const bool live = r == 0 || has[r - 1];
  const u64 lower = r == 0 ? 0 : keys[r - 1];
  u64 best = ~0ULL;
  int found = 0;
  if (live) {{
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {{
      const XT v = x[i];
      if (v != v) {{ *nan = 1; continue; }}
      const u64 k = order_key(v);
      if ((r == 0 || k > lower) && (!found || k < best)) {{ best = k; found = 1; }}
    }}
  }}
  bk[threadIdx.x] = best;
  bh[threadIdx.x] = found;
  __syncthreads();
  for (int s = {t} / 2; s > 0; s >>= 1) {{
    if ((int)threadIdx.x < s && bh[threadIdx.x + s] && (!bh[threadIdx.x] || bk[threadIdx.x + s] < bk[threadIdx.x])) {{
      bk[threadIdx.x] = bk[threadIdx.x + s];
      bh[threadIdx.x] = 1;
    }}
    __syncthreads();
  }}
  if (threadIdx.x == 0) {{ part[blockIdx.x] = bk[0]; part_has[blockIdx.x] = bh[0]; }}
}}
extern "C" __global__ void brisk_unique_merge(const u64* __restrict__ part, const int* __restrict__ part_has, u64 g,
    int r, u64* __restrict__ keys, int* __restrict__ has) {{
  __shared__ u64 bk[{t}];
  __shared__ int bh[{t}];
  u64 best = ~0ULL;
  int found = 0;
  for (u64 i = threadIdx.x; i < g; i += blockDim.x)
    if (part_has[i] && (!found || part[i] < best)) {{ best = part[i]; found = 1; }}
  bk[threadIdx.x] = best;
  bh[threadIdx.x] = found;
  __syncthreads();
  for (int s = {t} / 2; s > 0; s >>= 1) {{
    if ((int)threadIdx.x < s && bh[threadIdx.x + s] && (!bh[threadIdx.x] || bk[threadIdx.x + s] < bk[threadIdx.x])) {{
      bk[threadIdx.x] = bk[threadIdx.x + s];
      bh[threadIdx.x] = 1;
    }}
    __syncthreads();
  }}
  if (threadIdx.x == 0) {{ keys[r] = bk[0]; has[r] = bh[0]; }}
}}
"#,
        xt = store_type(x.dtype()),
        t = THREADS,
    );
    let round = device.kernel(&src, "brisk_unique_round")?;
    let merge = device.kernel(&src, "brisk_unique_merge")?;
    let launch = Launch::linear(&device, n, THREADS);
    let g = launch.grid.0 as usize;
    let keys = GpuChunk::alloc(&device, DType::I64, &[CAP + 1])?;
    let has = GpuChunk::alloc(&device, DType::I64, &[CAP.div_ceil(2) + 1])?;
    let part = GpuChunk::alloc(&device, DType::I64, &[g])?;
    let part_has = GpuChunk::alloc(&device, DType::I64, &[g.div_ceil(2)])?;
    let nan = GpuChunk::alloc(&device, DType::I64, &[1])?;
    nan.buffer().fill_bytes(0)?;
    let one = Launch { grid: (1, 1, 1), block: (THREADS, 1, 1), shared: 0 };
    let (mut done, mut batch) = (0usize, 4usize);
    loop {
        let upto = (done + batch).min(CAP + 1);
        for r in done..upto {
            let args = [
                KArg::U64(x.ptr()),
                KArg::U64(n as u64),
                KArg::U64(keys.ptr()),
                KArg::U64(has.ptr()),
                KArg::I32(r as i32),
                KArg::U64(part.ptr()),
                KArg::U64(part_has.ptr()),
                KArg::U64(nan.ptr()),
            ];
            device.launch(&round, launch, &args)?;
            let margs = [
                KArg::U64(part.ptr()),
                KArg::U64(part_has.ptr()),
                KArg::U64(g as u64),
                KArg::I32(r as i32),
                KArg::U64(keys.ptr()),
                KArg::U64(has.ptr()),
            ];
            device.launch(&merge, one, &margs)?;
        }
        done = upto;
        let flags = has.buffer().download()?;
        let found = |r: usize| flags.get(4 * r..4 * r + 4).is_some_and(|b| b != [0, 0, 0, 0]);
        if nan.buffer().download()?.iter().any(|&b| b != 0) {
            return Ok(None);
        }
        if !found(done - 1) {
            let count = (0..done).take_while(|&r| found(r)).count();
            let raw = keys.buffer().download()?;
            let ks: Vec<u64> = raw
                .chunks_exact(8)
                .take(count)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                .collect();
            return Ok(Some(GpuChunk::from_host(&values(x.dtype(), &ks)?, &device)?));
        }
        if done > CAP {
            return Ok(None);
        }
        batch *= 2;
    }
}

/// The values of order keys (`order_key`'s inverse), as a 1-d chunk.
fn values(t: DType, keys: &[u64]) -> Result<Chunk, ArrayError> {
    let n = keys.len();
    const TOP: u64 = 0x8000_0000_0000_0000;
    Ok(match t {
        DType::F64 => Chunk::from_vec(
            &[n],
            keys.iter().map(|&k| f64::from_bits(if k & TOP != 0 { k & !TOP } else { !k })).collect(),
        )?,
        DType::F32 => Chunk::from_vec(
            &[n],
            keys.iter()
                .map(|&k| {
                    let k = k as u32;
                    f32::from_bits(if k & 0x8000_0000 != 0 { k & 0x7fff_ffff } else { !k })
                })
                .collect(),
        )?,
        DType::I64 => Chunk::from_vec(&[n], keys.iter().map(|&k| (k ^ TOP) as i64).collect())?,
        DType::Bool => Chunk::from_vec(&[n], keys.iter().map(|&k| k != 0).collect())?,
    })
}
