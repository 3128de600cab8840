/* frontend/onnx_check.c: the problems `primc check` lists: nodes that failed to import, grouped by what went
 * wrong (the message without the node's name), each with a count and the first node names. */
#include "frontend/onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_NAMES 5 /* node names listed per problem */

typedef struct check_group {
  char *what;  /* the message without its node prefix */
  char *names; /* "\"a\", \"b\"" */
  int count, listed;
} check_group;

typedef struct check_groups {
  check_group *g;
  int n, cap;
} check_groups;

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  return d ? memcpy(d, s, n) : NULL;
}

static int append(char **s, const char *add) {
  size_t a = *s ? strlen(*s) : 0, b = strlen(add);
  char *n = realloc(*s, a + b + 1);
  if (!n) return 0;
  memcpy(n + a, add, b + 1);
  *s = n;
  return 1;
}

int ox_check_note(pc_check_result *r, const char *origin, const char *node, const char *message) {
  check_groups *gs = r->groups;
  if (!gs && !(gs = r->groups = calloc(1, sizeof *gs))) return 0;
  /* messages start with the node's origin ("Foo \"n1\": ..."): group on the rest */
  size_t ol = origin ? strlen(origin) : 0;
  const char *what = ol && strncmp(message, origin, ol) == 0 && message[ol] == ':' ? message + ol + 1 : message;
  while (*what == ' ') what++;
  check_group *grp = NULL;
  for (int i = 0; i < gs->n && !grp; i++)
    if (strcmp(gs->g[i].what, what) == 0) grp = &gs->g[i];
  if (!grp) {
    if (gs->n == gs->cap) {
      int cap = gs->cap ? gs->cap * 2 : 8;
      check_group *ng = realloc(gs->g, sizeof *ng * (size_t)cap);
      if (!ng) return 0;
      gs->g = ng, gs->cap = cap;
    }
    grp = &gs->g[gs->n];
    memset(grp, 0, sizeof *grp);
    if (!(grp->what = dup_str(what))) return 0;
    gs->n++;
    r->n_problems++;
  }
  grp->count++;
  r->n_nodes++;
  if (grp->listed < CHECK_NAMES) {
    char buf[300];
    snprintf(buf, sizeof buf, "%s\"%.250s\"", grp->listed ? ", " : "", node);
    if (!append(&grp->names, buf)) return 0;
    grp->listed++;
  }
  return 1;
}

int ox_check_finish(pc_check_result *r) {
  check_groups *gs = r->groups;
  for (int i = 0; gs && i < gs->n; i++) {
    const check_group *grp = &gs->g[i];
    char head[64];
    snprintf(head, sizeof head, "%d node%s: ", grp->count, grp->count == 1 ? "" : "s");
    if (!append(&r->report, head) || !append(&r->report, grp->what) || !append(&r->report, " -- ") ||
        !append(&r->report, grp->names ? grp->names : "") ||
        !append(&r->report, grp->count > grp->listed ? ", ...\n" : "\n"))
      return 0;
  }
  return 1;
}

void pc_check_result_free(pc_check_result *r) {
  if (!r) return;
  check_groups *gs = r->groups;
  for (int i = 0; gs && i < gs->n; i++) free(gs->g[i].what), free(gs->g[i].names);
  if (gs) free(gs->g);
  free(gs);
  free(r->report);
  r->groups = NULL, r->report = NULL;
}
