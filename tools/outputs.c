/* outputs.c — a run's output files, all or none, and the signals that must
 * not leave their temporary files behind. */
#include "outputs.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* ---- signals ------------------------------------------------------------ */

/* The temporary files that exist now, for the signal handler: a slot is
 * filled (with signals blocked) before its file is created and emptied after
 * the file is renamed or removed. */
static char temp_names[CLI_MAX_OUTPUTS][PATH_MAX];
static volatile sig_atomic_t temp_live[CLI_MAX_OUTPUTS];

static const int caught[] = {SIGINT, SIGTERM, SIGHUP, SIGBUS};

/* Set once cli_outputs_commit has put every output in place: a signal
 * after it ends the run saying so. */
static volatile sig_atomic_t committed;

/* Set on ranks of an MPI launch other than 0, which say nothing (comm.h). */
static volatile sig_atomic_t quiet;

void cli_signals_quiet(void)
{
    quiet = 1;
}

static void on_signal(int sig)
{
    for (int i = 0; i < CLI_MAX_OUTPUTS; i++)
        if (temp_live[i]) unlink(temp_names[i]);
    const char *what =
        sig == SIGINT    ? "ropeattn: interrupted (SIGINT)"
        : sig == SIGTERM ? "ropeattn: terminated (SIGTERM)"
        : sig == SIGHUP  ? "ropeattn: hung up (SIGHUP)"
                         : "ropeattn: an input file was cut short or changed while it was "
                           "being read (SIGBUS)";
    const char *outcome = committed ? " after its outputs were written\n"
                                    : "; no output was written\n";
    if (!quiet) {
        ssize_t ignored = write(STDERR_FILENO, what, strlen(what));
        ignored = write(STDERR_FILENO, outcome, strlen(outcome));
        (void)ignored;
    }
    _exit(sig == SIGBUS ? EXIT_FAIL : 128 + sig);
}

void cli_signals_install(void)
{
    struct sigaction action = {.sa_handler = on_signal};
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++)
        sigaddset(&action.sa_mask, caught[i]);
    for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++)
        sigaction(caught[i], &action, NULL);
    /* A file size limit: write() fails with EFBIG, and the run fails cleanly.
     * A closed stdout pipe: write() fails with EPIPE. */
    signal(SIGXFSZ, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
}

/* Blocks (or restores) the caught signals around a change to the files. */
static void block_signals(sigset_t *saved)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++) sigaddset(&set, caught[i]);
    sigprocmask(SIG_BLOCK, &set, saved);
}

static void restore_signals(const sigset_t *saved) { sigprocmask(SIG_SETMASK, saved, NULL); }

/* ---- outputs ------------------------------------------------------------ */

int cli_outputs_add(cli_outputs *o, const char *option, const char *path)
{
    if (o->n == CLI_MAX_OUTPUTS) return cli_fail(EXIT_FAIL, "too many outputs");
    char msg[CLI_MSG_LEN];
    ra_io_output *file = &o->file[o->n];
    if (ra_io_output_prepare(file, path, msg, sizeof msg) != RA_OK) {
        ra_io_output_discard(file);
        return cli_fail(EXIT_FAIL, "%s: %s", option, msg);
    }
    o->option[o->n++] = option;
    for (int i = 0; i < o->n - 1; i++)
        if (ra_io_output_same(&o->file[i], file))
            return cli_fail(EXIT_USAGE, "%s %s and %s %s name the same file", o->option[i],
                            o->file[i].path, option, path);
    return 0;
}

int cli_outputs_check_input(const cli_outputs *o, const char *option, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return 0; /* its reader will say why */
    for (int i = 0; i < o->n; i++)
        if (o->file[i].exists && o->file[i].dev == st.st_dev && o->file[i].ino == st.st_ino)
            return cli_fail(EXIT_USAGE, "%s %s and %s %s name the same file: an output "
                            "never replaces an input", o->option[i], o->file[i].path, option,
                            path);
    return 0;
}

int cli_outputs_open(cli_outputs *o, int i, int *fd)
{
    char msg[CLI_MSG_LEN];
    sigset_t saved;
    block_signals(&saved);
    ra_status status = ra_io_output_create(&o->file[i], msg, sizeof msg);
    if (status == RA_OK) {
        /* create checked that the name fits in PATH_MAX */
        strcpy(temp_names[i], o->file[i].temp);
        temp_live[i] = 1;
        *fd = o->file[i].fd;
    }
    restore_signals(&saved);
    return status == RA_OK ? 0 : cli_fail(EXIT_FAIL, "%s", msg);
}

int cli_outputs_write_npy(cli_outputs *o, int i, const float *data, int ndim,
                          const int64_t *shape)
{
    char msg[CLI_MSG_LEN];
    int fd, failed = cli_outputs_open(o, i, &fd);
    if (!failed && ra_npy_write_f32_fd(fd, o->file[i].path, data, ndim, shape, msg,
                                       sizeof msg) != RA_OK)
        failed = cli_fail(EXIT_FAIL, "%s", msg);
    return failed;
}

int cli_outputs_write_safetensors(cli_outputs *o, int i, const ra_st_tensor *tensors,
                                  int64_t n)
{
    char msg[CLI_MSG_LEN];
    int fd, failed = cli_outputs_open(o, i, &fd);
    if (!failed && ra_safetensors_write_fd(fd, o->file[i].path, tensors, n, msg,
                                           sizeof msg) != RA_OK)
        failed = cli_fail(EXIT_FAIL, "%s", msg);
    return failed;
}

int cli_outputs_commit(cli_outputs *o)
{
    char msg[CLI_MSG_LEN];
    /* What the run printed (--stats) must have reached stdout before any
     * target is touched: main fails a run whose report did not. */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout))
        return cli_fail(EXIT_FAIL, "cannot write the standard output%s%s (no output written)",
                        errno ? ": " : "", errno ? strerror(errno) : "");
    for (int i = 0; i < o->n; i++)
        if (ra_io_output_close(&o->file[i], msg, sizeof msg) != RA_OK)
            return cli_fail(EXIT_FAIL, "%s", msg);
    /* Every output is complete and synced: only now is any target touched. */
    sigset_t saved;
    block_signals(&saved);
    int failed = 0;
    for (int i = 0; i < o->n && !failed; i++) {
        if (ra_io_output_commit(&o->file[i], msg, sizeof msg) != RA_OK)
            failed = i == 0 ? cli_fail(EXIT_FAIL, "%s", msg)
                            : cli_fail(EXIT_FAIL, "%s (the outputs named before it were "
                                       "already replaced)", msg);
        else
            temp_live[i] = 0;
    }
    committed = !failed; /* a signal from here on says the outputs were written */
    restore_signals(&saved);
    return failed;
}

void cli_outputs_free(cli_outputs *o)
{
    sigset_t saved;
    block_signals(&saved);
    for (int i = 0; i < o->n; i++) {
        ra_io_output_discard(&o->file[i]);
        temp_live[i] = 0;
    }
    restore_signals(&saved);
    *o = (cli_outputs){0};
}
