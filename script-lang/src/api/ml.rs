//! Estimators with dask-ml's (scikit-learn's) names: `StandardScaler`,
//! `MinMaxScaler`, `OneHotEncoder`, `LinearRegression`, `Ridge`, `PCA`,
//! `KMeans`, `LogisticRegression`, with
//! `train_test_split` and the metrics. An estimator is a value of its own:
//! `m.fit(X[, y])` runs now and returns the fitted model, `predict` and
//! `transform` give lazy arrays, fitted attributes read by scikit-learn's
//! names (`m.coef_`), and `to_json(m)` writes them all.

use std::sync::Arc;

use brisk_engine::array::Chunk;
use brisk_engine::collections::array::{self as arr, Array};
use brisk_engine::collections::frame::DataFrame;
use brisk_engine::collections::frame::to_array;
use brisk_engine::ml::kmeans::{Init, KMeans, KMeansFit};
use brisk_engine::ml::linear::{Linear, LinearFit};
use brisk_engine::ml::logistic::{Logistic, LogisticFit, LogisticSolver};
use brisk_engine::ml::onehot::{Drop, OneHotEncoder, OneHotFit};
use brisk_engine::ml::pca::{Pca, PcaFit, Solver, SvdAlgorithm, TruncatedSvd, TruncatedSvdFit};
use brisk_engine::ml::poisson::{Poisson, PoissonFit};
use brisk_engine::ml::scaler::{MinMaxFit, MinMaxScaler, StandardFit, StandardScaler};
use brisk_engine::ml::split::TestSize;
use brisk_engine::ml::{MlError, Runner, metrics};
use brisk_engine::value::Value;
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, Map};

use super::args::{ctx, wrong_type};
use super::array_args::{Opts, err, int_of, whole};
use super::fndoc::{FnDoc, doc};
use crate::convert::to_dynamic;
use crate::error::runtime;
use crate::state::SessionState;
use crate::types::{LazyArray, LazyFrame, LazySeries};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// A documentation example with a small X and y to fit.
macro_rules! fitted {
    ($e:literal) => {
        concat!("let X = random([40, 3], #{chunks: [20, 3], seed: 1});\nlet y = X.sum(1);\n", $e)
    };
}

pub const DOCS: &[FnDoc] = &[
    doc(
        "StandardScaler",
        "StandardScaler(#{with_mean: true, with_std: true}) -> Estimator",
        "Standardize features, as scikit-learn's (and dask-ml's) StandardScaler: fit reads X once for each column's mean and variance (NaN skipped); transform gives (X - mean_) / scale_ as a lazy array. Attributes mean_, var_, scale_ (a constant feature's is 1), n_samples_seen_.",
        "let X = random([1000, 3], #{chunks: [250, 3]}) * 10.0 + 5.0;\nlet s = StandardScaler().fit(X);\ns.transform(X).mean(0).compute()",
    ),
    doc(
        "MinMaxScaler",
        "MinMaxScaler(#{feature_range: [0, 1]}) -> Estimator",
        "Scale each feature to feature_range, as scikit-learn's MinMaxScaler: fit reads X once for each column's min and max (NaN skipped); transform gives X * scale_ + min_. Attributes data_min_, data_max_, data_range_, scale_, min_.",
        "let X = random([1000, 2], #{chunks: [300, 2]});\nMinMaxScaler(#{feature_range: [-1, 1]}).fit(X).transform(X).max(0).compute()",
    ),
    doc(
        "OneHotEncoder",
        "OneHotEncoder(#{categories: \"auto\", handle_unknown: \"error\", drop: ()}) -> Estimator",
        "Encode each numeric feature as one 0/1 column per category, as scikit-learn's OneHotEncoder: fit reads X once for each column's distinct values (sorted; NaN is a category of its own), or takes categories given as one sorted list per feature (a Rhai array of arrays or a 2-d array); transform gives the dense f64 columns, feature by feature, as a lazy array chunked like X's rows (scikit-learn and dask-ml default to sparse output; brisk arrays are dense). handle_unknown \"ignore\" gives an unknown value a row of zeros where \"error\" fails the transform; drop \"first\" or \"if_binary\" leaves out a feature's first category (for every feature, or for those with two). Attributes categories_, drop_idx_.",
        "let X = from_array([[1, 10], [2, 10], [1, 30]]);\nOneHotEncoder().fit(X).transform(X).compute()",
    ),
    doc(
        "to_dask_array",
        "df.to_dask_array() -> Array",
        "A DataFrame's columns as a 2-d array (a Series as a 1-d one), one row block per partition, as Dask's to_dask_array(lengths=True): the partitions' lengths are computed first, so the chunks are known. Number and bool columns only (all bool stays bool, integers and bools become int64, any float makes float64; a missing value is NaN in float64 and an error otherwise). Estimators take DataFrames and Series as X and y this way.",
        "let df = from_columns(#{a: [1.0, 2.0, 3.0], b: [4, 5, 6]}, #{npartitions: 2});\ndf.to_dask_array().compute()",
    ),
    doc(
        "LinearRegression",
        "LinearRegression(#{fit_intercept: true}) -> Estimator",
        "Ordinary least squares, as scikit-learn's LinearRegression (dask-ml's default solver, admm, is iterative; this one is exact): fit reads X and y once, for the centred cross-products, and solves the normal equations (the minimum-norm solution when X's columns are dependent). predict is lazy, score is R². Attributes coef_, intercept_, n_passes_.",
        "let X = random([1000, 3], #{chunks: [250, 3]});\nlet y = X.dot(from_array([1.0, -2.0, 0.5])) + 3.0;\nLinearRegression().fit(X, y).coef_",
    ),
    doc(
        "Ridge",
        "Ridge(#{alpha: 1.0, fit_intercept: true}) -> Estimator",
        "Least squares with an L2 penalty alpha·|w|², as scikit-learn's Ridge (the intercept is not penalised): one pass over X and y, then the normal equations. Attributes coef_, intercept_.",
        "let X = random([1000, 3], #{chunks: [250, 3]});\nlet y = X.dot(from_array([1.0, -2.0, 0.5]));\nRidge(#{alpha: 10.0}).fit(X, y).coef_",
    ),
    doc(
        "PCA",
        "PCA(#{n_components, whiten: false, svd_solver: \"auto\", iterated_power: \"auto\", random_state}) -> Estimator",
        "Principal components, as scikit-learn's PCA. svd_solver \"covariance_eigh\" reads X once for the centred covariance and takes its eigendecomposition; \"tsqr\" (or \"full\") takes the exact SVD of the centred X by TSQR in one pass (each block's R factor of its centred rows, no Q kept; blocks of any height); \"randomized\" finds the leading components by Halko's range finder (svd_compressed) with iterated_power power iterations (\"auto\": 7 for fewer components than a tenth of the smaller side, else 4) and 10 extra columns, seeded by random_state; \"auto\" picks covariance_eigh for tall data (fewer than 1000 features and ten times as many samples), as scikit-learn does, and tsqr otherwise. Signs as scikit-learn's (each component's largest entry positive). transform and inverse_transform are lazy. Attributes components_, explained_variance_, explained_variance_ratio_, singular_values_, mean_, noise_variance_, n_components_, n_passes_.",
        "let X = random([2000, 5], #{chunks: [500, 5]});\nPCA(#{n_components: 2}).fit(X).explained_variance_ratio_",
    ),
    doc(
        "PoissonRegression",
        "PoissonRegression(#{alpha: 1.0, fit_intercept: true, max_iter: 100, tol: 1e-4}) -> Estimator",
        "A log-link linear model of counts, as scikit-learn's PoissonRegressor (dask-ml's PoissonRegression, with scikit-learn's penalty alpha·|w|²/2 in place of dask-ml's C, the intercept not penalised): L-BFGS on the mean half Poisson deviance, one pass over X and y per evaluation, from the intercept log(mean y). y must be ≥ 0 and not all zero. predict gives the expected counts exp(X·w + b), lazily; score gives D², the share of the Poisson deviance explained. Attributes coef_, intercept_, n_iter_, n_passes_.",
        "let X = random([1000, 2], #{chunks: [250, 2], seed: 1});\nlet y = (X.dot(from_array([1.0, -0.5])) + 0.3).exp().round();\nPoissonRegression(#{alpha: 0.0}).fit(X, y).coef_",
    ),
    doc(
        "TruncatedSVD",
        "TruncatedSVD(#{n_components: 2, algorithm: \"randomized\", n_iter: 5, random_state}) -> Estimator",
        "The leading singular vectors of X itself (not centred), as scikit-learn's TruncatedSVD: algorithm \"randomized\" by Halko's range finder with n_iter power iterations and 10 extra columns, \"tsqr\" by the exact SVD in one pass (TSQR's R factor, the variances from it too). Signs as scikit-learn's. transform (X·componentsᵀ) and inverse_transform are lazy. Attributes components_, singular_values_, explained_variance_ (the variances of the transformed columns), explained_variance_ratio_ (their share of X's total variance), n_components_, n_passes_.",
        "let X = random([2000, 6], #{chunks: [500, 6]});\nTruncatedSVD(#{n_components: 2, random_state: 0}).fit(X).singular_values_",
    ),
    doc(
        "KMeans",
        "KMeans(#{n_clusters: 8, init: \"k-means||\", oversampling_factor: 2, init_max_iter, max_iter: 300, tol: 1e-4, random_state}) -> Estimator",
        "k-means clustering, as dask-ml's KMeans with scikit-learn's answers: init \"k-means||\" (the default) runs init_max_iter rounds (default 5), each one pass that draws about oversampling_factor × n_clusters rows far from the candidates so far, then clusters the weighted candidates with k-means++; \"k-means++\" is scikit-learn's greedy k-means++ (each centre the best of 2 + ln k rows drawn ∝ d²), one pass per centre; \"random\" takes n_clusters random rows, or give the centres as an array. Each Lloyd iteration is one pass (per-block sums from a GEMM argmin, merged in a tree); a cluster left empty takes the farthest row; it stops when the centres' squared shift is within tol times the mean feature variance (scikit-learn's rule). inertia_ is the sum of squared distances (dask-ml's is not squared). predict, transform (distances) and labels_ are lazy; score is minus the inertia. Attributes cluster_centers_, inertia_, n_iter_, n_passes_, labels_.",
        "let X = random([300, 2], #{chunks: [100, 2], seed: 1});\nKMeans(#{n_clusters: 3, random_state: 0}).fit(X).inertia_",
    ),
    doc(
        "LogisticRegression",
        "LogisticRegression(#{penalty: \"l2\", C: 1.0, fit_intercept: true, solver: \"lbfgs\", max_iter: 100, tol: 1e-4}) -> Estimator",
        "Logistic regression as scikit-learn's lbfgs solver fits it (dask-ml's default, admm, is slow and its intercept penalised): binary, or multinomial (softmax) for more classes; the penalty is ||w||^2 / 2C on the weights, not the intercepts (penalty () for none). Each evaluation of the loss and its gradient is one pass over X; L-BFGS runs on the session. solver \"newton\" (or \"newton-cholesky\") sums the Hessian in the same pass and takes Newton steps with a backtracking line search, as scikit-learn's newton-cholesky: a handful of passes, for few features (the Hessian has (classes × (features + 1))² entries). predict, predict_proba and decision_function are lazy; score is the accuracy. Attributes coef_ (one row per class, one row for two classes), intercept_, classes_, n_iter_, n_passes_.",
        "let X = random([400, 2], #{chunks: [100, 2], seed: 3}) - 0.5;\nlet y = (X.sum(1) > 0.0).astype(\"i64\");\nlet m = LogisticRegression().fit(X, y);\n[m.classes_, m.score(X, y)]",
    ),
    doc(
        "predict_proba",
        "m.predict_proba(X) -> Array",
        "LogisticRegression: each row's probability of each class (columns in the order of classes_), lazy.",
        "let X = random([100, 2], #{seed: 3}) - 0.5;\nlet y = (X.sum(1) > 0.0).astype(\"i64\");\nLogisticRegression().fit(X, y).predict_proba(X).sum(1).max().compute()",
    ),
    doc(
        "decision_function",
        "m.decision_function(X) -> Array",
        "LogisticRegression: the linear scores X @ coef_.T + intercept_ (1-d for two classes), lazy.",
        "let X = random([100, 2], #{seed: 3}) - 0.5;\nlet y = (X.sum(1) > 0.0).astype(\"i64\");\nLogisticRegression().fit(X, y).decision_function(X).shape",
    ),
    doc(
        "log_loss",
        "log_loss(y_true, y_prob) -> float",
        "The mean negative log-likelihood of the true labels under y_prob (samples × classes, the classes being y_true's, sorted), as scikit-learn's log_loss; probabilities are clipped to [eps, 1 - eps].",
        "log_loss(from_array([0, 1, 1]), from_array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7]]))",
    ),
    doc(
        "classes_",
        "m.classes_ -> ndarray",
        "LogisticRegression: the labels seen in fit, sorted.",
        "let X = random([100, 2], #{seed: 3}) - 0.5;\nLogisticRegression().fit(X, (X.sum(1) > 0.0).astype(\"i64\")).classes_",
    ),
    doc(
        "fit",
        "m.fit(X[, y]) -> Estimator",
        "Fit the estimator now (reading X as few times as its algorithm allows) and return it fitted; the variable is fitted too. X is a 2-d array (samples × features), y a 1-d array with as many rows. NaN or infinity in X or y, mismatched rows and unknown options are refused before any work runs where they can be seen, or with the estimator's name when the pass finds them.",
        "let X = random([100, 2]);\nlet m = StandardScaler();\nm.fit(X);\nm.mean_",
    ),
    doc(
        "predict",
        "m.predict(X) -> Array",
        "A fitted model's predictions for X, as a lazy 1-d array chunked like X's rows.",
        "let X = random([100, 2], #{chunks: [50, 2]});\nlet y = X.sum(1);\nLinearRegression().fit(X, y).predict(X).compute()",
    ),
    doc(
        "transform",
        "m.transform(X) -> Array",
        "A fitted scaler's or PCA's transform of X (KMeans: each row's distance to each centre), lazy and chunked like X's rows; m.fit_transform(X) fits first, m.inverse_transform(Z) maps back.",
        "let X = random([100, 3], #{chunks: [50, 3]});\nPCA(#{n_components: 2}).fit(X).transform(X).shape",
    ),
    doc(
        "score",
        "m.score(X, y) -> float",
        "A regression's R² for X against y, a classifier's accuracy, KMeans' minus inertia of X (y ignored), as scikit-learn's score, computed now.",
        "let X = random([100, 2]);\nlet y = X.sum(1);\nLinearRegression().fit(X, y).score(X, y)",
    ),
    doc(
        "train_test_split",
        "train_test_split(X[, y], #{test_size: 0.25, random_state, shuffle: true}) -> [X_train, X_test, y_train, y_test]",
        "Split rows into a train and a test part, as scikit-learn's train_test_split (its test_size default, 0.25, not dask-ml's 0.1): the test part has ceil(test_size * n) rows (or test_size rows when it is an integer). Rows are drawn within each block, as dask-ml's blockwise split, so nothing moves between blocks; the same random_state and chunking give the same rows. Without shuffle the last rows are the test part.",
        "let X = random([100, 2], #{chunks: [40, 2]});\nlet y = X.sum(1);\nlet parts = train_test_split(X, y, #{test_size: 0.2, random_state: 0});\nparts.map(|p| p.shape)",
    ),
    doc(
        "r2_score",
        "r2_score(y_true, y_pred) -> float",
        "The coefficient of determination, as scikit-learn's r2_score (1.0 for a constant y_true predicted exactly, 0.0 otherwise), in one pass.",
        "r2_score(from_array([1.0, 2.0, 3.0]), from_array([1.1, 1.9, 3.2]))",
    ),
    doc(
        "mean_squared_error",
        "mean_squared_error(y_true, y_pred) -> float",
        "The mean of the squared differences, as scikit-learn's mean_squared_error.",
        "mean_squared_error(from_array([1.0, 2.0]), from_array([1.5, 2.0]))",
    ),
    doc(
        "accuracy_score",
        "accuracy_score(y_true, y_pred) -> float",
        "The fraction of labels predicted exactly, as scikit-learn's accuracy_score.",
        "accuracy_score(from_array([0, 1, 1, 0]), from_array([0, 1, 0, 0]))",
    ),
    doc(
        "mean_",
        "m.mean_ -> ndarray",
        "The per-feature mean X had in fit (StandardScaler, PCA).",
        fitted!("StandardScaler().fit(X).mean_"),
    ),
    doc(
        "var_",
        "m.var_ -> ndarray",
        "StandardScaler: each feature's variance (ddof 0, NaN skipped).",
        fitted!("StandardScaler().fit(X).var_"),
    ),
    doc(
        "scale_",
        "m.scale_ -> ndarray",
        "StandardScaler: each feature's standard deviation (1 for a constant feature); MinMaxScaler: the factor of the transform.",
        fitted!("StandardScaler().fit(X).scale_"),
    ),
    doc(
        "n_samples_seen_",
        "m.n_samples_seen_ -> int or ndarray",
        "StandardScaler: the samples fit saw; per feature (an ndarray) when NaN made the counts differ.",
        fitted!("StandardScaler().fit(X).n_samples_seen_"),
    ),
    doc(
        "data_min_",
        "m.data_min_ -> ndarray",
        "MinMaxScaler: each feature's minimum in fit (NaN skipped).",
        fitted!("MinMaxScaler().fit(X).data_min_"),
    ),
    doc(
        "data_max_",
        "m.data_max_ -> ndarray",
        "MinMaxScaler: each feature's maximum in fit (NaN skipped).",
        fitted!("MinMaxScaler().fit(X).data_max_"),
    ),
    doc(
        "data_range_",
        "m.data_range_ -> ndarray",
        "MinMaxScaler: data_max_ - data_min_.",
        fitted!("MinMaxScaler().fit(X).data_range_"),
    ),
    doc(
        "min_",
        "m.min_ -> ndarray",
        "MinMaxScaler: the offset of the transform (X * scale_ + min_).",
        fitted!("MinMaxScaler().fit(X).min_"),
    ),
    doc(
        "coef_",
        "m.coef_ -> ndarray",
        "A linear model's weights, one per feature.",
        fitted!("LinearRegression().fit(X, y).coef_"),
    ),
    doc(
        "intercept_",
        "m.intercept_ -> float",
        "A linear model's intercept (0.0 with fit_intercept: false).",
        fitted!("LinearRegression().fit(X, y).intercept_"),
    ),
    doc(
        "n_passes_",
        "m.n_passes_ -> int",
        "How many times fit read X: 1 for LinearRegression, Ridge and PCA's covariance_eigh, 2 for PCA's tsqr.",
        fitted!("LinearRegression().fit(X, y).n_passes_"),
    ),
    doc(
        "components_",
        "m.components_ -> ndarray",
        "PCA: the principal axes, one row per component (n_components × n_features), largest variance first.",
        fitted!("PCA(#{n_components: 2}).fit(X).components_"),
    ),
    doc(
        "explained_variance_",
        "m.explained_variance_ -> ndarray",
        "PCA: the variance along each component (ddof 1).",
        fitted!("PCA(#{n_components: 2}).fit(X).explained_variance_"),
    ),
    doc(
        "explained_variance_ratio_",
        "m.explained_variance_ratio_ -> ndarray",
        "PCA: each component's share of the total variance.",
        fitted!("PCA(#{n_components: 2}).fit(X).explained_variance_ratio_"),
    ),
    doc(
        "singular_values_",
        "m.singular_values_ -> ndarray",
        "PCA: the singular values of the centred X along the components.",
        fitted!("PCA(#{n_components: 2}).fit(X).singular_values_"),
    ),
    doc(
        "noise_variance_",
        "m.noise_variance_ -> float",
        "PCA: the mean variance of the components left out (0.0 when none are).",
        fitted!("PCA(#{n_components: 2}).fit(X).noise_variance_"),
    ),
    doc(
        "n_components_",
        "m.n_components_ -> int",
        "PCA: the number of components kept.",
        fitted!("PCA().fit(X).n_components_"),
    ),
    doc(
        "n_samples_",
        "m.n_samples_ -> int",
        "PCA: the number of samples fit saw.",
        fitted!("PCA().fit(X).n_samples_"),
    ),
    doc(
        "svd_solver_",
        "m.svd_solver_ -> string",
        "PCA: the solver fit used (\"covariance_eigh\" or \"tsqr\"), which \"auto\" picks by X's shape.",
        fitted!("PCA().fit(X).svd_solver_"),
    ),
    doc(
        "n_features_in_",
        "m.n_features_in_ -> int",
        "The number of features fit saw.",
        fitted!("StandardScaler().fit(X).n_features_in_"),
    ),
    doc(
        "cluster_centers_",
        "m.cluster_centers_ -> ndarray",
        "KMeans: the centres, n_clusters × n_features.",
        fitted!("KMeans(#{n_clusters: 2, random_state: 0}).fit(X).cluster_centers_"),
    ),
    doc(
        "inertia_",
        "m.inertia_ -> float",
        "KMeans: the sum of squared distances of the rows to their nearest centre, with the final centres.",
        fitted!("KMeans(#{n_clusters: 2, random_state: 0}).fit(X).inertia_"),
    ),
    doc(
        "n_iter_",
        "m.n_iter_ -> int",
        "KMeans: the Lloyd iterations run.",
        fitted!("KMeans(#{n_clusters: 2, random_state: 0}).fit(X).n_iter_"),
    ),
    doc(
        "categories_",
        "m.categories_ -> array",
        "OneHotEncoder: each feature's categories, sorted, as arrays of X's type.",
        "let X = from_array([[1, 10], [2, 10], [1, 30]]);\nOneHotEncoder().fit(X).categories_",
    ),
    doc(
        "drop_idx_",
        "m.drop_idx_ -> array or ()",
        "OneHotEncoder: for each feature the index of the category that has no column (() where none), or () when drop is ().",
        "let X = from_array([[1, 10], [2, 10], [1, 30]]);\nOneHotEncoder(#{drop: \"if_binary\"}).fit(X).drop_idx_",
    ),
    doc(
        "n_init_passes_",
        "m.n_init_passes_ -> int",
        "KMeans: the passes over X the initialisation made (init_max_iter + 2 for k-means||, n_clusters for k-means++ (none for one cluster), 1 for random, 0 for given centres); n_passes_ counts them too.",
        fitted!("KMeans(#{n_clusters: 2, random_state: 0}).fit(X).n_init_passes_"),
    ),
    doc(
        "labels_",
        "m.labels_ -> Array",
        "KMeans: each row of the X it was fitted on labelled with its nearest centre (lazy, int64).",
        fitted!("KMeans(#{n_clusters: 2, random_state: 0}).fit(X).labels_.compute()"),
    ),
    doc(
        "fit_predict",
        "m.fit_predict(X) -> Array",
        "KMeans: fit on X, then X's labels (lazy).",
        fitted!("KMeans(#{n_clusters: 2, random_state: 0}).fit_predict(X).compute()"),
    ),
    doc(
        "fit_transform",
        "m.fit_transform(X) -> Array",
        "Fit on X, then transform X (lazy).",
        fitted!("StandardScaler().fit_transform(X).mean(0).compute()"),
    ),
    doc(
        "inverse_transform",
        "m.inverse_transform(Z) -> Array",
        "Map a transform's output back to X's space (lazy): scalers undo their scaling, PCA maps components back (losing what the dropped components held).",
        fitted!("let s = StandardScaler().fit(X);\ns.inverse_transform(s.transform(X)).sum().compute()"),
    ),
];

/// What an estimator is, before it is fitted.
#[derive(Clone, Debug)]
enum Kind {
    Standard(StandardScaler),
    OneHot(OneHotEncoder),
    MinMax(MinMaxScaler),
    Linear(Linear),
    Pca(Pca),
    Tsvd(TruncatedSvd),
    KMeans(KMeans),
    Logistic(Logistic),
    Poisson(Poisson),
}

/// What a fit left.
#[derive(Clone, Debug)]
enum Fitted {
    Standard(StandardFit),
    OneHot(OneHotFit),
    MinMax(MinMaxFit),
    Linear(LinearFit),
    Pca(PcaFit),
    Tsvd(TruncatedSvdFit),
    /// With the X it was fitted on, for `labels_`.
    KMeans(KMeansFit, Array),
    Logistic(LogisticFit),
    Poisson(PoissonFit),
}

/// An estimator, fitted or not (a Rhai value: `m.fit(X)` fits it in place).
#[derive(Clone, Debug)]
pub struct Estimator {
    kind: Kind,
    fitted: Option<Arc<Fitted>>,
    n_features: usize,
}

impl Estimator {
    fn new(kind: Kind) -> Estimator {
        Estimator { kind, fitted: None, n_features: 0 }
    }

    fn name(&self) -> &'static str {
        match &self.kind {
            Kind::Standard(_) => "StandardScaler",
            Kind::OneHot(_) => "OneHotEncoder",
            Kind::MinMax(_) => "MinMaxScaler",
            Kind::Linear(l) => l.name,
            Kind::Pca(_) => "PCA",
            Kind::Tsvd(_) => "TruncatedSVD",
            Kind::KMeans(_) => "KMeans",
            Kind::Logistic(_) => "LogisticRegression",
            Kind::Poisson(_) => "PoissonRegression",
        }
    }

    fn fitted(&self, what: &str) -> Res<&Fitted> {
        self.fitted.as_deref().ok_or_else(|| {
            runtime(format!("{}: this estimator is not fitted yet; call {what} after m.fit(X)", self.name()))
        })
    }

    /// The fitted attributes, by scikit-learn's names.
    fn attributes(&self) -> Vec<(&'static str, Dynamic)> {
        let v = |x: &[f64]| vector(x);
        let f = |x: f64| Dynamic::from_float(x);
        let i = |x: usize| Dynamic::from_int(x as i64);
        let mut out = Vec::new();
        match self.fitted.as_deref() {
            None => {}
            Some(Fitted::Standard(s)) => {
                if s.with_mean || s.with_std {
                    out.push(("mean_", v(&s.mean)));
                }
                if s.with_std {
                    out.push(("var_", v(&s.var)));
                    out.push(("scale_", v(&s.scale)));
                }
                let seen = &s.n_samples_seen;
                let same = seen.iter().all(|&n| n == seen[0]);
                out.push(("n_samples_seen_", if same { i(seen[0] as usize) } else { v(seen) }));
            }
            Some(Fitted::OneHot(o)) => {
                let cats = o.categories.iter().map(|c| categories(c, o.dtype)).collect::<RArray>();
                out.push(("categories_", Dynamic::from_array(cats)));
                let drop = if o.drop_idx.iter().all(Option::is_none) {
                    Dynamic::UNIT
                } else {
                    Dynamic::from_array(o.drop_idx.iter().map(|d| d.map_or(Dynamic::UNIT, i)).collect())
                };
                out.push(("drop_idx_", drop));
            }
            Some(Fitted::MinMax(m)) => {
                out.push(("data_min_", v(&m.data_min)));
                out.push(("data_max_", v(&m.data_max)));
                out.push(("data_range_", v(&m.data_range)));
                out.push(("scale_", v(&m.scale)));
                out.push(("min_", v(&m.min)));
            }
            Some(Fitted::Linear(l)) => {
                out.push(("coef_", v(&l.coef)));
                out.push(("intercept_", f(l.intercept)));
                out.push(("n_passes_", i(l.n_passes)));
            }
            Some(Fitted::Pca(p)) => {
                let k = p.explained_variance.len();
                out.push(("components_", matrix(&p.components, k, p.mean.len())));
                out.push(("explained_variance_", v(&p.explained_variance)));
                out.push(("explained_variance_ratio_", v(&p.explained_variance_ratio)));
                out.push(("singular_values_", v(&p.singular_values)));
                out.push(("mean_", v(&p.mean)));
                out.push(("noise_variance_", f(p.noise_variance)));
                out.push(("n_components_", i(k)));
                out.push(("n_samples_", i(p.n_samples)));
                out.push(("n_passes_", i(p.n_passes)));
                out.push(("svd_solver_", Dynamic::from(p.solver.to_string())));
            }
            Some(Fitted::Tsvd(t)) => {
                let k = t.singular_values.len();
                out.push(("components_", matrix(&t.components, k, t.p)));
                out.push(("explained_variance_", v(&t.explained_variance)));
                out.push(("explained_variance_ratio_", v(&t.explained_variance_ratio)));
                out.push(("singular_values_", v(&t.singular_values)));
                out.push(("n_components_", i(k)));
                out.push(("n_passes_", i(t.n_passes)));
            }
            Some(Fitted::KMeans(m, _)) => {
                out.push(("cluster_centers_", matrix(&m.centers, m.k, m.centers.len() / m.k)));
                out.push(("inertia_", f(m.inertia)));
                out.push(("n_iter_", i(m.n_iter)));
                out.push(("n_passes_", i(m.n_passes)));
                out.push(("n_init_passes_", i(m.n_init_passes)));
            }
            Some(Fitted::Logistic(l)) => {
                out.push(("coef_", matrix(&l.weights(), l.m, l.p)));
                out.push(("intercept_", v(&l.intercepts())));
                let classes = if l.int_labels {
                    let ints: Vec<i64> = l.classes.iter().map(|&c| c as i64).collect();
                    Chunk::from_vec(&[ints.len()], ints)
                        .map(|c| to_dynamic(&Value::array(c)))
                        .unwrap_or_else(|_| v(&l.classes))
                } else {
                    v(&l.classes)
                };
                out.push(("classes_", classes));
                out.push(("n_iter_", i(l.n_iter)));
                out.push(("n_passes_", i(l.n_passes)));
            }
            Some(Fitted::Poisson(l)) => {
                out.push(("coef_", v(&l.weights())));
                out.push(("intercept_", f(l.intercept())));
                out.push(("n_iter_", i(l.n_iter)));
                out.push(("n_passes_", i(l.n_passes)));
            }
        }
        if self.fitted.is_some() {
            out.push(("n_features_in_", i(self.n_features)));
        }
        out
    }
}

/// Every attribute name some estimator has: each is a property.
const ATTRIBUTES: &[&str] = &[
    "mean_",
    "var_",
    "scale_",
    "n_samples_seen_",
    "data_min_",
    "data_max_",
    "data_range_",
    "min_",
    "coef_",
    "intercept_",
    "n_passes_",
    "components_",
    "explained_variance_",
    "explained_variance_ratio_",
    "singular_values_",
    "noise_variance_",
    "n_components_",
    "n_samples_",
    "svd_solver_",
    "n_features_in_",
    "cluster_centers_",
    "inertia_",
    "n_iter_",
    "n_init_passes_",
    "classes_",
    "categories_",
    "drop_idx_",
];

/// A feature's categories as a 1-d array of X's type (integers stay integers).
fn categories(c: &[f64], dtype: brisk_engine::array::DType) -> Dynamic {
    match Chunk::from_vec(&[c.len()], c.to_vec()) {
        Ok(chunk) => to_dynamic(&Value::array(chunk.astype(dtype))),
        Err(_) => vector(c),
    }
}

fn vector(x: &[f64]) -> Dynamic {
    to_dynamic(&Value::array(brisk_engine::ml::stats::packed(x.to_vec())))
}

fn matrix(x: &[f64], rows: usize, cols: usize) -> Dynamic {
    match Chunk::from_vec(&[rows, cols], x.to_vec()) {
        Ok(c) => to_dynamic(&Value::array(c)),
        Err(_) => vector(x),
    }
}

/// Fits run their graphs through the session.
struct Session<'a>(&'a SessionState);

impl Runner for Session<'_> {
    fn run(&self, persist: &[Array], compute: &[Array]) -> Result<(Vec<Array>, Vec<Chunk>), MlError> {
        use brisk_engine::collections::Collection;
        // A task's failure travels as a `TaskFailure` value: its own words.
        let failed = |e: Box<EvalAltResult>| {
            let task = match &*e {
                EvalAltResult::ErrorRuntime(v, _) => {
                    v.read_lock::<crate::error::TaskFailure>().map(|f| f.to_string())
                }
                _ => None,
            };
            MlError::Compute(task.unwrap_or_else(|| e.to_string()))
        };
        let mut layers = Vec::new();
        let mut keys = Vec::new();
        let mut held = Vec::new();
        for a in persist {
            let (layer, ks) = a.partitions();
            layers.push(layer);
            held.push(ks.len());
            keys.extend(ks);
        }
        let first_computed = keys.len();
        for a in compute {
            let (layer, key) = arr::finalize(a);
            layers.push(layer);
            keys.push(key);
        }
        let futures = self.0.submit(brisk_engine::graph::materialize(&layers), &keys).map_err(failed)?;
        let values = self.0.gather(&futures[first_computed..]).map_err(failed)?;
        let chunks = values
            .into_iter()
            .map(|v| match v {
                Value::Array(c) => Ok(c.as_ref().clone()),
                other => {
                    Err(MlError::Compute(format!("a fit's statistic came back as {}", other.type_name())))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        // What is kept is waited for too (in sync mode nothing runs unwaited).
        brisk_engine::client::wait_ok(&futures[..first_computed], &self.0.cancel)
            .map_err(|e| MlError::Compute(e.to_string()))?;
        let mut kept = Vec::new();
        let mut at = 0;
        for (a, n) in persist.iter().zip(held) {
            kept.push(a.persisted(keys[at..at + n].to_vec(), futures[at..at + n].to_vec()));
            at += n;
        }
        Ok((kept, chunks))
    }
}

fn ml_err(e: MlError) -> Box<EvalAltResult> {
    runtime(e.to_string())
}

/// X or y as a lazy array: a computed ndarray becomes one block, a
/// DataFrame's columns (`df[["a", "b"]]`) a 2-d array and a Series
/// (`df["y"]`) a 1-d one, their partitions' lengths computed first.
fn lazy(state: &SessionState, d: &Dynamic, what: &str) -> Res<Array> {
    if let Some(x) = d.read_lock::<LazyArray>() {
        return Ok(x.a.clone());
    }
    if let Some(f) = d.read_lock::<LazyFrame>() {
        let f = f.f.clone();
        return frame_array(state, &f, false).map_err(|e| runtime(format!("{what}: {e}")));
    }
    if let Some(s) = d.read_lock::<LazySeries>() {
        let f = s.s.to_frame();
        return frame_array(state, &f, true).map_err(|e| runtime(format!("{what}: {e}")));
    }
    if let Some(c) = d.read_lock::<Chunk>() {
        return arr::from_chunk(&ctx(state), &c, &whole(&c)).map_err(err);
    }
    Err(wrong_type(what, "an array", d))
}

/// A frame's columns as an array of known chunks (Dask's
/// `to_dask_array(lengths=True)`): the column types are checked, then the
/// partitions' lengths computed.
fn frame_array(state: &SessionState, f: &DataFrame, flat: bool) -> Result<Array, String> {
    to_array::array_dtype(&f.schema).map_err(|e| e.to_string())?;
    let c = ctx(state);
    let lengths = Session(state).compute(&[to_array::lengths(&c, f)]).map_err(|e| e.to_string())?;
    let lengths: Vec<usize> = lengths
        .first()
        .map(|l| l.cast::<f64>().iter().map(|&v| v as usize).collect())
        .ok_or("the partitions' lengths were not computed")?;
    to_array::to_array(&c, f, &lengths, flat).map_err(|e| e.to_string())
}

fn fit(state: &SessionState, m: &mut Estimator, x: &Dynamic, y: Option<&Dynamic>) -> Res<Estimator> {
    let name = m.name();
    let x = lazy(state, x, &format!("{name}.fit's X"))?;
    let y = y.map(|y| lazy(state, y, &format!("{name}.fit's y"))).transpose()?;
    let c = ctx(state);
    let run = Session(state);
    let fitted = match (&m.kind, &y) {
        (Kind::Linear(l), Some(y)) => Fitted::Linear(l.fit(&c, &x, y, &run).map_err(ml_err)?),
        (Kind::Linear(l), None) => return Err(runtime(format!("{}.fit needs X and y", l.name))),
        (Kind::Logistic(l), Some(y)) => Fitted::Logistic(l.fit(&c, &x, y, &run).map_err(ml_err)?),
        (Kind::Logistic(_), None) => return Err(runtime("LogisticRegression.fit needs X and y")),
        (Kind::Poisson(l), Some(y)) => Fitted::Poisson(l.fit(&c, &x, y, &run).map_err(ml_err)?),
        (Kind::Poisson(_), None) => return Err(runtime("PoissonRegression.fit needs X and y")),
        (Kind::Standard(s), _) => Fitted::Standard(s.fit(&c, &x, &run).map_err(ml_err)?),
        (Kind::OneHot(o), _) => Fitted::OneHot(o.fit(&c, &x, &run).map_err(ml_err)?),
        (Kind::MinMax(s), _) => Fitted::MinMax(s.fit(&c, &x, &run).map_err(ml_err)?),
        (Kind::Pca(p), _) => Fitted::Pca(p.fit(&c, &x, &run).map_err(ml_err)?),
        (Kind::Tsvd(t), _) => Fitted::Tsvd(t.fit(&c, &x, &run).map_err(ml_err)?),
        (Kind::KMeans(k), _) => Fitted::KMeans(k.fit(&c, &x, &run).map_err(ml_err)?, x.clone()),
    };
    m.n_features = x.shape().get(1).copied().unwrap_or(1);
    m.fitted = Some(Arc::new(fitted));
    Ok(m.clone())
}

fn transform(state: &SessionState, m: &Estimator, x: &Dynamic, inverse: bool) -> Res<LazyArray> {
    let what = if inverse { "inverse_transform" } else { "transform" };
    let x = lazy(state, x, &format!("{}.{what}'s X", m.name()))?;
    let c = ctx(state);
    let out = match (m.fitted(what)?, inverse) {
        (Fitted::Standard(s), false) => s.transform(&c, &x),
        (Fitted::Standard(s), true) => s.inverse_transform(&c, &x),
        (Fitted::OneHot(o), false) => o.transform(&c, &x),
        (Fitted::MinMax(s), false) => s.transform(&c, &x),
        (Fitted::MinMax(s), true) => s.inverse_transform(&c, &x),
        (Fitted::Pca(p), false) => p.transform(&c, &x),
        (Fitted::Pca(p), true) => p.inverse_transform(&c, &x),
        (Fitted::Tsvd(t), false) => t.transform(&c, &x),
        (Fitted::Tsvd(t), true) => t.inverse_transform(&c, &x),
        (Fitted::KMeans(k, _), false) => k.transform(&c, &x),
        (
            Fitted::Linear(_)
            | Fitted::KMeans(..)
            | Fitted::Logistic(_)
            | Fitted::Poisson(_)
            | Fitted::OneHot(_),
            _,
        ) => {
            return Err(runtime(format!("{} has no {what}", m.name())));
        }
    };
    out.map(LazyArray::new).map_err(ml_err)
}

fn predict(state: &SessionState, m: &Estimator, x: &Dynamic) -> Res<LazyArray> {
    let x = lazy(state, x, &format!("{}.predict's X", m.name()))?;
    match m.fitted("predict")? {
        Fitted::Linear(l) => l.predict(&ctx(state), &x, m.name()).map(LazyArray::new).map_err(ml_err),
        Fitted::KMeans(k, _) => k.predict(&ctx(state), &x).map(LazyArray::new).map_err(ml_err),
        Fitted::Logistic(l) => l.predict(&ctx(state), &x).map(LazyArray::new).map_err(ml_err),
        Fitted::Poisson(l) => l.predict(&ctx(state), &x).map(LazyArray::new).map_err(ml_err),
        _ => Err(runtime(format!("{} has no predict; use transform", m.name()))),
    }
}

/// KMeans' score: minus X's inertia to the centres.
fn score_x(state: &SessionState, m: &Estimator, x: &Dynamic) -> Res<f64> {
    let Fitted::KMeans(k, _) = m.fitted("score")? else {
        return Err(runtime(format!("{}.score needs X and y", m.name())));
    };
    let x = lazy(state, x, "KMeans.score's X")?;
    k.score(&ctx(state), &x, &Session(state)).map_err(ml_err)
}

/// A classifier's `predict_proba` and `decision_function`.
fn classifier(state: &SessionState, m: &Estimator, x: &Dynamic, proba: bool) -> Res<LazyArray> {
    let what = if proba { "predict_proba" } else { "decision_function" };
    let Fitted::Logistic(l) = m.fitted(what)? else {
        return Err(runtime(format!("{} has no {what}", m.name())));
    };
    let x = lazy(state, x, &format!("{}.{what}'s X", m.name()))?;
    let c = ctx(state);
    let out = if proba { l.predict_proba(&c, &x) } else { l.decision_function(&c, &x) };
    out.map(LazyArray::new).map_err(ml_err)
}

/// R² for a regression, accuracy for a classifier (scikit-learn's `score`).
fn score(state: &SessionState, m: &Estimator, x: &Dynamic, y: &Dynamic) -> Res<f64> {
    if matches!(m.kind, Kind::KMeans(_)) {
        // scikit-learn's KMeans.score takes y and ignores it.
        return score_x(state, m, x);
    }
    if let Fitted::Poisson(l) = m.fitted("score")? {
        let x = lazy(state, x, "PoissonRegression.score's X")?;
        let y = lazy(state, y, "PoissonRegression.score's y")?;
        return l.score(&ctx(state), &x, &y, &Session(state)).map_err(ml_err);
    }
    let p = predict(state, m, x)?;
    let y = lazy(state, y, &format!("{}.score's y", m.name()))?;
    let metric: Metric =
        if matches!(m.kind, Kind::Logistic(_)) { metrics::accuracy_score } else { metrics::r2_score };
    metric(&ctx(state), &y, &p.a, &Session(state)).map_err(ml_err)
}

fn options(opts: Option<Map>, name: &str, known: &[&str]) -> Res<Opts> {
    Opts::new(opts, name, known)
}

/// A string option.
fn text(d: &Dynamic, what: &str) -> Res<String> {
    d.clone().into_string().map_err(|_| wrong_type(what, "a string", d))
}

fn flag(o: &Opts, k: &str, default: bool) -> Res<bool> {
    match o.get(k) {
        None => Ok(default),
        Some(d) => d.as_bool().map_err(|_| wrong_type(k, "true or false", d)),
    }
}

/// A count option (default when absent or `()`).
fn non_negative(o: &Opts, estimator: &str, k: &str, default: usize) -> Res<usize> {
    match o.get(k) {
        None => Ok(default),
        Some(d) if d.is_unit() => Ok(default),
        Some(d) => {
            let v = int_of(d, k)?;
            usize::try_from(v).map_err(|_| runtime(format!("{estimator}: {k} must not be negative, got {v}")))
        }
    }
}

/// `random_state`, or a seed of its own.
fn seed_of(o: &Opts) -> Res<u64> {
    match o.get("random_state") {
        None => Ok(fresh_seed()),
        Some(d) if d.is_unit() => Ok(fresh_seed()),
        Some(d) => Ok(int_of(d, "random_state")? as u64),
    }
}

fn make(state: &SessionState, name: &str, opts: Option<Map>) -> Res<Estimator> {
    Ok(Estimator::new(match name {
        "StandardScaler" => {
            let o = options(opts, name, &["with_mean", "with_std"])?;
            Kind::Standard(StandardScaler {
                with_mean: flag(&o, "with_mean", true)?,
                with_std: flag(&o, "with_std", true)?,
            })
        }
        "OneHotEncoder" => {
            let o = options(opts, name, &["categories", "handle_unknown", "drop", "sparse_output"])?;
            let given = match o.get("categories") {
                None => None,
                Some(d) if d.is_string() && text(d, "categories")? == "auto" => None,
                Some(d) => Some(rows_of(state, d, "OneHotEncoder categories")?),
            };
            let ignore_unknown = match o.get("handle_unknown") {
                None => false,
                Some(d) => match text(d, "handle_unknown")?.as_str() {
                    "error" => false,
                    "ignore" => true,
                    other => {
                        return Err(runtime(format!(
                            "OneHotEncoder: handle_unknown must be \"error\" or \"ignore\", got \"{other}\""
                        )));
                    }
                },
            };
            let drop = match o.get("drop") {
                None => Drop::None,
                Some(d) if d.is_unit() => Drop::None,
                Some(d) => match text(d, "drop")?.as_str() {
                    "first" => Drop::First,
                    "if_binary" => Drop::IfBinary,
                    other => {
                        return Err(runtime(format!(
                            "OneHotEncoder: drop must be (), \"first\" or \"if_binary\", got \"{other}\""
                        )));
                    }
                },
            };
            if flag(&o, "sparse_output", false)? {
                return Err(runtime(
                    "OneHotEncoder: sparse_output: true is not supported (brisk arrays are dense)",
                ));
            }
            Kind::OneHot(OneHotEncoder { categories: given, ignore_unknown, drop })
        }
        "MinMaxScaler" => {
            let o = options(opts, name, &["feature_range"])?;
            let range = match o.get("feature_range") {
                None => (0.0, 1.0),
                Some(d) => {
                    let items: Vec<f64> = d
                        .read_lock::<RArray>()
                        .map(|a| a.iter().map(|x| super::array_args::float_of(x, "feature_range")).collect())
                        .unwrap_or_else(|| Err(wrong_type("feature_range", "[min, max]", d)))?;
                    match items[..] {
                        [lo, hi] => (lo, hi),
                        _ => return Err(runtime("MinMaxScaler: feature_range must be [min, max]")),
                    }
                }
            };
            Kind::MinMax(MinMaxScaler { feature_range: range })
        }
        "LinearRegression" => {
            let o = options(opts, name, &["fit_intercept"])?;
            Kind::Linear(Linear {
                name: "LinearRegression",
                alpha: 0.0,
                fit_intercept: flag(&o, "fit_intercept", true)?,
            })
        }
        "Ridge" => {
            let o = options(opts, name, &["alpha", "fit_intercept"])?;
            Kind::Linear(Linear {
                name: "Ridge",
                alpha: o.float("alpha", 1.0)?,
                fit_intercept: flag(&o, "fit_intercept", true)?,
            })
        }
        "LogisticRegression" => {
            let known = ["penalty", "C", "fit_intercept", "solver", "max_iter", "tol"];
            let o = options(opts, name, &known)?;
            let penalty = match o.get("penalty") {
                None => true,
                Some(d) if d.is_unit() => false,
                Some(d) => match text(d, "penalty")?.as_str() {
                    "l2" => true,
                    "none" => false,
                    other => {
                        return Err(runtime(format!(
                            "LogisticRegression: penalty must be \"l2\" or () for none, got \"{other}\" (l1 and elasticnet are not built yet)"
                        )));
                    }
                },
            };
            let solver = match o.get("solver") {
                None => LogisticSolver::Lbfgs,
                Some(d) => match text(d, "solver")?.as_str() {
                    "lbfgs" => LogisticSolver::Lbfgs,
                    "newton" | "newton-cholesky" => LogisticSolver::Newton,
                    s => {
                        return Err(runtime(format!(
                            "LogisticRegression: solver must be \"lbfgs\" or \"newton\" (\"newton-cholesky\"), got \"{s}\""
                        )));
                    }
                },
            };
            let max_iter = match o.get("max_iter") {
                None => 100,
                Some(d) => usize::try_from(int_of(d, "max_iter")?)
                    .map_err(|_| runtime("LogisticRegression: max_iter must not be negative"))?,
            };
            Kind::Logistic(Logistic {
                c: penalty.then(|| o.float("C", 1.0)).transpose()?,
                fit_intercept: flag(&o, "fit_intercept", true)?,
                max_iter,
                tol: o.float("tol", 1e-4)?,
                solver,
            })
        }
        "PoissonRegression" => {
            let o = options(opts, name, &["alpha", "fit_intercept", "max_iter", "tol"])?;
            Kind::Poisson(Poisson {
                alpha: o.float("alpha", 1.0)?,
                fit_intercept: flag(&o, "fit_intercept", true)?,
                max_iter: non_negative(&o, name, "max_iter", 100)?,
                tol: o.float("tol", 1e-4)?,
            })
        }
        "KMeans" => {
            let known = [
                "n_clusters",
                "init",
                "oversampling_factor",
                "init_max_iter",
                "max_iter",
                "tol",
                "random_state",
            ];
            let o = options(opts, name, &known)?;
            let count = |k: &str, default: usize| non_negative(&o, name, k, default);
            let init = match o.get("init") {
                None => Init::Parallel,
                Some(d) if d.is_string() => match text(d, "init")?.as_str() {
                    "k-means||" => Init::Parallel,
                    "random" => Init::Random,
                    "k-means++" => Init::PlusPlus,
                    other => {
                        return Err(runtime(format!(
                            "KMeans: init must be \"k-means||\", \"k-means++\", \"random\" or an array of centres, got \"{other}\""
                        )));
                    }
                },
                Some(d) => Init::Given(centres(state, d)?),
            };
            let seed = seed_of(&o)?;
            Kind::KMeans(KMeans {
                n_clusters: count("n_clusters", 8)?,
                init,
                oversampling_factor: o.float("oversampling_factor", 2.0)?,
                init_max_iter: o
                    .get("init_max_iter")
                    .filter(|d| !d.is_unit())
                    .map(|_| count("init_max_iter", 0))
                    .transpose()?,
                max_iter: count("max_iter", 300)?,
                tol: o.float("tol", 1e-4)?,
                seed,
            })
        }
        "TruncatedSVD" => {
            let o = options(opts, name, &["n_components", "algorithm", "n_iter", "random_state"])?;
            let algorithm = match o.get("algorithm") {
                None => SvdAlgorithm::Randomized,
                Some(d) => match text(d, "algorithm")?.as_str() {
                    "randomized" => SvdAlgorithm::Randomized,
                    "tsqr" => SvdAlgorithm::Tsqr,
                    other => {
                        return Err(runtime(format!(
                            "TruncatedSVD: algorithm must be \"randomized\" or \"tsqr\", got \"{other}\""
                        )));
                    }
                },
            };
            Kind::Tsvd(TruncatedSvd {
                n_components: non_negative(&o, name, "n_components", 2)?,
                algorithm,
                n_iter: non_negative(&o, name, "n_iter", 5)?,
                seed: seed_of(&o)?,
            })
        }
        _ => {
            let o = options(
                opts,
                "PCA",
                &["n_components", "whiten", "svd_solver", "iterated_power", "random_state"],
            )?;
            let n_components = match o.get("n_components") {
                None => None,
                Some(d) if d.is_unit() => None,
                Some(d) => Some(
                    usize::try_from(int_of(d, "n_components")?)
                        .map_err(|_| runtime("PCA: n_components must be a positive integer"))?,
                ),
            };
            let solver = match o.get("svd_solver") {
                None => Solver::Auto,
                Some(d) => Solver::parse(&text(d, "svd_solver")?).map_err(ml_err)?,
            };
            let iterated_power = match o.get("iterated_power") {
                None => None,
                Some(d) if d.is_unit() || d.clone().into_string().is_ok_and(|s| s == "auto") => None,
                Some(_) => Some(non_negative(&o, "PCA", "iterated_power", 0)?),
            };
            Kind::Pca(Pca {
                n_components,
                whiten: flag(&o, "whiten", false)?,
                solver,
                iterated_power,
                seed: seed_of(&o)?,
            })
        }
    }))
}

fn split(state: &SessionState, arrays: &[Dynamic], opts: Option<Map>) -> Res<RArray> {
    let o = options(opts, "train_test_split", &["test_size", "random_state", "shuffle"])?;
    let lazies = arrays
        .iter()
        .enumerate()
        .map(|(i, d)| lazy(state, d, &format!("train_test_split's argument {}", i + 1)))
        .collect::<Res<Vec<_>>>()?;
    let test_size = match o.get("test_size") {
        None => TestSize::Fraction(0.25),
        Some(d) if d.is_int() => {
            let n = int_of(d, "test_size")?;
            TestSize::Rows(
                usize::try_from(n)
                    .map_err(|_| runtime(format!("train_test_split: test_size={n} must be positive")))?,
            )
        }
        Some(d) => TestSize::Fraction(super::array_args::float_of(d, "test_size")?),
    };
    let seed = match o.get("random_state") {
        None => fresh_seed(),
        Some(d) if d.is_unit() => fresh_seed(),
        Some(d) => int_of(d, "random_state")? as u64,
    };
    let parts = brisk_engine::ml::split::train_test_split(
        &ctx(state),
        &lazies,
        test_size,
        flag(&o, "shuffle", true)?,
        seed,
    )
    .map_err(ml_err)?;
    Ok(parts.into_iter().map(|a| Dynamic::from(LazyArray::new(a))).collect())
}

/// A seed of its own where no random_state is given (std's hasher keys
/// are random).
fn fresh_seed() -> u64 {
    std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u8)
}

/// Initial centres given as a brisk array (lazy ones are computed now) or
/// as a Rhai array of rows, k × p.
fn centres(state: &SessionState, d: &Dynamic) -> Res<Vec<f64>> {
    let rows = rows_of(state, d, "KMeans init")?;
    if rows.windows(2).any(|w| w[0].len() != w[1].len()) {
        return Err(runtime("KMeans: init's rows must all have the same length"));
    }
    Ok(rows.concat())
}

/// Rows of numbers given as a 2-d brisk array (a lazy one is computed now)
/// or as a Rhai array of arrays (which may differ in length).
fn rows_of(state: &SessionState, d: &Dynamic, what: &str) -> Res<Vec<Vec<f64>>> {
    if let Some(x) = d.read_lock::<LazyArray>() {
        let a = x.a.clone();
        drop(x);
        let c = Session(state).compute(&[a]).map_err(ml_err)?.pop();
        let c = c.ok_or_else(|| runtime(format!("{what}: the array was not computed")))?;
        return rows_of(state, &to_dynamic(&Value::array(c)), what);
    }
    if let Some(c) = d.read_lock::<Chunk>() {
        let [_, p] = c.shape()[..] else {
            return Err(runtime(format!("{what} must be a 2-d array, got {} dimensions", c.ndim())));
        };
        let v: Vec<f64> = c.cast::<f64>().iter().copied().collect();
        return Ok(v.chunks(p.max(1)).map(<[f64]>::to_vec).collect());
    }
    let rows =
        d.read_lock::<RArray>().map(|a| a.to_vec()).ok_or_else(|| wrong_type(what, "an array of rows", d))?;
    rows.into_iter()
        .map(|r| {
            let r = r
                .read_lock::<RArray>()
                .map(|a| a.to_vec())
                .ok_or_else(|| wrong_type(what, "an array of rows", &r))?;
            r.iter().map(|v| super::array_args::float_of(v, what)).collect()
        })
        .collect()
}

type Metric = fn(&arr::Ctx, &Array, &Array, &dyn Runner) -> Result<f64, MlError>;

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    engine.register_type_with_name::<Estimator>("Estimator");
    engine.register_fn("to_string", |m: &mut Estimator| describe(m));
    engine.register_fn("to_debug", |m: &mut Estimator| describe(m));
    for name in [
        "StandardScaler",
        "OneHotEncoder",
        "MinMaxScaler",
        "LinearRegression",
        "Ridge",
        "PCA",
        "TruncatedSVD",
        "KMeans",
        "LogisticRegression",
        "PoissonRegression",
    ] {
        let st = state.clone();
        engine.register_fn(name, move || make(&st, name, None));
        let st = state.clone();
        engine.register_fn(name, move |o: Map| make(&st, name, Some(o)));
    }
    for &attr in ATTRIBUTES {
        engine.register_get(attr, move |m: &mut Estimator| -> Res<Dynamic> {
            if m.fitted.is_none() {
                return Err(runtime(format!("{}: {attr} is set by fit; call m.fit(X) first", m.name())));
            }
            m.attributes()
                .into_iter()
                .find(|(k, _)| *k == attr)
                .map(|(_, v)| v)
                .ok_or_else(|| runtime(format!("{} has no attribute {attr}", m.name())))
        });
    }
    engine.register_fn("to_json", |m: &mut Estimator| -> Res<String> {
        let mut map = Map::new();
        map.insert("estimator".into(), Dynamic::from(m.name().to_string()));
        for (k, v) in m.attributes() {
            map.insert(k.into(), v);
        }
        let value = crate::convert::to_value(&Dynamic::from_map(map), "to_json's argument")?;
        Ok(value.to_json())
    });
    let st = state.clone();
    engine.register_fn("fit", move |m: &mut Estimator, x: Dynamic| fit(&st, m, &x, None));
    let st = state.clone();
    engine.register_fn("fit", move |m: &mut Estimator, x: Dynamic, y: Dynamic| fit(&st, m, &x, Some(&y)));
    let st = state.clone();
    engine.register_fn("transform", move |m: &mut Estimator, x: Dynamic| transform(&st, m, &x, false));
    let st = state.clone();
    engine.register_fn("inverse_transform", move |m: &mut Estimator, x: Dynamic| transform(&st, m, &x, true));
    let st = state.clone();
    engine.register_fn("fit_transform", move |m: &mut Estimator, x: Dynamic| {
        fit(&st, m, &x, None)?;
        transform(&st, m, &x, false)
    });
    let st = state.clone();
    engine.register_fn("predict", move |m: &mut Estimator, x: Dynamic| predict(&st, m, &x));
    let st = state.clone();
    engine.register_fn("score", move |m: &mut Estimator, x: Dynamic, y: Dynamic| score(&st, m, &x, &y));
    let st = state.clone();
    engine.register_fn("score", move |m: &mut Estimator, x: Dynamic| score_x(&st, m, &x));
    let st = state.clone();
    engine.register_fn("predict_proba", move |m: &mut Estimator, x: Dynamic| classifier(&st, m, &x, true));
    let st = state.clone();
    engine
        .register_fn("decision_function", move |m: &mut Estimator, x: Dynamic| classifier(&st, m, &x, false));
    let st = state.clone();
    engine.register_fn("log_loss", move |y: Dynamic, p: Dynamic| -> Res<f64> {
        let y = lazy(&st, &y, "log_loss's y_true")?;
        let p = lazy(&st, &p, "log_loss's y_prob")?;
        brisk_engine::ml::logistic::log_loss(&ctx(&st), &y, &p, &Session(&st)).map_err(ml_err)
    });
    let st = state.clone();
    engine.register_fn("fit_predict", move |m: &mut Estimator, x: Dynamic| {
        fit(&st, m, &x, None)?;
        predict(&st, m, &x)
    });
    let st = state.clone();
    engine.register_get("labels_", move |m: &mut Estimator| -> Res<LazyArray> {
        match m.fitted.as_deref() {
            Some(Fitted::KMeans(k, x)) => k.predict(&ctx(&st), x).map(LazyArray::new).map_err(ml_err),
            Some(_) => Err(runtime(format!("{} has no attribute labels_", m.name()))),
            None => Err(runtime(format!("{}: labels_ is set by fit; call m.fit(X) first", m.name()))),
        }
    });
    let st = state.clone();
    engine.register_fn("to_dask_array", move |f: &mut LazyFrame| -> Res<LazyArray> {
        frame_array(&st, &f.f, false).map(LazyArray::new).map_err(runtime)
    });
    let st = state.clone();
    engine.register_fn("to_dask_array", move |s: &mut LazySeries| -> Res<LazyArray> {
        frame_array(&st, &s.s.to_frame(), true).map(LazyArray::new).map_err(runtime)
    });
    let st = state.clone();
    engine.register_fn("train_test_split", move |x: Dynamic| split(&st, &[x], None));
    let st = state.clone();
    engine.register_fn("train_test_split", move |x: Dynamic, o: Dynamic| match o.clone().try_cast::<Map>() {
        Some(m) => split(&st, &[x], Some(m)),
        None => split(&st, &[x, o], None),
    });
    let st = state.clone();
    engine
        .register_fn("train_test_split", move |x: Dynamic, y: Dynamic, o: Map| split(&st, &[x, y], Some(o)));
    let metrics: [(&str, Metric); 3] = [
        ("r2_score", metrics::r2_score),
        ("mean_squared_error", metrics::mean_squared_error),
        ("accuracy_score", metrics::accuracy_score),
    ];
    for (name, metric) in metrics {
        let st = state.clone();
        engine.register_fn(name, move |a: Dynamic, b: Dynamic| -> Res<f64> {
            let a = lazy(&st, &a, &format!("{name}'s y_true"))?;
            let b = lazy(&st, &b, &format!("{name}'s y_pred"))?;
            metric(&ctx(&st), &a, &b, &Session(&st)).map_err(ml_err)
        });
    }
}

fn describe(m: &Estimator) -> String {
    let state =
        if m.fitted.is_some() { format!("fitted on {} features", m.n_features) } else { "not fitted".into() };
    format!("<{}: {state}>", m.name())
}
