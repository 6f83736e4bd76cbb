"""The Jupyter kernel's trivial-cell round trip (issue 7: under 5 ms median):
execute `1 + 1` with jupyter_client and wait for the reply and the idle
status, as a notebook front end does. Needs jupyter_client (the test
environment of scripts/python-env.sh has it).

    .venv-test/bin/python bench/kernel_roundtrip.py [--bin target/release/brisk] [--n 500]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "target", "release", "brisk"))
    ap.add_argument("--n", type=int, default=500)
    a = ap.parse_args()
    prefix = tempfile.mkdtemp(prefix="brisk-bench-kernel-")
    subprocess.run([os.path.abspath(a.bin), "kernel", "install", "--prefix", prefix], check=True,
                   capture_output=True)
    os.environ["JUPYTER_PATH"] = os.path.join(prefix, "share", "jupyter")
    from jupyter_client.manager import start_new_kernel
    km, kc = start_new_kernel(kernel_name="brisk", startup_timeout=60)
    try:
        for _ in range(20):
            kc.execute_interactive("1 + 1", output_hook=lambda m: None, timeout=10)
        times = []
        for _ in range(a.n):
            t0 = time.perf_counter()
            reply = kc.execute_interactive("1 + 1", output_hook=lambda m: None, timeout=10)
            times.append((time.perf_counter() - t0) * 1000)
            assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
    times.sort()
    print(json.dumps({"bench": "kernel-roundtrip", "cell": "1 + 1", "n": a.n,
                      "median_ms": round(statistics.median(times), 3),
                      "p90_ms": round(times[int(0.9 * len(times))], 3), "target_ms": 5.0}))


if __name__ == "__main__":
    main()
