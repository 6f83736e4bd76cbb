//! The API reference: one entry per script function, with a summary and a
//! Rhai example. It is the single doc source for `:help`, completion and
//! Jupyter's inspect; tests check that every registered function has an
//! entry and that every example runs.

/// Documentation of one function, method or property.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FnDoc {
    /// The name scripts use (`delayed`, `result`, `status`).
    pub name: &'static str,
    /// How it is called.
    pub signature: &'static str,
    /// One or two sentences.
    pub summary: &'static str,
    /// A self-contained script that uses it (run by the tests).
    pub example: &'static str,
}

const fn doc(
    name: &'static str,
    signature: &'static str,
    summary: &'static str,
    example: &'static str,
) -> FnDoc {
    FnDoc { name, signature, summary, example }
}

/// Every documented entry, in the order of the guide.
pub const DOCS: &[FnDoc] = &[
    doc(
        "delayed",
        "delayed(f) -> function",
        "Make a function lazy: `d.call(args...)` builds a task instead of running it. Arguments may be lazy values, futures, or arrays and maps holding them (dask.delayed).",
        "fn inc(x) { x + 1 }\nlet d = delayed(inc);\nlet x = d.call(1);\nx.compute()",
    ),
    doc(
        "delayed_value",
        "delayed_value(v) -> Delayed",
        "Wrap a plain value (or an array of lazy values) as a lazy value.",
        "let v = delayed_value([1, 2, 3]);\nv.compute()",
    ),
    doc(
        "compute",
        "compute(a, b, ...) -> array | x.compute() -> value",
        "Run lazy values in one graph, so shared work runs once. With one lazy value (or as a method) it returns the value; with several, an array. Arrays and maps are searched for lazy values.",
        "let a = delayed(|x| x * 2).call(21);\ncompute(a + 1, a - 1)",
    ),
    doc(
        "persist",
        "x.persist() -> Delayed | Array",
        "Compute now and keep the result in memory; later graphs read it instead of recomputing.",
        "let x = delayed(|v| v * 2).call(21).persist();\ncompute(x + 1, x * 2)",
    ),
    doc(
        "visualize",
        "x.visualize(path)",
        "Write the task graph as Graphviz: `.dot` text, or `.svg`/`.png`/`.pdf` when the `dot` program is installed.",
        "let x = delayed(|v| v + 1).call(1);\nx.visualize(\"/tmp/brisk-doc-graph.dot\")",
    ),
    doc(
        "graph_info",
        "x.graph_info() -> map",
        "Tasks and layers of a lazy value's graph, and the literal data it carries in bytes.",
        "delayed(|v| v + 1).call(1).graph_info()",
    ),
    doc(
        "key",
        "x.key / f.key",
        "The key of a lazy value or future: `<name>-<token>`.",
        "delayed(|v| v).call(1).key",
    ),
    doc(
        "submit",
        "submit(f, args...) -> Future",
        "Run a function now on the cluster and return a future (Client.submit). Futures may be arguments.",
        "let f = submit(|a, b| a + b, 1, 2);\nf.result()",
    ),
    doc(
        "map",
        "map(f, array) -> array of Future",
        "Submit one task per element (Client.map); with two arrays, one per pair.",
        "gather(map(|x| x * x, [1, 2, 3]))",
    ),
    doc(
        "gather",
        "gather(futures) -> array",
        "Wait for futures and return their results, in order; plain values pass through.",
        "gather(map(|x| x + 1, [1, 2]))",
    ),
    doc(
        "wait",
        "wait(futures)",
        "Block until every future has finished or failed.",
        "wait(map(|x| x, [1, 2]))",
    ),
    doc(
        "as_completed",
        "for f in as_completed(futures) { ... }",
        "Futures in the order they finish.",
        "let seen = [];\nfor f in as_completed(map(|x| x, [3, 1, 2])) { seen.push(f.result()); }\nseen.len()",
    ),
    doc(
        "result",
        "f.result() -> value",
        "Wait for the future and return its result; a failed task raises its error (catchable with try/catch).",
        "submit(|x| x * 10, 4).result()",
    ),
    doc(
        "done",
        "f.done() -> bool",
        "Whether the future has finished, failed or been cancelled.",
        "let f = submit(|x| x, 1);\nf.result();\nf.done()",
    ),
    doc(
        "status",
        "f.status",
        "\"pending\", \"finished\", \"error\" or \"cancelled\".",
        "let f = submit(|x| x, 1);\nf.result();\nf.status",
    ),
    doc(
        "cancel",
        "f.cancel()",
        "Cancel this future: the task stops if nothing else needs it; waiting on it raises \"future KEY was cancelled\".",
        "let f = submit(|x| x, 1);\nf.cancel();\nf.status",
    ),
    doc(
        "exception",
        "f.exception() -> string | ()",
        "The error of a failed future, or () if it did not fail.",
        "let f = submit(|x| x / 0, 1);\nwait([f]);\nf.exception()",
    ),
    doc(
        "scatter",
        "scatter(value) -> Future | array of Future",
        "Move local data to the cluster; an array gives one future per element (Client.scatter).",
        "let f = scatter(#{rows: 3});\nsubmit(|d| d.rows, f).result()",
    ),
    doc(
        "client",
        "client() -> Client",
        "The session's client: `c.submit`, `c.map`, `c.gather`, `c.scatter`, `c.compute`, `c.workers()`.",
        "let c = client();\nc.gather(c.map(|x| x + 1, [1, 2]))",
    ),
    doc(
        "workers",
        "c.workers() -> array of maps",
        "The workers of the cluster: name, address, threads, running tasks, memory, spilled bytes, GPU.",
        "client().workers()[0].threads",
    ),
    doc(
        "config",
        "config() -> map | config(#{...}) -> map",
        "Read or set session options: scheduler (\"threads\" or \"sync\"), num_workers, array.backend, optimization.fuse. Unknown keys are errors.",
        "config(#{scheduler: \"sync\"});\nconfig().scheduler",
    ),
    doc(
        "annotate",
        "annotate(#{priority, retries, resources}, || expr)",
        "Annotate every task built inside the closure: priority (higher first), retries (0–100), resources such as #{GPU: 1}.",
        "annotate(#{retries: 2, priority: 10}, || delayed(|x| x + 1).call(1)).compute()",
    ),
    doc(
        "to_json",
        "to_json(value) -> string",
        "JSON text of a local value: numbers, strings, arrays, maps; lazy values must be computed first.",
        "to_json(#{a: [1, 2.5], b: \"x\"})",
    ),
    doc(
        "random",
        "random(shape, #{chunks, seed, dtype}) -> Array",
        "A lazy array of uniform random numbers in [0, 1) (np.random.random). With a seed, the same seed and chunks give the same array on any scheduler.",
        "let x = random([1000, 1000], #{chunks: 250, seed: 42});\nx.mean().compute()",
    ),
    doc(
        "normal",
        "normal(shape, #{mean, std, chunks, seed, dtype}) -> Array",
        "A lazy array of normally distributed numbers (default mean 0, std 1).",
        "normal([10000], #{mean: 5.0, std: 2.0, seed: 1, chunks: 2500}).std().compute()",
    ),
    doc(
        "zeros",
        "zeros(shape, #{chunks, dtype}) -> Array",
        "A lazy array of zeros (f64 unless dtype says otherwise).",
        "zeros([3, 4], #{chunks: 2}).compute()",
    ),
    doc(
        "ones",
        "ones(shape, #{chunks, dtype}) -> Array",
        "A lazy array of ones.",
        "ones([3, 4], #{dtype: \"i64\"}).sum().compute()",
    ),
    doc(
        "full",
        "full(shape, value, #{chunks, dtype}) -> Array",
        "A lazy array with every element `value`; the dtype follows the value unless given.",
        "full([2, 2], 7).compute()",
    ),
    doc(
        "arange",
        "arange([start,] stop [, step], #{chunks, dtype}) -> Array",
        "Evenly spaced values in [start, stop), as np.arange; integers unless an argument is a float.",
        "arange(0, 10, 3, #{chunks: 2}).compute()",
    ),
    doc(
        "linspace",
        "linspace(start, stop, num, #{chunks, dtype}) -> Array",
        "`num` evenly spaced values from start to stop, both included.",
        "linspace(0, 1, 5).compute()",
    ),
    doc(
        "eye",
        "eye(n, #{chunks, dtype}) -> Array",
        "The n×n identity matrix.",
        "eye(3, #{chunks: 2}).compute()",
    ),
    doc(
        "from_array",
        "from_array(data, #{chunks, dtype}) -> Array",
        "A lazy array cut from nested Rhai arrays of numbers (or a computed ndarray).",
        "let a = from_array([[1, 2], [3, 4]], #{chunks: 1});\n(a * 10).compute()",
    ),
    doc(
        "rechunk",
        "x.rechunk(chunks) -> Array",
        "The same array cut into different blocks: a number, a shape (-1 for a whole axis) or \"auto\".",
        "random([100, 100], #{chunks: 10}).rechunk([50, -1]).numblocks",
    ),
    doc(
        "chunks",
        "x.chunks -> array",
        "The block sizes along each axis.",
        "random([10, 7], #{chunks: 4}).chunks",
    ),
    doc(
        "blocks",
        "x.blocks() -> array | x.blocks([i, j]) -> Array",
        "Dask's block view: every block (in C order) as an array of one block, or the block at a block index (negative counts from the end).",
        "random([10, 7], #{chunks: 4}).blocks([-1, 0]).shape",
    ),
    doc(
        "numblocks",
        "x.numblocks -> array",
        "How many blocks along each axis.",
        "random([10, 7], #{chunks: 4}).numblocks",
    ),
    doc(
        "shape",
        "x.shape -> array",
        "The length of each axis (lazy and computed arrays).",
        "zeros([3, 4]).shape",
    ),
    doc("ndim", "x.ndim -> int", "The number of axes.", "zeros([3, 4]).ndim"),
    doc("size", "x.size -> int", "The number of elements.", "zeros([3, 4]).size"),
    doc("nbytes", "x.nbytes -> int", "The bytes the elements take.", "zeros([3, 4]).nbytes"),
    doc(
        "dtype",
        "x.dtype -> string",
        "The element type: \"f64\", \"f32\", \"i64\" or \"bool\".",
        "arange(3).dtype",
    ),
    doc(
        "T",
        "x.T -> Array",
        "The transpose (the axes reversed).",
        "let x = from_array([[1, 2], [3, 4]]);\n(x + x.T).compute()",
    ),
    doc(
        "transpose",
        "x.transpose([axes]) -> Array",
        "Permute the axes; with no argument, reverse them.",
        "zeros([2, 3, 4]).transpose([1, 0, 2]).shape",
    ),
    doc(
        "sum",
        "x.sum([axis], #{keepdims, split_every}) -> Array",
        "Sum over all elements, or over `axis` (an int or an array of ints), as a tree reduction.",
        "let x = arange(12, #{chunks: 5});\nx.sum().compute()",
    ),
    doc(
        "prod",
        "x.prod([axis], #{keepdims}) -> Array",
        "Product of the elements.",
        "from_array([1, 2, 3, 4]).prod().compute()",
    ),
    doc(
        "min",
        "x.min([axis], #{keepdims}) -> Array",
        "Smallest element; NaN wins, as in NumPy.",
        "from_array([[3, 1], [2, 5]]).min(0).compute()",
    ),
    doc(
        "max",
        "x.max([axis], #{keepdims}) -> Array",
        "Largest element; NaN wins, as in NumPy.",
        "from_array([[3, 1], [2, 5]]).max(1).compute()",
    ),
    doc(
        "mean",
        "x.mean([axis], #{keepdims}) -> Array",
        "Arithmetic mean.",
        "random([100, 100], #{seed: 1, chunks: 30}).mean(0).shape",
    ),
    doc(
        "std",
        "x.std([axis], #{ddof, keepdims}) -> Array",
        "Standard deviation (ddof 0 by default, as NumPy).",
        "from_array([1.0, 2.0, 3.0, 4.0]).std(#{ddof: 1}).compute()",
    ),
    doc(
        "variance",
        "x.variance([axis], #{ddof, keepdims}) -> Array",
        "Variance (`var` is a reserved word in Rhai).",
        "from_array([1.0, 2.0, 3.0, 4.0]).variance().compute()",
    ),
    doc(
        "argmin",
        "x.argmin([axis]) -> Array",
        "Index of the smallest element: flat over the whole array, or along one axis.",
        "from_array([[3, 1], [0, 5]]).argmin().compute()",
    ),
    doc(
        "argmax",
        "x.argmax([axis]) -> Array",
        "Index of the largest element: flat over the whole array, or along one axis.",
        "from_array([[3, 1], [0, 5]]).argmax(1).compute()",
    ),
    doc(
        "any",
        "x.any([axis]) -> Array",
        "Whether any element is true (non-zero).",
        "(arange(10) > 8).any().compute()",
    ),
    doc(
        "all",
        "x.all([axis]) -> Array",
        "Whether every element is true (non-zero).",
        "(arange(10) >= 0).all().compute()",
    ),
    doc("sqrt", "sqrt(x) -> Array", "Square root of each element.", "sqrt(from_array([4, 9])).compute()"),
    doc("exp", "exp(x) -> Array", "e to the power of each element.", "exp(zeros([2])).compute()"),
    doc("log", "log(x) -> Array", "Natural logarithm of each element.", "log(ones([2])).compute()"),
    doc(
        "log10",
        "log10(x) -> Array",
        "Base-10 logarithm of each element.",
        "log10(from_array([10, 100])).compute()",
    ),
    doc("abs", "abs(x) -> Array", "Absolute value of each element.", "abs(from_array([-1, 2])).compute()"),
    doc("sin", "sin(x) -> Array", "Sine of each element (radians).", "sin(zeros([2])).compute()"),
    doc("cos", "cos(x) -> Array", "Cosine of each element (radians).", "cos(zeros([2])).compute()"),
    doc("tan", "tan(x) -> Array", "Tangent of each element (radians).", "tan(zeros([2])).compute()"),
    doc("tanh", "tanh(x) -> Array", "Hyperbolic tangent of each element.", "tanh(zeros([2])).compute()"),
    doc(
        "floor",
        "floor(x) -> Array",
        "Largest integer not above each element.",
        "floor(from_array([1.5, -1.5])).compute()",
    ),
    doc(
        "ceil",
        "ceil(x) -> Array",
        "Smallest integer not below each element.",
        "ceil(from_array([1.5, -1.5])).compute()",
    ),
    doc(
        "round",
        "round(x) -> Array",
        "Round each element to the nearest integer, halves to even (as NumPy).",
        "round(from_array([0.5, 1.5, 2.5])).compute()",
    ),
    doc(
        "isnan",
        "isnan(x) -> Array",
        "Whether each element is NaN.",
        "isnan(from_array([1.0]) / 0.0 * 0.0).compute()",
    ),
    doc(
        "isfinite",
        "isfinite(x) -> Array",
        "Whether each element is finite.",
        "isfinite(from_array([1.0, 2.0]) / 0.0).compute()",
    ),
    doc(
        "clip",
        "x.clip(lo, hi) -> Array",
        "Limit the elements to [lo, hi]; `()` leaves a side open.",
        "arange(6).clip(1, 3).compute()",
    ),
    doc(
        "where",
        "where(cond, a, b) -> Array",
        "Elements of `a` where `cond` is true, else of `b`, with broadcasting.",
        "let x = arange(5);\nwhere(x > 2, x, 0).compute()",
    ),
    doc(
        "maximum",
        "maximum(a, b) -> Array",
        "The larger of two arrays (or an array and a number), element by element.",
        "maximum(arange(4), 2).compute()",
    ),
    doc(
        "minimum",
        "minimum(a, b) -> Array",
        "The smaller of two arrays (or an array and a number), element by element.",
        "minimum(arange(4), 2).compute()",
    ),
    doc(
        "floor_divide",
        "floor_divide(a, b) -> Array",
        "Division rounded down, as Python's `//`.",
        "floor_divide(arange(6), 4).compute()",
    ),
    doc(
        "astype",
        "x.astype(dtype) -> Array",
        "The elements converted to another type (\"f64\", \"f32\", \"i64\", \"bool\").",
        "from_array([1.7, -1.7]).astype(\"i64\").compute()",
    ),
    doc(
        "dot",
        "a.dot(b) | a @ b -> Array",
        "Matrix product of 1-d and 2-d arrays (NumPy's dot and matmul there), one task per output block summing the products along the inner axis.",
        "let x = from_array([[1.0, 2.0], [3.0, 4.0]], #{chunks: 1});\n(x @ x.T).compute()",
    ),
    doc("matmul", "matmul(a, b) -> Array", "The same as `a @ b`.", "matmul(eye(3), arange(3)).compute()"),
    doc(
        "slice",
        "x.slice([index, ...]) | x[i] -> Array",
        "Basic indexing: a range (`0..10`, `2..=5`), an integer (drops the axis), `()` for a whole axis, or #{start, stop, step}; negative positions count from the end.",
        "let x = arange(20, #{chunks: 6});\nx.slice([#{start: 1, stop: -1, step: 4}]).compute()",
    ),
    doc(
        "qr",
        "qr(x) -> [q, r]",
        "QR of a tall-and-skinny array (one block along axis 1) by the direct TSQR method, as da.linalg.qr.",
        "let x = random([1000, 5], #{chunks: [250, 5], seed: 1});\nlet qr_ = qr(x);\nabs(qr_[0] @ qr_[1] - x).max().compute() < 1e-12",
    ),
    doc(
        "svd",
        "svd(x) -> [u, s, v]",
        "Singular value decomposition, x = u · diag(s) · v: directly for one block, by TSQR for tall-and-skinny arrays (as da.linalg.svd).",
        "let x = random([1000, 4], #{chunks: [250, 4], seed: 1});\nsvd(x)[1].compute()",
    ),
    doc(
        "svd_compressed",
        "svd_compressed(x, k, #{seed, oversample, n_power_iter}) -> [u, s, v]",
        "The k leading singular triplets by a randomized range finder (Halko et al.), as da.linalg.svd_compressed.",
        "let x = random([500, 50], #{chunks: [100, 50], seed: 2});\nsvd_compressed(x, 3, #{seed: 1, n_power_iter: 2})[1].compute()",
    ),
    doc(
        "solve",
        "solve(a, b) -> Array",
        "Solve a · x = b for a square a (LU with partial pivoting, in one task).",
        "solve(from_array([[3.0, 1.0], [1.0, 2.0]]), from_array([9.0, 8.0])).compute()",
    ),
    doc(
        "lstsq",
        "lstsq(a, b) -> [x, residuals, rank, s]",
        "Least squares by TSQR, as da.linalg.lstsq: x minimises |a · x - b|; s are a's singular values.",
        "let a = from_array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]]);\nlstsq(a, from_array([1.0, 2.0, 2.9]))[0].compute()",
    ),
    doc(
        "norm",
        "norm(x) -> Array",
        "The Frobenius norm of a matrix, the 2-norm of a vector (NumPy's default).",
        "norm(from_array([3.0, 4.0])).compute()",
    ),
    doc(
        "map_blocks",
        "x.map_blocks(|block| ..., #{chunks, dtype, drop_axis}) -> Array",
        "Run a closure on every block (an ndarray with the same operators, functions and reductions) on the workers. The output has the input's chunks and dtype unless chunks (block sizes per axis), dtype or drop_axis (axes the closure reduces away, each in one block) say otherwise.",
        "let x = arange(10, #{chunks: 4});\nx.map_blocks(|b| b * b - b.min()).compute()",
    ),
    doc(
        "concatenate",
        "concatenate([a, b, ...], axis) -> Array",
        "Join arrays along an existing axis (0 by default); the other axes must match.",
        "concatenate([arange(3), arange(2)]).compute()",
    ),
    doc(
        "stack",
        "stack([a, b, ...], axis) -> Array",
        "Join arrays of one shape along a new axis (0 by default).",
        "stack([arange(3), arange(3) * 10], 1).compute()",
    ),
    doc(
        "reshape",
        "x.reshape(shape) -> Array",
        "The same elements in C order in another shape (one entry may be -1), also across block edges.",
        "arange(12, #{chunks: 5}).reshape([3, -1]).compute()",
    ),
    doc(
        "cumsum",
        "x.cumsum(axis) -> Array",
        "Cumulative sum along an axis: a scan per block plus the running total of the blocks before it.",
        "arange(6, #{chunks: 4}).cumsum(0).compute()",
    ),
    doc(
        "histogram",
        "histogram(x, #{bins, range: [lo, hi]}) -> [counts, edges]",
        "Counts in equal bins over [lo, hi] (the last bin closed), as np.histogram; the range is required, as in Dask.",
        "histogram(arange(10), #{bins: 5, range: [0, 10]})[0].compute()",
    ),
    doc(
        "from_npy",
        "from_npy(path, #{chunks}) -> Array",
        "A lazy array over a NumPy .npy file: the header is read at once, each block reads only its own rows.",
        "arange(10).to_npy(\"/tmp/brisk-doc.npy\");\nfrom_npy(\"/tmp/brisk-doc.npy\", #{chunks: 4}).sum().compute()",
    ),
    doc(
        "to_npy",
        "x.to_npy(path)",
        "Compute the array and write it as a .npy file that NumPy reads (C order, little-endian).",
        "ones([2, 3]).to_npy(\"/tmp/brisk-doc-ones.npy\")",
    ),
    doc(
        "mask",
        "x.mask(cond) -> Array",
        "The elements where a bool array of the same shape is true, in C order (NumPy's x[cond]); the result's block lengths are unknown until computed.",
        "let x = arange(10, #{chunks: 3});\nx.mask(x % 3 == 0).compute()",
    ),
    doc(
        "unique",
        "unique(x) -> Array",
        "The sorted distinct elements (NaNs last, as one); the length is unknown until computed.",
        "unique(from_array([3, 1, 3, 2, 1], #{chunks: 2})).compute()",
    ),
    doc(
        "compute_chunk_sizes",
        "x.compute_chunk_sizes() -> Array",
        "Compute the block lengths of an array that has unknown ones (after mask or unique), so that slicing, rechunking and the like work again.",
        "let x = arange(10, #{chunks: 3});\nx.mask(x > 4).compute_chunk_sizes().chunks",
    ),
    doc(
        "from_zarr",
        "from_zarr(path, #{chunks}) -> Array",
        "A lazy array over a Zarr v3 store (as zarr-python writes): the metadata is read at once; blocks follow the store's chunks unless chunks says otherwise, and each reads only its region.",
        "arange(20, #{chunks: 8}).to_zarr(\"/tmp/brisk-doc.zarr\");\nfrom_zarr(\"/tmp/brisk-doc.zarr\").sum().compute()",
    ),
    doc(
        "to_zarr",
        "x.to_zarr(path)",
        "Write the array into a new Zarr v3 store (zstd-compressed chunks of the array's block size), block by block in parallel.",
        "ones([4, 6], #{chunks: 2}).to_zarr(\"/tmp/brisk-doc-ones.zarr\")",
    ),
    doc(
        "tensordot",
        "tensordot(a, b, axes) -> Array",
        "Sum products over paired axes, as np.tensordot: axes is a count (the last of a with the first of b, 2 by default) or [[axes of a], [axes of b]].",
        "let a = arange(24).reshape([2, 3, 4]);\ntensordot(a, ones([3, 4]), [[1, 2], [0, 1]]).compute()",
    ),
    doc(
        "to_array",
        "v.to_array() -> array",
        "A computed array as nested Rhai arrays.",
        "from_array([[1, 2], [3, 4]]).compute().to_array()",
    ),
    doc(
        "from_sequence",
        "from_sequence(array, #{npartitions}) -> Bag",
        "A bag of the array's elements, cut into partitions as Dask does (about 100 by default, one element each for 100 or fewer).",
        "from_sequence([1, 2, 3, 4], #{npartitions: 2}).map(|x| x * 10).compute()",
    ),
    doc(
        "read_text",
        "read_text(path_or_glob_or_array, #{blocksize}) -> Bag",
        "A bag of the lines of text files (each keeps its \"\\n\"): one partition per file, or per `blocksize` bytes (a number or \"64MB\") cut at line ends.",
        "from_sequence([\"a b\", \"b c\"], #{npartitions: 1}).to_textfiles(\"/tmp/brisk-doc-read-text\");\nread_text(\"/tmp/brisk-doc-read-text/*.part\").str_split().flatten().frequencies().compute()",
    ),
    doc(
        "map",
        "b.map(f) -> Bag",
        "Apply a closure to every record of a bag; it runs on the workers.",
        "from_sequence([1, 2, 3]).map(|x| x * x).compute()",
    ),
    doc(
        "filter",
        "b.filter(f) -> Bag",
        "The records for which the closure returns a true value (Python's truthiness).",
        "from_sequence([1, 2, 3, 4]).filter(|x| x % 2 == 0).compute()",
    ),
    doc(
        "map_partitions",
        "b.map_partitions(f) -> Bag",
        "Apply a closure to each partition as a whole: it gets an array of records and returns one.",
        "from_sequence([1, 2, 3, 4], #{npartitions: 2}).map_partitions(|p| [p.len()]).compute()",
    ),
    doc(
        "flatten",
        "b.flatten() -> Bag",
        "Concatenate records that are arrays into one bag of their elements.",
        "from_sequence([[1, 2], [3]]).flatten().compute()",
    ),
    doc(
        "pluck",
        "b.pluck(key) -> Bag",
        "`record[key]` for every record: an index into arrays or a key into maps.",
        "from_sequence([#{name: \"a\", n: 1}, #{name: \"b\", n: 2}]).pluck(\"name\").compute()",
    ),
    doc(
        "str_split",
        "b.str_split([sep]) -> Bag",
        "Split string records into arrays of words: on runs of whitespace, or on `sep` (Python's str.split). Runs natively, without calling back into Rhai.",
        "from_sequence([\"to be  or\"]).str_split().compute()",
    ),
    doc(
        "str_lower",
        "b.str_lower() -> Bag",
        "Lower-case string records (natively).",
        "from_sequence([\"Hello\"]).str_lower().compute()",
    ),
    doc(
        "str_strip",
        "b.str_strip() -> Bag",
        "Strip leading and trailing whitespace from string records (natively).",
        "from_sequence([\"  x \\n\"]).str_strip().compute()",
    ),
    doc(
        "count",
        "b.count() -> Delayed",
        "The number of records, as a lazy value (Dask's Item).",
        "from_sequence([1, 2, 3]).count().compute()",
    ),
    doc(
        "frequencies",
        "b.frequencies() -> Bag",
        "Pairs `[record, count]`, one per distinct record.",
        "from_sequence([\"a\", \"b\", \"a\"]).frequencies().compute()",
    ),
    doc(
        "distinct",
        "b.distinct() -> Bag",
        "Each distinct record once, in order of first appearance.",
        "from_sequence([1, 2, 1, 3, 2]).distinct().compute()",
    ),
    doc(
        "topk",
        "b.topk(k, #{key}) -> Bag",
        "The k largest records, largest first; `key` is an index or map key into each record, or a closure.",
        "from_sequence([[\"a\", 3], [\"b\", 9], [\"c\", 5]]).topk(2, #{key: 1}).compute()",
    ),
    doc(
        "foldby",
        "b.foldby(key, binop, initial, #{combine, combine_initial}) -> Bag",
        "Group by `key(record)` and fold each group with `binop(acc, record)` from `initial`; partitions' results merge with `combine` (default `binop`). Pairs `[key, value]`.",
        "from_sequence([1, 2, 3, 4, 5]).foldby(|x| x % 2, |acc, x| acc + x, 0).compute()",
    ),
    doc(
        "groupby",
        "b.groupby(key) -> Bag",
        "Pairs `[key, [records…]]`, through a hash shuffle across the partitions.",
        "from_sequence([1, 2, 3, 4]).groupby(|x| x % 2).compute()",
    ),
    doc(
        "reduction",
        "b.reduction(per_partition, aggregate) -> Delayed",
        "A custom tree reduction: `per_partition(records)` on each partition, then `aggregate(results)` over groups of results.",
        "from_sequence([1, 2, 3, 4], #{npartitions: 2}).reduction(|p| p.len(), |xs| xs.reduce(|a, b| a + b, 0)).compute()",
    ),
    doc(
        "take",
        "b.take(n) -> array",
        "The first n records of the first partition, computed now (as Dask's take).",
        "from_sequence([5, 6, 7], #{npartitions: 1}).take(2)",
    ),
    doc(
        "to_textfiles",
        "b.to_textfiles(dir) -> array of paths",
        "Write each partition of string records to `dir/N.part`, one record per line; computes now.",
        "from_sequence([\"x\", \"y\"], #{npartitions: 2}).to_textfiles(\"/tmp/brisk-doc-to-text\")",
    ),
    doc(
        "npartitions",
        "b.npartitions -> int",
        "The number of partitions.",
        "from_sequence([1, 2, 3, 4], #{npartitions: 2}).npartitions",
    ),
    doc(
        "read_csv",
        "read_csv(path_glob_or_array, #{blocksize, sep, header, dtypes, usecols}) -> DataFrame",
        "A lazy frame over CSV files, one partition per `blocksize` bytes (64 MB by default) cut at line ends. Column types come from a sample of the first file; `dtypes` overrides them (dask.dataframe.read_csv).",
        "from_columns(#{a: [1, 2], b: [\"x\", \"y\"]}).to_csv(\"/tmp/brisk-doc-read-csv\");\nread_csv(\"/tmp/brisk-doc-read-csv/*.part\").dtypes",
    ),
    doc(
        "read_json",
        "read_json(glob_or_array, #{blocksize}) -> DataFrame",
        "A lazy frame over JSON lines files (one record per line, as pandas' `lines=True`): one partition per file, or per `blocksize` bytes cut at line ends. Types come from the first file; a bad line is an error naming file and line.",
        "from_sequence([`{\"a\": 1, \"b\": \"x\"}`, `{\"a\": 2}`]).to_textfiles(\"/tmp/brisk-doc-json\");\nread_json(\"/tmp/brisk-doc-json/*.part\").compute()",
    ),
    doc(
        "read_parquet",
        "read_parquet(path_glob_or_dir, #{columns, filters}) -> DataFrame",
        "A lazy frame over Parquet files, one partition per row group; only the columns a computation needs are read. `filters` keeps the rows that pass `[[col, op, value], ...]` (all) or a list of such lists (any), with ops == != < <= > >= in, not in; row groups whose statistics rule a filter out are not read, and a filter written as `df[df[\"x\"] > 5]` right after `read_parquet` skips them too.",
        "from_columns(#{a: [1, 2, 3]}).to_parquet(\"/tmp/brisk-doc-read-pq\");\nread_parquet(\"/tmp/brisk-doc-read-pq\")[\"a\"].sum().compute()",
    ),
    doc(
        "from_columns",
        "from_columns(#{col: [values...]}, #{npartitions}) -> DataFrame",
        "A frame from arrays of values, one per column, cut into `npartitions` row ranges. Rhai maps keep their keys sorted, so columns come in name order.",
        "from_columns(#{a: [1, 2, 3], b: [0.5, (), 2.5]}, #{npartitions: 2}).compute()",
    ),
    doc(
        "from_maps",
        "from_maps([#{...}, ...], #{npartitions}) -> DataFrame",
        "A frame from rows given as maps; a key missing from a row is a missing value.",
        "from_maps([#{a: 1, b: \"x\"}, #{a: 2}]).compute()",
    ),
    doc(
        "head",
        "df.head(n) -> LocalDataFrame",
        "The first `n` rows (5 by default), computed now, reading only as many partitions as it needs.",
        "from_columns(#{a: [1, 2, 3, 4]}, #{npartitions: 2}).head(3)",
    ),
    doc(
        "assign",
        "df.assign(#{name: series_or_value}) -> DataFrame",
        "Add or replace columns; a Series must come from this frame's rows.",
        "let df = from_columns(#{x: [1, 2]});\ndf.assign(#{y: df[\"x\"] * 10, k: \"c\"}).compute()",
    ),
    doc(
        "groupby",
        "df.groupby(col_or_cols) -> GroupBy",
        "Group rows by key columns, then `agg(#{col: \"mean\"})` or `sum() mean() min() max() count() size() std() variance() nunique()`. Keys are ordinary columns of the result, sorted. `groupby(cols, #{split_out: n})` gives n partitions through a hash shuffle, for many groups (each partition sorted by key).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1, 2, 3]});\ndf.groupby(\"k\").agg(#{x: [\"sum\", \"max\"]}).compute()",
    ),
    doc(
        "value_counts",
        "s.value_counts() -> DataFrame",
        "Rows per distinct value of a Series: columns `[name, \"count\"]`, largest count first.",
        "from_columns(#{k: [\"a\", \"b\", \"a\"]})[\"k\"].value_counts().compute()",
    ),
    doc(
        "dropna",
        "df.dropna() / df.dropna(#{subset}) -> DataFrame",
        "Drop rows with a missing value (NaN counts as missing), in any column or in `subset`.",
        "from_columns(#{a: [1, (), 3]}).dropna().compute()",
    ),
    doc(
        "fillna",
        "df.fillna(value_or_map) -> DataFrame",
        "Fill missing values: one value for every column of a fitting type, or a map of column to value.",
        "from_columns(#{a: [1.5, ()]}).fillna(0).compute()",
    ),
    doc(
        "to_csv",
        "df.to_csv(dir) -> array of paths",
        "Write each partition to `dir/N.part` with a header; computes now.",
        "from_columns(#{a: [1, 2]}, #{npartitions: 2}).to_csv(\"/tmp/brisk-doc-to-csv\")",
    ),
    doc(
        "to_parquet",
        "df.to_parquet(dir) -> array of paths",
        "Write each partition to `dir/part.N.parquet` (snappy); pandas and pyarrow read the directory back.",
        "from_columns(#{a: [1, 2]}).to_parquet(\"/tmp/brisk-doc-to-pq\")",
    ),
    doc(
        "agg",
        "g.agg(#{col: \"mean\" or [\"sum\", \"max\"]}) / g.agg(spec, #{split_out}) -> DataFrame",
        "Aggregate each group: one column per source with one aggregation (`x`), or `x_sum`, `x_max` with several. Aggregations: sum mean min max count size std var nunique.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.groupby(\"k\").agg(#{x: \"sum\"}).compute()",
    ),
    doc(
        "between",
        "s.between(lo, hi) -> Series",
        "Whether each value lies in `[lo, hi]` (both ends included).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[df[\"x\"].between(0, 2)].compute()",
    ),
    doc(
        "column_names",
        "df.column_names() -> array",
        "The column names, in order (as `df.columns`).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.column_names()",
    ),
    doc(
        "columns",
        "df.columns -> array",
        "The column names, in order; known without computing.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.columns",
    ),
    doc(
        "divisions",
        "df.divisions -> array",
        "The index boundaries of the partitions (`npartitions + 1` values): known after `set_index` (reading them computes the sampled quantiles) and through filters and new columns that leave the index column unchanged; `()` each otherwise.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]}, #{npartitions: 2});\ndf.set_index(\"x\").divisions",
    ),
    doc(
        "drop",
        "df.drop(col_or_cols) -> DataFrame",
        "The frame without these columns.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.drop(\"x\").columns",
    ),
    doc(
        "dtypes",
        "df.dtypes -> map",
        "Each column's type: int64, float64, bool, string or datetime64[ns].",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.dtypes",
    ),
    doc(
        "isin",
        "s.isin(values) -> Series",
        "Whether each value is one of `values`.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[df[\"k\"].isin([\"a\"])].compute()",
    ),
    doc(
        "isna",
        "s.isna() -> Series",
        "Whether each value is missing (null, or NaN in a float column).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[\"x\"].isna().sum().compute()",
    ),
    doc(
        "notna",
        "s.notna() -> Series",
        "Whether each value is present.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[df[\"x\"].notna()].compute()",
    ),
    doc(
        "name",
        "s.name -> string",
        "The Series' name (its column's, or the name given by `rename`).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[\"x\"].name",
    ),
    doc(
        "num_rows",
        "v.num_rows() -> int",
        "The rows of a computed frame or Series.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.compute().num_rows()",
    ),
    doc(
        "nunique",
        "s.nunique() -> lazy int",
        "The number of distinct present values. On a computed Series (`df.compute()[\"k\"]`, a group in `apply`) this and `sum mean min max count std variance` give the value at once.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[\"k\"].nunique().compute()",
    ),
    doc(
        "rename",
        "df.rename(#{old: new}) / s.rename(name)",
        "Rename columns (names that are not columns are ignored, as pandas does), or a Series.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.rename(#{x: \"value\"}).columns",
    ),
    doc(
        "str_contains",
        "s.str_contains(pattern) -> Series",
        "Whether each string matches a regular expression (pandas' `str.contains`).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[df[\"k\"].str_contains(\"^a\")].compute()",
    ),
    doc(
        "str_len",
        "s.str_len() -> Series",
        "The length of each string, in characters.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[\"k\"].str_len().compute()",
    ),
    doc(
        "str_upper",
        "s.str_upper() -> Series",
        "Each string in upper case (`str_lower` for lower case).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[\"k\"].str_upper().compute()",
    ),
    doc(
        "to_frame",
        "s.to_frame() -> DataFrame",
        "A Series as a one-column frame.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\n(df[\"x\"] * 2).to_frame().compute()",
    ),
    doc(
        "to_maps",
        "v.to_maps() -> array of maps",
        "A computed frame's rows as maps of column to value.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.compute().to_maps()",
    ),
    doc(
        "to_dataframe",
        "b.to_dataframe() -> DataFrame",
        "A frame of a bag of maps, one partition per bag partition. Columns and types come from the first partition (computed now, as Dask computes its meta); a key a record lacks is a missing value.",
        "from_sequence([#{a: 1, b: \"x\"}, #{a: 2}], #{npartitions: 2}).to_dataframe().compute()",
    ),
    doc(
        "display",
        "display(value)",
        "Show a value now, as the end of an input shows it: a table where it has one. In Jupyter each call is its own output (text and HTML), so one cell can show several values.",
        "display(#{rows: 3, cols: 2});\ndisplay(from_array([1, 2, 3]).compute())",
    ),
    doc(
        "merge",
        "merge(left, right, #{on, left_on, right_on, how, suffixes}) -> DataFrame",
        "Join two frames as pandas' merge: `how` is inner (default), left, right or outer; keys named alike come out once, other shared names get `_x`/`_y`; missing keys match each other. A small side (at most 4 partitions) is broadcast, otherwise both sides are hash-shuffled.",
        "let a = from_columns(#{k: [\"a\", \"b\"], x: [1, 2]});\nlet b = from_columns(#{k: [\"a\", \"c\"], y: [10, 30]});\nmerge(a, b, #{on: \"k\", how: \"outer\"}).compute()",
    ),
    doc(
        "join",
        "df.join(other, #{on, how, ...}) -> DataFrame",
        "`merge` with `how` left by default (a brisk frame has no hidden index, so give `on`).",
        "let a = from_columns(#{k: [\"a\", \"b\"], x: [1, 2]});\na.join(from_columns(#{k: [\"a\"], y: [10]}), #{on: \"k\"}).compute()",
    ),
    doc(
        "sort_values",
        "df.sort_values(col_or_cols, #{ascending}) -> DataFrame",
        "Sorted rows, missing values last, ties in their original order: divisions from sampled quantiles of the first column, then a range shuffle. `ascending` is a bool or one per column.",
        "from_columns(#{x: [3, 1, (), 2]}, #{npartitions: 2}).sort_values(\"x\", #{ascending: false}).compute()",
    ),
    doc(
        "set_index",
        "df.set_index(col) -> DataFrame",
        "Sorted by `col`, which becomes the first column (there is no hidden index), with known `divisions`.",
        "let df = from_columns(#{a: [3, 1, 2], b: [\"x\", \"y\", \"z\"]}, #{npartitions: 2});\ndf.set_index(\"b\").compute()",
    ),
    doc(
        "shuffle",
        "df.shuffle(col_or_cols, #{npartitions}) -> DataFrame",
        "Rows with equal values of the columns in one partition (a hash shuffle through files on disk, so memory stays bounded by the partition size).",
        "from_columns(#{k: [1, 2, 1, 2]}, #{npartitions: 2}).shuffle(\"k\").npartitions",
    ),
    doc(
        "repartition",
        "df.repartition(#{npartitions}) -> DataFrame",
        "The same rows in order, in `npartitions` partitions: neighbours stacked or partitions cut.",
        "from_columns(#{a: [1, 2, 3, 4]}, #{npartitions: 4}).repartition(#{npartitions: 2}).npartitions",
    ),
    doc(
        "drop_duplicates",
        "df.drop_duplicates(#{subset, keep}) -> DataFrame",
        "The first row (`keep: \"last\"`: the last; `keep: false`: none) of each distinct value of `subset` (all columns by default), in order.",
        "from_columns(#{a: [1, 1, 2], b: [\"x\", \"y\", \"x\"]}).drop_duplicates(#{subset: [\"a\"], keep: false}).compute()",
    ),
    doc(
        "nlargest",
        "s.nlargest(n) -> Series / df.nlargest(n, col) -> DataFrame",
        "The `n` largest values (rows), largest first; ties keep the earlier row; missing values are skipped.",
        "from_columns(#{x: [3, 1, 4, 1, 5]})[\"x\"].nlargest(2).compute()",
    ),
    doc(
        "nsmallest",
        "s.nsmallest(n) -> Series / df.nsmallest(n, col) -> DataFrame",
        "The `n` smallest values (rows), smallest first.",
        "let df = from_columns(#{x: [3, 1, 4], k: [\"a\", \"b\", \"c\"]});\ndf.nsmallest(2, \"x\").compute()",
    ),
    doc(
        "tail",
        "df.tail(n) -> LocalDataFrame",
        "The last `n` rows (5 by default), computed now, reading partitions from the end only as far as it needs.",
        "from_columns(#{a: [1, 2, 3, 4]}, #{npartitions: 2}).tail(3)",
    ),
    doc(
        "dt_year",
        "s.dt_year() -> Series",
        "The year of each datetime (as pandas' `dt.year`).",
        "let df = from_columns(#{t: [\"2024-02-29 10:00:00\"]}).astype(#{t: \"datetime64[ns]\"});\ndf[\"t\"].dt_year().compute()",
    ),
    doc(
        "dt_month",
        "s.dt_month() -> Series",
        "The month (1 to 12) of each datetime.",
        "let df = from_columns(#{t: [\"2024-02-29 10:00:00\"]}).astype(#{t: \"datetime64[ns]\"});\ndf[\"t\"].dt_month().compute()",
    ),
    doc(
        "dt_day",
        "s.dt_day() -> Series",
        "The day of the month of each datetime.",
        "let df = from_columns(#{t: [\"2024-02-29 10:00:00\"]}).astype(#{t: \"datetime64[ns]\"});\ndf[\"t\"].dt_day().compute()",
    ),
    doc(
        "rolling",
        "df.rolling(window) / s.rolling(window), then .mean() .sum() .min() .max()",
        "Rolling aggregates over `window` rows, across partition edges (each partition gets the rows before it, as Dask's map_overlap). As pandas with `min_periods = window`: the first `window - 1` rows, and any window with a missing value, give NaN. Numeric columns only; results are float64.",
        "from_columns(#{x: [1, 2, 3, 4, 5]}, #{npartitions: 3}).rolling(2).mean().compute()",
    ),
    doc(
        "quantile",
        "s.quantile(q) -> Delayed (a float, or an array for an array of q)",
        "Quantiles by linear interpolation, from up to 1,000 sample points per partition (Dask's approach): exact when no partition has more values than that, close otherwise.",
        "from_columns(#{x: [1, 2, 4, 8]}, #{npartitions: 2})[\"x\"].quantile([0.25, 0.5]).compute()",
    ),
    doc(
        "describe",
        "df.describe() -> DataFrame",
        "count, mean, std, min, 25%, 50%, 75% and max of every numeric column, one row each, named in a first `statistic` column; quartiles as `quantile`.",
        "from_columns(#{x: [1, 2, 4, 8], y: [0.5, (), 1.5, 2.5]}).describe().compute()",
    ),
    doc(
        "map_partitions",
        "df.map_partitions(|part| ..., #{meta}) -> DataFrame",
        "A closure on every partition (a LocalDataFrame; `to_maps()`, `num_rows()`, `p[\"col\"]`), giving a frame, an array of row maps, one row map or one value (a row of one column, `0`). The result's columns come from `meta` (`#{col: dtype}`), or from running the closure on the first partition now.",
        "let df = from_columns(#{x: [1, 2, 3]}, #{npartitions: 2});\ndf.map_partitions(|p| p.to_maps().map(|r| #{x2: r.x * 2})).compute()",
    ),
    doc(
        "apply",
        "g.apply(|group| ..., #{meta}) -> DataFrame",
        "A closure on every group (a LocalDataFrame), after a shuffle that puts each group in one partition. It gives a frame, rows, one row map or one value (a column named `0`, as pandas' `reset_index` names it, or the one column of `meta`); key columns it lacks are put first. Columns from `meta`, or from the first group, run now. A group's columns (`g[\"x\"]`, computed Series) take the Series operators, element-wise methods and reductions at once, and a bool one selects rows (`g[g[\"x\"] > 1]`).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1, 2, 3]});\ndf.groupby(\"k\").apply(|g| #{n: g.num_rows()}).compute();\ndf.groupby(\"k\").apply(|g| g.num_rows() * 10, #{meta: #{n10: \"int64\"}}).compute();\ndf.groupby(\"k\").apply(|g| (g[\"x\"] * 2 + 1).sum()).compute()",
    ),
];

/// The entry for `name`, if documented.
pub fn lookup(name: &str) -> Option<&'static FnDoc> {
    DOCS.iter().find(|d| d.name == name)
}

/// Text for `:help NAME` and Jupyter's inspect.
/// Every entry of a name (`map` is a futures call and a bag method).
pub fn help(name: &str) -> Option<String> {
    let all: Vec<String> = DOCS
        .iter()
        .filter(|d| d.name == name)
        .map(|d| format!("{}\n\n{}\n\nExample:\n{}", d.signature, d.summary, indent(d.example)))
        .collect();
    (!all.is_empty()).then(|| all.join("\n\n"))
}

/// One line per entry, for `:help` with no name.
pub fn index() -> String {
    let width = DOCS.iter().map(|d| d.name.len()).max().unwrap_or(0);
    DOCS.iter()
        .map(|d| format!("{:width$}  {}", d.name, first_sentence(d.summary)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn first_sentence(s: &str) -> &str {
    match s.find(". ") {
        Some(i) => &s[..=i],
        None => s,
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}
