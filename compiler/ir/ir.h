/* ir.h - the tile IR: SSA values of tile type, ops in blocks, structured
 * control flow through ops with regions.
 *
 *   Module -> Func (a kernel, specialized: no const parameters left)
 *   Func   -> body Block (its arguments are the kernel's runtime parameters)
 *   Block  -> doubly linked list of Ops, ending with a terminator
 *   Op     -> operands (Value*), results (Value[]), regions (Block[]), attrs
 *
 * Each region is exactly one Block. Values are defined once (op results or
 * block arguments) and used in the same block or in blocks nested inside it,
 * after their definition.
 *
 * Operation semantics (types are checked by ir_verify):
 *   const            splat of attr value (int in attr[0] as raw 64 bits, or
 *                    float in fattr) to the result type
 *   arange           i32[end-start] = start, start+1, ...
 *   add..min         elementwise on equal types; int div/rem truncate,
 *                    shr arithmetic for signed types, max/min are maxNum
 *   cmp_*            i1 result, operands of equal type
 *   ptr_add          pointer tile + integer tile (offset in elements)
 *   cast             value conversion (numeric.h num_convert); also
 *                    pointer <-> pointer and pointer <-> 64-bit int
 *   bitcast          reinterpretation between equal bit widths
 *   select           (i1 cond, a, b)
 *   broadcast        operand rank 0 or equal rank with dims 1 stretched
 *   expand_dims      inserts a dimension of size 1 at attr axis
 *   reshape          same element count, row-major order kept
 *   trans            permutes dimensions; attr perm packs perm[i] into
 *                    bits 4i..4i+3; result dim i = operand dim perm[i]
 *   reduce_*, arg*   remove dimension attr axis; argmax/argmin give i32
 *   dot              (a: T[M,K], b: T[K,N], acc: A[M,N]) -> A[M,N], or the
 *                    same with a leading batch dimension
 *   load             (ptr) or (ptr, mask, other)
 *   store            (ptr, value) or (ptr, value, mask)
 *   atomic_*         (ptr, value) or (ptr, value, mask) -> old values;
 *                    atomic_cas (ptr, cmp, value) or (ptr, cmp, value, mask)
 *   block_load       (desc, offsets x rank) -> T[box]
 *   block_store      (desc, value, offsets x rank)
 *   device_print     (value?) "message": every program prints the message
 *                    and, per element, the value
 *   device_assert    (cond: i1) "message": stops the run where cond is false
 *   fence            (): orders the program's memory operations before it
 *                    before those after it, for every program
 *   for              (lo, hi, step, inits...) region args (iv, iters...),
 *                    body yields iters; results are the final iters
 *   if               (cond: i1) two regions that yield the results
 *   while            (inits...) region 0 (args iters) yields one i1;
 *                    region 1 (args iters) yields new iters
 *
 * GPU operations (OPF_GPU): only in the lowered IR that the GPU back end's
 * scheduling pass makes (nvptx/schedule.c); types smem<T>[shape] (a
 * buffer in shared memory, last dimension contiguous) and mbar[n]:
 *   smem_alloc       -> smem<T>[shape]; attrs offset (bytes, set by the
 *                    allocator), swizzle (0/32/64/128, layout/smem.h) and
 *                    ring (dimension 0 counts slots, each a contiguous
 *                    tile of the other dimensions; else the whole buffer
 *                    is one tile)
 *   smem_index       (ring: smem<T>[S, d..], i: i32) -> smem<T>[d..], slot i
 *   smem_store       (buf, value: T[shape]): every thread writes its part
 *   smem_load        (buf) -> T[shape]
 *   mbar_alloc       -> mbar[n]; attrs offset, count (arrivals per
 *                    phase), first_parity (what the first wait on each
 *                    barrier waits for: 0 for barriers that copies fill,
 *                    1 for barriers that say a slot is free, which pass
 *                    at once); initialized once when the kernel starts
 *   mbar_expect      (bars, i) {bytes}: one thread arrives on bars[i] and
 *                    announces `bytes` of transactions
 *   mbar_arrive      (bars, i) {cluster}: one thread of every warpgroup
 *                    arrives; with cluster = C, on bars[i] of each of the
 *                    C programs of its cluster (a ring that multicast
 *                    copies fill: every program's copies land here)
 *   mbar_wait        (bars, i) {elected}: all threads (elected: only the
 *                    thread that issues TMA copies) wait for the next
 *                    phase of bars[i]; each thread counts the phases it
 *                    has waited for, per barrier. (bars, i, parity): wait
 *                    until the phase of that parity (i32 0 or 1) of
 *                    bars[i] has completed, counting nothing
 *   ring_next        (bars: mbar[n], advance: i32) -> i32: this thread's
 *                    position p in [0, 2n) in the ring that bars guard
 *                    (slot p % n, phase p / n), starting at 0; advances
 *                    it by `advance` (mod 2n) afterwards
 *   tma_load         (buf, desc, bars, i, coords..) {multicast}: one thread
 *                    copies the box at coords into buf, completing on
 *                    bars[i] (elements outside the tensor become 0); with
 *                    multicast = C, every program of the cluster runs the
 *                    same copy and each issues 1/C of its boxes, each box
 *                    landing in buf and completing on bars[i] in all C
 *                    programs
 *   tma_store        (desc, buf, coords..) {deferred}: one thread copies
 *                    buf into the tensor (clipped) and waits until buf has
 *                    been read (deferred: does not wait; tma_store_wait)
 *   tma_store_wait   (buf) {pending}: the thread that issues TMA stores
 *                    waits until at most `pending` of its stores still
 *                    read their buffers (buf: the one whose reads this
 *                    waits for, so that its live range reaches here)
 *   async_copy       (buf, ptrs[, mask]): every thread starts copies of its
 *                    elements into buf (masked-off elements become 0)
 *   async_commit     closes this thread's group of async copies
 *   async_wait       {pending}: until at most `pending` groups are open
 *   fence_async      orders this thread's shared-memory writes before
 *                    later reads by the async proxy (wgmma, TMA stores)
 *   barrier          all threads of the block; inside the consumer region
 *                    of a warp_split, all consumer threads (a named
 *                    barrier)
 *   wgmma            (a, b: smem, acc: f32[M, N]) {trans_a, trans_b} ->
 *                    acc + a.b; a is a buffer or a register tile; a buffer
 *                    with trans_x holds the operand transposed ([K, M] for
 *                    a, [N, K] for b). Asynchronous: the result may only
 *                    feed another wgmma's acc or a wgmma_wait
 *   wgmma_wait       (accs..) {pending} -> accs: when at most `pending`
 *                    wgmma groups are still running
 *   warp_split       {producers, consumers, producer_registers,
 *                    consumer_registers}: the rest of the kernel, as two
 *                    regions: region 0 runs on the first `producers`
 *                    warpgroups (TMA issue and what it needs), region 1
 *                    on the `consumers` warpgroups after them (all other
 *                    work; tile layouts cover these warps only); each
 *                    warpgroup first sets its threads' register count
 */
#ifndef TILE_IR_H
#define TILE_IR_H

#include <stdbool.h>
#include <stdint.h>

#include "../util/arena.h"
#include "../util/diag.h"
#include "../util/ptrmap.h"
#include "../util/strbuf.h"
#include "ops.h"
#include "types.h"

/* Attribute slots per op: enough for the five warp-specialization and
 * pipeline settings of a for loop. */
#define IR_MAX_ATTRS 6

typedef struct Value Value;
typedef struct Op Op;
typedef struct Block Block;

struct Value {
  TType type;
  Op *def;       /* defining op; NULL for a block argument */
  Block *owner;  /* block of a block argument */
  uint32_t index;  /* result or argument index */
  uint32_t id;     /* number used by the printer; scratch for passes */
  Value *repl;     /* pending replacement (ir_apply_replacements) */
};

struct Block {
  Value *args;
  uint32_t nargs;
  Op *first, *last;
  Op *parent; /* op whose region this is; NULL for a function body */
};

struct Op {
  uint16_t kind;     /* OpKind */
  uint16_t nregions;
  uint32_t noperands, nresults;
  Value **operands;
  Value *results;
  Block *regions;
  int64_t attr[IR_MAX_ATTRS];
  double fattr; /* float value of a const */
  const char *text; /* device_print, device_assert: the message (arena) */
  SrcLoc loc;
  Op *prev, *next;
  Block *parent;
  uint32_t scratch; /* for passes */
};

/* A runtime parameter's declared facts. */
typedef struct ParamInfo {
  const char *name;
  int64_t align;       /* bytes; 0 = none declared */
  int64_t multiple_of; /* 0 = none declared */
} ParamInfo;

/* A const parameter's value, recorded for printing and metadata. */
typedef struct ConstInfo {
  const char *name;
  TType type;     /* SK_TYPE for a type value (then tval holds it) */
  int64_t ival;   /* ints and bools */
  double fval;    /* floats */
  uint8_t tval;   /* ScalarKind, for SK_TYPE */
} ConstInfo;

/* Kernel-level warp specialization (all zero when absent). */
typedef struct WarpSpec {
  int producers, consumers, producer_registers, consumer_registers;
} WarpSpec;

typedef struct Func {
  const char *name;
  Block body;
  ParamInfo *params; /* body.nargs entries */
  ConstInfo *consts;
  int nconsts;
  int warps; /* from @warps, 0 = default */
  int cluster; /* from @cluster: programs per cluster along axis 0 (0 or 1: none) */
  WarpSpec ws;
  SrcLoc loc;
} Func;

/* The largest cluster: 8 programs is the portable cluster size of sm_90
 * (larger ones need a non-portable opt-in and do not fit every GPC). */
#define TILE_MAX_CLUSTER 8
/* Programs per cluster of f (1 without @cluster). */
static inline int func_cluster(const Func *f) { return f->cluster > 1 ? f->cluster : 1; }

typedef struct Module {
  Arena *arena;
  const char *source_name;
  Func **funcs;
  int nfuncs, capfuncs;
  size_t specialized_ops; /* ops the front end made for all kernels (its budget, sema/irgen.h) */
} Module;

/* Construction. Ops are allocated in the module's arena. */
Module *ir_module_new(Arena *arena, const char *source_name);
Func *ir_func_new(Module *m, const char *name, int nparams, const TType *param_types, SrcLoc loc);
/* Creates a detached op with uninitialized operands (set op->operands[i]),
 * results of the given types, and empty regions. */
Op *ir_op_new(Arena *a, OpKind kind, int noperands, int nresults, const TType *result_types,
              int nregions, SrcLoc loc);
/* Convenience: operands given as an array. */
Op *ir_op_make(Arena *a, OpKind kind, int noperands, Value *const *operands, int nresults,
               const TType *result_types, SrcLoc loc);
void ir_block_set_args(Arena *a, Block *b, int nargs, const TType *types);
void ir_append(Block *b, Op *op);
void ir_insert_before(Op *before, Op *op);
void ir_unlink(Op *op);

/* Operation properties. */
const OpInfo *ir_info(const Op *op);
bool ir_is_const(const Value *v);
/* Integer value of a constant integer (or i1) value. */
bool ir_const_int(const Value *v, int64_t *out);
/* Whether v is a float constant of value 0 (a product's accumulator
 * "from zeros": wgmma starts such a product with scale-d 0). */
bool ir_is_float_zeros(const Value *v);
/* Whether b holds an op of this kind, at any depth. */
bool ir_block_has(const Block *b, OpKind kind);

/* Replacement: set from->repl = to for any number of values, then one call
 * rewrites every operand in the function (chains are followed). */
void ir_apply_replacements(Func *f);

/* Copies (clone.c). ir_clone_op copies an op (and its regions) with its
 * operands mapped through `map` (unmapped values stay as they are) and
 * records old result -> new result in it; the copy is not linked into a
 * block. ir_clone_func copies a whole kernel (not added to a module; its
 * parameter and const tables are shared with the original). */
Op *ir_clone_op(Arena *a, const Op *src, PtrMap *map);
Func *ir_clone_func(Arena *a, const Func *src);

/* Number of values (block arguments and op results) in b, nested regions
 * included. */
uint32_t ir_count_values(const Block *b);

/* Walk: calls fn for every op of a block, depth first (an op before the
 * ops in its regions). */
typedef void (*IrWalkFn)(Op *op, void *user);
void ir_walk_block(Block *b, IrWalkFn fn, void *user);

/* Textual form (print.c, parse.c). */
void ir_print_module(const Module *m, StrBuf *out);
void ir_print_func(const Func *f, StrBuf *out);
/* Parses text produced by ir_print_module; errors go to diags. */
Module *ir_parse(Arena *arena, const Source *src, Diags *diags);

/* Verifier (verify.c): structure, dominance, operand and result types.
 * Returns true when valid; otherwise reports to diags. */
bool ir_verify_module(const Module *m, Diags *diags);
bool ir_verify_func(const Func *f, Diags *diags);
/* The same for the lowered IR of the GPU back end, where GPU operations
 * and shared-memory buffers are allowed (verify_gpu.c). */
bool ir_verify_lowered(const Func *f, Diags *diags);

#endif
