/* color.c - tilec's diagnostics in colour on a terminal (--color=WHEN).
 *
 * The compiler library's diagnostics are plain text; the driver colours
 * them as it prints, line by line: in a line "FILE:LINE:COL: SEVERITY:
 * MESSAGE" the location is bold, the severity red (error), magenta
 * (warning) or cyan (note) and the message of an error or warning bold;
 * a caret line (blanks and '^') is green. Other lines (the source) are
 * printed as they are. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define SGR_RESET "\033[0m"
#define SGR_BOLD "\033[1m"

bool cli_color_wanted(CliColor when, FILE *f) {
  if (when != CLI_COLOR_AUTO) return when == CLI_COLOR_ALWAYS;
  const char *no = getenv("NO_COLOR"), *term = getenv("TERM");
  return isatty(fileno(f)) && !(no && *no) && !(term && !strcmp(term, "dumb"));
}

static bool caret_line(const char *s, size_t n) {
  bool caret = false;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '^') caret = true;
    else if (s[i] != ' ' && s[i] != '~') return false;
  }
  return caret;
}

static void put_line(FILE *f, const char *s, size_t n) {
  static const struct {
    const char *tag, *sgr;
    bool bold_message;
  } sev[] = {{": error: ", "\033[1;31m", true}, {": warning: ", "\033[1;35m", true}, {": note: ", "\033[1;36m", false}};
  for (size_t k = 0; k < sizeof sev / sizeof sev[0]; k++) {
    const char *at = strstr(s, sev[k].tag);
    if (!at || at >= s + n) continue;
    size_t loc = (size_t)(at - s), tag = strlen(sev[k].tag);
    fprintf(f, SGR_BOLD "%.*s:" SGR_RESET " %s%.*s" SGR_RESET " ", (int)loc, s, sev[k].sgr, (int)(tag - 3), at + 2);
    const char *msg = at + tag;
    fprintf(f, "%s%.*s%s", sev[k].bold_message ? SGR_BOLD : "", (int)(n - loc - tag), msg,
            sev[k].bold_message ? SGR_RESET : "");
    return;
  }
  if (caret_line(s, n)) fprintf(f, "\033[1;32m%.*s" SGR_RESET, (int)n, s);
  else fwrite(s, 1, n, f);
}

void cli_print_diagnostics(FILE *f, const char *text, bool color) {
  if (!color) {
    fputs(text, f);
    return;
  }
  for (const char *s = text; *s;) {
    const char *nl = strchr(s, '\n');
    size_t n = nl ? (size_t)(nl - s) : strlen(s);
    put_line(f, s, n);
    if (!nl) break;
    fputc('\n', f);
    s = nl + 1;
  }
}

bool cli_parse_color(const char *when, CliColor *out) {
  if (!strcmp(when, "auto")) *out = CLI_COLOR_AUTO;
  else if (!strcmp(when, "always")) *out = CLI_COLOR_ALWAYS;
  else if (!strcmp(when, "never")) *out = CLI_COLOR_NEVER;
  else return false;
  return true;
}
