//! Quantiles and `describe` from per-partition samples, as Dask's
//! approximate percentiles: each partition gives evenly spaced order
//! statistics (its minimum and maximum among them) with the number of
//! values each stands for, and the merged points are interpolated. When a
//! partition has no more values than sample points, every value is its
//! own point and the answer is pandas' exact linear interpolation.

use polars::prelude::*;

use super::agg::Stats;

use super::dtype::DType;
use super::red::Red;
use super::shuffle::sample;
use crate::value::Value;

/// Sample points per partition and column.
pub const POINTS: usize = 1000;

/// The `q` quantile of sorted `values` where value `i` stands for
/// `weights[i]` values; `NaN` when there are none.
pub fn weighted(values: &[f64], weights: &[f64], q: f64) -> f64 {
    let total: f64 = weights.iter().sum();
    if values.is_empty() || total <= 0.0 {
        return f64::NAN;
    }
    let t = q * (total - 1.0);
    // Point i sits in the middle of the ranks it stands for.
    let mut before = 0.0;
    let mut prev: Option<(f64, f64)> = None;
    for (v, w) in values.iter().zip(weights) {
        let pos = before + (w - 1.0) / 2.0;
        before += w;
        if t <= pos {
            return match prev {
                None => *v,
                Some((pv, pp)) if pos > pp => pv + (v - pv) * (t - pp) / (pos - pp),
                Some(_) => *v,
            };
        }
        prev = Some((*v, pos));
    }
    prev.map_or(f64::NAN, |(v, _)| v)
}

/// Merged samples (columns `on` and `weight`, any order) sorted, as floats.
fn points(samples: &DataFrame, on: &str) -> PolarsResult<(Vec<f64>, Vec<f64>)> {
    let sorted = samples.sort([on], SortMultipleOptions::default())?;
    let v: Vec<f64> =
        sorted.column(on)?.cast(&DataType::Float64)?.f64()?.iter().map(|x| x.unwrap_or(f64::NAN)).collect();
    let w: Vec<f64> = sorted.column("weight")?.f64()?.iter().map(|x| x.unwrap_or(0.0)).collect();
    Ok((v, w))
}

/// The quantiles `qs` of the merged samples of column `on`.
pub fn quantiles(samples: &DataFrame, on: &str, qs: &[f64]) -> PolarsResult<Vec<f64>> {
    let (v, w) = points(samples, on)?;
    Ok(qs.iter().map(|q| weighted(&v, &w, *q)).collect())
}

/// `describe`'s partial of one partition: per column, its statistics and
/// its sample points.
pub fn describe_partial(df: &DataFrame, columns: &[String]) -> PolarsResult<Value> {
    let mut out = Vec::with_capacity(columns.len());
    for c in columns {
        let st = Stats::of(df.column(c)?.as_materialized_series())?;
        let s = sample(df, c, POINTS)?;
        out.push(Value::list(vec![
            st.to_value(),
            Value::Frame(std::sync::Arc::new(super::partition::Frame(s))),
        ]));
    }
    Ok(Value::list(out))
}

fn parts(v: &Value) -> Option<Vec<(Stats, &DataFrame)>> {
    let Value::List(cols) = v else { return None };
    cols.iter()
        .map(|c| match c {
            Value::List(p) => match p.as_slice() {
                [st, Value::Frame(f)] => Some((Stats::from_value(st)?, &f.0)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Merge `describe` partials.
pub fn describe_combine(partials: &[Value]) -> PolarsResult<Option<Value>> {
    let mut merged: Vec<(Stats, DataFrame)> = Vec::new();
    for p in partials {
        let Some(cols) = parts(p) else { return Ok(None) };
        if merged.is_empty() {
            merged = cols.iter().map(|(s, f)| (s.clone(), (*f).clone())).collect();
            continue;
        }
        for ((st, f), (s2, f2)) in merged.iter_mut().zip(cols) {
            st.merge(&s2);
            f.vstack_mut(f2)?;
        }
    }
    Ok(Some(Value::list(
        merged
            .into_iter()
            .map(|(s, f)| {
                Value::list(vec![s.to_value(), Value::Frame(std::sync::Arc::new(super::partition::Frame(f)))])
            })
            .collect(),
    )))
}

/// The `describe` table: a `statistic` column (count, mean, std, min,
/// 25%, 50%, 75%, max) and one float column per described column.
pub fn describe_finish(merged: &Value, columns: &[(String, DType)]) -> PolarsResult<Option<DataFrame>> {
    let Some(cols) = parts(merged) else { return Ok(None) };
    let names = ["count", "mean", "std", "min", "25%", "50%", "75%", "max"];
    let mut out = vec![Series::new("statistic".into(), names.to_vec()).into_column()];
    let f = |v: Value| match v {
        Value::Int(i) => i as f64,
        Value::Float(x) => x,
        Value::Bool(b) => f64::from(u8::from(b)),
        _ => f64::NAN,
    };
    for ((name, t), (st, samples)) in columns.iter().zip(cols) {
        let q = quantiles(samples, name, &[0.25, 0.5, 0.75])?;
        let vals = vec![
            st.n as f64,
            f(st.finish(Red::Mean, *t)),
            f(st.finish(Red::Std, *t)),
            f(st.finish(Red::Min, *t)),
            q[0],
            q[1],
            q[2],
            f(st.finish(Red::Max, *t)),
        ];
        out.push(Series::new(name.as_str().into(), vals).into_column());
    }
    Ok(Some(DataFrame::new(names.len(), out)?))
}

/// One row: the `q` quantile of each of `columns` (floats), from merged
/// `describe` partials.
pub fn quantile_row(merged: &Value, columns: &[String], q: f64) -> PolarsResult<Option<DataFrame>> {
    let Some(cols) = parts(merged) else { return Ok(None) };
    let mut out = Vec::with_capacity(columns.len());
    for (name, (_, samples)) in columns.iter().zip(cols) {
        let v = quantiles(samples, name, &[q])?;
        out.push(Series::new(name.as_str().into(), v).into_column());
    }
    Ok(Some(DataFrame::new(1, out)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_weights_give_pandas_linear_interpolation() {
        let v = [1.0, 2.0, 4.0, 8.0];
        let w = [1.0; 4];
        assert_eq!(weighted(&v, &w, 0.0), 1.0);
        assert_eq!(weighted(&v, &w, 1.0), 8.0);
        assert_eq!(weighted(&v, &w, 0.5), 3.0);
        assert!((weighted(&v, &w, 0.25) - 1.75).abs() < 1e-12);
        assert!(weighted(&[], &[], 0.5).is_nan());
        // Heavier points pull the median towards them.
        let m = weighted(&[0.0, 10.0], &[9.0, 1.0], 0.5);
        assert!(m < 2.0, "{m}");
    }

    #[test]
    fn large_partitions_give_close_quantiles() {
        // 4 partitions of 50,000 values each, far more than the sample.
        let mut all: Option<DataFrame> = None;
        for p in 0..4i64 {
            let vals: Vec<f64> = (0..50_000i64).map(|i| ((i * 7919 + p * 13) % 200_000) as f64).collect();
            let s = sample(&df!("x" => vals).expect("df"), "x", POINTS).expect("sample");
            match &mut all {
                None => all = Some(s),
                Some(a) => {
                    a.vstack_mut(&s).expect("stack");
                }
            }
        }
        let q = quantiles(&all.expect("samples"), "x", &[0.0, 0.5, 0.9, 1.0]).expect("q");
        assert_eq!(q[0], 0.0);
        assert!((q[1] - 100_000.0).abs() < 1_000.0, "{q:?}");
        assert!((q[2] - 180_000.0).abs() < 1_000.0, "{q:?}");
        assert!(q[3] > 199_000.0, "{q:?}");
    }
}
