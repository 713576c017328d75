/* run.c - `tilec run`: compile one kernel and run it in the interpreter on
 * inputs given on the command line (numbers, random or zero buffers, raw
 * binary files), then summarize or dump the buffers.
 *
 *   tilec run add.tile -k add --grid 4 --arg z=zeros:1000 --arg x=rand:1000 \
 *         --arg y=file:y.bin --arg n=1000 --seed 7 --dump out/
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../numeric/numeric.h"
#include "../util/suggest.h"
#include "run.h"

static const char run_usage[] =
    "usage: tilec run FILE.tile -k KERNEL --grid X[,Y[,Z]] [--arg NAME=VALUE]... [options]\n"
    "\n"
    "Runs a kernel in the interpreter. Every runtime parameter needs an --arg:\n"
    "  scalars:      a number (or true/false)                  --arg n=1000\n"
    "  pointers:     rand:N  uniform in [-1, 1) (signed integers: [-100, 100), unsigned: [0, 200))\n"
    "                zeros:N  range:N (0, 1, 2, ...)  file:PATH (raw little-endian data)\n"
    "                file:SHAPE:PATH (the file must hold SHAPE's elements)\n"
    "  descriptors:  the same with a shape, e.g. rand:128x64 (row-major)\n"
    "options:\n"
    "  -D NAME=VALUE      const parameter value (repeatable)\n"
    "  -I DIR             look for imported files in DIR too (repeatable)\n"
    "  --seed N           seed for rand: buffers (default 1)\n"
    "  --dump DIR         write every buffer to DIR/NAME.bin after the run (also a failed one)\n"
    "  --max-steps N      stop after N element operations (default 1e9: seconds to a minute)\n"
    "  --timeout SECONDS  stop after SECONDS of wall-clock time (default 60; 0: no limit)\n"
    "  -O0                run the unoptimized IR (every load and division is executed and checked,\n"
    "                     also those whose results are unused)\n"
    "Prints one summary line per buffer (min, max, mean, NaN count).\n";

static const char tune_usage[] =
    "usage: tilec tune FILE.tile -k KERNEL --grid X[,Y[,Z]] [--arg NAME=VALUE]... [options]\n"
    "\n"
    "Compiles the kernel once per candidate configuration (its @config list, or --config),\n"
    "times each on the GPU with CUDA events (the median of --reps launches after --warmup)\n"
    "on buffers made as tilec run makes them, prints the table and stores the fastest in\n"
    "the JIT cache, where later tunings with the same key (here or through tile_jit_autotune)\n"
    "find it and time nothing.\n"
    "  --grid X[,Y[,Z]]   each size an expression of integers, names (the candidate's integer\n"
    "                     const parameters, the integer scalar --args, num_sms: the GPU's SM\n"
    "                     count), + - * / % ( ), cdiv(a, b), min(a, b), max(a, b); e.g.\n"
    "                     --grid 'min(cdiv(m, BLOCK_M) * cdiv(n, BLOCK_N), num_sms)'\n"
    "  --arg NAME=VALUE   as for tilec run; buffers are copied to the GPU, descriptors are\n"
    "                     row-major tensors of their shape (rand:8192x4096)\n"
    "options:\n"
    "  --config A=1,B=2   a candidate (repeatable; instead of the kernel's @config list)\n"
    "  --key TEXT         what the stored choice is for (default: the --grid, --arg and -D texts)\n"
    "  --key-args A,B     the key is these --args' and -D's values (the sizes that select a\n"
    "                     configuration, as Triton's autotune key): --key-args m,n,k\n"
    "  --retune           time the candidates even when a choice is stored\n"
    "  --defaults         also time the kernel with its const parameters' own values\n"
    "  --cache DIR        the JIT cache (default: $TILE_CACHE_DIR, else $XDG_CACHE_HOME/tile,\n"
    "                     else ~/.cache/tile)\n"
    "  --warmup N         launches before timing each candidate (default 3)\n"
    "  --reps N           timed launches of each candidate (default 10)\n"
    "  -D NAME=VALUE      const parameter value for every candidate (repeatable)\n"
    "  -I DIR             look for imported files in DIR too (repeatable)\n"
    "  --seed N           seed for rand: buffers (default 1)\n"
    "  -O0                skip the IR optimization passes\n"
    "Exit status: 0 a configuration was chosen, 1 errors in the source or none compiled and\n"
    "ran, 2 bad usage, 3 no GPU (or its driver) to run on.\n";

const char *run_usage_text(void) { return run_usage; }
const char *tune_usage_text(void) { return tune_usage; }

static int run_usage_error(const char *msg, const char *arg) {
  fprintf(stderr, "tilec run: ");
  fprintf(stderr, msg, arg);
  fprintf(stderr, "\n(run 'tilec run --help' for usage)\n");
  return EXIT_USAGE;
}

/* ---- the command line ---------------------------------------------------- */

static RunParse parse_error(char *msg, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static RunParse parse_error(char *msg, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (size) vsnprintf(msg, size, fmt, ap);
  va_end(ap);
  return RUN_PARSE_USAGE;
}

/* strtoll and friends skip leading blanks and take a sign after them, so
 * " -1" would pass a check of s[0] for '-': numbers must start with a
 * digit (or a sign, where one is allowed). */
static bool starts_number(const char *s) { return *s && !isspace((unsigned char)*s); }

static bool parse_u64(const char *s, uint64_t *out) {
  if (!starts_number(s) || s[0] == '-') return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (end == s || *end || errno) return false;
  *out = v;
  return true;
}

/* Seconds: a finite number, at least 0. */
static bool parse_seconds(const char *s, double *out) {
  if (!starts_number(s)) return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !isfinite(v) || v < 0) return false;
  *out = v;
  return true;
}

static bool parse_grid(const char *s, int64_t grid[3]) {
  grid[0] = grid[1] = grid[2] = 1;
  for (int i = 0; i < 3; i++) {
    if (!starts_number(s)) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno || v < 1 || v > (1LL << 31) - 1) return false;
    grid[i] = v;
    if (!*end) return true;
    if (*end != ',') return false;
    s = end + 1;
  }
  return false;
}

static bool option_takes_value(const char *a) {
  static const char *const with_value[] = {"-k",     "--kernel", "--grid",      "--arg",     "--seed",   "--dump",
                                           "-D",     "--max-steps", "--timeout", "-I",     "--config", "--key", "--key-args",
                                           "--cache", "--warmup", "--reps"};
  for (size_t i = 0; i < sizeof with_value / sizeof with_value[0]; i++)
    if (!strcmp(a, with_value[i])) return true;
  return false;
}

/* An --arg whose name an earlier one has. */
static bool arg_given(const RunOptions *o, const char *name, size_t len) {
  for (int i = 0; i < o->nargs; i++)
    if (strlen(o->args[i].name) == len && !strncmp(o->args[i].name, name, len)) return true;
  return false;
}

/* One option a (with its value v, if it takes one). Arguments quoted in
 * messages are cut when long (diag_quote). */
/* --warmup and --reps: 0 (warmup only) to RUN_MAX_TUNE_LAUNCHES. */
static bool parse_launches(const char *s, bool zero_ok, int *out) {
  uint64_t v;
  if (!parse_u64(s, &v) || v > RUN_MAX_TUNE_LAUNCHES || (v == 0 && !zero_ok)) return false;
  *out = (int)v;
  return true;
}

/* The options of `tilec run` and `tilec tune`: those both take, those
 * only run takes, those only tune takes (for the checks and "did you
 * mean"). */
static const char *const common_options[] = {"-k", "--kernel", "--grid", "--arg", "--seed", "-D", "-I", "-O0", "--help"};
static const char *const run_options[] = {"--dump", "--max-steps", "--timeout"};
static const char *const tune_options[] = {"--config", "--key",  "--key-args", "--cache",
                                           "--warmup", "--reps", "--retune",   "--defaults"};
#define COUNT_OF(a) ((int)(sizeof a / sizeof a[0]))

static bool listed(const char *a, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!strcmp(a, names[i])) return true;
  return false;
}

static bool tune_only(const char *a) { return listed(a, tune_options, COUNT_OF(tune_options)); }
static bool run_only(const char *a) { return listed(a, run_options, COUNT_OF(run_options)); }

/* "unknown option", with the closest option of this command. */
static RunParse unknown_option(const char *a, bool tune, char *msg, size_t size) {
  char q[DIAG_QUOTE_BUF], buf[SUGGEST_MAX_LEN + 1];
  const char *known[COUNT_OF(common_options) + COUNT_OF(tune_options)];
  int n = 0;
  for (int i = 0; i < COUNT_OF(common_options); i++) known[n++] = common_options[i];
  const char *const *own = tune ? tune_options : run_options;
  for (int i = 0; i < (tune ? COUNT_OF(tune_options) : COUNT_OF(run_options)); i++) known[n++] = own[i];
  const char *best = cli_suggest_option(a, known, n, buf, sizeof buf);
  if (best) return parse_error(msg, size, "unknown option '%s'; did you mean '%s'?", diag_quote(q, a), best);
  return parse_error(msg, size, "unknown option '%s'", diag_quote(q, a));
}

/* `tilec tune`'s own options. */
static RunParse parse_tune_option(const char *a, const char *v, RunOptions *o, char *msg, size_t size) {
  char q[DIAG_QUOTE_BUF];
  if (!strcmp(a, "--config")) {
    if (o->nconfigs == RUN_MAX_CONFIGS) return parse_error(msg, size, "more than %d --config options", RUN_MAX_CONFIGS);
    o->configs[o->nconfigs++] = v;
  } else if (!strcmp(a, "--key")) o->key = v;
  else if (!strcmp(a, "--key-args")) o->key_args = v;
  else if (!strcmp(a, "--cache")) o->cache_dir = v;
  else if (!strcmp(a, "--retune")) o->retune = true;
  else if (!strcmp(a, "--defaults")) o->time_defaults = true;
  else if (!strcmp(a, "--warmup") && !parse_launches(v, true, &o->warmup))
    return parse_error(msg, size, "--warmup needs 0 to %d launches, got '%s'", RUN_MAX_TUNE_LAUNCHES, diag_quote(q, v));
  else if (!strcmp(a, "--reps") && !parse_launches(v, false, &o->reps))
    return parse_error(msg, size, "--reps needs 1 to %d launches, got '%s'", RUN_MAX_TUNE_LAUNCHES, diag_quote(q, v));
  return RUN_PARSE_OK;
}

static RunParse parse_option(const char *a, const char *v, RunOptions *o, char *msg, size_t size) {
  char q[DIAG_QUOTE_BUF];
  if (o->tune ? run_only(a) : tune_only(a))
    return parse_error(msg, size, "'%s' is an option of tilec %s, not of tilec %s", a, o->tune ? "run" : "tune",
                       o->tune ? "tune" : "run");
  if (tune_only(a)) return parse_tune_option(a, v, o, msg, size);
  if (!strcmp(a, "-k") || !strcmp(a, "--kernel")) o->kernel = v;
  else if (!strcmp(a, "--grid") && o->tune) {
    if (!*v) return parse_error(msg, size, "--grid needs X[,Y[,Z]], got ''");
    o->grid_text = v;
  } else if (!strcmp(a, "--grid")) {
    if (!parse_grid(v, o->grid))
      return parse_error(msg, size, "--grid needs X[,Y[,Z]] with positive sizes, got '%s'", diag_quote(q, v));
  } else if (!strcmp(a, "--seed")) {
    if (!parse_u64(v, &o->seed))
      return parse_error(msg, size, "--seed needs a non-negative integer, got '%s'", diag_quote(q, v));
  } else if (!strcmp(a, "--max-steps")) {
    if (!parse_u64(v, &o->max_steps) || !o->max_steps)
      return parse_error(msg, size, "--max-steps needs a positive integer, got '%s'", diag_quote(q, v));
  } else if (!strcmp(a, "--timeout")) {
    if (!parse_seconds(v, &o->timeout_seconds))
      return parse_error(msg, size, "--timeout needs a number of seconds (0: no limit), got '%s'", diag_quote(q, v));
  } else if (!strcmp(a, "--dump")) o->dump = v;
  else if (!strcmp(a, "-O0")) o->no_opt = true;
  else if (!strcmp(a, "-I") || (!strncmp(a, "-I", 2) && a[2])) {
    if (o->ninclude_dirs == CLI_MAX_INCLUDE_DIRS)
      return parse_error(msg, size, "more than %d -I options", CLI_MAX_INCLUDE_DIRS);
    o->include_dirs[o->ninclude_dirs++] = a[2] ? a + 2 : v;
  }
  else if (!strcmp(a, "-D") || (!strncmp(a, "-D", 2) && a[2])) {
    const char *d = a[2] ? a + 2 : v;
    if (o->ndefines == CLI_MAX_DEFINES) return parse_error(msg, size, "more than %d -D options", CLI_MAX_DEFINES);
    if (!cli_parse_define(d, &o->defines[o->ndefines]))
      return parse_error(msg, size, "-D needs NAME=VALUE, got '%s'", diag_quote(q, d));
    o->ndefines++;
  } else if (!strcmp(a, "--arg")) {
    const char *eq = strchr(v, '=');
    if (o->nargs == RUN_MAX_PARAMS) return parse_error(msg, size, "more than %d --arg options", RUN_MAX_PARAMS);
    if (!eq || eq == v) return parse_error(msg, size, "--arg needs NAME=VALUE, got '%s'", diag_quote(q, v));
    if (arg_given(o, v, (size_t)(eq - v))) {
      char *dup = strndup(v, (size_t)(eq - v));
      RunParse r = parse_error(msg, size, "--arg '%s' is given twice", dup ? diag_quote(q, dup) : "?");
      free(dup);
      return r;
    }
    char *name = strndup(v, (size_t)(eq - v));
    if (!name) return parse_error(msg, size, "out of memory");
    o->args[o->nargs].name = name;
    o->args[o->nargs++].spec = eq + 1;
  } else if (a[0] == '-' && a[1]) {
    return unknown_option(a, o->tune, msg, size);
  }
  else if (o->file) return parse_error(msg, size, "more than one input file ('%s')", diag_quote(q, a));
  else o->file = a;
  return RUN_PARSE_OK;
}

RunParse run_parse_options(int argc, char **argv, RunOptions *o, char *msg, size_t size) {
  o->seed = 1;
  o->grid[0] = 0;
  o->timeout_seconds = RUN_DEFAULT_TIMEOUT_SECONDS;
  if (size) msg[0] = '\0';
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return RUN_PARSE_HELP;
    bool takes = option_takes_value(a);
    if (takes && !v) return parse_error(msg, size, "option '%s' needs an argument", a); /* a known option */
    if (takes) i++;
    RunParse r = parse_option(a, v, o, msg, size);
    if (r != RUN_PARSE_OK) return r;
  }
  if (!o->file) return parse_error(msg, size, "no input file");
  if (o->tune ? !o->grid_text : !o->grid[0]) return parse_error(msg, size, "--grid is required");
  return RUN_PARSE_OK;
}

void run_options_free(RunOptions *o) {
  for (int i = 0; i < o->nargs; i++) free((char *)o->args[i].name);
  for (int i = 0; i < o->ndefines; i++) free((char *)o->defines[i].name);
  o->nargs = o->ndefines = 0;
}

/* ---- argument values ------------------------------------------------------- */

/* Parses "N" or "AxBxC" into a shape, the element count checked after
 * every factor (a product of four sizes of 2^40 would overflow). */
static bool parse_shape(const char *s, RunBufferSpec *b) {
  b->rank = 0;
  b->n = 1;
  while (b->rank < RUN_MAX_RANK) {
    if (!starts_number(s) || *s == '-' || *s == '+') return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno || v < 1 || v > RUN_MAX_BUFFER_ELEMS) return false;
    b->shape[b->rank++] = v;
    if (b->n > RUN_MAX_BUFFER_ELEMS / v) return false;
    b->n *= v;
    if (!*end) return true;
    if (*end != 'x') return false;
    s = end + 1;
  }
  return false;
}

bool run_parse_buffer_spec(const char *spec, RunBufferSpec *out) {
  static const struct {
    const char *name;
    RunFill fill;
  } fills[] = {{"rand", RUN_FILL_RAND}, {"zeros", RUN_FILL_ZEROS}, {"range", RUN_FILL_RANGE}, {"file", RUN_FILL_FILE}};
  memset(out, 0, sizeof *out);
  const char *colon = strchr(spec, ':');
  if (!colon) return false;
  size_t kl = (size_t)(colon - spec);
  for (size_t i = 0; i < sizeof fills / sizeof fills[0]; i++) {
    if (strlen(fills[i].name) != kl || strncmp(spec, fills[i].name, kl) != 0) continue;
    out->fill = fills[i].fill;
    if (out->fill != RUN_FILL_FILE) return parse_shape(colon + 1, out);
    /* file:SHAPE:PATH when the text before the next ':' is a shape,
     * else file:PATH (./12:x names a file "12:x") */
    out->path = colon + 1;
    const char *next = strchr(out->path, ':');
    char shape[RUN_SHAPE_TEXT_BYTES];
    RunBufferSpec s;
    if (next && (size_t)(next - out->path) < sizeof shape) {
      memcpy(shape, out->path, (size_t)(next - out->path));
      shape[next - out->path] = '\0';
      if (parse_shape(shape, &s)) {
        out->rank = s.rank;
        out->n = s.n;
        memcpy(out->shape, s.shape, sizeof out->shape);
        out->path = next + 1;
      }
    }
    return *out->path != '\0';
  }
  return false;
}

bool run_row_major_strides(const int64_t *shape, int rank, int64_t *strides) {
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; d--) {
    strides[d] = stride;
    if (shape[d] < 1 || __builtin_mul_overflow(stride, shape[d], &stride)) return false;
  }
  return true;
}

/* ---- --grid expressions of tilec tune --------------------------------------- */

/* Deepest nesting of parentheses and unary minus a --grid expression may
 * have: far more than a grid needs, and a bound on the evaluator's
 * recursion. */
#define GRID_MAX_DEPTH 64

typedef struct GridParser {
  const char *text, *at;
  RunGridLookup lookup;
  void *user;
  bool check_only, failed;
  int depth;
  char *msg;
  size_t size;
} GridParser;

static int64_t grid_fail(GridParser *g, const char *what) {
  if (!g->failed && g->size) {
    char q[DIAG_QUOTE_BUF];
    if (*g->at) snprintf(g->msg, g->size, "--grid '%s': %s at offset %d", diag_quote(q, g->text), what, (int)(g->at - g->text));
    else snprintf(g->msg, g->size, "--grid '%s': %s at the end", diag_quote(q, g->text), what);
  }
  g->failed = true;
  return 1;
}

static void grid_blanks(GridParser *g) {
  while (*g->at == ' ' || *g->at == '\t') g->at++;
}

static bool grid_take(GridParser *g, char c) {
  grid_blanks(g);
  if (*g->at != c) return false;
  g->at++;
  return true;
}

/* A value error (overflow, division by zero), reported unless only the
 * text is checked. */
static int64_t grid_value_error(GridParser *g, const char *what) { return g->check_only ? 1 : grid_fail(g, what); }

static int64_t grid_sum(GridParser *g);

/* cdiv, min or max of two arguments. */
static int64_t grid_call(GridParser *g, const char *name, size_t len) {
  int64_t a = grid_sum(g);
  if (!grid_take(g, ',')) return grid_fail(g, "expected ',' between the two arguments");
  int64_t b = grid_sum(g);
  if (!grid_take(g, ')')) return grid_fail(g, "expected ')'");
  if (len == 3 && !strncmp(name, "min", 3)) return a < b ? a : b;
  if (len == 3) return a > b ? a : b;
  if (b <= 0) return grid_value_error(g, "cdiv by a value below 1");
  int64_t r;
  if (__builtin_add_overflow(a, b - 1, &r)) return grid_value_error(g, "overflow");
  return a >= 0 ? r / b : a / b;
}

static int64_t grid_primary(GridParser *g) {
  grid_blanks(g);
  if (++g->depth > GRID_MAX_DEPTH) return grid_fail(g, "nested too deeply");
  int64_t v = 1;
  const char *p = g->at;
  if (*p == '-') {
    g->at++;
    v = grid_primary(g);
    if (v == INT64_MIN) v = grid_value_error(g, "overflow");
    else v = -v;
  } else if (*p == '(') {
    g->at++;
    v = grid_sum(g);
    if (!grid_take(g, ')')) v = grid_fail(g, "expected ')'");
  } else if (*p >= '0' && *p <= '9') {
    errno = 0;
    char *end;
    long long n = strtoll(p, &end, 10);
    if (errno) v = grid_fail(g, "number out of range");
    else v = n, g->at = end;
  } else if (*p == '_' || isalpha((unsigned char)*p)) {
    while (*g->at == '_' || isalnum((unsigned char)*g->at)) g->at++;
    size_t len = (size_t)(g->at - p);
    bool fn = (len == 4 && !strncmp(p, "cdiv", 4)) || (len == 3 && (!strncmp(p, "min", 3) || !strncmp(p, "max", 3)));
    if (fn && grid_take(g, '(')) {
      v = grid_call(g, p, len);
    } else if (!g->lookup(g->user, p, len, &v)) {
      char what[RUN_MESSAGE_BYTES / 2];
      snprintf(what, sizeof what, "unknown name '%.*s' (names are the kernel's integer const parameters, its integer "
               "scalar --args and num_sms)", (int)(len < 64 ? len : 64), p);
      g->at = p;
      v = grid_fail(g, what);
    }
  } else {
    v = grid_fail(g, "expected a number, a name or '('");
  }
  g->depth--;
  return v;
}

static int64_t grid_product(GridParser *g) {
  int64_t v = grid_primary(g);
  for (;;) {
    grid_blanks(g);
    char op = *g->at;
    if (g->failed || (op != '*' && op != '/' && op != '%')) return v;
    g->at++;
    int64_t r = grid_primary(g);
    if (op == '*') {
      if (__builtin_mul_overflow(v, r, &v)) v = grid_value_error(g, "overflow");
    } else if (r == 0 || (r == -1 && v == INT64_MIN)) {
      v = grid_value_error(g, r ? "overflow" : "division by zero");
    } else {
      v = op == '/' ? v / r : v % r;
    }
  }
}

static int64_t grid_sum(GridParser *g) {
  int64_t v = grid_product(g);
  for (;;) {
    grid_blanks(g);
    char op = *g->at;
    if (g->failed || (op != '+' && op != '-')) return v;
    g->at++;
    int64_t r = grid_product(g);
    if (op == '+' ? __builtin_add_overflow(v, r, &v) : __builtin_sub_overflow(v, r, &v))
      v = grid_value_error(g, "overflow");
  }
}

bool run_eval_grid(const char *text, RunGridLookup lookup, void *user, bool check_only, int64_t grid[3], char *msg,
                   size_t size) {
  GridParser g = {.text = text, .at = text, .lookup = lookup, .user = user, .check_only = check_only, .msg = msg,
                  .size = size};
  if (size) msg[0] = '\0';
  grid[0] = grid[1] = grid[2] = 1;
  for (int i = 0; i < 3 && !g.failed; i++) {
    grid[i] = grid_sum(&g);
    if (!g.failed && !check_only && (grid[i] < 1 || grid[i] > (INT64_C(1) << 31) - 1)) {
      char what[96];
      snprintf(what, sizeof what, "size %d is %lld (a grid size is 1 to 2^31 - 1)", i + 1, (long long)grid[i]);
      grid_fail(&g, what);
    }
    if (g.failed) break;
    grid_blanks(&g);
    if (!*g.at) return true;
    if (!grid_take(&g, ',')) grid_fail(&g, "expected ',' or the end");
    else if (i == 2) grid_fail(&g, "more than three sizes");
  }
  return false;
}

/* splitmix64: a small, good, seedable generator for test inputs. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* A file: buffer. With a shape the file must hold exactly that many
 * elements (*size_error then says so: an error of its own, the reading
 * errors are printed by cli_read_file). */
static bool read_buffer_file(const RunBufferSpec *bs, const tc_param *p, RunBuffer *b, bool *size_error) {
  size_t len;
  char *data = cli_read_file(bs->path, &len);
  if (!data) return false;
  if (bs->rank && len != (size_t)bs->n * (size_t)p->elem_bytes) {
    char q[DIAG_QUOTE_BUF];
    fprintf(stderr, "tilec run: '%s' holds %zu bytes; %lld elements of %s need %zu\n", diag_quote(q, bs->path), len,
            (long long)bs->n, p->elem, (size_t)bs->n * (size_t)p->elem_bytes);
    free(data);
    *size_error = true;
    return false;
  }
  b->data = data;
  b->bytes = len;
  b->n = (int64_t)(len / (size_t)p->elem_bytes);
  b->rank = bs->rank ? bs->rank : 1;
  if (bs->rank) memcpy(b->shape, bs->shape, sizeof b->shape);
  else b->shape[0] = b->n;
  return true;
}

bool run_fill_buffer(const char *spec, const tc_param *p, uint64_t *rng, RunBuffer *b, bool *size_error) {
  RunBufferSpec bs;
  if (!run_parse_buffer_spec(spec, &bs)) return false;
  if (bs.fill == RUN_FILL_FILE) return read_buffer_file(&bs, p, b, size_error);
  ScalarKind k = scalar_from_name(p->elem, strlen(p->elem));
  b->rank = bs.rank;
  b->n = bs.n;
  memcpy(b->shape, bs.shape, sizeof b->shape);
  b->bytes = (size_t)b->n * (size_t)p->elem_bytes; /* n <= 2^40, bytes <= 8 */
  b->data = calloc(b->bytes ? b->bytes : 1, 1);
  if (!b->data) return false;
  for (int64_t i = 0; i < b->n && bs.fill != RUN_FILL_ZEROS; i++) {
    double v = (double)i;
    if (bs.fill == RUN_FILL_RAND) {
      uint64_t r = next_random(rng);
      v = scalar_is_float(k)   ? (double)(r >> 11) * 0x1p-52 - 1.0
          : scalar_is_signed(k) ? (double)(int64_t)(r % 200) - 100
                                : (double)(r % 200);
    }
    Slot s;
    if (scalar_is_float(k)) s.f = num_round_float(v, k);
    else s = num_convert((Slot){.i = (int64_t)v}, SK_I64, k);
    num_store((char *)b->data + (size_t)i * (size_t)p->elem_bytes, s, k);
  }
  return true;
}

/* Whether v fits a signed or unsigned integer of `bytes` bytes. */
static bool int_in_range(int64_t v, int bytes, bool is_signed) {
  if (bytes >= 8) return true;
  int bits = 8 * bytes;
  if (is_signed) return v >= -(INT64_C(1) << (bits - 1)) && v < (INT64_C(1) << (bits - 1));
  return (uint64_t)v < (UINT64_C(1) << bits);
}

bool run_parse_scalar(const char *spec, const tc_param *p, tc_arg *a) {
  char *end;
  errno = 0;
  if (p->kind == TC_PARAM_BOOL) {
    if (!strcmp(spec, "true") || !strcmp(spec, "1")) a->i = 1;
    else if (!strcmp(spec, "false") || !strcmp(spec, "0")) a->i = 0;
    else return false;
    return true;
  }
  if (!starts_number(spec)) return false;
  if (p->kind == TC_PARAM_FLOAT) {
    a->f = strtod(spec, &end);
  } else if (!p->elem_signed) {
    if (spec[0] == '-') return false;
    a->i = (int64_t)strtoull(spec, &end, 0);
  } else {
    a->i = strtoll(spec, &end, 0);
  }
  if (end == spec || *end || errno) return false;
  return p->kind == TC_PARAM_FLOAT || int_in_range(a->i, p->elem_bytes, p->elem_signed);
}

/* ---- running --------------------------------------------------------------- */

static void summarize(const char *name, const tc_param *p, const RunBuffer *b) {
  ScalarKind k = scalar_from_name(p->elem, strlen(p->elem));
  double mn = INFINITY, mx = -INFINITY, sum = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < b->n; i++) {
    Slot s = num_load((const char *)b->data + (size_t)i * (size_t)p->elem_bytes, k);
    double v = scalar_is_float(k) ? s.f : scalar_is_signed(k) ? (double)s.i : (double)s.u;
    if (v != v) {
      nans++;
      continue;
    }
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
    sum += v;
  }
  int64_t counted = b->n - nans;
  printf("%s: %s[%lld] min=%.6g max=%.6g mean=%.6g nan=%lld\n", name, p->elem, (long long)b->n, counted ? mn : 0,
         counted ? mx : 0, counted ? sum / (double)counted : 0, (long long)nans);
}

static bool dump_buffer(const char *dir, const char *name, const RunBuffer *b) {
  mkdir(dir, 0777);
  size_t len = strlen(dir) + strlen(name) + 8;
  char *path = malloc(len);
  if (!path) {
    fprintf(stderr, "tilec run: out of memory\n");
    return false;
  }
  snprintf(path, len, "%s/%s.bin", dir, name);
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(b->data, 1, b->bytes, f) == b->bytes;
  if (f) ok &= fclose(f) == 0;
  char q[DIAG_QUOTE_BUF];
  if (!ok) fprintf(stderr, "tilec run: cannot write '%s'\n", diag_quote(q, path));
  free(path);
  return ok;
}

const char *run_find_arg(const RunOptions *o, const char *name) {
  for (int i = 0; i < o->nargs; i++)
    if (!strcmp(o->args[i].name, name)) return o->args[i].spec;
  return NULL;
}

/* Builds the arguments, runs, reports. */
static int run_kernel(const RunOptions *o, tc_compilation *c, int k) {
  int n = tc_param_count(c, k);
  if (n > RUN_MAX_PARAMS) return run_usage_error("kernels with more than 64 parameters are not supported%s", "");
  tc_arg args[RUN_MAX_PARAMS] = {0};
  RunBuffer bufs[RUN_MAX_PARAMS] = {0};
  tc_buffer tb[RUN_MAX_PARAMS];
  int nbufs = 0, rc = EXIT_OK;
  bool failed_run = false;
  uint64_t rng = o->seed;
  for (int a = 0; a < o->nargs; a++) {
    bool known = false;
    for (int i = 0; i < n; i++) known |= !strcmp(tc_param_get(c, k, i).name, o->args[a].name);
    char q[DIAG_QUOTE_BUF];
    if (!known) return run_usage_error("kernel has no runtime parameter '%s'", diag_quote(q, o->args[a].name));
  }
  for (int i = 0; i < n && rc == EXIT_OK; i++) {
    tc_param p = tc_param_get(c, k, i);
    const char *spec = run_find_arg(o, p.name);
    if (!spec) {
      rc = run_usage_error("missing --arg for parameter '%s'", p.name);
    } else if (p.kind == TC_PARAM_PTR || p.kind == TC_PARAM_DESC) {
      bool size_error = false;
      if (!run_fill_buffer(spec, &p, &rng, &bufs[i], &size_error) ||
          (p.kind == TC_PARAM_DESC && bufs[i].rank != p.desc_rank)) {
        rc = size_error ? EXIT_USAGE
                        : run_usage_error("bad buffer for '%s' (expected rand:N, zeros:N, range:N, file:PATH or "
                                          "file:SHAPE:PATH; descriptors need a shape of their rank, e.g. rand:64x32 "
                                          "or file:64x32:PATH)",
                                          p.name);
        continue;
      }
      args[i].p = bufs[i].data;
      memcpy(args[i].shape, bufs[i].shape, sizeof args[i].shape);
      if (!run_row_major_strides(bufs[i].shape, bufs[i].rank, args[i].strides)) {
        rc = run_usage_error("the strides of buffer '%s' do not fit in 64 bits", p.name);
        continue;
      }
      tb[nbufs++] = (tc_buffer){bufs[i].data, bufs[i].bytes, p.name};
    } else if (!run_parse_scalar(spec, &p, &args[i])) {
      rc = run_usage_error("bad value for scalar parameter '%s'", p.name);
    }
  }
  if (rc == EXIT_OK) {
    char *err = NULL;
    tc_interp_options limits = {.max_steps = o->max_steps, .max_seconds = o->timeout_seconds};
    if (!tc_interpret_ex(c, k, o->grid, args, n, tb, nbufs, &limits, &err)) {
      fprintf(stderr, "%s\n", err ? err : "tilec run: the run failed");
      rc = EXIT_SOURCE_ERROR;
      failed_run = true;
      if (o->dump) fprintf(stderr, "tilec run: the buffers go to '%s' as they were when the run stopped\n", o->dump);
    } else {
      for (int i = 0; i < n; i++) {
        tc_param p = tc_param_get(c, k, i);
        if (bufs[i].data) summarize(p.name, &p, &bufs[i]);
      }
    }
    free(err);
  }
  /* after a run, also a failed one: what was written before the error */
  bool dump = o->dump && (rc == EXIT_OK || failed_run);
  for (int i = 0; i < n; i++) {
    if (dump && bufs[i].data && !dump_buffer(o->dump, tc_param_get(c, k, i).name, &bufs[i]) && rc == EXIT_OK)
      rc = EXIT_USAGE;
    free(bufs[i].data);
  }
  return rc;
}

int cli_run(int argc, char **argv) {
  RunOptions o = {0};
  char msg[RUN_MESSAGE_BYTES];
  RunParse parsed = run_parse_options(argc, argv, &o, msg, sizeof msg);
  int rc = EXIT_USAGE;
  if (parsed == RUN_PARSE_HELP) {
    fputs(run_usage, stdout);
    rc = EXIT_OK;
  } else if (parsed == RUN_PARSE_USAGE) {
    run_usage_error("%s", msg);
  } else {
    size_t len;
    char *src = cli_read_source(o.file, &len);
    if (src) {
      const char *dirs[CLI_MAX_INCLUDE_DIRS + CLI_DEFAULT_INCLUDE_DIRS];
      char exe_dir[CLI_EXE_DIR_BYTES];
      tc_options opt = {.kernel = o.kernel, .defines = o.defines, .ndefines = o.ndefines, .no_opt = o.no_opt,
                        .include_dirs = dirs, .ninclude_dirs = cli_include_dirs(o.include_dirs, o.ninclude_dirs, dirs, exe_dir)};
      tc_compilation *c = tc_compile(o.file, src, len, &opt);
      free(src);
      if (!c) {
        rc = run_usage_error("out of memory%s", "");
      } else if (tc_error_count(c)) {
        cli_print_diagnostics(stderr, tc_diagnostics(c), cli_color_wanted(CLI_COLOR_AUTO, stderr));
        rc = EXIT_SOURCE_ERROR;
      } else if (tc_kernel_count(c) == 0) {
        rc = run_usage_error("the file has no kernel to run%s", "");
      } else if (tc_kernel_count(c) != 1) {
        rc = run_usage_error("the file has several kernels; choose one with -k%s", "");
      } else {
        rc = run_kernel(&o, c, 0);
      }
      tc_free(c);
    }
  }
  run_options_free(&o);
  return rc;
}
