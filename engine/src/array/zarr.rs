//! Zarr v3 stores on the file system, through `zarrs`: the metadata is read
//! when a lazy array is made, each block task reads or writes only its own
//! region, so stores larger than memory stream through.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use ndarray::{ArrayD, IxDyn};
use zarrs::array::{Array as ZArray, ArrayBuilder, ArraySubset, data_type};
use zarrs::filesystem::FilesystemStore;

use super::chunk::Chunk;

use super::dtype::DType;
use super::error::ArrayError;
use super::error::fmt_shape;

/// What a store's metadata says.
#[derive(Clone, Debug, PartialEq)]
pub struct Info {
    pub shape: Vec<usize>,
    /// The store's own chunk shape (brisk's default blocks).
    pub chunk_shape: Vec<usize>,
    pub dtype: DType,
}

fn open(path: &Path) -> Result<ZArray<FilesystemStore>, ArrayError> {
    if !path.join("zarr.json").is_file() {
        return Err(ArrayError::Value(format!(
            "{} is not a Zarr v3 array (no zarr.json in it)",
            path.display()
        )));
    }
    let store = FilesystemStore::new(path)
        .map_err(|e| ArrayError::Value(format!("cannot open the Zarr store {}: {e}", path.display())))?;
    ZArray::open(Arc::new(store), "/")
        .map_err(|e| ArrayError::Value(format!("cannot open the Zarr array {}: {e}", path.display())))
}

/// The data type's Zarr name (`float64`; zarrs prints `float64 / <f8`).
fn type_name(a: &ZArray<FilesystemStore>) -> String {
    let full = a.data_type().to_string();
    full.split(" / ").next().unwrap_or(&full).to_string()
}

/// The element types brisk loads (smaller integers widen to i64, half
/// floats to f32).
fn dtype_of(name: &str) -> Option<DType> {
    Some(match name {
        "float64" => DType::F64,
        "float32" | "float16" => DType::F32,
        "int64" | "int32" | "int16" | "int8" | "uint32" | "uint16" | "uint8" => DType::I64,
        "bool" => DType::Bool,
        _ => return None,
    })
}

/// Read a store's metadata.
pub fn info(path: &Path) -> Result<Info, ArrayError> {
    let a = open(path)?;
    let name = type_name(&a);
    let dtype = dtype_of(&name).ok_or_else(|| {
        ArrayError::Value(format!(
            "{}: Zarr data type {name} is not supported (floats, integers, bool)",
            path.display()
        ))
    })?;
    let shape: Vec<usize> = a.shape().iter().map(|&n| n as usize).collect();
    let zeros = vec![0u64; shape.len()];
    let chunk_shape =
        a.chunk_shape_usize(&zeros).map_err(|e| ArrayError::Value(format!("{}: {e}", path.display())))?;
    Ok(Info { shape, chunk_shape, dtype })
}

fn region(ranges: &[Range<usize>]) -> (ArraySubset, Vec<usize>) {
    let r: Vec<Range<u64>> = ranges.iter().map(|r| r.start as u64..r.end as u64).collect();
    (ArraySubset::new_with_ranges(&r), ranges.iter().map(|r| r.end - r.start).collect())
}

/// Read one region (a block) of a store.
pub fn read(path: &Path, ranges: &[Range<usize>]) -> Result<Chunk, ArrayError> {
    let a = open(path)?;
    let (subset, shape) = region(ranges);
    let name = type_name(&a);
    let fail =
        |e: zarrs::array::ArrayError| ArrayError::Value(format!("cannot read {}: {e}", path.display()));
    let sh = IxDyn(&shape);
    let bad = |e: ndarray::ShapeError| ArrayError::Shape(e.to_string());
    macro_rules! widen {
        ($t:ty) => {{
            let v: Vec<$t> = a.retrieve_array_subset(&subset).map_err(fail)?;
            Chunk::from_array(
                ArrayD::from_shape_vec(sh, v.into_iter().map(i64::from).collect()).map_err(bad)?,
            )
        }};
    }
    macro_rules! direct {
        ($t:ty) => {
            Chunk::from_array(
                ArrayD::from_shape_vec(sh, a.retrieve_array_subset::<Vec<$t>>(&subset).map_err(fail)?)
                    .map_err(bad)?,
            )
        };
    }
    Ok(match name.as_str() {
        "float64" => direct!(f64),
        "float32" => direct!(f32),
        "float16" => {
            let v: Vec<half::f16> = a.retrieve_array_subset(&subset).map_err(fail)?;
            Chunk::from_array(
                ArrayD::from_shape_vec(sh, v.into_iter().map(half::f16::to_f32).collect()).map_err(bad)?,
            )
        }
        "bool" => direct!(bool),
        "int64" => direct!(i64),
        "int32" => widen!(i32),
        "int16" => widen!(i16),
        "int8" => widen!(i8),
        "uint32" => widen!(u32),
        "uint16" => widen!(u16),
        "uint8" => widen!(u8),
        other => {
            return Err(ArrayError::Value(format!(
                "{}: Zarr data type {other} is not supported",
                path.display()
            )));
        }
    })
}

/// Create an empty store (metadata only) for an array of `shape` cut into
/// `chunk_shape` chunks, zstd-compressed as zarr-python's default. `path`
/// is a new or empty folder (`to_zarr` writes into a staging folder and
/// renames it into place), never one that holds anything.
pub fn create(path: &Path, shape: &[usize], chunk_shape: &[usize], dtype: DType) -> Result<(), ArrayError> {
    let fail = |e: &dyn std::fmt::Display| {
        ArrayError::Value(format!("cannot write the Zarr store {}: {e}", path.display()))
    };
    if path.read_dir().is_ok_and(|mut d| d.next().is_some()) {
        return Err(ArrayError::Value(format!(
            "{} is not empty; not writing a Zarr store into it",
            path.display()
        )));
    }
    std::fs::create_dir_all(path).map_err(|e| fail(&e))?;
    let store = Arc::new(FilesystemStore::new(path).map_err(|e| fail(&e))?);
    let shape64: Vec<u64> = shape.iter().map(|&n| n as u64).collect();
    let chunks64: Vec<u64> = chunk_shape.iter().map(|&n| n.max(1) as u64).collect();
    let (dt, fill) = match dtype {
        DType::F64 => (data_type::float64(), zarrs::array::FillValue::from(0.0f64)),
        DType::F32 => (data_type::float32(), zarrs::array::FillValue::from(0.0f32)),
        DType::I64 => (data_type::int64(), zarrs::array::FillValue::from(0i64)),
        DType::Bool => (data_type::bool(), zarrs::array::FillValue::from(false)),
    };
    let mut builder = ArrayBuilder::new(shape64, chunks64.as_slice(), dt, fill);
    builder.bytes_to_bytes_codecs(vec![Arc::new(zarrs::array::codec::ZstdCodec::new(3, false))]);
    let array = builder.build(store, "/").map_err(|e| fail(&e))?;
    array.store_metadata().map_err(|e| fail(&e))
}

/// Write one block at `start` into a store made by `create`.
pub fn write(path: &Path, start: &[usize], block: &Chunk) -> Result<(), ArrayError> {
    // A store that is gone (its write abandoned) is not made again here.
    let a =
        open(path).map_err(|e| ArrayError::Value(format!("cannot write into {}: {e}", path.display())))?;
    let ranges: Vec<Range<usize>> = start.iter().zip(block.shape()).map(|(&s, &n)| s..s + n).collect();
    let (subset, _) = region(&ranges);
    let fail = |e: zarrs::array::ArrayError| {
        ArrayError::Value(format!(
            "cannot write block {} at {start:?} into {}: {e}",
            fmt_shape(block.shape()),
            path.display()
        ))
    };
    let c = block.to_contiguous();
    match &c {
        Chunk::F64(x) => a.store_array_subset(&subset, x.as_slice().unwrap_or(&[])).map_err(fail),
        Chunk::F32(x) => a.store_array_subset(&subset, x.as_slice().unwrap_or(&[])).map_err(fail),
        Chunk::I64(x) => a.store_array_subset(&subset, x.as_slice().unwrap_or(&[])).map_err(fail),
        Chunk::Bool(x) => a.store_array_subset(&subset, x.as_slice().unwrap_or(&[])).map_err(fail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_round_trip_block_by_block() {
        let dir = std::env::temp_dir().join(format!("brisk-zarr-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let p = dir.join("a.zarr");
        create(&p, &[5, 4], &[2, 3], DType::F64).expect("create");
        let v: Vec<f64> = (0..20).map(f64::from).collect();
        let whole = Chunk::from_vec(&[5, 4], v).expect("whole");
        // Two writes that each cover parts of several chunks.
        let top = crate::array::shape::slice(
            &whole,
            &[
                (crate::array::shape::AxisSlice { start: 0, stop: 3, step: 1 }, false),
                (crate::array::shape::AxisSlice { start: 0, stop: 4, step: 1 }, false),
            ],
        )
        .expect("top");
        let bottom = crate::array::shape::slice(
            &whole,
            &[
                (crate::array::shape::AxisSlice { start: 3, stop: 5, step: 1 }, false),
                (crate::array::shape::AxisSlice { start: 0, stop: 4, step: 1 }, false),
            ],
        )
        .expect("bottom");
        write(&p, &[0, 0], &top).expect("top");
        write(&p, &[3, 0], &bottom).expect("bottom");
        let i = info(&p).expect("info");
        assert_eq!((i.shape.clone(), i.chunk_shape.clone(), i.dtype), (vec![5, 4], vec![2, 3], DType::F64));
        assert_eq!(read(&p, &[0..5, 0..4]).expect("read"), whole);
        assert_eq!(read(&p, &[1..2, 2..4]).expect("part").to_json(), "[[6.0,7.0]]");
        let e = info(&dir.join("missing.zarr")).expect_err("missing");
        assert!(e.to_string().contains("is not a Zarr v3 array"), "{e}");
        // Never a store over a folder that holds something.
        let e = create(&p, &[2], &[2], DType::F64).expect_err("not empty");
        assert!(e.to_string().contains("is not empty"), "{e}");
        std::fs::remove_dir_all(&dir).expect("clean");
    }
}
