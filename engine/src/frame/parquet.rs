//! Parquet as a partitioned frame, as Dask's `read_parquet`: one partition
//! per row group, the schema from the footer (no data read when the frame
//! is built), and only the needed columns read. `to_parquet` writes one
//! file per partition that pandas and pyarrow read back.

use std::fs::File;
use std::sync::Arc;

use polars::prelude::*;
use polars_parquet::parquet::statistics::Statistics;

use super::dtype::{DType, Schema};
use crate::error::TaskError;
use crate::value::Value;

/// The minimum and maximum of the columns of one row group whose file
/// records them (for skipping row groups a filter cannot match).
pub type GroupStats = Vec<(String, Value, Value)>;

/// One row group: its row count and statistics.
#[derive(Clone, Debug)]
pub struct RowGroup {
    pub rows: u64,
    pub stats: Arc<GroupStats>,
}

/// A column chunk's minimum and maximum as values of the column's brisk
/// type; `None` where the file has none or they cannot be compared.
fn min_max(s: &Statistics, t: DType) -> Option<(Value, Value)> {
    Some(match (s, t) {
        (Statistics::Int64(p), DType::Int64) => (Value::Int(p.min_value?), Value::Int(p.max_value?)),
        (Statistics::Int32(p), DType::Int64) => {
            (Value::Int(i64::from(p.min_value?)), Value::Int(i64::from(p.max_value?)))
        }
        (Statistics::Double(p), DType::Float64) => (Value::Float(p.min_value?), Value::Float(p.max_value?)),
        (Statistics::Float(p), DType::Float64) => {
            (Value::Float(f64::from(p.min_value?)), Value::Float(f64::from(p.max_value?)))
        }
        (Statistics::Boolean(b), DType::Bool) => (Value::Bool(b.min_value?), Value::Bool(b.max_value?)),
        (Statistics::Binary(b), DType::Str) => (
            Value::str(std::str::from_utf8(b.min_value.as_deref()?).ok()?),
            Value::str(std::str::from_utf8(b.max_value.as_deref()?).ok()?),
        ),
        _ => return None,
    })
}

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

/// The brisk type of one column of a file's Arrow schema, or why brisk
/// refuses it. Checked before polars sees the schema: polars panics on
/// the Arrow types it has no type for (decimal256 beyond 38 digits,
/// dictionaries, structs without their features). Decimals are read as
/// float64 (pandas with pyarrow reads Python `Decimal` objects; a frame
/// has no decimal type); uint64 as float64, exact up to 2^53 and as close
/// as a float gets above it (a frame has no uint64, and int64 would wrap
/// or lose values above 2^63).
fn column_type(dt: &ArrowDataType) -> Result<DType, String> {
    use ArrowDataType as A;
    Ok(match dt {
        A::Null => DType::Float64,
        A::Boolean => DType::Bool,
        A::Int8 | A::Int16 | A::Int32 | A::Int64 | A::UInt8 | A::UInt16 | A::UInt32 => DType::Int64,
        A::UInt64 | A::Float32 | A::Float64 => DType::Float64,
        A::Decimal(p, _) | A::Decimal32(p, _) | A::Decimal64(p, _) | A::Decimal256(p, _) if *p <= 38 => {
            DType::Float64
        }
        A::Decimal256(p, s) => {
            return Err(format!(
                "is decimal256({p}, {s}); brisk reads decimals of up to 38 digits (as float64)"
            ));
        }
        A::Utf8 | A::LargeUtf8 | A::Utf8View => DType::Str,
        // pandas writes its category dtype as a dictionary of strings.
        A::Dictionary(_, values, _) if matches!(values.as_ref(), A::Utf8 | A::LargeUtf8 | A::Utf8View) => {
            DType::Category
        }
        A::Date32 | A::Date64 | A::Timestamp(_, None) => DType::Datetime,
        A::Timestamp(_, Some(tz)) => {
            return Err(format!(
                "holds timestamps in time zone {tz}; brisk frames hold datetimes without a zone and would not keep it (convert the column to UTC and drop the zone first, as pandas' tz_convert(\"UTC\").tz_localize(None))"
            ));
        }
        other => return Err(format!("has type {other:?}, which brisk frames do not hold")),
    })
}

/// A file's schema (normalized to brisk types) and its row groups.
pub fn inspect(path: &str) -> Result<(Schema, Vec<RowGroup>), ParquetError> {
    let bad = |e: &PolarsError| {
        ParquetError::Bad(format!("{path} is not a Parquet file brisk can read: {}", first_line(e)))
    };
    let mut r = ParquetReader::new(open(path)?);
    let meta = r.get_metadata().map_err(|e| bad(&e))?.clone();
    let arrow = r.schema().map_err(|e| bad(&e))?;
    let mut cols = Vec::new();
    for (name, field) in arrow.iter() {
        let t = column_type(field.dtype())
            .map_err(|why| ParquetError::Bad(format!("{path}: column \"{name}\" {why}")))?;
        cols.push((name.to_string(), t));
    }
    let schema = Schema::new(cols);
    let groups = meta
        .row_groups
        .iter()
        .map(|g| {
            let stats = g
                .parquet_columns()
                .iter()
                .filter_map(|c| {
                    let [name] = c.descriptor().path_in_schema.as_slice() else { return None };
                    let t = schema.get(name)?;
                    let st = c.statistics(&meta.footer_buf)?.ok()?;
                    let (lo, hi) = min_max(&st, t)?;
                    Some((name.to_string(), lo, hi))
                })
                .collect();
            RowGroup { rows: g.num_rows() as u64, stats: Arc::new(stats) }
        })
        .collect();
    Ok((schema, groups))
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

/// The range of `datetime64[ns]`, in units of `unit` since the epoch.
fn ns_range(unit: i64) -> (i64, i64) {
    (i64::MIN / unit, i64::MAX / unit)
}

/// The first value of a date or datetime column that nanoseconds since
/// the epoch cannot hold (before 1677-09-21 or after 2262-04-11), shown.
fn out_of_ns_range(c: &Column) -> PolarsResult<Option<String>> {
    let per = match c.dtype() {
        DataType::Date => 86_400_000_000_000,
        DataType::Datetime(TimeUnit::Microseconds, _) => 1_000,
        DataType::Datetime(TimeUnit::Milliseconds, _) => 1_000_000,
        _ => return Ok(None),
    };
    let (lo, hi) = ns_range(per);
    let phys = c.as_materialized_series().to_physical_repr().cast(&DataType::Int64)?;
    let at = phys.i64()?.iter().position(|v| v.is_some_and(|v| v < lo || v > hi));
    Ok(match at {
        Some(i) => Some(c.get(i)?.to_string()),
        None => None,
    })
}

/// Cast columns to the brisk types of `schema` (an `i32` column becomes
/// `int64`, a date or a datetime of any unit nanoseconds, a decimal or a
/// `uint64` float64). A date or time that nanoseconds cannot hold is an
/// error, never a missing or a wrapped value.
pub fn normalize(mut df: DataFrame, schema: &Schema) -> PolarsResult<DataFrame> {
    let names: Vec<String> = df.get_column_names().iter().map(|c| c.to_string()).collect();
    for name in names {
        if let Some(t) = schema.get(&name) {
            let want = t.to_polars();
            let c = df.column(&name)?;
            if c.dtype() != &want {
                if let Some(v) = out_of_ns_range(c)? {
                    polars_bail!(ComputeError:
                        "column \"{name}\" holds {v}, outside the dates datetime64[ns] can hold (1677-09-21 to 2262-04-11); brisk refuses it rather than read it as missing or wrapped"
                    );
                }
                let c = c.cast(&want)?;
                df.replace(&name, c)?;
            }
        }
    }
    Ok(df)
}

/// Write one partition (snappy, with statistics, as pyarrow's defaults),
/// synced so that a full disk is an error here, not a short file.
pub fn write(path: &str, df: &mut DataFrame) -> Result<(), TaskError> {
    let fail = |e: &dyn std::fmt::Display| TaskError::user(format!("cannot write {path}: {e}"));
    let mut f = File::create(path).map_err(|e| fail(&e))?;
    ParquetWriter::new(&mut f)
        .with_compression(ParquetCompression::Snappy)
        .finish(df)
        .map_err(|e| fail(&first_line(&e)))?;
    f.sync_all().map_err(|e| fail(&e))
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
        assert_eq!(groups.iter().map(|g| g.rows).sum::<u64>(), 3);
        let st = &groups[0].stats;
        assert!(st.contains(&("a".into(), Value::Int(1), Value::Int(3))), "{st:?}");
        assert!(st.contains(&("s".into(), Value::str("x"), Value::str("z"))), "{st:?}");
        let back = read(&p, 1, 2, Some(&["a".to_string()]), &schema).expect("read");
        assert_eq!(back.shape(), (2, 1));
        assert_eq!(back.column("a").expect("a").dtype(), &DataType::Int64);
        std::fs::write(&p, b"not parquet").expect("overwrite");
        let e = inspect(&p).expect_err("bad file");
        assert!(e.to_string().contains("is not a Parquet file"), "{e}");
        std::fs::remove_file(&p).expect("clean");
    }
}
