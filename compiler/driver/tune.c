/* tune.c - `tilec tune`: tile_jit_autotune from the command line. The
 * candidates are the kernel's @config list or --config options; the
 * buffers are made from --arg texts as `tilec run` makes them (run.c) and
 * copied to the GPU; the grid is an expression per candidate (run.h's
 * run_eval_grid), so tile sizes among the candidates' values can size it.
 *
 *   tilec tune lang/std/gemm_ws.tile -k gemm_ws \
 *       --grid 'min(cdiv(m, BLOCK_M) * cdiv(n, BLOCK_N), num_sms)' \
 *       --arg c=zeros:8192x8192 --arg a=rand:8192x8192 --arg b=rand:8192x8192 \
 *       --arg m=8192 --arg n=8192 --arg k=8192
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "tile_jit.h"

/* Bindings in one --config candidate: as many as tile_jit_autotune takes. */
#define TUNE_MAX_BINDINGS 32
/* Longest name looked up in a --grid expression. */
#define TUNE_NAME_BYTES 128

typedef struct TuneCandidate {
  char text[TILE_JIT_CONFIG_CHARS]; /* "A=1,B=2": what the tuner parses and shows */
  tc_define defs[TUNE_MAX_BINDINGS];
  int ndefs;
  char *strings; /* the copy that defs' names and values point into */
  tc_compilation *c; /* the front end's view of the kernel with these values (NULL: not compiled) */
  int k;           /* the kernel in c; -1 when the candidate does not compile */
  int64_t grid[3];
} TuneCandidate;

typedef struct Tune {
  RunOptions o;
  char *source;
  size_t len;
  const char *kernel;  /* -k, then the kernel's name (kernel_owned) */
  char *kernel_owned;
  char *key; /* the key made from --key-args or by default (NULL: --key) */
  const char *dirs[CLI_MAX_INCLUDE_DIRS + CLI_DEFAULT_INCLUDE_DIRS];
  char exe_dir[CLI_EXE_DIR_BYTES];
  int ndirs;
  TuneCandidate cands[RUN_MAX_CONFIGS + 1]; /* the last: the defaults (--defaults) */
  int ncands;
  /* the arguments, made once from the first candidate that compiles */
  tc_param params[RUN_MAX_PARAMS];
  tile_arg args[RUN_MAX_PARAMS];
  tile_tensor tensors[RUN_MAX_PARAMS];
  uint64_t device[RUN_MAX_PARAMS];
  int nparams;
  int64_t num_sms;
  tile_runtime *rt;
} Tune;

static int tune_error(int rc, const char *fmt, const char *arg) {
  char q[DIAG_QUOTE_BUF];
  fprintf(stderr, "tilec tune: ");
  fprintf(stderr, fmt, diag_quote(q, arg));
  fputc('\n', stderr);
  return rc;
}

/* A whole message (already quoted where it quotes), not cut. */
static int tune_message(int rc, const char *msg) {
  fprintf(stderr, "tilec tune: %s\n", msg);
  return rc;
}

static tc_compilation *front_end(Tune *t, const tc_define *extra, int nextra) {
  tc_define d[CLI_MAX_DEFINES + TUNE_MAX_BINDINGS];
  int n = 0;
  for (int i = 0; i < t->o.ndefines; i++) d[n++] = t->o.defines[i];
  for (int i = 0; i < nextra; i++) d[n++] = extra[i]; /* the later define wins */
  tc_options opt = {.kernel = t->kernel, .defines = d, .ndefines = n, .no_opt = t->o.no_opt, .include_dirs = t->dirs,
                    .ninclude_dirs = t->ndirs};
  return tc_compile(t->o.file, t->source, t->len, &opt);
}

/* A candidate from bindings (copied), with its canonical text. */
static int add_candidate(Tune *t, const tc_define *defs, int n) {
  TuneCandidate *c = &t->cands[t->ncands];
  size_t bytes = 0, at = 0;
  for (int i = 0; i < n; i++) bytes += strlen(defs[i].name) + strlen(defs[i].value) + 2;
  if (n > TUNE_MAX_BINDINGS) return tune_error(EXIT_USAGE, "a configuration has more than 32 bindings%s", "");
  if (!(c->strings = malloc(bytes ? bytes : 1))) return tune_error(EXIT_USAGE, "out of memory%s", "");
  for (int i = 0; i < n; i++) {
    int w = snprintf(c->text + at, sizeof c->text - at, "%s%s=%s", i ? "," : "", defs[i].name, defs[i].value);
    if (w < 0 || (at += (size_t)w) >= sizeof c->text)
      return tune_error(EXIT_USAGE, "configuration '%s...' is longer than 255 characters", c->text);
  }
  char *p = c->strings;
  for (int i = 0; i < n; i++) {
    size_t ln = strlen(defs[i].name) + 1, lv = strlen(defs[i].value) + 1;
    c->defs[i].name = memcpy(p, defs[i].name, ln);
    c->defs[i].value = memcpy(p + ln, defs[i].value, lv);
    p += ln + lv;
  }
  c->ndefs = n;
  c->k = -1;
  t->ncands++;
  return -1;
}

/* --config "A=1,B=2" */
static int parse_config(Tune *t, const char *text) {
  char *copy = strdup(text);
  if (!copy) return tune_error(EXIT_USAGE, "out of memory%s", "");
  tc_define d[TUNE_MAX_BINDINGS];
  int n = 0, rc = -1;
  for (char *at = copy; at && rc < 0;) {
    char *next = strchr(at, ',');
    if (next) *next++ = '\0';
    if (n == TUNE_MAX_BINDINGS || !strchr(at, '=') || !cli_parse_define(at, &d[n]))
      rc = tune_error(EXIT_USAGE, "--config needs NAME=VALUE,NAME=VALUE... (at most 32), got '%s'", text);
    else n++;
    at = next;
  }
  if (rc < 0) rc = add_candidate(t, d, n);
  for (int i = 0; i < n; i++) free((char *)d[i].name);
  free(copy);
  return rc;
}

/* The candidates: --config, else the kernel's @config list. */
static int find_candidates(Tune *t) {
  for (int i = 0; i < t->o.nconfigs; i++) {
    int rc = parse_config(t, t->o.configs[i]);
    if (rc >= 0) return rc;
  }
  tc_compilation *c = front_end(t, NULL, 0);
  int rc = -1;
  if (!c) return tune_error(EXIT_USAGE, "out of memory%s", "");
  if (tc_error_count(c)) {
    cli_print_diagnostics(stderr, tc_diagnostics(c), cli_color_wanted(CLI_COLOR_AUTO, stderr));
    rc = EXIT_SOURCE_ERROR;
  } else if (tc_kernel_count(c) == 0) {
    rc = tune_error(EXIT_USAGE, "the file has no kernel to tune%s", "");
  } else if (tc_kernel_count(c) != 1 && !t->kernel) {
    rc = tune_error(EXIT_USAGE, "the file has several kernels; choose one with -k%s", "");
  } else {
    t->kernel = tc_kernel_name(c, 0); /* the only one, or -k's */
    /* the kernel's @config list, unless --config gave the candidates */
    int n = t->o.nconfigs ? 0 : tc_kernel_config_count(c, 0);
    if (t->o.nconfigs == 0 && n == 0)
      rc = tune_error(EXIT_USAGE, "kernel '%s' declares no @config: give the candidates with --config", t->kernel);
    if (n > RUN_MAX_CONFIGS) rc = tune_error(EXIT_USAGE, "kernel '%s' has more than 64 @config", t->kernel);
    for (int i = 0; i < n && rc < 0; i++) {
      tc_define d[TUNE_MAX_BINDINGS];
      int nd = tc_kernel_config(c, 0, i, d, TUNE_MAX_BINDINGS);
      rc = nd > TUNE_MAX_BINDINGS ? tune_error(EXIT_USAGE, "an @config of '%s' has more than 32 bindings", t->kernel)
                                  : add_candidate(t, d, nd);
    }
    if (!(t->kernel = t->kernel_owned = strdup(t->kernel))) /* past c */
      rc = tune_error(EXIT_USAGE, "out of memory%s", "");
  }
  tc_free(c);
  return rc;
}

/* ---- the grid ------------------------------------------------------------ */

typedef struct GridNames {
  const Tune *t;
  const TuneCandidate *c;
} GridNames;

/* A --grid name: the candidate's integer const parameters, then the
 * integer scalar --args, then num_sms. */
static bool grid_lookup(void *user, const char *name, size_t len, int64_t *value) {
  const GridNames *g = user;
  char n[TUNE_NAME_BYTES];
  if (len >= sizeof n) return false;
  memcpy(n, name, len);
  n[len] = '\0';
  if (tc_kernel_const_int(g->c->c, g->c->k, n, value)) return true;
  for (int i = 0; i < g->t->nparams; i++) {
    const tc_param *p = &g->t->params[i];
    tc_arg a;
    const char *spec = run_find_arg(&g->t->o, p->name);
    if (strcmp(p->name, n) || (p->kind != TC_PARAM_INT && p->kind != TC_PARAM_BOOL) || !spec) continue;
    if (!run_parse_scalar(spec, p, &a)) return false;
    *value = a.i;
    return true;
  }
  if (strcmp(n, "num_sms")) return false;
  *value = g->t->num_sms;
  return true;
}

/* The grid of candidate c; check_only before the GPU is known. */
static int eval_grid(Tune *t, TuneCandidate *c, bool check_only) {
  char msg[RUN_MESSAGE_BYTES];
  GridNames g = {t, c};
  if (run_eval_grid(t->o.grid_text, grid_lookup, &g, check_only, c->grid, msg, sizeof msg)) return -1;
  tune_message(EXIT_USAGE, msg);
  fprintf(stderr, "  (with %s)\n", c->text[0] ? c->text : "the const parameters' defaults");
  return EXIT_USAGE;
}

/* ---- the arguments -------------------------------------------------------- */

/* The parameters of the first candidate that compiles, checked against
 * the --args. */
static int take_params(Tune *t, const TuneCandidate *c) {
  int n = tc_param_count(c->c, c->k);
  if (n > RUN_MAX_PARAMS) return tune_error(EXIT_USAGE, "kernels with more than 64 parameters are not supported%s", "");
  for (int a = 0; a < t->o.nargs; a++) {
    bool known = false;
    for (int i = 0; i < n; i++) known |= !strcmp(tc_param_get(c->c, c->k, i).name, t->o.args[a].name);
    if (!known) return tune_error(EXIT_USAGE, "kernel has no runtime parameter '%s'", t->o.args[a].name);
  }
  for (int i = 0; i < n; i++) {
    t->params[i] = tc_param_get(c->c, c->k, i);
    const char *spec = run_find_arg(&t->o, t->params[i].name);
    tc_arg v;
    if (!spec) return tune_error(EXIT_USAGE, "missing --arg for parameter '%s'", t->params[i].name);
    bool buffer = t->params[i].kind == TC_PARAM_PTR || t->params[i].kind == TC_PARAM_DESC;
    if (!buffer && !run_parse_scalar(spec, &t->params[i], &v))
      return tune_error(EXIT_USAGE, "bad value for scalar parameter '%s'", t->params[i].name);
  }
  t->nparams = n;
  return -1;
}

/* Device buffers and launch arguments from the --args. */
static int make_args(Tune *t) {
  uint64_t rng = t->o.seed;
  for (int i = 0; i < t->nparams; i++) {
    const tc_param *p = &t->params[i];
    const char *spec = run_find_arg(&t->o, p->name);
    tc_arg v = {0};
    if (p->kind == TC_PARAM_PTR || p->kind == TC_PARAM_DESC) {
      RunBuffer b = {0};
      bool size_error = false;
      if (!run_fill_buffer(spec, p, &rng, &b, &size_error) || (p->kind == TC_PARAM_DESC && b.rank != p->desc_rank)) {
        free(b.data);
        return size_error ? EXIT_USAGE
                          : tune_error(EXIT_USAGE, "bad buffer for '%s' (expected rand:N, zeros:N, range:N, file:PATH "
                                       "or file:SHAPE:PATH; descriptors need a shape of their rank, e.g. rand:64x32)",
                                       p->name);
      }
      tile_status st = tile_mem_alloc(t->rt, b.bytes, &t->device[i]);
      if (st == TILE_OK) st = tile_memcpy_htod(t->rt, t->device[i], b.data, b.bytes);
      free(b.data);
      if (st != TILE_OK) return tune_message(EXIT_SOURCE_ERROR, tile_last_error());
      if (p->kind == TC_PARAM_PTR) {
        t->args[i] = tile_arg_ptr(t->device[i]);
        continue;
      }
      tile_tensor *ts = &t->tensors[i];
      ts->ptr = t->device[i];
      ts->rank = b.rank;
      memcpy(ts->shape, b.shape, sizeof ts->shape);
      if (!run_row_major_strides(b.shape, b.rank, ts->strides))
        return tune_error(EXIT_USAGE, "the strides of buffer '%s' do not fit in 64 bits", p->name);
      t->args[i] = tile_arg_tensor(ts);
    } else {
      run_parse_scalar(spec, p, &v); /* checked by take_params */
      t->args[i] = p->kind == TC_PARAM_FLOAT ? tile_arg_f64(v.f)
                   : p->kind == TC_PARAM_BOOL || p->elem_signed ? tile_arg_i64(v.i)
                                                                : tile_arg_u64((uint64_t)v.i);
    }
  }
  return -1;
}

/* ---- timing ---------------------------------------------------------------- */

/* tile_jit_launch_fn: the candidate is the one whose bindings these are
 * (none: the defaults). */
static tile_status launch(void *user, tile_kernel *k, const tc_define *config, int nconfig, tile_stream *stream) {
  Tune *t = user;
  const TuneCandidate *found = nconfig == 0 ? &t->cands[t->ncands] : NULL;
  for (int i = 0; i < t->ncands && !found; i++) {
    const TuneCandidate *c = &t->cands[i];
    bool same = c->ndefs == nconfig;
    for (int b = 0; same && b < nconfig; b++)
      same = !strcmp(c->defs[b].name, config[b].name) && !strcmp(c->defs[b].value, config[b].value);
    if (same) found = c;
  }
  if (!found || found->k < 0) return TILE_ERROR_INVALID_ARGUMENT; /* a candidate the front end refused */
  uint32_t grid[3] = {(uint32_t)found->grid[0], (uint32_t)found->grid[1], (uint32_t)found->grid[2]};
  return tile_launch(k, grid, stream, t->args, t->nparams);
}

/* --key-args A,B: "A=<A's --arg or -D text>,B=..." into *key; an exit
 * code for a name that is neither. */
static int key_of_args(const RunOptions *o, char **key) {
  size_t n = strlen(o->key_args) + 1, at = 0;
  for (int i = 0; i < o->nargs; i++) n += strlen(o->args[i].spec) + 1;
  for (int i = 0; i < o->ndefines; i++) n += strlen(o->defines[i].value) + 1;
  char *names = strdup(o->key_args), *out = malloc(n + 16);
  int rc = names && out ? -1 : tune_error(EXIT_USAGE, "out of memory%s", "");
  for (char *name = names, *next; rc < 0 && name; name = next) {
    next = strchr(name, ',');
    if (next) *next++ = '\0';
    const char *v = run_find_arg(o, name);
    for (int i = o->ndefines - 1; i >= 0 && !v; i--) /* the last -D of a name wins */
      if (!strcmp(o->defines[i].name, name)) v = o->defines[i].value;
    if (!v) rc = tune_error(EXIT_USAGE, "--key-args names '%s', which is no --arg or -D", name);
    else at += (size_t)snprintf(out + at, n + 16 - at, "%s%s=%s", at ? "," : "", name, v);
  }
  free(names);
  if (rc >= 0) free(out);
  else *key = out;
  return rc;
}

/* The default key: what sizes the problem (--grid, -D and --arg texts). */
static char *default_key(const RunOptions *o) {
  size_t n = strlen(o->grid_text) + 64;
  for (int i = 0; i < o->ndefines; i++) n += strlen(o->defines[i].name) + strlen(o->defines[i].value) + 5;
  for (int i = 0; i < o->nargs; i++) n += strlen(o->args[i].name) + strlen(o->args[i].spec) + 2;
  char *key = malloc(n);
  if (!key) return NULL;
  size_t at = (size_t)snprintf(key, n, "grid=%s seed=%llu", o->grid_text, (unsigned long long)o->seed);
  for (int i = 0; i < o->ndefines; i++)
    at += (size_t)snprintf(key + at, n - at, " -D%s=%s", o->defines[i].name, o->defines[i].value);
  for (int i = 0; i < o->nargs; i++) at += (size_t)snprintf(key + at, n - at, " %s=%s", o->args[i].name, o->args[i].spec);
  return key;
}

static void print_grid(const TuneCandidate *c) {
  char g[64];
  if (c->k < 0) snprintf(g, sizeof g, "-");
  else if (c->grid[2] > 1) snprintf(g, sizeof g, "%lld,%lld,%lld", (long long)c->grid[0], (long long)c->grid[1], (long long)c->grid[2]);
  else if (c->grid[1] > 1) snprintf(g, sizeof g, "%lld,%lld", (long long)c->grid[0], (long long)c->grid[1]);
  else snprintf(g, sizeof g, "%lld", (long long)c->grid[0]);
  printf("  %-16s", g);
}

static void print_table(const Tune *t, const tile_jit_tune_result *r, const char *key, const char *dir) {
  tile_device_properties p = {0};
  tile_device_info(t->rt, &p); /* read before (tune) */
  printf("%s on %s (%d SMs), key '%s'\n", t->kernel, p.name, p.sm_count, key);
  printf("    %-10s  %-16s  %s\n", "ms", "grid", "configuration");
  for (int i = 0; i < r->nrows; i++) {
    const tile_jit_tune_row *row = &r->rows[i];
    printf("%s ", i == r->chosen ? "*" : " ");
    if (row->ms >= 0) printf(" %10.4f", row->ms);
    else printf(" %10s", "-");
    print_grid(&t->cands[i]);
    printf("  %s", row->config);
    if (row->status != TILE_OK) printf("  (%s: %s)", tile_status_name(row->status), row->error);
    putchar('\n');
  }
  if (r->from_cache)
    printf("chosen: %s (stored in %s for this key: nothing was timed; --retune times again)\n",
           r->rows[r->chosen].config, dir ? dir : "?");
  else printf("chosen: %s (timed now; stored in %s)\n", r->rows[r->chosen].config, dir ? dir : "no cache");
}

/* --defaults: the kernel with only -D's values, timed beside the chosen
 * candidate (taking turns, as the tuner times). */
static int time_defaults(Tune *t, tile_jit *j, const tile_jit_source *src, const tile_jit_tune *tune,
                         const tile_jit_tune_result *r) {
  TuneCandidate *d = &t->cands[t->ncands];
  d->c = front_end(t, NULL, 0);
  d->k = d->c && !tc_error_count(d->c) ? tc_kernel_find(d->c, t->kernel) : -1;
  if (d->k < 0) return tune_error(EXIT_SOURCE_ERROR, "--defaults: the kernel does not compile with its defaults%s", "");
  int rc = eval_grid(t, d, false);
  if (rc >= 0) return rc;
  tile_module *m = NULL;
  tile_kernel *k[2] = {r->kernel, NULL};
  const TuneCandidate *chosen = &t->cands[r->chosen];
  const tc_define *defs[2] = {chosen->defs, NULL};
  int ndefs[2] = {chosen->ndefs, 0};
  double ms[2] = {-1, -1};
  tile_status st = tile_jit_load(j, t->rt, src, &m, &k[1]);
  if (st == TILE_OK) st = tile_jit_time(t->rt, tune, 2, k, defs, ndefs, ms);
  if (m) tile_module_unload(m);
  if (st != TILE_OK) fprintf(stderr, "tilec tune: --defaults: %s\n", tile_last_error());
  if (st != TILE_OK) return EXIT_SOURCE_ERROR;
  printf("  %10.4f", ms[1]);
  print_grid(d);
  printf("  the const parameters' defaults, timed beside the chosen (%.4f ms then): the chosen is %.3fx as fast\n",
         ms[0], ms[1] / ms[0]);
  return -1;
}

/* Compiles the candidates' front ends, makes the arguments, tunes. */
static int tune(Tune *t) {
  int rc = find_candidates(t);
  int first = -1;
  for (int i = 0; i < t->ncands && rc < 0; i++) {
    TuneCandidate *c = &t->cands[i];
    if (!(c->c = front_end(t, c->defs, c->ndefs))) return tune_error(EXIT_USAGE, "out of memory%s", "");
    c->k = tc_error_count(c->c) ? -1 : tc_kernel_find(c->c, t->kernel);
    if (c->k < 0) continue; /* the tuner reports it */
    if (first < 0 && (rc = take_params(t, c)) >= 0) return rc;
    if (first < 0) first = i;
    rc = eval_grid(t, c, true);
  }
  if (rc >= 0) return rc;
  /* the key, before the GPU: --key, --key-args or the default */
  if (t->o.key && t->o.key_args) return tune_error(EXIT_USAGE, "--key and --key-args: give one of them%s", "");
  if (t->o.key_args && (rc = key_of_args(&t->o, &t->key)) >= 0) return rc;
  if (!t->o.key && !t->key && !(t->key = default_key(&t->o))) return tune_error(EXIT_USAGE, "out of memory%s", "");
  if (first < 0) {
    fprintf(stderr, "tilec tune: no candidate compiles; the first one's diagnostics:\n");
    cli_print_diagnostics(stderr, tc_diagnostics(t->cands[0].c), cli_color_wanted(CLI_COLOR_AUTO, stderr));
    return EXIT_SOURCE_ERROR;
  }
  tile_status st = tile_runtime_create(NULL, &t->rt);
  tile_device_properties p;
  if (st == TILE_OK) st = tile_device_info(t->rt, &p);
  if (st != TILE_OK) fprintf(stderr, "tilec tune: no GPU to run on: %s\n", tile_last_error());
  if (st != TILE_OK) return EXIT_NO_GPU;
  t->num_sms = p.sm_count;
  for (int i = 0; i < t->ncands && rc < 0; i++)
    if (t->cands[i].k >= 0) rc = eval_grid(t, &t->cands[i], false);
  if (rc < 0) rc = make_args(t);
  if (rc >= 0) return rc;
  tile_jit *j = NULL;
  tile_jit_options jo = {.cache_dir = t->o.cache_dir, .no_opt = t->o.no_opt};
  if (tile_jit_create(&jo, &j) != TILE_OK) return tune_message(EXIT_USAGE, tile_last_error());
  const char *texts[RUN_MAX_CONFIGS];
  for (int i = 0; i < t->ncands; i++) texts[i] = t->cands[i].text;
  char *key = t->key;
  tile_jit_source src = {.filename = t->o.file, .source = t->source, .len = t->len, .kernel = t->kernel,
                         .defines = t->o.defines, .ndefines = t->o.ndefines, .include_dirs = t->dirs,
                         .ninclude_dirs = t->ndirs};
  tile_jit_tune tune = {.key = t->o.key ? t->o.key : key ? key : "", .configs = texts, .nconfigs = t->ncands,
                        .launch = launch, .user = t, .warmup = t->o.warmup, .reps = t->o.reps, .retune = t->o.retune};
  tile_jit_tune_result *r = calloc(1, sizeof *r);
  st = r ? tile_jit_autotune(j, t->rt, &src, &tune, r) : TILE_ERROR_OUT_OF_MEMORY;
  if (st == TILE_OK) {
    print_table(t, r, tune.key, tile_jit_cache_dir(j));
    if (t->o.time_defaults) rc = time_defaults(t, j, &src, &tune, r);
    tile_module_unload(r->module);
  } else {
    rc = tune_message(EXIT_SOURCE_ERROR, r ? tile_last_error() : "out of memory");
  }
  free(r);
  tile_jit_destroy(j);
  return rc < 0 ? EXIT_OK : rc;
}

int cli_tune(int argc, char **argv) {
  Tune *t = calloc(1, sizeof *t);
  if (!t) return tune_error(EXIT_USAGE, "out of memory%s", "");
  t->o.tune = true;
  char msg[RUN_MESSAGE_BYTES];
  RunParse parsed = run_parse_options(argc, argv, &t->o, msg, sizeof msg);
  int rc = EXIT_USAGE;
  if (parsed == RUN_PARSE_HELP) {
    fputs(tune_usage_text(), stdout);
    rc = EXIT_OK;
  } else if (parsed == RUN_PARSE_USAGE) {
    tune_message(EXIT_USAGE, msg);
    fprintf(stderr, "(run 'tilec tune --help' for usage)\n");
  } else if ((t->source = cli_read_source(t->o.file, &t->len))) {
    t->kernel = t->o.kernel;
    t->ndirs = cli_include_dirs(t->o.include_dirs, t->o.ninclude_dirs, t->dirs, t->exe_dir);
    rc = tune(t);
  }
  free(t->kernel_owned);
  free(t->key);
  for (int i = 0; i <= t->ncands && i <= RUN_MAX_CONFIGS; i++) {
    free(t->cands[i].strings);
    tc_free(t->cands[i].c);
  }
  for (int i = 0; i < t->nparams; i++)
    if (t->device[i]) tile_mem_free(t->rt, t->device[i]);
  if (t->rt) tile_runtime_destroy(t->rt);
  free(t->source);
  run_options_free(&t->o);
  free(t);
  return rc;
}
