/*
 * io_quant.h — reading a config.json's quantization_config (and the dtype
 * its dequantized weights take) from the object cJSON has already parsed.
 * Private to src/io.
 */
#ifndef RA_IO_QUANT_H
#define RA_IO_QUANT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "io.h"

/* Reads quantization_config, and with it dtype / torch_dtype, from the top
 * level of root into *out (zeroed first; see ra_hf_quant for what is
 * accepted).  text: the text model's object (text_config, else root); a
 * quantization_config there too is refused.  Messages read "<name>:
 * \"quantization_config.<key>\" ...".  On failure *out is freed and zeroed. */
ra_status ra_io_quant_read(const cJSON *root, const cJSON *text, const char *name,
                           ra_hf_quant *out, char *msg, size_t msg_len);

/* Frees skip and zeroes *quant; NULL allowed. */
void ra_io_quant_free(ra_hf_quant *quant);

#endif
