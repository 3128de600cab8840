/* codegen/files.c: file names and files, shared by the backends. */
#include "codegen/codegen.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

void pc_path_stem(const char *path, char *out, size_t n) {
  snprintf(out, n, "%s", path);
  char *dot = strrchr(out, '.'), *slash = strrchr(out, '/');
  if (dot && (!slash || dot > slash)) *dot = 0;
}

void pc_path_ident(const char *path, char *out, size_t n) {
  char stem[1024];
  pc_path_stem(path, stem, sizeof stem);
  const char *base = strrchr(stem, '/') ? strrchr(stem, '/') + 1 : stem;
  size_t k = 0;
  if (!isalpha((unsigned char)*base) && *base != '_' && k + 1 < n) out[k++] = 'm';
  for (; *base && k + 1 < n; base++) out[k++] = isalnum((unsigned char)*base) ? *base : '_';
  out[k] = 0;
  if (!k) snprintf(out, n, "model");
}

int pc_entry_name_ok(const char *nm) {
  size_t n = strlen(nm);
  int ok = n > 0 && n <= PC_MAX_ENTRY_NAME && (isalpha((unsigned char)nm[0]) || nm[0] == '_');
  for (size_t i = 0; ok && i < n; i++) ok = isalnum((unsigned char)nm[i]) || nm[i] == '_';
  return ok;
}

pc_status pc_output_check(pc_graph *g, const pc_codegen_opts *o) {
  if (o->name && !pc_entry_name_ok(o->name))
    return pc_fail(g, PC_ERR_ATTR, "--name '%.*s' is not a C identifier of at most %d characters", 300, o->name,
                   PC_MAX_ENTRY_NAME);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", o->output);
  char *slash = strrchr(dir, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == dir) dir[1] = 0;
  else *slash = 0;
  if (access(dir, W_OK) != 0)
    return pc_fail(g, PC_ERR_IO, "cannot write %s: its directory %s %s", o->output, dir,
                   access(dir, F_OK) != 0 ? "does not exist" : "is not writable");
  return PC_OK;
}

pc_status pc_file_write(pc_graph *g, const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return pc_fail(g, PC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  int bad = n && fwrite(data, 1, n, f) != n, err = bad ? errno : 0;
  if (fclose(f) != 0 && !bad) bad = 1, err = errno; /* a full disk shows at the flush */
  return bad ? pc_fail(g, PC_ERR_IO, "cannot write %s: %s", path, strerror(err)) : PC_OK;
}

void pc_runtime_dir(const pc_codegen_opts *o, char *out, size_t n) {
  if (o->runtime_dir) {
    snprintf(out, n, "%s", o->runtime_dir);
    return;
  }
  ssize_t k = readlink("/proc/self/exe", out, n - 1); /* the running primc (or the test binary) */
  out[k > 0 ? k : 0] = 0;
  char *slash = strrchr(out, '/');
  if (slash) *slash = 0;
  else snprintf(out, n, ".");
}

void pc_put_c_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 32 || c > 126 || c == '*' || c == '?') fprintf(f, "\\%03o", c); /* '?': no trigraphs */
    else fputc(c, f);
  }
  fputc('"', f);
}

/* the comment-safe form of *c, s's character (s: the text, for the one before): neither end of a comment */
static char comment_char(const char *s, const char *c) {
  if (*c == '\n' || *c == '\r') return ' ';
  if (c > s && ((*c == '/' && c[-1] == '*') || (*c == '*' && c[-1] == '/'))) return '|';
  return *c;
}

void pc_c_comment_text(char *buf, size_t len, const char *s) {
  size_t k = 0;
  for (const char *c = s; c && *c && k + 1 < len; c++) buf[k++] = comment_char(s, c);
  if (len) buf[k] = 0;
}

void pc_put_c_comment(FILE *f, const char *s) {
  for (const char *c = s; c && *c; c++) fputc(comment_char(s, c), f);
}
