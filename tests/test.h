/* tests/test.h: a tiny self-registering test harness; the runner prints "N passed, N failed". */
#ifndef PRIMC_TEST_H
#define PRIMC_TEST_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef void (*pc_test_fn)(void);
void pc_test_register(const char *name, const char *file, pc_test_fn fn);
/* records one check; returns ok so callers may bail out early */
int pc_test_check(int ok, const char *file, int line, const char *fmt, ...);
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
#define CHECK_INT(a, b)                                                                         \
  pc_test_check((long long)(a) == (long long)(b), __FILE__, __LINE__, "%s == %s (%lld vs %lld)", \
                #a, #b, (long long)(a), (long long)(b))
#define CHECK_STR(a, b)                                                                         \
  pc_test_check((a) && (b) && strcmp((a), (b)) == 0, __FILE__, __LINE__, "%s == %s (\"%s\" vs \"%s\")", \
                #a, #b, (a) ? (a) : "(null)", (b) ? (b) : "(null)")
#define CHECK_CONTAINS(hay, needle)                                                             \
  pc_test_check((hay) && strstr((hay), (needle)) != NULL, __FILE__, __LINE__,                  \
                "\"%s\" contains \"%s\"", (hay) ? (hay) : "(null)", (needle))
#define CHECK_NEAR(a, b, tol)                                                                   \
  pc_test_check(fabs((double)(a) - (double)(b)) <= (tol), __FILE__, __LINE__, "%s ~= %s (%g vs %g)", \
                #a, #b, (double)(a), (double)(b))

#endif
