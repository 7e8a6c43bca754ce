/*
 * atomic.c — writes a file all at once or not at all: the bytes go to a new
 * temporary file beside the target, which is then renamed over it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
#include "io_message.h"
#include "memory.h"

#define TEMP_SUFFIX ".tmp.XXXXXX"
#define TEMP_ATTEMPTS 100

/* Replaces the trailing XXXXXX of name with letters and digits that vary with
 * the time, the process, the thread's stack and the attempt. */
static void fill_temp_name(char *name, size_t len, unsigned attempt)
{
    static const char alphabet[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t x = (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 30) ^
                 ((uint64_t)getpid() << 16) ^ (uint64_t)(uintptr_t)&now ^
                 ((uint64_t)attempt * 0x9E3779B97F4A7C15ull);
    for (size_t i = len - 6; i < len; i++) {
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdull;
        x ^= x >> 29;
        name[i] = alphabet[x % (sizeof alphabet - 1)];
    }
}

/* Creates a new temporary file named path + ".tmp.XXXXXX" (mode 0666 less
 * the umask, as for any new file).  Returns its descriptor, or -1 with errno
 * set; *temp_name (malloc'ed) is set only on success. */
static int create_temp(const char *path, char **temp_name)
{
    size_t path_len = strlen(path);
    size_t len = path_len + sizeof TEMP_SUFFIX - 1;
    char *name = ra_malloc(len + 1);
    if (name == NULL) return -1;
    memcpy(name, path, path_len);
    memcpy(name + path_len, TEMP_SUFFIX, sizeof TEMP_SUFFIX);
    for (unsigned attempt = 0; attempt < TEMP_ATTEMPTS; attempt++) {
        fill_temp_name(name, len, attempt);
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *temp_name = name;
            return fd;
        }
        if (errno != EEXIST) break;
    }
    int saved = errno;
    ra_free(name);
    errno = saved;
    return -1;
}

/* Writes all n bytes, retrying short writes and interruptions.  Returns 0, or
 * -1 with errno set. */
static int write_all(int fd, const unsigned char *bytes, size_t n)
{
    while (n > 0) {
        ssize_t done = write(fd, bytes, n);
        if (done < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        bytes += done;
        n -= (size_t)done;
    }
    return 0;
}

/* Writes the parts, flushes them to disk and closes fd (always).  Returns 0,
 * or -1 with errno set and *what naming the step that failed. */
static int fill_and_close(int fd, const void *const *parts, const size_t *sizes,
                          int n_parts, const char **what)
{
    *what = "cannot write file";
    for (int i = 0; i < n_parts; i++) {
        if (sizes[i] > 0 && write_all(fd, parts[i], sizes[i]) != 0) {
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
    }
    if (fsync(fd) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    *what = "cannot close file";
    return close(fd);
}

ra_status ra_write_file_atomic(const char *path, const void *const *parts,
                               const size_t *sizes, int n_parts, char *msg,
                               size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (path == NULL || (n_parts > 0 && (parts == NULL || sizes == NULL)))
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "atomic write: path, parts or sizes is NULL");
    if (n_parts < 0)
        return ra_io_fail(msg, msg_len, RA_ERR_ARGUMENT, "%s: negative part count %d", path,
                          n_parts);
    for (int i = 0; i < n_parts; i++)
        if (parts[i] == NULL && sizes[i] > 0)
            return ra_io_fail(msg, msg_len, RA_ERR_NULL, "%s: part %d of %zu bytes is NULL",
                              path, i, sizes[i]);

    char *temp_name = NULL;
    int fd = create_temp(path, &temp_name);
    if (fd < 0)
        return ra_io_fail(msg, msg_len, ra_io_errno_status(errno), "%s: cannot create file: %s",
                          path, strerror(errno));
    const char *what = NULL;
    int failed = fill_and_close(fd, parts, sizes, n_parts, &what) != 0;
    if (!failed && rename(temp_name, path) != 0) {
        what = "cannot rename the temporary file into place";
        failed = 1;
    }
    if (failed) {
        int saved = errno;
        unlink(temp_name);
        ra_free(temp_name);
        return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: %s: %s", path, what, strerror(saved));
    }
    ra_free(temp_name);
    return RA_OK;
}
