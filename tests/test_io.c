/*
 * test_io.c — the file formats: .npy, .safetensors and config.json readers
 * and writers, on good files and on hostile ones generated at run time, plus
 * the atomic file writer.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "hf/fields.h"
#include "io/io.h"
#include "io/io_json.h"

static char temp_dir[256]; /* made by main under $TMPDIR or /tmp */

/* The path of name inside the temporary folder (a few stay valid at once). */
static const char *tpath(const char *name)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s", temp_dir, name);
    return p;
}

static void write_bytes(const char *name, const void *bytes, size_t n)
{
    FILE *f = fopen(tpath(name), "wb");
    if (f == NULL) {
        perror("fopen");
        exit(2);
    }
    if (n > 0 && fwrite(bytes, 1, n, f) != n) exit(2);
    fclose(f);
}

/* Reads a whole file into a malloc'ed buffer; sets *n. */
static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    unsigned char *buf = malloc(1 << 16);
    *n = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

/* Whether the n bytes at hay contain the string needle. */
static int contains(const unsigned char *hay, size_t n, const char *needle)
{
    size_t len = strlen(needle);
    for (size_t i = 0; i + len <= n; i++)
        if (memcmp(hay + i, needle, len) == 0) return 1;
    return 0;
}

/* Entries in the temporary folder, not counting . and .. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (d == NULL) return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(path);
        else unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* A failure must give the expected status and a sentence naming the file. */
#define CHECK_FAIL(got, expected, msg, file)                                          \
    do {                                                                              \
        CHECK((got) == (expected), "status %d, expected %d (%s)", (int)(got),         \
              (int)(expected), msg);                                                  \
        CHECK((msg)[0] != '\0', "empty message");                                     \
        CHECK(strstr(msg, file) != NULL, "message does not name %s: %s", file, msg); \
    } while (0)

/* ---- .npy ---------------------------------------------------------------- */

/* Writes a .npy file: magic, version major.0, dict padded with spaces and '\n'
 * to a multiple of 64 bytes, then data. */
static void write_npy(const char *name, int major, const char *dict, const void *data,
                      size_t data_len)
{
    size_t pre = major == 1 ? 10 : 12, len = strlen(dict);
    size_t total = pre + len + 1;
    total += (64 - total % 64) % 64;
    unsigned char *buf = calloc(1, total + data_len + 1);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    size_t hlen = total - pre;
    for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (unsigned char)(hlen >> (8 * i));
    memcpy(buf + pre, dict, len);
    memset(buf + pre + len, ' ', total - pre - len - 1);
    buf[total - 1] = '\n';
    if (data_len > 0) memcpy(buf + total, data, data_len);
    write_bytes(name, buf, total + data_len);
    free(buf);
}

static const float six[6] = {0.5f, -1.0f, 2.25f, 3.0f, -4.5f, 1e-3f};

static void check_npy_round_trip(const char *name, int ndim, const int64_t *shape,
                                 int64_t count)
{
    float *data = malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
    ra_test_fill(data, (size_t)count, (uint64_t)ndim + 7);
    char msg[256];
    ra_status st = ra_npy_write_f32(tpath(name), data, ndim, shape, msg, sizeof msg);
    CHECK(st == RA_OK, "%s: write: %s", name, msg);
    CHECK(msg[0] == '\0', "message after success: %s", msg);
    ra_npy npy;
    st = ra_npy_read(tpath(name), &npy, msg, sizeof msg);
    CHECK(st == RA_OK, "%s: read: %s", name, msg);
    CHECK(npy.dtype == RA_NPY_F32 && npy.ndim == ndim && npy.count == count, "%s", name);
    for (int i = 0; i < ndim && i < npy.ndim; i++) CHECK(npy.shape[i] == shape[i], "dim %d", i);
    CHECK(npy.data != NULL && (uintptr_t)npy.data % 64 == 0, "data not aligned");
    if (st == RA_OK)
        CHECK(memcmp(npy.data, data, (size_t)count * sizeof(float)) == 0, "%s: data", name);
    ra_npy_free(&npy);
    CHECK(npy.data == NULL && npy.count == 0, "free does not zero");

    size_t n = 0;
    unsigned char *bytes = read_bytes(tpath(name), &n);
    size_t header = n - (size_t)count * sizeof(float);
    CHECK(bytes != NULL && header % 64 == 0, "%s: header of %zu bytes", name, header);
    CHECK(bytes != NULL && (size_t)(bytes[8] | bytes[9] << 8) + 10 == header, "header length");
    CHECK(bytes != NULL && bytes[header - 1] == '\n', "header does not end in a newline");
    free(bytes);
    free(data);
}

static void test_npy_round_trip(void)
{
    int64_t s0[1] = {0}, s1[1] = {5}, s4[4] = {2, 3, 1, 4}, s_empty[2] = {0, 3};
    check_npy_round_trip("scalar.npy", 0, s0, 1);
    check_npy_round_trip("vector.npy", 1, s1, 5);
    check_npy_round_trip("four.npy", 4, s4, 24);
    check_npy_round_trip("empty.npy", 2, s_empty, 0);

    size_t n = 0;
    unsigned char *bytes = read_bytes(tpath("four.npy"), &n);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 1, 4), }";
    CHECK(bytes != NULL && memcmp(bytes, "\x93NUMPY\x01\x00", 8) == 0, "magic");
    CHECK(bytes != NULL && memcmp(bytes + 10, dict, strlen(dict)) == 0, "dict");
    free(bytes);
    bytes = read_bytes(tpath("vector.npy"), &n);
    dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }";
    CHECK(bytes != NULL && memcmp(bytes + 10, dict, strlen(dict)) == 0, "1-d tuple");
    free(bytes);

    struct stat st;
    CHECK(stat(tpath("four.npy"), &st) == 0 && (st.st_mode & 0777) == 0644, "mode %o",
          (unsigned)(st.st_mode & 0777));
}

/* Byte for byte what numpy 1.26 writes for these arrays. */
static void test_npy_numpy_bytes(void)
{
    unsigned char buf[128 + 48];
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    memcpy(buf, "\x93NUMPY\x01\x00\x76\x00", 10);
    memset(buf + 10, ' ', 117);
    memcpy(buf + 10, dict, strlen(dict));
    buf[127] = '\n';
    memcpy(buf + 128, six, sizeof six);
    write_bytes("np_f4.npy", buf, 128 + sizeof six);
    ra_npy npy;
    char msg[256];
    ra_status st = ra_npy_read(tpath("np_f4.npy"), &npy, msg, sizeof msg);
    CHECK(st == RA_OK, "%s", msg);
    CHECK(npy.dtype == RA_NPY_F32 && npy.ndim == 2 && npy.shape[0] == 2 && npy.shape[1] == 3,
          "shape");
    CHECK(st == RA_OK && memcmp(npy.data, six, sizeof six) == 0, "data");
    ra_npy_free(&npy);

    int64_t ints[5] = {-3, 0, 1, INT64_MAX, INT64_MIN};
    dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }";
    memset(buf + 10, ' ', 117);
    memcpy(buf + 10, dict, strlen(dict));
    memcpy(buf + 128, ints, sizeof ints);
    write_bytes("np_i8.npy", buf, 128 + sizeof ints);
    st = ra_npy_read(tpath("np_i8.npy"), &npy, msg, sizeof msg);
    CHECK(st == RA_OK, "%s", msg);
    CHECK(npy.dtype == RA_NPY_I64 && npy.ndim == 1 && npy.count == 5, "shape");
    CHECK(st == RA_OK && memcmp(npy.data, ints, sizeof ints) == 0, "data");
    ra_npy_free(&npy);
}

static void test_npy_variants(void)
{
    ra_npy npy;
    char msg[256];
    /* Version 2.0 and 3.0, keys in another order, double quotes, no trailing
     * comma, '=' and '|' byte orders. */
    write_npy("v2.npy", 2, "{'shape': (3, 2), 'fortran_order': False, 'descr': '<f4'}", six,
              sizeof six);
    ra_status st = ra_npy_read(tpath("v2.npy"), &npy, msg, sizeof msg);
    CHECK(st == RA_OK, "%s", msg);
    CHECK(npy.ndim == 2 && npy.shape[0] == 3 && npy.shape[1] == 2, "v2 shape");
    CHECK(st == RA_OK && memcmp(npy.data, six, sizeof six) == 0, "v2 data");
    ra_npy_free(&npy);

    double d[2] = {1.5, -2.0};
    write_npy("v3.npy", 3, "{\"descr\": \"=f8\", \"fortran_order\": False, \"shape\": (2,)}", d,
              sizeof d);
    st = ra_npy_read(tpath("v3.npy"), &npy, msg, sizeof msg);
    CHECK(st == RA_OK && npy.dtype == RA_NPY_F64 && npy.count == 2, "v3: %s", msg);
    CHECK(st == RA_OK && memcmp(npy.data, d, sizeof d) == 0, "v3 data");
    ra_npy_free(&npy);

    uint16_t h[3] = {0x3c00, 0xc000, 0x3800}; /* 1, -2, 0.5 */
    write_npy("f2.npy", 1, "{'descr': '|f2', 'fortran_order': False, 'shape': (3, ), }", h,
              sizeof h);
    st = ra_npy_read(tpath("f2.npy"), &npy, msg, sizeof msg);
    CHECK(st == RA_OK && npy.dtype == RA_NPY_F16 && npy.count == 3, "f2: %s", msg);
    if (st == RA_OK) {
        const uint16_t *got = npy.data;
        CHECK(ra_f16_to_f32(got[0]) == 1.0f && ra_f16_to_f32(got[1]) == -2.0f, "f2 values");
    }
    ra_npy_free(&npy);

    int32_t i4[1] = {42};
    write_npy("i4.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }", i4,
              sizeof i4);
    st = ra_npy_read(tpath("i4.npy"), &npy, msg, sizeof msg);
    CHECK(st == RA_OK && npy.dtype == RA_NPY_I32 && npy.ndim == 0 && npy.count == 1, "%s", msg);
    CHECK(st == RA_OK && ((int32_t *)npy.data)[0] == 42, "i4 value");
    ra_npy_free(&npy);

    const uint8_t b1[3] = {1, 0, 1}; /* numpy's bool: one byte each */
    write_npy("b1.npy", 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", b1,
              sizeof b1);
    st = ra_npy_read(tpath("b1.npy"), &npy, msg, sizeof msg);
    CHECK(st == RA_OK && npy.dtype == RA_NPY_BOOL && npy.count == 3, "b1: %s", msg);
    CHECK(st == RA_OK && memcmp(npy.data, b1, 3) == 0, "b1 values");
    ra_npy_free(&npy);
}

/* An input's float64 values come back as float32, each rounded to the
 * nearest (ties to even) as F64 weights are; a finite value beyond
 * float32's range is refused, naming the file and the element. */
static void test_npy_float64_input(void)
{
    const double tie_down = 1.0 + 0x1p-24, tie_up = 1.0 + 0x3p-24; /* halfway cases */
    const double max_ok = 0x1.fffffefffffffp127; /* just below FLT_MAX + half an ulp */
    double d[8] = {0.1, -1.0 / 3.0, tie_down, tie_up, max_ok, INFINITY, NAN, 0x1p-149 * 0.75};
    const float want[8] = {0.1f, -1.0f / 3.0f, 1.0f, 1.0f + 0x1p-22f, FLT_MAX, INFINITY, NAN,
                           0x1p-149f};
    write_npy("f8_input.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 4), }",
              d, sizeof d);
    ra_npy npy;
    char msg[256];
    ra_status st = ra_npy_read_float(tpath("f8_input.npy"), &npy, msg, sizeof msg);
    CHECK(st == RA_OK && npy.dtype == RA_NPY_F32 && npy.ndim == 2 && npy.count == 8, "%s", msg);
    for (int i = 0; st == RA_OK && i < 8; i++) {
        float got = ((const float *)npy.data)[i];
        CHECK(isnan(want[i]) ? isnan(got) : memcmp(&got, &want[i], 4) == 0,
              "element %d: %a, want %a", i, (double)got, (double)want[i]);
    }
    ra_npy_free(&npy);
    /* float32 and integer files come back as read */
    write_npy("f4_input.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }",
              six, sizeof six);
    st = ra_npy_read_float(tpath("f4_input.npy"), &npy, msg, sizeof msg);
    CHECK(st == RA_OK && npy.dtype == RA_NPY_F32 && memcmp(npy.data, six, sizeof six) == 0,
          "f4: %s", msg);
    ra_npy_free(&npy);
    int32_t i4[2] = {1, 2};
    write_npy("i4_input.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", i4,
              sizeof i4);
    st = ra_npy_read_float(tpath("i4_input.npy"), &npy, msg, sizeof msg);
    CHECK(st == RA_OK && npy.dtype == RA_NPY_I32, "i4: %s", msg);
    ra_npy_free(&npy);
    /* FLT_MAX + half an ulp rounds to Inf (ties to even): refused, as -1e39 */
    const double beyond[2] = {0x1.fffffep127 + 0x1p103, -1e39};
    for (int i = 0; i < 2; i++) {
        double big[3] = {1.0, 2.0, beyond[i]};
        write_npy("f8_huge.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
                  big, sizeof big);
        memset(&npy, 0xAB, sizeof npy);
        st = ra_npy_read_float(tpath("f8_huge.npy"), &npy, msg, sizeof msg);
        CHECK_FAIL(st, RA_ERR_FORMAT, msg, "f8_huge.npy");
        CHECK(strstr(msg, "element 2 of its [3] float64 values is") &&
                  strstr(msg, "beyond float32's range"), "%s", msg);
        /* the value to 9 digits: "%g" wrote FLT_MAX + half an ulp as 3.40282e+38,
         * which reads as within the range the message gives */
        CHECK(strstr(msg, i ? "is -1e+39," : "is 3.40282357e+38,"), "%s", msg);
        CHECK(npy.data == NULL && npy.count == 0, "out not zeroed");
    }
    /* safetensors' F64 tensors the same */
    const double w[2] = {0.1, 1e39};
    ra_st_tensor t = {.name = "w", .dtype = RA_ST_F64, .ndim = 1, .shape = {2}, .count = 2,
                      .data = w, .nbytes = sizeof w};
    float f[2];
    CHECK(ra_st_tensor_to_f32(&t, f) == RA_ERR_FORMAT, "F64 1e39 read");
    t.shape[0] = t.count = 1, t.nbytes = 8;
    CHECK(ra_st_tensor_to_f32(&t, f) == RA_OK && f[0] == 0.1f, "F64 0.1");
}

static void expect_npy_failure(const char *name, ra_status expected)
{
    ra_npy npy;
    char msg[256] = "unchanged";
    memset(&npy, 0xAB, sizeof npy);
    ra_status st = ra_npy_read(tpath(name), &npy, msg, sizeof msg);
    CHECK_FAIL(st, expected, msg, name);
    CHECK(npy.data == NULL && npy.ndim == 0 && npy.count == 0, "%s: out not zeroed", name);
}

static void write_npy_dict(const char *name, const char *dict, size_t data_len)
{
    unsigned char data[64] = {0};
    write_npy(name, 1, dict, data, data_len);
}

static void test_npy_hostile_files(void)
{
    write_bytes("empty_file.npy", "", 0);
    expect_npy_failure("empty_file.npy", RA_ERR_FORMAT);
    write_bytes("bad_magic.npy", "\x93NUMPZ\x01\x00\x10\x00{}              ", 26);
    expect_npy_failure("bad_magic.npy", RA_ERR_FORMAT);
    write_bytes("text.npy", "hello, world\n", 13);
    expect_npy_failure("text.npy", RA_ERR_FORMAT);
    write_bytes("magic_only.npy", "\x93NUMPY\x01", 7);
    expect_npy_failure("magic_only.npy", RA_ERR_FORMAT);
    write_bytes("no_length.npy", "\x93NUMPY\x01\x00\x10", 9);
    expect_npy_failure("no_length.npy", RA_ERR_FORMAT);
    write_bytes("version4.npy", "\x93NUMPY\x04\x00\x10\x00\x00\x00{}", 14);
    expect_npy_failure("version4.npy", RA_ERR_UNSUPPORTED);

    /* a NUL byte in descr ('<f4' then NUL): not the string numpy reads */
    char nul[128 + 4] = {0}; /* the header, then one float */
    const char dict[] = "{'descr': '<f4\0', 'fortran_order': False, 'shape': (1,), }";
    memcpy(nul, "\x93NUMPY\x01\x00\x76\x00", 10);
    memset(nul + 10, ' ', 118);
    memcpy(nul + 10, dict, sizeof dict - 1);
    nul[127] = '\n';
    write_bytes("nul_descr.npy", nul, sizeof nul);
    expect_npy_failure("nul_descr.npy", RA_ERR_FORMAT);

    write_bytes("long_header.npy", "\x93NUMPY\x01\x00\xff\xff{'descr': '<f4'}", 26);
    expect_npy_failure("long_header.npy", RA_ERR_FORMAT);
    char msg[256];
    ra_npy npy;
    ra_npy_read(tpath("long_header.npy"), &npy, msg, sizeof msg);
    CHECK(strstr(msg, "header length 65535 exceeds the file size 26") != NULL, "%s", msg);
    write_bytes("long_header2.npy", "\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14);
    expect_npy_failure("long_header2.npy", RA_ERR_FORMAT);

    const char *f4_23 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    write_npy_dict("truncated.npy", f4_23, 20);
    expect_npy_failure("truncated.npy", RA_ERR_FORMAT);
    write_npy_dict("trailing.npy", f4_23, 28);
    expect_npy_failure("trailing.npy", RA_ERR_FORMAT);
    write_npy_dict("fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                   24);
    expect_npy_failure("fortran.npy", RA_ERR_UNSUPPORTED);
    ra_npy_read(tpath("fortran.npy"), &npy, msg, sizeof msg);
    CHECK(strstr(msg, "Fortran-order arrays are not supported") != NULL, "%s", msg);
}

static void test_npy_hostile_headers(void)
{
    static const struct {
        const char *dict;
        ra_status expected;
    } cases[] = {
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", RA_ERR_DTYPE},
        {"{'descr': '<i2', 'fortran_order': False, 'shape': (12,), }", RA_ERR_DTYPE},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (24,), }", RA_ERR_DTYPE},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", RA_ERR_DTYPE},
        {"{'descr': '', 'fortran_order': False, 'shape': (3,), }", RA_ERR_DTYPE},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", RA_ERR_DTYPE},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
         RA_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
         RA_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,6), }",
         RA_ERR_SHAPE},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }", RA_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (06,), }", RA_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 03), }", RA_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3), }", RA_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", RA_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, }", RA_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (,), }", RA_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (6,), }", RA_ERR_FORMAT},
        {"{'descr': '<f4', 'shape': (6,), }", RA_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1, }", RA_ERR_FORMAT},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
         RA_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), } junk", RA_ERR_FORMAT},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (6,), }", RA_ERR_FORMAT},
        {"{'descr: '<f4', 'fortran_order': False, 'shape': (6,), }", RA_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), ", RA_ERR_FORMAT},
        {"'descr': '<f4', 'fortran_order': False, 'shape': (6,)", RA_ERR_FORMAT},
        {"", RA_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "header%zu.npy", i);
        write_npy_dict(name, cases[i].dict, 24);
        expect_npy_failure(name, cases[i].expected);
    }
    ra_npy npy;
    char msg[256];
    CHECK_FAIL(ra_npy_read(tpath("missing.npy"), &npy, msg, sizeof msg), RA_ERR_IO, msg,
               "missing.npy");
    CHECK_FAIL(ra_npy_read(temp_dir, &npy, msg, sizeof msg), RA_ERR_IO, msg, temp_dir);
    CHECK(ra_npy_read(tpath("missing.npy"), &npy, NULL, 0) == RA_ERR_IO, "NULL msg");
    CHECK(ra_npy_read(NULL, &npy, msg, sizeof msg) == RA_ERR_NULL, "NULL path");
    ra_npy_free(NULL);
}

static void test_npy_write_errors(void)
{
    char msg[256];
    int64_t bad[2] = {2, -1}, huge[2] = {INT64_MAX, 2}, ok[1] = {6};
    CHECK_FAIL(ra_npy_write_f32(tpath("neg.npy"), six, 2, bad, msg, sizeof msg), RA_ERR_SIZE,
               msg, "neg.npy");
    CHECK_FAIL(ra_npy_write_f32(tpath("huge.npy"), six, 2, huge, msg, sizeof msg),
               RA_ERR_OVERFLOW, msg, "huge.npy");
    CHECK_FAIL(ra_npy_write_f32(tpath("dims.npy"), six, 9, ok, msg, sizeof msg), RA_ERR_SHAPE,
               msg, "dims.npy");
    CHECK(ra_npy_write_f32(tpath("null.npy"), NULL, 1, ok, msg, sizeof msg) == RA_ERR_NULL,
          "NULL data");
    CHECK(access(tpath("neg.npy"), F_OK) != 0 && access(tpath("null.npy"), F_OK) != 0,
          "a failed write left a file");
}

/* ---- .safetensors -------------------------------------------------------- */

/* Writes an 8-byte header length, len bytes of header text and data_len
 * bytes of data (0, 1, 2, ...). */
static void write_st_raw(const char *name, uint64_t header_len, const char *header, size_t len,
                         size_t data_len)
{
    unsigned char *buf = malloc(8 + len + data_len + 1);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(header_len >> (8 * i));
    memcpy(buf + 8, header, len);
    for (size_t i = 0; i < data_len; i++) buf[8 + len + i] = (unsigned char)i;
    write_bytes(name, buf, 8 + len + data_len);
    free(buf);
}

static void write_st(const char *name, const char *header, size_t data_len)
{
    write_st_raw(name, strlen(header), header, strlen(header), data_len);
}

static void expect_st_failure(const char *name, ra_status expected)
{
    static int sentinel;
    ra_safetensors *st = (ra_safetensors *)&sentinel;
    char msg[256];
    ra_status status = ra_safetensors_open(&st, tpath(name), msg, sizeof msg);
    CHECK_FAIL(status, expected, msg, name);
    CHECK(st == NULL, "%s: out not NULL", name);
    ra_safetensors_close(status == RA_OK ? st : NULL);
}

/* The message a failure on name gives must be exactly path + ": " + rest. */
static void expect_st_message(const char *name, const char *rest)
{
    ra_safetensors *st = NULL;
    char msg[256], expected[512];
    ra_status status = ra_safetensors_open(&st, tpath(name), msg, sizeof msg);
    snprintf(expected, sizeof expected, "%s: %s", tpath(name), rest);
    CHECK(status != RA_OK && strcmp(msg, expected) == 0, "got \"%s\"", msg);
    ra_safetensors_close(st);
}

static void test_st_round_trip(void)
{
    float f32[6] = {1.0f, -2.0f, 0.5f, 3.25f, -0.125f, 100.0f};
    uint16_t f16[4] = {0x3c00, 0xc000, 0x3800, 0x7c00}; /* 1, -2, 0.5, inf */
    uint16_t bf16[4] = {0x3f80, 0xc000, 0x3f00, 0x4049}; /* 1, -2, 0.5, 3.140625 */
    int64_t i64[3] = {-1, 0, INT64_MAX};
    double f64[2] = {0.1, -3.5};
    float scalar = 7.0f;
    ra_st_tensor in[7] = {
        {"wq.weight", RA_ST_F32, 2, {2, 3}, 6, f32, sizeof f32},
        {"half \"quoted\"\n", RA_ST_F16, 1, {4}, 4, f16, sizeof f16},
        {"brain", RA_ST_BF16, 2, {2, 2}, 4, bf16, sizeof bf16},
        {"ids", RA_ST_I64, 1, {3}, 3, i64, sizeof i64},
        {"empty", RA_ST_F32, 2, {0, 5}, 0, NULL, 0},
        {"double", RA_ST_F64, 1, {2}, 2, f64, sizeof f64},
        {"scalar", RA_ST_F32, 0, {0}, 1, &scalar, sizeof scalar},
    };
    char msg[256];
    ra_status status = ra_safetensors_write(tpath("W.safetensors"), in, 7, msg, sizeof msg);
    CHECK(status == RA_OK, "write: %s", msg);

    size_t n = 0;
    unsigned char *bytes = read_bytes(tpath("W.safetensors"), &n);
    uint64_t header_len = 0;
    for (int i = 7; bytes != NULL && i >= 0; i--) header_len = header_len << 8 | bytes[i];
    CHECK(header_len % 8 == 0 && 8 + header_len < n, "header length %llu",
          (unsigned long long)header_len);
    CHECK(bytes != NULL && contains(bytes, n, "\"__metadata__\":{\"format\":\"pt\"}"),
          "metadata");
    free(bytes);

    ra_safetensors *st = NULL;
    status = ra_safetensors_open(&st, tpath("W.safetensors"), msg, sizeof msg);
    CHECK(status == RA_OK, "open: %s", msg);
    if (status != RA_OK) return;
    CHECK(ra_safetensors_count(st) == 7, "count %lld", (long long)ra_safetensors_count(st));
    for (int64_t i = 0; i < 7 && i < ra_safetensors_count(st); i++) {
        const ra_st_tensor *t = ra_safetensors_at(st, i);
        CHECK(strcmp(t->name, in[i].name) == 0, "order: %s", t->name);
        CHECK(ra_safetensors_find(st, in[i].name) == t, "find %s", in[i].name);
        CHECK(t->dtype == in[i].dtype && t->ndim == in[i].ndim && t->count == in[i].count &&
              t->nbytes == in[i].nbytes, "%s: header", t->name);
        for (int d = 0; d < t->ndim; d++) CHECK(t->shape[d] == in[i].shape[d], "dim %d", d);
        CHECK(t->nbytes == 0 || memcmp(t->data, in[i].data, t->nbytes) == 0, "%s: data",
              t->name);
    }
    CHECK(ra_safetensors_at(st, 7) == NULL && ra_safetensors_at(st, -1) == NULL, "at range");
    CHECK(ra_safetensors_find(st, "missing") == NULL, "find missing");
    CHECK(ra_safetensors_find(st, "__metadata__") == NULL, "metadata is not a tensor");

    float out[6];
    CHECK(ra_st_tensor_to_f32(ra_safetensors_find(st, "wq.weight"), out) == RA_OK &&
          memcmp(out, f32, sizeof f32) == 0, "F32");
    CHECK(ra_st_tensor_to_f32(ra_safetensors_find(st, "half \"quoted\"\n"), out) == RA_OK &&
          out[0] == 1.0f && out[1] == -2.0f && out[2] == 0.5f && isinf(out[3]), "F16");
    CHECK(ra_st_tensor_to_f32(ra_safetensors_find(st, "brain"), out) == RA_OK &&
          out[0] == 1.0f && out[1] == -2.0f && out[2] == 0.5f && out[3] == 3.140625f, "BF16");
    CHECK(ra_st_tensor_to_f32(ra_safetensors_find(st, "double"), out) == RA_OK &&
          out[0] == 0.1f && out[1] == -3.5f, "F64");
    CHECK(ra_st_tensor_to_f32(ra_safetensors_find(st, "empty"), out) == RA_OK, "empty");
    CHECK(ra_st_tensor_to_f32(ra_safetensors_find(st, "ids"), out) == RA_ERR_DTYPE, "I64");
    CHECK(ra_st_tensor_to_f32(NULL, out) == RA_ERR_NULL, "NULL tensor");
    ra_safetensors_close(st);
    ra_safetensors_close(NULL);
    CHECK(strcmp(ra_st_dtype_name(RA_ST_F8_E5M2), "F8_E5M2") == 0 &&
          ra_st_dtype_size(RA_ST_BF16) == 2 && ra_st_dtype_size(RA_ST_DTYPE_COUNT) == 0,
          "dtype table");
}

/* Hand-written files the reader must accept: unaligned data (the header is
 * 190 bytes), empty tensors sharing an offset, padding after the JSON, an
 * empty header object. */
static void test_st_accepts(void)
{
    write_st("unaligned.safetensors",
             "{\"__metadata__\":{\"a\":\"b\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2],"
             "\"data_offsets\":[0,8]},\"e1\":{\"dtype\":\"F16\",\"shape\":[0],"
             "\"data_offsets\":[8,8]},\"e2\":{\"shape\":[3,0],\"dtype\":\"I8\","
             "\"data_offsets\":[8,8]}}  ", 8);
    ra_safetensors *st = NULL;
    char msg[256];
    ra_status status = ra_safetensors_open(&st, tpath("unaligned.safetensors"), msg, sizeof msg);
    CHECK(status == RA_OK, "%s", msg);
    if (status == RA_OK) {
        CHECK(ra_safetensors_count(st) == 3, "count");
        const ra_st_tensor *x = ra_safetensors_find(st, "x");
        float out[2], expected[2];
        unsigned char raw[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        memcpy(expected, raw, sizeof raw);
        CHECK(x != NULL && ra_st_tensor_to_f32(x, out) == RA_OK &&
              memcmp(out, expected, sizeof out) == 0, "unaligned F32");
    }
    ra_safetensors_close(st);

    write_st("no_tensors.safetensors", "{}", 0);
    status = ra_safetensors_open(&st, tpath("no_tensors.safetensors"), msg, sizeof msg);
    CHECK(status == RA_OK && ra_safetensors_count(st) == 0, "%s", msg);
    CHECK(ra_safetensors_find(st, "x") == NULL, "find in empty file");
    ra_safetensors_close(st);
}

static void test_st_hostile_layout(void)
{
    write_bytes("empty.safetensors", "", 0);
    expect_st_failure("empty.safetensors", RA_ERR_FORMAT);
    write_bytes("seven.safetensors", "\x02\0\0\0\0\0\0", 7);
    expect_st_failure("seven.safetensors", RA_ERR_FORMAT);
    write_st_raw("beyond.safetensors", 113, "{}", 2, 110);
    expect_st_failure("beyond.safetensors", RA_ERR_FORMAT);
    write_st_raw("max.safetensors", UINT64_MAX, "{\"a\":{}}", 8, 104);
    expect_st_message("max.safetensors",
                      "header length 18446744073709551615 exceeds the file size 120");
    write_st_raw("near.safetensors", UINT64_MAX - 7, "{}", 2, 0);
    expect_st_failure("near.safetensors", RA_ERR_FORMAT);
    write_st("zero_header.safetensors", "", 16);
    expect_st_failure("zero_header.safetensors", RA_ERR_FORMAT);
    write_st("not_json.safetensors", "hello world", 0);
    expect_st_failure("not_json.safetensors", RA_ERR_FORMAT);
    write_st("truncated.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],", 4);
    expect_st_failure("truncated.safetensors", RA_ERR_FORMAT);
    write_st("array.safetensors", "[1, 2, 3]", 0);
    expect_st_failure("array.safetensors", RA_ERR_FORMAT);
    write_st("garbage.safetensors", "{} x", 0);
    expect_st_failure("garbage.safetensors", RA_ERR_FORMAT);
    write_st_raw("nul.safetensors", 4, "{}\0 ", 4, 0);
    expect_st_failure("nul.safetensors", RA_ERR_FORMAT);
    write_st("meta.safetensors", "{\"__metadata__\":[1]}", 0);
    expect_st_failure("meta.safetensors", RA_ERR_FORMAT);
    char deep[4001];
    memset(deep, '[', 2000);
    memset(deep + 2000, ']', 2000);
    deep[4000] = '\0';
    write_st("deep.safetensors", deep, 0);
    expect_st_failure("deep.safetensors", RA_ERR_FORMAT);

    ra_safetensors *st = NULL;
    char msg[256];
    CHECK_FAIL(ra_safetensors_open(&st, tpath("missing.safetensors"), msg, sizeof msg),
               RA_ERR_IO, msg, "missing.safetensors");
    CHECK_FAIL(ra_safetensors_open(&st, temp_dir, msg, sizeof msg), RA_ERR_IO, msg, temp_dir);
    CHECK(ra_safetensors_open(NULL, tpath("W.safetensors"), msg, sizeof msg) == RA_ERR_NULL,
          "NULL out");
}

#define ENTRY(name, dtype, shape, offsets) \
    "\"" name "\":{\"dtype\":" dtype ",\"shape\":" shape ",\"data_offsets\":" offsets "}"

static void test_st_hostile_entries(void)
{
    static const struct {
        const char *header;
        ra_status expected;
    } cases[] = {
        {"{" ENTRY("a", "\"F4\"", "[2]", "[0,8]") "}", RA_ERR_DTYPE},
        {"{" ENTRY("a", "\"f32\"", "[2]", "[0,8]") "}", RA_ERR_DTYPE},
        {"{" ENTRY("a", "32", "[2]", "[0,8]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[-2]", "[0,8]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[2.5]", "[0,8]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[\"2\"]", "[0,8]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[1e300]", "[0,8]") "}", RA_ERR_FORMAT},
        /* sizes and offsets written as floats (safetensors' reader refuses them; they ran) */
        {"{" ENTRY("a", "\"F32\"", "[2.0]", "[0,8]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[2]", "[0,8e0]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[9007199254740993]", "[0,8]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[null]", "[0,8]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "2", "[0,8]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[1,1,1,1,1,1,1,1,2]", "[0,8]") "}", RA_ERR_SHAPE},
        {"{" ENTRY("a", "\"F32\"", "[4294967296,4294967296,4294967296]", "[0,8]") "}",
         RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"U8\"", "[4611686018427387,4611686018427387]", "[0,8]") "}",
         RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[2]", "[8,0]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[2]", "[32,40]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[2]", "[0,8,16]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[2]", "[0]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[2]", "[-8,0]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[2]", "[0,12]") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[2]", "{\"begin\":0}") "}", RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[2]", "[0,8]") "," ENTRY("b", "\"F32\"", "[2]", "[4,12]") "}",
         RA_ERR_FORMAT},
        {"{" ENTRY("a", "\"F32\"", "[2]", "[0,8]") "," ENTRY("a", "\"F32\"", "[2]", "[8,16]") "}",
         RA_ERR_FORMAT},
        {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", RA_ERR_FORMAT},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", RA_ERR_FORMAT},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", RA_ERR_FORMAT},
        {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}",
         RA_ERR_FORMAT},
        {"{\"a\":5}", RA_ERR_FORMAT},
        {"{\"a\":null}", RA_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "entry%zu.safetensors", i);
        write_st(name, cases[i].header, 16);
        expect_st_failure(name, cases[i].expected);
    }
    write_st("mismatch.safetensors", "{" ENTRY("wq.weight", "\"F32\"", "[4, 8]", "[0, 64]") "}",
             128);
    expect_st_message("mismatch.safetensors",
                      "tensor \"wq.weight\": data_offsets [0, 64) hold 64 bytes but shape "
                      "[4, 8] of F32 needs 128");
    write_st("overlap.safetensors", "{" ENTRY("b", "\"F32\"", "[2]", "[4,12]") ","
             ENTRY("a", "\"U8\"", "[8]", "[0,8]") "}", 16);
    expect_st_message("overlap.safetensors", "tensors \"a\" and \"b\" overlap");
    write_st("inside.safetensors", "{" ENTRY("big", "\"U8\"", "[16]", "[0,16]") ","
             ENTRY("small", "\"U8\"", "[2]", "[6,8]") "}", 16);
    expect_st_message("inside.safetensors", "tensors \"big\" and \"small\" overlap");
    write_st("dup.safetensors", "{" ENTRY("w", "\"U8\"", "[4]", "[0,4]") ","
             ENTRY("w", "\"U8\"", "[4]", "[4,8]") "}", 8);
    expect_st_message("dup.safetensors", "tensor name \"w\" appears twice");
}

/* The format's own rules that cJSON's tree hides or that the layout
 * breaks: each file below is refused with the message given. */
static void test_st_format_rules(void)
{
    static const struct {
        const char *header;
        size_t data_len;
        const char *message; /* what follows "<path>: " */
    } cases[] = {
        {"{" ENTRY("a\\u0000b", "\"U8\"", "[4]", "[0,4]") "}", 4,
         "the header holds a NUL character (\\u0000) in a string, at line 1, column 4"},
        {"{" ENTRY("a", "\"F32\\u0000x\"", "[1]", "[0,4]") "}", 4,
         "the header holds a NUL character (\\u0000) in a string, at line 1, column 19"},
        /* an escape JSON has not, and a surrogate without its pair: not named NUL */
        {"{" ENTRY("a\\qb", "\"U8\"", "[4]", "[0,4]") "}", 4,
         "the header is not valid JSON at line 1, column 4"},
        {"{" ENTRY("a\\udc00b", "\"U8\"", "[4]", "[0,4]") "}", 4,
         "the header holds an unpaired UTF-16 surrogate (\\uD800 to \\uDFFF) in a string, at "
         "line 1, column 4"},
        {"{" ENTRY("a\xff", "\"U8\"", "[4]", "[0,4]") "}", 4,
         "the header is not valid UTF-8 (byte 3)"},
        {"{" ENTRY("a\xc0\x80", "\"U8\"", "[4]", "[0,4]") "}", 4,
         "the header is not valid UTF-8 (byte 3)"},
        {"{" ENTRY("a\xed\xa0\x80", "\"U8\"", "[4]", "[0,4]") "}", 4,
         "the header is not valid UTF-8 (byte 3)"},
        {" {}", 0, "the header does not start with '{'"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "\"__metadata__\" appears twice"},
        {"{\"__metadata__\":{\"n\":1}}", 0, "\"__metadata__\" value \"n\" is not a string"},
        {"{" ENTRY("a", "\"U8\"", "[2.0]", "[0,2]") "}", 2,
         "the header holds the number 2.0; only non-negative integers written in plain "
         "digits are allowed"},
        {"{" ENTRY("a", "\"U8\"", "[2]", "[0,2e0]") "}", 2,
         "the header holds the number 2e0; only non-negative integers written in plain "
         "digits are allowed"},
        {"{" ENTRY("a", "\"U8\"", "[1e30]", "[0,2]") "}", 2,
         "the header holds the number 1e30; only non-negative integers written in plain "
         "digits are allowed"},
        {"{" ENTRY("a", "\"U8\"", "[2]", "[-0,2]") "}", 2,
         "the header holds the number -0; only non-negative integers written in plain "
         "digits are allowed"},
        {"{" ENTRY("a", "\"U8\"", "[02]", "[0,2]") "}", 2,
         "the header holds the number 02; only non-negative integers written in plain "
         "digits are allowed"},
        {"{" ENTRY("a", "\"U8\"", "[2.]", "[0,2]") "}", 2,
         "the header holds the number 2.; only non-negative integers written in plain "
         "digits are allowed"},
        {"{" ENTRY("a\tb", "\"U8\"", "[2]", "[0,2]") "}", 2,
         "the header is not valid JSON at line 1, column 4"},
        {"{\v" ENTRY("a", "\"U8\"", "[2]", "[0,2]") "}", 2,
         "the header is not valid JSON at line 1, column 2"},
        {"{" ENTRY("a", "\"U8\"", "[4]", "[2,6]") "}", 6, "data bytes [0, 2) belong to no tensor"},
        {"{" ENTRY("a", "\"U8\"", "[4]", "[0,4]") "}", 6, "data bytes [4, 6) belong to no tensor"},
        {"{}", 1, "data bytes [0, 1) belong to no tensor"},
        {"{" ENTRY("a", "\"U8\"", "[2]", "[0,2]") "," ENTRY("b", "\"U8\"", "[2]", "[3,5]") "}",
         5, "data bytes [2, 3) belong to no tensor"},
        {"{" ENTRY("a", "\"U8\"", "[2]", "[0,2]") "," ENTRY("e", "\"U8\"", "[0]", "[3,3]") ","
         ENTRY("b", "\"U8\"", "[2]", "[3,5]") "}", 5, "data bytes [2, 3) belong to no tensor"},
        {"{" ENTRY("a", "\"U8\"", "[4]", "[0,4]") "," ENTRY("e", "\"U8\"", "[0]", "[2,2]") "}",
         4, "tensors \"a\" and \"e\" overlap"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "rule%zu.safetensors", i);
        write_st(name, cases[i].header, cases[i].data_len);
        expect_st_message(name, cases[i].message);
    }

    /* Still valid: an escaped backslash before "u0000", UTF-8 names, empty
     * tensors where one ends and at the very end, no tensors and no data. */
    static const struct {
        const char *header;
        size_t data_len;
        const char *name;
    } valid[] = {
        {"{" ENTRY("a\\\\u0000", "\"U8\"", "[4]", "[0,4]") "}", 4, "a\\u0000"},
        {"{" ENTRY("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "\"U8\"", "[4]", "[0,4]") "}", 4,
         "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"},
        {"{" ENTRY("z", "\"U8\"", "[0,3]", "[4,4]") "," ENTRY("a", "\"U8\"", "[2,2]", "[0,4]")
         "," ENTRY("y", "\"F32\"", "[0]", "[0,0]") "}", 4, "z"},
        {"{\"__metadata__\":{\"format\":\"pt\"}}        ", 0, NULL},
    };
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
        char name[32], msg[256];
        snprintf(name, sizeof name, "valid%zu.safetensors", i);
        write_st(name, valid[i].header, valid[i].data_len);
        ra_safetensors *st = NULL;
        ra_status status = ra_safetensors_open(&st, tpath(name), msg, sizeof msg);
        CHECK(status == RA_OK, "%s: %s", name, msg);
        CHECK(status != RA_OK || valid[i].name == NULL ||
                  ra_safetensors_find(st, valid[i].name) != NULL,
              "%s: tensor missing", name);
        ra_safetensors_close(st);
    }
}

static void test_st_write_errors(void)
{
    float x[2] = {1, 2};
    char msg[256];
    ra_st_tensor dup[2] = {
        {"w", RA_ST_F32, 1, {2}, 2, x, sizeof x},
        {"w", RA_ST_F32, 1, {2}, 2, x, sizeof x},
    };
    CHECK_FAIL(ra_safetensors_write(tpath("dup_w.safetensors"), dup, 2, msg, sizeof msg),
               RA_ERR_ARGUMENT, msg, "dup_w.safetensors");
    ra_st_tensor wrong = {"w", RA_ST_F32, 1, {3}, 3, x, sizeof x};
    CHECK_FAIL(ra_safetensors_write(tpath("size_w.safetensors"), &wrong, 1, msg, sizeof msg),
               RA_ERR_SHAPE, msg, "size_w.safetensors");
    ra_st_tensor reserved = {"__metadata__", RA_ST_F32, 1, {2}, 2, x, sizeof x};
    CHECK_FAIL(ra_safetensors_write(tpath("meta_w.safetensors"), &reserved, 1, msg, sizeof msg),
               RA_ERR_ARGUMENT, msg, "meta_w.safetensors");
    ra_st_tensor dtype = {"w", RA_ST_DTYPE_COUNT, 1, {2}, 2, x, sizeof x};
    CHECK_FAIL(ra_safetensors_write(tpath("dtype_w.safetensors"), &dtype, 1, msg, sizeof msg),
               RA_ERR_DTYPE, msg, "dtype_w.safetensors");
    CHECK(access(tpath("dup_w.safetensors"), F_OK) != 0 &&
          access(tpath("size_w.safetensors"), F_OK) != 0, "a failed write left a file");
    CHECK(ra_safetensors_write(tpath("none.safetensors"), NULL, 0, msg, sizeof msg) == RA_OK,
          "no tensors: %s", msg);
}

/* Opens name as .npy or .safetensors and closes it again. */
static ra_status open_and_close(const char *name, int is_npy, char *msg, size_t msg_len)
{
    if (is_npy) {
        ra_npy npy;
        ra_status st = ra_npy_read(tpath(name), &npy, msg, msg_len);
        ra_npy_free(&npy);
        return st;
    }
    ra_safetensors *sf = NULL;
    ra_status st = ra_safetensors_open(&sf, tpath(name), msg, msg_len);
    ra_safetensors_close(sf);
    return st;
}

/* Every strict prefix of a valid file must fail cleanly, and every file with
 * one of its first 256 bytes changed must either open or fail with a
 * message (and, under a sanitizer or valgrind, touch no byte it should not). */
static void test_mutations(void)
{
    static const char *const files[2] = {"W.safetensors", "four.npy"};
    static const unsigned char values[6] = {0x00, 0xff, '"', '9', '[', ','};
    for (int f = 0; f < 2; f++) {
        size_t n = 0;
        unsigned char *bytes = read_bytes(tpath(files[f]), &n);
        CHECK(bytes != NULL && n > 64, "%s missing", files[f]);
        if (bytes == NULL) continue;
        char msg[256];
        for (size_t len = 0; len < n; len++) {
            write_bytes("mutant", bytes, len);
            ra_status st = open_and_close("mutant", f == 1, msg, sizeof msg);
            CHECK(st != RA_OK && msg[0] != '\0', "%s: prefix of %zu bytes", files[f], len);
        }
        for (size_t at = 0; at < n && at < 256; at++) {
            for (int v = 0; v < 6; v++) {
                unsigned char saved = bytes[at];
                bytes[at] = values[v];
                write_bytes("mutant", bytes, n);
                bytes[at] = saved;
                ra_status st = open_and_close("mutant", f == 1, msg, sizeof msg);
                CHECK(st == RA_OK || msg[0] != '\0', "%s: byte %zu: no message", files[f], at);
            }
        }
        free(bytes);
    }
}

/* ---- config.json --------------------------------------------------------- */

static ra_status parse_config(const char *text, ra_hf_fields *cfg, char *msg, size_t msg_len)
{
    return ra_hf_fields_parse(text, strlen(text), cfg, msg, msg_len);
}

static void test_config_llama(void)
{
    const char *text =
        "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"hidden_size\": 4096,\n"
        "  \"num_attention_heads\": 32,\n  \"num_key_value_heads\": 8,\n"
        "  \"head_dim\": null,\n  \"max_position_embeddings\": 8192,\n"
        "  \"rope_theta\": 500000.0,\n  \"rope_scaling\": null,\n"
        "  \"torch_dtype\": \"bfloat16\",\n  \"tie_word_embeddings\": false\n}\n";
    ra_hf_fields cfg;
    char msg[256];
    ra_status st = parse_config(text, &cfg, msg, sizeof msg);
    CHECK(st == RA_OK && msg[0] == '\0', "%s", msg);
    CHECK(cfg.hidden_size == 4096 && cfg.has_hidden_size, "hidden_size");
    CHECK(cfg.num_attention_heads == 32 && cfg.has_num_attention_heads, "heads");
    CHECK(cfg.num_key_value_heads == 8 && cfg.has_num_key_value_heads, "kv heads");
    CHECK(cfg.head_dim == 0 && !cfg.has_head_dim, "null head_dim counts as absent");
    CHECK(cfg.max_position_embeddings == 8192 && cfg.has_max_position_embeddings, "max pos");
    CHECK(cfg.rope_theta == 500000.0 && cfg.has_rope_theta, "theta");
    CHECK(!cfg.has_partial_rotary_factor && cfg.partial_rotary_factor == 0, "prf");

    ra_hf_fields_free(&cfg);
    st = parse_config("{\"rope_theta\": 10000, \"head_dim\": 128, "
                      "\"partial_rotary_factor\": 0.5}", &cfg, msg, sizeof msg);
    CHECK(st == RA_OK && cfg.rope_theta == 10000.0 && cfg.head_dim == 128 &&
          cfg.partial_rotary_factor == 0.5 && !cfg.has_hidden_size, "%s", msg);
    ra_hf_fields_free(&cfg);
    st = parse_config("{\"rope_parameters\": {\"rope_theta\": 1000000, \"rope_type\": "
                      "\"default\"}}", &cfg, msg, sizeof msg);
    CHECK(st == RA_OK && cfg.has_rope_theta && cfg.rope_theta == 1e6, "nested: %s", msg);
    ra_hf_fields_free(&cfg);
    st = parse_config("{}", &cfg, msg, sizeof msg);
    CHECK(st == RA_OK && !cfg.has_hidden_size && !cfg.has_num_attention_heads &&
          !cfg.has_rope_theta && cfg.num_attention_heads == 0, "empty: %s", msg);
    ra_hf_fields_free(&cfg);
    st = parse_config("{\"_name_or_path\": \"a\\\\u0000\", \"hidden_size\": 64}", &cfg, msg,
                      sizeof msg); /* a backslash, then the text u0000 */
    CHECK(st == RA_OK && cfg.hidden_size == 64, "an escaped backslash before u0000: %s", msg);
    const char *longer = "{\"hidden_size\": 64} and then garbage past len";
    ra_hf_fields_free(&cfg);
    st = ra_hf_fields_parse(longer, 19, &cfg, msg, sizeof msg);
    CHECK(st == RA_OK && cfg.hidden_size == 64, "len limits the text: %s", msg);
    ra_hf_fields_free(&cfg); /* the parsed tree, kept for ra_hf_config_int and the rest */
}

static void test_config_hostile(void)
{
    static const struct {
        const char *text, *message;
    } cases[] = {
        {"{\"num_attention_heads\": \"32\"}",
         "config.json: \"num_attention_heads\" must be a positive integer"},
        {"{\"num_attention_heads\": 32.5}",
         "config.json: \"num_attention_heads\" must be a positive integer"},
        {"{\"num_attention_heads\": 0}",
         "config.json: \"num_attention_heads\" must be a positive integer"},
        {"{\"num_key_value_heads\": -8}",
         "config.json: \"num_key_value_heads\" must be a positive integer"},
        {"{\"hidden_size\": true}", "config.json: \"hidden_size\" must be a positive integer"},
        {"{\"head_dim\": 1e300}",
         "config.json: \"head_dim\" is written as a float (with a fraction or an "
         "exponent): it must be an integer, as transformers' config classes require"},
        {"{\"head_dim\": 100000000000000000000}",
         "config.json: \"head_dim\" must be a positive integer"},
        {"{\"max_position_embeddings\": [4096]}",
         "config.json: \"max_position_embeddings\" must be a positive integer"},
        {"{\"rope_theta\": \"10000\"}", "config.json: \"rope_theta\" must be a positive number"},
        {"{\"rope_theta\": -1}", "config.json: \"rope_theta\" must be a positive number"},
        {"{\"rope_theta\": 1e999}", "config.json: \"rope_theta\" must be a positive number"},
        /* Python's json's constants are numbers, refused where a finite one is read */
        {"{\"rope_theta\": Infinity}", "config.json: \"rope_theta\" must be a positive number"},
        {"{\"rope_theta\": NaN}", "config.json: \"rope_theta\" must be a positive number"},
        {"{\"num_attention_heads\": NaN}",
         "config.json: \"num_attention_heads\" must be a positive integer"},
        {"{\"num_attention_heads\": Infinity}",
         "config.json: \"num_attention_heads\" must be a positive integer"},
        {"{\"model_type\": \"ultrabert\", \"layer_types\": [\"full_attention\"], "
         "\"rope_theta\": [Infinity]}",
         "config.json: \"rope_theta\" must list positive numbers, a base per layer"},
        /* and not where Python's json refuses them too */
        {"{\"a\": -NaN}", "config.json: not valid JSON at line 1, column 7"},
        {"{\"a\": 1NaN}", "config.json: not valid JSON at line 1, column 8"},
        {"{\"a\": NaNa}", "config.json: not valid JSON at line 1, column 10"},
        {"{\"a\": nan}", "config.json: not valid JSON at line 1, column 7"},
        {"{\"a\": [-infinity]}", "config.json: not valid JSON at line 1, column 8"},
        {"{\"a\": \"x\"NaN}", "config.json: not valid JSON at line 1, column 10"},
        {"{NaN: 1}", "config.json: not valid JSON at line 1, column 2"},
        {"{\"partial_rotary_factor\": 1.5}",
         "config.json: \"partial_rotary_factor\" must be a number in (0, 1]"},
        /* refused as --theta and the other options refuse them: subnormal
         * numbers, counts beyond the options' ranges */
        {"{\"rope_theta\": 1e-320}", "config.json: \"rope_theta\" must be a positive number"},
        {"{\"rope_parameters\": {\"rope_theta\": 4e-324}}",
         "config.json: \"rope_theta\" must be a positive number"},
        {"{\"rms_norm_eps\": 2e-308}", "config.json: \"rms_norm_eps\" must be a positive number"},
        {"{\"partial_rotary_factor\": 1e-310}",
         "config.json: \"partial_rotary_factor\" must be a number in (0, 1]"},
        {"{\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 1e-320}}",
         "config.json: \"rope_scaling.factor\" must be a positive number"},
        {"{\"num_attention_heads\": 2147483648}",
         "config.json: \"num_attention_heads\" is 2147483648; at most 2147483647 is supported"},
        {"{\"max_position_embeddings\": 4294967298}",
         "config.json: \"max_position_embeddings\" is 4294967298; at most 4294967297 is "
         "supported"},
        {"{\"hidden_size\": 64, \"hidden_size\": 128}",
         "config.json: \"hidden_size\" appears twice"},
        {"not json", "config.json: not valid JSON at line 1, column 1"},
        /* cJSON would end these strings at the NUL: the key rope_theta, the
         * model_type llama */
        {"{\"rope_theta\\u0000\": 1}", "config.json: a NUL character (\\u0000) in a string at "
         "line 1, column 13: refused (it would cut the string short)"},
        {"{\"model_type\": \"llama\\u0000x\"}", "config.json: a NUL character (\\u0000) in a "
         "string at line 1, column 22: refused (it would cut the string short)"},
        /* other escapes cJSON fails on: not named NUL (an escape JSON has not;
         * a surrogate without its pair, which JSON allows and cJSON refuses) */
        {"{\"rope_theta\\q\": 1}", "config.json: not valid JSON at line 1, column 13"},
        {"{\"a\": \"\\u00\"}", "config.json: not valid JSON at line 1, column 8"},
        {"{\"model_type\": \"ab\\ud800\"}", "config.json: an unpaired UTF-16 surrogate "
         "(\\uD800 to \\uDFFF) in a string at line 1, column 19: refused (no UTF-8 text holds it)"},
        {"{\"model_type\": \"ab\\uD83D\\u0041\"}", "config.json: an unpaired UTF-16 "
         "surrogate (\\uD800 to \\uDFFF) in a string at line 1, column 19: refused (no UTF-8 text "
         "holds it)"},
        {"{\"hidden_size\": 4096,", "config.json: not valid JSON at line 1, column 22"},
        {"{\"hidden_size\": 4096} {}", "config.json: not valid JSON at line 1, column 23"},
        /* lines count from 1, columns characters (\u00e9 is two bytes) */
        {"{\n  \"hidden_size\": 64,\n  \"\u00e9\": 1,\n  \"rope_theta\" 5\n}",
         "config.json: not valid JSON at line 4, column 16"},
        {"{\"\u00e9\u00e9\": 1,}", "config.json: not valid JSON at line 1, column 10"},
        {"", "config.json: not valid JSON at line 1, column 1"},
        /* in an array, after a ',': where the text ends, and the x (as
         * Python's json); they were the 2, as for an object's key */
        {"{\"eos_token_id\": [1, 2", "config.json: not valid JSON at line 1, column 23"},
        {"{\"eos_token_id\": [1,2x]}", "config.json: not valid JSON at line 1, column 22"},
        {"{\"a\": [{\"b\": 1}, 2", "config.json: not valid JSON at line 1, column 19"},
        {"{\"a\": [1], \"b\": 1, 2: 3}",
         "config.json: not valid JSON at line 1, column 20"},
        {"[1, 2]", "config.json: the top level is not a JSON object"},
        /* what JSON and Python's json.load (transformers' reader) refuse and
         * cJSON took: numbers by strtod's grammar (010000 read as 10000),
         * raw control characters in strings */
        {"{\"rope_theta\": 010000}", "config.json: not valid JSON at line 1, column 16"},
        {"{\"rope_theta\": 5.}", "config.json: not valid JSON at line 1, column 16"},
        {"{\"rope_theta\": 1.e4}", "config.json: not valid JSON at line 1, column 16"},
        {"{\"a\": [1, -0.5e+2, -5.]}", "config.json: not valid JSON at line 1, column 20"},
        {"{\"model_type\": \"lla\tma\"}", "config.json: not valid JSON at line 1, column 20"},
        /* a form feed between tokens, bytes not UTF-8, a byte order mark
         * (Python's json and open(encoding="utf-8") refuse them) */
        {"{\"hidden_size\": 64,\f\"x\": 1}", "config.json: not valid JSON at line 1, column 20"},
        {"{\"hidden_act\": \"sil\xff\"}", "config.json: not valid JSON at line 1, column 20"},
        {"\xef\xbb\xbf{\"hidden_size\": 64}", "config.json: not valid JSON at line 1, column 1"},
        /* an int field written as a float (4.0, 64e0: Python's json reads a
         * float), which transformers' config classes refuse (they ran) */
        {"{\"num_attention_heads\": 4.0}",
         "config.json: \"num_attention_heads\" is written as a float (with a fraction or an "
         "exponent): it must be an integer, as transformers' config classes require"},
        {"{\"hidden_size\": 64e0}",
         "config.json: \"hidden_size\" is written as a float (with a fraction or an "
         "exponent): it must be an integer, as transformers' config classes require"},
        {"{\"num_attention_heads\": 4.5}",
         "config.json: \"num_attention_heads\" must be a positive integer"},
        {"{\"sliding_window\": 4.0}",
         "config.json: \"sliding_window\" must be a positive integer"},
        {"{\"max_window_layers\": 1.0}",
         "config.json: \"max_window_layers\" must be a non-negative integer"},
        {"{\"use_sliding_window\": 1.0}",
         "config.json: \"use_sliding_window\" must be true or false"},
        {"{\"sliding_window\": 0}", "config.json: \"sliding_window\" must be a positive integer"},
        {"{\"sliding_window\": 0, \"use_sliding_window\": true}",
         "config.json: \"sliding_window\" must be a positive integer"},
        {"{\"use_sliding_window\": 1}",
         "config.json: \"use_sliding_window\" must be true or false"},
        {"{\"max_window_layers\": -1}",
         "config.json: \"max_window_layers\" must be a non-negative integer"},
        {"{\"layer_types\": \"full_attention\"}",
         "config.json: \"layer_types\" must be an array of strings"},
        {"{\"layer_types\": [\"full_attention\", 1]}",
         "config.json: \"layer_types\" must be an array of strings"},
        {"{\"layer_types\": [], \"layer_types\": []}",
         "config.json: \"layer_types\" appears twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ra_hf_fields cfg;
        char msg[256];
        ra_status st = parse_config(cases[i].text, &cfg, msg, sizeof msg);
        CHECK(st == RA_ERR_FORMAT, "%s: status %d", cases[i].text, (int)st);
        CHECK(strcmp(msg, cases[i].message) == 0, "%s: got \"%s\"", cases[i].text, msg);
        CHECK(!cfg.has_hidden_size && cfg.hidden_size == 0, "out not zeroed");
    }
    ra_hf_fields cfg;
    char tiny[8];
    /* JSON's numbers, every form of its grammar, still read */
    CHECK(parse_config("{\"hidden_size\": 64, \"x\": [0, -0, 0.5, 1E4, -1.5e-3, 1e+2, "
                       "10000.0, 2E-0]}", &cfg, NULL, 0) == RA_OK && cfg.hidden_size == 64,
          "JSON's numbers refused");
    ra_hf_fields_free(&cfg);
    /* Python's json's NaN, Infinity and -Infinity (transformers 4 saved Bamba's
     * "time_step_limit": [0.0, Infinity]) read as those numbers; in strings, text */
    {
        char why[256] = "";
        CHECK(parse_config("{\"hidden_size\": 64, \"time_step_limit\": [0.0, Infinity], "
                           "\"x\": {\"y\":NaN,\"z\": -Infinity }, \"w\": \"NaN, Infinity\", "
                           "\"num_attention_heads\": 4}", &cfg, why, sizeof why) == RA_OK &&
                  cfg.hidden_size == 64 && cfg.num_attention_heads == 4,
              "Python's json's constants refused: %s", why);
        ra_hf_fields_free(&cfg);
        static const char text[] = "[NaN, Infinity, -Infinity, 1, \"NaN\", 2.5]";
        cJSON *tree = NULL;
        size_t at = 0;
        CHECK(ra_io_json_parse(text, strlen(text), &tree, &at) == RA_OK, "constants: %zu", at);
        const cJSON *e = tree ? tree->child : NULL;
        CHECK(e && isnan(e->valuedouble) && (e->type & RA_IO_JSON_REAL), "NaN");
        e = e ? e->next : NULL;
        CHECK(e && e->valuedouble == INFINITY && (e->type & RA_IO_JSON_REAL), "Infinity");
        e = e ? e->next : NULL;
        CHECK(e && e->valuedouble == -INFINITY && (e->type & RA_IO_JSON_REAL), "-Infinity");
        e = e ? e->next : NULL;
        CHECK(e && e->valuedouble == 1 && !(e->type & RA_IO_JSON_REAL), "1 after them");
        e = e ? e->next : NULL;
        CHECK(e && cJSON_IsString(e) && strcmp(e->valuestring, "NaN") == 0, "\"NaN\"");
        e = e ? e->next : NULL;
        CHECK(e && e->valuedouble == 2.5 && (e->type & RA_IO_JSON_REAL), "2.5 after them");
        cJSON_Delete(tree);
    }
    /* a rope object's original_max_position_embeddings, which transformers reads as
     * a number, and the array of numbers beside it, take 4096.0 */
    CHECK(parse_config("{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
                       "\"original_max_position_embeddings\": 4096.0}}", &cfg, NULL, 0) == RA_OK &&
              cfg.rope.params.original_max_position_embeddings == 4096,
          "a rope object's 4096.0 refused");
    ra_hf_fields_free(&cfg);
    /* past cJSON's nesting limit: named (it read "not valid JSON") */
    enum { LIMIT = 1000 }; /* CJSON_NESTING_LIMIT */
    char deep[2 * LIMIT + 16], msg[256];
    size_t n = 0;
    n += (size_t)sprintf(deep, "{\"a\": ");
    for (int i = 0; i < LIMIT; i++) deep[n++] = '['; /* 1001 levels with the object */
    for (int i = 0; i < LIMIT; i++) deep[n++] = ']';
    deep[n++] = '}', deep[n] = '\0';
    CHECK(parse_config(deep, &cfg, msg, sizeof msg) == RA_ERR_FORMAT &&
              strcmp(msg, "config.json: arrays and objects nested deeper than 1000 levels at "
                          "line 1, column 1006: refused (the JSON parser's nesting limit)") == 0,
          "nesting: %s", msg);
    deep[6 + LIMIT - 1] = '1', deep[6 + LIMIT] = ' '; /* 1000 levels */
    CHECK(parse_config(deep, &cfg, msg, sizeof msg) == RA_OK, "1000 levels refused: %s", msg);
    ra_hf_fields_free(&cfg);
    CHECK(parse_config("nope", &cfg, tiny, sizeof tiny) == RA_ERR_FORMAT &&
          strlen(tiny) == sizeof tiny - 1, "message truncated and terminated");
    CHECK(parse_config("nope", &cfg, NULL, 0) == RA_ERR_FORMAT, "NULL msg");
    CHECK(ra_hf_fields_parse(NULL, 0, &cfg, tiny, sizeof tiny) == RA_ERR_NULL, "NULL text");
}

/* Which layers slide, as transformers reads the keys (fields_window.c). */
static void test_config_window(void)
{
    static const struct {
        const char *text;
        int64_t layer, window; /* layer -1: not known */
    } cases[] = {
        {"{}", -1, 0},
        {"{\"sliding_window\": null}", 3, 0},
        /* Qwen2-MoE saved by transformers 5: 0 for none */
        {"{\"sliding_window\": 0, \"use_sliding_window\": false}", 3, 0},
        {"{\"sliding_window\": 4096}", -1, 4096}, /* Mistral v0.1: every layer */
        {"{\"sliding_window\": 4096}", 7, 4096},
        /* Qwen2 (transformers 4): off unless use_sliding_window */
        {"{\"sliding_window\": 32768, \"use_sliding_window\": false, "
         "\"max_window_layers\": 28}", 30, 0},
        {"{\"sliding_window\": 64, \"use_sliding_window\": true, \"max_window_layers\": 2}",
         1, 0},
        {"{\"sliding_window\": 64, \"use_sliding_window\": true, \"max_window_layers\": 2}",
         2, 64},
        {"{\"sliding_window\": 64, \"use_sliding_window\": true, \"max_window_layers\": 2}",
         -1, -1}, /* layers differ */
        {"{\"sliding_window\": 64, \"use_sliding_window\": true}", 0, 64},
        /* layer_types (transformers 5) rule over the rest */
        {"{\"sliding_window\": 8, \"use_sliding_window\": false, "
         "\"layer_types\": [\"full_attention\", \"sliding_attention\"]}", 1, 8},
        {"{\"sliding_window\": 8, \"layer_types\": [\"full_attention\", "
         "\"sliding_attention\"]}", 0, 0},
        {"{\"sliding_window\": 8, \"layer_types\": [\"full_attention\", "
         "\"sliding_attention\"]}", -1, -1},
        {"{\"sliding_window\": 8, \"layer_types\": [\"full_attention\", "
         "\"sliding_attention\"]}", 5, -1}, /* past the list */
        {"{\"sliding_window\": 8, \"layer_types\": [\"sliding_attention\"]}", 5, -1},
        {"{\"sliding_window\": 8, \"layer_types\": [\"full_attention\"]}", -1, 0},
        {"{\"sliding_window\": null, \"layer_types\": [\"sliding_attention\"]}", 0, 0},
        {"{\"layer_types\": [\"chunked_attention\", \"full_attention\"]}", 0, -1},
        {"{\"layer_types\": [\"chunked_attention\", \"full_attention\"]}", 1, 0},
        {"{\"layer_types\": [\"chunked_attention\", \"full_attention\"]}", -1, -1},
        {"{\"layer_types\": []}", -1, -1}, /* empty: no layer's kind */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ra_hf_fields cfg;
        char msg[256];
        ra_status st = parse_config(cases[i].text, &cfg, msg, sizeof msg);
        int64_t window = ra_hf_layer_window(&cfg.window, cases[i].layer, 0);
        CHECK(st == RA_OK && window == cases[i].window, "%s, layer %lld: window %lld (%s)",
              cases[i].text, (long long)cases[i].layer, (long long)window, msg);
        ra_hf_fields_free(&cfg);
        CHECK(cfg.window.layer_types == NULL && cfg.window.n_layer_types == 0, "freed");
    }
    CHECK(ra_hf_layer_window(NULL, 0, 0) == 0, "NULL window");

    /* Each family's rule, as its transformers config class reads the keys;
     * conflict: the key for which transformers would not run what the
     * config says (ra_hf_window_conflict), "" for none. */
    static const struct {
        const char *text;
        int64_t layer;
        int no_rope;
        int64_t window;
        const char *conflict;
    } families[] = {
        /* Mixtral, Phi-3, Starcoder2: every layer; layer_types, use_sliding_window
         * and max_window_layers are not read */
        {"{\"model_type\": \"mixtral\", \"sliding_window\": 16, \"use_sliding_window\": "
         "false, \"max_window_layers\": 4}", 1, 0, 16, ""},
        /* sliding_window 0 with use_sliding_window false: none (Qwen2-MoE's
         * save in transformers 5); a family that slides without the gate
         * then lacks its window */
        {"{\"model_type\": \"qwen2_moe\", \"sliding_window\": 0, \"use_sliding_window\": "
         "false}", 0, 0, 0, ""},
        {"{\"model_type\": \"mixtral\", \"sliding_window\": 0, \"use_sliding_window\": "
         "false}", 1, 0, 0, "sliding_window"},
        {"{\"model_type\": \"phi3\", \"sliding_window\": 16, \"layer_types\": "
         "[\"sliding_attention\", \"sliding_attention\"]}", -1, 0, 16, ""},
        {"{\"model_type\": \"starcoder2\", \"sliding_window\": 16, \"layer_types\": "
         "[\"sliding_attention\", \"full_attention\"]}", 1, 0, 16, "layer_types"},
        {"{\"model_type\": \"starcoder2\", \"sliding_window\": 16, \"layer_types\": "
         "[\"sliding_attention\", \"full_attention\"]}", 0, 0, 16, ""},
        /* Mistral: layer_types (read as Ministral), else every layer */
        {"{\"model_type\": \"mistral\", \"sliding_window\": 16, \"layer_types\": "
         "[\"sliding_attention\", \"full_attention\"]}", 1, 0, 0, ""},
        {"{\"model_type\": \"mistral\", \"use_sliding_window\": false}", 3, 0, 4096, ""},
        /* Qwen2: gated, from max_window_layers on; layer_types with the gate off */
        {"{\"model_type\": \"qwen2\", \"sliding_window\": 16, \"use_sliding_window\": "
         "true, \"max_window_layers\": 2}", 2, 0, 16, ""},
        {"{\"model_type\": \"qwen2\", \"sliding_window\": 16, \"layer_types\": "
         "[\"sliding_attention\"]}", 0, 0, 16, "use_sliding_window"},
        /* Qwen2-MoE: gated, the even layers below max_window_layers */
        {"{\"model_type\": \"qwen2_moe\", \"sliding_window\": 16, \"use_sliding_window\": "
         "true, \"max_window_layers\": 3}", 0, 0, 16, ""},
        {"{\"model_type\": \"qwen2_moe\", \"sliding_window\": 16, \"use_sliding_window\": "
         "true, \"max_window_layers\": 3}", 1, 0, 0, ""},
        {"{\"model_type\": \"qwen2_moe\", \"sliding_window\": 16, \"use_sliding_window\": "
         "true, \"max_window_layers\": 3}", 2, 0, 16, ""},
        {"{\"model_type\": \"qwen2_moe\", \"sliding_window\": 16, \"use_sliding_window\": "
         "true, \"max_window_layers\": 3}", 4, 0, 0, ""},
        {"{\"model_type\": \"qwen2_moe\", \"sliding_window\": 16}", 0, 0, 0, ""},
        /* Qwen3-MoE: gated, every layer; max_window_layers not read */
        {"{\"model_type\": \"qwen3_moe\", \"sliding_window\": 16, \"use_sliding_window\": "
         "true, \"max_window_layers\": 48}", 0, 0, 16, ""},
        {"{\"model_type\": \"qwen3_moe\", \"sliding_window\": 16, \"max_window_layers\": "
         "0}", 0, 0, 0, ""},
        /* SmolLM3: gated, the layers without RoPE */
        {"{\"model_type\": \"smollm3\", \"sliding_window\": 16, \"use_sliding_window\": "
         "true}", 3, 1, 16, ""},
        {"{\"model_type\": \"smollm3\", \"sliding_window\": 16, \"use_sliding_window\": "
         "true}", 2, 0, 0, ""},
        {"{\"model_type\": \"smollm3\", \"sliding_window\": 16}", 3, 1, 0, ""},
        /* Gemma 2: the pattern; a null one cannot be read */
        {"{\"model_type\": \"gemma2\", \"sliding_window\": 16}", 0, 0, 16, ""},
        {"{\"model_type\": \"gemma2\", \"sliding_window\": 16}", 1, 0, 0, ""},
        {"{\"model_type\": \"gemma2\", \"sliding_window\": 16, \"sliding_window_pattern\": "
         "null}", 1, 0, -1, "sliding_window_pattern"},
        /* a pattern says which layers slide whatever sliding_window is (the
         * rope follows it); a sliding layer without a window is not run */
        {"{\"model_type\": \"gemma3_text\", \"sliding_window\": null}", 0, 0, 0,
         "sliding_window"},
        {"{\"model_type\": \"gemma3_text\", \"sliding_window\": null}", 5, 0, 0, ""},
        /* layers not known (-1): one kind for all, or -1 */
        {"{\"model_type\": \"qwen2_moe\", \"sliding_window\": 16, \"use_sliding_window\": "
         "true, \"max_window_layers\": 3}", -1, 0, -1, ""},
        {"{\"model_type\": \"qwen3_moe\", \"sliding_window\": 16, \"use_sliding_window\": "
         "true}", -1, 0, 16, ""},
        {"{\"model_type\": \"smollm3\", \"sliding_window\": 16, \"use_sliding_window\": "
         "true}", -1, 0, -1, ""},
        {"{\"model_type\": \"mistral\", \"sliding_window\": 16, \"layer_types\": []}",
         -1, 0, -1, ""},
        {"{\"model_type\": \"llama\", \"layer_types\": []}", 0, 0, 0, ""},
        /* Llama reads no window; layer_types giving one is not run */
        {"{\"model_type\": \"llama\", \"sliding_window\": 16}", 0, 0, 0, ""},
        {"{\"model_type\": \"llama\", \"sliding_window\": 16, \"layer_types\": "
         "[\"sliding_attention\"]}", 0, 0, 0, "layer_types"},
    };
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        ra_hf_fields cfg;
        char msg[256];
        ra_status st = parse_config(families[i].text, &cfg, msg, sizeof msg);
        int64_t layer = families[i].layer;
        int64_t window = ra_hf_layer_window(&cfg.window, layer, families[i].no_rope);
        const char *conflict = ra_hf_window_conflict(&cfg.window, layer, families[i].no_rope);
        CHECK(st == RA_OK && window == families[i].window &&
                  strcmp(conflict ? conflict : "", families[i].conflict) == 0,
              "%s, layer %lld: window %lld, conflict %s (%s)", families[i].text,
              (long long)layer, (long long)window, conflict ? conflict : "none", msg);
        ra_hf_fields_free(&cfg);
    }
}

/* model.safetensors.index.json: the shard names, each once, in order. */
static void test_st_index(void)
{
    const char *good = "{\"metadata\": {\"total_size\": 12}, \"weight_map\": {"
                       "\"a.weight\": \"model-00001-of-00002.safetensors\", "
                       "\"b.weight\": \"model-00002-of-00002.safetensors\", "
                       "\"c.weight\": \"model-00001-of-00002.safetensors\"}}";
    write_bytes("model.safetensors.index.json", good, strlen(good));
    ra_st_index index;
    char msg[256];
    ra_status st = ra_st_index_read(tpath("model.safetensors.index.json"), &index, msg,
                                    sizeof msg);
    CHECK(st == RA_OK && index.n_shards == 2 &&
              strcmp(index.shards[0], "model-00001-of-00002.safetensors") == 0 &&
              strcmp(index.shards[1], "model-00002-of-00002.safetensors") == 0,
          "%s", msg);
    ra_st_index_free(&index);
    CHECK(index.shards == NULL && index.n_shards == 0, "freed");

    static const struct {
        const char *text, *message; /* message: what follows "<path>: " */
    } cases[] = {
        {"[1]", "the top level is not a JSON object"},
        {"{\"weight_map\": 1", "not valid JSON at line 1, column 17"},
        {"{\n\"weight_map\": {\"a\": \"x.safetensors\" \"b\": \"x.safetensors\"}}",
         "not valid JSON at line 2, column 37"},
        {"{\"metadata\": {}}", "\"weight_map\" must be an object naming each tensor's file"},
        {"{\"weight_map\": {}}", "\"weight_map\" must be an object naming each tensor's file"},
        {"{\"weight_map\": []}", "\"weight_map\" must be an object naming each tensor's file"},
        {"{\"weight_map\": {}, \"weight_map\": {}}", "\"weight_map\" appears twice"},
        {"{\"weight_map\": {\"a\": 3}}",
         "weight_map[\"a\"] must be the name of a .safetensors file beside the index (no "
         "folder)"},
        {"{\"weight_map\": {\"a\": \"../x.safetensors\"}}",
         "weight_map[\"a\"] must be the name of a .safetensors file beside the index (no "
         "folder)"},
        {"{\"weight_map\": {\"a\": \"/etc/x.safetensors\"}}",
         "weight_map[\"a\"] must be the name of a .safetensors file beside the index (no "
         "folder)"},
        {"{\"weight_map\": {\"a\": \".safetensors\"}}",
         "weight_map[\"a\"] must be the name of a .safetensors file beside the index (no "
         "folder)"},
        {"{\"weight_map\": {\"a\": \"model.bin\"}}",
         "weight_map[\"a\"] must be the name of a .safetensors file beside the index (no "
         "folder)"},
        {"{\"weight_map\": {\"a\": \"x\\\\y.safetensors\"}}",
         "weight_map[\"a\"] must be the name of a .safetensors file beside the index (no "
         "folder)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_bytes("bad.index.json", cases[i].text, strlen(cases[i].text));
        char expected[512];
        snprintf(expected, sizeof expected, "%s: %s", tpath("bad.index.json"), cases[i].message);
        st = ra_st_index_read(tpath("bad.index.json"), &index, msg, sizeof msg);
        CHECK(st == RA_ERR_FORMAT && strcmp(msg, expected) == 0, "%s: got \"%s\"",
              cases[i].text, msg);
        CHECK(index.shards == NULL && index.n_shards == 0, "out not zeroed");
    }
    CHECK_FAIL(ra_st_index_read(tpath("absent.index.json"), &index, msg, sizeof msg), RA_ERR_IO,
               msg, "absent.index.json");
    CHECK(ra_st_index_read(NULL, &index, msg, sizeof msg) == RA_ERR_NULL, "NULL path");
}

static void test_config_files(void)
{
    const char *text = "{\"hidden_size\": 256, \"num_attention_heads\": 4}";
    write_bytes("config.json", text, strlen(text));
    ra_hf_fields cfg;
    char msg[256];
    ra_status st = ra_hf_fields_read(tpath("config.json"), &cfg, msg, sizeof msg);
    CHECK(st == RA_OK && cfg.hidden_size == 256 && cfg.num_attention_heads == 4, "%s", msg);
    ra_hf_fields_free(&cfg);

    write_bytes("bad.json", "{\"hidden_size\": 256", 19);
    CHECK_FAIL(ra_hf_fields_read(tpath("bad.json"), &cfg, msg, sizeof msg), RA_ERR_FORMAT, msg,
               "bad.json");
    CHECK_FAIL(ra_hf_fields_read(tpath("absent.json"), &cfg, msg, sizeof msg), RA_ERR_IO, msg,
               "absent.json");
    int fd = open(tpath("huge.json"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && ftruncate(fd, (16 << 20) + 1) == 0, "sparse file");
    if (fd >= 0) close(fd);
    CHECK_FAIL(ra_hf_fields_read(tpath("huge.json"), &cfg, msg, sizeof msg), RA_ERR_FORMAT, msg,
               "huge.json");
}

/* Every reader refuses a FIFO, a folder, a device and a socket, and none
 * waits for a FIFO's writer (alarm ends the program if one does). */
static void test_not_regular_files(void)
{
    CHECK(mkfifo(tpath("fifo"), 0600) == 0, "mkfifo: %s", strerror(errno));
    int sock = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", tpath("sock"));
    CHECK(sock >= 0 && bind(sock, (const struct sockaddr *)&addr, sizeof addr) == 0,
          "socket: %s", strerror(errno));
    static const struct {
        const char *name, *kind; /* name: in the temporary folder, or an absolute path */
    } files[] = {{"fifo", "a FIFO"}, {"", "a folder"}, {"/dev/null", "a device"},
                 {"sock", "a socket"}};
    alarm(30);
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[512], expected[600], msg[256];
        snprintf(path, sizeof path, "%s",
                 files[f].name[0] == '/' ? files[f].name
                 : files[f].name[0]      ? tpath(files[f].name)
                                         : temp_dir);
        snprintf(expected, sizeof expected, "%s: not a regular file (%s)", path, files[f].kind);
        ra_npy npy;
        ra_safetensors *st = NULL;
        ra_hf_fields cfg;
        ra_st_index index;
        ra_status status = ra_npy_read(path, &npy, msg, sizeof msg);
        CHECK(status == RA_ERR_IO && strcmp(msg, expected) == 0, "npy: %s", msg);
        status = ra_safetensors_open(&st, path, msg, sizeof msg);
        CHECK(status == RA_ERR_IO && strcmp(msg, expected) == 0, "safetensors: %s", msg);
        status = ra_hf_fields_read(path, &cfg, msg, sizeof msg);
        CHECK(status == RA_ERR_IO && strcmp(msg, expected) == 0, "config: %s", msg);
        status = ra_st_index_read(path, &index, msg, sizeof msg);
        CHECK(status == RA_ERR_IO && strcmp(msg, expected) == 0, "index: %s", msg);
    }
    alarm(0);
    if (sock >= 0) close(sock);
    unlink(tpath("fifo"));
    unlink(tpath("sock"));
}

/* ---- rope parameters ------------------------------------------------------ */

static ra_status parse_rope(const char *text, ra_hf_rope *rope, char *msg, size_t msg_len)
{
    return ra_hf_rope_parse(text, strlen(text), rope, msg, msg_len);
}

static void test_rope_llama3_and_simple_types(void)
{
    char msg[256];
    ra_hf_rope r;
    /* Llama 3.1's rope_scaling, as its config.json has it. */
    ra_status st = parse_rope("{\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": "
                              "4.0, \"original_max_position_embeddings\": 8192, \"rope_type\": "
                              "\"llama3\"}", &r, msg, sizeof msg);
    CHECK(st == RA_OK && msg[0] == '\0', "%s", msg);
    CHECK(r.type == RA_ROPE_LLAMA3 && r.has_type, "type %d", (int)r.type);
    CHECK(r.params.factor == 8.0 && r.has_factor, "factor");
    CHECK(r.params.low_freq_factor == 1.0 && r.has_low_freq_factor, "low");
    CHECK(r.params.high_freq_factor == 4.0 && r.has_high_freq_factor, "high");
    CHECK(r.params.original_max_position_embeddings == 8192 &&
          r.has_original_max_position_embeddings, "original");
    CHECK(!r.has_theta && !r.has_partial_rotary_factor && !r.has_attention_factor &&
          !r.has_short_factor && r.params.short_factor == NULL && r.params.seq_len == 0 &&
          r.params.max_position_embeddings == 0, "nothing else");
    ra_hf_rope_free(&r);
    CHECK(r.type == RA_ROPE_DEFAULT && !r.has_factor, "free zeroes");

    static const struct {
        const char *text;
        ra_rope_type type;
        double factor;
    } simple[] = {
        {"{\"type\": \"linear\", \"factor\": 2}", RA_ROPE_LINEAR, 2.0},
        {"{\"rope_type\": \"dynamic\", \"factor\": 4.0, \"unknown_key\": [1, {\"a\": 2}]}",
         RA_ROPE_DYNAMIC, 4.0},
        {"{\"rope_type\": \"default\", \"rope_theta\": 10000.0}", RA_ROPE_DEFAULT, 0.0},
        {"{}", RA_ROPE_DEFAULT, 0.0},
        /* rope_type wins over type, as transformers' setdefault does */
        {"{\"type\": \"linear\", \"rope_type\": \"dynamic\", \"factor\": 3}", RA_ROPE_DYNAMIC, 3.0},
        /* null counts as absent */
        {"{\"rope_type\": null, \"type\": \"linear\", \"factor\": null}", RA_ROPE_LINEAR, 0.0},
    };
    for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++) {
        st = parse_rope(simple[i].text, &r, msg, sizeof msg);
        CHECK(st == RA_OK, "%s: %s", simple[i].text, msg);
        CHECK(r.type == simple[i].type && r.params.factor == simple[i].factor &&
              r.has_factor == (simple[i].factor != 0), "%s: type %d factor %g", simple[i].text,
              (int)r.type, r.params.factor);
        ra_hf_rope_free(&r);
    }
    /* M-RoPE: Qwen2-VL's first form, and Qwen3-VL's */
    st = parse_rope("{\"type\": \"mrope\", \"mrope_section\": [16, 24, 24]}", &r, msg, sizeof msg);
    CHECK(st == RA_OK && r.has_mrope && r.type == RA_ROPE_DEFAULT && r.has_mrope_section &&
              r.params.mrope_section[0] == 16 && r.params.mrope_section[2] == 24 &&
              !r.has_mrope_interleaved && !r.params.mrope_interleaved, "mrope: %s", msg);
    ra_hf_rope_free(&r);
    st = parse_rope("{\"rope_type\": \"default\", \"mrope_section\": [24, 20, 20], "
                    "\"mrope_interleaved\": true}", &r, msg, sizeof msg);
    CHECK(st == RA_OK && !r.has_mrope && r.has_mrope_section && r.params.mrope_section[1] == 20 &&
              r.has_mrope_interleaved && r.params.mrope_interleaved == 1, "qwen3_vl: %s", msg);
    ra_hf_rope_free(&r);
    st = parse_rope("{\"rope_type\": \"default\", \"rope_theta\": 1e6, \"partial_rotary_factor\": "
                    "0.25}", &r, msg, sizeof msg);
    CHECK(st == RA_OK && r.has_theta && r.theta == 1e6 && r.has_partial_rotary_factor &&
          r.partial_rotary_factor == 0.25, "theta and partial rotary inside: %s", msg);
    ra_hf_rope_free(&r);
    const char *longer = "{\"type\": \"linear\", \"factor\": 2} trailing text past len";
    st = ra_hf_rope_parse(longer, 32, &r, msg, sizeof msg);
    CHECK(st == RA_OK && r.type == RA_ROPE_LINEAR && r.params.factor == 2, "len: %s", msg);
    ra_hf_rope_free(&r);
    CHECK(ra_hf_rope_parse(NULL, 0, &r, msg, sizeof msg) == RA_ERR_NULL, "NULL json");
    CHECK(ra_hf_rope_parse("{}", 2, NULL, msg, sizeof msg) == RA_ERR_NULL, "NULL out");
    ra_hf_rope_free(NULL);
    CHECK(strcmp(ra_hf_rope_type_name(RA_ROPE_LONGROPE), "longrope") == 0 &&
          strcmp(ra_hf_rope_type_name(RA_ROPE_TYPE_COUNT), "unknown") == 0, "type names");
}

static void test_rope_yarn(void)
{
    char msg[256];
    ra_hf_rope r;
    /* Qwen2.5's YaRN recipe (old "type" key). */
    ra_status st = parse_rope("{\"type\": \"yarn\", \"factor\": 4.0, "
                              "\"original_max_position_embeddings\": 32768}", &r, msg, sizeof msg);
    CHECK(st == RA_OK && r.type == RA_ROPE_YARN && r.params.factor == 4.0 &&
          r.params.original_max_position_embeddings == 32768 && !r.has_mscale &&
          !r.has_truncate && r.params.yarn_no_truncate == 0, "qwen: %s", msg);
    ra_hf_rope_free(&r);
    /* DeepSeek-V3's. */
    st = parse_rope("{\"beta_fast\": 32, \"beta_slow\": 1, \"factor\": 40, \"mscale\": 1.0, "
                    "\"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 4096, "
                    "\"type\": \"yarn\"}", &r, msg, sizeof msg);
    CHECK(st == RA_OK && r.type == RA_ROPE_YARN && r.params.factor == 40 &&
          r.params.beta_fast == 32 && r.params.beta_slow == 1 && r.has_beta_fast &&
          r.has_beta_slow && r.params.mscale == 1.0 && r.params.mscale_all_dim == 1.0 &&
          r.has_mscale && r.has_mscale_all_dim &&
          r.params.original_max_position_embeddings == 4096, "deepseek: %s", msg);
    ra_hf_rope_free(&r);
    /* gpt-oss's: truncate false, attention_factor given. */
    st = parse_rope("{\"rope_type\": \"yarn\", \"factor\": 32.0, \"beta_fast\": 32.0, "
                    "\"beta_slow\": 1.0, \"truncate\": false, \"attention_factor\": 1.25, "
                    "\"original_max_position_embeddings\": 4096}", &r, msg, sizeof msg);
    CHECK(st == RA_OK && r.params.yarn_no_truncate == 1 && r.has_truncate &&
          r.params.attention_factor == 1.25 && r.has_attention_factor, "gpt-oss: %s", msg);
    ra_hf_rope_free(&r);
    st = parse_rope("{\"rope_type\": \"yarn\", \"factor\": 2, \"truncate\": true, "
                    "\"beta_fast\": 0}", &r, msg, sizeof msg);
    CHECK(st == RA_OK && r.params.yarn_no_truncate == 0 && r.has_truncate &&
          r.has_beta_fast && r.params.beta_fast == 0, "truncate true, beta 0: %s", msg);
    ra_hf_rope_free(&r);
    /* null is not "not given": transformers' get("truncate", True) finds None, and its
     * `if truncate:` then does not truncate (it truncated here: 0.11 off in inv_freq) */
    st = parse_rope("{\"rope_type\": \"yarn\", \"factor\": 2, \"truncate\": null}", &r, msg,
                    sizeof msg);
    CHECK(st == RA_OK && r.params.yarn_no_truncate == 1 && r.has_truncate,
          "truncate null: %s", msg);
    ra_hf_rope_free(&r);
}

/* "[1.0, 1.01, ...]" with n entries, into buf. */
static void factor_list(char *buf, size_t len, int n, double first, double step)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%.17g", i ? ", " : "",
                                 first + step * i);
    if (used < len) snprintf(buf + used, len - used, "]");
}

static void test_rope_longrope_phi3(void)
{
    char shorts[2048], longs[2048], text[8192], msg[256];
    factor_list(shorts, sizeof shorts, 48, 1.0, 0.01);
    factor_list(longs, sizeof longs, 48, 1.0, 1.5);
    /* Phi-3-mini-128k: head_dim 96, original_max_position_embeddings at the
     * top level, rope_scaling without it. */
    snprintf(text, sizeof text,
             "{\"hidden_size\": 3072, \"num_attention_heads\": 32, \"max_position_embeddings\": "
             "131072, \"original_max_position_embeddings\": 4096, \"rope_theta\": 10000.0, "
             "\"rope_scaling\": {\"long_factor\": %s, \"short_factor\": %s, \"type\": "
             "\"longrope\"}}", longs, shorts);
    ra_hf_fields cfg;
    ra_status st = parse_config(text, &cfg, msg, sizeof msg);
    CHECK(st == RA_OK, "%s", msg);
    const ra_hf_rope *r = &cfg.rope;
    CHECK(cfg.has_rope && r->type == RA_ROPE_LONGROPE, "type %d", (int)r->type);
    CHECK(r->has_short_factor && r->has_long_factor && r->n_short_factor == 48 &&
          r->n_long_factor == 48, "lengths %lld %lld", (long long)r->n_short_factor,
          (long long)r->n_long_factor);
    CHECK(r->params.short_factor == r->short_factor && r->params.long_factor == r->long_factor,
          "scaling points at the owned arrays");
    int exact = r->short_factor != NULL && r->long_factor != NULL;
    for (int i = 0; exact && i < 48; i++)
        exact = r->short_factor[i] == 1.0 + 0.01 * i && r->long_factor[i] == 1.0 + 1.5 * i;
    CHECK(exact, "factor values");
    CHECK(cfg.has_original_max_position_embeddings &&
          cfg.original_max_position_embeddings == 4096 &&
          r->has_original_max_position_embeddings &&
          r->params.original_max_position_embeddings == 4096, "top-level original inherited");
    CHECK(r->has_theta && r->theta == 10000.0, "theta inherited");
    CHECK(!r->has_factor && cfg.max_position_embeddings == 131072, "factor is derived later");
    ra_hf_fields_free(&cfg);
    CHECK(cfg.rope.short_factor == NULL && !cfg.has_rope, "free zeroes");

    /* "su" is Phi-3's old name; the object's original agrees with the top
     * level's. */
    snprintf(text, sizeof text,
             "{\"original_max_position_embeddings\": 2048, \"rope_scaling\": {\"type\": \"su\", "
             "\"short_factor\": [1, 2], \"long_factor\": [3, 4.5], "
             "\"original_max_position_embeddings\": 2048, \"factor\": 16}}");
    st = parse_config(text, &cfg, msg, sizeof msg);
    CHECK(st == RA_OK && cfg.rope.type == RA_ROPE_LONGROPE &&
          cfg.rope.params.original_max_position_embeddings == 2048 &&
          cfg.rope.params.factor == 16 && cfg.rope.n_long_factor == 2 &&
          cfg.rope.long_factor[1] == 4.5, "su: %s", msg);
    ra_hf_fields_free(&cfg);
    /* transformers 5 replaces the object's original with the top level's
     * (standardize_rope_params) where 4 kept the object's: when they
     * differ, refused, naming both */
    snprintf(text, sizeof text,
             "{\"original_max_position_embeddings\": 4096, \"rope_scaling\": {\"type\": "
             "\"yarn\", \"factor\": 4, \"original_max_position_embeddings\": 2048}}");
    st = parse_config(text, &cfg, msg, sizeof msg);
    CHECK(st == RA_ERR_FORMAT && strstr(msg, "\"rope_scaling.original_max_position_embeddings\" "
                                              "is 2048 and the top level's 4096: transformers 5 "
                                              "takes the top level's for rope type yarn") != NULL,
          "originals differ: %s", msg);
    ra_hf_fields_free(&cfg);
}

static void test_rope_in_config(void)
{
    char msg[256];
    ra_hf_fields cfg;
    /* transformers v5: rope_parameters with rope_theta (and partial rotary)
     * inside. */
    ra_status st = parse_config(
        "{\"hidden_size\": 4096, \"num_attention_heads\": 32, \"max_position_embeddings\": "
        "131072, \"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": 500000.0, "
        "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
        "\"original_max_position_embeddings\": 8192, \"partial_rotary_factor\": 0.5}}",
        &cfg, msg, sizeof msg);
    CHECK(st == RA_OK && cfg.has_rope && cfg.rope.type == RA_ROPE_LLAMA3, "%s", msg);
    CHECK(cfg.rope.has_theta && cfg.rope.theta == 500000.0 && cfg.has_rope_theta &&
          cfg.rope_theta == 500000.0, "theta inside rope_parameters");
    CHECK(cfg.rope.partial_rotary_factor == 0.5 && cfg.partial_rotary_factor == 0.5,
          "partial_rotary_factor inside rope_parameters");
    CHECK(cfg.rope.params.original_max_position_embeddings == 8192, "original");
    ra_hf_fields_free(&cfg);

    /* The object's rope_theta wins over the top level's (transformers'
     * setdefault); the top level fills in what the object lacks. */
    st = parse_config("{\"rope_theta\": 10000, \"partial_rotary_factor\": 0.4, "
                      "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}}",
                      &cfg, msg, sizeof msg);
    CHECK(st == RA_OK && cfg.rope.theta == 1e6 && cfg.rope.partial_rotary_factor == 0.4 &&
          cfg.rope.has_partial_rotary_factor, "precedence: %s", msg);
    ra_hf_fields_free(&cfg);

    /* rope_scaling (v4) is taken before rope_parameters; an empty one is not. */
    st = parse_config("{\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2}, "
                      "\"rope_parameters\": {\"rope_type\": \"dynamic\", \"factor\": 3}}",
                      &cfg, msg, sizeof msg);
    CHECK(st == RA_OK && cfg.rope.type == RA_ROPE_LINEAR && cfg.rope.params.factor == 2,
          "rope_scaling first: %s", msg);
    ra_hf_fields_free(&cfg);
    st = parse_config("{\"rope_scaling\": {}, \"rope_parameters\": {\"rope_type\": \"dynamic\", "
                      "\"factor\": 3}}", &cfg, msg, sizeof msg);
    CHECK(st == RA_OK && cfg.rope.type == RA_ROPE_DYNAMIC, "empty rope_scaling: %s", msg);
    ra_hf_fields_free(&cfg);
    st = parse_config("{\"rope_scaling\": null, \"rope_theta\": 5e5}", &cfg, msg, sizeof msg);
    CHECK(st == RA_OK && !cfg.has_rope && cfg.rope.type == RA_ROPE_DEFAULT &&
          cfg.rope.theta == 5e5, "no rope object: %s", msg);
    ra_hf_fields_free(&cfg);

    /* --rope-parameters replaces the object and inherits the top level. */
    st = parse_config("{\"rope_theta\": 5e5, \"original_max_position_embeddings\": 4096}", &cfg,
                      msg, sizeof msg);
    ra_hf_rope r;
    CHECK(st == RA_OK && parse_rope("{\"rope_type\": \"yarn\", \"factor\": 4}", &r, msg,
                                    sizeof msg) == RA_OK, "%s", msg);
    ra_hf_rope_inherit(&r, &cfg);
    CHECK(r.theta == 5e5 && r.params.original_max_position_embeddings == 4096 &&
          r.has_original_max_position_embeddings && !r.has_partial_rotary_factor, "inherit");
    ra_hf_rope_free(&r);
    ra_hf_fields_free(&cfg);
}

static void test_rope_hostile(void)
{
    static const struct {
        const char *text, *message;
    } cases[] = {
        {"{\"rope_type\": \"yarn\", \"factor\": \"4\"}",
         "rope parameters: \"factor\" must be a positive number"},
        {"{\"rope_type\": \"linear\", \"factor\": 0}",
         "rope parameters: \"factor\" must be a positive number"},
        {"{\"rope_type\": \"linear\", \"factor\": -2}",
         "rope parameters: \"factor\" must be a positive number"},
        {"{\"rope_type\": \"longrope\", \"short_factor\": 1.0}",
         "rope parameters: \"short_factor\" must be a non-empty array of positive numbers"},
        {"{\"rope_type\": \"longrope\", \"short_factor\": []}",
         "rope parameters: \"short_factor\" must be a non-empty array of positive numbers"},
        {"{\"rope_type\": \"longrope\", \"long_factor\": [1.0, \"2\", 3.0]}",
         "rope parameters: \"long_factor\"[1] must be a positive number"},
        {"{\"short_factor\": [1.0, 0]}",
         "rope parameters: \"short_factor\"[1] must be a positive number"},
        {"{\"rope_type\": \"ntk-by-parts\"}",
         "rope parameters: \"rope_type\" is \"ntk-by-parts\"; supported: default, linear, "
         "dynamic, yarn, llama3, longrope (or su), mrope, proportional"},
        {"{\"type\": \"xpos\"}",
         "rope parameters: \"type\" is \"xpos\"; supported: default, linear, dynamic, yarn, "
         "llama3, longrope (or su), mrope, proportional"},
        {"{\"rope_type\": 3}", "rope parameters: \"rope_type\" must be a string"},
        {"{\"mrope_section\": [16, 24]}",
         "rope parameters: \"mrope_section\" must be an array of 3 integers >= 0 (temporal, "
         "height, width)"},
        {"{\"mrope_section\": [16, 24, 24, 0]}",
         "rope parameters: \"mrope_section\" must be an array of 3 integers >= 0 (temporal, "
         "height, width)"},
        {"{\"mrope_section\": [16, -24, 24]}",
         "rope parameters: \"mrope_section\" must be an array of 3 integers >= 0 (temporal, "
         "height, width)"},
        {"{\"mrope_section\": [16, 24.5, 24]}",
         "rope parameters: \"mrope_section\" must be an array of 3 integers >= 0 (temporal, "
         "height, width)"},
        {"{\"mrope_section\": 64}",
         "rope parameters: \"mrope_section\" must be an array of 3 integers >= 0 (temporal, "
         "height, width)"},
        {"{\"mrope_interleaved\": 1}",
         "rope parameters: \"mrope_interleaved\" must be true or false"},
        {"{\"truncate\": \"no\"}", "rope parameters: \"truncate\" must be true, false or null"},
        {"{\"truncate\": 0}", "rope parameters: \"truncate\" must be true, false or null"},
        {"{\"truncate\": true, \"truncate\": null}",
         "rope parameters: \"truncate\" appears twice"},
        {"{\"original_max_position_embeddings\": 4096.5}",
         "rope parameters: \"original_max_position_embeddings\" must be a positive integer"},
        {"{\"original_max_position_embeddings\": 0}",
         "rope parameters: \"original_max_position_embeddings\" must be a positive integer"},
        {"{\"beta_fast\": -1}", "rope parameters: \"beta_fast\" must be a number >= 0"},
        {"{\"beta_slow\": 1e-320}", "rope parameters: \"beta_slow\" must be a number >= 0"},
        {"{\"rope_theta\": 1e-320}", "rope parameters: \"rope_theta\" must be a positive number"},
        {"{\"factor\": 2.2e-308}", "rope parameters: \"factor\" must be a positive number"},
        {"{\"long_factor\": [1, 5e-324]}",
         "rope parameters: \"long_factor\"[1] must be a positive number"},
        {"{\"original_max_position_embeddings\": 4294967298}",
         "rope parameters: \"original_max_position_embeddings\" is 4294967298; at most "
         "4294967297 is supported"},
        {"{\"mscale\": true}", "rope parameters: \"mscale\" must be a number >= 0"},
        {"{\"attention_factor\": 0}",
         "rope parameters: \"attention_factor\" must be a positive number"},
        {"{\"low_freq_factor\": [1]}",
         "rope parameters: \"low_freq_factor\" must be a positive number"},
        {"{\"high_freq_factor\": 1e999}",
         "rope parameters: \"high_freq_factor\" must be a positive number"},
        {"{\"rope_theta\": -10000}", "rope parameters: \"rope_theta\" must be a positive number"},
        {"{\"partial_rotary_factor\": 0}",
         "rope parameters: \"partial_rotary_factor\" must be a number in (0, 1]"},
        {"{\"factor\": 2, \"factor\": 3}", "rope parameters: \"factor\" appears twice"},
        {"{\"full_attention\": {\"rope_type\": \"default\"}}",
         "rope parameters: \"full_attention\" is an object: per-layer-type rope parameters are "
         "read for Gemma 3 and OLMo 3 only (pass one set with --rope-parameters)"},
        {"[1, 2]", "rope parameters: not a JSON object (expected {\"rope_type\": ...})"},
        {"{\"factor\": 2", "rope parameters: not valid JSON at line 1, column 13"},
        {"{\"factor\": 2,\n \"type\": linear}", "rope parameters: not valid JSON at line 2, "
         "column 10"},
        {"", "rope parameters: not valid JSON at line 1, column 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ra_hf_rope r;
        char msg[256];
        ra_status st = parse_rope(cases[i].text, &r, msg, sizeof msg);
        CHECK(st == RA_ERR_FORMAT, "%s: status %d", cases[i].text, (int)st);
        CHECK(strcmp(msg, cases[i].message) == 0, "%s: got \"%s\"", cases[i].text, msg);
        CHECK(r.short_factor == NULL && r.long_factor == NULL && !r.has_type && !r.has_factor,
              "%s: out not zeroed", cases[i].text);
    }
    /* A failure after a factor list was read frees it (ASan would see a leak). */
    ra_hf_rope r;
    char msg[256];
    CHECK(parse_rope("{\"short_factor\": [1, 2], \"long_factor\": [1, \"x\"]}", &r, msg,
                     sizeof msg) == RA_ERR_FORMAT && r.short_factor == NULL, "%s", msg);

    static const struct {
        const char *text, *message;
    } in_config[] = {
        {"{\"rope_scaling\": {\"type\": \"linear\", \"factor\": -2}}",
         "config.json: \"rope_scaling.factor\" must be a positive number"},
        {"{\"rope_parameters\": {\"rope_type\": \"yarn\", \"short_factor\": [1, \"a\"]}}",
         "config.json: \"rope_parameters.short_factor\"[1] must be a positive number"},
        {"{\"rope_scaling\": {\"rope_type\": \"xpos\"}}",
         "config.json: \"rope_scaling.rope_type\" is \"xpos\"; supported: default, linear, "
         "dynamic, yarn, llama3, longrope (or su), mrope, proportional"},
        {"{\"rope_scaling\": \"yarn\"}", "config.json: \"rope_scaling\" must be an object or null"},
        {"{\"rope_parameters\": [1]}",
         "config.json: \"rope_parameters\" must be an object or null"},
        {"{\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"default\"}, "
         "\"sliding_attention\": {\"rope_type\": \"default\"}}}",
         "config.json: \"rope_parameters.full_attention\" is an object: per-layer-type rope "
         "parameters are read for Gemma 3 and OLMo 3 only (pass one set with "
         "--rope-parameters)"},
        {"{\"original_max_position_embeddings\": -4096}",
         "config.json: \"original_max_position_embeddings\" must be a positive integer"},
        {"{\"rope_scaling\": {\"factor\": 1}, \"rope_scaling\": null}",
         "config.json: \"rope_scaling\" appears twice"},
        {"{\"attention_bias\": \"yes\"}", "config.json: \"attention_bias\" must be true or false"},
    };
    for (size_t i = 0; i < sizeof in_config / sizeof in_config[0]; i++) {
        ra_hf_fields cfg;
        ra_status st = parse_config(in_config[i].text, &cfg, msg, sizeof msg);
        CHECK(st == RA_ERR_FORMAT, "%s: status %d", in_config[i].text, (int)st);
        CHECK(strcmp(msg, in_config[i].message) == 0, "%s: got \"%s\"", in_config[i].text, msg);
        CHECK(!cfg.has_rope && cfg.rope.short_factor == NULL, "%s: out not zeroed",
              in_config[i].text);
    }
}

/* model_type and text_config: families the table runs are read (from
 * text_config where there is one); refused families, unknown families that
 * describe attention, and keys that change attention in a way the family
 * does not run are refused with a message naming them. */
static void test_config_families(void)
{
    static const struct {
        const char *text, *message; /* message NULL: read */
    } cases[] = {
        {"{\"model_type\": \"zaya\", \"num_attention_heads\": 4}",
         "config.json: model_type \"zaya\" is refused: its q, k and v come from a "
         "convolutional projection (ZayaCCAProjection): not supported"},
        {"{\"model_type\": \"beam\", \"num_attention_heads\": 4}", NULL},
        {"{\"model_type\": \"afmoe\", \"num_attention_heads\": 4}", NULL},
        {"{\"model_type\": \"cohere2\", \"num_attention_heads\": 4}", NULL},
        {"{\"model_type\": \"exaone4\", \"sliding_window_pattern\": \"LLLG\", "
         "\"layer_types\": [\"sliding_attention\", \"full_attention\"]}", NULL},
        {"{\"model_type\": \"my_llama\", \"num_attention_heads\": 4}",
         "config.json: model_type \"my_llama\" is not a family ropeattn knows, and its config "
         "describes attention (\"num_attention_heads\"): refused rather than run as Llama"},
        {"{\"model_type\": \"my_vision_tower\", \"patch_size\": 14}", NULL},
        {"{\"model_type\": \"granite\", \"attention_multiplier\": 0.015625}", NULL},
        {"{\"model_type\": \"llama\", \"attention_multiplier\": 0.1}",
         "config.json: \"attention_multiplier\" (the softmax scale) changes attention and is not "
         "supported for model_type \"llama\""},
        {"{\"model_type\": \"olmo\", \"clip_qkv\": null}", NULL},
        {"{\"model_type\": \"olmo\", \"clip_qkv\": 8.0}", NULL},
        {"{\"model_type\": \"qwen2\", \"clip_qkv\": 8.0}",
         "config.json: \"clip_qkv\" (q, k and v clipped) changes attention and is not supported "
         "for model_type \"qwen2\""},
        {"{\"model_type\": \"stablelm\", \"qk_layernorm\": false}", NULL},
        {"{\"model_type\": \"stablelm\", \"qk_layernorm\": true}", NULL},
        {"{\"model_type\": \"cohere\", \"rope_theta\": 8e6, \"use_qk_norm\": true}", NULL},
        {"{\"model_type\": \"cohere\", \"rope_theta\": 8e6, \"use_qk_norm\": \"yes\"}",
         "config.json: \"use_qk_norm\" must be true or false"},
        {"{\"model_type\": \"stablelm\", \"qk_layernorm\": 2}",
         "config.json: \"qk_layernorm\" must be true or false"},
        {"{\"model_type\": \"stablelm\", \"use_qk_norm\": true}",
         "config.json: \"use_qk_norm\" (q and k norms) changes attention and is not supported "
         "for model_type \"stablelm\""},
        {"{\"model_type\": \"chatglm\", \"kv_channels\": 0}",
         "config.json: \"kv_channels\" must be a positive integer"},
        {"{\"model_type\": \"chatglm\", \"rope_ratio\": 1e308}",
         "config.json: \"rope_ratio\" is too large"},
        {"{\"model_type\": \"falcon\", \"multi_query\": \"yes\"}",
         "config.json: \"multi_query\" must be true or false"},
        {"{\"model_type\": \"falcon\", \"n_head_kv\": 8}",
         "config.json: \"n_head_kv\" (key/value heads (Falcon's name)) changes attention and is "
         "not supported for model_type \"falcon\""},
        {"{\"model_type\": \"llama\", \"num_kv_heads\": 8}",
         "config.json: \"num_kv_heads\" (key/value heads (Falcon's name)) changes attention and "
         "is not supported for model_type \"llama\""},
        {"{\"model_type\": \"phi\", \"qk_layernorm\": true}",
         "config.json: \"qk_layernorm\" (LayerNorms of q and k) changes attention and is not "
         "supported for model_type \"phi\""},
        {"{\"attn_logit_softcapping\": 50.0}",
         "config.json: \"attn_logit_softcapping\" (soft-capped attention logits) changes "
         "attention and is not supported"},
        /* Gemma 3 keeps it and reads it nowhere (transformers 5.23's
         * Gemma3Attention passes no softcap): accepted, and not applied */
        {"{\"model_type\": \"gemma3_text\", \"attn_logit_softcapping\": 50.0}", NULL},
        {"{\"model_type\": \"gemma3\", \"text_config\": {\"model_type\": \"gemma3_text\", "
         "\"attn_logit_softcapping\": 50.0}}",
         NULL},
        {"{\"model_type\": \"gemma3n_text\", \"attn_logit_softcapping\": 50.0}",
         "config.json: \"attn_logit_softcapping\" (soft-capped attention logits) changes "
         "attention and is not supported for model_type \"gemma3n_text\""},
        {"{\"model_type\": \"llama4\", \"text_config\": {\"model_type\": \"llama4_text\"}}",
         NULL},
        {"{\"model_type\": \"llama4_text\", \"attn_temperature_tuning\": \"4\"}",
         "config.json: \"attn_temperature_tuning\" must be true, false or a number"},
        {"{\"model_type\": \"mistral3\", \"text_config\": {\"model_type\": \"mistral\", "
         "\"attention_chunk_size\": 8192}}",
         "config.json: \"attention_chunk_size\" (chunked attention) changes attention and is not "
         "supported for model_type \"mistral\""},
        {"{\"rope_scaling\": {\"type\": \"mrope\", \"mrope_section\": [16, 24, 24]}}",
         "config.json: rope type \"mrope\" (3-D multimodal positions) is supported for the "
         "Qwen-VL families only"},
        {"{\"model_type\": \"qwen2_vl\", \"rope_scaling\": {\"type\": \"mrope\", "
         "\"mrope_section\": [16, 24, 24]}}", NULL},
        {"{\"model_type\": \"qwen3\", \"rope_scaling\": {\"rope_type\": \"default\", "
         "\"mrope_section\": [16, 24, 24]}}",
         "config.json: \"mrope_section\" (3-D multimodal positions) is supported for the "
         "Qwen-VL families only"},
        {"{\"model_type\": \"llama\", \"rope_parameters\": {\"mrope_interleaved\": true}}",
         "config.json: \"mrope_interleaved\" (3-D multimodal positions) is supported for the "
         "Qwen-VL families only"},
        {"{\"model_type\": \"llama\", \"rope_parameters\": {\"mrope_interleaved\": false}}",
         NULL},
        {"{\"model_type\": 7}", "config.json: \"model_type\" must be a string of at most 63 bytes"},
        {"{\"model_type\": \"smollm3\", \"no_rope_layers\": [1, 1, 2]}",
         "config.json: \"no_rope_layers\" must be an array of 0 and 1"},
        {"{\"model_type\": \"deepseek_v3\", \"kv_lora_rank\": 512, \"q_lora_rank\": null, "
         "\"rope_interleave\": false}", NULL},
        {"{\"model_type\": \"kimi_k2\", \"kv_lora_rank\": 512, \"rope_interleave\": true}",
         NULL},
        {"{\"model_type\": \"deepseek_v2\", \"rope_interleave\": false}",
         "config.json: \"rope_interleave\" is false, and model_type \"deepseek_v2\" pairs the "
         "rope's features interleaved whatever it says: refused"},
        {"{\"model_type\": \"deepseek_v3\", \"rope_interleave\": 2}",
         "config.json: \"rope_interleave\" must be true or false"},
        {"{\"model_type\": \"deepseek_v3\", \"qk_head_dim\": 192}", NULL},
        {"{\"model_type\": \"deepseek_v3\", \"qk_head_dim\": 128}",
         "config.json: \"qk_head_dim\" is not qk_nope_head_dim + qk_rope_head_dim (192): "
         "refused"},
        {"{\"model_type\": \"deepseek_v2\", \"qk_rope_head_dim\": null}",
         "config.json: \"qk_rope_head_dim\" is null: model_type \"deepseek_v2\" needs it (only "
         "q_lora_rank may be null)"},
        {"{\"model_type\": \"deepseek_v3\", \"kv_lora_rank\": 0}",
         "config.json: \"kv_lora_rank\" must be a positive integer"},
        {"{\"model_type\": \"deepseek_v3\", \"head_dim\": 192}",
         "config.json: \"head_dim\" is 192 and \"qk_rope_head_dim\" 64: model_type "
         "\"deepseek_v3\" rotates qk_rope_head_dim features (its config class sets head_dim "
         "to it): refused"},
        {"{\"model_type\": \"deepseek_v3\", \"num_attention_heads\": 16}",
         "config.json: \"num_key_value_heads\" is 128 and \"num_attention_heads\" 16: latent "
         "attention gives every query head its own key and value"},
        {"{\"model_type\": \"qwen2\", \"q_lora_rank\": 1536}",
         "config.json: \"q_lora_rank\" (latent attention) changes attention and is not "
         "supported for model_type \"qwen2\""},
    };
    char msg[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ra_hf_fields cfg;
        ra_status st = parse_config(cases[i].text, &cfg, msg, sizeof msg);
        if (cases[i].message == NULL) {
            CHECK(st == RA_OK, "%s: %s", cases[i].text, msg);
        } else {
            CHECK(st != RA_OK, "%s: read", cases[i].text);
            CHECK(strcmp(msg, cases[i].message) == 0, "%s: got \"%s\"", cases[i].text, msg);
        }
        ra_hf_fields_free(&cfg);
    }

    /* A multimodal config: the text model's keys, not the top level's. */
    ra_hf_fields cfg;
    const char *gemma3 =
        "{\"model_type\": \"gemma3\", \"rope_theta\": 1, \"vision_config\": {\"hidden_size\": 8},"
        " \"text_config\": {\"model_type\": \"gemma3_text\", \"num_attention_heads\": 8, "
        "\"head_dim\": 256, \"rope_theta\": 1000000.0, \"rope_local_base_freq\": 10000.0, "
        "\"query_pre_attn_scalar\": 256, \"sliding_window\": 1024, \"rope_scaling\": "
        "{\"rope_type\": \"linear\", \"factor\": 8.0}}}";
    CHECK(parse_config(gemma3, &cfg, msg, sizeof msg) == RA_OK, "%s", msg);
    CHECK(strcmp(cfg.model_type, "gemma3_text") == 0 && cfg.family != NULL &&
              cfg.num_attention_heads == 8 && cfg.rope_theta == 1e6 &&
              cfg.rope.theta == 1e6 && cfg.rope.type == RA_ROPE_LINEAR &&
              cfg.rope_local_base_freq == 1e4 && cfg.query_pre_attn_scalar == 256,
          "gemma3 text_config: %s %lld %g", cfg.model_type, (long long)cfg.num_attention_heads,
          cfg.rope_theta);
    /* Its default sliding_window_pattern, 6: layers 5, 11 ... see everything. */
    CHECK(ra_hf_layer_window(&cfg.window, 4, 0) == 1024 &&
              ra_hf_layer_window(&cfg.window, 5, 0) == 0,
          "gemma3 window pattern");
    ra_hf_fields_free(&cfg);
    /* gemma-3-4b-it's text_config, saved without what equals
     * Gemma3TextConfig's defaults: 8 heads, 4 key/value heads, head_dim 256. */
    CHECK(parse_config("{\"model_type\": \"gemma3\", \"text_config\": {\"hidden_size\": 2560, "
                       "\"model_type\": \"gemma3_text\", \"num_hidden_layers\": 34, "
                       "\"sliding_window\": 1024}}", &cfg, msg, sizeof msg) == RA_OK &&
              cfg.hidden_size == 2560 && cfg.num_attention_heads == 8 &&
              cfg.num_key_value_heads == 4 && cfg.head_dim == 256 &&
              cfg.query_pre_attn_scalar == 256,
          "gemma3 text_config's default heads: %s %lld %lld %lld", msg,
          (long long)cfg.num_attention_heads, (long long)cfg.num_key_value_heads,
          (long long)cfg.head_dim);
    ra_hf_fields_free(&cfg);
    /* Latent attention: DeepseekV3Config's defaults; head_dim is the rope's,
     * qk_rope_head_dim; rope_interleave true unless said. */
    CHECK(parse_config("{\"model_type\": \"deepseek_v3\", \"q_lora_rank\": null}", &cfg, msg,
                       sizeof msg) == RA_OK && cfg.kv_lora_rank == 512 &&
              !cfg.has_q_lora_rank && cfg.qk_nope_head_dim == 128 &&
              cfg.qk_rope_head_dim == 64 && cfg.v_head_dim == 128 && cfg.head_dim == 64 &&
              cfg.num_attention_heads == 128 && cfg.num_key_value_heads == 128 &&
              cfg.rope_interleave && ra_hf_fields_layout(&cfg) == RA_LAYOUT_INTERLEAVED,
          "deepseek_v3 defaults: %s", msg);
    ra_hf_fields_free(&cfg);
    CHECK(parse_config("{\"model_type\": \"deepseek_v3\", \"rope_interleave\": false, "
                       "\"num_attention_heads\": 16, \"num_key_value_heads\": 16}", &cfg, msg,
                       sizeof msg) == RA_OK && cfg.q_lora_rank == 1536 &&
              ra_hf_fields_layout(&cfg) == RA_LAYOUT_HALF,
          "deepseek_v3 rope_interleave false: %s", msg);
    ra_hf_fields_free(&cfg);
    CHECK(parse_config("{\"model_type\": \"deepseek_v2\", \"num_attention_heads\": 16}", &cfg,
                       msg, sizeof msg) == RA_OK && cfg.hidden_size == 4096 &&
              !cfg.has_num_key_value_heads && cfg.head_dim == 64,
          "deepseek_v2 defaults: %s", msg);
    ra_hf_fields_free(&cfg);
    CHECK(parse_config("{\"model_type\": \"glm4\"}", &cfg, msg, sizeof msg) == RA_OK &&
              cfg.family && cfg.family->layout == RA_LAYOUT_INTERLEAVED, "glm4 layout");
    ra_hf_fields_free(&cfg);
    /* UltrabertConfig pops rope_theta, null too (its default ropes, 2560000 for the full
     * layers and 10000 for the sliding ones; a null was refused as failing in transformers) */
    CHECK(parse_config("{\"model_type\": \"ultrabert\", \"rope_theta\": null}", &cfg, msg,
                       sizeof msg) == RA_OK && cfg.has_local_rope && cfg.rope.theta == 2560000 &&
              cfg.local_rope.theta == 1e4, "ultrabert rope_theta null: %s", msg);
    ra_hf_fields_free(&cfg);
    /* Gemma 3 in transformers 5: rope_parameters per layer type. */
    CHECK(parse_config("{\"model_type\": \"gemma3_text\", \"rope_parameters\": "
                       "{\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0, "
                       "\"rope_theta\": 1000000.0}, \"sliding_attention\": {\"rope_type\": "
                       "\"default\", \"rope_theta\": 10000.0}}}", &cfg, msg, sizeof msg) == RA_OK &&
              cfg.has_local_rope && cfg.rope.type == RA_ROPE_LINEAR && cfg.rope.theta == 1e6 &&
              cfg.rope.params.factor == 8 && cfg.local_rope.type == RA_ROPE_DEFAULT &&
              cfg.local_rope.theta == 1e4, "gemma3 per-layer-type rope: %s", msg);
    ra_hf_fields_free(&cfg);
    CHECK(parse_config("{\"model_type\": \"gemma3_text\", \"rope_parameters\": "
                       "{\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0}, "
                       "\"sliding_attention\": {\"rope_type\": \"linear\", \"factor\": -1}}}",
                       &cfg, msg, sizeof msg) == RA_ERR_FORMAT &&
              strcmp(msg, "config.json: \"rope_parameters.sliding_attention.factor\" must be a "
                          "positive number") == 0, "gemma3 bad sliding rope: %s", msg);
    ra_hf_fields_free(&cfg);
    /* Llama 4: Llama4TextConfig's defaults (its old attn_temperature_tuning 4 is true). */
    CHECK(parse_config("{\"model_type\": \"llama4_text\", \"attn_temperature_tuning\": 4, "
                       "\"use_qk_norm\": false}", &cfg, msg, sizeof msg) == RA_OK &&
              cfg.attn_temperature_tuning == 1 && cfg.qk_l2_norm == 0 && cfg.head_dim == 128 &&
              cfg.attention_chunk_size == 8192 && cfg.floor_scale == 8192 &&
              cfg.attn_scale == 0.1 && cfg.rope_theta == 5e5 &&
              cfg.no_rope_layer_interval == 4 && cfg.family->layout == RA_LAYOUT_INTERLEAVED,
          "llama4 defaults: %s", msg);
    ra_hf_fields_free(&cfg);
    /* Falcon: FalconConfig's multi_query (true) and new_decoder_architecture. */
    CHECK(parse_config("{\"model_type\": \"falcon\"}", &cfg, msg, sizeof msg) == RA_OK &&
              cfg.multi_query == 1 && cfg.new_decoder_architecture == 0, "falcon defaults");
    ra_hf_fields_free(&cfg);
    CHECK(parse_config("{\"model_type\": \"falcon\", \"multi_query\": false, "
                       "\"new_decoder_architecture\": true, \"num_kv_heads\": 8}", &cfg, msg,
                       sizeof msg) == RA_OK && cfg.multi_query == 0 &&
              cfg.new_decoder_architecture == 1 && cfg.num_kv_heads == 8, "falcon 40B");
    ra_hf_fields_free(&cfg);
    /* Cohere's LayerNorms per head, with CohereConfig's layer_norm_eps. */
    CHECK(parse_config("{\"model_type\": \"cohere\", \"rope_theta\": 8e6, \"use_qk_norm\": "
                       "true}", &cfg, msg, sizeof msg) == RA_OK && cfg.head_layer_norms == 1 &&
              cfg.layer_norm_eps == 1e-5, "cohere use_qk_norm: %d %g", cfg.head_layer_norms,
          cfg.layer_norm_eps);
    ra_hf_fields_free(&cfg);
    CHECK(parse_config("{\"model_type\": \"stablelm\", \"qk_layernorm\": false, "
                       "\"layer_norm_eps\": 1e-6}", &cfg, msg, sizeof msg) == RA_OK &&
              cfg.head_layer_norms == 0 && cfg.layer_norm_eps == 1e-6,
          "stablelm qk_layernorm false");
    ra_hf_fields_free(&cfg);
}

/* Flags as the family's config class reads them (transformers 5.23's
 * classes are strict dataclasses): 1 and 0 are refused naming the key
 * (StrictDataclassFieldValidationError; they ran as true and false), but
 * in remote code, which reads them by Python's truth; null reads as false
 * (None), and is refused where the default is true (it ran as true, where
 * DeepseekV3Config keeps None and its code reads rope_interleave false). */
static void test_config_flags(void)
{
    static const struct {
        const char *json, *refused; /* refused: NULL, or a part of the message */
    } cases[] = {
        {"{\"model_type\": \"llama\", \"attention_bias\": 1}", "\"attention_bias\" is 1"},
        {"{\"model_type\": \"llama\", \"attention_bias\": 0}", "\"attention_bias\" is 0"},
        {"{\"model_type\": \"cohere\", \"rope_theta\": 8e6, \"use_qk_norm\": 1}",
         "\"use_qk_norm\" is 1"},
        {"{\"model_type\": \"stablelm\", \"qk_layernorm\": 0}", "\"qk_layernorm\" is 0"},
        {"{\"model_type\": \"falcon\", \"multi_query\": 0, \"num_kv_heads\": 8}",
         "\"multi_query\" is 0"},
        {"{\"model_type\": \"falcon\", \"multi_query\": null, \"num_kv_heads\": 8}",
         "\"multi_query\" is null"},
        {"{\"model_type\": \"falcon\", \"new_decoder_architecture\": 1}",
         "\"new_decoder_architecture\" is 1"},
        {"{\"model_type\": \"deepseek_v3\", \"rope_interleave\": null}",
         "\"rope_interleave\" is null"},
        {"{\"model_type\": \"deepseek_v3\", \"rope_interleave\": 1}",
         "\"rope_interleave\" is 1"},
        {"{\"model_type\": \"llama\", \"attention_bias\": 2}", "must be true or false"},
        {"{\"model_type\": \"llama\", \"attention_bias\": null}", NULL},
        {"{\"model_type\": \"llama\", \"attention_bias\": true}", NULL},
        {"{\"model_type\": \"chatglm\", \"multi_query_attention\": 1, "
         "\"multi_query_group_num\": 2}", NULL},
        {"{\"model_type\": \"internlm2\", \"bias\": 0}", NULL},
    };
    char msg[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ra_hf_fields cfg;
        const ra_status st = parse_config(cases[i].json, &cfg, msg, sizeof msg);
        if (cases[i].refused)
            CHECK(st == RA_ERR_FORMAT && strstr(msg, cases[i].refused), "%s: %s", cases[i].json,
                  msg);
        else
            CHECK(st == RA_OK, "%s: %s", cases[i].json, msg);
        ra_hf_fields_free(&cfg);
    }
    ra_hf_fields cfg;
    CHECK(parse_config(cases[12].json, &cfg, msg, sizeof msg) == RA_OK &&
              cfg.num_key_value_heads == 2, "chatglm's 1 is true: %s", msg);
    ra_hf_fields_free(&cfg);
    CHECK(parse_config(cases[10].json, &cfg, msg, sizeof msg) == RA_OK && !cfg.attention_bias &&
              !cfg.bias.qkv && !cfg.bias.o, "null is false: %s", msg);
    ra_hf_fields_free(&cfg);
}

/* Where transformers 5's config classes and standardize_rope_params decide
 * what a config means: each case runs as they read it, or is refused with
 * a message naming the keys (where they raise, where releases disagree, or
 * where the file contradicts itself). */
static void test_rope_as_transformers_reads_it(void)
{
    static const struct {
        const char *json, *refused; /* refused: NULL, or a part of the message */
    } refusals[] = {
        /* Phi3Config: any type but default and longrope (su, yarn) raises */
        {"{\"model_type\": \"phi3\", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2}}",
         "\"rope_scaling.rope_type\" is \"linear\": model_type \"phi3\" runs the default rope "
         "or longrope"},
        /* Phi3Config's original_max_position_embeddings (4096 by default)
         * replaces the rope object's */
        {"{\"model_type\": \"phi3\", \"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": "
         "[1], \"long_factor\": [2], \"original_max_position_embeddings\": 16}}",
         "is 16 and the top level's 4096 (model_type \"phi3\"'s default)"},
        /* a null rope_theta where transformers sets it into a rope without its own (the
         * class's default rope, or the one given), which fails on None */
        {"{\"model_type\": \"gemma3_text\", \"rope_theta\": null}",
         "\"rope_theta\" is null and the rope has no rope_theta of its own"},
        {"{\"model_type\": \"deepseek_v3\", \"rope_theta\": null}", "\"rope_theta\" is null"},
        {"{\"model_type\": \"llama\", \"rope_theta\": null, \"rope_parameters\": "
         "{\"rope_type\": \"linear\", \"factor\": 2}}",
         "\"rope_theta\" is null and the rope has no rope_theta of its own"},
        /* a rope per layer type only: one rope object (Gemma 3's class runs its default ropes
         * over it), rope_scaling where the class never reads it, a type's rope without
         * rope_theta where the class never fills it (Mellum's rotary embedding fails) */
        {"{\"model_type\": \"gemma3_text\", \"rope_parameters\": {\"rope_type\": "
         "\"default\", \"rope_theta\": 1234}}", "rope_parameters is one rope object"},
        {"{\"model_type\": \"mellum\", \"rope_scaling\": {\"rope_type\": \"linear\", "
         "\"factor\": 2}}", "\"rope_scaling\": model_type \"mellum\" reads rope_parameters by "
         "layer type and never reads it"},
        {"{\"model_type\": \"mellum\", \"rope_theta\": 5000, \"rope_parameters\": "
         "{\"full_attention\": {\"rope_type\": \"default\"}, \"sliding_attention\": "
         "{\"rope_type\": \"default\", \"rope_theta\": 100}}}",
         "\"rope_parameters.full_attention\" has no \"rope_theta\""},
        /* EsmConfig's rope_theta is a typed field: null fails its validation */
        {"{\"model_type\": \"esm\", \"position_embedding_type\": \"rotary\", "
         "\"rope_theta\": null, \"rope_parameters\": {\"rope_type\": \"default\", "
         "\"rope_theta\": 500}}", "model_type \"esm\"'s config class declares it a number"},
        {"{\"model_type\": \"cohere\", \"rope_theta\": null}", "\"rope_theta\" is null: give it "
         "(model_type \"cohere\"'s default is 10000 in transformers 4.57, 500000 in 5)"},
        {"{\"model_type\": \"gemma3_text\", \"rope_parameters\": {\"rope_type\": \"default\", "
         "\"rope_theta\": null}}", "\"rope_parameters.rope_theta\" is null"},
        {"{\"model_type\": \"gemma3\", \"text_config\": {\"model_type\": \"gemma3_text\", "
         "\"query_pre_attn_scalar\": null}}", "\"query_pre_attn_scalar\" is null"},
        /* an alias beside its field, saying something else */
        {"{\"model_type\": \"gpt_neox\", \"rotary_pct\": 0.25, \"partial_rotary_factor\": 0.5}",
         "\"partial_rotary_factor\" and \"rotary_pct\" (another name for it) are both set and "
         "differ"},
        {"{\"model_type\": \"gpt_neox\", \"rotary_emb_base\": 10000, \"rope_theta\": 5e5}",
         "\"rope_theta\" and \"rotary_emb_base\""},
        /* scaling keys without a type: transformers runs the default rope */
        {"{\"rope_scaling\": {\"factor\": 2}}",
         "\"rope_scaling.factor\" is set without \"rope_scaling.rope_type\""},
        /* a rope_theta default that changed between releases */
        {"{\"model_type\": \"olmo3\"}", "10000 in transformers 4.57, 500000 in 5"},
        {"{\"model_type\": \"cohere\"}", "10000 in transformers 4.57, 500000 in 5"},
        {"{\"model_type\": \"qwen3_vl_moe_text\", \"head_dim\": 128}",
         "5000000 in transformers 4.57, 500000 in 5"},
    };
    char msg[512];
    ra_hf_fields cfg;
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        ra_status st = parse_config(refusals[i].json, &cfg, msg, sizeof msg);
        CHECK(st != RA_OK && strstr(msg, refusals[i].refused) != NULL, "%zu: %s", i, msg);
        ra_hf_fields_free(&cfg);
    }
    /* Phi3Config reads "yarn" as longrope */
    CHECK(parse_config("{\"model_type\": \"phi3\", \"original_max_position_embeddings\": 16, "
                       "\"rope_scaling\": {\"type\": \"yarn\", \"short_factor\": [1], "
                       "\"long_factor\": [2]}}", &cfg, msg, sizeof msg) == RA_OK &&
              cfg.rope.type == RA_ROPE_LONGROPE &&
              cfg.rope.params.original_max_position_embeddings == 16, "phi3 yarn: %s", msg);
    ra_hf_fields_free(&cfg);
    /* a rope object's partial_rotary_factor is kept beside a different top
     * level's or family default's (5.23's setdefault) */
    CHECK(parse_config("{\"model_type\": \"stablelm\", \"partial_rotary_factor\": 0.5, "
                       "\"rope_parameters\": {\"rope_type\": \"default\", "
                       "\"partial_rotary_factor\": 0.25}}", &cfg, msg, sizeof msg) == RA_OK &&
              cfg.rope.partial_rotary_factor == 0.25, "the object's factor: %s", msg);
    ra_hf_fields_free(&cfg);
    CHECK(parse_config("{\"model_type\": \"stablelm\", \"rope_scaling\": {\"rope_type\": "
                       "\"linear\", \"factor\": 2, \"partial_rotary_factor\": 0.5}}", &cfg,
                       msg, sizeof msg) == RA_OK && cfg.rope.partial_rotary_factor == 0.5,
          "the object's factor over StableLM's default: %s", msg);
    ra_hf_fields_free(&cfg);
    /* equal values beside each other are fine */
    CHECK(parse_config("{\"model_type\": \"gpt_neox\", \"rotary_pct\": 0.5, "
                       "\"partial_rotary_factor\": 0.5, \"rope_theta\": 1e4, "
                       "\"rotary_emb_base\": 10000}", &cfg, msg, sizeof msg) == RA_OK &&
              cfg.partial_rotary_factor == 0.5, "agreeing aliases: %s", msg);
    ra_hf_fields_free(&cfg);
    /* GptOssConfig without rope keys: yarn, factor 32 over 4096, truncate
     * false, rope_theta 150000, head_dim 64 */
    CHECK(parse_config("{\"model_type\": \"gpt_oss\"}", &cfg, msg, sizeof msg) == RA_OK &&
              cfg.rope.type == RA_ROPE_YARN && cfg.rope.params.factor == 32 &&
              cfg.rope.params.original_max_position_embeddings == 4096 &&
              cfg.rope.params.yarn_no_truncate && cfg.rope.theta == 150000 &&
              cfg.head_dim == 64 && cfg.max_position_embeddings == 131072,
          "gpt_oss defaults: %s", msg);
    ra_hf_fields_free(&cfg);
    /* Ministral3Config without rope keys: yarn, factor 16 over 16384, theta
     * 1e6, llama_4_scaling_beta 0.1; head_dim 128, 8 key/value heads */
    CHECK(parse_config("{\"model_type\": \"ministral3\"}", &cfg, msg, sizeof msg) == RA_OK &&
              cfg.rope.type == RA_ROPE_YARN && cfg.rope.params.factor == 16 &&
              cfg.rope.params.original_max_position_embeddings == 16384 &&
              cfg.rope.theta == 1e6 && cfg.rope.has_llama_4_scaling_beta &&
              cfg.rope.llama_4_scaling_beta == 0.1 && cfg.head_dim == 128 &&
              cfg.num_key_value_heads == 8 && cfg.max_position_embeddings == 262144,
          "ministral3 defaults: %s", msg);
    ra_hf_fields_free(&cfg);
    /* ModernBertDecoderConfig: without rope_parameters, global_rope_theta and
     * local_rope_theta (160000, 10000) by layer type; the window
     * local_attention // 2 (128 // 2) */
    CHECK(parse_config("{\"model_type\": \"modernbert-decoder\"}", &cfg, msg, sizeof msg) ==
              RA_OK && cfg.has_local_rope && cfg.rope.theta == 160000 &&
              cfg.local_rope.theta == 10000 && cfg.window.sliding_window == 64 &&
              cfg.hidden_size == 768 && cfg.num_attention_heads == 12,
          "modernbert-decoder defaults: %s", msg);
    ra_hf_fields_free(&cfg);
    CHECK(parse_config("{\"model_type\": \"modernbert-decoder\", \"global_rope_theta\": 1000, "
                       "\"local_rope_theta\": 50, \"local_attention\": 9, \"rope_parameters\": "
                       "{\"full_attention\": {\"rope_type\": \"default\"}, "
                       "\"sliding_attention\": {\"rope_type\": \"default\", "
                       "\"rope_theta\": 20}}}", &cfg, msg, sizeof msg) == RA_OK &&
              cfg.rope.theta == 1000 && cfg.local_rope.theta == 20 &&
              cfg.window.sliding_window == 4, "modernbert-decoder thetas: %s", msg);
    ra_hf_fields_free(&cfg);
    CHECK(parse_config("{\"model_type\": \"ministral3\", \"rope_parameters\": "
                       "{\"rope_type\": \"yarn\", \"factor\": 2.0, "
                       "\"llama_4_scaling_beta\": \"0.1\"}}", &cfg, msg, sizeof msg) ==
              RA_ERR_FORMAT &&
              strcmp(msg, "config.json: \"rope_parameters.llama_4_scaling_beta\" must be a "
                          "finite number") == 0, "ministral3 beta a string: %s", msg);
    ra_hf_fields_free(&cfg);
    /* Olmo3Config's sliding layers without a rope_theta of their own: its default_theta,
     * 500000, whatever rope_theta says (transformers 5.23 pops it for the full layers') */
    CHECK(parse_config("{\"model_type\": \"olmo3\", \"rope_theta\": 1234}", &cfg, msg,
                       sizeof msg) == RA_OK && cfg.rope.theta == 1234 &&
              cfg.has_rope_local_base_freq && cfg.rope_local_base_freq == 5e5,
          "olmo3 sliding default: %s", msg);
    ra_hf_fields_free(&cfg);
    CHECK(parse_config("{\"model_type\": \"olmo3\", \"rope_theta\": 1234, \"rope_parameters\": "
                       "{\"full_attention\": {\"rope_type\": \"default\"}, "
                       "\"sliding_attention\": {\"rope_type\": \"default\"}}}", &cfg, msg,
                       sizeof msg) == RA_OK && cfg.rope.theta == 1234 &&
              cfg.local_rope.theta == 5e5, "olmo3 sliding rope: %s", msg);
    ra_hf_fields_free(&cfg);
    static const struct {
        const char *json;
        double theta;
    } thetas[] = {
        {"{\"model_type\": \"mixtral\"}", 1e6},
        {"{\"model_type\": \"qwen2_vl\", \"text_config\": {\"model_type\": \"qwen2_vl_text\"}}",
         1e6},
        {"{\"model_type\": \"qwen2_5_vl_text\"}", 1e6},
        {"{\"model_type\": \"mixtral\", \"rope_theta\": 5e5}", 5e5},
        /* a null rope_theta beside a rope with its own changes nothing (transformers 5's
         * setdefault): the default ropes of Apertus, Ministral 3, Mellum; a rope_parameters
         * holding it; GPT-NeoX's classes never read it */
        {"{\"model_type\": \"apertus\", \"rope_theta\": null}", 12e6},
        {"{\"model_type\": \"ministral3\", \"rope_theta\": null}", 1e6},
        {"{\"model_type\": \"mellum\", \"rope_theta\": null}", 5e5},
        {"{\"model_type\": \"llama\", \"rope_theta\": null, \"rope_parameters\": "
         "{\"rope_type\": \"default\", \"rope_theta\": 500}}", 500},
        {"{\"model_type\": \"cohere\", \"rope_theta\": null, \"rope_parameters\": "
         "{\"rope_type\": \"default\", \"rope_theta\": 500}}", 500},
    };
    for (size_t i = 0; i < sizeof thetas / sizeof thetas[0]; i++) {
        CHECK(parse_config(thetas[i].json, &cfg, msg, sizeof msg) == RA_OK &&
                  cfg.rope.theta == thetas[i].theta, "%zu: %g %s", i, cfg.rope.theta, msg);
        ra_hf_fields_free(&cfg);
    }
    /* GPT-NeoX's config classes never read rope_theta: null reads as no key */
    ra_hf_fields absent;
    CHECK(parse_config("{\"model_type\": \"gpt_neox\"}", &absent, msg, sizeof msg) == RA_OK &&
              parse_config("{\"model_type\": \"gpt_neox\", \"rope_theta\": null}", &cfg, msg,
                           sizeof msg) == RA_OK && cfg.rope.theta == absent.rope.theta &&
              cfg.rope.has_theta == absent.rope.has_theta && !cfg.has_rope_theta,
          "gpt_neox rope_theta null: %s", msg);
    ra_hf_fields_free(&cfg);
    ra_hf_fields_free(&absent);
}

/* Every prefix of a config with every rope key, and every byte of it
 * replaced: each parse must succeed or fail cleanly (ASan watches), and a
 * failure must leave nothing allocated. */
static void test_rope_mutations(void)
{
    const char *text =
        "{\"hidden_size\": 64, \"num_attention_heads\": 4, \"original_max_position_embeddings\": "
        "16, \"rope_theta\": 1e4, \"partial_rotary_factor\": 0.5, \"rope_scaling\": {\"type\": "
        "\"su\", \"rope_type\": \"longrope\", \"factor\": 2.5, \"attention_factor\": 1.1, "
        "\"beta_fast\": 16, \"beta_slow\": 2, \"mscale\": 0.7, \"mscale_all_dim\": 0.7, "
        "\"truncate\": false, \"low_freq_factor\": 1, \"high_freq_factor\": 4, "
        "\"short_factor\": [1, 1.5, 2e0], \"long_factor\": [3, 4, 5.5], "
        "\"original_max_position_embeddings\": 16}}";
    size_t n = strlen(text);
    char *buf = malloc(n + 1);
    static const char replacements[] = {'"', '{', '[', ']', '}', ',', ':', '-', '0', 'x', ' '};
    int ok = 0, failed = 0;
    char msg[256];
    for (size_t len = 0; len <= n; len++) {
        ra_hf_fields cfg;
        ra_status st = ra_hf_fields_parse(text, len, &cfg, msg, sizeof msg);
        if (st == RA_OK) ok++;
        else failed++;
        ra_hf_fields_free(&cfg);
    }
    for (size_t at = 0; at < n; at++) {
        for (size_t r = 0; r < sizeof replacements; r++) {
            memcpy(buf, text, n + 1);
            buf[at] = replacements[r];
            ra_hf_fields cfg;
            ra_status st = ra_hf_fields_parse(buf, n, &cfg, msg, sizeof msg);
            if (st == RA_OK) {
                ok++;
                CHECK(cfg.rope.params.short_factor == cfg.rope.short_factor &&
                      cfg.rope.params.long_factor == cfg.rope.long_factor, "pointers");
            } else {
                failed++;
                CHECK(msg[0] != '\0' && cfg.rope.short_factor == NULL && !cfg.has_rope,
                      "failure at byte %zu left state behind: %s", at, msg);
            }
            ra_hf_fields_free(&cfg);
        }
    }
    CHECK(ok > 0 && failed > 0, "ok %d failed %d", ok, failed);
    ra_hf_fields cfg;
    CHECK(ra_hf_fields_parse(text, n, &cfg, msg, sizeof msg) == RA_OK &&
          cfg.rope.type == RA_ROPE_LONGROPE && cfg.rope.n_long_factor == 3 &&
          cfg.rope.params.original_max_position_embeddings == 16, "the original: %s", msg);
    ra_hf_fields_free(&cfg);
    free(buf);
}

/* ---- hostile files: one message per kind of damage ----------------------- */

/* Each damage the issue lists, as a file the readers get: the status, the
 * words of the message that name the kind of damage (and no other kind's
 * words in it, checked for every pair) and the numbers it gives. */
typedef enum reader { SAFETENSORS, NPY, CONFIG } reader;

static ra_status read_any(reader r, const char *name, char *msg, size_t msg_len)
{
    if (r == NPY) return open_and_close(name, 1, msg, msg_len);
    if (r == SAFETENSORS) return open_and_close(name, 0, msg, msg_len);
    ra_hf_fields cfg;
    ra_status st = ra_hf_fields_read(tpath(name), &cfg, msg, msg_len);
    ra_hf_fields_free(&cfg);
    return st;
}

static void test_hostile_messages(void)
{
    char near_max[64];
    snprintf(near_max, sizeof near_max, "header length %llu exceeds the file size 10",
             (unsigned long long)(UINT64_MAX - 7));
    static const char f4[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    write_bytes("h_empty.safetensors", "", 0);
    write_bytes("h_empty.npy", "", 0);
    write_bytes("h_empty.json", "", 0);
    write_st_raw("h_beyond.safetensors", 113, "{}", 2, 110);
    write_st_raw("h_near_max.safetensors", UINT64_MAX - 7, "{}", 2, 0);
    write_st("h_not_json.safetensors", "hello world", 0);
    write_st("h_truncated.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],", 4);
    write_st("h_reversed.safetensors", "{" ENTRY("a", "\"F32\"", "[2]", "[8,0]") "}", 16);
    write_st("h_overlap.safetensors", "{" ENTRY("a", "\"F32\"", "[2]", "[0,8]") ","
             ENTRY("b", "\"F32\"", "[2]", "[4,12]") "}", 16);
    write_st("h_outside.safetensors", "{" ENTRY("a", "\"F32\"", "[2]", "[32,40]") "}", 16);
    write_st("h_overflow.safetensors",
             "{" ENTRY("a", "\"F32\"", "[4294967296,4294967296,4294967296]", "[0,8]") "}", 16);
    write_st("h_unknown_dtype.safetensors", "{" ENTRY("a", "\"Q8\"", "[2]", "[0,8]") "}", 16);
    write_st("h_mismatch.safetensors", "{" ENTRY("a", "\"F64\"", "[2]", "[0,8]") "}", 16);
    write_st("h_duplicate.safetensors", "{" ENTRY("w", "\"U8\"", "[4]", "[0,4]") ","
             ENTRY("w", "\"U8\"", "[4]", "[4,8]") "}", 8);
    write_bytes("h_magic.npy", "\x93NUMPZ\x01\x00\x10\x00{}              ", 26);
    write_bytes("h_beyond.npy", "\x93NUMPY\x01\x00\xff\xff{'descr': '<f4'}", 26);
    write_npy_dict("h_huge.npy",
                   "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
                   24);
    write_npy_dict("h_fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                   24);
    write_npy_dict("h_int16.npy", "{'descr': '<i2', 'fortran_order': False, 'shape': (12,), }",
                   24);
    write_npy_dict("h_truncated.npy", f4, 20);
    static const char not_json[] = "hidden_size = 64", truncated[] = "{\"hidden_size\": 64, \"a\": {";
    write_bytes("h_not_json.json", not_json, strlen(not_json));
    write_bytes("h_truncated.json", truncated, strlen(truncated));
    /* kind: the words that name the damage, shared by the cases of a kind;
     * detail: more of the message, naming the numbers */
    const struct {
        reader r;
        const char *name;
        ra_status status;
        const char *kind, *detail;
    } cases[] = {
        {SAFETENSORS, "h_empty.safetensors", RA_ERR_FORMAT, "the file is empty", ""},
        {NPY, "h_empty.npy", RA_ERR_FORMAT, "the file is empty", ""},
        {CONFIG, "h_empty.json", RA_ERR_FORMAT, "the file is empty", ""},
        {SAFETENSORS, "h_beyond.safetensors", RA_ERR_FORMAT, "exceeds the file size",
         "header length 113 exceeds the file size 120"},
        {SAFETENSORS, "h_near_max.safetensors", RA_ERR_FORMAT, "exceeds the file size", near_max},
        {NPY, "h_beyond.npy", RA_ERR_FORMAT, "exceeds the file size",
         "header length 65535 exceeds the file size 26"},
        {SAFETENSORS, "h_not_json.safetensors", RA_ERR_FORMAT, "not valid JSON",
         "the header is not valid JSON"},
        {SAFETENSORS, "h_truncated.safetensors", RA_ERR_FORMAT, "not valid JSON",
         "the header is not valid JSON"},
        {CONFIG, "h_not_json.json", RA_ERR_FORMAT, "not valid JSON", ""},
        {CONFIG, "h_truncated.json", RA_ERR_FORMAT, "not valid JSON", ""},
        {SAFETENSORS, "h_reversed.safetensors", RA_ERR_FORMAT, "are reversed",
         "tensor \"a\": data_offsets [8, 0) are reversed"},
        {SAFETENSORS, "h_overlap.safetensors", RA_ERR_FORMAT, "overlap",
         "tensors \"a\" and \"b\" overlap"},
        {SAFETENSORS, "h_outside.safetensors", RA_ERR_FORMAT, "lie outside the data area",
         "data_offsets [32, 40) lie outside the data area of 16 bytes"},
        {SAFETENSORS, "h_overflow.safetensors", RA_ERR_FORMAT, "has too many elements",
         "shape [4294967296, 4294967296, 4294967296] has too many elements"},
        {NPY, "h_huge.npy", RA_ERR_FORMAT, "has too many elements",
         "shape [4611686018427387904, 4] has too many elements"},
        {SAFETENSORS, "h_unknown_dtype.safetensors", RA_ERR_DTYPE, "unknown dtype",
         "unknown dtype \"Q8\""},
        {SAFETENSORS, "h_mismatch.safetensors", RA_ERR_FORMAT, "bytes but shape",
         "data_offsets [0, 8) hold 8 bytes but shape [2] of F64 needs 16"},
        {SAFETENSORS, "h_duplicate.safetensors", RA_ERR_FORMAT, "appears twice",
         "tensor name \"w\" appears twice"},
        {NPY, "h_magic.npy", RA_ERR_FORMAT, "bad magic", "not a .npy file (bad magic)"},
        {NPY, "h_fortran.npy", RA_ERR_UNSUPPORTED, "Fortran-order",
         "Fortran-order arrays are not supported"},
        {NPY, "h_int16.npy", RA_ERR_DTYPE, "is not supported (only",
         "dtype '<i2' is not supported (only <f4, <f8, <f2, <i4, <i8 and |b1 are)"},
        {NPY, "h_truncated.npy", RA_ERR_FORMAT, "truncated",
         "truncated: the file holds 20 bytes of data but shape [2, 3] of '<f4' needs 24"},
    };
    enum { N = sizeof cases / sizeof cases[0] };
    char msgs[N][512];
    int kinds = 0;
    for (int i = 0; i < N; i++) {
        ra_status st = read_any(cases[i].r, cases[i].name, msgs[i], sizeof msgs[i]);
        CHECK_FAIL(st, cases[i].status, msgs[i], cases[i].name);
        CHECK(strstr(msgs[i], cases[i].kind) != NULL && strstr(msgs[i], cases[i].detail) != NULL,
              "%s: \"%s\" lacks \"%s\" or \"%s\"", cases[i].name, msgs[i], cases[i].kind,
              cases[i].detail);
        int first = 1;
        for (int j = 0; j < i; j++) first = first && strcmp(cases[i].kind, cases[j].kind) != 0;
        kinds += first;
    }
    for (int i = 0; i < N; i++) {
        const char *named = strstr(msgs[i], cases[i].name); /* the words after "<path>: " */
        const char *words = named ? named + strlen(cases[i].name) : msgs[i];
        for (int j = 0; j < N; j++)
            if (strcmp(cases[i].kind, cases[j].kind) != 0)
                CHECK(strstr(words, cases[j].kind) == NULL,
                      "%s: \"%s\" reads like %s's damage", cases[i].name, msgs[i],
                      cases[j].name);
    }
    printf("hostile files: %d cases of %d kinds of damage, each kind its own message\n", N, kinds);
}

/* ---- atomic writes ------------------------------------------------------- */

static void test_atomic(void)
{
    char msg[256];
    const char *hello = "hello", *world = ", world";
    const void *parts[3] = {hello, NULL, world};
    size_t sizes[3] = {5, 0, 7};
    int before = count_entries(temp_dir);
    ra_status st = ra_write_file_atomic(tpath("atomic.txt"), parts, sizes, 3, msg, sizeof msg);
    CHECK(st == RA_OK, "%s", msg);
    size_t n = 0;
    unsigned char *bytes = read_bytes(tpath("atomic.txt"), &n);
    CHECK(bytes != NULL && n == 12 && memcmp(bytes, "hello, world", 12) == 0, "content");
    free(bytes);
    st = ra_write_file_atomic(tpath("atomic.txt"), parts, sizes, 1, msg, sizeof msg);
    bytes = read_bytes(tpath("atomic.txt"), &n);
    CHECK(st == RA_OK && bytes != NULL && n == 5, "replaced: %s", msg);
    free(bytes);
    CHECK(count_entries(temp_dir) == before + 1, "a temporary file was left behind");

    char missing[600];
    snprintf(missing, sizeof missing, "%s/no_such_dir/x.npy", temp_dir);
    st = ra_write_file_atomic(missing, parts, sizes, 3, msg, sizeof msg);
    CHECK_FAIL(st, RA_ERR_IO, msg, missing);
    CHECK(strstr(msg, "No such file or directory") != NULL, "%s", msg);
    CHECK(count_entries(temp_dir) == before + 1, "a failed write created something");

    /* Renaming over a folder fails after the temporary file was written: it
     * must be removed again. */
    CHECK(mkdir(tpath("folder"), 0755) == 0, "mkdir");
    st = ra_write_file_atomic(tpath("folder"), parts, sizes, 3, msg, sizeof msg);
    CHECK_FAIL(st, RA_ERR_IO, msg, "folder");
    CHECK(count_entries(temp_dir) == before + 2, "the temporary file was left behind");
    CHECK(ra_write_file_atomic(tpath("x"), NULL, sizes, 1, msg, sizeof msg) == RA_ERR_NULL,
          "NULL parts");
}

int main(void)
{
    umask(022);
    const char *tmp = getenv("TMPDIR");
    snprintf(temp_dir, sizeof temp_dir, "%s/ra_test_io.XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(temp_dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    RUN(test_npy_round_trip);
    RUN(test_npy_numpy_bytes);
    RUN(test_npy_variants);
    RUN(test_npy_float64_input);
    RUN(test_npy_hostile_files);
    RUN(test_npy_hostile_headers);
    RUN(test_npy_write_errors);
    RUN(test_st_round_trip);
    RUN(test_st_accepts);
    RUN(test_st_hostile_layout);
    RUN(test_st_hostile_entries);
    RUN(test_st_format_rules);
    RUN(test_st_write_errors);
    RUN(test_mutations);
    RUN(test_config_llama);
    RUN(test_config_hostile);
    RUN(test_config_window);
    RUN(test_config_families);
    RUN(test_config_flags);
    RUN(test_st_index);
    RUN(test_config_files);
    RUN(test_not_regular_files);
    RUN(test_rope_llama3_and_simple_types);
    RUN(test_rope_yarn);
    RUN(test_rope_longrope_phi3);
    RUN(test_rope_in_config);
    RUN(test_rope_hostile);
    RUN(test_rope_mutations);
    RUN(test_rope_as_transformers_reads_it);
    RUN(test_hostile_messages);
    RUN(test_atomic);
    remove_tree(temp_dir);
    return ra_test_summary("io");
}
