#!/usr/bin/env python3
"""The anchors of `tile-gpu bench attention`: PyTorch's scaled dot-product
attention with its cuDNN and FlashAttention-2 backends, at the same shapes
(bf16, 16k tokens per batch, hidden 2048, BHSD), forward and backward, and
the ratios of the tile kernels' figures to them.

    python3 bench/attention_anchor.py BENCH_LOG

BENCH_LOG is the output of `tile-gpu bench attention` (or of the whole
bench) from the same run; its rows "attention fwd d128 16k full tile ..."
are matched to the anchors by shape. Timing as the C benchmarks time:
CUDA events around each call after warm-up, median of the repetitions.
TFLOP/s = 4 * batch * heads * seqlen^2 * dim / t, halved for causal; the
backward counts 2.5 times the forward. Runs only on the GPU machine (it
needs PyTorch with CUDA); the product itself never uses Python.
"""
import re
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

from anchor_common import median_ms

TOKENS, HIDDEN = 16384, 2048
SHAPES = [(64, 1024, False), (64, 16384, False), (64, 16384, True), (128, 1024, False), (128, 4096, False),
          (128, 16384, False), (128, 16384, True), (256, 16384, False)]
BACKWARD = [(128, 16384, False), (128, 16384, True)]
BACKENDS = [("cuDNN", SDPBackend.CUDNN_ATTENTION), ("FA2", SDPBackend.FLASH_ATTENTION)]


def flops(dim, seqlen, causal):
    batch, heads = TOKENS // seqlen, HIDDEN // dim
    f = 4.0 * batch * heads * seqlen * seqlen * dim
    return f / 2 if causal else f


def inputs(dim, seqlen, grad):
    batch, heads = TOKENS // seqlen, HIDDEN // dim
    shape = (batch, heads, seqlen, dim)
    return [torch.empty(shape, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1).requires_grad_(grad)
            for _ in range(3)]


def key(kind, dim, seqlen, causal):
    return f"{kind} d{dim} {seqlen // 1024}k {'causal' if causal else 'full'}"


def anchors():
    out = {}
    for dim, seqlen, causal in SHAPES:
        q, k, v = inputs(dim, seqlen, False)
        for name, backend in BACKENDS:
            with sdpa_kernel(backend):
                ms = median_ms(lambda: sdpa(q, k, v, is_causal=causal))
            out[(key("fwd", dim, seqlen, causal), name)] = flops(dim, seqlen, causal) / (ms * 1e9)
    for dim, seqlen, causal in BACKWARD:
        q, k, v = inputs(dim, seqlen, True)
        dout = torch.empty_like(q).uniform_(-1, 1)
        for name, backend in BACKENDS:
            with sdpa_kernel(backend):
                o = sdpa(q, k, v, is_causal=causal)
                ms = median_ms(lambda: torch.autograd.grad(o, (q, k, v), dout, retain_graph=True))
            out[(key("bwd", dim, seqlen, causal), name)] = 2.5 * flops(dim, seqlen, causal) / (ms * 1e9)
    return out


def tile_rows(log_path):
    """(shape key, kernel) -> TFLOP/s from the C benchmark's output."""
    rows = {}
    pattern = re.compile(r"^attention (fwd|bwd) (d\d+ \d+k (?:full|causal)) tile (.*?)\s+([\d.]+) TFLOP/s")
    with open(log_path) as f:
        for line in f:
            m = pattern.match(line)
            if m:
                rows[(f"{m.group(1)} {m.group(2)}", m.group(3).strip())] = float(m.group(4))
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    measured = anchors()
    tiles = tile_rows(sys.argv[1])
    print("| attention, bf16, 16k tokens | cuDNN TFLOP/s | FA2 TFLOP/s | tile kernel | tile TFLOP/s | vs cuDNN | vs FA2 |")
    print("|---|---|---|---|---|---|---|")
    shapes = [key("fwd", *s) for s in SHAPES] + [key("bwd", *s) for s in BACKWARD]
    for shape in shapes:
        cudnn, fa2 = measured.get((shape, "cuDNN"), 0), measured.get((shape, "FA2"), 0)
        kernels = [(kern, v) for (s, kern), v in tiles.items() if s == shape] or [("(not measured)", 0)]
        for kern, v in kernels:
            r1 = f"{v / cudnn:.3f}" if cudnn and v else "-"
            r2 = f"{v / fa2:.3f}" if fa2 and v else "-"
            print(f"| {shape} | {cudnn:.1f} | {fa2:.1f} | {kern} | {v:.1f} | {r1} | {r2} |")


if __name__ == "__main__":
    main()
