"""The GPU ML anchors (issue 27, ../shared/reference/ml.md §6.3): the same
algorithms as brisk's GML1/GML3/GML4, written plainly in PyTorch on one GPU
(cuML cannot be carried to the lent machine). Timed with a device
synchronize, one warm-up then the median of REPS. One JSON line per result.

    python3 bench/gpu/ml_torch.py [N]
"""
import json
import statistics
import sys
import time

import torch

K, REPS = 16, 3
dev = torch.device("cuda")
X = w = y = None
N = P = 0


def data(n, p, dtype):
    global X, w, y, N, P
    X = w = y = None
    torch.cuda.empty_cache()
    N, P = n, p
    g = torch.Generator(device=dev).manual_seed(7)
    X = torch.randn(n, p, device=dev, generator=g, dtype=dtype)
    w = torch.randn(p, device=dev, generator=g, dtype=dtype)
    y = ((X @ w + 2.0 * torch.randn(n, device=dev, generator=g, dtype=dtype)) > 0).to(dtype)


def timed(f):
    times = []
    out = None
    for i in range(REPS + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = f()
        torch.cuda.synchronize()
        if i > 0:
            times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def lloyd():
    c = X[:K].clone()
    for _ in range(10):
        d = (c * c).sum(1)[None, :] - 2.0 * (X @ c.T)
        lab = d.argmin(1)
        sums = torch.zeros(K, P, device=dev, dtype=torch.float64).index_add_(0, lab, X.double())
        cnt = torch.bincount(lab, minlength=K).double()
        c = (sums / cnt.clamp(min=1)[:, None]).to(X.dtype)
    return c


def logistic():
    # scikit-learn's objective: C·Σ loss + ½‖w‖² (intercept unpenalised), C = 1.
    wb = torch.zeros(P + 1, device=dev, dtype=X.dtype, requires_grad=True)
    opt = torch.optim.LBFGS([wb], max_iter=100, tolerance_grad=1e-4, tolerance_change=0.0,
                            history_size=10, line_search_fn="strong_wolfe")
    evals = [0]

    def closure():
        opt.zero_grad()
        z = X @ wb[:P] + wb[P]
        loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y, reduction="sum") \
            + 0.5 * (wb[:P] * wb[:P]).sum()
        loss.backward()
        evals[0] += 1
        return loss

    opt.step(closure)
    return evals[0]


def pca():
    mu = X.double().mean(0)
    xc = X - mu.to(X.dtype)
    gram = xc.T @ xc
    vals, vecs = torch.linalg.eigh(gram.double())
    return vals.flip(0)[:10]


def run(name, f, extra=None):
    s, out = timed(f)
    row = {"bench": name, "engine": "pytorch", "seconds": s, "n": N, "p": P, "dtype": str(X.dtype)}
    if name.startswith("GML1"):
        row["per_iter"] = s / 10
    if name.startswith("GML3"):
        row["evaluations"] = out
    print(json.dumps(row), flush=True)


data(20_000_000, 50, torch.float32)
run("GML1", lloyd)
run("GML3", logistic)
run("GML4", pca)
data(10_000_000, 50, torch.float64)
run("GML1-f64", lloyd)
data(10_000_000, 100, torch.float64)
run("GML3-f64", logistic)
run("GML4-f64", pca)
