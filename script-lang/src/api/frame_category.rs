//! pandas' `category` dtype in Rhai (`categorize`, the `cat_` methods) and
//! `explode`. A category column of brisk holds strings; its categories,
//! once known, are its distinct values sorted, as pandas' `astype`.

use std::sync::Arc;

use brisk_engine::Value;
use brisk_engine::frame::dtype::DType;
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, Map};

use super::args::options;
use super::dataframe::{err, strings};
use super::fndoc::{FnDoc, doc};
use super::frame_reshape::categories;
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::{LazyFrame, LazySeries};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// This area's entries of the API reference.
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "categorize",
        "df.categorize() / df.categorize([columns]) / df.categorize(#{columns}) -> DataFrame",
        "The columns (default: every string column, and category columns whose categories are unknown) as category columns with known categories: their distinct values, sorted, computed now in one computation for all the columns. Categories are strings in brisk; a computed frame shows the column as strings.",
        "let df = from_columns(#{k: [\"b\", \"a\", \"b\"], x: [1, 2, 3]}).categorize();\nprint(df.dtypes);\nprint(df[\"k\"].cat_categories());",
    ),
    doc(
        "cat_codes",
        "s.cat_codes() -> Series",
        "Each value's place among the known categories (int64), -1 where missing, as pandas' `cat.codes`. Unknown categories are an error, as in Dask: `cat_as_known()` or `categorize()` first.",
        "let s = from_columns(#{k: [\"b\", \"a\", ()]}).categorize()[\"k\"];\nprint(s.cat_codes().compute());",
    ),
    doc(
        "cat_categories",
        "s.cat_categories() -> array",
        "The known categories of a category Series, in order (`cat.categories`).",
        "print(from_columns(#{k: [\"y\", \"x\"]})[\"k\"].astype(\"category\").cat_as_known().cat_categories());",
    ),
    doc(
        "cat_known",
        "s.cat_known() -> bool",
        "Whether a category Series' categories are known (`cat.known`): `astype(\"category\")` leaves them unknown, `categorize` and `cat_as_known` make them known.",
        "print(from_columns(#{k: [\"y\", \"x\"]})[\"k\"].astype(\"category\").cat_known());",
    ),
    doc(
        "cat_as_known",
        "s.cat_as_known() -> Series",
        "The category Series with its categories computed now (`cat.as_known()`); brisk's are sorted, where Dask's keep the order the partitions give.",
        "print(from_columns(#{k: [\"y\", \"x\"]})[\"k\"].astype(\"category\").cat_as_known().cat_known());",
    ),
    doc(
        "cat_as_unknown",
        "s.cat_as_unknown() -> Series",
        "The category Series with its categories forgotten (`cat.as_unknown()`).",
        "print(from_columns(#{k: [\"y\", \"x\"]}).categorize()[\"k\"].cat_as_unknown().cat_known());",
    ),
    doc(
        "explode",
        "df.explode(column, #{sep, n}) / s.str_split(sep).explode() -> DataFrame / Series",
        "A row per part of each string of `column` split as Python's `str.split(sep, n)` (sep () for runs of whitespace), the other columns repeated; a missing value stays one missing row. brisk frames hold no list columns, so the split is part of the step: pandas' `df.assign(c=df.c.str.split(sep)).explode(\"c\")`.",
        "let df = from_columns(#{id: [1, 2], tags: [\"a,b\", \"c\"]});\nprint(df.explode(\"tags\", #{sep: \",\"}).compute());\nprint(df[\"tags\"].str_split(\",\").explode().compute());",
    ),
];

/// `categorize(columns)`: the columns' categories computed (one
/// computation for all of them) and recorded.
fn categorize(state: &SessionState, f: &LazyFrame, cols: Option<Vec<String>>) -> Res<LazyFrame> {
    let cols = match cols {
        Some(c) => c,
        None => f
            .f
            .schema
            .cols
            .iter()
            .filter(|(n, t)| *t == DType::Str || (*t == DType::Category && f.f.known_categories(n).is_none()))
            .map(|(n, _)| n.clone())
            .collect(),
    };
    for c in &cols {
        let t = f.f.schema.get(c).ok_or_else(|| {
            runtime(format!("categorize: no column \"{c}\" (the columns are {})", f.f.schema.listing()))
        })?;
        if t.values() != DType::Str {
            return Err(runtime(format!(
                "categorize: column \"{c}\" is {t}; brisk's categories are strings (astype(\"string\") first)"
            )));
        }
    }
    let cats = categories(state, &f.f, &cols, "categorize", None)?;
    let known = cols.into_iter().zip(cats).map(|(c, vals)| (c, vals.iter().map(text).collect())).collect();
    Ok(LazyFrame { f: f.f.with_categories(known).map_err(err)? })
}

fn text(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        other => other.to_json(),
    }
}

fn as_known(state: &SessionState, s: &LazySeries) -> Res<LazySeries> {
    if s.s.known_categories().is_some() {
        return Ok(s.clone());
    }
    if s.s.dtype != DType::Category {
        return Err(runtime(format!("cat_as_known needs a category column, not {}", s.s.dtype)));
    }
    let f = s.s.to_frame();
    let vals = categories(state, &f, std::slice::from_ref(&s.s.name), "cat_as_known", None)?
        .pop()
        .unwrap_or_default();
    Ok(LazySeries { s: s.s.with_categories(vals.iter().map(text).collect()).map_err(err)? })
}

fn explode(f: &LazyFrame, column: &str, m: Option<Map>) -> Res<LazyFrame> {
    let m = options(m, "explode", &["sep", "n"])?;
    let Some(sep) = m.get("sep") else {
        return Err(runtime(format!(
            "explode: brisk frames hold no list columns; give #{{sep: \",\"}} to split column \"{column}\" (pandas: df.assign({column}=df.{column}.str.split(\",\")).explode(\"{column}\"))"
        )));
    };
    let pat = if sep.is_unit() {
        None
    } else {
        Some(
            sep.clone()
                .into_string()
                .map_err(|_| runtime("explode: sep is a string, or () for whitespace"))?,
        )
    };
    let n = super::series_text::split_count(m.get("n"), "explode")?;
    Ok(LazyFrame { f: f.f.explode(column, pat, n).map_err(err)? })
}

pub(super) fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    let st = state.clone();
    engine.register_fn("categorize", move |f: &mut LazyFrame| categorize(&st, f, None));
    let st = state.clone();
    engine.register_fn("categorize", move |f: &mut LazyFrame, cols: RArray| {
        categorize(&st, f, Some(strings(&Dynamic::from(cols), "categorize: columns")?))
    });
    let st = state.clone();
    engine.register_fn("categorize", move |f: &mut LazyFrame, m: Map| {
        let m = options(Some(m), "categorize", &["columns"])?;
        let cols = m
            .get("columns")
            .filter(|d| !d.is_unit())
            .map(|d| strings(d, "categorize: columns"))
            .transpose()?;
        categorize(&st, f, cols)
    });
    engine.register_fn("cat_codes", |s: &mut LazySeries| -> Res<LazySeries> {
        Ok(LazySeries { s: s.s.cat_codes().map_err(err)? })
    });
    engine.register_fn("cat_categories", |s: &mut LazySeries| -> Res<RArray> {
        Ok(s.s.categories("cat_categories").map_err(err)?.iter().map(|c| Dynamic::from(c.clone())).collect())
    });
    engine.register_fn("cat_known", |s: &mut LazySeries| -> Res<bool> {
        if s.s.dtype != DType::Category {
            return Err(runtime(format!("cat_known needs a category column, not {}", s.s.dtype)));
        }
        Ok(s.s.known_categories().is_some())
    });
    let st = state.clone();
    engine.register_fn("cat_as_known", move |s: &mut LazySeries| as_known(&st, s));
    engine.register_fn("cat_as_unknown", |s: &mut LazySeries| -> Res<LazySeries> {
        Ok(LazySeries { s: s.s.without_categories().map_err(err)? })
    });
    engine.register_fn("explode", |f: &mut LazyFrame, column: &str| explode(f, column, None));
    engine.register_fn("explode", |f: &mut LazyFrame, column: &str, m: Map| explode(f, column, Some(m)));
}
