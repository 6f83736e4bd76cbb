//! Script values as array arguments: shapes, axes, chunks, dtypes, option
//! maps, scalars, indexes, and lazy or local operands.

use std::sync::Arc;

use brisk_engine::array::elementwise::Operand as Local;
use brisk_engine::array::{ArrayError, Chunk, DType, Scalar};
use brisk_engine::collections::array::{self as arr, Array, AxisChunks, ChunkSpec, Operand};
use rhai::{Array as RArray, Dynamic, EvalAltResult, Map};

use super::args::{ctx, wrong_type};
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::{LazyArray, type_name};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// The session, where there is one: worker engines have only local arrays.
pub(super) type St = Option<Arc<SessionState>>;

pub(super) fn need(st: &St) -> Res<&SessionState> {
    st.as_deref()
        .ok_or_else(|| runtime("lazy arrays cannot be built inside a task; work on the block's ndarray"))
}

pub(super) fn err(e: ArrayError) -> Box<EvalAltResult> {
    runtime(e.to_string())
}

pub(super) fn int_of(d: &Dynamic, what: &str) -> Res<i64> {
    d.as_int().map_err(|_| runtime(format!("{what} must be an integer, got {}", type_name(d))))
}

pub(super) fn float_of(d: &Dynamic, what: &str) -> Res<f64> {
    if let Ok(i) = d.as_int() {
        return Ok(i as f64);
    }
    d.as_float().map_err(|_| runtime(format!("{what} must be a number, got {}", type_name(d))))
}

/// A shape: an integer or an array of non-negative integers.
pub(super) fn shape_arg(d: &Dynamic, what: &str) -> Res<Vec<usize>> {
    let items: Vec<Dynamic> = match d.read_lock::<RArray>() {
        Some(a) => a.to_vec(),
        None => vec![d.clone()],
    };
    items
        .iter()
        .map(|x| {
            let n = int_of(x, what)?;
            usize::try_from(n).map_err(|_| runtime(format!("{what} must not be negative, got {n}")))
        })
        .collect()
}

/// Axes: an integer or an array of integers; `()` means every axis.
pub(super) fn axes_arg(d: &Dynamic) -> Res<Option<Vec<i64>>> {
    if d.is_unit() {
        return Ok(None);
    }
    if let Some(a) = d.read_lock::<RArray>() {
        return a.iter().map(|x| int_of(x, "axis")).collect::<Res<Vec<_>>>().map(Some);
    }
    Ok(Some(vec![int_of(d, "axis")?]))
}

/// A chunk spec: a number, a shape (with `-1` for a whole axis), explicit
/// block sizes per axis, or `"auto"`.
pub(super) fn chunks_arg(d: &Dynamic) -> Res<ChunkSpec> {
    if d.is_string() {
        return match d.clone().into_string().unwrap_or_default().as_str() {
            "auto" => Ok(ChunkSpec::Auto),
            other => Err(runtime(format!("chunks must be a number, a shape or \"auto\", got \"{other}\""))),
        };
    }
    let axis = |x: &Dynamic| -> Res<AxisChunks> {
        if x.is_string() && x.clone().into_string().unwrap_or_default() == "auto" {
            return Ok(AxisChunks::Auto);
        }
        if let Some(v) = x.read_lock::<RArray>() {
            return Ok(AxisChunks::Sizes(shape_arg(&Dynamic::from_array(v.to_vec()), "a block size")?));
        }
        Ok(AxisChunks::Size(int_of(x, "a chunk size")?))
    };
    if let Some(a) = d.read_lock::<RArray>() {
        return Ok(ChunkSpec::PerAxis(a.iter().map(axis).collect::<Res<Vec<_>>>()?));
    }
    Ok(ChunkSpec::PerAxis(vec![axis(d)?]))
}

pub(super) fn dtype_arg(d: &Dynamic) -> Res<DType> {
    let s = d.clone().into_string().map_err(|_| runtime("dtype must be a string such as \"f64\""))?;
    DType::parse(&s)
        .ok_or_else(|| runtime(format!("unknown dtype \"{s}\" (use \"f64\", \"f32\", \"i64\" or \"bool\")")))
}

/// Options of a call, checked against the keys it accepts.
pub(super) struct Opts(Map);

impl Opts {
    pub(super) fn new(m: Option<Map>, function: &str, allowed: &[&str]) -> Res<Opts> {
        let m = m.unwrap_or_default();
        for k in m.keys() {
            if !allowed.contains(&k.as_str()) {
                return Err(runtime(format!(
                    "{function} has no option \"{k}\" (options: {})",
                    allowed.join(", ")
                )));
            }
        }
        Ok(Opts(m))
    }

    pub(super) fn get(&self, k: &str) -> Option<&Dynamic> {
        self.0.get(k)
    }

    pub(super) fn chunks(&self) -> Res<ChunkSpec> {
        self.get("chunks").map(chunks_arg).unwrap_or(Ok(ChunkSpec::Auto))
    }

    pub(super) fn dtype(&self, default: DType) -> Res<DType> {
        self.get("dtype").map(dtype_arg).unwrap_or(Ok(default))
    }

    pub(super) fn float(&self, k: &str, default: f64) -> Res<f64> {
        self.get(k).map(|d| float_of(d, k)).unwrap_or(Ok(default))
    }

    /// `split_every`: how many partials a tree merges at a time.
    pub(super) fn split_every(&self) -> Res<Option<usize>> {
        self.get("split_every").map(|d| super::args::positive(d, "split_every")).transpose()
    }

    pub(super) fn flag(&self, k: &str) -> Res<bool> {
        match self.get(k) {
            None => Ok(false),
            Some(d) => d.as_bool().map_err(|_| runtime(format!("{k} must be true or false"))),
        }
    }
}

/// A fresh seed when none is given (as NumPy's global state would).
pub(super) fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    h.finish()
}

pub(super) fn scalar_of(d: &Dynamic) -> Option<Scalar> {
    if let Ok(b) = d.as_bool() {
        return Some(Scalar::Bool(b));
    }
    if let Ok(i) = d.as_int() {
        return Some(Scalar::Int(i));
    }
    d.as_float().ok().map(Scalar::Float)
}

/// Whole-axis chunks: a local array as a one-block lazy array.
pub(super) fn whole(c: &Chunk) -> ChunkSpec {
    ChunkSpec::PerAxis(vec![AxisChunks::Size(-1); c.ndim()])
}

pub(super) fn lazy_operand(state: &SessionState, d: &Dynamic, what: &str) -> Res<Operand> {
    if let Some(x) = d.read_lock::<LazyArray>() {
        return Ok(Operand::Array(x.a.clone()));
    }
    if let Some(c) = d.read_lock::<Chunk>() {
        return Ok(Operand::Array(arr::from_chunk(&ctx(state), &c, &whole(&c)).map_err(err)?));
    }
    scalar_of(d).map(Operand::Scalar).ok_or_else(|| wrong_type(what, "an array or a number", d))
}

pub(super) enum LocalArg {
    Chunk(Chunk),
    Scalar(Scalar),
}

impl LocalArg {
    pub(super) fn of(d: &Dynamic, what: &str) -> Res<LocalArg> {
        if let Some(c) = d.read_lock::<Chunk>() {
            return Ok(LocalArg::Chunk(c.clone()));
        }
        scalar_of(d).map(LocalArg::Scalar).ok_or_else(|| wrong_type(what, "an array or a number", d))
    }

    pub(super) fn operand(&self) -> Local<'_> {
        match self {
            LocalArg::Chunk(c) => Local::Chunk(c),
            LocalArg::Scalar(s) => Local::Scalar(*s),
        }
    }
}

/// A local result: 0-d arrays become numbers.
pub(super) fn local_result(c: Chunk) -> Dynamic {
    crate::convert::to_dynamic(&brisk_engine::Value::array(c))
}

/// One entry of an index: a range (`0..10`, `2..=5`), an integer, `()` for
/// a whole axis, or `#{start, stop, step}` for steps.
pub(super) fn index_entry(d: &Dynamic) -> Res<arr::Index> {
    if d.is_unit() {
        return Ok(arr::Index::Full);
    }
    if let Ok(i) = d.as_int() {
        return Ok(arr::Index::Int(i));
    }
    if let Some(r) = d.clone().try_cast::<std::ops::Range<i64>>() {
        return Ok(arr::Index::Range { start: Some(r.start), stop: Some(r.end), step: 1 });
    }
    if let Some(r) = d.clone().try_cast::<std::ops::RangeInclusive<i64>>() {
        let stop = if *r.end() == -1 { None } else { Some(r.end() + 1) };
        return Ok(arr::Index::Range { start: Some(*r.start()), stop, step: 1 });
    }
    if let Some(m) = d.read_lock::<Map>() {
        let o = Opts::new(Some(m.clone()), "slice", &["start", "stop", "step"])?;
        let get = |k: &str| -> Res<Option<i64>> {
            match o.get(k) {
                None => Ok(None),
                Some(v) if v.is_unit() => Ok(None),
                Some(v) => int_of(v, k).map(Some),
            }
        };
        return Ok(arr::Index::Range {
            start: get("start")?,
            stop: get("stop")?,
            step: get("step")?.unwrap_or(1),
        });
    }
    Err(wrong_type("slice", "a range, an integer, () or #{start, stop, step}", d))
}

pub(super) fn index_arg(d: &Dynamic) -> Res<Vec<arr::Index>> {
    match d.read_lock::<RArray>() {
        Some(a) => a.iter().map(index_entry).collect(),
        None => Ok(vec![index_entry(d)?]),
    }
}

pub(super) fn lazy(state: &SessionState, d: &Dynamic, what: &str) -> Res<Array> {
    match lazy_operand(state, d, what)? {
        Operand::Array(a) => Ok(a),
        Operand::Scalar(_) => Err(wrong_type(what, "an array", d)),
    }
}

pub(super) fn arrays(parts: Vec<Array>) -> RArray {
    parts.into_iter().map(|a| Dynamic::from(LazyArray::new(a))).collect()
}

pub(super) fn ints(v: &[usize]) -> RArray {
    v.iter().map(|&n| Dynamic::from_int(n as i64)).collect()
}
