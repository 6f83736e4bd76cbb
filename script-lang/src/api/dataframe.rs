//! DataFrames in Rhai (`dask.dataframe`): `read_csv`, `from_columns`,
//! `from_maps`, selection, transforms, Series arithmetic and reductions,
//! `groupby(..).agg(..)`, and local results that print as tables.

use std::sync::Arc;

use brisk_engine::Value;
use brisk_engine::collections::frame::{self as cd, Assigned, DataFrame, FrameError};
use brisk_engine::frame as kernels;
use brisk_engine::frame::dtype::{DType, Schema};
use brisk_engine::frame::expr::{BinOp, Expr, UnOp};
use brisk_engine::frame::partition::Frame;
use brisk_engine::frame::red::Red;
use brisk_engine::staging::{Format, Staged};
use rhai::{Array as RArray, Dynamic, Engine, EvalAltResult, Map};

use super::args::options;
use super::args::{bytes_arg, ctx, positive};
use super::series_expr::ElementWise;
pub(super) use super::series_expr::scalar;
use super::write;
use crate::convert::{to_dynamic, to_value};
use crate::error::{ApiError, runtime};
use crate::print::{frame_repr, local_frame_text, local_series_text, series_repr};
use crate::state::SessionState;
use crate::types::{Delayed, GroupBy, LazyFrame, LazySeries, LocalFrame, LocalSeries, type_name};

type Res<T> = Result<T, Box<EvalAltResult>>;

/// The reductions of every column by their script names (`var` is
/// reserved in Rhai): a Series', a whole frame's, a resample's.
pub(super) const REDUCTIONS: [(&str, Red); 7] = [
    ("sum", Red::Sum),
    ("mean", Red::Mean),
    ("min", Red::Min),
    ("max", Red::Max),
    ("count", Red::Count),
    ("std", Red::Std),
    ("variance", Red::Var),
];

/// The reductions a Series has, lazy or computed: those and `nunique`.
fn series_reductions() -> impl Iterator<Item = (&'static str, Red)> {
    REDUCTIONS.into_iter().chain([("nunique", Red::NUnique)])
}

pub(super) fn err(e: FrameError) -> Box<EvalAltResult> {
    runtime(e.to_string())
}

pub(super) fn strings(d: &Dynamic, what: &str) -> Res<Vec<String>> {
    if let Some(a) = d.read_lock::<RArray>() {
        return a
            .iter()
            .map(|x| {
                x.clone()
                    .into_string()
                    .map_err(|_| runtime(format!("{what} must be strings, not {}", x.type_name())))
            })
            .collect();
    }
    d.clone().into_string().map(|s| vec![s]).map_err(|_| {
        runtime(format!("{what} must be a string or an array of strings, not {}", d.type_name()))
    })
}

pub(super) fn dtype_of(d: &Dynamic, what: &str) -> Res<DType> {
    let s = d
        .clone()
        .into_string()
        .map_err(|_| runtime(format!("{what}: a dtype is a string like \"float64\"")))?;
    DType::parse(&s).ok_or_else(|| {
        runtime(format!(
            "{what}: unknown dtype \"{s}\" (int64, float64, bool, string, datetime64[ns], category)"
        ))
    })
}

fn paths(d: &Dynamic, function: &str) -> Res<Vec<String>> {
    let mut out = Vec::new();
    for p in strings(d, &format!("{function}: paths"))? {
        out.extend(expand_path(p, function)?);
    }
    Ok(out)
}

/// The files one path names: a file, the files a glob matches (sorted), or
/// for `read_parquet` the parts of a dataset directory.
fn expand_path(p: String, function: &str) -> Result<Vec<String>, ApiError> {
    let function = function.to_string();
    let dir = std::path::Path::new(&p).is_dir();
    if dir && function == "read_parquet" {
        // A directory is the dataset `to_parquet` wrote.
        let found = glob::glob(&format!("{}/*.parquet", p.trim_end_matches('/'))).map_err(|e| {
            ApiError::BadDirectory { function: function.clone(), path: p.clone(), reason: e.to_string() }
        })?;
        let mut files: Vec<String> = found.filter_map(Result::ok).map(|f| f.display().to_string()).collect();
        if files.is_empty() {
            return Err(ApiError::NoParquetFiles { function, path: p });
        }
        // part.2 before part.10, as the partitions were numbered.
        files.sort_by_key(|f| (f.len(), f.clone()));
        Ok(files)
    } else if dir {
        Err(ApiError::IsDirectory { function, path: p })
    } else if p.contains(['*', '?', '[']) {
        let found = glob::glob(&p).map_err(|e| ApiError::BadPattern {
            function: function.clone(),
            pattern: p.clone(),
            reason: e.to_string(),
        })?;
        let mut files: Vec<String> =
            found.filter_map(Result::ok).filter(|f| f.is_file()).map(|f| f.display().to_string()).collect();
        if files.is_empty() {
            return Err(ApiError::NoMatch { function, pattern: p });
        }
        files.sort();
        Ok(files)
    } else if !std::path::Path::new(&p).exists() {
        Err(ApiError::NoSuchFile { function, path: p })
    } else {
        Ok(vec![p])
    }
}

fn read_csv(path: &Dynamic, m: Option<Map>) -> Res<LazyFrame> {
    let m = options(m, "read_csv", &["blocksize", "sep", "header", "dtypes", "usecols"])?;
    let blocksize = match m.get("blocksize").filter(|d| !d.is_unit()) {
        Some(d) => Some(bytes_arg(d, "read_csv: blocksize")?),
        None => None,
    };
    let sep = match m.get("sep") {
        Some(d) => {
            let s = d.clone().into_string().map_err(|_| runtime("read_csv: sep must be a string"))?;
            match s.as_bytes() {
                [b] => *b,
                _ => return Err(runtime(format!("read_csv: sep must be one character, got \"{s}\""))),
            }
        }
        None => b',',
    };
    let header = match m.get("header") {
        None => true,
        Some(d) if d.is_unit() => false,
        Some(d) => match (d.as_bool(), d.as_int()) {
            (Ok(b), _) => b,
            (_, Ok(0)) => true,
            _ => return Err(runtime("read_csv: header must be true, false, 0 or ()")),
        },
    };
    let mut dtypes = Vec::new();
    if let Some(d) = m.get("dtypes") {
        let map = d
            .read_lock::<Map>()
            .ok_or_else(|| runtime("read_csv: dtypes must be a map of column to dtype"))?;
        for (k, v) in map.iter() {
            dtypes.push((k.to_string(), dtype_of(v, "read_csv: dtypes")?));
        }
    }
    let usecols = m.get("usecols").map(|d| strings(d, "read_csv: usecols")).transpose()?;
    let f = cd::read_csv(&paths(path, "read_csv")?, blocksize, sep, header, &dtypes, usecols.as_deref())
        .map_err(err)?;
    Ok(LazyFrame { f })
}

fn read_json(path: &Dynamic, m: Option<Map>) -> Res<LazyFrame> {
    let m = options(m, "read_json", &["blocksize"])?;
    let blocksize = match m.get("blocksize").filter(|d| !d.is_unit()) {
        Some(d) => Some(bytes_arg(d, "read_json: blocksize")?),
        None => None,
    };
    Ok(LazyFrame { f: cd::read_json(&paths(path, "read_json")?, blocksize).map_err(err)? })
}

/// Dask's `filters`: `[[col, op, value], ...]` (all must hold) or a list
/// of such lists (any of them).
fn parquet_filters(d: &Dynamic) -> Res<Vec<Vec<cd::ParquetFilter>>> {
    let bad = || runtime("read_parquet: filters must be [[column, op, value], ...] or a list of such lists");
    let outer = d.read_lock::<RArray>().ok_or_else(bad)?.clone();
    let nested =
        outer.first().and_then(|x| x.read_lock::<RArray>().map(|a| a.first().is_some_and(Dynamic::is_array)));
    let groups: Vec<RArray> = if nested == Some(true) {
        outer
            .iter()
            .map(|g| g.read_lock::<RArray>().map(|a| a.clone()).ok_or_else(bad))
            .collect::<Res<_>>()?
    } else {
        vec![outer]
    };
    groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|t| {
                    let t = t.read_lock::<RArray>().ok_or_else(bad)?.clone();
                    let [c, op, v] = <[Dynamic; 3]>::try_from(t).map_err(|_| bad())?;
                    let c = c.into_string().map_err(|_| bad())?;
                    let op = op.into_string().map_err(|_| bad())?;
                    let v = match v.read_lock::<RArray>() {
                        Some(a) => Value::list(
                            a.iter()
                                .map(|x| scalar(x, "read_parquet: a filter value"))
                                .collect::<Res<Vec<_>>>()?,
                        ),
                        None => scalar(&v, "read_parquet: a filter value")?,
                    };
                    Ok((c, op, v))
                })
                .collect()
        })
        .collect()
}

fn read_parquet(path: &Dynamic, m: Option<Map>) -> Res<LazyFrame> {
    let m = options(m, "read_parquet", &["columns", "filters"])?;
    let columns = m.get("columns").map(|d| strings(d, "read_parquet: columns")).transpose()?;
    let filters = m.get("filters").map(parquet_filters).transpose()?;
    let f = cd::read_parquet(&paths(path, "read_parquet")?, columns.as_deref(), filters.as_deref())
        .map_err(err)?;
    Ok(LazyFrame { f })
}

/// `to_csv` / `to_parquet`: the parts go to a staging folder and into
/// `dir` once all are written.
fn write_files(
    state: &SessionState,
    f: &LazyFrame,
    dir: &str,
    format: Format,
    m: Option<Map>,
) -> Res<RArray> {
    let function = match format {
        Format::Csv => "to_csv",
        Format::Json => "to_json",
        _ => "to_parquet",
    };
    let mode = write::mode(m, function)?;
    let mut staged = Staged::parts(format, std::path::Path::new(dir), mode).map_err(write::err)?;
    let (layer, keys) = match format {
        Format::Csv => f.f.to_csv(&ctx(state), &mut staged),
        Format::Json => f.f.to_json(&ctx(state), &mut staged),
        _ => f.f.to_parquet(&ctx(state), &mut staged),
    }
    .map_err(err)?;
    write::run(state, staged, layer, &keys)
}

fn npartitions_opt(m: &Map, function: &str) -> Res<usize> {
    match m.get("npartitions") {
        Some(d) => positive(d, &format!("{function}: npartitions")),
        None => Ok(1),
    }
}

fn from_columns(state: &SessionState, cols: Map, m: Option<Map>) -> Res<LazyFrame> {
    let m = options(m, "from_columns", &["npartitions"])?;
    let n = npartitions_opt(&m, "from_columns")?;
    let mut schema = Vec::new();
    let mut data = Vec::new();
    for (name, v) in cols.iter() {
        let vals = v
            .read_lock::<RArray>()
            .ok_or_else(|| {
                runtime(format!("from_columns: column \"{name}\" must be an array, not {}", v.type_name()))
            })?
            .iter()
            .map(|x| scalar(x, &format!("a value of column \"{name}\"")))
            .collect::<Res<Vec<_>>>()?;
        schema.push((name.to_string(), kernels::values::infer_dtype(name, &vals).map_err(err)?));
        data.push(vals);
    }
    Ok(LazyFrame { f: cd::from_columns(&ctx(state), Schema::new(schema), data, n).map_err(err)? })
}

/// `[[name, value], ...]`: the ordered form of a map of columns (Rhai's
/// maps keep their keys sorted; pandas keeps the order written).
fn pairs(function: &str, a: &RArray) -> Res<Vec<(String, Dynamic)>> {
    let mut out: Vec<(String, Dynamic)> = Vec::new();
    for (i, p) in a.iter().enumerate() {
        let pair = p.read_lock::<RArray>().filter(|p| p.len() == 2).map(|p| (p[0].clone(), p[1].clone()));
        let Some((name, value)) = pair.and_then(|(n, v)| n.into_string().ok().map(|n| (n, v))) else {
            return Err(runtime(format!(
                "{function}: entry {i} must be a [name, value] pair with a string name, not {}",
                type_name(p)
            )));
        };
        if out.iter().any(|(n, _)| *n == name) {
            return Err(runtime(format!("{function}: column \"{name}\" is given twice")));
        }
        out.push((name, value));
    }
    Ok(out)
}

/// `from_columns([[name, values], ...])`: columns in the order written.
fn from_column_pairs(state: &SessionState, cols: RArray, m: Option<Map>) -> Res<LazyFrame> {
    let pairs = pairs("from_columns", &cols)?;
    let names: Vec<String> = pairs.iter().map(|(n, _)| n.clone()).collect();
    let map: Map = pairs.into_iter().map(|(n, v)| (n.into(), v)).collect();
    let f = from_columns(state, map, m)?.f;
    Ok(LazyFrame { f: f.project(&names).map_err(err)? })
}

fn from_maps(state: &SessionState, rows: RArray, m: Option<Map>) -> Res<LazyFrame> {
    let m = options(m, "from_maps", &["npartitions"])?;
    let n = npartitions_opt(&m, "from_maps")?;
    let mut names: Vec<String> = Vec::new();
    let maps: Vec<Map> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            r.read_lock::<Map>().map(|m| m.clone()).ok_or_else(|| {
                let t = to_value(r, "").map(|v| v.type_name()).unwrap_or("value");
                runtime(format!("from_maps: row {i} is {t}, not a map"))
            })
        })
        .collect::<Res<_>>()?;
    for r in &maps {
        for k in r.keys() {
            if !names.iter().any(|n| n == k.as_str()) {
                names.push(k.to_string());
            }
        }
    }
    let mut cols = Map::new();
    for name in &names {
        // A key missing from a row is a missing value, as pandas does.
        let vals: RArray =
            maps.iter().map(|r| r.get(name.as_str()).cloned().unwrap_or(Dynamic::UNIT)).collect();
        cols.insert(name.as_str().into(), Dynamic::from_array(vals));
    }
    // Keep first-seen column order (Rhai maps are sorted by key).
    let f =
        from_columns(state, cols, Some(Map::from([("npartitions".into(), Dynamic::from_int(n as i64))])))?.f;
    let f = f.project(&names).map_err(err)?;
    Ok(LazyFrame { f })
}

fn getitem(f: &LazyFrame, key: &Dynamic) -> Res<Dynamic> {
    if let Some(s) = key.read_lock::<LazySeries>() {
        return Ok(Dynamic::from(LazyFrame { f: f.f.filter(&s.s).map_err(err)? }));
    }
    if key.is_string() {
        let name = key.clone().into_string().unwrap_or_default();
        return Ok(Dynamic::from(LazySeries { s: f.f.column(&name).map_err(err)? }));
    }
    if key.is_array() {
        let cols = strings(key, "df[[...]]: column names")?;
        return Ok(Dynamic::from(LazyFrame { f: f.f.project(&cols).map_err(err)? }));
    }
    Err(runtime(format!(
        "a DataFrame is indexed by a column name, an array of names or a bool Series, not {}",
        type_name(key)
    )))
}

fn assign(f: &LazyFrame, m: Map) -> Res<LazyFrame> {
    assign_in_order(f, m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// `assign` with columns added in the order given (`[[name, value], ...]`).
fn assign_in_order(f: &LazyFrame, m: Vec<(String, Dynamic)>) -> Res<LazyFrame> {
    let mut cols = Vec::new();
    for (k, v) in m.iter() {
        let a = match v.read_lock::<LazySeries>() {
            Some(s) => Assigned::Series(s.s.clone()),
            None => Assigned::Scalar(scalar(v, &format!("assign: column \"{k}\""))?),
        };
        cols.push((k.clone(), a));
    }
    Ok(LazyFrame { f: f.f.assign(cols).map_err(err)? })
}

/// The Series operators (lazy and computed Series alike). Rhai has no
/// `//`, so floor division is pandas' method name, `floordiv`.
const SERIES_OPERATORS: [(&str, BinOp); 16] = [
    ("+", BinOp::Add),
    ("-", BinOp::Sub),
    ("*", BinOp::Mul),
    ("/", BinOp::Div),
    ("%", BinOp::Mod),
    ("**", BinOp::Pow),
    ("pow", BinOp::Pow),
    ("floordiv", BinOp::FloorDiv),
    ("==", BinOp::Eq),
    ("!=", BinOp::Ne),
    ("<", BinOp::Lt),
    ("<=", BinOp::Le),
    (">", BinOp::Gt),
    (">=", BinOp::Ge),
    ("&", BinOp::And),
    ("|", BinOp::Or),
];

/// The element-wise Series methods (lazy and computed Series alike).
const SERIES_UNARY: [(&str, UnOp); 9] = [
    ("abs", UnOp::Abs),
    ("isna", UnOp::IsNa),
    ("notna", UnOp::NotNa),
    ("str_lower", UnOp::Lower),
    ("str_upper", UnOp::Upper),
    ("str_len", UnOp::Len),
    ("dt_year", UnOp::Year),
    ("dt_month", UnOp::Month),
    ("dt_day", UnOp::Day),
];

/// The Series operators for `S` (a lazy or a computed Series): with
/// another `S`, or with a scalar on either side, through `apply`.
fn register_operators<S: Clone + Send + Sync + 'static>(
    engine: &mut Engine,
    apply: fn(&Dynamic, &Dynamic, BinOp) -> Res<S>,
) {
    for (name, op) in SERIES_OPERATORS {
        let f = move |a: Dynamic, b: Dynamic| apply(&a, &b, op);
        engine.register_fn(name, move |a: S, b: S| f(Dynamic::from(a), Dynamic::from(b)));
        engine.register_fn(name, move |a: S, b: i64| f(Dynamic::from(a), Dynamic::from(b)));
        engine.register_fn(name, move |a: S, b: f64| f(Dynamic::from(a), Dynamic::from(b)));
        engine.register_fn(name, move |a: S, b: bool| f(Dynamic::from(a), Dynamic::from(b)));
        engine.register_fn(name, move |a: S, b: rhai::ImmutableString| f(Dynamic::from(a), Dynamic::from(b)));
        engine.register_fn(name, move |a: i64, b: S| f(Dynamic::from(a), Dynamic::from(b)));
        engine.register_fn(name, move |a: f64, b: S| f(Dynamic::from(a), Dynamic::from(b)));
        engine.register_fn(name, move |a: bool, b: S| f(Dynamic::from(a), Dynamic::from(b)));
        engine.register_fn(name, move |a: rhai::ImmutableString, b: S| f(Dynamic::from(a), Dynamic::from(b)));
    }
}

/// The element-wise Series methods and unary operators for `S`.
fn register_elementwise<S: ElementWise>(engine: &mut Engine) {
    let un = |s: &S, op: UnOp| s.map_expr(|e| Expr::Un(op, e));
    engine.register_fn("-", move |s: S| un(&s, UnOp::Neg));
    engine.register_fn("!", move |s: S| un(&s, UnOp::Not));
    for (name, op) in SERIES_UNARY {
        engine.register_fn(name, move |s: &mut S| un(s, op));
    }
    engine.register_fn("round", move |s: &mut S| un(s, UnOp::Round(0)));
    engine.register_fn("round", move |s: &mut S, d: i64| un(s, UnOp::Round(d.clamp(-300, 300) as i32)));
    engine.register_fn("astype", |s: &mut S, t: &str| -> Res<S> {
        let t = dtype_of(&Dynamic::from(t.to_string()), "astype")?;
        s.map_expr(|e| Expr::Cast(e, t))
    });
    engine.register_fn("isin", |s: &mut S, vals: RArray| -> Res<S> {
        let vals = vals.iter().map(|v| scalar(v, "isin")).collect::<Res<Vec<_>>>()?;
        s.map_expr(|e| Expr::IsIn(e, vals))
    });
    engine.register_fn("between", |s: &mut S, lo: Dynamic, hi: Dynamic| -> Res<S> {
        let (lo, hi) = (scalar(&lo, "between")?, scalar(&hi, "between")?);
        s.map_expr(|e| Expr::Between(e, lo, hi))
    });
    engine.register_fn("str_contains", |s: &mut S, pat: &str| -> Res<S> {
        let pat = pat.to_string();
        s.map_expr(|e| Expr::Contains(e, pat))
    });
    engine.register_fn("fillna", |s: &mut S, v: Dynamic| -> Res<S> {
        let v = scalar(&v, "fillna")?;
        s.map_expr(|e| Expr::FillNa(e, v))
    });
    super::series_text::register::<S>(engine);
    super::series_where::register::<S>(engine);
}

/// `a op b` where one side at least is a computed Series.
fn local_binary(a: &Dynamic, b: &Dynamic, op: BinOp) -> Res<LocalSeries> {
    let (x, y) = (
        a.read_lock::<LocalSeries>().map(|s| s.0.clone()),
        b.read_lock::<LocalSeries>().map(|s| s.0.clone()),
    );
    let scalar_of = |d: &Dynamic| scalar(d, "the other operand");
    let (l, r) = match (&x, &y) {
        (Some(x), Some(y)) => (kernels::series::Operand::Series(x), kernels::series::Operand::Series(y)),
        (Some(x), None) => {
            (kernels::series::Operand::Series(x), kernels::series::Operand::Scalar(scalar_of(b)?))
        }
        (None, Some(y)) => {
            (kernels::series::Operand::Scalar(scalar_of(a)?), kernels::series::Operand::Series(y))
        }
        (None, None) => return Err(runtime("a Series operator needs a Series")),
    };
    let f = Frame::series_binary(op, l, r).map_err(err)?;
    Ok(LocalSeries(Arc::new(f)))
}

fn series_binary(a: &Dynamic, b: &Dynamic, op: BinOp) -> Res<LazySeries> {
    let s = match (a.read_lock::<LazySeries>(), b.read_lock::<LazySeries>()) {
        (Some(x), Some(y)) => x.s.binary(op, &y.s),
        (Some(x), None) => x.s.scalar(op, scalar(b, "the other operand")?, false),
        (None, Some(y)) => y.s.scalar(op, scalar(a, "the other operand")?, true),
        (None, None) => return Err(runtime("a Series operator needs a Series")),
    };
    Ok(LazySeries { s: s.map_err(err)? })
}

fn delayed(layer: brisk_engine::graph::LayerRef, key: brisk_engine::Key) -> Delayed {
    Delayed { layer, key }
}

fn reduce(state: &SessionState, s: &LazySeries, red: Red) -> Res<Delayed> {
    let (layer, key) = s.s.reduce(&ctx(state), red).map_err(err)?;
    Ok(delayed(layer, key))
}

pub(super) use crate::collection::compute_one;

pub(super) fn frame_value(d: &Dynamic) -> Option<Arc<Frame>> {
    d.read_lock::<LocalFrame>().map(|f| f.0.clone())
}

/// `head(n)`: reads partitions one at a time until it has `n` rows.
pub(super) fn head(state: &SessionState, f: &DataFrame, n: i64) -> Res<Arc<Frame>> {
    if n < 0 {
        return Err(runtime(format!("head: n must be 0 or more, got {n}")));
    }
    let n = n as usize;
    let mut got: Vec<Arc<Frame>> = Vec::new();
    let mut rows = 0;
    for i in 0..f.npartitions() {
        let (layer, key) = f.head_of(i, n - rows);
        let d = compute_one(state, Dynamic::from(delayed(layer, key)))?;
        let part = frame_value(&d).ok_or_else(|| runtime("head: a partition did not give a frame"))?;
        rows += part.0.height();
        got.push(part);
        if rows >= n {
            break;
        }
    }
    Ok(Arc::new(Frame::stack(&got, &f.schema).map_err(err)?))
}

fn red_of(name: &str, what: &str) -> Res<Red> {
    Red::parse(name).ok_or_else(|| {
        runtime(format!(
            "{what}: unknown aggregation \"{name}\" (sum, mean, min, max, count, size, std, var, nunique)"
        ))
    })
}

fn split_out(g: &GroupBy, m: Option<Map>, function: &str) -> Res<usize> {
    let m = options(m, function, &["split_out"])?;
    match m.get("split_out") {
        Some(d) => positive(d, &format!("{function}: split_out")),
        None => Ok(g.split_out),
    }
}

fn agg(state: &SessionState, g: &GroupBy, m: Map, opts: Option<Map>) -> Res<LazyFrame> {
    let split = split_out(g, opts, "agg")?;
    let mut aggs = Vec::new();
    for (col, spec) in m.iter() {
        let names = strings(spec, &format!("agg: the aggregations of \"{col}\""))?;
        let several = names.len() > 1;
        for n in names {
            let red = red_of(&n, "agg")?;
            let out = if several { format!("{col}_{n}") } else { col.to_string() };
            aggs.push((out, col.to_string(), red));
        }
    }
    if aggs.is_empty() {
        return Err(runtime("agg needs at least one column and aggregation"));
    }
    Ok(LazyFrame { f: g.f.groupby_agg(&ctx(state), &g.by, &aggs, split).map_err(err)? })
}

fn group_all(state: &SessionState, g: &GroupBy, red: Red) -> Res<LazyFrame> {
    let aggs: Vec<(String, String, Red)> = if red == Red::Size {
        vec![("size".into(), String::new(), Red::Size)]
    } else {
        g.f.schema
            .cols
            .iter()
            .filter(|(n, t)| !g.by.contains(n) && red.dtype(*t).is_ok())
            .map(|(n, _)| (n.clone(), n.clone(), red))
            .collect()
    };
    Ok(LazyFrame { f: g.f.groupby_agg(&ctx(state), &g.by, &aggs, g.split_out).map_err(err)? })
}

/// The local frame's rows as maps, for display and `to_maps`.
fn rows_dynamic(f: &Frame) -> RArray {
    brisk_engine::value::rows(&f.0).iter().map(to_dynamic).collect()
}

fn local_series_values(f: &Frame) -> RArray {
    let name = f.column_names().into_iter().next().unwrap_or_default();
    brisk_engine::value::column_values(&f.0, &name).iter().map(to_dynamic).collect()
}

impl ElementWise for LazySeries {
    fn map_expr(&self, f: impl FnOnce(Box<Expr>) -> Expr) -> Res<Self> {
        Ok(LazySeries { s: self.s.map_expr(f).map_err(err)? })
    }

    fn map_expr2(&self, other: &Self, f: impl FnOnce(Box<Expr>, Box<Expr>) -> Expr) -> Res<Self> {
        Ok(LazySeries { s: self.s.map_expr2(&other.s, f).map_err(err)? })
    }

    fn side_by_side(&self, cols: Vec<(String, Self)>) -> Res<Dynamic> {
        let names: Vec<String> = cols.iter().map(|(n, _)| n.clone()).collect();
        let assigned = cols.into_iter().map(|(n, s)| (n, Assigned::Series(s.s))).collect();
        let f = self.s.frame.assign(assigned).and_then(|f| f.project(&names)).map_err(err)?;
        Ok(Dynamic::from(LazyFrame { f }))
    }

    fn explode(&self, pat: Option<String>, n: Option<usize>) -> Res<Self> {
        Ok(LazySeries { s: self.s.explode(pat, n).map_err(err)? })
    }
}

impl ElementWise for LocalSeries {
    /// Evaluated at once, with the lazy path's typing and kernels.
    fn map_expr(&self, f: impl FnOnce(Box<Expr>) -> Expr) -> Res<Self> {
        Frame::series_map(&self.0, f).map(|f| LocalSeries(Arc::new(f))).map_err(err)
    }

    fn map_expr2(&self, other: &Self, f: impl FnOnce(Box<Expr>, Box<Expr>) -> Expr) -> Res<Self> {
        Frame::series_map2(&self.0, &other.0, f).map(|f| LocalSeries(Arc::new(f))).map_err(err)
    }

    fn side_by_side(&self, cols: Vec<(String, Self)>) -> Res<Dynamic> {
        let parts: Vec<(String, &Frame)> = cols.iter().map(|(n, s)| (n.clone(), s.0.as_ref())).collect();
        Ok(Dynamic::from(LocalFrame(Arc::new(Frame::side_by_side(&parts).map_err(err)?))))
    }

    fn explode(&self, pat: Option<String>, n: Option<usize>) -> Res<Self> {
        let column = self.0.0.get_column_names().first().map(|c| c.to_string()).unwrap_or_default();
        let stage = brisk_engine::frame::stage::Stage::Explode { column, pat, n };
        let df = stage.apply(self.0.0.clone()).map_err(|e| runtime(format!("explode: {e}")))?;
        Ok(LocalSeries(Arc::new(Frame(df))))
    }
}

// The help text of what this file registers: `dataframe_docs.rs`.

pub fn register(engine: &mut Engine, state: &Arc<SessionState>) {
    engine.register_type_with_name::<LazyFrame>("DataFrame");
    engine.register_type_with_name::<LazySeries>("Series");
    engine.register_type_with_name::<LocalFrame>("LocalDataFrame");
    engine.register_type_with_name::<LocalSeries>("LocalSeries");
    engine.register_type_with_name::<GroupBy>("GroupBy");

    engine.register_fn("read_csv", |p: Dynamic| read_csv(&p, None));
    engine.register_fn("read_csv", |p: Dynamic, m: Map| read_csv(&p, Some(m)));
    engine.register_fn("read_json", |p: Dynamic| read_json(&p, None));
    engine.register_fn("read_json", |p: Dynamic, m: Map| read_json(&p, Some(m)));
    engine.register_fn("read_parquet", |p: Dynamic| read_parquet(&p, None));
    engine.register_fn("read_parquet", |p: Dynamic, m: Map| read_parquet(&p, Some(m)));
    let st = state.clone();
    engine.register_fn("from_columns", move |c: Map| from_columns(&st, c, None));
    let st = state.clone();
    engine.register_fn("from_columns", move |c: Map, m: Map| from_columns(&st, c, Some(m)));
    let st = state.clone();
    engine.register_fn("from_columns", move |c: RArray| from_column_pairs(&st, c, None));
    let st = state.clone();
    engine.register_fn("from_columns", move |c: RArray, m: Map| from_column_pairs(&st, c, Some(m)));
    let st = state.clone();
    engine.register_fn("from_maps", move |r: RArray| from_maps(&st, r, None));
    let st = state.clone();
    engine.register_fn("from_maps", move |r: RArray, m: Map| from_maps(&st, r, Some(m)));

    // Properties.
    let names =
        |f: &DataFrame| -> RArray { f.schema.names().map(|n| Dynamic::from(n.to_string())).collect() };
    engine.register_get("columns", move |f: &mut LazyFrame| names(&f.f));
    engine.register_fn("column_names", move |f: &mut LazyFrame| names(&f.f));
    engine.register_get("dtypes", |f: &mut LazyFrame| -> Map {
        f.f.schema
            .cols
            .iter()
            .map(|(n, t)| (n.as_str().into(), Dynamic::from(t.name().to_string())))
            .collect()
    });
    engine.register_get("npartitions", |f: &mut LazyFrame| f.f.npartitions() as i64);
    engine.register_get("npartitions", |s: &mut LazySeries| s.s.frame.npartitions() as i64);
    engine.register_get("dtype", |s: &mut LazySeries| s.s.dtype.name().to_string());
    engine.register_get("name", |s: &mut LazySeries| s.s.name.clone());

    // Selection and transforms.
    engine.register_indexer_get(|f: &mut LazyFrame, k: Dynamic| getitem(f, &k));
    let st = state.clone();
    engine.register_fn("head", move |f: &mut LazyFrame| head(&st, &f.f, 5).map(LocalFrame));
    let st = state.clone();
    engine.register_fn("head", move |f: &mut LazyFrame, n: i64| head(&st, &f.f, n).map(LocalFrame));
    let st = state.clone();
    engine.register_fn("head", move |s: &mut LazySeries, n: i64| {
        head(&st, &s.s.to_frame(), n).map(LocalSeries)
    });
    engine.register_fn("assign", |f: &mut LazyFrame, m: Map| assign(f, m));
    engine.register_fn("assign", |f: &mut LazyFrame, a: RArray| assign_in_order(f, pairs("assign", &a)?));
    engine.register_fn("drop", |f: &mut LazyFrame, c: Dynamic| -> Res<LazyFrame> {
        Ok(LazyFrame { f: f.f.drop(&strings(&c, "drop: columns")?).map_err(err)? })
    });
    engine.register_fn("rename", |f: &mut LazyFrame, m: Map| -> Res<LazyFrame> {
        let pairs = m
            .iter()
            .map(|(k, v)| {
                Ok((
                    k.to_string(),
                    v.clone().into_string().map_err(|_| runtime("rename: new names must be strings"))?,
                ))
            })
            .collect::<Res<Vec<_>>>()?;
        Ok(LazyFrame { f: f.f.rename(pairs).map_err(err)? })
    });
    engine.register_fn("astype", |f: &mut LazyFrame, m: Map| -> Res<LazyFrame> {
        let cols =
            m.iter().map(|(k, v)| Ok((k.to_string(), dtype_of(v, "astype")?))).collect::<Res<Vec<_>>>()?;
        Ok(LazyFrame { f: f.f.astype(cols).map_err(err)? })
    });
    engine.register_fn("fillna", |f: &mut LazyFrame, v: Dynamic| -> Res<LazyFrame> {
        let fill: Vec<(String, Value)> = if let Some(m) = v.read_lock::<Map>() {
            m.iter().map(|(k, x)| Ok((k.to_string(), scalar(x, "fillna")?))).collect::<Res<_>>()?
        } else {
            let val = scalar(&v, "fillna")?;
            // Every column whose type the value fits, as pandas fills.
            f.f.schema
                .cols
                .iter()
                .filter(|(n, _)| Expr::FillNa(Box::new(Expr::col(n)), val.clone()).dtype(&f.f.schema).is_ok())
                .map(|(n, _)| (n.clone(), val.clone()))
                .collect()
        };
        Ok(LazyFrame { f: f.f.fillna(fill).map_err(err)? })
    });
    engine.register_fn("dropna", |f: &mut LazyFrame| -> Res<LazyFrame> {
        Ok(LazyFrame { f: f.f.dropna(None).map_err(err)? })
    });
    engine.register_fn("dropna", |f: &mut LazyFrame, m: Map| -> Res<LazyFrame> {
        let m = options(Some(m), "dropna", &["subset"])?;
        let subset = m.get("subset").map(|d| strings(d, "dropna: subset")).transpose()?;
        Ok(LazyFrame { f: f.f.dropna(subset).map_err(err)? })
    });

    // Series operators, with Series and scalars on either side.
    register_operators::<LazySeries>(engine, series_binary);
    register_elementwise::<LazySeries>(engine);
    engine.register_fn("rename", |s: &mut LazySeries, name: &str| LazySeries { s: s.s.rename(name) });
    engine.register_fn("to_frame", |s: &mut LazySeries| LazyFrame { f: s.s.to_frame() });

    for (name, red) in series_reductions() {
        let st = state.clone();
        engine.register_fn(name, move |s: &mut LazySeries| reduce(&st, s, red));
    }
    let st = state.clone();
    engine
        .register_fn("value_counts", move |s: &mut LazySeries| LazyFrame { f: s.s.value_counts(&ctx(&st)) });
    let st = state.clone();
    engine.register_fn("unique", move |s: &mut LazySeries| LazySeries { s: s.s.unique(&ctx(&st)) });

    // Grouping.
    let groupby = |f: &mut LazyFrame, by: Dynamic, m: Option<Map>| -> Res<GroupBy> {
        let by = strings(&by, "groupby: key columns")?;
        for b in &by {
            f.f.column(b).map_err(err)?;
        }
        let g = GroupBy { f: f.f.clone(), by, split_out: 1 };
        let split_out = split_out(&g, m, "groupby")?;
        Ok(GroupBy { split_out, ..g })
    };
    engine.register_fn("groupby", move |f: &mut LazyFrame, by: Dynamic| groupby(f, by, None));
    engine.register_fn("groupby", move |f: &mut LazyFrame, by: Dynamic, m: Map| groupby(f, by, Some(m)));
    let st = state.clone();
    engine.register_fn("agg", move |g: &mut GroupBy, m: Map| agg(&st, g, m, None));
    let st = state.clone();
    engine.register_fn("agg", move |g: &mut GroupBy, m: Map, o: Map| agg(&st, g, m, Some(o)));
    for (name, red) in [
        ("sum", Red::Sum),
        ("mean", Red::Mean),
        ("min", Red::Min),
        ("max", Red::Max),
        ("count", Red::Count),
        ("size", Red::Size),
        ("std", Red::Std),
        ("variance", Red::Var),
        ("nunique", Red::NUnique),
    ] {
        let st = state.clone();
        engine.register_fn(name, move |g: &mut GroupBy| group_all(&st, g, red));
    }
    engine.register_indexer_get(|g: &mut GroupBy, cols: Dynamic| -> Res<GroupBy> {
        let cols = strings(&cols, "groupby selection")?;
        let mut keep = g.by.clone();
        keep.extend(cols.into_iter().filter(|c| !g.by.contains(c)));
        Ok(GroupBy { f: g.f.project(&keep).map_err(err)?, by: g.by.clone(), split_out: g.split_out })
    });

    // Compute and output.
    crate::collection::register::<LazyFrame>(engine, state);
    crate::collection::register::<LazySeries>(engine, state);
    for (name, format) in
        [("to_csv", Format::Csv), ("to_parquet", Format::Parquet), ("to_json", Format::Json)]
    {
        let st = state.clone();
        engine.register_fn(name, move |f: &mut LazyFrame, dir: &str| write_files(&st, f, dir, format, None));
        let st = state.clone();
        engine.register_fn(name, move |f: &mut LazyFrame, dir: &str, m: Map| {
            write_files(&st, f, dir, format, Some(m))
        });
    }
    engine.register_fn("to_string", |f: &mut LazyFrame| frame_repr(&f.f));
    engine.register_fn("to_debug", |f: &mut LazyFrame| frame_repr(&f.f));
    engine.register_fn("to_string", |s: &mut LazySeries| series_repr(&s.s));
    engine.register_fn("to_debug", |s: &mut LazySeries| series_repr(&s.s));
    engine.register_fn("to_string", |g: &mut GroupBy| format!("DataFrameGroupBy(by={:?})", g.by));
}

/// What local frames answer, on clients and workers.
pub fn register_local(engine: &mut Engine) {
    engine.register_fn("to_maps", |f: &mut LocalFrame| rows_dynamic(&f.0));
    engine.register_fn("num_rows", |f: &mut LocalFrame| f.0.height() as i64);
    engine.register_get("columns", |f: &mut LocalFrame| -> RArray {
        f.0.column_names().into_iter().map(Dynamic::from).collect()
    });
    engine.register_fn("to_string", |f: &mut LocalFrame| local_frame_text(&f.0));
    engine.register_fn("to_debug", |f: &mut LocalFrame| local_frame_text(&f.0));
    engine.register_fn("to_array", |s: &mut LocalSeries| local_series_values(&s.0));
    engine.register_fn("num_rows", |s: &mut LocalSeries| s.0.height() as i64);
    for (name, red) in series_reductions() {
        engine.register_fn(name, move |s: &mut LocalSeries| -> Res<Dynamic> {
            let v = kernels::values::reduce_column(&s.0.0, red).map_err(err)?;
            Ok(to_dynamic(&v))
        });
    }
    engine.register_fn("to_string", |s: &mut LocalSeries| local_series_text(&s.0));
    engine.register_fn("to_debug", |s: &mut LocalSeries| local_series_text(&s.0));
    // Operators as on lazy Series, evaluated at once.
    register_operators::<LocalSeries>(engine, local_binary);
    register_elementwise::<LocalSeries>(engine);
    engine.register_indexer_get(|f: &mut LocalFrame, mask: LocalSeries| -> Res<LocalFrame> {
        f.0.rows_where(&mask.0).map(|r| LocalFrame(Arc::new(r))).map_err(err)
    });
    engine.register_indexer_get(|f: &mut LocalFrame, c: &str| -> Res<LocalSeries> {
        let col = f.0.select_one(c).ok_or_else(|| runtime(format!("unknown column \"{c}\"")))?;
        Ok(LocalSeries(Arc::new(col)))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files_are_typed() {
        let dir = std::env::temp_dir().join(format!("brisk-paths-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let missing = dir.join("nope.csv").display().to_string();
        let e = expand_path(missing.clone(), "read_csv").expect_err("missing");
        assert_eq!(e, ApiError::NoSuchFile { function: "read_csv".into(), path: missing.clone() });
        assert_eq!(e.to_string(), format!("read_csv: no such file: {missing}"));
        let pattern = dir.join("*.csv").display().to_string();
        let e = expand_path(pattern.clone(), "read_csv").expect_err("no match");
        assert!(matches!(&e, ApiError::NoMatch { .. }), "{e:?}");
        assert_eq!(e.to_string(), format!("read_csv: no files match \"{pattern}\""));
        let d = dir.display().to_string();
        let e = expand_path(d.clone(), "read_csv").expect_err("a directory");
        assert!(matches!(&e, ApiError::IsDirectory { .. }), "{e:?}");
        assert_eq!(e.to_string(), format!("read_csv: {d} is a directory"));
        let e = expand_path(d.clone(), "read_parquet").expect_err("no parts");
        assert_eq!(e.to_string(), format!("read_parquet: no .parquet files in {d}"));
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
