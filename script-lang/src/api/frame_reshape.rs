//! `get_dummies` and `pivot_table` in Rhai. As Dask's, both need the
//! categories of a column known: they are computed first (what Dask's
//! `categorize` does), then the frame is reshaped lazily. And
//! `from_dask_array`, an array's rows as a frame.

use std::cmp::Ordering;
use std::sync::Arc;

use brisk_engine::Value;
use brisk_engine::collections::frame::DataFrame;
use brisk_engine::frame::dtype::DType;
use brisk_engine::frame::red::Red;
use rhai::{Dynamic, Engine, EvalAltResult, Map};

use super::args::{ctx, options};
use super::dataframe::{err, frame_value, strings};
use super::fndoc::{FnDoc, doc};
use crate::collection::compute_all;
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::{LazyArray, LazyFrame};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference.
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "get_dummies",
        "get_dummies(df, #{columns, prefix, prefix_sep}) -> DataFrame",
        "One bool column per distinct value of each encoded column (`{prefix}{prefix_sep}{value}`, prefix the column's name and `_` by default), true where the row has that value, in place of the column; the other columns come first, as pandas. `columns` defaults to every string column. The distinct values are computed first (Dask needs them known, through `categorize`).",
        "get_dummies(from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1, 2, 3]})).compute()",
    ),
    doc(
        "pivot_table",
        "pivot_table(df, #{index, columns, values, aggfunc}) / df.pivot_table(#{...}) -> DataFrame",
        "One row per value of `index` (sorted), one column per distinct value of `columns`, holding `aggfunc` (mean by default; sum, count, min, max) of `values` over those rows; missing where there are none, and rows with no value at all left out, as pandas. The distinct values of `columns` are computed first.",
        "let df = from_columns(#{k: [\"a\", \"a\", \"b\"], c: [\"x\", \"y\", \"x\"], v: [1, 2, 3]});\npivot_table(df, #{index: \"k\", columns: \"c\", values: \"v\", aggfunc: \"sum\"}).compute()",
    ),
    doc(
        "from_dask_array",
        "from_dask_array(x, #{columns}) -> DataFrame",
        "A 1-d or 2-d array as a frame, one partition per row block (blocks across the columns joined first), as dd.from_dask_array: columns named by `columns`, else 0, 1, …; bool, int64 and float64 columns as the array's type.",
        "from_dask_array(arange(6, #{chunks: 4}).reshape([3, 2]), #{columns: [\"a\", \"b\"]}).compute()",
    ),
];

/// Categories in pandas' order: numbers by value (integers exactly),
/// then strings by code point, then anything else by its JSON text.
fn ordered(mut vals: Vec<Value>) -> Vec<Value> {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Bool(_) | Value::Int(_) | Value::Float(_) => 0,
            Value::Str(_) => 1,
            _ => 2,
        }
    }
    fn number(v: &Value) -> f64 {
        match v {
            Value::Bool(b) => f64::from(u8::from(*b)),
            Value::Int(i) => *i as f64,
            Value::Float(f) => *f,
            _ => 0.0,
        }
    }
    vals.sort_by(|a, b| {
        rank(a).cmp(&rank(b)).then_with(|| match (a, b) {
            (Value::Int(x), Value::Int(y)) => x.cmp(y),
            (Value::Str(x), Value::Str(y)) => x.cmp(y),
            _ if rank(a) == 0 => number(a).partial_cmp(&number(b)).unwrap_or(Ordering::Equal),
            _ => a.to_json().cmp(&b.to_json()),
        })
    });
    vals
}

/// The categories of each of `cols`, in pandas' order: a category
/// column's known ones, else the distinct present values, computed now
/// (all the columns in one computation). `cap` refuses more than that
/// many for one column (each would become a column).
pub(super) fn categories(
    state: &SessionState,
    f: &DataFrame,
    cols: &[String],
    what: &str,
    cap: Option<usize>,
) -> Res<Vec<Vec<Value>>> {
    let mut out: Vec<Option<Vec<Value>>> = cols
        .iter()
        .map(|c| f.known_categories(c).map(|k| k.iter().map(|s| Value::Str(s.as_str().into())).collect()))
        .collect();
    let mut wanted = Vec::new();
    for (c, known) in cols.iter().zip(&out) {
        if known.is_none() {
            let u = f.column(c).map_err(err)?.unique(&ctx(state)).to_frame();
            wanted.push(Dynamic::from(LazyFrame { f: u }));
        }
    }
    let mut got = compute_all(state, &wanted)?.into_iter();
    for (c, slot) in cols.iter().zip(out.iter_mut()) {
        if slot.is_some() {
            continue;
        }
        let d = got.next().unwrap_or(Dynamic::UNIT);
        let frame = frame_value(&d)
            .ok_or_else(|| runtime(format!("{what}: the distinct values did not come back")))?;
        let vals: Vec<Value> = brisk_engine::value::column_values(&frame.0, c)
            .into_iter()
            .filter(|v| !matches!(v, Value::Unit))
            .collect();
        if let Some(cap) = cap
            && vals.len() > cap
        {
            return Err(runtime(format!(
                "{what}: column \"{c}\" has {} distinct values, and each would become a column (at most {cap}); is it really a category?",
                vals.len()
            )));
        }
        *slot = Some(ordered(vals));
    }
    Ok(out.into_iter().map(Option::unwrap_or_default).collect())
}

/// The most distinct values `get_dummies` and `pivot_table` turn into
/// columns: beyond it the data is an identifier, not a category, and the
/// frame would be too wide to hold.
const MAX_CATEGORIES: usize = 10_000;

fn get_dummies(state: &SessionState, f: &LazyFrame, m: Option<Map>) -> Res<LazyFrame> {
    let m = options(m, "get_dummies", &["columns", "prefix", "prefix_sep"])?;
    let cols = match m.get("columns") {
        Some(d) => strings(d, "get_dummies: columns")?,
        None => {
            f.f.schema
                .cols
                .iter()
                .filter(|(_, t)| matches!(t, DType::Str | DType::Category))
                .map(|(n, _)| n.clone())
                .collect()
        }
    };
    let prefixes: Vec<String> = match m.get("prefix") {
        None => cols.clone(),
        Some(d) if d.is_string() => vec![d.to_string(); cols.len()],
        Some(d) => {
            let p = strings(d, "get_dummies: prefix")?;
            if p.len() != cols.len() {
                return Err(runtime(format!("get_dummies: {} prefixes for {} columns", p.len(), cols.len())));
            }
            p
        }
    };
    let sep = match m.get("prefix_sep") {
        None => "_".to_string(),
        Some(d) => d.clone().into_string().map_err(|_| runtime("get_dummies: prefix_sep is a string"))?,
    };
    let cats = categories(state, &f.f, &cols, "get_dummies", Some(MAX_CATEGORIES))?;
    let encode: Vec<_> = cols.into_iter().zip(prefixes).zip(cats).map(|((c, p), k)| (c, p, k)).collect();
    Ok(LazyFrame { f: f.f.get_dummies(&encode, &sep).map_err(err)? })
}

fn pivot_table(state: &SessionState, f: &LazyFrame, m: Map) -> Res<LazyFrame> {
    let m = options(Some(m), "pivot_table", &["index", "columns", "values", "aggfunc"])?;
    let name = |k: &str| -> Res<String> {
        m.get(k)
            .ok_or_else(|| runtime(format!("pivot_table: give #{{{k}: column}}")))?
            .clone()
            .into_string()
            .map_err(|_| runtime(format!("pivot_table: {k} is a column name")))
    };
    let (index, columns, values) = (name("index")?, name("columns")?, name("values")?);
    let agg = match m.get("aggfunc") {
        None => Red::Mean,
        Some(d) => {
            let s =
                d.clone().into_string().map_err(|_| runtime("pivot_table: aggfunc is a name, as \"sum\""))?;
            Red::parse(&s).ok_or_else(|| runtime(format!("pivot_table: unknown aggfunc \"{s}\"")))?
        }
    };
    let cats = categories(state, &f.f, std::slice::from_ref(&columns), "pivot_table", Some(MAX_CATEGORIES))?
        .pop()
        .unwrap_or_default();
    Ok(LazyFrame { f: f.f.pivot_table(&ctx(state), &index, &columns, &cats, &values, agg).map_err(err)? })
}

fn from_dask_array(state: &SessionState, x: &LazyArray, m: Option<Map>) -> Res<LazyFrame> {
    let m = options(m, "from_dask_array", &["columns"])?;
    let columns = m.get("columns").map(|d| strings(d, "from_dask_array: columns")).transpose()?;
    let f =
        brisk_engine::collections::frame::to_array::from_array(&ctx(state), &x.a, columns).map_err(err)?;
    Ok(LazyFrame { f })
}

pub(super) fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    let st = state.clone();
    engine.register_fn("from_dask_array", move |x: LazyArray| from_dask_array(&st, &x, None));
    let st = state.clone();
    engine.register_fn("from_dask_array", move |x: LazyArray, m: Map| from_dask_array(&st, &x, Some(m)));
    // A method and a function alike (`pivot_table(df, ...)` as Dask's).
    let st = state.clone();
    engine.register_fn("get_dummies", move |f: &mut LazyFrame| get_dummies(&st, f, None));
    let st = state.clone();
    engine.register_fn("get_dummies", move |f: &mut LazyFrame, m: Map| get_dummies(&st, f, Some(m)));
    let st = state.clone();
    engine.register_fn("pivot_table", move |f: &mut LazyFrame, m: Map| pivot_table(&st, f, m));
}
