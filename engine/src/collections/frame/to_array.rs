//! A DataFrame's columns as a 2-d array, a Series as a 1-d array: Dask's
//! `to_dask_array(lengths=True)`. An array's chunks must be known, so the
//! partitions' lengths are computed first (`lengths`, one small task per
//! partition), as Dask does; then each partition becomes one row block,
//! its columns interleaved into rows (the one copy a columnar frame needs
//! to become a row-major matrix, `frame::to_block`).

use std::sync::Arc;

use super::{DataFrame, FrameError};
use crate::array::dtype::DType;
use crate::array::op::ArrayOp;
use crate::collections::array::{Array, Ctx, array_task, block, finish};
use crate::frame::dtype::{DType as ColType, Schema};
use crate::graph::token::Tokenizer;
use crate::ops::Arg;

/// The array type of a frame's columns, as NumPy's common type: bools
/// alone stay bool, integers (and bools) become int64, any float float64.
/// Strings and datetimes have no array type here and are refused by name.
pub fn array_dtype(schema: &Schema) -> Result<DType, FrameError> {
    if schema.cols.is_empty() {
        return Err(FrameError::Invalid("a frame with no columns has no array".into()));
    }
    let mut out = DType::Bool;
    for (name, t) in &schema.cols {
        out = match (t, out) {
            (ColType::Bool, o) => o,
            (ColType::Int64, DType::Bool | DType::I64) => DType::I64,
            (ColType::Int64 | ColType::Float64, _) => DType::F64,
            (ColType::Str | ColType::Datetime, _) => {
                return Err(FrameError::DType(format!(
                    "column \"{name}\" is {}: only number and bool columns become an array (select the others out, or encode them first)",
                    t.name()
                )));
            }
        };
    }
    Ok(out)
}

/// Each partition's number of rows, as a 1-d int64 array of one value per
/// partition.
pub fn lengths(ctx: &Ctx, df: &DataFrame) -> Array {
    let (layer, parts) = df.partitions(ctx);
    let name: Arc<str> = Arc::from(format!("lengths-{}", Tokenizer::new().str(&layer.name).finish()));
    let tasks = parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            array_task(ctx, block(&name, &[i]), ArrayOp::FrameRows, vec![Arg::Dep(0)], vec![p.clone()])
        })
        .collect();
    finish(name.to_string(), tasks, vec![layer], vec![vec![1; parts.len()]], DType::I64)
}

/// The frame as an array of row blocks, one per partition of the given
/// `lengths` (from [`lengths`]; a partition of another length is an error
/// when its block is made). `flat` gives a 1-d array (a Series).
pub fn to_array(ctx: &Ctx, df: &DataFrame, lengths: &[usize], flat: bool) -> Result<Array, FrameError> {
    let dtype = array_dtype(&df.schema)?;
    let ncols = df.schema.cols.len();
    if flat && ncols != 1 {
        return Err(FrameError::Invalid(format!("a 1-d array holds one column, not {ncols}")));
    }
    if lengths.len() != df.npartitions() {
        return Err(FrameError::Invalid(format!(
            "{} lengths for {} partitions",
            lengths.len(),
            df.npartitions()
        )));
    }
    let (layer, parts) = df.partitions(ctx);
    let mut t = Tokenizer::new();
    t.str("to-array").str(&layer.name).serde(&(lengths, flat));
    let name: Arc<str> = Arc::from(format!("values-{}", t.finish()));
    let tasks = parts
        .iter()
        .zip(lengths)
        .enumerate()
        .map(|(i, (p, &rows))| {
            let idx: &[usize] = if flat { &[i] } else { &[i, 0] };
            let op = ArrayOp::FromFrame { dtype, rows, flat };
            array_task(ctx, block(&name, idx), op, vec![Arg::Dep(0)], vec![p.clone()])
        })
        .collect();
    let mut chunks = vec![lengths.to_vec()];
    if !flat {
        chunks.push(vec![ncols]);
    }
    Ok(finish(name.to_string(), tasks, vec![layer], chunks, dtype))
}
