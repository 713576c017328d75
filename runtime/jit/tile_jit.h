/* tile_jit.h - compile .tile source inside a C program, with caches.
 *
 * libtile_jit links the compiler library (libtilec, and so LLVM) into a
 * program that uses libtile: it turns source text, a kernel name and
 * const values into a cubin, keeps every cubin it made or read in memory,
 * and keeps them across processes in an on-disk cache.
 *
 *   tile_jit *jit;
 *   tile_jit_create(NULL, &jit);               // default options
 *   tile_jit_source src = {.filename = "softmax.tile", .kernel = "softmax",
 *                          .defines = (tc_define[]){{"BLOCK", "1024"}}, .ndefines = 1};
 *   tile_module *mod;
 *   tile_kernel *k;
 *   if (tile_jit_load(jit, rt, &src, &mod, &k) != TILE_OK) puts(tile_last_error());
 *   ... tile_launch(k, ...) ...
 *   tile_module_unload(mod);
 *   tile_jit_destroy(jit);
 *
 * The cache key is a SHA-256 over everything that changes the cubin: the
 * compiler's build (a hash of its sources, made when libtilec is built),
 * the tilec and LLVM versions, the CUDA version libtile_jit was built
 * against, the target, the linker and debug options, the file name, the
 * kernel, the const values (sorted by name) and the source text.
 *
 * On disk an entry is one file, <key in hex>.cubin, holding a header (a
 * magic, the key, the size and a checksum of the cubin) and the cubin. It
 * is written under a temporary name and renamed, so that processes sharing
 * a cache never read a partial entry; an entry whose header, size or
 * checksum is wrong is deleted and rebuilt. After each store the cache is
 * trimmed to its size limit, least recently used entries first (a hit
 * refreshes the entry's modification time).
 *
 * A tile_jit may be used by several threads at once.
 */
#ifndef TILE_JIT_H
#define TILE_JIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tile.h"
#include "tilec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The on-disk cache's size limit when the options give none (1 GiB: a
 * few thousand kernels). */
#define TILE_JIT_DEFAULT_DISK_BYTES ((uint64_t)1 << 30)

typedef struct tile_jit tile_jit;

typedef struct tile_jit_options {
  /* The cache directory (created if missing). NULL: $TILE_CACHE_DIR, else
   * $XDG_CACHE_HOME/tile, else $HOME/.cache/tile. */
  const char *cache_dir;
  /* Memory cache only. Setting TILE_CACHE_DISABLE=1 in the environment
   * does the same. */
  bool no_disk_cache;
  /* 0: TILE_JIT_DEFAULT_DISK_BYTES. */
  uint64_t max_disk_bytes;
  /* Code generation, as tc_codegen_options (arch NULL: sm_90a). */
  const char *arch;
  tc_linker linker;
  bool debug_barriers;
  bool no_opt; /* skip the IR optimization passes (tilec -O0) */
} tile_jit_options;

/* What to compile. With source NULL, filename is read (at most
 * TC_MAX_SOURCE_BYTES); otherwise filename only names the text in
 * diagnostics (and its directory is where imports are looked for first).
 * kernel NULL: every kernel of the file. include_dirs: where `import`
 * looks next, in order (as tilec -I).
 *
 * A source that imports other files is keyed by their contents too: to
 * find them, each look-up of such a source runs the compiler's front end
 * (about a millisecond), so a changed imported file is never served from a
 * cache. */
typedef struct tile_jit_source {
  const char *filename;
  const char *source;
  size_t len;
  const char *kernel;
  const tc_define *defines;
  int ndefines;
  const char *const *include_dirs;
  int ninclude_dirs;
} tile_jit_source;

/* Where a cubin came from. */
typedef enum tile_jit_origin {
  TILE_JIT_COMPILED, /* compiled now (and stored in both caches) */
  TILE_JIT_MEMORY,   /* this tile_jit made or read it before */
  TILE_JIT_DISK,     /* read from the on-disk cache */
} tile_jit_origin;

/* options NULL: every default. Fails with TILE_ERROR_IO when the cache
 * directory cannot be created (the message names it). */
tile_status tile_jit_create(const tile_jit_options *options, tile_jit **out);
/* Frees the jit and every cubin it handed out. NULL is allowed. */
void tile_jit_destroy(tile_jit *jit);

/* The cubin for src: from memory, from disk, or compiled. *cubin belongs
 * to the jit and stays valid until tile_jit_destroy; origin may be NULL.
 * Source errors give TILE_ERROR_COMPILE with tilec's diagnostics as the
 * message; an unreadable file TILE_ERROR_IO. A cache that cannot be
 * written is not an error (the cubin is returned; the failure is in the
 * message of tile_jit_last_store_error). */
tile_status tile_jit_cubin(tile_jit *jit, const tile_jit_source *src, const void **cubin, size_t *size,
                           tile_jit_origin *origin);

/* tile_jit_cubin, then tile_module_load and tile_kernel_get for
 * src->kernel (required here). The module is the caller's to unload. */
tile_status tile_jit_load(tile_jit *jit, tile_runtime *rt, const tile_jit_source *src, tile_module **module,
                          tile_kernel **kernel);

/* ---- autotuning ----
 *
 * tile_jit_autotune compiles a kernel once per candidate configuration
 * (const values: the kernel's @config annotations, or the caller's list),
 * times each with CUDA events through the caller's launch function (the
 * candidates taking turns, one launch each per round: tile_jit_time), and
 * returns the fastest, loaded. The choice is stored in the cache
 * directory, keyed by the kernel, the caller's key string, the GPU (name,
 * SM count, driver) and every candidate's configuration and cubin (so a
 * change of compiler, source, imports, options or candidates makes a new
 * key); a later call with the same key, in any process, reads it and
 * times nothing (from_cache). Candidates that do not compile or whose
 * launch fails are reported in the rows and not chosen. */

/* Candidates per tuning (the rows of a result). */
#define TILE_JIT_TUNE_MAX_CONFIGS 64
/* A candidate written as text, "NAME=VALUE,NAME=VALUE" (with its NUL). */
#define TILE_JIT_CONFIG_CHARS 256
/* Launches before timing, and timed launches (the median is kept), when
 * the options give 0. */
#define TILE_JIT_TUNE_WARMUP 3
#define TILE_JIT_TUNE_REPS 10

/* Launches kernel once on stream, compiled with the candidate's const
 * values config[0..nconfig) (for the grid: tile sizes are usually among
 * them). */
typedef tile_status (*tile_jit_launch_fn)(void *user, tile_kernel *kernel, const tc_define *config, int nconfig,
                                          tile_stream *stream);

typedef struct tile_jit_tune {
  /* What else selects a configuration, e.g. the problem's sizes
   * ("seqlen=16384,heads=16"); NULL: "". */
  const char *key;
  /* Candidates as "NAME=VALUE,..." strings; NULL: the kernel's @config
   * list (an error if it has none). They override src's defines. */
  const char *const *configs;
  int nconfigs;
  tile_jit_launch_fn launch; /* required */
  void *user;
  tile_stream *stream; /* NULL: the default stream */
  int warmup, reps;    /* 0: TILE_JIT_TUNE_WARMUP, TILE_JIT_TUNE_REPS */
  bool retune;         /* time again even when a choice is stored */
} tile_jit_tune;

/* The part of a candidate's error message a row keeps (with its NUL). */
#define TILE_JIT_TUNE_ERROR_CHARS 256

typedef struct tile_jit_tune_row {
  char config[TILE_JIT_CONFIG_CHARS];
  double ms;          /* median; -1 when not timed */
  tile_status status; /* TILE_OK, or why it was not timed */
  char error[TILE_JIT_TUNE_ERROR_CHARS]; /* "" when timed; else the message's first line, cut to fit */
} tile_jit_tune_row;

typedef struct tile_jit_tune_result {
  int chosen;      /* index into rows */
  bool from_cache; /* a stored choice: nothing was timed (rows' ms are -1) */
  int nrows;
  tile_jit_tune_row rows[TILE_JIT_TUNE_MAX_CONFIGS];
  tile_module *module; /* the chosen build, loaded: the caller's to unload */
  tile_kernel *kernel;
} tile_jit_tune_result;

/* src->kernel is required. Fails when no candidate compiles and runs
 * (the message has each one's error). */
tile_status tile_jit_autotune(tile_jit *jit, tile_runtime *rt, const tile_jit_source *src, const tile_jit_tune *tune,
                              tile_jit_tune_result *out);

/* Times kernels[0..n) as tile_jit_autotune times its candidates: each
 * gets tune's warmup launches through its launch function (with
 * configs[i], nconfigs[i] bindings, passed on), then tune's reps rounds in
 * which the kernels take turns, each launched once between two events on
 * tune's stream and waited for, so that a drift of the GPU's clocks
 * (boost at first, power limits later) weighs on all alike; the median of
 * each in ms[i]. For baselines beside a tuning: the kernel built with its
 * defaults, another implementation. Fails with the first failing
 * kernel's status (the message is the last failure's). */
tile_status tile_jit_time(tile_runtime *rt, const tile_jit_tune *tune, int n, tile_kernel *const *kernels,
                          const tc_define *const *configs, const int *nconfigs, double *ms);

/* Removes every entry of the on-disk cache (the files tile_jit stores,
 * cubins and tuning choices; nothing else in the directory), and says how many in *removed (may be
 * NULL). The in-memory cache stays: cubins handed out remain valid, and
 * this jit still returns them (TILE_JIT_MEMORY); a new tile_jit compiles
 * again. Without a disk cache it removes nothing. */
tile_status tile_jit_clear(tile_jit *jit, int *removed);

/* The cache directory in use, or NULL when there is no disk cache. */
const char *tile_jit_cache_dir(const tile_jit *jit);
/* Copies into buf the reason the last store to the disk cache failed
 * ("" when none has); returns buf. */
const char *tile_jit_last_store_error(tile_jit *jit, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif
