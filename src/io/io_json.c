/* io_json.c — strict JSON parsing, exact integers and config keys with
 * cJSON, and reading a JSON file whole. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "io_json.h"
#include "io_message.h"
#include "io_open.h"

/* Reads exactly n bytes of fd (read() may return fewer at a time). */
static ra_status read_all(int fd, char *buf, size_t n, const char *path, char *msg,
                          size_t msg_len)
{
    for (size_t done = 0; done < n;) {
        ssize_t got = read(fd, buf + done, n - done);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: read failed: %s", path,
                              strerror(errno));
        if (got == 0)
            return ra_io_fail(msg, msg_len, RA_ERR_IO, "%s: the file shrank while being read",
                              path);
        done += (size_t)got;
    }
    return RA_OK;
}

/* The offset of the first escape \\u0000 in text, or len.  A backslash
 * outside a string is not JSON, so every backslash starts an escape: each
 * pair is skipped whole (\\\\u0000 is a backslash, then text). */
static size_t nul_escape_at(const char *text, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (text[i] != '\\') continue;
        if (text[i + 1] == 'u' && len - i >= 6 && memcmp(text + i + 2, "0000", 4) == 0) return i;
        i++; /* the escaped character */
    }
    return len;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The offset of the quote that closes the string opening at text[i] (a
 * '"'), escapes skipped, or end if the string runs past it. */
static size_t string_end(const char *text, size_t end, size_t i)
{
    for (i++; i < end && text[i] != '"'; i++) i += text[i] == '\\';
    return i < end ? i : end;
}

/* The end of the JSON number at text[i] (a '-' or a digit), or len + 1 when
 * its grammar is not JSON's: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
 * (cJSON reads a number with strtod, which also takes 05, 5. and 1.e4). */
static size_t number_end(const char *text, size_t len, size_t i)
{
    i += text[i] == '-';
    if (i >= len || !is_digit(text[i])) return len + 1;
    if (text[i] == '0' && i + 1 < len && is_digit(text[i + 1])) return len + 1;
    while (i < len && is_digit(text[i])) i++;
    if (i < len && text[i] == '.') {
        if (++i >= len || !is_digit(text[i])) return len + 1;
        while (i < len && is_digit(text[i])) i++;
    }
    if (i < len && (text[i] == 'e' || text[i] == 'E')) {
        i++;
        if (i < len && (text[i] == '+' || text[i] == '-')) i++;
        if (i >= len || !is_digit(text[i])) return len + 1;
        while (i < len && is_digit(text[i])) i++;
    }
    return i;
}

/* The length of the constant of Python's json (NaN, Infinity, -Infinity:
 * transformers 4 wrote them, e.g. Bamba's "time_step_limit": [0.0,
 * Infinity]) that starts a value at text[i] (after the start, whitespace,
 * '[', ',' or ':'), its value in *value; 0 if none does ("-NaN", "1NaN"
 * and "nan" are not JSON to Python either; what follows is the parser's
 * to judge, as Python's). */
static size_t constant_at(const char *text, size_t len, size_t i, double *value)
{
    static const struct {
        const char *text;
        double value;
    } constants[] = {{"NaN", NAN}, {"Infinity", INFINITY}, {"-Infinity", -INFINITY}};
    const char before = i > 0 ? text[i - 1] : ' ';
    if (!is_space(before) && before != '[' && before != ',' && before != ':') return 0;
    for (size_t c = 0; c < sizeof constants / sizeof constants[0]; c++) {
        const size_t n = strlen(constants[c].text);
        if (len - i < n || memcmp(text + i, constants[c].text, n) != 0) continue;
        *value = constants[c].value;
        return n;
    }
    return 0;
}

size_t ra_io_utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (len == 0 || c > 0xf4 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) ||
        (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
        return 0;
    return len;
}

/* In text that cJSON parsed, the offset of the first thing that JSON (RFC
 * 8259) and Python's json, with which transformers reads config.json
 * (open(encoding="utf-8"), json.loads), refuse and cJSON takes: a byte
 * order mark, bytes that are not UTF-8, a number outside JSON's grammar
 * (05, 5., 1.e4; Python's NaN, Infinity and -Infinity are taken), a
 * control character (below 0x20) raw in a string, or outside one other
 * than space, tab, LF and CR (cJSON skips every byte up to 0x20); len if
 * none. */
static size_t lenient_at(const char *text, size_t len)
{
    const unsigned char *u = (const unsigned char *)text;
    if (len >= 3 && u[0] == 0xef && u[1] == 0xbb && u[2] == 0xbf) return 0;
    for (size_t i = 0; i < len; i++) {
        if (u[i] >= 0x80) { /* only inside strings, as cJSON parsed it */
            size_t n = ra_io_utf8_sequence(u + i, len - i);
            if (n == 0) return i;
            i += n - 1;
        } else if (text[i] == '"') { /* to the closing quote, escapes skipped */
            for (i++; i < len && text[i] != '"'; i++) {
                if (u[i] < 0x20) return i;
                if (u[i] >= 0x80) {
                    size_t n = ra_io_utf8_sequence(u + i, len - i);
                    if (n == 0) return i;
                    i += n - 1;
                }
                i += text[i] == '\\';
            }
        } else if (u[i] < 0x20 && !is_space(text[i])) {
            return i;
        } else if (text[i] == '-' || is_digit(text[i])) {
            double value;
            size_t end = number_end(text, len, i);
            if (end > len) end = i + constant_at(text, len, i, &value); /* -Infinity */
            if (end == i) return i;
            i = end - 1;
        }
    }
    return len;
}

/* Whether the innermost array or object open at offset end of text is an
 * object (strings skipped; deeper than cJSON parses: no). */
static int in_object(const char *text, size_t end)
{
    char open[CJSON_NESTING_LIMIT + 1]; /* '{' or '[' per level */
    size_t depth = 0;
    for (size_t i = 0; i < end; i++) {
        if (text[i] == '"') {
            i = string_end(text, end, i);
        } else if ((text[i] == '{' || text[i] == '[') && depth < sizeof open) {
            open[depth++] = text[i];
        } else if ((text[i] == '}' || text[i] == ']') && depth > 0) {
            depth--;
        }
    }
    return depth > 0 && depth < sizeof open && open[depth - 1] == '{';
}

/* Where cJSON stopped in text (NUL-terminated), as the first character it
 * could not take: its error pointer, except where an object's key should
 * start ('{' or ',' before it, in an object) with something else, where
 * cJSON's parse_string reports the character after.  In an array, "[1, 2"
 * stops after the 2. */
static size_t cjson_error_at(const char *text, size_t at)
{
    if (at == 0 || is_space(text[at - 1]) || text[at - 1] == '"') return at;
    size_t before = at - 1;
    while (before > 0 && is_space(text[before - 1])) before--;
    if (before == 0 || (text[before - 1] != '{' && text[before - 1] != ',')) return at;
    return in_object(text, before) ? at - 1 : at;
}

/* The offset of the next JSON number or constant of Python's json at or
 * after *at in text (strings skipped), its end in *at; len when none is
 * left. */
static size_t next_number(const char *text, size_t len, size_t *at)
{
    for (size_t i = *at; i < len; i++) {
        double value;
        size_t n;
        if (text[i] == '"') {
            i = string_end(text, len, i);
        } else if ((n = constant_at(text, len, i, &value)) > 0) {
            *at = i + n;
            return i;
        } else if (text[i] == '-' || is_digit(text[i])) {
            *at = number_end(text, len, i);
            return i;
        }
    }
    *at = len;
    return len;
}

/* Marks RA_IO_JSON_REAL each number of item's tree (in document order, as
 * cJSON keeps it) that text, from *at, writes with a fraction or an
 * exponent, or as a constant of Python's json, whose value it stores (cJSON
 * read the 0 that stood for it); *at moves past the tree's last number.
 * Its depth is cJSON's, at most CJSON_NESTING_LIMIT. */
static void mark_reals(cJSON *item, const char *text, size_t len, size_t *at)
{
    for (; item != NULL; item = item->next) {
        if (cJSON_IsNumber(item)) {
            const size_t start = next_number(text, len, at);
            double value;
            if (constant_at(text, len, start, &value) > 0) {
                item->valuedouble = value;
                item->valueint = isnan(value) ? 0 : value > 0 ? INT_MAX : INT_MIN;
                item->type |= RA_IO_JSON_REAL;
            }
            for (size_t i = start; i < *at; i++)
                if (text[i] == '.' || text[i] == 'e' || text[i] == 'E')
                    item->type |= RA_IO_JSON_REAL;
        }
        mark_reals(item->child, text, len, at);
    }
}

/* Writes a 0 and spaces over each constant of Python's json in text (a
 * copy of len bytes; strings skipped), for cJSON, which has none, to read
 * as a number in the same place. */
static void stand_in_constants(char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        double value;
        size_t n;
        if (text[i] == '"') {
            i = string_end(text, len, i);
        } else if ((n = constant_at(text, len, i, &value)) > 0) {
            text[i] = '0';
            memset(text + i + 1, ' ', n - 1);
            i += n - 1;
        }
    }
}

ra_status ra_io_json_parse(const char *text, size_t len, cJSON **out, size_t *error_at)
{
    *out = NULL;
    const char *nul = memchr(text, '\0', len);
    size_t escape = nul_escape_at(text, len);
    *error_at = nul ? (size_t)(nul - text) : escape;
    if (nul != NULL || escape < len) return RA_ERR_FORMAT;
    /* cJSON gets its own NUL-terminated copy, so that nothing it does can
     * read past the caller's bytes, and it must reach that NUL: trailing
     * non-whitespace is an error. */
    char *copy = len < SIZE_MAX ? ra_malloc(len + 1) : NULL;
    if (copy == NULL) return RA_ERR_NOMEM;
    memcpy(copy, text, len);
    copy[len] = '\0';
    stand_in_constants(copy, len);
    errno = 0;
    const char *end = copy;
    *out = cJSON_ParseWithLengthOpts(copy, len + 1, &end, 1);
    ra_status status = *out != NULL ? RA_OK : errno == ENOMEM ? RA_ERR_NOMEM : RA_ERR_FORMAT;
    *error_at = status == RA_ERR_FORMAT ? cjson_error_at(copy, (size_t)(end - copy)) : 0;
    ra_free(copy);
    size_t lenient = status == RA_OK ? lenient_at(text, len) : len;
    if (lenient < len) { /* what transformers' json.load refuses, refused alike */
        cJSON_Delete(*out);
        *out = NULL;
        *error_at = lenient;
        status = RA_ERR_FORMAT;
    }
    size_t at = 0;
    if (status == RA_OK) mark_reals(*out, text, len, &at);
    return status;
}

void ra_io_json_where(const char *text, size_t len, size_t at, char *buf, size_t buf_len)
{
    long long line = 1, column = 1;
    for (size_t i = 0; i < at && i < len; i++) {
        if (text[i] == '\n') line++, column = 1;
        else if (((unsigned char)text[i] & 0xc0) != 0x80) column++; /* not a continuation byte */
    }
    snprintf(buf, buf_len, "line %lld, column %lld", line, column);
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The \\u escape (four hex digits) at text[at], where ra_io_json_parse failed: 1 for
 * \\u0000, 2 for a UTF-16 surrogate (U+D800 to U+DFFF, cJSON refusing it
 * without its pair), 0 for anything else (an escape JSON has not). */
static int escape_refused(const char *text, size_t len, size_t at)
{
    if (at >= len || len - at < 6 || text[at] != '\\' || text[at + 1] != 'u') return 0;
    unsigned code = 0;
    for (size_t i = at + 2; i < at + 6; i++) {
        const int h = hex_digit(text[i]);
        if (h < 0) return 0;
        code = code * 16 + (unsigned)h;
    }
    return code == 0 ? 1 : code >= 0xd800 && code <= 0xdfff ? 2 : 0;
}

const char *ra_io_json_escape_refused(const char *text, size_t len, size_t at)
{
    static const char *const what[] = {NULL, "a NUL character (\\u0000)",
                                       "an unpaired UTF-16 surrogate (\\uD800 to \\uDFFF)"};
    return what[escape_refused(text, len, at)];
}

/* Whether text[at] opens an array or object past cJSON's nesting limit
 * (CJSON_NESTING_LIMIT levels open before it; strings skipped). */
static int too_deep_at(const char *text, size_t len, size_t at)
{
    if (at >= len || (text[at] != '[' && text[at] != '{')) return 0;
    size_t depth = 0;
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '"') {
            i = string_end(text, at, i);
        } else if (text[i] == '{' || text[i] == '[') {
            depth++;
        } else if ((text[i] == '}' || text[i] == ']') && depth > 0) {
            depth--;
        }
    }
    return depth >= CJSON_NESTING_LIMIT;
}

ra_status ra_io_json_parse_named(const char *text, size_t len, const char *name, cJSON **out,
                                 char *msg, size_t msg_len)
{
    size_t at = 0;
    ra_status status = ra_io_json_parse(text, len, out, &at);
    if (status == RA_OK) return RA_OK;
    if (status == RA_ERR_NOMEM) return ra_io_fail(msg, msg_len, status, "%s: out of memory", name);
    char where[64];
    ra_io_json_where(text, len, at, where, sizeof where);
    const int refused = escape_refused(text, len, at);
    if (refused)
        return ra_io_fail(msg, msg_len, status, "%s: %s in a string at %s: refused (%s)", name,
                          ra_io_json_escape_refused(text, len, at), where,
                          refused == 1 ? "it would cut the string short"
                                       : "no UTF-8 text holds it");
    if (too_deep_at(text, len, at))
        return ra_io_fail(msg, msg_len, status,
                          "%s: arrays and objects nested deeper than %d levels at %s: refused "
                          "(the JSON parser's nesting limit)", name, CJSON_NESTING_LIMIT, where);
    return ra_io_fail(msg, msg_len, status, "%s: not valid JSON at %s", name, where);
}

int ra_io_json_integer(const cJSON *item, int64_t *out)
{
    if (!cJSON_IsNumber(item) || (item->type & RA_IO_JSON_REAL)) return 0;
    return ra_io_json_integral(item, out);
}

int ra_io_json_integral(const cJSON *item, int64_t *out)
{
    if (!cJSON_IsNumber(item)) return 0;
    double v = item->valuedouble;
    if (!isfinite(v) || v != floor(v) || fabs(v) >= (double)RA_IO_JSON_INT_LIMIT) return 0;
    *out = (int64_t)v;
    return 1;
}

int ra_io_json_member(const cJSON *obj, const char *key, const cJSON **out)
{
    *out = NULL;
    for (const cJSON *item = obj->child; item != NULL; item = item->next) {
        if (item->string == NULL || strcmp(item->string, key) != 0) continue;
        if (*out != NULL) return 0;
        *out = item;
    }
    return 1;
}

ra_status ra_io_json_key(const cJSON *obj, const char *key, const char *name,
                         const cJSON **out, char *msg, size_t msg_len)
{
    if (!ra_io_json_member(obj, key, out))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" appears twice", name, key);
    if (cJSON_IsNull(*out)) *out = NULL;
    return RA_OK;
}

ra_status ra_io_read_text(const char *path, size_t max_bytes, char **text, size_t *len,
                          char *msg, size_t msg_len)
{
    int fd;
    uint64_t file_size;
    RA_TRY(ra_io_open_regular(path, &fd, &file_size, msg, msg_len));
    ra_status status = RA_OK;
    char *buf = NULL;
    if (file_size > max_bytes)
        status = ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                            "%s: the file is %llu bytes; files over %zu bytes are refused", path,
                            (unsigned long long)file_size, max_bytes);
    else if (file_size == 0)
        status = ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: the file is empty", path);
    else if ((buf = ra_malloc((size_t)file_size)) == NULL)
        status = ra_io_fail(msg, msg_len, RA_ERR_NOMEM, "%s: out of memory", path);
    else
        status = read_all(fd, buf, (size_t)file_size, path, msg, msg_len);
    close(fd);
    if (status != RA_OK) {
        ra_free(buf);
        return status;
    }
    *text = buf;
    *len = (size_t)file_size;
    return RA_OK;
}

int ra_io_json_bool(const cJSON *item, int *out)
{
    int64_t v = -1;
    if (cJSON_IsBool(item)) v = cJSON_IsTrue(item);
    else if (!ra_io_json_integer(item, &v)) v = -1;
    if (v != 0 && v != 1) return 0;
    *out = (int)v;
    return 1;
}
