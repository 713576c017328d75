/* suggest.h - "did you mean": the closest of some names to a misspelt
 * one, for messages about unknown names (sema) and unknown options,
 * kernels and const parameters (the driver). */
#ifndef TILE_SUGGEST_H
#define TILE_SUGGEST_H

/* Names longer than this are not compared (the distance table is on the
 * stack). */
#define SUGGEST_MAX_LEN 64

/* Edits (insert, delete, replace, swap of neighbours) from a to b;
 * SUGGEST_MAX_LEN + 1 when either is longer than SUGGEST_MAX_LEN. */
int suggest_distance(const char *a, const char *b);

/* The most edits a suggestion for a name of len letters may be away: a
 * third of them, and not all (0: none is close enough). */
int suggest_limit(int len);

/* The closest of candidates[0..n) to name within suggest_limit, ties to
 * the first in strcmp order; NULL when none is (or name is among them). */
const char *suggest_closest(const char *name, const char *const *candidates, int n);

#endif
