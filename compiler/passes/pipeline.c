/* pipeline.c - the order in which the optimization passes run.
 *
 *          specialized tile IR (from the front end)
 *                          |
 *           +------------> fold     constants computed as numeric.h does
 *           |              |
 *           |            canon      identities, const if, zero-trip for
 *           |              |
 *           +-- changed? --+        (at most PIPELINE_MAX_SIMPLIFY_ROUNDS)
 *                          |
 *                         cse       merge equal pure ops (dominance scoped)
 *                          |
 *                         licm      hoist invariant pure ops out of loops
 *                          |
 *                         cse       hoisted copies meet outer equals
 *                          |
 *                         dce       drop dead ops, loops, iter args
 *                          |
 *          optimized tile IR (to the interpreter / GPU back end)
 *
 * The sequence is a flat table read top to bottom; every step is one pass
 * over one function. With PassOptions.verify_each the verifier runs after
 * every pass and the first invalid result stops the pipeline with a note
 * naming the pass; PassOptions.after_pass sees every step (debug dumps).
 */
#include "passes.h"

#include <stddef.h>

/* fold+canon rounds before moving on. Each round removes something, and
 * real kernels settle in two or three; the cap only bounds pathological
 * chains (the result is correct after any number of rounds). */
#define PIPELINE_MAX_SIMPLIFY_ROUNDS 8

typedef bool (*PassFn)(Func *f, Arena *a);

typedef struct PassStep {
  const char *name;
  PassFn run;
} PassStep;

/* The simplification pair iterated to a fixpoint. */
static const PassStep simplify_steps[] = {
    {"fold", pass_fold},
    {"canon", pass_canon},
};

/* Then, once each, in this order. */
static const PassStep cleanup_steps[] = {
    {"cse", pass_cse},
    {"licm", pass_licm},
    {"cse", pass_cse},
    {"dce", pass_dce},
};

#define COUNT_OF(arr) (sizeof(arr) / sizeof((arr)[0]))

typedef struct PipelineRun {
  Func *f;
  Arena *arena;
  const PassOptions *opt;
  bool ok; /* false once verification failed */
} PipelineRun;

/* Runs one step; returns whether it changed the function. */
static bool run_step(PipelineRun *p, const PassStep *step) {
  if (!p->ok) return false;
  bool changed = step->run(p->f, p->arena);
  const PassOptions *opt = p->opt;
  if (opt->after_pass) opt->after_pass(step->name, p->f, changed, opt->user);
  if (opt->verify_each && opt->diags && !ir_verify_func(p->f, opt->diags)) {
    diag_note(opt->diags, p->f->loc, "invalid IR after pass '%s' in kernel '%s'", step->name,
              p->f->name);
    p->ok = false;
  }
  return changed;
}

static bool run_steps(PipelineRun *p, const PassStep *steps, size_t n) {
  bool changed = false;
  for (size_t i = 0; i < n; i++)
    if (run_step(p, &steps[i])) changed = true;
  return changed;
}

bool passes_run_func(Func *f, Arena *a, const PassOptions *opt) {
  static const PassOptions defaults = {0};
  if (!opt) opt = &defaults;
  if (opt->no_opt) return true;
  PipelineRun p = {f, a, opt, true};
  for (int round = 0; round < PIPELINE_MAX_SIMPLIFY_ROUNDS && p.ok; round++)
    if (!run_steps(&p, simplify_steps, COUNT_OF(simplify_steps))) break;
  run_steps(&p, cleanup_steps, COUNT_OF(cleanup_steps));
  return p.ok;
}

bool passes_run(Module *m, const PassOptions *opt) {
  for (int i = 0; i < m->nfuncs; i++)
    if (!passes_run_func(m->funcs[i], m->arena, opt)) return false;
  return true;
}
