//! Reductions of GPU blocks, the chunk step of Dask's tree reduction (the
//! partial keeps the reduced axes at length 1, as the CPU path's does, so
//! partials merge elementwise). One run of adjacent reduced axes is seen as
//! `(A, K, B)`: reduce over `K`. With `B == 1` (the last axes) a thread
//! block reduces each row in shared memory; otherwise threads take
//! neighbouring `b` (coalesced reads) and loop over `K`. When there are
//! few outputs the `K` loop is split across blocks and a second pass joins
//! the pieces, so a full reduction still fills the device.

use std::fmt::Write;
use std::sync::Arc;

use brisk_gpu::{KArg, Launch};

use super::chunk::GpuChunk;
use super::expr::{
    Expr, PRELUDE, Parts, Term, ctype, emit_cast, lead_dims, materialize, parts, parts_staged, rows_cols,
    store_type,
};
use super::user::{UserFn, UserFold};
use crate::array::dtype::{DType, Scalar};
use crate::array::elementwise::BinOp;
use crate::array::error::ArrayError;
use crate::array::reduce::Reduction;

/// The simple reductions a kernel folds directly, and users' folds
/// (`reduction_kernel`).
#[derive(Clone, Debug, PartialEq)]
enum Fold {
    Sum,
    Prod,
    Min,
    Max,
    Any,
    All,
    User(Arc<UserFold>),
}

impl Fold {
    /// The definition of `comb(a, b)`, the fold's step in type `t`.
    fn comb(&self, t: DType) -> String {
        if let Fold::User(u) = self {
            return u.comb();
        }
        let ty = ctype(t);
        format!("__device__ __forceinline__ {ty} comb({ty} a, {ty} b) {{ return {}; }}\n", self.combine(t))
    }

    fn combine(&self, t: DType) -> &'static str {
        match (self, t) {
            (Fold::User(_), _) => "comb(a, b)",
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

    fn identity(&self, t: DType) -> String {
        if let Fold::User(u) = self {
            return u.identity_expr();
        }
        self.builtin_identity(t).to_string()
    }

    fn builtin_identity(&self, t: DType) -> &'static str {
        match (self, t) {
            (Fold::User(_), _) => "0",
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

/// Fold `x` (any layout, any dtype) over one run of axes `lo..=hi` into
/// type `acc`, keeping them at length 1.
fn fold_run(x: &GpuChunk, lo: usize, hi: usize, fold: &Fold, acc: DType) -> Result<GpuChunk, ArrayError> {
    let shape = x.shape();
    let a: usize = shape[..lo].iter().product();
    let k: usize = shape[lo..=hi].iter().product();
    let b: usize = shape[hi + 1..].iter().product();
    // Seen as (A, K) or (A·K, B), a C-ordered block is one 2-d expression.
    let flat = if b == 1 { [a, k] } else { [a * k, b] };
    let e = Expr::leaf(x.reshape(&flat)?);
    let mut out_shape = shape.to_vec();
    for d in &mut out_shape[lo..=hi] {
        *d = 1;
    }
    let r = fold_expr(&e, a, k, b, b == 1, fold, acc)?;
    r.reshape(&out_shape)
}

/// Whether `fold_expr` can read the expression itself for the run
/// `lo..=hi`: the last axis alone (rows of the leading axes), or the axes
/// just before it (the last axis is `B`). Other runs read its result.
fn fusable(nd: usize, lo: usize, hi: usize) -> bool {
    (lo == hi && hi + 1 == nd) || hi + 2 == nd
}

/// How many pieces a fold over `K` of `(A, K, B)` is cut into so that a
/// few outputs still fill the device (a second pass joins the pieces):
/// `inner` folds give a thread block per row piece, others a thread per
/// column of `B`. Arg reductions cut the same way.
pub(super) fn splits(device: &brisk_gpu::Device, a: usize, k: usize, b: usize, inner: bool) -> usize {
    let sms = device.sm_count() as usize;
    if inner {
        (sms * 8).div_ceil(a.max(1)).clamp(1, k.div_ceil(2048).max(1))
    } else {
        let threads = a * b.div_ceil(256) * 256;
        (sms * 2048).div_ceil(threads.max(1)).clamp(1, k.div_ceil(64).max(1))
    }
}

/// The start of a fold kernel's source: the prelude, `comb` (the fold's
/// step in type `acc`) and `VAL(r, c)` (the expression's `value` there,
/// cast to `acc`).
fn fold_source(e: &Expr, p: &Parts, fold: &Fold, acc: DType) -> String {
    let mut load = String::new();
    emit_cast(e.dtype, acc, &p.value, &mut load);
    let mut src = String::from(PRELUDE);
    src.push_str(&p.funcs);
    src.push_str(&fold.comb(acc));
    let _ = writeln!(src, "#define VAL(r, c) ({load})");
    src
}

/// The name of a fold kernel: after the user's kernel where there is one.
fn fold_name(p: &Parts, fold: &Fold) -> String {
    match fold {
        Fold::User(u) => format!("red_{}", u.label),
        _ => p.kernel_name("red"),
    }
}

/// Fold an elementwise expression as it is computed, never writing it:
/// seen as `(A, K, B)`, `inner` when `K` is its last axis (`B` is 1),
/// else `B` is its last axis. The result has shape `(A, 1, B)`, reshaped
/// to the expression's rank by the caller.
fn fold_expr(
    e: &Expr,
    a: usize,
    k: usize,
    b: usize,
    inner: bool,
    fold: &Fold,
    acc: DType,
) -> Result<GpuChunk, ArrayError> {
    let device = e.device()?;
    let (rows, cols) = rows_cols(&e.shape);
    if (inner && (rows, cols) != (a, k)) || (!inner && (rows, cols) != (a * k, b)) {
        return Err(ArrayError::Shape(format!(
            "cannot fold a {} expression as ({a}, {k}, {b})",
            crate::array::error::fmt_shape(&e.shape)
        )));
    }
    if k == 0 || a * b == 0 {
        // An empty fold is the identity: 0 for sums and `any`, 1 for
        // products and `all` (min and max of nothing are refused earlier).
        if let Fold::User(u) = fold {
            return fill_identity(&device, u, &[a, 1, b]);
        }
        let v = if matches!(fold, Fold::Prod | Fold::All) { Scalar::Int(1) } else { Scalar::Int(0) };
        return super::create::full(&device, &[a, 1, b], v, acc);
    }
    // A 2-d outer fold reading a transposed leaf stages tiles of it.
    let staged: Vec<usize> = if !inner && e.shape.len() == 2 {
        e.leaves().iter().enumerate().filter(|(_, l)| transposed(l)).map(|(i, _)| i).collect()
    } else {
        Vec::new()
    };
    if !staged.is_empty() {
        return fold_tiled(e, &staged, fold, acc);
    }
    let splits = splits(&device, a, k, b, inner);
    let out = GpuChunk::alloc(&device, acc, &[a, splits, b])?;
    let p = parts(e);
    let (dims, dim_args) = lead_dims(&e.shape);
    let ty = ctype(acc);
    let st = store_type(acc);
    let identity = fold.identity(acc);
    let mut src = fold_source(e, &p, fold, acc);
    let kname = fold_name(&p, fold);
    let (params, setup) = (&p.params, &p.row_setup);
    // Four accumulators keep four reads in flight per thread: one at a time
    // cannot cover the memory's latency.
    let launch = if inner {
        // One thread block per row (and piece of it), reduced in shared memory.
        let _ = write!(
            src,
            r#"
extern "C" __global__ void {kname}(unsigned char* __restrict__ out_raw, u64 rows, u64 cols, u64 splits{dims}{params}) {{
  __shared__ {ty} sh[256];
  {st}* out = ({st}*)out_raw;
  u64 per = (cols + splits - 1) / splits;
  u64 lo = blockIdx.x * per, hi = lo + per < cols ? lo + per : cols;
  for (u64 r = blockIdx.y; r < rows; r += gridDim.y) {{
{setup}    {ty} a0 = {identity}, a1 = {identity}, a2 = {identity}, a3 = {identity};
    const u64 bd = blockDim.x;
    u64 c = lo + threadIdx.x;
    for (; c + 3 * bd < hi; c += 4 * bd) {{
      a0 = comb(a0, VAL(r, c)); a1 = comb(a1, VAL(r, c + bd));
      a2 = comb(a2, VAL(r, c + 2 * bd)); a3 = comb(a3, VAL(r, c + 3 * bd));
    }}
    for (; c < hi; c += bd) a0 = comb(a0, VAL(r, c));
    sh[threadIdx.x] = comb(comb(a0, a1), comb(a2, a3));
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
        // A thread per column of B (coalesced reads), looping over K; four
        // rows at a time where no row needs setup.
        let unrolled = if setup.is_empty() {
            "      for (; j + 3 < hi; j += 4) {\n        u64 r = ai * k + j;\n        a0 = comb(a0, VAL(r, c)); a1 = comb(a1, VAL(r + 1, c));\n        a2 = comb(a2, VAL(r + 2, c)); a3 = comb(a3, VAL(r + 3, c));\n      }\n"
        } else {
            ""
        };
        let _ = write!(
            src,
            r#"
extern "C" __global__ void {kname}(unsigned char* __restrict__ out_raw, u64 an, u64 k, u64 splits, u64 cols{dims}{params}) {{
  {st}* out = ({st}*)out_raw;
  u64 per = (k + splits - 1) / splits;
  u64 s = blockIdx.y;
  u64 lo = s * per, hi = lo + per < k ? lo + per : k;
  for (u64 ai = blockIdx.z; ai < an; ai += gridDim.z) {{
    for (u64 c = (u64)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (u64)gridDim.x * blockDim.x) {{
      {ty} a0 = {identity}, a1 = {identity}, a2 = {identity}, a3 = {identity};
      u64 j = lo;
{unrolled}      for (; j < hi; ++j) {{
        u64 r = ai * k + j;
{setup}        a0 = comb(a0, VAL(r, c));
      }}
      out[(ai * splits + s) * cols + c] = ({st})comb(comb(a0, a1), comb(a2, a3));
    }}
  }}
}}
"#
        );
        let gx = b.div_ceil(256).min(65535);
        Launch { grid: (gx as u32, splits as u32, a.min(65535) as u32), block: (256, 1, 1), shared: 0 }
    };
    let kern = device.kernel(&src, &kname)?;
    let mut args = vec![KArg::U64(out.ptr())];
    if inner {
        args.extend([KArg::U64(a as u64), KArg::U64(k as u64), KArg::U64(splits as u64)]);
    } else {
        args.extend([
            KArg::U64(a as u64),
            KArg::U64(k as u64),
            KArg::U64(splits as u64),
            KArg::U64(b as u64),
        ]);
    }
    args.extend(dim_args);
    args.extend(p.args);
    device.launch(&kern, launch, &args)?;
    // The expression's leaves stay alive until here: their frees queue
    // after the kernel.
    if splits == 1 {
        return Ok(out);
    }
    // Join the pieces: the middle axis of (A, splits, B).
    fold_run(&out, 1, 1, fold, acc)
}

/// A 2-d leaf whose rows are closer in memory than its columns (`x.T`):
/// read along a row, each thread of a warp would touch its own line.
fn transposed(l: &GpuChunk) -> bool {
    let st = l.strides();
    l.shape().len() == 2 && !l.is_c_contiguous() && st[0] != 0 && st[1] != 0 && st[0].abs() < st[1].abs()
}

/// Side of the square tiles `fold_tiled` stages; its thread blocks are
/// `TILE × TILE_ROWS`, each thread folding four rows of a tile.
const TILE: usize = 32;
const TILE_ROWS: usize = 8;

/// `fold_expr` over axis 0 of a 2-d expression with transposed leaves: a
/// thread block takes 32 columns and walks down its piece of the rows a
/// 32×32 tile at a time, each transposed leaf's tile read along its own
/// rows (coalesced) into shared memory and read back across them. Plain
/// leaves are read straight, coalesced along the columns (staging them
/// too was measured slower: 1.7 against 2.5 TB/s on an H100). The result
/// has shape `(1, 1, cols)`.
fn fold_tiled(e: &Expr, staged: &[usize], fold: &Fold, acc: DType) -> Result<GpuChunk, ArrayError> {
    let device = e.device()?;
    let (k, cols) = (e.shape[0], e.shape[1]);
    let gx = cols.div_ceil(TILE);
    let p = parts_staged(e, staged);
    let ty = ctype(acc);
    let st = store_type(acc);
    let identity = fold.identity(acc);
    let (mut tiles, mut stage) = (String::new(), String::new());
    for &i in staged {
        let _ = writeln!(
            tiles,
            "  __shared__ {} sh{i}[{TILE}][{}];",
            store_type(e.leaves()[i].dtype()),
            TILE + 1
        );
        let _ =
            writeln!(stage, "          sh{i}[cy][threadIdx.x] = l{i}[(i64)rr * t{i}_0 + (i64)cc * t{i}_1];");
    }
    let macros: String =
        staged.iter().map(|i| format!("#define S{i}(r, c) sh{i}[threadIdx.x][(r) - j0]\n")).collect();
    let mut src = fold_source(e, &p, fold, acc);
    let kname = fold_name(&p, fold);
    let _ = write!(
        src,
        r#"
{macros}
extern "C" __global__ void {kname}(unsigned char* __restrict__ out_raw, u64 k, u64 per, u64 cols{params}) {{
{tiles}  __shared__ {ty} part[{TILE_ROWS}][{TILE}];
  {st}* out = ({st}*)out_raw;
  const unsigned int tx = threadIdx.x, ty = threadIdx.y;
  u64 s = blockIdx.y;
  u64 lo = s * per, hi = lo + per < k ? lo + per : k;
  for (u64 c0 = (u64)blockIdx.x * {TILE}; c0 < cols; c0 += (u64)gridDim.x * {TILE}) {{
    u64 c = c0 + tx;
    {ty} a0 = {identity}, a1 = {identity}, a2 = {identity}, a3 = {identity};
    for (u64 j0 = lo; j0 < hi; j0 += {TILE}) {{
      for (unsigned int q = 0; q < {TILE}; q += {TILE_ROWS}) {{
        unsigned int cy = ty + q;
        u64 rr = j0 + tx, cc = c0 + cy;
        if (rr < hi && cc < cols) {{
{stage}        }}
      }}
      __syncthreads();
      if (c < cols) {{
        if (j0 + {TILE} <= hi) {{
          a0 = comb(a0, VAL(j0 + ty, c)); a1 = comb(a1, VAL(j0 + ty + {r1}, c));
          a2 = comb(a2, VAL(j0 + ty + {r2}, c)); a3 = comb(a3, VAL(j0 + ty + {r3}, c));
        }} else {{
          for (u64 r = j0 + ty; r < hi; r += {TILE_ROWS}) a0 = comb(a0, VAL(r, c));
        }}
      }}
      __syncthreads();
    }}
    part[ty][tx] = comb(comb(a0, a1), comb(a2, a3));
    __syncthreads();
    if (ty == 0 && c < cols) {{
      {ty} v = part[0][tx];
      for (unsigned int y = 1; y < {TILE_ROWS}; ++y) v = comb(v, part[y][tx]);
      out[s * cols + c] = ({st})v;
    }}
    __syncthreads();
  }}
}}
"#,
        params = p.params,
        r1 = TILE_ROWS,
        r2 = 2 * TILE_ROWS,
        r3 = 3 * TILE_ROWS,
    );
    let kern = device.kernel(&src, &kname)?;
    // Enough pieces of the rows that the thread blocks fill every SM in one
    // wave (as many as the kernel's registers let an SM hold: a second,
    // part-filled wave would cost more than it adds), each piece whole
    // tiles.
    let per_sm = device.resident_blocks(&kern, (TILE * TILE_ROWS) as u32, 0) as usize;
    let resident = device.sm_count() as usize * per_sm;
    let want = (resident / gx.max(1)).clamp(1, k.div_ceil(TILE));
    let per = k.div_ceil(want).next_multiple_of(TILE);
    let splits = k.div_ceil(per);
    let out = GpuChunk::alloc(&device, acc, &[1, splits, cols])?;
    let mut args =
        vec![KArg::U64(out.ptr()), KArg::U64(k as u64), KArg::U64(per as u64), KArg::U64(cols as u64)];
    args.extend(p.args);
    let launch = Launch {
        grid: (gx.min(65535) as u32, splits as u32, 1),
        block: (TILE as u32, TILE_ROWS as u32, 1),
        shared: 0,
    };
    device.launch(&kern, launch, &args)?;
    // A second, small kernel joins the pieces. Joining them in this one
    // (the last piece of a column tile to finish, counted by atomics)
    // saved that launch but slowed the main loop: on an H100, G3's folds
    // took 5.95 ms with it against 5.17 ms plus 0.29 ms of joins.
    if splits == 1 { Ok(out) } else { fold_run(&out, 1, 1, fold, acc) }
}

/// Fold the expression over `axes` (sorted): the run that `fold_expr` can
/// read fused, the rest on its (small) result. A run ending at the last
/// axis is split so that its last axis is the fused one.
fn fold_axes_expr(e: &Expr, axes: &[usize], fold: &Fold, acc: DType) -> Result<GpuChunk, ArrayError> {
    let nd = e.shape.len();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &ax in axes {
        match runs.last_mut() {
            Some((_, hi)) if *hi + 1 == ax => *hi = ax,
            _ => runs.push((ax, ax)),
        }
    }
    let Some(&(lo, hi)) = runs.last() else {
        return materialize(&Expr::cast(e.clone(), acc));
    };
    let (lo, hi, rest) = if hi + 1 == nd && lo < hi { (hi, hi, Some((lo, hi - 1))) } else { (lo, hi, None) };
    if !fusable(nd, lo, hi) {
        return fold_axes(&materialize(e)?, axes, fold, acc);
    }
    let a: usize = e.shape[..lo].iter().product();
    let k: usize = e.shape[lo..=hi].iter().product();
    let b: usize = e.shape[hi + 1..].iter().product();
    let mut out_shape = e.shape.clone();
    for d in &mut out_shape[lo..=hi] {
        *d = 1;
    }
    let mut cur = fold_expr(e, a, k, b, hi + 1 == nd, fold, acc)?.reshape(&out_shape)?;
    if let Some((l, h)) = rest {
        cur = fold_run(&cur, l, h, fold, acc)?;
    }
    for &(l, h) in runs.iter().rev().skip(1) {
        cur = fold_run(&cur, l, h, fold, acc)?;
    }
    Ok(cur)
}

/// Fold every axis of `axes` (sorted), one adjacent run at a time.
fn fold_axes(x: &GpuChunk, axes: &[usize], fold: &Fold, acc: DType) -> Result<GpuChunk, ArrayError> {
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
    partial_of(red, &Expr::leaf(x.clone()), axes)
}

/// The chunk step of an elementwise expression not yet evaluated: the
/// folds read it as they go (`(x + x.T) * 2` then `mean(0)` reads `x` twice
/// and writes only the partial); other reductions evaluate it first.
pub fn partial_expr(red: Reduction, e: &Expr, axes: &[usize]) -> Result<Option<Vec<GpuChunk>>, ArrayError> {
    partial_of(red, e, axes)
}

fn partial_of(red: Reduction, e: &Expr, axes: &[usize]) -> Result<Option<Vec<GpuChunk>>, ArrayError> {
    if axes.iter().any(|&a| a >= e.shape.len()) {
        return Err(ArrayError::Value(format!(
            "axes {axes:?} out of range for a block of dimension {}",
            e.shape.len()
        )));
    }
    let n: usize = axes.iter().map(|&a| e.shape[a]).product();
    if n == 0 && matches!(red, Reduction::Min | Reduction::Max | Reduction::ArgMin | Reduction::ArgMax) {
        return Err(ArrayError::Value(format!(
            "zero-size array to reduction operation {} which has no identity",
            red.name()
        )));
    }
    let t = e.dtype;
    let simple = |f: &Fold, acc: DType| match e.as_leaf() {
        Some(x) => fold_axes(x, axes, f, acc),
        None => fold_axes_expr(e, axes, f, acc),
    };
    // What reads the block more than once gets it evaluated.
    let block = || -> Result<GpuChunk, ArrayError> {
        match e.as_leaf() {
            Some(x) => Ok(x.clone()),
            None => materialize(e),
        }
    };
    Ok(Some(match red {
        Reduction::Sum => vec![simple(&Fold::Sum, red.out_dtype(t))?],
        Reduction::Prod => vec![simple(&Fold::Prod, red.out_dtype(t))?],
        Reduction::Min => vec![simple(&Fold::Min, t)?],
        Reduction::Max => vec![simple(&Fold::Max, t)?],
        Reduction::Any => vec![simple(&Fold::Any, DType::Bool)?],
        Reduction::All => vec![simple(&Fold::All, DType::Bool)?],
        Reduction::Mean => {
            let sum = simple(&Fold::Sum, t.to_float())?;
            let count = super::create::full(&e.device()?, sum.shape(), Scalar::Float(n as f64), DType::F64)?;
            vec![sum, count]
        }
        Reduction::Var { .. } | Reduction::Std { .. } => {
            let x = &block()?;
            let sum = fold_axes(x, axes, &Fold::Sum, DType::F64)?;
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
            let sq = Expr::binary(BinOp::Mul, Term::Expr(d.clone()), Term::Expr(d))?;
            let m2 = fold_axes_expr(&sq, axes, &Fold::Sum, DType::F64)?;
            let count = super::create::full(x.device(), mean.shape(), Scalar::Float(n as f64), DType::F64)?;
            vec![count, mean, m2]
        }
        // The host skips NaNs (and finds args).
        _ => return Ok(None),
    }))
}

/// The partials merged elementwise, one unevaluated expression per
/// component, or `None` where the host merges them.
fn merged_exprs(red: Reduction, parts: &[Vec<GpuChunk>]) -> Result<Option<Vec<Expr>>, ArrayError> {
    let op = match red {
        Reduction::Sum | Reduction::Mean => BinOp::Add,
        Reduction::Prod => BinOp::Mul,
        Reduction::Min => BinOp::Minimum,
        Reduction::Max => BinOp::Maximum,
        Reduction::Any => BinOp::Or,
        Reduction::All => BinOp::And,
        _ => return Ok(None),
    };
    let Some(first) = parts.first() else {
        return Err(ArrayError::Value("no partials to combine".into()));
    };
    if parts.iter().any(|p| p.len() != first.len()) {
        return Err(ArrayError::Value("reduction partials do not match".into()));
    }
    let mut out = Vec::with_capacity(first.len());
    for (i, x) in first.iter().enumerate() {
        let mut e = Expr::leaf(x.clone());
        for p in &parts[1..] {
            e = Expr::binary(op, Term::Expr(e), Term::Expr(Expr::leaf(p[i].clone())))?;
        }
        // Merging keeps the partial's type (bool sums stay counts).
        out.push(Expr::cast(e, x.dtype()));
    }
    Ok(Some(out))
}

/// The most partials one merge kernel reads (each is a kernel parameter).
const MERGE_FAN_IN: usize = 32;

/// Merge any number of partials elementwise: one kernel per component
/// (per `MERGE_FAN_IN` partials), not one per pair; `None` where the host
/// merges them.
pub fn merge_all(red: Reduction, parts: &[Vec<GpuChunk>]) -> Result<Option<Vec<GpuChunk>>, ArrayError> {
    if parts.len() == 1 {
        return Ok(Some(parts[0].clone()));
    }
    if parts.len() > MERGE_FAN_IN {
        let mut level = Vec::new();
        for group in parts.chunks(MERGE_FAN_IN) {
            match merge_all(red, group)? {
                Some(p) => level.push(p),
                None => return Ok(None),
            }
        }
        return merge_all(red, &level);
    }
    let Some(es) = merged_exprs(red, parts)? else { return Ok(None) };
    es.iter().map(materialize).collect::<Result<Vec<_>, _>>().map(Some)
}

/// Merge the partials and finish the reduction: a mean's sums and counts
/// are added and divided in one kernel. `None` where the host does it.
pub fn aggregate(
    red: Reduction,
    parts: &[Vec<GpuChunk>],
    axes: &[usize],
    keepdims: bool,
    out: DType,
) -> Result<Option<GpuChunk>, ArrayError> {
    if red == Reduction::Mean
        && (2..=MERGE_FAN_IN).contains(&parts.len())
        && let Some(es) = merged_exprs(red, parts)?
        && let [sum, count] = es.as_slice()
    {
        let q = Expr::binary(
            BinOp::Div,
            Term::Expr(Expr::cast(sum.clone(), DType::F64)),
            Term::Expr(count.clone()),
        )?;
        let r = materialize(&Expr::cast(q, out))?;
        return Ok(Some(if keepdims { r } else { r.squeeze(axes) }));
    }
    match merge_all(red, parts)? {
        Some(p) => finalize(red, &p, axes, keepdims, out),
        None => Ok(None),
    }
}

/// The result from the last partial, or `None` where the host does it.
pub fn finalize(
    red: Reduction,
    p: &[GpuChunk],
    axes: &[usize],
    keepdims: bool,
    out: DType,
) -> Result<Option<GpuChunk>, ArrayError> {
    if red.skips_nan() {
        return Ok(None);
    }
    let r = match (red, p) {
        (Reduction::Mean, [sum, count]) => {
            let q = Expr::binary(
                BinOp::Div,
                Term::Expr(Expr::cast(Expr::leaf(sum.clone()), DType::F64)),
                Term::Expr(Expr::leaf(count.clone())),
            )?;
            materialize(&Expr::cast(q, out))?
        }
        (Reduction::ArgMin | Reduction::ArgMax, [_, idx]) => idx.clone(),
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

/// A block of the user fold's identity (an empty fold).
fn fill_identity(
    device: &Arc<brisk_gpu::Device>,
    u: &UserFold,
    shape: &[usize],
) -> Result<GpuChunk, ArrayError> {
    let out = GpuChunk::alloc(device, u.acc, shape)?;
    let n = out.len();
    if n == 0 {
        return Ok(out);
    }
    let mut src = String::from(PRELUDE);
    let _ = write!(
        src,
        r#"
extern "C" __global__ void fill_{name}({st}* out, u64 n) {{
{defs}  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) out[i] = ({st}){id};
}}
"#,
        name = u.label,
        st = store_type(u.acc),
        defs = super::user::typedefs(&u.typedefs),
        id = u.identity_expr(),
    );
    let k = device.kernel(&src, &format!("fill_{}", u.label))?;
    device.launch(&k, Launch::linear(device, n, 256), &[KArg::U64(out.ptr()), KArg::U64(n as u64)])?;
    Ok(out)
}

/// The chunk step of a user's reduction: `e` (the map applied to the
/// inputs; in a fused chain not yet evaluated, and read as it folds)
/// folded over `axes` by the user's `reduce_expr`, the axes kept at
/// length 1.
pub fn user_partial(fold: &Arc<UserFold>, e: &Expr, axes: &[usize]) -> Result<GpuChunk, ArrayError> {
    if axes.iter().any(|&a| a >= e.shape.len()) {
        return Err(ArrayError::Value(format!(
            "axes {axes:?} out of range for a block of dimension {}",
            e.shape.len()
        )));
    }
    let f = Fold::User(fold.clone());
    match e.as_leaf() {
        Some(x) => fold_axes(x, axes, &f, fold.acc),
        None => fold_axes_expr(e, axes, &f, fold.acc),
    }
}

/// Partials of a user's reduction merged elementwise by `reduce_expr`, as
/// one expression (up to `MERGE_FAN_IN` partials; more merge in levels).
fn user_merged(fold: &Arc<UserFold>, parts: &[GpuChunk]) -> Result<Expr, ArrayError> {
    if parts.len() > MERGE_FAN_IN {
        let level = parts
            .chunks(MERGE_FAN_IN)
            .map(|g| materialize(&user_merged(fold, g)?))
            .collect::<Result<Vec<_>, _>>()?;
        return user_merged(fold, &level);
    }
    let mut it = parts.iter();
    let first = it.next().ok_or_else(|| ArrayError::Value("no partials to combine".into()))?;
    let m: Arc<UserFn> = fold.merge_fn();
    let mut e = Expr::leaf(first.clone());
    for p in it {
        e = Expr::user(m.clone(), vec![Term::Expr(e), Term::Expr(Expr::leaf(p.clone()))])?;
    }
    Ok(e)
}

/// Merge partials of a user's reduction (a level of the tree).
pub fn user_combine(fold: &Arc<UserFold>, parts: &[GpuChunk]) -> Result<GpuChunk, ArrayError> {
    match parts {
        [one] => Ok(one.clone()),
        _ => materialize(&user_merged(fold, parts)?),
    }
}

/// The last merge and the user's `post_map_expr`, in one kernel. `in_n`
/// and `out_n` are `_in_ind.size()` and `_out_ind.size()`: the elements
/// folded into each output, and the outputs.
pub fn user_aggregate(
    fold: &Arc<UserFold>,
    post: &Arc<UserFn>,
    parts: &[GpuChunk],
    axes: &[usize],
    keepdims: bool,
    sizes: (i64, i64),
) -> Result<GpuChunk, ArrayError> {
    let merged = user_merged(fold, parts)?;
    let e = Expr::user(
        post.clone(),
        vec![Term::Expr(merged), Term::Scalar(Scalar::Int(sizes.0)), Term::Scalar(Scalar::Int(sizes.1))],
    )?;
    let r = materialize(&e)?;
    Ok(if keepdims { r } else { r.squeeze(axes) })
}
