//! `dask.array` in Rhai: the lazy `Array` and the local `ndarray` (a
//! computed array, or a block inside `map_blocks`). Both answer the same
//! operators, functions and reductions; on an `Array` they build graph
//! layers, on an `ndarray` they run at once.

use std::sync::Arc;

use brisk_engine::array::elementwise::{self, BinOp, UnOp};
use brisk_engine::array::reduce::{self, BlockPlace, Reduction};
use brisk_engine::array::{ArrayError, Chunk, fmt_shape, norm_axes, norm_axis};
use brisk_engine::collections::array::{self as arr, Array, AxisChunks, ChunkSpec, Operand};
use brisk_engine::staging::Staged;
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, Map};

use super::args::{ctx, wrong_type};
use super::array_args::{
    LocalArg, Opts, St, arrays, axes_arg, chunks_arg, dtype_arg, err, float_of, index_arg, int_of, ints,
    lazy, lazy_operand, local_result, need, random_seed, scalar_of,
};
use super::array_create::to_nested;
use super::write;
use crate::error::runtime;
use crate::print::array_repr;
use crate::state::SessionState;
use crate::types::LazyArray;

type Res<T> = Result<T, Box<EvalAltResult>>;

// ----- arguments -----

// ----- operations on either kind -----

fn is_lazy(ds: &[&Dynamic]) -> bool {
    ds.iter().any(|d| d.is::<LazyArray>())
}

fn binary(st: &St, op: BinOp, a: &Dynamic, b: &Dynamic) -> Res<Dynamic> {
    if is_lazy(&[a, b]) {
        let state = need(st)?;
        let (x, y) = (lazy_operand(state, a, op.symbol())?, lazy_operand(state, b, op.symbol())?);
        let r = arr::binary(&ctx(state), op, &x, &y).map_err(err)?;
        return Ok(Dynamic::from(LazyArray::new(r)));
    }
    let (x, y) = (LocalArg::of(a, op.symbol())?, LocalArg::of(b, op.symbol())?);
    Ok(local_result(elementwise::binary(op, x.operand(), y.operand()).map_err(err)?))
}

fn matmul(st: &St, a: &Dynamic, b: &Dynamic) -> Res<Dynamic> {
    if is_lazy(&[a, b]) {
        let state = need(st)?;
        let as_array = |d: &Dynamic| -> Res<Array> {
            match lazy_operand(state, d, "@")? {
                Operand::Array(x) => Ok(x),
                Operand::Scalar(_) => Err(wrong_type("@", "an array", d)),
            }
        };
        let r = arr::matmul(&ctx(state), &as_array(a)?, &as_array(b)?).map_err(err)?;
        return Ok(Dynamic::from(LazyArray::new(r)));
    }
    let (Some(x), Some(y)) = (a.read_lock::<Chunk>(), b.read_lock::<Chunk>()) else {
        return Err(wrong_type("@", "two arrays", a));
    };
    let (sx, sy) = (x.shape(), y.shape());
    let k = if x.ndim() == 0 { 0 } else { x.ndim() - 1 };
    if x.ndim() == 0 || y.ndim() == 0 || x.ndim() > 2 || y.ndim() > 2 || sx[k] != sy[0] {
        return Err(runtime(format!(
            "matmul: shapes {} and {} are not aligned (1-d and 2-d arrays, inner lengths equal)",
            fmt_shape(sx),
            fmt_shape(sy)
        )));
    }
    let r = brisk_engine::array::linalg::matmul_sum(std::slice::from_ref(&x), std::slice::from_ref(&y))
        .map_err(err)?;
    Ok(local_result(r))
}

fn unary(st: &St, op: UnOp, a: &Dynamic) -> Res<Dynamic> {
    if let Some(x) = a.read_lock::<LazyArray>() {
        let state = need(st)?;
        let r = arr::unary(&ctx(state), op, &x.a).map_err(err)?;
        return Ok(Dynamic::from(LazyArray::new(r)));
    }
    match a.read_lock::<Chunk>() {
        Some(c) => Ok(local_result(elementwise::unary(op, &c).map_err(err)?)),
        None => Err(wrong_type(op.name(), "an array", a)),
    }
}

fn where_(st: &St, c: &Dynamic, a: &Dynamic, b: &Dynamic) -> Res<Dynamic> {
    if is_lazy(&[c, a, b]) {
        let state = need(st)?;
        let ops = [
            lazy_operand(state, c, "where")?,
            lazy_operand(state, a, "where")?,
            lazy_operand(state, b, "where")?,
        ];
        let r = arr::where_(&ctx(state), &ops[0], &ops[1], &ops[2]).map_err(err)?;
        return Ok(Dynamic::from(LazyArray::new(r)));
    }
    let (k, x, y) = (LocalArg::of(c, "where")?, LocalArg::of(a, "where")?, LocalArg::of(b, "where")?);
    Ok(local_result(elementwise::where_(k.operand(), x.operand(), y.operand()).map_err(err)?))
}

/// `round(x, decimals)` as NumPy computes it: scaled by 10^decimals,
/// rounded half to even, scaled back (integers only move for negative
/// decimals, and stay integers).
fn round_to(st: &St, x: &Dynamic, decimals: i64) -> Res<Dynamic> {
    let dtype = match (x.read_lock::<LazyArray>(), x.read_lock::<Chunk>()) {
        (Some(a), _) => a.a.dtype,
        (_, Some(c)) => c.dtype(),
        _ => return Err(wrong_type("round", "an array", x)),
    };
    let exp = i32::try_from(decimals.unsigned_abs()).map_err(|_| runtime("round: decimals out of range"))?;
    let f = Dynamic::from_float(10f64.powi(exp));
    if !dtype.is_float() {
        if decimals >= 0 {
            return Ok(x.clone());
        }
        let r = unary(st, UnOp::Round, &binary(st, BinOp::Div, x, &f)?)?;
        return astype(st, &binary(st, BinOp::Mul, &r, &f)?, dtype.name());
    }
    if decimals >= 0 {
        binary(st, BinOp::Div, &unary(st, UnOp::Round, &binary(st, BinOp::Mul, x, &f)?)?, &f)
    } else {
        binary(st, BinOp::Mul, &unary(st, UnOp::Round, &binary(st, BinOp::Div, x, &f)?)?, &f)
    }
}

fn astype(st: &St, a: &Dynamic, dtype: &str) -> Res<Dynamic> {
    let t = dtype_arg(&Dynamic::from(dtype.to_string()))?;
    if let Some(x) = a.read_lock::<LazyArray>() {
        let state = need(st)?;
        return Ok(Dynamic::from(LazyArray::new(arr::astype(&ctx(state), &x.a, t).map_err(err)?)));
    }
    match a.read_lock::<Chunk>() {
        Some(c) => Ok(Dynamic::from(c.astype(t))),
        None => Err(wrong_type("astype", "an array", a)),
    }
}

/// Options of a reduction: `axis`, `keepdims`, `split_every`, `ddof`.
fn reduce_call(
    st: &St,
    red: Reduction,
    x: &Dynamic,
    axis: Option<&Dynamic>,
    opts: Option<Map>,
) -> Res<Dynamic> {
    let (axis, opts) = match axis {
        Some(d) if d.is_map() => (None, Some(d.clone().cast::<Map>())),
        other => (other.cloned(), opts),
    };
    let o = Opts::new(opts, red.name(), &["axis", "keepdims", "split_every", "ddof"])?;
    let axis = match (axis, o.get("axis")) {
        (Some(a), _) => axes_arg(&a)?,
        (None, Some(a)) => axes_arg(a)?,
        (None, None) => None,
    };
    let keepdims = o.flag("keepdims")?;
    let ddof = match o.get("ddof") {
        Some(d) => u32::try_from(int_of(d, "ddof")?)
            .map_err(|_| runtime("ddof must be a small non-negative integer"))?,
        None => 0,
    };
    let red = match red {
        Reduction::Var { .. } => Reduction::Var { ddof },
        Reduction::Std { .. } => Reduction::Std { ddof },
        Reduction::NanVar { .. } => Reduction::NanVar { ddof },
        Reduction::NanStd { .. } => Reduction::NanStd { ddof },
        r => r,
    };
    let split = o.split_every()?;
    if let Some(a) = x.read_lock::<LazyArray>() {
        let state = need(st)?;
        let r = arr::reduction(&ctx(state), &a.a, red, axis.as_deref(), keepdims, split).map_err(err)?;
        return Ok(Dynamic::from(LazyArray::new(r)));
    }
    let Some(c) = x.read_lock::<Chunk>().map(|c| c.clone()) else {
        return Err(wrong_type(red.name(), "an array", x));
    };
    Ok(local_result(local_reduce(red, &c, axis.as_deref(), keepdims).map_err(err)?))
}

/// A reduction of a local array, through the same kernels as the tree.
fn local_reduce(
    red: Reduction,
    c: &Chunk,
    axis: Option<&[i64]>,
    keepdims: bool,
) -> Result<Chunk, ArrayError> {
    let nd = c.ndim();
    let axes = match axis {
        None => (0..nd).collect(),
        Some(a) => norm_axes(a, nd)?,
    };
    if red.is_arg() && axes.len() != 1 && axes.len() != nd {
        return Err(ArrayError::Value(format!(
            "{} takes one axis or none, got {} axes",
            red.name(),
            axes.len()
        )));
    }
    let place = BlockPlace { offsets: vec![0; nd], shape: c.shape().to_vec() };
    let p = reduce::partial(red, c, &axes, &place)?;
    reduce::finalize(red, &p, &axes, keepdims, red.out_dtype(c.dtype()))
}

fn transpose(st: &St, x: &Dynamic, axes: Option<Vec<i64>>) -> Res<Dynamic> {
    if let Some(a) = x.read_lock::<LazyArray>() {
        let state = need(st)?;
        let r = arr::transpose(&ctx(state), &a.a, axes.as_deref()).map_err(err)?;
        return Ok(Dynamic::from(LazyArray::new(r)));
    }
    let Some(c) = x.read_lock::<Chunk>().map(|c| c.clone()) else {
        return Err(wrong_type("transpose", "an array", x));
    };
    let nd = c.ndim();
    let perm: Vec<usize> = match axes {
        None => (0..nd).rev().collect(),
        Some(a) => a.iter().map(|&i| norm_axis(i, nd)).collect::<Result<_, _>>().map_err(err)?,
    };
    Ok(Dynamic::from(brisk_engine::array::shape::transpose(&c, &perm).map_err(err)?))
}

// ----- indexing and linear algebra -----

/// A Rhai array of integers inside the brackets: NumPy's fancy indexing
/// along axis 0 (`x[[1, 5, 7]]`). Other arrays (ranges, `()`) index axis
/// by axis, as `x.slice([...])`.
fn fancy(index: &Dynamic) -> Option<Vec<i64>> {
    let a = index.read_lock::<RArray>()?;
    a.iter().map(|d| d.as_int().ok()).collect()
}

/// The rows `rows` of a computed array (negative from the end).
fn take_local(c: &Chunk, rows: &[i64]) -> Res<Dynamic> {
    let Some(&n) = c.shape().first() else {
        return Err(runtime("too many indices for array: array is 0-dimensional, but 1 were indexed"));
    };
    let keep = rows.iter().map(|&i| arr::row_index(i, n).map_err(err)).collect::<Res<Vec<usize>>>()?;
    Ok(local_result(brisk_engine::array::shape::take_rows(c, &keep).map_err(err)?))
}

/// `x[i]`, or with an array of integers `x[[i, j, k]]` (fancy).
fn index(st: &St, x: &LazyArray, index: &Dynamic) -> Res<Dynamic> {
    match fancy(index) {
        Some(rows) => {
            Ok(Dynamic::from(LazyArray::new(arr::take(&ctx(need(st)?), &x.a, &rows).map_err(err)?)))
        }
        None => slice(st, &Dynamic::from(x.clone()), index),
    }
}

fn slice(st: &St, x: &Dynamic, index: &Dynamic) -> Res<Dynamic> {
    let idx = index_arg(index)?;
    if let Some(a) = x.read_lock::<LazyArray>() {
        let state = need(st)?;
        let r = arr::slice(&ctx(state), &a.a, &idx).map_err(err)?;
        return Ok(Dynamic::from(LazyArray::new(r)));
    }
    let Some(c) = x.read_lock::<Chunk>().map(|c| c.clone()) else {
        return Err(wrong_type("slice", "an array", x));
    };
    let ranges = arr::local_ranges(&idx, c.shape()).map_err(err)?;
    Ok(local_result(brisk_engine::array::shape::slice(&c, &ranges).map_err(err)?.to_contiguous()))
}

/// `x.map_overlap(f, #{depth, boundary, dtype})`: `f` runs on each block
/// grown by `depth` elements of its neighbours (a number for every axis,
/// or one per axis), and the halos are trimmed off its result, as
/// `da.map_overlap`. `boundary` is `"none"` (the default, as Dask's),
/// `"reflect"`, `"periodic"` or a number.
fn map_overlap(state: &SessionState, x: &LazyArray, f: &rhai::FnPtr, m: Map) -> Res<LazyArray> {
    let o = Opts::new(Some(m), "map_overlap", &["depth", "boundary", "dtype"])?;
    let nd = x.a.ndim();
    let depth: Vec<usize> = match o.get("depth") {
        None => return Err(runtime("map_overlap needs depth (a number, or one per axis)")),
        Some(d) => {
            let each = match d.read_lock::<RArray>() {
                Some(list) => list.iter().map(|v| int_of(v, "depth")).collect::<Res<Vec<_>>>()?,
                None => vec![int_of(d, "depth")?; nd],
            };
            each.into_iter()
                .map(|k| {
                    usize::try_from(k).map_err(|_| runtime(format!("map_overlap: depth {k} is negative")))
                })
                .collect::<Res<Vec<_>>>()?
        }
    };
    let boundary = match o.get("boundary") {
        None => arr::Boundary::None,
        Some(b) => match b.clone().into_string().ok().as_deref() {
            Some("none") => arr::Boundary::None,
            Some("reflect") => arr::Boundary::Reflect,
            Some("periodic") => arr::Boundary::Periodic,
            Some(other) => {
                return Err(runtime(format!(
                    "map_overlap: unknown boundary \"{other}\" (\"none\", \"reflect\", \"periodic\" or a number)"
                )));
            }
            None => arr::Boundary::Constant(
                scalar_of(b).ok_or_else(|| wrong_type("map_overlap", "a boundary name or a number", b))?,
            ),
        },
    };
    let (grown, halos) = arr::overlap(&ctx(state), &x.a, &depth, boundary).map_err(err)?;
    let mut opts = Map::new();
    if let Some(d) = o.get("dtype") {
        opts.insert("dtype".into(), d.clone());
    }
    let mapped = map_blocks(state, &LazyArray::new(grown), f, Some(opts))?;
    Ok(LazyArray::new(arr::trim(&ctx(state), &mapped.a, &halos).map_err(err)?))
}

/// `x.map_blocks(|block| ...)`: the closure runs on every block (an
/// `ndarray`) on the workers; `#{chunks, dtype}` describe its output when
/// it differs from the input's.
fn map_blocks(state: &SessionState, x: &LazyArray, f: &rhai::FnPtr, m: Option<Map>) -> Res<LazyArray> {
    let o = Opts::new(m, "map_blocks", &["chunks", "dtype", "drop_axis"])?;
    let drop: Vec<usize> = match o.get("drop_axis") {
        None => Vec::new(),
        Some(d) => norm_axes(&axes_arg(d)?.unwrap_or_default(), x.a.ndim()).map_err(err)?,
    };
    let (udf, token) = super::args::shipped(state, f)?;
    let chunks = match o.get("chunks") {
        None => None,
        Some(d) => {
            // Explicit sizes per axis, as Dask's `chunks=` for map_blocks.
            let spec = chunks_arg(d)?;
            let ChunkSpec::PerAxis(axes) = spec else {
                return Err(runtime("map_blocks: chunks must give the block sizes of every axis"));
            };
            let mut out = Vec::with_capacity(axes.len());
            for (k, a) in axes.into_iter().enumerate() {
                out.push(match a {
                    AxisChunks::Sizes(v) => v,
                    AxisChunks::Size(n) if n >= 0 => {
                        vec![n as usize; x.a.numblocks().get(k).copied().unwrap_or(1)]
                    }
                    _ => return Err(runtime("map_blocks: chunks must give the block sizes of every axis")),
                });
            }
            Some(out)
        }
    };
    let label = udf.label.clone();
    let dtype = o.dtype(x.a.dtype)?;
    let f = arr::BlockFn { func: brisk_engine::ops::Func::Udf(udf), label, token };
    let r = arr::map_blocks(&ctx(state), &x.a, &f, chunks, &drop, dtype).map_err(err)?;
    Ok(LazyArray { a: r })
}

// ----- creation -----

// ----- summaries -----

// ----- registration -----

macro_rules! on_pairs {
    ($engine:ident, $name:expr, $f:ident; $(($A:ty, $B:ty)),* $(,)?) => {
        $( {
            let f = $f.clone();
            $engine.register_fn($name, move |a: $A, b: $B| -> Res<Dynamic> { f(&Dynamic::from(a), &Dynamic::from(b)) });
        } )*
    };
}

const BINOPS: [(&str, BinOp); 17] = [
    ("+", BinOp::Add),
    ("-", BinOp::Sub),
    ("*", BinOp::Mul),
    ("/", BinOp::Div),
    ("%", BinOp::Rem),
    ("**", BinOp::Pow),
    (">", BinOp::Gt),
    (">=", BinOp::Ge),
    ("<", BinOp::Lt),
    ("<=", BinOp::Le),
    ("==", BinOp::Eq),
    ("!=", BinOp::Ne),
    ("&", BinOp::And),
    ("|", BinOp::Or),
    ("maximum", BinOp::Maximum),
    ("minimum", BinOp::Minimum),
    ("floor_divide", BinOp::FloorDiv),
];

const REDUCTIONS: [(&str, Reduction); 18] = [
    ("sum", Reduction::Sum),
    ("prod", Reduction::Prod),
    ("min", Reduction::Min),
    ("max", Reduction::Max),
    ("mean", Reduction::Mean),
    ("std", Reduction::Std { ddof: 0 }),
    ("variance", Reduction::Var { ddof: 0 }),
    ("argmin", Reduction::ArgMin),
    ("argmax", Reduction::ArgMax),
    ("any", Reduction::Any),
    ("all", Reduction::All),
    ("nansum", Reduction::NanSum),
    ("nanprod", Reduction::NanProd),
    ("nanmin", Reduction::NanMin),
    ("nanmax", Reduction::NanMax),
    ("nanmean", Reduction::NanMean),
    ("nanstd", Reduction::NanStd { ddof: 0 }),
    ("nanvar", Reduction::NanVar { ddof: 0 }),
];

const FUNCTIONS: [(&str, UnOp); 18] = [
    ("sqrt", UnOp::Sqrt),
    ("exp", UnOp::Exp),
    ("log", UnOp::Log),
    ("log10", UnOp::Log10),
    ("abs", UnOp::Abs),
    ("sin", UnOp::Sin),
    ("cos", UnOp::Cos),
    ("tan", UnOp::Tan),
    ("tanh", UnOp::Tanh),
    ("floor", UnOp::Floor),
    ("ceil", UnOp::Ceil),
    ("round", UnOp::Round),
    ("isnan", UnOp::IsNan),
    ("isfinite", UnOp::IsFinite),
    ("isinf", UnOp::IsInf),
    ("log1p", UnOp::Log1p),
    ("expm1", UnOp::Expm1),
    ("sign", UnOp::Sign),
];

/// What both kinds of array answer: operators, functions, reductions, properties.
fn register_common<T: Clone + Send + Sync + 'static>(engine: &mut Engine, state: &St) {
    for (name, red) in REDUCTIONS {
        let st = state.clone();
        engine
            .register_fn(name, move |x: &mut T| reduce_call(&st, red, &Dynamic::from(x.clone()), None, None));
        let st = state.clone();
        engine.register_fn(name, move |x: &mut T, axis: Dynamic| {
            reduce_call(&st, red, &Dynamic::from(x.clone()), Some(&axis), None)
        });
        let st = state.clone();
        engine.register_fn(name, move |x: &mut T, axis: Dynamic, opts: Map| {
            reduce_call(&st, red, &Dynamic::from(x.clone()), Some(&axis), Some(opts))
        });
    }
    for (name, op) in FUNCTIONS {
        let st = state.clone();
        engine.register_fn(name, move |x: &mut T| unary(&st, op, &Dynamic::from(x.clone())));
    }
    let st = state.clone();
    engine.register_fn("-", move |x: T| unary(&st, UnOp::Neg, &Dynamic::from(x)));
    let st = state.clone();
    engine.register_fn("!", move |x: T| unary(&st, UnOp::Not, &Dynamic::from(x)));
    let st = state.clone();
    engine.register_fn("clip", move |x: &mut T, lo: Dynamic, hi: Dynamic| -> Res<Dynamic> {
        let x = Dynamic::from(x.clone());
        let lower = if lo.is_unit() { x } else { binary(&st, BinOp::Maximum, &x, &lo)? };
        if hi.is_unit() { Ok(lower) } else { binary(&st, BinOp::Minimum, &lower, &hi) }
    });
    let st = state.clone();
    engine.register_fn("round", move |x: &mut T, decimals: i64| {
        round_to(&st, &Dynamic::from(x.clone()), decimals)
    });
    let st = state.clone();
    engine.register_fn("astype", move |x: &mut T, dtype: &str| astype(&st, &Dynamic::from(x.clone()), dtype));
    let st = state.clone();
    engine.register_fn("transpose", move |x: &mut T| transpose(&st, &Dynamic::from(x.clone()), None));
    let st = state.clone();
    engine.register_fn("transpose", move |x: &mut T, axes: RArray| -> Res<Dynamic> {
        let axes = axes.iter().map(|a| int_of(a, "axis")).collect::<Res<Vec<_>>>()?;
        transpose(&st, &Dynamic::from(x.clone()), Some(axes))
    });
    let st = state.clone();
    engine.register_get("T", move |x: &mut T| transpose(&st, &Dynamic::from(x.clone()), None));
    let st = state.clone();
    engine.register_fn("where", move |c: T, a: Dynamic, b: Dynamic| where_(&st, &Dynamic::from(c), &a, &b));
}

// The help text of what this file registers: `array_docs.rs`.

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    engine.register_type_with_name::<LazyArray>("Array");
    engine.register_type_with_name::<Chunk>("ndarray");
    let some: St = Some(state.clone());
    register_common::<LazyArray>(engine, &some);

    register_local_with(engine, &some);
    super::array_create::register(engine, state);
    super::array_more::register(engine, state);
    for (sym, op) in BINOPS {
        let st: St = Some(state.clone());
        let f = Arc::new(move |a: &Dynamic, b: &Dynamic| binary(&st, op, a, b));
        on_pairs!(engine, sym, f;
            (LazyArray, LazyArray), (LazyArray, i64), (LazyArray, f64), (LazyArray, bool), (LazyArray, Chunk),
            (i64, LazyArray), (f64, LazyArray), (bool, LazyArray), (Chunk, LazyArray),
        );
    }

    for name in ["@", "dot", "matmul"] {
        let st: St = Some(state.clone());
        let f = Arc::new(move |a: &Dynamic, b: &Dynamic| matmul(&st, a, b));
        on_pairs!(engine, name, f; (LazyArray, LazyArray), (LazyArray, Chunk), (Chunk, LazyArray));
    }

    let st = state.clone();
    engine.register_fn("map_blocks", move |x: &mut LazyArray, f: rhai::FnPtr| map_blocks(&st, x, &f, None));
    let st = state.clone();
    engine.register_fn("map_overlap", move |x: &mut LazyArray, f: rhai::FnPtr, m: Map| {
        map_overlap(&st, x, &f, m)
    });
    let st = state.clone();
    engine.register_fn("map_blocks", move |x: &mut LazyArray, f: rhai::FnPtr, m: Map| {
        map_blocks(&st, x, &f, Some(m))
    });

    // Boolean masks and unique values: lengths unknown until computed.
    let st = state.clone();
    engine.register_fn("mask", move |x: &mut LazyArray, cond: Dynamic| -> Res<LazyArray> {
        let c = lazy(&st, &cond, "mask")?;
        let r = arr::mask(&ctx(&st), &x.a, &c).map_err(err)?;
        Ok(LazyArray::new(r))
    });
    engine.register_fn("mask", |x: &mut Chunk, cond: Chunk| -> Res<Dynamic> {
        Ok(local_result(brisk_engine::array::shape::mask(x, &cond).map_err(err)?))
    });
    let st = state.clone();
    engine.register_fn("unique", move |x: Dynamic| -> Res<Dynamic> {
        if let Some(c) = x.read_lock::<Chunk>() {
            return Ok(Dynamic::from(brisk_engine::array::shape::unique(&c)));
        }
        let r = arr::unique(&ctx(&st), &lazy(&st, &x, "unique")?).map_err(err)?;
        Ok(Dynamic::from(LazyArray::new(r)))
    });
    let st = state.clone();
    engine.register_fn("compute_chunk_sizes", move |x: &mut LazyArray| -> Res<LazyArray> {
        if !x.a.unknown {
            return Ok(x.clone());
        }
        let (layer, keys) = arr::chunk_size_tasks(&x.a);
        let sizes = st
            .compute(&[layer], &keys)?
            .iter()
            .map(|v| match v {
                brisk_engine::Value::Int(n) => Ok(*n as usize),
                other => Err(runtime(format!("a chunk size came back as {}", other.type_name()))),
            })
            .collect::<Res<Vec<_>>>()?;
        Ok(LazyArray::new(x.a.with_chunk_sizes(sizes).map_err(err)?))
    });

    let zarr = |st: Arc<SessionState>| {
        move |path: &str, m: Option<Map>| -> Res<LazyArray> {
            let o = Opts::new(m, "from_zarr", &["chunks"])?;
            let spec = o.get("chunks").map(chunks_arg).transpose()?;
            arr::from_zarr(&ctx(&st), std::path::Path::new(path), spec.as_ref())
                .map(LazyArray::new)
                .map_err(err)
        }
    };
    let f = zarr(state.clone());
    engine.register_fn("from_zarr", move |path: &str| f(path, None));
    let f = zarr(state.clone());
    engine.register_fn("from_zarr", move |path: &str, m: Map| f(path, Some(m)));
    // The store is written into a staging folder and renamed into place.
    let to_zarr = |st: Arc<SessionState>| {
        move |x: &mut LazyArray, path: &str, m: Option<Map>| -> Res<()> {
            let mode = write::mode(m, "to_zarr")?;
            let staged = Staged::store("to_zarr", std::path::Path::new(path), mode).map_err(write::err)?;
            let (layer, keys) = arr::to_zarr(&ctx(&st), &x.a, &staged).map_err(err)?;
            write::run(&st, staged, layer, &keys).map(|_| ())
        }
    };
    let f = to_zarr(state.clone());
    engine.register_fn("to_zarr", move |x: &mut LazyArray, path: &str| f(x, path, None));
    let f = to_zarr(state.clone());
    engine.register_fn("to_zarr", move |x: &mut LazyArray, path: &str, m: Map| f(x, path, Some(m)));
    let st = state.clone();
    engine.register_fn("store", move |x: LazyArray, path: &str| {
        store(&st, vec![Dynamic::from(x)], vec![Dynamic::from(path.to_string())], None)
    });
    let st = state.clone();
    engine.register_fn("store", move |xs: RArray, paths: RArray| store(&st, xs, paths, None));
    let st = state.clone();
    engine.register_fn("store", move |xs: RArray, paths: RArray, m: Map| store(&st, xs, paths, Some(m)));

    // Joining and reshaping.
    let join = |st: Arc<SessionState>, stack: bool| {
        move |xs: RArray, axis: i64| -> Res<LazyArray> {
            let what = if stack { "stack" } else { "concatenate" };
            let arrays = xs.iter().map(|d| lazy(&st, d, what)).collect::<Res<Vec<_>>>()?;
            let r = if stack {
                arr::stack(&ctx(&st), &arrays, axis)
            } else {
                arr::concatenate(&ctx(&st), &arrays, axis)
            }
            .map_err(err)?;
            Ok(LazyArray::new(r))
        }
    };
    for (name, is_stack) in [("concatenate", false), ("stack", true)] {
        let f = join(state.clone(), is_stack);
        engine.register_fn(name, move |xs: RArray| f(xs, 0));
        let f = join(state.clone(), is_stack);
        engine.register_fn(name, move |xs: RArray, axis: i64| f(xs, axis));
    }
    let st = state.clone();
    engine.register_fn("reshape", move |x: &mut LazyArray, shape: Dynamic| -> Res<LazyArray> {
        let items: Vec<Dynamic> = match shape.read_lock::<RArray>() {
            Some(a) => a.to_vec(),
            None => vec![shape.clone()],
        };
        let dims = items.iter().map(|d| int_of(d, "a dimension")).collect::<Res<Vec<_>>>()?;
        let r = arr::reshape(&ctx(&st), &x.a, &dims).map_err(err)?;
        Ok(LazyArray { a: r })
    });
    let st = state.clone();
    engine.register_fn("cumsum", move |x: &mut LazyArray, axis: i64| -> Res<LazyArray> {
        let r = arr::cumsum(&ctx(&st), &x.a, axis).map_err(err)?;
        Ok(LazyArray { a: r })
    });
    let st = state.clone();
    engine.register_fn("histogram", move |x: Dynamic, m: Map| -> Res<RArray> {
        let o = Opts::new(Some(m), "histogram", &["bins", "range"])?;
        let bins = match o.get("bins") {
            Some(d) => usize::try_from(int_of(d, "bins")?)
                .map_err(|_| runtime("histogram: bins must be positive"))?,
            None => 10,
        };
        let Some(range) = o.get("range").and_then(|r| r.read_lock::<RArray>().map(|a| a.to_vec())) else {
            return Err(runtime("histogram needs range: [lo, hi] (as Dask's, to stay lazy)"));
        };
        let [lo, hi] = range.as_slice() else {
            return Err(runtime("histogram: range must be [lo, hi]"));
        };
        let (c, e) = arr::histogram(
            &ctx(&st),
            &lazy(&st, &x, "histogram")?,
            bins,
            float_of(lo, "lo")?,
            float_of(hi, "hi")?,
        )
        .map_err(err)?;
        Ok(arrays(vec![c, e]))
    });

    // Indexing.
    let st: St = Some(state.clone());
    engine.register_fn("slice", move |x: &mut LazyArray, index: Dynamic| {
        slice(&st, &Dynamic::from(x.clone()), &index)
    });
    let st: St = Some(state.clone());
    engine.register_indexer_get(move |x: &mut LazyArray, i: Dynamic| index(&st, x, &i));

    // Dask's block view: `x.blocks()` lists every block (C order) as an
    // array of one block; `x.blocks([i, j])` (or `x.blocks(i)`) is one.
    let st = state.clone();
    engine.register_fn("blocks", move |x: &mut LazyArray| -> Res<RArray> {
        let all = arr::all_blocks(&ctx(&st), &x.a).map_err(err)?;
        Ok(all.into_iter().map(|b| Dynamic::from(LazyArray { a: b })).collect())
    });
    let st = state.clone();
    engine.register_fn("blocks", move |x: &mut LazyArray, index: Dynamic| -> Res<LazyArray> {
        let idx: Vec<i64> = match index.clone().into_array() {
            Ok(items) => items.iter().map(|d| int_of(d, "block index")).collect::<Res<_>>()?,
            Err(_) => vec![int_of(&index, "block index")?],
        };
        let b = arr::block_at(&ctx(&st), &x.a, &idx).map_err(err)?;
        Ok(LazyArray { a: b })
    });

    // Linear algebra.
    let st = state.clone();
    engine.register_fn("qr", move |x: Dynamic| -> Res<RArray> {
        let (q, r) = arr::qr(&ctx(&st), &lazy(&st, &x, "qr")?).map_err(err)?;
        Ok(arrays(vec![q, r]))
    });
    let st = state.clone();
    engine.register_fn("svd", move |x: Dynamic| -> Res<RArray> {
        let (u, s, v) = arr::svd(&ctx(&st), &lazy(&st, &x, "svd")?).map_err(err)?;
        Ok(arrays(vec![u, s, v]))
    });
    let compressed = |st: Arc<SessionState>| {
        move |x: Dynamic, k: i64, m: Option<Map>| -> Res<RArray> {
            let o = Opts::new(m, "svd_compressed", &["seed", "oversample", "n_power_iter"])?;
            let seed = match o.get("seed") {
                Some(d) => int_of(d, "seed")? as u64,
                None => random_seed(),
            };
            let count = |key: &str, default: usize| -> Res<usize> {
                match o.get(key) {
                    Some(d) => usize::try_from(int_of(d, key)?)
                        .map_err(|_| runtime(format!("{key} must not be negative"))),
                    None => Ok(default),
                }
            };
            let k = usize::try_from(k).map_err(|_| runtime("svd_compressed: k must be positive"))?;
            let (u, s, v) = arr::svd_compressed(
                &ctx(&st),
                &lazy(&st, &x, "svd_compressed")?,
                k,
                seed,
                count("oversample", 10)?,
                count("n_power_iter", 0)?,
            )
            .map_err(err)?;
            Ok(arrays(vec![u, s, v]))
        }
    };
    let f = compressed(state.clone());
    engine.register_fn("svd_compressed", move |x: Dynamic, k: i64| f(x, k, None));
    let f = compressed(state.clone());
    engine.register_fn("svd_compressed", move |x: Dynamic, k: i64, m: Map| f(x, k, Some(m)));
    let st = state.clone();
    engine.register_fn("solve", move |a: Dynamic, b: Dynamic| -> Res<Dynamic> {
        let r = arr::solve(&ctx(&st), &lazy(&st, &a, "solve")?, &lazy(&st, &b, "solve")?).map_err(err)?;
        Ok(Dynamic::from(LazyArray::new(r)))
    });
    let st = state.clone();
    engine.register_fn("lstsq", move |a: Dynamic, b: Dynamic| -> Res<RArray> {
        let (x, res, rank, s) =
            arr::lstsq(&ctx(&st), &lazy(&st, &a, "lstsq")?, &lazy(&st, &b, "lstsq")?).map_err(err)?;
        Ok(arrays(vec![x, res, rank, s]))
    });
    let td = |st: Arc<SessionState>| {
        move |a: Dynamic, b: Dynamic, axes: Dynamic| -> Res<LazyArray> {
            let (xa, xb) = (lazy(&st, &a, "tensordot")?, lazy(&st, &b, "tensordot")?);
            let (pa, pb): (Vec<i64>, Vec<i64>) = if let Ok(n) = axes.as_int() {
                let n = usize::try_from(n).map_err(|_| runtime("tensordot: axes must not be negative"))?;
                if n > xa.ndim() || n > xb.ndim() {
                    return Err(runtime(format!("tensordot: cannot contract {n} axes")));
                }
                (((xa.ndim() - n)..xa.ndim()).map(|d| d as i64).collect(), (0..n).map(|d| d as i64).collect())
            } else {
                let pair = axes.read_lock::<RArray>().map(|v| v.to_vec()).unwrap_or_default();
                let [l, r] = pair.as_slice() else {
                    return Err(runtime("tensordot: axes must be an integer or [[axes of a], [axes of b]]"));
                };
                (axes_arg(l)?.unwrap_or_default(), axes_arg(r)?.unwrap_or_default())
            };
            let r = arr::tensordot(&ctx(&st), &xa, &xb, &pa, &pb).map_err(err)?;
            Ok(LazyArray::new(r))
        }
    };
    let f = td(state.clone());
    engine.register_fn("tensordot", move |a: Dynamic, b: Dynamic| f(a, b, Dynamic::from_int(2)));
    let f = td(state.clone());
    engine.register_fn("tensordot", move |a: Dynamic, b: Dynamic, axes: Dynamic| f(a, b, axes));
    let st = state.clone();
    engine.register_fn("norm", move |x: Dynamic| -> Res<Dynamic> {
        let r = arr::norm(&ctx(&st), &lazy(&st, &x, "norm")?).map_err(err)?;
        Ok(Dynamic::from(LazyArray::new(r)))
    });

    // Where the blocks live.
    let st = state.clone();
    engine.register_fn("to_gpu", move |x: &mut LazyArray| -> Res<LazyArray> {
        Ok(LazyArray { a: arr::to_gpu(&ctx(&st), &x.a).map_err(err)? })
    });
    let st = state.clone();
    engine.register_fn("to_cpu", move |x: &mut LazyArray| -> Res<LazyArray> {
        Ok(LazyArray { a: arr::to_cpu(&ctx(&st), &x.a).map_err(err)? })
    });

    // Lazy-only: layout, compute, persist.
    let st = state.clone();
    engine.register_fn("rechunk", move |x: &mut LazyArray, chunks: Dynamic| -> Res<LazyArray> {
        let r = arr::rechunk(&ctx(&st), &x.a, &chunks_arg(&chunks)?).map_err(err)?;
        Ok(LazyArray { a: r })
    });
    engine.register_get("chunks", |x: &mut LazyArray| -> RArray {
        x.a.chunks
            .iter()
            .map(|c| Dynamic::from_array(c.iter().map(|&n| Dynamic::from_int(n as i64)).collect()))
            .collect()
    });
    engine.register_get("numblocks", |x: &mut LazyArray| ints(&x.a.numblocks()));
    engine.register_get("shape", |x: &mut LazyArray| -> RArray {
        // An unknown length is NaN, as Dask's.
        x.a.shape()
            .iter()
            .enumerate()
            .map(|(d, &n)| {
                if d == 0 && x.a.unknown {
                    Dynamic::from_float(f64::NAN)
                } else {
                    Dynamic::from_int(n as i64)
                }
            })
            .collect()
    });
    engine.register_get("ndim", |x: &mut LazyArray| x.a.ndim() as i64);
    engine.register_get("size", |x: &mut LazyArray| x.a.size() as i64);
    engine.register_get("nbytes", |x: &mut LazyArray| x.a.nbytes() as i64);
    engine.register_get("dtype", |x: &mut LazyArray| x.a.dtype.name().to_string());
    crate::collection::register::<LazyArray>(engine, state);
    engine.register_fn("to_string", |x: &mut LazyArray| array_repr(x));
    engine.register_fn("to_debug", |x: &mut LazyArray| array_repr(x));
}

/// Local arrays (`ndarray`) on every engine, a worker's too, so that
/// `map_blocks` closures can work on their block.
pub fn register_local(engine: &mut Engine) {
    register_local_with(engine, &None);
}

/// The `ndarray` API; with a session, operations that meet a lazy array
/// build graph layers.
fn register_local_with(engine: &mut Engine, st: &St) {
    engine.register_type_with_name::<Chunk>("ndarray");
    register_common::<Chunk>(engine, st);
    for (sym, op) in BINOPS {
        let s2 = st.clone();
        let f = Arc::new(move |a: &Dynamic, b: &Dynamic| binary(&s2, op, a, b));
        on_pairs!(engine, sym, f;
            (Chunk, Chunk), (Chunk, i64), (Chunk, f64), (Chunk, bool), (i64, Chunk), (f64, Chunk), (bool, Chunk),
        );
    }
    // Matrix products: `a @ b` (a custom operator, at `*`'s precedence), `dot`, `matmul`.
    if let Err(e) = engine.register_custom_operator("@", 180) {
        eprintln!("warning: the @ operator is unavailable: {e}");
    }
    for name in ["@", "dot", "matmul"] {
        let s2 = st.clone();
        let f = Arc::new(move |a: &Dynamic, b: &Dynamic| matmul(&s2, a, b));
        on_pairs!(engine, name, f; (Chunk, Chunk));
    }
    let s2 = st.clone();
    engine.register_fn("slice", move |x: &mut Chunk, index: Dynamic| {
        slice(&s2, &Dynamic::from(x.clone()), &index)
    });
    engine.register_get("shape", |c: &mut Chunk| ints(c.shape()));
    engine.register_get("ndim", |c: &mut Chunk| c.ndim() as i64);
    engine.register_get("size", |c: &mut Chunk| c.len() as i64);
    engine.register_get("nbytes", |c: &mut Chunk| c.nbytes() as i64);
    engine.register_get("dtype", |c: &mut Chunk| c.dtype().name().to_string());
    engine.register_fn("to_array", |c: &mut Chunk| to_nested(c));
    engine.register_fn("to_string", |c: &mut Chunk| crate::print::chunk_text(c));
    engine.register_fn("to_debug", |c: &mut Chunk| crate::print::chunk_text(c));
    engine.register_indexer_get(|c: &mut Chunk, rows: RArray| -> Res<Dynamic> {
        let rows = rows
            .iter()
            .map(|d| d.as_int().map_err(|t| runtime(format!("fancy indexing takes integers, not {t}"))))
            .collect::<Res<Vec<i64>>>()?;
        take_local(c, &rows)
    });
    engine.register_indexer_get(|c: &mut Chunk, i: i64| -> Res<Dynamic> {
        let n = c.shape().first().copied().ok_or_else(|| runtime("a 0-d array cannot be indexed"))?;
        let j = if i < 0 { i + n as i64 } else { i };
        if j < 0 || j >= n as i64 {
            return Err(runtime(format!("index {i} is out of bounds for axis 0 with size {n}")));
        }
        let mut ranges: Vec<_> = c
            .shape()
            .iter()
            .map(|&len| (brisk_engine::array::shape::AxisSlice { start: 0, stop: len, step: 1 }, false))
            .collect();
        ranges[0] = (
            brisk_engine::array::shape::AxisSlice { start: j as usize, stop: j as usize + 1, step: 1 },
            true,
        );
        Ok(local_result(brisk_engine::array::shape::slice(c, &ranges).map_err(err)?))
    });
}

/// `store(sources, targets)`: every array into its Zarr store in one
/// graph, each store staged and then renamed into place.
fn store(st: &SessionState, xs: RArray, paths: RArray, m: Option<Map>) -> Res<()> {
    if xs.len() != paths.len() {
        return Err(runtime(format!("store: {} sources but {} targets", xs.len(), paths.len())));
    }
    let mode = write::mode(m, "store")?;
    let mut seen = std::collections::BTreeSet::new();
    let (mut staged, mut layers, mut keys) = (Vec::new(), Vec::new(), Vec::new());
    for (x, p) in xs.iter().zip(&paths) {
        let x = x
            .read_lock::<LazyArray>()
            .map(|x| x.a.clone())
            .ok_or_else(|| wrong_type("store", "an array of Arrays as sources", x))?;
        let path =
            p.clone().into_string().map_err(|_| wrong_type("store", "an array of paths as targets", p))?;
        // The same store however it is spelt ("a.zarr", "./a.zarr").
        let resolved = std::path::absolute(&path).unwrap_or_else(|_| std::path::PathBuf::from(&path));
        if !seen.insert(resolved) {
            return Err(runtime(format!("store: the target {path} is given twice")));
        }
        let s = Staged::store("store", std::path::Path::new(&path), mode).map_err(write::err)?;
        let (layer, k) = arr::to_zarr(&ctx(st), &x, &s).map_err(err)?;
        staged.push(s);
        layers.push(layer);
        keys.extend(k);
    }
    st.compute(&layers, &keys)?;
    for s in staged {
        s.commit().map_err(write::err)?;
    }
    Ok(())
}
