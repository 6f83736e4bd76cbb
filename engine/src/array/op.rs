//! The serializable vocabulary of array tasks and how each runs. A task's
//! arguments arrive as engine `Value`s: array blocks, scalars, and lists of
//! partials for the reduction steps.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::create::Dist;
use super::dtype::{DType, Scalar};
use super::elementwise::{BinOp, UnOp};
use super::gpu::raw::RawLaunch;
use super::gpu::user::{RawSpec, UserFn, UserFold};
use super::reduce::{BlockPlace, Reduction};
use super::shape::AxisSlice;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ArrayOp {
    Random {
        seed: u64,
        shape: Vec<usize>,
        dist: Dist,
        dtype: DType,
    },
    Full {
        shape: Vec<usize>,
        value: Scalar,
        dtype: DType,
    },
    Arange {
        start: f64,
        step: f64,
        n: usize,
        dtype: DType,
    },
    Linspace {
        start: f64,
        stop: f64,
        total: usize,
        offset: usize,
        n: usize,
        dtype: DType,
    },
    Eye {
        rows: usize,
        cols: usize,
        k: i64,
        dtype: DType,
    },
    Binary(BinOp),
    Unary(UnOp),
    Where,
    AsType(DType),
    /// The chunk step of a reduction: a block into a partial.
    Partial {
        red: Reduction,
        axes: Vec<usize>,
        place: BlockPlace,
    },
    /// Merge partials (arguments in block order) into one.
    Combine {
        red: Reduction,
    },
    /// Merge partials and finalize the result.
    Aggregate {
        red: Reduction,
        axes: Vec<usize>,
        keepdims: bool,
        out: DType,
    },
    Transpose(Vec<usize>),
    Slice(Vec<(AxisSlice, bool)>),
    /// A value a Delayed gave as a block of `shape` (`from_delayed`): an
    /// ndarray, or nested lists of numbers, cast to `dtype`.
    FromValue {
        shape: Vec<usize>,
        dtype: DType,
    },
    /// Join a grid of blocks (arguments in C order) into one.
    Concat {
        numblocks: Vec<usize>,
    },
    /// `Σ_t a_t @ b_t`: the first `nk` arguments are the left blocks along
    /// the contracted axis, the next `nk` the right ones.
    Matmul {
        nk: usize,
    },
    /// `Σ_t a_t @ a_tᵀ` over the `nk` arguments: a diagonal block of `x @ x.T`.
    Gram {
        nk: usize,
    },
    /// The k-th element of a list result (a factor of a decomposition).
    Item(usize),
    /// Thin QR of a block: `[Q, R]`.
    Qr,
    /// TSQR's second stage: QR of the stacked R factors of the arguments
    /// (each a `[Q, R]` list, or a block not factored in stage one, which
    /// is its own R): `[Q2, R]`. On a GPU both stages keep Q factored
    /// (`[H, R, tau]`), so a computation that needs only R never forms it.
    QrStack,
    /// The first argument where the second is: on the same GPU, or on the
    /// host (a generated operand following the array it multiplies, as
    /// `svd_compressed`'s test matrix, as Dask's `like=` meta).
    PlaceLike,
    /// A frame partition's number of rows, as a one-value int64 block.
    FrameRows,
    /// A frame partition as a block of `dtype` (`to_array::frame_block`):
    /// `rows` × columns, or 1-d (`flat`) for a Series.
    FromFrame {
        dtype: DType,
        rows: usize,
        flat: bool,
    },
    /// Stage two's Q as a block, from its QR value.
    QrFormQ,
    /// TSQR's Q block: `Q_i @ Q2[offset..offset + rows]` from the block's
    /// QR value and stage two's Q.
    QrQ {
        offset: usize,
        rows: usize,
    },
    /// Thin SVD of a block: `[U, S, Vt]`.
    Svd,
    /// An `Svd` whose factors no task reads (`graph::narrow`): the singular
    /// values alone, as `[(), S, ()]`, which costs far less than the factors.
    SvdVals,
    /// `solve(a, b)` on whole blocks.
    Solve,
    /// The Cholesky factor of a whole matrix (`lower`: L, else U = Lᵀ).
    Cholesky {
        lower: bool,
    },
    /// Back substitution with an upper-triangular block.
    SolveUpper,
    /// The elementwise sum of the arguments (partial matrix products).
    AddAll,
    /// Read rows `rows.0..rows.1` of a `.npy` file and cut `ranges` out.
    NpyRead {
        path: String,
        header: super::npy::Header,
        rows: (usize, usize),
        ranges: Vec<AxisSlice>,
    },
    /// The elements of the first argument where the second is true (1-d).
    Mask,
    /// Sorted distinct elements of all the arguments together (1-d).
    Unique,
    /// The block's length along axis 0 (`compute_chunk_sizes`).
    Len,
    /// Read one region of a Zarr store.
    ZarrRead {
        path: String,
        ranges: Vec<(usize, usize)>,
    },
    /// Write the argument block at `start` into a Zarr store (gives `()`).
    ZarrWrite {
        path: String,
        start: Vec<usize>,
    },
    /// A new axis of length 1 at this position (`stack`).
    ExpandDims(usize),
    /// The same elements, C order, in another shape.
    Reshape(Vec<usize>),
    /// The positions of a flat block's non-zero elements, from `offset`
    /// of an array of `shape`, unravelled: `[n, ndim]` (`argwhere`), or
    /// the one coordinate `axis` (a part of `nonzero`).
    ArgWhere {
        offset: usize,
        shape: Vec<usize>,
        axis: Option<usize>,
    },
    /// Whether each element equals one of `values` (`isin`).
    IsIn(Vec<super::dtype::Scalar>),
    /// Some rows of a block, in this order (`take`, fancy indexing, the
    /// rows a k-means init picked).
    TakeRows(Vec<usize>),
    /// `tril`/`triu` of a block at `(row0, col0)` of a matrix.
    Tri {
        k: i64,
        upper: bool,
        row0: usize,
        col0: usize,
    },
    /// Cumulative sum along an axis, within the block.
    Cumsum(usize),
    /// Cumulative product along an axis, within the block.
    Cumprod(usize),
    /// Quantiles (fractions) over `axes`, whose lanes are whole in the
    /// block (`median`, `percentile`); `q_axis`: a leading axis of q.
    Quantile {
        qs: Vec<f64>,
        axes: Vec<usize>,
        keepdims: bool,
        q_axis: bool,
        /// `median`: two middle values averaged, as `np.median`.
        median: bool,
    },
    /// A block's `k` most extreme values along `axis` (`k < 0`: smallest)
    /// with their global indices (`offset`: the block's start), as
    /// `[values, indices]`.
    TopK {
        k: i64,
        axis: usize,
        offset: usize,
    },
    /// The candidates (each a `[values, indices]`) joined along `axis`
    /// and cut to the `k` most extreme: the values, or the indices.
    TopKMerge {
        k: i64,
        axis: usize,
        indices: bool,
    },
    /// Counts of the block's values in `bins` equal bins over [lo, hi]
    /// (the last bin closed, as NumPy's).
    Histogram {
        bins: usize,
        lo: f64,
        hi: f64,
    },
    /// Cut a piece out of each argument and join the pieces, a grid in C
    /// order: one output block of a rechunk.
    Rechunk {
        pieces: Vec<Vec<AxisSlice>>,
        numblocks: Vec<usize>,
    },
    /// Make the block of a creation or reader op on the GPU (the session's
    /// `array.backend` is `"gpu"`).
    OnGpu(Box<ArrayOp>),
    /// A host block's copy on the GPU (`to_gpu`).
    ToGpu,
    /// A GPU block's copy on the host (`to_cpu`).
    ToCpu,
    /// A user's elementwise kernel (`elementwise_kernel`, or a
    /// `reduction_kernel`'s map), its types bound: fused with the
    /// elementwise steps around it.
    Kernel(Arc<UserFn>),
    /// The chunk step of a `reduction_kernel`: its map's values folded.
    KernelPartial {
        fold: Arc<UserFold>,
        axes: Vec<usize>,
    },
    /// Merge partials of a `reduction_kernel`.
    KernelCombine {
        fold: Arc<UserFold>,
    },
    /// Merge partials and apply `post_map_expr`; `sizes` are
    /// `_in_ind.size()` and `_out_ind.size()`.
    KernelAggregate {
        fold: Arc<UserFold>,
        post: Arc<UserFn>,
        axes: Vec<usize>,
        keepdims: bool,
        sizes: (i64, i64),
    },
    /// `map_blocks_gpu`: a `raw_kernel` launched on each block.
    RawBlocks {
        kernel: Arc<RawSpec>,
        launch: RawLaunch,
    },
    /// A step of an estimator's fit (`ml`).
    Ml(crate::ml::op::MlOp),
}

impl ArrayOp {
    /// Whether the op keeps some rows of its one block (`picked_rows`).
    pub fn takes_rows(&self) -> bool {
        match self {
            ArrayOp::TakeRows(_) => true,
            ArrayOp::Ml(op) => op.takes_rows(),
            _ => false,
        }
    }

    /// The rows a row-taking op keeps of a block of `n` rows, in order;
    /// `None` for every other op. Loop fusion reads a take this way
    /// instead of copying the rows out first.
    pub fn picked_rows(&self, n: usize) -> Option<Vec<usize>> {
        match self {
            ArrayOp::TakeRows(rows) => Some(rows.clone()),
            ArrayOp::Ml(op) => op.picked_rows(n),
            _ => None,
        }
    }

    /// This op computing only the items `used` of its list result, when it
    /// has a cheaper form for them (`graph::narrow` asks).
    pub fn narrow(&self, used: &std::collections::BTreeSet<usize>) -> Option<ArrayOp> {
        match self {
            ArrayOp::Svd if used.iter().all(|&k| k == 1) => Some(ArrayOp::SvdVals),
            _ => None,
        }
    }
}

impl ArrayOp {
    /// The file or store this task reads, if any.
    pub fn file_read(&self) -> Option<&str> {
        match self {
            ArrayOp::NpyRead { path, .. } | ArrayOp::ZarrRead { path, .. } => Some(path),
            ArrayOp::OnGpu(inner) => inner.file_read(),
            _ => None,
        }
    }

    /// The name of the op's task group, as Dask names its layers.
    pub fn name(&self) -> String {
        match self {
            ArrayOp::Random { dist: Dist::Uniform, .. } => "random_sample".into(),
            ArrayOp::Random { .. } => "normal".into(),
            ArrayOp::Full { .. } => "full".into(),
            ArrayOp::Arange { .. } => "arange".into(),
            ArrayOp::Linspace { .. } => "linspace".into(),
            ArrayOp::Eye { .. } => "eye".into(),
            ArrayOp::Binary(op) => op.name().into(),
            ArrayOp::Unary(op) => op.name().into(),
            ArrayOp::Where => "where".into(),
            ArrayOp::AsType(_) => "astype".into(),
            ArrayOp::FromValue { .. } => "from-value".into(),
            ArrayOp::Partial { red, .. } => format!("{}-chunk", red.name()),
            ArrayOp::Combine { red } => format!("{}-combine", red.name()),
            ArrayOp::Aggregate { red, .. } => format!("{}-aggregate", red.name()),
            ArrayOp::Transpose(_) => "transpose".into(),
            ArrayOp::Slice(_) => "getitem".into(),
            ArrayOp::Concat { .. } => "finalize".into(),
            ArrayOp::Rechunk { .. } => "rechunk".into(),
            ArrayOp::Matmul { .. } | ArrayOp::Gram { .. } => "matmul".into(),
            ArrayOp::Item(_) => "getitem".into(),
            ArrayOp::Qr => "qr".into(),
            ArrayOp::QrStack => "qr-stack".into(),
            ArrayOp::QrFormQ => "qr-form-q".into(),
            ArrayOp::PlaceLike => "place-like".into(),
            ArrayOp::FrameRows => "lengths".into(),
            ArrayOp::FromFrame { .. } => "values".into(),
            ArrayOp::QrQ { .. } => "qr-q".into(),
            ArrayOp::Svd => "svd".into(),
            ArrayOp::SvdVals => "svd-values".into(),
            ArrayOp::Solve => "solve".into(),
            ArrayOp::SolveUpper => "solve-triangular".into(),
            ArrayOp::AddAll => "sum-partial-products".into(),
            ArrayOp::ExpandDims(_) => "stack".into(),
            ArrayOp::ZarrRead { .. } => "from-zarr".into(),
            ArrayOp::ZarrWrite { .. } => "store-zarr".into(),
            ArrayOp::Mask => "getitem-mask".into(),
            ArrayOp::Unique => "unique".into(),
            ArrayOp::Len => "chunk-size".into(),
            ArrayOp::NpyRead { .. } => "from-npy".into(),
            ArrayOp::Reshape(_) => "reshape".into(),
            ArrayOp::TakeRows(_) => "take".into(),
            ArrayOp::Cholesky { .. } => "cholesky".into(),
            ArrayOp::Tri { upper: true, .. } => "triu".into(),
            ArrayOp::Tri { .. } => "tril".into(),
            ArrayOp::ArgWhere { axis: None, .. } => "argwhere".into(),
            ArrayOp::ArgWhere { .. } => "nonzero".into(),
            ArrayOp::IsIn(_) => "isin".into(),
            ArrayOp::Cumsum(_) => "cumsum".into(),
            ArrayOp::Cumprod(_) => "cumprod".into(),
            ArrayOp::Quantile { median: true, .. } => "median".into(),
            ArrayOp::Quantile { .. } => "percentile".into(),
            ArrayOp::TopK { .. } => "topk-chunk".into(),
            ArrayOp::TopKMerge { indices: true, .. } => "argtopk".into(),
            ArrayOp::TopKMerge { .. } => "topk".into(),
            ArrayOp::Histogram { .. } => "histogram".into(),
            ArrayOp::OnGpu(inner) => inner.name(),
            ArrayOp::ToGpu => "to_gpu".into(),
            ArrayOp::ToCpu => "to_cpu".into(),
            ArrayOp::Kernel(f) => f.label.split(':').next().unwrap_or_default().into(),
            ArrayOp::KernelPartial { fold, .. } => format!("{}-chunk", fold.label),
            ArrayOp::KernelCombine { fold } => format!("{}-combine", fold.label),
            ArrayOp::KernelAggregate { fold, .. } => format!("{}-aggregate", fold.label),
            ArrayOp::RawBlocks { kernel, .. } => kernel.name.clone(),
            ArrayOp::Ml(op) => op.name().into(),
        }
    }
}
