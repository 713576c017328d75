/* verify_gpu.c - type rules of the GPU operations of the lowered IR
 * (ir.h lists their meaning). The scheduling pass of the GPU back end
 * (nvptx/schedule.c) creates them; checking them right after it catches a
 * malformed schedule as a message, not as a hang or a wrong number on the
 * GPU.
 */
#include <stdio.h>

#include "verify_internal.h"

#define report verify_report

/* Transaction bytes one mbarrier phase can count (PTX ISA: tx-count is
 * at most 2^20 - 1). */
#define MBAR_MAX_TX_BYTES ((1 << 20) - 1)
/* Arrivals an mbarrier can expect per phase (2^20 - 1). */
#define MBAR_MAX_COUNT ((1 << 20) - 1)

bool verify_buffer_type_problem(TType t, char *why, size_t size) {
  if (t.kind == SK_MBAR) {
    if (t.rank != 1 || t.shape[0] < 1) return snprintf(why, size, "an mbarrier array has one dimension"), true;
    return false;
  }
  if (!is_element_kind(t.pointee) || t.pointee == SK_I1)
    return snprintf(why, size, "a shared buffer holds numbers (not i1, not pointers)"), true;
  if (t.rank < 1 || t.rank > TILE_MAX_RANK) return snprintf(why, size, "a shared buffer has rank 1 to %d", TILE_MAX_RANK), true;
  /* Dimension 0 of a ring counts its slots (any number, e.g. 3 stages). */
  for (int i = 0; i < t.rank; i++)
    if (t.shape[i] < 1 || (i > 0 && (t.shape[i] & (t.shape[i] - 1))))
      return snprintf(why, size, "dimension %d is not a power of two", t.shape[i]), true;
  if (t.rank == 1 && (t.shape[0] & (t.shape[0] - 1)))
    return snprintf(why, size, "dimension %d is not a power of two", t.shape[0]), true;
  return false;
}

static TType opt(const Op *op, uint32_t i) { return op->operands[i]->type; }
static bool is_smem(TType t) { return t.kind == SK_SMEM; }
static bool is_mbar(TType t) { return t.kind == SK_MBAR; }
static bool is_i32_scalar(TType t) { return t.kind == SK_I32 && t.rank == 0; }
/* The register tile a buffer holds. */
static TType held(TType buf) { return type_with_shape(type_scalar((ScalarKind)buf.pointee), buf.rank, buf.shape); }

static bool expect(Verifier *v, const Op *op, bool cond, const char *what) {
  if (!cond) report(v, op, "%s", what);
  return cond;
}

static void check_alloc(Verifier *v, const Op *op) {
  TType r = op->results[0].type;
  if (op->kind == OP_MBAR_ALLOC) {
    expect(v, op, is_mbar(r), "result must be an mbarrier array");
    if (op->attr[1] < 1 || op->attr[1] > MBAR_MAX_COUNT) report(v, op, "arrival count %lld is out of range", (long long)op->attr[1]);
    if (op->attr[0] % 8) report(v, op, "offset %lld is not 8-byte aligned", (long long)op->attr[0]);
    if (op->attr[2] != 0 && op->attr[2] != 1) report(v, op, "first_parity must be 0 or 1");
    return;
  }
  if (!expect(v, op, is_smem(r), "result must be a shared buffer")) return;
  for (int i = op->attr[2] ? 1 : 0; i < r.rank; i++)
    if (r.shape[i] & (r.shape[i] - 1))
      report(v, op, "dimension %d is not a power of two (only dimension 0 of a ring may be any size)", r.shape[i]);
  if (op->attr[2] && r.rank < 2) report(v, op, "a ring has a dimension of slots and at least one more");
  int64_t sw = op->attr[1];
  if (sw != 0 && sw != 32 && sw != 64 && sw != 128) report(v, op, "swizzle %lld is not 0, 32, 64 or 128", (long long)sw);
  if (op->attr[0] % (sw ? 1024 : 16)) report(v, op, "offset %lld is not aligned for swizzle %lld", (long long)op->attr[0], (long long)sw);
}

static void check_index(Verifier *v, const Op *op) {
  TType b = opt(op, 0), r = op->results[0].type;
  if (!expect(v, op, is_smem(b) && b.rank >= 2, "operand 0 must be a shared buffer of rank 2 or more")) return;
  const Op *root = op->operands[0]->def;
  if (root && root->kind == OP_SMEM_ALLOC && !root->attr[2]) report(v, op, "only rings (smem_alloc {ring = 1}) have slots");
  if (!expect(v, op, is_i32_scalar(opt(op, 1)), "the index must be an i32 scalar")) return;
  TType want = type_smem((ScalarKind)b.pointee, b.rank - 1, b.shape + 1);
  if (!type_eq(r, want)) report(v, op, "result must be %s, got %s", tt(want).s, tt(r).s);
}

/* smem_store may write columns [column, column + w) of a tile wider than
 * the buffer (w, its last dimension): the other dimensions equal. */
static bool is_column_part(TType val, TType b, int64_t column) {
  int last = b.rank - 1, w = b.shape[last];
  if (val.rank != b.rank || val.kind != b.pointee || val.shape[last] <= w) return false;
  for (int i = 0; i < last; i++)
    if (val.shape[i] != b.shape[i]) return false;
  return column >= 0 && column % w == 0 && column + w <= val.shape[last];
}

static void check_store_load(Verifier *v, const Op *op) {
  TType b = opt(op, 0);
  if (!expect(v, op, is_smem(b), "operand 0 must be a shared buffer")) return;
  TType val = op->kind == OP_SMEM_STORE ? opt(op, 1) : op->results[0].type;
  if (op->kind == OP_SMEM_STORE && !type_eq(val, held(b))) {
    if (!is_column_part(val, b, op->attr[0]))
      report(v, op, "the tile must be %s, or a wider one whose columns [column, column + %d) it takes; got %s "
                    "(column %lld)",
             tt(held(b)).s, b.shape[b.rank - 1], tt(val).s, (long long)op->attr[0]);
    return;
  }
  if (op->kind == OP_SMEM_STORE && op->attr[0]) report(v, op, "column %lld of a tile as wide as the buffer", (long long)op->attr[0]);
  if (!type_eq(val, held(b))) report(v, op, "the tile must be %s, got %s", tt(held(b)).s, tt(val).s);
}

static void check_mbar_op(Verifier *v, const Op *op) {
  uint32_t most = op->kind == OP_MBAR_WAIT ? 3 : 2;
  if (op->noperands < 2 || op->noperands > most) {
    report(v, op, "expected %s operands", most == 3 ? "2 or 3" : "2");
    return;
  }
  if (!expect(v, op, is_mbar(opt(op, 0)), "operand 0 must be an mbarrier array")) return;
  expect(v, op, is_i32_scalar(opt(op, 1)), "the barrier index must be an i32 scalar");
  if (op->noperands == 3) {
    expect(v, op, is_i32_scalar(opt(op, 2)), "the parity must be an i32 scalar");
  }
  if (op->kind == OP_MBAR_EXPECT && (op->attr[0] < 1 || op->attr[0] > MBAR_MAX_TX_BYTES))
    report(v, op, "%lld transaction bytes do not fit one mbarrier phase", (long long)op->attr[0]);
}

static void check_coords(Verifier *v, const Op *op, uint32_t first, int rank) {
  if (op->noperands != first + (uint32_t)rank) {
    report(v, op, "expected %d coordinates, got %d", rank, (int)op->noperands - (int)first);
    return;
  }
  for (uint32_t i = first; i < op->noperands; i++) expect(v, op, is_i32_scalar(opt(op, i)), "coordinates must be i32 scalars");
}

static void check_tma(Verifier *v, const Op *op) {
  bool load = op->kind == OP_TMA_LOAD;
  uint32_t need = load ? 4 : 2;
  if (op->noperands < need) {
    report(v, op, "expected at least %u operands", need);
    return;
  }
  TType buf = opt(op, load ? 0 : 1), desc = opt(op, load ? 1 : 0);
  if (!expect(v, op, is_smem(buf), "the buffer must be a shared buffer")) return;
  if (!expect(v, op, desc.kind == SK_DESC, "the tensor must be a descriptor")) return;
  if (desc.pointee != buf.pointee) report(v, op, "descriptor of %s, buffer of %s", tt(desc).s, tt(buf).s);
  if (buf.rank != desc.desc_rank) report(v, op, "buffer rank %d, descriptor rank %d", buf.rank, desc.desc_rank);
  if (load) {
    expect(v, op, is_mbar(opt(op, 2)), "operand 2 must be an mbarrier array");
    expect(v, op, is_i32_scalar(opt(op, 3)), "the barrier index must be an i32 scalar");
  }
  check_coords(v, op, need, desc.desc_rank);
}

static void check_async_copy(Verifier *v, const Op *op) {
  if (op->noperands < 2 || op->noperands > 3) {
    report(v, op, "expected 2 or 3 operands");
    return;
  }
  TType buf = opt(op, 0), p = opt(op, 1);
  if (!expect(v, op, is_smem(buf), "operand 0 must be a shared buffer")) return;
  if (p.kind != SK_PTR || p.pointee != buf.pointee || !type_shape_eq(p, buf))
    report(v, op, "the pointers must be a %s tile of the buffer's shape, got %s", scalar_name((ScalarKind)buf.pointee),
           tt(p).s);
  if (op->noperands == 3 && !type_eq(opt(op, 2), type_tile(SK_I1, buf.rank, buf.shape)))
    report(v, op, "the mask must be i1 of the buffer's shape, got %s", tt(opt(op, 2)).s);
}

static bool tc_input(unsigned k) { return k == SK_BF16 || k == SK_F16 || k == SK_F8E4M3 || k == SK_F8E5M2; }

/* The [rows, cols] an operand presents to the product (a buffer holding
 * the transpose presents it swapped). */
static bool operand_dims(TType t, bool trans, int *rows, int *cols, unsigned *elem) {
  if (t.rank != 2) return false;
  *rows = trans ? t.shape[1] : t.shape[0];
  *cols = trans ? t.shape[0] : t.shape[1];
  *elem = is_smem(t) ? t.pointee : t.kind;
  return true;
}

/* pair = 1: the wgmma right after this one (pair = 2) is issued with it
 * as one instruction; they must agree on everything but B and the
 * accumulator. */
static void check_wgmma_pair(Verifier *v, const Op *op) {
  int64_t p = op->attr[2];
  if (p < 0 || p > 2) {
    report(v, op, "pair must be 0, 1 (issues the next wgmma's product with its own) or 2 (issued by the previous one)");
    return;
  }
  const Op *first = p == 1 ? op : p == 2 ? op->prev : NULL, *second = p == 1 ? op->next : op;
  if (!first) return;
  bool ok = first && second && first->kind == OP_WGMMA && second->kind == OP_WGMMA && first->attr[2] == 1 &&
            second->attr[2] == 2 && first->noperands == 3 && second->noperands == 3 &&
            first->operands[0] == second->operands[0] && first->attr[0] == second->attr[0] &&
            first->attr[1] == second->attr[1] && type_eq(opt(first, 1), opt(second, 1)) &&
            type_eq(opt(first, 2), opt(second, 2));
  if (!ok)
    report(v, op, "a wgmma with pair = 1 must be followed by one with pair = 2, with the same A operand, orientations "
                  "and operand types");
}

static void check_wgmma(Verifier *v, const Op *op) {
  TType a = opt(op, 0), b = opt(op, 1), acc = opt(op, 2);
  int m, k, k2, n;
  unsigned ea, eb;
  if (!expect(v, op, is_smem(b), "operand b must be a shared buffer")) return;
  if (!is_smem(a) && op->attr[0]) report(v, op, "an A operand in registers cannot be transposed");
  if (!operand_dims(a, op->attr[0], &m, &k, &ea) || !operand_dims(b, op->attr[1], &k2, &n, &eb)) {
    report(v, op, "operands must have rank 2");
    return;
  }
  if (!tc_input(ea) || !tc_input(eb)) report(v, op, "tensor-core inputs are bf16, f16 or fp8");
  bool fp8a = ea == SK_F8E4M3 || ea == SK_F8E5M2, fp8b = eb == SK_F8E4M3 || eb == SK_F8E5M2;
  if (fp8a != fp8b || (!fp8a && ea != eb))
    report(v, op, "operands must both be bf16, both f16, or both fp8 (e4m3 and e5m2 may mix)");
  if (fp8a && (op->attr[0] || !op->attr[1]))
    report(v, op, "fp8 operands must be K-major: A as is (no trans_a), B transposed (trans_b)");
  if (k != k2 || acc.rank != 2 || acc.shape[0] != m || acc.shape[1] != n || acc.kind != SK_F32)
    report(v, op, "shapes do not match: %s x %s into %s", tt(a).s, tt(b).s, tt(acc).s);
  if (!type_eq(op->results[0].type, acc)) report(v, op, "the result must have the accumulator's type");
  check_wgmma_pair(v, op);
}

static void check_wgmma_wait(Verifier *v, const Op *op) {
  if (op->attr[0] < 0) report(v, op, "pending must not be negative");
  if (op->noperands != op->nresults) {
    report(v, op, "%u operands but %u results", op->noperands, op->nresults);
    return;
  }
  for (uint32_t i = 0; i < op->noperands; i++)
    if (!type_eq(opt(op, i), op->results[i].type)) report(v, op, "result %u must have the type of operand %u", i, i);
}

static void check_ring_next(Verifier *v, const Op *op) {
  expect(v, op, is_mbar(opt(op, 0)), "operand 0 must be an mbarrier array");
  expect(v, op, is_i32_scalar(opt(op, 1)), "the advance must be an i32 scalar");
  expect(v, op, is_i32_scalar(op->results[0].type), "the result must be an i32 scalar");
}

/* Only at the top of the kernel body; its regions yield nothing. */
static void check_warp_split(Verifier *v, const Op *op) {
  if (op->parent && op->parent->parent) report(v, op, "warp_split must be in the kernel body, not nested");
  if (op->attr[0] < 1 || op->attr[1] < 1) report(v, op, "needs at least one producer and one consumer warpgroup");
  for (int r = 0; r < 2; r++) {
    const Op *y = op->regions[r].last;
    if (op->regions[r].nargs) report(v, op, "region %d must have no arguments", r);
    if (!y || y->kind != OP_YIELD || y->noperands) report(v, op, "region %d must end with a yield of nothing", r);
  }
}

void verify_gpu_op(Verifier *v, const Op *op) {
  switch ((OpKind)op->kind) {
  case OP_SMEM_ALLOC: case OP_MBAR_ALLOC: check_alloc(v, op); break;
  case OP_SMEM_INDEX: check_index(v, op); break;
  case OP_SMEM_STORE: case OP_SMEM_LOAD: check_store_load(v, op); break;
  case OP_MBAR_EXPECT: case OP_MBAR_ARRIVE: case OP_MBAR_WAIT: check_mbar_op(v, op); break;
  case OP_TMA_LOAD: case OP_TMA_STORE: check_tma(v, op); break;
  case OP_ASYNC_COPY: check_async_copy(v, op); break;
  case OP_WGMMA: check_wgmma(v, op); break;
  case OP_WGMMA_WAIT: check_wgmma_wait(v, op); break;
  case OP_RING_NEXT: check_ring_next(v, op); break;
  case OP_WARP_SPLIT: check_warp_split(v, op); break;
  case OP_TMA_STORE_WAIT:
    expect(v, op, is_smem(opt(op, 0)), "operand 0 must be a shared buffer");
    /* fall through */
  case OP_ASYNC_WAIT:
    if (op->attr[0] < 0) report(v, op, "pending must not be negative");
    break;
  default: break; /* async_commit, fence_async, barrier: nothing to check */
  }
}

/* A wgmma's result is being computed until a wgmma_wait: only another
 * wgmma (as its accumulator) or a wait may take it. */
void verify_gpu_uses(Verifier *v, const Block *b) {
  for (const Op *op = b->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->noperands; i++) {
      const Value *x = op->operands[i];
      if (!x || !x->def || x->def->kind != OP_WGMMA) continue;
      bool ok = op->kind == OP_WGMMA_WAIT || (op->kind == OP_WGMMA && i == 2);
      if (!ok)
        report(v, op, "operand %u is a wgmma result that no wgmma_wait has waited for (only a wgmma_wait or the "
                      "accumulator of another wgmma may use it)", i);
    }
    for (int r = 0; r < op->nregions; r++) verify_gpu_uses(v, &op->regions[r]);
  }
}
