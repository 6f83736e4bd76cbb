//! Chunked results against the same kernels on one whole chunk, on both
//! local schedulers, with chunkings that do not divide the shape.

use std::sync::Arc;

use super::*;
use crate::array::chunk::Chunk;
use crate::array::create::Dist;
use crate::array::dtype::{DType, Scalar};
use crate::array::elementwise::BinOp;
use crate::array::elementwise::{self, Operand as Local, UnOp};
use crate::array::op::ArrayOp;
use crate::array::reduce::{self, BlockPlace, Reduction};
use crate::client::{CancelToken, Client};
use crate::graph::layer::materialize;
use crate::local::{LocalConfig, Runtime};
use crate::ops::{Func, Op};
use crate::runner::NoUdfs;
use crate::value::Value;

fn compute(a: &Array) -> Vec<Chunk> {
    let mut out = Vec::new();
    for config in [
        LocalConfig { threads: 3, ..LocalConfig::default() },
        LocalConfig { sync: true, ..LocalConfig::default() },
    ] {
        let rt = Runtime::new(config, Arc::new(NoUdfs));
        let (layer, key) = finalize(a);
        let v = rt.compute(materialize(&[layer]), &[key], &CancelToken::new()).expect("compute");
        match &v[0] {
            Value::Array(c) => out.push(Chunk::clone(c)),
            other => panic!("not an array: {other:?}"),
        }
        assert_eq!(rt.snapshot().tasks_held, 0);
    }
    assert_eq!(out[0], out[1], "threads and sync agree");
    out
}

fn one(a: &Array) -> Chunk {
    compute(a).swap_remove(0)
}

fn spec(v: &[i64]) -> ChunkSpec {
    ChunkSpec::PerAxis(v.iter().map(|&s| AxisChunks::Size(s)).collect())
}

fn close(a: &Chunk, b: &Chunk) {
    assert_eq!(a.shape(), b.shape());
    let (x, y) = (a.cast::<f64>(), b.cast::<f64>());
    for (p, q) in x.iter().zip(y.iter()) {
        assert!((p - q).abs() <= 1e-9 * (1.0 + q.abs()) || (p.is_nan() && q.is_nan()), "{p} vs {q}");
    }
}

fn sample(shape: &[usize]) -> Chunk {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| ((i * 7919) % 101) as f64 / 7.0 - 5.0).collect();
    Chunk::from_vec(shape, v).expect("sample")
}

#[test]
fn random_is_reproducible_by_seed_and_chunks() {
    let ctx = Ctx::default();
    let a = random(&ctx, &[7, 5], &spec(&[3, 2]), 42, Dist::Uniform, DType::F64).expect("a");
    let b = random(&ctx, &[7, 5], &spec(&[3, 2]), 42, Dist::Uniform, DType::F64).expect("b");
    assert_eq!(a.name, b.name, "same expression, same keys");
    assert_eq!(one(&a), one(&b));
    let c = random(&ctx, &[7, 5], &spec(&[3, 2]), 43, Dist::Uniform, DType::F64).expect("c");
    assert_ne!(one(&a), one(&c));
    assert_eq!(a.chunks.as_ref(), &vec![vec![3, 3, 1], vec![2, 2, 1]]);
}

#[test]
fn elementwise_with_transpose_and_broadcasting_matches_one_chunk() {
    let ctx = Ctx::default();
    let whole = sample(&[7, 7]);
    let x = from_chunk(&ctx, &whole, &spec(&[3])).expect("x");
    let xt = transpose(&ctx, &x, None).expect("T");
    let s = binary(&ctx, BinOp::Add, &Operand::Array(x.clone()), &Operand::Array(xt)).expect("add");
    let s2 = binary(&ctx, BinOp::Mul, &Operand::Array(s), &Operand::Scalar(Scalar::Int(2))).expect("mul");
    let direct_t = crate::array::shape::transpose(&whole, &[1, 0]).expect("t");
    let direct = elementwise::binary(BinOp::Add, Local::Chunk(&whole), Local::Chunk(&direct_t)).expect("a");
    let direct =
        elementwise::binary(BinOp::Mul, Local::Chunk(&direct), Local::Scalar(Scalar::Int(2))).expect("m");
    close(&one(&s2), &direct);

    // A row vector against a matrix with other chunks: unify_chunks.
    let row = from_chunk(&ctx, &sample(&[7]), &spec(&[4])).expect("row");
    let r = binary(&ctx, BinOp::Sub, &Operand::Array(x), &Operand::Array(row)).expect("sub");
    assert_eq!(r.chunks.as_ref(), &vec![vec![3, 3, 1], vec![3, 1, 2, 1]]);
    let direct =
        elementwise::binary(BinOp::Sub, Local::Chunk(&whole), Local::Chunk(&sample(&[7]))).expect("d");
    close(&one(&r), &direct);
}

#[test]
fn reductions_match_one_chunk_for_every_axis_choice() {
    let ctx = Ctx::default();
    let whole = sample(&[9, 10, 3]);
    let x = from_chunk(&ctx, &whole, &spec(&[2, 3, 2])).expect("x");
    let reds = [
        Reduction::Sum,
        Reduction::Prod,
        Reduction::Min,
        Reduction::Max,
        Reduction::Mean,
        Reduction::Var { ddof: 0 },
        Reduction::Std { ddof: 1 },
        Reduction::Any,
        Reduction::All,
    ];
    let axis_sets: [Option<&[i64]>; 5] = [None, Some(&[0]), Some(&[1, 2]), Some(&[-1]), Some(&[0, 2])];
    for red in reds {
        for axes in axis_sets {
            for keepdims in [false, true] {
                for split in [Some(2), None] {
                    let r = reduction(&ctx, &x, red, axes, keepdims, split).expect("reduction");
                    let norm: Vec<usize> = match axes {
                        None => vec![0, 1, 2],
                        Some(a) => crate::array::error::norm_axes(a, 3).expect("axes"),
                    };
                    let p = reduce::partial(red, &whole, &norm, &BlockPlace::default()).expect("p");
                    let direct =
                        reduce::finalize(red, &p, &norm, keepdims, red.out_dtype(DType::F64)).expect("f");
                    let got = one(&r);
                    assert_eq!(got.dtype(), direct.dtype(), "{red:?} {axes:?}");
                    assert_eq!(r.shape(), direct.shape(), "{red:?} {axes:?} {keepdims}");
                    close(&got, &direct);
                }
            }
        }
    }
}

#[test]
fn arg_reductions_give_global_indices() {
    let ctx = Ctx::default();
    let whole = sample(&[9, 10]);
    let x = from_chunk(&ctx, &whole, &spec(&[4, 3])).expect("x");
    for red in [Reduction::ArgMin, Reduction::ArgMax] {
        for axes in [None, Some(&[0i64][..]), Some(&[1i64][..])] {
            let r = reduction(&ctx, &x, red, axes, false, Some(2)).expect("arg");
            let norm: Vec<usize> = match axes {
                None => vec![0, 1],
                Some(a) => crate::array::error::norm_axes(a, 2).expect("axes"),
            };
            let place = BlockPlace { offsets: vec![0, 0], shape: vec![9, 10] };
            let p = reduce::partial(red, &whole, &norm, &place).expect("p");
            let direct = reduce::finalize(red, &p, &norm, false, DType::I64).expect("f");
            assert_eq!(one(&r), direct, "{red:?} {axes:?}");
        }
    }
    let e = reduction(
        &ctx,
        &from_chunk(&ctx, &sample(&[2, 2, 2]), &spec(&[1])).expect("3d"),
        Reduction::ArgMax,
        Some(&[0, 1]),
        false,
        None,
    )
    .expect_err("two axes");
    assert!(e.to_string().contains("one axis or none"), "{e}");
}

#[test]
fn creation_functions() {
    let ctx = Ctx::default();
    let a = arange(&ctx, 0.0, 10.0, 3.0, &spec(&[2]), DType::I64).expect("arange");
    assert_eq!(one(&a).to_json(), "[0,3,6,9]");
    let l = linspace(&ctx, 0.0, 1.0, 5, &spec(&[2]), DType::F64).expect("linspace");
    assert_eq!(one(&l).to_json(), "[0.0,0.25,0.5,0.75,1.0]");
    let e = eye(&ctx, 3, &spec(&[2]), DType::I64).expect("eye");
    assert_eq!(one(&e).to_json(), "[[1,0,0],[0,1,0],[0,0,1]]");
    let f = full(&ctx, &[2, 3], &spec(&[1, 2]), Scalar::Float(1.5), DType::F32).expect("full");
    assert_eq!(one(&f).to_json(), "[[1.5,1.5,1.5],[1.5,1.5,1.5]]");
    let r = rechunk(&ctx, &from_chunk(&ctx, &sample(&[7, 5]), &spec(&[3, 2])).expect("x"), &spec(&[2, 5]))
        .expect("re");
    assert_eq!(one(&r), sample(&[7, 5]));
    assert!(arange(&ctx, 0.0, 1.0, 0.0, &ChunkSpec::Auto, DType::F64).is_err());
}

#[test]
fn bad_shapes_and_axes_are_refused_when_written() {
    let ctx = Ctx::default();
    let a = full(&ctx, &[3, 4], &ChunkSpec::Auto, Scalar::Int(1), DType::F64).expect("a");
    let b = full(&ctx, &[5], &ChunkSpec::Auto, Scalar::Int(1), DType::F64).expect("b");
    let e = binary(&ctx, BinOp::Add, &Operand::Array(a.clone()), &Operand::Array(b)).expect_err("broadcast");
    assert_eq!(e.to_string(), "shapes (3, 4) and (5,) cannot be broadcast together");
    let e = reduction(&ctx, &a, Reduction::Sum, Some(&[2]), false, None).expect_err("axis");
    assert_eq!(e.to_string(), "axis 2 is out of bounds for array of dimension 2");
    let e = transpose(&ctx, &a, Some(&[0, 0])).expect_err("transpose");
    assert!(e.to_string().contains("repeated axis"), "{e}");
    let e = full(&ctx, &[usize::MAX, 4], &ChunkSpec::Auto, Scalar::Int(1), DType::F64).expect_err("huge");
    assert!(e.to_string().contains("more elements"), "{e}");
}

/// Chains of arithmetic ending in a sum or mean run as one fused loop
/// (`array::expr`); they must give what the step-by-step kernels give.
#[test]
fn fused_arithmetic_chains_match_the_kernels() {
    let ctx = Ctx::default();
    let whole = sample(&[150, 150]);
    let x = from_chunk(&ctx, &whole, &spec(&[70])).expect("x");
    let xt = transpose(&ctx, &x, None).expect("T");
    let s = binary(&ctx, BinOp::Add, &Operand::Array(x.clone()), &Operand::Array(xt)).expect("add");
    let e = binary(&ctx, BinOp::Mul, &Operand::Array(s), &Operand::Scalar(Scalar::Float(2.0))).expect("mul");
    let e = unary(&ctx, UnOp::Sqrt, &unary(&ctx, UnOp::Abs, &e).expect("abs")).expect("sqrt");
    let t = crate::array::shape::transpose(&whole, &[1, 0]).expect("t");
    let d = elementwise::binary(BinOp::Add, Local::Chunk(&whole), Local::Chunk(&t)).expect("a");
    let d = elementwise::binary(BinOp::Mul, Local::Chunk(&d), Local::Scalar(Scalar::Float(2.0))).expect("m");
    let d = elementwise::unary(UnOp::Sqrt, &elementwise::unary(UnOp::Abs, &d).expect("abs")).expect("sqrt");
    close(&one(&e), &d);
    for (red, axes) in [
        (Reduction::Mean, Some(&[0i64][..])),
        (Reduction::Sum, Some(&[1i64][..])),
        (Reduction::Sum, None),
        (Reduction::Mean, None),
    ] {
        let r = reduction(&ctx, &e, red, axes, false, None).expect("reduce");
        let norm: Vec<usize> =
            axes.map(|a| crate::array::error::norm_axes(a, 2).expect("axes")).unwrap_or(vec![0, 1]);
        let p = reduce::partial(red, &d, &norm, &BlockPlace::default()).expect("p");
        close(&one(&r), &reduce::finalize(red, &p, &norm, false, DType::F64).expect("f"));
    }
}

#[test]
fn blocked_matmul_matches_one_block() {
    let ctx = Ctx::default();
    let (wa, wb) = (sample(&[9, 7]), sample(&[7, 5]));
    let a = from_chunk(&ctx, &wa, &spec(&[4, 3])).expect("a");
    let b = from_chunk(&ctx, &wb, &spec(&[2, 2])).expect("b");
    let direct = crate::array::linalg::matmul_sum(std::slice::from_ref(&wa), std::slice::from_ref(&wb))
        .expect("direct");
    close(&one(&matmul(&ctx, &a, &b).expect("mm")), &direct);
    // x @ x.T, the B4 shape, with transposed blocks.
    let at = transpose(&ctx, &a, None).expect("T");
    let wt = crate::array::shape::transpose(&wa, &[1, 0]).expect("t");
    let direct = crate::array::linalg::matmul_sum(std::slice::from_ref(&wa), &[wt]).expect("xxt");
    let xxt = matmul(&ctx, &a, &at).expect("xxt");
    close(&one(&xxt), &direct);
    // It is symmetric: 3 Gram blocks on the diagonal, 3 products above it and
    // 3 transposes of those below it.
    let count = |f: fn(&ArrayOp) -> bool| {
        xxt.layer
            .tasks
            .iter()
            .filter(|t| matches!(&t.op, Op::Call { func: Func::Array(op), .. } if f(op)))
            .count()
    };
    assert_eq!(count(|op| matches!(op, ArrayOp::Gram { .. })), 3);
    assert_eq!(count(|op| matches!(op, ArrayOp::Matmul { .. })), 3);
    assert_eq!(count(|op| matches!(op, ArrayOp::Transpose(_))), 3);
    // Vectors on either side.
    let v = from_chunk(&ctx, &sample(&[7]), &spec(&[3])).expect("v");
    let mv = crate::array::linalg::matmul_sum(std::slice::from_ref(&wa), &[sample(&[7])]).expect("mv");
    close(&one(&matmul(&ctx, &a, &v).expect("mv")), &mv);
    let e = matmul(&ctx, &a, &a).expect_err("mismatch");
    assert_eq!(e.to_string(), "matmul: shapes (9, 7) and (9, 7) are not aligned: 7 (dim 1) != 9 (dim 0)");
}

fn mul_cols(u: &Chunk, s: &Chunk) -> Chunk {
    elementwise::binary(BinOp::Mul, Local::Chunk(u), Local::Chunk(s)).expect("u*s")
}

#[test]
fn tsqr_qr_and_svd_rebuild_the_input() {
    let ctx = Ctx::default();
    let whole = sample(&[60, 7]);
    let x = from_chunk(&ctx, &whole, &spec(&[13, -1])).expect("x");
    let (q, r) = qr(&ctx, &x).expect("qr");
    let (qv, rv) = (one(&q), one(&r));
    close(&crate::array::linalg::matmul_sum(std::slice::from_ref(&qv), &[rv]).expect("qr"), &whole);
    let qtq =
        crate::array::linalg::matmul_sum(&[crate::array::shape::transpose(&qv, &[1, 0]).expect("t")], &[qv])
            .expect("qtq");
    close(&qtq, &crate::array::create::eye(7, 7, 0, DType::F64));
    let (u, s, vt) = svd(&ctx, &x).expect("svd");
    let (uv, sv, vtv) = (one(&u), one(&s), one(&vt));
    close(&crate::array::linalg::matmul_sum(&[mul_cols(&uv, &sv)], &[vtv]).expect("usv"), &whole);
    let direct = &crate::array::linalg::svd(&whole).expect("direct")[1];
    close(&sv, direct);
    // Not tall-and-skinny: a clear error.
    let wide = from_chunk(&ctx, &whole, &spec(&[13, 3])).expect("wide");
    assert!(qr(&ctx, &wide).expect_err("blocks").to_string().contains("one block along axis 1"));
    let short = from_chunk(&ctx, &whole, &spec(&[5, -1])).expect("short");
    assert!(qr(&ctx, &short).expect_err("short").to_string().contains("at least as tall"));
}

#[test]
fn randomized_svd_finds_the_leading_values_of_a_low_rank_matrix() {
    let ctx = Ctx::default();
    // Rank 3: outer products of three vectors with weights 9, 4, 1.
    let (m, n) = (80, 30);
    let v: Vec<f64> = (0..m * n)
        .map(|p| {
            let (i, j) = ((p / n) as f64, (p % n) as f64);
            9.0 * (i * 0.1).sin() * (j * 0.2).cos()
                + 4.0 * (i * 0.05).cos() * (j * 0.3).sin()
                + (i * 0.3).sin() * (j * 0.1).sin()
        })
        .collect();
    let whole = Chunk::from_vec(&[m, n], v).expect("low rank");
    let x = from_chunk(&ctx, &whole, &spec(&[20, -1])).expect("x");
    let (_, s, _) = svd_compressed(&ctx, &x, 3, 7, 5, 1).expect("svd_compressed");
    let direct = &crate::array::linalg::svd(&whole).expect("svd")[1];
    let first3 = crate::array::shape::slice(
        direct,
        &[(crate::array::shape::AxisSlice { start: 0, stop: 3, step: 1 }, false)],
    )
    .expect("3");
    close(&one(&s), &first3);
}

#[test]
fn solve_lstsq_norm_and_slices() {
    let ctx = Ctx::default();
    let a = Chunk::from_vec(&[3, 3], vec![4.0, 1.0, 0.0, 1.0, 3.0, 1.0, 0.0, 1.0, 2.0]).expect("a");
    let b = Chunk::from_vec(&[3], vec![1.0, 2.0, 3.0]).expect("b");
    let la = from_chunk(&ctx, &a, &spec(&[2])).expect("la");
    let lb = from_chunk(&ctx, &b, &spec(&[2])).expect("lb");
    let x = one(&solve(&ctx, &la, &lb).expect("solve"));
    close(
        &crate::array::linalg::matmul_sum(std::slice::from_ref(&a), std::slice::from_ref(&x)).expect("ax"),
        &b,
    );
    // Least squares on an exactly solvable tall system gives the same x.
    let tall = from_chunk(&ctx, &a, &spec(&[3, -1])).expect("tall");
    let (lx, res, rank, sv) = lstsq(&ctx, &tall, &lb).expect("lstsq");
    close(&one(&lx), &x);
    assert!(one(&res).get(&[0]).expect("res").as_f64() < 1e-20);
    assert_eq!(one(&rank).get(&[]), Some(Scalar::Int(3)));
    assert_eq!(one(&sv).shape(), &[3]);
    let n = one(&norm(&ctx, &la).expect("norm")).get(&[]).expect("n").as_f64();
    assert!((n - 33.0f64.sqrt()).abs() < 1e-12, "{n}");
    // Slices across block edges, with steps, integers and negative ends.
    let whole = sample(&[9, 10]);
    let s = from_chunk(&ctx, &whole, &spec(&[4, 3])).expect("s");
    let r = |start, stop, step| Index::Range { start, stop, step };
    let got = one(&slice(&ctx, &s, &[r(Some(1), Some(-1), 3), Index::Int(-2)]).expect("slice"));
    let want: Vec<f64> = [1, 4, 7].iter().map(|&i| whole.get(&[i, 8]).expect("e").as_f64()).collect();
    assert_eq!(got, Chunk::from_vec(&[3], want).expect("want"));
    let got = one(&slice(&ctx, &s, &[Index::Full, r(None, None, 4)]).expect("cols"));
    assert_eq!(got.shape(), &[9, 3]);
    assert_eq!(one(&slice(&ctx, &s, &[r(Some(5), Some(2), 1)]).expect("empty")).shape(), &[0, 10]);
    let e = slice(&ctx, &s, &[Index::Int(9)]).expect_err("bounds");
    assert_eq!(e.to_string(), "index 9 is out of bounds for axis 0 with size 9");
    assert!(slice(&ctx, &s, &[Index::Full, Index::Full, Index::Full]).is_err());
}
