"""The ML benchmarks (issue 27): brisk against dask-ml and scikit-learn on the
same .npy files, side by side in one run (../shared/reference/ml.md, section 6).

    bench/.venv/bin/python bench/ml_bench.py [ML1 ML2 ...] [--runs 3] [--other-runs 1]
                                             [--sides brisk,dask,sklearn] [--no-build]

brisk runs `--runs` times (the median is reported); Dask and scikit-learn,
which take tens of seconds a fit, `--other-runs` times.

Data are made once by NumPy (default_rng seeds, ml.md 6.4's recipes) under
bench/data/ml/. Every side runs in a fresh process per run and times the fit
alone: X is loaded first (brisk and Dask persist it in 100,000-row blocks,
scikit-learn holds it in memory). Each side prints one JSON line; the harness
records the median seconds, the peak RSS of the process (wait4), the passes
brisk made over X, and the quality of each answer against scikit-learn's on
the same data. Results are appended to bench/results/ml.jsonl. Peak RSS is
sampled every 20 ms with psutil.

Threads: 2 everywhere (Dask's threaded scheduler with 2 workers, scikit-learn's
BLAS and OpenMP as they come on a 2-core machine, brisk's 2 threads).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data", "ml")
PY = sys.executable
BRISK = os.environ.get("BRISK_BIN", os.path.join(ROOT, "target", "release", "brisk"))
CHUNK = 100_000

# (rows, features) of each workload's X; ML5t reads ML5's.
SHAPES = {"ML1": (2_000_000, 50), "ML2": (4_000_000, 50), "ML3": (2_000_000, 50),
          "ML4": (2_000_000, 50), "ML5": (2_000_000, 100), "ML6": (12_000_000, 50),
          # Larger than this machine's memory (32 GB of f64): read from disk
          # each pass, not persisted; scikit-learn cannot hold it.
          "ML2L": (80_000_000, 50)}
TARGETS = {  # brisk ÷ Dask, brisk ÷ scikit-learn (None: no target)
    "ML1": (0.15, 0.5), "ML2": (0.35, None), "ML3": (0.1, 0.5), "ML4": (0.05, 0.2),
    "ML5": (None, 0.5), "ML5t": (0.1, None), "ML6": (0.2, None), "ML2L": (None, None),
}


def save(path, a):
    """Write under a temporary name, then rename: an interrupted run leaves
    no truncated file that a later run would take for data."""
    import numpy as np
    tmp = path + ".tmp.npy"
    np.save(tmp, a)
    os.replace(tmp, path)


def gen(name):
    import numpy as np
    os.makedirs(DATA, exist_ok=True)
    key = name.lower()
    path = os.path.join(DATA, f"{key}_X.npy")
    if os.path.exists(path):
        return
    n, d = SHAPES[name]
    if name == "ML2L":
        # ML2's recipe in slabs of 1M rows written through a memory map, so
        # making it needs no more memory than a slab.
        rng = np.random.default_rng(6)
        centres = rng.normal(size=(16, d)) * 3
        tmp = path + ".tmp.npy"
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float64, shape=(n, d))
        for i in range(0, n, 1_000_000):
            m = min(1_000_000, n - i)
            out[i:i + m] = centres[rng.integers(0, 16, size=m)] + rng.normal(size=(m, d))
        out.flush()
        del out
        os.replace(tmp, path)
        return
    rng = np.random.default_rng({"ML1": 0, "ML2": 1, "ML3": 2, "ML4": 3, "ML5": 4, "ML6": 5}[name])
    if name in ("ML1", "ML2"):
        centres = rng.normal(size=(16, d)) * 3
        labels = rng.integers(0, 16, size=n)
        X = centres[labels]
        X += rng.normal(size=(n, d))
        save(os.path.join(DATA, f"{key}_labels.npy"), labels)
    elif name == "ML3":
        X = rng.normal(size=(n, d))
        w = rng.normal(size=d)
        y = (rng.random(n) < 1 / (1 + np.exp(-(X @ w)))).astype(np.int64)
        save(os.path.join(DATA, f"{key}_y.npy"), y)
    elif name == "ML4":
        X = rng.normal(size=(n, d))
        y = X @ rng.normal(size=d) + rng.normal(size=n)
        save(os.path.join(DATA, f"{key}_y.npy"), y)
    elif name == "ML5":
        X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d))
    else:
        X = rng.normal(size=(n, d))
    # X last: its file says the workload's data are complete.
    save(path, X)


# The Python sides: each prints one JSON line with "seconds" and its answer.
PYTHON_SIDE = r'''
import json, sys, time, os
import numpy as np
side, name, data = sys.argv[1], sys.argv[2], sys.argv[3]
key = {"ML5t": "ml5"}.get(name, name.lower())
big = name == "ML2L"
X = np.load(os.path.join(data, key + "_X.npy"), mmap_mode="r" if big else None)
y = np.load(os.path.join(data, key + "_y.npy")) if os.path.exists(os.path.join(data, key + "_y.npy")) else None
out = {}
if side == "dask":
    import dask, dask.array as da
    dask.config.set(scheduler="threads", num_workers=2)
    if big:
        # from_array copies anything with a .copy() (a memory map too):
        # hand it the map through a reader that has none, as an h5py dataset.
        class Rows:
            def __init__(self, m):
                self.m, self.shape, self.dtype, self.ndim = m, m.shape, m.dtype, m.ndim
            def __getitem__(self, idx):
                return np.asarray(self.m[idx])
        X = da.from_array(Rows(X), chunks=(100_000, X.shape[1]))
    else:
        X = da.from_array(X, chunks=(100_000, X.shape[1])).persist()
    if y is not None:
        y = da.from_array(y, chunks=100_000).persist()
    from dask_ml.cluster import KMeans
    from dask_ml.decomposition import PCA
    from dask_ml.linear_model import LinearRegression, LogisticRegression
    from dask_ml.preprocessing import StandardScaler
    from dask_ml.model_selection import train_test_split
else:
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.preprocessing import StandardScaler
    from sklearn.model_selection import train_test_split
t0 = time.perf_counter()
if name == "ML1":
    m = KMeans(n_clusters=16, random_state=0).fit(X) if side == "dask" else KMeans(n_clusters=16, random_state=0, n_init=1).fit(X)
    out = {"inertia": float(m.inertia_), "n_iter": int(m.n_iter_), "centers": np.asarray(m.cluster_centers_).tolist()}
elif name in ("ML2", "ML2L"):
    start = np.asarray(X[:16])
    m = KMeans(n_clusters=16, init=start, max_iter=10, tol=0.0, **({} if side == "dask" else {"n_init": 1})).fit(X)
    out = {"inertia": float(m.inertia_), "n_iter": int(m.n_iter_), "centers": np.asarray(m.cluster_centers_).tolist()}
elif name == "ML3":
    m = LogisticRegression(solver="lbfgs").fit(X, y)
    out = {"coef": np.asarray(m.coef_).ravel().tolist(), "intercept": float(np.ravel(m.intercept_)[0])}
elif name == "ML4":
    m = LinearRegression().fit(X, y)
    out = {"coef": np.asarray(m.coef_).ravel().tolist(), "intercept": float(np.ravel(m.intercept_)[0])}
elif name in ("ML5", "ML5t"):
    solver = "tsqr" if side == "dask" else ("full" if name == "ML5t" else "auto")
    m = PCA(n_components=10, svd_solver=solver).fit(X)
    out = {"evr": np.asarray(m.explained_variance_ratio_).tolist(), "components": np.asarray(m.components_).tolist()}
elif name == "ML6":
    s = StandardScaler().fit(X)
    total = s.transform(X).sum()
    parts = train_test_split(X, test_size=0.2, random_state=0)
    sums = [parts[0].sum(), parts[1].sum()]
    if side == "dask":
        total, sums = dask.compute(total, sums)
    out = {"mean": np.asarray(s.mean_).tolist(), "scale": np.asarray(s.scale_).tolist(),
           "transformed_sum": float(total), "part_sums": [float(v) for v in sums]}
out["seconds"] = time.perf_counter() - t0
print(json.dumps(out))
'''


def run_side(side, name):
    """One run in a fresh process: its JSON, wall seconds, peak RSS (MiB)."""
    if side == "brisk":
        script = os.path.join(HERE, "workloads", name.lower() + ".rhai")
        with open(script) as fh:
            text = f"let D = {json.dumps(DATA)};\n" + fh.read()
        tmp = tempfile.NamedTemporaryFile("w", suffix=".rhai", delete=False)
        tmp.write(text)
        tmp.close()
        cmd = [BRISK, "run", tmp.name]
    else:
        cmd = [PY, "-c", PYTHON_SIDE, side, name, DATA]
    import psutil
    t = time.time()
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True)
        # Peak RSS by sampling every 20 ms (the process's own high-water mark
        # is gone once it exits).
        peak = 0
        proc = psutil.Process(p.pid)
        while p.poll() is None:
            try:
                peak = max(peak, proc.memory_info().rss)
            except psutil.Error:
                pass
            time.sleep(0.02)
        code = p.returncode
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    wall = time.time() - t
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if code != 0 or not lines:
        return {"ok": False, "code": code, "stderr": err[-2000:], "wall": wall}
    return {"ok": True, "json": json.loads(lines[-1]), "wall": wall, "rss_mb": peak / 2**20}


def quality(name, got, ref):
    """How brisk's (or Dask's) answer compares with scikit-learn's."""
    import numpy as np
    q = {}
    if name in ("ML1", "ML2", "ML2L"):
        q["inertia_ratio"] = got["inertia"] / ref["inertia"]
        if name != "ML1":
            a, b = np.asarray(got["centers"]), np.asarray(ref["centers"])
            q["centers_rel_err"] = float(np.abs(a - b).max() / np.abs(b).max())
            q["n_iter"] = [got.get("n_iter"), ref["n_iter"]]
    elif name in ("ML3", "ML4"):
        a, b = np.ravel(got["coef"]), np.ravel(ref["coef"])
        q["coef_rel_err"] = float(np.abs(a - b).max() / np.abs(b).max())
    elif name in ("ML5", "ML5t"):
        a, b = np.asarray(got["evr"]), np.asarray(ref["evr"])
        q["evr_rel_err"] = float(np.abs(a - b).max() / np.abs(b).max())
        ca, cb = np.asarray(got["components"]), np.asarray(ref["components"])
        q["min_abs_cos"] = float((np.abs((ca * cb).sum(1)) / (np.linalg.norm(ca, axis=1) * np.linalg.norm(cb, axis=1))).min())
    elif name == "ML6":
        a, b = np.asarray(got["scale"]), np.asarray(ref["scale"])
        q["scale_rel_err"] = float(np.abs(a - b).max() / np.abs(b).max())
        q["mean_abs_err"] = float(np.abs(np.asarray(got["mean"]) - np.asarray(ref["mean"])).max())
    return q


def ari(name, centers):
    """ML1: the adjusted Rand index of the rows' nearest centres against the true labels."""
    import numpy as np
    from sklearn.metrics import adjusted_rand_score
    X = np.load(os.path.join(DATA, "ml1_X.npy"), mmap_mode="r")
    labels = np.load(os.path.join(DATA, "ml1_labels.npy"))
    c = np.asarray(centers)
    near = np.concatenate([((X[i:i + 200_000, None, :] - c[None]) ** 2).sum(2).argmin(1)
                           for i in range(0, len(X), 200_000)])
    return float(adjusted_rand_score(labels, near))


def main():
    args = sys.argv[1:]
    runs, other_runs = 3, 1
    if "--runs" in args:
        i = args.index("--runs")
        runs = int(args[i + 1])
        del args[i:i + 2]
    if "--other-runs" in args:
        i = args.index("--other-runs")
        other_runs = int(args[i + 1])
        del args[i:i + 2]
    build = "--no-build" not in args
    args = [a for a in args if a != "--no-build"]
    sides = ["brisk", "dask", "sklearn"]
    if "--sides" in args:
        i = args.index("--sides")
        sides = args[i + 1].split(",")
        del args[i:i + 2]
    names = args or ["ML1", "ML2", "ML3", "ML4", "ML5", "ML5t", "ML6"]
    if build and "brisk" in sides:
        subprocess.run(["cargo", "build", "--release", "-p", "brisk"], cwd=ROOT, check=True)
    for name in names:
        gen({"ML5t": "ML5"}.get(name, name))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    rows = []
    for name in names:
        res = {}
        for side in sides:
            if side == "dask" and name == "ML5":
                continue  # dask-ml has no covariance route; ML5t times its tsqr.
            if side == "sklearn" and name == "ML2L":
                continue  # 32 GB does not fit in memory here.
            rs = [run_side(side, name) for _ in range(runs if side == "brisk" else other_runs)]
            ok = [r for r in rs if r["ok"]]
            res[side] = {
                "runs": rs,
                "seconds": statistics.median(r["json"]["seconds"] for r in ok) if ok else None,
                "rss_mb": max((r["rss_mb"] for r in ok), default=None),
                "answer": ok[-1]["json"] if ok else None,
            }
            sec = res[side]["seconds"]
            print(f"{name} {side}: {sec if sec is None else round(sec, 3)} s"
                  + ("" if ok else f" FAILED: {rs[-1].get('stderr', '')[-300:]}"), flush=True)
        # ML2L has no scikit-learn side: brisk is checked against Dask.
        ref = res.get("sklearn", {}).get("answer") or (res.get("dask", {}).get("answer") if name == "ML2L" else None)
        for side in ("brisk", "dask"):
            if side in res and res[side]["answer"] and ref:
                res[side]["quality"] = quality(name, res[side]["answer"], ref)
        if name == "ML1":
            for side in ("brisk", "dask", "sklearn"):
                if side in res and res[side]["answer"]:
                    res[side].setdefault("quality", {})["ari"] = ari(name, res[side]["answer"]["centers"])
        b = res.get("brisk", {}).get("seconds")
        ratio = lambda other: (b / res[other]["seconds"]) if b and other in res and res[other]["seconds"] else None
        line = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "git_commit": commit, "workload": name,
            "shape": SHAPES[{"ML5t": "ML5"}.get(name, name)], "runs": runs,
            "seconds": {s: res[s]["seconds"] for s in res}, "peak_rss_mb": {s: res[s]["rss_mb"] for s in res},
            "ratio_dask": ratio("dask"), "ratio_sklearn": ratio("sklearn"), "targets": TARGETS.get(name),
            "brisk_passes": (res.get("brisk", {}).get("answer") or {}).get("n_passes"),
            "quality": {s: res[s].get("quality") for s in res},
            # The answers' scalars, so runs of one side at a time compare later.
            "answers": {s: {k: v for k, v in (res[s]["answer"] or {}).items() if isinstance(v, (int, float))}
                        for s in res},
        }
        rows.append(line)
        with open(os.path.join(HERE, "results", "ml.jsonl"), "a") as fh:
            fh.write(json.dumps(line) + "\n")
    print("\n| id | brisk s | Dask s | sklearn s | brisk/Dask | brisk/sklearn | passes | brisk RSS MB | Dask RSS MB | quality (brisk) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    f = lambda v, d=2: "–" if v is None else (f"{v:.{d}f}" if isinstance(v, float) else str(v))
    for r in rows:
        s, m = r["seconds"], r["peak_rss_mb"]
        print(f"| {r['workload']} | {f(s.get('brisk'))} | {f(s.get('dask'))} | {f(s.get('sklearn'))} | "
              f"{f(r['ratio_dask'], 3)} | {f(r['ratio_sklearn'], 3)} | {f(r['brisk_passes'])} | "
              f"{f(m.get('brisk'), 0)} | {f(m.get('dask'), 0)} | {json.dumps(r['quality'].get('brisk'))} |")


if __name__ == "__main__":
    main()
