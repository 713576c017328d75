/* test_grid_expr.c - the --grid expressions of `tilec tune`
 * (run_eval_grid, compiler/driver/run.c): values, precedence, the
 * functions, names, and each error, with and without check_only. */
#include <criterion/criterion.h>
#include <string.h>

#include "driver/run.h"

/* Names: BLOCK_M = 128, BLOCK_N = 64, m = 1000, n = 300, num_sms = 132. */
static bool lookup(void *user, const char *name, size_t len, int64_t *value) {
  static const struct {
    const char *name;
    int64_t value;
  } names[] = {{"BLOCK_M", 128}, {"BLOCK_N", 64}, {"m", 1000}, {"n", 300}, {"num_sms", 132}};
  (void)user;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strlen(names[i].name) == len && !strncmp(names[i].name, name, len)) return (*value = names[i].value), true;
  return false;
}

static void expect_grid(const char *text, int64_t x, int64_t y, int64_t z) {
  int64_t g[3];
  char msg[RUN_MESSAGE_BYTES];
  cr_assert(run_eval_grid(text, lookup, NULL, false, g, msg, sizeof msg), "'%s': %s", text, msg);
  cr_expect(g[0] == x && g[1] == y && g[2] == z, "'%s' gave %lld,%lld,%lld; expected %lld,%lld,%lld", text,
            (long long)g[0], (long long)g[1], (long long)g[2], (long long)x, (long long)y, (long long)z);
}

/* Fails as a full evaluation with message msg; check_only passes it when
 * it is a value error. */
static void expect_error(const char *text, const char *expected, bool value_error) {
  int64_t g[3];
  char msg[RUN_MESSAGE_BYTES];
  cr_expect(!run_eval_grid(text, lookup, NULL, false, g, msg, sizeof msg), "'%s' was accepted", text);
  cr_expect_str_eq(msg, expected);
  bool checked = run_eval_grid(text, lookup, NULL, true, g, msg, sizeof msg);
  cr_expect(checked == value_error, "'%s' with check_only: %s", text, checked ? "accepted" : msg);
}

Test(grid_expr, values) {
  expect_grid("4", 4, 1, 1);
  expect_grid(" 4 , 2 ,3 ", 4, 2, 3);
  expect_grid("cdiv(m, BLOCK_M)", 8, 1, 1);
  expect_grid("cdiv(m, BLOCK_M), cdiv(n, BLOCK_N)", 8, 5, 1);
  expect_grid("min(cdiv(m, BLOCK_M) * cdiv(n, BLOCK_N), num_sms)", 40, 1, 1);
  expect_grid("max(cdiv(m, BLOCK_M) * cdiv(n, BLOCK_N) * 4, num_sms)", 160, 1, 1);
  expect_grid("1 + 2 * 3", 7, 1, 1);
  expect_grid("(1 + 2) * 3", 9, 1, 1);
  expect_grid("10 - 2 - 3", 5, 1, 1);
  expect_grid("100 / 7 / 2", 7, 1, 1);
  expect_grid("100 % 7 + 1", 3, 1, 1);
  expect_grid("-(-5)", 5, 1, 1);
  expect_grid("2 - -3", 5, 1, 1);
  expect_grid("-7 / 2 + 5", 2, 1, 1); /* division rounds toward zero */
  expect_grid("cdiv(0 - 7, 2) + 4", 1, 1, 1);
  expect_grid("2147483647", 2147483647, 1, 1);
  expect_grid("num_sms*2,m,n", 264, 1000, 300);
}

Test(grid_expr, errors) {
  expect_error("0", "--grid '0': size 1 is 0 (a grid size is 1 to 2^31 - 1) at the end", true);
  expect_error("4, 1 - 2", "--grid '4, 1 - 2': size 2 is -1 (a grid size is 1 to 2^31 - 1) at the end", true);
  expect_error("2147483648", "--grid '2147483648': size 1 is 2147483648 (a grid size is 1 to 2^31 - 1) at the end", true);
  expect_error("m / (n - 300)", "--grid 'm / (n - 300)': division by zero at the end", true);
  expect_error("m % 0, 1", "--grid 'm % 0, 1': division by zero at offset 5", true);
  expect_error("cdiv(m, 0)", "--grid 'cdiv(m, 0)': cdiv by a value below 1 at the end", true);
  expect_error("4611686018427387904 * 4", "--grid '4611686018427387904 * 4': overflow at the end", true);
  expect_error("9223372036854775807 + 1", "--grid '9223372036854775807 + 1': overflow at the end", true);
  expect_error("99999999999999999999", "--grid '99999999999999999999': number out of range at offset 0", false);
  expect_error("k", "--grid 'k': unknown name 'k' (names are the kernel's integer const parameters, its integer scalar "
                    "--args and num_sms) at offset 0", false);
  expect_error("cdiv(m)", "--grid 'cdiv(m)': expected ',' between the two arguments at offset 6", false);
  expect_error("min(m, n", "--grid 'min(m, n': expected ')' at the end", false);
  expect_error("(m", "--grid '(m': expected ')' at the end", false);
  expect_error("m n", "--grid 'm n': expected ',' or the end at offset 2", false);
  expect_error("m,", "--grid 'm,': expected a number, a name or '(' at the end", false);
  expect_error("1,2,3,", "--grid '1,2,3,': more than three sizes at the end", false);
  expect_error("*2", "--grid '*2': expected a number, a name or '(' at offset 0", false);
  /* cdiv without parentheses is a name, and there is none */
  expect_error("cdiv", "--grid 'cdiv': unknown name 'cdiv' (names are the kernel's integer const parameters, its "
                       "integer scalar --args and num_sms) at offset 0", false);
}

Test(grid_expr, nesting_is_bounded) {
  char text[4 * 64 + 16];
  size_t at = 0;
  for (int i = 0; i < 100; i++) text[at++] = '(';
  text[at++] = '1';
  for (int i = 0; i < 100; i++) text[at++] = ')';
  text[at] = '\0';
  int64_t g[3];
  char msg[RUN_MESSAGE_BYTES];
  cr_expect(!run_eval_grid(text, lookup, NULL, true, g, msg, sizeof msg));
  cr_expect(strstr(msg, "nested too deeply") != NULL, "%s", msg);
  /* 60 levels are fine */
  at = 0;
  for (int i = 0; i < 60; i++) text[at++] = '-';
  text[at++] = '3';
  text[at] = '\0';
  expect_grid(text, 3, 1, 1);
}
