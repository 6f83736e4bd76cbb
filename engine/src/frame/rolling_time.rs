//! Rolling windows of time, `rolling("1h")` on a datetime column (the
//! index `set_index` made, or `on`), as pandas': row i's window holds the
//! rows whose time is in `(t_i - span, t_i]`. Across partitions as Dask's
//! `map_overlap` with a time `before`: each partition gets the rows of
//! the partitions before it that are less than `span` older than their
//! last row (`edge`), since its own rows are no older than that.

use polars::prelude::*;

use super::rolling::{RollAgg, roll_by, with_before};

/// The times of `on` in `before` then `part`, in nanoseconds; they must be
/// present and never decrease, as pandas requires.
fn times(part: &DataFrame, before: Option<&DataFrame>, on: &str) -> PolarsResult<Vec<i64>> {
    let mut t: Vec<Option<i64>> = match before {
        Some(b) => b.column(on)?.cast(&DataType::Int64)?.i64()?.iter().collect(),
        None => Vec::new(),
    };
    t.extend(part.column(on)?.cast(&DataType::Int64)?.i64()?.iter());
    let t: Option<Vec<i64>> = t.into_iter().collect();
    let Some(t) = t else { polars_bail!(ComputeError: "rolling: column \"{}\" has missing times", on) };
    if t.windows(2).any(|w| w[1] < w[0]) {
        polars_bail!(ComputeError: "rolling: column \"{}\" is not sorted; a window of time needs sorted times (set_index sorts)", on);
    }
    Ok(t)
}

/// The aggregate of `columns` over windows of `span` nanoseconds of `on`;
/// other columns are kept as they are.
pub fn rolling_time(
    part: &DataFrame,
    before: Option<&DataFrame>,
    span: i64,
    on: &str,
    min_periods: usize,
    agg: RollAgg,
    columns: &[String],
) -> PolarsResult<DataFrame> {
    let t = times(part, before, on)?;
    let mut starts = Vec::with_capacity(t.len());
    let mut lo = 0usize;
    for (i, &ti) in t.iter().enumerate() {
        while lo < i && t[lo] <= ti.saturating_sub(span) {
            lo += 1;
        }
        starts.push(lo);
    }
    let mut out = part.clone();
    for c in columns {
        let (v, skip) = with_before(part, before, c)?;
        let r = roll_by(&v, |i| starts[i], min_periods, agg);
        out.with_column(Series::new(c.as_str().into(), &r[skip..]).into_column())?;
    }
    Ok(out)
}

/// The rows of `before` then `part` less than `span` older than the last:
/// all that the partitions after may need.
pub fn edge(before: Option<&DataFrame>, part: &DataFrame, on: &str, span: i64) -> PolarsResult<DataFrame> {
    let all = match before {
        Some(b) => b.vstack(part)?,
        None => part.clone(),
    };
    let t = all.column(on)?.cast(&DataType::Int64)?;
    let t = t.i64()?;
    let Some(last) = t.max() else { return Ok(all) };
    let keep: BooleanChunked =
        t.iter().map(|x| Some(x.is_some_and(|x| x > last.saturating_sub(span)))).collect();
    all.filter(&keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000_000_000;

    /// pandas 3.1: `Series([1, 2, nan, 4, 5], index=[0h, 0.5h, 1h, 2.5h, 3h]).rolling("1h").sum()`
    /// gives [1, 3, 2, 4, 9] (and `.count()` [1, 2, 1, 1, 2]), for any cut.
    #[test]
    fn windows_of_time_match_pandas_across_every_cut() {
        let t = [0, H / 2, H, 5 * H / 2, 3 * H];
        let v = [Some(1.0), Some(2.0), None, Some(4.0), Some(5.0)];
        let df = df!("t" => t.to_vec(), "v" => v.to_vec()).expect("df");
        for (agg, want) in [
            (RollAgg::Sum, [Some(1.0), Some(3.0), Some(2.0), Some(4.0), Some(9.0)]),
            (RollAgg::Count, [Some(1.0), Some(2.0), Some(1.0), Some(1.0), Some(2.0)]),
            (RollAgg::Mean, [Some(1.0), Some(1.5), Some(2.0), Some(4.0), Some(4.5)]),
        ] {
            for cut in 0..=5 {
                let (a, b) = (df.slice(0, cut), df.slice(cut as i64, 5 - cut));
                let edge = edge(None, &a, "t", H).expect("edge");
                let first = rolling_time(&a, None, H, "t", 1, agg, &["v".into()]).expect("a");
                let second = rolling_time(&b, Some(&edge), H, "t", 1, agg, &["v".into()]).expect("b");
                let got: Vec<Option<f64>> = first
                    .column("v")
                    .and_then(|c| c.f64().map(|f| f.iter().collect::<Vec<_>>()))
                    .expect("v")
                    .into_iter()
                    .chain(second.column("v").expect("v").f64().expect("f").iter())
                    .collect();
                assert_eq!(got, want, "{agg:?} cut {cut}");
            }
        }
        let unsorted = df!("t" => [H, 0], "v" => [1.0, 2.0]).expect("df");
        let e = rolling_time(&unsorted, None, H, "t", 1, RollAgg::Sum, &["v".into()]).expect_err("unsorted");
        assert!(e.to_string().contains("not sorted"), "{e}");
    }
}
