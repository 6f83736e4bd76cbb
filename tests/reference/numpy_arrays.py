"""NumPy's answers for the array tests (script-lang/tests/arrays.rs).

Reads the inputs brisk produced (JSON: {"A": [[...]], "B": [...], "I": [...], "S": [[...]]})
and prints {"values": {name: result}, "dtypes": {name: dtype}} for the same
expressions, written here in NumPy. NaN and infinities become null, as brisk's
to_json writes them.
"""
import itertools
import json
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")  # all-NaN slices, as the brisk side gives NaN too

inp = json.load(open(sys.argv[1]))
A = np.array(inp["A"], dtype=np.float64)
B = np.array(inp["B"], dtype=np.float64)
I = np.array(inp["I"], dtype=np.int64)
S = np.array(inp["S"], dtype=np.float64)
T = np.array(inp["T"], dtype=np.float64)
y = np.array(inp["y"], dtype=np.float64)
F = A.astype(np.float32)
N = np.where(A > 0.7, np.nan, A)
P = S @ S.T + np.eye(23) * 23
M = np.where(np.arange(23) == 4, np.nan, N)


def topk(a, k, axis=-1):
    """da.topk: the k largest along axis, largest first (k < 0: smallest)."""
    return np.take(a, argtopk(a, k, axis), axis=axis) if a.ndim == 1 else np.take_along_axis(a, argtopk(a, k, axis), axis)


def map_overlap(x, f, chunks, depth, boundary):
    """da.map_overlap by hand: each block with `depth` of its neighbours
    (np.pad's wrap, symmetric or constant past the edges; nothing for
    "none"), f applied, the halos cut off."""
    nd = x.ndim
    if boundary == "none":
        xp, off = x, [0] * nd
    else:
        mode = {"periodic": "wrap", "reflect": "symmetric"}.get(boundary, "constant")
        kw = {"constant_values": boundary} if mode == "constant" else {}
        xp, off = np.pad(x, [(d, d) for d in depth], mode=mode, **kw), depth
    out = np.empty(x.shape)
    starts = [np.cumsum([0] + c) for c in chunks]
    for idx in itertools.product(*[range(len(c)) for c in chunks]):
        take, keep, put = [], [], []
        for d, i in enumerate(idx):
            s, e, k = starts[d][i], starts[d][i + 1], depth[d]
            lo, hi = s - k + off[d], e + k + off[d]
            if boundary == "none":
                lo, hi = max(lo, 0), min(hi, x.shape[d])
            before = s + off[d] - lo
            take.append(slice(lo, hi))
            keep.append(slice(before, before + e - s))
            put.append(slice(s, e))
        out[tuple(put)] = f(xp[tuple(take)])[tuple(keep)]
    return out


A_CHUNKS = [[10, 10, 10, 7], [6, 6, 6, 5]]


def argtopk(a, k, axis=-1):
    order = np.argsort(-a if k > 0 else a, axis=axis, kind="stable")
    return np.take(order, range(abs(k)), axis=axis)


cases = {
    "add": A + B,
    "sub_scalar": 1.5 - A,
    "mul_T": A.T * 2,
    "div": A / (B + 1),
    "pow": A ** 2,
    "mod": (A * 10) % 3,
    "neg": -A,
    "cmp": A > 0.5,
    "eq": (A * 0) == 0,
    "and": (A > 0.2) & (A < 0.8),
    "not": ~(A > 0.5),
    "where": np.where(A > 0.5, A, -B),
    "maximum": np.maximum(A, B),
    "sum": A.sum(),
    "sum0": A.sum(0),
    "sum1k": A.sum(1, keepdims=True),
    "mean": A.mean(),
    "mean0": A.mean(0),
    "std": A.std(),
    "std1": A.std(1, ddof=1),
    "var0": A.var(0),
    "min1": A.min(1),
    "max": A.max(),
    "argmin": A.argmin(),
    "argmax0": A.argmax(0),
    "argmax1": A.argmax(1),
    "prod0": (A + 0.5).prod(0),
    "any0": (A > 0.9).any(0),
    "all1": (A > 0.05).all(1),
    "sqrt": np.sqrt(A),
    "exp": np.exp(A),
    "log": np.log(A + 1),
    "log10": np.log10(A + 1),
    "sin": np.sin(A),
    "tanh": np.tanh(A),
    "floor": np.floor(A * 10),
    "ceil": np.ceil(A * 10),
    "round": np.round(A * 10 - 5),
    "abs": np.abs(A - 0.5),
    "isnan": np.isnan(np.where(A > 0.5, A, np.nan)),
    "clip": A.clip(0.2, 0.8),
    "int_floordiv": I // 4,
    "int_mod": I % 4,
    "int_div": I / 4,
    "int_mul_float": I * 0.5,
    "int_pow": I ** 2,
    "int_sum": I.sum(),
    "int_mean": I.mean(),
    "int_neg_floordiv": I // -3,
    "astype": (A * 10).astype(np.int64),
    "bool_sum": (A > 0.5).sum(0),
    "f32_mul": F * 2.0,
    "f32_sum0": F.sum(0),
    "f32_mean": F.mean(),
    "f32_plus_f64": F + A,
    "f32_plus_int": F + np.array([3]),
    "transpose_sum": (A.T + 1).sum(1),
    "rechunk_sum0": A.sum(0),
    "b3_like": ((S + S.T) * 2).mean(axis=0).sum(),
    "broadcast_col": A + A[:, :1],
    "linspace": np.linspace(0, 1, 11),
    "arange": np.arange(-3, 3, 0.5),
    "eye": np.eye(5),
    "matmul_xxt": A @ A.T,
    "matmul_vec": A @ B,
    "dot_square": S.dot(S),
    "matmul_sum": (A.T @ A).sum(),
    "gram_cols": A.T @ A,
    "gram_long": T.T @ T,
    "gram_rows": T @ T.T,
    "block_last": A[30:, 6:12],
    "block_sum": A.sum(),
    "rev": B[::-1],
    "rev_steps": A[35:3:-3, ::-2],
    "rev_neg": A[-2:-30:-4, 5],
    "rev_sum": (A[::-2, :] * 2).sum(0),
    "rev_local": A[::-1, 20::-7],
    "fancy_rows": A[[1, 5, 7, 36, -1, 0, 12, 11]],
    "fancy_vec": B[[22, 0, 5, 5, -23]] * 2,
    "fancy_sum": A[[3, 30, 3]].sum(0),
    "fancy_local": A[[2, -2]],
    "fancy_none": A[[]],
    "rev_empty": B[2:5:-1],
    "int_matmul": np.outer(I, I) @ I,
    "svd_s": np.linalg.svd(T, compute_uv=False),
    "svd_s_square": np.linalg.svd(S, compute_uv=False),
    "qr_abs_r": np.abs(np.linalg.qr(T)[1]),
    "solve": np.linalg.solve(S, S[:, 0] + 1),
    "lstsq_x": np.linalg.lstsq(T, y, rcond=None)[0],
    "lstsq_res": np.linalg.lstsq(T, y, rcond=None)[1],
    "lstsq_rank": np.int64(np.linalg.lstsq(T, y, rcond=None)[2]),
    "norm": np.linalg.norm(A),
    "norm_vec": np.linalg.norm(B),
    "slice_steps": A[1:-1:4, 5],
    "slice_cols": A[:, 3:17:3],
    "slice_neg": A[-5:, -2],
    "index_row": A[7],
    "concatenate0": np.concatenate([A, A * 2]),
    "concatenate1": np.concatenate([A, A[:, :5] * 3], 1),
    "stack1": np.stack([B, B + 1, B * 2], 1),
    "reshape_1d_nd": I.reshape(2, 7),
    "reshape_2d": A.reshape(23, 37),
    "reshape_flat": A.T.reshape(-1)[:50],
    "cumsum0": A.cumsum(0),
    "cumsum1": (A > 0.5).cumsum(1),
    "hist_counts": np.histogram(A, bins=7, range=(0.1, 0.9))[0],
    "hist_edges": np.histogram(A, bins=7, range=(0.1, 0.9))[1],
    "mask": A[A > 0.7],
    "mask_1d": B[B < 0.3] * 2 + 1,
    "mask_sum": A[A > 0.7].sum(),
    "unique": np.unique(np.floor(A * 10)),
    "unique_int": np.unique(I % 5),
    "tensordot_1": np.tensordot(A.T, A, 1),
    "tensordot_pairs": np.tensordot(A.reshape(37, 23, 1) * np.ones((1, 1, 3)), A, [[0, 1], [0, 1]]),
    "map_blocks": np.sqrt(A) * 2.0 + 1.0,
    "map_blocks_reduce": A.max(axis=1),
    "nansum0": np.nansum(N, 0),
    "nansum": np.nansum(N),
    "nanmean1": np.nanmean(N, 1),
    "nanmin0": np.nanmin(M, 0),
    "nanmax": np.nanmax(N),
    "nanmax1k": np.nanmax(M, 1, keepdims=True),
    "nanstd0": np.nanstd(M, 0, ddof=1),
    "nanvar": np.nanvar(N),
    "nansum_int": np.nansum(I),
    "std_both_ddofs": A.std() - A.std(ddof=1),
    "median0": np.median(A, 0),
    "median_all": np.median(A),
    "median1_nan": np.median(N, 1),
    "median_int": np.median(I),
    "median_keep": np.median(A, [0, 1], keepdims=True),
    "pct": np.percentile(A, [5, 50, 99.5]),
    "pct_axis": np.percentile(A, 30, axis=1),
    "pct_int": np.percentile(I, [0, 25, 100]),
    "cumprod0": (A + 0.5).cumprod(0),
    "cumprod_int": (I % 3 + 1).cumprod(0),
    "isinf": np.isinf(np.where(A > 0.5, np.inf, A)),
    "log1p": np.log1p(A),
    "expm1": np.expm1(A),
    "sign": np.sign(A - 0.5),
    "sign_int": np.sign(I),
    "round1": np.round(A * 100, 1),
    "round_neg": np.round(A * 1000, -2),
    "round_int_neg": np.round(I * 37, -1),
    "squeeze": A[:, 0:1].squeeze(),
    "squeeze_axis": B,
    "ravel": A.ravel(),
    "expand_dims": np.expand_dims(B, 1),
    "broadcast_to": np.broadcast_to(B, (4, 23)),
    "vstack": np.vstack([B, B * 2]),
    "hstack": np.hstack([A, A[:, 0:3]]),
    "hstack_1d": np.hstack([B, I]),
    "tril": np.tril(S),
    "triu_k": np.triu(A, 3),
    "tril_neg": np.tril(A, -5),
    "isin": np.isin(I, [-20, 1, 4, 7, 100]),
    "nonzero0": np.nonzero(A > 0.8)[0],
    "nonzero1": np.nonzero(A > 0.8)[1],
    "argwhere": np.argwhere(A > 0.9),
    "topk": topk(A, 3),
    "topk0": topk(A, -4, 0),
    "argtopk0": argtopk(A, 5, 0),
    "topk_vec": topk(B, 7),
    "argtopk_vec": argtopk(B, -6),
    "zeros_like": np.zeros_like(A),
    "ones_like_int": np.ones_like(I),
    "full_like": np.full_like(A, 7),
    "mo_none": map_overlap(A, lambda b: b - b.mean(0, keepdims=True), A_CHUNKS, [2, 3], "none"),
    "mo_reflect": map_overlap(A, lambda b: b * b.sum(), A_CHUNKS, [2, 2], "reflect"),
    "mo_periodic": map_overlap(B, lambda b: b - b.min(), [[5, 5, 5, 5, 3]], [2], "periodic"),
    "mo_const": map_overlap(A, lambda b: b / b.max(1, keepdims=True), A_CHUNKS, [1, 4], 0.5),
    "einsum_mm": np.einsum("ij,jk->ik", A, S),
    "einsum_mv": np.einsum("ij,j", A, B),
    "einsum_dot": np.einsum("i,i->", B, B),
    "einsum_outer": np.einsum("i,j->ij", B, I),
    "einsum_t": np.einsum("ij->ji", A),
    "einsum_sum0": np.einsum("ij->j", A),
    "einsum_batch": np.einsum("ij,ij->i", A, A * 2),
    "einsum_three": np.einsum("ij,jk,k->i", A, S, B),
    "einsum_bmm": np.einsum("bij,bjk->bik", np.stack([S, S * 2, S + 1]), np.stack([S.T, S, S * 3])),
    "einsum_int": np.einsum("i,j->ij", I, I),
    "einsum_list": np.einsum("ij,jk", A, S),
    "inv": np.linalg.inv(S),
    "inv_check": np.linalg.inv(S) @ S,
    "cholesky_u": np.linalg.cholesky(P).T,
    "cholesky_l": np.linalg.cholesky(P),
    "reduction_sum0": A.sum(0),
    "reduction_ptp": A.max(1),
    "reduction_all": A.max(keepdims=True),
    "nanvar_dof": np.nanvar(np.array([1.0, np.nan]), ddof=1),
    "nanprod0": np.nanprod(M, 0),
    "isin_big": np.isin(np.array([9007199254740993, 5]), [9007199254740992, 5.0]),
    "pct_scalar": np.percentile(A, 50),
    "blockwise_matmul": A @ S,
    "blockwise_lists": A.sum(1),
    "blockwise_literal": A * 2.5,
    "blockwise_transpose": A.T,
    "blockwise_broadcast_contracted": (A * A.sum(1, keepdims=True)).sum(1),
    "local_reshape": A.reshape(23, -1),
    "local_ravel": A.T.ravel(),
    "local_expand": np.expand_dims(B, -1),
    "local_squeeze": A.sum(1, keepdims=True).squeeze(),
    "local_squeeze0": A.sum(0, keepdims=True).squeeze(0),
    "blockwise_broadcast": A - A.mean(0, keepdims=True) + A.sum(1, keepdims=True),
    "from_delayed_block": A[10:20, 12:18] * 2,
    "from_delayed_lists": np.array([[0, 1.5], [2, 0], [1, 1.5], [2, 1]]),
    "randint_min": np.int64(-3),
    "randint_max": np.int64(4),
}

NAMES = {"float64": "f64", "float32": "f32", "int64": "i64", "bool": "bool"}


def clean(x):
    if isinstance(x, list):
        return [clean(v) for v in x]
    if isinstance(x, float) and not np.isfinite(x):
        return None
    return x


values = {}
dtypes = {}
for name, v in cases.items():
    v = np.asarray(v)
    dtypes[name] = NAMES[str(v.dtype)]
    values[name] = clean(v.tolist())
print(json.dumps({"values": values, "dtypes": dtypes}))
