/* passes.h - the tile IR optimization passes and the pipeline that runs
 * them.
 *
 * Every pass works on one specialized kernel (a Func), edits it in place
 * and returns whether it changed anything, so that the pipeline can iterate
 * passes to a fixpoint and tests can check that a pass did (or did not)
 * fire.  New IR memory comes from the arena passed in (the module's arena).
 * The passes keep the values a kernel computes and stores exactly: constants
 * are computed with numeric.h like the interpreter computes them; nothing
 * that can fail at run time (integer division by zero) is folded or hoisted
 * into a path that did not execute it, and while loops (which might not end)
 * are never deleted. Computations whose results are unused are deleted,
 * loads and integer divisions included: a kernel's result cannot depend on
 * them, so an out-of-bounds load or a division by zero that feeds nothing is
 * not executed (and not reported by the interpreter) unless compiled -O0.
 *
 * Passes use Value.repl/ir_apply_replacements for replacement and treat
 * Value.id and Op.scratch as scratch space (their contents are meaningless
 * after a pass).
 */
#ifndef TILE_PASSES_H
#define TILE_PASSES_H

#include <stdbool.h>

#include "../ir/ir.h"

/* Constant folding: pure ops whose operands are all splat constants become
 * constants (fold.c, through numeric/fold_op.h's fold_op, which the
 * specializer also calls as it builds ops). */
bool pass_fold(Func *f, Arena *a);

/* Canonicalization: algebraic identities, const-condition if, zero-trip
 * for, iter args the body passes through unchanged, constants moved to the
 * second operand of commutative ops (canon.c). */
bool pass_canon(Func *f, Arena *a);

/* Common subexpression elimination of pure ops, scoped by dominance
 * (cse.c). */
bool pass_cse(Func *f, Arena *a);

/* Dead code elimination, including unused iter args of for loops (dce.c). */
bool pass_dce(Func *f, Arena *a);

/* Loop-invariant code motion out of for and while loops (licm.c). */
bool pass_licm(Func *f, Arena *a);

/* Called after each pass of the pipeline (for -print-after-all style
 * debugging): the pass name, the function and whether the pass changed
 * it. */
typedef void (*PassHook)(const char *pass, const Func *f, bool changed, void *user);

/* Pipeline settings. A zeroed PassOptions means: optimize, no checks, no
 * hook. */
typedef struct PassOptions {
  bool no_opt;      /* -O0: run no pass at all */
  bool verify_each; /* ir_verify_func after every pass (errors to diags) */
  Diags *diags;     /* where verification errors go; needed for verify_each */
  PassHook after_pass;
  void *user; /* handed to after_pass */
} PassOptions;

/* Runs the pipeline (pipeline.c) over every function of the module. `opt`
 * may be NULL (defaults). Returns false only when verify_each found invalid
 * IR after some pass (the error, and a note naming the pass, are in
 * opt->diags); the pipeline stops there. */
bool passes_run(Module *m, const PassOptions *opt);

/* Runs the pipeline on one function. */
bool passes_run_func(Func *f, Arena *a, const PassOptions *opt);

#endif
