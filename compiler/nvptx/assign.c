/* assign.c - layout assignment: which layout every tile value has on the
 * GPU.
 *
 * Anchors decide, in one forward pass:
 *   loads, dot results, stores' values   the canonical blocked layout of
 *                                        their shape (16-byte vectors along
 *                                        the last dimension)
 *   reductions                           the slice of their operand's layout
 *   elementwise ops                      the layout of their first operand
 *                                        that has one
 *   broadcast of a fixed value           the canonical layout of the result
 *   expand_dims, reshape, trans          derived from the operand
 *   loop-carried values                  the layout of what the body yields
 *                                        (the body is assigned twice)
 *   smem_load (16/32-bit elements)       flexible: read from the buffer in
 *                                        each layout its users want
 * Values computed only from constants, arange, program ids and scalars are
 * "flexible": they have no layout of their own; a backward pass collects
 * the layouts their users need, and the lowering computes them once in
 * each (cheap index arithmetic instead of a shared-memory conversion).
 * Where two fixed layouts meet, the lowering converts.
 *
 * A second round runs where a 1-D load (addresses with no layout of their
 * own) reaches a 2-D user only through elementwise ops, expand_dims and a
 * broadcast, and its layout is not the slice of the layout the broadcast
 * is wanted in (a page index gathered per key, then spread over the head
 * dimension): the load is given that slice, so every thread loads the
 * indices of its own rows (replicated loads, served by L1) instead of
 * exchanging them through shared memory with a barrier. The same round
 * hints a load made before a loop, whose one use is an mma.sync operand
 * inside it, that operand's layout (hint_dot_operands).
 */
#include <string.h>

#include "../layout/mma.h"
#include "../util/ptrmap.h"
#include "lower.h"

/* Passes over a loop body while its carried layouts settle. */
#define ASSIGN_LOOP_PASSES 2
/* Elementwise ops between a hinted load and its expand_dims (an index
 * computed from a loaded one: page * stride + slot). */
#define HINT_DEPTH 8
/* Values followed from a dot's result to its row reductions. */
#define ROWS_TRACKED 16
/* The largest N * K of an mma.sync dot whose rows are replicated over
 * warps rather than split (dot_mma_shape): replicas redo the products,
 * which for [16, 32] x [32, 128] (decode attention's scores) costs less
 * than the barriers of the exchanges they save. */
#define MMA_REPLICATE_MAX_NK 8192
/* Widest vector access, in bytes. */
#define VECTOR_BYTES 16

typedef struct Canon {
  int rank;
  int32_t shape[TILE_MAX_RANK];
  int vec;
  const Layout *layout;
} Canon;

struct LayoutMap {
  Arena *arena;
  int num_warps;
  const AxisAnalysis *axes;
  PtrMap infos; /* Value* -> LayoutInfo* */
  Canon *canon;
  int ncanon, capcanon;
  const Layout *scalar;
  /* Load -> layout: 1-D loads whose values only reach their 2-D users
   * through expand_dims and a broadcast take the users' slice (set between
   * the two rounds of layouts_assign). */
  PtrMap hints;
  PtrMap uses;    /* Value* -> its number of uses (as a pointer-sized integer) */
  PtrMap spreads; /* Value* -> its uses by expand_dims */
};

/* ---- helpers ---- */

LayoutInfo *layouts_get(const LayoutMap *m, const Value *v) { return ptrmap_get(&m->infos, v); }

static LayoutInfo *info_of(LayoutMap *m, const Value *v) {
  LayoutInfo *i = ptrmap_get(&m->infos, v);
  if (!i) {
    i = ARENA_NEW(m->arena, LayoutInfo);
    ptrmap_put(&m->infos, v, i);
  }
  return i;
}

static const Layout *intern(LayoutMap *m, Layout l) {
  Layout *p = ARENA_NEW(m->arena, Layout);
  *p = l;
  return p;
}

static Canon *find_canon(LayoutMap *m, int rank, const int32_t *shape) {
  for (int i = 0; i < m->ncanon; i++)
    if (m->canon[i].rank == rank && !memcmp(m->canon[i].shape, shape, sizeof(int32_t) * (size_t)rank))
      return &m->canon[i];
  return NULL;
}

static Canon *add_canon(LayoutMap *m, int rank, const int32_t *shape) {
  Canon *c = find_canon(m, rank, shape);
  if (c) return c;
  if (m->ncanon == m->capcanon) {
    int cap = m->capcanon ? m->capcanon * 2 : 16;
    m->canon = arena_grow(m->arena, m->canon, sizeof(Canon), (size_t)m->capcanon, (size_t)cap);
    m->capcanon = cap;
  }
  c = &m->canon[m->ncanon++];
  memset(c, 0, sizeof *c);
  c->rank = rank;
  memcpy(c->shape, shape, sizeof(int32_t) * (size_t)rank);
  return c;
}

const Layout *layouts_canonical(LayoutMap *m, int rank, const int32_t *shape) {
  if (rank == 0) return m->scalar;
  Canon *c = add_canon(m, rank, shape);
  if (!c->layout) {
    int vec = c->vec ? c->vec : 4;
    c->layout = intern(m, layout_default(rank, shape, m->num_warps, vec));
  }
  return c->layout;
}

static const Layout *canonical_of(LayoutMap *m, TType t) { return layouts_canonical(m, t.rank, t.shape); }

/* Widest vector per shape: the narrowest over the memory ops of that shape
 * (so tiles of one shape share one layout whatever their element types). */
static void note_memory_shape(LayoutMap *m, TType t, ScalarKind elem) {
  if (t.rank == 0) return;
  Canon *c = add_canon(m, t.rank, t.shape);
  int vec = VECTOR_BYTES / scalar_bytes(elem);
  if (!c->vec || vec < c->vec) c->vec = vec;
}

static void scan_memory_ops(LayoutMap *m, const Block *b) {
  for (Op *op = b->first; op; op = op->next) {
    const OpInfo *oi = ir_info(op);
    if ((oi->flags & (OPF_READ | OPF_WRITE)) && op->noperands > 0 && op->operands[0]->type.kind == SK_PTR)
      note_memory_shape(m, op->operands[0]->type, (ScalarKind)op->operands[0]->type.pointee);
    if (op->kind == OP_ASYNC_COPY) note_memory_shape(m, op->operands[1]->type, (ScalarKind)op->operands[1]->type.pointee);
    if (op->kind == OP_SMEM_LOAD) note_memory_shape(m, op->results[0].type, (ScalarKind)op->results[0].type.kind);
    for (int r = 0; r < op->nregions; r++) scan_memory_ops(m, &op->regions[r]);
  }
}

static const Layout *fixed_of(LayoutMap *m, const Value *v) {
  LayoutInfo *i = layouts_get(m, v);
  return i ? i->fixed : NULL;
}

static void set_fixed(LayoutMap *m, const Value *v, const Layout *l) {
  LayoutInfo *i = info_of(m, v);
  i->fixed = v->type.rank == 0 ? m->scalar : l;
}

/* ---- tensor-core layouts ---- */

/* A dot's (or wgmma's) M, N, K. */
static void dot_dims(const Op *op, int *M, int *N, int *K) {
  const TType *acc = &op->results[0].type, *a = &op->operands[0]->type;
  *M = acc->shape[0];
  *N = acc->shape[1];
  bool a_trans = op->kind == OP_WGMMA && a->kind == SK_SMEM && op->attr[0];
  *K = a_trans ? a->shape[0] : a->shape[1];
}

/* Whether the rows of a dot's result are used whole: reduced along them
 * (a softmax's max and sum) or made, through elementwise ops, the A
 * operand of another dot (attention's P), later in its block. */
static bool rows_used_whole(const Op *dot) {
  const Value *derived[ROWS_TRACKED] = {&dot->results[0]};
  int n = 1;
  for (const Op *op = dot->next; op; op = op->next)
    for (uint32_t i = 0; i < op->noperands; i++) {
      bool from = false;
      for (int j = 0; j < n && !from; j++) from = op->operands[i] == derived[j];
      if (!from) continue;
      bool reduce = op->kind == OP_REDUCE_SUM || op->kind == OP_REDUCE_MAX || op->kind == OP_REDUCE_MIN;
      if (reduce && op->attr[0] == 1) return true;
      if (op->kind == OP_DOT && i == 0) return true;
      if ((ir_info(op)->flags & OPF_ELEM) && op->nresults == 1 && n < ROWS_TRACKED) derived[n++] = &op->results[0];
      break;
    }
  return false;
}

/* The cut of a dot into mma.sync instructions. mma_shape spreads the
 * warps that M leaves over along N; a result whose rows are used whole
 * would then cross warps through shared memory (with barriers) at every
 * row reduction and on its way to the next dot's A operand. Small
 * products are rather replicated: every warp computes whole rows. */
static bool dot_mma_shape(const LayoutMap *m, const Op *op, int M, int N, int K, MmaShape *ms) {
  if (!mma_shape(M, N, K, m->num_warps, ms)) return false;
  if (ms->wn > 1 && N * K <= MMA_REPLICATE_MAX_NK && rows_used_whole(op)) return mma_shape_wn(M, N, K, m->num_warps, 1, ms);
  return true;
}

static const Layout *dot_result_layout(LayoutMap *m, const Op *op) {
  int M, N, K;
  if (op->results[0].type.rank != 2) return canonical_of(m, op->results[0].type);
  dot_dims(op, &M, &N, &K);
  DotEngine e = op->kind == OP_WGMMA ? DOT_WGMMA : dot_engine(op, m->num_warps);
  if (e == DOT_WGMMA) {
    WgmmaShape ws;
    if (wgmma_shape(M, N, K, m->num_warps, &ws)) return intern(m, layout_wgmma_acc(&ws));
  }
  if (e == DOT_MMA) {
    MmaShape ms;
    if (dot_mma_shape(m, op, M, N, K, &ms)) return intern(m, layout_mma_acc(&ms));
  }
  return canonical_of(m, op->results[0].type);
}

/* The layouts a dot wants its a and b operands in (NULL: a buffer). */
static void dot_operand_layouts(LayoutMap *m, const Op *op, const Layout **la, const Layout **lb) {
  int M, N, K;
  dot_dims(op, &M, &N, &K);
  *la = *lb = NULL;
  if (op->kind == OP_WGMMA) {
    WgmmaShape ws;
    ScalarKind ka = (ScalarKind)op->operands[0]->type.kind;
    if (ka != SK_SMEM && wgmma_shape(M, N, K, m->num_warps, &ws))
      *la = intern(m, ka == SK_F8E4M3 || ka == SK_F8E5M2 ? layout_wgmma_a_8bit(&ws) : layout_wgmma_a(&ws));
    return;
  }
  MmaShape ms;
  if (op->operands[0]->type.rank == 2 && dot_engine(op, m->num_warps) == DOT_MMA && dot_mma_shape(m, op, M, N, K, &ms)) {
    *la = intern(m, layout_mma_a(&ms));
    *lb = intern(m, layout_mma_b(&ms));
    return;
  }
  *la = canonical_of(m, op->operands[0]->type);
  *lb = canonical_of(m, op->operands[1]->type);
}

/* ---- forward pass ---- */

static void assign_block(LayoutMap *m, const Block *b);

/* First operand (of the result's rank) that has a fixed layout. */
static const Layout *first_fixed_operand(LayoutMap *m, const Op *op) {
  for (uint32_t i = 0; i < op->noperands; i++) {
    const Value *v = op->operands[i];
    if (v->type.rank == op->results[0].type.rank && v->type.rank > 0) {
      const Layout *l = fixed_of(m, v);
      if (l) return l;
    }
  }
  return NULL;
}

static void assign_loop_like(LayoutMap *m, const Op *op) {
  /* Region arguments start from the inits' layouts (unknown if flexible),
   * then take what the body yields. */
  int first_init = op->kind == OP_FOR ? 3 : 0;
  int first_arg = op->kind == OP_FOR ? 1 : 0;
  int n = (int)op->nresults;
  for (int pass = 0; pass < ASSIGN_LOOP_PASSES; pass++) {
    for (int r = 0; r < op->nregions; r++) {
      const Block *blk = &op->regions[r];
      if (op->kind == OP_FOR) set_fixed(m, &blk->args[0], m->scalar);
      for (int i = 0; i < n; i++) {
        const Value *arg = &blk->args[first_arg + i];
        const Layout *l = pass == 0 ? fixed_of(m, op->operands[first_init + i]) : fixed_of(m, &op->results[i]);
        info_of(m, arg)->fixed = arg->type.rank == 0 ? m->scalar : l;
      }
      assign_block(m, blk);
    }
    const Block *body = &op->regions[op->nregions - 1];
    const Op *yield = body->last;
    for (int i = 0; i < n; i++) {
      const Layout *l = yield && yield->kind == OP_YIELD ? fixed_of(m, yield->operands[i]) : NULL;
      if (pass > 0 && fixed_of(m, &op->results[i])) continue; /* settled */
      set_fixed(m, &op->results[i], l ? l : canonical_of(m, op->results[i].type));
    }
  }
}

static void assign_if(LayoutMap *m, const Op *op) {
  assign_block(m, &op->regions[0]);
  assign_block(m, &op->regions[1]);
  for (uint32_t i = 0; i < op->nresults; i++) {
    const Layout *l = NULL;
    for (int r = 0; r < 2 && !l; r++) {
      const Op *y = op->regions[r].last;
      if (y && y->kind == OP_YIELD) l = fixed_of(m, y->operands[i]);
    }
    set_fixed(m, &op->results[i], l ? l : canonical_of(m, op->results[i].type));
  }
}

static const Layout *derived_layout(LayoutMap *m, const Op *op, const Layout *src) {
  const TType *rt = &op->results[0].type;
  switch (op->kind) {
  case OP_EXPAND_DIMS: return intern(m, layout_expand_dims(src, (int)op->attr[0]));
  case OP_RESHAPE: return intern(m, layout_reshape(src, rt->rank, rt->shape));
  case OP_TRANS: {
    int32_t perm[TILE_MAX_RANK];
    for (int i = 0; i < rt->rank; i++) perm[i] = (int32_t)((op->attr[0] >> (4 * i)) & 0xF);
    return intern(m, layout_trans(src, perm));
  }
  default: return canonical_of(m, *rt);
  }
}

static void assign_op(LayoutMap *m, const Op *op) {
  if (op->nresults == 0) {
    for (int r = 0; r < op->nregions; r++) assign_block(m, &op->regions[r]);
    return;
  }
  const Value *res = &op->results[0];
  if (op->kind == OP_FOR || op->kind == OP_WHILE) {
    assign_loop_like(m, op);
    return;
  }
  if (type_is_buffer(res->type)) {
    info_of(m, res)->fixed = m->scalar; /* an address, the same in every thread */
    return;
  }
  if (op->kind == OP_WGMMA_WAIT) {
    for (uint32_t i = 0; i < op->nresults; i++) {
      const Layout *l = fixed_of(m, op->operands[i]);
      set_fixed(m, &op->results[i], l ? l : canonical_of(m, op->results[i].type));
    }
    return;
  }
  if (op->kind == OP_IF) {
    assign_if(m, op);
    return;
  }
  if (res->type.rank == 0) {
    set_fixed(m, res, m->scalar);
    return;
  }
  const Layout *l = NULL;
  bool flexible = false;
  switch (op->kind) {
  case OP_CONST:
  case OP_ARANGE: flexible = true; break;
  case OP_BROADCAST:
    /* A broadcast is computed in the layouts its users want (its operand
     * requested in the projection of each): broadcasting a row statistic
     * of an accumulator into that accumulator's layout then moves no
     * data. */
    flexible = true;
    break;
  case OP_EXPAND_DIMS:
  case OP_RESHAPE:
  case OP_TRANS: {
    const Layout *src = op->operands[0]->type.rank ? fixed_of(m, op->operands[0]) : NULL;
    if (!src) flexible = true;
    else l = derived_layout(m, op, src);
    break;
  }
  case OP_REDUCE_SUM: case OP_REDUCE_MAX: case OP_REDUCE_MIN: case OP_ARGMAX: case OP_ARGMIN: {
    const Layout *src = fixed_of(m, op->operands[0]);
    if (!src) src = canonical_of(m, op->operands[0]->type);
    l = intern(m, layout_slice(src, (int)op->attr[0]));
    break;
  }
  case OP_CUMSUM: /* through shared memory: any layout; its operand's */
    l = fixed_of(m, op->operands[0]);
    if (!l) l = canonical_of(m, res->type);
    break;
  case OP_DOT:
  case OP_WGMMA: l = dot_result_layout(m, op); break;
  case OP_SMEM_LOAD:
    /* Shared memory can be read in any layout: each user gets the tile
     * in the layout it wants straight from the buffer (ldmatrix for an
     * mma operand of 16-bit elements), with no conversion through
     * scratch memory and its barriers. 8-bit elements stay canonical:
     * read in an mma operand layout they would move 2 bytes at a time. */
    if (scalar_bytes((ScalarKind)res->type.kind) >= 2) flexible = true;
    else l = canonical_of(m, res->type);
    break;
  case OP_LOAD:
  case OP_ATOMIC_ADD: case OP_ATOMIC_MAX: case OP_ATOMIC_MIN: case OP_ATOMIC_AND: case OP_ATOMIC_OR:
  case OP_ATOMIC_XOR: case OP_ATOMIC_XCHG: case OP_ATOMIC_CAS:
    l = first_fixed_operand(m, op);
    if (!l && op->kind == OP_LOAD) l = ptrmap_get(&m->hints, res);
    if (!l) l = canonical_of(m, res->type);
    break;
  case OP_BLOCK_LOAD: l = canonical_of(m, res->type); break;
  default: /* elementwise */
    l = first_fixed_operand(m, op);
    flexible = l == NULL;
    break;
  }
  LayoutInfo *info = info_of(m, res);
  info->fixed = flexible ? NULL : l;
}

static void assign_block(LayoutMap *m, const Block *b) {
  for (Op *op = b->first; op; op = op->next) assign_op(m, op);
}

/* ---- backward pass: layouts flexible values are wanted in ---- */

static void want(LayoutMap *m, const Value *v, const Layout *l) {
  if (v->type.rank == 0 || !l) return;
  LayoutInfo *i = info_of(m, v);
  if (i->fixed) return;
  for (int k = 0; k < i->nwanted; k++)
    if (i->wanted[k] == l || layout_equal(i->wanted[k], l)) return;
  if (i->nwanted == i->capwanted) {
    int cap = i->capwanted ? i->capwanted * 2 : 2;
    i->wanted = arena_grow(m->arena, (void *)i->wanted, sizeof(Layout *), (size_t)i->capwanted, (size_t)cap);
    i->capwanted = cap;
  }
  i->wanted[i->nwanted++] = l;
}

/* The layout a store-like op works in: its first fixed tile operand's, or
 * the canonical one. */
const Layout *layouts_of_store(LayoutMap *m, const Op *op) {
  for (uint32_t i = 0; i < op->noperands; i++) {
    const Value *v = op->operands[i];
    if (v->type.rank > 0 && fixed_of(m, v)) return fixed_of(m, v);
  }
  return canonical_of(m, op->operands[0]->type);
}

/* Result layouts of an op: its fixed layout, or every wanted one. */
static int result_layouts(LayoutMap *m, const Value *v, const Layout ***out) {
  LayoutInfo *i = info_of(m, v);
  if (i->fixed) {
    *out = &i->fixed;
    return 1;
  }
  *out = i->wanted;
  return i->nwanted;
}

static const Layout *operand_layout_for(LayoutMap *m, const Op *op, const Value *operand, const Layout *res) {
  const TType *t = &operand->type;
  switch (op->kind) {
  case OP_BROADCAST: return intern(m, layout_project(res, t->rank, t->shape));
  case OP_EXPAND_DIMS:
  case OP_RESHAPE: return intern(m, layout_reshape(res, t->rank, t->shape));
  case OP_TRANS: {
    int32_t inv[TILE_MAX_RANK];
    for (int i = 0; i < t->rank; i++) inv[(op->attr[0] >> (4 * i)) & 0xF] = i;
    return intern(m, layout_trans(res, inv));
  }
  default: return res;
  }
}

static void want_block(LayoutMap *m, const Block *b);

static void want_yield(LayoutMap *m, const Op *y) {
  const Op *parent = y->parent->parent;
  if (!parent) return;
  bool cond_region = parent->kind == OP_WHILE && y->parent == &parent->regions[0];
  for (uint32_t i = 0; i < y->noperands && !cond_region; i++) want(m, y->operands[i], fixed_of(m, &parent->results[i]));
}

static void want_op(LayoutMap *m, const Op *op) {
  for (int r = op->nregions - 1; r >= 0; r--) want_block(m, &op->regions[r]);
  switch (op->kind) {
  case OP_YIELD: want_yield(m, op); return;
  case OP_FOR:
    for (uint32_t i = 3; i < op->noperands; i++) want(m, op->operands[i], fixed_of(m, &op->results[i - 3]));
    return;
  case OP_WHILE:
    for (uint32_t i = 0; i < op->noperands; i++) want(m, op->operands[i], fixed_of(m, &op->results[i]));
    return;
  case OP_IF: return;
  case OP_STORE: case OP_BLOCK_STORE: {
    const Layout *l = op->kind == OP_STORE ? layouts_of_store(m, op) : fixed_of(m, op->operands[1]);
    for (uint32_t i = 0; i < op->noperands; i++) want(m, op->operands[i], l);
    return;
  }
  case OP_DOT:
  case OP_WGMMA: {
    const Layout *la, *lb;
    dot_operand_layouts(m, op, &la, &lb);
    want(m, op->operands[0], la);
    want(m, op->operands[1], lb);
    want(m, op->operands[2], fixed_of(m, &op->results[0]));
    return;
  }
  case OP_WGMMA_WAIT:
    for (uint32_t i = 0; i < op->noperands; i++) want(m, op->operands[i], fixed_of(m, &op->results[i]));
    return;
  case OP_ASYNC_COPY:
    for (uint32_t i = 1; i < op->noperands; i++) want(m, op->operands[i], canonical_of(m, op->operands[i]->type));
    return;
  case OP_SMEM_STORE:
    want(m, op->operands[1], canonical_of(m, op->operands[1]->type));
    return;
  case OP_REDUCE_SUM: case OP_REDUCE_MAX: case OP_REDUCE_MIN: case OP_ARGMAX: case OP_ARGMIN:
    want(m, op->operands[0], canonical_of(m, op->operands[0]->type));
    return;
  case OP_CUMSUM:
    want(m, op->operands[0], fixed_of(m, &op->results[0]));
    return;
  default: break;
  }
  if (op->nresults == 0) return;
  const Layout **ls;
  int n = result_layouts(m, &op->results[0], &ls);
  for (int k = 0; k < n; k++)
    for (uint32_t i = 0; i < op->noperands; i++)
      if (op->operands[i]->type.rank > 0) want(m, op->operands[i], operand_layout_for(m, op, op->operands[i], ls[k]));
}

static void want_block(LayoutMap *m, const Block *b) {
  for (Op *op = b->last; op; op = op->prev) want_op(m, op);
}

/* ---- hints: gathered indices loaded where they are used ---- */

static intptr_t count_of(const PtrMap *map, const Value *v) { return (intptr_t)ptrmap_get(map, v); }

static void count_uses(LayoutMap *m, const Block *b) {
  for (Op *op = b->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->noperands; i++) {
      const Value *v = op->operands[i];
      ptrmap_put(&m->uses, v, (void *)(count_of(&m->uses, v) + 1));
      if (op->kind == OP_EXPAND_DIMS) ptrmap_put(&m->spreads, v, (void *)(count_of(&m->spreads, v) + 1));
    }
    for (int r = 0; r < op->nregions; r++) count_uses(m, &op->regions[r]);
  }
}

/* Walks back from v (rank 1, wanted in `l`) through pure elementwise ops
 * to loads whose addresses have no layout of their own, and hints them l.
 * Only where the values on the way have no other uses (v itself: only
 * expand_dims), so that nothing else sees the new layout. Returns whether
 * it hinted one. */
static bool hint_back(LayoutMap *m, const Value *v, const Layout *l, int depth) {
  const Op *d = v->def;
  if (!d || depth > HINT_DEPTH || v->type.rank != 1) return false;
  intptr_t uses = count_of(&m->uses, v);
  if (depth == 0 ? uses != count_of(&m->spreads, v) : uses != 1) return false;
  if (d->kind == OP_LOAD) {
    if (first_fixed_operand(m, d) || ptrmap_get(&m->hints, v)) return false;
    ptrmap_put(&m->hints, v, (void *)l);
    return true;
  }
  if ((ir_info(d)->flags & OPF_PE) != OPF_PE) return false;
  bool any = false;
  for (uint32_t i = 0; i < d->noperands; i++)
    if (d->operands[i]->type.rank == 1) any |= hint_back(m, d->operands[i], l, depth + 1);
  return any;
}

/* Whether a loop lies between op and the enclosing block `outer`. */
static bool loop_between(const Op *op, const Block *outer) {
  for (const Block *b = op->parent; b && b != outer; b = b->parent ? b->parent->parent : NULL)
    if (b->parent && (b->parent->kind == OP_FOR || b->parent->kind == OP_WHILE)) return true;
  return false;
}

/* An mma.sync operand loaded before the loop the dot is in (attention's
 * queries): the load is hinted the operand's layout, so that the tile is
 * not converted again in every iteration. */
static bool hint_dot_operands(LayoutMap *m, const Op *op) {
  if (op->kind != OP_DOT || dot_engine(op, m->num_warps) != DOT_MMA) return false;
  const Layout *want[2];
  dot_operand_layouts(m, op, &want[0], &want[1]);
  bool any = false;
  for (int i = 0; i < 2; i++) {
    const Value *x = op->operands[i];
    const Op *d = x->def;
    if (!d || d->kind != OP_LOAD || !want[i] || count_of(&m->uses, x) != 1 || first_fixed_operand(m, d) ||
        ptrmap_get(&m->hints, x) || !loop_between(op, d->parent) || layout_equal(fixed_of(m, x), want[i]))
      continue;
    ptrmap_put(&m->hints, x, (void *)want[i]);
    any = true;
  }
  return any;
}

/* broadcast(expand_dims(x)) whose result is wanted in W while x's layout
 * is not the slice of W: the loads x comes from are hinted that slice. */
static bool hint_block(LayoutMap *m, const Block *b) {
  bool any = false;
  for (Op *op = b->first; op; op = op->next) {
    for (int r = 0; r < op->nregions; r++) any |= hint_block(m, &op->regions[r]);
    any |= hint_dot_operands(m, op);
    if (op->kind != OP_BROADCAST || op->results[0].type.rank != 2) continue;
    const Value *e = op->operands[0];
    /* through unary elementwise ops of the expanded shape, used only
     * there (-lse[None, :] is neg(expand_dims(lse))) */
    for (int d = 0; d < HINT_DEPTH && e->def && e->def->kind != OP_EXPAND_DIMS; d++) {
      const Op *u = e->def;
      if ((ir_info(u)->flags & OPF_PE) != OPF_PE || u->noperands != 1 || count_of(&m->uses, e) != 1) break;
      e = u->operands[0];
    }
    if (!e->def || e->def->kind != OP_EXPAND_DIMS) continue;
    const Value *x = e->def->operands[0];
    LayoutInfo *ri = layouts_get(m, &op->results[0]);
    const Layout *have = fixed_of(m, x);
    if (!ri || ri->fixed || ri->nwanted < 1 || !have) continue;
    const Layout *proj = intern(m, layout_project(ri->wanted[0], e->type.rank, e->type.shape));
    const Layout *want_x = intern(m, layout_reshape(proj, x->type.rank, x->type.shape));
    if (!layout_equal(have, want_x)) any |= hint_back(m, x, want_x, 0);
  }
  return any;
}

static void assign_round(LayoutMap *m, const Func *f) {
  ptrmap_init(&m->infos, m->arena);
  for (uint32_t i = 0; i < f->body.nargs; i++) set_fixed(m, &f->body.args[i], m->scalar);
  assign_block(m, &f->body);
  want_block(m, &f->body);
}

LayoutMap *layouts_assign(const Func *f, int num_warps, const AxisAnalysis *axes, bool hints, Arena *arena) {
  LayoutMap *m = ARENA_NEW(arena, LayoutMap);
  m->arena = arena;
  m->num_warps = num_warps;
  m->axes = axes;
  ptrmap_init(&m->hints, arena);
  m->scalar = intern(m, layout_scalar(num_warps));
  scan_memory_ops(m, &f->body);
  assign_round(m, f);
  if (hints) {
    ptrmap_init(&m->uses, arena);
    ptrmap_init(&m->spreads, arena);
    count_uses(m, &f->body);
    if (hint_block(m, &f->body)) assign_round(m, f);
  }
  return m;
}

static void print_block_layouts(const LayoutMap *m, const Block *b, StrBuf *out, int depth) {
  char buf[512];
  for (Op *op = b->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->nresults; i++) {
      LayoutInfo *li = layouts_get(m, &op->results[i]);
      if (!li || op->results[i].type.rank == 0 || type_is_buffer(op->results[i].type)) continue;
      for (int d = 0; d < depth; d++) sb_puts(out, "  ");
      sb_printf(out, "%%%u (%s): ", op->results[i].id, op_info[op->kind].name);
      if (li->fixed) {
        layout_str(li->fixed, buf, sizeof buf);
        sb_printf(out, "%s\n", buf);
      } else {
        sb_printf(out, "flexible, %d layout%s\n", li->nwanted, li->nwanted == 1 ? "" : "s");
        for (int k = 0; k < li->nwanted; k++) {
          layout_str(li->wanted[k], buf, sizeof buf);
          for (int d = 0; d < depth + 2; d++) sb_puts(out, "  ");
          sb_printf(out, "%s\n", buf);
        }
      }
    }
    for (int r = 0; r < op->nregions; r++) print_block_layouts(m, &op->regions[r], out, depth + 1);
  }
}

void layouts_print(const LayoutMap *m, const Func *f, StrBuf *out) { print_block_layouts(m, &f->body, out, 0); }
