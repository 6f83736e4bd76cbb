"""GML5 (issue 27, ../shared/reference/ml.md §6.3): Dask + CuPy running
dask-ml on the GML1/GML3/GML4 workloads, the Dask anchor of brisk's GPU
estimators. X lives on the GPU as CuPy blocks of 2.5M rows, persisted
first; each fit is timed from the call to the fitted model (one warm-up,
then the median of REPS, with a device synchronize). A fit that fails on
CuPy blocks is reported with its error, not skipped. One JSON line per
result.

The lent machine has no Dask: carry the wheels (bench/gpu/README in the
shared folder says how) and install them with --no-index first.

    python3 bench/gpu/ml_dask.py [N]
"""
import json
import os
import statistics
import sys
import time
import traceback

import cupy as cp
import dask
import dask.array as da
import numpy as np

K, REPS = 16, 3
ROWS = int(os.environ.get("GML5_ROWS", 2_500_000))
X = y = None
N = P = 0


def data(n, p, dtype):
    global X, y, N, P
    X = y = None
    cp.get_default_memory_pool().free_all_blocks()
    N, P = n, p
    g = cp.random.default_rng(7)
    x = g.standard_normal((n, p), dtype=cp.float64).astype(dtype)
    w = g.standard_normal(p, dtype=cp.float64).astype(dtype)
    t = ((x @ w + 2.0 * g.standard_normal(n, dtype=cp.float64).astype(dtype)) > 0).astype(dtype)
    X = da.from_array(x, chunks=(ROWS, p), asarray=False).persist()
    y = da.from_array(t, chunks=(ROWS,), asarray=False).persist()
    cp.cuda.Device().synchronize()


def once(f):
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    out = f()
    cp.cuda.Device().synchronize()
    return time.perf_counter() - t0, out


def timed(f):
    """Median of REPS after a warm-up; one run after a warm-up over 10 s,
    and the warm-up alone (reported as such) when it takes over a minute."""
    warm, out = once(f)
    if warm > 60:
        return warm, out, 0
    times = []
    for _ in range(REPS if warm <= 10 else 1):
        s, out = once(f)
        times.append(s)
    return statistics.median(times), out, len(times)


def lloyd():
    from dask_ml.cluster import KMeans

    c0 = X[:K].compute()
    m = KMeans(n_clusters=K, init=c0, max_iter=10, tol=0.0, random_state=0).fit(X)
    return {"n_iter": int(m.n_iter_), "inertia": float(m.inertia_)}


def dask_lloyd():
    """The same 10 Lloyd steps written in dask.array over the CuPy blocks,
    for when dask-ml's KMeans cannot run on them."""
    c = X[:K].compute()
    for _ in range(10):
        cc = (c * c).sum(1)
        d = X.map_blocks(lambda b, c=c, cc=cc: cc[None, :] - 2.0 * (b @ c.T), chunks=(X.chunks[0], (K,)),
                         dtype=X.dtype)
        lab = d.argmin(axis=1)
        hot = lab.map_blocks(lambda l: (l[:, None] == cp.arange(K)[None, :]).astype(cp.float64),
                             new_axis=1, chunks=(lab.chunks[0], (K,)), dtype="f8")
        sums, cnt = da.compute(hot.T @ X.astype("f8"), hot.sum(0))
        c = (sums / cp.maximum(cnt, 1)[:, None]).astype(X.dtype)
    return {"center00": float(c[0, 0])}


def logistic():
    from dask_ml.linear_model import LogisticRegression

    m = LogisticRegression(solver="lbfgs", C=1.0, max_iter=100, tol=1e-4).fit(X, y)
    coef = m.coef_
    return {"coef0": float(coef.ravel()[0]), "n_iter": int(getattr(m, "n_iter_", -1) or -1)}


def logistic_own_intercept(solver="lbfgs"):
    """dask-ml's lbfgs with the intercept column made on the device (its own
    is made with NumPy and cannot join CuPy blocks) and dask-glm's
    normalisation off (it mixes NumPy and CuPy too): the same work."""
    from dask_ml.linear_model import LogisticRegression

    ones = X[:, :1].map_blocks(lambda b: cp.ones_like(b))
    X1 = da.concatenate([X, ones], axis=1).rechunk({1: P + 1})
    m = LogisticRegression(solver=solver, C=1.0, max_iter=100, tol=1e-4, fit_intercept=False,
                           solver_kwargs={"normalize": False}).fit(X1, y)
    return {"coef0": float(m.coef_.ravel()[0])}


def dask_lbfgs():
    """dask-glm's lbfgs written over the CuPy blocks by hand, for when
    dask-ml cannot fit on them: scipy's L-BFGS-B drives, each evaluation one
    dask.array computation of scikit-learn's loss and gradient (C = 1,
    intercept unpenalised)."""
    from scipy.optimize import minimize

    evals = [0]

    def f(wb):
        evals[0] += 1
        w = cp.asarray(wb[:P], dtype=X.dtype)
        b = float(wb[P])
        z = X.map_blocks(lambda x, w=w: x @ w, drop_axis=1, dtype=X.dtype) + b
        # log(1 + e^z) − y·z, stably; its derivative σ(z) − y.
        loss = (da.logaddexp(0, z) - y * z).astype("f8").sum()
        r = (1.0 / (1.0 + da.exp(-z)) - y).astype("f8")
        g = X.map_blocks(lambda x, r: (x.astype(cp.float64).T @ r)[None, :], r[:, None],
                         chunks=((1,) * X.numblocks[0], (P,)), dtype="f8").sum(0)
        loss, g, gb = da.compute(loss, g, r.sum())
        wn = wb[:P]
        grad = cp.asnumpy(cp.concatenate([cp.asarray(g).ravel() + cp.asarray(wn), cp.asarray([gb])]))
        return float(loss) + 0.5 * float((wn * wn).sum()), grad

    res = minimize(f, np.zeros(P + 1), jac=True, method="L-BFGS-B",
                   options={"maxiter": 100, "gtol": 1e-4})
    return {"coef0": float(res.x[0]), "n_iter": int(res.nit), "evaluations": evals[0]}


def pca():
    from dask_ml.decomposition import PCA

    m = PCA(n_components=10, svd_solver="full").fit(X)
    return {"evr0": float(m.explained_variance_ratio_[0])}


def run(name, f):
    only = os.environ.get("GML5_ONLY")
    if only and not any(name.startswith(o) for o in only.split(",")):
        return
    row = {"bench": name, "engine": "dask+cupy+dask-ml", "n": N, "p": P, "dtype": str(X.dtype),
           "dask": dask.__version__}
    try:
        s, out, reps = timed(f)
        row.update({"seconds": s, "runs": reps, **out})
        if reps == 0:
            row["note"] = "the first (cold) run only"
        if name.startswith("GML1"):
            row["per_iter"] = s / 10
    except Exception as e:  # noqa: BLE001 - a failure is a result here
        row["error"] = f"{type(e).__name__}: {e}"[:500]
        row["trace"] = traceback.format_exc()[-1500:]
    print(json.dumps(row), flush=True)


data(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000_000, 50, cp.float32)
run("GML1", lloyd)
run("GML1-dask.array", dask_lloyd)
run("GML3", logistic)
for solver in ["lbfgs", "newton", "gradient_descent"]:
    # dask-glm's lbfgs passes scipy an option newer scipy refuses; the
    # other solvers show whether Dask + CuPy can fit the model at all.
    run(f"GML3-own-intercept-{solver}", lambda solver=solver: logistic_own_intercept(solver))
run("GML3-dask.array", dask_lbfgs)
run("GML4", pca)
