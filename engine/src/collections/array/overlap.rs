//! Halo exchange for `map_overlap` (`da.map_overlap`): each block grows by
//! `depth` elements of its neighbours on every side, a function runs on
//! the grown blocks, and the halos are trimmed off again. At the array's
//! outer edges the `boundary` decides what the halo holds: nothing
//! (`None`, and nothing is trimmed there), the other end (`Periodic`), the
//! block's own edge mirrored (`Reflect`, Dask's: the edge element
//! included), or a constant.

use std::sync::Arc;

use super::base::{Array, Ctx, array_task, block, finish};
use crate::array::dtype::Scalar;
use crate::array::error::ArrayError;
use crate::array::op::ArrayOp;
use crate::array::shape::AxisSlice;
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::Arg;

/// What the halo holds past the array's outer edges.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum Boundary {
    None,
    Reflect,
    Periodic,
    Constant(Scalar),
}

/// Where one segment along an axis comes from: a block index along the
/// axis and a range of it, or the constant.
#[derive(Clone, Copy)]
enum Source {
    Block(usize, AxisSlice),
    Constant(usize, Scalar),
}

impl Source {
    fn len(&self) -> usize {
        match self {
            Source::Block(_, s) => s.stop - s.start,
            Source::Constant(n, _) => *n,
        }
    }
}

/// The halo lengths (before, after) of each block along each axis: what
/// `trim` takes off again.
pub type Halos = Vec<Vec<(usize, usize)>>;

/// One block's segments along one axis, and its halos' lengths.
type Laid = (Vec<Source>, (usize, usize));

/// Each block grown by `depth[d]` elements on both sides of axis `d`.
pub fn overlap(
    ctx: &Ctx,
    a: &Array,
    depth: &[usize],
    boundary: Boundary,
) -> Result<(Array, Halos), ArrayError> {
    a.known("map_overlap")?;
    let nd = a.ndim();
    if depth.len() != nd {
        return Err(ArrayError::Value(format!(
            "map_overlap: depth has {} entries for an array of dimension {nd}",
            depth.len()
        )));
    }
    for (d, &k) in depth.iter().enumerate() {
        if k == 0 {
            continue;
        }
        let smallest = a.chunks[d].iter().copied().min().unwrap_or(0);
        if k > smallest {
            return Err(ArrayError::Value(format!(
                "map_overlap: depth {k} along axis {d} is more than its smallest block ({smallest}); rechunk to larger blocks first"
            )));
        }
    }
    // The segments of each block along each axis: halo before, the block,
    // halo after; and the halos' lengths.
    let laid: Vec<Vec<Laid>> = (0..nd)
        .map(|d| {
            let sizes = &a.chunks[d];
            let n = sizes.len();
            let k = depth[d];
            (0..n)
                .map(|i| {
                    let len = sizes[i];
                    let mut segs = Vec::with_capacity(3);
                    let mut halo = (0, 0);
                    let tail = |j: usize| {
                        Source::Block(j, AxisSlice { start: sizes[j] - k, stop: sizes[j], step: 1 })
                    };
                    let head = |j: usize| Source::Block(j, AxisSlice { start: 0, stop: k, step: 1 });
                    if k > 0 {
                        if i > 0 {
                            segs.push(tail(i - 1));
                        } else {
                            match boundary {
                                Boundary::None => {}
                                Boundary::Periodic => segs.push(tail(n - 1)),
                                Boundary::Reflect => {
                                    segs.push(Source::Block(i, AxisSlice { start: 0, stop: k, step: -1 }))
                                }
                                Boundary::Constant(v) => segs.push(Source::Constant(k, v)),
                            }
                        }
                    }
                    halo.0 = segs.iter().map(Source::len).sum();
                    segs.push(Source::Block(i, AxisSlice { start: 0, stop: len, step: 1 }));
                    let before = segs.len();
                    if k > 0 {
                        if i + 1 < n {
                            segs.push(head(i + 1));
                        } else {
                            match boundary {
                                Boundary::None => {}
                                Boundary::Periodic => segs.push(head(0)),
                                Boundary::Reflect => segs.push(Source::Block(
                                    i,
                                    AxisSlice { start: len - k, stop: len, step: -1 },
                                )),
                                Boundary::Constant(v) => segs.push(Source::Constant(k, v)),
                            }
                        }
                    }
                    halo.1 = segs[before..].iter().map(Source::len).sum();
                    (segs, halo)
                })
                .collect()
        })
        .collect();
    let segments: Vec<Vec<&Vec<Source>>> =
        laid.iter().map(|axis| axis.iter().map(|(s, _)| s).collect()).collect();
    let mut t = Tokenizer::new();
    t.str("overlap").str(&a.name).serde(&(depth, boundary));
    let tok = t.finish();
    let name = format!("overlap-{tok}");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let fill: Arc<str> = Arc::from(format!("overlap-fill-{tok}"));
    let mut tasks = Vec::new();
    for idx in a.block_indices() {
        let per_axis: Vec<&Vec<Source>> = (0..nd).map(|d| segments[d][idx[d]]).collect();
        let numblocks: Vec<usize> = per_axis.iter().map(|s| s.len()).collect();
        let mut deps: Vec<Key> = Vec::new();
        let mut pieces: Vec<Vec<AxisSlice>> = Vec::new();
        for (p, choice) in crate::array::shape::grid(&numblocks).into_iter().enumerate() {
            let segs: Vec<Source> = choice.iter().enumerate().map(|(d, &c)| per_axis[d][c]).collect();
            let whole = |n: usize| AxisSlice { start: 0, stop: n, step: 1 };
            let constant = segs.iter().find_map(|s| match s {
                Source::Constant(_, v) => Some(*v),
                Source::Block(..) => None,
            });
            if let Some(value) = constant {
                // A corner or edge past the array: the constant, made here.
                let shape: Vec<usize> = segs.iter().map(Source::len).collect();
                let mut key_idx = idx.clone();
                key_idx.push(p);
                let key = block(&fill, &key_idx);
                tasks.push(array_task(
                    ctx,
                    key.clone(),
                    ArrayOp::Full { shape: shape.clone(), value, dtype: a.dtype },
                    Vec::new(),
                    Vec::new(),
                ));
                deps.push(key);
                pieces.push(shape.iter().map(|&n| whole(n)).collect());
                continue;
            }
            // No constant here: every segment is a block's range.
            let (src, ranges): (Vec<usize>, Vec<AxisSlice>) = segs
                .iter()
                .filter_map(|s| match s {
                    Source::Block(j, r) => Some((*j, *r)),
                    Source::Constant(..) => None,
                })
                .unzip();
            deps.push(a.block_key(&src));
            pieces.push(ranges);
        }
        let args = (0..deps.len() as u32).map(Arg::Dep).collect();
        tasks.push(array_task(
            ctx,
            block(&key_name, &idx),
            ArrayOp::Rechunk { pieces, numblocks },
            args,
            deps,
        ));
    }
    let halos: Halos = laid.iter().map(|axis| axis.iter().map(|(_, h)| *h).collect()).collect();
    let chunks: Vec<Vec<usize>> = segments
        .iter()
        .map(|axis| axis.iter().map(|segs| segs.iter().map(Source::len).sum()).collect())
        .collect();
    Ok((finish(name, tasks, vec![a.layer.clone()], chunks, a.dtype), halos))
}

/// Take each block's halos off again (after the function ran on them).
pub fn trim(ctx: &Ctx, a: &Array, halos: &Halos) -> Result<Array, ArrayError> {
    a.known("map_overlap")?;
    if halos.len() != a.ndim() || halos.iter().zip(a.chunks.iter()).any(|(h, c)| h.len() != c.len()) {
        return Err(ArrayError::Value(
            "map_overlap: the function changed the number of dimensions or blocks".into(),
        ));
    }
    let mut chunks = Vec::with_capacity(a.ndim());
    for (d, sizes) in a.chunks.iter().enumerate() {
        let mut out = Vec::with_capacity(sizes.len());
        for (i, &n) in sizes.iter().enumerate() {
            let (b, e) = halos[d][i];
            if b + e > n {
                return Err(ArrayError::Value(format!(
                    "map_overlap: a block of length {n} along axis {d} is shorter than its halos ({b} + {e})"
                )));
            }
            out.push(n - b - e);
        }
        chunks.push(out);
    }
    let mut t = Tokenizer::new();
    t.str("trim").str(&a.name).serde(halos);
    let name = t.name("trim");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let tasks = a
        .block_indices()
        .into_iter()
        .map(|idx| {
            let ranges: Vec<(AxisSlice, bool)> = idx
                .iter()
                .enumerate()
                .map(|(d, &i)| {
                    let (b, _) = halos[d][i];
                    (AxisSlice { start: b, stop: b + chunks[d][i], step: 1 }, false)
                })
                .collect();
            array_task(
                ctx,
                block(&key_name, &idx),
                ArrayOp::Slice(ranges),
                vec![Arg::Dep(0)],
                vec![a.block_key(&idx)],
            )
        })
        .collect();
    Ok(finish(name, tasks, vec![a.layer.clone()], chunks, a.dtype))
}
