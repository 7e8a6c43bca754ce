/*
 * memory.c — aligned allocation for buffers the kernels stream through.
 * Buffers of 2 MiB or more are 2 MiB-aligned and advised as huge-page
 * candidates (where the kernel's transparent huge pages are in "madvise"
 * mode): fewer TLB misses when a kernel walks them, and far fewer page
 * faults the first time they are touched.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"

enum { HUGE_PAGE = 2 << 20 };

void *ra_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) return NULL;
    size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
    if (posix_memalign(&p, align, bytes) != 0) return NULL;
#if defined(MADV_HUGEPAGE)
    if (align == HUGE_PAGE) madvise(p, bytes & ~(size_t)(HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
    return p;
}
