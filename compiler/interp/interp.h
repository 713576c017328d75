/* interp.h - the tile IR interpreter.
 *
 * Runs a specialized kernel (an ir Func) over a grid of programs on host
 * memory, one program after another, with the exact element semantics of
 * numeric.h. It is the reference that GPU results are checked against and
 * how a machine without a GPU checks what kernels compute.
 *
 * Memory safety: the kernel may only touch memory inside buffers registered
 * with interp_add_buffer. Any access outside them (or misaligned for its
 * element type) stops the run with an error naming the kernel's source
 * location, the program, the element index within the tile and the buffer,
 * instead of touching the memory.
 */
#ifndef TILE_INTERP_H
#define TILE_INTERP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../ir/ir.h"

/* Default cap on executed element operations per run, so that a kernel with
 * a runaway while loop ends with an error instead of hanging. What a step
 * costs depends on the work: on the 2-core CI machine (optimized build) a
 * loop over scalars runs about 1.9·10^7 steps a second, elementwise work
 * on 1024-element tiles about 3.6·10^8 (the old default of 2·10^10 took
 * 249 s in one case, over 15 minutes in the scalar case). 10^9 is about a
 * minute in the slowest case and a few seconds in the fastest; the
 * wall-clock limit (interp_set_time_limit, `tilec run --timeout`) bounds
 * the time itself. */
#define INTERP_DEFAULT_MAX_STEPS ((uint64_t)1000000000ULL)

/* Steps between two looks at the clock under a time limit: about 10 ms of
 * interpretation, so a limit is overshot by that much at most (one op can
 * take longer: a dot of the largest tiles is charged, and runs, as one
 * step per multiply-add), while the clock costs nothing measurable. */
#define INTERP_CLOCK_CHECK_STEPS ((uint64_t)1 << 19)

typedef struct Interp Interp;

/* One kernel argument, matching the kind of the kernel parameter. */
typedef struct InterpArg {
  union {
    int64_t i;  /* integer parameters (and i1), sign- or zero-extended */
    double f;   /* float parameters */
    void *p;    /* pointer parameters */
    struct {    /* tensor descriptors: shape and strides in elements */
      void *base;
      int64_t shape[TILE_MAX_RANK];
      int64_t strides[TILE_MAX_RANK];
    } desc;
  };
} InterpArg;

/* `source_name` names the .tile file in error messages. */
Interp *interp_new(const Func *f, const char *source_name);
void interp_free(Interp *ip);
/* Registers memory the kernel may access; `name` appears in errors. */
void interp_add_buffer(Interp *ip, void *base, size_t bytes, const char *name);
void interp_set_max_steps(Interp *ip, uint64_t max_steps);
/* A wall-clock limit for each interp_run, in seconds (0, the default:
 * none). Checked every INTERP_CLOCK_CHECK_STEPS steps; running over it
 * stops the run with an error at the op being executed. */
void interp_set_time_limit(Interp *ip, double seconds);
/* Where device_print writes (stdout unless set). */
void interp_set_output(Interp *ip, FILE *out);
/* Runs every program of the grid (grid[i] >= 1). Returns true on success;
 * on failure *error (if non-NULL) receives a malloc'd message in the form
 * "file.tile:LINE:COL: error: ..." and the run stops at the first error. */
bool interp_run(Interp *ip, const int64_t grid[3], const InterpArg *args, int nargs, char **error);

#endif
