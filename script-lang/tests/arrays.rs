//! Arrays against NumPy: the same expressions on the same inputs, in brisk
//! (on both local schedulers, with chunks that do not divide the shapes)
//! and in NumPy (`tests/reference/numpy_arrays.py`), compared value by
//! value and dtype by dtype.

mod common;

use brisk_script::Session;
use common::{Need, SCHEDULERS, entries, imports, number, python, reference, run_python, same, section};

/// The Python with NumPy: without one the test is skipped with a message,
/// except on CI, where it must run.
const NUMPY: Need = Need {
    module: Some("numpy"),
    on_ci: "NumPy is needed for the array tests on CI; .ci/run sets BRISK_PYTHON ({python})",
    skipped: "skipped: no Python with NumPy (set BRISK_PYTHON, see scripts/python-env.sh)",
};

const INPUTS: &str = r#"
let A = random([37, 23], #{chunks: [10, 6], seed: 7});
let B = random([23], #{chunks: 5, seed: 8});
let I = arange(-20, 20, 3, #{chunks: 4});
let S = random([23, 23], #{chunks: 7, seed: 9});
let T = random([200, 6], #{chunks: [50, -1], seed: 10});
let y = random([200], #{chunks: 50, seed: 11});
"#;

const CASES: &str = r#"
let F = A.astype("f32");
let Iv = I.compute().to_array();
let Iw = Iv + [];
let outer = from_array(Iv.map(|i| Iw.map(|j| i * j)));
let Tr = T.rechunk([30, -1]);
let N = where(A > 0.7, 0.0 / 0.0, A);
let M = where(arange(23) == 4, 0.0 / 0.0, N);
let R = randint(-3, 5, [1000], #{seed: 3, chunks: 300});
let P = S @ S.T + eye(23, #{chunks: 7}) * 23;
let pair = delayed(|i| [[i, 1.5], [2, i]]);
let cases = #{
    blockwise_matmul: blockwise(|a, b| a.matmul(b), "ik", [A, "ij", S, "jk"], #{concatenate: true}),
    blockwise_lists: blockwise(|bs| { let t = bs[0].sum(1); for i in 1..bs.len() { t = t + bs[i].sum(1) } t }, "i", [A, "ij"]),
    blockwise_literal: blockwise(|a, k| a * k, "ij", [A, "ij", 2.5, ()]),
    blockwise_transpose: blockwise(|a| a.T, "ji", [A, "ij"]),
    blockwise_broadcast_contracted: blockwise(|xs, ss| { let t = (xs[0] * ss[0]).sum(1); for k in 1..xs.len() { t = t + (xs[k] * ss[k]).sum(1) } t }, "i", [A, "ij", A.sum(1, #{keepdims: true}), "ij"]),
    local_reshape: A.compute().reshape([23, -1]),
    local_ravel: A.compute().T.ravel(),
    local_expand: expand_dims(B.compute(), -1),
    local_squeeze: A.sum(1, #{keepdims: true}).compute().squeeze(),
    local_squeeze0: A.sum(0, #{keepdims: true}).compute().squeeze(0),
    blockwise_broadcast: blockwise(|a, m, c| a - m + c, "ij", [A, "ij", A.mean(0, #{keepdims: true}), "ij", A.sum(1, #{keepdims: true}), "ij"]),
    from_delayed_block: from_delayed(A.to_delayed()[1][2], #{shape: [10, 6]}) * 2,
    from_delayed_lists: concatenate([from_delayed(pair.call(0), #{shape: [2, 2]}), from_delayed(pair.call(1), #{shape: [2, 2], dtype: "f32"})]),
    add: A + B,
    sub_scalar: 1.5 - A,
    mul_T: A.T * 2,
    div: A / (B + 1),
    pow: A ** 2,
    "mod": (A * 10) % 3,
    neg: -A,
    cmp: A > 0.5,
    eq: (A * 0) == 0,
    "and": (A > 0.2) & (A < 0.8),
    "not": !(A > 0.5),
    "where": where(A > 0.5, A, -B),
    maximum: maximum(A, B),
    sum: A.sum(),
    sum0: A.sum(0),
    sum1k: A.sum(1, #{keepdims: true}),
    mean: A.mean(),
    mean0: A.mean(0),
    std: A.std(),
    std1: A.std(1, #{ddof: 1}),
    var0: A.variance(0),
    min1: A.min(1),
    max: A.max(),
    argmin: A.argmin(),
    argmax0: A.argmax(0),
    argmax1: A.argmax(1),
    prod0: (A + 0.5).prod(0),
    any0: (A > 0.9).any(0),
    all1: (A > 0.05).all(1),
    sqrt: sqrt(A),
    exp: exp(A),
    log: log(A + 1),
    log10: log10(A + 1),
    sin: sin(A),
    tanh: tanh(A),
    floor: floor(A * 10),
    ceil: ceil(A * 10),
    round: round(A * 10 - 5),
    abs: abs(A - 0.5),
    isnan: isnan(where(A > 0.5, A, 0.0 / 0.0)),
    clip: A.clip(0.2, 0.8),
    int_floordiv: floor_divide(I, 4),
    int_mod: I % 4,
    int_div: I / 4,
    int_mul_float: I * 0.5,
    int_pow: I ** 2,
    int_sum: I.sum(),
    int_mean: I.mean(),
    int_neg_floordiv: floor_divide(I, -3),
    astype: (A * 10).astype("i64"),
    bool_sum: (A > 0.5).sum(0),
    f32_mul: F * 2.0,
    f32_sum0: F.sum(0),
    f32_mean: F.mean(),
    f32_plus_f64: F + A,
    f32_plus_int: F + from_array([3]),
    transpose_sum: (A.T + 1).sum(1),
    rechunk_sum0: A.rechunk([5, -1]).sum(0),
    b3_like: ((S + S.T) * 2).mean(0).sum(),
    broadcast_col: A + from_array(A.compute().to_array().map(|row| [row[0]])),
    linspace: linspace(0, 1, 11, #{chunks: 4}),
    arange: arange(-3, 3, 0.5, #{chunks: 5}),
    eye: eye(5, #{chunks: 2}),
    matmul_xxt: A @ A.T,
    matmul_vec: A @ B,
    dot_square: S.dot(S),
    matmul_sum: (A.T @ A).sum(),
    gram_cols: A.T @ A,
    gram_long: Tr.T @ Tr,
    gram_rows: Tr @ Tr.T,
    block_last: A.blocks([-1, 1]) * 1,
    block_sum: A.blocks().reduce(|acc, b| acc + b.sum(), 0.0),
    rev: B.slice([#{step: -1}]),
    rev_steps: A.slice([#{start: 35, stop: 3, step: -3}, #{step: -2}]),
    rev_neg: A.slice([#{start: -2, stop: -30, step: -4}, 5]),
    rev_sum: (A.slice([#{step: -2}, ()]) * 2).sum(0),
    rev_local: A.compute().slice([#{step: -1}, #{start: 20, step: -7}]),
    rev_empty: B.slice([#{start: 2, stop: 5, step: -1}]),
    fancy_rows: A[[1, 5, 7, 36, -1, 0, 12, 11]],
    fancy_vec: B[[22, 0, 5, 5, -23]] * 2,
    fancy_sum: A[[3, 30, 3]].sum(0),
    fancy_local: A.compute()[[2, -2]],
    fancy_none: A[[]],
    int_matmul: outer @ I,
    svd_s: svd(T)[1],
    svd_s_square: svd(S.rechunk(-1))[1],
    qr_abs_r: abs(qr(T)[1]),
    solve: solve(S, S.slice([(), 0]) + 1),
    lstsq_x: lstsq(T, y)[0],
    lstsq_res: lstsq(T, y)[1],
    lstsq_rank: lstsq(T, y)[2],
    norm: norm(A),
    norm_vec: norm(B),
    slice_steps: A.slice([#{start: 1, stop: -1, step: 4}, 5]),
    slice_cols: A.slice([(), #{start: 3, stop: 17, step: 3}]),
    slice_neg: A.slice([-5..=-1, -2]),
    index_row: A[7],
    concatenate0: concatenate([A, A * 2]),
    concatenate1: concatenate([A, A.slice([(), 0..5]) * 3], 1),
    stack1: stack([B, B + 1, B * 2], 1),
    reshape_1d_nd: I.reshape([2, 7]),
    reshape_2d: A.reshape([23, 37]),
    reshape_flat: A.T.reshape(-1).slice([0..50]),
    cumsum0: A.cumsum(0),
    cumsum1: (A > 0.5).cumsum(1),
    hist_counts: histogram(A, #{bins: 7, range: [0.1, 0.9]})[0],
    hist_edges: histogram(A, #{bins: 7, range: [0.1, 0.9]})[1],
    "mask": A.mask(A > 0.7),
    mask_1d: B.mask(B < 0.3) * 2 + 1,
    mask_sum: A.mask(A > 0.7).sum(),
    unique: unique(floor(A * 10)),
    unique_int: unique(I % 5),
    tensordot_1: tensordot(A.T, A, 1),
    tensordot_pairs: tensordot(A.reshape([37, 23, 1]) * ones([1, 1, 3]), A, [[0, 1], [0, 1]]),
    map_blocks: A.map_blocks(|b| sqrt(b) * 2.0 + 1.0),
    map_blocks_reduce: A.rechunk([10, -1]).map_blocks(|b| b.max(1), #{drop_axis: 1}),
    nansum0: N.nansum(0),
    nansum: N.nansum(),
    nanmean1: N.nanmean(1),
    nanmin0: M.nanmin(0),
    nanmax: N.nanmax(),
    nanmax1k: M.nanmax(1, #{keepdims: true}),
    nanstd0: M.nanstd(0, #{ddof: 1}),
    nanvar: N.nanvar(),
    nansum_int: I.nansum(),
    std_both_ddofs: A.std() - A.std(#{ddof: 1}),
    median0: A.median(0),
    median_all: A.median(),
    median1_nan: N.median(1),
    median_int: I.median(),
    median_keep: A.median([0, 1], #{keepdims: true}),
    pct: percentile(A, [5, 50, 99.5]),
    pct_axis: percentile(A, 30, #{axis: 1}),
    pct_int: percentile(I, [0, 25, 100]),
    cumprod0: (A + 0.5).cumprod(0),
    cumprod_int: (I % 3 + 1).cumprod(0),
    isinf: isinf(where(A > 0.5, 1.0 / 0.0, A)),
    log1p: log1p(A),
    expm1: expm1(A),
    sign: sign(A - 0.5),
    sign_int: sign(I),
    round1: round(A * 100, 1),
    round_neg: round(A * 1000, -2),
    round_int_neg: round(I * 37, -1),
    squeeze: A.slice([(), 0..1]).squeeze(),
    squeeze_axis: expand_dims(B, 0).squeeze(0),
    ravel: A.ravel(),
    expand_dims: expand_dims(B, 1),
    broadcast_to: broadcast_to(B, [4, 23]),
    vstack: vstack([B, B * 2]),
    hstack: hstack([A, A.slice([(), 0..3])]),
    hstack_1d: hstack([B, I]),
    tril: tril(S),
    triu_k: triu(A, 3),
    tril_neg: tril(A, -5),
    isin: isin(I, [-20, 1, 4, 7, 100]),
    nonzero0: nonzero(A > 0.8)[0],
    nonzero1: nonzero(A > 0.8)[1],
    argwhere: argwhere(A > 0.9),
    topk: A.topk(3),
    topk0: A.topk(-4, 0),
    argtopk0: A.argtopk(5, 0),
    topk_vec: B.topk(7),
    argtopk_vec: B.argtopk(-6),
    zeros_like: zeros_like(A),
    ones_like_int: ones_like(I),
    full_like: full_like(A, 7),
    mo_none: A.map_overlap(|b| b - b.mean(0, #{keepdims: true}), #{depth: [2, 3]}),
    mo_reflect: A.map_overlap(|b| b * b.sum(), #{depth: 2, boundary: "reflect"}),
    mo_periodic: B.map_overlap(|b| b - b.min(), #{depth: 2, boundary: "periodic"}),
    mo_const: A.map_overlap(|b| b / b.max(1, #{keepdims: true}), #{depth: [1, 4], boundary: 0.5}),
    einsum_mm: einsum("ij,jk->ik", A, S),
    einsum_mv: einsum("ij,j", A, B),
    einsum_dot: einsum("i,i->", B, B),
    einsum_outer: einsum("i,j->ij", B, I),
    einsum_t: einsum("ij->ji", A),
    einsum_sum0: einsum("ij->j", A),
    einsum_batch: einsum("ij,ij->i", A, A * 2),
    einsum_three: einsum("ij,jk,k->i", A, S, B),
    einsum_bmm: einsum("bij,bjk->bik", stack([S, S * 2, S + 1]), stack([S.T, S, S * 3])),
    einsum_int: einsum("i,j->ij", I, I),
    einsum_list: einsum("ij,jk", [A, S]),
    inv: inv(S),
    inv_check: inv(S) @ S,
    cholesky_u: cholesky(P),
    cholesky_l: cholesky(P, #{lower: true}),
    reduction_sum0: reduction(A, |b| b.sum(0, #{keepdims: true}), |b| b.sum(0, #{keepdims: true}), #{axis: 0}),
    reduction_ptp: reduction(
        A,
        |b| b.max(1, #{keepdims: true}) - b.min(1, #{keepdims: true}) * 0.0,
        |b| b.max(1, #{keepdims: true}),
        #{axis: 1, combine: |b| b.max(1, #{keepdims: true}), split_every: 2},
    ),
    reduction_all: reduction(A, |b| b.max([0, 1], #{keepdims: true}), |b| b.max([0, 1], #{keepdims: true}), #{keepdims: true}),
    nanvar_dof: from_array([1.0, 0.0 / 0.0]).nanvar(#{ddof: 1}),
    nanprod0: M.nanprod(0),
    isin_big: isin(from_array([9007199254740993, 5]), [9007199254740992, 5.0]),
    pct_scalar: percentile(A, 50),
    randint_min: R.min(),
    randint_max: R.max(),
};
let r = compute(cases)[0];
let dtypes = #{};
for k in r.keys() {
    let v = r[k];
    dtypes[k] = switch type_of(v) { "f64" => "f64", "i64" => "i64", "bool" => "bool", _ => v.dtype };
}
to_json(#{values: r, dtypes: dtypes})
"#;

/// Run `python_code` (as `python -c`), then `rhai` in a new Session: the
/// session, and the string that `rhai` gives.
fn python_then_brisk(py: &std::path::Path, python_code: &str, rhai: &str) -> (Session, String) {
    run_python(py, ["-c", python_code], "");
    let mut s = Session::new();
    let got = eval(&mut s, rhai);
    (s, got)
}

fn eval(s: &mut Session, code: &str) -> String {
    match s.eval_value(code, "<arrays test>") {
        Ok(v) => v.into_string().expect("a string"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn arrays_match_numpy_on_both_schedulers() {
    let Some(py) = python(&NUMPY) else { return };
    let dir = std::env::temp_dir().join(format!("brisk-arrays-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let mut s = Session::new();
    let inputs = eval(
        &mut s,
        &format!(
            "{INPUTS}\nto_json(#{{A: A.compute(), B: B.compute(), I: I.compute(), S: S.compute(), T: T.compute(), y: y.compute()}})"
        ),
    );
    let input_path = dir.join("inputs.json");
    std::fs::write(&input_path, &inputs).expect("write inputs");
    let script = reference("numpy_arrays.py");
    let expected = run_python(&py, [script.as_os_str(), input_path.as_os_str()], "numpy side failed: ");
    let want_values = entries(section(&expected, "values"));
    let want_dtypes = entries(section(&expected, "dtypes"));
    for scheduler in SCHEDULERS {
        let mut s = Session::new();
        let got = eval(&mut s, &format!("config(#{{scheduler: \"{scheduler}\"}});\n{INPUTS}\n{CASES}"));
        let got_values: std::collections::HashMap<_, _> =
            entries(section(&got, "values")).into_iter().collect();
        let got_dtypes: std::collections::HashMap<_, _> =
            entries(section(&got, "dtypes")).into_iter().collect();
        let mut failures = Vec::new();
        for ((name, want), (_, dtype)) in want_values.iter().zip(&want_dtypes) {
            let tol = if dtype.contains("f32") { 1e-5 } else { 1e-9 };
            match got_values.get(name) {
                Some(v) if same(v, want, tol) => {}
                Some(v) => failures.push(format!("{name}: brisk {v} vs numpy {want}")),
                None => failures.push(format!("{name}: missing")),
            }
            // A 0-d result is a Rhai number, and Rhai's FLOAT is f64.
            let scalar_f32 = dtype == "\"f32\"" && !want.starts_with('[');
            let dtype_ok = got_dtypes.get(name) == Some(dtype)
                || (scalar_f32 && got_dtypes.get(name).is_some_and(|d| d == "\"f64\""));
            if !dtype_ok {
                failures.push(format!("{name}: dtype {:?} vs numpy {dtype}", got_dtypes.get(name)));
            }
        }
        assert!(failures.is_empty(), "{scheduler}: {} mismatches:\n{}", failures.len(), failures.join("\n"));
        assert_eq!(got_values.len(), want_values.len(), "same cases on both sides");
    }
}

/// `.npy` files both ways: NumPy reads what brisk writes, brisk reads what
/// NumPy writes (C and Fortran order, several element types).
#[test]
fn npy_files_are_shared_with_numpy() {
    let Some(py) = python(&NUMPY) else { return };
    let dir = std::env::temp_dir().join(format!("brisk-npy-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let d = dir.display();
    let script = format!(
        r#"
import numpy as np
a = np.arange(35, dtype=np.float64).reshape(7, 5) / 3
np.save("{d}/c.npy", a)
np.save("{d}/f.npy", np.asfortranarray(a))
np.save("{d}/i32.npy", np.arange(10, dtype=np.int32) - 5)
np.save("{d}/b.npy", np.array([True, False, True]))
np.save("{d}/f32.npy", a.astype(np.float32))
np.save("{d}/f16.npy", np.array([0.1, -2.5, 65504.0, 6e-8, np.inf, np.nan], dtype=np.float16))
np.save("{d}/u8.npy", np.array([0, 7, 200, 255], dtype=np.uint8))
"#
    );
    let (mut s, got) = python_then_brisk(
        &py,
        &script,
        &format!(
            r#"
let c = from_npy("{d}/c.npy", #{{chunks: [3, 2]}});
let f = from_npy("{d}/f.npy", #{{chunks: [3, 2]}});
let i = from_npy("{d}/i32.npy", #{{chunks: 4}});
let b = from_npy("{d}/b.npy");
let g = from_npy("{d}/f32.npy", #{{chunks: 2}});
let h = from_npy("{d}/f16.npy", #{{chunks: 4}});
let u = from_npy("{d}/u8.npy");
(c * 3).to_npy("{d}/out.npy");
(i * 2).to_npy("{d}/out_i.npy");
to_json(#{{c: c.compute(), f: f.compute(), same: (c == f).all().compute(), i: i.compute(), b: b.compute(),
          dtypes: [c.dtype, i.dtype, b.dtype, g.dtype, h.dtype, u.dtype], shape: c.shape,
          h: h.compute(), u: u.sum().compute()}})
"#
        ),
    );
    let a: Vec<String> = (0..35).map(|k| format!("{:?}", k as f64 / 3.0)).collect();
    assert!(got.contains(&format!("\"c\":[[{}", a[..5].join(","))), "{got}");
    assert!(got.contains("\"same\":true"), "{got}");
    assert!(got.contains("\"i\":[-5,-4,-3,-2,-1,0,1,2,3,4]"), "{got}");
    assert!(got.contains("\"b\":[true,false,true]"), "{got}");
    assert!(got.contains("\"dtypes\":[\"f64\",\"i64\",\"bool\",\"f32\",\"f32\",\"i64\"]"), "{got}");
    // float16 widens to f32 exactly (NumPy: np.float16(0.1) is 0.0999755859375), u8 to i64.
    assert!(got.contains("\"h\":[0.0999755859375,-2.5,65504.0,5.960464477539063e-8,"), "{got}");
    assert!(got.contains("\"u\":462"), "{got}");
    let check = format!(
        r#"
import numpy as np
a = np.load("{d}/out.npy"); i = np.load("{d}/out_i.npy")
want = np.arange(35, dtype=np.float64).reshape(7, 5) / 3 * 3
assert a.dtype == np.float64 and a.shape == (7, 5) and np.allclose(a, want), a
assert i.dtype == np.int64 and list(i) == [2 * (k - 5) for k in range(10)], i
print("ok")
"#
    );
    run_python(&py, ["-c", &check], "NumPy could not read brisk's files: ");
    let e = s.eval_value(&format!("from_npy(\"{d}/nope.npy\")"), "<t>").expect_err("missing");
    assert!(e.message.contains("cannot read") && e.message.contains("nope.npy"), "{e}");
    std::fs::write(dir.join("text.npy"), "not numpy").expect("text");
    let e = s.eval_value(&format!("from_npy(\"{d}/text.npy\")"), "<t>").expect_err("not npy");
    assert!(e.message.contains("is not a .npy file"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bad input of every kind is refused with a message naming the shapes,
/// values or path, when the expression is written; the session goes on.
#[test]
fn bad_array_input_is_refused_clearly() {
    let mut s = Session::new();
    let cases: &[(&str, &str)] = &[
        ("zeros([3, 4]) + zeros([5])", "shapes (3, 4) and (5,) cannot be broadcast together"),
        ("zeros([3, 4]).sum(2)", "axis 2 is out of bounds for array of dimension 2"),
        ("zeros([3, 4]).transpose([0, 0])", "repeated axis"),
        ("ones([3]) & ones([3])", "& is defined for bool and integer arrays, not f64"),
        ("(ones([3]) > 0) - (ones([3]) > 0)", "boolean subtract"),
        ("-(ones([3]) > 0)", "boolean negative"),
        ("zeros([4], #{chunks: 0})", "chunk size 0 for axis 0 must be positive"),
        ("zeros([4], #{chunks: [2, 2]})", "have 2 entries but the shape (4,) has 1 axes"),
        ("zeros([4], #{chunks: [[1, 1]]})", "do not add up to its length 4"),
        ("zeros([4], #{chunks: \"big\"})", "chunks must be a number, a shape or \"auto\""),
        ("zeros([4], #{dtype: \"complex\"})", "unknown dtype \"complex\""),
        ("zeros([4], #{chunk: 2})", "zeros has no option \"chunk\""),
        ("zeros([-1])", "shape must not be negative"),
        // A block function that changes the block's shape without saying so.
        (
            "ones([10, 10], #{chunks: 5}).map_blocks(|b| b.sum(0)).sum(1).compute()",
            "map_blocks/blockwise: the function returned a block of shape (5,) where the array's chunks promise (5, 5)",
        ),
        (
            "(ones([10, 10], #{chunks: 5}).map_blocks(|b| b.sum(0)) + ones([10, 10])).compute()",
            "where the array's chunks promise (5, 5)",
        ),
        (
            "ones([10, 10], #{chunks: 5}).map_blocks(|b| b.sum()).mean().compute()",
            "map_blocks/blockwise: the function returned a value of type float, not a block of shape (5, 5)",
        ),
        (
            "zeros([3, 4]) @ zeros([3, 4])",
            "matmul: shapes (3, 4) and (3, 4) are not aligned: 4 (dim 1) != 3 (dim 0)",
        ),
        (
            "zeros([3, 4]).compute() @ zeros([3, 4]).compute()",
            "matmul: shapes (3, 4) and (3, 4) are not aligned",
        ),
        ("zeros([2, 3, 4]) @ zeros([4])", "only 1-d and 2-d arrays are supported"),
        ("qr(zeros([10, 4], #{chunks: 2}))", "one block along axis 1"),
        ("zeros([4]).reshape([3, 2])", "cannot reshape array of size 4 into shape (3, 2)"),
        ("concatenate([zeros([2, 3]), zeros([2, 4])])", "must match exactly"),
        ("zeros([4])[7]", "index 7 is out of bounds for axis 0 with size 4"),
        ("zeros([4], #{chunks: 2})[[1, 4]]", "index 4 is out of bounds for axis 0 with size 4"),
        ("zeros([4])[[-5]]", "index -5 is out of bounds for axis 0 with size 4"),
        ("zeros([4]).compute()[[9]]", "index 9 is out of bounds for axis 0 with size 4"),
        ("zeros([4]).sum()[[0]]", "too many indices for array: array is 0-dimensional"),
        ("zeros([4]).slice([0, 0])", "too many indices"),
        ("zeros([4, 3]).compute().reshape([5, -1])", "cannot reshape array of size 12 into shape (5, 2)"),
        ("zeros([4, 3]).compute().reshape([-1, -1])", "can only specify one unknown dimension"),
        ("zeros([4, 3]).compute().squeeze(0)", "axis 0 has 4"),
        ("zeros([4, 3]).compute().expand_dims(3)", "axis 3 is out of bounds"),
        ("zeros([4]).reshape([9223372036854775807, 9223372036854775807])", "cannot reshape array of size 4"),
        ("zeros([4]).slice([#{step: 0}])", "slice step cannot be zero"),
        ("zeros([4], #{chunks: 2}).blocks([2])", "block index 2 is out of bounds for axis 0 with 2 blocks"),
        (
            "zeros([4, 4], #{chunks: 2}).blocks(0)",
            "blocks needs 2 block indices (one per axis) for an array of (2, 2) blocks, got 1",
        ),
        ("histogram(zeros([4]), #{bins: 3})", "histogram needs range"),
        ("arange(0, 10, 0)", "non-zero step"),
        ("arange(0.0, 1e300, 1.0)", "elements"),
        ("zeros([1000000000, 1000000000], #{chunks: 10})", "more than 10000000; use larger chunks"),
        ("from_array([[1, 2], [3]])", "ragged rows"),
        ("from_npy(\"/nonexistent/x.npy\")", "cannot read /nonexistent/x.npy"),
        ("solve(zeros([2, 3]), zeros([2]))", "solve needs a square matrix, got shape (2, 3)"),
        (
            "(zeros([2, 2]) > 1).argmax([0, 1], #{keepdims: true}) ; zeros([2,2,2]).argmax([0, 1])",
            "one axis or none",
        ),
        ("zeros([0]).max()", "zero-size array to reduction operation max"),
        ("arange(4).map_blocks(|b| b, #{drop_axis: 0, chunks: [[1]]})", "map_blocks"),
        ("let x = arange(10); x.mask(x > 3).slice([0..2])", "chunk sizes, which are unknown"),
        ("let x = arange(10); x.mask(x > 3) + arange(10)", "chunk sizes, which are unknown"),
        (
            "arange(10).mask(arange(9) > 3)",
            "boolean index of shape (9,) does not match the array's shape (10,)",
        ),
        ("zeros([3]).nanmin(1)", "axis 1 is out of bounds for array of dimension 1"),
        ("zeros([0]).nanmax()", "zero-size array to reduction operation nanmax"),
        ("zeros([3]).median(2)", "axis 2 is out of bounds"),
        ("zeros([3]).median(0, #{keep: true})", "median has no option \"keep\""),
        ("percentile(zeros([3]), 101)", "percentiles must be in the range [0, 100], got 101"),
        ("percentile(zeros([3]), [50, -1])", "in the range [0, 100], got -1"),
        ("percentile(zeros([3]), \"half\")", "q"),
        ("zeros([3]).topk(0)", "topk needs 0 < |k| <= 3"),
        ("zeros([3]).argtopk(-4)", "argtopk needs 0 < |k| <= 3"),
        ("zeros([3, 2]).topk(1, 2)", "axis 2 is out of bounds"),
        ("zeros([3, 2]).squeeze(1)", "cannot select an axis to squeeze out which has size not equal to one"),
        ("expand_dims(zeros([3]), 3)", "axis 3 is out of bounds for array of dimension 2"),
        ("broadcast_to(zeros([3]), [2, 4])", "cannot broadcast an array of shape (3,) to (2, 4)"),
        ("broadcast_to(zeros([2, 3]), [3])", "cannot broadcast an array of shape (2, 3) to (3,)"),
        ("broadcast_to(zeros([3]), [3, 1])", "cannot broadcast"),
        ("vstack([])", "vstack needs at least one array"),
        ("hstack([zeros([2, 2]), zeros([3, 2])])", "must match exactly"),
        ("tril(zeros([3]))", "tril needs a 2-d array, got 1 dimensions"),
        ("isin(zeros([3]), 4)", "isin expects a Rhai array of numbers"),
        ("isin(zeros([3]), [1, \"a\"])", "numbers"),
        ("let x = arange(10); nonzero(x.mask(x > 3))", "chunk sizes, which are unknown"),
        ("randint(5, 5, [3])", "randint: low >= high (5 >= 5)"),
        ("zeros([2, 2]).median([0, 0])", "repeated axis"),
        ("randint(0, 5, [3], #{seeds: 1})", "randint has no option \"seeds\""),
        ("zeros_like(zeros([2]), #{chunks: 1})", "zeros_like has no option \"chunks\""),
        ("sign(zeros([2]) > 0)", "sign is defined for numbers, not bool"),
        ("zeros([3]).cumprod(1)", "axis 1 is out of bounds"),
        ("zeros([9], #{chunks: 3}).map_overlap(|b| b, #{})", "map_overlap needs depth"),
        (
            "einsum(\"ij,jk\", zeros([2, 3]), zeros([4, 2]))",
            "label 'j' has length 3 in operand 0 but 4 in operand 1",
        ),
        ("reduction(zeros([4]), |b| b, |b| b, #{axes: 0})", "reduction has no option \"axes\""),
        ("reduction(zeros([4]), |b| b, |b| b, #{combine: 3})", "reduction expects a function for combine"),
        (
            "reduction(zeros([4], #{chunks: 2}), |b| b.sum(), |b| b).compute()",
            "map_blocks/blockwise: the function returned a value of type float",
        ),
        ("inv(zeros([2, 3]))", "inv needs a square matrix, got shape (2, 3)"),
        ("inv(zeros([2, 2])).compute()", "singular"),
        ("cholesky(zeros([2, 3]))", "cholesky needs a square matrix, got shape (2, 3)"),
        ("cholesky(from_array([[1.0, 2.0], [2.0, 1.0]])).compute()", "not positive definite"),
        ("cholesky(eye(2), #{upper: true})", "cholesky has no option \"upper\""),
        ("einsum(\"ii\", zeros([2, 2]))", "label 'i' repeats within operand 0"),
        ("einsum(\"...i\", zeros([2, 2]))", "ellipses"),
        ("einsum(\"ij,j\", zeros([2, 2]))", "the spec names 2 operands but 1 were given"),
        ("einsum(\"ijk\", zeros([2, 2]))", "operand 0 has 2 dimensions but its subscripts \"ijk\" name 3"),
        ("einsum(\"ij->k\", zeros([2, 2]))", "output label 'k' is in no operand"),
        ("einsum(\"i1\", zeros([2, 2]))", "invalid subscript '1'"),
        (
            "zeros([9], #{chunks: 3}).map_overlap(|b| b, #{depth: 4})",
            "depth 4 along axis 0 is more than its smallest block (3); rechunk",
        ),
        ("zeros([9]).map_overlap(|b| b, #{depth: -1})", "depth -1 is negative"),
        (
            "zeros([9]).map_overlap(|b| b, #{depth: [1, 1]})",
            "depth has 2 entries for an array of dimension 1",
        ),
        ("zeros([9]).map_overlap(|b| b, #{depth: 1, boundary: \"wrap\"})", "unknown boundary \"wrap\""),
        ("zeros([9]).map_overlap(|b| b, #{depth: 1, halo: 2})", "map_overlap has no option \"halo\""),
        (
            "zeros([9], #{chunks: 3}).map_overlap(|b| b.sum(), #{depth: 1}).compute()",
            "map_blocks/blockwise: the function returned a value of type float",
        ),
        (
            "from_delayed(delayed(|| [1, 2]).call(), #{shape: [3]}).compute()",
            "has shape (2,) where shape (3,) was given",
        ),
        ("from_delayed(delayed(|| [[1], [2, 3]]).call(), #{shape: [2, 1]}).compute()", "ragged lists"),
        ("from_delayed(delayed(|| \"x\").call(), #{shape: [1]}).compute()", "the value is a string"),
        ("from_delayed(delayed(|| 1).call(), #{dtype: \"f64\"})", "give #{shape: [...]} for an array"),
        ("from_delayed(delayed(|| 1).call(), #{shape: [-1]})", "shape"),
        ("blockwise(|a| a, \"ij\", [zeros([2, 2]), \"i\"])", "an array of 2 dimensions has index \"i\""),
        ("blockwise(|a| a, \"ij\", [zeros([2, 2]), \"ii\"])", "repeats 'i'"),
        ("blockwise(|a| a, \"ik\", [zeros([2, 2]), \"ij\"])", "output index 'k' is in no argument"),
        (
            "blockwise(|a, b| a, \"i\", [zeros([2]), \"i\", zeros([3]), \"i\"])",
            "index 'i' has length 2 in one argument and 3",
        ),
        ("blockwise(|a| a, \"i\", [zeros([2])])", "arguments come in pairs"),
        ("blockwise(|a| a, \"i\", [1, ()])", "give at least one Array"),
        ("blockwise(|a| a, \"i\", [zeros([2]), \"i\"], #{new_axes: #{k: 1}})", "'k' is not an output index"),
    ];
    for (code, want) in cases {
        match s.eval_value(code, "<bad>") {
            Ok(v) => panic!("{code} was accepted: {v}"),
            Err(e) => assert!(e.message.contains(want), "{code}: {}", e.message),
        }
    }
    // Errors that only show when the task runs point into the closure.
    let e = s.eval_value("arange(4).map_blocks(|b| b.nope()).compute()", "<bad>").expect_err("task");
    assert!(e.message.contains("nope") && e.line == Some(1), "{e}");
    // Unknown lengths print as NaN, and come back after compute_chunk_sizes.
    let shown = s
        .eval_value("let x = arange(10, #{chunks: 4}); let m = x.mask(x > 3); `${m}`", "<nan>")
        .expect("repr");
    assert!(shown.to_string().contains("shape=(nan,)"), "{shown}");
    let sizes = s.eval_value("to_json(m.compute_chunk_sizes().chunks)", "<sizes>").expect("sizes");
    assert_eq!(sizes.to_string(), "[[0,4,2]]");
    // The session is intact.
    let v = s.eval_value("(arange(4) * 2).sum().compute()", "<ok>").expect("still works");
    assert_eq!(v.as_int().ok(), Some(12));
}

/// Zarr v3 stores both ways: brisk reads what zarr-python writes (its
/// default codecs), zarr-python reads what brisk writes.
#[test]
fn zarr_stores_are_shared_with_zarr_python() {
    let Some(py) = python(&NUMPY) else { return };
    if !imports(&py, "zarr") {
        assert!(std::env::var_os("CI").is_none(), "zarr-python is needed on CI (tests/requirements.txt)");
        eprintln!("skipped: no zarr-python");
        return;
    }
    let dir = std::env::temp_dir().join(format!("brisk-zarr-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let d = dir.display();
    let script = format!(
        r#"
import numpy as np, zarr
a = np.arange(70, dtype=np.float64).reshape(7, 10) / 4
z = zarr.create_array(store="{d}/py.zarr", shape=a.shape, chunks=(3, 4), dtype="float64")
z[:] = a
i = zarr.create_array(store="{d}/pyi.zarr", shape=(9,), chunks=(4,), dtype="int32")
i[:] = np.arange(9, dtype=np.int32) * 3
h = zarr.create_array(store="{d}/pyh.zarr", shape=(3,), chunks=(2,), dtype="float16")
h[:] = np.array([0.1, -2.5, 1024.0], dtype=np.float16)
"#
    );
    let (mut s, got) = python_then_brisk(
        &py,
        &script,
        &format!(
            r#"
let z = from_zarr("{d}/py.zarr");
let i = from_zarr("{d}/pyi.zarr");
let h = from_zarr("{d}/pyh.zarr");
(z * 2).to_zarr("{d}/out.zarr");
random([50, 30], #{{chunks: [20, 7], seed: 3}}).rechunk([15, 9]).to_zarr("{d}/rand.zarr");
to_json(#{{z: z.compute(), chunks: z.chunks, i: i.compute(), dt: i.dtype, h: h.compute(), hdt: h.dtype, sum: from_zarr("{d}/rand.zarr").sum().compute(),
          again: random([50, 30], #{{chunks: [20, 7], seed: 3}}).sum().compute()}})
"#
        ),
    );
    let row0: Vec<String> = (0..10).map(|k| format!("{:?}", k as f64 / 4.0)).collect();
    assert!(got.contains(&format!("\"z\":[[{}]", row0.join(","))), "{got}");
    assert!(got.contains("\"chunks\":[[3,3,1],[4,4,2]]"), "{got}");
    assert!(got.contains("\"i\":[0,3,6,9,12,15,18,21,24]") && got.contains("\"dt\":\"i64\""), "{got}");
    assert!(got.contains("\"h\":[0.0999755859375,-2.5,1024.0]") && got.contains("\"hdt\":\"f32\""), "{got}");
    let sums = [number(&got, "sum"), number(&got, "again")];
    assert!((sums[0] - sums[1]).abs() < 1e-9 * sums[1], "{sums:?}");
    let check = format!(
        r#"
import numpy as np, zarr
z = zarr.open_array("{d}/out.zarr", mode="r")
want = np.arange(70, dtype=np.float64).reshape(7, 10) / 4 * 2
assert z.shape == (7, 10) and z.dtype == np.float64 and np.array_equal(z[:], want), z[:]
r = zarr.open_array("{d}/rand.zarr", mode="r")
assert r.shape == (50, 30) and r.chunks == (15, 9), (r.shape, r.chunks)
print("ok")
"#
    );
    run_python(&py, ["-c", &check], "zarr-python could not read brisk's store: ");
    // `store`: two arrays in one graph, each its own store.
    let stored = format!(
        r#"let x = arange(12, #{{chunks: 5}}); store([x, x * x], ["{d}/s1.zarr", "{d}/s2.zarr"]); "stored""#
    );
    assert_eq!(eval(&mut s, &stored), "stored");
    let check = format!(
        "import numpy as np, zarr\nassert np.array_equal(zarr.open_array('{d}/s2.zarr', mode='r')[:], np.arange(12) ** 2)\nassert np.array_equal(zarr.open_array('{d}/s1.zarr', mode='r')[:], np.arange(12))\nprint('ok')"
    );
    run_python(&py, ["-c", &check], "zarr-python could not read a stored array: ");
    let e = s.eval_value(&format!("store([ones([2]), ones([2])], [\"{d}/t.zarr\", \"{d}/t.zarr\"])"), "<t>");
    assert!(e.expect_err("twice").message.contains("is given twice"));
    assert!(!dir.join("t.zarr").exists(), "nothing written for a refused store");
    let e = s.eval_value(&format!("from_zarr(\"{d}/nothing.zarr\")"), "<t>").expect_err("missing");
    assert!(e.message.contains("is not a Zarr v3 array"), "{e}");
    std::fs::create_dir_all(dir.join("plain")).expect("plain");
    std::fs::write(dir.join("plain/keep.txt"), "x").expect("keep");
    let e = s.eval_value(&format!("ones([2]).to_zarr(\"{d}/plain\")"), "<t>").expect_err("not a store");
    assert!(e.message.contains("is not a Zarr store"), "{e}");
    assert!(dir.join("plain/keep.txt").exists(), "nothing lost");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `persist` computes the blocks once and later graphs read them; the
/// graph of an expression on a persisted array holds only its own tasks.
#[test]
fn persisted_arrays_are_reused_and_graphs_can_be_drawn() {
    let mut s = Session::new();
    let dir = std::env::temp_dir().join(format!("brisk-arr-viz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let dot = dir.join("g.dot");
    let code = format!(
        r#"
let x = random([300, 300], #{{chunks: 100, seed: 5}});
let before = graph_info(x + 1).tasks;
let p = x.persist();
let after = graph_info(p + 1).tasks;
let same = (p.sum() == x.sum()).compute();
(p @ p.T).visualize("{}");
[before, after, same, p.chunks.len()]
"#,
        dot.display()
    );
    let v = s.eval_value(&code, "<persist>").expect("persist");
    assert_eq!(v.to_string(), "[18, 9, true, 2]", "9 random + 9 add tasks before, only the 9 adds after");
    let text = std::fs::read_to_string(&dot).expect("dot written");
    assert!(text.starts_with("digraph") && text.contains("matmul"), "{text}");
    assert!(
        !text.contains("[shape=circle, label=\"random_sample"),
        "persisted blocks are inputs, not tasks: {text}"
    );
}
