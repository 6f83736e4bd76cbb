//! Blocks made on the device. Random numbers come from Philox-4×32-10, a
//! counter-based generator (as cuRAND's and CuPy's): element `i` of a block
//! is a function of the block's seed and `i` alone, so a block is the same
//! for a seed and chunking however the work is scheduled, and nothing
//! crosses the bus. The sequence differs from the CPU path's generator, as
//! CuPy's differs from NumPy's.

use std::fmt::Write;
use std::sync::Arc;

use brisk_gpu::{Device, KArg, Launch};

use super::chunk::GpuChunk;
use super::expr::{Expr, PRELUDE, ctype, materialize};
use crate::array::create::Dist;
use crate::array::dtype::{DType, Scalar};
use crate::array::error::ArrayError;

const PHILOX: &str = r#"
__device__ __forceinline__ void philox(unsigned int c[4], unsigned int k0, unsigned int k1) {
  #pragma unroll
  for (int round = 0; round < 10; ++round) {
    unsigned int hi0 = __umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
    unsigned int hi1 = __umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
    unsigned int n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0; c[1] = lo1; c[2] = n2; c[3] = lo0;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
}
__device__ __forceinline__ double u53(unsigned int a, unsigned int b) {
  return ((double)(a >> 5) * 67108864.0 + (double)(b >> 6)) * (1.0 / 9007199254740992.0);
}
__device__ __forceinline__ float u24(unsigned int a) { return (float)(a >> 8) * (1.0f / 16777216.0f); }
"#;

/// `n` random numbers of `dtype` (f32 or f64) for a block.
pub fn random(
    device: &Arc<Device>,
    seed: u64,
    shape: &[usize],
    dist: Dist,
    dtype: DType,
) -> Result<GpuChunk, ArrayError> {
    let t = if dtype == DType::F32 { DType::F32 } else { DType::F64 };
    let out = GpuChunk::alloc(device, t, shape)?;
    let n = out.len();
    if n == 0 {
        return finish(out, dtype);
    }
    // Each thread makes a group: four f32 or two f64 from one Philox call.
    let per = if t == DType::F32 { 4 } else { 2 };
    let (mean, std, normal) = match dist {
        Dist::Uniform => (0.0, 1.0, false),
        Dist::Normal { mean, std } => (mean, std, true),
        Dist::Integers { .. } => {
            return Err(ArrayError::Value("internal: random integers are made on the host".into()));
        }
    };
    let body = match (t, normal) {
        (DType::F32, false) => "v[0] = u24(c[0]); v[1] = u24(c[1]); v[2] = u24(c[2]); v[3] = u24(c[3]);",
        (DType::F32, true) => {
            "for (int j = 0; j < 4; j += 2) { float u1 = 1.0f - u24(c[j]), u2 = u24(c[j + 1]);
               float r = sqrtf(-2.0f * logf(u1)); float s, co; sincospif(2.0f * u2, &s, &co);
               v[j] = (float)mean + (float)std * r * co; v[j + 1] = (float)mean + (float)std * r * s; }"
        }
        (_, false) => "v[0] = u53(c[0], c[1]); v[1] = u53(c[2], c[3]);",
        (_, true) => {
            "double u1 = 1.0 - u53(c[0], c[1]), u2 = u53(c[2], c[3]);
             double r = sqrt(-2.0 * log(u1)); double s, co; sincospi(2.0 * u2, &s, &co);
             v[0] = mean + std * r * co; v[1] = mean + std * r * s;"
        }
    };
    let ty = ctype(t);
    // One 16-byte store per group (the pool's buffers are 256-byte aligned).
    let store = if t == DType::F32 {
        "reinterpret_cast<float4*>(out)[g] = make_float4(v[0], v[1], v[2], v[3]);"
    } else {
        "reinterpret_cast<double2*>(out)[g] = make_double2(v[0], v[1]);"
    };
    let mut src = String::from(PRELUDE);
    src.push_str(PHILOX);
    let _ = write!(
        src,
        r#"
extern "C" __global__ void rnd(unsigned char* __restrict__ out_raw, u64 n, unsigned int k0, unsigned int k1, double mean, double std) {{
  {ty}* out = ({ty}*)out_raw;
  u64 groups = (n + {per} - 1) / {per};
  for (u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += (u64)gridDim.x * blockDim.x) {{
    unsigned int c[4] = {{(unsigned int)g, (unsigned int)(g >> 32), 0x2545F491u, 0x9E3779B9u}};
    philox(c, k0, k1);
    {ty} v[{per}];
    {body}
    u64 base = g * {per};
    if (base + {per} <= n) {{
      {store}
    }} else {{
      for (int j = 0; base + j < n; ++j) out[base + j] = v[j];
    }}
  }}
}}
"#
    );
    let k = device.kernel(&src, "rnd")?;
    let groups = n.div_ceil(per);
    device.launch(
        &k,
        Launch::linear(device, groups, 256),
        &[
            KArg::U64(out.ptr()),
            KArg::U64(n as u64),
            KArg::U32(seed as u32),
            KArg::U32((seed >> 32) as u32),
            KArg::F64(mean),
            KArg::F64(std),
        ],
    )?;
    finish(out, dtype)
}

/// Random floats are made in f64 for integer or bool blocks, then cast as
/// the CPU path casts them.
fn finish(c: GpuChunk, dtype: DType) -> Result<GpuChunk, ArrayError> {
    if c.dtype() == dtype { Ok(c) } else { materialize(&Expr::cast(Expr::leaf(c), dtype)) }
}

/// A block of one value.
pub fn full(
    device: &Arc<Device>,
    shape: &[usize],
    value: Scalar,
    dtype: DType,
) -> Result<GpuChunk, ArrayError> {
    materialize(&Expr::constant(device, value, dtype, shape))
}
