//! The fits' block statistics on GPU blocks: the same `MlOp`s as
//! `op.rs`, with the block read once on the device and only the small
//! statistic (k × p, p², m × p values) crossing to the host, packed as the
//! CPU kernels pack it, so the merges and the driver are the same code.
//!
//! Every kernel accumulates in f64, also for f32 blocks (the issue's and
//! scikit-learn's numerics), and is generated per (k, p, dtype): the
//! distances and scores of a row live in registers, the centres or
//! coefficients in shared memory. A block's rows go through in tiles of a
//! thread block's width: each thread first takes a row (its distances or
//! scores), then each thread takes a column over the tile's rows (the
//! cluster or gradient sums), reading the rows again from cache, so
//! neighbouring threads read neighbouring values. Per-thread-block
//! partials are summed by one more kernel in a fixed order, so a fit
//! gives the same numbers every run.
//!
//! Sizes past the register and shared-memory budget (many clusters or
//! classes, very wide rows) answer `None`: the task then runs the CPU
//! kernel on a host copy, as any op without a device kernel does.

use std::fmt::Write;
use std::sync::Arc;

use brisk_gpu::{Device, KArg, Launch};

use super::kernels::{InitRound, LloydStat};
use super::op::MlOp;
use super::stats::{CoMoments, Moments, packed};
use crate::array::chunk::Chunk;
use crate::array::dtype::DType;
use crate::array::error::ArrayError;
use crate::array::gpu::GpuChunk;
use crate::array::gpu::expr::{PRELUDE, store_type};
use crate::value::Value;
use rand::RngExt;

/// Threads of a thread block: the rows of a tile.
const TPB: usize = 256;
/// Shared memory a kernel's tables may take (of the 48 KiB every device
/// gives a thread block without opting in).
const SHARED: usize = 40 * 1024;
/// Candidates for a block's farthest rows kept on the device; more (ties
/// over a large part of the block) and the block's statistic is taken on
/// the host instead.
const FAR_CAP: usize = 8192;

/// The op on GPU blocks, or `None` where it has no device kernel (or the
/// sizes do not fit one): the caller then runs it on host copies.
pub fn run(op: &MlOp, args: &[GpuChunk]) -> Result<Option<Value>, ArrayError> {
    Ok(match (op, args) {
        (MlOp::Lloyd { centers, k }, [x]) => {
            let Some(x) = matrix(x)? else { return Ok(None) };
            fits(&x, centers, *k)?;
            lloyd(&x, centers, *k)?.map(|s| Value::array(packed(s.pack())))
        }
        (MlOp::Labels { centers, k }, [x]) => {
            let Some(x) = matrix(x)? else { return Ok(None) };
            fits(&x, centers, *k)?;
            nearest(&x, centers, *k, false)?.map(|g| Value::Gpu(Arc::new(g)))
        }
        (MlOp::Distances { centers, k }, [x]) => {
            let Some(x) = matrix(x)? else { return Ok(None) };
            fits(&x, centers, *k)?;
            nearest(&x, centers, *k, true)?.map(|g| Value::Gpu(Arc::new(g)))
        }
        (MlOp::CoMoments { with_y: false }, [x]) => {
            let Some(x) = matrix(x)? else { return Ok(None) };
            Some(Value::array(packed(comoments(&x, None)?.pack())))
        }
        (MlOp::CoMoments { with_y: true }, [x, y]) => {
            let Some(x) = matrix(x)? else { return Ok(None) };
            Some(Value::array(packed(comoments(&x, Some(&column(y, x.shape()[0], op)?))?.pack())))
        }
        (MlOp::Moments, [x]) => {
            let Some(x) = matrix(x)? else { return Ok(None) };
            moments(&x)?.map(|m| Value::array(packed(m.pack())))
        }
        (MlOp::Logistic { coef, m, classes }, [x, y]) => {
            let Some(x) = matrix(x)? else { return Ok(None) };
            let p = x.shape()[1];
            if coef.len() != m * (p + 1) {
                return Err(ArrayError::Shape(format!(
                    "{}: {} coefficients for {m} × ({p} + 1)",
                    op.name(),
                    coef.len()
                )));
            }
            let y = column(y, x.shape()[0], op)?;
            logistic(&x, &y, coef, *m, classes)?.map(|v| Value::array(packed(v)))
        }
        (MlOp::Poisson { coef }, [x, y]) => {
            let Some(x) = matrix(x)? else { return Ok(None) };
            let p = x.shape()[1];
            if coef.len() != p + 1 {
                return Err(ArrayError::Shape(format!(
                    "{}: {} coefficients for {p} + 1",
                    op.name(),
                    coef.len()
                )));
            }
            let y = column(y, x.shape()[0], op)?;
            poisson(&x, &y, coef)?.map(|v| Value::array(packed(v)))
        }
        (MlOp::Decision { coef, m }, [x]) => linear_out(x, coef, *m, &[], Out::Scores, op)?,
        (MlOp::Proba { coef, m }, [x]) => linear_out(x, coef, *m, &[], Out::Probabilities, op)?,
        (MlOp::Predict { coef, m, classes, int }, [x]) => {
            linear_out(x, coef, *m, classes, Out::Classes { int: *int }, op)?
        }
        (MlOp::PoissonPredict { coef }, [x]) => linear_out(x, coef, 1, &[], Out::Counts, op)?,
        (MlOp::InitRound { new, first, sample, seed, round, block }, [x, rest @ ..]) if rest.len() <= 1 => {
            let Some(x) = matrix(x)? else { return Ok(None) };
            let p = x.shape()[1];
            if !new.len().is_multiple_of(p.max(1)) {
                return Err(ArrayError::Shape(format!(
                    "{}: {} candidate values for rows of {p} features",
                    op.name(),
                    new.len()
                )));
            }
            let state = match rest.first() {
                Some(s) if s.dtype() != DType::F64 => return Ok(None),
                Some(s) => Some(s.contiguous()?),
                None => None,
            };
            let step =
                InitRound { new, first: *first, sample: *sample, seed: *seed, round: *round, block: *block };
            init_round(&x, state.as_ref(), &step)?
        }
        (MlOp::CountNearest { n }, [s]) if s.dtype() == DType::F64 => {
            count_nearest(&s.contiguous()?, *n)?.map(|v| Value::array(packed(v)))
        }
        _ => None,
    })
}

/// A block as a C-ordered matrix of rows (a 1-d block is one column), or
/// `None` for a dtype the kernels do not read (bool).
fn matrix(x: &GpuChunk) -> Result<Option<GpuChunk>, ArrayError> {
    if x.dtype() == DType::Bool || x.ndim() > 2 {
        return Ok(None);
    }
    let x = x.contiguous()?;
    Ok(Some(if x.ndim() == 1 { x.reshape(&[x.shape()[0], 1])? } else { x }))
}

/// y's block as `n` C-ordered values.
fn column(y: &GpuChunk, n: usize, op: &MlOp) -> Result<GpuChunk, ArrayError> {
    if y.len() != n || y.ndim() > 2 {
        return Err(ArrayError::Shape(format!(
            "{}: a block of X has {n} rows but its block of y has shape {:?}",
            op.name(),
            y.shape()
        )));
    }
    y.contiguous()
}

fn fits(x: &GpuChunk, centers: &[f64], k: usize) -> Result<(), ArrayError> {
    if centers.len() != k * x.shape()[1] {
        return Err(ArrayError::Shape(format!(
            "{} centre values for {k} centres of {} features",
            centers.len(),
            x.shape()[1]
        )));
    }
    Ok(())
}

/// How a thread block's threads take columns: `lanes` threads per column
/// (each a row in `lanes`) when a row is narrower than the block, else
/// one, taking `per` columns `TPB` apart.
struct Columns {
    lanes: usize,
    per: usize,
}

fn columns(p: usize) -> Columns {
    if p <= TPB {
        Columns { lanes: TPB / p.max(1), per: 1 }
    } else {
        Columns { lanes: 1, per: p.div_ceil(TPB) }
    }
}

/// The defines every generated kernel starts with.
fn header(x: DType, p: usize, extra: &[(&str, usize)]) -> String {
    let c = columns(p);
    let mut s = String::from(PRELUDE);
    let _ = writeln!(s, "typedef {} XT;", store_type(x));
    let _ = writeln!(s, "#define TPB {TPB}\n#define P {p}\n#define L {}\n#define CJ {}", c.lanes, c.per);
    for (k, v) in extra {
        let _ = writeln!(s, "#define {k} {v}");
    }
    s.push_str(
        r#"
__device__ __forceinline__ int col0() { return P <= TPB ? (int)threadIdx.x % P : (int)threadIdx.x; }
__device__ __forceinline__ int lane() { return P <= TPB ? (int)threadIdx.x / P : 0; }
/// Sum of v over the thread block (every thread gets it); red has TPB slots.
__device__ double block_sum(double v, double* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int s = TPB / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  double r = red[0];
  __syncthreads();
  return r;
}
/// out[e] = Σ over groups of part[g·stride + e]; with gridDim.y > 1, row
/// y of out (len apart) sums groups y·per up to (y + 1)·per.
extern "C" __global__ void brisk_ml_sum(const double* __restrict__ part, u64 groups, u64 len, u64 stride, u64 per, double* __restrict__ out) {
  const u64 g0 = (u64)blockIdx.y * per;
  const u64 g1 = g0 + per < groups ? g0 + per : groups;
  for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < len; e += (u64)gridDim.x * blockDim.x) {
    double s = 0.0;
    #pragma unroll 8
    for (u64 g = g0; g < g1; ++g) s += part[g * stride + e];
    out[(u64)blockIdx.y * len + e] = s;
  }
}
"#,
    );
    s
}

/// The thread blocks of a launch over `n` rows: one per tile up to what
/// the device holds at once (`shared` bytes of dynamic shared memory each).
fn grid(device: &Arc<Device>, kernel: &brisk_gpu::Kernel, n: usize, shared: usize) -> usize {
    tiled_grid(device, kernel, n, shared, TPB)
}

/// As `grid`, for tiles of `tr` rows.
fn tiled_grid(device: &Arc<Device>, kernel: &brisk_gpu::Kernel, n: usize, shared: usize, tr: usize) -> usize {
    let resident = device.resident_blocks(kernel, TPB as u32, shared).max(2) as usize;
    n.div_ceil(tr.max(1)).clamp(1, device.sm_count() as usize * resident)
}

fn launch(g: usize, shared: usize) -> Launch {
    Launch { grid: (g as u32, 1, 1), block: (TPB as u32, 1, 1), shared: shared as u32 }
}

/// The tile staging every row kernel shares: a tile's `TR` rows (the
/// thread block's width, fewer for wide rows) copied to shared memory as
/// they lie (neighbouring threads read neighbouring values), a row every
/// `PS` values (odd, so threads reading a column of the tile hit
/// different banks). A thread then takes each row of the tile.
const TILE: &str = r#"
#define PS ((P % 2 == 0) ? P + 1 : P)
__device__ __forceinline__ void stage(const XT* __restrict__ x, u64 tile, unsigned rows, XT* tl) {
  const XT* src = x + tile * P;
  #pragma unroll 4
  for (unsigned e = threadIdx.x; e < rows * P; e += TPB) tl[(e / P) * PS + e % P] = src[e];
}
"#;

/// Bytes of a staged tile of `tr` rows of `p` columns of `t`.
fn tile_bytes(t: DType, p: usize, tr: usize) -> usize {
    tr * (p + usize::from(p.is_multiple_of(2))) * t.itemsize()
}

/// The tallest tile (`TPB` rows down to 1, halving) whose kernel's shared
/// memory, `bytes(rows)`, fits the device: its rows and bytes.
fn tile_rows(device: &Device, bytes: impl Fn(usize) -> Option<usize>) -> Option<(usize, usize)> {
    let limit = device.shared_per_block() as usize;
    std::iter::successors(Some(TPB), |r| (*r > 1).then_some(r / 2))
        .find_map(|r| bytes(r).filter(|b| *b <= limit).map(|b| (r, b)))
}

fn f64s(device: &Arc<Device>, v: &[f64]) -> Result<GpuChunk, ArrayError> {
    let c = Chunk::from_vec(&[v.len()], v.to_vec())?;
    GpuChunk::from_host(&c, device)
}

fn zeros(device: &Arc<Device>, t: DType, n: usize) -> Result<GpuChunk, ArrayError> {
    let z = GpuChunk::alloc(device, t, &[n])?;
    z.buffer().fill_bytes(0)?;
    Ok(z)
}

fn download(g: &GpuChunk) -> Result<Vec<f64>, ArrayError> {
    Ok(g.to_host()?.cast::<f64>().iter().copied().collect())
}

/// `brisk_ml_sum`: `out[e] = Σ_g part[g·stride + e]` for `e < len`. Many
/// groups are summed in two steps (runs of `PER` groups at once, then the
/// runs' sums), always in the same order.
fn sum_groups(
    device: &Arc<Device>,
    kernel: &brisk_gpu::Kernel,
    part: &GpuChunk,
    groups: usize,
    len: usize,
    stride: usize,
    out: u64,
) -> Result<(), ArrayError> {
    const PER: usize = 32;
    let step = |src: u64, groups: usize, stride: usize, per: usize, dst: u64| -> Result<(), ArrayError> {
        let mut l = Launch::linear(device, len, 128);
        l.grid.1 = groups.div_ceil(per).max(1) as u32;
        let args = [
            KArg::U64(src),
            KArg::U64(groups as u64),
            KArg::U64(len as u64),
            KArg::U64(stride as u64),
            KArg::U64(per as u64),
            KArg::U64(dst),
        ];
        device.launch(kernel, l, &args)?;
        Ok(())
    };
    if groups <= 2 * PER {
        return step(part.ptr(), groups, stride, groups.max(1), out);
    }
    let runs = groups.div_ceil(PER);
    let tmp = GpuChunk::alloc(device, DType::F64, &[runs * len])?;
    step(part.ptr(), groups, stride, PER, tmp.ptr())?;
    step(tmp.ptr(), runs, len, runs, out)
}

// ---- k-means ---------------------------------------------------------------

/// A row's nearest centre as the CPU kernel finds it: the argmin of the
/// GEMM form ‖c‖² − 2·x·c (one multiply-add per centre and feature, the
/// products in registers `s[K]`), then the exact Σ(x − c)² to that centre
/// (the GEMM form cancels), the row read again from cache. `cs` holds the
/// centres, `cn` their squared norms, in shared memory.
const NEAREST_ROW: &str = r#"
__device__ __forceinline__ void centre_norms(const double* cs, double* cn) {
  for (int c = threadIdx.x; c < K; c += blockDim.x) {
    double s = 0.0;
    for (int j = 0; j < P; ++j) s += cs[c * P + j] * cs[c * P + j];
    cn[c] = s;
  }
}
__device__ __forceinline__ int nearest_row(const XT* __restrict__ row, const double* cs, const double* cn, double* d2) {
  double s[K];
  #pragma unroll
  for (int c = 0; c < K; ++c) s[c] = 0.0;
  for (int j = 0; j < P; ++j) {
    const double v = (double)row[j];
    #pragma unroll
    for (int c = 0; c < K; ++c) s[c] += v * cs[c * P + j];
  }
  int b = 0;
  double best = cn[0] - 2.0 * s[0];
  #pragma unroll
  for (int c = 1; c < K; ++c) {
    const double t = cn[c] - 2.0 * s[c];
    if (t < best) { best = t; b = c; }
  }
  double e = 0.0;
  for (int j = 0; j < P; ++j) { const double d = (double)row[j] - cs[b * P + j]; e += d * d; }
  *d2 = e;
  return b;
}
"#;

/// The dynamic shared memory of the k-means kernels: centres and their
/// norms, `lanes` tables of cluster sums (Lloyd), the reductions, the
/// staged tile, labels and counts; `None` past the device's limit.
/// Returns the tile's rows and the bytes.
fn kmeans_shared(device: &Device, k: usize, p: usize, t: DType, lanes: usize) -> Option<(usize, usize)> {
    if k == 0 || k > 32 {
        return None;
    }
    tile_rows(device, |tr| {
        Some(8 * (k * p + k + lanes * k * p + 2 * TPB) + tile_bytes(t, p, tr) + 4 * (TPB + k) + 16)
    })
}

/// Lanes of the Lloyd kernel's cluster sums: as many as the column layout
/// has, up to what shared memory holds beside a full tile (at least one,
/// or no kernel), with the tile's rows and the bytes.
fn sum_lanes(device: &Device, k: usize, p: usize, t: DType) -> Option<(usize, usize, usize)> {
    (1..=columns(p).lanes)
        .rev()
        .filter_map(|l| kmeans_shared(device, k, p, t, l).map(|(tr, b)| (l, tr, b)))
        .max_by_key(|&(l, tr, _)| (tr, l))
}

/// Labels (int64) or distances (n × k f64) of each row.
fn nearest(x: &GpuChunk, centers: &[f64], k: usize, dist: bool) -> Result<Option<GpuChunk>, ArrayError> {
    let (n, p) = (x.shape()[0], x.shape()[1]);
    let device = x.device().clone();
    let Some((tr, shared)) = kmeans_shared(&device, k, p, x.dtype(), 0) else { return Ok(None) };
    let mut src = header(x.dtype(), p, &[("K", k), ("TR", tr)]);
    src.push_str(TILE);
    src.push_str(NEAREST_ROW);
    src.push_str(
        r#"
extern "C" __global__ void brisk_kmeans_nearest(const XT* __restrict__ x, u64 n, const double* __restrict__ cen, long long* __restrict__ lab, double* __restrict__ dist) {
  extern __shared__ __align__(16) unsigned char smem[];
  double* cs = (double*)smem;
  double* cn = cs + K * P;
  XT* tl = (XT*)(cn + K);
  for (int i = threadIdx.x; i < K * P; i += TPB) cs[i] = cen[i];
  __syncthreads();
  centre_norms(cs, cn);
  for (u64 tile = (u64)blockIdx.x * TR; tile < n; tile += (u64)gridDim.x * TR) {
    const unsigned rows = n - tile < TR ? (unsigned)(n - tile) : TR;
    __syncthreads();
    stage(x, tile, rows, tl);
    __syncthreads();
    if (threadIdx.x >= rows) continue;
    const u64 r = tile + threadIdx.x;
    const XT* row = tl + threadIdx.x * PS;
    if (lab) {
      double d2;
      lab[r] = nearest_row(row, cs, cn, &d2);
    }
    if (dist) {
      // Every distance exact: Σ(x − c)² per centre.
      double d[K];
      #pragma unroll
      for (int c = 0; c < K; ++c) d[c] = 0.0;
      for (int j = 0; j < P; ++j) {
        const double v = (double)row[j];
        #pragma unroll
        for (int c = 0; c < K; ++c) { const double e = v - cs[c * P + j]; d[c] += e * e; }
      }
      #pragma unroll
      for (int c = 0; c < K; ++c) dist[r * K + c] = sqrt(d[c]);
    }
  }
}
"#,
    );
    let kern = device.kernel(&src, "brisk_kmeans_nearest")?;
    let cen = f64s(&device, centers)?;
    let out = if dist {
        GpuChunk::alloc(&device, DType::F64, &[n, k])?
    } else {
        GpuChunk::alloc(&device, DType::I64, &[n])?
    };
    let (lab, d) = if dist { (0, out.ptr()) } else { (out.ptr(), 0) };
    let g = tiled_grid(&device, &kern, n, shared, tr);
    let args = [KArg::U64(x.ptr()), KArg::U64(n as u64), KArg::U64(cen.ptr()), KArg::U64(lab), KArg::U64(d)];
    device.launch(&kern, launch(g, shared), &args)?;
    Ok(Some(out))
}

/// One Lloyd step on a block (`LloydStat::of`'s numbers): per-cluster
/// sums and counts, the inertia, and the k rows farthest from their
/// centres. The farthest rows are found without bringing the distances
/// over: the k-th largest of the thread blocks' largest distances bounds
/// the k-th largest overall from below, so the rows at or above it (few)
/// are gathered on the device and ranked there.
fn lloyd(x: &GpuChunk, centers: &[f64], k: usize) -> Result<Option<LloydStat>, ArrayError> {
    let (n, p) = (x.shape()[0], x.shape()[1]);
    let device = x.device().clone();
    let Some((lanes, tr, shared)) = sum_lanes(&device, k, p, x.dtype()) else { return Ok(None) };
    if n == 0 {
        return Ok(None);
    }
    let mut src = header(x.dtype(), p, &[("K", k), ("L2", lanes), ("TR", tr)]);
    src.push_str(TILE);
    src.push_str(NEAREST_ROW);
    src.push_str(LLOYD);
    let kern = device.kernel(&src, "brisk_lloyd")?;
    let sum = device.kernel(&src, "brisk_ml_sum")?;
    let cut = device.kernel(&src, "brisk_far_cut")?;
    let pick = device.kernel(&src, "brisk_far_pick")?;
    let rank = device.kernel(&src, "brisk_far_rank")?;
    let g = tiled_grid(&device, &kern, n, shared, tr);
    let kp = k * p;
    let cen = f64s(&device, centers)?;
    let part = GpuChunk::alloc(&device, DType::F64, &[g * lanes * kp])?;
    // Per thread block: counts (k), inertia, largest distance, its row.
    let blk = GpuChunk::alloc(&device, DType::F64, &[g * (k + 3)])?;
    let d2 = GpuChunk::alloc(&device, DType::F64, &[n])?;
    let labels = GpuChunk::alloc(&device, DType::I64, &[n])?;
    // out: sums (kp), counts (k), inertia, candidates found, far rows found,
    // then k × (d², label, row).
    let head = kp + k + 3;
    let out = zeros(&device, DType::F64, head + k * (p + 2))?;
    let tau = GpuChunk::alloc(&device, DType::F64, &[1])?;
    let count = zeros(&device, DType::I64, 1)?;
    let idx = GpuChunk::alloc(&device, DType::I64, &[FAR_CAP])?;
    let u = |c: &GpuChunk| KArg::U64(c.ptr());
    let nn = KArg::U64(n as u64);
    device.launch(&kern, launch(g, shared), &[u(x), nn, u(&cen), u(&part), u(&blk), u(&d2), u(&labels)])?;
    sum_groups(&device, &sum, &part, g * lanes, kp, kp, out.ptr())?;
    sum_groups(&device, &sum, &blk, g, k + 1, k + 3, out.ptr() + 8 * kp as u64)?;
    let one = Launch { grid: (1, 1, 1), block: (1024, 1, 1), shared: 0 };
    device.launch(&cut, one, &[u(&blk), KArg::U64(g as u64), u(&tau)])?;
    device.launch(&pick, Launch::linear(&device, n, 256), &[u(&d2), nn, u(&tau), u(&count), u(&idx)])?;
    device.launch(
        &rank,
        one,
        &[u(x), u(&d2), u(&labels), u(&count), u(&idx), u(&out), KArg::U64(head as u64)],
    )?;
    let v = download(&out)?;
    let found = v[kp + k + 1] as usize;
    if found > FAR_CAP {
        // Ties over much of the block: its statistic on the host.
        let host = x.to_host()?;
        return Ok(Some(super::stats::with_rows(&host, |x| LloydStat::of(x, centers, k))?));
    }
    let nfar = v[kp + k + 2] as usize;
    let far = (0..nfar)
        .map(|i| {
            let at = head + i * (p + 2);
            (v[at], v[at + 1] as u32, v[at + 2..at + 2 + p].to_vec())
        })
        .collect();
    Ok(Some(LloydStat {
        k,
        p,
        sums: v[..kp].to_vec(),
        counts: v[kp..kp + k].to_vec(),
        inertia: v[kp + k],
        far,
    }))
}

const LLOYD: &str = r#"
#define FAR_CAP 8192
extern "C" __global__ void brisk_lloyd(const XT* __restrict__ x, u64 n, const double* __restrict__ cen,
    double* __restrict__ part, double* __restrict__ blk, double* __restrict__ d2, long long* __restrict__ labels) {
  extern __shared__ __align__(16) unsigned char smem[];
  double* cs = (double*)smem;
  double* cn = cs + K * P;
  double* sacc = cn + K;
  double* red = sacc + L2 * K * P;
  unsigned long long* redi = (unsigned long long*)(red + TPB);
  XT* tl = (XT*)(redi + TPB);
  int* lab = (int*)(tl + TR * PS);
  unsigned int* cnt = (unsigned int*)(lab + TPB);
  const int tid = threadIdx.x;
  for (int i = tid; i < K * P; i += TPB) cs[i] = cen[i];
  for (int i = tid; i < L2 * K * P; i += TPB) sacc[i] = 0.0;
  for (int i = tid; i < K; i += TPB) cnt[i] = 0;
  __syncthreads();
  centre_norms(cs, cn);
  const int j0 = col0(), ln = lane();
  double inertia = 0.0, far = -1.0;
  unsigned long long far_r = 0;
  for (u64 tile = (u64)blockIdx.x * TR; tile < n; tile += (u64)gridDim.x * TR) {
    const unsigned rows = n - tile < TR ? (unsigned)(n - tile) : TR;
    __syncthreads();
    stage(x, tile, rows, tl);
    __syncthreads();
    if (tid < rows) {
      const u64 r = tile + tid;
      double d;
      const int b = nearest_row(tl + tid * PS, cs, cn, &d);
      lab[tid] = b;
      inertia += d;
      atomicAdd(&cnt[b], 1u);
      d2[r] = d;
      labels[r] = b;
      if (d > far) { far = d; far_r = r; }
    }
    __syncthreads();
    // Each thread adds its column of the tile's rows to its lane's sums.
    if (ln < L2) {
      for (unsigned rr = ln; rr < rows; rr += L2) {
        const XT* row = tl + rr * PS;
        double* mine = sacc + (ln * K + lab[rr]) * P;
        for (int a = 0; a < CJ; ++a) {
          const int j = j0 + a * TPB;
          if (j < P) mine[j] += (double)row[j];
        }
      }
    }
  }
  __syncthreads();
  if (ln < L2) {
    double* mine = part + ((u64)blockIdx.x * L2 + ln) * (K * P);
    for (int a = 0; a < CJ; ++a) {
      const int j = j0 + a * TPB;
      if (j < P)
        for (int c = 0; c < K; ++c) mine[c * P + j] = sacc[(ln * K + c) * P + j];
    }
  }
  const double total = block_sum(inertia, red);
  // The farthest row of the thread block (ties: the first row).
  red[tid] = far; redi[tid] = far_r;
  __syncthreads();
  for (int s = TPB / 2; s > 0; s >>= 1) {
    if (tid < s) {
      const double o = red[tid + s];
      const unsigned long long oi = redi[tid + s];
      if (o > red[tid] || (o == red[tid] && oi < redi[tid])) { red[tid] = o; redi[tid] = oi; }
    }
    __syncthreads();
  }
  if (tid == 0) {
    double* b = blk + (u64)blockIdx.x * (K + 3);
    for (int c = 0; c < K; ++c) b[c] = (double)cnt[c];
    b[K] = total;
    b[K + 1] = red[0];
    b[K + 2] = (double)redi[0];
  }
}
/// tau: the K-th largest of the thread blocks' largest distances (ties by
/// block), or -1 when fewer blocks have rows: at least K rows lie at or
/// above it.
extern "C" __global__ void brisk_far_cut(const double* __restrict__ blk, u64 g, double* __restrict__ tau) {
  if (threadIdx.x == 0) *tau = -1.0;
  __syncthreads();
  for (u64 i = threadIdx.x; i < g; i += blockDim.x) {
    const double v = blk[i * (K + 3) + K + 1];
    u64 rank = 0;
    for (u64 j = 0; j < g; ++j) {
      const double w = blk[j * (K + 3) + K + 1];
      rank += (w > v || (w == v && j < i)) ? 1 : 0;
    }
    if (rank == K - 1 && v >= 0.0) *tau = v;
  }
}
/// The rows at or above tau, up to FAR_CAP of them (count says how many).
extern "C" __global__ void brisk_far_pick(const double* __restrict__ d2, u64 n, const double* __restrict__ tau,
    unsigned long long* __restrict__ count, long long* __restrict__ idx) {
  const double t = *tau;
  for (u64 r = (u64)blockIdx.x * blockDim.x + threadIdx.x; r < n; r += (u64)gridDim.x * blockDim.x) {
    if (d2[r] >= t) {
      const unsigned long long s = atomicAdd(count, 1ULL);
      if (s < FAR_CAP) idx[s] = (long long)r;
    }
  }
}
/// The K farthest candidates (distance down, row up), written after the
/// head of out as (d², label, row values).
extern "C" __global__ void brisk_far_rank(const XT* __restrict__ x, const double* __restrict__ d2,
    const long long* __restrict__ labels, const unsigned long long* __restrict__ count,
    const long long* __restrict__ idx, double* __restrict__ out, u64 head) {
  const u64 m = *count;
  if (threadIdx.x == 0) {
    out[head - 2] = (double)m;
    out[head - 1] = (double)(m < K ? m : K);
  }
  if (m > FAR_CAP) return;
  for (u64 i = threadIdx.x; i < m; i += blockDim.x) {
    const long long ri = idx[i];
    const double v = d2[ri];
    u64 rank = 0;
    for (u64 j = 0; j < m; ++j) {
      const long long rj = idx[j];
      const double w = d2[rj];
      rank += (w > v || (w == v && rj < ri)) ? 1 : 0;
    }
    if (rank < K) {
      double* o = out + head + rank * (P + 2);
      o[0] = v;
      o[1] = (double)labels[ri];
      for (int j = 0; j < P; ++j) o[2 + j] = (double)x[ri * P + j];
    }
  }
}
"#;

// ---- moments ---------------------------------------------------------------

/// Column moments (`Moments::of`'s numbers, NaN skipped): counts, sums,
/// minima and maxima in one pass, then the squared deviations from the
/// means in a second, both with per-thread-block partials.
fn moments(x: &GpuChunk) -> Result<Option<Moments>, ArrayError> {
    let (n, p) = (x.shape()[0], x.shape()[1]);
    if columns(p).per > 8 {
        return Ok(None);
    }
    let device = x.device().clone();
    let mut src = header(x.dtype(), p, &[]);
    src.push_str(MOMENTS);
    let first = device.kernel(&src, "brisk_moments")?;
    let second = device.kernel(&src, "brisk_moments_m2")?;
    let fold = device.kernel(&src, "brisk_moments_fold")?;
    let finish = device.kernel(&src, "brisk_moments_finish")?;
    let sum = device.kernel(&src, "brisk_ml_sum")?;
    let g = grid(&device, &first, n, 0);
    let groups = g * columns(p).lanes;
    let part = GpuChunk::alloc(&device, DType::F64, &[groups * 4 * p])?;
    // out: n, mean, m2, min, max (5p), Moments' packing.
    let out = GpuChunk::alloc(&device, DType::F64, &[5 * p])?;
    let u = |c: &GpuChunk| KArg::U64(c.ptr());
    let nn = KArg::U64(n as u64);
    device.launch(&first, launch(g, 0), &[u(x), nn, u(&part)])?;
    // The first pass's partials folded in runs of 32 groups, then the runs.
    let runs = groups.div_ceil(32);
    let folded = GpuChunk::alloc(&device, DType::F64, &[(runs + 1) * 4 * p])?;
    let last = folded.ptr() + 8 * (runs * 4 * p) as u64;
    let mut l = Launch::linear(&device, p, 128);
    l.grid.1 = runs as u32;
    device.launch(&fold, l, &[u(&part), KArg::U64(groups as u64), KArg::U64(32), u(&folded)])?;
    l.grid.1 = 1;
    device.launch(
        &fold,
        l,
        &[u(&folded), KArg::U64(runs as u64), KArg::U64(runs as u64), KArg::U64(last)],
    )?;
    device.launch(&finish, Launch::linear(&device, p, 128), &[KArg::U64(last), u(&out)])?;
    device.launch(&second, launch(g, 0), &[u(x), nn, u(&out), u(&part)])?;
    sum_groups(&device, &sum, &part, groups, p, p, out.ptr() + 16 * p as u64)?;
    Ok(Some(Moments::unpack(&download(&out)?)?))
}

const MOMENTS: &str = r#"
extern "C" __global__ void brisk_moments(const XT* __restrict__ x, u64 n, double* __restrict__ part) {
  const int j0 = col0(), ln = lane();
  if (ln >= L) return;
  double cnt[CJ], sum[CJ], lo[CJ], hi[CJ];
  for (int a = 0; a < CJ; ++a) { cnt[a] = 0.0; sum[a] = 0.0; lo[a] = INFINITY; hi[a] = -INFINITY; }
  #pragma unroll 4
  for (u64 r = (u64)blockIdx.x * L + ln; r < n; r += (u64)gridDim.x * L) {
    for (int a = 0; a < CJ; ++a) {
      const int j = j0 + a * TPB;
      if (j < P) {
        const double v = (double)x[r * P + j];
        const bool ok = v == v;
        cnt[a] += ok ? 1.0 : 0.0;
        sum[a] += ok ? v : 0.0;
        lo[a] = fmin(lo[a], v);
        hi[a] = fmax(hi[a], v);
      }
    }
  }
  double* mine = part + ((u64)blockIdx.x * L + ln) * (4 * P);
  for (int a = 0; a < CJ; ++a) {
    const int j = j0 + a * TPB;
    if (j < P) { mine[j] = cnt[a]; mine[P + j] = sum[a]; mine[2 * P + j] = lo[a]; mine[3 * P + j] = hi[a]; }
  }
}
/// Row y of dst (4P apart): counts, sums, minima and maxima of the groups
/// y·per up to (y + 1)·per of part.
extern "C" __global__ void brisk_moments_fold(const double* __restrict__ part, u64 groups, u64 per, double* __restrict__ dst) {
  const u64 g0 = (u64)blockIdx.y * per;
  const u64 g1 = g0 + per < groups ? g0 + per : groups;
  for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j < P; j += (u64)gridDim.x * blockDim.x) {
    double c = 0.0, s = 0.0, lo = INFINITY, hi = -INFINITY;
    for (u64 g = g0; g < g1; ++g) {
      const double* q = part + g * (4 * P);
      c += q[j]; s += q[P + j]; lo = fmin(lo, q[2 * P + j]); hi = fmax(hi, q[3 * P + j]);
    }
    double* o = dst + (u64)blockIdx.y * (4 * P);
    o[j] = c; o[P + j] = s; o[2 * P + j] = lo; o[3 * P + j] = hi;
  }
}
/// out[0..P) counts, [P..2P) means, [3P..4P) minima, [4P..5P) maxima.
extern "C" __global__ void brisk_moments_finish(const double* __restrict__ f, double* __restrict__ out) {
  for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j < P; j += (u64)gridDim.x * blockDim.x) {
    const double c = f[j];
    out[j] = c;
    out[P + j] = c > 0.0 ? f[P + j] / c : 0.0;
    out[3 * P + j] = f[2 * P + j];
    out[4 * P + j] = f[3 * P + j];
  }
}
extern "C" __global__ void brisk_moments_m2(const XT* __restrict__ x, u64 n, const double* __restrict__ out, double* __restrict__ part) {
  const int j0 = col0(), ln = lane();
  if (ln >= L) return;
  double m2[CJ], mean[CJ];
  for (int a = 0; a < CJ; ++a) { m2[a] = 0.0; mean[a] = j0 + a * TPB < P ? out[P + j0 + a * TPB] : 0.0; }
  #pragma unroll 4
  for (u64 r = (u64)blockIdx.x * L + ln; r < n; r += (u64)gridDim.x * L) {
    for (int a = 0; a < CJ; ++a) {
      const int j = j0 + a * TPB;
      if (j < P) {
        const double d = (double)x[r * P + j] - mean[a];
        m2[a] += d == d ? d * d : 0.0;
      }
    }
  }
  double* mine = part + ((u64)blockIdx.x * L + ln) * P;
  for (int a = 0; a < CJ; ++a) {
    const int j = j0 + a * TPB;
    if (j < P) mine[j] = m2[a];
  }
}
"#;

/// Rows of a slab of the co-moments' batched products.
const SLAB: usize = 16384;

/// Co-moments of `[X | y]` (`CoMoments::of`'s numbers): the column means
/// from per-thread-block sums, the centred rows as an f64 copy, and their
/// cross-products by cuBLAS (batched GEMMs over slabs of rows), so the
/// accumulation is f64 whatever X's type.
fn comoments(x: &GpuChunk, y: Option<&GpuChunk>) -> Result<CoMoments, ArrayError> {
    let (n, p) = (x.shape()[0], x.shape()[1]);
    let q = p + usize::from(y.is_some());
    if n == 0 {
        return Ok(CoMoments { n: 0.0, mean: vec![0.0; q], c: vec![0.0; q * q] });
    }
    let device = x.device().clone();
    let yt = y.map_or(x.dtype(), GpuChunk::dtype);
    let mut src = header(x.dtype(), q, &[("PX", p)]);
    let _ = writeln!(src, "typedef {} YT;", store_type(yt));
    src.push_str(CENTRE);
    let sums = device.kernel(&src, "brisk_colsum")?;
    let centre = device.kernel(&src, "brisk_centre")?;
    let merge = device.kernel(&src, "brisk_ml_sum")?;
    let g = grid(&device, &sums, n, 0);
    let groups = g * columns(q).lanes;
    let part = GpuChunk::alloc(&device, DType::F64, &[groups * q])?;
    // The centred rows in slabs of about SLAB rows (the last padded with
    // zero rows, which add nothing), each slab's cross-products one GEMM of a
    // batch; at most CHUNK slabs centred at once, so the f64 copy stays
    // small beside the block; every slab's product summed after.
    const CHUNK: usize = 64;
    let batches = n.div_ceil(SLAB);
    // Slabs as even as the rows allow: at most one padding row per slab.
    let slab = n.div_ceil(batches);
    let chunks = batches.div_ceil(CHUNK);
    // out: the q sums, then C (q × q).
    let out = GpuChunk::alloc(&device, DType::F64, &[q + q * q])?;
    let z = GpuChunk::alloc(&device, DType::F64, &[batches.min(CHUNK) * slab, q])?;
    let cb = GpuChunk::alloc(&device, DType::F64, &[batches.min(CHUNK), q, q])?;
    let per_chunk = GpuChunk::alloc(&device, DType::F64, &[chunks, q * q])?;
    let u = |c: &GpuChunk| KArg::U64(c.ptr());
    let yp = y.map_or(0, GpuChunk::ptr);
    let nn = KArg::U64(n as u64);
    device.launch(&sums, launch(g, 0), &[u(x), KArg::U64(yp), nn, u(&part)])?;
    sum_groups(&device, &merge, &part, groups, q, q, out.ptr())?;
    for c in 0..chunks {
        let first = c * CHUNK;
        let nb = CHUNK.min(batches - first);
        let rows = nb * slab;
        let args = [
            u(x),
            KArg::U64(yp),
            nn,
            KArg::U64((first * slab) as u64),
            KArg::U64(rows as u64),
            u(&out),
            u(&z),
        ];
        device.launch(&centre, Launch::linear(&device, rows * q, 256), &args)?;
        // A slab of z is row-major slab × q: column-major q × slab.
        device.cross_batched::<f64>(q, slab, nb, z.buffer(), cb.buffer())?;
        sum_groups(&device, &merge, &cb, nb, q * q, q * q, per_chunk.ptr() + 8 * (c * q * q) as u64)?;
    }
    sum_groups(&device, &merge, &per_chunk, chunks, q * q, q * q, out.ptr() + 8 * q as u64)?;
    let v = download(&out)?;
    let mean: Vec<f64> = v[..q].iter().map(|s| s / n as f64).collect();
    // Symmetric as the CPU kernel's: the lower triangle mirrored.
    let c = &v[q..];
    let mut full = vec![0.0; q * q];
    for i in 0..q {
        for j in 0..=i {
            full[i * q + j] = c[i * q + j];
            full[j * q + i] = c[i * q + j];
        }
    }
    Ok(CoMoments { n: n as f64, mean, c: full })
}

const CENTRE: &str = r#"
__device__ __forceinline__ double at(const XT* __restrict__ x, const YT* __restrict__ y, u64 r, int j) {
  return j < PX ? (double)x[r * PX + j] : (double)y[r];
}
extern "C" __global__ void brisk_colsum(const XT* __restrict__ x, const YT* __restrict__ y, u64 n, double* __restrict__ part) {
  const int j0 = col0(), ln = lane();
  if (ln >= L) return;
  double s[CJ];
  for (int a = 0; a < CJ; ++a) s[a] = 0.0;
  #pragma unroll 4
  for (u64 r = (u64)blockIdx.x * L + ln; r < n; r += (u64)gridDim.x * L) {
    for (int a = 0; a < CJ; ++a) {
      const int j = j0 + a * TPB;
      if (j < P) s[a] += at(x, y, r, j);
    }
  }
  double* mine = part + ((u64)blockIdx.x * L + ln) * P;
  for (int a = 0; a < CJ; ++a) {
    const int j = j0 + a * TPB;
    if (j < P) mine[j] = s[a];
  }
}
extern "C" __global__ void brisk_centre(const XT* __restrict__ x, const YT* __restrict__ y, u64 n, u64 row0, u64 rows, const double* __restrict__ sums, double* __restrict__ z) {
  const double inv = 1.0 / (double)n;
  for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < rows * P; e += (u64)gridDim.x * blockDim.x) {
    const u64 r = row0 + e / P;
    const int j = (int)(e % P);
    z[e] = r < n ? at(x, y, r, j) - sums[j] * inv : 0.0;
  }
}
"#;

// ---- logistic regression ---------------------------------------------------

/// The logistic kernel's dynamic shared memory (coefficients, classes,
/// the tile's residuals, a reduction, the staged tile), or `None` where
/// the sizes do not fit it.
fn logistic_shared(device: &Device, m: usize, p: usize, nc: usize, t: DType) -> Option<(usize, usize)> {
    let ok =
        (1..=16).contains(&m) && columns(p).per * m <= 32 && (1..=32).contains(&nc) && (m == 1 || nc == m);
    if !ok {
        return None;
    }
    tile_rows(device, |tr| Some(8 * (m * (p + 1) + nc + TPB * m + TPB) + tile_bytes(t, p, tr) + 16))
}

/// The logistic loss and gradient of a block (`kernels::logistic_loss`'s
/// numbers and packing); the labels are matched to `classes` on the
/// device, an unknown one refused as on the host.
fn logistic(
    x: &GpuChunk,
    y: &GpuChunk,
    coef: &[f64],
    m: usize,
    classes: &[f64],
) -> Result<Option<Vec<f64>>, ArrayError> {
    linear_loss(x, y, coef, m, classes, false)
}

/// The loss and gradient of a linear model with a log link for counts
/// (`kernels::poisson_loss`'s numbers): the logistic kernel with the half
/// Poisson deviance in place of the logistic loss.
fn poisson(x: &GpuChunk, y: &GpuChunk, coef: &[f64]) -> Result<Option<Vec<f64>>, ArrayError> {
    linear_loss(x, y, coef, 1, &[0.0], true)
}

fn linear_loss(
    x: &GpuChunk,
    y: &GpuChunk,
    coef: &[f64],
    m: usize,
    classes: &[f64],
    counts: bool,
) -> Result<Option<Vec<f64>>, ArrayError> {
    let (n, p) = (x.shape()[0], x.shape()[1]);
    let device = x.device().clone();
    let Some((tr, shared)) = logistic_shared(&device, m, p, classes.len(), x.dtype()) else {
        return Ok(None);
    };
    let nc = classes.len();
    let mut src = header(x.dtype(), p, &[("M", m), ("NC", nc), ("TR", tr), ("POISSON", usize::from(counts))]);
    let _ = writeln!(src, "typedef {} YT;", store_type(y.dtype()));
    src.push_str(TILE);
    src.push_str(LOGISTIC);
    let kern = device.kernel(&src, "brisk_logistic")?;
    let sum = device.kernel(&src, "brisk_ml_sum")?;
    let g = tiled_grid(&device, &kern, n, shared, tr);
    let lanes = columns(p).lanes;
    let mp = m * p;
    // One upload: the coefficients, then the classes.
    let table = f64s(&device, &[coef, classes].concat())?;
    let part = GpuChunk::alloc(&device, DType::F64, &[g * lanes * mp])?;
    let blk = GpuChunk::alloc(&device, DType::F64, &[g * (m + 1)])?;
    // out: the weights' gradient (m × p), the loss, the intercepts' (m),
    // then a row whose label is not a class, as its bitwise not (0 for
    // none: the kernel keeps the largest, so the first such row).
    let out = zeros(&device, DType::F64, mp + m + 2)?;
    let u = |c: &GpuChunk| KArg::U64(c.ptr());
    let args = [
        u(x),
        u(y),
        KArg::U64(n as u64),
        u(&table),
        KArg::U64(table.ptr() + 8 * coef.len() as u64),
        u(&part),
        u(&blk),
        KArg::U64(out.ptr() + 8 * (mp + m + 1) as u64),
    ];
    device.launch(&kern, launch(g, shared), &args)?;
    sum_groups(&device, &sum, &part, g * lanes, mp, mp, out.ptr())?;
    sum_groups(&device, &sum, &blk, g, m + 1, m + 1, out.ptr() + 8 * mp as u64)?;
    let v = download(&out)?;
    let flag = v[mp + m + 1].to_bits();
    if flag != 0 {
        let row = !flag as usize;
        let label = y.to_host()?.cast::<f64>().iter().nth(row).copied().unwrap_or(f64::NAN);
        return Err(ArrayError::Value(format!("the label {label} is not one of the classes {classes:?}")));
    }
    let mut res = Vec::with_capacity(1 + m * (p + 1));
    res.push(v[mp]);
    for c in 0..m {
        res.extend_from_slice(&v[c * p..(c + 1) * p]);
        res.push(v[mp + 1 + c]);
    }
    Ok(Some(res))
}

const LOGISTIC: &str = r#"
extern "C" __global__ void brisk_logistic(const XT* __restrict__ x, const YT* __restrict__ y, u64 n,
    const double* __restrict__ coef, const double* __restrict__ classes, double* __restrict__ part,
    double* __restrict__ blk, unsigned long long* __restrict__ bad) {
  extern __shared__ __align__(16) unsigned char smem[];
  double* w = (double*)smem;
  double* cl = w + M * (P + 1);
  double* res = cl + NC;
  double* red = res + TPB * M;
  XT* tl = (XT*)(red + TPB);
  const int tid = threadIdx.x;
  for (int i = tid; i < M * (P + 1); i += TPB) w[i] = coef[i];
  for (int i = tid; i < NC; i += TPB) cl[i] = classes[i];
  const int j0 = col0(), ln = lane();
  double acc[CJ][M];
  #pragma unroll
  for (int a = 0; a < CJ; ++a)
    #pragma unroll
    for (int c = 0; c < M; ++c) acc[a][c] = 0.0;
  double gb[M];
  #pragma unroll
  for (int c = 0; c < M; ++c) gb[c] = 0.0;
  double loss = 0.0;
  for (u64 tile = (u64)blockIdx.x * TR; tile < n; tile += (u64)gridDim.x * TR) {
    const unsigned rows = n - tile < TR ? (unsigned)(n - tile) : TR;
    __syncthreads();
    stage(x, tile, rows, tl);
    __syncthreads();
    if (tid < rows) {
      const u64 r = tile + tid;
      const double yv = (double)y[r];
#if !POISSON
      int ci = -1;
      for (int c = 0; c < NC; ++c) if (cl[c] == yv) ci = c;
      if (ci < 0) { atomicMax(bad, ~(unsigned long long)r); ci = 0; }
#endif
      const XT* row = tl + tid * PS;
      double z[M];
      #pragma unroll
      for (int c = 0; c < M; ++c) z[c] = 0.0;
      for (int j = 0; j < P; ++j) {
        const double v = (double)row[j];
        #pragma unroll
        for (int c = 0; c < M; ++c) z[c] += v * w[c * (P + 1) + j];
      }
      #pragma unroll
      for (int c = 0; c < M; ++c) z[c] += w[c * (P + 1) + P];
#if POISSON
      // The half Poisson deviance: exp(z) − y·z, its residual exp(z) − y.
      const double mu = exp(z[0]);
      loss += mu - yv * z[0];
      res[tid] = mu - yv;
      gb[0] += mu - yv;
#else
      if (M == 1) {
        const double zi = z[0];
        const double yb = ci == 1 ? 1.0 : 0.0;
        loss += (zi > 0.0 ? zi + log1p(exp(-zi)) : log1p(exp(zi))) - yb * zi;
        const double s = zi >= 0.0 ? 1.0 / (1.0 + exp(-zi)) : exp(zi) / (1.0 + exp(zi));
        res[tid] = s - yb;
        gb[0] += s - yb;
      } else {
        double top = -INFINITY;
        #pragma unroll
        for (int c = 0; c < M; ++c) top = fmax(top, z[c]);
        double se = 0.0;
        #pragma unroll
        for (int c = 0; c < M; ++c) se += exp(z[c] - top);
        const double lse = top + log(se);
        double zt = 0.0;
        #pragma unroll
        for (int c = 0; c < M; ++c) {
          zt += c == ci ? z[c] : 0.0;
          const double rc = exp(z[c] - lse) - (c == ci ? 1.0 : 0.0);
          res[tid * M + c] = rc;
          gb[c] += rc;
        }
        loss += lse - zt;
      }
#endif
    }
    __syncthreads();
    if (ln < L) {
      for (unsigned rr = ln; rr < rows; rr += L) {
        const XT* row = tl + rr * PS;
        #pragma unroll
        for (int a = 0; a < CJ; ++a) {
          const int j = j0 + a * TPB;
          if (j < P) {
            const double v = (double)row[j];
            #pragma unroll
            for (int c = 0; c < M; ++c) acc[a][c] += res[rr * M + c] * v;
          }
        }
      }
    }
  }
  if (ln < L) {
    double* mine = part + ((u64)blockIdx.x * L + ln) * (M * P);
    #pragma unroll
    for (int a = 0; a < CJ; ++a) {
      const int j = j0 + a * TPB;
      if (j < P) {
        #pragma unroll
        for (int c = 0; c < M; ++c) mine[c * P + j] = acc[a][c];
      }
    }
  }
  double* b = blk + (u64)blockIdx.x * (M + 1);
  __syncthreads();
  const double lt = block_sum(loss, red);
  if (tid == 0) b[0] = lt;
  for (int c = 0; c < M; ++c) {
    const double s = block_sum(gb[c], red);
    if (tid == 0) b[1 + c] = s;
  }
}
"#;

// ---- linear models' outputs -------------------------------------------------

/// What `linear_out` gives per row of X·Wᵀ + b.
#[derive(Clone, Copy, PartialEq)]
enum Out {
    /// The scores themselves (`decision_function`).
    Scores,
    /// Class probabilities: [1 − σ, σ] for one score, softmax for more.
    Probabilities,
    /// The most likely class's label (first of equals), int64 when `int`.
    Classes { int: bool },
    /// exp of the one score (a Poisson model's expected counts).
    Counts,
}

/// A linear model's per-row outputs on a block (the CPU kernels' `scores`,
/// `probabilities` and their argmax, the same formulas in the same order),
/// as a GPU block: the X·Wᵀ of each row in registers, W in shared memory
/// beside the staged tile.
fn linear_out(
    x: &GpuChunk,
    coef: &[f64],
    m: usize,
    classes: &[f64],
    out: Out,
    op: &MlOp,
) -> Result<Option<Value>, ArrayError> {
    let Some(x) = matrix(x)? else { return Ok(None) };
    let (n, p) = (x.shape()[0], x.shape()[1]);
    if m == 0 || coef.len() != m * (p + 1) {
        return Err(ArrayError::Shape(format!(
            "{}: {} coefficients for {m} × ({p} + 1)",
            op.name(),
            coef.len()
        )));
    }
    let k = m.max(2);
    if m > 16 || (matches!(out, Out::Classes { .. }) && classes.len() != k) {
        return Ok(None);
    }
    let device = x.device().clone();
    let Some((tr, shared)) =
        tile_rows(&device, |tr| Some(8 * (m * (p + 1) + k) + tile_bytes(x.dtype(), p, tr) + 16))
    else {
        return Ok(None);
    };
    let mode = match out {
        Out::Scores => 0,
        Out::Probabilities => 1,
        Out::Classes { int: false } => 2,
        Out::Classes { int: true } => 3,
        Out::Counts => 4,
    };
    let mut src = header(x.dtype(), p, &[("M", m), ("KC", k), ("TR", tr), ("MODE", mode)]);
    src.push_str(TILE);
    src.push_str(LINEAR_OUT);
    let kern = device.kernel(&src, "brisk_linear_out")?;
    let (shape, dtype) = match out {
        Out::Scores if m > 1 => (vec![n, m], DType::F64),
        Out::Probabilities => (vec![n, k], DType::F64),
        Out::Classes { int: true } => (vec![n], DType::I64),
        _ => (vec![n], DType::F64),
    };
    let result = GpuChunk::alloc(&device, dtype, &shape)?;
    let table = f64s(&device, &[coef, if classes.is_empty() { &[0.0] } else { classes }].concat())?;
    let g = tiled_grid(&device, &kern, n, shared, tr);
    let args = [
        KArg::U64(x.ptr()),
        KArg::U64(n as u64),
        KArg::U64(table.ptr()),
        KArg::U64(table.ptr() + 8 * coef.len() as u64),
        KArg::U64(result.ptr()),
    ];
    device.launch(&kern, launch(g, shared), &args)?;
    Ok(Some(Value::Gpu(Arc::new(result))))
}

const LINEAR_OUT: &str = r#"
extern "C" __global__ void brisk_linear_out(const XT* __restrict__ x, u64 n, const double* __restrict__ coef,
    const double* __restrict__ classes, unsigned char* __restrict__ out) {
  extern __shared__ __align__(16) unsigned char smem[];
  double* w = (double*)smem;
  double* cl = w + M * (P + 1);
  XT* tl = (XT*)(cl + KC);
  const int tid = threadIdx.x;
  for (int i = tid; i < M * (P + 1); i += TPB) w[i] = coef[i];
  for (int i = tid; i < KC; i += TPB) cl[i] = classes[i];
  double* od = (double*)out;
  long long* oi = (long long*)out;
  for (u64 tile = (u64)blockIdx.x * TR; tile < n; tile += (u64)gridDim.x * TR) {
    const unsigned rows = n - tile < TR ? (unsigned)(n - tile) : TR;
    __syncthreads();
    stage(x, tile, rows, tl);
    __syncthreads();
    if (tid >= rows) continue;
    const u64 r = tile + tid;
    const XT* row = tl + tid * PS;
    double z[M];
    #pragma unroll
    for (int c = 0; c < M; ++c) z[c] = 0.0;
    for (int j = 0; j < P; ++j) {
      const double v = (double)row[j];
      #pragma unroll
      for (int c = 0; c < M; ++c) z[c] += v * w[c * (P + 1) + j];
    }
    #pragma unroll
    for (int c = 0; c < M; ++c) z[c] += w[c * (P + 1) + P];
#if MODE == 0
    #pragma unroll
    for (int c = 0; c < M; ++c) od[r * M + c] = z[c];
#elif MODE == 4
    od[r] = exp(z[0]);
#else
    double pr[KC];
    if (M == 1) {
      const double zi = z[0];
      const double s = zi >= 0.0 ? 1.0 / (1.0 + exp(-zi)) : exp(zi) / (1.0 + exp(zi));
      pr[0] = 1.0 - s;
      pr[1] = s;
    } else {
      double top = -INFINITY;
      #pragma unroll
      for (int c = 0; c < M; ++c) top = fmax(top, z[c]);
      double sum = 0.0;
      #pragma unroll
      for (int c = 0; c < M; ++c) { pr[c] = exp(z[c] - top); sum += pr[c]; }
      #pragma unroll
      for (int c = 0; c < M; ++c) pr[c] = pr[c] / sum;
    }
#if MODE == 1
    #pragma unroll
    for (int c = 0; c < KC; ++c) od[r * KC + c] = pr[c];
#else
    int b = 0;
    #pragma unroll
    for (int c = 1; c < KC; ++c) if (pr[c] > pr[b]) b = c;
#if MODE == 3
    oi[r] = (long long)cl[b];
#else
    od[r] = cl[b];
#endif
#endif
#endif
  }
}
"#;

// ---- k-means‖ --------------------------------------------------------------

/// Candidates a thread block holds in shared memory at once.
const CHUNK: usize = 32;

/// A k-means‖ round on a block (`InitRound::run`'s numbers): each row's
/// nearest candidate so far is brought up to date on the device, where the
/// state stays (n × 2); the rows are drawn on the host from the state's
/// distances with the CPU path's generator, so a seed draws the same rows
/// on either, and only the drawn rows are gathered and brought over.
fn init_round(
    x: &GpuChunk,
    state: Option<&GpuChunk>,
    step: &InitRound<'_>,
) -> Result<Option<Value>, ArrayError> {
    let (n, p) = (x.shape()[0], x.shape()[1]);
    let kn = step.new.len() / p.max(1);
    if p * CHUNK * 8 + TPB * 8 > SHARED {
        return Ok(None);
    }
    if let Some(s) = state
        && s.shape() != [n, 2]
    {
        return Err(ArrayError::Shape(format!(
            "kmeans-init: a state of shape {:?} for a block of {n} rows",
            s.shape()
        )));
    }
    let device = x.device().clone();
    let mut src = header(x.dtype(), p, &[("KC", CHUNK)]);
    src.push_str(INIT);
    let kern = device.kernel(&src, "brisk_init_round")?;
    let sum = device.kernel(&src, "brisk_ml_sum")?;
    let g = grid(&device, &kern, n, 0);
    let cand = f64s(&device, if step.new.is_empty() { &[0.0] } else { step.new })?;
    let out = GpuChunk::alloc(&device, DType::F64, &[n, 2])?;
    let part = GpuChunk::alloc(&device, DType::F64, &[g])?;
    let cost = GpuChunk::alloc(&device, DType::F64, &[1])?;
    let u = |c: &GpuChunk| KArg::U64(c.ptr());
    let args = [
        u(x),
        KArg::U64(n as u64),
        u(&cand),
        KArg::U64(kn as u64),
        KArg::F64(step.first as f64),
        KArg::U64(state.map_or(0, GpuChunk::ptr)),
        u(&out),
        u(&part),
    ];
    device.launch(&kern, launch(g, 0), &args)?;
    sum_groups(&device, &sum, &part, g, 1, 1, cost.ptr())?;
    let cost = download(&cost)?[0];
    let mut drawn = vec![cost, p as f64];
    if let Some((l, phi)) = step.sample {
        let r = super::kernels::rng(step.seed, step.block, step.round);
        let rows = match draw(&out, n, r.state(), l, phi)? {
            Some(rows) => rows,
            // More rows drawn than the device keeps: the draws on the host.
            None => {
                let st = download(&out)?;
                let mut r = r;
                (0..n)
                    .filter(|&i| {
                        let u: f64 = r.random();
                        phi > 0.0 && u < l * st[2 * i] / phi
                    })
                    .map(|i| i as i64)
                    .collect()
            }
        };
        if !rows.is_empty() {
            drawn.extend(gather(x, &rows)?);
        }
    }
    Ok(Some(Value::list(vec![Value::Gpu(Arc::new(out)), Value::array(packed(drawn))])))
}

/// Rows drawn at most, kept on the device per round and block.
const DRAW_CAP: usize = 65536;

/// The rows a k-means‖ round draws from a block's state, each with
/// probability min(1, ℓ·d²/φ), with the very numbers the CPU path's
/// generator gives (`Pcg64Mcg` from `state`: draw i takes the state
/// advanced i + 1 times, jumped to by powers of the multiplier, and the
/// same 53-bit float), so a seed draws the same rows on either; in row
/// order. `None` when more than `DRAW_CAP` are drawn.
fn draw(
    state: &GpuChunk,
    n: usize,
    seed_state: u128,
    l: f64,
    phi: f64,
) -> Result<Option<Vec<i64>>, ArrayError> {
    let device = state.device().clone();
    let src = format!("{PRELUDE}{DRAW}");
    let kern = device.kernel(&src, "brisk_init_draw")?;
    // [count, rows...]
    let found = zeros(&device, DType::I64, DRAW_CAP + 1)?;
    let args = [
        KArg::U64(state.ptr()),
        KArg::U64(n as u64),
        KArg::U64(seed_state as u64),
        KArg::U64((seed_state >> 64) as u64),
        KArg::F64(l),
        KArg::F64(phi),
        KArg::U64(found.ptr()),
        KArg::U64(DRAW_CAP as u64),
    ];
    let g = (device.sm_count() as usize * 4).min(n.div_ceil(TPB)).max(1);
    device.launch(&kern, launch(g, 0), &args)?;
    let v: Vec<i64> = found.to_host()?.cast::<i64>().iter().copied().collect();
    let count = v.first().copied().unwrap_or(0) as usize;
    if count > DRAW_CAP {
        return Ok(None);
    }
    let mut rows = v[1..1 + count].to_vec();
    rows.sort_unstable();
    Ok(Some(rows))
}

const DRAW: &str = r#"
/// 128-bit unsigned integers as two halves, multiplied modulo 2^128 (NVRTC
/// takes __int128 only behind a flag).
struct u128p { u64 lo, hi; };
__device__ __forceinline__ u128p mul128(u128p a, u128p b) {
  u128p r;
  r.lo = a.lo * b.lo;
  r.hi = __umul64hi(a.lo, b.lo) + a.lo * b.hi + a.hi * b.lo;
  return r;
}
__device__ __forceinline__ u128p pcg_mult() { u128p m; m.hi = 0x2360ED051FC65DA4ULL; m.lo = 0x4385DF649FCCF645ULL; return m; }
__device__ u128p pcg_power(u64 e) {
  u128p acc; acc.lo = 1; acc.hi = 0;
  u128p cur = pcg_mult();
  while (e) { if (e & 1) acc = mul128(acc, cur); cur = mul128(cur, cur); e >>= 1; }
  return acc;
}
__device__ __forceinline__ u64 pcg_output(u128p s) {
  const unsigned rot = (unsigned)(s.hi >> 58);
  const u64 x = s.hi ^ s.lo;
  return (x >> rot) | (x << ((64 - rot) & 63));
}
/// Each thread draws a run of rows in order; the drawn rows are listed
/// after found[0], their count.
extern "C" __global__ void brisk_init_draw(const double* __restrict__ state, u64 n, u64 s_lo, u64 s_hi,
    double l, double phi, unsigned long long* __restrict__ found, u64 cap) {
  const u64 threads = (u64)gridDim.x * blockDim.x;
  const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  const u64 per = (n + threads - 1) / threads;
  const u64 a = t * per;
  const u64 b = a + per < n ? a + per : n;
  if (a >= b) return;
  const u128p m = pcg_mult();
  u128p s0; s0.lo = s_lo; s0.hi = s_hi;
  u128p s = mul128(s0, pcg_power(a));
  for (u64 r = a; r < b; ++r) {
    s = mul128(s, m);
    const double u = (double)(pcg_output(s) >> 11) * (1.0 / 9007199254740992.0);
    if (phi > 0.0 && u < l * state[2 * r] / phi) {
      const unsigned long long k = atomicAdd(found, 1ULL);
      if (k < cap) found[1 + k] = r;
    }
  }
}
"#;

/// The rows `rows` of a block, as f64 values row after row.
fn gather(x: &GpuChunk, rows: &[i64]) -> Result<Vec<f64>, ArrayError> {
    let (n, p) = (x.shape()[0], x.shape()[1]);
    let device = x.device().clone();
    let src = format!(
        "{}typedef {} XT;
extern \"C\" __global__ void brisk_gather_rows(const XT* __restrict__ x, const long long* __restrict__ rows, u64 m, u64 p, double* __restrict__ out) {{
  for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < m * p; e += (u64)gridDim.x * blockDim.x)
    out[e] = (double)x[(u64)rows[e / p] * p + e % p];
}}
",
        PRELUDE,
        store_type(x.dtype())
    );
    if let Some(bad) = rows.iter().find(|&&r| r < 0 || r as usize >= n) {
        return Err(ArrayError::Value(format!("row {bad} of a block of {n} rows")));
    }
    let kern = device.kernel(&src, "brisk_gather_rows")?;
    let idx = GpuChunk::from_host(&Chunk::from_vec(&[rows.len()], rows.to_vec())?, &device)?;
    let out = GpuChunk::alloc(&device, DType::F64, &[rows.len() * p])?;
    let args = [
        KArg::U64(x.ptr()),
        KArg::U64(idx.ptr()),
        KArg::U64(rows.len() as u64),
        KArg::U64(p as u64),
        KArg::U64(out.ptr()),
    ];
    device.launch(&kern, Launch::linear(&device, rows.len() * p, 256), &args)?;
    download(&out)
}

const INIT: &str = r#"
extern "C" __global__ void brisk_init_round(const XT* __restrict__ x, u64 n, const double* __restrict__ cand, u64 kn,
    double first, const double* __restrict__ prev, double* __restrict__ state, double* __restrict__ part) {
  __shared__ double cs[KC * P];
  __shared__ double cn[KC];
  __shared__ double red[TPB];
  const int tid = threadIdx.x;
  double cost = 0.0;
  for (u64 tile = (u64)blockIdx.x * TPB; tile < n; tile += (u64)gridDim.x * TPB) {
    const u64 r = tile + tid;
    const XT* row = x + r * P;
    // The nearest candidate by the GEMM form (as the CPU kernel), chunk
    // by chunk of the shared table, then its exact distance.
    double best = INFINITY;
    long long bi = -1;
    for (u64 c0 = 0; c0 < kn; c0 += KC) {
      const int kc = kn - c0 < KC ? (int)(kn - c0) : KC;
      __syncthreads();
      for (int i = tid; i < kc * P; i += TPB) cs[i] = cand[c0 * P + i];
      __syncthreads();
      for (int c = tid; c < kc; c += TPB) {
        double q = 0.0;
        for (int j = 0; j < P; ++j) q += cs[c * P + j] * cs[c * P + j];
        cn[c] = q;
      }
      __syncthreads();
      if (r < n) {
        double sp[KC];
        #pragma unroll
        for (int c = 0; c < KC; ++c) sp[c] = 0.0;
        for (int j = 0; j < P; ++j) {
          const double v = (double)row[j];
          #pragma unroll
          for (int c = 0; c < KC; ++c) sp[c] += c < kc ? v * cs[c * P + j] : 0.0;
        }
        for (int c = 0; c < kc; ++c) {
          const double t = cn[c] - 2.0 * sp[c];
          if (t < best) { best = t; bi = (long long)(c0 + c); }
        }
      }
    }
    if (r < n) {
      double d = prev ? prev[2 * r] : INFINITY;
      double c = prev ? prev[2 * r + 1] : -1.0;
      if (bi >= 0) {
        double e = 0.0;
        for (int j = 0; j < P; ++j) { const double t = (double)row[j] - cand[bi * P + j]; e += t * t; }
        if (e < d) { d = e; c = first + (double)bi; }
      }
      state[2 * r] = d;
      state[2 * r + 1] = c;
      cost += d;
    }
  }
  const double total = block_sum(cost, red);
  if (tid == 0) part[blockIdx.x] = total;
}
/// How many rows have each candidate nearest (the k-means‖ weights).
extern "C" __global__ void brisk_count_nearest(const double* __restrict__ state, u64 n, u64 m, double* __restrict__ counts) {
  extern __shared__ unsigned int cnt[];
  for (u64 i = threadIdx.x; i < m; i += blockDim.x) cnt[i] = 0;
  __syncthreads();
  for (u64 r = (u64)blockIdx.x * blockDim.x + threadIdx.x; r < n; r += (u64)gridDim.x * blockDim.x) {
    const double c = state[2 * r + 1];
    if (c >= 0.0 && c < (double)m) atomicAdd(&cnt[(u64)c], 1u);
  }
  __syncthreads();
  for (u64 i = threadIdx.x; i < m; i += blockDim.x) if (cnt[i]) atomicAdd(&counts[i], (double)cnt[i]);
}
"#;

/// `CountNearest`: the candidates' counts from a round state on the device.
fn count_nearest(s: &GpuChunk, m: usize) -> Result<Option<Vec<f64>>, ArrayError> {
    if s.ndim() != 2 || s.shape()[1] != 2 || m * 4 > SHARED {
        return Ok(None);
    }
    let n = s.shape()[0];
    let device = s.device().clone();
    let mut src = header(DType::F64, 2, &[("KC", CHUNK)]);
    src.push_str(INIT);
    let kern = device.kernel(&src, "brisk_count_nearest")?;
    let counts = zeros(&device, DType::F64, m.max(1))?;
    let mut l = Launch::linear(&device, n, 256);
    l.shared = (m * 4) as u32;
    let args = [KArg::U64(s.ptr()), KArg::U64(n as u64), KArg::U64(m as u64), KArg::U64(counts.ptr())];
    device.launch(&kern, l, &args)?;
    let mut v = download(&counts)?;
    v.truncate(m);
    Ok(Some(v))
}

#[cfg(test)]
mod tests {
    //! Each device kernel against the CPU kernel on the same block. Without
    //! a GPU they say so and pass (CI), unless `BRISK_REQUIRE_GPU` is set.
    use super::*;
    use rand::{RngExt, SeedableRng};

    fn device() -> Option<Arc<Device>> {
        match crate::array::gpu::default_device() {
            Ok(d) => Some(d),
            Err(e) => {
                assert!(std::env::var_os("BRISK_REQUIRE_GPU").is_none(), "a GPU was required: {e}");
                eprintln!("skipped: {e}");
                None
            }
        }
    }

    /// Rows around `k` centres, as f64 or f32.
    fn blobs(n: usize, p: usize, k: usize, t: DType, seed: u64) -> Chunk {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
        let centres: Vec<f64> = (0..k * p).map(|_| rng.random_range(-10.0..10.0)).collect();
        let v: Vec<f64> = (0..n)
            .flat_map(|i| {
                let c = i % k.max(1);
                (0..p).map(|j| centres[c * p + j] + rng.random_range(-1.0..1.0)).collect::<Vec<_>>()
            })
            .collect();
        Chunk::from_vec(&[n, p], v).expect("blobs").astype(t)
    }

    fn on_device(c: &Chunk, d: &Arc<Device>) -> GpuChunk {
        GpuChunk::from_host(c, d).expect("upload")
    }

    fn cpu(op: &MlOp, args: &[&Chunk]) -> Vec<f64> {
        let vals: Vec<Value> = args.iter().map(|c| Value::array((*c).clone())).collect();
        host(op.run(&vals).expect("cpu"))
    }

    fn gpu(op: &MlOp, args: &[&GpuChunk]) -> Vec<f64> {
        let blocks: Vec<GpuChunk> = args.iter().map(|g| (*g).clone()).collect();
        host(run(op, &blocks).expect("gpu").expect("a device kernel"))
    }

    /// Some rows of `x`, as f64 values in C order.
    fn rows(x: &Chunk, keep: Vec<usize>) -> Vec<f64> {
        host(Value::array(crate::array::shape::take_rows(x, &keep).expect("rows")))
    }

    fn host(v: Value) -> Vec<f64> {
        match v {
            Value::Array(c) => c.cast::<f64>().iter().copied().collect(),
            Value::Gpu(g) => g.to_host().expect("download").cast::<f64>().iter().copied().collect(),
            other => panic!("not an array: {}", other.type_name()),
        }
    }

    fn close(a: &[f64], b: &[f64], tol: f64, what: &str) {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            let ok = x == y || (x - y).abs() <= tol * (1.0 + y.abs());
            assert!(ok, "{what}[{i}]: GPU {x} vs CPU {y}");
        }
    }

    #[test]
    fn lloyd_steps_match_the_cpu_kernel() {
        let Some(d) = device() else { return };
        // (rows, features, clusters): one thread block and the
        // candidates-for-all path; many blocks (the cut); wide rows (two
        // columns per thread); a 1-feature block.
        for (n, p, k, t) in [
            (300, 7, 5, DType::F64),
            (100_000, 50, 16, DType::F64),
            (60_000, 50, 16, DType::F32),
            (5_000, 300, 4, DType::F64),
            (2_000, 1, 3, DType::F32),
        ] {
            let x = blobs(n, p, k, t, n as u64);
            let centers = Arc::new(rows(&x, (0..k).collect()));
            let op = MlOp::Lloyd { centers: centers.clone(), k };
            let want = LloydStat::unpack(&cpu(&op, &[&x])).expect("cpu stat");
            let got = LloydStat::unpack(&gpu(&op, &[&on_device(&x, &d)])).expect("gpu stat");
            let what = format!("lloyd {n}×{p} k={k} {t}");
            close(&got.sums, &want.sums, 1e-10, &what);
            assert_eq!(got.counts, want.counts, "{what}: counts");
            close(&[got.inertia], &[want.inertia], 1e-10, &what);
            assert_eq!(got.far.len(), want.far.len(), "{what}: far rows");
            for (g, w) in got.far.iter().zip(&want.far) {
                close(&[g.0], &[w.0], 1e-10, &what);
                assert_eq!(g.1, w.1, "{what}: a far row's label");
                close(&g.2, &w.2, 0.0, &what);
            }
            let labels = MlOp::Labels { centers: centers.clone(), k };
            assert_eq!(gpu(&labels, &[&on_device(&x, &d)]), cpu(&labels, &[&x]), "{what}: labels");
            let dist = MlOp::Distances { centers, k };
            close(&gpu(&dist, &[&on_device(&x, &d)]), &cpu(&dist, &[&x]), 1e-12, &what);
        }
    }

    #[test]
    fn a_block_of_equal_rows_finds_its_far_rows_on_the_host() {
        let Some(d) = device() else { return };
        let x = Chunk::from_vec(&[20_000, 2], vec![1.0; 40_000]).expect("x");
        let op = MlOp::Lloyd { centers: Arc::new(vec![0.0, 0.0, 5.0, 5.0]), k: 2 };
        assert_eq!(gpu(&op, &[&on_device(&x, &d)]), cpu(&op, &[&x]));
    }

    #[test]
    fn moments_and_comoments_match_the_cpu_kernels() {
        let Some(d) = device() else { return };
        for (n, p, t) in [(1_000, 3, DType::F64), (70_000, 50, DType::F32), (3_000, 600, DType::F64)] {
            let mut x = blobs(n, p, 3, t, 7);
            // A column offset by 1e6 keeps its variance; a NaN is skipped.
            let mut v: Vec<f64> = x.cast::<f64>().iter().copied().collect();
            v.iter_mut().step_by(p).for_each(|e| *e += 1e6);
            v[p.min(2) - 1] = f64::NAN;
            x = Chunk::from_vec(&[n, p], v).expect("x").astype(t);
            let what = format!("moments {n}×{p} {t}");
            let g = on_device(&x, &d);
            close(&gpu(&MlOp::Moments, &[&g]), &cpu(&MlOp::Moments, &[&x]), 1e-10, &what);
            let clean = blobs(n, p, 3, t, 8);
            let y = Chunk::from_vec(&[n], (0..n).map(|i| (i % 7) as f64).collect()).expect("y");
            let (gc, gy) = (on_device(&clean, &d), on_device(&y, &d));
            let op = MlOp::CoMoments { with_y: false };
            close(&gpu(&op, &[&gc]), &cpu(&op, &[&clean]), 1e-10, &what);
            let op = MlOp::CoMoments { with_y: true };
            close(&gpu(&op, &[&gc, &gy]), &cpu(&op, &[&clean, &y]), 1e-10, &what);
        }
    }

    #[test]
    fn logistic_losses_match_the_cpu_kernel() {
        let Some(d) = device() else { return };
        for (n, p, m, t) in [
            (1_000, 5, 1, DType::F64),
            (50_000, 50, 1, DType::F32),
            (20_000, 20, 3, DType::F64),
            (3_000, 300, 1, DType::F64),
        ] {
            let x = blobs(n, p, 2, t, 3);
            let classes: Vec<f64> = if m == 1 { vec![-1.0, 4.0] } else { (0..m).map(|c| c as f64).collect() };
            let y: Vec<f64> = (0..n).map(|i| classes[(i * 7 + i / 3) % classes.len()]).collect();
            let y = Chunk::from_vec(&[n], y).expect("y");
            let coef: Vec<f64> = (0..m * (p + 1)).map(|i| ((i * 37 % 11) as f64 - 5.0) / 40.0).collect();
            let (coef, classes) = (Arc::new(coef), Arc::new(classes));
            let op = MlOp::Logistic { coef: coef.clone(), m, classes: classes.clone() };
            let what = format!("logistic {n}×{p} m={m} {t}");
            for yy in [y.clone(), y.astype(DType::F32)] {
                let (gx, gy) = (on_device(&x, &d), on_device(&yy, &d));
                close(&gpu(&op, &[&gx, &gy]), &cpu(&op, &[&x, &yy]), 1e-10, &what);
            }
            if m == 1 {
                // The Poisson loss through the same kernel, on counts.
                let counts = Chunk::from_vec(&[n], (0..n).map(|i| (i % 5) as f64).collect()).expect("counts");
                let w: Vec<f64> =
                    (0..p + 1).map(|i| ((i * 13 % 7) as f64 - 3.0) / (20.0 * p as f64)).collect();
                let op = MlOp::Poisson { coef: Arc::new(w) };
                let (gx, gy) = (on_device(&x, &d), on_device(&counts, &d));
                close(&gpu(&op, &[&gx, &gy]), &cpu(&op, &[&x, &counts]), 1e-10, &format!("poisson {what}"));
                let pred = MlOp::PoissonPredict {
                    coef: Arc::new((0..p + 1).map(|i| i as f64 / (50.0 * p as f64)).collect()),
                };
                close(&gpu(&pred, &[&gx]), &cpu(&pred, &[&x]), 1e-12, &format!("poisson predict {what}"));
            }
            // The fitted model's outputs: scores, probabilities, labels.
            let gx = on_device(&x, &d);
            for out in [
                MlOp::Decision { coef: coef.clone(), m },
                MlOp::Proba { coef: coef.clone(), m },
                MlOp::Predict { coef: coef.clone(), m, classes: classes.clone(), int: false },
                MlOp::Predict { coef: coef.clone(), m, classes: classes.clone(), int: true },
            ] {
                close(&gpu(&out, &[&gx]), &cpu(&out, &[&x]), 1e-12, &format!("{} {what}", out.name()));
            }
            // A label that is not a class is refused, as on the host.
            let mut bad: Vec<f64> = y.cast::<f64>().iter().copied().collect();
            bad[n / 2] = 9.5;
            let bad = Chunk::from_vec(&[n], bad).expect("bad");
            let err = run(&op, &[on_device(&x, &d), on_device(&bad, &d)]).expect_err("a bad label");
            assert!(err.to_string().contains("the label 9.5 is not one of the classes"), "{err}");
        }
    }

    fn parts(v: Value) -> Vec<Vec<f64>> {
        match v {
            Value::List(items) => items.iter().map(|x| host(x.clone())).collect(),
            other => panic!("not a list: {}", other.type_name()),
        }
    }

    #[test]
    fn init_rounds_and_their_weights_match_the_cpu_kernels() {
        let Some(d) = device() else { return };
        // 40 candidates: two chunks of the shared table.
        for (n, p, t) in [(3_000, 5, DType::F64), (50_000, 50, DType::F32)] {
            let x = blobs(n, p, 6, t, 11);
            let first = rows(&x, vec![0]);
            let more = rows(&x, (100..140).collect());
            let r0 =
                MlOp::InitRound { new: Arc::new(first), first: 0, sample: None, seed: 5, round: 0, block: 2 };
            let c0 = parts(r0.run(&[Value::array(x.clone())]).expect("cpu round"));
            let gx = on_device(&x, &d);
            let g0 = parts(run(&r0, std::slice::from_ref(&gx)).expect("gpu round").expect("kernel"));
            let what = format!("init {n}×{p} {t}");
            close(&g0[0], &c0[0], 1e-12, &what);
            close(&g0[1], &c0[1], 1e-10, &what);
            let phi = c0[1][0];
            let r1 = MlOp::InitRound {
                new: Arc::new(more),
                first: 1,
                sample: Some((1e5, phi)),
                seed: 5,
                round: 1,
                block: 2,
            };
            let state = Chunk::from_vec(&[n, 2], c0[0].clone()).expect("state");
            let c1 =
                parts(r1.run(&[Value::array(x.clone()), Value::array(state.clone())]).expect("cpu round"));
            let g1 =
                parts(run(&r1, &[gx.clone(), on_device(&state, &d)]).expect("gpu round").expect("kernel"));
            close(&g1[0], &c1[0], 1e-12, &what);
            assert!(c1[1].len() > 2, "{what}: some rows are drawn");
            close(&g1[1], &c1[1], 1e-10, &what);
            let count = MlOp::CountNearest { n: 41 };
            let s1 = Chunk::from_vec(&[n, 2], c1[0].clone()).expect("state");
            assert_eq!(gpu(&count, &[&on_device(&s1, &d)]), cpu(&count, &[&s1]), "{what}: weights");
        }
    }

    /// The draw kernel's arithmetic (128-bit halves, the jump by powers of
    /// the multiplier, the output and the 53-bit float), written again here,
    /// replays the CPU path's generator: checked without a GPU.
    #[test]
    fn the_draw_kernels_arithmetic_replays_the_cpu_generator() {
        type H = (u64, u64);
        fn mul(a: H, b: H) -> H {
            let hi = ((u128::from(a.0) * u128::from(b.0)) >> 64) as u64;
            (
                a.0.wrapping_mul(b.0),
                hi.wrapping_add(a.0.wrapping_mul(b.1)).wrapping_add(a.1.wrapping_mul(b.0)),
            )
        }
        const M: H = (0x4385_DF64_9FCC_F645, 0x2360_ED05_1FC6_5DA4);
        fn power(mut e: u64) -> H {
            let (mut acc, mut cur) = ((1, 0), M);
            while e > 0 {
                if e & 1 == 1 {
                    acc = mul(acc, cur);
                }
                cur = mul(cur, cur);
                e >>= 1;
            }
            acc
        }
        fn output(s: H) -> f64 {
            let rot = (s.1 >> 58) as u32;
            ((s.1 ^ s.0).rotate_right(rot) >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
        }
        let cpu = super::super::kernels::rng(42, 3, 1);
        let s0 = cpu.state();
        let s0 = (s0 as u64, (s0 >> 64) as u64);
        let mut r = cpu;
        let want: Vec<f64> = (0..1000).map(|_| r.random()).collect();
        // A thread starting at row 0, and one starting at row 700.
        let mut s = s0;
        for (i, w) in want.iter().enumerate() {
            s = mul(s, M);
            assert_eq!(output(s), *w, "draw {i}");
        }
        let mut s = mul(s0, power(700));
        for w in &want[700..] {
            s = mul(s, M);
            assert_eq!(output(s), *w);
        }
    }

    /// The kernels' own speed on one block of 2.5M × 50 f32 (run on the
    /// lent GPU with `--ignored --nocapture`): ms per call, download
    /// included.
    #[test]
    #[ignore]
    fn kernel_timings() {
        let Some(d) = device() else { return };
        let p = 50;
        for n in [2_500_000, 1000] {
            let x = on_device(&blobs(n, p, 16, DType::F32, 1), &d);
            let yv: Vec<f64> = (0..n).map(|i| (i % 2) as f64).collect();
            let y = on_device(&Chunk::from_vec(&[n], yv).expect("y"), &d);
            let centers: Vec<f64> = (0..16 * p).map(|i| (i % 13) as f64 - 6.0).collect();
            let coef: Vec<f64> = (0..p + 1).map(|i| (i % 5) as f64 / 10.0 - 0.2).collect();
            let ops = [
                ("lloyd", MlOp::Lloyd { centers: Arc::new(centers.clone()), k: 16 }, false),
                ("labels", MlOp::Labels { centers: Arc::new(centers.clone()), k: 16 }, false),
                (
                    "logistic",
                    MlOp::Logistic { coef: Arc::new(coef), m: 1, classes: Arc::new(vec![0.0, 1.0]) },
                    true,
                ),
                ("comoments", MlOp::CoMoments { with_y: false }, false),
                ("moments", MlOp::Moments, false),
                (
                    "init",
                    MlOp::InitRound {
                        new: Arc::new(centers),
                        first: 0,
                        sample: None,
                        seed: 1,
                        round: 0,
                        block: 0,
                    },
                    false,
                ),
            ];
            for (name, op, with_y) in ops {
                let args = if with_y { vec![x.clone(), y.clone()] } else { vec![x.clone()] };
                let _ = run(&op, &args).expect("warm-up");
                d.synchronize().expect("sync");
                let t0 = std::time::Instant::now();
                for _ in 0..5 {
                    let v = run(&op, &args).expect("run").expect("kernel");
                    d.synchronize().expect("sync");
                    drop(v);
                }
                eprintln!("{n} rows, {name}: {:.3} ms", t0.elapsed().as_secs_f64() * 200.0);
            }
            let t0 = std::time::Instant::now();
            for _ in 0..5 {
                let v = crate::array::gpu::exec::execute(
                    &crate::array::op::ArrayOp::Unique,
                    &[Value::Gpu(Arc::new(y.clone()))],
                    &|_, _| Err(ArrayError::Value("the host path".into())),
                )
                .expect("unique");
                assert_eq!(host(v), [0.0, 1.0]);
            }
            eprintln!("{n} rows, unique: {:.3} ms", t0.elapsed().as_secs_f64() * 200.0);
        }
    }
}
