//! `transpose` and `@`: one task per output block, long inner axes summed
//! from partial products, `x @ x.T` seen as symmetric.

use std::sync::Arc;

use super::base::{Array, Ctx, array_task, block, finish, grid};
use super::rechunk::{rechunk_to, refine};
use crate::array::dtype::DType;
use crate::array::error::ArrayError;
use crate::array::error::fmt_shape;
use crate::array::op::ArrayOp;
use crate::graph::task::Task;
use crate::graph::token::Tokenizer;
use crate::key::Key;
use crate::ops::{Arg, Func, Op};

/// `a.transpose(axes)`; no axes reverses them (`a.T`).
pub fn transpose(ctx: &Ctx, a: &Array, axes: Option<&[i64]>) -> Result<Array, ArrayError> {
    if a.ndim() > 1 {
        a.known("transpose")?;
    }
    let nd = a.ndim();
    let perm: Vec<usize> = match axes {
        None => (0..nd).rev().collect(),
        Some(ax) => {
            if ax.len() != nd {
                return Err(ArrayError::Value(format!("axes {ax:?} don't match array of dimension {nd}")));
            }
            let p =
                ax.iter().map(|&x| crate::array::error::norm_axis(x, nd)).collect::<Result<Vec<_>, _>>()?;
            let mut seen = p.clone();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() != nd {
                return Err(ArrayError::Value(format!("repeated axis in transpose {ax:?}")));
            }
            p
        }
    };
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(a.clone());
    }
    let mut t = Tokenizer::new();
    t.str("transpose").str(&a.name).serde(&perm);
    let name = t.name("transpose");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let chunks: Vec<Vec<usize>> = perm.iter().map(|&p| a.chunks[p].clone()).collect();
    let numblocks: Vec<usize> = chunks.iter().map(Vec::len).collect();
    let op = Arc::new(ArrayOp::Transpose(perm.clone()));
    let tasks = grid(&numblocks)
        .into_iter()
        .map(|idx| {
            let mut src = vec![0; nd];
            for (i, &p) in perm.iter().enumerate() {
                src[p] = idx[i];
            }
            let key = block(&key_name, &idx);
            let mut task = Task::new(
                key,
                Op::Call { func: Func::Array(op.clone()), args: vec![Arg::Dep(0)] },
                vec![a.block_key(&src)],
            );
            task.annotations = ctx.annotations.clone();
            task
        })
        .collect();
    Ok(finish(name, tasks, vec![a.layer.clone()], chunks, a.dtype))
}

/// How many block products one matmul task sums; longer inner axes are
/// summed from partial products (as a `split_every` for products).
pub const MATMUL_FANIN: usize = 4;

/// `a @ b` for 1-d and 2-d arrays (NumPy's `matmul`/`dot` there): one task
/// per output block, summing the products of the blocks along the
/// contracted axis (whose chunks are unified first).
pub fn matmul(ctx: &Ctx, a: &Array, b: &Array) -> Result<Array, ArrayError> {
    a.known("matmul")?;
    b.known("matmul")?;
    let (sa, sb) = (a.shape(), b.shape());
    if !(1..=2).contains(&a.ndim()) || !(1..=2).contains(&b.ndim()) {
        return Err(ArrayError::Shape(format!(
            "matmul of shapes {} and {}: only 1-d and 2-d arrays are supported",
            fmt_shape(&sa),
            fmt_shape(&sb)
        )));
    }
    let ka = a.ndim() - 1;
    if sa[ka] != sb[0] {
        return Err(ArrayError::Shape(format!(
            "matmul: shapes {} and {} are not aligned: {} (dim {ka}) != {} (dim 0)",
            fmt_shape(&sa),
            fmt_shape(&sb),
            sa[ka],
            sb[0]
        )));
    }
    let k = refine(&[&a.chunks[ka], &b.chunks[0]]);
    let mut ca: Vec<Vec<usize>> = a.chunks.to_vec();
    ca[ka] = k.clone();
    let mut cb: Vec<Vec<usize>> = b.chunks.to_vec();
    cb[0] = k.clone();
    let (a, b) = (rechunk_to(ctx, a, ca)?, rechunk_to(ctx, b, cb)?);
    let dtype = DType::promote(a.dtype, b.dtype);
    let mut t = Tokenizer::new();
    t.str("matmul").str(&a.name).str(&b.name);
    let name = t.name("matmul");
    let key_name: Arc<str> = Arc::from(name.as_str());
    let rows = if a.ndim() == 2 { a.chunks[0].len() } else { 1 };
    let cols = if b.ndim() == 2 { b.chunks[1].len() } else { 1 };
    let nk = k.len();
    let partial_name: Arc<str> = Arc::from(t.name("matmul-partial").as_str());
    // `x @ x.T` and `x.T @ x` are symmetric (NumPy calls BLAS's syrk
    // there): blocks below the diagonal are transposes of those above it,
    // and diagonal blocks are Gram products that multiply one triangle.
    let gram = is_transpose_of(&b, &a) || is_transpose_of(&a, &b);
    let a_key = |i: usize, kk: usize| if a.ndim() == 2 { a.block_key(&[i, kk]) } else { a.block_key(&[kk]) };
    let b_key = |kk: usize, j: usize| if b.ndim() == 2 { b.block_key(&[kk, j]) } else { b.block_key(&[kk]) };
    let mut tasks = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        for j in 0..cols {
            let mut idx = Vec::new();
            if a.ndim() == 2 {
                idx.push(i as u32);
            }
            if b.ndim() == 2 {
                idx.push(j as u32);
            }
            let key = Key::block(key_name.clone(), &idx);
            if gram && i > j {
                let mirror = Key::block(key_name.clone(), &[j as u32, i as u32]);
                tasks.push(array_task(
                    ctx,
                    key,
                    ArrayOp::Transpose(vec![1, 0]),
                    vec![Arg::Dep(0)],
                    vec![mirror],
                ));
                continue;
            }
            // The product of the blocks `lo..hi` along the contracted axis.
            let product = |lo: usize, hi: usize| -> (ArrayOp, Vec<Key>) {
                let mut deps: Vec<Key> = (lo..hi).map(|kk| a_key(i, kk)).collect();
                if gram && i == j {
                    return (ArrayOp::Gram { nk: hi - lo }, deps);
                }
                deps.extend((lo..hi).map(|kk| b_key(kk, j)));
                (ArrayOp::Matmul { nk: hi - lo }, deps)
            };
            let dep_args = |n: usize| (0..n).map(|x| Arg::Dep(x as u32)).collect::<Vec<_>>();
            if nk <= MATMUL_FANIN {
                let (op, deps) = product(0, nk);
                tasks.push(array_task(ctx, key, op, dep_args(deps.len()), deps));
                continue;
            }
            // A long inner axis: partial products over groups of blocks,
            // then their sum, so no task holds every block of a row.
            let mut partials = Vec::new();
            for (g, lo) in (0..nk).step_by(MATMUL_FANIN).enumerate() {
                let (op, gdeps) = product(lo, (lo + MATMUL_FANIN).min(nk));
                let mut pidx = idx.clone();
                pidx.push(g as u32);
                let pkey = Key::block(partial_name.clone(), &pidx);
                tasks.push(array_task(ctx, pkey.clone(), op, dep_args(gdeps.len()), gdeps));
                partials.push(pkey);
            }
            tasks.push(array_task(ctx, key, ArrayOp::AddAll, dep_args(partials.len()), partials));
        }
    }
    let mut chunks = Vec::new();
    if a.ndim() == 2 {
        chunks.push(a.chunks[0].clone());
    }
    if b.ndim() == 2 {
        chunks.push(b.chunks[1].clone());
    }
    Ok(finish(name, tasks, vec![a.layer.clone(), b.layer.clone()], chunks, dtype))
}

/// Whether `b` is `a.T` for a 2-d `a`: its layer transposes `a`'s blocks.
pub(super) fn is_transpose_of(b: &Array, a: &Array) -> bool {
    a.ndim() == 2
        && b.ndim() == 2
        && b.layer.deps.len() == 1
        && b.layer.deps[0].name == a.layer.name
        && b.layer.tasks.first().is_some_and(|t| {
            matches!(&t.op, Op::Call { func: Func::Array(op), .. }
                if matches!(&**op, ArrayOp::Transpose(p) if p[..] == [1, 0]))
        })
}
