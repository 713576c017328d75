#!/usr/bin/env python3
"""The anchors of `tile-gpu bench mlp`: what a PyTorch user gets for the
same layers (bf16), and the ratios of the tile kernels' figures to them.

    python3 bench/mlp_anchor.py BENCH_LOG

  SwiGLU MLP, 8192 tokens, 4096 -> 14336 -> 4096: eager (x@W1, x@W3,
    silu * mul, @W2) and torch.compile of the same function
  MoE layers (routing to combine: softmax, top-k, renormalization, the
    expert MLPs, the weighted combine): a loop over experts, and sorting
    the pairs by expert with torch._grouped_mm for the three products

BENCH_LOG is the output of `tile-gpu bench mlp` (or the whole bench) from
the same run; rows are matched by name ("mlp swiglu ...", "moe mixtral
...", "moe fine-grained ..."). Timing as the C benchmarks: CUDA events
around each call after warm-up, median. TFLOP/s counts the layer's three
products: 2 * tokens * top_k * d * d_ff * 3. Runs on the GPU machine only.
"""
import re
import sys

import torch
import torch.nn.functional as F

from anchor_common import median_ms as median_ms_of

WARMUP, REPS = 3, 15


def median_ms(fn):
    return median_ms_of(fn, WARMUP, REPS)
MOE = [("mixtral", 8192, 8, 2, 4096, 14336), ("fine-grained", 16384, 128, 8, 2048, 768)]


def rand(*shape, scale=1.0):
    return (torch.rand(*shape, device="cuda", dtype=torch.float32) * 2 - 1).mul_(scale).to(torch.bfloat16)


def swiglu(x, w1, w3, w2):
    return (F.silu(x @ w1) * (x @ w3)) @ w2


def mlp_anchors():
    t, d, dff = 8192, 4096, 14336
    x, w1, w3, w2 = rand(t, d), rand(d, dff, scale=0.02), rand(d, dff, scale=0.02), rand(dff, d, scale=0.02)
    flops = 2.0 * t * d * dff * 3
    out = {"eager": flops / (median_ms(lambda: swiglu(x, w1, w3, w2)) * 1e9)}
    compiled = torch.compile(swiglu)
    out["torch.compile"] = flops / (median_ms(lambda: compiled(x, w1, w3, w2)) * 1e9)
    return out


def route(logits, k):
    p = torch.softmax(logits.float(), dim=-1)
    w, ids = torch.topk(p, k, dim=-1)
    return w / w.sum(-1, keepdim=True), ids


def moe_loop(x, logits, w1, w3, w2, k):
    w, ids = route(logits, k)
    y = torch.zeros_like(x, dtype=torch.float32)
    for e in range(w1.shape[0]):
        tok, slot = (ids == e).nonzero(as_tuple=True)
        if tok.numel():
            h = swiglu(x[tok], w1[e], w3[e], w2[e])
            y.index_add_(0, tok, h.float() * w[tok, slot, None])
    return y.to(x.dtype)


def moe_grouped(x, logits, w1, w3, w2, k):
    w, ids = route(logits, k)
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=w1.shape[0])
    offs = torch.cumsum(counts, 0).to(torch.int32)
    xs = x[order // k]
    h = F.silu(torch._grouped_mm(xs, w1, offs=offs)) * torch._grouped_mm(xs, w3, offs=offs)
    o = torch._grouped_mm(h, w2, offs=offs)
    y = torch.zeros_like(x, dtype=torch.float32)
    y.index_add_(0, order // k, o.float() * w.flatten()[order, None])
    return y.to(x.dtype)


def moe_anchors():
    out = {}
    for name, t, e, k, d, dff in MOE:
        x, logits = rand(t, d), torch.randn(t, e, device="cuda")
        w1, w3, w2 = rand(e, d, dff, scale=0.02), rand(e, d, dff, scale=0.02), rand(e, dff, d, scale=0.02)
        flops = 2.0 * t * k * d * dff * 3
        out[(name, "loop over experts")] = flops / (median_ms(lambda: moe_loop(x, logits, w1, w3, w2, k)) * 1e9)
        try:
            out[(name, "torch._grouped_mm")] = flops / (median_ms(lambda: moe_grouped(x, logits, w1, w3, w2, k)) * 1e9)
        except (RuntimeError, AttributeError) as err:
            print(f"torch._grouped_mm unavailable for {name}: {err}", file=sys.stderr)
        del w1, w3, w2
        torch.cuda.empty_cache()
    return out


def tile_rows(path):
    rows = {}
    pat = re.compile(r"^(mlp swiglu fp8|mlp swiglu|moe mixtral|moe fine-grained)\b.*?\s+([\d.]+) TFLOP/s")
    with open(path) as f:
        for line in f:
            m = pat.match(line)
            if m:
                key = m.group(1)
                # the MoE layers with fp8 expert weights: their own rows
                if key.startswith("moe") and " fp8 " in line:
                    key += " fp8"
                rows[key] = float(m.group(2))
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tiles = tile_rows(sys.argv[1])
    print("| layer, bf16 | anchor | anchor TFLOP/s | tile TFLOP/s | ratio |")
    print("|---|---|---|---|---|")
    for name, v in mlp_anchors().items():
        t = tiles.get("mlp swiglu", 0)
        print(f"| SwiGLU MLP 8192 tokens 4096->14336->4096 | PyTorch {name} | {v:.1f} | {t:.1f} | "
              f"{t / v:.3f} |" if t else f"| SwiGLU MLP | PyTorch {name} | {v:.1f} | - | - |")
    t8, t16 = tiles.get("mlp swiglu fp8", 0), tiles.get("mlp swiglu", 0)
    if t8 and t16:
        print(f"| SwiGLU MLP fp8 e4m3 (quantizations included) | tile bf16 (this run) | {t16:.1f} | {t8:.1f} | "
              f"{t8 / t16:.3f} |")
    for (name, how), v in moe_anchors().items():
        t = tiles.get(f"moe {name}", 0)
        print(f"| MoE {name} layer | PyTorch {how} | {v:.1f} | {t:.1f} | {t / v:.3f} |" if t
              else f"| MoE {name} layer | PyTorch {how} | {v:.1f} | - | - |")
    for name in ("mixtral", "fine-grained"):
        t8, t16 = tiles.get(f"moe {name} fp8", 0), tiles.get(f"moe {name}", 0)
        if t8 and t16:
            print(f"| MoE {name} layer, fp8 e4m3 expert weights (quantizations included) | tile bf16 (this run) | "
                  f"{t16:.1f} | {t8:.1f} | {t8 / t16:.3f} |")


if __name__ == "__main__":
    main()
