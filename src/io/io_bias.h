/*
 * io_bias.h — reading which attention projections a config's model builds
 * with a bias (config_bias.c) from the object cJSON has already parsed.
 * Private to src/io.
 */
#ifndef RA_IO_BIAS_H
#define RA_IO_BIAS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "io.h"

/* fields->bias from fields' family's rule (families.c) and its key in text
 * (the text model's object): true, false, 1, 0, null or absent (the
 * default); anything else fails naming the key, and name (the file) in msg.
 * fields->family and its attention_bias are read before. */
ra_status ra_hf_bias_read_json(const cJSON *text, ra_hf_fields *fields, const char *name,
                               char *msg, size_t msg_len);

#endif
