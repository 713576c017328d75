/* sema.h - semantic analysis: name resolution (resolve.c) and kernel
 * specialization into tile IR (irgen*.c).
 *
 * resolve_program links every name in the AST to a Symbol and checks what
 * can be checked without const values (unknown names, assignment targets,
 * recursion, annotation names). specialize_kernel then walks one kernel with
 * its const parameters bound, inferring types and shapes, evaluating
 * constants, inlining helper functions and emitting IR.
 */
#ifndef TILE_SEMA_H
#define TILE_SEMA_H

#include "../front/ast.h"
#include "../ir/ir.h"

/* Builtin functions. X(enum, name, min args, max args, parameter names) */
#define BUILTINS(X)                                                     \
  X(PROGRAM_ID, "program_id", 1, 1, "axis")                             \
  X(NUM_PROGRAMS, "num_programs", 1, 1, "axis")                         \
  X(CLUSTER_ID, "cluster_id", 0, 0, "")                                 \
  X(NUM_CLUSTERS, "num_clusters", 0, 0, "")                             \
  X(CLUSTER_RANK, "cluster_rank", 0, 0, "")                             \
  X(CLUSTER_SIZE, "cluster_size", 0, 0, "")                             \
  X(ARANGE, "arange", 2, 2, "start,end")                                \
  X(ZEROS, "zeros", 1, 2, "shape,dtype")                                \
  X(FULL, "full", 2, 3, "shape,value,dtype")                            \
  X(LOAD, "load", 1, 3, "ptr,mask,other")                               \
  X(STORE, "store", 2, 3, "ptr,value,mask")                             \
  X(DOT, "dot", 2, 3, "a,b,acc")                                        \
  X(SUM, "sum", 1, 2, "x,axis")                                         \
  X(MAX, "max", 1, 2, "x,axis")                                         \
  X(MIN, "min", 1, 2, "x,axis")                                         \
  X(ARGMAX, "argmax", 1, 2, "x,axis")                                   \
  X(ARGMIN, "argmin", 1, 2, "x,axis")                                   \
  X(CUMSUM, "cumsum", 1, 2, "x,axis")                                   \
  X(MAXIMUM, "maximum", 2, 2, "a,b")                                    \
  X(MINIMUM, "minimum", 2, 2, "a,b")                                    \
  X(WHERE, "where", 3, 3, "cond,a,b")                                   \
  X(FMA, "fma", 3, 3, "a,b,c")                                          \
  X(CDIV, "cdiv", 2, 2, "a,b")                                          \
  X(EXP, "exp", 1, 1, "x")                                              \
  X(EXP2, "exp2", 1, 1, "x")                                            \
  X(LOG, "log", 1, 1, "x")                                              \
  X(LOG2, "log2", 1, 1, "x")                                            \
  X(SQRT, "sqrt", 1, 1, "x")                                            \
  X(RSQRT, "rsqrt", 1, 1, "x")                                          \
  X(SIN, "sin", 1, 1, "x")                                              \
  X(COS, "cos", 1, 1, "x")                                              \
  X(TANH, "tanh", 1, 1, "x")                                            \
  X(ERF, "erf", 1, 1, "x")                                              \
  X(SIGMOID, "sigmoid", 1, 1, "x")                                      \
  X(FLOOR, "floor", 1, 1, "x")                                          \
  X(CEIL, "ceil", 1, 1, "x")                                            \
  X(ABS, "abs", 1, 1, "x")                                              \
  X(BROADCAST_TO, "broadcast_to", 2, 2, "x,shape")                      \
  X(RESHAPE, "reshape", 2, 2, "x,shape")                                \
  X(TRANS, "trans", 1, 2, "x,perm")                                     \
  X(EXPAND_DIMS, "expand_dims", 2, 2, "x,axis")                         \
  X(BITCAST, "bitcast", 2, 2, "x,dtype")                                \
  X(ATOMIC_ADD, "atomic_add", 2, 3, "ptr,value,mask")                   \
  X(ATOMIC_MAX, "atomic_max", 2, 3, "ptr,value,mask")                   \
  X(ATOMIC_MIN, "atomic_min", 2, 3, "ptr,value,mask")                   \
  X(ATOMIC_AND, "atomic_and", 2, 3, "ptr,value,mask")                   \
  X(ATOMIC_OR, "atomic_or", 2, 3, "ptr,value,mask")                     \
  X(ATOMIC_XOR, "atomic_xor", 2, 3, "ptr,value,mask")                   \
  X(ATOMIC_XCHG, "atomic_xchg", 2, 3, "ptr,value,mask")                 \
  X(ATOMIC_CAS, "atomic_cas", 3, 4, "ptr,cmp,value,mask")               \
  X(LOAD_BLOCK, "load_block", 3, 3, "desc,offsets,shape")               \
  X(STORE_BLOCK, "store_block", 3, 3, "desc,offsets,value")             \
  X(STATIC_ASSERT, "static_assert", 1, 2, "cond,message")               \
  X(STATIC_PRINT, "static_print", 1, 2, "value,message")              \
  X(DEVICE_PRINT, "device_print", 1, 2, "message,value")              \
  X(DEVICE_ASSERT, "device_assert", 1, 2, "cond,message")             \
  X(FENCE, "fence", 0, 0, "")                                           \
  X(WAIT_TURN, "wait_turn", 0, 0, "")                                   \
  X(PASS_TURN, "pass_turn", 0, 0, "")

typedef enum BuiltinId {
#define X(id, name, mina, maxa, params) BI_##id,
  BUILTINS(X)
#undef X
      BI_COUNT
} BuiltinId;

typedef struct BuiltinInfo {
  const char *name;
  int min_args, max_args;
  const char *params; /* comma separated, for named arguments */
} BuiltinInfo;

extern const BuiltinInfo builtin_info[BI_COUNT];

/* Builtin constants. */
typedef enum BuiltinConst { BC_INF, BC_NAN } BuiltinConst;

typedef enum SymKind {
  SYM_LOCAL,         /* parameter, let/var, loop variable: a slot of its item */
  SYM_GLOBAL_CONST,  /* top-level const */
  SYM_FN,            /* helper function */
  SYM_KERNEL,        /* kernel */
  SYM_BUILTIN,       /* builtin function (id) */
  SYM_BUILTIN_CONST, /* inf, nan (id) */
  SYM_TYPE,          /* element type name (id = ScalarKind) */
} SymKind;

struct Symbol {
  SymKind kind;
  const char *name;
  SrcLoc loc;
  int slot;     /* SYM_LOCAL: index into the item's frame */
  int id;       /* builtin id, builtin const, or ScalarKind */
  bool is_var;  /* declared with var: may be assigned */
  bool is_param, is_const_param, is_loop_var;
  bool is_binding; /* declared by let or var (warned about when unused) */
  bool used;       /* SYM_LOCAL: read somewhere in its scope */
  Item *item;   /* SYM_FN, SYM_KERNEL, SYM_GLOBAL_CONST (id: the item's index) */
};

/* A const parameter value given from outside (-D NAME=VALUE). */
typedef struct ConstDef {
  const char *name;
  const char *value;
} ConstDef;

/* Resolves names in the whole program; returns false on errors. */
bool resolve_program(Program *prog, Arena *arena, Diags *diags);
/* Warnings for the let/var bindings nothing reads (resolve_program found
 * them); the compiler gives them only to programs without errors, where
 * they do not bury the errors. */
void warn_unused(const Program *prog, Diags *diags);

/* Specializes `kernel` for the given const values and appends the IR
 * function to `m`. Returns NULL on errors (reported to diags). */
Func *specialize_kernel(Module *m, Program *prog, Item *kernel, const ConstDef *defs, int ndefs,
                        Diags *diags);

#endif
