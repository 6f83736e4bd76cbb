//! `resample(rule)`'s last step: every bin from the first to the last,
//! as pandas' resample gives them, a bin no row fell into filled with 0
//! for counts and sums and missing otherwise.

use std::collections::HashMap;

use polars::prelude::*;

/// The most bins one resample may make.
pub const MAX_BINS: i64 = 10_000_000;

/// `df` (grouped by the bin column `on`, sorted) with a row for every
/// bin of width `step` between its first and last; the columns `zero`
/// are 0 in a new row, the others missing.
pub fn fill(df: &DataFrame, on: &str, step: i64, zero: &[String]) -> PolarsResult<DataFrame> {
    let t = df.column(on)?.cast(&DataType::Int64)?;
    let t = t.i64()?;
    let (Some(lo), Some(hi)) = (t.min(), t.max()) else { return Ok(df.clone()) };
    let n = hi.checked_sub(lo).map_or(i64::MAX, |d| d / step.max(1) + 1);
    if n > MAX_BINS {
        polars_bail!(ComputeError: "resample: {} bins is more than {}; use a wider rule", n, MAX_BINS);
    }
    let at: HashMap<i64, usize> = t.iter().enumerate().filter_map(|(i, v)| v.map(|v| (v, i))).collect();
    let rows: Vec<Option<usize>> = (0..n).map(|k| at.get(&(lo + k * step)).copied()).collect();
    let mut cols = Vec::with_capacity(df.width());
    for c in df.columns() {
        let name = c.name().clone();
        let s = if name.as_str() == on {
            Series::new(name, (0..n).map(|k| lo + k * step).collect::<Vec<i64>>()).cast(c.dtype())?
        } else {
            let fill =
                if zero.iter().any(|z| z == name.as_str()) { AnyValue::Int64(0) } else { AnyValue::Null };
            let vals: Vec<AnyValue<'_>> = rows
                .iter()
                .map(|r| r.map_or_else(|| fill.clone(), |i| c.get(i).unwrap_or(AnyValue::Null)))
                .collect();
            Series::from_any_values_and_dtype(name, &vals, c.dtype(), false)?
        };
        cols.push(s.into_column());
    }
    DataFrame::new(n as usize, cols)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_bins_get_zero_counts_and_missing_means() {
        let df = df!("t" => [0i64, 30, 40], "n" => [2i64, 1, 5], "m" => [1.5, 2.0, 3.0]).expect("df");
        let out = fill(&df, "t", 10, &["n".to_string()]).expect("fill");
        assert_eq!(out.height(), 5);
        let n: Vec<Option<i64>> = out.column("n").expect("n").i64().expect("i").iter().collect();
        assert_eq!(n, [Some(2), Some(0), Some(0), Some(1), Some(5)]);
        let m: Vec<Option<f64>> = out.column("m").expect("m").f64().expect("f").iter().collect();
        assert_eq!(m, [Some(1.5), None, None, Some(2.0), Some(3.0)]);
        let wide = df!("t" => [0i64, 1_000_000_000_000]).expect("w");
        assert!(fill(&wide, "t", 1, &[]).is_err());
        let far = df!("t" => [i64::MIN + 1, i64::MAX]).expect("far");
        assert!(fill(&far, "t", 1, &[]).is_err());
    }
}
