//! A frame partition as an array block (`ArrayOp::FromFrame`, for
//! `collections::frame::to_array`), and an array's row block as a frame
//! partition (`FrameOp::FromBlock`, for `from_dask_array`).

use polars::prelude::{DataFrame as PolarsFrame, DataType};

use crate::array::chunk::Chunk;
use crate::array::dtype::DType;
use crate::array::error::ArrayError;

/// One partition as a block (`ArrayOp::FromFrame`): its columns cast to
/// `dtype` and interleaved into rows. A missing value is NaN in a float
/// block and an error in an integer or bool one (NumPy has no missing
/// integer either).
pub fn frame_block(f: &PolarsFrame, dtype: DType, rows: usize, flat: bool) -> Result<Chunk, ArrayError> {
    let (n, p) = (f.height(), f.width());
    if n != rows {
        return Err(ArrayError::Shape(format!(
            "a partition of {n} rows where its lengths said {rows} (did the data change since?)"
        )));
    }
    if flat && p != 1 {
        return Err(ArrayError::Shape(format!("a 1-d block from a frame of {p} columns")));
    }
    crate::memory::check((n as u64).saturating_mul(p as u64).saturating_mul(8), || {
        format!("an array block of {n} rows × {p} columns")
    })?;
    let cast = |col: &polars::prelude::Column, to: &DataType| {
        col.cast(to).map_err(|e| ArrayError::Value(format!("column \"{}\": {e}", col.name())))
    };
    let shape: Vec<usize> = if flat { vec![n] } else { vec![n, p] };
    let missing = |name: &str| {
        ArrayError::Value(format!(
            "column \"{name}\" has missing values, which a {} array cannot hold: fillna or astype float64 first",
            dtype.name()
        ))
    };
    match dtype {
        DType::F64 | DType::F32 => {
            let mut out = vec![0.0; n * p];
            for (j, col) in f.columns().iter().enumerate() {
                let c = cast(col, &DataType::Float64)?;
                let v = c.f64().map_err(|e| ArrayError::Value(e.to_string()))?;
                for (i, x) in v.iter().enumerate() {
                    out[i * p + j] = x.unwrap_or(f64::NAN);
                }
            }
            Ok(Chunk::from_vec(&shape, out)?.astype(dtype))
        }
        DType::I64 => {
            let mut out = vec![0i64; n * p];
            for (j, col) in f.columns().iter().enumerate() {
                let c = cast(col, &DataType::Int64)?;
                let v = c.i64().map_err(|e| ArrayError::Value(e.to_string()))?;
                for (i, x) in v.iter().enumerate() {
                    out[i * p + j] = x.ok_or_else(|| missing(col.name().as_str()))?;
                }
            }
            Ok(Chunk::from_vec(&shape, out)?)
        }
        DType::Bool => {
            let mut out = vec![false; n * p];
            for (j, col) in f.columns().iter().enumerate() {
                let v = col.bool().map_err(|e| ArrayError::Value(e.to_string()))?;
                for (i, x) in v.iter().enumerate() {
                    out[i * p + j] = x.ok_or_else(|| missing(col.name().as_str()))?;
                }
            }
            Ok(Chunk::from_vec(&shape, out)?)
        }
    }
}

/// One column of a 1-d (`j` = 0) or 2-d block.
fn column<T: Copy>(a: &crate::array::chunk::Nd<T>, j: usize) -> Vec<T> {
    if a.ndim() == 2 {
        a.index_axis(ndarray::Axis(1), j).iter().copied().collect()
    } else {
        a.iter().copied().collect()
    }
}

/// A 1-d or 2-d block as a partition with `columns` (one per column of
/// the block): bools stay bool, integers int64, floats float64 (NaN kept).
pub fn block_frame(c: &Chunk, columns: &[String]) -> Result<PolarsFrame, ArrayError> {
    use polars::prelude::{IntoColumn, NamedFrom, PlSmallStr, Series};
    let shape = c.shape().to_vec();
    let (n, p) = match shape.as_slice() {
        [n] => (*n, 1),
        [n, p] => (*n, *p),
        _ => return Err(ArrayError::Shape(format!("a {}-d block is not a frame partition", shape.len()))),
    };
    if p != columns.len() {
        return Err(ArrayError::Shape(format!("a block of {p} columns for {} column names", columns.len())));
    }
    let mut cols = Vec::with_capacity(p);
    for (j, name) in columns.iter().enumerate() {
        let name: PlSmallStr = name.as_str().into();
        let s = match c {
            Chunk::Bool(a) => Series::new(name, column(a, j)),
            Chunk::I64(a) => Series::new(name, column(a, j)),
            Chunk::F32(a) => Series::new(name, column(a, j).into_iter().map(f64::from).collect::<Vec<f64>>()),
            Chunk::F64(a) => Series::new(name, column(a, j)),
        };
        cols.push(s.into_column());
    }
    PolarsFrame::new(n, cols).map_err(|e| ArrayError::Value(e.to_string()))
}
