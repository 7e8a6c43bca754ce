/*
 * io_json.h — strict JSON parsing on top of cJSON for the file-format code.
 * Private to src/io.
 */
#ifndef RA_IO_JSON_H
#define RA_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "ropeattn.h"

/* JSON numbers are doubles: every integer text below 2^53 parses exactly,
 * and any integer text that does not parses to 2^53 or beyond. */
#define RA_IO_JSON_INT_LIMIT ((int64_t)1 << 53)

/* Reads the whole of path, a regular file of 1 to max_bytes bytes, into a
 * new buffer (*text, free with ra_free; *len bytes, not NUL-terminated).
 * Messages name path. */
ra_status ra_io_read_text(const char *path, size_t max_bytes, char **text, size_t *len,
                          char *msg, size_t msg_len);

/* Parses exactly len bytes of JSON (need not be NUL-terminated): the whole
 * text must be one JSON value, optionally surrounded by whitespace, with no
 * NUL byte, raw or escaped (cJSON would end a string at \u0000, so that
 * "rope_theta\u0000x" read as the key "rope_theta"), and nothing that JSON
 * and Python's json.load (transformers' reader) refuse but cJSON takes:
 * numbers such as 05, 5. or 1.e4, control characters raw in strings or
 * between tokens (but space, tab, LF, CR), bytes that are not UTF-8, a
 * byte order mark.  Python's constants NaN, Infinity and -Infinity, which
 * transformers 4 wrote in some configs, are read as those numbers (marked
 * RA_IO_JSON_REAL, so no integer reader takes them; a reader of a finite
 * number refuses them).  *out is the tree (free it with cJSON_Delete), or NULL
 * with RA_ERR_FORMAT when the text is not such a value (*error_at: the
 * offset of the NUL, of the escape's backslash, of the number, control
 * character or byte, or where cJSON stopped) and RA_ERR_NOMEM when memory
 * ran out (cJSON returns NULL for both; its allocator, malloc or whatever
 * the application hooked in, leaves errno ENOMEM for the second). */
ra_status ra_io_json_parse(const char *text, size_t len, cJSON **out, size_t *error_at);

/* The length of the valid UTF-8 sequence at s (n > 0 bytes left), or 0:
 * no overlong form, UTF-16 surrogate or code point beyond U+10FFFF. */
size_t ra_io_utf8_sequence(const unsigned char *s, size_t n);

/* "line L, column C" (from 1; columns count characters, not bytes) of
 * offset at in text, into buf. */
void ra_io_json_where(const char *text, size_t len, size_t at, char *buf, size_t buf_len);

/* Where ra_io_json_parse failed at text[at]: "a NUL character (\u0000)"
 * or "an unpaired UTF-16 surrogate (\uD800 to \uDFFF)" when an escape
 * there is one of those, which JSON allows in a string and the parser
 * refuses; NULL for any other fault (an escape JSON has not, as \q). */
const char *ra_io_json_escape_refused(const char *text, size_t len, size_t at);

/* ra_io_json_parse, its failure in msg naming name: "<name>: not valid
 * JSON at line L, column C", "<name>: a NUL character (\u0000) in a string
 * at line L, column C: ..." (or an unpaired UTF-16 surrogate), "<name>:
 * out of memory". */
ra_status ra_io_json_parse_named(const char *text, size_t len, const char *name, cJSON **out,
                                 char *msg, size_t msg_len);

/* If item is true, false, 1 or 0, stores 1 or 0 in *out and returns 1;
 * otherwise returns 0. */
int ra_io_json_bool(const cJSON *item, int *out);

/* A number's type bit (beside cJSON's, which its cJSON_Is* mask off) set by
 * ra_io_json_parse on a number written with a fraction or an exponent (4.0,
 * 4e0): a float to Python's json, which transformers' configs refuse for an
 * int field and the safetensors header for an offset or a size. */
#define RA_IO_JSON_REAL (1 << 12)

/* If item is a number holding an integer of magnitude below 2^53 (so exactly
 * the integer the file wrote), written as one (not RA_IO_JSON_REAL), stores
 * it in *out and returns 1; otherwise returns 0. */
int ra_io_json_integer(const cJSON *item, int64_t *out);

/* The same, written either way (a rope object's original_max_position_embeddings,
 * which transformers reads as a number: 8192.0 is 8192). */
int ra_io_json_integral(const cJSON *item, int64_t *out);

/* Looks key up in obj (case-sensitive): *out is its value, or NULL if
 * absent.  Returns 0 if the key appears more than once (cJSON keeps every
 * copy), 1 otherwise. */
int ra_io_json_member(const cJSON *obj, const char *key, const cJSON **out);

/* The same for a config's keys: *out is key's value in obj, NULL when absent
 * or null; a key that appears twice fails with RA_ERR_FORMAT and
 * "<name>: \"<key>\" appears twice" in msg. */
ra_status ra_io_json_key(const cJSON *obj, const char *key, const char *name,
                         const cJSON **out, char *msg, size_t msg_len);

#endif
