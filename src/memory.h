/*
 * memory.h — every allocation the library makes goes through these
 * (internal).  They behave as their libc namesakes (NULL with errno ENOMEM
 * on failure) and each asks fault.h first, so the allocation-failure test
 * can fail any one of them.  Free everything with ra_free.
 *
 * What does not come through here, and why:
 *   - libc's own: fopen's FILE (a failure is RA_ERR_IO naming errno) and
 *     each worker thread's stack (pthread_create; context.c puts the thread
 *     start itself through fault.h, so that failure path is tested too);
 *   - cJSON's nodes and printed text: cJSON's hooks (cJSON_InitHooks) are
 *     process-wide and belong to the application, so the library leaves
 *     them alone; the allocation-failure test installs ra_malloc / ra_free
 *     there, and src/io reads a NULL with errno ENOMEM as out of memory;
 *   - OpenBLAS's buffers, which it allocates for itself on its first call
 *     and keeps for the process (the library cannot see or fail them).
 */
#ifndef RA_MEMORY_H
#define RA_MEMORY_H

#include <stddef.h>

/* 64-byte aligned (2 MiB aligned and advised as huge-page candidates from
 * 2 MiB up); NULL for 0 bytes. */
void *ra_alloc(size_t bytes);
void *ra_malloc(size_t bytes);
void *ra_calloc(size_t n, size_t size);
char *ra_strdup(const char *s);
void ra_free(void *p); /* NULL is allowed */

/* The first bytes of file descriptor fd mapped read-only (private), or NULL
 * with errno set; undo with ra_unmap. */
void *ra_map_readonly(int fd, size_t bytes);
void ra_unmap(void *p, size_t bytes);

#endif
