#!/usr/bin/env python3
"""Deployment figures (the deploy issue), brisk against Dask side by side on
the same one-host SLURM (`scripts/slurm-up.sh 4 3`: three emulated nodes of
4 CPUs) and on this machine:

* scale: seconds from `scale(n)` to n workers connected, for SLURM jobs
  (brisk's slurm_cluster, dask-jobqueue's SLURMCluster; one core and 1 GiB
  per job) and local processes (local_cluster / distributed.LocalCluster);
* adapt: with adapt(minimum 0, maximum 4) and the defaults (interval 1 s,
  target 5 s, wait_count 3), a burst of 40 one-second tasks on an empty
  cluster: seconds to the first worker, to 4 workers, to the burst's end,
  and from its end (results released) back to no worker.

Usage: python3 bench/deploy_bench.py [--runs 3] [--sides brisk,dask]
(BRISK_BIN: the brisk binary, default target/release/brisk; Dask from
bench/.venv with dask-jobqueue 0.9.0). Prints a JSON line per figure and
appends them to bench/results/results.jsonl.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BRISK = os.environ.get("BRISK_BIN", os.path.join(ROOT, "target", "release", "brisk"))
PY = os.path.join(ROOT, "bench", ".venv", "bin", "python")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# SLURM writes each job's output where it was submitted from: a folder of our own.
WORKDIR = tempfile.mkdtemp(prefix="brisk-deploy-bench-")


def brisk(text):
    with tempfile.NamedTemporaryFile("w", suffix=".rhai", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        out = subprocess.run([BRISK, "run", "--no-progress", path], capture_output=True, text=True, timeout=600,
                             cwd=WORKDIR)
    finally:
        os.unlink(path)
    if out.returncode != 0:
        raise RuntimeError(f"brisk failed: {out.stderr}")
    return json.loads([l for l in out.stdout.splitlines() if l.startswith("{")][-1])


def dask(text):
    out = subprocess.run([PY, "-c", text], capture_output=True, text=True, timeout=600, cwd=WORKDIR)
    if out.returncode != 0:
        raise RuntimeError(f"dask failed: {out.stderr[-3000:]}")
    return json.loads([l for l in out.stdout.splitlines() if l.startswith("{")][-1])


BRISK_SCALE = """
let cluster = CLUSTER;
let t0 = timestamp();
SCALE
let t = t0.elapsed;
CLOSE
print(to_json(#{seconds: t}));
"""

DASK_SCALE = """
import json, time, logging
logging.disable(logging.WARNING)
from dask.distributed import Client
CLUSTER_IMPORT
cluster = CLUSTER
client = Client(cluster)
t0 = time.perf_counter()
cluster.scale(@N@)
client.wait_for_workers(@N@, timeout=120)
t = time.perf_counter() - t0
client.close(); cluster.close()
print(json.dumps({"seconds": t}))
"""

BRISK_ADAPT = """
let cluster = slurm_cluster(#{cores: 1, memory: "1GiB", interface: "lo", walltime: "00:20:00", job_name: "bench-adapt"});
let c = client(cluster);
cluster.adapt(#{minimum: 0, maximum: 4});
let t0 = timestamp();
let fs = []; for i in 0..40 { fs.push(submit(|i| { sleep(1.0); i }, i)); }
let first = -1.0; let four = -1.0;
while !fs.all(|f| f.done()) {
    let n = c.workers().len();
    if n >= 1 && first < 0.0 { first = t0.elapsed; }
    if n >= 4 && four < 0.0 { four = t0.elapsed; }
    sleep(0.02);
}
let done = t0.elapsed;
let total = gather(fs).reduce(|s, x| s + x, 0);
fs = ();
let t1 = timestamp();
while c.workers().len() > 0 && t1.elapsed < 120 { sleep(0.05); }
let down = t1.elapsed;
cluster.close();
print(to_json(#{first: first, four: four, done: done, down: down, ok: total == 780}));
"""

DASK_ADAPT = """
import json, time, logging
logging.disable(logging.WARNING)
from dask.distributed import Client
from dask_jobqueue import SLURMCluster
cluster = SLURMCluster(cores=1, processes=1, memory="1GiB", interface="lo", walltime="00:20:00", job_name="bench-adapt-dask")
client = Client(cluster)
cluster.adapt(minimum=0, maximum=4)
def f(i):
    time.sleep(1.0)
    return i
t0 = time.perf_counter()
fs = client.map(f, range(40))
first = four = -1.0
while not all(x.done() for x in fs):
    n = len(client.scheduler_info()["workers"])
    if n >= 1 and first < 0: first = time.perf_counter() - t0
    if n >= 4 and four < 0: four = time.perf_counter() - t0
    time.sleep(0.02)
done = time.perf_counter() - t0
total = sum(client.gather(fs))
del fs
t1 = time.perf_counter()
while len(client.scheduler_info()["workers"]) > 0 and time.perf_counter() - t1 < 120:
    time.sleep(0.05)
down = time.perf_counter() - t1
client.close(); cluster.close()
print(json.dumps({"first": first, "four": four, "done": done, "down": down, "ok": total == 780}))
"""


def scale_cases(n):
    slurm_b = 'slurm_cluster(#{cores: 1, memory: "1GiB", interface: "lo", walltime: "00:20:00", job_name: "bench-scale"})'
    local_b = "local_cluster(#{workers: 0, threads: 1})"
    return {
        ("slurm", "brisk"): lambda: brisk(BRISK_SCALE.replace("CLUSTER", slurm_b)
                                          .replace("SCALE", f"cluster.scale({n}); cluster.wait_for_workers({n}, 120);")
                                          .replace("CLOSE", "cluster.close();")),
        ("slurm", "dask"): lambda: dask(DASK_SCALE.replace("CLUSTER_IMPORT", "from dask_jobqueue import SLURMCluster")
                                        .replace("CLUSTER", 'SLURMCluster(cores=1, processes=1, memory="1GiB", interface="lo", walltime="00:20:00", job_name="bench-scale-dask")')
                                        .replace("@N@", str(n))),
        ("local", "brisk"): lambda: brisk(BRISK_SCALE.replace("CLUSTER", local_b)
                                          .replace("SCALE", f"cluster.scale({n});")
                                          .replace("CLOSE", "cluster.close();")),
        ("local", "dask"): lambda: dask(DASK_SCALE.replace("CLUSTER_IMPORT", "from dask.distributed import LocalCluster")
                                        .replace("CLUSTER", "LocalCluster(n_workers=0, threads_per_worker=1, processes=True, dashboard_address=None)")
                                        .replace("@N@", str(n))),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sides", default="brisk,dask")
    ap.add_argument("--n", type=int, default=8)
    a = ap.parse_args()
    sides = a.sides.split(",")
    rows = []
    for kind in ["slurm", "local"]:
        cases = scale_cases(a.n)
        for side in sides:
            times = []
            for r in range(a.runs):
                t = cases[(kind, side)]()["seconds"]
                log(f"scale {kind} {a.n} {side} run {r}: {t:.2f}s")
                times.append(t)
            rows.append({"figure": f"scale_to_{a.n}_{kind}", "side": side, "median_s": statistics.median(times), "runs": times})
    for side in sides:
        runs = []
        for r in range(a.runs):
            res = brisk(BRISK_ADAPT) if side == "brisk" else dask(DASK_ADAPT)
            log(f"adapt {side} run {r}: {res}")
            runs.append(res)
        med = {k: statistics.median(x[k] for x in runs) for k in ["first", "four", "done", "down"]}
        rows.append({"figure": "adapt_burst_40x1s", "side": side, **{f"{k}_s": v for k, v in med.items()},
                     "ok": all(x["ok"] for x in runs), "runs": runs})
    shutil.rmtree(WORKDIR, ignore_errors=True)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "results.jsonl"), "a") as f:
        for r in rows:
            print(json.dumps(r))
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
