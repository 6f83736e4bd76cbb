//! Frames reshaped partition by partition (Dask's `dd.melt` is
//! `map_partitions(pd.melt)`): `melt`, `get_dummies`; and `pivot_table`,
//! a groupby of one masked column per category. As Dask, the categories
//! must be known (the caller computes them, as `categorize` would).

use super::dataframe::{Assigned, DataFrame, Series};
use super::shuffle::invalid;
use crate::collections::array::Ctx;
use crate::frame::dtype::{DType, Schema};
use crate::frame::error::FrameError;
use crate::frame::expr::{BinOp, Expr};
use crate::frame::red::Red;
use crate::frame::stage::Stage;
use crate::frame::text::TextOp;
use crate::graph::token::Tokenizer;
use crate::value::Value;

impl DataFrame {
    /// `melt(#{id_vars, value_vars, var_name, value_name})`, as pandas'
    /// (and Dask's, partition by partition): the value columns stacked into
    /// one (`value_vars` default: every column not an id), beside the
    /// column each value came from. Values of int and float columns meet
    /// as float; other types must agree.
    pub fn melt(
        &self,
        ids: &[String],
        values: Option<&[String]>,
        var_name: &str,
        value_name: &str,
    ) -> Result<DataFrame, FrameError> {
        self.check_columns(ids)?;
        let values: Vec<String> = match values {
            Some(v) => {
                self.check_columns(v)?;
                v.to_vec()
            }
            None => self.schema.names().filter(|n| !ids.iter().any(|i| i == n)).map(String::from).collect(),
        };
        if var_name == value_name || ids.iter().any(|i| i == var_name || i == value_name) {
            return Err(invalid(format!(
                "melt: the columns would be named twice ({var_name:?}, {value_name:?} and the ids {ids:?})"
            )));
        }
        let mut value_type: Option<DType> = None;
        for v in &values {
            let t = self.schema.get(v).unwrap_or(DType::Str);
            value_type = Some(match value_type {
                None => t,
                Some(u) if u == t => u,
                Some(u) if u.values() == t.values() => u.values(),
                Some(DType::Int64 | DType::Float64) if matches!(t, DType::Int64 | DType::Float64) => {
                    DType::Float64
                }
                Some(u) => {
                    return Err(invalid(format!(
                        "melt: value columns of types {} and {} cannot share one column; astype first",
                        u.name(),
                        t.name()
                    )));
                }
            });
        }
        let value_type = value_type.unwrap_or(DType::Float64);
        let mut cols: Vec<(String, DType)> =
            ids.iter().map(|i| (i.clone(), self.schema.get(i).unwrap_or(DType::Str))).collect();
        cols.push((var_name.to_string(), DType::Str));
        cols.push((value_name.to_string(), value_type));
        let stage = Stage::Melt {
            ids: ids.to_vec(),
            values: values.clone(),
            var_name: var_name.to_string(),
            value_name: value_name.to_string(),
            value_type,
        };
        let tag = Tokenizer::new().str(&self.token).str("melt").serde(&stage).finish();
        let toks = cols.iter().map(|(n, _)| format!("{tag}/{n}")).collect();
        let mut f = self.staged(stage, Schema::new(cols), toks, true);
        f.label = "melt";
        Ok(f)
    }

    /// pandas' `df.assign(c=df.c.str.split(pat, n=n)).explode(c)`: a row
    /// per part of each value of string column `column`, the other columns
    /// repeated (brisk frames hold no list columns, so the split is part of
    /// the step). Rows stay in their partition, so divisions stay known.
    pub fn explode(
        &self,
        column: &str,
        pat: Option<String>,
        n: Option<usize>,
    ) -> Result<DataFrame, FrameError> {
        let series = self.column(column)?;
        if series.dtype.values() != DType::Str {
            return Err(FrameError::DType(format!("explode needs a string column, not {}", series.dtype)));
        }
        // The separator, checked as str_split does.
        series
            .map_expr(|e| Expr::Text(TextOp::SplitLen { pat: pat.clone(), n }, e))
            .map_err(|e| FrameError::Invalid(e.to_string().replace("str_split:", "explode:")))?;
        let mut schema = self.schema.as_ref().clone();
        let mut toks = self.col_tokens.as_ref().clone();
        let stage = Stage::Explode { column: column.to_string(), pat, n };
        if let Some(i) = schema.cols.iter().position(|(c, _)| c == column) {
            schema.cols[i].1 = DType::Str;
            toks[i] = Tokenizer::new().str(&toks[i]).serde(&stage).finish();
        }
        Ok(self.staged(stage, schema, toks, true))
    }
}

impl Series {
    /// `s.str.split(pat, n=n).explode()`.
    pub fn explode(&self, pat: Option<String>, n: Option<usize>) -> Result<Series, FrameError> {
        self.to_frame().explode(&self.name, pat, n)?.column(&self.name)
    }
}

/// A category as pandas names a column after it.
pub fn label(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        Value::Bool(b) => if *b { "True" } else { "False" }.to_string(),
        Value::Float(f) if f.fract() == 0.0 && f.is_finite() => format!("{f:.1}"),
        other => other.to_json(),
    }
}

/// `column == v`, false where the column is missing.
fn equals(column: &str, v: &Value) -> Expr {
    Expr::FillNa(Box::new(Expr::bin(BinOp::Eq, Expr::col(column), Expr::Lit(v.clone()))), Value::Bool(false))
}

impl DataFrame {
    /// `get_dummies`: for each `(column, prefix, categories)`, one bool
    /// column `{prefix}{sep}{category}` per category, true where the
    /// column equals it, in place of the column; the other columns first,
    /// as pandas.
    pub fn get_dummies(
        &self,
        encode: &[(String, String, Vec<Value>)],
        sep: &str,
    ) -> Result<DataFrame, FrameError> {
        let mut assigns = Vec::new();
        let mut names = Vec::new();
        for (col, prefix, cats) in encode {
            self.check_columns([col])?;
            for v in cats {
                let name = format!("{prefix}{sep}{}", label(v));
                if self.schema.contains(&name) || names.contains(&name) {
                    return Err(invalid(format!("get_dummies: the column \"{name}\" would be made twice")));
                }
                let s = Series::typed(self.clone(), equals(col, v), name.clone())?;
                assigns.push((name.clone(), Assigned::Series(s)));
                names.push(name);
            }
        }
        let mut keep: Vec<String> = self
            .schema
            .names()
            .filter(|n| !encode.iter().any(|(c, _, _)| c == *n))
            .map(String::from)
            .collect();
        keep.extend(names);
        self.assign(assigns)?.project(&keep)
    }

    /// `pivot_table(index, columns, values, aggfunc)`: one row per index
    /// value (sorted), one column per category of `columns` (named after
    /// it) holding `agg` of `values` over the rows of that index value and
    /// category; missing where there are none, as pandas. Rows with no
    /// value in any column are left out (pandas' `dropna`).
    pub fn pivot_table(
        &self,
        ctx: &Ctx,
        index: &str,
        columns: &str,
        categories: &[Value],
        values: &str,
        agg: Red,
    ) -> Result<DataFrame, FrameError> {
        self.check_columns([&index.to_string(), &columns.to_string(), &values.to_string()])?;
        if !matches!(agg, Red::Sum | Red::Mean | Red::Count | Red::Min | Red::Max) {
            return Err(invalid(format!(
                "pivot_table: aggfunc {} is not supported (sum, mean, count, min, max)",
                agg.name()
            )));
        }
        if categories.is_empty() {
            return Err(invalid("pivot_table: the columns column has no values"));
        }
        let vals = self.column(values)?;
        let mut assigns = Vec::new();
        let mut aggs = Vec::new();
        let mut outs = Vec::new();
        for (i, c) in categories.iter().enumerate() {
            let (tmp, out) = (format!("__brisk_pivot_{i}"), label(c));
            let s = vals.map_expr(|x| {
                Expr::IfElse(Box::new(equals(columns, c)), x, Box::new(Expr::Lit(Value::Unit)))
            })?;
            assigns.push((tmp.clone(), Assigned::Series(s)));
            aggs.push((out.clone(), tmp.clone(), agg));
            // A sum over no values is missing in a pivot table, not 0.
            aggs.push((format!("__brisk_pivot_n{i}"), tmp, Red::Count));
            outs.push(out);
        }
        if outs.iter().any(|o| o == index) || outs.iter().enumerate().any(|(i, o)| outs[..i].contains(o)) {
            return Err(invalid("pivot_table: two columns would share a name"));
        }
        let grouped = self.assign(assigns)?.groupby_agg(ctx, &[index.to_string()], &aggs, 1)?;
        let mut fixed = Vec::new();
        let mut present: Option<Expr> = None;
        for (i, out) in outs.iter().enumerate() {
            let n = Expr::col(&format!("__brisk_pivot_n{i}"));
            let has = Expr::bin(BinOp::Gt, n, Expr::Lit(Value::Int(0)));
            let s = grouped
                .column(out)?
                .map_expr(|x| Expr::IfElse(Box::new(has.clone()), x, Box::new(Expr::Lit(Value::Unit))))?;
            fixed.push((out.clone(), Assigned::Series(s)));
            present = Some(match present {
                None => has,
                Some(p) => Expr::bin(BinOp::Or, p, has),
            });
        }
        let mut keep = vec![index.to_string()];
        keep.extend(outs);
        let done = grouped.assign(fixed)?;
        let Some(p) = present else { return Err(invalid("pivot_table: no categories")) };
        let any = Series::typed(done.clone(), p, "present".into())?;
        done.filter(&any)?.project(&keep)
    }
}
