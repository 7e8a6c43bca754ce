/*
 * io_rope.h — reading a rope_scaling / rope_parameters object that cJSON has
 * already parsed.  Private to src/io.
 */
#ifndef RA_IO_ROPE_H
#define RA_IO_ROPE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "io.h"

/* Reads obj (which must be a JSON object) into *out, which it zeroes first.  Messages read
 * "<name>: \"<prefix><key>\" must be ...", so that a config.json's nested
 * keys read "config.json: \"rope_scaling.factor\" ...".  On failure *out is
 * freed and zeroed. */
ra_status ra_io_rope_read(const cJSON *obj, const char *name, const char *prefix,
                          ra_hf_rope *out, char *msg, size_t msg_len);

#endif
