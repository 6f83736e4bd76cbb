"""Reference results for the dataframe tests, computed by pandas on the
same CSV files brisk reads.

    python3 python_frames.py gen DIR          # write the input CSV files
    python3 python_frames.py check DIR FILE   # compare brisk's JSON in FILE

`check` prints every mismatch and exits 1 if there is one.
"""

import glob
import gzip
import json
import math
import os
import random
import sys

import numpy as np
import pandas as pd


def gen(d):
    rng = random.Random(20261122)
    keys = ["k%02d" % i for i in range(12)]
    os.makedirs(d, exist_ok=True)
    i = 0
    for f in range(3):
        rows = ["id,key,x,y,flag"]
        for _ in range(250 + 40 * f):
            i += 1
            key = "" if rng.random() < 0.05 else rng.choice(keys)
            x = "" if rng.random() < 0.07 else repr(round(rng.uniform(-1, 1), 6))
            y = "" if rng.random() < 0.05 else str(rng.randint(-50, 1000))
            flag = rng.choice(["true", "false"])
            rows.append(f"{i},{key},{x},{y},{flag}")
        with open(os.path.join(d, f"part{f}.csv"), "w") as fh:
            fh.write("\n".join(rows) + "\n")
    # Dates and times, some missing, before and after 1970.
    rows = ["t,v"]
    for j in range(300):
        if rng.random() < 0.05:
            rows.append(f",{j}")
        else:
            secs = rng.randint(-20 * 365 * 86400, 80 * 365 * 86400)
            rows.append(pd.Timestamp(secs, unit="s").strftime("%Y-%m-%d %H:%M:%S") + f",{j}")
    with open(os.path.join(d, "dates.csv"), "w") as fh:
        fh.write("\n".join(rows) + "\n")
    # The same rows as JSON lines written by pandas, in two files.
    whole = frame(d)
    half = len(whole) // 2
    whole.iloc[:half].to_json(os.path.join(d, "a.jsonl"), orient="records", lines=True)
    whole.iloc[half:].to_json(os.path.join(d, "b.jsonl"), orient="records", lines=True)
    # The same rows as Parquet written by pandas, in row groups of 200.
    frame(d).to_parquet(os.path.join(d, "pandas.parquet"), row_group_size=200, index=False)
    # A category column, as pandas writes it (a dictionary of strings).
    cat_frame().to_parquet(os.path.join(d, "category.parquet"), row_group_size=2, index=False)
    # The CSV files' rows as one compressed file (the test makes a .zst of
    # comp/all.csv too), and the JSON lines gzipped.
    comp = os.path.join(d, "comp")
    os.makedirs(comp, exist_ok=True)
    text = "id,key,x,y,flag\n"
    for p in sorted(glob.glob(os.path.join(d, "part*.csv"))):
        with open(p) as fh:
            text += fh.read().split("\n", 1)[1]
    with open(os.path.join(comp, "all.csv"), "w") as fh:
        fh.write(text)
    with gzip.open(os.path.join(comp, "all.csv.gz"), "wt") as fh:
        fh.write(text)
    whole.to_json(os.path.join(comp, "all.jsonl.gz"), orient="records", lines=True, compression="gzip")


def frame(d):
    files = sorted(glob.glob(os.path.join(d, "part*.csv")))
    df = pd.concat([pd.read_csv(p) for p in files], ignore_index=True)
    df["key"] = df["key"].astype(object).where(df["key"].notna(), None)
    return df


def cat_frame():
    return pd.DataFrame({"k": pd.Categorical(["b", "a", None, "c", "a"], categories=["c", "b", "a"]), "x": [1, 2, 3, 4, 5]})


def records(df):
    out = []
    for r in df.to_dict(orient="records"):
        out.append({k: clean(v) for k, v in r.items()})
    return out


def clean(v):
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if hasattr(v, "item"):
        v = v.item()
        if isinstance(v, float) and math.isnan(v):
            return None
    return v


def flat_agg(g):
    g.columns = ["_".join(c) if isinstance(c, tuple) else c for c in g.columns]
    return g.reset_index()


def expected(d):
    df = frame(d)
    x, y = df["x"], df["y"]
    e = {}
    e["all"] = records(df)
    e["dtypes"] = {"id": "int64", "key": "string", "x": "float64", "y": "int64", "flag": "bool"}
    e["npartitions_ok"] = True
    for r in ["sum", "mean", "min", "max", "count", "std", "variance", "nunique"]:
        f = "var" if r == "variance" else r
        e[f"x_{r}"] = clean(getattr(x, f)())
        e[f"y_{r}"] = clean(getattr(y, f)())
    e["key_min"] = df["key"].dropna().min()
    e["key_nunique"] = int(df["key"].nunique())
    e["flag_sum"] = int(df["flag"].sum())
    e["filtered"] = records(df[df["x"] > 0.5])
    e["filter_and"] = records(df[(df["x"] > 0) & (df["y"] < 500)][["id", "y"]])
    vc = df[df["x"] > 0.5]["key"].value_counts()
    e["value_counts"] = {k: int(v) for k, v in vc.items()}
    g = df.groupby("key").agg({"x": "mean", "y": ["sum", "max", "count"]})
    g.columns = ["x", "y_sum", "y_max", "y_count"]
    e["groupby_agg"] = records(g.reset_index())
    e["groupby_std"] = records(df.groupby("key")[["x"]].std().reset_index())
    e["groupby_size"] = records(df.groupby("key").size().rename("size").reset_index())
    e["groupby_two"] = records(df.groupby(["key", "flag"]).agg({"x": "sum"}).reset_index())
    e["assign"] = records(df.assign(z=df["x"] * 2 + df["y"], w=df["y"] % 7, v=df["y"] / 4)[["id", "z", "w", "v"]])
    arith = df.assign(p=df["x"] ** 2, q=df["y"] ** 2, f=df["y"] // 7, g=df["x"] // 0.3, h=2.0 ** df["x"],
                      k=1000 // (df["y"] + 51), m=df["x"] ** 3)
    e["arith"] = records(arith[["id", "p", "q", "f", "g", "h", "k", "m"]])
    ordered = pd.DataFrame({"z": [1, 2], "a": [3.5, None]}).assign(y=1, b=2)
    e["ordered"] = records(ordered)
    e["ordered_columns"] = list(ordered.columns)
    e["dropna"] = records(df.dropna())
    e["dropna_subset"] = int(len(df.dropna(subset=["x"])))
    e["fillna"] = records(df.fillna({"x": 0.0, "key": "none"})[["id", "key", "x"]])
    e["renamed"] = list(df.rename(columns={"x": "xx"}).drop(columns=["flag"]).columns)
    e["astype_sum"] = clean(df["id"].astype("float64").sum())
    e["str_ops"] = records(pd.DataFrame({
        "u": df["key"].dropna().str.upper(),
        "n": df["key"].dropna().str.len(),
        "c": df["key"].dropna().str.contains("0[1-3]$"),
    }))
    e["isin_count"] = int(df["key"].isin(["k01", "k02"]).sum())
    e["between_count"] = int(df["y"].between(100, 200).sum())
    e["abs_round"] = [clean(v) for v in (df["x"].abs().round(2)).head(20)]
    e["head7"] = records(df.head(7))
    e["empty"] = []
    e["unique_keys"] = sorted(df["key"].dropna().unique().tolist())
    e["parquet_round_trip"] = records(df)
    e["parquet_x_sum"] = clean(x.sum())
    e["parquet_columns"] = ["id", "x"]
    e["parquet_partitions"] = math.ceil(len(df) / 200)
    e["maps"] = records(pd.DataFrame([{"a": 1, "b": "x"}, {"a": 2, "b": None}, {"a": None, "b": "z"}]))
    e["from_bag"] = e["maps"]

    # Rows moved between partitions.
    right = pd.DataFrame({"key": ["k00", "k01", "k02", "k03", "zz"],
                          "weight": [1.5, 2.5, None, 4.0, 9.0], "x": [1, 2, 3, 4, 5]})
    e["repartition5"] = 5
    e["repartition_down"] = records(df)
    e["repartition_up"] = records(df)
    e["repartition_up_n"] = 13
    e["sorted"] = records(df.sort_values("y", kind="stable"))
    e["sorted_two"] = records(df.sort_values(["key", "id"], ascending=[False, True], kind="stable"))
    e["sorted_x_desc"] = records(df.sort_values("x", ascending=False, kind="stable"))
    e["set_index"] = records(df.set_index("y").sort_index(kind="stable").reset_index())
    e["divisions_len_ok"] = True
    e["divisions_ends"] = [clean(df["y"].min()), clean(df["y"].max())]
    e["divisions_sorted"] = True
    e["divisions_kept"] = True
    e["divisions_dropped"] = True
    e["unordered_shuffle"] = records(df)
    e["shuffle_npartitions"] = 3
    g = df.groupby("key").agg({"x": "mean", "y": "sum"}).reset_index()
    e["unordered_groupby_split"] = records(g)
    g = df.groupby("key").agg({"y": ["min", "count"]})
    g.columns = ["y_min", "y_count"]
    e["unordered_groupby_split_agg"] = records(g.reset_index())
    e["unordered_merge_inner"] = records(df.merge(right, on="key"))
    e["unordered_merge_left"] = records(df.merge(right, on="key", how="left"))
    e["unordered_merge_right"] = records(df.merge(right, on="key", how="right"))
    e["unordered_merge_outer"] = records(df.merge(right, on="key", how="outer"))
    e["unordered_merge_self"] = records(df[["id", "x"]].merge(df[["id", "y"]], on="id"))
    e["unordered_merge_left_on"] = records(df.merge(right.rename(columns={"key": "k2"}), left_on="key", right_on="k2"))
    other = pd.DataFrame({"id": [1.0, 2.0, 5.0, 7.5], "z": [1, 2, 3, 4]})
    e["unordered_merge_int_float"] = records(df[["id", "x"]].merge(other, on="id"))
    e["unordered_join"] = records(df[["key", "id"]].merge(right, on="key", how="left"))
    e["drop_duplicates"] = records(df[["key", "flag"]].drop_duplicates())
    e["drop_duplicates_subset"] = records(df.drop_duplicates(subset=["key"]))
    e["drop_duplicates_last"] = records(df.drop_duplicates(subset=["key"], keep="last"))
    e["drop_duplicates_none"] = records(df[["key", "flag"]].drop_duplicates(keep=False))
    e["drop_duplicates_none_subset"] = records(df.drop_duplicates(subset=["y"], keep=False))
    e["nlargest"] = [clean(v) for v in df["y"].nlargest(6)]
    e["nsmallest"] = [clean(v) for v in df["x"].nsmallest(4)]
    e["frame_nlargest"] = records(df.nlargest(5, "y"))
    e["tail7"] = records(df.tail(7))
    e["tail_x"] = [clean(v) for v in df["x"].tail(3)]
    e["pq_filter"] = records(df[df["id"] > 600])
    e["pq_filter_npartitions"] = 2
    e["pq_auto_npartitions"] = 1
    e["pq_auto"] = records(df[df["id"] <= 200])
    e["pq_filter_or"] = records(df[(df["id"] < 100) | ((df["key"] == "k01") & (df["y"] >= 500))])
    e["pq_filter_in"] = records(df[df["key"].isin(["k01", "k02"]) & (df["x"] < 0.0)][["id", "key"]])
    num = df[["id", "x", "y"]]
    e["rolling_mean"] = records(num.rolling(3).mean())
    e["rolling_sum"] = [clean(v) for v in df["y"].rolling(20).sum()]
    e["rolling_min"] = records(num.rolling(25).min())
    e["rolling_max"] = [clean(v) for v in df["x"].rolling(4).max()]
    col = lambda s: [clean(v) for v in s]
    x, y = df["x"], df["y"]
    e["rolling_more"] = [col(x.rolling(5).std()), col(y.rolling(4, min_periods=2).mean()), col(x.rolling(3).count()), col(y.rolling(7, min_periods=1).median()), col(y.rolling(3).var()), col(x.rolling(6, min_periods=0).count())]
    e["rolling_apply"] = col(y.rolling(3, min_periods=2).apply(lambda w: np.nanmax(w), raw=True))
    e["ewm"] = [col(x.ewm(span=4).mean()), col(y.ewm(com=2.5, adjust=False).mean()), col(x.ewm(halflife=3, ignore_na=True, min_periods=3).mean()), records(df[["x", "y"]].ewm(alpha=0.3).mean())]
    e["ewm_var"] = [col(x.ewm(span=4).var()), col(y.ewm(com=2.5, adjust=False).std()), col(x.ewm(halflife=3, ignore_na=True, min_periods=3).var(bias=True)), records(df[["x", "y"]].ewm(alpha=0.3).std(bias=True))]
    e["rolling_assigned"] = records(pd.DataFrame({"r": y.rolling(3).mean(), "e": x.ewm(alpha=0.2).mean()}))
    e["len_df"] = len(df)
    e["shape_df"] = list(df.shape)
    e["len_series"] = len(df["x"])
    e["shift_frame"] = records(num.shift(3))
    e["shift_neg"] = records(num.shift(-7))
    e["shift_all"] = records(df.shift(2))
    e["shift_series"] = [clean(v) for v in df["y"].shift()]
    e["diff_series"] = [clean(v) for v in df["y"].diff()]
    e["diff_neg"] = [clean(v) for v in df["x"].diff(-2)]
    e["diff_frame"] = records(num.diff(5))
    e["shift_far"] = [clean(v) for v in df["x"].shift(-1000000)]
    parts3 = [df[df["x"] > 0.5], df[df["x"] <= 0.5][["id", "x"]], df.assign(z=df["y"] * 2)]
    e["concat"] = records(pd.concat(parts3, ignore_index=True))
    e["concat_npartitions_ok"] = True
    e["concat_len"] = 2 * len(df)
    g = df.groupby("key").agg({"x": "nunique", "y": ["nunique", "sum"]})
    g.columns = ["x", "y_nunique", "y_sum"]
    e["groupby_nunique"] = records(g.reset_index())
    e["groupby_nunique_all"] = records(df.groupby("flag").nunique().reset_index())
    big = df[df["y"] > 500]
    e["map_rows"] = records(pd.DataFrame({"id": big["id"], "y2": big["y"] * 2}))
    e["map_same"] = records(df)
    e["map_meta_total"] = len(df)
    e["unordered_apply"] = [{"key": k, "n": len(g), "first_id": int(g["id"].iloc[0])} for k, g in df.groupby("key")]
    e["local_reductions"] = [clean(v) for v in [df["x"].sum(), df["x"].mean(), df["y"].min(), df["y"].max(), df["x"].count(), df["x"].std(), df["y"].var(), df["key"].nunique(), df["key"].dropna().min()]]
    e["local_arith"] = [clean(v) for v in df["x"] * 2.0 + df["id"]]
    e["local_compare"] = [bool(v) for v in df["y"] > 3]
    e["local_unary"] = [
        [clean(v) for v in -(df["id"] % 7)],
        [bool(v) for v in df["y"].isna()],
        [clean(v) for v in (df["x"] - 0.5).abs()],
        [clean(v) for v in df["key"].str.upper()],
        [clean(v) for v in df["key"] + "_s"],
    ]
    e["local_methods"] = [
        [bool(v) for v in df["key"].isin(["k01", "k02"])],
        [bool(v) for v in df["y"].between(100, 200)],
        [clean(v) for v in df["x"].fillna(-1.0)],
        [clean(v) for v in df["id"].astype("float64")],
        [bool(v) for v in df["key"].fillna("none").str.contains("0[1-3]$")],
    ]
    e["local_mask"] = records(df[df["y"] > 150])
    e["unordered_apply_mask"] = [{"key": k, "0": int((g["x"] > 0.5).sum())} for k, g in df.groupby("key")]
    e["unordered_apply_arith"] = [{"key": k, "0": clean((g["x"] * 2.0 + 1).sum())} for k, g in df.groupby("key")]
    e["unordered_apply_sum"] = [{"key": k, "0": clean(g["x"].sum())} for k, g in df.groupby("key")]
    e["unordered_apply_scalar"] = [{"key": k, "0": 2 * len(g)} for k, g in df.groupby("key")]
    e["unordered_apply_meta"] = [{"key": k, "total": int(g["y"].sum())} for k, g in df.groupby("key")]
    e["unordered_apply_rows"] = records(df[df["flag"] & df["key"].notna()][["key", "id"]])
    e["quantiles"] = [clean(v) for v in df["y"].quantile([0.0, 0.1, 0.25, 0.5, 0.9, 1.0])]
    e["median_x"] = clean(df["x"].quantile(0.5))
    desc = df[["id", "x", "y"]].describe()
    desc.insert(0, "statistic", desc.index)
    e["describe"] = records(desc)
    dts = pd.read_csv(os.path.join(d, "dates.csv"), parse_dates=["t"])
    e["dt"] = records(pd.DataFrame({"yr": dts["t"].dt.year, "mo": dts["t"].dt.month, "dy": dts["t"].dt.day}))
    e["dt_astype"] = [clean(v) for v in dts["t"].dt.year]
    ks = df["key"].dropna()
    e["str_more"] = records(pd.DataFrame({
        "sw": ks.str.startswith("k0"), "ew": ks.str.endswith("1"),
        "rp": ks.str.replace("k", "key-"), "rx": ks.str.replace(r"k(\d)(\d)", r"\2\1", regex=True),
        "sl": ks.str.slice(1, None), "sl2": ks.str.slice(None, None, -1),
        "pd": ks.str.pad(6, side="both", fillchar="*"), "pl": ks.str.pad(5), "gt": ks.str.get(-1),
        "ex": ks.str.extract(r"k(\d)", expand=False), "st": (ks + "  ").str.strip(), "ls": ("  " + ks).str.lstrip(),
    }))
    raw = pd.read_csv(os.path.join(d, "dates.csv"))
    tt = pd.to_datetime(raw["t"], format="%Y-%m-%d %H:%M:%S")
    e["dt_more"] = records(pd.DataFrame({
        "h": tt.dt.hour, "mi": tt.dt.minute, "s": tt.dt.second, "dw": tt.dt.dayofweek,
        "fm": tt.dt.floor("15min").dt.minute, "fh": tt.dt.floor("1h").dt.minute,
        "dh": tt.dt.normalize().dt.hour, "dd": tt.dt.normalize().dt.day, "iso": pd.to_datetime(raw["t"]).dt.hour,
    }))
    coerced = pd.to_datetime(pd.Series(["2024-02-30", "2024-02-28", None]), format="%Y-%m-%d", errors="coerce")
    e["dt_coerce"] = [clean(v) for v in coerced.dt.day]
    e["str_local"] = list(ks.str.pad(4, side="right", fillchar="_"))
    e["where_ops"] = records(pd.DataFrame({
        "w": x.where(x > 0, 0), "w2": x.where(y > 500), "m": y.mask(y < 0, -1), "c": y.clip(0, 600),
        "c2": x.clip(upper=0.5), "cf": y.clip(0.5, 100.5), "r": df["key"].replace({"k01": "one", "k02": "two"}),
        "r2": y.replace({5: 500, 500: 5}), "r3": df["flag"].replace(True, False),
        "cs": y.clip(600, 0), "rn": x.replace(math.nan, 0.5), "rk": df["key"].replace({None: "none"}),
    }))
    e["where_local"] = [clean(v) for v in x.where(x > 0, 0)]
    e["calls"] = records(pd.DataFrame({
        "m": x.map(lambda v: v * 2.0, na_action="ignore"), "n": df["key"].map({"k01": 1, "k02": 2}),
        "a": df["id"].apply(lambda v: v % 3),
        "row": df.apply(lambda r: -1 if pd.isna(r["y"]) else r["id"] + r["y"], axis=1),
        "pairs": df["id"].map({1: "one", 3: "three"}),
        "s": df["key"].map(lambda k: "none" if k is None else k + "!"),
    }))
    e["call_filter"] = records(df[x.map(lambda v: v > 0.5, na_action="ignore").fillna(False).astype(bool)])
    e["call_local"] = [int(v) * 3 for v in df["id"]]
    e["query"] = records(df.query("y > 500 and key in ['k01', 'k02', 'k03'] or x < -0.9"))
    lo = 300
    e["query_more"] = records(df.query("not (y > @lo) and 0 < id % 4 <= 2 and key != 'k05' and `flag`"))
    ks = ["k00", "k11"]
    e["query_arith"] = records(df.query("x * 2 + 1 >= y / 500 - 1 and key not in @ks"))
    e["query_closure"] = records(df[df["flag"] & (df["id"] % 5 == 0)])
    e["query_local"] = records(df.query("y < 0 or id == 3"))
    num = df[["id", "x", "y", "flag"]]
    row = lambda s: records(s.to_frame().T.infer_objects())
    e["frame_reductions"] = [row(num.sum()), row(num.mean()), row(num.min()), row(num.max()), row(df.count()), row(num.std()), row(num.var())]
    e["frame_numeric_only"] = [row(df.sum(numeric_only=True)), ["id", "x", "y", "flag"]]
    e["frame_min_strings"] = row(df[["key", "id"]].dropna(subset=["key"]).min().combine_first(pd.Series({"id": df["id"].min()})))
    e["frame_median"] = row(df.median(numeric_only=True))
    e["frame_quantile"] = row(df[["x", "y"]].quantile(0.3))
    e["corr"] = records(df.corr(numeric_only=True).reset_index())
    e["cov"] = records(num.cov().reset_index())
    e["cov_ddof0"] = records(df[["id", "flag"]].cov(ddof=0).reset_index())
    e["series_corr"] = [clean(x.corr(y)), clean(x.cov(y)), clean(y.cov(df["id"], ddof=0)), clean((x * 2).corr(x))]
    e["cumulative"] = records(df[["id", "x", "y"]].cumsum())
    e["cum_series"] = [[clean(v) for v in x.cumsum()], [clean(v) for v in x.cummax()], [clean(v) for v in y.cummin()], [clean(v) for v in (df["id"] % 5 + 1).cumprod()]]
    e["cum_prod_float"] = [clean(v) for v in (x + 1.0).cumprod()]
    e["aligned"] = records(pd.DataFrame({"d": y - y.shift(1), "c": x.cumsum(), "e": df["id"].cummax() * 2}))
    e["aligned_mask"] = records(df[y.shift(-2) > 500])
    by_id2 = df.set_index("id")
    e["idx"] = [row(df[["id", "x", "y", "flag"]].idxmax()), row(df[["id", "x", "y"]].idxmin()), clean(x.idxmax()), clean(y.idxmin()), clean(by_id2["x"].idxmax()), row(by_id2.idxmin(numeric_only=True))]
    e["from_delayed"] = records(df)
    e["to_delayed_n"] = True
    e["from_dask_array"] = [records(pd.DataFrame(np.arange(12).reshape(6, 2), columns=["a", "b"])), row(pd.DataFrame(np.arange(10) * 0.5, columns=["0"]).sum()), 2]
    words = pd.Series(["a b  c", " x ", None, "p,q", "", "one two three four", "  1   2   3   "], dtype=object)
    e["split"] = [col(words.str.split().str.get(0)), col(words.str.split().str.get(-1)), col(words.str.split().str.len()), col(words.str.split(",").str.len()), col(words.str.split(" ", n=1).str.get(1)), col(words.str.split(None, n=1).str.get(-1)), col(words.str.split(" ", n=1).str.len())]
    e["review"] = [clean(y.corr(y.shift(1))), clean(x.cov(x.cumsum())), col(y.rolling(3, min_periods=0).sum()), col(df["key"].map({"k01": 1.5, "k02": 2}))]
    e["split_expand"] = records(words.str.split(" ", n=2, expand=True).rename(columns=str))
    e["split_expand_local"] = records(words.str.split(None, n=1, expand=True).rename(columns=str))
    tv = pd.DataFrame({
        "t": pd.to_datetime(["2024-03-01 00:10:00", "2024-03-01 05:20:00", None, "2024-03-01 23:59:59", "2024-03-03 12:00:00", "2024-03-03 12:30:00", "2024-02-28 08:00:00", "2024-03-04 00:00:00"]),
        "v": [1, 2, 3, 4, 5, None, 7, 8], "x": [0.5, None, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5]})
    ms = lambda f: [dict(r, t=pd.Timestamp(r["t"]).strftime("%Y-%m-%d %H:%M:%S")) for r in records(f.reset_index())]
    e["resample"] = [ms(tv.resample("D", on="t").sum()), ms(tv.resample("6h", on="t").mean()), ms(tv.set_index("t").resample("12h").count()), ms(tv.resample("D", on="t").agg({"v": "max", "x": "min"})), ms(tv.resample("7h", on="t").sum()), ms(tv.set_index("t").resample("36h").mean())]
    tw = pd.DataFrame({
        "t": pd.to_datetime(["2024-03-01 00:00:00", "2024-03-01 00:20:00", "2024-03-01 00:50:00", "2024-03-01 01:10:00", "2024-03-01 03:00:00", "2024-03-01 03:00:00", "2024-03-01 03:40:00", "2024-03-02 00:00:00"]),
        "v": [1, 2, None, 4, 5, 6, 7, 8], "x": [0.5, None, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5]})
    mt = lambda f: [dict(r, t=pd.Timestamp(r["t"]).strftime("%Y-%m-%d %H:%M:%S")) for r in records(f)]
    ti = tw.set_index("t")
    e["resample_tw"] = [ms(tw.resample("25min", on="t").count()), ms(ti.resample("5h").sum())]
    e["rolling_time"] = [ms(ti.rolling("1h").sum()), mt(tw.rolling("90min", on="t", min_periods=2).mean()), col(ti["x"].rolling("2h").max()), ms(ti.rolling("1h").count()), col(ti["v"].rolling("1h").std()), ms(ti.rolling("30min").median())]
    e["dummies"] = records(pd.get_dummies(df[["id", "key", "flag"]]))
    e["dummies_cols"] = records(pd.get_dummies(df[["id", "flag", "key"]], columns=["flag"], prefix="f"))
    cat = df.astype({"key": "category"})
    e["cat_dtypes"] = {"id": "int64", "key": "category", "x": "float64", "y": "int64", "flag": "bool"}
    e["categories"] = [list(cat["key"].cat.categories), list(cat["key"].cat.categories), True, False, False]
    e["cat_codes"] = col(cat["key"].cat.codes)
    e["cat_filter_codes"] = col(cat[cat.y > 500]["key"].cat.codes)
    e["unordered_cat_groupby"] = records(cat.groupby("key", observed=True)[["x"]].sum().reset_index())
    e["cat_dummies"] = records(pd.get_dummies(cat[["id", "key"]]))
    e["cat_strings"] = [col(df["key"].str.upper()), int((cat["key"] == "k03").sum())]
    odd = pd.Series(["a b", "a", "a!", "B", "a"]).astype("category")
    e["cat_order"] = [list(odd.cat.categories), col(odd.cat.codes)]
    e["cat_kept"] = [True] * 10
    e["cat_mixed"] = [{"key": "string"}, "string"]
    pc = cat_frame()
    e["pq_category"] = [{"k": "category", "x": "int64"}, records(pc.astype({"k": object})), sorted(pc["k"].cat.categories), col(pc["k"].astype(object).astype("category").cat.codes)]
    e["cat_fill_codes"] = col(cat["key"].fillna("k01").cat.codes)
    e["explode"] = [col(words.str.split().explode()), col(words.str.split(",").explode()), col(words.str.split(" ", n=1).explode())]
    wf = pd.DataFrame({"i": range(7), "s": words})
    e["explode_frame"] = records(wf.assign(s=wf.s.str.split(",")).explode("s"))
    e["explode_local"] = col(words.str.split().explode())
    pivot = lambda **kw: records(pd.pivot_table(df, **kw).rename(columns=str).reset_index())
    e["pivot"] = pivot(index="key", columns="flag", values="y", aggfunc="sum")
    e["pivot_mean"] = pivot(index="flag", columns="key", values="x")
    e["pivot_count"] = pivot(index="key", columns="flag", values="x", aggfunc="count")
    e["json_round_trip"] = records(df)
    ms = pd.read_csv(os.path.join(d, "dates.csv"), parse_dates=["t"])
    ms["t"] = [None if pd.isna(t) else int(t.value // 1_000_000) for t in ms["t"]]
    e["json_dates"] = records(ms)
    e["csv_gz"] = records(df)
    e["csv_zst"] = records(df)
    e["compressed_one_partition"] = True
    e["json_gz"] = records(df)
    e["text_gz_lines"] = len(df) + 1
    e["unordered_melt"] = records(pd.melt(df, id_vars=["id"], value_vars=["x", "y"]))
    e["unordered_melt_named"] = records(pd.melt(df[["id", "key", "flag"]], id_vars=["id", "flag"], var_name="col", value_name="v"))
    e["melt_columns"] = ["id", "variable", "value"]
    by_id = df.set_index("id").sort_index()
    e["loc_range"] = records(by_id.loc[100:140].reset_index())
    e["loc_one"] = records(by_id.loc[[77]].reset_index())
    e["loc_open"] = records(by_id.loc[:12].reset_index())
    e["loc_keeps_divisions"] = True
    e["get_partitions"] = records(df)
    e["get_partition_last"] = True
    e["iloc"] = records(df.iloc[:, [0, -1, 2]])
    e["unordered_reset_drop"] = records(df.drop(columns=["y"]).dropna(subset=[]))
    e["reset_forgets"] = True
    e["json_npartitions_ok"] = True
    e["json"] = records(df)
    e["json_dtypes"] = {"id": "int64", "key": "string", "x": "float64", "y": "float64", "flag": "bool"}
    e["json_y_sum"] = clean(df["y"].sum())
    e["pq_filter_ne"] = int((df["key"].notna() & (df["key"] != "k01")).sum())
    return e


def sort_key(r):
    """A row's order for comparing results whose row order is free."""
    def norm(v):
        if v is None:
            return (0, "")
        if isinstance(v, bool):
            return (1, str(v))
        if isinstance(v, (int, float)):
            return (2, "%.9g" % v)
        return (3, str(v))
    return [(k, norm(v)) for k, v in sorted(r.items())]


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is None and b is None
        if isinstance(a, bool) or isinstance(b, bool):
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
        elif k.startswith("unordered_") and not same(sorted(got[k], key=sort_key), sorted(v, key=sort_key)):
            print(f"{k} (any order): brisk {len(got[k])} rows, pandas {len(v)} rows; first brisk rows "
                  f"{json.dumps(sorted(got[k], key=sort_key)[:3])}\n   pandas {json.dumps(sorted(v, key=sort_key)[:3])}")
            bad += 1
        elif not k.startswith("unordered_") and not same(got[k], v):
            print(f"{k}: brisk {json.dumps(got[k])[:600]}\n   pandas {json.dumps(v)[:600]}")
            bad += 1
    # What brisk's to_parquet wrote, as pandas reads it.
    written = pd.read_parquet(os.path.join(d, "pq"))
    written["key"] = written["key"].astype(object).where(written["key"].notna(), None)
    if not same(records(written), records(frame(d))):
        print("to_parquet: pandas reads back different rows")
        bad += 1
    # What brisk's to_json wrote, as pandas reads it (part by part, in order).
    parts = sorted(glob.glob(os.path.join(d, "js_out", "*.part")), key=lambda p: int(os.path.basename(p)[:-5]))
    back = pd.concat([pd.read_json(p, lines=True, dtype=False) for p in parts], ignore_index=True)
    if not same(records(back), records(frame(d))):
        print("to_json: pandas reads back different rows")
        bad += 1
    print(f"{len(want) - bad}/{len(want)} cases agree")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
