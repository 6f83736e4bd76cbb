#!/usr/bin/env bash
# The checks that need a GPU, for a machine that has one (CI has none: there
# the same tests report "no GPU" and pass on that, and the GPU examples are
# skipped).
#   bash scripts/gpu-tests.sh            # builds with cargo when present
#   BRISK_BIN=path/to/brisk BRISK_TEST_BINS=dir bash scripts/gpu-tests.sh
#       # prebuilt: the binary, and the test executables brisk_gpu-* and
#       # brisk_engine-* (from `cargo test --no-run`) in dir
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
# BRISK_REQUIRE_GPU turns "no GPU" into a failure.
export BRISK_REQUIRE_GPU=1
if command -v cargo >/dev/null; then
    cargo test -p brisk-gpu -- --nocapture
    cargo test -p brisk-engine --lib gpu:: -- --nocapture
    cargo test -p brisk-script --test session every_documented_example_runs
    cargo test -p brisk --test golden golden_scripts_and_examples_print_what_they_printed_before
    cargo build --release -p brisk
else
    for t in "${BRISK_TEST_BINS:?no cargo: set BRISK_TEST_BINS}"/brisk_gpu-*; do "$t"; done
    for t in "$BRISK_TEST_BINS"/brisk_engine-*; do "$t" gpu::; done
    for t in "$BRISK_TEST_BINS"/session-*; do [ -x "$t" ] && "$t" every_documented_example_runs; done
fi
bin="${BRISK_BIN:-target/release/brisk}"
# The GPU examples print what their golden files say.
for ex in examples/gpu*.rhai; do
    name="$(basename "$ex" .rhai)"
    if diff <("$bin" run "$ex") "tests/golden/examples/$name.out"; then
        echo "ok: $ex"
    else
        echo "FAILED: $ex printed something else than tests/golden/examples/$name.out" >&2
        exit 1
    fi
done
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
# The CUDA cluster: one worker per GPU, spilling, moves, a failing GPU.
BRISK_BIN="$bin" bash scripts/gpu-cluster-tests.sh
