/* suggest.c - "did you mean" (suggest.h). */
#include "suggest.h"

#include <string.h>

int suggest_distance(const char *a, const char *b) {
  int n = (int)strlen(a), m = (int)strlen(b);
  if (n > SUGGEST_MAX_LEN || m > SUGGEST_MAX_LEN) return SUGGEST_MAX_LEN + 1;
  int d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1];
  for (int i = 0; i <= n; i++) d[i][0] = i;
  for (int j = 0; j <= m; j++) d[0][j] = j;
  for (int i = 1; i <= n; i++)
    for (int j = 1; j <= m; j++) {
      int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[n][m];
}

int suggest_limit(int len) {
  int limit = (len + 2) / 3;
  if (limit >= len) limit = len - 1;
  return limit < 0 ? 0 : limit;
}

const char *suggest_closest(const char *name, const char *const *candidates, int n) {
  int limit = suggest_limit((int)strlen(name)), best_d = limit + 1;
  const char *best = NULL;
  for (int i = 0; i < n; i++)
    if (!strcmp(candidates[i], name)) return NULL;
  for (int i = 0; i < n && limit > 0; i++) {
    int d = suggest_distance(name, candidates[i]);
    if (d < best_d || (d == best_d && best && strcmp(candidates[i], best) < 0)) best = candidates[i], best_d = d;
  }
  return best;
}
