#!/usr/bin/env python3
"""The anchor of the JIT rows of `tile-gpu bench compile`: Triton's
compile time for an attention forward kernel (FlashAttention-2 style, d128,
128 x 64 blocks, bf16) in a fresh process with an empty cache, and the cost
of a call whose compiled kernel is already cached (in the process, and on
disk from a second process).

    python3 bench/jit_anchor.py BENCH_LOG

BENCH_LOG is the output of `tile-gpu bench compile` from the same run; its
rows "JIT flash_attention_ws ..." are printed beside Triton's. Each Triton
figure runs in a child Python process with TRITON_CACHE_DIR set to a new
temporary directory (cold) or to the one a previous child filled (disk).
Runs only on the GPU machine (it needs PyTorch and Triton); the product
itself never uses Python.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

CHILD = r'''
import json, sys, time
t_start = time.perf_counter()
import torch, triton, triton.language as tl

@triton.jit
def attn_fwd(q, k, v, o, seqlen, scale, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    row0 = tl.program_id(0) * BM
    head = tl.program_id(1)
    base = head * seqlen * D
    rows = row0 + tl.arange(0, BM)
    dims = tl.arange(0, D)
    qt = tl.load(q + base + rows[:, None] * D + dims[None, :], mask=rows[:, None] < seqlen, other=0.0)
    m = tl.full([BM], float("-inf"), tl.float32)
    l = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    for start in range(0, seqlen, BN):
        cols = start + tl.arange(0, BN)
        kt = tl.load(k + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < seqlen, other=0.0)
        s = tl.dot(qt, tl.trans(kt)) * scale
        s = tl.where(cols[None, :] < seqlen, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m - m_new)
        l = l * alpha + tl.sum(p, 1)
        vt = tl.load(v + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < seqlen, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), vt)
        m = m_new
    tl.store(o + base + rows[:, None] * D + dims[None, :], (acc / l[:, None]).to(tl.bfloat16),
             mask=rows[:, None] < seqlen)

heads, seqlen, D = 16, 1024, 128
q, k, v = (torch.randn(heads, seqlen, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
o = torch.empty_like(q)
grid = (triton.cdiv(seqlen, 128), heads)
torch.cuda.synchronize()
t0 = time.perf_counter()
attn_fwd[grid](q, k, v, o, seqlen, D ** -0.5, D=D, BM=128, BN=64, num_warps=8, num_stages=2)
torch.cuda.synchronize()
first = time.perf_counter() - t0
calls = []
for _ in range(101):
    t0 = time.perf_counter()
    attn_fwd[grid](q, k, v, o, seqlen, D ** -0.5, D=D, BM=128, BN=64, num_warps=8, num_stages=2)
    calls.append(time.perf_counter() - t0)
torch.cuda.synchronize()
calls.sort()
ref = torch.softmax((q.float() @ k.float().transpose(1, 2)) * D ** -0.5, -1) @ v.float()
err = ((o.float() - ref).abs().max() / ref.abs().max()).item()
print(json.dumps({"first_call_s": first, "cached_call_us": calls[50] * 1e6, "rel_error": err}))
'''


def child(cache, script):
    env = dict(os.environ, TRITON_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=300)
    if out.returncode:
        sys.exit("triton child failed:\n" + out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    rows = {}
    if len(sys.argv) > 1:
        for line in open(sys.argv[1]):
            hit = re.match(r"(JIT flash_attention_ws, [^(]*\((ms|us)\))\s+([0-9.]+)", line)
            if hit:
                rows[hit.group(1)] = float(hit.group(3))
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as work:
        script = os.path.join(work, "triton_attention.py")  # Triton reads a @jit function's source from its file
        with open(script, "w") as f:
            f.write(CHILD)
        cold = child(cache, script)
        warm = child(cache, script)
    print("| what | tile (libtile_jit) | Triton 3.6 |")
    print("|---|---|---|")
    print("| first call, empty cache | %s ms | %.0f ms (compile and launch) |"
          % (rows.get("JIT flash_attention_ws, empty cache (ms)", "?"), cold["first_call_s"] * 1e3))
    print("| first call in a new process, kernel on disk | %s us (cubin from disk) | %.0f ms (load and launch) |"
          % (rows.get("JIT flash_attention_ws, from disk (us)", "?"), warm["first_call_s"] * 1e3))
    print("| cached call in the process | %s us (cubin from memory) | %.1f us (launch from Python) |"
          % (rows.get("JIT flash_attention_ws, from memory (us)", "?"), cold["cached_call_us"]))
    print("Triton kernel relative error against float32: %.2e" % cold["rel_error"])


if __name__ == "__main__":
    main()
