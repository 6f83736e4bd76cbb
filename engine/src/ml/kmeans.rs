//! `KMeans` as scikit-learn's, at scale as dask-ml's: k-means‖
//! initialisation (Bahmani et al.) with each round one pass that brings
//! every row's distance to its nearest candidate up to date against the new
//! candidates only (the state is persisted between rounds), the candidates
//! weighted by the rows nearest to them and reclustered with k-means++ on
//! the driver (or scikit-learn's greedy k-means++ over all of X, one pass
//! per centre); then Lloyd's iterations, one pass each: per-block cluster
//! sums, counts and inertia from a GEMM argmin, merged in a tree. An empty
//! cluster is reseeded with the farthest row, and convergence is
//! scikit-learn's (the centres' squared shift within tol × the mean feature
//! variance); `inertia_` is Σ‖x − c‖² with the final centres, computed
//! directly (the GEMM form cancels).

use std::sync::Arc;

use rand::RngExt;

use super::graph::{map_row_blocks, row_blocks, row_statistic};
use super::kernels::{LloydStat, local_trials, rng};
use super::op::MlOp;
use super::stats::{Moments, unpacked};
use super::{MlError, Runner, check_finite, features_match, samples_features};
use crate::array::chunk::Chunk;
use crate::array::dtype::DType;
use crate::array::error::ArrayError;
use crate::array::op::ArrayOp;
use crate::collections::array::{Array, Ctx, array_task, block, finish};
use crate::graph::token::Tokenizer;
use crate::ops::Arg;

#[derive(Clone, Debug, PartialEq)]
pub enum Init {
    /// k-means‖ (the default, as dask-ml's).
    Parallel,
    /// scikit-learn's greedy k-means++, one pass over X per centre.
    PlusPlus,
    /// k distinct rows drawn at random.
    Random,
    /// Given centres, k × p row-major.
    Given(Vec<f64>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct KMeans {
    pub n_clusters: usize,
    pub init: Init,
    pub oversampling_factor: f64,
    /// k-means‖ rounds (default 5).
    pub init_max_iter: Option<usize>,
    pub max_iter: usize,
    pub tol: f64,
    pub seed: u64,
}

/// A fitted KMeans (scikit-learn's attributes).
#[derive(Clone, Debug, PartialEq)]
pub struct KMeansFit {
    /// k × p, row-major.
    pub centers: Vec<f64>,
    pub k: usize,
    pub inertia: f64,
    pub n_iter: usize,
    /// Passes over X: the initialisation's, one per iteration, and one for
    /// the final inertia unless the last iteration left the centres still.
    pub n_passes: usize,
    pub n_init_passes: usize,
}

/// Rounds of k-means‖ when not told.
const ROUNDS: usize = 5;

impl KMeans {
    pub fn fit(&self, ctx: &Ctx, x: &Array, runner: &dyn Runner) -> Result<KMeansFit, MlError> {
        let (n, p) = samples_features(x)?;
        let k = self.n_clusters;
        if k == 0 {
            return Err(MlError::Input("KMeans: n_clusters must be at least 1".into()));
        }
        if n < k {
            return Err(MlError::Input(format!("KMeans: n_samples={n} should be >= n_clusters={k}")));
        }
        if self.max_iter == 0 {
            return Err(MlError::Input("KMeans: max_iter must be at least 1".into()));
        }
        let valid = |v: f64, zero_ok: bool| v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0));
        if !valid(self.tol, true) || !valid(self.oversampling_factor, false) {
            return Err(MlError::Input("KMeans: tol must be >= 0 and oversampling_factor > 0".into()));
        }
        let rows = row_blocks(ctx, x)?;
        let (mut centers, init_passes) = match &self.init {
            Init::Given(c) => {
                if c.len() != k * p {
                    return Err(MlError::Input(format!(
                        "KMeans: init has {} values, but n_clusters × n_features is {k} × {p}",
                        c.len()
                    )));
                }
                check_finite("KMeans init", c)?;
                (c.clone(), 0)
            }
            Init::Random => {
                let mut r = rng(self.seed, u64::MAX, 0);
                let picks = rand::seq::index::sample(&mut r, n, k).into_vec();
                (fetch_rows(ctx, &rows, &picks, runner)?, 1)
            }
            Init::Parallel => self.parallel(ctx, &rows, n, p, runner)?,
            Init::PlusPlus => self.plus_plus(ctx, &rows, n, p, runner)?,
        };
        let mut tol = None;
        let mut n_iter = 0;
        let mut still = false;
        let mut last_inertia = 0.0;
        let mut passes = init_passes;
        for it in 0..self.max_iter {
            let stat = lloyd(ctx, &rows, &centers, k, n)?;
            let mut arrays = vec![stat];
            // The tolerance scales with X's variance: read in the first pass.
            if tol.is_none() && self.tol > 0.0 {
                arrays.push(row_statistic(ctx, &rows, None, MlOp::Moments, MlOp::MergeMoments, 5 * p)?);
            }
            let out = runner.compute(&arrays)?;
            passes += 1;
            if let Some(m) = out.get(1) {
                let m = Moments::unpack(&unpacked(m))?;
                let mean_var = m.m2.iter().zip(&m.n).map(|(a, b)| a / b).sum::<f64>() / p as f64;
                tol = Some(mean_var * self.tol);
            }
            let s = unpack_lloyd(&out[0])?;
            check_finite("KMeans", &[s.inertia])?;
            last_inertia = s.inertia;
            let next = update(&s, &centers, k, p);
            let shift: f64 = next.iter().zip(&centers).map(|(a, b)| (a - b) * (a - b)).sum();
            centers = next;
            n_iter = it + 1;
            if shift == 0.0 {
                still = true;
                break;
            }
            if shift <= tol.unwrap_or(0.0) {
                break;
            }
        }
        let inertia = if still {
            last_inertia
        } else {
            passes += 1;
            inertia_of(ctx, &rows, &centers, k, n, runner)?
        };
        Ok(KMeansFit { centers, k, inertia, n_iter, n_passes: passes, n_init_passes: init_passes })
    }

    /// k-means‖: the centres and the passes it made.
    fn parallel(
        &self,
        ctx: &Ctx,
        rows: &Array,
        n: usize,
        p: usize,
        runner: &dyn Runner,
    ) -> Result<(Vec<f64>, usize), MlError> {
        let k = self.n_clusters;
        let ell = self.oversampling_factor * k as f64;
        let mut candidates = self.first_centre(ctx, rows, n, runner)?;
        let mut passes = 0;
        let rounds = self.init_max_iter.unwrap_or(ROUNDS);
        let mut state: Option<Array> = None;
        let mut new = candidates.clone();
        let mut cost = f64::NAN;
        let mut round = 0u64;
        // Round 0 takes the first candidate's distances; each later round
        // adds the rows drawn before it and draws more. Rounds go on past
        // `rounds` only while there are fewer candidates than clusters.
        loop {
            let drawing = round > 0;
            let sample = drawing.then_some((ell, cost));
            let (st, drawn) = init_round(
                ctx,
                rows,
                state.as_ref(),
                &new,
                candidates.len() / p - new.len() / p,
                sample,
                self.seed,
                round,
            )?;
            let (mut kept, out) = runner.run(&[st], &[drawn])?;
            passes += 1;
            let v = unpacked(&out[0]);
            cost = v[0];
            check_finite("KMeans", &[cost])?;
            new = v[2..].to_vec();
            candidates.extend_from_slice(&new);
            state = kept.pop();
            round += 1;
            let enough = candidates.len() / p >= k;
            if (round as usize > rounds && enough) || (round as usize > rounds + 20) || cost == 0.0 {
                break;
            }
        }
        // The last rows drawn join the state; each candidate's weight is the
        // number of rows nearest to it.
        let n_cand = candidates.len() / p;
        let (st, _) =
            init_round(ctx, rows, state.as_ref(), &new, n_cand - new.len() / p, None, self.seed, round)?;
        let counts = count_nearest(ctx, &st, n_cand)?;
        let weights = unpacked(&runner.compute(&[counts])?[0]);
        passes += 1;
        let mut r = rng(self.seed, u64::MAX, 2);
        Ok((recluster(&candidates, &weights, k, p, &mut r), passes))
    }

    /// The first centre of either initialisation: a row drawn uniformly
    /// (one row of one block read: not counted as a pass).
    fn first_centre(
        &self,
        ctx: &Ctx,
        rows: &Array,
        n: usize,
        runner: &dyn Runner,
    ) -> Result<Vec<f64>, MlError> {
        let first = rng(self.seed, u64::MAX, 1).random_range(0..n);
        fetch_rows(ctx, rows, &[first], runner)
    }

    /// scikit-learn's greedy k-means++ (`_kmeans_plusplus`): the first
    /// centre a row drawn uniformly, each next one the best of 2 + ln k rows
    /// drawn ∝ d² by the potential it would leave. One pass per centre
    /// after the first ([`PlusPlus`](super::kernels::PlusPlus) draws the
    /// next trials for each trial as if it won): k passes in all.
    fn plus_plus(
        &self,
        ctx: &Ctx,
        rows: &Array,
        n: usize,
        p: usize,
        runner: &dyn Runner,
    ) -> Result<(Vec<f64>, usize), MlError> {
        let k = self.n_clusters;
        let draws = local_trials(k);
        let mut centers = self.first_centre(ctx, rows, n, runner)?;
        let mut winner = Some(Arc::new(centers.clone()));
        let mut trials: Vec<f64> = Vec::new();
        let mut state: Option<Array> = None;
        let mut passes = 0;
        let mut step = 0u64;
        while centers.len() / p < k {
            let t = trials.len() / p;
            // The pass that picks the last centre draws no more trials.
            let more = if t > 0 && centers.len() / p + 1 == k { 0 } else { draws };
            let trials_now = Arc::new(std::mem::take(&mut trials));
            let op = |block| MlOp::PlusPlus {
                winner: winner.clone(),
                trials: trials_now.clone(),
                draws: more,
                seed: self.seed,
                step,
                block,
            };
            let merge = MlOp::MergePlusPlus { trials: t, draws: more };
            let (st, part) = stateful_pass(ctx, rows, state.as_ref(), "kmeans-plusplus", 1, op, merge)?;
            let (mut kept, out) = runner.run(&[st], &[part])?;
            passes += 1;
            step += 1;
            state = kept.pop();
            let v = unpacked(&out[0]);
            let slots = t.max(1) * more;
            if v.len() != t + slots * (1 + p) {
                return Err(MlError::Compute(format!(
                    "a k-means++ step gave {} values for {t} trials and {more} draws of {p} features",
                    v.len()
                )));
            }
            check_finite("KMeans", &v[..t])?;
            // The trial that leaves the least potential wins (the first of equals).
            let best = (0..t).fold(0, |b, j| if v[j] < v[b] { j } else { b });
            winner = if t > 0 {
                let c = trials_now[best * p..(best + 1) * p].to_vec();
                centers.extend_from_slice(&c);
                Some(Arc::new(c))
            } else {
                None
            };
            let hyp = if t > 0 { best } else { 0 };
            let at = t + slots + hyp * more * p;
            trials = v[at..at + more * p].to_vec();
        }
        Ok((centers, passes))
    }
}

/// The rows at global indices `picks` of a matrix of row blocks: one task
/// per block that holds some, reading only those blocks.
fn fetch_rows(ctx: &Ctx, rows: &Array, picks: &[usize], runner: &dyn Runner) -> Result<Vec<f64>, MlError> {
    let offsets = crate::collections::array::offsets(&rows.chunks[0]);
    let p = rows.shape().get(1).copied().unwrap_or(1);
    // Block → (where the row goes in `picks`, its row in the block).
    let mut per_block: std::collections::BTreeMap<usize, Vec<(usize, usize)>> = Default::default();
    for (i, &g) in picks.iter().enumerate() {
        let b = offsets.partition_point(|&o| o <= g).saturating_sub(1);
        per_block.entry(b).or_default().push((i, g - offsets[b]));
    }
    let mut t = Tokenizer::new();
    t.str("kmeans-rows").str(&rows.name).serde(&picks);
    let name: Arc<str> = Arc::from(format!("rows-{}", t.finish()));
    let tasks = per_block
        .iter()
        .enumerate()
        .map(|(j, (&b, wanted))| {
            let local = wanted.iter().map(|&(_, r)| r).collect();
            let src = rows.block_key(&vec![b, 0][..rows.ndim()]);
            array_task(ctx, block(&name, &[j, 0]), ArrayOp::TakeRows(local), vec![Arg::Dep(0)], vec![src])
        })
        .collect();
    let chunks = vec![per_block.values().map(Vec::len).collect(), vec![p]];
    let a = finish(name.to_string(), tasks, vec![rows.layer.clone()], chunks, rows.dtype);
    let got: Vec<f64> = runner.compute(&[a])?[0].cast::<f64>().iter().copied().collect();
    if got.len() != picks.len() * p {
        return Err(MlError::Compute(format!(
            "{} values came back for {} rows of {p}",
            got.len(),
            picks.len()
        )));
    }
    // The rows came block by block: put them back in the order of `picks`.
    let mut result = vec![0.0; picks.len() * p];
    for (pos, &(i, _)) in per_block.values().flatten().enumerate() {
        result[i * p..(i + 1) * p].copy_from_slice(&got[pos * p..(pos + 1) * p]);
    }
    Ok(result)
}

/// One k-means‖ round: the new state (n × 2 per block) and the merged rows drawn.
#[allow(clippy::too_many_arguments)]
fn init_round(
    ctx: &Ctx,
    rows: &Array,
    state: Option<&Array>,
    new: &[f64],
    first: usize,
    sample: Option<(f64, f64)>,
    seed: u64,
    round: u64,
) -> Result<(Array, Array), ArrayError> {
    let new = Arc::new(new.to_vec());
    let op = |block| MlOp::InitRound { new: new.clone(), first, sample, seed, round, block };
    stateful_pass(ctx, rows, state, "kmeans-init", 2, op, MlOp::MergeDrawn)
}

/// One pass of a stateful initialisation: a task per block of X (with its
/// block of the previous pass's state after the first pass) gives
/// `[state, part]`; the states (`cols` columns) form an array for the next
/// pass to read, and the parts are merged in one task by `merge` (their
/// lengths are not used: drawn rows are known only once drawn).
fn stateful_pass(
    ctx: &Ctx,
    rows: &Array,
    state: Option<&Array>,
    label: &str,
    cols: usize,
    op: impl Fn(u64) -> MlOp,
    merge: MlOp,
) -> Result<(Array, Array), ArrayError> {
    let mut t = Tokenizer::new();
    t.str(label).str(&rows.name).str(state.map_or("", |s| &s.name)).serde(&op(0));
    let tok = t.finish();
    let both: Arc<str> = Arc::from(format!("{label}-{tok}"));
    let st_name: Arc<str> = Arc::from(format!("{label}-state-{tok}"));
    let part_name: Arc<str> = Arc::from(format!("{label}-part-{tok}"));
    let nb = rows.chunks[0].len();
    let mut tasks = Vec::new();
    let mut st_tasks = Vec::new();
    for i in 0..nb {
        let mut deps = vec![rows.block_key(&vec![i, 0][..rows.ndim()])];
        if let Some(s) = state {
            deps.push(s.block_key(&[i, 0]));
        }
        let args = (0..deps.len()).map(|d| Arg::Dep(d as u32)).collect();
        tasks.push(array_task(ctx, block(&both, &[i]), ArrayOp::Ml(op(i as u64)), args, deps));
        st_tasks.push(array_task(
            ctx,
            block(&st_name, &[i, 0]),
            ArrayOp::Item(0),
            vec![Arg::Dep(0)],
            vec![block(&both, &[i])],
        ));
        tasks.push(array_task(
            ctx,
            block(&part_name, &[i]),
            ArrayOp::Item(1),
            vec![Arg::Dep(0)],
            vec![block(&both, &[i])],
        ));
    }
    let mut deps = vec![rows.layer.clone()];
    if let Some(s) = state {
        deps.push(s.layer.clone());
    }
    let both_layer = finish(both.to_string(), tasks, deps, vec![vec![0; nb]], DType::F64);
    let st = finish(
        st_name.to_string(),
        st_tasks,
        vec![both_layer.layer.clone()],
        vec![rows.chunks[0].clone(), vec![cols]],
        DType::F64,
    );
    let parts = Array { name: part_name, ..both_layer };
    let merged = merge_all(ctx, &parts, merge, &format!("{label}-merge"))?;
    Ok((st, merged))
}

/// One task merging every block of a 1-d array of packed statistics.
fn merge_all(ctx: &Ctx, parts: &Array, op: MlOp, label: &str) -> Result<Array, ArrayError> {
    let name: Arc<str> = Arc::from(format!("{label}-{}", Tokenizer::new().str(&parts.name).finish()));
    let nb = parts.chunks[0].len();
    let deps: Vec<_> = (0..nb).map(|i| block(&parts.name, &[i])).collect();
    let args = (0..nb).map(|i| Arg::Dep(i as u32)).collect();
    let task = array_task(ctx, block(&name, &[0]), ArrayOp::Ml(op), args, deps);
    Ok(finish(name.to_string(), vec![task], vec![parts.layer.clone()], vec![vec![0]], DType::F64))
}

/// How many rows are nearest to each of the `n` candidates, from a state.
fn count_nearest(ctx: &Ctx, state: &Array, n: usize) -> Result<Array, ArrayError> {
    row_statistic(ctx, state, None, MlOp::CountNearest { n }, MlOp::MergeSum, n)
}

/// The Lloyd statistic of X against `centers`.
fn lloyd(ctx: &Ctx, rows: &Array, centers: &[f64], k: usize, n: usize) -> Result<Array, ArrayError> {
    let p = centers.len() / k;
    let far = k.min(n);
    let len = 3 + k * p + k + 1 + far * (2 + p);
    row_statistic(
        ctx,
        rows,
        None,
        MlOp::Lloyd { centers: Arc::new(centers.to_vec()), k },
        MlOp::MergeLloyd,
        len,
    )
}

fn unpack_lloyd(c: &Chunk) -> Result<LloydStat, MlError> {
    Ok(LloydStat::unpack(&unpacked(c))?)
}

/// Σ‖x − c‖² of X's rows to their nearest of `centers`.
fn inertia_of(
    ctx: &Ctx,
    rows: &Array,
    centers: &[f64],
    k: usize,
    n: usize,
    runner: &dyn Runner,
) -> Result<f64, MlError> {
    let out = runner.compute(&[lloyd(ctx, rows, centers, k, n)?])?;
    Ok(unpack_lloyd(&out[0])?.inertia)
}

/// New centres from a Lloyd statistic: the clusters' means, an empty
/// cluster taking the row farthest from its centre (scikit-learn's
/// `_relocate_empty_clusters`: that row leaves its own cluster's sums).
fn update(s: &LloydStat, old: &[f64], k: usize, p: usize) -> Vec<f64> {
    let (mut sums, mut counts) = (s.sums.clone(), s.counts.clone());
    let empty: Vec<usize> = (0..k).filter(|&j| counts[j] == 0.0).collect();
    for (j, (_, label, row)) in empty.iter().zip(&s.far) {
        let from = *label as usize;
        for d in 0..p {
            sums[from * p + d] -= row[d];
            sums[j * p + d] = row[d];
        }
        counts[from] -= 1.0;
        counts[*j] = 1.0;
    }
    (0..k * p)
        .map(|i| {
            let c = counts[i / p];
            if c > 0.0 { sums[i] / c } else { old[i] }
        })
        .collect()
}

/// k weighted k-means++ centres of the candidates, improved by weighted
/// Lloyd iterations (all on the driver: a few hundred rows).
fn recluster(cands: &[f64], w: &[f64], k: usize, p: usize, r: &mut impl rand::Rng) -> Vec<f64> {
    let m = cands.len() / p;
    let row = |i: usize| &cands[i * p..(i + 1) * p];
    let d2 = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>();
    /// An index drawn with probability proportional to its weight.
    fn pick(r: &mut impl rand::Rng, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        if total <= 0.0 {
            return 0;
        }
        let mut u = r.random::<f64>() * total;
        for (i, &x) in weights.iter().enumerate() {
            if u < x {
                return i;
            }
            u -= x;
        }
        weights.len() - 1
    }
    let mut chosen = vec![pick(r, w)];
    let mut best: Vec<f64> = (0..m).map(|i| d2(row(i), row(chosen[0]))).collect();
    // scikit-learn's greedy k-means++: 2 + ln k trials per centre.
    let trials = local_trials(k);
    while chosen.len() < k {
        let pot: Vec<f64> = (0..m).map(|i| w[i] * best[i]).collect();
        let mut winner = None;
        for _ in 0..trials {
            let c = if pot.iter().sum::<f64>() > 0.0 {
                pick(r, &pot)
            } else {
                (0..m).find(|i| !chosen.contains(i)).unwrap_or(0)
            };
            let after: Vec<f64> = (0..m).map(|i| best[i].min(d2(row(i), row(c)))).collect();
            let total: f64 = after.iter().zip(w).map(|(a, b)| a * b).sum();
            if winner.as_ref().is_none_or(|(t, _, _)| total < *t) {
                winner = Some((total, c, after));
            }
        }
        let (_, c, after) = winner.unwrap_or((0.0, 0, best.clone()));
        chosen.push(c);
        best = after;
    }
    let mut centers: Vec<f64> = chosen.iter().flat_map(|&i| row(i).to_vec()).collect();
    for _ in 0..300 {
        let mut sums = vec![0.0; k * p];
        let mut counts = vec![0.0; k];
        for (i, &wi) in w.iter().enumerate().take(m) {
            let x = row(i);
            let j = (0..k)
                .min_by(|&a, &b| {
                    d2(x, &centers[a * p..(a + 1) * p]).total_cmp(&d2(x, &centers[b * p..(b + 1) * p]))
                })
                .unwrap_or(0);
            counts[j] += wi;
            for (s, v) in sums[j * p..(j + 1) * p].iter_mut().zip(x) {
                *s += wi * v;
            }
        }
        let next: Vec<f64> = (0..k * p)
            .map(|i| if counts[i / p] > 0.0 { sums[i] / counts[i / p] } else { centers[i] })
            .collect();
        let shift: f64 = next.iter().zip(&centers).map(|(a, b)| (a - b) * (a - b)).sum();
        centers = next;
        if shift == 0.0 {
            break;
        }
    }
    centers
}

impl KMeansFit {
    /// Each row's nearest centre, lazily (int64, chunked like X's rows).
    pub fn predict(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        features_match("KMeans", x, self.centers.len() / self.k)?;
        let op = MlOp::Labels { centers: Arc::new(self.centers.clone()), k: self.k };
        Ok(map_row_blocks(ctx, x, op, None, DType::I64)?)
    }

    /// Each row's distance to each centre, lazily (n × k).
    pub fn transform(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        features_match("KMeans", x, self.centers.len() / self.k)?;
        let op = MlOp::Distances { centers: Arc::new(self.centers.clone()), k: self.k };
        Ok(map_row_blocks(ctx, x, op, Some(self.k), DType::F64)?)
    }

    /// Minus X's inertia to these centres (scikit-learn's `score`).
    pub fn score(&self, ctx: &Ctx, x: &Array, runner: &dyn Runner) -> Result<f64, MlError> {
        let (n, _) = samples_features(x)?;
        features_match("KMeans", x, self.centers.len() / self.k)?;
        let rows = row_blocks(ctx, x)?;
        Ok(-inertia_of(ctx, &rows, &self.centers, self.k, n, runner)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_cluster_takes_the_farthest_row() {
        let s = LloydStat {
            k: 2,
            p: 1,
            sums: vec![12.0, 0.0],
            counts: vec![3.0, 0.0],
            inertia: 0.0,
            far: vec![(64.0, 0, vec![10.0])],
        };
        assert_eq!(update(&s, &[0.0, 5.0], 2, 1), [1.0, 10.0]);
    }

    #[test]
    fn reclustering_finds_separated_groups() {
        let cands = [0.0, 0.1, 10.0, 10.2, 20.0];
        let w = [5.0, 5.0, 5.0, 5.0, 5.0];
        let mut c = recluster(&cands, &w, 3, 1, &mut rng(0, 0, 0));
        c.sort_by(f64::total_cmp);
        assert_eq!(c, [0.05, 10.1, 20.0]);
    }
}
