#!/usr/bin/env bash
# The run on a host with several GPUs (issue 20), on the lent machine:
#   BRISK_BIN=path/to/brisk bash bench/gpu/multi.sh OUTDIR
#  1. G1-G4 at twice the data on one GPU and on all (bench/gpu/x2.rhai),
#     with the GPUs' process lists sampled: each worker holds a context on
#     its own device only.
#  2. Blocks moving between the workers device to device against one GPU
#     (bench/gpu/x2move.rhai), and the raw copies beside them: CUDA IPC
#     between two processes and a peer copy within one (gpu-run/ipcprobe.py
#     when carried).
#  3. `brisk scheduler` and `brisk cuda-worker` on every GPU; `brisk top`
#     under tmux shows both GPUs' memory while a product runs; one worker is
#     killed (SIGKILL) mid-graph: its nanny restarts it and the answers
#     equal the local runtime's.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${1:?usage: bench/gpu/multi.sh OUTDIR}"
mkdir -p "$out"
bin="${BRISK_BIN:-target/release/brisk}"
tmux="${TMUX_BIN:-tmux}"
sampler=""
fail() { echo "FAILED: $*" >&2; exit 1; }
tmp="$(mktemp -d)"
pids=()
cleanup() {
    [ -z "$sampler" ] || kill "$sampler" 2>/dev/null
    "$tmux" -S "$tmp/tmux" kill-server 2>/dev/null || true
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 2
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
export BRISK_KERNEL_CACHE="${BRISK_KERNEL_CACHE:-$(mktemp -d)}"
nvidia-smi --query-gpu=index,name,memory.total,pci.bus_id --format=csv,noheader | tee "$out/devices.txt"
nvidia-smi topo -m | head -4

sample() {
    while true; do
        nvidia-smi --query-compute-apps=pid,gpu_bus_id,used_memory --format=csv,noheader 2>/dev/null |
            while IFS=, read -r pid bus mem; do
                echo "$pid,$bus,$mem,$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)"
            done >> "$1"
        sleep 0.5
    done
}
sample "$out/apps.txt" > /dev/null 2>&1 & sampler=$!
"$bin" run bench/gpu/x2.rhai > "$out/x2.jsonl" 2> "$out/x2.err" || { tail "$out/x2.err"; fail "bench/gpu/x2.rhai"; }
BRISK_LOG=info "$bin" run bench/gpu/x2move.rhai > "$out/move.jsonl" 2> "$out/move.err" || { tail "$out/move.err"; fail "bench/gpu/x2move.rhai"; }
grep "device to device" "$out/move.err" | sed 's/tcp:[^ ]*/PEER/' | tail -12
kill "$sampler"; sampler=""
python3 - "$out" <<'PY'
import json, statistics, sys, collections, pathlib
out = pathlib.Path(sys.argv[1])
d = collections.defaultdict(list)
for name in ("x2.jsonl", "move.jsonl"):
    for l in (out / name).read_text().splitlines():
        if not l.startswith("{"): continue
        r = json.loads(l)
        if "bench" in r and r["run"] != "warmup":
            d[r["bench"]].append(r["seconds"])
            if "moved" in r: print(r)
        elif "bench" not in r: print(r)
for k, v in sorted(d.items()): print(f"{k} median {statistics.median(v):.4f} s:", " ".join(f"{x:.4f}" for x in v))
buses = collections.defaultdict(set)
for l in (out / "apps.txt").read_text().splitlines():
    p = [x.strip() for x in l.split(",", 3)]
    if len(p) >= 4 and " worker " in f" {p[3]} ": buses[(p[0], p[3][:100])].add(p[1])
for (pid, cmd), b in sorted(buses.items()): print("worker", pid, "on", sorted(b), cmd)
print("each worker on one GPU:", all(len(b) == 1 for b in buses.values()) and len(buses) > 0)
PY
if [ -f gpu-run/ipcprobe.sh ]; then timeout 60 bash gpu-run/ipcprobe.sh 2>&1 < /dev/null | grep -E "export|peer" | tee "$out/probe.txt"; fi

"$bin" run tests/gpu/x2_kill.rhai > "$tmp/local.out" 2> "$tmp/local.err" || fail "x2_kill.rhai locally"
cat "$tmp/local.err"
BRISK_LOG=info "$bin" scheduler --port 0 --http-port 0 > "$tmp/scheduler.out" 2> "$tmp/scheduler.err" &
pids+=($!)
for _ in $(seq 100); do grep -q "tcp://" "$tmp/scheduler.out" && break; sleep 0.1; done
addr="$(grep -o 'tcp://[^ ]*' "$tmp/scheduler.out" | head -1)"
[ -n "$addr" ] || fail "the scheduler printed no address"
BRISK_LOG=info "$bin" cuda-worker "$addr" --name g 2> "$tmp/workers.err" &
pids+=($!)
gpus="$(nvidia-smi -L | wc -l)"
for _ in $(seq 300); do [ "$(grep -c 'joined' "$tmp/scheduler.err")" -ge "$gpus" ] && break; sleep 0.1; done
"$tmux" -S "$tmp/tmux" new-session -d -x 150 -y 45 "$bin top $addr"
BRISK_SCHEDULER_ADDRESS="$addr" "$bin" run tests/gpu/x2_kill.rhai > "$tmp/cluster.out" 2> "$tmp/cluster.err" &
run=$!
sleep 2
"$tmux" -S "$tmp/tmux" capture-pane -p > "$out/top.txt"
victim="$(pgrep -f -- "--name g-1 " | sort -n | tail -1)"
[ -n "$victim" ] || fail "no worker g-1 to kill"
ps -o pid,ppid,args -p "$victim" | cut -c1-120
kill -0 "$run" 2>/dev/null || fail "the graph ended before the kill: make it longer"
kill -KILL "$victim"
echo "killed worker g-1 (pid $victim) at 2 s, mid-graph"
wait "$run" || { cat "$tmp/cluster.err"; fail "x2_kill.rhai on the cluster"; }
cat "$tmp/cluster.err"
sleep 2
"$tmux" -S "$tmp/tmux" capture-pane -p > "$out/top-after.txt"
grep -E "left|joined|lost" "$tmp/scheduler.err" | cut -c1-200 | tail -6
echo "local:   $(tr '\n' ' ' < "$tmp/local.out")"
echo "cluster: $(tr '\n' ' ' < "$tmp/cluster.out")"
diff "$tmp/local.out" "$tmp/cluster.out" > /dev/null && echo "ok: a worker killed mid-graph, answers equal the local runtime's" || echo "DIFFERENT answers after the kill"
cat "$out/top.txt"
