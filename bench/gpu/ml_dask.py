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
import statistics
import sys
import time
import traceback

import cupy as cp
import dask
import dask.array as da

K, REPS = 16, 3
ROWS = int(__import__("os").environ.get("GML5_ROWS", 2_500_000))
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


def timed(f, reps=REPS):
    times, out = [], None
    for i in range(reps + 1):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        out = f()
        cp.cuda.Device().synchronize()
        s = time.perf_counter() - t0
        if i > 0:
            times.append(s)
        elif s > 30:
            # A slow fit: its warm-up is the one measurement.
            return s, out, 1
    return statistics.median(times), out, len(times)


def lloyd():
    from dask_ml.cluster import KMeans

    c0 = X[:K].compute()
    m = KMeans(n_clusters=K, init=c0, max_iter=10, tol=0.0, random_state=0).fit(X)
    return {"n_iter": int(m.n_iter_), "inertia": float(m.inertia_)}


def logistic():
    from dask_ml.linear_model import LogisticRegression

    m = LogisticRegression(solver="lbfgs", C=1.0, max_iter=100, tol=1e-4).fit(X, y)
    coef = m.coef_
    return {"coef0": float(coef.ravel()[0]), "n_iter": int(getattr(m, "n_iter_", -1) or -1)}


def pca():
    from dask_ml.decomposition import PCA

    m = PCA(n_components=10, svd_solver="full").fit(X)
    return {"evr0": float(m.explained_variance_ratio_[0])}


def run(name, f):
    row = {"bench": name, "engine": "dask+cupy+dask-ml", "n": N, "p": P, "dtype": str(X.dtype),
           "dask": dask.__version__}
    try:
        s, out, reps = timed(f)
        row.update({"seconds": s, "runs": reps, **out})
        if name.startswith("GML1"):
            row["per_iter"] = s / 10
    except Exception as e:  # noqa: BLE001 - a failure is a result here
        row["error"] = f"{type(e).__name__}: {e}"[:500]
        row["trace"] = traceback.format_exc()[-1500:]
    print(json.dumps(row), flush=True)


data(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000_000, 50, cp.float32)
run("GML1", lloyd)
run("GML3", logistic)
run("GML4", pca)
