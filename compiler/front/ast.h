/* ast.h - the abstract syntax tree of a .tile file.
 *
 * The parser builds it, the resolver (sema/resolve.c) links every name to
 * its declaration, and the specializer (sema/irgen.c) walks it once per
 * kernel specialization to produce tile IR. Nodes live in the compilation's
 * arena and are never freed one by one.
 */
#ifndef TILE_AST_H
#define TILE_AST_H

#include <stdbool.h>
#include <stdint.h>

#include "../util/arena.h"
#include "../util/diag.h"
#include "../util/strbuf.h"
#include "../ir/types.h"
#include "token.h"

typedef struct Expr Expr;
typedef struct Stmt Stmt;
typedef struct AstBlock AstBlock;
typedef struct Item Item;
typedef struct Symbol Symbol;

typedef enum TypeExprKind {
  TE_NAMED,  /* a scalar type name or a `type` const parameter, maybe with dims */
  TE_PTR,    /* *T */
  TE_TENSOR, /* tensor<T, R> */
  TE_TYPE,   /* the kind `type` of a const type parameter */
} TypeExprKind;

typedef struct TypeExpr {
  TypeExprKind kind;
  SrcLoc loc;
  const char *name;  /* element type name (TE_NAMED, TE_PTR, TE_TENSOR) */
  SrcLoc name_loc;   /* where that name is */
  Symbol *sym;       /* set by the resolver when `name` is a const type parameter */
  Expr **dims;       /* tile dimensions (TE_NAMED), NULL for a scalar */
  int ndims;
  int desc_rank;     /* TE_TENSOR */
} TypeExpr;

typedef enum ExprKind {
  EX_INT,
  EX_FLOAT,
  EX_BOOL,
  EX_STRING,
  EX_NAME,
  EX_UNARY,  /* op: TOK_MINUS, TOK_BANG, TOK_TILDE */
  EX_BINARY, /* op: the operator token */
  EX_CALL,
  EX_INDEX,  /* x[:, None] */
  EX_SLICE,  /* ':' inside an index */
  EX_NONE,   /* None inside an index */
  EX_LIST,   /* [a, b, c] */
  EX_CAST,   /* x as T */
} ExprKind;

typedef struct Arg {
  const char *name; /* NULL when positional */
  SrcLoc name_loc;
  Expr *value;
} Arg;

struct Expr {
  ExprKind kind;
  SrcLoc loc;
  union {
    uint64_t ival;    /* EX_INT */
    double fval;      /* EX_FLOAT */
    bool bval;        /* EX_BOOL */
    const char *sval; /* EX_STRING */
    struct {
      const char *name;
      Symbol *sym; /* set by the resolver */
    } name;
    struct {
      TokKind op;
      Expr *operand;
    } unary;
    struct {
      TokKind op;
      Expr *lhs, *rhs;
    } binary;
    struct {
      const char *callee;
      SrcLoc callee_loc;
      Symbol *sym; /* function or builtin, set by the resolver */
      Arg *args;
      int nargs;
      Expr **bound; /* set by the resolver: one per parameter, NULL if absent */
      int nbound;
    } call;
    struct {
      Expr *base;
      Expr **items;
      int nitems;
    } index;
    struct {
      Expr **items;
      int nitems;
    } list;
    struct {
      Expr *operand;
      TypeExpr *type;
    } cast;
  };
};

typedef struct Annotation {
  const char *name;
  SrcLoc loc;
  Arg *args;
  int nargs;
  Expr **bound; /* set by the resolver: arguments by parameter position */
  int nbound;
} Annotation;

struct AstBlock {
  Stmt **stmts;
  int nstmts;
  SrcLoc loc; /* the '{' */
};

typedef enum StmtKind {
  ST_LET,    /* let and var */
  ST_ASSIGN, /* x = e, x += e, ... */
  ST_EXPR,
  ST_IF,
  ST_FOR,
  ST_WHILE,
  ST_RETURN,
  ST_BLOCK,
} StmtKind;

struct Stmt {
  StmtKind kind;
  SrcLoc loc;
  Annotation *annots;
  int nannots;
  union {
    struct {
      bool is_var;
      const char *name;
      SrcLoc name_loc;
      TypeExpr *type; /* optional */
      Expr *init;
      Symbol *sym; /* the declared variable */
    } let;
    struct {
      const char *name;
      SrcLoc name_loc;
      TokKind op; /* TOK_ASSIGN or a compound assignment */
      Expr *value;
      Symbol *sym; /* the assigned variable */
    } assign;
    Expr *expr; /* ST_EXPR; ST_RETURN (NULL for a bare return) */
    struct {
      Expr *cond;
      AstBlock *then_block;
      AstBlock *else_block; /* NULL; `else if` is an else block holding one if */
    } if_;
    struct {
      const char *var;
      SrcLoc var_loc;
      Symbol *sym; /* the loop variable */
      Expr *start, *end, *step; /* start and step may be NULL */
      AstBlock *body;
    } for_;
    struct {
      Expr *cond;
      AstBlock *body;
    } while_;
    AstBlock *block;
  };
};

typedef struct Param {
  const char *name;
  SrcLoc loc;
  bool is_const;
  TypeExpr *type;      /* NULL for an untyped (generic) helper parameter */
  Expr *default_value; /* const parameters only, may be NULL */
  Expr *align;         /* align(N) fact, NULL when absent */
  Expr *multiple_of;   /* multiple_of(N) fact, NULL when absent */
  Symbol *sym;
} Param;

typedef enum ItemKind { ITEM_KERNEL, ITEM_FN, ITEM_CONST, ITEM_IMPORT } ItemKind;

struct Item {
  ItemKind kind;
  SrcLoc loc;
  const char *name;
  SrcLoc name_loc;
  Annotation *annots;
  int nannots;
  Param *params;
  int nparams;
  TypeExpr *ret;  /* ITEM_FN, optional */
  AstBlock *body; /* ITEM_KERNEL, ITEM_FN */
  TypeExpr *const_type; /* ITEM_CONST, optional */
  Expr *const_value;    /* ITEM_CONST */
  int nlocals;          /* number of local slots, set by the resolver */
  Symbol *sym;
  const char *import_path; /* ITEM_IMPORT: the file named; `name` is its namespace */
  /* Where an imported item's names live: "" for the compiled file's own
   * items, else the namespace prefix ("sm." for `import "x.tile" as sm`,
   * "sm.inner." for what that file imports as inner); `name` includes it.
   * An item's unqualified names look in its own namespace first, then at
   * the builtins, never at another file's items. */
  const char *ns;
};

typedef struct Program {
  Item **items;
  int nitems;
  Symbol **unused; /* set by the resolver: let/var bindings nothing reads */
  int nunused;
} Program;

/* Prints the tree as indented S-expressions (--emit=ast). */
void ast_print(const Program *p, StrBuf *out);
/* The value of an @config literal (an integer, maybe negated, or a bool:
 * 1 or 0), as the resolver has checked it. */
int64_t ast_config_value(const Expr *e);

#endif
