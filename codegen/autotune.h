/* codegen/autotune.h: `--autotune`: the conv rows of a compile chosen by timing them here, cached per CPU model. */
#ifndef PRIMC_AUTOTUNE_H
#define PRIMC_AUTOTUNE_H

#include <stdio.h>

#include "runtime/primc_rt.h"

/*
 * One context per compile (or per several compiles sharing a cache). codegen asks it for each conv's plan
 * (pc_autotune_plan) instead of the planner alone: it times every row that can run the conv (primc_conv_
 * plan_candidates) with the conv's real shape, random data and a bias + ReLU epilogue on the threads the
 * artifact will use, and keeps the heuristic plan unless another row's best round is faster by the margin.
 * Choices are remembered by the CPU (vendor, family, model, name, the GEMM's ISA) and the conv's whole
 * signature (shape, stride, padding, dilation, groups, threads, weight layout options) in a text cache:
 * one line per choice, "CPU<TAB>signature<TAB>row name", written whole to a temporary file and renamed.
 * Nothing here prints or exits: a cache that cannot be read or is malformed is ignored and said so by
 * pc_autotune_warning, and rewritten by pc_autotune_save.
 */
typedef struct pc_autotune pc_autotune;

typedef struct pc_autotune_stats {
  int shapes;  /* distinct conv signatures this context planned with more than one row to choose from */
  int timed;   /* of them, timed now */
  int cached;  /* of them, read from the cache */
  int changed; /* of them, where the row kept is not the heuristic's */
  double seconds; /* spent timing */
} pc_autotune_stats;

/* the cache file used when none is named: $PRIMC_AUTOTUNE_CACHE, else $XDG_CACHE_HOME/primc/autotune.txt,
 * else $HOME/.cache/primc/autotune.txt ("" when none of them is set) */
void pc_autotune_default_path(char *out, size_t n);
/* a context reading cache_path (NULL: pc_autotune_default_path; "": no cache file); NULL when out of memory */
pc_autotune *pc_autotune_new(const char *cache_path);
void pc_autotune_free(pc_autotune *t);
/* why the cache was ignored or could not be written, or NULL */
const char *pc_autotune_warning(const pc_autotune *t);
/* at most this long timing one conv signature's rows (default 0.05 s; at least five rounds run) */
void pc_autotune_set_budget(pc_autotune *t, double seconds);
/* c's plan under o: a cached or newly timed choice where rows compete, else primc_conv_plan_make's.
 * Plans for the plain weights of a non-depthwise conv (o->packable == 0) and forced rows (o->force) are
 * the planner's: compiled code runs such convs on their packed weights' plan. PRIMC_OK or PRIMC_ERR_* */
int pc_autotune_plan(pc_autotune *t, const primc_conv2d *c, const primc_conv_plan_opts *o, primc_conv_plan *plan);
/* whether row was c's timed or cached choice here; *heuristic (may be NULL): the planner's row then */
int pc_autotune_tuned(const pc_autotune *t, const primc_conv2d *c, int row, int *heuristic);
/* writes the cache when choices were added (creating its directory); 0, or -1 with pc_autotune_warning set */
int pc_autotune_save(pc_autotune *t);
void pc_autotune_stats_get(const pc_autotune *t, pc_autotune_stats *s);
/* the path the context reads and writes ("" for none) */
const char *pc_autotune_path(const pc_autotune *t);

#endif
