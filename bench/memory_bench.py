#!/usr/bin/env python3
"""Memory limits and faults, side by side with Dask (the memory-and-faults issue):

* B8: a cluster of 2 worker processes, 1 thread each, memory limit 2 GiB
  each; a random array of 50000 x 20000 float64 (8 GB, chunks 5000) is
  persisted, then summed. Reported: the time from persist to the sum, the
  largest resident memory any worker process reached (sampled every 20 ms
  over every process below the benchmark's own), the bytes spilled, and
  whether the sum is right (within 6 sigma of n/2: both sides draw their own
  random numbers).
* B9: a cluster of 3 worker processes, 1 thread each; 2,000 tasks sleeping
  5 ms and a pairwise delayed-add tree over them (3,999 tasks), computed
  without a fault and with one worker SIGKILLed 1 s after submission. Both
  sides build the tree as Dask's anchor does (`bench_b9` of
  ../shared/bench/dask/run.py); the result must be sum(range(2000)).

Usage: python3 bench/memory_bench.py [b8] [b9] [--runs 1] [--rows 50000]
(BRISK_BIN: the brisk binary, default target/release/brisk; Dask from
bench/.venv). Prints a JSON line per run and appends them to
bench/results/results.jsonl.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BRISK = os.environ.get("BRISK_BIN", os.path.join(ROOT, "target", "release", "brisk"))
PYTHON = os.path.join(ROOT, "bench", ".venv", "bin", "python")
GIB = 1 << 30


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def descendants(root):
    """Pids below `root` (children, grandchildren, ...)."""
    children = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(p))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_watched(cmd):
    """Run `cmd`; the peak RSS of each process below it, sampled every 20 ms."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peaks, names, done = {}, {}, threading.Event()

    def sample():
        while not done.is_set():
            for p in descendants(proc.pid):
                r = rss(p)
                if r > peaks.get(p, 0):
                    peaks[p] = r
                    if p not in names:
                        try:
                            with open(f"/proc/{p}/cmdline", "rb") as f:
                                names[p] = f.read().replace(b"\0", b" ").decode()[:400]
                        except OSError:
                            names[p] = "?"
            time.sleep(0.02)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = proc.communicate(timeout=1800)
    done.set()
    t.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}): {err[-3000:]}")
    rec = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
    procs = sorted(((peaks[p], names.get(p, "?")) for p in peaks), reverse=True)
    rec["peak_rss_by_process"] = [{"rss_mib": round(r / 2**20), "cmd": c} for r, c in procs[:6]]
    return rec


BRISK_B8 = """
let c = local_cluster(#{workers: 2, threads: 1, memory_limit: "2GiB"});
let x = random([ROWS, 20000], #{chunks: [5000, 5000], seed: 1});
let t0 = timestamp();
let y = x.persist();
let s = y.sum().compute();
let seconds = t0.elapsed;
let spilled = 0;
for w in c.workers() { spilled += w.spilled; }
c.close();
print(to_json(#{seconds: seconds, result: s, spilled: spilled}));
"""

DASK_B8 = """
import json, time
import dask.array as da
from distributed import Client, LocalCluster, wait
if __name__ == "__main__":
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="2GiB",
                           processes=True, dashboard_address=None)
    client = Client(cluster)
    x = da.random.random((ROWS, 20000), chunks=5000)
    t0 = time.perf_counter()
    y = x.persist()
    wait(y)
    s = float(y.sum().compute())
    seconds = time.perf_counter() - t0
    def spilled(dask_worker):
        try:
            return int(dask_worker.data.spilled_total.memory)
        except Exception:
            return -1
    sp = sum(client.run(spilled).values())
    client.close(); cluster.close()
    print(json.dumps({"seconds": seconds, "result": s, "spilled": sp}))
"""


def b8(side, rows):
    n = rows * 20000
    if side == "brisk":
        with tempfile.NamedTemporaryFile("w", suffix=".rhai", delete=False) as f:
            f.write(BRISK_B8.replace("ROWS", str(rows)))
        try:
            rec = run_watched([BRISK, "run", "--no-progress", f.name])
        finally:
            os.unlink(f.name)
        workers = [p for p in rec["peak_rss_by_process"] if "--no-nanny" in p["cmd"]]
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(DASK_B8.replace("ROWS", str(rows)))
        try:
            rec = run_watched([PYTHON, f.name])
        finally:
            os.unlink(f.name)
        # The two largest processes below Python are the workers (their
        # nannies and the scheduler hold little).
        workers = rec["peak_rss_by_process"][:2]
    sigma = math.sqrt(n / 12)
    rec["correct"] = abs(rec["result"] - n / 2) < 6 * sigma
    rec["worker_peak_rss_mib"] = max((p["rss_mib"] for p in workers), default=None)
    rec["under_limit"] = rec["worker_peak_rss_mib"] is not None and rec["worker_peak_rss_mib"] < 2048
    return rec


BRISK_B9 = """
fn slow(i) { sleep(0.005); i }
fn add(a, b) { a + b }
let c = local_cluster(#{workers: 3, threads: 1});
let layer = [];
for i in 0..N { layer.push(delayed(slow).call(i)); }
while layer.len() > 1 {
    let next = [];
    let k = 0;
    while k + 1 < layer.len() { next.push(delayed(add).call(layer[k], layer[k + 1])); k += 2; }
    if layer.len() % 2 == 1 { next.push(layer[layer.len() - 1]); }
    layer = next;
}
let total = layer[0];
let pids = c.workers().map(|w| w.pid);
pids.sort();
print(to_json(#{submitting: true, pids: pids}));
let t0 = timestamp();
let result = total.compute();
let seconds = t0.elapsed;
let workers_at_end = c.workers().len();
c.close();
print(to_json(#{seconds: seconds, result: result, workers_at_end: workers_at_end}));
"""

DASK_B9 = """
import json, os, signal, time
from dask import delayed
from distributed import Client, LocalCluster
def slow_ident(i):
    time.sleep(0.005)
    return i
def add(a, b):
    return a + b
if __name__ == "__main__":
    cluster = LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    client.wait_for_workers(3)
    pids = client.run(os.getpid)
    dleaf, dadd = delayed(slow_ident, pure=False), delayed(add, pure=False)
    layer = [dleaf(i) for i in range(N)]
    while len(layer) > 1:
        nxt = [dadd(layer[k], layer[k + 1]) for k in range(0, len(layer) - 1, 2)]
        if len(layer) % 2:
            nxt.append(layer[-1])
        layer = nxt
    t0 = time.perf_counter()
    fut = client.compute(layer[0])
    if FAULT:
        time.sleep(1.0)
        os.kill(pids[sorted(pids)[0]], signal.SIGKILL)
    res = fut.result(timeout=300)
    seconds = time.perf_counter() - t0
    nw = len(client.scheduler_info()["workers"])
    client.close(); cluster.close()
    print(json.dumps({"seconds": seconds, "result": res, "workers_at_end": nw}))
"""


def b9(side, n, fault):
    if side == "dask":
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(DASK_B9.replace("N)", f"{n})").replace("FAULT", str(fault)))
        try:
            out = subprocess.run([PYTHON, f.name], capture_output=True, text=True, timeout=600)
        finally:
            os.unlink(f.name)
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-3000:])
        rec = json.loads([l for l in out.stdout.splitlines() if l.startswith("{")][-1])
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".rhai", delete=False) as f:
            f.write(BRISK_B9.replace("0..N", f"0..{n}"))
        try:
            proc = subprocess.Popen([BRISK, "run", "--no-progress", f.name], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            first = json.loads(proc.stdout.readline())
            killed = None
            if fault:
                time.sleep(1.0)
                killed = first["pids"][0]
                os.kill(killed, 9)
            out, err = proc.communicate(timeout=600)
        finally:
            os.unlink(f.name)
        if proc.returncode != 0:
            raise RuntimeError(err[-3000:])
        rec = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
        rec["killed_pid"] = killed
    rec["fault"] = fault
    rec["correct"] = rec["result"] == n * (n - 1) // 2
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("figures", nargs="*", default=["b8"])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--rows", type=int, default=50000)
    ap.add_argument("--n", type=int, default=2000, help="B9's leaf tasks")
    ap.add_argument("--sides", default="dask,brisk")
    args = ap.parse_args()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    for fig in args.figures:
        for i in range(args.runs):
            for side in args.sides.split(","):
                for fault in ([False, True] if fig == "b9" else [None]):
                    log(f"{fig} {side} run {i + 1}" + (" with a fault" if fault else ""))
                    rec = {"figure": fig, "side": side, "commit": commit, "date": time.strftime("%Y-%m-%d")}
                    if fig == "b8":
                        rec.update(rows=args.rows, **b8(side, args.rows))
                    else:
                        rec.update(n=args.n, **b9(side, args.n, fault))
                    line = json.dumps(rec)
                    print(line, flush=True)
                    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
                    with open(os.path.join(ROOT, "bench", "results", "results.jsonl"), "a") as f:
                        f.write(line + "\n")


if __name__ == "__main__":
    main()
