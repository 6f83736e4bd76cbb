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
        let p = x.ncols();
        let mut s =
            LloydStat { k, p, sums: vec![0.0; k * p], counts: vec![0.0; k], inertia: 0.0, far: Vec::new() };
        // The k farthest rows so far, (d², row number, label), kept while
        // the rows stream by: a row displaces the nearest of them only when
        // farther (an equal one came first and stays), so after the first k
        // rows most are turned away by one comparison, and no per-row
        // buffer is written.
        let mut far: Vec<(f64, usize, u32)> = Vec::with_capacity(k);
        let mut nearest_far = 0;
        each_nearest(x, centers, k, |i, row, j, d| {
            s.counts[j] += 1.0;
            s.inertia += d;
            s.sums[j * p..(j + 1) * p].iter_mut().zip(row).for_each(|(acc, v)| *acc += v);
            if far.len() < k {
                far.push((d, i, j as u32));
                if far.len() == k {
                    nearest_far = least(&far);
                }
            } else if d.total_cmp(&far[nearest_far].0).is_gt() {
                far[nearest_far] = (d, i, j as u32);
                nearest_far = least(&far);
            }
        });
        // Farthest first; of equal distances, the earlier row.
        far.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        s.far = far.into_iter().map(|(d, i, l)| (d, l, x.row(i).to_vec())).collect();
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

/// Which of the farthest rows kept is the nearest (the one a farther row
/// displaces; of equal distances the later row, so the earlier one stays).
fn least(far: &[(f64, usize, u32)]) -> usize {
    (1..far.len()).fold(0, |m, i| {
        let (a, b) = (&far[i], &far[m]);
        if a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)).is_lt() { i } else { m }
    })
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

/// One step of scikit-learn's greedy k-means++ on a block, so that the
/// whole initialisation reads X once per centre. Each row's squared
/// distance to its nearest chosen centre (the state) first takes in the
/// centre chosen last (`winner`); then each of the `trials` rows drawn for
/// the next centre gets its potential Σ min(d², ‖x − trial‖²); and, for
/// each trial as if it won (the driver learns which one did only once the
/// potentials are summed), `draws` rows are drawn with probability ∝ the
/// d² that trial would leave: the next centre's trials. A block draws its
/// rows by inverse cumulative weight, and keys each with ln(u)/S, S its
/// weight sum, so that keeping the largest key across blocks picks a block
/// ∝ S (the exponential race): the merge is associative and deterministic.
pub struct PlusPlus<'a> {
    pub winner: Option<&'a [f64]>,
    /// `t` rows of p, row-major (none in the first pass).
    pub trials: &'a [f64],
    pub draws: usize,
    pub seed: u64,
    pub step: u64,
    pub block: u64,
}

/// The layout of [`PlusPlus`]'s packed result: `t` potentials, then for
/// each of `max(t, 1)` hypotheses `draws` keys, then their rows.
/// Saturating, so counts read from a peer cannot overflow it: a huge
/// layout is then refused by the memory check.
pub fn plusplus_len(t: usize, draws: usize, p: usize) -> usize {
    t.saturating_add(t.max(1).saturating_mul(draws).saturating_mul(p.saturating_add(1)))
}

/// scikit-learn's number of trials per k-means++ centre: 2 + ⌊ln k⌋.
pub fn local_trials(k: usize) -> usize {
    2 + (k.max(1) as f64).ln() as usize
}

impl PlusPlus<'_> {
    /// The new state (n values) and the packed result ([`plusplus_len`]).
    pub fn run(&self, x: ArrayView2<'_, f64>, state: Option<&[f64]>) -> (Vec<f64>, Vec<f64>) {
        let (n, p) = x.dim();
        let xs = row_major(&x);
        let row = |i: usize| &xs[i * p..(i + 1) * p];
        let d2 = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(u, v)| (u - v) * (u - v)).sum::<f64>();
        let mut d: Vec<f64> = match state {
            Some(s) => s.to_vec(),
            None => vec![f64::INFINITY; n],
        };
        if let Some(w) = self.winner {
            for (i, di) in d.iter_mut().enumerate() {
                *di = di.min(d2(row(i), w));
            }
        }
        let t = self.trials.len().checked_div(p).unwrap_or(0);
        let h = t.max(1);
        // Each trial's weights, row by row: the d² it would leave.
        let weights: Vec<Vec<f64>> = (0..t)
            .map(|j| {
                let c = &self.trials[j * p..(j + 1) * p];
                (0..n).map(|i| d[i].min(d2(row(i), c))).collect()
            })
            .collect();
        let mut out = vec![0.0; plusplus_len(t, self.draws, p)];
        for (j, w) in weights.iter().enumerate() {
            out[j] = w.iter().sum();
        }
        if self.draws == 0 {
            return (d, out);
        }
        let keys = t;
        let rows_at = t + h * self.draws;
        let mut r = rng(self.seed, self.block, self.step);
        // Without trials, the one hypothesis draws from the state itself.
        let hypotheses: Vec<&[f64]> =
            if t == 0 { vec![d.as_slice()] } else { weights.iter().map(Vec::as_slice).collect() };
        for (hyp, w) in hypotheses.into_iter().enumerate() {
            let mut cum = Vec::with_capacity(n);
            let mut total = 0.0;
            for &v in w {
                total += v;
                cum.push(total);
            }
            for q in 0..self.draws {
                let slot = hyp * self.draws + q;
                let (u, e): (f64, f64) = (r.random(), r.random());
                let (key, pick) = if total > 0.0 && n > 0 {
                    // 1 − e lies in (0, 1]: its logarithm is finite.
                    let i = cum.partition_point(|&c| c <= u * total).min(n - 1);
                    ((1.0 - e).ln() / total, Some(i))
                } else {
                    (f64::NEG_INFINITY, (n > 0).then_some(0))
                };
                out[keys + slot] = key;
                if let Some(i) = pick {
                    out[rows_at + slot * p..rows_at + (slot + 1) * p].copy_from_slice(row(i));
                }
            }
        }
        (d, out)
    }
}

/// Merge two [`PlusPlus`] results of the same layout: potentials added,
/// and for each draw the row of the larger key.
pub fn merge_plusplus(a: &[f64], b: &[f64], t: usize, draws: usize) -> Result<Vec<f64>, ArrayError> {
    let slots = t.max(1).saturating_mul(draws);
    if a.len() != b.len()
        || a.len() < t.saturating_add(slots)
        || (slots > 0 && !(a.len() - t - slots).is_multiple_of(slots))
    {
        return Err(ArrayError::Shape(format!(
            "k-means++ results of {} and {} values for {t} trials and {draws} draws",
            a.len(),
            b.len()
        )));
    }
    let p = (a.len() - t - slots).checked_div(slots).unwrap_or(0);
    let mut out = a.to_vec();
    for j in 0..t {
        out[j] += b[j];
    }
    for slot in 0..slots {
        if b[t + slot] > a[t + slot] {
            out[t + slot] = b[t + slot];
            let at = t + slots + slot * p;
            out[at..at + p].copy_from_slice(&b[at..at + p]);
        }
    }
    Ok(out)
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

/// The logistic loss's Hessian on a block (summed over its rows), for the
/// Newton solver: with x̃ = [x, 1] and p a row's class probabilities, the
/// block of class rows (a, b) of `coef` is Σ x̃ x̃ᵀ · p_a(δ_ab − p_b)
/// (p(1 − p) for two classes). d × d, d = m(p + 1), row-major. Rows go in
/// tiles: the weighted tile and a GEMM per pair of classes.
pub fn logistic_hessian(x: ArrayView2<'_, f64>, coef: &[f64], m: usize) -> Vec<f64> {
    const TILE: usize = 1024;
    let (n, p) = x.dim();
    let q = p + 1;
    let d = m * q;
    let mut h = Mat::<f64>::zeros(d, d);
    let mut xt = Mat::<f64>::zeros(TILE.min(n.max(1)), q);
    let mut wx = xt.clone();
    for start in (0..n).step_by(TILE) {
        let t = TILE.min(n - start);
        let tile = x.slice(ndarray::s![start..start + t, ..]);
        let probs = probabilities(tile, coef, m);
        let k = m.max(2);
        for (i, row) in tile.rows().into_iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                xt[(i, j)] = *v;
            }
            xt[(i, p)] = 1.0;
        }
        for a in 0..m {
            for b in a..m {
                for i in 0..t {
                    let pr = &probs[i * k..(i + 1) * k];
                    let w = if m == 1 {
                        pr[1] * (1.0 - pr[1])
                    } else {
                        pr[a] * (f64::from(u8::from(a == b)) - pr[b])
                    };
                    for j in 0..q {
                        wx[(i, j)] = w * xt[(i, j)];
                    }
                }
                matmul(
                    h.as_mut().submatrix_mut(a * q, b * q, q, q),
                    Accum::Add,
                    xt.as_ref().subrows(0, t).transpose(),
                    wx.as_ref().subrows(0, t),
                    1.0,
                    Par::Seq,
                );
            }
        }
    }
    // The blocks below the diagonal mirror those above.
    (0..d * d)
        .map(|at| {
            let (i, j) = (at / d, at % d);
            if i / q > j / q { h[(j, i)] } else { h[(i, j)] }
        })
        .collect()
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

    /// k-means++ draws rows ∝ d², within a block and across blocks (the
    /// merge's exponential race), and sums each trial's potential.
    #[test]
    fn plusplus_draws_rows_in_proportion_to_their_squared_distance() {
        // Block a: squared distances 1 and 3 from the winner at 0; block b: 4.
        let a = Array2::from_shape_vec((2, 3), vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0]).expect("a");
        let b = Array2::from_shape_vec((1, 3), vec![2.0, 0.0, 0.0]).expect("b");
        let winner = [0.0; 3];
        let (mut second, mut from_b) = (0, 0);
        let runs = 4000;
        for seed in 0..runs {
            let step =
                |block| PlusPlus { winner: Some(&winner), trials: &[], draws: 1, seed, step: 0, block };
            let (sa, pa) = step(0).run(a.view(), None);
            let (_, pb) = step(1).run(b.view(), None);
            assert_eq!(sa, [1.0, 3.0]);
            // [key, row]
            if pa[2] == 1.0 {
                second += 1;
            }
            let m = merge_plusplus(&pa, &pb, 0, 1).expect("merge");
            if m[1] == 2.0 {
                from_b += 1;
            }
        }
        // 3/4 of a's draws are its second row; b holds 4/8 of the weight.
        assert!((2900..3100).contains(&second), "{second} of {runs}");
        assert!((1900..2100).contains(&from_b), "{from_b} of {runs}");
        // Two trials against a state of squared distances [1, 3].
        let state = [1.0, 3.0];
        let trials = [1.0, 0.0, 0.0, 2.0, 0.0, 0.0];
        let pp = PlusPlus { winner: None, trials: &trials, draws: 2, seed: 1, step: 1, block: 0 };
        let (s, out) = pp.run(a.view(), Some(&state));
        assert_eq!(s, state);
        assert_eq!(out.len(), plusplus_len(2, 2, 3));
        assert_eq!(out[..2], [2.0, 4.0]);
        assert!(merge_plusplus(&out, &out[1..], 2, 2).is_err(), "results of other layouts");
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
