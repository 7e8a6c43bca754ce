/*
 * test_layer_backward.c — the layer's training forward and backward:
 * gradients against central finite differences of a double-precision
 * forward written here (GQA 1:1, 2:1, 4:1, both layouts, scaled rope types,
 * partial rotary, every position mode, dropout, no_rope, H D != dim,
 * biases, q/k norms before or after RoPE, a norm before wo, a gated output
 * (wq's gate rows, or wgate's per feature or per head, sigmoid or
 * softplus, with bgate), v's norm), flash
 * against reference, identical bits for any thread count,
 * dropout masks shared by forward and backward, p = 0 = inference,
 * accumulate vs overwrite, tape reuse, and argument checks.
 *
 * Dims: B batch, S seq, H heads, Hkv kv heads, D head_dim, dim (H D unless
 * a case sets it), T = B S tokens.  L = sum(y * dy) for a fixed random dy,
 * so dL/dy = dy.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/dropout.h"
#include "harness.h"
#include "ropeattn.h"

/* Gradients against finite differences, max |g - fd| / max |fd| per
 * tensor: float32 forward and backward give ~1e-6 (seen: at most 8e-7), so
 * 1e-5 leaves a margin of 10 and is 10 times the 1e-4.  The
 * differences themselves are exact to ~1e-9 (double, h = 1e-5, a smooth L
 * of order 1). */
#define FD_TOL 1e-5
#define FD_STEP 1e-5

/* ---- a layer case ------------------------------------------------------- */

typedef struct layer_case {
    const char *name;
    int64_t b, s, h, hkv, d;
    ra_layout layout;
    ra_rope_type type;
    int64_t rotary_dim; /* 0: D */
    int mode;           /* positions: 0 start, 1 starts, 2 ids */
    float p;            /* dropout (training) */
    int no_rope;
    int64_t dim;        /* 0: H D */
    int extras;         /* | BIASES: bq, bk, bv and bo; | NORMS: q_norm, k_norm
                           per head; | WHOLE: over the whole projection;
                           | HEADS: each head its own weights; | LAYER:
                           LayerNorms; | L2: Llama 4's L2 norm after RoPE;
                           | TEMP: temperature tuning, floor 4, scale 0.3;
                           | TEMP0: with TEMP, at p, not p + 1 (Ministral 3);
                           | POST: the q/k norms after RoPE (HunYuan);
                           | ONORM: an RMSNorm before wo (BitNet);
                           | GATE: the output gated by wq's gate rows
                           (Qwen3-Next); | CLIPN: clip_qkv clamps q and k
                           after their norms (OLMoE); | VNORM: v's heads
                           RMS-normed without weights (Gemma 3n); | NBIAS:
                           biases on the q/k LayerNorms (Persimmon);
                           | WGATE: with GATE, the gate from wgate (AfMoE's
                           gate_proj); with WGATE, | PHEAD: one gate per
                           head (LFM3's g_proj), | SOFTPLUS: softplus, not
                           sigmoid (Laguna's), | BGATE: a bias per head
                           (Beam's gate_bias); | VSCALE: v times V_SCALE
                           (MiMo-V2-Flash's attention_value_scale); | TEMPP:
                           q times (1 + (p + 1) / 6)^0.5 (temperature_length,
                           _power: Beam's NoPE layers' (1 + (p + 1) /
                           2048)^0.1); | VROPE: RoPE on v too (RoFormer's
                           rotary_value: rope_values) */
    double scale;       /* the softmax scale; 0: 1/sqrt(D) */
    double clip;        /* clip_qkv; 0: none */
} layer_case;

enum { BIASES = 1, NORMS = 2, WHOLE = 4, HEADS = 8, LAYER = 16, L2 = 32, TEMP = 64, POST = 128,
       ONORM = 256, GATE = 512, CLIPN = 1024, TEMP0 = 2048,
       VNORM = 4096, NBIAS = 8192, WGATE = 16384, PHEAD = 32768, SOFTPLUS = 65536,
       BGATE = 131072, VSCALE = 262144, TEMPP = 524288, VROPE = 1048576 };
#define V_SCALE (-0.6)

/* A layer's parameters: wq, wk, wv, wo, then bq, bk, bv, bo, q_norm, k_norm,
 * o_norm, q_norm_bias, k_norm_bias, wgate, bgate. */
enum { N_PARAMS = 15 };

/* Everything one case needs, float32 for the library and double for the
 * test's own forward. */
typedef struct fixture {
    layer_case c;
    int64_t dim, qd, kv, T, n_x;   /* qd = H D */
    int64_t gw;                    /* the gate's width per token: H D, or H (PHEAD) */
    float *x, *w[N_PARAMS], *dy;   /* x [T, dim]; the parameters; dy [T, dim] */
    int64_t n_w[N_PARAMS];         /* 0 (and w NULL): no such bias or norm */
    double *xd, *wd[N_PARAMS], *dyd; /* the same values in double */
    int64_t starts[8], *ids;       /* positions as given to the library ([B], [T]) */
    int64_t *pos;                  /* every token's position [T] */
    ra_positions positions;
    ra_rope_config rope;
    double factors[64];            /* longrope short | long */
    ra_layer *layer;
    double inv_freq[64], af;       /* the layer's rope, read back */
} fixture;

static ra_rope_config rope_for(const layer_case *c, double *factors)
{
    ra_rope_config r = ra_rope_config_default(c->d);
    r.type = c->type;
    r.layout = c->layout;
    r.rotary_dim = c->rotary_dim;
    r.table_size = 4; /* later positions take the on-the-fly path */
    ra_rope_config *s = &r;
    int64_t half = (c->rotary_dim ? c->rotary_dim : c->d) / 2;
    for (int64_t i = 0; i < 2 * half; i++) factors[i] = 1.0 + 0.5 * (double)i;
    switch (c->type) {
    case RA_ROPE_YARN:
        s->factor = 4.0;
        s->original_max_position_embeddings = 8;
        break;
    case RA_ROPE_LLAMA3:
        s->factor = 8.0;
        s->low_freq_factor = 1.0;
        s->high_freq_factor = 4.0;
        s->original_max_position_embeddings = 8;
        break;
    case RA_ROPE_LONGROPE:
        s->short_factor = factors;
        s->long_factor = factors + half;
        s->original_max_position_embeddings = 8;
        s->max_position_embeddings = 32;
        s->seq_len = 20;
        break;
    default: break;
    }
    return r;
}

static void fixture_make(fixture *f, const layer_case *c, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->c = *c;
    f->qd = c->h * c->d;
    f->dim = c->dim ? c->dim : f->qd;
    f->kv = c->hkv * c->d;
    f->T = c->b * c->s;
    f->n_x = f->T * f->dim;
    f->gw = c->extras & PHEAD ? c->h : f->qd;
    const int64_t q_rows = c->extras & GATE && !(c->extras & WGATE) ? 2 * f->qd : f->qd;
    const int64_t n_w[N_PARAMS] = {q_rows * f->dim, f->kv * f->dim, f->kv * f->dim,
                                   f->dim * f->qd, c->extras & BIASES ? q_rows : 0,
                                   c->extras & BIASES ? f->kv : 0, c->extras & BIASES ? f->kv : 0,
                                   c->extras & BIASES ? f->dim : 0,
                                   c->extras & NORMS ? (c->extras & (WHOLE | HEADS) ? f->qd : c->d) : 0,
                                   c->extras & NORMS ? (c->extras & (WHOLE | HEADS) ? f->kv : c->d) : 0,
                                   c->extras & ONORM ? f->qd : 0,
                                   c->extras & NBIAS ? (c->extras & (WHOLE | HEADS) ? f->qd : c->d) : 0,
                                   c->extras & NBIAS ? (c->extras & (WHOLE | HEADS) ? f->kv : c->d) : 0,
                                   c->extras & WGATE ? f->gw * f->dim : 0,
                                   c->extras & BGATE ? c->h : 0};
    f->x = malloc(sizeof(float) * f->n_x);
    f->dy = malloc(sizeof(float) * f->n_x);
    f->xd = malloc(sizeof(double) * f->n_x);
    f->dyd = malloc(sizeof(double) * f->n_x);
    ra_test_fill(f->x, f->n_x, seed);
    ra_test_fill(f->dy, f->n_x, seed + 1);
    for (int64_t i = 0; i < f->n_x; i++) {
        f->x[i] *= 2.0f; /* unit-scale q and k: a peaked softmax */
        f->xd[i] = f->x[i];
        f->dyd[i] = f->dy[i];
    }
    for (int j = 0; j < N_PARAMS; j++) {
        f->n_w[j] = n_w[j];
        if (!n_w[j]) continue;
        f->w[j] = malloc(sizeof(float) * n_w[j]);
        f->wd[j] = malloc(sizeof(double) * n_w[j]);
        ra_test_fill(f->w[j], n_w[j], seed + 2 + j);
        for (int64_t i = 0; i < n_w[j]; i++) {
            if (j < 8 || j >= 13)
                f->w[j][i] *= 1.7f / sqrtf((float)f->dim); /* ~ nn.Linear's scale */
            else if (j < 11)
                f->w[j][i] = 1.0f + 0.25f * f->w[j][i]; /* norms: about 1 */
            else
                f->w[j][i] *= 0.5f; /* the norms' biases */
            f->wd[j][i] = f->w[j][i];
        }
    }
    f->ids = malloc(sizeof(int64_t) * f->T);
    f->pos = malloc(sizeof(int64_t) * f->T);
    for (int64_t b = 0; b < c->b; b++) f->starts[b] = 3 + 7 * b;
    for (int64_t t = 0; t < f->T; t++) f->ids[t] = (t * 5 + 2) % 13; /* any order, repeats */
    for (int64_t t = 0; t < f->T; t++)
        f->pos[t] = c->mode == 0 ? 6 + t % c->s
                  : c->mode == 1 ? f->starts[t / c->s] + t % c->s
                                 : f->ids[t];
    f->positions = c->mode == 0 ? (ra_positions){.struct_size = sizeof(ra_positions), .start = 6}
                 : c->mode == 1 ? (ra_positions){.struct_size = sizeof(ra_positions),
                                                 .starts = f->starts}
                                : (ra_positions){.struct_size = sizeof(ra_positions),
                                                 .ids = f->ids};
    ra_rope_config rope_cfg = rope_for(c, f->factors);
    ra_layer_config cfg = {.struct_size = sizeof cfg, .dim = f->dim, .n_heads = c->h,
                           .n_kv_heads = c->hkv, .head_dim = c->d, .rope = &rope_cfg,
                           .no_rope = c->no_rope, .norm_whole = (c->extras & WHOLE) != 0,
                           .norm_head_weights = (c->extras & HEADS) != 0,
                           .norm_layer = (c->extras & LAYER) != 0,
                           .qk_l2_norm = (c->extras & L2) != 0,
                           .temperature_floor = c->extras & TEMP ? 4.0 : 0.0,
                           .temperature_scale = 0.3,
                           .temperature_no_offset = (c->extras & TEMP0) != 0,
                           .temperature_length = c->extras & TEMPP ? 6.0 : 0.0,
                           .temperature_power = 0.5,
                           .scale = c->scale, .clip_qkv = c->clip,
                           .norm_after_rope = (c->extras & POST) != 0,
                           .gated_output = (c->extras & GATE) != 0,
                           .clip_after_norm = (c->extras & CLIPN) != 0,
                           .v_norm = (c->extras & VNORM) != 0,
                           .gate_per_head = (c->extras & PHEAD) != 0,
                           .gate_softplus = (c->extras & SOFTPLUS) != 0,
                           .v_scale = c->extras & VSCALE ? V_SCALE : 0.0,
                           .rope_values = (c->extras & VROPE) != 0};
    ra_layer_weights w = {.struct_size = sizeof w, .wq = f->w[0], .wk = f->w[1], .wv = f->w[2],
                          .wo = f->w[3],
                          .bq = f->w[4], .bk = f->w[5], .bv = f->w[6], .bo = f->w[7],
                          .q_norm = f->w[8], .k_norm = f->w[9], .o_norm = f->w[10],
                          .q_norm_bias = f->w[11], .k_norm_bias = f->w[12], .wgate = f->w[13],
                          .bgate = f->w[14]};
    CHECK(ra_layer_create(&f->layer, &cfg, &w) == RA_OK, "%s: create", c->name);
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &rope_cfg) == RA_OK, "%s: rope", c->name);
    ra_rope_inverse_frequencies(rope, f->inv_freq);
    f->af = ra_rope_attention_factor(rope);
    ra_rope_destroy(rope);
}

static void fixture_free(fixture *f)
{
    ra_layer_destroy(f->layer);
    free(f->x);
    free(f->dy);
    free(f->xd);
    free(f->dyd);
    free(f->ids);
    free(f->pos);
    for (int j = 0; j < N_PARAMS; j++) {
        free(f->w[j]);
        free(f->wd[j]);
    }
}

/* ---- the layer in double ------------------------------------------------ */

/* y = a w^T: a [n, in], w [out, in]. */
static void linear_d(double *y, const double *a, const double *w, int64_t n, int64_t in,
                     int64_t out)
{
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = 0; o < out; o++) {
            double acc = 0;
            for (int64_t i = 0; i < in; i++) acc += a[t * in + i] * w[o * in + i];
            y[t * out + o] = acc;
        }
}

/* RoPE on one head row at position m, in double: the pairs of the layout,
 * angles m * inv_freq[i], cos and sin times the attention factor. */
static void rope_d(const fixture *f, double *row, int64_t m)
{
    if (f->c.no_rope) return;
    int64_t rot = f->c.rotary_dim ? f->c.rotary_dim : f->c.d, half = rot / 2;
    for (int64_t i = 0; i < half; i++) {
        double ang = (double)m * f->inv_freq[i], cs = cos(ang) * f->af, sn = sin(ang) * f->af;
        int64_t ia = f->c.layout == RA_LAYOUT_INTERLEAVED ? 2 * i : i;
        int64_t ib = f->c.layout == RA_LAYOUT_INTERLEAVED ? 2 * i + 1 : i + half;
        double a = row[ia], b = row[ib];
        row[ia] = a * cs - b * sn;
        row[ib] = a * sn + b * cs;
    }
}

/* The dropout multiplier of one element, as the library draws it. */
static double mult_of(const fixture *f, uint32_t stream, uint64_t index)
{
    if (f->c.p == 0.0f) return 1.0;
    ra_dropout_mask mask = ra_dropout_mask_make(f->c.p, 42, stream);
    float m;
    ra_dropout_row(&mask, index, 1, &m);
    return m;
}

/* Each row of d: w * (row - mean) / sqrt(mean((row - mean)^2) + 1e-6) + b,
 * mean 0 unless centered (a LayerNorm), w = weight + (r % weight_rows) d
 * (NULL: no norm), b likewise from bias (NULL: 0). */
static void norm_d(double *x, const double *weight, const double *bias, int64_t rows, int64_t d,
                   int64_t weight_rows, int centered)
{
    for (int64_t r = 0; weight && r < rows; r++) {
        double mean = 0, squares = 0, *row = x + r * d;
        const double *w = weight + (r % weight_rows) * d;
        const double *b = bias ? bias + (r % weight_rows) * d : NULL;
        for (int64_t i = 0; centered && i < d; i++) mean += row[i] / (double)d;
        for (int64_t i = 0; i < d; i++) squares += (row[i] - mean) * (row[i] - mean);
        for (int64_t i = 0; i < d; i++)
            row[i] = w[i] * (row[i] - mean) / sqrt(squares / (double)d + 1e-6) + (b ? b[i] : 0);
    }
}

/* y [rows, cols] += bias on every row (NULL: no bias). */
static void add_bias_d(double *y, const double *bias, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; bias && r < rows; r++)
        for (int64_t i = 0; i < cols; i++) y[r * cols + i] += bias[i];
}

/* Each of x's n values clamped to [-limit, limit]. */
static void clip_d(double *x, int64_t n, double limit)
{
    for (int64_t i = 0; i < n; i++) x[i] = fmin(fmax(x[i], -limit), limit);
}

/* q [T, H D] = wq(x) + bq; with GATE, wq's rows are each head's D query
 * rows then its D gate rows, and gate [T, H D] gets the gate's (WGATE:
 * gate [T, gw] = wgate(x) + bgate, each head's bias on its gates). */
static void project_q_d(const fixture *f, const double *x, double *const w[N_PARAMS], double *q,
                        double *gate)
{
    const layer_case *c = &f->c;
    const int64_t T = f->T, qd = f->qd, D = c->d;
    if (!(c->extras & GATE) || (c->extras & WGATE)) {
        linear_d(q, x, w[0], T, f->dim, qd);
        add_bias_d(q, w[4], T, qd);
        if (!(c->extras & WGATE)) return;
        linear_d(gate, x, w[13], T, f->dim, f->gw); /* gate_proj(x) */
        for (int64_t i = 0; w[14] && i < T * f->gw; i++) /* + gate_bias[None, None, :, None] */
            gate[i] += w[14][(i % f->gw) / (f->gw / c->h)];
        return;
    }
    double *both = malloc(sizeof(double) * T * 2 * qd);
    linear_d(both, x, w[0], T, f->dim, 2 * qd);
    add_bias_d(both, w[4], T, 2 * qd);
    for (int64_t t = 0; t < T; t++) /* torch.chunk(q_proj(x).view(..., H, 2 D), 2, dim=-1) */
        for (int64_t h = 0; h < c->h; h++)
            for (int64_t e = 0; e < D; e++) {
                q[t * qd + h * D + e] = both[t * 2 * qd + h * 2 * D + e];
                gate[t * qd + h * D + e] = both[t * 2 * qd + h * 2 * D + D + e];
            }
    free(both);
}

/* The q and k norms of case c (q [T, H D], k [T, Hkv D]; none without NORMS). */
static void qk_norms_d(const layer_case *c, double *const w[N_PARAMS], double *q, double *k,
                       int64_t T)
{
    const int centered = (c->extras & LAYER) != 0, heads = (c->extras & HEADS) != 0;
    if (c->extras & WHOLE) {
        norm_d(q, w[8], w[11], T, c->h * c->d, 1, centered);
        norm_d(k, w[9], w[12], T, c->hkv * c->d, 1, centered);
    } else {
        norm_d(q, w[8], w[11], T * c->h, c->d, heads ? c->h : 1, centered);
        norm_d(k, w[9], w[12], T * c->hkv, c->d, heads ? c->hkv : 1, centered);
    }
}

/* L = sum(y * dy) for the layer in double, at the given x and weights;
 * y (if not NULL) gets the output. */
static double loss_d(const fixture *f, const double *x, double *const w[N_PARAMS],
                     double *y_out)
{
    const layer_case *c = &f->c;
    const int64_t T = f->T, dim = f->dim, qd = f->qd, kv = f->kv, D = c->d, S = c->s;
    const int64_t rep = c->h / c->hkv;
    double *q = malloc(sizeof(double) * T * qd), *k = malloc(sizeof(double) * T * kv);
    double *v = malloc(sizeof(double) * T * kv), *att = malloc(sizeof(double) * T * qd);
    double *y = malloc(sizeof(double) * T * dim), *p = malloc(sizeof(double) * S);
    double *gate = malloc(sizeof(double) * T * qd);
    project_q_d(f, x, w, q, gate);     /* xq = wq(x) */
    linear_d(k, x, w[1], T, dim, kv);  /* xk = wk(x) */
    linear_d(v, x, w[2], T, dim, kv);  /* xv = wv(x) */
    add_bias_d(k, w[5], T, kv);
    add_bias_d(v, w[6], T, kv);
    const int clip_late = (c->extras & CLIPN) != 0; /* OLMoE: q and k after their norms */
    if (c->clip) {
        if (!clip_late) clip_d(q, T * qd, c->clip);
        if (!clip_late) clip_d(k, T * kv, c->clip);
        clip_d(v, T * kv, c->clip);
    }
    if (c->extras & VNORM) { /* Gemma 3n's v_norm: each head, no weights */
        double *ones = malloc(sizeof(double) * D);
        for (int64_t i = 0; i < D; i++) ones[i] = 1.0;
        norm_d(v, ones, NULL, T * c->hkv, D, 1, 0);
        free(ones);
    }
    for (int64_t i = 0; (c->extras & VSCALE) && i < T * kv; i++) v[i] *= V_SCALE;
    if (!(c->extras & POST)) qk_norms_d(c, w, q, k, T);
    if (c->clip && clip_late) {
        clip_d(q, T * qd, c->clip);
        clip_d(k, T * kv, c->clip);
    }
    const double scale = c->scale ? c->scale : 1.0 / sqrt((double)D);
    for (int64_t t = 0; t < T; t++) {
        for (int64_t h = 0; h < c->h; h++) rope_d(f, q + (t * c->h + h) * D, f->pos[t]);
        for (int64_t h = 0; h < c->hkv; h++) rope_d(f, k + (t * c->hkv + h) * D, f->pos[t]);
        for (int64_t h = 0; (c->extras & VROPE) && h < c->hkv; h++) /* RoFormer's rotary_value */
            rope_d(f, v + (t * c->hkv + h) * D, f->pos[t]);
    }
    if (c->extras & POST) qk_norms_d(c, w, q, k, T); /* HunYuan: after apply_rotary_pos_emb */
    if (c->extras & L2) { /* Llama 4: after RoPE, no weights */
        for (int64_t r = 0; r < T * c->h + T * c->hkv; r++) {
            double *row = r < T * c->h ? q + r * D : k + (r - T * c->h) * D, squares = 0;
            for (int64_t i = 0; i < D; i++) squares += row[i] * row[i];
            for (int64_t i = 0; i < D; i++) row[i] /= sqrt(squares / (double)D + 1e-6);
        }
    }
    const double offset = c->extras & TEMP0 ? 0.0 : 1.0; /* Ministral 3's, Llama 4's */
    for (int64_t t = 0; (c->extras & TEMP) && t < T; t++) /* the temperature */
        for (int64_t i = 0; i < qd; i++)
            q[t * qd + i] *= 1.0 + 0.3 * log1p(floor(((double)f->pos[t] + offset) / 4.0));
    for (int64_t t = 0; (c->extras & TEMPP) && t < T; t++) /* Beam's scalable softmax */
        for (int64_t i = 0; i < qd; i++)
            q[t * qd + i] *= pow(1.0 + ((double)f->pos[t] + 1.0) / 6.0, 0.5);
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t h = 0; h < c->h; h++)
            for (int64_t i = 0; i < S; i++) {
                const double *qi = q + ((b * S + i) * c->h + h) * D;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j <= i; j++) {
                    const double *kj = k + ((b * S + j) * c->hkv + h / rep) * D;
                    double dot = 0;
                    for (int64_t e = 0; e < D; e++) dot += qi[e] * kj[e];
                    p[j] = dot * scale;
                    mx = fmax(mx, p[j]);
                }
                for (int64_t j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
                for (int64_t j = 0; j <= i; j++) /* attn_dropout(softmax(scores)) */
                    p[j] = p[j] / sum *
                           mult_of(f, RA_STREAM_ATTENTION, (uint64_t)(((b * c->h + h) * S + i) * S + j));
                double *oi = att + ((b * S + i) * c->h + h) * D;
                for (int64_t e = 0; e < D; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j <= i; j++)
                        acc += p[j] * v[((b * S + j) * c->hkv + h / rep) * D + e];
                    oi[e] = acc;
                }
            }
    for (int64_t i = 0; (c->extras & GATE) && i < T * qd; i++) { /* * torch.sigmoid(gate) */
        const double g = c->extras & PHEAD ? gate[i / D] : gate[i]; /* per head: [T, H] */
        att[i] *= c->extras & SOFTPLUS ? log1p(exp(g)) : 1.0 / (1.0 + exp(-g));
    }
    norm_d(att, w[10], NULL, T, qd, 1, 0); /* BitNet's attn_sub_norm */
    linear_d(y, att, w[3], T, qd, dim); /* output = wo(output) */
    add_bias_d(y, w[7], T, dim);
    double loss = 0;
    for (int64_t i = 0; i < T * dim; i++) {
        y[i] *= mult_of(f, RA_STREAM_OUTPUT, (uint64_t)i); /* resid_dropout */
        loss += y[i] * f->dyd[i];
    }
    if (y_out) memcpy(y_out, y, sizeof(double) * T * dim);
    free(q);
    free(k);
    free(v);
    free(att);
    free(y);
    free(p);
    free(gate);
    return loss;
}

/* max |a - b| / max |b|, with b in double; max |a - b| where max |b| is
 * below 1e-6: a gradient that is 0 but for rounding (a bias added to every
 * key after RoPE moves no logit of the softmax: k_norm_bias after RoPE). */
static double rel_err(const float *a, const double *b, int64_t n)
{
    double diff = 0, ref = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        diff = fmax(diff, fabs(a[i] - b[i]));
        ref = fmax(ref, fabs(b[i]));
    }
    return ref > 1e-6 ? diff / ref : diff;
}

/* Central differences of loss_d in every entry of param (x or a weight). */
static void finite_differences(const fixture *f, double *param, int64_t n, double *out)
{
    double *const *w = f->wd;
    for (int64_t i = 0; i < n; i++) {
        double keep = param[i];
        param[i] = keep + FD_STEP;
        double up = loss_d(f, f->xd, w, NULL);
        param[i] = keep - FD_STEP;
        double down = loss_d(f, f->xd, w, NULL);
        param[i] = keep;
        out[i] = (up - down) / (2 * FD_STEP);
    }
}

/* The library's training forward and backward on one path and context. */
typedef struct grads {
    float *y, *dx, *dw[N_PARAMS]; /* dw NULL where the layer has no such bias or norm */
} grads;

static void grads_alloc(grads *g, const fixture *f)
{
    g->y = malloc(sizeof(float) * f->n_x);
    g->dx = malloc(sizeof(float) * f->n_x);
    for (int j = 0; j < N_PARAMS; j++)
        g->dw[j] = f->n_w[j] ? malloc(sizeof(float) * f->n_w[j]) : NULL;
}

static void grads_free(grads *g)
{
    free(g->y);
    free(g->dx);
    for (int j = 0; j < N_PARAMS; j++) free(g->dw[j]);
}

/* The library's view of g's gradients (dw[4..7]: the biases', dw[8..9]:
 * the norms'). */
static ra_layer_grads layer_grads(const grads *g, int accumulate)
{
    return (ra_layer_grads){.struct_size = sizeof(ra_layer_grads), .dwq = g->dw[0], .dwk = g->dw[1],
                            .dwv = g->dw[2], .dwo = g->dw[3],
                            .accumulate = accumulate, .dbq = g->dw[4], .dbk = g->dw[5],
                            .dbv = g->dw[6], .dbo = g->dw[7], .dq_norm = g->dw[8],
                            .dk_norm = g->dw[9], .do_norm = g->dw[10],
                            .dq_norm_bias = g->dw[11], .dk_norm_bias = g->dw[12],
                            .dwgate = g->dw[13], .dbgate = g->dw[14]};
}

static ra_status run_library(const fixture *f, ra_context *ctx, ra_attention_path path, grads *g)
{
    ra_layer_tape *tape;
    ra_status st = ra_layer_tape_create(&tape, f->layer, f->T);
    if (st != RA_OK) return st;
    ra_attention_options opt = {.struct_size = sizeof opt, .path = path, .dropout = f->c.p,
                              .seed = 42};
    st = ra_layer_forward_train(ctx, f->layer, g->y, tape, f->x, f->c.b, f->c.s, &f->positions,
                                &opt);
    ra_layer_grads lg = layer_grads(g, 0);
    if (st == RA_OK) st = ra_layer_backward(ctx, f->layer, g->dx, &lg, tape, f->dy);
    ra_layer_tape_destroy(tape);
    return st;
}

/* ---- finite differences ------------------------------------------------- */

static const layer_case fd_cases[] = {
    /* name                       B  S  H  Hkv D  layout                 type              rot mode p     no_rope dim extras */
    {"1:1 interleaved, start",   2, 5, 2, 2, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT,  0, 0, 0.0f, 0, 0, 0, 0, 0},
    {"2:1 half, yarn, partial, ids", 1, 6, 4, 2, 4, RA_LAYOUT_HALF,   RA_ROPE_YARN,     2, 2, 0.0f, 0, 0, 0, 0, 0},
    {"4:1 llama3, starts, dropout", 2, 4, 4, 1, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_LLAMA3, 0, 1, 0.3f, 0, 0, 0, 0, 0},
    {"2:1 half longrope, dropout", 1, 7, 2, 1, 6, RA_LAYOUT_HALF,     RA_ROPE_LONGROPE, 4, 0, 0.25f, 0, 0, 0, 0, 0},
    {"one token",                1, 1, 2, 1, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT,  0, 0, 0.0f, 0, 0, 0, 0, 0},
    {"no_rope",                  1, 5, 2, 1, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT,  0, 2, 0.0f, 1, 0, 0, 0, 0},
    /* H D != dim, as in Qwen3 (wider) and Mistral-Nemo (narrower) */
    {"H D > dim, half, starts",  2, 4, 4, 2, 4, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  0, 1, 0.0f, 0, 6, 0, 0, 0},
    {"H D < dim, dropout",       1, 5, 2, 1, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 0, 0.2f, 0, 13, 0, 0, 0},
    /* biases (Qwen2: bq, bk, bv; here bo as well, before resid_dropout) */
    {"biases, 2:1 half, ids",    1, 6, 4, 2, 4, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  0, 2, 0.0f, 0, 0, 1, 0, 0},
    {"biases, dropout, H D > dim", 2, 4, 2, 1, 6, RA_LAYOUT_INTERLEAVED, RA_ROPE_YARN, 0, 1, 0.25f, 0, 8, 1, 0, 0},
    /* per-head q/k RMSNorm before RoPE (Qwen3) */
    {"q/k norms, half, H D > dim", 2, 4, 4, 2, 4, RA_LAYOUT_HALF,     RA_ROPE_DEFAULT,  0, 1, 0.0f, 0, 6, NORMS, 0, 0},
    {"q/k norms, biases, dropout", 1, 6, 2, 1, 6, RA_LAYOUT_INTERLEAVED, RA_ROPE_LLAMA3, 0, 2, 0.2f, 0, 0, 3, 0, 0},
    /* q/k RMSNorm over the whole projection (OLMo 2) */
    {"whole-projection norms",   2, 4, 4, 2, 4, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  0, 1, 0.0f, 0, 6, NORMS | WHOLE, 0, 0},
    /* LayerNorms, and each head's own norm weights (Cohere, StableLM 2) */
    {"LayerNorms, heads' own",   2, 4, 4, 2, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 1, 0.0f, 0, 6, NORMS | HEADS | LAYER, 0, 0},
    {"RMSNorms, heads' own",     1, 5, 4, 1, 6, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  4, 2, 0.2f, 0, 0, NORMS | HEADS | BIASES, 0, 0},
    {"whole LayerNorms, clip",   1, 5, 2, 2, 4, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  0, 0, 0.0f, 0, 0, NORMS | WHOLE | LAYER, 0, 0.5},
    /* Llama 4: the L2 norm after RoPE (llama3 rope; partial; with weighted
     * norms and clip_qkv), temperature tuning (NoPE layers; any layer here) */
    {"L2 norm, llama3, starts",  2, 5, 4, 2, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_LLAMA3, 0, 1, 0.0f, 0, 0, L2, 0, 0},
    {"L2, norms, clip, partial", 1, 6, 4, 2, 6, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  4, 2, 0.2f, 0, 0, NORMS | L2 | BIASES, 0, 0.5},
    {"temperature, no_rope",     2, 6, 4, 1, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 1, 0.0f, 1, 0, TEMP, 0, 0},
    {"temperature, L2, scale, ids", 1, 7, 2, 1, 4, RA_LAYOUT_HALF,    RA_ROPE_DEFAULT,  0, 2, 0.1f, 0, 0, TEMP | L2, 0.4, 0},
    /* Ministral 3: the temperature at p (not p + 1), in RoPE layers (yarn) */
    {"temperature at p, yarn",   2, 6, 4, 2, 4, RA_LAYOUT_HALF,       RA_ROPE_YARN,     0, 1, 0.0f, 0, 0, TEMP | TEMP0, 0, 0},
    {"temperature at p, ids, dropout", 1, 7, 2, 1, 6, RA_LAYOUT_HALF, RA_ROPE_DEFAULT,  0, 2, 0.2f, 0, 8, TEMP | TEMP0 | BIASES, 0, 0},
    /* q times a power of its position (Beam's NoPE layers: q/k norms, the
     * gate per feature with a bias per head); with RoPE and dropout */
    {"temperature power, no_rope, norms", 2, 6, 4, 2, 4, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, 1, 0.0f, 1, 0, TEMPP | NORMS | GATE | WGATE | BGATE, 0, 0},
    {"temperature power, ids, dropout", 1, 7, 2, 1, 6, RA_LAYOUT_INTERLEAVED, RA_ROPE_YARN, 0, 2, 0.2f, 0, 8, TEMPP | BIASES, 0, 0},
    /* a softmax scale of its own (Granite's attention_multiplier, Gemma's
     * query_pre_attn_scalar) */
    {"scale 0.3, norms, dropout", 1, 6, 4, 2, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 2, 0.2f, 0, 0, NORMS, 0.3, 0},
    {"scale 1/16, biases",       2, 5, 2, 1, 8, RA_LAYOUT_HALF,       RA_ROPE_YARN,     0, 0, 0.0f, 0, 10, BIASES, 0.0625, 0},
    /* q, k, v clamped (OLMo's clip_qkv), with and without norms */
    {"clip_qkv 0.5, biases",     2, 4, 4, 2, 4, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  0, 1, 0.0f, 0, 6, BIASES, 0, 0.5},
    {"clip_qkv 0.4, norms",      1, 6, 2, 1, 6, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 2, 0.2f, 0, 0, NORMS, 0.3, 0.4},
    /* clip_qkv after the q/k norms (OLMoE: whole-projection norms) */
    {"clip after norms, whole",  2, 4, 4, 2, 4, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  0, 1, 0.0f, 0, 6, NORMS | WHOLE | CLIPN | BIASES, 0, 0.8},
    {"clip after norms, heads, dropout", 1, 6, 2, 1, 6, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 2, 0.2f, 0, 0, NORMS | CLIPN, 0.3, 0.9},
    /* q/k norms after RoPE (HunYuan-V1-Dense); the norms there take yarn's
     * attention factor away */
    {"norms after RoPE, starts",  2, 4, 4, 2, 4, RA_LAYOUT_HALF,      RA_ROPE_DEFAULT,  0, 1, 0.0f, 0, 6, NORMS | POST, 0, 0},
    {"after RoPE: yarn, LayerNorms, clip", 1, 6, 4, 2, 6, RA_LAYOUT_HALF, RA_ROPE_YARN, 4, 2, 0.2f, 0, 0, NORMS | POST | HEADS | LAYER | BIASES, 0.3, 0.5},
    {"after RoPE: whole, llama3", 1, 5, 2, 1, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_LLAMA3, 0, 0, 0.0f, 0, 0, NORMS | WHOLE | POST, 0, 0},
    /* an RMSNorm over the attention's output before wo (BitNet's attn_sub_norm) */
    {"o_norm, biases, dropout",  2, 4, 4, 2, 4, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  0, 1, 0.2f, 0, 6, ONORM | BIASES, 0, 0},
    {"o_norm, q/k norms, H D < dim", 1, 6, 2, 1, 6, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 2, 0.0f, 0, 16, ONORM | NORMS, 0.3, 0},
    /* the output gated by sigmoid of wq's gate rows (Qwen3-Next: q/k norms, partial rotary) */
    {"gated, norms, partial",    2, 4, 4, 2, 8, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  4, 1, 0.0f, 0, 12, GATE | NORMS, 0, 0},
    {"gated, biases, dropout, clip", 1, 6, 2, 1, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_YARN, 0, 2, 0.2f, 0, 0, GATE | BIASES, 0, 0.5},
    {"gated, o_norm, after RoPE", 1, 5, 4, 1, 4, RA_LAYOUT_HALF,      RA_ROPE_DEFAULT,  0, 0, 0.1f, 0, 0, GATE | ONORM | NORMS | POST, 0.3, 0},
    /* v's heads RMS-normed without weights (Gemma 3n: q/k norms, softmax scale 1) */
    {"v_norm, q/k norms, scale 1", 2, 4, 4, 2, 4, RA_LAYOUT_HALF,     RA_ROPE_DEFAULT,  0, 1, 0.0f, 0, 6, VNORM | NORMS, 1.0, 0},
    {"v_norm, biases, dropout, clip", 1, 6, 2, 1, 6, RA_LAYOUT_INTERLEAVED, RA_ROPE_YARN, 0, 2, 0.2f, 0, 0, VNORM | BIASES, 0, 0.5},
    {"v_norm alone, GQA 4:1",    1, 5, 4, 1, 4, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  0, 0, 0.0f, 0, 0, VNORM, 0, 0},
    /* v scaled by a constant (MiMo-V2-Flash's attention_value_scale), after v_norm and clip */
    {"v_scale, biases, clip",    2, 4, 4, 2, 4, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  0, 1, 0.0f, 0, 6, VSCALE | BIASES, 0, 0.5},
    {"v_scale, v_norm, dropout", 1, 6, 2, 1, 6, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 2, 0.2f, 0, 0, VSCALE | VNORM | NORMS, 0, 0},
    /* LayerNorms with biases (Persimmon: one LayerNorm over head_dim shared by
     * the heads, partial rotary, biased projections); each head's own, after
     * RoPE, with the L2 norm and clip_qkv; over the whole projection */
    {"LayerNorm biases, partial", 2, 5, 4, 4, 8, RA_LAYOUT_HALF,      RA_ROPE_DEFAULT,  4, 1, 0.0f, 0, 0, NORMS | LAYER | NBIAS | BIASES, 0, 0},
    {"norm biases, heads, after RoPE", 1, 6, 4, 2, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_YARN, 0, 2, 0.2f, 0, 6, NORMS | LAYER | NBIAS | HEADS | POST, 0, 0},
    {"norm biases, L2, clip",    1, 5, 4, 2, 6, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  0, 0, 0.0f, 0, 0, NORMS | LAYER | NBIAS | L2, 0, 0.5},
    {"norm biases, whole",       2, 4, 2, 1, 4, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  0, 1, 0.0f, 0, 0, NORMS | LAYER | NBIAS | WHOLE, 0.3, 0},
    /* the gate from a weight of its own (AfMoE's gate_proj: q/k norms, NoPE
     * layers; biases on q here), with o_norm, dropout */
    {"wgate, norms, H D > dim",  2, 4, 4, 2, 4, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  0, 1, 0.0f, 0, 6, GATE | WGATE | NORMS, 0, 0},
    {"wgate, biases, no_rope, dropout", 1, 6, 2, 1, 6, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 2, 0.2f, 1, 0, GATE | WGATE | BIASES | ONORM, 0, 0},
    /* wgate per head (LFM3's g_proj: q/k norms), softplus (Laguna's, per
     * head or per feature), a bias per head (Beam's gate_bias) */
    {"gate per head, norms",     2, 4, 4, 2, 4, RA_LAYOUT_HALF,       RA_ROPE_DEFAULT,  0, 1, 0.0f, 0, 6, GATE | WGATE | PHEAD | NORMS, 0, 0},
    {"softplus per head, dropout", 1, 6, 2, 1, 6, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 2, 0.2f, 0, 0, GATE | WGATE | PHEAD | SOFTPLUS, 0, 0},
    {"softplus per feature, o_norm", 1, 5, 4, 2, 4, RA_LAYOUT_HALF,   RA_ROPE_YARN,     0, 0, 0.0f, 0, 8, GATE | WGATE | SOFTPLUS | ONORM, 0, 0},
    {"bgate per feature, biases", 2, 4, 4, 2, 4, RA_LAYOUT_HALF,      RA_ROPE_DEFAULT,  0, 1, 0.1f, 0, 6, GATE | WGATE | BGATE | BIASES, 0, 0},
    {"bgate per head, softplus", 1, 6, 4, 1, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 2, 0.0f, 0, 0, GATE | WGATE | PHEAD | BGATE | SOFTPLUS | NORMS, 0, 0},
    /* RoPE on v too (RoFormer's rotary_value: interleaved, biases); with GQA,
     * partial rotary, v_scale, ids and dropout */
    {"rope on v, biases, starts", 2, 5, 4, 4, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 1, 0.0f, 0, 0, VROPE | BIASES, 0, 0},
    {"rope on v, GQA, partial, v_scale", 1, 7, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 4, 2, 0.2f, 0, 0, VROPE | VSCALE | NORMS, 0, 0},
};

/* Each case's double forward and finite differences: the fixture's
 * arithmetic alone, the same on every SIMD path, so they are computed on
 * the first path ra_test_each_isa runs and kept for the others (under
 * ASan they cost 6 s a path). */
#define N_FD_CASES (sizeof fd_cases / sizeof fd_cases[0])
static double *fd_y_ref[N_FD_CASES], *fd_memo[N_FD_CASES][1 + N_PARAMS];

static void fd_memo_free(void)
{
    for (size_t t = 0; t < N_FD_CASES; t++) {
        free(fd_y_ref[t]);
        for (int j = 0; j < 1 + N_PARAMS; j++) free(fd_memo[t][j]);
    }
}

static void test_finite_differences(void)
{
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    static int registered;
    if (!registered) registered = !atexit(fd_memo_free);
    for (size_t t = 0; t < N_FD_CASES; t++) {
        fixture f;
        fixture_make(&f, &fd_cases[t], 100 + 10 * t);
        double **fd = fd_memo[t];
        if (!fd_y_ref[t]) {
            fd_y_ref[t] = malloc(sizeof(double) * f.n_x);
            loss_d(&f, f.xd, f.wd, fd_y_ref[t]);
            fd[0] = malloc(sizeof(double) * f.n_x);
            finite_differences(&f, f.xd, f.n_x, fd[0]);
            for (int j = 0; j < N_PARAMS; j++) {
                if (!f.n_w[j]) continue;
                fd[1 + j] = malloc(sizeof(double) * f.n_w[j]);
                finite_differences(&f, f.wd[j], f.n_w[j], fd[1 + j]);
            }
        }
        const double *y_ref = fd_y_ref[t];
        static const char *const names[1 + N_PARAMS] = {"dx",  "dwq", "dwk", "dwv", "dwo",   "dbq",
                                                        "dbk", "dbv", "dbo", "dq_norm", "dk_norm",
                                                        "do_norm", "dq_norm_bias",
                                                        "dk_norm_bias", "dwgate", "dbgate"};
        for (int path = RA_PATH_REFERENCE; path <= RA_PATH_FLASH; path++) {
            grads g;
            grads_alloc(&g, &f);
            ra_status st = run_library(&f, ctx, (ra_attention_path)path, &g);
            CHECK(st == RA_OK, "%s path %d: %s", f.c.name, path, ra_status_string(st));
            /* y: float32 against double, as the forward's own tests (1e-5) */
            double ey = rel_err(g.y, y_ref, f.n_x), worst = 0;
            CHECK(ey <= 1e-5, "%s path %d: y differs from the double forward by %.3g", f.c.name,
                  path, ey);
            for (int j = 0; j < 1 + N_PARAMS; j++) {
                if (!fd[j]) continue; /* no such bias or norm */
                const float *got = j ? g.dw[j - 1] : g.dx;
                double e = rel_err(got, fd[j], j ? f.n_w[j - 1] : f.n_x);
                CHECK(e <= FD_TOL, "%s path %d: %s differs from finite differences by %.3g",
                      f.c.name, path, names[j], e);
                worst = fmax(worst, e);
            }
            printf("  %-32s %-9s y %.1e, worst gradient vs finite differences %.1e\n", f.c.name,
                   path == RA_PATH_REFERENCE ? "reference" : "flash", ey, worst);
            grads_free(&g);
        }
        fixture_free(&f);
    }
    ra_context_destroy(ctx);
}

/* ---- larger shapes: paths and threads ----------------------------------- */

/* Flash and reference agree on shapes that cross the flash tiles (64 keys),
 * with and without dropout, to 1e-5 of max|gradient|: float32 sums in other
 * orders (flash) against double sums (reference) around the same float32
 * projections; seen: at most 6e-7.  Threads: 1, 2, 3 and no context give
 * the same bits on each path. */
static void test_paths_and_threads(void)
{
    const layer_case cases[] = {
        {"S 70, 4:1", 2, 70, 8, 2, 16, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, 2, 0.0f, 0, 0, 0, 0, 0},
        {"S 130, 1:1, dropout", 1, 130, 2, 2, 32, RA_LAYOUT_INTERLEAVED, RA_ROPE_YARN, 0, 0, 0.2f, 0, 0, 0, 0, 0},
        {"S 33, 8:1, dropout", 3, 33, 8, 1, 8, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 1, 0.1f, 0, 0, 0, 0, 0},
    };
    ra_context *ctxs[4] = {NULL, NULL, NULL, NULL};
    for (int i = 1; i < 4; i++) CHECK(ra_context_create(&ctxs[i], i) == RA_OK, "ctx %d", i);
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        fixture f;
        fixture_make(&f, &cases[t], 500 + t);
        grads by_path[2];
        for (int path = 0; path < 2; path++) {
            grads_alloc(&by_path[path], &f);
            ra_attention_path p = path ? RA_PATH_FLASH : RA_PATH_REFERENCE;
            CHECK(run_library(&f, ctxs[2], p, &by_path[path]) == RA_OK, "%s", f.c.name);
            for (int c = 0; c < 4; c++) {
                if (c == 2) continue;
                grads g;
                grads_alloc(&g, &f);
                CHECK(run_library(&f, ctxs[c], p, &g) == RA_OK, "%s", f.c.name);
                int same = memcmp(g.y, by_path[path].y, sizeof(float) * f.n_x) == 0 &&
                           memcmp(g.dx, by_path[path].dx, sizeof(float) * f.n_x) == 0;
                for (int j = 0; j < N_PARAMS; j++)
                    same &= !f.n_w[j] ||
                            memcmp(g.dw[j], by_path[path].dw[j], sizeof(float) * f.n_w[j]) == 0;
                CHECK(same, "%s path %d: %d threads differ from 2", f.c.name, path, c);
                grads_free(&g);
            }
        }
        double worst = ra_test_max_rel_diff(by_path[1].dx, by_path[0].dx, f.n_x);
        for (int j = 0; j < N_PARAMS; j++)
            if (f.n_w[j])
                worst = fmax(worst, ra_test_max_rel_diff(by_path[1].dw[j], by_path[0].dw[j],
                                                         f.n_w[j]));
        CHECK(worst <= 1e-5, "%s: flash and reference gradients differ by %.3g", f.c.name, worst);
        printf("  %-32s flash vs reference gradients %.1e\n", f.c.name, worst);
        grads_free(&by_path[0]);
        grads_free(&by_path[1]);
        fixture_free(&f);
    }
    for (int i = 1; i < 4; i++) ra_context_destroy(ctxs[i]);
}

/* ---- dropout and the inference forward ---------------------------------- */

/* forward_train's y is ra_layer_forward's, bit for bit: inference, training
 * with p = 0 (= inference) and training with dropout (the same masks).  The
 * inference forward's flash path rotates q and k as attention loads its
 * tiles, forward_train in a pass of its own: the same bits for both
 * layouts, partial rotary, a scaled rope, every kind of positions, several
 * query blocks and key tiles (S past 64), and head_dim off the vector width. */
static void test_forward_matches(void)
{
    const layer_case cases[] = {
        {"S 40", 2, 40, 4, 2, 16, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, 0, 0.0f, 0, 0, 0, 0, 0},
        {"S 150 ids", 2, 150, 8, 2, 20, RA_LAYOUT_INTERLEAVED, RA_ROPE_YARN, 12, 2, 0.0f, 0, 0, 0, 0, 0},
        {"S 77 starts", 1, 77, 3, 3, 8, RA_LAYOUT_HALF, RA_ROPE_LLAMA3, 0, 1, 0.0f, 0, 0, 0, 0, 0},
        {"S 70 GQA 8", 1, 70, 8, 1, 36, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 20, 0, 0.0f, 0, 0, 0, 0, 0}};
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const layer_case c = cases[ci];
        fixture f;
        fixture_make(&f, &c, 700 + ci);
        float *y = malloc(sizeof(float) * f.n_x), *yt = malloc(sizeof(float) * f.n_x);
        ra_layer_tape *tape;
        CHECK(ra_layer_tape_create(&tape, f.layer, f.T) == RA_OK, "tape");
        for (int path = RA_PATH_AUTO; path < RA_PATH_COUNT; path++) {
            const ra_attention_options opts[] = {
                {.struct_size = sizeof opts[0], .path = (ra_attention_path)path, .seed = 7},
                {.struct_size = sizeof opts[0], .path = (ra_attention_path)path, .dropout = 0.5f,
                 .seed = 7}};
            for (int o = 0; o < 2; o++) {
                CHECK(ra_layer_forward(ctx, f.layer, y, f.x, c.b, c.s, &f.positions, &opts[o]) ==
                      RA_OK, "forward");
                CHECK(ra_layer_forward_train(ctx, f.layer, yt, tape, f.x, c.b, c.s, &f.positions,
                                             &opts[o]) == RA_OK, "forward_train");
                CHECK(memcmp(y, yt, sizeof(float) * f.n_x) == 0,
                      "%s path %d options %d: forward_train differs from ra_layer_forward", c.name,
                      path, o);
            }
        }
        ra_layer_tape_destroy(tape);
        free(y);
        free(yt);
        fixture_free(&f);
    }
    ra_context_destroy(ctx);
}

/* The backward applies the output mask the forward drew: a dy that is one
 * at an element the forward dropped (y == 0 there) gives all-zero
 * gradients; one at a kept element gives nonzero ones.  (The attention's
 * mask is checked by the finite differences with dropout above.) */
static void test_output_mask(void)
{
    const layer_case c = {"S 9", 1, 9, 2, 1, 8, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 0, 0.5f, 0, 0, 0, 0, 0};
    fixture f;
    fixture_make(&f, &c, 800);
    grads g;
    grads_alloc(&g, &f);
    ra_layer_tape *tape;
    CHECK(ra_layer_tape_create(&tape, f.layer, f.T) == RA_OK, "tape");
    ra_attention_options opt = {.struct_size = sizeof opt, .path = RA_PATH_FLASH, .dropout = 0.5f,
                              .seed = 42};
    CHECK(ra_layer_forward_train(NULL, f.layer, g.y, tape, f.x, c.b, c.s, &f.positions, &opt) ==
              RA_OK, "forward");
    int64_t dropped = -1, kept = -1;
    for (int64_t i = f.n_x / 2; i < f.n_x; i++) {
        if (g.y[i] == 0.0f && dropped < 0) dropped = i;
        if (g.y[i] != 0.0f && kept < 0) kept = i;
    }
    CHECK(dropped >= 0 && kept >= 0, "p = 0.5 dropped nothing or everything");
    const int64_t probes[2] = {dropped, kept};
    for (int k = 0; dropped >= 0 && kept >= 0 && k < 2; k++) {
        memset(f.dy, 0, sizeof(float) * f.n_x);
        f.dy[probes[k]] = 1.0f;
        ra_layer_grads lg = layer_grads(&g, 0);
        CHECK(ra_layer_backward(NULL, f.layer, g.dx, &lg, tape, f.dy) == RA_OK, "backward");
        double norm = 0;
        for (int64_t i = 0; i < f.n_x; i++) norm += fabs(g.dx[i]);
        for (int j = 0; j < N_PARAMS; j++)
            for (int64_t i = 0; i < f.n_w[j]; i++) norm += fabs(g.dw[j][i]);
        CHECK(k == 0 ? norm == 0 : norm > 0, "%s element: gradient norm %g",
              k == 0 ? "dropped" : "kept", norm);
    }
    ra_layer_tape_destroy(tape);
    grads_free(&g);
    fixture_free(&f);
}

/* ---- accumulate, overwrite, reuse --------------------------------------- */

/* accumulate = 0 ignores what the buffers held (NaN here); accumulate = 1
 * adds: G then G again is 2 G (to rounding: sgemm may add blockwise).  dx
 * is always overwritten.  The tape survives a backward (a second one gives
 * the same bits) and serves a smaller call after a larger one. */
static void test_accumulate_and_reuse(void)
{
    const layer_case c = {"S 12, biases, norms", 2, 12, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT,
                          0, 0, 0.1f, 0, 0, BIASES | NORMS | ONORM | GATE | LAYER | NBIAS, 0, 0};
    fixture f;
    fixture_make(&f, &c, 900);
    grads g, h;
    grads_alloc(&g, &f);
    grads_alloc(&h, &f);
    ra_layer_tape *tape;
    CHECK(ra_layer_tape_create(&tape, f.layer, 2 * f.T) == RA_OK, "tape");
    ra_attention_options opt = {.struct_size = sizeof opt, .path = RA_PATH_FLASH, .dropout = 0.1f,
                              .seed = 42};
    CHECK(ra_layer_forward_train(NULL, f.layer, g.y, tape, f.x, c.b, c.s, &f.positions, &opt) ==
              RA_OK, "forward");
    for (int j = 0; j < N_PARAMS; j++) {
        for (int64_t i = 0; i < f.n_w[j]; i++) g.dw[j][i] = NAN, h.dw[j][i] = 0.0f;
    }
    for (int64_t i = 0; i < f.n_x; i++) g.dx[i] = h.dx[i] = NAN;
    ra_layer_grads overwrite = layer_grads(&g, 0), accumulate = layer_grads(&h, 1);
    ra_layer_grads no_dbk = overwrite, no_dk_norm = overwrite, dbo_on_bo = overwrite;
    ra_layer_grads no_do_norm = overwrite, no_dk_norm_bias = overwrite;
    no_dk_norm_bias.dk_norm_bias = NULL; /* the layer has k_norm_bias */
    CHECK(ra_layer_backward(NULL, f.layer, g.dx, &no_dk_norm_bias, tape, f.dy) == RA_ERR_NULL,
          "no dk_norm_bias");
    no_dbk.dbk = NULL;         /* the layer has bk */
    no_dk_norm.dk_norm = NULL; /* and k_norm */
    no_do_norm.do_norm = NULL; /* and o_norm */
    CHECK(ra_layer_backward(NULL, f.layer, g.dx, &no_do_norm, tape, f.dy) == RA_ERR_NULL,
          "no do_norm");
    dbo_on_bo.dbo = f.w[7];
    CHECK(ra_layer_backward(NULL, f.layer, g.dx, &no_dbk, tape, f.dy) == RA_ERR_NULL, "no dbk");
    CHECK(ra_layer_backward(NULL, f.layer, g.dx, &no_dk_norm, tape, f.dy) == RA_ERR_NULL,
          "no dk_norm");
    CHECK(ra_layer_backward(NULL, f.layer, g.dx, &dbo_on_bo, tape, f.dy) == RA_ERR_ARGUMENT,
          "dbo on bo");
    CHECK(ra_layer_backward(NULL, f.layer, g.dx, &overwrite, tape, f.dy) == RA_OK, "overwrite");
    CHECK(ra_layer_backward(NULL, f.layer, h.dx, &accumulate, tape, f.dy) == RA_OK, "accumulate 1");
    CHECK(memcmp(g.dx, h.dx, sizeof(float) * f.n_x) == 0, "a second backward differs (dx)");
    for (int j = 0; j < N_PARAMS; j++)
        CHECK(!f.n_w[j] || memcmp(g.dw[j], h.dw[j], sizeof(float) * f.n_w[j]) == 0,
              "accumulating into zeros differs from overwriting (parameter %d)", j);
    CHECK(ra_layer_backward(NULL, f.layer, h.dx, &accumulate, tape, f.dy) == RA_OK, "accumulate 2");
    for (int j = 0; j < N_PARAMS; j++) {
        double worst = 0, ref = 0;
        if (!f.n_w[j]) continue;
        for (int64_t i = 0; i < f.n_w[j]; i++) {
            worst = fmax(worst, fabs(h.dw[j][i] - 2.0 * g.dw[j][i]));
            ref = fmax(ref, fabs(2.0 * g.dw[j][i]));
        }
        CHECK(worst <= 1e-6 * ref, "parameter %d: two accumulations differ from 2 G by %.3g", j,
              worst / ref);
    }
    CHECK(memcmp(g.dx, h.dx, sizeof(float) * f.n_x) == 0, "dx was accumulated");

    /* A smaller call on the same tape: its gradients equal a fresh tape's. */
    grads small;
    grads_alloc(&small, &f);
    ra_layer_grads ls = layer_grads(&small, 0);
    ra_positions start = {.struct_size = sizeof start, .start = 2};
    CHECK(ra_layer_forward_train(NULL, f.layer, small.y, tape, f.x, 1, 5, &start, &opt) == RA_OK,
          "small forward");
    CHECK(ra_layer_backward(NULL, f.layer, small.dx, &ls, tape, f.dy) == RA_OK, "small backward");
    ra_layer_tape *fresh;
    CHECK(ra_layer_tape_create(&fresh, f.layer, 5) == RA_OK, "fresh tape");
    ra_layer_grads lh = layer_grads(&h, 0);
    CHECK(ra_layer_forward_train(NULL, f.layer, h.y, fresh, f.x, 1, 5, &start, &opt) == RA_OK,
          "fresh forward");
    CHECK(ra_layer_backward(NULL, f.layer, h.dx, &lh, fresh, f.dy) == RA_OK, "fresh backward");
    int same = memcmp(small.dx, h.dx, sizeof(float) * 5 * f.dim) == 0;
    for (int j = 0; j < N_PARAMS; j++)
        same &= !f.n_w[j] || memcmp(small.dw[j], h.dw[j], sizeof(float) * f.n_w[j]) == 0;
    CHECK(same, "a reused tape gives other gradients than a fresh one");
    ra_layer_tape_destroy(fresh);
    ra_layer_tape_destroy(tape);
    grads_free(&small);
    grads_free(&g);
    grads_free(&h);
    fixture_free(&f);
}

/* The tape keeps its own copy of the positions: a caller that reuses its
 * ids or starts array between the forward and the backward (as a training
 * loop filling the next batch does) gets the gradients of the forward it
 * ran.  Each mode: the same bits as a backward with the array unchanged. */
static void test_tape_keeps_positions(void)
{
    for (int mode = 1; mode <= 2; mode++) {
        const layer_case c = {"S 11", 2, 11, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, mode,
                              0.0f, 0, 0, 0, 0, 0};
        fixture f;
        fixture_make(&f, &c, 950 + mode);
        grads g, h;
        grads_alloc(&g, &f);
        grads_alloc(&h, &f);
        ra_layer_tape *tape;
        CHECK(ra_layer_tape_create(&tape, f.layer, f.T) == RA_OK, "tape");
        ra_attention_options opt = {.struct_size = sizeof opt, .path = RA_PATH_FLASH, .seed = 42};
        ra_layer_grads lg = layer_grads(&g, 0);
        ra_layer_grads lh = layer_grads(&h, 0);
        CHECK(ra_layer_forward_train(NULL, f.layer, g.y, tape, f.x, c.b, c.s, &f.positions,
                                     &opt) == RA_OK, "forward");
        CHECK(ra_layer_backward(NULL, f.layer, g.dx, &lg, tape, f.dy) == RA_OK, "backward");
        CHECK(ra_layer_forward_train(NULL, f.layer, h.y, tape, f.x, c.b, c.s, &f.positions,
                                     &opt) == RA_OK, "forward again");
        for (int64_t t = 0; t < f.T; t++) f.ids[t] = 1000 + 3 * t; /* the caller's next batch */
        for (int64_t b = 0; b < c.b; b++) f.starts[b] = 500 + b;
        CHECK(ra_layer_backward(NULL, f.layer, h.dx, &lh, tape, f.dy) == RA_OK, "backward");
        int same = memcmp(g.dx, h.dx, sizeof(float) * f.n_x) == 0;
        for (int j = 0; j < N_PARAMS; j++)
            same &= !f.n_w[j] || memcmp(g.dw[j], h.dw[j], sizeof(float) * f.n_w[j]) == 0;
        CHECK(same, "mode %d: the backward read the caller's positions, not the tape's", mode);
        ra_layer_tape_destroy(tape);
        grads_free(&g);
        grads_free(&h);
        fixture_free(&f);
    }
}

/* A tape an unfinished step holds (a backward step reads it, a training
 * step writes it): a training forward over it is refused, naming the step,
 * and runs once the step is finished or cancelled.  It was taken, and the
 * pending backward's gradients then came from the new forward's q, k, v
 * and x, silently. */
static void test_tape_held_by_a_step(void)
{
    const layer_case c = {"S 11", 2, 11, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, 1, 0.0f,
                          0, 0, 0, 0, 0};
    fixture f;
    fixture_make(&f, &c, 970);
    grads g, h;
    grads_alloc(&g, &f);
    grads_alloc(&h, &f);
    float *x2 = malloc(sizeof(float) * f.n_x);
    for (int64_t i = 0; i < f.n_x; i++) x2[i] = f.x[(i + 7) % f.n_x]; /* another batch */
    ra_layer_tape *tape;
    CHECK(ra_layer_tape_create(&tape, f.layer, f.T) == RA_OK, "tape");
    ra_layer_grads lg = layer_grads(&g, 0), lh = layer_grads(&h, 0);
    CHECK(ra_layer_forward_train(NULL, f.layer, g.y, tape, f.x, c.b, c.s, &f.positions, NULL) ==
              RA_OK, "forward");
    CHECK(ra_layer_backward(NULL, f.layer, g.dx, &lg, tape, f.dy) == RA_OK, "backward");
    ra_layer_step *step = NULL, *other = NULL;
    CHECK(ra_layer_backward_begin(&step, NULL, f.layer, h.dx, &lh, tape, f.dy) == RA_OK,
          "backward begin: %s", ra_last_error());
    CHECK(ra_layer_forward_train(NULL, f.layer, h.y, tape, x2, c.b, c.s, &f.positions, NULL) ==
              RA_ERR_ARGUMENT && strstr(ra_last_error(), "unfinished step"),
          "a forward over a tape a backward step reads: %s", ra_last_error());
    CHECK(ra_layer_forward_train_begin(&other, NULL, f.layer, h.y, tape, x2, c.b, c.s,
                                       &f.positions, NULL) == RA_ERR_ARGUMENT && !other,
          "a training step over it");
    const ra_layer_step_views *v = ra_layer_step_get_views(step);
    CHECK(ra_attention_backward(NULL, &v->dq, &v->dk, &v->dv, &v->dout, &v->q, &v->k, &v->v,
                                &v->out, v->lse, &v->options) == RA_OK &&
              ra_layer_step_finish(step) == RA_OK, "finish");
    int same = memcmp(g.dx, h.dx, sizeof(float) * f.n_x) == 0;
    for (int j = 0; j < N_PARAMS; j++)
        same &= !f.n_w[j] || memcmp(g.dw[j], h.dw[j], sizeof(float) * f.n_w[j]) == 0;
    CHECK(same, "the step's gradients are the backward's of the tape's forward");
    CHECK(ra_layer_forward_train_begin(&step, NULL, f.layer, h.y, tape, x2, c.b, c.s,
                                       &f.positions, NULL) == RA_OK, "finished: free again");
    CHECK(ra_layer_forward_train(NULL, f.layer, g.y, tape, f.x, c.b, c.s, &f.positions, NULL) ==
              RA_ERR_ARGUMENT, "a forward over a tape a training step writes");
    ra_layer_step_cancel(step);
    CHECK(ra_layer_forward_train(NULL, f.layer, g.y, tape, f.x, c.b, c.s, &f.positions, NULL) ==
              RA_OK, "cancelled: free again: %s", ra_last_error());
    /* a failed begin holds nothing */
    CHECK(ra_layer_backward_begin(&step, NULL, f.layer, h.dx, &lh, tape, NULL) == RA_ERR_NULL,
          "NULL dy");
    CHECK(ra_layer_forward_train(NULL, f.layer, g.y, tape, f.x, c.b, c.s, &f.positions, NULL) ==
              RA_OK, "after a failed begin: %s", ra_last_error());
    ra_layer_tape_destroy(tape);
    free(x2);
    grads_free(&g);
    grads_free(&h);
    fixture_free(&f);
}

/* A tape (and a layer) destroyed while steps hold it lives until the last
 * of them is finished or cancelled (their views are the tape's
 * activations, their finish reads the layer's weights): the steps give
 * the gradients and y of an undestroyed tape's (both were freed under
 * them: ASan's use after free), and nothing leaks. */
static void test_tape_destroyed_under_a_step(void)
{
    const layer_case c = {"S 11", 2, 11, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, 1, 0.0f,
                          0, 0, 0, 0, 0};
    fixture f;
    fixture_make(&f, &c, 971);
    grads g, h;
    grads_alloc(&g, &f);
    grads_alloc(&h, &f);
    ra_layer_tape *tape;
    CHECK(ra_layer_tape_create(&tape, f.layer, f.T) == RA_OK, "tape");
    ra_layer_grads lg = layer_grads(&g, 0), lh = layer_grads(&h, 0);
    CHECK(ra_layer_forward_train(NULL, f.layer, g.y, tape, f.x, c.b, c.s, &f.positions, NULL) ==
              RA_OK, "forward");
    CHECK(ra_layer_backward(NULL, f.layer, g.dx, &lg, tape, f.dy) == RA_OK, "backward");
    ra_layer_step *one = NULL, *two = NULL;
    CHECK(ra_layer_backward_begin(&one, NULL, f.layer, h.dx, &lh, tape, f.dy) == RA_OK &&
              ra_layer_backward_begin(&two, NULL, f.layer, h.dx, &lh, tape, f.dy) == RA_OK,
          "two backward steps: %s", ra_last_error());
    ra_layer_tape_destroy(tape);
    ra_layer_step_cancel(one);
    const ra_layer_step_views *v = ra_layer_step_get_views(two);
    CHECK(ra_attention_backward(NULL, &v->dq, &v->dk, &v->dv, &v->dout, &v->q, &v->k, &v->v,
                                &v->out, v->lse, &v->options) == RA_OK &&
              ra_layer_step_finish(two) == RA_OK, "finish after the destroy");
    int same = memcmp(g.dx, h.dx, sizeof(float) * f.n_x) == 0;
    for (int j = 0; j < N_PARAMS; j++)
        same &= !f.n_w[j] || memcmp(g.dw[j], h.dw[j], sizeof(float) * f.n_w[j]) == 0;
    CHECK(same, "the step's gradients are the destroyed tape's backward's");
    /* a training step: its tape destroyed, then the step finished */
    CHECK(ra_layer_tape_create(&tape, f.layer, f.T) == RA_OK, "tape");
    CHECK(ra_layer_forward_train_begin(&one, NULL, f.layer, h.y, tape, f.x, c.b, c.s,
                                       &f.positions, NULL) == RA_OK, "training step");
    ra_layer_tape_destroy(tape);
    ra_layer_destroy(f.layer); /* the step holds it too */
    v = ra_layer_step_get_views(one);
    CHECK(ra_attention_forward_lse(NULL, &v->out, v->lse, &v->q, &v->k, &v->v, &v->options) ==
              RA_OK && ra_layer_step_finish(one) == RA_OK, "finish");
    CHECK(memcmp(g.y, h.y, sizeof(float) * f.n_x) == 0, "y as the forward's");
    f.layer = NULL; /* freed by the finish */
    grads_free(&g);
    grads_free(&h);
    fixture_free(&f);
}

/* A tape knows its layer, not just the layer's address: a layer made
 * after the tape's was destroyed (malloc hands its address back) is
 * refused, where the training forward ran it, writing its wider
 * activations past the tape's. */
static void test_tape_of_a_destroyed_layer(void)
{
    enum { SMALL = 8, BIG = 64, T = 4 };
    float *w = malloc(sizeof(float) * BIG * BIG), *x = malloc(sizeof(float) * T * BIG);
    float *y = malloc(sizeof(float) * T * BIG);
    ra_test_fill(w, BIG * BIG, 5);
    ra_test_fill(x, T * BIG, 6);
    ra_layer_config small = {.struct_size = sizeof small, .dim = SMALL, .n_heads = 2,
                             .head_dim = 4};
    ra_layer_config big = {.struct_size = sizeof big, .dim = BIG, .n_heads = 8, .head_dim = 8};
    ra_layer_weights lw = {.struct_size = sizeof lw, .wq = w, .wk = w, .wv = w, .wo = w};
    ra_layer *a, *b;
    ra_layer_tape *tape;
    CHECK(ra_layer_create(&a, &small, &lw) == RA_OK, "small layer");
    CHECK(ra_layer_tape_create(&tape, a, T) == RA_OK, "its tape");
    const uintptr_t was = (uintptr_t)a;
    ra_layer_destroy(a);
    CHECK(ra_layer_create(&b, &big, &lw) == RA_OK, "big layer");
    const ra_positions at = ra_positions_start(0);
    CHECK(ra_layer_forward_train(NULL, b, y, tape, x, 1, T, &at, NULL) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "another layer"),
          "the destroyed layer's tape (%s address): %s",
          (uintptr_t)b == was ? "the same" : "another", ra_last_error());
    ra_layer_tape_destroy(tape);
    CHECK(ra_layer_tape_create(&tape, b, T) == RA_OK &&
              ra_layer_forward_train(NULL, b, y, tape, x, 1, T, &at, NULL) == RA_OK,
          "its own tape");
    ra_layer_tape_destroy(tape);
    ra_layer_destroy(b);
    free(w);
    free(x);
    free(y);
}

/* ---- argument checks ---------------------------------------------------- */

static int all_bytes(const void *p, size_t n, unsigned char value)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != value) return 0;
    return 1;
}

/* ---- phased calls ------------------------------------------------------- */

/* Returns the status of expr unless it is RA_OK. */
#define TRY(expr)                                     \
    do {                                              \
        ra_status try_status_ = (expr);               \
        if (try_status_ != RA_OK) return try_status_; \
    } while (0)

/* ra_layer_forward_begin composed with ra_attention_forward_lse. */
static ra_status phased_forward(ra_context *ctx, const fixture *f, float *y,
                                const ra_attention_options *o)
{
    ra_layer_step *step;
    TRY(ra_layer_forward_begin(&step, ctx, f->layer, y, f->x, f->c.b, f->c.s, &f->positions,
                                  o));
    const ra_layer_step_views *v = ra_layer_step_get_views(step);
    ra_status st = ra_attention_forward_lse(ctx, &v->out, v->lse, &v->q, &v->k, &v->v,
                                            &v->options);
    if (st != RA_OK) {
        ra_layer_step_cancel(step);
        return st;
    }
    return ra_layer_step_finish(step);
}

/* run_library's training forward and backward, each phased. */
static ra_status phased_train(ra_context *ctx, const fixture *f, ra_layer_tape *tape, grads *g)
{
    ra_attention_options opt = {.struct_size = sizeof opt, .path = RA_PATH_FLASH,
                                .dropout = f->c.p, .seed = 42};
    ra_layer_step *step;
    TRY(ra_layer_forward_train_begin(&step, ctx, f->layer, g->y, tape, f->x, f->c.b, f->c.s,
                                        &f->positions, &opt));
    const ra_layer_step_views *v = ra_layer_step_get_views(step);
    CHECK(v->struct_size == sizeof *v && v->lse && !v->dq.data, "train views");
    TRY(ra_attention_forward_lse(ctx, &v->out, v->lse, &v->q, &v->k, &v->v, &v->options));
    TRY(ra_layer_step_finish(step));
    ra_layer_grads lg = layer_grads(g, 0);
    TRY(ra_layer_backward_begin(&step, ctx, f->layer, g->dx, &lg, tape, f->dy));
    v = ra_layer_step_get_views(step);
    TRY(ra_attention_backward(ctx, &v->dq, &v->dk, &v->dv, &v->dout, &v->q, &v->k, &v->v,
                                 &v->out, v->lse, &v->options));
    return ra_layer_step_finish(step);
}

/* Phased calls composed with the attention functions give the whole
 * calls' bits on case c: forward, training forward and backward; a
 * cancelled step writes nothing and leaves the tape empty. */
static void check_phased(ra_context *ctx, const layer_case *cp, uint64_t seed)
{
    const layer_case c = *cp;
    fixture f;
    fixture_make(&f, &c, seed);
    float *y = malloc(sizeof(float) * f.n_x), *ye = malloc(sizeof(float) * f.n_x);
    CHECK(ra_layer_forward(ctx, f.layer, y, f.x, c.b, c.s, &f.positions, NULL) == RA_OK,
          "forward");
    CHECK(phased_forward(ctx, &f, ye, NULL) == RA_OK, "%s: phased forward: %s", c.name,
          ra_last_error());
    CHECK(memcmp(y, ye, sizeof(float) * f.n_x) == 0, "%s: the phased y differs", c.name);

    grads plain, phased;
    grads_alloc(&plain, &f);
    grads_alloc(&phased, &f);
    CHECK(run_library(&f, ctx, RA_PATH_FLASH, &plain) == RA_OK, "train");
    ra_layer_tape *tape;
    CHECK(ra_layer_tape_create(&tape, f.layer, f.T) == RA_OK, "tape");
    CHECK(phased_train(ctx, &f, tape, &phased) == RA_OK, "%s: phased training: %s", c.name,
          ra_last_error());
    CHECK(memcmp(plain.y, phased.y, sizeof(float) * f.n_x) == 0 &&
              memcmp(plain.dx, phased.dx, sizeof(float) * f.n_x) == 0,
          "%s: y or dx differ", c.name);
    for (int j = 0; j < N_PARAMS; j++)
        if (f.n_w[j])
            CHECK(memcmp(plain.dw[j], phased.dw[j], sizeof(float) * f.n_w[j]) == 0,
                  "%s: parameter %d's gradient differs", c.name, j);

    /* cancelled: y as it was, the tape empty */
    ra_layer_step *step;
    memset(ye, 0x5a, sizeof(float) * f.n_x);
    CHECK(ra_layer_forward_begin(&step, ctx, f.layer, ye, f.x, c.b, c.s, &f.positions, NULL) ==
              RA_OK, "begin");
    ra_layer_step_cancel(step);
    CHECK(ra_layer_forward_train_begin(&step, ctx, f.layer, ye, tape, f.x, c.b, c.s,
                                       &f.positions, NULL) == RA_OK, "train begin");
    ra_layer_step_cancel(step);
    CHECK(all_bytes(ye, sizeof(float) * f.n_x, 0x5a), "%s: y written", c.name);
    ra_layer_grads lg = layer_grads(&phased, 0);
    CHECK(ra_layer_backward_begin(&step, ctx, f.layer, phased.dx, &lg, tape, f.dy) ==
              RA_ERR_ARGUMENT, "%s: a tape the cancelled forward left empty", c.name);
    CHECK(ra_layer_backward(ctx, f.layer, phased.dx, &lg, tape, f.dy) == RA_ERR_ARGUMENT,
          "%s: the same for ra_layer_backward", c.name);

    ra_layer_tape_destroy(tape);
    grads_free(&plain);
    grads_free(&phased);
    free(y);
    free(ye);
    fixture_free(&f);
}

/* check_phased on every finite differences case (dropout, gates, norms,
 * clamps ...) and on sequences past the flash tiles (64 keys: ra_layer_forward's
 * fused rotation against the step's); the refusals. */
static void test_phased(void)
{
    const layer_case long_cases[] = {
        {"S 150 ids", 2, 150, 8, 2, 20, RA_LAYOUT_INTERLEAVED, RA_ROPE_YARN, 12, 2, 0.0f, 0, 0, 0,
         0, 0},
        {"S 77 starts, norms, biases", 2, 77, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_LLAMA3, 0, 1, 0.1f,
         0, 0, BIASES | NORMS, 0, 0}};
    ra_context *ctx;
    CHECK(ra_context_create(&ctx, 2) == RA_OK, "ctx");
    for (size_t t = 0; t < sizeof fd_cases / sizeof fd_cases[0]; t++)
        check_phased(ctx, &fd_cases[t], 900 + t);
    for (size_t t = 0; t < sizeof long_cases / sizeof long_cases[0]; t++)
        check_phased(ctx, &long_cases[t], 990 + t);
    ra_context_destroy(ctx);
    ra_layer_step *step = (ra_layer_step *)&step;
    CHECK(ra_layer_forward_begin(NULL, NULL, NULL, NULL, NULL, 1, 1, NULL, NULL) == RA_ERR_NULL,
          "NULL out");
    CHECK(ra_layer_forward_begin(&step, NULL, NULL, NULL, NULL, 1, 1, NULL, NULL) ==
              RA_ERR_NULL && step == NULL, "NULL layer: %s", ra_last_error());
    CHECK(ra_layer_step_finish(NULL) == RA_ERR_NULL && !ra_layer_step_get_views(NULL),
          "NULL step");
    ra_layer_step_cancel(NULL);
}

/* A phased cached step (the caller appends and decodes) against
 * ra_layer_forward_cached: a prompt of 5 tokens, then one step a token,
 * within 1e-5 of max|y| (the prompt: decoded here where the layer's own
 * prefill runs flash; the same sums in another blocking); and its
 * refusals. */
static void test_phased_cached(void)
{
    const layer_case c = {"S 12", 2, 12, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, 0, 0.0f, 0,
                          0, BIASES | NORMS, 0, 0};
    fixture f;
    fixture_make(&f, &c, 950);
    float *y[2];
    for (int phased = 0; phased < 2; phased++) {
        y[phased] = malloc(sizeof(float) * f.n_x);
        ra_kv_cache *cache;
        CHECK(ra_kv_cache_create(&cache, c.b, c.s, c.hkv, c.d, RA_F32) == RA_OK, "cache");
        for (int64_t first = 0, n = 5; first < c.s; first += n, n = 1) {
            float xs[2 * 5 * 32], ys[2 * 5 * 32];
            for (int64_t b = 0; b < c.b; b++)
                memcpy(xs + b * n * f.dim, f.x + (b * c.s + first) * f.dim,
                       sizeof(float) * (size_t)(n * f.dim));
            ra_positions pos = ra_positions_start(first);
            ra_status st = RA_OK;
            if (!phased) st = ra_layer_forward_cached(NULL, f.layer, cache, ys, xs, c.b, n, &pos);
            ra_layer_step *step = NULL;
            if (phased) st = ra_layer_forward_cached_begin(&step, NULL, f.layer, ys, xs, c.b, n,
                                                           &pos);
            const ra_layer_step_views *v = ra_layer_step_get_views(step);
            if (phased && st == RA_OK) {
                CHECK(!v->lse, "a cached step has no lse");
                st = ra_kv_cache_append(NULL, cache, NULL, NULL, &v->k, &v->v, NULL, NULL);
            }
            if (phased && st == RA_OK)
                st = ra_attention_decode(NULL, cache, &v->out, &v->q, NULL, &v->options);
            if (phased && st == RA_OK) st = ra_layer_step_finish(step);
            CHECK(st == RA_OK, "step at %lld: %s", (long long)first, ra_last_error());
            for (int64_t b = 0; b < c.b; b++)
                memcpy(y[phased] + (b * c.s + first) * f.dim, ys + b * n * f.dim,
                       sizeof(float) * (size_t)(n * f.dim));
        }
        ra_kv_cache_destroy(cache);
    }
    double e = ra_test_max_rel_diff(y[1], y[0], f.n_x);
    CHECK(e <= 1e-5, "the phased cached y differs by %.3g", e);
    ra_layer_step *step;
    CHECK(ra_layer_forward_cached_begin(&step, NULL, f.layer, y[0], f.x, c.b, 1, NULL) ==
              RA_ERR_ARGUMENT && strstr(ra_last_error(), "needs positions"),
          "no positions: %s", ra_last_error());
    free(y[0]);
    free(y[1]);
    fixture_free(&f);
}

static void test_errors(void)
{
    const layer_case c = {"S 4", 1, 4, 2, 1, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 0, 0.0f, 0, 0, 0, 0, 0};
    fixture f, other;
    fixture_make(&f, &c, 1000);
    fixture_make(&other, &c, 1001);
    grads g;
    grads_alloc(&g, &f);
    ra_layer_tape *tape = NULL, *small = NULL, *foreign = NULL;
    CHECK(ra_layer_tape_create(NULL, f.layer, 4) == RA_ERR_NULL, "NULL out");
    CHECK(ra_layer_tape_create(&tape, NULL, 4) == RA_ERR_NULL && tape == NULL, "NULL layer");
    CHECK(ra_layer_tape_create(&tape, f.layer, 0) == RA_ERR_SIZE, "0 tokens");
    CHECK(ra_layer_tape_create(&tape, f.layer, (int64_t)1 << 62) == RA_ERR_OVERFLOW, "huge");
    CHECK(ra_layer_tape_create(&tape, f.layer, f.T) == RA_OK, "tape");
    CHECK(ra_layer_tape_create(&small, f.layer, f.T - 1) == RA_OK, "small tape");
    CHECK(ra_layer_tape_create(&foreign, other.layer, f.T) == RA_OK, "other layer's tape");
    ra_layer_tape_destroy(NULL);

    /* Refused forwards write neither y nor the tape. */
    memset(g.y, 0x7f, sizeof(float) * f.n_x);
    const int64_t cu[] = {0, 2, 4};
    ra_positions packed = {.struct_size = sizeof packed, .cu_seqlens = cu,
                           .n_seqs = 2}, negative = {.struct_size = sizeof negative, .start = -1};
    ra_attention_options bad_p = {.struct_size = sizeof bad_p, .path = RA_PATH_FLASH,
                                .dropout = 1.0f}, bad_path = {.struct_size = sizeof bad_path,
                                .path = (ra_attention_path)9};
    const struct {
        ra_status want;
        const char *what;
        ra_status got;
    } forwards[] = {
        {RA_ERR_NULL, "NULL tape",
         ra_layer_forward_train(NULL, f.layer, g.y, NULL, f.x, 1, 4, NULL, NULL)},
        {RA_ERR_NULL, "NULL x", ra_layer_forward_train(NULL, f.layer, g.y, tape, NULL, 1, 4, NULL, NULL)},
        {RA_ERR_ARGUMENT, "another layer's tape",
         ra_layer_forward_train(NULL, f.layer, g.y, foreign, f.x, 1, 4, NULL, NULL)},
        {RA_ERR_SIZE, "tape too small",
         ra_layer_forward_train(NULL, f.layer, g.y, small, f.x, 1, 4, NULL, NULL)},
        {RA_ERR_UNSUPPORTED, "packed batch",
         ra_layer_forward_train(NULL, f.layer, g.y, tape, f.x, 1, 4, &packed, NULL)},
        {RA_ERR_POSITION, "negative position",
         ra_layer_forward_train(NULL, f.layer, g.y, tape, f.x, 1, 4, &negative, NULL)},
        {RA_ERR_ARGUMENT, "p = 1", ra_layer_forward_train(NULL, f.layer, g.y, tape, f.x, 1, 4, NULL, &bad_p)},
        {RA_ERR_ARGUMENT, "path", ra_layer_forward_train(NULL, f.layer, g.y, tape, f.x, 1, 4, NULL, &bad_path)},
        {RA_ERR_SIZE, "seq 0", ra_layer_forward_train(NULL, f.layer, g.y, tape, f.x, 1, 0, NULL, NULL)},
        /* x is kept for the backward: a y over it would change the gradients */
        {RA_ERR_ARGUMENT, "y on x", ra_layer_forward_train(NULL, f.layer, f.x, tape, f.x, 1, 4, NULL, NULL)},
        {RA_ERR_ARGUMENT, "y inside x",
         ra_layer_forward_train(NULL, f.layer, f.x + 3, tape, f.x, 1, 2, NULL, NULL)},
        /* the layer's borrowed weights: y over them would change what it reads */
        {RA_ERR_ARGUMENT, "y over wo",
         ra_layer_forward_train(NULL, f.layer, f.w[3] + 1, tape, f.x, 1, 1, NULL, NULL)},
        {RA_ERR_ARGUMENT, "y over wq, inference",
         ra_layer_forward(NULL, f.layer, f.w[0], f.x, 1, 4, NULL, NULL)},
    };
    for (size_t i = 0; i < sizeof forwards / sizeof forwards[0]; i++)
        CHECK(forwards[i].got == forwards[i].want, "forward_train, %s: %s", forwards[i].what,
              ra_status_string(forwards[i].got));
    CHECK(all_bytes(g.y, sizeof(float) * f.n_x, 0x7f), "a refused forward wrote y");
    {   /* the cached and phased calls refuse y over a weight too */
        ra_kv_cache *cache = NULL;
        ra_layer_step *step = NULL;
        const ra_positions at0 = {.struct_size = sizeof at0};
        CHECK(ra_kv_cache_create(&cache, 1, 8, c.hkv, c.d, RA_F32) == RA_OK, "cache");
        CHECK(ra_layer_forward_cached(NULL, f.layer, cache, f.w[2], f.x, 1, 1, NULL) ==
                  RA_ERR_ARGUMENT && strstr(ra_last_error(), "wv"), "cached, y over wv: %s",
              ra_last_error());
        CHECK(ra_layer_forward_cached_begin(&step, NULL, f.layer, f.w[1], f.x, 1, 1, &at0) ==
                  RA_ERR_ARGUMENT && step == NULL, "cached_begin, y over wk: %s", ra_last_error());
        ra_kv_cache_destroy(cache);
    }

    /* A backward needs a filled tape of this layer and disjoint outputs. */
    memset(g.dx, 0x7f, sizeof(float) * f.n_x);
    for (int j = 0; j < 4; j++) memset(g.dw[j], 0x7f, sizeof(float) * f.n_w[j]);
    ra_layer_grads lg = layer_grads(&g, 0);
    ra_layer_grads no_dwv = lg, dwq_on_dwo = lg, dwk_on_wk = lg;
    no_dwv.dwv = NULL;
    dwq_on_dwo.dwq = g.dw[3];
    dwk_on_wk.dwk = f.w[1];
    CHECK(ra_layer_backward(NULL, f.layer, g.dx, &lg, tape, f.dy) == RA_ERR_ARGUMENT,
          "a tape before any forward");
    float *y = malloc(sizeof(float) * f.n_x);
    CHECK(ra_layer_forward_train(NULL, f.layer, y, tape, f.x, 1, 4, NULL, NULL) == RA_OK, "forward");
    CHECK(ra_layer_forward_train(NULL, other.layer, y, foreign, other.x, 1, 4, NULL, NULL) == RA_OK,
          "other forward");
    const struct {
        ra_status want;
        const char *what;
        ra_status got;
    } backwards[] = {
        {RA_ERR_NULL, "NULL layer", ra_layer_backward(NULL, NULL, g.dx, &lg, tape, f.dy)},
        {RA_ERR_NULL, "NULL dx", ra_layer_backward(NULL, f.layer, NULL, &lg, tape, f.dy)},
        {RA_ERR_NULL, "NULL grads", ra_layer_backward(NULL, f.layer, g.dx, NULL, tape, f.dy)},
        {RA_ERR_NULL, "NULL dwv", ra_layer_backward(NULL, f.layer, g.dx, &no_dwv, tape, f.dy)},
        {RA_ERR_NULL, "NULL tape", ra_layer_backward(NULL, f.layer, g.dx, &lg, NULL, f.dy)},
        {RA_ERR_NULL, "NULL dy", ra_layer_backward(NULL, f.layer, g.dx, &lg, tape, NULL)},
        {RA_ERR_ARGUMENT, "another layer's tape",
         ra_layer_backward(NULL, f.layer, g.dx, &lg, foreign, f.dy)},
        {RA_ERR_ARGUMENT, "dwq on dwo", ra_layer_backward(NULL, f.layer, g.dx, &dwq_on_dwo, tape, f.dy)},
        {RA_ERR_ARGUMENT, "dwk on wk", ra_layer_backward(NULL, f.layer, g.dx, &dwk_on_wk, tape, f.dy)},
        {RA_ERR_ARGUMENT, "dx on dy", ra_layer_backward(NULL, f.layer, f.dy, &lg, tape, f.dy)},
        {RA_ERR_ARGUMENT, "dx on x", ra_layer_backward(NULL, f.layer, f.x, &lg, tape, f.dy)},
    };
    for (size_t i = 0; i < sizeof backwards / sizeof backwards[0]; i++)
        CHECK(backwards[i].got == backwards[i].want, "backward, %s: %s", backwards[i].what,
              ra_status_string(backwards[i].got));
    int untouched = all_bytes(g.dx, sizeof(float) * f.n_x, 0x7f);
    for (int j = 0; j < 4; j++) untouched &= all_bytes(g.dw[j], sizeof(float) * f.n_w[j], 0x7f);
    CHECK(untouched, "a refused backward wrote its outputs");
    CHECK(ra_layer_backward(NULL, f.layer, g.dx, &lg, tape, f.dy) == RA_OK, "valid backward");

    free(y);
    ra_layer_tape_destroy(tape);
    ra_layer_tape_destroy(small);
    ra_layer_tape_destroy(foreign);
    grads_free(&g);
    fixture_free(&f);
    fixture_free(&other);
}

/* rows [groups, n_q + 2 n_kv, in]: each group's n_q rows of q, then n_kv
 * of k and of v (pack), or back (unpack); in = 1 for biases. */
static void group_rows(float *fused, float *q, float *k, float *v, int64_t groups, int64_t n_q,
                       int64_t n_kv, int64_t in, int pack)
{
    for (int64_t g = 0; g < groups; g++) {
        float *f = fused + g * (n_q + 2 * n_kv) * in;
        float *const parts[3] = {q + g * n_q * in, k + g * n_kv * in, v + g * n_kv * in};
        const int64_t n[3] = {n_q * in, n_kv * in, n_kv * in};
        for (int i = 0; i < 3; f += n[i], i++)
            memcpy(pack ? f : parts[i], pack ? parts[i] : f, (size_t)n[i] * sizeof(float));
    }
}

/* max |y - y'| / max |y'|: y from `cached` through a KV cache (a prefill of
 * 3 tokens from position 0, then one token at a time), y' from `plain`'s
 * forward on f's x at positions 0 ... */
static double cached_diff(const ra_layer *cached, const ra_layer *plain, const fixture *f)
{
    const layer_case *c = &f->c;
    float *y_cached = malloc(sizeof(float) * f->n_x), *y_plain = malloc(sizeof(float) * f->n_x);
    float *xs = malloc(sizeof(float) * f->n_x), *ys = malloc(sizeof(float) * f->n_x);
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, c->b, c->s, c->hkv, c->d, RA_F32) == RA_OK, "cache");
    CHECK(ra_layer_forward(NULL, plain, y_plain, f->x, c->b, c->s, NULL, NULL) == RA_OK, "plain");
    for (int64_t first = 0, n = 3; first < c->s; first += n, n = 1) {
        for (int64_t b = 0; b < c->b; b++)
            memcpy(xs + b * n * f->dim, f->x + (b * c->s + first) * f->dim,
                   sizeof(float) * n * f->dim);
        CHECK(ra_layer_forward_cached(NULL, cached, cache, ys, xs, c->b, n, NULL) == RA_OK,
              "%s: cached", c->name);
        for (int64_t b = 0; b < c->b; b++)
            memcpy(y_cached + (b * c->s + first) * f->dim, ys + b * n * f->dim,
                   sizeof(float) * n * f->dim);
    }
    double diff = 0, ref = 0;
    for (int64_t i = 0; i < f->n_x; i++) {
        diff = fmax(diff, fabs(y_cached[i] - y_plain[i]));
        ref = fmax(ref, fabs(y_plain[i]));
    }
    ra_kv_cache_destroy(cache);
    free(xs), free(ys), free(y_cached), free(y_plain);
    return diff / ref;
}

/* Each of n cases through the KV cache as its forward has it (seeds seed,
 * seed + 1 ...). */
static void cached_cases(const layer_case *cases, size_t n, uint64_t seed)
{
    for (size_t t = 0; t < n; t++) {
        fixture f;
        fixture_make(&f, &cases[t], seed + t);
        double e = cached_diff(f.layer, f.layer, &f);
        CHECK(e <= 1e-5, "%s: cached vs forward %.3g", cases[t].name, e);
        printf("  %-28s through the cache %.1e\n", cases[t].name, e);
        fixture_free(&f);
    }
}

/* temperature_length and _power: out of range, a factor past a normal
 * float, beside temperature_floor or norm_after_rope. */
static void test_temperature_power_errors(void)
{
    ra_rope_config rope = ra_rope_config_default(4);
    ra_layer_config c = {.struct_size = sizeof c, .dim = 8, .n_heads = 2, .head_dim = 4,
                         .rope = &rope}, *cfg = &c;
    float w[64] = {0};
    ra_layer_weights weights = {.struct_size = sizeof weights, .wq = w, .wk = w, .wv = w,
                                .wo = w}, *lw = &weights;
    ra_layer *layer;
    const double bad[][2] = {{-1, 0.1}, {NAN, 0.1}, {INFINITY, 0.1}, {8, INFINITY}, {8, NAN},
                             {1e-30, 4}, {1e-300, 40}, {1e-30, -4}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cfg->temperature_length = bad[i][0];
        cfg->temperature_power = bad[i][1];
        CHECK(ra_layer_create(&layer, cfg, lw) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "temperature_length"), "temperature_length %g power %g: %s",
              bad[i][0], bad[i][1], ra_last_error());
    }
    cfg->temperature_length = 2048, cfg->temperature_power = 0.1;
    cfg->temperature_floor = 8;
    CHECK(ra_layer_create(&layer, cfg, lw) == RA_ERR_UNSUPPORTED &&
          strstr(ra_last_error(), "temperature_length with temperature_floor"),
          "temperature_length with temperature_floor: %s", ra_last_error());
    cfg->temperature_floor = 0;
    cfg->norm_after_rope = 1;
    CHECK(ra_layer_create(&layer, cfg, lw) == RA_ERR_UNSUPPORTED &&
          strstr(ra_last_error(), "norm_after_rope with temperature_length"),
          "norm_after_rope with temperature_length: %s", ra_last_error());
    cfg->norm_after_rope = 0;
    CHECK(ra_layer_create(&layer, cfg, lw) == RA_OK, "temperature_length 2048, power 0.1: %s",
          ra_last_error());
    ra_layer_destroy(layer);
}

/* Llama 4's options through the KV cache: the temperature at each decode
 * step's position, the L2 norm, as the forward has them; Ministral 3's
 * temperature (at p) likewise. */
static void test_llama4_cached(void)
{
    const layer_case cases[] = {
        {"L2, temperature, norms", 2, 11, 4, 2, 8, RA_LAYOUT_INTERLEAVED, RA_ROPE_LLAMA3, 0, 0,
         0.0f, 0, 0, L2 | TEMP | NORMS, 0, 0},
        {"temperature at p, yarn", 2, 11, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_YARN, 0, 0, 0.0f, 0,
         0, TEMP | TEMP0, 0, 0},
        {"temperature power, norms, no_rope", 2, 11, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT,
         0, 0, 0.0f, 1, 0, TEMPP | NORMS, 0, 0},
    };
    cached_cases(cases, sizeof cases / sizeof cases[0], 77);
    /* the L2 norm with a rope whose attention factor is not 1: refused */
    ra_rope_config cfg_rope = ra_rope_config_default(4);
    ra_layer_config cfg = {.struct_size = sizeof cfg, .dim = 8, .n_heads = 2, .head_dim = 4,
                           .qk_l2_norm = 1,
                           .rope = &cfg_rope};
    cfg_rope.type = RA_ROPE_YARN;
    cfg_rope.factor = 4;
    cfg_rope.original_max_position_embeddings = 16;
    float w[64] = {0};
    ra_layer_weights lw = {.struct_size = sizeof lw, .wq = w, .wk = w, .wv = w, .wo = w};
    ra_layer *layer = (ra_layer *)&cfg;
    CHECK(ra_layer_create(&layer, &cfg, &lw) == RA_ERR_UNSUPPORTED && layer == NULL, "L2, yarn");
    cfg_rope = ra_rope_config_default(4);
    const double bad[][2] = {{-1, 0}, {NAN, 0}, {INFINITY, 0}, {8, INFINITY}, {8, NAN}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cfg.temperature_floor = bad[i][0];
        cfg.temperature_scale = bad[i][1];
        CHECK(ra_layer_create(&layer, &cfg, &lw) == RA_ERR_ARGUMENT, "temperature %g %g",
              bad[i][0], bad[i][1]);
    }
    cfg.temperature_floor = 0, cfg.temperature_scale = 0.1, cfg.temperature_no_offset = 1;
    CHECK(ra_layer_create(&layer, &cfg, &lw) == RA_ERR_ARGUMENT &&
          strstr(ra_last_error(), "temperature_no_offset without temperature_floor"),
          "temperature_no_offset alone: %s", ra_last_error());
    test_temperature_power_errors();
}

/* The features that change what the cache holds or what its steps compute
 * (norms after RoPE, o_norm, the gate), through the KV cache as the forward has them; and
 * their refusals. */
static void test_features_cached(void)
{
    const layer_case cases[] = {
        {"norms after RoPE",          2, 9, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_YARN, 4, 0, 0.0f, 0, 0, NORMS | POST | BIASES, 0.3, 0},
        {"after RoPE, heads' own",    1, 7, 4, 1, 6, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 0, 0.0f, 0, 0, NORMS | POST | HEADS, 0, 0},
        {"o_norm, biases",            2, 8, 4, 2, 4, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, 0, 0.0f, 0, 12, ONORM | BIASES, 0, 0},
        {"gated, biases, norms",      2, 9, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 4, 0, 0.0f, 0, 12, GATE | BIASES | NORMS, 0, 0},
        {"clip after whole norms",    2, 8, 4, 2, 4, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, 0, 0.0f, 0, 12, NORMS | WHOLE | CLIPN, 0, 0.8},
        {"v_norm, norms, scale 1",    2, 9, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, 0, 0.0f, 0, 0, VNORM | NORMS, 1.0, 0},
        {"v_scale, biases, GQA",      2, 9, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, 0, 0.0f, 0, 0, VSCALE | BIASES, 0, 0},
        {"rope on v, biases, GQA",    2, 9, 4, 2, 8, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 0, 0.0f, 0, 0, VROPE | BIASES, 0, 0},
        {"LayerNorm biases, partial", 2, 9, 4, 4, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 4, 0, 0.0f, 0, 0, NORMS | LAYER | NBIAS | BIASES, 0, 0},
        {"norm biases after RoPE",    1, 7, 4, 2, 6, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 0, 0.0f, 0, 0, NORMS | LAYER | NBIAS | HEADS | POST, 0, 0},
        {"wgate, biases, norms",      2, 9, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, 0, 0.0f, 0, 12, GATE | WGATE | BIASES | NORMS, 0, 0},
        {"gate per head, bgate",      2, 9, 4, 2, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, 0, 0.0f, 0, 12, GATE | WGATE | PHEAD | BGATE | NORMS, 0, 0},
        {"softplus, bgate",           1, 7, 4, 1, 6, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 0, 0.0f, 0, 0, GATE | WGATE | SOFTPLUS | BGATE, 0, 0},
    };
    cached_cases(cases, sizeof cases / sizeof cases[0], 500);
    ra_rope_config cfg_rope = ra_rope_config_default(4);
    ra_layer_config cfg = {.struct_size = sizeof cfg, .dim = 8, .n_heads = 2, .head_dim = 4,
                           .rope = &cfg_rope, .norm_after_rope = 1, .qk_l2_norm = 1};
    float w[64] = {0};
    ra_layer_weights lw = {.struct_size = sizeof lw, .wq = w, .wk = w, .wv = w, .wo = w};
    ra_layer *layer = (ra_layer *)&cfg;
    CHECK(ra_layer_create(&layer, &cfg, &lw) == RA_ERR_UNSUPPORTED && layer == NULL,
          "norm_after_rope with qk_l2_norm");
    cfg.qk_l2_norm = 0;
    cfg.temperature_floor = 8;
    CHECK(ra_layer_create(&layer, &cfg, &lw) == RA_ERR_UNSUPPORTED,
          "norm_after_rope with temperature_floor");
    cfg.temperature_floor = 0;
    cfg.clip_after_norm = 1;
    CHECK(ra_layer_create(&layer, &cfg, &lw) == RA_ERR_UNSUPPORTED &&
              strstr(ra_last_error(), "clip_after_norm with norm_after_rope"),
          "clip_after_norm with norm_after_rope");
    cfg.norm_after_rope = 0;
    cfg.qk_l2_norm = 1;
    CHECK(ra_layer_create(&layer, &cfg, &lw) == RA_ERR_UNSUPPORTED,
          "clip_after_norm with qk_l2_norm");
    ra_layer_config gated = {.struct_size = sizeof gated, .dim = 8, .n_heads = 2, .head_dim = 4,
                             .rope = &cfg_rope, .gated_output = 1};
    ra_layer_weights fused = {.struct_size = sizeof fused, .wqkv = w, .wo = w};
    CHECK(ra_layer_create(&layer, &gated, &fused) == RA_ERR_UNSUPPORTED,
          "gated_output with wqkv");
    ra_layer_config latent = {.struct_size = sizeof latent, .dim = 8, .n_heads = 2,
                              .head_dim = 4, .kv_lora_rank = 4, .v_head_dim = 4, .v_norm = 1};
    ra_layer_weights mla = {.struct_size = sizeof mla, .wq = w, .wkv_a = w, .kv_a_norm = w,
                            .wkv_b = w, .wo = w};
    CHECK(ra_layer_create(&layer, &latent, &mla) == RA_ERR_UNSUPPORTED &&
              strstr(ra_last_error(), "v_norm"), "v_norm with latent attention: %s",
          ra_last_error());
    latent.v_norm = 0, latent.v_scale = 2.0;
    CHECK(ra_layer_create(&layer, &latent, &mla) == RA_ERR_UNSUPPORTED &&
              strstr(ra_last_error(), "v_scale"), "v_scale with latent attention: %s",
          ra_last_error());
    latent.v_scale = 0, latent.rope_values = 1; /* RoPE on v: the latent's v has none */
    CHECK(ra_layer_create(&layer, &latent, &mla) == RA_ERR_UNSUPPORTED &&
              strstr(ra_last_error(), "rope_values"), "rope_values with latent attention: %s",
          ra_last_error());
    /* RoPE on v with yarn's attention factor (it would scale v too) */
    ra_rope_config yarn = ra_rope_config_default(4);
    yarn.type = RA_ROPE_YARN, yarn.factor = 4.0, yarn.original_max_position_embeddings = 8;
    ra_layer_config scaled = {.struct_size = sizeof scaled, .dim = 8, .n_heads = 2,
                              .head_dim = 4, .rope = &yarn, .rope_values = 1};
    ra_layer_weights vw = {.struct_size = sizeof vw, .wq = w, .wk = w, .wv = w, .wo = w};
    CHECK(ra_layer_create(&layer, &scaled, &vw) == RA_ERR_UNSUPPORTED &&
              strstr(ra_last_error(), "rope_values with a rope whose attention factor"),
          "rope_values with yarn: %s", ra_last_error());
    ra_layer_config infinite = {.struct_size = sizeof infinite, .dim = 8, .n_heads = 2,
                                .head_dim = 4, .v_scale = HUGE_VAL};
    ra_layer_weights plain_w = {.struct_size = sizeof plain_w, .wq = w, .wk = w, .wv = w, .wo = w};
    CHECK(ra_layer_create(&layer, &infinite, &plain_w) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "v_scale"), "v_scale inf: %s", ra_last_error());
    infinite.v_scale = 1e39; /* finite, but v times it is not a float */
    CHECK(ra_layer_create(&layer, &infinite, &plain_w) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "v_scale"), "v_scale 1e39: %s", ra_last_error());
    /* a LayerNorm's bias: with its weights, of a LayerNorm */
    ra_layer_config plain = {.struct_size = sizeof plain, .dim = 8, .n_heads = 2, .head_dim = 4,
                             .rope = &cfg_rope};
    ra_layer_weights biased = lw;
    biased.k_norm = w, biased.k_norm_bias = w;
    CHECK(ra_layer_create(&layer, &plain, &biased) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "k_norm_bias without config.norm_layer"),
          "k_norm_bias of an RMSNorm: %s", ra_last_error());
    plain.norm_layer = 1;
    biased.k_norm = NULL;
    CHECK(ra_layer_create(&layer, &plain, &biased) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "k_norm_bias without k_norm"),
          "k_norm_bias without k_norm: %s", ra_last_error());
    ra_layer_weights gate_weight = lw; /* a gate's weight, and no gated output */
    gate_weight.wgate = w;
    CHECK(ra_layer_create(&layer, &plain, &gate_weight) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "wgate without config.gated_output"),
          "wgate without gated_output: %s", ra_last_error());
    /* the gate's bias, shape and activation: each with wgate */
    ra_layer_config gate_config = plain;
    gate_config.gated_output = 1;
    ra_layer_weights gate_bias = lw;
    gate_bias.bgate = w;
    CHECK(ra_layer_create(&layer, &gate_config, &gate_bias) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "bgate without weights.wgate"),
          "bgate without wgate: %s", ra_last_error());
    gate_config.gate_per_head = 1;
    CHECK(ra_layer_create(&layer, &gate_config, &lw) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "gate_per_head without weights.wgate"),
          "gate_per_head without wgate: %s", ra_last_error());
    gate_config.gate_per_head = 0, gate_config.gate_softplus = 1;
    CHECK(ra_layer_create(&layer, &gate_config, &lw) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "gate_softplus without weights.wgate"),
          "gate_softplus without wgate: %s", ra_last_error());
}

/* A fused wqkv (GPT-NeoX, Falcon, InternLM2: per key/value group) gives the
 * separate weights' y, KV-cache y and gradients, its own rows of dwqkv and
 * dbqkv being theirs (to 1e-6: OpenBLAS may sum a narrower product in
 * another order). */
static void test_fused_qkv(void)
{
    const layer_case cases[] = {
        {"4:1 groups, biases, norms", 2, 7, 8, 2, 8, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 0, 1, 0.1f, 0, 0, BIASES | NORMS, 0, 0},
        {"1:1 (GPT-NeoX), biases",  1, 9, 4, 4, 6, RA_LAYOUT_HALF, RA_ROPE_DEFAULT, 4, 0, 0.0f, 0, 20, BIASES, 0, 0},
        {"one group, no bias",      1, 5, 4, 1, 4, RA_LAYOUT_INTERLEAVED, RA_ROPE_DEFAULT, 0, 2, 0.0f, 0, 0, 0, 0, 0},
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const layer_case *c = &cases[t];
        fixture f;
        fixture_make(&f, c, 900 + t);
        const int64_t rep = c->h / c->hkv, D = c->d, rows = f.qd + 2 * f.kv;
        float *wqkv = malloc(sizeof(float) * rows * f.dim), *bqkv = malloc(sizeof(float) * rows);
        group_rows(wqkv, f.w[0], f.w[1], f.w[2], c->hkv, rep * D, D, f.dim, 1);
        if (f.w[4]) group_rows(bqkv, f.w[4], f.w[5], f.w[6], c->hkv, rep * D, D, 1, 1);
        ra_layer_weights w = {.struct_size = sizeof w, .wo = f.w[3], .bo = f.w[7], .q_norm = f.w[8],
                              .k_norm = f.w[9],
                              .wqkv = wqkv, .bqkv = f.w[4] ? bqkv : NULL};
        ra_layer *fused;
        CHECK(ra_layer_create(&fused, ra_layer_get_config(f.layer), &w) == RA_OK, "%s", c->name);
        grads want, got;
        grads_alloc(&want, &f);
        grads_alloc(&got, &f);
        CHECK(run_library(&f, NULL, RA_PATH_FLASH, &want) == RA_OK, "%s: separate", c->name);
        ra_layer *separate = f.layer;
        f.layer = fused;
        float *dwqkv = malloc(sizeof(float) * rows * f.dim), *dbqkv = malloc(sizeof(float) * rows);
        ra_layer_tape *tape;
        CHECK(ra_layer_tape_create(&tape, fused, f.T) == RA_OK, "tape");
        ra_attention_options opt = {.struct_size = sizeof opt, .path = RA_PATH_FLASH, .dropout = c->p,
                                  .seed = 42};
        ra_layer_grads lg = layer_grads(&got, 0);
        lg.dwqkv = dwqkv;
        lg.dbqkv = f.w[4] ? dbqkv : NULL;
        CHECK(ra_layer_forward_train(NULL, fused, got.y, tape, f.x, c->b, c->s, &f.positions,
                                     &opt) == RA_OK &&
                  ra_layer_backward(NULL, fused, got.dx, &lg, tape, f.dy) == RA_OK,
              "%s: fused", c->name);
        group_rows(dwqkv, got.dw[0], got.dw[1], got.dw[2], c->hkv, rep * D, D, f.dim, 0);
        if (f.w[4]) group_rows(dbqkv, got.dw[4], got.dw[5], got.dw[6], c->hkv, rep * D, D, 1, 0);
        double worst = 0;
        for (int j = -2; j < N_PARAMS; j++) {
            const float *a = j == -2 ? got.y : j == -1 ? got.dx : got.dw[j];
            const float *b = j == -2 ? want.y : j == -1 ? want.dx : want.dw[j];
            int64_t n = j < 0 ? f.n_x : f.n_w[j];
            double diff = 0, ref = 0;
            for (int64_t i = 0; i < n; i++) {
                diff = fmax(diff, fabs(a[i] - b[i]));
                ref = fmax(ref, fabs(b[i]));
            }
            worst = fmax(worst, ref > 0 ? diff / ref : diff);
        }
        CHECK(worst <= 1e-6, "%s: fused vs separate %.3g", c->name, worst);
        double cached = cached_diff(fused, separate, &f);
        CHECK(cached <= 1e-5, "%s: cached fused vs separate %.3g", c->name, cached);
        printf("  %-28s fused vs separate %.1e, through the cache %.1e\n", c->name, worst,
               cached);
        ra_layer_tape_destroy(tape);
        ra_layer_destroy(separate);
        free(wqkv), free(bqkv), free(dwqkv), free(dbqkv);
        grads_free(&want);
        grads_free(&got);
        fixture_free(&f);
    }
    /* wqkv with any of wq .. bv, or bqkv alone, is refused. */
    float one[64] = {0};
    ra_rope_config cfg_rope = ra_rope_config_default(2);
    ra_layer_config cfg = {.struct_size = sizeof cfg, .dim = 4, .n_heads = 2, .head_dim = 2,
                           .rope = &cfg_rope};
    ra_layer *layer = (ra_layer *)&cfg;
    ra_layer_weights both = {.struct_size = sizeof both, .wq = one, .wo = one, .wqkv = one},
                     bias_alone = {.struct_size = sizeof bias_alone, .wq = one, .wk = one,
                                   .wv = one, .wo = one, .bqkv = one},
                     fused_bias = {.struct_size = sizeof fused_bias, .wo = one, .wqkv = one,
                                   .bk = one};
    CHECK(ra_layer_create(&layer, &cfg, &both) == RA_ERR_ARGUMENT && layer == NULL, "wq and wqkv");
    CHECK(ra_layer_create(&layer, &cfg, &bias_alone) == RA_ERR_ARGUMENT, "bqkv alone");
    CHECK(ra_layer_create(&layer, &cfg, &fused_bias) == RA_ERR_ARGUMENT, "wqkv with bk");
}

/* Every case reaches the SIMD kernels (test_errors: the calls that must
 * succeed), so each runs on every path (harness.h). */
static void simd_cases(void)
{
    RUN(test_finite_differences);
    RUN(test_paths_and_threads);
    RUN(test_forward_matches);
    RUN(test_phased);
    RUN(test_phased_cached);
    RUN(test_output_mask);
    RUN(test_accumulate_and_reuse);
    RUN(test_tape_keeps_positions);
    RUN(test_tape_held_by_a_step);
    RUN(test_tape_destroyed_under_a_step);
    RUN(test_tape_of_a_destroyed_layer);
    RUN(test_errors);
    RUN(test_fused_qkv);
    RUN(test_llama4_cached);
    RUN(test_features_cached);
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    return ra_test_summary("layer_backward");
}
