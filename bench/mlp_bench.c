/* mlp_bench.c - `tile-gpu bench mlp`: the standard library's fused MLP and
 * MoE layer at the shapes of ../shared/ANCHORS.md (bf16), in TFLOP/s of
 * the layer's products:
 *
 *   SwiGLU MLP, 8192 tokens, 4096 -> 14336 -> 4096: mlp_gate_up then
 *     mlp_down (no residual), 2 * tokens * d * d_ff * 3 operations
 *   MoE, Mixtral experts (8, top-2, 4096 -> 14336 -> 4096), 8192 tokens,
 *     and fine-grained experts (128, top-8, 2048 -> 768 -> 2048), 16384
 *     tokens: the whole layer timed through tile_moe_forward, routing to
 *     combine (route, count, scan, scatter, the gated grouped GEMM, the
 *     grouped GEMM, combine), 2 * tokens * top_k * d * d_ff * 3 operations
 *
 * The anchors (PyTorch eager and torch.compile for the MLP; a loop over
 * experts and torch._grouped_mm for the MoE layers) come from
 * bench/mlp_anchor.py in the same run; the rows here carry anchor 0.
 * TILE_BENCH_PAIRING=1 also times mlp_gate_up with paired and separate
 * products; TILE_BENCH_MLP_SPLIT=1 each of the MLP's two kernels against
 * cuBLAS doing its products.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cublas_anchor.h"
#include "tile_mlp.h"

#define MLP_NAME_BYTES 160

typedef struct Step {
  const tile_kernel *k;
  uint32_t grid[2];
  tile_arg args[10];
  int nargs;
} Step;

/* A layer: its launches in order. */
typedef struct Layer {
  Gpu *g;
  Step steps[8];
  int nsteps;
} Layer;

static bool run_layer(void *ctx) {
  Layer *l = ctx;
  for (int i = 0; i < l->nsteps; i++) {
    uint32_t grid[3] = {l->steps[i].grid[0], l->steps[i].grid[1], 1};
    if (tile_launch(l->steps[i].k, grid, NULL, l->steps[i].args, l->steps[i].nargs) != TILE_OK) {
      printf("  %s: %s\n", tile_kernel_name(l->steps[i].k), tile_last_error());
      return false;
    }
  }
  return true;
}

/* mlp_gate_up alone, its gate and up products as one wgmma instruction
 * (the default) and as two (tc_codegen_options.separate_products), timed
 * alternately on the layer's inputs; the two outputs must be the same
 * bits (each column's products add in the same order either way). */
static void bench_pairing(Gpu *g, Step *paired_step, uint64_t h, size_t h_bytes) {
  Variant pv;
  tc_codegen_options po = {.linker = TC_LINKER_AUTO, .separate_products = true};
  if (!variant_build_kernel_opts(g, "lang/std/mlp.tile", "mlp_gate_up", NULL, &po, &pv)) return;
  Step sep_step = *paired_step;
  sep_step.k = pv.kernel;
  Layer lp = {.g = g, .nsteps = 1}, ls = {.g = g, .nsteps = 1};
  lp.steps[0] = *paired_step, ls.steps[0] = sep_step;
  void *a = malloc(h_bytes), *b = malloc(h_bytes);
  bool same = a && b && run_layer(&lp) && tile_memcpy_dtoh(g->rt, a, h, h_bytes) == TILE_OK && run_layer(&ls) &&
              tile_memcpy_dtoh(g->rt, b, h, h_bytes) == TILE_OK && !memcmp(a, b, h_bytes);
  free(a), free(b);
  printf("  mlp_gate_up paired and separate products: outputs %s\n", same ? "identical" : "DIFFER");
  double flops = 2.0 * 8192 * 4096 * 14336.0 * 2;
  for (int round = 0; round < 3 && same; round++) {
    double mp = 0, ms = 0;
    if (bench_time_pair_ms(g, run_layer, &lp, run_layer, &ls, &mp, &ms) && mp > 0 && ms > 0)
      printf("  mlp_gate_up round %d: paired %.1f TFLOP/s, separate %.1f TFLOP/s, paired/separate %.3f\n", round,
             flops / (mp * 1e9), flops / (ms * 1e9), ms / mp);
  }
  variant_free(&pv);
}

/* Rounds of the per-GEMM comparison. */
#define MLP_SPLIT_ROUNDS 3

/* The cuBLAS products one step of the MLP stands for: y = a @ b per
 * entry (row-major, no transposes), bf16 out. */
typedef struct CublasSteps {
  CublasAnchor *c;
  int n; /* products */
  int m[2], nn[2], k[2];
  uint64_t a[2], b[2], out[2];
} CublasSteps;

static bool run_cublas_steps(void *ctx) {
  CublasSteps *cs = ctx;
  char msg[256];
  for (int i = 0; i < cs->n; i++)
    if (!cublas_anchor_gemm(cs->c, NULL, false, false, false, false, cs->m[i], cs->nn[i], cs->k[i], cs->a[i], cs->k[i],
                            cs->b[i], cs->nn[i], cs->out[i], cs->nn[i], msg, sizeof msg)) {
      printf("  cuBLAS: %s\n", msg);
      return false;
    }
  return true;
}

/* TILE_BENCH_MLP_SPLIT=1: each GEMM of the SwiGLU layer alone against
 * cuBLAS doing its products (mlp_gate_up against x @ w1 and x @ w3 without
 * the activation; mlp_down against h @ w2), in alternating rounds: which
 * of the two kernels stands behind cuBLAS, and by how much. Printed, not
 * rows. */
static void bench_mlp_split(Gpu *g, const Layer *l, uint64_t x, uint64_t w1, uint64_t w3, uint64_t w2, uint64_t h,
                            uint64_t y, int tokens, int d, int dff) {
  char msg[256];
  CublasAnchor *c = NULL;
  if (!cublas_anchor_open(&c, g->rt, msg, sizeof msg)) {
    printf("  TILE_BENCH_MLP_SPLIT: no cuBLAS (%s)\n", msg);
    return;
  }
  /* the cuBLAS products write h (and y): their values are not read */
  CublasSteps up = {c, 2, {tokens, tokens}, {dff, dff}, {d, d}, {x, x}, {w1, w3}, {h, h}};
  CublasSteps down = {c, 1, {tokens}, {d}, {dff}, {h}, {w2}, {y}};
  const char *names[2] = {"mlp_gate_up", "mlp_down"};
  double flops[2] = {2.0 * tokens * d * (double)dff * 2, 2.0 * tokens * d * (double)dff};
  for (int i = 0; i < 2; i++) {
    Layer one = {.g = g, .nsteps = 1};
    one.steps[0] = l->steps[i];
    for (int r = 0; r < MLP_SPLIT_ROUNDS; r++) {
      double mt = 0, mc = 0;
      if (bench_time_pair_ms(g, run_layer, &one, run_cublas_steps, i ? (void *)&down : (void *)&up, &mt, &mc) && mt > 0 &&
          mc > 0)
        printf("  %s round %d: tile %.1f TFLOP/s, cuBLAS %.1f TFLOP/s, tile/cuBLAS %.3f\n", names[i], r,
               flops[i] / (mt * 1e9), flops[i] / (mc * 1e9), mc / mt);
    }
  }
  cublas_anchor_close(c);
}

static void bench_swiglu(Gpu *g) {
  const int tokens = 8192, d = 4096, dff = 14336;
  Variant up, down;
  memset(&up, 0, sizeof up), memset(&down, 0, sizeof down);
  bool ok = variant_build_kernel(g, "lang/std/mlp.tile", "mlp_gate_up", NULL, &up) &&
            variant_build_kernel(g, "lang/std/mlp.tile", "mlp_down", (const char *const[]){"RESIDUAL", "false", NULL},
                                 &down);
  uint64_t x = bench_dev_fill(g, "bf16", (size_t)tokens * d, 1, 1), w1 = bench_dev_fill(g, "bf16", (size_t)d * dff, 0.02, 2);
  uint64_t w3 = bench_dev_fill(g, "bf16", (size_t)d * dff, 0.02, 3), w2 = bench_dev_fill(g, "bf16", (size_t)dff * d, 0.02, 4);
  uint64_t h = bench_dev_fill(g, "bf16", (size_t)tokens * dff, 0, 0), y = bench_dev_fill(g, "bf16", (size_t)tokens * d, 0, 0);
  ok = ok && x && w1 && w3 && w2 && h && y;
  if (ok) {
    tile_tensor th = {h, 2, {tokens, dff}, {dff, 1}}, tx = {x, 2, {tokens, d}, {d, 1}};
    tile_tensor t1 = {w1, 2, {d, dff}, {dff, 1}}, t3 = {w3, 2, {d, dff}, {dff, 1}};
    tile_tensor ty = {y, 2, {tokens, d}, {d, 1}}, t2 = {w2, 2, {dff, d}, {d, 1}};
    uint32_t sms = (uint32_t)g->props.sm_count;
    Layer l = {.g = g, .nsteps = 2};
    l.steps[0] = (Step){up.kernel, {sms, 1}, {tile_arg_tensor(&th), tile_arg_tensor(&tx), tile_arg_tensor(&t1),
                                             tile_arg_tensor(&t3), tile_arg_i64(tokens), tile_arg_i64(d),
                                             tile_arg_i64(dff)}, 7};
    l.steps[1] = (Step){down.kernel, {sms, 1}, {tile_arg_tensor(&ty), tile_arg_tensor(&th), tile_arg_tensor(&t2),
                                               tile_arg_ptr(y), tile_arg_i64(d), tile_arg_i64(tokens),
                                               tile_arg_i64(dff), tile_arg_i64(d)}, 8};
    double ms = bench_time_ms(g, run_layer, &l);
    if (ms > 0)
      bench_add_row("mlp swiglu 8192 tokens 4096->14336->4096 tile (mlp_gate_up + mlp_down)",
                    2.0 * tokens * d * (double)dff * 3 / (ms * 1e9), 0, "TFLOP/s");
    if (getenv("TILE_BENCH_PAIRING")) bench_pairing(g, &l.steps[0], h, sizeof(uint16_t) * (size_t)tokens * dff);
    if (getenv("TILE_BENCH_MLP_SPLIT")) bench_mlp_split(g, &l, x, w1, w3, w2, h, y, tokens, d, dff);
  }
  uint64_t bufs[] = {x, w1, w3, w2, h, y};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) tile_mem_free(g->rt, bufs[i]);
  variant_free(&up), variant_free(&down);
}

/* The same layer in fp8 e4m3 (mlp.tile's fp8 kernels): the two per-token
 * quantizations timed with the products. Reported against the bf16
 * figure by mlp_anchor.py. */
static void bench_swiglu_fp8(Gpu *g) {
  const int tokens = 8192, d = 4096, dff = 14336;
  static const char *const kn[4] = {"mlp_quantize_fp8", "mlp_gate_up_fp8", "mlp_quantize_fp8", "mlp_down_fp8"};
  Variant v[4];
  memset(v, 0, sizeof v);
  bool ok = true;
  for (int i = 0; i < 4 && ok; i++)
    ok = variant_build_kernel(g, "lang/std/mlp.tile", kn[i], i == 3 ? (const char *const[]){"RESIDUAL", "false", NULL} : NULL,
                              &v[i]);
  uint64_t x = bench_dev_fill(g, "bf16", (size_t)tokens * d, 1, 11), xq = bench_dev_fill(g, "f8e4m3", (size_t)tokens * d, 0, 0);
  uint64_t xs = bench_dev_fill(g, "f32", (size_t)tokens, 0, 0), hs = bench_dev_fill(g, "f32", (size_t)tokens, 0, 0);
  uint64_t w1 = bench_dev_fill(g, "f8e4m3", (size_t)d * dff, 200, 12), w3 = bench_dev_fill(g, "f8e4m3", (size_t)d * dff, 200, 13);
  uint64_t w2 = bench_dev_fill(g, "f8e4m3", (size_t)dff * d, 200, 14);
  /* the weights' per-channel scales: positive, around 1e-4 */
  uint64_t s1 = bench_dev_fill(g, "f32", (size_t)dff, 0, 0), s3 = bench_dev_fill(g, "f32", (size_t)dff, 0, 0);
  uint64_t s2 = bench_dev_fill(g, "f32", (size_t)d, 0, 0);
  uint64_t h = bench_dev_fill(g, "bf16", (size_t)tokens * dff, 0, 0), hq = bench_dev_fill(g, "f8e4m3", (size_t)tokens * dff, 0, 0);
  uint64_t y = bench_dev_fill(g, "bf16", (size_t)tokens * d, 0, 0);
  uint64_t bufs[] = {x, xq, xs, hs, w1, w3, w2, s1, s3, s2, h, hq, y};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ok = ok && bufs[i];
  if (ok) { /* every channel's scale 1e-4 (dff >= d entries) */
    float *scale = malloc(sizeof(float) * (size_t)dff);
    for (int i = 0; scale && i < dff; i++) scale[i] = 1e-4f;
    ok = scale && tile_memcpy_htod(g->rt, s1, scale, sizeof(float) * (size_t)dff) == TILE_OK &&
         tile_memcpy_htod(g->rt, s3, scale, sizeof(float) * (size_t)dff) == TILE_OK &&
         tile_memcpy_htod(g->rt, s2, scale, sizeof(float) * (size_t)d) == TILE_OK;
    free(scale);
  }
  if (ok) {
    tile_tensor th = {h, 2, {tokens, dff}, {dff, 1}}, txq = {xq, 2, {tokens, d}, {d, 1}};
    tile_tensor t1 = {w1, 2, {dff, d}, {d, 1}}, t3 = {w3, 2, {dff, d}, {d, 1}};
    tile_tensor ty = {y, 2, {tokens, d}, {d, 1}}, thq = {hq, 2, {tokens, dff}, {dff, 1}}, t2 = {w2, 2, {d, dff}, {dff, 1}};
    uint32_t sms = (uint32_t)g->props.sm_count;
    Layer l = {.g = g, .nsteps = 4};
    l.steps[0] = (Step){v[0].kernel, {(uint32_t)tokens, 1},
                        {tile_arg_ptr(xq), tile_arg_ptr(xs), tile_arg_ptr(x), tile_arg_i64(d)}, 4};
    l.steps[1] = (Step){v[1].kernel, {sms, 1}, {tile_arg_tensor(&th), tile_arg_tensor(&txq), tile_arg_tensor(&t1),
                                               tile_arg_tensor(&t3), tile_arg_ptr(xs), tile_arg_ptr(s1), tile_arg_ptr(s3),
                                               tile_arg_i64(tokens), tile_arg_i64(d), tile_arg_i64(dff)}, 10};
    l.steps[2] = (Step){v[2].kernel, {(uint32_t)tokens, 1},
                        {tile_arg_ptr(hq), tile_arg_ptr(hs), tile_arg_ptr(h), tile_arg_i64(dff)}, 4};
    l.steps[3] = (Step){v[3].kernel, {sms, 1}, {tile_arg_tensor(&ty), tile_arg_tensor(&thq), tile_arg_tensor(&t2),
                                               tile_arg_ptr(hs), tile_arg_ptr(s2), tile_arg_ptr(y), tile_arg_i64(d),
                                               tile_arg_i64(tokens), tile_arg_i64(dff), tile_arg_i64(d)}, 10};
    double ms = bench_time_ms(g, run_layer, &l);
    if (ms > 0)
      bench_add_row("mlp swiglu fp8 e4m3 8192 tokens 4096->14336->4096 tile (quantize + mlp_gate_up_fp8 + quantize + "
                    "mlp_down_fp8)",
                    2.0 * tokens * d * (double)dff * 3 / (ms * 1e9), 0, "TFLOP/s");
  }
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) tile_mem_free(g->rt, bufs[i]);
  for (int i = 0; i < 4; i++) variant_free(&v[i]);
}

/* One tile_moe_forward call (or tile_moe_forward_fp8 with f8), as a
 * LaunchFn. */
typedef struct MoeCall {
  tile_moe *m;
  tile_moe_problem p;
  uint64_t y, x, logits, w1, w3, w2, ws;
  const tile_moe_fp8_weights *f8;
} MoeCall;

static bool run_moe_layer(void *ctx) {
  MoeCall *c = ctx;
  tile_status st = c->f8 ? tile_moe_forward_fp8(c->m, &c->p, c->y, c->x, c->logits, c->f8, c->ws, NULL)
                         : tile_moe_forward(c->m, &c->p, c->y, c->x, c->logits, c->w1, c->w3, c->w2, c->ws, NULL);
  if (st == TILE_OK) return true;
  printf("  tile_moe_forward%s: %s\n", c->f8 ? "_fp8" : "", tile_last_error());
  return false;
}

/* The whole layer through tile_moe_forward (the kernels of moe.tile as
 * libtile_mlp embeds them), routing to combine; with fp8, the same layer
 * with e4m3 expert weights and block scales (tile_moe_forward_fp8). */
static void bench_moe(Gpu *g, const char *what, int tokens, int experts, int top_k, int d, int dff, bool fp8) {
  MoeCall c = {.p = {.tokens = tokens, .d_model = d, .d_ff = dff, .experts = experts, .top_k = top_k,
                     .renormalize = true, .act = TILE_MLP_SWIGLU}};
  size_t ws_bytes = fp8 ? tile_moe_fp8_workspace_bytes(&c.p) : tile_moe_workspace_bytes(&c.p);
  bool ok = ws_bytes > 0 && tile_moe_create(g->rt, &c.m) == TILE_OK && tile_mem_alloc(g->rt, ws_bytes, &c.ws) == TILE_OK;
  const char *wt = fp8 ? "f8e4m3" : "bf16";
  const double wr = fp8 ? 200 : 0.02; /* e4m3 weights across their range, scales 1e-4 */
  c.logits = bench_dev_fill(g, "f32", (size_t)tokens * experts, 4, 5);
  c.x = bench_dev_fill(g, "bf16", (size_t)tokens * d, 1, 6);
  c.w1 = bench_dev_fill(g, wt, (size_t)experts * d * dff, wr, 7);
  c.w3 = bench_dev_fill(g, wt, (size_t)experts * d * dff, wr, 8);
  c.w2 = bench_dev_fill(g, wt, (size_t)experts * dff * d, wr, 9);
  c.y = bench_dev_fill(g, "bf16", (size_t)tokens * d, 0, 0);
  size_t blocks = (size_t)experts * (size_t)((d + 127) / 128) * (size_t)((dff + 127) / 128);
  uint64_t sc[3] = {0, 0, 0};
  for (int i = 0; fp8 && i < 3; i++) sc[i] = bench_dev_fill(g, "f32", blocks, 1e-4, 10 + (uint64_t)i);
  tile_moe_fp8_weights f8 = {c.w1, c.w3, c.w2, sc[0], sc[1], sc[2]};
  if (fp8) c.f8 = &f8;
  uint64_t all[] = {c.logits, c.x, c.w1, c.w3, c.w2, c.y};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ok = ok && all[i];
  for (int i = 0; fp8 && i < 3; i++) ok = ok && sc[i];
  if (!ok) printf("  moe %s: setting up failed: %s\n", what, tile_last_error());
  double ms = ok ? bench_time_ms(g, run_moe_layer, &c) : -1;
  char name[MLP_NAME_BYTES];
  snprintf(name, sizeof name, "moe %s tile layer%s (moe.tile, routing to combine)", what,
           fp8 ? " fp8 e4m3 weights, block scales" : "");
  if (ms > 0) bench_add_row(name, 2.0 * (double)tokens * top_k * d * dff * 3 / (ms * 1e9), 0, "TFLOP/s");
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]) tile_mem_free(g->rt, all[i]);
  for (int i = 0; i < 3; i++)
    if (sc[i]) tile_mem_free(g->rt, sc[i]);
  if (c.ws) tile_mem_free(g->rt, c.ws);
  tile_moe_destroy(c.m);
}

void bench_mlp(Gpu *g) {
  bench_swiglu(g);
  bench_swiglu_fp8(g);
  for (int fp8 = 0; fp8 < 2; fp8++) {
    bench_moe(g, "mixtral 8192 tokens 8 experts top-2 4096->14336->4096", 8192, 8, 2, 4096, 14336, fp8);
    bench_moe(g, "fine-grained 16384 tokens 128 experts top-8 2048->768->2048", 16384, 128, 8, 2048, 768, fp8);
  }
}
