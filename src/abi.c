/*
 * abi.c — reading a caller's versioned struct (ropeattn.h, "Structs that
 * grow"): its first member is the struct_size the caller's header gave it.
 */
#include <string.h>

#include "internal.h"

ra_status ra_struct_read(void *dst, size_t size, size_t min_size, const void *src,
                         const char *what)
{
    if (!src) return ra_fail(RA_ERR_NULL, "%s: NULL", what);
    size_t n;
    memcpy(&n, src, sizeof n);
    if (n < min_size)
        return ra_fail(RA_ERR_ARGUMENT, "%s: struct_size %zu, not sizeof(%s) %zu (start from "
                       "its _init or _default function)", what, n, what, size);
    /* A newer header's fields beyond ours: refused unless all zero. */
    for (size_t i = size; i < n; i++)
        if (((const unsigned char *)src)[i])
            return ra_fail(RA_ERR_UNSUPPORTED, "%s: byte %zu of %zu is set, a field of a "
                           "newer ropeattn.h than this library (%s) knows", what, i, n,
                           RA_VERSION_STRING);
    memset(dst, 0, size);
    memcpy(dst, src, n < size ? n : size);
    memcpy(dst, &size, sizeof size);
    return RA_OK;
}
