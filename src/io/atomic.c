/*
 * atomic.c — output files written all at once or not at all: the bytes go to
 * a new temporary file in the target's folder, which is then renamed over
 * the target.  Only a regular file (or a name not yet taken) is ever
 * replaced, through a symbolic link if the path is one, and the replacement
 * keeps the old file's permission bits.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
#include "io_message.h"
#include "memory.h"

/* The temporary file's name: short, so that a target name of NAME_MAX bytes
 * still has one, and hidden. */
#define TEMP_NAME ".ropeattn-XXXXXX"
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

/* What kind of file st is, in words, for messages. */
static const char *file_kind(const struct stat *st)
{
    if (S_ISDIR(st->st_mode)) return "a folder";
    if (S_ISFIFO(st->st_mode)) return "a FIFO";
    if (S_ISSOCK(st->st_mode)) return "a socket";
    if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) return "a device";
    return "not a regular file";
}

/* A copy of path's folder part ("." for a bare name), or NULL. */
static char *folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t len = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    char *folder = ra_malloc(len + 1);
    if (folder == NULL) return NULL;
    memcpy(folder, slash ? path : ".", len);
    folder[len] = '\0';
    return folder;
}

ra_status ra_io_output_prepare(ra_io_output *out, const char *path, char *msg, size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (out == NULL || path == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "output: out or path is NULL");
    *out = (ra_io_output){.path = path, .fd = -1};
    struct stat link_st, st;
    if (lstat(path, &link_st) == 0) {
        if (stat(path, &st) != 0)
            return ra_io_fail(msg, msg_len, RA_ERR_IO, "cannot write %s: it is a symbolic link "
                              "to a file that cannot be reached: %s", path, strerror(errno));
        if (!S_ISREG(st.st_mode))
            return ra_io_fail(msg, msg_len, RA_ERR_IO, "cannot write %s: it is %s%s; only a "
                              "regular file is replaced", path,
                              S_ISLNK(link_st.st_mode) ? "a symbolic link to " : "",
                              file_kind(&st));
        /* through a symbolic link: the file it names is replaced */
        out->target = S_ISLNK(link_st.st_mode) ? realpath(path, NULL) : ra_strdup(path);
        if (out->target == NULL)
            return ra_io_fail(msg, msg_len, ra_io_errno_status(errno), "cannot write %s: %s",
                              path, strerror(errno));
        out->exists = 1;
        out->dev = st.st_dev;
        out->ino = st.st_ino;
        out->mode = st.st_mode & 07777;
        out->uid = st.st_uid;
        out->gid = st.st_gid;
        return RA_OK;
    }
    if (errno != ENOENT)
        return ra_io_fail(msg, msg_len, ra_io_errno_status(errno), "cannot write %s: %s", path,
                          strerror(errno));
    char *folder = folder_of(path);
    if (folder == NULL) return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "out of memory");
    ra_status status = RA_OK;
    if (stat(folder, &st) != 0)
        status = ra_io_fail(msg, msg_len, RA_ERR_IO, "cannot write %s: folder %s: %s", path,
                            folder, strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        status = ra_io_fail(msg, msg_len, RA_ERR_IO, "cannot write %s: %s is not a folder",
                            path, folder);
    out->folder_dev = st.st_dev;
    out->folder_ino = st.st_ino;
    ra_free(folder);
    if (status != RA_OK) return status;
    out->target = ra_strdup(path);
    if (out->target == NULL) return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "out of memory");
    return RA_OK;
}

int ra_io_output_same(const ra_io_output *a, const ra_io_output *b)
{
    if (a == NULL || b == NULL || a->target == NULL || b->target == NULL) return 0;
    if (a->exists || b->exists)
        return a->exists && b->exists && a->dev == b->dev && a->ino == b->ino;
    const char *name_a = strrchr(a->target, '/'), *name_b = strrchr(b->target, '/');
    return strcmp(name_a ? name_a + 1 : a->target, name_b ? name_b + 1 : b->target) == 0 &&
           a->folder_dev == b->folder_dev && a->folder_ino == b->folder_ino;
}

ra_status ra_io_output_create(ra_io_output *out, char *msg, size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (out == NULL || out->target == NULL || out->temp != NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_ARGUMENT, "output: not prepared, or created");
    const char *slash = strrchr(out->target, '/');
    size_t folder_len = slash ? (size_t)(slash - out->target + 1) : 0; /* keeps the '/' */
    size_t len = folder_len + sizeof TEMP_NAME - 1;
    if (len >= PATH_MAX)
        return ra_io_fail(msg, msg_len, RA_ERR_IO, "cannot write %s: its folder's name is too "
                          "long", out->path);
    char *name = ra_malloc(len + 1);
    if (name == NULL) return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "out of memory");
    memcpy(name, out->target, folder_len);
    memcpy(name + folder_len, TEMP_NAME, sizeof TEMP_NAME);
    int fd = -1;
    for (unsigned attempt = 0; attempt < TEMP_ATTEMPTS && fd < 0; attempt++) {
        fill_temp_name(name, len, attempt);
        fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int saved = errno;
        ra_free(name);
        return ra_io_fail(msg, msg_len, ra_io_errno_status(saved), "%s: cannot create file: %s",
                          out->path, strerror(saved));
    }
    /* A replaced file keeps its mode, and its owner where we may set it. */
    if (out->exists) {
        if (fchown(fd, out->uid, out->gid) != 0) { /* not ours to give: keep our own */ }
        if (fchmod(fd, out->mode) != 0) {
            int saved = errno;
            close(fd);
            unlink(name);
            ra_free(name);
            return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: cannot set the permissions: %s",
                              out->path, strerror(saved));
        }
    }
    out->fd = fd;
    out->temp = name;
    return RA_OK;
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

ra_status ra_io_write_parts(int fd, const char *name, const void *const *parts,
                            const size_t *sizes, int n_parts, char *msg, size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (name == NULL || (n_parts > 0 && (parts == NULL || sizes == NULL)))
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "write: name, parts or sizes is NULL");
    if (fd < 0 || n_parts < 0)
        return ra_io_fail(msg, msg_len, RA_ERR_ARGUMENT, "%s: bad descriptor %d or part count "
                          "%d", name, fd, n_parts);
    for (int i = 0; i < n_parts; i++)
        if (parts[i] == NULL && sizes[i] > 0)
            return ra_io_fail(msg, msg_len, RA_ERR_NULL, "%s: part %d of %zu bytes is NULL",
                              name, i, sizes[i]);
    for (int i = 0; i < n_parts; i++)
        if (sizes[i] > 0 && write_all(fd, parts[i], sizes[i]) != 0)
            return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: cannot write file: %s", name,
                              strerror(errno));
    if (fsync(fd) != 0)
        return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: cannot write file: %s", name,
                          strerror(errno));
    return RA_OK;
}

ra_status ra_io_output_close(ra_io_output *out, char *msg, size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (out == NULL || out->fd < 0)
        return ra_io_fail(msg, msg_len, RA_ERR_ARGUMENT, "output: no open file");
    int failed = close(out->fd) != 0;
    out->fd = -1;
    if (failed)
        return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: cannot close file: %s", out->path,
                          strerror(errno));
    return RA_OK;
}

ra_status ra_io_output_commit(ra_io_output *out, char *msg, size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (out == NULL || out->temp == NULL || out->fd >= 0)
        return ra_io_fail(msg, msg_len, RA_ERR_ARGUMENT, "output: nothing closed to commit");
    if (rename(out->temp, out->target) != 0)
        return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: cannot rename the temporary file into "
                          "place: %s", out->path, strerror(errno));
    ra_free(out->temp);
    out->temp = NULL;
    return RA_OK;
}

void ra_io_output_discard(ra_io_output *out)
{
    if (out == NULL) return;
    if (out->fd >= 0) close(out->fd);
    if (out->temp != NULL) unlink(out->temp);
    ra_free(out->temp);
    ra_free(out->target);
    *out = (ra_io_output){.fd = -1};
}

ra_status ra_write_file_atomic(const char *path, const void *const *parts,
                               const size_t *sizes, int n_parts, char *msg,
                               size_t msg_len)
{
    ra_io_output out;
    ra_status status = ra_io_output_prepare(&out, path, msg, msg_len);
    if (status == RA_OK) status = ra_io_output_create(&out, msg, msg_len);
    if (status == RA_OK) status = ra_io_write_parts(out.fd, path, parts, sizes, n_parts, msg,
                                                    msg_len);
    if (status == RA_OK) status = ra_io_output_close(&out, msg, msg_len);
    if (status == RA_OK) status = ra_io_output_commit(&out, msg, msg_len);
    ra_io_output_discard(&out);
    return status;
}
