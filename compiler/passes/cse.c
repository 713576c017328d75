/* cse.c - common subexpression elimination of pure ops.
 *
 * Two ops are equivalent when they have the same kind, the same operands
 * (the same Value*, in either order for commutative ops), the same integer
 * attributes, the same float attribute bit for bit (so NaN constants match
 * and -0.0 does not match 0.0) and the same result types.  A later
 * equivalent op is replaced by the earlier one if the earlier one dominates
 * it: it comes before it in the same block or in an enclosing block.  Ops
 * that touch memory (loads too: a store may come between) and ops with
 * regions are never merged.
 *
 * Scoping uses one hash table for the whole function plus a stack of the
 * entries in insertion order.  Entering a region remembers the stack
 * height; leaving it pops the region's entries again, most recent first.
 * With linear probing, removing the most recently inserted entry is just
 * clearing its slot: no entry still in the table was placed after it, so no
 * probe sequence runs through that slot.  The table is sized once from the
 * number of candidate ops, so it never grows, and the pass is linear.
 */
#include "passes.h"
#include "passutil.h"

#include <stdlib.h>
#include <string.h>

/* Table slots per candidate op, at least: keeps the load factor at or below
 * one half so that probe sequences stay short. */
#define CSE_SLOTS_PER_ENTRY 2
/* Smallest table, so tiny functions do not special-case anything. */
#define CSE_MIN_SLOTS 16

typedef struct CseEntry {
  Op *op;
  uint64_t hash;
} CseEntry;

typedef struct CseTable {
  uint32_t *slots; /* 0 = empty, else index+1 into entries */
  size_t mask;     /* number of slots - 1 (a power of two) */
  CseEntry *entries;
  size_t nentries;
} CseTable;

/* ---- which ops, and their keys ---------------------------------------- */

static bool candidate(const Op *op) {
  unsigned flags = ir_info(op)->flags;
  return (flags & OPF_PURE) && !(flags & (OPF_READ | OPF_WRITE)) && op->nregions == 0 &&
         op->nresults > 0;
}

/* Combines x into hash h (the constants are the usual golden-ratio and
 * murmur finalizer multipliers; any odd 64-bit constants would do). */
static uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

static uint64_t hash_type(uint64_t h, TType t) {
  h = mix(h, (uint64_t)t.kind | (uint64_t)t.pointee << 8 | (uint64_t)t.desc_rank << 16 |
                 (uint64_t)t.rank << 24);
  for (int i = 0; i < t.rank; i++) h = mix(h, (uint64_t)t.shape[i]);
  return h;
}

static uint64_t fattr_bits(const Op *op) {
  uint64_t bits;
  memcpy(&bits, &op->fattr, sizeof bits);
  return bits;
}

static uint64_t hash_op(const Op *op) {
  uint64_t h = mix(op->kind, op->noperands);
  if ((ir_info(op)->flags & OPF_COMM) && op->noperands == 2) {
    /* order-independent: the same for (a, b) and (b, a) */
    uint64_t a = (uint64_t)(uintptr_t)op->operands[0], b = (uint64_t)(uintptr_t)op->operands[1];
    h = mix(h, mix(a < b ? a : b, a < b ? b : a));
  } else {
    for (uint32_t i = 0; i < op->noperands; i++) h = mix(h, (uint64_t)(uintptr_t)op->operands[i]);
  }
  for (int i = 0; i < IR_MAX_ATTRS; i++) h = mix(h, (uint64_t)op->attr[i]);
  h = mix(h, fattr_bits(op));
  for (uint32_t i = 0; i < op->nresults; i++) h = hash_type(h, op->results[i].type);
  return h;
}

static bool same_operands(const Op *a, const Op *b) {
  if (a->noperands != b->noperands) return false;
  bool in_order = true;
  for (uint32_t i = 0; i < a->noperands; i++)
    if (a->operands[i] != b->operands[i]) in_order = false;
  if (in_order) return true;
  return (ir_info(a)->flags & OPF_COMM) && a->noperands == 2 &&
         a->operands[0] == b->operands[1] && a->operands[1] == b->operands[0];
}

static bool equivalent(const Op *a, const Op *b) {
  if (a->kind != b->kind || a->nresults != b->nresults || !same_operands(a, b)) return false;
  if (memcmp(a->attr, b->attr, sizeof a->attr) != 0 || fattr_bits(a) != fattr_bits(b)) return false;
  for (uint32_t i = 0; i < a->nresults; i++)
    if (!type_eq(a->results[i].type, b->results[i].type)) return false;
  return true;
}

/* ---- the scoped table --------------------------------------------------- */

static void count_candidates(Op *op, void *user) {
  if (candidate(op)) (*(size_t *)user)++;
}

static bool table_init(CseTable *t, Func *f) {
  size_t n = 0;
  ir_walk_block(&f->body, count_candidates, &n);
  size_t nslots = CSE_MIN_SLOTS;
  while (nslots < n * CSE_SLOTS_PER_ENTRY) nslots *= 2;
  t->slots = calloc(nslots, sizeof *t->slots);
  t->entries = malloc((n ? n : 1) * sizeof *t->entries);
  t->mask = nslots - 1;
  t->nentries = 0;
  return t->slots && t->entries;
}

static void table_free(CseTable *t) {
  free(t->slots);
  free(t->entries);
}

/* The slot holding an op equivalent to op, or the empty slot where op
 * would go. */
static size_t table_find(const CseTable *t, const Op *op, uint64_t hash) {
  size_t i = (size_t)hash & t->mask;
  while (t->slots[i]) {
    const CseEntry *e = &t->entries[t->slots[i] - 1];
    if (e->hash == hash && equivalent(e->op, op)) return i;
    i = (i + 1) & t->mask;
  }
  return i;
}

static void table_insert(CseTable *t, size_t slot, Op *op, uint64_t hash) {
  t->entries[t->nentries].op = op;
  t->entries[t->nentries].hash = hash;
  t->slots[slot] = (uint32_t)(++t->nentries);
}

/* Pops entries until only `height` remain. */
static void table_pop_to(CseTable *t, size_t height) {
  while (t->nentries > height) {
    CseEntry *e = &t->entries[t->nentries - 1];
    size_t i = (size_t)e->hash & t->mask;
    while (t->slots[i] != t->nentries) i = (i + 1) & t->mask;
    t->slots[i] = 0;
    t->nentries--;
  }
}

/* ---- the walk ----------------------------------------------------------- */

/* Replaces op by an earlier equivalent op, or records it. */
static bool cse_op(CseTable *t, Op *op) {
  uint64_t hash = hash_op(op);
  size_t slot = table_find(t, op, hash);
  if (!t->slots[slot]) {
    table_insert(t, slot, op, hash);
    return false;
  }
  Op *earlier = t->entries[t->slots[slot] - 1].op;
  for (uint32_t i = 0; i < op->nresults; i++) op->results[i].repl = &earlier->results[i];
  ir_unlink(op);
  return true;
}

static bool cse_block(CseTable *t, Block *b) {
  bool changed = false;
  for (Op *op = b->first, *next; op; op = next) {
    next = op->next;
    pass_resolve_operands(op);
    if (candidate(op)) {
      if (cse_op(t, op)) changed = true;
      continue;
    }
    for (int r = 0; r < op->nregions; r++) {
      size_t height = t->nentries;
      if (cse_block(t, &op->regions[r])) changed = true;
      table_pop_to(t, height);
    }
  }
  return changed;
}

bool pass_cse(Func *f, Arena *a) {
  (void)a;
  CseTable t;
  bool changed = false;
  if (table_init(&t, f)) {
    changed = cse_block(&t, &f->body);
    if (changed) ir_apply_replacements(f);
  }
  table_free(&t);
  return changed;
}
