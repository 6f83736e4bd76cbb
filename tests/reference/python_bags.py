"""Reference results for the bag tests, in plain Python (the semantics Dask's
bag has: lines keep their newline, str.split, Counter, heapq.nlargest).

    python3 python_bags.py gen DIR          # write the input text files
    python3 python_bags.py check DIR FILE   # compare brisk's JSON in FILE

`check` prints every mismatch and exits 1 if there is one.
"""

import collections
import glob
import heapq
import json
import os
import random
import statistics
import sys


def gen(d):
    rng = random.Random(20261122)
    vocab = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 6))) for _ in range(300)]
    os.makedirs(d, exist_ok=True)
    for f in range(3):
        lines = []
        for i in range(400 + 50 * f):
            k = rng.randint(0, 12)
            words = [rng.choice(vocab[: 20 + 10 * (i % 20)]) for _ in range(k)]
            words = [w.upper() if rng.random() < 0.1 else w for w in words]
            sep = "  " if rng.random() < 0.1 else " "
            line = sep.join(words)
            if rng.random() < 0.1:
                line = "  " + line + " \t"
            lines.append(line)
        end = "\r\n" if f == 1 else "\n"
        text = end.join(lines) + ("" if f == 2 else end)
        with open(os.path.join(d, f"part{f}.txt"), "w", newline="") as fh:
            fh.write(text)


def lines_of(d):
    out = []
    for p in sorted(glob.glob(os.path.join(d, "*.txt"))):
        with open(p, newline=None) as fh:  # universal newlines, as Dask's read_text
            out.extend(fh.readlines())
    return out


def expected(d):
    lines = lines_of(d)
    words = collections.Counter(w for l in lines for w in l.split())
    lower = collections.Counter(w for l in lines for w in l.lower().strip().split(" "))
    spaces = collections.Counter(w for l in lines for w in l.split(" "))
    nums = list(range(-50, 250, 7))
    kept = [l for l in lines if l != "\n"][:5]
    recs = [{"name": f"n{i}", "score": (i * 37) % 101} for i in range(60)]
    evens = [x * x for x in nums if x % 3 == 0]
    fold = collections.defaultdict(int)
    for x in nums:
        fold[str((x + 100) % 5)] += x
    groups = collections.defaultdict(list)
    for x in nums:
        groups[str((x + 100) % 4)].append(x)
    return {
        "lines": lines,
        "lines_blocks": lines,
        "count_lines": len(lines),
        "freq_words": dict(words),
        "freq_lower_space": dict(lower),
        "freq_closure_space": dict(spaces),
        "top10_counts": sorted(words.values(), reverse=True)[:10],
        "top10_words_ok": True,
        "count": len(nums),
        "sum": sum(nums),
        "mean": sum(nums) / len(nums),
        "min": min(nums),
        "max": max(nums),
        "filter_map": evens,
        "distinct_mod": sorted({(x + 100) % 10 for x in nums}),
        "foldby": dict(fold),
        "groupby": {k: sorted(v) for k, v in groups.items()},
        "reduction": len(nums),
        "topk": heapq.nlargest(5, nums),
        "topk_key": [r["name"] for r in heapq.nlargest(4, recs, key=lambda r: r["score"])],
        "pluck_sum": sum(r["score"] for r in recs),
        "take": nums[:3],
        "range_sum": sum(range(10)),
        "map_partitions_total": len(nums),
        "round_trip": [l.rstrip("\n") + "\n" for l in kept[:4]] + [kept[4].rstrip("\n")],
        "any_true": any(x > 240 for x in nums),
        "any_false": any(x > 1000 for x in nums),
        "all_true": all(x != 1 for x in nums),
        "all_false": all(range(10)),
        "std": statistics.pstdev(nums),
        "variance1": statistics.variance(nums),
        "fold": sum(nums),
        # Dask's fold: `initial` starts each of the 3 partitions and the aggregate.
        "fold_initial": 10 + 3 * 10 + sum(range(10)),
        "fold_combine": sum(r["score"] for r in recs),
        "starmap": [1 * 2, 3 * 4, 5 * 6],
        "zip": [[i, 2 * i] for i in range(10)],
        "concat": list(range(10)) + [-i for i in range(10)] + [x for x in nums if x > 200],
        "sample_ok": True,
        "sample_edges": [0, len(nums)],
        "parse_json": [json.loads(t) for t in ['{"a": 1, "b": [1.5, null, true]}', "[1, 2]", '"s"']],
        # Dask's Bag.join: (other item, record) for each record, others in their order.
        "join": [[o, x] for x in nums for o in range(11) if (o + 100) % 7 == (x + 100) % 7],
        "join_records": [[o["label"], r["name"]] for r in recs for o in [{"tag": 3, "label": "three"}, {"tag": 0, "label": "zero"}] if r["score"] % 5 == o["tag"]],
        "repartition": [nums, nums, 12, len(nums)],
        "delayed_round_trip": [x + 1 for x in nums],
        "delayed_count": True,
    }


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= 1e-9 * max(1, abs(b))
    return a == b


def check(d, path):
    with open(path) as fh:
        got = json.load(fh)
    want = expected(d)
    bad = 0
    for k, v in want.items():
        if k not in got:
            print(f"{k}: missing from brisk's results")
            bad += 1
        elif not same(got[k], v):
            print(f"{k}: brisk {json.dumps(got[k])[:400]}\n   Python {json.dumps(v)[:400]}")
            bad += 1
    print(f"{len(want) - bad}/{len(want)} cases agree")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
