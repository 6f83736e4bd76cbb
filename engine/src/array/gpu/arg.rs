//! `argmin` / `argmax` of GPU blocks: the chunk step (each output's best
//! value and its index), the merge of two partials, and the result. The
//! rules are the CPU path's (`array::reduce`): NaN beats everything, ties
//! keep the first occurrence (the smaller index). Along one axis the index
//! is the block's offset plus the position; over every axis it is the flat
//! C-order index in the whole array (`BlockPlace`).

use std::fmt::Write;

use brisk_gpu::{KArg, Launch};

use super::chunk::GpuChunk;
use super::expr::{PRELUDE, store_type};
use crate::array::dtype::DType;
use crate::array::error::ArrayError;
use crate::array::reduce::{BlockPlace, Reduction};

/// `better`, `comb` (fold a candidate `(w, j)` into `(v, i)`; an index
/// below 0 is "none yet") for values of C type `t`.
fn helpers(red: Reduction, t: &str) -> String {
    let cmp = if red == Reduction::ArgMin { "<" } else { ">" };
    format!(
        r#"
__device__ __forceinline__ bool better({t} x, {t} b) {{
  if (b_isnan(b)) return false;
  if (b_isnan(x)) return true;
  return x {cmp} b;
}}
__device__ __forceinline__ void comb({t}& v, i64& i, {t} w, i64 j) {{
  if (j < 0) return;
  if (i < 0 || better(w, v) || (!better(v, w) && j < i)) {{ v = w; i = j; }}
}}
"#
    )
}

/// Best of `x` (contiguous, seen as `(A, K, B)`) over `K`: values and
/// indices of shape `(A, 1, B)`. Indices are positions along `K` plus
/// `add`, or read from `idx` (same shape as `x`) when given.
fn best(
    red: Reduction,
    x: &GpuChunk,
    idx: Option<&GpuChunk>,
    (a, k, b): (usize, usize, usize),
    add: i64,
) -> Result<(GpuChunk, GpuChunk), ArrayError> {
    let device = x.device().clone();
    let inner = b == 1;
    let splits = super::reduce::splits(&device, a, k, b, inner);
    let vals = GpuChunk::alloc(&device, x.dtype(), &[a, splits, b])?;
    let ids = GpuChunk::alloc(&device, DType::I64, &[a, splits, b])?;
    let t = store_type(x.dtype());
    let mut src = String::from(PRELUDE);
    src.push_str(&helpers(red, t));
    let launch = if inner {
        let _ = write!(
            src,
            r#"
extern "C" __global__ void best(unsigned char* __restrict__ ov_raw, i64* __restrict__ oi, const {t}* __restrict__ x, const i64* __restrict__ idx, u64 rows, u64 k, u64 splits, i64 add) {{
  {t}* ov = ({t}*)ov_raw;
  __shared__ {t} sv[256];
  __shared__ i64 si[256];
  u64 per = (k + splits - 1) / splits;
  u64 lo = blockIdx.x * per, hi = lo + per < k ? lo + per : k;
  for (u64 r = blockIdx.y; r < rows; r += gridDim.y) {{
    {t} v = 0; i64 i = -1;
    for (u64 j = lo + threadIdx.x; j < hi; j += blockDim.x) {{
      comb(v, i, x[r * k + j], idx ? idx[r * k + j] : (i64)j + add);
    }}
    sv[threadIdx.x] = v; si[threadIdx.x] = i;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {{
      if (threadIdx.x < s) {{
        {t} a = sv[threadIdx.x]; i64 ai = si[threadIdx.x];
        comb(a, ai, sv[threadIdx.x + s], si[threadIdx.x + s]);
        sv[threadIdx.x] = a; si[threadIdx.x] = ai;
      }}
      __syncthreads();
    }}
    if (threadIdx.x == 0) {{ ov[r * splits + blockIdx.x] = sv[0]; oi[r * splits + blockIdx.x] = si[0]; }}
    __syncthreads();
  }}
}}
"#
        );
        Launch { grid: (splits as u32, a.clamp(1, 65535) as u32, 1), block: (256, 1, 1), shared: 0 }
    } else {
        let _ = write!(
            src,
            r#"
extern "C" __global__ void best(unsigned char* __restrict__ ov_raw, i64* __restrict__ oi, const {t}* __restrict__ x, const i64* __restrict__ idx, u64 an, u64 k, u64 splits, i64 add, u64 cols) {{
  {t}* ov = ({t}*)ov_raw;
  u64 per = (k + splits - 1) / splits;
  u64 s = blockIdx.y;
  u64 lo = s * per, hi = lo + per < k ? lo + per : k;
  for (u64 ai = blockIdx.z; ai < an; ai += gridDim.z) {{
    for (u64 c = (u64)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (u64)gridDim.x * blockDim.x) {{
      {t} v = 0; i64 i = -1;
      for (u64 j = lo; j < hi; ++j) {{
        u64 e = (ai * k + j) * cols + c;
        comb(v, i, x[e], idx ? idx[e] : (i64)j + add);
      }}
      ov[(ai * splits + s) * cols + c] = v;
      oi[(ai * splits + s) * cols + c] = i;
    }}
  }}
}}
"#
        );
        let gx = b.div_ceil(256).clamp(1, 65535);
        Launch { grid: (gx as u32, splits as u32, a.clamp(1, 65535) as u32), block: (256, 1, 1), shared: 0 }
    };
    let kern = device.kernel(&src, "best")?;
    let mut args = vec![
        KArg::U64(vals.ptr()),
        KArg::U64(ids.ptr()),
        KArg::U64(x.ptr()),
        KArg::U64(idx.map_or(0, GpuChunk::ptr)),
        KArg::U64(a as u64),
        KArg::U64(k as u64),
        KArg::U64(splits as u64),
        KArg::I64(add),
    ];
    if !inner {
        args.push(KArg::U64(b as u64));
    }
    device.launch(&kern, launch, &args)?;
    if splits == 1 {
        return Ok((vals, ids));
    }
    // The pieces' candidates, with their indices: the middle axis again.
    best(red, &vals, Some(&ids), (a, splits, b), 0)
}

/// The chunk step: `[values, indices]`, the reduced axes kept at length 1.
pub fn partial(
    red: Reduction,
    x: &GpuChunk,
    axes: &[usize],
    place: &BlockPlace,
) -> Result<Vec<GpuChunk>, ArrayError> {
    let nd = x.ndim();
    if axes.iter().any(|&a| a >= nd) {
        return Err(ArrayError::Value(format!("axes {axes:?} out of range for a block of dimension {nd}")));
    }
    // As the CPU path: only an empty reduced extent has no answer (a block
    // empty along another axis gives empty partials).
    let n: usize = if let [ax] = axes { x.shape()[*ax] } else { x.len() };
    if n == 0 {
        return Err(ArrayError::Value(format!(
            "zero-size array to reduction operation {} which has no identity",
            red.name()
        )));
    }
    let x = x.contiguous()?;
    if let [ax] = axes {
        let ax = *ax;
        let shape = x.shape();
        let a: usize = shape[..ax].iter().product();
        let b: usize = shape[ax + 1..].iter().product();
        let offset = place.offsets.get(ax).copied().unwrap_or(0) as i64;
        let (v, i) = best(red, &x, None, (a, shape[ax], b), offset)?;
        let mut out_shape = shape.to_vec();
        out_shape[ax] = 1;
        return Ok(vec![v.reshape(&out_shape)?, i.reshape(&out_shape)?]);
    }
    // Over every axis: the best of the flattened block, then its flat index
    // in the whole array.
    let (v, i) = best(red, &x, None, (1, x.len(), 1), 0)?;
    let ones = vec![1; nd];
    let mut params = String::new();
    let mut args = vec![KArg::U64(i.ptr())];
    for d in 0..nd {
        let _ = write!(params, ", u64 bs{d}, u64 off{d}, u64 gs{d}");
        args.push(KArg::U64(x.shape()[d] as u64));
        args.push(KArg::U64(place.offsets.get(d).copied().unwrap_or(0) as u64));
        args.push(KArg::U64(place.shape.get(d).copied().unwrap_or(1) as u64));
    }
    let mut body = String::new();
    for d in (0..nd).rev() {
        let _ = writeln!(body, "  u64 p{d} = q % bs{d}; q /= bs{d};");
    }
    body.push_str("  u64 flat = 0;\n");
    for d in 0..nd {
        let _ = writeln!(body, "  flat = flat * gs{d} + p{d} + off{d};");
    }
    let src = format!(
        r#"
typedef unsigned long long u64;
typedef long long i64;
extern "C" __global__ void place(i64* __restrict__ idx{params}) {{
  u64 q = (u64)idx[0];
{body}  idx[0] = (i64)flat;
}}
"#
    );
    let device = x.device().clone();
    let kern = device.kernel(&src, "place")?;
    device.launch(&kern, Launch { grid: (1, 1, 1), block: (1, 1, 1), shared: 0 }, &args)?;
    Ok(vec![v.reshape(&ones)?, i.reshape(&ones)?])
}

/// Merge partial `b` (of later blocks) into `a`: `b`'s where it is better,
/// or as good with a smaller index.
pub fn merge(red: Reduction, a: &[GpuChunk], b: &[GpuChunk]) -> Result<Vec<GpuChunk>, ArrayError> {
    let ([va, ia], [vb, ib]) = (a, b) else {
        return Err(ArrayError::Value("reduction partials do not match".into()));
    };
    if va.shape() != vb.shape()
        || va.dtype() != vb.dtype()
        || ia.shape() != va.shape()
        || ib.shape() != vb.shape()
    {
        return Err(ArrayError::Value("reduction partials do not match".into()));
    }
    let device = va.device().clone();
    let (va, ia, vb, ib) = (va.contiguous()?, ia.contiguous()?, vb.contiguous()?, ib.contiguous()?);
    let n = va.len();
    let ov = GpuChunk::alloc(&device, va.dtype(), va.shape())?;
    let oi = GpuChunk::alloc(&device, DType::I64, va.shape())?;
    if n == 0 {
        return Ok(vec![ov, oi]);
    }
    let t = store_type(va.dtype());
    let mut src = String::from(PRELUDE);
    src.push_str(&helpers(red, t));
    let _ = write!(
        src,
        r#"
extern "C" __global__ void pick(unsigned char* __restrict__ ov_raw, i64* __restrict__ oi, const {t}* __restrict__ va, const i64* __restrict__ ia, const {t}* __restrict__ vb, const i64* __restrict__ ib, u64 n) {{
  {t}* ov = ({t}*)ov_raw;
  for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (u64)gridDim.x * blockDim.x) {{
    {t} v = va[e]; i64 i = ia[e];
    comb(v, i, vb[e], ib[e]);
    ov[e] = v; oi[e] = i;
  }}
}}
"#
    );
    let kern = device.kernel(&src, "pick")?;
    let launch = Launch::linear(&device, n, 256);
    let args = [
        KArg::U64(ov.ptr()),
        KArg::U64(oi.ptr()),
        KArg::U64(va.ptr()),
        KArg::U64(ia.ptr()),
        KArg::U64(vb.ptr()),
        KArg::U64(ib.ptr()),
        KArg::U64(n as u64),
    ];
    device.launch(&kern, launch, &args)?;
    Ok(vec![ov, oi])
}
