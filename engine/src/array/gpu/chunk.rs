//! The GPU chunk itself: a view (dtype, shape, strides, offset) of a
//! `brisk-gpu` buffer, and what needs no kernel (allocation, upload,
//! transposes, slices, axes added or dropped). What needs a kernel (copies
//! into C order, joins, downloads of views) is `layout.rs`'s.

use std::sync::Arc;

use brisk_gpu::{Buffer, Device};

use crate::array::chunk::Chunk;
use crate::array::dtype::DType;
use crate::array::error::{ArrayError, fmt_shape};
use crate::array::shape::AxisSlice;

/// An n-d array on one GPU.
#[derive(Clone)]
pub struct GpuChunk {
    pub(super) buf: Arc<Buffer>,
    pub(super) dtype: DType,
    pub(super) shape: Vec<usize>,
    /// Element strides (0 for a broadcast axis).
    pub(super) strides: Vec<isize>,
    /// Elements from the buffer's start to element `[0, 0, ...]`.
    pub(super) offset: usize,
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

/// The GPU that new chunks made on this thread go to. Threads are dealt
/// over the devices in turn as they first ask, so the local runtime's pool
/// spreads new blocks over every GPU of the host; work on existing blocks
/// runs where they are (`exec.rs` brings a task's blocks together). In a
/// CUDA worker, which sees one device, it is always that one.
pub fn default_device() -> Result<Arc<Device>, ArrayError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static HOME: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    let devices = brisk_gpu::runtime()?.devices();
    let k = HOME.with(|h| *h) % devices.len().max(1);
    Ok(devices.get(k).ok_or_else(|| brisk_gpu::GpuError::NoGpu("no GPU device".into()))?.clone())
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
