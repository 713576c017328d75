/* token.h - tokens of the tile language.
 *
 * The lexer turns the whole source into an array of tokens up front; the
 * parser indexes into it, which makes arbitrary lookahead trivial.
 */
#ifndef TILE_TOKEN_H
#define TILE_TOKEN_H

#include <stdint.h>

#include "../util/diag.h"

/* Longest identifier, in bytes. Long enough for any real name; a limit keeps
 * messages that quote names readable. */
#define LEX_MAX_IDENT 255

/* Most tokens in one file. A 5,000-line kernel file has some 50,000; the
 * limit bounds the token array (40 bytes a token) and everything the
 * later stages build from it, whatever the file holds (a 64 MiB file of
 * parentheses would otherwise make 67 million tokens). */
#define LEX_MAX_TOKENS 1000000

/* X-macro: kind, spelling (for messages and --emit=tokens) */
#define TOKEN_KINDS(X)                                    \
  X(EOF, "end of file")                                   \
  X(IDENT, "identifier")                                  \
  X(INT, "integer literal")                               \
  X(FLOAT, "float literal")                               \
  X(STRING, "string literal")                             \
  /* keywords */                                          \
  X(KW_KERNEL, "kernel")                                  \
  X(KW_FN, "fn")                                          \
  X(KW_LET, "let")                                        \
  X(KW_VAR, "var")                                        \
  X(KW_CONST, "const")                                    \
  X(KW_IF, "if")                                          \
  X(KW_ELSE, "else")                                      \
  X(KW_FOR, "for")                                        \
  X(KW_IN, "in")                                          \
  X(KW_WHILE, "while")                                    \
  X(KW_RETURN, "return")                                  \
  X(KW_TRUE, "true")                                      \
  X(KW_FALSE, "false")                                    \
  X(KW_AS, "as")                                          \
  X(KW_NONE, "None")                                      \
  X(KW_IMPORT, "import")                                      \
  /* punctuation */                                       \
  X(LPAREN, "(")                                          \
  X(RPAREN, ")")                                          \
  X(LBRACKET, "[")                                        \
  X(RBRACKET, "]")                                        \
  X(LBRACE, "{")                                          \
  X(RBRACE, "}")                                          \
  X(COMMA, ",")                                           \
  X(SEMI, ";")                                            \
  X(COLON, ":")                                           \
  X(ARROW, "->")                                          \
  X(AT, "@")                                              \
  X(DOT, ".")                                              \
  X(ASSIGN, "=")                                          \
  X(PLUS_ASSIGN, "+=")                                    \
  X(MINUS_ASSIGN, "-=")                                   \
  X(STAR_ASSIGN, "*=")                                    \
  X(SLASH_ASSIGN, "/=")                                   \
  X(PERCENT_ASSIGN, "%=")                                 \
  X(AMP_ASSIGN, "&=")                                     \
  X(PIPE_ASSIGN, "|=")                                    \
  X(CARET_ASSIGN, "^=")                                   \
  X(SHL_ASSIGN, "<<=")                                    \
  X(SHR_ASSIGN, ">>=")                                    \
  X(PLUS, "+")                                            \
  X(MINUS, "-")                                           \
  X(STAR, "*")                                            \
  X(SLASH, "/")                                           \
  X(PERCENT, "%")                                         \
  X(AMP, "&")                                             \
  X(PIPE, "|")                                            \
  X(CARET, "^")                                           \
  X(TILDE, "~")                                           \
  X(BANG, "!")                                            \
  X(SHL, "<<")                                            \
  X(SHR, ">>")                                            \
  X(AND_AND, "&&")                                        \
  X(OR_OR, "||")                                          \
  X(EQ, "==")                                             \
  X(NE, "!=")                                             \
  X(LT, "<")                                              \
  X(LE, "<=")                                             \
  X(GT, ">")                                              \
  X(GE, ">=")                                             \
  /* produced for bad input; the lexer has already reported it */ \
  X(ERROR, "invalid token")

typedef enum TokKind {
#define X(kind, spelling) TOK_##kind,
  TOKEN_KINDS(X)
#undef X
      TOK_COUNT
} TokKind;

/* (Fields ordered so that a token takes 32 bytes: a file may hold up to
 * LEX_MAX_TOKENS of them.) */
typedef struct Token {
  const char *start; /* into the source text */
  union {
    uint64_t ival;    /* TOK_INT */
    double fval;      /* TOK_FLOAT */
    const char *sval; /* TOK_STRING (escapes decoded) and TOK_IDENT (NUL terminated copy) */
  };
  SrcLoc loc;
  uint32_t len;
  TokKind kind;
} Token;

typedef struct TokenList {
  Token *tokens;
  int count; /* the last token is TOK_EOF */
} TokenList;

const char *token_kind_name(TokKind k);
/* Lexes the whole source. Errors go to diags; bad bytes become TOK_ERROR
 * tokens so the parser can keep going. Never fails otherwise. */
TokenList lex(const Source *src, Arena *arena, Diags *diags);
/* The same for a text that has a NUL at text[len] (which the scanner needs
 * after the text): scanned in place, without a copy. */
TokenList lex_terminated(const Source *src, Arena *arena, Diags *diags);
/* Human-readable dump, one token per line ("3:5 IDENT foo"), for --emit=tokens. */
void tokens_print(const TokenList *tl, StrBuf *out);

#endif
