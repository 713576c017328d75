/* run.c - `tilec run`: compile one kernel and run it in the interpreter on
 * inputs given on the command line (numbers, random or zero buffers, raw
 * binary files), then summarize or dump the buffers.
 *
 *   tilec run add.tile -k add --grid 4 --arg z=zeros:1000 --arg x=rand:1000 \
 *         --arg y=file:y.bin --arg n=1000 --seed 7 --dump out/
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../numeric/numeric.h"
#include "cli.h"

/* Most kernel parameters `tilec run` handles. */
#define RUN_MAX_PARAMS 64

static const char run_usage[] =
    "usage: tilec run FILE.tile -k KERNEL --grid X[,Y[,Z]] [--arg NAME=VALUE]... [options]\n"
    "\n"
    "Runs a kernel in the interpreter. Every runtime parameter needs an --arg:\n"
    "  scalars:      a number (or true/false)                  --arg n=1000\n"
    "  pointers:     rand:N  uniform in [-1, 1) (signed integers: [-100, 100), unsigned: [0, 200))\n"
    "                zeros:N  range:N (0, 1, 2, ...)  file:PATH (raw little-endian data)\n"
    "  descriptors:  the same with a shape, e.g. rand:128x64 (row-major)\n"
    "options:\n"
    "  -D NAME=VALUE      const parameter value (repeatable)\n"
    "  --seed N           seed for rand: buffers (default 1)\n"
    "  --dump DIR         write every buffer to DIR/NAME.bin after the run\n"
    "  --max-steps N      stop after N element operations (default: the interpreter's limit)\n"
    "  -O0                run the unoptimized IR (every load and division is executed and checked,\n"
    "                     also those whose results are unused)\n"
    "Prints one summary line per buffer (min, max, mean, NaN count).\n";

typedef struct RunArg {
  const char *name, *spec;
} RunArg;

typedef struct Buffer {
  void *data;
  size_t bytes;
  int64_t n;
  int64_t shape[4];
  int rank;
} Buffer;

typedef struct RunOptions {
  const char *file, *kernel, *dump;
  int64_t grid[3];
  uint64_t seed, max_steps;
  bool no_opt;
  tc_define defines[CLI_MAX_DEFINES];
  int ndefines;
  RunArg args[RUN_MAX_PARAMS];
  int nargs;
} RunOptions;

static int run_usage_error(const char *msg, const char *arg) {
  fprintf(stderr, "tilec run: ");
  fprintf(stderr, msg, arg);
  fprintf(stderr, "\n(run 'tilec run --help' for usage)\n");
  return EXIT_USAGE;
}

static bool parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (end == s || *end || errno || s[0] == '-') return false;
  *out = v;
  return true;
}

static bool parse_grid(const char *s, int64_t grid[3]) {
  grid[0] = grid[1] = grid[2] = 1;
  for (int i = 0; i < 3; i++) {
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

static int parse_run_options(int argc, char **argv, RunOptions *o) {
  o->seed = 1;
  o->grid[0] = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(run_usage, stdout);
      return EXIT_OK;
    }
    bool takes = !strcmp(a, "-k") || !strcmp(a, "--kernel") || !strcmp(a, "--grid") || !strcmp(a, "--arg") ||
                 !strcmp(a, "--seed") || !strcmp(a, "--dump") || !strcmp(a, "-D") || !strcmp(a, "--max-steps");
    if (takes && !v) return run_usage_error("option '%s' needs an argument", a);
    if (takes) i++;
    if (!strcmp(a, "-k") || !strcmp(a, "--kernel")) o->kernel = v;
    else if (!strcmp(a, "--grid")) {
      if (!parse_grid(v, o->grid)) return run_usage_error("--grid needs X[,Y[,Z]] with positive sizes, got '%s'", v);
    } else if (!strcmp(a, "--seed")) {
      if (!parse_u64(v, &o->seed)) return run_usage_error("--seed needs a non-negative integer, got '%s'", v);
    } else if (!strcmp(a, "--max-steps")) {
      if (!parse_u64(v, &o->max_steps) || !o->max_steps) return run_usage_error("--max-steps needs a positive integer, got '%s'", v);
    } else if (!strcmp(a, "--dump")) o->dump = v;
    else if (!strcmp(a, "-O0")) o->no_opt = true;
    else if (!strcmp(a, "-D") || (!strncmp(a, "-D", 2) && a[2])) {
      const char *d = a[2] ? a + 2 : v;
      if (o->ndefines == CLI_MAX_DEFINES || !cli_parse_define(d, &o->defines[o->ndefines]))
        return run_usage_error("-D needs NAME=VALUE, got '%s'", d);
      o->ndefines++;
    } else if (!strcmp(a, "--arg")) {
      const char *eq = strchr(v, '=');
      if (!eq || eq == v || o->nargs == RUN_MAX_PARAMS) return run_usage_error("--arg needs NAME=VALUE, got '%s'", v);
      o->args[o->nargs].name = strndup(v, (size_t)(eq - v));
      o->args[o->nargs++].spec = eq + 1;
    } else if (a[0] == '-' && a[1]) return run_usage_error("unknown option '%s'", a);
    else if (o->file) return run_usage_error("more than one input file ('%s')", a);
    else o->file = a;
  }
  if (!o->file) return run_usage_error("no input file%s", "");
  if (!o->grid[0]) return run_usage_error("--grid is required%s", "");
  return -1;
}

/* splitmix64: a small, good, seedable generator for test inputs. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Parses "N" or "AxBxC" into a shape. */
static bool parse_shape(const char *s, Buffer *b) {
  b->rank = 0;
  b->n = 1;
  while (b->rank < 4) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno || v < 1 || v > (1LL << 40)) return false;
    b->shape[b->rank++] = v;
    b->n *= v;
    if (!*end) return b->n <= (1LL << 40);
    if (*end != 'x') return false;
    s = end + 1;
  }
  return false;
}

static bool fill_buffer(const char *spec, const tc_param *p, uint64_t *rng, Buffer *b) {
  ScalarKind k = scalar_from_name(p->elem, strlen(p->elem));
  const char *colon = strchr(spec, ':');
  if (!colon) return false;
  size_t kl = (size_t)(colon - spec);
  if (kl == 4 && !strncmp(spec, "file", 4)) {
    size_t len;
    char *data = cli_read_file(colon + 1, &len);
    if (!data) return false;
    b->data = data;
    b->bytes = len;
    b->n = (int64_t)(len / (size_t)p->elem_bytes);
    b->rank = 1;
    b->shape[0] = b->n;
    return true;
  }
  if (!parse_shape(colon + 1, b)) return false;
  b->bytes = (size_t)b->n * (size_t)p->elem_bytes;
  b->data = calloc(b->bytes ? b->bytes : 1, 1);
  if (!b->data) return false;
  bool rnd = kl == 4 && !strncmp(spec, "rand", 4), rng_range = kl == 5 && !strncmp(spec, "range", 5);
  if (!rnd && !rng_range && !(kl == 5 && !strncmp(spec, "zeros", 5))) return false;
  for (int64_t i = 0; i < b->n && (rnd || rng_range); i++) {
    double v = rng_range ? (double)i : 0;
    if (rnd) {
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

static bool set_scalar(const char *spec, const tc_param *p, tc_arg *a) {
  char *end;
  errno = 0;
  if (p->kind == TC_PARAM_BOOL) {
    if (!strcmp(spec, "true") || !strcmp(spec, "1")) a->i = 1;
    else if (!strcmp(spec, "false") || !strcmp(spec, "0")) a->i = 0;
    else return false;
    return true;
  }
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

static void summarize(const char *name, const tc_param *p, const Buffer *b) {
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

static bool dump_buffer(const char *dir, const char *name, const Buffer *b) {
  mkdir(dir, 0777);
  size_t len = strlen(dir) + strlen(name) + 8;
  char *path = malloc(len);
  snprintf(path, len, "%s/%s.bin", dir, name);
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(b->data, 1, b->bytes, f) == b->bytes;
  if (f) ok &= fclose(f) == 0;
  if (!ok) fprintf(stderr, "tilec run: cannot write '%s'\n", path);
  free(path);
  return ok;
}

static const char *find_arg(const RunOptions *o, const char *name) {
  for (int i = 0; i < o->nargs; i++)
    if (!strcmp(o->args[i].name, name)) return o->args[i].spec;
  return NULL;
}

/* Builds the arguments, runs, reports. */
static int run_kernel(const RunOptions *o, tc_compilation *c, int k) {
  int n = tc_param_count(c, k);
  if (n > RUN_MAX_PARAMS) return run_usage_error("kernels with more than 64 parameters are not supported%s", "");
  tc_arg args[RUN_MAX_PARAMS] = {0};
  Buffer bufs[RUN_MAX_PARAMS] = {0};
  tc_buffer tb[RUN_MAX_PARAMS];
  int nbufs = 0, rc = EXIT_OK;
  uint64_t rng = o->seed;
  for (int a = 0; a < o->nargs; a++) {
    bool known = false;
    for (int i = 0; i < n; i++) known |= !strcmp(tc_param_get(c, k, i).name, o->args[a].name);
    if (!known) return run_usage_error("kernel has no runtime parameter '%s'", o->args[a].name);
  }
  for (int i = 0; i < n && rc == EXIT_OK; i++) {
    tc_param p = tc_param_get(c, k, i);
    const char *spec = find_arg(o, p.name);
    if (!spec) {
      rc = run_usage_error("missing --arg for parameter '%s'", p.name);
    } else if (p.kind == TC_PARAM_PTR || p.kind == TC_PARAM_DESC) {
      if (!fill_buffer(spec, &p, &rng, &bufs[i]) || (p.kind == TC_PARAM_DESC && bufs[i].rank != p.desc_rank)) {
        rc = run_usage_error("bad buffer for '%s' (expected rand:N, zeros:N, range:N or file:PATH; descriptors need "
                             "a shape of their rank, e.g. rand:64x32)", p.name);
        continue;
      }
      args[i].p = bufs[i].data;
      for (int d = bufs[i].rank - 1, stride = 1; d >= 0; d--) {
        args[i].shape[d] = bufs[i].shape[d];
        args[i].strides[d] = stride;
        stride *= (int)bufs[i].shape[d];
      }
      tb[nbufs++] = (tc_buffer){bufs[i].data, bufs[i].bytes, p.name};
    } else if (!set_scalar(spec, &p, &args[i])) {
      rc = run_usage_error("bad value for scalar parameter '%s'", p.name);
    }
  }
  if (rc == EXIT_OK) {
    char *err = NULL;
    if (!tc_interpret(c, k, o->grid, args, n, tb, nbufs, o->max_steps, &err)) {
      fprintf(stderr, "%s\n", err ? err : "tilec run: the run failed");
      rc = EXIT_SOURCE_ERROR;
    } else {
      for (int i = 0; i < n; i++) {
        tc_param p = tc_param_get(c, k, i);
        if (bufs[i].data) summarize(p.name, &p, &bufs[i]);
      }
    }
    free(err);
  }
  for (int i = 0; i < n; i++) {
    if (rc == EXIT_OK && bufs[i].data && o->dump && !dump_buffer(o->dump, tc_param_get(c, k, i).name, &bufs[i]))
      rc = EXIT_USAGE;
    free(bufs[i].data);
  }
  return rc;
}

int cli_run(int argc, char **argv) {
  RunOptions o = {0};
  int rc = parse_run_options(argc, argv, &o);
  if (rc < 0) {
    size_t len;
    char *src = cli_read_file(o.file, &len);
    rc = EXIT_USAGE;
    if (src) {
      tc_options opt = {o.kernel, o.defines, o.ndefines, o.no_opt, false};
      tc_compilation *c = tc_compile(o.file, src, len, &opt);
      free(src);
      if (tc_error_count(c)) {
        fputs(tc_diagnostics(c), stderr);
        rc = EXIT_SOURCE_ERROR;
      } else if (tc_kernel_count(c) != 1) {
        rc = run_usage_error("the file has several kernels; choose one with -k%s", "");
      } else {
        rc = run_kernel(&o, c, 0);
      }
      tc_free(c);
    }
  }
  for (int i = 0; i < o.nargs; i++) free((char *)o.args[i].name);
  for (int i = 0; i < o.ndefines; i++) free((char *)o.defines[i].name);
  return rc;
}
