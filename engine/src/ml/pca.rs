//! `PCA` as scikit-learn's: `covariance_eigh` (one pass for the centred
//! cross-products, then a p × p eigendecomposition; what `"auto"` picks
//! for tall data, as scikit-learn ≥ 1.5 does), `tsqr` (the exact SVD of
//! the centred X by TSQR, one pass keeping no Q) or `randomized` (Halko's range
//! finder with power iterations, `svd_compressed`, on the centred X), and
//! `TruncatedSVD` (the same on X uncentred). Signs follow scikit-learn's
//! `svd_flip`: each component's largest entry is positive.

use faer::{Mat, Side};

use super::graph::{apply, constant, float_of, product, row_blocks, row_statistic};
use super::linear::co_moments;
use super::op::MlOp;
use super::stats::{Moments, QrMoments, unpacked};
use super::{MlError, Runner, check_finite, features_match, samples_features};
use crate::array::dtype::DType;
use crate::array::elementwise::BinOp;
use crate::collections::array::{Array, Ctx, svd_compressed};

#[derive(Clone, Debug, PartialEq)]
pub enum Solver {
    Auto,
    CovarianceEigh,
    Tsqr,
    Randomized,
}

impl Solver {
    pub fn parse(s: &str) -> Result<Solver, MlError> {
        Ok(match s {
            "auto" => Solver::Auto,
            "covariance_eigh" => Solver::CovarianceEigh,
            "tsqr" | "full" => Solver::Tsqr,
            "randomized" => Solver::Randomized,
            other => {
                return Err(MlError::Input(format!(
                    "PCA: svd_solver must be \"auto\", \"covariance_eigh\", \"tsqr\", \"full\" or \"randomized\", got \"{other}\""
                )));
            }
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Pca {
    pub n_components: Option<usize>,
    pub whiten: bool,
    pub solver: Solver,
    /// Power iterations of the randomized solver (`None`: scikit-learn's
    /// "auto", 7 when fewer components than a tenth of min(n, p), else 4).
    pub iterated_power: Option<usize>,
    pub seed: u64,
}

/// Extra columns of the randomized range finder (scikit-learn's
/// `n_oversamples`).
const OVERSAMPLES: usize = 10;

/// A fitted PCA (scikit-learn's attributes).
#[derive(Clone, Debug, PartialEq)]
pub struct PcaFit {
    /// k × p, row-major.
    pub components: Vec<f64>,
    pub explained_variance: Vec<f64>,
    pub explained_variance_ratio: Vec<f64>,
    pub singular_values: Vec<f64>,
    pub mean: Vec<f64>,
    pub noise_variance: f64,
    pub n_samples: usize,
    pub whiten: bool,
    pub n_passes: usize,
    /// The solver that ran.
    pub solver: &'static str,
}

impl Pca {
    pub fn fit(&self, ctx: &Ctx, x: &Array, runner: &dyn Runner) -> Result<PcaFit, MlError> {
        let (n, p) = samples_features(x)?;
        let most = n.min(p);
        let k = self.n_components.unwrap_or(most);
        if k == 0 || k > most {
            return Err(MlError::Input(format!(
                "PCA: n_components={k} must be between 1 and min(n_samples, n_features)={most}"
            )));
        }
        if n < 2 {
            return Err(MlError::Input("PCA: a fit needs at least 2 samples".into()));
        }
        let tall = p < 1000 && n >= 10 * p;
        // The variances found, largest first (all p, or min(n, p), but k
        // for the randomized solver); rows of `vectors`; the means; the
        // covariance's trace when not every variance was found (the total
        // scikit-learn's randomized solver takes).
        let (values, vectors, mean, trace, passes, solver) = match (&self.solver, tall) {
            (Solver::Tsqr, _) | (Solver::Auto, false) => {
                let Spectrum { values, vectors, mean } = tsqr(ctx, x, n, runner)?;
                (values, vectors, mean, None, 1, "tsqr")
            }
            (solver, _) => {
                let cm = co_moments(ctx, x, None, runner)?;
                check_finite("PCA", &cm.pack())?;
                let trace = (0..p).map(|j| cm.c[j * p + j]).sum::<f64>() / (n - 1) as f64;
                if matches!(solver, Solver::Randomized) {
                    let q = self.iterated_power.unwrap_or(if (k as f64) < 0.1 * most as f64 { 7 } else { 4 });
                    let rows = row_blocks(ctx, x)?;
                    let centred =
                        apply(ctx, BinOp::Sub, &rows, &constant(ctx, cm.mean.clone(), &[p], DType::F64)?)?;
                    let (s, vt) = compressed(ctx, &centred, k, q, self.seed, runner)?;
                    let values = s.iter().map(|v| v * v / (n - 1) as f64).collect();
                    // The co-moments, X·Ω, two per power iteration, Qᵀ·X.
                    (values, vt, cm.mean, Some(trace), 3 + 2 * q, "randomized")
                } else {
                    let (v, w) = covariance_eigh(&cm.c, p, n)?;
                    (v, w, cm.mean, None, 1, "covariance_eigh")
                }
            }
        };
        let total: f64 = match trace {
            Some(t) if values.len() < most => t,
            _ => values.iter().sum(),
        };
        let explained_variance = values[..k].to_vec();
        let noise_variance = if k < most {
            (total - explained_variance.iter().sum::<f64>()).max(0.0) / (most - k) as f64
        } else {
            0.0
        };
        let mut components = vectors[..k * p].to_vec();
        flip_rows(&mut components, p);
        Ok(PcaFit {
            components,
            explained_variance_ratio: explained_variance
                .iter()
                .map(|v| if total > 0.0 { v / total } else { 0.0 })
                .collect(),
            singular_values: explained_variance.iter().map(|v| (v * (n - 1) as f64).sqrt()).collect(),
            explained_variance,
            mean,
            noise_variance,
            n_samples: n,
            whiten: self.whiten,
            n_passes: passes,
            solver,
        })
    }
}

/// Eigenvalues of the covariance (largest first, negatives from rounding
/// made 0) and its eigenvectors as rows.
fn covariance_eigh(c: &[f64], p: usize, n: usize) -> Result<(Vec<f64>, Vec<f64>), MlError> {
    let m = Mat::from_fn(p, p, |i, j| c[i * p + j] / (n - 1) as f64);
    let e = m
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| MlError::Compute(format!("PCA: the eigendecomposition did not converge ({e:?})")))?;
    let (u, s) = (e.U(), e.S());
    let order: Vec<usize> = (0..p).rev().collect();
    let values = order.iter().map(|&i| s[i].max(0.0)).collect();
    let vectors = order.iter().flat_map(|&i| (0..p).map(move |r| u[(r, i)])).collect();
    Ok((values, vectors))
}

/// The count, means and R of X's centred rows, in one pass: each block's
/// `QrMoments` (no Q kept), merged in a tree.
fn r_factor(name: &str, x: &Array, ctx: &Ctx, runner: &dyn Runner) -> Result<QrMoments, MlError> {
    let rows = row_blocks(ctx, x)?;
    let p = if rows.ndim() == 1 { 1 } else { rows.shape()[1] };
    let stat = row_statistic(ctx, &rows, None, MlOp::QrMoments, MlOp::MergeQrMoments, 1 + p + p * p)?;
    let out = runner.compute(&[stat])?;
    let chunk = out.first().ok_or_else(|| MlError::Compute("the R factor was not computed".into()))?;
    let packed = unpacked(chunk);
    check_finite(name, &packed)?;
    Ok(QrMoments::unpack(&packed)?)
}

/// The singular values and right singular vectors (as columns) of a
/// p × p row-major `r`.
fn svd_of(name: &str, r: &[f64], p: usize) -> Result<(Vec<f64>, Mat<f64>), MlError> {
    let m = Mat::from_fn(p, p, |i, j| r[i * p + j]);
    let f = m
        .thin_svd()
        .map_err(|e| MlError::Compute(format!("{name}: the SVD of R did not converge ({e:?})")))?;
    let s = f.S().column_vector();
    Ok(((0..p).map(|i| s[i]).collect(), f.V().to_owned()))
}

/// The SVD of the centred X by TSQR in one pass (`r_factor`), then of
/// the last p × p R. Variances s²/(n − 1), Vᵀ's rows and the means.
fn tsqr(ctx: &Ctx, x: &Array, n: usize, runner: &dyn Runner) -> Result<Spectrum, MlError> {
    let qr = r_factor("PCA", x, ctx, runner)?;
    let p = qr.mean.len();
    let (s, v) = svd_of("PCA", &qr.r, p)?;
    let v = &v;
    let values = s.iter().map(|s| s * s / (n - 1) as f64).collect();
    let vectors = (0..p).flat_map(|i| (0..p).map(move |c| v[(c, i)])).collect();
    Ok(Spectrum { values, vectors, mean: qr.mean })
}

/// Variances (largest first), the directions as rows, and the means.
struct Spectrum {
    values: Vec<f64>,
    vectors: Vec<f64>,
    mean: Vec<f64>,
}

impl PcaFit {
    /// `(x − mean) @ componentsᵀ`, divided by √explained_variance when whitening.
    pub fn transform(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        let p = features_match("PCA", x, self.mean.len())?;
        let k = self.explained_variance.len();
        let dt = float_of(x);
        let centred = apply(ctx, BinOp::Sub, x, &constant(ctx, self.mean.clone(), &[p], dt)?)?;
        let mut w: Vec<f64> = (0..p * k).map(|i| self.components[(i % k) * p + i / k]).collect();
        if self.whiten {
            for (i, v) in w.iter_mut().enumerate() {
                *v /= self.explained_variance[i % k].sqrt();
            }
        }
        Ok(product(ctx, &centred, &constant(ctx, w, &[p, k], dt)?)?)
    }

    /// Back to X's space: `z @ components + mean` (whitening undone).
    pub fn inverse_transform(&self, ctx: &Ctx, z: &Array) -> Result<Array, MlError> {
        let k = self.explained_variance.len();
        let p = self.mean.len();
        features_match("PCA.inverse_transform", z, k)?;
        let dt = float_of(z);
        let mut w = self.components.clone();
        if self.whiten {
            for (i, v) in w.iter_mut().enumerate() {
                *v *= self.explained_variance[i / p].sqrt();
            }
        }
        let back = product(ctx, z, &constant(ctx, w, &[k, p], dt)?)?;
        Ok(apply(ctx, BinOp::Add, &back, &constant(ctx, self.mean.clone(), &[p], dt)?)?)
    }
}

/// The k leading singular values and right singular vectors (as rows; the
/// caller turns their signs) of `x` by the randomized range finder, `q`
/// power iterations.
fn compressed(
    ctx: &Ctx,
    x: &Array,
    k: usize,
    q: usize,
    seed: u64,
    runner: &dyn Runner,
) -> Result<(Vec<f64>, Vec<f64>), MlError> {
    let (_, s, vt) = svd_compressed(ctx, x, k, seed, OVERSAMPLES, q)?;
    let out = runner.compute(&[s, vt])?;
    let [s, vt] = &out[..] else { return Err(MlError::Compute("the SVD was not computed".into())) };
    Ok((s.cast::<f64>().iter().copied().collect(), vt.cast::<f64>().iter().copied().collect()))
}

/// Each row of `v` (rows of `p`) turned so its largest entry is positive.
fn flip_rows(v: &mut [f64], p: usize) {
    for row in v.chunks_mut(p.max(1)) {
        let big = row.iter().copied().fold(0.0f64, |m, x| if x.abs() > m.abs() { x } else { m });
        if big < 0.0 {
            row.iter_mut().for_each(|x| *x = -*x);
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum SvdAlgorithm {
    Randomized,
    Tsqr,
}

/// `TruncatedSVD` as scikit-learn's: the k leading singular triplets of X
/// itself (not centred), by the randomized range finder (`n_iter` power
/// iterations, 10 extra columns) or TSQR's exact SVD.
#[derive(Clone, Debug, PartialEq)]
pub struct TruncatedSvd {
    pub n_components: usize,
    pub algorithm: SvdAlgorithm,
    pub n_iter: usize,
    pub seed: u64,
}

/// A fitted TruncatedSVD (scikit-learn's attributes).
#[derive(Clone, Debug, PartialEq)]
pub struct TruncatedSvdFit {
    /// k × p, row-major.
    pub components: Vec<f64>,
    pub singular_values: Vec<f64>,
    /// The variances of X·componentsᵀ's columns, and their share of X's.
    pub explained_variance: Vec<f64>,
    pub explained_variance_ratio: Vec<f64>,
    pub p: usize,
    pub n_passes: usize,
}

impl TruncatedSvd {
    pub fn fit(&self, ctx: &Ctx, x: &Array, runner: &dyn Runner) -> Result<TruncatedSvdFit, MlError> {
        let (n, p) = samples_features(x)?;
        let k = self.n_components;
        if k == 0 || k > n.min(p) {
            return Err(MlError::Input(format!(
                "TruncatedSVD: n_components={k} must be between 1 and min(n_samples, n_features)={}",
                n.min(p)
            )));
        }
        let rows = row_blocks(ctx, x)?;
        let (s, mut vt, passes) = match self.algorithm {
            SvdAlgorithm::Randomized => {
                let (s, vt) = compressed(ctx, &rows, k, self.n_iter, self.seed, runner)?;
                (s, vt, 2 + 2 * self.n_iter)
            }
            SvdAlgorithm::Tsqr => return self.fit_tsqr(ctx, &rows, k, runner),
        };
        check_finite("TruncatedSVD", &s)?;
        flip_rows(&mut vt, p);
        // One more pass: the variances of X's columns and of X·Vᵀ's.
        let z = product(ctx, &rows, &constant(ctx, transposed(&vt, k, p), &[p, k], DType::F64)?)?;
        let of_x = row_statistic(ctx, &rows, None, MlOp::Moments, MlOp::MergeMoments, 5 * p)?;
        let of_z = row_statistic(ctx, &z, None, MlOp::Moments, MlOp::MergeMoments, 5 * k)?;
        let out = runner.compute(&[of_x, of_z])?;
        let var = |c: &crate::array::chunk::Chunk| -> Result<Vec<f64>, MlError> {
            let m = Moments::unpack(&unpacked(c)).map_err(|e| MlError::Compute(e.to_string()))?;
            Ok(m.m2.iter().zip(&m.n).map(|(s, n)| if *n > 0.0 { s / n } else { 0.0 }).collect())
        };
        let total: f64 = var(&out[0])?.iter().sum();
        Ok(TruncatedSvdFit::new(vt, s, var(&out[1])?, total, passes + 1))
    }
}

impl TruncatedSvd {
    /// TSQR's exact SVD of X in one pass. The centred R gives X's: XᵀX is
    /// RᵀR + n·μμᵀ, the products of `[R; √n·μ]`, whose R is factored
    /// again. The variances come from the centred products, without a
    /// pass: X's columns' from RᵀR's diagonal, X·v's as ‖R·v‖²/n.
    fn fit_tsqr(
        &self,
        ctx: &Ctx,
        rows: &Array,
        k: usize,
        runner: &dyn Runner,
    ) -> Result<TruncatedSvdFit, MlError> {
        let qr = r_factor("TruncatedSVD", rows, ctx, runner)?;
        let p = qr.mean.len();
        let (s, v) = svd_of("TruncatedSVD", &qr.uncentred_r(), p)?;
        let v = &v;
        let mut vt: Vec<f64> = (0..k).flat_map(|i| (0..p).map(move |c| v[(c, i)])).collect();
        flip_rows(&mut vt, p);
        let nf = qr.n;
        let total: f64 =
            (0..p).map(|j| (0..=j).map(|i| qr.r[i * p + j].powi(2)).sum::<f64>()).sum::<f64>() / nf;
        let explained_variance: Vec<f64> = vt
            .chunks(p)
            .map(|v| {
                (0..p).map(|i| (i..p).map(|j| qr.r[i * p + j] * v[j]).sum::<f64>().powi(2)).sum::<f64>() / nf
            })
            .collect();
        Ok(TruncatedSvdFit::new(vt, s[..k].to_vec(), explained_variance, total, 1))
    }
}

/// A k × p row-major matrix as p × k.
fn transposed(v: &[f64], k: usize, p: usize) -> Vec<f64> {
    (0..p * k).map(|i| v[(i % k) * p + i / k]).collect()
}

impl TruncatedSvdFit {
    /// From the components (k rows), their singular values and variances,
    /// and X's total variance.
    fn new(
        components: Vec<f64>,
        singular_values: Vec<f64>,
        explained_variance: Vec<f64>,
        total: f64,
        n_passes: usize,
    ) -> TruncatedSvdFit {
        let p = components.len() / explained_variance.len().max(1);
        TruncatedSvdFit {
            explained_variance_ratio: explained_variance
                .iter()
                .map(|v| if total > 0.0 { v / total } else { 0.0 })
                .collect(),
            explained_variance,
            components,
            singular_values,
            p,
            n_passes,
        }
    }

    /// `x @ componentsᵀ`.
    pub fn transform(&self, ctx: &Ctx, x: &Array) -> Result<Array, MlError> {
        let p = features_match("TruncatedSVD", x, self.p)?;
        let k = self.singular_values.len();
        Ok(product(ctx, x, &constant(ctx, transposed(&self.components, k, p), &[p, k], float_of(x))?)?)
    }

    /// `z @ components`.
    pub fn inverse_transform(&self, ctx: &Ctx, z: &Array) -> Result<Array, MlError> {
        let k = self.singular_values.len();
        features_match("TruncatedSVD.inverse_transform", z, k)?;
        Ok(product(ctx, z, &constant(ctx, self.components.clone(), &[k, self.p], float_of(z))?)?)
    }
}
