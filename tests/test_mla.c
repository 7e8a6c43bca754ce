/*
 * test_mla.c — multi-head latent attention (ra_layer_config.kv_lora_rank):
 * the forward against a double-precision forward written here from
 * transformers' DeepseekV3Attention (q_proj or the q_a/q_b path, biases,
 * both pairings, yarn, mscale_all_dim's softmax scale, windows; the rope's
 * frequencies and attention factor are the library's, checked against
 * transformers in test_rope and tests/families), the
 * gradients of x and every weight against central finite differences of
 * it, the cached forward (prefill, absorbed decode, multi-token steps; f32,
 * f16 and bf16 latent caches) against the uncached one, identical bits for
 * any thread count, ra_attention_decode on a latent cache (the absorbed
 * core), and the refusals; the output gated by a projection of its own
 * (wgate: per head as Ling's and dots3's g_proj, per feature as HY-V4's
 * gate_proj; bgate, softplus), or by rows of wq_b (or wq) after each
 * head's, and wq_b reading the q latent after its norm and before it
 * (q_b_raw_latent; both: A.X-K2's q_gate_proj), and q scaled by its position
 * (temperature_floor: Mistral 4's, Llama 4's), through all of these.
 *
 * Dims: B batch, S seq, H heads, Dn + Dr = D the q/k head (Dr rotates), Dv
 * v's head, r kv_lora_rank, rq q_lora_rank (0: q_proj), dim the model's.
 * L = sum(y * dy) for a fixed random dy.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "quant8.h"
#include "ropeattn.h"

/* Forward against the double reference, max |y - ref| / max |ref|: the
 * float32 path's rounding, seen at most 2.4e-7; 2e-6.  Gradients against
 * central finite differences (h = 1e-5 in double, exact to ~1e-9 for this
 * smooth L of order 1), max |g - fd| / max |fd| per tensor: seen at most
 * 7.8e-7; 1e-5.  The cached forward (absorbed decode) against the
 * uncached one, relative to max |y|: f32 seen at most 1.7e-7, held to the
 * issue's 1e-5; 16-bit caches round c and kr to 11 (f16) or 8 (bf16)
 * bits: seen 9e-5 and 1.1e-3, held to 1e-3 and 1e-2. */
#define FWD_TOL 2e-6
#define FD_TOL 1e-5
#define FD_STEP 1e-5
#define CACHE_TOL 1e-5

typedef struct mla_case {
    const char *name;
    int64_t b, s, h, dn, dr, dv, r, rq, dim;
    ra_layout layout;
    int yarn;      /* yarn, factor 4 with mscale 1 and mscale_all_dim 0.8 */
    int biases;    /* bq_a, bkv_a, bo */
    int64_t window;
    int ids;       /* positions from ids (else start 3) */
    int gate;      /* 0, or the output gated by wgate: GATE_FEATURE [H Dv, dim] or
                      GATE_HEAD [H, dim], | GATE_BIAS: bgate, | GATE_SOFTPLUS; or
                      GATE_IN_Q: by Dv rows of wq_b (wq) after each head's D;
                      | Q_RAW: wq_b reads [q_a_norm(qa) | qa] */
    int dots;      /* dots.note's: q's latent times 1.5 (with rq), c times 0.7
                      (q_latent_scale, kv_latent_scale), the rotated key
                      RMS-normed before RoPE (k_rope_norm) */
    int temp;      /* q of the token at p times 1 + 0.3 log1p(floor((p + o) / 4)):
                      TEMP_MISTRAL4 (o = 0, temperature_no_offset: Mistral 4's
                      llama_4_scaling_beta) or TEMP_LLAMA4 (o = 1) */
} mla_case;

enum { GATE_FEATURE = 1, GATE_HEAD = 2, GATE_BIAS = 4, GATE_SOFTPLUS = 8, GATE_IN_Q = 16,
       Q_RAW = 32 };
enum { TEMP_MISTRAL4 = 1, TEMP_LLAMA4 = 2 };

static const mla_case cases[] = {
    {"v2-lite-like", 1, 7, 2, 8, 4, 8, 8, 0, 16, RA_LAYOUT_INTERLEAVED, 0, 0, 0, 0, 0, 0, 0},
    {"v3-like", 2, 5, 3, 6, 4, 4, 10, 6, 12, RA_LAYOUT_INTERLEAVED, 1, 1, 0, 0, 0, 0, 0},
    {"half pairs, dv = D", 1, 9, 2, 4, 6, 10, 6, 5, 8, RA_LAYOUT_HALF, 0, 1, 0, 1, 0, 0, 0},
    {"no nope part", 2, 4, 1, 0, 8, 3, 4, 0, 6, RA_LAYOUT_INTERLEAVED, 1, 0, 0, 1, 0, 0, 0},
    {"window 3", 1, 8, 2, 6, 2, 5, 7, 4, 9, RA_LAYOUT_HALF, 0, 0, 3, 0, 0, 0, 0},
    {"gate per head", 1, 7, 3, 6, 4, 5, 8, 0, 12, RA_LAYOUT_INTERLEAVED, 0, 0, 0, 0, GATE_HEAD, 0,
     0},
    {"gate per feature", 2, 5, 2, 4, 4, 6, 6, 5, 10, RA_LAYOUT_HALF, 1, 1, 0, 1, GATE_FEATURE, 0,
     0},
    {"gate: softplus, bias", 1, 6, 2, 4, 2, 3, 5, 4, 8, RA_LAYOUT_INTERLEAVED, 0, 0, 0, 0,
     GATE_FEATURE | GATE_BIAS | GATE_SOFTPLUS, 0, 0},
    {"gate per head, bias", 2, 4, 4, 2, 2, 4, 6, 0, 8, RA_LAYOUT_HALF, 0, 1, 0, 1,
     GATE_HEAD | GATE_BIAS, 0, 0},
    {"dots: scales, k_rope_norm", 2, 5, 2, 4, 4, 6, 6, 5, 10, RA_LAYOUT_INTERLEAVED, 0, 1, 0, 1,
     GATE_HEAD, 1, 0},
    {"dots: kv scale, window", 1, 7, 3, 2, 6, 4, 5, 0, 8, RA_LAYOUT_HALF, 1, 0, 3, 0, 0, 1, 0},
    {"A.X-K2: gate in wq_b, raw q latent", 2, 5, 2, 4, 4, 3, 6, 5, 10, RA_LAYOUT_INTERLEAVED, 0,
     1, 0, 1, GATE_IN_Q | Q_RAW, 0, 0},
    {"gate in wq", 1, 6, 3, 2, 4, 5, 5, 0, 8, RA_LAYOUT_HALF, 0, 0, 0, 0, GATE_IN_Q, 0, 0},
    {"raw q latent", 1, 7, 2, 6, 2, 4, 6, 4, 9, RA_LAYOUT_INTERLEAVED, 1, 0, 0, 0, Q_RAW, 0, 0},
    {"Mistral 4: q by position", 2, 9, 2, 6, 4, 5, 6, 5, 10, RA_LAYOUT_INTERLEAVED, 1, 0, 0, 1,
     0, 0, TEMP_MISTRAL4},
    {"q by position + 1, window", 1, 10, 3, 4, 2, 4, 5, 0, 8, RA_LAYOUT_HALF, 0, 1, 4, 0, 0, 0,
     TEMP_LLAMA4},
};

/* A case's weights (float and double copies), x, dy and positions. */
typedef struct mla_setup {
    mla_case c;
    int64_t T, D, n_x;
    float *w[14];    /* wq, wq_a, bq_a, q_a_norm, wq_b, wkv_a, bkv_a, kv_a_norm, wkv_b, wo, bo,
                        wgate, bgate, k_rope_norm */
    int64_t n_w[14]; /* elements; 0: the case has none */
    float *x, *dy;
    int64_t *ids;
    double inv_freq[32], attention_factor, scale;
    ra_rope_config rope;
    ra_layer *layer;
} mla_setup;

enum { WQ, WQ_A, BQ_A, Q_A_NORM, WQ_B, WKV_A, BKV_A, KV_A_NORM, WKV_B, WO, BO, WGATE, BGATE,
       K_ROPE_NORM, N_W };
static const char *const w_names[N_W] = {"wq", "wq_a", "bq_a", "q_a_norm", "wq_b", "wkv_a",
                                         "bkv_a", "kv_a_norm", "wkv_b", "wo", "bo", "wgate",
                                         "bgate", "k_rope_norm"};

static float uniform(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*state >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}

static float *random_array(int64_t n, float scale, float offset, uint64_t *state)
{
    float *a = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) a[i] = offset + scale * uniform(state);
    return a;
}

static ra_layer_weights weights_of(const mla_setup *s)
{
    ra_layer_weights w = ra_layer_weights_init();
    w.wq = s->n_w[WQ] ? s->w[WQ] : NULL;
    w.wq_a = s->n_w[WQ_A] ? s->w[WQ_A] : NULL;
    w.bq_a = s->n_w[BQ_A] ? s->w[BQ_A] : NULL;
    w.q_a_norm = s->n_w[Q_A_NORM] ? s->w[Q_A_NORM] : NULL;
    w.wq_b = s->n_w[WQ_B] ? s->w[WQ_B] : NULL;
    w.wkv_a = s->w[WKV_A];
    w.bkv_a = s->n_w[BKV_A] ? s->w[BKV_A] : NULL;
    w.kv_a_norm = s->w[KV_A_NORM];
    w.wkv_b = s->w[WKV_B];
    w.wo = s->w[WO];
    w.bo = s->n_w[BO] ? s->w[BO] : NULL;
    w.wgate = s->n_w[WGATE] ? s->w[WGATE] : NULL;
    w.bgate = s->n_w[BGATE] ? s->w[BGATE] : NULL;
    w.k_rope_norm = s->n_w[K_ROPE_NORM] ? s->w[K_ROPE_NORM] : NULL;
    return w;
}

static ra_layer_config config_of(const mla_setup *s)
{
    ra_layer_config cfg = ra_layer_config_init();
    cfg.dim = s->c.dim;
    cfg.n_heads = s->c.h;
    cfg.head_dim = s->D;
    cfg.kv_lora_rank = s->c.r;
    cfg.q_lora_rank = s->c.rq;
    cfg.qk_nope_head_dim = s->c.dn;
    cfg.v_head_dim = s->c.dv;
    cfg.rope = &s->rope;
    cfg.window = s->c.window;
    cfg.scale = s->scale;
    cfg.gated_output = (s->c.gate & (GATE_FEATURE | GATE_HEAD | GATE_IN_Q)) != 0;
    cfg.q_b_raw_latent = (s->c.gate & Q_RAW) != 0;
    cfg.gate_per_head = (s->c.gate & GATE_HEAD) != 0;
    cfg.gate_softplus = (s->c.gate & GATE_SOFTPLUS) != 0;
    cfg.q_latent_scale = s->c.dots && s->c.rq ? 1.5 : 0.0;
    cfg.kv_latent_scale = s->c.dots ? 0.7 : 0.0;
    cfg.temperature_floor = s->c.temp ? 4.0 : 0.0;
    cfg.temperature_scale = 0.3;
    cfg.temperature_no_offset = s->c.temp == TEMP_MISTRAL4;
    return cfg;
}

static int setup(mla_setup *s, const mla_case *c, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->c = *c;
    s->D = c->dn + c->dr;
    s->T = c->b * c->s;
    s->n_x = s->T * c->dim;
    const int64_t qr = c->h * (s->D + (c->gate & GATE_IN_Q ? c->dv : 0));
    const int64_t wgate = c->gate & GATE_HEAD ? c->h : c->gate & GATE_FEATURE ? c->h * c->dv : 0;
    const int64_t sizes[N_W] = {c->rq ? 0 : qr * c->dim, c->rq * c->dim,
                                c->biases ? c->rq : 0, c->rq,
                                qr * c->rq * (c->gate & Q_RAW ? 2 : 1),
                                (c->r + c->dr) * c->dim, c->biases ? c->r + c->dr : 0, c->r,
                                c->h * (c->dn + c->dv) * c->r, c->dim * c->h * c->dv,
                                c->biases ? c->dim : 0,
                                wgate * c->dim,
                                c->gate & GATE_BIAS ? c->h : 0, c->dots ? c->dr : 0};
    uint64_t state = seed;
    for (int i = 0; i < N_W; i++) {
        s->n_w[i] = sizes[i];
        int norm = i == Q_A_NORM || i == KV_A_NORM || i == K_ROPE_NORM;
        s->w[i] = random_array(sizes[i], norm ? 0.3f : 0.4f, norm ? 1.0f : 0.0f, &state);
    }
    s->x = random_array(s->n_x, 1.0f, 0.0f, &state);
    s->dy = random_array(s->n_x, 1.0f, 0.0f, &state);
    s->ids = malloc((size_t)s->T * sizeof(int64_t));
    for (int64_t t = 0; t < s->T; t++) s->ids[t] = (t * 7 + 2) % 23;
    s->rope = ra_rope_config_default(0);
    s->rope.layout = c->layout;
    s->scale = 1.0 / sqrt((double)s->D);
    if (c->yarn) {
        s->rope.type = RA_ROPE_YARN;
        s->rope.factor = 4;
        s->rope.original_max_position_embeddings = 16;
        s->rope.mscale = 1.0;
        s->rope.mscale_all_dim = 0.8;
        double m = 0.1 * 0.8 * log(4.0) + 1.0; /* yarn_get_mscale(factor, mscale_all_dim) */
        s->scale *= m * m;                      /* DeepseekV3Attention's scaling */
    }
    ra_layer_config cfg = config_of(s);
    ra_layer_weights w = weights_of(s);
    if (ra_layer_create(&s->layer, &cfg, &w) != RA_OK) return 0;
    ra_rope *rope;
    ra_rope_config rc = *ra_layer_get_config(s->layer)->rope;
    if (ra_rope_create(&rope, &rc) != RA_OK) return 0;
    ra_rope_inverse_frequencies(rope, s->inv_freq);
    s->attention_factor = ra_rope_attention_factor(rope);
    ra_rope_destroy(rope);
    return 1;
}

static void teardown(mla_setup *s)
{
    for (int i = 0; i < N_W; i++) free(s->w[i]);
    free(s->x);
    free(s->dy);
    free(s->ids);
    ra_layer_destroy(s->layer);
}

static int64_t position_of(const mla_setup *s, int64_t b, int64_t t)
{
    return s->c.ids ? s->ids[b * s->c.s + t] : 3 + t;
}

static ra_positions positions_of(const mla_setup *s)
{
    ra_positions p = ra_positions_start(3);
    if (s->c.ids) p.ids = s->ids;
    return p;
}

/* Zeroed gradient buffers g[i] for s's weights (one float for those it
 * lacks), in an ra_layer_grads where s has the weight. */
static ra_layer_grads grads_of(const mla_setup *s, float *g[N_W])
{
    ra_layer_grads grads = ra_layer_grads_init();
    float **slots[N_W] = {&grads.dwq, &grads.dwq_a, &grads.dbq_a, &grads.dq_a_norm,
                          &grads.dwq_b, &grads.dwkv_a, &grads.dbkv_a, &grads.dkv_a_norm,
                          &grads.dwkv_b, &grads.dwo, &grads.dbo, &grads.dwgate, &grads.dbgate,
                          &grads.dk_rope_norm};
    for (int i = 0; i < N_W; i++) {
        g[i] = calloc((size_t)(s->n_w[i] ? s->n_w[i] : 1), sizeof(float));
        *slots[i] = s->n_w[i] ? g[i] : NULL;
    }
    return grads;
}

/* ---- the double-precision forward ------------------------------------- */

/* out [n] = w [n, k] a [k] + b */
static void dlinear(double *out, const double *w, const double *b, const double *a, int64_t n,
                    int64_t k)
{
    for (int64_t i = 0; i < n; i++) {
        double acc = b ? b[i] : 0.0;
        for (int64_t j = 0; j < k; j++) acc += w[i * k + j] * a[j];
        out[i] = acc;
    }
}

static void drms(double *x, const double *w, int64_t n)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / (double)n + 1e-6);
    for (int64_t i = 0; i < n; i++) x[i] = w[i] * (x[i] * inv);
}

/* Rotates x [Dr] at position p, as transformers' rotary embedding: cos and
 * sin times the attention factor; interleaved pairs (2i, 2i + 1) or half
 * pairs (i, i + Dr/2). */
static void drope(double *x, const mla_setup *s, int64_t p)
{
    const int64_t half = s->c.dr / 2;
    for (int64_t i = 0; i < half; i++) {
        double a = (double)p * s->inv_freq[i];
        double cs = cos(a) * s->attention_factor, sn = sin(a) * s->attention_factor;
        int64_t i0 = s->c.layout == RA_LAYOUT_INTERLEAVED ? 2 * i : i;
        int64_t i1 = s->c.layout == RA_LAYOUT_INTERLEAVED ? 2 * i + 1 : i + half;
        double x0 = x[i0], x1 = x[i1];
        x[i0] = x0 * cs - x1 * sn;
        x[i1] = x1 * cs + x0 * sn;
    }
}

/* o [H * Dv] *= act(gate), gate = wgate x + bgate (each head's bias on
 * its gates), for x [dim], or the gate from q's projection, gq [H Dv]: the
 * output gate of case c (none: nothing). */
static void dgate(double *o, const mla_setup *s, double *const *w, const double *x,
                  const double *gq)
{
    const mla_case *c = &s->c;
    if (!(c->gate & (GATE_FEATURE | GATE_HEAD | GATE_IN_Q))) return;
    const int64_t per = c->gate & GATE_HEAD ? 1 : c->dv, G = c->h * per;
    double *g = malloc((size_t)G * sizeof(double));
    if (c->gate & GATE_IN_Q)
        memcpy(g, gq, (size_t)G * sizeof(double));
    else
        dlinear(g, w[WGATE], NULL, x, G, c->dim);
    for (int64_t i = 0; i < c->h * c->dv; i++) {
        const int64_t h = i / c->dv, j = h * per + (per == 1 ? 0 : i % c->dv);
        const double gi = g[j] + (s->n_w[BGATE] ? w[BGATE][h] : 0.0);
        o[i] *= c->gate & GATE_SOFTPLUS ? log1p(exp(gi)) : 1.0 / (1.0 + exp(-gi));
    }
    free(g);
}

/* y [T, dim] from weights w (double copies), x. */
static void dforward(const mla_setup *s, double *const *w, const double *x, double *y)
{
    const mla_case *c = &s->c;
    const int64_t D = s->D, kv = c->dn + c->dv, S = c->s;
    double *q = calloc((size_t)(S * c->h * D), sizeof(double));
    double *k = calloc((size_t)(S * c->h * D), sizeof(double));
    double *v = calloc((size_t)(S * c->h * c->dv), sizeof(double));
    double *o = calloc((size_t)(c->h * c->dv), sizeof(double));
    const int64_t Dg = c->gate & GATE_IN_Q ? c->dv : 0, K = c->rq * (c->gate & Q_RAW ? 2 : 1);
    double *qa = calloc((size_t)(K + 1), sizeof(double));
    double *qg = calloc((size_t)(c->h * (D + Dg)), sizeof(double));
    double *gq = calloc((size_t)(S * c->h * c->dv), sizeof(double));
    double *lat = calloc((size_t)(c->r + c->dr), sizeof(double));
    double *kvb = calloc((size_t)(c->h * kv), sizeof(double));
    double *p = calloc((size_t)S, sizeof(double));
    for (int64_t b = 0; b < c->b; b++) {
        for (int64_t t = 0; t < S; t++) {
            const double *xt = x + (b * S + t) * c->dim;
            double *qt = q + t * c->h * D, *kt = k + t * c->h * D;
            /* q_compressed = q_a_proj(x); q_resid = q_a_layernorm(q_compressed);
             * [q_h | gate_h] = q_gate_proj(cat([q_resid, q_compressed])) per head */
            if (c->rq) {
                dlinear(qa, w[WQ_A], s->n_w[BQ_A] ? w[BQ_A] : NULL, xt, c->rq, c->dim);
                memcpy(qa + c->rq, qa, (size_t)(K - c->rq) * sizeof(double));
                drms(qa, w[Q_A_NORM], c->rq);
                for (int64_t i = 0; c->dots && i < c->rq; i++) qa[i] *= 1.5; /* q_lora_scale */
                dlinear(qg, w[WQ_B], NULL, qa, c->h * (D + Dg), K);
            } else {
                dlinear(qg, w[WQ], NULL, xt, c->h * (D + Dg), c->dim);
            }
            /* query_states * get_llama_4_attn_scale(position_ids, beta, original) */
            const double p_t = (double)position_of(s, b, t);
            const double tf = c->temp ? 1.0 + 0.3 * log1p(floor(
                                            (p_t + (c->temp == TEMP_LLAMA4)) / 4.0)) : 1.0;
            for (int64_t h = 0; h < c->h; h++) {
                memcpy(qt + h * D, qg + h * (D + Dg), (size_t)D * sizeof(double));
                for (int64_t e = 0; e < D; e++) qt[h * D + e] *= tf;
                memcpy(gq + (t * c->h + h) * c->dv, qg + h * (D + Dg) + D,
                       (size_t)Dg * sizeof(double));
            }
            dlinear(lat, w[WKV_A], s->n_w[BKV_A] ? w[BKV_A] : NULL, xt, c->r + c->dr, c->dim);
            drms(lat, w[KV_A_NORM], c->r);
            for (int64_t i = 0; c->dots && i < c->r; i++) lat[i] *= 0.7; /* kv_lora_scale */
            if (c->dots) drms(lat + c->r, w[K_ROPE_NORM], c->dr); /* k_rope_only_layernorm */
            dlinear(kvb, w[WKV_B], NULL, lat, c->h * kv, c->r);
            const int64_t pos = position_of(s, b, t);
            drope(lat + c->r, s, pos);
            for (int64_t h = 0; h < c->h; h++) {
                drope(qt + h * D + c->dn, s, pos);
                memcpy(kt + h * D, kvb + h * kv, (size_t)c->dn * sizeof(double));
                memcpy(kt + h * D + c->dn, lat + c->r, (size_t)c->dr * sizeof(double));
                memcpy(v + (t * c->h + h) * c->dv, kvb + h * kv + c->dn,
                       (size_t)c->dv * sizeof(double));
            }
        }
        for (int64_t i = 0; i < S; i++) {
            for (int64_t h = 0; h < c->h; h++) {
                double m = -INFINITY, l = 0;
                for (int64_t j = 0; j < S; j++) {
                    p[j] = -INFINITY;
                    if (j > i || (c->window && i - j >= c->window)) continue;
                    double dot = 0;
                    for (int64_t e = 0; e < D; e++)
                        dot += q[(i * c->h + h) * D + e] * k[(j * c->h + h) * D + e];
                    p[j] = dot * s->scale;
                    m = p[j] > m ? p[j] : m;
                }
                for (int64_t j = 0; j < S; j++) l += p[j] == -INFINITY ? 0 : exp(p[j] - m);
                for (int64_t e = 0; e < c->dv; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < S; j++)
                        if (p[j] != -INFINITY) acc += exp(p[j] - m) / l * v[(j * c->h + h) * c->dv + e];
                    o[h * c->dv + e] = acc;
                }
            }
            dgate(o, s, w, x + (b * S + i) * c->dim, gq + i * c->h * c->dv);
            dlinear(y + (b * S + i) * c->dim, w[WO], s->n_w[BO] ? w[BO] : NULL, o, c->dim,
                    c->h * c->dv);
        }
    }
    free(q); free(k); free(v); free(o); free(qa); free(qg); free(gq); free(lat); free(kvb);
    free(p);
}

/* The double copies of s's weights (one allocation each, never NULL). */
static double **double_weights(const mla_setup *s)
{
    double **w = malloc(N_W * sizeof *w);
    for (int i = 0; i < N_W; i++) {
        w[i] = malloc((size_t)(s->n_w[i] ? s->n_w[i] : 1) * sizeof(double));
        for (int64_t j = 0; j < s->n_w[i]; j++) w[i][j] = s->w[i][j];
    }
    return w;
}

static void free_weights(double **w)
{
    for (int i = 0; i < N_W; i++) free(w[i]);
    free(w);
}

static double max_abs_f(const float *a, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fabs(a[i]) > m ? fabs(a[i]) : m;
    return m;
}

/* ---- cases -------------------------------------------------------------- */

static void test_forward(void)
{
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        mla_setup s;
        if (!setup(&s, &cases[ci], 11 + ci)) {
            CHECK(0, "%s: setup: %s", cases[ci].name, ra_last_error());
            teardown(&s);
            continue;
        }
        double **w = double_weights(&s), *x = malloc((size_t)s.n_x * sizeof(double));
        double *ref = malloc((size_t)s.n_x * sizeof(double));
        for (int64_t i = 0; i < s.n_x; i++) x[i] = s.x[i];
        dforward(&s, w, x, ref);
        double scale = 0;
        for (int64_t i = 0; i < s.n_x; i++) scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
        float *y = malloc((size_t)s.n_x * sizeof(float));
        ra_positions pos = positions_of(&s);
        for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
            ra_status st = ra_layer_forward(NULL, s.layer, y, s.x, s.c.b, s.c.s, &pos,
                                            PATH_OPTS((ra_attention_path)path));
            double err = 0;
            for (int64_t i = 0; i < s.n_x; i++) err = fmax(err, fabs(y[i] - ref[i]));
            CHECK(st == RA_OK && err <= FWD_TOL * scale, "%s path %d: %s, error %.3g of %.3g",
                  s.c.name, path, ra_last_error(), err, scale);
        }
        free(y); free(ref); free(x); free_weights(w);
        teardown(&s);
    }
}

/* L(w) = sum(y * dy) in double. */
static double loss(const mla_setup *s, double *const *w, const double *x)
{
    double *y = malloc((size_t)s->n_x * sizeof(double)), l = 0;
    dforward(s, w, x, y);
    for (int64_t i = 0; i < s->n_x; i++) l += y[i] * s->dy[i];
    free(y);
    return l;
}

/* max |g - fd| / max |fd| of one array a (double copy of g's input). */
static double fd_error(const mla_setup *s, double **w, double *x, double *a, const float *g,
                       int64_t n)
{
    double err = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) {
        double keep = a[i];
        a[i] = keep + FD_STEP;
        double up = loss(s, w, x);
        a[i] = keep - FD_STEP;
        double down = loss(s, w, x);
        a[i] = keep;
        double fd = (up - down) / (2 * FD_STEP);
        err = fmax(err, fabs(g[i] - fd));
        scale = fmax(scale, fabs(fd));
    }
    return scale > 0 ? err / scale : err;
}

static void test_gradients(void)
{
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        mla_setup s;
        if (!setup(&s, &cases[ci], 31 + ci)) {
            CHECK(0, "%s: setup: %s", cases[ci].name, ra_last_error());
            teardown(&s);
            continue;
        }
        ra_layer_tape *tape;
        float *y = malloc((size_t)s.n_x * sizeof(float)), *dx = malloc((size_t)s.n_x * sizeof(float));
        float *g[N_W];
        ra_layer_grads grads = grads_of(&s, g);
        ra_positions pos = positions_of(&s);
        for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
            ra_status st = ra_layer_tape_create(&tape, s.layer, s.T);
            if (st == RA_OK)
                st = ra_layer_forward_train(NULL, s.layer, y, tape, s.x, s.c.b, s.c.s, &pos,
                                            PATH_OPTS((ra_attention_path)path));
            if (st == RA_OK) st = ra_layer_backward(NULL, s.layer, dx, &grads, tape, s.dy);
            CHECK(st == RA_OK, "%s path %d: %s", s.c.name, path, ra_last_error());
            ra_layer_tape_destroy(tape);
            if (st != RA_OK || path == RA_PATH_REFERENCE) continue; /* finite differences once */
            double **w = double_weights(&s), *x = malloc((size_t)s.n_x * sizeof(double));
            for (int64_t i = 0; i < s.n_x; i++) x[i] = s.x[i];
            double e = fd_error(&s, w, x, x, dx, s.n_x);
            CHECK(e <= FD_TOL, "%s: dx error %.3g", s.c.name, e);
            for (int i = 0; i < N_W; i++) {
                if (!s.n_w[i]) continue;
                e = fd_error(&s, w, x, w[i], g[i], s.n_w[i]);
                CHECK(e <= FD_TOL, "%s: d%s error %.3g", s.c.name, w_names[i], e);
            }
            free(x);
            free_weights(w);
        }
        for (int i = 0; i < N_W; i++) free(g[i]);
        free(y); free(dx);
        teardown(&s);
    }
}

/* Prefill P tokens, then the rest in steps of `step`, against the forward
 * of all S tokens. */
static void test_cached(void)
{
    static const struct {
        int64_t prefill, step;
        ra_dtype dtype;
        double tol;
    } runs[] = {{4, 1, RA_F32, CACHE_TOL}, {1, 3, RA_F32, CACHE_TOL}, {0, 11, RA_F32, CACHE_TOL},
                {2, 10, RA_F32, CACHE_TOL}, {3, 1, RA_F16, 1e-3}, {3, 2, RA_BF16, 1e-2},
                /* 8-bit rows, as the other caches' layer steps (test_kvcache8.c) */
                {3, 1, RA_I8, 1e-2}, {2, 3, RA_F8E4M3, 6e-2}};
    mla_case c = cases[1];
    c.s = 13;
    for (int ci = 0; ci < 9; ci++) {
        if (ci == 1) c = cases[4], c.s = 12; /* a window, an odd latent rank */
        if (ci == 3) c = cases[6], c.s = 11; /* the output gated per feature */
        if (ci == 4) c = cases[8], c.s = 10; /* per head, with its bias */
        if (ci == 5) c = cases[9], c.s = 10; /* dots.note's rescaled latents, k_rope_norm */
        if (ci == 6) c = cases[11], c.s = 12; /* the gate in wq_b, the raw q latent */
        if (ci == 7) c = cases[14], c.s = 13; /* q scaled by position (Mistral 4) */
        if (ci == 8) c = cases[15], c.s = 12; /* by position + 1, a window */
        if (ci == 2) /* 8 + 2-token passes: the short one has fewer rows, wide rows */
            c = cases[1], c.s = 13, c.h = 16, c.r = 120;
        mla_setup s;
        if (!setup(&s, &c, 51)) {
            CHECK(0, "setup: %s", ra_last_error());
            teardown(&s);
            continue;
        }
        float *y = malloc((size_t)s.n_x * sizeof(float)), *yc = malloc((size_t)s.n_x * sizeof(float));
        ra_positions start = ra_positions_start(0);
        CHECK(ra_layer_forward(NULL, s.layer, y, s.x, s.c.b, s.c.s, &start, NULL) == RA_OK,
              "forward: %s", ra_last_error());
        const double scale = max_abs_f(y, s.n_x);
        for (size_t ri = 0; ri < sizeof runs / sizeof runs[0]; ri++) {
            ra_kv_cache *cache;
            ra_context *ctx;
            CHECK(ra_context_create(&ctx, 1 + (int)(ri % 2)) == RA_OK, "context");
            ra_status st = ra_kv_cache_create_latent(&cache, s.c.b, s.c.s, s.c.r, s.c.dr,
                                                     runs[ri].dtype);
            float *xs = malloc((size_t)s.n_x * sizeof(float)), *ys = malloc((size_t)s.n_x * sizeof(float));
            for (int64_t s0 = 0; st == RA_OK && s0 < s.c.s;) {
                int64_t n = s0 == 0 && runs[ri].prefill ? runs[ri].prefill : runs[ri].step;
                if (n > s.c.s - s0) n = s.c.s - s0;
                for (int64_t b = 0; b < s.c.b; b++)
                    memcpy(xs + b * n * s.c.dim, s.x + (b * s.c.s + s0) * s.c.dim,
                           (size_t)(n * s.c.dim) * sizeof(float));
                st = ra_layer_forward_cached(ctx, s.layer, cache, ys, xs, s.c.b, n, NULL);
                for (int64_t b = 0; b < s.c.b; b++)
                    memcpy(yc + (b * s.c.s + s0) * s.c.dim, ys + b * n * s.c.dim,
                           (size_t)(n * s.c.dim) * sizeof(float));
                s0 += n;
            }
            double err = 0;
            for (int64_t i = 0; st == RA_OK && i < s.n_x; i++) err = fmax(err, fabs(yc[i] - y[i]));
            CHECK(st == RA_OK && err <= runs[ri].tol * scale,
                  "case %d run %zu: %s, error %.3g of %.3g", ci, ri, ra_last_error(), err, scale);
            CHECK(st != RA_OK || ra_kv_cache_length(cache, s.c.b - 1) == s.c.s, "length");
            free(xs); free(ys);
            ra_kv_cache_destroy(cache);
            ra_context_destroy(ctx);
        }
        free(y); free(yc);
        teardown(&s);
    }
}

/* Forward, backward and decode: the same bits on 1 and 3 threads. */
static void test_threads(void)
{
    mla_case c = cases[1];
    c.s = 40;
    mla_setup s;
    if (!setup(&s, &c, 71)) {
        CHECK(0, "setup: %s", ra_last_error());
        teardown(&s);
        return;
    }
    float *out[2][3];
    for (int run = 0; run < 2; run++) {
        ra_context *ctx;
        CHECK(ra_context_create(&ctx, run ? 3 : 1) == RA_OK, "context");
        for (int i = 0; i < 3; i++) out[run][i] = calloc((size_t)s.n_x, sizeof(float));
        ra_layer_tape *tape;
        float *g[N_W];
        ra_layer_grads grads = grads_of(&s, g);
        ra_status st = ra_layer_tape_create(&tape, s.layer, s.T);
        if (st == RA_OK) st = ra_layer_forward_train(ctx, s.layer, out[run][0], tape, s.x, s.c.b, s.c.s, NULL, NULL);
        if (st == RA_OK) st = ra_layer_backward(ctx, s.layer, out[run][1], &grads, tape, s.dy);
        ra_kv_cache *cache;
        if (st == RA_OK) st = ra_kv_cache_create_latent(&cache, s.c.b, s.c.s, s.c.r, s.c.dr, RA_F32);
        if (st == RA_OK) { /* a prefill of half, then the rest decoded in passes of 8 */
            const int64_t half = s.c.s / 2, rest = s.c.s - half;
            float *xs = malloc((size_t)s.n_x * sizeof(float));
            for (int64_t b = 0; b < s.c.b; b++)
                memcpy(xs + b * half * s.c.dim, s.x + b * s.c.s * s.c.dim,
                       (size_t)(half * s.c.dim) * sizeof(float));
            st = ra_layer_forward_cached(ctx, s.layer, cache, out[run][2], xs, s.c.b, half, NULL);
            for (int64_t b = 0; b < s.c.b; b++)
                memcpy(xs + b * rest * s.c.dim, s.x + (b * s.c.s + half) * s.c.dim,
                       (size_t)(rest * s.c.dim) * sizeof(float));
            if (st == RA_OK)
                st = ra_layer_forward_cached(ctx, s.layer, cache, out[run][2] + s.c.b * half * s.c.dim,
                                             xs, s.c.b, rest, NULL);
            free(xs);
            ra_kv_cache_destroy(cache);
        }
        CHECK(st == RA_OK, "run %d: %s", run, ra_last_error());
        for (int i = 0; i < N_W; i++) free(g[i]);
        ra_layer_tape_destroy(tape);
        ra_context_destroy(ctx);
    }
    for (int i = 0; i < 3; i++) {
        CHECK(memcmp(out[0][i], out[1][i], (size_t)s.n_x * sizeof(float)) == 0,
              "output %d differs between 1 and 3 threads", i);
        free(out[0][i]);
        free(out[1][i]);
    }
    teardown(&s);
}

/* ra_attention_decode on a latent cache: softmax(scale q row^T) row over
 * the rows the layer stored, against double sums over those rows (float32
 * sums of ~20 terms: 1e-5 of max |out|).  The rows: an f32 cache's views;
 * an 8-bit cache's are those rows quantized whole ([kr | c] under one
 * scale), here by quant8.h's reference quantizers. */
static void test_latent_decode(void)
{
    mla_setup s;
    if (!setup(&s, &cases[1], 81)) {
        CHECK(0, "setup: %s", ra_last_error());
        teardown(&s);
        return;
    }
    const int64_t B = s.c.b, S = s.c.s, H = s.c.h, row = s.c.r + s.c.dr, T = 2;
    static const ra_dtype dtypes[] = {RA_F32, RA_I8, RA_F8E4M3};
    ra_kv_cache *f32 = NULL;
    float *y = malloc((size_t)s.n_x * sizeof(float));
    float *rows = malloc((size_t)(B * S * row) * sizeof(float));
    int8_t *codes = malloc((size_t)row);
    uint64_t state = 5;
    float *q = random_array(B * T * H * row, 1.0f, 0.0f, &state);
    float *out = calloc((size_t)(B * T * H * row), sizeof(float));
    ra_status st = ra_kv_cache_create_latent(&f32, B, S, s.c.r, s.c.dr, RA_F32);
    if (st == RA_OK) st = ra_layer_forward_cached(NULL, s.layer, f32, y, s.x, B, S, NULL);
    ra_tensor kv, vv;
    if (st == RA_OK) st = ra_kv_cache_views(f32, &kv, &vv);
    CHECK(st == RA_OK && kv.data == vv.data && kv.shape[3] == row && kv.shape[2] == 1,
          "one storage: %s", ra_last_error());
    for (size_t di = 0; st == RA_OK && di < sizeof dtypes / sizeof dtypes[0]; di++) {
        const ra_dtype dt = dtypes[di];
        const float fp8_scale = 0.5f;
        ra_kv_cache *cache = f32;
        if (dt != RA_F32) {
            CHECK(ra_kv_cache_create_latent(&cache, B, S, s.c.r, s.c.dr, dt) == RA_OK, "create");
            if (dt == RA_F8E4M3) {
                const float half = fp8_scale, other = 0.25f;
                CHECK(ra_kv_cache_set_scales(cache, &half, &other, 1) == RA_ERR_ARGUMENT,
                      "a latent cache's k and v scales differ");
                CHECK(ra_kv_cache_set_scales(cache, &half, &half, 1) == RA_OK, "%s",
                      ra_last_error());
            }
            CHECK(ra_layer_forward_cached(NULL, s.layer, cache, y, s.x, B, S, NULL) == RA_OK,
                  "%s", ra_last_error());
        }
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < S; j++) {
                const float *x = (const float *)kv.data + b * kv.stride[0] + j * kv.stride[1];
                float *r = rows + (b * S + j) * row;
                if (dt == RA_I8) {
                    const float sc = ra_quantize_i8(codes, x, row);
                    for (int64_t e = 0; e < row; e++) r[e] = (float)codes[e] * sc;
                } else
                    for (int64_t e = 0; e < row; e++)
                        r[e] = dt == RA_F32 ? x[e]
                                            : ra_e4m3_to_f32(ra_f32_to_e4m3(x[e] / fp8_scale)) *
                                                  fp8_scale;
            }
        ra_tensor tq = ra_tensor_4d(q, RA_F32, B, T, H, row);
        ra_tensor to = ra_tensor_4d(out, RA_F32, B, T, H, row);
        ra_attention_options o = ra_attention_options_init();
        o.scale = 0.3;
        CHECK(ra_attention_decode(NULL, cache, &to, &tq, NULL, &o) == RA_OK, "%s",
              ra_last_error());
        double err = 0, scale = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t h = 0; h < H; h++) {
                    const float *qr = q + ((b * T + t) * H + h) * row;
                    double p[64], m = -INFINITY, l = 0;
                    const int64_t last = S - T + t;
                    for (int64_t j = 0; j <= last; j++) {
                        const float *kr = rows + (b * S + j) * row;
                        double dot = 0;
                        for (int64_t e = 0; e < row; e++) dot += (double)qr[e] * kr[e];
                        p[j] = 0.3 * dot;
                        m = fmax(m, p[j]);
                    }
                    for (int64_t j = 0; j <= last; j++) l += exp(p[j] - m);
                    for (int64_t e = 0; e < row; e++) {
                        double acc = 0;
                        for (int64_t j = 0; j <= last; j++)
                            acc += exp(p[j] - m) / l * rows[(b * S + j) * row + e];
                        double got = out[((b * T + t) * H + h) * row + e];
                        err = fmax(err, fabs(got - acc));
                        scale = fmax(scale, fabs(acc));
                    }
                }
        CHECK(err <= 1e-5 * scale, "dtype %d: error %.3g of %.3g", (int)dt, err, scale);
        if (cache != f32) ra_kv_cache_destroy(cache);
    }
    ra_kv_cache_destroy(f32);
    free(y); free(q); free(out); free(rows); free(codes);
    teardown(&s);
}

/* ra_attention_options' quantize_q on a latent int8 cache (rows [kr | c]
 * of 64 + 512 = 576, DeepSeek-V3's, whole 64 bytes; and of 64 + 500 = 564,
 * a tail past them): each head's q times the scale quantized as the
 * cache's rows are (ra_quantize_i8: s_q = max|x| / 127), every score
 * ((float)(c_q . c) s_q) s_k with the integer sum exact, the values the
 * same rows dequantized (s c).  Against that reference, softmax and P.V
 * in double: test_decode_q8.c's bound, 2e-5 of max|ref| (float32
 * rounding of the softmax and P.V); 3 threads give 1's bits. */
static void test_latent_decode_q8(void)
{
    static const mla_case wide[2] = {
        {"latent 576", 2, 40, 2, 4, 64, 4, 512, 0, 16, RA_LAYOUT_INTERLEAVED, 0, 0, 0, 0, 0, 0, 0},
        {"latent 564", 1, 33, 3, 4, 64, 4, 500, 0, 16, RA_LAYOUT_HALF, 0, 0, 0, 0, 0, 0, 0}};
    for (int ci = 0; ci < 2; ci++) {
        mla_setup s;
        if (!setup(&s, &wide[ci], 85 + (uint64_t)ci)) {
            CHECK(0, "setup: %s", ra_last_error());
            teardown(&s);
            return;
        }
        const int64_t B = s.c.b, S = s.c.s, H = s.c.h, row = s.c.r + s.c.dr, T = 3;
        const float scale = 0.05f;
        uint64_t state = 7;
        float *y = malloc((size_t)s.n_x * sizeof(float)), *x = malloc((size_t)row * sizeof(float));
        float *q = random_array(B * T * H * row, 1.0f, 0.0f, &state);
        float *out = calloc((size_t)(B * T * H * row), sizeof(float));
        float *again = calloc((size_t)(B * T * H * row), sizeof(float));
        float *ks = malloc((size_t)(B * S) * sizeof(float));
        int8_t *kc = malloc((size_t)(B * S * row)), *qc = malloc((size_t)row);
        double *p = malloc((size_t)S * sizeof(double)), *acc = malloc((size_t)row * sizeof(double));
        ra_kv_cache *f32 = NULL, *i8 = NULL;
        ra_context *ctx = NULL;
        ra_tensor kv, vv;
        ra_status st = ra_kv_cache_create_latent(&f32, B, S, s.c.r, s.c.dr, RA_F32);
        if (st == RA_OK) st = ra_kv_cache_create_latent(&i8, B, S, s.c.r, s.c.dr, RA_I8);
        if (st == RA_OK) st = ra_layer_forward_cached(NULL, s.layer, f32, y, s.x, B, S, NULL);
        if (st == RA_OK) st = ra_layer_forward_cached(NULL, s.layer, i8, y, s.x, B, S, NULL);
        if (st == RA_OK) st = ra_kv_cache_views(f32, &kv, &vv);
        if (st == RA_OK) st = ra_context_create(&ctx, 3);
        ra_attention_options o = ra_attention_options_init();
        o.scale = scale;
        o.quantize_q = 1;
        ra_tensor tq = ra_tensor_4d(q, RA_F32, B, T, H, row);
        ra_tensor to = ra_tensor_4d(out, RA_F32, B, T, H, row);
        ra_tensor ta = ra_tensor_4d(again, RA_F32, B, T, H, row);
        if (st == RA_OK) st = ra_attention_decode(NULL, i8, &to, &tq, NULL, &o);
        if (st == RA_OK) st = ra_attention_decode(ctx, i8, &ta, &tq, NULL, &o);
        CHECK(st == RA_OK, "%s: %s", s.c.name, ra_last_error());
        CHECK(memcmp(out, again, (size_t)(B * T * H * row) * sizeof(float)) == 0,
              "%s: 3 threads changed bits", s.c.name);
        for (int64_t i = 0; st == RA_OK && i < B * S; i++) /* the rows the int8 cache holds */
            ks[i] = ra_quantize_i8(kc + i * row,
                                   (const float *)kv.data + (i / S) * kv.stride[0] +
                                       (i % S) * kv.stride[1],
                                   row);
        double err = 0, top = 0;
        for (int64_t b = 0; st == RA_OK && b < B; b++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t h = 0; h < H; h++) {
                    const float *qr = q + ((b * T + t) * H + h) * row;
                    for (int64_t e = 0; e < row; e++) x[e] = qr[e] * scale;
                    const float sq = ra_quantize_i8(qc, x, row);
                    const int64_t last = S - T + t;
                    double m = -INFINITY, l = 0;
                    for (int64_t j = 0; j <= last; j++) {
                        int64_t sum = 0;
                        for (int64_t e = 0; e < row; e++)
                            sum += (int64_t)qc[e] * kc[(b * S + j) * row + e];
                        p[j] = ((float)sum * sq) * ks[b * S + j]; /* the stated order */
                        m = fmax(m, p[j]);
                    }
                    for (int64_t e = 0; e < row; e++) acc[e] = 0;
                    for (int64_t j = 0; j <= last; j++) {
                        const double w = exp(p[j] - m);
                        l += w;
                        for (int64_t e = 0; e < row; e++)
                            acc[e] += w * ((double)ks[b * S + j] * kc[(b * S + j) * row + e]);
                    }
                    const float *got = out + ((b * T + t) * H + h) * row;
                    for (int64_t e = 0; e < row; e++) {
                        err = fmax(err, fabs(got[e] - acc[e] / l));
                        top = fmax(top, fabs(acc[e] / l));
                    }
                }
        CHECK(err <= 2e-5 * top, "%s: error %.3g of %.3g", s.c.name, err, top);
        ra_context_destroy(ctx);
        ra_kv_cache_destroy(f32);
        ra_kv_cache_destroy(i8);
        free(y); free(x); free(q); free(out); free(again); free(ks); free(kc); free(qc);
        free(p); free(acc);
        teardown(&s);
    }
}

static void test_refusals(void)
{
    mla_setup s;
    if (!setup(&s, &cases[1], 91)) {
        CHECK(0, "setup: %s", ra_last_error());
        teardown(&s);
        return;
    }
    ra_layer *layer = NULL;
    ra_layer_config cfg = config_of(&s);
    ra_layer_weights w = weights_of(&s);
    float one[64] = {1};
    struct {
        ra_layer_config c;
        ra_layer_weights w;
        ra_status want;
        const char *what;
    } bad[22];
    int n = 0;
    bad[n].c = cfg, bad[n].w = w, bad[n].c.n_kv_heads = 1, bad[n].want = RA_ERR_GQA, bad[n++].what = "n_kv_heads 1";
    bad[n].c = cfg, bad[n].w = w, bad[n].w.q_norm = one, bad[n].want = RA_ERR_UNSUPPORTED, bad[n++].what = "q_norm";
    bad[n].c = cfg, bad[n].w = w, bad[n].w.wk = one, bad[n].want = RA_ERR_UNSUPPORTED, bad[n++].what = "wk";
    bad[n].c = cfg, bad[n].w = w, bad[n].c.clip_qkv = 1, bad[n].want = RA_ERR_UNSUPPORTED, bad[n++].what = "clip_qkv";
    bad[n].c = cfg, bad[n].w = w, bad[n].w.wq = one, bad[n].want = RA_ERR_ARGUMENT, bad[n++].what = "wq with q_lora_rank";
    bad[n].c = cfg, bad[n].w = w, bad[n].w.wkv_b = NULL, bad[n].want = RA_ERR_NULL, bad[n++].what = "no wkv_b";
    bad[n].c = cfg, bad[n].w = w, bad[n].w.q_a_norm = NULL, bad[n].want = RA_ERR_NULL, bad[n++].what = "no q_a_norm";
    bad[n].c = cfg, bad[n].w = w, bad[n].c.v_head_dim = s.D + 1, bad[n].want = RA_ERR_SIZE, bad[n++].what = "v_head_dim > head_dim";
    bad[n].c = cfg, bad[n].w = w, bad[n].c.qk_nope_head_dim = s.D - 3, bad[n].want = RA_ERR_SIZE, bad[n++].what = "odd rope part";
    bad[n].c = cfg, bad[n].w = w, bad[n].c.kv_lora_rank = 0, bad[n].want = RA_ERR_ARGUMENT, bad[n++].what = "latent weights, no kv_lora_rank";
    bad[n].c = cfg, bad[n].w = w, bad[n].c.kv_lora_rank = -1, bad[n].want = RA_ERR_SIZE, bad[n++].what = "kv_lora_rank -1";
    ra_rope_config wrong = s.rope;
    wrong.rotary_dim = 2;
    bad[n].c = cfg, bad[n].w = w, bad[n].c.rope = &wrong, bad[n].want = RA_ERR_ARGUMENT, bad[n++].what = "rotary_dim";
    bad[n].c = cfg, bad[n].w = w, bad[n].c.q_lora_rank = 0, bad[n].c.q_b_raw_latent = 1, bad[n].w.wq = one, bad[n].w.wq_a = bad[n].w.bq_a = bad[n].w.q_a_norm = bad[n].w.wq_b = NULL, bad[n].want = RA_ERR_ARGUMENT, bad[n++].what = "q_b_raw_latent without q_lora_rank";
    bad[n].c = cfg, bad[n].w = w, bad[n].w.wgate = one, bad[n].want = RA_ERR_ARGUMENT, bad[n++].what = "wgate without gated_output";
    bad[n].c = cfg, bad[n].w = w, bad[n].c.kv_latent_scale = -1, bad[n].want = RA_ERR_ARGUMENT, bad[n++].what = "kv_latent_scale -1";
    bad[n].c = cfg, bad[n].w = w, bad[n].c.q_latent_scale = 2, bad[n].c.q_lora_rank = 0, bad[n].want = RA_ERR_ARGUMENT, bad[n++].what = "q_latent_scale without q_lora_rank";
    bad[n].c = cfg, bad[n].w = w, bad[n].c.temperature_length = 2048, bad[n].c.temperature_power = 0.1, bad[n].want = RA_ERR_UNSUPPORTED, bad[n++].what = "temperature_length";
    /* dots.note's latent scales and k_rope_norm on a layer without latent attention */
    ra_rope_config plain_rope = ra_rope_config_default(4);
    ra_layer_config plain_c = ra_layer_config_init();
    plain_c.dim = 8, plain_c.n_heads = 2, plain_c.head_dim = 4, plain_c.rope = &plain_rope;
    ra_layer_weights plain_w = ra_layer_weights_init();
    plain_w.wq = plain_w.wk = plain_w.wv = plain_w.wo = one;
    bad[n].c = plain_c, bad[n].w = plain_w, bad[n].w.k_rope_norm = one, bad[n].want = RA_ERR_ARGUMENT, bad[n++].what = "k_rope_norm without latent attention";
    bad[n].c = plain_c, bad[n].w = plain_w, bad[n].c.kv_latent_scale = 2, bad[n].want = RA_ERR_ARGUMENT, bad[n++].what = "kv_latent_scale without latent attention";
    for (int i = 0; i < n; i++) {
        ra_status st = ra_layer_create(&layer, &bad[i].c, &bad[i].w);
        CHECK(st == bad[i].want && layer == NULL, "%s: status %d (%s)", bad[i].what, (int)st,
              ra_last_error());
        ra_layer_destroy(layer);
        layer = NULL;
    }

    /* caches: a latent one only for a latent layer, and nowhere else */
    ra_kv_cache *latent, *plain;
    CHECK(ra_kv_cache_create_latent(&latent, s.c.b, 4, s.c.r, s.c.dr, RA_F32) == RA_OK, "latent");
    CHECK(ra_kv_cache_create(&plain, s.c.b, 4, 1, s.c.r + s.c.dr, RA_F32) == RA_OK, "plain");
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create_latent(&cache, 1, 4, 0, 4, RA_F32) == RA_ERR_SIZE && !cache, "r 0");
    CHECK(ra_kv_cache_create_latent(&cache, 1, 4, 8, 3, RA_F32) == RA_ERR_SIZE && !cache, "odd rope");
    float *y = calloc((size_t)s.n_x, sizeof(float));
    CHECK(ra_layer_forward_cached(NULL, s.layer, plain, y, s.x, s.c.b, 1, NULL) == RA_ERR_SHAPE,
          "latent layer, plain cache: %s", ra_last_error());
    CHECK(ra_layer_forward_cached(NULL, s.layer, latent, y, s.x, s.c.b, 5, NULL) == RA_ERR_CACHE_FULL,
          "5 tokens in 4 slots");
    CHECK(ra_kv_cache_length(latent, 0) == 0, "a refused call appends nothing");
    const int64_t row = s.c.r + s.c.dr;
    float *q = calloc((size_t)(s.c.b * s.c.h * row), sizeof(float));
    ra_tensor tk = ra_tensor_4d(q, RA_F32, s.c.b, 1, 1, row);
    ra_positions p0 = ra_positions_start(0);
    ra_rope *rope;
    ra_rope_config rc = ra_rope_config_default(row);
    CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    CHECK(ra_kv_cache_append(NULL, latent, rope, NULL, &tk, &tk, &p0, NULL) == RA_ERR_ARGUMENT,
          "ra_kv_cache_append on a latent cache");
    ra_rope_destroy(rope);
    /* a plain layer of one kv head of r + Dr features refuses the latent cache */
    ra_layer_config pc = ra_layer_config_init();
    pc.dim = s.c.dim, pc.n_heads = 1, pc.head_dim = row;
    float *big = calloc((size_t)(row * s.c.dim), sizeof(float));
    ra_layer_weights pw = ra_layer_weights_init();
    pw.wq = pw.wk = pw.wv = big;
    pw.wo = big;
    ra_layer *plain_layer;
    CHECK(ra_layer_create(&plain_layer, &pc, &pw) == RA_OK, "plain layer: %s", ra_last_error());
    CHECK(ra_layer_forward_cached(NULL, plain_layer, latent, y, s.x, s.c.b, 1, NULL) == RA_ERR_ARGUMENT,
          "plain layer, latent cache: %s", ra_last_error());
    ra_layer_destroy(plain_layer);
    /* the backward names the missing gradient */
    ra_layer_tape *tape;
    CHECK(ra_layer_tape_create(&tape, s.layer, s.T) == RA_OK, "tape");
    /* y over any weight the layer borrows: refused, naming one, by the forward,
     * the training forward and the cached call (y written over it would
     * change what the call, or the next, reads), the weight as it was (the
     * phased calls refuse a latent layer whole) */
    ra_kv_cache_reset(latent);
    for (int i = 0; i < N_W; i++) {
        if (!s.n_w[i]) continue;
        float *kept = malloc(sizeof(float) * (size_t)s.n_w[i]), *over = s.w[i];
        memcpy(kept, over, sizeof(float) * (size_t)s.n_w[i]);
        for (int call = 0; call < 3; call++) {
            const ra_status got =
                call == 0 ? ra_layer_forward(NULL, s.layer, over, s.x, s.c.b, s.c.s, NULL, NULL)
                : call == 1 ? ra_layer_forward_train(NULL, s.layer, over, tape, s.x, s.c.b,
                                                     s.c.s, NULL, NULL)
                            : ra_layer_forward_cached(NULL, s.layer, latent, over, s.x, s.c.b, 1,
                                                      NULL);
            /* y's n_x floats may reach a weight allocated after this one,
             * which may be named first */
            CHECK(got == RA_ERR_ARGUMENT && strstr(ra_last_error(), "y overlaps the layer's "),
                  "y over %s, call %d: status %d, '%s'", w_names[i], call, (int)got,
                  ra_last_error());
        }
        CHECK(!memcmp(kept, over, sizeof(float) * (size_t)s.n_w[i]) &&
                  ra_kv_cache_length(latent, 0) == 0,
              "y over %s: a refused call wrote", w_names[i]);
        free(kept);
    }
    CHECK(ra_layer_forward_train(NULL, s.layer, y, tape, s.x, s.c.b, s.c.s, NULL, NULL) == RA_OK, "train");
    ra_layer_grads g = ra_layer_grads_init();
    float *dx = calloc((size_t)s.n_x, sizeof(float));
    CHECK(ra_layer_backward(NULL, s.layer, dx, &g, tape, s.dy) == RA_ERR_NULL, "no grads");
    ra_layer_tape_destroy(tape);
    free(dx); free(big); free(q); free(y);
    ra_kv_cache_destroy(latent);
    ra_kv_cache_destroy(plain);
    teardown(&s);
}

static void simd_cases(void)
{
    RUN(test_forward);
    RUN(test_gradients);
    RUN(test_cached);
    RUN(test_threads);
    RUN(test_latent_decode);
    RUN(test_latent_decode_q8);
    RUN(test_refusals);
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    return ra_test_summary("mla");
}
