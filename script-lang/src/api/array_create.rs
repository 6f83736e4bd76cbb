//! Array creation in Rhai: random, full, ranges, `eye`, local data, and
//! `.npy`/Zarr files (and writing them).

use std::sync::Arc;

use brisk_engine::array::create::Dist;
use brisk_engine::array::{Chunk, DType, Scalar};
use brisk_engine::collections::array::{self as arr};
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, Map};

use super::args::{ctx, wrong_type};
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::LazyArray;

type Res<T> = Result<T, Box<EvalAltResult>>;
use super::array_args::{Opts, dtype_arg, err, float_of, int_of, random_seed, scalar_of, shape_arg};
use super::fndoc::{FnDoc, doc};

/// This area's entries of the API reference (`docs::all` chains the areas
/// in the order of the guide).
pub(super) const DOCS: &[FnDoc] = &[
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
        "from_npy",
        "from_npy(path, #{chunks}) -> Array",
        "A lazy array over a NumPy .npy file: the header is read at once, each block reads only its own rows.",
        "arange(10).to_npy(\"/tmp/brisk-doc.npy\");\nfrom_npy(\"/tmp/brisk-doc.npy\", #{chunks: 4}).sum().compute()",
    ),
    doc(
        "to_npy",
        "x.to_npy(path)",
        "Compute the array and write it as a .npy file that NumPy reads (C order, little-endian). An existing file is replaced whole, as NumPy's save does: the data goes to a hidden file renamed over it, so a failed write keeps the old one. An array that reads path itself cannot write it.",
        "ones([2, 3]).to_npy(\"/tmp/brisk-doc-ones.npy\")",
    ),
];

pub(super) fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    // Files.
    let npy = |st: Arc<SessionState>| {
        move |path: &str, m: Option<Map>| -> Res<LazyArray> {
            let o = Opts::new(m, "from_npy", &["chunks"])?;
            arr::from_npy(&ctx(&st), std::path::Path::new(path), &o.chunks()?)
                .map(LazyArray::new)
                .map_err(err)
        }
    };
    let f = npy(state.clone());
    engine.register_fn("from_npy", move |path: &str| f(path, None));
    let f = npy(state.clone());
    engine.register_fn("from_npy", move |path: &str, m: Map| f(path, Some(m)));
    let st = state.clone();
    engine.register_fn("to_npy", move |x: &mut LazyArray, path: &str| -> Res<()> {
        let read = brisk_engine::graph::files_read(std::slice::from_ref(&x.a.layer));
        brisk_engine::staging::refuse_inputs(
            "to_npy",
            std::path::Path::new(path),
            read.iter().map(String::as_str),
        )
        .map_err(|e| runtime(e.to_string()))?;
        let mut out = crate::collection::compute_all(&st, &[Dynamic::from(x.clone())])?;
        let v = out.pop().unwrap_or(Dynamic::UNIT);
        let c = match crate::convert::to_value(&v, "the array")? {
            brisk_engine::Value::Array(c) => Chunk::clone(&c),
            other => {
                let s = match other {
                    brisk_engine::Value::Float(f) => Scalar::Float(f),
                    brisk_engine::Value::Int(i) => Scalar::Int(i),
                    brisk_engine::Value::Bool(b) => Scalar::Bool(b),
                    _ => return Err(runtime("to_npy: the result is not an array")),
                };
                Chunk::scalar(s)
            }
        };
        brisk_engine::array::npy::write(std::path::Path::new(path), &c).map_err(err)
    });
    engine.register_fn("to_npy", |c: &mut Chunk, path: &str| -> Res<()> {
        brisk_engine::array::npy::write(std::path::Path::new(path), c).map_err(err)
    });

    // Creation.
    for normal in [false, true] {
        let name = if normal { "normal" } else { "random" };
        let st = state.clone();
        engine.register_fn(name, move |shape: Dynamic| random(&st, &shape, None, normal));
        let st = state.clone();
        engine.register_fn(name, move |shape: Dynamic, m: Map| random(&st, &shape, Some(m), normal));
    }
    for (name, v) in [("zeros", Scalar::Float(0.0)), ("ones", Scalar::Float(1.0))] {
        let st = state.clone();
        engine.register_fn(name, move |shape: Dynamic| full(&st, &shape, v, None, name));
        let st = state.clone();
        engine.register_fn(name, move |shape: Dynamic, m: Map| full(&st, &shape, v, Some(m), name));
    }
    let st = state.clone();
    engine.register_fn("full", move |shape: Dynamic, v: Dynamic| -> Res<LazyArray> {
        let s = scalar_of(&v).ok_or_else(|| wrong_type("full", "a number or bool fill value", &v))?;
        full(&st, &shape, s, None, "full")
    });
    let st = state.clone();
    engine.register_fn("full", move |shape: Dynamic, v: Dynamic, m: Map| -> Res<LazyArray> {
        let s = scalar_of(&v).ok_or_else(|| wrong_type("full", "a number or bool fill value", &v))?;
        full(&st, &shape, s, Some(m), "full")
    });
    let st = state.clone();
    engine.register_fn("arange", move |stop: Dynamic| {
        arange(&st, &Dynamic::from_int(0), &stop, &Dynamic::from_int(1), None)
    });
    let st = state.clone();
    engine.register_fn("arange", move |start: Dynamic, stop: Dynamic| {
        arange(&st, &start, &stop, &Dynamic::from_int(1), None)
    });
    let st = state.clone();
    engine.register_fn("arange", move |stop: Dynamic, m: Map| {
        arange(&st, &Dynamic::from_int(0), &stop, &Dynamic::from_int(1), Some(m))
    });
    let st = state.clone();
    engine.register_fn("arange", move |start: Dynamic, stop: Dynamic, m: Map| {
        arange(&st, &start, &stop, &Dynamic::from_int(1), Some(m))
    });
    let st = state.clone();
    engine.register_fn("arange", move |start: Dynamic, stop: Dynamic, step: Dynamic| {
        arange(&st, &start, &stop, &step, None)
    });
    let st = state.clone();
    engine.register_fn("arange", move |start: Dynamic, stop: Dynamic, step: Dynamic, m: Map| {
        arange(&st, &start, &stop, &step, Some(m))
    });
    let linspace = |st: Arc<SessionState>| {
        move |a: Dynamic, b: Dynamic, n: Dynamic, m: Option<Map>| -> Res<LazyArray> {
            let o = creation_opts(m, "linspace", &[])?;
            let num = usize::try_from(int_of(&n, "num")?)
                .map_err(|_| runtime("linspace: num must not be negative"))?;
            arr::linspace(
                &ctx(&st),
                float_of(&a, "start")?,
                float_of(&b, "stop")?,
                num,
                &o.chunks()?,
                o.dtype(DType::F64)?,
            )
            .map(LazyArray::new)
            .map_err(err)
        }
    };
    let f = linspace(state.clone());
    engine.register_fn("linspace", move |a: Dynamic, b: Dynamic, n: Dynamic| f(a, b, n, None));
    let f = linspace(state.clone());
    engine.register_fn("linspace", move |a: Dynamic, b: Dynamic, n: Dynamic, m: Map| f(a, b, n, Some(m)));
    let eye = |st: Arc<SessionState>| {
        move |n: Dynamic, m: Option<Map>| -> Res<LazyArray> {
            let o = creation_opts(m, "eye", &[])?;
            let n = usize::try_from(int_of(&n, "n")?).map_err(|_| runtime("eye: n must not be negative"))?;
            arr::eye(&ctx(&st), n, &o.chunks()?, o.dtype(DType::F64)?).map(LazyArray::new).map_err(err)
        }
    };
    let f = eye(state.clone());
    engine.register_fn("eye", move |n: Dynamic| f(n, None));
    let f = eye(state.clone());
    engine.register_fn("eye", move |n: Dynamic, m: Map| f(n, Some(m)));
    let st = state.clone();
    engine.register_fn("from_array", move |d: Dynamic| from_array(&st, &d, None));
    let st = state.clone();
    engine.register_fn("from_array", move |d: Dynamic, m: Map| from_array(&st, &d, Some(m)));
}

pub(super) fn creation_opts(m: Option<Map>, function: &str, extra: &[&str]) -> Res<Opts> {
    let mut allowed = vec!["chunks", "dtype"];
    allowed.extend_from_slice(extra);
    Opts::new(m, function, &allowed)
}

pub(super) fn random(state: &SessionState, shape: &Dynamic, m: Option<Map>, normal: bool) -> Res<LazyArray> {
    let function = if normal { "normal" } else { "random" };
    let o = creation_opts(m, function, if normal { &["seed", "mean", "std"] } else { &["seed"] })?;
    let seed = match o.get("seed") {
        Some(d) => int_of(d, "seed")? as u64,
        None => random_seed(),
    };
    let dist = if normal {
        Dist::Normal { mean: o.float("mean", 0.0)?, std: o.float("std", 1.0)? }
    } else {
        Dist::Uniform
    };
    let shape = shape_arg(shape, "shape")?;
    arr::random(&ctx(state), &shape, &o.chunks()?, seed, dist, o.dtype(DType::F64)?)
        .map(LazyArray::new)
        .map_err(err)
}

pub(super) fn full(
    state: &SessionState,
    shape: &Dynamic,
    v: Scalar,
    m: Option<Map>,
    function: &str,
) -> Res<LazyArray> {
    let o = creation_opts(m, function, &[])?;
    let default = match (function, v) {
        ("full", Scalar::Int(_)) => DType::I64,
        ("full", Scalar::Bool(_)) => DType::Bool,
        _ => DType::F64,
    };
    let shape = shape_arg(shape, "shape")?;
    arr::full(&ctx(state), &shape, &o.chunks()?, v, o.dtype(default)?).map(LazyArray::new).map_err(err)
}

pub(super) fn arange(
    state: &SessionState,
    start: &Dynamic,
    stop: &Dynamic,
    step: &Dynamic,
    m: Option<Map>,
) -> Res<LazyArray> {
    let o = creation_opts(m, "arange", &[])?;
    let ints = [start, stop, step].iter().all(|d| d.is_int());
    let dtype = o.dtype(if ints { DType::I64 } else { DType::F64 })?;
    let (a, b, s) = (float_of(start, "start")?, float_of(stop, "stop")?, float_of(step, "step")?);
    arr::arange(&ctx(state), a, b, s, &o.chunks()?, dtype).map(LazyArray::new).map_err(err)
}

pub(super) fn from_array(state: &SessionState, data: &Dynamic, m: Option<Map>) -> Res<LazyArray> {
    let o = creation_opts(m, "from_array", &[])?;
    let c = match data.read_lock::<Chunk>() {
        Some(c) => c.clone(),
        None => chunk_from_nested(data)?,
    };
    let c = match o.get("dtype") {
        Some(d) => c.astype(dtype_arg(d)?),
        None => c,
    };
    arr::from_chunk(&ctx(state), &c, &o.chunks()?).map(LazyArray::new).map_err(err)
}

/// A local array from nested Rhai arrays of numbers (all rows equally
/// long); the type is the widest element type found.
pub fn chunk_from_nested(d: &Dynamic) -> Res<Chunk> {
    let mut shape = Vec::new();
    let mut cur = d.clone();
    while let Some(a) = cur.read_lock::<RArray>().map(|a| a.clone()) {
        shape.push(a.len());
        if shape.len() > 32 {
            return Err(runtime("arrays of more than 32 dimensions are not supported"));
        }
        match a.first() {
            Some(x) => cur = x.clone(),
            None => break,
        }
    }
    let mut flat = Vec::new();
    flatten(d, &shape, 0, &mut flat)?;
    let dtype = flat.iter().fold(DType::Bool, |t, s| {
        DType::promote(
            t,
            match s {
                Scalar::Bool(_) => DType::Bool,
                Scalar::Int(_) => DType::I64,
                Scalar::Float(_) => DType::F64,
            },
        )
    });
    let dtype = if flat.is_empty() { DType::F64 } else { dtype };
    let res = match dtype {
        DType::Bool => {
            Chunk::from_vec(&shape, flat.iter().map(|s| matches!(s, Scalar::Bool(true))).collect())
        }
        DType::I64 => Chunk::from_vec(&shape, flat.iter().map(|s| s.as_f64() as i64).collect()),
        _ => Chunk::from_vec(&shape, flat.iter().map(|s| s.as_f64()).collect()),
    };
    res.map_err(err)
}

pub(super) fn flatten(d: &Dynamic, shape: &[usize], depth: usize, out: &mut Vec<Scalar>) -> Res<()> {
    if depth == shape.len() {
        return match scalar_of(d) {
            Some(Scalar::Int(i)) => {
                out.push(Scalar::Int(i));
                Ok(())
            }
            Some(s) => {
                out.push(s);
                Ok(())
            }
            None => Err(wrong_type("from_array", "nested arrays of numbers", d)),
        };
    }
    let Some(a) = d.read_lock::<RArray>() else {
        return Err(runtime(format!("from_array: ragged nesting, expected an array at depth {depth}")));
    };
    if a.len() != shape[depth] {
        return Err(runtime(format!(
            "from_array: ragged rows, a row of length {} where {} was expected at depth {depth}",
            a.len(),
            shape[depth]
        )));
    }
    for x in a.iter() {
        flatten(x, shape, depth + 1, out)?;
    }
    Ok(())
}

/// Nested Rhai arrays of a local array's elements.
pub fn to_nested(c: &Chunk) -> Dynamic {
    fn go(shape: &[usize], items: &[Scalar], next: &mut usize) -> Dynamic {
        let Some((&n, rest)) = shape.split_first() else {
            let s = items.get(*next).copied();
            *next += 1;
            return match s {
                Some(Scalar::Bool(b)) => Dynamic::from_bool(b),
                Some(Scalar::Int(i)) => Dynamic::from_int(i),
                Some(Scalar::Float(f)) => Dynamic::from_float(f),
                None => Dynamic::UNIT,
            };
        };
        Dynamic::from_array((0..n).map(|_| go(rest, items, next)).collect())
    }
    go(c.shape(), &c.scalars(), &mut 0)
}
