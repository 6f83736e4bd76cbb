//! The block kernels of `OneHotEncoder` (`onehot`): each column's
//! distinct values and their merge, and a block's one-hot rows. Pure
//! functions on a block, tested here.

use crate::array::error::ArrayError;

/// A value as a category: −0 is 0 and every NaN the same NaN (sorted last),
/// as NumPy's `unique` sees them.
pub fn category(v: f64) -> f64 {
    if v.is_nan() { f64::NAN } else { v + 0.0 }
}

/// Where `v` is among sorted categories.
pub fn find(cats: &[f64], v: f64) -> Option<usize> {
    cats.binary_search_by(|c| c.total_cmp(&category(v))).ok()
}

/// Each column's distinct values, sorted: packed as `[p, (count, values)...]`.
pub fn pack_distinct(cols: &[Vec<f64>]) -> Vec<f64> {
    let mut out = vec![cols.len() as f64];
    for c in cols {
        out.push(c.len() as f64);
        out.extend_from_slice(c);
    }
    out
}

pub fn unpack_distinct(v: &[f64]) -> Result<Vec<Vec<f64>>, ArrayError> {
    let bad = || ArrayError::Value("malformed distinct values".into());
    let (&p, mut rest) = v.split_first().ok_or_else(bad)?;
    if !(p >= 0.0 && p as usize as f64 == p && p as usize <= rest.len()) {
        return Err(bad());
    }
    let mut cols = Vec::with_capacity(p as usize);
    for _ in 0..p as usize {
        let (&n, tail) = rest.split_first().ok_or_else(bad)?;
        if !(n >= 0.0 && n as usize as f64 == n && n as usize <= tail.len()) {
            return Err(bad());
        }
        cols.push(tail[..n as usize].to_vec());
        rest = &tail[n as usize..];
    }
    if !rest.is_empty() {
        return Err(bad());
    }
    Ok(cols)
}

/// The union of two columns' sorted distinct values.
pub fn union(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut out: Vec<f64> = a.iter().chain(b).copied().collect();
    out.sort_unstable_by(f64::total_cmp);
    out.dedup_by(|x, y| x.total_cmp(y).is_eq());
    out
}

/// Values as a short list for an error message.
pub fn list(v: &[f64]) -> String {
    let shown: Vec<String> = v.iter().take(10).map(|x| format!("{x}")).collect();
    let more = if v.len() > 10 { format!(", ... ({} in all)", v.len()) } else { String::new() };
    format!("[{}{more}]", shown.join(", "))
}

/// The output columns of features with these categories, dropping these.
pub fn width(categories: &[Vec<f64>], drop: &[Option<usize>]) -> usize {
    categories.iter().zip(drop).map(|(c, d)| c.len().saturating_sub(usize::from(d.is_some()))).sum()
}

/// The one-hot rows of a block (`MlOp::OneHot`): row-major, n × width.
pub fn encode(
    x: ndarray::ArrayView2<'_, f64>,
    categories: &[Vec<f64>],
    drop: &[Option<usize>],
    ignore: bool,
) -> Result<Vec<f64>, ArrayError> {
    let (n, p) = x.dim();
    if categories.len() != p || drop.len() != p {
        return Err(ArrayError::Shape(format!(
            "onehot: {} features' categories for a block of {p} columns",
            categories.len()
        )));
    }
    if drop.iter().zip(categories).any(|(d, c)| d.is_some_and(|d| d >= c.len())) {
        return Err(ArrayError::Value("onehot: a dropped category past the feature's categories".into()));
    }
    // Each feature's first output column.
    let start: Vec<usize> = (0..p).map(|j| self::width(&categories[..j], &drop[..j])).collect();
    let width = self::width(categories, drop);
    crate::memory::check((n as u64).saturating_mul(width as u64).saturating_mul(8), || {
        format!("a one-hot block of {n} rows × {width} columns")
    })?;
    let mut out = vec![0.0; n * width];
    for (i, row) in x.rows().into_iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            match (find(&categories[j], v), drop[j]) {
                (Some(c), Some(d)) if c == d => {}
                (Some(c), d) => {
                    let col = if d.is_some_and(|d| c > d) { c - 1 } else { c };
                    out[i * width + start[j] + col] = 1.0;
                }
                (None, _) if ignore => {}
                (None, _) => {
                    return Err(ArrayError::Value(format!(
                        "OneHotEncoder: found unknown categories [{v}] in column {j} during transform"
                    )));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    #[test]
    fn rows_become_one_column_per_category() {
        let x = Array2::from_shape_vec((3, 2), vec![2.0, 0.5, 1.0, 0.5, 2.0, -0.0]).expect("x");
        let cats = vec![vec![1.0, 2.0], vec![0.0, 0.5]];
        let out = encode(x.view(), &cats, &[None, None], false).expect("encode");
        assert_eq!(out, [0., 1., 0., 1., 1., 0., 0., 1., 0., 1., 1., 0.]);
        let dropped = encode(x.view(), &cats, &[Some(0), None], false).expect("drop first");
        assert_eq!(dropped, [1., 0., 1., 0., 0., 1., 1., 1., 0.]);
        let unknown = Array2::from_shape_vec((1, 2), vec![3.0, 0.5]).expect("x");
        let e = encode(unknown.view(), &cats, &[None, None], false).expect_err("unknown");
        assert!(e.to_string().contains("unknown categories [3] in column 0"), "{e}");
        assert_eq!(encode(unknown.view(), &cats, &[None, None], true).expect("ignored"), [0., 0., 0., 1.]);
        assert!(encode(x.view(), &cats[..1], &[None], false).is_err(), "categories of other features");
    }

    #[test]
    fn distinct_values_pack_and_merge() {
        let cols = vec![vec![1.0, 3.0], vec![f64::NAN]];
        let back = unpack_distinct(&pack_distinct(&cols)).expect("unpack");
        assert_eq!(back[0], [1.0, 3.0]);
        assert!(back[1][0].is_nan());
        assert_eq!(union(&[1.0, 3.0], &[0.0, 3.0, 4.0]), [0.0, 1.0, 3.0, 4.0]);
        assert!(unpack_distinct(&[2.0, 1.0, 5.0]).is_err(), "a column missing");
        assert!(unpack_distinct(&[1.0, 9.0, 5.0]).is_err(), "a count past the end");
    }
}
