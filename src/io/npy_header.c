/*
 * npy_header.c — reads the Python-dict header of a .npy file by hand:
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 */
#include <string.h>

#include "internal.h"
#include "io_message.h"
#include "npy_header.h"

typedef struct cursor {
    const char *p, *end;
    const char *path;
    char *msg;
    size_t msg_len;
} cursor;

static ra_status malformed(const cursor *c, const char *problem)
{
    return ra_io_fail(c->msg, c->msg_len, RA_ERR_FORMAT, "%s: malformed .npy header: %s",
                      c->path, problem);
}

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* Consumes ch (after any whitespace) if it is next; returns whether it was. */
static int accept(cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* Consumes word if the text continues with it; returns whether it did. */
static int accept_word(cursor *c, const char *word)
{
    size_t n = strlen(word);
    skip_space(c);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, word, n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
}

/* A Python string literal in single or double quotes, without escapes, of
 * fewer than buf_len characters. */
static ra_status parse_string(cursor *c, char *buf, size_t buf_len, const char *what)
{
    skip_space(c);
    if (c->p == c->end || (*c->p != '\'' && *c->p != '"')) return malformed(c, what);
    char quote = *c->p++;
    const char *close = memchr(c->p, quote, (size_t)(c->end - c->p));
    if (close == NULL || memchr(c->p, '\\', (size_t)(close - c->p)) != NULL ||
        memchr(c->p, '\0', (size_t)(close - c->p)) != NULL || (size_t)(close - c->p) >= buf_len)
        return malformed(c, what);
    memcpy(buf, c->p, (size_t)(close - c->p));
    buf[close - c->p] = '\0';
    c->p = close + 1;
    return RA_OK;
}

/* A non-negative decimal integer that fits in int64_t, without leading
 * zeros (Python's literal syntax, which numpy reads the header with). */
static ra_status parse_dim(cursor *c, int64_t *out)
{
    skip_space(c);
    if (c->p == c->end || *c->p < '0' || *c->p > '9')
        return malformed(c, "the shape holds something other than non-negative integers");
    if (*c->p == '0' && c->p + 1 < c->end && c->p[1] >= '0' && c->p[1] <= '9')
        return malformed(c, "a dimension of the shape has a leading zero");
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        int digit = *c->p++ - '0';
        if (v > (INT64_MAX - digit) / 10)
            return ra_io_fail(c->msg, c->msg_len, RA_ERR_FORMAT,
                              "%s: a dimension of the shape does not fit in 64 bits", c->path);
        v = v * 10 + digit;
    }
    *out = v;
    return RA_OK;
}

/* A tuple of dimensions: (), (5,), (2, 3) or (2, 3,). */
static ra_status parse_shape(cursor *c, ra_npy_header *h)
{
    if (!accept(c, '(')) return malformed(c, "'shape' is not a tuple");
    h->ndim = 0;
    if (accept(c, ')')) return RA_OK;
    for (;;) {
        int64_t dim = 0;
        RA_TRY(parse_dim(c, &dim));
        if (h->ndim == RA_IO_MAX_DIMS)
            return ra_io_fail(c->msg, c->msg_len, RA_ERR_SHAPE,
                              "%s: the array has more than %d dimensions", c->path,
                              RA_IO_MAX_DIMS);
        h->shape[h->ndim++] = dim;
        if (accept(c, ')')) return RA_OK;
        if (!accept(c, ',')) return malformed(c, "expected ',' or ')' in the shape");
        if (accept(c, ')')) return RA_OK;
    }
}

static ra_status parse_value(cursor *c, const char *key, ra_npy_header *h)
{
    if (strcmp(key, "descr") == 0) {
        skip_space(c);
        if (c->p < c->end && *c->p == '[')
            return ra_io_fail(c->msg, c->msg_len, RA_ERR_DTYPE,
                              "%s: structured dtypes are not supported", c->path);
        return parse_string(c, h->descr, sizeof h->descr, "'descr' is not a dtype string");
    }
    if (strcmp(key, "fortran_order") == 0) {
        if (accept_word(c, "True")) h->fortran_order = 1;
        else if (accept_word(c, "False")) h->fortran_order = 0;
        else return malformed(c, "'fortran_order' is neither True nor False");
        return RA_OK;
    }
    return parse_shape(c, h);
}

/* Index of key among the three the header must have, or -1. */
static int key_index(const char *key)
{
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    for (int i = 0; i < 3; i++)
        if (strcmp(key, keys[i]) == 0) return i;
    return -1;
}

ra_status ra_npy_parse_header(const char *text, size_t len, const char *path,
                              ra_npy_header *out, char *msg, size_t msg_len)
{
    cursor c = {text, text + len, path, msg, msg_len};
    int seen[3] = {0, 0, 0};
    memset(out, 0, sizeof *out);
    if (!accept(&c, '{')) return malformed(&c, "it does not start with '{'");
    while (!accept(&c, '}')) {
        char key[32];
        RA_TRY(parse_string(&c, key, sizeof key, "expected a short quoted key"));
        int k = key_index(key);
        if (k < 0)
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: malformed .npy header: unexpected key '%s'", path, key);
        if (seen[k])
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: malformed .npy header: key '%s' appears twice", path, key);
        seen[k] = 1;
        if (!accept(&c, ':')) return malformed(&c, "expected ':' after a key");
        RA_TRY(parse_value(&c, key, out));
        if (accept(&c, '}')) break;
        if (!accept(&c, ',')) return malformed(&c, "expected ',' or '}' after a value");
    }
    skip_space(&c);
    if (c.p != c.end) return malformed(&c, "unexpected text after the closing '}'");
    for (int k = 0; k < 3; k++)
        if (!seen[k]) return malformed(&c, "it lacks one of 'descr', 'fortran_order', 'shape'");
    return RA_OK;
}
