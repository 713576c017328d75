/* parser.h - tokens to AST (parser.c). */
#ifndef TILE_PARSER_H
#define TILE_PARSER_H

#include "ast.h"
#include "token.h"

/* Parses a whole file. Always returns a Program (possibly with fewer items
 * than the source when there were errors, which are in diags). */
Program *parse(const TokenList *tl, Arena *arena, Diags *diags);

#endif
