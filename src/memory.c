/* memory.c — aligned allocation for buffers the kernels stream through. */
#include <stdlib.h>

#include "internal.h"

void *ra_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) return NULL;
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    return p;
}
