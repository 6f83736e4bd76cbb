//! A DataFrame's columns as a 2-d array, a Series as a 1-d array: Dask's
//! `to_dask_array(lengths=True)`. An array's chunks must be known, so the
//! partitions' lengths are computed first (`lengths`, one small task per
//! partition), as Dask does; then each partition becomes one row block,
//! its columns interleaved into rows (the one copy a columnar frame needs
//! to become a row-major matrix, `frame::to_block`). And back:
//! `from_dask_array`, one partition per row block.

use std::sync::Arc;

use super::{DataFrame, FrameError};
use crate::array::dtype::DType;
use crate::array::op::ArrayOp;
use crate::collections::array::{Array, Ctx, array_task, block, finish};
use crate::frame::dtype::{DType as ColType, Schema};
use crate::frame::op::FrameOp;
use crate::graph::layer::Layer;
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
            (ColType::Str | ColType::Datetime | ColType::Category, _) => {
                return Err(FrameError::DType(format!(
                    "column \"{name}\" is {}: only number and bool columns become an array (select the others out, or encode them first)",
                    t.name()
                )));
            }
        };
    }
    Ok(out)
}

/// `from_dask_array(x, columns)`: a 1-d or 2-d array as a frame, one
/// partition per row block (blocks across the columns joined first), as
/// Dask's `dd.from_dask_array`; columns named `columns`, else 0, 1, ….
pub fn from_array(ctx: &Ctx, a: &Array, columns: Option<Vec<String>>) -> Result<DataFrame, FrameError> {
    let bad = |m: String| FrameError::Invalid(format!("from_dask_array: {m}"));
    let ncols = match a.chunks.len() {
        1 => 1,
        2 => a.chunks[1].iter().sum(),
        n => return Err(bad(format!("a {n}-d array has no frame; give a 1-d or 2-d one"))),
    };
    let columns = match columns {
        Some(c) if c.len() != ncols => {
            return Err(bad(format!("{} column names for {ncols} columns", c.len())));
        }
        Some(c) => c,
        None => (0..ncols).map(|i| i.to_string()).collect(),
    };
    let mut seen = std::collections::BTreeSet::new();
    if let Some(d) = columns.iter().find(|c| !seen.insert(c.as_str())) {
        return Err(bad(format!("the column \"{d}\" is named twice")));
    }
    let a = if a.chunks.len() == 2 && a.chunks[1].len() > 1 {
        use crate::collections::array::{AxisChunks, ChunkSpec};
        let spec = ChunkSpec::PerAxis(vec![AxisChunks::Sizes(a.chunks[0].to_vec()), AxisChunks::Size(-1)]);
        crate::collections::array::rechunk(ctx, a, &spec).map_err(|e| bad(e.to_string()))?
    } else {
        a.clone()
    };
    let dtype = match a.dtype {
        DType::Bool => ColType::Bool,
        DType::I64 => ColType::Int64,
        DType::F32 | DType::F64 => ColType::Float64,
    };
    let (layer, keys) = crate::collections::Collection::partitions(&a);
    let name: Arc<str> = Arc::from(Tokenizer::new().str(&a.name).serde(&columns).name("from_dask_array"));
    let tasks = keys
        .into_iter()
        .enumerate()
        .map(|(i, k)| {
            super::shuffle::task(
                ctx,
                super::dataframe::block(&name, i),
                FrameOp::FromBlock(columns.clone()),
                vec![Arg::Dep(0)],
                vec![k],
            )
        })
        .collect::<Vec<_>>();
    let keys = (0..tasks.len()).map(|i| super::dataframe::block(&name, i)).collect();
    let schema = Schema::new(columns.into_iter().map(|c| (c, dtype)).collect());
    Ok(DataFrame::of_keys(Layer::new(name, tasks, vec![layer]), keys, schema, "from_dask_array"))
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
