#!/usr/bin/env bash
# The checks that need a GPU, for a machine that has one (CI has none: there
# the same code paths report "no GPU" and their tests pass on that).
#   bash scripts/gpu-tests.sh            # uses cargo when present
#   BRISK_BIN=path/to/brisk bash scripts/gpu-tests.sh   # a prebuilt binary
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
if command -v cargo >/dev/null; then
    # BRISK_REQUIRE_GPU turns "no GPU" into a failure.
    BRISK_REQUIRE_GPU=1 cargo test -p brisk-engine --lib gpu:: -- --nocapture
    cargo build --release -p brisk
fi
bin="${BRISK_BIN:-target/release/brisk}"
# End to end: the live panel of a compute longer than half a second names
# the GPU and its memory (as nvidia-smi does above).
script_file="$(mktemp --suffix .rhai)"
cat >"$script_file" <<'RHAI'
let parts = [];
for i in 0..64 { parts.push(delayed(|x| { let s = 0; for j in 0..3000000 { s += j; } s + x }).call(i)); }
print(`n=${compute(parts)[0].len()}`);
RHAI
out="$(script -qefc "stty cols 140 rows 40; exec $bin run $script_file" /dev/null | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g')"
echo "$out" | grep -m3 -E '^(worker|local)' || true
row="$(echo "$out" | grep -m1 '^local ' || true)"
if [[ "$row" =~ (NVIDIA|Tesla|H100|H200|A100)[^/]*[0-9.]+\ ([KMGT]i)?B\ /\ [0-9.]+\ GiB ]]; then
    echo "ok: the panel shows the GPU and its memory"
else
    echo "FAILED: no GPU in the panel's worker row: $row" >&2
    echo "$out" | tail -5 >&2
    exit 1
fi
