/* ir.c - building and editing tile IR (see ir.h). */
#include "ir.h"

#include <string.h>

const OpInfo op_info[OP_COUNT] = {
#define X(name, text, nops, nres, nreg, flags, attrs) {text, nops, nres, nreg, flags, attrs},
    IR_OPS(X)
#undef X
};

Module *ir_module_new(Arena *arena, const char *source_name) {
  Module *m = ARENA_NEW(arena, Module);
  m->arena = arena;
  m->source_name = source_name ? arena_strdup(arena, source_name) : "";
  return m;
}

Func *ir_func_new(Module *m, const char *name, int nparams, const TType *param_types, SrcLoc loc) {
  Func *f = ARENA_NEW(m->arena, Func);
  f->name = arena_strdup(m->arena, name);
  f->loc = loc;
  ir_block_set_args(m->arena, &f->body, nparams, param_types);
  f->params = ARENA_ARRAY(m->arena, ParamInfo, nparams > 0 ? nparams : 1);
  if (m->nfuncs == m->capfuncs) {
    int cap = m->capfuncs ? m->capfuncs * 2 : 8;
    m->funcs = arena_grow(m->arena, m->funcs, sizeof(Func *), (size_t)m->capfuncs, (size_t)cap);
    m->capfuncs = cap;
  }
  m->funcs[m->nfuncs++] = f;
  return f;
}

void ir_block_set_args(Arena *a, Block *b, int nargs, const TType *types) {
  b->nargs = (uint32_t)nargs;
  b->args = nargs ? ARENA_ARRAY(a, Value, nargs) : NULL;
  for (int i = 0; i < nargs; i++) {
    b->args[i].type = types[i];
    b->args[i].owner = b;
    b->args[i].index = (uint32_t)i;
  }
}

Op *ir_op_new(Arena *a, OpKind kind, int noperands, int nresults, const TType *result_types,
              int nregions, SrcLoc loc) {
  Op *op = ARENA_NEW(a, Op);
  op->kind = (uint16_t)kind;
  op->loc = loc;
  op->noperands = (uint32_t)noperands;
  op->operands = noperands ? ARENA_ARRAY(a, Value *, noperands) : NULL;
  op->nresults = (uint32_t)nresults;
  op->results = nresults ? ARENA_ARRAY(a, Value, nresults) : NULL;
  for (int i = 0; i < nresults; i++) {
    op->results[i].type = result_types[i];
    op->results[i].def = op;
    op->results[i].index = (uint32_t)i;
  }
  op->nregions = (uint16_t)nregions;
  op->regions = nregions ? ARENA_ARRAY(a, Block, nregions) : NULL;
  for (int i = 0; i < nregions; i++) op->regions[i].parent = op;
  return op;
}

Op *ir_op_make(Arena *a, OpKind kind, int noperands, Value *const *operands, int nresults,
               const TType *result_types, SrcLoc loc) {
  Op *op = ir_op_new(a, kind, noperands, nresults, result_types, 0, loc);
  for (int i = 0; i < noperands; i++) op->operands[i] = operands[i];
  return op;
}

void ir_append(Block *b, Op *op) {
  op->parent = b;
  op->next = NULL;
  op->prev = b->last;
  if (b->last)
    b->last->next = op;
  else
    b->first = op;
  b->last = op;
}

void ir_insert_before(Op *before, Op *op) {
  Block *b = before->parent;
  op->parent = b;
  op->next = before;
  op->prev = before->prev;
  if (before->prev)
    before->prev->next = op;
  else
    b->first = op;
  before->prev = op;
}

void ir_unlink(Op *op) {
  Block *b = op->parent;
  if (!b) return;
  if (op->prev)
    op->prev->next = op->next;
  else
    b->first = op->next;
  if (op->next)
    op->next->prev = op->prev;
  else
    b->last = op->prev;
  op->prev = op->next = NULL;
  op->parent = NULL;
}

const OpInfo *ir_info(const Op *op) { return &op_info[op->kind]; }

bool ir_is_const(const Value *v) { return v->def && v->def->kind == OP_CONST; }

bool ir_const_int(const Value *v, int64_t *out) {
  if (!ir_is_const(v) || !scalar_is_int(v->type.kind)) return false;
  *out = v->def->attr[0];
  return true;
}

bool ir_is_float_zeros(const Value *v) {
  return ir_is_const(v) && scalar_is_float(v->type.kind) && v->def->fattr == 0;
}

bool ir_block_has(const Block *b, OpKind kind) {
  for (const Op *op = b->first; op; op = op->next) {
    if (op->kind == kind) return true;
    for (int r = 0; r < op->nregions; r++)
      if (ir_block_has(&op->regions[r], kind)) return true;
  }
  return false;
}

static Value *resolve_repl(Value *v) {
  while (v->repl) v = v->repl;
  return v;
}

static void apply_repl_op(Op *op, void *user) {
  (void)user;
  for (uint32_t i = 0; i < op->noperands; i++)
    if (op->operands[i]->repl) op->operands[i] = resolve_repl(op->operands[i]);
}

void ir_apply_replacements(Func *f) { ir_walk_block(&f->body, apply_repl_op, NULL); }

void ir_walk_block(Block *b, IrWalkFn fn, void *user) {
  for (Op *op = b->first, *next; op; op = next) {
    next = op->next;
    fn(op, user);
    for (int r = 0; r < op->nregions; r++) ir_walk_block(&op->regions[r], fn, user);
  }
}

uint32_t ir_count_values(const Block *b) {
  uint32_t n = b->nargs;
  for (const Op *op = b->first; op; op = op->next) {
    n += op->nresults;
    for (int r = 0; r < op->nregions; r++) n += ir_count_values(&op->regions[r]);
  }
  return n;
}
