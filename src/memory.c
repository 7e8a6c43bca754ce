/*
 * memory.c — every allocation the library makes (memory.h says what stays
 * outside), each through fault.h first.
 *
 * ra_alloc is for buffers the kernels stream through: 64-byte aligned, and
 * from 2 MiB up 2 MiB-aligned and advised as huge-page candidates (where
 * the kernel's transparent huge pages are in "madvise" mode): fewer TLB
 * misses when a kernel walks them, and far fewer page faults the first time
 * they are touched.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fault.h"
#include "memory.h"

enum { HUGE_PAGE = 2 << 20 };

/* 1 (errno ENOMEM) when fault injection says this allocation fails. */
static int injected(void)
{
    if (!ra_fault_next()) return 0;
    errno = ENOMEM;
    return 1;
}

void *ra_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0 || injected()) return NULL;
    size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
    int err = posix_memalign(&p, align, bytes);
    if (err != 0) {
        errno = err;
        return NULL;
    }
#if defined(MADV_HUGEPAGE)
    if (align == HUGE_PAGE) madvise(p, bytes & ~(size_t)(HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
    return p;
}

void *ra_malloc(size_t bytes) { return injected() ? NULL : malloc(bytes); }

void *ra_calloc(size_t n, size_t size) { return injected() ? NULL : calloc(n, size); }

char *ra_strdup(const char *s) { return injected() ? NULL : strdup(s); }

void ra_free(void *p) { free(p); }

void *ra_map_readonly(int fd, size_t bytes)
{
    if (injected()) return NULL;
    void *p = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ra_unmap(void *p, size_t bytes) { munmap(p, bytes); }
