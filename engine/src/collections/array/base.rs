//! The lazy array itself: its layer, block names, chunks and type, the
//! task builders every operation shares, and `finalize` (blocks to one array).

use std::sync::Arc;

use crate::array::dtype::DType;
use crate::array::error::ArrayError;
use crate::array::error::fmt_shape;
use crate::array::op::ArrayOp;
pub use crate::array::shape::grid;
use crate::graph::layer::{Layer, LayerRef};
use crate::graph::task::{Annotations, Task};
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::{Arg, Func, Op};

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

/// What every builder needs from the session: annotations for new tasks.
#[derive(Clone, Debug, Default)]
pub struct Ctx {
    pub annotations: Option<Arc<Annotations>>,
    /// New arrays are made on the GPU (`array.backend` is `"gpu"`).
    pub gpu: bool,
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

impl crate::collections::Collection for Array {
    fn partitions(&self) -> (LayerRef, Vec<Key>) {
        (self.layer.clone(), self.block_indices().iter().map(|i| self.block_key(i)).collect())
    }

    fn finalize(&self) -> (LayerRef, Key) {
        finalize(self)
    }

    /// The blocks keep their keys (they are named after the array), so the
    /// persisted array is the same array without tasks.
    fn persisted(&self, _keys: Vec<Key>, futures: Vec<crate::client::Future>) -> Array {
        Array { layer: crate::collections::held_layer(self.name.clone(), futures), ..self.clone() }
    }

    fn result_bytes(&self) -> Option<(u64, String)> {
        if self.unknown {
            return None;
        }
        let shape = self.shape();
        let elems = shape.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64));
        let bytes = crate::memory::times(elems, self.dtype.itemsize() as u64);
        Some((bytes, format!("an array of shape {} {}", fmt_shape(&shape), self.dtype)))
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
pub(crate) fn block(name: &Arc<str>, idx: &[usize]) -> Key {
    Key::block(name.clone(), &idx.iter().map(|&i| i as u32).collect::<Vec<_>>())
}

/// Feed a chunking to a token: equal expressions cut differently get
/// different keys.
pub(super) fn token_chunks(t: &mut Tokenizer, chunks: &[Vec<usize>]) {
    for c in chunks {
        t.u64(c.len() as u64);
        for &n in c {
            t.u64(n as u64);
        }
    }
}

pub(crate) fn array_task(ctx: &Ctx, key: Key, op: ArrayOp, args: Vec<Arg>, deps: Vec<Key>) -> Task {
    // Under the GPU backend, what makes blocks from nothing makes them there.
    let op = match op {
        ArrayOp::Random { .. }
        | ArrayOp::Full { .. }
        | ArrayOp::Arange { .. }
        | ArrayOp::Linspace { .. }
        | ArrayOp::Eye { .. }
        | ArrayOp::NpyRead { .. }
        | ArrayOp::ZarrRead { .. }
            if ctx.gpu =>
        {
            ArrayOp::OnGpu(Box::new(op))
        }
        op => op,
    };
    let mut t = Task::new(key, Op::Call { func: Func::Array(Arc::new(op)), args }, deps);
    t.annotations = ctx.annotations.clone();
    t
}

pub(crate) fn finish(
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

pub(super) fn check_shape(shape: &[usize]) -> Result<(), ArrayError> {
    shape.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n)).map(|_| ()).ok_or_else(|| {
        ArrayError::Value(format!(
            "shape {} has more elements than this machine can address",
            fmt_shape(shape)
        ))
    })
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
