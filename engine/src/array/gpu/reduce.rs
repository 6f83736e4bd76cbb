//! Reductions of GPU blocks, the chunk step of Dask's tree reduction (the
//! partial keeps the reduced axes at length 1, as the CPU path's does, so
//! partials merge elementwise). One run of adjacent reduced axes is seen as
//! `(A, K, B)`: reduce over `K`. With `B == 1` (the last axes) a thread
//! block reduces each row in shared memory; otherwise threads take
//! neighbouring `b` (coalesced reads) and loop over `K`. When there are
//! few outputs the `K` loop is split across blocks and a second pass joins
//! the pieces, so a full reduction still fills the device.

use std::fmt::Write;

use brisk_gpu::{KArg, Launch};

use super::chunk::GpuChunk;
use super::expr::{Expr, PRELUDE, Term, ctype, materialize, store_type};
use crate::array::dtype::{DType, Scalar};
use crate::array::elementwise::BinOp;
use crate::array::error::ArrayError;
use crate::array::reduce::Reduction;

/// The simple reductions a kernel folds directly.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fold {
    Sum,
    Prod,
    Min,
    Max,
    Any,
    All,
}

impl Fold {
    fn combine(self, t: DType) -> &'static str {
        match (self, t) {
            (Fold::Any, _) => "(a || b)",
            (Fold::All, _) => "(a && b)",
            (Fold::Sum | Fold::Max, DType::Bool) => "(a || b)",
            (Fold::Prod | Fold::Min, DType::Bool) => "(a && b)",
            (Fold::Sum, _) => "b_add(a, b)",
            (Fold::Prod, _) => "b_mul(a, b)",
            (Fold::Min, _) => "b_min(a, b)",
            (Fold::Max, _) => "b_max(a, b)",
        }
    }

    fn identity(self, t: DType) -> &'static str {
        match (self, t) {
            (Fold::Any, _) | (Fold::Sum | Fold::Max, DType::Bool) => "false",
            (Fold::All, _) | (Fold::Prod | Fold::Min, DType::Bool) => "true",
            (Fold::Sum, _) => "0",
            (Fold::Prod, _) => "1",
            (Fold::Min, DType::I64) => "0x7fffffffffffffffLL",
            (Fold::Max, DType::I64) => "(-0x7fffffffffffffffLL - 1)",
            (Fold::Min, DType::F32) => "__int_as_float(0x7f800000)",
            (Fold::Max, DType::F32) => "__int_as_float(0xff800000)",
            (Fold::Min, _) => "__longlong_as_double(0x7ff0000000000000LL)",
            (Fold::Max, _) => "__longlong_as_double(0xfff0000000000000LL)",
        }
    }
}

/// Fold `x` (contiguous, any dtype) over one run of axes `lo..=hi` into
/// type `acc`, keeping them at length 1.
fn fold_run(x: &GpuChunk, lo: usize, hi: usize, fold: Fold, acc: DType) -> Result<GpuChunk, ArrayError> {
    let shape = x.shape();
    let a: usize = shape[..lo].iter().product();
    let k: usize = shape[lo..=hi].iter().product();
    let b: usize = shape[hi + 1..].iter().product();
    let mut out_shape = shape.to_vec();
    for d in &mut out_shape[lo..=hi] {
        *d = 1;
    }
    let device = x.device().clone();
    if k == 0 || a * b == 0 {
        // An empty fold is the identity: 0 for sums and `any`, 1 for
        // products and `all` (min and max of nothing are refused earlier).
        let v = if matches!(fold, Fold::Prod | Fold::All) { Scalar::Int(1) } else { Scalar::Int(0) };
        return super::create::full(&device, &out_shape, v, acc);
    }
    let target = device.sm_count() as usize * 2048;
    let (splits, inner) = if b == 1 {
        let rows_blocks = a.max(1);
        (((device.sm_count() as usize * 8).div_ceil(rows_blocks)).clamp(1, k.div_ceil(2048).max(1)), true)
    } else {
        let threads = a * b.div_ceil(256) * 256;
        ((target.div_ceil(threads)).clamp(1, k.div_ceil(64).max(1)), false)
    };
    let x = if x.is_c_contiguous() { x.clone() } else { x.contiguous()? };
    let part_shape: Vec<usize> = if splits == 1 { out_shape.clone() } else { vec![a, splits, b] };
    let out = GpuChunk::alloc(&device, acc, &part_shape)?;
    let ty = ctype(acc);
    let load = {
        let raw = if x.dtype() == DType::Bool { "(x[i] != 0)".to_string() } else { "x[i]".to_string() };
        let mut s = String::new();
        match (x.dtype(), acc) {
            (f, t) if f == t => s = raw,
            (_, DType::Bool) => {
                let _ = write!(s, "(({raw}) != 0)");
            }
            (DType::F32 | DType::F64, DType::I64) => {
                let _ = write!(s, "b_f2i({raw})");
            }
            (_, t) => {
                let _ = write!(s, "(({})({raw}))", ctype(t));
            }
        }
        s
    };
    let (combine, identity) = (fold.combine(acc), fold.identity(acc));
    let xs = store_type(x.dtype());
    let st = store_type(acc);
    let mut src = String::from(PRELUDE);
    let _ = write!(
        src,
        r#"
__device__ __forceinline__ {ty} comb({ty} a, {ty} b) {{ return {combine}; }}
"#
    );
    let launch = if inner {
        let _ = write!(
            src,
            r#"
extern "C" __global__ void red(unsigned char* __restrict__ out_raw, const {xs}* __restrict__ x0, u64 rows, u64 k, u64 splits) {{
  __shared__ {ty} sh[256];
  {st}* out = ({st}*)out_raw;
  u64 per = (k + splits - 1) / splits;
  u64 lo = blockIdx.x * per, hi = lo + per < k ? lo + per : k;
  for (u64 r = blockIdx.y; r < rows; r += gridDim.y) {{
    const {xs}* x = x0 + r * k;
    {ty} acc = {identity};
    for (u64 i = lo + threadIdx.x; i < hi; i += blockDim.x) acc = comb(acc, {load});
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {{
      if (threadIdx.x < s) sh[threadIdx.x] = comb(sh[threadIdx.x], sh[threadIdx.x + s]);
      __syncthreads();
    }}
    if (threadIdx.x == 0) out[r * splits + blockIdx.x] = ({st})sh[0];
    __syncthreads();
  }}
}}
"#
        );
        Launch { grid: (splits as u32, a.min(65535) as u32, 1), block: (256, 1, 1), shared: 0 }
    } else {
        let _ = write!(
            src,
            r#"
extern "C" __global__ void red(unsigned char* __restrict__ out_raw, const {xs}* __restrict__ x0, u64 rows, u64 k, u64 splits, u64 cols) {{
  {st}* out = ({st}*)out_raw;
  u64 per = (k + splits - 1) / splits;
  u64 s = blockIdx.y;
  u64 lo = s * per, hi = lo + per < k ? lo + per : k;
  for (u64 r = blockIdx.z; r < rows; r += gridDim.z) {{
    for (u64 c = (u64)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (u64)gridDim.x * blockDim.x) {{
      const {xs}* x = x0 + r * k * cols + c;
      {ty} acc = {identity};
      for (u64 j = lo; j < hi; ++j) {{ u64 i = j * cols; acc = comb(acc, {load}); }}
      out[(r * splits + s) * cols + c] = ({st})acc;
    }}
  }}
}}
"#
        );
        let gx = b.div_ceil(256).min(65535);
        Launch { grid: (gx as u32, splits as u32, a.min(65535) as u32), block: (256, 1, 1), shared: 0 }
    };
    let kern = device.kernel(&src, "red")?;
    let mut args = vec![
        KArg::U64(out.ptr()),
        KArg::U64(x.ptr()),
        KArg::U64(a as u64),
        KArg::U64(k as u64),
        KArg::U64(splits as u64),
    ];
    if !inner {
        args.push(KArg::U64(b as u64));
    }
    device.launch(&kern, launch, &args)?;
    if splits == 1 {
        return Ok(out);
    }
    // Join the pieces: the middle axis of (A, splits, B).
    let joined = fold_run(&out, 1, 1, fold, acc)?;
    joined.reshape(&out_shape)
}

/// Fold every axis of `axes` (sorted), one adjacent run at a time.
fn fold_axes(x: &GpuChunk, axes: &[usize], fold: Fold, acc: DType) -> Result<GpuChunk, ArrayError> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &ax in axes {
        match runs.last_mut() {
            Some((_, hi)) if *hi + 1 == ax => *hi = ax,
            _ => runs.push((ax, ax)),
        }
    }
    if runs.is_empty() {
        return materialize(&Expr::cast(Expr::leaf(x.clone()), acc));
    }
    let mut cur = x.clone();
    for (lo, hi) in runs.into_iter().rev() {
        cur = fold_run(&cur, lo, hi, fold, acc)?;
    }
    Ok(cur)
}

/// The chunk step on the device, or `None` for reductions that run on the
/// host (arg reductions).
pub fn partial(red: Reduction, x: &GpuChunk, axes: &[usize]) -> Result<Option<Vec<GpuChunk>>, ArrayError> {
    let n: usize = axes.iter().map(|&a| x.shape()[a]).product();
    if n == 0 && matches!(red, Reduction::Min | Reduction::Max | Reduction::ArgMin | Reduction::ArgMax) {
        return Err(ArrayError::Value(format!(
            "zero-size array to reduction operation {} which has no identity",
            red.name()
        )));
    }
    let t = x.dtype();
    let simple = |f: Fold, acc: DType| fold_axes(x, axes, f, acc);
    Ok(Some(match red {
        Reduction::Sum => vec![simple(Fold::Sum, red.out_dtype(t))?],
        Reduction::Prod => vec![simple(Fold::Prod, red.out_dtype(t))?],
        Reduction::Min => vec![simple(Fold::Min, t)?],
        Reduction::Max => vec![simple(Fold::Max, t)?],
        Reduction::Any => vec![simple(Fold::Any, DType::Bool)?],
        Reduction::All => vec![simple(Fold::All, DType::Bool)?],
        Reduction::Mean => {
            let sum = simple(Fold::Sum, t.to_float())?;
            let count = super::create::full(x.device(), sum.shape(), Scalar::Float(n as f64), DType::F64)?;
            vec![sum, count]
        }
        Reduction::Var { .. } | Reduction::Std { .. } => {
            let sum = simple(Fold::Sum, DType::F64)?;
            let mean = if n == 0 {
                super::create::full(x.device(), sum.shape(), Scalar::Float(0.0), DType::F64)?
            } else {
                materialize(&Expr::binary(
                    BinOp::Div,
                    Term::Expr(Expr::leaf(sum)),
                    Term::Scalar(Scalar::Float(n as f64)),
                )?)?
            };
            let d = Expr::binary(
                BinOp::Sub,
                Term::Expr(Expr::cast(Expr::leaf(x.clone()), DType::F64)),
                Term::Expr(Expr::leaf(mean.clone())),
            )?;
            let sq = materialize(&Expr::binary(BinOp::Mul, Term::Expr(d.clone()), Term::Expr(d))?)?;
            let m2 = fold_axes(&sq, axes, Fold::Sum, DType::F64)?;
            let count = super::create::full(x.device(), mean.shape(), Scalar::Float(n as f64), DType::F64)?;
            vec![count, mean, m2]
        }
        Reduction::ArgMin | Reduction::ArgMax => return Ok(None),
    }))
}

/// Merge two partials elementwise, or `None` where the host does it.
pub fn merge(red: Reduction, a: &[GpuChunk], b: &[GpuChunk]) -> Result<Option<Vec<GpuChunk>>, ArrayError> {
    let op = match red {
        Reduction::Sum | Reduction::Mean => BinOp::Add,
        Reduction::Prod => BinOp::Mul,
        Reduction::Min => BinOp::Minimum,
        Reduction::Max => BinOp::Maximum,
        Reduction::Any => BinOp::Or,
        Reduction::All => BinOp::And,
        _ => return Ok(None),
    };
    if a.len() != b.len() {
        return Err(ArrayError::Value("reduction partials do not match".into()));
    }
    let mut out = Vec::with_capacity(a.len());
    for (x, y) in a.iter().zip(b) {
        let e = Expr::binary(op, Term::Expr(Expr::leaf(x.clone())), Term::Expr(Expr::leaf(y.clone())))?;
        // Merging keeps the partial's type (bool sums stay counts).
        out.push(materialize(&Expr::cast(e, x.dtype()))?);
    }
    Ok(Some(out))
}

/// The result from the last partial, or `None` where the host does it.
pub fn finalize(
    red: Reduction,
    p: &[GpuChunk],
    axes: &[usize],
    keepdims: bool,
    out: DType,
) -> Result<Option<GpuChunk>, ArrayError> {
    let r = match (red, p) {
        (Reduction::Mean, [sum, count]) => {
            let q = Expr::binary(
                BinOp::Div,
                Term::Expr(Expr::cast(Expr::leaf(sum.clone()), DType::F64)),
                Term::Expr(Expr::leaf(count.clone())),
            )?;
            materialize(&Expr::cast(q, out))?
        }
        (Reduction::Var { .. } | Reduction::Std { .. } | Reduction::ArgMin | Reduction::ArgMax, _) => {
            return Ok(None);
        }
        (_, [x]) => {
            if x.dtype() == out {
                x.clone()
            } else {
                materialize(&Expr::cast(Expr::leaf(x.clone()), out))?
            }
        }
        _ => return Err(ArrayError::Value("reduction partials do not match".into())),
    };
    Ok(Some(if keepdims { r } else { r.squeeze(axes) }))
}
