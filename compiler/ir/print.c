/* print.c - the textual form of the tile IR, printer side.
 *
 * Writes modules and functions in the format that parse.c reads back, so
 * that print -> parse -> print is the identity: the text serves IR dumps,
 * golden tests and hand-written IR inputs.  The format in brief:
 *
 *   module "softmax.tile"
 *
 *   kernel @k(%p: *f32 align(16), %n: i32, %c: i1) consts(B: i32 = 64) warps(4) @1:1 {
 *     %0 = program_id {axis = 0} : i32 @3:16
 *     %1 = const 1.0 : f32[64] @4:9
 *     %2, %3 = for %4 = %0 to %n step %0 iter(%5 = %1, %6 = %n) {stages = 3} @5:3 {
 *       yield %5, %6 @5:3
 *     }
 *     %7 = if %c -> i32 @6:3 {
 *       yield %n @6:3
 *     } else {
 *       yield %3 @6:3
 *     }
 *     %8 = while (%9 = %n) @7:3 {
 *       %10 = cmp_gt %9, %0 : i1 @7:9
 *       yield %10 @7:3
 *     } do (%11) {
 *       yield %11 @7:3
 *     }
 *     return @9:1
 *   }
 *
 * (the arguments of a while's second region are listed after `do`; a for
 * without loop-carried values leaves out `iter(...)`).
 * Kernel parameters print by name; every other value is renumbered %0, %1,
 * ... in textual order (an op's results, then per region its arguments and
 * its ops), overwriting Value.id.  The printer never fails: IR that the
 * verifier would reject still prints (a malformed control op falls back to
 * the generic form), so a broken pass can be debugged from the dump.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* Room for the longest type string: "tensor<f8e4m3, 255>" plus four
 * eleven-character dimensions and separators. */
#define PRINT_TYPE_BUF 96
/* Room for a double printed with "%.17g" ("-2.2250738585072014e-308"). */
#define PRINT_FLOAT_BUF 40
/* Significant digits that always suffice for a double to round-trip. */
#define PRINT_MAX_FLOAT_DIGITS 17
/* Spaces per nesting level. */
#define PRINT_INDENT 2
/* Bits per entry of trans's packed perm attribute. */
#define PRINT_PERM_BITS 4

typedef struct Printer {
  const Func *func;
  StrBuf *out;
} Printer;

/* ---- scalars ------------------------------------------------------------ */

static void put_type(StrBuf *out, TType t) {
  char buf[PRINT_TYPE_BUF];
  if (t.rank > TILE_MAX_RANK) t.rank = TILE_MAX_RANK; /* never read past shape[] */
  sb_puts(out, type_str(t, buf, sizeof buf));
}

/* The shortest "%.Ng" that reads back as d, made to look like a float
 * (contains '.' or 'e', or is inf/-inf/nan). */
static void format_float(double d, char *buf, size_t size) {
  if (isnan(d)) {
    snprintf(buf, size, "nan");
    return;
  }
  if (isinf(d)) {
    snprintf(buf, size, d < 0 ? "-inf" : "inf");
    return;
  }
  for (int digits = 1; digits <= PRINT_MAX_FLOAT_DIGITS; digits++) {
    snprintf(buf, size, "%.*g", digits, d);
    if (strtod(buf, NULL) == d) break;
  }
  if (!strpbrk(buf, ".e")) {
    size_t n = strlen(buf);
    snprintf(buf + n, size - n, ".0");
  }
}

static void put_float(StrBuf *out, double d) {
  char buf[PRINT_FLOAT_BUF];
  format_float(d, buf, sizeof buf);
  sb_puts(out, buf);
}

static bool kind_is_int(unsigned k) { return k < SK_COUNT && scalar_is_int((ScalarKind)k); }
static bool kind_is_float(unsigned k) { return k < SK_COUNT && scalar_is_float((ScalarKind)k); }

/* An integer constant of element kind k: true/false for i1, unsigned for
 * unsigned kinds, signed otherwise. */
static void put_int_value(StrBuf *out, int64_t v, unsigned k) {
  if (k == SK_I1)
    sb_puts(out, v ? "true" : "false");
  else if (kind_is_int(k) && !scalar_is_signed((ScalarKind)k))
    sb_printf(out, "%llu", (unsigned long long)(uint64_t)v);
  else
    sb_printf(out, "%lld", (long long)v);
}

static void put_scalar_value(StrBuf *out, unsigned k, int64_t ival, double fval) {
  if (kind_is_float(k))
    put_float(out, fval);
  else
    put_int_value(out, ival, k);
}

/* Writes s between double quotes; '"' and '\' are escaped, control bytes
 * written as \xNN so that the line stays one line. */
static void put_quoted(StrBuf *out, const char *s) {
  sb_putc(out, '"');
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      sb_printf(out, "\\%c", c);
    else if (c < 0x20 || c == 0x7f)
      sb_printf(out, "\\x%02x", c);
    else
      sb_putc(out, (char)c);
  }
  sb_putc(out, '"');
}

static void put_loc(StrBuf *out, SrcLoc loc) {
  if (loc.line) sb_printf(out, " @%u:%u", loc.line, loc.col);
}

static void put_indent(StrBuf *out, int depth) {
  for (int i = 0; i < depth * PRINT_INDENT; i++) sb_putc(out, ' ');
}

/* ---- values ------------------------------------------------------------- */

static bool is_identifier(const char *s) {
  if (!s || !(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z'))) return false;
  for (; *s; s++)
    if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
          (*s >= '0' && *s <= '9')))
      return false;
  return true;
}

static void put_param_name(StrBuf *out, const Func *f, uint32_t index) {
  const char *name = f->params ? f->params[index].name : NULL;
  if (is_identifier(name))
    sb_printf(out, "%%%s", name);
  else
    sb_printf(out, "%%arg%u", index);
}

static void put_value(const Printer *p, const Value *v) {
  if (!v)
    sb_puts(p->out, "%<null>");
  else if (!v->def && v->owner == &p->func->body && v->index < p->func->body.nargs)
    put_param_name(p->out, p->func, v->index);
  else
    sb_printf(p->out, "%%%u", v->id);
}

static void put_operand_list(const Printer *p, const Op *op, uint32_t from, uint32_t to) {
  for (uint32_t i = from; i < to && i < op->noperands; i++) {
    if (i > from) sb_puts(p->out, ", ");
    put_value(p, op->operands[i]);
  }
}

/* Numbers the values of block b from `next` on in textual order: each op's
 * results, then per region its arguments and (recursively) its ops. */
static uint32_t number_block(const Block *b, uint32_t next) {
  for (Op *op = b->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->nresults; i++) op->results[i].id = next++;
    for (int r = 0; r < op->nregions; r++) {
      Block *region = &op->regions[r];
      for (uint32_t i = 0; i < region->nargs; i++) region->args[i].id = next++;
      next = number_block(region, next);
    }
  }
  return next;
}

/* ---- ops ---------------------------------------------------------------- */

static void print_op(const Printer *p, const Op *op, int depth);

static void print_region(const Printer *p, const Block *b, int depth) {
  sb_puts(p->out, " {\n");
  for (const Op *op = b->first; op; op = op->next) print_op(p, op, depth + 1);
  put_indent(p->out, depth);
  sb_putc(p->out, '}');
}

static const char *op_name(const Op *op) {
  return op->kind < OP_COUNT ? op_info[op->kind].name : "?unknown_op";
}

static void put_perm(StrBuf *out, const Op *op) {
  int rank = op->noperands >= 1 && op->operands[0] ? op->operands[0]->type.rank : 0;
  if (rank > TILE_MAX_RANK) rank = TILE_MAX_RANK;
  sb_putc(out, '[');
  for (int i = 0; i < rank; i++)
    sb_printf(out, i ? ", %d" : "%d", (int)((uint64_t)op->attr[0] >> (PRINT_PERM_BITS * i)) & 0xf);
  sb_putc(out, ']');
}

/* " {name = v, ...}" from the op table's attribute names; ops flagged
 * OPF_OPTATTR leave out attributes equal to 0. */
static void print_attrs(const Printer *p, const Op *op) {
  if (op->kind >= OP_COUNT) return;
  const OpInfo *info = &op_info[op->kind];
  const char *name = info->attrs;
  int shown = 0;
  for (int i = 0; *name && i < IR_MAX_ATTRS; i++) {
    const char *comma = strchr(name, ',');
    size_t len = comma ? (size_t)(comma - name) : strlen(name);
    if (!((info->flags & OPF_OPTATTR) && op->attr[i] == 0)) {
      sb_puts(p->out, shown++ ? ", " : " {");
      sb_putn(p->out, name, len);
      sb_puts(p->out, " = ");
      if (op->kind == OP_TRANS)
        put_perm(p->out, op);
      else
        sb_printf(p->out, "%lld", (long long)op->attr[i]);
    }
    name += len + (comma ? 1 : 0);
  }
  if (shown) sb_putc(p->out, '}');
}

static void put_result_types(const Printer *p, const Op *op) {
  for (uint32_t i = 0; i < op->nresults; i++) {
    sb_puts(p->out, i ? ", " : "");
    put_type(p->out, op->results[i].type);
  }
}

/* `name %a, %b {attrs} : types @L:C`, plus any regions (only malformed
 * control ops get here with regions). */
static void print_generic(const Printer *p, const Op *op, int depth) {
  sb_puts(p->out, op_name(op));
  if (op->noperands) sb_putc(p->out, ' ');
  put_operand_list(p, op, 0, op->noperands);
  if (op->text) {
    sb_putc(p->out, ' ');
    put_quoted(p->out, op->text);
  }
  print_attrs(p, op);
  if (op->nresults) {
    sb_puts(p->out, " : ");
    put_result_types(p, op);
  }
  put_loc(p->out, op->loc);
  for (int r = 0; r < op->nregions; r++) print_region(p, &op->regions[r], depth);
}

static void print_const(const Printer *p, const Op *op) {
  TType t = op->results[0].type;
  sb_puts(p->out, "const ");
  put_scalar_value(p->out, t.kind, op->attr[0], op->fattr);
  sb_puts(p->out, " : ");
  put_type(p->out, t);
  put_loc(p->out, op->loc);
}

/* `%a = init, ...` pairing block arguments from `arg0` on with operands
 * from `op0` on. */
static void put_init_pairs(const Printer *p, const Op *op, const Block *b, uint32_t arg0,
                           uint32_t op0) {
  for (uint32_t i = op0; i < op->noperands; i++) {
    if (i > op0) sb_puts(p->out, ", ");
    put_value(p, &b->args[arg0 + i - op0]);
    sb_puts(p->out, " = ");
    put_value(p, op->operands[i]);
  }
}

static void print_for(const Printer *p, const Op *op, int depth) {
  const Block *body = &op->regions[0];
  sb_puts(p->out, "for ");
  put_value(p, &body->args[0]);
  sb_puts(p->out, " = ");
  put_value(p, op->operands[0]);
  sb_puts(p->out, " to ");
  put_value(p, op->operands[1]);
  sb_puts(p->out, " step ");
  put_value(p, op->operands[2]);
  if (op->noperands > 3) {
    sb_puts(p->out, " iter(");
    put_init_pairs(p, op, body, 1, 3);
    sb_putc(p->out, ')');
  }
  print_attrs(p, op);
  put_loc(p->out, op->loc);
  print_region(p, body, depth);
}

static void print_if(const Printer *p, const Op *op, int depth) {
  sb_puts(p->out, "if ");
  put_value(p, op->operands[0]);
  if (op->nresults) {
    sb_puts(p->out, " -> ");
    put_result_types(p, op);
  }
  put_loc(p->out, op->loc);
  print_region(p, &op->regions[0], depth);
  sb_puts(p->out, " else");
  print_region(p, &op->regions[1], depth);
}

static void print_while(const Printer *p, const Op *op, int depth) {
  const Block *after = &op->regions[1];
  sb_puts(p->out, "while (");
  put_init_pairs(p, op, &op->regions[0], 0, 0);
  sb_putc(p->out, ')');
  put_loc(p->out, op->loc);
  print_region(p, &op->regions[0], depth);
  sb_puts(p->out, " do (");
  for (uint32_t i = 0; i < after->nargs; i++) {
    if (i) sb_puts(p->out, ", ");
    put_value(p, &after->args[i]);
  }
  sb_putc(p->out, ')');
  print_region(p, after, depth);
}

typedef enum OpForm { FORM_GENERIC, FORM_CONST, FORM_FOR, FORM_IF, FORM_WHILE } OpForm;

/* The special syntax of const/for/if/while applies only when the op has
 * the shape that syntax can express. */
static OpForm op_form(const Op *op) {
  switch (op->kind) {
  case OP_CONST: return op->nresults == 1 && op->nregions == 0 ? FORM_CONST : FORM_GENERIC;
  case OP_FOR:
    return op->noperands >= 3 && op->nregions == 1 && op->regions[0].nargs == op->noperands - 2
               ? FORM_FOR
               : FORM_GENERIC;
  case OP_IF:
    return op->noperands == 1 && op->nregions == 2 && op->regions[0].nargs == 0 &&
                   op->regions[1].nargs == 0
               ? FORM_IF
               : FORM_GENERIC;
  case OP_WHILE:
    return op->nregions == 2 && op->regions[0].nargs == op->noperands ? FORM_WHILE
                                                                        : FORM_GENERIC;
  default: return FORM_GENERIC;
  }
}

static void print_op(const Printer *p, const Op *op, int depth) {
  put_indent(p->out, depth);
  for (uint32_t i = 0; i < op->nresults; i++) {
    sb_puts(p->out, i ? ", " : "");
    put_value(p, &op->results[i]);
  }
  if (op->nresults) sb_puts(p->out, " = ");
  switch (op_form(op)) {
  case FORM_CONST: print_const(p, op); break;
  case FORM_FOR: print_for(p, op, depth); break;
  case FORM_IF: print_if(p, op, depth); break;
  case FORM_WHILE: print_while(p, op, depth); break;
  case FORM_GENERIC: print_generic(p, op, depth); break;
  }
  sb_putc(p->out, '\n');
}

/* ---- functions and modules ---------------------------------------------- */

static void print_params(const Printer *p) {
  const Func *f = p->func;
  sb_putc(p->out, '(');
  for (uint32_t i = 0; i < f->body.nargs; i++) {
    if (i) sb_puts(p->out, ", ");
    put_param_name(p->out, f, i);
    sb_puts(p->out, ": ");
    put_type(p->out, f->body.args[i].type);
    if (f->params && f->params[i].align)
      sb_printf(p->out, " align(%lld)", (long long)f->params[i].align);
    if (f->params && f->params[i].multiple_of)
      sb_printf(p->out, " multiple_of(%lld)", (long long)f->params[i].multiple_of);
  }
  sb_putc(p->out, ')');
}

static void print_consts(const Printer *p) {
  const Func *f = p->func;
  if (f->nconsts <= 0 || !f->consts) return;
  sb_puts(p->out, " consts(");
  for (int i = 0; i < f->nconsts; i++) {
    const ConstInfo *c = &f->consts[i];
    sb_printf(p->out, "%s%s: ", i ? ", " : "", c->name ? c->name : "");
    put_type(p->out, c->type);
    sb_puts(p->out, " = ");
    if (c->type.kind == SK_TYPE)
      sb_puts(p->out, scalar_name((ScalarKind)c->tval));
    else
      put_scalar_value(p->out, c->type.kind, c->ival, c->fval);
  }
  sb_putc(p->out, ')');
}

void ir_print_func(const Func *f, StrBuf *out) {
  Printer p = {f, out};
  number_block(&f->body, 0);
  sb_printf(out, "kernel @%s", f->name ? f->name : "");
  print_params(&p);
  print_consts(&p);
  if (f->warps) sb_printf(out, " warps(%d)", f->warps);
  if (func_cluster(f) > 1) sb_printf(out, " cluster(%d)", f->cluster);
  if (f->ws.producers)
    sb_printf(out, " warp_specialize(%d, %d, %d, %d)", f->ws.producers, f->ws.consumers,
              f->ws.producer_registers, f->ws.consumer_registers);
  put_loc(out, f->loc);
  print_region(&p, &f->body, 0);
  sb_putc(out, '\n');
}

void ir_print_module(const Module *m, StrBuf *out) {
  sb_puts(out, "module ");
  put_quoted(out, m->source_name);
  sb_putc(out, '\n');
  for (int i = 0; i < m->nfuncs; i++) {
    sb_putc(out, '\n');
    ir_print_func(m->funcs[i], out);
  }
}
