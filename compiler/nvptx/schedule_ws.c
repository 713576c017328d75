/* schedule_ws.c - @warp_specialize: producer and consumer warpgroups.
 *
 * A warp-specialized kernel runs 4 x (producers + consumers) warps. The
 * producer warpgroups issue the TMA copies of the pipelined loops; the
 * consumer warpgroups do everything else, and the tile layouts cover
 * only them (warp w of the block is consumer warp w - 4 x producers).
 *
 * The pipeliner (schedule_pipeline.c) writes both sides' ops of a split
 * loop into its body and marks the producer's. After every rewrite the
 * kernel becomes
 *
 *   allocations (buffers, mbarriers: initialized before the split)
 *   warp_split {
 *     producer region: the marked ops, and what they need: the scalar
 *       arithmetic their coordinates come from (scalar loads included),
 *       the loops and ifs around them (without their loop-carried values)
 *   } {
 *     consumer region: the kernel without the marked ops
 *   }
 *
 * Pure scalar code needed by both runs on both sides. The producer cannot
 * use anything the consumers compute (a tile, a reduction, a value carried
 * by a loop): that is an error at the copy that needs it. Barriers in the
 * consumer region synchronize the consumers only (lower.c: a named
 * barrier); the producers take part in no barrier after the split.
 */
#include <string.h>

#include "schedule_internal.h"

/* setmaxnreg's range and granule (PTX ISA). */
#define WS_MIN_REGISTERS 24
#define WS_MAX_REGISTERS 256
#define WS_REGISTER_GRANULE 8
/* A block has at most 1024 threads: 32 warps. */
#define WS_MAX_WARPS 32

/* ---- the roles ---- */

static bool is_pow2(int x) { return x > 0 && !(x & (x - 1)); }

static void loop_spec(const Op *loop, WarpSpec *ws) {
  ws->producers = (int)loop->attr[1];
  ws->consumers = (int)loop->attr[2];
  ws->producer_registers = (int)loop->attr[3];
  ws->consumer_registers = (int)loop->attr[4];
}

static bool spec_eq(const WarpSpec *a, const WarpSpec *b) { return memcmp(a, b, sizeof *a) == 0; }

/* The first loop-level annotation (and every other must agree). */
typedef struct LoopSpecs {
  const Op *first;
  WarpSpec ws;
  Diags *diags;
  bool ok;
} LoopSpecs;

static void find_loop_specs(LoopSpecs *ls, const Block *b) {
  for (const Op *op = b->first; op; op = op->next) {
    if (op->kind == OP_FOR && op->attr[1] > 0) {
      WarpSpec ws;
      loop_spec(op, &ws);
      if (!ls->first) {
        ls->first = op;
        ls->ws = ws;
      } else if (!spec_eq(&ws, &ls->ws) && ls->ok) {
        diag_error(ls->diags, op->loc,
                   "GPU back end: '@warp_specialize(%d, %d, %d, %d)' differs from the one at %d:%d: a kernel divides its "
                   "warps one way",
                   ws.producers, ws.consumers, ws.producer_registers, ws.consumer_registers, ls->first->loc.line,
                   ls->first->loc.col);
        ls->ok = false;
      }
    }
    for (int r = 0; r < op->nregions; r++) find_loop_specs(ls, &op->regions[r]);
  }
}

/* A loop that encloses pipelined loops without being one: a tile loop.
 * @warp_specialize on it asks for ping-pong consumers. */
static bool encloses_pipeline(const Block *b) {
  for (const Op *op = b->first; op; op = op->next) {
    if (op->kind == OP_FOR && op->attr[0] >= 2) return true;
    for (int r = 0; r < op->nregions; r++)
      if (encloses_pipeline(&op->regions[r])) return true;
  }
  return false;
}

bool sched_is_tile_loop(const Op *op) {
  return op->kind == OP_FOR && op->attr[1] > 0 && op->attr[0] < 2 && encloses_pipeline(&op->regions[0]);
}

static const Op *find_tile_loop(const Block *b, int *count) {
  const Op *found = NULL;
  for (const Op *op = b->first; op; op = op->next) {
    if (sched_is_tile_loop(op)) {
      ++*count;
      if (!found) found = op;
    }
    for (int r = 0; r < op->nregions; r++) {
      const Op *inner = find_tile_loop(&op->regions[r], count);
      if (!found) found = inner;
    }
  }
  return found;
}

static int default_warps(const Func *f) {
  int w = f->warps ? f->warps : 4;
  while (w & (w - 1)) w &= w - 1;
  return w;
}

bool sched_warp_roles(const Func *f, Diags *diags, WarpRoles *out) {
  memset(out, 0, sizeof *out);
  LoopSpecs ls = {NULL, {0}, diags, true};
  find_loop_specs(&ls, &f->body);
  if (!ls.ok) return false;
  WarpSpec ws = f->ws;
  SrcLoc at = f->loc;
  out->kernel_level = ws.producers > 0;
  int tile_loops = 0;
  const Op *tile_loop = find_tile_loop(&f->body, &tile_loops);
  if (tile_loops > 1) {
    diag_error(diags, tile_loop->loc,
               "GPU back end: '@warp_specialize' on %d loops around pipelined loops: the consumers take turns on the "
               "iterations of one loop",
               tile_loops);
    return false;
  }
  out->pingpong = tile_loop != NULL;
  if (ls.first) {
    if (out->kernel_level && !spec_eq(&ws, &ls.ws)) {
      diag_error(diags, ls.first->loc,
                 "GPU back end: '@warp_specialize' on this loop differs from the kernel's '@warp_specialize(%d, %d, "
                 "%d, %d)': a kernel divides its warps one way",
                 ws.producers, ws.consumers, ws.producer_registers, ws.consumer_registers);
      return false;
    }
    if (!out->kernel_level) {
      int warps = f->warps ? f->warps : 4;
      int need = WARPGROUP_WARPS * (ls.ws.producers + ls.ws.consumers);
      if (warps != need) {
        diag_error(diags, ls.first->loc,
                   "GPU back end: '@warp_specialize(%d, %d)' on a loop needs a kernel of %d warps (it has %d): give the "
                   "kernel @warps(%d), or put @warp_specialize on the kernel",
                   ls.ws.producers, ls.ws.consumers, need, warps, need);
        return false;
      }
    }
    ws = ls.ws;
    at = ls.first->loc;
  }
  if (ws.producers <= 0) {
    out->block_warps = out->compute_warps = default_warps(f);
    return true;
  }
  /* The front end checked the ranges; what the layouts need is new. */
  if (!is_pow2(ws.consumers)) {
    diag_error(diags, at,
               "GPU back end: '@warp_specialize' with %d consumer warpgroups: tile layouts need a power of two of "
               "consumer warps (1, 2, 4 or 8 consumer warpgroups)",
               ws.consumers);
    return false;
  }
  int warps = WARPGROUP_WARPS * (ws.producers + ws.consumers);
  if (warps > WS_MAX_WARPS || ws.producer_registers < WS_MIN_REGISTERS || ws.consumer_registers > WS_MAX_REGISTERS ||
      ws.producer_registers % WS_REGISTER_GRANULE || ws.consumer_registers % WS_REGISTER_GRANULE) {
    diag_error(diags, at, "GPU back end: '@warp_specialize(%d, %d, %d, %d)' is out of range", ws.producers, ws.consumers,
               ws.producer_registers, ws.consumer_registers);
    return false;
  }
  out->producers = ws.producers;
  out->consumers = ws.consumers;
  out->producer_registers = ws.producer_registers;
  out->consumer_registers = ws.consumer_registers;
  out->block_warps = warps;
  /* ping-pong: each consumer warpgroup computes whole iterations alone */
  out->compute_warps = WARPGROUP_WARPS * (out->pingpong ? 1 : ws.consumers);
  return true;
}

/* Whether a loop is inside the ping-pong tile loop. */
static bool in_tile_loop(const Op *op) {
  for (const Block *b = op->parent; b && b->parent; b = b->parent->parent)
    if (sched_is_tile_loop(b->parent)) return true;
  return false;
}

bool sched_loop_is_split(Sched *s, const Op *loop, bool all_tma) {
  if (!s->roles->producers) return false;
  bool annotated = loop->attr[1] > 0;
  if (!annotated && !s->roles->kernel_level && !in_tile_loop(loop)) return false;
  if (!all_tma) {
    if (annotated)
      sched_error(s, loop,
                  "'@warp_specialize' on this loop: its producer warps issue TMA copies, so the loads feeding its dots "
                  "must all be load_block (tensor descriptors)");
    return false;
  }
  s->nsplit_loops++;
  ptrmap_put(&s->producer_ops, loop, (void *)2); /* a split loop (not itself a producer op) */
  return true;
}

/* ---- the producer's slice ---- */

typedef struct Slice {
  Sched *s;
  PtrMap need;        /* Op* -> 1 */
  PtrMap copies;      /* Op* -> its copy in the producer region */
  PtrMap original_of; /* a value of the producer region -> the value it copies */
} Slice;

static bool is_alloc(const Op *op) { return op->kind == OP_SMEM_ALLOC || op->kind == OP_MBAR_ALLOC; }

static bool marked_producer(Sched *s, const Op *op) { return (uintptr_t)ptrmap_get(&s->producer_ops, op) == 1; }

/* Ops the producer may run besides its own: scalar arithmetic, scalar
 * loads, ring positions and slots. */
static bool producer_can_run(Sched *s, const Op *op) {
  if (marked_producer(s, op) || op->kind == OP_RING_NEXT) return true;
  if (op->nresults != 1 || op->nregions) return false;
  TType t = op->results[0].type;
  if (type_is_buffer(t)) return op->kind == OP_SMEM_INDEX;
  if (t.rank != 0) return false;
  return (op_info[op->kind].flags & OPF_PURE) || op->kind == OP_LOAD;
}

static void need_op(Slice *sl, Op *op, const Op *user);

static void need_value(Slice *sl, Value *v, const Op *user) {
  Sched *s = sl->s;
  if (s->failed) return;
  if (v->def) {
    Op *d = v->def;
    if (is_alloc(d)) return;
    if (!producer_can_run(s, d)) {
      sched_error(s, user,
                  "'@warp_specialize': the producer warps issue this loop's copies, but their coordinates depend on "
                  "%s computed at %d:%d, which only the consumer warps have (compute the coordinates from scalars)",
                  d->nregions ? "a result of a loop or if" : "a tile", d->loc.line, d->loc.col);
      return;
    }
    need_op(sl, d, user);
    return;
  }
  Op *owner = v->owner ? v->owner->parent : NULL;
  if (!owner) return; /* a kernel parameter */
  if (owner->kind == OP_FOR && v->index == 0) {
    need_op(sl, owner, user);
    return;
  }
  sched_error(s, user,
              "'@warp_specialize': the producer warps issue this loop's copies, but their coordinates depend on a "
              "value carried by the loop at %d:%d, which only the consumer warps have",
              owner->loc.line, owner->loc.col);
}

static void need_op(Slice *sl, Op *op, const Op *user) {
  if (ptrmap_get(&sl->need, op) || sl->s->failed) return;
  ptrmap_put(&sl->need, op, (void *)1);
  Op *up = op->parent ? op->parent->parent : NULL;
  if (up) need_op(sl, up, user);
  if (op->kind == OP_WHILE) {
    sched_error(sl->s, user,
                "'@warp_specialize': a while loop around the producer's copies cannot be split (use a for loop)");
    return;
  }
  uint32_t n = op->kind == OP_FOR ? 3 : op->noperands;
  for (uint32_t i = 0; i < n; i++) need_value(sl, op->operands[i], op);
}

static void need_marked(Slice *sl, Block *b) {
  for (Op *op = b->first; op && !sl->s->failed; op = op->next) {
    if (marked_producer(sl->s, op)) need_op(sl, op, op);
    for (int r = 0; r < op->nregions; r++) need_marked(sl, &op->regions[r]);
  }
}

static Value *mapped(PtrMap *map, Value *v) {
  Value *m = ptrmap_get(map, v);
  return m ? m : v;
}

static void end_region(Arena *a, Block *b, SrcLoc loc) { ir_append(b, ir_op_new(a, OP_YIELD, 0, 0, NULL, 0, loc)); }

/* The needed ops of src, in order, into dst; loops and ifs lose their
 * results and loop-carried values. */
static void clone_needed(Slice *sl, const Block *src, Block *dst, PtrMap *map) {
  Arena *a = sl->s->a;
  for (Op *op = src->first; op; op = op->next) {
    if (!ptrmap_get(&sl->need, op)) continue;
    Op *c;
    if (op->kind == OP_FOR) {
      c = ir_op_new(a, OP_FOR, 3, 0, NULL, 1, op->loc);
      for (int i = 0; i < 3; i++) c->operands[i] = mapped(map, op->operands[i]);
      TType iv = op->regions[0].args[0].type;
      ir_block_set_args(a, &c->regions[0], 1, &iv);
      ptrmap_put(map, &op->regions[0].args[0], &c->regions[0].args[0]);
      clone_needed(sl, &op->regions[0], &c->regions[0], map);
      end_region(a, &c->regions[0], op->loc);
    } else if (op->kind == OP_IF) {
      c = ir_op_new(a, OP_IF, 1, 0, NULL, 2, op->loc);
      c->operands[0] = mapped(map, op->operands[0]);
      for (int r = 0; r < 2; r++) {
        clone_needed(sl, &op->regions[r], &c->regions[r], map);
        end_region(a, &c->regions[r], op->loc);
      }
    } else {
      c = ir_clone_op(a, op, map);
    }
    ptrmap_put(&sl->copies, op, c);
    for (uint32_t i = 0; i < op->nresults && i < c->nresults; i++) ptrmap_put(&sl->original_of, &c->results[i], &op->results[i]);
    if (op->kind == OP_FOR) ptrmap_put(&sl->original_of, &c->regions[0].args[0], &op->regions[0].args[0]);
    ir_append(dst, c);
  }
}

/* The producer's ops leave the consumers' code. */
static void drop_marked(Sched *s, Block *b) {
  for (Op *op = b->first, *next; op; op = next) {
    next = op->next;
    for (int r = 0; r < op->nregions; r++) drop_marked(s, &op->regions[r]);
    if (marked_producer(s, op)) ir_unlink(op);
  }
}

/* A loop-level annotation on a loop the pipeliner did not split. */
static void check_annotated(Sched *s, const Block *b) {
  for (const Op *op = b->first; op && !s->failed; op = op->next) {
    if (op->kind == OP_FOR && op->attr[1] > 0 && (uintptr_t)ptrmap_get(&s->producer_ops, op) != 2 &&
        !sched_is_tile_loop(op))
      sched_error(s, op,
                  "'@warp_specialize' on a loop that is not pipelined: the producer warps fill a ring, so the loop needs "
                  "@pipeline(stages = N) and tensor-core dots whose operands are load_block tiles (or it must enclose "
                  "such loops: a tile loop, whose iterations the consumers take in turn)");
    for (int r = 0; r < op->nregions; r++) check_annotated(s, &op->regions[r]);
  }
}

void sched_split_warps(Sched *s) {
  const WarpRoles *roles = s->roles;
  if (!roles->producers || s->failed) return;
  Func *f = s->f;
  Block *body = &f->body;
  Op *ret = body->last;
  check_annotated(s, body);
  if (s->failed) return;
  Slice sl = {s, {0}, {0}, {0}};
  ptrmap_init(&sl.need, s->a);
  ptrmap_init(&sl.copies, s->a);
  ptrmap_init(&sl.original_of, s->a);
  need_marked(&sl, body);
  if (s->failed) return;
  Op *split = ir_op_new(s->a, OP_WARP_SPLIT, 0, 0, NULL, 2, f->loc);
  split->attr[0] = roles->producers;
  split->attr[1] = roles->consumers;
  split->attr[2] = roles->producer_registers;
  split->attr[3] = roles->consumer_registers;
  PtrMap map;
  ptrmap_init(&map, s->a);
  clone_needed(&sl, body, &split->regions[0], &map);
  end_region(s->a, &split->regions[0], f->loc);
  /* everything but the allocations (and the return) into the consumers' region */
  for (Op *op = body->first, *next; op; op = next) {
    next = op->next;
    if (is_alloc(op) || op == ret) continue;
    ir_unlink(op);
    ir_append(&split->regions[1], op);
  }
  drop_marked(s, &split->regions[1]);
  end_region(s->a, &split->regions[1], f->loc);
  if (ret && ret->kind == OP_RETURN)
    ir_insert_before(ret, split);
  else
    ir_append(body, split);
  if (roles->pingpong) sched_pingpong(s, split, &sl.copies, &sl.original_of);
}
