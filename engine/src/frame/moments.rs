//! `corr` and `cov` from per-partition co-moments, as pandas computes
//! them: over the rows where both columns of a pair are present
//! (pairwise-complete), missing values and NaN skipped. Each partition
//! gives, per pair, the count, both means, both sums of squared
//! deviations and the sum of cross-deviations; partials merge by Chan et
//! al.'s rule, so the answer does not depend on how rows are cut.

use polars::prelude::*;

use crate::value::Value;

/// The running co-moments of two columns.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pair {
    pub n: f64,
    pub mx: f64,
    pub my: f64,
    pub m2x: f64,
    pub m2y: f64,
    pub cxy: f64,
}

impl Pair {
    fn add(&mut self, x: f64, y: f64) {
        self.n += 1.0;
        let dx = x - self.mx;
        self.mx += dx / self.n;
        let dy = y - self.my;
        self.my += dy / self.n;
        self.m2x += dx * (x - self.mx);
        self.m2y += dy * (y - self.my);
        self.cxy += dx * (y - self.my);
    }

    pub fn merge(&mut self, o: &Pair) {
        if o.n == 0.0 {
            return;
        }
        if self.n == 0.0 {
            *self = *o;
            return;
        }
        let n = self.n + o.n;
        let (dx, dy) = (o.mx - self.mx, o.my - self.my);
        let w = self.n * o.n / n;
        self.cxy += o.cxy + dx * dy * w;
        self.m2x += o.m2x + dx * dx * w;
        self.m2y += o.m2y + dy * dy * w;
        self.mx += dx * o.n / n;
        self.my += dy * o.n / n;
        self.n = n;
    }

    /// The covariance with `ddof` (NaN with too few rows).
    pub fn cov(&self, ddof: f64) -> f64 {
        if self.n - ddof <= 0.0 { f64::NAN } else { self.cxy / (self.n - ddof) }
    }

    /// Pearson's correlation (NaN with fewer than two rows or no spread).
    pub fn corr(&self) -> f64 {
        let d = (self.m2x * self.m2y).sqrt();
        if self.n < 2.0 || d == 0.0 { f64::NAN } else { (self.cxy / d).clamp(-1.0, 1.0) }
    }

    fn to_values(self, out: &mut Vec<Value>) {
        out.extend([self.n, self.mx, self.my, self.m2x, self.m2y, self.cxy].map(Value::Float));
    }
}

/// The pairs `(i, j)`, `i <= j`, of `k` columns, in the order partials
/// hold them.
pub fn pairs(k: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..k).flat_map(move |i| (i..k).map(move |j| (i, j)))
}

/// A partition's co-moments of `columns` (each cast to float).
pub fn partial(df: &DataFrame, columns: &[String]) -> PolarsResult<Value> {
    let mut cols: Vec<Vec<Option<f64>>> = Vec::with_capacity(columns.len());
    for c in columns {
        let s = df.column(c)?.as_materialized_series().cast(&DataType::Float64)?;
        cols.push(s.f64()?.iter().map(|v| v.filter(|x| !x.is_nan())).collect());
    }
    let mut out = Vec::new();
    for (i, j) in pairs(columns.len()) {
        let mut p = Pair::default();
        for (x, y) in cols[i].iter().zip(&cols[j]) {
            if let (Some(x), Some(y)) = (x, y) {
                p.add(*x, *y);
            }
        }
        p.to_values(&mut out);
    }
    Ok(Value::list(out))
}

fn read(v: &Value) -> Option<Vec<Pair>> {
    let Value::List(items) = v else { return None };
    let f = |v: &Value| if let Value::Float(x) = v { Some(*x) } else { None };
    items
        .chunks(6)
        .map(|c| match c {
            [n, mx, my, m2x, m2y, cxy] => {
                Some(Pair { n: f(n)?, mx: f(mx)?, my: f(my)?, m2x: f(m2x)?, m2y: f(m2y)?, cxy: f(cxy)? })
            }
            _ => None,
        })
        .collect()
}

/// Partials merged into one.
pub fn merge(partials: &[Value]) -> Option<Value> {
    let mut acc: Option<Vec<Pair>> = None;
    for p in partials {
        let got = read(p)?;
        acc = Some(match acc {
            None => got,
            Some(mut a) if a.len() == got.len() => {
                a.iter_mut().zip(&got).for_each(|(x, y)| x.merge(y));
                a
            }
            Some(_) => return None,
        });
    }
    let mut out = Vec::new();
    acc.unwrap_or_default().into_iter().for_each(|p| p.to_values(&mut out));
    Some(Value::list(out))
}

/// The `k × k` matrix (row-major) of correlations, or of covariances with
/// `ddof`, from merged partials.
pub fn matrix(merged: &Value, k: usize, corr: bool, ddof: f64) -> Option<Vec<f64>> {
    let ps = read(merged)?;
    let mut m = vec![f64::NAN; k * k];
    for ((i, j), p) in pairs(k).zip(ps) {
        let v = if corr {
            // A column with itself: 1 wherever it varies at all.
            if i == j && p.corr().is_nan() {
                f64::NAN
            } else if i == j {
                1.0
            } else {
                p.corr()
            }
        } else {
            p.cov(ddof)
        };
        m[i * k + j] = v;
        m[j * k + i] = v;
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_partials_merge_to_the_whole() {
        let x = [1.0, 2.0, 4.0, f64::NAN, 7.0, 3.5, -2.0];
        let y = [Some(2.0), None, Some(9.0), Some(1.0), Some(13.5), Some(7.0), Some(-3.0)];
        let df = df!("x" => x.to_vec(), "y" => y.to_vec()).expect("df");
        let cols = ["x".to_string(), "y".to_string()];
        let whole = partial(&df, &cols).expect("whole");
        let a = partial(&df.slice(0, 3), &cols).expect("a");
        let b = partial(&df.slice(3, 4), &cols).expect("b");
        let merged = merge(&[a, b]).expect("merge");
        let (m1, m2) = (matrix(&whole, 2, true, 1.0).expect("m"), matrix(&merged, 2, true, 1.0).expect("m"));
        for (p, q) in m1.iter().zip(&m2) {
            assert!((p - q).abs() < 1e-12, "{m1:?} {m2:?}");
        }
        // Pairwise complete rows: (1,2) (4,9) (7,13.5) (3.5,7) (-2,-3).
        let (xs, ys) = ([1.0, 4.0, 7.0, 3.5, -2.0], [2.0, 9.0, 13.5, 7.0, -3.0]);
        let (mx, my) = (xs.iter().sum::<f64>() / 5.0, ys.iter().sum::<f64>() / 5.0);
        let cov: f64 = xs.iter().zip(&ys).map(|(a, b)| (a - mx) * (b - my)).sum::<f64>() / 4.0;
        let c = matrix(&merged, 2, false, 1.0).expect("cov");
        assert!((c[1] - cov).abs() < 1e-12, "{c:?} {cov}");
        assert_eq!(m2[0], 1.0);
        assert!(merge(&[Value::Int(1)]).is_none());
    }
}
