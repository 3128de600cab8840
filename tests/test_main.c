/* tests/test_main.c: runs every registered test (optionally those whose name contains argv[1]). */
#include "tests/test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct test_case {
  const char *name, *file;
  pc_test_fn fn;
} test_case;

static test_case *cases;
static int n_cases, cap_cases;
static int cur_checks, cur_failures, cur_skipped;

void pc_test_register(const char *name, const char *file, pc_test_fn fn) {
  if (n_cases == cap_cases) {
    cap_cases = cap_cases ? cap_cases * 2 : 64;
    cases = realloc(cases, sizeof *cases * (size_t)cap_cases);
    if (!cases) abort();
  }
  cases[n_cases++] = (test_case){name, file, fn};
}

int pc_test_check(int ok, const char *file, int line, const char *fmt, ...) {
  cur_checks++;
  if (ok) return 1;
  cur_failures++;
  fprintf(stderr, "  %s:%d: check failed: ", file, line);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return 0;
}

int pc_test_check_int(long long a, long long b, const char *file, int line, const char *sa, const char *sb) {
  return pc_test_check(a == b, file, line, "%s == %s (%lld vs %lld)", sa, sb, a, b);
}

int pc_test_check_str(const char *a, const char *b, const char *file, int line, const char *sa, const char *sb) {
  return pc_test_check(a && b && strcmp(a, b) == 0, file, line, "%s == %s (\"%s\" vs \"%s\")", sa, sb,
                       a ? a : "(null)", b ? b : "(null)");
}

int pc_test_check_contains(const char *hay, const char *needle, const char *file, int line) {
  return pc_test_check(hay && strstr(hay, needle) != NULL, file, line, "\"%s\" contains \"%s\"",
                       hay ? hay : "(null)", needle);
}

int pc_test_check_near(double a, double b, double tol, const char *file, int line, const char *sa, const char *sb) {
  return pc_test_check(fabs(a - b) <= tol, file, line, "%s ~= %s (%g vs %g)", sa, sb, a, b);
}

int pc_test_skip(const char *file, int line, const char *fmt, ...) {
  cur_skipped = 1;
  fprintf(stderr, "  %s:%d: skipped: ", file, line);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return 1;
}

const char *pc_test_srcdir(void) {
  const char *s = getenv("PRIMC_SRC");
  return s && *s ? s : ".";
}

static int by_name(const void *a, const void *b) {
  const test_case *x = a, *y = b;
  int c = strcmp(x->file, y->file);
  return c ? c : strcmp(x->name, y->name);
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  int passed = 0, failed = 0, skipped = 0;
  qsort(cases, (size_t)n_cases, sizeof *cases, by_name);
  for (int i = 0; i < n_cases; i++) {
    if (filter && !strstr(cases[i].name, filter)) continue;
    cur_checks = cur_failures = cur_skipped = 0;
    cases[i].fn();
    /* a skipped test may check why it skips (the driver's own answer); one that neither checks nor skips fails */
    if (cur_checks == 0 && !cur_skipped) {
      fprintf(stderr, "  %s: test asserted nothing\n", cases[i].name);
      cur_failures = 1;
    }
    if (cur_failures) {
      failed++;
      printf("FAIL %s (%s)\n", cases[i].name, cases[i].file);
    } else if (cur_skipped) {
      skipped++;
      printf("SKIP %s (%s)\n", cases[i].name, cases[i].file);
    } else {
      passed++;
    }
    fflush(stdout);
  }
  printf("unit: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
