"""The single-machine engines a user might pick instead of Dask, on B6's files:
Polars (lazy) and DuckDB, each held to the threads brisk and Dask use.

    bench/.venv/bin/python bench/peers.py ENGINE WORKLOAD --dir DIR [--threads 2]

ENGINE is polars or duckdb; WORKLOAD one of b6-csv-agg, b6-csv-filter, b6-pq-agg,
b6-pq-filter. Prints one JSON line as dask_side.py does (seconds, result), or
{"error": ...} when the engine is not installed. Optional peers: the harness runs
them with --peers, and their absence is not a failure.
"""
import argparse
import json
import os
import sys
import time


def query(engine, workload, d, threads):
    fmt = "pq" if "-pq-" in workload else "csv"
    agg = workload.endswith("-agg")
    if engine == "polars":
        os.environ["POLARS_MAX_THREADS"] = str(threads)
        import polars as pl
        src = (pl.scan_parquet(f"{d}/parquet/*.parquet") if fmt == "pq"
               else pl.scan_csv(f"{d}/*.csv"))
        if agg:
            q = src.group_by("key").agg(pl.col("x").mean(), pl.col("y").sum())
            t0 = time.perf_counter()
            out = q.collect()
            t1 = time.perf_counter()
            return t1 - t0, float(out["x"].sum())
        q = src.filter(pl.col("x") > 0.5).group_by("key").len()
        t0 = time.perf_counter()
        out = q.collect()
        t1 = time.perf_counter()
        return t1 - t0, int(out.filter(pl.col("key") == "k0")["len"][0])
    import duckdb
    con = duckdb.connect()
    con.execute(f"SET threads TO {threads}")
    src = (f"read_parquet('{d}/parquet/*.parquet')" if fmt == "pq"
           else f"read_csv('{d}/*.csv')")
    if agg:
        sql = f"SELECT key, avg(x) AS x, sum(y) AS y FROM {src} GROUP BY key"
        t0 = time.perf_counter()
        rows = con.execute(sql).fetchall()
        t1 = time.perf_counter()
        return t1 - t0, float(sum(r[1] for r in rows))
    sql = f"SELECT key, count(*) FROM {src} WHERE x > 0.5 GROUP BY key"
    t0 = time.perf_counter()
    rows = con.execute(sql).fetchall()
    t1 = time.perf_counter()
    return t1 - t0, int(dict(rows)["k0"])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("engine", choices=["polars", "duckdb"])
    ap.add_argument("workload", choices=["b6-csv-agg", "b6-csv-filter", "b6-pq-agg", "b6-pq-filter"])
    ap.add_argument("--dir", required=True, help="B6's data directory (bench/frame_data.py)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    try:
        seconds, result = query(a.engine, a.workload, a.dir, a.threads)
    except ImportError as e:
        print(json.dumps({"error": f"{a.engine} is not installed: {e}"}))
        return 0
    print(json.dumps({"engine": a.engine, "workload": a.workload, "seconds": seconds,
                      "result": result, "threads": a.threads}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
