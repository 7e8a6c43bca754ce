/*
 * io_open.c — the one way the readers open a file.  A plain open() of a FIFO
 * waits for a writer forever, so the file is opened with O_NONBLOCK (which
 * makes no difference to reading a regular file) and its type checked on the
 * descriptor itself, so that nothing can swap the file in between.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_message.h"
#include "io_open.h"

/* What a file that is not a regular one is, for the message. */
static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    if (S_ISSOCK(mode)) return "a socket";
    return "a special file";
}

ra_status ra_io_open_regular(const char *path, int *fd, uint64_t *size, char *msg,
                             size_t msg_len)
{
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) {
        int err = errno;
        struct stat info;
        /* A socket cannot be opened at all (ENXIO): say what it is. */
        if (err == ENXIO && stat(path, &info) == 0 && S_ISSOCK(info.st_mode))
            return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: not a regular file (a socket)",
                              path);
        return ra_io_fail(msg, msg_len, ra_io_errno_status(err), "%s: cannot open file: %s",
                          path, strerror(err));
    }
    struct stat info;
    ra_status status = RA_OK;
    if (fstat(*fd, &info) != 0)
        status = ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: cannot stat file: %s", path,
                            strerror(errno));
    else if (!S_ISREG(info.st_mode))
        status = ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: not a regular file (%s)", path,
                            file_kind(info.st_mode));
    if (status != RA_OK) {
        close(*fd);
        *fd = -1;
        return status;
    }
    *size = (uint64_t)info.st_size;
    return RA_OK;
}
