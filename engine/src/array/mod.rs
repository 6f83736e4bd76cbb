//! N-dimensional array chunks and the kernels that work on them: the
//! per-block half of `dask.array`. The lazy, chunked side lives in
//! `collections::array`; this module only ever sees one block at a time
//! (plus reduction partials).

pub mod chunk;
pub mod create;
pub mod dtype;
pub mod elementwise;
pub mod error;
pub mod exec;
pub mod from_value;
pub mod gpu;
pub mod linalg;
pub mod npy;
pub mod op;
pub mod order;
pub mod reduce;
pub mod shape;
pub mod zarr;

pub use chunk::{Chunk, Elem, Nd};
pub use dtype::{DType, Scalar};
pub use error::{ArrayError, fmt_shape, norm_axes, norm_axis};
pub use op::ArrayOp;
