//! The statistics the estimators' fits read from X, one block at a time,
//! and how two blocks' statistics merge (Chan, Golub and LeVeque's pairwise
//! update): column moments for the scalers, and co-moments of `[X | y]`
//! (count, means, centred cross-products) for linear models and PCA. Each
//! travels as one packed f64 vector, so a fit's tree of merges moves only
//! p or p² numbers per task.
//!
//! Centring inside each block, then merging with the means' difference,
//! keeps the sums from cancelling (a column of mean 1e6 and unit variance
//! keeps its variance to 1e-12, where Σx² − n·μ² would lose it all).

use faer::linalg::matmul::triangular::{BlockStructure, matmul as tri_matmul};
use faer::{Accum, Mat, MatRef, Par};
use ndarray::{ArrayView2, Axis, Ix2};

use crate::array::chunk::Chunk;
use crate::array::error::ArrayError;

/// A block as an f64 matrix of rows (a 1-d block is one column), viewed
/// without a copy when it is f64 already.
pub fn with_rows<R>(c: &Chunk, f: impl FnOnce(ArrayView2<'_, f64>) -> R) -> Result<R, ArrayError> {
    fn as_2d(v: ndarray::ArrayViewD<'_, f64>) -> Result<ArrayView2<'_, f64>, ArrayError> {
        let shape = v.shape().to_vec();
        let v = if v.ndim() == 1 { v.insert_axis(Axis(1)) } else { v };
        v.into_dimensionality::<Ix2>()
            .map_err(|_| ArrayError::Shape(format!("expected a matrix block, got shape {shape:?}")))
    }
    match c {
        Chunk::F64(a) => Ok(f(as_2d(a.view())?)),
        other => {
            let owned = other.cast::<f64>();
            Ok(f(as_2d(owned.view())?))
        }
    }
}

/// Per column: values seen (NaN skipped, as scikit-learn's scalers skip
/// them), their mean, the sum of squared deviations, min and max.
#[derive(Clone, Debug, PartialEq)]
pub struct Moments {
    pub n: Vec<f64>,
    pub mean: Vec<f64>,
    pub m2: Vec<f64>,
    pub min: Vec<f64>,
    pub max: Vec<f64>,
}

impl Moments {
    pub fn of(x: ArrayView2<'_, f64>) -> Moments {
        let p = x.ncols();
        let mut m = Moments {
            n: vec![0.0; p],
            mean: vec![0.0; p],
            m2: vec![0.0; p],
            min: vec![f64::INFINITY; p],
            max: vec![f64::NEG_INFINITY; p],
        };
        // Two passes over the block: the mean, then deviations from it.
        // Branch-free, so the loops vectorize: NaN adds 0 and counts 0
        // (and `min`/`max` pass over it).
        let mut sum = vec![0.0; p];
        for row in x.rows() {
            let row = row.as_slice().map_or_else(|| row.to_vec().into(), std::borrow::Cow::Borrowed);
            for j in 0..p {
                let v = row[j];
                let ok = !v.is_nan();
                m.n[j] += f64::from(u8::from(ok));
                sum[j] += if ok { v } else { 0.0 };
                m.min[j] = m.min[j].min(v);
                m.max[j] = m.max[j].max(v);
            }
        }
        for ((mean, s), &n) in m.mean.iter_mut().zip(&sum).zip(&m.n) {
            *mean = if n > 0.0 { s / n } else { 0.0 };
        }
        for row in x.rows() {
            let row = row.as_slice().map_or_else(|| row.to_vec().into(), std::borrow::Cow::Borrowed);
            for j in 0..p {
                let d = row[j] - m.mean[j];
                m.m2[j] += if d.is_nan() { 0.0 } else { d * d };
            }
        }
        m
    }

    pub fn merge(&self, o: &Moments) -> Result<Moments, ArrayError> {
        if o.n.len() != self.n.len() {
            return Err(ArrayError::Shape(format!(
                "moments of {} and {} columns cannot merge",
                self.n.len(),
                o.n.len()
            )));
        }
        let p = self.n.len();
        let mut m = self.clone();
        for j in 0..p {
            let (na, nb) = (self.n[j], o.n[j]);
            let n = na + nb;
            if nb == 0.0 {
                continue;
            }
            let d = o.mean[j] - self.mean[j];
            m.n[j] = n;
            m.mean[j] = self.mean[j] + d * nb / n;
            m.m2[j] = self.m2[j] + o.m2[j] + d * d * na * nb / n;
            m.min[j] = self.min[j].min(o.min[j]);
            m.max[j] = self.max[j].max(o.max[j]);
        }
        Ok(m)
    }

    pub fn pack(&self) -> Vec<f64> {
        [&self.n, &self.mean, &self.m2, &self.min, &self.max].into_iter().flatten().copied().collect()
    }

    pub fn unpack(v: &[f64]) -> Result<Moments, ArrayError> {
        if !v.len().is_multiple_of(5) {
            return Err(ArrayError::Value(format!(
                "packed moments have {} values, not 5 per column",
                v.len()
            )));
        }
        let p = v.len() / 5;
        let part = |i: usize| v[i * p..(i + 1) * p].to_vec();
        Ok(Moments { n: part(0), mean: part(1), m2: part(2), min: part(3), max: part(4) })
    }
}

/// Count, column means and centred cross-products `Σ (z − μ)(z − μ)ᵀ` of
/// the rows `z` of a block (`[X | y]` for a linear model).
#[derive(Clone, Debug, PartialEq)]
pub struct CoMoments {
    pub n: f64,
    pub mean: Vec<f64>,
    /// q × q, row-major.
    pub c: Vec<f64>,
}

impl CoMoments {
    /// Of the rows of `x`, with the column `y` appended when given.
    pub fn of(x: ArrayView2<'_, f64>, y: Option<ArrayView2<'_, f64>>) -> Result<CoMoments, ArrayError> {
        let (rows, p) = x.dim();
        if let Some(y) = &y
            && (y.nrows() != rows || y.ncols() != 1)
        {
            return Err(ArrayError::Shape(format!(
                "a block of X has {rows} rows but its block of y has shape ({}, {})",
                y.nrows(),
                y.ncols()
            )));
        }
        let q = p + usize::from(y.is_some());
        // The rows of [X | y], centred, row-major: one streaming copy.
        let mut z = vec![0.0; rows * q];
        for (i, row) in x.rows().into_iter().enumerate() {
            let out = &mut z[i * q..i * q + p];
            match row.as_slice() {
                Some(r) => out.copy_from_slice(r),
                None => out.iter_mut().zip(row.iter()).for_each(|(o, v)| *o = *v),
            }
            if let Some(y) = &y {
                z[i * q + p] = y[[i, 0]];
            }
        }
        let mut mean = vec![0.0; q];
        for r in z.chunks_exact(q) {
            mean.iter_mut().zip(r).for_each(|(m, v)| *m += v);
        }
        if rows > 0 {
            mean.iter_mut().for_each(|m| *m /= rows as f64);
        }
        for r in z.chunks_exact_mut(q) {
            r.iter_mut().zip(&mean).for_each(|(v, m)| *v -= m);
        }
        // Zᵀ·Z, its lower triangle only (it is symmetric), then mirrored.
        let zm = MatRef::from_row_major_slice(&z, rows, q);
        let mut c = Mat::<f64>::zeros(q, q);
        tri_matmul(
            c.as_mut(),
            BlockStructure::TriangularLower,
            Accum::Replace,
            zm.transpose(),
            BlockStructure::Rectangular,
            zm,
            BlockStructure::Rectangular,
            1.0,
            Par::Seq,
        );
        for j in 0..q {
            for i in 0..j {
                c[(i, j)] = c[(j, i)];
            }
        }
        let c = (0..q * q).map(|k| c[(k / q, k % q)]).collect();
        Ok(CoMoments { n: rows as f64, mean, c })
    }

    pub fn merge(&self, o: &CoMoments) -> Result<CoMoments, ArrayError> {
        let q = self.mean.len();
        if o.mean.len() != q {
            return Err(ArrayError::Shape(format!(
                "co-moments of {q} and {} columns cannot merge",
                o.mean.len()
            )));
        }
        if o.n == 0.0 {
            return Ok(self.clone());
        }
        if self.n == 0.0 {
            return Ok(o.clone());
        }
        let n = self.n + o.n;
        let d: Vec<f64> = (0..q).map(|j| o.mean[j] - self.mean[j]).collect();
        let w = self.n * o.n / n;
        let mean = (0..q).map(|j| self.mean[j] + d[j] * o.n / n).collect();
        let c = (0..q * q).map(|k| self.c[k] + o.c[k] + w * d[k / q] * d[k % q]).collect();
        Ok(CoMoments { n, mean, c })
    }

    pub fn pack(&self) -> Vec<f64> {
        std::iter::once(self.n).chain(self.mean.iter().copied()).chain(self.c.iter().copied()).collect()
    }

    pub fn unpack(v: &[f64]) -> Result<CoMoments, ArrayError> {
        // 1 + q + q² values.
        let q = ((((4 * v.len()).saturating_sub(3)) as f64).sqrt() as usize).saturating_sub(1) / 2;
        if v.is_empty() || 1 + q + q * q != v.len() {
            return Err(ArrayError::Value(format!("packed co-moments cannot have {} values", v.len())));
        }
        Ok(CoMoments { n: v[0], mean: v[1..1 + q].to_vec(), c: v[1 + q..].to_vec() })
    }
}

/// A packed statistic as the 1-d block a task gives.
pub fn packed(v: Vec<f64>) -> Chunk {
    let n = v.len();
    Chunk::from_vec(&[n], v)
        .unwrap_or_else(|_| Chunk::from_array(ndarray::ArrayD::<f64>::zeros(ndarray::IxDyn(&[0]))))
}

/// The values of a packed statistic's block.
pub fn unpacked(c: &Chunk) -> Vec<f64> {
    c.cast::<f64>().iter().copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    fn data(n: usize, p: usize, shift: f64) -> Array2<f64> {
        // A fixed, uneven pattern with a large offset.
        Array2::from_shape_fn((n, p), |(i, j)| {
            shift + ((i * 7919 + j * 104_729) % 1000) as f64 / 997.0 - 0.5 * j as f64
        })
    }

    #[test]
    fn moments_merged_over_blocks_equal_the_whole() {
        let x = data(1000, 3, 1e6);
        let whole = Moments::of(x.view());
        let parts = [0..1, 1..300, 300..301, 301..1000];
        let merged = parts
            .iter()
            .map(|r| Moments::of(x.slice(ndarray::s![r.clone(), ..])))
            .reduce(|a, b| a.merge(&b).expect("merge"))
            .expect("parts");
        for j in 0..3 {
            assert_eq!(merged.n[j], 1000.0);
            assert!((merged.mean[j] - whole.mean[j]).abs() <= 1e-9, "{j}");
            // At an offset of 1e6 the means carry 1e-10 of rounding, which
            // the merge's mean differences see.
            assert!((merged.m2[j] / whole.m2[j] - 1.0).abs() < 1e-10, "{} vs {}", merged.m2[j], whole.m2[j]);
            assert_eq!((merged.min[j], merged.max[j]), (whole.min[j], whole.max[j]));
        }
        assert_eq!(Moments::unpack(&merged.pack()).expect("unpack"), merged);
    }

    #[test]
    fn nan_is_skipped_per_column() {
        let x = Array2::from_shape_vec((3, 2), vec![1.0, f64::NAN, 3.0, 4.0, f64::NAN, 8.0]).expect("shape");
        let m = Moments::of(x.view());
        assert_eq!(m.n, [2.0, 2.0]);
        assert_eq!(m.mean, [2.0, 6.0]);
        assert_eq!(m.m2, [2.0, 8.0]);
    }

    #[test]
    fn co_moments_merged_over_blocks_equal_the_whole() {
        let x = data(500, 4, 1e3);
        let y = Array2::from_shape_fn((500, 1), |(i, _)| (i as f64).sin() + 1e3);
        let whole = CoMoments::of(x.view(), Some(y.view())).expect("whole");
        let parts = [0..7, 7..250, 250..500];
        let merged = parts
            .iter()
            .map(|r| {
                CoMoments::of(x.slice(ndarray::s![r.clone(), ..]), Some(y.slice(ndarray::s![r.clone(), ..])))
                    .expect("part")
            })
            .reduce(|a, b| a.merge(&b).expect("merge"))
            .expect("parts");
        assert_eq!(merged.n, 500.0);
        for (a, b) in merged.c.iter().zip(&whole.c) {
            assert!((a - b).abs() <= 1e-10 * b.abs().max(1.0), "{a} vs {b}");
        }
        // The cross-products are centred: the diagonal is n times the variance.
        let var0: f64 = x.column(0).iter().map(|v| (v - whole.mean[0]).powi(2)).sum();
        assert!((whole.c[0] / var0 - 1.0).abs() < 1e-12);
        assert_eq!(CoMoments::unpack(&merged.pack()).expect("unpack"), merged);
        assert!(CoMoments::unpack(&[1.0, 2.0]).is_err());
    }
}
