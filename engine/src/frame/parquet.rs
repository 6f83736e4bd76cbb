//! Parquet as a partitioned frame, as Dask's `read_parquet`: one partition
//! per row group, the schema from the footer (no data read when the frame
//! is built), and only the needed columns read. `to_parquet` writes one
//! file per partition that pandas and pyarrow read back.

use std::fs::File;

use polars::prelude::*;

use super::dtype::{DType, Schema};
use crate::error::TaskError;

#[derive(Debug, thiserror::Error)]
pub enum ParquetError {
    #[error("cannot read {path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("read_parquet: {0}")]
    Bad(String),
}

fn open(path: &str) -> Result<File, ParquetError> {
    File::open(path).map_err(|error| ParquetError::Io { path: path.into(), error })
}

fn first_line(e: &PolarsError) -> String {
    e.to_string().lines().find(|l| !l.trim().is_empty()).unwrap_or("bad file").trim().to_string()
}

/// A file's schema (normalized to brisk types) and its row groups' sizes.
pub fn inspect(path: &str) -> Result<(Schema, Vec<u64>), ParquetError> {
    let bad = |e: &PolarsError| {
        ParquetError::Bad(format!("{path} is not a Parquet file brisk can read: {}", first_line(e)))
    };
    let mut r = ParquetReader::new(open(path)?);
    let groups: Vec<u64> =
        r.get_metadata().map_err(|e| bad(&e))?.row_groups.iter().map(|g| g.num_rows() as u64).collect();
    let empty = ParquetReader::new(open(path)?).with_slice(Some((0, 0))).finish().map_err(|e| bad(&e))?;
    let mut cols = Vec::new();
    for (name, dt) in empty.schema().iter() {
        let t = DType::of_polars(dt).ok_or_else(|| {
            ParquetError::Bad(format!(
                "{path}: column \"{name}\" has type {dt}, which brisk frames do not hold yet"
            ))
        })?;
        cols.push((name.to_string(), t));
    }
    Ok((Schema::new(cols), groups))
}

/// Rows `[offset, offset + len)` of a file (one row group), only `columns`.
pub fn read(
    path: &str,
    offset: u64,
    len: u64,
    columns: Option<&[String]>,
    schema: &Schema,
) -> Result<DataFrame, TaskError> {
    let f = File::open(path).map_err(|e| TaskError::user(format!("cannot read {path}: {e}")))?;
    let df = ParquetReader::new(f)
        .with_columns(columns.map(<[String]>::to_vec))
        .with_slice(Some((offset as usize, len as usize)))
        .finish()
        .map_err(|e| TaskError::user(format!("read_parquet: {path}: {}", first_line(&e))))?;
    normalize(df, schema).map_err(|e| TaskError::user(format!("read_parquet: {path}: {}", first_line(&e))))
}

/// Cast columns to the brisk types of `schema` (an `i32` column becomes
/// `int64`, a date or a datetime of any unit nanoseconds).
pub fn normalize(mut df: DataFrame, schema: &Schema) -> PolarsResult<DataFrame> {
    let names: Vec<String> = df.get_column_names().iter().map(|c| c.to_string()).collect();
    for name in names {
        if let Some(t) = schema.get(&name) {
            let want = t.to_polars();
            if df.column(&name)?.dtype() != &want {
                let c = df.column(&name)?.cast(&want)?;
                df.replace(&name, c)?;
            }
        }
    }
    Ok(df)
}

/// Write one partition (snappy, with statistics, as pyarrow's defaults).
pub fn write(path: &str, df: &mut DataFrame) -> Result<(), TaskError> {
    let f = File::create(path).map_err(|e| TaskError::user(format!("cannot write {path}: {e}")))?;
    ParquetWriter::new(f)
        .with_compression(ParquetCompression::Snappy)
        .finish(df)
        .map(|_| ())
        .map_err(|e| TaskError::user(format!("cannot write {path}: {}", first_line(&e))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_round_trip_by_row_group() {
        let p = std::env::temp_dir().join(format!("brisk-pq-{}.parquet", std::process::id()));
        let p = p.display().to_string();
        let mut df = df!("a" => [1i32, 2, 3], "s" => [Some("x"), None, Some("z")]).expect("df");
        write(&p, &mut df).expect("write");
        let (schema, groups) = inspect(&p).expect("inspect");
        assert_eq!(schema.cols, vec![("a".into(), DType::Int64), ("s".into(), DType::Str)]);
        assert_eq!(groups.iter().sum::<u64>(), 3);
        let back = read(&p, 1, 2, Some(&["a".to_string()]), &schema).expect("read");
        assert_eq!(back.shape(), (2, 1));
        assert_eq!(back.column("a").expect("a").dtype(), &DataType::Int64);
        std::fs::write(&p, b"not parquet").expect("overwrite");
        let e = inspect(&p).expect_err("bad file");
        assert!(e.to_string().contains("is not a Parquet file"), "{e}");
    }
}
