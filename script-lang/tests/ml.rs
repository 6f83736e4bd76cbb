//! Estimators against scikit-learn: the same .npy files fitted by brisk (on
//! both local schedulers, with blocks that do not divide the rows) and by
//! scikit-learn (`tests/reference/sklearn_ml.py`), attribute by attribute,
//! with the bad inputs' messages.

mod common;

use common::{Need, Reference, SCHEDULERS, python};

const SKLEARN: Need = Need {
    module: Some("sklearn"),
    on_ci: "scikit-learn is needed for the estimator tests on CI; .ci/run sets BRISK_PYTHON ({python})",
    skipped: "skipped: no Python with scikit-learn (set BRISK_PYTHON, see scripts/python-env.sh)",
};

const CASES: &str = r#"
let X = from_npy(D + "/X.npy", #{chunks: [700, -1]});
let y = from_npy(D + "/y.npy", #{chunks: 900});
let Xc = from_npy(D + "/Xc.npy", #{chunks: [1200, 2]});
let Xp = from_npy(D + "/Xp.npy", #{chunks: [450, -1]});
let Xn = from_npy(D + "/Xn.npy", #{chunks: [130, -1]});
let r = #{};
let lr = LinearRegression().fit(X, y);
r.lr_coef = lr.coef_;
r.lr_intercept = lr.intercept_;
r.lr_score = lr.score(X, y);
r.lr_predict_head = lr.predict(X)[0..5].compute();
let lr0 = LinearRegression(#{fit_intercept: false}).fit(X, y);
r.lr0_coef = lr0.coef_;
r.lr0_intercept = lr0.intercept_;
r.lrc_coef = LinearRegression().fit(Xc, y).coef_;
let rg = Ridge(#{alpha: 10.0}).fit(X, y);
r.ridge_coef = rg.coef_;
r.ridge_intercept = rg.intercept_;
r.ridge0_coef = Ridge(#{alpha: 0.5, fit_intercept: false}).fit(X, y).coef_;

let ss = StandardScaler().fit(Xn);
r.ss_mean = ss.mean_;
r.ss_var = ss.var_;
r.ss_scale = ss.scale_;
r.ss_n = ss.n_samples_seen_;
r.ss_t = ss.transform(Xn).compute();
let sx = StandardScaler();
sx.fit(X);
r.sx_var = sx.var_;
r.sx_n = sx.n_samples_seen_;
r.sx_inverse = sx.inverse_transform(sx.transform(X))[0..3].compute();
r.nm_t_head = StandardScaler(#{with_mean: false}).fit(X).transform(X)[0..3].compute();
let mm = MinMaxScaler(#{feature_range: [-1, 2]}).fit(Xn);
r.mm_min = mm.data_min_;
r.mm_max = mm.data_max_;
r.mm_scale = mm.scale_;
r.mm_min_ = mm.min_;
r.mm_t = mm.transform(Xn).compute();

for solver in [["pca", "auto"], ["pca_tsqr", "tsqr"], ["pca_rand", "randomized"]] {
    let tag = solver[0];
    let pc = PCA(#{n_components: 3, svd_solver: solver[1]}).fit(Xp);
    r[tag + "_components"] = pc.components_;
    r[tag + "_evr"] = pc.explained_variance_ratio_;
    r[tag + "_ev"] = pc.explained_variance_;
    r[tag + "_sv"] = pc.singular_values_;
    r[tag + "_mean"] = pc.mean_;
    r[tag + "_noise"] = pc.noise_variance_;
    r[tag + "_t_head"] = pc.transform(Xp)[0..4].compute();
}
for algorithm in [["tsvd", "randomized"], ["tsvd_tsqr", "tsqr"]] {
    let tag = algorithm[0];
    let ts = TruncatedSVD(#{n_components: 3, algorithm: algorithm[1], random_state: 0}).fit(Xp);
    r[tag + "_components"] = ts.components_;
    r[tag + "_sv"] = ts.singular_values_;
    r[tag + "_ev"] = ts.explained_variance_;
    r[tag + "_evr"] = ts.explained_variance_ratio_;
    r[tag + "_t_head"] = ts.transform(Xp)[0..4].compute();
}
let pw = PCA(#{n_components: 2, whiten: true}).fit(Xp);
r.pca_whiten_t_head = pw.transform(Xp)[0..4].compute();
r.pca_whiten_back = pw.inverse_transform(pw.transform(Xp[0..2])).compute();
r.pca_all_evr = PCA().fit(Xp).explained_variance_ratio_;
r.pca32_evr = PCA(#{n_components: 2}).fit(from_npy(D + "/Xp32.npy", #{chunks: [450, -1]})).explained_variance_ratio_;

let Xb = from_npy(D + "/Xb.npy", #{chunks: [600, -1]});
let start = Xb[0..6].compute();
for run in [["km", 300, 1e-4], ["km3", 3, 0.0]] {
    let km = KMeans(#{n_clusters: 6, init: start, max_iter: run[1], tol: run[2]}).fit(Xb);
    r[run[0] + "_centers"] = km.cluster_centers_;
    r[run[0] + "_inertia"] = km.inertia_;
    r[run[0] + "_n_iter"] = km.n_iter_;
    r[run[0] + "_labels_head"] = km.labels_[0..20].compute();
}
// A lazy array as init is computed first: the same fit.
let km = KMeans(#{n_clusters: 6, init: Xb[0..6]}).fit(Xb);
r.km_transform_head = km.transform(Xb)[0..3].compute();
r.km_score = km.score(Xb);
let pp = KMeans(#{n_clusters: 6, random_state: 0}).fit(Xb);
r.kmpp_inertia = pp.inertia_;
r.kmpp_labels = pp.predict(Xb).compute();
r.kmpp_passes = pp.n_passes_;
r.kmpp_n_iter = pp.n_iter_;
r.kmpp_init_passes = pp.n_init_passes_;
// Greedy k-means++ alone (one Lloyd step cannot mend a bad start on separated blobs).
let p2 = KMeans(#{n_clusters: 6, init: "k-means++", max_iter: 1, random_state: 3}).fit(Xb);
r.kmpp2_inertia = p2.inertia_;
r.kmpp2_labels = p2.predict(Xb).compute();
r.kmpp2_init_passes = p2.n_init_passes_;

let Xk = from_npy(D + "/Xk.npy", #{chunks: [700, -1]});
let Xf = from_npy(D + "/Xf.npy", #{chunks: [700, -1]});
let given = #{categories: [[0, 1, 2], [10, 20]], handle_unknown: "ignore"};
for run in [["oh", Xk, #{}], ["ohf", Xf, #{}], ["oh_first", Xk, #{drop: "first"}], ["oh_bin", Xk, #{drop: "if_binary"}], ["oh_given", Xk, given]] {
    let enc = OneHotEncoder(run[2]).fit(run[1]);
    let Z = enc.transform(run[1]);
    r[run[0] + "_sum"] = Z.sum(0).compute();
    r[run[0] + "_head"] = Z[0..6].compute();
    r[run[0] + "_cats0"] = enc.categories_[0];
    r[run[0] + "_cats1"] = enc.categories_[1];
}

let Xl = from_npy(D + "/Xl.npy", #{chunks: [700, -1]});
for run in [["lg", "yl"], ["lgm", "ym"]] {
    let tag = run[0];
    let yl = from_npy(D + "/" + run[1] + ".npy", #{chunks: 800});
    let lg = LogisticRegression(#{tol: 1e-10, max_iter: 1000}).fit(Xl, yl);
    r[tag + "_coef"] = lg.coef_;
    r[tag + "_intercept"] = lg.intercept_;
    r[tag + "_classes"] = lg.classes_;
    r[tag + "_proba_head"] = lg.predict_proba(Xl)[0..5].compute();
    r[tag + "_decision_head"] = lg.decision_function(Xl)[0..5].compute();
    r[tag + "_predict_head"] = lg.predict(Xl)[0..20].compute();
    r[tag + "_score"] = lg.score(Xl, yl);
    r[tag + "_log_loss"] = log_loss(yl, lg.predict_proba(Xl));
    r[tag + "_default_coef"] = LogisticRegression().fit(Xl, yl).coef_;
    if tag == "lg" { r.lg_passes = lg.n_passes_ <= lg.n_iter_ * 3 / 2 + 2; }
}
// Newton's method reaches the same optimum in a few passes.
for run in [["lgn", "yl"], ["lgmn", "ym"]] {
    let yl = from_npy(D + "/" + run[1] + ".npy", #{chunks: 800});
    let lg = LogisticRegression(#{solver: "newton", tol: 1e-10, max_iter: 100}).fit(Xl, yl);
    r[run[0] + "_coef"] = lg.coef_;
    r[run[0] + "_intercept"] = lg.intercept_;
    r[run[0] + "_few"] = lg.n_iter_ <= 12 && lg.n_passes_ <= 2 * lg.n_iter_ + 1;
}
// DataFrame columns as X and y, converted block by block.
let df = read_csv(D + "/lg.csv", #{blocksize: 40000});
let lgdf = LogisticRegression(#{tol: 1e-10, max_iter: 1000}).fit(df[["x0", "x1", "x2", "x3", "x4"]], df["y"]);
r.lgdf_coef = lgdf.coef_;
r.lgdf_classes = lgdf.classes_;
r.lgdf_rows = df.drop(["y"]).to_dask_array().shape[0];
let yl = from_npy(D + "/yl.npy", #{chunks: 800});
r.lg_nopenalty_coef = LogisticRegression(#{penalty: (), tol: 1e-10, max_iter: 1000}).fit(Xl, yl).coef_;
r.lg_c_coef = LogisticRegression(#{C: 0.01, tol: 1e-10, max_iter: 1000}).fit(Xl, yl).coef_;

let yp = lr.predict(X);
r.r2 = r2_score(y, yp);
r.mse = mean_squared_error(y, yp);
r.r2_const = r2_score(from_array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]), full([10], 2.0));
r.accuracy = accuracy_score(from_npy(D + "/labels_true.npy", #{chunks: 128}), from_npy(D + "/labels_pred.npy", #{chunks: 100}));

let parts = train_test_split(X, y, #{test_size: 0.2, random_state: 3});
r.split_shapes = parts.map(|p| p.shape);
r.split_sums = [(parts[0].sum() + parts[1].sum()).compute(), (parts[2].sum() + parts[3].sum()).compute()];
let again = train_test_split(X, y, #{test_size: 0.2, random_state: 3});
r.split_same_rows = (again[1] == parts[1]).all().compute() && (again[3] == parts[3]).all().compute();
// Rows stay whole: each test row's y is its X row's prediction, as before the split.
let fit_rows = (lr.predict(parts[1]) - parts[3]).std().compute() < 0.2;
let other = train_test_split(X, y, #{test_size: 0.2, random_state: 4});
r.split_all_rows = fit_rows && !(other[1] == parts[1]).all().compute();
r.passes = lr.n_passes_ == 1 && PCA(#{n_components: 2}).fit(Xp).n_passes_ == 1
    && PCA(#{n_components: 2, svd_solver: "tsqr"}).fit(Xp).n_passes_ == 1
    && TruncatedSVD(#{n_components: 2, algorithm: "tsqr"}).fit(Xp.rechunk([5, -1])).n_passes_ == 1;
r.pca_tsqr_short_evr = PCA(#{n_components: 3, svd_solver: "tsqr"}).fit(Xp.rechunk([5, -1])).explained_variance_ratio_;

let Xq = from_npy(D + "/Xq.npy", #{chunks: [500, -1]});
let yq = from_npy(D + "/yq.npy", #{chunks: 500});
let pq = PoissonRegression(#{tol: 1e-10, max_iter: 1000}).fit(Xq, yq);
r.pois_coef = pq.coef_;
r.pois_intercept = pq.intercept_;
r.pois_pred_head = pq.predict(Xq)[0..4].compute();
r.pois_score = pq.score(Xq, yq);
r.pois0_coef = PoissonRegression(#{alpha: 0.0, tol: 1e-10, max_iter: 1000}).fit(Xq, yq).coef_;
r.pois_default_coef = PoissonRegression().fit(Xq, yq).coef_;

let errors = #{};
fn failure(f) { try { f.call(); } catch (e) { return "" + e; } "" }
errors.rows = failure(|| LinearRegression().fit(X, y[0..4999]));
errors.nan = failure(|| LinearRegression().fit(Xn, y[0..400]));
errors.option = failure(|| Ridge(#{alpah: 1.0}));
errors.components = failure(|| PCA(#{n_components: 9}).fit(Xp));
errors.unfitted = failure(|| LinearRegression().coef_);
errors.features = failure(|| lr.predict(Xp));
errors.split = failure(|| train_test_split(X, #{test_size: 1.5}));
errors.one_d = failure(|| StandardScaler().fit(y));
errors.clusters = failure(|| KMeans(#{n_clusters: 6}).fit(Xb[0..5]));
errors.init = failure(|| KMeans(#{n_clusters: 6, init: [[1.0, 2.0], [3.0, 4.0]]}).fit(Xb));
errors.ragged = failure(|| KMeans(#{n_clusters: 2, init: [[1.0, 2.0, 3.0], [4.0]]}));
errors.one_class = failure(|| LogisticRegression().fit(Xl, full([3000], 1)));
errors.continuous = failure(|| LogisticRegression().fit(Xl, Xl.sum(1)));
errors.km_features = failure(|| km.score(Xp));
errors.solver = failure(|| LogisticRegression(#{solver: "saga"}));
errors.oh_unknown_fit = failure(|| OneHotEncoder(#{categories: [[0, 1, 2], [10, 20]]}).fit(Xk));
errors.oh_unknown = failure(|| OneHotEncoder().fit(Xk[0..2]).transform(Xk).compute());
errors.frame_str = failure(|| LinearRegression().fit(from_columns(#{s: ["a", "b"]}), from_array([1.0, 2.0])));
errors.oh_drop = failure(|| OneHotEncoder(#{drop: "last"}));
errors.pois_negative = failure(|| PoissonRegression().fit(Xq, yq - 100));
r.errors = errors;
r
"#;

#[test]
fn estimators_agree_with_scikit_learn() {
    let Some(py) = python(&SKLEARN) else { return };
    let reference = Reference::generate(py, "sklearn_ml.py", "ml");
    for scheduler in SCHEDULERS {
        reference.check(scheduler, "", CASES, "<ml>", "scikit-learn");
    }
    let _ = std::fs::remove_dir_all(&reference.dir);
}
