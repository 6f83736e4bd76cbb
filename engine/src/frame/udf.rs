//! Script closures over partitions (`map_partitions`) and over groups
//! (`groupby(..).apply`). A closure gets a local frame and gives back a
//! frame, an array of row maps, one row map, or one value (a number,
//! string or bool: one row of one column, named `0` as pandas names an
//! unnamed Series' values after `reset_index`); that becomes a frame of
//! the schema the lazy frame stated, or a clear error.

use std::sync::Arc;

use polars::prelude::*;

use super::dtype::{DType, Schema};
use super::error::FrameError;
use super::partition::Frame;
use crate::error::TaskError;
use crate::runner::{TaskContext, Udf, UdfRunner};
use crate::value::Value;

/// The schema of what a closure gave (for a lazy frame's columns).
pub fn infer_schema(v: &Value) -> Result<Schema, FrameError> {
    match v {
        Value::Frame(f) => f
            .0
            .schema()
            .iter()
            .map(|(n, t)| {
                DType::of_polars(t).map(|d| (n.to_string(), d)).ok_or_else(|| {
                    FrameError::DType(format!("column \"{n}\" has type {t}, which brisk frames do not hold"))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Schema::new),
        Value::Map(m) => infer_rows(std::slice::from_ref(&Value::Map(m.clone()))),
        Value::List(rows) => infer_rows(rows),
        Value::Int(_) | Value::Float(_) | Value::Str(_) | Value::Bool(_) => Ok(Schema::new(vec![(
            SCALAR.to_string(),
            super::values::infer_dtype(SCALAR, std::slice::from_ref(v))?,
        )])),
        other => Err(FrameError::DType(format!(
            "the closure gave {}, not a frame, an array of row maps, a row map or a single value",
            other.type_name()
        ))),
    }
}

/// The column a closure's single values go in when no `meta` names it.
pub const SCALAR: &str = "0";

fn infer_rows(rows: &[Value]) -> Result<Schema, FrameError> {
    let mut names: Vec<String> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let Value::Map(m) = r else {
            return Err(FrameError::DType(format!(
                "row {i} the closure gave is {}, not a map",
                r.type_name()
            )));
        };
        for k in m.keys() {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    let mut cols = Vec::new();
    for n in names {
        let vals: Vec<Value> =
            rows.iter()
                .map(|r| {
                    if let Value::Map(m) = r {
                        m.get(&n).cloned().unwrap_or(Value::Unit)
                    } else {
                        Value::Unit
                    }
                })
                .collect();
        let t = super::values::infer_dtype(&n, &vals)?;
        cols.push((n, t));
    }
    Ok(Schema::new(cols))
}

/// What a closure gave, as a frame of `schema`.
pub fn to_frame(v: &Value, schema: &Schema, what: &str) -> Result<DataFrame, TaskError> {
    let bad = |m: String| TaskError::user(format!("{what}: {m}"));
    match v {
        Value::Frame(f) => {
            let df = &f.0;
            for (n, _) in &schema.cols {
                if df.column(n).is_err() {
                    return Err(bad(format!(
                        "the closure gave a frame without column \"{n}\" (it has: {})",
                        f.column_names().join(", ")
                    )));
                }
            }
            let mut out = df.select(schema.names()).map_err(|e| bad(e.to_string()))?;
            for (n, t) in &schema.cols {
                let c = out.column(n).map_err(|e| bad(e.to_string()))?;
                if c.dtype() != &t.to_polars() {
                    let s = super::expr::cast(c.as_materialized_series(), *t)
                        .map_err(|e| bad(format!("column \"{n}\" is not {t}: {e}")))?;
                    out.replace(n, s.into_column()).map_err(|e| bad(e.to_string()))?;
                }
            }
            Ok(out)
        }
        Value::Map(_) => to_frame(&Value::list(vec![v.clone()]), schema, what),
        Value::Int(_) | Value::Float(_) | Value::Str(_) | Value::Bool(_) | Value::Unit => {
            match &schema.cols[..] {
                [(name, _)] => super::values::from_values(schema, &[vec![v.clone()]])
                    .map_err(|e| bad(format!("column \"{name}\": {e}"))),
                _ => Err(bad(format!(
                    "the closure gave a single value ({}), but the result has the columns {}",
                    v.type_name(),
                    schema.listing()
                ))),
            }
        }
        Value::List(rows) => {
            let mut cols: Vec<Vec<Value>> = vec![Vec::with_capacity(rows.len()); schema.cols.len()];
            for (i, r) in rows.iter().enumerate() {
                let Value::Map(m) = r else {
                    return Err(bad(format!("row {i} the closure gave is {}, not a map", r.type_name())));
                };
                if let Some(k) = m.keys().find(|k| !schema.contains(k)) {
                    return Err(bad(format!(
                        "row {i} has the field \"{k}\", which is not a column (columns: {})",
                        schema.listing()
                    )));
                }
                for ((name, _), col) in schema.cols.iter().zip(cols.iter_mut()) {
                    col.push(m.get(name).cloned().unwrap_or(Value::Unit));
                }
            }
            super::values::from_values(schema, &cols).map_err(|e| bad(e.to_string()))
        }
        other => Err(bad(format!(
            "the closure gave {}, not a frame, an array of row maps, a row map or a single value",
            other.type_name()
        ))),
    }
}

fn call(udf: &Udf, df: DataFrame, udfs: &dyn UdfRunner, ctx: &TaskContext<'_>) -> Result<Value, TaskError> {
    udfs.call(udf, vec![Value::Frame(Arc::new(Frame(df)))], ctx)
}

/// `map_partitions`: the closure on the whole partition.
pub fn map_partition(
    udf: &Udf,
    schema: &Schema,
    df: &DataFrame,
    udfs: &dyn UdfRunner,
    ctx: &TaskContext<'_>,
) -> Result<DataFrame, TaskError> {
    let v = call(udf, df.clone(), udfs, ctx)?;
    to_frame(&v, schema, "map_partitions")
}

/// `rolling(window).apply(f)`: the closure on each window's values of
/// each of `columns` (an array of floats, `()` for a missing one); its
/// numbers make float columns. `before` holds the rows just before `df`.
pub fn rolling_apply(
    udf: &Udf,
    window: super::rolling::Window,
    columns: &[String],
    df: &DataFrame,
    before: Option<&DataFrame>,
    udfs: &dyn UdfRunner,
    ctx: &TaskContext<'_>,
) -> Result<DataFrame, TaskError> {
    let perr = |e: PolarsError| TaskError::user(format!("rolling apply: {e}"));
    let mut cols = Vec::with_capacity(columns.len());
    for c in columns {
        let (v, skip) = super::rolling::with_before(df, before, c).map_err(perr)?;
        let mut out: Vec<Option<f64>> = vec![None; df.height()];
        // A batch of rows' windows at a time: a wide window over many rows
        // never sits in memory whole.
        // About 4M values of windows per batch, at least one row.
        let per = ((1usize << 22) / window.window.max(1)).clamp(1, 4096);
        let mut from = skip;
        while from < v.len() {
            let to = (from + per).min(v.len());
            let wins = super::rolling::windows(&v, from, to, window);
            let (at, items): (Vec<usize>, Vec<Value>) = wins
                .into_iter()
                .enumerate()
                .filter_map(|(i, w)| w.map(|w| (from - skip + i, Value::list(w))))
                .unzip();
            from = to;
            let got = udfs.call_each(udf, &items, ctx).map_err(|(i, mut e)| {
                e.message = format!(
                    "rolling apply: {} (column \"{c}\", row {} of the partition)",
                    e.message,
                    at.get(i).copied().unwrap_or(i)
                );
                e
            })?;
            fill_numbers(&mut out, at, got)?;
        }
        cols.push(Series::new(c.as_str().into(), out).into_column());
    }
    DataFrame::new(df.height(), cols).map_err(perr)
}

/// The closure's numbers into their rows (`rolling_apply`).
fn fill_numbers(out: &mut [Option<f64>], at: Vec<usize>, got: Vec<Value>) -> Result<(), TaskError> {
    for (i, v) in at.into_iter().zip(got) {
        let x = match v {
            Value::Float(f) => Some(f),
            Value::Int(n) => Some(n as f64),
            Value::Unit => None,
            other => {
                return Err(TaskError::user(format!(
                    "rolling apply: the closure gave {} for row {i} of the partition, not a number",
                    other.type_name()
                )));
            }
        };
        if let Some(slot) = out.get_mut(i) {
            *slot = x;
        }
    }
    Ok(())
}

/// The groups of `df` by `by` (rows with a missing key dropped, as
/// pandas), in order of their keys.
pub fn groups(df: &DataFrame, by: &[String]) -> PolarsResult<Vec<DataFrame>> {
    let df = df.drop_nulls(Some(by))?;
    let sorted =
        df.sort(by.iter().map(String::as_str), SortMultipleOptions::default().with_maintain_order(true))?;
    // Stable grouping of sorted rows: groups in key order.
    let gb = sorted.group_by_stable(by.iter().map(String::as_str))?;
    gb.get_groups()
        .iter()
        .map(|g| match g {
            polars::prelude::GroupsIndicator::Idx((_, idx)) => {
                sorted.take(&IdxCa::from_vec("idx".into(), idx.to_vec()))
            }
            polars::prelude::GroupsIndicator::Slice([first, len]) => {
                Ok(sorted.slice(first as i64, len as usize))
            }
        })
        .collect()
}

/// `groupby(by).apply(f)`: the closure on each group; the key columns are
/// put in front of a result that lacks them.
pub fn apply(
    udf: &Udf,
    by: &[String],
    schema: &Schema,
    df: &DataFrame,
    udfs: &dyn UdfRunner,
    ctx: &TaskContext<'_>,
) -> Result<DataFrame, TaskError> {
    let perr = |e: PolarsError| TaskError::user(format!("groupby apply: {e}"));
    let mut parts = Vec::new();
    for g in groups(df, by).map_err(perr)? {
        let keys = g.select(by.iter().map(String::as_str)).map_err(perr)?.head(Some(1));
        let v = call(udf, g, udfs, ctx)?;
        parts.push(with_keys(&v, &keys, schema)?);
    }
    if parts.is_empty() {
        return Ok(DataFrame::empty_with_schema(&schema.to_polars()));
    }
    super::partition::concat(&parts.iter().collect::<Vec<_>>()).map_err(perr)
}

/// A group's result as a frame of `schema`, its key values filled in
/// where the result has no key columns.
fn with_keys(v: &Value, keys: &DataFrame, schema: &Schema) -> Result<DataFrame, TaskError> {
    let key_names: Vec<String> = keys.get_column_names().iter().map(|n| n.to_string()).collect();
    let has_keys = match v {
        Value::Frame(f) => key_names.iter().all(|k| f.0.column(k).is_ok()),
        Value::Map(m) => key_names.iter().all(|k| m.contains_key(k)),
        Value::List(rows) => {
            rows.iter().all(|r| matches!(r, Value::Map(m) if key_names.iter().all(|k| m.contains_key(k))))
        }
        _ => false,
    };
    if has_keys {
        return to_frame(v, schema, "groupby apply");
    }
    let rest = Schema::new(schema.cols.iter().filter(|(n, _)| !key_names.contains(n)).cloned().collect());
    let body = to_frame(v, &rest, "groupby apply")?;
    let mut cols: Vec<Column> = keys.columns().iter().map(|c| c.new_from_index(0, body.height())).collect();
    cols.extend(body.columns().iter().cloned());
    let df = DataFrame::new(body.height(), cols).map_err(|e| TaskError::user(e.to_string()))?;
    df.select(schema.names()).map_err(|e| TaskError::user(e.to_string()))
}
