//! GPU chunks rearranged by kernels: into C order, reshaped, joined from a
//! grid of blocks, and down to the host (also as their wire form).

use super::chunk::{GpuChunk, c_strides, default_device};
use super::expr;
use crate::array::chunk::Chunk;
use crate::array::dtype::DType;
use crate::array::error::{ArrayError, fmt_shape};
use crate::array::shape::AxisSlice;

impl GpuChunk {
    /// The elements on the host (waits for the kernels queued before).
    pub fn to_host(&self) -> Result<Chunk, ArrayError> {
        let c = self.contiguous()?;
        if c.dtype != DType::Bool && cfg!(target_endian = "little") {
            // Straight into the new block's memory.
            let mut failed = None;
            let copied = Chunk::fill_raw(c.dtype, &c.shape, |bytes| {
                download_prefaulted(&c.buf, bytes).map_err(|e| {
                    failed = Some(e);
                    std::io::Error::other("the copy failed")
                })
            });
            return match (copied, failed) {
                (Ok(chunk), _) => Ok(chunk),
                (Err(_), Some(e)) => Err(e.into()),
                (Err(e), None) => Err(ArrayError::Value(e.to_string())),
            };
        }
        let mut data = vec![0u8; c.nbytes() as usize];
        c.buf.download_into(&mut data)?;
        Chunk::from_wire_bytes(c.dtype, &c.shape, &data)
    }

    /// This chunk, C-ordered in its own memory (itself when it already is).
    pub fn contiguous(&self) -> Result<GpuChunk, ArrayError> {
        if self.is_c_contiguous() && self.offset == 0 && self.buf.len() == self.nbytes() as usize {
            return Ok(self.clone());
        }
        expr::materialize(&expr::Expr::leaf(self.clone()))
    }

    /// This block on `device`: itself when it is there, else a copy between
    /// the devices (peer to peer where the hardware allows). A view of its
    /// whole buffer (a transpose) travels as it is; other views are made
    /// contiguous first, so only their own elements move.
    pub fn to_device(&self, device: &std::sync::Arc<brisk_gpu::Device>) -> Result<GpuChunk, ArrayError> {
        if self.device().ordinal() == device.ordinal() {
            return Ok(self.clone());
        }
        let whole = self.offset == 0
            && self.nbytes() as usize == self.buf.len()
            && self.shape.iter().zip(&self.strides).all(|(&n, &s)| n <= 1 || s > 0);
        let src = if whole { self.clone() } else { self.contiguous()? };
        let what = || format!("a copy of a block of shape {} {}", fmt_shape(&src.shape), src.dtype);
        let buf = src.buf.to_device(device, &what)?;
        Ok(GpuChunk { buf, ..src })
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
}

/// Copy `buf` into `out`, fresh memory. Fresh memory is mapped page by
/// page on first touch, and a copy from the GPU into it pays every fault
/// inside the driver's copy, on one thread: 1 GiB came down at 1.1 GB/s on
/// an H100 host, against 13.4 GB/s into memory already touched (5.5 GB/s
/// with the pages touched by eight threads first). A large copy goes in
/// pieces, each touched by one of a few threads while earlier ones copy:
/// 8.6 GB/s.
fn download_prefaulted(buf: &brisk_gpu::Buffer, out: &mut [u8]) -> Result<(), brisk_gpu::GpuError> {
    const LARGE: usize = 64 << 20;
    const PIECE: usize = 32 << 20;
    const PAGE: usize = 4096;
    if out.len() < LARGE {
        return buf.download_into(out);
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let mut pieces: Vec<Vec<(usize, &mut [u8])>> = (0..threads).map(|_| Vec::new()).collect();
    for (k, piece) in out.chunks_mut(PIECE).enumerate() {
        pieces[k % threads].push((k * PIECE, piece));
    }
    let (tx, rx) = std::sync::mpsc::channel::<(usize, &mut [u8])>();
    std::thread::scope(|s| {
        for mine in pieces {
            let tx = tx.clone();
            s.spawn(move || {
                for (at, piece) in mine {
                    for i in (0..piece.len()).step_by(PAGE) {
                        piece[i] = 0;
                    }
                    if tx.send((at, piece)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        // Pieces copy as they come; an error stops the copying (the
        // touching threads stop when the receiver goes).
        let mut first_error = None;
        for (at, piece) in rx {
            if let Err(e) = buf.download_at(at, piece) {
                first_error = Some(e);
                break;
            }
        }
        first_error.map_or(Ok(()), Err)
    })
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
    let grid = crate::array::shape::grid(numblocks);
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
