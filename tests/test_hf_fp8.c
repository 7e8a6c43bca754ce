/*
 * test_hf_fp8.c — block-FP8 checkpoints (DeepSeek-V3's release,
 * Qwen3-*-FP8), dequantized at load as transformers does (src/hf/fp8.c):
 * each value against a plain reference (the e4m3 code decoded from its
 * bits in double, one float32 product with its block's scale, rounded to
 * the config's torch_dtype by a nearest-even written here), edge blocks of
 * [3, 5] and [5, 5] over matrices that are not multiples of them,
 * subnormal codes, -0 and +-448; layers from FP8 files against the same
 * weights dequantized here and handed over by hand (Llama, Phi-3's fused
 * rows, latent attention), bit for bit; and every refusal, naming the key
 * or tensor.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hf/hf.h"
#include "io/io.h"
#include "ropeattn_hf.h"

static char folder[] = "/tmp/ropeattn-fp8-XXXXXX";

static const char *path_of(const char *name)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    return path;
}

static uint32_t next(uint32_t *seed)
{
    *seed = *seed * 1664525u + 1013904223u;
    return *seed >> 8;
}

/* ---- the reference ------------------------------------------------------ */

/* The value of e4m3 code c from its fields: sign, exponent (bias 7), 3
 * mantissa bits; exponent 0: subnormal m 2^-9. */
static double e4m3_value(uint8_t c)
{
    int e = (c >> 3) & 15, m = c & 7;
    double v = e == 0 ? m * ldexp(1, -9) : (1 + m / 8.0) * ldexp(1, e - 7);
    return c & 0x80 ? -v : v;
}

/* f rounded to nearest among the floats whose low `drop` bits are zero
 * (bf16: 16), ties to the one whose kept part is even; by comparing
 * distances in double. */
static float round_bits(float f, int drop)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t lo = u & ~((1u << drop) - 1), hi = lo + (1u << drop);
    float a, b;
    memcpy(&a, &lo, 4);
    memcpy(&b, &hi, 4);
    double da = fabs((double)f - a), db = fabs((double)f - b);
    if (da < db || (da == db && ((lo >> drop) & 1) == 0)) return a;
    return b;
}

/* The reference weight: e4m3(code) * scale in float32, rounded to dtype. */
static float reference(uint8_t code, float scale, ra_st_dtype dtype)
{
    float v = (float)e4m3_value(code) * scale; /* exact operand, one float32 product */
    if (dtype == RA_ST_BF16) return round_bits(v, 16);
    if (dtype == RA_ST_F16) { /* a multiple of f16's quantum at |v| (2^-24 below 2^-14) */
        int e;
        if (v == 0) return v;
        frexp(fabs((double)v), &e);
        int quantum = e - 1 < -14 ? -24 : e - 1 - 10;
        return (float)ldexp(rint(ldexp((double)v, -quantum)), quantum); /* rint: ties to even */
    }
    return v;
}

/* ---- writing checkpoints ------------------------------------------------ */

/* A quantized matrix: codes [rows, cols], scales [ceil(rows/bo), ceil(cols/bi)]. */
typedef struct qmatrix {
    int64_t rows, cols, bo, bi;
    uint8_t *codes;
    float *scales;
} qmatrix;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Random codes (no NaN) with the special ones at the front, and scales
 * around 2^-7 .. 2^-3 with full mantissas. */
static qmatrix make_q(int64_t rows, int64_t cols, int64_t bo, int64_t bi, uint32_t seed)
{
    qmatrix m = {rows, cols, bo, bi, malloc((size_t)(rows * cols)),
                 malloc((size_t)(cdiv(rows, bo) * cdiv(cols, bi)) * sizeof(float))};
    static const uint8_t special[] = {0x00, 0x80, 0x01, 0x81, 0x07, 0x08, 0x7e, 0xfe, 0x77};
    for (int64_t i = 0; i < rows * cols; i++) {
        uint8_t c = (uint8_t)next(&seed);
        if ((c & 0x7f) == 0x7f) c ^= 1;
        m.codes[i] = i < (int64_t)sizeof special ? special[i] : c;
    }
    for (int64_t i = 0; i < cdiv(rows, bo) * cdiv(cols, bi); i++)
        m.scales[i] = ldexpf(1.0f + (float)(next(&seed) & 0xffff) / 65536.0f,
                             -7 + (int)(next(&seed) % 5));
    return m;
}

static void free_q(qmatrix *m)
{
    free(m->codes);
    free(m->scales);
}

/* m dequantized by the reference, as float32 values. */
static void dequant_ref(const qmatrix *m, ra_st_dtype dtype, float *out)
{
    for (int64_t r = 0; r < m->rows; r++)
        for (int64_t c = 0; c < m->cols; c++)
            out[r * m->cols + c] = reference(m->codes[r * m->cols + c],
                                             m->scales[(r / m->bo) * cdiv(m->cols, m->bi) +
                                                       c / m->bi], dtype);
}

static ra_st_tensor raw(const char *name, ra_st_dtype dtype, const void *data, int64_t rows,
                        int64_t cols)
{
    ra_st_tensor t = {.name = name, .dtype = dtype, .ndim = cols ? 2 : 1,
                      .shape = {rows, cols}, .count = rows * (cols ? cols : 1), .data = data};
    t.nbytes = (size_t)t.count * ra_st_dtype_size(dtype);
    return t;
}

/* Appends name's codes and its scale ("<name>_scale_inv") to t. */
static int add_q(ra_st_tensor *t, int n, char names[][112], const char *name, const qmatrix *m)
{
    snprintf(names[n], 112, "%s", name);
    snprintf(names[n + 1], 112, "%s_scale_inv", name);
    t[n] = raw(names[n], RA_ST_F8_E4M3, m->codes, m->rows, m->cols);
    t[n + 1] = raw(names[n + 1], RA_ST_F32, m->scales, cdiv(m->rows, m->bo), cdiv(m->cols, m->bi));
    return n + 2;
}

static int write_file(const char *file, const ra_st_tensor *t, int n)
{
    char msg[256];
    ra_status s = ra_safetensors_write(path_of(file), t, n, msg, sizeof msg);
    CHECK(s == RA_OK, "%s", msg);
    return s == RA_OK;
}

/* The layer of the checkpoint file under config text (NULL: none). */
static ra_status open_layer(const char *file, const char *config_text, int64_t layer_no,
                            ra_hf_layer **layer)
{
    ra_hf_checkpoint *ckpt = NULL;
    ra_hf_config *config = NULL;
    *layer = NULL;
    ra_status s = ra_hf_checkpoint_open(&ckpt, path_of(file));
    if (s == RA_OK && config_text) s = ra_hf_config_parse(&config, config_text, strlen(config_text));
    ra_hf_options o = ra_hf_options_init();
    o.layer = layer_no;
    o.n_tokens = 5;
    if (s == RA_OK) s = ra_hf_layer_create(layer, ckpt, config, &o);
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);
    return s;
}

static void expect(ra_status got, ra_status want, const char *needle, const char *what)
{
    CHECK(got == want, "%s: status %d (%s), want %d", what, (int)got, ra_hf_last_error(),
          (int)want);
    CHECK(strstr(ra_hf_last_error(), needle) != NULL, "%s: \"%s\" does not name \"%s\"", what,
          ra_hf_last_error(), needle);
}

/* ---- dequantized values ------------------------------------------------- */

/* hf_fp8_dequantize against the reference, each value, for block sizes
 * that do and do not divide the matrix, into each dtype. */
static void test_values(void)
{
    static const int64_t shapes[][4] = {{7, 11, 3, 5}, {12, 12, 5, 5}, {6, 10, 3, 5},
                                        {130, 260, 128, 128}, {4, 9, 100, 100}};
    static const ra_st_dtype dtypes[] = {RA_ST_BF16, RA_ST_F16, RA_ST_F32};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (size_t d = 0; d < 3; d++) {
            const int64_t *sh = shapes[k];
            qmatrix m = make_q(sh[0], sh[1], sh[2], sh[3], (uint32_t)(k * 7 + d));
            ra_hf_quant q = {.present = 1, .block_out = sh[2], .block_in = sh[3],
                             .dtype = dtypes[d]};
            ra_st_tensor w = raw("w.weight", RA_ST_F8_E4M3, m.codes, m.rows, m.cols);
            ra_st_tensor s = raw("w.weight_scale_inv", RA_ST_F32, m.scales, cdiv(m.rows, m.bo),
                                 cdiv(m.cols, m.bi));
            int64_t n = m.rows * m.cols;
            float *want = malloc((size_t)n * sizeof(float)), *got = malloc((size_t)n * 4);
            uint16_t *half = malloc((size_t)n * 2);
            dequant_ref(&m, dtypes[d], want);
            CHECK(hf_fp8_dequantize(&w, &s, &q, "x", RA_F32, got) == RA_OK, "%s",
                  ra_hf_last_error());
            int64_t bad = -1;
            for (int64_t i = 0; i < n && bad < 0; i++)
                if (memcmp(&got[i], &want[i], 4) != 0) bad = i;
            CHECK(bad < 0, "[%lld x %lld] in [%lld, %lld] blocks, %s: element %lld is %a, want %a",
                  (long long)sh[0], (long long)sh[1], (long long)sh[2], (long long)sh[3],
                  ra_st_dtype_name(dtypes[d]), (long long)bad, (double)got[bad < 0 ? 0 : bad],
                  (double)want[bad < 0 ? 0 : bad]);
            /* the specials: 0, -0 (its sign kept), subnormals, +-448 times the first scale */
            CHECK(got[0] == 0 && !signbit(got[0]) && got[1] == 0 && signbit(got[1]), "+-0");
            const float *first = m.scales; /* row 0's blocks */
            if (dtypes[d] == RA_ST_F32)
                CHECK(got[6] == 448.0f * first[6 / m.bi] && got[7] == -448.0f * first[7 / m.bi] &&
                          got[2] == 0x1p-9f * first[2 / m.bi],
                      "448 %a, -448 %a, 2^-9 %a", (double)got[6], (double)got[7], (double)got[2]);
            if (dtypes[d] != RA_ST_F32) { /* the 16-bit values, as the layer stores them */
                ra_dtype to = dtypes[d] == RA_ST_BF16 ? RA_BF16 : RA_F16;
                CHECK(hf_fp8_dequantize(&w, &s, &q, "x", to, half) == RA_OK, "16-bit");
                for (int64_t i = 0; i < n; i++) {
                    float v = to == RA_BF16 ? ra_bf16_to_f32(half[i]) : ra_f16_to_f32(half[i]);
                    if (memcmp(&v, &want[i], 4) != 0) {
                        CHECK(0, "16-bit element %lld", (long long)i);
                        break;
                    }
                }
            }
            free(want);
            free(got);
            free(half);
            free_q(&m);
        }
}

/* Every e4m3 code against its decoding in double; NaN codes refused. */
static void test_codes(void)
{
    uint8_t codes[256];
    float scale = 1.0f, got[256];
    for (int c = 0; c < 256; c++) codes[c] = (uint8_t)c;
    ra_hf_quant q = {.present = 1, .block_out = 1, .block_in = 256, .dtype = RA_ST_F32};
    ra_st_tensor s = raw("w.weight_scale_inv", RA_ST_F32, &scale, 1, 1);
    for (int c = 0; c < 256; c++) {
        ra_st_tensor w = raw("w.weight", RA_ST_F8_E4M3, &codes[c], 1, 1);
        ra_status st = hf_fp8_dequantize(&w, &s, &q, "x", RA_F32, &got[c]);
        if ((c & 0x7f) == 0x7f)
            expect(st, RA_ERR_FORMAT, "NaN code", "a NaN code");
        else
            CHECK(st == RA_OK && got[c] == e4m3_value((uint8_t)c) &&
                      !!signbit(got[c]) == !!(c & 0x80),
                  "code 0x%02x: %a, want %a", c, (double)got[c], e4m3_value((uint8_t)c));
    }
    CHECK(got[0x7e] == 448 && got[0xfe] == -448 && got[0x01] == 0x1p-9f, "extremes");
}

/* ---- layers from FP8 files ------------------------------------------------ */

enum { DIM = 12, H = 2, HKV = 1, D = 6, B = 2, S = 5 };

/* forward of a and b on the same input: equal bits. */
static void same_outputs(const ra_layer *a, const ra_layer *b, int dim, const char *what)
{
    float x[B * S * 16], y1[B * S * 16], y2[B * S * 16];
    uint32_t seed = 9;
    for (int i = 0; i < B * S * dim; i++) x[i] = (float)(next(&seed) & 0xffff) / 65536.0f - 0.5f;
    for (int64_t s = 1; s <= S; s += S - 1) {
        CHECK(ra_layer_forward(NULL, a, y1, x, B, s, NULL, NULL) == RA_OK, "%s", ra_last_error());
        CHECK(ra_layer_forward(NULL, b, y2, x, B, s, NULL, NULL) == RA_OK, "%s", ra_last_error());
        CHECK(memcmp(y1, y2, (size_t)(B * s * dim) * sizeof(float)) == 0,
              "%s, S %lld: the FP8 checkpoint's layer differs from the dequantized by hand", what,
              (long long)s);
    }
}

#define LLAMA_FP8(dtype, block)                                                              \
    "{\"model_type\": \"llama\", \"hidden_size\": 12, \"num_attention_heads\": 2, "          \
    "\"num_key_value_heads\": 1, \"head_dim\": 6, \"rope_theta\": 10000, "                   \
    "\"torch_dtype\": \"" dtype "\", \"quantization_config\": {\"quant_method\": \"fp8\", "  \
    "\"fmt\": \"e4m3\", \"activation_scheme\": \"dynamic\", \"weight_block_size\": " block "}}"

/* The Llama layer by hand from float32 weights rounded to dtype's values. */
static ra_layer *llama_by_hand(const float *const w[4], ra_dtype dtype)
{
    ra_rope_config rope = ra_rope_config_default(D);
    rope.layout = RA_LAYOUT_HALF;
    rope.table_size = S;
    ra_layer_config c = ra_layer_config_init();
    c.dim = DIM, c.n_heads = H, c.n_kv_heads = HKV, c.head_dim = D, c.rope = &rope;
    ra_layer_weights lw = ra_layer_weights_init();
    static uint16_t half[4][DIM * DIM];
    const int64_t n[4] = {H * D * DIM, HKV * D * DIM, HKV * D * DIM, DIM * H * D};
    const float *p[4] = {w[0], w[1], w[2], w[3]};
    if (dtype != RA_F32)
        for (int i = 0; i < 4; i++) {
            ra_convert(half[i], dtype, w[i], RA_F32, n[i]); /* exact: already dtype's values */
            p[i] = (const float *)half[i];
        }
    lw.wq = p[0], lw.wk = p[1], lw.wv = p[2], lw.wo = p[3], lw.dtype = dtype;
    ra_layer *layer = NULL;
    CHECK(ra_layer_create(&layer, &c, &lw) == RA_OK, "%s", ra_last_error());
    return layer;
}

/* q, k, v, o quantized in [5, 5] or [3, 5] blocks (neither divides every
 * matrix), separate or fused (Phi-3's qkv_proj: the blocks straddle q, k
 * and v), into bf16, f16 and f32: the same bits as the reference's
 * weights by hand. */
static void test_llama(void)
{
    static const char *const configs[] = {
        LLAMA_FP8("bfloat16", "[5, 5]"), LLAMA_FP8("float16", "[3, 5]"),
        LLAMA_FP8("float32", "[5, 5]"), LLAMA_FP8("bfloat16", "[128, 128]")};
    static const ra_st_dtype st[] = {RA_ST_BF16, RA_ST_F16, RA_ST_F32, RA_ST_BF16};
    static const int64_t bo[] = {5, 3, 5, 128}, bi[] = {5, 5, 5, 128};
    for (int k = 0; k < 4; k++)
        for (int fused = 0; fused < 2; fused++) {
            qmatrix m[4];
            const int64_t rows[4] = {H * D, HKV * D, HKV * D, DIM};
            static float w[4][DIM * DIM], qkv_ref[(H + 2 * HKV) * D * DIM];
            char names[8][112];
            ra_st_tensor t[8];
            int n = 0;
            if (fused) {
                qmatrix f = make_q((H + 2 * HKV) * D, DIM, bo[k], bi[k], 40u + (uint32_t)k);
                dequant_ref(&f, st[k], qkv_ref);
                memcpy(w[0], qkv_ref, sizeof(float) * H * D * DIM);
                memcpy(w[1], qkv_ref + H * D * DIM, sizeof(float) * HKV * D * DIM);
                memcpy(w[2], qkv_ref + (H + HKV) * D * DIM, sizeof(float) * HKV * D * DIM);
                m[0] = f;
                m[1].codes = m[2].codes = NULL, m[1].scales = m[2].scales = NULL;
                n = add_q(t, n, names, "model.layers.0.self_attn.qkv_proj.weight", &f);
            } else {
                static const char *const proj[] = {"q_proj", "k_proj", "v_proj"};
                for (int p = 0; p < 3; p++) {
                    char name[112];
                    m[p] = make_q(rows[p], DIM, bo[k], bi[k], 10u * (uint32_t)k + (uint32_t)p);
                    dequant_ref(&m[p], st[k], w[p]);
                    snprintf(name, sizeof name, "model.layers.0.self_attn.%s.weight", proj[p]);
                    n = add_q(t, n, names, name, &m[p]);
                }
            }
            m[3] = make_q(DIM, H * D, bo[k], bi[k], 99u + (uint32_t)k);
            dequant_ref(&m[3], st[k], w[3]);
            n = add_q(t, n, names, "model.layers.0.self_attn.o_proj.weight", &m[3]);
            ra_hf_layer *hf = NULL;
            if (write_file("llama_fp8.safetensors", t, n)) {
                const char *cfg = configs[k];
                if (fused) { /* Phi-3's names: model_type phi3 */
                    static char phi[512];
                    snprintf(phi, sizeof phi, "%s", configs[k]);
                    char *at = strstr(phi, "llama");
                    memcpy(at, "phi3\"", 5);
                    memmove(at + 5, at + 6, strlen(at + 6) + 1);
                    cfg = phi;
                }
                CHECK(open_layer("llama_fp8.safetensors", cfg, 0, &hf) == RA_OK, "%s: %s", cfg,
                      ra_hf_last_error());
            }
            const float *const ws[4] = {w[0], w[1], w[2], w[3]};
            ra_dtype dt = st[k] == RA_ST_BF16 ? RA_BF16 : st[k] == RA_ST_F16 ? RA_F16 : RA_F32;
            ra_layer *hand = llama_by_hand(ws, dt);
            if (hf && hand) {
                CHECK(ra_layer_get_config(ra_hf_layer_get(hf))->rope->layout == RA_LAYOUT_HALF,
                      "layout");
                same_outputs(ra_hf_layer_get(hf), hand, DIM, configs[k]);
                CHECK(ra_hf_layer_tensor_count(hf) == (fused ? 2 : 4), "tensors: %lld",
                      (long long)ra_hf_layer_tensor_count(hf));
            }
            ra_layer_destroy(hand);
            ra_hf_layer_destroy(hf);
            for (int p = 0; p < 4; p++)
                if (p == 0 || !fused || p == 3) free_q(&m[p]);
        }
}

/* Latent attention (DeepSeek-V3's FP8 release): q_a_proj, q_b_proj,
 * kv_a_proj_with_mqa, kv_b_proj and o_proj in F8 blocks, the norms BF16;
 * the layer (float32 weights) holds the bf16-rounded values. */
static void test_latent(void)
{
    enum { RQ = 12, R = 8, DR = 4, DN = 4, DV = 6, DQK = DN + DR };
    const int64_t shapes[5][2] = {{RQ, DIM}, {H * DQK, RQ}, {R + DR, DIM}, {H * (DN + DV), R},
                                  {DIM, H * DV}};
    static const char *const names5[] = {"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
                                         "kv_b_proj", "o_proj"};
    qmatrix m[5];
    static float w[5][H * (DN + DV) * R + DIM * DIM];
    char names[12][112];
    ra_st_tensor t[12];
    int n = 0;
    for (int i = 0; i < 5; i++) {
        char name[112];
        m[i] = make_q(shapes[i][0], shapes[i][1], 5, 3, 70u + (uint32_t)i);
        dequant_ref(&m[i], RA_ST_BF16, w[i]);
        snprintf(name, sizeof name, "model.layers.0.self_attn.%s.weight", names5[i]);
        n = add_q(t, n, names, name, &m[i]);
    }
    static uint16_t ones[RQ];
    float norm_f32[RQ];
    for (int i = 0; i < RQ; i++) {
        ones[i] = 0x3f80; /* 1.0 in bf16 */
        norm_f32[i] = 1.0f;
    }
    t[n++] = raw("model.layers.0.self_attn.q_a_layernorm.weight", RA_ST_BF16, ones, RQ, 0);
    t[n++] = raw("model.layers.0.self_attn.kv_a_layernorm.weight", RA_ST_BF16, ones, R, 0);
    static const char v3[] =
        "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 12, \"num_attention_heads\": 2, "
        "\"num_key_value_heads\": 2, \"kv_lora_rank\": 8, \"q_lora_rank\": 12, "
        "\"qk_nope_head_dim\": 4, \"qk_rope_head_dim\": 4, \"v_head_dim\": 6, "
        "\"rope_theta\": 10000, \"torch_dtype\": \"bfloat16\", \"quantization_config\": "
        "{\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": \"fp8\", "
        "\"weight_block_size\": [5, 3]}}";
    ra_hf_layer *hf = NULL;
    if (write_file("mla_fp8.safetensors", t, n))
        CHECK(open_layer("mla_fp8.safetensors", v3, 0, &hf) == RA_OK, "%s", ra_hf_last_error());
    ra_rope_config rope = ra_rope_config_default(DQK);
    rope.rotary_dim = DR, rope.table_size = S;
    ra_layer_config c = ra_layer_config_init();
    c.dim = DIM, c.n_heads = c.n_kv_heads = H, c.head_dim = DQK, c.rope = &rope;
    c.kv_lora_rank = R, c.q_lora_rank = RQ, c.qk_nope_head_dim = DN, c.v_head_dim = DV;
    c.norm_eps = 1e-6, c.scale = 1.0 / sqrt((double)DQK);
    ra_layer_weights lw = ra_layer_weights_init();
    lw.wq_a = w[0], lw.wq_b = w[1], lw.wkv_a = w[2], lw.wkv_b = w[3], lw.wo = w[4];
    lw.q_a_norm = norm_f32, lw.kv_a_norm = norm_f32;
    ra_layer *hand = NULL;
    CHECK(ra_layer_create(&hand, &c, &lw) == RA_OK, "%s", ra_last_error());
    if (hf && hand) same_outputs(ra_hf_layer_get(hf), hand, DIM, "latent attention");
    ra_layer_destroy(hand);
    ra_hf_layer_destroy(hf);
    for (int i = 0; i < 5; i++) free_q(&m[i]);
}

/* ---- refusals --------------------------------------------------------------- */

/* The Llama FP8 file with one change (edit: 0 none; see below), under config. */
static ra_status llama_case(int edit, const char *config, ra_hf_layer **layer)
{
    static qmatrix m[4];
    static int made;
    if (!made) {
        for (int p = 0; p < 4; p++) m[p] = make_q(p == 0 || p == 3 ? DIM : D, DIM, 5, 5, 200u + (uint32_t)p);
        made = 1;
    }
    static const char *const proj[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    char names[10][112];
    ra_st_tensor t[10];
    int n = 0;
    for (int p = 0; p < 4; p++) {
        char name[112];
        snprintf(name, sizeof name, "model.layers.0.self_attn.%s.weight", proj[p]);
        n = add_q(t, n, names, name, &m[p]);
    }
    static uint8_t nan_codes[D * DIM];
    static float scales[8] = {1, 1, 1, 1, 1, 1, 1, 1}, inf_scales[6];
    static uint16_t bf16[DIM * DIM];
    switch (edit) {
    case 1: memcpy(nan_codes, m[1].codes, sizeof nan_codes); nan_codes[17] = 0xff;
        t[2].data = nan_codes; break;                       /* a NaN code in k_proj */
    case 2: n--; break;                                     /* o_proj's scale missing */
    case 3: t[3].shape[0] = 1; t[3].count = t[3].shape[1];  /* k's scale [1, 3] */
        t[3].nbytes = (size_t)t[3].count * 4; break;
    case 4: t[3].ndim = 1; t[3].shape[0] = t[3].count; break; /* k's scale a vector */
    case 5: t[3].dtype = RA_ST_F16; t[3].nbytes /= 2; break; /* an F16 scale */
    case 6: for (int i = 0; i < 6; i++) inf_scales[i] = i == 4 ? INFINITY : 1;
        t[3].data = inf_scales; break;                      /* an Inf scale */
    case 7: t[2] = raw(t[2].name, RA_ST_BF16, bf16, D, DIM); break; /* BF16 k with a scale */
    case 8: t[n++] = raw("model.layers.0.self_attn.k_proj.input_scale", RA_ST_F32, scales, 1, 0);
        break;                                               /* a static input scale */
    case 9: t[n++] = raw("model.layers.0.self_attn.q_norm.weight_scale_inv", RA_ST_F32, scales,
                         1, 1); break;                       /* a scale without its weight */
    case 10: { /* every weight BF16, no scales */
        int k = 0;
        for (int i = 0; i < n; i += 2) t[k++] = raw(t[i].name, RA_ST_BF16, bf16, t[i].shape[0],
                                                      t[i].shape[1]);
        n = k;
        break;
    }
    case 11: t[1] = raw(t[1].name, RA_ST_F32, bf16, 3, 4); break; /* q's: [3, 4], not [3, 3] */
    }
    if (!write_file("edit.safetensors", t, n)) return RA_ERR_IO;
    return open_layer("edit.safetensors", config, 0, layer);
}

static void test_refusals(void)
{
    static const char good[] = LLAMA_FP8("bfloat16", "[5, 5]");
    ra_hf_layer *layer = NULL;
    CHECK(llama_case(0, good, &layer) == RA_OK, "%s", ra_hf_last_error());
    ra_hf_layer_destroy(layer);
    static const struct {
        int edit;
        ra_status status;
        const char *needle, *what;
    } files[] = {
        {1, RA_ERR_FORMAT, "k_proj.weight' in", "a NaN code"},
        {1, RA_ERR_FORMAT, "NaN code 0xff", "a NaN code"},
        {2, RA_ERR_NOT_FOUND, "o_proj.weight_scale_inv", "a missing scale"},
        {3, RA_ERR_SHAPE, "k_proj.weight_scale_inv", "a scale of too few rows"},
        {4, RA_ERR_SHAPE, "k_proj.weight_scale_inv", "a scale vector"},
        {5, RA_ERR_DTYPE, "k_proj.weight_scale_inv", "an F16 scale"},
        {6, RA_ERR_FORMAT, "scale 4 is not finite", "an Inf scale"},
        {7, RA_ERR_UNSUPPORTED, "k_proj.weight", "a BF16 weight with a scale"},
        {8, RA_ERR_UNSUPPORTED, "k_proj.input_scale", "an input scale"},
        {9, RA_ERR_UNSUPPORTED, "q_norm.weight_scale_inv", "a scale of no weight"},
        {11, RA_ERR_SHAPE, "q_proj.weight_scale_inv", "a [3, 4] scale for [12, 12] in 5s"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        expect(llama_case(files[i].edit, good, &layer), files[i].status, files[i].needle,
               files[i].what);
        CHECK(layer == NULL, "no layer on failure");
    }
    /* quantization_config with BF16 weights: loaded as they are (transformers'
     * dequantize path passes a weight without a scale through) */
    CHECK(llama_case(10, good, &layer) == RA_OK, "%s", ra_hf_last_error());
    ra_hf_layer_destroy(layer);
    /* F8_E4M3 without a quantization_config, or without a torch_dtype, or in
     * modules_to_not_convert */
    static const char plain[] = "{\"model_type\": \"llama\", \"hidden_size\": 12, "
                                "\"num_attention_heads\": 2, \"num_key_value_heads\": 1, "
                                "\"head_dim\": 6, \"torch_dtype\": \"bfloat16\"}";
    expect(llama_case(0, plain, &layer), RA_ERR_UNSUPPORTED, "no quantization_config",
           "F8 without quantization_config");
    static const char no_dtype[] =
        "{\"model_type\": \"llama\", \"hidden_size\": 12, \"num_attention_heads\": 2, "
        "\"num_key_value_heads\": 1, \"head_dim\": 6, \"quantization_config\": "
        "{\"quant_method\": \"fp8\", \"weight_block_size\": [5, 5]}}";
    expect(llama_case(0, no_dtype, &layer), RA_ERR_UNSUPPORTED, "torch_dtype",
           "F8 without torch_dtype");
    static const char skipped[] =
        "{\"model_type\": \"llama\", \"hidden_size\": 12, \"num_attention_heads\": 2, "
        "\"num_key_value_heads\": 1, \"head_dim\": 6, \"dtype\": \"bfloat16\", "
        "\"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [5, 5], "
        "\"modules_to_not_convert\": [\"lm_head\", \"layers.*.self_attn.v_proj\"]}}";
    expect(llama_case(0, skipped, &layer), RA_ERR_UNSUPPORTED, "v_proj.weight",
           "F8 in modules_to_not_convert");
    /* a truncated file: its header promises more bytes than it has */
    CHECK(llama_case(0, good, &layer) == RA_OK, "%s", ra_hf_last_error());
    ra_hf_layer_destroy(layer);
    CHECK(truncate(path_of("edit.safetensors"), 200) == 0, "truncate");
    ra_hf_checkpoint *ckpt = NULL;
    CHECK(ra_hf_checkpoint_open(&ckpt, path_of("edit.safetensors")) != RA_OK && !ckpt,
          "a truncated FP8 file opens");
    /* f16 target: a product beyond 65504 */
    ra_hf_quant q = {.present = 1, .block_out = 1, .block_in = 1, .dtype = RA_ST_F16};
    uint8_t code = 0x7e;
    float big = 1024;
    ra_st_tensor w = raw("w.weight", RA_ST_F8_E4M3, &code, 1, 1);
    ra_st_tensor s = raw("w.weight_scale_inv", RA_ST_F32, &big, 1, 1);
    uint16_t h;
    expect(hf_fp8_dequantize(&w, &s, &q, "x", RA_F16, &h), RA_ERR_FORMAT, "beyond the range",
           "448 * 1024 into f16");
}

/* Each quantization setting ropeattn does not implement is refused, naming
 * the key, by the layer built from the config (the config itself opens:
 * its rope does not depend on the quantization). */
static void test_config_refusals(void)
{
#define QC(body) "{\"torch_dtype\": \"bfloat16\", \"quantization_config\": " body "}"
    static const struct {
        const char *json;
        ra_status status;
        const char *needle;
    } cases[] = {
        {QC("{\"quant_method\": \"compressed-tensors\", \"weight_block_size\": [1, 1]}"),
         RA_ERR_UNSUPPORTED, "compressed-tensors"},
        {QC("{\"quant_method\": \"fbgemm_fp8\"}"), RA_ERR_UNSUPPORTED, "fbgemm_fp8"},
        {QC("{\"quant_method\": \"bitsandbytes\"}"), RA_ERR_UNSUPPORTED, "bitsandbytes"},
        {QC("{\"quant_method\": \"gptq\", \"bits\": 4}"), RA_ERR_UNSUPPORTED, "gptq"},
        {QC("{\"quant_method\": \"awq\"}"), RA_ERR_UNSUPPORTED, "awq"},
        {QC("{\"weight_block_size\": [128, 128]}"), RA_ERR_UNSUPPORTED, "quant_method"},
        {QC("{\"quant_method\": 8}"), RA_ERR_FORMAT, "quant_method"},
        {QC("{\"quant_method\": \"fp8\", \"fmt\": \"e5m2\", \"weight_block_size\": [1, 1]}"),
         RA_ERR_UNSUPPORTED, "e5m2"},
        {QC("{\"quant_method\": \"fp8\", \"activation_scheme\": \"static\", "
            "\"weight_block_size\": [1, 1]}"), RA_ERR_UNSUPPORTED, "static"},
        {QC("{\"quant_method\": \"fp8\", \"scale_fmt\": \"e8m0x\", \"weight_block_size\": [1, 1]}"),
         RA_ERR_UNSUPPORTED, "scale_fmt"},
        {QC("{\"quant_method\": \"fp8\"}"), RA_ERR_UNSUPPORTED, "weight_block_size"},
        {QC("{\"quant_method\": \"fp8\", \"weight_block_size\": null}"), RA_ERR_UNSUPPORTED,
         "per-tensor"},
        {QC("{\"quant_method\": \"fp8\", \"weight_block_size\": [128]}"), RA_ERR_UNSUPPORTED,
         "weight_block_size"},
        {QC("{\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128, 1]}"),
         RA_ERR_UNSUPPORTED, "weight_block_size"},
        {QC("{\"quant_method\": \"fp8\", \"weight_block_size\": [0, 128]}"), RA_ERR_UNSUPPORTED,
         "weight_block_size"},
        {QC("{\"quant_method\": \"fp8\", \"weight_block_size\": [128, -1]}"), RA_ERR_UNSUPPORTED,
         "weight_block_size"},
        {QC("{\"quant_method\": \"fp8\", \"weight_block_size\": [1099511627776, 1]}"),
         RA_ERR_UNSUPPORTED, "weight_block_size"},
        {QC("{\"quant_method\": \"fp8\", \"weight_block_size\": [1.5, 2]}"), RA_ERR_UNSUPPORTED,
         "weight_block_size"},
        {QC("{\"quant_method\": \"fp8\", \"weight_block_size\": \"128\"}"), RA_ERR_UNSUPPORTED,
         "weight_block_size"},
        {QC("{\"quant_method\": \"fp8\", \"weight_block_size\": [1, 1], \"input_scale\": 1}"),
         RA_ERR_UNSUPPORTED, "input_scale"},
        {QC("{\"quant_method\": \"fp8\", \"weight_block_size\": [1, 1], "
            "\"modules_to_not_convert\": [1]}"), RA_ERR_FORMAT, "modules_to_not_convert"},
        {QC("{\"quant_method\": \"fp8\", \"weight_block_size\": [1, 1], \"dequantize\": 2}"),
         RA_ERR_FORMAT, "dequantize"},
        {QC("[1]"), RA_ERR_FORMAT, "quantization_config"},
        {"{\"torch_dtype\": \"float8_e4m3fn\", \"quantization_config\": {\"quant_method\": "
         "\"fp8\", \"weight_block_size\": [1, 1]}}", RA_ERR_UNSUPPORTED, "torch_dtype"},
        {"{\"torch_dtype\": \"float16\", \"dtype\": \"bfloat16\", \"quantization_config\": "
         "{\"quant_method\": \"fp8\", \"weight_block_size\": [1, 1]}}", RA_ERR_UNSUPPORTED,
         "disagree"},
        {"{\"text_config\": {\"quantization_config\": {\"quant_method\": \"fp8\"}}}",
         RA_ERR_UNSUPPORTED, "text_config.quantization_config"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* the config opens (RoPE does not depend on it), its layer does not */
        ra_hf_config *c = NULL;
        CHECK(ra_hf_config_parse(&c, cases[i].json, strlen(cases[i].json)) == RA_OK, "%s: %s",
              cases[i].json, ra_hf_last_error());
        ra_hf_config_close(c);
        ra_hf_layer *layer = NULL;
        expect(llama_case(0, cases[i].json, &layer), cases[i].status, cases[i].needle,
               cases[i].json);
        CHECK(layer == NULL, "no layer on failure");
    }
    /* accepted: DeepSeek-V3's, V3.1's (scale_fmt), Qwen3-FP8's (modules_to_not_convert),
     * null */
    static const char *const ok[] = {
        QC("{\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": \"fp8\", "
           "\"weight_block_size\": [128, 128]}"),
        QC("{\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": \"fp8\", "
           "\"scale_fmt\": \"ue8m0\", \"weight_block_size\": [128, 128]}"),
        QC("{\"activation_scheme\": \"dynamic\", \"modules_to_not_convert\": [\"lm_head\"], "
           "\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128], \"dequantize\": true}"),
        QC("null"),
        "{\"torch_dtype\": \"float8_e4m3fn\"}", /* no quantization: torch_dtype not read */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ra_hf_config *c = NULL;
        CHECK(ra_hf_config_parse(&c, ok[i], strlen(ok[i])) == RA_OK, "%s: %s", ok[i],
              ra_hf_last_error());
        ra_hf_config_close(c);
    }
#undef QC
}

static void simd_cases(void)
{
    RUN(test_llama);
    RUN(test_latent);
}

int main(void)
{
    if (!mkdtemp(folder)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_values);
    RUN(test_codes);
    RUN(test_refusals);
    RUN(test_config_refusals);
    ra_test_each_isa(simd_cases);
    const char *files[] = {"llama_fp8.safetensors", "mla_fp8.safetensors", "edit.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(path_of(files[i]));
    rmdir(folder);
    return ra_test_summary("hf_fp8");
}
