/* gen_run.c - running generated kernels: the initial contents of their
 * buffers, the interpreter run, the comparison of two runs' buffers by
 * each buffer's tag, and a text description of a kernel's parameters.
 *
 * Element values are encoded with the compiler's numeric.h (tested
 * against independent references in test_numeric.c); random bit patterns
 * are written raw, so NaN payloads and i1 bytes other than 0 and 1 reach
 * the kernels as they are.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"
#include "numeric/numeric.h"

/* Share of the elements of a KG_FILL_SPECIAL buffer taken from the table
 * of boundary values (the rest are random bit patterns), in percent. */
#define SPECIAL_TABLE_PERCENT 50
/* Differing elements quoted in a KgDiff's detail. */
#define DIFF_QUOTED 4

/* A small deterministic generator for buffer contents (xorshift64*). */
typedef struct FillRng {
  uint64_t s;
} FillRng;

static uint64_t fill_next(FillRng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 0x2545F4914F6CDD1DULL;
}

static double fill_unit(FillRng *r) { return (double)(fill_next(r) >> 11) * 0x1p-53; }

size_t kg_elem_bytes(const char *elem) {
  ScalarKind k = scalar_from_name(elem, strlen(elem));
  return k == SK_VOID ? 0 : (size_t)scalar_bytes(k);
}

size_t kg_param_bytes(const KgParam *p) { return p->role == KG_SCALAR ? 0 : p->length * kg_elem_bytes(p->elem); }

static void put_bits(void *at, uint64_t bits, size_t bytes) {
  for (size_t b = 0; b < bytes; b++) ((unsigned char *)at)[b] = (unsigned char)(bits >> (8 * b));
}

static uint64_t get_bits(const void *at, size_t bytes) {
  uint64_t v = 0;
  for (size_t b = 0; b < bytes; b++) v |= (uint64_t)((const unsigned char *)at)[b] << (8 * b);
  return v;
}

/* A boundary value of kind k (floats: NaN, infinities, zeros, the largest
 * and smallest values; integers: 0, 1, -1, MIN, MAX and their neighbours). */
static Slot special_value(FillRng *r, ScalarKind k) {
  int i = (int)(fill_next(r) % 12);
  if (scalar_is_float(k)) {
    double max = num_float_max(k), tiny = k == SK_F64 ? 0x1p-1074 : k == SK_F32 ? 0x1p-149 : 0x1p-24;
    static const double plain[] = {0.0, -0.0, 1.0, -1.0, 0.5, 1.0 + 0x1p-8};
    double v = i < 6 ? plain[i] : i == 6 ? NAN : i == 7 ? INFINITY : i == 8 ? -INFINITY : i == 9 ? max : i == 10 ? -max : tiny;
    return (Slot){.f = num_round_float(v, k)};
  }
  int bits = scalar_bits(k);
  uint64_t max = bits == 64 ? UINT64_MAX : (1ULL << bits) - 1;
  uint64_t smin = scalar_is_signed(k) ? 1ULL << (bits - 1) : 0, smax = scalar_is_signed(k) ? smin - 1 : max;
  static const int64_t plain[] = {0, 1, -1, 2, -2, 7};
  uint64_t v = i < 6 ? (uint64_t)plain[i] : i == 6 ? smin : i == 7 ? smax : i == 8 ? smin + 1 : i == 9 ? smax - 1 : i == 10 ? 255 : 65535;
  return num_wrap_int(v, k);
}

void kg_fill(const KgParam *p, void *data, uint64_t seed) {
  ScalarKind k = scalar_from_name(p->elem, strlen(p->elem));
  size_t eb = kg_elem_bytes(p->elem);
  FillRng r = {seed | 1};
  for (size_t i = 0; i < p->length; i++) {
    char *at = (char *)data + i * eb;
    switch (p->fill) {
    case KG_FILL_RANGE: {
      double v = p->lo + (p->hi - p->lo) * fill_unit(&r);
      if (scalar_is_float(k)) num_store(at, (Slot){.f = num_round_float(v, k)}, k);
      else num_store(at, num_wrap_int((uint64_t)(int64_t)floor(v), k), k);
      break;
    }
    case KG_FILL_SPECIAL:
      if ((int)(fill_next(&r) % 100) < SPECIAL_TABLE_PERCENT) num_store(at, special_value(&r, k), k);
      else put_bits(at, fill_next(&r), eb);
      break;
    case KG_FILL_BYTES: put_bits(at, fill_next(&r), eb); break;
    case KG_FILL_POISON:
      if (scalar_is_float(k)) num_store(at, (Slot){.f = NAN}, k);
      else memset(at, 0x5A, eb);
      break;
    case KG_FILL_NONE: memset(at, 0, eb); break;
    }
  }
}

void kg_buffers_alloc(const KgKernel *k, uint64_t seed, void *data[KG_MAX_PARAMS]) {
  for (int i = 0; i < KG_MAX_PARAMS; i++) data[i] = NULL;
  for (int i = 0; i < k->nparams; i++) {
    if (k->params[i].role == KG_SCALAR) continue;
    size_t bytes = kg_param_bytes(&k->params[i]);
    data[i] = malloc(bytes ? bytes : 1);
    if (!data[i]) abort();
    kg_fill(&k->params[i], data[i], seed * 0x9E3779B97F4A7C15ULL + (uint64_t)i * 0xD1B54A32D192ED03ULL);
  }
}

void kg_buffers_free(const KgKernel *k, void *data[KG_MAX_PARAMS]) {
  for (int i = 0; i < k->nparams && i < KG_MAX_PARAMS; i++) {
    free(data[i]);
    data[i] = NULL;
  }
}

/* ---- comparison ---- */

static bool within(const KgParam *p, double want, double got) {
  if (p->cmp != KG_CMP_TOLERANCE || isnan(want) || isnan(got) || isinf(want) || isinf(got)) return false;
  return fabs(got - want) <= p->atol + p->rtol * fabs(want);
}

KgVerdict kg_compare(const KgParam *p, const void *want, const void *got, KgDiff *d) {
  ScalarKind k = scalar_from_name(p->elem, strlen(p->elem));
  size_t eb = kg_elem_bytes(p->elem);
  bool is_float = scalar_is_float(k);
  memset(d, 0, sizeof *d);
  int quoted = 0, len = 0;
  for (size_t i = 0; i < p->length; i++) {
    uint64_t a = get_bits((const char *)want + i * eb, eb), b = get_bits((const char *)got + i * eb, eb);
    if (a == b) continue;
    double fa = 0, fb = 0;
    if (is_float) {
      fa = num_decode(a, k).f, fb = num_decode(b, k).f;
      if (isnan(fa) && isnan(fb)) continue; /* NaN bits are unspecified */
    }
    bool ok = is_float && within(p, fa, fb);
    if (!d->differing++ || (!ok && !d->beyond)) d->first = i;
    if (!ok) d->beyond++;
    if ((!ok || !d->beyond) && quoted < DIFF_QUOTED && len < (int)sizeof d->detail - 100) {
      quoted++;
      if (is_float)
        len += snprintf(d->detail + len, sizeof d->detail - (size_t)len, "  [%zu] interp %.9g (0x%llx), other %.9g (0x%llx)%s\n",
                        i, fa, (unsigned long long)a, fb, (unsigned long long)b, ok ? " within tolerance" : "");
      else
        len += snprintf(d->detail + len, sizeof d->detail - (size_t)len, "  [%zu] interp 0x%llx, other 0x%llx\n", i,
                        (unsigned long long)a, (unsigned long long)b);
    }
  }
  return d->beyond ? KG_DIFFERENT : d->differing ? KG_EXPLAINED : KG_SAME;
}

/* ---- the interpreter ---- */

static int param_index(const KgKernel *k, const char *name) {
  for (int i = 0; i < k->nparams; i++)
    if (!strcmp(k->params[i].name, name)) return i;
  return -1;
}

bool kg_interpret(const tc_compilation *c, const KgKernel *k, void *const data[KG_MAX_PARAMS], uint64_t max_steps,
                  char **error) {
  *error = NULL;
  int ki = tc_kernel_find(c, k->name);
  if (ki < 0) {
    *error = txt_fmt("no kernel '%s' in the compilation", k->name);
    return false;
  }
  tc_arg args[KG_MAX_PARAMS];
  tc_buffer bufs[KG_MAX_PARAMS];
  int n = tc_param_count(c, ki), nb = 0;
  if (n > KG_MAX_PARAMS) n = KG_MAX_PARAMS;
  for (int j = 0; j < n; j++) {
    tc_param tp = tc_param_get(c, ki, j);
    int i = param_index(k, tp.name);
    memset(&args[j], 0, sizeof args[j]);
    if (i < 0) {
      *error = txt_fmt("kernel '%s': parameter '%s' is not in the description", k->name, tp.name);
      return false;
    }
    const KgParam *p = &k->params[i];
    if (tp.kind == TC_PARAM_PTR) {
      args[j].p = data[i];
      bufs[nb++] = (tc_buffer){data[i], kg_param_bytes(p), p->name};
    } else if (tp.kind == TC_PARAM_FLOAT) {
      args[j].f = p->fvalue;
    } else {
      args[j].i = p->ivalue;
    }
  }
  return tc_interpret(c, ki, k->grid, args, n, bufs, nb, max_steps, error);
}

/* ---- the optimizer: -O0 against the default passes ---- */

static tc_compilation *compile_mode(const char *src, size_t len, bool no_opt) {
  tc_options opt = {0};
  opt.no_opt = no_opt;
  return tc_compile("gen.tile", src, len, &opt);
}

int kg_compare_opt(const char *src, size_t len, const KgKernel *k, uint64_t seed, uint64_t max_steps, char *msg,
                   size_t size) {
  tc_compilation *c[2] = {compile_mode(src, len, true), compile_mode(src, len, false)};
  void *data[2][KG_MAX_PARAMS];
  kg_buffers_alloc(k, seed, data[0]);
  kg_buffers_alloc(k, seed, data[1]);
  int differing = 0;
  size_t at = 0;
  msg[0] = 0;
  for (int m = 0; m < 2 && differing >= 0; m++) {
    char *err = NULL;
    if (tc_error_count(c[m])) {
      snprintf(msg, size, "%s rejected it:\n%s", m ? "the optimizing compile" : "-O0", tc_diagnostics(c[m]));
      differing = -1;
    } else if (!kg_interpret(c[m], k, data[m], max_steps, &err)) {
      snprintf(msg, size, "the run %s failed: %s", m ? "with the optimizer" : "at -O0", err);
      differing = -1;
    }
    free(err);
  }
  for (int i = 0; differing >= 0 && i < k->nparams; i++) {
    if (!data[0][i] || !memcmp(data[0][i], data[1][i], kg_param_bytes(&k->params[i]))) continue;
    KgParam exact = k->params[i];
    exact.cmp = KG_CMP_EXACT;
    KgDiff d;
    kg_compare(&exact, data[0][i], data[1][i], &d);
    if (at < size)
      at += (size_t)snprintf(msg + at, size - at, "%s: %zu elements differ (-O0 first, then optimized):\n%s",
                             k->params[i].name, d.differing, d.detail);
    differing++;
  }
  kg_buffers_free(k, data[0]);
  kg_buffers_free(k, data[1]);
  tc_free(c[0]);
  tc_free(c[1]);
  return differing;
}

bool kg_opt_still_differs(const char *source, size_t len, void *user) {
  const KgOptProbe *p = user;
  char msg[256];
  return kg_compare_opt(source, len, p->k, p->seed, p->max_steps, msg, sizeof msg) > 0;
}

/* ---- descriptions ---- */

char *kg_describe(const KgKernel *k) {
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "kernel %s grid [%lld, %lld, %lld] warps %d\n", k->name, (long long)k->grid[0], (long long)k->grid[1],
            (long long)k->grid[2], k->warps);
  static const char *const roles[] = {"input", "output", "accum", "scalar"};
  static const char *const fills[] = {"", "range", "special", "bytes", "poison"};
  for (int i = 0; i < k->nparams; i++) {
    const KgParam *p = &k->params[i];
    sb_printf(&sb, "  %s %s %s", p->name, roles[p->role], p->elem);
    if (p->role == KG_SCALAR) {
      if (!strncmp(p->elem, "f", 1) || !strcmp(p->elem, "bf16")) sb_printf(&sb, " = %.17g\n", p->fvalue);
      else if (p->elem[0] == 'u') sb_printf(&sb, " = %llu\n", (unsigned long long)p->ivalue);
      else sb_printf(&sb, " = %lld\n", (long long)p->ivalue);
      continue;
    }
    sb_printf(&sb, "[%zu] %s", p->length, fills[p->fill]);
    if (p->fill == KG_FILL_RANGE) sb_printf(&sb, "(%g, %g)", p->lo, p->hi);
    if (p->role != KG_INPUT) {
      if (p->cmp == KG_CMP_EXACT) sb_puts(&sb, ", exact");
      else sb_printf(&sb, ", rtol %.3g atol %.3g: %s", p->rtol, p->atol, p->why ? p->why : "");
    }
    sb_putc(&sb, '\n');
  }
  return sb_take(&sb);
}
