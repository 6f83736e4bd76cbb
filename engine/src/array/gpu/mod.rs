//! GPU chunks: an array block in device memory (`brisk-gpu` buffers), with
//! NumPy's layout rules (strides, so transposes and slices are views, as on
//! the host). Operations on them run as kernels generated from the same
//! operator vocabulary as the CPU path (`expr`), reductions (`reduce`),
//! creation on the device (`create`) and cuBLAS (`linalg`); `exec` decides
//! which runs where. Work is queued on the device's stream and a task ends
//! when its kernels are queued: only bringing a result to the host waits.

pub mod exec;
pub mod expr;

mod create;
mod linalg;
mod reduce;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use brisk_gpu::{Buffer, Device};

use super::chunk::Chunk;
use super::dtype::DType;
use super::error::{ArrayError, fmt_shape};
use super::shape::AxisSlice;

/// An n-d array on one GPU.
#[derive(Clone)]
pub struct GpuChunk {
    buf: Arc<Buffer>,
    dtype: DType,
    shape: Vec<usize>,
    /// Element strides (0 for a broadcast axis).
    strides: Vec<isize>,
    /// Elements from the buffer's start to element `[0, 0, ...]`.
    offset: usize,
}

impl std::fmt::Debug for GpuChunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GpuChunk({} {} on GPU {})",
            fmt_shape(&self.shape),
            self.dtype,
            self.buf.device().ordinal()
        )
    }
}

/// Two GPU chunks are equal when they are the same view of the same memory
/// (comparing contents would mean copying both to the host).
impl PartialEq for GpuChunk {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.buf, &other.buf)
            && self.dtype == other.dtype
            && self.shape == other.shape
            && self.strides == other.strides
            && self.offset == other.offset
    }
}

/// C-order strides of a shape.
pub fn c_strides(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for d in (0..shape.len()).rev() {
        s[d] = acc;
        acc *= shape[d].max(1) as isize;
    }
    s
}

/// The GPU that new chunks go to: the first (several GPUs are spread over
/// by the CUDA cluster, one worker per device).
pub fn default_device() -> Result<Arc<Device>, ArrayError> {
    Ok(brisk_gpu::runtime()?.device(0)?.clone())
}

impl GpuChunk {
    /// A new C-ordered chunk, its memory uninitialised.
    pub fn alloc(device: &Arc<Device>, dtype: DType, shape: &[usize]) -> Result<GpuChunk, ArrayError> {
        let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let bytes = n.and_then(|n| n.checked_mul(dtype.itemsize())).ok_or_else(|| {
            ArrayError::Value(format!("shape {} is too large for one block", fmt_shape(shape)))
        })?;
        let what = || format!("a block of shape {} {dtype}", fmt_shape(shape));
        let buf = Buffer::alloc(device, bytes, &what)?;
        Ok(GpuChunk {
            buf: Arc::new(buf),
            dtype,
            shape: shape.to_vec(),
            strides: c_strides(shape),
            offset: 0,
        })
    }

    /// A host chunk's copy on `device`.
    pub fn from_host(c: &Chunk, device: &Arc<Device>) -> Result<GpuChunk, ArrayError> {
        let data = c.wire_bytes();
        let what = || format!("a block of shape {} {}", fmt_shape(c.shape()), c.dtype());
        let buf = Buffer::upload(device, &data, &what)?;
        Ok(GpuChunk {
            buf: Arc::new(buf),
            dtype: c.dtype(),
            shape: c.shape().to_vec(),
            strides: c_strides(c.shape()),
            offset: 0,
        })
    }

    /// The elements on the host (waits for the kernels queued before).
    pub fn to_host(&self) -> Result<Chunk, ArrayError> {
        let c = self.contiguous()?;
        let mut data = vec![0u8; c.nbytes() as usize];
        c.buf.download_into(&mut data)?;
        Chunk::from_wire_bytes(c.dtype, &c.shape, &data)
    }

    pub fn device(&self) -> &Arc<Device> {
        self.buf.device()
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of element data (views count their logical size).
    pub fn nbytes(&self) -> u64 {
        (self.len() * self.dtype.itemsize()) as u64
    }

    /// The device address of element `[0, 0, ...]`.
    pub fn ptr(&self) -> u64 {
        self.buf.ptr() + (self.offset * self.dtype.itemsize()) as u64
    }

    pub(crate) fn buffer(&self) -> &Arc<Buffer> {
        &self.buf
    }

    /// Whether the elements lie in C order, one after another.
    pub fn is_c_contiguous(&self) -> bool {
        let c = c_strides(&self.shape);
        self.shape.iter().zip(self.strides.iter().zip(&c)).all(|(&n, (&s, &cs))| n <= 1 || s == cs)
    }

    /// Whether the elements lie in Fortran order (a transposed C block).
    pub fn is_f_contiguous(&self) -> bool {
        let mut acc = 1isize;
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            if n > 1 && s != acc {
                return false;
            }
            acc *= n.max(1) as isize;
        }
        true
    }

    /// This chunk, C-ordered in its own memory (itself when it already is).
    pub fn contiguous(&self) -> Result<GpuChunk, ArrayError> {
        if self.is_c_contiguous() && self.offset == 0 && self.buf.len() == self.nbytes() as usize {
            return Ok(self.clone());
        }
        expr::materialize(&expr::Expr::leaf(self.clone()))
    }

    /// The axes reordered (a view).
    pub fn transpose(&self, axes: &[usize]) -> Result<GpuChunk, ArrayError> {
        let mut seen = vec![false; self.ndim()];
        if axes.len() != self.ndim()
            || axes.iter().any(|&a| a >= seen.len() || std::mem::replace(&mut seen[a], true))
        {
            return Err(ArrayError::Value(format!(
                "axes {axes:?} don't match array of dimension {}",
                self.ndim()
            )));
        }
        Ok(GpuChunk {
            shape: axes.iter().map(|&a| self.shape[a]).collect(),
            strides: axes.iter().map(|&a| self.strides[a]).collect(),
            ..self.clone()
        })
    }

    /// Slice every axis, dropping those marked (a view), as `shape::slice`.
    pub fn slice(&self, ranges: &[(AxisSlice, bool)]) -> Result<GpuChunk, ArrayError> {
        if ranges.len() != self.ndim() {
            return Err(ArrayError::Value(format!(
                "{} slices for an array of dimension {}",
                ranges.len(),
                self.ndim()
            )));
        }
        let mut offset = self.offset as isize;
        let (mut shape, mut strides) = (Vec::new(), Vec::new());
        for (d, (r, drop)) in ranges.iter().enumerate() {
            if r.start > r.stop || r.stop > self.shape[d] || r.step == 0 {
                return Err(ArrayError::Value(format!(
                    "slice {}..{} out of range for axis {d} of length {}",
                    r.start, r.stop, self.shape[d]
                )));
            }
            let step = r.step.unsigned_abs() as usize;
            let n = (r.stop - r.start).div_ceil(step);
            let first = if r.step > 0 { r.start } else { r.stop.saturating_sub(1) };
            if n > 0 {
                offset += first as isize * self.strides[d];
            }
            if !drop {
                shape.push(n);
                strides.push(self.strides[d] * r.step as isize);
            }
        }
        if offset < 0 {
            return Err(ArrayError::Value("slice before the start of the block".into()));
        }
        Ok(GpuChunk { shape, strides, offset: offset as usize, ..self.clone() })
    }

    /// The same elements in C order with another shape.
    pub fn reshape(&self, to: &[usize]) -> Result<GpuChunk, ArrayError> {
        if to.iter().product::<usize>() != self.len() {
            return Err(ArrayError::Shape(format!(
                "cannot reshape array of size {} into shape {}",
                self.len(),
                fmt_shape(to)
            )));
        }
        let c = self.contiguous()?;
        Ok(GpuChunk { shape: to.to_vec(), strides: c_strides(to), ..c })
    }

    /// A new axis of length 1 at `axis` (a view).
    pub fn expand_dims(&self, axis: usize) -> Result<GpuChunk, ArrayError> {
        if axis > self.ndim() {
            return Err(ArrayError::Axis { axis: axis as i64, ndim: self.ndim() + 1 });
        }
        let (mut shape, mut strides) = (self.shape.clone(), self.strides.clone());
        shape.insert(axis, 1);
        strides.insert(axis, 0);
        Ok(GpuChunk { shape, strides, ..self.clone() })
    }

    /// Length-1 axes removed (`keepdims: false`).
    pub fn squeeze(&self, axes: &[usize]) -> GpuChunk {
        let (mut shape, mut strides) = (Vec::new(), Vec::new());
        for (d, (&n, &s)) in self.shape.iter().zip(&self.strides).enumerate() {
            if !(axes.contains(&d) && n == 1) {
                shape.push(n);
                strides.push(s);
            }
        }
        GpuChunk { shape, strides, ..self.clone() }
    }
}

/// A GPU chunk travels (to another process, to a spill file) as its host
/// copy, and arrives on the receiver's first GPU.
impl serde::Serialize for GpuChunk {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_host().map_err(serde::ser::Error::custom)?.serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for GpuChunk {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<GpuChunk, D::Error> {
        let c = Chunk::deserialize(d)?;
        let device = default_device().map_err(serde::de::Error::custom)?;
        GpuChunk::from_host(&c, &device).map_err(serde::de::Error::custom)
    }
}

/// Join a grid of blocks (C order, `numblocks` per axis) into one block on
/// the first block's device, each block copied into its region.
pub fn concat_grid(blocks: &[GpuChunk], numblocks: &[usize]) -> Result<GpuChunk, ArrayError> {
    let Some(first) = blocks.first() else {
        return Err(ArrayError::Value("no blocks to join".into()));
    };
    if numblocks.iter().product::<usize>() != blocks.len() || numblocks.len() != first.ndim() {
        return Err(ArrayError::Value(format!(
            "{} blocks do not fill a grid of {numblocks:?}",
            blocks.len()
        )));
    }
    if blocks.len() == 1 {
        return Ok(first.clone());
    }
    let nd = numblocks.len();
    let grid = crate::collections::array::grid(numblocks);
    // Each axis' block lengths, read along that axis from the grid's origin.
    let mut offsets: Vec<Vec<usize>> = Vec::with_capacity(nd);
    let mut shape = Vec::with_capacity(nd);
    for (d, &nb) in numblocks.iter().enumerate() {
        let mut acc = 0;
        let mut offs = Vec::with_capacity(nb);
        for (b, idx) in blocks.iter().zip(&grid) {
            if idx.iter().enumerate().all(|(e, &i)| e == d || i == 0) {
                offs.push(acc);
                acc += b.shape()[d];
            }
        }
        offsets.push(offs);
        shape.push(acc);
    }
    let dtype = blocks.iter().map(GpuChunk::dtype).fold(first.dtype(), DType::promote);
    let out = GpuChunk::alloc(first.device(), dtype, &shape)?;
    for (b, idx) in blocks.iter().zip(&grid) {
        let ranges: Vec<(AxisSlice, bool)> = (0..nd)
            .map(|d| {
                let start = offsets[d][idx[d]];
                (AxisSlice { start, stop: start + b.shape()[d], step: 1 }, false)
            })
            .collect();
        let region = out.slice(&ranges).map_err(|_| {
            ArrayError::Shape(format!(
                "block {idx:?} of shape {} does not fit the grid",
                fmt_shape(b.shape())
            ))
        })?;
        let b = if b.device().ordinal() == first.device().ordinal() {
            b.clone()
        } else {
            GpuChunk::from_host(&b.to_host()?, first.device())?
        };
        expr::evaluate_into(&expr::Expr::cast(expr::Expr::leaf(b), dtype), &region)?;
    }
    Ok(out)
}
