//! Dense linear algebra on blocks, through faer (pure-Rust GEMM, QR, SVD).
//! Tasks run one per core already, so faer runs sequentially inside each.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use ndarray::{ArrayD, Axis, IxDyn};

use super::chunk::{Chunk, Nd, fmt_shape};
use super::dtype::DType;
use super::error::ArrayError;

/// A 2-d view of a block for faer: row-major for C-ordered blocks,
/// column-major for transposed ones; other layouts are copied first.
fn mat<'a, T>(a: &'a Nd<T>, owned: &'a mut Vec<T>) -> Option<MatRef<'a, T>>
where
    T: faer::traits::ComplexField + super::Elem,
{
    let (r, c) = (a.shape()[0], a.shape()[1]);
    if let Some(s) = a.as_slice() {
        return Some(MatRef::from_row_major_slice(s, r, c));
    }
    if a.t().is_standard_layout() {
        return a.as_slice_memory_order().map(|s| MatRef::from_column_major_slice(s, r, c));
    }
    *owned = a.iter().copied().collect();
    let owned: &'a Vec<T> = owned;
    Some(MatRef::from_row_major_slice(owned.as_slice(), r, c))
}

/// Shape of a block as 2-d: a vector on the left is a row, on the right a column.
fn as_2d(shape: &[usize], left: bool) -> Result<(usize, usize), ArrayError> {
    match shape {
        [n] if left => Ok((1, *n)),
        [n] => Ok((*n, 1)),
        [r, c] => Ok((*r, *c)),
        _ => Err(ArrayError::Shape(format!("matmul takes 1-d or 2-d blocks, got {}", fmt_shape(shape)))),
    }
}

/// `Σ_t a_t @ b_t` over pairs of blocks (the pieces of the contracted axis),
/// in the promoted type; vectors as in NumPy's `matmul`.
pub fn matmul_sum(a: &[Chunk], b: &[Chunk]) -> Result<Chunk, ArrayError> {
    let (Some(a0), Some(b0)) = (a.first(), b.first()) else {
        return Err(ArrayError::Value("matmul of no blocks".into()));
    };
    let (m, _) = as_2d(a0.shape(), true)?;
    let (_, n) = as_2d(b0.shape(), false)?;
    let dtype = a.iter().chain(b).fold(DType::Bool, |t, c| DType::promote(t, c.dtype()));
    let mut out_shape = Vec::new();
    if a0.ndim() == 2 {
        out_shape.push(m);
    }
    if b0.ndim() == 2 {
        out_shape.push(n);
    }
    let work = match dtype {
        DType::F32 => DType::F32,
        _ => DType::F64,
    };
    fn finish<T: super::Elem>(x: ArrayD<T>, shape: &[usize]) -> Result<Chunk, ArrayError> {
        let x = x.into_shape_with_order(IxDyn(shape)).map_err(|e| ArrayError::Shape(e.to_string()))?;
        Ok(Chunk::from_array(x))
    }
    let r = match work {
        DType::F32 => finish(gemm_sum::<f32>(a, b, m, n)?, &out_shape)?,
        _ => finish(gemm_sum::<f64>(a, b, m, n)?, &out_shape)?,
    };
    // Integer and bool products are exact in f64 up to 2^53 (NumPy's are
    // exact to 2^63); a bool product is true where any term is, as NumPy's.
    Ok(r.astype(dtype))
}

fn gemm_sum<T>(a: &[Chunk], b: &[Chunk], m: usize, n: usize) -> Result<ArrayD<T>, ArrayError>
where
    T: faer::traits::ComplexField + super::Elem + Copy + num_traits::Zero + num_traits::One,
{
    // C^T = Σ B_t^T A_t^T, computed into column-major storage, which is
    // exactly the row-major layout of C.
    let mut out: Vec<T> = vec![T::zero(); m * n];
    for (t, (x, y)) in a.iter().zip(b).enumerate() {
        let (xa, ya) = (x.cast::<T>(), y.cast::<T>());
        let (r1, k1) = as_2d(xa.shape(), true)?;
        let (k2, c2) = as_2d(ya.shape(), false)?;
        if k1 != k2 || r1 != m || c2 != n {
            return Err(ArrayError::Shape(format!(
                "blocks of shapes {} and {} cannot be multiplied",
                fmt_shape(xa.shape()),
                fmt_shape(ya.shape())
            )));
        }
        // A vector becomes a row (left) or a column (right): a new axis, no copy.
        let xa2 = if xa.ndim() == 1 { xa.insert_axis(Axis(0)) } else { xa };
        let ya2 = if ya.ndim() == 1 { ya.insert_axis(Axis(1)) } else { ya };
        let (mut ox, mut oy) = (Vec::new(), Vec::new());
        let (Some(ma), Some(mb)) = (mat(&xa2, &mut ox), mat(&ya2, &mut oy)) else {
            return Err(ArrayError::Value("internal: block without memory".into()));
        };
        let dst = MatMut::from_column_major_slice_mut(&mut out, n, m);
        let accum = if t == 0 { Accum::Replace } else { Accum::Add };
        matmul(dst, accum, mb.transpose(), ma.transpose(), T::one(), Par::Seq);
    }
    ArrayD::from_shape_vec(IxDyn(&[m, n]), out).map_err(|e| ArrayError::Shape(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_products_match_a_direct_loop() {
        let a = Chunk::from_vec(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).expect("a");
        let b = Chunk::from_vec(&[3, 2], vec![7.0, 8.0, 9.0, 10.0, 11.0, 12.0]).expect("b");
        let r = matmul_sum(std::slice::from_ref(&a), std::slice::from_ref(&b)).expect("mm");
        assert_eq!(r.to_json(), "[[58.0,64.0],[139.0,154.0]]");
        // Split along k, and a transposed (column-major) right operand.
        let a1 = crate::array::shape::slice(
            &a,
            &[
                (crate::array::shape::AxisSlice { start: 0, stop: 2, step: 1 }, false),
                (crate::array::shape::AxisSlice { start: 0, stop: 1, step: 1 }, false),
            ],
        )
        .expect("a1");
        let a2 = crate::array::shape::slice(
            &a,
            &[
                (crate::array::shape::AxisSlice { start: 0, stop: 2, step: 1 }, false),
                (crate::array::shape::AxisSlice { start: 1, stop: 3, step: 1 }, false),
            ],
        )
        .expect("a2");
        let bt = Chunk::from_vec(&[2, 3], vec![7.0, 9.0, 11.0, 8.0, 10.0, 12.0]).expect("bt");
        let b_view = crate::array::shape::transpose(&bt, &[1, 0]).expect("view");
        let b1 = crate::array::shape::slice(
            &b_view,
            &[
                (crate::array::shape::AxisSlice { start: 0, stop: 1, step: 1 }, false),
                (crate::array::shape::AxisSlice { start: 0, stop: 2, step: 1 }, false),
            ],
        )
        .expect("b1");
        let b2 = crate::array::shape::slice(
            &b_view,
            &[
                (crate::array::shape::AxisSlice { start: 1, stop: 3, step: 1 }, false),
                (crate::array::shape::AxisSlice { start: 0, stop: 2, step: 1 }, false),
            ],
        )
        .expect("b2");
        let r2 = matmul_sum(&[a1, a2], &[b1, b2]).expect("split");
        assert_eq!(r2, r);
        let i = Chunk::from_vec(&[2, 2], vec![1i64, 2, 3, 4]).expect("i");
        let v = Chunk::from_vec(&[2], vec![1i64, 1]).expect("v");
        let iv = matmul_sum(std::slice::from_ref(&i), std::slice::from_ref(&v)).expect("mv");
        assert_eq!((iv.dtype(), iv.to_json()), (DType::I64, "[3,7]".to_string()));
        let vv = matmul_sum(std::slice::from_ref(&v), std::slice::from_ref(&v)).expect("vv");
        assert_eq!(vv.ndim(), 0);
        assert!(matmul_sum(std::slice::from_ref(&a), std::slice::from_ref(&a)).is_err());
    }
}
