/* interp_mem.c - the interpreter's memory ops: load, store, atomics and the
 * tensor-descriptor block loads and stores, with every element access
 * checked against the buffers registered by the caller.
 *
 * A kernel under test must never corrupt or read outside the host memory it
 * was given, so each access is checked before it happens: the whole element
 * has to lie inside one registered buffer and be aligned to its size.
 * Otherwise the run stops with a message naming the element of the tile, the
 * address and where it lies relative to the nearest buffer. Masked-off lanes
 * and block elements outside the tensor never touch memory.
 */
#include <stdio.h>
#include <string.h>

#include "interp_internal.h"

/* An address at most this far outside a buffer (or within one buffer
 * length of it) is reported relative to that buffer ("16 bytes past the
 * end of buffer 'x'"); farther ones are reported as in no buffer. */
#define NEAR_BUFFER_BYTES ((uint64_t)1 << 16)

/* Longest "at element [i, j, k, l] of the tile" text. */
#define ELEMENT_TEXT_BYTES 128

/* What an access is, for messages. */
typedef struct Access {
  const XOp *xo;
  const char *verb; /* "load", "store", "atomic_add", ... */
  ScalarKind kind;  /* element kind in memory */
  TType tile;       /* tile the element index refers to */
} Access;

static Slot slot_zero(void) {
  Slot s;
  s.u = 0;
  return s;
}

/* " at element [3, 7] of the tile", or "" for a scalar. */
static void element_text(const Access *acc, int64_t flat, char *buf, size_t size) {
  buf[0] = 0;
  if (acc->tile.rank == 0) return;
  char index[ELEMENT_TEXT_BYTES];
  interp_format_index(acc->tile, flat, index, sizeof index);
  snprintf(buf, size, " at element %s of the tile", index);
}

static bool in_buffer(const Buffer *b, uint64_t addr) {
  return addr >= b->base && addr - b->base < b->size;
}

/* The buffer nearest to addr (which is in none) and its distance. */
static int nearest_buffer(const Interp *ip, uint64_t addr, uint64_t *distance) {
  int best = -1;
  for (int i = 0; i < ip->nbufs; i++) {
    const Buffer *b = &ip->bufs[i];
    uint64_t end = b->base + b->size;
    uint64_t d = addr < b->base ? b->base - addr : addr - end;
    if (best < 0 || d < *distance) {
      best = i;
      *distance = d;
    }
  }
  return best;
}

/* Reports an access to an address outside every buffer. */
static bool report_outside(Interp *ip, const Access *acc, int64_t flat, uint64_t addr) {
  char elem[ELEMENT_TEXT_BYTES + 32];
  element_text(acc, flat, elem, sizeof elem);
  const char *kind = scalar_name(acc->kind);
  unsigned long long a = (unsigned long long)addr;
  uint64_t dist = 0;
  int i = nearest_buffer(ip, addr, &dist);
  if (i < 0 || (dist > NEAR_BUFFER_BYTES && dist > ip->bufs[i].size))
    return interp_fail(ip, acc->xo, "out-of-bounds %s of %s%s: address 0x%llx is in no buffer",
                       acc->verb, kind, elem, a);
  const Buffer *b = &ip->bufs[i];
  const char *where = addr < b->base ? "before the start" : "past the end";
  return interp_fail(ip, acc->xo,
                     "out-of-bounds %s of %s%s: address 0x%llx is %llu bytes %s of buffer '%s' "
                     "(%llu bytes)",
                     acc->verb, kind, elem, a, (unsigned long long)dist, where, b->name,
                     (unsigned long long)b->size);
}

/* Slow path of check_access: finds the buffer, reports problems. */
static bool check_access_slow(Interp *ip, const Access *acc, int64_t flat, uint64_t addr) {
  uint64_t bytes = (uint64_t)scalar_bytes(acc->kind);
  int found = -1;
  for (int i = 0; i < ip->nbufs && found < 0; i++)
    if (in_buffer(&ip->bufs[i], addr)) found = i;
  if (found < 0) return report_outside(ip, acc, flat, addr);
  const Buffer *b = &ip->bufs[found];
  char elem[ELEMENT_TEXT_BYTES + 32];
  element_text(acc, flat, elem, sizeof elem);
  if (addr % bytes != 0)
    return interp_fail(ip, acc->xo,
                       "misaligned %s of %s%s: address 0x%llx is not a multiple of %llu (in "
                       "buffer '%s')",
                       acc->verb, scalar_name(acc->kind), elem, (unsigned long long)addr,
                       (unsigned long long)bytes, b->name);
  uint64_t room = b->size - (addr - b->base);
  if (room < bytes)
    return interp_fail(ip, acc->xo,
                       "out-of-bounds %s of %s%s: the %llu bytes at address 0x%llx end %llu bytes "
                       "past the end of buffer '%s' (%llu bytes)",
                       acc->verb, scalar_name(acc->kind), elem, (unsigned long long)bytes,
                       (unsigned long long)addr, (unsigned long long)(bytes - room), b->name,
                       (unsigned long long)b->size);
  ip->last_buf = found;
  return true;
}

/* True when the element of acc's kind at addr may be accessed; otherwise
 * records the error. The last buffer hit is tried first. */
static bool check_access(Interp *ip, const Access *acc, int64_t flat, uint64_t addr) {
  if (ip->last_buf >= 0) {
    const Buffer *b = &ip->bufs[ip->last_buf];
    uint64_t bytes = (uint64_t)scalar_bytes(acc->kind);
    if (addr >= b->base && b->size >= bytes && addr - b->base <= b->size - bytes &&
        addr % bytes == 0)
      return true;
  }
  return check_access_slow(ip, acc, flat, addr);
}

static void *host(uint64_t addr) { return (void *)(uintptr_t)addr; }

static Access make_access(const XOp *xo, const Tile *ptr, TType tile) {
  Access acc = {xo, op_info[xo->kind].name, (ScalarKind)ptr->type.pointee, tile};
  return acc;
}

static bool shapes_fit(Interp *ip, const XOp *xo, int64_t n) {
  for (uint32_t i = 0; i < xo->nin; i++)
    if (interp_in(ip, xo, i)->n != n) return false;
  for (uint32_t i = 0; i < xo->nout; i++)
    if (interp_out(ip, xo, i)->n != n) return false;
  return true;
}

static bool malformed(Interp *ip, const XOp *xo) {
  return interp_fail(ip, xo, "malformed '%s' op (operands do not fit)", op_info[xo->kind].name);
}

/* ---- load and store ------------------------------------------------------ */

/* load (ptr) or (ptr, mask) or (ptr, mask, other). */
bool interp_exec_load(Interp *ip, const XOp *xo) {
  if (xo->nin < 1 || xo->nin > 3 || xo->nout != 1) return malformed(ip, xo);
  Tile *p = interp_in(ip, xo, 0), *r = interp_out(ip, xo, 0);
  if (p->type.kind != SK_PTR || !shapes_fit(ip, xo, r->n)) return malformed(ip, xo);
  const Slot *mask = xo->nin >= 2 ? interp_in(ip, xo, 1)->data : NULL;
  const Slot *other = xo->nin >= 3 ? interp_in(ip, xo, 2)->data : NULL;
  Access acc = make_access(xo, p, p->type);
  for (int64_t i = 0; i < r->n; i++) {
    if (mask && !(mask[i].u & 1)) {
      r->data[i] = other ? other[i] : slot_zero();
      continue;
    }
    uint64_t addr = p->data[i].u;
    if (!check_access(ip, &acc, i, addr)) return false;
    r->data[i] = num_load(host(addr), acc.kind);
  }
  return true;
}

/* store (ptr, value) or (ptr, value, mask). */
bool interp_exec_store(Interp *ip, const XOp *xo) {
  if (xo->nin < 2 || xo->nin > 3) return malformed(ip, xo);
  Tile *p = interp_in(ip, xo, 0), *v = interp_in(ip, xo, 1);
  if (p->type.kind != SK_PTR || !shapes_fit(ip, xo, p->n)) return malformed(ip, xo);
  const Slot *mask = xo->nin >= 3 ? interp_in(ip, xo, 2)->data : NULL;
  Access acc = make_access(xo, p, p->type);
  for (int64_t i = 0; i < p->n; i++) {
    if (mask && !(mask[i].u & 1)) continue;
    uint64_t addr = p->data[i].u;
    if (!check_access(ip, &acc, i, addr)) return false;
    num_store(host(addr), v->data[i], acc.kind);
  }
  return true;
}

/* ---- atomics ------------------------------------------------------------- */

static NumBinop atomic_binop(OpKind k) {
  switch (k) {
  case OP_ATOMIC_MAX: return NUM_MAX;
  case OP_ATOMIC_MIN: return NUM_MIN;
  case OP_ATOMIC_AND: return NUM_AND;
  case OP_ATOMIC_OR: return NUM_OR;
  case OP_ATOMIC_XOR: return NUM_XOR;
  default: return NUM_ADD;
  }
}

/* The value an atomic leaves in memory, given the old one. */
static bool atomic_update(OpKind op, NumBinop bop, Slot old, Slot cmp, Slot val, ScalarKind k,
                          Slot *out) {
  switch (op) {
  case OP_ATOMIC_XCHG: *out = val; return true;
  case OP_ATOMIC_CAS:
    *out = val;
    return num_encode(old, k) == num_encode(cmp, k);
  default: *out = num_binop(bop, old, val, k, NULL); return true;
  }
}

/* atomic_* (ptr, value[, mask]); atomic_cas (ptr, cmp, value[, mask]).
 * Lanes are applied in element order; each returns the old value. */
bool interp_exec_atomic(Interp *ip, const XOp *xo) {
  bool cas = xo->kind == OP_ATOMIC_CAS;
  uint32_t nvals = cas ? 3 : 2;
  if (xo->nin < nvals || xo->nin > nvals + 1 || xo->nout != 1) return malformed(ip, xo);
  Tile *p = interp_in(ip, xo, 0), *r = interp_out(ip, xo, 0);
  if (p->type.kind != SK_PTR || !shapes_fit(ip, xo, p->n)) return malformed(ip, xo);
  const Slot *cmp = cas ? interp_in(ip, xo, 1)->data : NULL;
  const Slot *val = interp_in(ip, xo, nvals - 1)->data;
  const Slot *mask = xo->nin > nvals ? interp_in(ip, xo, nvals)->data : NULL;
  Access acc = make_access(xo, p, p->type);
  NumBinop bop = atomic_binop((OpKind)xo->kind);
  for (int64_t i = 0; i < p->n; i++) {
    if (mask && !(mask[i].u & 1)) {
      r->data[i] = slot_zero();
      continue;
    }
    uint64_t addr = p->data[i].u;
    if (!check_access(ip, &acc, i, addr)) return false;
    Slot old = num_load(host(addr), acc.kind), now;
    if (atomic_update((OpKind)xo->kind, bop, old, cmp ? cmp[i] : old, val[i], acc.kind, &now))
      num_store(host(addr), now, acc.kind);
    r->data[i] = old;
  }
  return true;
}

/* ---- tensor descriptors ---------------------------------------------------- */

/* Row alignment of load_block/store_block boxes (TMA, see above). */
#define BLOCK_ROW_ALIGN_BYTES 16

/* A block access resolved: the descriptor and the box's offsets. */
typedef struct BlockAccess {
  const InterpArg *desc;
  ScalarKind kind;
  int rank;
  int64_t offset[TILE_MAX_RANK];
} BlockAccess;

/* Resolves the descriptor operand (its slot holds the parameter index) and
 * the `rank` scalar offsets starting at operand `first_offset`. The box is
 * the tile `box`. */
static bool resolve_block(Interp *ip, const XOp *xo, uint32_t first_offset, const Tile *box,
                          BlockAccess *ba) {
  Tile *d = interp_in(ip, xo, 0);
  uint64_t index = d->data[0].u;
  if (d->type.kind != SK_DESC || index >= (uint64_t)ip->nargs) return malformed(ip, xo);
  TType pt = ip->tiles[ip->body.args[index]].type;
  if (pt.kind != SK_DESC) return malformed(ip, xo);
  ba->desc = &ip->args[index];
  ba->kind = (ScalarKind)pt.pointee;
  ba->rank = pt.desc_rank;
  if (ba->rank < 1 || ba->rank > TILE_MAX_RANK || box->type.rank != ba->rank ||
      xo->nin != first_offset + (uint32_t)ba->rank)
    return malformed(ip, xo);
  for (int i = 0; i < ba->rank; i++) {
    Tile *o = interp_in(ip, xo, first_offset + (uint32_t)i);
    if (o->n != 1) return malformed(ip, xo);
    ScalarKind ok = (ScalarKind)o->type.kind;
    bool huge = !scalar_is_signed(ok) && o->data[0].u > (uint64_t)INT64_MAX;
    ba->offset[i] = huge ? INT64_MAX : o->data[0].i;
  }
  /* A TMA copy starts its rows on 16 bytes: the offset in the last
   * dimension is a multiple of 16 bytes (the GPU stops the kernel
   * otherwise). */
  int64_t eb = scalar_bytes(ba->kind), last = ba->offset[ba->rank - 1];
  /* Elements per row alignment, not bytes: last * eb could overflow. */
  if (last % (BLOCK_ROW_ALIGN_BYTES / eb))
    return interp_fail(ip, xo,
                       "%s offset %lld in the last dimension is not a multiple of %lld elements (%d bytes, the "
                       "alignment of a TMA copy's rows)",
                       xo->op->kind == OP_BLOCK_LOAD ? "load_block" : "store_block", (long long)last,
                       (long long)(BLOCK_ROW_ALIGN_BYTES / eb), BLOCK_ROW_ALIGN_BYTES);
  return true;
}

/* Address of box element `idx` (box coordinates), or false when the
 * element lies outside the tensor. In 64-bit signed arithmetic with every
 * step checked: interp_run checked when binding the arguments that the
 * last element's offset fits (sizes and strides are at least 0), so for
 * an element inside the tensor nothing overflows, and an overflow, should
 * one happen anyway, counts as outside the tensor rather than wrapping to
 * some other address. */
static bool block_address(const BlockAccess *ba, const int64_t *idx, uint64_t *addr) {
  int64_t elems = 0;
  for (int d = 0; d < ba->rank; d++) {
    int64_t c, term;
    if (__builtin_add_overflow(ba->offset[d], idx[d], &c)) return false;
    if (c < 0 || c >= ba->desc->desc.shape[d]) return false;
    if (__builtin_mul_overflow(c, ba->desc->desc.strides[d], &term) || __builtin_add_overflow(elems, term, &elems))
      return false;
  }
  int64_t bytes;
  if (__builtin_mul_overflow(elems, (int64_t)scalar_bytes(ba->kind), &bytes)) return false;
  *addr = (uint64_t)(uintptr_t)ba->desc->desc.base + (uint64_t)bytes;
  return true;
}

static void next_index(int64_t *idx, const TType *t) {
  for (int d = t->rank - 1; d >= 0; d--) {
    if (++idx[d] < t->shape[d]) return;
    idx[d] = 0;
  }
}

/* block_load (desc, offsets...) -> T[box]; outside the tensor reads 0. */
bool interp_exec_block_load(Interp *ip, const XOp *xo) {
  Tile *r = interp_out(ip, xo, 0);
  BlockAccess ba;
  if (xo->nin < 1 || !resolve_block(ip, xo, 1, r, &ba)) return false;
  Access acc = {xo, "block_load", ba.kind, r->type};
  int64_t idx[TILE_MAX_RANK] = {0};
  for (int64_t i = 0; i < r->n; i++, next_index(idx, &r->type)) {
    uint64_t addr;
    if (!block_address(&ba, idx, &addr)) {
      r->data[i] = slot_zero();
      continue;
    }
    if (!check_access(ip, &acc, i, addr)) return false;
    r->data[i] = num_load(host(addr), ba.kind);
  }
  return true;
}

/* block_store (desc, value, offsets...); outside the tensor is skipped. */
bool interp_exec_block_store(Interp *ip, const XOp *xo) {
  if (xo->nin < 2) return malformed(ip, xo);
  Tile *v = interp_in(ip, xo, 1);
  BlockAccess ba;
  if (!resolve_block(ip, xo, 2, v, &ba)) return false;
  Access acc = {xo, "block_store", ba.kind, v->type};
  int64_t idx[TILE_MAX_RANK] = {0};
  for (int64_t i = 0; i < v->n; i++, next_index(idx, &v->type)) {
    uint64_t addr;
    if (!block_address(&ba, idx, &addr)) continue;
    if (!check_access(ip, &acc, i, addr)) return false;
    num_store(host(addr), v->data[i], ba.kind);
  }
  return true;
}
