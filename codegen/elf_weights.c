/* codegen/elf_weights.c: puts the weights into an object LLVM wrote without them: a section of their own
 * appended to the ELF64 relocatable file and the symbol the code reads them by defined there, the bytes
 * streamed from the constants (LLVM would hold the blob as a constant and its MC layer the section again). */
#include "codegen/kir.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WEIGHTS_SECTION ".rodata.primc_weights"

static int read_whole(int fd, unsigned char **out, size_t *n) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) return 0;
  unsigned char *b = malloc((size_t)st.st_size);
  if (!b || !kir_pread_all(fd, b, (size_t)st.st_size, 0)) return free(b), 0;
  *out = b, *n = (size_t)st.st_size;
  return 1;
}

/* the undefined symbol named sym in the object's symbol table, NULL when absent or the tables are bad */
static Elf64_Sym *find_undefined(unsigned char *b, size_t n, const Elf64_Shdr *sh, int nsec, const char *sym) {
  for (int i = 0; i < nsec; i++) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_entsize != sizeof(Elf64_Sym) || sh[i].sh_link >= (unsigned)nsec)
      continue;
    const Elf64_Shdr *st = &sh[sh[i].sh_link];
    if (sh[i].sh_offset > n || sh[i].sh_size > n - sh[i].sh_offset || st->sh_offset > n || st->sh_size > n - st->sh_offset)
      return NULL;
    Elf64_Sym *syms = (Elf64_Sym *)(void *)(b + sh[i].sh_offset);
    const char *names = (const char *)b + st->sh_offset;
    size_t len = strlen(sym);
    for (size_t k = 0; k < sh[i].sh_size / sizeof *syms; k++)
      if (syms[k].st_shndx == SHN_UNDEF && syms[k].st_name + len < st->sh_size &&
          memcmp(names + syms[k].st_name, sym, len + 1) == 0)
        return &syms[k];
  }
  return NULL;
}

/* New layout: the object as LLVM wrote it (its symbol patched), the weights 64-byte aligned, a copy of the
 * section name table with the new name, and the section headers with the new one last; the old table and
 * headers stay behind as unused bytes. */
static pc_status write_program(void *ctx, int fd, off_t at) {
  const kir_program *p = ctx;
  return kir_weights_write(p, fd, (int64_t)at);
}

pc_status kir_elf_append_weights(const kir_program *p, const char *path, const char *sym) {
  return kir_elf_append(p->g, path, sym, p->weights_size, write_program, (void *)p);
}

pc_status kir_elf_append(pc_graph *g, const char *path, const char *sym, int64_t size,
                         pc_status (*write)(void *ctx, int fd, off_t at), void *ctx) {
  int fd = open(path, O_RDWR | O_CLOEXEC);
  unsigned char *b = NULL;
  size_t n = 0;
  if (fd < 0 || !read_whole(fd, &b, &n)) {
    if (fd >= 0) close(fd);
    return pc_fail(g, PC_ERR_IO, "cannot read the object %s", path);
  }
  Elf64_Ehdr *eh = (Elf64_Ehdr *)(void *)b;
  const char *bad = NULL;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_type != ET_REL)
    bad = "not an ELF64 little-endian relocatable object";
  else if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0 || eh->e_shnum >= SHN_LORESERVE - 1 ||
           eh->e_shstrndx >= eh->e_shnum || eh->e_shoff > n || (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > n - eh->e_shoff)
    bad = "unexpected section header table";
  int nsec = bad ? 0 : eh->e_shnum;
  Elf64_Shdr *sh = bad ? NULL : malloc(sizeof *sh * (size_t)(nsec + 1));
  if (!bad && !sh) bad = "out of memory";
  if (!bad) memcpy(sh, b + eh->e_shoff, sizeof *sh * (size_t)nsec);
  Elf64_Shdr *names = bad ? NULL : &sh[eh->e_shstrndx];
  if (!bad && (names->sh_offset > n || names->sh_size > n - names->sh_offset)) bad = "bad section name table";
  Elf64_Sym *s = bad ? NULL : find_undefined(b, n, sh, nsec, sym);
  pc_status st = PC_OK;
  if (!bad && !s) {
    /* no code reads a weight (LLVM dropped the unused declaration): nothing to add */
  } else if (bad) {
    st = pc_fail(g, PC_ERR_INTERNAL, "weights into %s: %s", path, bad);
  } else {
    size_t wsize = (size_t)size, name_len = strlen(WEIGHTS_SECTION) + 1;
    off_t woff = (off_t)((n + 63) / 64 * 64), noff = woff + (off_t)wsize;
    off_t shoff = (noff + (off_t)(names->sh_size + name_len) + 7) / 8 * 8;
    sh[nsec] = (Elf64_Shdr){.sh_name = (Elf64_Word)names->sh_size, .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC,
                            .sh_offset = (Elf64_Off)woff, .sh_size = wsize, .sh_addralign = 64};
    s->st_shndx = (Elf64_Section)nsec;
    s->st_value = 0;
    s->st_size = wsize;
    s->st_info = ELF64_ST_INFO(ELF64_ST_BIND(s->st_info), STT_OBJECT);
    int ok = kir_pwrite_all(fd, b, n, 0) && write(ctx, fd, woff) == PC_OK;
    ok = ok && kir_pwrite_all(fd, b + names->sh_offset, names->sh_size, noff) &&
         kir_pwrite_all(fd, WEIGHTS_SECTION, name_len, noff + (off_t)names->sh_size);
    names->sh_offset = (Elf64_Off)noff;
    names->sh_size += name_len;
    eh->e_shoff = (Elf64_Off)shoff;
    eh->e_shnum = (Elf64_Half)(nsec + 1);
    ok = ok && kir_pwrite_all(fd, sh, sizeof *sh * (size_t)(nsec + 1), shoff) && kir_pwrite_all(fd, eh, sizeof *eh, 0);
    if (!ok) st = g->status != PC_OK ? g->status : pc_fail(g, PC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  }
  free(sh);
  free(b);
  if (close(fd) != 0 && st == PC_OK) st = pc_fail(g, PC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  return st;
}
