/* interp.c - the interpreter's driver: translating a Func into XOps,
 * argument checks, running the grid, structured control flow (for, if,
 * while, yield) and error reporting.
 *
 * The computing ops live in interp_ops.c and the memory ops in interp_mem.c;
 * interp_internal.h describes the shared structures. Errors never stop the
 * process: the first one is recorded as a message in Interp.error, every
 * executing function returns false, and interp_run hands the message over.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "interp_internal.h"

/* Initial capacity of the buffer registry; it doubles when full. */
#define INTERP_INITIAL_BUFFERS 8

/* Upper bound on the tile storage of one kernel (all SSA values together).
 * A flash-attention kernel needs a few dozen MiB; anything near this limit
 * is a runaway specialization, better reported than allocated. */
#define INTERP_MAX_STORAGE_BYTES ((uint64_t)4 << 30)

/* Name used in messages when the caller gives no source name. */
#define INTERP_UNNAMED_SOURCE "<input>"

/* ---- errors ------------------------------------------------------------ */

/* Formats "FILE:L:C: error: <msg>" plus the program suffix when running. */
static bool fail_v(Interp *ip, SrcLoc loc, bool in_program, const char *fmt, va_list ap) {
  if (ip->error) return false;
  StrBuf sb;
  sb_init(&sb);
  if (loc.line)
    sb_printf(&sb, "%s:%u:%u: error: ", ip->source_name, loc.line, loc.col);
  else
    sb_printf(&sb, "%s: error: ", ip->source_name);
  sb_vprintf(&sb, fmt, ap);
  if (in_program)
    sb_printf(&sb, " (program (%lld, %lld, %lld))", (long long)ip->pid[0], (long long)ip->pid[1],
              (long long)ip->pid[2]);
  ip->error = sb_take(&sb);
  return false;
}

bool interp_fail(Interp *ip, const XOp *xo, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail_v(ip, xo->op->loc, true, fmt, ap);
  va_end(ap);
  return false;
}

/* An error at the kernel's loc: outside any program (arguments, grid), or
 * in the current one when no op is running (the per-program step). */
static bool fail_kernel(Interp *ip, bool in_program, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail_kernel(Interp *ip, bool in_program, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail_v(ip, ip->func->loc, in_program, fmt, ap);
  va_end(ap);
  return false;
}

static double monotonic_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether the run is still within its time limit; schedules the next look. */
static bool within_time_limit(Interp *ip) {
  if (ip->max_seconds <= 0) {
    ip->next_clock_check = UINT64_MAX;
    return true;
  }
  ip->next_clock_check = ip->steps + INTERP_CLOCK_CHECK_STEPS;
  return monotonic_seconds() - ip->start_seconds <= ip->max_seconds;
}

static void format_time_limit(const Interp *ip, char *buf, size_t size) {
  snprintf(buf, size, "time limit of %g seconds exceeded after %llu steps", ip->max_seconds,
           (unsigned long long)ip->steps);
}

bool interp_charge(Interp *ip, const XOp *xo, uint64_t amount) {
  if (amount > ip->max_steps - ip->steps) {
    ip->steps = ip->max_steps;
    return interp_fail(ip, xo, "execution limit of %llu steps exceeded", (unsigned long long)ip->max_steps);
  }
  ip->steps += amount;
  if (ip->steps < ip->next_clock_check || within_time_limit(ip)) return true;
  char msg[128];
  format_time_limit(ip, msg, sizeof msg);
  return interp_fail(ip, xo, "%s", msg);
}

void interp_format_index(TType t, int64_t flat, char *buf, size_t size) {
  int64_t idx[TILE_MAX_RANK] = {0};
  int rank = t.rank <= TILE_MAX_RANK ? t.rank : TILE_MAX_RANK;
  for (int d = rank - 1; d >= 0; d--) {
    int64_t dim = t.shape[d] > 0 ? t.shape[d] : 1;
    idx[d] = flat % dim;
    flat /= dim;
  }
  size_t n = 0;
  n += (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < rank && n < size; d++)
    n += (size_t)snprintf(buf + n, size - n, d ? ", %lld" : "%lld", (long long)idx[d]);
  if (n < size) snprintf(buf + n, size - n, "]");
}

/* ---- translation: value numbering ------------------------------------- */

/* Open-addressing map from Value* to value number, used only while
 * translating. */
typedef struct ValueMap {
  const Value **keys;
  uint32_t *ids;
  uint32_t cap; /* a power of two, more than twice the value count */
} ValueMap;

typedef struct Builder {
  Interp *ip;
  ValueMap map;
  uint32_t next_id;
  uint64_t storage_bytes;
  const char *error; /* first structural problem, or NULL */
  SrcLoc error_loc;
} Builder;

static uint32_t value_hash(const Value *v, uint32_t cap) {
  uint64_t h = (uint64_t)(uintptr_t)v * 0x9E3779B97F4A7C15ULL;
  return (uint32_t)(h >> 32) & (cap - 1);
}

static void build_error(Builder *bld, SrcLoc loc, const char *msg) {
  if (bld->error) return;
  bld->error = msg;
  bld->error_loc = loc;
}

/* Numbers a newly defined value and gives it storage. */
static uint32_t define_value(Builder *bld, const Value *v, SrcLoc loc) {
  Interp *ip = bld->ip;
  uint32_t id = bld->next_id++;
  Tile *t = &ip->tiles[id];
  t->type = v->type;
  t->n = 1;
  bool shape_ok = v->type.rank <= TILE_MAX_RANK;
  for (int d = 0; shape_ok && d < v->type.rank; d++) {
    if (v->type.shape[d] < 1) shape_ok = false;
    else t->n *= v->type.shape[d];
    if (t->n > TILE_MAX_ELEMS) shape_ok = false;
  }
  if (!shape_ok) {
    build_error(bld, loc, "value has an invalid tile shape");
    t->n = 1;
  }
  bld->storage_bytes += (uint64_t)t->n * sizeof(Slot);
  if (bld->storage_bytes > INTERP_MAX_STORAGE_BYTES) {
    build_error(bld, loc, "kernel needs more tile storage than the interpreter allows (4 GiB)");
    t->n = 1;
  }
  t->data = ARENA_ARRAY(&ip->arena, Slot, t->n);
  uint32_t h = value_hash(v, bld->map.cap);
  while (bld->map.keys[h]) h = (h + 1) & (bld->map.cap - 1);
  bld->map.keys[h] = v;
  bld->map.ids[h] = id;
  return id;
}

static uint32_t lookup_value(Builder *bld, const Value *v, SrcLoc loc) {
  for (uint32_t h = value_hash(v, bld->map.cap); bld->map.keys[h]; h = (h + 1) & (bld->map.cap - 1))
    if (bld->map.keys[h] == v) return bld->map.ids[h];
  build_error(bld, loc, "operand used before its definition");
  return 0;
}

/* ---- translation: ops and blocks -------------------------------------- */

static void compile_block(Builder *bld, const Block *b, SrcLoc loc, XBlock *out);

static int64_t tile_n(const Builder *bld, uint32_t id) { return bld->ip->tiles[id].n; }

/* Number of operands of the terminator of a region (-1 without one). */
static int64_t yield_count(const XBlock *b) {
  return b->term && b->term->kind == OP_YIELD ? (int64_t)b->term->nin : -1;
}

/* True when the n values dst[i] and src[i] have equal element counts. */
static bool sizes_match(const Builder *bld, const uint32_t *dst, const uint32_t *src, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (tile_n(bld, dst[i]) != tile_n(bld, src[i])) return false;
  return true;
}

static bool for_is_wellformed(const Builder *bld, const XOp *xo) {
  if (xo->nin < 3 || xo->nregions != 1) return false;
  const XBlock *body = &xo->regions[0];
  uint32_t n = xo->nin - 3;
  if (xo->nout != n || body->nargs != n + 1 || yield_count(body) != (int64_t)n) return false;
  for (int i = 0; i < 3; i++)
    if (tile_n(bld, xo->in[i]) != 1 || !scalar_is_int(bld->ip->tiles[xo->in[i]].type.kind))
      return false;
  return tile_n(bld, body->args[0]) == 1 && sizes_match(bld, body->args + 1, xo->in + 3, n) &&
         sizes_match(bld, body->args + 1, body->term->in, n) &&
         sizes_match(bld, xo->out, body->args + 1, n);
}

static bool if_is_wellformed(const Builder *bld, const XOp *xo) {
  if (xo->nin != 1 || xo->nregions != 2 || tile_n(bld, xo->in[0]) != 1) return false;
  for (int r = 0; r < 2; r++) {
    const XBlock *b = &xo->regions[r];
    int64_t ny = yield_count(b);
    if (xo->nout == 0 && ny <= 0) continue;
    if (ny != (int64_t)xo->nout || !sizes_match(bld, xo->out, b->term->in, xo->nout)) return false;
  }
  return true;
}

static bool while_is_wellformed(const Builder *bld, const XOp *xo) {
  if (xo->nregions != 2) return false;
  const XBlock *before = &xo->regions[0], *after = &xo->regions[1];
  uint32_t n = xo->nin;
  if (xo->nout != n || before->nargs != n || after->nargs != n) return false;
  if (yield_count(before) != 1 || yield_count(after) != (int64_t)n) return false;
  return tile_n(bld, before->term->in[0]) == 1 && sizes_match(bld, before->args, xo->in, n) &&
         sizes_match(bld, after->args, before->args, n) &&
         sizes_match(bld, before->args, after->term->in, n) && sizes_match(bld, xo->out, xo->in, n);
}

/* Elementwise ops: every operand as large as the result. */
static bool elementwise_is_wellformed(const Builder *bld, const XOp *xo) {
  if (xo->nout != 1) return false;
  for (uint32_t i = 0; i < xo->nin; i++)
    if (tile_n(bld, xo->in[i]) != tile_n(bld, xo->out[0])) return false;
  return true;
}

static bool counts_are_wellformed(const XOp *xo) {
  const OpInfo *info = &op_info[xo->kind];
  if (info->noperands >= 0 && xo->nin != (uint32_t)info->noperands) return false;
  if (info->nresults >= 0 && xo->nout != (uint32_t)info->nresults) return false;
  return xo->nregions == (uint32_t)info->nregions;
}

static void check_op(Builder *bld, const XOp *xo) {
  bool ok = counts_are_wellformed(xo);
  if (ok && xo->kind == OP_FOR) ok = for_is_wellformed(bld, xo);
  else if (ok && xo->kind == OP_IF) ok = if_is_wellformed(bld, xo);
  else if (ok && xo->kind == OP_WHILE) ok = while_is_wellformed(bld, xo);
  else if (ok && (op_info[xo->kind].flags & OPF_ELEM)) ok = elementwise_is_wellformed(bld, xo);
  if (!ok) build_error(bld, xo->op->loc, "malformed op (operands, results or regions do not fit)");
}

/* Scratch buffers for the loop-carried values of a for or while loop. */
static void alloc_loop_scratch(Builder *bld, XOp *xo) {
  const XBlock *carried = &xo->regions[0];
  uint32_t first = xo->kind == OP_FOR ? 1 : 0;
  if (carried->nargs < first) return;
  uint32_t n = carried->nargs - first;
  xo->scratch = ARENA_ARRAY(&bld->ip->arena, Slot *, n ? n : 1);
  for (uint32_t i = 0; i < n; i++)
    xo->scratch[i] = ARENA_ARRAY(&bld->ip->arena, Slot, tile_n(bld, carried->args[first + i]));
}

static void compile_op(Builder *bld, const Op *op, XOp *xo) {
  Arena *a = &bld->ip->arena;
  xo->op = op;
  xo->kind = op->kind < OP_COUNT ? (OpKind)op->kind : OP_COUNT;
  if (xo->kind == OP_COUNT) {
    build_error(bld, op->loc, "unknown op kind");
    xo->kind = OP_RETURN;
  }
  xo->nin = op->noperands;
  xo->in = ARENA_ARRAY(a, uint32_t, op->noperands ? op->noperands : 1);
  for (uint32_t i = 0; i < op->noperands; i++)
    xo->in[i] = op->operands[i] ? lookup_value(bld, op->operands[i], op->loc) : 0;
  xo->nout = op->nresults;
  xo->out = ARENA_ARRAY(a, uint32_t, op->nresults ? op->nresults : 1);
  for (uint32_t i = 0; i < op->nresults; i++)
    xo->out[i] = define_value(bld, &op->results[i], op->loc);
  xo->nregions = op->nregions;
  xo->regions = ARENA_ARRAY(a, XBlock, op->nregions ? op->nregions : 1);
  for (uint32_t r = 0; r < op->nregions; r++)
    compile_block(bld, &op->regions[r], op->loc, &xo->regions[r]);
  check_op(bld, xo);
  if (!bld->error && (xo->kind == OP_FOR || xo->kind == OP_WHILE)) alloc_loop_scratch(bld, xo);
}

static void compile_block(Builder *bld, const Block *b, SrcLoc loc, XBlock *out) {
  Arena *a = &bld->ip->arena;
  out->nargs = b->nargs;
  out->args = ARENA_ARRAY(a, uint32_t, b->nargs ? b->nargs : 1);
  for (uint32_t i = 0; i < b->nargs; i++) out->args[i] = define_value(bld, &b->args[i], loc);
  uint32_t nops = 0;
  for (const Op *op = b->first; op; op = op->next) nops++;
  out->nops = nops;
  out->ops = ARENA_ARRAY(a, XOp, nops ? nops : 1);
  uint32_t i = 0;
  for (const Op *op = b->first; op; op = op->next) compile_op(bld, op, &out->ops[i++]);
  out->term = NULL;
  if (nops && (op_info[out->ops[nops - 1].kind].flags & OPF_TERM)) out->term = &out->ops[nops - 1];
}

static void compile_func(Interp *ip) {
  Builder bld;
  memset(&bld, 0, sizeof bld);
  bld.ip = ip;
  uint32_t count = ir_count_values(&ip->func->body);
  bld.map.cap = 16;
  while (bld.map.cap <= 2 * count) bld.map.cap *= 2;
  bld.map.keys = calloc(bld.map.cap, sizeof *bld.map.keys);
  bld.map.ids = calloc(bld.map.cap, sizeof *bld.map.ids);
  ip->ntiles = count;
  ip->tiles = ARENA_ARRAY(&ip->arena, Tile, count ? count : 1);
  if (!bld.map.keys || !bld.map.ids) {
    build_error(&bld, ip->func->loc, "out of memory");
  } else {
    compile_block(&bld, &ip->func->body, ip->func->loc, &ip->body);
  }
  free(bld.map.keys);
  free(bld.map.ids);
  if (bld.error) {
    StrBuf sb;
    sb_init(&sb);
    if (bld.error_loc.line)
      sb_printf(&sb, "%s:%u:%u: error: %s", ip->source_name, bld.error_loc.line,
                bld.error_loc.col, bld.error);
    else
      sb_printf(&sb, "%s: error: %s", ip->source_name, bld.error);
    ip->build_error = sb_take(&sb);
  }
}

/* ---- public set-up ------------------------------------------------------ */

static char *dup_string(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

Interp *interp_new(const Func *f, const char *source_name) {
  Interp *ip = calloc(1, sizeof *ip);
  if (!ip) return NULL;
  arena_init(&ip->arena);
  ip->func = f;
  ip->source_name = dup_string(source_name ? source_name : INTERP_UNNAMED_SOURCE);
  ip->max_steps = INTERP_DEFAULT_MAX_STEPS;
  ip->last_buf = -1;
  ip->out = stdout;
  if (!ip->source_name) {
    free(ip);
    return NULL;
  }
  compile_func(ip);
  return ip;
}

void interp_free(Interp *ip) {
  if (!ip) return;
  for (int i = 0; i < ip->nbufs; i++) free(ip->bufs[i].name);
  free(ip->bufs);
  free(ip->build_error);
  free(ip->error);
  free(ip->source_name);
  arena_free(&ip->arena);
  free(ip);
}

void interp_add_buffer(Interp *ip, void *base, size_t bytes, const char *name) {
  if (ip->nbufs == ip->capbufs) {
    int cap = ip->capbufs ? ip->capbufs * 2 : INTERP_INITIAL_BUFFERS;
    Buffer *b = realloc(ip->bufs, sizeof(Buffer) * (size_t)cap);
    if (!b) return; /* the buffer stays unregistered: accesses to it fail */
    ip->bufs = b;
    ip->capbufs = cap;
  }
  char *copy = dup_string(name ? name : "?");
  if (!copy) return; /* as above */
  Buffer *b = &ip->bufs[ip->nbufs++];
  b->base = (uint64_t)(uintptr_t)base;
  b->size = bytes;
  b->name = copy;
}

void interp_set_max_steps(Interp *ip, uint64_t max_steps) { ip->max_steps = max_steps; }

void interp_set_time_limit(Interp *ip, double seconds) { ip->max_seconds = seconds > 0 ? seconds : 0; }

void interp_set_output(Interp *ip, FILE *out) { ip->out = out; }

/* ---- value copies ------------------------------------------------------- */

static void copy_tile(Interp *ip, uint32_t dst, uint32_t src) {
  if (dst == src) return;
  memcpy(ip->tiles[dst].data, ip->tiles[src].data, sizeof(Slot) * (size_t)ip->tiles[dst].n);
}

static void copy_tiles(Interp *ip, const uint32_t *dst, const uint32_t *src, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) copy_tile(ip, dst[i], src[i]);
}

/* Assigns src[i] to dst[i] for all i as one parallel assignment: a yield
 * may permute the loop arguments (yield %b, %a), so every source is copied
 * into the loop's scratch first, and the scratch buffers then change places
 * with the destinations' buffers. */
static void assign_parallel(Interp *ip, const XOp *loop, const uint32_t *dst, const uint32_t *src,
                            uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    memcpy(loop->scratch[i], ip->tiles[src[i]].data, sizeof(Slot) * (size_t)ip->tiles[src[i]].n);
  for (uint32_t i = 0; i < n; i++) {
    Slot *old = ip->tiles[dst[i]].data;
    ip->tiles[dst[i]].data = loop->scratch[i];
    loop->scratch[i] = old;
  }
}

/* ---- control flow -------------------------------------------------------- */

static bool exec_block(Interp *ip, const XBlock *b);

static bool kind_is_signed_int(ScalarKind k) { return scalar_is_int(k) && scalar_is_signed(k); }

/* Whether a step is negative in the loop variable's kind. */
static bool step_is_negative(Slot step, ScalarKind k) { return kind_is_signed_int(k) && step.i < 0; }

/* Advances iv by step; false when the next value leaves the kind's range
 * (then it is past any bound, so the loop is over). No C overflow. */
static bool advance_iv(Slot *iv, Slot step, ScalarKind k) {
  if (kind_is_signed_int(k)) {
    if (step.i > 0 ? iv->i > INT64_MAX - step.i : iv->i < INT64_MIN - step.i) return false;
    int64_t next = iv->i + step.i;
    if (num_wrap_int((uint64_t)next, k).i != next) return false;
    iv->i = next;
    return true;
  }
  if (iv->u > UINT64_MAX - step.u) return false;
  uint64_t next = iv->u + step.u;
  if (num_wrap_int(next, k).u != next) return false;
  iv->u = next;
  return true;
}

static bool exec_for(Interp *ip, const XOp *xo) {
  const XBlock *body = &xo->regions[0];
  ScalarKind k = (ScalarKind)ip->tiles[xo->in[0]].type.kind;
  Slot iv = ip->tiles[xo->in[0]].data[0];
  Slot hi = ip->tiles[xo->in[1]].data[0];
  Slot step = ip->tiles[xo->in[2]].data[0];
  uint32_t n = xo->nout;
  if (step.u == 0) return interp_fail(ip, xo, "for loop step is zero");
  NumCmp keep_going = step_is_negative(step, k) ? NUM_GT : NUM_LT;
  copy_tiles(ip, body->args + 1, xo->in + 3, n);
  while (num_cmp(keep_going, iv, hi, k)) {
    if (!interp_charge(ip, xo, 1)) return false;
    ip->tiles[body->args[0]].data[0] = iv;
    if (!exec_block(ip, body)) return false;
    if (ip->returned) return true;
    assign_parallel(ip, xo, body->args + 1, body->term->in, n);
    if (!advance_iv(&iv, step, k)) break;
  }
  copy_tiles(ip, xo->out, body->args + 1, n);
  return true;
}

static bool exec_if(Interp *ip, const XOp *xo) {
  bool cond = ip->tiles[xo->in[0]].data[0].u & 1;
  const XBlock *taken = &xo->regions[cond ? 0 : 1];
  if (!exec_block(ip, taken)) return false;
  if (ip->returned || xo->nout == 0) return true;
  copy_tiles(ip, xo->out, taken->term->in, xo->nout);
  return true;
}

static bool exec_while(Interp *ip, const XOp *xo) {
  const XBlock *before = &xo->regions[0], *after = &xo->regions[1];
  uint32_t n = xo->nin;
  copy_tiles(ip, before->args, xo->in, n);
  for (;;) {
    if (!interp_charge(ip, xo, 1)) return false;
    if (!exec_block(ip, before)) return false;
    if (ip->returned) return true;
    if (!(ip->tiles[before->term->in[0]].data[0].u & 1)) break;
    copy_tiles(ip, after->args, before->args, n);
    if (!exec_block(ip, after)) return false;
    if (ip->returned) return true;
    assign_parallel(ip, xo, before->args, after->term->in, n);
  }
  copy_tiles(ip, xo->out, before->args, n);
  return true;
}

/* Element operations an op is charged: its largest tile (at least 1). */
static uint64_t op_cost(const Interp *ip, const XOp *xo) {
  int64_t cost = 1;
  for (uint32_t i = 0; i < xo->nin; i++)
    if (ip->tiles[xo->in[i]].n > cost) cost = ip->tiles[xo->in[i]].n;
  for (uint32_t i = 0; i < xo->nout; i++)
    if (ip->tiles[xo->out[i]].n > cost) cost = ip->tiles[xo->out[i]].n;
  return (uint64_t)cost;
}

static bool exec_op(Interp *ip, const XOp *xo) {
  switch (xo->kind) {
  case OP_FOR: return exec_for(ip, xo);
  case OP_IF: return exec_if(ip, xo);
  case OP_WHILE: return exec_while(ip, xo);
  case OP_YIELD: return true; /* the enclosing op reads its operands */
  case OP_RETURN: ip->returned = true; return true;
  default: break;
  }
  if (!interp_charge(ip, xo, op_cost(ip, xo))) return false;
  return interp_exec_compute(ip, xo);
}

static bool exec_block(Interp *ip, const XBlock *b) {
  for (uint32_t i = 0; i < b->nops && !ip->returned; i++)
    if (!exec_op(ip, &b->ops[i])) return false;
  return true;
}

/* ---- arguments ---------------------------------------------------------- */

/* The slot a kernel argument gives a parameter of type t. A descriptor
 * parameter's slot holds its parameter index (the memory ops look the
 * descriptor up in the arguments). */
static Slot arg_slot(const InterpArg *arg, TType t, uint32_t index) {
  Slot s;
  s.u = 0;
  ScalarKind k = (ScalarKind)t.kind;
  if (k == SK_PTR) s.u = (uint64_t)(uintptr_t)arg->p;
  else if (k == SK_DESC) s.u = index;
  else if (scalar_is_float(k)) s.f = num_round_float(arg->f, k);
  else if (scalar_is_int(k)) s = num_wrap_int((uint64_t)arg->i, k);
  return s;
}

static bool check_param_facts(Interp *ip, uint32_t i, Slot s) {
  if (!ip->func->params) return true;
  const ParamInfo *pi = &ip->func->params[i];
  ScalarKind k = (ScalarKind)ip->tiles[ip->body.args[i]].type.kind;
  const char *name = pi->name ? pi->name : "?";
  if (pi->align > 0 && k == SK_PTR && s.u % (uint64_t)pi->align != 0)
    return fail_kernel(ip, false, "argument '%s' violates align(%lld): address 0x%llx (kernel '%s')", name,
                       (long long)pi->align, (unsigned long long)s.u, ip->func->name);
  if (pi->multiple_of > 0 && scalar_is_int(k)) {
    bool ok = kind_is_signed_int(k) ? s.i % pi->multiple_of == 0
                                    : s.u % (uint64_t)pi->multiple_of == 0;
    if (!ok) {
      char value[32];
      if (kind_is_signed_int(k)) snprintf(value, sizeof value, "%lld", (long long)s.i);
      else snprintf(value, sizeof value, "%llu", (unsigned long long)s.u);
      return fail_kernel(ip, false, "argument '%s' violates multiple_of(%lld): value %s (kernel '%s')",
                         name, (long long)pi->multiple_of, value, ip->func->name);
    }
  }
  return true;
}

/* A descriptor argument: every size and stride at least 0 and the offset
 * of its last element, in bytes, within 64 bits, so that no address inside
 * the tensor overflows when a block access computes it. */
static bool check_desc_arg(Interp *ip, uint32_t i, const InterpArg *arg, TType t) {
  const char *name = ip->func->params && ip->func->params[i].name ? ip->func->params[i].name : "?";
  int64_t last = 0;
  for (int d = 0; d < t.desc_rank && d < TILE_MAX_RANK; d++) {
    int64_t size = arg->desc.shape[d], stride = arg->desc.strides[d], reach;
    if (size < 0 || stride < 0)
      return fail_kernel(ip, false,
                         "descriptor argument '%s' has %s %lld in dimension %d (must be at least 0) (kernel '%s')",
                         name, size < 0 ? "size" : "stride", (long long)(size < 0 ? size : stride), d,
                         ip->func->name);
    if (size > 0 && (__builtin_mul_overflow(size - 1, stride, &reach) || __builtin_add_overflow(last, reach, &last)))
      return fail_kernel(ip, false,
                         "descriptor argument '%s': the offset of its last element overflows 64 bits (kernel '%s')",
                         name, ip->func->name);
  }
  int64_t bytes;
  if (__builtin_mul_overflow(last, (int64_t)scalar_bytes((ScalarKind)t.pointee), &bytes) ||
      (uint64_t)bytes > UINT64_MAX - (uint64_t)(uintptr_t)arg->desc.base)
    return fail_kernel(ip, false,
                       "descriptor argument '%s': the address of its last element overflows 64 bits (kernel '%s')",
                       name, ip->func->name);
  return true;
}

static bool bind_args(Interp *ip, const InterpArg *args, int nargs) {
  uint32_t nparams = ip->body.nargs;
  if (nargs < 0 || (uint32_t)nargs != nparams || (nparams && !args))
    return fail_kernel(ip, false, "kernel '%s' takes %u arguments, %d given", ip->func->name, nparams,
                       nargs);
  ip->args = args;
  ip->nargs = nargs;
  for (uint32_t i = 0; i < nparams; i++) {
    Tile *t = &ip->tiles[ip->body.args[i]];
    if (t->type.kind == SK_DESC && !check_desc_arg(ip, i, &args[i], t->type)) return false;
    Slot s = arg_slot(&args[i], t->type, i);
    for (int64_t e = 0; e < t->n; e++) t->data[e] = s;
    if (!check_param_facts(ip, i, s)) return false;
  }
  return true;
}

/* ---- running ------------------------------------------------------------ */

/* Largest grid dimension: program ids are i32 values. */
#define INTERP_MAX_GRID_DIM ((int64_t)INT32_MAX)

static bool check_grid(Interp *ip, const int64_t grid[3]) {
  for (int d = 0; d < 3; d++) {
    if (grid[d] < 1 || grid[d] > INTERP_MAX_GRID_DIM)
      return fail_kernel(ip, false, "grid dimension %d is %lld (must be 1..%lld)", d, (long long)grid[d],
                         (long long)INTERP_MAX_GRID_DIM);
    ip->grid[d] = grid[d];
  }
  int C = func_cluster(ip->func);
  if (grid[0] % C)
    return fail_kernel(ip, false, "grid size %lld in x is not a multiple of the cluster size %d (kernel '%s' has '@cluster(%d)')",
                       (long long)grid[0], C, ip->func->name, C);
  return true;
}

/* Every program costs a step of its own, so that a grid of 2^31 programs
 * of a kernel with nothing to do (or whose ops all fold away) meets the
 * limits too. */
static bool charge_program(Interp *ip) {
  if (ip->steps >= ip->max_steps)
    return fail_kernel(ip, true, "execution limit of %llu steps exceeded", (unsigned long long)ip->max_steps);
  ip->steps++;
  if (ip->steps < ip->next_clock_check || within_time_limit(ip)) return true;
  char msg[128];
  format_time_limit(ip, msg, sizeof msg);
  return fail_kernel(ip, true, "%s", msg);
}

static bool run_grid(Interp *ip) {
  for (int64_t z = 0; z < ip->grid[2]; z++)
    for (int64_t y = 0; y < ip->grid[1]; y++)
      for (int64_t x = 0; x < ip->grid[0]; x++) {
        ip->pid[0] = x;
        ip->pid[1] = y;
        ip->pid[2] = z;
        ip->returned = false;
        if (!charge_program(ip) || !exec_block(ip, &ip->body)) return false;
      }
  return true;
}

bool interp_run(Interp *ip, const int64_t grid[3], const InterpArg *args, int nargs, char **error) {
  if (error) *error = NULL;
  free(ip->error);
  ip->error = NULL;
  ip->steps = 0;
  ip->start_seconds = ip->max_seconds > 0 ? monotonic_seconds() : 0;
  ip->next_clock_check = ip->max_seconds > 0 ? INTERP_CLOCK_CHECK_STEPS : UINT64_MAX;
  ip->last_buf = -1;
  memset(ip->pid, 0, sizeof ip->pid);
  bool ok;
  if (ip->build_error) {
    ip->error = dup_string(ip->build_error);
    ok = false;
  } else {
    ok = check_grid(ip, grid) && bind_args(ip, args, nargs) && run_grid(ip);
  }
  if (!ok && error) {
    *error = ip->error ? ip->error : dup_string("interpreter error");
    ip->error = NULL;
  }
  return ok;
}
