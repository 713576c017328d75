/* test_lexer.c - unit tests of the lexer (compiler/front/lexer.re).
 *
 * The lexer is the first line of defence against bad input: every later
 * stage trusts its tokens, and every diagnostic location in the compiler is
 * a token location. So these tests pin down, through the internal API
 * (lex() with a Source, Arena and Diags) and through
 * tc_emit(TC_EMIT_TOKENS):
 *   - every token kind and the longest-match rule for punctuation,
 *   - integer literals (decimal, hex, binary, '_' separators, the u64
 *     maximum and overflow) and float literals (forms, exponents, range),
 *   - keywords versus identifiers that merely contain them,
 *   - comments (line, block, not nested, unterminated) and string literals
 *     with their escapes,
 *   - line:column locations (tabs are one column, columns count bytes,
 *     CRLF line ends, block comments spanning lines),
 *   - errors: invalid UTF-8, NUL bytes (including one as the very last
 *     byte, which must not be confused with the end of the text), stray
 *     characters, non-ASCII outside comments and strings, overlong
 *     identifiers, and the 20-error cap,
 * each with its exact message and location.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/front/token.h"
#include "../../compiler/include/tilec.h"

/* ---- harness ------------------------------------------------------------ */

/* One lexed text. Heap allocated because the Diags point at the Source. */
typedef struct Lexed {
  Arena arena;
  Source src;
  Diags diags;
  TokenList tl;
} Lexed;

static Lexed *lex_n(const char *text, size_t len) {
  Lexed *l = calloc(1, sizeof *l);
  cr_assert_not_null(l);
  arena_init(&l->arena);
  l->src = (Source){"t.tile", text, len, 0};
  diags_init(&l->diags, &l->arena, &l->src);
  l->tl = lex(&l->src, &l->arena, &l->diags);
  return l;
}

/* Lexes a string literal's bytes (embedded NULs included). */
#define LEX(s) lex_n((s), sizeof(s) - 1)

static void lexed_free(Lexed *l) {
  arena_free(&l->arena);
  free(l);
}

static const Token *tok(const Lexed *l, int i) {
  cr_assert_lt(i, l->tl.count, "token %d requested, only %d lexed", i, l->tl.count);
  return &l->tl.tokens[i];
}

/* Asserts the kind, location and text of token i. */
static void expect_tok(const Lexed *l, int i, TokKind kind, uint32_t line, uint32_t col, const char *text) {
  const Token *t = tok(l, i);
  cr_expect_eq(t->kind, kind, "token %d: kind %s, expected %s", i, token_kind_name(t->kind), token_kind_name(kind));
  cr_expect(t->loc.line == line && t->loc.col == col, "token %d: at %u:%u, expected %u:%u", i, t->loc.line,
            t->loc.col, line, col);
  if (text) {
    cr_expect(t->len == strlen(text) && memcmp(t->start, text, t->len) == 0, "token %d: text '%.*s', expected '%s'", i,
              (int)t->len, t->start, text);
  }
}

/* Asserts that the text lexed without errors into exactly n tokens + EOF. */
static void expect_clean(const Lexed *l, int n) {
  cr_expect_eq(l->diags.errors, 0, "unexpected error: %s", l->diags.count ? l->diags.items[0].msg : "");
  cr_expect_eq(l->tl.count, n + 1, "%d tokens, expected %d + EOF", l->tl.count, n);
  cr_expect_eq(l->tl.tokens[l->tl.count - 1].kind, TOK_EOF);
}

/* Asserts diagnostic i: an error at line:col with exactly this message. */
static void expect_diag(const Lexed *l, int i, uint32_t line, uint32_t col, const char *msg) {
  cr_assert_lt(i, l->diags.count, "diagnostic %d expected ('%s'), only %d reported", i, msg, l->diags.count);
  const Diag *d = &l->diags.items[i];
  cr_expect_eq(d->level, DIAG_ERROR);
  cr_expect(d->loc.line == line && d->loc.col == col, "diagnostic %d ('%s'): at %u:%u, expected %u:%u", i, d->msg,
            d->loc.line, d->loc.col, line, col);
  cr_expect_str_eq(d->msg, msg);
}

/* The integer value of a single-literal text. */
static void expect_int(const char *text, uint64_t value) {
  Lexed *l = lex_n(text, strlen(text));
  expect_clean(l, 1);
  expect_tok(l, 0, TOK_INT, 1, 1, text);
  cr_expect_eq(tok(l, 0)->ival, value, "'%s' = %llu, expected %llu", text, (unsigned long long)tok(l, 0)->ival,
               (unsigned long long)value);
  lexed_free(l);
}

static void expect_float(const char *text, double value) {
  Lexed *l = lex_n(text, strlen(text));
  expect_clean(l, 1);
  expect_tok(l, 0, TOK_FLOAT, 1, 1, text);
  cr_expect(tok(l, 0)->fval == value, "'%s' = %.17g, expected %.17g", text, tok(l, 0)->fval, value);
  lexed_free(l);
}

/* A single-literal text that must be rejected with msg at 1:1, leaving
 * one ERROR token. */
static void expect_bad_literal(const char *text, const char *msg) {
  Lexed *l = lex_n(text, strlen(text));
  cr_expect_eq(l->diags.errors, 1, "'%s': %d errors", text, l->diags.errors);
  expect_diag(l, 0, 1, 1, msg);
  expect_tok(l, 0, TOK_ERROR, 1, 1, text);
  cr_expect_eq(l->tl.count, 2, "'%s': %d tokens", text, l->tl.count);
  lexed_free(l);
}

/* ---- token kinds -------------------------------------------------------- */

Test(lexer, every_token_kind_in_order) {
  /* One token of every kind, in the order of the TokKind enum (EOF first
   * in the enum, last in the text; ERROR last in the enum). */
  static const char text[] =
      "name 42 2.5 \"str\" kernel fn let var const if else for in while return true false as None import "
      "( ) [ ] { } , ; : -> @ . = += -= *= /= %= &= |= ^= <<= >>= + - * / % & | ^ ~ ! << >> && || == != < <= > >= $";
  Lexed *l = LEX(text);
  cr_assert_eq(l->tl.count, TOK_COUNT, "%d tokens for %d kinds", l->tl.count, TOK_COUNT);
  for (int k = TOK_IDENT; k < TOK_COUNT; k++)
    cr_expect_eq(tok(l, k - 1)->kind, (TokKind)k, "token %d is %s, expected %s", k - 1,
                 token_kind_name(tok(l, k - 1)->kind), token_kind_name((TokKind)k));
  cr_expect_eq(tok(l, TOK_COUNT - 1)->kind, TOK_EOF);
  /* Keywords and punctuation: the token's text is its spelling. */
  for (int k = TOK_KW_KERNEL; k <= TOK_GE; k++) {
    const Token *t = tok(l, k - 1);
    const char *spelling = token_kind_name((TokKind)k);
    cr_expect(t->len == strlen(spelling) && memcmp(t->start, spelling, t->len) == 0, "'%.*s' vs '%s'", (int)t->len,
              t->start, spelling);
  }
  /* The only error is the '$'. */
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, (uint32_t)(strchr(text, '$') - text) + 1, "unexpected character '$'");
  lexed_free(l);
}

Test(lexer, payloads_of_literals_and_names) {
  Lexed *l = LEX("name 42 2.5 \"str\"");
  expect_clean(l, 4);
  cr_expect_str_eq(tok(l, 0)->sval, "name");
  cr_expect_eq(tok(l, 1)->ival, 42);
  cr_expect(tok(l, 2)->fval == 2.5);
  cr_expect_str_eq(tok(l, 3)->sval, "str");
  expect_tok(l, 3, TOK_STRING, 1, 13, "\"str\"");
  lexed_free(l);
}

Test(lexer, punctuation_takes_the_longest_match) {
  Lexed *l = LEX("<<=<<<=>>=>>>=->-&&&||| !==>=== ->>");
  static const TokKind kinds[] = {TOK_SHL_ASSIGN, TOK_SHL, TOK_LE, TOK_SHR_ASSIGN, TOK_SHR, TOK_GE,
                                  TOK_ARROW, TOK_MINUS, TOK_AND_AND, TOK_AMP, TOK_OR_OR, TOK_PIPE,
                                  TOK_NE, TOK_ASSIGN, TOK_GE, TOK_EQ, TOK_ARROW, TOK_GT};
  int n = (int)(sizeof kinds / sizeof kinds[0]);
  expect_clean(l, n);
  for (int i = 0; i < n; i++)
    cr_expect_eq(tok(l, i)->kind, kinds[i], "token %d is %s, expected %s", i, token_kind_name(tok(l, i)->kind),
                 token_kind_name(kinds[i]));
  lexed_free(l);
}

Test(lexer, tokens_need_no_spaces_between_them) {
  Lexed *l = LEX("x[:,None]as f32;f(a=1)");
  expect_clean(l, 15);
  expect_tok(l, 0, TOK_IDENT, 1, 1, "x");
  expect_tok(l, 1, TOK_LBRACKET, 1, 2, "[");
  expect_tok(l, 2, TOK_COLON, 1, 3, ":");
  expect_tok(l, 3, TOK_COMMA, 1, 4, ",");
  expect_tok(l, 4, TOK_KW_NONE, 1, 5, "None");
  expect_tok(l, 5, TOK_RBRACKET, 1, 9, "]");
  expect_tok(l, 6, TOK_KW_AS, 1, 10, "as");
  expect_tok(l, 7, TOK_IDENT, 1, 13, "f32");
  expect_tok(l, 8, TOK_SEMI, 1, 16, ";");
  expect_tok(l, 9, TOK_IDENT, 1, 17, "f");
  expect_tok(l, 10, TOK_LPAREN, 1, 18, "(");
  expect_tok(l, 11, TOK_IDENT, 1, 19, "a");
  expect_tok(l, 12, TOK_ASSIGN, 1, 20, "=");
  expect_tok(l, 13, TOK_INT, 1, 21, "1");
  expect_tok(l, 14, TOK_RPAREN, 1, 22, ")");
  lexed_free(l);
}

Test(lexer, empty_and_blank_sources) {
  Lexed *l = LEX("");
  expect_clean(l, 0);
  expect_tok(l, 0, TOK_EOF, 1, 1, "");
  lexed_free(l);
  l = LEX(" \t\v\f\r\n  ");
  expect_clean(l, 0);
  expect_tok(l, 0, TOK_EOF, 2, 3, "");
  lexed_free(l);
}

/* ---- integer literals --------------------------------------------------- */

Test(lexer, integer_literal_forms) {
  expect_int("0", 0);
  expect_int("7", 7);
  expect_int("007", 7);
  expect_int("123", 123);
  expect_int("1_000_000", 1000000);
  expect_int("0x1F", 31);
  expect_int("0X1f", 31);
  expect_int("0xdead_BEEF", 0xdeadbeefu);
  expect_int("0x0", 0);
  expect_int("0b101", 5);
  expect_int("0B11", 3);
  expect_int("0b1111_0000", 0xf0);
  expect_int("2147483648", 2147483648u);
}

Test(lexer, integer_literal_u64_maximum) {
  expect_int("18446744073709551615", UINT64_MAX);
  expect_int("18_446_744_073_709_551_615", UINT64_MAX);
  expect_int("0xFFFFFFFFFFFFFFFF", UINT64_MAX);
  expect_int("0xFFFF_FFFF_FFFF_FFFF", UINT64_MAX);
  expect_int("0b1111111111111111111111111111111111111111111111111111111111111111", UINT64_MAX);
  expect_int("9223372036854775808", (uint64_t)INT64_MAX + 1);
  /* Leading zeros do not count towards the size. */
  expect_int("0x0000000000000000000000000000001", 1);
}

Test(lexer, integer_literal_overflow) {
  static const char *const too_large[] = {
      "18446744073709551616",
      "18446744073709551625",
      "99999999999999999999",
      "0x10000000000000000",
      "0x1_0000_0000_0000_0000",
      "0b11111111111111111111111111111111111111111111111111111111111111111",
      "100000000000000000000000000000000000000000000000000000000000",
  };
  for (size_t i = 0; i < sizeof too_large / sizeof too_large[0]; i++)
    expect_bad_literal(too_large[i], "integer literal is too large (maximum is 18446744073709551615)");
}

Test(lexer, integer_literal_overflow_location_and_recovery) {
  Lexed *l = LEX("let x =\n  1 + 18446744073709551616;");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 2, 7, "integer literal is too large (maximum is 18446744073709551615)");
  expect_tok(l, 5, TOK_ERROR, 2, 7, "18446744073709551616");
  expect_tok(l, 6, TOK_SEMI, 2, 27, ";");
  lexed_free(l);
}

Test(lexer, misplaced_separators) {
  expect_bad_literal("1__0", "invalid integer literal '1__0'");
  expect_bad_literal("1_", "invalid integer literal '1_'");
  expect_bad_literal("0x_1", "invalid integer literal '0x_1'");
  expect_bad_literal("0b_1", "invalid integer literal '0b_1'");
  expect_bad_literal("0x1_", "invalid integer literal '0x1_'");
  expect_bad_literal("1_.5", "invalid float literal '1_.5'");
  expect_bad_literal("1._5", "invalid float literal '1._5'");
  /* A leading underscore makes an identifier, not a number. */
  Lexed *l = LEX("_1");
  expect_clean(l, 1);
  expect_tok(l, 0, TOK_IDENT, 1, 1, "_1");
  lexed_free(l);
}

Test(lexer, malformed_numbers) {
  expect_bad_literal("12abc", "invalid numeric literal '12abc'");
  expect_bad_literal("0b", "invalid numeric literal '0b'");
  expect_bad_literal("0x", "invalid numeric literal '0x'");
  expect_bad_literal("0b102", "invalid numeric literal '0b102'");
  expect_bad_literal("0xG1", "invalid numeric literal '0xG1'");
  expect_bad_literal("1.0f", "invalid numeric literal '1.0f'");
  expect_bad_literal("1.foo", "invalid numeric literal '1.foo'");
}

Test(lexer, exponent_without_digits) {
  Lexed *l = LEX("1e+x");
  /* "1e" is malformed; the '+' and the x lex on their own. */
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 1, "invalid numeric literal '1e'");
  expect_tok(l, 0, TOK_ERROR, 1, 1, "1e");
  expect_tok(l, 1, TOK_PLUS, 1, 3, "+");
  expect_tok(l, 2, TOK_IDENT, 1, 4, "x");
  lexed_free(l);
}

/* ---- float literals ----------------------------------------------------- */

Test(lexer, float_literal_forms) {
  expect_float("1.0", 1.0);
  expect_float("1.", 1.0);
  expect_float("0.5", 0.5);
  expect_float("3.25", 3.25);
  expect_float("1e3", 1000.0);
  expect_float("1e-3", 1e-3);
  expect_float("2.5E+4", 25000.0);
  expect_float("1e+5", 100000.0);
  expect_float("2.e5", 200000.0);
  expect_float("1E0", 1.0);
  expect_float("1_000.25", 1000.25);
  expect_float("0.000_001", 1e-6);
  expect_float("6.02214076e23", 6.02214076e23);
}

Test(lexer, float_literal_range) {
  expect_float("1.7976931348623157e308", DBL_MAX);
  /* Underflow is not an error: the value is simply 0 (or subnormal). */
  expect_float("1e-400", 0.0);
  expect_bad_literal("1e400", "float literal is out of range");
  expect_bad_literal("1.8e308", "float literal is out of range");
  expect_bad_literal("1.0e999999", "float literal is out of range");
}

/* ".5" is no float: a '.' (namespace.name) and 5, which the parser
 * rejects as an expression */
Test(lexer, float_needs_digits_before_the_dot) {
  Lexed *l = LEX(".5");
  expect_clean(l, 2);
  expect_tok(l, 0, TOK_DOT, 1, 1, ".");
  expect_tok(l, 1, TOK_INT, 1, 2, "5");
  lexed_free(l);
}

/* ---- keywords and identifiers ------------------------------------------- */

Test(lexer, keywords) {
  static const struct {
    const char *text;
    TokKind kind;
  } kws[] = {
      {"kernel", TOK_KW_KERNEL}, {"fn", TOK_KW_FN},       {"let", TOK_KW_LET},     {"var", TOK_KW_VAR},
      {"const", TOK_KW_CONST},   {"if", TOK_KW_IF},       {"else", TOK_KW_ELSE},   {"for", TOK_KW_FOR},
      {"in", TOK_KW_IN},         {"while", TOK_KW_WHILE}, {"return", TOK_KW_RETURN}, {"true", TOK_KW_TRUE},
      {"false", TOK_KW_FALSE},   {"as", TOK_KW_AS},       {"None", TOK_KW_NONE},
  };
  for (size_t i = 0; i < sizeof kws / sizeof kws[0]; i++) {
    Lexed *l = lex_n(kws[i].text, strlen(kws[i].text));
    expect_clean(l, 1);
    expect_tok(l, 0, kws[i].kind, 1, 1, kws[i].text);
    lexed_free(l);
  }
}

Test(lexer, identifiers_that_contain_keywords) {
  /* Longest match: a keyword followed by identifier characters is one
   * identifier; keywords are case sensitive; builtin and type names are
   * ordinary identifiers. */
  static const char *const names[] = {
      "kernels", "kernel_", "_kernel", "Kernel", "fns",   "letter", "variable", "constant", "iff",
      "elsewhere", "format", "int",    "inx",    "whilst", "returns", "trueish", "False",  "ask",
      "None_",   "NONE",   "none",     "Nonexistent", "_", "__", "range", "type", "tensor", "f32", "bool",
      "inf",     "nan",    "align",    "multiple_of", "x1", "a_b_c", "ABC123",
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    Lexed *l = lex_n(names[i], strlen(names[i]));
    expect_clean(l, 1);
    expect_tok(l, 0, TOK_IDENT, 1, 1, names[i]);
    cr_expect_str_eq(tok(l, 0)->sval, names[i]);
    lexed_free(l);
  }
}

Test(lexer, identifier_length_limit) {
  char name[300];
  memset(name, 'a', sizeof name);
  /* 255 bytes: fine. */
  Lexed *l = lex_n(name, LEX_MAX_IDENT);
  expect_clean(l, 1);
  cr_expect_eq(tok(l, 0)->kind, TOK_IDENT);
  cr_expect_eq(strlen(tok(l, 0)->sval), LEX_MAX_IDENT);
  lexed_free(l);
  /* 256 bytes: an error at the identifier's start, and one ERROR token. */
  char text[400];
  snprintf(text, sizeof text, "x = %.*s;", LEX_MAX_IDENT + 1, name);
  l = lex_n(text, strlen(text));
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 5, "identifier is longer than 255 characters");
  cr_expect_eq(tok(l, 2)->kind, TOK_ERROR);
  cr_expect_eq(tok(l, 2)->len, LEX_MAX_IDENT + 1);
  expect_tok(l, 3, TOK_SEMI, 1, 5 + LEX_MAX_IDENT + 1, ";");
  lexed_free(l);
}

/* ---- comments ----------------------------------------------------------- */

Test(lexer, line_comments) {
  Lexed *l = LEX("a // b c d\n// whole line\nc // ends at EOF without a newline");
  expect_clean(l, 2);
  expect_tok(l, 0, TOK_IDENT, 1, 1, "a");
  expect_tok(l, 1, TOK_IDENT, 3, 1, "c");
  lexed_free(l);
  /* A comment may hold any valid UTF-8, and comment markers. */
  l = LEX("// caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80 /* \"\nx");
  expect_clean(l, 1);
  expect_tok(l, 0, TOK_IDENT, 2, 1, "x");
  lexed_free(l);
}

Test(lexer, block_comments) {
  Lexed *l = LEX("a/*x*/b /**/ c /***/ d /*/ still a comment */ e /* // */ f");
  expect_clean(l, 6);
  expect_tok(l, 0, TOK_IDENT, 1, 1, "a");
  expect_tok(l, 1, TOK_IDENT, 1, 7, "b");
  expect_tok(l, 2, TOK_IDENT, 1, 14, "c");
  expect_tok(l, 3, TOK_IDENT, 1, 22, "d");
  expect_tok(l, 4, TOK_IDENT, 1, 47, "e");
  expect_tok(l, 5, TOK_IDENT, 1, 58, "f");
  lexed_free(l);
}

Test(lexer, block_comments_do_not_nest) {
  /* The first star-slash ends the comment; the second one is code. */
  Lexed *l = LEX("/* a /* b */ c */");
  expect_clean(l, 3);
  expect_tok(l, 0, TOK_IDENT, 1, 14, "c");
  expect_tok(l, 1, TOK_STAR, 1, 16, "*");
  expect_tok(l, 2, TOK_SLASH, 1, 17, "/");
  lexed_free(l);
}

Test(lexer, unterminated_block_comment) {
  /* Reported at the opening, even when the comment runs over lines. */
  Lexed *l = LEX("x\n  /* never\nclosed *\n");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 2, 3, "unterminated comment");
  expect_tok(l, 0, TOK_IDENT, 1, 1, "x");
  cr_expect_eq(tok(l, 1)->kind, TOK_EOF);
  lexed_free(l);
  l = LEX("/*");
  expect_diag(l, 0, 1, 1, "unterminated comment");
  lexed_free(l);
  l = LEX("a /*/");
  expect_diag(l, 0, 1, 3, "unterminated comment");
  lexed_free(l);
}

/* ---- strings ------------------------------------------------------------ */

Test(lexer, string_escapes) {
  Lexed *l = LEX("\"a\\\\b\\\"c\\nd\\te\"");
  expect_clean(l, 1);
  expect_tok(l, 0, TOK_STRING, 1, 1, "\"a\\\\b\\\"c\\nd\\te\"");
  cr_expect_str_eq(tok(l, 0)->sval, "a\\b\"c\nd\te");
  lexed_free(l);
}

Test(lexer, string_contents) {
  Lexed *l = LEX("\"\" \"caf\xc3\xa9 // not a comment /* */\" x");
  expect_clean(l, 3);
  cr_expect_str_eq(tok(l, 0)->sval, "");
  cr_expect_str_eq(tok(l, 1)->sval, "caf\xc3\xa9 // not a comment /* */");
  expect_tok(l, 2, TOK_IDENT, 1, 35, "x");
  lexed_free(l);
}

Test(lexer, unknown_escape) {
  Lexed *l = LEX("  \"a\\qb\"");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 5, "unknown escape sequence in string literal");
  cr_expect_eq(tok(l, 0)->kind, TOK_STRING);
  lexed_free(l);
}

Test(lexer, unterminated_string) {
  /* A string ends at the end of its line; the error points at the quote. */
  Lexed *l = LEX("x = \"abc\ny");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 5, "unterminated string literal");
  expect_tok(l, 2, TOK_STRING, 1, 5, "\"abc");
  cr_expect_str_eq(tok(l, 2)->sval, "abc");
  expect_tok(l, 3, TOK_IDENT, 2, 1, "y");
  lexed_free(l);
  l = LEX("\"abc");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 1, "unterminated string literal");
  lexed_free(l);
}

Test(lexer, bad_bytes_inside_a_string) {
  Lexed *l = LEX("\"a\xff" "b\"");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 3, "invalid UTF-8 byte 0xff");
  cr_expect_eq(tok(l, 0)->kind, TOK_STRING);
  lexed_free(l);
  l = LEX("\"a\0b\"");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 3, "NUL byte in source");
  lexed_free(l);
}

/* ---- locations ---------------------------------------------------------- */

Test(lexer, tabs_count_as_one_column) {
  Lexed *l = LEX("\tx\n\t\ty\n \t z");
  expect_clean(l, 3);
  expect_tok(l, 0, TOK_IDENT, 1, 2, "x");
  expect_tok(l, 1, TOK_IDENT, 2, 3, "y");
  expect_tok(l, 2, TOK_IDENT, 3, 4, "z");
  lexed_free(l);
}

Test(lexer, crlf_line_ends) {
  Lexed *l = LEX("a\r\nb\r\n  c\r\n");
  expect_clean(l, 3);
  expect_tok(l, 0, TOK_IDENT, 1, 1, "a");
  expect_tok(l, 1, TOK_IDENT, 2, 1, "b");
  expect_tok(l, 2, TOK_IDENT, 3, 3, "c");
  expect_tok(l, 3, TOK_EOF, 4, 1, "");
  lexed_free(l);
}

Test(lexer, locations_after_multiline_block_comment) {
  Lexed *l = LEX("a /* one\ntwo\n  three */ b\nc");
  expect_clean(l, 3);
  expect_tok(l, 0, TOK_IDENT, 1, 1, "a");
  expect_tok(l, 1, TOK_IDENT, 3, 12, "b");
  expect_tok(l, 2, TOK_IDENT, 4, 1, "c");
  lexed_free(l);
  /* The same with CRLF inside the comment. */
  l = LEX("/*\r\n\r\n*/x");
  expect_clean(l, 1);
  expect_tok(l, 0, TOK_IDENT, 3, 3, "x");
  lexed_free(l);
}

Test(lexer, columns_count_bytes) {
  /* e-acute is two bytes, the arrow three, the emoji four. */
  Lexed *l = LEX("/* \xc3\xa9 */ x // \xe2\x86\x92\n\"\xf0\x9f\x98\x80\" y");
  expect_clean(l, 3);
  expect_tok(l, 0, TOK_IDENT, 1, 10, "x");
  expect_tok(l, 1, TOK_STRING, 2, 1, NULL);
  expect_tok(l, 2, TOK_IDENT, 2, 8, "y");
  lexed_free(l);
}

Test(lexer, multiline_program_locations) {
  Lexed *l = LEX("kernel k(n: i32) {\n    let x = n + 1;\n}\n");
  expect_clean(l, 16);
  expect_tok(l, 0, TOK_KW_KERNEL, 1, 1, "kernel");
  expect_tok(l, 1, TOK_IDENT, 1, 8, "k");
  expect_tok(l, 4, TOK_COLON, 1, 11, ":");
  expect_tok(l, 7, TOK_LBRACE, 1, 18, "{");
  expect_tok(l, 8, TOK_KW_LET, 2, 5, "let");
  expect_tok(l, 11, TOK_IDENT, 2, 13, "n");
  expect_tok(l, 12, TOK_PLUS, 2, 15, "+");
  expect_tok(l, 13, TOK_INT, 2, 17, "1");
  expect_tok(l, 14, TOK_SEMI, 2, 18, ";");
  expect_tok(l, 15, TOK_RBRACE, 3, 1, "}");
  expect_tok(l, 16, TOK_EOF, 4, 1, "");
  lexed_free(l);
}

/* ---- errors ------------------------------------------------------------- */

Test(lexer, invalid_utf8_in_code) {
  Lexed *l = LEX("ab\xff" "cd");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 3, "invalid UTF-8 byte 0xff");
  expect_tok(l, 0, TOK_IDENT, 1, 1, "ab");
  expect_tok(l, 1, TOK_ERROR, 1, 3, "\xff");
  expect_tok(l, 2, TOK_IDENT, 1, 4, "cd");
  lexed_free(l);
}

Test(lexer, invalid_utf8_sequences) {
  /* An overlong encoding, a surrogate, a stray continuation byte, a code
   * point above U+10FFFF and a sequence cut short by the end of the text:
   * the first bad byte is reported where it is. */
  static const struct {
    const char *text;
    const char *msg;
  } cases[] = {
      {"x \xc0\x80", "invalid UTF-8 byte 0xc0"},
      {"x \xed\xa0\x80", "invalid UTF-8 byte 0xed"},
      {"x \x80", "invalid UTF-8 byte 0x80"},
      {"x \xf4\x90\x80\x80", "invalid UTF-8 byte 0xf4"},
      {"x \xe2\x82", "invalid UTF-8 byte 0xe2"},
      {"x \xfe", "invalid UTF-8 byte 0xfe"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    Lexed *l = lex_n(cases[i].text, strlen(cases[i].text));
    cr_expect_geq(l->diags.errors, 1, "case %zu", i);
    expect_diag(l, 0, 1, 3, cases[i].msg);
    cr_expect_eq(tok(l, 1)->kind, TOK_ERROR, "case %zu", i);
    cr_expect_eq(l->tl.tokens[l->tl.count - 1].kind, TOK_EOF);
    lexed_free(l);
  }
}

Test(lexer, invalid_utf8_in_comments) {
  Lexed *l = LEX("a // ok \xff\nb /* \xc3 */ c");
  cr_expect_eq(l->diags.errors, 2);
  expect_diag(l, 0, 1, 9, "invalid UTF-8 byte 0xff");
  expect_diag(l, 1, 2, 6, "invalid UTF-8 byte 0xc3");
  /* The comments still end where they should. */
  expect_tok(l, 0, TOK_IDENT, 1, 1, "a");
  expect_tok(l, 1, TOK_IDENT, 2, 1, "b");
  expect_tok(l, 2, TOK_IDENT, 2, 11, "c");
  lexed_free(l);
}

Test(lexer, nul_bytes) {
  /* In code, in a comment, and as the very last byte of the text (the
   * lexer's own end sentinel is also a NUL; the two must not be confused). */
  Lexed *l = LEX("a\0b");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 2, "NUL byte in source");
  expect_tok(l, 1, TOK_ERROR, 1, 2, NULL);
  expect_tok(l, 2, TOK_IDENT, 1, 3, "b");
  lexed_free(l);
  l = LEX("// x\0y\nz");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 5, "NUL byte in source");
  expect_tok(l, 0, TOK_IDENT, 2, 1, "z");
  lexed_free(l);
  l = LEX("x\0");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 2, "NUL byte in source");
  cr_expect_eq(l->tl.count, 3);
  lexed_free(l);
  l = LEX("/* \0 */");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 4, "NUL byte in source");
  lexed_free(l);
}

Test(lexer, stray_characters) {
  static const char stray[] = "$#?`'\\";
  for (const char *c = stray; *c; c++) {
    char text[8], msg[64];
    snprintf(text, sizeof text, "a %c b", *c);
    snprintf(msg, sizeof msg, "unexpected character '%c'", *c);
    Lexed *l = lex_n(text, strlen(text));
    cr_expect_eq(l->diags.errors, 1, "'%c'", *c);
    expect_diag(l, 0, 1, 3, msg);
    expect_tok(l, 1, TOK_ERROR, 1, 3, NULL);
    expect_tok(l, 2, TOK_IDENT, 1, 5, "b");
    lexed_free(l);
  }
}

Test(lexer, control_characters) {
  Lexed *l = LEX("a \x01 b \x1b");
  cr_expect_eq(l->diags.errors, 2);
  expect_diag(l, 0, 1, 3, "unexpected control character 0x01");
  expect_diag(l, 1, 1, 7, "unexpected control character 0x1b");
  lexed_free(l);
}

Test(lexer, non_ascii_outside_comments_and_strings) {
  Lexed *l = LEX("let caf\xc3\xa9 = 1;");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 8,
              "unexpected character U+00E9 '\xc3\xa9' (only ASCII is allowed outside comments and strings)");
  expect_tok(l, 1, TOK_IDENT, 1, 5, "caf");
  expect_tok(l, 2, TOK_ERROR, 1, 8, "\xc3\xa9");
  expect_tok(l, 3, TOK_ASSIGN, 1, 11, "=");
  lexed_free(l);
  /* A four-byte character is one error and one token. */
  l = LEX("x \xf0\x9f\x98\x80 y");
  cr_expect_eq(l->diags.errors, 1);
  expect_diag(l, 0, 1, 3,
              "unexpected character U+1F600 '\xf0\x9f\x98\x80' (only ASCII is allowed outside comments and strings)");
  expect_tok(l, 1, TOK_ERROR, 1, 3, "\xf0\x9f\x98\x80");
  expect_tok(l, 2, TOK_IDENT, 1, 8, "y");
  lexed_free(l);
}

Test(lexer, error_cap_stops_the_lexer) {
  /* 30 bad characters: 20 errors are recorded, the rest are dropped, and
   * the token list still ends with EOF. */
  Lexed *l = LEX("$ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $ $");
  cr_expect_eq(l->diags.errors, DIAG_MAX_ERRORS);
  cr_expect_eq(l->diags.count, DIAG_MAX_ERRORS);
  expect_diag(l, DIAG_MAX_ERRORS - 1, 1, 2 * DIAG_MAX_ERRORS - 1, "unexpected character '$'");
  cr_expect_eq(l->tl.tokens[l->tl.count - 1].kind, TOK_EOF);
  lexed_free(l);
}

/* ---- --emit=tokens ------------------------------------------------------ */

static char *emit_tokens(const char *src, size_t len, int *errors) {
  tc_options opt = {0};
  tc_compilation *c = tc_compile("t.tile", src, len, &opt);
  cr_assert_not_null(c);
  char *text = tc_emit(c, TC_EMIT_TOKENS);
  *errors = tc_error_count(c);
  tc_free(c);
  cr_assert_not_null(text);
  return text;
}

Test(lexer, emit_tokens_format) {
  static const char src[] =
      "kernel k(p: *f32) {\n"
      "\tlet s = \"a\\\"b\\n\"; // comment\n"
      "    store(p, 0x10 + 2.5e1);\n"
      "}\n";
  int errors;
  char *text = emit_tokens(src, sizeof src - 1, &errors);
  cr_expect_eq(errors, 0, "%d errors", errors);
  cr_expect_str_eq(text,
                   "1:1 KW_KERNEL kernel\n"
                   "1:8 IDENT k\n"
                   "1:9 LPAREN (\n"
                   "1:10 IDENT p\n"
                   "1:11 COLON :\n"
                   "1:13 STAR *\n"
                   "1:14 IDENT f32\n"
                   "1:17 RPAREN )\n"
                   "1:19 LBRACE {\n"
                   "2:2 KW_LET let\n"
                   "2:6 IDENT s\n"
                   "2:8 ASSIGN =\n"
                   "2:10 STRING \"a\\\"b\\n\"\n"
                   "2:18 SEMI ;\n"
                   "3:5 IDENT store\n"
                   "3:10 LPAREN (\n"
                   "3:11 IDENT p\n"
                   "3:12 COMMA ,\n"
                   "3:14 INT 16\n"
                   "3:19 PLUS +\n"
                   "3:21 FLOAT 25\n"
                   "3:26 RPAREN )\n"
                   "3:27 SEMI ;\n"
                   "4:1 RBRACE }\n"
                   "5:1 EOF\n");
  free(text);
}

Test(lexer, emit_tokens_shows_error_tokens) {
  static const char src[] = "x $ 99999999999999999999 1.5e999\n";
  int errors;
  char *text = emit_tokens(src, sizeof src - 1, &errors);
  /* The lexer's three, and the parser's complaint about the stray 'x'. */
  cr_expect_eq(errors, 4, "%d errors", errors);
  cr_expect_str_eq(text,
                   "1:1 IDENT x\n"
                   "1:3 ERROR $\n"
                   "1:5 ERROR 99999999999999999999\n"
                   "1:26 ERROR 1.5e999\n"
                   "2:1 EOF\n");
  free(text);
}

Test(lexer, emit_tokens_float_precision) {
  static const char src[] = "0.1 1e-3 123456789.125";
  int errors;
  char *text = emit_tokens(src, sizeof src - 1, &errors);
  /* %.17g: enough digits to read the double back exactly. */
  cr_expect_str_eq(text,
                   "1:1 FLOAT 0.10000000000000001\n"
                   "1:5 FLOAT 0.001\n"
                   "1:10 FLOAT 123456789.125\n"
                   "1:23 EOF\n");
  free(text);
}
