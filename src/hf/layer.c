/*
 * layer.c — ra_hf_layer: a layer built from a checkpoint's tensors, owning
 * float32 copies of them, and gradient buffers laid out as those tensors.
 *
 * Each tensor fills part of one of the layer's weight arrays (a slot, as
 * ra_layer_weights names them): most fill a whole slot; a fused qkv_proj
 * packed in rows (Phi-3) fills wq's, wk's and wv's, which then lie one
 * after another in wq's array; a GPT-NeoX-style fused weight fills wqkv;
 * StableLM 2's per-head norms fill q_norm's (k_norm's) one after another;
 * Persimmon's q_layernorm.weight fills q_norm's, its bias q_norm_bias's;
 * AfMoE's gate_proj, LFM3's, Ling's and Laguna's g_proj, HY V4's gate_proj
 * fill wgate's, and HRM-Text's gqkv_proj wgate's, wq's, wk's and wv's, one
 * after another in wgate's array; Beam's gate_bias fills bgate's;
 * latent attention's tensors fill its own slots (wq_a ... wkv_b).
 *
 * A block-FP8 checkpoint's matrices are dequantized at load (fp8.c) into
 * the config's torch_dtype, and count as stored in it below.
 *
 * The projection matrices (wq, wk, wv, wo, wqkv, wgate) keep the checkpoint's
 * dtype where they all share bfloat16 or float16 (ra_layer_weights.dtype):
 * half the memory of float32 copies, and a decode step reads half the
 * bytes.  Mixed dtypes, F32, F64 and latent attention are copied as float32
 * (its layer takes float32 weights only).  Biases, norms and sinks are
 * float32 always, and so are the gradients.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "hf/hf.h"
#include "memory.h"

/* ra_layer_weights' arrays, in its order (ra_layer_grads' d... alike). */
enum { S_WQ, S_WK, S_WV, S_WO, S_BQ, S_BK, S_BV, S_BO, S_QNORM, S_KNORM, S_WQKV, S_BQKV,
       S_SINKS, S_WQ_A, S_BQ_A, S_QA_NORM, S_WQ_B, S_WKV_A, S_BKV_A, S_KVA_NORM, S_WKV_B,
       S_ONORM, S_QNORM_BIAS, S_KNORM_BIAS, S_WGATE, S_BGATE, S_K_ROPE_NORM, N_SLOTS };

typedef struct hf_tensor {
    char *name;
    int ndim;
    int64_t shape[RA_IO_MAX_DIMS];
    int64_t count;
    int slot;
    int64_t offset;          /* its first value in the slot's array */
    const ra_st_tensor *src; /* while the layer is built */
    const ra_st_tensor *scale; /* src's block scales (F8_E4M3 src), else NULL */
} hf_tensor;

/* RA_HF_ROPE_OPPOSITE_ANGLE (NanoChat's rotate_half, cat(x2, -x1)): RoPE by
 * the opposite angle, R(-theta) = S R(theta) S, where S negates the second
 * feature of each rotary pair.  q and k meet only in dot products, and
 * S a . S b = a . b, so the layer runs the usual RoPE on S q and S k: the
 * rows of those features in wq and wk (and bq's, bk's values) are negated
 * at load, and their gradients negated back when read.  What lies between
 * the projections and RoPE must commute with S: RMS norms (weights per
 * feature or none) and clip_qkv do; LayerNorm's mean does not (refused). */
typedef struct opposite_angle {
    int on;
    int64_t head_dim, rotary_dim, dim; /* dim: the weight rows' length */
    int64_t q_rows, k_rows;            /* H * D, Hkv * D */
    ra_layout layout;
} opposite_angle;

/* RA_HF_V_HEAD_DIM with v_head_dim Dv < head_dim D (MiMo-V2-Flash): each
 * value head runs padded with zeros to D.  v_proj's Dv rows of each of the
 * Hkv heads (and bv's values) take D rows, the last D - Dv zero; o_proj's
 * Dv columns of each of the H heads take D, the last zero.  Attention's
 * output there is then zero, and wo's zero columns read nothing: the
 * layer's y is the unpadded one's; the padding's gradients are dropped
 * when read (ra_hf_grads_tensor). */
typedef struct value_padding {
    int64_t dv, d;             /* 0, 0: none */
    int64_t kv_heads, o_heads; /* Hkv; dim * H (o_proj's rows times its heads) */
} value_padding;

/* FUSED_QVK_GROUPS (CodeGen's qkv_proj): the saved rows are 4 model-parallel
 * groups, each its quarter of q's rows (H / 4 heads of D), then v's, then
 * k's; the layer holds them as FUSED_ROWS does, q's rows, then k's, then
 * v's, permuted at load, and their gradients permuted back when read. */
typedef struct qvk_groups {
    int64_t rows, dim; /* q's rows (H * D) and each row's length; 0, 0: none */
} qvk_groups;

struct ra_hf_layer {
    ra_layer *layer;
    /* Slot s is owner[s]'s array from offset[s] on (owner[s] == s: its own,
     * of count[s] values); owner[s] < 0: the layer has no such array. */
    int owner[N_SLOTS];
    int64_t offset[N_SLOTS], count[N_SLOTS];
    float *data[N_SLOTS]; /* the owning slots' values: float32, or dtype's in a weight slot */
    ra_dtype dtype;       /* the projection matrices' (weight slots') */
    opposite_angle flip;  /* RA_HF_ROPE_OPPOSITE_ANGLE's negated rows */
    int values_from_keys; /* RA_HF_VALUES_FROM_KEYS: wv is wk's array, bv bk's */
    value_padding vpad;   /* RA_HF_V_HEAD_DIM's zeros */
    qvk_groups qvk;       /* FUSED_QVK_GROUPS' permuted rows */
    hf_tensor *tensors;
    int64_t n_tensors;
    int token_types; /* ra_hf_options.token_types: for ra_hf_token_type_mask's masks */
};

struct ra_hf_grads {
    ra_layer_grads grads;
    float *data[N_SLOTS]; /* as the layer's */
    float *read[N_SLOTS]; /* RA_HF_ROPE_OPPOSITE_ANGLE: data's q/k arrays as the checkpoint's;
                             RA_HF_V_HEAD_DIM: wv's, bv's, wo's without the padding;
                             FUSED_QVK_GROUPS: wq's array in the checkpoint's row order */
    /* RA_HF_VALUES_FROM_KEYS: dwv and dbv, apart from dwk and dbk (the
     * backward's outputs must not overlap), moved into them when k_proj's
     * gradient is read (in place, so that what the caller adds there, as
     * the MPI tool's sums, stays) */
    float *values[2];
    const ra_hf_layer *layer;
};

/* Slot s's array within base (a layer's data or a grads' data), or NULL. */
static float *slot_array(const ra_hf_layer *l, float *const base[N_SLOTS], int s)
{
    return l->owner[s] < 0 ? NULL : base[l->owner[s]] + l->offset[s];
}

/* Whether feature f of a head is the second of its rotary pair: negated
 * under RA_HF_ROPE_OPPOSITE_ANGLE. */
static int negated_feature(const opposite_angle *flip, int64_t f)
{
    const int64_t r = flip->rotary_dim;
    if (f >= r) return 0; /* partial rotary: passes through */
    return flip->layout == RA_LAYOUT_INTERLEAVED ? f % 2 == 1 : f >= r / 2;
}

/* Negates, in place, the rows of q's or k's features that flip names in
 * rows ([n_rows, row_len] values of size bytes (float32, or a 16-bit
 * float: its sign bit)). */
static void negate_rows(const opposite_angle *flip, void *rows, int64_t n_rows,
                        int64_t row_len, size_t size)
{
    for (int64_t r = 0; r < n_rows; r++) {
        if (!negated_feature(flip, r % flip->head_dim)) continue;
        for (int64_t e = r * row_len; e < (r + 1) * row_len; e++) {
            if (size == sizeof(float))
                ((float *)rows)[e] = -((float *)rows)[e];
            else
                ((uint16_t *)rows)[e] ^= 0x8000u;
        }
    }
}

/* The projection matrices' slots, which may hold 16-bit values. */
static int is_weight_slot(int s)
{
    return s == S_WQ || s == S_WK || s == S_WV || s == S_WO || s == S_WQKV || s == S_WGATE;
}

/* Bytes a value of slot s takes in the layer's arrays. */
static size_t slot_size(const ra_hf_layer *l, int s)
{
    return is_weight_slot(s) ? ra_dtype_size(l->dtype) : sizeof(float);
}

/* Weight slot s's values as the layer reads them (ra_layer_weights.dtype),
 * or NULL. */
static const float *weight_array(const ra_hf_layer *l, int s)
{
    if (l->owner[s] < 0) return NULL;
    return (const float *)(const void *)((const char *)l->data[l->owner[s]] +
                                         (size_t)l->offset[s] * slot_size(l, s));
}

/* The slots of matrices, which a block-FP8 checkpoint may quantize. */
static int is_matrix_slot(int s)
{
    return is_weight_slot(s) || s == S_WQ_A || s == S_WQ_B || s == S_WKV_A || s == S_WKV_B;
}

/* RA_BF16 or RA_F16 where every tensor of a weight slot has that dtype in
 * the checkpoint, or is F8_E4M3 dequantized to it (hf_value_dtype; latent
 * attention: never), else RA_F32. */
static ra_dtype stored_dtype(const ra_hf_layer *l, int mla, const ra_hf_quant *q)
{
    ra_st_dtype seen = RA_ST_F32;
    for (int64_t i = 0, first = 1; i < l->n_tensors; i++) {
        const hf_tensor *t = &l->tensors[i];
        if (!is_weight_slot(t->slot)) continue;
        ra_st_dtype dtype = hf_value_dtype(t->src, q);
        if (!first && dtype != seen) return RA_F32;
        seen = dtype;
        first = 0;
    }
    if (mla) return RA_F32;
    return seen == RA_ST_BF16 ? RA_BF16 : seen == RA_ST_F16 ? RA_F16 : RA_F32;
}

/* Appends tensor src as filling slot from offset. */
static ra_status add_tensor(ra_hf_layer *l, const ra_st_tensor *src, int slot, int64_t offset)
{
    hf_tensor *t = &l->tensors[l->n_tensors];
    if (!(t->name = ra_strdup(src->name))) return hf_fail(RA_ERR_NOMEM, "out of memory");
    l->n_tensors++;
    t->ndim = src->ndim;
    memcpy(t->shape, src->shape, sizeof t->shape);
    t->count = src->count;
    t->slot = slot;
    t->offset = offset;
    t->src = src;
    l->owner[slot] = slot;
    if (offset + src->count > l->count[slot]) l->count[slot] = offset + src->count;
    return RA_OK;
}

/* wk and wv (bk and bv) as rows of the fused weight in wq's (bq's) array. */
static void alias_rows(ra_hf_layer *l, const ra_st_tensor *const parts[3], int first_slot)
{
    for (int p = 1; p < 3; p++) {
        l->owner[first_slot + p] = first_slot;
        l->offset[first_slot + p] = l->offset[first_slot + p - 1] + parts[p - 1]->count;
    }
}

/* wq, wk and wv as rows of a fused weight after the gate's, in wgate's
 * array (FUSED_GATE_ROWS). */
static void alias_gated_rows(ra_hf_layer *l, const attention_tensors *t)
{
    int64_t at = t->gate->count;
    for (int p = PROJ_Q; p <= PROJ_V; at += t->proj[p++]->count) {
        l->owner[S_WQ + p] = S_WGATE;
        l->offset[S_WQ + p] = at;
    }
}

/* Latent attention's tensor list and slots: weights, biases, norms, the
 * output gate and sinks (a
 * bias of another projection was refused: hf_mla_config). */
static ra_status plan_latent(ra_hf_layer *l, const attention_tensors *t)
{
    static const struct {
        int kind, slot; /* kind: an MLA_ index, or -1: o_proj */
        int bias;
    } order[] = {
        {MLA_Q, S_WQ, 0},           {MLA_Q_A, S_WQ_A, 0},      {MLA_Q_B, S_WQ_B, 0},
        {MLA_KV_A, S_WKV_A, 0},     {MLA_KV_B, S_WKV_B, 0},    {-1, S_WO, 0},
        {MLA_Q_A, S_BQ_A, 1},       {MLA_KV_A, S_BKV_A, 1},    {-1, S_BO, 1},
        {MLA_Q_A_NORM, S_QA_NORM, 0}, {MLA_KV_A_NORM, S_KVA_NORM, 0},
        {MLA_K_ROPE_NORM, S_K_ROPE_NORM, 0}, /* dots.note's */
    };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        int k = order[i].kind;
        const ra_st_tensor *x = k < 0 ? (order[i].bias ? t->bias[PROJ_O] : t->proj[PROJ_O])
                                      : (order[i].bias ? t->latent_bias[k] : t->latent[k]);
        if (x) RA_HF_TRY(add_tensor(l, x, order[i].slot, 0));
    }
    if (t->gate) RA_HF_TRY(add_tensor(l, t->gate, S_WGATE, 0)); /* Ling's g_proj, HY V4's */
    if (t->sinks) RA_HF_TRY(add_tensor(l, t->sinks, S_SINKS, 0));   /* HY V4's */
    return RA_OK;
}

/* The tensor list and slots: weights, then biases, then the q/k norms (and
 * their biases), then the sinks, the norm before o_proj and the output
 * gate's weight. */
static ra_status plan(ra_hf_layer *l, const attention_tensors *t)
{
    for (int s = 0; s < N_SLOTS; s++) l->owner[s] = -1;
    if (t->mla) return plan_latent(l, t);
    const int grouped = t->packing == FUSED_GROUPED, gated = t->packing == FUSED_GATE_ROWS;
    const ra_st_tensor *fused[2] = {t->fused, t->fused_bias};
    for (int kind = 0; kind < 2; kind++) { /* 0: weights, 1: biases */
        const ra_st_tensor *const *of = kind ? t->bias : t->proj;
        const int first = kind ? S_BQ : S_WQ;
        for (int p = 0; p < N_PROJ; p++) {
            if (fused[kind] && p < PROJ_O) {
                if (p == PROJ_Q && grouped)
                    RA_HF_TRY(add_tensor(l, fused[kind], kind ? S_BQKV : S_WQKV, 0));
                if (p == PROJ_Q && gated) { /* the gate's rows, then wq's ... */
                    RA_HF_TRY(add_tensor(l, fused[kind], S_WGATE, 0));
                    alias_gated_rows(l, t);
                }
                if (p == PROJ_Q && !grouped && !gated) {
                    RA_HF_TRY(add_tensor(l, fused[kind], first, 0));
                    alias_rows(l, of, first);
                }
                continue;
            }
            if (p == PROJ_V && t->values_from_keys) { /* k_proj's, read once */
                if (of[PROJ_K]) l->owner[first + p] = first + PROJ_K;
                continue;
            }
            if (of[p]) RA_HF_TRY(add_tensor(l, of[p], first + p, 0));
        }
    }
    for (int i = 0; i < 2; i++) {
        if (t->norm[i]) RA_HF_TRY(add_tensor(l, t->norm[i], S_QNORM + i, 0));
        for (int64_t h = 0, at = 0; h < t->n_head_norms[i]; at += t->head_norms[i][h++]->count)
            RA_HF_TRY(add_tensor(l, t->head_norms[i][h], S_QNORM + i, at)); /* StableLM 2 */
        if (t->layer_norm[i]) { /* Persimmon */
            RA_HF_TRY(add_tensor(l, t->layer_norm[i], S_QNORM + i, 0));
            RA_HF_TRY(add_tensor(l, t->layer_norm_bias[i], S_QNORM_BIAS + i, 0));
        }
    }
    if (t->sinks) RA_HF_TRY(add_tensor(l, t->sinks, S_SINKS, 0));
    if (t->o_norm) RA_HF_TRY(add_tensor(l, t->o_norm, S_ONORM, 0));
    if (t->gate && !gated) RA_HF_TRY(add_tensor(l, t->gate, S_WGATE, 0));
    if (t->gate_bias) RA_HF_TRY(add_tensor(l, t->gate_bias, S_BGATE, 0));
    return RA_OK;
}

/* Each owning slot's array, filled from its tensors (a block-FP8 one
 * dequantized as q says). */
static ra_status load(ra_hf_layer *l, const char *path, const ra_hf_family *family,
                      const ra_hf_quant *q)
{
    for (int s = 0; s < N_SLOTS; s++) {
        if (l->owner[s] != s) continue;
        l->data[s] = ra_malloc(l->count[s] > 0 ? (size_t)l->count[s] * slot_size(l, s) : 1);
        if (!l->data[s])
            return hf_fail(RA_ERR_NOMEM, "out of memory for %lld weights",
                           (long long)l->count[s]);
    }
    for (int64_t i = 0; i < l->n_tensors; i++) {
        const hf_tensor *t = &l->tensors[i];
        if (t->scale)
            RA_HF_TRY(hf_fp8_dequantize(t->src, t->scale, q, path,
                                        is_weight_slot(t->slot) ? l->dtype : RA_F32,
                                        (char *)l->data[t->slot] +
                                            (size_t)t->offset * slot_size(l, t->slot)));
        else if (is_weight_slot(t->slot) && l->dtype != RA_F32) /* the stored bytes, as they are */
            memcpy((char *)l->data[t->slot] + (size_t)t->offset * 2, t->src->data,
                   (size_t)t->count * 2);
        else
            RA_HF_TRY(hf_load_f32(t->src, path, l->data[t->slot] + t->offset));
    }
    /* Gemma 3's and Qwen3-Next's norms scale by 1 + weight (in float32, as transformers). */
    for (int s = S_QNORM; family && (family->features & RA_HF_NORM_PLUS_ONE) && s <= S_KNORM; s++)
        for (int64_t e = 0; l->owner[s] == s && e < l->count[s]; e++) l->data[s][e] += 1.0f;
    return RA_OK;
}

/* Slot s's blocks under value padding (wv: Hkv blocks of Dv rows of dim;
 * bv: Hkv of Dv; wo: dim * H of Dv), and each block's length unpadded
 * (*from) and padded (*to); 0 for another slot or none. */
static int64_t padded_blocks(const ra_hf_layer *l, int s, int64_t *from, int64_t *to)
{
    const value_padding *p = &l->vpad;
    *from = *to = 0;
    if (!p->dv || l->owner[s] != s) return 0;
    const int64_t row = s == S_WV ? l->count[S_WV] / (p->kv_heads * p->d) : 1;
    *from = p->dv * row, *to = p->d * row;
    return s == S_WV || s == S_BV ? p->kv_heads : s == S_WO ? p->o_heads : 0;
}

/* In place, from the last block: each of slot s's blocks of `from` values
 * moved to `to` apart, the rest of each zeroed. */
static void pad_values(ra_hf_layer *l, int s)
{
    int64_t from, to, n = padded_blocks(l, s, &from, &to);
    const size_t size = slot_size(l, s);
    char *a = (char *)l->data[s];
    for (int64_t b = n - 1; b >= 0; b--) {
        memmove(a + (size_t)(b * to) * size, a + (size_t)(b * from) * size, (size_t)from * size);
        memset(a + (size_t)(b * to + from) * size, 0, (size_t)(to - from) * size);
    }
}

/* RA_HF_V_HEAD_DIM: the loaded wv, bv and wo padded (value_padding). */
static void apply_value_padding(ra_hf_layer *l, const attention_tensors *t,
                                const ra_layer_config *lc)
{
    if (!t->v_head_dim) return;
    l->vpad = (value_padding){t->v_head_dim, lc->head_dim, lc->n_kv_heads, lc->dim * lc->n_heads};
    for (int s = 0; s < N_SLOTS; s++) pad_values(l, s);
}

/* The slots' sizes padded (before load: their arrays hold the padding). */
static void size_value_padding(ra_hf_layer *l, const attention_tensors *t,
                               const ra_layer_config *lc)
{
    if (!t->v_head_dim) return;
    const int64_t d = lc->head_dim, dv = t->v_head_dim;
    static const int slots[3] = {S_WV, S_BV, S_WO};
    for (int i = 0; i < 3; i++)
        if (l->owner[slots[i]] == slots[i]) l->count[slots[i]] = l->count[slots[i]] / dv * d;
}

/* Slot s's gradients without the padding, into dst (as the tensor). */
static void unpad_values(const ra_hf_layer *l, int s, float *dst, const float *src)
{
    int64_t from, to, n = padded_blocks(l, s, &from, &to);
    for (int64_t b = 0; b < n; b++)
        memcpy(dst + b * from, src + b * to, (size_t)from * sizeof(float));
}

/* FUSED_QVK_GROUPS: copies the fused rows of `from` into `to` (values of
 * size bytes), from the checkpoint's order to the layer's (back 0) or from
 * the layer's to the checkpoint's (back 1).  Saved group g's part p (0 q,
 * 1 v, 2 k) is rows [(3 g + p) G, (3 g + p + 1) G) with G = rows / 4; the
 * layer's q, k, v part i holds group g at rows [i rows + g G, .. + G). */
static void permute_qvk(const qvk_groups *qvk, const void *from, void *to, size_t size, int back)
{
    static const int64_t part[3] = {0, 2, 1}; /* saved q, v, k: the layer's q, k, v index */
    const int64_t g_rows = qvk->rows / 4;
    const size_t block = (size_t)(g_rows * qvk->dim) * size;
    for (int64_t g = 0; g < 4; g++)
        for (int64_t p = 0; p < 3; p++) {
            const size_t saved = (size_t)((3 * g + p) * g_rows * qvk->dim) * size;
            const size_t held = (size_t)((part[p] * qvk->rows + g * g_rows) * qvk->dim) * size;
            memcpy((char *)to + (back ? saved : held), (const char *)from + (back ? held : saved),
                   block);
        }
}

/* FUSED_QVK_GROUPS: wq's array (the fused weight, loaded as saved) permuted
 * to q's rows, k's, v's (lc: the layer's heads). */
static ra_status apply_qvk_groups(ra_hf_layer *l, const attention_tensors *t,
                                  const ra_layer_config *lc)
{
    if (t->packing != FUSED_QVK_GROUPS) return RA_OK;
    l->qvk.rows = lc->n_heads * lc->head_dim;
    l->qvk.dim = lc->dim;
    const size_t size = slot_size(l, S_WQ);
    const size_t n = (size_t)l->count[S_WQ] * size;
    void *saved = ra_malloc(n);
    if (!saved) return hf_fail(RA_ERR_NOMEM, "out of memory");
    memcpy(saved, l->data[S_WQ], n);
    permute_qvk(&l->qvk, saved, l->data[S_WQ], size, 0);
    ra_free(saved);
    return RA_OK;
}

/* Negates flip's rows of wq, wk, bq and bk where they lie in base's arrays:
 * a layer's data (f32 0: weight slots in its dtype) or a copy of its
 * gradients (f32 1); only those in owning slot `only`'s array, if >= 0. */
static void negate_qk(const ra_hf_layer *l, float *const base[N_SLOTS], int f32, int only)
{
    static const int slots[4] = {S_WQ, S_WK, S_BQ, S_BK};
    for (int i = 0; i < 4; i++) {
        const int s = slots[i];
        if (l->owner[s] < 0 || (only >= 0 && l->owner[s] != only)) continue;
        const size_t size = f32 ? sizeof(float) : slot_size(l, s);
        void *rows = (char *)base[l->owner[s]] + (size_t)l->offset[s] * size;
        negate_rows(&l->flip, rows, s == S_WQ || s == S_BQ ? l->flip.q_rows : l->flip.k_rows,
                    s == S_WQ || s == S_WK ? l->flip.dim : 1, size);
    }
}

/* Whether owning slot s's array holds rows negate_qk negates. */
static int holds_negated_rows(const ra_hf_layer *l, int s)
{
    return l->flip.on && (s == l->owner[S_WQ] || s == l->owner[S_WK] || s == l->owner[S_BQ] ||
                          s == l->owner[S_BK]);
}

/* RA_HF_ROPE_OPPOSITE_ANGLE: its geometry, from the layer's config and
 * rope, and the loaded rows negated; refused where q or k pass through what does not commute with negating
 * features (a LayerNorm's mean) or lie where their rows are not read
 * apart (a per-head fused wqkv, latent attention). */
static ra_status apply_opposite_angle(ra_hf_layer *l, const ra_hf_family *family,
                                     const attention_tensors *t, const ra_layer_config *lc,
                                     const ra_rope_config *rope)
{
    if (!family || !(family->features & RA_HF_ROPE_OPPOSITE_ANGLE)) return RA_OK;
    const char *why = t->mla                ? "latent attention"
                      : l->owner[S_WQKV] >= 0 ? "a fused wqkv packed per head"
                      : lc->norm_layer      ? "LayerNorms of q and k"
                      : lc->gated_output    ? "a gate in q_proj's rows"
                                            : NULL;
    if (why)
        return hf_fail(RA_ERR_UNSUPPORTED, "model_type \"%s\" turns RoPE by the opposite angle "
                       "(rotate_half cat(x2, -x1)), which is not supported with %s",
                       family->model_type, why);
    opposite_angle *f = &l->flip;
    f->on = 1;
    f->head_dim = lc->head_dim;
    f->rotary_dim = rope->rotary_dim ? rope->rotary_dim : lc->head_dim;
    f->layout = rope->layout;
    f->dim = lc->dim;
    f->q_rows = lc->n_heads * lc->head_dim;
    f->k_rows = (lc->n_kv_heads ? lc->n_kv_heads : lc->n_heads) * lc->head_dim;
    negate_qk(l, l->data, 0, -1);
    return RA_OK;
}

/* RA_HF_CROSS_ATTENTION_LAYERS: a layer the config lists attends to
 * another sequence: refused, naming it (layer -1: the names carry no layer
 * number, and some layers cross-attend). */
static ra_status refuse_cross_attention(const ra_hf_config *config, int64_t layer)
{
    const ra_hf_fields *hf = &config->fields;
    for (int64_t i = 0; i < hf->n_cross_attention_layers; i++) {
        if (layer >= 0 && hf->cross_attention_layers[i] != layer) continue;
        if (layer < 0)
            return hf_fail(RA_ERR_UNSUPPORTED, "%s: cross_attention_layers makes some layers "
                           "cross-attention, and the checkpoint's names carry no layer number",
                           config->path);
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: layer %lld is a cross-attention layer "
                       "(cross_attention_layers of model_type \"%s\"): it attends to the vision "
                       "encoder's states; cross-attention is not supported", config->path,
                       (long long)layer, hf->family->model_type);
    }
    return RA_OK;
}

/* A layer that the config's layer_types names other than softmax attention
 * (a hybrid model's linear-attention, Mamba or convolution layers) is not
 * an attention layer ropeattn can run: refused, naming its kind.  A layer
 * with a sparse-attention indexer ("indexed_attention", "minimax_m3_sparse":
 * ra_hf_indexed_layer_type) is softmax attention over the keys its indexer
 * keeps (check_indexer_keys). */
static ra_status check_layer_kind(const ra_hf_config *config, int64_t layer)
{
    const ra_hf_fields *hf = &config->fields;
    if (hf->family && (hf->family->features & RA_HF_ATTN_LAYER_INDICES) && layer >= 0) {
        if (!ra_hf_attn_layer_listed(hf, layer))
            return hf_fail(RA_ERR_UNSUPPORTED, "%s: layer %lld is a \"mamba\" layer (not in "
                           "attn_layer_indices), not softmax attention: ropeattn runs only a "
                           "hybrid model's attention layers", config->path, (long long)layer);
    }
    const char *kind = ra_hf_layer_not_attention(&hf->window, layer);
    const char *indexed = ra_hf_indexed_layer_type(hf->family);
    if (kind == NULL || (indexed && strcmp(kind, indexed) == 0)) return RA_OK;
    const char *key = hf->window.kinds_key ? hf->window.kinds_key : "layer_types";
    return hf_fail(RA_ERR_UNSUPPORTED, "%s: layer %lld is a \"%s\" layer (%s), not softmax "
                   "attention: ropeattn runs only a hybrid model's attention layers",
                   config->path, (long long)layer, kind, key);
}

/* A layer with an indexer runs where no query sees more keys than it keeps
 * (ra_hf_sparse_keys: the indexer then keeps every key it sees;
 * hf/fields_indexer.c, hf/fields_sparse.c).  The keys: the tokens up to the
 * last one the options name, first_token + n_tokens (a cache holding the
 * earlier ones), else max_position + 1.  Checked here for an early message;
 * the layer's max_keys then refuses each call on more. */
static ra_status check_indexer_keys(const ra_hf_config *config, const ra_hf_options *o,
                                    int64_t layer)
{
    const ra_hf_fields *hf = &config->fields;
    const int64_t bound = ra_hf_sparse_keys(hf, layer);
    if (!bound) return RA_OK;
    const int64_t keys = o->n_tokens ? o->first_token + o->n_tokens : o->max_position + 1;
    const char *type = hf->family->model_type;
    const ra_hf_features features = hf->family->features;
    char keeps[1024]; /* what the indexer keeps, "...: " */
    if (features & RA_HF_INDEXER_TOPK)
        snprintf(keeps, sizeof keeps, "%s: model_type \"%s\"'s indexer (DeepSeek sparse "
                 "attention) keeps each query's index_topk = %lld best-scoring keys, all of them "
                 "only while a query sees at most that many: ", config->path, type,
                 (long long)bound);
    else
        snprintf(keeps, sizeof keeps, "%s: model_type \"%s\"'s block-sparse indexer keeps each "
                 "query's %s = %lld: ", config->path, type,
                 (features & RA_HF_BLOCK_INDEXER)
                     ? "blocks of indexer_compress_ratio keys, up to indexer_budget, and the "
                       "last incomplete block: all its keys only while a query sees at most "
                       "indexer_budget + indexer_compress_ratio - 1"
                     : "index_topk_blocks blocks of index_block_size keys: all its keys only "
                       "while a query sees at most index_topk_blocks * index_block_size",
                 (long long)bound);
    if (keys <= 0)
        return hf_fail(RA_ERR_ARGUMENT, "%sgive the tokens the layer runs on (n_tokens, "
                       "first_token) or the largest position (max_position)", keeps);
    if (keys > bound)
        return hf_fail(RA_ERR_UNSUPPORTED, "%sthe layer's queries see up to %lld keys (tokens to "
                       "position %lld), and the indexer's selection among more is not "
                       "supported", keeps, (long long)keys, (long long)(keys - 1));
    return RA_OK;
}

/* The attention tensors of layer `layer`; where the family's layers sit in
 * stacks run in cycles (RA_HF_LAYER_STACKS), layer `layer` is a cache slot:
 * its stack's layer's tensors, t->layer the slot. */
static ra_status find_attention(const ra_hf_checkpoint *ckpt, const ra_hf_config *config,
                                int64_t layer, attention_tensors *t)
{
    const ra_hf_fields *hf = &config->fields;
    int64_t index = layer;
    const char *stack = ra_hf_stack_layer(hf, layer, &index);
    if (stack && (layer < 0 || layer >= hf->num_hidden_layers))
        return hf_fail(RA_ERR_NOT_FOUND, "%s: model_type \"%s\" runs its two stacks of layers in "
                       "cycles, %lld cache slots (num_hidden_layers): give the layer, a slot "
                       "from 0 to %lld", config->path, hf->family->model_type,
                       (long long)hf->num_hidden_layers, (long long)hf->num_hidden_layers - 1);
    RA_HF_TRY(hf_find_attention(ckpt, index, stack, hf->family, t));
    if (stack) t->layer = layer;
    return RA_OK;
}

/* ra_hf_options.token_types: Gemma 3's text layer, whose model reads
 * token_type_ids into its mask (Gemma3Model.forward): the causal layer,
 * each call with image blocks given its whole mask (hf/token_types.c). */
static ra_status token_types_config(const ra_hf_config *config, ra_layer_config *lc)
{
    const cJSON *top = config->fields.json /* the top level's, not text_config's */
                           ? cJSON_GetObjectItemCaseSensitive(config->fields.json, "model_type")
                           : NULL;
    const char *type = cJSON_IsString(top) ? top->valuestring : NULL;
    if (!type || strcmp(type, "gemma3"))
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: token_types: model_type \"%s\" does not read "
                       "token_type_ids into its attention mask in transformers (Gemma 3's "
                       "Gemma3Model, model_type \"gemma3\", does)", config->path,
                       type ? type : "(none)");
    if (lc->chunk || lc->non_causal)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: token_types: a layer with %s", config->path,
                       lc->chunk ? "chunks" : "non_causal");
    lc->whole_masks = 1; /* a call's attn_mask needs non_causal */
    return RA_OK;
}

int hf_layer_token_types(const ra_hf_layer *l)
{
    return l->token_types;
}

static ra_status build(ra_hf_layer *l, const ra_hf_checkpoint *ckpt, const ra_hf_config *config,
                       const ra_hf_options *options, attention_tensors *t)
{
    ra_layer_config lc;
    ra_rope_config rope;
    const ra_hf_family *family = config->fields.family;
    RA_HF_TRY(hf_check_kv_shared(config, options->layer)); /* its k and v are not its own */
    RA_HF_TRY(find_attention(ckpt, config, options->layer, t));
    RA_HF_TRY(refuse_cross_attention(config, t->layer));
    RA_HF_TRY(hf_check_kv_shared(config, t->layer));
    RA_HF_TRY(check_indexer_keys(config, options, t->layer));
    RA_HF_TRY(t->mla ? hf_mla_config(config, options, ckpt->path, t, &lc, &rope)
                     : hf_layer_config(config, options, ckpt->path, t, &lc, &rope));
    if (family && strcmp(family->model_type, "roformer") == 0)
        RA_HF_TRY(hf_check_roformer_table(ckpt, config, rope.head_dim));
    lc.max_keys = ra_hf_sparse_keys(&config->fields, t->layer); /* every call, as
                                                                    check_indexer_keys */
    lc.positions_are_slots = ra_hf_sparse_by_slots(&config->fields, t->layer);
    /* Moshi: transformers' cache keeps sliding_window - 1 earlier tokens, its
     * mask none: past sliding_window keys its cached generation differs (the
     * uncached forward past it, refused too, would not) */
    if (family && (family->features & RA_HF_CACHE_WINDOW))
        lc.max_keys = config->fields.window.sliding_window;
    if (options->token_types) /* the mask comes whole with each call (hf/token_types.c) */
        RA_HF_TRY(token_types_config(config, &lc));
    l->token_types = options->token_types != 0;
    return hf_layer_from_tensors(l, ckpt, config, family, t, &lc, &rope);
}

ra_status hf_layer_from_tensors(ra_hf_layer *l, const ra_hf_checkpoint *ckpt,
                                const ra_hf_config *config, const ra_hf_family *family,
                                attention_tensors *t, const ra_layer_config *layer_config,
                                const ra_rope_config *rope_config)
{
    ra_layer_config lc = *layer_config;
    ra_rope_config rope = *rope_config;
    lc.rope = &rope;
    int64_t most = 2 * N_PROJ + 10 + N_MLA + t->n_head_norms[0] + t->n_head_norms[1];
    if (!(l->tensors = ra_calloc((size_t)most, sizeof *l->tensors)))
        return hf_fail(RA_ERR_NOMEM, "out of memory");
    RA_HF_TRY(plan(l, t));
    l->values_from_keys = t->values_from_keys;
    size_value_padding(l, t, &lc);
    const ra_hf_quant *q = &config->fields.quant;
    for (int64_t i = 0; i < l->n_tensors; i++) {
        hf_tensor *x = &l->tensors[i];
        RA_HF_TRY(hf_fp8_check(ckpt, q, x->src, is_matrix_slot(x->slot), &x->scale));
    }
    l->dtype = stored_dtype(l, t->mla, q);
    RA_HF_TRY(load(l, ckpt->path, family, q));
    RA_HF_TRY(apply_qvk_groups(l, t, &lc)); /* before the rows negated: the layer's order */
    RA_HF_TRY(apply_opposite_angle(l, family, t, &lc, &rope));
    apply_value_padding(l, t, &lc);
    float *const *d = l->data;
    ra_layer_weights w = ra_layer_weights_init();
    w.dtype = l->dtype;
    w.wq = weight_array(l, S_WQ), w.wk = weight_array(l, S_WK), w.wv = weight_array(l, S_WV);
    w.wo = weight_array(l, S_WO), w.wqkv = weight_array(l, S_WQKV);
    w.wgate = weight_array(l, S_WGATE), w.bgate = slot_array(l, d, S_BGATE);
    w.bq = slot_array(l, d, S_BQ), w.bk = slot_array(l, d, S_BK), w.bv = slot_array(l, d, S_BV);
    w.bo = slot_array(l, d, S_BO);
    w.q_norm = slot_array(l, d, S_QNORM), w.k_norm = slot_array(l, d, S_KNORM);
    w.q_norm_bias = slot_array(l, d, S_QNORM_BIAS), w.k_norm_bias = slot_array(l, d, S_KNORM_BIAS);
    w.bqkv = slot_array(l, d, S_BQKV);
    w.sinks = slot_array(l, d, S_SINKS), w.o_norm = slot_array(l, d, S_ONORM);
    w.wq_a = slot_array(l, d, S_WQ_A), w.bq_a = slot_array(l, d, S_BQ_A);
    w.q_a_norm = slot_array(l, d, S_QA_NORM), w.wq_b = slot_array(l, d, S_WQ_B);
    w.wkv_a = slot_array(l, d, S_WKV_A), w.bkv_a = slot_array(l, d, S_BKV_A);
    w.kv_a_norm = slot_array(l, d, S_KVA_NORM), w.wkv_b = slot_array(l, d, S_WKV_B);
    w.k_rope_norm = slot_array(l, d, S_K_ROPE_NORM);
    ra_status status = ra_layer_create(&l->layer, &lc, &w);
    if (status != RA_OK)
        return hf_fail(status, "cannot create the attention layer: %s%s%s",
                       ra_status_string(status), ra_last_error()[0] ? ": " : "",
                       ra_last_error());
    for (int64_t i = 0; i < l->n_tensors; i++) l->tensors[i].src = l->tensors[i].scale = NULL;
    return RA_OK;
}

RA_HF_API ra_status ra_hf_layer_create(ra_hf_layer **out, const ra_hf_checkpoint *ckpt,
                                       const ra_hf_config *config, const ra_hf_options *options)
{
    hf_reset();
    if (!out || !ckpt) return hf_fail(RA_ERR_NULL, "%s is NULL", out ? "ckpt" : "out");
    *out = NULL;
    ra_hf_options o;
    RA_HF_TRY(hf_options_read(&o, options));
    static const ra_hf_config none = {.path = "config"}; /* says nothing */
    if ((o.vision || o.non_causal) && o.token_types)
        return hf_fail(RA_ERR_UNSUPPORTED, "ra_hf_options: token_types with %s (token_type_ids "
                       "mask a causal text model's layers)", o.vision ? "vision" : "non_causal");
    if (o.vision_windows && !o.vision)
        return hf_fail(RA_ERR_ARGUMENT, "ra_hf_options: vision_windows without vision (it "
                       "names a vision encoder's window-attention layer)");
    if (config && config->fields.quant.refused) /* its quantization, read but not run */
        return hf_fail(config->fields.quant.refused, "%s", config->fields.quant.reason);
    if (config && o.layer >= 0 && !o.vision) /* before looking for its tensors */
        RA_HF_TRY(refuse_cross_attention(config, o.layer));
    if (config && !o.vision) RA_HF_TRY(check_layer_kind(config, o.layer));
    ra_hf_layer *l = ra_calloc(1, sizeof *l);
    if (!l) return hf_fail(RA_ERR_NOMEM, "out of memory");
    attention_tensors t;
    memset(&t, 0, sizeof t); /* freed below, even when build fails before it finds them */
    ra_status status = o.vision ? hf_vision_build(l, ckpt, config ? config : &none, &o, &t)
                                : build(l, ckpt, config ? config : &none, &o, &t);
    hf_tensors_free(&t);
    if (status != RA_OK) {
        ra_hf_layer_destroy(l);
        return status;
    }
    *out = l;
    return RA_OK;
}

RA_HF_API void ra_hf_layer_destroy(ra_hf_layer *layer)
{
    if (!layer) return;
    ra_layer_destroy(layer->layer);
    for (int s = 0; s < N_SLOTS; s++) ra_free(layer->data[s]);
    for (int64_t i = 0; i < layer->n_tensors; i++) ra_free(layer->tensors[i].name);
    ra_free(layer->tensors);
    ra_free(layer);
}

RA_HF_API const ra_layer *ra_hf_layer_get(const ra_hf_layer *layer)
{
    return layer ? layer->layer : NULL;
}

RA_HF_API int64_t ra_hf_layer_tensor_count(const ra_hf_layer *layer)
{
    return layer ? layer->n_tensors : 0;
}

RA_HF_API const char *ra_hf_layer_tensor_name(const ra_hf_layer *layer, int64_t i)
{
    return layer && i >= 0 && i < layer->n_tensors ? layer->tensors[i].name : NULL;
}

RA_HF_API int ra_hf_layer_tensor_shape(const ra_hf_layer *layer, int64_t i, int64_t shape[8])
{
    if (!layer || !shape || i < 0 || i >= layer->n_tensors) return -1;
    const hf_tensor *t = &layer->tensors[i];
    memcpy(shape, t->shape, (size_t)t->ndim * sizeof *shape);
    return t->ndim;
}

/* RA_HF_VALUES_FROM_KEYS: dwv and dbv arrays of their own (as dwk's and
 * dbk's). */
static ra_status values_grads(ra_hf_grads *g)
{
    const ra_hf_layer *l = g->layer;
    for (int i = 0; l->values_from_keys && i < 2; i++) {
        const int k = i ? S_BK : S_WK;
        if (l->owner[k] != k) continue; /* no bias */
        const size_t n = l->count[k] > 0 ? (size_t)l->count[k] : 1;
        g->values[i] = ra_calloc(n, sizeof(float));
        if (!g->values[i])
            return hf_fail(RA_ERR_NOMEM, "out of memory for %lld gradients",
                           (long long)l->count[k]);
    }
    return RA_OK;
}

RA_HF_API ra_status ra_hf_grads_create(ra_hf_grads **out, const ra_hf_layer *layer)
{
    hf_reset();
    if (!out || !layer) return hf_fail(RA_ERR_NULL, "%s is NULL", out ? "layer" : "out");
    *out = NULL;
    ra_hf_grads *g = ra_calloc(1, sizeof *g);
    if (!g) return hf_fail(RA_ERR_NOMEM, "out of memory");
    g->layer = layer;
    for (int s = 0; s < N_SLOTS; s++) {
        if (layer->owner[s] != s) continue;
        const size_t n = layer->count[s] > 0 ? (size_t)layer->count[s] : 1;
        g->data[s] = ra_calloc(n, sizeof(float));
        int64_t from, to;
        const int flipped = holds_negated_rows(layer, s) || padded_blocks(layer, s, &from, &to) ||
                            (layer->qvk.rows && s == S_WQ);
        if (flipped) g->read[s] = ra_malloc(n * sizeof(float));
        if (!g->data[s] || (flipped && !g->read[s])) {
            ra_hf_grads_destroy(g);
            return hf_fail(RA_ERR_NOMEM, "out of memory for %lld gradients",
                           (long long)layer->count[s]);
        }
    }
    ra_status status = values_grads(g);
    if (status != RA_OK) {
        ra_hf_grads_destroy(g);
        return status;
    }
    float *const *d = g->data;
    ra_layer_grads *r = &g->grads;
    *r = ra_layer_grads_init();
    r->dwq = slot_array(layer, d, S_WQ), r->dwk = slot_array(layer, d, S_WK);
    r->dwv = slot_array(layer, d, S_WV), r->dwo = slot_array(layer, d, S_WO);
    r->dbq = slot_array(layer, d, S_BQ), r->dbk = slot_array(layer, d, S_BK);
    r->dbv = slot_array(layer, d, S_BV), r->dbo = slot_array(layer, d, S_BO);
    r->dq_norm = slot_array(layer, d, S_QNORM), r->dk_norm = slot_array(layer, d, S_KNORM);
    r->dq_norm_bias = slot_array(layer, d, S_QNORM_BIAS);
    r->dk_norm_bias = slot_array(layer, d, S_KNORM_BIAS);
    r->dwgate = slot_array(layer, d, S_WGATE), r->dbgate = slot_array(layer, d, S_BGATE);
    r->dwqkv = slot_array(layer, d, S_WQKV), r->dbqkv = slot_array(layer, d, S_BQKV);
    r->dsinks = slot_array(layer, d, S_SINKS), r->do_norm = slot_array(layer, d, S_ONORM);
    r->dwq_a = slot_array(layer, d, S_WQ_A), r->dbq_a = slot_array(layer, d, S_BQ_A);
    r->dq_a_norm = slot_array(layer, d, S_QA_NORM), r->dwq_b = slot_array(layer, d, S_WQ_B);
    r->dwkv_a = slot_array(layer, d, S_WKV_A), r->dbkv_a = slot_array(layer, d, S_BKV_A);
    r->dkv_a_norm = slot_array(layer, d, S_KVA_NORM), r->dwkv_b = slot_array(layer, d, S_WKV_B);
    r->dk_rope_norm = slot_array(layer, d, S_K_ROPE_NORM);
    if (layer->values_from_keys) r->dwv = g->values[0], r->dbv = g->values[1];
    *out = g;
    return RA_OK;
}

RA_HF_API void ra_hf_grads_destroy(ra_hf_grads *grads)
{
    if (!grads) return;
    for (int s = 0; s < N_SLOTS; s++) ra_free(grads->data[s]), ra_free(grads->read[s]);
    ra_free(grads->values[0]), ra_free(grads->values[1]);
    ra_free(grads);
}

RA_HF_API const ra_layer_grads *ra_hf_grads_get(const ra_hf_grads *grads)
{
    return grads ? &grads->grads : NULL;
}

RA_HF_API const float *ra_hf_grads_tensor(const ra_hf_grads *grads, int64_t i)
{
    if (!grads || i < 0 || i >= grads->layer->n_tensors) return NULL;
    const ra_hf_layer *l = grads->layer;
    const hf_tensor *t = &l->tensors[i];
    const int s = t->slot;
    if (l->values_from_keys && (s == S_WK || s == S_BK)) { /* k_proj gave k and v */
        float *v = grads->values[s == S_BK];
        for (int64_t e = 0; e < l->count[s]; e++) grads->data[s][e] += v[e], v[e] = 0.0f;
    }
    int64_t from, to;
    if (padded_blocks(l, s, &from, &to)) { /* RA_HF_V_HEAD_DIM: the padding dropped */
        unpad_values(l, s, grads->read[s], grads->data[s]);
        return grads->read[s];
    }
    if (l->qvk.rows && s == S_WQ) { /* FUSED_QVK_GROUPS: the checkpoint's row order */
        permute_qvk(&l->qvk, grads->data[s], grads->read[s], sizeof(float), 1);
        return grads->read[s];
    }
    if (!holds_negated_rows(l, s))
        return grads->data[s] + t->offset;
    /* the gradients of the negated rows, negated back, in a copy */
    memcpy(grads->read[s], grads->data[s], (size_t)l->count[s] * sizeof(float));
    negate_qk(l, grads->read, 1, s);
    return grads->read[s] + t->offset;
}
