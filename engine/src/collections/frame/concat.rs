//! `concat([a, b, ...])`: the frames' rows one after another, their
//! partitions in order (Dask's `dd.concat` of frames without known
//! divisions). Columns are the union in order of first appearance, as
//! pandas'; a frame lacking a column gets it all missing, and each
//! partition of a frame whose columns differ is conformed to the common
//! ones by one small task (a frame that has them adds no task).

use std::sync::Arc;

use super::dataframe::{DataFrame, block};
use super::shuffle::{invalid, task};
use crate::collections::array::Ctx;
use crate::frame::dtype::{DType, Schema};
use crate::frame::error::FrameError;
use crate::frame::op::FrameOp;
use crate::graph::layer::Layer;
use crate::graph::token::Tokenizer;
use crate::ops::Arg;

/// The common type of a column that is `a` in one frame and `b` in
/// another, as pandas': integers and floats meet as floats.
fn common(name: &str, a: DType, b: DType) -> Result<DType, FrameError> {
    match (a, b) {
        (a, b) if a == b => Ok(a),
        // A category's values are strings: with a string column, strings (as pandas' object).
        (a, b) if a.values() == b.values() => Ok(a.values()),
        (DType::Int64 | DType::Float64, DType::Int64 | DType::Float64) => Ok(DType::Float64),
        _ => Err(invalid(format!(
            "concat: column \"{name}\" is {} in one frame and {} in another; make them one type first (astype)",
            a.name(),
            b.name()
        ))),
    }
}

/// The columns `frames` share once joined: the union in order of first
/// appearance, each of the common type; an integer column some frame
/// lacks becomes float64 (its missing values), as pandas'.
fn joined_schema(frames: &[DataFrame]) -> Result<Schema, FrameError> {
    let mut cols: Vec<(String, DType)> = Vec::new();
    for f in frames {
        for (name, t) in &f.schema.cols {
            match cols.iter_mut().find(|(n, _)| n == name) {
                Some((_, have)) => *have = common(name, *have, *t)?,
                None => cols.push((name.clone(), *t)),
            }
        }
    }
    for (name, t) in &mut cols {
        if *t == DType::Int64 && frames.iter().any(|f| !f.schema.contains(name)) {
            *t = DType::Float64;
        }
    }
    Ok(Schema::new(cols))
}

impl DataFrame {
    /// The rows of `frames`, one frame after another.
    pub fn concat(ctx: &Ctx, frames: &[DataFrame]) -> Result<DataFrame, FrameError> {
        if frames.is_empty() {
            return Err(invalid("concat: no frames to join"));
        }
        let schema = joined_schema(frames)?;
        let mut t = Tokenizer::new();
        t.str("concat");
        frames.iter().for_each(|f| {
            t.str(&f.token);
        });
        let name: Arc<str> = Arc::from(format!("concat-{}", t.finish()));
        let op = FrameOp::Conform(Arc::new(schema.clone()));
        let mut layers = Vec::with_capacity(frames.len());
        let mut tasks = Vec::new();
        let mut keys = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for f in frames {
            let (layer, parts) = f.partitions(ctx);
            // A frame that already has the joined columns needs no task:
            // its partitions are the result's as they are (unless it came
            // before, as in `concat([df, df])`: each part keeps its own key).
            if *f.schema == schema && parts.iter().all(|p| !seen.contains(p)) {
                seen.extend(parts.iter().cloned());
                keys.extend(parts);
                layers.push(layer);
                continue;
            }
            for p in parts {
                let key = block(&name, keys.len());
                tasks.push(task(ctx, key.clone(), op.clone(), vec![Arg::Dep(0)], vec![p]));
                keys.push(key);
            }
            layers.push(layer);
        }
        let sources: Vec<&DataFrame> = frames.iter().collect();
        Ok(DataFrame::of_keys(Layer::new(name, tasks, layers), keys, schema, "concat").inheriting(&sources))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_join_in_order_with_pandas_types() {
        let f = |cols: &[(&str, DType)]| Schema::new(cols.iter().map(|(n, t)| (n.to_string(), *t)).collect());
        let joined = |a: Schema, b: Schema| {
            let (a, b) = (
                DataFrame::of_keys(Layer::new("a", vec![], vec![]), vec![], a, "t"),
                DataFrame::of_keys(Layer::new("b", vec![], vec![]), vec![], b, "t"),
            );
            joined_schema(&[a, b])
        };
        let s = joined(
            f(&[("x", DType::Int64), ("k", DType::Str)]),
            f(&[("k", DType::Str), ("x", DType::Float64), ("n", DType::Int64), ("b", DType::Bool)]),
        )
        .expect("joins");
        assert_eq!(
            s.cols,
            [
                ("x".to_string(), DType::Float64),
                ("k".to_string(), DType::Str),
                ("n".to_string(), DType::Float64),
                ("b".to_string(), DType::Bool)
            ]
        );
        let e = joined(f(&[("x", DType::Int64)]), f(&[("x", DType::Str)])).expect_err("int and str");
        assert!(e.to_string().contains("column \"x\" is int64 in one frame and string in another"), "{e}");
    }
}
