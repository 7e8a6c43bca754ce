/*
 * safetensors.c — maps a .safetensors file read-only and validates its header
 * (u64 length, JSON object of tensors) before handing out any tensor.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "io.h"
#include "io_json.h"
#include "io_message.h"
#include "io_open.h"

/* Longest JSON header accepted, as in the reference implementation. */
#define MAX_HEADER_BYTES 100000000ull

struct ra_safetensors {
    void *map;
    size_t map_len;
    int64_t count;
    ra_st_tensor *tensors;         /* in file order; names malloc'ed */
    const ra_st_tensor **by_name;  /* the same tensors sorted by name */
};

/* Where a file's data area starts and how long it is, for validation. */
typedef struct data_area {
    const unsigned char *base;
    uint64_t size;
    const char *path;
    char *msg;
    size_t msg_len;
} data_area;

static ra_status bad_tensor(const data_area *a, ra_status status, const char *name,
                            const char *fmt, ...) RA_IO_PRINTF(4);

/* Fails with "<path>: tensor "<name>": <problem>". */
static ra_status bad_tensor(const data_area *a, ra_status status, const char *name,
                            const char *fmt, ...)
{
    char problem[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(problem, sizeof problem, fmt, args);
    va_end(args);
    return ra_io_fail(a->msg, a->msg_len, status, "%s: tensor \"%s\": %s", a->path, name,
                      problem);
}

static ra_status find_dtype(const data_area *a, const char *name, const cJSON *entry,
                            ra_st_dtype *out)
{
    const cJSON *item;
    if (!ra_io_json_member(entry, "dtype", &item))
        return bad_tensor(a, RA_ERR_FORMAT, name, "\"dtype\" appears twice");
    if (!cJSON_IsString(item))
        return bad_tensor(a, RA_ERR_FORMAT, name, "\"dtype\" is missing or not a string");
    for (int d = 0; d < RA_ST_DTYPE_COUNT; d++) {
        if (strcmp(item->valuestring, ra_st_dtype_name((ra_st_dtype)d)) == 0) {
            *out = (ra_st_dtype)d;
            return RA_OK;
        }
    }
    return bad_tensor(a, RA_ERR_DTYPE, name, "unknown dtype \"%s\"", item->valuestring);
}

/* An array of n non-negative integers below 2^53 named key, with n at most
 * max_n (or exactly max_n when exact is set). */
static ra_status read_integers(const data_area *a, const char *name, const cJSON *entry,
                               const char *key, int max_n, int exact, int64_t *values,
                               int *n)
{
    const cJSON *item;
    if (!ra_io_json_member(entry, key, &item))
        return bad_tensor(a, RA_ERR_FORMAT, name, "\"%s\" appears twice", key);
    int size = cJSON_IsArray(item) ? cJSON_GetArraySize(item) : -1;
    if (size < 0 || (exact && size != max_n))
        return bad_tensor(a, RA_ERR_FORMAT, name, "\"%s\" is missing or not an array of %s",
                          key, exact ? "two integers" : "integers");
    if (size > max_n)
        return bad_tensor(a, RA_ERR_SHAPE, name, "%d dimensions; at most %d are supported",
                          size, max_n);
    int i = 0;
    for (const cJSON *v = item->child; v != NULL; v = v->next, i++)
        if (!ra_io_json_integer(v, &values[i]) || values[i] < 0)
            return bad_tensor(a, RA_ERR_FORMAT, name,
                              "\"%s\" entry %d is not a non-negative integer below 2^53 "
                              "(written without a fraction or an exponent)", key,
                              i);
    *n = size;
    return RA_OK;
}

/* Checks data_offsets against the data area and the tensor's shape and
 * dtype, then points t at its bytes. */
static ra_status place_tensor(const data_area *a, const char *name, const cJSON *entry,
                              ra_st_tensor *t)
{
    int64_t off[2] = {0, 0};
    int n;
    RA_TRY(read_integers(a, name, entry, "data_offsets", 2, 1, off, &n));
    if (off[0] > off[1])
        return bad_tensor(a, RA_ERR_FORMAT, name, "data_offsets [%lld, %lld) are reversed",
                          (long long)off[0], (long long)off[1]);
    if ((uint64_t)off[1] > a->size)
        return bad_tensor(a, RA_ERR_FORMAT, name,
                          "data_offsets [%lld, %lld) lie outside the data area of %llu bytes",
                          (long long)off[0], (long long)off[1], (unsigned long long)a->size);
    uint64_t needed = (uint64_t)t->count * ra_st_dtype_size(t->dtype);
    if ((uint64_t)(off[1] - off[0]) != needed) {
        char shape[RA_IO_SHAPE_TEXT];
        ra_io_format_shape(shape, sizeof shape, t->shape, t->ndim);
        return bad_tensor(a, RA_ERR_FORMAT, name,
                          "data_offsets [%lld, %lld) hold %lld bytes but shape %s of %s needs "
                          "%llu", (long long)off[0], (long long)off[1],
                          (long long)(off[1] - off[0]), shape, ra_st_dtype_name(t->dtype),
                          (unsigned long long)needed);
    }
    t->data = a->base + off[0];
    t->nbytes = (size_t)needed;
    return RA_OK;
}

/* Validates one header entry and fills t (its name is left for the caller). */
static ra_status read_tensor(const data_area *a, const cJSON *entry, ra_st_tensor *t)
{
    const char *name = entry->string;
    if (!cJSON_IsObject(entry))
        return bad_tensor(a, RA_ERR_FORMAT, name, "the entry is not a JSON object");
    RA_TRY(find_dtype(a, name, entry, &t->dtype));
    RA_TRY(read_integers(a, name, entry, "shape", RA_IO_MAX_DIMS, 0, t->shape, &t->ndim));
    t->count = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (ra_mul(t->count, t->shape[i], &t->count) != RA_OK) {
            char shape[RA_IO_SHAPE_TEXT];
            ra_io_format_shape(shape, sizeof shape, t->shape, t->ndim);
            return bad_tensor(a, RA_ERR_FORMAT, name, "shape %s has too many elements", shape);
        }
    }
    return place_tensor(a, name, entry, t);
}

/* "__metadata__" maps names to strings, as the format defines it. */
static ra_status check_metadata(const cJSON *metadata, const data_area *a)
{
    if (!cJSON_IsObject(metadata))
        return ra_io_fail(a->msg, a->msg_len, RA_ERR_FORMAT,
                          "%s: \"__metadata__\" is not a JSON object", a->path);
    for (const cJSON *item = metadata->child; item != NULL; item = item->next)
        if (!cJSON_IsString(item))
            return ra_io_fail(a->msg, a->msg_len, RA_ERR_FORMAT,
                              "%s: \"__metadata__\" value \"%.100s\" is not a string", a->path,
                              item->string);
    return RA_OK;
}

static ra_status read_entries(ra_safetensors *st, const cJSON *root, const data_area *a)
{
    int n = cJSON_GetArraySize(root);
    st->tensors = ra_calloc(n > 0 ? (size_t)n : 1, sizeof *st->tensors);
    if (st->tensors == NULL)
        return ra_io_fail(a->msg, a->msg_len, RA_ERR_NOMEM, "%s: out of memory", a->path);
    int metadata = 0;
    for (const cJSON *entry = root->child; entry != NULL; entry = entry->next) {
        if (strcmp(entry->string, "__metadata__") == 0) {
            if (metadata++)
                return ra_io_fail(a->msg, a->msg_len, RA_ERR_FORMAT,
                                  "%s: \"__metadata__\" appears twice", a->path);
            RA_TRY(check_metadata(entry, a));
            continue;
        }
        ra_st_tensor *t = &st->tensors[st->count];
        RA_TRY(read_tensor(a, entry, t));
        t->name = ra_strdup(entry->string);
        if (t->name == NULL)
            return ra_io_fail(a->msg, a->msg_len, RA_ERR_NOMEM, "%s: out of memory", a->path);
        st->count++;
    }
    return RA_OK;
}

static int by_name(const void *x, const void *y)
{
    return strcmp((*(const ra_st_tensor *const *)x)->name, (*(const ra_st_tensor *const *)y)->name);
}

static int by_offset(const void *x, const void *y)
{
    const ra_st_tensor *a = *(const ra_st_tensor *const *)x, *b = *(const ra_st_tensor *const *)y;
    uintptr_t pa = (uintptr_t)a->data, pb = (uintptr_t)b->data;
    if (pa != pb) return pa < pb ? -1 : 1;
    return a->nbytes < b->nbytes ? -1 : a->nbytes > b->nbytes;
}

/* Sorts the name index and rejects a name given twice. */
static ra_status index_names(ra_safetensors *st, const data_area *a)
{
    st->by_name = ra_malloc((st->count > 0 ? (size_t)st->count : 1) * sizeof *st->by_name);
    if (st->by_name == NULL)
        return ra_io_fail(a->msg, a->msg_len, RA_ERR_NOMEM, "%s: out of memory", a->path);
    for (int64_t i = 0; i < st->count; i++) st->by_name[i] = &st->tensors[i];
    qsort(st->by_name, (size_t)st->count, sizeof *st->by_name, by_name);
    for (int64_t i = 1; i < st->count; i++)
        if (strcmp(st->by_name[i - 1]->name, st->by_name[i]->name) == 0)
            return ra_io_fail(a->msg, a->msg_len, RA_ERR_FORMAT,
                              "%s: tensor name \"%s\" appears twice", a->path,
                              st->by_name[i]->name);
    return RA_OK;
}

/* Checks that the tensors, in order of offset, tile the data area exactly,
 * as the format requires: the first begins at 0, each begins where the one
 * before ended (an empty one too), the last ends at the end of the file. */
static ra_status check_coverage(const ra_safetensors *st, const data_area *a)
{
    const ra_st_tensor **order = ra_malloc((st->count > 0 ? (size_t)st->count : 1) * sizeof *order);
    if (order == NULL)
        return ra_io_fail(a->msg, a->msg_len, RA_ERR_NOMEM, "%s: out of memory", a->path);
    for (int64_t i = 0; i < st->count; i++) order[i] = &st->tensors[i];
    qsort(order, (size_t)st->count, sizeof *order, by_offset);
    ra_status status = RA_OK;
    uint64_t reached = 0; /* where the tensors so far end */
    for (int64_t i = 0; i < st->count && status == RA_OK; i++) {
        const ra_st_tensor *t = order[i];
        uint64_t begin = (uint64_t)((const unsigned char *)t->data - a->base);
        if (begin < reached)
            status = ra_io_fail(a->msg, a->msg_len, RA_ERR_FORMAT,
                                "%s: tensors \"%s\" and \"%s\" overlap", a->path,
                                order[i - 1]->name, t->name);
        else if (begin > reached)
            status = ra_io_fail(a->msg, a->msg_len, RA_ERR_FORMAT,
                                "%s: data bytes [%llu, %llu) belong to no tensor", a->path,
                                (unsigned long long)reached, (unsigned long long)begin);
        reached = begin + t->nbytes;
    }
    if (status == RA_OK && reached != a->size)
        status = ra_io_fail(a->msg, a->msg_len, RA_ERR_FORMAT,
                            "%s: data bytes [%llu, %llu) belong to no tensor", a->path,
                            (unsigned long long)reached, (unsigned long long)a->size);
    ra_free(order);
    return status;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* What cJSON's tree cannot show, checked on the header's text (already
 * parsed as JSON, so an escape always has its characters, and none is
 * \u0000: ra_io_json_parse refuses it, as cJSON would cut the string there,
 * so that "F32\u0000x" would read as "F32" and two names could become one):
 * the header is UTF-8 and starts with '{'; every number is digits alone, without sign, fraction,
 * exponent or leading zero, as the format's integers are written. */
static ra_status check_header_text(const unsigned char *h, size_t len, const char *path,
                                   char *msg, size_t msg_len)
{
    if (h[0] != '{')
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: the header does not start with '{'",
                          path);
    int in_string = 0;
    for (size_t i = 0; i < len;) {
        size_t n = ra_io_utf8_sequence(h + i, len - i);
        if (n == 0)
            return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                              "%s: the header is not valid UTF-8 (byte %zu)", path, i);
        if (in_string && h[i] == '\\') {
            i += 2; /* the escaped character, ASCII */
            continue;
        }
        if (h[i] == '"') {
            in_string = !in_string;
        } else if (!in_string && (h[i] == '-' || is_digit(h[i]))) {
            size_t end = i, digits = 1;
            while (end < len && (is_digit(h[end]) || strchr("+-.eE", h[end]) != NULL)) {
                digits &= is_digit(h[end]);
                end++;
            }
            if (!digits || (h[i] == '0' && end - i > 1))
                return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                                  "%s: the header holds the number %.*s; only non-negative "
                                  "integers written in plain digits are allowed", path,
                                  (int)(end - i < 40 ? end - i : 40), (const char *)h + i);
            i = end;
            continue;
        }
        i += n;
    }
    return RA_OK;
}

/* Validates the mapped file: header length, JSON header, every tensor. */
static ra_status parse_file(ra_safetensors *st, const char *path, char *msg, size_t msg_len)
{
    const unsigned char *bytes = st->map;
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = header_len << 8 | bytes[i];
    uint64_t after = (uint64_t)st->map_len - 8;
    if (header_len > after)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: header length %llu exceeds the file size %llu", path,
                          (unsigned long long)header_len, (unsigned long long)st->map_len);
    if (header_len > MAX_HEADER_BYTES)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: header length %llu exceeds the limit of %llu bytes", path,
                          (unsigned long long)header_len, MAX_HEADER_BYTES);
    cJSON *root;
    const char *header = (const char *)bytes + 8;
    size_t at = 0;
    ra_status parsed = ra_io_json_parse(header, (size_t)header_len, &root, &at);
    if (parsed == RA_ERR_NOMEM)
        return ra_io_fail(msg, msg_len, parsed, "%s: out of memory for the header", path);
    char where[64];
    if (parsed != RA_OK) ra_io_json_where(header, (size_t)header_len, at, where, sizeof where);
    const char *escape = parsed != RA_OK ? ra_io_json_escape_refused(header, (size_t)header_len, at)
                                         : NULL;
    if (escape)
        return ra_io_fail(msg, msg_len, parsed, "%s: the header holds %s in a string, at %s", path,
                          escape, where);
    if (parsed != RA_OK && at < header_len &&
        (header[at] == '-' || is_digit(header[at]) || (unsigned char)header[at] >= 0x80) &&
        check_header_text(bytes + 8, (size_t)header_len, path, msg, msg_len) != RA_OK)
        return RA_ERR_FORMAT; /* a number JSON refuses (02, 2.) or bytes not UTF-8: named as
                                 the format's rules name them */
    if (parsed != RA_OK)
        return ra_io_fail(msg, msg_len, parsed, "%s: the header is not valid JSON at %s", path,
                          where);
    data_area a = {bytes + 8 + header_len, after - header_len, path, msg, msg_len};
    ra_status status = cJSON_IsObject(root)
                           ? check_header_text(bytes + 8, (size_t)header_len, path, msg, msg_len)
                           : ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                                        "%s: the header is not a JSON object", path);
    if (status == RA_OK) status = read_entries(st, root, &a);
    cJSON_Delete(root);
    if (status == RA_OK) status = index_names(st, &a);
    if (status == RA_OK) status = check_coverage(st, &a);
    return status;
}

/* Maps path read-only into st. */
static ra_status map_file(ra_safetensors *st, const char *path, char *msg, size_t msg_len)
{
    int fd;
    uint64_t size;
    RA_TRY(ra_io_open_regular(path, &fd, &size, msg, msg_len));
    ra_status status = RA_OK;
    if (size == 0)
        status = ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: the file is empty", path);
    else if (size < 8)
        status = ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                            "%s: the file is %llu bytes, too short for the 8-byte header "
                            "length", path, (unsigned long long)size);
    else if (size > SIZE_MAX)
        status = ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: too large to map", path);
    if (status == RA_OK) {
        void *map = ra_map_readonly(fd, (size_t)size);
        if (map == NULL)
            status = ra_io_fail(msg, msg_len, ra_io_errno_status(errno),
                                "%s: cannot map file: %s", path, strerror(errno));
        else {
            st->map = map;
            st->map_len = (size_t)size;
        }
    }
    close(fd);
    return status;
}

ra_status ra_safetensors_open(ra_safetensors **out, const char *path, char *msg,
                              size_t msg_len)
{
    ra_io_clear(msg, msg_len);
    if (out != NULL) *out = NULL;
    if (out == NULL || path == NULL)
        return ra_io_fail(msg, msg_len, RA_ERR_NULL, "ra_safetensors_open: out or path is NULL");
    ra_safetensors *st = ra_calloc(1, sizeof *st);
    if (st == NULL) return ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", path);
    ra_status status = map_file(st, path, msg, msg_len);
    if (status == RA_OK) status = parse_file(st, path, msg, msg_len);
    if (status != RA_OK) {
        ra_safetensors_close(st);
        return status;
    }
    *out = st;
    return RA_OK;
}

void ra_safetensors_close(ra_safetensors *st)
{
    if (st == NULL) return;
    for (int64_t i = 0; i < st->count; i++) ra_free((char *)st->tensors[i].name);
    ra_free(st->tensors);
    ra_free(st->by_name);
    if (st->map != NULL) ra_unmap(st->map, st->map_len);
    ra_free(st);
}

int64_t ra_safetensors_count(const ra_safetensors *st)
{
    return st != NULL ? st->count : 0;
}

const ra_st_tensor *ra_safetensors_at(const ra_safetensors *st, int64_t i)
{
    return st != NULL && i >= 0 && i < st->count ? &st->tensors[i] : NULL;
}

const ra_st_tensor *ra_safetensors_find(const ra_safetensors *st, const char *name)
{
    if (st == NULL || name == NULL) return NULL;
    ra_st_tensor key = {.name = name};
    const ra_st_tensor *key_ptr = &key;
    const ra_st_tensor **found = bsearch(&key_ptr, st->by_name, (size_t)st->count,
                                         sizeof *st->by_name, by_name);
    return found != NULL ? *found : NULL;
}
