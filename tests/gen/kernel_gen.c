/* kernel_gen.c - random kernels: statements, kernels and programs.
 *
 * A kernel works on a main tile shape [R, C] over a small grid; program p
 * (p = program_id(0) + program_id(1) * num_programs(0)) reads input
 * buffers through index tiles whose ranges the generator knows, so every
 * address is inside its buffer or masked off, and writes each output
 * buffer in its own slice [p * E, (p + 1) * E), so no two programs (and no
 * two lanes) write the same element. Statements: lets of random
 * expressions, loads (contiguous, shared, wrapped, gathered, masked,
 * reversed, transposed, broadcast, scalar), stores (masked, converting),
 * atomics on integers, dot products, a store and a load of the same
 * memory, for loops with carried values (also with bounds near the
 * integer limits, where the spec says the loop stops before the next
 * value would overflow), counted while loops, if/else on scalars, and
 * calls of helper functions generated for their arguments.
 *
 * Each statement is one line (a block's header and closing brace are
 * lines of their own) and a line never depends on a later one, so that
 * kg_reduce can shrink a program by deleting lines. A store and the load
 * that reads it back share one line: deleting the store alone would leave
 * the load reading poison that the tags do not expect.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"

/* Statements of a loop or if body, at most (the kernel's budget counts
 * them too). */
#define GEN_BLOCK_STMTS 4
/* Loops and ifs nested in each other, at most. */
#define GEN_MAX_NEST 2
/* Iterations of a generated loop, at most: the interpreter runs every
 * program one after another, and each iteration costs a tile's worth of
 * operations. */
#define GEN_MAX_TRIPS 5
/* Every tolerance is this many times the computed bound: the bounds are
 * first-order (products of small errors are dropped). */
#define GEN_TOL_SAFETY 2.0
/* Parameters kept free for the loops' runtime bounds: memory statements
 * stop adding buffers before the last ones. */
#define GEN_PARAMS_RESERVE 8
/* Elements of a tile per warp of the kernel, at most: 32 per thread, so
 * that a tile of 64-bit values takes 64 of a thread's 255 registers. */
#define GEN_ELEMS_PER_WARP 1024
/* Values written by the final stores of a kernel, at most. */
#define GEN_FINAL_STORES 4

/* ---- random numbers: PCG32 (deterministic on every platform) ---- */

uint32_t rnd_u32(Gen *g) {
  uint64_t old = g->rng;
  g->rng = old * 6364136223846793005ULL + 1442695040888963407ULL;
  uint32_t x = (uint32_t)(((old >> 18u) ^ old) >> 27u), rot = (uint32_t)(old >> 59u);
  return (x >> rot) | (x << ((-rot) & 31u));
}

int rnd_below(Gen *g, int n) { return n <= 1 ? 0 : (int)(rnd_u32(g) % (uint32_t)n); }
bool rnd_chance(Gen *g, int percent) { return rnd_below(g, 100) < percent; }

int rnd_weighted(Gen *g, const int *weights, int n) {
  int total = 0;
  for (int i = 0; i < n; i++) total += weights[i];
  if (total <= 0) return 0;
  int x = rnd_below(g, total);
  for (int i = 0; i < n; i++) {
    if (x < weights[i]) return i;
    x -= weights[i];
  }
  return n - 1;
}

int rnd_elem_in(Gen *g, uint32_t set) {
  int n = 0;
  for (int e = 0; e < E_COUNT; e++) n += (set >> e) & 1;
  if (!n) return -1;
  int k = rnd_below(g, n);
  for (int e = 0; e < E_COUNT; e++)
    if (((set >> e) & 1) && k-- == 0) return e;
  return -1;
}

/* A 64-bit mix (the MurmurHash3 finalizer), for the seeds of kernels. */
static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

/* ---- text ---- */

char *txt_fmt(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) abort();
  va_end(ap);
  return s;
}

void txt_line(Gen *g, const char *fmt, ...) {
  for (int i = 0; i < g->depth; i++) sb_puts(g->out, "    ");
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(g->out, fmt, ap);
  va_end(ap);
  sb_putc(g->out, '\n');
}

/* ---- the pool of values in scope ---- */

static Val *pool_push(Gen *g, const char *name, Elem t, const Shape *s, const Info *info, unsigned flags) {
  if (g->npool >= GEN_MAX_POOL) return NULL;
  Val *v = &g->pool[g->npool++];
  memset(v, 0, sizeof *v);
  snprintf(v->name, sizeof v->name, "%s", name);
  v->t = t;
  v->s = *s;
  v->info = *info;
  v->depth = g->depth;
  v->flags = flags;
  return v;
}

/* Forgets the values of the blocks deeper than the current one. */
static void pool_pop(Gen *g) {
  while (g->npool > 0 && g->pool[g->npool - 1].depth > g->depth) g->npool--;
}

Val *bind_value(Gen *g, Expr *e, bool var) {
  char name[GEN_NAME_BYTES], buf[64];
  snprintf(name, sizeof name, "%s%d", var ? "a" : "v", g->next_name++);
  if (!var && rnd_chance(g, 12))
    txt_line(g, "let %s: %s%s = %s;", name, et_info[e->t].name, e->s.rank ? sh_text(&e->s, buf, sizeof buf) : "",
             e->text);
  else
    txt_line(g, "%s %s = %s;", var ? "var" : "let", name, e->text);
  Val *v = pool_push(g, name, e->t, &e->s, &e->info, var ? VAL_VAR : 0);
  xp_free(e);
  return v;
}

/* ---- parameters ---- */

static KgParam *add_param(Gen *g, const char *prefix, int *counter, KgRole role, Elem t) {
  KgParam *p = &g->k->params[g->k->nparams++];
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s%d", prefix, (*counter)++);
  p->role = role;
  p->elem = et_info[t].name;
  return p;
}

static bool memory_ok(const Gen *g) { return !g->in_helper && g->k->nparams < KG_MAX_PARAMS - GEN_PARAMS_RESERVE; }

/* A scalar kernel parameter with a value (integers: the bits); returns
 * its name. */
static const char *add_scalar(Gen *g, Elem t, int64_t ivalue, double fvalue) {
  KgParam *p = add_param(g, "s", &g->nscalar, KG_SCALAR, t);
  p->ivalue = ivalue;
  p->fvalue = fvalue;
  return p->name;
}

/* Element types of memory, by how often kernels use them. */
static Elem pick_mem_elem(Gen *g) {
  static const Elem elems[] = {E_F32, E_BF16, E_F16, E_I32, E_I8, E_U8, E_I64, E_U32, E_U16, E_I16, E_U64, E_F64,
                               E_F8E4M3, E_F8E5M2, E_I1};
  static const int weights[] = {22, 10, 8, 14, 6, 5, 5, 5, 3, 3, 3, 5, 4, 3, 4};
  for (;;) {
    Elem t = elems[rnd_weighted(g, weights, (int)(sizeof weights / sizeof weights[0]))];
    if (!et_is_fp8(t) || (g->cfg->features & KG_F_FP8)) return t;
  }
}

/* Initial contents of an input buffer, and what loads from it give. */
static Info set_fill(Gen *g, KgParam *p, Elem t, bool finite) {
  static const double float_ranges[][2] = {{-4, 4}, {-1, 1}, {0, 1}, {-100, 100}, {-0.01, 0.01}, {1, 2}, {-30, 30}};
  static const double int_ranges[][2] = {{-8, 8}, {0, 16}, {-100, 100}, {0, 255}, {-1000, 1000}, {-3, 3}};
  if (t == E_I1) {
    p->fill = KG_FILL_BYTES;
    return vi_exact(1, false);
  }
  bool special = !finite && rnd_chance(g, et_is_float(t) ? 20 : 35);
  if (special) {
    p->fill = KG_FILL_SPECIAL;
    Info r = vi_exact(0, et_is_float(t));
    vi_clamp(&r, t, et_info[t].max * 2, false);
    return r;
  }
  p->fill = KG_FILL_RANGE;
  for (;;) {
    const double *r = et_is_float(t) ? float_ranges[rnd_below(g, 7)] : int_ranges[rnd_below(g, 6)];
    if (r[0] < et_info[t].min || r[1] > et_info[t].max) continue;
    p->lo = r[0], p->hi = r[1];
    return vi_exact(fmax(fabs(r[0]), fabs(r[1])) * (1 + 0x1p-6), false);
  }
}

/* A shape for a new load or constant, around the kernel's main shape. */
static Shape pick_shape(Gen *g) {
  int R = g->base.d[0], C = g->base.d[1];
  for (;;) {
    Shape s;
    switch (rnd_below(g, 12)) {
    case 0: case 1: case 2: case 3: s = g->base; break;
    case 4: s = sh1(C); break;
    case 5: s = sh1(R); break;
    case 6: s = sh2(R, 1); break;
    case 7: s = sh2(1, C); break;
    case 8: s = sh_scalar(); break;
    case 9: s = sh2(C, R); break;
    case 10: s = sh2(1 << rnd_below(g, 7), 1 << rnd_below(g, 7)); break;
    default: s = (Shape){3, {2, 1 << rnd_below(g, 5), 1 << rnd_below(g, 6)}}; break;
    }
    if (sh_elems(&s) <= g->cfg->max_elems) return s;
  }
}

/* The index tile of shape s: a preamble name when there is one. */
static char *index_of(const Gen *g, const Shape *s) {
  if (!g->in_helper && sh_eq(s, &g->base)) return txt_fmt("rc");
  return sh_index(s);
}

/* An index tile (values 0..E-1) as an offset of a random integer type. */
static char *offset_of(Gen *g, const Shape *s) {
  char *idx = index_of(g, s), *r;
  int E = sh_elems(s), k = rnd_below(g, 20);
  if (k < 3) r = txt_fmt("(%s as i64)", idx);
  else if (k < 5) r = txt_fmt("(%s as u32)", idx);
  else if (k < 6 && E <= 32767) r = txt_fmt("(%s as i16)", idx);
  else if (k < 7 && E <= 256) r = txt_fmt("(%s as u8)", idx);
  else return idx;
  free(idx);
  return r;
}

/* An exact i1 value that broadcasts into s (for a mask), or NULL. */
static char *mask_into(Gen *g, const Shape *s) {
  Want w = want_any();
  w.elems = ES_BOOL;
  w.exact = true;
  w.into = s;
  Val *v = pool_pick(g, &w);
  if (v && rnd_chance(g, 60)) return txt_fmt("%s", v->name);
  if (s->rank == 0) return v ? txt_fmt("%s", v->name) : NULL;
  char *idx = index_of(g, s), *m = txt_fmt("%s < %d", idx, 1 + rnd_below(g, sh_elems(s)));
  free(idx);
  return m;
}

/* An exact integer value to index L elements with (d & (L - 1)): its
 * type must hold L - 1. NULL if there is none. */
static Val *index_value(Gen *g, int L) {
  Want w = want_any();
  w.elems = ES_INT;
  w.exact = true;
  Val *d = pool_pick(g, &w);
  return d && L - 1 <= et_info[d->t].max ? d : NULL;
}

/* The `other` of a masked load from a buffer of type t: a literal or an
 * exact value that converts to t without becoming approximate. */
static char *load_other(Gen *g, Elem t, const Shape *s, Info *info) {
  Want w = want_any();
  w.exact = true;
  w.into = s;
  w.elems = et_is_fp8(t) ? ES_ALL & ~ES(E_F64) : ES_ALL;
  Val *v = rnd_chance(g, 40) ? pool_pick(g, &w) : NULL;
  Info r;
  if (v && vi_convert(&v->info, v->t, t, &r) && !r.approx) {
    info->m = fmax(info->m, r.m);
    info->special |= r.special;
    return txt_fmt("%s", v->name);
  }
  Expr lit = make_literal(g, t, 0);
  info->m = fmax(info->m, et_literal_as(lit.lit_value, t));
  info->special |= lit.info.special;
  return lit.text;
}

/* The pointer tile of a load from buffer p in one of the access
 * patterns (sizing the buffer for it); may change the shape (a gather
 * takes its index's, a scalar load none) and set a mask. */
static char *load_pointer(Gen *g, KgParam *p, Shape *sp, char **mask) {
  Shape s = *sp;
  int E = sh_elems(&s), pattern = rnd_below(g, 10);
  bool masks = g->cfg->features & KG_F_MASKS;
  if (pattern == 4 && !masks) pattern = 0;
  char *ptr = NULL;
  if (pattern == 0) { /* this program's slice */
    char *off = offset_of(g, &s);
    p->length = (size_t)g->programs * (size_t)E;
    ptr = txt_fmt("%s + pid * %d + %s", p->name, E, off);
    free(off);
  } else if (pattern == 1 || pattern == 2) { /* shared by all programs; or wrapped around */
    char *idx = index_of(g, &s);
    if (pattern == 1) {
      p->length = (size_t)E;
      ptr = txt_fmt("%s + %s", p->name, idx);
    } else {
      int L = E << rnd_below(g, 3);
      p->length = (size_t)L;
      ptr = txt_fmt("%s + ((%s * %d + pid * %d) & %d)", p->name, idx, 1 + 2 * rnd_below(g, 50), rnd_below(g, 1000),
                     L - 1);
    }
    free(idx);
  } else if (pattern == 3) { /* gathered through data: (d & (L - 1)) */
    int L = 16 << rnd_below(g, 4);
    Val *d = index_value(g, L);
    if (!d) {
      L = E;
      char *idx = index_of(g, &s);
      ptr = txt_fmt("%s + %s", p->name, idx);
      free(idx);
    } else {
      s = d->s;
      ptr = txt_fmt("%s + (%s & %d)", p->name, d->name, L - 1);
    }
    p->length = (size_t)L;
  } else if (pattern == 4 && s.rank > 0) { /* shifted past the end, masked */
    char *idx = index_of(g, &s);
    int D = 1 + rnd_below(g, E);
    p->length = (size_t)E;
    ptr = txt_fmt("%s + (%s + %d)", p->name, idx, D);
    *mask = txt_fmt("%s + %d < %d", idx, D, E);
    free(idx);
  } else if (pattern == 5 && s.rank > 0) { /* reversed, through pointer subtraction */
    char *idx = index_of(g, &s);
    p->length = (size_t)E;
    ptr = txt_fmt("(%s + %d) - (%s + 1)", p->name, E, idx);
    free(idx);
  } else if (pattern == 6 && s.rank == 2) { /* column-major */
    p->length = (size_t)E;
    ptr = txt_fmt("%s + (arange(0, %d)[:, None] + arange(0, %d)[None, :] * %d)", p->name, s.d[0], s.d[1], s.d[0]);
  } else if (pattern == 7 && s.rank == 2 && s.d[1] > 1 && masks) { /* a column of pointers, broadcast by the mask */
    p->length = (size_t)g->programs * (size_t)s.d[0];
    ptr = txt_fmt("%s + pid * %d + arange(0, %d)[:, None]", p->name, s.d[0], s.d[0]);
    *mask = txt_fmt("arange(0, %d)[None, :] < %d", s.d[1], 1 + rnd_below(g, s.d[1]));
  } else { /* a scalar */
    s = sh_scalar();
    int K = rnd_below(g, 8);
    p->length = rnd_chance(g, 50) ? (size_t)g->programs : (size_t)K + 1;
    ptr = p->length == (size_t)K + 1 ? txt_fmt("%s + %d", p->name, K) : txt_fmt("%s + pid", p->name);
  }
  *sp = s;
  return ptr;
}

/* `let v = load(...)`: every address in bounds or masked off. */
static bool gen_load(Gen *g) {
  if (!memory_ok(g)) return false;
  Elem t = pick_mem_elem(g);
  Shape s = pick_shape(g);
  KgParam *p = add_param(g, "in", &g->nin, KG_INPUT, t);
  Info info = set_fill(g, p, t, false);
  char *mask = NULL, *ptr = load_pointer(g, p, &s, &mask);
  if (!mask && (g->cfg->features & KG_F_MASKS) && rnd_chance(g, 20)) mask = mask_into(g, &s);
  Expr e = {0};
  if (mask && rnd_chance(g, 75)) {
    char *other = load_other(g, t, &s, &info);
    e.text = rnd_chance(g, 20) ? txt_fmt("load(%s, mask = %s, other = %s)", ptr, mask, other)
                               : txt_fmt("load(%s, %s, %s)", ptr, mask, other);
    free(other);
  } else if (mask) {
    e.text = txt_fmt("load(%s, %s)", ptr, mask);
  } else {
    e.text = txt_fmt("load(%s)", ptr);
  }
  free(ptr), free(mask);
  e.t = t;
  e.s = s;
  e.info = info;
  Val *v = bind_value(g, &e, false);
  if (v) v->flags |= VAL_LOADED;
  return true;
}

/* The tag of an output written with value info `v`. */
static void set_tag(KgParam *p, const Info *v, Elem t) {
  p->fill = KG_FILL_POISON;
  if (!v->approx) {
    p->cmp = KG_CMP_EXACT;
    return;
  }
  p->cmp = KG_CMP_TOLERANCE;
  p->rtol = GEN_TOL_SAFETY * v->rerr;
  p->atol = GEN_TOL_SAFETY * v->aerr + 2 * et_info[t].tiny;
  p->why = v->why;
}

/* A value to store: one not stored yet if possible. */
static Val *store_candidate(Gen *g) {
  for (int i = g->npool - 1; i >= 0 && rnd_chance(g, 85); i--)
    if (!(g->pool[i].flags & (VAL_STORED | VAL_INDEX)) && (!(g->pool[i].flags & VAL_LOADED) || rnd_chance(g, 30)))
      return &g->pool[i];
  Want w = want_any();
  return pool_pick(g, &w);
}

/* The helper every store through a helper goes to (one per kernel). */
static void need_store_helper(Gen *g) {
  if (g->have_put) return;
  sb_printf(g->helpers, "fn %s_put(p, o, v, m) {\n    store(p + o, v, m);\n}\n", g->k->name);
  g->have_put = true;
}

/* store(out + pid * E + idx, v [, mask]): this program's own slice. */
static bool gen_store(Gen *g, Val *v) {
  if (!memory_ok(g) || !(v = v ? v : store_candidate(g))) return false;
  Elem t = v->t;
  Info conv = v->info;
  if (rnd_chance(g, 25)) {
    Elem t2 = (Elem)rnd_elem_in(g, g->cfg->features & KG_F_FP8 ? ES_ALL : ES_ALL & ~ES_FP8);
    Info c2;
    if (vi_convert(&v->info, v->t, t2, &c2) && (!v->info.approx || et_is_float(t2))) t = t2, conv = c2;
  }
  Shape s = v->s;
  if (rnd_chance(g, 15) && sh_broadcasts_to(&v->s, &g->base)) s = g->base;
  int E = sh_elems(&s);
  KgParam *p = add_param(g, "out", &g->nout, KG_OUTPUT, t);
  p->length = (size_t)g->programs * (size_t)E;
  set_tag(p, &conv, t);
  char *off = offset_of(g, &s);
  char *mask = (g->cfg->features & KG_F_MASKS) && rnd_chance(g, 25) ? mask_into(g, &s) : NULL;
  if (rnd_chance(g, 8) && (g->cfg->features & KG_F_HELPERS)) {
    need_store_helper(g);
    txt_line(g, "%s_put(%s + pid * %d, %s, %s, %s);", g->k->name, p->name, E, off, v->name, mask ? mask : "true");
  } else if (mask) {
    if (rnd_chance(g, 20)) txt_line(g, "store(%s + pid * %d + %s, value = %s, mask = %s);", p->name, E, off, v->name, mask);
    else txt_line(g, "store(%s + pid * %d + %s, %s, %s);", p->name, E, off, v->name, mask);
  } else {
    txt_line(g, "store(%s + pid * %d + %s, %s);", p->name, E, off, v->name);
  }
  free(off), free(mask);
  v->flags |= VAL_STORED;
  return true;
}

/* Atomics on integers: either many lanes and programs on few addresses
 * (add, max, min, and, or, xor: the result does not depend on the order)
 * without using the old values, or each lane on its own address, where
 * the old values are defined and used. */
static bool gen_atomic(Gen *g) {
  if (!memory_ok(g)) return false;
  static const Elem types[] = {E_I32, E_U32, E_I64, E_U64};
  static const char *const ops[] = {"add", "max", "min", "and", "or", "xor", "xchg", "cas"};
  Elem t = types[rnd_below(g, 4)];
  bool unique = rnd_chance(g, 35);
  int op = rnd_below(g, unique ? 8 : 6);
  KgParam *p = add_param(g, "acc", &g->nacc, KG_ACCUM, t);
  p->cmp = KG_CMP_EXACT;
  Info filled = set_fill(g, p, t, op < 3);
  char *ptr;
  Shape s;
  if (unique) {
    s = pick_shape(g);
    char *off = offset_of(g, &s);
    p->length = (size_t)g->programs * (size_t)sh_elems(&s);
    ptr = txt_fmt("%s + pid * %d + %s", p->name, sh_elems(&s), off);
    free(off);
  } else {
    int L = 4 << rnd_below(g, 4);
    Val *d = index_value(g, L);
    if (!d) {
      s = g->base;
      ptr = txt_fmt("%s + (rc & %d)", p->name, L - 1);
    } else {
      s = d->s;
      ptr = txt_fmt("%s + (%s & %d)", p->name, d->name, L - 1);
    }
    p->length = (size_t)L;
  }
  Want wv = want_any();
  wv.exact = true;
  wv.into = &s;
  wv.elems = ES_INT | ES_BOOL | (rnd_chance(g, 20) ? ES_FARITH : 0);
  Val *v = pool_pick(g, &wv);
  Expr lit = make_literal(g, t, 0);
  const char *value = v && rnd_chance(g, 70) ? v->name : lit.text;
  char *mask = (g->cfg->features & KG_F_MASKS) && rnd_chance(g, 30) ? mask_into(g, &s) : NULL;
  char *args = op == 7 ? txt_fmt("%s, %s, %s", ptr, lit.text, value) : txt_fmt("%s, %s", ptr, value);
  char *call = mask ? txt_fmt("atomic_%s(%s, %s)", ops[op], args, mask) : txt_fmt("atomic_%s(%s)", ops[op], args);
  if (unique) {
    Expr e = {call, t, s, filled, false, false, 0};
    vi_clamp(&e.info, t, et_info[t].max * 2, false);
    bind_value(g, &e, false);
  } else {
    txt_line(g, "%s;", call);
    free(call);
  }
  free(ptr), free(mask), free(args), xp_free(&lit);
  return true;
}

/* A value stored to a scratch buffer and read back transposed or
 * reversed, on one line (semantics.md, Memory: a load sees the stores of
 * its program). */
static bool gen_scratch(Gen *g) {
  if (!memory_ok(g)) return false;
  Want w = want_any();
  w.min_rank = 1;
  w.max_rank = 2;
  Val *v = pool_pick(g, &w);
  if (!v) return false;
  Shape s = v->s, rs = s;
  int E = sh_elems(&s);
  KgParam *p = add_param(g, "tmp", &g->ntmp, KG_OUTPUT, v->t);
  p->length = (size_t)g->programs * (size_t)E;
  set_tag(p, &v->info, v->t);
  char *idx = index_of(g, &s), *back, name[GEN_NAME_BYTES];
  if (s.rank == 2) {
    rs = sh2(s.d[1], s.d[0]);
    back = txt_fmt("(arange(0, %d)[:, None] + arange(0, %d)[None, :] * %d)", s.d[1], s.d[0], s.d[1]);
  } else {
    back = txt_fmt("(%d - arange(0, %d))", E - 1, E);
  }
  snprintf(name, sizeof name, "v%d", g->next_name++);
  txt_line(g, "store(%s + pid * %d + %s, %s); let %s = load(%s + pid * %d + %s);", p->name, E, idx, v->name, name,
           p->name, E, back);
  pool_push(g, name, v->t, &rs, &v->info, 0);
  free(idx), free(back);
  return true;
}

/* An operand of dot of shape [rows, cols] and type t: a load (maybe
 * transposed) or a value of the pool converted to t. Approximate
 * (tensor-core) products need finite, bounded inputs. */
static char *dot_operand(Gen *g, Elem t, int rows, int cols, bool need_finite, Info *out) {
  Shape s = sh2(rows, cols), ts = sh2(cols, rows);
  Want w = want_any();
  w.exact = true;
  w.finite = need_finite;
  w.max_m = need_finite ? 1e6 : 0;
  Val *v = NULL;
  if (rnd_chance(g, 40)) {
    w.into = NULL;
    for (int i = 0; i < g->npool && !v; i++) {
      Val *c = &g->pool[rnd_below(g, g->npool)];
      if (want_ok(&w, c->t, &c->s, &c->info) && (sh_eq(&c->s, &s) || sh_eq(&c->s, &ts))) v = c;
    }
  }
  if (v) {
    Info r;
    if (vi_convert(&v->info, v->t, t, &r) && !r.approx && (!need_finite || !r.special)) {
      *out = r;
      bool trans = !sh_eq(&v->s, &s);
      return v->t == t ? txt_fmt(trans ? "trans(%s)" : "%s", v->name)
                       : txt_fmt(trans ? "trans(%s as %s)" : "%s as %s", v->name, et_info[t].name);
    }
  }
  bool trans = rnd_chance(g, 30);
  Shape ls = trans ? ts : s;
  Elem lt = rnd_chance(g, 20) && !et_is_fp8(t) ? E_F32 : t;
  KgParam *p = add_param(g, "in", &g->nin, KG_INPUT, lt);
  Info info = set_fill(g, p, lt, need_finite);
  if (need_finite && info.m > 16) p->lo = -2, p->hi = 2, info.m = 2.0625;
  bool own = rnd_chance(g, 50);
  p->length = (size_t)(own ? g->programs : 1) * (size_t)sh_elems(&ls);
  char *idx = sh_index(&ls), *load;
  if (own) load = txt_fmt("load(%s + pid * %d + %s)", p->name, sh_elems(&ls), idx);
  else load = txt_fmt("load(%s + %s)", p->name, idx);
  free(idx);
  vi_convert(&info, lt, t, out);
  char *cast = lt == t ? load : txt_fmt("(%s as %s)", load, et_info[t].name);
  if (cast != load) free(load);
  if (!trans) return cast;
  char *tr = txt_fmt("trans(%s)", cast);
  free(cast);
  return tr;
}

/* Tensor-core products differ from the interpreter in the last bits
 * (builtins.md, dot: bf16/f16 "about 1e-7 per 16-wide slice of k", fp8
 * "7e-5 for one 32-wide slice, 4e-4 over K = 128"): bounds relative to
 * sum |a||b| + |acc|, per slice, with a margin. */
#define DOT_EPS_16BIT 0x1p-20
#define DOT_EPS_FP8 0x1p-11
/* Inputs of approximate dots stay below this magnitude. */
#define DOT_INPUT_BOUND 1e6

/* let v = dot(a, b [, acc]) */
static bool gen_dot(Gen *g) {
  if (!memory_ok(g)) return false;
  static const Elem ins[] = {E_BF16, E_F16, E_F32, E_I8, E_F8E4M3, E_F8E5M2, E_F64};
  static const int weights[] = {30, 20, 15, 10, 8, 7, 5};
  Elem ta = ins[rnd_weighted(g, weights, 7)], tb = ta;
  if (et_is_fp8(ta) && !(g->cfg->features & KG_F_FP8)) ta = tb = E_BF16;
  if (et_is_fp8(ta) && rnd_chance(g, 25)) tb = ta == E_F8E4M3 ? E_F8E5M2 : E_F8E4M3;
  int M, N, K;
  do {
    /* M = 64 half the time: with 4 or 8 warps that is the wgmma path */
    M = rnd_chance(g, 50) ? 64 : 16 << rnd_below(g, 2), N = 16 << rnd_below(g, 3), K = 16 << rnd_below(g, 3);
  } while (M * N > g->cfg->max_elems || M * K > g->cfg->max_elems || K * N > g->cfg->max_elems);
  bool tensor = ta == E_BF16 || ta == E_F16 || et_is_fp8(ta);
  Elem acc_t = ta == E_F64 ? E_F64 : ta == E_I8 ? E_I32 : E_F32;
  Info ia, ib, ic = vi_exact(0, false);
  char *a = dot_operand(g, ta, M, K, tensor, &ia), *b = dot_operand(g, tb, K, N, tensor, &ib), *acc = NULL;
  Shape s = sh2(M, N);
  int kind = rnd_below(g, 10);
  if (kind < 3) {
    Want w = want_any();
    w.elems = ES(acc_t);
    w.exact = true;
    w.finite = tensor;
    w.max_m = tensor ? DOT_INPUT_BOUND : 0;
    w.into = &s;
    Val *v = pool_pick(g, &w);
    if (v) acc = txt_fmt("%s", v->name), ic = v->info;
  } else if (kind < 5) {
    static const char *const lits[] = {"1.0", "0.5", "-2.0", "3", "-7", "0"};
    int i = acc_t == E_I32 ? 3 + rnd_below(g, 3) : rnd_below(g, 6);
    acc = txt_fmt("%s", lits[i]);
    ic = vi_exact(7, false);
  } else if (kind < 6) {
    acc = txt_fmt("zeros([%d, %d], %s)", M, N, et_info[acc_t].name);
  }
  double m = K * ia.m * ib.m + ic.m;
  Info r = vi_exact(0, ia.special || ib.special || ic.special);
  if (tensor) {
    double eps = et_is_fp8(ta) ? DOT_EPS_FP8 * (K / 32 + 1) : DOT_EPS_16BIT * (K / 16 + 1);
    r = (Info){m * (1 + 0x1p-20), false, true, eps * m, 0, "float dot on tensor cores (builtins.md, dot and On the GPU)"};
  } else {
    vi_clamp(&r, acc_t, m, true);
  }
  Expr e = {0};
  if (acc && rnd_chance(g, 15)) e.text = txt_fmt("dot(a = %s, b = %s, acc = %s)", a, b, acc);
  else if (acc) e.text = txt_fmt("dot(%s, %s, %s)", a, b, acc);
  else e.text = txt_fmt("dot(%s, %s)", a, b);
  free(a), free(b), free(acc);
  e.t = acc_t;
  e.s = s;
  e.info = r;
  bind_value(g, &e, false);
  return true;
}

/* ---- control flow ---- */

static void gen_block(Gen *g, int n);

/* A var carried through a loop or if: declared with an exact value; what
 * is known about it is forgotten, since it changes inside. */
static Val *gen_carried(Gen *g) {
  Want w = want_any();
  w.exact = true;
  Expr e;
  if (!make_operand(g, 1, &w, &e)) return NULL;
  Val *v = bind_value(g, &e, true);
  if (v) {
    v->info = vi_exact(0, et_is_float(v->t));
    vi_clamp(&v->info, v->t, et_info[v->t].max * 2, false);
  }
  return v;
}

/* One assignment to a carried var, with an exact value of its type. */
static void gen_assign(Gen *g, const Val *a) {
  Want w = want_any();
  w.exact = true;
  w.into = &a->s;
  Expr x, c;
  if (!make_operand(g, 1, &w, &x)) return;
  if (!xp_coerce(g, &x, a->t, &a->s)) {
    xp_free(&x);
    return;
  }
  char *tx = xp_operand(&x);
  int form = rnd_below(g, 10);
  if (form < 2 && make_condition(g, &a->s, &c)) {
    if (sh_broadcasts_to(&c.s, &a->s)) txt_line(g, "%s = where(%s, %s, %s);", a->name, c.text, tx, a->name);
    else txt_line(g, "%s = %s;", a->name, x.text);
    xp_free(&c);
  } else if (form < 4) {
    txt_line(g, "%s = %s;", a->name, x.text);
  } else if (et_is_int(a->t)) {
    static const char *const ops[] = {"+", "-", "*", "^", "|", "&"};
    const char *op = ops[rnd_below(g, 6)];
    if (rnd_chance(g, 50)) txt_line(g, "%s %s= %s;", a->name, op, tx);
    else txt_line(g, "%s = %s %s %s;", a->name, a->name, op, tx);
  } else if (a->t == E_I1) {
    static const char *const ops[] = {"^", "&&", "||"};
    txt_line(g, "%s = %s %s %s;", a->name, a->name, ops[rnd_below(g, 3)], tx);
  } else if (a->t == E_F8E5M2 && (g->cfg->avoid & KG_BUG_FP8_MINMAX_INF)) {
    txt_line(g, "%s = %s;", a->name, x.text); /* a carried var may hold inf */
  } else if (et_is_fp8(a->t) || rnd_chance(g, 25)) {
    txt_line(g, "%s = %s(%s, %s);", a->name, rnd_chance(g, 50) ? "maximum" : "minimum", a->name, tx);
  } else {
    static const char *const ops[] = {"+", "-", "*"};
    txt_line(g, "%s = %s %s %s;", a->name, a->name, ops[rnd_below(g, 3)], tx);
  }
  free(tx);
  xp_free(&x);
}

/* Loop bounds are computed in 128 bits so that "the next value would
 * leave the type" can be decided for u64 and i64 too. */
typedef __int128 Wide;

static Wide wide_min(Elem t) { return et_info[t].is_signed ? -((Wide)1 << (et_info[t].bits - 1)) : 0; }
static Wide wide_max(Elem t) {
  return et_info[t].is_signed ? ((Wide)1 << (et_info[t].bits - 1)) - 1 : ((Wide)1 << et_info[t].bits) - 1;
}

/* Iterations of `for i in range(lo, hi, step)` in type t (semantics.md,
 * for: the loop also ends when the next value would leave the type). */
static int loop_trips(Elem t, Wide lo, Wide hi, Wide step) {
  int n = 0;
  for (Wide v = lo; step > 0 ? v < hi : v > hi; v += step) {
    if (++n > GEN_MAX_TRIPS) return n;
    if (v + step < wide_min(t) || v + step > wide_max(t)) break;
  }
  return n;
}

static char *wide_text(Wide v) {
  return v < 0 ? txt_fmt("-%llu", (unsigned long long)-v) : txt_fmt("%llu", (unsigned long long)v);
}

typedef struct Bounds {
  Elem t;
  Wide lo, hi, step;
} Bounds;

/* Bounds with at most GEN_MAX_TRIPS iterations: small ones, and ones
 * next to the largest and smallest values of the type with steps that
 * would overflow. */
static Bounds pick_bounds(Gen *g) {
  static const Elem types[] = {E_I32, E_I64, E_U32, E_I8, E_U8, E_I16, E_U16, E_U64};
  static const int weights[] = {45, 12, 10, 8, 7, 6, 4, 8};
  static const int steps[] = {1, 2, 3, 5, 7, 100};
  for (int tries = 0; tries < 50; tries++) {
    Elem t = types[rnd_weighted(g, weights, 8)];
    Wide mn = wide_min(t), mx = wide_max(t), lo, hi, step;
    bool sgn = et_info[t].is_signed;
    int mode = rnd_below(g, 10);
    if (mode < 4) {
      lo = rnd_below(g, 7) - (sgn ? 3 : 0);
      step = 1 + rnd_below(g, 3);
      if (sgn && rnd_chance(g, 30)) step = -step;
      hi = lo + step * rnd_below(g, GEN_MAX_TRIPS + 1) + rnd_below(g, 3) - 1;
    } else if (mode < 7) {
      step = rnd_chance(g, 70) ? steps[rnd_below(g, 6)] : mx / 3;
      lo = mx - rnd_below(g, 4) * step - rnd_below(g, 8);
      hi = rnd_chance(g, 50) ? mx : mx - rnd_below(g, 3);
    } else if (mode < 9 && sgn) {
      step = -(rnd_chance(g, 70) ? steps[rnd_below(g, 6)] : mx / 3);
      lo = mn - rnd_below(g, 4) * step + rnd_below(g, 8);
      hi = rnd_chance(g, 50) ? mn : mn + rnd_below(g, 3);
    } else {
      lo = sgn && rnd_chance(g, 50) ? mn / 2 : 0;
      hi = mx;
      step = rnd_chance(g, 50) ? mx / 2 + 1 : mx - rnd_below(g, 3);
    }
    if (step == 0 || lo < mn || lo > mx || hi < mn || hi > mx || step < mn || step > mx) continue;
    if (loop_trips(t, lo, hi, step) > GEN_MAX_TRIPS) continue;
    return (Bounds){t, lo, hi, step};
  }
  return (Bounds){E_I32, 0, 2, 1};
}

/* The text of range(...) for b: literals, typed values or runtime scalars. */
static char *range_text(Gen *g, const Bounds *b) {
  const char *tn = et_info[b->t].name;
  int mode = rnd_below(g, 10);
  if (mode < 2 && memory_ok(g)) { /* runtime bounds */
    const char *lo = add_scalar(g, b->t, (int64_t)(uint64_t)b->lo, 0), *hi = add_scalar(g, b->t, (int64_t)(uint64_t)b->hi, 0);
    if (b->step == 1) return txt_fmt("range(%s, %s)", lo, hi);
    return txt_fmt("range(%s, %s, %s)", lo, hi, add_scalar(g, b->t, (int64_t)(uint64_t)b->step, 0));
  }
  char *v[3] = {wide_text(b->lo), wide_text(b->hi), wide_text(b->step)}, *r;
  bool typed = b->t != E_I32 || mode < 5;
  for (int i = 0; typed && i < 3; i++) { /* the first bound typed, or all of them */
    if (i > 0 && rnd_chance(g, 60)) break;
    char *t = txt_fmt("(%s as %s)", v[i], tn);
    free(v[i]);
    v[i] = t;
  }
  if (b->lo == 0 && b->step == 1 && !typed) r = txt_fmt("range(%s)", v[1]);
  else if (b->step == 1) r = txt_fmt("range(%s, %s)", v[0], v[1]);
  else r = txt_fmt("range(%s, %s, %s)", v[0], v[1], v[2]);
  free(v[0]), free(v[1]), free(v[2]);
  return r;
}

static bool nest_ok(const Gen *g) { return g->nest < GEN_MAX_NEST; }

/* The body of a loop or a branch: statements, then assignments to the
 * carried vars. */
static void gen_body(Gen *g, Val **carried, int n, bool all) {
  g->depth++, g->nest++;
  gen_block(g, 1 + rnd_below(g, GEN_BLOCK_STMTS));
  for (int i = 0; i < n; i++)
    if (all || rnd_chance(g, 60)) gen_assign(g, carried[i]);
  g->depth--, g->nest--;
  pool_pop(g);
}

static int gen_carried_vars(Gen *g, Val **carried, int most) {
  int n = 0;
  for (int i = 1 + rnd_below(g, most); i > 0; i--) {
    Val *v = gen_carried(g);
    if (v) carried[n++] = v;
  }
  return n;
}

static bool gen_for(Gen *g) {
  if (!nest_ok(g)) return false;
  Val *carried[2];
  int n = gen_carried_vars(g, carried, 2);
  Bounds b = pick_bounds(g);
  char *range = range_text(g, &b), name[GEN_NAME_BYTES];
  snprintf(name, sizeof name, "j%d", g->next_name++);
  if (rnd_chance(g, 5)) txt_line(g, "@pipeline(stages = %d)", 1 + rnd_below(g, 3));
  txt_line(g, "for %s in %s {", name, range);
  free(range);
  Shape sc = sh_scalar();
  Wide mag = b.lo < 0 ? -b.lo : b.lo, mh = b.hi < 0 ? -b.hi : b.hi;
  Info li = vi_exact((double)(mag > mh ? mag : mh), false);
  g->depth++;
  pool_push(g, name, b.t, &sc, &li, VAL_LOOPVAR);
  g->depth--;
  gen_body(g, carried, n, true);
  txt_line(g, "}");
  if (n && rnd_chance(g, 50)) gen_store(g, carried[0]);
  return true;
}

/* A counted while loop: the counter is incremented on the header's line,
 * so that no reduction can separate the two. */
static bool gen_while(Gen *g) {
  if (!nest_ok(g)) return false;
  Val *carried[2];
  int n = gen_carried_vars(g, carried, 1);
  char name[GEN_NAME_BYTES];
  snprintf(name, sizeof name, "w%d", g->next_name++);
  int K = 1 + rnd_below(g, 3);
  txt_line(g, "var %s = 0;", name);
  Shape sc = sh_scalar();
  Info wi = vi_exact(K, false);
  Expr c = {0};
  bool extra = rnd_chance(g, 40) && make_condition(g, NULL, &c);
  txt_line(g, "while %s < %d%s%s { %s += 1;", name, K, extra ? " && " : "", extra ? c.text : "", name);
  if (extra) xp_free(&c);
  pool_push(g, name, E_I32, &sc, &wi, 0);
  gen_body(g, carried, n, true);
  txt_line(g, "}");
  return true;
}

static bool gen_if(Gen *g) {
  if (!nest_ok(g)) return false;
  Val *carried[2];
  int n = rnd_chance(g, 80) ? gen_carried_vars(g, carried, 2) : 0;
  Expr c;
  if (!make_condition(g, NULL, &c)) return false;
  txt_line(g, "if %s {", c.text);
  xp_free(&c);
  gen_body(g, carried, n, false);
  int more = rnd_below(g, 10);
  if (more >= 3 && more < 5 && make_condition(g, NULL, &c)) {
    txt_line(g, "} else if %s {", c.text);
    xp_free(&c);
    gen_body(g, carried, n, false);
  }
  if (more >= 3) {
    txt_line(g, "} else {");
    gen_body(g, carried, n, false);
  }
  txt_line(g, "}");
  return true;
}

/* ---- helper functions ---- */

/* Helper functions per kernel, at most. */
#define GEN_MAX_HELPERS 4

bool make_helper_call(Gen *g, Expr *out) {
  if (g->in_helper || g->nhelpers >= GEN_MAX_HELPERS) return false;
  Val args[3];
  int n = 0;
  Want w = want_any();
  for (int i = 1 + rnd_below(g, 3); i > 0; i--) {
    Val *v = pool_pick(g, &w);
    if (v) args[n++] = *v;
  }
  if (!n) return false;
  Gen h = *g;
  Val *hpool = calloc(GEN_MAX_POOL, sizeof *hpool);
  StrBuf body, sig;
  sb_init(&body), sb_init(&sig);
  h.pool = hpool, h.npool = 0, h.out = &body, h.depth = 1, h.in_helper = true, h.stmts = 0, h.next_name = 0, h.nest = 0;
  char name[2 * KG_NAME_BYTES], buf[64];
  snprintf(name, sizeof name, "%s_h%d", g->k->name, g->nhelpers++);
  sb_printf(&sig, "fn %s(", name);
  for (int i = 0; i < n; i++) {
    char pn[GEN_NAME_BYTES];
    snprintf(pn, sizeof pn, "p%d", i);
    if (rnd_chance(g, 50))
      sb_printf(&sig, "%s%s: %s%s", i ? ", " : "", pn, et_info[args[i].t].name,
                args[i].s.rank ? sh_text(&args[i].s, buf, sizeof buf) : "");
    else sb_printf(&sig, "%s%s", i ? ", " : "", pn);
    pool_push(&h, pn, args[i].t, &args[i].s, &args[i].info, 0);
  }
  int kdefault = rnd_below(g, 9) - 4, kvalue = kdefault;
  bool has_k = rnd_chance(g, 30), pass_k = has_k && rnd_chance(g, 50);
  if (pass_k) kvalue = rnd_below(g, 9) - 4;
  if (has_k) {
    Shape sc = sh_scalar();
    Info ki = vi_exact(abs(kvalue), false);
    sb_printf(&sig, ", const K: i32 = %d", kdefault);
    pool_push(&h, "K", E_I32, &sc, &ki, 0);
  }
  int nparams = h.npool;
  for (int tries = 0; tries < GEN_TRIES && h.npool == nparams; tries++) gen_block(&h, 1 + rnd_below(&h, 3));
  g->rng = h.rng;
  const Val *ret = &hpool[h.npool > nparams ? h.npool - 1 : 0];
  if (rnd_chance(g, 30))
    sb_printf(&sig, ") -> %s%s {\n", et_info[ret->t].name, ret->s.rank ? sh_text(&ret->s, buf, sizeof buf) : "");
  else sb_puts(&sig, ") {\n");
  sb_printf(g->helpers, "%s%s    return %s;\n}\n", sig.data, body.data ? body.data : "", ret->name);
  StrBuf call;
  sb_init(&call);
  sb_printf(&call, "%s(", name);
  for (int i = 0; i < n; i++) sb_printf(&call, "%s%s", i ? ", " : "", args[i].name);
  if (pass_k) sb_printf(&call, ", K = %d", kvalue);
  sb_putc(&call, ')');
  memset(out, 0, sizeof *out);
  out->text = sb_take(&call);
  out->t = ret->t;
  out->s = ret->s;
  out->info = ret->info;
  sb_free(&body), sb_free(&sig);
  free(hpool);
  return true;
}

/* ---- statements ---- */

static bool st_let(Gen *g) {
  Expr e;
  if (!make_expr(g, GEN_MAX_DEPTH, &e)) return false;
  bind_value(g, &e, false);
  return true;
}

static bool st_store(Gen *g) { return gen_store(g, NULL); }

typedef struct StmtKind {
  bool (*fn)(Gen *g);
  int weight;
  unsigned feature; /* 0: always */
} StmtKind;

static const StmtKind stmt_kinds[] = {
    {st_let, 40, 0},          {gen_load, 14, 0},        {st_store, 11, 0},           {gen_dot, 5, KG_F_DOT},
    {gen_atomic, 3, KG_F_ATOMICS}, {gen_scratch, 2, KG_F_SCRATCH}, {gen_for, 5, KG_F_LOOPS}, {gen_while, 2, KG_F_LOOPS},
    {gen_if, 5, KG_F_IFS},
};

static void gen_stmt(Gen *g) {
  enum { N = sizeof stmt_kinds / sizeof stmt_kinds[0] };
  int weights[N];
  for (int i = 0; i < N; i++)
    weights[i] = !stmt_kinds[i].feature || (g->cfg->features & stmt_kinds[i].feature) ? stmt_kinds[i].weight : 0;
  g->stmts++;
  for (int t = 0; t < GEN_TRIES; t++)
    if (stmt_kinds[rnd_weighted(g, weights, N)].fn(g)) return;
}

static void gen_block(Gen *g, int n) {
  for (int i = 0; i < n && g->stmts < g->cfg->max_stmts; i++) gen_stmt(g);
}

/* ---- kernels ---- */

/* Tile dimensions and how often the main shape uses each. */
static const int dims[] = {1, 2, 4, 8, 16, 32, 64};
static const int dim_weights[] = {3, 4, 8, 14, 16, 12, 6};

/* Scalar parameters: a type and a value that is exact in it. */
static void gen_scalar_param(Gen *g) {
  static const Elem types[] = {E_I32, E_I64, E_U32, E_I16, E_U8, E_I1, E_F32, E_F16, E_BF16, E_F64, E_U64};
  static const int weights[] = {30, 8, 6, 4, 4, 6, 18, 6, 5, 5, 4};
  Elem t = types[rnd_weighted(g, weights, 11)];
  Shape sc = sh_scalar();
  int64_t iv = 0;
  double fv = 0, m;
  if (et_is_float(t)) {
    fv = (rnd_below(g, 129) - 64) / 8.0;
    m = fabs(fv);
  } else if (t == E_I1) {
    iv = rnd_below(g, 2);
    m = 1;
  } else {
    int k = rnd_below(g, 10);
    double v = k < 7 ? rnd_below(g, 201) - 100 : k < 8 ? et_info[t].max : k < 9 ? et_info[t].min : et_info[t].max - 1;
    if (v < et_info[t].min) v = -v;
    iv = t == E_U64 && v >= 0x1p63 ? (int64_t)UINT64_MAX : t == E_I64 && v >= 0x1p63 ? INT64_MAX : (int64_t)v;
    if (t == E_U64 && k == 9) iv = (int64_t)(UINT64_MAX - 1);
    m = fabs(v);
  }
  const char *name = add_scalar(g, t, iv, fv);
  Info info = vi_exact(m, false);
  pool_push(g, name, t, &sc, &info, 0);
}

/* The parameter list of the kernel's signature, with const W and the
 * kernel's other const parameters (consts), and some parameter facts. */
static void signature(Gen *g, StrBuf *out, const char *consts) {
  for (int i = 0; i < g->k->nparams; i++) {
    const KgParam *p = &g->k->params[i];
    sb_puts(out, i ? ", " : "");
    if (p->role == KG_SCALAR) {
      sb_printf(out, "%s: %s", p->name, p->elem);
      Elem t = et_from_name(p->elem);
      if (et_is_int(t) && p->ivalue != 0 && p->ivalue % 8 == 0 && rnd_chance(g, 30)) sb_puts(out, " multiple_of(8)");
    } else {
      sb_printf(out, "%s: *%s%s", p->name, p->elem, rnd_chance(g, 10) ? " align(16)" : "");
    }
  }
  sb_printf(out, "%sconst W: i32 = %d%s", g->k->nparams ? ", " : "", g->k->warps, consts);
}

/* The start of a kernel: the program's index (pid) and the index tiles
 * of the main shape (r, c, rc), scalar parameters, const parameters
 * (their declarations go to consts). */
static void gen_preamble(Gen *g, bool two_d, StrBuf *consts) {
  int R = g->base.d[0], C = g->base.d[1];
  Shape sc = sh_scalar(), sr = sh1(R), scol = sh1(C);
  Info pi = vi_exact(g->programs - 1, false), ri = vi_exact(R - 1, false), ci = vi_exact(C - 1, false),
       rci = vi_exact(R * C - 1, false);
  if (two_d) txt_line(g, "let pid = program_id(0) + program_id(1) * num_programs(0);");
  else txt_line(g, rnd_chance(g, 80) ? "let pid = program_id(0);" : "let pid = program_id(0) + program_id(2);");
  txt_line(g, "let r = arange(0, %d);", R);
  txt_line(g, "let c = arange(0, %d);", C);
  txt_line(g, "let rc = r[:, None] * %d + c[None, :];", C);
  pool_push(g, "pid", E_I32, &sc, &pi, VAL_INDEX);
  pool_push(g, "r", E_I32, &sr, &ri, VAL_INDEX);
  pool_push(g, "c", E_I32, &scol, &ci, VAL_INDEX);
  pool_push(g, "rc", E_I32, &g->base, &rci, VAL_INDEX);
  for (int i = rnd_below(g, 4); i > 0; i--) gen_scalar_param(g);
  if (rnd_chance(g, 30)) {
    int v = rnd_below(g, 101) - 50;
    Info info = vi_exact(abs(v), false);
    sb_printf(consts, ", const C0: i32 = %d", v);
    pool_push(g, "C0", E_I32, &sc, &info, 0);
  }
  if (rnd_chance(g, 15)) {
    Info info = vi_exact(1, false);
    sb_printf(consts, ", const F0: bool = %s", rnd_chance(g, 50) ? "true" : "false");
    pool_push(g, "F0", E_I1, &sc, &info, 0);
  }
}

static void gen_kernel(uint64_t seed, const KgConfig *cfg, int index, KgKernel *k, StrBuf *text) {
  Gen *g = calloc(1, sizeof *g);
  Val *pool = calloc(GEN_MAX_POOL, sizeof *pool);
  StrBuf body, helpers, consts;
  sb_init(&body), sb_init(&helpers), sb_init(&consts);
  g->rng = seed, g->cfg = cfg, g->k = k, g->pool = pool, g->out = &body, g->helpers = &helpers, g->depth = 1;
  snprintf(k->name, sizeof k->name, "k%d", index);
  static const int gx_weights[] = {50, 30, 20}, warps[] = {1, 2, 4, 8}, warp_weights[] = {10, 15, 50, 25};
  k->warps = warps[rnd_weighted(g, warp_weights, 4)];
  /* the back end holds a tile in registers: with few warps, tiles stay small */
  KgConfig kcfg = *cfg;
  if (kcfg.max_elems > k->warps * GEN_ELEMS_PER_WARP) kcfg.max_elems = k->warps * GEN_ELEMS_PER_WARP;
  g->cfg = &kcfg;
  int R, C;
  do {
    R = dims[rnd_weighted(g, dim_weights, 7)], C = dims[rnd_weighted(g, dim_weights, 7)];
  } while (R * C > kcfg.max_elems);
  g->base = sh2(R, C);
  int gx = 1 + rnd_weighted(g, gx_weights, 3), gy = rnd_chance(g, 25) ? 2 : 1;
  g->programs = gx * gy;
  k->grid[0] = gx, k->grid[1] = gy, k->grid[2] = 1;

  gen_preamble(g, gy > 1, &consts);
  for (int i = 2 + rnd_below(g, 2); i > 0; i--) gen_load(g);
  int target = kcfg.max_stmts / 2 + rnd_below(g, kcfg.max_stmts / 2 + 1);
  while (g->stmts < target) gen_stmt(g);
  int stores = 0;
  for (int i = g->npool - 1; i >= 0 && stores < GEN_FINAL_STORES; i--)
    if (!(g->pool[i].flags & (VAL_STORED | VAL_INDEX | VAL_LOADED)) && gen_store(g, &g->pool[i])) stores++;
  if (!g->nout && !g->nacc && !g->ntmp) gen_store(g, &g->pool[3]);

  sb_printf(text, "// %s: seed 0x%016llx, tile [%d, %d], grid [%d, %d, 1], %d warps\n", k->name,
            (unsigned long long)seed, R, C, gx, gy, k->warps);
  if (helpers.data) sb_puts(text, helpers.data);
  sb_printf(text, "@warps(W)\nkernel %s(", k->name);
  signature(g, text, consts.data ? consts.data : "");
  sb_printf(text, ") {\n%s}\n", body.data ? body.data : "");
  sb_free(&body), sb_free(&helpers), sb_free(&consts);
  free(pool);
  free(g);
}

/* ---- programs ---- */

void kg_config_init(KgConfig *cfg) {
  cfg->kernels = 1;
  cfg->features = KG_F_ALL;
  cfg->avoid = KG_BUGS_KNOWN;
  cfg->max_stmts = 24;
  cfg->max_elems = 4096;
}

KgProgram *kg_generate(uint64_t seed, const KgConfig *cfg_in) {
  KgConfig cfg;
  if (cfg_in) cfg = *cfg_in;
  else kg_config_init(&cfg);
  if (cfg.kernels < 1) cfg.kernels = 1;
  if (cfg.max_elems < 256) cfg.max_elems = 256; /* dot needs 16 x 16 */
  KgProgram *p = calloc(1, sizeof *p);
  p->kernels = calloc((size_t)cfg.kernels, sizeof *p->kernels);
  if (!p || !p->kernels) abort();
  p->seed = seed;
  p->nkernels = cfg.kernels;
  StrBuf text;
  sb_init(&text);
  sb_printf(&text, "// generated by tests/gen (kg_generate): seed %llu, %d kernel%s\n\n", (unsigned long long)seed,
            cfg.kernels, cfg.kernels > 1 ? "s" : "");
  for (int i = 0; i < cfg.kernels; i++) {
    KgKernel *k = &p->kernels[i];
    k->text_begin = text.len;
    /* kernel i depends on (seed, i) only, not on the number of kernels */
    gen_kernel(mix64(seed ^ mix64((uint64_t)i + 1)), &cfg, i, k, &text);
    k->text_end = text.len;
    sb_putc(&text, '\n');
  }
  p->len = text.len;
  p->source = sb_take(&text);
  return p;
}

void kg_free(KgProgram *p) {
  if (!p) return;
  free(p->source);
  free(p->kernels);
  free(p);
}

char *kg_kernel_source(const KgProgram *p, int k, size_t *len) {
  const KgKernel *kk = &p->kernels[k];
  *len = kk->text_end - kk->text_begin;
  char *s = malloc(*len + 1);
  if (!s) abort();
  memcpy(s, p->source + kk->text_begin, *len);
  s[*len] = 0;
  return s;
}
