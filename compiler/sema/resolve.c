/* resolve.c - name resolution and the checks that need no const values.
 *
 * Walks every item once: links each name to its Symbol (locals get a slot
 * number in their item's frame), binds call and annotation arguments to
 * parameter positions, checks assignment targets, the placement of
 * `return`, annotation names, and finds recursion among helper functions
 * (which are always inlined). Types and shapes are checked later, during
 * specialization, when const parameters have values.
 */
#include <stdio.h>
#include <string.h>

#include "../util/strmap.h"
#include "../util/suggest.h"
#include "sema.h"

const BuiltinInfo builtin_info[BI_COUNT] = {
#define X(id, name, mina, maxa, params) {name, mina, maxa, params},
    BUILTINS(X)
#undef X
};

/* One declared local. The resolver keeps every visible local in a hash
 * map from its name to its innermost declaration, so that lookup and the
 * same-scope check take constant time however many locals a function has;
 * a declaration remembers the one of the same name it shadows, which the
 * map gets back when the declaration's scope closes. */
typedef struct ScopeEntry {
  const char *name;
  Symbol *sym;
  int index;                    /* position on the scope stack */
  struct ScopeEntry *shadowed; /* the outer declaration of the name, or NULL */
} ScopeEntry;

typedef struct CallEdge {
  Item *caller, *callee;
  SrcLoc loc;
} CallEdge;

typedef enum StmtContext { CTX_KERNEL, CTX_FN } StmtContext;

typedef struct Resolver {
  Arena *arena;
  Diags *diags;
  StrMap globals;
  StrMap locals;     /* name -> innermost visible ScopeEntry (NULL: none) */
  ScopeEntry **stack; /* visible declarations, innermost last */
  int nstack, capstack;
  int scope_start; /* first entry of the innermost scope */
  Item *item;
  CallEdge *edges;
  int nedges, capedges;
  Program *prog;
  int capunused; /* of prog->unused */
} Resolver;

static Symbol *new_symbol(Resolver *r, SymKind kind, const char *name, SrcLoc loc) {
  Symbol *s = ARENA_NEW(r->arena, Symbol);
  s->kind = kind;
  s->name = name;
  s->loc = loc;
  return s;
}

/* ---- scopes ---- */

static int scope_push(Resolver *r) {
  int saved = r->scope_start;
  r->scope_start = r->nstack;
  return saved;
}

/* Closes the declarations above stack position `height`, innermost first,
 * giving the map back the names they shadowed. */
static void scope_truncate(Resolver *r, int height) {
  /* a let/var nothing read (a name starting with _ says so on purpose),
   * in the order of the source */
  for (int i = height; i < r->nstack; i++) {
    Symbol *s = r->stack[i]->sym;
    if (s->is_binding && !s->used && s->name[0] != '_') {
      if (r->prog->nunused == r->capunused) {
        int cap = r->capunused ? r->capunused * 2 : 16;
        r->prog->unused = arena_grow(r->arena, r->prog->unused, sizeof(Symbol *), (size_t)r->capunused, (size_t)cap);
        r->capunused = cap;
      }
      r->prog->unused[r->prog->nunused++] = s;
    }
  }
  while (r->nstack > height) {
    ScopeEntry *e = r->stack[--r->nstack];
    strmap_put(&r->locals, e->name, e->shadowed);
  }
}

static void scope_pop(Resolver *r, int saved) {
  scope_truncate(r, r->scope_start);
  r->scope_start = saved;
}

static Symbol *declare_local(Resolver *r, const char *name, SrcLoc loc) {
  ScopeEntry *outer = strmap_get(&r->locals, name);
  if (outer && outer->index >= r->scope_start) {
    diag_error(r->diags, loc, "'%s' is already declared in this scope", name);
    diag_note(r->diags, outer->sym->loc, "'%s' was declared here", name);
  }
  Symbol *global = strmap_get(&r->globals, name);
  if (global && (global->kind == SYM_TYPE))
    diag_error(r->diags, loc, "'%s' is a type name and cannot be used as a variable name", name);
  if (r->nstack == r->capstack) {
    int cap = r->capstack ? r->capstack * 2 : 64;
    r->stack = arena_grow(r->arena, r->stack, sizeof(ScopeEntry *), (size_t)r->capstack, (size_t)cap);
    r->capstack = cap;
  }
  Symbol *s = new_symbol(r, SYM_LOCAL, name, loc);
  s->slot = r->item->nlocals++;
  ScopeEntry *e = ARENA_NEW(r->arena, ScopeEntry);
  *e = (ScopeEntry){name, s, r->nstack, outer};
  r->stack[r->nstack++] = e;
  strmap_put(&r->locals, name, e);
  return s;
}

/* A qualified name that fits on the stack (longer ones, deep nesting of
 * long namespaces, go to the arena): lookups in imported code happen for
 * every name it uses, so they should not allocate. */
#define RESOLVE_QUALIFIED_BYTES 512

/* A name as seen from the current item: its locals, then its file's
 * namespace (an imported file's items are declared with their namespace
 * prefix), then the global names; an imported file does not see the
 * items of other files, only the builtins. */
static Symbol *lookup(Resolver *r, const char *name) {
  ScopeEntry *e = strmap_get(&r->locals, name);
  if (e) return e->sym;
  const char *ns = r->item && r->item->ns ? r->item->ns : "";
  if (!*ns) return strmap_get(&r->globals, name);
  char buf[RESOLVE_QUALIFIED_BYTES];
  int n = snprintf(buf, sizeof buf, "%s%s", ns, name);
  Symbol *own = strmap_get(&r->globals, n < (int)sizeof buf ? buf : arena_printf(r->arena, "%s%s", ns, name));
  if (own) return own;
  Symbol *global = strmap_get(&r->globals, name);
  return global && !global->item ? global : NULL;
}

/* ---- "did you mean" ---- */

/* What an unknown name may have meant. */
typedef enum SuggestWhat { SUGGEST_VALUE, SUGGEST_FUNCTION, SUGGEST_TYPE } SuggestWhat;

static bool suggestible(const Symbol *s, SuggestWhat what) {
  switch (what) {
  case SUGGEST_VALUE: return s->kind == SYM_LOCAL || s->kind == SYM_GLOBAL_CONST || s->kind == SYM_BUILTIN_CONST;
  case SUGGEST_FUNCTION: return s->kind == SYM_FN || s->kind == SYM_BUILTIN;
  case SUGGEST_TYPE: return s->kind == SYM_TYPE || (s->kind == SYM_LOCAL && s->is_const_param);
  }
  return false;
}

static void consider(const char *name, Symbol *s, SuggestWhat what, Symbol **best, int *best_d) {
  if (!s || !suggestible(s, what) || !strcmp(s->name, name)) return;
  int d = suggest_distance(name, s->name);
  if (d < *best_d || (d == *best_d && *best && strcmp(s->name, (*best)->name) < 0)) *best = s, *best_d = d;
}

/* After an "unknown ..." error: a note naming the closest visible name of
 * the right kind, when one is close (at most a third of the name's
 * letters differ, and not all of them). */
static void suggest(Resolver *r, const char *name, SuggestWhat what, SrcLoc at) {
  int limit = suggest_limit((int)strlen(name));
  if (limit < 1) return;
  Symbol *best = NULL;
  int best_d = limit + 1;
  for (int i = r->nstack - 1; i >= 0; i--)
    if (strmap_get(&r->locals, r->stack[i]->name) == r->stack[i]) /* not shadowed */
      consider(name, r->stack[i]->sym, what, &best, &best_d);
  for (size_t i = 0; i < r->globals.cap; i++)
    if (r->globals.slots[i].key) consider(name, r->globals.slots[i].value, what, &best, &best_d);
  if (!best) return;
  bool located = best->loc.line > 0;
  if (located) diag_note(r->diags, best->loc, "did you mean '%s'?", best->name);
  else diag_note(r->diags, at, "did you mean '%s'?", best->name);
}

/* ---- arguments ---- */

/* Most parameters of a function that can be called with named arguments
 * (builtins have at most four). */
#define RESOLVE_MAX_PARAMS 16

/* Splits "a,b,c" into names; returns the count. */
static int split_names(Arena *a, const char *list, const char **names) {
  int n = 0;
  while (*list && n < RESOLVE_MAX_PARAMS) {
    const char *end = strchr(list, ',');
    size_t len = end ? (size_t)(end - list) : strlen(list);
    names[n++] = arena_strndup(a, list, len);
    list += len + (end ? 1 : 0);
  }
  return n;
}

/* Binds positional and named arguments to parameter positions given the
 * comma-separated parameter names; parameters whose bit is set in
 * `optional` may be left out. Returns NULL after reporting an error. */
static Expr **bind_args(Resolver *r, const char *what, const char *params, int min_args,
                        int max_args, uint32_t optional, const Arg *args, int nargs, SrcLoc loc) {
  const char *names[RESOLVE_MAX_PARAMS];
  int nparams = split_names(r->arena, params, names);
  if (max_args > nparams) max_args = nparams;
  Expr **bound = ARENA_ARRAY(r->arena, Expr *, nparams ? nparams : 1);
  int npos = 0;
  bool named_seen = false;
  for (int i = 0; i < nargs; i++) {
    if (!args[i].name && named_seen) {
      diag_error(r->diags, args[i].value->loc, "a positional argument cannot follow a named argument");
      return NULL;
    }
    named_seen |= args[i].name != NULL;
    if (!args[i].name) {
      if (npos >= max_args) {
        if (min_args == max_args)
          diag_error(r->diags, args[i].value->loc, "%s takes %d argument%s (got %d)", what, max_args,
                     max_args == 1 ? "" : "s", nargs);
        else
          diag_error(r->diags, args[i].value->loc, "%s takes %d to %d arguments (got %d)", what, min_args,
                     max_args, nargs);
        return NULL;
      }
      bound[npos++] = args[i].value;
      continue;
    }
    int k = 0;
    while (k < max_args && strcmp(names[k], args[i].name) != 0) k++;
    if (k == max_args) {
      diag_error(r->diags, args[i].name_loc, "%s has no parameter named '%s'", what, args[i].name);
      return NULL;
    }
    if (bound[k]) {
      diag_error(r->diags, args[i].name_loc, "argument '%s' of %s is given twice", args[i].name, what);
      return NULL;
    }
    bound[k] = args[i].value;
  }
  for (int k = 0; k < max_args; k++) {
    if (!bound[k] && !(optional & (1u << k))) {
      diag_error(r->diags, loc, "%s needs argument '%s'", what, names[k]);
      return NULL;
    }
  }
  return bound;
}

/* ---- expressions and types ---- */

static void resolve_expr(Resolver *r, Expr *e);

static void resolve_type(Resolver *r, TypeExpr *t) {
  if (!t) return;
  for (int i = 0; i < t->ndims; i++) resolve_expr(r, t->dims[i]);
  if (t->kind == TE_TYPE) return;
  if (scalar_from_name(t->name, strlen(t->name)) != SK_VOID) return;
  Symbol *s = lookup(r, t->name);
  if (s && s->kind == SYM_LOCAL && s->is_const_param) {
    t->sym = s;
    return;
  }
  diag_error(r->diags, t->name_loc, "unknown type '%s'", t->name);
  suggest(r, t->name, SUGGEST_TYPE, t->name_loc);
}

static void add_call_edge(Resolver *r, Item *callee, SrcLoc loc) {
  if (r->nedges == r->capedges) {
    int cap = r->capedges ? r->capedges * 2 : 32;
    r->edges = arena_grow(r->arena, r->edges, sizeof(CallEdge), (size_t)r->capedges, (size_t)cap);
    r->capedges = cap;
  }
  r->edges[r->nedges++] = (CallEdge){r->item, callee, loc};
}

/* Parameter names of a helper function, comma separated. */
static const char *fn_param_names(Resolver *r, const Item *fn) {
  StrBuf sb;
  sb_init(&sb);
  for (int i = 0; i < fn->nparams; i++) {
    if (i) sb_putc(&sb, ',');
    sb_puts(&sb, fn->params[i].name);
  }
  const char *s = arena_strdup(r->arena, sb.data ? sb.data : "");
  sb_free(&sb);
  return s;
}

static void resolve_call(Resolver *r, Expr *e) {
  for (int i = 0; i < e->call.nargs; i++) resolve_expr(r, e->call.args[i].value);
  Symbol *s = lookup(r, e->call.callee);
  e->call.sym = s;
  SrcLoc loc = e->call.callee_loc;
  if (!s) {
    diag_error(r->diags, loc, "unknown function '%s'", e->call.callee);
    suggest(r, e->call.callee, SUGGEST_FUNCTION, loc);
    return;
  }
  switch (s->kind) {
  case SYM_BUILTIN: {
    const BuiltinInfo *bi = &builtin_info[s->id];
    const char *what = arena_printf(r->arena, "'%s'", bi->name);
    uint32_t optional = ~((1u << bi->min_args) - 1);
    e->call.bound = bind_args(r, what, bi->params, bi->min_args, bi->max_args, optional, e->call.args,
                              e->call.nargs, loc);
    e->call.nbound = bi->max_args;
    break;
  }
  case SYM_FN: {
    Item *fn = s->item;
    const char *what = arena_printf(r->arena, "function '%s'", fn->name);
    if (fn->nparams > RESOLVE_MAX_PARAMS) {
      diag_error(r->diags, loc, "function '%s' has more than %d parameters", fn->name, RESOLVE_MAX_PARAMS);
      return;
    }
    uint32_t optional = 0;
    int required = 0;
    for (int k = 0; k < fn->nparams; k++) {
      if (fn->params[k].default_value) optional |= 1u << k;
      else required++;
    }
    e->call.bound = bind_args(r, what, fn_param_names(r, fn), required, fn->nparams, optional, e->call.args,
                              e->call.nargs, loc);
    e->call.nbound = fn->nparams;
    add_call_edge(r, fn, loc);
    break;
  }
  case SYM_KERNEL:
    diag_error(r->diags, loc, "'%s' is a kernel; kernels cannot be called from kernel code", s->name);
    break;
  default:
    diag_error(r->diags, loc, "'%s' is not a function", s->name);
  }
}

static void resolve_expr(Resolver *r, Expr *e) {
  switch (e->kind) {
  case EX_INT: case EX_FLOAT: case EX_BOOL: case EX_STRING: case EX_SLICE: case EX_NONE: break;
  case EX_NAME: {
    Symbol *s = lookup(r, e->name.name);
    if (s) s->used = true;
    if (!s) {
      diag_error(r->diags, e->loc, "unknown name '%s'", e->name.name);
      suggest(r, e->name.name, SUGGEST_VALUE, e->loc);
    } else if (s->kind == SYM_FN || s->kind == SYM_BUILTIN || s->kind == SYM_KERNEL) {
      diag_error(r->diags, e->loc, "'%s' is a function; call it with '(...)'", e->name.name);
      s = NULL;
    }
    e->name.sym = s;
    break;
  }
  case EX_UNARY: resolve_expr(r, e->unary.operand); break;
  case EX_BINARY:
    resolve_expr(r, e->binary.lhs);
    resolve_expr(r, e->binary.rhs);
    break;
  case EX_CALL: resolve_call(r, e); break;
  case EX_INDEX:
    resolve_expr(r, e->index.base);
    for (int i = 0; i < e->index.nitems; i++) resolve_expr(r, e->index.items[i]);
    break;
  case EX_LIST:
    for (int i = 0; i < e->list.nitems; i++) resolve_expr(r, e->list.items[i]);
    break;
  case EX_CAST:
    resolve_expr(r, e->cast.operand);
    resolve_type(r, e->cast.type);
    break;
  }
}

/* ---- annotations ---- */

typedef struct AnnotSpec {
  const char *name;
  const char *params;
  int min_args, max_args;
  unsigned where; /* ANNOT_ON_* */
} AnnotSpec;

enum { ANNOT_ON_KERNEL = 1, ANNOT_ON_FOR = 2 };

static const AnnotSpec annot_specs[] = {
    {"warps", "n", 1, 1, ANNOT_ON_KERNEL},
    {"cluster", "size", 1, 1, ANNOT_ON_KERNEL},
    {"pipeline", "stages", 1, 1, ANNOT_ON_FOR},
    {"warp_specialize", "producers,consumers,producer_registers,consumer_registers", 0, 4,
     ANNOT_ON_KERNEL | ANNOT_ON_FOR},
    /* named arguments only, checked by resolve_config; repeatable */
    {"config", NULL, 1, 1, ANNOT_ON_KERNEL},
};

#define ANNOT_SPEC_COUNT (sizeof annot_specs / sizeof annot_specs[0])

/* An integer literal, maybe negated, or true/false: the values a
 * configuration may give. */
static bool config_literal(const Expr *e, bool want_bool) {
  if (want_bool) return e->kind == EX_BOOL;
  if (e->kind == EX_UNARY && e->unary.op == TOK_MINUS) e = e->unary.operand;
  return e->kind == EX_INT;
}

/* The const parameter of the kernel being resolved named name, or NULL. */
static const Param *const_param(const Item *it, const char *name) {
  for (int i = 0; it && i < it->nparams; i++)
    if (it->params[i].is_const && strcmp(it->params[i].name, name) == 0) return &it->params[i];
  return NULL;
}

/* @config(NAME = VALUE, ...): one autotuning candidate of the kernel
 * (spec/annotations.md): each argument names an integer or bool const
 * parameter, once, with a literal of its type. Two @config with the same
 * bindings are an error too. */
static void resolve_config(Resolver *r, Annotation *a, const Annotation *all, int index) {
  const Item *it = r->item;
  for (int k = 0; k < a->nargs; k++) {
    const Arg *g = &a->args[k];
    if (!g->name) {
      diag_error(r->diags, g->value->loc, "'@config' takes named arguments only (NAME = VALUE, for const parameters)");
      return;
    }
    const Param *p = const_param(it, g->name);
    if (!p) {
      diag_error(r->diags, g->name_loc, "'@config' names '%s', which is not a const parameter of kernel '%s'", g->name,
                 it ? it->name : "?");
      suggest(r, g->name, SUGGEST_VALUE, g->name_loc);
      return;
    }
    ScalarKind sk = p->type && p->type->kind == TE_NAMED && !p->type->ndims
                        ? scalar_from_name(p->type->name, strlen(p->type->name))
                        : SK_VOID;
    bool is_bool = sk == SK_I1;
    if (!is_bool && !scalar_is_int(sk)) {
      diag_error(r->diags, g->name_loc, "'@config' cannot set '%s': only integer and bool const parameters are tuned",
                 g->name);
      return;
    }
    if (!config_literal(g->value, is_bool)) {
      diag_error(r->diags, g->value->loc, "the value of '%s' in '@config' must be %s", g->name,
                 is_bool ? "true or false" : "an integer literal");
      return;
    }
    for (int j = 0; j < k; j++)
      if (strcmp(a->args[j].name, g->name) == 0) {
        diag_error(r->diags, g->name_loc, "argument '%s' of '@config' is given twice", g->name);
        return;
      }
  }
  /* the same bindings as an earlier @config (in any order) */
  for (int i = 0; i < index; i++) {
    const Annotation *b = &all[i];
    if (strcmp(b->name, "config") != 0 || b->nargs != a->nargs) continue;
    bool same = true;
    for (int k = 0; k < a->nargs && same; k++) {
      bool found = false;
      for (int j = 0; j < b->nargs && !found; j++)
        found = b->args[j].name && strcmp(b->args[j].name, a->args[k].name) == 0 &&
                ast_config_value(b->args[j].value) == ast_config_value(a->args[k].value);
      same = found;
    }
    if (same) {
      diag_error(r->diags, a->loc, "this '@config' repeats the one at line %d", b->loc.line);
      return;
    }
  }
}

static void resolve_annotations(Resolver *r, Annotation *a, int n, unsigned where, const char *construct) {
  /* Which annotations were seen already: one flag per kind keeps the
   * duplicate check linear in the length of the list. */
  bool seen[ANNOT_SPEC_COUNT] = {false};
  for (int i = 0; i < n; i++) {
    const AnnotSpec *spec = NULL;
    for (size_t k = 0; k < ANNOT_SPEC_COUNT; k++)
      if (strcmp(annot_specs[k].name, a[i].name) == 0) spec = &annot_specs[k];
    if (!spec) {
      diag_error(r->diags, a[i].loc, "unknown annotation '@%s'", a[i].name);
      continue;
    }
    if (!(spec->where & where)) {
      diag_error(r->diags, a[i].loc, "'@%s' cannot be applied to %s; it applies to %s", a[i].name, construct,
                 spec->where == ANNOT_ON_KERNEL ? "kernels"
                 : spec->where == ANNOT_ON_FOR  ? "for loops"
                                                : "kernels and for loops");
      continue;
    }
    if (!spec->params) {
      for (int k = 0; k < a[i].nargs; k++) resolve_expr(r, a[i].args[k].value);
      if (a[i].nargs == 0) diag_error(r->diags, a[i].loc, "'@config' needs at least one NAME = VALUE");
      else resolve_config(r, &a[i], a, i);
      continue;
    }
    if (seen[spec - annot_specs]) diag_error(r->diags, a[i].loc, "'@%s' is given twice", a[i].name);
    seen[spec - annot_specs] = true;
    for (int k = 0; k < a[i].nargs; k++) resolve_expr(r, a[i].args[k].value);
    const char *what = arena_printf(r->arena, "'@%s'", a[i].name);
    a[i].bound = bind_args(r, what, spec->params, spec->min_args, spec->max_args, ~((1u << spec->min_args) - 1),
                           a[i].args, a[i].nargs, a[i].loc);
    a[i].nbound = spec->max_args;
  }
}

/* ---- statements ---- */

static void resolve_block(Resolver *r, AstBlock *b, StmtContext ctx, bool fn_body);

static void resolve_assign(Resolver *r, Stmt *s) {
  resolve_expr(r, s->assign.value);
  Symbol *sym = lookup(r, s->assign.name);
  s->assign.sym = NULL;
  if (!sym) {
    diag_error(r->diags, s->assign.name_loc, "unknown name '%s'", s->assign.name);
    suggest(r, s->assign.name, SUGGEST_VALUE, s->assign.name_loc);
  } else if (sym->kind != SYM_LOCAL) {
    diag_error(r->diags, s->assign.name_loc, "cannot assign to '%s': it is not a variable", s->assign.name);
  } else if (sym->is_const_param || sym->is_param) {
    diag_error(r->diags, s->assign.name_loc, "cannot assign to parameter '%s'", s->assign.name);
  } else if (sym->is_loop_var) {
    diag_error(r->diags, s->assign.name_loc, "cannot assign to loop variable '%s'", s->assign.name);
  } else if (!sym->is_var) {
    diag_error(r->diags, s->assign.name_loc, "cannot assign to '%s': it was declared with 'let' (use 'var')",
               s->assign.name);
  } else {
    s->assign.sym = sym;
  }
}

static void resolve_stmt(Resolver *r, Stmt *s, StmtContext ctx, bool may_return) {
  if (s->kind != ST_FOR)
    resolve_annotations(r, s->annots, s->nannots, 0, s->kind == ST_WHILE ? "while loops" : "statements");
  switch (s->kind) {
  case ST_LET:
    resolve_expr(r, s->let.init);
    resolve_type(r, s->let.type);
    s->let.sym = declare_local(r, s->let.name, s->let.name_loc);
    s->let.sym->is_var = s->let.is_var;
    s->let.sym->is_binding = true;
    break;
  case ST_ASSIGN: resolve_assign(r, s); break;
  case ST_EXPR: resolve_expr(r, s->expr); break;
  case ST_RETURN:
    if (s->expr) resolve_expr(r, s->expr);
    if (ctx == CTX_KERNEL)
      diag_error(r->diags, s->loc, "'return' is not allowed in a kernel");
    else if (!may_return)
      diag_error(r->diags, s->loc, "'return' must be the last statement of a function");
    break;
  case ST_IF:
    resolve_expr(r, s->if_.cond);
    resolve_block(r, s->if_.then_block, ctx, false);
    if (s->if_.else_block) resolve_block(r, s->if_.else_block, ctx, false);
    break;
  case ST_FOR: {
    resolve_annotations(r, s->annots, s->nannots, ANNOT_ON_FOR, "for loops");
    if (s->for_.start) resolve_expr(r, s->for_.start);
    if (s->for_.end) resolve_expr(r, s->for_.end);
    if (s->for_.step) resolve_expr(r, s->for_.step);
    int saved = scope_push(r);
    s->for_.sym = declare_local(r, s->for_.var, s->for_.var_loc);
    s->for_.sym->is_loop_var = true;
    resolve_block(r, s->for_.body, ctx, false);
    scope_pop(r, saved);
    break;
  }
  case ST_WHILE:
    resolve_expr(r, s->while_.cond);
    resolve_block(r, s->while_.body, ctx, false);
    break;
  case ST_BLOCK: resolve_block(r, s->block, ctx, false); break;
  }
}

static void resolve_block(Resolver *r, AstBlock *b, StmtContext ctx, bool fn_body) {
  int saved = scope_push(r);
  for (int i = 0; i < b->nstmts && !diags_full(r->diags); i++)
    resolve_stmt(r, b->stmts[i], ctx, fn_body && i == b->nstmts - 1);
  scope_pop(r, saved);
}

/* ---- items ---- */

/* Parameters are declared first and resolved after, so a parameter's type
 * may name a const type parameter declared later in the list. */
static void resolve_params(Resolver *r, Item *it) {
  for (int i = 0; i < it->nparams; i++) {
    Param *p = &it->params[i];
    p->sym = declare_local(r, p->name, p->loc);
    p->sym->is_param = !p->is_const;
    p->sym->is_const_param = p->is_const;
  }
  for (int i = 0; i < it->nparams; i++) {
    Param *p = &it->params[i];
    if (p->default_value) resolve_expr(r, p->default_value);
    if (p->align) resolve_expr(r, p->align);
    if (p->multiple_of) resolve_expr(r, p->multiple_of);
    if (p->type && p->type->kind == TE_TYPE && !p->is_const)
      diag_error(r->diags, p->type->loc, "only const parameters can have type 'type'");
    resolve_type(r, p->type);
  }
}

static void resolve_item(Resolver *r, Item *it) {
  r->item = it;
  r->scope_start = 0;
  if (it->kind == ITEM_CONST) {
    resolve_type(r, it->const_type);
    if (it->const_value) resolve_expr(r, it->const_value);
    return;
  }
  StmtContext ctx = it->kind == ITEM_KERNEL ? CTX_KERNEL : CTX_FN;
  resolve_params(r, it);
  /* After the parameters: annotation arguments may name const parameters
   * (@warps(WARPS)). */
  resolve_annotations(r, it->annots, it->nannots, it->kind == ITEM_KERNEL ? ANNOT_ON_KERNEL : 0,
                      it->kind == ITEM_KERNEL ? "kernels" : "functions");
  resolve_type(r, it->ret);
  resolve_block(r, it->body, ctx, true);
  scope_truncate(r, 0); /* the parameters */
  if (it->kind == ITEM_FN && it->ret) {
    AstBlock *b = it->body;
    if (b->nstmts == 0 || b->stmts[b->nstmts - 1]->kind != ST_RETURN || !b->stmts[b->nstmts - 1]->expr)
      diag_error(r->diags, it->name_loc, "function '%s' declares a result type but does not end with 'return'",
                 it->name);
  }
}

/* ---- recursion ---- */

enum { VISIT_NONE, VISIT_ACTIVE, VISIT_DONE };

/* The call edges grouped by caller: the edges of item i (by its symbol's
 * id, the item's index) are order[first[i] .. first[i + 1]), in source
 * order. */
typedef struct CallGraph {
  int *first;
  CallEdge **order;
} CallGraph;

static CallGraph call_graph(Resolver *r, const Program *prog) {
  CallGraph g;
  g.first = ARENA_ARRAY(r->arena, int, prog->nitems + 2);
  g.order = ARENA_ARRAY(r->arena, CallEdge *, r->nedges + 1);
  for (int i = 0; i < r->nedges; i++) g.first[r->edges[i].caller->sym->id + 2]++;
  for (int i = 2; i < prog->nitems + 2; i++) g.first[i] += g.first[i - 1];
  /* first[i + 1] is now where item i's edges start; filling moves it to
   * where they end, which is where item i + 1's start. */
  for (int i = 0; i < r->nedges; i++) g.order[g.first[r->edges[i].caller->sym->id + 1]++] = &r->edges[i];
  return g;
}

/* Depth-first search over call edges from fn; an edge to an active
 * function closes a cycle. Iterative, with an explicit stack of (function,
 * next edge), because a chain of helpers can be as long as the file. */
static void find_cycles(Resolver *r, const CallGraph *g, Item *fn, int *state, int *stack, int *next_edge) {
  int depth = 0;
  stack[0] = fn->sym->id;
  next_edge[0] = g->first[stack[0]];
  state[stack[0]] = VISIT_ACTIVE;
  while (depth >= 0) {
    int caller = stack[depth];
    if (next_edge[depth] == g->first[caller + 1]) {
      state[caller] = VISIT_DONE;
      depth--;
      continue;
    }
    CallEdge *e = g->order[next_edge[depth]++];
    int callee = e->callee->sym->id;
    if (state[callee] == VISIT_ACTIVE) {
      diag_error(r->diags, e->loc, "recursive call to '%s': helper functions are inlined and cannot recurse",
                 e->callee->name);
    } else if (state[callee] == VISIT_NONE) {
      depth++;
      stack[depth] = callee;
      next_edge[depth] = g->first[callee];
      state[callee] = VISIT_ACTIVE;
    }
  }
}

static void check_recursion(Resolver *r, Program *prog) {
  CallGraph g = call_graph(r, prog);
  int *state = ARENA_ARRAY(r->arena, int, prog->nitems + 1);
  int *stack = ARENA_ARRAY(r->arena, int, prog->nitems + 1);
  int *next_edge = ARENA_ARRAY(r->arena, int, prog->nitems + 1);
  for (int i = 0; i < prog->nitems; i++)
    if (prog->items[i]->kind == ITEM_FN && state[prog->items[i]->sym->id] == VISIT_NONE)
      find_cycles(r, &g, prog->items[i], state, stack, next_edge);
}

static void declare_builtins(Resolver *r) {
  for (int i = 0; i < BI_COUNT; i++) {
    Symbol *s = new_symbol(r, SYM_BUILTIN, builtin_info[i].name, (SrcLoc){0, 0, 0});
    s->id = i;
    strmap_put(&r->globals, s->name, s);
  }
  static const char *const consts[] = {"inf", "nan"};
  for (int i = 0; i < 2; i++) {
    Symbol *s = new_symbol(r, SYM_BUILTIN_CONST, consts[i], (SrcLoc){0, 0, 0});
    s->id = i;
    strmap_put(&r->globals, s->name, s);
  }
  for (int k = SK_I1; k <= SK_F64; k++) {
    Symbol *s = new_symbol(r, SYM_TYPE, scalar_name((ScalarKind)k), (SrcLoc){0, 0, 0});
    s->id = k;
    strmap_put(&r->globals, s->name, s);
  }
  Symbol *b = new_symbol(r, SYM_TYPE, "bool", (SrcLoc){0, 0, 0}); /* an alias of i1 */
  b->id = SK_I1;
  strmap_put(&r->globals, b->name, b);
}

static void declare_items(Resolver *r, Program *prog) {
  static const SymKind kinds[] = {SYM_KERNEL, SYM_FN, SYM_GLOBAL_CONST};
  for (int i = 0; i < prog->nitems; i++) {
    Item *it = prog->items[i];
    Symbol *prev = strmap_get(&r->globals, it->name);
    if (prev && prev->item) {
      diag_error(r->diags, it->name_loc, "'%s' is already defined", it->name);
      diag_note(r->diags, prev->loc, "'%s' was defined here", it->name);
    } else if (prev) {
      diag_error(r->diags, it->name_loc, "'%s' is a builtin name and cannot be redefined", it->name);
    }
    Symbol *s = new_symbol(r, kinds[it->kind], it->name, it->name_loc);
    s->item = it;
    s->id = i;
    it->sym = s;
    if (!prev) strmap_put(&r->globals, it->name, s);
  }
}

bool resolve_program(Program *prog, Arena *arena, Diags *diags) {
  Resolver r = {0};
  r.arena = arena;
  r.diags = diags;
  r.prog = prog;
  prog->unused = NULL;
  prog->nunused = 0;
  int errors_before = diags->errors;
  strmap_init(&r.globals, arena);
  strmap_init(&r.locals, arena);
  declare_builtins(&r);
  declare_items(&r, prog);
  for (int i = 0; i < prog->nitems && !diags_full(diags); i++) resolve_item(&r, prog->items[i]);
  check_recursion(&r, prog);
  return diags->errors == errors_before;
}

void warn_unused(const Program *prog, Diags *diags) {
  for (int i = 0; i < prog->nunused; i++) {
    const Symbol *s = prog->unused[i];
    diag_warning(diags, s->loc, "unused %s '%s' (its value is never read; call it '_%s' if that is meant)",
                 s->is_var ? "variable" : "value", s->name, s->name);
  }
}
