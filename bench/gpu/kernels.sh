#!/usr/bin/env bash
# Users' kernels against built-in fused kernels (bench/gpu/kernels.rhai), in
# two processes over one fresh kernel cache: the first compiles, the
# second's warm-up reads the cache (the first keeps the generated sources
# in OUTDIR/sources). Prints the JSON lines and a summary.
#   BRISK_BIN=path/to/brisk bash bench/gpu/kernels.sh OUTDIR
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:?usage: bench/gpu/kernels.sh OUTDIR}"
mkdir -p "$out"
bin="${BRISK_BIN:-target/release/brisk}"
BRISK_KERNEL_CACHE="$(mktemp -d)"
export BRISK_KERNEL_CACHE
CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" BRISK_KERNEL_SOURCES="$out/sources" "$bin" run bench/gpu/kernels.rhai > "$out/kernels-cold.jsonl"
CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" "$bin" run bench/gpu/kernels.rhai > "$out/kernels-cached.jsonl"
rm -rf "$BRISK_KERNEL_CACHE"
python3 - "$out" <<'PY'
import json, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1])
for run in ["cold", "cached"]:
    rows = [json.loads(l) for l in (out / f"kernels-{run}.jsonl").read_text().splitlines() if l.startswith("{")]
    times = {}
    for r in rows:
        if "bench" in r:
            times.setdefault(r["bench"], {"warm": [], "runs": []})
            times[r["bench"]]["warm" if r["run"] == "warmup" else "runs"].append(r["seconds"])
    base = statistics.median(times["G3_builtin"]["runs"])
    for b, t in times.items():
        med = statistics.median(t["runs"])
        print(f"{run:6} {b:24} warm-up {t['warm'][0]:.3f} s  median {med:.4f} s  ({med / base:.2f} x built-in)")
PY
