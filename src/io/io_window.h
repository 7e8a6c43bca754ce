/*
 * io_window.h — reading a config.json's sliding-window keys from the object
 * cJSON has already parsed.  Private to src/io.
 */
#ifndef RA_IO_WINDOW_H
#define RA_IO_WINDOW_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "io.h"

/* Reads sliding_window, use_sliding_window, max_window_layers and
 * layer_types from the top level of root into *out (zeroed first).
 * Messages read "<name>: \"<key>\" must be ...".  On failure *out is freed
 * and zeroed. */
ra_status ra_io_window_read(const cJSON *root, const char *name, ra_hf_window *out,
                            char *msg, size_t msg_len);

/* Frees layer_types and zeroes *window; NULL allowed. */
void ra_io_window_free(ra_hf_window *window);

#endif
