//! The array tasks of the estimators' fits: a statistic of a block, and the
//! merge of statistics (`stats`), each a packed 1-d f64 block. They run in
//! the same graphs, on the same workers, as every other array task.

use serde::{Deserialize, Serialize};

use super::stats::{CoMoments, Moments, packed, unpacked, with_rows};
use crate::array::chunk::Chunk;
use crate::array::error::ArrayError;
use crate::value::Value;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MlOp {
    /// Column moments of a block of X (the scalers).
    Moments,
    /// Merge packed moments (the arguments).
    MergeMoments,
    /// Co-moments of the rows of a block of X, with the block of y (the
    /// second argument) appended as a last column when `with_y`.
    CoMoments { with_y: bool },
    /// Merge packed co-moments (the arguments).
    MergeCoMoments,
    /// The rows of a block that go to one part of `train_test_split`
    /// (`split::chosen_rows`).
    SplitRows { seed: u64, block: u64, n_test: usize, shuffle: bool, test: bool },
}

impl MlOp {
    /// The task group's name.
    pub fn name(&self) -> &'static str {
        match self {
            MlOp::Moments => "moments",
            MlOp::MergeMoments => "moments-merge",
            MlOp::CoMoments { .. } => "comoments",
            MlOp::MergeCoMoments => "comoments-merge",
            MlOp::SplitRows { test: true, .. } => "test-split",
            MlOp::SplitRows { test: false, .. } => "train-split",
        }
    }

    pub fn run(&self, args: &[Value]) -> Result<Value, ArrayError> {
        let blocks = args
            .iter()
            .map(|v| match v {
                Value::Array(c) => Ok(c.as_ref()),
                other => Err(ArrayError::Value(format!(
                    "{} takes array blocks, got {}",
                    self.name(),
                    other.type_name()
                ))),
            })
            .collect::<Result<Vec<&Chunk>, _>>()?;
        let out = match self {
            MlOp::Moments => {
                let [x] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                with_rows(x, |x| Moments::of(x))?.pack()
            }
            MlOp::CoMoments { with_y } => match (&blocks[..], with_y) {
                ([x], false) => with_rows(x, |x| CoMoments::of(x, None))??.pack(),
                ([x, y], true) => with_rows(x, |x| with_rows(y, |y| CoMoments::of(x, Some(y))))???.pack(),
                _ => return Err(arity(self, 1 + usize::from(*with_y), blocks.len())),
            },
            MlOp::MergeMoments => merge(&blocks, Moments::unpack, |a, b| a.merge(b))?.pack(),
            MlOp::MergeCoMoments => merge(&blocks, CoMoments::unpack, |a, b| a.merge(b))?.pack(),
            MlOp::SplitRows { seed, block, n_test, shuffle, test } => {
                let [a] = blocks[..] else { return Err(arity(self, 1, blocks.len())) };
                let rows = a.shape().first().copied().unwrap_or(0);
                let keep = super::split::chosen_rows(rows, *n_test, *seed, *block, *shuffle, *test);
                return Ok(Value::array(take_rows(a, &keep)));
            }
        };
        Ok(Value::array(packed(out)))
    }
}

/// The rows `keep` of a block, in that order.
fn take_rows(c: &Chunk, keep: &[usize]) -> Chunk {
    crate::each_chunk!(c, a => Chunk::from_array(a.select(ndarray::Axis(0), keep)))
}

fn arity(op: &MlOp, want: usize, got: usize) -> ArrayError {
    ArrayError::Value(format!("{} takes {want} block(s), got {got}", op.name()))
}

fn merge<S>(
    blocks: &[&Chunk],
    unpack: fn(&[f64]) -> Result<S, ArrayError>,
    with: fn(&S, &S) -> Result<S, ArrayError>,
) -> Result<S, ArrayError> {
    let mut it = blocks.iter();
    let first = it.next().ok_or_else(|| ArrayError::Value("nothing to merge".into()))?;
    let mut acc = unpack(&unpacked(first))?;
    for b in it {
        acc = with(&acc, &unpack(&unpacked(b))?)?;
    }
    Ok(acc)
}
