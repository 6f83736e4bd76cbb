"""The CSV input of B6: N million rows in 8 files (id i64, key one of 1,000
strings, x uniform, y normal), made once (deterministic) under bench/.data/
with the bench venv's NumPy and pyarrow, as shared/bench/dask/gen_data.py
makes them. Beside the files, expected.json holds the answers both sides
must give (computed by pyarrow, not by either side).

    bench/.venv/bin/python bench/frame_data.py 20      # prints the directory
"""
import json
import os
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
FILES = 8
KEYS = 1000


def ensure(millions):
    d = os.path.join(BENCH, ".data", f"frames-{millions}m")
    done = os.path.join(d, "expected.json")
    if os.path.exists(done):
        ensure_parquet(d)
        return d
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    os.makedirs(d, exist_ok=True)
    rows = millions * 1_000_000
    per = rows // FILES
    names = pa.array([f"k{i}" for i in range(KEYS)], type=pa.string())
    tables = []
    for i in range(FILES):
        rng = np.random.default_rng(1000 + i)
        n = per if i < FILES - 1 else rows - per * (FILES - 1)
        ids = np.arange(i * per, i * per + n, dtype=np.int64)
        keys = names.take(pa.array(rng.integers(0, KEYS, size=n, dtype=np.int64)))
        t = pa.table({"id": ids, "key": keys, "x": rng.random(n), "y": rng.standard_normal(n)})
        with open(os.path.join(d, f"part-{i}.csv"), "wb") as f:
            f.write(b"id,key,x,y\n")
            pacsv.write_csv(t, f, write_options=pacsv.WriteOptions(include_header=False, quoting_style="none"))
        tables.append(t)
    # The answers, from the values as written (CSV text read back).
    t = pa.concat_tables([pacsv.read_csv(os.path.join(d, f"part-{i}.csv")) for i in range(FILES)])
    agg = t.group_by("key").aggregate([("x", "mean"), ("y", "sum")])
    big = t.filter(pc.greater(t["x"], 0.5))
    k0 = big.filter(pc.equal(big["key"], "k0")).num_rows
    expected = {
        "agg_sum_x_mean": float(pc.sum(agg["x_mean"]).as_py()),
        "agg_groups": agg.num_rows,
        "filter_k0": k0,
    }
    with open(done, "w") as fh:
        json.dump(expected, fh)
    ensure_parquet(d)
    return d


def ensure_parquet(d):
    """The same rows as 8 Parquet files (pyarrow's defaults: snappy,
    row groups of up to 1Mi rows) under d/parquet."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq
    out = os.path.join(d, "parquet")
    if os.path.exists(os.path.join(out, f"part-{FILES - 1}.parquet")):
        return
    os.makedirs(out, exist_ok=True)
    for i in range(FILES):
        t = pacsv.read_csv(os.path.join(d, f"part-{i}.csv"))
        pq.write_table(t, os.path.join(out, f"part-{i}.parquet"), compression="snappy")


def expected(millions, key):
    with open(os.path.join(ensure(millions), "expected.json")) as fh:
        return json.load(fh)[key]


if __name__ == "__main__":
    print(ensure(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
