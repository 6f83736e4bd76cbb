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
    Count,
    Std,
    Var,
    Median,
}

impl RollAgg {
    pub fn name(self) -> &'static str {
        match self {
            RollAgg::Sum => "sum",
            RollAgg::Mean => "mean",
            RollAgg::Min => "min",
            RollAgg::Max => "max",
            RollAgg::Count => "count",
            RollAgg::Std => "std",
            RollAgg::Var => "var",
            RollAgg::Median => "median",
        }
    }
}

/// A window of `window` rows that gives a value once it holds
/// `min_periods` present values (rows, for `count`), as pandas'
/// `rolling(window, min_periods=...)`; `min_periods` is the window by
/// default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub window: usize,
    pub min_periods: usize,
}

/// pandas' running mean and sum of squared deviations, values added and
/// removed as the window moves (`roll_var`).
#[derive(Default)]
struct Moments {
    n: f64,
    mean: f64,
    ssqdm: f64,
}

impl Moments {
    fn add(&mut self, x: f64) {
        self.n += 1.0;
        let d = x - self.mean;
        self.mean += d / self.n;
        self.ssqdm += (self.n - 1.0) * d * d / self.n;
    }

    fn remove(&mut self, x: f64) {
        self.n -= 1.0;
        if self.n > 0.0 {
            let d = x - self.mean;
            self.mean -= d / self.n;
            self.ssqdm -= (self.n + 1.0) * d * d / self.n;
        } else {
            *self = Moments::default();
        }
    }

    fn var(&self) -> Option<f64> {
        (self.n > 1.0).then(|| (self.ssqdm / (self.n - 1.0)).max(0.0))
    }
}

/// One column's rolling aggregate; missing values (and NaN) are skipped.
fn roll(v: &[Option<f64>], win: Window, agg: RollAgg) -> Vec<Option<f64>> {
    if win.window == 0 {
        return vec![None; v.len()];
    }
    roll_by(v, |i| (i + 1).saturating_sub(win.window), win.min_periods, agg)
}

/// One column's rolling aggregate over windows `start_of(i)..=i` (starts
/// never move back: fixed windows of rows, or windows of time over sorted
/// times); missing values (and NaN) are skipped.
pub(super) fn roll_by(
    v: &[Option<f64>],
    start_of: impl Fn(usize) -> usize,
    min_periods: usize,
    agg: RollAgg,
) -> Vec<Option<f64>> {
    let n = v.len();
    let mut out = vec![None; n];
    let minp = if agg == RollAgg::Count { min_periods } else { min_periods.max(1) };
    // The first row still in the window.
    let mut lo = 0usize;
    let present = |x: &Option<f64>| x.filter(|f| !f.is_nan());
    let mut valid = 0usize;
    // A running sum with Kahan's compensation, as pandas keeps it.
    let mut sum = 0.0f64;
    let mut comp = 0.0f64;
    let add = |sum: &mut f64, comp: &mut f64, x: f64| {
        let y = x - *comp;
        let t = *sum + y;
        *comp = (t - *sum) - y;
        *sum = t;
    };
    let mut moments = Moments::default();
    // The window's values in order, for the median.
    let mut sorted: Vec<f64> = Vec::new();
    // Indices of a monotonic queue for min/max.
    let mut q: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    let better = |a: f64, b: f64| if agg == RollAgg::Min { a <= b } else { a >= b };
    for i in 0..n {
        if let Some(x) = present(&v[i]) {
            valid += 1;
            add(&mut sum, &mut comp, x);
            moments.add(x);
            if agg == RollAgg::Median {
                let at = sorted.partition_point(|y| *y < x);
                sorted.insert(at, x);
            }
            while let Some(&j) = q.back() {
                if better(x, v[j].unwrap_or(0.0)) {
                    q.pop_back();
                } else {
                    break;
                }
            }
            q.push_back(i);
        }
        let start = start_of(i).min(i);
        while lo < start {
            let old = lo;
            lo += 1;
            if let Some(x) = present(&v[old]) {
                valid -= 1;
                add(&mut sum, &mut comp, -x);
                moments.remove(x);
                if agg == RollAgg::Median {
                    let at = sorted.partition_point(|y| *y < x);
                    sorted.remove(at.min(sorted.len().saturating_sub(1)));
                }
            }
            while q.front().is_some_and(|&j| j <= old) {
                q.pop_front();
            }
        }
        let rows = i + 1 - lo;
        if agg == RollAgg::Count {
            if rows >= minp {
                out[i] = Some(valid as f64);
            }
            continue;
        }
        if valid == 0 {
            // An empty window starts the sum afresh (pandas' roll_sum
            // does), so no rounding of values gone is carried on.
            sum = 0.0;
            comp = 0.0;
        }
        if agg == RollAgg::Sum && valid == 0 && min_periods == 0 {
            // pandas: the sum of nothing, when nothing is enough, is 0.
            out[i] = Some(0.0);
            continue;
        }
        if valid < minp {
            continue;
        }
        out[i] = match agg {
            RollAgg::Sum => Some(sum),
            RollAgg::Mean => Some(sum / valid as f64),
            RollAgg::Min | RollAgg::Max => q.front().and_then(|&j| v[j]),
            RollAgg::Var => moments.var(),
            RollAgg::Std => moments.var().map(f64::sqrt),
            RollAgg::Median => {
                let m = sorted.len();
                if m % 2 == 1 { Some(sorted[m / 2]) } else { Some((sorted[m / 2 - 1] + sorted[m / 2]) / 2.0) }
            }
            RollAgg::Count => None,
        };
    }
    out
}

fn floats(df: &DataFrame, c: &str) -> PolarsResult<Vec<Option<f64>>> {
    Ok(df.column(c)?.cast(&DataType::Float64)?.f64()?.iter().collect())
}

/// Column `c` of `before` (the rows just before the partition) and of
/// `part`, as floats, and how many came from `before`.
pub fn with_before(
    part: &DataFrame,
    before: Option<&DataFrame>,
    c: &str,
) -> PolarsResult<(Vec<Option<f64>>, usize)> {
    let mut v = match before {
        Some(b) => floats(b, c)?,
        None => Vec::new(),
    };
    let skip = v.len();
    v.extend(floats(part, c)?);
    Ok((v, skip))
}

/// The rolling aggregate of `columns` of `part`, with `before` (the rows
/// just before the partition) as the start of its first windows.
pub fn rolling(
    part: &DataFrame,
    before: Option<&DataFrame>,
    win: Window,
    agg: RollAgg,
    columns: &[String],
) -> PolarsResult<DataFrame> {
    let mut cols = Vec::with_capacity(columns.len());
    for c in columns {
        let (v, skip) = with_before(part, before, c)?;
        let r = roll(&v, win, agg);
        cols.push(Series::new(c.as_str().into(), &r[skip..]).into_column());
    }
    DataFrame::new(part.height(), cols)
}

/// The windows a closure sees (`rolling(..).apply(f)`): for each row
/// `skip..end` of `v`, its window's values (missing ones as `()`), or
/// `None` where the window holds fewer than `min_periods` present values.
/// Callers take a batch of rows at a time, so windows never all sit in
/// memory at once.
pub fn windows(
    v: &[Option<f64>],
    skip: usize,
    end: usize,
    win: Window,
) -> Vec<Option<Vec<crate::value::Value>>> {
    use crate::value::Value;
    let minp = win.min_periods.max(1);
    (skip..end.min(v.len()))
        .map(|i| {
            let from = (i + 1).saturating_sub(win.window);
            let w = &v[from..=i];
            let valid = w.iter().filter(|x| x.is_some_and(|f| !f.is_nan())).count();
            (valid >= minp).then(|| w.iter().map(|x| x.map_or(Value::Unit, Value::Float)).collect())
        })
        .collect()
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
        let full = |w| Window { window: w, min_periods: w };
        let v = [Some(1.0), Some(3.0), None, Some(2.0), Some(5.0), Some(4.0)];
        assert_eq!(roll(&v, full(2), RollAgg::Sum), vec![None, Some(4.0), None, None, Some(7.0), Some(9.0)]);
        assert_eq!(roll(&v, full(2), RollAgg::Max), vec![None, Some(3.0), None, None, Some(5.0), Some(5.0)]);
        assert_eq!(roll(&v, full(3), RollAgg::Min), vec![None, None, None, None, None, Some(2.0)]);
        assert_eq!(roll(&v, full(1), RollAgg::Mean)[2], None);
        let before = df!("x" => [1.0f64, 3.0]).expect("before");
        let part = df!("x" => [5i64, 7]).expect("part");
        let r = rolling(&part, Some(&before), full(3), RollAgg::Mean, &["x".to_string()]).expect("roll");
        let got: Vec<Option<f64>> = r.column("x").expect("x").f64().expect("f64").iter().collect();
        assert_eq!(got, vec![Some(3.0), Some(5.0)]);
    }

    /// pandas: `Series([1, nan, 3, 4, 5, 2]).rolling(...)`.
    #[test]
    fn counts_spreads_medians_and_min_periods_as_pandas() {
        let v = [Some(1.0), None, Some(3.0), Some(4.0), Some(5.0), Some(2.0)];
        let win = |w, m| Window { window: w, min_periods: m };
        assert_eq!(
            roll(&v, win(2, 2), RollAgg::Count),
            [None, Some(1.0), Some(1.0), Some(2.0), Some(2.0), Some(2.0)]
        );
        assert_eq!(
            roll(&v, win(3, 1), RollAgg::Count),
            [Some(1.0), Some(1.0), Some(2.0), Some(2.0), Some(3.0), Some(3.0)]
        );
        let sd = roll(&v, win(3, 3), RollAgg::Std);
        assert_eq!(&sd[..5], [None, None, None, None, Some(1.0)]);
        assert!((sd[5].expect("std") - 1.5275252316519465).abs() < 1e-12);
        assert_eq!(roll(&v, win(3, 3), RollAgg::Median), [None, None, None, None, Some(4.0), Some(4.0)]);
        let m = roll(&v, win(3, 2), RollAgg::Mean);
        assert_eq!(&m[..5], [None, None, Some(2.0), Some(3.5), Some(4.0)]);
        assert!((m[5].expect("mean") - 11.0 / 3.0).abs() < 1e-12);
        let none = [None, Some(2.0)];
        assert_eq!(roll(&none, win(1, 0), RollAgg::Sum), [Some(0.0), Some(2.0)]);
        let w = windows(&v, 4, v.len(), win(3, 2));
        assert_eq!(w[0].as_ref().map(Vec::len), Some(3));
    }
}
