/*
 * test_rope2d.c — 2-D (axial) RoPE of vision encoders: the rotation and its
 * tables against transformers' own code in float64 (Pixtral, Qwen2-VL,
 * Qwen2.5-VL, Llama 4: tests/fixtures/rope2d, made by
 * tests/fixtures/make_rope2d_fixtures.py), the inverse as the transpose,
 * and the refusals: configs the layout cannot split or does not implement,
 * positions of the wrong kind or out of range, the layer and the KV cache;
 * libropeattn_hf's ra_hf_vision_rope_config on vision_configs of each kind
 * and the keys it refuses.
 * The bit-exact fast path against the reference on many shapes is
 * rope_exact.h's test_axial_fast_matches_reference (test_rope.c, every ISA).
 *
 * Tolerances against the float64 fixtures (inputs in [-1, 1)):
 *   tables 1e-7: each entry is cos or sin of a double angle rounded once to
 *     float32 (at most 2^-25 ~ 3e-8 off), the angle itself within 1e-15;
 *   rotation 1e-6: two float32 products and a sum, each rounded (3 roundings
 *     of values below 2 in magnitude: 3 * 2^-23 ~ 3.6e-7), on top of the
 *     tables' error times |x| < 1.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "rope_internal.h"
#include "ropeattn.h"
#include "ropeattn_hf.h"

static const char *const cases[] = {"pixtral_d32", "qwen2_vl_d80", "qwen2_5_vl_d48", "llama4_d88"};
static const char *fixture_dir = "tests/fixtures/rope2d";

static double scalar(const fx_file *f, const char *name)
{
    const fx_tensor *t = fx_find(f, name);
    CHECK(t != NULL, "no %s", name);
    if (!t) return 0;
    return t->f64 ? t->f64[0] : (double)t->i64[0];
}

static double worst_diff(const float *a, const double *b, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

/* One fixture: the rope its model's config gives, its tables and its
 * rotation (fast and reference, f32) against transformers in float64,
 * and the inverse taking y back to x. */
static void check_case(const char *name)
{
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s.bin", fixture_dir, name);
    fx_file f;
    ra_hf_config *hf = NULL;
    int loaded = fx_load(&f, path, err, sizeof err) == 0;
    CHECK(loaded, "%s", err);
    if (!loaded) return;
    const fx_tensor *x64 = fx_find(&f, "x"), *y64 = fx_find(&f, "y");
    const fx_tensor *pos = fx_find(&f, "positions"), *c64 = fx_find(&f, "cos"),
                    *s64 = fx_find(&f, "sin");
    CHECK(x64 && y64 && pos && c64 && s64 && x64->ndim == 3 && pos->ndim == 2 &&
              pos->shape[1] == 2 && y64->count == x64->count,
          "%s: tensors", name);
    if (!(x64 && y64 && pos && c64 && s64 && x64->ndim == 3 && pos->ndim == 2)) {
        fx_free(&f);
        return;
    }
    const int64_t n = x64->shape[0], heads = x64->shape[1], d = x64->shape[2];
    CHECK(scalar(&f, "head_dim") == (double)d && pos->shape[0] == n, "%s: shapes", name);

    ra_rope_config cfg = ra_rope_config_hf(d);
    cfg.layout = scalar(&f, "interleaved") != 0 ? RA_LAYOUT_INTERLEAVED : RA_LAYOUT_HALF;
    cfg.theta = scalar(&f, "theta");
    cfg.axial = (ra_rope_axial)(int)scalar(&f, "kind");
    cfg.axial_column_first = scalar(&f, "column_first") != 0;
    cfg.table_size = 3; /* most rows beyond the table: on the fly */
    /* the same rope from transformers' config, through libropeattn_hf */
    ra_rope_config from_hf;
    snprintf(path, sizeof path, "%s/%s.json", fixture_dir, name);
    CHECK(ra_hf_config_open(&hf, path) == RA_OK &&
              ra_hf_vision_rope_config(hf, &from_hf) == RA_OK,
          "%s: %s", path, ra_hf_last_error());
    if (hf) {
        CHECK(from_hf.head_dim == cfg.head_dim && from_hf.theta == cfg.theta &&
                  from_hf.layout == cfg.layout && from_hf.axial == cfg.axial &&
                  from_hf.axial_column_first == cfg.axial_column_first,
              "%s: ra_hf_vision_rope_config gives another rope", path);
        ra_hf_config_close(hf);
    }
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &cfg) == RA_OK, "%s: create: %s", name, ra_last_error());

    const int64_t half = d / 2, total = n * heads * d;
    float *ct = malloc(sizeof(float) * n * half), *st = malloc(sizeof(float) * n * half);
    float *x = malloc(sizeof(float) * total), *y = malloc(sizeof(float) * total);
    float *yr = malloc(sizeof(float) * total), *back = malloc(sizeof(float) * total);
    CHECK(ra_rope_table_axial(rope, ct, st, pos->i64, n) == RA_OK, "%s: table", name);
    double tc = fmax(worst_diff(ct, c64->f64, n * half), worst_diff(st, s64->f64, n * half));
    CHECK(tc <= 1e-7, "%s: tables differ from transformers' by %.3g", name, tc);

    for (int64_t i = 0; i < total; i++) x[i] = (float)x64->f64[i]; /* exact */
    ra_tensor tx = ra_tensor_4d(x, RA_F32, 1, n, heads, d), ty = ra_tensor_4d(y, RA_F32, 1, n, heads, d);
    ra_tensor tr = ra_tensor_4d(yr, RA_F32, 1, n, heads, d);
    ra_tensor tb = ra_tensor_4d(back, RA_F32, 1, n, heads, d);
    ra_positions p = ra_positions_start(0);
    p.axial_ids = pos->i64;
    CHECK(ra_rope_apply(NULL, rope, &ty, &tx, &p, RA_FORWARD) == RA_OK, "%s: apply: %s", name,
          ra_last_error());
    CHECK(ra_rope_apply_reference(rope, &tr, &tx, &p, RA_FORWARD) == RA_OK, "%s: reference",
          name);
    double e = worst_diff(y, y64->f64, total), er = worst_diff(yr, y64->f64, total);
    CHECK(e <= 1e-6 && er <= 1e-6, "%s: rotation differs from transformers' by %.3g (fast), "
          "%.3g (reference)", name, e, er);
    CHECK(memcmp(y, yr, sizeof(float) * total) == 0, "%s: fast != reference", name);
    /* RA_INVERSE is R^T: back to x within the float32 rotations' error */
    CHECK(ra_rope_apply(NULL, rope, &tb, &ty, &p, RA_INVERSE) == RA_OK, "%s: inverse", name);
    double eb = 0;
    for (int64_t i = 0; i < total; i++) eb = fmax(eb, fabs((double)back[i] - x[i]));
    CHECK(eb <= 2e-6, "%s: inverse(forward(x)) is %.3g from x", name, eb);
    if (ra_test_isa == RA_ISA_BASE) /* once: the same numbers on every path */
        printf("  %s: N %lld, H %lld, D %lld: tables %.2g, rotation %.2g from transformers in "
           "float64\n", name, (long long)n, (long long)heads, (long long)d, tc, e);
    free(ct), free(st), free(x), free(y), free(yr), free(back);
    ra_rope_destroy(rope);
    fx_free(&f);
}

static void test_fixtures(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(cases[i]);
}

/* The frequencies each split gives pair i, and their axes, as the header
 * draws them: d = 16, f_k = 100^(-2k/16). */
static void test_frequencies(void)
{
    for (int kind = RA_AXIAL_ALTERNATE; kind <= RA_AXIAL_SHARED; kind++) {
        ra_rope_config c = ra_rope_config_hf(16);
        c.theta = 100.0;
        c.axial = (ra_rope_axial)kind;
        ra_rope *rope;
        CHECK(ra_rope_create(&rope, &c) == RA_OK, "create");
        double f[8];
        ra_rope_inverse_frequencies(rope, f);
        for (int i = 0; i < 8; i++) {
            int k = i < 4 ? 2 * i : 2 * (i - 4) + (kind == RA_AXIAL_ALTERNATE);
            double want = 1.0 / pow(100.0, (double)(2 * k) / 16.0);
            CHECK(f[i] == want, "kind %d pair %d: %g, not f_%d = %g", kind, i, f[i], k, want);
        }
        /* (row 3, column 0): only the row's pairs turn; swapped, the others */
        int64_t ids[4] = {3, 0, 0, 3};
        float cs[16], sn[16];
        CHECK(ra_rope_table_axial(rope, cs, sn, ids, 2) == RA_OK, "table");
        for (int i = 0; i < 8; i++) {
            CHECK((sn[i] != 0) == (i < 4) && (sn[8 + i] != 0) == (i >= 4),
                  "kind %d pair %d: the wrong axis turns", kind, i);
        }
        ra_rope_destroy(rope);
    }
}

static int detail_has(const char *text)
{
    const char *e = ra_last_error();
    return e && strstr(e, text) != NULL;
}

static ra_status create_with(ra_rope_config c)
{
    ra_rope *rope = NULL;
    ra_status st = ra_rope_create(&rope, &c);
    ra_rope_destroy(rope);
    return st;
}

/* Configs the layout cannot split or does not implement. */
static void test_config_refused(void)
{
    ra_rope_config c = ra_rope_config_hf(34); /* 17 pairs: no even split */
    c.axial = RA_AXIAL_SHARED;
    CHECK(create_with(c) == RA_ERR_HEAD_DIM && detail_has("rotary_dim 34"), "D 34: %s",
          ra_last_error());
    c.rotary_dim = 30;
    CHECK(create_with(c) == RA_ERR_HEAD_DIM && detail_has("rotary_dim 30"), "rotary 30");
    c.rotary_dim = 32; /* partial: fine */
    CHECK(create_with(c) == RA_OK, "rotary 32: %s", ra_last_error());
    c = ra_rope_config_hf(6);
    c.axial = RA_AXIAL_ALTERNATE;
    CHECK(create_with(c) == RA_ERR_HEAD_DIM, "D 6");
    c = ra_rope_config_hf(16);
    c.axial = (ra_rope_axial)3;
    CHECK(create_with(c) == RA_ERR_ARGUMENT && detail_has("axial 3"), "axial 3");
    c.axial = RA_AXIAL_NONE;
    c.axial_column_first = 1;
    CHECK(create_with(c) == RA_ERR_ARGUMENT && detail_has("axial_column_first"), "column first");
    c = ra_rope_config_hf(16);
    c.axial = RA_AXIAL_SHARED;
    c.type = RA_ROPE_LINEAR;
    c.factor = 2;
    CHECK(create_with(c) == RA_ERR_UNSUPPORTED && detail_has("type"), "linear");
    c = ra_rope_config_hf(16);
    c.axial = RA_AXIAL_SHARED;
    c.rotating_pairs = 2;
    CHECK(create_with(c) == RA_ERR_UNSUPPORTED && detail_has("rotating_pairs"), "rotating");
    c = ra_rope_config_hf(16);
    c.axial = RA_AXIAL_SHARED;
    c.mrope_section[0] = 8;
    CHECK(create_with(c) == RA_ERR_ARGUMENT && detail_has("mrope_section"), "sections");
}

/* Positions of the wrong kind or out of range, on every entry point. */
static void test_positions_refused(void)
{
    enum { N = 4, H = 2, D = 8 };
    ra_rope_config c = ra_rope_config_hf(D);
    c.axial = RA_AXIAL_ALTERNATE;
    ra_rope *rope = NULL, *plain = NULL;
    CHECK(ra_rope_create(&rope, &c) == RA_OK && ra_rope_create(&plain, &(ra_rope_config){
                                                   .struct_size = sizeof(ra_rope_config),
                                                   .layout = RA_LAYOUT_HALF, .head_dim = D,
                                                   .theta = 1e4}) == RA_OK,
          "create");
    float x[N * H * D], cs[N * D / 2], sn[N * D / 2];
    ra_test_fill(x, N * H * D, 1);
    ra_tensor t = ra_tensor_4d(x, RA_F32, 1, N, H, D);
    int64_t ids[2 * N] = {0, 0, 1, 2, 3, 4, 5, 6}, one[N] = {0, 1, 2, 3};
    ra_positions p = ra_positions_start(0);
    CHECK(ra_rope_apply(NULL, rope, &t, &t, &p, RA_FORWARD) == RA_ERR_ARGUMENT &&
              detail_has("axial_ids"), "1-D start with a 2-D rope: %s", ra_last_error());
    CHECK(ra_rope_apply(NULL, rope, &t, &t, NULL, RA_FORWARD) == RA_ERR_ARGUMENT, "NULL");
    CHECK(ra_rope_apply_f32(NULL, rope, x, 1, N, H, 0) == RA_ERR_ARGUMENT, "apply_f32");
    p.axial_ids = ids;
    CHECK(ra_rope_apply(NULL, plain, &t, &t, &p, RA_FORWARD) == RA_ERR_ARGUMENT &&
              detail_has("not 2-D"), "2-D ids with a plain rope");
    p.ids = one;
    CHECK(ra_rope_apply(NULL, rope, &t, &t, &p, RA_FORWARD) == RA_ERR_ARGUMENT &&
              detail_has("both axial_ids and ids"), "both");
    p.ids = NULL;
    ids[5] = -1;
    CHECK(ra_rope_apply(NULL, rope, &t, &t, &p, RA_FORWARD) == RA_ERR_POSITION &&
              detail_has("axial_ids[2, column] is -1"), "negative: %s", ra_last_error());
    ids[5] = RA_MAX_POSITION + 1;
    ids[6] = RA_MAX_POSITION;
    CHECK(ra_rope_apply_reference(rope, &t, &t, &p, RA_FORWARD) == RA_ERR_POSITION &&
              detail_has("axial_ids[2, column]"), "beyond 2^32");
    CHECK(ra_rope_table_axial(rope, cs, sn, ids, N) == RA_ERR_POSITION &&
              detail_has("positions[2, 1]"), "table beyond 2^32");
    ids[5] = 7;
    CHECK(ra_rope_apply(NULL, rope, &t, &t, &p, RA_FORWARD) == RA_OK, "2^32 is a position");
    CHECK(ra_rope_table(rope, cs, sn, one, N) == RA_ERR_ARGUMENT, "1-D table of a 2-D rope");
    CHECK(ra_rope_table_mrope(rope, cs, sn, one, 1) == RA_ERR_ARGUMENT, "3-D table");
    CHECK(ra_rope_table_axial(plain, cs, sn, ids, N) == RA_ERR_ARGUMENT, "2-D table, plain");
    int64_t three[3 * N] = {0};
    ra_positions p3 = ra_positions_start(0);
    p3.mrope_ids = three;
    CHECK(ra_rope_apply(NULL, rope, &t, &t, &p3, RA_FORWARD) == RA_ERR_ARGUMENT, "3-D ids");

    /* the KV cache: not for a 2-D rope */
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, 1, N, H, D, RA_F32) == RA_OK, "cache");
    float k[N * H * D], v[N * H * D];
    memcpy(k, x, sizeof k);
    memcpy(v, x, sizeof v);
    ra_tensor tk = ra_tensor_4d(k, RA_F32, 1, N, H, D), tv = ra_tensor_4d(v, RA_F32, 1, N, H, D);
    CHECK(ra_kv_cache_append(NULL, cache, rope, &t, &tk, &tv, &p, NULL) == RA_ERR_UNSUPPORTED &&
              detail_has("2-D"), "cache: %s", ra_last_error());
    ra_kv_cache_destroy(cache);
    /* the layer: tests/test_layer_axial.c */
    ra_rope_destroy(rope);
    ra_rope_destroy(plain);
}

/* ra_hf_vision_rope_config on config.json's of each kind, as their releases
 * write them (trimmed), and the keys it must refuse. */
static ra_status vision_rope(const char *json, ra_rope_config *out)
{
    ra_hf_config *config;
    ra_status st = ra_hf_config_parse(&config, json, strlen(json));
    CHECK(st == RA_OK, "parse %s: %s", json, ra_hf_last_error());
    if (st != RA_OK) return st;
    st = ra_hf_vision_rope_config(config, out);
    ra_hf_config_close(config);
    return st;
}

static int hf_detail_has(const char *text)
{
    const char *e = ra_hf_last_error();
    return e && strstr(e, text) != NULL;
}

static void test_hf_vision(void)
{
    static const struct {
        const char *json;
        int64_t head_dim;
        double theta;
        ra_rope_axial axial;
        int column_first;
        ra_layout layout;
    } ok[] = {
        /* mistral-community/pixtral-12b (Llava) */
        {"{\"model_type\": \"llava\", \"text_config\": {\"model_type\": \"mistral\"}, "
         "\"vision_config\": {\"head_dim\": 64, \"hidden_size\": 1024, \"image_size\": 1024, "
         "\"model_type\": \"pixtral\", \"num_attention_heads\": 16, \"patch_size\": 16, "
         "\"rope_theta\": 10000.0}}", 64, 1e4, RA_AXIAL_ALTERNATE, 0, RA_LAYOUT_HALF},
        /* Qwen2-VL-7B-Instruct: no vision model_type, embed_dim / num_heads */
        {"{\"model_type\": \"qwen2_vl\", \"vision_config\": {\"depth\": 32, \"embed_dim\": "
         "1280, \"hidden_size\": 3584, \"num_heads\": 16, \"spatial_merge_size\": 2}}",
         80, 1e4, RA_AXIAL_SHARED, 0, RA_LAYOUT_HALF},
        /* Qwen2.5-VL-7B-Instruct: hidden_size / num_heads; transformers 5's save */
        {"{\"model_type\": \"qwen2_5_vl\", \"vision_config\": {\"hidden_size\": 1280, "
         "\"num_heads\": 16, \"out_hidden_size\": 3584}}", 80, 1e4, RA_AXIAL_SHARED, 0,
         RA_LAYOUT_HALF},
        {"{\"model_type\": \"qwen2_5_vl\", \"vision_config\": {\"model_type\": "
         "\"qwen2_5_vl_vision\", \"hidden_size\": 1280, \"num_heads\": 16, "
         "\"rope_parameters\": {\"rope_type\": \"axial\", \"rope_theta\": 20000.0}}}", 80, 2e4,
         RA_AXIAL_SHARED, 0, RA_LAYOUT_HALF},
        /* Llama-4-Scout-17B-16E */
        {"{\"model_type\": \"llama4\", \"text_config\": {\"model_type\": \"llama4_text\"}, "
         "\"vision_config\": {\"hidden_size\": 1408, \"image_size\": 336, \"model_type\": "
         "\"llama4_vision_model\", \"num_attention_heads\": 16, \"patch_size\": 14, "
         "\"rope_theta\": 10000}}", 88, 1e4, RA_AXIAL_SHARED, 1, RA_LAYOUT_INTERLEAVED},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ra_rope_config c;
        memset(&c, 0, sizeof c);
        CHECK(vision_rope(ok[i].json, &c) == RA_OK, "case %zu: %s", i, ra_hf_last_error());
        CHECK(c.head_dim == ok[i].head_dim && c.theta == ok[i].theta && c.axial == ok[i].axial &&
                  c.axial_column_first == ok[i].column_first && c.layout == ok[i].layout &&
                  c.type == RA_ROPE_DEFAULT && c.rotary_dim == 0,
              "case %zu: head_dim %lld theta %g axial %d column_first %d layout %d", i,
              (long long)c.head_dim, c.theta, (int)c.axial, c.axial_column_first, (int)c.layout);
        ra_rope *rope;
        CHECK(ra_rope_create(&rope, &c) == RA_OK, "case %zu: create", i);
        ra_rope_destroy(rope);
    }
    static const struct {
        const char *json;
        ra_status status;
        const char *names;
    } bad[] = {
        {"{\"model_type\": \"mistral\"}", RA_ERR_NOT_FOUND, "no \"vision_config\""},
        {"{\"model_type\": \"llava\", \"vision_config\": {\"hidden_size\": 64}}",
         RA_ERR_UNSUPPORTED, "\"llava\""},
        {"{\"vision_config\": {\"model_type\": \"siglip_vision_model\"}}", RA_ERR_UNSUPPORTED,
         "siglip_vision_model"},
        {"{\"vision_config\": {\"model_type\": \"pixtral\", \"rope_parameters\": "
         "{\"rope_type\": \"linear\", \"factor\": 2.0}}}", RA_ERR_UNSUPPORTED, "linear"},
        {"{\"vision_config\": {\"model_type\": \"pixtral\", \"rope_parameters\": "
         "{\"rope_type\": \"axial\", \"factor\": 2.0}}}", RA_ERR_UNSUPPORTED,
         "rope_parameters.factor"},
        {"{\"vision_config\": {\"model_type\": \"llama4_vision_model\", \"rope_parameters\": "
         "{\"rope_type\": \"axial\"}}}", RA_ERR_UNSUPPORTED, "\"axial\""},
        {"{\"vision_config\": {\"model_type\": \"pixtral\", \"head_dim\": 32}}",
         RA_ERR_UNSUPPORTED, "head_dim\" 32"},
        {"{\"vision_config\": {\"model_type\": \"pixtral\", \"partial_rotary_factor\": 0.5}}",
         RA_ERR_UNSUPPORTED, "partial_rotary_factor"},
        {"{\"vision_config\": {\"model_type\": \"pixtral\", \"hidden_size\": 96, "
         "\"num_attention_heads\": 16}}", RA_ERR_HEAD_DIM, "head_dim 6"},
        {"{\"vision_config\": {\"model_type\": \"pixtral\", \"hidden_size\": 100, "
         "\"num_attention_heads\": 16}}", RA_ERR_SHAPE, "hidden_size 100"},
        {"{\"vision_config\": {\"model_type\": \"qwen2_vl\", \"num_heads\": 16, "
         "\"num_attention_heads\": 8}}", RA_ERR_FORMAT, "num_attention_heads 8"},
        {"{\"vision_config\": {\"model_type\": \"pixtral\", \"rope_theta\": -1}}",
         RA_ERR_FORMAT, "rope_theta"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ra_rope_config c;
        ra_status st = vision_rope(bad[i].json, &c);
        CHECK(st == bad[i].status && hf_detail_has(bad[i].names), "refusal %zu: %s: %s", i,
              ra_status_string(st), ra_hf_last_error());
    }
}

/* The cases that rotate, on every SIMD path. */
static void simd_cases(void)
{
    RUN(test_fixtures);
    RUN(test_positions_refused);
}

int main(int argc, char **argv)
{
    if (argc > 1) fixture_dir = argv[1];
    RUN(test_frequencies);
    RUN(test_config_refused);
    RUN(test_hf_vision);
    ra_test_each_isa(simd_cases);
    return ra_test_summary("rope2d");
}
