/* codegen/package.c: the CPU backend: kernel IR through LLVM to an object, header, executable or shared library (links with the system cc). */
#include "codegen/codegen.h"
#include "codegen/kir.h"
#include "runtime/primc_rt.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void print_shape(FILE *f, const pc_type *t) {
  fprintf(f, "{");
  for (int d = 0; d < t->rank; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
  fprintf(f, "%s}", t->rank ? "" : "1");
}

/* t's data-dependent dims (nonzero's count) at their bound, and a mask of them */
static pc_type header_bound(const pc_graph *g, const pc_type *t, int *mask) {
  pc_type b = *t;
  *mask = 0;
  for (int d = 0; d < t->rank; d++)
    if (PC_DIM_IS_SYM(t->dims[d])) b.dims[d] = g->syms[PC_DIM_SYM_ID(t->dims[d])].hi, *mask |= 1 << d;
  return b;
}

/* one input's or output's macros; a dim that follows the run-time dims is marked with its symbol (an input's)
 * or "<=" (an output's, whose dims NAME_output_dims gives after a run) */
static void header_tensor(FILE *f, const kir_program *p, const char *name, const char *what, int i, const pc_value *v) {
  const pc_graph *g = p->g;
  int dynamic;
  pc_type t = header_bound(g, &v->type, &dynamic);
  int64_t n = pc_type_numel(&t);
  char vname[256], upper[16];
  int in = what[0] == 'i', sym[PC_MAX_RANK], follows = 0;
  for (int d = 0; d < t.rank; d++) {
    sym[d] = p->dyn && in ? p->dyn->in_sym[i * PC_MAX_RANK + d] : -1;
    if (p->dyn && !in && p->dyn->out_slot[i * PC_MAX_RANK + d] >= 0) dynamic |= 1 << d;
    follows |= sym[d] >= 0;
  }
  /* the same fallback names as the descriptors in the object (codegen/llvm.c) */
  snprintf(vname, sizeof vname, "%s", v->name ? v->name : "");
  if (!v->name) snprintf(vname, sizeof vname, "%s%d", in ? "in" : "out", i);
  snprintf(upper, sizeof upper, "%s", pc_dtype_name(v->type.dtype));
  for (char *c = upper; *c; c++) *c = (char)toupper((unsigned char)*c);
  fprintf(f, "\n/* %s %d: \"", what, i);
  pc_put_c_comment(f, vname);
  fprintf(f, "\" %s[", pc_dtype_name(v->type.dtype));
  for (int d = 0; d < t.rank; d++) {
    fprintf(f, "%s", d ? "," : "");
    if (sym[d] < 0) {
      fprintf(f, "%s%lld", dynamic >> d & 1 ? "<=" : "", (long long)t.dims[d]);
      continue;
    }
    pc_put_c_comment(f, p->dyn->name[sym[d]]);
    fprintf(f, "=%lld..%lld", (long long)p->dyn->lo[sym[d]], (long long)p->dyn->hi[sym[d]]);
    if (p->dyn->mult[sym[d]] > 1) fprintf(f, "%%%lld", (long long)p->dyn->mult[sym[d]]);
  }
  fprintf(f, "] */\n");
  const char *W = in ? "INPUT" : "OUTPUT";
  fprintf(f, "#define %s_%s%d_NAME ", name, W, i);
  pc_put_c_string(f, vname);
  fputc('\n', f);
  fprintf(f, "#define %s_%s%d_DTYPE %d /* PRIMC_%s in runtime/primc_rt.h */\n", name, W, i, (int)v->type.dtype,
          upper);
  fprintf(f, "#define %s_%s%d_RANK %d\n", name, W, i, v->type.rank);
  if (follows) {
    fprintf(f, "#define %s_%s%d_DIM_SYMS {", name, W, i);
    for (int d = 0; d < t.rank; d++) fprintf(f, "%s%d", d ? ", " : "", sym[d]);
    fprintf(f, "} /* the run-time dim (NAME_DIMk) each dim is, -1 when fixed */\n");
  }
  if (dynamic)
    fprintf(f, "/* dims marked <= depend on the data or on the run-time dims: SHAPE, NUMEL and BYTES hold their\n"
               " * bound, the size of the buffer to pass; the run writes the result row-major in its actual dims\n"
               " * (%s_output_dims) */\n"
               "#define %s_%s%d_DATA_DEPENDENT_DIMS 0x%x /* bit d: dim d */\n",
            name, name, W, i, dynamic);
  fprintf(f, "#define %s_%s%d_SHAPE ", name, W, i);
  print_shape(f, &t);
  fprintf(f, "\n#define %s_%s%d_NUMEL %lldLL\n", name, W, i, (long long)n);
  fprintf(f, "#define %s_%s%d_BYTES %lldLL\n", name, W, i, (long long)(n * (int64_t)pc_dtype_size(v->type.dtype)));
}

pc_status kir_header_write(const kir_program *p, const char *path, const char *name, int external, const char *note) {
  FILE *f = fopen(path, "w");
  pc_graph *g = p->g;
  if (!f) return pc_fail(g, PC_ERR_IO, "cannot write %s", path);
  fprintf(f, "/* %s.h: entry points of the model compiled by primc %s; link %s.o with libprimc_rt.a -lm -lpthread. */\n",
          name, PC_VERSION, name);
  fprintf(f, "#ifndef %s_PRIMC_H\n#define %s_PRIMC_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n", name, name);
  fprintf(f, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
  fprintf(f, "/* bytes of scratch memory %s_run needs, and its alignment */\n", name);
  fprintf(f, "#define %s_WORKSPACE_SIZE %lldLL\n#define %s_WORKSPACE_ALIGN 64\n", name, (long long)p->workspace_size, name);
  fprintf(f, "#define %s_NUM_INPUTS %d\n#define %s_NUM_OUTPUTS %d\n", name, g->n_inputs, name, g->n_outputs);
  fprintf(f, "#define %s_WEIGHTS_EXTERNAL %d\n#define %s_WEIGHTS_SIZE %lldLL\n", name, external, name,
          (long long)p->weights_size);
  if (p->dyn) {
    fprintf(f, "\n/* run-time dims (--dim NAME=LO..HI): the binary takes every value in range (with MULTIPLE > 1,\n"
               " * every multiple of it); the inputs' SHAPE, NUMEL and BYTES and the workspace size hold the bounds\n"
               " * (HI) */\n#define %s_NUM_DIMS %d\n",
            name, p->dyn->n_syms);
    for (int s = 0; s < p->dyn->n_syms; s++) {
      fprintf(f, "#define %s_DIM%d_NAME ", name, s);
      pc_put_c_string(f, p->dyn->name[s]);
      fprintf(f, "\n#define %s_DIM%d_MIN %lldLL\n#define %s_DIM%d_MAX %lldLL\n#define %s_DIM%d_MULTIPLE %lldLL\n", name, s,
              (long long)p->dyn->lo[s], name, s, (long long)p->dyn->hi[s], name, s, (long long)p->dyn->mult[s]);
    }
  }
  if (note) fputs(note, f);
  if (g->n_state)
    fprintf(f, "\n/* a training step (--train): its last %s_NUM_STATE inputs are state (the model's %s_NUM_STATE_WEIGHTS\n"
               " * weights, then the optimizer's buffers), each replaced after a run by the output in the same place\n"
               " * among the last %s_NUM_STATE outputs: pass them back in (or swap buffers) for the next step. Output 0\n"
               " * is the loss. %s_state_init[i]: the first value of state i (NULL: zeros). %s_STATE_IN_PLACE 1: a\n"
               " * state's output may be its input's own buffer, so one buffer set serves every step (the step reads\n"
               " * each state before it writes its next value; given two sets it copies each input to its output first) */\n"
               "#define %s_NUM_STATE %d\n#define %s_NUM_STATE_WEIGHTS %d\n#define %s_STATE_IN_PLACE %d\n"
               "extern const void *const %s_state_init[%d];\n",
            name, name, name, name, name, name, g->n_state, name, g->n_state_weights, name, g->state_in_place, name,
            g->n_state);
  for (int i = 0; i < g->n_inputs; i++) header_tensor(f, p, name, "input", i, g->inputs[i]);
  for (int i = 0; i < g->n_outputs; i++) header_tensor(f, p, name, "output", i, g->outputs[i]);
  fprintf(f, "\n/* Runs the model. inputs[i] / outputs[i]: row-major buffers of the shapes above\n"
             " * (inputs are read, outputs fully written, those with dims marked <= in their actual\n"
             " * dims, see %s_output_dims); workspace: %s_WORKSPACE_SIZE bytes\n"
             " * aligned to %s_WORKSPACE_ALIGN, owned by the caller, reusable between calls but\n"
             " * not shared by concurrent calls. No allocation. Returns 0, or 1 (a NULL pointer),\n"
             " * 2 (weights missing or corrupt: not loaded, or a packed weight header failing its check),\n"
             " * 3 (bad data, e.g. an index out of range), 4 (unsupported). */\n",
          name, name, name);
  fprintf(f, "int %s_run(const void *const *inputs, void *const *outputs, void *workspace);\n", name);
  fprintf(f, "\n/* %s_run with each input's actual dims: input_dims[i] points at input i's %s_INPUTi_RANK dims (an\n"
             " * entry or input_dims NULL: that input at its SHAPE). Dims outside the compiled ranges, or two inputs\n"
             " * disagreeing on a run-time dim, return 7 (PRIMC_ERR_SHAPE) before anything is read or written;\n"
             " * %s_check_dims says why. %s_run is %s_run_dims with every input at its SHAPE. */\n"
             "int %s_run_dims(const void *const *inputs, const int64_t *const *input_dims, void *const *outputs,\n"
             "    void *workspace);\n"
             "/* 0 when %s_run_dims takes input_dims, else 7 with a message (input, dim, value, range) in msg */\n"
             "int %s_check_dims(const int64_t *const *input_dims, char *msg, size_t len);\n",
          name, name, name, name, name, name, name, name);
  fprintf(f, "extern const int64_t %s_workspace_size;\n", name);
  fprintf(f, "\n/* The dims (%s_OUTPUTi_RANK of them) of output i as the last %s_run on this workspace wrote it:\n"
             " * its SHAPE, except for the dims marked <= above, whose size the data decides. Returns 0, or 1\n"
             " * (a NULL pointer, no such output). */\n"
             "int %s_output_dims(const void *workspace, int32_t output, int64_t *dims);\n",
          name, name, name);
  if (external)
    fprintf(f, "\n/* Maps the weights side file (%s.weights: a 64-byte header, then %s_WEIGHTS_SIZE bytes)\n"
               " * read-only; call once before %s_run. Returns 0, 1 (path is NULL), or 2 (weights missing or\n"
               " * corrupt: no such file, not a regular file, wrong size, or its header's magic, version, size\n"
               " * or checksum wrong; runtime/primc_rt.h's primc_weights_map_err says which). */\n"
               "int %s_load_weights(const char *path);\n",
            name, name, name, name);
  fprintf(f, "\n#ifdef __cplusplus\n}\n#endif\n#endif\n");
  int bad = ferror(f);
  bad |= fclose(f);
  return bad ? pc_fail(g, PC_ERR_IO, "cannot write %s", path) : PC_OK;
}

#if defined(__x86_64__)
#define HOST_ARCH "x86_64"
#elif defined(__aarch64__)
#define HOST_ARCH "aarch64"
#else
#define HOST_ARCH ""
#endif

/* the architecture of a --triple that is not the host's ("aarch64" of "aarch64-linux-gnu"), or 0 */
static int cross_arch(const pc_codegen_opts *o, char *arch, size_t n) {
  if (!o->triple) return 0;
  size_t k = strcspn(o->triple, "-");
  if (k == 0 || k >= n) return 0;
  memcpy(arch, o->triple, k);
  arch[k] = 0;
  return strcmp(arch, HOST_ARCH) != 0;
}

/* A host link takes CC (or cc) and the runtime beside primc; a cross link (--triple of another architecture)
 * takes PRIMC_CROSS_CC (or ARCH-linux-gnu-gcc, Debian's cross compiler) and the runtime built for ARCH in
 * DIR/ARCH/ (`make` builds build/aarch64/ where the cross compiler is installed). A cross executable is
 * static, so that it runs under qemu-user or on the target without the target's libraries. */
pc_status kir_link(pc_graph *g, const pc_codegen_opts *o, const char *out, const char *const *objs, int n_objs,
                   kir_link_kind kind) {
  char dir[2048], rt[2200], arch[32] = "", cc[128] = "";
  pc_runtime_dir(o, dir, sizeof dir);
  int cross = cross_arch(o, arch, sizeof arch);
  if (cross) snprintf(rt, sizeof rt, "%s/%s/libprimc_rt.a", dir, arch);
  else snprintf(rt, sizeof rt, "%s/libprimc_rt.a", dir);
  if (cross && kind != KIR_LINK_OBJECT && access(rt, R_OK) != 0)
    return !strcmp(arch, "aarch64")
               ? pc_fail(g, PC_ERR_UNSUPPORTED, "no primc runtime for %s: %s is missing (`make` builds it with "
                         "aarch64-linux-gnu-gcc, which tools/setup.sh installs)", o->triple, rt)
               : pc_fail(g, PC_ERR_UNSUPPORTED, "no primc runtime for %s: %s is missing (primc builds its runtime "
                         "for x86-64 and aarch64)", o->triple, rt);
  if (cross) snprintf(cc, sizeof cc, "%s-linux-gnu-gcc", arch);
  const char *env = getenv(cross ? "PRIMC_CROSS_CC" : "CC");
  pc_argv a = {.n = 0};
  pc_argv_add_words(&a, env && *env ? env : cross ? cc : "cc");
  if (kind == KIR_LINK_SHARED) pc_argv_add(&a, "-shared");
  else if (kind == KIR_LINK_OBJECT) pc_argv_add(&a, "-r"), pc_argv_add(&a, "-nostdlib"); /* objects joined, no libraries */
  else if (cross) pc_argv_add(&a, "-static");
  /* PRIMC_LDFLAGS: extra link flags, e.g. the sanitizer a runtime library was built with (PRIMC_CROSS_LDFLAGS
   * for a cross link: the host's sanitizer is not the target's) */
  pc_argv_add_words(&a, getenv(cross ? "PRIMC_CROSS_LDFLAGS" : "PRIMC_LDFLAGS"));
  pc_argv_add(&a, "-o");
  pc_argv_add_path(&a, out);
  for (int i = 0; i < n_objs; i++) pc_argv_add_path(&a, objs[i]);
  const char *tail[] = {rt, "-lm", "-lpthread"};
  for (size_t i = 0; kind != KIR_LINK_OBJECT && i < sizeof tail / sizeof *tail; i++) pc_argv_add(&a, tail[i]);
  return pc_argv_run(g, kind == KIR_LINK_OBJECT ? "joining the objects" : "linking", &a);
}

/* the weights after the object's code, as NAME_weights */
static pc_status append_weights(const kir_program *p, const char *path, const char *name) {
  char sym[300];
  snprintf(sym, sizeof sym, "%s_weights", name);
  return kir_elf_append_weights(p, path, sym);
}

pc_status kir_object_write(const kir_program *p, const pc_codegen_opts *o, const char *name, const char *path,
                           const kir_object_link *ln) {
  llvm_emit_opts lo = {LLVM_OUT_OBJ, path, name, o->triple, o->cpu, o->features, o->opt_level, o->weights_external, NULL, 0,
                       o->profile, o, ln->weights_sym, ln->weights_offset, ln->profile_sym, ln->profile_base};
  pc_status s = pc_llvm_emit(p, &lo);
  return s == PC_OK && !ln->weights_sym && !o->weights_external ? append_weights(p, path, name) : s;
}

void kir_object_path(const pc_codegen_opts *o, char *path, size_t n) {
  size_t len = strlen(o->output);
  snprintf(path, n, strstr(o->output + (len > 2 ? len - 2 : 0), ".o") ? "%s" : "%s.o", o->output);
}

void kir_output_names(const pc_codegen_opts *o, char *name, size_t name_size, char *stem, size_t stem_size) {
  if (o->name) snprintf(name, name_size, "%s", o->name);
  else pc_path_ident(o->output, name, PC_MAX_ENTRY_NAME + 1 < name_size ? PC_MAX_ENTRY_NAME + 1 : name_size);
  pc_path_stem(o->output, stem, stem_size);
}

static pc_status emit_all(kir_program *p, const pc_codegen_opts *o, const void *blob) {
  pc_graph *g = p->g;
  char name[256], stem[1024], obj[1100], aux[1100];
  kir_output_names(o, name, sizeof name, stem, sizeof stem);
  int linked = o->emit == PC_EMIT_EXE || o->emit == PC_EMIT_LIB;
  llvm_emit_opts lo = {LLVM_OUT_OBJ, o->output, name, o->triple, o->cpu, o->features, o->opt_level,
                       o->weights_external, blob, o->emit == PC_EMIT_EXE, o->profile, o, NULL, 0, NULL, 0};
  if (o->emit == PC_EMIT_LLVM) lo.kind = LLVM_OUT_IR;
  if (o->emit == PC_EMIT_ASM) lo.kind = LLVM_OUT_ASM;
  if (o->emit == PC_EMIT_OBJ) {
    kir_object_path(o, obj, sizeof obj);
    lo.path = obj;
  }
  if (linked) {
    snprintf(obj, sizeof obj, "%s.primc-tmp.o", o->output);
    lo.path = obj;
  }
  pc_status s = pc_llvm_emit(p, &lo);
  if (s == PC_OK && lo.kind == LLVM_OUT_OBJ && !o->weights_external) s = append_weights(p, lo.path, name);
  if (s == PC_OK && linked) pc_progress(o, "link", 0, 0);
  const char *objs[1] = {obj};
  if (s == PC_OK && linked) s = kir_link(g, o, o->output, objs, 1, o->emit == PC_EMIT_LIB ? KIR_LINK_SHARED : KIR_LINK_EXE);
  if (linked) unlink(obj);
  if (s == PC_OK && (o->emit == PC_EMIT_OBJ || o->emit == PC_EMIT_LIB)) {
    snprintf(aux, sizeof aux, "%s.h", stem);
    s = kir_header_write(p, aux, name, o->weights_external, NULL);
  }
  if (s == PC_OK && o->weights_external) {
    snprintf(aux, sizeof aux, "%s.weights", o->emit == PC_EMIT_EXE ? o->output : stem);
    s = kir_weights_write_file(p, aux);
  }
  return s;
}

pc_status kir_build_cpu(pc_graph *g, const pc_codegen_opts *opts, kir_program *p) {
  pc_status s = kir_build_tuned(g, p, opts->triple ? NULL : opts->autotune, /* rows timed on the host only */
                                opts->conv_pins, opts->n_conv_pins);
  p->sizes_vary = opts->dyn != NULL;
  if (s == PC_OK && !opts->triple) s = kir_pack_weights(p); /* panels for this machine's GEMM */
  char arch[32] = "";
  p->cross_isa = cross_arch(opts, arch, sizeof arch) && !strcmp(arch, "aarch64") ? PRIMC_ISA_NEON : 0;
  if (s == PC_OK && p->cross_isa) s = kir_pack_cross_weights(p); /* ... or for the target's */
  if (s == PC_OK) kir_pool_calls(p); /* every CPU's runtime has primc_k_maxpool */
  return s != PC_OK && g->status ? g->status : s;
}

pc_status pc_codegen_cpu(pc_graph *g, const pc_codegen_opts *opts) {
  if (pc_dyn_bucketed(opts->dyn)) return kir_codegen_buckets(g, opts); /* codegen/buckets.c */
  kir_program p;
  pc_progress(opts, "kernel IR", 0, 0);
  pc_status s = kir_build_cpu(g, opts, &p);
  if (s == PC_OK && opts->dyn) s = kir_dyn_fit(&p, opts);
  if (s != PC_OK) return g->status ? g->status : s;
  /* the weights go into objects and side files streamed, after LLVM: only IR and assembly hold them inline */
  int inline_weights = (opts->emit == PC_EMIT_LLVM || opts->emit == PC_EMIT_ASM) && !opts->weights_external;
  void *blob = inline_weights ? kir_weights_blob(&p) : NULL;
  if (inline_weights && !blob) return pc_fail(g, PC_ERR_NOMEM, "out of memory for the weights");
  s = emit_all(&p, opts, blob);
  free(blob);
  return s;
}
