#!/usr/bin/env python3
"""The Dask side of brisk's benchmark harness: ONE timed run of one workload.

Run by bench/run.py in bench/.venv's Python, once per run (a fresh process each
time, like the brisk side), as

    python dask_side.py <workload> --n N

It prints exactly one JSON line on stdout (the last line starting with "{"):
    {"workload", "seconds", "build_seconds"?, "compute_seconds"?, "tasks",
     "result", "expected", "correct", "dask_version", ...}
Diagnostics go to stderr.  Nothing outside the timed region is in "seconds".
"""
import argparse
import gc
import glob
import json
import os
import sys
import time


# ---------------------------------------------------------------- contention meter
# CPU used by this process tree ("own") and by everything else on the machine
# ("foreign": /proc/stat busy time minus own) during the timed region, as in
# shared/bench/dask/run.py.
from procstat import proc_stat as _proc_stat  # noqa: E402 (beside this script)


def _tree_cpu():
    try:
        import psutil
    except ImportError:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system
    p = psutil.Process()
    t = p.cpu_times()
    tot = t.user + t.system + t.children_user + t.children_system
    for c in p.children(recursive=True):
        try:
            ct = c.cpu_times()
            tot += ct.user + ct.system + ct.children_user + ct.children_system
        except psutil.Error:
            pass
    return tot


class Meter:
    def __enter__(self):
        self.b0, self.s0 = _proc_stat()
        self.c0 = _tree_cpu()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.t0
        b1, s1 = _proc_stat()
        self.own = _tree_cpu() - self.c0
        self.foreign = max(0.0, (b1 - self.b0) - self.own)
        self.steal = max(0.0, s1 - self.s0)
        return False

    def fields(self):
        w = max(self.wall, 1e-9)
        return {"own_cpu_s": round(self.own, 3),
                "foreign_cores": round(self.foreign / w, 3),
                "steal_cores": round(self.steal / w, 3)}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- task functions
def inc(i):
    return i + 1


def add(a, b):
    return a + b


def build_tree(n):
    """n independent inc(i) leaves + a pairwise delayed-add tree: 2n - 1 tasks.
    pure=False gives random keys, so nothing is shared or cached."""
    from dask import delayed
    dinc = delayed(inc, pure=False)
    dadd = delayed(add, pure=False)
    layer = [dinc(i) for i in range(n)]
    while len(layer) > 1:
        nxt = [dadd(layer[k], layer[k + 1]) for k in range(0, len(layer) - 1, 2)]
        if len(layer) % 2:
            nxt.append(layer[-1])
        layer = nxt
    return layer[0]


# ---------------------------------------------------------------- workloads
def run_b2_cluster(n, graph=False):
    """B2 on a cluster of processes: LocalCluster(n_workers=2,
    threads_per_worker=1, processes=True). Futures (map + gather) or, with
    graph, the B1 tree computed on the cluster. Start-up reported apart."""
    import dask
    from distributed import Client, LocalCluster
    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    client.wait_for_workers(2)
    startup = time.perf_counter() - t0
    try:
        gc.collect()
        with Meter() as m:
            t0 = time.perf_counter()
            if graph:
                total = build_tree(n)
                (result,) = dask.compute(total)
                tasks = 2 * n - 1
            else:
                futs = client.map(inc, range(n), pure=False)
                vals = client.gather(futs)
                result = sum(vals)
                tasks = n
            t1 = time.perf_counter()
    finally:
        client.close()
        cluster.close()
    return {"seconds": t1 - t0, "tasks": tasks, "result": result,
            "startup_seconds": startup,
            "cluster": {"processes": True, "n_workers": 2, "threads_per_worker": 1},
            "inner_load": m.fields()}


def run_b1(n):
    import dask
    gc.collect()
    with Meter() as m:
        t0 = time.perf_counter()
        total = build_tree(n)
        t1 = time.perf_counter()
        (result,) = dask.compute(total, scheduler="threads")
        t2 = time.perf_counter()
    tasks = len(total.__dask_graph__())
    return {"seconds": t2 - t0, "build_seconds": t1 - t0,
            "compute_seconds": t2 - t1, "tasks": tasks, "result": result,
            "scheduler": "threads", "num_workers": os.cpu_count(),
            "inner_load": m.fields()}


def run_b2_local(n):
    from distributed import Client
    nthreads = os.cpu_count() or 1
    t0 = time.perf_counter()
    client = Client(processes=False, n_workers=1, threads_per_worker=nthreads,
                    dashboard_address=None)
    client.wait_for_workers(1)
    startup = time.perf_counter() - t0
    try:
        gc.collect()
        with Meter() as m:
            t0 = time.perf_counter()
            futs = client.map(inc, range(n), pure=False)
            vals = client.gather(futs)
            t1 = time.perf_counter()
        result = sum(vals)
        del futs, vals
    finally:
        client.close()
    return {"seconds": t1 - t0, "tasks": n, "result": result,
            "startup_seconds": startup,
            "cluster": {"processes": False, "n_workers": 1,
                        "threads_per_worker": nthreads},
            "inner_load": m.fields()}


def run_b3(n):
    """((x + x.T) * 2).mean(axis=0).sum() on random((n, n), chunks=n/10),
    generation included, as shared/bench/dask/run.py (default_rng(42))."""
    import dask
    import dask.array as da
    chunk = max(1, n // 10)

    def make():
        x = da.random.default_rng(42).random((n, n), chunks=(chunk, chunk))
        return ((x + x.T) * 2).mean(axis=0).sum()

    tasks = len(make().__dask_graph__())
    gc.collect()
    with Meter() as m:
        t0 = time.perf_counter()
        (result,) = dask.compute(make(), scheduler="threads")
        t1 = time.perf_counter()
    return {"seconds": t1 - t0, "tasks": tasks, "result": float(result),
            "scheduler": "threads", "num_workers": os.cpu_count(),
            "shape": [n, n], "chunks": [chunk, chunk], "inner_load": m.fields()}


def run_b4(n):
    """(x @ x.T).sum() on random((n, n), chunks=n/4), generation included."""
    import dask
    import dask.array as da
    chunk = max(1, n // 4)

    def make():
        x = da.random.default_rng(42).random((n, n), chunks=(chunk, chunk))
        return (x @ x.T).sum()

    tasks = len(make().__dask_graph__())
    gc.collect()
    with Meter() as m:
        t0 = time.perf_counter()
        (result,) = dask.compute(make(), scheduler="threads")
        t1 = time.perf_counter()
    return {"seconds": t1 - t0, "tasks": tasks, "result": float(result),
            "scheduler": "threads", "num_workers": os.cpu_count(),
            "shape": [n, n], "chunks": [chunk, chunk], "inner_load": m.fields()}


def run_b5(n):
    """Singular values of random((n, 100), chunks=(n/20, 100)) by
    da.linalg.svd (TSQR), checked against NumPy's direct SVD (untimed)."""
    import numpy as np
    import dask
    import dask.array as da
    rows = max(100, n // 20)

    def make_x():
        return da.random.default_rng(42).random((n, 100), chunks=(rows, 100))

    def make():
        return da.linalg.svd(make_x())[1]

    tasks = len(make().__dask_graph__())
    gc.collect()
    with Meter() as m:
        t0 = time.perf_counter()
        (s,) = dask.compute(make(), scheduler="threads")
        t1 = time.perf_counter()
    direct = np.linalg.svd(make_x().compute(scheduler="threads"), compute_uv=False)
    rel = float(np.max(np.abs(s - direct) / np.abs(direct)))
    return {"seconds": t1 - t0, "tasks": tasks, "result": rel,
            "max_rel_err_vs_direct": rel, "s0": float(s[0]),
            "scheduler": "threads", "num_workers": os.cpu_count(),
            "shape": [n, 100], "chunks": [rows, 100], "inner_load": m.fields()}


def run_b7(n, closure=False):
    """Word count over the corpus in --dir, on Dask's default scheduler for
    bags (processes): split on whitespace, or with a Python closure."""
    import dask.bag as db
    files = f"{ARGS.dir}/*.txt"

    def make():
        b = db.read_text(files)
        words = b.map(lambda l: l.split(" ")) if closure else b.str.split()
        return words.flatten().frequencies().topk(10, key=1)

    tasks = len(make().__dask_graph__())
    gc.collect()
    with Meter() as m:
        t0 = time.perf_counter()
        top = make().compute()
        t1 = time.perf_counter()
    return {"seconds": t1 - t0, "tasks": tasks, "result": int(top[0][1]), "top": top[:3],
            "scheduler": "processes (bag default)", "inner_load": m.fields()}


def run_b6(n, variant, fmt="csv"):
    """B6 on the CSV files in --dir (or the Parquet files in --dir/parquet),
    Dask's default scheduler for frames (threads); building the frame (its
    metadata) is timed too."""
    import dask.dataframe as dd

    def make():
        if fmt == "csv":
            df = dd.read_csv(f"{ARGS.dir}/*.csv")
        else:
            df = dd.read_parquet(sorted(glob.glob(f"{ARGS.dir}/parquet/*.parquet")))
        if variant == "agg":
            return df.groupby("key").agg({"x": "mean", "y": "sum"})
        return df[df.x > 0.5].groupby("key").size()

    tasks = len(make().__dask_graph__())
    gc.collect()
    with Meter() as m:
        t0 = time.perf_counter()
        out = make().compute()
        t1 = time.perf_counter()
    result = float(out["x"].sum()) if variant == "agg" else int(out.loc["k0"])
    return {"seconds": t1 - t0, "tasks": tasks, "result": result, "groups": int(len(out)),
            "scheduler": "threads (dataframe default)", "inner_load": m.fields()}


def frame_expected(n, key):
    import frame_data
    return frame_data.expected(n, key)


def expected_b7(key):
    import text_data
    return lambda n: text_data.expected(n, key)


WORKLOADS = {
    "b6-csv-agg": (lambda n: run_b6(n, "agg"), lambda n: frame_expected(n, "agg_sum_x_mean")),
    "b6-csv-filter": (lambda n: run_b6(n, "filter"), lambda n: frame_expected(n, "filter_k0")),
    "b6-pq-agg": (lambda n: run_b6(n, "agg", "pq"), lambda n: frame_expected(n, "agg_sum_x_mean")),
    "b6-pq-filter": (lambda n: run_b6(n, "filter", "pq"), lambda n: frame_expected(n, "filter_k0")),
    "b1": (run_b1, lambda n: n * (n + 1) // 2),
    "b2-local": (run_b2_local, lambda n: n * (n + 1) // 2),
    "b2-cluster": (run_b2_cluster, lambda n: n * (n + 1) // 2),
    "b1-cluster": (lambda n: run_b2_cluster(n, graph=True), lambda n: n * (n + 1) // 2),
    # The sum of n column means of 2(x + x.T): 2n, give or take ~1.2.
    "b3": (run_b3, lambda n: 2 * n),
    # sum(x @ x.T) = |x^T 1|^2: n columns whose sums are ~n/2 each, so ~n^3/4.
    "b4": (run_b4, lambda n: n ** 3 // 4),
    # The result is the largest relative error against a direct SVD.
    "b5": (run_b5, lambda n: 0.0),
    "b7": (run_b7, expected_b7("top_whitespace")),
    "b7-closure": (lambda n: run_b7(n, closure=True), expected_b7("top_space")),
}


def correct(workload, result, expected):
    """Exact for the integer workloads; within 20 of 2n for B3's random sum."""
    if workload == "b3":
        return isinstance(result, float) and abs(result - expected) < 20
    if workload == "b5":
        return isinstance(result, float) and result < 1e-10
    if workload in ("b6-csv-agg", "b6-pq-agg"):
        return isinstance(result, float) and abs(result - expected) < 1e-6
    if workload == "b4":
        return isinstance(result, float) and abs(result - expected) < 0.01 * expected
    return result == expected


ARGS = None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dir", help="the text corpus (B7) or the CSV files (B6)")
    args = ap.parse_args()
    global ARGS
    ARGS = args
    import dask
    import distributed
    fn, expected_fn = WORKLOADS[args.workload]
    rec = fn(args.n)
    expected = expected_fn(args.n)
    for k in ("seconds", "build_seconds", "compute_seconds", "startup_seconds"):
        if k in rec:
            rec[k] = round(rec[k], 6)
    out = {"workload": args.workload, "n": args.n, **rec,
           "expected": expected, "correct": correct(args.workload, rec["result"], expected),
           "dask_version": dask.__version__,
           "distributed_version": distributed.__version__,
           "python": sys.version.split()[0]}
    log(f"dask {args.workload} n={args.n}: {out['seconds']:.3f}s")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
