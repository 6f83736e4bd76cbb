//! Frames from script values and single values from frames: building typed
//! columns (`from_columns`, `from_maps`), inferring a column's type, and a
//! column's reduction.

use std::sync::Arc;

use polars::prelude::*;

use super::agg::Stats;

use super::dtype::{DType, Schema};
use super::error::{FrameError, polars_error};
use super::expr;
use super::partition::{Frame, concat};
use super::red::Red;
use crate::value::Value;

/// A frame of `schema` from columns of values (`from_columns`, `from_maps`):
/// each column is built with its declared type.
pub fn from_values(schema: &Schema, columns: &[Vec<Value>]) -> Result<DataFrame, FrameError> {
    let height = columns.first().map_or(0, Vec::len);
    let mut cols = Vec::with_capacity(columns.len());
    for ((name, t), vals) in schema.cols.iter().zip(columns) {
        let bad =
            |v: &Value| FrameError::DType(format!("column \"{name}\" is {t}, but holds a {}", v.type_name()));
        let name: PlSmallStr = name.as_str().into();
        let s = match t {
            DType::Int64 => {
                let v: Vec<Option<i64>> = vals
                    .iter()
                    .map(|v| match v {
                        Value::Int(i) => Ok(Some(*i)),
                        Value::Unit => Ok(None),
                        other => Err(bad(other)),
                    })
                    .collect::<Result<_, _>>()?;
                Series::new(name, v)
            }
            DType::Float64 => {
                let v: Vec<Option<f64>> = vals
                    .iter()
                    .map(|v| match v {
                        Value::Int(i) => Ok(Some(*i as f64)),
                        Value::Float(f) => Ok(Some(*f)),
                        Value::Unit => Ok(None),
                        other => Err(bad(other)),
                    })
                    .collect::<Result<_, _>>()?;
                Series::new(name, v)
            }
            DType::Bool => {
                let v: Vec<Option<bool>> = vals
                    .iter()
                    .map(|v| match v {
                        Value::Bool(b) => Ok(Some(*b)),
                        Value::Unit => Ok(None),
                        other => Err(bad(other)),
                    })
                    .collect::<Result<_, _>>()?;
                Series::new(name, v)
            }
            DType::Str | DType::Datetime | DType::Category => {
                let v: Vec<Option<&str>> = vals
                    .iter()
                    .map(|v| match v {
                        Value::Str(s) => Ok(Some(s.as_ref())),
                        Value::Unit => Ok(None),
                        other => Err(bad(other)),
                    })
                    .collect::<Result<_, _>>()?;
                let s = Series::new(name, v);
                if *t == DType::Datetime { expr::cast(&s, *t).map_err(polars_error)? } else { s }
            }
        };
        cols.push(s.into_column());
    }
    DataFrame::new(height, cols).map_err(polars_error)
}

/// The type a column of script values takes: int, float if any float,
/// bool, string; `None` when there is nothing but missing values.
pub fn infer_dtype(name: &str, vals: &[Value]) -> Result<DType, FrameError> {
    let mut t: Option<DType> = None;
    for v in vals {
        let vt = match v {
            Value::Unit => continue,
            Value::Int(_) => DType::Int64,
            Value::Float(_) => DType::Float64,
            Value::Bool(_) => DType::Bool,
            Value::Str(_) => DType::Str,
            other => {
                return Err(FrameError::DType(format!(
                    "column \"{name}\" holds a {}, which a frame cannot",
                    other.type_name()
                )));
            }
        };
        t = Some(match (t, vt) {
            (None, x) => x,
            (Some(a), b) if a == b => a,
            (Some(DType::Int64), DType::Float64) | (Some(DType::Float64), DType::Int64) => DType::Float64,
            (Some(a), b) => {
                return Err(FrameError::DType(format!(
                    "column \"{name}\" mixes {} and {} values",
                    a.name(),
                    b.name()
                )));
            }
        });
    }
    Ok(t.unwrap_or(DType::Float64))
}

/// A reduction of a local frame's first column (a computed Series), with
/// the lazy path's rules: missing values (and NaN) skipped, pandas' NaN
/// for the mean of nothing, `nunique` over the values present.
pub fn reduce_column(df: &DataFrame, red: Red) -> Result<Value, FrameError> {
    let col = df.columns().first().ok_or_else(|| FrameError::Invalid("the series has no column".into()))?;
    let t = DType::of_polars(col.dtype())
        .ok_or_else(|| FrameError::DType(format!("a {} column cannot be reduced", col.dtype())))?;
    red.dtype(t)?;
    let s = col.as_materialized_series();
    if red == Red::NUnique {
        let present = s.drop_nulls();
        return present.n_unique().map(|n| Value::Int(n as i64)).map_err(polars_error);
    }
    Ok(Stats::of(s).map_err(polars_error)?.finish(red, t))
}

impl Frame {
    /// Frames stacked in order; an empty frame of `schema` when there are none.
    pub fn stack(parts: &[Arc<Frame>], schema: &Schema) -> Result<Frame, FrameError> {
        if parts.is_empty() {
            return Ok(Frame(DataFrame::empty_with_schema(&schema.to_polars())));
        }
        let refs: Vec<&DataFrame> = parts.iter().map(|f| &f.0).collect();
        concat(&refs).map(Frame).map_err(|e| FrameError::Invalid(e.to_string()))
    }
}
