/* passes/ad_table.c: the rows of passes/transforms.def as a table by prim, with the rules they name. */
#include "passes/autodiff.h"

#include <stddef.h>

#define AD_FN_RULE(kind, name) ad_##kind##_##name
#define AD_FN_ZERO(kind, name) NULL
#define AD_FN_INT(kind, name) NULL
#define AD_FN_NONE(kind, name) NULL
#define AD_FN_ELEM(kind, name) NULL
#define AD_FN_LINEAR(kind, name) NULL
#define AD_FN_BILINEAR(kind, name) NULL
#define TR(name, v, j, b) \
  [PC_OP_##name] = {AD_##v, AD_##j, AD_##b, AD_FN_##v(vjp, name), AD_FN_##j(jvp, name), AD_FN_##b(vmap, name)},
static const ad_row rows[PC_OP_COUNT] = {
#include "passes/transforms.def"
};
#undef TR
#define TR(name, v, j, b) +1
_Static_assert(0
#include "passes/transforms.def"
                   == PC_OP_COUNT,
               "passes/transforms.def needs one row per prim of ir/prims.def");
#undef TR

const ad_row *pc_ad_row(pc_op op) { return (unsigned)op < PC_OP_COUNT ? &rows[op] : NULL; }
