//! Scans of GPU blocks: cumulative sums along an axis (the block step of
//! Dask's `cumsum`; offsets from earlier blocks are added by elementwise
//! tasks, as on the host), boolean-mask selection (a scan of the mask gives
//! each kept element its place) and histograms.
//!
//! A cumsum is seen as `(A, K, B)`. With `B > 1` a thread per `(a, b)` walks
//! `K` (neighbouring threads read neighbouring elements). Along the last
//! axis each row is cut into segments that thread blocks scan at once
//! (tiles, warp shuffles, a carry from tile to tile); the segments' totals
//! are scanned in turn and added back, so one long row fills the device.

use std::fmt::Write;

use brisk_gpu::{KArg, Launch};

use super::chunk::GpuChunk;
use super::expr::{Expr, PRELUDE, ctype, emit_cast, materialize, store_type};
use crate::array::dtype::{DType, Scalar};
use crate::array::error::{ArrayError, fmt_shape};

/// Elements each thread of a row scan takes per tile.
const PER_THREAD: usize = 4;
/// Elements of a row one thread block scans (a power of two: `i >> SEG_BITS`).
const SEG_BITS: u32 = 13;

/// `cumsum` along `axis`, in the sum type of the block's dtype (bool and
/// integers in i64), as the CPU path's.
pub fn cumsum(x: &GpuChunk, axis: usize) -> Result<GpuChunk, ArrayError> {
    if axis >= x.ndim() {
        return Err(ArrayError::Axis { axis: axis as i64, ndim: x.ndim() });
    }
    let out_t = x.dtype().sum_type();
    let device = x.device().clone();
    let out = GpuChunk::alloc(&device, out_t, x.shape())?;
    if out.is_empty() {
        return Ok(out);
    }
    let x = x.contiguous()?;
    let shape = x.shape();
    let a: usize = shape[..axis].iter().product();
    let k = shape[axis];
    let b: usize = shape[axis + 1..].iter().product();
    if b == 1 {
        scan_rows(&x, &out, a, k)?;
        return Ok(out);
    }
    let ty = ctype(out_t);
    let (xs, st) = (store_type(x.dtype()), store_type(out_t));
    let load = load(x.dtype(), out_t);
    let mut src = String::from(PRELUDE);
    let _ = write!(
        src,
        r#"
extern "C" __global__ void scan(unsigned char* __restrict__ out_raw, const {xs}* __restrict__ x, u64 an, u64 k, u64 bn) {{
  {st}* out = ({st}*)out_raw;
  for (u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x; t < an * bn; t += (u64)gridDim.x * blockDim.x) {{
    u64 base = (t / bn) * k * bn + t % bn;
    {ty} acc = 0;
    for (u64 j = 0; j < k; ++j) {{
      u64 i = base + j * bn;
      acc = b_add(acc, {load});
      out[i] = ({st})acc;
    }}
  }}
}}
"#
    );
    let launch = Launch::linear(&device, a * b, 256);
    let kern = device.kernel(&src, "scan")?;
    let args = [
        KArg::U64(out.ptr()),
        KArg::U64(x.ptr()),
        KArg::U64(a as u64),
        KArg::U64(k as u64),
        KArg::U64(b as u64),
    ];
    device.launch(&kern, launch, &args)?;
    Ok(out)
}

/// `x[i]` of a block of `from` as a value of `to`.
fn load(from: DType, to: DType) -> String {
    let raw = if from == DType::Bool { "(x[i] != 0)" } else { "x[i]" };
    let mut s = String::new();
    emit_cast(from, to, raw, &mut s);
    s
}

/// Inclusive scans of the `rows` C-ordered rows of length `k` of `x` into
/// `out` (same shape, the sum type).
fn scan_rows(x: &GpuChunk, out: &GpuChunk, rows: usize, k: usize) -> Result<(), ArrayError> {
    let device = x.device().clone();
    let out_t = out.dtype();
    let seg = 1usize << SEG_BITS;
    let nseg = k.div_ceil(seg);
    // The segments' totals, scanned afterwards (none for one segment).
    let totals = if nseg > 1 { Some(GpuChunk::alloc(&device, out_t, &[rows, nseg])?) } else { None };
    let ty = ctype(out_t);
    let (xs, st) = (store_type(x.dtype()), store_type(out_t));
    let load = load(x.dtype(), out_t);
    let mut src = String::from(PRELUDE);
    let _ = write!(
        src,
        r#"
extern "C" __global__ void scan(unsigned char* __restrict__ out_raw, const {xs}* __restrict__ x, u64 rows, u64 k, unsigned char* __restrict__ tot_raw) {{
  {st}* out = ({st}*)out_raw;
  {st}* tot = ({st}*)tot_raw;
  __shared__ {ty} warp_tot[32];
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const u64 s0 = (u64)blockIdx.x << {SEG_BITS};
  const u64 s1 = s0 + (1ULL << {SEG_BITS}) < k ? s0 + (1ULL << {SEG_BITS}) : k;
  for (u64 r = blockIdx.y; r < rows; r += gridDim.y) {{
    {ty} carry = 0;
    for (u64 tile = s0; tile < s1; tile += (u64)blockDim.x * {PER_THREAD}) {{
      {ty} v[{PER_THREAD}];
      {ty} s = 0;
      u64 col = tile + (u64)threadIdx.x * {PER_THREAD};
      for (int j = 0; j < {PER_THREAD}; ++j) {{
        u64 i = r * k + col + j;
        {ty} e = (col + j < s1) ? ({ty})({load}) : ({ty})0;
        s = b_add(s, e);
        v[j] = s;
      }}
      {ty} incl = s;
      for (unsigned off = 1; off < 32; off <<= 1) {{
        {ty} y = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl = b_add(incl, y);
      }}
      {ty} excl = __shfl_up_sync(0xffffffffu, incl, 1);
      if (lane == 0) excl = 0;
      if (lane == 31) warp_tot[warp] = incl;
      __syncthreads();
      if (warp == 0) {{
        {ty} w = lane < nwarps ? warp_tot[lane] : ({ty})0;
        for (unsigned off = 1; off < 32; off <<= 1) {{
          {ty} y = __shfl_up_sync(0xffffffffu, w, off);
          if (lane >= off) w = b_add(w, y);
        }}
        warp_tot[lane] = w;
      }}
      __syncthreads();
      {ty} before = b_add(carry, b_add(warp > 0 ? warp_tot[warp - 1] : ({ty})0, excl));
      for (int j = 0; j < {PER_THREAD}; ++j) {{
        if (col + j < s1) out[r * k + col + j] = ({st})b_add(before, v[j]);
      }}
      carry = b_add(carry, warp_tot[nwarps - 1]);
      __syncthreads();
    }}
    if (tot != 0 && threadIdx.x == 0) tot[r * gridDim.x + blockIdx.x] = ({st})carry;
  }}
}}
"#
    );
    let threads = (k.min(seg).div_ceil(PER_THREAD).div_ceil(32) * 32).clamp(32, 1024);
    let launch = Launch {
        grid: (nseg as u32, rows.clamp(1, 65535) as u32, 1),
        block: (threads as u32, 1, 1),
        shared: 0,
    };
    let kern = device.kernel(&src, "scan")?;
    let args = [
        KArg::U64(out.ptr()),
        KArg::U64(x.ptr()),
        KArg::U64(rows as u64),
        KArg::U64(k as u64),
        KArg::U64(totals.as_ref().map_or(0, GpuChunk::ptr)),
    ];
    device.launch(&kern, launch, &args)?;
    let Some(totals) = totals else { return Ok(()) };
    // Each segment after the first adds the scanned totals before it.
    let before = cumsum(&totals, 1)?;
    let mut add = String::from(PRELUDE);
    let _ = write!(
        add,
        r#"
extern "C" __global__ void carry(unsigned char* __restrict__ out_raw, const {st}* __restrict__ before, u64 rows, u64 k, u64 nseg) {{
  {st}* out = ({st}*)out_raw;
  for (u64 r = blockIdx.y; r < rows; r += gridDim.y) {{
    for (u64 c = (1ULL << {SEG_BITS}) + (u64)blockIdx.x * blockDim.x + threadIdx.x; c < k; c += (u64)gridDim.x * blockDim.x) {{
      out[r * k + c] = ({st})b_add(({ty})out[r * k + c], ({ty})before[r * nseg + (c >> {SEG_BITS}) - 1]);
    }}
  }}
}}
"#
    );
    let kern = device.kernel(&add, "carry")?;
    let gx = (k - seg).div_ceil(256).clamp(1, 4096);
    let launch = Launch { grid: (gx as u32, rows.clamp(1, 65535) as u32, 1), block: (256, 1, 1), shared: 0 };
    let args = [
        KArg::U64(out.ptr()),
        KArg::U64(before.ptr()),
        KArg::U64(rows as u64),
        KArg::U64(k as u64),
        KArg::U64(nseg as u64),
    ];
    device.launch(&kern, launch, &args)?;
    // `before` and `totals` are freed in stream order, after the kernel.
    Ok(())
}

/// The elements of `x` where `cond` is true (nonzero), in C order, as a
/// 1-d block: the CPU path's `mask`. The mask's scan gives each kept
/// element its place; its last value (read back: the one wait) is the
/// length of the result.
pub fn mask(x: &GpuChunk, cond: &GpuChunk) -> Result<GpuChunk, ArrayError> {
    if x.shape() != cond.shape() {
        return Err(ArrayError::Shape(format!(
            "boolean index of shape {} does not match the array's shape {}",
            fmt_shape(cond.shape()),
            fmt_shape(x.shape())
        )));
    }
    let n = x.len();
    let device = x.device().clone();
    if n == 0 {
        return GpuChunk::alloc(&device, x.dtype(), &[0]);
    }
    let flags = if cond.dtype() == DType::Bool {
        cond.to_device(&device)?
    } else {
        materialize(&Expr::cast(Expr::leaf(cond.to_device(&device)?), DType::Bool))?
    };
    let flags = flags.reshape(&[n])?;
    let place = cumsum(&flags, 0)?;
    let kept = match place
        .slice(&[(crate::array::shape::AxisSlice { start: n - 1, stop: n, step: 1 }, false)])?
        .to_host()?
    {
        crate::array::chunk::Chunk::I64(a) => a.iter().next().copied().unwrap_or(0).max(0) as usize,
        other => return Err(ArrayError::Value(format!("mask positions are {}, not i64", other.dtype()))),
    };
    let out = GpuChunk::alloc(&device, x.dtype(), &[kept])?;
    if kept == 0 {
        return Ok(out);
    }
    let x = x.reshape(&[n])?;
    let xs = store_type(x.dtype());
    let mut src = String::from(PRELUDE);
    let _ = write!(
        src,
        r#"
extern "C" __global__ void pick(unsigned char* __restrict__ out_raw, const {xs}* __restrict__ x, const unsigned char* __restrict__ keep, const i64* __restrict__ place, u64 n) {{
  {xs}* out = ({xs}*)out_raw;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {{
    if (keep[i]) out[place[i] - 1] = x[i];
  }}
}}
"#
    );
    let kern = device.kernel(&src, "pick")?;
    let launch = Launch::linear(&device, n, 256);
    let args = [
        KArg::U64(out.ptr()),
        KArg::U64(x.ptr()),
        KArg::U64(flags.ptr()),
        KArg::U64(place.ptr()),
        KArg::U64(n as u64),
    ];
    device.launch(&kern, launch, &args)?;
    Ok(out)
}

/// Counts of `x`'s values in `bins` equal bins over `[lo, hi]` (the last
/// closed, NaN and values outside left out), as i64: the CPU path's
/// `histogram`. Each thread block counts in shared memory first when the
/// bins fit there.
pub fn histogram(x: &GpuChunk, bins: usize, lo: f64, hi: f64) -> Result<GpuChunk, ArrayError> {
    crate::array::reduce::check_histogram(bins, lo, hi)?;
    let device = x.device().clone();
    let counts = super::create::full(&device, &[bins], Scalar::Int(0), DType::I64)?;
    let n = x.len();
    if n == 0 {
        return Ok(counts);
    }
    let x = x.contiguous()?;
    let xs = store_type(x.dtype());
    let value = load(x.dtype(), DType::F64);
    let shared_bins = bins <= 2048;
    let mut src = String::from(PRELUDE);
    let _ = write!(
        src,
        r#"
extern "C" __global__ void hist(unsigned char* __restrict__ counts_raw, const {xs}* __restrict__ x, u64 n, u64 bins, double lo, double hi, int shared_bins) {{
  unsigned long long* counts = (unsigned long long*)counts_raw;
  extern __shared__ unsigned long long sh[];
  if (shared_bins) {{
    for (u64 b = threadIdx.x; b < bins; b += blockDim.x) sh[b] = 0;
    __syncthreads();
  }}
  const double width = (hi - lo) / (double)bins;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {{
    double v = {value};
    if (!(v >= lo && v <= hi)) continue;
    u64 b = (u64)((v - lo) / width);
    if (b > bins - 1) b = bins - 1;
    if (shared_bins) atomicAdd(&sh[b], 1ULL); else atomicAdd(&counts[b], 1ULL);
  }}
  if (shared_bins) {{
    __syncthreads();
    for (u64 b = threadIdx.x; b < bins; b += blockDim.x) if (sh[b]) atomicAdd(&counts[b], sh[b]);
  }}
}}
"#
    );
    let kern = device.kernel(&src, "hist")?;
    let blocks = n.div_ceil(256).clamp(1, device.sm_count() as usize * 8);
    let shared = if shared_bins { (bins * 8) as u32 } else { 0 };
    let launch = Launch { grid: (blocks as u32, 1, 1), block: (256, 1, 1), shared };
    let args = [
        KArg::U64(counts.ptr()),
        KArg::U64(x.ptr()),
        KArg::U64(n as u64),
        KArg::U64(bins as u64),
        KArg::F64(lo),
        KArg::F64(hi),
        KArg::I32(i32::from(shared_bins)),
    ];
    device.launch(&kern, launch, &args)?;
    Ok(counts)
}
