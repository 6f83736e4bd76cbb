//! Rolling windows and shifts across partition edges (Dask's
//! `map_overlap`): each partition is computed with the rows next to it
//! (the last `window - 1` before it; the |periods| before or after it)
//! added, and those rows dropped from the answer again.

use polars::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RollAgg {
    Sum,
    Mean,
    Min,
    Max,
}

impl RollAgg {
    pub fn name(self) -> &'static str {
        match self {
            RollAgg::Sum => "sum",
            RollAgg::Mean => "mean",
            RollAgg::Min => "min",
            RollAgg::Max => "max",
        }
    }
}

/// One column's rolling aggregate over windows of `w` rows, as pandas'
/// `rolling(w)` with `min_periods = w`: a window with a missing value (or
/// NaN) gives a missing value.
fn roll(v: &[Option<f64>], w: usize, agg: RollAgg) -> Vec<Option<f64>> {
    let n = v.len();
    let mut out = vec![None; n];
    if w == 0 {
        return out;
    }
    let ok = |x: &Option<f64>| x.is_some_and(|f| !f.is_nan());
    let mut valid = 0usize;
    // A running sum with Kahan's compensation, as pandas keeps it.
    let mut sum = 0.0f64;
    let mut comp = 0.0f64;
    let mut add = |sum: &mut f64, x: f64| {
        let y = x - comp;
        let t = *sum + y;
        comp = (t - *sum) - y;
        *sum = t;
    };
    // Indices of a monotonic queue for min/max.
    let mut q: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    let better = |a: f64, b: f64| if agg == RollAgg::Min { a <= b } else { a >= b };
    for i in 0..n {
        if ok(&v[i]) {
            valid += 1;
            let x = v[i].unwrap_or(0.0);
            add(&mut sum, x);
            while let Some(&j) = q.back() {
                if better(x, v[j].unwrap_or(0.0)) {
                    q.pop_back();
                } else {
                    break;
                }
            }
            q.push_back(i);
        }
        if i >= w {
            let old = i - w;
            if ok(&v[old]) {
                valid -= 1;
                add(&mut sum, -v[old].unwrap_or(0.0));
            }
            while q.front().is_some_and(|&j| j <= old) {
                q.pop_front();
            }
        }
        if i + 1 >= w && valid == w {
            out[i] = Some(match agg {
                RollAgg::Sum => sum,
                RollAgg::Mean => sum / w as f64,
                RollAgg::Min | RollAgg::Max => q.front().and_then(|&j| v[j]).unwrap_or(f64::NAN),
            });
        }
    }
    out
}

/// The rolling aggregate of `columns` of `part`, with `before` (the rows
/// just before the partition) as the start of its first windows.
pub fn rolling(
    part: &DataFrame,
    before: Option<&DataFrame>,
    window: usize,
    agg: RollAgg,
    columns: &[String],
) -> PolarsResult<DataFrame> {
    let skip = before.map_or(0, DataFrame::height);
    let floats = |df: &DataFrame, c: &str| -> PolarsResult<Vec<Option<f64>>> {
        Ok(df.column(c)?.cast(&DataType::Float64)?.f64()?.iter().collect())
    };
    let mut cols = Vec::with_capacity(columns.len());
    for c in columns {
        let mut v = match before {
            Some(b) => floats(b, c)?,
            None => Vec::new(),
        };
        v.extend(floats(part, c)?);
        let r = roll(&v, window, agg);
        cols.push(Series::new(c.as_str().into(), &r[skip..]).into_column());
    }
    DataFrame::new(part.height(), cols)
}

/// `shift(periods)` of `columns` of `part`, or with `diff` each value
/// minus the shifted one, as pandas'. `edge` holds the rows just before
/// the partition (periods > 0) or just after it (periods < 0), so values
/// cross partition edges; other columns are kept. Integer columns (all
/// columns, for `diff`) become float64 unless nothing moves.
pub fn shift(
    part: &DataFrame,
    edge: Option<&DataFrame>,
    periods: i64,
    diff: bool,
    columns: &[String],
) -> PolarsResult<DataFrame> {
    let h = part.height();
    let floats = diff || periods != 0;
    let cast = |s: &Series| -> PolarsResult<Series> {
        if floats && (diff || s.dtype().is_integer()) { s.cast(&DataType::Float64) } else { Ok(s.clone()) }
    };
    let mut out = part.clone();
    for c in columns {
        let own = cast(part.column(c)?.as_materialized_series())?;
        let whole = match edge {
            Some(e) => {
                let e = cast(e.column(c)?.as_materialized_series())?;
                let (mut first, second) = if periods > 0 { (e, own.clone()) } else { (own.clone(), e) };
                first.append(&second)?;
                first
            }
            None => own.clone(),
        };
        // The partition's rows of the whole shifted: its last h rows when
        // the edge came first, else its first h.
        let start = if periods > 0 { whole.len() - h } else { 0 };
        // Past the rows there are, everything moves out (and no i64 overflows).
        let n = whole.len() as i64;
        let moved = whole.shift(periods.clamp(-n, n)).slice(start as i64, h);
        let s = if diff { (&own - &moved)? } else { moved };
        out.with_column(s.with_name(c.as_str().into()).into_column())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floats(df: &DataFrame, c: &str) -> Vec<Option<f64>> {
        df.column(c).expect("column").f64().expect("f64").iter().collect()
    }

    /// Values come in from the edge on the side they move from; integers
    /// become floats, other columns stay; any i64 shift is all-missing
    /// past the rows there are, not an overflow.
    #[test]
    fn shifts_take_values_across_the_edge() {
        let part = df!("x" => [5i64, 7, 11], "k" => ["a", "b", "c"]).expect("part");
        let before = df!("x" => [1i64, 3], "k" => ["y", "z"]).expect("before");
        let cols = ["x".to_string()];
        let r = shift(&part, Some(&before), 2, false, &cols).expect("shift");
        assert_eq!(floats(&r, "x"), [Some(1.0), Some(3.0), Some(5.0)]);
        assert_eq!(r.column("k").expect("k").str().expect("str").get(0), Some("a"));
        let r = shift(&part, Some(&before), -1, true, &cols).expect("diff");
        assert_eq!(floats(&r, "x"), [Some(-2.0), Some(-4.0), Some(10.0)]);
        let r = shift(&part, None, 1, true, &cols).expect("diff");
        assert_eq!(floats(&r, "x"), [None, Some(2.0), Some(4.0)]);
        for p in [i64::MIN, i64::MAX, 4, -4] {
            let r = shift(&part, None, p, false, &cols).expect("far");
            assert_eq!(floats(&r, "x"), [None, None, None], "{p}");
        }
        let r = shift(&part, None, 0, false, &cols).expect("zero");
        assert_eq!(r.column("x").expect("x").dtype(), &DataType::Int64);
    }

    #[test]
    fn windows_skip_missing_values_and_span_the_edge() {
        let v = [Some(1.0), Some(3.0), None, Some(2.0), Some(5.0), Some(4.0)];
        assert_eq!(roll(&v, 2, RollAgg::Sum), vec![None, Some(4.0), None, None, Some(7.0), Some(9.0)]);
        assert_eq!(roll(&v, 2, RollAgg::Max), vec![None, Some(3.0), None, None, Some(5.0), Some(5.0)]);
        assert_eq!(roll(&v, 3, RollAgg::Min), vec![None, None, None, None, None, Some(2.0)]);
        assert_eq!(roll(&v, 1, RollAgg::Mean)[2], None);
        let before = df!("x" => [1.0f64, 3.0]).expect("before");
        let part = df!("x" => [5i64, 7]).expect("part");
        let r = rolling(&part, Some(&before), 3, RollAgg::Mean, &["x".to_string()]).expect("roll");
        let got: Vec<Option<f64>> = r.column("x").expect("x").f64().expect("f64").iter().collect();
        assert_eq!(got, vec![Some(3.0), Some(5.0)]);
    }
}
