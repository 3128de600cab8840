/* runtime/arch.h: the instruction-set family the runtime is built for. A kernel row's code compiles only on
 * its family (PRIMC_X86 or PRIMC_ARM64); the row tables list a family's rows under the same test. */
#ifndef PRIMC_ARCH_H
#define PRIMC_ARCH_H

#if defined(__x86_64__) || defined(__i386__)
#define PRIMC_X86 1
#else
#define PRIMC_X86 0
#endif

#if defined(__aarch64__)
#define PRIMC_ARM64 1
#else
#define PRIMC_ARM64 0
#endif

#endif
