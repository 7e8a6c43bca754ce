/* cli_main.c — what each program of the tool (ropeattn and the developer
 * programs ropeattn-bench, ropeattn-demo, ropeattn-train-demo) does around
 * its command: the standard descriptors held, the signals, the
 * environment's checks and the standard output's. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "outputs.h"
#include "progress.h"

/* Holds each of descriptors 0, 1 and 2 that the run was started without
 * on /dev/null, read-only: else the first file opened (an output's
 * temporary file) would take it, and the report (stdout) or a progress
 * line (stderr) would be written into that output.  Writes to a held one
 * fail, as to a closed one.  Returns 0, or -1 when one cannot be held. */
static int hold_standard_descriptors(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF && open("/dev/null", O_RDONLY) != fd)
            return -1;
    return 0;
}

int cli_start(void)
{
    if (hold_standard_descriptors() != 0) return -1;
    cli_signals_install();
    return 0;
}

int cli_run_checked(int argc, char **argv, int (*run)(int argc, char **argv))
{
    if (ra_simd_check_environment() != RA_OK)
        return cli_fail(EXIT_USAGE, "RA_FORCE_ISA must be base, avx2, avx512, avx512bf16 or amx "
                        "(or unset), "
                        "not '%.64s'", getenv("RA_FORCE_ISA"));
    if (progress_check_environment() != 0)
        return cli_fail(EXIT_USAGE, "RA_PROGRESS_DELAY must be a number of seconds from 0 to "
                        "1e6 (or unset), not '%.64s'", getenv("RA_PROGRESS_DELAY"));
    int code = run(argc, argv);
    /* A report that did not reach stdout (a full disk, a closed pipe, a file
     * size limit) is a failure too, unless the run failed already. */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (code == EXIT_OK)
            code = cli_fail(EXIT_FAIL, "cannot write the standard output%s%s",
                            errno ? ": " : "", errno ? strerror(errno) : "");
    }
    return code;
}
