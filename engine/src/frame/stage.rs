//! Row- and column-wise steps on one partition. Like bag stages, they are
//! not tasks: a chain of them runs inside the task that reads or receives
//! the partition, so `read_csv(..)[mask].assign(..)` is one task per block.
//!
//! Stages tolerate missing columns that the projection pushdown removed:
//! `needs` says which columns a stage reads, and the reader skips the rest.

use std::collections::BTreeSet;

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use super::call::Closures;
use super::dtype::DType;
use super::expr::Expr;
use crate::value::Value;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Stage {
    /// Keep these columns, in this order.
    Project(Vec<String>),
    /// Keep the rows where the boolean expression holds.
    Filter(Expr),
    /// Add or replace columns (later ones see earlier ones, as `assign`).
    Assign(Vec<(String, Expr)>),
    Drop(Vec<String>),
    Rename(Vec<(String, String)>),
    Cast(Vec<(String, DType)>),
    /// Fill missing values of these columns.
    FillNa(Vec<(String, Value)>),
    /// Drop rows with a missing value in any of these columns.
    DropNa(Vec<String>),
    /// pandas' `melt`: for each of `values` in turn, the `ids` columns, the
    /// value column's name (as `var_name`) and its values (as
    /// `value_name`, cast to `value_type`).
    Melt {
        ids: Vec<String>,
        values: Vec<String>,
        var_name: String,
        value_name: String,
        value_type: DType,
    },
    /// pandas' `explode` of a string column split as Python's
    /// `str.split(pat, n)`: a row per part, the other columns repeated; a
    /// missing value (or nothing to split) stays one row, missing.
    Explode {
        column: String,
        pat: Option<String>,
        n: Option<usize>,
    },
}

impl Stage {
    pub fn name(&self) -> &'static str {
        match self {
            Stage::Project(_) => "getitem",
            Stage::Filter(_) => "filter",
            Stage::Assign(_) => "assign",
            Stage::Drop(_) => "drop",
            Stage::Rename(_) => "rename",
            Stage::Cast(_) => "astype",
            Stage::FillNa(_) => "fillna",
            Stage::DropNa(_) => "dropna",
            Stage::Melt { .. } => "melt",
            Stage::Explode { .. } => "explode",
        }
    }

    /// The columns needed before this stage for `after` to be available
    /// after it.
    pub fn needs(&self, after: &BTreeSet<String>) -> BTreeSet<String> {
        let mut need = after.clone();
        match self {
            Stage::Project(_) | Stage::Drop(_) | Stage::Cast(_) | Stage::FillNa(_) => {}
            Stage::Filter(e) => e.columns(&mut need),
            Stage::Assign(cols) => {
                // Walk back: a column assigned here is not needed before,
                // unless an earlier assignment or the input provides it.
                for (name, e) in cols.iter().rev() {
                    let wanted = need.remove(name);
                    if wanted {
                        e.columns(&mut need);
                    }
                }
            }
            Stage::Rename(pairs) => {
                need = after
                    .iter()
                    .map(|c| pairs.iter().find(|(_, new)| new == c).map_or(c.clone(), |(old, _)| old.clone()))
                    .collect();
            }
            Stage::DropNa(subset) => need.extend(subset.iter().cloned()),
            Stage::Explode { column, .. } => {
                need.insert(column.clone());
            }
            // Every output row is made from the id and value columns.
            Stage::Melt { ids, values, .. } => need = ids.iter().chain(values).cloned().collect(),
        }
        need
    }

    pub fn apply(&self, df: DataFrame) -> PolarsResult<DataFrame> {
        self.apply_in(df, None)
    }

    /// `apply`, with a script engine for closures in expressions.
    pub fn apply_in(&self, df: DataFrame, cl: Option<&Closures<'_>>) -> PolarsResult<DataFrame> {
        let has = |df: &DataFrame, c: &str| df.get_column_index(c).is_some();
        Ok(match self {
            Stage::Melt { ids, values, var_name, value_name, value_type } => {
                let mut out: Option<DataFrame> = None;
                for v in values {
                    let mut cols: Vec<Column> = Vec::with_capacity(ids.len() + 2);
                    for id in ids {
                        cols.push(df.column(id)?.clone());
                    }
                    cols.push(Column::new(var_name.as_str().into(), vec![v.as_str(); df.height()]));
                    let val = super::expr::cast(df.column(v)?.as_materialized_series(), *value_type)?;
                    cols.push(val.with_name(value_name.as_str().into()).into_column());
                    let part = DataFrame::new(df.height(), cols)?;
                    out = Some(match out {
                        None => part,
                        Some(mut acc) => {
                            acc.vstack_mut(&part)?;
                            acc
                        }
                    });
                }
                match out {
                    Some(acc) => acc,
                    None => {
                        let mut cols: Vec<Column> = Vec::new();
                        for id in ids {
                            cols.push(df.column(id)?.clear());
                        }
                        cols.push(Column::new(var_name.as_str().into(), Vec::<&str>::new()));
                        cols.push(Column::full_null(value_name.as_str().into(), 0, &value_type.to_polars()));
                        DataFrame::new(0, cols)?
                    }
                }
            }
            Stage::Project(cols) => df.select(cols.iter().filter(|c| has(&df, c)).map(|c| c.as_str()))?,
            Stage::Filter(e) => {
                let m = e.eval_in(&df, cl)?;
                let m = m.bool()?;
                if m.len() == 1 && df.height() != 1 {
                    if m.get(0) == Some(true) { df } else { df.clear() }
                } else {
                    df.filter(m)?
                }
            }
            Stage::Assign(cols) => {
                let mut df = df;
                for (name, e) in cols {
                    let mut s = e.eval_in(&df, cl)?;
                    if s.len() != df.height() {
                        s = s.new_from_index(0, df.height());
                    }
                    df.with_column(s.with_name(name.as_str().into()).into_column())?;
                }
                df
            }
            Stage::Drop(cols) => df.drop_many(cols.iter().filter(|c| has(&df, c)).map(|c| c.as_str())),
            Stage::Rename(pairs) => {
                let mut df = df;
                for (old, new) in pairs {
                    if has(&df, old) {
                        df.rename(old, new.as_str().into())?;
                    }
                }
                df
            }
            Stage::Cast(cols) => {
                let mut df = df;
                for (name, t) in cols {
                    if has(&df, name) {
                        let c = super::expr::cast(df.column(name)?.as_materialized_series(), *t)?;
                        df.replace(name, c.into_column())?;
                    }
                }
                df
            }
            Stage::FillNa(cols) => {
                let mut df = df;
                for (name, v) in cols {
                    if has(&df, name) {
                        let s = Expr::FillNa(Box::new(Expr::col(name)), v.clone()).eval(&df)?;
                        df.replace(name, s.into_column())?;
                    }
                }
                df
            }
            Stage::Explode { column, pat, n } if has(&df, column) => {
                explode(&df, column, pat.as_deref(), *n)?
            }
            Stage::Explode { .. } => df,
            Stage::DropNa(subset) => {
                let present: Vec<&str> = subset.iter().filter(|c| has(&df, c)).map(|c| c.as_str()).collect();
                let mut keep: Option<BooleanChunked> = None;
                for c in &present {
                    let ok = Expr::un(super::expr::UnOp::NotNa, Expr::col(c)).eval(&df)?;
                    let ok = ok.bool()?.clone();
                    keep = Some(match keep {
                        Some(k) => &k & &ok,
                        None => ok,
                    });
                }
                match keep {
                    Some(k) => df.filter(&k)?,
                    None => df,
                }
            }
        })
    }
}

fn explode(df: &DataFrame, column: &str, pat: Option<&str>, n: Option<usize>) -> PolarsResult<DataFrame> {
    let s = df.column(column)?.as_materialized_series().clone();
    let ca = s.str()?;
    let mut rows: Vec<IdxSize> = Vec::with_capacity(ca.len());
    let mut parts: Vec<Option<&str>> = Vec::with_capacity(ca.len());
    for (row, v) in ca.iter().enumerate() {
        let row = IdxSize::try_from(row).map_err(|_| polars_err!(ComputeError: "explode: too many rows"))?;
        let split = v.map(|v| super::text::python_split(v, pat, n)).unwrap_or_default();
        if split.is_empty() {
            rows.push(row);
            parts.push(None);
        }
        for p in split {
            rows.push(row);
            parts.push(Some(p));
        }
    }
    let mut out = df.take(&IdxCa::from_vec(PlSmallStr::EMPTY, rows))?;
    out.replace(column, Series::new(column.into(), parts).into_column())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::expr::BinOp;

    #[test]
    fn needs_walk_back_through_stages() {
        let after: BTreeSet<String> = ["z".to_string()].into();
        let assign = Stage::Assign(vec![("z".into(), Expr::bin(BinOp::Mul, Expr::col("x"), Expr::col("y")))]);
        let need = assign.needs(&after);
        assert_eq!(need, ["x".to_string(), "y".to_string()].into());
        let rename = Stage::Rename(vec![("a".into(), "x".into())]);
        assert_eq!(rename.needs(&need), ["a".to_string(), "y".to_string()].into());
        let filter = Stage::Filter(Expr::col("f"));
        assert!(filter.needs(&after).contains("f"));
    }

    #[test]
    fn explode_repeats_the_other_columns_and_keeps_missing_rows() {
        let df = df!("s" => [Some("a,b"), None, Some(""), Some("c")], "x" => [1i64, 2, 3, 4]).expect("df");
        let out = Stage::Explode { column: "s".into(), pat: Some(",".into()), n: None }
            .apply(df.clone())
            .expect("explode");
        let s: Vec<Option<&str>> = out.column("s").expect("s").str().expect("str").iter().collect();
        assert_eq!(s, [Some("a"), Some("b"), None, Some(""), Some("c")]);
        let x: Vec<Option<i64>> = out.column("x").expect("x").i64().expect("i64").iter().collect();
        assert_eq!(x, [Some(1), Some(1), Some(2), Some(3), Some(4)]);
        // Split on whitespace, an empty string has no part: one missing row.
        let out = Stage::Explode { column: "s".into(), pat: None, n: None }.apply(df).expect("explode");
        assert_eq!(out.height(), 4);
        assert_eq!(out.column("s").expect("s").null_count(), 2);
    }

    #[test]
    fn stages_apply_in_order() {
        let df = df!("x" => [Some(1i64), None, Some(3)], "y" => [1.0f64, 2.0, 3.0]).expect("df");
        let df = Stage::Assign(vec![(
            "z".into(),
            Expr::bin(BinOp::Mul, Expr::col("y"), Expr::Lit(Value::Int(2))),
        )])
        .apply(df)
        .expect("assign");
        let df = Stage::DropNa(vec!["x".into()]).apply(df).expect("dropna");
        assert_eq!(df.height(), 2);
        let df = Stage::Filter(Expr::bin(BinOp::Gt, Expr::col("z"), Expr::Lit(Value::Float(3.0))))
            .apply(df)
            .expect("filter");
        assert_eq!(df.height(), 1);
        let df = Stage::Project(vec!["z".into(), "x".into()]).apply(df).expect("project");
        assert_eq!(df.get_column_names_owned(), vec![PlSmallStr::from("z"), PlSmallStr::from("x")]);
    }
}
