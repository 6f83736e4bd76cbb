#!/usr/bin/env bash
# The CUDA cluster on a GPU machine (issue: one worker per GPU). Run by
# scripts/gpu-tests.sh; BRISK_BIN names the binary (default target/release/brisk).
#  1. G1–G4 on a one-GPU local_cuda_cluster: the local runtime's answers.
#  2. A working set twice the device memory limit: exact, by spilling.
#     Programs run with run_command on the CUDA cluster see one GPU each
#     (where python3 has PyTorch). Users' kernels on the cluster; one that
#     faults fails its task and its worker restarts (tests/gpu/kernels.rhai).
#  3. Two `brisk cuda-worker`s beside a `brisk scheduler`: GPU blocks move
#     between them, device to device (CUDA IPC) to one and through the host
#     to the other, whose imports are refused (BRISK_GPU_IPC_REFUSE, as a
#     driver without peer access would); then one worker's GPU fails mid-graph (a real illegal
#     address, BRISK_GPU_FAULT): it is reported with the error, its work
#     runs on the other, the answers stay exact, and nothing is left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${BRISK_BIN:-target/release/brisk}"
fail() { echo "FAILED: $*" >&2; exit 1; }

"$bin" run bench/gpu/cluster.rhai > /tmp/brisk-gpu-cluster.jsonl || fail "bench/gpu/cluster.rhai"
grep -E '^\{"check"|^ok' /tmp/brisk-gpu-cluster.jsonl
"$bin" run tests/gpu/cluster_spill.rhai || fail "tests/gpu/cluster_spill.rhai"
"$bin" run tests/gpu/kernels.rhai || fail "tests/gpu/kernels.rhai"
# A local session offers its GPUs to a program that asks for one.
local_rhai="$(mktemp --suffix .rhai)"
echo 'let r = run_command(["sh", "-c", "echo local"], #{resources: #{GPU: 1}}).result().stdout; r.trim(); print(r);' > "$local_rhai"
[ "$("$bin" run "$local_rhai")" = "local" ] || fail "a local session refused run_command with resources #{GPU: 1}"
rm -f "$local_rhai"
echo "ok: a local session offers its GPUs to run_command"
if python3 -c "import torch" 2> /dev/null; then
    "$bin" run tests/gpu/run_command.rhai || fail "tests/gpu/run_command.rhai"
    echo "ok: run_command's programs see their worker's one GPU"
fi

tmp="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 2
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
"$bin" run tests/gpu/cluster_moves.rhai > "$tmp/local.out" || fail "cluster_moves.rhai locally"
BRISK_LOG=info "$bin" scheduler --port 0 --http-port 0 > "$tmp/scheduler.out" 2> "$tmp/scheduler.err" &
pids+=($!)
for _ in $(seq 100); do grep -q "tcp://" "$tmp/scheduler.out" && break; sleep 0.1; done
addr="$(grep -o 'tcp://[^ ]*' "$tmp/scheduler.out" | head -1)"
[ -n "$addr" ] || fail "the scheduler printed no address"
"$bin" cuda-worker "$addr" --devices 0 --name a --device-memory-limit 0.4 2> "$tmp/a.err" &
pids+=($!)
BRISK_GPU_IPC_REFUSE=1 BRISK_GPU_FAULT="$tmp/fault" "$bin" cuda-worker "$addr" --devices 0 --name b --device-memory-limit 0.4 2> "$tmp/b.err" &
pids+=($!)
for _ in $(seq 200); do [ "$(grep -c 'joined' "$tmp/scheduler.err")" -ge 2 ] && break; sleep 0.1; done
BRISK_SCHEDULER_ADDRESS="$addr" "$bin" run tests/gpu/cluster_moves.rhai > "$tmp/cluster.out" || fail "cluster_moves.rhai on the cluster"
diff "$tmp/local.out" "$tmp/cluster.out" || fail "two CUDA workers gave other answers than the local runtime"
echo "ok: GPU blocks move between two CUDA workers, answers exact"
BRISK_SCHEDULER_ADDRESS="$addr" "$bin" run tests/gpu/cluster_ipc.rhai || fail "no block moved device to device"
grep -q "come through the host" "$tmp/b.err" || { cat "$tmp/b.err" >&2; fail "refused device-to-device blocks did not fall back to host copies"; }
echo "ok: blocks move device to device (CUDA IPC), and through the host where refused"
: > "$tmp/fault"
BRISK_SCHEDULER_ADDRESS="$addr" "$bin" run tests/gpu/cluster_moves.rhai > "$tmp/fault.out" || fail "cluster_moves.rhai with a GPU failing"
[ ! -e "$tmp/fault" ] || fail "no worker reached the fault"
diff "$tmp/local.out" "$tmp/fault.out" || fail "answers changed after a GPU failed"
grep -q "its GPU failed: .*GPU error on device" "$tmp/scheduler.err" || { cat "$tmp/scheduler.err" "$tmp/b.err" >&2; fail "the scheduler did not report the GPU failure"; }
grep -m1 "its GPU failed" "$tmp/scheduler.err"
echo "ok: a failed GPU is reported, its work reruns elsewhere, answers exact"
CUDA_VISIBLE_DEVICES=0 "$bin" worker "$addr" --name pinned --resources "PIN=1" 2> "$tmp/pinned.err" &
pids+=($!)
for _ in $(seq 100); do grep -q 'worker pinned joined' "$tmp/scheduler.err" && break; sleep 0.1; done
BRISK_SCHEDULER_ADDRESS="$addr" "$bin" run tests/gpu/pinned.rhai || { cat "$tmp/pinned.err" >&2; fail "tests/gpu/pinned.rhai"; }
for _ in $(seq 100); do [ "$(grep -c 'joined' "$tmp/scheduler.err")" -ge 3 ] && break; sleep 0.1; done
grep -q "worker b-0 joined\|worker b-0-[0-9]* joined" <(tail -n +3 "$tmp/scheduler.err") && echo "ok: its nanny started a new worker b-0"
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for _ in $(seq 100); do
    alive=0; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break; sleep 0.1
done
[ "$alive" = 0 ] || fail "processes left after SIGTERM"
left="$(pgrep -f "$bin (worker|scheduler)" || true)"
[ -z "$left" ] || fail "worker processes left: $left"
pids=()
echo "ok: the CUDA cluster left no process behind"
