//! Bags in Rhai (`dask.bag`): `from_sequence`, `read_text`, the record-wise
//! transforms (closures shipped to the workers, or native string stages
//! that never call back into Rhai), aggregates (lazy values, as Dask's
//! `Item`), and `groupby` through a hash shuffle.

use std::path::PathBuf;
use std::sync::Arc;

use brisk_engine::bag::agg::KeyBy;
use brisk_engine::bag::{Agg, Stage};
use brisk_engine::collections::array::Ctx;
use brisk_engine::collections::bag::{self as cb, Bag, BagError};
use brisk_engine::graph::Tokenizer;
use brisk_engine::runner::Udf;
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, FnPtr, Map};

use super::args::options;
use super::args::shipped as closure;
use super::args::{bytes_arg, positive};
use crate::collection::compute_all;
use crate::convert::{to_dynamic, to_value};
use crate::error::runtime;
use crate::print::bag_repr;
use crate::state::SessionState;
use crate::types::{Delayed, LazyBag, LazyFrame};

type Res<T> = Result<T, Box<EvalAltResult>>;

fn err(e: BagError) -> Box<EvalAltResult> {
    runtime(e.to_string())
}

fn ctx(state: &SessionState) -> Ctx {
    Ctx { annotations: state.annotations() }
}

fn from_sequence(state: &SessionState, seq: RArray, m: Option<Map>) -> Res<LazyBag> {
    let m = options(m, "from_sequence", &["npartitions"])?;
    let n = m.get("npartitions").map(|d| positive(d, "from_sequence: npartitions")).transpose()?;
    let records = seq
        .iter()
        .enumerate()
        .map(|(i, d)| to_value(d, &format!("record {i} of from_sequence")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(runtime)?;
    Ok(LazyBag { b: cb::from_sequence(&ctx(state), records, n.map(|n| n as usize)).map_err(err)? })
}

/// Files named by a path, a glob, or an array of either.
fn expand_paths(d: &Dynamic) -> Res<Vec<PathBuf>> {
    let patterns: Vec<String> = if let Some(a) = d.read_lock::<RArray>() {
        a.iter()
            .map(|x| x.clone().into_string().map_err(|_| runtime("read_text: paths must be strings")))
            .collect::<Res<_>>()?
    } else {
        vec![
            d.clone()
                .into_string()
                .map_err(|_| runtime("read_text: the path must be a string or an array of strings"))?,
        ]
    };
    let mut out = Vec::new();
    for p in patterns {
        if p.contains(['*', '?', '[']) {
            let found =
                glob::glob(&p).map_err(|e| runtime(format!("read_text: bad pattern \"{p}\": {e}")))?;
            let mut files: Vec<PathBuf> = found.filter_map(Result::ok).filter(|f| f.is_file()).collect();
            if files.is_empty() {
                return Err(runtime(format!("read_text: no files match \"{p}\"")));
            }
            files.sort();
            out.extend(files);
        } else {
            out.push(PathBuf::from(p));
        }
    }
    Ok(out)
}

fn read_text(path: &Dynamic, m: Option<Map>) -> Res<LazyBag> {
    let m = options(m, "read_text", &["blocksize"])?;
    let blocksize = m
        .get("blocksize")
        .filter(|d| !d.is_unit())
        .map(|d| bytes_arg(d, "read_text: blocksize"))
        .transpose()?;
    Ok(LazyBag { b: cb::read_text(&expand_paths(path)?, blocksize).map_err(err)? })
}

fn stage(b: &LazyBag, s: Stage, token: &str) -> LazyBag {
    LazyBag { b: b.b.with_stage(s, token) }
}

/// Run `f` on each bag closure-stage kind.
fn closure_stage(state: &SessionState, b: &LazyBag, f: &FnPtr, make: fn(Arc<Udf>) -> Stage) -> Res<LazyBag> {
    let (udf, token) = closure(state, f)?;
    Ok(stage(b, make(udf), &token))
}

fn item(state: &SessionState, b: &LazyBag, agg: Agg, token: &str) -> Delayed {
    let (layer, key) = cb::aggregate(&ctx(state), &b.b, agg, token);
    Delayed { layer, key }
}

fn records_bag(state: &SessionState, b: &LazyBag, agg: Agg, token: &str) -> LazyBag {
    LazyBag { b: cb::aggregate_bag(&ctx(state), &b.b, agg, token) }
}

fn key_by(state: &SessionState, key: &Dynamic) -> Res<(KeyBy, String)> {
    if let Some(f) = key.read_lock::<FnPtr>() {
        let (udf, token) = closure(state, &f)?;
        return Ok((KeyBy::Closure(udf), token));
    }
    if key.is_int() || key.is_string() {
        let v = to_value(key, "topk's key").map_err(runtime)?;
        return Ok((KeyBy::Item(v), key.to_string()));
    }
    Err(runtime(format!("topk: key must be an index, a map key or a closure, not {}", key.type_name())))
}

fn topk(state: &SessionState, b: &LazyBag, k: i64, m: Option<Map>) -> Res<LazyBag> {
    let m = options(m, "topk", &["key"])?;
    if k < 0 {
        return Err(runtime(format!("topk: k must be 0 or more, got {k}")));
    }
    let (key, token) = match m.get("key") {
        Some(d) => key_by(state, d)?,
        None => (KeyBy::Record, String::new()),
    };
    Ok(records_bag(state, b, Agg::TopK { k: k as usize, key }, &format!("{k}/{token}")))
}

fn foldby(
    state: &SessionState,
    b: &LazyBag,
    key: &FnPtr,
    binop: &FnPtr,
    initial: &Dynamic,
    m: Option<Map>,
) -> Res<LazyBag> {
    let m = options(m, "foldby", &["combine", "combine_initial"])?;
    let (key, kt) = closure(state, key)?;
    let (binop, bt) = closure(state, binop)?;
    let initial = to_value(initial, "foldby's initial value").map_err(runtime)?;
    let (combine, ct) = match m.get("combine").and_then(|d| d.read_lock::<FnPtr>().map(|f| f.clone())) {
        Some(f) => closure(state, &f)?,
        None if m.contains_key("combine") => return Err(runtime("foldby: combine must be a closure")),
        None => (binop.clone(), bt.clone()),
    };
    let combine_initial = match m.get("combine_initial") {
        Some(d) => to_value(d, "foldby's combine_initial").map_err(runtime)?,
        None => initial.clone(),
    };
    let mut t = Tokenizer::new();
    t.str(&kt).str(&bt).str(&ct).value(&initial).value(&combine_initial);
    let agg = Agg::FoldBy { key, binop, initial, combine, combine_initial };
    Ok(records_bag(state, b, agg, &t.finish()))
}

fn take(state: &SessionState, b: &LazyBag, n: i64) -> Res<RArray> {
    if n < 0 {
        return Err(runtime(format!("take: n must be 0 or more, got {n}")));
    }
    // As Dask: from the first partition only.
    // Its own token: these keys must not be the whole bag's.
    let token = Tokenizer::new().str(&b.b.token).str("take-first-partition").finish();
    let first = Bag { parts: Arc::new(b.b.parts.iter().take(1).cloned().collect()), token, ..b.b.clone() };
    let (layer, key) = cb::finalize(&first);
    let d = Delayed { layer, key };
    let out = compute_all(state, &[Dynamic::from(d)])?;
    let all = out.into_iter().next().and_then(|d| d.try_cast::<RArray>()).unwrap_or_default();
    Ok(all.into_iter().take(n as usize).collect())
}

fn to_textfiles(state: &SessionState, b: &LazyBag, dir: &str) -> Res<RArray> {
    let (layer, keys) = cb::to_textfiles(&ctx(state), &b.b, std::path::Path::new(dir)).map_err(err)?;
    let paths = state.compute(&[layer], &keys)?;
    Ok(paths.iter().map(to_dynamic).collect())
}

/// `to_dataframe()`: columns and types from the first partition's records
/// (Dask computes its `meta` from the first partition too).
fn to_dataframe(state: &SessionState, b: &LazyBag) -> Res<LazyFrame> {
    let first = take(state, b, i64::MAX)?;
    if first.is_empty() {
        return Err(runtime("to_dataframe: the first partition is empty, so the columns are unknown"));
    }
    let mut names: Vec<String> = Vec::new();
    for (i, r) in first.iter().enumerate() {
        let m = r.read_lock::<Map>().ok_or_else(|| {
            let t = to_value(r, "").map(|v| v.type_name()).unwrap_or("value");
            runtime(format!("to_dataframe: record {i} is {t}, not a map"))
        })?;
        for k in m.keys() {
            if !names.iter().any(|n| n == k.as_str()) {
                names.push(k.to_string());
            }
        }
    }
    let mut cols = Vec::new();
    for n in &names {
        let vals = first
            .iter()
            .map(|r| {
                let v =
                    r.read_lock::<Map>().and_then(|m| m.get(n.as_str()).cloned()).unwrap_or(Dynamic::UNIT);
                to_value(&v, "a record's value").map_err(runtime)
            })
            .collect::<Res<Vec<_>>>()?;
        cols.push((
            n.clone(),
            brisk_engine::frame::values::infer_dtype(n, &vals)
                .map_err(|e| runtime(format!("to_dataframe: {e}")))?,
        ));
    }
    let (layer, keys) = b.b.partitions(&ctx(state));
    let schema = brisk_engine::frame::dtype::Schema::new(cols);
    Ok(LazyFrame {
        f: brisk_engine::collections::frame::from_records(&ctx(state), layer, keys, &b.b.token, schema),
    })
}

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    engine.register_type_with_name::<LazyBag>("Bag");
    let st = state.clone();
    engine.register_fn("from_sequence", move |s: RArray| from_sequence(&st, s, None));
    let st = state.clone();
    engine.register_fn("from_sequence", move |s: RArray, m: Map| from_sequence(&st, s, Some(m)));
    let st = state.clone();
    engine.register_fn("from_sequence", move |r: std::ops::Range<i64>| {
        from_sequence(&st, r.map(Dynamic::from_int).collect(), None)
    });
    let st = state.clone();
    engine.register_fn("from_sequence", move |r: std::ops::Range<i64>, m: Map| {
        from_sequence(&st, r.map(Dynamic::from_int).collect(), Some(m))
    });
    engine.register_fn("read_text", |p: Dynamic| read_text(&p, None));
    engine.register_fn("read_text", |p: Dynamic, m: Map| read_text(&p, Some(m)));

    let st = state.clone();
    engine.register_fn("map", move |b: &mut LazyBag, f: FnPtr| closure_stage(&st, b, &f, Stage::Map));
    let st = state.clone();
    engine.register_fn("filter", move |b: &mut LazyBag, f: FnPtr| closure_stage(&st, b, &f, Stage::Filter));
    let st = state.clone();
    engine.register_fn("map_partitions", move |b: &mut LazyBag, f: FnPtr| {
        closure_stage(&st, b, &f, Stage::MapPartitions)
    });
    engine.register_fn("flatten", |b: &mut LazyBag| stage(b, Stage::Flatten, ""));
    engine.register_fn("pluck", |b: &mut LazyBag, key: Dynamic| -> Res<LazyBag> {
        if !(key.is_int() || key.is_string()) {
            return Err(runtime(format!(
                "pluck: the key must be an index or a map key, not {}",
                key.type_name()
            )));
        }
        let v = to_value(&key, "pluck's key").map_err(runtime)?;
        Ok(stage(b, Stage::Pluck(v), &key.to_string()))
    });
    engine.register_fn("str_split", |b: &mut LazyBag| stage(b, Stage::StrSplit(None), ""));
    engine.register_fn("str_split", |b: &mut LazyBag, sep: &str| -> Res<LazyBag> {
        if sep.is_empty() {
            return Err(runtime("str_split: empty separator (as Python's str.split)"));
        }
        Ok(stage(b, Stage::StrSplit(Some(Arc::from(sep))), &format!("sep:{sep}")))
    });
    engine.register_fn("str_lower", |b: &mut LazyBag| stage(b, Stage::StrLower, ""));
    engine.register_fn("str_strip", |b: &mut LazyBag| stage(b, Stage::StrStrip, ""));

    for (name, agg) in
        [("count", Agg::Count), ("sum", Agg::Sum), ("mean", Agg::Mean), ("min", Agg::Min), ("max", Agg::Max)]
    {
        let st = state.clone();
        engine.register_fn(name, move |b: &mut LazyBag| item(&st, b, agg.clone(), ""));
    }
    let st = state.clone();
    engine.register_fn("frequencies", move |b: &mut LazyBag| records_bag(&st, b, Agg::Frequencies, ""));
    let st = state.clone();
    engine.register_fn("distinct", move |b: &mut LazyBag| records_bag(&st, b, Agg::Distinct, ""));
    let st = state.clone();
    engine.register_fn("topk", move |b: &mut LazyBag, k: i64| topk(&st, b, k, None));
    let st = state.clone();
    engine.register_fn("topk", move |b: &mut LazyBag, k: i64, m: Map| topk(&st, b, k, Some(m)));
    let st = state.clone();
    engine.register_fn("foldby", move |b: &mut LazyBag, key: FnPtr, binop: FnPtr, initial: Dynamic| {
        foldby(&st, b, &key, &binop, &initial, None)
    });
    let st = state.clone();
    engine.register_fn(
        "foldby",
        move |b: &mut LazyBag, key: FnPtr, binop: FnPtr, initial: Dynamic, m: Map| {
            foldby(&st, b, &key, &binop, &initial, Some(m))
        },
    );
    let st = state.clone();
    engine.register_fn("groupby", move |b: &mut LazyBag, key: FnPtr| -> Res<LazyBag> {
        let (udf, token) = closure(&st, &key)?;
        Ok(LazyBag { b: cb::groupby(&ctx(&st), &b.b, udf, &token) })
    });
    let st = state.clone();
    engine.register_fn("reduction", move |b: &mut LazyBag, per: FnPtr, agg: FnPtr| -> Res<Delayed> {
        let (per_partition, pt) = closure(&st, &per)?;
        let (aggregate, at) = closure(&st, &agg)?;
        Ok(item(&st, b, Agg::Reduction { per_partition, aggregate }, &format!("{pt}/{at}")))
    });
    let st = state.clone();
    engine.register_fn("take", move |b: &mut LazyBag, n: i64| take(&st, b, n));
    let st = state.clone();
    engine.register_fn("to_dataframe", move |b: &mut LazyBag| to_dataframe(&st, b));
    let st = state.clone();
    engine.register_fn("to_textfiles", move |b: &mut LazyBag, dir: &str| to_textfiles(&st, b, dir));
    engine.register_get("npartitions", |b: &mut LazyBag| b.b.npartitions() as i64);
    crate::collection::register::<LazyBag>(engine, state);
    engine.register_fn("to_string", |b: &mut LazyBag| bag_repr(b));
    engine.register_fn("to_debug", |b: &mut LazyBag| bag_repr(b));
}
