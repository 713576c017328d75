/* schedule_cluster.c - which values are the same in every program of a
 * cluster (@cluster(C): C consecutive programs along axis 0).
 *
 * A copy whose coordinates are the same in all C programs of a cluster,
 * and that all of them reach the same number of times, can be issued
 * once for the cluster: each program issues 1/C of its boxes with
 * .multicast::cluster, and every box lands in all C programs (the
 * pipeliner, schedule_pipeline.c, decides; lower_tma.c issues). The
 * analysis proves it from the code; nothing is assumed.
 *
 * A scalar is uniform across the cluster when it is
 *   - a constant or a kernel parameter;
 *   - program_id(1), program_id(2) or num_programs(a) (clusters span axis
 *     0 only, and the grid is the same for all);
 *   - program_id(0) / D for a constant D that C divides (cluster_id() is
 *     program_id(0) / C);
 *   - a pure op (arithmetic, comparison, cast) of uniform operands;
 *   - the variable of a for loop whose bounds and step are uniform and
 *     that every program of the cluster reaches (uniform control).
 * Everything else is not: program_id(0) itself, cluster_rank(), loads
 * (two programs may read different memory contents), values carried by
 * loops and the results of ifs (conservatively).
 *
 * An op is under uniform control when every loop around it has uniform
 * bounds and every if around it a uniform condition, no while loop
 * encloses it (kernels have no `return`: every program reaches the end).
 */
#include "schedule_internal.h"

/* Memo states (values of the memo map). */
enum { UNIFORM_UNKNOWN = 0, UNIFORM_YES = 1, UNIFORM_NO = 2, UNIFORM_BUSY = 3 };

/* The deepest chain of operands followed: far more than any index
 * computation; past it a value counts as not uniform (never wrong). */
#define UNIFORM_MAX_DEPTH 256

typedef struct Uniform {
  const Func *f;
  int C;
  PtrMap memo; /* Value* -> state */
} Uniform;

static bool uniform_value(Uniform *u, const Value *v, int depth);

static bool is_program_id0(const Value *v) {
  return v->def && v->def->kind == OP_PROGRAM_ID && v->def->attr[0] == 0;
}

static bool control_ok(Uniform *u, const Op *op, int depth) {
  for (const Block *b = op->parent; b && b->parent; b = b->parent->parent) {
    const Op *p = b->parent;
    if (p->kind == OP_FOR) {
      for (int i = 0; i < 3; i++)
        if (!uniform_value(u, p->operands[i], depth + 1)) return false;
    } else if (p->kind == OP_IF) {
      if (!uniform_value(u, p->operands[0], depth + 1)) return false;
    } else {
      return false; /* while loops, and anything else with regions */
    }
  }
  return true;
}

static bool compute(Uniform *u, const Value *v, int depth) {
  if (v->type.rank != 0) return false;
  if (!v->def) {
    const Block *owner = v->owner;
    if (owner == &u->f->body) return true; /* a kernel parameter */
    const Op *p = owner ? owner->parent : NULL;
    if (!p || p->kind != OP_FOR || v->index != 0) return false;
    return control_ok(u, p, depth) && uniform_value(u, p->operands[0], depth + 1) &&
           uniform_value(u, p->operands[1], depth + 1) && uniform_value(u, p->operands[2], depth + 1);
  }
  const Op *op = v->def;
  switch (op->kind) {
  case OP_CONST: case OP_NUM_PROGRAMS: return true;
  case OP_PROGRAM_ID: return op->attr[0] != 0 || u->C == 1;
  case OP_DIV: {
    int64_t d;
    if (is_program_id0(op->operands[0]) && ir_const_int(op->operands[1], &d) && d > 0 && d % u->C == 0) return true;
    break;
  }
  default: break;
  }
  if (!(ir_info(op)->flags & OPF_PURE) || op->nregions) return false;
  for (uint32_t i = 0; i < op->noperands; i++)
    if (!uniform_value(u, op->operands[i], depth + 1)) return false;
  return true;
}

static bool uniform_value(Uniform *u, const Value *v, int depth) {
  if (depth > UNIFORM_MAX_DEPTH) return false;
  uintptr_t state = (uintptr_t)ptrmap_get(&u->memo, v);
  if (state == UNIFORM_YES || state == UNIFORM_NO) return state == UNIFORM_YES;
  if (state == UNIFORM_BUSY) return false; /* a cycle (a loop's variable through its bounds): not proven */
  ptrmap_put(&u->memo, v, (void *)(uintptr_t)UNIFORM_BUSY);
  bool yes = compute(u, v, depth);
  ptrmap_put(&u->memo, v, (void *)(uintptr_t)(yes ? UNIFORM_YES : UNIFORM_NO));
  return yes;
}

bool sched_cluster_uniform(Sched *s, const Op *at, Value *const *values, int n) {
  int C = func_cluster(s->f);
  if (C == 1) return true;
  Uniform u = {s->f, C, {0}};
  ptrmap_init(&u.memo, s->a);
  if (!control_ok(&u, at, 0)) return false;
  for (int i = 0; i < n; i++)
    if (!uniform_value(&u, values[i], 0)) return false;
  return true;
}
