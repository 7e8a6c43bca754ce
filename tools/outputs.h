/*
 * outputs.h — a run's output files: every one of them replaced, or none
 * touched.
 *
 * A subcommand names each output (cli_outputs_add) and each file it reads
 * (cli_outputs_check_input) before any work, so that an output that is a
 * folder, a device, a FIFO or a socket, two outputs naming one file, or an
 * output naming an input (by device and inode: through symbolic and hard
 * links too) end the run at once.  Then it writes each output into its own
 * temporary file in the target's folder (cli_outputs_open gives the
 * descriptor) and calls cli_outputs_commit, which closes them all, and only
 * when every one is complete and on disk, and what the run printed has
 * reached stdout, renames each over its target.
 * cli_outputs_free removes whatever was not committed.
 *
 * The temporary files are also removed when SIGINT, SIGTERM, SIGHUP or
 * SIGBUS (an input file cut short while mapped) ends the run
 * (cli_signals_install); a file size limit (SIGXFSZ) makes the write fail
 * (EFBIG) instead of ending the process.
 */
#ifndef RA_TOOLS_OUTPUTS_H
#define RA_TOOLS_OUTPUTS_H

#include "ropeattn_io.h"

#define CLI_MAX_OUTPUTS 4

typedef struct cli_outputs {
    int n;
    const char *option[CLI_MAX_OUTPUTS]; /* "--output", for messages */
    ra_io_output file[CLI_MAX_OUTPUTS];
} cli_outputs;

/* Sets up signal handling for the whole process: call once, first. */
void cli_signals_install(void);

/* From now on a signal ends the run without a message (a rank of an MPI
 * launch other than 0). */
void cli_signals_quiet(void);

/* Each of these prints one message and returns nonzero on failure. */

/* Adds path (given as option) as the next output: refused when it is not a
 * regular file or a name still free in an existing folder, or when an earlier
 * output names the same file. */
int cli_outputs_add(cli_outputs *o, const char *option, const char *path);
/* Refuses an input (given as option) that is the same file as an output. */
int cli_outputs_check_input(const cli_outputs *o, const char *option, const char *path);
/* Creates output i's temporary file; *fd is where its bytes go. */
int cli_outputs_open(cli_outputs *o, int i, int *fd);
/* Output i as .npy (float32 of the given shape) or .safetensors: opens it
 * and writes it. */
int cli_outputs_write_npy(cli_outputs *o, int i, const float *data, int ndim,
                          const int64_t *shape);
int cli_outputs_write_safetensors(cli_outputs *o, int i, const ra_st_tensor *tensors,
                                  int64_t n);
/* Closes every output (all must be open) and renames each into place; a
 * signal after that ends the run (128 + the signal) saying they were
 * written. */
int cli_outputs_commit(cli_outputs *o);
/* Removes the temporary files not committed; zeroes *o. */
void cli_outputs_free(cli_outputs *o);

#endif
