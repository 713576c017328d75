/* test_diagnostics.c - the compiler's answer to bad input, through the
 * library API (tc_compile, tc_error_count, tc_diagnostics).
 *
 * A diagnostic is only useful if it names the real problem and points at
 * the right token, so a table of bad programs, one problem each, checks the
 * exact first line "t.tile:L:C: error: MESSAGE" of every answer, that an
 * error was counted, and that the source line and caret printed under it
 * agree with L:C. The table covers every stage: the lexer (bad bytes,
 * literals, comments, strings), the parser (syntax), the resolver (names,
 * declarations, assignments, recursion, argument lists, annotation
 * placement) and the specializer (types, shapes, constants, -D values,
 * annotation arguments, builtin argument checks).
 *
 * Separate tests cover what does not fit in a table row: hostile inputs
 * (10,000 nested parentheses or blocks, a 256-byte identifier), the cap of
 * 20 errors with its closing "too many errors" line, diagnostics without a
 * location, and the complete rendering of one diagnostic.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/include/tilec.h"
#include "harness.h"

/* ---- the table ----------------------------------------------------------- */

typedef struct DiagCase {
  const char *name;
  const char *src;
  size_t len;
  const char *define; /* "NAME=VALUE" or NULL */
  const char *kernel; /* tc_options.kernel or NULL */
  const char *first;  /* the expected first line of tc_diagnostics() */
} DiagCase;

/* A source given as a string literal; its length counts embedded NULs. */
#define SRC(s) s, sizeof(s) - 1

static const DiagCase cases[] = {
    /* ---- fence ---- */
    {"fence with an argument", SRC("kernel k() { fence(1); }"), NULL, NULL,
     "t.tile:1:20: error: 'fence' takes 0 arguments (got 1)"},
    {"the value of a fence", SRC("kernel k(o: *i32) { let f = fence(); }"), NULL, NULL,
     "t.tile:1:29: error: this call has no value to bind to 'f'"},
    /* ---- wait_turn, pass_turn ---- */
    {"wait_turn with an argument", SRC("kernel k() { wait_turn(1); }"), NULL, NULL,
     "t.tile:1:24: error: 'wait_turn' takes 0 arguments (got 1)"},
    {"the turn taken twice", SRC("kernel k() { wait_turn(); wait_turn(); pass_turn(); }"), NULL, NULL,
     "t.tile:1:27: error: wait_turn(): the turn is already held here (taken at 1:14); pass it with pass_turn() first"},
    {"the turn passed without being held", SRC("kernel k() { pass_turn(); }"), NULL, NULL,
     "t.tile:1:14: error: pass_turn(): the turn is not held here; take it with wait_turn() first"},
    {"branches that leave the turn differently",
     SRC("kernel k(n: i32) { wait_turn(); if n > 0 { pass_turn(); } pass_turn(); }"), NULL, NULL,
     "t.tile:1:33: error: the branches of this 'if' leave the turn differently (held after the else branch only); "
     "take and pass it alike in both"},
    {"a loop that takes the turn", SRC("kernel k(n: i32) { for i in range(0, n) { wait_turn(); } }"), NULL, NULL,
     "t.tile:1:20: error: an iteration of this loop ends holding the turn taken at 1:43 but begins without it: each "
     "iteration must leave the turn as it found it"},
    {"a loop that passes the turn", SRC("kernel k(n: i32) { wait_turn(); for i in range(0, n) { pass_turn(); } }"),
     NULL, NULL,
     "t.tile:1:33: error: an iteration of this loop begins holding the turn (taken at 1:20) and ends without it: each "
     "iteration must leave the turn as it found it"},
    {"the turn held at the end", SRC("kernel k() { wait_turn(); }"), NULL, NULL,
     "t.tile:1:14: error: the turn taken here is still held where kernel 'k' ends; pass it with pass_turn()"},
    /* ---- lexical ---- */
    {"invalid UTF-8 in code", SRC("kernel k() { let x\xff = 1; }"), NULL, NULL,
     "t.tile:1:19: error: invalid UTF-8 byte 0xff"},
    {"invalid UTF-8 in a comment", SRC("// comment \xff\nkernel k() { }"), NULL, NULL,
     "t.tile:1:12: error: invalid UTF-8 byte 0xff"},
    {"invalid UTF-8 in a string", SRC("kernel k() { static_assert(true, \"\xff\"); }"), NULL, NULL,
     "t.tile:1:35: error: invalid UTF-8 byte 0xff"},
    {"NUL byte in code", SRC("kernel k() { let x = 1;\0 }"), NULL, NULL, "t.tile:1:24: error: NUL byte in source"},
    {"NUL byte in a comment", SRC("kernel k() { } // \0"), NULL, NULL, "t.tile:1:19: error: NUL byte in source"},
    {"huge integer literal", SRC("kernel k() { let x = 99999999999999999999; }"), NULL, NULL,
     "t.tile:1:22: error: integer literal is too large (maximum is 18446744073709551615)"},
    {"float literal out of range", SRC("kernel k() { let x = 1.5e999; }"), NULL, NULL,
     "t.tile:1:22: error: float literal is out of range"},
    {"malformed number", SRC("kernel k() { let x = 12abc; }"), NULL, NULL,
     "t.tile:1:22: error: invalid numeric literal '12abc'"},
    {"doubled separator", SRC("kernel k() { let x = 1__0; }"), NULL, NULL,
     "t.tile:1:22: error: invalid integer literal '1__0'"},
    {"stray character", SRC("kernel k() { let x = 1 $ 2; }"), NULL, NULL,
     "t.tile:1:24: error: unexpected character '$'"},
    {"control character", SRC("kernel k() { let x = 1\x01; }"), NULL, NULL,
     "t.tile:1:23: error: unexpected control character 0x01"},
    {"non-ASCII identifier", SRC("kernel k() { let \xc3\xa9 = 1; }"), NULL, NULL,
     "t.tile:1:18: error: unexpected character U+00E9 '\xc3\xa9' (only ASCII is allowed outside comments and "
     "strings)"},
    {"unterminated string", SRC("kernel k() { let s = \"abc; }"), NULL, NULL,
     "t.tile:1:22: error: unterminated string literal"},
    {"unknown escape", SRC("kernel k() { let x = \"a\\q\"; }"), NULL, NULL,
     "t.tile:1:24: error: unknown escape sequence in string literal"},
    {"unterminated comment", SRC("kernel k() { let x = 1; }\n/* unterminated\n\n"), NULL, NULL,
     "t.tile:2:1: error: unterminated comment"},

    /* ---- empty files ---- */

    /* ---- syntax ---- */
    {"missing ';'", SRC("kernel k() { let x = 1 }"), NULL, NULL, "t.tile:1:24: error: expected ';', found '}'"},
    {"missing ';' at a line end", SRC("kernel k() {\n    let x = 1\n    let y = 2;\n}"), NULL, NULL,
     "t.tile:3:5: error: expected ';', found 'let'"},
    {"missing ')'", SRC("kernel k() { let x = (1 + 2; }"), NULL, NULL, "t.tile:1:28: error: expected ')', found ';'"},
    {"missing ')' in a call", SRC("kernel k(p: *f32) { store(p, 1.0; }"), NULL, NULL,
     "t.tile:1:33: error: expected ',' or ')', found ';'"},
    {"missing '}' at the end", SRC("kernel k() {\n    let x = 1;\n"), NULL, NULL,
     "t.tile:3:1: error: expected '}', found end of file"},
    {"unexpected token", SRC("kernel k() { let x = 1 + ; }"), NULL, NULL,
     "t.tile:1:26: error: expected an expression, found ';'"},
    {"statement starting with else", SRC("kernel k() { else { } }"), NULL, NULL,
     "t.tile:1:14: error: expected an expression, found 'else'"},
    {"statement starting with ')'", SRC("kernel k() { ) }"), NULL, NULL,
     "t.tile:1:14: error: expected an expression, found ')'"},
    {"chained comparison", SRC("kernel k() { let x = 1 < 2 < 3; }"), NULL, NULL,
     "t.tile:1:28: error: comparison operators cannot be chained; use && to combine comparisons"},
    {"assignment to an expression", SRC("kernel k() { var x = 1; x + 1 = 2; }"), NULL, NULL,
     "t.tile:1:31: error: only a variable name can be assigned to"},
    {"assignment to an index", SRC("kernel k() { var x = zeros([4]); x[:] = 1.0; }"), NULL, NULL,
     "t.tile:1:39: error: only a variable name can be assigned to"},
    {"statement at the top level", SRC("let x = 1;\nkernel k() { }"), NULL, NULL,
     "t.tile:1:1: error: expected 'kernel', 'fn', 'const' or 'import', found 'let'"},
    {"annotated const", SRC("@warps(4) const X = 1;\nkernel k() { }"), NULL, NULL,
     "t.tile:1:11: error: expected 'kernel' or 'fn' after an annotation, found 'const'"},
    {"annotated let", SRC("kernel k() { @pipeline(stages = 2) let x = 1; }"), NULL, NULL,
     "t.tile:1:36: error: expected a 'for' or 'while' loop after a statement annotation"},
    {"fn inside a kernel", SRC("kernel k() { fn g() { } }"), NULL, NULL,
     "t.tile:1:14: error: 'fn' must be at the top level of a file"},
    {"kernel with a result type", SRC("kernel k() -> i32 { }"), NULL, NULL,
     "t.tile:1:12: error: kernels do not return values"},
    {"kernel parameter without a type", SRC("kernel k(a) { }"), NULL, NULL,
     "t.tile:1:11: error: expected ':' and a type, found ')'"},
    {"default for a runtime parameter", SRC("kernel k(a: i32 = 3) { }"), NULL, NULL,
     "t.tile:1:17: error: only const parameters can have default values"},
    {"None outside an index", SRC("kernel k() { let x = None; }"), NULL, NULL,
     "t.tile:1:22: error: 'None' is only allowed inside an index, as in x[:, None]"},
    {"for without range", SRC("kernel k() { for i in 4 { } }"), NULL, NULL,
     "t.tile:1:23: error: expected 'range(...)', found '4'"},
    {"for without in", SRC("kernel k() { for i range(4) { } }"), NULL, NULL,
     "t.tile:1:20: error: expected 'in', found 'range'"},
    {"range with four arguments", SRC("kernel k() { for i in range(1, 2, 3, 4) { } }"), NULL, NULL,
     "t.tile:1:29: error: range() takes 1 to 3 arguments: range(end), range(start, end) or range(start, end, "
     "step)"},
    {"call of a call", SRC("kernel k() { let x = f(1)(2); }"), NULL, NULL,
     "t.tile:1:26: error: only named functions can be called"},
    {"cast without a type", SRC("kernel k() { let x = 1 as; }"), NULL, NULL,
     "t.tile:1:26: error: expected a type, found ';'"},
    {"pointer type with a shape", SRC("kernel k() { let p: *f32[4] = 0; }"), NULL, NULL,
     "t.tile:1:25: error: pointer types cannot have a shape; a tile of pointers comes from pointer arithmetic"},
    {"tensor of rank 5", SRC("kernel k(d: tensor<f32, 5>) { }"), NULL, NULL,
     "t.tile:1:25: error: tensor rank must be between 1 and 4"},
    {"tile type without dimensions", SRC("kernel k() { let x: f32[] = 1; }"), NULL, NULL,
     "t.tile:1:21: error: a tile type needs at least one dimension"},
    {"align given twice", SRC("kernel k(p: *f32 align(16) align(16)) { }"), NULL, NULL,
     "t.tile:1:28: error: 'align' is given twice"},

    /* ---- names and declarations ---- */
    {"unknown name", SRC("kernel k() { let x = y; }"), NULL, NULL, "t.tile:1:22: error: unknown name 'y'"},
    {"unknown function", SRC("kernel k() { let x = foo(1); }"), NULL, NULL,
     "t.tile:1:22: error: unknown function 'foo'"},
    {"unknown parameter type", SRC("kernel k(n: f33) { }"), NULL, NULL, "t.tile:1:13: error: unknown type 'f33'"},
    {"unknown type in a cast", SRC("kernel k(n: i32) { let x = n as f33; }"), NULL, NULL,
     "t.tile:1:33: error: unknown type 'f33'"},
    {"unknown type in a let", SRC("kernel k() { let x: int = 1; }"), NULL, NULL,
     "t.tile:1:21: error: unknown type 'int'"},
    {"duplicate let", SRC("kernel k() { let x = 1; let x = 2; }"), NULL, NULL,
     "t.tile:1:29: error: 'x' is already declared in this scope"},
    {"duplicate parameter", SRC("kernel k(a: i32, a: i32) { }"), NULL, NULL,
     "t.tile:1:18: error: 'a' is already declared in this scope"},
    {"duplicate kernel", SRC("kernel k() { }\nkernel k() { }"), NULL, NULL, "t.tile:2:8: error: 'k' is already defined"},
    {"duplicate fn", SRC("fn f() { }\nfn f() { }\nkernel k() {}"), NULL, NULL,
     "t.tile:2:4: error: 'f' is already defined"},
    {"duplicate const", SRC("const A = 1;\nconst A = 2;\nkernel k() { }"), NULL, NULL,
     "t.tile:2:7: error: 'A' is already defined"},
    {"redefined builtin", SRC("fn exp(x) { return x; }\nkernel k() { }"), NULL, NULL,
     "t.tile:1:4: error: 'exp' is a builtin name and cannot be redefined"},
    {"type name as a variable", SRC("kernel k() { let f32 = 1; }"), NULL, NULL,
     "t.tile:1:18: error: 'f32' is a type name and cannot be used as a variable name"},
    {"function used as a value", SRC("kernel k() { let x = exp; }"), NULL, NULL,
     "t.tile:1:22: error: 'exp' is a function; call it with '(...)'"},
    {"call of a kernel", SRC("kernel a() { }\nkernel b() { a(); }"), NULL, NULL,
     "t.tile:2:14: error: 'a' is a kernel; kernels cannot be called from kernel code"},
    {"type parameter that is not const", SRC("kernel k(t: type) { }"), NULL, NULL,
     "t.tile:1:13: error: only const parameters can have type 'type'"},

    /* ---- assignments ---- */
    {"assignment to let", SRC("kernel k() { let x = 1; x = 2; }"), NULL, NULL,
     "t.tile:1:25: error: cannot assign to 'x': it was declared with 'let' (use 'var')"},
    {"assignment to a parameter", SRC("kernel k(a: i32) { a = 1; }"), NULL, NULL,
     "t.tile:1:20: error: cannot assign to parameter 'a'"},
    {"compound assignment to a parameter", SRC("kernel k(a: i32) { a += 1; }"), NULL, NULL,
     "t.tile:1:20: error: cannot assign to parameter 'a'"},
    {"assignment to a const parameter", SRC("kernel k(const N: i32 = 4) { N = 2; }"), NULL, NULL,
     "t.tile:1:30: error: cannot assign to parameter 'N'"},
    {"assignment to a loop variable", SRC("kernel k() { for i in range(4) { i = 2; } }"), NULL, NULL,
     "t.tile:1:34: error: cannot assign to loop variable 'i'"},
    {"assignment to a const item", SRC("const C = 1;\nkernel k() { C = 2; }"), NULL, NULL,
     "t.tile:2:14: error: cannot assign to 'C': it is not a variable"},
    {"assignment to a function", SRC("fn f() { }\nkernel k() { f = 1; }"), NULL, NULL,
     "t.tile:2:14: error: cannot assign to 'f': it is not a variable"},
    {"assignment to an unknown name", SRC("kernel k() { q = 1; }"), NULL, NULL, "t.tile:1:14: error: unknown name 'q'"},

    /* ---- functions, return and recursion ---- */
    {"direct recursion", SRC("fn f(x) { return f(x); }\nkernel k() { let y = f(1); }"), NULL, NULL,
     "t.tile:1:18: error: recursive call to 'f': helper functions are inlined and cannot recurse"},
    {"mutual recursion", SRC("fn f(x) { return g(x); }\nfn g(x) { return f(x); }\nkernel k() { let y = f(1); }"), NULL,
     NULL, "t.tile:2:18: error: recursive call to 'f': helper functions are inlined and cannot recurse"},
    {"return in a kernel", SRC("kernel k() { return; }"), NULL, NULL,
     "t.tile:1:14: error: 'return' is not allowed in a kernel"},
    {"return before the end of a fn", SRC("fn f(x) { return x; let y = 1; }\nkernel k() { }"), NULL, NULL,
     "t.tile:1:11: error: 'return' must be the last statement of a function"},
    {"return inside an if", SRC("fn f(x) -> i32 { if x > 0 { return 1; } return 0; }\nkernel k() { }"), NULL, NULL,
     "t.tile:1:29: error: 'return' must be the last statement of a function"},
    {"result type without return", SRC("fn f(x) -> i32 { let y = x; }\nkernel k() { }"), NULL, NULL,
     "t.tile:1:4: error: function 'f' declares a result type but does not end with 'return'"},

    /* ---- argument lists ---- */
    {"builtin without its argument", SRC("kernel k() { let x = program_id(); }"), NULL, NULL,
     "t.tile:1:22: error: 'program_id' needs argument 'axis'"},
    {"builtin with too many arguments", SRC("kernel k() { let x = program_id(0, 1); }"), NULL, NULL,
     "t.tile:1:36: error: 'program_id' takes 1 argument (got 2)"},
    {"builtin with too many optional arguments", SRC("kernel k(p: *f32) { let x = load(p, p, p, p); }"), NULL, NULL,
     "t.tile:1:43: error: 'load' takes 1 to 3 arguments (got 4)"},
    {"builtin without any argument", SRC("kernel k(p: *f32) { let x = load(); }"), NULL, NULL,
     "t.tile:1:29: error: 'load' needs argument 'ptr'"},
    {"builtin with an unknown named argument", SRC("kernel k() { let x = arange(0, 16, step = 2); }"), NULL, NULL,
     "t.tile:1:36: error: 'arange' has no parameter named 'step'"},
    {"builtin argument given twice", SRC("kernel k() { let x = program_id(0, axis = 1); }"), NULL, NULL,
     "t.tile:1:36: error: argument 'axis' of 'program_id' is given twice"},
    {"helper without an argument", SRC("fn f(a, b) { return a + b; }\nkernel k() { let x = f(1); }"), NULL, NULL,
     "t.tile:2:22: error: function 'f' needs argument 'b'"},
    {"helper with too many arguments", SRC("fn f(a, b) { return a + b; }\nkernel k() { let x = f(1, 2, 3); }"), NULL,
     NULL, "t.tile:2:30: error: function 'f' takes 2 arguments (got 3)"},
    {"helper with an unknown named argument", SRC("fn f(a, b) { return a + b; }\nkernel k() { let x = f(1, c = 2); }"),
     NULL, NULL, "t.tile:2:27: error: function 'f' has no parameter named 'c'"},
    {"non-constant argument for a const parameter",
     SRC("fn f(const N: i32) { return N; }\nkernel k(n: i32) { let x = f(n); }"), NULL, NULL,
     "t.tile:2:30: error: argument 'N' of 'f' must be a compile-time constant"},

    /* ---- annotations ---- */
    {"unknown annotation", SRC("@foo kernel k() { }"), NULL, NULL, "t.tile:1:1: error: unknown annotation '@foo'"},
    {"@warps(3)", SRC("@warps(3) kernel k() { }"), NULL, NULL,
     "t.tile:1:1: error: '@warps' needs a power of two between 1 and 32 (got 3)"},
    {"@warps(64)", SRC("@warps(64) kernel k() { }"), NULL, NULL,
     "t.tile:1:1: error: '@warps' needs a power of two between 1 and 32 (got 64)"},
    {"@warps without its argument", SRC("@warps kernel k() { }"), NULL, NULL,
     "t.tile:1:1: error: '@warps' needs argument 'n'"},
    {"@warps given twice", SRC("@warps(4) @warps(8) kernel k() { }"), NULL, NULL,
     "t.tile:1:11: error: '@warps' is given twice"},
    {"@warps on a for loop", SRC("kernel k() { @warps(4) for i in range(4) { } }"), NULL, NULL,
     "t.tile:1:14: error: '@warps' cannot be applied to for loops; it applies to kernels"},
    {"@warps on a helper", SRC("@warps(4) fn f() { }\nkernel k() { }"), NULL, NULL,
     "t.tile:1:1: error: '@warps' cannot be applied to functions; it applies to kernels"},
    {"@config without bindings", SRC("@config() kernel k(const B: i32 = 1) { }"), NULL, NULL,
     "t.tile:1:1: error: '@config' needs at least one NAME = VALUE"},
    {"@config with a positional argument", SRC("@config(4) kernel k(const B: i32 = 1) { }"), NULL, NULL,
     "t.tile:1:9: error: '@config' takes named arguments only (NAME = VALUE, for const parameters)"},
    {"@config naming no const parameter", SRC("@config(C = 4) kernel k(const B: i32 = 1) { }"), NULL, NULL,
     "t.tile:1:9: error: '@config' names 'C', which is not a const parameter of kernel 'k'"},
    {"@config setting a type", SRC("@config(T = 4) kernel k(const T: type = f32) { }"), NULL, NULL,
     "t.tile:1:9: error: '@config' cannot set 'T': only integer and bool const parameters are tuned"},
    {"@config with a computed value", SRC("@config(B = 2 * 2) kernel k(const B: i32 = 1) { }"), NULL, NULL,
     "t.tile:1:15: error: the value of 'B' in '@config' must be an integer literal"},
    {"@config with an integer for a bool", SRC("@config(F = 1) kernel k(const F: bool = false) { }"), NULL, NULL,
     "t.tile:1:13: error: the value of 'F' in '@config' must be true or false"},
    {"@config repeated", SRC("@config(A = 1, B = 2)\n@config(B = 2, A = 1) kernel k(const A: i32 = 0, const B: i32 = 0) { }"),
     NULL, NULL, "t.tile:2:1: error: this '@config' repeats the one at line 1"},
    {"@config on a for loop", SRC("kernel k(const B: i32 = 1) { @config(B = 2) for i in range(4) { } }"), NULL, NULL,
     "t.tile:1:30: error: '@config' cannot be applied to for loops; it applies to kernels"},
    {"@config on a helper", SRC("@config(B = 2) fn f(const B: i32 = 1) { }\nkernel k() { }"), NULL, NULL,
     "t.tile:1:1: error: '@config' cannot be applied to functions; it applies to kernels"},
    {"@pipeline on a while loop", SRC("kernel k() { var z = 1; @pipeline(stages = 2) while z > 0 { z -= 1; } }"), NULL,
     NULL, "t.tile:1:25: error: '@pipeline' cannot be applied to while loops; it applies to for loops"},
    {"@pipeline(stages = 0)", SRC("kernel k() { @pipeline(stages = 0) for i in range(4) { } }"), NULL, NULL,
     "t.tile:1:14: error: '@pipeline' stages must be between 1 and 8 (got 0)"},
    {"@pipeline(stages = 9)", SRC("kernel k() { @pipeline(stages = 9) for i in range(4) { } }"), NULL, NULL,
     "t.tile:1:14: error: '@pipeline' stages must be between 1 and 8 (got 9)"},
    {"@pipeline with a runtime value", SRC("kernel k(n: i32) { @pipeline(stages = n) for i in range(4) { } }"), NULL,
     NULL, "t.tile:1:39: error: the argument of '@pipeline' must be a compile-time integer constant"},
    {"@pipeline with an unknown named argument", SRC("kernel k() { @pipeline(depth = 2) for i in range(4) { } }"),
     NULL, NULL, "t.tile:1:24: error: '@pipeline' has no parameter named 'depth'"},
    {"@warp_specialize register above 256",
     SRC("@warp_specialize(producers = 1, consumers = 2, producer_registers = 40, consumer_registers = 264)\n"
         "kernel k() { }"),
     NULL, NULL, "t.tile:1:1: error: '@warp_specialize' register counts must be multiples of 8 between 24 and 256"},
    {"@warp_specialize register below 24", SRC("@warp_specialize(producer_registers = 16) kernel k() { }"), NULL, NULL,
     "t.tile:1:1: error: '@warp_specialize' register counts must be multiples of 8 between 24 and 256"},
    {"@warp_specialize register not a multiple of 8", SRC("@warp_specialize(producer_registers = 41) kernel k() { }"),
     NULL, NULL,
     "t.tile:1:1: error: '@warp_specialize' register counts must be multiples of 8 between 24 and 256"},
    {"@warp_specialize over the register file",
     SRC("@warp_specialize(producers = 2, consumers = 2, producer_registers = 232, consumer_registers = 232)\n"
         "kernel k() { }"),
     NULL, NULL, "t.tile:1:1: error: '@warp_specialize' needs 118784 registers; an SM has 65536"},
    {"@warp_specialize with too many warps", SRC("@warp_specialize(producers = 4, consumers = 5) kernel k() { }"), NULL,
     NULL, "t.tile:1:1: error: '@warp_specialize' needs 36 warps; a block has at most 32 (4 warps per warpgroup)"},
    {"@warp_specialize without producers", SRC("@warp_specialize(producers = 0) kernel k() { }"), NULL, NULL,
     "t.tile:1:1: error: '@warp_specialize' needs at least one producer and one consumer warpgroup"},
    {"@warps against @warp_specialize", SRC("@warps(8) @warp_specialize kernel k() { }"), NULL, NULL,
     "t.tile:1:1: error: '@warps(8)' conflicts with '@warp_specialize', which needs 12 warps"},

    /* ---- operand types ---- */
    {"f32 & i32", SRC("kernel k(a: f32, b: i32) { let x = a & b; }"), NULL, NULL,
     "t.tile:1:38: error: operator '&' needs integer or i1 operands, not f32"},
    {"negation of i1", SRC("kernel k(n: i32) { let c = n < 1; let x = -c; }"), NULL, NULL,
     "t.tile:1:43: error: operator '-' needs a number, not i1"},
    {"&& on integers", SRC("kernel k(n: i32) { let x = n && n; }"), NULL, NULL,
     "t.tile:1:30: error: operator '&&' needs i1 (boolean) operands, not i32"},
    {"! on an integer", SRC("kernel k(n: i32) { let x = !n; }"), NULL, NULL,
     "t.tile:1:28: error: operator '!' needs an i1 (boolean) operand, not i32"},
    {"~ on a float", SRC("kernel k(n: f32) { let x = ~n; }"), NULL, NULL,
     "t.tile:1:28: error: operator '~' needs an integer operand, not f32"},
    {"% on floats", SRC("kernel k(n: f32) { let x = n % 2.0; }"), NULL, NULL,
     "t.tile:1:30: error: operator '%' needs integer operands, not f32"},
    {"<< on a float", SRC("kernel k(n: f32) { let x = n << 1; }"), NULL, NULL,
     "t.tile:1:30: error: operator '<<' needs integer operands, not f32"},
    {"fp8 arithmetic", SRC("kernel k(p: *f8e4m3) { let x = load(p); let y = x + x; }"), NULL, NULL,
     "t.tile:1:51: error: operator '+' needs f16, bf16, f32 or f64 (fp8 supports only conversions, loads, stores "
     "and dot), not f8e4m3"},
    {"pointer * int", SRC("kernel k(p: *f32, n: i32) { let x = p * n; }"), NULL, NULL,
     "t.tile:1:39: error: operator '*' cannot be applied to *f32 and i32"},
    {"pointer - pointer", SRC("kernel k(p: *f32) { let x = p - p; }"), NULL, NULL,
     "t.tile:1:31: error: operator '-' cannot be applied to *f32 and *f32"},
    {"type as an operand", SRC("kernel k() { let x = f32 + 1; }"), NULL, NULL,
     "t.tile:1:26: error: operator '+' needs values"},
    {"list as an operand", SRC("kernel k() { let x = [1, 2] + 1; }"), NULL, NULL,
     "t.tile:1:29: error: operator '+' needs values"},
    {"var holding a type", SRC("kernel k() { var t = f32; }"), NULL, NULL,
     "t.tile:1:22: error: a variable declared with 'var' must hold a value"},
    {"float literal into an int", SRC("kernel k(a: i32) { let x: i32 = 1.5; }"), NULL, NULL,
     "t.tile:1:33: error: float literal 1.5 cannot be converted implicitly to i32; use 'as i32'"},
    {"literal out of range for i8", SRC("kernel k() { let x: i8 = 300; }"), NULL, NULL,
     "t.tile:1:26: error: literal 300 does not fit in i8"},
    {"negative literal for u32", SRC("kernel k() { let x: u32 = -1; }"), NULL, NULL,
     "t.tile:1:27: error: literal -1 does not fit in u32"},
    {"literal out of range for i32", SRC("kernel k() { let x: i32 = 2147483648; }"), NULL, NULL,
     "t.tile:1:27: error: literal 2147483648 does not fit in i32"},
    {"cast to a tile type", SRC("kernel k(n: i32) { let x = n as f32[4]; }"), NULL, NULL,
     "t.tile:1:33: error: a cast changes the element type only; use reshape() or broadcast_to() for shapes"},
    {"constant division by zero", SRC("kernel k() { let x = 1 / 0; }"), NULL, NULL,
     "t.tile:1:24: error: division by zero in a constant expression"},
    {"constant that depends on itself", SRC("const A = A + 1;\nkernel k() { let x = A; }"), NULL, NULL,
     "t.tile:1:11: error: constant 'A' depends on itself"},
    {"tile kernel parameter", SRC("kernel k(x: f32[16]) { }"), NULL, NULL,
     "t.tile:1:13: error: kernel parameters must be scalars, pointers or tensor descriptors, not tiles"},
    {"pointer const parameter", SRC("kernel k(const P: *f32) { }"), NULL, NULL,
     "t.tile:1:19: error: const parameters must be scalars or types, not *f32"},
    {"align that is not a power of two", SRC("kernel k(p: *f32 align(3)) { }"), NULL, NULL,
     "t.tile:1:24: error: align() needs a power of two between 1 and 256 (got 3)"},
    {"align on a scalar", SRC("kernel k(p: f32 align(4)) { }"), NULL, NULL,
     "t.tile:1:23: error: align() applies to pointer parameters, not f32"},
    {"multiple_of(0)", SRC("kernel k(x: i32 multiple_of(0)) { }"), NULL, NULL,
     "t.tile:1:29: error: multiple_of() needs a positive integer (got 0)"},
    {"multiple_of on a float", SRC("kernel k(x: f32 multiple_of(4)) { }"), NULL, NULL,
     "t.tile:1:29: error: multiple_of() applies to integer parameters, not f32"},

    /* ---- control flow ---- */
    {"if condition that is a tile", SRC("kernel k() { let m = arange(0, 16) < 3; if m { } }"), NULL, NULL,
     "t.tile:1:44: error: 'if' condition must be a scalar i1, not i1[16]; use where() to select between tiles"},
    {"if condition that is an int", SRC("kernel k(n: i32) { if n { } }"), NULL, NULL,
     "t.tile:1:23: error: 'if' condition must be i1 (a comparison or a bool), not i32"},
    {"while condition that is a tile", SRC("kernel k() { let m = arange(0, 16) < 3; while m { } }"), NULL, NULL,
     "t.tile:1:47: error: 'while' condition must be a scalar i1, not i1[16]; use where() to select between tiles"},
    {"range step of zero", SRC("kernel k() { for i in range(0, 4, 0) { } }"), NULL, NULL,
     "t.tile:1:35: error: range() step must not be zero"},

    /* ---- shapes ---- */
    {"broadcast failure", SRC("kernel k() { let a = arange(0, 16); let b = arange(0, 32); let c = a + b; }"), NULL, NULL,
     "t.tile:1:70: error: shapes [16] and [32] cannot be broadcast together"},
    {"2-D broadcast failure", SRC("kernel k() { let a = zeros([64, 32]); let b = zeros([16]); let c = a + b; }"), NULL,
     NULL, "t.tile:1:70: error: shapes [64, 32] and [16] cannot be broadcast together"},
    {"assignment of another element type", SRC("kernel k() { var a = zeros([16]); a = arange(0, 16); }"), NULL, NULL,
     "t.tile:1:39: error: cannot assign i32[16] to variable 'a' of type f32[16]"},
    {"dot shape mismatch", SRC("kernel k() { let a = zeros([16, 32]); let b = zeros([16, 32]); let c = dot(a, b); }"),
     NULL, NULL, "t.tile:1:72: error: dot() shapes do not match: f32[16, 32] times f32[16, 32]"},
    {"dot dimensions below 16", SRC("kernel k() { let a = zeros([8, 8]); let b = zeros([8, 8]); let c = dot(a, b); }"),
     NULL, NULL, "t.tile:1:68: error: dot() needs M, N and K of at least 16 (got f32[8, 8] times f32[8, 8])"},
    {"dot of vectors", SRC("kernel k() { let a = zeros([16]); let c = dot(a, a); }"), NULL, NULL,
     "t.tile:1:43: error: dot() needs two tiles of rank 2 (or 3, batched); got f32[16] and f32[16]"},
    {"dot of i32", SRC("kernel k() { let a = zeros([16, 16], i32); let c = dot(a, a); }"), NULL, NULL,
     "t.tile:1:52: error: dot() inputs must both be f16, bf16, f32, f64, i8 or fp8; got i32 and i32"},
    {"arange of length 10", SRC("kernel k() { let x = arange(0, 10); }"), NULL, NULL,
     "t.tile:1:22: error: arange() length 10 is not a power of two"},
    {"empty arange", SRC("kernel k() { let x = arange(4, 4); }"), NULL, NULL,
     "t.tile:1:22: error: arange() needs end > start (got 4, 4)"},
    {"tile dimension 3", SRC("kernel k() { let x = zeros([3]); }"), NULL, NULL,
     "t.tile:1:28: error: tile dimension 3 is not a power of two"},
    {"tile too large", SRC("kernel k() { let x = zeros([2048, 1024]); }"), NULL, NULL,
     "t.tile:1:28: error: tile [2048, 1024] has more than 1048576 elements"},
    {"tile of rank 5", SRC("kernel k() { let x = zeros([2, 2, 2, 2, 2]); }"), NULL, NULL,
     "t.tile:1:28: error: the shape of zeros() has 5 entries; at most 4 are allowed"},
    {"index with too many slices", SRC("kernel k() { let x = arange(0, 16)[:, :]; }"), NULL, NULL,
     "t.tile:1:35: error: index has 2 ':' entries but the tile has 1 dimension"},
    {"reshape to another size", SRC("kernel k() { let x = reshape(arange(0, 16), [4, 8]); }"), NULL, NULL,
     "t.tile:1:22: error: reshape() cannot reshape i32[16] (16 elements) to 32 elements"},

    /* ---- non-static shapes ---- */
    {"arange with a runtime bound", SRC("kernel k(n: i32) { let x = arange(0, n); }"), NULL, NULL,
     "t.tile:1:38: error: arange() argument 'end' must be a compile-time integer constant"},
    {"zeros with a runtime shape", SRC("kernel k(n: i32) { let x = zeros([n]); }"), NULL, NULL,
     "t.tile:1:35: error: the shape of zeros() must be a compile-time integer constant"},

    /* ---- builtin arguments ---- */
    {"load of a non-pointer", SRC("kernel k(n: i32) { let x = load(n); }"), NULL, NULL,
     "t.tile:1:33: error: load() needs a pointer or a tile of pointers, not i32"},
    {"load mask that is not i1", SRC("kernel k(p: *f32) { let x = load(p, 1); }"), NULL, NULL,
     "t.tile:1:37: error: load() mask must be i1, not i32"},
    {"load other without a mask", SRC("kernel k(p: *f32) { let x = load(p, other = 1.0); }"), NULL, NULL,
     "t.tile:1:45: error: load() 'other' needs a 'mask'"},
    {"sum of a scalar", SRC("kernel k() { let x = sum(1.0); }"), NULL, NULL,
     "t.tile:1:26: error: sum() needs a tile, not a scalar"},
    {"reduction axis out of range", SRC("kernel k() { let x = sum(arange(0, 16), 1); }"), NULL, NULL,
     "t.tile:1:41: error: sum() axis 1 is out of range for a tile of rank 1"},
    {"cumsum of a scalar", SRC("kernel k() { let x = cumsum(2); }"), NULL, NULL,
     "t.tile:1:29: error: cumsum() needs a tile, not a scalar"},
    {"cumsum of a matrix without an axis", SRC("kernel k() { let x = cumsum(zeros([4, 8], f32)); }"), NULL, NULL,
     "t.tile:1:22: error: cumsum() of a rank-2 tile needs an axis"},
    {"cumsum axis out of range", SRC("kernel k() { let x = cumsum(arange(0, 16), -2); }"), NULL, NULL,
     "t.tile:1:44: error: cumsum() axis -2 is out of range for a tile of rank 1"},
    {"cumsum of pointers", SRC("kernel k(p: *f32) { let x = cumsum(p + arange(0, 4)); }"), NULL, NULL,
     "t.tile:1:38: error: cumsum() cannot sum *f32[4]"},
    {"where condition that is not i1", SRC("kernel k() { let x = where(1, 2, 3); }"), NULL, NULL,
     "t.tile:1:28: error: where() condition must be i1, not i32"},
    {"exp of an int", SRC("kernel k(n: i32) { let x = exp(n); }"), NULL, NULL,
     "t.tile:1:32: error: exp() needs a f16, bf16, f32 or f64 argument, not i32; convert with 'as f32'"},
    {"trans of a vector", SRC("kernel k() { let x = trans(arange(0, 16)); }"), NULL, NULL,
     "t.tile:1:22: error: trans() of a tile of rank 1 needs a permutation such as [1, 0, 2]"},
    {"bitcast between widths", SRC("kernel k() { let x = bitcast(arange(0, 16), f16); }"), NULL, NULL,
     "t.tile:1:22: error: bitcast() needs types of equal bit width, other than i1 (i32 has 32 bits, f16 has "
     "16)"},
    {"program_id axis 3", SRC("kernel k() { let x = program_id(3); }"), NULL, NULL,
     "t.tile:1:33: error: program_id() axis must be 0, 1 or 2"},
    {"atomic_and on f32", SRC("kernel k(p: *f32) { let x = atomic_and(p, 1.0); }"), NULL, NULL,
     "t.tile:1:29: error: atomic_and() is not supported on f32"},
    {"zeros with a non-type dtype", SRC("kernel k() { let x = zeros([16], 3); }"), NULL, NULL,
     "t.tile:1:34: error: zeros() dtype must be a type such as f32"},
    {"full with a tile value", SRC("kernel k() { let x = full([16], arange(0, 4)); }"), NULL, NULL,
     "t.tile:1:33: error: full() value must be a scalar, not i32[4]"},

    /* ---- const parameters and -D ---- */
    {"-D BLOCK=100 for an arange", SRC("kernel k(const BLOCK: i32 = 64) { let x = arange(0, BLOCK); }"), "BLOCK=100",
     NULL, "t.tile:1:43: error: arange() length 100 is not a power of two"},
    {"-D with a non-number", SRC("kernel k(const BLOCK: i32 = 64) { let x = arange(0, BLOCK); }"), "BLOCK=abc", NULL,
     "t.tile:1:16: error: invalid value 'abc' for const parameter 'BLOCK' of type i32"},
    {"-D with a float for an int", SRC("kernel k(const BLOCK: i32 = 64) { }"), "BLOCK=1.5", NULL,
     "t.tile:1:16: error: invalid value '1.5' for const parameter 'BLOCK' of type i32"},
    {"-D out of range", SRC("kernel k(const N: i8 = 1) { }"), "N=300", NULL,
     "t.tile:1:16: error: literal 300 does not fit in i8"},
    {"-D with an unknown type", SRC("kernel k(const T: type = f32) { }"), "T=f33", NULL,
     "t.tile:1:16: error: invalid value 'f33' for const parameter 'T' of type type"},
    {"-D with a bad bool", SRC("kernel k(const F: bool = true) { }"), "F=yes", NULL,
     "t.tile:1:16: error: invalid value 'yes' for const parameter 'F' of type i1"},
    {"-D with an infinite float", SRC("kernel k(const X: f32 = 1.0) { }"), "X=1e999", NULL,
     "t.tile:1:16: error: invalid value '1e999' for const parameter 'X' of type f32"},
    {"const parameter without a value", SRC("kernel k(const N: i32) { }"), NULL, NULL,
     "t.tile:1:16: error: const parameter 'N' has no value (give one with -D N=...)"},
    {"static_assert failure", SRC("kernel k() { static_assert(1 == 2, \"nope\"); }"), NULL, NULL,
     "t.tile:1:14: error: static assertion failed: nope"},
    {"static_assert failure with -D", SRC("kernel k(const B: i32 = 16) {\n    static_assert(B % 16 == 0, \"B\");\n}"),
     "B=24", NULL, "t.tile:2:5: error: static assertion failed: B"},
    {"static_assert on a runtime value", SRC("kernel k(n: i32) { static_assert(n == 1, \"x\"); }"), NULL, NULL,
     "t.tile:1:36: error: static_assert() condition must be a compile-time i1 constant"},
};

#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- checking one case --------------------------------------------------- */

static tc_compilation *compile_case(const DiagCase *dc) {
  tc_define def = {0};
  char name[64];
  tc_options opt = {0};
  if (dc->define) {
    const char *eq = strchr(dc->define, '=');
    cr_assert_not_null(eq);
    snprintf(name, sizeof name, "%.*s", (int)(eq - dc->define), dc->define);
    def = (tc_define){name, eq + 1};
    opt.defines = &def;
    opt.ndefines = 1;
  }
  opt.kernel = dc->kernel;
  tc_compilation *c = tc_compile("t.tile", dc->src, dc->len, &opt);
  cr_assert_not_null(c);
  return c;
}

/* Line n (1-based) of text (without its newline or a CR before it), copied
 * into buf and NUL terminated; false if the text has no such line, or the
 * line is empty and at the very end (the renderer shows nothing there). */
static bool nth_line(const char *text, size_t len, unsigned n, char *buf, size_t cap, size_t *out_len) {
  size_t pos = 0;
  for (unsigned l = 1; l < n; l++) {
    const char *nl = memchr(text + pos, '\n', len - pos);
    if (!nl) return false;
    pos = (size_t)(nl - text) + 1;
  }
  if (pos >= len && n > 1) return false;
  size_t end = pos;
  while (end < len && text[end] != '\n') end++;
  if (end > pos && text[end - 1] == '\r') end--;
  if (end - pos + 1 > cap) return false;
  memcpy(buf, text + pos, end - pos);
  buf[end - pos] = 0;
  *out_len = end - pos;
  return true;
}

static bool printable_ascii(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) return false;
  return true;
}

/* The source line and caret under a header "file:L:C: ..." must show line L
 * with the caret under column C (checked for plain ASCII lines, where one
 * byte is one column). */
static void expect_caret(const char *what, const char *src, size_t len, const char *diags) {
  unsigned line, col;
  if (sscanf(diags, "t.tile:%u:%u:", &line, &col) != 2) return; /* no location */
  static char srcline[20000], shown[20000], caret[20000];
  size_t n, dn;
  if (!nth_line(src, len, line, srcline, sizeof srcline, &n) || !printable_ascii(srcline, n)) return;
  size_t dlen = strlen(diags);
  if (!nth_line(diags, dlen, 2, shown, sizeof shown, &dn) || !nth_line(diags, dlen, 3, caret, sizeof caret, &dn)) {
    cr_expect_fail("%s: no source and caret lines in:\n%s", what, diags);
    return;
  }
  cr_expect(strncmp(shown, "    ", 4) == 0 && strcmp(shown + 4, srcline) == 0, "%s: source line '%s', expected '%s'",
            what, shown, srcline);
  size_t spaces = strspn(caret, " ");
  cr_expect(caret[spaces] == '^' && caret[spaces + 1] == 0 && spaces == 4 + (size_t)col - 1,
            "%s: caret line '%s' for column %u", what, caret, col);
}

static void check_case(const DiagCase *dc) {
  tc_compilation *c = compile_case(dc);
  const char *d = tc_diagnostics(c);
  cr_expect_gt(tc_error_count(c), 0, "%s: no error reported", dc->name);
  size_t n = strcspn(d, "\n");
  cr_expect(strlen(dc->first) == n && strncmp(d, dc->first, n) == 0, "%s:\n  got:      %.*s\n  expected: %s",
            dc->name, (int)n, d, dc->first);
  expect_caret(dc->name, dc->src, dc->len, d);
  tc_free(c);
}

ParameterizedTestParameters(diagnostics, table) {
  static int indices[NCASES];
  for (int i = 0; i < NCASES; i++) indices[i] = i;
  return cr_make_param_array(int, indices, NCASES);
}

ParameterizedTest(int *index, diagnostics, table) { check_case(&cases[*index]); }

Test(diagnostics, table_is_large_enough) {
  cr_expect_geq(NCASES, 60, "only %d cases", NCASES);
  /* Every case has a distinct name (they identify failures). */
  for (int i = 0; i < NCASES; i++)
    for (int j = i + 1; j < NCASES; j++) cr_expect_str_neq(cases[i].name, cases[j].name);
}

/* ---- diagnostics without a source location ------------------------------ */

Test(diagnostics, define_of_an_unknown_name) {
  static const char src[] = "kernel k(const BLOCK: i32 = 64) { let x = arange(0, BLOCK); }";
  tc_define def = {"FOO", "1"};
  tc_options opt = {.defines = &def, .ndefines = 1};
  tc_compilation *c = tc_compile("t.tile", src, sizeof src - 1, &opt);
  cr_expect_eq(tc_error_count(c), 1);
  /* A -D is not in the source: no line, no caret. */
  cr_expect_str_eq(tc_diagnostics(c), "t.tile: error: -D FOO: no kernel in this file has a const parameter named 'FOO'\n");
  tc_free(c);
  /* With -k, the message talks about the selected kernel. */
  static const char two[] = "kernel a(const N: i32 = 1) { }\nkernel b() { }";
  def = (tc_define){"N", "2"};
  opt.kernel = "b";
  c = tc_compile("t.tile", two, sizeof two - 1, &opt);
  cr_expect_str_eq(tc_diagnostics(c), "t.tile: error: -D N: no selected kernel has a const parameter named 'N'\n");
  tc_free(c);
}

Test(diagnostics, unknown_kernel_option) {
  static const char src[] = "kernel k() { }";
  tc_options opt = {.kernel = "nope"};
  tc_compilation *c = tc_compile("t.tile", src, sizeof src - 1, &opt);
  cr_expect_eq(tc_error_count(c), 1);
  cr_expect_str_eq(tc_diagnostics(c), "t.tile: error: no kernel named 'nope' in this file\n");
  tc_free(c);
}

/* ---- cases whose location is right but whose wording is in question ---- */

/* The first diagnostic line of src (malloc'd, without the newline). */
static char *first_line(const char *src) {
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_not_null(c);
  cr_expect_gt(tc_error_count(c), 0, "no error for:\n%s", src);
  const char *d = tc_diagnostics(c);
  size_t n = strcspn(d, "\n");
  char *line = malloc(n + 1);
  if (!line) abort();
  memcpy(line, d, n);
  line[n] = 0;
  tc_free(c);
  return line;
}

static bool has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static bool has_suffix(const char *s, const char *x) {
  size_t n = strlen(s), m = strlen(x);
  return n >= m && strcmp(s + n - m, x) == 0;
}

Test(diagnostics, pipeline_on_a_kernel) {
  /* The message says "cannot be applied to functions" for a kernel (see
   * the report); only the location and the advice are checked here. */
  char *line = first_line("@pipeline(stages = 2) kernel k() { }");
  cr_expect(has_prefix(line, "t.tile:1:1: error: '@pipeline' cannot be applied to "), "%s", line);
  cr_expect(has_suffix(line, "; it applies to for loops"), "%s", line);
  free(line);
}

Test(diagnostics, assignment_of_a_wrong_shape) {
  /* An error at the assigned value; the wording ("cannot broadcast ...")
   * differs from the spec's "cannot assign f32[32] to variable 'a' of type
   * f32[16]" (see the report), so only the location is checked. */
  char *line = first_line("kernel k() { var a = zeros([16]); a = zeros([32]); }");
  cr_expect(has_prefix(line, "t.tile:1:39: error: "), "%s", line);
  free(line);
  line = first_line("kernel k() { var a = zeros([16, 16]); a = zeros([16]); a = zeros([32, 16]); }");
  cr_expect(has_prefix(line, "t.tile:1:60: error: "), "%s", line);
  free(line);
}

/* ---- rendering ------------------------------------------------------------ */

Test(diagnostics, complete_rendering) {
  static const char src[] = "kernel k() {\n\tlet x = y;\r\n}\n";
  tc_compilation *c = tc_compile("dir/t.tile", src, sizeof src - 1, NULL);
  /* The tab prints as one space, so the caret stays under column 10; the
   * CR is not printed. */
  cr_expect_str_eq(tc_diagnostics(c), "dir/t.tile:2:10: error: unknown name 'y'\n"
                                      "     let x = y;\n"
                                      "             ^\n");
  tc_free(c);
}

Test(diagnostics, notes_follow_their_error) {
  static const char src[] = "kernel k() {\n    let x = 1;\n    let x = 2;\n}\n";
  tc_compilation *c = tc_compile("t.tile", src, sizeof src - 1, NULL);
  cr_expect_eq(tc_error_count(c), 1, "notes are not errors");
  cr_expect_str_eq(tc_diagnostics(c), "t.tile:3:9: error: 'x' is already declared in this scope\n"
                                      "        let x = 2;\n"
                                      "            ^\n"
                                      "t.tile:2:9: note: 'x' was declared here\n"
                                      "        let x = 1;\n"
                                      "            ^\n");
  tc_free(c);
}

/* static_print notes: values of constants (after -D), types, literals,
 * strings and the types of runtime values; the compilation succeeds. */
Test(diagnostics, static_print_notes) {
  static const char src[] = "kernel k(x: *f32, n: i32, const B: i32 = 64, const T: type = bf16) {\n"
                            "  static_print(B * 2, \"twice B\");\n"
                            "  static_print(T);\n"
                            "  static_print(n);\n"
                            "  static_print(arange(0, B));\n"
                            "  static_print(\"hello\");\n"
                            "  static_print(0.25);\n"
                            "}\n";
  tc_options o = {.defines = (tc_define[]){{"B", "128"}}, .ndefines = 1};
  tc_compilation *c = tc_compile("t.tile", src, sizeof src - 1, &o);
  cr_expect_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  const char *d = tc_diagnostics(c);
  static const char *const want[] = {
      "t.tile:2:3: note: static_print: twice B: 256 (i32)\n",
      "t.tile:3:3: note: static_print: type bf16\n",
      "t.tile:4:3: note: static_print: a value of type i32 (not a compile-time constant)\n",
      "t.tile:5:3: note: static_print: a value of type i32[128] (not a compile-time constant)\n",
      "t.tile:6:3: note: static_print: hello\n",
      "t.tile:7:3: note: static_print: 0.25 (a float literal)\n"};
  const char *at = d;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const char *p = strstr(at, want[i]);
    cr_expect(p != NULL, "note %zu in order:\n%s", i, d);
    if (p) at = p;
  }
  tc_free(c);
  static const char bad[] = "kernel k() { static_print(1, 2); }\n";
  c = tc_compile("t.tile", bad, sizeof bad - 1, NULL);
  cr_expect(strstr(tc_diagnostics(c), "error: static_print() message must be a string"), "%s", tc_diagnostics(c));
  tc_free(c);
}

Test(diagnostics, good_programs_have_no_diagnostics) {
  static const char src[] = "kernel k(p: *f32, n: i32) {\n"
                            "    let i = arange(0, 16);\n"
                            "    store(p + i, (i * 2) as f32, i < n);\n"
                            "}\n";
  tc_compilation *c = tc_compile("t.tile", src, sizeof src - 1, NULL);
  cr_expect_eq(tc_error_count(c), 0);
  cr_expect_str_eq(tc_diagnostics(c), "");
  tc_free(c);
}

/* ---- hostile inputs -------------------------------------------------------- */

/* Compiles src (NUL terminated) and returns the error header lines joined
 * by newlines (malloc'd); *count receives tc_error_count. */
static char *headers(const char *src, int *count) {
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_not_null(c);
  const char *d = tc_diagnostics(c);
  char *out = malloc(strlen(d) + 1);
  if (!out) abort();
  size_t o = 0;
  for (const char *line = d; *line;) {
    size_t len = strcspn(line, "\n");
    if (line[0] != ' ') {
      memcpy(out + o, line, len);
      o += len;
      out[o++] = '\n';
    }
    line += len + (line[len] ? 1 : 0);
  }
  out[o] = 0;
  *count = tc_error_count(c);
  tc_free(c);
  return out;
}

Test(diagnostics, ten_thousand_nested_parentheses) {
  char *src = harness_nested("kernel k() {\n    let x = ", '(', "1", ')', ";\n}\n", 10000);
  int count;
  char *h = headers(src, &count);
  /* Reported once, at the first token inside the 257th level: the body
   * and the initializer are two levels, so the 256th '(' at column 268. */
  cr_expect_eq(count, 1);
  cr_expect_str_eq(h, "t.tile:2:268: error: nesting is too deep (more than 256 levels)\n");
  free(h);
  free(src);
}

Test(diagnostics, ten_thousand_nested_blocks) {
  char *src = harness_nested("kernel k() {\n    ", '{', "", '}', "\n}\n", 10000);
  int count;
  char *h = headers(src, &count);
  /* The body and 255 braces are 256 levels; the error is at the first
   * token inside the next one (the 257th brace, column 4 + 257). */
  cr_expect_eq(count, 1);
  cr_expect_str_eq(h, "t.tile:2:261: error: nesting is too deep (more than 256 levels)\n");
  free(h);
  free(src);
}

Test(diagnostics, ten_thousand_nested_else_ifs) {
  enum { N = 10000 };
  static const char step[] = "if a < 1 { } else ";
  size_t sl = sizeof step - 1;
  char *src = malloc(N * sl + 64);
  if (!src) abort();
  int o = sprintf(src, "kernel k(a: i32) {\n");
  for (int i = 0; i < N; i++) memcpy(src + o + (size_t)i * sl, step, sl);
  strcpy(src + o + N * sl, "{ }\n}\n");
  int count;
  char *h = headers(src, &count);
  cr_expect_eq(count, 1);
  /* The body is one level and each `else if` another, so the 255th `if`
   * is at level 255, its condition at 256 and the right operand of its
   * `<` at 257: the error points at that `1`. */
  char expected[128];
  snprintf(expected, sizeof expected, "t.tile:2:%zu: error: nesting is too deep (more than 256 levels)\n",
           254 * sl + 8);
  cr_expect_str_eq(h, expected);
  free(h);
  free(src);
}

Test(diagnostics, identifier_longer_than_255_characters) {
  char src[600];
  int o = sprintf(src, "kernel k() {\n    let ");
  memset(src + o, 'v', 256);
  strcpy(src + o + 256, " = 1;\n}\n");
  int count;
  char *h = headers(src, &count);
  cr_expect_eq(count, 1);
  cr_expect_str_eq(h, "t.tile:2:9: error: identifier is longer than 255 characters\n");
  free(h);
  /* 255 characters are fine. */
  src[o + 255] = ' ';
  h = headers(src, &count);
  cr_expect_eq(count, 0, "%s", h);
  free(h);
}

Test(diagnostics, error_cap_of_twenty) {
  /* 30 independent syntax errors: the first 20 are reported, then one
   * "too many errors" line; tc_error_count counts the 20 errors. */
  char src[2048];
  int o = sprintf(src, "kernel k() {\n");
  for (int i = 0; i < 30; i++) o += sprintf(src + o, "    let v%d = ;\n", i);
  sprintf(src + o, "}\n");
  int count;
  char *h = headers(src, &count);
  char expected[2048];
  int e = 0;
  for (int i = 0; i < 20; i++)
    e += sprintf(expected + e, "t.tile:%d:%d: error: expected an expression, found ';'\n", i + 2, i < 10 ? 14 : 15);
  sprintf(expected + e, "t.tile: error: too many errors (20), stopping\n");
  cr_expect_str_eq(h, expected);
  cr_expect_eq(count, 20);
  free(h);
}

/* Masks that cannot be false: a warning at the comparison, once however
 * many specializations share it; not for comparisons that can fail or
 * whose operands have no range (parameters, loads). */
static const char *mask_warnings(const char *src, const tc_options *o) {
  static char out[4096];
  tc_compilation *c = tc_compile("m.tile", src, strlen(src), o);
  snprintf(out, sizeof out, "%s", tc_diagnostics(c));
  cr_expect_eq(tc_error_count(c), 0, "%s", out);
  tc_free(c);
  return out;
}

Test(diagnostics, masks_that_cannot_be_false) {
  const char *always = "kernel k(x: *f32, y: *f32, n: i32, const B: i32 = 256) {\n"
                       "    let i = arange(0, B);\n"
                       "    let j = program_id(0);\n"
                       "    store(y + i, load(x + i, i < B), j >= 0 && i <= B - 1);\n"
                       "}\n";
  const char *w = mask_warnings(always, NULL);
  cr_expect(strstr(w, "m.tile:4:32: warning: this mask is true for every element (by the ranges of its operands), so it "
                      "checks nothing; drop it or compare with the bound that was meant"),
            "%s", w);
  cr_expect(strstr(w, "m.tile:4:45: warning: this mask is true"), "the && of two true comparisons:\n%s", w);
  cr_expect_eq(harness_count(w, "warning:"), 2, "%s", w);
  const char *can_fail = "kernel k(x: *f32, y: *f32, n: i32) {\n"
                         "    let i = arange(0, 256);\n"
                         "    store(y + i, load(x + i, i < 255), i < n);\n"
                         "    store(y + i, 1.0, program_id(0) * 256 + i < 1000);\n"
                         "}\n";
  w = mask_warnings(can_fail, NULL);
  cr_expect_eq(harness_count(w, "warning:"), 0, "%s", w);
  /* a helper inlined into two kernels: one warning; -Werror makes it an error */
  const char *two = "fn put(x, v) { let i = arange(0, 64); store(x + i, v, i < 64); }\n"
                    "kernel k(x: *f32) { put(x, 1.0); }\n"
                    "kernel k2(x: *f32) { put(x, 2.0); }\n";
  w = mask_warnings(two, NULL);
  cr_expect_eq(harness_count(w, "warning: this mask"), 1, "one per location:\n%s", w);
  tc_compilation *c = tc_compile("m.tile", two, strlen(two), &(tc_options){.warnings_are_errors = true});
  cr_expect_gt(tc_error_count(c), 0);
  cr_expect(strstr(tc_diagnostics(c), "so it checks nothing; drop it or compare with the bound that was meant [-Werror]"),
            "%s", tc_diagnostics(c));
  tc_free(c);
}

/* ---- @config lists read back through the API ----------------------------- */

Test(diagnostics, config_lists_read_back_in_source_order) {
  static const char src[] = "@config(BLOCK = 256, FAST = true)\n"
                            "@config(BLOCK = -8, FAST = false)\n"
                            "kernel a(const BLOCK: i32 = 64, const FAST: bool = false) { }\n"
                            "kernel b(const N: i32 = 1) { }\n";
  tc_options o = {0};
  tc_compilation *c = tc_compile("t.tile", src, sizeof src - 1, &o);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  int ka = tc_kernel_find(c, "a"), kb = tc_kernel_find(c, "b");
  cr_assert(ka >= 0 && kb >= 0);
  cr_expect_eq(tc_kernel_config_count(c, ka), 2);
  cr_expect_eq(tc_kernel_config_count(c, kb), 0);
  cr_expect_eq(tc_kernel_config_count(c, 99), -1);
  tc_define d[2];
  cr_assert_eq(tc_kernel_config(c, ka, 0, d, 2), 2);
  cr_expect_str_eq(d[0].name, "BLOCK");
  cr_expect_str_eq(d[0].value, "256");
  cr_expect_str_eq(d[1].name, "FAST");
  cr_expect_str_eq(d[1].value, "true");
  cr_assert_eq(tc_kernel_config(c, ka, 1, d, 1), 2, "the count, though only one fits");
  cr_expect_str_eq(d[0].value, "-8");
  cr_expect_eq(tc_kernel_config(c, ka, 2, d, 2), -1);
  cr_expect_eq(tc_kernel_config(c, kb, 0, d, 2), -1);
  tc_free(c);
}
