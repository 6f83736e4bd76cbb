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

/// The first line of a file (its header), without the line end, however
/// long it is.
fn first_line(path: &str) -> Result<String, CsvError> {
    let io = |error| CsvError::Io { path: path.into(), error };
    let mut f = std::io::BufReader::new(crate::io::decoded(path).map_err(io)?);
    let mut buf = Vec::new();
    std::io::BufRead::read_until(&mut f, b'\n', &mut buf).map_err(io)?;
    let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    Ok(String::from_utf8_lossy(line).into_owned())
}

/// pandas' missing-value tokens as polars takes them.
fn na_values() -> NullValues {
    NullValues::AllColumns(super::cells::NA_TOKENS.iter().map(|t| PlSmallStr::from_static(t)).collect())
}

/// Infer the schema from the start of `first`, and check that every other
/// file has the same header. `dtypes` overrides inferred types; without a
/// header, columns are named `0, 1, 2, …` (as pandas' `header=None`). The
/// sample is read as text and each column typed by pandas' rules
/// (`cells::infer`): its NA tokens are missing values, not text.
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
    let text = |b: &[u8]| {
        options(&CsvSpec { sep, header, schema: Schema::default() })
            .with_has_header(header)
            .with_infer_schema_length(Some(0))
            .map_parse_options(|p| p.with_null_values(Some(na_values())))
            .into_reader_with_file_handle(Cursor::new(b))
            .finish()
    };
    let df = text(&sample).map_err(|e| {
        // The line at fault: bisect the rows, each run read under the header.
        let head = if header { line_at(&sample, 0) } else { &[][..] };
        let rows = &sample[head.len()..];
        match bad_line(rows, |b| text(&[head, b].concat()).is_err()) {
            Some(i) => {
                CsvError::Bad(format!("{first}, line {}: {}", i + 1 + usize::from(header), message(&e, sep)))
            }
            None => CsvError::Bad(format!("{first}: {}", message(&e, sep))),
        }
    })?;
    let mut cols = Vec::new();
    for (i, c) in df.columns().iter().enumerate() {
        let name = if header { c.name().to_string() } else { i.to_string() };
        let t = match c.str() {
            Ok(ca) => super::cells::infer(ca.iter()),
            Err(_) => DType::Str,
        };
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

/// The first `SAMPLE_BYTES` of a file, cut after its last whole line, for
/// inferring column types (CSV and JSON lines). A first line longer than
/// that (a wide header, a long record) is read whole, never cut.
pub(crate) fn sample_of(path: &str) -> std::io::Result<Vec<u8>> {
    let mut f = crate::io::decoded(path)?;
    let mut sample = Vec::new();
    (&mut f).take(SAMPLE_BYTES as u64).read_to_end(&mut sample)?;
    if sample.len() < SAMPLE_BYTES {
        return Ok(sample);
    }
    match sample.iter().rposition(|&b| b == b'\n') {
        Some(cut) => sample.truncate(cut + 1),
        None => {
            let mut rest = std::io::BufReader::new(f);
            std::io::BufRead::read_until(&mut rest, b'\n', &mut sample)?;
        }
    }
    Ok(sample)
}

fn first_line_of(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim()
}

/// Parse one block's bytes (no header) into the columns `columns`, as
/// polars parses each type: the fast path, which knows only empty cells
/// as missing (`read` mends the rest and falls back to `parse_text`).
pub(crate) fn parse(spec: &CsvSpec, bytes: &[u8], columns: Option<&[String]>) -> PolarsResult<DataFrame> {
    let mut o = options(spec)
        .with_has_header(false)
        .with_schema(Some(polars_schema(spec)))
        .with_raise_if_empty(false);
    if let Some(cols) = columns {
        o = o.with_columns(Some(cols.iter().map(|c| PlSmallStr::from(c.as_str())).collect()));
    }
    o.into_reader_with_file_handle(Cursor::new(bytes)).finish()
}

/// Why a block did not parse by pandas' rules.
enum TextError {
    /// The tokenizer's complaint (a row wider than the header, bad quoting).
    Polars(PolarsError),
    /// A cell that is not of its column's type.
    Cell { column: String, t: DType, cell: super::cells::BadCell },
}

/// Parse one block's bytes by pandas' rules: every column read as text
/// with the NA tokens missing, then converted to its type (`cells`), so
/// that `" 1 "`, `Infinity` and `NA` read as pandas reads them. Slower
/// than `parse`; used where that fails.
fn parse_text(spec: &CsvSpec, bytes: &[u8], columns: Option<&[String]>) -> Result<DataFrame, TextError> {
    let text: polars::prelude::Schema =
        spec.schema.cols.iter().map(|(n, _)| Field::new(n.as_str().into(), DataType::String)).collect();
    let df = options(spec)
        .with_has_header(false)
        .with_schema(Some(Arc::new(text)))
        .with_raise_if_empty(false)
        .map_parse_options(|p| p.with_null_values(Some(na_values())))
        .into_reader_with_file_handle(Cursor::new(bytes))
        .finish()
        .map_err(TextError::Polars)?;
    let wanted: Vec<(String, DType)> = match columns {
        Some(cols) => cols.iter().filter_map(|c| spec.schema.get(c).map(|t| (c.clone(), t))).collect(),
        None => spec.schema.cols.clone(),
    };
    let mut out = Vec::with_capacity(wanted.len());
    for (name, t) in wanted {
        let ca = df.column(&name).and_then(|c| c.str().cloned()).map_err(TextError::Polars)?;
        let s = super::cells::convert(&ca, t).map_err(|cell| TextError::Cell {
            column: name.clone(),
            t,
            cell,
        })?;
        out.push(s.into_column());
    }
    DataFrame::new_infer_height(out).map_err(TextError::Polars)
}

impl TextError {
    fn message(&self, sep: u8) -> String {
        match self {
            TextError::Polars(e) => message(e, sep),
            TextError::Cell { column, t, cell } => {
                let hint =
                    if super::cells::float(cell.text.as_bytes()).is_some() { "float64" } else { "string" };
                format!(
                    "column \"{column}\": \"{}\" is not a value of type {t} (the column's type was inferred from the start of the file); pass dtypes: #{{{column}: \"{hint}\"}} to read it",
                    cell.text
                )
            }
        }
    }
}

/// A polars CSV error in brisk's words: its first line, and the width
/// rule said plainly.
fn message(e: &PolarsError, sep: u8) -> String {
    let msg = first_line_of(&e.to_string()).to_string();
    if msg.contains("found more fields than defined") || msg.contains("does not match number of columns") {
        format!("this line has more fields than the header (separator '{}')", char::from(sep))
    } else {
        msg
    }
}

/// Read block `[start, end)` of `path`, keeping only `columns` (all when
/// `None`), in the order given. The typed parse is tried first; where it
/// fails (an NA token or spaces in a number column, `Infinity`, or a
/// value that contradicts the inferred type) the block is read again by
/// pandas' rules, and a cell that still does not fit is an error naming
/// the file, line and column.
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
    // pandas' `usecols=[]`: no columns and no rows.
    if columns.is_some_and(<[String]>::is_empty) {
        return Ok(DataFrame::empty());
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
    let df = match parse(spec, &bytes, columns) {
        Ok(df) => super::cells::na_to_null(df).map_err(|e| bad(path, None, &e.to_string()))?,
        Err(_) => match parse_text(spec, &bytes, columns) {
            Ok(df) => df,
            Err(e) => {
                let line = bad_line(&bytes, |b| parse_text(spec, b, columns).is_err());
                let (line, msg) = match line {
                    Some(i) => {
                        let before = lines_before(path, start).unwrap_or(0);
                        let n = before + i as u64 + 1 + u64::from(skipped_header);
                        // The error of that line alone names its cell.
                        let one = line_at(&bytes, i);
                        let msg = parse_text(spec, one, columns).err().unwrap_or(e).message(spec.sep);
                        (Some(n), msg)
                    }
                    None => (None, e.message(spec.sep)),
                };
                return Err(bad(path, line, &msg));
            }
        },
    };
    match columns {
        Some(cols) => df.select(cols.iter().map(|c| c.as_str())).map_err(|e| bad(path, None, &e.to_string())),
        None => Ok(df),
    }
}

/// Line `i` of `bytes` (counted as `bad_line` counts), with its line end.
fn line_at(bytes: &[u8], i: usize) -> &[u8] {
    let mut start = 0;
    for _ in 0..i {
        match bytes[start..].iter().position(|&b| b == b'\n') {
            Some(p) => start += p + 1,
            None => return &bytes[bytes.len()..],
        }
    }
    let end = bytes[start..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |p| start + p + 1);
    &bytes[start..end]
}

fn bad(path: &str, line: Option<u64>, msg: &str) -> TaskError {
    let msg = first_line_of(msg);
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
