/* tune.c - autotuning over a kernel's configurations (tile_jit.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "jit_files.h"
#include "sha256.h"
#include "tile_jit.h"

/* Bindings in one candidate (const parameters a kernel tunes). */
#define TUNE_MAX_BINDINGS 32
/* The stored choice's file: "tile-tune 1\n", the configuration, "\n". */
#define TUNE_MAGIC "tile-tune 1\n"
#define TUNE_PATH_MAX 4096
/* Where the first failure of each candidate is quoted in the error of a
 * tuning where none ran. */
#define TUNE_ERROR_CHARS 8192

/* One candidate: its text and its bindings, pointing into text's copy. */
typedef struct Candidate {
  char text[TILE_JIT_CONFIG_CHARS];
  char buf[TILE_JIT_CONFIG_CHARS]; /* text with NULs for the bindings */
  tc_define defs[TUNE_MAX_BINDINGS];
  int ndefs;
} Candidate;

/* Splits "A=1,B=2" (spaces around names and values allowed) into c. */
static tile_status parse_candidate(const char *text, Candidate *c) {
  size_t n = strlen(text);
  if (n == 0 || n >= sizeof c->text)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_autotune: configuration '%.64s' is empty or longer than %d characters",
                       text, TILE_JIT_CONFIG_CHARS - 1);
  memcpy(c->text, text, n + 1);
  memcpy(c->buf, text, n + 1);
  c->ndefs = 0;
  for (char *at = c->buf; at;) {
    char *next = strchr(at, ',');
    if (next) *next++ = '\0';
    char *eq = strchr(at, '=');
    if (!eq || c->ndefs == TUNE_MAX_BINDINGS)
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                         eq ? "tile_jit_autotune: configuration '%s' has more than %d bindings"
                            : "tile_jit_autotune: configuration '%s' is not NAME=VALUE,... (at most %d bindings)",
                         text, TUNE_MAX_BINDINGS);
    *eq = '\0';
    char *name = at, *value = eq + 1;
    while (*name == ' ') name++;
    while (*value == ' ') value++;
    for (char *e = name + strlen(name); e > name && e[-1] == ' ';) *--e = '\0';
    for (char *e = value + strlen(value); e > value && e[-1] == ' ';) *--e = '\0';
    if (!*name || !*value)
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_autotune: configuration '%s' has an empty name or value",
                         text);
    c->defs[c->ndefs++] = (tc_define){name, value};
    at = next;
  }
  return TILE_OK;
}

/* The kernel's @config list as text, into cands. */
static tile_status source_candidates(const tile_jit_source *src, Candidate *cands, int *n) {
  char *owned = NULL;
  const char *text = src->source;
  size_t len = src->len;
  if (!text) {
    const char *why = NULL;
    if (!(owned = tc_read_file(src->filename, &len, &why)))
      return tilert_fail(TILE_ERROR_IO, "tile_jit_autotune: cannot read %s: %s", src->filename, why ? why : "?");
    text = owned;
  }
  tc_options o = {.kernel = src->kernel, .defines = src->defines, .ndefines = src->ndefines,
                  .include_dirs = src->include_dirs, .ninclude_dirs = src->ninclude_dirs};
  tc_compilation *c = tc_compile(src->filename, text, len, &o);
  tile_status st = TILE_OK;
  int k = c && !tc_error_count(c) ? tc_kernel_find(c, src->kernel) : -1;
  if (!c) st = tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "tile_jit_autotune: out of memory");
  else if (tc_error_count(c)) st = tilert_fail(TILE_ERROR_COMPILE, "%s", tc_diagnostics(c));
  else if (k < 0) st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_autotune: %s has no kernel '%s'", src->filename, src->kernel);
  int count = st == TILE_OK ? tc_kernel_config_count(c, k) : 0;
  if (st == TILE_OK && count == 0)
    st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                     "tile_jit_autotune: kernel '%s' declares no @config and no configurations were given", src->kernel);
  if (st == TILE_OK && count > TILE_JIT_TUNE_MAX_CONFIGS)
    st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_autotune: kernel '%s' has %d @config (at most %d)",
                     src->kernel, count, TILE_JIT_TUNE_MAX_CONFIGS);
  for (int i = 0; st == TILE_OK && i < count; i++) {
    tc_define d[TUNE_MAX_BINDINGS];
    int nd = tc_kernel_config(c, k, i, d, TUNE_MAX_BINDINGS);
    char line[TILE_JIT_CONFIG_CHARS];
    size_t at = 0;
    for (int b = 0; b < nd && b < TUNE_MAX_BINDINGS && at < sizeof line; b++)
      at += (size_t)snprintf(line + at, sizeof line - at, "%s%s=%s", b ? "," : "", d[b].name, d[b].value);
    if (nd > TUNE_MAX_BINDINGS || at >= sizeof line)
      st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_autotune: @config %d of '%s' is too long", i + 1,
                       src->kernel);
    else
      st = parse_candidate(line, &cands[i]);
  }
  *n = count;
  tc_free(c);
  free(owned);
  return st;
}

/* The median of x[0..n), sorting x. */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Times one loaded candidate: warmup launches, then reps launches each
 * between two events; the median in *ms. */
static tile_status time_candidate(tile_runtime *rt, const tile_jit_tune *t, tile_kernel *k, const Candidate *c,
                                  double *ms) {
  int warmup = t->warmup > 0 ? t->warmup : TILE_JIT_TUNE_WARMUP, reps = t->reps > 0 ? t->reps : TILE_JIT_TUNE_REPS;
  tile_event *e0 = NULL, *e1 = NULL;
  double *x = calloc((size_t)reps, sizeof *x);
  tile_status st = x ? tile_event_create(rt, &e0) : TILE_ERROR_OUT_OF_MEMORY;
  if (st == TILE_OK) st = tile_event_create(rt, &e1);
  for (int i = 0; i < warmup && st == TILE_OK; i++) st = t->launch(t->user, k, c->defs, c->ndefs, t->stream);
  for (int i = 0; i < reps && st == TILE_OK; i++) {
    float f = 0;
    st = tile_event_record(e0, t->stream);
    if (st == TILE_OK) st = t->launch(t->user, k, c->defs, c->ndefs, t->stream);
    if (st == TILE_OK) st = tile_event_record(e1, t->stream);
    if (st == TILE_OK) st = tile_event_synchronize(e1);
    if (st == TILE_OK) st = tile_event_elapsed_ms(e0, e1, &f);
    x[i] = f;
  }
  if (st == TILE_OK) {
    qsort(x, (size_t)reps, sizeof *x, cmp_double);
    *ms = x[reps / 2];
  }
  if (e0) tile_event_destroy(e0);
  if (e1) tile_event_destroy(e1);
  free(x);
  return st;
}

/* The stored choice's path for this tuning: a SHA-256 over the kernel,
 * the key, the GPU and each candidate's text and cubin. */
static bool choice_path(tile_jit *j, tile_runtime *rt, const tile_jit_source *src, const tile_jit_tune *t,
                        const Candidate *cands, const void *const *cubins, const size_t *sizes, int n, char *out,
                        size_t size) {
  const char *dir = tile_jit_cache_dir(j);
  tile_device_properties p;
  if (!dir || tile_device_info(rt, &p) != TILE_OK) return false;
  Sha256 h;
  sha256_init(&h);
  char line[512];
  int len = snprintf(line, sizeof line, "tile-tune key 1\n%s\n%s\n%s\nsm %d driver %d\n", src->kernel,
                     t->key ? t->key : "", p.name, p.sm_count, p.driver_version);
  sha256_update(&h, line, (size_t)len);
  for (int i = 0; i < n; i++) {
    sha256_update(&h, cands[i].text, strlen(cands[i].text) + 1);
    uint8_t c[SHA256_BYTES];
    Sha256 hc;
    sha256_init(&hc);
    if (cubins[i]) sha256_update(&hc, cubins[i], sizes[i]);
    sha256_final(&hc, c);
    sha256_update(&h, c, sizeof c);
  }
  uint8_t key[SHA256_BYTES];
  sha256_final(&h, key);
  char hex[2 * SHA256_BYTES + 1];
  for (int i = 0; i < SHA256_BYTES; i++) snprintf(hex + 2 * i, 3, "%02x", key[i]);
  int w = snprintf(out, size, "%s/%s%s", dir, hex, JIT_TUNE_SUFFIX);
  return w > 0 && (size_t)w < size;
}

/* The candidate a stored choice names, or -1 (no file, damaged, or a
 * configuration that is not among the candidates). */
static int read_choice(const char *path, const Candidate *cands, int n) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char magic[32] = "", line[TILE_JIT_CONFIG_CHARS + 2] = "";
  bool ok = fgets(magic, sizeof magic, f) && !strcmp(magic, TUNE_MAGIC) && fgets(line, sizeof line, f);
  fclose(f);
  size_t len = strlen(line);
  if (!ok || len == 0 || line[len - 1] != '\n') return -1;
  line[len - 1] = '\0';
  for (int i = 0; i < n; i++)
    if (!strcmp(cands[i].text, line)) return i;
  return -1;
}

/* Writes the choice under a temporary name and renames it into place
 * (failures leave no file: the next process tunes again). */
static void store_choice(const char *dir, const char *path, const char *config) {
  char tmp[TUNE_PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s/.tmp-tune-XXXXXX", dir) >= (int)sizeof tmp) return;
  int fd = mkstemp(tmp);
  if (fd < 0) return;
  char text[TILE_JIT_CONFIG_CHARS + sizeof TUNE_MAGIC + 2];
  int n = snprintf(text, sizeof text, "%s%s\n", TUNE_MAGIC, config);
  bool ok = n > 0 && write(fd, text, (size_t)n) == (ssize_t)n;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

tile_status tile_jit_autotune(tile_jit *j, tile_runtime *rt, const tile_jit_source *src, const tile_jit_tune *t,
                              tile_jit_tune_result *out) {
  if (!j || !src || !src->kernel || !src->filename || !t || !t->launch || !out)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "tile_jit_autotune: jit, src (with filename and kernel), tune (with launch) and out are required");
  if (t->nconfigs < 0 || t->nconfigs > TILE_JIT_TUNE_MAX_CONFIGS || (t->nconfigs > 0 && !t->configs))
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_autotune: %d configurations (1 to %d, or none for @config)",
                       t->nconfigs, TILE_JIT_TUNE_MAX_CONFIGS);
  if (src->ndefines < 0 || src->ndefines > TUNE_MAX_BINDINGS || (src->ndefines > 0 && !src->defines))
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_autotune: %d defines (at most %d)", src->ndefines,
                       TUNE_MAX_BINDINGS);
  memset(out, 0, sizeof *out);
  out->chosen = -1;
  Candidate *cands = calloc(TILE_JIT_TUNE_MAX_CONFIGS, sizeof *cands);
  if (!cands) return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "tile_jit_autotune: out of memory");
  int n = 0;
  tile_status st = TILE_OK;
  if (t->nconfigs > 0) {
    for (int i = 0; i < t->nconfigs && st == TILE_OK; i++)
      st = t->configs[i] ? parse_candidate(t->configs[i], &cands[i])
                         : tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_autotune: configuration %d is NULL", i);
    n = t->nconfigs;
  } else {
    st = source_candidates(src, cands, &n);
  }
  if (st == TILE_OK && !rt)
    st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_autotune: rt is required (the candidates run on its GPU)");
  if (st != TILE_OK) {
    free(cands);
    return st;
  }
  /* every candidate's cubin (from the jit's caches after the first time) */
  const void *cubins[TILE_JIT_TUNE_MAX_CONFIGS] = {0};
  size_t sizes[TILE_JIT_TUNE_MAX_CONFIGS] = {0};
  char *errors = calloc(TUNE_ERROR_CHARS, 1);
  size_t elen = 0;
  out->nrows = n;
  for (int i = 0; i < n; i++) {
    snprintf(out->rows[i].config, sizeof out->rows[i].config, "%s", cands[i].text);
    out->rows[i].ms = -1;
    tc_define d[2 * TUNE_MAX_BINDINGS];
    int nd = 0;
    for (int k = 0; k < src->ndefines; k++) d[nd++] = src->defines[k];
    for (int k = 0; k < cands[i].ndefs; k++) d[nd++] = cands[i].defs[k]; /* the later define wins */
    tile_jit_source s = *src;
    s.defines = d, s.ndefines = nd;
    out->rows[i].status = tile_jit_cubin(j, &s, &cubins[i], &sizes[i], NULL);
    if (out->rows[i].status != TILE_OK && errors && elen < TUNE_ERROR_CHARS)
      elen += (size_t)snprintf(errors + elen, TUNE_ERROR_CHARS - elen, "\n  %s: %s", cands[i].text, tile_last_error());
  }
  char path[TUNE_PATH_MAX];
  bool stored = choice_path(j, rt, src, t, cands, cubins, sizes, n, path, sizeof path);
  int chosen = stored && !t->retune ? read_choice(path, cands, n) : -1;
  if (chosen >= 0 && out->rows[chosen].status == TILE_OK) {
    out->from_cache = true;
  } else {
    chosen = -1;
    for (int i = 0; i < n; i++) {
      if (out->rows[i].status != TILE_OK) continue;
      tile_module *m = NULL;
      tile_kernel *k = NULL;
      tile_status s = tile_module_load(rt, cubins[i], sizes[i], &m);
      if (s == TILE_OK) s = tile_kernel_get(m, src->kernel, &k);
      if (s == TILE_OK) s = time_candidate(rt, t, k, &cands[i], &out->rows[i].ms);
      if (s != TILE_OK && errors && elen < TUNE_ERROR_CHARS)
        elen += (size_t)snprintf(errors + elen, TUNE_ERROR_CHARS - elen, "\n  %s: %s", cands[i].text, tile_last_error());
      out->rows[i].status = s;
      if (s != TILE_OK) out->rows[i].ms = -1;
      if (m) tile_module_unload(m);
      if (s == TILE_OK && (chosen < 0 || out->rows[i].ms < out->rows[chosen].ms)) chosen = i;
    }
    if (chosen >= 0 && stored) store_choice(tile_jit_cache_dir(j), path, cands[chosen].text);
  }
  if (chosen < 0) {
    st = tilert_fail(TILE_ERROR_LAUNCH, "tile_jit_autotune: no configuration of '%s' compiled and ran:%s", src->kernel,
                     errors ? errors : "");
  } else {
    out->chosen = chosen;
    st = tile_module_load(rt, cubins[chosen], sizes[chosen], &out->module);
    if (st == TILE_OK) st = tile_kernel_get(out->module, src->kernel, &out->kernel);
    if (st != TILE_OK && out->module) tile_module_unload(out->module), out->module = NULL;
  }
  free(errors);
  free(cands);
  return st;
}
