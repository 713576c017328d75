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

/* The first line of the last error, cut to fit a row. */
static void first_line(char *out, size_t size) {
  const char *m = tile_last_error();
  snprintf(out, size, "%.*s", (int)strcspn(m, "\n"), m);
}

/* Times kernels[0..n) taking turns (tile_jit_time): st[i] says whether
 * kernel i ran, and rows[i].error (rows may be NULL) why not; one that
 * fails is left out of later rounds. */
static void time_rounds(tile_runtime *rt, const tile_jit_tune *t, int n, tile_kernel *const *k,
                        const tc_define *const *config, const int *nconfig, double *ms, tile_status *st,
                        tile_jit_tune_row *const *rows) {
  int warmup = t->warmup > 0 ? t->warmup : TILE_JIT_TUNE_WARMUP, reps = t->reps > 0 ? t->reps : TILE_JIT_TUNE_REPS;
  tile_event *e0 = NULL, *e1 = NULL;
  double *x = calloc((size_t)reps * (size_t)n, sizeof *x);
  tile_status common = x ? tile_event_create(rt, &e0) : TILE_ERROR_OUT_OF_MEMORY;
  if (common == TILE_OK) common = tile_event_create(rt, &e1);
  for (int i = 0; i < n; i++) {
    st[i] = common;
    ms[i] = -1;
    for (int w = 0; w < warmup && st[i] == TILE_OK; w++) st[i] = t->launch(t->user, k[i], config[i], nconfig[i], t->stream);
    if (st[i] != TILE_OK && rows) first_line(rows[i]->error, sizeof rows[i]->error);
  }
  for (int r = 0; r < reps; r++) {
    for (int i = 0; i < n; i++) {
      if (st[i] != TILE_OK) continue;
      float f = 0;
      st[i] = tile_event_record(e0, t->stream);
      if (st[i] == TILE_OK) st[i] = t->launch(t->user, k[i], config[i], nconfig[i], t->stream);
      if (st[i] == TILE_OK) st[i] = tile_event_record(e1, t->stream);
      if (st[i] == TILE_OK) st[i] = tile_event_synchronize(e1);
      if (st[i] == TILE_OK) st[i] = tile_event_elapsed_ms(e0, e1, &f);
      x[(size_t)i * (size_t)reps + (size_t)r] = f;
      if (st[i] != TILE_OK && rows) first_line(rows[i]->error, sizeof rows[i]->error);
    }
  }
  for (int i = 0; i < n; i++) {
    if (st[i] != TILE_OK) continue;
    double *xi = x + (size_t)i * (size_t)reps;
    qsort(xi, (size_t)reps, sizeof *xi, cmp_double);
    ms[i] = xi[reps / 2];
  }
  if (e0) tile_event_destroy(e0);
  if (e1) tile_event_destroy(e1);
  free(x);
}

tile_status tile_jit_time(tile_runtime *rt, const tile_jit_tune *t, int n, tile_kernel *const *kernels,
                          const tc_define *const *configs, const int *nconfigs, double *ms) {
  if (!rt || !t || !t->launch || n < 1 || n > TILE_JIT_TUNE_MAX_CONFIGS || !kernels || !configs || !nconfigs || !ms)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "tile_jit_time: rt, tune (with launch), 1 to %d kernels, their configurations and ms are required",
                       TILE_JIT_TUNE_MAX_CONFIGS);
  for (int i = 0; i < n; i++)
    if (!kernels[i] || nconfigs[i] < 0 || (nconfigs[i] > 0 && !configs[i]))
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_jit_time: kernel %d is NULL or has a bad configuration", i);
  tile_status st[TILE_JIT_TUNE_MAX_CONFIGS];
  time_rounds(rt, t, n, kernels, configs, nconfigs, ms, st, NULL);
  for (int i = 0; i < n; i++)
    if (st[i] != TILE_OK) return st[i]; /* the message is the last failure's */
  return TILE_OK;
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
  /* the kernel's name and the key in full, each with its NUL (a line of
   * fixed size would cut long keys, and two of them would then collide) */
  sha256_update(&h, "tile-tune key 2", 16);
  sha256_update(&h, src->kernel, strlen(src->kernel) + 1);
  sha256_update(&h, t->key ? t->key : "", strlen(t->key ? t->key : "") + 1);
  int len = snprintf(line, sizeof line, "%s\nsm %d driver %d\n", p.name, p.sm_count, p.driver_version);
  sha256_update(&h, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
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

/* A failed candidate's message in the tuning's error text (if it has room). */
static void note_error(const tile_jit_tune_row *row, const char *message, char *errors, size_t *elen) {
  if (errors && *elen < TUNE_ERROR_CHARS)
    *elen += (size_t)snprintf(errors + *elen, TUNE_ERROR_CHARS - *elen, "\n  %s: %s", row->config, message);
}

/* A candidate that failed now: the first line of the message in its row,
 * all of it in the error text. */
static void row_error(tile_jit_tune_row *row, char *errors, size_t *elen) {
  first_line(row->error, sizeof row->error);
  note_error(row, tile_last_error(), errors, elen);
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
    if (out->rows[i].status != TILE_OK) row_error(&out->rows[i], errors, &elen);
  }
  char path[TUNE_PATH_MAX];
  bool stored = choice_path(j, rt, src, t, cands, cubins, sizes, n, path, sizeof path);
  int chosen = stored && !t->retune ? read_choice(path, cands, n) : -1;
  if (chosen >= 0 && out->rows[chosen].status == TILE_OK) {
    out->from_cache = true;
  } else {
    chosen = -1;
    /* every candidate that compiled, loaded, then timed taking turns */
    tile_module *mods[TILE_JIT_TUNE_MAX_CONFIGS] = {0};
    tile_kernel *ks[TILE_JIT_TUNE_MAX_CONFIGS];
    const tc_define *defs[TILE_JIT_TUNE_MAX_CONFIGS];
    int ndefs[TILE_JIT_TUNE_MAX_CONFIGS], which[TILE_JIT_TUNE_MAX_CONFIGS], live = 0;
    for (int i = 0; i < n; i++) {
      if (out->rows[i].status != TILE_OK) continue;
      tile_status s = tile_module_load(rt, cubins[i], sizes[i], &mods[i]);
      if (s == TILE_OK) s = tile_kernel_get(mods[i], src->kernel, &ks[live]);
      out->rows[i].status = s;
      if (s != TILE_OK) {
        row_error(&out->rows[i], errors, &elen);
        continue;
      }
      defs[live] = cands[i].defs, ndefs[live] = cands[i].ndefs, which[live++] = i;
    }
    double ms[TILE_JIT_TUNE_MAX_CONFIGS];
    tile_status ts[TILE_JIT_TUNE_MAX_CONFIGS];
    tile_jit_tune_row *rows[TILE_JIT_TUNE_MAX_CONFIGS];
    for (int l = 0; l < live; l++) rows[l] = &out->rows[which[l]];
    if (live) time_rounds(rt, t, live, ks, defs, ndefs, ms, ts, rows);
    for (int l = 0; l < live; l++) {
      tile_jit_tune_row *row = rows[l];
      row->status = ts[l];
      row->ms = ts[l] == TILE_OK ? ms[l] : -1;
      if (ts[l] != TILE_OK) note_error(row, row->error, errors, &elen); /* time_rounds wrote it */
      else if (chosen < 0 || row->ms < out->rows[chosen].ms) chosen = which[l];
    }
    for (int i = 0; i < n; i++)
      if (mods[i]) tile_module_unload(mods[i]);
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
