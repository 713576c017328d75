/* fuzz_frontend.c - libFuzzer target over the whole front end and the IR
 * text parser: every input is compiled as a .tile file (lexer, parser,
 * resolver, specializer, verifier, passes, IR printer) and also parsed and
 * verified as textual IR. Any crash, sanitizer report, leak or timeout is a
 * bug; diagnostics are the expected outcome for most inputs. */
#include <stdint.h>
#include <stdlib.h>

#include "ir/ir.h"
#include "tilec.h"

static void fuzz_ir_text(const uint8_t *data, size_t size) {
  Arena arena;
  arena_init(&arena);
  Source src = {"fuzz.ir", (const char *)data, size, 0};
  Diags diags;
  diags_init(&diags, &arena, &src);
  Module *m = ir_parse(&arena, &src, &diags);
  if (m && diags.errors == 0 && ir_verify_module(m, &diags)) {
    StrBuf sb;
    sb_init(&sb);
    ir_print_module(m, &sb);
    sb_free(&sb);
  }
  StrBuf out;
  sb_init(&out);
  diags_render_all(&diags, &out);
  sb_free(&out);
  arena_free(&arena);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tc_compilation *c = tc_compile("fuzz.tile", (const char *)data, size, NULL);
  if (c) {
    (void)tc_diagnostics(c);
    free(tc_emit(c, TC_EMIT_AST));
    free(tc_emit(c, TC_EMIT_IR));
    tc_free(c);
  }
  fuzz_ir_text(data, size);
  return 0;
}
