/* runtime/primc_file.h: opens a file to read only when it is a regular file (never blocks on a FIFO); header-only, used by every reader. */
#ifndef PRIMC_FILE_H
#define PRIMC_FILE_H

/* Every reader of a user-named path (ONNX and text models, safetensors, .npy inputs, the compiled
 * model's weights file) opens it here: a FIFO would block open() until a writer came (forever, when
 * none does), a directory opens and then fails to read with an obscure error, a device may never
 * end. The file is opened with O_NONBLOCK (a FIFO's open returns at once), checked with fstat to be
 * a regular file, and only then read. Header-only so that the runtime (which knows nothing of the
 * compiler) and the compiler's frontend share it without a link dependency. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* what st's file type is, for an error message */
static inline const char *primc_file_kind(const struct stat *st) {
  if (S_ISDIR(st->st_mode)) return "a directory";
  if (S_ISFIFO(st->st_mode)) return "a FIFO";
  if (S_ISCHR(st->st_mode)) return "a character device";
  if (S_ISBLK(st->st_mode)) return "a block device";
  if (S_ISSOCK(st->st_mode)) return "a socket";
  return "not a regular file";
}

/* A read-only descriptor of the regular file at path, its size in *size (may be NULL); -1 with a
 * one-line reason naming the path in err (may be NULL) when it cannot be opened or is not a regular file. */
static inline int primc_file_open_fd(const char *path, long long *size, char *err, size_t errlen) {
  if (!path) {
    if (err && errlen) snprintf(err, errlen, "no path given");
    return -1;
  }
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (err && errlen) snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    if (err && errlen) snprintf(err, errlen, "%s: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    if (err && errlen) snprintf(err, errlen, "%s: not a regular file (%s)", path, primc_file_kind(&st));
    close(fd);
    return -1;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if (size) *size = (long long)st.st_size;
  return fd;
}

/* the same as a stdio stream opened "rb" */
static inline FILE *primc_file_open(const char *path, long long *size, char *err, size_t errlen) {
  int fd = primc_file_open_fd(path, size, err, errlen);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    if (err && errlen) snprintf(err, errlen, "%s: %s", path, strerror(errno));
    close(fd);
  }
  return f;
}

#endif
