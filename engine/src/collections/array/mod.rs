//! The lazy chunked array (`dask.array.Array`): metadata (shape, chunks,
//! dtype) known without computing, and one graph layer per operation whose
//! tasks work block by block. Every builder here checks shapes, axes and
//! types up front, so a bad expression fails when it is written, not when
//! it runs.

mod chunks;
mod linalg;
mod reduction;
mod slicing;
mod structure;

use std::sync::Arc;

use crate::array::create::{Dist, block_seed};
use crate::array::elementwise::{BinOp, UnOp, broadcast_shapes, result_dtype, unary_dtype};
use crate::array::shape::AxisSlice;
use crate::array::{ArrayError, ArrayOp, Chunk, DType, Scalar, fmt_shape};
use crate::graph::{Annotations, Key, Layer, LayerRef, Task, Tokenizer};
use crate::ops::{Arg, Func, Op};
use crate::value::Value;

pub use chunks::{AUTO_BYTES, AxisChunks, ChunkSpec, MAX_BLOCKS, normalize_chunks, regular};
pub use linalg::{lstsq, norm, qr, solve, svd, svd_compressed, tensordot};
pub use reduction::reduction;
pub use slicing::{Index, all_blocks, block_at, local_ranges, slice};
pub use structure::{chunk_size_tasks, concatenate, cumsum, histogram, mask, reshape, stack, unique};

/// A lazy n-d array: the layer holding its blocks' tasks and its metadata.
#[derive(Clone, Debug)]
pub struct Array {
    pub layer: LayerRef,
    /// The key name of its blocks: block `(i, j)` is `Key::block(name, [i, j])`.
    pub name: Arc<str>,
    /// Block sizes along each axis.
    pub chunks: Arc<Vec<Vec<usize>>>,
    pub dtype: DType,
    /// The block sizes along axis 0 are not known until computed (after a
    /// boolean mask or `unique`, Dask's NaN chunks); `chunks[0]` then holds
    /// zeros, one per block.
    pub unknown: bool,
}

/// One side of an elementwise expression.
#[derive(Clone, Debug)]
pub enum Operand {
    Array(Array),
    Scalar(Scalar),
}

/// What every builder needs from the session: annotations for new tasks.
#[derive(Clone, Debug, Default)]
pub struct Ctx {
    pub annotations: Option<Arc<Annotations>>,
}

impl Array {
    /// Refuse `op` on an array whose chunk sizes are unknown, as Dask does.
    pub fn known(&self, op: &str) -> Result<(), ArrayError> {
        if self.unknown {
            return Err(ArrayError::Value(format!(
                "{op} needs the array's chunk sizes, which are unknown (after a boolean mask or unique); call x.compute_chunk_sizes() first"
            )));
        }
        Ok(())
    }

    pub fn shape(&self) -> Vec<usize> {
        self.chunks.iter().map(|c| c.iter().sum()).collect()
    }

    pub fn ndim(&self) -> usize {
        self.chunks.len()
    }

    pub fn size(&self) -> usize {
        self.shape().iter().product()
    }

    pub fn nbytes(&self) -> usize {
        self.size() * self.dtype.itemsize()
    }

    pub fn numblocks(&self) -> Vec<usize> {
        self.chunks.iter().map(Vec::len).collect()
    }

    /// The largest block's shape (Dask's `chunksize`).
    pub fn chunksize(&self) -> Vec<usize> {
        self.chunks.iter().map(|c| c.iter().copied().max().unwrap_or(0)).collect()
    }

    pub fn nblocks(&self) -> usize {
        self.numblocks().iter().product()
    }

    pub fn block_key(&self, index: &[usize]) -> Key {
        block(&self.name, index)
    }

    /// Every block index, in C order.
    pub fn block_indices(&self) -> Vec<Vec<usize>> {
        grid(&self.numblocks())
    }

    /// The tasks of this array's own layer (not those it reads).
    pub fn ntasks(&self) -> usize {
        self.layer.tasks.len()
    }

    /// This array with its block lengths along axis 0 now known
    /// (`compute_chunk_sizes`), one per block.
    pub fn with_chunk_sizes(&self, sizes: Vec<usize>) -> Result<Array, ArrayError> {
        if sizes.len() != self.chunks[0].len() {
            return Err(ArrayError::Value(format!(
                "{} chunk sizes for {} blocks along axis 0",
                sizes.len(),
                self.chunks[0].len()
            )));
        }
        let mut chunks = self.chunks.as_ref().clone();
        chunks[0] = sizes;
        Ok(Array { chunks: Arc::new(chunks), unknown: false, ..self.clone() })
    }
}

impl super::Collection for Array {
    fn partitions(&self) -> (LayerRef, Vec<Key>) {
        (self.layer.clone(), self.block_indices().iter().map(|i| self.block_key(i)).collect())
    }

    fn finalize(&self) -> (LayerRef, Key) {
        finalize(self)
    }

    /// The blocks keep their keys (they are named after the array), so the
    /// persisted array is the same array without tasks.
    fn persisted(&self, _keys: Vec<Key>, futures: Vec<crate::client::Future>) -> Array {
        Array { layer: super::held_layer(self.name.clone(), futures), ..self.clone() }
    }
}

/// Every index of a grid, in C order.
pub fn grid(numblocks: &[usize]) -> Vec<Vec<usize>> {
    let total: usize = numblocks.iter().product();
    let mut out = Vec::with_capacity(total);
    if total == 0 {
        return out;
    }
    let mut idx = vec![0; numblocks.len()];
    loop {
        out.push(idx.clone());
        let mut d = numblocks.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < numblocks[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Where each block starts, along one axis.
pub fn offsets(chunks: &[usize]) -> Vec<usize> {
    let mut acc = 0;
    chunks
        .iter()
        .map(|c| {
            let o = acc;
            acc += c;
            o
        })
        .collect()
}

/// The key of block `idx` of the layer named `name`.
fn block(name: &Arc<str>, idx: &[usize]) -> Key {
    Key::block(name.clone(), &idx.iter().map(|&i| i as u32).collect::<Vec<_>>())
}

/// Feed a chunking to a token: equal expressions cut differently get
/// different keys.
fn token_chunks(t: &mut Tokenizer, chunks: &[Vec<usize>]) {
    for c in chunks {
        t.u64(c.len() as u64);
        for &n in c {
            t.u64(n as u64);
        }
    }
}

fn array_task(ctx: &Ctx, key: Key, op: ArrayOp, args: Vec<Arg>, deps: Vec<Key>) -> Task {
    let mut t = Task::new(key, Op::Call { func: Func::Array(Arc::new(op)), args }, deps);
    t.annotations = ctx.annotations.clone();
    t
}

fn finish(
    name: String,
    tasks: Vec<Task>,
    deps: Vec<LayerRef>,
    chunks: Vec<Vec<usize>>,
    dtype: DType,
) -> Array {
    let name: Arc<str> = Arc::from(name);
    Array {
        layer: Layer::new(name.clone(), tasks, deps),
        name,
        chunks: Arc::new(chunks),
        dtype,
        unknown: false,
    }
}

fn check_shape(shape: &[usize]) -> Result<(), ArrayError> {
    shape.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n)).map(|_| ()).ok_or_else(|| {
        ArrayError::Value(format!(
            "shape {} has more elements than this machine can address",
            fmt_shape(shape)
        ))
    })
}

/// A block-wise creation: `make(block index, block shape, block offsets)`
/// gives each block's op.
fn create(
    ctx: &Ctx,
    token: &mut Tokenizer,
    label: &str,
    shape: &[usize],
    spec: &ChunkSpec,
    dtype: DType,
    make: impl Fn(&[usize], Vec<usize>, Vec<usize>) -> ArrayOp,
) -> Result<Array, ArrayError> {
    check_shape(shape)?;
    let chunks = normalize_chunks(spec, shape, dtype)?;
    token_chunks(token, &chunks);
    let name = token.name(label);
    let key_name: Arc<str> = Arc::from(name.as_str());
    let offs: Vec<Vec<usize>> = chunks.iter().map(|c| offsets(c)).collect();
    let numblocks: Vec<usize> = chunks.iter().map(Vec::len).collect();
    let tasks = grid(&numblocks)
        .into_iter()
        .map(|idx| {
            let bshape = idx.iter().enumerate().map(|(d, &i)| chunks[d][i]).collect();
            let boff = idx.iter().enumerate().map(|(d, &i)| offs[d][i]).collect();
            let op = make(&idx, bshape, boff);
            let key = block(&key_name, &idx);
            array_task(ctx, key, op, vec![], vec![])
        })
        .collect();
    Ok(finish(name, tasks, vec![], chunks, dtype))
}

/// `random(shape)` / `normal(shape)`: seeded, each block its own stream.
pub fn random(
    ctx: &Ctx,
    shape: &[usize],
    spec: &ChunkSpec,
    seed: u64,
    dist: Dist,
    dtype: DType,
) -> Result<Array, ArrayError> {
    if let Dist::Normal { std, .. } = dist
        && (std.is_nan() || std < 0.0)
    {
        return Err(ArrayError::Value(format!("the standard deviation must be non-negative, got {std}")));
    }
    let label = if dist == Dist::Uniform { "random_sample" } else { "normal" };
    let mut t = Tokenizer::new();
    t.str(label).u64(seed).serde(&dist).str(dtype.name());
    create(ctx, &mut t, label, shape, spec, dtype, |idx, bshape, _| {
        let i: Vec<u32> = idx.iter().map(|&x| x as u32).collect();
        ArrayOp::Random { seed: block_seed(seed, &i), shape: bshape, dist, dtype }
    })
}

/// `full(shape, v)`, `zeros`, `ones`.
pub fn full(
    ctx: &Ctx,
    shape: &[usize],
    spec: &ChunkSpec,
    value: Scalar,
    dtype: DType,
) -> Result<Array, ArrayError> {
    let mut t = Tokenizer::new();
    t.str("full").serde(&value).str(dtype.name());
    create(ctx, &mut t, "full", shape, spec, dtype, |_, bshape, _| ArrayOp::Full {
        shape: bshape,
        value,
        dtype,
    })
}

/// `arange(start, stop, step)`.
pub fn arange(
    ctx: &Ctx,
    start: f64,
    stop: f64,
    step: f64,
    spec: &ChunkSpec,
    dtype: DType,
) -> Result<Array, ArrayError> {
    if step == 0.0 || !step.is_finite() || !start.is_finite() || !stop.is_finite() {
        return Err(ArrayError::Value(format!(
            "arange({start}, {stop}, {step}) needs finite bounds and a non-zero step"
        )));
    }
    let count = ((stop - start) / step).ceil().max(0.0);
    if count > (1u64 << 53) as f64 {
        return Err(ArrayError::Value(format!(
            "arange({start}, {stop}, {step}) would have {count:e} elements"
        )));
    }
    let n = count as usize;
    let mut t = Tokenizer::new();
    t.str("arange").u64(start.to_bits()).u64(stop.to_bits()).u64(step.to_bits()).str(dtype.name());
    create(ctx, &mut t, "arange", &[n], spec, dtype, |_, bshape, off| ArrayOp::Arange {
        start: start + off[0] as f64 * step,
        step,
        n: bshape[0],
        dtype,
    })
}

/// `linspace(start, stop, num)`, endpoint included.
pub fn linspace(
    ctx: &Ctx,
    start: f64,
    stop: f64,
    num: usize,
    spec: &ChunkSpec,
    dtype: DType,
) -> Result<Array, ArrayError> {
    let mut t = Tokenizer::new();
    t.str("linspace").u64(start.to_bits()).u64(stop.to_bits()).u64(num as u64).str(dtype.name());
    create(ctx, &mut t, "linspace", &[num], spec, dtype, |_, bshape, off| ArrayOp::Linspace {
        start,
        stop,
        total: num,
        offset: off[0],
        n: bshape[0],
        dtype,
    })
}

/// `eye(n)`: the identity matrix.
pub fn eye(ctx: &Ctx, n: usize, spec: &ChunkSpec, dtype: DType) -> Result<Array, ArrayError> {
    let mut t = Tokenizer::new();
    t.str("eye").u64(n as u64).str(dtype.name());
    create(ctx, &mut t, "eye", &[n, n], spec, dtype, |_, bshape, off| ArrayOp::Eye {
        rows: bshape[0],
        cols: bshape[1],
        k: off[1] as i64 - off[0] as i64,
        dtype,
    })
}

/// `from_array(local)`: cut a local array into blocks (literal tasks).
pub fn from_chunk(ctx: &Ctx, chunk: &Chunk, spec: &ChunkSpec) -> Result<Array, ArrayError> {
    let shape = chunk.shape().to_vec();
    let chunks = normalize_chunks(spec, &shape, chunk.dtype())?;
    let mut t = Tokenizer::new();
    t.str("array").value(&Value::array(chunk.clone()));
    token_chunks(&mut t, &chunks);
    let name = t.name("array");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let offs: Vec<Vec<usize>> = chunks.iter().map(|c| offsets(c)).collect();
    let numblocks: Vec<usize> = chunks.iter().map(Vec::len).collect();
    let mut tasks = Vec::new();
    for idx in grid(&numblocks) {
        let ranges: Vec<(AxisSlice, bool)> = idx
            .iter()
            .enumerate()
            .map(|(d, &i)| (AxisSlice { start: offs[d][i], stop: offs[d][i] + chunks[d][i], step: 1 }, false))
            .collect();
        let piece = crate::array::shape::slice(chunk, &ranges)?.to_contiguous();
        let key = block(&key_name, &idx);
        let mut task = Task::new(key, Op::Literal(Value::array(piece)), vec![]);
        task.annotations = ctx.annotations.clone();
        tasks.push(task);
    }
    Ok(finish(name, tasks, vec![], chunks, chunk.dtype()))
}

/// `from_npy(path)`: the header is read now (shape and type known at
/// once); each block task reads its own rows of the file.
pub fn from_npy(ctx: &Ctx, path: &std::path::Path, spec: &ChunkSpec) -> Result<Array, ArrayError> {
    let header = crate::array::npy::read_header(path)?;
    let dtype = header.stored.dtype();
    let shape = header.shape.clone();
    let chunks = normalize_chunks(spec, &shape, dtype)?;
    // The file's identity in the token: its path, size and modification time.
    let meta = std::fs::metadata(path)
        .map_err(|e| ArrayError::Value(format!("cannot read {}: {e}", path.display())))?;
    let mut t = Tokenizer::new();
    t.str("from-npy").file(path, &meta);
    token_chunks(&mut t, &chunks);
    let name = t.name("from-npy");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let offs: Vec<Vec<usize>> = chunks.iter().map(|c| offsets(c)).collect();
    let numblocks: Vec<usize> = chunks.iter().map(Vec::len).collect();
    let path_text = path.display().to_string();
    let tasks = grid(&numblocks)
        .into_iter()
        .map(|idx| {
            let (r0, r1) = if shape.is_empty() {
                (0, 0)
            } else {
                (offs[0][idx[0]], offs[0][idx[0]] + chunks[0][idx[0]])
            };
            let ranges = idx
                .iter()
                .enumerate()
                .map(|(d, &i)| {
                    if d == 0 {
                        AxisSlice { start: 0, stop: r1 - r0, step: 1 }
                    } else {
                        AxisSlice { start: offs[d][i], stop: offs[d][i] + chunks[d][i], step: 1 }
                    }
                })
                .collect();
            let op =
                ArrayOp::NpyRead { path: path_text.clone(), header: header.clone(), rows: (r0, r1), ranges };
            let key = block(&key_name, &idx);
            array_task(ctx, key, op, vec![], vec![])
        })
        .collect();
    Ok(finish(name, tasks, vec![], chunks, dtype))
}

/// `from_zarr(path)`: a lazy array over a Zarr v3 store; blocks follow the
/// store's chunks unless `spec` says otherwise.
pub fn from_zarr(ctx: &Ctx, path: &std::path::Path, spec: Option<&ChunkSpec>) -> Result<Array, ArrayError> {
    let info = crate::array::zarr::info(path)?;
    let chunks = match spec {
        Some(s) => normalize_chunks(s, &info.shape, info.dtype)?,
        // The store's own chunking, checked like any other spec (a store
        // of tiny chunks would otherwise make a graph of billions of tasks).
        None => {
            let sizes = info.chunk_shape.iter().map(|&c| AxisChunks::Size(c.max(1) as i64)).collect();
            normalize_chunks(&ChunkSpec::PerAxis(sizes), &info.shape, info.dtype)?
        }
    };
    let meta = std::fs::metadata(path.join("zarr.json"))
        .map_err(|e| ArrayError::Value(format!("cannot read {}: {e}", path.display())))?;
    let mut t = Tokenizer::new();
    t.str("from-zarr").file(path, &meta);
    token_chunks(&mut t, &chunks);
    let name = t.name("from-zarr");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let offs: Vec<Vec<usize>> = chunks.iter().map(|c| offsets(c)).collect();
    let numblocks: Vec<usize> = chunks.iter().map(Vec::len).collect();
    let path_text = path.display().to_string();
    let tasks = grid(&numblocks)
        .into_iter()
        .map(|idx| {
            let ranges =
                idx.iter().enumerate().map(|(d, &i)| (offs[d][i], offs[d][i] + chunks[d][i])).collect();
            let key = block(&key_name, &idx);
            array_task(ctx, key, ArrayOp::ZarrRead { path: path_text.clone(), ranges }, vec![], vec![])
        })
        .collect();
    Ok(finish(name, tasks, vec![], chunks, info.dtype))
}

/// `x.to_zarr(path)`: create the store (chunks = the array's block size,
/// after rechunking irregular blocks) and return the write tasks' layer and
/// keys, for the caller to run.
pub fn to_zarr(ctx: &Ctx, a: &Array, path: &std::path::Path) -> Result<(LayerRef, Vec<Key>), ArrayError> {
    a.known("to_zarr")?;
    let size = a.chunksize();
    let shape = a.shape();
    let regular_now = a
        .chunks
        .iter()
        .zip(&size)
        .all(|(c, &s)| c.split_last().is_none_or(|(_, init)| init.iter().all(|&n| n == s)));
    let a = if regular_now {
        a.clone()
    } else {
        rechunk_to(ctx, a, shape.iter().zip(&size).map(|(&n, &s)| regular(n, s)).collect())?
    };
    crate::array::zarr::create(path, &shape, &size, a.dtype)?;
    let name: Arc<str> = Arc::from(
        Tokenizer::new()
            .str("to-zarr")
            .str(&a.name)
            .str(&path.display().to_string())
            .name("store-zarr")
            .as_str(),
    );
    let offs: Vec<Vec<usize>> = a.chunks.iter().map(|c| offsets(c)).collect();
    let path_text = path.display().to_string();
    let mut tasks = Vec::new();
    let mut keys = Vec::new();
    for idx in a.block_indices() {
        let start = idx.iter().enumerate().map(|(d, &i)| offs[d][i]).collect();
        let key = block(&name, &idx);
        tasks.push(array_task(
            ctx,
            key.clone(),
            ArrayOp::ZarrWrite { path: path_text.clone(), start },
            vec![Arg::Dep(0)],
            vec![a.block_key(&idx)],
        ));
        keys.push(key);
    }
    Ok((Layer::new(name.to_string(), tasks, vec![a.layer.clone()]), keys))
}

/// Cut `a` into new blocks. Each output block joins the pieces of the input
/// blocks it overlaps (Dask's simple rechunk; no intermediate stage).
pub fn rechunk(ctx: &Ctx, a: &Array, spec: &ChunkSpec) -> Result<Array, ArrayError> {
    a.known("rechunk")?;
    let shape = a.shape();
    let new = normalize_chunks(spec, &shape, a.dtype)?;
    rechunk_to(ctx, a, new)
}

fn rechunk_to(ctx: &Ctx, a: &Array, new: Vec<Vec<usize>>) -> Result<Array, ArrayError> {
    if new == *a.chunks {
        return Ok(a.clone());
    }
    let mut t = Tokenizer::new();
    t.str("rechunk").str(&a.name);
    token_chunks(&mut t, &new);
    let name = t.name("rechunk");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let old_off: Vec<Vec<usize>> = a.chunks.iter().map(|c| offsets(c)).collect();
    let new_off: Vec<Vec<usize>> = new.iter().map(|c| offsets(c)).collect();
    // For each axis and new block: the old blocks it overlaps, and the
    // range inside each.
    let overlaps: Vec<Vec<Vec<(usize, AxisSlice)>>> = (0..new.len())
        .map(|d| {
            (0..new[d].len())
                .map(|j| {
                    let (lo, hi) = (new_off[d][j], new_off[d][j] + new[d][j]);
                    (0..a.chunks[d].len())
                        .filter_map(|i| {
                            let (olo, ohi) = (old_off[d][i], old_off[d][i] + a.chunks[d][i]);
                            let (s, e) = (lo.max(olo), hi.min(ohi));
                            (s < e || (lo == hi && i == 0)).then_some((
                                i,
                                AxisSlice { start: s.saturating_sub(olo), stop: e.max(s) - olo, step: 1 },
                            ))
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let numblocks: Vec<usize> = new.iter().map(Vec::len).collect();
    let mut tasks = Vec::new();
    for idx in grid(&numblocks) {
        let per_axis: Vec<&Vec<(usize, AxisSlice)>> =
            idx.iter().enumerate().map(|(d, &j)| &overlaps[d][j]).collect();
        let sub: Vec<usize> = per_axis.iter().map(|v| v.len()).collect();
        let mut deps = Vec::new();
        let mut pieces = Vec::new();
        for s in grid(&sub) {
            let old: Vec<usize> = s.iter().enumerate().map(|(d, &k)| per_axis[d][k].0).collect();
            pieces.push(s.iter().enumerate().map(|(d, &k)| per_axis[d][k].1).collect());
            deps.push(a.block_key(&old));
        }
        let args = (0..deps.len()).map(|i| Arg::Dep(i as u32)).collect();
        let key = block(&key_name, &idx);
        tasks.push(array_task(ctx, key, ArrayOp::Rechunk { pieces, numblocks: sub }, args, deps));
    }
    Ok(finish(name, tasks, vec![a.layer.clone()], new, a.dtype))
}

/// Common block boundaries of several chunkings of one axis.
fn refine(chunkings: &[&Vec<usize>]) -> Vec<usize> {
    let mut cuts: Vec<usize> = chunkings.iter().flat_map(|c| offsets(c).into_iter().skip(1)).collect();
    let total: usize = chunkings.first().map(|c| c.iter().sum()).unwrap_or(0);
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut prev = 0;
    for c in cuts.into_iter().chain(std::iter::once(total)) {
        if c > prev {
            out.push(c - prev);
            prev = c;
        }
    }
    if out.is_empty() {
        out.push(0);
    }
    out
}

/// An elementwise operation over arrays and scalars with broadcasting;
/// arrays whose chunks differ are first rechunked to common boundaries
/// (Dask's `unify_chunks`).
pub fn elementwise(
    ctx: &Ctx,
    label: &str,
    op: ArrayOp,
    inputs: &[Operand],
    out_dtype: DType,
) -> Result<Array, ArrayError> {
    let arrays: Vec<&Array> = inputs
        .iter()
        .filter_map(|o| match o {
            Operand::Array(a) => Some(a),
            Operand::Scalar(_) => None,
        })
        .collect();
    let Some(first) = arrays.first() else {
        return Err(ArrayError::Value(format!("{label} needs at least one array")));
    };
    if arrays.iter().any(|a| a.unknown) {
        return elementwise_unknown(ctx, label, op, inputs, &arrays, out_dtype);
    }
    let mut out_shape = first.shape();
    for a in &arrays[1..] {
        out_shape = broadcast_shapes(&out_shape, &a.shape())?;
    }
    let nd = out_shape.len();
    // Output chunks: per axis, the common refinement of the inputs that
    // span it (a broadcast axis of length 1 spans nothing).
    let mut out_chunks = Vec::with_capacity(nd);
    for (d, &n) in out_shape.iter().enumerate() {
        let spanning: Vec<&Vec<usize>> = arrays
            .iter()
            .filter_map(|a| {
                let k = d as isize - (nd - a.ndim()) as isize;
                (k >= 0 && a.shape()[k as usize] == n).then(|| &a.chunks[k as usize])
            })
            .collect();
        out_chunks.push(if spanning.is_empty() { vec![n] } else { refine(&spanning) });
    }
    // Rechunk inputs whose blocks differ from the common ones.
    let mut unified = Vec::with_capacity(inputs.len());
    for o in inputs {
        unified.push(match o {
            Operand::Array(a) => {
                let off = nd - a.ndim();
                let want: Vec<Vec<usize>> = (0..a.ndim())
                    .map(|k| {
                        if a.shape()[k] == out_shape[k + off] {
                            out_chunks[k + off].clone()
                        } else {
                            a.chunks[k].clone()
                        }
                    })
                    .collect();
                Operand::Array(rechunk_to(ctx, a, want)?)
            }
            s => s.clone(),
        });
    }
    let mut t = Tokenizer::new();
    t.str(label).serde(&op);
    for o in &unified {
        match o {
            Operand::Array(a) => t.str(&a.name),
            Operand::Scalar(s) => t.serde(s),
        };
    }
    let name = t.name(label);
    let key_name: Arc<str> = Arc::from(name.as_str());
    let op = Arc::new(op);
    let numblocks: Vec<usize> = out_chunks.iter().map(Vec::len).collect();
    let mut tasks = Vec::with_capacity(numblocks.iter().product());
    for idx in grid(&numblocks) {
        let mut deps = Vec::new();
        let mut args = Vec::with_capacity(unified.len());
        for o in &unified {
            args.push(match o {
                Operand::Array(a) => {
                    let off = nd - a.ndim();
                    let bidx: Vec<usize> = (0..a.ndim())
                        .map(|k| if a.chunks[k].len() == 1 { 0 } else { idx[k + off] })
                        .collect();
                    let key = a.block_key(&bidx);
                    let pos = deps.iter().position(|k| k == &key).unwrap_or_else(|| {
                        deps.push(key);
                        deps.len() - 1
                    });
                    Arg::Dep(pos as u32)
                }
                Operand::Scalar(s) => Arg::Lit(match *s {
                    Scalar::Bool(b) => Value::Bool(b),
                    Scalar::Int(i) => Value::Int(i),
                    Scalar::Float(f) => Value::Float(f),
                }),
            });
        }
        let key = block(&key_name, &idx);
        let mut task = Task::new(key, Op::Call { func: Func::Array(op.clone()), args }, deps);
        task.annotations = ctx.annotations.clone();
        tasks.push(task);
    }
    let layers = unified
        .iter()
        .filter_map(|o| match o {
            Operand::Array(a) => Some(a.layer.clone()),
            Operand::Scalar(_) => None,
        })
        .collect();
    Ok(finish(name, tasks, layers, out_chunks, out_dtype))
}

/// Elementwise work on arrays of unknown chunk sizes: allowed block by
/// block when every array has the same blocks (as `x[m] * 2 + x[m]`).
fn elementwise_unknown(
    ctx: &Ctx,
    label: &str,
    op: ArrayOp,
    inputs: &[Operand],
    arrays: &[&Array],
    out_dtype: DType,
) -> Result<Array, ArrayError> {
    let first = arrays[0];
    if arrays.iter().any(|a| !a.unknown || a.chunks != first.chunks) {
        first.known(label)?;
        arrays.iter().find(|a| a.unknown).map_or(Ok(()), |a| a.known(label))?;
    }
    let mut t = Tokenizer::new();
    t.str(label).serde(&op);
    for o in inputs {
        match o {
            Operand::Array(a) => t.str(&a.name),
            Operand::Scalar(s) => t.serde(s),
        };
    }
    let name = t.name(label);
    let key_name: Arc<str> = Arc::from(name.as_str());
    let op = Arc::new(op);
    let tasks = first
        .block_indices()
        .into_iter()
        .map(|idx| {
            let mut deps = Vec::new();
            let args = inputs
                .iter()
                .map(|o| match o {
                    Operand::Array(a) => {
                        deps.push(a.block_key(&idx));
                        Arg::Dep(deps.len() as u32 - 1)
                    }
                    Operand::Scalar(s) => Arg::Lit(match *s {
                        Scalar::Bool(b) => Value::Bool(b),
                        Scalar::Int(i) => Value::Int(i),
                        Scalar::Float(f) => Value::Float(f),
                    }),
                })
                .collect();
            let key = block(&key_name, &idx);
            let mut task = Task::new(key, Op::Call { func: Func::Array(op.clone()), args }, deps);
            task.annotations = ctx.annotations.clone();
            task
        })
        .collect();
    let mut r = finish(
        name,
        tasks,
        arrays.iter().map(|a| a.layer.clone()).collect(),
        first.chunks.to_vec(),
        out_dtype,
    );
    r.unknown = true;
    Ok(r)
}

fn operand_dtype(o: &Operand) -> (Option<DType>, Option<Scalar>) {
    match o {
        Operand::Array(a) => (Some(a.dtype), None),
        Operand::Scalar(s) => (None, Some(*s)),
    }
}

/// `a op b`.
pub fn binary(ctx: &Ctx, op: BinOp, a: &Operand, b: &Operand) -> Result<Array, ArrayError> {
    let (da, sa) = operand_dtype(a);
    let (db, sb) = operand_dtype(b);
    let out = result_dtype(op, da, db, [sa, sb]).map_err(|e| match e {
        ArrayError::Value(_) => ArrayError::DType(format!("{} needs an array on one side", op.symbol())),
        e => e,
    })?;
    elementwise(ctx, op.name(), ArrayOp::Binary(op), &[a.clone(), b.clone()], out)
}

/// `f(a)`.
pub fn unary(ctx: &Ctx, op: UnOp, a: &Array) -> Result<Array, ArrayError> {
    let out = unary_dtype(op, a.dtype)?;
    elementwise(ctx, op.name(), ArrayOp::Unary(op), &[Operand::Array(a.clone())], out)
}

/// `where(cond, a, b)`.
pub fn where_(ctx: &Ctx, cond: &Operand, a: &Operand, b: &Operand) -> Result<Array, ArrayError> {
    let out = match (operand_dtype(a), operand_dtype(b)) {
        ((Some(x), _), (Some(y), _)) => DType::promote(x, y),
        ((Some(x), _), (None, Some(s))) | ((None, Some(s)), (Some(x), _)) => x.promote_scalar(s),
        ((None, Some(x)), (None, Some(y))) => {
            let c = |s: Scalar| match s {
                Scalar::Bool(_) => DType::Bool,
                Scalar::Int(_) => DType::I64,
                Scalar::Float(_) => DType::F64,
            };
            DType::promote(c(x), c(y))
        }
        _ => DType::F64,
    };
    elementwise(ctx, "where", ArrayOp::Where, &[cond.clone(), a.clone(), b.clone()], out)
}

/// `a.astype(dtype)`.
pub fn astype(ctx: &Ctx, a: &Array, dtype: DType) -> Result<Array, ArrayError> {
    if a.dtype == dtype {
        return Ok(a.clone());
    }
    elementwise(ctx, "astype", ArrayOp::AsType(dtype), &[Operand::Array(a.clone())], dtype)
}

/// `a.transpose(axes)`; no axes reverses them (`a.T`).
pub fn transpose(ctx: &Ctx, a: &Array, axes: Option<&[i64]>) -> Result<Array, ArrayError> {
    if a.ndim() > 1 {
        a.known("transpose")?;
    }
    let nd = a.ndim();
    let perm: Vec<usize> = match axes {
        None => (0..nd).rev().collect(),
        Some(ax) => {
            if ax.len() != nd {
                return Err(ArrayError::Value(format!("axes {ax:?} don't match array of dimension {nd}")));
            }
            let p = ax.iter().map(|&x| crate::array::norm_axis(x, nd)).collect::<Result<Vec<_>, _>>()?;
            let mut seen = p.clone();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() != nd {
                return Err(ArrayError::Value(format!("repeated axis in transpose {ax:?}")));
            }
            p
        }
    };
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(a.clone());
    }
    let mut t = Tokenizer::new();
    t.str("transpose").str(&a.name).serde(&perm);
    let name = t.name("transpose");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let chunks: Vec<Vec<usize>> = perm.iter().map(|&p| a.chunks[p].clone()).collect();
    let numblocks: Vec<usize> = chunks.iter().map(Vec::len).collect();
    let op = Arc::new(ArrayOp::Transpose(perm.clone()));
    let tasks = grid(&numblocks)
        .into_iter()
        .map(|idx| {
            let mut src = vec![0; nd];
            for (i, &p) in perm.iter().enumerate() {
                src[p] = idx[i];
            }
            let key = block(&key_name, &idx);
            let mut task = Task::new(
                key,
                Op::Call { func: Func::Array(op.clone()), args: vec![Arg::Dep(0)] },
                vec![a.block_key(&src)],
            );
            task.annotations = ctx.annotations.clone();
            task
        })
        .collect();
    Ok(finish(name, tasks, vec![a.layer.clone()], chunks, a.dtype))
}

/// How many block products one matmul task sums; longer inner axes are
/// summed from partial products (as a `split_every` for products).
pub const MATMUL_FANIN: usize = 4;

/// `a @ b` for 1-d and 2-d arrays (NumPy's `matmul`/`dot` there): one task
/// per output block, summing the products of the blocks along the
/// contracted axis (whose chunks are unified first).
pub fn matmul(ctx: &Ctx, a: &Array, b: &Array) -> Result<Array, ArrayError> {
    a.known("matmul")?;
    b.known("matmul")?;
    let (sa, sb) = (a.shape(), b.shape());
    if !(1..=2).contains(&a.ndim()) || !(1..=2).contains(&b.ndim()) {
        return Err(ArrayError::Shape(format!(
            "matmul of shapes {} and {}: only 1-d and 2-d arrays are supported",
            fmt_shape(&sa),
            fmt_shape(&sb)
        )));
    }
    let ka = a.ndim() - 1;
    if sa[ka] != sb[0] {
        return Err(ArrayError::Shape(format!(
            "matmul: shapes {} and {} are not aligned: {} (dim {ka}) != {} (dim 0)",
            fmt_shape(&sa),
            fmt_shape(&sb),
            sa[ka],
            sb[0]
        )));
    }
    let k = refine(&[&a.chunks[ka], &b.chunks[0]]);
    let mut ca: Vec<Vec<usize>> = a.chunks.to_vec();
    ca[ka] = k.clone();
    let mut cb: Vec<Vec<usize>> = b.chunks.to_vec();
    cb[0] = k.clone();
    let (a, b) = (rechunk_to(ctx, a, ca)?, rechunk_to(ctx, b, cb)?);
    let dtype = DType::promote(a.dtype, b.dtype);
    let mut t = Tokenizer::new();
    t.str("matmul").str(&a.name).str(&b.name);
    let name = t.name("matmul");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let rows = if a.ndim() == 2 { a.chunks[0].len() } else { 1 };
    let cols = if b.ndim() == 2 { b.chunks[1].len() } else { 1 };
    let nk = k.len();
    let partial_name: Arc<str> = Arc::from(t.name("matmul-partial").as_str());
    // `x @ x.T` and `x.T @ x` are symmetric (NumPy calls BLAS's syrk
    // there): blocks below the diagonal are transposes of those above it,
    // and diagonal blocks are Gram products that multiply one triangle.
    let gram = is_transpose_of(&b, &a) || is_transpose_of(&a, &b);
    let a_key = |i: usize, kk: usize| if a.ndim() == 2 { a.block_key(&[i, kk]) } else { a.block_key(&[kk]) };
    let b_key = |kk: usize, j: usize| if b.ndim() == 2 { b.block_key(&[kk, j]) } else { b.block_key(&[kk]) };
    let mut tasks = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        for j in 0..cols {
            let mut idx = Vec::new();
            if a.ndim() == 2 {
                idx.push(i as u32);
            }
            if b.ndim() == 2 {
                idx.push(j as u32);
            }
            let key = Key::block(key_name.clone(), &idx);
            if gram && i > j {
                let mirror = Key::block(key_name.clone(), &[j as u32, i as u32]);
                tasks.push(array_task(
                    ctx,
                    key,
                    ArrayOp::Transpose(vec![1, 0]),
                    vec![Arg::Dep(0)],
                    vec![mirror],
                ));
                continue;
            }
            // The product of the blocks `lo..hi` along the contracted axis.
            let product = |lo: usize, hi: usize| -> (ArrayOp, Vec<Key>) {
                let mut deps: Vec<Key> = (lo..hi).map(|kk| a_key(i, kk)).collect();
                if gram && i == j {
                    return (ArrayOp::Gram { nk: hi - lo }, deps);
                }
                deps.extend((lo..hi).map(|kk| b_key(kk, j)));
                (ArrayOp::Matmul { nk: hi - lo }, deps)
            };
            let dep_args = |n: usize| (0..n).map(|x| Arg::Dep(x as u32)).collect::<Vec<_>>();
            if nk <= MATMUL_FANIN {
                let (op, deps) = product(0, nk);
                tasks.push(array_task(ctx, key, op, dep_args(deps.len()), deps));
                continue;
            }
            // A long inner axis: partial products over groups of blocks,
            // then their sum, so no task holds every block of a row.
            let mut partials = Vec::new();
            for (g, lo) in (0..nk).step_by(MATMUL_FANIN).enumerate() {
                let (op, gdeps) = product(lo, (lo + MATMUL_FANIN).min(nk));
                let mut pidx = idx.clone();
                pidx.push(g as u32);
                let pkey = Key::block(partial_name.clone(), &pidx);
                tasks.push(array_task(ctx, pkey.clone(), op, dep_args(gdeps.len()), gdeps));
                partials.push(pkey);
            }
            tasks.push(array_task(ctx, key, ArrayOp::AddAll, dep_args(partials.len()), partials));
        }
    }
    let mut chunks = Vec::new();
    if a.ndim() == 2 {
        chunks.push(a.chunks[0].clone());
    }
    if b.ndim() == 2 {
        chunks.push(b.chunks[1].clone());
    }
    Ok(finish(name, tasks, vec![a.layer.clone(), b.layer.clone()], chunks, dtype))
}

/// Whether `b` is `a.T` for a 2-d `a`: its layer transposes `a`'s blocks.
fn is_transpose_of(b: &Array, a: &Array) -> bool {
    a.ndim() == 2
        && b.ndim() == 2
        && b.layer.deps.len() == 1
        && b.layer.deps[0].name == a.layer.name
        && b.layer.tasks.first().is_some_and(|t| {
            matches!(&t.op, Op::Call { func: Func::Array(op), .. }
                if matches!(&**op, ArrayOp::Transpose(p) if p[..] == [1, 0]))
        })
}

/// A function to run on every block.
#[derive(Clone, Debug)]
pub struct BlockFn {
    pub func: Func,
    /// The function's name, for keys (`lambda` for closures).
    pub label: String,
    /// Identifies the function (its source and captured values).
    pub token: String,
}

/// `x.map_blocks(f)`: `f` called on every block; the result has `chunks`
/// (the input's, less `drop_axes`, when `None`) and `dtype`.
pub fn map_blocks(
    ctx: &Ctx,
    a: &Array,
    f: &BlockFn,
    chunks: Option<Vec<Vec<usize>>>,
    drop_axes: &[usize],
    dtype: DType,
) -> Result<Array, ArrayError> {
    for &d in drop_axes {
        if d >= a.ndim() {
            return Err(ArrayError::Axis { axis: d as i64, ndim: a.ndim() });
        }
        if a.chunks[d].len() != 1 {
            return Err(ArrayError::Value(format!(
                "map_blocks: axis {d} is dropped but has {} blocks; rechunk it whole (-1) first",
                a.chunks[d].len()
            )));
        }
    }
    let kept: Vec<usize> = (0..a.ndim()).filter(|d| !drop_axes.contains(d)).collect();
    let chunks_given = chunks.is_some();
    let chunks = chunks.unwrap_or_else(|| kept.iter().map(|&d| a.chunks[d].clone()).collect());
    let numblocks: Vec<usize> = chunks.iter().map(Vec::len).collect();
    let want: Vec<usize> = kept.iter().map(|&d| a.chunks[d].len()).collect();
    if numblocks != want {
        return Err(ArrayError::Value(format!(
            "map_blocks: chunks {chunks:?} give {numblocks:?} blocks, but the input has {want:?}"
        )));
    }
    let mut t = Tokenizer::new();
    t.str("map_blocks").str(&f.label).str(&f.token).str(&a.name).serde(&chunks).serde(&dtype);
    let name = t.name(&f.label);
    let key_name: Arc<str> = Arc::from(name.as_str());
    let tasks = a
        .block_indices()
        .into_iter()
        .map(|idx| {
            let out: Vec<u32> = kept.iter().map(|&d| idx[d] as u32).collect();
            let key = Key::block(key_name.clone(), &out);
            let mut task = Task::new(
                key,
                Op::Call { func: f.func.clone(), args: vec![Arg::Dep(0)] },
                vec![a.block_key(&idx)],
            );
            task.annotations = ctx.annotations.clone();
            task
        })
        .collect();
    let given = chunks_given;
    let mut r = finish(name, tasks, vec![a.layer.clone()], chunks, dtype);
    r.unknown = a.unknown && !given && !drop_axes.contains(&0);
    Ok(r)
}

/// One task joining every block: what `compute` gathers.
pub fn finalize(a: &Array) -> (LayerRef, Key) {
    let name = format!("finalize-{}", Tokenizer::new().str(&a.name).finish());
    let key = Key::new(name.as_str());
    let blocks = a.block_indices();
    let deps: Vec<Key> = blocks.iter().map(|b| a.block_key(b)).collect();
    let args = (0..deps.len()).map(|i| Arg::Dep(i as u32)).collect();
    let task =
        array_task(&Ctx::default(), key.clone(), ArrayOp::Concat { numblocks: a.numblocks() }, args, deps);
    (Layer::new(name, vec![task], vec![a.layer.clone()]), key)
}

#[cfg(test)]
mod tests;
