/* ast_print.c - the AST as indented S-expressions, for `tilec --emit=ast`
 * and parser tests. Recursion depth is bounded by the parser's nesting cap. */
#include "ast.h"

static void print_expr(const Expr *e, StrBuf *out);

static void print_type(const TypeExpr *t, StrBuf *out) {
  if (!t) {
    sb_puts(out, "_");
    return;
  }
  switch (t->kind) {
  case TE_PTR: sb_printf(out, "*%s", t->name); break;
  case TE_TENSOR: sb_printf(out, "tensor<%s, %d>", t->name, t->desc_rank); break;
  case TE_TYPE: sb_puts(out, "type"); break;
  case TE_NAMED:
    sb_puts(out, t->name);
    if (t->ndims) {
      sb_putc(out, '[');
      for (int i = 0; i < t->ndims; i++) {
        if (i) sb_puts(out, ", ");
        print_expr(t->dims[i], out);
      }
      sb_putc(out, ']');
    }
    break;
  }
}

static void print_args(const Arg *args, int n, StrBuf *out) {
  for (int i = 0; i < n; i++) {
    sb_putc(out, ' ');
    if (args[i].name) sb_printf(out, "%s=", args[i].name);
    print_expr(args[i].value, out);
  }
}

static void print_expr(const Expr *e, StrBuf *out) {
  /* the tree of a file with syntax errors may lack parts (the parser
   * reports them and goes on) */
  if (!e) {
    sb_puts(out, "<missing>");
    return;
  }
  switch (e->kind) {
  case EX_INT: sb_printf(out, "%llu", (unsigned long long)e->ival); break;
  case EX_FLOAT: sb_printf(out, "%.17g", e->fval); break;
  case EX_BOOL: sb_puts(out, e->bval ? "true" : "false"); break;
  case EX_STRING:
    sb_putc(out, '"');
    for (const char *s = e->sval; *s; s++) {
      if (*s == '"' || *s == '\\') sb_printf(out, "\\%c", *s);
      else if (*s == '\n') sb_puts(out, "\\n");
      else if (*s == '\t') sb_puts(out, "\\t");
      else sb_putc(out, *s);
    }
    sb_putc(out, '"');
    break;
  case EX_NAME: sb_puts(out, e->name.name); break;
  case EX_SLICE: sb_puts(out, ":"); break;
  case EX_NONE: sb_puts(out, "None"); break;
  case EX_UNARY:
    sb_printf(out, "(%s ", token_kind_name(e->unary.op));
    print_expr(e->unary.operand, out);
    sb_putc(out, ')');
    break;
  case EX_BINARY:
    sb_printf(out, "(%s ", token_kind_name(e->binary.op));
    print_expr(e->binary.lhs, out);
    sb_putc(out, ' ');
    print_expr(e->binary.rhs, out);
    sb_putc(out, ')');
    break;
  case EX_CALL:
    sb_printf(out, "(call %s", e->call.callee);
    print_args(e->call.args, e->call.nargs, out);
    sb_putc(out, ')');
    break;
  case EX_INDEX:
    sb_puts(out, "(index ");
    print_expr(e->index.base, out);
    for (int i = 0; i < e->index.nitems; i++) {
      sb_putc(out, ' ');
      print_expr(e->index.items[i], out);
    }
    sb_putc(out, ')');
    break;
  case EX_LIST:
    sb_puts(out, "[");
    for (int i = 0; i < e->list.nitems; i++) {
      if (i) sb_putc(out, ' ');
      print_expr(e->list.items[i], out);
    }
    sb_puts(out, "]");
    break;
  case EX_CAST:
    sb_puts(out, "(as ");
    print_expr(e->cast.operand, out);
    sb_putc(out, ' ');
    print_type(e->cast.type, out);
    sb_putc(out, ')');
    break;
  }
}

static void indent(StrBuf *out, int depth) {
  for (int i = 0; i < depth; i++) sb_puts(out, "  ");
}

static void print_annots(const Annotation *a, int n, StrBuf *out, int depth) {
  for (int i = 0; i < n; i++) {
    indent(out, depth);
    sb_printf(out, "(@%s", a[i].name);
    print_args(a[i].args, a[i].nargs, out);
    sb_puts(out, ")\n");
  }
}

static void print_block(const AstBlock *b, StrBuf *out, int depth);

static void print_stmt(const Stmt *s, StrBuf *out, int depth) {
  print_annots(s->annots, s->nannots, out, depth);
  indent(out, depth);
  switch (s->kind) {
  case ST_LET:
    sb_printf(out, "(%s %s ", s->let.is_var ? "var" : "let", s->let.name);
    print_type(s->let.type, out);
    sb_putc(out, ' ');
    print_expr(s->let.init, out);
    sb_puts(out, ")\n");
    break;
  case ST_ASSIGN:
    sb_printf(out, "(%s %s ", token_kind_name(s->assign.op), s->assign.name);
    print_expr(s->assign.value, out);
    sb_puts(out, ")\n");
    break;
  case ST_EXPR:
    print_expr(s->expr, out);
    sb_putc(out, '\n');
    break;
  case ST_RETURN:
    sb_puts(out, "(return");
    if (s->expr) {
      sb_putc(out, ' ');
      print_expr(s->expr, out);
    }
    sb_puts(out, ")\n");
    break;
  case ST_IF:
    sb_puts(out, "(if ");
    print_expr(s->if_.cond, out);
    sb_putc(out, '\n');
    print_block(s->if_.then_block, out, depth + 1);
    if (s->if_.else_block) {
      indent(out, depth);
      sb_puts(out, " else\n");
      print_block(s->if_.else_block, out, depth + 1);
    }
    indent(out, depth);
    sb_puts(out, ")\n");
    break;
  case ST_FOR:
    sb_printf(out, "(for %s ", s->for_.var);
    if (s->for_.start) print_expr(s->for_.start, out);
    else sb_puts(out, "_");
    sb_putc(out, ' ');
    print_expr(s->for_.end, out);
    sb_putc(out, ' ');
    if (s->for_.step) print_expr(s->for_.step, out);
    else sb_puts(out, "_");
    sb_putc(out, '\n');
    print_block(s->for_.body, out, depth + 1);
    indent(out, depth);
    sb_puts(out, ")\n");
    break;
  case ST_WHILE:
    sb_puts(out, "(while ");
    print_expr(s->while_.cond, out);
    sb_putc(out, '\n');
    print_block(s->while_.body, out, depth + 1);
    indent(out, depth);
    sb_puts(out, ")\n");
    break;
  case ST_BLOCK:
    sb_puts(out, "(block\n");
    print_block(s->block, out, depth + 1);
    indent(out, depth);
    sb_puts(out, ")\n");
    break;
  }
}

static void print_block(const AstBlock *b, StrBuf *out, int depth) {
  if (!b) return;
  for (int i = 0; i < b->nstmts; i++) print_stmt(b->stmts[i], out, depth);
}

static void print_param(const Param *p, StrBuf *out) {
  sb_printf(out, " (%s%s ", p->is_const ? "const " : "", p->name);
  print_type(p->type, out);
  if (p->align) {
    sb_puts(out, " align=");
    print_expr(p->align, out);
  }
  if (p->multiple_of) {
    sb_puts(out, " multiple_of=");
    print_expr(p->multiple_of, out);
  }
  if (p->default_value) {
    sb_puts(out, " = ");
    print_expr(p->default_value, out);
  }
  sb_putc(out, ')');
}

void ast_print(const Program *p, StrBuf *out) {
  static const char *const kinds[] = {"kernel", "fn", "const", "import"};
  for (int i = 0; i < p->nitems; i++) {
    const Item *it = p->items[i];
    if (it->kind == ITEM_IMPORT) {
      sb_printf(out, "(import \"%s\" as %s)\n", it->import_path ? it->import_path : "", it->name ? it->name : "");
      continue;
    }
    print_annots(it->annots, it->nannots, out, 0);
    sb_printf(out, "(%s %s", kinds[it->kind], it->name);
    if (it->kind == ITEM_CONST) {
      sb_putc(out, ' ');
      print_type(it->const_type, out);
      sb_putc(out, ' ');
      print_expr(it->const_value, out);
      sb_puts(out, ")\n");
      continue;
    }
    for (int k = 0; k < it->nparams; k++) print_param(&it->params[k], out);
    if (it->ret) {
      sb_puts(out, " -> ");
      print_type(it->ret, out);
    }
    sb_putc(out, '\n');
    print_block(it->body, out, 1);
    sb_puts(out, ")\n");
  }
}

int64_t ast_config_value(const Expr *e) {
  if (e->kind == EX_BOOL) return e->bval ? 1 : 0;
  if (e->kind == EX_UNARY && e->unary.op == TOK_MINUS && e->unary.operand->kind == EX_INT)
    return -(int64_t)e->unary.operand->ival;
  return e->kind == EX_INT ? (int64_t)e->ival : 0;
}
