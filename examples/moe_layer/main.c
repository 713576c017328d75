/* moe_layer - a mixture-of-experts layer from C in one call
 * (runtime/mlp/tile_mlp.h): random router logits, tokens and expert
 * weights, tile_moe_forward, and a check of a few tokens against a
 * float64 computation on the host from the same rounded inputs; then the
 * layer's time (CUDA events, median of a few calls).
 *
 *   moe_layer [--tokens N] [--experts E] [--top-k K] [--d-model D] [--d-ff F]
 *
 * Defaults: 4096 tokens, 8 experts, top-2, 1024 -> 2048 -> 1024. Exits 77
 * (skipped) on a machine without a GPU. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tile_mlp.h"

/* Tokens checked against the host computation. */
#define CHECK_TOKENS 8
/* Timed calls (after one warm-up call). */
#define TIMED_CALLS 10
/* The relative error allowed for bf16 inputs and outputs. */
#define BF16_TOL 1e-2
#define EXIT_SKIP 77

static uint16_t bf16_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16); /* round to nearest even */
}

static float float_of(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float uniform(float lo, float hi) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return lo + (hi - lo) * (float)((rng_state >> 11) * 0x1p-53);
}

/* A device buffer of n bf16 values uniform in [-r, r]; the host copy in *host. */
static uint64_t upload_bf16(tile_runtime *rt, size_t n, float r, uint16_t **host) {
  uint16_t *h = malloc(n * 2);
  uint64_t d = 0;
  if (!h) return 0;
  for (size_t i = 0; i < n; i++) h[i] = bf16_of(uniform(-r, r));
  if (tile_mem_alloc(rt, n * 2, &d) != TILE_OK || tile_memcpy_htod(rt, d, h, n * 2) != TILE_OK) d = 0;
  *host = h;
  return d;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  tile_moe_problem p = {.tokens = 4096, .d_model = 1024, .d_ff = 2048, .experts = 8, .top_k = 2,
                        .renormalize = true, .act = TILE_MLP_SWIGLU};
  for (int i = 1; i + 1 < argc; i += 2) {
    int v = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--tokens")) p.tokens = v;
    else if (!strcmp(argv[i], "--experts")) p.experts = v;
    else if (!strcmp(argv[i], "--top-k")) p.top_k = v;
    else if (!strcmp(argv[i], "--d-model")) p.d_model = v;
    else if (!strcmp(argv[i], "--d-ff")) p.d_ff = v;
    else {
      fprintf(stderr, "moe_layer: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  if (tile_moe_workspace_bytes(&p) == 0) { /* the problem's checks, with the message */
    tile_moe_forward(NULL, &p, 0, 0, 0, 0, 0, 0, 0, NULL);
    fprintf(stderr, "moe_layer: %s\n", tile_last_error());
    return 2;
  }
  tile_runtime *rt;
  if (tile_runtime_create(NULL, &rt) != TILE_OK) {
    printf("moe_layer: no GPU (%s): skipped\n", tile_last_error());
    return EXIT_SKIP;
  }
  tile_moe *moe = NULL;
  int rc = 1;
  size_t t = (size_t)p.tokens, e = (size_t)p.experts, dm = (size_t)p.d_model, dff = (size_t)p.d_ff;
  uint16_t *hx = NULL, *hg = NULL, *hu = NULL, *hd = NULL, *hy = malloc(t * dm * 2);
  float *hl = malloc(t * e * 4);
  uint64_t x = upload_bf16(rt, t * dm, 1.0f, &hx), wg = upload_bf16(rt, e * dm * dff, 0.05f, &hg);
  uint64_t wu = upload_bf16(rt, e * dm * dff, 0.05f, &hu), wd = upload_bf16(rt, e * dff * dm, 0.05f, &hd);
  uint64_t logits = 0, y = 0, ws = 0;
  for (size_t i = 0; hl && i < t * e; i++) hl[i] = uniform(-3, 3);
  size_t ws_bytes = tile_moe_workspace_bytes(&p);
  if (!hy || !hl || !x || !wg || !wu || !wd || tile_mem_alloc(rt, t * e * 4, &logits) != TILE_OK ||
      tile_memcpy_htod(rt, logits, hl, t * e * 4) != TILE_OK || tile_mem_alloc(rt, t * dm * 2, &y) != TILE_OK ||
      tile_mem_alloc(rt, ws_bytes, &ws) != TILE_OK || tile_moe_create(rt, &moe) != TILE_OK ||
      tile_moe_forward(moe, &p, y, x, logits, wg, wu, wd, ws, NULL) != TILE_OK || tile_synchronize(rt) != TILE_OK ||
      tile_memcpy_dtoh(rt, hy, y, t * dm * 2) != TILE_OK) {
    fprintf(stderr, "moe_layer: %s\n", tile_last_error());
    goto done;
  }
  /* the host reference for a few tokens: softmax routing, top-k (ties to
   * the lower expert), renormalized weights, each expert's SwiGLU MLP */
  double err = 0, norm = 0;
  double *h = malloc(dff * sizeof(double)), *want = malloc(dm * sizeof(double));
  for (size_t k = 0; h && want && k < CHECK_TOKENS && k < t; k++) {
    size_t tok = k * (t >= CHECK_TOKENS ? t / CHECK_TOKENS : 1);
    double prob[256], mx = -INFINITY, sum = 0, chosen = 0;
    int pick[8];
    for (size_t j = 0; j < e; j++) mx = fmax(mx, hl[tok * e + j]);
    for (size_t j = 0; j < e; j++) sum += prob[j] = exp(hl[tok * e + j] - mx);
    for (size_t j = 0; j < e; j++) prob[j] /= sum;
    for (int kk = 0; kk < p.top_k; kk++) {
      int best = -1;
      for (size_t j = 0; j < e; j++) {
        bool taken = false;
        for (int q = 0; q < kk; q++) taken |= pick[q] == (int)j;
        if (!taken && (best < 0 || prob[j] > prob[best])) best = (int)j;
      }
      pick[kk] = best, chosen += prob[best];
    }
    for (size_t col = 0; col < dm; col++) want[col] = 0;
    for (int kk = 0; kk < p.top_k; kk++) {
      size_t ex = (size_t)pick[kk];
      for (size_t f = 0; f < dff; f++) {
        double g = 0, u = 0;
        for (size_t q = 0; q < dm; q++) {
          double xv = float_of(hx[tok * dm + q]);
          g += xv * float_of(hg[(ex * dm + q) * dff + f]), u += xv * float_of(hu[(ex * dm + q) * dff + f]);
        }
        h[f] = g / (1 + exp(-g)) * u;
      }
      for (size_t col = 0; col < dm; col++) {
        double s = 0;
        for (size_t f = 0; f < dff; f++) s += h[f] * float_of(hd[(ex * dff + f) * dm + col]);
        want[col] += prob[ex] / chosen * s;
      }
    }
    for (size_t col = 0; col < dm; col++) {
      err = fmax(err, fabs(float_of(hy[tok * dm + col]) - want[col]));
      norm = fmax(norm, fabs(want[col]));
    }
  }
  free(h), free(want);
  double rel = norm > 0 ? err / norm : err;
  printf("moe_layer: %d tokens, %d experts, top-%d, %d -> %d -> %d: max relative error %.3g on %d tokens (%s)\n",
         p.tokens, p.experts, p.top_k, p.d_model, p.d_ff, p.d_model, rel, CHECK_TOKENS, rel <= BF16_TOL ? "PASS" : "FAIL");
  float ms[TIMED_CALLS];
  tile_event *a, *b;
  tile_event_create(rt, &a), tile_event_create(rt, &b);
  for (int i = 0; i < TIMED_CALLS; i++) {
    tile_event_record(a, NULL);
    tile_moe_forward(moe, &p, y, x, logits, wg, wu, wd, ws, NULL);
    tile_event_record(b, NULL);
    tile_event_synchronize(b);
    tile_event_elapsed_ms(a, b, &ms[i]);
  }
  qsort(ms, TIMED_CALLS, sizeof ms[0], cmp_float);
  double flops = 2.0 * (double)t * p.top_k * (double)dm * (double)dff * 3;
  printf("moe_layer: %.3f ms (median of %d), %.1f TFLOP/s\n", ms[TIMED_CALLS / 2], TIMED_CALLS,
         flops / (ms[TIMED_CALLS / 2] * 1e9));
  tile_event_destroy(a), tile_event_destroy(b);
  rc = rel <= BF16_TOL ? 0 : 1;
done:
  tile_moe_destroy(moe);
  uint64_t bufs[] = {x, wg, wu, wd, logits, y, ws};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tile_mem_free(rt, bufs[i]);
  free(hx), free(hg), free(hu), free(hd), free(hy), free(hl);
  tile_runtime_destroy(rt);
  return rc;
}
