//! Column expressions: what `df["x"] * 2 > y` builds in a script. An
//! expression is typed when it is built (against the frame's schema, so a
//! wrong column or a string compared with a number fails at once, before
//! any data is read) and evaluated per partition on polars columns.

use std::collections::BTreeSet;

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use super::calendar::{civil, parse_datetime};
use super::call::Closures;
use super::dtype::{DType, Schema};
use super::error::FrameError;
use crate::value::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    /// `**`: integers stay integers (a negative integer power is an error,
    /// as NumPy's); anything with a float is a float.
    Pow,
    /// `//` (pandas' `floordiv`): the floor of the quotient, as Python's.
    FloorDiv,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
            BinOp::FloorDiv => "//",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&",
            BinOp::Or => "|",
        }
    }

    fn is_comparison(self) -> bool {
        matches!(self, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum UnOp {
    Neg,
    Not,
    Abs,
    IsNa,
    NotNa,
    Round(i32),
    Lower,
    Upper,
    Len,
    /// Parts of a datetime's calendar date (UTC, proleptic Gregorian).
    Year,
    Month,
    Day,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    Col(String),
    /// A scalar: `Unit` (null), bool, int, float or string.
    Lit(Value),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Un(UnOp, Box<Expr>),
    Cast(Box<Expr>, DType),
    IsIn(Box<Expr>, Vec<Value>),
    /// Inclusive on both ends, as pandas' default.
    Between(Box<Expr>, Value, Value),
    /// A regular expression search, as pandas' `str.contains(pat)`.
    Contains(Box<Expr>, String),
    FillNa(Box<Expr>, Value),
    /// A `.str` method of a string column (`text.rs`).
    Text(super::text::TextOp, Box<Expr>),
    /// A part or rounding of a datetime column (`text.rs`).
    Time(super::text::TimeOp, Box<Expr>),
    /// `then` where `cond` is true, else `otherwise` (a missing condition
    /// counts as false): pandas' `where`/`mask`, `clip`, `replace`.
    IfElse(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `clip(lower, upper)`: values below `lower` raised to it, above
    /// `upper` lowered to it (`Unit`: no bound); the column read once.
    Clip(Box<Expr>, Value, Value),
    /// `replace`: each value equal to an `old` becomes its `new`, all at
    /// once (a `Unit` old matches missing values); the column read once.
    Replace(Box<Expr>, Vec<(Value, Value)>),
    /// `s.map(#{old: new})`: each value's `new`, missing where no `old`
    /// matches (the column read once, however many pairs).
    Lookup(Box<Expr>, Vec<(Value, Value)>),
    /// A script closure on each row's values of the arguments (`map`,
    /// `apply`, `query`).
    Call(Box<super::call::Call>, Vec<Expr>),
}

fn lit_dtype(v: &Value) -> Result<Option<DType>, FrameError> {
    Ok(match v {
        Value::Unit => None,
        Value::Bool(_) => Some(DType::Bool),
        Value::Int(_) => Some(DType::Int64),
        Value::Float(_) => Some(DType::Float64),
        Value::Str(_) => Some(DType::Str),
        other => return Err(FrameError::DType(format!("a {} cannot be a column value", other.type_name()))),
    })
}

impl Expr {
    pub fn col(name: &str) -> Expr {
        Expr::Col(name.to_string())
    }

    pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::Bin(op, Box::new(a), Box::new(b))
    }

    pub fn un(op: UnOp, a: Expr) -> Expr {
        Expr::Un(op, Box::new(a))
    }

    /// Every column the expression reads.
    pub fn columns(&self, out: &mut BTreeSet<String>) {
        match self {
            Expr::Col(c) => {
                out.insert(c.clone());
            }
            Expr::Lit(_) => {}
            Expr::Bin(_, a, b) => {
                a.columns(out);
                b.columns(out);
            }
            Expr::Un(_, a)
            | Expr::Cast(a, _)
            | Expr::IsIn(a, _)
            | Expr::Between(a, _, _)
            | Expr::Contains(a, _)
            | Expr::FillNa(a, _)
            | Expr::Text(_, a)
            | Expr::Time(_, a)
            | Expr::Clip(a, _, _)
            | Expr::Replace(a, _)
            | Expr::Lookup(a, _) => a.columns(out),
            Expr::Call(_, args) => args.iter().for_each(|a| a.columns(out)),
            Expr::IfElse(c, a, b) => {
                c.columns(out);
                a.columns(out);
                b.columns(out);
            }
        }
    }

    /// The same expression with columns renamed by `f` (used to carry a
    /// Series over renames of its frame).
    pub fn map_columns(&self, f: &dyn Fn(&str) -> String) -> Expr {
        let b = |e: &Expr| Box::new(e.map_columns(f));
        match self {
            Expr::Col(c) => Expr::Col(f(c)),
            Expr::Lit(v) => Expr::Lit(v.clone()),
            Expr::Bin(op, x, y) => Expr::Bin(*op, b(x), b(y)),
            Expr::Un(op, x) => Expr::Un(*op, b(x)),
            Expr::Cast(x, t) => Expr::Cast(b(x), *t),
            Expr::IsIn(x, v) => Expr::IsIn(b(x), v.clone()),
            Expr::Between(x, lo, hi) => Expr::Between(b(x), lo.clone(), hi.clone()),
            Expr::Contains(x, p) => Expr::Contains(b(x), p.clone()),
            Expr::FillNa(x, v) => Expr::FillNa(b(x), v.clone()),
            Expr::Text(op, x) => Expr::Text(op.clone(), b(x)),
            Expr::Time(op, x) => Expr::Time(*op, b(x)),
            Expr::IfElse(c, x, y) => Expr::IfElse(b(c), b(x), b(y)),
            Expr::Clip(x, lo, hi) => Expr::Clip(b(x), lo.clone(), hi.clone()),
            Expr::Replace(x, pairs) => Expr::Replace(b(x), pairs.clone()),
            Expr::Lookup(x, pairs) => Expr::Lookup(b(x), pairs.clone()),
            Expr::Call(c, args) => Expr::Call(c.clone(), args.iter().map(|a| a.map_columns(f)).collect()),
        }
    }

    /// The result type, or why the expression is ill-typed. `None` is the
    /// type of a bare null literal. A bare column has its column's type
    /// (`category` too); anything built on it reads the values' type.
    pub fn dtype(&self, schema: &Schema) -> Result<Option<DType>, FrameError> {
        match self {
            Expr::Col(c) => Ok(Some(schema.get(c).ok_or_else(|| FrameError::UnknownColumn {
                column: c.to_string(),
                columns: schema.listing(),
            })?)),
            _ => self.value_dtype(schema),
        }
    }

    /// `dtype`, a category column read as its strings.
    fn value_dtype(&self, schema: &Schema) -> Result<Option<DType>, FrameError> {
        use DType::*;
        Ok(match self {
            Expr::Col(_) => self.dtype(schema)?.map(DType::values),
            Expr::Lit(v) => lit_dtype(v)?,
            Expr::Bin(op, a, b) => {
                let (ta, tb) = (a.value_dtype(schema)?, b.value_dtype(schema)?);
                let unordered = |x: &Expr| -> Result<bool, FrameError> {
                    Ok(matches!(x, Expr::Col(_)) && x.dtype(schema)? == Some(Category))
                };
                if matches!(op, BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)
                    && (unordered(a)? || unordered(b)?)
                {
                    return Err(FrameError::DType(format!(
                        "cannot apply {} to a category: unordered categories can only compare equality or not (as pandas)",
                        op.symbol()
                    )));
                }
                let (Some(x), Some(y)) = (ta, tb) else {
                    // Anything against null: the other side's type.
                    return Ok(if op.is_comparison() { Some(Bool) } else { ta.or(tb) });
                };
                let mismatch = || {
                    FrameError::DType(format!(
                        "cannot apply {} to {} and {}",
                        op.symbol(),
                        x.name(),
                        y.name()
                    ))
                };
                match op {
                    BinOp::Add if x == Str && y == Str => Some(Str),
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Mod | BinOp::Pow | BinOp::FloorDiv => {
                        Some(DType::arith(false, x, y).ok_or_else(mismatch)?)
                    }
                    BinOp::Div => Some(DType::arith(true, x, y).ok_or_else(mismatch)?),
                    BinOp::And | BinOp::Or => {
                        if x == Bool && y == Bool {
                            Some(Bool)
                        } else {
                            return Err(mismatch());
                        }
                    }
                    _ => {
                        let comparable = (x.is_numeric() && y.is_numeric()) || x == y;
                        if !comparable {
                            return Err(mismatch());
                        }
                        Some(Bool)
                    }
                }
            }
            Expr::Un(op, a) => {
                let t = a.value_dtype(schema)?;
                let need = |ok: bool, what: &str| {
                    if ok {
                        Ok(())
                    } else {
                        Err(FrameError::DType(format!(
                            "{what} needs a {} column, not {}",
                            match op {
                                UnOp::Lower | UnOp::Upper | UnOp::Len => "string",
                                UnOp::Not => "bool",
                                UnOp::Year | UnOp::Month | UnOp::Day => "datetime",
                                _ => "numeric",
                            },
                            t.map_or("null", |t| t.name())
                        )))
                    }
                };
                match op {
                    UnOp::IsNa | UnOp::NotNa => Some(Bool),
                    UnOp::Not => {
                        need(t == Some(Bool), "!")?;
                        Some(Bool)
                    }
                    UnOp::Neg | UnOp::Abs => {
                        need(matches!(t, Some(Int64 | Float64)), if *op == UnOp::Neg { "-" } else { "abs" })?;
                        t
                    }
                    UnOp::Round(_) => {
                        need(matches!(t, Some(Int64 | Float64)), "round")?;
                        t
                    }
                    UnOp::Lower | UnOp::Upper => {
                        need(t == Some(Str), if *op == UnOp::Lower { "str_lower" } else { "str_upper" })?;
                        t
                    }
                    UnOp::Len => {
                        need(t == Some(Str), "str_len")?;
                        Some(Int64)
                    }
                    UnOp::Year | UnOp::Month | UnOp::Day => {
                        let what = match op {
                            UnOp::Year => "dt_year",
                            UnOp::Month => "dt_month",
                            _ => "dt_day",
                        };
                        need(t == Some(Datetime), what)?;
                        Some(Int64)
                    }
                }
            }
            Expr::Cast(a, to) => {
                category_from(a.value_dtype(schema)?, *to)?;
                Some(*to)
            }
            Expr::IsIn(a, _) | Expr::Between(a, _, _) => {
                a.value_dtype(schema)?;
                Some(Bool)
            }
            Expr::Contains(a, pat) => {
                column_of(a.value_dtype(schema)?, Str, "string", "str_contains")?;
                regex_check(pat)?;
                Some(Bool)
            }
            Expr::Text(op, a) => {
                column_of(a.value_dtype(schema)?, Str, "string", op.name())?;
                Some(op.dtype()?)
            }
            Expr::IfElse(c, a, b) => {
                let tc = c.value_dtype(schema)?;
                if tc.is_some_and(|t| t != Bool) {
                    return Err(FrameError::DType(format!(
                        "a condition must be a bool Series, not {}",
                        tc.map_or("null", |t| t.name())
                    )));
                }
                match (a.value_dtype(schema)?, b.value_dtype(schema)?) {
                    (Some(x), Some(y)) if x == y => Some(x),
                    (Some(Int64 | Float64), Some(Int64 | Float64)) => Some(Float64),
                    (Some(x), Some(y)) => {
                        return Err(FrameError::DType(format!(
                            "a {} column cannot take {} values here",
                            x.name(),
                            y.name()
                        )));
                    }
                    (x, y) => x.or(y),
                }
            }
            Expr::Clip(a, lo, hi) => {
                let t = a.value_dtype(schema)?;
                if !matches!(t, Some(Int64 | Float64)) {
                    return Err(FrameError::DType(format!(
                        "clip needs a numeric column, not {}",
                        t.map_or("null", |t| t.name())
                    )));
                }
                let mut out = t;
                for v in [lo, hi] {
                    match v {
                        Value::Unit => {}
                        Value::Float(_) => out = Some(Float64),
                        Value::Int(_) => {}
                        other => {
                            return Err(FrameError::DType(format!(
                                "clip: a bound must be a number or (), not {}",
                                other.type_name()
                            )));
                        }
                    }
                }
                out
            }
            Expr::Replace(a, pairs) => new_values_dtype(a.value_dtype(schema)?, pairs, |x, y| {
                format!("replace: a {} column cannot take {} values", x.name(), y.name())
            })?,
            Expr::Time(op, a) => {
                column_of(a.value_dtype(schema)?, Datetime, "datetime", op.name())?;
                Some(op.dtype())
            }
            Expr::Lookup(a, pairs) => {
                a.value_dtype(schema)?;
                new_values_dtype(None, pairs, |x, y| {
                    format!("map: the new values mix {} and {}", x.name(), y.name())
                })?
            }
            Expr::Call(c, args) => {
                for a in args {
                    a.value_dtype(schema)?;
                }
                Some(c.dtype)
            }
            Expr::FillNa(a, v) => {
                let t = a.value_dtype(schema)?;
                match (t, lit_dtype(v)?) {
                    (Some(Float64), Some(Int64)) => Some(Float64),
                    (Some(Int64), Some(Float64)) => Some(Float64),
                    (Some(x), Some(y)) if x != y => {
                        return Err(FrameError::DType(format!(
                            "fillna: cannot fill a {} column with a {}",
                            x, y
                        )));
                    }
                    (t, l) => t.or(l),
                }
            }
        })
    }

    /// Evaluate on one partition. The result has the frame's height, or
    /// length 1 for an expression of literals only.
    pub fn eval(&self, df: &DataFrame) -> PolarsResult<Series> {
        self.eval_in(df, None)
    }

    /// `eval`, with a script engine for the closures (`Expr::Call`).
    pub fn eval_in(&self, df: &DataFrame, cl: Option<&Closures<'_>>) -> PolarsResult<Series> {
        Ok(match self {
            Expr::Col(c) => df.column(c)?.as_materialized_series().clone(),
            Expr::Lit(v) => lit_series(v),
            Expr::Bin(op, a, b) => binary(*op, &a.eval_in(df, cl)?, &b.eval_in(df, cl)?)?,
            Expr::Un(op, a) => unary(*op, &a.eval_in(df, cl)?)?,
            Expr::Cast(a, t) => cast(&a.eval_in(df, cl)?, *t)?,
            Expr::IsIn(a, values) => {
                let s = a.eval_in(df, cl)?;
                let mut mask = BooleanChunked::full(s.name().clone(), false, s.len());
                for v in values {
                    let hit = fill_mask(s.equal(&lit_series(v))?, false)?;
                    mask = &mask | &hit;
                }
                mask.into_series()
            }
            Expr::Between(a, lo, hi) => {
                let s = a.eval_in(df, cl)?;
                let ge = fill_mask(s.gt_eq(&lit_series(lo))?, false)?;
                let le = fill_mask(s.lt_eq(&lit_series(hi))?, false)?;
                (&ge & &le).into_series()
            }
            Expr::Contains(a, pat) => {
                let s = a.eval_in(df, cl)?;
                fill_mask(s.str()?.contains(pat, true)?, false)?.into_series()
            }
            Expr::Text(op, a) => op.eval(&a.eval_in(df, cl)?)?,
            Expr::Time(op, a) => op.eval(&a.eval_in(df, cl)?)?,
            Expr::Clip(a, lo, hi) => {
                let x = a.eval_in(df, cl)?;
                let float = matches!(lo, Value::Float(_)) || matches!(hi, Value::Float(_));
                let mut acc = if float { x.cast(&DataType::Float64)? } else { x.clone() };
                let name = acc.name().clone();
                for (op, bound) in [(BinOp::Lt, lo), (BinOp::Gt, hi)] {
                    if matches!(bound, Value::Unit) {
                        continue;
                    }
                    let out = fill_mask(binary(op, &acc, &lit_series(bound))?.bool()?.clone(), false)?;
                    let b = lit_series(bound).cast(acc.dtype())?.new_from_index(0, acc.len());
                    acc = b.zip_with(&out, &acc)?;
                }
                acc.with_name(name)
            }
            Expr::Replace(a, pairs) => {
                let x = a.eval_in(df, cl)?;
                let h = x.len();
                let target = new_values_target(x.dtype().clone(), pairs);
                let name = x.name().clone();
                let mut acc = x.cast(&target)?;
                let numeric =
                    |d: &DataType| matches!(d, DataType::Int64 | DataType::Float64 | DataType::Boolean);
                for (old, new) in pairs {
                    // Masks from the original values: one replacement never feeds another.
                    let hit = match old {
                        Value::Unit => x.is_null(),
                        old => {
                            let o = lit_series(old);
                            let comparable =
                                o.dtype() == x.dtype() || (numeric(o.dtype()) && numeric(x.dtype()));
                            if !comparable {
                                continue;
                            }
                            fill_mask(binary(BinOp::Eq, &x, &o)?.bool()?.clone(), false)?
                        }
                    };
                    let n = lit_series(new).cast(&target)?.new_from_index(0, h);
                    acc = n.zip_with(&hit, &acc)?;
                }
                acc.with_name(name)
            }
            Expr::Lookup(a, pairs) => {
                let x = a.eval_in(df, cl)?;
                let target = match new_values_target(DataType::Null, pairs) {
                    DataType::Null => DataType::Float64,
                    t => t,
                };
                let numeric =
                    |d: &DataType| matches!(d, DataType::Int64 | DataType::Float64 | DataType::Boolean);
                let mut acc = Series::full_null(x.name().clone(), x.len(), &target);
                // The first pair that matches wins: later ones go under it.
                for (old, new) in pairs.iter().rev() {
                    let hit = match old {
                        Value::Unit => x.is_null(),
                        old => {
                            let o = lit_series(old);
                            if !(o.dtype() == x.dtype() || (numeric(o.dtype()) && numeric(x.dtype()))) {
                                continue;
                            }
                            fill_mask(binary(BinOp::Eq, &x, &o)?.bool()?.clone(), false)?
                        }
                    };
                    let n = lit_series(new).cast(&target)?.new_from_index(0, x.len());
                    acc = n.zip_with(&hit, &acc)?;
                }
                acc
            }
            Expr::IfElse(c, a, b) => {
                let h = df.height();
                // Literals are one row: as long as the frame.
                let wide = |s: Series| if s.len() == 1 && h != 1 { s.new_from_index(0, h) } else { s };
                let cond = wide(c.eval_in(df, cl)?);
                let cond = if cond.dtype() == &DataType::Null {
                    BooleanChunked::full(cond.name().clone(), false, cond.len())
                } else {
                    fill_mask(cond.bool()?.clone(), false)?
                };
                let (x, y) = (wide(a.eval_in(df, cl)?), wide(b.eval_in(df, cl)?));
                let target = match (x.dtype(), y.dtype()) {
                    (DataType::Null, t) | (t, DataType::Null) => t.clone(),
                    (DataType::Int64, DataType::Float64) | (DataType::Float64, DataType::Int64) => {
                        DataType::Float64
                    }
                    (t, _) => t.clone(),
                };
                let name = x.name().clone();
                x.cast(&target)?.zip_with(&cond, &y.cast(&target)?)?.with_name(name)
            }
            Expr::Call(c, args) => {
                let args = args.iter().map(|a| a.eval_in(df, cl)).collect::<PolarsResult<Vec<_>>>()?;
                let s = c.eval(&args, cl)?;
                if c.dtype == DType::Datetime { cast(&s, DType::Datetime)? } else { s }
            }
            Expr::FillNa(a, v) => {
                let s = a.eval_in(df, cl)?;
                if s.null_count() == 0 {
                    return Ok(s);
                }
                let fill = lit_series(v);
                let target = if s.dtype() == &DataType::Int64 && fill.dtype() == &DataType::Float64 {
                    DataType::Float64
                } else {
                    s.dtype().clone()
                };
                let s = s.cast(&target)?;
                let fill = fill.cast(&target)?.new_from_index(0, s.len());
                let keep = s.is_not_null();
                s.zip_with(&keep, &fill)?
            }
        })
    }
}

/// A category column holds strings: only strings (or nothing but missing
/// values) become one.
pub fn category_from(from: Option<DType>, to: DType) -> Result<(), FrameError> {
    match from.map(DType::values) {
        Some(t) if to == DType::Category && t != DType::Str => Err(FrameError::DType(format!(
            "astype: {t} values cannot become a category (brisk's categories are strings; astype(\"string\") first)"
        ))),
        _ => Ok(()),
    }
}

/// The type of a column of `start` values that takes the `new` values
/// of `pairs` (`replace`, `map`): ints meet floats as floats; `mismatch`
/// says why other types cannot meet.
fn new_values_dtype(
    start: Option<DType>,
    pairs: &[(Value, Value)],
    mismatch: impl Fn(DType, DType) -> String,
) -> Result<Option<DType>, FrameError> {
    let mut out = start;
    for (_, new) in pairs {
        out = match (out, lit_dtype(new)?) {
            (t, None) => t,
            (None, n) => n,
            (Some(x), Some(y)) if x == y => Some(x),
            (Some(DType::Int64 | DType::Float64), Some(DType::Int64 | DType::Float64)) => {
                Some(DType::Float64)
            }
            (Some(x), Some(y)) => return Err(FrameError::DType(mismatch(x, y))),
        };
    }
    Ok(out)
}

/// The polars type `new_values_dtype` gives, on a partition.
fn new_values_target(start: DataType, pairs: &[(Value, Value)]) -> DataType {
    pairs.iter().fold(start, |target, (_, new)| {
        let t = lit_series(new).dtype().clone();
        match (&target, &t) {
            (_, DataType::Null) => target,
            (DataType::Null, _) => t,
            (DataType::Int64, DataType::Float64) => DataType::Float64,
            _ => target,
        }
    })
}

/// That `what` is given a column of type `want` (`t` is what it got);
/// `kind` names the type in the message ("string", "datetime").
fn column_of(t: Option<DType>, want: DType, kind: &str, what: &str) -> Result<(), FrameError> {
    if t == Some(want) {
        return Ok(());
    }
    Err(FrameError::DType(format!("{what} needs a {kind} column, not {}", t.map_or("null", |t| t.name()))))
}

fn regex_check(pat: &str) -> Result<(), FrameError> {
    // Evaluate once on an empty column: polars compiles the pattern.
    let empty = StringChunked::full_null("".into(), 0);
    empty
        .contains(pat, true)
        .map(|_| ())
        .map_err(|e| FrameError::Invalid(format!("str_contains: bad pattern \"{pat}\": {e}")))
}

/// A one-row column holding `v`.
pub fn lit_series(v: &Value) -> Series {
    let name: PlSmallStr = "literal".into();
    match v {
        Value::Bool(b) => Series::new(name, [*b]),
        Value::Int(i) => Series::new(name, [*i]),
        Value::Float(f) => Series::new(name, [*f]),
        Value::Str(s) => Series::new(name, [s.as_ref()]),
        _ => Series::full_null(name, 1, &DataType::Null),
    }
}

/// NumPy's comparison rules: a comparison with a missing value is false
/// (true for `!=`), where polars would give null.
fn fill_mask(m: BooleanChunked, missing: bool) -> PolarsResult<BooleanChunked> {
    if m.null_count() == 0 { Ok(m) } else { m.fill_null_with_values(missing) }
}

fn binary(op: BinOp, a: &Series, b: &Series) -> PolarsResult<Series> {
    let numeric = |s: &Series| -> PolarsResult<Series> {
        if s.dtype() == &DataType::Boolean { s.cast(&DataType::Int64) } else { Ok(s.clone()) }
    };
    Ok(match op {
        BinOp::Add => (&numeric(a)? + &numeric(b)?)?,
        BinOp::Sub => (&numeric(a)? - &numeric(b)?)?,
        BinOp::Mul => (&numeric(a)? * &numeric(b)?)?,
        BinOp::Div => (&a.cast(&DataType::Float64)? / &b.cast(&DataType::Float64)?)?,
        BinOp::Mod => python_mod(&numeric(a)?, &numeric(b)?)?,
        BinOp::Pow => power(&numeric(a)?, &numeric(b)?)?,
        BinOp::FloorDiv => floor_div(&numeric(a)?, &numeric(b)?)?,
        BinOp::Eq => nan_is(fill_mask(a.equal(b)?, false)?, a, b, false)?.into_series(),
        BinOp::Ne => nan_is(fill_mask(a.not_equal(b)?, true)?, a, b, true)?.into_series(),
        BinOp::Lt => nan_is(fill_mask(a.lt(b)?, false)?, a, b, false)?.into_series(),
        BinOp::Le => nan_is(fill_mask(a.lt_eq(b)?, false)?, a, b, false)?.into_series(),
        BinOp::Gt => nan_is(fill_mask(a.gt(b)?, false)?, a, b, false)?.into_series(),
        BinOp::Ge => nan_is(fill_mask(a.gt_eq(b)?, false)?, a, b, false)?.into_series(),
        BinOp::And => (a.bool()? & b.bool()?).into_series(),
        BinOp::Or => (a.bool()? | b.bool()?).into_series(),
    })
}

/// A comparison's mask with `value` where either side is NaN: NumPy
/// compares NaN false with everything (polars orders it above all numbers).
fn nan_is(mask: BooleanChunked, a: &Series, b: &Series, value: bool) -> PolarsResult<BooleanChunked> {
    let n = mask.len();
    let nan = |s: &Series| -> PolarsResult<Option<BooleanChunked>> {
        if s.dtype() != &DataType::Float64 {
            return Ok(None);
        }
        let m = fill_mask(broadcast(s, n).f64()?.is_nan(), false)?;
        Ok(m.any().then_some(m))
    };
    let either = match (nan(a)?, nan(b)?) {
        (None, None) => return Ok(mask),
        (Some(x), None) | (None, Some(x)) => x,
        (Some(x), Some(y)) => &x | &y,
    };
    let fill = BooleanChunked::full(mask.name().clone(), value, n);
    fill.zip_with(&either, &mask).map(|m| m.with_name(mask.name().clone()))
}

/// Two numeric columns, broadcast to one length, combined element by
/// element: integers by `int` (`None`: missing) when both are integers,
/// else as floats by `float`. A missing input gives a missing output.
fn numeric_pair(
    a: &Series,
    b: &Series,
    int: impl Fn(i64, i64) -> Option<i64>,
    float: impl Fn(f64, f64) -> f64,
) -> PolarsResult<Series> {
    let n = a.len().max(b.len());
    let (a, b) = (broadcast(a, n), broadcast(b, n));
    let name = a.name().clone();
    if a.dtype() == &DataType::Int64 && b.dtype() == &DataType::Int64 {
        let out: Int64Chunked = a.i64()?.iter().zip(b.i64()?.iter()).map(|(x, y)| int(x?, y?)).collect();
        return Ok(out.with_name(name).into_series());
    }
    let (a, b) = (a.cast(&DataType::Float64)?, b.cast(&DataType::Float64)?);
    let out: Float64Chunked =
        a.f64()?.iter().zip(b.f64()?.iter()).map(|(x, y)| Some(float(x?, y?))).collect();
    Ok(out.with_name(name).into_series())
}

/// `%` as Python and pandas define it: the result takes the divisor's
/// sign; an integer modulo by zero is missing (pandas gives NaN).
fn python_mod(a: &Series, b: &Series) -> PolarsResult<Series> {
    numeric_pair(
        a,
        b,
        |x, y| {
            (y != 0).then(|| {
                let r = x.wrapping_rem(y);
                if r != 0 && (r < 0) != (y < 0) { r + y } else { r }
            })
        },
        |x, y| {
            let r = x % y;
            if r != 0.0 && (r < 0.0) != (y < 0.0) { r + y } else { r }
        },
    )
}

/// `a ** b`: integer powers of integers wrap on overflow, as NumPy's; a
/// negative integer power of an integer is an error (NumPy's message).
fn power(a: &Series, b: &Series) -> PolarsResult<Series> {
    let ints = a.dtype() == &DataType::Int64 && b.dtype() == &DataType::Int64;
    if ints && b.i64()?.iter().any(|e| e.is_some_and(|e| e < 0)) {
        polars_bail!(ComputeError: "integers to negative integer powers are not allowed");
    }
    numeric_pair(a, b, |x, y| Some(x.wrapping_pow(u32::try_from(y).unwrap_or(u32::MAX))), f64::powf)
}

/// `a // b` as Python and NumPy define it. Floats follow CPython's
/// `float_floor_div` (through `fmod`, so `1 // 0.1` is 9.0 as in
/// Python, where `floor(1 / 0.1)` would be 10.0), and `x // 0.0` is
/// `x / 0.0`; an integer floor division by zero is missing, as `%`'s.
/// Integers wrap where NumPy's do (`i64::MIN // -1`).
fn floor_div(a: &Series, b: &Series) -> PolarsResult<Series> {
    numeric_pair(
        a,
        b,
        |x, y| {
            (y != 0).then(|| {
                let q = x.wrapping_div(y);
                if x.wrapping_rem(y) != 0 && (x < 0) != (y < 0) { q - 1 } else { q }
            })
        },
        python_floor_div,
    )
}

/// CPython's `float_floor_div`.
fn python_floor_div(x: f64, y: f64) -> f64 {
    if y == 0.0 {
        return x / y;
    }
    let m = x % y;
    let mut div = (x - m) / y;
    if m != 0.0 && ((y < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    if div != 0.0 {
        let f = div.floor();
        if div - f > 0.5 { f + 1.0 } else { f }
    } else {
        0.0_f64.copysign(x / y)
    }
}

/// Where a column is missing: null, or NaN in a float column (pandas
/// counts both as missing).
pub fn missing(s: &Series) -> PolarsResult<BooleanChunked> {
    let na = s.is_null();
    if s.dtype() == &DataType::Float64 {
        let nan = fill_mask(s.f64()?.is_nan(), false)?;
        return Ok(&na | &nan);
    }
    Ok(na)
}

fn broadcast(s: &Series, n: usize) -> Series {
    if s.len() == 1 && n != 1 { s.new_from_index(0, n) } else { s.clone() }
}

fn unary(op: UnOp, s: &Series) -> PolarsResult<Series> {
    let name = s.name().clone();
    Ok(match op {
        UnOp::Neg => match s.dtype() {
            DataType::Int64 => s.i64()?.apply_values(|v| v.wrapping_neg()).into_series(),
            _ => s.cast(&DataType::Float64)?.f64()?.apply_values(|v| -v).into_series(),
        },
        UnOp::Abs => match s.dtype() {
            DataType::Int64 => s.i64()?.apply_values(|v| v.wrapping_abs()).into_series(),
            _ => s.cast(&DataType::Float64)?.f64()?.apply_values(f64::abs).into_series(),
        },
        UnOp::Not => (!s.bool()?).into_series(),
        UnOp::IsNa | UnOp::NotNa => {
            let na = missing(s)?;
            if op == UnOp::NotNa { (!&na).into_series() } else { na.into_series() }
        }
        UnOp::Round(d) => match s.dtype() {
            // Rounding an integer to 0 or more decimals changes nothing.
            DataType::Int64 if d >= 0 => s.clone(),
            _ => {
                let scale = 10f64.powi(d);
                s.cast(&DataType::Float64)?
                    .f64()?
                    // NumPy rounds halves to even.
                    .apply_values(|v| (v * scale).round_ties_even() / scale)
                    .into_series()
            }
        },
        UnOp::Lower => s.str()?.apply_values(|v| v.to_lowercase().into()).into_series(),
        UnOp::Upper => s.str()?.apply_values(|v| v.to_uppercase().into()).into_series(),
        UnOp::Len => {
            let out: Int64Chunked = s.str()?.iter().map(|v| v.map(|v| v.chars().count() as i64)).collect();
            out.into_series()
        }
        UnOp::Year | UnOp::Month | UnOp::Day => {
            let ns = s.cast(&DataType::Int64)?;
            let out: Int64Chunked = ns
                .i64()?
                .iter()
                .map(|v| {
                    v.map(|v| {
                        let (y, m, d) = civil(v.div_euclid(86_400_000_000_000));
                        match op {
                            UnOp::Year => y,
                            UnOp::Month => m,
                            _ => d,
                        }
                    })
                })
                .collect();
            out.into_series()
        }
    }
    .with_name(name))
}

/// A column as type `t`, failing on a value that does not convert (text
/// becomes a datetime through ISO 8601, as pandas' `astype`).
pub fn cast(s: &Series, t: DType) -> PolarsResult<Series> {
    if t != DType::Datetime || s.dtype() != &DataType::String {
        return s.strict_cast(&t.to_polars());
    }
    let ca = s.str()?;
    let mut out = Vec::with_capacity(ca.len());
    for v in ca.iter() {
        out.push(match v {
            None => None,
            Some(v) if v.trim().is_empty() => None,
            Some(v) => Some(parse_datetime(v.trim()).ok_or_else(|| {
                polars_err!(ComputeError: "column \"{}\": \"{}\" is not a date and time (YYYY-MM-DD[ HH:MM[:SS[.fff]]])", s.name(), v)
            })?),
        });
    }
    Series::new(s.name().clone(), out).cast(&t.to_polars())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_compares_false_as_numpy() {
        let df = df!("x" => [Some(1.0f64), Some(f64::NAN), None]).expect("df");
        let gt = Expr::bin(BinOp::Gt, Expr::col("x"), Expr::Lit(Value::Int(0))).eval(&df).expect("gt");
        let v: Vec<Option<bool>> = gt.bool().expect("bool").iter().collect();
        assert_eq!(v, vec![Some(true), Some(false), Some(false)]);
        let ne = Expr::bin(BinOp::Ne, Expr::col("x"), Expr::Lit(Value::Float(1.0))).eval(&df).expect("ne");
        let v: Vec<Option<bool>> = ne.bool().expect("bool").iter().collect();
        assert_eq!(v, vec![Some(false), Some(true), Some(true)]);
        let eq = Expr::bin(BinOp::Eq, Expr::col("x"), Expr::col("x")).eval(&df).expect("eq");
        let v: Vec<Option<bool>> = eq.bool().expect("bool").iter().collect();
        assert_eq!(v, vec![Some(true), Some(false), Some(false)]);
    }

    fn frame() -> DataFrame {
        df!("x" => [Some(1i64), None, Some(-3)], "y" => [0.5f64, 2.0, -1.5], "s" => ["Ab", "cD", "ab"])
            .expect("frame")
    }

    fn schema() -> Schema {
        Schema::new(vec![("x".into(), DType::Int64), ("y".into(), DType::Float64), ("s".into(), DType::Str)])
    }

    #[test]
    fn arithmetic_and_comparison_follow_numpy() {
        let df = frame();
        let e = Expr::bin(BinOp::Gt, Expr::col("x"), Expr::Lit(Value::Int(0)));
        assert_eq!(e.dtype(&schema()).ok().flatten(), Some(DType::Bool));
        let m = e.eval(&df).expect("eval");
        let got: Vec<Option<bool>> = m.bool().expect("bool").iter().collect();
        assert_eq!(got, vec![Some(true), Some(false), Some(false)]);
        let ne = Expr::bin(BinOp::Ne, Expr::col("x"), Expr::Lit(Value::Int(1))).eval(&df).expect("ne");
        let got: Vec<Option<bool>> = ne.bool().expect("bool").iter().collect();
        assert_eq!(got, vec![Some(false), Some(true), Some(true)]);
        let d = Expr::bin(BinOp::Div, Expr::col("x"), Expr::Lit(Value::Int(2))).eval(&df).expect("div");
        assert_eq!(d.dtype(), &DataType::Float64);
        let m = Expr::bin(BinOp::Mod, Expr::col("x"), Expr::Lit(Value::Int(2))).eval(&df).expect("mod");
        let got: Vec<Option<i64>> = m.i64().expect("i64").iter().collect();
        assert_eq!(got, vec![Some(1), None, Some(1)]);
    }

    #[test]
    fn floor_division_and_powers_follow_python() {
        let ints = |v: &[i64]| Series::new("a".into(), v.to_vec());
        let floats = |v: &[f64]| Series::new("a".into(), v.to_vec());
        let got = floor_div(&ints(&[7, -7, 7, -7, 5]), &ints(&[2, 2, -2, -2, 0])).expect("floordiv");
        let got: Vec<Option<i64>> = got.i64().expect("i64").iter().collect();
        assert_eq!(got, vec![Some(3), Some(-4), Some(-4), Some(3), None]);
        let got = floor_div(&ints(&[i64::MIN]), &ints(&[-1])).expect("no overflow panic");
        assert_eq!(got.i64().expect("i64").get(0), Some(i64::MIN));
        let got =
            floor_div(&floats(&[1.0, -1.0, 1.0, 0.0, 7.5]), &floats(&[0.1, 0.0, 0.0, 0.0, -2.0])).expect("f");
        let got: Vec<f64> = got.f64().expect("f64").iter().map(|x| x.unwrap_or(f64::NAN)).collect();
        assert_eq!(got[..3], [9.0, f64::NEG_INFINITY, f64::INFINITY]);
        assert!(got[3].is_nan());
        assert_eq!(got[4], -4.0);
        let p = power(&ints(&[2, 3, -2]), &ints(&[10, 0, 3])).expect("pow");
        let got: Vec<Option<i64>> = p.i64().expect("i64").iter().collect();
        assert_eq!(got, vec![Some(1024), Some(1), Some(-8)]);
        let e = power(&ints(&[2]), &ints(&[-1])).expect_err("negative power");
        assert!(e.to_string().contains("negative integer powers"), "{e}");
        let p = power(&floats(&[4.0]), &ints(&[-1])).expect("float pow");
        assert_eq!(p.f64().expect("f64").get(0), Some(0.25));
    }

    #[test]
    fn types_are_checked_when_built() {
        let bad = Expr::bin(BinOp::Add, Expr::col("s"), Expr::Lit(Value::Int(1)));
        let e = bad.dtype(&schema()).expect_err("type error");
        assert!(matches!(&e, FrameError::DType(m) if m == "cannot apply + to string and int64"), "{e}");
        let e = Expr::col("zz").dtype(&schema()).expect_err("unknown");
        assert!(matches!(&e, FrameError::UnknownColumn { column, .. } if column == "zz"), "{e}");
        assert_eq!(e.to_string(), "unknown column \"zz\" (columns: x, y, s)");
        let e = Expr::Contains(Box::new(Expr::col("s")), "(".into()).dtype(&schema()).expect_err("regex");
        assert!(matches!(&e, FrameError::Invalid(m) if m.contains("bad pattern")), "{e}");
    }

    #[test]
    fn strings_rounding_and_missing() {
        let df = frame();
        let l = Expr::un(UnOp::Lower, Expr::col("s")).eval(&df).expect("lower");
        let got: Vec<Option<&str>> = l.str().expect("str").iter().collect();
        assert_eq!(got, vec![Some("ab"), Some("cd"), Some("ab")]);
        let r = Expr::un(UnOp::Round(0), Expr::col("y")).eval(&df).expect("round");
        let got: Vec<Option<f64>> = r.f64().expect("f64").iter().collect();
        assert_eq!(got, vec![Some(0.0), Some(2.0), Some(-2.0)]);
        let f = Expr::FillNa(Box::new(Expr::col("x")), Value::Int(7)).eval(&df).expect("fill");
        let got: Vec<Option<i64>> = f.i64().expect("i64").iter().collect();
        assert_eq!(got, vec![Some(1), Some(7), Some(-3)]);
        let c = Expr::Contains(Box::new(Expr::col("s")), "^a".into()).eval(&df).expect("contains");
        assert_eq!(c.bool().expect("bool").sum(), Some(1));
        let i = Expr::IsIn(Box::new(Expr::col("s")), vec![Value::str("ab"), Value::str("Ab")])
            .eval(&df)
            .expect("isin");
        assert_eq!(i.bool().expect("bool").sum(), Some(2));
    }
}
