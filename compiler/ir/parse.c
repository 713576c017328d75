/* parse.c - reads the textual tile IR written by print.c (format described
 * there and in ir.h).
 *
 * The text is the interface of IR-level tests and of dumps edited by hand,
 * so the parser accepts exactly the printer's syntax and reports the first
 * problem (unknown op, undefined or redefined value, wrong operand count,
 * bad type, missing terminator, trailing junk, ...) at its line:col through
 * diags, then stops and returns NULL.  It checks syntax and name binding
 * only; types and structure are the verifier's job (ir_verify).
 *
 * It must survive any input (it is fuzzed): every read is bounds checked
 * against Source.len, NUL bytes are errors, region nesting is limited to
 * PARSE_MAX_DEPTH, and every loop ends once an error has been reported.
 *
 * Lines matter: each op ends at a newline.  Values must be defined before
 * they are used (textual order is definition order); a value defined in a
 * region is visible only inside it.  Kernel parameters are named (%x),
 * all other values numbered (%7).  Result types of generic ops come from the
 * text; results and block arguments of for/while take the types of their
 * initial values (a for's induction variable the type of lo).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* Deepest nesting of regions (for/if/while inside each other). The parser
 * recurses once per level; real kernels nest a handful deep. */
#define PARSE_MAX_DEPTH 256
/* Largest N accepted in %N: the printer numbers from 0, so this bounds the
 * number of values of one function, far above any real kernel. */
#define PARSE_MAX_VALUE_NUMBER 999999999u
/* Longest number token converted with strtod; the printer writes at most
 * 24 characters. */
#define PARSE_MAX_NUMBER_LEN 64
/* Bytes of a token quoted in an error message. */
#define PARSE_MAX_QUOTE 32
/* Longest error message. */
#define PARSE_MAX_MESSAGE 256
/* Initial slots of the value table; it doubles when half full. */
#define PARSE_TABLE_INIT 64
/* Bits per entry of trans's packed perm attribute, and the largest entry. */
#define PARSE_PERM_BITS 4
#define PARSE_PERM_MAX 15
/* Numbers in warp_specialize(producers, consumers, producer_registers,
 * consumer_registers). */
#define PARSE_WARP_SPEC_FIELDS 4
/* Most entries of one list (operands, results, iter values, parameters,
 * types): more than the front end makes from any source it accepts (a
 * variable carried by a loop takes several of its at most a million
 * tokens), and few enough for the int counts of the IR builders. */
#define PARSE_MAX_LIST (1u << 20)

/* ---- tokens ------------------------------------------------------------- */

typedef enum TokKind {
  TK_EOF,
  TK_NEWLINE,
  TK_IDENT,  /* op names, type names, keywords */
  TK_INT,    /* -?[0-9]+ */
  TK_FLOAT,  /* with '.' or exponent, or -inf */
  TK_STRING, /* text/len hold the decoded contents */
  TK_VALUE,  /* %name or %N (text/len include the '%') */
  TK_PUNCT,  /* one of ( ) [ ] { } , : = * < > @ */
  TK_ARROW,  /* -> */
  TK_ERROR,  /* after an error: parsing stops */
} TokKind;

typedef struct Tok {
  TokKind kind;
  const char *text;
  size_t len;
  SrcLoc loc;
  char punct;      /* TK_PUNCT */
  bool numbered;   /* TK_VALUE: %N */
  uint32_t number; /* TK_VALUE: N */
} Tok;

/* ---- value table: %N -> Value, with scopes ------------------------------ */

typedef struct ValueSlot {
  uint32_t key;
  bool used;    /* defined somewhere in this function */
  bool visible; /* in scope at the current point */
  Value *value;
} ValueSlot;

typedef struct NamedValue {
  const char *name; /* NULL: an empty slot */
  size_t len;
  Value *value;
} NamedValue;

typedef struct Parser {
  Arena *arena;
  const Source *src;
  Diags *diags;
  size_t pos; /* lexer position */
  uint32_t line, col;
  Tok tok; /* current token */
  bool failed;
  int depth;
  /* Numbered values of the current function (open addressing). */
  ValueSlot *slots;
  uint32_t nslots, nused;
  /* Keys defined, innermost scope last; scope_end hides a suffix. */
  uint32_t *scope_keys;
  size_t nscope, capscope;
  /* Kernel parameters of the current function, by name (open addressing,
   * at most half full, so that lookup is constant time however many there
   * are). */
  NamedValue *params;
  size_t nparam_slots;
} Parser;

/* Growable arrays in the arena. */
typedef struct TokList {
  Tok *items;
  size_t n, cap;
} TokList;
typedef struct ValueList {
  Value **items;
  size_t n, cap;
} ValueList;
typedef struct TypeList {
  TType *items;
  size_t n, cap;
} TypeList;

/* Appends to a list; at PARSE_MAX_LIST entries it fails instead (the
 * callers stop at the failure). */
#define LIST_PUSH(p, list, item)                                                            \
  do {                                                                                      \
    if ((list)->n == PARSE_MAX_LIST) {                                                      \
      fail((p), (p)->tok.loc, "list too long (limit %u entries)", PARSE_MAX_LIST);         \
      break;                                                                                \
    }                                                                                       \
    if ((list)->n == (list)->cap) {                                                         \
      size_t cap_ = (list)->cap ? (list)->cap * 2 : 4;                                      \
      (list)->items = arena_grow((p)->arena, (list)->items, sizeof *(list)->items,          \
                                 (list)->cap, cap_);                                        \
      (list)->cap = cap_;                                                                   \
    }                                                                                       \
    (list)->items[(list)->n++] = (item);                                                    \
  } while (0)

/* ---- errors ------------------------------------------------------------- */

/* Reports the first error only; later calls do nothing. */
static void fail(Parser *p, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(Parser *p, SrcLoc loc, const char *fmt, ...) {
  if (p->failed) return;
  p->failed = true;
  char msg[PARSE_MAX_MESSAGE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_error(p->diags, loc, "%s", msg);
  p->tok.kind = TK_ERROR;
}

/* A token as quoted in messages: 'text', "end of line", ... */
static const char *describe(const Tok *t, char *buf, size_t size) {
  switch (t->kind) {
  case TK_EOF: return "end of input";
  case TK_NEWLINE: return "end of line";
  case TK_STRING: return "a string";
  case TK_ERROR: return "an error";
  default: break;
  }
  int n = t->len > PARSE_MAX_QUOTE ? PARSE_MAX_QUOTE : (int)t->len;
  snprintf(buf, size, "'%.*s%s'", n, t->text, t->len > PARSE_MAX_QUOTE ? "..." : "");
  return buf;
}

static void fail_expected(Parser *p, const char *what) {
  char buf[PARSE_MAX_QUOTE + 8];
  fail(p, p->tok.loc, "expected %s, found %s", what, describe(&p->tok, buf, sizeof buf));
}

/* ---- lexer -------------------------------------------------------------- */

/* Byte at pos + ahead, or -1 past the end. */
static int peek_byte(const Parser *p, size_t ahead) {
  size_t i = p->pos + ahead;
  return i < p->src->len ? (unsigned char)p->src->text[i] : -1;
}

static void skip_bytes(Parser *p, size_t n) {
  for (size_t i = 0; i < n && p->pos < p->src->len; i++) {
    if (p->src->text[p->pos] == '\n') {
      p->line++;
      p->col = 1;
    } else {
      p->col++;
    }
    p->pos++;
  }
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_ident_start(int c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_ident_char(int c) { return is_ident_start(c) || is_digit(c); }
static int hex_digit(int c) {
  return is_digit(c) ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static size_t count_digits(const Parser *p, size_t at) {
  size_t n = 0;
  while (is_digit(peek_byte(p, at + n))) n++;
  return n;
}

/* -?[0-9]+ ( '.' [0-9]+ )? ( [eE] [+-]? [0-9]+ )? */
static void lex_number(Parser *p, Tok *t) {
  size_t n = peek_byte(p, 0) == '-' ? 1 : 0;
  n += count_digits(p, n);
  bool is_float = false;
  if (peek_byte(p, n) == '.' && is_digit(peek_byte(p, n + 1))) {
    n += 1 + count_digits(p, n + 1);
    is_float = true;
  }
  int e = peek_byte(p, n);
  if (e == 'e' || e == 'E') {
    size_t sign = peek_byte(p, n + 1) == '+' || peek_byte(p, n + 1) == '-' ? 1 : 0;
    if (is_digit(peek_byte(p, n + 1 + sign))) {
      n += 1 + sign + count_digits(p, n + 1 + sign);
      is_float = true;
    }
  }
  t->kind = is_float ? TK_FLOAT : TK_INT;
  t->len = n;
  skip_bytes(p, n);
}

/* %name or %N. */
static void lex_value(Parser *p, Tok *t) {
  size_t n = 1;
  if (is_digit(peek_byte(p, 1))) {
    uint64_t number = 0;
    for (; is_digit(peek_byte(p, n)); n++) {
      number = number * 10 + (uint64_t)(peek_byte(p, n) - '0');
      if (number > PARSE_MAX_VALUE_NUMBER) {
        fail(p, t->loc, "value number too large (limit %u)", PARSE_MAX_VALUE_NUMBER);
        return;
      }
    }
    if (is_ident_char(peek_byte(p, n))) {
      fail(p, t->loc, "invalid value name");
      return;
    }
    t->numbered = true;
    t->number = (uint32_t)number;
  } else if (is_ident_start(peek_byte(p, 1))) {
    while (is_ident_char(peek_byte(p, n))) n++;
  } else {
    fail(p, t->loc, "expected a value name after '%%'");
    return;
  }
  t->kind = TK_VALUE;
  t->len = n;
  skip_bytes(p, n);
}

/* The byte written as two hex digits at pos + at, or -1. */
static int hex_byte(const Parser *p, size_t at) {
  int hi = hex_digit(peek_byte(p, at)), lo = hex_digit(peek_byte(p, at + 1));
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* "..." with escapes \" \\ \xNN; decoded into the arena. */
static void lex_string(Parser *p, Tok *t) {
  size_t n = 1;
  size_t out = 0;
  char *buf = NULL;
  for (int pass = 0; pass < 2; pass++) { /* pass 0 measures, pass 1 decodes */
    n = 1;
    out = 0;
    for (;;) {
      int c = peek_byte(p, n);
      if (c < 0 || c == '\n') {
        fail(p, t->loc, "unterminated string");
        return;
      }
      if (c == 0) {
        fail(p, t->loc, "NUL byte in string");
        return;
      }
      if (c == '"') break;
      if (c == '\\') {
        int e = peek_byte(p, n + 1);
        if (e == '"' || e == '\\') {
          c = e;
          n += 2;
        } else if (e == 'x' && hex_byte(p, n + 2) > 0) {
          c = hex_byte(p, n + 2);
          n += 4;
        } else {
          fail(p, (SrcLoc){t->loc.line, t->loc.col + (uint32_t)n, 0}, "invalid escape in string");
          return;
        }
      } else {
        n++;
      }
      if (buf) buf[out] = (char)c;
      out++;
    }
    if (!buf) buf = arena_alloc(p->arena, out + 1);
  }
  t->kind = TK_STRING;
  t->text = buf;
  t->len = out;
  skip_bytes(p, n + 1);
}

static bool starts_minus_inf(const Parser *p) {
  return peek_byte(p, 0) == '-' && peek_byte(p, 1) == 'i' && peek_byte(p, 2) == 'n' &&
         peek_byte(p, 3) == 'f' && !is_ident_char(peek_byte(p, 4));
}

static void lex_punct(Parser *p, Tok *t, int c) {
  static const char puncts[] = "()[]{},:=*<>@";
  if (c == '-' && peek_byte(p, 1) == '>') {
    t->kind = TK_ARROW;
    t->len = 2;
  } else if (c > 0 && memchr(puncts, c, sizeof puncts - 1)) {
    t->kind = TK_PUNCT;
    t->punct = (char)c;
    t->len = 1;
  } else if (c >= 0x21 && c < 0x7f) {
    fail(p, t->loc, "unexpected character '%c'", c);
    return;
  } else {
    fail(p, t->loc, "unexpected byte 0x%02x", (unsigned)c);
    return;
  }
  skip_bytes(p, t->len);
}

/* Reads the next token into p->tok. */
static void lex(Parser *p) {
  if (p->failed) return;
  while (peek_byte(p, 0) == ' ' || peek_byte(p, 0) == '\t' || peek_byte(p, 0) == '\r')
    skip_bytes(p, 1);
  Tok t;
  memset(&t, 0, sizeof t);
  t.loc = (SrcLoc){p->line, p->col, 0};
  t.text = p->src->text + p->pos;
  int c = peek_byte(p, 0);
  if (c < 0) {
    t.kind = TK_EOF;
  } else if (c == 0) {
    fail(p, t.loc, "NUL byte in input");
    return;
  } else if (c == '\n') {
    t.kind = TK_NEWLINE;
    t.len = 1;
    skip_bytes(p, 1);
  } else if (is_ident_start(c)) {
    while (is_ident_char(peek_byte(p, t.len))) t.len++;
    t.kind = TK_IDENT;
    skip_bytes(p, t.len);
  } else if (is_digit(c) || (c == '-' && is_digit(peek_byte(p, 1)))) {
    lex_number(p, &t);
  } else if (starts_minus_inf(p)) {
    t.kind = TK_FLOAT;
    t.len = 4;
    skip_bytes(p, 4);
  } else if (c == '%') {
    lex_value(p, &t);
  } else if (c == '"') {
    lex_string(p, &t);
  } else {
    lex_punct(p, &t, c);
  }
  if (!p->failed) p->tok = t;
}

/* Kind of the token after the current one, without consuming anything. */
static TokKind peek_next_kind(Parser *p) {
  size_t pos = p->pos;
  uint32_t line = p->line, col = p->col;
  Tok saved = p->tok;
  lex(p);
  TokKind kind = p->failed ? TK_ERROR : p->tok.kind;
  if (!p->failed) {
    p->tok = saved;
    p->pos = pos;
    p->line = line;
    p->col = col;
  }
  return kind;
}

/* ---- token helpers ------------------------------------------------------ */

static bool at_punct(const Parser *p, char c) {
  return p->tok.kind == TK_PUNCT && p->tok.punct == c;
}

static bool tok_is(const Tok *t, const char *word) {
  return t->kind == TK_IDENT && t->len == strlen(word) && memcmp(t->text, word, t->len) == 0;
}

static bool at_word(const Parser *p, const char *word) { return tok_is(&p->tok, word); }

static bool accept_punct(Parser *p, char c) {
  if (!at_punct(p, c)) return false;
  lex(p);
  return true;
}

static bool expect_punct(Parser *p, char c) {
  if (accept_punct(p, c)) return true;
  char what[] = {'\'', c, '\'', 0};
  fail_expected(p, what);
  return false;
}

static bool expect_word(Parser *p, const char *word) {
  if (at_word(p, word)) {
    lex(p);
    return true;
  }
  char what[PARSE_MAX_QUOTE];
  snprintf(what, sizeof what, "'%s'", word);
  fail_expected(p, what);
  return false;
}

/* End of an op line; end of input is accepted (the enclosing block then
 * reports the missing '}'). */
static void expect_newline(Parser *p) {
  if (p->tok.kind == TK_NEWLINE)
    lex(p);
  else if (p->tok.kind != TK_EOF)
    fail_expected(p, "end of line");
}

static void skip_newlines(Parser *p) {
  while (p->tok.kind == TK_NEWLINE) lex(p);
}

/* ---- numbers ------------------------------------------------------------ */

/* Magnitude and sign of an integer token; false on overflow of u64. */
static bool int_token(const Tok *t, bool *negative, uint64_t *magnitude) {
  size_t i = 0;
  *negative = t->len > 0 && t->text[0] == '-';
  if (*negative) i = 1;
  uint64_t v = 0;
  for (; i < t->len; i++) {
    uint64_t d = (uint64_t)(t->text[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *magnitude = v;
  return true;
}

/* Signed 64-bit value of an integer token. */
static bool int64_of(Parser *p, const Tok *t, int64_t *out) {
  bool neg;
  uint64_t mag;
  if (!int_token(t, &neg, &mag) || mag > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) {
    fail(p, t->loc, "integer out of range");
    return false;
  }
  if (neg && mag == (uint64_t)INT64_MAX + 1)
    *out = INT64_MIN;
  else
    *out = neg ? -(int64_t)mag : (int64_t)mag;
  return true;
}

static bool parse_int64(Parser *p, int64_t *out) {
  if (p->tok.kind != TK_INT) {
    fail_expected(p, "an integer");
    return false;
  }
  Tok t = p->tok;
  lex(p);
  return int64_of(p, &t, out);
}

/* An integer in [lo, hi]. */
static bool parse_int_in(Parser *p, int64_t lo, int64_t hi, int64_t *out) {
  SrcLoc loc = p->tok.loc;
  if (!parse_int64(p, out)) return false;
  if (*out < lo || *out > hi) {
    fail(p, loc, "integer out of range (%lld..%lld)", (long long)lo, (long long)hi);
    return false;
  }
  return true;
}

/* Value of a float token (or inf/nan identifier). */
static bool float_of(Parser *p, const Tok *t, double *out) {
  if (tok_is(t, "inf")) {
    *out = INFINITY;
  } else if (tok_is(t, "nan")) {
    *out = NAN;
  } else if (t->kind == TK_FLOAT && t->len == 4 && memcmp(t->text, "-inf", 4) == 0) {
    *out = -INFINITY;
  } else if (t->kind == TK_FLOAT) {
    char buf[PARSE_MAX_NUMBER_LEN + 1];
    if (t->len > PARSE_MAX_NUMBER_LEN) {
      fail(p, t->loc, "float constant too long");
      return false;
    }
    memcpy(buf, t->text, t->len);
    buf[t->len] = 0;
    *out = strtod(buf, NULL);
    if (isinf(*out)) {
      fail(p, t->loc, "float constant out of range");
      return false;
    }
  } else {
    return false;
  }
  return true;
}

/* Converts a literal token to a constant of element kind k: true/false for
 * i1, an integer for the other integer kinds (non-negative for unsigned
 * ones) and for pointers, a float literal for float kinds. */
static bool literal_value(Parser *p, const Tok *lit, ScalarKind k, int64_t *ival, double *fval) {
  char buf[PARSE_MAX_QUOTE + 8];
  if (k == SK_I1) {
    if (tok_is(lit, "true") || tok_is(lit, "false")) {
      *ival = tok_is(lit, "true");
      return true;
    }
    fail(p, lit->loc, "expected true or false for i1, found %s", describe(lit, buf, sizeof buf));
    return false;
  }
  if (scalar_is_float(k)) {
    if (float_of(p, lit, fval)) return true;
    fail(p, lit->loc, "expected a float constant (like 1.0) for %s, found %s", scalar_name(k),
         describe(lit, buf, sizeof buf));
    return false;
  }
  if (lit->kind != TK_INT) {
    fail(p, lit->loc, "expected an integer for %s, found %s", scalar_name(k),
         describe(lit, buf, sizeof buf));
    return false;
  }
  if (scalar_is_int(k) && !scalar_is_signed(k)) {
    bool neg;
    uint64_t mag;
    if (lit->text[0] == '-') {
      fail(p, lit->loc, "negative constant for unsigned type %s", scalar_name(k));
      return false;
    }
    if (!int_token(lit, &neg, &mag)) {
      fail(p, lit->loc, "integer out of range");
      return false;
    }
    *ival = (int64_t)mag;
    return true;
  }
  return int64_of(p, lit, ival);
}

/* ---- types -------------------------------------------------------------- */

static bool parse_scalar(Parser *p, ScalarKind *out) {
  if (p->tok.kind != TK_IDENT) {
    fail_expected(p, "a type");
    return false;
  }
  *out = scalar_from_name(p->tok.text, p->tok.len);
  if (*out == SK_VOID) {
    int n = p->tok.len > PARSE_MAX_QUOTE ? PARSE_MAX_QUOTE : (int)p->tok.len;
    fail(p, p->tok.loc, "unknown type '%.*s'", n, p->tok.text);
    return false;
  }
  lex(p);
  return true;
}

/* '[' d0, d1, ... ']' */
static bool parse_shape(Parser *p, TType *t) {
  int rank = 0;
  lex(p); /* '[' */
  do {
    SrcLoc loc = p->tok.loc;
    int64_t dim;
    if (!parse_int_in(p, 0, INT32_MAX, &dim)) return false;
    if (rank == TILE_MAX_RANK) {
      fail(p, loc, "too many dimensions (limit %d)", TILE_MAX_RANK);
      return false;
    }
    t->shape[rank++] = (int32_t)dim;
  } while (accept_punct(p, ','));
  t->rank = (uint8_t)rank;
  return expect_punct(p, ']');
}

/* scalar | '*' scalar | 'tensor' '<' scalar ',' rank '>', then an
 * optional shape. */
static bool parse_type(Parser *p, TType *out) {
  ScalarKind k;
  if (accept_punct(p, '*')) {
    if (!parse_scalar(p, &k)) return false;
    *out = type_ptr(k);
  } else if (at_word(p, "tensor")) {
    int64_t rank;
    lex(p);
    if (!expect_punct(p, '<') || !parse_scalar(p, &k) || !expect_punct(p, ',') ||
        !parse_int_in(p, 1, TILE_MAX_RANK, &rank) || !expect_punct(p, '>'))
      return false;
    *out = type_scalar(SK_DESC);
    out->pointee = (uint8_t)k;
    out->desc_rank = (uint8_t)rank;
  } else {
    if (!parse_scalar(p, &k)) return false;
    *out = type_scalar(k);
  }
  return at_punct(p, '[') ? parse_shape(p, out) : true;
}

/* type { ',' type } */
static void parse_type_list(Parser *p, TypeList *types) {
  do {
    TType t;
    if (!parse_type(p, &t)) return;
    LIST_PUSH(p, types, t);
  } while (accept_punct(p, ','));
}

/* Optional ' @line:col'. */
static SrcLoc parse_opt_loc(Parser *p) {
  SrcLoc loc = {0, 0, 0};
  int64_t line, col;
  if (!accept_punct(p, '@')) return loc;
  if (parse_int_in(p, 0, UINT32_MAX, &line) && expect_punct(p, ':') &&
      parse_int_in(p, 0, UINT32_MAX, &col))
    loc = (SrcLoc){(uint32_t)line, (uint32_t)col, 0};
  return loc;
}

/* ---- value table -------------------------------------------------------- */

static uint32_t slot_hash(uint32_t key, uint32_t nslots) {
  return (key * 2654435761u) & (nslots - 1);
}

/* The slot holding key, or the empty slot where it would go. */
static ValueSlot *find_slot(ValueSlot *slots, uint32_t nslots, uint32_t key) {
  uint32_t i = slot_hash(key, nslots);
  while (slots[i].used && slots[i].key != key) i = (i + 1) & (nslots - 1);
  return &slots[i];
}

static void grow_table(Parser *p) {
  uint32_t nslots = p->nslots * 2;
  ValueSlot *slots = ARENA_ARRAY(p->arena, ValueSlot, nslots);
  for (uint32_t i = 0; i < p->nslots; i++)
    if (p->slots[i].used) *find_slot(slots, nslots, p->slots[i].key) = p->slots[i];
  p->slots = slots;
  p->nslots = nslots;
}

static void reset_values(Parser *p) {
  p->nslots = PARSE_TABLE_INIT;
  p->slots = ARENA_ARRAY(p->arena, ValueSlot, p->nslots);
  p->nused = 0;
  p->nscope = 0;
  p->params = NULL;
  p->nparam_slots = 0;
}

/* FNV-1a of a name, for the parameter table. */
static size_t name_hash(const char *s, size_t len) {
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return (size_t)h;
}

/* The parameter slot of name, or the empty slot where it would go. */
static NamedValue *param_slot(const Parser *p, const char *name, size_t len) {
  size_t mask = p->nparam_slots - 1;
  for (size_t i = name_hash(name, len) & mask;; i = (i + 1) & mask) {
    NamedValue *s = &p->params[i];
    if (!s->name || (s->len == len && memcmp(s->name, name, len) == 0)) return s;
  }
}

static size_t scope_begin(const Parser *p) { return p->nscope; }

static void scope_end(Parser *p, size_t saved) {
  for (size_t i = saved; i < p->nscope; i++)
    find_slot(p->slots, p->nslots, p->scope_keys[i])->visible = false;
  p->nscope = saved;
}

static int quote_len(const Tok *t) { return t->len > PARSE_MAX_QUOTE ? PARSE_MAX_QUOTE : (int)t->len; }

/* Binds the %N token `name` to v in the current scope. */
static void define_value(Parser *p, const Tok *name, Value *v) {
  if (p->failed) return;
  if (2 * (p->nused + 1) > p->nslots) grow_table(p);
  ValueSlot *s = find_slot(p->slots, p->nslots, name->number);
  if (s->used) {
    fail(p, name->loc, "redefinition of value %.*s", quote_len(name), name->text);
    return;
  }
  *s = (ValueSlot){name->number, true, true, v};
  p->nused++;
  if (p->nscope == p->capscope) {
    size_t cap = p->capscope ? p->capscope * 2 : 64;
    p->scope_keys = arena_grow(p->arena, p->scope_keys, sizeof(uint32_t), p->capscope, cap);
    p->capscope = cap;
  }
  p->scope_keys[p->nscope++] = name->number;
}

static Value *lookup_value(const Parser *p, const Tok *t) {
  if (t->numbered) {
    ValueSlot *s = find_slot(p->slots, p->nslots, t->number);
    return s->used && s->visible ? s->value : NULL;
  }
  if (!p->nparam_slots) return NULL;
  const NamedValue *s = param_slot(p, t->text + 1, t->len - 1);
  return s->name ? s->value : NULL;
}

/* A use of a defined value. */
static Value *parse_operand(Parser *p) {
  if (p->tok.kind != TK_VALUE) {
    fail_expected(p, "a value");
    return NULL;
  }
  Value *v = lookup_value(p, &p->tok);
  if (!v) {
    fail(p, p->tok.loc, "undefined value %.*s", quote_len(&p->tok), p->tok.text);
    return NULL;
  }
  lex(p);
  return v;
}

/* A %N being defined (results and block arguments). */
static bool parse_def_name(Parser *p, TokList *names) {
  if (p->tok.kind != TK_VALUE) {
    fail_expected(p, "a value name");
    return false;
  }
  if (!p->tok.numbered) {
    fail(p, p->tok.loc, "only kernel parameters are named; values are numbered (%%0, %%1, ...)");
    return false;
  }
  LIST_PUSH(p, names, p->tok);
  lex(p);
  return true;
}

/* %a = init { ',' %b = init } (possibly empty when `allow_empty`). */
static void parse_init_pairs(Parser *p, TokList *names, ValueList *inits, char close) {
  if (at_punct(p, close)) return;
  do {
    if (!parse_def_name(p, names) || !expect_punct(p, '=')) return;
    Value *v = parse_operand(p);
    if (!v) return;
    LIST_PUSH(p, inits, v);
  } while (accept_punct(p, ','));
}

/* ---- attributes ----------------------------------------------------------- */

/* Index of attribute `name` of op kind (or -1); *count gets the number of
 * attributes the op has. */
static int attr_index(OpKind kind, const char *name, size_t len, int *count) {
  const char *s = op_info[kind].attrs;
  int found = -1, i = 0;
  while (*s) {
    const char *comma = strchr(s, ',');
    size_t n = comma ? (size_t)(comma - s) : strlen(s);
    if (name && n == len && memcmp(s, name, n) == 0) found = i;
    i++;
    s += n + (comma ? 1 : 0);
  }
  *count = i;
  return found;
}

/* Name of attribute i of op kind, copied into buf. */
static const char *attr_name(OpKind kind, int i, char *buf, size_t size) {
  const char *s = op_info[kind].attrs;
  for (; i > 0 && s; i--) {
    s = strchr(s, ',');
    if (s) s++;
  }
  const char *comma = s ? strchr(s, ',') : NULL;
  int n = s ? (comma ? (int)(comma - s) : (int)strlen(s)) : 0;
  snprintf(buf, size, "%.*s", n, s ? s : "");
  return buf;
}

/* trans's perm: '[' entries ']', one per operand dimension, packed. */
static bool parse_perm(Parser *p, int operand_rank, int64_t *out) {
  SrcLoc loc = p->tok.loc;
  int n = 0;
  uint64_t packed = 0;
  if (!expect_punct(p, '[')) return false;
  if (!at_punct(p, ']')) {
    do {
      int64_t v;
      if (!parse_int_in(p, 0, PARSE_PERM_MAX, &v)) return false;
      if (n == TILE_MAX_RANK) {
        fail(p, loc, "perm has more than %d entries", TILE_MAX_RANK);
        return false;
      }
      packed |= (uint64_t)v << (PARSE_PERM_BITS * n++);
    } while (accept_punct(p, ','));
  }
  if (!expect_punct(p, ']')) return false;
  if (n != operand_rank) {
    fail(p, loc, "perm has %d entries for an operand of rank %d", n, operand_rank);
    return false;
  }
  *out = (int64_t)packed;
  return true;
}

/* Optional '{' name = value, ... '}' in table order; ops without
 * OPF_OPTATTR must give every attribute. */
static void parse_attrs(Parser *p, OpKind kind, const Tok *opname, int operand_rank,
                        int64_t attrs[IR_MAX_ATTRS]) {
  int count, last = -1;
  attr_index(kind, NULL, 0, &count);
  bool given[IR_MAX_ATTRS] = {false};
  if (accept_punct(p, '{')) {
    do {
      Tok name = p->tok;
      if (name.kind != TK_IDENT) {
        fail_expected(p, "an attribute name");
        return;
      }
      int dummy, i = attr_index(kind, name.text, name.len, &dummy);
      if (i < 0) {
        fail(p, name.loc, "unknown attribute '%.*s' for %s", quote_len(&name), name.text,
             op_info[kind].name);
        return;
      }
      if (i <= last) {
        fail(p, name.loc, "attribute '%.*s' repeated or out of order", quote_len(&name), name.text);
        return;
      }
      lex(p);
      if (!expect_punct(p, '=')) return;
      bool ok = kind == OP_TRANS ? parse_perm(p, operand_rank, &attrs[i]) : parse_int64(p, &attrs[i]);
      if (!ok) return;
      given[i] = true;
      last = i;
    } while (accept_punct(p, ','));
    if (!expect_punct(p, '}')) return;
  }
  for (int i = 0; i < count && i < IR_MAX_ATTRS; i++)
    if (!given[i] && !(op_info[kind].flags & OPF_OPTATTR)) {
      char buf[PARSE_MAX_QUOTE];
      fail(p, opname->loc, "missing attribute '%s' for %s", attr_name(kind, i, buf, sizeof buf),
           op_info[kind].name);
      return;
    }
}

/* ---- ops ---------------------------------------------------------------- */

static void parse_block_ops(Parser *p, Block *b);

static void copy_values(Value **to, Value *const *from, size_t n) {
  for (size_t i = 0; i < n; i++) to[i] = from[i];
}

static void define_results(Parser *p, const TokList *names, Op *op) {
  for (size_t i = 0; i < names->n && i < op->nresults; i++)
    define_value(p, &names->items[i], &op->results[i]);
}

/* '{' newline ops '}' with the region's arguments bound to arg_names. */
static void parse_region(Parser *p, Block *region, const TokList *arg_names) {
  if (p->depth > PARSE_MAX_DEPTH) { /* the kernel body is depth 0 */
    fail(p, p->tok.loc, "regions nested too deeply (limit %d)", PARSE_MAX_DEPTH);
    return;
  }
  if (!expect_punct(p, '{')) return;
  if (p->tok.kind != TK_NEWLINE) {
    fail_expected(p, "end of line");
    return;
  }
  p->depth++;
  size_t scope = scope_begin(p);
  for (size_t i = 0; arg_names && i < arg_names->n && i < region->nargs; i++)
    define_value(p, &arg_names->items[i], &region->args[i]);
  parse_block_ops(p, region);
  scope_end(p, scope);
  p->depth--;
  expect_punct(p, '}');
}

static void check_result_count(Parser *p, const Tok *opname, OpKind kind, size_t nresults) {
  int want = op_info[kind].nresults;
  if (want >= 0 && nresults != (size_t)want)
    fail(p, opname->loc, "%s expects %d result%s, got %zu", op_info[kind].name, want,
         want == 1 ? "" : "s", nresults);
}

static void check_operand_count(Parser *p, const Tok *opname, OpKind kind, size_t noperands) {
  int want = op_info[kind].noperands;
  if (want >= 0 && noperands != (size_t)want)
    fail(p, opname->loc, "%s expects %d operand%s, got %zu", op_info[kind].name, want,
         want == 1 ? "" : "s", noperands);
}

/* name %a, %b {attrs} : types @L:C */
static void parse_generic(Parser *p, Block *b, const TokList *results, const Tok *opname,
                          OpKind kind) {
  ValueList ops = {0};
  if (p->tok.kind == TK_VALUE) {
    do {
      Value *v = parse_operand(p);
      if (!v) return;
      LIST_PUSH(p, &ops, v);
    } while (accept_punct(p, ','));
  }
  check_operand_count(p, opname, kind, ops.n);
  const char *text = NULL;
  if (p->tok.kind == TK_STRING && !p->failed) {
    text = arena_strndup(p->arena, p->tok.text, p->tok.len);
    lex(p);
  }
  int64_t attrs[IR_MAX_ATTRS] = {0};
  parse_attrs(p, kind, opname, ops.n ? ops.items[0]->type.rank : 0, attrs);
  TypeList types = {0};
  if (results->n && !p->failed) {
    SrcLoc loc = p->tok.loc;
    if (!expect_punct(p, ':')) return;
    parse_type_list(p, &types);
    if (!p->failed && types.n != results->n)
      fail(p, loc, "%s has %zu result%s but %zu type%s", op_info[kind].name, results->n,
           results->n == 1 ? "" : "s", types.n, types.n == 1 ? "" : "s");
  }
  SrcLoc loc = parse_opt_loc(p);
  expect_newline(p);
  if (p->failed) return;
  Op *op = ir_op_new(p->arena, kind, (int)ops.n, (int)results->n, types.items, 0, loc);
  copy_values(op->operands, ops.items, ops.n);
  memcpy(op->attr, attrs, sizeof attrs);
  op->text = text;
  define_results(p, results, op);
  ir_append(b, op);
}

/* const VALUE : type @L:C */
static void parse_const(Parser *p, Block *b, const TokList *results) {
  Tok lit = p->tok;
  if (lit.kind != TK_INT && lit.kind != TK_FLOAT && lit.kind != TK_IDENT) {
    fail_expected(p, "a constant value");
    return;
  }
  lex(p);
  TType t;
  if (!expect_punct(p, ':') || !parse_type(p, &t)) return;
  SrcLoc loc = parse_opt_loc(p);
  expect_newline(p);
  Op *op = ir_op_new(p->arena, OP_CONST, 0, 1, &t, 0, loc);
  if (p->failed || !literal_value(p, &lit, t.kind, &op->attr[0], &op->fattr)) return;
  define_results(p, results, op);
  ir_append(b, op);
}

/* for %iv = lo to hi step st iter(%a = x, ...) {attrs} @L:C { ... } */
static void parse_for(Parser *p, Block *b, const TokList *results, const Tok *opname) {
  TokList names = {0};
  ValueList ops = {0};
  if (!parse_def_name(p, &names) || !expect_punct(p, '=')) return;
  static const char *const bounds_words[] = {NULL, "to", "step"};
  for (int i = 0; i < 3; i++) {
    if (bounds_words[i] && !expect_word(p, bounds_words[i])) return;
    Value *v = parse_operand(p);
    if (!v) return;
    LIST_PUSH(p, &ops, v);
  }
  if (at_word(p, "iter")) {
    lex(p);
    if (!expect_punct(p, '(')) return;
    parse_init_pairs(p, &names, &ops, ')');
    if (!expect_punct(p, ')')) return;
  }
  size_t niters = ops.n - 3;
  if (!p->failed && results->n != niters)
    fail(p, opname->loc, "for has %zu result%s but %zu iter value%s", results->n,
         results->n == 1 ? "" : "s", niters, niters == 1 ? "" : "s");
  int64_t attrs[IR_MAX_ATTRS] = {0};
  if (at_punct(p, '{') && peek_next_kind(p) == TK_IDENT) parse_attrs(p, OP_FOR, opname, 0, attrs);
  SrcLoc loc = parse_opt_loc(p);
  if (p->failed) return;
  TType *types = ARENA_ARRAY(p->arena, TType, ops.n);
  for (size_t i = 0; i < ops.n; i++) types[i] = ops.items[i]->type;
  Op *op = ir_op_new(p->arena, OP_FOR, (int)ops.n, (int)niters, types + 3, 1, loc);
  copy_values(op->operands, ops.items, ops.n);
  memcpy(op->attr, attrs, sizeof attrs);
  types[2] = types[0]; /* region arguments: iv (type of lo), then the iters */
  ir_block_set_args(p->arena, &op->regions[0], (int)niters + 1, types + 2);
  parse_region(p, &op->regions[0], &names);
  define_results(p, results, op);
  expect_newline(p);
  ir_append(b, op);
}

/* if %c -> types @L:C { ... } else { ... } */
static void parse_if(Parser *p, Block *b, const TokList *results, const Tok *opname) {
  Value *cond = parse_operand(p);
  TypeList types = {0};
  if (!cond) return;
  if (p->tok.kind == TK_ARROW) {
    lex(p);
    parse_type_list(p, &types);
  }
  if (!p->failed && types.n != results->n)
    fail(p, opname->loc, "if has %zu result%s but %zu result type%s", results->n,
         results->n == 1 ? "" : "s", types.n, types.n == 1 ? "" : "s");
  SrcLoc loc = parse_opt_loc(p);
  if (p->failed) return;
  Op *op = ir_op_new(p->arena, OP_IF, 1, (int)types.n, types.items, 2, loc);
  op->operands[0] = cond;
  parse_region(p, &op->regions[0], NULL);
  if (!expect_word(p, "else")) return;
  parse_region(p, &op->regions[1], NULL);
  define_results(p, results, op);
  expect_newline(p);
  ir_append(b, op);
}

/* while (%a = x, ...) @L:C { ... } do (%b, ...) { ... } */
static void parse_while(Parser *p, Block *b, const TokList *results, const Tok *opname) {
  TokList before_names = {0}, after_names = {0};
  ValueList inits = {0};
  if (!expect_punct(p, '(')) return;
  parse_init_pairs(p, &before_names, &inits, ')');
  if (!expect_punct(p, ')')) return;
  if (results->n != inits.n)
    fail(p, opname->loc, "while has %zu result%s but %zu initial value%s", results->n,
         results->n == 1 ? "" : "s", inits.n, inits.n == 1 ? "" : "s");
  SrcLoc loc = parse_opt_loc(p);
  if (p->failed) return;
  TType *types = ARENA_ARRAY(p->arena, TType, inits.n + 1);
  for (size_t i = 0; i < inits.n; i++) types[i] = inits.items[i]->type;
  Op *op = ir_op_new(p->arena, OP_WHILE, (int)inits.n, (int)inits.n, types, 2, loc);
  copy_values(op->operands, inits.items, inits.n);
  for (int r = 0; r < 2; r++) ir_block_set_args(p->arena, &op->regions[r], (int)inits.n, types);
  parse_region(p, &op->regions[0], &before_names);
  SrcLoc do_loc = p->tok.loc;
  if (!expect_word(p, "do")) return;
  if (!expect_punct(p, '(')) return;
  if (!at_punct(p, ')')) {
    do {
      if (!parse_def_name(p, &after_names)) return;
    } while (accept_punct(p, ','));
  }
  if (!expect_punct(p, ')')) return;
  if (after_names.n != inits.n)
    fail(p, do_loc, "while 'do' region has %zu argument%s, expected %zu", after_names.n,
         after_names.n == 1 ? "" : "s", inits.n);
  parse_region(p, &op->regions[1], &after_names);
  define_results(p, results, op);
  expect_newline(p);
  ir_append(b, op);
}

static bool lookup_op(const Tok *t, OpKind *out) {
  for (int k = 0; k < OP_COUNT; k++)
    if (strlen(op_info[k].name) == t->len && memcmp(op_info[k].name, t->text, t->len) == 0) {
      *out = (OpKind)k;
      return true;
    }
  return false;
}

/* One op line: [results '='] name rest. */
static void parse_op(Parser *p, Block *b) {
  TokList results = {0};
  if (p->tok.kind == TK_VALUE) {
    do {
      if (!parse_def_name(p, &results)) return;
    } while (accept_punct(p, ','));
    if (!expect_punct(p, '=')) return;
  }
  Tok name = p->tok;
  OpKind kind;
  if (name.kind != TK_IDENT) {
    fail_expected(p, "an op");
    return;
  }
  if (!lookup_op(&name, &kind)) {
    fail(p, name.loc, "unknown op '%.*s'", quote_len(&name), name.text);
    return;
  }
  lex(p);
  check_result_count(p, &name, kind, results.n);
  switch (kind) {
  case OP_CONST: parse_const(p, b, &results); break;
  case OP_FOR: parse_for(p, b, &results, &name); break;
  case OP_IF: parse_if(p, b, &results, &name); break;
  case OP_WHILE: parse_while(p, b, &results, &name); break;
  default: parse_generic(p, b, &results, &name, kind); break;
  }
}

/* Op lines up to (not including) the closing '}'; the block must end with
 * a terminator. */
static void parse_block_ops(Parser *p, Block *b) {
  for (;;) {
    skip_newlines(p);
    if (p->failed) return;
    if (at_punct(p, '}')) break;
    if (p->tok.kind == TK_EOF) {
      fail(p, p->tok.loc, "unexpected end of input (missing '}')");
      return;
    }
    parse_op(p, b);
  }
  if (!b->last || !(op_info[b->last->kind].flags & OPF_TERM))
    fail(p, p->tok.loc, "block does not end with a terminator (yield or return)");
}

/* ---- kernels and modules ------------------------------------------------ */

typedef struct ParamList {
  ParamInfo *items;
  size_t n, cap;
} ParamList;
typedef struct ConstList {
  ConstInfo *items;
  size_t n, cap;
} ConstList;

/* %name: type [align(N)] [multiple_of(N)] */
static void parse_param(Parser *p, TokList *names, TypeList *types, ParamList *infos) {
  ParamInfo info = {0};
  TType t;
  if (p->tok.kind != TK_VALUE) {
    fail_expected(p, "a parameter name");
    return;
  }
  if (p->tok.numbered) {
    fail(p, p->tok.loc, "parameter names must be identifiers (like %%x)");
    return;
  }
  LIST_PUSH(p, names, p->tok);
  info.name = arena_strndup(p->arena, p->tok.text + 1, p->tok.len - 1);
  lex(p);
  if (!expect_punct(p, ':') || !parse_type(p, &t)) return;
  if (at_word(p, "align")) {
    lex(p);
    if (!expect_punct(p, '(') || !parse_int64(p, &info.align) || !expect_punct(p, ')')) return;
  }
  if (at_word(p, "multiple_of")) {
    lex(p);
    if (!expect_punct(p, '(') || !parse_int64(p, &info.multiple_of) || !expect_punct(p, ')'))
      return;
  }
  LIST_PUSH(p, types, t);
  LIST_PUSH(p, infos, info);
}

/* NAME: type = value, or NAME: type = scalar-type-name */
static void parse_const_info(Parser *p, ConstList *consts) {
  ConstInfo c;
  memset(&c, 0, sizeof c);
  if (p->tok.kind != TK_IDENT) {
    fail_expected(p, "a const parameter name");
    return;
  }
  c.name = arena_strndup(p->arena, p->tok.text, p->tok.len);
  lex(p);
  if (!expect_punct(p, ':')) return;
  if (at_word(p, "type")) {
    ScalarKind k;
    lex(p);
    if (!expect_punct(p, '=') || !parse_scalar(p, &k)) return;
    c.type = type_scalar(SK_TYPE);
    c.tval = (uint8_t)k;
  } else {
    if (!parse_type(p, &c.type) || !expect_punct(p, '=')) return;
    Tok lit = p->tok;
    lex(p);
    if (!literal_value(p, &lit, c.type.kind, &c.ival, &c.fval)) return;
  }
  LIST_PUSH(p, consts, c);
}

/* '(' [item {',' item}] ')' calling parse_item for each. */
#define PARSE_PAREN_LIST(p, item_call)            \
  do {                                            \
    if (!expect_punct((p), '(')) break;           \
    if (!at_punct((p), ')')) {                    \
      do {                                        \
        item_call;                                \
      } while (!(p)->failed && accept_punct((p), ',')); \
    }                                             \
    expect_punct((p), ')');                       \
  } while (0)

static void parse_warp_spec(Parser *p, WarpSpec *ws) {
  int64_t v[PARSE_WARP_SPEC_FIELDS] = {0};
  if (!expect_punct(p, '(')) return;
  for (int i = 0; i < PARSE_WARP_SPEC_FIELDS; i++)
    if ((i && !expect_punct(p, ',')) || !parse_int_in(p, INT32_MIN, INT32_MAX, &v[i])) return;
  if (!expect_punct(p, ')')) return;
  *ws = (WarpSpec){(int)v[0], (int)v[1], (int)v[2], (int)v[3]};
}

/* kernel @name(params) [consts(...)] [warps(N)] [cluster(N)] [warp_specialize(...)]
 * [@L:C] { ops } */
static void parse_kernel(Parser *p, Module *m) {
  TokList names = {0};
  TypeList types = {0};
  ParamList infos = {0};
  ConstList consts = {0};
  int64_t warps = 0, cluster = 1;
  WarpSpec ws = {0, 0, 0, 0};
  lex(p); /* 'kernel' */
  if (!expect_punct(p, '@')) return;
  if (p->tok.kind != TK_IDENT) {
    fail_expected(p, "a kernel name");
    return;
  }
  char *name = arena_strndup(p->arena, p->tok.text, p->tok.len);
  lex(p);
  PARSE_PAREN_LIST(p, parse_param(p, &names, &types, &infos));
  if (at_word(p, "consts")) {
    lex(p);
    PARSE_PAREN_LIST(p, parse_const_info(p, &consts));
  }
  if (at_word(p, "warps")) {
    lex(p);
    if (!expect_punct(p, '(') || !parse_int_in(p, 0, INT32_MAX, &warps) || !expect_punct(p, ')'))
      return;
  }
  if (at_word(p, "cluster")) {
    lex(p);
    if (!expect_punct(p, '(') || !parse_int_in(p, 1, TILE_MAX_CLUSTER, &cluster) || !expect_punct(p, ')')) return;
  }
  if (at_word(p, "warp_specialize")) {
    lex(p);
    parse_warp_spec(p, &ws);
  }
  SrcLoc loc = parse_opt_loc(p);
  if (p->failed) return;
  Func *f = ir_func_new(m, name, (int)types.n, types.items, loc);
  if (infos.n) memcpy(f->params, infos.items, infos.n * sizeof *infos.items);
  f->consts = consts.items;
  f->nconsts = (int)consts.n;
  f->warps = (int)warps;
  f->cluster = (int)cluster;
  f->ws = ws;
  reset_values(p);
  p->nparam_slots = PARSE_TABLE_INIT;
  while (p->nparam_slots < 2 * names.n) p->nparam_slots *= 2;
  p->params = ARENA_ARRAY(p->arena, NamedValue, p->nparam_slots);
  for (size_t i = 0; i < names.n; i++) {
    const Tok *t = &names.items[i];
    if (lookup_value(p, t)) {
      fail(p, t->loc, "redefinition of value %.*s", quote_len(t), t->text);
      return;
    }
    *param_slot(p, t->text + 1, t->len - 1) = (NamedValue){t->text + 1, t->len - 1, &f->body.args[i]};
  }
  parse_region(p, &f->body, NULL);
  if (!p->failed && p->tok.kind != TK_EOF) expect_newline(p);
}

static void parse_module_header(Parser *p, Module **m) {
  skip_newlines(p);
  if (!expect_word(p, "module")) return;
  if (p->tok.kind != TK_STRING) {
    fail_expected(p, "a module name string");
    return;
  }
  *m = ir_module_new(p->arena, p->tok.text);
  lex(p);
  expect_newline(p);
}

Module *ir_parse(Arena *arena, const Source *src, Diags *diags) {
  Parser p;
  memset(&p, 0, sizeof p);
  Source text = *src;
  if (!text.text) text.text = "", text.len = 0;
  p.arena = arena;
  p.src = &text;
  p.diags = diags;
  p.line = p.col = 1;
  Module *m = NULL;
  reset_values(&p);
  if (text.len > SOURCE_MAX_BYTES) {
    fail(&p, (SrcLoc){0, 0, 0}, "input is larger than %zu MiB", SOURCE_MAX_BYTES >> 20);
    return NULL;
  }
  lex(&p);
  parse_module_header(&p, &m);
  while (!p.failed) {
    skip_newlines(&p);
    if (p.tok.kind == TK_EOF) break;
    if (!at_word(&p, "kernel")) {
      fail_expected(&p, "'kernel' or end of input");
      break;
    }
    parse_kernel(&p, m);
  }
  return p.failed ? NULL : m;
}
