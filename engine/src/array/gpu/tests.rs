//! GPU blocks against the CPU kernels on the same data. Every test needs a
//! device: without one it says so and passes (CI), unless
//! `BRISK_REQUIRE_GPU` is set (scripts/gpu-tests.sh on a GPU machine).

use std::sync::Arc;

use super::expr::{Expr, Term, materialize};
use super::*;
use crate::array::chunk::Chunk;
use crate::array::dtype::DType;
use crate::array::dtype::Scalar;
use crate::array::elementwise::{self, BinOp, Operand, UnOp};
use crate::array::reduce::{self, BlockPlace, Reduction};
use crate::client::{CancelToken, Client};
use crate::collections::array::{self as arr, AxisChunks, ChunkSpec, Ctx, Operand as Lazy};
use crate::graph::layer::materialize as graph;
use crate::local::{LocalConfig, Runtime};
use crate::runner::NoUdfs;
use crate::value::Value;
use brisk_gpu::Device;

fn device() -> Option<Arc<Device>> {
    match default_device() {
        Ok(d) => Some(d),
        Err(e) => {
            assert!(std::env::var_os("BRISK_REQUIRE_GPU").is_none(), "a GPU was required: {e}");
            assert!(e.to_string().starts_with("no GPU: "), "{e}");
            eprintln!("skipped: {e}");
            None
        }
    }
}

fn sample(shape: &[usize], dtype: DType, salt: usize) -> Chunk {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| (((i + salt) * 7919) % 101) as f64 / 7.0 - 5.0).collect();
    Chunk::from_vec(shape, v).expect("sample").astype(dtype)
}

fn up(c: &Chunk) -> GpuChunk {
    GpuChunk::from_host(c, &default_device().expect("device")).expect("upload")
}

/// Equal types and shapes, values within float tolerance (NaN equals NaN).
fn close(gpu: &Chunk, cpu: &Chunk, what: &str) {
    assert_eq!((gpu.dtype(), gpu.shape()), (cpu.dtype(), cpu.shape()), "{what}");
    let tol = if cpu.dtype() == DType::F32 { 2e-5 } else { 1e-12 };
    let (x, y) = (gpu.cast::<f64>(), cpu.cast::<f64>());
    for (p, q) in x.iter().zip(y.iter()) {
        let ok = p == q || (p.is_nan() && q.is_nan()) || (p - q).abs() <= tol * (1.0 + q.abs());
        assert!(ok, "{what}: GPU {p} vs CPU {q}");
    }
}

const BINOPS: [BinOp; 17] = [
    BinOp::Add,
    BinOp::Sub,
    BinOp::Mul,
    BinOp::Div,
    BinOp::FloorDiv,
    BinOp::Rem,
    BinOp::Pow,
    BinOp::Maximum,
    BinOp::Minimum,
    BinOp::Gt,
    BinOp::Ge,
    BinOp::Lt,
    BinOp::Le,
    BinOp::Eq,
    BinOp::Ne,
    BinOp::And,
    BinOp::Or,
];

const DTYPES: [DType; 4] = [DType::Bool, DType::I64, DType::F32, DType::F64];

#[test]
fn binary_operators_match_the_cpu() {
    let Some(_) = device() else { return };
    let mut checked = 0;
    for &ta in &DTYPES {
        for &tb in &DTYPES {
            let a = sample(&[6, 5], ta, 0);
            let b = sample(&[5], tb, 3);
            for &op in &BINOPS {
                // Integer powers are the host's (they refuse negative exponents).
                if op == BinOp::Pow && DType::promote(ta, tb).sum_type() == DType::I64 {
                    continue;
                }
                let cpu = elementwise::binary(op, Operand::Chunk(&a), Operand::Chunk(&b));
                let gpu = Expr::binary(op, Term::Expr(Expr::leaf(up(&a))), Term::Expr(Expr::leaf(up(&b))))
                    .and_then(|e| materialize(&e));
                match (cpu, gpu) {
                    (Ok(c), Ok(g)) => {
                        close(&g.to_host().expect("down"), &c, &format!("{ta} {} {tb}", op.symbol()));
                        checked += 1;
                    }
                    (Err(_), Err(_)) | (Ok(_), _) => {}
                    (Err(c), Ok(_)) => {
                        panic!("{ta} {} {tb}: the CPU refuses ({c}), the GPU did not", op.symbol())
                    }
                }
            }
            // A scalar on either side, with NumPy's weak scalar typing.
            for s in [Scalar::Int(3), Scalar::Float(-2.5), Scalar::Bool(true)] {
                for op in [BinOp::Add, BinOp::Mul, BinOp::Rem, BinOp::Gt, BinOp::Maximum] {
                    let cpu = elementwise::binary(op, Operand::Scalar(s), Operand::Chunk(&a));
                    let gpu = Expr::binary(op, Term::Scalar(s), Term::Expr(Expr::leaf(up(&a))))
                        .and_then(|e| materialize(&e));
                    if let (Ok(c), Ok(g)) = (cpu, gpu) {
                        close(&g.to_host().expect("down"), &c, &format!("{s} {} {ta}", op.symbol()));
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 200, "{checked} checks");
}

#[test]
fn unary_where_astype_and_transposed_views_match_the_cpu() {
    let Some(_) = device() else { return };
    let ops = [
        UnOp::Neg,
        UnOp::Not,
        UnOp::Abs,
        UnOp::Sqrt,
        UnOp::Exp,
        UnOp::Log,
        UnOp::Log10,
        UnOp::Sin,
        UnOp::Cos,
        UnOp::Tan,
        UnOp::Tanh,
        UnOp::Floor,
        UnOp::Ceil,
        UnOp::Round,
        UnOp::IsNan,
        UnOp::IsFinite,
    ];
    for &t in &DTYPES {
        let a = sample(&[7, 9], t, 1);
        for op in ops {
            let cpu = elementwise::unary(op, &a);
            let gpu = Expr::unary(op, Expr::leaf(up(&a))).and_then(|e| materialize(&e));
            match (cpu, gpu) {
                (Ok(c), Ok(g)) => close(&g.to_host().expect("down"), &c, &format!("{} of {t}", op.name())),
                (Err(_), Err(_)) => {}
                (c, g) => panic!("{} of {t}: CPU {c:?} GPU {g:?}", op.name()),
            }
        }
        for to in DTYPES {
            let g = materialize(&Expr::cast(Expr::leaf(up(&a)), to)).expect("cast");
            close(&g.to_host().expect("down"), &a.astype(to), &format!("{t} as {to}"));
        }
    }
    // where with a scalar branch, and x + x.T on a view.
    let x = sample(&[8, 8], DType::F64, 2);
    let c =
        elementwise::binary(BinOp::Gt, Operand::Chunk(&x), Operand::Scalar(Scalar::Float(0.0))).expect("c");
    let cpu = elementwise::where_(Operand::Chunk(&c), Operand::Chunk(&x), Operand::Scalar(Scalar::Int(0)))
        .expect("w");
    let gx = up(&x);
    let gpu = Expr::where_(
        Term::Expr(Expr::leaf(up(&c))),
        Term::Expr(Expr::leaf(gx.clone())),
        Term::Scalar(Scalar::Int(0)),
    )
    .and_then(|e| materialize(&e))
    .expect("where");
    close(&gpu.to_host().expect("down"), &cpu, "where");
    let xt = crate::array::shape::transpose(&x, &[1, 0]).expect("t");
    let cpu = elementwise::binary(BinOp::Add, Operand::Chunk(&x), Operand::Chunk(&xt)).expect("x+x.T");
    let gpu = Expr::binary(
        BinOp::Add,
        Term::Expr(Expr::leaf(gx.clone())),
        Term::Expr(Expr::leaf(gx.transpose(&[1, 0]).expect("t"))),
    )
    .and_then(|e| materialize(&e))
    .expect("x+x.T");
    close(&gpu.to_host().expect("down"), &cpu, "x + x.T");
    // A strided slice and a 3-d transpose come back as the CPU's.
    let r = [
        (crate::array::shape::AxisSlice { start: 1, stop: 8, step: 2 }, false),
        (crate::array::shape::AxisSlice { start: 0, stop: 8, step: -3 }, false),
    ];
    close(
        &gx.slice(&r).expect("slice").to_host().expect("down"),
        &crate::array::shape::slice(&x, &r).expect("slice"),
        "slice",
    );
    let y = sample(&[3, 4, 5], DType::I64, 4);
    let gy = up(&y).transpose(&[2, 0, 1]).expect("t");
    close(
        &gy.to_host().expect("down"),
        &crate::array::shape::transpose(&y, &[2, 0, 1]).expect("t"),
        "3-d transpose",
    );
}

#[test]
fn reductions_match_the_cpu() {
    let Some(_) = device() else { return };
    let reds = [
        Reduction::Sum,
        Reduction::Prod,
        Reduction::Min,
        Reduction::Max,
        Reduction::Any,
        Reduction::All,
        Reduction::Mean,
        Reduction::Var { ddof: 1 },
        Reduction::Std { ddof: 0 },
    ];
    let cases: [(&[usize], &[&[usize]]); 3] = [
        (&[37, 53], &[&[0], &[1], &[0, 1]]),
        (&[4, 5, 6], &[&[0, 2], &[1], &[0, 1, 2], &[2]]),
        (&[70001], &[&[0]]),
    ];
    for (shape, axes_sets) in cases {
        for &t in &DTYPES {
            // Small values keep products finite.
            let a = sample(shape, t, 5).astype(DType::F64);
            let a = elementwise::binary(BinOp::Div, Operand::Chunk(&a), Operand::Scalar(Scalar::Float(4.0)))
                .expect("scale")
                .astype(t);
            let g = up(&a);
            for axes in axes_sets {
                for red in reds {
                    let place = BlockPlace::default();
                    let cpu = reduce::partial(red, &a, axes, &place).expect("cpu partial");
                    let gp = crate::array::exec::execute(
                        &crate::array::op::ArrayOp::Partial {
                            red,
                            axes: axes.to_vec(),
                            place: place.clone(),
                        },
                        &[super::exec::gpu_value(g.clone())],
                    )
                    .expect("gpu partial");
                    let out = red.out_dtype(t);
                    // Three partials: merged in one kernel on the device.
                    let cpu_m =
                        reduce::merge(red, &reduce::merge(red, &cpu, &cpu).expect("m"), &cpu).expect("m");
                    let cpu_r = reduce::finalize(red, &cpu_m, axes, false, out).expect("cpu final");
                    let gpu_r = crate::array::exec::execute(
                        &crate::array::op::ArrayOp::Aggregate {
                            red,
                            axes: axes.to_vec(),
                            keepdims: false,
                            out,
                        },
                        &[gp.clone(), gp.clone(), gp],
                    )
                    .expect("gpu aggregate");
                    let Value::Gpu(gr) = gpu_r else { panic!("not on the GPU: {gpu_r:?}") };
                    let what = format!("{} of {t} {shape:?} over {axes:?}", red.name());
                    let got = gr.to_host().expect("down");
                    if t == DType::F32 && red == Reduction::Prod {
                        continue;
                    }
                    close(&got, &cpu_r, &what);
                }
            }
        }
    }
}

/// Reductions that read an elementwise expression as they fold it (never
/// writing it) against the CPU path on the evaluated expression: the last
/// axis alone, the axes before it, runs split around the last axis, a
/// transposed leaf and a broadcast one.
#[test]
fn reductions_of_expressions_match_the_cpu() {
    let Some(_) = device() else { return };
    let reds = [
        Reduction::Sum,
        Reduction::Prod,
        Reduction::Min,
        Reduction::Max,
        Reduction::Any,
        Reduction::All,
        Reduction::Mean,
        Reduction::Var { ddof: 0 },
    ];
    // Over axis 0 a 2-d transposed leaf is staged in tiles: (37, 37) has
    // a part tile, (300, 45) cuts the rows in ten pieces.
    let cases: [(&[usize], &[&[usize]]); 7] = [
        (&[37, 37], &[&[0], &[1], &[0, 1]]),
        (&[300, 45], &[&[0]]),
        (&[9, 1], &[&[0], &[1], &[0, 1]]),
        (&[1, 9], &[&[0], &[1], &[0, 1]]),
        (&[6, 5, 7], &[&[0, 1], &[2], &[1, 2], &[0, 2], &[0, 1, 2], &[1]]),
        (&[3000], &[&[0]]),
        (&[9, 4100], &[&[1], &[0]]),
    ];
    let mut checked = 0;
    for (shape, axes_sets) in cases {
        for &t in &[DType::F64, DType::F32, DType::I64, DType::Bool] {
            let a = sample(shape, t, 1);
            // The second leaf: the transpose of a block of the reversed
            // shape (a strided view), and a broadcast last row.
            let rev: Vec<usize> = shape.iter().rev().copied().collect();
            let b = sample(&rev, t, 4);
            let axes_rev: Vec<usize> = (0..shape.len()).rev().collect();
            let bt = crate::array::shape::transpose(&b, &axes_rev).expect("t");
            let row = sample(&shape[shape.len() - 1..], DType::F64, 2);
            let sum = elementwise::binary(BinOp::Add, Operand::Chunk(&a), Operand::Chunk(&bt)).expect("+");
            let scaled =
                elementwise::binary(BinOp::Div, Operand::Chunk(&sum), Operand::Scalar(Scalar::Int(8)))
                    .expect("/");
            let cpu_x =
                elementwise::binary(BinOp::Sub, Operand::Chunk(&scaled), Operand::Chunk(&row)).expect("-");
            let e = Expr::binary(
                BinOp::Add,
                Term::Expr(Expr::leaf(up(&a))),
                Term::Expr(Expr::leaf(up(&b).transpose(&axes_rev).expect("t"))),
            )
            .and_then(|e| Expr::binary(BinOp::Div, Term::Expr(e), Term::Scalar(Scalar::Int(8))))
            .and_then(|e| Expr::binary(BinOp::Sub, Term::Expr(e), Term::Expr(Expr::leaf(up(&row)))))
            .expect("expr");
            for axes in axes_sets {
                for red in reds {
                    let place = BlockPlace::default();
                    let cpu = reduce::partial(red, &cpu_x, axes, &place).expect("cpu partial");
                    let out = red.out_dtype(cpu_x.dtype());
                    let cpu_r = reduce::finalize(red, &cpu, axes, true, out).expect("cpu final");
                    let gp =
                        super::reduce::partial_expr(red, &e, axes).expect("gpu partial").expect("on the GPU");
                    let gpu_r = super::reduce::finalize(red, &gp, axes, true, out).expect("gpu final");
                    let got = match gpu_r {
                        Some(g) => g.to_host().expect("down"),
                        // Var finishes on the host.
                        None => {
                            let host: Vec<Chunk> = gp.iter().map(|g| g.to_host().expect("down")).collect();
                            reduce::finalize(red, &host, axes, true, out).expect("host final")
                        }
                    };
                    let what = format!("{} of {t} {shape:?} over {axes:?}", red.name());
                    if red == Reduction::Prod {
                        continue;
                    }
                    close(&got, &cpu_r, &what);
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 100, "{checked} checks");
}

/// argmin / argmax on the device against the CPU path: ties (the values
/// repeat) keep the first occurrence, NaN wins, indices carry the block's
/// place, and two blocks' partials merge as the CPU merges them.
#[test]
fn arg_reductions_match_the_cpu() {
    let Some(_) = device() else { return };
    let cases: [(&[usize], &[&[usize]]); 5] = [
        (&[37, 53], &[&[0], &[1], &[0, 1]]),
        (&[0, 5], &[&[1]]),
        (&[4, 5, 6], &[&[0], &[1], &[2], &[0, 1, 2]]),
        (&[70001], &[&[0]]),
        (&[3, 9000], &[&[1], &[0, 1]]),
    ];
    let mut checked = 0;
    for (shape, axes_sets) in cases {
        for &t in &DTYPES {
            for nan in [false, true] {
                if nan && (!t.is_float() || shape.contains(&0)) {
                    continue;
                }
                let mut a = sample(shape, t, 5);
                let mut b = sample(shape, t, 9);
                if nan {
                    let n = a.len();
                    let with_nan = |c: &Chunk, at: usize| {
                        let mut v = c.cast::<f64>().iter().copied().collect::<Vec<_>>();
                        v[at % n] = f64::NAN;
                        Chunk::from_vec(shape, v).expect("nan").astype(t)
                    };
                    a = with_nan(&a, n / 3);
                    b = with_nan(&b, n / 2);
                }
                let nd = shape.len();
                let global: Vec<usize> = shape.iter().map(|&d| 2 * d).collect();
                let pa = BlockPlace { offsets: vec![0; nd], shape: global.clone() };
                let mut off_b = vec![0; nd];
                off_b[0] = shape[0];
                let pb = BlockPlace { offsets: off_b, shape: global };
                for axes in axes_sets {
                    for red in [Reduction::ArgMin, Reduction::ArgMax] {
                        let what = format!("{} of {t} {shape:?} over {axes:?} (NaN: {nan})", red.name());
                        let cpu_a = reduce::partial(red, &a, axes, &pa).expect("cpu a");
                        let cpu_b = reduce::partial(red, &b, axes, &pb).expect("cpu b");
                        let gpu_a = arg::partial(red, &up(&a), axes, &pa).expect("gpu a");
                        let gpu_b = arg::partial(red, &up(&b), axes, &pb).expect("gpu b");
                        for (g, c) in gpu_a.iter().zip(&cpu_a) {
                            close(&g.to_host().expect("down"), c, &format!("{what}: partial"));
                        }
                        // Merging needs one output shape: along axis 0 the
                        // two blocks are stacked, elsewhere side by side.
                        if axes.len() == 1 && axes[0] == 0 || axes.len() == nd {
                            let cpu = reduce::merge(red, &cpu_a, &cpu_b).expect("cpu merge");
                            let gpu = arg::merge(red, &gpu_a, &gpu_b).expect("gpu merge");
                            let out =
                                reduce::finalize(red, &cpu, axes, false, DType::I64).expect("cpu final");
                            let got = super::reduce::finalize(red, &gpu, axes, false, DType::I64)
                                .expect("gpu final")
                                .expect("on the GPU");
                            close(&got.to_host().expect("down"), &out, &format!("{what}: merged"));
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 80, "{checked} checks");
}

/// Boolean-mask selection and histograms on the device against the CPU's:
/// masks of every dtype (nonzero is true), long enough for several scan
/// segments; bins in shared memory and in global memory, NaN and values
/// outside the range left out.
#[test]
fn masks_and_histograms_match_the_cpu() {
    let Some(_) = device() else { return };
    for shape in [&[7usize, 9][..], &[100_003], &[0]] {
        for &t in &DTYPES {
            let x = sample(shape, t, 2);
            for &ct in &DTYPES {
                let cond = sample(shape, ct, 7);
                let cpu = crate::array::shape::mask(&x, &cond).expect("cpu");
                let gpu = scan::mask(&up(&x), &up(&cond)).expect("gpu").to_host().expect("down");
                close(&gpu, &cpu, &format!("{t}[{ct} mask] of {shape:?}"));
            }
            for (bins, lo, hi) in [(10, -3.0, 4.0), (5000, -5.0, 10.0), (1, 0.0, 1.0)] {
                let mut v = x.cast::<f64>().iter().copied().collect::<Vec<_>>();
                if t.is_float() && !v.is_empty() {
                    v[0] = f64::NAN;
                }
                let xs = Chunk::from_vec(shape, v).expect("x").astype(t);
                let cpu = reduce::histogram(&xs, bins, lo, hi).expect("cpu");
                let gpu = scan::histogram(&up(&xs), bins, lo, hi).expect("gpu").to_host().expect("down");
                assert_eq!(gpu, cpu, "histogram of {t} {shape:?}, {bins} bins over [{lo}, {hi}]");
            }
        }
    }
    let e =
        scan::mask(&up(&sample(&[3], DType::F64, 0)), &up(&sample(&[4], DType::Bool, 0))).expect_err("shape");
    assert!(e.to_string().contains("does not match"), "{e}");
    assert!(scan::histogram(&up(&sample(&[3], DType::F64, 0)), 0, 0.0, 1.0).is_err());
}

/// Cumulative sums on the device, along every axis, against the CPU's:
/// rows longer than one tile (the carry), and views.
#[test]
fn cumsum_matches_the_cpu() {
    let Some(_) = device() else { return };
    let cases: [&[usize]; 5] = [&[10_007], &[37, 4099], &[3, 50_000], &[5, 6, 7], &[1, 1]];
    let mut checked = 0;
    for shape in cases {
        for &t in &DTYPES {
            let a = sample(shape, t, 3);
            for axis in 0..shape.len() {
                let cpu = reduce::cumulative(&a, axis, false).expect("cpu");
                let gpu = scan::cumsum(&up(&a), axis).expect("gpu").to_host().expect("down");
                // Long f32 rows: the device adds in another order.
                let what = format!("cumsum of {t} {shape:?} along {axis}");
                if t.is_float() {
                    let tol = if t == DType::F32 { 1e-3 } else { 1e-10 };
                    for (p, q) in gpu.cast::<f64>().iter().zip(cpu.cast::<f64>().iter()) {
                        assert!((p - q).abs() <= tol * (1.0 + q.abs()), "{what}: {p} vs {q}");
                    }
                    assert_eq!(gpu.shape(), cpu.shape());
                } else {
                    close(&gpu, &cpu, &what);
                }
                checked += 1;
            }
        }
    }
    let v = up(&sample(&[40, 30], DType::F64, 1)).transpose(&[1, 0]).expect("view");
    let cpu = reduce::cumulative(&v.to_host().expect("down"), 1, false).expect("cpu");
    close(&scan::cumsum(&v, 1).expect("gpu").to_host().expect("down"), &cpu, "cumsum of a transposed view");
    assert!(checked >= 30, "{checked}");
}

#[test]
fn matrix_products_match_the_cpu() {
    let Some(_) = device() else { return };
    for t in [DType::F32, DType::F64] {
        let a = sample(&[33, 17], t, 1);
        let b = sample(&[17, 29], t, 2);
        let bt =
            crate::array::shape::transpose(&sample(&[29, 17], t, 3), &[1, 0]).expect("t").to_contiguous();
        let cpu =
            crate::array::linalg::matmul_sum(&[a.clone(), a.clone()], &[b.clone(), bt.clone()]).expect("cpu");
        let gbt = up(&sample(&[29, 17], t, 3)).transpose(&[1, 0]).expect("view");
        let gpu = linalg::matmul_sum(&[up(&a), up(&a)], &[up(&b), gbt]).expect("gpu").expect("native");
        let tol_scale = if t == DType::F32 { 1e-3 } else { 1e-9 };
        let (g, c) = (gpu.to_host().expect("down").cast::<f64>(), cpu.cast::<f64>());
        assert_eq!(g.shape(), c.shape());
        for (p, q) in g.iter().zip(c.iter()) {
            assert!((p - q).abs() <= tol_scale * (1.0 + q.abs()), "{t} matmul: {p} vs {q}");
        }
        let gram = linalg::gram_sum(&[up(&a)]).expect("gram").expect("native").to_host().expect("down");
        let cg = crate::array::linalg::gram_sum(std::slice::from_ref(&a)).expect("cpu gram");
        for (p, q) in gram.cast::<f64>().iter().zip(cg.cast::<f64>().iter()) {
            assert!((p - q).abs() <= tol_scale * (1.0 + q.abs()), "{t} gram: {p} vs {q}");
        }
    }
}

fn run(a: &arr::Array) -> Chunk {
    let rt = Runtime::new(LocalConfig { threads: 4, ..LocalConfig::default() }, Arc::new(NoUdfs));
    let (layer, key) = arr::finalize(a);
    let v = rt.compute(graph(&[layer]), &[key], &CancelToken::new()).expect("compute");
    match &v[0] {
        Value::Array(c) => Chunk::clone(c),
        other => panic!("not a host array: {other:?}"),
    }
}

fn spec(v: &[i64]) -> ChunkSpec {
    ChunkSpec::PerAxis(v.iter().map(|&s| AxisChunks::Size(s)).collect())
}

/// Whole graphs through the local scheduler: fused chains, tree
/// reductions, products, rechunking, slicing, with uneven chunks.
#[test]
fn graphs_on_gpu_blocks_match_the_cpu() {
    let Some(_) = device() else { return };
    let cpu = Ctx::default();
    let gpu = Ctx { gpu: true, ..Ctx::default() };
    let x = arr::random(
        &cpu,
        &[301, 301],
        &spec(&[100, 100]),
        7,
        crate::array::create::Dist::Uniform,
        DType::F64,
    )
    .expect("x");
    let g = arr::to_gpu(&cpu, &x).expect("to_gpu");
    let both = |f: &dyn Fn(&arr::Array) -> arr::Array, what: &str| {
        close(&run(&f(&g)), &run(&f(&x)), what);
    };
    both(
        &|a| {
            let t = arr::transpose(&cpu, a, None).expect("t");
            let s = arr::binary(&cpu, BinOp::Add, &Lazy::Array(a.clone()), &Lazy::Array(t)).expect("+");
            let m = arr::binary(&cpu, BinOp::Mul, &Lazy::Array(s), &Lazy::Scalar(Scalar::Int(2))).expect("*");
            let r = arr::reduction(&cpu, &m, Reduction::Mean, Some(&[0]), false, None).expect("mean");
            arr::reduction(&cpu, &r, Reduction::Sum, None, false, None).expect("sum")
        },
        "((x + x.T) * 2).mean(0).sum()",
    );
    both(
        &|a| {
            let t = arr::transpose(&cpu, a, None).expect("t");
            let p = arr::matmul(&cpu, a, &t).expect("@");
            arr::reduction(&cpu, &p, Reduction::Sum, None, false, None).expect("sum")
        },
        "(x @ x.T).sum()",
    );
    // Reductions fused with the chain before them.
    both(
        &|a| {
            let m = arr::binary(&cpu, BinOp::Mul, &Lazy::Array(a.clone()), &Lazy::Scalar(Scalar::Int(3)))
                .expect("*");
            let d =
                arr::binary(&cpu, BinOp::Sub, &Lazy::Array(m), &Lazy::Scalar(Scalar::Float(1.0))).expect("-");
            arr::reduction(&cpu, &d, Reduction::Sum, None, false, None).expect("sum")
        },
        "(x * 3 - 1).sum()",
    );
    both(
        &|a| {
            let d = arr::binary(&cpu, BinOp::Sub, &Lazy::Array(a.clone()), &Lazy::Scalar(Scalar::Float(0.5)))
                .expect("-");
            let q = arr::binary(&cpu, BinOp::Mul, &Lazy::Array(d.clone()), &Lazy::Array(d)).expect("*");
            let v =
                arr::reduction(&cpu, &q, Reduction::Var { ddof: 1 }, Some(&[0]), false, None).expect("var");
            let mx = arr::reduction(&cpu, &q, Reduction::Max, Some(&[1]), false, None).expect("max");
            arr::binary(&cpu, BinOp::Add, &Lazy::Array(v), &Lazy::Array(mx)).expect("+")
        },
        "((x - 0.5)**2).var(0) + ((x - 0.5)**2).max(1)",
    );
    both(&|a| arr::rechunk(&cpu, a, &spec(&[77, 150])).expect("rechunk"), "rechunk");
    both(
        &|a| arr::reduction(&cpu, a, Reduction::Std { ddof: 0 }, Some(&[1]), true, None).expect("std"),
        "std(axis=1)",
    );
    both(
        &|a| arr::reduction(&cpu, a, Reduction::ArgMax, Some(&[0]), false, None).expect("argmax"),
        "argmax (host)",
    );
    // Under the GPU backend, creation makes GPU blocks: reproducible per
    // seed and chunking, uniform on [0, 1).
    let r1 = arr::random(
        &gpu,
        &[1000, 1000],
        &spec(&[300, 1000]),
        5,
        crate::array::create::Dist::Uniform,
        DType::F32,
    )
    .expect("r");
    let r2 = arr::random(
        &gpu,
        &[1000, 1000],
        &spec(&[300, 1000]),
        5,
        crate::array::create::Dist::Uniform,
        DType::F32,
    )
    .expect("r");
    let (a, b) = (run(&r1), run(&r2));
    assert_eq!(a, b, "same seed and chunks, same numbers");
    // The local worker offers the GPUs once a graph has GPU tasks.
    let rt = Runtime::new(LocalConfig { threads: 2, ..LocalConfig::default() }, Arc::new(NoUdfs));
    let gpus = |rt: &Runtime| -> f64 {
        rt.workers()[0].resources.iter().filter(|(n, _)| n == "GPU").map(|(_, x)| x).sum()
    };
    let host = arr::full(&cpu, &[10], &spec(&[5]), Scalar::Float(1.0), DType::F64).expect("ones");
    let (layer, key) = arr::finalize(&host);
    rt.compute(graph(&[layer]), &[key], &CancelToken::new()).expect("host compute");
    assert_eq!(gpus(&rt), 0.0, "a host graph takes no GPU");
    let (layer, key) = arr::finalize(&r1);
    rt.compute(graph(&[layer]), &[key], &CancelToken::new()).expect("gpu compute");
    let devices = brisk_gpu::runtime().expect("runtime").devices().len() as f64;
    assert_eq!(gpus(&rt), devices, "one GPU resource per device");
    let v = a.cast::<f64>();
    assert!(v.iter().all(|&p| (0.0..1.0).contains(&p)));
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    assert!((mean - 0.5).abs() < 0.005, "mean {mean}");
    let n = arr::random(
        &gpu,
        &[400_000],
        &spec(&[100_000]),
        9,
        crate::array::create::Dist::Normal { mean: 3.0, std: 2.0 },
        DType::F64,
    )
    .expect("n");
    let v = run(&n).cast::<f64>();
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let sd = (v.iter().map(|p| (p - m) * (p - m)).sum::<f64>() / v.len() as f64).sqrt();
    assert!((m - 3.0).abs() < 0.02 && (sd - 2.0).abs() < 0.02, "normal: mean {m}, std {sd}");
    let z = arr::full(&gpu, &[5, 3], &spec(&[2, 3]), Scalar::Float(1.5), DType::F32).expect("full");
    assert_eq!(run(&z), Chunk::full(&[5, 3], Scalar::Float(1.5), DType::F32));
}

/// On a host with several GPUs: threads are dealt over the devices, and a
/// task whose blocks lie on different devices brings them together (peer
/// copies) with the answers of one device.
#[test]
fn blocks_on_different_gpus_meet_on_one() {
    let Some(_) = device() else { return };
    let rt = brisk_gpu::runtime().expect("runtime");
    let devices = rt.devices();
    if devices.len() < 2 {
        eprintln!("skipped: one GPU here ({} peer access needs two)", devices[0].name());
        return;
    }
    let homes: std::collections::BTreeSet<usize> = (0..2 * devices.len())
        .map(|_| std::thread::spawn(|| default_device().expect("home").ordinal()).join().expect("thread"))
        .collect();
    assert_eq!(homes.len(), devices.len(), "threads dealt over every device: {homes:?}");
    eprintln!("peer access 0 -> 1: {}", rt.peer_access(0, 1));
    let (d0, d1) = (&devices[0], &devices[1]);
    let a = sample(&[300, 200], DType::F64, 1);
    let b = sample(&[200, 300], DType::F64, 2);
    let ga = GpuChunk::from_host(&a, d0).expect("up 0");
    let gb = GpuChunk::from_host(&b, d1).expect("up 1");
    // A whole buffer moved, and a transposed view of it, and a slice.
    let moved = gb.to_device(d0).expect("peer copy");
    assert_eq!(moved.device().ordinal(), 0);
    assert_eq!(moved.to_host().expect("down"), b);
    let bt = crate::array::shape::transpose(&b, &[1, 0]).expect("t");
    assert_eq!(gb.transpose(&[1, 0]).expect("t").to_device(d0).expect("copy").to_host().expect("down"), bt);
    // An expression over leaves on two devices.
    let e = Expr::binary(
        BinOp::Add,
        Term::Expr(Expr::leaf(ga.clone())),
        Term::Expr(Expr::leaf(gb.transpose(&[1, 0]).expect("t"))),
    )
    .expect("expr");
    let cpu = elementwise::binary(BinOp::Add, Operand::Chunk(&a), Operand::Chunk(&bt)).expect("cpu");
    close(&materialize(&e).expect("eval").to_host().expect("down"), &cpu, "a (GPU 0) + b.T (GPU 1)");
    // A product and a reduction merge through the task executor.
    let prod = crate::array::exec::execute(
        &crate::array::op::ArrayOp::Matmul { nk: 1 },
        &[exec::gpu_value(ga.clone()), exec::gpu_value(gb.clone())],
    )
    .expect("matmul across devices");
    let Value::Gpu(p) = prod else { panic!("not on a GPU: {prod:?}") };
    let cpu_p = crate::array::linalg::matmul_sum(std::slice::from_ref(&a), std::slice::from_ref(&b))
        .expect("cpu matmul");
    for (x, y) in p.to_host().expect("down").cast::<f64>().iter().zip(cpu_p.cast::<f64>().iter()) {
        assert!((x - y).abs() <= 1e-9 * (1.0 + y.abs()), "matmul: {x} vs {y}");
    }
    let red = Reduction::Sum;
    let part = |g: &GpuChunk| {
        crate::array::exec::execute(
            &crate::array::op::ArrayOp::Partial { red, axes: vec![0], place: BlockPlace::default() },
            &[exec::gpu_value(g.clone())],
        )
        .expect("partial")
    };
    let b2 = GpuChunk::from_host(&a, d1).expect("up 1");
    let merged = crate::array::exec::execute(
        &crate::array::op::ArrayOp::Aggregate { red, axes: vec![0], keepdims: false, out: DType::F64 },
        &[part(&ga), part(&b2)],
    )
    .expect("merge across devices");
    let Value::Gpu(m) = merged else { panic!("not on a GPU: {merged:?}") };
    let col = reduce::finalize(
        red,
        &reduce::partial(red, &a, &[0], &BlockPlace::default()).expect("p"),
        &[0],
        false,
        DType::F64,
    )
    .expect("f");
    let twice =
        elementwise::binary(BinOp::Mul, Operand::Chunk(&col), Operand::Scalar(Scalar::Int(2))).expect("2x");
    close(&m.to_host().expect("down"), &twice, "sum over blocks on two GPUs");
}

#[test]
fn mixing_host_and_gpu_blocks_is_refused() {
    let Some(_) = device() else { return };
    let a = sample(&[3], DType::F64, 0);
    let e = crate::array::exec::execute(
        &crate::array::op::ArrayOp::Binary(BinOp::Add),
        &[Value::array(a.clone()), super::exec::gpu_value(up(&a))],
    )
    .expect_err("mixed");
    assert!(e.to_string().contains("cannot mix a GPU array and a CPU array"), "{e}");
}

/// Where there is no GPU, asking for one is a clear error, not a panic.
#[test]
fn without_a_gpu_every_gpu_call_says_why() {
    if default_device().is_ok() {
        return;
    }
    let cpu = Ctx::default();
    let x = arr::full(&cpu, &[4], &spec(&[2]), Scalar::Int(1), DType::I64).expect("x");
    let e = arr::to_gpu(&cpu, &x).expect_err("no GPU");
    assert!(e.to_string().starts_with("no GPU: "), "{e}");
    let e = crate::array::exec::execute(
        &crate::array::op::ArrayOp::OnGpu(Box::new(crate::array::op::ArrayOp::Full {
            shape: vec![2],
            value: Scalar::Int(0),
            dtype: DType::F64,
        })),
        &[],
    )
    .expect_err("no GPU");
    assert!(e.to_string().starts_with("no GPU: "), "{e}");
}

/// Largest elementwise difference relative to the largest magnitude.
fn rel_diff(a: &Chunk, b: &Chunk) -> f64 {
    assert_eq!(a.shape(), b.shape());
    let (x, y) = (a.cast::<f64>(), b.cast::<f64>());
    let scale = y.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
    x.iter().zip(y.iter()).fold(0.0f64, |m, (p, q)| m.max((p - q).abs())) / scale
}

/// cuSOLVER factorizations through whole graphs: TSQR with blocks factored
/// in stage one and blocks that go to stage two whole, SVDs of tall, wide
/// and single blocks, solves and least squares, against the CPU path.
/// Factors are unique up to signs, so Q and R are checked by what they
/// must satisfy and R against the CPU's up to row signs.
#[test]
fn factorizations_match_the_cpu() {
    let Some(_) = device() else { return };
    let cpu = Ctx::default();
    let mm = |a: &arr::Array, b: &arr::Array| arr::matmul(&cpu, a, b).expect("@");
    let t = |a: &arr::Array| arr::transpose(&cpu, a, None).expect("T");
    for (shape, chunks, dtype) in [
        ([600usize, 40usize], [100i64, 40i64], DType::F64),
        ([600, 40], [60, 40], DType::F64),
        ([1000, 64], [250, 64], DType::F32),
        ([90, 90], [90, 90], DType::F64),
    ] {
        let x = arr::random(&cpu, &shape, &spec(&chunks), 11, crate::array::create::Dist::Uniform, dtype)
            .expect("x");
        let g = arr::to_gpu(&cpu, &x).expect("to_gpu");
        let what = format!("{shape:?} chunks {chunks:?} {dtype}");
        let tol = if dtype == DType::F32 { 1e-4 } else { 1e-11 };
        let host_x = run(&x);
        let (q, r) = arr::qr(&cpu, &g).expect("qr");
        assert!(rel_diff(&run(&mm(&q, &r)), &host_x) < tol, "Q·R = x: {what}");
        let qtq = run(&mm(&t(&q), &q));
        let eye = crate::array::create::eye(shape[1], shape[1], 0, dtype);
        assert!(rel_diff(&qtq, &eye) < tol * 10.0, "QᵀQ = I: {what}");
        let (gr, cr) = (run(&r).cast::<f64>(), run(&arr::qr(&cpu, &x).expect("cpu qr").1).cast::<f64>());
        let n = shape[1];
        for i in 0..n {
            for j in 0..n {
                let (p, c) = (gr[[i, j]], cr[[i, j]]);
                if j < i {
                    assert_eq!(p, 0.0, "R is upper triangular: {what}");
                } else {
                    assert!((p.abs() - c.abs()).abs() <= tol * 100.0 * (1.0 + c.abs()), "|R|: {what}");
                }
            }
        }
        let (u, s, vt) = arr::svd(&cpu, &g).expect("svd");
        let (_, cs, _) = arr::svd(&cpu, &x).expect("cpu svd");
        assert!(rel_diff(&run(&s), &run(&cs)) < tol * 10.0, "singular values: {what}");
        let us = arr::binary(&cpu, BinOp::Mul, &Lazy::Array(u), &Lazy::Array(s)).expect("u·s");
        assert!(rel_diff(&run(&mm(&us, &vt)), &host_x) < tol * 10.0, "U·S·Vᵀ = x: {what}");
    }
    // Under the GPU backend TSQR factors the stacked blocks at once.
    let gctx = Ctx { gpu: true, ..Ctx::default() };
    let x =
        arr::random(&cpu, &[900, 30], &spec(&[300, 30]), 12, crate::array::create::Dist::Uniform, DType::F64)
            .expect("x");
    let (q, r) = arr::qr(&gctx, &arr::to_gpu(&cpu, &x).expect("to_gpu")).expect("qr");
    assert!(rel_diff(&run(&mm(&q, &r)), &run(&x)) < 1e-11, "whole TSQR: Q·R = x");
    assert!(rel_diff(&run(&mm(&t(&q), &q)), &crate::array::create::eye(30, 30, 0, DType::F64)) < 1e-10);
    let (_, s, _) = arr::svd(&gctx, &arr::to_gpu(&cpu, &x).expect("to_gpu")).expect("svd");
    assert!(rel_diff(&run(&s), &run(&arr::svd(&cpu, &x).expect("cpu svd").1)) < 1e-11, "values alone");
    // The randomized SVD: its test matrix follows the array to the GPU.
    let x =
        arr::random(&cpu, &[800, 120], &spec(&[200, 60]), 3, crate::array::create::Dist::Uniform, DType::F64)
            .expect("x");
    let g = arr::to_gpu(&cpu, &x).expect("to_gpu");
    let (_, gs, _) = arr::svd_compressed(&cpu, &g, 10, 1, 10, 2).expect("svd_compressed");
    let (_, cs, _) = arr::svd_compressed(&cpu, &x, 10, 1, 10, 2).expect("cpu svd_compressed");
    assert!(rel_diff(&run(&gs), &run(&cs)) < 1e-10, "svd_compressed singular values");
    // A wide single block, factored as its transpose.
    let w =
        arr::random(&cpu, &[30, 70], &spec(&[30, 70]), 4, crate::array::create::Dist::Uniform, DType::F64)
            .expect("w");
    let gw = arr::to_gpu(&cpu, &w).expect("to_gpu");
    let (u, s, vt) = arr::svd(&cpu, &gw).expect("svd");
    let (_, cs, _) = arr::svd(&cpu, &w).expect("cpu svd");
    assert!(rel_diff(&run(&s), &run(&cs)) < 1e-11, "wide singular values");
    let us = arr::binary(&cpu, BinOp::Mul, &Lazy::Array(u), &Lazy::Array(s)).expect("u·s");
    assert!(rel_diff(&run(&mm(&us, &vt)), &run(&w)) < 1e-11, "wide U·S·Vᵀ");
    // solve and lstsq.
    let a = arr::random(
        &cpu,
        &[50, 50],
        &spec(&[25, 25]),
        5,
        crate::array::create::Dist::Normal { mean: 0.0, std: 1.0 },
        DType::F64,
    )
    .expect("a");
    let b = arr::random(&cpu, &[50, 3], &spec(&[25, 3]), 6, crate::array::create::Dist::Uniform, DType::F64)
        .expect("b");
    let b1 = arr::random(&cpu, &[50], &spec(&[25]), 7, crate::array::create::Dist::Uniform, DType::F64)
        .expect("b1");
    let (ga, gb, gb1) = (
        arr::to_gpu(&cpu, &a).expect("a"),
        arr::to_gpu(&cpu, &b).expect("b"),
        arr::to_gpu(&cpu, &b1).expect("b1"),
    );
    for (gb, hb, what) in [(&gb, &b, "solve 2-d"), (&gb1, &b1, "solve 1-d")] {
        let gx = run(&arr::solve(&cpu, &ga, gb).expect("solve"));
        let cx = run(&arr::solve(&cpu, &a, hb).expect("cpu solve"));
        assert!(rel_diff(&gx, &cx) < 1e-10, "{what}");
    }
    let tall =
        arr::random(&cpu, &[400, 20], &spec(&[100, 20]), 8, crate::array::create::Dist::Uniform, DType::F64)
            .expect("tall");
    let rhs = arr::random(&cpu, &[400], &spec(&[100]), 9, crate::array::create::Dist::Uniform, DType::F64)
        .expect("rhs");
    let (gx, gres, grank, gs) =
        arr::lstsq(&cpu, &arr::to_gpu(&cpu, &tall).expect("t"), &arr::to_gpu(&cpu, &rhs).expect("r"))
            .expect("lstsq");
    let (cx, cres, crank, cs) = arr::lstsq(&cpu, &tall, &rhs).expect("cpu lstsq");
    assert!(rel_diff(&run(&gx), &run(&cx)) < 1e-10, "lstsq x");
    assert!(rel_diff(&run(&gres), &run(&cres)) < 1e-9, "lstsq residuals");
    assert_eq!(run(&grank), run(&crank), "lstsq rank");
    assert!(rel_diff(&run(&gs), &run(&cs)) < 1e-11, "lstsq singular values");
    // A singular matrix is the CPU's error.
    let z = arr::full(&cpu, &[4, 4], &spec(&[4, 4]), Scalar::Float(1.0), DType::F64).expect("ones");
    let gz = arr::to_gpu(&cpu, &z).expect("z");
    let four =
        arr::to_gpu(&cpu, &arr::full(&cpu, &[4], &spec(&[4]), Scalar::Float(1.0), DType::F64).expect("b"))
            .expect("b");
    let rt = Runtime::new(LocalConfig { threads: 2, ..LocalConfig::default() }, Arc::new(NoUdfs));
    let (layer, key) = arr::finalize(&arr::solve(&cpu, &gz, &four).expect("solve"));
    let e = rt.compute(graph(&[layer]), &[key], &CancelToken::new()).expect_err("singular");
    assert!(e.to_string().contains("singular"), "{e}");
}

/// Whole results move off the device and back exactly (a CUDA worker's
/// spill), lists of blocks included; the copy rates are printed for
/// bench/README.md (scripts/gpu-tests.sh keeps the test's output).
#[test]
fn results_move_to_the_host_and_back_exactly() {
    let Some(dev) = device() else { return };
    let c = sample(&[1000, 3], DType::F64, 5);
    let g = Value::Gpu(Arc::new(up(&c)));
    let t = Value::Gpu(Arc::new(up(&c).transpose(&[1, 0]).expect("a view")));
    let v = Value::list(vec![g.clone(), Value::Int(3), t]);
    assert_eq!(place::device_bytes(&v), 2 * 24_000);
    let host = place::to_host(&v).expect("to the host");
    assert_eq!(place::device_bytes(&host), 0);
    let Value::List(items) = &host else { panic!("a list") };
    assert!(matches!(&items[0], Value::Array(a) if **a == c));
    assert_eq!(items[1], Value::Int(3));
    assert!(matches!(&items[2], Value::Array(a) if a.shape() == [3, 1000]));
    let back = place::to_device(&host).expect("back on the device");
    assert_eq!(place::device_bytes(&back), 2 * 24_000);
    assert_eq!(place::to_host(&back).expect("again"), host);
    // One 1 GiB block each way, timed (a plain pinned copy is bench/gpu's reference).
    let big = GpuChunk::alloc(&dev, DType::F64, &[1 << 27]).expect("1 GiB");
    big.buffer().fill_bytes(0x3f).expect("fill");
    dev.synchronize().expect("sync");
    let v = Value::Gpu(Arc::new(big));
    for _ in 0..2 {
        let t0 = std::time::Instant::now();
        let host = place::to_host(&v).expect("to the host");
        let down = t0.elapsed().as_secs_f64();
        let t0 = std::time::Instant::now();
        let back = place::to_device(&host).expect("back");
        dev.synchronize().expect("sync");
        let upload = t0.elapsed().as_secs_f64();
        let gb = (1u64 << 30) as f64 / 1e9;
        eprintln!(
            "spill copy of 1 GiB: device to host {:.1} GB/s, host to device {:.1} GB/s",
            gb / down,
            gb / upload
        );
        assert_eq!(place::device_bytes(&back), 1 << 30);
    }
}

fn try_run(a: &arr::Array) -> Result<Chunk, String> {
    let rt = Runtime::new(LocalConfig { threads: 2, ..LocalConfig::default() }, Arc::new(NoUdfs));
    let (layer, key) = arr::finalize(a);
    let v = rt.compute(graph(&[layer]), &[key], &CancelToken::new()).map_err(|e| e.to_string())?;
    match &v[0] {
        Value::Array(c) => Ok(Chunk::clone(c)),
        other => Err(format!("not a host array: {other:?}")),
    }
}

/// Users' kernels (`elementwise_kernel`, `reduction_kernel`,
/// `raw_kernel`) against the built-in operations on the same arrays:
/// broadcasting across uneven chunks, fused chains around them, every
/// reduction axis, `_in_ind.size()`, a raw kernel per block and from a
/// task; a compile error shows NVRTC's log counted in the user's lines.
#[test]
fn users_kernels_match_the_built_in_operations() {
    use super::user::{ElementwiseSpec, RawSpec, ReductionSpec};
    let Some(_) = device() else { return };
    let cpu = Ctx::default();
    let rand = |shape: &[usize], chunks: &[i64], seed: u64, t: DType| {
        let x =
            arr::random(&cpu, shape, &spec(chunks), seed, crate::array::create::Dist::Uniform, t).expect("x");
        arr::to_gpu(&cpu, &x).expect("to_gpu")
    };
    let bin =
        |op: BinOp, a: &arr::Array, b: Lazy| arr::binary(&cpu, op, &Lazy::Array(a.clone()), &b).expect("op");
    let fma = ElementwiseSpec::new("T x, T y, float64 s", "T z", "z = x * y + s", "fma").expect("spec");
    for t in [DType::F64, DType::F32] {
        let x = rand(&[301, 301], &[100, 120], 1, t);
        let y = rand(&[301], &[77], 2, t);
        let mine = arr::user_elementwise(
            &cpu,
            &fma,
            &[Lazy::Array(x.clone()), Lazy::Array(y.clone()), Lazy::Scalar(Scalar::Float(0.25))],
        )
        .expect("fma");
        let theirs =
            bin(BinOp::Add, &bin(BinOp::Mul, &x, Lazy::Array(y.clone())), Lazy::Scalar(Scalar::Float(0.25)));
        close(&run(&mine), &run(&theirs), &format!("{t} fma with a broadcast row"));
        // Fused with the chain after it, and folded by a reduction.
        let chain = |a: &arr::Array| {
            let m = bin(BinOp::Mul, a, Lazy::Scalar(Scalar::Int(2)));
            arr::reduction(&cpu, &m, Reduction::Sum, Some(&[0]), false, None).expect("sum")
        };
        close(&run(&chain(&mine)), &run(&chain(&theirs)), &format!("{t} (fma * 2).sum(0)"));
    }
    let x = rand(&[301, 257], &[100, 64], 3, DType::F64);
    let sq = bin(BinOp::Mul, &x, Lazy::Array(x.clone()));
    let l2 =
        ReductionSpec::new("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm", None).expect("l2");
    let mean = ReductionSpec::new("T x", "T y", "x", "a + b", "y = a / _in_ind.size()", "0", "mymean", None)
        .expect("mean");
    let max =
        ReductionSpec::new("T x", "T y", "x", "max(a, b)", "y = a", "-INFINITY", "mymax", None).expect("max");
    for (axes, keep) in
        [(None, false), (Some(vec![0i64]), false), (Some(vec![1]), true), (Some(vec![0, 1]), true)]
    {
        let ax = axes.as_deref();
        let what = format!("over {axes:?} keepdims {keep}");
        let mine = arr::user_reduction(&cpu, &l2, &[Lazy::Array(x.clone())], ax, keep).expect("l2");
        let s = arr::reduction(&cpu, &sq, Reduction::Sum, ax, keep, None).expect("sum");
        let theirs = arr::unary(&cpu, UnOp::Sqrt, &s).expect("sqrt");
        close(&run(&mine), &run(&theirs), &format!("l2norm {what}"));
        let mine = arr::user_reduction(&cpu, &mean, &[Lazy::Array(x.clone())], ax, keep).expect("mean");
        let theirs = arr::reduction(&cpu, &x, Reduction::Mean, ax, keep, None).expect("mean");
        close(&run(&mine), &run(&theirs), &format!("mean {what}"));
        let mine = arr::user_reduction(&cpu, &max, &[Lazy::Array(sq.clone())], ax, keep).expect("max");
        let theirs = arr::reduction(&cpu, &sq, Reduction::Max, ax, keep, None).expect("max");
        close(&run(&mine), &run(&theirs), &format!("max of a fused map {what}"));
    }
    // A raw kernel on every block, and from a task on host arrays.
    let src = r#"extern "C" __global__ void scale(const double* x, double* y, long long n, double k) {
        long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = x[i] * k;
    }"#;
    let raw = RawSpec::new(src, "scale").expect("raw");
    let launch = raw::RawLaunch {
        grid: None,
        block: [128, 1, 1],
        shared: 0,
        args: vec![Scalar::Float(3.0)],
        dtype: DType::F64,
    };
    let t = arr::transpose(&cpu, &x, None).expect("t");
    let mine = arr::map_blocks_gpu(&cpu, &t, &raw, launch).expect("map_blocks_gpu");
    close(
        &run(&mine),
        &run(&bin(BinOp::Mul, &t, Lazy::Scalar(Scalar::Float(3.0)))),
        "raw kernel on transposed blocks",
    );
    let host = sample(&[1000], DType::F64, 1);
    let out = Chunk::full(&[1000], Scalar::Float(0.0), DType::F64);
    let got = raw::launch_host(
        &raw,
        [8, 1, 1],
        [128, 1, 1],
        0,
        &[
            raw::HostArg::Array(host.clone()),
            raw::HostArg::Array(out),
            raw::HostArg::Scalar(Scalar::Int(1000)),
            raw::HostArg::Scalar(Scalar::Float(-2.0)),
        ],
    )
    .expect("launch");
    let want = elementwise::binary(BinOp::Mul, Operand::Chunk(&host), Operand::Scalar(Scalar::Float(-2.0)))
        .expect("*");
    close(&got[1], &want, "raw kernel launched from a task");
    // A compile error names the kernel and the line of the user's body.
    let bad =
        ElementwiseSpec::new("float64 x", "float64 y", "double t = x;\ny = t + q", "typo").expect("spec");
    let e = try_run(&arr::user_elementwise(&cpu, &bad, &[Lazy::Array(x.clone())]).expect("lazy"))
        .expect_err("refused");
    assert!(e.contains("did not compile") && e.contains("typo(2): error") && e.contains("\"q\""), "{e}");
    let missing =
        RawSpec::new("extern \"C\" __global__ void scale2(double* y) {}\n// scale", "scale").expect("raw");
    let launch = raw::RawLaunch { grid: None, block: [32, 1, 1], shared: 0, args: vec![], dtype: DType::F64 };
    let e = try_run(&arr::map_blocks_gpu(&cpu, &x, &missing, launch).expect("lazy")).expect_err("refused");
    assert!(e.contains("has no kernel named scale"), "{e}");
}

#[test]
fn unique_of_few_values_matches_the_host() {
    if device().is_none() {
        return;
    }
    let f: Vec<f64> = (0..100_000).map(|i| [3.5, -0.0, 0.0, -2.0, 1e300][i % 5]).collect();
    let i: Vec<i64> = (0..70_000).map(|i| (i % 7) as i64 * 1_000_000_007 - 3_000_000_021).collect();
    let b: Vec<bool> = (0..1000).map(|i| i % 3 == 0).collect();
    let cases = [
        Chunk::from_vec(&[100_000], f.clone()).expect("f64"),
        Chunk::from_vec(&[100_000], f).expect("f64").astype(DType::F32),
        Chunk::from_vec(&[70_000], i).expect("i64"),
        Chunk::from_vec(&[1000], b).expect("bool"),
        Chunk::from_vec(&[0], Vec::<f64>::new()).expect("empty"),
    ];
    for c in &cases {
        let got = super::unique::few_distinct(&up(c)).expect("unique").expect("few values");
        let want = crate::array::shape::unique(c);
        assert_eq!(got.to_host().expect("download").wire_bytes(), want.wire_bytes(), "{:?}", c.dtype());
    }
    // NaN, or more distinct values than the device table holds: the host's.
    let nan = Chunk::from_vec(&[3], vec![1.0, f64::NAN, 1.0]).expect("nan");
    assert!(super::unique::few_distinct(&up(&nan)).expect("unique").is_none());
    let many = Chunk::from_vec(&[5000], (0..5000).map(|i| i as f64).collect()).expect("many");
    assert!(super::unique::few_distinct(&up(&many)).expect("unique").is_none());
}
