"""Reference results for the estimator tests (script-lang/tests/ml.rs),
computed by scikit-learn on the same .npy files brisk reads.

    python3 sklearn_ml.py gen DIR          # write the inputs
    python3 sklearn_ml.py check DIR FILE   # compare brisk's JSON in FILE

`check` prints every mismatch and exits 1 if there is one. Tolerances are
the issue's: linear coefficients to 1e-8 relative, PCA's explained
variance ratio to 1e-6 and components' |cos| >= 0.9999, scalers'
statistics to 1e-12.
"""

import json
import math
import os
import sys

import numpy as np
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA, TruncatedSVD
from sklearn.linear_model import LinearRegression, LogisticRegression, PoissonRegressor, Ridge
from sklearn.metrics import accuracy_score, adjusted_rand_score, log_loss, mean_squared_error, r2_score
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler


def gen(d):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(20261128)
    n, p = 5000, 8
    # Offsets and scales far apart: a column of mean 1e3 keeps its variance.
    X = rng.normal(size=(n, p)) * np.linspace(0.5, 4.0, p) + np.array([1e3, -5, 0, 2, 0, 0, 7, 0.5])
    w = rng.normal(size=p)
    y = X @ w + 3.0 + rng.normal(size=n) * 0.1
    np.save(os.path.join(d, "X.npy"), X)
    np.save(os.path.join(d, "y.npy"), y)
    # Two equal columns: least squares has many solutions; the minimum-norm one.
    Xc = np.column_stack([X[:, :3], X[:, 2]])
    np.save(os.path.join(d, "Xc.npy"), Xc)
    # Correlated features for PCA, in f32 too.
    M = rng.normal(size=(6, 6))
    Xp = rng.normal(size=(3000, 6)) @ M + 10.0
    np.save(os.path.join(d, "Xp.npy"), Xp)
    np.save(os.path.join(d, "Xp32.npy"), Xp.astype(np.float32))
    # NaN in some cells, a constant column.
    Xn = rng.normal(size=(400, 4)) * 3 + 1
    Xn[rng.random(size=(400, 4)) < 0.05] = np.nan
    Xn[:, 3] = 2.5
    np.save(os.path.join(d, "Xn.npy"), Xn)
    # Separated blobs for KMeans, with their true labels.
    centres = rng.normal(size=(6, 5)) * 10
    yb = rng.integers(0, 6, size=4000)
    Xb = centres[yb] + rng.normal(size=(4000, 5))
    np.save(os.path.join(d, "Xb.npy"), Xb)
    np.save(os.path.join(d, "yb.npy"), yb)
    # Classes drawn from a logistic (two) and a softmax (three) model.
    Xl = rng.normal(size=(3000, 5))
    yl = (rng.random(3000) < 1 / (1 + np.exp(-(Xl @ rng.normal(size=5) + 0.5)))).astype(np.int64)
    z = Xl @ rng.normal(size=(3, 5)).T
    pm = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    ym = (pm.cumsum(1) < rng.random(size=(3000, 1))).sum(1).astype(np.int64)
    np.save(os.path.join(d, "Xl.npy"), Xl)
    np.save(os.path.join(d, "yl.npy"), yl)
    np.save(os.path.join(d, "ym.npy"), ym)
    # The same rows as a CSV file, for DataFrame columns as X and y.
    with open(os.path.join(d, "lg.csv"), "w") as fh:
        fh.write("x0,x1,x2,x3,x4,y\n")
        for row, label in zip(Xl, yl):
            fh.write(",".join(repr(float(v)) for v in row) + f",{label}\n")
    # Counts from a log-linear model.
    Xq = rng.normal(size=(2000, 4)) * 0.5
    yq = rng.poisson(np.exp(Xq @ np.array([0.8, -0.4, 0.2, 0.0]) + 0.5)).astype(np.int64)
    np.save(os.path.join(d, "Xq.npy"), Xq)
    np.save(os.path.join(d, "yq.npy"), yq)
    # Categories: small integers, and floats with NaN as a category of its own.
    Xk = np.column_stack([rng.integers(0, 5, 3000), rng.integers(1, 3, 3000) * 10]).astype(np.int64)
    np.save(os.path.join(d, "Xk.npy"), Xk)
    np.save(os.path.join(d, "Xf.npy"), rng.choice([-1.5, 0.0, 2.5, np.nan], size=(3000, 2)))
    # Labels for the accuracy.
    np.save(os.path.join(d, "labels_true.npy"), rng.integers(0, 3, size=500))
    np.save(os.path.join(d, "labels_pred.npy"), rng.integers(0, 3, size=500))


def load(d, name):
    return np.load(os.path.join(d, name + ".npy"))


def expected(d):
    X, y, Xc, Xp, Xn = (load(d, k) for k in ["X", "y", "Xc", "Xp", "Xn"])
    out = {}
    lr = LinearRegression().fit(X, y)
    out["lr_coef"] = (lr.coef_, 1e-8)
    out["lr_intercept"] = (lr.intercept_, 1e-8)
    out["lr_score"] = (lr.score(X, y), 1e-10)
    out["lr_predict_head"] = (lr.predict(X[:5]), 1e-9)
    lr0 = LinearRegression(fit_intercept=False).fit(X, y)
    out["lr0_coef"] = (lr0.coef_, 1e-8)
    out["lr0_intercept"] = (0.0, 0)
    lrc = LinearRegression().fit(Xc, y)
    out["lrc_coef"] = (lrc.coef_, 1e-7)
    rg = Ridge(alpha=10.0).fit(X, y)
    out["ridge_coef"] = (rg.coef_, 1e-8)
    out["ridge_intercept"] = (rg.intercept_, 1e-8)
    rg0 = Ridge(alpha=0.5, fit_intercept=False).fit(X, y)
    out["ridge0_coef"] = (rg0.coef_, 1e-8)

    ss = StandardScaler().fit(Xn)
    out["ss_mean"] = (ss.mean_, 1e-12)
    out["ss_var"] = (ss.var_, 1e-12)
    out["ss_scale"] = (ss.scale_, 1e-12)
    out["ss_n"] = (ss.n_samples_seen_, 0)
    out["ss_t"] = (ss.transform(Xn), 1e-12)
    sx = StandardScaler().fit(X)
    out["sx_var"] = (sx.var_, 1e-12)
    out["sx_n"] = (sx.n_samples_seen_, 0)
    out["sx_inverse"] = (sx.inverse_transform(sx.transform(X))[:3], 1e-12)
    nm = StandardScaler(with_mean=False).fit(X)
    out["nm_t_head"] = (nm.transform(X)[:3], 1e-12)
    mm = MinMaxScaler(feature_range=(-1, 2)).fit(Xn)
    out["mm_min"] = (mm.data_min_, 0)
    out["mm_max"] = (mm.data_max_, 0)
    out["mm_scale"] = (mm.scale_, 1e-12)
    out["mm_min_"] = (mm.min_, 1e-12)
    out["mm_t"] = (mm.transform(Xn), 1e-12)

    for tag, solver in [("pca", "auto"), ("pca_tsqr", "full"), ("pca_rand", "randomized")]:
        pc = PCA(n_components=3, svd_solver=solver).fit(Xp)
        out[f"{tag}_components"] = (pc.components_, "cos")
        out[f"{tag}_evr"] = (pc.explained_variance_ratio_, 1e-6)
        out[f"{tag}_ev"] = (pc.explained_variance_, 1e-6)
        out[f"{tag}_sv"] = (pc.singular_values_, 1e-6)
        out[f"{tag}_mean"] = (pc.mean_, 1e-12)
        out[f"{tag}_noise"] = (pc.noise_variance_, 1e-6)
        out[f"{tag}_t_head"] = (pc.transform(Xp[:4]), 1e-6)
    # brisk's TSQR takes row blocks shorter than X is wide (5 rows of 6).
    out["pca_tsqr_short_evr"] = (PCA(n_components=3, svd_solver="full").fit(Xp).explained_variance_ratio_, 1e-6)
    # TruncatedSVD: X itself, not centred. With 6 features the range finder
    # (3 + 10 columns) spans them all, so the randomized answer is exact.
    for tag, algorithm in [("tsvd", "randomized"), ("tsvd_tsqr", "arpack")]:
        ts = TruncatedSVD(n_components=3, algorithm=algorithm, random_state=0).fit(Xp)
        out[f"{tag}_components"] = (ts.components_, "cos")
        out[f"{tag}_sv"] = (ts.singular_values_, 1e-6)
        out[f"{tag}_ev"] = (ts.explained_variance_, 1e-6)
        out[f"{tag}_evr"] = (ts.explained_variance_ratio_, 1e-6)
        out[f"{tag}_t_head"] = (ts.transform(Xp[:4]), 1e-6)
    pw = PCA(n_components=2, whiten=True).fit(Xp)
    out["pca_whiten_t_head"] = (pw.transform(Xp[:4]), 1e-6)
    out["pca_whiten_back"] = (pw.inverse_transform(pw.transform(Xp[:2])), 1e-6)
    pall = PCA().fit(Xp)
    out["pca_all_evr"] = (pall.explained_variance_ratio_, 1e-6)
    p32 = PCA(n_components=2).fit(load(d, "Xp32").astype(np.float64))
    out["pca32_evr"] = (p32.explained_variance_ratio_, 1e-5)

    Xb = load(d, "Xb")
    for tag, iters, tol in [("km", 300, 1e-4), ("km3", 3, 0.0)]:
        km = KMeans(n_clusters=6, init=Xb[:6], n_init=1, max_iter=iters, tol=tol).fit(Xb)
        out[f"{tag}_centers"] = (km.cluster_centers_, 1e-9)
        out[f"{tag}_inertia"] = (km.inertia_, 1e-9)
        out[f"{tag}_n_iter"] = (km.n_iter_, 0)
        out[f"{tag}_labels_head"] = (km.labels_[:20], 0)
    km = KMeans(n_clusters=6, init=Xb[:6], n_init=1).fit(Xb)
    out["km_transform_head"] = (km.transform(Xb[:3]), 1e-9)
    out["km_score"] = (km.score(Xb), 1e-9)
    best = KMeans(n_clusters=6, random_state=0).fit(Xb)
    out["kmpp_inertia_ratio"] = (1.0, 0.01)
    out["kmpp_passes_ok"] = (1.0, 0)
    out["kmpp2_inertia_ratio"] = (1.0, 0.01)
    out["kmpp2_init_passes"] = (6, 0)
    out["_kmpp_inertia"] = best.inertia_

    Xk, Xf = load(d, "Xk"), load(d, "Xf")
    given = {"categories": [[0, 1, 2], [10, 20]], "handle_unknown": "ignore"}
    for tag, Xe, kw in [
        ("oh", Xk, {}),
        ("ohf", Xf, {}),
        ("oh_first", Xk, {"drop": "first"}),
        ("oh_bin", Xk, {"drop": "if_binary"}),
        ("oh_given", Xk, given),
    ]:
        enc = OneHotEncoder(sparse_output=False, **kw).fit(Xe)
        Z = enc.transform(Xe)
        out[f"{tag}_sum"] = (Z.sum(0), 0)
        out[f"{tag}_head"] = (Z[:6], 0)
        out[f"{tag}_cats0"] = (enc.categories_[0], 0)
        out[f"{tag}_cats1"] = (enc.categories_[1], 0)

    Xl = load(d, "Xl")
    for tag, ylab in [("lg", load(d, "yl")), ("lgm", load(d, "ym"))]:
        # Both solvers run to a tight tolerance: the same optimum.
        lg = LogisticRegression(tol=1e-10, max_iter=1000).fit(Xl, ylab)
        out[f"{tag}_coef"] = (lg.coef_, 1e-6)
        out[f"{tag}_intercept"] = (lg.intercept_, 1e-6)
        out[f"{tag}_classes"] = (lg.classes_, 0)
        out[f"{tag}_proba_head"] = (lg.predict_proba(Xl[:5]), 1e-6)
        out[f"{tag}_decision_head"] = (lg.decision_function(Xl[:5]), 1e-6)
        out[f"{tag}_predict_head"] = (lg.predict(Xl[:20]), 0)
        out[f"{tag}_score"] = (lg.score(Xl, ylab), 1e-12)
        out[f"{tag}_log_loss"] = (log_loss(ylab, lg.predict_proba(Xl)), 1e-6)
        ntag = {"lg": "lgn", "lgm": "lgmn"}[tag]
        out[f"{ntag}_coef"] = (lg.coef_, 1e-6)
        out[f"{ntag}_intercept"] = (lg.intercept_, 1e-6)
        # At the default tolerance both stop near it.
        out[f"{tag}_default_coef"] = (LogisticRegression().fit(Xl, ylab).coef_, 2e-3)
    out["lg_nopenalty_coef"] = (LogisticRegression(penalty=None, tol=1e-10, max_iter=1000).fit(Xl, load(d, "yl")).coef_, 1e-6)
    lg = LogisticRegression(tol=1e-10, max_iter=1000).fit(Xl, load(d, "yl"))
    out["lgdf_coef"] = (lg.coef_, 1e-6)
    out["lgdf_classes"] = (lg.classes_, 0)
    out["lgdf_rows"] = (3000, 0)
    out["lg_c_coef"] = (LogisticRegression(C=0.01, tol=1e-10, max_iter=1000).fit(Xl, load(d, "yl")).coef_, 1e-6)

    Xq, yq = load(d, "Xq"), load(d, "yq").astype(float)
    pq = PoissonRegressor(tol=1e-10, max_iter=1000).fit(Xq, yq)
    out["pois_coef"] = (pq.coef_, 1e-6)
    out["pois_intercept"] = (pq.intercept_, 1e-6)
    out["pois_pred_head"] = (pq.predict(Xq[:4]), 1e-6)
    out["pois_score"] = (pq.score(Xq, yq), 1e-8)
    out["pois0_coef"] = (PoissonRegressor(alpha=0.0, tol=1e-10, max_iter=1000).fit(Xq, yq).coef_, 1e-6)
    out["pois_default_coef"] = (PoissonRegressor().fit(Xq, yq).coef_, 2e-3)

    yp = lr.predict(X)
    out["r2"] = (r2_score(y, yp), 1e-10)
    out["mse"] = (mean_squared_error(y, yp), 1e-8)
    out["r2_const"] = (r2_score(np.ones(10), np.ones(10) * 2), 0)
    out["accuracy"] = (accuracy_score(load(d, "labels_true"), load(d, "labels_pred")), 1e-12)
    n = len(X)
    n_test = math.ceil(0.2 * n)
    out["split_shapes"] = ([[n - n_test, 8], [n_test, 8], [n - n_test], [n_test]], 0)
    out["split_sums"] = ([X.sum(), y.sum()], 1e-9)
    return out


def close(got, want, tol):
    if tol == "cos":
        g, w = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
        if g.shape != w.shape:
            return False
        cos = np.abs(np.sum(g * w, axis=1)) / (np.linalg.norm(g, axis=1) * np.linalg.norm(w, axis=1))
        # The same direction, and the same sign convention (svd_flip).
        return bool(np.all(cos >= 0.9999)) and np.allclose(g, w, atol=1e-5)
    if isinstance(want, list) and tol == 0:
        return got == want
    g = np.asarray([np.nan if v is None else v for v in np.ravel(np.asarray(got, dtype=object))], dtype=float)
    w = np.ravel(np.asarray(want, dtype=float))
    if g.shape != w.shape or np.asarray(got, dtype=object).shape != np.asarray(want).shape:
        return False
    if tol == 0:
        return bool(np.array_equal(g, w, equal_nan=True))
    scale = max(float(np.nanmax(np.abs(w))) if w.size else 0.0, 1e-300)
    return bool(np.all((np.abs(g - w) <= tol * scale) | (np.isnan(g) & np.isnan(w))))


def check(d, path):
    with open(path) as fh:
        got = json.load(fh)
    want = expected(d)
    # k-means‖ is random: its inertia within 1% of scikit-learn's k-means++
    # fit, and its clusters the true ones (adjusted Rand index >= 0.99).
    sk_inertia = want.pop("_kmpp_inertia")
    got["kmpp_inertia_ratio"] = got["kmpp_inertia"] / sk_inertia
    got["kmpp2_inertia_ratio"] = got["kmpp2_inertia"] / sk_inertia
    ari = adjusted_rand_score(load(d, "yb"), np.asarray(got["kmpp_labels"]))
    if ari < 0.99:
        print(f"kmpp: adjusted Rand index {ari}")
    # Greedy k-means++ followed by one Lloyd step finds every blob.
    ari2 = adjusted_rand_score(load(d, "yb"), np.asarray(got["kmpp2_labels"]))
    if ari2 < 0.99:
        print(f"kmpp2: adjusted Rand index {ari2}")
    ari = min(ari, ari2)
    # 5 rounds of k-means‖ take 7 passes; each iteration one, and one more
    # for the final inertia unless the centres stood still.
    extra = got["kmpp_passes"] - got["kmpp_n_iter"] - got["kmpp_init_passes"]
    got["kmpp_passes_ok"] = 1.0 if got["kmpp_init_passes"] == 7 and extra in (0, 1) else 0.0
    bad = 1 if ari < 0.99 else 0
    for k, (v, tol) in want.items():
        if k not in got:
            print(f"{k}: missing from brisk's results")
            bad += 1
        elif not close(got[k], v, tol):
            print(f"{k}: brisk {json.dumps(got[k])[:600]}\n   scikit-learn {np.asarray(v).tolist()!s:.600}")
            bad += 1
    errors = got.get("errors", {})
    for k, needle in EXPECTED_ERRORS.items():
        if needle not in errors.get(k, ""):
            print(f"error {k}: {errors.get(k)!r} does not say {needle!r}")
            bad += 1
    for k in ["split_same_rows", "split_all_rows", "passes", "lg_passes", "lgn_few", "lgmn_few"]:
        if got.get(k) is not True:
            print(f"{k}: {got.get(k)!r}")
            bad += 1
    print(f"{len(want) + len(EXPECTED_ERRORS) - bad} checks agree")
    sys.exit(1 if bad else 0)


EXPECTED_ERRORS = {
    "rows": "X has 5000 rows but y has 4999",
    "nan": "LinearRegression: X or y contains NaN or infinity",
    "option": "no option \"alpah\"",
    "components": "n_components=9 must be between 1 and min(n_samples, n_features)=6",
    "unfitted": "coef_ is set by fit",
    "features": "X has 6 features, but the model was fitted on 8",
    "split": "test_size=1.5 must be in (0, 1)",
    "one_d": "X must be a 2-d array",
    "clusters": "n_samples=5 should be >= n_clusters=6",
    "init": "init has 4 values, but n_clusters × n_features is 6 × 5",
    "continuous": "LogisticRegression: unknown label type: continuous",
    "oh_unknown_fit": "OneHotEncoder: found unknown categories [3, 4] in column 0 during fit",
    "oh_unknown": "OneHotEncoder: found unknown categories [",
    "frame_str": "column \"s\" is string: only number and bool columns become an array",
    "oh_drop": "OneHotEncoder: drop must be (), \"first\" or \"if_binary\"",
    "km_features": "KMeans: X has 6 features, but the model was fitted on 5",
    "ragged": "KMeans: init's rows must all have the same length",
    "one_class": "needs samples of at least 2 classes in the data, but the data contains only one class: 1",
    "solver": "solver must be \"lbfgs\" or \"newton\" (\"newton-cholesky\"), got \"saga\"",
    "pois_negative": "PoissonRegression: some values of y are negative",
}


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
