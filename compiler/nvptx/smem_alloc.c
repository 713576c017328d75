/* smem_alloc.c - placing shared-memory buffers by live range (see
 * smem_alloc.h). First fit, largest buffers first: with a handful of
 * buffers per kernel this is as good as anything cleverer, and the result
 * is easy to read in --emit=lowered (each alloc's offset).
 */
#include "smem_alloc.h"

#include <stdio.h>
#include <string.h>

#include "../layout/smem.h"

/* Every data buffer starts on a swizzle repeat (1024 bytes): TMA writes
 * and wgmma reads swizzle on absolute address bits, and plain stores
 * swizzle relative to the buffer, so the two agree only there. */
#define BUFFER_ALIGN SMEM_SWIZZLE_ALIGN
#define MBAR_BYTES 8
#define SCRATCH_ALIGN 16
/* Buffers named in a budget message. */
#define BUDGET_MAX_NAMED 8

typedef struct Numbering {
  uint32_t *end; /* end[n]: last number inside op n (n itself for plain ops) */
  uint32_t n, cap;
  Arena *arena;
} Numbering;

static uint32_t number_block(Numbering *nb, Block *b) {
  uint32_t last = nb->n ? nb->n - 1 : 0;
  for (Op *op = b->first; op; op = op->next) {
    uint32_t me = nb->n++;
    if (nb->n > nb->cap) {
      uint32_t cap = nb->cap ? nb->cap * 2 : 256;
      nb->end = arena_grow(nb->arena, nb->end, sizeof(uint32_t), nb->cap, cap);
      nb->cap = cap;
    }
    op->scratch = me;
    last = me;
    for (int r = 0; r < op->nregions; r++) last = number_block(nb, &op->regions[r]);
    nb->end[me] = last;
  }
  return last;
}

static Op *root_alloc(const Value *v) {
  while (v->def && v->def->kind == OP_SMEM_INDEX) v = v->def->operands[0];
  return v->def;
}

static SmemBuf *buf_of(SmemPlan *p, const Op *alloc) {
  for (int i = 0; i < p->nbufs; i++)
    if (p->bufs[i].alloc == alloc) return &p->bufs[i];
  return NULL;
}

static void extend(SmemBuf *b, uint32_t lo, uint32_t hi) {
  if (lo < b->start) b->start = lo;
  if (hi > b->end) b->end = hi;
}

/* Uses: the op itself, and every loop around it, whole. */
static void note_uses(SmemPlan *p, const Numbering *nb, Block *blk, bool *wgmma_read) {
  for (Op *op = blk->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->noperands; i++) {
      if (!type_is_buffer(op->operands[i]->type) || op->kind == OP_SMEM_INDEX) continue;
      SmemBuf *b = buf_of(p, root_alloc(op->operands[i]));
      if (!b) continue;
      extend(b, op->scratch, op->scratch);
      for (Op *up = op->parent->parent; up; up = up->parent->parent)
        if (up->kind == OP_FOR || up->kind == OP_WHILE) extend(b, up->scratch, nb->end[up->scratch]);
      if (op->kind == OP_WGMMA) wgmma_read[b - p->bufs] = true;
    }
    for (int r = 0; r < op->nregions; r++) note_uses(p, nb, &op->regions[r], wgmma_read);
  }
}

/* The first full wait (pending 0) at or after `from`, in op numbers. */
static void full_waits(Block *blk, uint32_t *waits, int *n, int cap) {
  for (Op *op = blk->first; op; op = op->next) {
    if (op->kind == OP_WGMMA_WAIT && op->attr[0] == 0 && *n < cap) waits[(*n)++] = op->scratch;
    for (int r = 0; r < op->nregions; r++) full_waits(&op->regions[r], waits, n, cap);
  }
}

static void collect_allocs(SmemPlan *p, Block *blk) {
  for (Op *op = blk->first; op; op = op->next) {
    if (op->kind == OP_SMEM_ALLOC || op->kind == OP_MBAR_ALLOC) {
      TType t = op->results[0].type;
      uint32_t bytes = op->kind == OP_MBAR_ALLOC ? (uint32_t)(t.shape[0] * MBAR_BYTES)
                                                 : (uint32_t)(type_numel(t) * scalar_bytes((ScalarKind)t.pointee));
      p->bufs[p->nbufs++] = (SmemBuf){op, 0, bytes, UINT32_MAX, 0};
    }
    for (int r = 0; r < op->nregions; r++) collect_allocs(p, &op->regions[r]);
  }
}

static int count_allocs(Block *blk) {
  int n = 0;
  for (Op *op = blk->first; op; op = op->next) {
    n += op->kind == OP_SMEM_ALLOC || op->kind == OP_MBAR_ALLOC;
    for (int r = 0; r < op->nregions; r++) n += count_allocs(&op->regions[r]);
  }
  return n;
}

static uint32_t align_up(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }

static bool overlaps_time(const SmemBuf *a, const SmemBuf *b) { return a->start <= b->end && b->start <= a->end; }

/* Lowest aligned offset >= lo where `b` meets no placed buffer. */
static uint32_t first_fit(const SmemPlan *p, const bool *placed, const SmemBuf *b, uint32_t lo, uint32_t align) {
  uint32_t off = align_up(lo, align);
  for (bool moved = true; moved;) {
    moved = false;
    for (int i = 0; i < p->nbufs; i++) {
      const SmemBuf *o = &p->bufs[i];
      if (!placed[i] || o == b || !overlaps_time(o, b)) continue;
      if (off < o->offset + o->bytes && o->offset < off + b->bytes) {
        off = align_up(o->offset + o->bytes, align);
        moved = true;
      }
    }
  }
  return off;
}

SmemPlan *smem_plan(Func *f, Arena *a) {
  SmemPlan *p = ARENA_NEW(a, SmemPlan);
  memset(p, 0, sizeof *p);
  p->arena = a;
  Numbering nb = {NULL, 0, 0, a};
  number_block(&nb, &f->body);
  int n = count_allocs(&f->body);
  p->bufs = ARENA_ARRAY(a, SmemBuf, n ? n : 1);
  collect_allocs(p, &f->body);
  bool *wgmma_read = ARENA_ARRAY(a, bool, n ? n : 1), *placed = ARENA_ARRAY(a, bool, n ? n : 1);
  memset(wgmma_read, 0, sizeof(bool) * (size_t)(n ? n : 1));
  memset(placed, 0, sizeof(bool) * (size_t)(n ? n : 1));
  note_uses(p, &nb, &f->body, wgmma_read);
  int nwaits = 0;
  uint32_t *waits = ARENA_ARRAY(a, uint32_t, nb.n ? nb.n : 1);
  full_waits(&f->body, waits, &nwaits, (int)nb.n);
  for (int i = 0; i < p->nbufs; i++) {
    SmemBuf *b = &p->bufs[i];
    if (b->start == UINT32_MAX) b->start = b->end = 0; /* never used */
    for (int w = 0; wgmma_read[i] && w < nwaits; w++)
      if (waits[w] >= b->end) {
        b->end = waits[w];
        break;
      }
  }
  /* mbarriers first, for the whole kernel */
  uint32_t off = 0;
  for (int i = 0; i < p->nbufs; i++) {
    SmemBuf *b = &p->bufs[i];
    if (b->alloc->kind != OP_MBAR_ALLOC) continue;
    b->offset = off;
    b->start = 0;
    b->end = UINT32_MAX;
    off += b->bytes;
    placed[i] = true;
  }
  p->scratch_base = align_up(off, SCRATCH_ALIGN);
  uint32_t data_base = off ? align_up(off, BUFFER_ALIGN) : 0;
  /* data buffers, largest first */
  for (;;) {
    int best = -1;
    for (int i = 0; i < p->nbufs; i++)
      if (!placed[i] && (best < 0 || p->bufs[i].bytes > p->bufs[best].bytes)) best = i;
    if (best < 0) break;
    SmemBuf *b = &p->bufs[best];
    b->offset = first_fit(p, placed, b, data_base, BUFFER_ALIGN);
    placed[best] = true;
  }
  p->top = p->scratch_base;
  p->peak_buf = -1;
  for (int i = 0; i < p->nbufs; i++) {
    SmemBuf *b = &p->bufs[i];
    b->alloc->attr[0] = b->offset;
    if (b->offset + b->bytes > p->top) {
      p->top = b->offset + b->bytes;
      p->peak_at = b->start;
      p->peak_buf = i;
    }
  }
  return p;
}

uint32_t smem_scratch(SmemPlan *p, uint32_t at, uint32_t bytes) {
  uint32_t off = p->scratch_base;
  for (bool moved = true; moved;) {
    moved = false;
    for (int i = 0; i < p->nbufs; i++) {
      const SmemBuf *o = &p->bufs[i];
      if (o->alloc->kind == OP_MBAR_ALLOC || at < o->start || at > o->end) continue;
      if (off < o->offset + o->bytes && o->offset < off + bytes) {
        off = align_up(o->offset + o->bytes, SCRATCH_ALIGN);
        moved = true;
      }
    }
  }
  if (off + bytes > p->top) {
    p->top = off + bytes;
    p->peak_at = at;
    p->peak_buf = -1;
  }
  return off;
}

static void describe(const SmemBuf *b, char *out, size_t size) {
  char ty[96];
  TType t = b->alloc->results[0].type;
  if (b->alloc->kind == OP_MBAR_ALLOC) {
    snprintf(out, size, "%d mbarriers (%u bytes)", t.shape[0], b->bytes);
    return;
  }
  bool ring = b->alloc->attr[2];
  type_str(type_tile((ScalarKind)t.pointee, t.rank - ring, t.shape + ring), ty, sizeof ty);
  if (ring)
    snprintf(out, size, "a ring of %d x %s for %d:%d (%u bytes)", t.shape[0], ty, b->alloc->loc.line, b->alloc->loc.col,
             b->bytes);
  else
    snprintf(out, size, "%s for %d:%d (%u bytes)", ty, b->alloc->loc.line, b->alloc->loc.col, b->bytes);
}

bool smem_check_budget(const SmemPlan *p, const Func *f, Diags *diags) {
  if (p->top <= SMEM_LIMIT_BYTES) return true;
  char list[1024] = "", one[160];
  size_t len = 0;
  int named = 0;
  /* The data buffers alive with the one that reached the top (or, for a
   * scratch peak, at the op that asked for it): they share no bytes. */
  const SmemBuf *top = p->peak_buf >= 0 ? &p->bufs[p->peak_buf] : NULL;
  for (int i = 0; i < p->nbufs && named < BUDGET_MAX_NAMED; i++) {
    const SmemBuf *b = &p->bufs[i];
    if (b->alloc->kind == OP_MBAR_ALLOC) continue;
    if (top ? !overlaps_time(b, top) : (p->peak_at < b->start || p->peak_at > b->end)) continue;
    describe(b, one, sizeof one);
    len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0, "%s%s", named ? ", " : "", one);
    named++;
  }
  diag_error(diags, f->loc,
             "GPU back end: kernel '%s' needs %u bytes of shared memory; a block has at most %u. Buffers in use at "
             "the peak: %s. Use fewer @pipeline stages or smaller blocks (BLOCK_M, BLOCK_N, BLOCK_K)",
             f->name, p->top, SMEM_LIMIT_BYTES, named ? list : "conversion scratch only");
  return false;
}
