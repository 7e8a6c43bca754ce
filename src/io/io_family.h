/*
 * io_family.h — checking a config.json's attention keys against its model
 * family (families.c).  Private to src/io.
 */
#ifndef RA_IO_FAMILY_H
#define RA_IO_FAMILY_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "io.h"

/* Checks obj (the text model's config) for model_type (NULL: absent, read
 * as a Llama-style config): refuses an unknown model_type whose config
 * describes attention, a family ropeattn refuses, and any key that changes
 * attention and is neither neutral nor run for the family, naming it.
 * *out is the family (NULL for none). */
ra_status ra_io_family_check(const cJSON *obj, const char *name, const char *model_type,
                             const ra_hf_family **out, char *msg, size_t msg_len);

#endif
