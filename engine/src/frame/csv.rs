//! CSV as a partitioned frame, as Dask's `read_csv`: each file is cut into
//! blocks of `blocksize` bytes at line ends (the same cut as `read_text`),
//! the header is read once, and the column types are inferred from a
//! sample at the start of the first file when the frame is built. Every
//! block is then parsed with that schema, so a value that does not fit its
//! column is an error naming the file and line, not a silent retype.

use std::io::{Cursor, Read};
use std::sync::Arc;

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use super::dtype::{DType, Schema};
use crate::error::TaskError;
use crate::io::read_block;

/// Bytes read to infer column types (Dask's `sample=256000`).
pub const SAMPLE_BYTES: usize = 256_000;

/// How every block of one `read_csv` is parsed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CsvSpec {
    pub sep: u8,
    pub header: bool,
    /// Every column of the files, in file order, with its type.
    pub schema: Schema,
}

#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    #[error("cannot read {path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("read_csv: {0}")]
    Bad(String),
}

fn polars_schema(spec: &CsvSpec) -> SchemaRef {
    Arc::new(spec.schema.to_polars())
}

fn options(spec: &CsvSpec) -> CsvReadOptions {
    CsvReadOptions::default().map_parse_options(|p| p.with_separator(spec.sep))
}

/// The first line of a file (its header), without the line end.
fn first_line(path: &str) -> Result<String, CsvError> {
    let f = std::fs::File::open(path).map_err(|error| CsvError::Io { path: path.into(), error })?;
    let mut buf = Vec::new();
    f.take(1 << 20).read_to_end(&mut buf).map_err(|error| CsvError::Io { path: path.into(), error })?;
    let end = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
    let line = &buf[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    Ok(String::from_utf8_lossy(line).into_owned())
}

/// Infer the schema from the start of `first`, and check that every other
/// file has the same header. `dtypes` overrides inferred types; without a
/// header, columns are named `0, 1, 2, …` (as pandas' `header=None`).
pub fn infer(
    paths: &[String],
    sep: u8,
    header: bool,
    dtypes: &[(String, DType)],
) -> Result<CsvSpec, CsvError> {
    let first = &paths[0];
    let sample = sample_of(first).map_err(|error| CsvError::Io { path: first.clone(), error })?;
    if sample.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(CsvError::Bad(format!("{first} is empty (no header and no rows)")));
    }
    let df = options(&CsvSpec { sep, header, schema: Schema::default() })
        .with_has_header(header)
        .with_infer_schema_length(None)
        .into_reader_with_file_handle(Cursor::new(sample))
        .finish()
        .map_err(|e| CsvError::Bad(format!("{first}: {}", first_line_of(&e.to_string()))))?;
    let mut cols = Vec::new();
    for (i, (name, dt)) in df.schema().iter().enumerate() {
        let name = if header { name.to_string() } else { i.to_string() };
        let t = DType::of_polars(dt).unwrap_or(DType::Str);
        cols.push((name, t));
    }
    for (name, t) in dtypes {
        match cols.iter_mut().find(|(n, _)| n == name) {
            Some(c) => c.1 = *t,
            None => {
                return Err(CsvError::Bad(format!(
                    "dtypes names column \"{name}\", which {first} does not have (columns: {})",
                    cols.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
                )));
            }
        }
    }
    if header {
        let head = first_line(first)?;
        for p in &paths[1..] {
            let other = first_line(p)?;
            if other != head {
                return Err(CsvError::Bad(format!(
                    "{p} has the header \"{other}\", but {first} has \"{head}\"; all files must have the same columns"
                )));
            }
        }
    }
    Ok(CsvSpec { sep, header, schema: Schema::new(cols) })
}

/// The first `SAMPLE_BYTES` of a file, cut after its last whole line,
/// for inferring column types (CSV and JSON lines).
pub(crate) fn sample_of(path: &str) -> std::io::Result<Vec<u8>> {
    let mut sample = Vec::new();
    std::fs::File::open(path)?.take(SAMPLE_BYTES as u64).read_to_end(&mut sample)?;
    if sample.len() == SAMPLE_BYTES
        && let Some(cut) = sample.iter().rposition(|&b| b == b'\n')
    {
        sample.truncate(cut + 1);
    }
    Ok(sample)
}

fn first_line_of(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim()
}

/// Parse one block's bytes (no header) into the columns `columns`.
pub(crate) fn parse(spec: &CsvSpec, bytes: Vec<u8>, columns: Option<&[String]>) -> PolarsResult<DataFrame> {
    let mut o = options(spec)
        .with_has_header(false)
        .with_schema(Some(polars_schema(spec)))
        .with_raise_if_empty(false);
    if let Some(cols) = columns {
        o = o.with_columns(Some(cols.iter().map(|c| PlSmallStr::from(c.as_str())).collect()));
    }
    o.into_reader_with_file_handle(Cursor::new(bytes)).finish()
}

/// Read block `[start, end)` of `path`, keeping only `columns` (all when
/// `None`), in the order given.
pub fn read(
    spec: &CsvSpec,
    path: &str,
    start: u64,
    end: u64,
    columns: Option<&[String]>,
) -> Result<DataFrame, TaskError> {
    let mut bytes = read_block(path, start, end)?;
    let mut skipped_header = false;
    if start == 0 && spec.header {
        let cut = bytes.iter().position(|&b| b == b'\n').map_or(bytes.len(), |i| i + 1);
        bytes.drain(..cut);
        skipped_header = true;
    }
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        let schema = match columns {
            Some(cols) => {
                Schema::new(cols.iter().filter_map(|c| spec.schema.get(c).map(|t| (c.clone(), t))).collect())
            }
            None => spec.schema.clone(),
        };
        return Ok(DataFrame::empty_with_schema(&schema.to_polars()));
    }
    // The bytes move into the parser; on an error the block is read again
    // to find the bad line (errors are rare, blocks large).
    match parse(spec, bytes, columns) {
        Ok(df) => match columns {
            Some(cols) => df.select(cols.iter().map(|c| c.as_str())).map_err(|e| bad(path, None, &e)),
            None => Ok(df),
        },
        Err(e) => {
            let mut again = read_block(path, start, end)?;
            if skipped_header {
                let cut = again.iter().position(|&b| b == b'\n').map_or(again.len(), |i| i + 1);
                again.drain(..cut);
            }
            let line = bad_line(&again, |b| parse(spec, b.to_vec(), columns).is_err()).map(|i| {
                let before = lines_before(path, start).unwrap_or(0);
                before + i as u64 + 1 + u64::from(skipped_header)
            });
            Err(bad(path, line, &e))
        }
    }
}

fn bad(path: &str, line: Option<u64>, e: &PolarsError) -> TaskError {
    let msg = first_line_of(&e.to_string()).to_string();
    match line {
        Some(l) => TaskError::user(format!("read_csv: {path}, line {l}: {msg}")),
        None => TaskError::user(format!("read_csv: {path}: {msg}")),
    }
}

/// The number of lines that end before the block that starts at `start`.
pub(crate) fn lines_before(path: &str, start: u64) -> std::io::Result<u64> {
    if start == 0 {
        return Ok(0);
    }
    let before =
        read_block(path, 0, start.saturating_sub(1)).map_err(|e| std::io::Error::other(e.message))?;
    Ok(before.iter().filter(|&&b| b == b'\n').count() as u64)
}

/// Bisect the block's lines for the first one that fails to parse
/// (`fails` parses a run of whole lines); its index in the block.
pub(crate) fn bad_line(bytes: &[u8], fails: impl Fn(&[u8]) -> bool) -> Option<usize> {
    let mut starts = vec![0usize];
    starts.extend(bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1));
    if starts.last() == Some(&bytes.len()) {
        starts.pop();
    }
    let span = |a: usize, b: usize| -> &[u8] {
        let end = starts.get(b).copied().unwrap_or(bytes.len());
        &bytes[starts[a]..end]
    };
    let fails = |a: usize, b: usize| fails(span(a, b));
    let (mut lo, mut hi) = (0usize, starts.len());
    if !fails(lo, hi) {
        return None;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fails(lo, mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(lo)
}

/// Write one partition as CSV with a header (pandas' `to_csv(index=False)`),
/// flushed and synced so that a full disk is an error here, not a short file.
pub fn write(path: &str, df: &mut DataFrame) -> Result<(), TaskError> {
    let fail = |e: &dyn std::fmt::Display| TaskError::user(format!("cannot write {path}: {e}"));
    let mut f = std::fs::File::create(path).map_err(|e| fail(&e))?;
    let mut w = std::io::BufWriter::new(&mut f);
    CsvWriter::new(&mut w).include_header(true).finish(df).map_err(|e| fail(&e))?;
    std::io::Write::flush(&mut w).map_err(|e| fail(&e))?;
    drop(w);
    f.sync_all().map_err(|e| fail(&e))
}

/// Whether the first line of `path` is the header `write` gives a frame
/// of `schema` (to append parts to a dataset).
pub fn same_header(path: &str, schema: &Schema) -> Result<bool, CsvError> {
    let mut empty = DataFrame::empty_with_schema(&schema.to_polars());
    let mut want = Vec::new();
    CsvWriter::new(&mut want)
        .include_header(true)
        .finish(&mut empty)
        .map_err(|e| CsvError::Bad(format!("{path}: {}", first_line_of(&e.to_string()))))?;
    let want = want.strip_suffix(b"\n").unwrap_or(&want);
    Ok(first_line(path)?.as_bytes() == want)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> String {
        let dir = std::env::temp_dir().join(format!("brisk-csv-{}-{name}", std::process::id()));
        std::fs::write(&dir, text).expect("write");
        dir.display().to_string()
    }

    #[test]
    fn schema_is_inferred_and_blocks_parse_with_it() {
        let p = file("a.csv", "id,key,x\n1,a,0.5\n2,b,\n3,,1.5\n");
        let spec = infer(std::slice::from_ref(&p), b',', true, &[]).expect("infer");
        assert_eq!(
            spec.schema.cols,
            vec![("id".into(), DType::Int64), ("key".into(), DType::Str), ("x".into(), DType::Float64)]
        );
        let df = read(&spec, &p, 0, 12, None).expect("first block");
        assert_eq!(df.height(), 1);
        let df = read(&spec, &p, 12, 100, Some(&["x".to_string()])).expect("second block");
        assert_eq!(df.height(), 2);
        assert_eq!(df.width(), 1);
        assert_eq!(df.column("x").expect("x").null_count(), 1);
    }

    #[test]
    fn a_bad_value_names_file_and_line() {
        let p = file("b.csv", "id,x\n1,2\n2,3\n3,oops\n4,5\n");
        let spec = infer(std::slice::from_ref(&p), b',', true, &[("x".into(), DType::Int64)]).expect("infer");
        let e = read(&spec, &p, 0, 1000, None).expect_err("bad value");
        assert!(e.message.contains(&format!("{p}, line 4")), "{e}");
        let e = read(&spec, &p, 11, 1000, None).expect_err("bad value in a later block");
        assert!(e.message.contains("line 4"), "{e}");
    }

    #[test]
    fn headers_must_agree() {
        let a = file("c.csv", "a,b\n1,2\n");
        let b = file("d.csv", "a,c\n1,2\n");
        let e = infer(&[a, b], b',', true, &[]).expect_err("mismatch");
        assert!(e.to_string().contains("all files must have the same columns"), "{e}");
    }
}
