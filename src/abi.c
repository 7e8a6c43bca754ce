/*
 * abi.c — reading a caller's versioned struct (ropeattn.h, "Structs that
 * grow"): its first member is the struct_size the caller's header gave it.
 */
#include <string.h>

#include "internal.h"

ra_status ra_struct_read(void *dst, size_t size, size_t min_size, const void *src)
{
    if (!src) return RA_ERR_NULL;
    size_t n;
    memcpy(&n, src, sizeof n);
    if (n < min_size) return RA_ERR_ARGUMENT;
    /* A newer header's fields beyond ours: refused unless all zero. */
    for (size_t i = size; i < n; i++)
        if (((const unsigned char *)src)[i]) return RA_ERR_UNSUPPORTED;
    memset(dst, 0, size);
    memcpy(dst, src, n < size ? n : size);
    memcpy(dst, &size, sizeof size);
    return RA_OK;
}
