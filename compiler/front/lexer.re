/* lexer.re - the tile language lexer (re2c source; meson generates lexer.c).
 *
 * The whole source is lexed into a token array. The scanner works on a copy
 * of the text followed by one NUL sentinel (re2c's "eof rule" scheme), so a
 * NUL byte inside the text is told apart from the end and reported.
 * Comments and string literals are scanned by hand because they must be
 * checked for valid UTF-8; everywhere else only ASCII is allowed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "token.h"

typedef struct Lexer {
  const Source *src;
  Arena *arena;
  Diags *diags;
  const unsigned char *buf;  /* text + NUL sentinel */
  const unsigned char *lim;  /* the sentinel */
  const unsigned char *line_start;
  uint32_t line;
  Token *tokens;
  int count, cap;
  bool full;     /* LEX_MAX_TOKENS reached (and reported): stop */
  Token discard; /* what push returns once full */
} Lexer;

static SrcLoc loc_at(const Lexer *lx, const unsigned char *p) {
  return (SrcLoc){lx->line, (uint32_t)(p - lx->line_start) + 1, lx->src->file};
}

static Token *push(Lexer *lx, TokKind kind, const unsigned char *start, const unsigned char *end) {
  Token *t;
  if (kind != TOK_EOF && lx->count == LEX_MAX_TOKENS) {
    if (!lx->full) diag_error(lx->diags, loc_at(lx, start), "the file has more than %d tokens", LEX_MAX_TOKENS);
    lx->full = true;
    t = &lx->discard; /* filled like a real one for whoever reports on it */
  } else {
    if (lx->count == lx->cap) {
      int cap = lx->cap ? lx->cap * 2 : 1024;
      lx->tokens = arena_grow(lx->arena, lx->tokens, sizeof(Token), (size_t)lx->cap, (size_t)cap);
      lx->cap = cap;
    }
    t = &lx->tokens[lx->count++];
  }
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->loc = loc_at(lx, start);
  t->start = lx->src->text + (start - lx->buf);
  t->len = (uint32_t)(end - start);
  return t;
}

/* Length of a valid UTF-8 sequence at p (1..4), 0 if the bytes are not
 * valid UTF-8 (overlong forms, surrogates and values above U+10FFFF are
 * invalid too). *cp receives the code point. */
static int utf8_decode(const unsigned char *p, const unsigned char *lim, uint32_t *cp) {
  unsigned c = p[0];
  int n;
  uint32_t v, min;
  if (c < 0x80) { *cp = c; return 1; }
  if ((c & 0xE0) == 0xC0) { n = 2; v = c & 0x1F; min = 0x80; }
  else if ((c & 0xF0) == 0xE0) { n = 3; v = c & 0x0F; min = 0x800; }
  else if ((c & 0xF8) == 0xF0) { n = 4; v = c & 0x07; min = 0x10000; }
  else return 0;
  if (lim - p < n) return 0;
  for (int i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (p[i] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

/* Checks the byte at p inside a comment or string: returns how many bytes to
 * skip, reporting NUL and invalid UTF-8 (then skipping one byte). */
static int check_text_byte(Lexer *lx, const unsigned char *p) {
  uint32_t cp;
  if (*p == 0) {
    diag_error(lx->diags, loc_at(lx, p), "NUL byte in source");
    return 1;
  }
  int n = utf8_decode(p, lx->lim, &cp);
  if (n == 0) {
    diag_error(lx->diags, loc_at(lx, p), "invalid UTF-8 byte 0x%02x", *p);
    return 1;
  }
  return n;
}

/* Skips a block comment starting at p (slash, star); returns its end. */
static const unsigned char *skip_block_comment(Lexer *lx, const unsigned char *p) {
  const unsigned char *open = p;
  SrcLoc open_loc = loc_at(lx, open);
  p += 2;
  while (p < lx->lim) {
    if (p[0] == '*' && p + 1 < lx->lim && p[1] == '/') return p + 2;
    if (*p == '\n') {
      lx->line++;
      lx->line_start = ++p;
      continue;
    }
    p += check_text_byte(lx, p);
  }
  diag_error(lx->diags, open_loc, "unterminated comment");
  return p;
}

static const unsigned char *skip_line_comment(Lexer *lx, const unsigned char *p) {
  while (p < lx->lim && *p != '\n') p += check_text_byte(lx, p);
  return p;
}

/* Scans a string literal starting at the opening quote; decodes escapes. */
static const unsigned char *lex_string(Lexer *lx, const unsigned char *p) {
  const unsigned char *start = p++;
  StrBuf sb;
  sb_init(&sb);
  bool closed = false;
  while (p < lx->lim && *p != '\n') {
    if (*p == '"') {
      closed = true;
      p++;
      break;
    }
    if (*p == '\\') {
      char c = p + 1 < lx->lim ? (char)p[1] : 0;
      char out = c == 'n' ? '\n' : c == 't' ? '\t' : c == '\\' ? '\\' : c == '"' ? '"' : 0;
      if (!out) {
        diag_error(lx->diags, loc_at(lx, p), "unknown escape sequence in string literal");
        p++;
        continue;
      }
      sb_putc(&sb, out);
      p += 2;
      continue;
    }
    int n = check_text_byte(lx, p);
    sb_putn(&sb, (const char *)p, (size_t)n);
    p += n;
  }
  Token *t = push(lx, TOK_STRING, start, p);
  t->sval = arena_strndup(lx->arena, sb.data ? sb.data : "", sb.len);
  sb_free(&sb);
  if (!closed) diag_error(lx->diags, t->loc, "unterminated string literal");
  return p;
}

static bool is_digit_of(unsigned char c, int base) {
  if (base == 16) return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
  if (base == 2) return c == '0' || c == '1';
  return c >= '0' && c <= '9';
}

/* Copies the literal without '_' separators; a separator must stand between
 * two digits of the literal's base (not next to a 0x/0b prefix, a '.', or an
 * exponent). `prefix` is 2 for 0x/0b literals, else 0. */
static bool strip_separators(const unsigned char *s, const unsigned char *e, int base, int prefix, char *out,
                             size_t cap) {
  size_t n = 0;
  for (const unsigned char *p = s; p < e; p++) {
    if (*p == '_') {
      bool before = p - s > prefix && is_digit_of(p[-1], base);
      bool after = p + 1 < e && is_digit_of(p[1], base);
      if (!before || !after) return false;
      continue;
    }
    if (n + 1 >= cap) return false;
    out[n++] = (char)*p;
  }
  out[n] = 0;
  return true;
}

static void lex_int(Lexer *lx, const unsigned char *s, const unsigned char *e, int base) {
  Token *t = push(lx, TOK_INT, s, e);
  size_t cap = (size_t)(e - s) + 1;
  char *digits = arena_alloc(lx->arena, cap);
  if (!strip_separators(s, e, base, base == 10 ? 0 : 2, digits, cap)) {
    diag_error(lx->diags, t->loc, "invalid integer literal '%.*s%s'", (int)(e - s > 40 ? 40 : e - s), (const char *)s,
               e - s > 40 ? "..." : "");
    t->kind = TOK_ERROR;
    return;
  }
  const char *d = base == 10 ? digits : digits + 2;
  uint64_t v = 0;
  for (; *d; d++) {
    unsigned dv = *d <= '9' ? (unsigned)(*d - '0') : (unsigned)((*d | 0x20) - 'a' + 10);
    if (v > (UINT64_MAX - dv) / (uint64_t)base) {
      diag_error(lx->diags, t->loc, "integer literal is too large (maximum is 18446744073709551615)");
      t->kind = TOK_ERROR;
      return;
    }
    v = v * (uint64_t)base + dv;
  }
  t->ival = v;
}

static void lex_float(Lexer *lx, const unsigned char *s, const unsigned char *e) {
  Token *t = push(lx, TOK_FLOAT, s, e);
  size_t cap = (size_t)(e - s) + 1;
  char *digits = arena_alloc(lx->arena, cap);
  if (!strip_separators(s, e, 10, 0, digits, cap)) {
    diag_error(lx->diags, t->loc, "invalid float literal '%.*s%s'", (int)(e - s > 40 ? 40 : e - s), (const char *)s,
               e - s > 40 ? "..." : "");
    t->kind = TOK_ERROR;
    return;
  }
  errno = 0;
  double v = strtod(digits, NULL);
  if (errno == ERANGE && (v > 1.0 || v < -1.0)) {
    diag_error(lx->diags, t->loc, "float literal is out of range");
    t->kind = TOK_ERROR;
    return;
  }
  t->fval = v;
}

static void lex_bad_char(Lexer *lx, const unsigned char *p) {
  uint32_t cp;
  int n = utf8_decode(p, lx->lim, &cp);
  Token *t = push(lx, TOK_ERROR, p, p + (n ? n : 1));
  if (*p == 0)
    diag_error(lx->diags, t->loc, "NUL byte in source");
  else if (n == 0)
    diag_error(lx->diags, t->loc, "invalid UTF-8 byte 0x%02x", *p);
  else if (cp < 0x7f && cp >= 0x20)
    diag_error(lx->diags, t->loc, "unexpected character '%c'", (char)cp);
  else if (cp < 0x80)
    diag_error(lx->diags, t->loc, "unexpected control character 0x%02x", cp);
  else
    diag_error(lx->diags, t->loc, "unexpected character U+%04X '%.*s' (only ASCII is allowed outside comments and strings)",
               cp, n, (const char *)p);
}

/* Scans buf, which holds src's text followed by a NUL. */
static TokenList lex_buffer(const Source *src, const unsigned char *buf, Arena *arena, Diags *diags) {
  Lexer lx = {0};
  lx.src = src;
  lx.arena = arena;
  lx.diags = diags;
  lx.buf = buf;
  lx.lim = lx.buf + src->len;
  lx.line_start = lx.buf;
  lx.line = 1;

  const unsigned char *cur = lx.buf, *mar = lx.buf, *tok;
  const unsigned char *lim = lx.lim;
  for (;;) {
    if (diags_full(diags) || lx.full) {
      push(&lx, TOK_EOF, lim, lim);
      break;
    }
    tok = cur;
    TokKind k;
    /*!re2c
      re2c:define:YYCTYPE = "unsigned char";
      re2c:define:YYCURSOR = cur;
      re2c:define:YYMARKER = mar;
      re2c:define:YYLIMIT = lim;
      re2c:yyfill:enable = 0;
      re2c:eof = 0;

      dec  = [0-9][0-9_]*;
      hex  = "0" [xX] [0-9a-fA-F_]+;
      bin  = "0" [bB] [01_]+;
      expo = [eE] [+-]? [0-9]+;
      flt  = dec "." [0-9_]* expo? | dec expo;
      bad  = [0-9] [0-9a-zA-Z_]* ("." [0-9a-zA-Z_]*)?;
      id   = [a-zA-Z_][a-zA-Z_0-9]*;

      $ { push(&lx, TOK_EOF, tok, tok); break; }
      [ \t\r\v\f]+ { continue; }
      "\n" { lx.line++; lx.line_start = cur; continue; }
      "//" { cur = skip_line_comment(&lx, cur); continue; }
      "/*" { cur = skip_block_comment(&lx, tok); continue; }
      ["] { cur = lex_string(&lx, tok); continue; }

      hex { lex_int(&lx, tok, cur, 16); continue; }
      bin { lex_int(&lx, tok, cur, 2); continue; }
      dec { lex_int(&lx, tok, cur, 10); continue; }
      flt { lex_float(&lx, tok, cur); continue; }
      bad {
        Token *t = push(&lx, TOK_ERROR, tok, cur);
        diag_error(diags, t->loc, "invalid numeric literal '%.*s'", (int)(cur - tok), (const char *)tok);
        continue;
      }

      "kernel" { k = TOK_KW_KERNEL; goto simple; }
      "fn"     { k = TOK_KW_FN; goto simple; }
      "let"    { k = TOK_KW_LET; goto simple; }
      "var"    { k = TOK_KW_VAR; goto simple; }
      "const"  { k = TOK_KW_CONST; goto simple; }
      "if"     { k = TOK_KW_IF; goto simple; }
      "else"   { k = TOK_KW_ELSE; goto simple; }
      "for"    { k = TOK_KW_FOR; goto simple; }
      "in"     { k = TOK_KW_IN; goto simple; }
      "while"  { k = TOK_KW_WHILE; goto simple; }
      "return" { k = TOK_KW_RETURN; goto simple; }
      "true"   { k = TOK_KW_TRUE; goto simple; }
      "false"  { k = TOK_KW_FALSE; goto simple; }
      "as"     { k = TOK_KW_AS; goto simple; }
      "None"   { k = TOK_KW_NONE; goto simple; }
      "import" { k = TOK_KW_IMPORT; goto simple; }
      id {
        Token *t = push(&lx, TOK_IDENT, tok, cur);
        if (cur - tok > LEX_MAX_IDENT) {
          diag_error(diags, t->loc, "identifier is longer than %d characters", LEX_MAX_IDENT);
          t->kind = TOK_ERROR;
        }
        t->sval = arena_strndup(arena, (const char *)tok, (size_t)(cur - tok));
        continue;
      }

      "("   { k = TOK_LPAREN; goto simple; }
      ")"   { k = TOK_RPAREN; goto simple; }
      "["   { k = TOK_LBRACKET; goto simple; }
      "]"   { k = TOK_RBRACKET; goto simple; }
      "{"   { k = TOK_LBRACE; goto simple; }
      "}"   { k = TOK_RBRACE; goto simple; }
      ","   { k = TOK_COMMA; goto simple; }
      ";"   { k = TOK_SEMI; goto simple; }
      ":"   { k = TOK_COLON; goto simple; }
      "->"  { k = TOK_ARROW; goto simple; }
      "@"   { k = TOK_AT; goto simple; }
      "."   { k = TOK_DOT; goto simple; }
      "="   { k = TOK_ASSIGN; goto simple; }
      "+="  { k = TOK_PLUS_ASSIGN; goto simple; }
      "-="  { k = TOK_MINUS_ASSIGN; goto simple; }
      "*="  { k = TOK_STAR_ASSIGN; goto simple; }
      "/="  { k = TOK_SLASH_ASSIGN; goto simple; }
      "%="  { k = TOK_PERCENT_ASSIGN; goto simple; }
      "&="  { k = TOK_AMP_ASSIGN; goto simple; }
      "|="  { k = TOK_PIPE_ASSIGN; goto simple; }
      "^="  { k = TOK_CARET_ASSIGN; goto simple; }
      "<<=" { k = TOK_SHL_ASSIGN; goto simple; }
      ">>=" { k = TOK_SHR_ASSIGN; goto simple; }
      "+"   { k = TOK_PLUS; goto simple; }
      "-"   { k = TOK_MINUS; goto simple; }
      "*"   { k = TOK_STAR; goto simple; }
      "/"   { k = TOK_SLASH; goto simple; }
      "%"   { k = TOK_PERCENT; goto simple; }
      "&"   { k = TOK_AMP; goto simple; }
      "|"   { k = TOK_PIPE; goto simple; }
      "^"   { k = TOK_CARET; goto simple; }
      "~"   { k = TOK_TILDE; goto simple; }
      "!"   { k = TOK_BANG; goto simple; }
      "<<"  { k = TOK_SHL; goto simple; }
      ">>"  { k = TOK_SHR; goto simple; }
      "&&"  { k = TOK_AND_AND; goto simple; }
      "||"  { k = TOK_OR_OR; goto simple; }
      "=="  { k = TOK_EQ; goto simple; }
      "!="  { k = TOK_NE; goto simple; }
      "<"   { k = TOK_LT; goto simple; }
      "<="  { k = TOK_LE; goto simple; }
      ">"   { k = TOK_GT; goto simple; }
      ">="  { k = TOK_GE; goto simple; }

      * {
        /* One offending character (a whole UTF-8 sequence when valid). */
        uint32_t cp;
        int n = utf8_decode(tok, lim, &cp);
        lex_bad_char(&lx, tok);
        cur = tok + (n ? n : 1);
        continue;
      }
    */
  simple:
    push(&lx, k, tok, cur);
  }
  return (TokenList){lx.tokens, lx.count};
}

TokenList lex(const Source *src, Arena *arena, Diags *diags) {
  unsigned char *buf = arena_alloc(arena, src->len + 1);
  if (src->len) memcpy(buf, src->text, src->len);
  buf[src->len] = 0;
  return lex_buffer(src, buf, arena, diags);
}

TokenList lex_terminated(const Source *src, Arena *arena, Diags *diags) {
  return lex_buffer(src, (const unsigned char *)src->text, arena, diags);
}

const char *token_kind_name(TokKind k) {
  static const char *const names[] = {
#define X(kind, spelling) spelling,
      TOKEN_KINDS(X)
#undef X
  };
  return k < TOK_COUNT ? names[k] : "?";
}

void tokens_print(const TokenList *tl, StrBuf *out) {
  static const char *const kinds[] = {
#define X(kind, spelling) #kind,
      TOKEN_KINDS(X)
#undef X
  };
  for (int i = 0; i < tl->count; i++) {
    const Token *t = &tl->tokens[i];
    sb_printf(out, "%u:%u %s", t->loc.line, t->loc.col, kinds[t->kind]);
    if (t->kind == TOK_INT)
      sb_printf(out, " %llu", (unsigned long long)t->ival);
    else if (t->kind == TOK_FLOAT)
      sb_printf(out, " %.17g", t->fval);
    else if (t->kind == TOK_STRING) {
      sb_puts(out, " \"");
      for (const char *s = t->sval; *s; s++) {
        if (*s == '"' || *s == '\\') sb_printf(out, "\\%c", *s);
        else if (*s == '\n') sb_puts(out, "\\n");
        else if (*s == '\t') sb_puts(out, "\\t");
        else sb_putc(out, *s);
      }
      sb_putc(out, '"');
    } else if (t->kind != TOK_EOF)
      sb_printf(out, " %.*s", (int)t->len, t->start);
    sb_putc(out, '\n');
  }
}
