//! Block kernels of the fits that are not moments: the rows a split keeps,
//! nearest centres (k-means), and the statistics Lloyd's iteration and the
//! k-means‖ initialisation gather from a block. Pure functions on a block
//! and small driver state, tested here.

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par};
use ndarray::ArrayView2;
use rand::{RngExt, SeedableRng};

use crate::array::error::ArrayError;

/// The rows of a block of `rows` rows that go to the test part (`test`)
/// or the train part: a permutation's first `n_test` entries, then the
/// rest, as scikit-learn's `ShuffleSplit` draws them, each part kept in the
/// block's order (taking rows in order reads the block straight through,
/// several times faster than in the permutation's). Without shuffling,
/// the block's last `n_test` rows are the test part.
pub fn chosen_rows(
    rows: usize,
    n_test: usize,
    seed: u64,
    block: u64,
    shuffle: bool,
    test: bool,
) -> Vec<usize> {
    use rand::seq::SliceRandom;
    let mut order: Vec<usize> = (0..rows).collect();
    let n_test = n_test.min(rows);
    if !shuffle {
        let cut = rows - n_test;
        return if test { order.split_off(cut) } else { order[..cut].to_vec() };
    }
    order.shuffle(&mut rng(seed, block, 0));
    let mut part = if test { order[..n_test].to_vec() } else { order[n_test..].to_vec() };
    part.sort_unstable();
    part
}

/// A block's values in row-major order: borrowed when it is laid out so
/// (a block read from `.npy` or made here is), copied otherwise.
fn row_major<'a>(x: &'a ArrayView2<'_, f64>) -> std::borrow::Cow<'a, [f64]> {
    match x.as_slice() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(x.iter().copied().collect()),
    }
}

/// A generator for one block of one step, from the user's seed.
pub fn rng(seed: u64, block: u64, step: u64) -> rand_pcg::Pcg64Mcg {
    let mix = seed
        ^ block.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ step.wrapping_add(1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    rand_pcg::Pcg64Mcg::seed_from_u64(mix)
}

/// For each row of `x`, its nearest of the `centers` (k × p, row-major)
/// and the squared distance to it, given to `each` as (row number, row,
/// centre, distance) while the row is in cache. Rows go in tiles: the
/// argmin uses the GEMM form ‖c‖² − 2·x·c on a tile's C·Xᵀ (a small buffer
/// used again, so no block-sized allocation per step); the distance given
/// is Σ(x − c)², exact and ≥ 0 (the GEMM form cancels).
pub fn each_nearest(
    x: ArrayView2<'_, f64>,
    centers: &[f64],
    k: usize,
    mut each: impl FnMut(usize, &[f64], usize, f64),
) {
    const TILE: usize = 2048;
    let (n, p) = x.dim();
    if n == 0 || k == 0 {
        return;
    }
    let xs = row_major(&x);
    let cm = MatRef::from_row_major_slice(&centers[..k * p], k, p);
    let norms: Vec<f64> = (0..k).map(|j| centers[j * p..(j + 1) * p].iter().map(|v| v * v).sum()).collect();
    // C·Xᵀ of a tile, k × TILE column-major: each row's k products lie together.
    let mut g = Mat::<f64>::zeros(k, TILE.min(n));
    for start in (0..n).step_by(TILE) {
        let t = TILE.min(n - start);
        let xm = MatRef::from_row_major_slice(&xs[start * p..(start + t) * p], t, p);
        matmul(g.as_mut().subcols_mut(0, t), Accum::Replace, cm, xm.transpose(), 1.0, Par::Seq);
        for i in 0..t {
            let gi = g.col(i);
            let mut best = 0;
            let mut score = f64::INFINITY;
            for (j, nj) in norms.iter().enumerate() {
                let s = nj - 2.0 * gi[j];
                if s < score {
                    score = s;
                    best = j;
                }
            }
            let row = &xs[(start + i) * p..(start + i + 1) * p];
            let c = &centers[best * p..(best + 1) * p];
            let d2 = row.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum();
            each(start + i, row, best, d2);
        }
    }
}

/// Each row's nearest centre and its squared distance ([`each_nearest`]).
pub fn nearest(x: ArrayView2<'_, f64>, centers: &[f64], k: usize) -> (Vec<u32>, Vec<f64>) {
    let n = x.nrows();
    if k == 0 {
        return (vec![0; n], vec![f64::INFINITY; n]);
    }
    let mut labels = Vec::with_capacity(n);
    let mut d2 = Vec::with_capacity(n);
    each_nearest(x, centers, k, |_, _, c, d| {
        labels.push(c as u32);
        d2.push(d);
    });
    (labels, d2)
}

/// What one Lloyd step gathers from a block: per-cluster sums and counts,
/// the inertia Σ‖x − c‖², and the `far` rows farthest from their centres
/// (for reseeding an empty cluster, as scikit-learn does).
#[derive(Clone, Debug, PartialEq)]
pub struct LloydStat {
    pub k: usize,
    pub p: usize,
    pub sums: Vec<f64>,
    pub counts: Vec<f64>,
    pub inertia: f64,
    /// (squared distance, label, row), farthest first, at most `k`.
    pub far: Vec<(f64, u32, Vec<f64>)>,
}

impl LloydStat {
    pub fn of(x: ArrayView2<'_, f64>, centers: &[f64], k: usize) -> LloydStat {
        let (n, p) = x.dim();
        let mut s =
            LloydStat { k, p, sums: vec![0.0; k * p], counts: vec![0.0; k], inertia: 0.0, far: Vec::new() };
        let mut labels = Vec::with_capacity(n);
        let mut d2 = Vec::with_capacity(n);
        each_nearest(x, centers, k, |_, row, j, d| {
            s.counts[j] += 1.0;
            s.inertia += d;
            s.sums[j * p..(j + 1) * p].iter_mut().zip(row).for_each(|(acc, v)| *acc += v);
            labels.push(j as u32);
            d2.push(d);
        });
        // The k farthest rows: selected in linear time, then sorted.
        let mut order: Vec<usize> = (0..d2.len()).collect();
        let farthest = |a: &usize, b: &usize| d2[*b].total_cmp(&d2[*a]).then(a.cmp(b));
        if order.len() > k && k > 0 {
            order.select_nth_unstable_by(k - 1, farthest);
            order.truncate(k);
        }
        order.sort_by(farthest);
        s.far = order.into_iter().take(k).map(|i| (d2[i], labels[i], x.row(i).to_vec())).collect();
        s
    }

    pub fn merge(&self, o: &LloydStat) -> Result<LloydStat, ArrayError> {
        if (o.k, o.p) != (self.k, self.p) {
            return Err(ArrayError::Shape(format!(
                "k-means statistics of {} × {} and {} × {} cannot merge",
                self.k, self.p, o.k, o.p
            )));
        }
        let mut m = self.clone();
        m.sums.iter_mut().zip(&o.sums).for_each(|(a, b)| *a += b);
        m.counts.iter_mut().zip(&o.counts).for_each(|(a, b)| *a += b);
        m.inertia += o.inertia;
        m.far.extend(o.far.iter().cloned());
        m.far.sort_by(|a, b| b.0.total_cmp(&a.0));
        m.far.truncate(self.k);
        Ok(m)
    }

    /// `[k, p, n_far, sums, counts, inertia, (d2, label, row)...]`.
    pub fn pack(&self) -> Vec<f64> {
        let mut v = vec![self.k as f64, self.p as f64, self.far.len() as f64];
        v.extend(&self.sums);
        v.extend(&self.counts);
        v.push(self.inertia);
        for (d, l, row) in &self.far {
            v.push(*d);
            v.push(f64::from(*l));
            v.extend(row);
        }
        v
    }

    pub fn unpack(v: &[f64]) -> Result<LloydStat, ArrayError> {
        Self::read(v)
            .ok_or_else(|| ArrayError::Value(format!("a malformed k-means statistic of {} values", v.len())))
    }

    fn read(v: &[f64]) -> Option<LloydStat> {
        let (k, p, nf) = (*v.first()? as usize, *v.get(1)? as usize, *v.get(2)? as usize);
        let mut at = 3;
        let mut take = |n: usize| -> Option<Vec<f64>> {
            let s = v.get(at..at + n)?.to_vec();
            at += n;
            Some(s)
        };
        let sums = take(k * p)?;
        let counts = take(k)?;
        let inertia = take(1)?[0];
        let mut far = Vec::with_capacity(nf);
        for _ in 0..nf {
            let h = take(2)?;
            far.push((h[0], h[1] as u32, take(p)?));
        }
        Some(LloydStat { k, p, sums, counts, inertia, far })
    }
}

/// One k-means‖ round on a block: the distance of each row to its nearest
/// candidate so far and that candidate's number (`state`, n × 2, from the
/// previous round; none in the first) are brought up to date with the
/// candidates `new` (numbered from `first`); then, where `sample` gives
/// (ℓ, φ), each row is drawn with probability min(1, ℓ·d²/φ).
pub struct InitRound<'a> {
    pub new: &'a [f64],
    pub first: usize,
    pub sample: Option<(f64, f64)>,
    pub seed: u64,
    pub round: u64,
    pub block: u64,
}

/// The result of [`InitRound::run`]: the new state, the block's cost
/// Σ d², and the rows drawn.
pub struct InitOut {
    pub state: Vec<f64>,
    pub cost: f64,
    pub drawn: Vec<f64>,
}

impl InitRound<'_> {
    pub fn run(&self, x: ArrayView2<'_, f64>, state: Option<ArrayView2<'_, f64>>) -> InitOut {
        let (n, p) = x.dim();
        let k = self.new.len().checked_div(p).unwrap_or(0);
        let mut out = Vec::with_capacity(2 * n);
        let (near, d2) = nearest(x, self.new, k);
        for i in 0..n {
            let (mut d, mut c) = match &state {
                Some(s) => (s[[i, 0]], s[[i, 1]]),
                None => (f64::INFINITY, -1.0),
            };
            if k > 0 && d2[i] < d {
                d = d2[i];
                c = (self.first + near[i] as usize) as f64;
            }
            out.push(d);
            out.push(c);
        }
        let cost = out.iter().step_by(2).sum();
        let mut drawn = Vec::new();
        if let Some((l, phi)) = self.sample {
            let mut r = rng(self.seed, self.block, self.round);
            for i in 0..n {
                let u: f64 = r.random();
                if phi > 0.0 && u < l * out[2 * i] / phi {
                    drawn.extend(x.row(i).iter());
                }
            }
        }
        InitOut { state: out, cost, drawn }
    }
}

/// A linear model's scores `X·Wᵀ + b` for a block: `coef` is `m` rows of
/// `p` weights then the intercept (m × (p + 1), row-major). n × m.
pub fn scores(x: ArrayView2<'_, f64>, coef: &[f64], m: usize) -> Mat<f64> {
    let (n, p) = x.dim();
    let xs = row_major(&x);
    let xm = MatRef::from_row_major_slice(&xs, n, p);
    let w = Mat::from_fn(p, m, |j, c| coef[c * (p + 1) + j]);
    let mut z = Mat::<f64>::zeros(n, m);
    matmul(z.as_mut(), Accum::Replace, xm, w.as_ref(), 1.0, Par::Seq);
    for c in 0..m {
        let b = coef[c * (p + 1) + p];
        for i in 0..n {
            z[(i, c)] += b;
        }
    }
    z
}

/// log(1 + eᶻ) without overflow.
fn softplus(z: f64) -> f64 {
    if z > 0.0 { z + (-z).exp().ln_1p() } else { z.exp().ln_1p() }
}

/// The logistic loss of a block and its gradient, as scikit-learn's
/// `HalfBinomialLoss` (m = 1, y is 1 for the second class) or
/// `HalfMultinomialLoss` (m classes): `[Σ loss, ∂/∂coef (m × (p + 1))]`.
/// `y` holds class numbers (0..m, or 0/1 for two classes). The block is
/// taken in tiles of rows that stay in cache for both products (the scores
/// X·Wᵀ, then the gradient Rᵀ·X), so X is read from memory once.
pub fn logistic_loss(x: ArrayView2<'_, f64>, y: &[usize], coef: &[f64], m: usize) -> Vec<f64> {
    const TILE: usize = 1024;
    let (n, p) = x.dim();
    let xs = row_major(&x);
    let w = Mat::from_fn(p, m, |j, c| coef[c * (p + 1) + j]);
    let mut loss = 0.0;
    let mut g = Mat::<f64>::zeros(m, p);
    let mut gb = vec![0.0; m];
    let mut z = Mat::<f64>::zeros(TILE, m);
    let mut r = Mat::<f64>::zeros(TILE, m);
    for start in (0..n).step_by(TILE) {
        let t = TILE.min(n - start);
        let xm = MatRef::from_row_major_slice(&xs[start * p..(start + t) * p], t, p);
        matmul(z.as_mut().subrows_mut(0, t), Accum::Replace, xm, w.as_ref(), 1.0, Par::Seq);
        for i in 0..t {
            let yi = y[start + i];
            if m == 1 {
                let zi = z[(i, 0)] + coef[p];
                let yv = if yi == 1 { 1.0 } else { 0.0 };
                loss += softplus(zi) - yv * zi;
                let s = if zi >= 0.0 { 1.0 / (1.0 + (-zi).exp()) } else { zi.exp() / (1.0 + zi.exp()) };
                r[(i, 0)] = s - yv;
            } else {
                let zc = |c: usize| z[(i, c)] + coef[c * (p + 1) + p];
                let top = (0..m).map(zc).fold(f64::NEG_INFINITY, f64::max);
                let lse = top + (0..m).map(|c| (zc(c) - top).exp()).sum::<f64>().ln();
                loss += lse - zc(yi.min(m - 1));
                for c in 0..m {
                    r[(i, c)] = (zc(c) - lse).exp() - if yi == c { 1.0 } else { 0.0 };
                }
            }
        }
        // The weights' gradient Rᵀ·X, the intercepts' the sums of R.
        matmul(g.as_mut(), Accum::Add, r.as_ref().subrows(0, t).transpose(), xm, 1.0, Par::Seq);
        for (c, b) in gb.iter_mut().enumerate() {
            *b += (0..t).map(|i| r[(i, c)]).sum::<f64>();
        }
    }
    let mut out = Vec::with_capacity(1 + m * (p + 1));
    out.push(loss);
    for c in 0..m {
        out.extend((0..p).map(|j| g[(c, j)]));
        out.push(gb[c]);
    }
    out
}

/// The half Poisson deviance of a block, up to terms without the model
/// (Σ exp(r) − y·r, r = x·w + b, scikit-learn's `HalfPoissonLoss`), and its
/// gradient: `[Σ loss, Σ (exp(r) − y)·x (p), Σ (exp(r) − y)]`. `coef` is
/// the p weights then the intercept.
pub fn poisson_loss(x: ArrayView2<'_, f64>, y: &[f64], coef: &[f64]) -> Vec<f64> {
    let (n, p) = x.dim();
    let z = scores(x, coef, 1);
    let mut out = vec![0.0; p + 2];
    for (i, row) in x.rows().into_iter().enumerate().take(n) {
        let r = z[(i, 0)];
        let mu = r.exp();
        out[0] += mu - y[i] * r;
        let d = mu - y[i];
        out[1..=p].iter_mut().zip(row.iter()).for_each(|(g, v)| *g += d * v);
        out[p + 1] += d;
    }
    out
}

/// Class probabilities of a block (n × classes): the logistic function for
/// two classes (`[1 − p, p]`), softmax for more.
pub fn probabilities(x: ArrayView2<'_, f64>, coef: &[f64], m: usize) -> Vec<f64> {
    let z = scores(x, coef, m);
    let n = x.nrows();
    let mut out = Vec::with_capacity(n * m.max(2));
    for i in 0..n {
        if m == 1 {
            let zi = z[(i, 0)];
            let s = if zi >= 0.0 { 1.0 / (1.0 + (-zi).exp()) } else { zi.exp() / (1.0 + zi.exp()) };
            out.push(1.0 - s);
            out.push(s);
        } else {
            let top = (0..m).map(|c| z[(i, c)]).fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = (0..m).map(|c| (z[(i, c)] - top).exp()).collect();
            let sum: f64 = e.iter().sum();
            out.extend(e.iter().map(|v| v / sum));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    #[test]
    fn chosen_rows_partition_the_block() {
        let test = chosen_rows(10, 3, 7, 2, true, true);
        let train = chosen_rows(10, 3, 7, 2, true, false);
        let mut all: Vec<usize> = test.iter().chain(&train).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(test, chosen_rows(10, 3, 7, 2, true, true), "a seed gives the same rows");
        assert_ne!(test, chosen_rows(10, 3, 8, 2, true, true));
        assert_eq!(chosen_rows(5, 2, 0, 0, false, true), [3, 4]);
    }

    #[test]
    fn lloyd_statistics_sum_clusters_and_keep_the_farthest() {
        let x = Array2::from_shape_vec((4, 2), vec![0.0, 0.0, 1.0, 0.0, 10.0, 10.0, 12.0, 10.0]).expect("x");
        let centers = [0.0, 0.0, 10.0, 10.0];
        let s = LloydStat::of(x.view(), &centers, 2);
        assert_eq!(s.counts, [2.0, 2.0]);
        assert_eq!(s.sums, [1.0, 0.0, 22.0, 20.0]);
        assert_eq!(s.inertia, 5.0);
        assert_eq!(s.far[0], (4.0, 1, vec![12.0, 10.0]));
        let both = s.merge(&s).expect("merge");
        assert_eq!((both.counts[0], both.inertia, both.far.len()), (4.0, 10.0, 2));
        assert_eq!(LloydStat::unpack(&both.pack()).expect("unpack"), both);
        assert!(LloydStat::unpack(&[2.0, 2.0, 1.0]).is_err(), "a short vector is refused");
    }

    #[test]
    fn init_rounds_track_the_nearest_candidate_and_draw_far_rows() {
        let x = Array2::from_shape_vec((3, 1), vec![0.0, 1.0, 100.0]).expect("x");
        let first = InitRound { new: &[0.0], first: 0, sample: None, seed: 1, round: 0, block: 0 }
            .run(x.view(), None);
        assert_eq!(first.state, [0.0, 0.0, 1.0, 0.0, 10000.0, 0.0]);
        assert_eq!(first.cost, 10001.0);
        let state = Array2::from_shape_vec((3, 2), first.state).expect("state");
        // Drawing with φ = cost and ℓ large takes the far row surely.
        let next =
            InitRound { new: &[100.0], first: 1, sample: Some((1e9, 10001.0)), seed: 1, round: 1, block: 0 }
                .run(x.view(), Some(state.view()));
        assert_eq!(next.state, [0.0, 0.0, 1.0, 0.0, 0.0, 1.0]);
        assert_eq!(next.drawn, [1.0], "rows already at a candidate are never drawn");
    }
}
