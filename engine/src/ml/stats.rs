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

/// Rows a kernel takes at a time: a tile of 2,048 rows of a few dozen
/// features stays in a core's cache while it is centred and multiplied.
const TILE: usize = 2048;

/// Rows of a co-moments tile. Its product `zᵀz` is one matrix product with
/// an inner dimension this long; faer's is fastest when that fits one of
/// its cache blocks (measured for 100 features: 36.8 ms per 100,000 rows
/// with 256, 54 ms with 2,048, 37–38 ms from 128 to 384); the extra merges
/// (p² each) cost little beside it.
const CO_TILE: usize = 256;

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
    /// A tile of rows at a time (each read twice while it is in cache),
    /// the tiles merged: one read of the block from memory.
    pub fn of(x: ArrayView2<'_, f64>) -> Moments {
        let mut tiles = x.axis_chunks_iter(Axis(0), TILE).map(Moments::of_tile);
        let first = tiles.next().unwrap_or_else(|| Moments::of_tile(x));
        tiles.fold(first, |acc, t| acc.merge(&t).unwrap_or(acc))
    }

    /// One tile: plain sums first (NaN and ±inf show in them, at no
    /// cost per value), and only a tile whose sums are not all finite
    /// takes the NaN-skipping loops.
    fn of_tile(x: ArrayView2<'_, f64>) -> Moments {
        let (rows, p) = x.dim();
        let mut sum = vec![0.0; p];
        let mut min = vec![f64::INFINITY; p];
        let mut max = vec![f64::NEG_INFINITY; p];
        for row in x.rows() {
            let row = row.as_slice().map_or_else(|| row.to_vec().into(), std::borrow::Cow::Borrowed);
            for (&v, s) in row.iter().zip(sum.iter_mut()) {
                *s += v;
            }
            for ((&v, lo), hi) in row.iter().zip(min.iter_mut()).zip(max.iter_mut()) {
                *lo = lo.min(v);
                *hi = hi.max(v);
            }
        }
        if rows == 0 || sum.iter().any(|s| !s.is_finite()) {
            return Moments::of_tile_skipping_nan(x);
        }
        let mean: Vec<f64> = sum.iter().map(|s| s / rows as f64).collect();
        let mut m2 = vec![0.0; p];
        for row in x.rows() {
            let row = row.as_slice().map_or_else(|| row.to_vec().into(), std::borrow::Cow::Borrowed);
            for ((&v, mean), m2) in row.iter().zip(&mean).zip(m2.iter_mut()) {
                let d = v - mean;
                *m2 += d * d;
            }
        }
        Moments { n: vec![rows as f64; p], mean, m2, min, max }
    }

    fn of_tile_skipping_nan(x: ArrayView2<'_, f64>) -> Moments {
        let p = x.ncols();
        let mut m = Moments {
            n: vec![0.0; p],
            mean: vec![0.0; p],
            m2: vec![0.0; p],
            min: vec![f64::INFINITY; p],
            max: vec![f64::NEG_INFINITY; p],
        };
        // Two passes over the tile: the mean, then deviations from it.
        // NaN adds 0 and counts 0 (and `min`/`max` pass over it). Only a
        // tile with NaN or ±inf comes here, so these loops need not be fast.
        let mut sum = vec![0.0; p];
        for row in x.rows() {
            let row = row.as_slice().map_or_else(|| row.to_vec().into(), std::borrow::Cow::Borrowed);
            let each = row.iter().zip(m.n.iter_mut()).zip(sum.iter_mut());
            for ((&v, n), s) in each {
                let ok = !v.is_nan();
                *n += f64::from(u8::from(ok));
                *s += if ok { v } else { 0.0 };
            }
            for ((&v, lo), hi) in row.iter().zip(m.min.iter_mut()).zip(m.max.iter_mut()) {
                *lo = lo.min(v);
                *hi = hi.max(v);
            }
        }
        for ((mean, s), &n) in m.mean.iter_mut().zip(&sum).zip(&m.n) {
            *mean = if n > 0.0 { s / n } else { 0.0 };
        }
        for row in x.rows() {
            let row = row.as_slice().map_or_else(|| row.to_vec().into(), std::borrow::Cow::Borrowed);
            for ((&v, mean), m2) in row.iter().zip(&m.mean).zip(m.m2.iter_mut()) {
                let d = v - mean;
                *m2 += if d.is_nan() { 0.0 } else { d * d };
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
        // A tile of rows of [X | y] at a time, centred on the tile's own
        // means into a buffer that stays in cache, its products added to
        // the lower triangle, then merged (Chan) into the block's: one read
        // of the block and no block-sized copy.
        let mut acc = CoMoments { n: 0.0, mean: vec![0.0; q], c: vec![0.0; q * q] };
        let mut lower = Mat::<f64>::zeros(q, q);
        let mut z = vec![0.0; CO_TILE.min(rows) * q];
        let mut start = 0;
        while start < rows {
            let t = CO_TILE.min(rows - start);
            let z = &mut z[..t * q];
            for i in 0..t {
                let row = x.row(start + i);
                let out = &mut z[i * q..i * q + p];
                match row.as_slice() {
                    Some(r) => out.copy_from_slice(r),
                    None => out.iter_mut().zip(row.iter()).for_each(|(o, v)| *o = *v),
                }
                if let Some(y) = &y {
                    z[i * q + p] = y[[start + i, 0]];
                }
            }
            let mut mean = vec![0.0; q];
            for r in z.chunks_exact(q) {
                mean.iter_mut().zip(r).for_each(|(m, v)| *m += v);
            }
            mean.iter_mut().for_each(|m| *m /= t as f64);
            for r in z.chunks_exact_mut(q) {
                r.iter_mut().zip(&mean).for_each(|(v, m)| *v -= m);
            }
            let zm = MatRef::from_row_major_slice(z, t, q);
            tri_matmul(
                lower.as_mut(),
                BlockStructure::TriangularLower,
                Accum::Add,
                zm.transpose(),
                BlockStructure::Rectangular,
                zm,
                BlockStructure::Rectangular,
                1.0,
                Par::Seq,
            );
            // The tile's mean against the running one (Chan's update);
            // the tile's own products are already in `lower`.
            let n = acc.n + t as f64;
            let w = acc.n * t as f64 / n;
            let d: Vec<f64> = (0..q).map(|j| mean[j] - acc.mean[j]).collect();
            for j in 0..q {
                for i in j..q {
                    lower[(i, j)] += w * d[i] * d[j];
                }
                acc.mean[j] += d[j] * t as f64 / n;
            }
            acc.n = n;
            start += t;
        }
        for i in 0..q {
            for j in 0..q {
                acc.c[i * q + j] = if i >= j { lower[(i, j)] } else { lower[(j, i)] };
            }
        }
        Ok(acc)
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

/// Count, column means and an upper-triangular R (p × p, row-major) with
/// RᵀR = Σ (x − μ)(x − μ)ᵀ: TSQR's statistic, so PCA's exact SVD reads X
/// once and keeps no Q. Rows fold in a tile at a time, each a Householder
/// QR of `[R; tile − tile mean; √w·(tile mean − mean)]`, whose last row
/// carries the means' difference as Chan's update does for co-moments.
#[derive(Clone, Debug, PartialEq)]
pub struct QrMoments {
    pub n: f64,
    pub mean: Vec<f64>,
    pub r: Vec<f64>,
}

impl QrMoments {
    fn empty(p: usize) -> QrMoments {
        QrMoments { n: 0.0, mean: vec![0.0; p], r: vec![0.0; p * p] }
    }

    /// A statistic of rows with NaN or ±inf: all NaN, which every merge
    /// keeps and the fit refuses.
    fn poisoned(p: usize) -> QrMoments {
        QrMoments { n: f64::NAN, mean: vec![f64::NAN; p], r: vec![f64::NAN; p * p] }
    }

    fn is_finite(&self) -> bool {
        self.n.is_finite() && self.mean.iter().chain(&self.r).all(|v| v.is_finite())
    }

    pub fn of(x: ArrayView2<'_, f64>) -> QrMoments {
        let p = x.ncols();
        let mut acc = QrMoments::empty(p);
        for tile in x.axis_chunks_iter(Axis(0), TILE.max(4 * p)) {
            let t = tile.nrows();
            let mut mean = vec![0.0; p];
            for row in tile.rows() {
                mean.iter_mut().zip(row.iter()).for_each(|(m, v)| *m += v);
            }
            mean.iter_mut().for_each(|m| *m /= t as f64);
            // NaN or ±inf anywhere in the tile shows in its mean: poison
            // the statistic (the fit refuses it) without factoring.
            if mean.iter().any(|m| !m.is_finite()) {
                return QrMoments::poisoned(p);
            }
            acc = acc.absorb(t as f64, &mean, t, |mut m, at| {
                for (i, row) in tile.rows().into_iter().enumerate() {
                    for (j, v) in row.iter().enumerate() {
                        m[(at + i, j)] = v - mean[j];
                    }
                }
            });
        }
        acc
    }

    pub fn merge(&self, o: &QrMoments) -> Result<QrMoments, ArrayError> {
        let p = self.mean.len();
        if o.mean.len() != p || o.r.len() != p * p {
            return Err(ArrayError::Shape(format!(
                "R factors of {p} and {} columns cannot merge",
                o.mean.len()
            )));
        }
        // A statistic from a peer is not trusted to be finite or counted
        // right: such a one poisons the result rather than reach the QR.
        if !o.is_finite() || o.n < 0.0 {
            return Ok(QrMoments::poisoned(p));
        }
        Ok(self.absorb(o.n, &o.mean, p, |m, at| put_upper(m, at, &o.r, p)))
    }

    /// The R of X's own rows, uncentred: XᵀX = RᵀR + n·μμᵀ is the
    /// products of `[R; √n·μ]`, whose R this is (TruncatedSVD's).
    pub fn uncentred_r(&self) -> Vec<f64> {
        let p = self.mean.len();
        let mut m = Mat::<f64>::zeros(p + 1, p);
        put_upper(m.as_mut(), 0, &self.r, p);
        for j in 0..p {
            m[(p, j)] = self.n.max(0.0).sqrt() * self.mean[j];
        }
        upper_r(m, p)
    }

    /// Fold in `rows` centred rows (written by `fill` from row `at` of the
    /// stacked matrix) of `n` samples with column means `mean`.
    fn absorb(
        &self,
        n: f64,
        mean: &[f64],
        rows: usize,
        fill: impl FnOnce(faer::MatMut<'_, f64>, usize),
    ) -> QrMoments {
        let p = self.mean.len();
        if n.is_nan() || self.n < 0.0 || !self.is_finite() {
            return QrMoments::poisoned(p);
        }
        if n == 0.0 {
            return self.clone();
        }
        let total = self.n + n;
        let w = (self.n * n / total).sqrt();
        let mut m = Mat::<f64>::zeros(p + rows + 1, p);
        put_upper(m.as_mut(), 0, &self.r, p);
        fill(m.as_mut(), p);
        for j in 0..p {
            m[(p + rows, j)] = w * (mean[j] - self.mean[j]);
        }
        let out = upper_r(m, p);
        let mean = (0..p).map(|j| self.mean[j] + (mean[j] - self.mean[j]) * n / total).collect();
        QrMoments { n: total, mean, r: out }
    }

    pub fn pack(&self) -> Vec<f64> {
        std::iter::once(self.n).chain(self.mean.iter().copied()).chain(self.r.iter().copied()).collect()
    }

    /// The same layout as `CoMoments`: 1 + p + p² values.
    pub fn unpack(v: &[f64]) -> Result<QrMoments, ArrayError> {
        let c = CoMoments::unpack(v)
            .map_err(|_| ArrayError::Value(format!("a packed R factor cannot have {} values", v.len())))?;
        Ok(QrMoments { n: c.n, mean: c.mean, r: c.c })
    }
}

/// The upper triangle of the p × p row-major `r` into rows `at..at + p`.
fn put_upper(mut m: faer::MatMut<'_, f64>, at: usize, r: &[f64], p: usize) {
    for i in 0..p {
        for j in i..p {
            m[(at + i, j)] = r[i * p + j];
        }
    }
}

/// The p × p R (row-major) of a Householder QR of `m` (at least p rows).
fn upper_r(m: Mat<f64>, p: usize) -> Vec<f64> {
    let qr = m.qr();
    let r = qr.thin_R();
    let mut out = vec![0.0; p * p];
    for i in 0..p.min(r.nrows()) {
        for j in i..p {
            out[i * p + j] = r[(i, j)];
        }
    }
    out
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
    fn tiles_of_a_tall_block_give_the_direct_statistics() {
        // Past one tile (2,048 rows), with an offset the sums would lose.
        let x = data(5000, 3, 1e6);
        let direct: Vec<f64> = (0..3).map(|j| x.column(j).sum() / 5000.0).collect();
        let m = Moments::of(x.view());
        let cm = CoMoments::of(x.view(), None).expect("co-moments");
        for j in 0..3 {
            let dev: Vec<f64> = x.column(j).iter().map(|v| v - direct[j]).collect();
            let m2: f64 = dev.iter().map(|d| d * d).sum();
            assert!((m.mean[j] - direct[j]).abs() < 1e-9 && (cm.mean[j] - direct[j]).abs() < 1e-9);
            assert!((m.m2[j] / m2 - 1.0).abs() < 1e-10, "{} vs {m2}", m.m2[j]);
            for (k, mean_k) in direct.iter().enumerate() {
                let c: f64 = dev.iter().zip(x.column(k)).map(|(d, v)| d * (v - mean_k)).sum();
                assert!((cm.c[j * 3 + k] - c).abs() <= 1e-9 * c.abs().max(1.0), "{j},{k}");
                assert_eq!(cm.c[j * 3 + k], cm.c[k * 3 + j], "symmetric");
            }
        }
    }

    #[test]
    fn r_factors_merged_over_blocks_give_the_centred_cross_products() {
        let x = data(5000, 4, 1e4);
        let cm = CoMoments::of(x.view(), None).expect("co-moments");
        let rtr = |q: &QrMoments| -> Vec<f64> {
            (0..16).map(|k| (0..4).map(|i| q.r[i * 4 + k / 4] * q.r[i * 4 + k % 4]).sum()).collect()
        };
        let whole = QrMoments::of(x.view());
        // Blocks shorter than X is wide, and one empty, merge like any.
        let parts = [0..2, 2..2, 2..3000, 3000..5000];
        let merged = parts
            .iter()
            .map(|r| QrMoments::of(x.slice(ndarray::s![r.clone(), ..])))
            .reduce(|a, b| a.merge(&b).expect("merge"))
            .expect("parts");
        for q in [&whole, &merged] {
            assert_eq!(q.n, 5000.0);
            for (a, b) in rtr(q).iter().zip(&cm.c) {
                assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{a} vs {b}");
            }
            for (a, b) in q.mean.iter().zip(&cm.mean) {
                assert!((a - b).abs() <= 1e-9 * b.abs(), "{a} vs {b}");
            }
            assert!((1..4).all(|i| (0..i).all(|j| q.r[i * 4 + j] == 0.0)), "upper triangular");
        }
        assert_eq!(QrMoments::unpack(&merged.pack()).expect("unpack"), merged);
        let mut bad = x.clone();
        bad[[4000, 2]] = f64::NAN;
        let poisoned = QrMoments::of(bad.view()).merge(&whole).expect("merge");
        assert!(poisoned.pack().iter().all(|v| v.is_nan()));
        assert!(whole.merge(&QrMoments::of(data(10, 2, 0.0).view())).is_err());
        assert!(QrMoments::unpack(&[1.0, 2.0]).is_err());
        // A peer's statistic that is not finite, or counts fewer than no
        // rows, poisons the merge instead of reaching the QR.
        let mut bad = whole.clone();
        bad.r[5] = f64::INFINITY;
        assert!(whole.merge(&bad).expect("merge").pack().iter().all(|v| v.is_nan()));
        let mut negative = whole.clone();
        negative.n = -1.0;
        assert!(whole.merge(&negative).expect("merge").pack().iter().all(|v| v.is_nan()));
        assert!(negative.merge(&whole).expect("merge").pack().iter().all(|v| v.is_nan()));
        // Uncentred: the products of X itself.
        let u = QrMoments { r: whole.uncentred_r(), ..whole.clone() };
        for (k, got) in rtr(&u).iter().enumerate() {
            let want: f64 = x.column(k / 4).iter().zip(x.column(k % 4)).map(|(a, b)| a * b).sum();
            assert!((got - want).abs() <= 1e-9 * want.abs(), "{got} vs {want}");
        }
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
