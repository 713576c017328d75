/* schedule_pair.c - two products over one A tile issued as one wgmma.
 *
 * A gated MLP multiplies each x tile by two weight tiles (gate and up):
 *
 *   acc_g = dot(x_tile, g_tile, acc_g);
 *   acc_u = dot(x_tile, u_tile, acc_u);
 *
 * As two m64nN instructions each reads the A tile from shared memory
 * (or, from registers, issues its fragment again); one m64n2N instruction
 * reads it once and covers both, when the hardware finds the second B
 * tile where the first one's next swizzle atoms would be. An N-major B
 * operand's descriptor steps from atom to atom by its leading byte
 * offset, the bytes of one atom column of the tile (K rows x 128 bytes),
 * so N / atom atoms later is exactly the end of the tile: a B tile right
 * after the first one in shared memory is read as columns N .. 2N - 1.
 * A K-major B (fp8's [N, K] tiles) whose K is one atom wide steps along
 * N by 8 rows of 128 bytes, and the rows of the next tile follow too.
 *
 * The pass finds two wgmma ops, one right after the other, that read the
 * same A, take their B tiles from the same stage of two rings of the
 * same type, and whose instructions can be twice as wide (the warpgroups
 * split only M, one instruction per warpgroup along N, 2N <= 256). It
 * interleaves the two rings into one of twice the stages, the first
 * ring's stage s becoming stage 2s and the second's 2s + 1, so that each
 * pair of tiles is adjacent; every smem_index of the two rings (the
 * producers' copies and the consumers' reads) is rewritten. The first
 * wgmma gets `pair = 1` (it issues both products and commits them as one
 * group, lower_wgmma.c), the second `pair = 2` (its result was computed
 * by the first; it issues and commits nothing), and the waits' counts of
 * groups are recounted (below). (An empty commit in place of the second
 * group would keep the counts, but ptxas makes it a real instruction, a
 * predicated-off m64n8 HGMMA, in every iteration.)
 */

#include "../layout/mma.h"
#include "../layout/smem.h"
#include "schedule_internal.h"

/* A ring's stage must start on a swizzle repeat (smem_alloc.c aligns the
 * buffers themselves to it), so that the second tile of a pair, one stage
 * after the first, is swizzled like a buffer of its own. */
#define PAIR_STAGE_ALIGN SMEM_SWIZZLE_ALIGN

/* The ring under a stage view, and the view's stage index. */
static Op *ring_of(const Value *view, Value **stage) {
  const Op *ix = view->def;
  if (!ix || ix->kind != OP_SMEM_INDEX) return NULL;
  Op *ring = ix->operands[0]->def;
  if (!ring || ring->kind != OP_SMEM_ALLOC || !ring->attr[2]) return NULL;
  *stage = ix->operands[1];
  return ring;
}

typedef struct RingUses {
  const Value *ring;
  bool only_indexed; /* every use is the ring operand of an smem_index */
} RingUses;

static void scan_uses(RingUses *u, const Block *b) {
  for (const Op *op = b->first; op && u->only_indexed; op = op->next) {
    for (uint32_t i = 0; i < op->noperands; i++)
      if (op->operands[i] == u->ring && !(op->kind == OP_SMEM_INDEX && i == 0)) u->only_indexed = false;
    for (int r = 0; r < op->nregions; r++) scan_uses(u, &op->regions[r]);
  }
}

static bool only_indexed(Sched *s, const Op *ring) {
  RingUses u = {&ring->results[0], true};
  scan_uses(&u, &s->f->body);
  return u.only_indexed;
}

static bool same_type(TType a, TType b) {
  if (a.kind != b.kind || a.pointee != b.pointee || a.rank != b.rank) return false;
  for (int d = 0; d < a.rank; d++)
    if (a.shape[d] != b.shape[d]) return false;
  return true;
}

/* Whether w1 and w2 (= w1->next) can be one instruction; their rings. */
static bool pairable(Sched *s, const Op *w1, const Op *w2, Op **r1, Op **r2) {
  if (w2->kind != OP_WGMMA || w1->attr[2] || w2->attr[2]) return false;
  if (w1->operands[0] != w2->operands[0] || w1->attr[0] != w2->attr[0] || w1->attr[1] != w2->attr[1]) return false;
  const Value *c1 = w1->operands[2], *c2 = w2->operands[2];
  if (!same_type(c1->type, c2->type) || ir_is_float_zeros(c1) != ir_is_float_zeros(c2) || c1 == c2) return false;
  Value *st1 = NULL, *st2 = NULL;
  *r1 = ring_of(w1->operands[1], &st1);
  *r2 = ring_of(w2->operands[1], &st2);
  if (!*r1 || !*r2 || *r1 == *r2 || st1 != st2) return false;
  TType t1 = (*r1)->results[0].type, t2 = (*r2)->results[0].type;
  if (!same_type(t1, t2) || t1.rank != 3 || (*r1)->attr[1] != (*r2)->attr[1] || !(*r1)->attr[1]) return false;
  SmemLayout sl;
  int eb = scalar_bytes((ScalarKind)t1.pointee);
  if (!smem_layout(2, t1.shape + 1, eb, (int)(*r1)->attr[1], &sl) || sl.bytes % PAIR_STAGE_ALIGN) return false;
  /* N-major B ([K, N]): the instruction steps along N atom column by atom
   * column, and the tile's bytes end where its next one would start.
   * K-major B ([N, K], trans_b): it steps along N by 8 rows, so the rows
   * must be the whole tile's width, K one atom wide. */
  if (w1->attr[1] ? t1.shape[2] != smem_atom_elems(&sl)
                  : t1.shape[2] % smem_atom_elems(&sl) ||
                        (uint32_t)(t1.shape[2] / smem_atom_elems(&sl)) * smem_atom_block_bytes(&sl) != sl.bytes)
    return false;
  WgmmaShape ws;
  int M = c1->type.shape[0], N = c1->type.shape[1], K = w1->attr[1] ? t1.shape[2] : t1.shape[1];
  if (!wgmma_shape(M, N, K, s->num_warps, &ws) || ws.gn != 1 || ws.n_rep != 1 || 2 * ws.inst_n > WGMMA_MAX_N) return false;
  return only_indexed(s, *r1) && only_indexed(s, *r2);
}

typedef struct Interleave {
  Sched *s;
  Value *first, *second; /* the rings' values */
} Interleave;

/* smem_index(first, i) -> smem_index(first, 2i); smem_index(second, i)
 * -> smem_index(first, 2i + 1). */
static void reindex(Interleave *iv, Block *b) {
  for (Op *op = b->first; op; op = op->next) {
    for (int r = 0; r < op->nregions; r++) reindex(iv, &op->regions[r]);
    if (op->kind != OP_SMEM_INDEX || (op->operands[0] != iv->first && op->operands[0] != iv->second)) continue;
    IrBuilder at = irb_before(iv->s->a, op);
    Value *i = op->operands[1];
    Value *two = irb_binary(&at, OP_MUL, i, irb_const_int(&at, (ScalarKind)i->type.kind, 2));
    if (op->operands[0] == iv->second) two = irb_binary(&at, OP_ADD, two, irb_const_int(&at, (ScalarKind)i->type.kind, 1));
    op->operands[0] = iv->first;
    op->operands[1] = two;
  }
}

/* ---- the waits' counts ----
 *
 * A wgmma_wait {pending = P} lets the P most recent groups run on. With a
 * pair issued as one instruction and one commit, the groups of the P most
 * recent wgmma ops before a wait are fewer: each pair counts once, and a
 * pair whose first op falls outside the window may not run on at all.
 * So P becomes the number of ops in the window other than second ops of
 * pairs. The window is found by walking back from the wait: through the
 * ops of its block, out of ifs into the block around them, and at the
 * top of a for loop's body both into the previous iteration (the body's
 * end) and, for the first iteration, to the ops before the loop (the
 * smaller count of the two holds). A walk that meets a nested region with
 * a wgmma in it, or the top of a while loop, gives up: the kernel keeps
 * its products separate. */

/* A walk's limit on ops visited (a body with fewer wgmmas than P is
 * walked round several times). */
#define PAIR_WALK_MAX_OPS 4096

static bool region_has_wgmma(const Op *op) {
  for (int r = 0; r < op->nregions; r++)
    for (const Op *o = op->regions[r].first; o; o = o->next)
      if (o->kind == OP_WGMMA || region_has_wgmma(o)) return true;
  return false;
}

typedef struct Walk {
  int64_t want;  /* wgmma ops to find (the wait's pending) */
  int visited;
  bool failed;
} Walk;

/* From op (exclusive) backwards: the wgmma ops found (n) and how many of
 * them are second ops of pairs; returns the smallest count of groups
 * over the paths the window may take. */
static int64_t walk_back(Walk *w, const Op *from, const Block *b, int64_t n, int64_t seconds) {
  for (const Op *op = from ? from->prev : b->last; op; op = op->prev) {
    if (++w->visited > PAIR_WALK_MAX_OPS) {
      w->failed = true;
      return 0;
    }
    if (op->kind == OP_WGMMA) {
      n++, seconds += op->attr[2] == 2;
      if (n == w->want) return n - seconds;
    } else if (op->nregions && region_has_wgmma(op)) {
      w->failed = true;
      return 0;
    }
  }
  const Op *parent = b->parent;
  if (!parent) return n - seconds; /* the kernel's start: no older groups */
  if (parent->kind == OP_WHILE) {
    w->failed = true;
    return 0;
  }
  int64_t outside = walk_back(w, parent, parent->parent, n, seconds);
  /* a body without products adds no groups from earlier iterations */
  if (parent->kind != OP_FOR || w->failed || !region_has_wgmma(parent)) return outside;
  int64_t again = walk_back(w, NULL, b, n, seconds); /* the previous iteration */
  return again < outside ? again : outside;
}

typedef struct WaitFix {
  Op **waits;
  int64_t *pending;
  int n, cap;
  Arena *a;
  bool failed;
} WaitFix;

static void plan_waits(WaitFix *f, Block *b) {
  for (Op *op = b->first; op && !f->failed; op = op->next) {
    for (int r = 0; r < op->nregions; r++) plan_waits(f, &op->regions[r]);
    if (op->kind != OP_WGMMA_WAIT || op->attr[0] <= 0) continue;
    Walk w = {op->attr[0], 0, false};
    int64_t p = walk_back(&w, op, b, 0, 0);
    if (w.failed) {
      f->failed = true;
      return;
    }
    if (f->n == f->cap) {
      int cap = f->cap ? 2 * f->cap : 16;
      f->waits = arena_grow(f->a, f->waits, sizeof(Op *), (size_t)f->cap, (size_t)cap);
      f->pending = arena_grow(f->a, f->pending, sizeof(int64_t), (size_t)f->cap, (size_t)cap);
      f->cap = cap;
    }
    f->waits[f->n] = op, f->pending[f->n++] = p;
  }
}

/* ---- finding the pairs ---- */

typedef struct Pairs {
  Op **first; /* the pair = 1 ops */
  int n, cap;
  Arena *a;
} Pairs;

static void find_pairs(Sched *s, Pairs *ps, Block *b) {
  for (Op *op = b->first; op; op = op->next) {
    for (int r = 0; r < op->nregions; r++) find_pairs(s, ps, &op->regions[r]);
    Op *r1, *r2;
    if (op->kind != OP_WGMMA || !op->next || !pairable(s, op, op->next, &r1, &r2)) continue;
    /* a ring in two pairs would be interleaved twice */
    bool taken = false;
    for (int i = 0; i < ps->n && !taken; i++) {
      Value *st;
      Op *q1 = ring_of(ps->first[i]->operands[1], &st), *q2 = ring_of(ps->first[i]->next->operands[1], &st);
      taken = q1 == r1 || q1 == r2 || q2 == r1 || q2 == r2;
    }
    if (taken) continue;
    if (ps->n == ps->cap) {
      int cap = ps->cap ? 2 * ps->cap : 4;
      ps->first = arena_grow(ps->a, ps->first, sizeof(Op *), (size_t)ps->cap, (size_t)cap);
      ps->cap = cap;
    }
    ps->first[ps->n++] = op;
    op->attr[2] = 1, op->next->attr[2] = 2;
    op = op->next;
  }
}

void sched_pair_products(Sched *s) {
  Pairs ps = {NULL, 0, 0, s->a};
  find_pairs(s, &ps, &s->f->body);
  if (!ps.n) return;
  WaitFix wf = {NULL, NULL, 0, 0, s->a, false};
  plan_waits(&wf, &s->f->body);
  if (wf.failed) { /* the waits cannot be recounted: no pairs */
    for (int i = 0; i < ps.n; i++) ps.first[i]->attr[2] = ps.first[i]->next->attr[2] = 0;
    return;
  }
  for (int i = 0; i < wf.n; i++) wf.waits[i]->attr[0] = wf.pending[i];
  for (int i = 0; i < ps.n; i++) {
    Value *st;
    Op *r1 = ring_of(ps.first[i]->operands[1], &st), *r2 = ring_of(ps.first[i]->next->operands[1], &st);
    Interleave iv = {s, &r1->results[0], &r2->results[0]};
    reindex(&iv, &s->f->body);
    r1->results[0].type.shape[0] *= 2;
    ir_unlink(r2);
  }
}
