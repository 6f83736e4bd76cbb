//! Closures over a frame's values and rows, and `query`: `s.map(f)`,
//! `s.apply(f)`, `df.apply(f, #{axis: 1})`, `df.query("x > 1")` or
//! `df.query(|row| ...)`. On a lazy frame the closure becomes part of a
//! column expression (`Expr::Call`) that every partition's task runs; on a
//! computed Series it runs here, at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use brisk_engine::Value;
use brisk_engine::frame::dtype::{DType, Schema};
use brisk_engine::frame::expr::Expr;
use brisk_engine::frame::partition::Frame;
use brisk_engine::frame::values::{from_values, infer_dtype};
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, FnPtr, Map, NativeCallContext};

use super::args::{options, shipped};
use super::dataframe::{dtype_of, err, head};
use super::fndoc::{FnDoc, doc};
use super::series_expr::scalar;
use crate::convert::{to_dynamic, to_value};
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::{LazyFrame, LazySeries, LocalFrame, LocalSeries};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference.
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "map",
        "s.map(f, #{meta, na_action}) / s.map(#{old: new}) / s.map([[old, new], ...]) -> Series",
        "The closure on each value of a Series (as pandas' Series.map): a missing value reaches it as `()` unless `na_action: \"ignore\"` keeps it missing. The result's type is `meta` (a dtype) or what the closure gives on the first values. With a map or pairs, each value becomes its match, and a value without one becomes missing.",
        "let s = from_columns(#{x: [1, 2, ()]})[\"x\"];\ns.map(|v| v * 10, #{na_action: \"ignore\"}).compute()",
    ),
    doc(
        "apply",
        "s.apply(f, #{meta}) / df.apply(f, #{axis: 1, meta}) -> Series",
        "`s.apply(f)`: the closure on each value, as `map`. `df.apply(f, #{axis: 1})`: the closure on each row, given as a map of column to value; as Dask, only `axis: 1`. `meta` is the dtype, or `[name, dtype]` to name the Series (else named `0`).",
        "let df = from_columns(#{a: [1, 2], b: [10, 20]});\ndf.apply(|r| r.a + r.b, #{axis: 1}).compute()",
    ),
    doc(
        "query",
        "df.query(expr, #{local_dict}) / df.query(|row| ...) -> DataFrame",
        "The rows where `expr`, pandas' query language, holds: comparisons (chained too), `and or not` (or `& | ~`), arithmetic, `in` / `not in` a list, `backticks` around a column name with spaces, `@name` for the value `local_dict` gives. A closure gets each row as a map and keeps it when it returns true.",
        "let df = from_columns(#{x: [1, 5, 9], k: [\"a\", \"b\", \"a\"]});\ndf.query(\"x > @lo and k == 'a'\", #{local_dict: #{lo: 2}}).compute()",
    ),
];

/// Sample values a closure's type is learnt from.
const SAMPLE: usize = 8;

/// `meta` as a dtype, with a name when given as `[name, dtype]` or
/// `#{name: dtype}`.
fn meta(d: &Dynamic, what: &str) -> Res<(Option<String>, DType)> {
    if let Some(pair) = d.read_lock::<RArray>() {
        return match pair.as_slice() {
            [name, t] => Ok((Some(name.to_string()), dtype_of(t, what)?)),
            _ => Err(runtime(format!("{what}: meta is a dtype or [name, dtype]"))),
        };
    }
    if let Some(m) = d.read_lock::<Map>() {
        return match m.iter().next() {
            Some((name, t)) if m.len() == 1 => Ok((Some(name.to_string()), dtype_of(t, what)?)),
            _ => Err(runtime(format!("{what}: meta names one column, as #{{name: dtype}}"))),
        };
    }
    Ok((None, dtype_of(d, what)?))
}

/// The type of the closure's results on `sample` (run here, now).
fn learnt(cx: &NativeCallContext<'_>, f: &FnPtr, sample: &[Value], what: &str) -> Res<DType> {
    let mut got = Vec::new();
    for v in sample.iter().take(SAMPLE) {
        let r: Dynamic = f.call_within_context(cx, (to_dynamic(v),))?;
        got.push(to_value(&r, what)?);
    }
    if got.iter().all(|v| matches!(v, Value::Unit)) {
        return Err(runtime(format!(
            "{what}: there are no values to learn the result's type from; give #{{meta: dtype}}"
        )));
    }
    infer_dtype("result", &got).map_err(|e| {
        runtime(format!(
            "{what}: the closure's first results do not share one type ({e}); give #{{meta: dtype}}"
        ))
    })
}

fn na_action(m: &Map, what: &str) -> Res<bool> {
    match m.get("na_action") {
        None => Ok(false),
        Some(d) if d.is_unit() => Ok(false),
        Some(d) => match d.clone().into_string().as_deref() {
            Ok("ignore") => Ok(true),
            _ => Err(runtime(format!("{what}: na_action is \"ignore\" or ()"))),
        },
    }
}

/// The first present values of a one-column frame, from as many
/// partitions as it takes.
fn first_values(
    state: &SessionState,
    f: &brisk_engine::collections::frame::DataFrame,
    col: &str,
) -> Res<Vec<Value>> {
    let present = f.dropna(Some(vec![col.to_string()])).map_err(err)?;
    let part = head(state, &present, SAMPLE as i64)?;
    Ok(brisk_engine::value::column_values(&part.0, col))
}

fn lazy_map(
    cx: &NativeCallContext<'_>,
    state: &SessionState,
    s: &LazySeries,
    f: &FnPtr,
    m: Option<Map>,
    what: &str,
) -> Res<LazySeries> {
    let allowed: &[&str] = if what == "map" { &["meta", "na_action"] } else { &["meta"] };
    let m = options(m, what, allowed)?;
    let skip = na_action(&m, what)?;
    let (name, dtype) = match m.get("meta") {
        Some(d) => meta(d, what)?,
        None => {
            let col = s.s.to_frame();
            (None, learnt(cx, f, &first_values(state, &col, &s.s.name)?, what)?)
        }
    };
    let (udf, _) = shipped(state, f)?;
    let out = s.s.call_each(udf, dtype, skip, what).map_err(err)?;
    Ok(LazySeries {
        s: match name {
            Some(n) => out.rename(&n),
            None => out,
        },
    })
}

/// `s.map(#{old: new})` / pairs: each value its match, else missing.
fn mapped<S: super::series_expr::ElementWise>(s: &S, pairs: Vec<(Value, Value)>) -> Res<S> {
    s.map_expr(|x| Expr::Lookup(x, pairs))
}

fn pairs(list: &RArray) -> Res<Vec<(Value, Value)>> {
    list.iter()
        .map(|p| match p.read_lock::<RArray>() {
            Some(kv) if kv.len() == 2 => Ok((scalar(&kv[0], "map")?, scalar(&kv[1], "map")?)),
            _ => Err(runtime("map: give [old, new] pairs")),
        })
        .collect()
}

fn map_pairs(m: &Map) -> Res<Vec<(Value, Value)>> {
    m.iter().map(|(k, v)| Ok((Value::str(k.as_str()), scalar(v, "map")?))).collect()
}

/// `df.apply(f, #{axis: 1, meta})`.
fn frame_apply(
    cx: &NativeCallContext<'_>,
    state: &SessionState,
    df: &LazyFrame,
    f: &FnPtr,
    m: Option<Map>,
) -> Res<LazySeries> {
    let m = options(m, "apply", &["axis", "meta"])?;
    match m.get("axis").map(|a| a.as_int()) {
        Some(Ok(1)) => {}
        _ => return Err(runtime("apply: only #{axis: 1} is supported (each row), as in Dask")),
    }
    let (name, dtype) = match m.get("meta") {
        Some(d) => meta(d, "apply")?,
        None => {
            let part = head(state, &df.f, SAMPLE as i64)?;
            (None, learnt(cx, f, &brisk_engine::value::rows(&part.0), "apply")?)
        }
    };
    let (udf, _) = shipped(state, f)?;
    let name = name.unwrap_or_else(|| brisk_engine::frame::udf::SCALAR.to_string());
    Ok(LazySeries { s: df.f.apply_rows(udf, dtype, &name, "apply").map_err(err)? })
}

fn local_dict(m: Option<Map>) -> Res<BTreeMap<String, Value>> {
    let m = options(m, "query", &["local_dict"])?;
    let Some(d) = m.get("local_dict") else { return Ok(BTreeMap::new()) };
    let vars = d.read_lock::<Map>().ok_or_else(|| runtime("query: local_dict is a map of name to value"))?;
    vars.iter().map(|(k, v)| Ok((k.to_string(), to_value(v, "query: local_dict")?))).collect()
}

/// The closure on each value of a computed Series, here and now.
fn local_map(
    cx: &NativeCallContext<'_>,
    s: &LocalSeries,
    f: &FnPtr,
    m: Option<Map>,
    what: &str,
) -> Res<LocalSeries> {
    let allowed: &[&str] = if what == "map" { &["meta", "na_action"] } else { &["meta"] };
    let m = options(m, what, allowed)?;
    let skip = na_action(&m, what)?;
    let name = s.0.column_names().into_iter().next().unwrap_or_default();
    let mut out = Vec::new();
    for v in brisk_engine::value::column_values(&s.0.0, &name) {
        if skip && matches!(v, Value::Unit) {
            out.push(Value::Unit);
            continue;
        }
        let r: Dynamic = f.call_within_context(cx, (to_dynamic(&v),))?;
        out.push(to_value(&r, what)?);
    }
    let (rename, dtype) = match m.get("meta") {
        Some(d) => meta(d, what)?,
        None => (None, infer_dtype(&name, &out).map_err(|e| runtime(format!("{what}: {e}")))?),
    };
    let name = rename.unwrap_or(name);
    let df = from_values(&Schema::new(vec![(name, dtype)]), &[out])
        .map_err(|e| runtime(format!("{what}: {e}")))?;
    Ok(LocalSeries(Arc::new(Frame(df))))
}

fn local_query(f: &LocalFrame, src: &str, m: Option<Map>) -> Res<LocalFrame> {
    let vars = local_dict(m)?;
    Ok(LocalFrame(Arc::new(f.0.query(src, &vars).map_err(err)?)))
}

/// What works on a computed Series or frame, on clients and workers alike.
pub(super) fn register_local(engine: &mut Engine) {
    for what in ["map", "apply"] {
        engine.register_fn(what, move |cx: NativeCallContext<'_>, s: &mut LocalSeries, f: FnPtr| {
            local_map(&cx, s, &f, None, what)
        });
        engine.register_fn(what, move |cx: NativeCallContext<'_>, s: &mut LocalSeries, f: FnPtr, m: Map| {
            local_map(&cx, s, &f, Some(m), what)
        });
    }
    engine.register_fn("map", |s: &mut LocalSeries, m: Map| mapped(s, map_pairs(&m)?));
    engine.register_fn("map", |s: &mut LocalSeries, l: RArray| mapped(s, pairs(&l)?));
    engine.register_fn("query", |f: &mut LocalFrame, src: &str| local_query(f, src, None));
    engine.register_fn("query", |f: &mut LocalFrame, src: &str, m: Map| local_query(f, src, Some(m)));
}

pub(super) fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    for what in ["map", "apply"] {
        let st = state.clone();
        engine.register_fn(what, move |cx: NativeCallContext<'_>, s: &mut LazySeries, f: FnPtr| {
            lazy_map(&cx, &st, s, &f, None, what)
        });
        let st = state.clone();
        engine.register_fn(what, move |cx: NativeCallContext<'_>, s: &mut LazySeries, f: FnPtr, m: Map| {
            lazy_map(&cx, &st, s, &f, Some(m), what)
        });
    }
    engine.register_fn("map", |s: &mut LazySeries, m: Map| mapped(s, map_pairs(&m)?));
    engine.register_fn("map", |s: &mut LazySeries, l: RArray| mapped(s, pairs(&l)?));
    let st = state.clone();
    engine.register_fn("apply", move |cx: NativeCallContext<'_>, df: &mut LazyFrame, f: FnPtr| {
        frame_apply(&cx, &st, df, &f, None)
    });
    let st = state.clone();
    engine.register_fn("apply", move |cx: NativeCallContext<'_>, df: &mut LazyFrame, f: FnPtr, m: Map| {
        frame_apply(&cx, &st, df, &f, Some(m))
    });
    engine.register_fn("query", |df: &mut LazyFrame, src: &str| -> Res<LazyFrame> {
        Ok(LazyFrame { f: df.f.query(src, &local_dict(None)?).map_err(err)? })
    });
    engine.register_fn("query", |df: &mut LazyFrame, src: &str, m: Map| -> Res<LazyFrame> {
        Ok(LazyFrame { f: df.f.query(src, &local_dict(Some(m))?).map_err(err)? })
    });
    let st = state.clone();
    engine.register_fn("query", move |df: &mut LazyFrame, f: FnPtr| -> Res<LazyFrame> {
        let (udf, _) = shipped(&st, &f)?;
        let keep = df.f.apply_rows(udf, DType::Bool, "query", "query").map_err(err)?;
        Ok(LazyFrame { f: df.f.filter(&keep).map_err(err)? })
    });
}
