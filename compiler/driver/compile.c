/* compile.c - the compilation pipeline behind tilec.h.
 *
 *   source text
 *     | lex            front/lexer.re     -> tokens          (--emit=tokens)
 *     | parse          front/parser.c     -> AST             (--emit=ast)
 *     | resolve        sema/resolve.c     -> AST + symbols
 *     | specialize     sema/irgen*.c      -> tile IR, one function per kernel
 *     | verify         ir/verify.c
 *     | optimize       passes/pipeline.c  (fold, canon, cse, licm, dce)
 *     | verify                            -> tile IR         (--emit=ir)
 *     v
 *   interpreter (interp/) or, later, the GPU back end
 *
 * Each stage runs only if the previous one reported no error, so messages
 * are never consequences of earlier ones.
 */
#include <stdlib.h>
#include <string.h>

#include "../analysis/masks.h"
#include "../front/parser.h"
#include "../interp/interp.h"
#include "../passes/passes.h"
#include "../sema/sema.h"
#include "../util/suggest.h"
#include "compilation.h"


_Static_assert(TC_MAX_SOURCE_BYTES == SOURCE_MAX_BYTES, "tilec.h and util/diag.h disagree");

static bool stage_ok(const tc_compilation *c) { return c->diags.errors == 0; }

/* Checks that every -D names a const parameter of some compiled kernel. */
static void check_defines(tc_compilation *c, const tc_options *o) {
  for (int d = 0; d < o->ndefines; d++) {
    bool found = false;
    for (int i = 0; i < c->prog->nitems && !found; i++) {
      Item *it = c->prog->items[i];
      if (it->kind != ITEM_KERNEL || (o->kernel && strcmp(o->kernel, it->name) != 0)) continue;
      for (int p = 0; p < it->nparams; p++)
        found |= it->params[p].is_const && strcmp(it->params[p].name, o->defines[d].name) == 0;
    }
    char q[DIAG_QUOTE_BUF];
    if (found) continue;
    diag_error(&c->diags, (SrcLoc){0, 0, 0}, "-D %s: no %s has a const parameter named '%s'",
               diag_quote(q, o->defines[d].name), o->kernel ? "selected kernel" : "kernel in this file", q);
    /* the closest const parameter of those kernels */
    int n = 0;
    for (int i = 0; i < c->prog->nitems; i++)
      if (c->prog->items[i]->kind == ITEM_KERNEL) n += c->prog->items[i]->nparams;
    const char **names = ARENA_ARRAY(&c->arena, const char *, n + 1);
    n = 0;
    for (int i = 0; i < c->prog->nitems; i++) {
      Item *it = c->prog->items[i];
      if (it->kind != ITEM_KERNEL || (o->kernel && strcmp(o->kernel, it->name) != 0)) continue;
      for (int p = 0; p < it->nparams; p++)
        if (it->params[p].is_const) names[n++] = it->params[p].name;
    }
    const char *best = suggest_closest(o->defines[d].name, names, n);
    if (best) diag_note(&c->diags, (SrcLoc){0, 0, 0}, "did you mean '%s'?", best);
  }
}

static void specialize_all(tc_compilation *c, const tc_options *o) {
  ConstDef *defs = ARENA_ARRAY(&c->arena, ConstDef, o->ndefines + 1);
  for (int d = 0; d < o->ndefines; d++) defs[d] = (ConstDef){o->defines[d].name, o->defines[d].value};
  bool found = false;
  for (int i = 0; i < c->prog->nitems && !diags_full(&c->diags); i++) {
    Item *it = c->prog->items[i];
    if (it->kind != ITEM_KERNEL || (o->kernel && strcmp(o->kernel, it->name) != 0)) continue;
    found = true;
    specialize_kernel(c->module, c->prog, it, defs, o->ndefines, &c->diags);
  }
  char q[DIAG_QUOTE_BUF];
  if (!o->kernel || found) return;
  diag_error(&c->diags, (SrcLoc){0, 0, 0}, "no kernel named '%s' in this file", diag_quote(q, o->kernel));
  const char **names = ARENA_ARRAY(&c->arena, const char *, c->prog->nitems + 1);
  int n = 0;
  for (int i = 0; i < c->prog->nitems; i++)
    if (c->prog->items[i]->kind == ITEM_KERNEL) names[n++] = c->prog->items[i]->name;
  const char *best = suggest_closest(o->kernel, names, n);
  if (best) diag_note(&c->diags, (SrcLoc){0, 0, 0}, "did you mean '%s'?", best);
}

static void optimize(tc_compilation *c, const tc_options *o) {
  for (int i = 0; i < c->module->nfuncs; i++)
    if (!ir_verify_func(c->module->funcs[i], &c->diags))
      diag_note(&c->diags, (SrcLoc){0, 0, 0}, "internal compiler error: invalid IR from kernel '%s'",
                c->module->funcs[i]->name);
  if (!stage_ok(c) || o->no_opt) return;
  PassOptions po = {0};
  po.verify_each = o->verify_each_pass;
  po.diags = &c->diags;
  passes_run(c->module, &po);
  for (int i = 0; i < c->module->nfuncs && stage_ok(c); i++)
    if (!ir_verify_func(c->module->funcs[i], &c->diags))
      diag_note(&c->diags, (SrcLoc){0, 0, 0}, "internal compiler error: optimization produced invalid IR in kernel '%s'",
                c->module->funcs[i]->name);
}

tc_compilation *tc_compile(const char *filename, const char *source, size_t len, const tc_options *options) {
  tc_options defaults = {0};
  const tc_options *o = options ? options : &defaults;
  tc_compilation *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  arena_init(&c->arena);
  c->src.name = arena_strdup(&c->arena, filename ? filename : "<input>");
  if (len > SOURCE_MAX_BYTES) {
    c->src.text = "";
    diags_init(&c->diags, &c->arena, &c->src);
    diag_error(&c->diags, (SrcLoc){0, 0, 0}, "the source is %zu bytes, more than the limit of %zu (%zu MiB)", len,
               SOURCE_MAX_BYTES, SOURCE_MAX_BYTES >> 20);
    return c;
  }
  char *text = arena_alloc(&c->arena, len + 1); /* zeroed: a NUL after the text */
  if (len) memcpy(text, source, len);
  c->src.text = text;
  c->src.len = len;
  diags_init(&c->diags, &c->arena, &c->src);
  c->diags.warnings_off = o->no_warnings;
  c->diags.warnings_are_errors = o->warnings_are_errors;

  c->tokens = lex_terminated(&c->src, &c->arena, &c->diags);
  c->prog = parse(&c->tokens, &c->arena, &c->diags);
  if (!stage_ok(c)) return c;
  compile_imports(c, o);
  if (!stage_ok(c)) return c;
  resolve_program(c->prog, &c->arena, &c->diags);
  if (!stage_ok(c)) return c;
  c->module = ir_module_new(&c->arena, c->src.name);
  check_defines(c, o);
  if (!stage_ok(c)) return c;
  specialize_all(c, o);
  if (!stage_ok(c)) return c;
  optimize(c, o);
  if (stage_ok(c)) warn_unused(c->prog, &c->diags);
  if (stage_ok(c)) warn_constant_masks(c->module, &c->diags);
  return c;
}

/* Frees the GPU back end's results (kept here, not in codegen.c, so that
 * programs that never generate code do not link LLVM). */
void codegen_free(tc_compilation *c) {
  free(c->lowered);
  free(c->llvm_ir);
  free(c->ptx);
  free(c->cubin);
  if (c->code && c->module)
    for (int i = 0; i < c->module->nfuncs; i++) free(c->code[i].meta);
  free(c->code);
  c->lowered = c->llvm_ir = c->ptx = NULL;
  c->cubin = NULL;
  c->code = NULL;
  c->cubin_size = 0;
  c->generated = false;
}

void tc_free(tc_compilation *c) {
  if (!c) return;
  codegen_free(c);
  free(c->rendered);
  arena_free(&c->arena);
  free(c);
}

int tc_error_count(const tc_compilation *c) { return c->diags.errors; }

int tc_import_count(const tc_compilation *c) { return c->nimports; }

const char *tc_import_path(const tc_compilation *c, int i) {
  return i >= 0 && i < c->nimports ? c->imports[i] : NULL;
}

const char *tc_diagnostics(const tc_compilation *c) {
  tc_compilation *mc = (tc_compilation *)c; /* the rendering is cached */
  if (!mc->rendered || mc->rendered_count != c->diags.count) {
    free(mc->rendered);
    mc->rendered_count = c->diags.count;
    StrBuf sb;
    sb_init(&sb);
    diags_render_all(&c->diags, &sb);
    mc->rendered = sb_take(&sb);
  }
  return mc->rendered;
}

char *tc_emit(const tc_compilation *c, tc_emit_kind kind) {
  StrBuf sb;
  sb_init(&sb);
  switch (kind) {
  case TC_EMIT_TOKENS: tokens_print(&c->tokens, &sb); break;
  case TC_EMIT_AST:
    if (!c->prog) return NULL;
    ast_print(c->prog, &sb);
    break;
  case TC_EMIT_IR:
    if (!c->module || !stage_ok(c)) return NULL;
    ir_print_module(c->module, &sb);
    break;
  case TC_EMIT_LOWERED:
  case TC_EMIT_LLVM:
  case TC_EMIT_PTX: {
    const char *text = kind == TC_EMIT_LOWERED ? c->lowered : kind == TC_EMIT_LLVM ? c->llvm_ir : c->ptx;
    if (!text) return NULL;
    sb_puts(&sb, text);
    break;
  }
  }
  return sb_take(&sb);
}

int tc_kernel_count(const tc_compilation *c) { return c->module && stage_ok(c) ? c->module->nfuncs : 0; }

const char *tc_kernel_name(const tc_compilation *c, int kernel) {
  return kernel >= 0 && kernel < tc_kernel_count(c) ? c->module->funcs[kernel]->name : NULL;
}

int tc_kernel_find(const tc_compilation *c, const char *name) {
  for (int i = 0; i < tc_kernel_count(c); i++)
    if (strcmp(c->module->funcs[i]->name, name) == 0) return i;
  return -1;
}

bool tc_kernel_const_int(const tc_compilation *c, int kernel, const char *name, int64_t *value) {
  if (!tc_kernel_name(c, kernel)) return false;
  const Func *f = c->module->funcs[kernel];
  for (int i = 0; i < f->nconsts; i++) {
    ScalarKind k = (ScalarKind)f->consts[i].type.kind;
    if (strcmp(f->consts[i].name, name) == 0 && scalar_is_int(k)) {
      *value = f->consts[i].ival;
      return true;
    }
  }
  return false;
}

/* The source item of module kernel `kernel`, or NULL. */
static const Item *kernel_item(const tc_compilation *c, int kernel) {
  const char *name = tc_kernel_name(c, kernel);
  for (int i = 0; name && c->prog && i < c->prog->nitems; i++) {
    const Item *it = c->prog->items[i];
    if (it->kind == ITEM_KERNEL && strcmp(it->name, name) == 0) return it;
  }
  return NULL;
}

/* The index-th @config of it, or NULL. */
static const Annotation *item_config(const Item *it, int index) {
  for (int i = 0; it && i < it->nannots; i++)
    if (strcmp(it->annots[i].name, "config") == 0 && index-- == 0) return &it->annots[i];
  return NULL;
}

int tc_kernel_config_count(const tc_compilation *c, int kernel) {
  const Item *it = kernel_item(c, kernel);
  if (!it) return -1;
  int n = 0;
  while (item_config(it, n)) n++;
  return n;
}

int tc_kernel_config(tc_compilation *c, int kernel, int index, tc_define *out, int max) {
  const Annotation *a = item_config(kernel_item(c, kernel), index);
  if (!a) return -1;
  for (int k = 0; k < a->nargs && k < max; k++) {
    const Expr *v = a->args[k].value;
    out[k].name = a->args[k].name;
    out[k].value = v->kind == EX_BOOL ? (v->bval ? "true" : "false")
                                      : arena_printf(&c->arena, "%lld", (long long)ast_config_value(v));
  }
  return a->nargs;
}

int tc_param_count(const tc_compilation *c, int kernel) {
  return tc_kernel_name(c, kernel) ? (int)c->module->funcs[kernel]->body.nargs : 0;
}

tc_param tc_param_get(const tc_compilation *c, int kernel, int index) {
  tc_param p = {0};
  if (index < 0 || index >= tc_param_count(c, kernel)) return p;
  const Func *f = c->module->funcs[kernel];
  TType t = f->body.args[index].type;
  ScalarKind elem = t.kind == SK_PTR || t.kind == SK_DESC ? (ScalarKind)t.pointee : (ScalarKind)t.kind;
  p.name = f->params[index].name;
  p.kind = t.kind == SK_PTR      ? TC_PARAM_PTR
           : t.kind == SK_DESC   ? TC_PARAM_DESC
           : t.kind == SK_I1     ? TC_PARAM_BOOL
           : scalar_is_float(elem) ? TC_PARAM_FLOAT
                                   : TC_PARAM_INT;
  p.elem = scalar_name(elem);
  p.elem_bytes = scalar_bytes(elem);
  p.elem_signed = scalar_is_signed(elem);
  p.desc_rank = t.desc_rank;
  return p;
}

_Static_assert(TC_INTERP_DEFAULT_MAX_STEPS == INTERP_DEFAULT_MAX_STEPS, "tilec.h and interp.h disagree");

bool tc_interpret(const tc_compilation *c, int kernel, const int64_t grid[3], const tc_arg *args, int nargs,
                  const tc_buffer *buffers, int nbuffers, uint64_t max_steps, char **error) {
  tc_interp_options options = {.max_steps = max_steps};
  return tc_interpret_ex(c, kernel, grid, args, nargs, buffers, nbuffers, &options, error);
}

bool tc_interpret_ex(const tc_compilation *c, int kernel, const int64_t grid[3], const tc_arg *args, int nargs,
                     const tc_buffer *buffers, int nbuffers, const tc_interp_options *options, char **error) {
  tc_interp_options defaults = {0};
  const tc_interp_options *o = options ? options : &defaults;
  if (!tc_kernel_name(c, kernel)) {
    if (error) *error = strdup("no such kernel (or the compilation failed)");
    return false;
  }
  const Func *f = c->module->funcs[kernel];
  int n = (int)f->body.nargs;
  if (nargs != n) {
    if (error) {
      StrBuf sb;
      sb_init(&sb);
      sb_printf(&sb, "kernel '%s' takes %d arguments, got %d", f->name, n, nargs);
      *error = sb_take(&sb);
    }
    return false;
  }
  if ((n && !args) || nbuffers < 0 || (nbuffers && !buffers) || !grid) {
    if (error) *error = strdup(!grid ? "no grid given" : n && !args ? "no arguments given" : "bad buffer list");
    return false;
  }
  InterpArg *iargs = calloc((size_t)(n ? n : 1), sizeof *iargs);
  Interp *ip = iargs ? interp_new(f, c->src.name) : NULL;
  if (!ip) {
    free(iargs);
    if (error) *error = strdup("out of memory");
    return false;
  }
  for (int i = 0; i < n; i++) {
    tc_param p = tc_param_get(c, kernel, i);
    if (p.kind == TC_PARAM_PTR) iargs[i].p = args[i].p;
    else if (p.kind == TC_PARAM_FLOAT) iargs[i].f = args[i].f;
    else if (p.kind == TC_PARAM_DESC) {
      iargs[i].desc.base = args[i].p;
      memcpy(iargs[i].desc.shape, args[i].shape, sizeof args[i].shape);
      memcpy(iargs[i].desc.strides, args[i].strides, sizeof args[i].strides);
    } else iargs[i].i = args[i].i;
  }
  for (int i = 0; i < nbuffers; i++) interp_add_buffer(ip, buffers[i].data, buffers[i].bytes, buffers[i].name);
  if (o->max_steps) interp_set_max_steps(ip, o->max_steps);
  interp_set_time_limit(ip, o->max_seconds);
  interp_set_output(ip, o->print_to ? o->print_to : stdout);
  bool ok = interp_run(ip, grid, iargs, n, error);
  interp_free(ip);
  free(iargs);
  return ok;
}
