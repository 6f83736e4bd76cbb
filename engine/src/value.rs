//! What a task produces. `Value` is the engine's one dynamic data type: the
//! script layer converts to and from it, the wire and spill code serialize it,
//! and later collections add their chunk types (array chunks, frame
//! partitions) as variants. Cloning is cheap: every heap payload is shared.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use polars::prelude::{AnyValue, DataFrame};

use crate::array::chunk::Chunk;
use crate::array::gpu::GpuChunk;
use crate::frame::partition::Frame;

/// A task result or a literal argument.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub enum Value {
    #[default]
    Unit,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Arc<str>),
    Bytes(Arc<[u8]>),
    List(Arc<Vec<Value>>),
    Map(Arc<BTreeMap<String, Value>>),
    /// An n-d array: a block of a lazy array, or a computed one.
    Array(Arc<Chunk>),
    /// A dataframe partition, or a computed frame.
    Frame(Arc<Frame>),
    /// An n-d array in GPU memory (it travels as its host copy).
    Gpu(Arc<GpuChunk>),
}

impl Value {
    /// The name of the value's type, as used in error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Unit => "()",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "array",
            Value::Map(_) => "map",
            Value::Array(_) => "ndarray",
            Value::Frame(_) => "DataFrame",
            Value::Gpu(_) => "ndarray (GPU)",
        }
    }

    /// Approximate bytes held in memory, for memory accounting (shared
    /// payloads are counted in full by every holder, as Dask's `sizeof`).
    pub fn nbytes(&self) -> u64 {
        const BASE: u64 = std::mem::size_of::<Value>() as u64;
        match self {
            Value::Unit | Value::Bool(_) | Value::Int(_) | Value::Float(_) => BASE,
            Value::Str(s) => BASE + s.len() as u64,
            Value::Bytes(b) => BASE + b.len() as u64,
            Value::List(items) => BASE + items.iter().map(Value::nbytes).sum::<u64>(),
            Value::Map(m) => BASE + m.iter().map(|(k, v)| k.len() as u64 + v.nbytes()).sum::<u64>(),
            Value::Array(c) => BASE + c.nbytes(),
            Value::Frame(f) => BASE + f.nbytes(),
            // Device memory is the device's to count, not the host's.
            Value::Gpu(_) => BASE,
        }
    }

    pub fn array(c: Chunk) -> Value {
        Value::Array(Arc::new(c))
    }

    pub fn list(items: Vec<Value>) -> Value {
        Value::List(Arc::new(items))
    }

    pub fn str(s: &str) -> Value {
        Value::Str(Arc::from(s))
    }

    /// JSON text of the value. Bytes become an array of numbers; floats that
    /// JSON cannot carry (NaN, infinities) become `null`, as Python's
    /// `json.dumps(allow_nan=False)` would refuse them and pandas writes null.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    fn write_json(&self, out: &mut String) {
        use std::fmt::Write;
        match self {
            Value::Unit => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Value::Float(f) => {
                if f.is_finite() {
                    // `{:?}` keeps a decimal point (1.0, not 1) and round-trips.
                    let _ = write!(out, "{f:?}");
                } else {
                    out.push_str("null");
                }
            }
            Value::Str(s) => write_json_str(s, out),
            Value::Bytes(b) => {
                out.push('[');
                for (i, x) in b.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{x}");
                }
                out.push(']');
            }
            Value::List(items) => {
                out.push('[');
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    x.write_json(out);
                }
                out.push(']');
            }
            Value::Array(c) => out.push_str(&c.to_json()),
            Value::Gpu(g) => match g.to_host() {
                Ok(c) => out.push_str(&c.to_json()),
                Err(_) => out.push_str("null"),
            },
            Value::Frame(f) => Value::list(rows(&f.0)).write_json(out),
            Value::Map(m) => {
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_json_str(k, out);
                    out.push(':');
                    v.write_json(out);
                }
                out.push('}');
            }
        }
    }
}

fn write_json_str(s: &str, out: &mut String) {
    use std::fmt::Write;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Unit => f.write_str("()"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x:?}"),
            Value::Str(s) => f.write_str(s),
            Value::Bytes(b) => write!(f, "<{} bytes>", b.len()),
            Value::List(_) | Value::Map(_) | Value::Array(_) | Value::Frame(_) | Value::Gpu(_) => {
                f.write_str(&self.to_json())
            }
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::str(v)
    }
}

/// One cell as a script value (datetimes as ISO text).
pub fn cell(av: AnyValue<'_>) -> Value {
    match av {
        AnyValue::Null => Value::Unit,
        AnyValue::Boolean(b) => Value::Bool(b),
        AnyValue::Int64(i) => Value::Int(i),
        AnyValue::Int32(i) => Value::Int(i64::from(i)),
        AnyValue::UInt32(i) => Value::Int(i64::from(i)),
        AnyValue::UInt64(i) => Value::Int(i as i64),
        AnyValue::Float64(f) => Value::Float(f),
        AnyValue::Float32(f) => Value::Float(f64::from(f)),
        AnyValue::String(s) => Value::str(s),
        AnyValue::StringOwned(s) => Value::str(s.as_str()),
        other => Value::str(&other.to_string()),
    }
}

/// Rows as maps of column name to value (`to_maps`).
pub fn rows(df: &DataFrame) -> Vec<Value> {
    let names: Vec<String> = df.get_column_names().iter().map(|n| n.to_string()).collect();
    (0..df.height())
        .map(|i| {
            let m = df
                .columns()
                .iter()
                .zip(&names)
                .map(|(c, n)| (n.clone(), c.get(i).map(cell).unwrap_or(Value::Unit)))
                .collect();
            Value::Map(Arc::new(m))
        })
        .collect()
}

/// One column's values.
pub fn column_values(df: &DataFrame, name: &str) -> Vec<Value> {
    match df.column(name) {
        Ok(c) => (0..c.len()).map(|i| c.get(i).map(cell).unwrap_or(Value::Unit)).collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_of_nested_values() {
        let mut m = BTreeMap::new();
        m.insert("a\"b".to_string(), Value::list(vec![1.into(), 2.5.into(), Value::Unit]));
        m.insert("n".to_string(), Value::Float(f64::NAN));
        let v = Value::Map(Arc::new(m));
        assert_eq!(v.to_json(), r#"{"a\"b":[1,2.5,null],"n":null}"#);
        assert_eq!(Value::Float(1.0).to_json(), "1.0");
        assert_eq!(Value::str("x\ny").to_json(), r#""x\ny""#);
    }

    #[test]
    fn nbytes_counts_payloads() {
        let small = Value::Int(1).nbytes();
        let s = Value::str(&"x".repeat(1000)).nbytes();
        assert!(s >= small + 1000);
    }

    #[test]
    fn values_round_trip_through_msgpack() {
        let v = Value::list(vec![Value::str("a"), Value::Bool(true), Value::Bytes(Arc::from(&b"xy"[..]))]);
        let bytes = rmp_serde::to_vec(&v).expect("encode");
        let back: Value = rmp_serde::from_slice(&bytes).expect("decode");
        assert_eq!(v, back);
    }
}
