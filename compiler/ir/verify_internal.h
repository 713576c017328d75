/* verify_internal.h - what verify.c shares with verify_gpu.c, the checks
 * of the GPU operations of the lowered IR. */
#ifndef TILE_VERIFY_INTERNAL_H
#define TILE_VERIFY_INTERNAL_H

#include <stddef.h>

#include "ir.h"

/* Longest message; room for a few type strings. */
#define VERIFY_MAX_MESSAGE 320
/* Room for one type string (see print.c). */
#define VERIFY_TYPE_BUF 96

typedef struct Verifier {
  const Func *func;
  Diags *diags;
  bool ok;
  bool lowered; /* GPU operations and shared-memory buffers allowed */
} Verifier;

/* A type as text, safe also for invalid types. */
typedef struct TypeText {
  char s[VERIFY_TYPE_BUF];
} TypeText;

TypeText tt(TType t);
/* Reports "invalid IR: <op>: <message>" and marks the function invalid. */
void verify_report(Verifier *v, const Op *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool is_element_kind(unsigned k);

/* verify_gpu.c */
/* Why a shared-memory buffer or mbarrier type is malformed (or false). */
bool verify_buffer_type_problem(TType t, char *why, size_t size);
/* Operand and result rules of one GPU operation (counts already checked). */
void verify_gpu_op(Verifier *v, const Op *op);
/* Who may use what: wgmma results only reach waits and wgmma. */
void verify_gpu_uses(Verifier *v, const Block *b);

#endif
