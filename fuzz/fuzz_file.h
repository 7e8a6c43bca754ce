/*
 * fuzz_file.h — hands a fuzzer's bytes to a reader that takes a path: they
 * are written to one in-memory file (memfd, created once per process) and
 * reached as /proc/self/fd/N, so each run costs no disk I/O.
 */
#ifndef RA_FUZZ_FILE_H
#define RA_FUZZ_FILE_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Replaces the file's contents with data[0, n) and returns its path, or
 * NULL if the file cannot be written (the caller then skips the input). */
static const char *fuzz_file(const uint8_t *data, size_t n)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("ropeattn-fuzz", MFD_CLOEXEC);
        if (fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) return NULL;
    for (size_t done = 0; done < n;) {
        ssize_t w = pwrite(fd, data + done, n - done, (off_t)done);
        if (w <= 0) return NULL;
        done += (size_t)w;
    }
    return path;
}

#endif
