//! JSON lines as a partitioned frame, as Dask's `read_json(lines=True)`:
//! files cut into blocks at line ends (the cut of `read_text`), the column
//! types inferred from a sample of the first file, every block parsed with
//! that schema; a line that does not parse is an error naming file and line.
//!
//! Each line is read by serde_json into the cells of one record, not by
//! polars: polars panics on an integer beyond int64 (it infers Int128,
//! which the frame cannot hold) and overflows the stack on deeply nested
//! values. serde_json reads an integer beyond int64 as a number (float64,
//! as exact as a float can be; pandas says uint64 up to 2^64 and refuses
//! larger ones), skips a nested value without recursion and reports its
//! errors as values, and a line has no length limit.

use std::borrow::Cow;
use std::fmt;

use polars::prelude::*;
use rustc_hash::FxHashMap;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::csv::{lines_before, sample_of};
use super::dtype::{DType, Schema};
use crate::error::TaskError;
use crate::io::read_block;

#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("cannot read {path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("read_json: {0}")]
    Bad(String),
}

/// One field's value, as far as a frame cell can hold it.
#[derive(Debug)]
enum Cell<'a> {
    Null,
    Bool(bool),
    Int(i64),
    /// A number with a fraction or an exponent, or an integer beyond int64.
    Float(f64),
    Str(Cow<'a, str>),
    /// A list or an object, which no column holds: its kind, for messages.
    Nested(&'static str),
}

impl Cell<'_> {
    /// The type this value alone implies (`None` for a missing value).
    fn dtype(&self) -> Option<DType> {
        match self {
            Cell::Null | Cell::Nested(_) => None,
            Cell::Bool(_) => Some(DType::Bool),
            Cell::Int(_) => Some(DType::Int64),
            Cell::Float(_) => Some(DType::Float64),
            Cell::Str(_) => Some(DType::Str),
        }
    }

    fn text(&self) -> String {
        match self {
            Cell::Null => "null".into(),
            Cell::Bool(b) => b.to_string(),
            Cell::Int(i) => i.to_string(),
            Cell::Float(f) => f.to_string(),
            Cell::Str(s) => format!("\"{s}\""),
            Cell::Nested(k) => format!("a JSON {k}"),
        }
    }
}

struct CellVisitor;

impl<'de> Visitor<'de> for CellVisitor {
    type Value = Cell<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Cell<'de>, E> {
        Ok(Cell::Null)
    }
    fn visit_none<E>(self) -> Result<Cell<'de>, E> {
        Ok(Cell::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Cell<'de>, E> {
        Ok(Cell::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Cell<'de>, E> {
        Ok(Cell::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Cell<'de>, E> {
        Ok(i64::try_from(v).map_or(Cell::Float(v as f64), Cell::Int))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Cell<'de>, E> {
        Ok(Cell::Float(v))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cell<'de>, E> {
        Ok(Cell::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cell<'de>, E> {
        Ok(Cell::Str(Cow::Owned(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Cell<'de>, E> {
        Ok(Cell::Str(Cow::Owned(v)))
    }
    // serde_json skips an ignored value with its own stack, not by
    // recursion, however deep it is nested.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Cell<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Cell::Nested("list"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Cell<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Cell::Nested("object"))
    }
}

impl<'de> de::Deserialize<'de> for Cell<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CellVisitor)
    }
}

/// A field name, borrowed from the line where it has no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// One line: its fields in file order.
struct Record<'a>(Vec<(Cow<'a, str>, Cell<'a>)>);

impl<'de> de::Deserialize<'de> for Record<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Record<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object (one record per line)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Record<'de>, A::Error> {
                let mut fields = Vec::new();
                while let Some((Key(k), v)) = map.next_entry::<Key<'de>, Cell<'de>>()? {
                    fields.push((k, v));
                }
                Ok(Record(fields))
            }
        }
        d.deserialize_map(V)
    }
}

/// The non-blank lines of `bytes` with their index among all lines.
fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    bytes.split(|&b| b == b'\n').enumerate().filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace))
}

fn record(line: &[u8]) -> Result<Record<'_>, String> {
    serde_json::from_slice(line).map_err(|e| e.to_string())
}

/// The columns and types of the records at the start of `path`: the
/// fields in the order first met; integers and numbers together are
/// float64, other mixtures string; a field that is only ever null is
/// float64 (pandas' NaN).
pub fn infer(path: &str) -> Result<Schema, JsonError> {
    let sample = sample_of(path).map_err(|error| JsonError::Io { path: path.into(), error })?;
    if sample.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(JsonError::Bad(format!("{path} is empty (no records)")));
    }
    let mut cols: Vec<(String, Option<DType>)> = Vec::new();
    let mut index: FxHashMap<String, usize> = FxHashMap::default();
    for (i, line) in lines(&sample) {
        let r = record(line).map_err(|e| JsonError::Bad(format!("{path}, line {}: {e}", i + 1)))?;
        for (name, v) in r.0 {
            if let Cell::Nested(kind) = v {
                return Err(JsonError::Bad(format!(
                    "{path}, line {}: field \"{name}\" holds {kind} values, which a frame column cannot",
                    i + 1
                )));
            }
            let at = *index.entry(name.to_string()).or_insert_with(|| {
                cols.push((name.to_string(), None));
                cols.len() - 1
            });
            let t = &mut cols[at].1;
            *t = match (*t, v.dtype()) {
                (a, None) => a,
                (None, b) => b,
                (Some(a), Some(b)) if a == b => Some(a),
                (Some(DType::Int64 | DType::Float64), Some(DType::Int64 | DType::Float64)) => {
                    Some(DType::Float64)
                }
                _ => Some(DType::Str),
            };
        }
    }
    if cols.is_empty() {
        return Err(JsonError::Bad(format!("{path}: the records have no fields")));
    }
    Ok(Schema::new(cols.into_iter().map(|(n, t)| (n, t.unwrap_or(DType::Float64))).collect()))
}

/// A column being filled, one cell per record.
enum Builder {
    I(Vec<Option<i64>>),
    F(Vec<Option<f64>>),
    B(Vec<Option<bool>>),
    S(Vec<Option<String>>),
}

impl Builder {
    fn new(t: DType) -> Builder {
        match t {
            DType::Int64 | DType::Datetime => Builder::I(Vec::new()),
            DType::Float64 => Builder::F(Vec::new()),
            DType::Bool => Builder::B(Vec::new()),
            DType::Str | DType::Category => Builder::S(Vec::new()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Builder::I(v) => v.len(),
            Builder::F(v) => v.len(),
            Builder::B(v) => v.len(),
            Builder::S(v) => v.len(),
        }
    }

    fn push_null(&mut self) {
        match self {
            Builder::I(v) => v.push(None),
            Builder::F(v) => v.push(None),
            Builder::B(v) => v.push(None),
            Builder::S(v) => v.push(None),
        }
    }

    /// Add `cell` as a value of type `t`; `false` where it is not one.
    fn push(&mut self, t: DType, cell: Cell<'_>) -> bool {
        match (self, cell) {
            (b, Cell::Null) => b.push_null(),
            (Builder::I(v), Cell::Int(i)) if t == DType::Int64 => v.push(Some(i)),
            (Builder::I(v), Cell::Str(s)) if t == DType::Datetime => {
                match super::calendar::parse_datetime(s.trim()) {
                    Some(ns) => v.push(Some(ns)),
                    None => return false,
                }
            }
            (Builder::F(v), Cell::Int(i)) => v.push(Some(i as f64)),
            (Builder::F(v), Cell::Float(f)) => v.push(Some(f)),
            (Builder::B(v), Cell::Bool(b)) => v.push(Some(b)),
            (Builder::S(v), Cell::Str(s)) => v.push(Some(s.into_owned())),
            // A column of mixed values holds their JSON text.
            (Builder::S(v), c @ (Cell::Int(_) | Cell::Float(_) | Cell::Bool(_))) => v.push(Some(c.text())),
            _ => return false,
        }
        true
    }

    fn finish(self, name: &str, t: DType) -> PolarsResult<Column> {
        let s = match self {
            Builder::I(v) => Series::new(name.into(), v),
            Builder::F(v) => Series::new(name.into(), v),
            Builder::B(v) => Series::new(name.into(), v),
            Builder::S(v) => Series::new(name.into(), v),
        };
        let s = if t == DType::Datetime { s.cast(&t.to_polars())? } else { s };
        Ok(s.into_column())
    }
}

/// Block `[start, end)` of `path` as a frame of `schema`, only `columns`.
/// A line that is not a record, a value that does not fit its column's
/// type and a field the schema lacks are errors naming the line.
pub fn read(
    schema: &Schema,
    path: &str,
    start: u64,
    end: u64,
    columns: Option<&[String]>,
) -> Result<DataFrame, TaskError> {
    let bytes = read_block(path, start, end)?;
    let at = |i: usize, msg: String| {
        let line = lines_before(path, start).unwrap_or(0) + i as u64 + 1;
        TaskError::user(format!("read_json: {path}, line {line}: {msg}"))
    };
    let index: FxHashMap<&str, usize> = schema.names().enumerate().map(|(i, n)| (n, i)).collect();
    let mut cols: Vec<Builder> = schema.cols.iter().map(|(_, t)| Builder::new(*t)).collect();
    let mut rows = 0usize;
    for (i, line) in lines(&bytes) {
        let r = record(line).map_err(|e| at(i, e))?;
        for (name, v) in r.0 {
            let Some(&c) = index.get(name.as_ref()) else {
                return Err(at(
                    i,
                    format!(
                        "field \"{name}\" is not among the columns read from the start of the file ({})",
                        schema.listing()
                    ),
                ));
            };
            let t = schema.cols[c].1;
            let b = &mut cols[c];
            if b.len() > rows {
                return Err(at(i, format!("field \"{name}\" appears twice in the record")));
            }
            let shown = v.text();
            if !b.push(t, v) {
                return Err(at(
                    i,
                    format!(
                        "field \"{name}\": {shown} is not a value of type {t} (the column's type was inferred from the start of the file)"
                    ),
                ));
            }
        }
        rows += 1;
        for b in &mut cols {
            if b.len() < rows {
                b.push_null();
            }
        }
    }
    let keep = |n: &str| columns.is_none_or(|cs| cs.iter().any(|c| c == n));
    let mut out = Vec::new();
    for ((name, t), b) in schema.cols.iter().zip(cols) {
        if keep(name) {
            out.push(b.finish(name, *t).map_err(|e| TaskError::user(format!("read_json: {path}: {e}")))?);
        }
    }
    let df = DataFrame::new(rows, out).map_err(|e| TaskError::user(format!("read_json: {path}: {e}")))?;
    match columns {
        Some(cols) => df.select(cols.iter().map(String::as_str)).map_err(|e| TaskError::user(e.to_string())),
        None => Ok(df),
    }
}

/// A partition as JSON lines (`to_json`, pandas' `orient="records",
/// lines=True`): one object per row, columns in order, missing values and
/// NaN as null, datetimes as milliseconds since the epoch (pandas'
/// default `date_format="epoch"`). Floats keep every digit (pandas rounds
/// to 10 by default).
pub fn write(path: &str, df: &DataFrame) -> Result<(), TaskError> {
    use std::io::Write;
    let fail = |e: &dyn std::fmt::Display| TaskError::user(format!("cannot write {path}: {e}"));
    let cols: Vec<Series> = df.columns().iter().map(|c| c.as_materialized_series().clone()).collect();
    let mut f = std::fs::File::create(path).map_err(|e| fail(&e))?;
    let mut w = std::io::BufWriter::new(&mut f);
    let mut line = String::new();
    for i in 0..df.height() {
        line.clear();
        line.push('{');
        for (k, c) in cols.iter().enumerate() {
            if k > 0 {
                line.push(',');
            }
            line.push_str(&serde_json::to_string(c.name().as_str()).map_err(|e| fail(&e))?);
            line.push(':');
            let v = c.get(i).map_err(|e| fail(&e))?;
            let cell = match v {
                AnyValue::Null => serde_json::Value::Null,
                AnyValue::Boolean(b) => serde_json::Value::Bool(b),
                AnyValue::Int64(x) => x.into(),
                AnyValue::Float64(x) => {
                    serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, Into::into)
                }
                AnyValue::String(s) => s.into(),
                AnyValue::StringOwned(s) => s.as_str().into(),
                AnyValue::Datetime(ns, unit, _) => {
                    let per_ms = match unit {
                        TimeUnit::Nanoseconds => 1_000_000,
                        TimeUnit::Microseconds => 1_000,
                        TimeUnit::Milliseconds => 1,
                    };
                    ns.div_euclid(per_ms).into()
                }
                other => other.to_string().into(),
            };
            line.push_str(&serde_json::to_string(&cell).map_err(|e| fail(&e))?);
        }
        line.push_str("}\n");
        w.write_all(line.as_bytes()).map_err(|e| fail(&e))?;
    }
    w.flush().map_err(|e| fail(&e))?;
    drop(w);
    f.sync_all().map_err(|e| fail(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &[u8]) -> String {
        let dir = std::env::temp_dir().join(format!("brisk-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        p.display().to_string()
    }

    #[test]
    fn lines_parse_with_the_inferred_schema_and_bad_lines_are_named() {
        let p = file(
            "a.jsonl",
            b"{\"a\": 1, \"s\": \"x\"}\n{\"a\": 2.5, \"s\": null}\n{\"a\": null, \"s\": \"z\"}\n",
        );
        let schema = infer(&p).expect("schema");
        assert_eq!(schema.cols, vec![("a".into(), DType::Float64), ("s".into(), DType::Str)]);
        let df = read(&schema, &p, 0, 1000, Some(&["s".to_string()])).expect("read");
        assert_eq!(df.shape(), (3, 1));
        let bad = file("b.jsonl", b"{\"a\": 1}\n{\"a\": 2}\n{\"a\": oops}\n");
        let schema = Schema::new(vec![("a".into(), DType::Int64)]);
        let e = read(&schema, &bad, 0, 1000, None).expect_err("bad line");
        assert!(e.message.contains("line 3"), "{}", e.message);
    }

    #[test]
    fn big_integers_deep_nesting_and_long_lines_are_read_or_refused() {
        let p =
            file("big.jsonl", b"{\"a\": 1}\n{\"a\": 10000000000000000000}\n{\"a\": 99999999999999999999}\n");
        let schema = infer(&p).expect("schema");
        assert_eq!(schema.cols, vec![("a".into(), DType::Float64)]);
        let df = read(&schema, &p, 0, 1000, None).expect("read");
        let a: Vec<Option<f64>> = df.column("a").expect("a").f64().expect("f64").iter().collect();
        assert_eq!(a, vec![Some(1.0), Some(1e19), Some(1e20)]);
        let deep = format!("{{\"a\": {}{}}}\n", "[".repeat(100_000), "]".repeat(100_000));
        let p = file("deep.jsonl", deep.as_bytes());
        let e = infer(&p).expect_err("nested");
        assert!(e.to_string().contains("field \"a\" holds list values"), "{e}");
        let schema = Schema::new(vec![("a".into(), DType::Str)]);
        let e = read(&schema, &p, 0, 1 << 20, None).expect_err("nested");
        assert!(
            e.message.contains("line 1: field \"a\": a JSON list is not a value of type string"),
            "{}",
            e.message
        );
        let top = format!("{}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let p = file("top.jsonl", top.as_bytes());
        assert!(infer(&p).expect_err("not a record").to_string().contains("line 1"));
        let long =
            format!("{{\"s\": \"{}\", \"n\": 1}}\n{{\"s\": \"b\", \"n\": 2}}\n", "x".repeat(300 << 10));
        let p = file("long.jsonl", long.as_bytes());
        let schema = infer(&p).expect("a long first line");
        assert_eq!(schema.cols, vec![("s".into(), DType::Str), ("n".into(), DType::Int64)]);
        let df = read(&schema, &p, 0, 1 << 30, None).expect("read");
        assert_eq!(df.shape(), (2, 2));
        assert_eq!(df.column("s").expect("s").str().expect("str").get(0).map(str::len), Some(300 << 10));
    }
}
