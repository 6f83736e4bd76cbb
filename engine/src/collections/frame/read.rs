//! Frames from files and data: CSV, JSON lines and Parquet readers (with
//! the filters that skip Parquet row groups), columns of values, and bag
//! partitions of records.

use std::sync::Arc;

use super::dataframe::{DEFAULT_BLOCKSIZE, DataFrame, MAX_PARTITIONS, Part, Series, block, invalid, task};
use crate::collections::array::Ctx;
use crate::frame::dtype::{DType, Schema};
use crate::frame::error::FrameError;
use crate::frame::expr::{BinOp, Expr, UnOp};
use crate::frame::op::{FrameOp, Sink, Source};
use crate::graph::layer::{Layer, LayerRef};
use crate::graph::task::Task;
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::{Arg, Op};
use crate::value::Value;

/// `read_csv`: one partition per `blocksize` bytes of each file.
pub fn read_csv(
    paths: &[String],
    blocksize: Option<u64>,
    sep: u8,
    header: bool,
    dtypes: &[(String, DType)],
    usecols: Option<&[String]>,
) -> Result<DataFrame, FrameError> {
    if paths.is_empty() {
        return Err(FrameError::NoFiles { function: "read_csv" });
    }
    if blocksize == Some(0) {
        return Err(invalid("read_csv: blocksize must be at least 1 byte"));
    }
    let bs = blocksize.unwrap_or(DEFAULT_BLOCKSIZE);
    let mut t = Tokenizer::new();
    t.str("read_csv").u64(bs).u64(u64::from(sep)).u64(u64::from(header));
    let mut parts = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|error| FrameError::Io { path: p.clone(), error })?;
        if meta.is_dir() {
            return Err(FrameError::IsDirectory { function: "read_csv", path: p.to_string() });
        }
        t.file(std::path::Path::new(p), &meta);
        let blocks = crate::io::file_blocks(p, meta.len(), Some(bs));
        if parts.len() + blocks.len() > MAX_PARTITIONS {
            return Err(invalid(format!(
                "read_csv: blocksize {bs} makes more than {MAX_PARTITIONS} partitions; use a larger blocksize"
            )));
        }
        let path: Arc<str> = Arc::from(p.as_str());
        for (start, end) in blocks {
            parts.push(Part::Csv { path: path.clone(), start, end });
        }
    }
    let spec = crate::frame::csv::infer(paths, sep, header, dtypes)?;
    for (n, d) in &spec.schema.cols {
        t.str(n).str(d.name());
    }
    let schema = spec.schema.clone();
    let df = DataFrame::new_source(parts, vec![], Some(Arc::new(spec)), schema, t.finish(), "read_csv");
    match usecols {
        Some(cols) => {
            let mut df = df.project(cols)?;
            df.label = "read_csv";
            Ok(df)
        }
        None => Ok(df),
    }
}

/// `read_json`: JSON lines, one partition per `blocksize` bytes of each
/// file (one per file without a blocksize, as Dask); every file must have
/// the fields of the first.
pub fn read_json(paths: &[String], blocksize: Option<u64>) -> Result<DataFrame, FrameError> {
    if paths.is_empty() {
        return Err(FrameError::NoFiles { function: "read_json" });
    }
    if blocksize == Some(0) {
        return Err(invalid("read_json: blocksize must be at least 1 byte"));
    }
    let mut t = Tokenizer::new();
    t.str("read_json").u64(blocksize.unwrap_or(0));
    let schema = crate::frame::json::infer(&paths[0])?;
    let mut parts = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|error| FrameError::Io { path: p.clone(), error })?;
        if meta.is_dir() {
            return Err(FrameError::IsDirectory { function: "read_json", path: p.to_string() });
        }
        t.file(std::path::Path::new(p), &meta);
        let n = blocksize.map_or(1, |bs| meta.len().div_ceil(bs).max(1));
        if parts.len() as u64 + n > MAX_PARTITIONS as u64 {
            return Err(invalid(format!(
                "read_json: the blocksize makes more than {MAX_PARTITIONS} partitions; use a larger blocksize"
            )));
        }
        let path: Arc<str> = Arc::from(p.as_str());
        let blocks = crate::io::file_blocks(p, meta.len(), blocksize);
        parts.extend(blocks.into_iter().map(|(start, end)| Part::Json { path: path.clone(), start, end }));
    }
    for (n, d) in &schema.cols {
        t.str(n).str(d.name());
    }
    Ok(DataFrame::new_source(parts, vec![], None, schema, t.finish(), "read_json"))
}

/// A frame of a bag's partitions of maps (`Bag.to_dataframe`), one
/// conversion task per partition.
pub fn from_records(ctx: &Ctx, layer: LayerRef, keys: Vec<Key>, token: &str, schema: Schema) -> DataFrame {
    let name: Arc<str> = Arc::from(Tokenizer::new().str(token).serde(&schema).name("to_dataframe"));
    let schema_arc = Arc::new(schema.clone());
    let mut tasks = Vec::with_capacity(keys.len());
    let mut out = Vec::with_capacity(keys.len());
    for (i, k) in keys.into_iter().enumerate() {
        let key = block(&name, i);
        let op = FrameOp::Run {
            source: Source::Records(schema_arc.clone()),
            columns: None,
            stages: vec![],
            sink: Sink::Frame,
        };
        tasks.push(task(ctx, key.clone(), op, vec![Arg::Dep(0)], vec![k]));
        out.push(key);
    }
    DataFrame::of_keys(Layer::new(name, tasks, vec![layer]), out, schema, "to_dataframe")
}

/// A `read_parquet` filter: `(column, op, value)`, as Dask's `filters`.
pub type ParquetFilter = (String, String, Value);

/// Dask's `filters` in disjunctive normal form (any of the lists, all of
/// each list) as one boolean expression, checked against `schema`.
pub(super) fn filters_expr(schema: &Schema, dnf: &[Vec<ParquetFilter>]) -> Result<Expr, FrameError> {
    let mut any: Option<Expr> = None;
    for conj in dnf {
        let mut all: Option<Expr> = None;
        for (col, op, v) in conj {
            if !schema.contains(col) {
                return Err(invalid(format!(
                    "read_parquet: filters name unknown column \"{col}\" (columns: {})",
                    schema.listing()
                )));
            }
            let c = Expr::col(col);
            let values = |v: &Value| match v {
                Value::List(l) => Ok(l.as_ref().clone()),
                other => Err(invalid(format!(
                    "read_parquet: \"{op}\" needs a list of values, not {}",
                    other.type_name()
                ))),
            };
            let e = match op.as_str() {
                "==" | "=" => Expr::bin(BinOp::Eq, c, Expr::Lit(v.clone())),
                // As pyarrow's (Dask's) filters: a missing value passes no test.
                "!=" => Expr::bin(
                    BinOp::And,
                    Expr::bin(BinOp::Ne, c.clone(), Expr::Lit(v.clone())),
                    Expr::un(UnOp::NotNa, c),
                ),
                "<" => Expr::bin(BinOp::Lt, c, Expr::Lit(v.clone())),
                "<=" => Expr::bin(BinOp::Le, c, Expr::Lit(v.clone())),
                ">" => Expr::bin(BinOp::Gt, c, Expr::Lit(v.clone())),
                ">=" => Expr::bin(BinOp::Ge, c, Expr::Lit(v.clone())),
                "in" => Expr::IsIn(Box::new(c), values(v)?),
                "not in" => Expr::bin(
                    BinOp::And,
                    Expr::un(UnOp::Not, Expr::IsIn(Box::new(c.clone()), values(v)?)),
                    Expr::un(UnOp::NotNa, c),
                ),
                other => {
                    return Err(invalid(format!(
                        "read_parquet: unknown filter operator \"{other}\" (==, !=, <, <=, >, >=, in, not in)"
                    )));
                }
            };
            e.dtype(schema).map_err(|e| invalid(format!("read_parquet: filters: {e}")))?;
            all = Some(match all {
                None => e,
                Some(a) => Expr::bin(BinOp::And, a, e),
            });
        }
        let Some(all) = all else { return Err(invalid("read_parquet: a filters list is empty")) };
        any = Some(match any {
            None => all,
            Some(a) => Expr::bin(BinOp::Or, a, all),
        });
    }
    any.ok_or_else(|| invalid("read_parquet: filters is empty"))
}

/// `read_parquet`: one partition per row group of each file; `columns`
/// limits what is read (the pushdown does the rest); `filters` keeps the
/// rows that pass them, skipping row groups whose statistics rule them out.
pub fn read_parquet(
    paths: &[String],
    columns: Option<&[String]>,
    filters: Option<&[Vec<ParquetFilter>]>,
) -> Result<DataFrame, FrameError> {
    if paths.is_empty() {
        return Err(FrameError::NoFiles { function: "read_parquet" });
    }
    let mut t = Tokenizer::new();
    t.str("read_parquet");
    let mut parts = Vec::new();
    let mut schema: Option<(Schema, &String)> = None;
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|error| FrameError::Io { path: p.clone(), error })?;
        t.file(std::path::Path::new(p), &meta);
        let (s, groups) = crate::frame::parquet::inspect(p)?;
        match &schema {
            Some((first, name)) if *first != s => {
                return Err(invalid(format!(
                    "read_parquet: {p} has columns ({}), but {name} has ({})",
                    s.listing(),
                    first.listing()
                )));
            }
            Some(_) => {}
            None => schema = Some((s, p)),
        }
        let path: Arc<str> = Arc::from(p.as_str());
        let mut offset = 0;
        for g in groups {
            parts.push(Part::Parquet { path: path.clone(), offset, len: g.rows, stats: g.stats });
            offset += g.rows;
        }
        if offset == 0 {
            parts.push(Part::Parquet { path: path.clone(), offset: 0, len: 0, stats: Arc::default() });
        }
        if parts.len() > MAX_PARTITIONS {
            return Err(invalid(format!("read_parquet: more than {MAX_PARTITIONS} row groups")));
        }
    }
    let (schema, _) = schema.ok_or(FrameError::NoFiles { function: "read_parquet" })?;
    for (n, d) in &schema.cols {
        t.str(n).str(d.name());
    }
    let mut df = DataFrame::new_source(parts, vec![], None, schema, t.finish(), "read_parquet");
    if let Some(dnf) = filters {
        let e = filters_expr(&df.schema, dnf)?;
        df = df.filter(&Series { frame: df.clone(), expr: e, name: "filters".into(), dtype: DType::Bool })?;
    }
    if let Some(cols) = columns {
        df = df.project(cols)?;
    }
    df.label = "read_parquet";
    Ok(df)
}

/// A frame from columns of values, cut into `npartitions` row ranges.
pub fn from_columns(
    ctx: &Ctx,
    schema: Schema,
    columns: Vec<Vec<Value>>,
    npartitions: usize,
) -> Result<DataFrame, FrameError> {
    let n = columns.first().map_or(0, Vec::len);
    if let Some(((name, _), c)) = schema.cols.iter().zip(&columns).find(|(_, c)| c.len() != n) {
        return Err(invalid(format!(
            "from_columns: column \"{name}\" has {} values, but the first column has {n}",
            c.len()
        )));
    }
    if npartitions == 0 {
        return Err(invalid("npartitions must be at least 1"));
    }
    let parts = npartitions.min(n.max(1));
    let size = n.div_ceil(parts).max(1);
    let mut t = Tokenizer::new();
    t.str("from_columns").u64(parts as u64);
    for ((name, d), c) in schema.cols.iter().zip(&columns) {
        t.str(name).str(d.name());
        c.iter().for_each(|v| {
            t.value(v);
        });
    }
    let name: Arc<str> = Arc::from(t.name("from_pandas"));
    let mut tasks = Vec::new();
    let mut keys = Vec::new();
    for i in 0..parts {
        let (lo, hi) = ((i * size).min(n), ((i + 1) * size).min(n));
        let slice: Vec<Vec<Value>> = columns.iter().map(|c| c[lo..hi].to_vec()).collect();
        let df = crate::frame::values::from_values(&schema, &slice)?;
        let key = block(&name, i);
        let mut task = Task::new(
            key.clone(),
            Op::Literal(Value::Frame(Arc::new(crate::frame::partition::Frame(df)))),
            vec![],
        );
        task.annotations = ctx.annotations.clone();
        tasks.push(task);
        keys.push(key);
    }
    Ok(DataFrame::of_keys(Layer::new(name, tasks, vec![]), keys, schema, "from_pandas"))
}
