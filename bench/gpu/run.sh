#!/usr/bin/env bash
# G1–G4 on a GPU machine: brisk beside Dask + CuPy and plain CuPy, in one
# run (the figures are only compared side by side). Run on the lent device:
#   BRISK_BIN=path/to/brisk bash bench/gpu/run.sh OUTDIR
# It needs the Dask wheels and the anchor script in gpu-run/ (git-ignored):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux2014_x86_64 -d gpu-run/wheels \
#     dask==2026.8.0 partd==1.4.2 locket==1.0.0
#   cp ../shared/bench/gpu/dask_cupy_bench.py gpu-run/
# First use is measured apart: the first brisk process starts with an empty
# kernel cache (its warm-up compiles), the second finds the cache on disk.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:?usage: bench/gpu/run.sh OUTDIR}"
mkdir -p "$out"
bin="${BRISK_BIN:-target/release/brisk}"
py="${BRISK_GPU_PYTHON:-/opt/torch/.venv/bin/python}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
BRISK_KERNEL_CACHE="$(mktemp -d)"
export BRISK_KERNEL_CACHE
# G1–G4 against CuPy on one device (the local runtime would use them all).
CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" "$bin" run bench/gpu/g1234.rhai | tee "$out/brisk-cold.jsonl"
CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" "$bin" run bench/gpu/g1234.rhai | tee "$out/brisk-cached.jsonl"
# Several GPUs: the same local runtime on one device, then on all of them.
gpus="$(nvidia-smi -L | wc -l)"
if [ "$gpus" -gt 1 ] && [ -z "${BENCH_SKIP_SPREAD:-}" ]; then
    CUDA_VISIBLE_DEVICES=0 "$bin" run bench/gpu/spread.rhai | tee "$out/spread-1.jsonl"
    all="$(seq -s, 0 $((gpus - 1)))"
    CUDA_VISIBLE_DEVICES="$all" "$bin" run bench/gpu/spread.rhai | tee "$out/spread-$gpus.jsonl"
fi
rm -rf "$BRISK_KERNEL_CACHE"
if [ -d gpu-run/wheels ]; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --target /tmp/brisk-dask gpu-run/wheels/*.whl
    PYTHONPATH=/tmp/brisk-dask PYTHONUNBUFFERED=1 "$py" gpu-run/dask_cupy_bench.py \
        --out "$out/dask.jsonl" --only "${BENCH_ONLY:-check,phys,cupy,dask}" >/dev/null
else
    echo "no gpu-run/wheels: the Dask + CuPy side is skipped" >&2
fi
"$py" - "$out" <<'PY'
import json, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1])
rows = {}
def load(name):
    p = out / name
    return [json.loads(l) for l in p.read_text().splitlines() if l.startswith("{")] if p.exists() else []
for tag, name in (("cold", "brisk-cold.jsonl"), ("cached", "brisk-cached.jsonl")):
    for r in load(name):
        g = r["bench"].split("_")[1]
        d = rows.setdefault(g, {})
        if r["run"] == "warmup":
            d[f"first_{tag}"] = r["seconds"]
        elif tag == "cold":
            d.setdefault("brisk", []).append(r["seconds"])
for r in load("dask.jsonl"):
    b, m = r.get("bench", ""), r.get("median_s")
    for g, dask, cupy in (("G1", "dask_G1_svd", "cupy_G1_svd_s_incl_rng"), ("G2", "dask_G2_svd", "cupy_G2_qr_svd_incl_rng"),
                          ("G3", "dask_G3_f32", "cupy_G3_f32_incl_rng"), ("G4", "dask_G4", "cupy_G4_incl_rng")):
        if b == dask: rows.setdefault(g, {})["dask"] = m
        if b == cupy: rows.setdefault(g, {})["cupy"] = m
print("| test | brisk | Dask + CuPy | plain CuPy | brisk ÷ CuPy | brisk ÷ Dask | first use (no cache / cached) |")
print("|---|---|---|---|---|---|---|")
for g in sorted(rows):
    d = rows[g]
    b = statistics.median(d["brisk"]) if d.get("brisk") else None
    f = lambda v: f"{v:.3f} s" if v else "–"
    ratio = lambda a, c: f"{a / c:.2f}" if a and c else "–"
    print(f"| {g} | {f(b)} | {f(d.get('dask'))} | {f(d.get('cupy'))} | {ratio(b, d.get('cupy'))} | {ratio(b, d.get('dask'))} | {f(d.get('first_cold'))} / {f(d.get('first_cached'))} |")
spread = sorted(out.glob("spread-*.jsonl"))
if spread:
    times = {}
    for p in spread:
        n = p.stem.split("-")[1]
        for r in load(p.name):
            if r["run"] != "warmup":
                times.setdefault(r["bench"].split("_")[1], {}).setdefault(n, []).append(r["seconds"])
    ns = sorted({n for t in times.values() for n in t}, key=int)
    print()
    print("| test | " + " | ".join(f"{n} GPU" for n in ns) + " | speed-up |")
    print("|---|" + "---|" * len(ns) + "---|")
    for g, t in times.items():
        m = [statistics.median(t[n]) if n in t else None for n in ns]
        up = f"{m[0] / m[-1]:.2f}" if m[0] and m[-1] else "–"
        print(f"| {g} | " + " | ".join(f"{v:.3f} s" if v else "–" for v in m) + f" | {up} |")
PY
