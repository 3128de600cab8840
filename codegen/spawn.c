/* codegen/spawn.c: runs the system C compiler / linker from an argument vector, never through a shell. */
#include "codegen/codegen.h"

#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

void pc_argv_add(pc_argv *a, const char *arg) {
  if (a->n + 1 < PC_ARGV_MAX) a->v[a->n++] = arg;
  else a->overflow = 1;
  a->v[a->n] = NULL;
}

/* s copied into a's store (with a prefix), added as one argument */
static void add_stored(pc_argv *a, const char *prefix, const char *s, size_t k) {
  size_t p = strlen(prefix);
  if (a->store_used + p + k + 1 > sizeof a->store) {
    a->overflow = 1;
    return;
  }
  char *d = a->store + a->store_used;
  memcpy(d, prefix, p);
  memcpy(d + p, s, k);
  d[p + k] = 0;
  a->store_used += p + k + 1;
  pc_argv_add(a, d);
}

void pc_argv_add_path(pc_argv *a, const char *path) {
  if (path[0] == '-') add_stored(a, "./", path, strlen(path)); /* else cc reads it as an option */
  else pc_argv_add(a, path);
}

/* words of s split at blanks into a->store, each added as one argument: $CC and $PRIMC_LDFLAGS may
 * hold a program and its flags ("clang -fsanitize=address"), but no quoting, globbing or substitution */
void pc_argv_add_words(pc_argv *a, const char *s) {
  for (const char *p = s ? s : ""; *p;) {
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    size_t k = strcspn(p, " \t\n");
    if (!k) break;
    add_stored(a, "", p, k);
    p += k;
  }
}

/* the command as a user would retype it, for error messages: each argument quoted where needed */
static void describe(const pc_argv *a, char *out, size_t n) {
  size_t k = 0;
  out[0] = 0;
  for (int i = 0; i < a->n && k + 1 < n; i++) {
    const char *s = a->v[i];
    int plain = *s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./,+:@") == strlen(s);
    int w = snprintf(out + k, n - k, plain ? "%s%s" : "%s\"%s\"", i ? " " : "", s);
    if (w < 0) break;
    k += (size_t)w;
  }
}

pc_status pc_argv_run(pc_graph *g, const char *what, const pc_argv *a) {
  char cmd[1024];
  describe(a, cmd, sizeof cmd);
  if (a->overflow || !a->n) return pc_fail(g, PC_ERR_RANGE, "%s: command line too long: %s", what, cmd);
  pid_t pid;
  int err = posix_spawnp(&pid, a->v[0], NULL, NULL, (char *const *)a->v, environ);
  if (err) return pc_fail(g, PC_ERR_IO, "%s: cannot run %s: %s", what, a->v[0], strerror(err));
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return pc_fail(g, PC_ERR_IO, "%s: lost %s: %s", what, a->v[0], strerror(errno));
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return PC_OK;
  if (WIFSIGNALED(st)) return pc_fail(g, PC_ERR_IO, "%s failed (signal %d): %s", what, WTERMSIG(st), cmd);
  return pc_fail(g, PC_ERR_IO, "%s failed (exit %d): %s", what, WEXITSTATUS(st), cmd);
}
