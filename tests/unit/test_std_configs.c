/* test_std_configs.c - the standard library's autotuning candidates.
 *
 * Every kernel of lang/std with a tuning knob declares its candidates
 * with @config (spec/annotations.md); the autotuner compiles them all, so
 * each must compile. Here each candidate of each kernel is compiled to a
 * cubin with ptxas and must come out with no register spills and no
 * serialized wgmma (ptxas's C7504/C7509 notes): a candidate that spills
 * is one the tuner should never have been offered. The kernels whose
 * speed depends on their tile shapes must declare candidates at all. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* Bindings per @config that this test reads (the std kernels use few). */
#define CONFIG_MAX_BINDINGS 16

/* Kernels whose tile shapes, stages or consumers decide their speed: each
 * must have at least this many candidates. */
static const struct {
  const char *file, *kernel;
} tuned[] = {
    {"gemm.tile", "gemm"},
    {"gemm_tma.tile", "gemm_tma"},
    {"gemm_ws.tile", "gemm_ws"},
    {"gemm_fp8.tile", "gemm_fp8"},
    {"flash_attention_ws.tile", "flash_attention_ws"},
    {"flash_attention_bwd_ws.tile", "attention_bwd_dkdv_ws"},
    {"flash_attention_bwd_ws.tile", "attention_bwd_dq_ws"},
    {"mlp.tile", "mlp_gate_up"},
    {"mlp.tile", "mlp_down"},
    {"layernorm.tile", "layernorm_fwd"},
    {"flash_attention.tile", "flash_attention_fwd"},
    {"flash_attention_fp8.tile", "flash_attention_fp8"},
    {"flash_attention_ws_fp8.tile", "flash_attention_ws_fp8"},
    {"flash_attention_varlen.tile", "attention_fwd_varlen"},
    {"flash_attention_bwd.tile", "attention_fwd_lse"},
    {"gemm_ws.tile", "gemm_ws_bias_act"},
    {"gemm_ws.tile", "gemm_ws_pingpong"},
    {"paged_decode.tile", "paged_decode"},
    {"paged_decode.tile", "paged_prefill"},
};
#define MIN_CANDIDATES 2

static bool have_ptxas(void) { return access("/usr/local/cuda/bin/ptxas", X_OK) == 0; }

static tc_compilation *compile_std(const char *file, const char *kernel, const tc_define *defs, int ndefs) {
  char rel[256];
  snprintf(rel, sizeof rel, "lang/std/%s", file);
  size_t len;
  char *src = harness_read_source(rel, &len);
  char name[300];
  snprintf(name, sizeof name, "%s/%s", TILE_SOURCE_ROOT, rel);
  tc_options o = {.kernel = kernel, .defines = defs, .ndefines = ndefs};
  tc_compilation *c = tc_compile(name, src, len, &o);
  free(src);
  cr_assert(c);
  cr_assert_eq(tc_error_count(c), 0, "%s %s: %s", file, kernel ? kernel : "", tc_diagnostics(c));
  return c;
}

/* Compiles candidate `index` of kernel k of file and checks its cubin;
 * returns the candidate as text in buf. */
static void check_candidate(const char *file, tc_compilation *all, int k, int index, char *buf, size_t cap) {
  tc_define defs[CONFIG_MAX_BINDINGS];
  int n = tc_kernel_config(all, k, index, defs, CONFIG_MAX_BINDINGS);
  cr_assert(n > 0 && n <= CONFIG_MAX_BINDINGS);
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%s=%s", i ? "," : "", defs[i].name, defs[i].value);
  const char *kernel = tc_kernel_name(all, k);
  tc_compilation *c = compile_std(file, kernel, defs, n);
  bool ok = tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_PTXAS});
  cr_expect(ok, "%s %s [%s]: %s", file, kernel, buf, tc_diagnostics(c));
  tc_kernel_stats s;
  if (ok && tc_kernel_get_stats(c, 0, &s)) {
    cr_expect_eq(s.spill_store_bytes + s.spill_load_bytes, 0, "%s %s [%s] spills %d + %d bytes", file, kernel, buf,
                 s.spill_store_bytes, s.spill_load_bytes);
    cr_expect_eq(s.wgmma_notes, 0, "%s %s [%s]: ptxas serialized its wgmma", file, kernel, buf);
  } else if (ok) {
    cr_expect_fail("%s %s [%s]: no statistics", file, kernel, buf);
  }
  tc_free(c);
}

Test(std_configs, every_candidate_compiles_without_spills, .timeout = 1200) {
  if (!have_ptxas()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  char dir[300];
  snprintf(dir, sizeof dir, "%s/lang/std", TILE_SOURCE_ROOT);
  DIR *d = opendir(dir);
  cr_assert(d, "cannot open %s", dir);
  int candidates = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".tile") != 0) continue;
    tc_compilation *all = compile_std(e->d_name, NULL, NULL, 0);
    for (int k = 0; k < tc_kernel_count(all); k++) {
      int n = tc_kernel_config_count(all, k);
      for (int i = 0; i < n; i++) {
        char text[512];
        check_candidate(e->d_name, all, k, i, text, sizeof text);
        candidates++;
      }
    }
    tc_free(all);
  }
  closedir(d);
  cr_expect_geq(candidates, (int)(sizeof tuned / sizeof *tuned) * MIN_CANDIDATES);
}

Test(std_configs, tuned_kernels_declare_candidates) {
  for (size_t i = 0; i < sizeof tuned / sizeof *tuned; i++) {
    tc_compilation *c = compile_std(tuned[i].file, NULL, NULL, 0);
    int k = tc_kernel_find(c, tuned[i].kernel);
    cr_expect(k >= 0, "%s has no kernel %s", tuned[i].file, tuned[i].kernel);
    if (k >= 0)
      cr_expect_geq(tc_kernel_config_count(c, k), MIN_CANDIDATES, "%s %s: %d candidates", tuned[i].file,
                    tuned[i].kernel, tc_kernel_config_count(c, k));
    tc_free(c);
  }
}
