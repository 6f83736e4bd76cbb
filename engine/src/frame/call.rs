//! Script closures inside column expressions: `s.map(f)` / `s.apply(f)`
//! call the closure on each value, `df.apply(f, #{axis: 1})` on each row
//! as a map. An expression stays plain data; the closures run through the
//! `UdfRunner` a task hands to `Expr::eval_in` as `Closures`, so filters
//! and new columns built on a closure's values fuse into the partition's
//! stages like any other expression.

use std::cell::RefCell;
use std::sync::Arc;

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use super::dtype::DType;
use crate::error::{TaskError, TaskErrorKind};
use crate::runner::{TaskContext, Udf, UdfRunner};
use crate::value::{Value, cell};

/// A closure called once per row, on the values of its argument
/// expressions (`Expr::Call`'s): the one value, or with `fields` a map of
/// each field to its argument's value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Call {
    pub udf: Arc<Udf>,
    /// The map's keys, one per argument; `None` for one plain value.
    pub fields: Option<Vec<String>>,
    /// The type of the values the closure gives (its `meta`).
    pub dtype: DType,
    /// Missing values stay missing without a call (pandas'
    /// `na_action="ignore"`); otherwise the closure gets `()` for them.
    pub skip_missing: bool,
    /// The method, for messages (`map`, `apply`, `query`).
    pub what: String,
}

/// The script engine a task lends its expressions, and the first closure
/// error, kept whole (polars' error type would flatten it to a string).
pub struct Closures<'a> {
    runner: &'a dyn UdfRunner,
    ctx: &'a TaskContext<'a>,
    failed: RefCell<Option<TaskError>>,
}

impl<'a> Closures<'a> {
    pub fn new(runner: &'a dyn UdfRunner, ctx: &'a TaskContext<'a>) -> Self {
        Closures { runner, ctx, failed: RefCell::new(None) }
    }

    /// The closure error behind a failed evaluation, if it was one.
    pub fn take_error(&self) -> Option<TaskError> {
        self.failed.borrow_mut().take()
    }

    fn fail(&self, e: TaskError) -> PolarsError {
        let msg = e.message.clone();
        self.failed.borrow_mut().get_or_insert(e);
        PolarsError::ComputeError(msg.into())
    }
}

impl Call {
    /// The closure's values for the rows of its arguments' values `args`,
    /// as a column of `dtype` (datetimes as text, for the caller to parse).
    pub fn eval(&self, args: &[Series], cl: Option<&Closures<'_>>) -> PolarsResult<Series> {
        let Some(cl) = cl else {
            return Err(PolarsError::ComputeError(
                format!("{}: closure '{}' needs the script engine here", self.what, self.udf.label).into(),
            ));
        };
        let height = args.iter().map(|s| s.len()).max().unwrap_or(0);
        let (items, missing): (Vec<Value>, Vec<bool>) = match (&self.fields, args) {
            (None, [s]) => {
                let items: Vec<Value> = s.iter().map(cell).collect();
                let missing = items.iter().map(|v| matches!(v, Value::Unit)).collect();
                (items, missing)
            }
            (Some(names), args) if names.len() == args.len() => {
                // A literal argument is one value for every row.
                let value =
                    |s: &Series, i: usize| s.get(if s.len() == 1 { 0 } else { i }).map_or(Value::Unit, cell);
                let rows = (0..height)
                    .map(|i| {
                        Value::Map(Arc::new(
                            names.iter().zip(args).map(|(n, s)| (n.clone(), value(s, i))).collect(),
                        ))
                    })
                    .collect();
                (rows, vec![false; height])
            }
            _ => {
                return Err(PolarsError::ComputeError(
                    format!("{}: the arguments do not match the call", self.what).into(),
                ));
            }
        };
        let (called, at): (Vec<Value>, Vec<usize>) = if self.skip_missing {
            items.into_iter().enumerate().filter(|(i, _)| !missing[*i]).map(|(i, v)| (v, i)).unzip()
        } else {
            let n = items.len();
            (items, (0..n).collect())
        };
        let got = cl.runner.call_each(&self.udf, &called, cl.ctx).map_err(|(i, mut e)| {
            if e.kind == TaskErrorKind::User {
                e.message = format!(
                    "{}: {} (row {} of the partition)",
                    self.what,
                    e.message,
                    at.get(i).copied().unwrap_or(i)
                );
            }
            cl.fail(e)
        })?;
        let mut out = vec![Value::Unit; missing.len()];
        for (v, i) in got.into_iter().zip(at) {
            out[i] = v;
        }
        self.column(out).map_err(|e| cl.fail(e))
    }

    /// The values as a column of the stated type, or which row broke it.
    fn column(&self, vals: Vec<Value>) -> Result<Series, TaskError> {
        let bad = |i: usize, v: &Value| {
            let hint = if self.what == "query" { "" } else { " (give #{meta: ...} to say otherwise)" };
            TaskError::user(format!(
                "{}: the closure gave {} for row {i} of the partition, but its values are {}{hint}",
                self.what,
                v.type_name(),
                self.dtype
            ))
        };
        let name: PlSmallStr = "call".into();
        let check = |want: fn(&Value) -> bool| -> Result<(), TaskError> {
            match vals.iter().enumerate().find(|(_, v)| !matches!(v, Value::Unit) && !want(v)) {
                Some((i, v)) => Err(bad(i, v)),
                None => Ok(()),
            }
        };
        Ok(match self.dtype {
            DType::Int64 => {
                check(|v| matches!(v, Value::Int(_)))?;
                let v: Vec<Option<i64>> =
                    vals.iter().map(|v| if let Value::Int(i) = v { Some(*i) } else { None }).collect();
                Series::new(name, v)
            }
            DType::Float64 => {
                check(|v| matches!(v, Value::Int(_) | Value::Float(_)))?;
                let v: Vec<Option<f64>> = vals
                    .iter()
                    .map(|v| match v {
                        Value::Int(i) => Some(*i as f64),
                        Value::Float(f) => Some(*f),
                        _ => None,
                    })
                    .collect();
                Series::new(name, v)
            }
            DType::Bool => {
                check(|v| matches!(v, Value::Bool(_)))?;
                let v: Vec<Option<bool>> =
                    vals.iter().map(|v| if let Value::Bool(b) = v { Some(*b) } else { None }).collect();
                Series::new(name, v)
            }
            DType::Str | DType::Datetime | DType::Category => {
                check(|v| matches!(v, Value::Str(_)))?;
                let v: Vec<Option<&str>> = vals
                    .iter()
                    .map(|v| if let Value::Str(s) = v { Some(s.as_ref()) } else { None })
                    .collect();
                Series::new(name, v)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{Code, SourceChunk};
    use std::sync::atomic::AtomicBool;

    /// Doubles numbers, fails on strings: enough of a script engine.
    struct Doubler;

    impl UdfRunner for Doubler {
        fn call(&self, _: &Udf, args: Vec<Value>, _: &TaskContext<'_>) -> Result<Value, TaskError> {
            match args.first() {
                Some(Value::Int(i)) => Ok(Value::Int(i * 2)),
                Some(Value::Map(m)) => Ok(Value::Int(m.len() as i64)),
                Some(Value::Unit) => Ok(Value::Unit),
                _ => Err(TaskError::user("not a number")),
            }
        }
    }

    fn call(fields: Option<Vec<String>>, dtype: DType, skip_missing: bool) -> Call {
        let code = Code::new(vec![SourceChunk { origin: "t".into(), text: "".into() }]);
        let udf = Udf { label: "f".into(), entry: "f".into(), code: Arc::new(code), curry: vec![] };
        Call { udf: Arc::new(udf), fields, dtype, skip_missing, what: "map".into() }
    }

    #[test]
    fn values_rows_missing_and_errors() {
        let x = Series::new("x".into(), [Some(1i64), None, Some(3)]);
        let s = Series::new("s".into(), ["a", "b", "c"]);
        let (key, stop) = (crate::key::Key::new("k"), Arc::new(AtomicBool::new(false)));
        let ctx = TaskContext::new(&key, &stop);
        let cl = Closures::new(&Doubler, &ctx);
        let each = call(None, DType::Int64, true);
        let got = each.eval(std::slice::from_ref(&x), Some(&cl)).expect("map");
        assert_eq!(got.i64().expect("ints").iter().collect::<Vec<_>>(), vec![Some(2), None, Some(6)]);
        let rows = call(Some(vec!["x".into(), "s".into()]), DType::Int64, false);
        let both = [x.clone(), s.clone()];
        assert_eq!(rows.eval(&both, Some(&cl)).expect("rows").i64().expect("ints").get(1), Some(2));
        // A closure error keeps its message and names the row.
        let on_str = call(None, DType::Int64, false);
        assert!(on_str.eval(std::slice::from_ref(&s), Some(&cl)).is_err());
        let e = cl.take_error().expect("kept");
        assert!(e.message.contains("not a number") && e.message.contains("row 0"), "{}", e.message);
        // A value of the wrong type names the row and the stated type.
        let as_bool = call(None, DType::Bool, true);
        assert!(as_bool.eval(std::slice::from_ref(&x), Some(&cl)).is_err());
        let e = cl.take_error().expect("kept");
        assert!(e.message.contains("gave int for row 0"), "{}", e.message);
        // Arguments that do not fit the call, or no script engine: errors.
        assert!(rows.eval(std::slice::from_ref(&x), Some(&cl)).is_err());
        assert!(each.eval(std::slice::from_ref(&x), None).is_err());
    }
}
