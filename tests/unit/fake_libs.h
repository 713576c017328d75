/* fake_libs.h - what the tests over the fake driver and the fake NCCL
 * (fake_cuda.c, fake_nccl.c) share: the fakes' paths (meson passes them
 * in FAKE_CUDA_LIB and FAKE_NCCL_LIB), their call logs, and a runtime on
 * a fake device. For Criterion tests: failures are assertions. */
#ifndef TILE_TESTS_FAKE_LIBS_H
#define TILE_TESTS_FAKE_LIBS_H

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "tile.h"

static inline const char *fake_path(const char *env) {
  const char *p = getenv(env);
  cr_assert(p && *p, "%s is not set (meson sets it to the fake library's path)", env);
  return p;
}

/* A fake's call log: the same library instance libtile opened. */
static inline const char *fake_log(const char *env, const char *fn) {
  void *h = dlopen(fake_path(env), RTLD_NOW | RTLD_LOCAL);
  cr_assert(h, "%s", dlerror());
  const char *(*get)(void) = NULL;
  void *sym = dlsym(h, fn);
  cr_assert(sym, "%s has no %s", env, fn);
  memcpy(&get, &sym, sizeof sym);
  const char *log = get();
  dlclose(h);
  return log;
}
static inline const char *cuda_log(void) { return fake_log("FAKE_CUDA_LIB", "fake_cuda_log"); }
static inline const char *nccl_log(void) { return fake_log("FAKE_NCCL_LIB", "fake_nccl_log"); }

static inline tile_runtime *fake_runtime(int device) {
  tile_config cfg;
  tile_config_init(&cfg);
  cfg.driver_library = fake_path("FAKE_CUDA_LIB");
  cfg.device = device;
  tile_runtime *rt = NULL;
  cr_assert_eq(tile_runtime_create(&cfg, &rt), TILE_OK, "%s", tile_last_error());
  return rt;
}

#endif
