/*
 * test_hf_api.c — the checkpoint library (include/ropeattn_hf.h) as an
 * embedder calls it: a layer built from a .safetensors file and a
 * config.json gives the same bits as the same weights handed to
 * ra_layer_create by hand; its gradients come back under the checkpoint's
 * names (a fused qkv_proj as one array, as stored; latent attention's
 * tensors); the rope of a config;
 * and each failure a status plus a sentence naming what was wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "io/io.h"
#include "ropeattn_hf.h"

enum { DIM = 32, H = 4, HKV = 2, D = 8, B = 2, S = 5 };

static char folder[] = "/tmp/ropeattn-hf-XXXXXX";

static const char *path_of(const char *name)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    return path;
}

static void fill(float *x, int64_t n, uint32_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

/* The weights of one Llama layer with a q bias: wq [H*D, DIM], wk and wv
 * [HKV*D, DIM], wo [DIM, H*D], bq [H*D]. */
typedef struct weights {
    float wq[H * D * DIM], wk[HKV * D * DIM], wv[HKV * D * DIM], wo[DIM * H * D], bq[H * D];
} weights;

static ra_st_tensor f32_tensor(const char *name, const float *data, int64_t rows, int64_t cols)
{
    ra_st_tensor t = {.name = name, .dtype = RA_ST_F32, .ndim = cols ? 2 : 1,
                      .shape = {rows, cols}, .count = rows * (cols ? cols : 1), .data = data};
    t.nbytes = (size_t)t.count * sizeof(float);
    return t;
}

/* The weight matrices' dtype in write_checkpoint's files: F32, or BF16 /
 * F16 (each value rounded: ra_convert; biases stay F32). */
static ra_st_dtype matrix_dtype = RA_ST_F32;

/* t as matrix_dtype: its values converted into the next part of a buffer
 * that the file's tensors share. */
static ra_st_tensor matrix_tensor(ra_st_tensor t)
{
    static uint16_t buffer[(H + 2 * HKV) * D * DIM * 2 + DIM * H * D];
    static size_t used;
    if (matrix_dtype == RA_ST_F32) return t;
    if (used + (size_t)t.count > sizeof buffer / sizeof buffer[0]) used = 0;
    uint16_t *to = buffer + used;
    used += (size_t)t.count;
    ra_convert(to, matrix_dtype == RA_ST_BF16 ? RA_BF16 : RA_F16, t.data, RA_F32, t.count);
    t.dtype = matrix_dtype;
    t.data = to;
    t.nbytes = (size_t)t.count * 2;
    return t;
}

/* model.safetensors with layer 1's attention under Hugging Face's names
 * (fused: Phi-3's qkv_proj, wq's, wk's and wv's rows one after another). */
static int write_checkpoint(const char *file, const weights *w, int fused)
{
    static float qkv[(H + 2 * HKV) * D * DIM];
    memcpy(qkv, w->wq, sizeof w->wq);
    memcpy(qkv + H * D * DIM, w->wk, sizeof w->wk);
    memcpy(qkv + (H + HKV) * D * DIM, w->wv, sizeof w->wv);
    ra_st_tensor t[5];
    int n = 0;
    if (fused) {
        t[n++] = f32_tensor("model.layers.1.self_attn.qkv_proj.weight", qkv, (H + 2 * HKV) * D,
                            DIM);
    } else {
        t[n++] = f32_tensor("model.layers.1.self_attn.q_proj.weight", w->wq, H * D, DIM);
        t[n++] = f32_tensor("model.layers.1.self_attn.k_proj.weight", w->wk, HKV * D, DIM);
        t[n++] = f32_tensor("model.layers.1.self_attn.v_proj.weight", w->wv, HKV * D, DIM);
        t[n++] = f32_tensor("model.layers.1.self_attn.q_proj.bias", w->bq, H * D, 0);
    }
    t[n++] = f32_tensor("model.layers.1.self_attn.o_proj.weight", w->wo, DIM, H * D);
    for (int i = 0; i < n; i++)
        if (t[i].ndim == 2) t[i] = matrix_tensor(t[i]);
    char msg[256];
    return ra_safetensors_write(path_of(file), t, n, msg, sizeof msg) == RA_OK;
}

/* A Llama-style config without model_type: the checkpoint's biases are
 * read as they are (model_type "llama" with attention_bias true would need
 * all four: test_failures). */
static const char llama_config[] =
    "{\"hidden_size\": 32, \"num_attention_heads\": 4, "
    "\"num_key_value_heads\": 2, \"rope_theta\": 500000, \"attention_bias\": true}";

/* The same layer by hand: Hugging Face's layout, theta 500000. */
static ra_layer *layer_by_hand_dtype(const weights *w, int bias, ra_dtype dtype)
{
    ra_rope_config rope = ra_rope_config_default(D);
    rope.layout = RA_LAYOUT_HALF;
    rope.theta = 500000;
    rope.table_size = S;
    ra_layer_config c = ra_layer_config_init();
    c.dim = DIM, c.n_heads = H, c.n_kv_heads = HKV, c.head_dim = D, c.rope = &rope;
    ra_layer_weights lw = ra_layer_weights_init();
    lw.wq = w->wq, lw.wk = w->wk, lw.wv = w->wv, lw.wo = w->wo, lw.bq = bias ? w->bq : NULL;
    static uint16_t half[4][H * D * DIM]; /* dtype 16-bit: the matrices rounded */
    if (dtype != RA_F32) {
        const float *src[4] = {w->wq, w->wk, w->wv, w->wo};
        const int64_t n[4] = {H * D * DIM, HKV * D * DIM, HKV * D * DIM, DIM * H * D};
        for (int i = 0; i < 4; i++) ra_convert(half[i], dtype, src[i], RA_F32, n[i]);
        lw.wq = (const float *)half[0], lw.wk = (const float *)half[1];
        lw.wv = (const float *)half[2], lw.wo = (const float *)half[3];
        lw.dtype = dtype;
    }
    ra_layer *layer = NULL;
    ra_status status = ra_layer_create(&layer, &c, &lw);
    CHECK(status == RA_OK, "%s", ra_last_error());
    return layer;
}

static ra_layer *layer_by_hand(const weights *w, int bias)
{
    return layer_by_hand_dtype(w, bias, RA_F32);
}

static ra_hf_layer *load(const char *file, const char *config_text, int64_t layer_no)
{
    ra_hf_checkpoint *ckpt = NULL;
    ra_hf_config *config = NULL;
    ra_hf_layer *layer = NULL;
    CHECK(ra_hf_checkpoint_open(&ckpt, path_of(file)) == RA_OK, "%s", ra_hf_last_error());
    CHECK(ra_hf_config_parse(&config, config_text, strlen(config_text)) == RA_OK, "%s",
          ra_hf_last_error());
    ra_hf_options o = ra_hf_options_init();
    o.layer = layer_no;
    o.n_tokens = S;
    if (!strstr(config_text, "model_type")) o.layout = RA_LAYOUT_HALF; /* test_no_family */
    if (ckpt && config)
        CHECK(ra_hf_layer_create(&layer, ckpt, config, &o) == RA_OK, "%s", ra_hf_last_error());
    CHECK(ra_hf_last_error()[0] == '\0', "a success leaves \"%s\"", ra_hf_last_error());
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt); /* the layer keeps its own copy */
    return layer;
}

/* Same weights, same code: the outputs must be equal bit for bit. */
static void test_layer_equals_by_hand(void)
{
    static weights w;
    fill((float *)&w, sizeof w / sizeof(float), 7);
    CHECK(write_checkpoint("llama.safetensors", &w, 0), "write");
    ra_hf_layer *hf = load("llama.safetensors", llama_config, 1);
    ra_layer *hand = layer_by_hand(&w, 1);
    if (!hf || !hand) goto done;
    float x[B * S * DIM], y1[B * S * DIM], y2[B * S * DIM];
    fill(x, B * S * DIM, 3);
    CHECK(ra_layer_forward(NULL, ra_hf_layer_get(hf), y1, x, B, S, NULL, NULL) == RA_OK, "fwd");
    CHECK(ra_layer_forward(NULL, hand, y2, x, B, S, NULL, NULL) == RA_OK, "fwd by hand");
    CHECK(memcmp(y1, y2, sizeof y1) == 0, "the checkpoint's layer differs from the hand-built");
    const ra_layer_config *c = ra_layer_get_config(ra_hf_layer_get(hf));
    CHECK(c->rope->theta == 500000 && c->rope->layout == RA_LAYOUT_HALF, "rope %g %d",
          c->rope->theta, (int)c->rope->layout);
    CHECK(ra_hf_layer_tensor_count(hf) == 5, "%lld tensors",
          (long long)ra_hf_layer_tensor_count(hf));
    int64_t shape[8];
    CHECK(strcmp(ra_hf_layer_tensor_name(hf, 4), "model.layers.1.self_attn.q_proj.bias") == 0 &&
          ra_hf_layer_tensor_shape(hf, 4, shape) == 1 && shape[0] == H * D,
          "tensor 4: %s", ra_hf_layer_tensor_name(hf, 4));
    CHECK(ra_hf_layer_tensor_name(hf, 5) == NULL, "past the end");
done:
    ra_layer_destroy(hand);
    ra_hf_layer_destroy(hf);
}

/* A checkpoint of BF16 or F16 matrices (separate, or Phi-3's fused rows)
 * gives a layer of that dtype: the same bits as the 16-bit weights handed
 * over by hand, for a decode-sized call (B rows: the library's GEMV) and a
 * prefill (sgemm on widened panels). */
static void test_stored_dtype(void)
{
    static weights w;
    fill((float *)&w, sizeof w / sizeof(float), 11);
    const ra_st_dtype st[2] = {RA_ST_BF16, RA_ST_F16};
    const ra_dtype dt[2] = {RA_BF16, RA_F16};
    for (int d = 0; d < 2; d++)
        for (int fused = 0; fused < 2; fused++) {
            matrix_dtype = st[d];
            CHECK(write_checkpoint("half.safetensors", &w, fused), "write");
            matrix_dtype = RA_ST_F32;
            ra_hf_layer *hf = load("half.safetensors", llama_config, 1);
            ra_layer *hand = layer_by_hand_dtype(&w, !fused, dt[d]);
            if (!hf || !hand) {
                ra_layer_destroy(hand);
                ra_hf_layer_destroy(hf);
                continue;
            }
            float x[B * S * DIM], y1[B * S * DIM], y2[B * S * DIM];
            fill(x, B * S * DIM, 5);
            for (int64_t s = 1; s <= S; s += S - 1) {
                CHECK(ra_layer_forward(NULL, ra_hf_layer_get(hf), y1, x, B, s, NULL, NULL) ==
                          RA_OK, "fwd");
                CHECK(ra_layer_forward(NULL, hand, y2, x, B, s, NULL, NULL) == RA_OK, "hand");
                CHECK(memcmp(y1, y2, (size_t)(B * s * DIM) * sizeof(float)) == 0,
                      "%s%s, S %lld: the checkpoint's layer differs from the hand-built",
                      d ? "f16" : "bf16", fused ? " fused" : "", (long long)s);
            }
            ra_layer_destroy(hand);
            ra_hf_layer_destroy(hf);
        }
}

/* dL/dW under the checkpoint's names: a fused qkv_proj's gradient is the
 * rows of the unfused layer's dwq, dwk, dwv, as stored. */
static void test_fused_gradients(void)
{
    static weights w;
    fill((float *)&w, sizeof w / sizeof(float), 11);
    CHECK(write_checkpoint("phi3.safetensors", &w, 1), "write");
    static const char phi3[] = "{\"model_type\": \"phi3\", \"hidden_size\": 32, "
                               "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                               "\"rope_theta\": 500000}";
    ra_hf_layer *hf = load("phi3.safetensors", phi3, 1);
    ra_layer *hand = layer_by_hand(&w, 0);
    ra_hf_grads *g = NULL;
    ra_layer_tape *tape[2] = {NULL, NULL};
    if (!hf || !hand) goto done;
    CHECK(ra_hf_layer_tensor_count(hf) == 2, "qkv_proj and o_proj");
    CHECK(ra_hf_grads_create(&g, hf) == RA_OK, "%s", ra_hf_last_error());
    float x[B * S * DIM], dy[B * S * DIM], y[B * S * DIM], dx[2][B * S * DIM];
    fill(x, B * S * DIM, 5);
    fill(dy, B * S * DIM, 6);
    static float dwq[H * D * DIM], dwk[HKV * D * DIM], dwv[HKV * D * DIM], dwo[DIM * H * D];
    ra_layer_grads mine = ra_layer_grads_init();
    mine.dwq = dwq, mine.dwk = dwk, mine.dwv = dwv, mine.dwo = dwo;
    const ra_layer *layers[2] = {ra_hf_layer_get(hf), hand};
    const ra_layer_grads *grads[2] = {ra_hf_grads_get(g), &mine};
    for (int i = 0; i < 2 && g; i++) {
        CHECK(ra_layer_tape_create(&tape[i], layers[i], B * S) == RA_OK, "tape");
        CHECK(ra_layer_forward_train(NULL, layers[i], y, tape[i], x, B, S, NULL, NULL) == RA_OK,
              "forward %d: %s", i, ra_last_error());
        CHECK(ra_layer_backward(NULL, layers[i], dx[i], grads[i], tape[i], dy) == RA_OK,
              "backward %d: %s", i, ra_last_error());
    }
    const float *qkv = g ? ra_hf_grads_tensor(g, 0) : NULL;
    const float *o = g ? ra_hf_grads_tensor(g, 1) : NULL;
    CHECK(qkv && memcmp(qkv, dwq, sizeof dwq) == 0 &&
          memcmp(qkv + H * D * DIM, dwk, sizeof dwk) == 0 &&
          memcmp(qkv + (H + HKV) * D * DIM, dwv, sizeof dwv) == 0, "qkv_proj's gradient");
    CHECK(o && memcmp(o, dwo, sizeof dwo) == 0, "o_proj's gradient");
    CHECK(memcmp(dx[0], dx[1], sizeof dx[0]) == 0, "dx");
done:
    for (int i = 0; i < 2; i++) ra_layer_tape_destroy(tape[i]);
    ra_hf_grads_destroy(g);
    ra_layer_destroy(hand);
    ra_hf_layer_destroy(hf);
}

/* Latent attention (DeepSeek-V3's names, q_lora_rank, attention_bias):
 * the same bits as the same weights by hand, forward and every gradient,
 * each under its checkpoint name in the order weights, biases, norms. */
enum { DN = 4, DR = 4, DV = 6, R = 8, RQ = 12, DQK = DN + DR };

/* DeepSeek-V3's config for test_latent_attention's mla.safetensors. */
static const char mla_config[] =
    "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 32, \"num_attention_heads\": 4, "
    "\"num_key_value_heads\": 4, \"kv_lora_rank\": 8, \"q_lora_rank\": 12, "
    "\"qk_nope_head_dim\": 4, \"qk_rope_head_dim\": 4, \"v_head_dim\": 6, "
    "\"rope_theta\": 500000, \"attention_bias\": true}";

static void test_latent_attention(void)
{
    static struct {
        float wq_a[RQ * DIM], wq_b[H * DQK * RQ], wkv_a[(R + DR) * DIM], wkv_b[H * (DN + DV) * R],
            wo[DIM * H * DV], bq_a[RQ], bkv_a[R + DR], bo[DIM], q_a_norm[RQ], kv_a_norm[R];
    } w;
    fill((float *)&w, sizeof w / sizeof(float), 21);
    static const char *const names[] = {
        "q_a_proj.weight", "q_b_proj.weight", "kv_a_proj_with_mqa.weight", "kv_b_proj.weight",
        "o_proj.weight",   "q_a_proj.bias",   "kv_a_proj_with_mqa.bias",   "o_proj.bias",
        "q_a_layernorm.weight", "kv_a_layernorm.weight"};
    const float *arrays[] = {w.wq_a, w.wq_b, w.wkv_a, w.wkv_b, w.wo,
                             w.bq_a, w.bkv_a, w.bo, w.q_a_norm, w.kv_a_norm};
    const int64_t shapes[][2] = {{RQ, DIM}, {H * DQK, RQ}, {R + DR, DIM}, {H * (DN + DV), R},
                                 {DIM, H * DV}, {RQ, 0}, {R + DR, 0}, {DIM, 0}, {RQ, 0}, {R, 0}};
    enum { N = sizeof names / sizeof names[0] };
    char full[N][96];
    ra_st_tensor t[N];
    for (int i = 0; i < N; i++) {
        snprintf(full[i], sizeof full[i], "model.layers.0.self_attn.%s", names[i]);
        t[i] = f32_tensor(full[i], arrays[i], shapes[i][0], shapes[i][1]);
    }
    char msg[256];
    CHECK(ra_safetensors_write(path_of("mla.safetensors"), t, N, msg, sizeof msg) == RA_OK,
          "%s", msg);
    ra_hf_layer *hf = load("mla.safetensors", mla_config, 0);
    /* by hand: interleaved pairs over the last DR features, scale DQK^-1/2 */
    ra_rope_config rope = ra_rope_config_default(DQK);
    rope.rotary_dim = DR, rope.theta = 500000, rope.table_size = S;
    ra_layer_config c = ra_layer_config_init();
    c.dim = DIM, c.n_heads = c.n_kv_heads = H, c.head_dim = DQK, c.rope = &rope;
    c.kv_lora_rank = R, c.q_lora_rank = RQ, c.qk_nope_head_dim = DN, c.v_head_dim = DV;
    c.norm_eps = 1e-6, c.scale = 1.0 / sqrt((double)DQK);
    ra_layer_weights lw = ra_layer_weights_init();
    lw.wq_a = w.wq_a, lw.wq_b = w.wq_b, lw.wkv_a = w.wkv_a, lw.wkv_b = w.wkv_b, lw.wo = w.wo;
    lw.bq_a = w.bq_a, lw.bkv_a = w.bkv_a, lw.bo = w.bo;
    lw.q_a_norm = w.q_a_norm, lw.kv_a_norm = w.kv_a_norm;
    ra_layer *hand = NULL;
    CHECK(ra_layer_create(&hand, &c, &lw) == RA_OK, "%s", ra_last_error());
    ra_hf_grads *g = NULL;
    ra_layer_tape *tape[2] = {NULL, NULL};
    if (!hf || !hand) goto done;
    CHECK(ra_hf_layer_tensor_count(hf) == N, "%lld tensors", (long long)ra_hf_layer_tensor_count(hf));
    for (int i = 0; i < N && i < ra_hf_layer_tensor_count(hf); i++) {
        int64_t shape[8];
        int ndim = ra_hf_layer_tensor_shape(hf, i, shape);
        CHECK(strcmp(ra_hf_layer_tensor_name(hf, i), full[i]) == 0 &&
                  ndim == (shapes[i][1] ? 2 : 1) && shape[0] == shapes[i][0],
              "tensor %d: %s", i, ra_hf_layer_tensor_name(hf, i));
    }
    CHECK(ra_hf_grads_create(&g, hf) == RA_OK, "%s", ra_hf_last_error());
    static float dw[N][H * (DN + DV) * R > DIM * H * DV ? H * (DN + DV) * R : DIM * H * DV];
    ra_layer_grads mine = ra_layer_grads_init();
    mine.dwq_a = dw[0], mine.dwq_b = dw[1], mine.dwkv_a = dw[2], mine.dwkv_b = dw[3];
    mine.dwo = dw[4], mine.dbq_a = dw[5], mine.dbkv_a = dw[6], mine.dbo = dw[7];
    mine.dq_a_norm = dw[8], mine.dkv_a_norm = dw[9];
    float x[B * S * DIM], dy[B * S * DIM], y[2][B * S * DIM], dx[2][B * S * DIM];
    fill(x, B * S * DIM, 5);
    fill(dy, B * S * DIM, 6);
    const ra_layer *layers[2] = {ra_hf_layer_get(hf), hand};
    const ra_layer_grads *grads[2] = {g ? ra_hf_grads_get(g) : NULL, &mine};
    for (int i = 0; i < 2 && g; i++) {
        CHECK(ra_layer_tape_create(&tape[i], layers[i], B * S) == RA_OK, "tape");
        CHECK(ra_layer_forward_train(NULL, layers[i], y[i], tape[i], x, B, S, NULL, NULL) ==
                  RA_OK, "forward %d: %s", i, ra_last_error());
        CHECK(ra_layer_backward(NULL, layers[i], dx[i], grads[i], tape[i], dy) == RA_OK,
              "backward %d: %s", i, ra_last_error());
    }
    CHECK(memcmp(y[0], y[1], sizeof y[0]) == 0 && memcmp(dx[0], dx[1], sizeof dx[0]) == 0,
          "y and dx");
    for (int i = 0; i < N && g; i++) {
        size_t n = (size_t)(shapes[i][0] * (shapes[i][1] ? shapes[i][1] : 1));
        const float *got = ra_hf_grads_tensor(g, i);
        CHECK(got && memcmp(got, dw[i], n * sizeof(float)) == 0, "%s's gradient", names[i]);
    }
done:
    for (int i = 0; i < 2; i++) ra_layer_tape_destroy(tape[i]);
    ra_hf_grads_destroy(g);
    ra_layer_destroy(hand);
    ra_hf_layer_destroy(hf);
}

/* A failure returns its status and names what was wrong. */
static void expect(ra_status got, ra_status want, const char *needle, const char *what)
{
    CHECK(got == want, "%s: status %d (%s), want %d", what, (int)got, ra_hf_last_error(),
          (int)want);
    CHECK(strstr(ra_hf_last_error(), needle) != NULL, "%s: \"%s\" does not name \"%s\"", what,
          ra_hf_last_error(), needle);
}

static void test_failures(void)
{
    ra_hf_checkpoint *ckpt = NULL;
    ra_hf_config *config = NULL, *bad = NULL;
    ra_hf_layer *layer = NULL;
    expect(ra_hf_checkpoint_open(&ckpt, path_of("absent.safetensors")), RA_ERR_IO,
           "absent.safetensors", "a missing file");
    CHECK(ckpt == NULL, "no checkpoint on failure");
    expect(ra_hf_checkpoint_open(NULL, "x"), RA_ERR_NULL, "out", "NULL out");
    static const char negative[] = "{\"num_attention_heads\": -4}";
    static const char refused[] = "{\"model_type\": \"zaya\"}";
    static const char not_string[] = "{\"rope_type\": 3}";
    expect(ra_hf_config_parse(&bad, negative, strlen(negative)), RA_ERR_FORMAT,
           "num_attention_heads", "a negative head count");
    expect(ra_hf_config_parse(&bad, refused, strlen(refused)), RA_ERR_UNSUPPORTED,
           "zaya", "a family ropeattn does not run");
    CHECK(ra_hf_checkpoint_open(&ckpt, path_of("llama.safetensors")) == RA_OK, "open");
    CHECK(ra_hf_config_parse(&config, llama_config, strlen(llama_config)) == RA_OK, "parse");
    expect(ra_hf_config_set_rope_theta(config, -1), RA_ERR_THETA, "rope_theta", "theta -1");
    expect(ra_hf_config_set_rope_theta(config, 1e-320), RA_ERR_THETA, "not subnormal",
           "a subnormal theta (config.json's rope_theta and --theta refuse it)");
    expect(ra_hf_config_set_rope_parameters(config, not_string, strlen(not_string)),
           RA_ERR_FORMAT, "rope_type", "a rope type that is not a string");
    ra_hf_options o = ra_hf_options_init();
    o.n_tokens = S;
    o.layer = 0;
    expect(ra_hf_layer_create(&layer, ckpt, config, &o), RA_ERR_NOT_FOUND,
           "no attention weights for layer 0", "layer 0 of a file of layer 1");
    o.layer = 1;
    /* Hugging Face names with no model_type: the layout is the family's
     * (Cohere's q_proj pairs interleaved), so it must be given. */
    expect(ra_hf_layer_create(&layer, ckpt, config, &o), RA_ERR_ARGUMENT,
           "no config names a model_type: give the layout", "HF names, no family, no layout");
    o.layout = RA_LAYOUT_HALF;
    o.n_heads = 3;
    expect(ra_hf_layer_create(&layer, ckpt, config, &o), RA_ERR_SHAPE, "q_proj.weight",
           "3 heads of 8 against wq's 32 rows");
    o.n_heads = (int64_t)1 << 40;
    expect(ra_hf_layer_create(&layer, ckpt, config, &o), RA_ERR_ARGUMENT, "n_heads",
           "2^40 heads");
    o.n_heads = 0;
    o.struct_size = 8;
    expect(ra_hf_layer_create(&layer, ckpt, config, &o), RA_ERR_ARGUMENT, "struct_size",
           "an unset struct_size");
    /* A newer header's options: accepted while its new fields are 0. */
    CHECK(RA_HF_OPTIONS_SIZE_V1 == 11 * 8 && sizeof(ra_hf_options) == 15 * 8,
          /* + vision, non_causal, token_types, vision_windows */
          "ra_hf_options has %zu bytes", sizeof(ra_hf_options));
    struct { ra_hf_options o; int64_t later; } newer = {ra_hf_options_init(), 0};
    newer.o.struct_size = sizeof newer;
    newer.o.layer = 1;
    newer.o.layout = RA_LAYOUT_HALF;
    newer.o.n_tokens = S;
    CHECK(ra_hf_layer_create(&layer, ckpt, config, &newer.o) == RA_OK, "%s", ra_hf_last_error());
    ra_hf_layer_destroy(layer);
    layer = NULL;
    newer.later = 1;
    expect(ra_hf_layer_create(&layer, ckpt, config, &newer.o), RA_ERR_UNSUPPORTED,
           "does not know", "a newer field set");
    CHECK(layer == NULL, "no layer on failure");
    /* non_causal: 0 or 1 */
    ra_hf_options nc = ra_hf_options_init();
    nc.layer = 1, nc.layout = RA_LAYOUT_HALF, nc.non_causal = 2;
    expect(ra_hf_layer_create(&layer, ckpt, config, &nc), RA_ERR_ARGUMENT, "non_causal",
           "non_causal 2");
    /* token_types: 0 or 1 */
    nc.non_causal = 0, nc.token_types = 2;
    expect(ra_hf_layer_create(&layer, ckpt, config, &nc), RA_ERR_ARGUMENT, "token_types",
           "token_types 2");
    /* vision_windows: 0 or 1 */
    nc.token_types = 0, nc.vision_windows = 2;
    expect(ra_hf_layer_create(&layer, ckpt, config, &nc), RA_ERR_ARGUMENT, "vision_windows",
           "vision_windows 2");
    /* attention_bias false and a q_proj.bias in the file: refused. */
    ra_hf_config *nobias = NULL;
    static const char text[] = "{\"model_type\": \"llama\", \"num_attention_heads\": 4, "
                               "\"num_key_value_heads\": 2, \"attention_bias\": false}";
    CHECK(ra_hf_config_parse(&nobias, text, strlen(text)) == RA_OK, "parse");
    o = ra_hf_options_init();
    expect(ra_hf_layer_create(&layer, ckpt, nobias, &o), RA_ERR_UNSUPPORTED, "attention_bias",
           "a bias against attention_bias false");
    ra_hf_config_close(nobias);
    /* Llama's model with attention_bias true biases k too: its missing
     * bias refused, named. */
    static const char llama[] = "{\"model_type\": \"llama\", \"num_attention_heads\": 4, "
                                "\"num_key_value_heads\": 2, \"attention_bias\": true}";
    CHECK(ra_hf_config_parse(&nobias, llama, strlen(llama)) == RA_OK, "parse");
    o.layer = 1;
    expect(ra_hf_layer_create(&layer, ckpt, nobias, &o), RA_ERR_NOT_FOUND,
           "no 'model.layers.1.self_attn.k_proj.bias'", "a missing bias");
    ra_hf_config_close(nobias);
    /* A config without num_attention_heads (Llama's class has no default)
     * and no n_heads: the message names the config's missing key. */
    static const char no_heads[] = "{\"model_type\": \"llama\", \"num_key_value_heads\": 2}";
    CHECK(ra_hf_config_parse(&nobias, no_heads, strlen(no_heads)) == RA_OK, "parse");
    o = ra_hf_options_init();
    o.layer = 1;
    expect(ra_hf_layer_create(&layer, ckpt, nobias, &o), RA_ERR_ARGUMENT,
           "config has no \"num_attention_heads\"", "a config without num_attention_heads");
    ra_hf_config_close(nobias);
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);
}

/* ra_hf_options.head_dim overrides the config's, as n_heads and n_kv_heads
 * do: the weights' shapes must agree with it (wq [H*D, dim], wk [Hkv*D,
 * dim]), else RA_ERR_SHAPE naming it; the rope takes it too.  Latent
 * attention's heads are qk_nope_head_dim + qk_rope_head_dim: another is
 * refused. */
static void test_head_dim_option(void)
{
    ra_hf_checkpoint *ckpt = NULL;
    ra_hf_config *config = NULL;
    ra_hf_layer *layer = NULL;
    CHECK(ra_hf_checkpoint_open(&ckpt, path_of("llama.safetensors")) == RA_OK &&
              ra_hf_config_parse(&config, llama_config, strlen(llama_config)) == RA_OK,
          "%s", ra_hf_last_error());
    if (!ckpt || !config) goto done;
    ra_hf_options o = ra_hf_options_init();
    o.layer = 1, o.n_tokens = S, o.layout = RA_LAYOUT_HALF;
    o.head_dim = 4; /* 4 heads of 4 against wq's 32 rows */
    expect(ra_hf_layer_create(&layer, ckpt, config, &o), RA_ERR_SHAPE,
           "head_dim 4 (the options')", "head_dim 4 with 4 heads");
    CHECK(layer == NULL, "no layer on failure");
    /* 8 heads of 4, 4 key/value heads: wq's 32 rows, wk's 16 */
    o.n_heads = 8, o.n_kv_heads = 4;
    CHECK(ra_hf_layer_create(&layer, ckpt, config, &o) == RA_OK, "%s", ra_hf_last_error());
    const ra_layer_config *c = layer ? ra_layer_get_config(ra_hf_layer_get(layer)) : NULL;
    CHECK(c && c->n_heads == 8 && c->n_kv_heads == 4 && c->head_dim == 4 &&
              c->rope->head_dim == 4, "8 heads of 4");
    ra_hf_layer_destroy(layer);
    layer = NULL;
    o.n_kv_heads = 0; /* the config's 2 key/value heads of 4 against wk's 16 rows */
    expect(ra_hf_layer_create(&layer, ckpt, config, &o), RA_ERR_SHAPE, "head_dim 4",
           "2 kv heads of 4");
    o.n_heads = 0, o.head_dim = D; /* the same as the config's: the same layer */
    CHECK(ra_hf_layer_create(&layer, ckpt, config, &o) == RA_OK, "%s", ra_hf_last_error());
    ra_hf_layer_destroy(layer);
    layer = NULL;
    ra_hf_checkpoint_close(ckpt);
    ckpt = NULL;
    CHECK(ra_hf_checkpoint_open(&ckpt, path_of("mla.safetensors")) == RA_OK, "%s",
          ra_hf_last_error());
    ra_hf_config_close(config);
    config = NULL;
    CHECK(ra_hf_config_parse(&config, mla_config, strlen(mla_config)) == RA_OK, "%s",
          ra_hf_last_error());
    o = ra_hf_options_init();
    o.n_tokens = S, o.head_dim = 6;
    if (ckpt && config)
        expect(ra_hf_layer_create(&layer, ckpt, config, &o), RA_ERR_ARGUMENT,
               "head_dim 6 was asked for", "latent attention's head_dim");
done:
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);
}

/* Any tensor of a checkpoint, sharded or not: enumerated, described as
 * stored, read into float32 from F32, F16, BF16 and F64 (rounded to
 * nearest; beyond float32's range refused, dst untouched). */
static void test_tensor_api(void)
{
    const float emb[6] = {0.5f, -1.0f, 2.0f, 0.25f, -3.0f, 1.5f};
    const uint16_t norm[2] = {0x3f80, 0xc000}; /* bf16 1, -2 */
    const uint16_t half[2] = {0x3c00, 0x3800}; /* f16 1, 0.5 */
    const double f64[2] = {0.1, -1.0 / 3.0}, big[1] = {1e39};
    const int64_t ids[2] = {7, 9};
    const float scalar = 4.0f;
    const ra_st_tensor shard0[] = {
        {.name = "model.embed_tokens.weight", .dtype = RA_ST_F32, .ndim = 2, .shape = {3, 2},
         .count = 6, .data = emb, .nbytes = sizeof emb},
        {.name = "model.norm.weight", .dtype = RA_ST_BF16, .ndim = 1, .shape = {2}, .count = 2,
         .data = norm, .nbytes = sizeof norm},
        {.name = "scalar", .dtype = RA_ST_F32, .ndim = 0, .count = 1, .data = &scalar,
         .nbytes = 4}};
    const ra_st_tensor shard1[] = {
        {.name = "half", .dtype = RA_ST_F16, .ndim = 1, .shape = {2}, .count = 2, .data = half,
         .nbytes = sizeof half},
        {.name = "double", .dtype = RA_ST_F64, .ndim = 1, .shape = {2}, .count = 2, .data = f64,
         .nbytes = sizeof f64},
        {.name = "big", .dtype = RA_ST_F64, .ndim = 1, .shape = {1}, .count = 1, .data = big,
         .nbytes = sizeof big},
        {.name = "ids", .dtype = RA_ST_I64, .ndim = 1, .shape = {2}, .count = 2, .data = ids,
         .nbytes = sizeof ids}};
    char msg[256];
    CHECK(ra_safetensors_write(path_of("part-1.safetensors"), shard0, 3, msg, sizeof msg) ==
              RA_OK && ra_safetensors_write(path_of("part-2.safetensors"), shard1, 4, msg,
                                            sizeof msg) == RA_OK, "%s", msg);
    FILE *f = fopen(path_of("parts.index.json"), "w");
    if (f) {
        fputs("{\"weight_map\": {\"model.embed_tokens.weight\": \"part-1.safetensors\", "
              "\"half\": \"part-2.safetensors\"}}", f);
        fclose(f);
    }
    ra_hf_checkpoint *ckpt = NULL;
    CHECK(ra_hf_checkpoint_open(&ckpt, path_of("parts.index.json")) == RA_OK, "%s",
          ra_hf_last_error());
    if (!ckpt) return;
    /* every tensor of both shards, each once, in order */
    const char *names[] = {"model.embed_tokens.weight", "model.norm.weight", "scalar", "half",
                           "double", "big", "ids"};
    CHECK(ra_hf_checkpoint_tensor_count(ckpt) == 7, "%lld tensors",
          (long long)ra_hf_checkpoint_tensor_count(ckpt));
    for (int64_t i = 0; i < 7; i++) {
        const char *name = ra_hf_checkpoint_tensor_name(ckpt, i);
        CHECK(name && strcmp(name, names[i]) == 0, "tensor %lld: %s", (long long)i,
              name ? name : "NULL");
    }
    CHECK(!ra_hf_checkpoint_tensor_name(ckpt, -1) && !ra_hf_checkpoint_tensor_name(ckpt, 7) &&
              !ra_hf_checkpoint_tensor_name(NULL, 0) && ra_hf_checkpoint_tensor_count(NULL) == 0,
          "out of range");
    /* described as stored */
    ra_hf_tensor t = ra_hf_tensor_init();
    CHECK(sizeof t == RA_HF_TENSOR_SIZE_V1, "ra_hf_tensor has %zu bytes", sizeof t);
    CHECK(ra_hf_checkpoint_tensor(ckpt, "model.norm.weight", &t) == RA_OK, "%s",
          ra_hf_last_error());
    CHECK(strcmp(t.name, "model.norm.weight") == 0 && strcmp(t.dtype, "BF16") == 0 &&
              t.ndim == 1 && t.shape[0] == 2 && t.shape[1] == 0 && t.count == 2 &&
              t.nbytes == 4 && memcmp(t.data, norm, 4) == 0 &&
              strcmp(t.file, path_of("part-1.safetensors")) == 0, "BF16 norm");
    CHECK(ra_hf_checkpoint_tensor(ckpt, "ids", &t) == RA_OK && strcmp(t.dtype, "I64") == 0 &&
              memcmp(t.data, ids, sizeof ids) == 0 &&
              strcmp(t.file, path_of("part-2.safetensors")) == 0, "I64 ids");
    CHECK(ra_hf_checkpoint_tensor(ckpt, "scalar", &t) == RA_OK && t.ndim == 0 && t.count == 1,
          "0-d");
    /* an older caller's struct: nothing written past its struct_size */
    struct { ra_hf_tensor t; int64_t guard; } older;
    memset(&older, 0x5a, sizeof older);
    older.t.struct_size = RA_HF_TENSOR_SIZE_V1 - 8; /* without file */
    expect(ra_hf_checkpoint_tensor(ckpt, "ids", &older.t), RA_ERR_ARGUMENT, "struct_size",
           "a struct_size below the first");
    older.t.struct_size = sizeof older.t;
    CHECK(ra_hf_checkpoint_tensor(ckpt, "ids", &older.t) == RA_OK &&
              older.t.struct_size == sizeof older.t && older.guard == 0x5a5a5a5a5a5a5a5a,
          "a struct_size of its own");
    expect(ra_hf_checkpoint_tensor(ckpt, "model.embed_tokens", &t), RA_ERR_NOT_FOUND,
           "no tensor 'model.embed_tokens'", "a missing tensor");
    expect(ra_hf_checkpoint_tensor(ckpt, NULL, &t), RA_ERR_NULL, "name", "NULL name");
    /* read into float32 */
    float x[6];
    CHECK(ra_hf_checkpoint_read_f32(ckpt, "model.embed_tokens.weight", x, 6) == RA_OK &&
              memcmp(x, emb, sizeof emb) == 0, "F32: %s", ra_hf_last_error());
    CHECK(ra_hf_checkpoint_read_f32(ckpt, "model.norm.weight", x, 2) == RA_OK && x[0] == 1.0f &&
              x[1] == -2.0f, "BF16: %s", ra_hf_last_error());
    CHECK(ra_hf_checkpoint_read_f32(ckpt, "half", x, 2) == RA_OK && x[0] == 1.0f &&
              x[1] == 0.5f, "F16: %s", ra_hf_last_error());
    CHECK(ra_hf_checkpoint_read_f32(ckpt, "double", x, 2) == RA_OK && x[0] == 0.1f &&
              x[1] == -1.0f / 3.0f, "F64: %s", ra_hf_last_error());
    x[0] = 42.0f;
    expect(ra_hf_checkpoint_read_f32(ckpt, "big", x, 1), RA_ERR_FORMAT,
           "tensor 'big' in ", "F64 1e39");
    CHECK(strstr(ra_hf_last_error(), "part-2.safetensors") &&
              strstr(ra_hf_last_error(), "beyond float32's range") && x[0] == 42.0f,
          "F64 1e39: %s, x %g", ra_hf_last_error(), (double)x[0]);
    expect(ra_hf_checkpoint_read_f32(ckpt, "ids", x, 2), RA_ERR_DTYPE, "has dtype I64",
           "I64 into float32");
    expect(ra_hf_checkpoint_read_f32(ckpt, "double", x, 3), RA_ERR_SIZE, "holds 2 values",
           "room for 3");
    expect(ra_hf_checkpoint_read_f32(ckpt, "double", NULL, 2), RA_ERR_NULL, "dst", "NULL dst");
    expect(ra_hf_checkpoint_read_f32(ckpt, "absent", x, 2), RA_ERR_NOT_FOUND, "in any of its shards",
           "a missing tensor, sharded");
    ra_hf_checkpoint_close(ckpt);
    const char *files[] = {"part-1.safetensors", "part-2.safetensors", "parts.index.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(path_of(files[i]));
}

/* Any key of a config.json, top-level by name or nested by JSON Pointer:
 * each getter's kind, absent and null keys, values of another kind. */
static void test_config_keys(void)
{
    static const char text[] =
        "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"vocab_size\": 32000, "
        "\"tie_word_embeddings\": false, \"rms_norm_eps\": 1e-05, \"eos_token_id\": [1, 2], "
        "\"bos_token_id\": null, \"torch_dtype\": \"bfloat16\", \"a/b\": 1, \"m~n\": 2, "
        "\"text_config\": {\"num_hidden_layers\": 4, \"hidden_act\": \"silu\"}, "
        "\"big\": 9007199254740992, \"frac\": 2.5, \"whole\": 4096.0, \"flag\": 1, "
        "\"huge\": 1e400, \"dup\": {\"x\": 1, \"x\": 2}}";
    ra_hf_config *c = NULL;
    CHECK(ra_hf_config_parse(&c, text, strlen(text)) == RA_OK, "%s", ra_hf_last_error());
    if (!c) return;
    int64_t i = -1;
    double d = -1;
    int b = -1;
    const char *str = NULL;
    CHECK(ra_hf_config_int(c, "num_hidden_layers", &i) == RA_OK && i == 2, "layers");
    CHECK(ra_hf_config_int(c, "vocab_size", &i) == RA_OK && i == 32000, "vocab_size");
    CHECK(ra_hf_config_int(c, "/text_config/num_hidden_layers", &i) == RA_OK && i == 4,
          "text_config's layers");
    CHECK(ra_hf_config_int(c, "/eos_token_id/1", &i) == RA_OK && i == 2, "eos 1");
    CHECK(ra_hf_config_int(c, "whole", &i) == RA_OK && i == 4096, "4096.0");
    CHECK(ra_hf_config_int(c, "/a~1b", &i) == RA_OK && i == 1 &&
              ra_hf_config_int(c, "a/b", &i) == RA_OK && i == 1, "a key with a slash");
    CHECK(ra_hf_config_int(c, "/m~0n", &i) == RA_OK && i == 2 &&
              ra_hf_config_int(c, "m~n", &i) == RA_OK && i == 2, "a key with a tilde");
    CHECK(ra_hf_config_double(c, "rms_norm_eps", &d) == RA_OK && d == 1e-05, "eps");
    CHECK(ra_hf_config_double(c, "num_hidden_layers", &d) == RA_OK && d == 2.0, "2 as double");
    CHECK(ra_hf_config_bool(c, "tie_word_embeddings", &b) == RA_OK && b == 0, "tie");
    CHECK(ra_hf_config_bool(c, "flag", &b) == RA_OK && b == 1, "1 as true");
    CHECK(ra_hf_config_string(c, "torch_dtype", &str) == RA_OK && strcmp(str, "bfloat16") == 0,
          "torch_dtype");
    CHECK(ra_hf_config_string(c, "/text_config/hidden_act", &str) == RA_OK &&
              strcmp(str, "silu") == 0, "hidden_act");
    CHECK(ra_hf_config_length(c, "eos_token_id", &i) == RA_OK && i == 2 &&
              ra_hf_config_length(c, "text_config", &i) == RA_OK && i == 2, "lengths");
    /* kinds */
    static const struct {
        const char *key;
        ra_hf_value_kind kind;
    } kinds[] = {{"bos_token_id", RA_HF_NULL},  {"pad_token_id", RA_HF_ABSENT},
                 {"eos_token_id", RA_HF_ARRAY}, {"text_config", RA_HF_OBJECT},
                 {"flag", RA_HF_NUMBER},        {"tie_word_embeddings", RA_HF_BOOL},
                 {"model_type", RA_HF_STRING},  {"/eos_token_id/2", RA_HF_ABSENT},
                 {"/eos_token_id/01", RA_HF_ABSENT}, {"/eos_token_id/-1", RA_HF_ABSENT},
                 {"/vocab_size/0", RA_HF_ABSENT}, {"/text_config/vocab_size", RA_HF_ABSENT},
                 {"/text_config", RA_HF_OBJECT}, {"/text_config/", RA_HF_ABSENT}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        ra_hf_value_kind kind = (ra_hf_value_kind)-1;
        ra_status st = ra_hf_config_kind(c, kinds[k].key, &kind);
        CHECK(st == RA_OK && kind == kinds[k].kind, "%s: status %d, kind %d", kinds[k].key,
              (int)st, (int)kind);
    }
    /* absent, null, another kind: *out untouched */
    i = -1;
    expect(ra_hf_config_int(c, "pad_token_id", &i), RA_ERR_NOT_FOUND, "no \"pad_token_id\"",
           "absent");
    expect(ra_hf_config_int(c, "bos_token_id", &i), RA_ERR_NOT_FOUND, "\"bos_token_id\" is null",
           "null");
    expect(ra_hf_config_int(c, "frac", &i), RA_ERR_FORMAT, "\"frac\" is not an integer", "2.5");
    expect(ra_hf_config_int(c, "big", &i), RA_ERR_FORMAT, "not an integer", "2^53");
    expect(ra_hf_config_int(c, "torch_dtype", &i), RA_ERR_FORMAT, "not an integer", "a string");
    CHECK(i == -1, "out written on failure");
    expect(ra_hf_config_double(c, "huge", &d), RA_ERR_FORMAT, "within double's range", "1e400");
    expect(ra_hf_config_bool(c, "vocab_size", &b), RA_ERR_FORMAT, "not true or false", "32000");
    expect(ra_hf_config_string(c, "vocab_size", &str), RA_ERR_FORMAT, "not a string", "number");
    expect(ra_hf_config_length(c, "vocab_size", &i), RA_ERR_FORMAT, "not an array or an object",
           "length of a number");
    expect(ra_hf_config_int(c, "/dup/x", &i), RA_ERR_FORMAT, "holds the key \"x\" twice",
           "a key twice");
    expect(ra_hf_config_int(c, "/m~2n", &i), RA_ERR_ARGUMENT, "followed by 0 or 1", "~2");
    expect(ra_hf_config_int(c, "/m~", &i), RA_ERR_ARGUMENT, "followed by 0 or 1", "~ at the end");
    expect(ra_hf_config_int(NULL, "vocab_size", &i), RA_ERR_NULL, "config", "NULL config");
    expect(ra_hf_config_int(c, NULL, &i), RA_ERR_NULL, "key", "NULL key");
    expect(ra_hf_config_int(c, "vocab_size", NULL), RA_ERR_NULL, "out", "NULL out");
    /* the file's values: an override does not show */
    CHECK(ra_hf_config_set_rope_theta(c, 1e6) == RA_OK, "theta");
    expect(ra_hf_config_double(c, "rope_theta", &d), RA_ERR_NOT_FOUND, "no \"rope_theta\"",
           "an override");
    ra_hf_config_close(c);
}

/* A config's rope, each key the type needs checked. */
static void test_rope_config(void)
{
    static const char llama3[] =
        "{\"head_dim\": 64, \"rope_theta\": 500000, \"rope_scaling\": {\"rope_type\": "
        "\"llama3\", \"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4, "
        "\"original_max_position_embeddings\": 8192}}";
    ra_hf_config *config = NULL;
    CHECK(ra_hf_config_parse(&config, llama3, strlen(llama3)) == RA_OK, "%s",
          ra_hf_last_error());
    ra_rope_config rope;
    ra_hf_options o = ra_hf_options_init();
    CHECK(ra_hf_rope_config(config, &o, &rope) == RA_OK, "%s", ra_hf_last_error());
    CHECK(rope.type == RA_ROPE_LLAMA3 && rope.head_dim == 64 && rope.rotary_dim == 64 &&
          rope.theta == 500000 && rope.factor == 8 && rope.high_freq_factor == 4 &&
          rope.original_max_position_embeddings == 8192 && rope.layout == RA_LAYOUT_HALF,
          "llama3 rope");
    ra_rope *r = NULL;
    CHECK(ra_rope_create(&r, &rope) == RA_OK, "%s", ra_last_error());
    ra_rope_destroy(r);
    static const char yarn[] = "{\"rope_type\": \"yarn\"}";
    CHECK(ra_hf_config_set_rope_parameters(config, yarn, strlen(yarn)) == RA_OK, "%s",
          ra_hf_last_error());
    expect(ra_hf_rope_config(config, &o, &rope), RA_ERR_NOT_FOUND, "factor",
           "yarn without factor or the lengths");
    ra_hf_config_close(config);
    /* No config: theta 10000, Meta's interleaved pairs; head_dim required. */
    o.head_dim = 16;
    CHECK(ra_hf_rope_config(NULL, &o, &rope) == RA_OK && rope.theta == 10000 &&
          rope.layout == RA_LAYOUT_INTERLEAVED, "no config");
    o.head_dim = 0;
    expect(ra_hf_rope_config(NULL, &o, &rope), RA_ERR_ARGUMENT, "head_dim", "no head_dim");
    /* dynamic scales by the length: refused when it is not known. */
    static const char dynamic[] = "{\"head_dim\": 16, \"max_position_embeddings\": 64, "
                                  "\"rope_scaling\": {\"rope_type\": \"dynamic\", "
                                  "\"factor\": 2}}";
    CHECK(ra_hf_config_parse(&config, dynamic, strlen(dynamic)) == RA_OK, "%s",
          ra_hf_last_error());
    o = ra_hf_options_init();
    expect(ra_hf_rope_config(config, &o, &rope), RA_ERR_ARGUMENT, "seq_len",
           "dynamic without a length");
    o.n_tokens = 100;
    CHECK(ra_hf_rope_config(config, &o, &rope) == RA_OK && rope.seq_len == 100 &&
          rope.table_size == 100, "dynamic over 100 tokens: seq_len %lld",
          (long long)rope.seq_len);
    ra_hf_config_close(config);
}

/* Gemma 4: each layer's rope at its own head_dim (per_layer_config); the
 * full layers' "proportional" rope turns int(partial_rotary_factor * D //
 * 2) of the D / 2 pairs (rotating_pairs), by the linear rope with a factor;
 * its default rope all of head_dim, whatever partial_rotary_factor says;
 * without a layer, which head_dim is not known: refused. */
static void test_proportional_rope_config(void)
{
    static const char gemma4[] =
        "{\"model_type\": \"gemma4_text\", \"head_dim\": 8, \"num_hidden_layers\": 2, "
        "\"layer_types\": [\"sliding_attention\", \"full_attention\"], \"per_layer_config\": "
        "{\"1\": {\"head_dim\": 16}}, \"rope_parameters\": {\"sliding_attention\": "
        "{\"rope_type\": \"default\", \"rope_theta\": 10000.0, \"partial_rotary_factor\": 0.5}, "
        "\"full_attention\": "
        "{\"rope_type\": \"proportional\", \"partial_rotary_factor\": 0.25, \"factor\": 4, "
        "\"rope_theta\": 1000000.0}}}";
    ra_hf_config *config = NULL;
    CHECK(ra_hf_config_parse(&config, gemma4, strlen(gemma4)) == RA_OK, "%s",
          ra_hf_last_error());
    ra_rope_config rope;
    ra_hf_options o = ra_hf_options_init();
    o.layer = 1;
    CHECK(ra_hf_rope_config(config, &o, &rope) == RA_OK, "%s", ra_hf_last_error());
    CHECK(rope.head_dim == 16 && rope.rotary_dim == 16 && rope.rotating_pairs == 2 &&
              rope.type == RA_ROPE_LINEAR && rope.factor == 4 && rope.theta == 1e6,
          "layer 1: head_dim %lld, rotary_dim %lld, rotating_pairs %lld, type %d",
          (long long)rope.head_dim, (long long)rope.rotary_dim, (long long)rope.rotating_pairs,
          (int)rope.type);
    o.layer = 0;
    CHECK(ra_hf_rope_config(config, &o, &rope) == RA_OK && rope.head_dim == 8 &&
              rope.rotary_dim == 8 && rope.rotating_pairs == 0 && rope.theta == 1e4,
          "layer 0: %s", ra_hf_last_error());
    o.layer = -1;
    expect(ra_hf_rope_config(config, &o, &rope), RA_ERR_ARGUMENT, "name the layer",
           "no layer");
    ra_hf_config_close(config);
}

/* What a config says of attention, for a program that reads the tensors
 * itself (ra_hf_config_attention and the calls after it), and each call's
 * refusal of a bad argument, named. */
static void test_config_attention(void)
{
    static const char llama[] = "{\"model_type\": \"llama\", \"num_attention_heads\": 4, "
                                "\"num_key_value_heads\": 2, \"hidden_size\": 64, "
                                "\"rope_theta\": 500000.0, \"partial_rotary_factor\": 0.5}";
    ra_hf_config *config = NULL, *empty = NULL;
    CHECK(ra_hf_config_parse(&config, llama, strlen(llama)) == RA_OK, "%s", ra_hf_last_error());
    CHECK(ra_hf_config_parse(&empty, "{}", 2) == RA_OK, "%s", ra_hf_last_error());
    CHECK(sizeof(ra_hf_attention_info) == RA_HF_ATTENTION_INFO_SIZE_V1,
          "ra_hf_attention_info has %zu bytes", sizeof(ra_hf_attention_info));
    ra_hf_attention_info a = ra_hf_attention_info_init();
    CHECK(ra_hf_config_attention(config, -1, &a) == RA_OK && a.n_heads == 4 &&
              a.n_kv_heads == 2 && a.head_dim == 16 && !a.head_dim_given &&
              a.layer_n_heads == 4 && a.layer_head_dim == 0 && a.layout == RA_LAYOUT_HALF &&
              a.cos_sin_halves && !a.gated_queries && !a.values_from_keys && !a.latent &&
              !a.cache_window && a.position_components == 1,
          "llama: %s", ra_hf_last_error());
    CHECK(ra_hf_config_attention(empty, 3, &a) == RA_OK && a.n_heads == 0 && a.head_dim == 0 &&
              a.layout == -1 && a.cos_sin_halves,
          "{}: %s", ra_hf_last_error());
    double theta = 0;
    CHECK(ra_hf_config_rope_theta(config, &theta) == RA_OK && theta == 5e5, "theta %g",
          theta);
    expect(ra_hf_config_rope_theta(empty, &theta), RA_ERR_NOT_FOUND, "rope_theta", "no theta");
    int64_t rotary_dim = 0, packing = 0, kv = 0, layer = 0;
    /* Llama's rotary embedding turns all of head_dim whatever
     * partial_rotary_factor says (transformers 5); Phi's reads it */
    CHECK(ra_hf_config_rotary_dim(config, 16, &rotary_dim) == RA_OK && rotary_dim == 16,
          "rotary_dim %lld", (long long)rotary_dim);
    static const char phi[] = "{\"model_type\": \"phi\", \"partial_rotary_factor\": 0.5}";
    ra_hf_config *partial = NULL;
    CHECK(ra_hf_config_parse(&partial, phi, strlen(phi)) == RA_OK, "%s", ra_hf_last_error());
    CHECK(ra_hf_config_rotary_dim(partial, 16, &rotary_dim) == RA_OK && rotary_dim == 8,
          "phi: rotary_dim %lld", (long long)rotary_dim);
    expect(ra_hf_config_rotary_dim(partial, 6, &rotary_dim), RA_ERR_HEAD_DIM, "even",
           "3 rotary features");
    ra_hf_config_close(partial);
    /* Llama's model under other names (InternLM2's remote code, InternLM3,
     * IQuest-Coder) and DBRX: their rotary embeddings turn all of head_dim
     * whatever partial_rotary_factor says (hf_sweep --variant partial) */
    static const char *const whole[] = {"internlm2", "internlm3", "iquestcoder", "dbrx"};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
        char json[200];
        snprintf(json, sizeof json, "{\"model_type\": \"%s\", \"rope_theta\": 1e4, "
                 "\"partial_rotary_factor\": 0.5}", whole[i]);
        ra_hf_config *c = NULL;
        rotary_dim = 0;
        CHECK(ra_hf_config_parse(&c, json, strlen(json)) == RA_OK &&
                  ra_hf_config_rotary_dim(c, 16, &rotary_dim) == RA_OK && rotary_dim == 16,
              "%s: rotary_dim %lld (%s)", whole[i], (long long)rotary_dim, ra_hf_last_error());
        ra_hf_config_close(c);
    }
    CHECK(ra_hf_tensor_layer("model.layers.12.self_attn.q_proj.weight", &layer) == RA_OK &&
              layer == 12, "layer %lld", (long long)layer);
    CHECK(ra_hf_tensor_layer("model.embed_tokens.weight", &layer) == RA_OK && layer == -1,
          "no layer: %lld", (long long)layer);
    expect(ra_hf_tensor_layer("model.layers.007.mlp.weight", &layer), RA_ERR_FORMAT, "malformed",
           "layer 007");
    expect(ra_hf_config_qkv_packing(NULL, "h.0.query_key_value.weight", "w.safetensors", 4,
                                    &packing, &kv),
           RA_ERR_UNSUPPORTED, "query_key_value", "packing without a config");
    { /* CodeGen's qkv_proj: q, v and k per model-parallel group, as its row says */
        static const char json[] = "{\"model_type\": \"codegen\", \"n_embd\": 64, \"n_head\": 8}";
        ra_hf_config *c = NULL;
        packing = kv = 0;
        CHECK(ra_hf_config_parse(&c, json, strlen(json)) == RA_OK &&
                  ra_hf_config_qkv_packing(c, "transformer.h.0.attn.qkv_proj.weight", "w", 8,
                                           &packing, &kv) == RA_OK &&
                  packing == RA_HF_QKV_QVK_GROUPS && kv == 8,
              "codegen: packing %lld, %lld key/value heads (%s)", (long long)packing,
              (long long)kv, ra_hf_last_error());
        ra_hf_config_close(c);
    }
    /* the bad argument, named */
    expect(ra_hf_config_attention(NULL, -1, &a), RA_ERR_NULL, "config", "NULL config");
    expect(ra_hf_config_attention(config, -2, &a), RA_ERR_ARGUMENT, "layer -2", "layer -2");
    a.struct_size = 8;
    expect(ra_hf_config_attention(config, -1, &a), RA_ERR_ARGUMENT, "struct_size", "old size");
    expect(ra_hf_config_rope_theta(config, NULL), RA_ERR_NULL, "theta", "NULL theta");
    expect(ra_hf_config_rotary_dim(config, 0, &rotary_dim), RA_ERR_ARGUMENT, "head_dim",
           "head_dim 0");
    expect(ra_hf_config_qkv_packing(config, "qkv", "w", 0, &packing, &kv), RA_ERR_ARGUMENT,
           "n_heads", "n_heads 0");
    expect(ra_hf_config_qkv_packing(config, NULL, "w", 4, &packing, &kv), RA_ERR_NULL,
           "tensor", "NULL tensor");
    expect(ra_hf_tensor_layer(NULL, &layer), RA_ERR_NULL, "name", "NULL name");
    ra_hf_config_close(empty);
    ra_hf_config_close(config);
}

/* A config.json that leaves keys out gets transformers' config-class
 * defaults: head_dim 256 for Gemma, Gemma 2 and VaultGemma, 128 for Qwen3,
 * GLM and GLM-4 (hidden_size / num_attention_heads was taken: 16 here, the
 * rope 16 features wide); and a multimodal model_type whose config class
 * builds its text model from the default text_config when there is none
 * reads none of the top level's keys (its hidden_size, heads and
 * rope_theta were read as the text model's). */
static void test_config_class_defaults(void)
{
    static const struct {
        const char *model_type;
        int64_t head_dim, n_heads; /* transformers' */
        int text_default;          /* the default text_config's, or 0 (not said) */
    } cases[] = {
        {"gemma", 256, 4, 0}, {"gemma2", 256, 4, 0}, {"vaultgemma", 256, 4, 0},
        {"qwen3", 128, 4, 0}, {"glm", 128, 4, 0}, {"glm4", 128, 4, 0},
        {"llama", 16, 4, 0}, {"mistral", 16, 4, 0},
        {"mistral3", 128, 32, 1}, {"gemma3", 256, 8, 1},
        {"llama4", 128, 40, 1}, {"qwen3_5", 256, 16, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[256];
        snprintf(json, sizeof json, "{\"model_type\": \"%s\", \"hidden_size\": 64, "
                 "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                 "\"rope_theta\": 1234.0}", cases[i].model_type);
        ra_hf_config *config = NULL;
        ra_hf_attention_info a = ra_hf_attention_info_init();
        CHECK(ra_hf_config_parse(&config, json, strlen(json)) == RA_OK &&
                  ra_hf_config_attention(config, -1, &a) == RA_OK,
              "%s: %s", cases[i].model_type, ra_hf_last_error());
        int d = cases[i].text_default;
        CHECK((a.head_dim == cases[i].head_dim || (d && !a.head_dim)) &&
                  (a.n_heads == cases[i].n_heads || (d && !a.n_heads)),
              "%s: head_dim %lld, %lld heads; transformers: %lld, %lld", cases[i].model_type,
              (long long)a.head_dim, (long long)a.n_heads, (long long)cases[i].head_dim,
              (long long)cases[i].n_heads);
        double theta = 0;
        ra_status got = ra_hf_config_rope_theta(config, &theta);
        CHECK(d ? got != RA_OK || theta != 1234.0 : got == RA_OK && theta == 1234.0,
              "%s: rope_theta %g (status %d)", cases[i].model_type, theta, (int)got);
        ra_hf_config_close(config);
    }
    /* ApertusConfig's rope_theta, 12e6, where the rope the file gives has
     * none (10000 was taken) */
    static const char apertus[] = "{\"model_type\": \"apertus\", \"rope_scaling\": "
                                  "{\"rope_type\": \"linear\", \"factor\": 2.0}}";
    ra_hf_config *config = NULL;
    double theta = 0;
    CHECK(ra_hf_config_parse(&config, apertus, strlen(apertus)) == RA_OK &&
              ra_hf_config_rope_theta(config, &theta) == RA_OK && theta == 12e6,
          "apertus: rope_theta %g: %s", theta, ra_hf_last_error());
    ra_hf_config_close(config);
}

/* partial_rotary_factor: transformers 5's Llama-like families turn all of
 * head_dim in their default rope whatever it says (it was applied: 8 of 16
 * features turned), and fail on it with a scaled rope (refused); the
 * families whose rotary embedding reads it (Phi, StableLM ...) keep it. */
static void test_partial_rotary_read_or_not(void)
{
    static const struct {
        const char *model_type, *rope;
        int64_t rotary_dim; /* 0: refused */
    } cases[] = {
        {"llama", "\"rope_type\": \"default\"", 16},
        {"qwen2", "\"rope_type\": \"default\"", 16},
        {"mistral", "\"rope_type\": \"linear\", \"factor\": 2.0", 0},
        {"phi", "\"rope_type\": \"default\"", 8},
        {"stablelm", "\"rope_type\": \"default\"", 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[384];
        snprintf(json, sizeof json, "{\"model_type\": \"%s\", \"hidden_size\": 64, "
                 "\"num_attention_heads\": 4, \"head_dim\": 16, \"rope_parameters\": {%s, "
                 "\"rope_theta\": 5000.0, \"partial_rotary_factor\": 0.5}}",
                 cases[i].model_type, cases[i].rope);
        ra_hf_config *config = NULL;
        ra_status parsed = ra_hf_config_parse(&config, json, strlen(json));
        int64_t rotary_dim = 0;
        if (cases[i].rotary_dim) {
            CHECK(parsed == RA_OK && ra_hf_config_rotary_dim(config, 16, &rotary_dim) == RA_OK &&
                      rotary_dim == cases[i].rotary_dim,
                  "%s: rotary_dim %lld, transformers %lld: %s", cases[i].model_type,
                  (long long)rotary_dim, (long long)cases[i].rotary_dim, ra_hf_last_error());
        } else {
            CHECK(parsed == RA_ERR_UNSUPPORTED &&
                      strstr(ra_hf_last_error(), "partial_rotary_factor") != NULL,
                  "%s: %d %s", cases[i].model_type, (int)parsed, ra_hf_last_error());
        }
        ra_hf_config_close(config);
    }
    /* GPT-NeoX's config classes fill their rope from rotary_pct and
     * rotary_emb_base (else 0.25 or 1, and 10000): a top-level
     * partial_rotary_factor or rope_theta is never read (it was taken) */
    static const char *const neox[] = {
        "{\"model_type\": \"gpt_neox\", \"partial_rotary_factor\": 0.5}",
        "{\"model_type\": \"gpt_neox_japanese\", \"rope_theta\": 5000.0}",
        "{\"model_type\": \"gpt_neox\", \"rotary_pct\": 0.5}",
        "{\"model_type\": \"gpt_neox\", \"rotary_pct\": 0.5, \"partial_rotary_factor\": 0.5}",
    };
    for (int i = 0; i < 4; i++) {
        ra_hf_config *config = NULL;
        ra_status parsed = ra_hf_config_parse(&config, neox[i], strlen(neox[i]));
        int64_t rotary_dim = 0;
        if (i < 2)
            CHECK(parsed == RA_ERR_UNSUPPORTED && strstr(ra_hf_last_error(), "never reads it"),
                  "%s: %d %s", neox[i], (int)parsed, ra_hf_last_error());
        else
            CHECK(parsed == RA_OK && ra_hf_config_rotary_dim(config, 16, &rotary_dim) == RA_OK &&
                      rotary_dim == 8,
                  "%s: rotary_dim %lld: %s", neox[i], (long long)rotary_dim, ra_hf_last_error());
        ra_hf_config_close(config);
    }
}

/* M-RoPE's sections from config.json: the family decides the arrangement
 * (Qwen3-VL interleaves whatever mrope_interleaved says; a Qwen2-VL config
 * that says it interleaves is refused); without a family, the key does; a
 * family without M-RoPE refuses sections set by --rope-parameters. */
#define QSA_KEYS                                                                         \
    "\"indexer_n_heads\": 2, \"indexer_kv_heads\": 1, \"indexer_head_dim\": 128, "           \
    "\"indexer_budget\": 8, \"indexer_compress_ratio\": 4"
static void test_mrope_config(void)
{
    static const struct {
        const char *json;
        int64_t s0;
        int interleaved;
        ra_status status;
        const char *why;
    } cases[] = {
        {"{\"model_type\": \"qwen2_vl\", \"head_dim\": 128, \"rope_scaling\": {\"type\": "
         "\"mrope\", \"mrope_section\": [16, 24, 24]}}", 16, 0, RA_OK, NULL},
        {"{\"model_type\": \"qwen3_vl\", \"text_config\": {\"model_type\": \"qwen3_vl_text\", \"rope_theta\": 5e6, "
         "\"head_dim\": 128, \"rope_scaling\": {\"rope_type\": \"default\", "
         "\"mrope_section\": [24, 20, 20], \"mrope_interleaved\": true}}}", 24, 1, RA_OK, NULL},
        {"{\"model_type\": \"qwen3_vl_text\", \"rope_theta\": 5e6, \"head_dim\": 128, \"rope_parameters\": "
         "{\"rope_type\": \"default\", \"mrope_section\": [24, 20, 20]}}", 24, 1, RA_OK, NULL},
        {"{\"model_type\": \"qwen3_vl_text\", \"rope_theta\": 5e6, \"head_dim\": 128, \"rope_scaling\": "
         "{\"mrope_section\": [24, 20, 20], \"mrope_interleaved\": false}}", 0, 0,
         RA_ERR_UNSUPPORTED, "\"mrope_interleaved\" is false"},
        {"{\"model_type\": \"qwen2_5_vl\", \"head_dim\": 128, \"rope_scaling\": "
         "{\"mrope_section\": [16, 24, 24], \"mrope_interleaved\": true}}", 0, 0,
         RA_ERR_UNSUPPORTED, "\"mrope_interleaved\" is true"},
        {"{\"head_dim\": 128, \"rope_parameters\": {\"mrope_section\": [16, 24, 24]}}", 0, 0,
         RA_ERR_UNSUPPORTED, "supported for the Qwen-VL families only"},
        /* Qwen2-VL's rotary embedding turns all of head_dim whatever
         * partial_rotary_factor says (transformers 5) */
        {"{\"model_type\": \"qwen2_vl\", \"head_dim\": 128, \"partial_rotary_factor\": 0.5, "
         "\"rope_scaling\": {\"type\": \"mrope\", \"mrope_section\": [16, 24, 24]}}", 16, 0,
         RA_OK, NULL},
        {"{\"model_type\": \"qwen2_vl\", \"head_dim\": 128}", 0, 0, RA_OK, NULL},
        /* Qwen3-VL's code: [24, 20, 20] when the config gives none; time
         * takes the pairs past height's and width's at other head sizes,
         * and below 60 pairs (where the code cuts its slices short) none */
        {"{\"model_type\": \"qwen3_vl_text\", \"rope_theta\": 5e6, \"head_dim\": 128}", 24, 1, RA_OK, NULL},
        {"{\"model_type\": \"qwen3_vl_text\", \"rope_theta\": 5e6, \"head_dim\": 160}", 40, 1, RA_OK, NULL},
        {"{\"model_type\": \"qwen3_vl_text\", \"rope_theta\": 5e6, \"head_dim\": 64}", 0, 0, RA_OK, NULL},
        /* Qwen4-Exp's code defaults to [11, 11, 10], not taken (3-D positions
         * then refused); given sections are */
        /* Qwen3.5's too ([11, 11, 10]): at 64 pairs not Qwen3-VL's [24, 20, 20] */
        {"{\"model_type\": \"qwen3_5_text\", \"head_dim\": 128, \"partial_rotary_factor\": 1}",
         0, 0, RA_OK, NULL},
        {"{\"model_type\": \"qwen4_exp_text\", \"head_dim\": 128, " QSA_KEYS "}", 0, 0, RA_OK,
         NULL},
        {"{\"model_type\": \"qwen4_exp_text\", \"head_dim\": 128, " QSA_KEYS ", "
         "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e7, "
         "\"mrope_section\": [42, 11, 11]}}", 42, 1, RA_OK, NULL},
        /* Cohere Compass: layer 0's (sliding) rope by layer type, [24, 20, 20]
         * as Qwen3-VL's where it gives none (head_dim 512 / 4) */
        {"{\"model_type\": \"cohere_compass_text\", \"hidden_size\": 512, "
         "\"num_attention_heads\": 4, \"layer_types\": [\"sliding_attention\", "
         "\"full_attention\"], \"rope_parameters\": {\"full_attention\": null, "
         "\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1e4}}}", 24, 1,
         RA_OK, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ra_hf_config *config = NULL;
        CHECK(ra_hf_config_parse(&config, cases[i].json, strlen(cases[i].json)) == RA_OK ||
                  cases[i].status != RA_OK, "%zu: %s", i, ra_hf_last_error());
        if (!config) {
            CHECK(strstr(ra_hf_last_error(), cases[i].why), "%zu: %s", i, ra_hf_last_error());
            continue;
        }
        ra_rope_config rope;
        ra_hf_options o = ra_hf_options_init();
        o.layer = 0;
        ra_status st = ra_hf_rope_config(config, &o, &rope);
        CHECK(st == cases[i].status, "%zu: status %d: %s", i, (int)st, ra_hf_last_error());
        if (st == RA_OK)
            CHECK(rope.mrope_section[0] == cases[i].s0 &&
                      rope.mrope_interleaved == cases[i].interleaved, "%zu: sections", i);
        else
            CHECK(strstr(ra_hf_last_error(), cases[i].why), "%zu: %s", i, ra_hf_last_error());
        ra_hf_config_close(config);
    }
    /* --rope-parameters: sections without a family take mrope_interleaved as
     * it is; a family without M-RoPE refuses them. */
    static const char sections[] = "{\"mrope_section\": [3, 3, 2], \"mrope_interleaved\": true}";
    ra_hf_config *config = NULL;
    ra_rope_config rope;
    ra_hf_options o = ra_hf_options_init();
    o.head_dim = 16;
    CHECK(ra_hf_config_parse(&config, "{}", 2) == RA_OK &&
              ra_hf_config_set_rope_parameters(config, sections, strlen(sections)) == RA_OK &&
              ra_hf_rope_config(config, &o, &rope) == RA_OK && rope.mrope_interleaved == 1 &&
              rope.mrope_section[2] == 2, "no family: %s", ra_hf_last_error());
    ra_hf_config_close(config);
    static const char llama[] = "{\"model_type\": \"llama\"}";
    CHECK(ra_hf_config_parse(&config, llama, strlen(llama)) == RA_OK &&
              ra_hf_config_set_rope_parameters(config, sections, strlen(sections)) == RA_OK,
          "llama");
    expect(ra_hf_rope_config(config, &o, &rope), RA_ERR_UNSUPPORTED, "not model_type \"llama\"",
           "sections on llama");
    ra_hf_config_close(config);
}
#undef QSA_KEYS

/* The layers run the SIMD kernels: every case on every path (harness.h). */
static void simd_cases(void)
{
    RUN(test_stored_dtype);
    RUN(test_layer_equals_by_hand);
    RUN(test_fused_gradients);
    RUN(test_latent_attention);
    RUN(test_failures);
    RUN(test_head_dim_option);
    RUN(test_rope_config);
    RUN(test_proportional_rope_config);
    RUN(test_mrope_config);
}

/* The family table's listing: sorted, each model_type read by
 * ra_hf_config_parse as listed (a refused one refused with its reason). */
static void test_family_listing(void)
{
    int64_t n = ra_hf_family_count();
    CHECK(n > 0, "%lld families", (long long)n);
    CHECK(ra_hf_family_model_type(-1) == NULL && ra_hf_family_model_type(n) == NULL &&
              ra_hf_family_refused(n) == NULL && ra_hf_family_layout(n) == -1,
          "an index out of range");
    for (int64_t i = 0; i < n; i++) {
        const char *type = ra_hf_family_model_type(i), *why = ra_hf_family_refused(i);
        int layout = ra_hf_family_layout(i);
        CHECK(type && why && (layout == RA_LAYOUT_HALF || layout == RA_LAYOUT_INTERLEAVED),
              "family %lld", (long long)i);
        if (!type || !why) continue;
        CHECK(i == 0 || strcmp(ra_hf_family_model_type(i - 1), type) < 0, "%s: not sorted", type);
        char text[256];
        snprintf(text, sizeof text, "{\"model_type\": \"%s\", \"num_attention_heads\": 4}", type);
        ra_hf_config *c = NULL;
        ra_status st = ra_hf_config_parse(&c, text, strlen(text));
        if (why[0])
            CHECK(st != RA_OK && strstr(ra_hf_last_error(), why), "%s: %s", type,
                  ra_hf_last_error());
        else
            CHECK(st == RA_OK || !strstr(ra_hf_last_error(), "is refused"), "%s: %s", type,
                  ra_hf_last_error());
        ra_hf_config_close(c);
    }
}

int main(void)
{
    if (!mkdtemp(folder)) {
        perror("mkdtemp");
        return 1;
    }
    ra_test_each_isa(simd_cases);
    RUN(test_tensor_api); /* no kernels: once */
    RUN(test_config_keys);
    RUN(test_family_listing);
    RUN(test_config_attention);
    RUN(test_config_class_defaults);
    RUN(test_partial_rotary_read_or_not);
    const char *files[] = {"llama.safetensors", "phi3.safetensors", "mla.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(path_of(files[i]));
    rmdir(folder);
    return ra_test_summary("hf_api");
}
