//! `cumsum`, `cumprod`, `cummax` and `cummin` across partitions, as
//! Dask's `cumulative_wrapper`: each partition's own running values, its
//! last one, a chain of carries (partition i's is what came before it),
//! and the carry folded into each partition's running values. Missing
//! values (and NaN) stay missing and are skipped, as pandas' `skipna`.

use polars::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CumAgg {
    Sum,
    Prod,
    Max,
    Min,
}

impl CumAgg {
    pub fn name(self) -> &'static str {
        match self {
            CumAgg::Sum => "cumsum",
            CumAgg::Prod => "cumprod",
            CumAgg::Max => "cummax",
            CumAgg::Min => "cummin",
        }
    }

    fn int(self, a: i64, b: i64) -> i64 {
        match self {
            // NumPy's int64 arithmetic wraps.
            CumAgg::Sum => a.wrapping_add(b),
            CumAgg::Prod => a.wrapping_mul(b),
            CumAgg::Max => a.max(b),
            CumAgg::Min => a.min(b),
        }
    }

    fn float(self, a: f64, b: f64) -> f64 {
        match self {
            CumAgg::Sum => a + b,
            CumAgg::Prod => a * b,
            CumAgg::Max => a.max(b),
            CumAgg::Min => a.min(b),
        }
    }
}

/// What one task of the scan does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CumStep {
    /// The partition's own running values.
    Local,
    /// One row: the last present running value of each column.
    Last,
    /// One row: the carry before (first input) folded with a partition's
    /// last values (second input).
    Merge,
    /// The running values (first input) with the carry (second) folded in.
    Apply,
}

/// `f(acc, v)` down a column, missing values skipped; with `start`, the
/// accumulator starts there.
fn scan(s: &Series, agg: CumAgg, start: Option<&AnyValue<'_>>, running: bool) -> PolarsResult<Series> {
    let name = s.name().clone();
    match s.dtype() {
        DataType::Int64 => {
            let mut acc = start.and_then(|v| v.extract::<i64>());
            let out: Vec<Option<i64>> = s
                .i64()?
                .iter()
                .map(|v| {
                    let x = v?;
                    let y = acc.map_or(x, |a| agg.int(a, x));
                    if running {
                        acc = Some(y);
                    }
                    Some(y)
                })
                .collect();
            Ok(Series::new(name, out))
        }
        DataType::Float64 => {
            let mut acc = start.and_then(|v| v.extract::<f64>()).filter(|x| !x.is_nan());
            let out: Vec<Option<f64>> = s
                .f64()?
                .iter()
                .map(|v| {
                    let x = v?;
                    if x.is_nan() {
                        return Some(x);
                    }
                    let y = acc.map_or(x, |a| agg.float(a, x));
                    if running {
                        acc = Some(y);
                    }
                    Some(y)
                })
                .collect();
            Ok(Series::new(name, out))
        }
        t => Err(PolarsError::ComputeError(format!("{} needs a numeric column, not {t}", agg.name()).into())),
    }
}

/// The last present (and not NaN) value of a column, as a one-row column.
fn last(s: &Series) -> PolarsResult<Series> {
    let present = match s.dtype() {
        DataType::Float64 => {
            let keep: BooleanChunked = s.f64()?.iter().map(|x| x.map(|x| !x.is_nan())).collect();
            s.filter(&keep)?.drop_nulls()
        }
        _ => s.drop_nulls(),
    };
    Ok(if present.is_empty() {
        Series::full_null(s.name().clone(), 1, s.dtype())
    } else {
        present.tail(Some(1))
    })
}

/// One step of the scan of `columns` (the other columns pass through).
pub fn step(
    agg: CumAgg,
    columns: &[String],
    step: CumStep,
    first: &DataFrame,
    second: Option<&DataFrame>,
) -> PolarsResult<DataFrame> {
    let need_second =
        || second.ok_or_else(|| PolarsError::ComputeError(format!("{} needs a carry", agg.name()).into()));
    match step {
        CumStep::Local | CumStep::Apply => {
            let mut out = first.clone();
            for c in columns {
                let s = first.column(c)?.as_materialized_series();
                let done = if step == CumStep::Local {
                    scan(s, agg, None, true)?
                } else {
                    let carry = need_second()?.column(c)?.get(0)?;
                    if carry.is_null() { s.clone() } else { scan(s, agg, Some(&carry), false)? }
                };
                out.replace(c, done.into_column())?;
            }
            Ok(out)
        }
        CumStep::Last => {
            let cols = columns
                .iter()
                .map(|c| last(first.column(c)?.as_materialized_series()).map(|s| s.into_column()))
                .collect::<PolarsResult<Vec<_>>>()?;
            DataFrame::new(1, cols)
        }
        CumStep::Merge => {
            let next = need_second()?;
            let mut cols = Vec::with_capacity(columns.len());
            for c in columns {
                let before = first.column(c)?.as_materialized_series();
                let carry = before.get(0)?;
                let last = next.column(c)?.as_materialized_series();
                let merged = if last.null_count() == last.len() {
                    // A partition with nothing present leaves the carry as it was.
                    before.clone()
                } else if carry.is_null() {
                    last.clone()
                } else {
                    scan(last, agg, Some(&carry), false)?
                };
                cols.push(merged.into_column());
            }
            DataFrame::new(1, cols)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(agg: CumAgg, parts: &[DataFrame]) -> Vec<Option<f64>> {
        let cols = ["x".to_string()];
        let local: Vec<DataFrame> =
            parts.iter().map(|p| step(agg, &cols, CumStep::Local, p, None).expect("local")).collect();
        let mut out = local[0].clone();
        let mut carry: Option<DataFrame> = None;
        for i in 1..local.len() {
            let last = step(agg, &cols, CumStep::Last, &local[i - 1], None).expect("last");
            carry = Some(match carry {
                None => last,
                Some(c) => step(agg, &cols, CumStep::Merge, &c, Some(&last)).expect("merge"),
            });
            let applied = step(agg, &cols, CumStep::Apply, &local[i], carry.as_ref()).expect("apply");
            out.vstack_mut(&applied).expect("stack");
        }
        out.column("x").expect("x").cast(&DataType::Float64).expect("f").f64().expect("f").iter().collect()
    }

    #[test]
    fn scans_cross_partitions_and_skip_missing() {
        let parts = [
            df!("x" => [Some(1i64), None, Some(3)]).expect("a"),
            df!("x" => [None::<i64>, None]).expect("b"),
            df!("x" => [Some(-2i64), Some(5)]).expect("c"),
        ];
        assert_eq!(run(CumAgg::Sum, &parts), [Some(1.0), None, Some(4.0), None, None, Some(2.0), Some(7.0)]);
        assert_eq!(
            run(CumAgg::Prod, &parts),
            [Some(1.0), None, Some(3.0), None, None, Some(-6.0), Some(-30.0)]
        );
        assert_eq!(run(CumAgg::Max, &parts), [Some(1.0), None, Some(3.0), None, None, Some(3.0), Some(5.0)]);
        assert_eq!(
            run(CumAgg::Min, &parts),
            [Some(1.0), None, Some(1.0), None, None, Some(-2.0), Some(-2.0)]
        );
        let floats = [df!("x" => [f64::NAN, 2.0]).expect("f"), df!("x" => [0.5]).expect("g")];
        let got = run(CumAgg::Sum, &floats);
        assert!(got[0].expect("nan").is_nan());
        assert_eq!(&got[1..], [Some(2.0), Some(2.5)]);
        let strings = df!("x" => ["a"]).expect("s");
        assert!(step(CumAgg::Sum, &["x".into()], CumStep::Local, &strings, None).is_err());
    }
}
