//! `LogisticRegression` as scikit-learn's `lbfgs` solver fits it: binary
//! (the logistic loss) or multinomial (softmax) for more classes, an L2
//! penalty ½‖w‖²/C that leaves the intercepts out, and the objective as a
//! mean over samples. Each evaluation of the loss and its gradient is one
//! pass over X (`kernels::logistic_loss` per block, summed in a tree); the
//! L-BFGS steps run on the driver with (m × (p + 1)) numbers.

use std::collections::VecDeque;
use std::sync::Arc;

use super::graph::{map_row_blocks, row_blocks, row_statistic, rows_like};
use super::op::MlOp;
use super::stats::unpacked;
use super::{MlError, Runner, features_match, samples_features};
use crate::array::dtype::DType;
use crate::collections::array::{Array, Ctx, unique};

#[derive(Clone, Debug, PartialEq)]
pub struct Logistic {
    /// The L2 penalty's strength is 1/C; `None`: no penalty.
    pub c: Option<f64>,
    pub fit_intercept: bool,
    pub max_iter: usize,
    pub tol: f64,
    pub solver: LogisticSolver,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogisticSolver {
    Lbfgs,
    /// scikit-learn's `newton-cholesky`: each pass also sums the Hessian
    /// (d² numbers, d = classes' rows × (features + 1)), so it suits few
    /// features, and converges in a handful of passes.
    Newton,
}

/// A fitted logistic regression.
#[derive(Clone, Debug, PartialEq)]
pub struct LogisticFit {
    /// m × (p + 1): each row's weights then its intercept; m = 1 for two classes.
    pub coef: Vec<f64>,
    pub m: usize,
    pub p: usize,
    pub classes: Vec<f64>,
    /// The labels were integers: predictions are too.
    pub int_labels: bool,
    pub n_iter: usize,
    pub n_passes: usize,
    /// The objective at the solution (mean loss plus penalty).
    pub objective: f64,
}

impl Logistic {
    pub fn fit(&self, ctx: &Ctx, x: &Array, y: &Array, runner: &dyn Runner) -> Result<LogisticFit, MlError> {
        let (n, p) = samples_features(x)?;
        if let Some(c) = self.c
            && !(c > 0.0 && c.is_finite())
        {
            return Err(MlError::Input(format!("LogisticRegression: C must be a positive number, got {c}")));
        }
        if !(self.tol > 0.0 && self.tol.is_finite()) {
            return Err(MlError::Input(format!(
                "LogisticRegression: tol must be positive, got {}",
                self.tol
            )));
        }
        let rows = row_blocks(ctx, x)?;
        let y = rows_like(ctx, y, &rows)?;
        let classes: Vec<f64> =
            runner.compute(&[unique(ctx, &y)?])?[0].cast::<f64>().iter().copied().collect();
        if classes.iter().any(|c| !c.is_finite()) {
            return Err(MlError::Input("LogisticRegression: y contains NaN or infinity".into()));
        }
        // As scikit-learn's `type_of_target`: fractional labels are a
        // regression's target, not classes (and would make one class each).
        if let Some(c) = classes.iter().find(|c| c.fract() != 0.0) {
            return Err(MlError::Input(format!(
                "LogisticRegression: unknown label type: continuous (y holds {c}); it needs class labels"
            )));
        }
        if classes.len() < 2 {
            return Err(MlError::Input(format!(
                "LogisticRegression needs samples of at least 2 classes in the data, but the data contains only one class: {}",
                classes.first().copied().unwrap_or(f64::NAN)
            )));
        }
        let m = if classes.len() == 2 { 1 } else { classes.len() };
        let d = m * (p + 1);
        let shared = Arc::new(classes.clone());
        let mut passes = 0;
        let penalty = self.c.map_or(0.0, |c| 1.0 / (c * n as f64));
        let fit_intercept = self.fit_intercept;
        let newton = self.solver == LogisticSolver::Newton;
        // The objective (mean loss plus penalty), its gradient, and with
        // the Newton solver its Hessian (else empty), in one pass.
        let mut evaluate = |w: &[f64]| -> Result<(f64, Vec<f64>, Vec<f64>), MlError> {
            let (coef, classes) = (Arc::new(w.to_vec()), shared.clone());
            let (op, len) = if newton {
                (MlOp::LogisticNewton { coef, m, classes }, 1 + d + d * d)
            } else {
                (MlOp::Logistic { coef, m, classes }, 1 + d)
            };
            let stat = row_statistic(ctx, &rows, Some(&y), op, MlOp::MergeSum, len)?;
            let v = unpacked(&runner.compute(&[stat])?[0]);
            if v.len() != len {
                return Err(MlError::Compute(format!(
                    "a loss and gradient of {} values, not {len}",
                    v.len()
                )));
            }
            passes += 1;
            let mut f = v[0] / n as f64;
            let mut g: Vec<f64> = v[1..1 + d].iter().map(|x| x / n as f64).collect();
            let mut h: Vec<f64> = v[1 + d..].iter().map(|x| x / n as f64).collect();
            for c in 0..m {
                for j in 0..p {
                    let k = c * (p + 1) + j;
                    f += 0.5 * penalty * w[k] * w[k];
                    g[k] += penalty * w[k];
                    if newton {
                        h[k * d + k] += penalty;
                    }
                }
                if !fit_intercept {
                    // The intercept stays at 0: no gradient, and a Hessian
                    // that leaves it alone.
                    let b = c * (p + 1) + p;
                    g[b] = 0.0;
                    if newton {
                        for i in 0..d {
                            h[b * d + i] = 0.0;
                            h[i * d + b] = 0.0;
                        }
                        h[b * d + b] = 1.0;
                    }
                }
            }
            if !f.is_finite() || g.iter().chain(&h).any(|x| !x.is_finite()) {
                return Err(MlError::Input("LogisticRegression: X contains NaN or infinity".into()));
            }
            Ok((f, g, h))
        };
        let (coef, n_iter, f) = if newton {
            let (mut coef, n_iter, f) = newton_cholesky(&mut evaluate, d, self.max_iter, self.tol)?;
            // The softmax is the same when a vector is added to every
            // class's row, and the unpenalised intercepts have no say in
            // it: of those equal models, scikit-learn's (whose L-BFGS from 0
            // never leaves them) sums to 0 over the classes.
            if m > 1 {
                for j in 0..=p {
                    let mean = (0..m).map(|c| coef[c * (p + 1) + j]).sum::<f64>() / m as f64;
                    (0..m).for_each(|c| coef[c * (p + 1) + j] -= mean);
                }
            }
            (coef, n_iter, f)
        } else {
            let mut objective = |w: &[f64]| evaluate(w).map(|(f, g, _)| (f, g));
            lbfgs(&mut objective, vec![0.0; d], self.max_iter, self.tol)?
        };
        Ok(LogisticFit {
            coef,
            m,
            p,
            classes,
            int_labels: matches!(y.dtype, DType::I64 | DType::Bool),
            n_iter,
            n_passes: passes,
            objective: f,
        })
    }
}

impl LogisticFit {
    /// The weights without the intercepts, m × p.
    pub fn weights(&self) -> Vec<f64> {
        self.coef.chunks(self.p + 1).flat_map(|r| r[..self.p].to_vec()).collect()
    }

    pub fn intercepts(&self) -> Vec<f64> {
        self.coef.chunks(self.p + 1).map(|r| r[self.p]).collect()
    }

    fn shared(&self) -> Arc<Vec<f64>> {
        Arc::new(self.coef.clone())
    }

    pub fn decision_function(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        features_match("LogisticRegression", x, self.p)?;
        let cols = (self.m > 1).then_some(self.m);
        Ok(map_row_blocks(ctx, x, MlOp::Decision { coef: self.shared(), m: self.m }, cols, DType::F64)?)
    }

    pub fn predict_proba(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        features_match("LogisticRegression", x, self.p)?;
        let op = MlOp::Proba { coef: self.shared(), m: self.m };
        Ok(map_row_blocks(ctx, x, op, Some(self.classes.len()), DType::F64)?)
    }

    pub fn predict(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        features_match("LogisticRegression", x, self.p)?;
        let op = MlOp::Predict {
            coef: self.shared(),
            m: self.m,
            classes: Arc::new(self.classes.clone()),
            int: self.int_labels,
        };
        let dtype = if self.int_labels { DType::I64 } else { DType::F64 };
        Ok(map_row_blocks(ctx, x, op, None, dtype)?)
    }
}

/// `log_loss(y_true, y_prob)`: the mean of −log p(true class), the
/// probabilities clipped to [ε, 1 − ε]; the classes are y_true's.
pub fn log_loss(ctx: &Ctx, y: &Array, prob: &Array, runner: &dyn Runner) -> Result<f64, MlError> {
    let ps = prob.shape();
    if y.ndim() != 1 || ps.len() != 2 || ps[0] != y.shape()[0] {
        return Err(MlError::Input(format!(
            "log_loss: y_true must be 1-d and y_prob (samples × classes) as long, got shapes {:?} and {ps:?}",
            y.shape()
        )));
    }
    let classes: Vec<f64> = runner.compute(&[unique(ctx, y)?])?[0].cast::<f64>().iter().copied().collect();
    if classes.len() != ps[1] {
        return Err(MlError::Input(format!(
            "log_loss: y_true has {} classes but y_prob has {} columns",
            classes.len(),
            ps[1]
        )));
    }
    let rows = row_blocks(ctx, prob)?;
    let y = rows_like(ctx, y, &rows)?;
    // The labels' blocks are the statistic's first argument, the
    // probabilities' (cut alike) its second.
    let op = MlOp::LogLoss { classes: Arc::new(classes) };
    let stat = row_statistic(ctx, &y, Some(&rows), op, MlOp::MergeSum, 2)?;
    let v = unpacked(&runner.compute(&[stat])?[0]);
    Ok(v[0] / v[1])
}

/// Newton's method with a backtracking (Armijo) line search, as
/// scikit-learn's `newton-cholesky` solver: from 0, each iteration solves
/// H·s = −g (Cholesky, or the minimum-norm solution where H is singular,
/// as a multinomial model's unpenalised intercepts make it), halving the
/// step until the objective falls enough; it stops when the gradient's
/// largest entry and the Newton decrement ½·sᵀHs are within `tol`. Each
/// evaluation is one pass; returns the point, the iterations and the
/// objective.
fn newton_cholesky(
    evaluate: &mut SecondOrder<'_>,
    d: usize,
    max_iter: usize,
    tol: f64,
) -> Result<(Vec<f64>, usize, f64), MlError> {
    let mut w = vec![0.0; d];
    let (mut f, mut g, mut h) = evaluate(&w)?;
    let mut iters = 0;
    while iters < max_iter {
        let minus_g: Vec<f64> = g.iter().map(|v| -v).collect();
        let step = super::linear::solve_symmetric(&h, &minus_g, d)?;
        let hs: Vec<f64> = (0..d).map(|i| (0..d).map(|j| h[i * d + j] * step[j]).sum()).collect();
        let decrement = 0.5 * step.iter().zip(&hs).map(|(a, b)| a * b).sum::<f64>();
        let largest = g.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        if largest <= tol && decrement <= tol {
            break;
        }
        iters += 1;
        let slope: f64 = g.iter().zip(&step).map(|(a, b)| a * b).sum();
        let mut t = 1.0;
        let mut moved = false;
        for _ in 0..30 {
            let next: Vec<f64> = w.iter().zip(&step).map(|(a, b)| a + t * b).collect();
            let (fn_, gn, hn) = evaluate(&next)?;
            if fn_ <= f + 1e-4 * t * slope {
                (w, f, g, h) = (next, fn_, gn, hn);
                moved = true;
                break;
            }
            t *= 0.5;
        }
        // No step lowers the objective: it is at its minimum to rounding.
        if !moved {
            break;
        }
    }
    Ok((w, iters, f))
}

/// An objective with its Hessian: value, gradient and d × d Hessian.
pub type SecondOrder<'a> = dyn FnMut(&[f64]) -> Result<(f64, Vec<f64>, Vec<f64>), MlError> + 'a;

/// An objective to minimise: its value and gradient at a point.
pub type Objective<'a> = dyn FnMut(&[f64]) -> Result<(f64, Vec<f64>), MlError> + 'a;

/// Limited-memory BFGS (Nocedal & Wright, algorithm 7.5) with a line
/// search for the strong Wolfe conditions (algorithms 3.5 and 3.6), as
/// scipy's L-BFGS-B runs for scikit-learn: 10 pairs kept, stopping when
/// the gradient's largest entry is within `gtol` or the objective stops
/// falling (relative change ≤ 64 ε). Returns the point, the iterations and
/// the objective there.
pub fn lbfgs(
    f: &mut Objective<'_>,
    x0: Vec<f64>,
    max_iter: usize,
    gtol: f64,
) -> Result<(Vec<f64>, usize, f64), MlError> {
    const PAIRS: usize = 10;
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let inf_norm = |g: &[f64]| g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut x = x0;
    let (mut fx, mut g) = f(&x)?;
    let mut pairs: VecDeque<(Vec<f64>, Vec<f64>, f64)> = VecDeque::new();
    let mut iters = 0;
    while iters < max_iter && inf_norm(&g) > gtol {
        // The two-loop recursion: d = −H g.
        let mut q: Vec<f64> = g.clone();
        let mut alphas = Vec::with_capacity(pairs.len());
        for (s, y, rho) in pairs.iter().rev() {
            let a = rho * dot(s, &q);
            q.iter_mut().zip(y).for_each(|(qi, yi)| *qi -= a * yi);
            alphas.push(a);
        }
        if let Some((s, y, _)) = pairs.back() {
            let gamma = dot(s, y) / dot(y, y);
            q.iter_mut().for_each(|v| *v *= gamma);
        }
        for ((s, y, rho), a) in pairs.iter().zip(alphas.iter().rev()) {
            let b = rho * dot(y, &q);
            q.iter_mut().zip(s).for_each(|(qi, si)| *qi += (a - b) * si);
        }
        let mut d: Vec<f64> = q.iter().map(|v| -v).collect();
        if dot(&d, &g) >= 0.0 {
            // Not a descent direction (lost curvature): start again from −g.
            pairs.clear();
            d = g.iter().map(|v| -v).collect();
        }
        let first = if pairs.is_empty() { 1.0 / dot(&d, &d).sqrt().max(1.0) } else { 1.0 };
        let (step, f_new, g_new) = wolfe(f, &x, fx, &g, &d, first)?;
        let s: Vec<f64> = d.iter().map(|v| v * step).collect();
        let y: Vec<f64> = g_new.iter().zip(&g).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        if sy > 1e-10 * dot(&y, &y).sqrt() * dot(&s, &s).sqrt() {
            pairs.push_back((s.clone(), y, 1.0 / sy));
            if pairs.len() > PAIRS {
                pairs.pop_front();
            }
        }
        x.iter_mut().zip(&s).for_each(|(xi, si)| *xi += si);
        let fell = (fx - f_new) / fx.abs().max(f_new.abs()).max(1.0);
        fx = f_new;
        g = g_new;
        iters += 1;
        if fell <= 64.0 * f64::EPSILON {
            break;
        }
    }
    Ok((x, iters, fx))
}

/// The objective, its slope along the search direction and its gradient.
type Eval = (f64, f64, Vec<f64>);

const C1: f64 = 1e-4;
const C2: f64 = 0.9;

/// A step along `d` meeting the strong Wolfe conditions (c₁ = 1e-4,
/// c₂ = 0.9; Nocedal & Wright, algorithm 3.5): `first` is tried, then
/// doubled until the minimum is bracketed, then the bracket is zoomed.
/// Where no step lowers the objective, the step is 0.
fn wolfe(
    f: &mut Objective<'_>,
    x: &[f64],
    f0: f64,
    g0: &[f64],
    d: &[f64],
    first: f64,
) -> Result<(f64, f64, Vec<f64>), MlError> {
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let slope0 = dot(g0, d);
    let mut at = |a: f64| -> Result<Eval, MlError> {
        let xa: Vec<f64> = x.iter().zip(d).map(|(xi, di)| xi + a * di).collect();
        let (fa, ga) = f(&xa)?;
        Ok((fa, dot(&ga, d), ga))
    };
    let zero = (0.0, (f0, slope0, g0.to_vec()));
    let mut prev = zero.clone();
    let mut a = first;
    for i in 0..20 {
        let e = at(a)?;
        if e.0 > f0 + C1 * a * slope0 || (i > 0 && e.0 >= prev.1.0) {
            return zoom(&mut at, f0, slope0, prev, (a, e));
        }
        if e.1.abs() <= -C2 * slope0 {
            return Ok((a, e.0, e.2));
        }
        if e.1 >= 0.0 {
            return zoom(&mut at, f0, slope0, (a, e), prev);
        }
        prev = (a, e);
        a *= 2.0;
    }
    Ok((prev.0, prev.1.0, prev.1.2))
}

/// Nocedal & Wright's algorithm 3.6 between `lo` (the lower objective,
/// meeting the sufficient decrease) and `hi`, trying the minimum of the
/// cubic through both ends, kept inside the bracket.
fn zoom(
    at: &mut dyn FnMut(f64) -> Result<Eval, MlError>,
    f0: f64,
    slope0: f64,
    mut lo: (f64, Eval),
    mut hi: (f64, Eval),
) -> Result<(f64, f64, Vec<f64>), MlError> {
    for _ in 0..30 {
        let (a0, a1) = (lo.0, hi.0);
        let width = (a1 - a0).abs();
        if width <= 1e-14 * a0.abs().max(a1.abs()).max(1e-300) {
            break;
        }
        let (f_lo, s_lo) = (lo.1.0, lo.1.1);
        let (f_hi, s_hi) = (hi.1.0, hi.1.1);
        let d1 = s_lo + s_hi - 3.0 * (f_lo - f_hi) / (a0 - a1);
        let d2 = (a1 - a0).signum() * (d1 * d1 - s_lo * s_hi).sqrt();
        let cubic = a1 - (a1 - a0) * (s_hi + d2 - d1) / (s_hi - s_lo + 2.0 * d2);
        let (l, h) = (a0.min(a1), a0.max(a1));
        let a = if cubic.is_finite() && cubic > l + 0.1 * width && cubic < h - 0.1 * width {
            cubic
        } else {
            0.5 * (l + h)
        };
        let e = at(a)?;
        if e.0 > f0 + C1 * a * slope0 || e.0 >= f_lo {
            hi = (a, e);
        } else {
            if e.1.abs() <= -C2 * slope0 {
                return Ok((a, e.0, e.2));
            }
            if e.1 * (a1 - a0) >= 0.0 {
                hi = lo;
            }
            lo = (a, e);
        }
    }
    Ok((lo.0, lo.1.0, lo.1.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lbfgs_finds_the_minimum_of_a_quadratic_and_of_rosenbrock() {
        let mut quad = |x: &[f64]| -> Result<(f64, Vec<f64>), MlError> {
            let f = (x[0] - 3.0).powi(2) + 10.0 * (x[1] + 1.0).powi(2);
            Ok((f, vec![2.0 * (x[0] - 3.0), 20.0 * (x[1] + 1.0)]))
        };
        let (x, _, f) = lbfgs(&mut quad, vec![0.0, 0.0], 100, 1e-10).expect("quadratic");
        assert!((x[0] - 3.0).abs() < 1e-8 && (x[1] + 1.0).abs() < 1e-8 && f < 1e-15, "{x:?}");
        let mut rosen = |x: &[f64]| -> Result<(f64, Vec<f64>), MlError> {
            let (a, b) = (x[0], x[1]);
            let f = (1.0 - a).powi(2) + 100.0 * (b - a * a).powi(2);
            Ok((f, vec![-2.0 * (1.0 - a) - 400.0 * a * (b - a * a), 200.0 * (b - a * a)]))
        };
        let (x, iters, _) = lbfgs(&mut rosen, vec![-1.2, 1.0], 500, 1e-8).expect("rosenbrock");
        assert!((x[0] - 1.0).abs() < 1e-6 && (x[1] - 1.0).abs() < 1e-6, "{x:?} after {iters}");
    }
}
