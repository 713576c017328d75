/* attn_ref.h - the float64 reference of attention for training: the
 * forward (out, and each row's log-sum-exp in the scaled log2 domain of
 * lang/std/flash_attention_bwd.tile) and the gradients dq, dk, dv, for the
 * interpreter tests and the GPU suite. Tensors are arrays of doubles
 * addressed by strides (in elements); k, v, dk, dv have heads_kv heads,
 * and query head h reads key/value head h / (heads / heads_kv). dk and dv
 * are summed over the query heads of a group; they must be zeroed by the
 * caller. lse is [batch * heads, seqlen]. */
#ifndef TILE_ATTN_REF_H
#define TILE_ATTN_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* The token at column t of a head's V^T as flash_attention_ws_fp8.tile
 * reads it: t itself, or with k_order (P_IN_REGISTERS) the token whose
 * bits 0, 3, 1, 2 are t's bits 0, 1, 2, 3 within each 16. */
static inline int attn_vt_token(int t, bool k_order) {
  if (!k_order) return t;
  int kk = t % 16;
  return t - kk + ((kk & 1) | ((kk >> 2) & 1) << 1 | ((kk >> 3) & 1) << 2 | ((kk >> 1) & 1) << 3);
}

typedef struct AttnRefShape {
  int batch, heads, heads_kv, seqlen, dim;
  bool causal;
  int64_t q_sb, q_sh, q_sn;    /* q, out, dout, dq */
  int64_t kv_sb, kv_sh, kv_sn; /* k, v, dk, dv */
  int window;                  /* > 0: query i sees keys j > i - window */
} AttnRefShape;

typedef struct AttnRefOut {
  double *out, *lse, *dq, *dk, *dv;
} AttnRefOut;

static inline void attn_ref_train(const AttnRefShape *s, const double *q, const double *k, const double *v,
                                  const double *dout, double scale, AttnRefOut *r) {
  int n = s->seqlen, group = s->heads / s->heads_kv;
  double *p = malloc(sizeof(double) * (size_t)n * n), *ds = malloc(sizeof(double) * (size_t)n * n);
  for (int b = 0; b < s->batch; b++)
    for (int h = 0; h < s->heads; h++) {
      const int64_t qb = b * s->q_sb + h * s->q_sh, kb = b * s->kv_sb + (h / group) * s->kv_sh;
      for (int i = 0; i < n; i++) {
        const double *qi = q + qb + i * s->q_sn, *doi = dout + qb + i * s->q_sn;
        double m = -INFINITY, l = 0, delta = 0;
        for (int j = 0; j < n; j++) {
          double d = 0;
          for (int t = 0; t < s->dim; t++) d += qi[t] * k[kb + j * s->kv_sn + t];
          bool seen = (!s->causal || j <= i) && (s->window <= 0 || j > i - s->window);
          p[i * n + j] = seen ? d * scale : -INFINITY;
          m = fmax(m, p[i * n + j]);
        }
        for (int j = 0; j < n; j++) l += (p[i * n + j] = exp(p[i * n + j] - m));
        for (int j = 0; j < n; j++) p[i * n + j] /= l;
        r->lse[((int64_t)b * s->heads + h) * n + i] = (m + log(l)) / log(2.0);
        for (int t = 0; t < s->dim; t++) {
          double o = 0;
          for (int j = 0; j < n; j++) o += p[i * n + j] * v[kb + j * s->kv_sn + t];
          r->out[qb + i * s->q_sn + t] = o;
          delta += o * doi[t];
        }
        for (int j = 0; j < n; j++) {
          double dp = 0;
          for (int t = 0; t < s->dim; t++) dp += doi[t] * v[kb + j * s->kv_sn + t];
          ds[i * n + j] = p[i * n + j] * (dp - delta);
        }
      }
      for (int i = 0; i < n; i++)
        for (int t = 0; t < s->dim; t++) {
          double acc = 0;
          for (int j = 0; j < n; j++) acc += ds[i * n + j] * k[kb + j * s->kv_sn + t];
          r->dq[qb + i * s->q_sn + t] = acc * scale;
        }
      for (int j = 0; j < n; j++)
        for (int t = 0; t < s->dim; t++) {
          double dk = 0, dv = 0;
          for (int i = 0; i < n; i++) {
            dk += ds[i * n + j] * q[qb + i * s->q_sn + t];
            dv += p[i * n + j] * dout[qb + i * s->q_sn + t];
          }
          r->dk[kb + j * s->kv_sn + t] += dk * scale;
          r->dv[kb + j * s->kv_sn + t] += dv;
        }
    }
  free(p), free(ds);
}

/* The varlen forward (lang/std/flash_attention_varlen.tile): sequences
 * packed in THD layout (token stride heads * dim, head stride dim; k and
 * v with heads_kv heads), sequence b's queries cu_q[b] .. cu_q[b+1]-1 and
 * keys cu_k[b] .. cu_k[b+1]-1, causal aligned at the ends. out gets 0 for
 * a query that sees no key, lse (per token and head) -inf then. */
static inline void attn_ref_varlen(int batch, int heads, int heads_kv, int dim, bool causal, const int *cu_q,
                                   const int *cu_k, const double *q, const double *k, const double *v, double scale,
                                   double *out, double *lse) {
  for (int b = 0; b < batch; b++) {
    int lq = cu_q[b + 1] - cu_q[b], lk = cu_k[b + 1] - cu_k[b];
    double *p = malloc(sizeof(double) * (size_t)(lk + 1));
    for (int h = 0; h < heads; h++) {
      int hk = h / (heads / heads_kv);
      for (int i = 0; i < lq; i++) {
        const double *qi = q + ((int64_t)(cu_q[b] + i) * heads + h) * dim;
        double m = -INFINITY, l = 0;
        for (int j = 0; j < lk; j++) {
          const double *kj = k + ((int64_t)(cu_k[b] + j) * heads_kv + hk) * dim;
          double s = 0;
          for (int t = 0; t < dim; t++) s += qi[t] * kj[t];
          p[j] = !causal || j <= i + lk - lq ? s * scale : -INFINITY;
          m = fmax(m, p[j]);
        }
        for (int j = 0; j < lk; j++) l += (p[j] = m == -INFINITY ? 0 : exp(p[j] - m));
        double *oi = out + ((int64_t)(cu_q[b] + i) * heads + h) * dim;
        for (int t = 0; t < dim; t++) {
          double o = 0;
          for (int j = 0; j < lk; j++) o += p[j] * v[((int64_t)(cu_k[b] + j) * heads_kv + hk) * dim + t];
          oi[t] = l > 0 ? o / l : 0;
        }
        lse[(int64_t)(cu_q[b] + i) * heads + h] = l > 0 ? (m + log(l)) / log(2.0) : -INFINITY;
      }
    }
    free(p);
  }
}

#endif
