/* layer.c - the helpers of layer.h. */
#include "layer.h"

#include "internal.h"

tile_status layer_load(tile_runtime *rt, LayerLoadFn fn, const char *name, tile_module **mod, tile_kernel **k) {
  tile_status st = fn(rt, mod);
  return st == TILE_OK ? tile_kernel_get(*mod, name, k) : st;
}

uint32_t layer_sms(tile_runtime *rt) {
  tile_device_properties props;
  return tile_device_info(rt, &props) == TILE_OK && props.sm_count > 0 ? (uint32_t)props.sm_count : 1;
}

tile_status layer_check(const char *fn, int tokens, int d_model, int d_ff, tile_mlp_activation act) {
  if (tokens < 1 || d_model < 1 || d_ff < 1)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: tokens (%d), d_model (%d) and d_ff (%d) must be at least 1",
                       fn, tokens, d_model, d_ff);
  if (d_model % LAYER_DIM_MULTIPLE || d_ff % LAYER_DIM_MULTIPLE)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "%s: d_model (%d) and d_ff (%d) must be multiples of %d (16-byte rows for the tensor copies)",
                       fn, d_model, d_ff, LAYER_DIM_MULTIPLE);
  if ((int)act < 0 || (int)act >= LAYER_ACTS)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "%s: act is %d: TILE_MLP_SWIGLU, TILE_MLP_GEGLU or TILE_MLP_GEGLU_TANH (0 to %d)", fn, (int)act,
                       LAYER_ACTS - 1);
  return TILE_OK;
}

tile_status layer_check_ptr(const char *fn, const char *name, uint64_t ptr, uint64_t align, bool may_be_zero) {
  if (!ptr && !may_be_zero) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %s is 0", fn, name);
  if (ptr % align)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %s (0x%llx) is not %d-byte aligned", fn, name,
                       (unsigned long long)ptr, (int)align);
  return TILE_OK;
}

tile_status layer_check_fp8(const char *fn, int d_model, int d_ff) {
  if (d_model % LAYER_FP8_DIM_MULTIPLE || d_ff % LAYER_FP8_DIM_MULTIPLE)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "%s: d_model (%d) and d_ff (%d) must be multiples of %d for fp8 (16-byte rows of e4m3)", fn,
                       d_model, d_ff, LAYER_FP8_DIM_MULTIPLE);
  return TILE_OK;
}

size_t layer_round_up(size_t bytes) {
  return (bytes + LAYER_SECTION_ALIGN - 1) / LAYER_SECTION_ALIGN * LAYER_SECTION_ALIGN;
}

tile_status layer_run(const char *fn, const layer_step *steps, int n, tile_stream *stream) {
  tile_status st = TILE_OK;
  for (int i = 0; i < n && st == TILE_OK; i++) {
    st = tile_launch(steps[i].k, steps[i].grid, stream, steps[i].a, steps[i].n);
    if (st != TILE_OK) tilert_error_prefix("%s: %s", fn, tile_kernel_name(steps[i].k));
  }
  return st;
}
