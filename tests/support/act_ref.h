/* act_ref.h - the activations of lang/std/gemm_ws.tile's gemm_ws_bias_act
 * and tests/kernels/bias_act.tile (their ACT), in float64, for the
 * references of the interpreter and GPU tests. */
#ifndef TILE_TEST_ACT_REF_H
#define TILE_TEST_ACT_REF_H

#include <math.h>

/* sqrt(2 / pi), the constant of gelu's tanh form. */
#define ACT_REF_GELU_TANH_K 0.7978845608028654

static inline double act_ref(double x, int act) {
  switch (act) {
  case 1: return x > 0 ? x : 0;
  case 2: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
  case 3: return 0.5 * x * (1 + tanh(ACT_REF_GELU_TANH_K * (x + 0.044715 * x * x * x)));
  case 4: return x / (1 + exp(-x));
  default: return x;
  }
}

#endif
