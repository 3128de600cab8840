/* tests/test.h: a tiny self-registering test harness; the runner prints "N passed, M failed, K skipped". */
#ifndef PRIMC_TEST_H
#define PRIMC_TEST_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef void (*pc_test_fn)(void);
void pc_test_register(const char *name, const char *file, pc_test_fn fn);
/* records one check; returns ok so callers may bail out early */
int pc_test_check(int ok, const char *file, int line, const char *fmt, ...);
/* the CHECK_* macros evaluate their operands once, through these */
int pc_test_check_int(long long a, long long b, const char *file, int line, const char *sa, const char *sb);
int pc_test_check_str(const char *a, const char *b, const char *file, int line, const char *sa, const char *sb);
int pc_test_check_contains(const char *hay, const char *needle, const char *file, int line);
int pc_test_check_near(double a, double b, double tol, const char *file, int line, const char *sa, const char *sb);
/* marks the running test skipped (reason printed): it counts as skipped, not passed, unless one of its
 * checks failed; it returns 1 so that `if (no_gpu) return (void)SKIP("...")` reads naturally */
int pc_test_skip(const char *file, int line, const char *fmt, ...);
/* directory of the source tree (PRIMC_SRC env or "."), for test data */
const char *pc_test_srcdir(void);

#define PC_TEST(name)                                                                           \
  static void test_##name(void);                                                               \
  __attribute__((constructor)) static void register_##name(void) {                             \
    pc_test_register(#name, __FILE__, test_##name);                                            \
  }                                                                                            \
  static void test_##name(void)

#define CHECK(cond) pc_test_check(!!(cond), __FILE__, __LINE__, "%s", #cond)
#define CHECK_MSG(cond, ...) pc_test_check(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define SKIP(...) pc_test_skip(__FILE__, __LINE__, __VA_ARGS__)
#define CHECK_INT(a, b) pc_test_check_int((long long)(a), (long long)(b), __FILE__, __LINE__, #a, #b)
#define CHECK_STR(a, b) pc_test_check_str((a), (b), __FILE__, __LINE__, #a, #b)
#define CHECK_CONTAINS(hay, needle) pc_test_check_contains((hay), (needle), __FILE__, __LINE__)
#define CHECK_NEAR(a, b, tol) pc_test_check_near((double)(a), (double)(b), (double)(tol), __FILE__, __LINE__, #a, #b)

#endif
