//! Dense linear algebra on blocks, through faer (pure-Rust GEMM, QR, SVD).
//! Tasks run one per core already, so faer runs sequentially inside each.

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatMut, MatRef, Par};
use ndarray::{ArrayD, Axis, IxDyn};

use super::chunk::{Chunk, Nd};

use super::dtype::DType;
use super::error::ArrayError;
use super::error::fmt_shape;

/// A 2-d view of a block for faer: row-major for C-ordered blocks,
/// column-major for transposed ones; other layouts are copied first.
fn mat<'a, T>(a: &'a Nd<T>, owned: &'a mut Vec<T>) -> Option<MatRef<'a, T>>
where
    T: faer::traits::ComplexField + super::chunk::Elem,
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
    fn finish<T: super::chunk::Elem>(x: ArrayD<T>, shape: &[usize]) -> Result<Chunk, ArrayError> {
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
    T: faer::traits::ComplexField + super::chunk::Elem + Copy + num_traits::Zero + num_traits::One,
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

/// `Σ_t a_t @ a_tᵀ` for 2-d blocks of equal row count: the diagonal blocks of
/// `x @ x.T`. Symmetric, so only the lower triangle is multiplied (as BLAS's
/// `syrk`, which NumPy uses for `a @ a.T`) and then mirrored: half the work.
pub fn gram_sum(a: &[Chunk]) -> Result<Chunk, ArrayError> {
    let Some(a0) = a.first() else {
        return Err(ArrayError::Value("matmul of no blocks".into()));
    };
    let dtype = a.iter().fold(DType::Bool, |t, c| DType::promote(t, c.dtype()));
    let m = match a0.shape() {
        [m, _] => *m,
        s => return Err(ArrayError::Shape(format!("a Gram product takes 2-d blocks, got {}", fmt_shape(s)))),
    };
    let r = match dtype {
        DType::F32 => Chunk::from_array(gram::<f32>(a, m)?),
        _ => Chunk::from_array(gram::<f64>(a, m)?),
    };
    Ok(r.astype(dtype))
}

fn gram<T>(a: &[Chunk], m: usize) -> Result<ArrayD<T>, ArrayError>
where
    T: faer::traits::ComplexField + super::chunk::Elem + Copy + num_traits::Zero + num_traits::One,
{
    use faer::linalg::matmul::triangular::{BlockStructure, matmul as tri_matmul};
    let mut out: Vec<T> = vec![T::zero(); m * m];
    for (t, x) in a.iter().enumerate() {
        let xa = x.cast::<T>();
        if xa.ndim() != 2 || xa.shape()[0] != m {
            return Err(ArrayError::Shape(format!(
                "a Gram product of blocks with {m} rows got a block of shape {}",
                fmt_shape(xa.shape())
            )));
        }
        let mut owned = Vec::new();
        let Some(ma) = mat(&xa, &mut owned) else {
            return Err(ArrayError::Value("internal: block without memory".into()));
        };
        let dst = MatMut::from_column_major_slice_mut(&mut out, m, m);
        let accum = if t == 0 { Accum::Replace } else { Accum::Add };
        tri_matmul(
            dst,
            BlockStructure::TriangularLower,
            accum,
            ma,
            BlockStructure::Rectangular,
            ma.transpose(),
            BlockStructure::Rectangular,
            T::one(),
            Par::Seq,
        );
    }
    mirror_lower(&mut out, m);
    ArrayD::from_shape_vec(IxDyn(&[m, m]), out).map_err(|e| ArrayError::Shape(e.to_string()))
}

/// Copy the lower triangle of a column-major `m × m` matrix onto its upper
/// triangle, in tiles so both sides stay in cache.
fn mirror_lower<T: Copy>(c: &mut [T], m: usize) {
    const TILE: usize = 64;
    for jb in (0..m).step_by(TILE) {
        for ib in (jb..m).step_by(TILE) {
            for j in jb..(jb + TILE).min(m) {
                for i in ib.max(j + 1)..(ib + TILE).min(m) {
                    // (i, j) lies below the diagonal; (j, i) above it.
                    c[i * m + j] = c[j * m + i];
                }
            }
        }
    }
}

/// A block as a faer matrix of f64 (a copy).
fn to_mat(c: &Chunk) -> Result<Mat<f64>, ArrayError> {
    let a = c.cast::<f64>();
    let (r, k) = match a.shape() {
        [r, k] => (*r, *k),
        [n] => (*n, 1),
        s => return Err(ArrayError::Shape(format!("expected a matrix, got shape {}", fmt_shape(s)))),
    };
    let a2 = if a.ndim() == 1 { a.insert_axis(Axis(1)) } else { a };
    Ok(Mat::from_fn(r, k, |i, j| a2[[i, j]]))
}

/// A faer matrix as a row-major block of `dtype`.
fn from_mat(m: MatRef<'_, f64>, dtype: DType) -> Chunk {
    let (r, c) = (m.nrows(), m.ncols());
    let mut v = Vec::with_capacity(r * c);
    for i in 0..r {
        for j in 0..c {
            v.push(m[(i, j)]);
        }
    }
    let a = ArrayD::from_shape_vec(IxDyn(&[r, c]), v).unwrap_or_else(|_| ArrayD::zeros(IxDyn(&[r, c])));
    Chunk::from_array(a).astype(dtype)
}

fn vector(v: impl Iterator<Item = f64>, dtype: DType) -> Chunk {
    let v: Vec<f64> = v.collect();
    let n = v.len();
    Chunk::from_array(ArrayD::from_shape_vec(IxDyn(&[n]), v).unwrap_or_else(|_| ArrayD::zeros(IxDyn(&[0]))))
        .astype(dtype)
}

/// The float type results come in: f32 stays f32, everything else is f64.
fn float_of(c: &Chunk) -> DType {
    c.dtype().to_float()
}

/// Thin QR of one block: `[Q, R]`.
pub fn qr(c: &Chunk) -> Result<Vec<Chunk>, ArrayError> {
    let t = float_of(c);
    let m = to_mat(c)?;
    let f = m.qr();
    Ok(vec![from_mat(f.compute_thin_Q().as_ref(), t), from_mat(f.thin_R(), t)])
}

/// Stack blocks vertically (the R factors of TSQR) into one matrix.
pub fn vstack(blocks: &[Chunk]) -> Result<Chunk, ArrayError> {
    crate::array::shape::concat_grid(blocks, &[blocks.len(), 1])
}

/// Thin SVD of one block: `[U, S, Vᵀ]` with `block = U · diag(S) · Vᵀ`
/// (the third factor as NumPy and Dask return it).
pub fn svd(c: &Chunk) -> Result<Vec<Chunk>, ArrayError> {
    let t = float_of(c);
    let m = to_mat(c)?;
    let f = m.thin_svd().map_err(|e| ArrayError::Value(format!("the SVD did not converge ({e:?})")))?;
    let s = f.S().column_vector();
    Ok(vec![from_mat(f.U(), t), vector((0..s.nrows()).map(|i| s[i]), t), from_mat(f.V().transpose(), t)])
}

/// The singular values of one block, largest first (as `svd`'s second
/// factor).
pub fn singular_values(c: &Chunk) -> Result<Chunk, ArrayError> {
    let t = float_of(c);
    let s = to_mat(c)?
        .singular_values()
        .map_err(|e| ArrayError::Value(format!("the SVD did not converge ({e:?})")))?;
    Ok(vector(s.into_iter(), t))
}

/// Solve `a x = b` for a square `a` (LU with partial pivoting).
pub fn solve(a: &Chunk, b: &Chunk) -> Result<Chunk, ArrayError> {
    use faer::linalg::solvers::Solve;
    let (n, k) = (a.shape().first().copied().unwrap_or(0), a.shape().get(1).copied().unwrap_or(0));
    if a.ndim() != 2 || n != k {
        return Err(ArrayError::Shape(format!(
            "solve needs a square matrix, got shape {}",
            fmt_shape(a.shape())
        )));
    }
    if b.shape().first() != Some(&n) || b.ndim() > 2 {
        return Err(ArrayError::Shape(format!(
            "solve: shapes {} and {} do not match",
            fmt_shape(a.shape()),
            fmt_shape(b.shape())
        )));
    }
    let t = DType::promote(float_of(a), float_of(b));
    let lu = to_mat(a)?.partial_piv_lu();
    // A singular matrix shows as a zero pivot in U.
    let u = lu.U();
    if (0..n).any(|i| u[(i, i)] == 0.0) {
        return Err(ArrayError::Value("solve: the matrix is singular".into()));
    }
    let x = lu.solve(to_mat(b)?.as_ref());
    let out = from_mat(x.as_ref(), t);
    Ok(if b.ndim() == 1 { crate::array::reduce::squeeze(&out, &[1]) } else { out })
}

/// The Cholesky factor of a symmetric positive-definite matrix (read from
/// its lower triangle, as NumPy): `L` with `a = L Lᵀ`, or its transpose
/// `U = Lᵀ` (`a = Uᵀ U`, Dask's default).
pub fn cholesky(a: &Chunk, lower: bool) -> Result<Chunk, ArrayError> {
    let (n, k) = (a.shape().first().copied().unwrap_or(0), a.shape().get(1).copied().unwrap_or(0));
    if a.ndim() != 2 || n != k {
        return Err(ArrayError::Shape(format!(
            "cholesky needs a square matrix, got shape {}",
            fmt_shape(a.shape())
        )));
    }
    let m = to_mat(a)?;
    let llt = m
        .llt(faer::Side::Lower)
        .map_err(|_| ArrayError::Value("cholesky: the matrix is not positive definite".into()))?;
    let l = llt.L();
    let out = if lower { l.to_owned() } else { l.transpose().to_owned() };
    Ok(from_mat(out.as_ref(), float_of(a)))
}

/// Solve `r x = b` for an upper-triangular `r` (back substitution).
pub fn solve_upper(r: &Chunk, b: &Chunk) -> Result<Chunk, ArrayError> {
    let t = DType::promote(float_of(r), float_of(b));
    let rm = to_mat(r)?;
    let mut x = to_mat(b)?;
    if rm.nrows() != rm.ncols() || rm.nrows() != x.nrows() {
        return Err(ArrayError::Shape(format!(
            "triangular solve: shapes {} and {} do not match",
            fmt_shape(r.shape()),
            fmt_shape(b.shape())
        )));
    }
    faer::linalg::triangular_solve::solve_upper_triangular_in_place(rm.as_ref(), x.as_mut(), Par::Seq);
    let out = from_mat(x.as_ref(), t);
    Ok(if b.ndim() == 1 { crate::array::reduce::squeeze(&out, &[1]) } else { out })
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

    #[test]
    fn gram_products_equal_full_products() {
        // Odd sizes cross the mirror's tiles; two blocks along k are summed.
        let (m, k) = (131, 37);
        let v1: Vec<f64> = (0..m * k).map(|i| ((i * 7919) % 1000) as f64 / 997.0 - 0.4).collect();
        let v2: Vec<f64> = (0..m * k).map(|i| ((i * 104729) % 1000) as f64 / 991.0).collect();
        let a1 = Chunk::from_vec(&[m, k], v1).expect("a1");
        let a2 = Chunk::from_vec(&[m, k], v2).expect("a2");
        let t = |c: &Chunk| crate::array::shape::transpose(c, &[1, 0]).expect("t");
        let full = matmul_sum(&[a1.clone(), a2.clone()], &[t(&a1), t(&a2)]).expect("full");
        let g = gram_sum(&[a1.clone(), a2]).expect("gram");
        close(&g, &full, 1e-12);
        // Transposed (column-major) blocks and integers keep NumPy's dtype.
        close(
            &gram_sum(&[t(&t(&a1))]).expect("view"),
            &matmul_sum(std::slice::from_ref(&a1), &[t(&a1)]).expect("mm"),
            1e-12,
        );
        let i = Chunk::from_vec(&[2, 2], vec![1i64, 2, 3, 4]).expect("i");
        let gi = gram_sum(std::slice::from_ref(&i)).expect("int");
        assert_eq!((gi.dtype(), gi.to_json()), (DType::I64, "[[5,11],[11,25]]".to_string()));
        assert!(gram_sum(&[Chunk::from_vec(&[2], vec![1.0, 2.0]).expect("v")]).is_err());
    }

    fn close(a: &Chunk, b: &Chunk, tol: f64) {
        assert_eq!(a.shape(), b.shape());
        for (x, y) in a.cast::<f64>().iter().zip(b.cast::<f64>().iter()) {
            assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{x} vs {y}");
        }
    }

    #[test]
    fn factorizations_rebuild_their_input() {
        let v: Vec<f64> = (0..60).map(|i| ((i * 37) % 23) as f64 / 7.0 - 1.0).collect();
        let a = Chunk::from_vec(&[12, 5], v).expect("a");
        let [q, r] = <[Chunk; 2]>::try_from(qr(&a).expect("qr")).expect("two");
        assert_eq!((q.shape(), r.shape()), (&[12, 5][..], &[5, 5][..]));
        close(&matmul_sum(&[q], &[r]).expect("qr"), &a, 1e-12);
        let [u, s, vt] = <[Chunk; 3]>::try_from(svd(&a).expect("svd")).expect("three");
        let us = crate::array::elementwise::binary(
            crate::array::elementwise::BinOp::Mul,
            crate::array::elementwise::Operand::Chunk(&u),
            crate::array::elementwise::Operand::Chunk(&s),
        )
        .expect("u*s");
        close(&matmul_sum(&[us], &[vt]).expect("usv"), &a, 1e-12);
        let sq = Chunk::from_vec(&[2, 2], vec![3.0, 1.0, 1.0, 2.0]).expect("sq");
        let b = Chunk::from_vec(&[2], vec![9.0, 8.0]).expect("b");
        assert_eq!(solve(&sq, &b).expect("solve").to_json(), "[2.0,3.0]");
        let sing = Chunk::from_vec(&[2, 2], vec![1.0, 2.0, 2.0, 4.0]).expect("singular");
        assert!(solve(&sing, &b).expect_err("singular").to_string().contains("singular"));
        let up = Chunk::from_vec(&[2, 2], vec![2.0, 1.0, 0.0, 4.0]).expect("up");
        assert_eq!(solve_upper(&up, &b).expect("tri").to_json(), "[3.5,2.0]");
    }
}
