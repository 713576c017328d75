/* interp_internal.h - data structures shared by the interpreter's files
 * (interp.c: set-up, control flow and errors; interp_ops.c: computation;
 * interp_mem.c: memory accesses). Not part of the public API.
 *
 * interp_new translates the function once into a mirror tree of XOps whose
 * operands and results are value numbers, so execution never looks Values up.
 * Every SSA value owns one Tile buffer (all its elements as Slots) for the
 * whole run; a loop body reuses its values' buffers on every iteration, so
 * memory stays bounded by the function's size.
 */
#ifndef TILE_INTERP_INTERNAL_H
#define TILE_INTERP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../util/arena.h"
#include "interp.h"
#include "../numeric/numeric.h"

typedef struct XBlock XBlock;

/* One op, ready to execute. */
typedef struct XOp {
  const Op *op;
  OpKind kind;
  uint32_t nin, nout;
  uint32_t *in;  /* value numbers of the operands */
  uint32_t *out; /* value numbers of the results */
  uint32_t nregions;
  XBlock *regions;
  /* for/while: one buffer per loop-carried value, used to copy the yielded
   * values before any loop argument is overwritten (see interp.c). */
  Slot **scratch;
} XOp;

struct XBlock {
  XOp *ops;
  uint32_t nops;
  uint32_t *args; /* value numbers of the block arguments */
  uint32_t nargs;
  const XOp *term; /* the terminator (last op) or NULL */
};

/* The storage of one SSA value. */
typedef struct Tile {
  Slot *data;
  int64_t n; /* element count */
  TType type;
} Tile;

/* A registered memory range. */
typedef struct Buffer {
  uint64_t base, size;
  char *name;
} Buffer;

struct Interp {
  const Func *func;
  char *source_name;
  Arena arena; /* XOps, tiles and their data */
  Tile *tiles;
  uint32_t ntiles;
  XBlock body;
  char *build_error; /* a problem found by interp_new, reported by interp_run */

  Buffer *bufs;
  int nbufs, capbufs;
  int last_buf; /* index of the buffer of the last access, -1 if none */

  uint64_t max_steps, steps;
  double max_seconds;        /* wall-clock limit of a run, 0: none */
  double start_seconds;      /* the monotonic clock when the run started */
  uint64_t next_clock_check; /* steps at which to look at the clock next */
  int64_t pid[3], grid[3];
  const InterpArg *args;
  int nargs;
  bool returned; /* the program executed `return` */
  FILE *out;     /* device_print's output */
  char *error;   /* first run-time error of the current run */
};

/* The tile of operand / result i of xo. */
static inline Tile *interp_in(Interp *ip, const XOp *xo, uint32_t i) {
  return &ip->tiles[xo->in[i]];
}
static inline Tile *interp_out(Interp *ip, const XOp *xo, uint32_t i) {
  return &ip->tiles[xo->out[i]];
}

/* Records the run's error "FILE:L:C: error: <msg> (program (x, y, z))" at
 * the op's location (only the first error is kept). Always returns false so
 * callers can `return interp_fail(...)`. */
bool interp_fail(Interp *ip, const XOp *xo, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Adds `amount` element operations to the step count; false (with the
 * error set) once the limit is exceeded. */
bool interp_charge(Interp *ip, const XOp *xo, uint64_t amount);
/* Writes the multi-dimensional index of element `flat` of a tile of type t
 * ("[3, 7]") into buf. */
void interp_format_index(TType t, int64_t flat, char *buf, size_t size);

/* interp_ops.c: every op that is neither control flow nor memory access. */
bool interp_exec_compute(Interp *ip, const XOp *xo);

/* interp_mem.c */
bool interp_exec_load(Interp *ip, const XOp *xo);
bool interp_exec_store(Interp *ip, const XOp *xo);
bool interp_exec_atomic(Interp *ip, const XOp *xo);
bool interp_exec_block_load(Interp *ip, const XOp *xo);
bool interp_exec_block_store(Interp *ip, const XOp *xo);

#endif
