//! JSON lines as a partitioned frame, as Dask's `read_json(lines=True)`:
//! files cut into blocks at line ends (the cut of `read_text`), the column
//! types inferred from a sample of the first file, every block parsed with
//! that schema; a line that does not parse is an error naming file and line.

use std::io::Cursor;
use std::sync::Arc;

use polars::prelude::*;

use super::csv::{bad_line, lines_before, sample_of};
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

fn first_line_of(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim()
}

fn parse(bytes: Vec<u8>, schema: &Schema) -> PolarsResult<DataFrame> {
    JsonReader::new(Cursor::new(bytes))
        .with_json_format(JsonFormat::JsonLines)
        .with_schema(Arc::new(schema.to_polars()))
        .finish()
}

/// The columns and types of the records at the start of `path`.
pub fn infer(path: &str) -> Result<Schema, JsonError> {
    let sample = sample_of(path).map_err(|error| JsonError::Io { path: path.into(), error })?;
    if sample.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(JsonError::Bad(format!("{path} is empty (no records)")));
    }
    let df = JsonReader::new(Cursor::new(sample.clone()))
        .with_json_format(JsonFormat::JsonLines)
        .infer_schema_len(None)
        .finish()
        .map_err(|e| {
            let line = bad_line(&sample, |b| {
                JsonReader::new(Cursor::new(b.to_vec()))
                    .with_json_format(JsonFormat::JsonLines)
                    .finish()
                    .is_err()
            });
            match line {
                Some(l) => {
                    JsonError::Bad(format!("{path}, line {}: {}", l + 1, first_line_of(&e.to_string())))
                }
                None => JsonError::Bad(format!("{path}: {}", first_line_of(&e.to_string()))),
            }
        })?;
    let mut cols = Vec::new();
    for (name, dt) in df.schema().iter() {
        let t = match dt {
            DataType::Null => DType::Float64,
            other => DType::of_polars(other).ok_or_else(|| {
                JsonError::Bad(format!("{path}: field \"{name}\" holds {other} values, which a frame cannot"))
            })?,
        };
        cols.push((name.to_string(), t));
    }
    if cols.is_empty() {
        return Err(JsonError::Bad(format!("{path}: the records have no fields")));
    }
    Ok(Schema::new(cols))
}

/// Block `[start, end)` of `path` as a frame of `schema`, only `columns`.
pub fn read(
    schema: &Schema,
    path: &str,
    start: u64,
    end: u64,
    columns: Option<&[String]>,
) -> Result<DataFrame, TaskError> {
    let bytes = read_block(path, start, end)?;
    let df = if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        DataFrame::empty_with_schema(&schema.to_polars())
    } else {
        let copy = bytes.clone();
        parse(bytes, schema).map_err(|e| {
            let msg = first_line_of(&e.to_string()).to_string();
            match bad_line(&copy, |b| parse(b.to_vec(), schema).is_err()) {
                Some(i) => {
                    let line = lines_before(path, start).unwrap_or(0) + i as u64 + 1;
                    TaskError::user(format!("read_json: {path}, line {line}: {msg}"))
                }
                None => TaskError::user(format!("read_json: {path}: {msg}")),
            }
        })?
    };
    let df = super::parquet::normalize(df, schema)
        .map_err(|e| TaskError::user(format!("read_json: {path}: {e}")))?;
    match columns {
        Some(cols) => df.select(cols.iter().map(String::as_str)).map_err(|e| TaskError::user(e.to_string())),
        None => Ok(df),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_the_inferred_schema_and_bad_lines_are_named() {
        let dir = std::env::temp_dir().join(format!("brisk-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("a.jsonl");
        std::fs::write(
            &p,
            "{\"a\": 1, \"s\": \"x\"}\n{\"a\": 2.5, \"s\": null}\n{\"a\": null, \"s\": \"z\"}\n",
        )
        .expect("write");
        let p = p.display().to_string();
        let schema = infer(&p).expect("schema");
        assert_eq!(schema.cols, vec![("a".into(), DType::Float64), ("s".into(), DType::Str)]);
        let df = read(&schema, &p, 0, 1000, Some(&["s".to_string()])).expect("read");
        assert_eq!(df.shape(), (3, 1));
        let bad = dir.join("b.jsonl");
        std::fs::write(&bad, "{\"a\": 1}\n{\"a\": 2}\n{\"a\": oops}\n").expect("write");
        let bad = bad.display().to_string();
        let schema = Schema::new(vec![("a".into(), DType::Int64)]);
        let e = read(&schema, &bad, 0, 1000, None).expect_err("bad line");
        assert!(e.message.contains("line 3"), "{}", e.message);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
