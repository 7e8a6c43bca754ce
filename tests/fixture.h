/*
 * fixture.h — header-only reader for the RAFX fixture files that
 * tests/fixtures/make_fixtures.py writes (see that script for what each file
 * holds).
 *
 * Format, every integer little-endian:
 *   char  magic[4] = "RAFX"
 *   u32   version  = 1
 *   u32   count                     tensors that follow
 *   count times:
 *     u16   name_len                1..255
 *     u8    name[name_len]          printable ASCII, unique in the file
 *     u8    dtype                   0 = f64, 1 = i64, 2 = uniform (f64)
 *     u8    ndim                    0..8 (0: a scalar, one element)
 *     i64   shape[ndim]             each >= 1
 *     data  dtype 0, 1: prod(shape) * 8 bytes, row-major binary64 or int64
 *           dtype 2: u64 seed, i64 exponent e in -100..100 (16 bytes), for
 *           prod(shape) <= FX_MAX_GENERATED values
 *   and nothing after the last tensor.
 *
 * dtype 2 stores a tensor by its generator, for inputs and weights too large
 * to store even as float32: element i (row-major, from 0) is
 *   (int64(z_i >> 40) - 2^23) * 2^(e - 23)
 * where z_i is the (i+1)-th output of splitmix64 seeded with `seed`.  Values
 * are uniform in [-2^e, 2^e) and exact float32 values (24-bit integers times
 * a power of two).  The reader expands them: such a tensor reads as FX_F64,
 * with `stored` == FX_STORED_UNIFORM.
 *
 * Every length and count is checked against the bytes that remain before it
 * is used; any violation fails the whole file with a message.
 *
 *   fx_file f;
 *   char err[256];
 *   if (fx_load(&f, path, err, sizeof err) != 0) ... report err ...
 *   const fx_tensor *t = fx_find(&f, "cos");
 *   fx_free(&f);
 */
#ifndef RA_TEST_FIXTURE_H
#define RA_TEST_FIXTURE_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FX_VERSION 1
#define FX_MAX_NDIM 8
#define FX_MAX_NAME 255

/* The element type after reading. */
typedef enum fx_dtype { FX_F64 = 0, FX_I64 = 1 } fx_dtype;

/* The dtype byte in the file: how the data is stored. */
enum { FX_STORED_F64 = 0, FX_STORED_I64 = 1, FX_STORED_UNIFORM = 2 };

/* Most values one dtype 2 tensor may stand for (2^24: 128 MiB as f64). */
#define FX_MAX_GENERATED ((uint64_t)1 << 24)
#define FX_MAX_EXPONENT 100

typedef struct fx_tensor {
    char name[FX_MAX_NAME + 1];
    fx_dtype dtype;
    int stored;     /* the file's dtype byte, FX_STORED_* */
    int ndim;
    int64_t shape[FX_MAX_NDIM];
    int64_t count;  /* product of shape; 1 for a scalar */
    double *f64;    /* count values when dtype is FX_F64, else NULL */
    int64_t *i64;   /* count values when dtype is FX_I64, else NULL */
} fx_tensor;

typedef struct fx_file {
    int count;
    fx_tensor *tensors;
} fx_file;

/* A read position inside the file's bytes. */
typedef struct fx_cursor {
    const unsigned char *p;
    size_t left;
} fx_cursor;

static void fx_error(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

/* Takes n bytes, or returns NULL when fewer remain. */
static const unsigned char *fx_take(fx_cursor *c, size_t n)
{
    if (n > c->left) return NULL;
    const unsigned char *p = c->p;
    c->p += n;
    c->left -= n;
    return p;
}

/* Little-endian unsigned integer of n <= 8 bytes. */
static uint64_t fx_le(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
    return v;
}

static int fx_read_uint(fx_cursor *c, size_t n, uint64_t *out)
{
    const unsigned char *p = fx_take(c, n);
    if (!p) return -1;
    *out = fx_le(p, n);
    return 0;
}

/* splitmix64: advances *state and returns the next output. */
static uint64_t fx_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The n values of a dtype 2 tensor: uniform in [-2^e, 2^e), exact floats. */
static void fx_uniform(double *out, size_t n, uint64_t seed, int exponent)
{
    double scale = ldexp(1.0, exponent - 23);
    for (size_t i = 0; i < n; i++) {
        int64_t k = (int64_t)(fx_splitmix64(&seed) >> 40) - ((int64_t)1 << 23);
        out[i] = (double)k * scale;
    }
}

static void fx_free(fx_file *f)
{
    for (int i = 0; i < f->count; i++) {
        free(f->tensors[i].f64);
        free(f->tensors[i].i64);
    }
    free(f->tensors);
    f->tensors = NULL;
    f->count = 0;
}

static const fx_tensor *fx_find(const fx_file *f, const char *name)
{
    for (int i = 0; i < f->count; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

/* Name, dtype, ndim and shape of tensor t; its element count must fit in the
 * bytes that remain. */
static int fx_parse_head(fx_cursor *c, fx_tensor *t, char *err, size_t err_len)
{
    uint64_t name_len, dtype, ndim;
    if (fx_read_uint(c, 2, &name_len) != 0 || name_len < 1 || name_len > FX_MAX_NAME) {
        fx_error(err, err_len, "bad or truncated name length");
        return -1;
    }
    const unsigned char *name = fx_take(c, (size_t)name_len);
    if (!name) {
        fx_error(err, err_len, "truncated name");
        return -1;
    }
    for (uint64_t i = 0; i < name_len; i++) {
        if (name[i] < 0x21 || name[i] > 0x7e) {
            fx_error(err, err_len, "name holds a non-printable byte");
            return -1;
        }
    }
    memcpy(t->name, name, (size_t)name_len);
    t->name[name_len] = '\0';
    if (fx_read_uint(c, 1, &dtype) != 0 || dtype > FX_STORED_UNIFORM) {
        fx_error(err, err_len, "%s: bad or truncated dtype", t->name);
        return -1;
    }
    if (fx_read_uint(c, 1, &ndim) != 0 || ndim > FX_MAX_NDIM) {
        fx_error(err, err_len, "%s: bad or truncated ndim", t->name);
        return -1;
    }
    t->stored = (int)dtype;
    t->dtype = dtype == FX_STORED_I64 ? FX_I64 : FX_F64;
    t->ndim = (int)ndim;
    /* Stored data must fit in the file; generated data in FX_MAX_GENERATED. */
    int generated = dtype == FX_STORED_UNIFORM;
    uint64_t count = 1, max_count = generated ? FX_MAX_GENERATED : c->left / 8;
    for (int d = 0; d < t->ndim; d++) {
        uint64_t size;
        if (fx_read_uint(c, 8, &size) != 0) {
            fx_error(err, err_len, "%s: truncated shape", t->name);
            return -1;
        }
        /* size > max_count also rejects negative i64 sizes. */
        if (size < 1 || size > max_count || count > max_count / size) {
            fx_error(err, err_len, "%s: shape[%d] = %lld is zero, negative or "
                     "larger than %s", t->name, d, (long long)(int64_t)size,
                     generated ? "FX_MAX_GENERATED" : "the file");
            return -1;
        }
        t->shape[d] = (int64_t)size;
        count *= size;
    }
    if (generated ? c->left < 16 : count > c->left / 8) {
        fx_error(err, err_len, "%s: data truncated (%llu elements, %zu bytes left)",
                 t->name, (unsigned long long)count, c->left);
        return -1;
    }
    t->count = (int64_t)count;
    return 0;
}

/* The data of tensor t, decoded from little-endian bytes. */
static int fx_parse_data(fx_cursor *c, fx_tensor *t, char *err, size_t err_len)
{
    size_t n = (size_t)t->count;
    int generated = t->stored == FX_STORED_UNIFORM;
    const unsigned char *p = fx_take(c, generated ? 16 : n * 8);
    void *data = malloc(n * 8);
    if (!p || !data) {
        free(data);
        fx_error(err, err_len, "%s: data truncated or out of memory", t->name);
        return -1;
    }
    if (generated) {
        uint64_t seed = fx_le(p, 8);
        int64_t exponent = (int64_t)fx_le(p + 8, 8);
        if (exponent < -FX_MAX_EXPONENT || exponent > FX_MAX_EXPONENT) {
            free(data);
            fx_error(err, err_len, "%s: uniform exponent %lld out of range", t->name,
                     (long long)exponent);
            return -1;
        }
        fx_uniform(data, n, seed, (int)exponent);
        t->f64 = data;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t bits = fx_le(p + 8 * i, 8);
        memcpy((unsigned char *)data + 8 * i, &bits, 8);
    }
    if (t->dtype == FX_F64)
        t->f64 = data;
    else
        t->i64 = data;
    return 0;
}

/* Parses len bytes at buf into f.  Returns 0, or -1 with f empty and a
 * message in err. */
static int fx_parse(fx_file *f, const unsigned char *buf, size_t len, char *err,
                    size_t err_len)
{
    fx_cursor c = {buf, len};
    uint64_t version, count;
    const unsigned char *magic = fx_take(&c, 4);
    f->count = 0;
    f->tensors = NULL;
    if (!magic || memcmp(magic, "RAFX", 4) != 0) {
        fx_error(err, err_len, "not a RAFX file (bad magic)");
        return -1;
    }
    if (fx_read_uint(&c, 4, &version) != 0 || version != FX_VERSION) {
        fx_error(err, err_len, "unsupported or truncated version");
        return -1;
    }
    /* The smallest record is 2 + 1 + 1 + 1 + 8 = 13 bytes: a scalar with a
     * one-byte name. */
    if (fx_read_uint(&c, 4, &count) != 0 || count > c.left / 13) {
        fx_error(err, err_len, "bad or truncated tensor count");
        return -1;
    }
    f->tensors = calloc(count ? (size_t)count : 1, sizeof *f->tensors);
    if (!f->tensors) {
        fx_error(err, err_len, "out of memory");
        return -1;
    }
    for (uint64_t i = 0; i < count; i++) {
        fx_tensor *t = &f->tensors[i];
        if (fx_parse_head(&c, t, err, err_len) != 0) break;
        if (fx_find(f, t->name)) {
            fx_error(err, err_len, "%s: duplicate name", t->name);
            break;
        }
        if (fx_parse_data(&c, t, err, err_len) != 0) break;
        f->count++;
    }
    if (f->count == (int)count && c.left != 0)
        fx_error(err, err_len, "%zu trailing bytes after the last tensor", c.left);
    if (f->count != (int)count || c.left != 0) {
        fx_free(f);
        return -1;
    }
    return 0;
}

/* Reads and parses the file at path.  Returns 0, or -1 with f empty and a
 * message (which names the path) in err. */
static int fx_load(fx_file *f, const char *path, char *err, size_t err_len)
{
    char why[200] = "cannot open";
    unsigned char *buf = NULL;
    long size = -1;
    FILE *fp = fopen(path, "rb");
    f->count = 0;
    f->tensors = NULL;
    if (fp && fseek(fp, 0, SEEK_END) == 0) size = ftell(fp);
    if (size >= 0 && fseek(fp, 0, SEEK_SET) == 0)
        buf = malloc(size ? (size_t)size : 1);
    int ok = buf && fread(buf, 1, (size_t)size, fp) == (size_t)size && fgetc(fp) == EOF;
    if (fp && !ok) snprintf(why, sizeof why, "cannot read");
    if (ok && fx_parse(f, buf, (size_t)size, why, sizeof why) != 0) ok = 0;
    if (!ok) fx_error(err, err_len, "%s: %s", path, why);
    free(buf);
    if (fp) fclose(fp);
    return ok ? 0 : -1;
}

#endif
