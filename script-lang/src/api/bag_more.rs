//! The bag methods a Dask user reaches for next: `any`/`all`, `std` and
//! `variance`, `fold`, `starmap`, `random_sample`, `zip` and `concat` of
//! bags, `join` with a small sequence, `repartition`, and `parse_json`
//! for records read as text.

use std::sync::Arc;

use brisk_engine::bag::{Agg, Stage};
use brisk_engine::collections::bag::{self as cb, Bag};
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, FnPtr, Map};

use super::args::shipped as closure;
use super::args::{ctx, options};
use super::fndoc::{FnDoc, doc};
use crate::convert::to_value;
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::{Delayed, LazyBag};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference.
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "join",
        "b.join(other, on_self [, on_other]) -> Bag",
        "For each record, an `[item, record]` pair per item of `other` (an array, small enough to send with every task) whose key `on_other(item)` equals the record's `on_self(record)`, as Bag.join (`on_other` defaults to `on_self`).",
        "from_sequence([\"Alice\", \"Bob\"]).join([\"Apple\", \"Banana\", \"Apricot\"], |s| s[0]).compute()",
    ),
    doc(
        "repartition",
        "b.repartition(npartitions) / b.repartition(#{npartitions}) -> Bag",
        "The records in `npartitions` partitions, in their order: fewer as runs of neighbours joined, more as each partition cut evenly, as Bag.repartition.",
        "from_sequence(range(0, 10), #{npartitions: 2}).repartition(5).npartitions",
    ),
    doc(
        "any",
        "b.any() -> Delayed (bool)",
        "Whether any record is true (Python's truthiness: 0, \"\", empty arrays and maps and () are false), as Bag.any.",
        "from_sequence([0, 0, 3]).any().compute()",
    ),
    doc(
        "all",
        "b.all() -> Delayed (bool)",
        "Whether every record is true (Python's truthiness), as Bag.all; true for an empty bag.",
        "from_sequence([1, 2, 0]).all().compute()",
    ),
    doc(
        "fold",
        "b.fold(binop, #{combine, initial}) -> Delayed",
        "Fold each partition with `binop(acc, record)` (from `initial`, or its first record), then the partitions' results with `combine` (default `binop`), as Bag.fold.",
        "from_sequence([1, 2, 3, 4], #{npartitions: 2}).fold(|a, b| a + b, #{initial: 10}).compute()",
    ),
    doc(
        "starmap",
        "b.starmap(f) -> Bag",
        "`f(a, b, ...)` for each record `[a, b, ...]` (an array spread into the arguments), as Bag.starmap.",
        "from_sequence([[1, 2], [3, 4]]).starmap(|x, y| x * y).compute()",
    ),
    doc(
        "random_sample",
        "b.random_sample(prob, #{seed}) -> Bag",
        "Each record kept with probability `prob` (0..=1), as Bag.random_sample; with a seed, the same bag gives the same sample on any scheduler.",
        "from_sequence(range(0, 100)).random_sample(0.1, #{seed: 1}).count().compute() < 100",
    ),
    doc(
        "zip",
        "zip(a, b, ...) -> Bag",
        "Records paired position by position into arrays, as Bag.zip: the bags need as many partitions; where paired partitions differ in length the longer's extra records are dropped, as Python's zip. Up to four bags.",
        "let b = from_sequence([1, 2, 3], #{npartitions: 2});\nzip(b, b.map(|x| x * 10)).compute()",
    ),
    doc(
        "parse_json",
        "parse_json(text) -> value",
        "One JSON text as Rhai values (objects become maps, arrays arrays, null ()), as Python's json.loads: for `read_text(...).map(parse_json)`. Invalid JSON is an error naming the line and column.",
        "parse_json(\"{\\\"a\\\": [1, 2.5, null], \\\"b\\\": \\\"x\\\"}\")",
    ),
];

fn item(state: &SessionState, b: &LazyBag, agg: Agg, token: &str) -> Delayed {
    let (layer, key) = cb::aggregate(&ctx(state), &b.b, agg, token);
    Delayed { layer, key }
}

fn var(state: &SessionState, b: &LazyBag, std: bool, m: Option<Map>) -> Res<Delayed> {
    let what = if std { "std" } else { "variance" };
    let m = options(m, what, &["ddof"])?;
    let ddof = match m.get("ddof") {
        None => 0,
        Some(d) => d
            .as_int()
            .ok()
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| runtime(format!("{what}: ddof must be a small non-negative integer")))?,
    };
    Ok(item(state, b, Agg::Var { ddof, std }, &ddof.to_string()))
}

fn fold(state: &SessionState, b: &LazyBag, binop: &FnPtr, m: Option<Map>) -> Res<Delayed> {
    let m = options(m, "fold", &["combine", "initial"])?;
    let (binop, bt) = closure(state, binop)?;
    let (combine, ct) = match m.get("combine") {
        None => (binop.clone(), bt.clone()),
        Some(f) => {
            let f =
                f.clone().try_cast::<FnPtr>().ok_or_else(|| runtime("fold: combine must be a function"))?;
            closure(state, &f)?
        }
    };
    let initial = m.get("initial").map(|v| to_value(v, "fold's initial")).transpose()?;
    let mut t = brisk_engine::graph::Tokenizer::new();
    t.str(&bt).str(&ct);
    if let Some(v) = &initial {
        t.value(v);
    }
    let token = t.finish();
    Ok(item(state, b, Agg::Fold { binop, combine, initial }, &token))
}

fn random_sample(b: &LazyBag, prob: f64, m: Option<Map>) -> Res<LazyBag> {
    let m = options(m, "random_sample", &["seed"])?;
    if !(0.0..=1.0).contains(&prob) {
        return Err(runtime(format!("random_sample: prob must be between 0 and 1, got {prob}")));
    }
    let seed = match m.get("seed") {
        Some(s) => s.as_int().map_err(|_| runtime("random_sample: seed must be an integer"))? as u64,
        None => super::array_args::random_seed(),
    };
    let stage = Stage::RandomSample { prob, seed };
    Ok(LazyBag { b: b.b.with_stage(stage, &format!("{prob}/{seed}")) })
}

fn bags(xs: &[Dynamic], what: &str) -> Res<Vec<Bag>> {
    xs.iter()
        .enumerate()
        .map(|(i, d)| {
            d.read_lock::<LazyBag>().map(|b| b.b.clone()).ok_or_else(|| {
                runtime(format!("{what}: item {i} is {}, not a Bag", crate::types::type_name(d)))
            })
        })
        .collect()
}

/// `concat([b1, b2, ...])` of bags (`frame_order`'s `concat` hands bags here).
pub(super) fn concat(state: &SessionState, xs: &RArray) -> Res<LazyBag> {
    let b = cb::concat(&ctx(state), &bags(xs, "concat")?).map_err(|e| runtime(e.to_string()))?;
    Ok(LazyBag { b })
}

fn zip(state: &SessionState, xs: &[Dynamic]) -> Res<LazyBag> {
    let b = cb::zip(&ctx(state), &bags(xs, "zip")?).map_err(|e| runtime(e.to_string()))?;
    Ok(LazyBag { b })
}

/// JSON text as Rhai values, as `json.loads` (integers stay integers).
pub fn parse_json(text: &str) -> Res<Dynamic> {
    fn to_dynamic(v: serde_json::Value) -> Dynamic {
        match v {
            serde_json::Value::Null => Dynamic::UNIT,
            serde_json::Value::Bool(b) => Dynamic::from_bool(b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Dynamic::from_int(i),
                None => Dynamic::from_float(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(s) => Dynamic::from(s),
            serde_json::Value::Array(a) => Dynamic::from_array(a.into_iter().map(to_dynamic).collect()),
            serde_json::Value::Object(o) => {
                Dynamic::from_map(o.into_iter().map(|(k, v)| (k.into(), to_dynamic(v))).collect())
            }
        }
    }
    serde_json::from_str::<serde_json::Value>(text)
        .map(to_dynamic)
        .map_err(|e| runtime(format!("parse_json: invalid JSON: {e}")))
}

fn join(state: &SessionState, b: &LazyBag, other: RArray, on: &FnPtr, on_other: &FnPtr) -> Res<LazyBag> {
    let other = other.iter().map(|d| to_value(d, "join: an item of other")).collect::<Result<Vec<_>, _>>()?;
    let (on_self, t1) = closure(state, on)?;
    let (on_other, t2) = closure(state, on_other)?;
    let mut t = brisk_engine::graph::token::Tokenizer::new();
    t.str(&t1).str(&t2);
    other.iter().for_each(|v| {
        t.value(v);
    });
    let stage = Stage::Join { other: Arc::new(other), on_self, on_other };
    Ok(LazyBag { b: b.b.with_stage(stage, &t.finish()) })
}

fn repartition(state: &SessionState, b: &LazyBag, n: i64) -> Res<LazyBag> {
    let n = usize::try_from(n)
        .map_err(|_| runtime(format!("repartition: npartitions must be positive, not {n}")))?;
    Ok(LazyBag { b: cb::repartition(&ctx(state), &b.b, n).map_err(|e| runtime(e.to_string()))? })
}

pub(super) fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    let st = state.clone();
    engine.register_fn("any", move |b: &mut LazyBag| item(&st, b, Agg::Any, ""));
    let st = state.clone();
    engine.register_fn("all", move |b: &mut LazyBag| item(&st, b, Agg::All, ""));
    for (name, std) in [("std", true), ("variance", false)] {
        let st = state.clone();
        engine.register_fn(name, move |b: &mut LazyBag| var(&st, b, std, None));
        let st = state.clone();
        engine.register_fn(name, move |b: &mut LazyBag, m: Map| var(&st, b, std, Some(m)));
    }
    let st = state.clone();
    engine.register_fn("fold", move |b: &mut LazyBag, f: FnPtr| fold(&st, b, &f, None));
    let st = state.clone();
    engine.register_fn("fold", move |b: &mut LazyBag, f: FnPtr, m: Map| fold(&st, b, &f, Some(m)));
    let st = state.clone();
    engine.register_fn("starmap", move |b: &mut LazyBag, f: FnPtr| -> Res<LazyBag> {
        let (udf, token) = closure(&st, &f)?;
        Ok(LazyBag { b: b.b.with_stage(Stage::StarMap(udf), &token) })
    });
    engine.register_fn("random_sample", |b: &mut LazyBag, p: f64| random_sample(b, p, None));
    engine.register_fn("random_sample", |b: &mut LazyBag, p: f64, m: Map| random_sample(b, p, Some(m)));
    let st = state.clone();
    engine
        .register_fn("join", move |b: &mut LazyBag, other: RArray, on: FnPtr| join(&st, b, other, &on, &on));
    let st = state.clone();
    engine.register_fn("join", move |b: &mut LazyBag, other: RArray, on: FnPtr, on_other: FnPtr| {
        join(&st, b, other, &on, &on_other)
    });
    let st = state.clone();
    engine.register_fn("repartition", move |b: &mut LazyBag, n: i64| repartition(&st, b, n));
    let st = state.clone();
    engine.register_fn("repartition", move |b: &mut LazyBag, m: Map| -> Res<LazyBag> {
        let m = options(Some(m), "repartition", &["npartitions"])?;
        let n = m
            .get("npartitions")
            .and_then(|d| d.as_int().ok())
            .ok_or_else(|| runtime("repartition: give #{npartitions: n}"))?;
        repartition(&st, b, n)
    });
    let st = state.clone();
    engine.register_fn("zip", move |a: LazyBag, b: LazyBag| zip(&st, &[Dynamic::from(a), Dynamic::from(b)]));
    let st = state.clone();
    engine.register_fn("zip", move |a: LazyBag, b: LazyBag, c: LazyBag| {
        zip(&st, &[Dynamic::from(a), Dynamic::from(b), Dynamic::from(c)])
    });
    let st = state.clone();
    engine.register_fn("zip", move |a: LazyBag, b: LazyBag, c: LazyBag, d: LazyBag| {
        zip(&st, &[Dynamic::from(a), Dynamic::from(b), Dynamic::from(c), Dynamic::from(d)])
    });
}

/// `parse_json` on every engine (closures run it on workers).
pub(super) fn register_values(engine: &mut Engine) {
    engine.register_fn("parse_json", |text: &str| parse_json(text));
}
