//! DataFrames against pandas: the same pipelines over the same CSV files
//! (nulls, a group that spans partition boundaries, partitions a filter
//! empties), in brisk on both local schedulers and in pandas
//! (`tests/reference/python_frames.py`), compared by the Python side.
//! Also: bad input of every kind gives a clear error.

mod common;

use brisk_script::Session;
use common::{Need, Reference, SCHEDULERS, error_of, python};

/// The Python with pandas.
const PANDAS: Need = Need {
    module: Some("pandas"),
    on_ci: "Python with pandas is needed for the dataframe tests on CI",
    skipped: "skipped: no python3 with pandas (set BRISK_PYTHON; scripts/python-env.sh makes one)",
};

const CASES: &str = r#"
let df = read_csv(`${D}/part*.csv`, #{blocksize: 3000});
df.to_parquet(`${D}/pq`, #{overwrite: true});   // once per scheduler
df.to_json(`${D}/js_out`, #{overwrite: true});
let x = df["x"];
let y = df["y"];
let r = #{
    all: df.compute().to_maps(),
    dtypes: df.dtypes,
    npartitions_ok: df.npartitions > 3,
    key_min: df["key"].min().compute(),
    key_nunique: df["key"].nunique().compute(),
    flag_sum: df["flag"].sum().compute(),
    filtered: df[x > 0.5].compute().to_maps(),
    filter_and: df[(x > 0) & (y < 500)][["id", "y"]].compute().to_maps(),
    value_counts: #{},
    groupby_agg: df.groupby("key").agg(#{x: "mean", y: ["sum", "max", "count"]}).compute().to_maps(),
    groupby_std: df.groupby("key")[["x"]].std().compute().to_maps(),
    groupby_size: df.groupby("key").size().compute().to_maps(),
    groupby_two: df.groupby(["key", "flag"]).agg(#{x: "sum"}).compute().to_maps(),
    assign: df.assign(#{z: x * 2 + y, w: y % 7, v: y / 4})[["id", "z", "w", "v"]].compute().to_maps(),
    arith: df.assign(#{p: x ** 2, q: y ** 2, f: y.floordiv(7), g: x.floordiv(0.3), h: 2.0 ** x, k: floordiv(1000, y + 51), m: x.pow(3)})[["id", "p", "q", "f", "g", "h", "k", "m"]].compute().to_maps(),
    dropna: df.dropna().compute().to_maps(),
    dropna_subset: df.dropna(#{subset: ["x"]}).compute().num_rows(),
    fillna: df.fillna(#{x: 0.0, key: "none"})[["id", "key", "x"]].compute().to_maps(),
    renamed: df.rename(#{x: "xx"}).drop(["flag"]).columns,
    astype_sum: df.astype(#{id: "float64"})["id"].sum().compute(),
    isin_count: df["key"].isin(["k01", "k02"]).sum().compute(),
    between_count: y.between(100, 200).sum().compute(),
    abs_round: x.abs().round(2).head(20).to_array(),
    head7: df.head(7).to_maps(),
    empty: df[x > 100.0].compute().to_maps(),
    unique_keys: df["key"].unique().compute().to_array(),
    parquet_round_trip: read_parquet(`${D}/pq`).compute().to_maps(),
    parquet_x_sum: read_parquet(`${D}/pandas.parquet`)["x"].sum().compute(),
    parquet_columns: read_parquet(`${D}/pandas.parquet`, #{columns: ["id", "x"]}).columns,
    parquet_partitions: read_parquet(`${D}/pandas.parquet`).npartitions,
    from_bag: from_sequence([#{a: 1, b: "x"}, #{a: 2, b: ()}, #{b: "z"}], #{npartitions: 2}).to_dataframe().compute().to_maps(),
    ordered: from_columns([["z", [1, 2]], ["a", [3.5, ()]]], #{npartitions: 2}).assign([["y", 1], ["b", 2]]).compute().to_maps(),
    ordered_columns: from_columns([["z", [1, 2]], ["a", [3.5, ()]]]).assign([["y", 1], ["b", 2]]).columns,
    maps: from_maps([#{a: 1, b: "x"}, #{a: 2, b: ()}, #{b: "z"}], #{npartitions: 2}).compute().to_maps(),
};
for red in ["sum", "mean", "min", "max", "count", "std", "variance", "nunique"] {
    r[`x_${red}`] = Fn(red).call(x).compute();
    r[`y_${red}`] = Fn(red).call(y).compute();
}
for row in df[x > 0.5]["key"].value_counts().compute().to_maps() {
    r.value_counts[row.key] = row.count;
}
let k = df.dropna(#{subset: ["key"]});
r.str_ops = k.assign(#{u: k["key"].str_upper(), n: k["key"].str_len(), c: k["key"].str_contains("0[1-3]$")})[["u", "n", "c"]].compute().to_maps();
r.unique_keys.sort();

// Rows moved between partitions: shuffles, joins, sorting.
let right = from_columns(#{key: ["k00", "k01", "k02", "k03", "zz"], weight: [1.5, 2.5, (), 4.0, 9.0], x: [1, 2, 3, 4, 5]}, #{npartitions: 2});
let right5 = right.repartition(#{npartitions: 5});
r.repartition5 = right5.npartitions;
r.repartition_down = df.repartition(#{npartitions: 2}).compute().to_maps();
let up = df.repartition(#{npartitions: 13});
r.repartition_up = up.compute().to_maps();
r.repartition_up_n = up.npartitions;
r.sorted = df.sort_values("y").compute().to_maps();
r.sorted_two = df.sort_values(["key", "id"], #{ascending: [false, true]}).compute().to_maps();
r.sorted_x_desc = df.sort_values("x", #{ascending: false}).compute().to_maps();
let si = df.set_index("y");
r.set_index = si.compute().to_maps();
let dv = si.divisions;
r.divisions_len_ok = dv.len() == si.npartitions + 1;
r.divisions_ends = [dv[0], dv[dv.len() - 1]];
let dv_sorted = true;
for i in 1..dv.len() { if dv[i] < dv[i - 1] { dv_sorted = false; } }
r.divisions_sorted = dv_sorted;
// Row-wise stages that leave the index column alone keep the divisions.
let pos = si[si["x"] > 0.0];
let kept = pos.assign(#{z: pos["x"] * 2.0}).fillna(#{key: "none"})[["y", "z", "key"]];
r.divisions_kept = to_json(kept.divisions) == to_json(dv);
r.divisions_dropped = si.assign(#{y: si["y"] + 1}).divisions[0] == () && si[["x", "key"]].divisions[0] == ();
r.unordered_shuffle = df.shuffle("key").compute().to_maps();
r.shuffle_npartitions = df.shuffle(["key", "flag"], #{npartitions: 3}).npartitions;
r.unordered_groupby_split = df.groupby("key", #{split_out: 3}).agg(#{x: "mean", y: "sum"}).compute().to_maps();
r.unordered_groupby_split_agg = df.groupby("key").agg(#{y: ["min", "count"]}, #{split_out: 4}).compute().to_maps();
r.unordered_merge_inner = df.merge(right, #{on: "key"}).compute().to_maps();
r.unordered_merge_left = merge(df, right5, #{on: "key", how: "left"}).compute().to_maps();
r.unordered_merge_right = merge(df, right, #{on: "key", how: "right"}).compute().to_maps();
r.unordered_merge_outer = merge(df, right, #{on: "key", how: "outer"}).compute().to_maps();
r.unordered_merge_self = merge(df[["id", "x"]], df[["id", "y"]], #{on: "id"}).compute().to_maps();
r.unordered_merge_left_on = merge(df, right.rename(#{key: "k2"}), #{left_on: "key", right_on: "k2"}).compute().to_maps();
r.unordered_merge_int_float = merge(df[["id", "x"]], from_columns(#{id: [1.0, 2.0, 5.0, 7.5], z: [1, 2, 3, 4]}), #{on: "id"}).compute().to_maps();
r.unordered_join = df[["key", "id"]].join(right5, #{on: "key"}).compute().to_maps();
r.drop_duplicates = df[["key", "flag"]].drop_duplicates().compute().to_maps();
r.drop_duplicates_subset = df.drop_duplicates(#{subset: ["key"]}).compute().to_maps();
r.drop_duplicates_last = df.drop_duplicates(#{subset: ["key"], keep: "last"}).compute().to_maps();
r.drop_duplicates_none = df[["key", "flag"]].drop_duplicates(#{keep: false}).compute().to_maps();
r.drop_duplicates_none_subset = df.drop_duplicates(#{subset: ["y"], keep: false}).compute().to_maps();
r.nlargest = y.nlargest(6).compute().to_array();
r.nsmallest = x.nsmallest(4).compute().to_array();
r.frame_nlargest = df.nlargest(5, "y").compute().to_maps();
r.tail7 = df.tail(7).to_maps();
r.tail_x = x.tail(3).to_array();

// Filters pushed into the Parquet reader: row groups skipped by their statistics.
let P = `${D}/pandas.parquet`;
let pf = read_parquet(P, #{filters: [["id", ">", 600]]});
r.pq_filter = pf.compute().to_maps();
r.pq_filter_npartitions = pf.npartitions;
let pq = read_parquet(P);
let auto = pq[pq["id"] <= 200];
r.pq_auto_npartitions = auto.npartitions;
r.pq_auto = auto.compute().to_maps();
r.pq_filter_or = read_parquet(P, #{filters: [[["id", "<", 100]], [["key", "==", "k01"], ["y", ">=", 500]]]}).compute().to_maps();
r.pq_filter_in = read_parquet(P, #{filters: [["key", "in", ["k01", "k02"]], ["x", "<", 0.0]], columns: ["id", "key"]}).compute().to_maps();
r.pq_filter_ne = read_parquet(P, #{filters: [["key", "!=", "k01"]]}).compute().num_rows();

// Rolling windows across partition edges (partitions smaller than the window too).
let num = df[["id", "x", "y"]];
r.rolling_mean = num.rolling(3).mean().compute().to_maps();
r.rolling_sum = df["y"].rolling(20).sum().compute().to_array();
r.rolling_min = num.repartition(#{npartitions: 60}).rolling(25).min().compute().to_maps();
r.rolling_max = x.rolling(4).max().compute().to_array();
r.rolling_more = [x.rolling(5).std().compute().to_array(), y.rolling(4, #{min_periods: 2}).mean().compute().to_array(), x.rolling(3).count().compute().to_array(), y.rolling(7, #{min_periods: 1}).median().compute().to_array(), y.rolling(3).variance().compute().to_array(), x.rolling(6, #{min_periods: 0}).count().compute().to_array()];
r.rolling_apply = y.rolling(3, #{min_periods: 2}).apply(|w| w.filter(|v| v != ()).reduce(|a, v| if a == () || v > a { v } else { a })).compute().to_array();
r.ewm = [x.ewm(#{span: 4}).mean().compute().to_array(), y.ewm(#{com: 2.5, adjust: false}).mean().compute().to_array(), x.ewm(#{halflife: 3, ignore_na: true, min_periods: 3}).mean().compute().to_array(), df[["x", "y"]].ewm(#{alpha: 0.3}).mean().compute().to_maps()];
r.ewm_var = [x.ewm(#{span: 4}).variance().compute().to_array(), y.ewm(#{com: 2.5, adjust: false}).std().compute().to_array(), x.ewm(#{halflife: 3, ignore_na: true, min_periods: 3}).variance(#{bias: true}).compute().to_array(), df[["x", "y"]].ewm(#{alpha: 0.3}).std(#{bias: true}).compute().to_maps()];
r.rolling_assigned = df.assign(#{r: y.rolling(3).mean(), e: x.ewm(#{alpha: 0.2}).mean()})[["r", "e"]].compute().to_maps();

// Shifts and differences across partition edges, and the row count.
r.len_df = len(df);
r.shape_df = df.shape;
r.len_series = len(x);
r.shift_frame = num.shift(3).compute().to_maps();
r.shift_neg = num.repartition(#{npartitions: 60}).shift(-7).compute().to_maps();
r.shift_all = df.shift(2).compute().to_maps();
r.shift_series = y.shift().compute().to_array();
r.diff_series = y.diff().compute().to_array();
r.diff_neg = x.diff(-2).compute().to_array();
r.diff_frame = num.repartition(#{npartitions: 60}).diff(5).compute().to_maps();
r.shift_far = x.shift(-1000000).compute().to_array();
let parts3 = [df[x > 0.5], df[x <= 0.5][["id", "x"]], df.assign(#{z: y * 2})];
r.concat = concat(parts3).compute().to_maps();
r.concat_npartitions_ok = concat(parts3).npartitions == 3 * df.npartitions;
r.concat_len = len(concat([df, df]));

r.groupby_nunique = df.groupby("key").agg(#{x: "nunique", y: ["nunique", "sum"]}).compute().to_maps();
r.groupby_nunique_all = df.groupby("flag").nunique().compute().to_maps();

// Closures on partitions and on groups.
r.map_rows = df.map_partitions(|p| p.to_maps().filter(|r| r.y != () && r.y > 500).map(|r| #{id: r.id, y2: r.y * 2})).compute().to_maps();
r.map_same = df.map_partitions(|p| p).compute().to_maps();
r.map_meta_total = df.map_partitions(|p| #{n: p.num_rows()}, #{meta: #{n: "int64"}})["n"].sum().compute();
r.unordered_apply = df.groupby("key").apply(|g| #{n: g.num_rows(), first_id: g.to_maps()[0].id}).compute().to_maps();
let c = df.compute();
r.local_reductions = [c["x"].sum(), c["x"].mean(), c["y"].min(), c["y"].max(), c["x"].count(), c["x"].std(), c["y"].variance(), c["key"].nunique(), c["key"].min()];
r.local_arith = c["x"] * 2.0 + c["id"];
r.local_compare = c["y"] > 3;
r.local_unary = [(-(c["id"] % 7)).to_array(), c["y"].isna().to_array(), (c["x"] - 0.5).abs().to_array(), c["key"].str_upper().to_array(), (c["key"] + "_s").to_array()];
r.local_methods = [c["key"].isin(["k01", "k02"]).to_array(), c["y"].between(100, 200).to_array(), c["x"].fillna(-1.0).to_array(), c["id"].astype("float64").to_array(), c["key"].fillna("none").str_contains("0[1-3]$").to_array()];
r.local_mask = c[c["y"] > 150].to_maps();
r.unordered_apply_mask = df.groupby("key").apply(|g| g[g["x"] > 0.5].num_rows()).compute().to_maps();
r.unordered_apply_arith = df.groupby("key").apply(|g| (g["x"] * 2.0 + 1).sum()).compute().to_maps();
r.unordered_apply_sum = df.groupby("key").apply(|g| g["x"].sum()).compute().to_maps();
r.unordered_apply_scalar = df.groupby("key").apply(|g| g.num_rows() * 2).compute().to_maps();
r.unordered_apply_meta = df.groupby("key").apply(|g| g.to_maps().reduce(|s, r| if r.y == () { s } else { s + r.y }, 0), #{meta: #{total: "int64"}}).compute().to_maps();
r.unordered_apply_rows = df.groupby("key").apply(|g| g.to_maps().filter(|r| r.flag).map(|r| #{key: r.key, id: r.id})).compute().to_maps();

// Quantiles and describe (exact here: no partition has more than 1,000 values).
r.quantiles = y.quantile([0.0, 0.1, 0.25, 0.5, 0.9, 1.0]).compute();
r.median_x = x.quantile(0.5).compute();
r.describe = df.describe().compute().to_maps();

// Dates: parsed by the reader, and by astype from text.
let dts = read_csv(`${D}/dates.csv`, #{dtypes: #{t: "datetime64[ns]"}, blocksize: 2000});
r.dt = dts.assign(#{yr: dts["t"].dt_year(), mo: dts["t"].dt_month(), dy: dts["t"].dt_day()})[["yr", "mo", "dy"]].compute().to_maps();
r.dt_astype = read_csv(`${D}/dates.csv`).astype(#{t: "datetime64[ns]"})["t"].dt_year().compute().to_array();
let ks = k["key"];
r.str_more = k.assign([
    ["sw", ks.str_startswith("k0")], ["ew", ks.str_endswith("1")],
    ["rp", ks.str_replace("k", "key-")], ["rx", ks.str_replace("k(\\d)(\\d)", "\\2\\1", #{regex: true})],
    ["sl", ks.str_slice(1, ())], ["sl2", ks.str_slice((), (), -1)],
    ["pd", ks.str_pad(6, #{side: "both", fillchar: "*"})], ["pl", ks.str_pad(5)], ["gt", ks.str_get(-1)],
    ["ex", ks.str_extract("k(\\d)")], ["st", (ks + "  ").str_strip()], ["ls", ("  " + ks).str_lstrip()],
])[["sw", "ew", "rp", "rx", "sl", "sl2", "pd", "pl", "gt", "ex", "st", "ls"]].compute().to_maps();
let raw = read_csv(`${D}/dates.csv`, #{blocksize: 2000});
dts.to_json(`${D}/js_out_dates`, #{overwrite: true});
let tt = to_datetime(raw["t"], #{format: "%Y-%m-%d %H:%M:%S"});
r.dt_more = raw.assign([
    ["h", tt.dt_hour()], ["mi", tt.dt_minute()], ["s", tt.dt_second()], ["dw", tt.dt_dayofweek()],
    ["fm", tt.dt_floor("15min").dt_minute()], ["fh", tt.dt_floor("1h").dt_minute()],
    ["dh", tt.dt_date().dt_hour()], ["dd", tt.dt_date().dt_day()], ["iso", to_datetime(raw["t"]).dt_hour()],
])[["h", "mi", "s", "dw", "fm", "fh", "dh", "dd", "iso"]].compute().to_maps();
r.dt_coerce = to_datetime(from_columns(#{s: ["2024-02-30", "2024-02-28", ()]})["s"], #{format: "%Y-%m-%d", errors: "coerce"}).dt_day().compute().to_array();
r.where_ops = df.assign([
    ["w", x.where(x > 0, 0)], ["w2", x.where(y > 500)], ["m", y.mask(y < 0, -1)], ["c", y.clip(0, 600)],
    ["c2", x.clip((), 0.5)], ["cf", y.clip(0.5, 100.5)], ["r", df["key"].replace(#{k01: "one", k02: "two"})],
    ["r2", y.replace([[5, 500], [500, 5]])], ["r3", df["flag"].replace(true, false)],
    ["cs", y.clip(600, 0)], ["rn", x.replace((), 0.5)], ["rk", df["key"].replace((), "none")],
])[["w", "w2", "m", "c", "c2", "cf", "r", "r2", "r3", "cs", "rn", "rk"]].compute().to_maps();
let lc = df.compute();
r.where_local = lc["x"].where(lc["x"] > 0, 0).to_array();
r.calls = df.assign([
    ["m", x.map(|v| v * 2.0, #{na_action: "ignore"})], ["n", df["key"].map(#{k01: 1, k02: 2})],
    ["a", df["id"].apply(|v| v % 3)], ["row", df.apply(|r| if r.y == () { -1 } else { r.id + r.y }, #{axis: 1})],
    ["pairs", df["id"].map([[1, "one"], [3, "three"]])], ["s", df["key"].map(|k| if k == () { "none" } else { k + "!" }, #{meta: "string"})],
])[["m", "n", "a", "row", "pairs", "s"]].compute().to_maps();
r.call_filter = df[x.map(|v| v > 0.5, #{na_action: "ignore"}).fillna(false)].compute().to_maps();
r.call_local = lc["id"].map(|v| v * 3).to_array();
r.query = df.query("y > 500 and key in ['k01', 'k02', 'k03'] or x < -0.9").compute().to_maps();
r.query_more = df.query("not (y > @lo) and 0 < id % 4 <= 2 and key != 'k05' and `flag`", #{local_dict: #{lo: 300}}).compute().to_maps();
r.query_arith = df.query("x * 2 + 1 >= y / 500 - 1 and key not in @ks", #{local_dict: #{ks: ["k00", "k11"]}}).compute().to_maps();
r.query_closure = df.query(|r| r.flag && r.id % 5 == 0).compute().to_maps();
r.query_local = lc.query("y < 0 or id == 3").to_maps();
let num = df[["id", "x", "y", "flag"]];
r.frame_reductions = [num.sum().compute().to_maps(), num.mean().compute().to_maps(), num.min().compute().to_maps(), num.max().compute().to_maps(), df.count().compute().to_maps(), num.std().compute().to_maps(), num.variance().compute().to_maps()];
r.frame_numeric_only = [df.sum(#{numeric_only: true}).compute().to_maps(), df.mean(#{numeric_only: true}).column_names()];
r.frame_min_strings = df[["key", "id"]].min().compute().to_maps();
r.frame_median = df.median(#{numeric_only: true}).compute().to_maps();
r.frame_quantile = df[["x", "y"]].quantile(0.3).compute().to_maps();
r.corr = df.corr(#{numeric_only: true}).compute().to_maps();
r.cov = num.cov().compute().to_maps();
r.cov_ddof0 = df[["id", "flag"]].cov(#{ddof: 0}).compute().to_maps();
r.series_corr = [x.corr(y).compute(), x.cov(y).compute(), y.cov(df["id"], #{ddof: 0}).compute(), (x * 2).corr(x).compute()];
r.cumulative = df[["id", "x", "y"]].cumsum().compute().to_maps();
r.cum_series = [x.cumsum().compute().to_array(), x.cummax().compute().to_array(), y.cummin().compute().to_array(), (df["id"] % 5 + 1).cumprod().compute().to_array()];
r.cum_prod_float = (x + 1.0).cumprod().compute().to_array();
r.aligned = df.assign(#{d: y - y.shift(1), c: x.cumsum(), e: df["id"].cummax() * 2})[["d", "c", "e"]].compute().to_maps();
r.aligned_mask = df[y.shift(-2) > 500].compute().to_maps();
r.idx = [df[["id", "x", "y", "flag"]].idxmax().compute().to_maps(), df[["id", "x", "y"]].idxmin().compute().to_maps(), x.idxmax().compute(), y.idxmin().compute(), df.set_index("id")["x"].idxmax().compute(), df.set_index("id").idxmin(#{numeric_only: true}).compute().to_maps()];
r.from_delayed = from_delayed(df.to_delayed(), #{meta: #{id: "int64", key: "string", x: "float64", y: "float64", flag: "bool"}}).compute().to_maps();
r.to_delayed_n = df.to_delayed().len() == df.npartitions;
r.from_dask_array = [from_dask_array(arange(12, #{chunks: 5}).reshape([6, 2]), #{columns: ["a", "b"]}).compute().to_maps(), from_dask_array(arange(10, #{chunks: 3}) * 0.5).sum().compute().to_maps(), from_dask_array(ones([4, 3], #{chunks: [2, 1]})).npartitions];
let words = from_columns(#{s: ["a b  c", " x ", (), "p,q", "", "one two three four", "  1   2   3   "]}, #{npartitions: 2})["s"];
r.split = [words.str_split().str_get(0).compute().to_array(), words.str_split().str_get(-1).compute().to_array(), words.str_split().str_len().compute().to_array(), words.str_split(",").str_len().compute().to_array(), words.str_split(" ", #{n: 1}).str_get(1).compute().to_array(), words.str_split((), #{n: 1}).str_get(-1).compute().to_array(), words.str_split(" ", #{n: 1}).str_len().compute().to_array()];
r.review = [y.corr(y.shift(1)).compute(), x.cov(x.cumsum()).compute(), y.rolling(3, #{min_periods: 0}).sum().compute().to_array(), df["key"].map(#{k01: 1.5, k02: 2}).compute().to_array()];
r.split_expand = words.str_split(" ", #{n: 2, expand: true}).compute().to_maps();
r.split_expand_local = words.compute().str_split((), #{n: 1, expand: true}).to_maps();
let stamps = ["2024-03-01 00:10:00", "2024-03-01 05:20:00", (), "2024-03-01 23:59:59", "2024-03-03 12:00:00", "2024-03-03 12:30:00", "2024-02-28 08:00:00", "2024-03-04 00:00:00"];
let tv = from_columns([["t", stamps], ["v", [1, 2, 3, 4, 5, (), 7, 8]], ["x", [0.5, (), 1.5, 2.5, 3.5, 4.5, 5.5, 6.5]]], #{npartitions: 3});
let tv = tv.assign(#{t: to_datetime(tv["t"])});
r.resample = [tv.resample("D", #{on: "t"}).sum().compute().to_maps(), tv.resample("6h", #{on: "t"}).mean().compute().to_maps(), tv.set_index("t").resample("12h").count().compute().to_maps(), tv.resample("D", #{on: "t"}).agg(#{v: "max", x: "min"}).compute().to_maps(), tv.resample("7h", #{on: "t"}).sum().compute().to_maps(), tv.set_index("t").resample("36h").mean().compute().to_maps()];
let tw = from_columns([["t", ["2024-03-01 00:00:00", "2024-03-01 00:20:00", "2024-03-01 00:50:00", "2024-03-01 01:10:00", "2024-03-01 03:00:00", "2024-03-01 03:00:00", "2024-03-01 03:40:00", "2024-03-02 00:00:00"]], ["v", [1, 2, (), 4, 5, 6, 7, 8]], ["x", [0.5, (), 1.5, 2.5, 3.5, 4.5, 5.5, 6.5]]], #{npartitions: 3});
let tw = tw.assign(#{t: to_datetime(tw["t"])});
let ti = tw.set_index("t");
r.resample_tw = [tw.resample("25min", #{on: "t"}).count().compute().to_maps(), ti.resample("5h").sum().compute().to_maps()];
r.rolling_time = [ti.rolling("1h").sum().compute().to_maps(), tw.rolling("90min", #{on: "t", min_periods: 2}).mean().compute().to_maps(), ti["x"].rolling("2h").max().compute().to_array(), ti.rolling("1h").count().compute().to_maps(), ti["v"].rolling("1h").std().compute().to_array(), ti.rolling("30min").median().compute().to_maps()];
r.dummies = get_dummies(df[["id", "key", "flag"]]).compute().to_maps();
r.dummies_cols = get_dummies(df[["id", "flag", "key"]], #{columns: ["flag"], prefix: "f"}).compute().to_maps();
let cat = df.categorize(#{columns: ["key"]});
r.cat_dtypes = cat.dtypes;
r.categories = [cat["key"].cat_categories(), df["key"].astype("category").cat_as_known().cat_categories(), cat["key"].cat_known(), df["key"].astype("category").cat_known(), cat["key"].cat_as_unknown().cat_known()];
r.cat_codes = cat["key"].cat_codes().compute().to_array();
r.cat_filter_codes = cat[cat["y"] > 500]["key"].cat_codes().compute().to_array();
r.unordered_cat_groupby = cat.groupby("key").agg(#{x: "sum"}).compute().to_maps();
r.cat_dummies = get_dummies(cat[["id", "key"]]).compute().to_maps();
r.cat_strings = [cat["key"].str_upper().compute().to_array(), (cat["key"] == "k03").sum().compute()];
let odd = from_columns(#{k: ["a b", "a", "a!", "B", "a"], i: [1, 2, 3, 4, 5]}, #{npartitions: 2});
r.cat_order = [odd.categorize()["k"].cat_categories(), odd.categorize()["k"].cat_codes().compute().to_array()];
r.cat_kept = [
    cat.repartition(#{npartitions: 7})["key"].cat_known(),
    cat.set_index("id")["key"].cat_known(),
    cat.sort_values("y")["key"].cat_known(),
    merge(cat, df[["id", "flag"]].rename(#{flag: "f2"}), #{on: "id"})["key"].cat_known(),
    concat([cat, cat])["key"].cat_known(),
    cat.fillna(#{key: "k01"})["key"].cat_known(),
    cat.assign(#{k2: cat["key"]})["k2"].cat_known(),
    cat["key"].rename("z").cat_codes().compute().to_array() == cat["key"].cat_codes().compute().to_array(),
    cat[cat["y"].shift(1) > 0]["key"].cat_known(),
    df.set_index("key").categorize().divisions.len() == df.set_index("key").npartitions + 1,
];
r.cat_mixed = [concat([cat[["key"]], df[["key"]]]).dtypes, merge(cat[["key", "id"]], df[["key", "y"]], #{on: "key"}).dtypes["key"]];
let pc = read_parquet(`${D}/category.parquet`);
r.pq_category = [pc.dtypes, pc.compute().to_maps(), pc["k"].cat_as_known().cat_categories(), pc.categorize()["k"].cat_codes().compute().to_array()];
r.cat_fill_codes = cat.fillna(#{key: "k01"})["key"].cat_codes().compute().to_array();
r.explode = [words.str_split().explode().compute().to_array(), words.str_split(",").explode().compute().to_array(), words.str_split(" ", #{n: 1}).explode().compute().to_array()];
let wf = from_columns([["i", [0, 1, 2, 3, 4, 5, 6]], ["s", words.compute().to_array()]], #{npartitions: 3});
r.explode_frame = wf.explode("s", #{sep: ","}).compute().to_maps();
r.explode_local = words.compute().str_split().explode().to_array();
r.pivot = df.pivot_table(#{index: "key", columns: "flag", values: "y", aggfunc: "sum"}).compute().to_maps();
r.pivot_mean = pivot_table(df, #{index: "flag", columns: "key", values: "x"}).compute().to_maps();
r.pivot_count = pivot_table(df, #{index: "key", columns: "flag", values: "x", aggfunc: "count"}).compute().to_maps();
r.json_round_trip = read_json(`${D}/js_out/*.part`).compute().to_maps();
r.json_dates = read_json(`${D}/js_out_dates/*.part`).compute().to_maps();
r.csv_gz = read_csv(`${D}/comp/all.csv.gz`).compute().to_maps();
r.csv_zst = read_csv(`${D}/comp/all.csv.zst`, #{blocksize: 1000}).compute().to_maps();
r.compressed_one_partition = read_csv(`${D}/comp/all.csv.gz`, #{blocksize: 1000}).npartitions == 1;
r.json_gz = read_json(`${D}/comp/all.jsonl.gz`, #{blocksize: 1000}).compute().to_maps();
r.text_gz_lines = read_text(`${D}/comp/all.csv.gz`, #{blocksize: 100}).count().compute();
r.unordered_melt = df.melt(#{id_vars: ["id"], value_vars: ["x", "y"]}).compute().to_maps();
r.unordered_melt_named = df[["id", "key", "flag"]].melt(#{id_vars: ["id", "flag"], var_name: "col", value_name: "v"}).compute().to_maps();
r.melt_columns = df.melt(#{id_vars: ["id"], value_vars: ["x", "y"]}).column_names();
let by_id = df.set_index("id");
r.loc_range = by_id.loc(100, 140).compute().to_maps();
r.loc_one = by_id.loc(77).compute().to_maps();
r.loc_open = by_id.loc((), 12).compute().to_maps();
r.loc_keeps_divisions = by_id.loc(100, 140).divisions.len() == by_id.npartitions + 1;
let each = [];
for i in 0..df.npartitions { each.push(df.get_partition(i)); }
r.get_partitions = concat(each).compute().to_maps();
r.get_partition_last = df.get_partition(-1).compute().to_maps() == df.get_partition(df.npartitions - 1).compute().to_maps();
r.iloc = df.iloc([0, -1, 2]).compute().to_maps();
r.unordered_reset_drop = df.set_index("y").reset_index(#{drop: true}).compute().to_maps();
r.reset_forgets = df.set_index("id").reset_index().divisions[0] == ();
r.str_local = k.compute()["key"].str_pad(4, #{side: "right", fillchar: "_"}).to_array();

// JSON lines written by pandas.
let js = read_json(`${D}/*.jsonl`, #{blocksize: 5000});
r.json_npartitions_ok = js.npartitions > 2;
r.json = js.compute().to_maps();
r.json_dtypes = js.dtypes;
r.json_y_sum = js["y"].sum().compute();
r
"#;

#[test]
fn frames_agree_with_pandas() {
    let Some(py) = python(&PANDAS) else { return };
    let reference = Reference::generate(py, "python_frames.py", "frames");
    // A zstd file of the same rows (Python's zstd module is 3.14's).
    let comp = reference.dir.join("comp");
    let plain = std::fs::read(comp.join("all.csv")).expect("all.csv");
    let packed = zstd::encode_all(plain.as_slice(), 3).expect("zstd");
    std::fs::write(comp.join("all.csv.zst"), packed).expect("write .zst");
    for scheduler in SCHEDULERS {
        reference.check(scheduler, "", CASES, "<frames>", "pandas");
    }
    let _ = std::fs::remove_dir_all(&reference.dir);
}

#[test]
fn bad_input_is_refused_clearly() {
    let dir = std::env::temp_dir().join(format!("brisk-frames-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let good = dir.join("good.csv");
    std::fs::write(&good, "a,b\n1,x\n2,y\n").expect("write");
    let bad = dir.join("bad.csv");
    let mut text = String::from("a,b\n");
    for i in 0..200 {
        text += &format!("{i},v{i}\n");
    }
    text += "oops,v\n";
    std::fs::write(&bad, text).expect("write");
    let other = dir.join("other.csv");
    std::fs::write(&other, "a,c\n1,2\n").expect("write");
    let empty = dir.join("empty.csv");
    std::fs::write(&empty, "").expect("write");
    // Named as gzip, but plain text.
    std::fs::write(dir.join("fake.csv.gz"), "a,b\n1,2\n3,4\n5,6\n").expect("write");
    let (g, b, o, e) = (good.display(), bad.display(), other.display(), empty.display());
    let pq = dir.join("good.parquet");
    let mut s = Session::new();
    let _ = s
        .eval_value(&format!("read_csv(\"{g}\").to_parquet(\"{}\")", dir.join("pq").display()), "<t>")
        .expect("write");
    std::fs::rename(dir.join("pq/part.0.parquet"), &pq).expect("rename");
    let pq = pq.display();
    let badjson = dir.join("bad.jsonl");
    std::fs::write(&badjson, "{\"a\": 1}\n{\"a\": 2}\n{\"a\": 3\n{\"a\": 4}\n").expect("write");
    let nested = dir.join("nested.jsonl");
    std::fs::write(&nested, "{\"a\": [1, 2]}\n").expect("write");
    let cases = [
        ("read_csv(\"/nonexistent/brisk/*.csv\")".to_string(), "read_csv: no files match".to_string()),
        (
            "read_csv(\"/nonexistent/brisk.csv\")".into(),
            "read_csv: no such file: /nonexistent/brisk.csv".into(),
        ),
        (
            format!("read_csv(\"{b}\", #{{blocksize: 500, dtypes: #{{a: \"int64\"}}}}).compute()"),
            format!("{b}, line 202"),
        ),
        (
            format!(
                "read_csv(\"{b}\", #{{blocksize: 500, dtypes: #{{a: \"int64\"}}}}).groupby(\"b\").agg(#{{a: \"sum\"}}).compute()"
            ),
            format!("{b}, line 202"),
        ),
        (format!("read_csv([\"{g}\", \"{o}\"])"), "all files must have the same columns".into()),
        (format!("read_csv(\"{e}\")"), "is empty".into()),
        (format!("read_csv(\"{g}\", #{{sep: \";;\"}})"), "sep must be one character".into()),
        (format!("read_csv(\"{g}\", #{{dtypes: #{{z: \"int64\"}}}})"), "dtypes names column \"z\"".into()),
        (format!("read_csv(\"{g}\", #{{dtypes: #{{a: \"complex\"}}}})"), "unknown dtype \"complex\"".into()),
        (format!("read_csv(\"{g}\", #{{colour: 1}})"), "read_csv has no option \"colour\"".into()),
        (format!("read_csv(\"{g}\")[\"z\"]"), "unknown column \"z\" (columns: a, b)".into()),
        (format!("read_csv(\"{g}\")[[\"a\", \"q\"]]"), "unknown column \"q\"".into()),
        (format!("let d = read_csv(\"{g}\"); d[\"b\"] + 1"), "cannot apply + to string and int64".into()),
        (format!("let d = read_csv(\"{g}\").compute(); d[\"b\"].str_contains(\"(\")"), "bad pattern".into()),
        (
            format!("read_csv(\"{g}\")[\"b\"].str_extract(\"b\")"),
            "str_extract: pattern \"b\" contains no capture groups".into(),
        ),
        (
            format!("read_csv(\"{g}\")[\"b\"].str_replace(\"(\", \"x\", #{{regex: true}})"),
            "str_replace: bad pattern".into(),
        ),
        (
            format!("read_csv(\"{g}\")[\"b\"].str_pad(3, #{{side: \"up\"}})"),
            "side must be \"left\", \"right\" or \"both\"".into(),
        ),
        (
            format!("read_csv(\"{g}\")[\"b\"].str_pad(3, #{{fillchar: \"ab\"}})"),
            "fillchar must be one character".into(),
        ),
        (
            format!("read_csv(\"{g}\")[\"b\"].str_slice(0, 3, 0)"),
            "str_slice: slice step cannot be zero".into(),
        ),
        (
            format!("read_csv(\"{g}\")[\"b\"].str_pad(2000000)"),
            "str_pad: width 2000000 is more than 1048576 characters".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d[\"a\"].where(d[\"b\"])"),
            "a condition must be a bool Series, not string".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d[\"a\"].where(d[\"a\"] > 1, \"x\")"),
            "a int64 column cannot take string values here".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d[\"a\"].replace([[1]])"),
            "replace: give [old, new] pairs".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d[\"a\"].replace(1, \"x\")"),
            "replace: a int64 column cannot take string values".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d[\"b\"].clip(0, 1)"),
            "clip needs a numeric column, not string".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d[\"a\"].clip(\"x\", ())"),
            "clip: a bound must be a number or (), not string".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d[\"a\"].where(d[d[\"a\"] > 1][\"a\"] > 0)"),
            "does not have this frame's rows".into(),
        ),
        (format!("read_csv(\"{g}\").loc(1)"), "loc needs an index: set_index(column) first".into()),
        (format!("read_csv(\"{}\")", dir.join("fake.csv.gz").display()), "invalid gzip header".into()),
        (
            format!("read_text(\"{}\").count().compute()", dir.join("fake.csv.gz").display()),
            "fake.csv.gz as gzip: invalid gzip header".into(),
        ),
        (
            format!("read_csv(\"{g}\").set_index(\"a\").loc(\"x\")"),
            "cannot apply == to int64 and string".into(),
        ),
        (
            format!("read_csv(\"{g}\").get_partition(3)"),
            "get_partition: partition 3 of a frame of 1 partitions".into(),
        ),
        (format!("read_csv(\"{g}\").iloc([0, 5])"), "iloc: column position 5 of a frame of 2 columns".into()),
        (format!("read_csv(\"{g}\").iloc([\"a\"])"), "iloc: column positions are integers".into()),
        (
            format!("read_csv(\"{g}\").reset_index(#{{dropped: true}})"),
            "reset_index has no option \"dropped\"".into(),
        ),
        (format!("read_csv(\"{g}\").melt(#{{id_vars: [\"zz\"]}})"), "zz".into()),
        (
            format!("read_csv(\"{g}\").melt()"),
            "value columns of types int64 and string cannot share one column".into(),
        ),
        (
            format!("read_csv(\"{g}\").melt(#{{id_vars: [\"a\"], var_name: \"a\"}})"),
            "melt: the columns would be named twice".into(),
        ),
        (format!("read_csv(\"{g}\").melt(#{{ids: [\"a\"]}})"), "melt has no option \"ids\"".into()),
        (format!("read_csv(\"{g}\").explode(\"b\")"), "explode: brisk frames hold no list columns; give #{sep: \",\"}".into()),
        (format!("read_csv(\"{g}\").explode(\"a\", #{{sep: \",\"}})"), "explode needs a string column, not int64".into()),
        (format!("read_csv(\"{g}\").explode(\"b\", #{{sep: \"\"}})"), "empty separator".into()),
        (format!("read_csv(\"{g}\").explode(\"b\", #{{sep: \",\", m: 1}})"), "explode has no option \"m\"".into()),
        (format!("read_csv(\"{g}\").explode(\"zz\", #{{sep: \",\"}})"), "zz".into()),
        (format!("read_csv(\"{g}\").categorize([\"a\"])"), "categorize: column \"a\" is int64".into()),
        (format!("read_csv(\"{g}\").categorize([\"zz\"])"), "categorize: no column \"zz\"".into()),
        (format!("read_csv(\"{g}\")[\"b\"].cat_codes()"), "cat_codes needs a category column, not string".into()),
        (
            format!("read_csv(\"{g}\")[\"b\"].astype(\"category\").cat_categories()"),
            "cat_categories: the categories of \"b\" are unknown".into(),
        ),
        (format!("read_csv(\"{g}\").astype(#{{a: \"category\"}})"), "int64 values cannot become a category".into()),
        (format!("read_csv(\"{g}\")[\"a\"].astype(\"category\")"), "int64 values cannot become a category".into()),
        (format!("read_csv(\"{g}\").categorize()[\"b\"].max()"), "max is not defined for a category column".into()),
        (format!("let c = read_csv(\"{g}\").categorize(); c[c[\"b\"] < \"y\"]"), "unordered categories can only compare equality".into()),
        (
            format!("read_csv(\"{g}\").categorize().fillna(#{{b: \"zz\"}})"),
            "fillna: zz is not among the categories of \"b\"".into(),
        ),
        (
            format!("read_csv(\"{g}\")[\"a\"].str_startswith(\"x\")"),
            "str_startswith needs a string column, not int64".into(),
        ),
        (format!("read_csv(\"{g}\")[\"a\"].dt_hour()"), "dt_hour needs a datetime column, not int64".into()),
        (format!("read_csv(\"{g}\").query(\"a > 1 and zz < 2\")"), "query: no column \"zz\"".into()),
        (
            format!("read_csv(\"{g}\").mean()"),
            "mean: column \"b\": mean is not defined for a string column (select columns first, or give #{numeric_only: true})".into(),
        ),
        (format!("read_csv(\"{g}\")[[\"b\"]].sum(#{{numeric_only: true}})"), "sum: the frame has no column to reduce".into()),
        (format!("read_csv(\"{g}\").cumsum()"), "cumsum: column \"b\" is string".into()),
        ("from_delayed([1, 2])".into(), "from_delayed: item 0 is i64, not a Delayed".into()),
        ("from_dask_array(ones([2, 2, 2]))".into(), "from_dask_array: a 3-d array has no frame".into()),
        (format!("read_csv(\"{g}\").resample(\"1h\", #{{on: \"a\"}}).sum()"), "resample: column \"a\" is int64, not datetime64[ns]".into()),
        (format!("read_csv(\"{g}\").resample(\"1h\")"), "resample needs a datetime index".into()),
        (format!("read_csv(\"{g}\").resample(\"7h\", #{{on: \"a\"}}).sum()"), "resample: column \"a\" is int64, not datetime64[ns]".into()),
        (format!("read_csv(\"{g}\").resample(\"M\", #{{on: \"a\"}})"), "\"M\" is not a fixed frequency".into()),
        (
            "let ks = []; for i in 0..10001 { ks.push(`k${i}`) } get_dummies(from_columns(#{k: ks}, #{npartitions: 4}))".into(),
            "column \"k\" has 10001 distinct values".into(),
        ),
        (format!("read_csv(\"{g}\")[\"b\"].str_split(\"\")"), "str_split: empty separator".into()),
        (format!("read_csv(\"{g}\")[\"b\"].str_split(\",\", #{{expand: true}})"), "expand needs n".into()),
        (format!("read_csv(\"{g}\")[\"a\"].str_split(\",\")"), "str_split needs a string column, not int64".into()),
        ("from_dask_array(ones([2, 2]), #{columns: [\"a\"]})".into(), "1 column names for 2 columns".into()),
        (format!("from_delayed(read_csv(\"{g}\").to_delayed(), #{{meta: #{{}}}})"), "meta names no column".into()),
        (
            format!("from_delayed(read_csv(\"{g}\").to_delayed(), #{{meta: #{{zz: \"int64\"}}}}).compute()"),
            "from_delayed: the closure gave a frame without column \"zz\"".into(),
        ),
        ("from_sequence([1, 2]).repartition(0)".into(), "npartitions must be from 1 to".into()),
        (format!("get_dummies(read_csv(\"{g}\"), #{{columns: [\"zz\"]}})"), "zz".into()),
        (format!("get_dummies(read_csv(\"{g}\"), #{{prefix: [\"p\", \"q\"]}})"), "2 prefixes for 1 columns".into()),
        (format!("read_csv(\"{g}\").pivot_table(#{{columns: \"b\", values: \"a\"}})"), "give #{index: column}".into()),
        (
            format!("read_csv(\"{g}\").pivot_table(#{{index: \"a\", columns: \"b\", values: \"a\", aggfunc: \"mode\"}})"),
            "unknown aggfunc \"mode\"".into(),
        ),
        (
            format!("read_csv(\"{g}\")[\"a\"].rolling(3, #{{min_periods: 5}})"),
            "min_periods is a whole number from 0 to the window, 3".into(),
        ),
        (format!("read_csv(\"{g}\")[\"a\"].ewm(#{{span: 0.5}})"), "ewm: span=0.5 must be at least 1".into()),
        (format!("read_csv(\"{g}\").rolling(\"1h\").sum()"), "needs a datetime index (set_index) or #{on: column}".into()),
        (format!("read_csv(\"{g}\").rolling(\"1h\", #{{on: \"a\"}}).sum()"), "column \"a\" is int64, not datetime64[ns]".into()),
        (format!("read_csv(\"{g}\")[\"a\"].rolling(\"1h\")"), "needs a datetime index (set_index) on the Series' frame".into()),
        (format!("read_csv(\"{g}\").rolling(\"soon\")"), "\"soon\" is not a window of time".into()),
        (
            "let f = from_columns(#{t: [\"2024-01-01 02:00\", \"2024-01-01 01:00\"], v: [1, 2]}); f.assign(#{t: to_datetime(f[\"t\"])}).rolling(\"1h\", #{on: \"t\"}).sum().compute()".into(),
            "is not sorted".into(),
        ),
        (
            format!("read_csv(\"{g}\")[\"a\"].ewm(#{{span: 3, alpha: 0.5}})"),
            "give exactly one of com, span, halflife and alpha".into(),
        ),
        (format!("read_csv(\"{g}\").ewm(#{{alpha: 0.5}}).mean()"), "ewm: column \"b\" is string".into()),
        (
            format!("read_csv(\"{g}\")[\"a\"].rolling(1).apply(|w| \"s\").compute()"),
            "rolling apply: the closure gave string for row 0 of the partition, not a number".into(),
        ),
        (format!("read_csv(\"{g}\").corr(#{{method: \"spearman\"}})"), "corr: method is \"pearson\"".into()),
        (format!("read_csv(\"{g}\").quantile(2, #{{numeric_only: true}})"), "q=2 is not between 0 and 1".into()),
        (format!("read_csv(\"{g}\").cov(#{{ddof: -1, numeric_only: true}})"), "ddof is a whole number".into()),
        (format!("let d = read_csv(\"{g}\"); d[\"a\"].corr(d[\"b\"])"), "corr needs numeric Series".into()),
        (format!("read_csv(\"{g}\").query(\"a + 1\")"), "gives int64 values, not true or false".into()),
        (format!("read_csv(\"{g}\").query(\"a > @k\")"), "@k is not given".into()),
        (format!("read_csv(\"{g}\").query(\"(a > 1\")"), "a ')' is missing".into()),
        (format!("read_csv(\"{g}\").apply(|r| 1)"), "only #{axis: 1} is supported".into()),
        (
            format!(
                "read_csv(\"{g}\")[\"a\"].map(|v| if v > 1 {{ \"s\" }} else {{ 1 }}, #{{meta: \"int64\"}}).compute()"
            ),
            "map: the closure gave string for row 1 of the partition, but its values are int64".into(),
        ),
        (
            format!("read_csv(\"{g}\")[\"a\"].map(|v| if v > 1 {{ \"s\" }} else {{ 1 }})"),
            "map: the closure's first results do not share one type".into(),
        ),
        (format!("read_csv(\"{g}\")[\"a\"].map(|v| v.nope())"), "Function not found: nope".into()),
        (
            format!("read_csv(\"{g}\")[\"a\"].map(|v| v.nope(), #{{meta: \"int64\"}}).compute()"),
            "map: Function not found: nope (i64) (row 0 of the partition)".into(),
        ),
        (format!("read_csv(\"{g}\")[\"a\"].map(|v| (), #{{}})"), "give #{meta: dtype}".into()),
        (
            format!("read_csv(\"{g}\")[\"a\"].map(|v| v, #{{na_action: 1}})"),
            "na_action is \"ignore\" or ()".into(),
        ),
        (format!("read_csv(\"{g}\")[\"a\"].map(|v| v, #{{meta: \"f8\"}})"), "unknown dtype \"f8\"".into()),
        (
            format!("read_csv(\"{g}\").query(|r| r.a).compute()"),
            "query: the closure gave int for row 0".into(),
        ),
        (
            format!("to_datetime(read_csv(\"{g}\")[\"b\"]).dt_floor(\"1M\")"),
            "is not a fixed frequency".into(),
        ),
        (
            format!("to_datetime(read_csv(\"{g}\")[\"b\"], #{{errors: \"ignore\"}})"),
            "errors must be \"raise\" or \"coerce\"".into(),
        ),
        (
            format!("to_datetime(read_csv(\"{g}\")[\"b\"], #{{format: \"%Y\"}}).compute()"),
            "to_datetime: \"".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\").compute(); d[d[\"a\"]]"),
            "a row mask must be a bool Series, not one of type int64".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d.compute()[d.head(1)[\"a\"] > 0]"),
            "the mask has 1 rows and the frame".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\").compute(); d[\"b\"] * 2"),
            "cannot apply * to string and int64".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d.head(1)[\"a\"] + d.head(2)[\"a\"]"),
            "the Series have 1 and 2 rows".into(),
        ),
        (format!("let d = read_csv(\"{g}\"); d[d[\"a\"]]"), "a row mask must be a bool Series".into()),
        (
            format!("let d = read_csv(\"{g}\"); d.compute()[\"b\"].sum()"),
            "sum is not defined for a string column".into(),
        ),
        (
            format!(
                "let d = read_csv(\"{g}\"); d.groupby(\"b\").apply(|g| 1, #{{meta: #{{p: \"int64\", q: \"int64\"}}}}).compute()"
            ),
            "the closure gave a single value (int), but the result has the columns p, q".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d.groupby(\"b\").apply(|g| [1, 2])"),
            "row 0 the closure gave is int, not a map".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d[\"b\"].sum()"),
            "sum is not defined for a string column".into(),
        ),
        (format!("let d = read_csv(\"{g}\"); d.groupby(\"z\")"), "unknown column \"z\"".into()),
        (
            format!("let d = read_csv(\"{g}\"); d.groupby(\"b\").agg(#{{a: \"median\"}})"),
            "unknown aggregation \"median\"".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d.groupby(\"b\").agg(#{{b: \"sum\"}})"),
            "is a key column".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); let f = d[d[\"a\"] > 1]; f[d[\"a\"] > 0]"),
            "does not have this frame's rows".into(),
        ),
        (format!("let d = read_csv(\"{g}\"); d.head(-1)"), "head: n must be 0 or more".into()),
        ("concat([])".into(), "concat: no frames to join".into()),
        (format!("concat([read_csv(\"{g}\"), 1])"), "concat: item 1 is i64, not a DataFrame".into()),
        (
            format!("let d = read_csv(\"{g}\"); concat([d, d.rename(#{{a: \"c\", b: \"a\"}})])"),
            "concat: column \"a\" is int64 in one frame and string in another".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d.diff()"),
            "diff: column \"b\" is string; select integer and float columns first".into(),
        ),
        (
            "from_columns(#{a: [1, 2], f: [true, false]}).diff()".into(),
            "diff: column \"f\" is bool; select integer and float columns first".into(),
        ),
        (
            format!("let d = read_csv(\"{b}\", #{{blocksize: 500, dtypes: #{{a: \"int64\"}}}}); len(d)"),
            format!("{b}, line 202"),
        ),
        (format!("let d = read_csv(\"{g}\"); d[\"b\"].str_contains(\"(\")"), "bad pattern".into()),
        (
            format!("let d = read_csv(\"{g}\"); d.astype(#{{b: \"int64\"}}).compute()"),
            "conversion from `str` to `i64` failed".into(),
        ),
        (
            "from_columns(#{a: [1, 2], b: [1]})".into(),
            "column \"b\" has 1 values, but the first column has 2".into(),
        ),
        ("from_columns(#{a: [1, \"x\"]})".into(), "column \"a\" mixes int64 and string values".into()),
        ("from_maps([1, 2])".into(), "from_maps: row 0 is int, not a map".into()),
        (
            "from_columns(#{a: [1]}, #{npartitions: 0})".into(),
            "npartitions must be a positive integer".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); merge(d, d, #{{on: \"z\"}})"),
            "the left frame has no column \"z\"".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); merge(d, d, #{{left_on: \"a\", right_on: \"b\"}})"),
            "the key \"a\" is int64 on the left but \"b\" is string on the right".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); merge(d, d, #{{on: \"a\", how: \"cross\"}})"),
            "how must be \"inner\"".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); merge(d, d, #{{on: \"a\", left_on: \"a\"}})"),
            "give either on, or both".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); merge(d, d, #{{by: \"a\"}})"),
            "merge has no option \"by\"".into(),
        ),
        (format!("let d = read_csv(\"{g}\"); merge(d[[\"a\"]], d[[\"b\"]])"), "no column in common".into()),
        (format!("let d = read_csv(\"{g}\"); d.sort_values(\"q\")"), "unknown column \"q\"".into()),
        (
            format!("let d = read_csv(\"{g}\"); d.sort_values([\"a\", \"b\"], #{{ascending: [true]}})"),
            "1 ascending flags for 2 columns".into(),
        ),
        (format!("let d = read_csv(\"{g}\"); d.set_index(\"q\")"), "unknown column \"q\"".into()),
        (format!("let d = read_csv(\"{g}\"); d.shuffle(\"q\")"), "unknown column \"q\"".into()),
        (
            format!("let d = read_csv(\"{g}\"); d.repartition(#{{npartitions: 0}})"),
            "npartitions must be a positive integer".into(),
        ),
        (format!("let d = read_csv(\"{g}\"); d.repartition(#{{}})"), "give #{npartitions: N}".into()),
        (
            format!("let d = read_csv(\"{g}\"); d.drop_duplicates(#{{keep: true}})"),
            "keep must be \"first\", \"last\" or false, not true".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d.drop_duplicates(#{{subset: [\"q\"]}})"),
            "unknown column \"q\"".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d[\"b\"].nlargest(2)"),
            "nlargest: column \"b\" is string, not numeric".into(),
        ),
        (format!("let d = read_csv(\"{g}\"); d.tail(-1)"), "tail: n must be 0 or more".into()),
        ("read_json(\"/nonexistent/brisk/*.jsonl\")".into(), "read_json: no files match".into()),
        (
            format!("let d = read_csv(\"{g}\"); d[\"a\"].dt_year()"),
            "dt_year needs a datetime column, not int64".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d.astype(#{{b: \"datetime64[ns]\"}}).compute()"),
            "\"x\" is not a date and time".into(),
        ),
        (format!("read_json(\"{}\").compute()", badjson.display()), format!("{}, line 3", badjson.display())),
        (format!("read_json(\"{}\")", nested.display()), "holds list".into()),
        (format!("read_json(\"{e}\")"), "is empty (no records)".into()),
        (
            format!("read_parquet(\"{pq}\", #{{filters: [[\"q\", \">\", 1]]}})"),
            "filters name unknown column \"q\"".into(),
        ),
        (
            format!("read_parquet(\"{pq}\", #{{filters: [[\"a\", \"~\", 1]]}})"),
            "unknown filter operator \"~\"".into(),
        ),
        (
            format!("read_parquet(\"{pq}\", #{{filters: [[\"a\", \">\", \"x\"]]}})"),
            "read_parquet: filters: cannot apply > to int64 and string".into(),
        ),
        (
            format!("read_parquet(\"{pq}\", #{{filters: [\"a\"]}})"),
            "filters must be [[column, op, value]".into(),
        ),
        (
            format!("read_parquet(\"{pq}\", #{{filters: [[\"a\", \"in\", 1]]}})"),
            "\"in\" needs a list of values".into(),
        ),
        (
            format!("let d = read_csv(\"{g}\"); d.groupby(\"b\", #{{split_out: 0}})"),
            "split_out must be a positive integer".into(),
        ),
        ("from_columns([[\"a\"]])".into(), "entry 0 must be a [name, value] pair".into()),
        ("from_columns([[\"a\", [1]], [\"a\", [2]]])".into(), "column \"a\" is given twice".into()),
        (
            "from_columns([[\"a\", [1]]]).assign([[1, 2]])".into(),
            "assign: entry 0 must be a [name, value] pair with a string name".into(),
        ),
    ];
    for (code, want) in cases {
        let e = error_of(&code);
        assert!(e.contains(&want), "{code}: expected {want:?} in {e:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lazy_frames_print_their_structure_and_local_ones_as_tables() {
    let mut s = Session::new();
    let lazy = s
        .eval_value(
            "let d = from_columns(#{a: [1, 2, 3], b: [0.5, (), 2.0]}, #{npartitions: 2}); `${d}`",
            "<t>",
        )
        .expect("repr");
    let text = lazy.to_string();
    assert!(text.starts_with("Dask DataFrame Structure:"), "{text}");
    assert!(text.contains("npartitions=2") && text.contains("float64"), "{text}");
    let local = s.eval_value("`${d.compute()}`", "<t>").expect("table").to_string();
    assert!(local.contains("NaN") && local.contains("3 rows × 2 columns"), "{local}");
    let json = s.eval_value("to_json(d.compute())", "<t>").expect("json").to_string();
    assert_eq!(json, r#"[{"a":1,"b":0.5},{"a":2,"b":null},{"a":3,"b":2.0}]"#);
    let series = s.eval_value("to_json(d[\"a\"].compute())", "<t>").expect("series json").to_string();
    assert_eq!(series, "[1,2,3]");
}

/// Files read by pandas' rules, each compared with pandas
/// (`tests/reference/python_readers.py`): NA tokens, spaces and
/// infinities in number columns (on the fast groupby path and the general
/// one), NA tokens after the type sample, a header longer than the sample,
/// `usecols: []`, decimal and uint64 Parquet columns, JSON integers beyond
/// int64 and lines over 256 KiB, and missing group keys dropped.
const READER_CASES: &str = r#"
let na = read_csv(`${D}/na.csv`, #{blocksize: 2000});
let late = read_csv(`${D}/late.csv`, #{blocksize: 100000});
let ex = read_parquet(`${D}/exotic.parquet`);
let big = read_json(`${D}/big.jsonl`);
#{
    na_all: na.compute().to_maps(),
    na_dtypes: na.dtypes,
    na_z_inf: [na[na["z"] > 1e308].compute().num_rows(), na[na["z"] < -1e308].compute().num_rows()],
    na_x_mean: na["x"].mean().compute(),
    na_y_sum: na["y"].sum().compute(),
    na_y_count: na["y"].count().compute(),
    na_groupby_fast: na.groupby("k").agg(#{x: "mean", y: "sum", id: "count"}).compute().to_maps(),
    na_groupby_general: na.assign(#{w: na["id"] * 2}).groupby("k").agg(#{x: "mean", y: "sum", id: "count"}).compute().to_maps(),
    na_groupby_size: na.groupby("k").size().compute().to_maps(),
    late_sum: late["v"].sum().compute(),
    late_count: late["v"].count().compute(),
    late_groupby: late.groupby("k").agg(#{v: "sum"}).compute().to_maps(),
    one_na_mean: read_csv(`${D}/one_na.csv`)["v"].mean().compute(),
    wide_ncols: read_csv(`${D}/wide.csv`).columns.len(),
    wide_last: read_csv(`${D}/wide.csv`).columns[-1],
    wide_last_sum: read_csv(`${D}/wide.csv`)["column_015999_name"].sum().compute(),
    usecols_empty: { let e = read_csv(`${D}/na.csv`, #{usecols: []}).compute(); [e.num_rows(), e.columns.len()] },
    pq_d: ex["d"].compute().to_array(),
    pq_w: ex["w"].compute().to_array(),
    pq_u: ex["u"].compute().to_array(),
    pq_d_sum: ex["d"].sum().compute(),
    pq_groupby: ex.assign(#{dd: ex["d"]}).groupby("k").agg(#{dd: "sum"}).compute().to_maps(),
    json_big: big["a"].compute().to_array(),
    json_groupby: big.groupby("k").agg(#{a: "sum"}).compute().to_maps(),
    json_long: { let l = read_json(`${D}/long.jsonl`).compute().to_maps(); l.map(|r| [r.s.len(), r.n]) },
}
"#;

#[test]
fn readers_follow_pandas_rules() {
    let Some(py) = python(&PANDAS) else { return };
    let reference = Reference::generate(py, "python_readers.py", "readers");
    for scheduler in SCHEDULERS {
        reference.check(scheduler, "", READER_CASES, "<readers>", "pandas");
    }
    let _ = std::fs::remove_dir_all(&reference.dir);
}

/// What the readers refuse, each with an error naming the file, the line
/// or column, and the type; nothing panics (the Parquet files are made by
/// pyarrow).
#[test]
fn readers_refuse_clearly() {
    let Some(py) = python(&Need { module: Some("pyarrow"), ..PANDAS }) else { return };
    let dir = std::env::temp_dir().join(format!("brisk-readers-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let d = dir.display();
    common::run_python(
        &py,
        [
            "-c",
            &format!(
                r#"
import datetime, decimal, pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.table({{"t": pa.array([0, 1_700_000_000_000_000], pa.timestamp("us", tz="Europe/Paris"))}}), "{d}/tz.parquet")
pq.write_table(pa.table({{"d": pa.array([datetime.date(2000, 1, 1), datetime.date(1, 1, 1)], pa.date32())}}), "{d}/old.parquet")
pq.write_table(pa.table({{"ts": pa.array([datetime.datetime(3000, 1, 1)], pa.timestamp("us"))}}), "{d}/future.parquet")
pq.write_table(pa.table({{"e": pa.array([decimal.Decimal("1.5")], pa.decimal256(40, 1))}}), "{d}/wide.parquet")
"#
            ),
        ],
        "pyarrow failed: ",
    );
    let mut csv = String::from("a,b\n");
    for i in 0..30000 {
        csv += &format!("{i},x{i}\n");
    }
    std::fs::write(dir.join("late.csv"), format!("{csv}1.5,y\n")).expect("write");
    std::fs::write(dir.join("wide.csv"), format!("{csv}7,w,extra\n")).expect("write");
    std::fs::write(dir.join("wide_early.csv"), "a,b\n1,2\n3,4,5\n").expect("write");
    let deep = format!("{{\"a\": {}{}}}\n", "[".repeat(100_000), "]".repeat(100_000));
    std::fs::write(dir.join("deep.jsonl"), deep).expect("write");
    let cases = [
        (
            format!("read_parquet(\"{d}/tz.parquet\")"),
            "tz.parquet: column \"t\" holds timestamps in time zone Europe/Paris",
        ),
        (
            format!("read_parquet(\"{d}/old.parquet\").compute()"),
            "old.parquet: column \"d\" holds 0001-01-01, outside the dates datetime64[ns] can hold",
        ),
        (
            format!("read_parquet(\"{d}/future.parquet\").compute()"),
            "column \"ts\" holds 3000-01-01 00:00:00, outside",
        ),
        (format!("read_parquet(\"{d}/wide.parquet\")"), "wide.parquet: column \"e\" is decimal256(40, 1)"),
        (format!("read_json(\"{d}/deep.jsonl\")"), "deep.jsonl, line 1: field \"a\" holds list values"),
        (
            format!("read_csv(\"{d}/late.csv\").compute()"),
            "late.csv, line 30002: column \"a\": \"1.5\" is not a value of type int64",
        ),
        (
            format!("read_csv(\"{d}/late.csv\").groupby(\"b\").agg(#{{a: \"sum\"}}).compute()"),
            "late.csv, line 30002: column \"a\"",
        ),
        (
            format!("read_csv(\"{d}/wide.csv\").compute()"),
            "wide.csv, line 30002: this line has more fields than the header",
        ),
        (
            format!("read_csv(\"{d}/wide_early.csv\")"),
            "wide_early.csv, line 3: this line has more fields than the header",
        ),
    ];
    for (code, want) in cases {
        let e = error_of(&code);
        assert!(e.contains(want), "{code}\n  gave: {e}\n  want: {want}");
        assert!(!e.contains("panicked") && !e.contains("kernel failed"), "{code}: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
