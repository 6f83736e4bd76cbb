//! Computed Series (one-column frames) with the lazy path's typing and
//! kernels: operators, element-wise methods and row masks on local data.

use polars::prelude::*;

use super::dtype::{DType, Schema};
use super::error::{FrameError, polars_error};
use super::expr;
use super::partition::Frame;
use crate::value::Value;

/// One side of an operator on computed Series.
pub enum Operand<'a> {
    Series(&'a Frame),
    Scalar(Value),
}

impl Frame {
    /// The first columns of computed Series of as many rows, side by side
    /// under the given names.
    pub fn side_by_side(parts: &[(String, &Frame)]) -> Result<Frame, FrameError> {
        let mut cols = Vec::with_capacity(parts.len());
        let mut height = None;
        for (name, f) in parts {
            let c = f.series_column()?.clone();
            if height.is_some_and(|h| h != c.len()) {
                return Err(FrameError::Invalid(
                    "Series of different lengths cannot stand side by side".into(),
                ));
            }
            height = Some(c.len());
            cols.push(c.with_name(name.as_str().into()));
        }
        DataFrame::new(height.unwrap_or(0), cols).map(Frame).map_err(polars_error)
    }
}

impl Frame {
    /// The column of a computed Series (a one-column frame).
    pub(crate) fn series_column(&self) -> Result<&Column, FrameError> {
        self.0.columns().first().ok_or_else(|| FrameError::Invalid("a Series without a column".into()))
    }

    /// `a op b` on computed Series (one-column frames), or on one and a
    /// scalar: the lazy path's typing (an ill-typed operator is refused
    /// with the reason) and kernels, on local data. The result is named
    /// after the first Series operand.
    pub fn series_binary(op: expr::BinOp, a: Operand<'_>, b: Operand<'_>) -> Result<Frame, FrameError> {
        let mut cols = Vec::new();
        let mut name = None;
        let mut height = None;
        let mut side = |o: Operand<'_>, tag: &str| -> Result<expr::Expr, FrameError> {
            match o {
                Operand::Scalar(v) => Ok(expr::Expr::Lit(v)),
                Operand::Series(f) => {
                    let c = f.series_column()?;
                    if let Some(h) = height
                        && h != c.len()
                    {
                        return Err(FrameError::Invalid(format!(
                            "the Series have {h} and {} rows; an operator on two Series needs the same rows",
                            c.len()
                        )));
                    }
                    height = Some(c.len());
                    name.get_or_insert_with(|| c.name().to_string());
                    cols.push(c.clone().with_name(tag.into()));
                    Ok(expr::Expr::col(tag))
                }
            }
        };
        let e = expr::Expr::bin(op, side(a, "a")?, side(b, "b")?);
        let name = name.ok_or_else(|| FrameError::Invalid("an operator on Series needs a Series".into()))?;
        Frame::evaluate(DataFrame::new(height.unwrap_or(0), cols).map_err(polars_error)?, &e, &name)
    }

    /// The rows where `mask` (a computed bool Series of the same rows) is
    /// true; a missing value keeps no row, as the lazy filter does.
    pub fn rows_where(&self, mask: &Frame) -> Result<Frame, FrameError> {
        let c = mask.series_column()?;
        let m = c.as_materialized_series().bool().map_err(|_| {
            let t =
                DType::of_polars(c.dtype()).map_or_else(|| c.dtype().to_string(), |t| t.name().to_string());
            FrameError::DType(format!("a row mask must be a bool Series, not one of type {t}"))
        })?;
        if m.len() != self.height() {
            return Err(FrameError::Invalid(format!(
                "the mask has {} rows and the frame {}",
                m.len(),
                self.height()
            )));
        }
        self.0.filter(&m.fill_null_with_values(false).map_err(polars_error)?).map(Frame).map_err(polars_error)
    }

    /// `f` of a computed Series' column (an element-wise method).
    pub fn series_map(a: &Frame, f: impl FnOnce(Box<expr::Expr>) -> expr::Expr) -> Result<Frame, FrameError> {
        let c = a.series_column()?;
        let name = c.name().to_string();
        let df = DataFrame::new(c.len(), vec![c.clone().with_name("a".into())]).map_err(polars_error)?;
        Frame::evaluate(df, &f(Box::new(expr::Expr::col("a"))), &name)
    }

    /// `f(a, b)` of two computed Series of one length.
    pub fn series_map2(
        a: &Frame,
        b: &Frame,
        f: impl FnOnce(Box<expr::Expr>, Box<expr::Expr>) -> expr::Expr,
    ) -> Result<Frame, FrameError> {
        let (x, y) = (a.series_column()?, b.series_column()?);
        if x.len() != y.len() {
            return Err(FrameError::Invalid(format!(
                "the Series have {} and {} rows; they must have as many",
                x.len(),
                y.len()
            )));
        }
        let name = x.name().to_string();
        let cols = vec![x.clone().with_name("a".into()), y.clone().with_name("b".into())];
        let df = DataFrame::new(x.len(), cols).map_err(polars_error)?;
        Frame::evaluate(df, &f(Box::new(expr::Expr::col("a")), Box::new(expr::Expr::col("b"))), &name)
    }

    fn evaluate(df: DataFrame, e: &expr::Expr, name: &str) -> Result<Frame, FrameError> {
        let mut cols = Vec::new();
        for c in df.columns() {
            let t = DType::of_polars(c.dtype()).ok_or_else(|| {
                FrameError::DType(format!("a Series of type {} takes no operators or methods", c.dtype()))
            })?;
            cols.push((c.name().to_string(), t));
        }
        e.dtype(&Schema::new(cols))?;
        let s = e.eval(&df).map_err(polars_error)?.with_name(name.into());
        DataFrame::new(s.len(), vec![s.into_column()]).map(Frame).map_err(polars_error)
    }
}
