#!/usr/bin/env python3
"""The anchors of `tile-gpu bench decode`: PyTorch's scaled dot-product
attention with its cuDNN and FlashAttention-2 backends on one query token
per sequence against contiguous K/V (bf16, 32 query heads, d128), at the
decode bench's shapes, in TB/s of K+V bytes read, and the ratios of the
paged kernel's figures to them.

    python3 bench/decode_anchor.py BENCH_LOG

BENCH_LOG is the output of `tile-gpu bench decode` from the same run; its
rows "decode b64 h32 kv8 d128 4k page16 bf16 TB/s ..." are matched by
shape. With 8 KV heads the anchors run grouped-query attention
(enable_gqa) where the backend offers it; the bytes counted are the K/V
tensors' (batch * len * heads_kv * 128 * 2 * 2) either way. Timing: CUDA
events around each call after warm-up, median; a second table has each
kernel's calls issued back to back (events around rounds of 20, median
per call: the device time without the host's launch latency in front of
each call, as under a CUDA graph), the tile figures from the log's
"queued" lines. Runs only on the GPU
machine (it needs PyTorch with CUDA); the product never uses Python.
"""
import re
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

from anchor_common import median_ms

HEADS, DIM = 32, 128
SHAPES = [(64, 8, 4096), (64, 8, 32768), (64, 32, 4096), (64, 32, 32768), (1, 8, 32768), (1, 32, 32768)]
# the back-to-back timing of bench_time_queued_ms (bench/gpu_bench.c)
QUEUED_ROUNDS, QUEUED_CALLS = 9, 20
BACKENDS = [("cuDNN", SDPBackend.CUDNN_ATTENTION), ("FA2", SDPBackend.FLASH_ATTENTION)]


def key(batch, kv, length):
    return f"b{batch} h32 kv{kv} d128 {length // 1024}k"


def anchors():
    out = {}
    for batch, kv, length in SHAPES:
        q = torch.empty((batch, HEADS, 1, DIM), device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
        k = torch.empty((batch, kv, length, DIM), device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
        v = torch.empty_like(k).uniform_(-1, 1)
        kv_bytes = 2.0 * k.numel() * k.element_size()
        for name, backend in BACKENDS:
            try:
                with sdpa_kernel(backend):
                    ms = median_ms(lambda: sdpa(q, k, v, enable_gqa=kv != HEADS))
                    queued = median_ms(lambda: sdpa(q, k, v, enable_gqa=kv != HEADS), reps=QUEUED_ROUNDS,
                                       calls=QUEUED_CALLS)
                out[(key(batch, kv, length), name)] = kv_bytes / (ms * 1e9)
                out[(key(batch, kv, length), name + " queued")] = kv_bytes / (queued * 1e9)
            except RuntimeError as e:
                print(f"{name} at {key(batch, kv, length)}: {str(e).splitlines()[0]}")
        del q, k, v
        torch.cuda.empty_cache()
    return out


def tile_rows(log_path):
    """The log's bf16 rows: shape -> (kernel, TB/s), and its "queued"
    lines: shape -> TB/s back to back."""
    rows, queued = {}, {}
    row = re.compile(r"^\| decode (b\d+ h32 kv\d+ d128 \d+k) page16 bf16 TB/s vs copy \((.*?)\) \| ([\d.]+) TB/s")
    back = re.compile(r"^queued (b\d+) (kv\d+) (\d+k) bf16: .* ([\d.]+) TB/s")
    with open(log_path) as f:
        for line in f:
            m = row.match(line)
            if m:
                rows[m.group(1)] = (m.group(2), float(m.group(3)))
            m = back.match(line)
            if m:
                queued[f"{m.group(1)} h32 {m.group(2)} d128 {m.group(3)}"] = float(m.group(4))
    return rows, queued


def ratio(v, anchor):
    return f"{v / anchor:.3f}" if anchor and v else "-"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    measured = anchors()
    tiles, queued = tile_rows(sys.argv[1])
    print("| decode, bf16, 32 heads, d128 | cuDNN TB/s | FA2 TB/s | tile kernel | tile TB/s | vs cuDNN | vs FA2 |")
    print("|---|---|---|---|---|---|---|")
    for shape in [key(*s) for s in SHAPES]:
        cudnn, fa2 = measured.get((shape, "cuDNN"), 0), measured.get((shape, "FA2"), 0)
        kern, v = tiles.get(shape, ("(not measured)", 0))
        print(f"| {shape} | {cudnn:.2f} | {fa2:.2f} | {kern} | {v:.2f} | {ratio(v, cudnn)} | {ratio(v, fa2)} |")
    # the same, calls issued back to back (the tile figures from the log's
    # "queued" lines): without the host's launch latency in front of each
    print()
    print("| decode, bf16, back to back | cuDNN TB/s | FA2 TB/s | tile TB/s | vs cuDNN | vs FA2 |")
    print("|---|---|---|---|---|---|")
    for shape in [key(*s) for s in SHAPES]:
        cudnn, fa2 = measured.get((shape, "cuDNN queued"), 0), measured.get((shape, "FA2 queued"), 0)
        v = queued.get(shape, 0)
        print(f"| {shape} | {cudnn:.2f} | {fa2:.2f} | {v:.2f} | {ratio(v, cudnn)} | {ratio(v, fa2)} |")


if __name__ == "__main__":
    main()
