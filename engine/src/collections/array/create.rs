//! Arrays from nothing or from data: random, full, ranges, `eye`, local
//! arrays, `.npy` files and Zarr stores (and writing Zarr).

use std::sync::Arc;

use super::base::{Array, Ctx, array_task, block, check_shape, finish, grid, offsets, token_chunks};
use super::chunks::{AxisChunks, ChunkSpec, normalize_chunks, regular};
use super::rechunk::rechunk_to;
use crate::array::chunk::Chunk;
use crate::array::create::{Dist, block_seed};
use crate::array::dtype::{DType, Scalar};
use crate::array::error::ArrayError;
use crate::array::op::ArrayOp;
use crate::array::shape::AxisSlice;
use crate::graph::layer::{Layer, LayerRef, files_read};
use crate::graph::task::Task;
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::{Arg, Op};
use crate::staging::Staged;
use crate::value::Value;

/// A block-wise creation: `make(block index, block shape, block offsets)`
/// gives each block's op.
pub(super) fn create(
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
    if ctx.gpu {
        token.str("gpu");
    }
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
    let label = match dist {
        Dist::Uniform => "random_sample",
        Dist::Normal { .. } => "normal",
        Dist::Integers { .. } => "randint",
    };
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
    if ctx.gpu {
        t.str("gpu");
    }
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
        if ctx.gpu {
            tasks.push(array_task(ctx, key, ArrayOp::ToGpu, vec![Arg::Lit(Value::array(piece))], vec![]));
            continue;
        }
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
    if ctx.gpu {
        t.str("gpu");
    }
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
    if ctx.gpu {
        t.str("gpu");
    }
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

/// `x.to_zarr(path)`: create the store in the staging folder of `staged`
/// (chunks = the array's block size, after rechunking irregular blocks)
/// and return the write tasks' layer and keys, for the caller to run and
/// commit. Refused when the array reads a file inside the target.
pub fn to_zarr(ctx: &Ctx, a: &Array, staged: &Staged) -> Result<(LayerRef, Vec<Key>), ArrayError> {
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
    let path = staged.path();
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
    let layer = Layer::new(name.to_string(), tasks, vec![a.layer.clone()]);
    staged
        .refuse_inputs(files_read(std::slice::from_ref(&layer)).iter().map(String::as_str))
        .map_err(|e| ArrayError::Value(e.to_string()))?;
    Ok((layer, keys))
}

/// `da.from_delayed(value, shape, dtype)`: a one-block array whose block
/// is what the task `key` (of `layer`) gives, checked against `shape` and
/// cast to `dtype` when it runs.
pub fn from_delayed(
    ctx: &Ctx,
    layer: LayerRef,
    key: Key,
    shape: Vec<usize>,
    dtype: DType,
) -> Result<Array, ArrayError> {
    check_shape(&shape)?;
    let mut t = Tokenizer::new();
    t.str("from-value").key(&key).serde(&shape).serde(&dtype);
    let name = t.name("from-value");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let zero = vec![0; shape.len()];
    let op = ArrayOp::FromValue { shape: shape.clone(), dtype };
    let task = array_task(ctx, block(&key_name, &zero), op, vec![Arg::Dep(0)], vec![key]);
    let chunks = shape.iter().map(|&n| vec![n]).collect();
    Ok(finish(name, vec![task], vec![layer], chunks, dtype))
}
