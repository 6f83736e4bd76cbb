//! The API reference entries of `dataframe.rs`'s functions, methods and
//! properties (kept apart to hold `dataframe.rs` under 800 lines).

use super::fndoc::{FnDoc, doc};

/// The entries, in the order of the guide (`docs::all` chains the areas).
pub(super) const DOCS: &[FnDoc] = &[
    doc(
        "read_csv",
        "read_csv(path_glob_or_array, #{blocksize, sep, header, dtypes, usecols}) -> DataFrame",
        "A lazy frame over CSV files, one partition per `blocksize` bytes (64 MB by default) cut at line ends. Column types come from a sample of the first file; `dtypes` overrides them (dask.dataframe.read_csv).",
        "from_columns(#{a: [1, 2], b: [\"x\", \"y\"]}).to_csv(\"/tmp/brisk-doc-read-csv\", #{overwrite: true});\nread_csv(\"/tmp/brisk-doc-read-csv/*.part\").dtypes",
    ),
    doc(
        "read_json",
        "read_json(glob_or_array, #{blocksize}) -> DataFrame",
        "A lazy frame over JSON lines files (one record per line, as pandas' `lines=True`): one partition per file, or per `blocksize` bytes cut at line ends. Types come from the first file; a bad line is an error naming file and line.",
        "from_sequence([`{\"a\": 1, \"b\": \"x\"}`, `{\"a\": 2}`]).to_textfiles(\"/tmp/brisk-doc-json\", #{overwrite: true});\nread_json(\"/tmp/brisk-doc-json/*.part\").compute()",
    ),
    doc(
        "read_parquet",
        "read_parquet(path_glob_or_dir, #{columns, filters}) -> DataFrame",
        "A lazy frame over Parquet files, one partition per row group; only the columns a computation needs are read. `filters` keeps the rows that pass `[[col, op, value], ...]` (all) or a list of such lists (any), with ops == != < <= > >= in, not in; row groups whose statistics rule a filter out are not read, and a filter written as `df[df[\"x\"] > 5]` right after `read_parquet` skips them too.",
        "from_columns(#{a: [1, 2, 3]}).to_parquet(\"/tmp/brisk-doc-read-pq\", #{overwrite: true});\nread_parquet(\"/tmp/brisk-doc-read-pq\")[\"a\"].sum().compute()",
    ),
    doc(
        "from_columns",
        "from_columns(#{col: [values...]} | [[col, [values...]], ...], #{npartitions}) -> DataFrame",
        "A frame from arrays of values, one per column, cut into `npartitions` row ranges. Rhai maps keep their keys sorted, so with a map columns come in name order; give `[[name, values], ...]` pairs to keep the order written, as pandas does.",
        "from_columns(#{a: [1, 2, 3], b: [0.5, (), 2.5]}, #{npartitions: 2}).compute()",
    ),
    doc(
        "from_maps",
        "from_maps([#{...}, ...], #{npartitions}) -> DataFrame",
        "A frame from rows given as maps; a key missing from a row is a missing value.",
        "from_maps([#{a: 1, b: \"x\"}, #{a: 2}]).compute()",
    ),
    doc(
        "head",
        "df.head(n) -> LocalDataFrame",
        "The first `n` rows (5 by default), computed now, reading only as many partitions as it needs.",
        "from_columns(#{a: [1, 2, 3, 4]}, #{npartitions: 2}).head(3)",
    ),
    doc(
        "assign",
        "df.assign(#{name: series_or_value} | [[name, series_or_value], ...]) -> DataFrame",
        "Add or replace columns; a Series must come from this frame's rows. New columns from a map come in name order (Rhai sorts map keys); `[[name, value], ...]` pairs keep the order written.",
        "let df = from_columns(#{x: [1, 2]});\ndf.assign(#{y: df[\"x\"] * 10, k: \"c\"}).compute()",
    ),
    doc(
        "groupby",
        "df.groupby(col_or_cols) -> GroupBy",
        "Group rows by key columns, then `agg(#{col: \"mean\"})` or `sum() mean() min() max() count() size() std() variance() nunique()`. Keys are ordinary columns of the result, sorted. `groupby(cols, #{split_out: n})` gives n partitions through a hash shuffle, for many groups (each partition sorted by key).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1, 2, 3]});\ndf.groupby(\"k\").agg(#{x: [\"sum\", \"max\"]}).compute()",
    ),
    doc(
        "value_counts",
        "s.value_counts() -> DataFrame",
        "Rows per distinct value of a Series: columns `[name, \"count\"]`, largest count first.",
        "from_columns(#{k: [\"a\", \"b\", \"a\"]})[\"k\"].value_counts().compute()",
    ),
    doc(
        "dropna",
        "df.dropna() / df.dropna(#{subset}) -> DataFrame",
        "Drop rows with a missing value (NaN counts as missing), in any column or in `subset`.",
        "from_columns(#{a: [1, (), 3]}).dropna().compute()",
    ),
    doc(
        "fillna",
        "df.fillna(value_or_map) -> DataFrame",
        "Fill missing values: one value for every column of a fitting type, or a map of column to value.",
        "from_columns(#{a: [1.5, ()]}).fillna(0).compute()",
    ),
    doc(
        "to_csv",
        "df.to_csv(dir, #{overwrite, append}) -> array of paths",
        "Write each partition to `dir/N.part` with a header; computes now. The parts appear together once all are written. A dir that already holds N.part files is an error unless overwrite: true (removes those files, no others) or append: true (new parts numbered after them, same header); a frame that reads a file inside dir cannot write there.",
        "from_columns(#{a: [1, 2]}, #{npartitions: 2}).to_csv(\"/tmp/brisk-doc-to-csv\", #{overwrite: true})",
    ),
    doc(
        "to_json",
        "df.to_json(dir, #{overwrite, append}) -> array of paths",
        "Write each partition as JSON lines (one object per row, as pandas' orient=\"records\", lines=True) to `dir/N.part`, as Dask's to_json; computes now, with to_csv's overwrite/append rules. Missing values and NaN are null, datetimes milliseconds since the epoch (pandas' default); floats keep every digit.",
        "from_columns(#{a: [1, 2], s: [\"x\", ()]}).to_json(\"/tmp/brisk-doc-to-json\", #{overwrite: true})",
    ),
    doc(
        "to_parquet",
        "df.to_parquet(dir, #{overwrite, append}) -> array of paths",
        "Write each partition to `dir/part.N.parquet` (snappy); pandas and pyarrow read the directory back. The parts appear together once all are written. A dir that already holds .parquet files is an error unless overwrite: true (removes them, no other files) or append: true (new parts numbered after them; same columns and types), as Dask's; a frame that reads a file inside dir cannot write there.",
        "from_columns(#{a: [1, 2]}).to_parquet(\"/tmp/brisk-doc-to-pq\", #{overwrite: true})",
    ),
    doc(
        "agg",
        "g.agg(#{col: \"mean\" or [\"sum\", \"max\"]}) / g.agg(spec, #{split_out}) -> DataFrame",
        "Aggregate each group: one column per source with one aggregation (`x`), or `x_sum`, `x_max` with several. Aggregations: sum mean min max count size std var nunique.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.groupby(\"k\").agg(#{x: \"sum\"}).compute()",
    ),
    doc(
        "between",
        "s.between(lo, hi) -> Series",
        "Whether each value lies in `[lo, hi]` (both ends included).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[df[\"x\"].between(0, 2)].compute()",
    ),
    doc(
        "floordiv",
        "s.floordiv(other) -> Series   (also floordiv(number, s))",
        "pandas' `s // other` (Rhai has no `//`): the floor of the quotient, as Python's (`-7 // 2` is -4, `1 // 0.1` is 9.0). Integers stay integers, and an integer divided by 0 is missing; a float divided by 0 is ±inf or NaN, as in pandas.",
        "let df = from_columns(#{x: [7, -7, 9]});\ndf[\"x\"].floordiv(2).compute()",
    ),
    doc(
        "pow",
        "s.pow(other) -> Series   (also s ** other, number ** s)",
        "Element-wise power. Integers to non-negative integer powers stay integers (wrapping on overflow, as NumPy's); a negative integer power of an integer is an error, as in pandas; anything with a float is a float.",
        "let df = from_columns(#{x: [1.0, 2.0, 3.0]});\n(df[\"x\"] ** 2).compute()",
    ),
    doc(
        "column_names",
        "df.column_names() -> array",
        "The column names, in order (as `df.columns`).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.column_names()",
    ),
    doc(
        "columns",
        "df.columns -> array",
        "The column names, in order; known without computing.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.columns",
    ),
    doc(
        "drop",
        "df.drop(col_or_cols) -> DataFrame",
        "The frame without these columns.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.drop(\"x\").columns",
    ),
    doc(
        "dtypes",
        "df.dtypes -> map",
        "Each column's type: int64, float64, bool, string or datetime64[ns].",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.dtypes",
    ),
    doc(
        "isin",
        "s.isin(values) -> Series",
        "Whether each value is one of `values`.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[df[\"k\"].isin([\"a\"])].compute()",
    ),
    doc(
        "isna",
        "s.isna() -> Series",
        "Whether each value is missing (null, or NaN in a float column).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[\"x\"].isna().sum().compute()",
    ),
    doc(
        "notna",
        "s.notna() -> Series",
        "Whether each value is present.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[df[\"x\"].notna()].compute()",
    ),
    doc(
        "name",
        "s.name -> string",
        "The Series' name (its column's, or the name given by `rename`).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[\"x\"].name",
    ),
    doc(
        "num_rows",
        "v.num_rows() -> int",
        "The rows of a computed frame or Series.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.compute().num_rows()",
    ),
    doc(
        "nunique",
        "s.nunique() -> lazy int",
        "The number of distinct present values. On a computed Series (`df.compute()[\"k\"]`, a group in `apply`) this and `sum mean min max count std variance` give the value at once.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[\"k\"].nunique().compute()",
    ),
    doc(
        "rename",
        "df.rename(#{old: new}) / s.rename(name)",
        "Rename columns (names that are not columns are ignored, as pandas does), or a Series.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.rename(#{x: \"value\"}).columns",
    ),
    doc(
        "str_contains",
        "s.str_contains(pattern) -> Series",
        "Whether each string matches a regular expression (pandas' `str.contains`).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[df[\"k\"].str_contains(\"^a\")].compute()",
    ),
    doc(
        "str_len",
        "s.str_len() -> Series",
        "The length of each string, in characters.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[\"k\"].str_len().compute()",
    ),
    doc(
        "str_upper",
        "s.str_upper() -> Series",
        "Each string in upper case (`str_lower` for lower case).",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf[\"k\"].str_upper().compute()",
    ),
    doc(
        "to_frame",
        "s.to_frame() -> DataFrame",
        "A Series as a one-column frame.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\n(df[\"x\"] * 2).to_frame().compute()",
    ),
    doc(
        "to_maps",
        "v.to_maps() -> array of maps",
        "A computed frame's rows as maps of column to value.",
        "let df = from_columns(#{k: [\"a\", \"b\", \"a\"], x: [1.5, (), -2.0]});\ndf.compute().to_maps()",
    ),
];
