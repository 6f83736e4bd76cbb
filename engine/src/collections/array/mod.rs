//! The lazy chunked array (`dask.array.Array`): metadata (shape, chunks,
//! dtype) known without computing, and one graph layer per operation whose
//! tasks work block by block. Every builder here checks shapes, axes and
//! types up front, so a bad expression fails when it is written, not when
//! it runs.

mod base;
mod blockwise;
mod chunks;
mod create;
mod dims;
mod einsum;
mod elementwise;
mod kernels;
mod linalg;
mod matmul;
mod order;
mod overlap;
mod rechunk;
mod reduction;
mod slicing;
mod structure;

pub use base::{Array, Ctx, finalize, grid, offsets};
/// For builders of array tasks outside this module (the estimators' fits).
pub(crate) use base::{array_task, block, finish};
pub use blockwise::{BlockwiseArg, BlockwiseSpec, blockwise};
pub use chunks::{AUTO_BYTES, AxisChunks, ChunkSpec, MAX_BLOCKS, normalize_chunks, regular};
pub use create::{
    arange, eye, from_chunk, from_delayed, from_npy, from_zarr, full, linspace, random, to_zarr,
};
pub use dims::{broadcast_to, expand_dims, squeeze, tri};
pub use einsum::einsum;
pub use elementwise::{BlockFn, Operand, astype, binary, map_blocks, to_cpu, to_gpu, unary, where_};
pub use kernels::{map_blocks_gpu, user_elementwise, user_reduction};
pub use linalg::{cholesky, inv, lstsq, norm, qr, solve, svd, svd_compressed, tensordot};
pub use matmul::{MATMUL_FANIN, matmul, transpose};
pub use order::{argwhere, isin, quantile, topk};
pub use overlap::{Boundary, Halos, overlap, trim};
pub use rechunk::rechunk;
pub use reduction::{UserReduction, reduction, user_tree};
pub use slicing::{Index, all_blocks, block_at, local_ranges, row_index, slice, take};
pub use structure::{
    chunk_size_tasks, concatenate, cumprod, cumsum, histogram, mask, new_shape, reshape, stack, unique,
};

#[cfg(test)]
mod tests;
