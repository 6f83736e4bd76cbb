"""What the live panel costs a compute: B3 run on a pseudo-terminal (util-linux
`script`) with the panel drawn and with `--no-progress`, alternating, in fresh
processes. Prints the medians and the ratio (issue 6 asks for < 2% extra).

    python3 bench/panel_cost.py [--n 20000] [--runs 5] [--bin target/release/brisk]
"""

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def once(binary, script, panel):
    flag = "" if panel else " --no-progress"
    cmd = f"stty cols 120 rows 40; exec {shlex.quote(binary)} run{flag} {shlex.quote(script)}"
    out = subprocess.run(["script", "-qefc", cmd, "/dev/null"], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"brisk failed ({out.returncode}): {out.stdout[-2000:]}")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.stdout)
    line = next(l for l in text.splitlines() if l.strip().startswith('{"'))
    result = json.loads(line[line.index("{"):])
    drawn = "tasks/s |" in text
    if drawn != panel:
        raise SystemExit(f"panel drawn={drawn}, expected {panel}")
    return result["seconds"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "target", "release", "brisk"))
    a = ap.parse_args()
    with open(os.path.join(HERE, "workloads", "b3.rhai")) as f:
        body = f.read()
    with tempfile.NamedTemporaryFile("w", suffix=".rhai", delete=False) as f:
        f.write(f"let N = {a.n};\n" + body)
        script = f.name
    times = {True: [], False: []}
    for _ in range(a.runs):
        for panel in (False, True):
            times[panel].append(once(a.bin, script, panel))
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print(json.dumps({"workload": "b3", "n": a.n, "runs": a.runs, "panel_s": on, "no_panel_s": off,
                      "ratio": on / off, "all_panel": times[True], "all_no_panel": times[False]}))


if __name__ == "__main__":
    main()
