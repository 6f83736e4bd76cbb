"""Reference results for the reader tests: files pandas reads by its own
rules (NA tokens, spaces and Infinity in numbers, a header longer than
brisk's sample, JSON integers beyond int64 and long lines, decimal and
uint64 Parquet columns, missing group keys), read by pandas here.

    python3 python_readers.py gen DIR          # write the input files
    python3 python_readers.py check DIR FILE   # compare brisk's JSON in FILE

`check` prints every mismatch and exits 1 if there is one.
"""

import decimal
import json
import math
import os
import sys

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

NA = ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
      "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]


def gen(d):
    os.makedirs(d, exist_ok=True)
    # Every NA token in a float, an int and a key column; numbers with
    # spaces around them; infinities. Rows enough for several blocks.
    rows = ["id,k,x,y,z"]
    for i in range(400):
        na = NA[i % len(NA)]
        k = na if i % 7 == 0 else f"k{i % 5}"
        x = na if i % 3 == 0 else (f" {i / 8} " if i % 5 == 0 else str(i / 4 - 20))
        y = na if i % 11 == 0 else (f"  {i}" if i % 2 else str(i * 3))
        z = ["Infinity", "-Infinity", "inf", "-inf", "+inf", "iNf"][i % 6] if i % 4 == 0 else str(i)
        rows.append(f"{i},{k},{x},{y},{z}")
    with open(os.path.join(d, "na.csv"), "w") as fh:
        fh.write("\n".join(rows) + "\n")
    # Clean for longer than the type-inference sample, then NA tokens and
    # spaces: the typed parse fails there and the block is read again.
    rows = ["k,v"] + [f"g{i % 9},{i}" for i in range(40000)]
    rows += [f"g{i % 9},{NA[i % len(NA)] if i % 2 else ' 7 '}" for i in range(40)]
    with open(os.path.join(d, "late.csv"), "w") as fh:
        fh.write("\n".join(rows) + "\n")
    # One NA in a numeric column.
    with open(os.path.join(d, "one_na.csv"), "w") as fh:
        fh.write("v\n1.5\nNA\n2.5\n")
    # A header of about 300 KB, longer than the 256,000-byte sample.
    names = [f"column_{i:06d}_name" for i in range(16000)]
    with open(os.path.join(d, "wide.csv"), "w") as fh:
        fh.write(",".join(names) + "\n")
        for r in range(3):
            fh.write(",".join(str(r * 100000 + i) for i in range(len(names))) + "\n")
    # Parquet: decimals, uint64 above 2^63, missing keys.
    pq.write_table(pa.table({
        "d": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.50"), decimal.Decimal("12345678.99")],
                      pa.decimal128(10, 2)),
        "w": pa.array([decimal.Decimal("1.5"), decimal.Decimal("-2"), None, decimal.Decimal("0.1")],
                      pa.decimal256(30, 1)),
        "u": pa.array([1, 2**63 + 5, 2**64 - 1, None], pa.uint64()),
        "k": pa.array(["a", None, "a", "b"]),
    }), os.path.join(d, "exotic.parquet"))
    # JSON lines: an integer beyond int64, a line over 256 KiB.
    with open(os.path.join(d, "big.jsonl"), "w") as fh:
        fh.write('{"a": 1, "k": "x"}\n{"a": 10000000000000000000, "k": null}\n{"a": -5, "k": "x"}\n')
    with open(os.path.join(d, "long.jsonl"), "w") as fh:
        fh.write(json.dumps({"s": "x" * (300 << 10), "n": 1}) + "\n")
        fh.write(json.dumps({"s": "short", "n": 2}) + "\n")


def clean(v):
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, decimal.Decimal):
        v = float(v)
    # JSON carries no infinities: brisk writes them as null (the counts
    # of infinities are compared on their own).
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if v is pd.NA:
        return None
    return v


def records(df):
    return [{k: clean(v) for k, v in r.items()} for r in df.to_dict(orient="records")]


def by_key(df, key):
    return records(df.reset_index().sort_values(key))


def expected(d):
    e = {}
    na = pd.read_csv(os.path.join(d, "na.csv"))
    e["na_all"] = records(na)
    e["na_dtypes"] = {"id": "int64", "k": "string", "x": "float64", "y": "int64", "z": "float64"}
    e["na_z_inf"] = [int((na["z"] == math.inf).sum()), int((na["z"] == -math.inf).sum())]
    e["na_x_mean"] = clean(na["x"].mean())
    e["na_y_sum"] = clean(na["y"].sum())
    e["na_y_count"] = int(na["y"].count())
    g = na.groupby("k").agg(x=("x", "mean"), y=("y", "sum"), id=("id", "count"))
    e["na_groupby_fast"] = by_key(g, "k")
    e["na_groupby_general"] = by_key(g, "k")
    e["na_groupby_size"] = by_key(na.groupby("k").size().rename("size"), "k")
    late = pd.read_csv(os.path.join(d, "late.csv"))
    e["late_sum"] = clean(late["v"].sum())
    e["late_count"] = int(late["v"].count())
    e["late_groupby"] = by_key(late.groupby("k").agg(v=("v", "sum")), "k")
    e["one_na_mean"] = clean(pd.read_csv(os.path.join(d, "one_na.csv"))["v"].mean())
    wide = pd.read_csv(os.path.join(d, "wide.csv"))
    e["wide_ncols"] = len(wide.columns)
    e["wide_last"] = wide.columns[-1]
    e["wide_last_sum"] = clean(wide[wide.columns[-1]].sum())
    e["usecols_empty"] = list(pd.read_csv(os.path.join(d, "na.csv"), usecols=[]).shape)
    ex = pd.read_parquet(os.path.join(d, "exotic.parquet"))
    e["pq_d"] = [clean(v) for v in ex["d"]]
    e["pq_w"] = [clean(v) for v in ex["w"]]
    e["pq_u"] = [None if pd.isna(v) else float(v) for v in ex["u"]]
    e["pq_d_sum"] = clean(sum(float(v) for v in ex["d"] if v is not None))
    e["pq_groupby"] = by_key(ex.assign(dd=ex["d"].astype(float)).groupby("k").agg(dd=("dd", "sum")), "k")
    big = pd.read_json(os.path.join(d, "big.jsonl"), lines=True)
    e["json_big"] = [float(v) for v in big["a"]]
    e["json_groupby"] = by_key(big.assign(a=big["a"].astype(float)).groupby("k").agg(a=("a", "sum")), "k")
    long = pd.read_json(os.path.join(d, "long.jsonl"), lines=True)
    e["json_long"] = [[len(s), int(n)] for s, n in zip(long["s"], long["n"])]
    return e


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is None and b is None
        if isinstance(a, bool) or isinstance(b, bool):
            return a == b
        if math.isinf(a) or math.isinf(b):
            return a == b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
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
        elif not same(sorted(got[k], key=lambda r: str(r["k"])) if "groupby" in k else got[k], v):
            print(f"{k}: brisk {json.dumps(got[k])[:600]}\n   pandas {json.dumps(v)[:600]}")
            bad += 1
    print(f"{len(want) - bad}/{len(want)} cases agree")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
