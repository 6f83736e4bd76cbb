//! Bags in Rhai (`dask.bag`): `from_sequence`, `read_text`, the record-wise
//! transforms (closures shipped to the workers, or native string stages
//! that never call back into Rhai), aggregates (lazy values, as Dask's
//! `Item`), and `groupby` through a hash shuffle.

use std::path::PathBuf;
use std::sync::Arc;

use brisk_engine::bag::agg::KeyBy;
use brisk_engine::bag::{Agg, Stage};
use brisk_engine::collections::bag::{self as cb, Bag, BagError};
use brisk_engine::graph::Tokenizer;
use brisk_engine::runner::Udf;
use brisk_engine::staging::{Format, Staged};
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, FnPtr, Map};

use super::args::options;
use super::args::shipped as closure;
use super::args::{bytes_arg, ctx, positive};
use super::fndoc::{FnDoc, doc};
use super::write;
use crate::collection::compute_all;
use crate::convert::to_value;
use crate::error::{ApiError, runtime};
use crate::print::bag_repr;
use crate::state::SessionState;
use crate::types::{Delayed, LazyBag, LazyFrame};

type Res<T> = Result<T, Box<EvalAltResult>>;

fn err(e: BagError) -> Box<EvalAltResult> {
    runtime(e.to_string())
}

fn from_sequence(state: &SessionState, seq: RArray, m: Option<Map>) -> Res<LazyBag> {
    let m = options(m, "from_sequence", &["npartitions"])?;
    let n = m.get("npartitions").map(|d| positive(d, "from_sequence: npartitions")).transpose()?;
    let records = seq
        .iter()
        .enumerate()
        .map(|(i, d)| to_value(d, &format!("record {i} of from_sequence")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LazyBag { b: cb::from_sequence(&ctx(state), records, n).map_err(err)? })
}

/// The numbers of a range, refused before they are made if they cannot fit
/// (each is held as a script value and as a task literal).
fn range_items(r: std::ops::Range<i64>) -> Res<RArray> {
    let n = (r.end as i128 - r.start as i128).max(0) as u64;
    let each = (std::mem::size_of::<Dynamic>() + std::mem::size_of::<brisk_engine::Value>()) as u64;
    brisk_engine::memory::check(brisk_engine::memory::times(n, each), || {
        format!("from_sequence of {n} numbers")
    })
    .map_err(|e| runtime(e.to_string()))?;
    Ok(r.map(Dynamic::from_int).collect())
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
                return Err(ApiError::NoMatch { function: "read_text".into(), pattern: p }.into());
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
        let v = to_value(key, "topk's key")?;
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
    let initial = to_value(initial, "foldby's initial value")?;
    let (combine, ct) = match m.get("combine").and_then(|d| d.read_lock::<FnPtr>().map(|f| f.clone())) {
        Some(f) => closure(state, &f)?,
        None if m.contains_key("combine") => return Err(runtime("foldby: combine must be a closure")),
        None => (binop.clone(), bt.clone()),
    };
    let combine_initial = match m.get("combine_initial") {
        Some(d) => to_value(d, "foldby's combine_initial")?,
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

/// The parts go to a staging folder and into `dir` once all are written.
fn to_textfiles(state: &SessionState, b: &LazyBag, dir: &str, m: Option<Map>) -> Res<RArray> {
    let mode = write::mode(m, "to_textfiles")?;
    let mut staged = Staged::parts(Format::Text, std::path::Path::new(dir), mode).map_err(write::err)?;
    let (layer, keys) = cb::to_textfiles(&ctx(state), &b.b, &mut staged).map_err(err)?;
    write::run(state, staged, layer, &keys)
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
                to_value(&v, "a record's value")
            })
            .collect::<Result<Vec<_>, _>>()?;
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

/// This area's entries of the API reference (`docs::all` chains the areas
/// in the order of the guide).
pub(super) const DOCS: &[FnDoc] = &[
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
        "from_sequence([\"a b\", \"b c\"], #{npartitions: 1}).to_textfiles(\"/tmp/brisk-doc-read-text\", #{overwrite: true});\nread_text(\"/tmp/brisk-doc-read-text/*.part\").str_split().flatten().frequencies().compute()",
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
        "b.to_textfiles(dir, #{overwrite, append}) -> array of paths",
        "Write each partition of string records to `dir/N.part`, one record per line; computes now. The parts appear together once all are written. A dir that already holds N.part files is an error unless overwrite: true (removes those files, no others) or append: true (new parts numbered after them); a bag that reads a file inside dir cannot write there.",
        "from_sequence([\"x\", \"y\"], #{npartitions: 2}).to_textfiles(\"/tmp/brisk-doc-to-text\", #{overwrite: true})",
    ),
    doc(
        "npartitions",
        "b.npartitions -> int",
        "The number of partitions.",
        "from_sequence([1, 2, 3, 4], #{npartitions: 2}).npartitions",
    ),
    doc(
        "to_dataframe",
        "b.to_dataframe() -> DataFrame",
        "A frame of a bag of maps, one partition per bag partition. Columns and types come from the first partition (computed now, as Dask computes its meta); a key a record lacks is a missing value.",
        "from_sequence([#{a: 1, b: \"x\"}, #{a: 2}], #{npartitions: 2}).to_dataframe().compute()",
    ),
];

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    engine.register_type_with_name::<LazyBag>("Bag");
    let st = state.clone();
    engine.register_fn("from_sequence", move |s: RArray| from_sequence(&st, s, None));
    let st = state.clone();
    engine.register_fn("from_sequence", move |s: RArray, m: Map| from_sequence(&st, s, Some(m)));
    let st = state.clone();
    engine.register_fn("from_sequence", move |r: std::ops::Range<i64>| {
        from_sequence(&st, range_items(r)?, None)
    });
    let st = state.clone();
    engine.register_fn("from_sequence", move |r: std::ops::Range<i64>, m: Map| {
        from_sequence(&st, range_items(r)?, Some(m))
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
        let v = to_value(&key, "pluck's key")?;
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
    engine.register_fn("to_textfiles", move |b: &mut LazyBag, dir: &str| to_textfiles(&st, b, dir, None));
    let st = state.clone();
    engine.register_fn("to_textfiles", move |b: &mut LazyBag, dir: &str, m: Map| {
        to_textfiles(&st, b, dir, Some(m))
    });
    engine.register_get("npartitions", |b: &mut LazyBag| b.b.npartitions() as i64);
    super::bag_more::register(engine, state);
    crate::collection::register::<LazyBag>(engine, state);
    engine.register_fn("to_string", |b: &mut LazyBag| bag_repr(b));
    engine.register_fn("to_debug", |b: &mut LazyBag| bag_repr(b));
}
