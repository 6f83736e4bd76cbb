//! Kernels that move elements without computing on them: transposes,
//! slices, concatenation of a grid of blocks.

use ndarray::{Axis, IxDyn, Slice};
use serde::{Deserialize, Serialize};

use super::chunk::{Chunk, Elem, Nd};

use super::error::ArrayError;
use super::error::fmt_shape;

/// Permute the axes (a view: nothing is copied).
pub fn transpose(c: &Chunk, axes: &[usize]) -> Result<Chunk, ArrayError> {
    let mut seen = vec![false; c.ndim()];
    if axes.len() != c.ndim() || axes.iter().any(|&a| a >= c.ndim() || std::mem::replace(&mut seen[a], true))
    {
        return Err(ArrayError::Value(format!("axes {axes:?} don't match array of dimension {}", c.ndim())));
    }
    Ok(crate::each_chunk!(c, a => Elem::wrap(a.clone().permuted_axes(IxDyn(axes)))))
}

/// A range along one axis of a block, with a step (negative steps count
/// from the end, as NumPy's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AxisSlice {
    pub start: usize,
    pub stop: usize,
    pub step: i64,
}

/// Slice every axis (a view); `None` drops the axis (an integer index).
pub fn slice(c: &Chunk, ranges: &[(AxisSlice, bool)]) -> Result<Chunk, ArrayError> {
    if ranges.len() != c.ndim() {
        return Err(ArrayError::Value(format!(
            "{} slices for an array of dimension {}",
            ranges.len(),
            c.ndim()
        )));
    }
    for (d, (r, _)) in ranges.iter().enumerate() {
        if r.start > r.stop || r.stop > c.shape()[d] || r.step == 0 {
            return Err(ArrayError::Value(format!(
                "slice {}..{} out of range for axis {d} of length {}",
                r.start,
                r.stop,
                c.shape()[d]
            )));
        }
    }
    fn go<T: Elem>(a: &Nd<T>, ranges: &[(AxisSlice, bool)]) -> Chunk {
        let mut v = a.clone();
        v.slice_each_axis_inplace(|ax| {
            let (r, _) = ranges[ax.axis.index()];
            Slice::new(r.start as isize, Some(r.stop as isize), r.step as isize)
        });
        for (d, (_, drop)) in ranges.iter().enumerate().rev() {
            if *drop {
                v = v.index_axis_move(Axis(d), 0);
            }
        }
        T::wrap(v)
    }
    Ok(crate::each_chunk!(c, a => go(a, ranges)))
}

/// Join a grid of blocks, given in C order with `numblocks` per axis, into
/// one chunk (the last step of `compute` on an array).
pub fn concat_grid(blocks: &[Chunk], numblocks: &[usize]) -> Result<Chunk, ArrayError> {
    let Some(first) = blocks.first() else {
        return Err(ArrayError::Value("no blocks to join".into()));
    };
    if numblocks.iter().product::<usize>() != blocks.len() {
        return Err(ArrayError::Value(format!(
            "{} blocks do not fill a grid of {numblocks:?}",
            blocks.len()
        )));
    }
    if blocks.len() == 1 {
        return Ok(first.clone());
    }
    let dtype = first.dtype();
    fn go<T: Elem>(blocks: &[Chunk], numblocks: &[usize]) -> Result<Chunk, ArrayError> {
        let mut cur: Vec<Nd<T>> = blocks.iter().map(|b| b.cast::<T>()).collect();
        for ax in (0..numblocks.len()).rev() {
            let k = numblocks[ax];
            let mut next = Vec::with_capacity(cur.len() / k.max(1));
            for group in cur.chunks(k.max(1)) {
                let views: Vec<_> = group.iter().map(|a| a.view()).collect();
                let joined = ndarray::concatenate(Axis(ax), &views).map_err(|_| {
                    ArrayError::Shape(format!(
                        "blocks of shapes {} cannot be joined along axis {ax}",
                        group.iter().map(|g| fmt_shape(g.shape())).collect::<Vec<_>>().join(", ")
                    ))
                })?;
                next.push(joined.into_shared());
            }
            cur = next;
        }
        cur.pop().map(T::wrap).ok_or_else(|| ArrayError::Value("no blocks to join".into()))
    }
    match dtype {
        super::dtype::DType::Bool => go::<bool>(blocks, numblocks),
        super::dtype::DType::I64 => go::<i64>(blocks, numblocks),
        super::dtype::DType::F32 => go::<f32>(blocks, numblocks),
        super::dtype::DType::F64 => go::<f64>(blocks, numblocks),
    }
}

/// The elements of `x` where `cond` is true, in C order, as a 1-d block.
pub fn mask(x: &Chunk, cond: &Chunk) -> Result<Chunk, ArrayError> {
    if x.shape() != cond.shape() {
        return Err(ArrayError::Shape(format!(
            "boolean index of shape {} does not match the array's shape {}",
            fmt_shape(cond.shape()),
            fmt_shape(x.shape())
        )));
    }
    let keep = cond.cast::<bool>();
    fn go<T: Elem>(a: &Nd<T>, keep: &Nd<bool>) -> Chunk {
        let v: Vec<T> = a.iter().zip(keep.iter()).filter(|(_, k)| **k).map(|(x, _)| *x).collect();
        let n = v.len();
        T::wrap(
            ndarray::ArrayD::from_shape_vec(IxDyn(&[n]), v)
                .unwrap_or_else(|_| {
                    ndarray::ArrayD::from_elem(
                        IxDyn(&[0]),
                        a.iter().next().copied().unwrap_or_else(|| T::from_bool(false)),
                    )
                })
                .into_shared(),
        )
    }
    Ok(crate::each_chunk!(x, a => go(a, &keep)))
}

/// The sorted distinct elements, as a 1-d block (NaNs last, as one, as
/// NumPy's `unique`).
pub fn unique(c: &Chunk) -> Chunk {
    fn sorted<T: Elem>(a: &Nd<T>, cmp: impl Fn(&T, &T) -> std::cmp::Ordering) -> Chunk {
        let mut v: Vec<T> = a.iter().copied().collect();
        v.sort_by(&cmp);
        v.dedup_by(|x, y| cmp(x, y) == std::cmp::Ordering::Equal);
        let n = v.len();
        match ndarray::ArrayD::from_shape_vec(IxDyn(&[n]), v) {
            Ok(x) => T::wrap(x.into_shared()),
            Err(_) => T::wrap(a.clone()),
        }
    }
    let nan_last = |x: f64, y: f64| match (x.is_nan(), y.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Greater,
        (false, true) => std::cmp::Ordering::Less,
        _ => x.total_cmp(&y),
    };
    match c {
        Chunk::Bool(a) => sorted(a, |x, y| x.cmp(y)),
        Chunk::I64(a) => sorted(a, |x, y| x.cmp(y)),
        Chunk::F32(a) => sorted(a, |x, y| nan_last(f64::from(*x), f64::from(*y))),
        Chunk::F64(a) => sorted(a, |x, y| nan_last(*x, *y)),
    }
}

/// Insert an axis of length 1 (a view).
pub fn expand_dims(c: &Chunk, axis: usize) -> Result<Chunk, ArrayError> {
    if axis > c.ndim() {
        return Err(ArrayError::Axis { axis: axis as i64, ndim: c.ndim() + 1 });
    }
    Ok(crate::each_chunk!(c, a => Elem::wrap(a.clone().insert_axis(Axis(axis)))))
}

/// The elements in C order, in `shape` (copied when the block is a view).
pub fn reshape(c: &Chunk, shape: &[usize]) -> Result<Chunk, ArrayError> {
    if shape.iter().product::<usize>() != c.len() {
        return Err(ArrayError::Shape(format!(
            "cannot reshape a block of shape {} into shape {}",
            fmt_shape(c.shape()),
            fmt_shape(shape)
        )));
    }
    fn go<T: Elem>(a: &Nd<T>, shape: &[usize]) -> Result<Chunk, ArrayError> {
        let owned = a.as_standard_layout().into_owned();
        let r = owned.into_shape_with_order(IxDyn(shape)).map_err(|e| ArrayError::Shape(e.to_string()))?;
        Ok(T::wrap(r.into_shared()))
    }
    crate::each_chunk!(c, a => go(a, shape))
}

/// The rows `keep` of a block, in that order: each row one slice copy
/// when the block is laid out by rows (`select` goes element by element).
/// A row past the block (from a peer's op) is an error, not a panic.
pub fn take_rows(c: &Chunk, keep: &[usize]) -> Result<Chunk, ArrayError> {
    if c.shape().is_empty() {
        return Err(ArrayError::Shape("rows of a 0-d block".into()));
    }
    let n = c.shape().first().copied().unwrap_or(0);
    if let Some(bad) = keep.iter().find(|&&r| r >= n) {
        return Err(ArrayError::Value(format!("row {bad} of a block of {n} rows")));
    }
    Ok(crate::each_chunk!(c, a => {
        let mut shape = a.shape().to_vec();
        match (a.as_slice(), shape.first_mut()) {
            (Some(x), Some(first)) => {
                let l: usize = a.shape()[1..].iter().product();
                let mut out = Vec::with_capacity(keep.len() * l);
                for &r in keep {
                    out.extend_from_slice(&x[r * l..(r + 1) * l]);
                }
                *first = keep.len();
                ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), out)
                    .map_or_else(|_| Chunk::from_array(a.select(ndarray::Axis(0), keep)), Chunk::from_array)
            }
            _ => Chunk::from_array(a.select(ndarray::Axis(0), keep)),
        }
    }))
}

/// The non-zero elements of a flat block whose first element is element
/// `offset` (C order) of an array of `shape`: their coordinates, `[n,
/// ndim]`, or only those along `axis` (1-d).
pub fn argwhere(c: &Chunk, offset: usize, shape: &[usize], axis: Option<usize>) -> Result<Chunk, ArrayError> {
    if c.ndim() != 1 {
        return Err(ArrayError::Value("internal: argwhere takes a flat block".into()));
    }
    let nd = shape.len();
    if axis.is_some_and(|a| a >= nd) {
        return Err(ArrayError::Value("internal: argwhere axis out of range".into()));
    }
    let flat: Vec<bool> = c.cast::<bool>().iter().copied().collect();
    let mut out = Vec::new();
    let mut coords = vec![0usize; nd];
    let mut n = 0;
    for (j, &v) in flat.iter().enumerate() {
        if !v {
            continue;
        }
        n += 1;
        let mut rest = offset.saturating_add(j);
        for d in (0..nd).rev() {
            let len = shape[d].max(1);
            coords[d] = rest % len;
            rest /= len;
        }
        match axis {
            Some(a) => out.push(coords[a] as i64),
            None => out.extend(coords.iter().map(|&x| x as i64)),
        }
    }
    let dims: Vec<usize> = if axis.is_some() { vec![n] } else { vec![n, nd] };
    let a =
        ndarray::ArrayD::from_shape_vec(IxDyn(&dims), out).map_err(|e| ArrayError::Shape(e.to_string()))?;
    Ok(Chunk::from_array(a))
}

/// Whether each element equals one of `values` (as `np.isin`: by value,
/// so `2 == 2.0`; NaN matches nothing).
pub fn isin(c: &Chunk, values: &[super::dtype::Scalar]) -> Chunk {
    use super::dtype::Scalar;
    if let Chunk::I64(x) = c {
        // Integers exactly (through f64, 2^53 + 1 would match 2^53); a
        // float value matches only where it is a whole number.
        let mut set: Vec<i64> = values
            .iter()
            .filter_map(|v| match *v {
                Scalar::Int(i) => Some(i),
                Scalar::Bool(b) => Some(i64::from(b)),
                Scalar::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Some(f as i64),
                Scalar::Float(_) => None,
            })
            .collect();
        set.sort_unstable();
        return Chunk::from_array(x.mapv(|v| set.binary_search(&v).is_ok()));
    }
    // `+ 0.0` makes -0.0 into 0.0, which total_cmp would tell apart.
    let mut set: Vec<f64> = values.iter().map(|s| s.as_f64() + 0.0).filter(|v| !v.is_nan()).collect();
    set.sort_unstable_by(f64::total_cmp);
    let x = c.cast::<f64>();
    Chunk::from_array(x.mapv(|v| set.binary_search_by(|p| p.total_cmp(&(v + 0.0))).is_ok()))
}

/// `tril`/`triu` of a 2-d block whose first element sits at `(row0,
/// col0)` of the whole matrix: zero where the column is past the `k`-th
/// diagonal (`tril`) or before it (`triu`), as `np.tril`/`np.triu`.
pub fn tri(c: &Chunk, k: i64, upper: bool, row0: usize, col0: usize) -> Result<Chunk, ArrayError> {
    if c.ndim() != 2 {
        return Err(ArrayError::Value(format!(
            "{} needs a 2-d array, got {} dimensions",
            if upper { "triu" } else { "tril" },
            c.ndim()
        )));
    }
    fn go<T: Elem>(a: &Nd<T>, k: i64, upper: bool, row0: usize, col0: usize) -> Chunk {
        let zero = T::from_bool(false);
        let mut out = a.to_owned();
        for (r, mut row) in out.outer_iter_mut().enumerate() {
            for (c, v) in row.iter_mut().enumerate() {
                // In i128: a peer's offsets cannot overflow it.
                let d = (col0 as i128 + c as i128) - (row0 as i128 + r as i128);
                let k = i128::from(k);
                if (upper && d < k) || (!upper && d > k) {
                    *v = zero;
                }
            }
        }
        T::wrap(out.into_shared())
    }
    Ok(crate::each_chunk!(c, a => go(a, k, upper, row0, col0)))
}

/// Every index of a grid, in C order.
pub fn grid(numblocks: &[usize]) -> Vec<Vec<usize>> {
    let total: usize = numblocks.iter().product();
    let mut out = Vec::with_capacity(total);
    if total == 0 {
        return out;
    }
    let mut idx = vec![0; numblocks.len()];
    loop {
        out.push(idx.clone());
        let mut d = numblocks.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < numblocks[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_taken_in_order_and_rows_past_the_block_refused() {
        let c = Chunk::from_vec(&[3, 2], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).expect("block");
        let got = take_rows(&c, &[2, 0, 2]).expect("rows");
        assert_eq!(got.to_json(), "[[4.0,5.0],[0.0,1.0],[4.0,5.0]]");
        let e = take_rows(&c, &[1, 3]).expect_err("past the block");
        assert!(e.to_string().contains("row 3 of a block of 3 rows"), "{e}");
        let scalar = Chunk::from_vec(&[], vec![1.0]).expect("0-d");
        assert!(take_rows(&scalar, &[]).is_err());
    }

    #[test]
    fn grid_transpose_and_slice() {
        let b = |v: Vec<i64>, s: &[usize]| Chunk::from_vec(s, v).expect("block");
        let grid = [
            b(vec![1, 2, 4, 5], &[2, 2]),
            b(vec![3, 6], &[2, 1]),
            b(vec![7, 8], &[1, 2]),
            b(vec![9], &[1, 1]),
        ];
        let m = concat_grid(&grid, &[2, 2]).expect("grid");
        assert_eq!(m.to_json(), "[[1,2,3],[4,5,6],[7,8,9]]");
        let t = transpose(&m, &[1, 0]).expect("t");
        assert_eq!(t.to_json(), "[[1,4,7],[2,5,8],[3,6,9]]");
        let s = slice(
            &m,
            &[
                (AxisSlice { start: 0, stop: 3, step: 2 }, false),
                (AxisSlice { start: 1, stop: 2, step: 1 }, true),
            ],
        )
        .expect("slice");
        assert_eq!(s.to_json(), "[2,8]");
        assert!(transpose(&m, &[0, 0]).is_err());
        assert!(concat_grid(&grid[..3], &[2, 2]).is_err());
    }
}
