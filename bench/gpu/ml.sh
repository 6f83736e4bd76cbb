#!/usr/bin/env bash
# The GPU ML benchmark on the lent machine: brisk's GML rows (GPU and the
# host's cores) beside the PyTorch anchors and, where Dask is installed,
# Dask + CuPy running dask-ml (GML5), in one run.
#   BRISK_BIN=path/to/brisk bash bench/gpu/ml.sh OUTDIR
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:?usage: bench/gpu/ml.sh OUTDIR}"
mkdir -p "$out"
bin="${BRISK_BIN:-target/release/brisk}"
py="${BRISK_GPU_PYTHON:-/opt/torch/.venv/bin/python}"
command -v "$py" >/dev/null || py=python3
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" "$bin" run bench/gpu/ml.rhai | tee "$out/brisk.jsonl"
CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" "$py" bench/gpu/ml_torch.py | tee "$out/torch.jsonl"
# GML5, when Dask and dask-ml are there (carried as wheels: bench/README.md).
if "$py" -c "import dask_ml" 2>/dev/null; then
    CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" "$py" bench/gpu/ml_dask.py | tee "$out/dask.jsonl"
fi
