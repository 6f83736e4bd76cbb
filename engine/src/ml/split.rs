//! `train_test_split(X, y, ...)`: scikit-learn's sizes (the test part is
//! ⌈test_size·n⌉ rows, the train part the rest), chosen block by block
//! as dask-ml's `blockwise` split does, so no row moves between blocks:
//! each block gives its share of the test rows (by largest remainder, so
//! the shares add up exactly), drawn by a permutation seeded by
//! (random_state, block). The same seed and chunking give the same rows.
//! Without shuffling, the last rows are the test part, as scikit-learn's.

use std::sync::Arc;

use super::MlError;
use super::op::MlOp;
use crate::array::op::ArrayOp;
use crate::collections::array::{Array, AxisChunks, ChunkSpec, Ctx, array_task, block, finish, rechunk};
use crate::graph::token::Tokenizer;
use crate::ops::Arg;

/// How big the test part is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TestSize {
    Fraction(f64),
    Rows(usize),
}

/// Test rows of each block of `rows` (block lengths), `n_test` in all.
pub fn shares(rows: &[usize], n_test: usize, shuffle: bool) -> Vec<usize> {
    let n: usize = rows.iter().sum();
    if !shuffle {
        // The last n_test rows of the whole.
        let cut = n - n_test;
        let mut start = 0;
        return rows
            .iter()
            .map(|&r| {
                let s = (start + r).saturating_sub(cut.max(start));
                start += r;
                s.min(r)
            })
            .collect();
    }
    let exact: Vec<f64> = rows.iter().map(|&r| n_test as f64 * r as f64 / n as f64).collect();
    let mut out: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let mut left = n_test - out.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&a, &b| {
        (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())).then(a.cmp(&b))
    });
    for i in order {
        if left == 0 {
            break;
        }
        if out[i] < rows[i] {
            out[i] += 1;
            left -= 1;
        }
    }
    out
}

/// `[a_train, a_test, b_train, b_test, ...]` for the arrays given, whose
/// rows are split alike.
pub fn train_test_split(
    ctx: &Ctx,
    arrays: &[Array],
    test_size: TestSize,
    shuffle: bool,
    seed: u64,
) -> Result<Vec<Array>, MlError> {
    let first =
        arrays.first().ok_or_else(|| MlError::Input("train_test_split: no arrays to split".into()))?;
    first.known("train_test_split")?;
    if first.ndim() == 0 {
        return Err(MlError::Input("train_test_split: cannot split a 0-d array".into()));
    }
    let n = first.shape()[0];
    let n_test = match test_size {
        TestSize::Fraction(f) if f > 0.0 && f < 1.0 => (f * n as f64).ceil() as usize,
        TestSize::Fraction(f) => {
            return Err(MlError::Input(format!(
                "train_test_split: test_size={f} must be in (0, 1) or a count of rows"
            )));
        }
        TestSize::Rows(r) => r,
    };
    if n_test == 0 || n_test >= n {
        return Err(MlError::Input(format!(
            "train_test_split: with {n} samples and a test part of {n_test}, the {} part would be empty; change test_size",
            if n_test == 0 { "test" } else { "train" }
        )));
    }
    let rows = first.chunks[0].clone();
    let test_rows = shares(&rows, n_test, shuffle);
    let mut out = Vec::with_capacity(2 * arrays.len());
    for a in arrays {
        a.known("train_test_split")?;
        if a.ndim() == 0 || a.shape()[0] != n {
            return Err(MlError::Input(format!(
                "train_test_split: the arrays must have the same number of rows, got {n} and {}",
                a.shape().first().copied().unwrap_or(0)
            )));
        }
        let a = if a.chunks[0] == rows {
            a.clone()
        } else {
            let mut spec = vec![AxisChunks::Sizes(rows.clone())];
            spec.extend(a.chunks[1..].iter().map(|c| AxisChunks::Sizes(c.clone())));
            rechunk(ctx, a, &ChunkSpec::PerAxis(spec))?
        };
        for test in [false, true] {
            out.push(part(ctx, &a, &test_rows, test, shuffle, seed)?);
        }
    }
    Ok(out)
}

fn part(
    ctx: &Ctx,
    a: &Array,
    test_rows: &[usize],
    test: bool,
    shuffle: bool,
    seed: u64,
) -> Result<Array, MlError> {
    let mut t = Tokenizer::new();
    t.str("train-test-split").str(&a.name).serde(&(test_rows, test, shuffle, seed));
    let name: Arc<str> = Arc::from(format!("{}-{}", if test { "test" } else { "train" }, t.finish()));
    let mut tasks = Vec::new();
    for idx in a.block_indices() {
        let i = idx[0];
        let op = MlOp::SplitRows { seed, block: i as u64, n_test: test_rows[i], shuffle, test };
        tasks.push(array_task(
            ctx,
            block(&name, &idx),
            ArrayOp::Ml(op),
            vec![Arg::Dep(0)],
            vec![a.block_key(&idx)],
        ));
    }
    let mut chunks = a.chunks.as_ref().clone();
    chunks[0] = a.chunks[0].iter().zip(test_rows).map(|(&r, &t)| if test { t } else { r - t }).collect();
    Ok(finish(name.to_string(), tasks, vec![a.layer.clone()], chunks, a.dtype))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_exactly() {
        let rows = [3, 3, 3, 1];
        let s = shares(&rows, 3, true);
        assert_eq!(s.iter().sum::<usize>(), 3);
        assert!(s.iter().zip(&rows).all(|(a, b)| a <= b));
        assert_eq!(shares(&rows, 3, false), [0, 0, 2, 1], "the last rows without shuffling");
        assert_eq!(shares(&[5], 2, true), [2]);
    }
}
