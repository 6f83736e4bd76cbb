//! What a NumPy user reaches for after the basics: order statistics
//! (`median`, `percentile`, `topk`), `cumprod`, axes added and dropped,
//! stacking, triangles, searches (`isin`, `nonzero`, `argwhere`), the
//! `*_like` creators and `randint`. Lazy arrays only; the kernels are the
//! engine's (`collections::array`).

use std::sync::Arc;

use brisk_engine::array::create::Dist;
use brisk_engine::array::{DType, Scalar};
use brisk_engine::collections::array::{self as arr, Array, AxisChunks, ChunkSpec};
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, Map};

use super::args::{ctx, wrong_type};
use super::array_args::{Opts, axes_arg, err, float_of, int_of, lazy, random_seed, scalar_of, shape_arg};
use super::fndoc::{FnDoc, doc};
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::LazyArray;

/// `reshape`, `ravel`, `expand_dims` and `squeeze` on a computed array
/// (an `ndarray`), at once, as NumPy's.
fn register_local_shapes(engine: &mut Engine) {
    use brisk_engine::array::{Chunk, reduce, shape};
    type R = Result<Chunk, Box<EvalAltResult>>;
    fn reshape(x: &Chunk, dims: &[i64]) -> R {
        let to = arr::new_shape(x.len(), dims).map_err(err)?;
        shape::reshape(x, &to).map_err(err)
    }
    engine.register_fn("reshape", |x: &mut Chunk, dims: Dynamic| -> R {
        let items: Vec<Dynamic> = match dims.read_lock::<RArray>() {
            Some(a) => a.to_vec(),
            None => vec![dims.clone()],
        };
        let dims = items.iter().map(|d| int_of(d, "a dimension")).collect::<Result<Vec<_>, _>>()?;
        reshape(x, &dims)
    });
    engine.register_fn("ravel", |x: &mut Chunk| reshape(x, &[-1]));
    engine.register_fn("expand_dims", |x: &mut Chunk, axis: i64| -> R {
        let ax = brisk_engine::array::norm_axis(axis, x.ndim() + 1).map_err(err)?;
        shape::expand_dims(x, ax).map_err(err)
    });
    /// Every axis of length 1, as NumPy's `axis=None`.
    fn squeeze_all(x: &Chunk) -> Chunk {
        let ones: Vec<usize> = (0..x.ndim()).filter(|&d| x.shape()[d] == 1).collect();
        reduce::squeeze(x, &ones)
    }
    engine.register_fn("squeeze", |x: &mut Chunk| -> R { Ok(squeeze_all(x)) });
    engine.register_fn("squeeze", |x: &mut Chunk, axis: Dynamic| -> R {
        let Some(axes) = axes_arg(&axis)? else { return Ok(squeeze_all(x)) };
        let axes = brisk_engine::array::norm_axes(&axes, x.ndim()).map_err(err)?;
        if let Some(&d) = axes.iter().find(|&&d| x.shape()[d] != 1) {
            return Err(runtime(format!(
                "squeeze: cannot select an axis to squeeze out which has size not equal to one (axis {d} has {})",
                x.shape()[d]
            )));
        }
        Ok(reduce::squeeze(x, &axes))
    });
}

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference.
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "blockwise",
        "blockwise(f, out_index, [x, \"ij\", y, \"jk\", value, ()], #{dtype, concatenate, new_axes, adjust_chunks}) -> Array",
        "The general block pattern, as da.blockwise: each array argument comes with one index letter per axis (a literal with `()`); `f` is called once per output block with the matching blocks of each argument. Shared letters pair blocks (chunks are unified first; an axis of length 1 is broadcast, its one block given to every call); a letter not in `out_index` is contracted: `f` gets all of its blocks, as an array, or joined into one with `concatenate: true`. `new_axes: #{k: n}` adds output axes; `adjust_chunks: #{i: n}` says the function returns blocks of length n along i. `dtype` is the first array's unless given.",
        "let x = ones([4, 6], #{chunks: [2, 3]});\nlet y = ones([6, 5], #{chunks: [3, 5]});\nblockwise(|a, b| a.matmul(b), \"ik\", [x, \"ij\", y, \"jk\"], #{concatenate: true}).compute()",
    ),
    doc(
        "median",
        "x.median(axis, #{keepdims}) -> Array",
        "The median along an axis (or axes; all when `()` or left out), as np.median: each lane is brought into one block (Dask's `da.median` rechunks the same way), so the answer is exact. A lane with a NaN gives NaN.",
        "from_array([[3.0, 1.0, 2.0], [9.0, 7.0, 8.0]], #{chunks: 1}).median(1).compute()",
    ),
    doc(
        "percentile",
        "percentile(x, q, #{axis, keepdims}) -> Array",
        "The q-th percentiles (0..=100; a number or an array of them), as np.percentile with linear interpolation, over all elements unless `axis` is given. An array of q gives a leading axis of its length. Exact, where Dask's percentile merges approximate per-block answers.",
        "percentile(arange(11, #{chunks: 4}), [10, 50, 95]).compute()",
    ),
    doc(
        "cumprod",
        "x.cumprod(axis) -> Array",
        "Cumulative product along an axis: a scan per block times the running product of the blocks before it.",
        "arange(1, 7, #{chunks: 4}).cumprod(0).compute()",
    ),
    doc(
        "topk",
        "x.topk(k, axis) -> Array",
        "The k largest values along an axis (the last by default), largest first; a negative k gives the |k| smallest, smallest first, as `da.topk`. Each block sends its k candidates, one task picks from them.",
        "from_array([5, 1, 9, 3, 7], #{chunks: 2}).topk(2).compute()",
    ),
    doc(
        "argtopk",
        "x.argtopk(k, axis) -> Array",
        "The indices of `topk`'s values along the axis.",
        "from_array([5, 1, 9, 3, 7], #{chunks: 2}).argtopk(-2).compute()",
    ),
    doc(
        "einsum",
        "einsum(spec, a, b, ...) -> Array",
        "Einstein summation as np.einsum (\"ij,jk->ik\", \"bij,bjk->bik\", \"i,i->\"; without \"->\" the labels seen once, sorted). Up to four operands, or a Rhai array of them. Pairs whose shared labels are all summed meet in a tensordot; labels that live on broadcast. Ellipses and repeated labels in one operand (diagonals) are refused.",
        "einsum(\"ij,j->i\", ones([2, 3], #{chunks: 1}), arange(3)).compute()",
    ),
    doc(
        "inv",
        "inv(a) -> Array",
        "The inverse of a square matrix, as `solve(a, eye(n))` (LU with partial pivoting, in one task); a singular matrix is an error.",
        "inv(from_array([[2.0, 0.0], [0.0, 4.0]])).compute()",
    ),
    doc(
        "cholesky",
        "cholesky(a, #{lower}) -> Array",
        "The Cholesky factor of a symmetric positive-definite matrix (read from its lower triangle): upper-triangular U with a = UᵀU by default, as da.linalg.cholesky; L with a = LLᵀ when `lower` (NumPy's). In one task.",
        "cholesky(from_array([[4.0, 2.0], [2.0, 3.0]]), #{lower: true}).compute()",
    ),
    doc(
        "reduction",
        "reduction(x, chunk, aggregate, #{combine, axis, keepdims, split_every, dtype}) -> Array",
        "A reduction of your own, as da.reduction: `chunk` turns each block into a partial, `combine` (optional) merges partials joined along the reduced axes, `split_every` at a time, `aggregate` makes the result from the rest joined. Each function takes a block and keeps the reduced axes at length 1 (as Dask's keepdims=True); `dtype` is the result's (the input's by default).",
        "let x = arange(10, #{chunks: 3}).astype(\"f64\");\nreduction(x, |b| b.max(0, #{keepdims: true}), |b| b.max(0, #{keepdims: true})).compute()",
    ),
    doc(
        "squeeze",
        "x.squeeze(axis) -> Array",
        "Drop axes of length 1 (all of them, or the ones named; naming an axis of another length is an error).",
        "zeros([3, 1, 2]).squeeze().shape",
    ),
    doc(
        "ravel",
        "x.ravel() -> Array",
        "The elements as one axis, in C order (`reshape(-1)`).",
        "arange(6).reshape([2, 3]).ravel().compute()",
    ),
    doc(
        "expand_dims",
        "expand_dims(x, axis) -> Array",
        "A new axis of length 1 at `axis` (counted in the result: -1 appends).",
        "expand_dims(arange(3), 0).shape",
    ),
    doc(
        "broadcast_to",
        "broadcast_to(x, shape) -> Array",
        "`x` repeated along new or length-1 axes to `shape`, as np.broadcast_to; an error where it does not broadcast.",
        "broadcast_to(arange(3), [2, 3]).compute()",
    ),
    doc(
        "vstack",
        "vstack([a, b, ...]) -> Array",
        "Join along the first axis, 1-d arrays taken as rows, as np.vstack.",
        "vstack([arange(3), arange(3) * 10]).compute()",
    ),
    doc(
        "hstack",
        "hstack([a, b, ...]) -> Array",
        "Join along the second axis (the first for 1-d arrays), as np.hstack.",
        "hstack([arange(2), arange(3)]).compute()",
    ),
    doc(
        "tril",
        "tril(x, k) -> Array",
        "The lower triangle of a 2-d array: zero above the k-th diagonal (k = 0 by default), as np.tril.",
        "tril(ones([3, 3], #{chunks: 2})).compute()",
    ),
    doc(
        "triu",
        "triu(x, k) -> Array",
        "The upper triangle of a 2-d array: zero below the k-th diagonal, as np.triu.",
        "triu(ones([3, 3], #{chunks: 2}), 1).compute()",
    ),
    doc(
        "isin",
        "isin(x, values) -> Array",
        "Whether each element equals one of `values` (a Rhai array of numbers), as np.isin.",
        "isin(arange(6), [1, 4, 9]).compute()",
    ),
    doc(
        "nonzero",
        "nonzero(x) -> [Array, ...]",
        "The indices of the non-zero elements, one array per axis, in C order (as np.nonzero); their lengths are known once computed.",
        "nonzero(from_array([[0, 3], [4, 0]]))[1].compute()",
    ),
    doc(
        "argwhere",
        "argwhere(x) -> Array",
        "The indices of the non-zero elements as rows of an [n, ndim] array, in C order, as np.argwhere.",
        "argwhere(from_array([[0, 3], [4, 0]])).compute()",
    ),
    doc(
        "zeros_like",
        "zeros_like(x, #{dtype}) -> Array",
        "Zeros of `x`'s shape, chunks and dtype (or the dtype given).",
        "zeros_like(arange(4, #{chunks: 2})).compute()",
    ),
    doc(
        "ones_like",
        "ones_like(x, #{dtype}) -> Array",
        "Ones of `x`'s shape, chunks and dtype (or the dtype given).",
        "ones_like(arange(4), #{dtype: \"f64\"}).compute()",
    ),
    doc(
        "empty_like",
        "empty_like(x, #{dtype}) -> Array",
        "An array of `x`'s shape, chunks and dtype; brisk fills it with zeros (NumPy leaves it uninitialised).",
        "empty_like(arange(3)).shape",
    ),
    doc(
        "full_like",
        "full_like(x, value, #{dtype}) -> Array",
        "`value` everywhere, in `x`'s shape, chunks and dtype (or the dtype given), as np.full_like.",
        "full_like(arange(3), 7).compute()",
    ),
    doc(
        "randint",
        "randint(low, high, shape, #{chunks, seed, dtype}) -> Array",
        "Random integers uniform on [low, high), as np.random.randint; with a seed, the same seed and chunks give the same array.",
        "randint(0, 10, [5], #{seed: 1}).compute()",
    ),
];

type Ctx = Arc<SessionState>;

fn new(a: Result<Array, brisk_engine::array::ArrayError>) -> Res<LazyArray> {
    a.map(LazyArray::new).map_err(err)
}

/// `axis` and `keepdims` of `median` and `percentile`.
fn stat_opts(m: Option<Map>, what: &str, axis: Option<Dynamic>) -> Res<(Option<Vec<i64>>, bool)> {
    let o = Opts::new(m, what, &["axis", "keepdims"])?;
    let axis = match (axis, o.get("axis")) {
        (Some(a), _) => axes_arg(&a)?,
        (None, Some(a)) => axes_arg(a)?,
        (None, None) => None,
    };
    Ok((axis, o.flag("keepdims")?))
}

fn median(st: &Ctx, x: &LazyArray, axis: Option<Dynamic>, m: Option<Map>) -> Res<LazyArray> {
    let (axes, keepdims) = stat_opts(m, "median", axis)?;
    new(arr::quantile(&ctx(st), &x.a, &[0.5], false, axes.as_deref(), keepdims, true))
}

fn percentile(st: &Ctx, x: &Dynamic, q: &Dynamic, m: Option<Map>) -> Res<LazyArray> {
    let (axes, keepdims) = stat_opts(m, "percentile", None)?;
    let a = lazy(st, x, "percentile")?;
    let (qs, q_axis) = match q.read_lock::<RArray>() {
        Some(list) => (list.iter().map(|d| float_of(d, "q")).collect::<Res<Vec<_>>>()?, true),
        None => (vec![float_of(q, "q")?], false),
    };
    let fractions: Vec<f64> = qs.iter().map(|q| q / 100.0).collect();
    new(arr::quantile(&ctx(st), &a, &fractions, q_axis, axes.as_deref(), keepdims, false))
}

/// `zeros_like` and the rest: `x`'s shape and chunks, `value` in `x`'s
/// dtype (or the one given).
fn like(st: &Ctx, x: &LazyArray, value: Scalar, m: Option<Map>, what: &str) -> Res<LazyArray> {
    let o = Opts::new(m, what, &["dtype"])?;
    x.a.known(what).map_err(err)?;
    let spec = ChunkSpec::PerAxis(x.a.chunks.iter().map(|c| AxisChunks::Sizes(c.clone())).collect());
    new(arr::full(&ctx(st), &x.a.shape(), &spec, value, o.dtype(x.a.dtype)?))
}

fn randint(st: &Ctx, low: &Dynamic, high: &Dynamic, shape: &Dynamic, m: Option<Map>) -> Res<LazyArray> {
    let o = Opts::new(m, "randint", &["chunks", "seed", "dtype"])?;
    let (low, high) = (int_of(low, "low")?, int_of(high, "high")?);
    if low >= high {
        return Err(runtime(format!("randint: low >= high ({low} >= {high})")));
    }
    let seed = match o.get("seed") {
        Some(d) => int_of(d, "seed")? as u64,
        None => random_seed(),
    };
    let shape = shape_arg(shape, "shape")?;
    let dist = Dist::Integers { low, high };
    new(arr::random(&ctx(st), &shape, &o.chunks()?, seed, dist, o.dtype(DType::I64)?))
}

/// `vstack`/`hstack`: NumPy's promotion of 1-d inputs, then concatenate.
fn stack_along(st: &Ctx, xs: &RArray, vertical: bool) -> Res<LazyArray> {
    let what = if vertical { "vstack" } else { "hstack" };
    let c = ctx(st);
    let arrays = xs.iter().map(|d| lazy(st, d, what)).collect::<Res<Vec<_>>>()?;
    let Some(first) = arrays.first() else { return Err(runtime(format!("{what} needs at least one array"))) };
    if vertical {
        let rows = arrays
            .iter()
            .map(|a| if a.ndim() == 1 { arr::expand_dims(&c, a, 0) } else { Ok(a.clone()) })
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        return new(arr::concatenate(&c, &rows, 0));
    }
    new(arr::concatenate(&c, &arrays, if first.ndim() == 1 { 0 } else { 1 }))
}

fn values_of(d: &Dynamic) -> Res<Vec<Scalar>> {
    let list = match d.read_lock::<RArray>() {
        Some(l) => l.clone(),
        None => return Err(wrong_type("isin", "a Rhai array of numbers", d)),
    };
    list.iter().map(|v| scalar_of(v).ok_or_else(|| wrong_type("isin", "numbers", v))).collect()
}

fn einsum(st: &Ctx, spec: &str, xs: &[Dynamic]) -> Res<LazyArray> {
    let arrays = xs.iter().map(|d| lazy(st, d, "einsum")).collect::<Res<Vec<_>>>()?;
    new(arr::einsum(&ctx(st), spec, &arrays))
}

fn cholesky(st: &Ctx, a: &Dynamic, m: Option<Map>) -> Res<LazyArray> {
    let o = Opts::new(m, "cholesky", &["lower"])?;
    new(arr::cholesky(&ctx(st), &lazy(st, a, "cholesky")?, o.flag("lower")?))
}

/// Index letters, one per axis (`()` for a literal argument).
fn letters(d: &Dynamic, what: &str) -> Res<Vec<char>> {
    let s = d
        .clone()
        .into_string()
        .map_err(|_| runtime(format!("blockwise: {what} is a string of index letters")))?;
    match s.chars().find(|c| !c.is_ascii_alphabetic()) {
        Some(c) => Err(runtime(format!("blockwise: {what} \"{s}\" has '{c}'; index letters are a-z, A-Z"))),
        None => Ok(s.chars().collect()),
    }
}

fn letter_sizes(m: Option<&Dynamic>, what: &str) -> Res<Vec<(char, usize)>> {
    let Some(d) = m else { return Ok(Vec::new()) };
    let m = d
        .read_lock::<Map>()
        .ok_or_else(|| runtime(format!("blockwise: {what} is a map of index letter to length")))?;
    m.iter()
        .map(|(k, v)| {
            let mut cs = k.chars();
            let (Some(c), None) = (cs.next(), cs.next()) else {
                return Err(runtime(format!("blockwise: {what} has key \"{k}\", not one index letter")));
            };
            let n = v.as_int().ok().and_then(|n| usize::try_from(n).ok()).ok_or_else(|| {
                runtime(format!("blockwise: {what}.{k} is a length, a whole number 0 or more"))
            })?;
            Ok((c, n))
        })
        .collect()
}

fn blockwise(st: &Ctx, f: &rhai::FnPtr, out: &str, args: &RArray, m: Option<Map>) -> Res<LazyArray> {
    let o = Opts::new(m, "blockwise", &["dtype", "concatenate", "new_axes", "adjust_chunks"])?;
    if !args.len().is_multiple_of(2) {
        return Err(runtime(
            "blockwise: arguments come in pairs: a value and its index (\"ij\", or () for a literal)",
        ));
    }
    let mut bw = Vec::with_capacity(args.len() / 2);
    for pair in args.chunks(2) {
        let (x, ind) = (&pair[0], &pair[1]);
        if let Some(a) = x.read_lock::<LazyArray>() {
            bw.push(arr::BlockwiseArg::Array(a.a.clone(), letters(ind, "an array's index")?));
        } else if ind.is_unit() {
            bw.push(arr::BlockwiseArg::Literal(crate::convert::to_value(x, "a blockwise literal")?));
        } else {
            return Err(runtime(format!(
                "blockwise: a {} with an index; only Arrays have one (give () for a literal)",
                x.type_name()
            )));
        }
    }
    let first =
        bw.iter().find_map(|a| if let arr::BlockwiseArg::Array(x, _) = a { Some(x.dtype) } else { None });
    let first = first.ok_or_else(|| runtime("blockwise: give at least one Array argument"))?;
    let spec = arr::BlockwiseSpec {
        out: letters(&Dynamic::from(out.to_string()), "out_index")?,
        dtype: o.dtype(first)?,
        concatenate: o.flag("concatenate")?,
        new_axes: letter_sizes(o.get("new_axes"), "new_axes")?,
        adjust_chunks: letter_sizes(o.get("adjust_chunks"), "adjust_chunks")?,
    };
    new(arr::blockwise(&ctx(st), &shipped(st, f)?, &spec, bw))
}

fn shipped(st: &Ctx, f: &rhai::FnPtr) -> Res<arr::BlockFn> {
    let (udf, token) = super::args::shipped(st, f)?;
    let label = udf.label.clone();
    Ok(arr::BlockFn { func: brisk_engine::ops::Func::Udf(udf), label, token })
}

fn reduction(
    st: &Ctx,
    x: &Dynamic,
    chunk: &rhai::FnPtr,
    aggregate: &rhai::FnPtr,
    m: Option<Map>,
) -> Res<LazyArray> {
    let o = Opts::new(m, "reduction", &["combine", "axis", "keepdims", "split_every", "dtype"])?;
    let a = lazy(st, x, "reduction")?;
    let combine = match o.get("combine") {
        None => None,
        Some(f) => Some(shipped(
            st,
            &f.clone()
                .try_cast::<rhai::FnPtr>()
                .ok_or_else(|| wrong_type("reduction", "a function for combine", f))?,
        )?),
    };
    let axes = match o.get("axis") {
        Some(d) => axes_arg(d)?,
        None => None,
    };
    let split = o.split_every()?;
    let (chunk, aggregate) = (shipped(st, chunk)?, shipped(st, aggregate)?);
    let fns = arr::UserReduction { chunk: &chunk, combine: combine.as_ref(), aggregate: &aggregate };
    new(arr::user_tree(&ctx(st), &a, &fns, axes.as_deref(), o.flag("keepdims")?, split, o.dtype(a.dtype)?))
}

pub(super) fn register(engine: &mut Engine, state: &Ctx) {
    let st = state.clone();
    engine.register_fn("blockwise", move |f: rhai::FnPtr, out: &str, args: RArray| {
        blockwise(&st, &f, out, &args, None)
    });
    let st = state.clone();
    engine.register_fn("blockwise", move |f: rhai::FnPtr, out: &str, args: RArray, m: Map| {
        blockwise(&st, &f, out, &args, Some(m))
    });
    let st = state.clone();
    engine.register_fn("reduction", move |x: Dynamic, chunk: rhai::FnPtr, aggregate: rhai::FnPtr| {
        reduction(&st, &x, &chunk, &aggregate, None)
    });
    let st = state.clone();
    engine.register_fn("reduction", move |x: Dynamic, chunk: rhai::FnPtr, aggregate: rhai::FnPtr, m: Map| {
        reduction(&st, &x, &chunk, &aggregate, Some(m))
    });
    let st = state.clone();
    engine.register_fn("inv", move |a: Dynamic| new(arr::inv(&ctx(&st), &lazy(&st, &a, "inv")?)));
    let st = state.clone();
    engine.register_fn("cholesky", move |a: Dynamic| cholesky(&st, &a, None));
    let st = state.clone();
    engine.register_fn("cholesky", move |a: Dynamic, m: Map| cholesky(&st, &a, Some(m)));
    let st = state.clone();
    engine.register_fn("einsum", move |spec: &str, a: Dynamic| {
        match a.read_lock::<RArray>().map(|l| l.to_vec()) {
            Some(list) => einsum(&st, spec, &list),
            None => einsum(&st, spec, &[a]),
        }
    });
    let st = state.clone();
    engine.register_fn("einsum", move |spec: &str, a: Dynamic, b: Dynamic| einsum(&st, spec, &[a, b]));
    let st = state.clone();
    engine.register_fn("einsum", move |spec: &str, a: Dynamic, b: Dynamic, c: Dynamic| {
        einsum(&st, spec, &[a, b, c])
    });
    let st = state.clone();
    engine.register_fn("einsum", move |spec: &str, a: Dynamic, b: Dynamic, c: Dynamic, d: Dynamic| {
        einsum(&st, spec, &[a, b, c, d])
    });
    let st = state.clone();
    engine.register_fn("median", move |x: &mut LazyArray| median(&st, x, None, None));
    let st = state.clone();
    engine.register_fn("median", move |x: &mut LazyArray, axis: Dynamic| {
        if axis.is_map() {
            median(&st, x, None, Some(axis.cast::<Map>()))
        } else {
            median(&st, x, Some(axis), None)
        }
    });
    let st = state.clone();
    engine.register_fn("median", move |x: &mut LazyArray, axis: Dynamic, m: Map| {
        median(&st, x, Some(axis), Some(m))
    });
    let st = state.clone();
    engine.register_fn("percentile", move |x: Dynamic, q: Dynamic| percentile(&st, &x, &q, None));
    let st = state.clone();
    engine.register_fn("percentile", move |x: Dynamic, q: Dynamic, m: Map| percentile(&st, &x, &q, Some(m)));
    let st = state.clone();
    engine
        .register_fn("cumprod", move |x: &mut LazyArray, axis: i64| new(arr::cumprod(&ctx(&st), &x.a, axis)));
    for (name, indices) in [("topk", false), ("argtopk", true)] {
        let st = state.clone();
        engine.register_fn(name, move |x: &mut LazyArray, k: i64| {
            new(arr::topk(&ctx(&st), &x.a, k, -1, indices))
        });
        let st = state.clone();
        engine.register_fn(name, move |x: &mut LazyArray, k: i64, axis: i64| {
            new(arr::topk(&ctx(&st), &x.a, k, axis, indices))
        });
    }
    let st = state.clone();
    engine.register_fn("squeeze", move |x: &mut LazyArray| new(arr::squeeze(&ctx(&st), &x.a, None)));
    let st = state.clone();
    engine.register_fn("squeeze", move |x: &mut LazyArray, axis: Dynamic| {
        new(arr::squeeze(&ctx(&st), &x.a, axes_arg(&axis)?.as_deref()))
    });
    let st = state.clone();
    engine.register_fn("ravel", move |x: &mut LazyArray| new(arr::reshape(&ctx(&st), &x.a, &[-1])));
    let st = state.clone();
    engine.register_fn("expand_dims", move |x: &mut LazyArray, axis: i64| {
        new(arr::expand_dims(&ctx(&st), &x.a, axis))
    });
    register_local_shapes(engine);
    let st = state.clone();
    engine.register_fn("broadcast_to", move |x: &mut LazyArray, shape: Dynamic| {
        new(arr::broadcast_to(&ctx(&st), &x.a, &shape_arg(&shape, "shape")?))
    });
    for (name, vertical) in [("vstack", true), ("hstack", false)] {
        let st = state.clone();
        engine.register_fn(name, move |xs: RArray| stack_along(&st, &xs, vertical));
    }
    for (name, upper) in [("tril", false), ("triu", true)] {
        let st = state.clone();
        engine.register_fn(name, move |x: &mut LazyArray| new(arr::tri(&ctx(&st), &x.a, 0, upper)));
        let st = state.clone();
        engine.register_fn(name, move |x: &mut LazyArray, k: i64| new(arr::tri(&ctx(&st), &x.a, k, upper)));
    }
    let st = state.clone();
    engine.register_fn("isin", move |x: &mut LazyArray, values: Dynamic| {
        new(arr::isin(&ctx(&st), &x.a, &values_of(&values)?))
    });
    let st = state.clone();
    engine.register_fn("nonzero", move |x: &mut LazyArray| -> Res<RArray> {
        (0..x.a.ndim()).map(|d| new(arr::argwhere(&ctx(&st), &x.a, Some(d))).map(Dynamic::from)).collect()
    });
    let st = state.clone();
    engine.register_fn("argwhere", move |x: &mut LazyArray| new(arr::argwhere(&ctx(&st), &x.a, None)));
    for (name, v) in [("zeros_like", 0.0), ("ones_like", 1.0), ("empty_like", 0.0)] {
        let st = state.clone();
        engine.register_fn(name, move |x: &mut LazyArray| like(&st, x, Scalar::Float(v), None, name));
        let st = state.clone();
        engine.register_fn(name, move |x: &mut LazyArray, m: Map| {
            like(&st, x, Scalar::Float(v), Some(m), name)
        });
    }
    let full_like = |st: Ctx| {
        move |x: &mut LazyArray, v: Dynamic, m: Option<Map>| -> Res<LazyArray> {
            let s =
                scalar_of(&v).ok_or_else(|| wrong_type("full_like", "a number or bool fill value", &v))?;
            like(&st, x, s, m, "full_like")
        }
    };
    let f = full_like(state.clone());
    engine.register_fn("full_like", move |x: &mut LazyArray, v: Dynamic| f(x, v, None));
    let f = full_like(state.clone());
    engine.register_fn("full_like", move |x: &mut LazyArray, v: Dynamic, m: Map| f(x, v, Some(m)));
    let st = state.clone();
    engine.register_fn("randint", move |low: Dynamic, high: Dynamic, shape: Dynamic| {
        randint(&st, &low, &high, &shape, None)
    });
    let st = state.clone();
    engine.register_fn("randint", move |low: Dynamic, high: Dynamic, shape: Dynamic, m: Map| {
        randint(&st, &low, &high, &shape, Some(m))
    });
}
