/* ops.h - the table of tile IR operations.
 *
 * One line per op: the enum name, the textual name, operand count (-1 for a
 * variable count, checked by the verifier), result count (-1 variable),
 * region count, property flags, and the names of its integer attributes
 * (comma separated, stored in Op.attr[] in that order).
 *
 * Control ops (for, if, while) and const have their own textual syntax; all
 * other ops print generically:
 *
 *     %7 = cmp_lt %5, %6 : i1[1024] @3:14
 *     %9 = reduce_sum %8 {axis = 1} : f32[64] @7:11
 */
#ifndef TILE_OPS_H
#define TILE_OPS_H

/* Flags. */
#define OPF_PURE 0x01     /* no side effects: may be folded, CSE'd, hoisted, deleted */
#define OPF_COMM 0x02     /* commutative in its two operands */
#define OPF_TERM 0x04     /* ends a block */
#define OPF_ELEM 0x08     /* elementwise: all operands and the result have one shape */
#define OPF_READ 0x10     /* reads memory: deletable when unused, not CSE'd or hoisted */
#define OPF_WRITE 0x20    /* writes memory */
#define OPF_OPTATTR 0x40  /* attributes equal to 0 are omitted in text */
#define OPF_GPU 0x80      /* lowered IR only: made by the GPU back end's
                             scheduling pass, never by the front end */

/* Shorthands for the table. */
#define OPF_PE (OPF_PURE | OPF_ELEM)
#define OPF_PEC (OPF_PURE | OPF_ELEM | OPF_COMM)

/*       enum          text            ops res reg flags attrs */
#define IR_OPS(X)                                                     \
  X(CONST,        "const",         0,  1, 0, OPF_PURE, "")                  \
  X(ARANGE,       "arange",        0,  1, 0, OPF_PURE, "start,end")         \
  X(PROGRAM_ID,   "program_id",    0,  1, 0, OPF_PURE, "axis")              \
  X(NUM_PROGRAMS, "num_programs",  0,  1, 0, OPF_PURE, "axis")              \
  /* elementwise binary */                                            \
  X(ADD,          "add",           2,  1, 0, OPF_PEC, "")                  \
  X(SUB,          "sub",           2,  1, 0, OPF_PE, "")                  \
  X(MUL,          "mul",           2,  1, 0, OPF_PEC, "")                  \
  X(DIV,          "div",           2,  1, 0, OPF_PE, "")                  \
  X(REM,          "rem",           2,  1, 0, OPF_PE, "")                  \
  X(AND,          "and",           2,  1, 0, OPF_PEC, "")                  \
  X(OR,           "or",            2,  1, 0, OPF_PEC, "")                  \
  X(XOR,          "xor",           2,  1, 0, OPF_PEC, "")                  \
  X(SHL,          "shl",           2,  1, 0, OPF_PE, "")                  \
  X(SHR,          "shr",           2,  1, 0, OPF_PE, "")                  \
  X(MAX,          "max",           2,  1, 0, OPF_PEC, "")                  \
  X(MIN,          "min",           2,  1, 0, OPF_PEC, "")                  \
  X(CMP_EQ,       "cmp_eq",        2,  1, 0, OPF_PEC, "")                  \
  X(CMP_NE,       "cmp_ne",        2,  1, 0, OPF_PEC, "")                  \
  X(CMP_LT,       "cmp_lt",        2,  1, 0, OPF_PE, "")                  \
  X(CMP_LE,       "cmp_le",        2,  1, 0, OPF_PE, "")                  \
  X(CMP_GT,       "cmp_gt",        2,  1, 0, OPF_PE, "")                  \
  X(CMP_GE,       "cmp_ge",        2,  1, 0, OPF_PE, "")                  \
  X(PTR_ADD,      "ptr_add",       2,  1, 0, OPF_PE, "")                  \
  /* elementwise unary */                                             \
  X(NEG,          "neg",           1,  1, 0, OPF_PE, "")                  \
  X(NOT,          "not",           1,  1, 0, OPF_PE, "")                  \
  X(ABS,          "abs",           1,  1, 0, OPF_PE, "")                  \
  X(EXP,          "exp",           1,  1, 0, OPF_PE, "")                  \
  X(EXP2,         "exp2",          1,  1, 0, OPF_PE, "")                  \
  X(LOG,          "log",           1,  1, 0, OPF_PE, "")                  \
  X(LOG2,         "log2",          1,  1, 0, OPF_PE, "")                  \
  X(SQRT,         "sqrt",          1,  1, 0, OPF_PE, "")                  \
  X(RSQRT,        "rsqrt",         1,  1, 0, OPF_PE, "")                  \
  X(SIN,          "sin",           1,  1, 0, OPF_PE, "")                  \
  X(COS,          "cos",           1,  1, 0, OPF_PE, "")                  \
  X(TANH,         "tanh",          1,  1, 0, OPF_PE, "")                  \
  X(ERF,          "erf",           1,  1, 0, OPF_PE, "")                  \
  X(SIGMOID,      "sigmoid",       1,  1, 0, OPF_PE, "")                  \
  X(FLOOR,        "floor",         1,  1, 0, OPF_PE, "")                  \
  X(CEIL,         "ceil",          1,  1, 0, OPF_PE, "")                  \
  X(CAST,         "cast",          1,  1, 0, OPF_PE, "")                  \
  X(BITCAST,      "bitcast",       1,  1, 0, OPF_PE, "")                  \
  /* elementwise ternary */                                           \
  X(FMA,          "fma",           3,  1, 0, OPF_PE, "")                  \
  X(SELECT,       "select",        3,  1, 0, OPF_PE, "")                  \
  /* shapes */                                                        \
  X(BROADCAST,    "broadcast",     1,  1, 0, OPF_PURE, "")                  \
  X(EXPAND_DIMS,  "expand_dims",   1,  1, 0, OPF_PURE, "axis")              \
  X(RESHAPE,      "reshape",       1,  1, 0, OPF_PURE, "")                  \
  X(TRANS,        "trans",         1,  1, 0, OPF_PURE, "perm")              \
  /* reductions and contraction */                                    \
  X(REDUCE_SUM,   "reduce_sum",    1,  1, 0, OPF_PURE, "axis")              \
  X(REDUCE_MAX,   "reduce_max",    1,  1, 0, OPF_PURE, "axis")              \
  X(REDUCE_MIN,   "reduce_min",    1,  1, 0, OPF_PURE, "axis")              \
  X(ARGMAX,       "argmax",        1,  1, 0, OPF_PURE, "axis")              \
  X(ARGMIN,       "argmin",        1,  1, 0, OPF_PURE, "axis")              \
  X(CUMSUM,       "cumsum",        1,  1, 0, OPF_PURE, "axis")              \
  X(DOT,          "dot",           3,  1, 0, OPF_PURE, "")                  \
  /* memory */                                                        \
  X(LOAD,         "load",         -1,  1, 0, OPF_READ, "")           \
  X(STORE,        "store",        -1,  0, 0, OPF_WRITE, "")          \
  X(ATOMIC_ADD,   "atomic_add",   -1,  1, 0, OPF_WRITE, "")          \
  X(ATOMIC_MAX,   "atomic_max",   -1,  1, 0, OPF_WRITE, "")          \
  X(ATOMIC_MIN,   "atomic_min",   -1,  1, 0, OPF_WRITE, "")          \
  X(ATOMIC_AND,   "atomic_and",   -1,  1, 0, OPF_WRITE, "")          \
  X(ATOMIC_OR,    "atomic_or",    -1,  1, 0, OPF_WRITE, "")          \
  X(ATOMIC_XOR,   "atomic_xor",   -1,  1, 0, OPF_WRITE, "")          \
  X(ATOMIC_XCHG,  "atomic_xchg",  -1,  1, 0, OPF_WRITE, "")          \
  X(ATOMIC_CAS,   "atomic_cas",   -1,  1, 0, OPF_WRITE, "")          \
  X(BLOCK_LOAD,   "block_load",   -1,  1, 0, OPF_READ, "")           \
  X(BLOCK_STORE,  "block_store",  -1,  0, 0, OPF_WRITE, "")          \
  /* debugging (the message is the op's text) */                      \
  X(DEVICE_PRINT, "device_print", -1,  0, 0, OPF_WRITE, "")          \
  X(DEVICE_ASSERT, "device_assert", 1, 0, 0, OPF_WRITE, "")          \
  /* memory ordering between programs (reads and writes: nothing moves  \
   * across it) */                                                     \
  X(FENCE,        "fence",         0,  0, 0, OPF_READ | OPF_WRITE, "") \
  /* the consumer warpgroups' turn (wait_turn, pass_turn): an effect, no \
   * memory access */                                                   \
  X(TURN_WAIT,    "turn_wait",     0,  0, 0, OPF_WRITE, "")            \
  X(TURN_PASS,    "turn_pass",     0,  0, 0, OPF_WRITE, "")            \
  /* structured control flow */                                       \
  X(FOR,          "for",          -1, -1, 1, OPF_OPTATTR,             \
    "stages,producers,consumers,producer_registers,consumer_registers") \
  X(IF,           "if",            1, -1, 2, 0, "")                  \
  X(WHILE,        "while",        -1, -1, 2, 0, "")                  \
  X(YIELD,        "yield",        -1,  0, 0, OPF_TERM, "")           \
  X(RETURN,       "return",        0,  0, 0, OPF_TERM, "")            \
  /* GPU operations of the lowered IR (see nvptx/schedule.c) */       \
  X(SMEM_ALLOC,   "smem_alloc",    0,  1, 0, OPF_GPU | OPF_OPTATTR, "offset,swizzle,ring") \
  X(SMEM_INDEX,   "smem_index",    2,  1, 0, OPF_GPU | OPF_PURE, "")  \
  X(SMEM_STORE,   "smem_store",    2,  0, 0, OPF_GPU | OPF_WRITE | OPF_OPTATTR, "column") \
  X(SMEM_LOAD,    "smem_load",     1,  1, 0, OPF_GPU | OPF_READ, "")  \
  X(MBAR_ALLOC,   "mbar_alloc",    0,  1, 0, OPF_GPU | OPF_OPTATTR, "offset,count,first_parity")  \
  X(MBAR_EXPECT,  "mbar_expect",   2,  0, 0, OPF_GPU | OPF_WRITE, "bytes") \
  X(MBAR_ARRIVE,  "mbar_arrive",   2,  0, 0, OPF_GPU | OPF_WRITE | OPF_OPTATTR, "cluster")  \
  X(MBAR_WAIT,    "mbar_wait",    -1,  0, 0, OPF_GPU | OPF_WRITE | OPF_OPTATTR, "elected")  \
  X(RING_NEXT,    "ring_next",     2,  1, 0, OPF_GPU | OPF_WRITE, "")  \
  X(TMA_LOAD,     "tma_load",     -1,  0, 0, OPF_GPU | OPF_WRITE | OPF_OPTATTR, "multicast")  \
  X(TMA_STORE,    "tma_store",    -1,  0, 0, OPF_GPU | OPF_WRITE | OPF_OPTATTR, "deferred")  \
  X(TMA_STORE_WAIT, "tma_store_wait", 1, 0, 0, OPF_GPU | OPF_WRITE | OPF_OPTATTR, "pending")  \
  X(ASYNC_COPY,   "async_copy",   -1,  0, 0, OPF_GPU | OPF_WRITE, "")  \
  X(ASYNC_COMMIT, "async_commit",  0,  0, 0, OPF_GPU | OPF_WRITE, "")  \
  X(ASYNC_WAIT,   "async_wait",    0,  0, 0, OPF_GPU | OPF_WRITE | OPF_OPTATTR, "pending") \
  X(FENCE_ASYNC,  "fence_async",   0,  0, 0, OPF_GPU | OPF_WRITE, "")  \
  X(BARRIER,      "barrier",       0,  0, 0, OPF_GPU | OPF_WRITE | OPF_OPTATTR, "operand")  \
  X(WGMMA,        "wgmma",         3,  1, 0, OPF_GPU | OPF_WRITE | OPF_OPTATTR, "trans_a,trans_b,pair") \
  X(WGMMA_WAIT,   "wgmma_wait",   -1, -1, 0, OPF_GPU | OPF_WRITE | OPF_OPTATTR, "pending") \
  X(CONSUMER_ID,  "consumer_id",   0,  1, 0, OPF_GPU | OPF_PURE, "")   \
  X(WARP_SPLIT,   "warp_split",    0,  0, 2, OPF_GPU | OPF_WRITE,            \
    "producers,consumers,producer_registers,consumer_registers")

typedef enum OpKind {
#define X(name, text, nops, nres, nreg, flags, attrs) OP_##name,
  IR_OPS(X)
#undef X
      OP_COUNT
} OpKind;

typedef struct OpInfo {
  const char *name;
  int noperands; /* -1: variable */
  int nresults;  /* -1: variable */
  int nregions;
  unsigned flags;
  const char *attrs; /* comma separated names, "" for none */
} OpInfo;

extern const OpInfo op_info[OP_COUNT];

#endif
