/* parser.c - recursive-descent parser from tokens to the AST.
 *
 * One function per grammar rule (spec/grammar.md), named after the rule.
 * Errors are reported with the location of the offending token; the parser
 * then skips to the next statement or item boundary ("panic mode", during
 * which further errors are suppressed) so that one file can report several
 * independent errors. Nesting depth is capped so that hostile input cannot
 * overflow the C stack.
 */
#include "parser.h"

#include <ctype.h>
#include <string.h>

/* Deepest nesting of blocks and expressions. Real kernels nest a handful of
 * levels; the cap bounds the parser's recursion (and every later recursive
 * walk of the tree) to a safe stack depth. */
#define PARSE_MAX_DEPTH 256

/* Deepest expression tree, counting the links of left-associative chains
 * (`a + b + c + ...`, `x as T as U`, `f(x)[:][:]`), which the parser builds
 * in loops but every later stage walks recursively. */
#define PARSE_MAX_TREE_DEPTH 1024

/* Most elements in one argument list, list literal or parameter list. */
#define PARSE_MAX_LIST 1024

typedef struct Parser {
  const Token *toks;
  int ntoks, pos;
  Arena *arena;
  Diags *diags;
  int depth;
  int chain; /* open links of left-associative chains */
  bool panic;    /* an error was reported; suppress until resynchronized */
  bool too_deep; /* the nesting limit was hit: stop parsing altogether */
  bool quiet;    /* skipping a misplaced definition: report nothing */
} Parser;

/* ---- token helpers ---- */

static const Token *peek(const Parser *p) { return &p->toks[p->pos]; }
static const Token *peek_at(const Parser *p, int k) {
  int i = p->pos + k;
  return &p->toks[i < p->ntoks ? i : p->ntoks - 1];
}
static bool at(const Parser *p, TokKind k) { return peek(p)->kind == k; }
static bool at_ident(const Parser *p, const char *s) {
  return at(p, TOK_IDENT) && strcmp(peek(p)->sval, s) == 0;
}

static const Token *advance(Parser *p) {
  const Token *t = peek(p);
  if (t->kind != TOK_EOF) p->pos++;
  return t;
}

static bool accept(Parser *p, TokKind k) {
  if (!at(p, k)) return false;
  advance(p);
  return true;
}

/* Describes a token for "expected X, found Y" messages. */
static const char *describe(Parser *p, const Token *t) {
  switch (t->kind) {
  case TOK_EOF: return "end of file";
  case TOK_IDENT: return arena_printf(p->arena, "'%s'", t->sval);
  case TOK_INT:
  case TOK_FLOAT:
  case TOK_ERROR: return arena_printf(p->arena, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), t->start);
  case TOK_STRING: return "a string literal";
  default: return arena_printf(p->arena, "'%s'", token_kind_name(t->kind));
  }
}

static void error_at(Parser *p, SrcLoc loc, const char *msg) {
  if (p->panic || p->quiet) {
    p->panic = true;
    return;
  }
  diag_error(p->diags, loc, "%s", msg);
  p->panic = true;
}

static void error_expected(Parser *p, const char *what) {
  const Token *t = peek(p);
  /* The lexer already reported bad tokens. */
  if (t->kind == TOK_ERROR) {
    p->panic = true;
    return;
  }
  error_at(p, t->loc, arena_printf(p->arena, "expected %s, found %s", what, describe(p, t)));
}

static bool expect(Parser *p, TokKind k, const char *what) {
  if (accept(p, k)) return true;
  error_expected(p, what);
  return false;
}

static const char *expect_ident(Parser *p, const char *what, SrcLoc *loc) {
  const Token *t = peek(p);
  if (loc) *loc = t->loc;
  if (t->kind == TOK_IDENT) {
    advance(p);
    return t->sval;
  }
  error_expected(p, what);
  return "<error>";
}

static bool enter(Parser *p) {
  if (p->too_deep) return false;
  if (++p->depth > PARSE_MAX_DEPTH) {
    p->panic = false;
    error_at(p, peek(p)->loc,
             arena_printf(p->arena, "nesting is too deep (more than %d levels)", PARSE_MAX_DEPTH));
    p->too_deep = true;
    return false;
  }
  return true;
}
static void leave(Parser *p) { p->depth--; }

/* Counts one more link of a chain; false (after reporting) at the limit. */
static bool chain_link(Parser *p) {
  if (p->too_deep) return false;
  if (p->depth + p->chain + 1 > PARSE_MAX_TREE_DEPTH) {
    p->panic = false;
    error_at(p, peek(p)->loc,
             arena_printf(p->arena, "expression is too deeply nested (more than %d levels)", PARSE_MAX_TREE_DEPTH));
    p->too_deep = true;
    return false;
  }
  p->chain++;
  return true;
}

static bool stopped(const Parser *p) { return p->too_deep || at(p, TOK_EOF) || diags_full(p->diags); }

/* Growable arrays of pointers in the arena. */
typedef struct PtrVec {
  void **items;
  int n, cap;
} PtrVec;

static void vec_push(Parser *p, PtrVec *v, void *item) {
  if (v->n == v->cap) {
    int cap = v->cap ? v->cap * 2 : 8;
    v->items = arena_grow(p->arena, v->items, sizeof(void *), (size_t)v->cap, (size_t)cap);
    v->cap = cap;
  }
  v->items[v->n++] = item;
}

static Expr *new_expr(Parser *p, ExprKind kind, SrcLoc loc) {
  Expr *e = ARENA_NEW(p->arena, Expr);
  e->kind = kind;
  e->loc = loc;
  return e;
}

/* An expression node standing for something that failed to parse. */
static Expr *error_expr(Parser *p, SrcLoc loc) {
  Expr *e = new_expr(p, EX_INT, loc);
  e->ival = 0;
  return e;
}

/* ---- expressions ---- */

static Expr *parse_expr(Parser *p);
static TypeExpr *parse_type(Parser *p);
static AstBlock *parse_block(Parser *p);
static Item *parse_callable(Parser *p, Annotation *annots, int nannots);

/* arg = [ IDENT "=" ] expr */
static void parse_arg(Parser *p, Arg *arg) {
  if (at(p, TOK_IDENT) && peek_at(p, 1)->kind == TOK_ASSIGN) {
    arg->name_loc = peek(p)->loc;
    arg->name = advance(p)->sval;
    advance(p);
  }
  arg->value = parse_expr(p);
}

/* args = "(" [ arg { "," arg } [ "," ] ] ")"; the "(" is already consumed. */
static Arg *parse_args(Parser *p, int *nargs) {
  Arg *args = NULL;
  int n = 0, cap = 0;
  while (!at(p, TOK_RPAREN) && !stopped(p)) {
    if (n == PARSE_MAX_LIST) {
      error_at(p, peek(p)->loc, arena_printf(p->arena, "too many arguments (more than %d)", PARSE_MAX_LIST));
      break;
    }
    if (n == cap) {
      int ncap = cap ? cap * 2 : 4;
      args = arena_grow(p->arena, args, sizeof(Arg), (size_t)cap, (size_t)ncap);
      cap = ncap;
    }
    parse_arg(p, &args[n++]);
    if (!accept(p, TOK_COMMA)) break;
  }
  expect(p, TOK_RPAREN, "',' or ')'");
  *nargs = n;
  return args;
}

/* Comma-separated expressions up to `close`; the opener is consumed. */
static Expr **parse_expr_list(Parser *p, TokKind close, const char *what, int *count) {
  PtrVec v = {0};
  while (!at(p, close) && !stopped(p)) {
    if (v.n == PARSE_MAX_LIST) {
      error_at(p, peek(p)->loc, arena_printf(p->arena, "too many elements (more than %d)", PARSE_MAX_LIST));
      break;
    }
    vec_push(p, &v, parse_expr(p));
    if (!accept(p, TOK_COMMA)) break;
  }
  expect(p, close, what);
  *count = v.n;
  return (Expr **)v.items;
}

/* index_item = ":" | "None" | expr */
static Expr *parse_index_item(Parser *p) {
  const Token *t = peek(p);
  if (accept(p, TOK_COLON)) return new_expr(p, EX_SLICE, t->loc);
  if (accept(p, TOK_KW_NONE)) return new_expr(p, EX_NONE, t->loc);
  return parse_expr(p);
}

/* primary = literal | IDENT | "(" expr ")" | "[" expr_list "]" */
static Expr *parse_primary(Parser *p) {
  const Token *t = peek(p);
  Expr *e;
  switch (t->kind) {
  case TOK_INT:
    advance(p);
    e = new_expr(p, EX_INT, t->loc);
    e->ival = t->ival;
    return e;
  case TOK_FLOAT:
    advance(p);
    e = new_expr(p, EX_FLOAT, t->loc);
    e->fval = t->fval;
    return e;
  case TOK_KW_TRUE:
  case TOK_KW_FALSE:
    advance(p);
    e = new_expr(p, EX_BOOL, t->loc);
    e->bval = t->kind == TOK_KW_TRUE;
    return e;
  case TOK_STRING:
    advance(p);
    e = new_expr(p, EX_STRING, t->loc);
    e->sval = t->sval;
    return e;
  case TOK_IDENT: {
    advance(p);
    e = new_expr(p, EX_NAME, t->loc);
    e->name.name = t->sval;
    /* a name from an imported file: namespace.name (namespaces nest) */
    while (at(p, TOK_DOT)) {
      advance(p);
      SrcLoc part_loc;
      const char *part = expect_ident(p, "a name after '.'", &part_loc);
      if (!part) break;
      e->name.name = arena_printf(p->arena, "%s.%s", e->name.name, part);
    }
    return e;
  }
  case TOK_LPAREN: {
    advance(p);
    e = parse_expr(p);
    expect(p, TOK_RPAREN, "')'");
    return e;
  }
  case TOK_LBRACKET: {
    advance(p);
    e = new_expr(p, EX_LIST, t->loc);
    e->list.items = parse_expr_list(p, TOK_RBRACKET, "',' or ']'", &e->list.nitems);
    return e;
  }
  case TOK_KW_NONE:
    error_at(p, t->loc, "'None' is only allowed inside an index, as in x[:, None]");
    advance(p);
    return error_expr(p, t->loc);
  default:
    error_expected(p, "an expression");
    if (t->kind == TOK_ERROR) advance(p);
    return error_expr(p, t->loc);
  }
}

/* postfix = primary { "(" args ")" | "[" index_items "]" } */
static Expr *parse_postfix(Parser *p) {
  Expr *e = parse_primary(p);
  int links = 0;
  for (;; links++) {
    const Token *t = peek(p);
    if ((t->kind == TOK_LPAREN || t->kind == TOK_LBRACKET) && !chain_link(p)) break;
    if (t->kind == TOK_LPAREN) {
      if (e->kind != EX_NAME) {
        error_at(p, t->loc, "only named functions can be called");
        links++;
        break;
      }
      advance(p);
      Expr *call = new_expr(p, EX_CALL, e->loc);
      call->call.callee = e->name.name;
      call->call.callee_loc = e->loc;
      call->call.args = parse_args(p, &call->call.nargs);
      e = call;
    } else if (t->kind == TOK_LBRACKET) {
      advance(p);
      Expr *ix = new_expr(p, EX_INDEX, t->loc);
      ix->index.base = e;
      PtrVec v = {0};
      while (!at(p, TOK_RBRACKET) && !stopped(p)) {
        if (v.n == PARSE_MAX_LIST) {
          error_at(p, peek(p)->loc, arena_printf(p->arena, "too many index entries (more than %d)", PARSE_MAX_LIST));
          break;
        }
        vec_push(p, &v, parse_index_item(p));
        if (!accept(p, TOK_COMMA)) break;
      }
      expect(p, TOK_RBRACKET, "',' or ']'");
      ix->index.items = (Expr **)v.items;
      ix->index.nitems = v.n;
      e = ix;
    } else {
      break;
    }
  }
  p->chain -= links;
  return e;
}

/* unary = ( "-" | "!" | "~" ) unary | postfix */
static Expr *parse_unary(Parser *p) {
  const Token *t = peek(p);
  if (t->kind == TOK_MINUS || t->kind == TOK_BANG || t->kind == TOK_TILDE) {
    if (!enter(p)) return error_expr(p, t->loc);
    advance(p);
    Expr *operand = parse_unary(p);
    leave(p);
    Expr *e = new_expr(p, EX_UNARY, t->loc);
    e->unary.op = t->kind;
    e->unary.operand = operand;
    return e;
  }
  return parse_postfix(p);
}

/* cast = unary { "as" type } */
static Expr *parse_cast(Parser *p) {
  Expr *e = parse_unary(p);
  int links = 0;
  while (at(p, TOK_KW_AS) && chain_link(p)) {
    links++;
    SrcLoc loc = advance(p)->loc;
    Expr *c = new_expr(p, EX_CAST, loc);
    c->cast.operand = e;
    c->cast.type = parse_type(p);
    e = c;
  }
  p->chain -= links;
  return e;
}

/* Binary precedence, lowest first (as in Rust: bitwise operators bind
 * tighter than comparisons, so `a & m == 0` means `(a & m) == 0`). */
enum { PREC_NONE, PREC_OR, PREC_AND, PREC_CMP, PREC_BITOR, PREC_BITXOR, PREC_BITAND, PREC_SHIFT, PREC_ADD, PREC_MUL };

static int binary_prec(TokKind k) {
  switch (k) {
  case TOK_OR_OR: return PREC_OR;
  case TOK_AND_AND: return PREC_AND;
  case TOK_EQ: case TOK_NE: case TOK_LT: case TOK_LE: case TOK_GT: case TOK_GE: return PREC_CMP;
  case TOK_PIPE: return PREC_BITOR;
  case TOK_CARET: return PREC_BITXOR;
  case TOK_AMP: return PREC_BITAND;
  case TOK_SHL: case TOK_SHR: return PREC_SHIFT;
  case TOK_PLUS: case TOK_MINUS: return PREC_ADD;
  case TOK_STAR: case TOK_SLASH: case TOK_PERCENT: return PREC_MUL;
  default: return PREC_NONE;
  }
}

/* binary = cast { binop cast }, by precedence climbing; comparisons do not
 * associate. */
static Expr *parse_binary(Parser *p, int min_prec) {
  Expr *lhs = parse_cast(p);
  int links = 0;
  for (;;) {
    const Token *t = peek(p);
    int prec = binary_prec(t->kind);
    if (prec == PREC_NONE || prec < min_prec || !chain_link(p)) break;
    links++;
    advance(p);
    if (!enter(p)) break;
    Expr *rhs = parse_binary(p, prec + 1);
    leave(p);
    Expr *e = new_expr(p, EX_BINARY, t->loc);
    e->binary.op = t->kind;
    e->binary.lhs = lhs;
    e->binary.rhs = rhs;
    lhs = e;
    if (prec == PREC_CMP && binary_prec(peek(p)->kind) == PREC_CMP) {
      error_at(p, peek(p)->loc, "comparison operators cannot be chained; use && to combine comparisons");
      break;
    }
  }
  p->chain -= links;
  return lhs;
}

static Expr *parse_expr(Parser *p) {
  if (!enter(p)) return error_expr(p, peek(p)->loc);
  Expr *e = parse_binary(p, PREC_OR);
  leave(p);
  return e;
}

/* ---- types ---- */

/* type = "*" IDENT | "tensor" "<" IDENT "," INT ">" | "type" | IDENT [ "[" dims "]" ] */
static TypeExpr *parse_type(Parser *p) {
  TypeExpr *t = ARENA_NEW(p->arena, TypeExpr);
  t->loc = peek(p)->loc;
  if (accept(p, TOK_STAR)) {
    t->kind = TE_PTR;
    t->name = expect_ident(p, "a type name after '*'", &t->name_loc);
    if (at(p, TOK_LBRACKET))
      error_at(p, peek(p)->loc, "pointer types cannot have a shape; a tile of pointers comes from pointer arithmetic");
    return t;
  }
  if (at_ident(p, "tensor") && peek_at(p, 1)->kind == TOK_LT) {
    advance(p);
    advance(p);
    t->kind = TE_TENSOR;
    t->name = expect_ident(p, "an element type", &t->name_loc);
    expect(p, TOK_COMMA, "','");
    const Token *r = peek(p);
    if (expect(p, TOK_INT, "the tensor rank")) {
      if (r->ival < 1 || r->ival > TILE_MAX_RANK)
        error_at(p, r->loc, arena_printf(p->arena, "tensor rank must be between 1 and %d", TILE_MAX_RANK));
      else
        t->desc_rank = (int)r->ival;
    }
    expect(p, TOK_GT, "'>'");
    return t;
  }
  if (at_ident(p, "type")) {
    advance(p);
    t->kind = TE_TYPE;
    return t;
  }
  t->kind = TE_NAMED;
  t->name = expect_ident(p, "a type", &t->name_loc);
  if (accept(p, TOK_LBRACKET)) {
    t->dims = parse_expr_list(p, TOK_RBRACKET, "',' or ']'", &t->ndims);
    if (t->ndims == 0) error_at(p, t->loc, "a tile type needs at least one dimension");
  }
  return t;
}

/* ---- statements ---- */

static Stmt *new_stmt(Parser *p, StmtKind kind, SrcLoc loc) {
  Stmt *s = ARENA_NEW(p->arena, Stmt);
  s->kind = kind;
  s->loc = loc;
  return s;
}

/* Skips to just after the next ';' or to a '}' or a token that starts a
 * statement, so parsing can continue after an error. */
static void sync_stmt(Parser *p) {
  int braces = 0;
  while (!at(p, TOK_EOF)) {
    TokKind k = peek(p)->kind;
    if (k == TOK_SEMI && braces == 0) {
      advance(p);
      break;
    }
    if (k == TOK_LBRACE) braces++;
    if (k == TOK_RBRACE) {
      if (braces == 0) break;
      braces--;
      advance(p);
      if (braces == 0) break;
      continue;
    }
    if (braces == 0 && (k == TOK_KW_LET || k == TOK_KW_VAR || k == TOK_KW_IF || k == TOK_KW_FOR ||
                        k == TOK_KW_WHILE || k == TOK_KW_RETURN || k == TOK_KW_KERNEL || k == TOK_KW_FN))
      break;
    advance(p);
  }
  p->panic = false;
}

/* annotation = "@" IDENT [ "(" args ")" ] */
static Annotation *parse_annotations(Parser *p, int *count) {
  Annotation *list = NULL;
  int n = 0, cap = 0;
  while (at(p, TOK_AT)) {
    SrcLoc loc = advance(p)->loc;
    if (n == cap) {
      int ncap = cap ? cap * 2 : 2;
      list = arena_grow(p->arena, list, sizeof(Annotation), (size_t)cap, (size_t)ncap);
      cap = ncap;
    }
    Annotation *a = &list[n++];
    a->loc = loc;
    a->name = expect_ident(p, "an annotation name after '@'", NULL);
    if (accept(p, TOK_LPAREN)) a->args = parse_args(p, &a->nargs);
    if (p->panic) break;
  }
  *count = n;
  return list;
}

/* let_stmt = ( "let" | "var" ) IDENT [ ":" type ] "=" expr ";" */
static Stmt *parse_let(Parser *p) {
  const Token *kw = advance(p);
  Stmt *s = new_stmt(p, ST_LET, kw->loc);
  s->let.is_var = kw->kind == TOK_KW_VAR;
  s->let.name = expect_ident(p, "a variable name", &s->let.name_loc);
  if (accept(p, TOK_COLON)) s->let.type = parse_type(p);
  if (!expect(p, TOK_ASSIGN, "'='")) return s;
  s->let.init = parse_expr(p);
  expect(p, TOK_SEMI, "';'");
  return s;
}

static bool is_assign_op(TokKind k) {
  return k == TOK_ASSIGN || (k >= TOK_PLUS_ASSIGN && k <= TOK_SHR_ASSIGN);
}

/* assign_stmt = IDENT assign_op expr ";" */
static Stmt *parse_assign(Parser *p) {
  const Token *name = advance(p);
  const Token *op = advance(p);
  Stmt *s = new_stmt(p, ST_ASSIGN, op->loc);
  s->assign.name = name->sval;
  s->assign.name_loc = name->loc;
  s->assign.op = op->kind;
  s->assign.value = parse_expr(p);
  expect(p, TOK_SEMI, "';'");
  return s;
}

/* if_stmt = "if" expr block [ "else" ( block | if_stmt ) ] */
static Stmt *parse_if(Parser *p) {
  Stmt *s = new_stmt(p, ST_IF, advance(p)->loc);
  s->if_.cond = parse_expr(p);
  s->if_.then_block = parse_block(p);
  if (accept(p, TOK_KW_ELSE)) {
    if (at(p, TOK_KW_IF)) {
      AstBlock *b = ARENA_NEW(p->arena, AstBlock);
      b->loc = peek(p)->loc;
      if (!enter(p)) return s;
      Stmt *inner = parse_if(p);
      leave(p);
      b->stmts = ARENA_ARRAY(p->arena, Stmt *, 1);
      b->stmts[0] = inner;
      b->nstmts = 1;
      s->if_.else_block = b;
    } else {
      s->if_.else_block = parse_block(p);
    }
  }
  return s;
}

/* for_stmt = "for" IDENT "in" "range" "(" expr [ "," expr [ "," expr ] ] ")" block */
static Stmt *parse_for(Parser *p) {
  Stmt *s = new_stmt(p, ST_FOR, advance(p)->loc);
  s->for_.var = expect_ident(p, "a loop variable name", &s->for_.var_loc);
  if (!expect(p, TOK_KW_IN, "'in'")) return s;
  if (!at_ident(p, "range")) {
    error_expected(p, "'range(...)'");
    return s;
  }
  advance(p);
  if (!expect(p, TOK_LPAREN, "'('")) return s;
  int n;
  SrcLoc args_loc = peek(p)->loc;
  Expr **args = parse_expr_list(p, TOK_RPAREN, "',' or ')'", &n);
  if (n < 1 || n > 3) {
    error_at(p, args_loc, "range() takes 1 to 3 arguments: range(end), range(start, end) or range(start, end, step)");
  } else if (n == 1) {
    s->for_.end = args[0];
  } else {
    s->for_.start = args[0];
    s->for_.end = args[1];
    s->for_.step = n == 3 ? args[2] : NULL;
  }
  s->for_.body = parse_block(p);
  return s;
}

/* while_stmt = "while" expr block */
static Stmt *parse_while(Parser *p) {
  Stmt *s = new_stmt(p, ST_WHILE, advance(p)->loc);
  s->while_.cond = parse_expr(p);
  s->while_.body = parse_block(p);
  return s;
}

/* stmt = let_stmt | assign_stmt | if_stmt | { annotation } ( for_stmt | while_stmt )
 *      | "return" [ expr ] ";" | block | expr ";" */
static Stmt *parse_stmt(Parser *p) {
  const Token *t = peek(p);
  int nannots = 0;
  Annotation *annots = NULL;
  if (t->kind == TOK_AT) {
    annots = parse_annotations(p, &nannots);
    t = peek(p);
    if (t->kind != TOK_KW_FOR && t->kind != TOK_KW_WHILE && !p->panic) {
      error_at(p, t->loc, "expected a 'for' or 'while' loop after a statement annotation");
      return NULL;
    }
  }
  Stmt *s;
  switch (t->kind) {
  case TOK_KW_LET:
  case TOK_KW_VAR: s = parse_let(p); break;
  case TOK_KW_IF: s = parse_if(p); break;
  case TOK_KW_FOR: s = parse_for(p); break;
  case TOK_KW_WHILE: s = parse_while(p); break;
  case TOK_KW_RETURN:
    s = new_stmt(p, ST_RETURN, advance(p)->loc);
    if (!at(p, TOK_SEMI)) s->expr = parse_expr(p);
    expect(p, TOK_SEMI, "';'");
    break;
  case TOK_LBRACE:
    s = new_stmt(p, ST_BLOCK, t->loc);
    s->block = parse_block(p);
    break;
  case TOK_KW_KERNEL:
  case TOK_KW_FN:
    error_at(p, t->loc, arena_printf(p->arena, "'%s' must be at the top level of a file", token_kind_name(t->kind)));
    /* Skip the whole definition, reporting nothing inside it. */
    p->panic = false;
    p->quiet = true;
    parse_callable(p, NULL, 0);
    p->quiet = false;
    p->panic = false;
    return NULL;
  default:
    if (t->kind == TOK_IDENT && is_assign_op(peek_at(p, 1)->kind)) {
      s = parse_assign(p);
    } else {
      s = new_stmt(p, ST_EXPR, t->loc);
      s->expr = parse_expr(p);
      if (!at(p, TOK_SEMI) && is_assign_op(peek(p)->kind))
        error_at(p, peek(p)->loc, "only a variable name can be assigned to");
      expect(p, TOK_SEMI, "';'");
    }
  }
  s->annots = annots;
  s->nannots = nannots;
  return s;
}

/* block = "{" { stmt } "}" */
static AstBlock *parse_block(Parser *p) {
  AstBlock *b = ARENA_NEW(p->arena, AstBlock);
  b->loc = peek(p)->loc;
  if (!expect(p, TOK_LBRACE, "'{'")) return b;
  if (!enter(p)) return b;
  PtrVec v = {0};
  while (!at(p, TOK_RBRACE) && !stopped(p)) {
    int before = p->pos;
    Stmt *s = parse_stmt(p);
    if (s && !p->panic) vec_push(p, &v, s);
    if (p->panic) sync_stmt(p);
    if (p->pos == before && !at(p, TOK_RBRACE)) advance(p); /* always make progress */
  }
  leave(p);
  if (!p->too_deep) expect(p, TOK_RBRACE, "'}'");
  b->stmts = (Stmt **)v.items;
  b->nstmts = v.n;
  return b;
}

/* ---- items ---- */

/* param_fact = "align" "(" expr ")" | "multiple_of" "(" expr ")" */
static void parse_param_facts(Parser *p, Param *prm) {
  while (at_ident(p, "align") || at_ident(p, "multiple_of")) {
    const Token *t = advance(p);
    bool is_align = strcmp(t->sval, "align") == 0;
    Expr **slot = is_align ? &prm->align : &prm->multiple_of;
    if (*slot) error_at(p, t->loc, arena_printf(p->arena, "'%s' is given twice", t->sval));
    if (!expect(p, TOK_LPAREN, "'('")) return;
    *slot = parse_expr(p);
    if (!expect(p, TOK_RPAREN, "')'")) return;
  }
}

/* param = "const" IDENT ":" type [ "=" expr ] | IDENT [ ":" type { param_fact } ] */
static void parse_param(Parser *p, Param *prm, bool in_kernel) {
  prm->is_const = accept(p, TOK_KW_CONST);
  prm->name = expect_ident(p, "a parameter name", &prm->loc);
  if (accept(p, TOK_COLON)) {
    prm->type = parse_type(p);
    if (!prm->is_const) parse_param_facts(p, prm);
  } else if (prm->is_const || in_kernel) {
    error_expected(p, "':' and a type");
  }
  if (at(p, TOK_ASSIGN)) {
    if (!prm->is_const) error_at(p, peek(p)->loc, "only const parameters can have default values");
    advance(p);
    prm->default_value = parse_expr(p);
  }
}

static Param *parse_params(Parser *p, bool in_kernel, int *count) {
  Param *list = NULL;
  int n = 0, cap = 0;
  expect(p, TOK_LPAREN, "'('");
  while (!at(p, TOK_RPAREN) && !stopped(p) && !p->panic) {
    if (n == PARSE_MAX_LIST) {
      error_at(p, peek(p)->loc, arena_printf(p->arena, "too many parameters (more than %d)", PARSE_MAX_LIST));
      break;
    }
    if (n == cap) {
      int ncap = cap ? cap * 2 : 8;
      list = arena_grow(p->arena, list, sizeof(Param), (size_t)cap, (size_t)ncap);
      cap = ncap;
    }
    parse_param(p, &list[n++], in_kernel);
    if (!accept(p, TOK_COMMA)) break;
  }
  expect(p, TOK_RPAREN, "',' or ')'");
  *count = n;
  return list;
}

/* kernel = "kernel" IDENT params block
 * function = "fn" IDENT params [ "->" type ] block */
static Item *parse_callable(Parser *p, Annotation *annots, int nannots) {
  const Token *kw = advance(p);
  Item *it = ARENA_NEW(p->arena, Item);
  it->kind = kw->kind == TOK_KW_KERNEL ? ITEM_KERNEL : ITEM_FN;
  it->loc = kw->loc;
  it->annots = annots;
  it->nannots = nannots;
  it->name = expect_ident(p, it->kind == ITEM_KERNEL ? "a kernel name" : "a function name", &it->name_loc);
  it->params = parse_params(p, it->kind == ITEM_KERNEL, &it->nparams);
  if (at(p, TOK_ARROW)) {
    if (it->kind == ITEM_KERNEL) error_at(p, peek(p)->loc, "kernels do not return values");
    advance(p);
    it->ret = parse_type(p);
  }
  it->body = parse_block(p);
  return it;
}

/* const_decl = "const" IDENT [ ":" type ] "=" expr ";" */
static Item *parse_const_decl(Parser *p) {
  Item *it = ARENA_NEW(p->arena, Item);
  it->kind = ITEM_CONST;
  it->loc = advance(p)->loc;
  it->name = expect_ident(p, "a constant name", &it->name_loc);
  if (accept(p, TOK_COLON)) it->const_type = parse_type(p);
  if (expect(p, TOK_ASSIGN, "'='")) {
    it->const_value = parse_expr(p);
    expect(p, TOK_SEMI, "';'");
  }
  return it;
}

/* Skips to the next token that can start an item. */
static void sync_item(Parser *p) {
  int braces = 0;
  while (!at(p, TOK_EOF)) {
    TokKind k = peek(p)->kind;
    if (braces == 0 && (k == TOK_KW_KERNEL || k == TOK_KW_FN || k == TOK_KW_CONST || k == TOK_KW_IMPORT || k == TOK_AT))
      break;
    if (k == TOK_LBRACE) braces++;
    if (k == TOK_RBRACE && braces > 0) braces--;
    advance(p);
  }
  p->panic = false;
}

/* The namespace an import without `as` gets: the file name without its
 * directories and its .tile ending, if that is an identifier; else NULL. */
static const char *default_namespace(Parser *p, const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  if (n > 5 && strcmp(base + n - 5, ".tile") == 0) n -= 5;
  if (n == 0 || !(isalpha((unsigned char)base[0]) || base[0] == '_')) return NULL;
  for (size_t i = 0; i < n; i++)
    if (!(isalnum((unsigned char)base[i]) || base[i] == '_')) return NULL;
  return arena_strndup(p->arena, base, n);
}

/* import = "import" STRING [ "as" IDENT ] ";" */
static Item *parse_import(Parser *p) {
  Item *it = ARENA_NEW(p->arena, Item);
  it->kind = ITEM_IMPORT;
  it->loc = advance(p)->loc;
  const Token *path = peek(p);
  if (!expect(p, TOK_STRING, "the file to import, as a string")) return it;
  it->import_path = path->sval;
  it->name_loc = path->loc;
  if (accept(p, TOK_KW_AS)) {
    it->name = expect_ident(p, "a namespace name after 'as'", &it->name_loc);
  } else if (!(it->name = default_namespace(p, path->sval))) {
    error_at(p, path->loc, "the file name is not an identifier: name its namespace with 'as', as in "
                           "import \"x-y.tile\" as xy;");
  }
  expect(p, TOK_SEMI, "';'");
  return it;
}

/* item = { annotation } ( kernel | function ) | const_decl | import */
static Item *parse_item(Parser *p) {
  int nannots = 0;
  Annotation *annots = parse_annotations(p, &nannots);
  if (p->panic) return NULL;
  const Token *t = peek(p);
  if (t->kind == TOK_KW_KERNEL || t->kind == TOK_KW_FN) return parse_callable(p, annots, nannots);
  if (t->kind == TOK_KW_CONST && nannots == 0) return parse_const_decl(p);
  if (t->kind == TOK_KW_IMPORT && nannots == 0) return parse_import(p);
  error_expected(p, nannots ? "'kernel' or 'fn' after an annotation" : "'kernel', 'fn', 'const' or 'import'");
  return NULL;
}

/* file = { item } EOF */
Program *parse(const TokenList *tl, Arena *arena, Diags *diags) {
  Parser p = {.toks = tl->tokens, .ntoks = tl->count, .arena = arena, .diags = diags};
  Program *prog = ARENA_NEW(arena, Program);
  PtrVec items = {0};
  while (!at(&p, TOK_EOF) && !p.too_deep && !diags_full(diags)) {
    int before = p.pos;
    Item *it = parse_item(&p);
    if (it && !p.panic) vec_push(&p, &items, it);
    if (p.panic) {
      if (p.pos == before) advance(&p);
      sync_item(&p);
    }
  }
  prog->items = (Item **)items.items;
  prog->nitems = items.n;
  return prog;
}
