//! The array tasks of the estimators' fits: a statistic of a block, and the
//! merge of statistics (`stats`), each a packed 1-d f64 block. They run in
//! the same graphs, on the same workers, as every other array task.

use serde::{Deserialize, Serialize};

use std::sync::Arc;

use super::categories as onehot;
use super::kernels::{
    InitRound, LloydStat, PlusPlus, logistic_hessian, logistic_loss, merge_plusplus, nearest, plusplus_len,
    poisson_loss, probabilities, scores,
};
use super::stats::{CoMoments, Moments, QrMoments, packed, unpacked, with_rows};
use crate::array::chunk::Chunk;
use crate::array::error::ArrayError;
use crate::value::Value;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MlOp {
    /// Column moments of a block of X (the scalers).
    Moments,
    /// Merge packed moments (the arguments).
    MergeMoments,
    /// Co-moments of the rows of a block of X, with the block of y (the
    /// second argument) appended as a last column when `with_y`.
    CoMoments { with_y: bool },
    /// Merge packed co-moments (the arguments).
    MergeCoMoments,
    /// Count, means and TSQR's R of the centred rows of a block of X
    /// (`stats::QrMoments`).
    QrMoments,
    /// Merge packed `QrMoments`.
    MergeQrMoments,
    /// The rows of a block that go to one part of `train_test_split`
    /// (`split::chosen_rows`).
    SplitRows { seed: u64, block: u64, n_test: usize, shuffle: bool, test: bool },
    /// One Lloyd step on a block: its `LloydStat` against `centers` (k × p).
    Lloyd { centers: Arc<Vec<f64>>, k: usize },
    /// Merge `LloydStat`s.
    MergeLloyd,
    /// Each row's nearest centre (`predict`), as int64.
    Labels { centers: Arc<Vec<f64>>, k: usize },
    /// Each row's Euclidean distance to each centre (`transform`), n × k.
    Distances { centers: Arc<Vec<f64>>, k: usize },
    /// A k-means‖ round on a block (`InitRound`), with the previous round's
    /// state as a second argument after the first round: `[state, drawn]`,
    /// drawn being `[cost, p, rows...]`.
    InitRound {
        new: Arc<Vec<f64>>,
        first: usize,
        sample: Option<(f64, f64)>,
        seed: u64,
        round: u64,
        block: u64,
    },
    /// Merge drawn rows: costs added, rows joined.
    MergeDrawn,
    /// A greedy k-means++ step on a block (`kernels::PlusPlus`), with the
    /// previous step's state (n × 1) as a second argument after the first
    /// step: `[state, packed]`.
    PlusPlus {
        winner: Option<Arc<Vec<f64>>>,
        trials: Arc<Vec<f64>>,
        draws: usize,
        seed: u64,
        step: u64,
        block: u64,
    },
    /// Merge k-means++ steps' results (`kernels::merge_plusplus`).
    MergePlusPlus { trials: usize, draws: usize },
    /// Each column's distinct values in a block (`onehot::pack_distinct`).
    Distinct,
    /// Merge distinct values: each column's union.
    MergeDistinct,
    /// One 0/1 column per category (`onehot::encode`), n × width.
    OneHot { categories: Arc<Vec<Vec<f64>>>, drop: Arc<Vec<Option<usize>>>, ignore: bool },
    /// How many rows are nearest to each candidate (the k-means‖ weights),
    /// from round states: a packed vector of `n` counts.
    CountNearest { n: usize },
    /// Merge packed vectors by adding them.
    MergeSum,
    /// A logistic loss and its gradient on a block of X and its block of y
    /// (`kernels::logistic_loss`): `coef` is m × (p + 1), `classes` sorted.
    Logistic { coef: Arc<Vec<f64>>, m: usize, classes: Arc<Vec<f64>> },
    /// `Logistic`'s loss and gradient, then the Hessian
    /// (`kernels::logistic_hessian`), for the Newton solver.
    LogisticNewton { coef: Arc<Vec<f64>>, m: usize, classes: Arc<Vec<f64>> },
    /// A linear model's scores (n × m; n for m = 1).
    Decision { coef: Arc<Vec<f64>>, m: usize },
    /// Class probabilities (n × classes).
    Proba { coef: Arc<Vec<f64>>, m: usize },
    /// The most likely class of each row, as its label (int64 when `int`).
    Predict { coef: Arc<Vec<f64>>, m: usize, classes: Arc<Vec<f64>>, int: bool },
    /// A Poisson regression's loss and gradient on a block of X and its
    /// block of y (`kernels::poisson_loss`): `coef` is p weights then the
    /// intercept.
    Poisson { coef: Arc<Vec<f64>> },
    /// A Poisson regression's expected counts exp(X·w + b).
    PoissonPredict { coef: Arc<Vec<f64>> },
    /// `[D(y, μ), D(y, mean)]`, the Poisson deviances of a block of y and
    /// one of predictions μ, and of y around `mean` (for D²).
    PoissonDeviance { mean: f64 },
    /// `[Σ −log p(true class), n]` of a block of labels and one of
    /// probabilities (columns in the order of `classes`).
    LogLoss { classes: Arc<Vec<f64>> },
}

impl MlOp {
    /// Whether the op keeps some rows of its one block (`picked_rows`).
    pub fn takes_rows(&self) -> bool {
        matches!(self, MlOp::SplitRows { .. })
    }

    /// The task group's name.
    pub fn name(&self) -> &'static str {
        match self {
            MlOp::Moments => "moments",
            MlOp::MergeMoments => "moments-merge",
            MlOp::CoMoments { .. } => "comoments",
            MlOp::MergeCoMoments => "comoments-merge",
            MlOp::QrMoments => "tsqr-r",
            MlOp::MergeQrMoments => "tsqr-r-merge",
            MlOp::SplitRows { test: true, .. } => "test-split",
            MlOp::SplitRows { test: false, .. } => "train-split",
            MlOp::Lloyd { .. } => "kmeans-lloyd",
            MlOp::MergeLloyd => "kmeans-lloyd-merge",
            MlOp::Labels { .. } => "kmeans-predict",
            MlOp::Distances { .. } => "kmeans-transform",
            MlOp::InitRound { .. } => "kmeans-init",
            MlOp::MergeDrawn => "kmeans-init-merge",
            MlOp::PlusPlus { .. } => "kmeans-plusplus",
            MlOp::MergePlusPlus { .. } => "kmeans-plusplus-merge",
            MlOp::Distinct => "categories",
            MlOp::MergeDistinct => "categories-merge",
            MlOp::OneHot { .. } => "one-hot",
            MlOp::CountNearest { .. } => "kmeans-init-weights",
            MlOp::MergeSum => "sum-merge",
            MlOp::Logistic { .. } => "logistic-loss",
            MlOp::LogisticNewton { .. } => "logistic-newton",
            MlOp::Decision { .. } => "decision-function",
            MlOp::Proba { .. } => "predict-proba",
            MlOp::Predict { .. } => "predict",
            MlOp::LogLoss { .. } => "log-loss",
            MlOp::Poisson { .. } => "poisson-loss",
            MlOp::PoissonPredict { .. } => "poisson-predict",
            MlOp::PoissonDeviance { .. } => "poisson-deviance",
        }
    }

    pub fn run(&self, args: &[Value]) -> Result<Value, ArrayError> {
        let blocks = args
            .iter()
            .map(|v| match v {
                Value::Array(c) => Ok(c.as_ref()),
                other => Err(ArrayError::Value(format!(
                    "{} takes array blocks, got {}",
                    self.name(),
                    other.type_name()
                ))),
            })
            .collect::<Result<Vec<&Chunk>, _>>()?;
        let out = match self {
            MlOp::Moments => {
                let [x] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                with_rows(x, |x| Moments::of(x))?.pack()
            }
            MlOp::CoMoments { with_y } => match (&blocks[..], with_y) {
                ([x], false) => with_rows(x, |x| CoMoments::of(x, None))??.pack(),
                ([x, y], true) => with_rows(x, |x| with_rows(y, |y| CoMoments::of(x, Some(y))))???.pack(),
                _ => return Err(arity(self, 1 + usize::from(*with_y), blocks.len())),
            },
            MlOp::MergeMoments => merge(&blocks, Moments::unpack, |a, b| a.merge(b))?.pack(),
            MlOp::MergeCoMoments => merge(&blocks, CoMoments::unpack, |a, b| a.merge(b))?.pack(),
            MlOp::QrMoments => {
                let [x] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                with_rows(x, |x| QrMoments::of(x))?.pack()
            }
            MlOp::MergeQrMoments => merge(&blocks, QrMoments::unpack, |a, b| a.merge(b))?.pack(),
            MlOp::SplitRows { .. } => {
                let [a] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                let keep = self.picked_rows(a.shape().first().copied().unwrap_or(0)).unwrap_or_default();
                return Ok(Value::array(crate::array::shape::take_rows(a, &keep)?));
            }
            MlOp::Lloyd { centers, k } => {
                let [x] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                fits(self, x, centers, *k, 0)?;
                with_rows(x, |x| LloydStat::of(x, centers, *k))?.pack()
            }
            MlOp::MergeLloyd => merge(&blocks, LloydStat::unpack, LloydStat::merge)?.pack(),
            MlOp::Labels { centers, k } => {
                let [x] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                fits(self, x, centers, *k, 0)?;
                let labels = with_rows(x, |x| nearest(x, centers, *k).0)?;
                let n = labels.len();
                return Ok(Value::array(Chunk::from_vec(&[n], labels.into_iter().map(i64::from).collect())?));
            }
            MlOp::Distances { centers, k } => {
                let [x] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                fits(self, x, centers, *k, 0)?;
                let d = with_rows(x, |x| {
                    let p = x.ncols();
                    let mut out = Vec::with_capacity(x.nrows() * k);
                    for row in x.rows() {
                        for c in centers.chunks(p.max(1)).take(*k) {
                            out.push(row.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt());
                        }
                    }
                    out
                })?;
                let n = d.len() / k.max(&1);
                return Ok(Value::array(Chunk::from_vec(&[n, *k], d)?));
            }
            MlOp::InitRound { new, first, sample, seed, round, block } => {
                let step = InitRound {
                    new,
                    first: *first,
                    sample: *sample,
                    seed: *seed,
                    round: *round,
                    block: *block,
                };
                let p = blocks.first().map_or(1, |x| cols(x));
                if !new.len().is_multiple_of(p.max(1)) {
                    return Err(ArrayError::Shape(format!(
                        "{}: {} candidate values for rows of {p} features",
                        self.name(),
                        new.len()
                    )));
                }
                let out = match &blocks[..] {
                    [x] => with_rows(x, |x| step.run(x, None))?,
                    [x, s] if s.shape() == [rows(x), 2] => {
                        with_rows(x, |x| with_rows(s, |s| step.run(x, Some(s))))??
                    }
                    [x, s] => {
                        return Err(ArrayError::Shape(format!(
                            "{}: a state of shape {:?} for a block of {} rows",
                            self.name(),
                            s.shape(),
                            rows(x)
                        )));
                    }
                    _ => return Err(arity(self, 2, blocks.len())),
                };
                let n = out.state.len() / 2;
                let mut drawn = vec![out.cost, p as f64];
                drawn.extend(out.drawn);
                return Ok(Value::list(vec![
                    Value::array(Chunk::from_vec(&[n, 2], out.state)?),
                    Value::array(packed(drawn)),
                ]));
            }
            MlOp::MergeDrawn => {
                let mut cost = 0.0;
                let mut p = 0.0;
                let mut rows = Vec::new();
                for b in &blocks {
                    let v = unpacked(b);
                    let [c, q, rest @ ..] = &v[..] else {
                        return Err(ArrayError::Value("malformed drawn rows".into()));
                    };
                    cost += c;
                    p = *q;
                    rows.extend_from_slice(rest);
                }
                let mut out = vec![cost, p];
                out.extend(rows);
                out
            }
            MlOp::PlusPlus { winner, trials, draws, seed, step, block } => {
                let Some(x) = blocks.first() else { return Err(arity(self, 1, 0)) };
                let (n, p) = (rows(x), cols(x));
                let bad_winner = winner.as_ref().is_some_and(|w| w.len() != p);
                if bad_winner || p == 0 || !trials.len().is_multiple_of(p) {
                    return Err(ArrayError::Shape(format!(
                        "{}: a centre of {} values and {} trial values for rows of {p} features",
                        self.name(),
                        winner.as_ref().map_or(0, |w| w.len()),
                        trials.len()
                    )));
                }
                let t = trials.len() / p;
                crate::memory::check(
                    (plusplus_len(t, *draws, p) as u64)
                        .saturating_add(t.max(1).saturating_mul(n) as u64)
                        .saturating_mul(8),
                    || format!("{draws} k-means++ draws for {t} trials"),
                )?;
                let step = PlusPlus {
                    winner: winner.as_ref().map(|w| w.as_slice()),
                    trials,
                    draws: *draws,
                    seed: *seed,
                    step: *step,
                    block: *block,
                };
                let (state, out) = match &blocks[..] {
                    [x] => with_rows(x, |x| step.run(x, None))?,
                    [x, s] if s.shape() == [n, 1] => {
                        let s: Vec<f64> = s.cast::<f64>().iter().copied().collect();
                        with_rows(x, |x| step.run(x, Some(&s)))?
                    }
                    [_, s] => {
                        return Err(ArrayError::Shape(format!(
                            "{}: a state of shape {:?} for a block of {n} rows",
                            self.name(),
                            s.shape()
                        )));
                    }
                    _ => return Err(arity(self, 2, blocks.len())),
                };
                return Ok(Value::list(vec![
                    Value::array(Chunk::from_vec(&[n, 1], state)?),
                    Value::array(packed(out)),
                ]));
            }
            MlOp::MergePlusPlus { trials, draws } => {
                let (t, d) = (*trials, *draws);
                let mut it = blocks.iter();
                let first = it.next().ok_or_else(|| ArrayError::Value("nothing to merge".into()))?;
                let mut acc = unpacked(first);
                for b in it {
                    acc = merge_plusplus(&acc, &unpacked(b), t, d)?;
                }
                acc
            }
            MlOp::Distinct => {
                let [x] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                let cols = with_rows(x, |x| {
                    x.columns()
                        .into_iter()
                        .map(|c| {
                            let mut v: Vec<f64> = c.iter().map(|v| onehot::category(*v)).collect();
                            v.sort_unstable_by(f64::total_cmp);
                            v.dedup_by(|a, b| a.total_cmp(b).is_eq());
                            v
                        })
                        .collect::<Vec<_>>()
                })?;
                onehot::pack_distinct(&cols)
            }
            MlOp::MergeDistinct => merge(&blocks, onehot::unpack_distinct, |a, b| {
                if a.len() != b.len() {
                    return Err(ArrayError::Shape(format!(
                        "distinct values of {} and {} columns cannot merge",
                        a.len(),
                        b.len()
                    )));
                }
                Ok(a.iter().zip(b).map(|(a, b)| onehot::union(a, b)).collect())
            })
            .map(|c| onehot::pack_distinct(&c))?,
            MlOp::OneHot { categories, drop, ignore } => {
                let [x] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                let out = with_rows(x, |x| onehot::encode(x, categories, drop, *ignore))??;
                let width = onehot::width(categories, drop);
                return Ok(Value::array(Chunk::from_vec(&[rows(x), width], out)?));
            }
            MlOp::CountNearest { n } => {
                let [s] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                crate::memory::check((*n as u64).saturating_mul(8), || {
                    format!("{} counts of k-means candidates", n)
                })?;
                let mut counts = vec![0.0; *n];
                with_rows(s, |s| {
                    for row in s.rows() {
                        if let Some(c) = counts.get_mut(row[1] as usize) {
                            *c += 1.0;
                        }
                    }
                })?;
                counts
            }
            MlOp::Logistic { coef, m, classes } | MlOp::LogisticNewton { coef, m, classes } => {
                let [x, y] = blocks[..] else { return Err(arity(self, 2, blocks.len())) };
                fits(self, x, coef, *m, 1)?;
                let y = class_numbers(y, classes)?;
                if y.len() != rows(x) {
                    return Err(ArrayError::Shape(format!(
                        "{}: a block of {} rows with {} labels",
                        self.name(),
                        rows(x),
                        y.len()
                    )));
                }
                let d = m * (cols(x) + 1);
                if matches!(self, MlOp::LogisticNewton { .. }) {
                    crate::memory::check((d as u64).saturating_mul(d as u64).saturating_mul(8), || {
                        format!("a Hessian of {d} × {d}")
                    })?;
                }
                with_rows(x, |x| {
                    let mut out = logistic_loss(x, &y, coef, *m);
                    if matches!(self, MlOp::LogisticNewton { .. }) {
                        out.extend(logistic_hessian(x, coef, *m));
                    }
                    out
                })?
            }
            MlOp::Decision { coef, m } => {
                let [x] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                fits(self, x, coef, *m, 1)?;
                let (z, n) = with_rows(x, |x| (scores(x, coef, *m), x.nrows()))?;
                let v: Vec<f64> =
                    (0..n).flat_map(|i| (0..*m).map(move |c| (i, c))).map(|(i, c)| z[(i, c)]).collect();
                let shape = if *m == 1 { vec![n] } else { vec![n, *m] };
                return Ok(Value::array(Chunk::from_vec(&shape, v)?));
            }
            MlOp::Proba { coef, m } => {
                let [x] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                fits(self, x, coef, *m, 1)?;
                let (v, n) = with_rows(x, |x| (probabilities(x, coef, *m), x.nrows()))?;
                return Ok(Value::array(Chunk::from_vec(&[n, (*m).max(2)], v)?));
            }
            MlOp::Predict { coef, m, classes, int } => {
                let [x] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                fits(self, x, coef, *m, 1)?;
                let k = (*m).max(2);
                let v = with_rows(x, |x| probabilities(x, coef, *m))?;
                let best: Vec<f64> = v
                    .chunks(k)
                    .map(|row| {
                        let j = (0..k).fold(0, |b, j| if row[j] > row[b] { j } else { b });
                        classes.get(j).copied().unwrap_or(f64::NAN)
                    })
                    .collect();
                let n = best.len();
                let c = if *int {
                    Chunk::from_vec(&[n], best.into_iter().map(|v| v as i64).collect())?
                } else {
                    Chunk::from_vec(&[n], best)?
                };
                return Ok(Value::array(c));
            }
            MlOp::Poisson { coef } => {
                let [x, y] = blocks[..] else { return Err(arity(self, 2, blocks.len())) };
                fits(self, x, coef, 1, 1)?;
                let y: Vec<f64> = y.cast::<f64>().iter().copied().collect();
                if y.len() != rows(x) {
                    return Err(ArrayError::Shape(format!(
                        "{}: a block of {} rows with {} targets",
                        self.name(),
                        rows(x),
                        y.len()
                    )));
                }
                with_rows(x, |x| poisson_loss(x, &y, coef))?
            }
            MlOp::PoissonPredict { coef } => {
                let [x] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                fits(self, x, coef, 1, 1)?;
                let (z, n) = with_rows(x, |x| (scores(x, coef, 1), x.nrows()))?;
                let v: Vec<f64> = (0..n).map(|i| z[(i, 0)].exp()).collect();
                return Ok(Value::array(Chunk::from_vec(&[n], v)?));
            }
            MlOp::PoissonDeviance { mean } => {
                let [y, mu] = blocks[..] else { return Err(arity(self, 2, blocks.len())) };
                if y.len() != mu.len() {
                    return Err(ArrayError::Shape(format!(
                        "{}: {} targets and {} predictions",
                        self.name(),
                        y.len(),
                        mu.len()
                    )));
                }
                let dev = |y: f64, m: f64| 2.0 * (if y > 0.0 { y * (y / m).ln() } else { 0.0 } - y + m);
                let (yv, mv) = (y.cast::<f64>(), mu.cast::<f64>());
                let mut out = vec![0.0, 0.0];
                for (a, b) in yv.iter().zip(mv.iter()) {
                    out[0] += dev(*a, *b);
                    out[1] += dev(*a, *mean);
                }
                out
            }
            MlOp::LogLoss { classes } => {
                let [y, p] = blocks[..] else { return Err(arity(self, 2, blocks.len())) };
                let y = class_numbers(y, classes)?;
                let k = classes.len();
                let eps = f64::EPSILON;
                let total = with_rows(p, |p| {
                    if p.ncols() != k || p.nrows() != y.len() {
                        return Err(ArrayError::Shape(format!(
                            "log_loss: y_prob has shape ({}, {}) for {} labels of {k} classes",
                            p.nrows(),
                            p.ncols(),
                            y.len()
                        )));
                    }
                    Ok(y.iter().enumerate().map(|(i, &c)| -p[[i, c]].clamp(eps, 1.0 - eps).ln()).sum::<f64>())
                })??;
                vec![total, y.len() as f64]
            }
            MlOp::MergeSum => merge(
                &blocks,
                |v| Ok(v.to_vec()),
                |a, b| {
                    if a.len() != b.len() {
                        return Err(ArrayError::Shape(format!(
                            "sums of {} and {} values cannot merge",
                            a.len(),
                            b.len()
                        )));
                    }
                    Ok(a.iter().zip(b).map(|(x, y)| x + y).collect())
                },
            )?,
        };
        Ok(Value::array(packed(out)))
    }
}

/// Each label's number among the sorted `classes`; a label not among them
/// is an error.
fn class_numbers(y: &Chunk, classes: &[f64]) -> Result<Vec<usize>, ArrayError> {
    y.cast::<f64>()
        .iter()
        .map(|&v| {
            classes.binary_search_by(|c| c.total_cmp(&v)).map_err(|_| {
                ArrayError::Value(format!("the label {v} is not one of the classes {classes:?}"))
            })
        })
        .collect()
}

impl MlOp {
    /// The rows a row-taking op (a split's part) keeps of a block of
    /// `n` rows, in order; `None` for every other op. Loop fusion reads a
    /// take this way instead of copying the rows out first.
    pub fn picked_rows(&self, n: usize) -> Option<Vec<usize>> {
        match self {
            MlOp::SplitRows { seed, block, n_test, shuffle, test } => {
                Some(super::kernels::chosen_rows(n, *n_test, *seed, *block, *shuffle, *test))
            }
            _ => None,
        }
    }
}

/// A block's rows and columns (a 1-d block is one column).
fn rows(c: &Chunk) -> usize {
    c.shape().first().copied().unwrap_or(0)
}

fn cols(c: &Chunk) -> usize {
    c.shape().get(1).copied().unwrap_or(1)
}

/// The model `values` (m rows of p + `extra` values: centres, or weights
/// and an intercept) fit the block's p features; checked before a kernel
/// slices them, so an op read from a peer cannot index past them.
fn fits(op: &MlOp, x: &Chunk, values: &[f64], m: usize, extra: usize) -> Result<(), ArrayError> {
    let want = m.checked_mul(cols(x) + extra);
    if m == 0 || want != Some(values.len()) {
        return Err(ArrayError::Shape(format!(
            "{}: {} model values for {m} rows of {} features",
            op.name(),
            values.len(),
            cols(x) + extra
        )));
    }
    Ok(())
}

fn arity(op: &MlOp, want: usize, got: usize) -> ArrayError {
    ArrayError::Value(format!("{} takes {want} block(s), got {got}", op.name()))
}

fn merge<S>(
    blocks: &[&Chunk],
    unpack: fn(&[f64]) -> Result<S, ArrayError>,
    with: fn(&S, &S) -> Result<S, ArrayError>,
) -> Result<S, ArrayError> {
    let mut it = blocks.iter();
    let first = it.next().ok_or_else(|| ArrayError::Value("nothing to merge".into()))?;
    let mut acc = unpack(&unpacked(first))?;
    for b in it {
        acc = with(&acc, &unpack(&unpacked(b))?)?;
    }
    Ok(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(rows: usize, cols: usize) -> Value {
        Value::array(Chunk::from_vec(&[rows, cols], vec![1.0; rows * cols]).expect("block"))
    }

    #[test]
    fn model_values_that_do_not_fit_the_block_are_refused() {
        let short = Arc::new(vec![0.0; 5]);
        for op in [
            MlOp::Lloyd { centers: short.clone(), k: 2 },
            MlOp::Labels { centers: short.clone(), k: 2 },
            MlOp::Distances { centers: short.clone(), k: 2 },
            MlOp::Decision { coef: short.clone(), m: 1 },
            MlOp::Proba { coef: short.clone(), m: 2 },
            MlOp::InitRound { new: short.clone(), first: 0, sample: None, seed: 0, round: 0, block: 0 },
        ] {
            let e = op.run(&[block(4, 2)]).expect_err("refused");
            assert!(e.to_string().contains(op.name()), "{e}");
        }
        let coef = Arc::new(vec![0.0; 3]);
        let op = MlOp::Logistic { coef, m: 1, classes: Arc::new(vec![1.0]) };
        let y = Value::array(Chunk::from_vec(&[3], vec![1.0; 3]).expect("y"));
        assert!(op.run(&[block(4, 2), y]).expect_err("3 labels for 4 rows").to_string().contains("4 rows"));
        let state = block(3, 2);
        let op =
            MlOp::InitRound { new: Arc::new(vec![]), first: 0, sample: None, seed: 0, round: 1, block: 0 };
        assert!(op.run(&[block(4, 2), state]).is_err(), "a state of another block's length");
        // Counts from a peer that would overflow a layout are refused, not a panic.
        let huge = MlOp::PlusPlus {
            winner: None,
            trials: Arc::new(vec![0.0; 2]),
            draws: usize::MAX,
            seed: 0,
            step: 0,
            block: 0,
        };
        assert!(huge.run(&[block(4, 2)]).is_err(), "usize::MAX draws");
        let parts = [Value::array(packed(vec![0.0; 4])), Value::array(packed(vec![0.0; 4]))];
        assert!(MlOp::MergePlusPlus { trials: 1, draws: usize::MAX }.run(&parts).is_err());
        let sums = [Value::array(packed(vec![1.0, 2.0])), Value::array(packed(vec![1.0]))];
        assert!(MlOp::MergeSum.run(&sums).is_err(), "sums of different lengths");
    }
}
