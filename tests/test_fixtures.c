/*
 * test_fixtures.c — checks the library against the PyTorch reference values in
 * the .bin files of tests/fixtures, which tests/fixtures/make_fixtures.py
 * writes by following the seed's code in float64.
 *
 *   build/tests/test_fixtures [FIXTURE_DIR]      (default tests/fixtures)
 *
 * Each file is dispatched on its name prefix: table_, rope_, repkv_, attn_,
 * freqs_, rotary_ for the rope types (transformers' modeling_rope_utils
 * formulas, in float64), coregrad_ for the attention core's gradients
 * (torch autograd) and layergrad_ for the whole layer's (float64 autograd of
 * the seed's module).  Inputs and weights in the files are float64 values
 * that are exact float32 values (stored as f64, or for the model-sized
 * attention cases as their generator, fixture.h's dtype 2); expected outputs
 * are f64 and compared in double.
 */
#include <dirent.h>
#include <string.h>

#include "ropeattn.h"
#include "harness.h"
#include "fixture.h"

/* Tables: the bound on |table - exact math| (float32 rounding alone is
 * 6e-8). */
#define TABLE_TOL 1e-6
/* RoPE, relative to max|ref|: float32 rounding of inputs, tables and outputs
 * costs a few 6e-8. */
#define ROPE_TOL 1e-6
/* Attention layer, max|y - ref| / max|ref|: the acceptance bound
 * (float32 arithmetic gives ~1e-6). */
#define LAYER_TOL 1e-4
/* Attention core's out, lse and gradients, max|x - ref| / max|ref| per
 * tensor: issue 6's acceptance bound (float32 arithmetic gives ~1e-6). */
#define GRAD_TOL 1e-4

/* Table rows in the "small table" rope: later positions take the library's
 * on-the-fly path. */
#define SMALL_TABLE 4

static const char *fixture_dir = "tests/fixtures";
static char **fixture_names;
static int fixture_count;

typedef struct fixture {
    const char *name;
    fx_file data;
} fixture;

/* ------------------------------------------------------------------------ */
/* Reading tensors                                                           */
/* ------------------------------------------------------------------------ */

/* Tensor `name` with the given dtype and ndim, and the given shape where
 * shape[d] >= 0; NULL after a failed CHECK. */
static const fx_tensor *need(const fixture *fx, const char *name, fx_dtype dtype,
                             int ndim, const int64_t *shape)
{
    const fx_tensor *t = fx_find(&fx->data, name);
    CHECK(t != NULL, "%s: no tensor '%s'", fx->name, name);
    if (!t) return NULL;
    int ok = t->dtype == dtype && t->ndim == ndim;
    for (int d = 0; ok && shape && d < ndim; d++)
        ok = shape[d] < 0 || t->shape[d] == shape[d];
    CHECK(ok, "%s: '%s' has the wrong dtype or shape", fx->name, name);
    return ok ? t : NULL;
}

static int need_i64(const fixture *fx, const char *name, int64_t *out)
{
    const fx_tensor *t = need(fx, name, FX_I64, 0, NULL);
    if (t) *out = t->i64[0];
    return t != NULL;
}

static int need_f64(const fixture *fx, const char *name, double *out)
{
    const fx_tensor *t = need(fx, name, FX_F64, 0, NULL);
    if (t) *out = t->f64[0];
    return t != NULL;
}

/* A float32 copy of an input tensor, whose values must be exact float32
 * values; NULL after a failed CHECK.  Free with free(). */
static float *to_f32(const fixture *fx, const fx_tensor *t)
{
    float *out = malloc((size_t)t->count * sizeof *out);
    CHECK(out != NULL, "out of memory");
    for (int64_t i = 0; out && i < t->count; i++) {
        out[i] = (float)t->f64[i];
        if ((double)out[i] != t->f64[i]) {
            CHECK(0, "%s: %s[%lld] = %.17g is not a float32 value", fx->name,
                  t->name, (long long)i, t->f64[i]);
            free(out);
            return NULL;
        }
    }
    return out;
}

static float *copy_f32(const float *x, int64_t n)
{
    float *out = malloc((size_t)n * sizeof *out);
    CHECK(out != NULL, "out of memory");
    if (out) memcpy(out, x, (size_t)n * sizeof *out);
    return out;
}

static double max_abs_err(const float *a, const double *b, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (isnan(d)) return NAN;
        if (d > worst) worst = d;
    }
    return worst;
}

/* ------------------------------------------------------------------------ */
/* Finding the fixture files                                                 */
/* ------------------------------------------------------------------------ */

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Fills fixture_names with the sorted *.bin names in fixture_dir. */
static void test_list_fixtures(void)
{
    DIR *dir = opendir(fixture_dir);
    CHECK(dir != NULL, "cannot open the fixture directory %s", fixture_dir);
    if (!dir) return;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (!ends_with(e->d_name, ".bin")) continue;
        char **grown = realloc(fixture_names, (size_t)(fixture_count + 1) * sizeof *grown);
        char *name = malloc(strlen(e->d_name) + 1);
        CHECK(grown && name, "out of memory");
        if (grown) fixture_names = grown;
        if (!grown || !name) {
            free(name);
            break;
        }
        strcpy(name, e->d_name);
        fixture_names[fixture_count++] = name;
    }
    closedir(dir);
    qsort(fixture_names, (size_t)fixture_count, sizeof *fixture_names, compare_names);
}

/* Runs check on every fixture whose name starts with prefix; there must be
 * at least one. */
static void for_each_fixture(const char *prefix, void (*check)(const fixture *))
{
    int seen = 0;
    for (int i = 0; i < fixture_count; i++) {
        if (!starts_with(fixture_names[i], prefix)) continue;
        char path[4096], err[512];
        fixture fx = {fixture_names[i], {0, NULL}};
        snprintf(path, sizeof path, "%s/%s", fixture_dir, fixture_names[i]);
        int loaded = fx_load(&fx.data, path, err, sizeof err) == 0;
        CHECK(loaded, "%s", err);
        if (loaded) check(&fx);
        fx_free(&fx.data);
        seen++;
    }
    CHECK(seen > 0, "no %s*.bin fixture in %s", prefix, fixture_dir);
}

/* ------------------------------------------------------------------------ */
/* The reader itself                                                         */
/* ------------------------------------------------------------------------ */

/* A valid file: one i64 scalar "n" = 7. */
static size_t tiny_file(unsigned char *buf)
{
    static const unsigned char bytes[] = {
        'R', 'A', 'F', 'X', 1, 0, 0, 0, 1, 0, 0, 0, /* magic, version, count */
        1, 0, 'n', 1, 0,                            /* name "n", i64, ndim 0 */
        7, 0, 0, 0, 0, 0, 0, 0,                     /* data */
    };
    memcpy(buf, bytes, sizeof bytes);
    return sizeof bytes;
}

static int parses(const unsigned char *buf, size_t len)
{
    fx_file f;
    char err[256];
    int ok = fx_parse(&f, buf, len, err, sizeof err) == 0;
    fx_free(&f);
    return ok;
}

static void test_reader(void)
{
    unsigned char buf[64];
    size_t len = tiny_file(buf);
    fx_file f;
    char err[256];
    CHECK(fx_parse(&f, buf, len, err, sizeof err) == 0, "%s", err);
    const fx_tensor *n = fx_find(&f, "n");
    CHECK(n && n->dtype == FX_I64 && n->count == 1 && n->i64[0] == 7, "tiny file misread");
    fx_free(&f);

    for (size_t cut = 0; cut < len; cut++)
        CHECK(!parses(buf, cut), "a file cut to %zu bytes was accepted", cut);
    buf[len] = 0;
    CHECK(!parses(buf, len + 1), "a trailing byte was accepted");

    static const struct { size_t offset; unsigned char value; const char *what; } bad[] = {
        {0, 'X', "bad magic"},     {4, 2, "version 2"},   {8, 2, "count 2"},
        {12, 0, "empty name"},     {14, 0x7f, "name byte 0x7f"},
        {15, 3, "dtype 3"},        {16, 9, "ndim 9"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tiny_file(buf);
        buf[bad[i].offset] = bad[i].value;
        CHECK(!parses(buf, len), "%s was accepted", bad[i].what);
    }

    /* ndim 1 with shape 0, and with shape -1: the 8 data bytes become the
     * shape and no data is left. */
    tiny_file(buf);
    buf[16] = 1;
    memset(buf + 17, 0, 8);
    CHECK(!parses(buf, len), "shape 0 was accepted");
    memset(buf + 17, 0xff, 8);
    CHECK(!parses(buf, len), "shape -1 was accepted");

    CHECK(fx_load(&f, "/nonexistent/fixture.bin", err, sizeof err) != 0 &&
          strstr(err, "/nonexistent/fixture.bin"), "a missing file was not reported");
}

/* A valid file: one dtype 2 (uniform) tensor "u" [2, 3], seed 1234567,
 * exponent -1. */
static size_t tiny_uniform_file(unsigned char *buf)
{
    static const unsigned char bytes[] = {
        'R', 'A', 'F', 'X', 1, 0, 0, 0, 1, 0, 0, 0,    /* magic, version, count */
        1, 0, 'u', 2, 2,                               /* "u", uniform, ndim 2 */
        2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, /* shape [2, 3] */
        0x87, 0xd6, 0x12, 0, 0, 0, 0, 0,               /* seed 1234567 */
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* exponent -1 */
    };
    memcpy(buf, bytes, sizeof bytes);
    return sizeof bytes;
}

static void test_reader_uniform(void)
{
    /* splitmix64's published first outputs for seed 1234567. */
    static const uint64_t splitmix[] = {6457827717110365317ull, 3203168211198807973ull,
                                        9817491932198370423ull, 4593380528125082431ull,
                                        16408922859458223821ull};
    uint64_t state = 1234567;
    for (int i = 0; i < 5; i++)
        CHECK(fx_splitmix64(&state) == splitmix[i], "splitmix64 output %d is wrong", i);

    /* (z >> 40) - 2^23 of those outputs, as make_fixtures.py's Uniform has them. */
    static const int64_t k[] = {-2515248, -5475344, 540348, -4210953, 6535220, -1290371};
    unsigned char buf[80];
    size_t len = tiny_uniform_file(buf);
    fx_file f;
    char err[256];
    CHECK(fx_parse(&f, buf, len, err, sizeof err) == 0, "%s", err);
    const fx_tensor *u = fx_find(&f, "u");
    int ok = u && u->dtype == FX_F64 && u->stored == FX_STORED_UNIFORM && u->ndim == 2 &&
             u->shape[0] == 2 && u->shape[1] == 3 && u->count == 6 && u->f64 && !u->i64;
    for (int i = 0; ok && i < 6; i++) ok = u->f64[i] == ldexp((double)k[i], -24);
    CHECK(ok, "the uniform tensor misread");
    fx_free(&f);

    for (size_t cut = 0; cut < len; cut++)
        CHECK(!parses(buf, cut), "a uniform file cut to %zu bytes was accepted", cut);
    buf[len] = 0;
    CHECK(!parses(buf, len + 1), "a trailing byte after a uniform tensor was accepted");

    /* exponent 101, and -101 */
    tiny_uniform_file(buf);
    memset(buf + 41, 0, 8);
    buf[41] = 101;
    CHECK(!parses(buf, len), "uniform exponent 101 was accepted");
    memset(buf + 41, 0xff, 8);
    buf[41] = (unsigned char)-101;
    CHECK(!parses(buf, len), "uniform exponent -101 was accepted");
    buf[41] = (unsigned char)-100;
    CHECK(parses(buf, len), "uniform exponent -100 was rejected");

    /* more values than FX_MAX_GENERATED: [2^23, 3], and a shape of -1 */
    tiny_uniform_file(buf);
    memset(buf + 17, 0, 8);
    buf[17 + 2] = 0x80;
    CHECK(!parses(buf, len), "a uniform tensor of 3 * 2^23 values was accepted");
    memset(buf + 17, 0xff, 8);
    CHECK(!parses(buf, len), "uniform shape -1 was accepted");
}

static void test_fixture_names(void)
{
    static const char *const prefixes[] = {"table_", "rope_", "repkv_", "attn_",
                                           "freqs_", "rotary_", "coregrad_", "layergrad_"};
    CHECK(fixture_count > 0, "no fixtures in %s", fixture_dir);
    for (int i = 0; i < fixture_count; i++) {
        int known = 0;
        for (size_t p = 0; p < sizeof prefixes / sizeof prefixes[0]; p++)
            known |= starts_with(fixture_names[i], prefixes[p]);
        CHECK(known, "%s: unknown fixture kind", fixture_names[i]);
    }
}

/* ------------------------------------------------------------------------ */
/* precompute_freqs_cis                                                      */
/* ------------------------------------------------------------------------ */

static int is_arange(const int64_t *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (p[i] != i) return 0;
    return 1;
}

static ra_rope *make_rope(const fixture *fx, int64_t head_dim, double theta,
                          ra_layout layout, int64_t table_size)
{
    ra_rope_config cfg = ra_rope_config_default(head_dim);
    cfg.theta = theta;
    cfg.layout = layout;
    cfg.table_size = table_size;
    ra_rope *rope = NULL;
    ra_status st = ra_rope_create(&rope, &cfg);
    CHECK(st == RA_OK, "%s: ra_rope_create: %s", fx->name, ra_status_string(st));
    return st == RA_OK ? rope : NULL;
}

/* ra_rope_table at the fixture's positions, with a full and a small table. */
static double check_rope_table(const fixture *fx, int64_t dim, double theta,
                               const fx_tensor *pos, const fx_tensor *cos,
                               const fx_tensor *sin, float *c, float *s)
{
    const int64_t tables[] = {ra_rope_config_default(dim).table_size, SMALL_TABLE};
    double worst = 0;
    for (int k = 0; k < 2; k++) {
        ra_rope *rope = make_rope(fx, dim, theta, RA_LAYOUT_INTERLEAVED, tables[k]);
        if (!rope) continue;
        ra_status st = ra_rope_table(rope, c, s, pos->i64, pos->count);
        CHECK(st == RA_OK, "%s: ra_rope_table: %s", fx->name, ra_status_string(st));
        double err = fmax(max_abs_err(c, cos->f64, cos->count),
                          max_abs_err(s, sin->f64, sin->count));
        CHECK(err <= TABLE_TOL, "%s: ra_rope_table (table_size %lld): "
              "max abs err %.3g", fx->name, (long long)tables[k], err);
        worst = fmax(worst, err);
        ra_rope_destroy(rope);
    }
    return worst;
}

static void check_table(const fixture *fx)
{
    int64_t dim;
    double theta;
    if (!need_i64(fx, "dim", &dim) || !need_f64(fx, "theta", &theta)) return;
    const fx_tensor *pos = need(fx, "positions", FX_I64, 1, NULL);
    if (!pos) return;
    const int64_t shape[] = {pos->count, dim / 2};
    const fx_tensor *cos = need(fx, "cos", FX_F64, 2, shape);
    const fx_tensor *sin = need(fx, "sin", FX_F64, 2, shape);
    if (!cos || !sin) return;

    float *c = malloc((size_t)cos->count * sizeof *c);
    float *s = malloc((size_t)sin->count * sizeof *s);
    CHECK(c && s, "out of memory");
    double worst = 0;
    if (c && s) {
        worst = check_rope_table(fx, dim, theta, pos, cos, sin, c, s);
        if (is_arange(pos->i64, pos->count)) {
            ra_status st = ra_precompute_freqs(c, s, dim, pos->count, theta);
            CHECK(st == RA_OK, "%s: ra_precompute_freqs: %s", fx->name, ra_status_string(st));
            double err = fmax(max_abs_err(c, cos->f64, cos->count),
                              max_abs_err(s, sin->f64, sin->count));
            CHECK(err <= TABLE_TOL, "%s: ra_precompute_freqs: max abs err %.3g",
                  fx->name, err);
            worst = fmax(worst, err);
        }
    }
    printf("  %-48s max abs err %.2e\n", fx->name, worst);
    free(c);
    free(s);
}

static void test_tables(void)
{
    for_each_fixture("table_", check_table);
}

/* ------------------------------------------------------------------------ */
/* apply_rotary_emb, both layouts                                            */
/* ------------------------------------------------------------------------ */

/* One rope fixture: x [B, S, heads, D] of q or k, and its expected output. */
typedef struct rope_case {
    const fixture *fx;
    const char *what; /* "xq" or "xk" */
    int64_t b, s, heads, d, start;
    float *x;
    const fx_tensor *ref;
} rope_case;

static double report_rope(const rope_case *rc, const char *how, const float *got,
                          const double *ref)
{
    double err = ra_test_rel_err(got, ref, (size_t)rc->ref->count);
    CHECK(err <= ROPE_TOL, "%s: %s %s: rel err %.3g", rc->fx->name, how, rc->what, err);
    return err;
}

/* ra_rope_apply_f32 in place, and ra_rope_apply out of place (position ids,
 * a context) followed by RA_INVERSE back to x. */
static double check_rope_apply(const rope_case *rc, const ra_rope *rope,
                               ra_context *ctx, const fx_tensor *x64)
{
    int64_t n = rc->ref->count;
    float *y = copy_f32(rc->x, n), *back = malloc((size_t)n * sizeof *back);
    int64_t *ids = malloc((size_t)(rc->b * rc->s) * sizeof *ids);
    CHECK(back && ids, "out of memory");
    char how[3][80];
    long long rows = (long long)ra_rope_get_config(rope)->table_size;
    snprintf(how[0], sizeof how[0], "ra_rope_apply_f32 (%lld-row table)", rows);
    snprintf(how[1], sizeof how[1], "ra_rope_apply (%lld-row table)", rows);
    snprintf(how[2], sizeof how[2], "ra_rope_apply inverse (%lld-row table)", rows);
    double worst = 0;
    if (y && back && ids) {
        ra_status st = ra_rope_apply_f32(NULL, rope, y, rc->b, rc->s, rc->heads, rc->start);
        CHECK(st == RA_OK, "%s: %s: %s", rc->fx->name, how[0], ra_status_string(st));
        worst = report_rope(rc, how[0], y, rc->ref->f64);

        for (int64_t i = 0; i < rc->b * rc->s; i++) ids[i] = rc->start + i % rc->s;
        ra_positions pos = {.struct_size = sizeof pos, .start = 0, .ids = ids};
        ra_tensor tx = ra_tensor_4d(rc->x, RA_F32, rc->b, rc->s, rc->heads, rc->d);
        ra_tensor ty = ra_tensor_4d(y, RA_F32, rc->b, rc->s, rc->heads, rc->d);
        ra_tensor tb = ra_tensor_4d(back, RA_F32, rc->b, rc->s, rc->heads, rc->d);
        memset(y, 0, (size_t)n * sizeof *y);
        st = ra_rope_apply(ctx, rope, &ty, &tx, &pos, RA_FORWARD);
        CHECK(st == RA_OK, "%s: %s: %s", rc->fx->name, how[1], ra_status_string(st));
        worst = fmax(worst, report_rope(rc, how[1], y, rc->ref->f64));
        st = ra_rope_apply(ctx, rope, &tb, &ty, &pos, RA_INVERSE);
        CHECK(st == RA_OK, "%s: %s: %s", rc->fx->name, how[2], ra_status_string(st));
        worst = fmax(worst, report_rope(rc, how[2], back, x64->f64));
    }
    free(y);
    free(back);
    free(ids);
    return worst;
}

/* The seed's call: ra_apply_rotary_emb with table rows start .. start+S-1. */
static double check_seed_rotary(const rope_case *q, const rope_case *k, double theta)
{
    int64_t half = q->d / 2, s = q->s;
    float *cos = malloc((size_t)(s * half) * sizeof *cos);
    float *sin = malloc((size_t)(s * half) * sizeof *sin);
    int64_t *pos = malloc((size_t)s * sizeof *pos);
    float *xq = copy_f32(q->x, q->ref->count), *xk = copy_f32(k->x, k->ref->count);
    ra_rope *rope = make_rope(q->fx, q->d, theta, RA_LAYOUT_INTERLEAVED,
                              ra_rope_config_default(q->d).table_size);
    CHECK(cos && sin && pos, "out of memory");
    double worst = 0;
    if (cos && sin && pos && xq && xk && rope) {
        for (int64_t i = 0; i < s; i++) pos[i] = q->start + i;
        ra_status st = ra_rope_table(rope, cos, sin, pos, s);
        CHECK(st == RA_OK, "%s: ra_rope_table: %s", q->fx->name, ra_status_string(st));
        st = ra_apply_rotary_emb(xq, xk, cos, sin, q->b, s, q->heads, k->heads, q->d);
        CHECK(st == RA_OK, "%s: ra_apply_rotary_emb: %s", q->fx->name, ra_status_string(st));
        worst = fmax(report_rope(q, "ra_apply_rotary_emb", xq, q->ref->f64),
                     report_rope(k, "ra_apply_rotary_emb", xk, k->ref->f64));
    }
    ra_rope_destroy(rope);
    free(cos);
    free(sin);
    free(pos);
    free(xq);
    free(xk);
    return worst;
}

static void check_rope(const fixture *fx)
{
    int64_t layout, start;
    double theta;
    if (!need_i64(fx, "layout", &layout) || !need_i64(fx, "start_pos", &start) ||
        !need_f64(fx, "theta", &theta))
        return;
    CHECK(layout == RA_LAYOUT_INTERLEAVED || layout == RA_LAYOUT_HALF,
          "%s: layout %lld", fx->name, (long long)layout);
    const fx_tensor *xq = need(fx, "xq", FX_F64, 4, NULL);
    const fx_tensor *xk = xq ? need(fx, "xk", FX_F64, 4,
                                    (const int64_t[]){xq->shape[0], xq->shape[1], -1,
                                                      xq->shape[3]}) : NULL;
    const fx_tensor *xq_out = xq ? need(fx, "xq_out", FX_F64, 4, xq->shape) : NULL;
    const fx_tensor *xk_out = xk ? need(fx, "xk_out", FX_F64, 4, xk->shape) : NULL;
    if (!xq_out || !xk_out || (layout != 0 && layout != 1)) return;

    rope_case q = {fx, "xq", xq->shape[0], xq->shape[1], xq->shape[2], xq->shape[3],
                   start, to_f32(fx, xq), xq_out};
    rope_case k = {fx, "xk", xk->shape[0], xk->shape[1], xk->shape[2], xk->shape[3],
                   start, to_f32(fx, xk), xk_out};
    ra_context *ctx = NULL;
    ra_status st = ra_context_create(&ctx, 2);
    CHECK(st == RA_OK, "ra_context_create: %s", ra_status_string(st));
    double worst = 0;
    const int64_t tables[] = {ra_rope_config_default(q.d).table_size, SMALL_TABLE};
    for (int t = 0; q.x && k.x && ctx && t < 2; t++) {
        ra_rope *rope = make_rope(fx, q.d, theta, (ra_layout)layout, tables[t]);
        if (!rope) continue;
        worst = fmax(worst, check_rope_apply(&q, rope, ctx, xq));
        worst = fmax(worst, check_rope_apply(&k, rope, ctx, xk));
        ra_rope_destroy(rope);
    }
    if (q.x && k.x && layout == RA_LAYOUT_INTERLEAVED)
        worst = fmax(worst, check_seed_rotary(&q, &k, theta));
    printf("  %-48s max rel err %.2e\n", fx->name, worst);
    ra_context_destroy(ctx);
    free(q.x);
    free(k.x);
}

static void test_rope(void)
{
    for_each_fixture("rope_", check_rope);
}

/* ------------------------------------------------------------------------ */
/* repeat_kv                                                                 */
/* ------------------------------------------------------------------------ */

static void check_repeat_kv(const fixture *fx)
{
    int64_t n_rep;
    if (!need_i64(fx, "n_rep", &n_rep)) return;
    const fx_tensor *x = need(fx, "x", FX_F64, 4, NULL);
    const fx_tensor *ref = x ? need(fx, "out", FX_F64, 4,
                                    (const int64_t[]){x->shape[0], x->shape[1],
                                                      x->shape[2] * n_rep, x->shape[3]})
                             : NULL;
    if (!ref) return;
    float *x32 = to_f32(fx, x), *out = malloc((size_t)ref->count * sizeof *out);
    CHECK(out != NULL, "out of memory");
    if (x32 && out) {
        ra_status st = ra_repeat_kv(out, x32, x->shape[0], x->shape[1], x->shape[2],
                                    x->shape[3], n_rep);
        CHECK(st == RA_OK, "%s: ra_repeat_kv: %s", fx->name, ra_status_string(st));
        /* A copy: exact. */
        double err = max_abs_err(out, ref->f64, ref->count);
        CHECK(err == 0, "%s: ra_repeat_kv: max abs err %.3g", fx->name, err);
    }
    free(x32);
    free(out);
}

static void test_repeat_kv(void)
{
    for_each_fixture("repkv_", check_repeat_kv);
}

/* ------------------------------------------------------------------------ */
/* Attention.forward                                                         */
/* ------------------------------------------------------------------------ */

typedef struct layer_case {
    const fixture *fx;
    ra_layer_config config; /* its rope points at rope below */
    ra_rope_config rope;
    int64_t b, s, start;
    const float *x;
    const fx_tensor *y;
} layer_case;

/* Contexts the layer runs with: NULL (the calling thread alone), and contexts
 * of 1 and 2 threads. */
#define N_CONTEXTS 3
static const char *const context_names[N_CONTEXTS] = {"no context", "1-thread context",
                                                      "2-thread context"};

/* ra_layer_forward on the reference and flash paths, each with every context;
 * returns the worst relative error. */
static double check_layer(const layer_case *lc, const ra_layer_weights *w,
                          ra_context *const *ctx, const char *variant)
{
    ra_layer *layer = NULL;
    ra_status st = ra_layer_create(&layer, &lc->config, w);
    CHECK(st == RA_OK, "%s: ra_layer_create (%s): %s", lc->fx->name, variant,
          ra_status_string(st));
    float *y = malloc((size_t)lc->y->count * sizeof *y);
    CHECK(y != NULL, "out of memory");
    static const ra_attention_path paths[] = {RA_PATH_REFERENCE, RA_PATH_FLASH};
    static const char *const path_names[] = {"reference", "flash"};
    double worst = 0;
    for (int i = 0; layer && y && i < 2 * N_CONTEXTS; i++) {
        int path = i / N_CONTEXTS, c = i % N_CONTEXTS;
        ra_attention_options opt = {.struct_size = sizeof opt, .path = paths[path]};
        ra_positions pos = {.struct_size = sizeof pos, .start = lc->start};
        memset(y, 0, (size_t)lc->y->count * sizeof *y);
        st = ra_layer_forward(ctx[c], layer, y, lc->x, lc->b, lc->s, &pos, &opt);
        CHECK(st == RA_OK, "%s: ra_layer_forward (%s, %s, %s): %s", lc->fx->name, variant,
              path_names[path], context_names[c], ra_status_string(st));
        double err = ra_test_rel_err(y, lc->y->f64, (size_t)lc->y->count);
        CHECK(err <= LAYER_TOL, "%s: %s layer, %s path, %s: rel err %.3g", lc->fx->name,
              variant, path_names[path], context_names[c], err);
        worst = fmax(worst, err);
    }
    free(y);
    ra_layer_destroy(layer);
    return worst;
}

/* convert_llama_weights.py's permute, written out independently of the
 * library: within each head the interleaved rows (2i, 2i + 1) become rows i
 * and D/2 + i, i.e. out row h*D + j*D/2 + i = in row h*D + 2i + j.  NULL after
 * a failed CHECK; free with free(). */
static float *hf_permute(const float *w, int64_t heads, int64_t head_dim, int64_t dim)
{
    float *out = malloc((size_t)(heads * head_dim * dim) * sizeof *out);
    CHECK(out != NULL, "out of memory");
    for (int64_t h = 0; out && h < heads; h++)
        for (int64_t j = 0; j < 2; j++)
            for (int64_t i = 0; i < head_dim / 2; i++)
                memcpy(out + (h * head_dim + j * (head_dim / 2) + i) * dim,
                       w + (h * head_dim + 2 * i + j) * dim, (size_t)dim * sizeof *out);
    return out;
}

/* ra_permute_rows(w, HALF) must give the HF weight exactly, and INTERLEAVED
 * must undo it. */
static void check_permute(const fixture *fx, const float *w, const float *w_hf,
                          int64_t heads, int64_t head_dim, int64_t dim)
{
    size_t n = (size_t)(heads * head_dim * dim);
    float *half = malloc(n * sizeof *half), *back = malloc(n * sizeof *back);
    CHECK(half && back, "out of memory");
    if (half && back) {
        ra_status st = ra_permute_rows(half, w, RA_F32, heads, head_dim, dim, RA_LAYOUT_HALF);
        CHECK(st == RA_OK && memcmp(half, w_hf, n * sizeof *half) == 0,
              "%s: ra_permute_rows to HALF (%lld heads) differs from HF's permute",
              fx->name, (long long)heads);
        st = ra_permute_rows(back, w_hf, RA_F32, heads, head_dim, dim, RA_LAYOUT_INTERLEAVED);
        CHECK(st == RA_OK && memcmp(back, w, n * sizeof *back) == 0,
              "%s: ra_permute_rows to INTERLEAVED does not undo HF's permute", fx->name);
    }
    free(half);
    free(back);
}

/* An HF weight: the file's `name` (wq_hf, wk_hf) when it has one, which must
 * equal hf_permute(w); else hf_permute(w).  *stored tells which.  NULL after a
 * failed CHECK. */
static float *hf_weight(const fixture *fx, const char *name, const float *w, int64_t heads,
                        int64_t head_dim, int64_t dim, int *stored)
{
    float *derived = hf_permute(w, heads, head_dim, dim);
    *stored = fx_find(&fx->data, name) != NULL;
    if (!derived || !*stored) return derived;
    const fx_tensor *t = need(fx, name, FX_F64, 2, (const int64_t[]){heads * head_dim, dim});
    float *file = t ? to_f32(fx, t) : NULL;
    CHECK(!file || memcmp(file, derived, (size_t)t->count * sizeof *file) == 0,
          "%s: %s differs from the test's permute of the seed weight", fx->name, name);
    free(derived);
    return file;
}

/* The Hugging Face variant: permuted wq/wk, half layout, same y. */
static double check_hf_layer(const layer_case *lc, const ra_layer_weights *w,
                             ra_context *const *ctx, int *stored)
{
    const fixture *fx = lc->fx;
    int64_t h = lc->config.n_heads, hkv = lc->config.n_kv_heads;
    int64_t d = lc->config.head_dim, dim = lc->config.dim;
    int q_stored, k_stored;
    float *q = hf_weight(fx, "wq_hf", w->wq, h, d, dim, &q_stored);
    float *k = hf_weight(fx, "wk_hf", w->wk, hkv, d, dim, &k_stored);
    CHECK(q_stored == k_stored, "%s: only one of wq_hf, wk_hf", fx->name);
    *stored = q_stored && k_stored;
    double err = NAN;
    if (q && k) {
        check_permute(fx, w->wq, q, h, d, dim);
        check_permute(fx, w->wk, k, hkv, d, dim);
        layer_case half = *lc;
        half.rope.layout = RA_LAYOUT_HALF;
        half.config.rope = &half.rope;
        ra_layer_weights w_hf = {.struct_size = sizeof w_hf, .wq = q, .wk = k, .wv = w->wv,
                                 .wo = w->wo};
        err = check_layer(&half, &w_hf, ctx, "HF");
    }
    free(q);
    free(k);
    return err;
}

/* What the attention fixtures must cover, together (the issue: GQA 1:1, 4:1,
 * 8:1; head_dim 64 and 128; odd sequence lengths; batch > 1). */
typedef struct attn_shape {
    int64_t b, s, h, hkv, d, start;
    double theta;
} attn_shape;

static int cover_8to1(const attn_shape *a) { return a->h == 8 * a->hkv && a->s > 1 && a->b > 1 && a->s % 2; }
static int cover_8to1_groups(const attn_shape *a) { return a->h == 8 * a->hkv && a->hkv > 1 && a->s > 1; }
static int cover_4to1_d128(const attn_shape *a) { return a->h == 4 * a->hkv && a->hkv > 1 && a->d == 128 && a->b > 1; }
static int cover_1to1_d128(const attn_shape *a) { return a->h == a->hkv && a->h > 1 && a->d == 128 && a->s > 64; }
static int cover_1to1_d64(const attn_shape *a) { return a->h == a->hkv && a->d == 64 && a->b > 1; }
static int cover_far(const attn_shape *a) { return a->start > 0 && a->theta == 500000.0 && a->h > a->hkv; }

static const struct {
    const char *what;
    int (*covers)(const attn_shape *);
} coverage[] = {
    {"GQA 8:1, batch > 1, odd S > 1", cover_8to1},
    {"GQA 8:1 with two or more kv heads", cover_8to1_groups},
    {"GQA 4:1 with two or more kv heads, head_dim 128, batch > 1", cover_4to1_d128},
    {"GQA 1:1, several heads, head_dim 128, S > 64", cover_1to1_d128},
    {"GQA 1:1, head_dim 64, batch > 1", cover_1to1_d64},
    {"GQA, start_pos > 0, theta 500000", cover_far},
};
#define N_COVERAGE (sizeof coverage / sizeof coverage[0])

static int attn_fixtures, hf_fixtures, hf_stored_fixtures;
static int covered[N_COVERAGE];

static void check_attention(const fixture *fx)
{
    int64_t dim, h, hkv, d, start;
    double theta;
    attn_fixtures++;
    if (!need_i64(fx, "dim", &dim) || !need_i64(fx, "n_heads", &h) ||
        !need_i64(fx, "n_kv_heads", &hkv) || !need_i64(fx, "head_dim", &d) ||
        !need_i64(fx, "start_pos", &start) || !need_f64(fx, "theta", &theta))
        return;
    const fx_tensor *x = need(fx, "x", FX_F64, 3, (const int64_t[]){-1, -1, dim});
    const fx_tensor *wq = need(fx, "wq", FX_F64, 2, (const int64_t[]){h * d, dim});
    const fx_tensor *wk = need(fx, "wk", FX_F64, 2, (const int64_t[]){hkv * d, dim});
    const fx_tensor *wv = need(fx, "wv", FX_F64, 2, (const int64_t[]){hkv * d, dim});
    const fx_tensor *wo = need(fx, "wo", FX_F64, 2, (const int64_t[]){dim, h * d});
    const fx_tensor *y = x ? need(fx, "y", FX_F64, 3, x->shape) : NULL;
    if (!wq || !wk || !wv || !wo || !y) return;
    CHECK(y->stored == FX_STORED_F64, "%s: y must be stored as f64", fx->name);

    float *x32 = to_f32(fx, x), *q = to_f32(fx, wq), *k = to_f32(fx, wk);
    float *v = to_f32(fx, wv), *o = to_f32(fx, wo);
    ra_context *ctx[N_CONTEXTS] = {NULL, NULL, NULL};
    ra_status st1 = ra_context_create(&ctx[1], 1), st2 = ra_context_create(&ctx[2], 2);
    CHECK(st1 == RA_OK && st2 == RA_OK, "ra_context_create: %s, %s",
          ra_status_string(st1), ra_status_string(st2));
    CHECK(!ctx[1] || ra_context_threads(ctx[1]) == 1, "the 1-thread context has %d threads",
          ra_context_threads(ctx[1]));
    CHECK(!ctx[2] || ra_context_threads(ctx[2]) == 2, "the 2-thread context has %d threads",
          ra_context_threads(ctx[2]));
    if (x32 && q && k && v && o && ctx[1] && ctx[2]) {
        layer_case lc = {fx, {.struct_size = sizeof lc.config, .dim = dim, .n_heads = h,
                              .n_kv_heads = hkv, .head_dim = d},
                         ra_rope_config_default(d), x->shape[0], x->shape[1], start, x32, y};
        lc.rope.theta = theta;
        lc.config.rope = &lc.rope;
        ra_layer_weights w = {.struct_size = sizeof w, .wq = q, .wk = k, .wv = v, .wo = o};
        double err = check_layer(&lc, &w, ctx, "seed");
        int stored = 0;
        double err_hf = check_hf_layer(&lc, &w, ctx, &stored);
        hf_fixtures += !isnan(err_hf);
        hf_stored_fixtures += stored;
        err = fmax(err, err_hf);
        attn_shape a = {lc.b, lc.s, h, hkv, d, start, theta};
        for (size_t i = 0; i < N_COVERAGE; i++) covered[i] += coverage[i].covers(&a);
        printf("  %-40s %d:1  max rel err %.2e (seed + HF, %s HF weights)\n", fx->name,
               (int)(h / hkv), err, stored ? "stored" : "permuted");
    }
    ra_context_destroy(ctx[1]);
    ra_context_destroy(ctx[2]);
    free(x32);
    free(q);
    free(k);
    free(v);
    free(o);
}

static void test_attention(void)
{
    attn_fixtures = hf_fixtures = hf_stored_fixtures = 0;
    memset(covered, 0, sizeof covered);
    for_each_fixture("attn_", check_attention);
    CHECK(hf_fixtures == attn_fixtures, "the HF variant ran on %d of %d attention fixtures",
          hf_fixtures, attn_fixtures);
    /* The test's permute must be checked against the script's at least once. */
    CHECK(hf_stored_fixtures >= 1, "no attention fixture stores wq_hf/wk_hf");
    for (size_t i = 0; i < N_COVERAGE; i++)
        CHECK(covered[i] > 0, "no attention fixture covers %s", coverage[i].what);
}

/* ------------------------------------------------------------------------ */
/* The attention core's backward (coregrad_*): torch autograd                */
/* ------------------------------------------------------------------------ */

/* ra_attention_forward_lse then ra_attention_backward, on the reference
 * path (no context) and the flash path (a 2-thread context), against the
 * autograd values of the seed's core in float64: out, lse, dq, dk, dv.
 *   q, out, dout, dq: [B, S, H, D]   k, v, dk, dv: [B, S, Hkv, D]   lse: [B, H, S] */
static void check_core_grad(const fixture *fx)
{
    int64_t n_rep;
    if (!need_i64(fx, "n_rep", &n_rep)) return;
    const fx_tensor *tq = need(fx, "q", FX_F64, 4, NULL);
    const fx_tensor *tk = tq ? need(fx, "k", FX_F64, 4,
                                    (const int64_t[]){tq->shape[0], tq->shape[1],
                                                      tq->shape[2] / n_rep, tq->shape[3]})
                             : NULL;
    const fx_tensor *tv = tk ? need(fx, "v", FX_F64, 4, tk->shape) : NULL;
    const fx_tensor *tdo = tq ? need(fx, "dout", FX_F64, 4, tq->shape) : NULL;
    const fx_tensor *want_out = tq ? need(fx, "out", FX_F64, 4, tq->shape) : NULL;
    const fx_tensor *want_lse = tq ? need(fx, "lse", FX_F64, 3,
                                          (const int64_t[]){tq->shape[0], tq->shape[2],
                                                            tq->shape[1]})
                                   : NULL;
    const fx_tensor *want_dq = tq ? need(fx, "dq", FX_F64, 4, tq->shape) : NULL;
    const fx_tensor *want_dk = tk ? need(fx, "dk", FX_F64, 4, tk->shape) : NULL;
    const fx_tensor *want_dv = tk ? need(fx, "dv", FX_F64, 4, tk->shape) : NULL;
    if (!tv || !tdo || !want_out || !want_lse || !want_dq || !want_dk || !want_dv) return;
    const int64_t b = tq->shape[0], s = tq->shape[1], h = tq->shape[2], d = tq->shape[3];
    const int64_t hkv = tk->shape[2];
    float *q = to_f32(fx, tq), *k = to_f32(fx, tk), *v = to_f32(fx, tv), *dout = to_f32(fx, tdo);
    float *out = malloc((size_t)tq->count * sizeof *out), *lse = malloc((size_t)(b * h * s) * 4);
    float *dq = malloc((size_t)tq->count * sizeof *dq), *dk = malloc((size_t)tk->count * 4);
    float *dv = malloc((size_t)tk->count * sizeof *dv);
    ra_context *ctx = NULL;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ra_context_create");
    double worst = 0;
    static const char *const path_names[] = {"reference", "flash"};
    for (int path = 0; q && k && v && dout && out && lse && dq && dk && dv && ctx && path < 2;
         path++) {
        ra_attention_path p = path ? RA_PATH_FLASH : RA_PATH_REFERENCE;
        ra_context *c = path ? ctx : NULL;
        ra_tensor vq = ra_tensor_4d(q, RA_F32, b, s, h, d), vk = ra_tensor_4d(k, RA_F32, b, s, hkv, d);
        ra_tensor vv = ra_tensor_4d(v, RA_F32, b, s, hkv, d), vo = ra_tensor_4d(out, RA_F32, b, s, h, d);
        ra_tensor vdo = ra_tensor_4d(dout, RA_F32, b, s, h, d);
        ra_tensor vdq = ra_tensor_4d(dq, RA_F32, b, s, h, d);
        ra_tensor vdk = ra_tensor_4d(dk, RA_F32, b, s, hkv, d);
        ra_tensor vdv = ra_tensor_4d(dv, RA_F32, b, s, hkv, d);
        ra_status st = ra_attention_forward_lse(c, &vo, lse, &vq, &vk, &vv, PATH_OPTS(p));
        CHECK(st == RA_OK, "%s: forward (%s): %s", fx->name, path_names[path], ra_status_string(st));
        st =
            ra_attention_backward(c, &vdq, &vdk, &vdv, &vdo, &vq, &vk, &vv, &vo, lse, PATH_OPTS(p));
        CHECK(st == RA_OK, "%s: backward (%s): %s", fx->name, path_names[path], ra_status_string(st));
        const struct {
            const char *name;
            const float *got;
            const fx_tensor *want;
        } results[] = {{"out", out, want_out}, {"lse", lse, want_lse}, {"dq", dq, want_dq},
                       {"dk", dk, want_dk}, {"dv", dv, want_dv}};
        for (int r = 0; r < 5; r++) {
            double err = ra_test_rel_err(results[r].got, results[r].want->f64,
                                         (size_t)results[r].want->count);
            CHECK(err <= GRAD_TOL, "%s: %s path, %s: rel err %.3g", fx->name, path_names[path],
                  results[r].name, err);
            worst = fmax(worst, err);
        }
    }
    printf("  %-40s %d:1  max rel err %.2e (out, lse, dq, dk, dv; reference + flash)\n",
           fx->name, (int)n_rep, worst);
    ra_context_destroy(ctx);
    free(q); free(k); free(v); free(dout); free(out); free(lse); free(dq); free(dk); free(dv);
}

static void test_attention_core_grad(void)
{
    for_each_fixture("coregrad_", check_core_grad);
}

/* ------------------------------------------------------------------------ */
/* Rope types (freqs_*, rotary_*): transformers' modeling_rope_utils          */
/* ------------------------------------------------------------------------ */

/* Inverse frequencies, relative per entry: both sides are double, so the same
 * formula in another order differs by a few ulps (~1e-15); a float32 step
 * anywhere, or a wrong branch, shows as 1e-7 or more. */
#define INV_FREQ_TOL 1e-12
/* Attention factor, relative: a log, a sqrt or a division in double. */
#define ATTN_FACTOR_TOL 1e-12

static const char *const rope_type_names[RA_ROPE_TYPE_COUNT] = {
    "default", "linear", "dynamic", "yarn", "llama3", "longrope"};

/* An optional scalar (a "param.<key>" that the checkpoint may leave out):
 * 1 with *out set when present with the right dtype, 0 when absent. */
static int opt_f64(const fixture *fx, const char *name, double *out)
{
    if (!fx_find(&fx->data, name)) return 0;
    return need_f64(fx, name, out);
}

static int opt_i64(const fixture *fx, const char *name, int64_t *out)
{
    if (!fx_find(&fx->data, name)) return 0;
    return need_i64(fx, name, out);
}

/* A fixture's rope description (see make_fixtures.py) as an ra_rope_config,
 * with the expected inverse frequencies and attention factor. */
typedef struct rope_desc {
    ra_rope_config config;
    int64_t half;               /* rotary_dim / 2 */
    const fx_tensor *inv_freq;  /* [half] */
    double attention_factor;
} rope_desc;

/* Fills rd from the fixture whose name is prefix + "<type>_..."; 0 after a
 * failed CHECK.  Scaling fields a checkpoint leaves out stay 0 ("not given"),
 * so the library's own defaults and derivations are exercised. */
static int read_rope_desc(const fixture *fx, const char *prefix, rope_desc *rd)
{
    int64_t type, head_dim, rotary_dim, max_pos, seq_len, truncate = 1;
    double theta, partial;
    if (!need_i64(fx, "rope_type", &type) || !need_i64(fx, "head_dim", &head_dim) ||
        !need_i64(fx, "rotary_dim", &rotary_dim) || !need_f64(fx, "rope_theta", &theta) ||
        !need_f64(fx, "partial_rotary_factor", &partial) ||
        !need_i64(fx, "max_position_embeddings", &max_pos) ||
        !need_i64(fx, "seq_len", &seq_len) ||
        !need_f64(fx, "attention_factor", &rd->attention_factor))
        return 0;
    int ok = type >= 0 && type < RA_ROPE_TYPE_COUNT;
    CHECK(ok, "%s: rope_type %lld", fx->name, (long long)type);
    if (!ok) return 0;
    /* The name says the type: freqs_yarn_... must hold rope_type 3. */
    const char *word = fx->name + strlen(prefix), *tname = rope_type_names[type];
    CHECK(strncmp(word, tname, strlen(tname)) == 0 && word[strlen(tname)] == '_',
          "%s: rope_type %lld (%s) does not match the name", fx->name, (long long)type, tname);
    CHECK(head_dim > 0 && rotary_dim > 0 && rotary_dim <= head_dim && rotary_dim % 2 == 0 &&
          rotary_dim == (int64_t)((double)head_dim * partial),
          "%s: head_dim %lld, rotary_dim %lld, partial_rotary_factor %g", fx->name,
          (long long)head_dim, (long long)rotary_dim, partial);
    rd->half = rotary_dim / 2;
    rd->inv_freq = need(fx, "inv_freq", FX_F64, 1, (const int64_t[]){rd->half});
    if (!rd->inv_freq) return 0;

    ra_rope_config *c = &rd->config;
    *c = ra_rope_config_default(head_dim);
    c->type = (ra_rope_type)type;
    c->rotary_dim = rotary_dim;
    c->theta = theta;
    ra_rope_config *s = c;
    s->max_position_embeddings = max_pos;
    s->seq_len = seq_len;
    opt_f64(fx, "param.factor", &s->factor);
    opt_i64(fx, "param.original_max_position_embeddings", &s->original_max_position_embeddings);
    opt_f64(fx, "param.attention_factor", &s->attention_factor);
    opt_f64(fx, "param.beta_fast", &s->beta_fast);
    opt_f64(fx, "param.beta_slow", &s->beta_slow);
    opt_f64(fx, "param.mscale", &s->mscale);
    opt_f64(fx, "param.mscale_all_dim", &s->mscale_all_dim);
    opt_i64(fx, "param.truncate", &truncate);
    s->yarn_no_truncate = truncate == 0;
    opt_f64(fx, "param.low_freq_factor", &s->low_freq_factor);
    opt_f64(fx, "param.high_freq_factor", &s->high_freq_factor);
    const int64_t shape[] = {rd->half};
    if (fx_find(&fx->data, "param.short_factor")) {
        const fx_tensor *t = need(fx, "param.short_factor", FX_F64, 1, shape);
        if (!t) return 0;
        s->short_factor = t->f64;
    }
    if (fx_find(&fx->data, "param.long_factor")) {
        const fx_tensor *t = need(fx, "param.long_factor", FX_F64, 1, shape);
        if (!t) return 0;
        s->long_factor = t->f64;
    }
    return 1;
}

/* ra_rope_create on the description with the given layout and table size. */
static ra_rope *make_desc_rope(const fixture *fx, const rope_desc *rd, ra_layout layout,
                               int64_t table_size)
{
    ra_rope_config cfg = rd->config;
    cfg.layout = layout;
    cfg.table_size = table_size;
    ra_rope *rope = NULL;
    ra_status st = ra_rope_create(&rope, &cfg);
    CHECK(st == RA_OK, "%s: ra_rope_create (%s, table_size %lld): %s", fx->name,
          rope_type_names[cfg.type], (long long)table_size, ra_status_string(st));
    return st == RA_OK ? rope : NULL;
}

/* ra_rope_inverse_frequencies and ra_rope_attention_factor against the
 * fixture; returns the worst relative error of either. */
static double check_desc_freqs(const fixture *fx, const rope_desc *rd, const ra_rope *rope)
{
    double *inv = malloc((size_t)rd->half * sizeof *inv);
    CHECK(inv != NULL, "out of memory");
    if (!inv) return NAN;
    double worst = 0;
    int64_t worst_i = 0;
    ra_status st = ra_rope_inverse_frequencies(rope, inv);
    CHECK(st == RA_OK, "%s: ra_rope_inverse_frequencies: %s", fx->name, ra_status_string(st));
    for (int64_t i = 0; st == RA_OK && i < rd->half; i++) {
        double want = rd->inv_freq->f64[i];
        double err = fabs(inv[i] - want) / fabs(want);
        if (!(err <= worst)) {
            worst = isnan(err) ? INFINITY : err;
            worst_i = i;
        }
    }
    CHECK(worst <= INV_FREQ_TOL, "%s: inv_freq[%lld] = %.17g, expected %.17g (rel err %.3g)",
          fx->name, (long long)worst_i, inv[worst_i], rd->inv_freq->f64[worst_i], worst);
    double af = ra_rope_attention_factor(rope);
    double af_err = fabs(af - rd->attention_factor) / rd->attention_factor;
    CHECK(af_err <= ATTN_FACTOR_TOL, "%s: attention factor %.17g, expected %.17g",
          fx->name, af, rd->attention_factor);
    free(inv);
    return fmax(worst, isnan(af_err) ? INFINITY : af_err);
}

static int type_seen[RA_ROPE_TYPE_COUNT];

/* The positions a rope of config c rotates as transformers does: a dynamic
 * or longrope rope is for one length, and positions from max(seq_len, the
 * original length) on belong to longer sequences with other frequencies
 * (longrope's long factors excepted: they hold for every length). */
static int64_t rope_length(const ra_rope_config *c)
{
    if (c->type == RA_ROPE_DYNAMIC)
        return c->seq_len > c->max_position_embeddings ? c->seq_len : c->max_position_embeddings;
    if (c->type == RA_ROPE_LONGROPE && c->seq_len <= c->original_max_position_embeddings)
        return c->original_max_position_embeddings;
    return INT64_MAX;
}

static void check_freqs(const fixture *fx)
{
    rope_desc rd;
    if (!read_rope_desc(fx, "freqs_", &rd)) return;
    type_seen[rd.config.type]++;
    const fx_tensor *pos = need(fx, "positions", FX_I64, 1, NULL);
    if (!pos) return;
    const int64_t shape[] = {pos->count, rd.half};
    const fx_tensor *cos = need(fx, "cos", FX_F64, 2, shape);
    const fx_tensor *sin = need(fx, "sin", FX_F64, 2, shape);
    if (!cos || !sin) return;
    int64_t far = 0;
    for (int64_t i = 0; i < pos->count; i++) far = pos->i64[i] > far ? pos->i64[i] : far;
    CHECK(far >= (int64_t)1 << 20, "%s: positions stop at %lld, short of 2^20", fx->name,
          (long long)far);

    float *c = malloc((size_t)cos->count * sizeof *c);
    float *s = malloc((size_t)sin->count * sizeof *s);
    CHECK(c && s, "out of memory");
    const int64_t tables[] = {ra_rope_config_default(rd.config.head_dim).table_size, SMALL_TABLE};
    double worst_freq = 0, worst_table = 0;
    for (int k = 0; c && s && k < 2; k++) {
        ra_rope *rope = make_desc_rope(fx, &rd, RA_LAYOUT_INTERLEAVED, tables[k]);
        if (!rope) continue;
        worst_freq = fmax(worst_freq, check_desc_freqs(fx, &rd, rope));
        /* each position's row, refused beyond the rope's length */
        const int64_t length = rope_length(&rd.config);
        for (int64_t t = 0; t < pos->count; t++) {
            ra_status st = ra_rope_table(rope, c + t * rd.half, s + t * rd.half, pos->i64 + t, 1);
            CHECK(st == (pos->i64[t] < length ? RA_OK : RA_ERR_POSITION), "%s: ra_rope_table "
                  "at %lld: %s", fx->name, (long long)pos->i64[t], ra_status_string(st));
        }
        /* Worst entry, and where. */
        double err = 0;
        int64_t at = 0;
        for (int64_t i = 0; i < cos->count; i++) {
            if (pos->i64[i / rd.half] >= length) continue;
            double e = fmax(fabs((double)c[i] - cos->f64[i]), fabs((double)s[i] - sin->f64[i]));
            if (!(e <= err)) {
                err = isnan(e) ? INFINITY : e;
                at = i;
            }
        }
        CHECK(err <= TABLE_TOL, "%s: ra_rope_table (table_size %lld): max abs err %.3g at "
              "position %lld, pair %lld (cos %.9g vs %.9g, sin %.9g vs %.9g)", fx->name,
              (long long)tables[k], err, (long long)pos->i64[at / rd.half],
              (long long)(at % rd.half), c[at], cos->f64[at], s[at], sin->f64[at]);
        worst_table = fmax(worst_table, err);
        ra_rope_destroy(rope);
    }
    printf("  %-48s inv_freq/af rel %.1e, table abs %.1e\n", fx->name, worst_freq, worst_table);
    free(c);
    free(s);
}

static void test_rope_types(void)
{
    memset(type_seen, 0, sizeof type_seen);
    for_each_fixture("freqs_", check_freqs);
    for (int t = 0; t < RA_ROPE_TYPE_COUNT; t++)
        CHECK(type_seen[t] > 0, "no freqs_%s_* fixture", rope_type_names[t]);
}

/* Row b of positions [B, S] is starts[b] + s for every row: fills starts. */
static int rows_contiguous(const fx_tensor *pos, int64_t *starts)
{
    int64_t b = pos->shape[0], s = pos->shape[1];
    for (int64_t i = 0; i < b; i++) {
        starts[i] = pos->i64[i * s];
        for (int64_t j = 0; j < s; j++)
            if (pos->i64[i * s + j] != starts[i] + j) return 0;
    }
    return 1;
}

static double report_rotary(const fixture *fx, const char *how, const float *got,
                            const double *ref, int64_t n)
{
    double err = ra_test_rel_err(got, ref, (size_t)n);
    CHECK(err <= ROPE_TOL, "%s: %s: rel err %.3g", fx->name, how, err);
    return isnan(err) ? INFINITY : err;
}

/* One rope (layout, table size) on a rotary_ fixture: every way to give the
 * positions that the fixture allows, in and out of place, and the inverse. */
static double check_rotary_rope(const fixture *fx, const ra_rope *rope, ra_context *ctx,
                                const fx_tensor *x64, const float *x, const fx_tensor *pos,
                                const fx_tensor *y, const double *back_ref)
{
    int64_t b = x64->shape[0], s = x64->shape[1], h = x64->shape[2], d = x64->shape[3];
    int64_t n = x64->count;
    long long rows = (long long)ra_rope_get_config(rope)->table_size;
    float *out = malloc((size_t)n * sizeof *out), *back = malloc((size_t)n * sizeof *back);
    int64_t *starts = malloc((size_t)b * sizeof *starts), *cu = malloc((size_t)(b + 1) * sizeof *cu);
    CHECK(out && back && starts && cu, "out of memory");
    if (!out || !back || !starts || !cu) {
        free(out); free(back); free(starts); free(cu);
        return INFINITY;
    }
    double worst = 0;
    char how[160];
    ra_tensor tx = ra_tensor_4d((void *)x, RA_F32, b, s, h, d);
    ra_tensor to = ra_tensor_4d(out, RA_F32, b, s, h, d);
    ra_tensor tb = ra_tensor_4d(back, RA_F32, b, s, h, d);
    ra_positions ids = {.struct_size = sizeof ids, .ids = pos->i64};

    /* Position ids, out of place, with and without the context. */
    for (int k = 0; k < 2; k++) {
        memset(out, 0, (size_t)n * sizeof *out);
        ra_status st = ra_rope_apply(k ? ctx : NULL, rope, &to, &tx, &ids, RA_FORWARD);
        snprintf(how, sizeof how, "ra_rope_apply, ids, %s context (%lld-row table)",
                 k ? "2-thread" : "no", rows);
        CHECK(st == RA_OK, "%s: %s: %s", fx->name, how, ra_status_string(st));
        worst = fmax(worst, report_rotary(fx, how, out, y->f64, n));
    }
    /* In place. */
    memcpy(back, x, (size_t)n * sizeof *back);
    ra_status st = ra_rope_apply(ctx, rope, &tb, &tb, &ids, RA_FORWARD);
    snprintf(how, sizeof how, "ra_rope_apply in place, ids (%lld-row table)", rows);
    CHECK(st == RA_OK, "%s: %s: %s", fx->name, how, ra_status_string(st));
    worst = fmax(worst, report_rotary(fx, how, back, y->f64, n));
    /* RA_INVERSE on the forward result: the backward pass of the forward
     * rotation, af * R^T, so af^2 x on the rotary features. */
    st = ra_rope_apply(ctx, rope, &tb, &to, &ids, RA_INVERSE);
    snprintf(how, sizeof how, "ra_rope_apply inverse, ids (%lld-row table)", rows);
    CHECK(st == RA_OK, "%s: %s: %s", fx->name, how, ra_status_string(st));
    worst = fmax(worst, report_rotary(fx, how, back, back_ref, n));

    if (rows_contiguous(pos, starts)) {
        /* A start per sequence. */
        ra_positions per_row = {.struct_size = sizeof per_row, .starts = starts};
        memset(out, 0, (size_t)n * sizeof *out);
        st = ra_rope_apply(ctx, rope, &to, &tx, &per_row, RA_FORWARD);
        snprintf(how, sizeof how, "ra_rope_apply, starts (%lld-row table)", rows);
        CHECK(st == RA_OK, "%s: %s: %s", fx->name, how, ra_status_string(st));
        worst = fmax(worst, report_rotary(fx, how, out, y->f64, n));
        /* The same rows packed as one ragged batch [1, B*S]. */
        for (int64_t i = 0; i <= b; i++) cu[i] = i * s;
        ra_positions packed = {.struct_size = sizeof packed, .starts = starts, .cu_seqlens = cu,
                               .n_seqs = b};
        ra_tensor px = ra_tensor_4d((void *)x, RA_F32, 1, b * s, h, d);
        ra_tensor po = ra_tensor_4d(out, RA_F32, 1, b * s, h, d);
        memset(out, 0, (size_t)n * sizeof *out);
        st = ra_rope_apply(ctx, rope, &po, &px, &packed, RA_FORWARD);
        snprintf(how, sizeof how, "ra_rope_apply, packed cu_seqlens (%lld-row table)", rows);
        CHECK(st == RA_OK, "%s: %s: %s", fx->name, how, ra_status_string(st));
        worst = fmax(worst, report_rotary(fx, how, out, y->f64, n));
        /* One start for all rows: the common case. */
        int same = 1;
        for (int64_t i = 1; i < b; i++) same &= starts[i] == starts[0];
        if (same) {
            memcpy(out, x, (size_t)n * sizeof *out);
            st = ra_rope_apply_f32(NULL, rope, out, b, s, h, starts[0]);
            snprintf(how, sizeof how, "ra_rope_apply_f32 (%lld-row table)", rows);
            CHECK(st == RA_OK, "%s: %s: %s", fx->name, how, ra_status_string(st));
            worst = fmax(worst, report_rotary(fx, how, out, y->f64, n));
        }
    }
    free(out);
    free(back);
    free(starts);
    free(cu);
    return worst;
}

static void check_rotary(const fixture *fx)
{
    rope_desc rd;
    int64_t layout;
    if (!read_rope_desc(fx, "rotary_", &rd) || !need_i64(fx, "layout", &layout)) return;
    CHECK(layout == RA_LAYOUT_INTERLEAVED || layout == RA_LAYOUT_HALF,
          "%s: layout %lld", fx->name, (long long)layout);
    const fx_tensor *x64 = need(fx, "x", FX_F64, 4,
                                (const int64_t[]){-1, -1, -1, rd.config.head_dim});
    const fx_tensor *y = x64 ? need(fx, "y", FX_F64, 4, x64->shape) : NULL;
    const fx_tensor *pos = x64 ? need(fx, "positions", FX_I64, 2,
                                      (const int64_t[]){x64->shape[0], x64->shape[1]})
                               : NULL;
    if (!y || !pos || (layout != 0 && layout != 1)) return;

    /* Expected inverse: af^2 x on the first rotary_dim features, x after. */
    int64_t d = rd.config.head_dim, rot = rd.config.rotary_dim;
    double af2 = rd.attention_factor * rd.attention_factor;
    double *back_ref = malloc((size_t)x64->count * sizeof *back_ref);
    float *x = to_f32(fx, x64);
    ra_context *ctx = NULL;
    ra_status st = ra_context_create(&ctx, 2);
    CHECK(st == RA_OK, "ra_context_create: %s", ra_status_string(st));
    CHECK(back_ref != NULL, "out of memory");
    double worst = 0;
    if (back_ref && x && ctx) {
        for (int64_t i = 0; i < x64->count; i++)
            back_ref[i] = i % d < rot ? af2 * x64->f64[i] : x64->f64[i];
        const int64_t tables[] = {ra_rope_config_default(d).table_size, SMALL_TABLE};
        for (int k = 0; k < 2; k++) {
            ra_rope *rope = make_desc_rope(fx, &rd, (ra_layout)layout, tables[k]);
            if (!rope) continue;
            worst = fmax(worst, check_desc_freqs(fx, &rd, rope));
            worst = fmax(worst, check_rotary_rope(fx, rope, ctx, x64, x, pos, y, back_ref));
            ra_rope_destroy(rope);
        }
    }
    printf("  %-48s max rel err %.2e\n", fx->name, worst);
    ra_context_destroy(ctx);
    free(back_ref);
    free(x);
}

static void test_rotary(void)
{
    for_each_fixture("rotary_", check_rotary);
}

/* ------------------------------------------------------------------------ */
/* Layer gradients (layergrad_*): float64 autograd of the seed's module      */
/* ------------------------------------------------------------------------ */

/* Gradients, max |g - ref| / max |ref| per tensor: the bound
 * against float64 (float32 forward and backward give ~1e-6). */
#define GRAD_TOL 1e-4

static int grad_ratios[3]; /* fixtures seen with GQA 1:1, 4:1, 8:1 */

/* y and every gradient of one path, checked; returns the worst error. */
static double check_grad_path(const fixture *fx, const ra_layer *layer, ra_context *ctx,
                              ra_attention_path path, const float *x, const float *dy,
                              const fx_tensor *const ref[6], int64_t b, int64_t s, int64_t start)
{
    static const char *const names[6] = {"y", "dx", "dwq", "dwk", "dwv", "dwo"};
    float *out[6] = {NULL};
    int ok = 1;
    for (int i = 0; i < 6; i++) ok &= (out[i] = malloc((size_t)ref[i]->count * sizeof(float))) != NULL;
    ra_layer_tape *tape = NULL;
    ra_status st = ok ? ra_layer_tape_create(&tape, layer, b * s) : RA_ERR_NOMEM;
    ra_attention_options train = {.struct_size = sizeof train, .path = path};
    ra_positions pos = {.struct_size = sizeof pos, .start = start};
    if (st == RA_OK) st = ra_layer_forward_train(ctx, layer, out[0], tape, x, b, s, &pos, &train);
    ra_layer_grads grads = {.struct_size = sizeof grads, .dwq = out[2], .dwk = out[3],
                            .dwv = out[4], .dwo = out[5]};
    if (st == RA_OK) st = ra_layer_backward(ctx, layer, out[1], &grads, tape, dy);
    CHECK(st == RA_OK, "%s: path %d: %s", fx->name, path, ra_status_string(st));
    double worst = 0;
    for (int i = 0; st == RA_OK && i < 6; i++) {
        double err = ra_test_rel_err(out[i], ref[i]->f64, (size_t)ref[i]->count);
        CHECK(err <= GRAD_TOL, "%s: path %d: %s rel err %.3g", fx->name, path, names[i], err);
        worst = fmax(worst, err);
    }
    ra_layer_tape_destroy(tape);
    for (int i = 0; i < 6; i++) free(out[i]);
    return st == RA_OK ? worst : NAN;
}

static void check_layer_grad(const fixture *fx)
{
    int64_t dim, h, hkv, d, start;
    double theta;
    if (!need_i64(fx, "dim", &dim) || !need_i64(fx, "n_heads", &h) ||
        !need_i64(fx, "n_kv_heads", &hkv) || !need_i64(fx, "head_dim", &d) ||
        !need_i64(fx, "start_pos", &start) || !need_f64(fx, "theta", &theta))
        return;
    const fx_tensor *x = need(fx, "x", FX_F64, 3, (const int64_t[]){-1, -1, dim});
    if (!x) return;
    const int64_t q_shape[2] = {h * d, dim}, kv_shape[2] = {hkv * d, dim}, o_shape[2] = {dim, h * d};
    const fx_tensor *w[4] = {need(fx, "wq", FX_F64, 2, q_shape), need(fx, "wk", FX_F64, 2, kv_shape),
                             need(fx, "wv", FX_F64, 2, kv_shape), need(fx, "wo", FX_F64, 2, o_shape)};
    const fx_tensor *dy = need(fx, "dy", FX_F64, 3, x->shape);
    const fx_tensor *ref[6] = {need(fx, "y", FX_F64, 3, x->shape), need(fx, "dx", FX_F64, 3, x->shape),
                               need(fx, "dwq", FX_F64, 2, q_shape), need(fx, "dwk", FX_F64, 2, kv_shape),
                               need(fx, "dwv", FX_F64, 2, kv_shape), need(fx, "dwo", FX_F64, 2, o_shape)};
    for (int i = 0; i < 6; i++)
        if (!ref[i] || (i < 4 && !w[i]) || !dy) return;
    float *x32 = to_f32(fx, x), *dy32 = to_f32(fx, dy), *w32[4];
    for (int i = 0; i < 4; i++) w32[i] = to_f32(fx, w[i]);
    ra_layer *layer = NULL;
    ra_context *ctx = NULL;
    if (x32 && dy32 && w32[0] && w32[1] && w32[2] && w32[3]) {
        ra_rope_config config_rope = ra_rope_config_default(d);
        ra_layer_config config = {.struct_size = sizeof config, .dim = dim, .n_heads = h,
                                  .n_kv_heads = hkv, .head_dim = d,
                                  .rope = &config_rope};
        config_rope.theta = theta;
        ra_layer_weights lw = {.struct_size = sizeof lw, .wq = w32[0], .wk = w32[1], .wv = w32[2],
                               .wo = w32[3]};
        ra_status st = ra_layer_create(&layer, &config, &lw);
        CHECK(st == RA_OK, "%s: ra_layer_create: %s", fx->name, ra_status_string(st));
        st = ra_context_create(&ctx, 2);
        CHECK(st == RA_OK, "ra_context_create: %s", ra_status_string(st));
    }
    if (layer && ctx) {
        double worst = 0;
        for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++)
            worst = fmax(worst, check_grad_path(fx, layer, ctx, (ra_attention_path)path, x32, dy32,
                                                ref, x->shape[0], x->shape[1], start));
        grad_ratios[0] += h == hkv;
        grad_ratios[1] += h == 4 * hkv;
        grad_ratios[2] += h == 8 * hkv;
        printf("  %-40s %d:1  max rel err %.2e (y, dx, dW; reference + flash)\n", fx->name,
               (int)(h / hkv), worst);
    }
    ra_context_destroy(ctx);
    ra_layer_destroy(layer);
    free(x32);
    free(dy32);
    for (int i = 0; i < 4; i++) free(w32[i]);
}

static void test_layer_grads(void)
{
    memset(grad_ratios, 0, sizeof grad_ratios);
    for_each_fixture("layergrad_", check_layer_grad);
    CHECK(grad_ratios[0] && grad_ratios[1] && grad_ratios[2],
          "the gradient fixtures must cover GQA 1:1, 4:1 and 8:1 (%d, %d, %d)", grad_ratios[0],
          grad_ratios[1], grad_ratios[2]);
}

/* The cases that reach the SIMD kernels, run on every path (harness.h); the
 * others (tables, reader, repeat_kv) run once. */
static void simd_cases(void)
{
    RUN(test_rope);
    RUN(test_attention);
    RUN(test_attention_core_grad);
    RUN(test_rotary);
    RUN(test_layer_grads);
}

int main(int argc, char **argv)
{
    if (argc > 1) fixture_dir = argv[1];
    RUN(test_list_fixtures);
    RUN(test_reader);
    RUN(test_reader_uniform);
    RUN(test_fixture_names);
    RUN(test_tables);
    RUN(test_repeat_kv);
    RUN(test_rope_types);
    ra_test_each_isa(simd_cases);
    for (int i = 0; i < fixture_count; i++) free(fixture_names[i]);
    free(fixture_names);
    return ra_test_summary("fixtures");
}
