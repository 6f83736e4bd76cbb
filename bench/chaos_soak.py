#!/usr/bin/env python3
"""The chaos soak's long form (the memory-and-faults issue, fault 6; the
short form is a test in tests/cluster.rs).

A scheduler and N worker processes under their nannies (1 thread each);
while rounds of an all-to-all rechunk and a sum of a few GB run for
several minutes, a worker process chosen at random is SIGKILLed after an
exponential lifetime (mean 4 s, as distributed's `KillWorker`), and its
nanny starts another. Each round's sum is checked in the script against
its closed form. At the end every process is stopped and the soak checks
that none is left and that the workers' local directory is empty.

Usage: python3 bench/chaos_soak.py [--workers 4] [--minutes 5]
[--elements 300000000] [--mean 4] (BRISK_BIN: the brisk binary, default
target/release/brisk). Prints one JSON line and appends it to
bench/results/results.jsonl.
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BRISK = os.environ.get("BRISK_BIN", os.path.join(ROOT, "target", "release", "brisk"))

SCRIPT = """
let n = ELEMENTS;
let rows = 10000;
let t = timestamp();
let round = 0;
while t.elapsed < SECONDS {
    let x = arange(round, n + round, 1, #{chunks: n / 40}).reshape([rows, n / rows]).rechunk([rows, n / rows / 40]);
    let s = x.sum().compute();
    if s != n * (n - 1) / 2 + n * round { throw `round ${round}: ${s} is wrong`; }
    round += 1;
}
print(`${round} rounds exact in ${t.elapsed} s`);
"""


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def children(pid):
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(p))
        except (OSError, ValueError, IndexError):
            continue
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--elements", type=int, default=300_000_000)
    ap.add_argument("--mean", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    assert a.elements % 400_000 == 0, "--elements must be a multiple of 400000"
    rng = random.Random(a.seed)
    local = tempfile.mkdtemp(prefix="brisk-chaos-")
    sched = subprocess.Popen([BRISK, "scheduler", "--port", "0", "--no-http", "--allowed-failures", "20"],
                             stdout=subprocess.PIPE, text=True)
    address = sched.stdout.readline().split()[-1]
    nannies = [subprocess.Popen([BRISK, "worker", address, "--nthreads", "1", "--name", f"w{i}",
                                 "--local-directory", local], stdout=subprocess.DEVNULL)
               for i in range(a.workers)]
    time.sleep(2)
    stop = threading.Event()
    kills = []

    def chaos():
        while not stop.wait(rng.expovariate(1.0 / a.mean)):
            workers = [c for n in nannies for c in children(n.pid)]
            if workers:
                victim = rng.choice(workers)
                try:
                    os.kill(victim, signal.SIGKILL)
                    kills.append(victim)
                except ProcessLookupError:
                    pass

    killer = threading.Thread(target=chaos)
    killer.start()
    with tempfile.NamedTemporaryFile("w", suffix=".rhai", delete=False) as f:
        f.write(SCRIPT.replace("ELEMENTS", str(a.elements)).replace("SECONDS", str(a.minutes * 60)))
    start = time.time()
    env = dict(os.environ, BRISK_SCHEDULER_ADDRESS=address)
    run = subprocess.run([BRISK, "run", "--no-progress", f.name], capture_output=True, text=True, env=env)
    wall = time.time() - start
    stop.set()
    killer.join()
    os.unlink(f.name)
    log(run.stdout.strip(), run.stderr.strip())
    pids = [n.pid for n in nannies] + [c for n in nannies for c in children(n.pid)] + [sched.pid]
    for n in nannies:
        n.send_signal(signal.SIGTERM)
    for n in nannies:
        n.wait(timeout=30)
    sched.send_signal(signal.SIGTERM)
    sched.wait(timeout=30)
    time.sleep(1)
    left_processes = [p for p in pids if os.path.exists(f"/proc/{p}")]
    left_files = [os.path.join(d, x) for d, ds, fs in os.walk(local) for x in ds + fs]
    os.rmdir(local) if not left_files else None
    row = {
        "bench": "chaos_soak", "workers": a.workers, "elements": a.elements, "mean_lifetime_s": a.mean,
        "wall_s": round(wall, 1), "kills": len(kills), "ok": run.returncode == 0,
        "result": run.stdout.strip(), "left_processes": left_processes, "left_files": left_files[:10],
    }
    print(json.dumps(row))
    with open(os.path.join(ROOT, "bench", "results", "results.jsonl"), "a") as out:
        out.write(json.dumps(row) + "\n")
    return 0 if row["ok"] and not left_processes and not left_files else 1


if __name__ == "__main__":
    sys.exit(main())
