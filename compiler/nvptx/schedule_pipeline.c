/* schedule_pipeline.c - @pipeline(stages = N) loops: the loads that feed
 * wgmma dots go through rings of N buffers, issued P iterations ahead.
 *
 * D = 1 when the loop's only dot chains its accumulator from iteration to
 * iteration (a GEMM), so one wgmma stays in flight while the next
 * iteration's data is waited for (`wgmma_wait {pending = 1}`); else 0.
 * The ring holds the stage being read, D stages still read by wgmmas in
 * flight, and P = N - 1 - D stages being filled.
 *
 *   prologue     for j < P: if lo + j*step < hi: fill stage j with
 *                iteration j's data
 *   iteration t  wait for stage t % N; wgmma on it; wait for all but D
 *                wgmmas; release stage (t - D) % N; if iteration t + P
 *                exists: fill stage (t + P) % N with it
 *   after        wait for the last wgmma; release its stage
 *
 * Filling a stage:
 *   load_block (TMA)   the elected thread waits until the stage is empty
 *                      (empty[s]: every warpgroup arrives when its wgmmas
 *                      on the stage are done), announces the bytes on
 *                      full[s] and issues the copies; everyone waits on
 *                      full[s] before reading;
 *   load (cp.async)    every thread copies its 16-byte pieces (masked-off
 *                      ones are zero-filled) and commits a group, one per
 *                      iteration even when empty; before reading, a thread
 *                      waits until at most P - 1 of its groups are open,
 *                      fences, and a barrier makes everyone's copies
 *                      visible; the same barrier tells that every
 *                      warpgroup is past the wgmma that read the stage
 *                      about to be refilled.
 * The address arithmetic of each load (pure ops of the body that depend
 * on the induction variable) is copied to compute an iteration ahead.
 * Loads that cannot go through a ring (other values than 0 for masked-off
 * elements, addresses that depend on other loop-carried values, pieces
 * smaller than 4 bytes) stay ordinary loads.
 */
#include <string.h>

#include "../layout/smem.h"
#include "schedule_internal.h"

/* Candidates per loop: two operands of a few dots. */
#define PIPE_MAX_LOADS 8
#define PIPE_MAX_DOTS 4
/* Address ops copied per issue. */
#define PIPE_MAX_DEPS 256
/* Elementwise ops between a load and the dot operand it feeds (cast,
 * scale, cast back). */
#define PIPE_FEED_DEPTH 4
/* cp.async copies 4, 8 or 16 bytes. */
#define CP_ASYNC_MIN_BYTES 4
#define CP_ASYNC_MAX_BYTES 16

typedef struct PipeLoad {
  Op *op;       /* the load or load_block */
  bool tma;
  Value *ring;  /* smem<T>[N, shape] */
  Value *view;  /* this iteration's stage */
  bool multicast; /* the same copy in every program of the cluster */
} PipeLoad;

typedef struct Pipe {
  Sched *s;
  Op *loop;
  Block *body;
  Value *iv, *lo, *hi, *step;
  int N, D, P;
  PipeLoad loads[PIPE_MAX_LOADS];
  int nloads, ntma;
  Op *dots[PIPE_MAX_DOTS];
  bool wgmma[PIPE_MAX_DOTS]; /* dots[i] runs on wgmma (else mma.sync, register operands) */
  int ndots;
  bool readonly; /* nothing in the body writes memory: its loads can be repeated ahead */
  bool dep_loads; /* some address depends on such a load */
  Op *deps[PIPE_MAX_DEPS]; /* address ops in body order */
  int ndeps;
  Value *full, *empty;
  int64_t tx_bytes;
  int cluster; /* C when some copy is multicast (empty[s] then counts every program's consumers), else 1 */
} Pipe;

static bool in_body(const Pipe *p, const Value *v) {
  const Block *b = v->def ? v->def->parent : v->owner;
  for (; b; b = b->parent ? b->parent->parent : NULL)
    if (b == p->body) return true;
  return false;
}

static bool writes_memory(const Block *b) {
  for (const Op *op = b->first; op; op = op->next) {
    /* (the consumers' turn is an effect on no memory) */
    if ((op_info[op->kind].flags & OPF_WRITE) && op->kind != OP_TURN_WAIT && op->kind != OP_TURN_PASS) return true;
    for (int r = 0; r < op->nregions; r++)
      if (writes_memory(&op->regions[r])) return true;
  }
  return false;
}

static bool dep_listed(const Pipe *p, const Op *op) {
  for (int i = 0; i < p->ndeps; i++)
    if (p->deps[i] == op) return true;
  return false;
}

/* Adds the body ops v depends on; false if one cannot be recomputed for
 * another iteration. */
static bool add_deps(Pipe *p, Value *v) {
  if (!in_body(p, v)) return true;
  if (!v->def) return v == p->iv;
  Op *op = v->def;
  /* a pointer load (a page table, an index) can be read again for a later
   * iteration when nothing in the loop writes memory */
  bool again = (op_info[op->kind].flags & OPF_PURE) || (op->kind == OP_LOAD && p->readonly);
  if (op->parent != p->body || !again || op->nregions) return false;
  p->dep_loads |= op->kind == OP_LOAD;
  if (dep_listed(p, op)) return true;
  for (uint32_t i = 0; i < op->noperands; i++)
    if (!add_deps(p, op->operands[i])) return false;
  if (p->ndeps == PIPE_MAX_DEPS) return false;
  p->deps[p->ndeps++] = op;
  return true;
}

static bool is_zero_const(const Value *v) {
  if (!v->def || v->def->kind != OP_CONST) return false;
  return scalar_is_float(v->type.kind) ? v->def->fattr == 0 : v->def->attr[0] == 0;
}

static bool cp_async_ok(Pipe *p, const Op *ld) {
  TType t = ld->results[0].type;
  if (ld->noperands == 3 && !is_zero_const(ld->operands[2])) return false;
  int eb = scalar_bytes((ScalarKind)t.kind);
  int want = CP_ASYNC_MAX_BYTES / eb;
  const Value *mask = ld->noperands >= 2 ? ld->operands[1] : NULL;
  int w = axis_vector_width(p->s->axes, ld->operands[0], mask, want);
  return w * eb >= CP_ASYNC_MIN_BYTES;
}

static PipeLoad *find_load(Pipe *p, const Op *op) {
  for (int i = 0; i < p->nloads; i++)
    if (p->loads[i].op == op) return &p->loads[i];
  return NULL;
}

/* A dot operand that a ring can feed: a load or load_block of this body
 * whose address depends on nothing but the induction variable (and on
 * loads that can be repeated). A pointer load may also reach the operand
 * through elementwise ops of the operand's shape (a dequantizing cast and
 * scale): its ring is then read into registers; up to PIPE_FEED_DEPTH of
 * them. */
static void consider_operand(Pipe *p, Value *operand, bool is_a, bool fp8) {
  bool trans;
  Value *src = sched_strip_trans(operand, &trans);
  if (!src->def || src->def->parent != p->body) return;
  Op *op = src->def;
  for (int depth = 0; op->kind != OP_LOAD && op->kind != OP_BLOCK_LOAD; depth++) {
    if (depth == PIPE_FEED_DEPTH || !(op_info[op->kind].flags & OPF_ELEM) || !(op_info[op->kind].flags & OPF_PURE))
      return;
    Op *next = NULL; /* the one operand made by a load or an elementwise op of the body */
    for (uint32_t i = 0; i < op->noperands; i++) {
      Value *x = op->operands[i];
      if (!x->def || x->def->parent != p->body || !type_shape_eq(x->type, src->type)) continue;
      unsigned fl = op_info[x->def->kind].flags;
      if (x->def->kind != OP_LOAD && x->def->kind != OP_BLOCK_LOAD && !((fl & OPF_ELEM) && (fl & OPF_PURE))) continue;
      if (next) return;
      next = x->def;
    }
    if (!next) return;
    op = next;
    if (op->kind == OP_BLOCK_LOAD) return; /* TMA boxes feed wgmma as they are */
  }
  if (fp8 && trans != !is_a) return; /* fp8 needs K-major: A as is, B transposed */
  if (find_load(p, op) || p->nloads == PIPE_MAX_LOADS) return;
  if (op->kind == OP_LOAD && !cp_async_ok(p, op)) return;
  int saved = p->ndeps;
  uint32_t first = op->kind == OP_LOAD ? 0 : 1;
  for (uint32_t i = first; i < op->noperands; i++)
    if (!add_deps(p, op->operands[i])) {
      p->ndeps = saved;
      return;
    }
  p->loads[p->nloads++] = (PipeLoad){op, op->kind == OP_BLOCK_LOAD, NULL, NULL, false};
}

static bool is_fp8(unsigned k) { return k == SK_F8E4M3 || k == SK_F8E5M2; }

/* The deps must come out in body order for the copies to be valid. */
static void sort_deps(Pipe *p) {
  Op *listed[PIPE_MAX_DEPS];
  int nlisted = p->ndeps, n = 0;
  memcpy(listed, p->deps, sizeof(Op *) * (size_t)nlisted);
  for (Op *op = p->body->first; op; op = op->next)
    for (int i = 0; i < nlisted; i++)
      if (listed[i] == op) {
        p->deps[n++] = op;
        break;
      }
}

/* Whether v is used in b (or its regions) by an op other than `user`. */
static bool other_uses(const Block *b, const Value *v, const Op *user) {
  for (const Op *op = b->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->noperands; i++)
      if (op->operands[i] == v && op != user) return true;
    for (int r = 0; r < op->nregions; r++)
      if (other_uses(&op->regions[r], v, user)) return true;
  }
  return false;
}

/* Dots directly in the body, on any engine but FMA, counted past the
 * PIPE_MAX_DOTS that the pipeline considers. */
static int body_dots(const Pipe *p) {
  int n = 0;
  for (const Op *op = p->body->first; op; op = op->next)
    n += op->kind == OP_DOT && dot_engine(op, p->s->num_warps) != DOT_FMA;
  return n;
}

/* D = 1 when every dot of the body is a wgmma whose accumulator only
 * chains through the loop (a GEMM, or products side by side such as the
 * gate and up projections over one x tile), when the ring has min_stages
 * slots or more (without producer warps, one slot is read, D are in
 * flight and at least one is being filled). Each dot is one wgmma group,
 * so an iteration leaves ndots groups in flight. */
static int pick_overlap(const Pipe *p, int min_stages) {
  if (p->ndots < 1 || p->N < min_stages || body_dots(p) != p->ndots) return 0;
  const Op *y = p->body->last;
  if (!y || y->kind != OP_YIELD) return 0;
  for (int i = 0; i < p->ndots; i++) {
    const Op *dot = p->dots[i];
    const Value *acc = dot->operands[2];
    if (!p->wgmma[i] || acc->def || acc->owner != p->body || acc == p->iv) return 0;
    for (int j = 0; j < i; j++)
      if (p->dots[j]->operands[2] == acc) return 0; /* one accumulator each */
    uint32_t k = acc->index - 1; /* iter index */
    if (k >= y->noperands || y->operands[k] != &dot->results[0]) return 0;
    /* no other use of the accumulator or the dot's result in the body,
     * nested regions included */
    if (other_uses(p->body, acc, dot) || other_uses(p->body, &dot->results[0], y)) return 0;
  }
  return 1;
}

/* ---- building ---- */

static Value *const_like(IrBuilder *b, const Value *like, int64_t v) { return irb_const_int(b, (ScalarKind)like->type.kind, v); }

/* Index arithmetic without overflow: the induction variable's values as
 * u64 (sign- or zero-extended first), where the distance between two of
 * them is exact. The loop counts up (constant positive step), so
 * iteration t exists when lo + t*step < hi, i.e. when t*step is below
 * the distance hi - lo; computed this way, loops near the limits of their
 * type issue nothing past their last iteration. */
static Value *as_u64(IrBuilder *b, Value *x) {
  ScalarKind k = (ScalarKind)x->type.kind;
  if (scalar_is_signed(k)) x = irb_cast(b, x, type_scalar(SK_I64));
  return irb_cast(b, x, type_scalar(SK_U64));
}

/* hi - lo as u64, 0 when the loop does not run. */
static Value *span_u64(Pipe *p, IrBuilder *b) {
  Value *ran = irb_cmp(b, OP_CMP_LT, p->lo, p->hi);
  Value *d = irb_binary(b, OP_SUB, as_u64(b, p->hi), as_u64(b, p->lo));
  return irb_select(b, ran, d, irb_const_int(b, SK_U64, 0));
}

/* Whether iteration `ahead` steps after the one at `iv` exists (iv itself
 * exists: it is lo or a running iteration). */
static Value *exists_ahead(Pipe *p, IrBuilder *b, Value *iv, int64_t ahead) {
  int64_t step;
  ir_const_int(p->step, &step);
  Value *left = irb_binary(b, OP_SUB, as_u64(b, p->hi), as_u64(b, iv)); /* hi > iv */
  Value *in = irb_cmp(b, OP_CMP_LT, iv, p->hi);
  Value *far = irb_cmp(b, OP_CMP_GT, left, irb_const_int(b, SK_U64, ahead * step));
  return irb_binary(b, OP_AND, in, far);
}

static Value *view_of(IrBuilder *b, Value *ring, Value *stage) {
  TType r = ring->type;
  return irb_value(b, OP_SMEM_INDEX, 2, (Value *[]){ring, stage}, type_smem((ScalarKind)r.pointee, r.rank - 1, r.shape + 1));
}

/* Copies the address ops for iteration `iv_value` and fills `stage`. */
static void produce(Pipe *p, IrBuilder *b, Value *stage, Value *iv_value, bool first) {
  Sched *s = p->s;
  PtrMap map;
  ptrmap_init(&map, s->a);
  ptrmap_put(&map, p->iv, iv_value);
  for (int i = 0; i < p->ndeps; i++) {
    Op *c = ir_clone_op(s->a, p->deps[i], &map);
    if (b->before)
      ir_insert_before(b->before, c);
    else
      ir_append(b->block, c);
  }
  /* The rings' bytes are free for other uses before their first fill: the
   * address arithmetic of that fill may exchange values through scratch
   * shared memory there (a loaded page index laid out for a 2-D address),
   * so with loads among the deps every thread is past those reads before
   * any copy lands. */
  if (first && p->dep_loads) sched_barrier(b);
  if (p->ntma) {
    Op *w = irb_op(b, OP_MBAR_WAIT, 2, (Value *[]){p->empty, stage}, NULL);
    w->attr[0] = 1; /* only the thread that issues the copies */
    Op *ex = irb_op(b, OP_MBAR_EXPECT, 2, (Value *[]){p->full, stage}, NULL);
    ex->attr[0] = p->tx_bytes;
  }
  for (int i = 0; i < p->nloads; i++) {
    PipeLoad *l = &p->loads[i];
    Value *view = view_of(b, l->ring, stage);
    Op *op = l->op;
    if (l->tma) {
      Value *coords[TILE_MAX_RANK];
      int rank = (int)op->noperands - 1;
      for (int d = 0; d < rank; d++) {
        Value *m = ptrmap_get(&map, op->operands[1 + d]);
        coords[d] = irb_cast(b, m ? m : op->operands[1 + d], type_scalar(SK_I32));
      }
      Op *t = sched_tma_load(b, view, op->operands[0], p->full, stage, coords, rank);
      if (l->multicast) t->attr[0] = p->cluster;
    } else {
      Value *ops[3] = {view, NULL, NULL};
      for (uint32_t k = 0; k < 2 && k < op->noperands; k++) {
        Value *m = ptrmap_get(&map, op->operands[k]);
        ops[1 + k] = m ? m : op->operands[k];
      }
      irb_op(b, OP_ASYNC_COPY, op->noperands >= 2 ? 3 : 2, ops, NULL);
    }
  }
}

/* One prologue step or the in-loop issue: `if (iteration exists) fill`,
 * the iteration `ahead` steps after the one at `from`. */
static void issue(Pipe *p, IrBuilder *b, Value *stage, Value *from, int ahead, bool first) {
  int64_t step;
  ir_const_int(p->step, &step);
  IrBuilder in = irb_if(b, exists_ahead(p, b, from, ahead));
  Value *iv_value = ahead ? irb_binary(&in, OP_ADD, from, const_like(&in, p->step, ahead * step)) : from;
  produce(p, &in, stage, iv_value, first);
  if (p->ntma < p->nloads) irb_op(b, OP_ASYNC_COMMIT, 0, NULL, NULL);
}

/* With @cluster(C): a TMA copy whose coordinates are the same in all C
 * programs of a cluster (and whose loop they all run alike) is multicast:
 * each program issues a share of its boxes, which land in all of them.
 * Each slot is then filled by every program's copies, so its empty
 * barrier waits for the consumers of all C programs, and they release
 * it in all C (mbar_arrive {cluster}). */
static void decide_multicast(Pipe *p) {
  Sched *s = p->s;
  p->cluster = 1;
  int C = func_cluster(s->f);
  if (C == 1) return;
  for (int i = 0; i < p->nloads; i++) {
    PipeLoad *l = &p->loads[i];
    if (!l->tma || !sched_cluster_uniform(s, l->op, l->op->operands + 1, (int)l->op->noperands - 1)) continue;
    l->multicast = true;
    p->cluster = C;
    s->multicast_loads++;
  }
}

static void make_rings(Pipe *p) {
  Sched *s = p->s;
  decide_multicast(p);
  p->tx_bytes = 0;
  for (int i = 0; i < p->nloads; i++) {
    PipeLoad *l = &p->loads[i];
    TType t = l->op->results[0].type;
    int eb = scalar_bytes((ScalarKind)t.kind);
    int sw = l->tma ? sched_desc_box(s, l->op->operands[0])->swizzle : smem_pick_swizzle(eb, t.shape[t.rank - 1]);
    int32_t shape[TILE_MAX_RANK + 1] = {p->N};
    memcpy(shape + 1, t.shape, sizeof(int32_t) * t.rank);
    l->ring = sched_alloc_smem(s, l->op->loc, (ScalarKind)t.kind, t.rank + 1, shape, sw);
    l->ring->def->attr[2] = 1; /* dimension 0: slots */
    if (l->tma) {
      p->ntma++;
      p->tx_bytes += type_numel(t) * eb;
    }
  }
  if (p->ntma) {
    p->full = sched_alloc_mbar(s, p->loop->loc, p->N, 1, 0);
    p->empty = sched_alloc_mbar(s, p->loop->loc, p->N, s->num_warps / 4 * p->cluster, 1);
  }
}

/* (x + add) % N for a stage number x in [0, N). */
static Value *stage_plus(Pipe *p, IrBuilder *b, Value *t, int add) {
  Value *x = irb_binary(b, OP_ADD, t, irb_const_int(b, SK_I32, add));
  return irb_binary(b, OP_REM, x, irb_const_int(b, SK_I32, p->N));
}

static void release(Pipe *p, IrBuilder *b, Value *stage) {
  Op *a = irb_op(b, OP_MBAR_ARRIVE, 2, (Value *[]){p->empty, stage}, NULL);
  if (p->cluster > 1) a->attr[0] = p->cluster;
}

/* With D = 1 the loop's result is still being computed: a full wait
 * after the loop, which every later use reads instead. */
static void wait_for_loop_result(Pipe *p, IrBuilder *post) {
  for (int i = 0; i < p->ndots; i++) {
    const Value *acc = p->dots[i]->operands[2];
    Value *res = &p->loop->results[acc->index - 1];
    Op *w = irb_op(post, OP_WGMMA_WAIT, 1, (Value *[]){res}, &res->type);
    res->repl = &w->results[0];
    ir_apply_replacements(p->s->f);
    res->repl = NULL;
    w->operands[0] = res;
  }
}

/* The loads become reads of the stage; a wgmma dot then takes the read's
 * buffer itself (the read disappears when nothing else uses it), an
 * mma.sync dot its registers. The wgmma dots become wgmmas; returns the
 * last one's wait (NULL when there is none; Sched.failed after an
 * error). */
static Op *read_stage_and_compute(Pipe *p, IrBuilder *top, Value *st) {
  Sched *s = p->s;
  for (int i = 0; i < p->nloads; i++) {
    PipeLoad *l = &p->loads[i];
    l->view = view_of(top, l->ring, st);
    Value *regs = irb_value(top, OP_SMEM_LOAD, 1, (Value *[]){l->view}, l->op->results[0].type);
    l->op->results[0].repl = regs;
  }
  ir_apply_replacements(s->f);
  for (int i = 0; i < p->nloads; i++) ir_unlink(p->loads[i].op);
  /* with D = 1 the wait after dot i leaves this iteration's groups 0..i
   * in flight; defer_waits then moves it below the later dots (one more
   * pending group each), so every wait of the iteration ends up leaving
   * its ndots groups in flight and the last iteration's are complete */
  Op *last_wait = NULL;
  for (int i = 0; i < p->ndots && !s->failed; i++)
    if (p->wgmma[i]) last_wait = sched_wgmma_dot(s, p->dots[i], p->D ? i + 1 : 0);
  return last_wait;
}

static void rewrite(Pipe *p) {
  Sched *s = p->s;
  Op *loop = p->loop;
  make_rings(p);
  /* prologue: the rings may reuse bytes that threads still read (scratch,
   * buffers whose live ranges ended), so everyone is past them first */
  IrBuilder pre = irb_before(s->a, loop);
  sched_barrier(&pre);
  for (int j = 0; j < p->P; j++) issue(p, &pre, irb_const_int(&pre, SK_I32, j), p->lo, j, j == 0);
  /* iteration t = (iv - lo) / step (exact in u64): wait for stage t % N */
  IrBuilder top = irb_before(s->a, p->body->first);
  Value *tu = irb_binary(&top, OP_DIV, irb_binary(&top, OP_SUB, as_u64(&top, p->iv), as_u64(&top, p->lo)),
                         as_u64(&top, p->step));
  Value *st = irb_cast(&top, irb_binary(&top, OP_REM, tu, irb_const_int(&top, SK_U64, p->N)), type_scalar(SK_I32));
  Value *first = irb_cmp(&top, OP_CMP_EQ, tu, irb_const_int(&top, SK_U64, 0));
  if (p->ntma < p->nloads) {
    Op *w = irb_op(&top, OP_ASYNC_WAIT, 0, NULL, NULL);
    w->attr[0] = p->P - 1;
    irb_op(&top, OP_FENCE_ASYNC, 0, NULL, NULL);
    irb_op(&top, OP_BARRIER, 0, NULL, NULL);
  }
  if (p->ntma) irb_op(&top, OP_MBAR_WAIT, 2, (Value *[]){p->full, st}, NULL);
  Op *last_wait = read_stage_and_compute(p, &top, st);
  if (s->failed) return;
  /* release the stage whose wgmmas are done, then issue iteration t + P
   * (only mma.sync dots: their reads are done when the stage's reads are) */
  IrBuilder after = last_wait && last_wait->next ? irb_before(s->a, last_wait->next) : irb_at_end(s->a, p->body);
  if (p->ntma) {
    if (p->D == 0) {
      release(p, &after, st);
    } else {
      IrBuilder in = irb_if(&after, irb_binary(&after, OP_XOR, first, irb_const_int(&after, SK_I1, 1)));
      release(p, &in, stage_plus(p, &in, st, p->N - p->D));
    }
  }
  IrBuilder end = irb_at_end(s->a, p->body);
  issue(p, &end, stage_plus(p, &end, st, p->P), p->iv, p->P, false);
  /* after the loop: the last wgmma, the last release, open copy groups */
  IrBuilder post = loop->next ? irb_before(s->a, loop->next) : irb_at_end(s->a, loop->parent);
  if (p->D) {
    wait_for_loop_result(p, &post);
    if (p->ntma) {
      /* the last iteration T - 1 = (hi - lo - 1) / step, if any (u64) */
      Value *ran = irb_cmp(&post, OP_CMP_LT, p->lo, p->hi);
      IrBuilder in = irb_if(&post, ran);
      Value *span = irb_binary(&in, OP_SUB, span_u64(p, &in), irb_const_int(&in, SK_U64, 1));
      Value *last = irb_binary(&in, OP_DIV, span, as_u64(&in, p->step));
      Value *ls = irb_cast(&in, irb_binary(&in, OP_REM, last, irb_const_int(&in, SK_U64, p->N)), type_scalar(SK_I32));
      release(p, &in, ls);
    }
  }
  if (p->ntma < p->nloads) irb_op(&post, OP_ASYNC_WAIT, 0, NULL, NULL);
}

/* ---- with producer warpgroups (@warp_specialize) ---- */

/* The loop's copies issued by the producers, which run through the same
 * iterations decoupled from the consumers: iteration t of either side is
 * at position pos = ring_next(full) of its own count, slot pos % N, phase
 * pos / N; the count carries over from loop to loop (a persistent
 * kernel's tiles), so slots and phases continue where they stopped.
 *
 *   producer   wait until slot is empty (parity phase ^ 1: the first
 *              pass over the ring does not wait), announce the bytes,
 *              issue the copies of iteration t
 *   consumer   wait until slot is full (parity phase); wgmma on it; wait
 *              for all but D wgmmas; release the slot of iteration t - D
 *   after      (consumers) wait for the last wgmma, release its slot
 *
 * Both sides' ops are written into the body; the producer's are marked
 * (Sched.producer_ops) and move to the producer region when the kernel
 * is split (schedule_ws.c). */
static void mark_producer(Pipe *p, Op *op) { ptrmap_put(&p->s->producer_ops, op, (void *)1); }

static Value *slot_of(Pipe *p, IrBuilder *b, Value *pos) {
  return irb_binary(b, OP_REM, pos, irb_const_int(b, SK_I32, p->N));
}

static void rewrite_split(Pipe *p) {
  Sched *s = p->s;
  Op *loop = p->loop;
  make_rings(p);
  IrBuilder top = irb_before(s->a, p->body->first);
  Value *one = irb_const_int(&top, SK_I32, 1);
  Value *pos = irb_value(&top, OP_RING_NEXT, 2, (Value *[]){p->full, one}, type_scalar(SK_I32));
  Value *st = slot_of(p, &top, pos);
  Value *phase = irb_binary(&top, OP_DIV, pos, irb_const_int(&top, SK_I32, p->N));
  /* producer: the copies of this iteration (their address arithmetic
   * copied up here, where the consumer's copy of it dies unused) */
  PtrMap map;
  ptrmap_init(&map, s->a);
  for (int i = 0; i < p->ndeps; i++) ir_insert_before(top.before, ir_clone_op(s->a, p->deps[i], &map));
  Value *free_parity = irb_binary(&top, OP_XOR, phase, one);
  Op *w = irb_op(&top, OP_MBAR_WAIT, 3, (Value *[]){p->empty, st, free_parity}, NULL);
  w->attr[0] = 1;
  mark_producer(p, w);
  Op *ex = irb_op(&top, OP_MBAR_EXPECT, 2, (Value *[]){p->full, st}, NULL);
  ex->attr[0] = p->tx_bytes;
  mark_producer(p, ex);
  for (int i = 0; i < p->nloads; i++) {
    PipeLoad *l = &p->loads[i];
    Op *op = l->op;
    Value *view = view_of(&top, l->ring, st);
    mark_producer(p, view->def);
    Value *coords[TILE_MAX_RANK];
    int rank = (int)op->noperands - 1;
    for (int d = 0; d < rank; d++) {
      Value *m = ptrmap_get(&map, op->operands[1 + d]);
      coords[d] = irb_cast(&top, m ? m : op->operands[1 + d], type_scalar(SK_I32));
    }
    Op *t = sched_tma_load(&top, view, op->operands[0], p->full, st, coords, rank);
    if (l->multicast) t->attr[0] = p->cluster;
    mark_producer(p, t);
  }
  /* consumer: wait for the slot, read it */
  irb_op(&top, OP_MBAR_WAIT, 3, (Value *[]){p->full, st, phase}, NULL);
  Op *last_wait = read_stage_and_compute(p, &top, st);
  if (s->failed) return;
  IrBuilder after = last_wait && last_wait->next ? irb_before(s->a, last_wait->next) : irb_at_end(s->a, p->body);
  if (p->D == 0) {
    release(p, &after, st);
  } else {
    IrBuilder in = irb_if(&after, irb_cmp(&after, OP_CMP_NE, p->iv, p->lo));
    release(p, &in, stage_plus(p, &in, st, p->N - p->D));
  }
  IrBuilder post = loop->next ? irb_before(s->a, loop->next) : irb_at_end(s->a, loop->parent);
  if (p->D) {
    wait_for_loop_result(p, &post);
    /* the slot of the last iteration, if the loop ran: one before the
     * position the count has reached */
    IrBuilder in = irb_if(&post, irb_cmp(&post, OP_CMP_LT, p->lo, p->hi));
    Value *now = irb_value(&in, OP_RING_NEXT, 2, (Value *[]){p->full, irb_const_int(&in, SK_I32, 0)},
                           type_scalar(SK_I32));
    Value *last = irb_binary(&in, OP_REM, irb_binary(&in, OP_ADD, now, irb_const_int(&in, SK_I32, 2 * p->N - 1)),
                             irb_const_int(&in, SK_I32, 2 * p->N));
    release(p, &in, slot_of(p, &in, last));
  }
}

bool sched_pipeline_loop(Sched *s, Op *loop) {
  Pipe *p = ARENA_NEW(s->a, Pipe);
  memset(p, 0, sizeof *p);
  p->s = s;
  p->loop = loop;
  p->body = &loop->regions[0];
  p->iv = &p->body->args[0];
  p->lo = loop->operands[0];
  p->hi = loop->operands[1];
  p->step = loop->operands[2];
  p->N = (int)loop->attr[0];
  int64_t step;
  if (!ir_const_int(p->step, &step) || step <= 0) return false; /* only counting-up loops with a constant step */
  /* loads issued iterations ahead would cross the fences between */
  if (ir_block_has(p->body, OP_FENCE)) return false;
  p->readonly = !writes_memory(p->body);
  for (Op *op = p->body->first; op; op = op->next) {
    DotEngine e = op->kind == OP_DOT ? dot_engine(op, s->num_warps) : DOT_FMA;
    if (e == DOT_FMA || p->ndots == PIPE_MAX_DOTS) continue;
    p->wgmma[p->ndots] = e == DOT_WGMMA;
    p->dots[p->ndots++] = op;
  }
  for (int i = 0; i < p->ndots; i++) {
    Op *dot = p->dots[i];
    bool fp8 = is_fp8(dot->operands[0]->type.kind);
    if (!p->wgmma[i] || !sched_a_in_registers(dot->operands[0])) consider_operand(p, dot->operands[0], true, fp8);
    consider_operand(p, dot->operands[1], false, fp8);
  }
  if (!p->nloads) return false;
  sort_deps(p);
  p->D = pick_overlap(p, 3);
  p->P = p->N - 1 - p->D;
  if (p->P < 1) {
    p->D = 0;
    p->P = p->N - 1;
  }
  bool all_tma = true;
  for (int i = 0; i < p->nloads; i++) all_tma &= p->loads[i].tma;
  if (sched_loop_is_split(s, loop, all_tma)) {
    /* the producers keep up to N stages ahead; D = 1 needs 2 */
    p->D = pick_overlap(p, 2);
    rewrite_split(p);
  } else if (!s->failed) {
    rewrite(p);
  }
  return !s->failed;
}
