/*
 * test_hf_token_types.c — Gemma 3's token_type_ids mask (image blocks
 * bidirectional, causal elsewhere): ra_hf_options.token_types and
 * ra_hf_token_type_mask, on tests/hf/gemma3_multimodal's checkpoint (layer
 * 0 sliding, window 4; layer 1 full), against transformers' own code in
 * float64 (tests/fixtures/make_token_type_fixtures.py):
 *   - the mask, element for element, against create_masks_for_vision_model
 *     of get_block_sequence_ids_for_mask (right and left padding, two
 *     blocks a row, adjacent blocks, a block at the start);
 *   - y of each layer against Gemma3Attention.forward under that mask,
 *     two rows with two image blocks each, one right-padded, and dL/dx and
 *     every tensor's gradient against its autograd, within 1e-5 of max
 *     (float32 sums over 32 features and 12 keys; the issue asks 1e-4);
 *   - a block longer than the sliding window (6, W 4: its queries see
 *     all their block's later keys, the window bounding the earlier
 *     ones), y and gradients as above;
 *   - cached, as generate() runs it: a prefill in chunks of 7 and 3
 *     (ra_layer_forward_cached_mask, ra_hf_token_type_mask_cached; blocks
 *     cut by the chunks' edge, one longer than the window) then two text
 *     decode steps without a mask, each call's mask and y against a
 *     transformers DynamicCache's, within 1e-5;
 *   - the full layer's masks (no window) reused on the sliding layer,
 *     forward, gradients and cached: the sliding layer's own results (it
 *     keeps its window's bound on earlier keys, as transformers' masks do);
 *   - refused, naming what: a family other than gemma3, vision with it, a
 *     layer not created with it, non_causal without a mask, a mask without
 *     non_causal, a masked call into a window cache that holds tokens.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "ropeattn.h"
#include "ropeattn_hf.h"

static const char *fixture_dir = "tests/fixtures/token_types";
static const char *case_dir = "tests/hf/gemma3_multimodal";

static ra_hf_layer *open_layer(int64_t layer, int token_types, ra_status want)
{
    char path[512];
    ra_hf_checkpoint *ckpt = NULL;
    ra_hf_config *config = NULL;
    snprintf(path, sizeof path, "%s/model.safetensors", case_dir);
    CHECK(ra_hf_checkpoint_open(&ckpt, path) == RA_OK, "%s", ra_hf_last_error());
    snprintf(path, sizeof path, "%s/config.json", case_dir);
    CHECK(ra_hf_config_open(&config, path) == RA_OK, "%s", ra_hf_last_error());
    ra_hf_options o = ra_hf_options_init();
    o.layer = layer;
    o.token_types = token_types;
    o.n_tokens = 12;
    ra_hf_layer *hl = NULL;
    ra_status st = ckpt && config ? ra_hf_layer_create(&hl, ckpt, config, &o) : RA_ERR_NULL;
    CHECK(st == want, "layer %lld: %s", (long long)layer, ra_hf_last_error());
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);
    return hl;
}

/* The builder's mask against transformers' ([B, 1, S, S] 0/1). */
static void check_mask(const ra_hf_layer *hl, const fx_file *f, const char *tt_key,
                       const char *pad_key, const char *mask_key)
{
    const fx_tensor *tt = fx_find(f, tt_key), *pad = fx_find(f, pad_key),
                    *want = fx_find(f, mask_key);
    const int64_t B = tt->shape[0], S = tt->shape[1];
    uint8_t *p = malloc(B * S), *m = malloc(B * S * S);
    for (int64_t i = 0; i < B * S; i++) p[i] = (uint8_t)pad->i64[i];
    CHECK(ra_hf_token_type_mask(hl, tt->i64, p, B, S, m) == RA_OK, "%s: %s", mask_key,
          ra_hf_last_error());
    int64_t bad = 0, ahead = 0;
    for (int64_t i = 0; i < B * S * S; i++) {
        bad += m[i] != want->i64[i];
        ahead += m[i] && (i % S) > (i / S) % S; /* a later key seen: a block */
    }
    CHECK(bad == 0 && ahead > 0, "%s: %lld of %lld elements differ from transformers' (%lld "
          "later keys seen)", mask_key, (long long)bad, (long long)(B * S * S), (long long)ahead);
    free(p), free(m);
}

/* Worst |a - b| / max|b| of float32 a against float64 b. */
static double rel_err(const float *a, const double *b, int64_t n)
{
    double diff = 0, ref = 0;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, isfinite(a[i]) ? fabs(a[i] - b[i]) : INFINITY);
        ref = fmax(ref, fabs(b[i]));
    }
    return ref > 0 ? diff / ref : diff;
}

/* dL/dx and every tensor's gradient (the training forward and backward
 * under the same options) against transformers' autograd; the worst. */
static double check_grads(const ra_hf_layer *hl, const fx_file *f, const char *pre, int64_t layer,
                          const float *x, const ra_attention_options *o, int64_t B, int64_t S)
{
    char key[300];
    snprintf(key, sizeof key, "%sdy%lld", pre, (long long)layer);
    const fx_tensor *dy64 = fx_find(f, key);
    snprintf(key, sizeof key, "%sdx%lld", pre, (long long)layer);
    const fx_tensor *dx64 = fx_find(f, key);
    const ra_layer *l = ra_hf_layer_get(hl);
    const int64_t n = dy64->count;
    float *y = malloc(n * sizeof *y), *dy = malloc(n * sizeof *dy), *dx = malloc(n * sizeof *dx);
    for (int64_t i = 0; i < n; i++) dy[i] = (float)dy64->f64[i];
    ra_layer_tape *tape = NULL;
    ra_hf_grads *g = NULL;
    CHECK(ra_layer_tape_create(&tape, l, B * S) == RA_OK, "tape: %s", ra_last_error());
    CHECK(ra_hf_grads_create(&g, hl) == RA_OK, "grads: %s", ra_hf_last_error());
    const int ran = tape && g &&
                    ra_layer_forward_train(NULL, l, y, tape, x, B, S, NULL, o) == RA_OK &&
                    ra_layer_backward(NULL, l, dx, ra_hf_grads_get(g), tape, dy) == RA_OK;
    CHECK(ran, "layer %lld: backward: %s", (long long)layer, ra_last_error());
    double worst = ran ? rel_err(dx, dx64->f64, n) : INFINITY;
    CHECK(worst <= 1e-5, "layer %lld: dx %.3g of max|dx|", (long long)layer, worst);
    for (int64_t i = 0; ran && i < ra_hf_layer_tensor_count(hl); i++) {
        snprintf(key, sizeof key, "%sd%lld:%s", pre, (long long)layer,
                 ra_hf_layer_tensor_name(hl, i));
        const fx_tensor *want = fx_find(f, key);
        CHECK(want != NULL, "no gradient %s in the fixture", key);
        if (!want) continue;
        const double e = rel_err(ra_hf_grads_tensor(g, i), want->f64, want->count);
        CHECK(e <= 1e-5, "%s %.3g of max", key, e);
        worst = fmax(worst, e);
    }
    ra_hf_grads_destroy(g);
    ra_layer_tape_destroy(tape);
    free(y), free(dy), free(dx);
    return worst;
}

/* y of one layer under ra_hf_token_type_mask's mask of the token_type_ids
 * at `types` (with the fixture's padding), made by layer mask_hl (hl's own,
 * or the full layer's reused on the sliding one: the layer keeps its
 * window's bound on earlier keys), and its gradients, against
 * transformers' {pre}y{layer} and the rest. */
static void check_forward(const ra_hf_layer *hl, const ra_hf_layer *mask_hl, const fx_file *f,
                          int64_t layer, const char *types, const char *pre)
{
    char key[64];
    const fx_tensor *x64 = fx_find(f, "x"), *tt = fx_find(f, types),
                    *pad = fx_find(f, "attention_mask");
    snprintf(key, sizeof key, "%sy%lld", pre, (long long)layer);
    const fx_tensor *y64 = fx_find(f, key);
    const int64_t B = x64->shape[0], S = x64->shape[1], n = x64->count;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint8_t *p = malloc(B * S), *m = malloc(B * S * S);
    for (int64_t i = 0; i < n; i++) x[i] = (float)x64->f64[i];
    for (int64_t i = 0; i < B * S; i++) p[i] = (uint8_t)pad->i64[i];
    CHECK(ra_hf_token_type_mask(mask_hl, tt->i64, p, B, S, m) == RA_OK, "%s",
          ra_hf_last_error());
    ra_tensor mask = ra_tensor_4d(m, RA_BOOL, B, 1, S, S);
    ra_attention_options o = ra_attention_options_init();
    o.attn_mask = &mask;
    o.non_causal = 1; /* the mask is the whole mask */
    CHECK(ra_layer_forward(NULL, ra_hf_layer_get(hl), y, x, B, S, NULL, &o) == RA_OK,
          "forward: %s", ra_last_error());
    const double ey = rel_err(y, y64->f64, n);
    CHECK(ey <= 1e-5, "%slayer %lld: y %.3g of max|y|", pre, (long long)layer, ey);
    const double eg = check_grads(hl, f, pre, layer, x, &o, B, S);
    if (ra_test_isa == (int)ra_cpu_isa_max())
        printf("%slayer %lld (%s%s): y %.2g of max|y|, gradients %.2g of max, from "
               "transformers (float64)\n", pre, (long long)layer, layer ? "full" : "sliding",
               mask_hl != hl ? ", the full layer's mask" : "", ey, eg);
    free(x), free(y), free(p), free(m);
}

/* The layer through a full KV cache as generate() runs it (the fixture's
 * cached_*): a prefill of 7 then 3 tokens, each call masked
 * (ra_layer_forward_cached_mask, ra_hf_token_type_mask_cached over the
 * token_type_ids so far: image blocks cut by the chunks' edge), then two
 * decode steps of text without a mask (ra_layer_forward_cached: the
 * layer's own causal mask and window).  Each call's mask against
 * transformers' (its DynamicCache's sliding layer keeps W - 1 keys: the
 * same keys the window leaves), y within 1e-5 of max|y|.  mask_hl: the
 * layer whose masks the calls take (another: its masks not checked). */
static void check_cached(const ra_hf_layer *hl, const ra_hf_layer *mask_hl, const fx_file *f,
                         int64_t layer)
{
    char key[64];
    const fx_tensor *x64 = fx_find(f, "x"), *tt = fx_find(f, "cached_token_type_ids");
    snprintf(key, sizeof key, "cached_y%lld", (long long)layer);
    const fx_tensor *y64 = fx_find(f, key);
    const ra_layer *l = ra_hf_layer_get(hl);
    const int64_t B = x64->shape[0], S = x64->shape[1], dim = x64->shape[2], n = x64->count;
    float *x = malloc(n * sizeof *x), *y = calloc(n, sizeof *y);
    float *xs = malloc(n * sizeof *xs), *ys = malloc(n * sizeof *ys);
    int64_t *types = malloc(B * S * sizeof *types);
    uint8_t *m = malloc(B * S * S);
    ra_kv_cache *cache = NULL;
    CHECK(ra_kv_cache_create(&cache, B, S, 2, 8, RA_F32) == RA_OK, "%s", ra_last_error());
    const int64_t chunks[4] = {7, 3, 1, 1};
    for (int64_t c = 0, start = 0; cache && c < 4; start += chunks[c++]) {
        const int64_t len = chunks[c], end = start + len;
        for (int64_t b = 0; b < B; b++) {
            memcpy(types + b * end, tt->i64 + b * S, end * sizeof *types);
            for (int64_t i = 0; i < len * dim; i++)
                xs[b * len * dim + i] = (float)x64->f64[(b * S + start) * dim + i];
        }
        CHECK(ra_hf_token_type_mask_cached(mask_hl, types, NULL, B, start, len, m) == RA_OK,
              "%s", ra_hf_last_error());
        snprintf(key, sizeof key, "cached_mask%lld_c%lld", (long long)layer, (long long)c);
        const fx_tensor *want = fx_find(f, key);
        int64_t bad = 0;
        for (int64_t i = 0; mask_hl == hl && i < B * len * end; i++) bad += m[i] != want->i64[i];
        CHECK(bad == 0, "%s: %lld elements differ from transformers'", key, (long long)bad);
        ra_tensor mask = ra_tensor_4d(m, RA_BOOL, B, 1, len, end);
        ra_attention_options o = ra_attention_options_init();
        o.attn_mask = &mask;
        o.non_causal = 1;
        ra_status st = c < 2 ? ra_layer_forward_cached_mask(NULL, l, cache, ys, xs, B, len, NULL, &o)
                             : ra_layer_forward_cached(NULL, l, cache, ys, xs, B, len, NULL);
        CHECK(st == RA_OK, "%s: %s", key, ra_last_error());
        for (int64_t b = 0; b < B; b++)
            memcpy(y + (b * S + start) * dim, ys + b * len * dim, len * dim * sizeof *y);
    }
    const double ey = rel_err(y, y64->f64, n);
    CHECK(ey <= 1e-5, "cached layer %lld: y %.3g of max|y|", (long long)layer, ey);
    if (ra_test_isa == (int)ra_cpu_isa_max())
        printf("cached layer %lld%s: chunks of 7 and 3, two steps: y %.2g of max|y| from "
               "transformers (float64)\n", (long long)layer,
               mask_hl != hl ? " (the full layer's masks)" : "", ey);
    /* a window cache holds its keys in a ring: a masked call only into an empty one */
    ra_kv_cache_destroy(cache);
    cache = NULL;
    if (layer == 0 && mask_hl == hl && ra_kv_cache_create_window(&cache, B, 4, 7, 2, 8, RA_F32) == RA_OK) {
        ra_tensor mask = ra_tensor_4d(m, RA_BOOL, B, 1, 1, 8);
        ra_attention_options o = ra_attention_options_init();
        o.attn_mask = &mask;
        o.non_causal = 1;
        CHECK(ra_layer_forward_cached_mask(NULL, l, cache, ys, xs, B, 7, NULL, &o) == RA_ERR_SHAPE,
              "a mask of 8 keys for 7: %s", ra_last_error());
        mask = ra_tensor_4d(m, RA_BOOL, B, 1, 7, 7);
        CHECK(ra_layer_forward_cached_mask(NULL, l, cache, ys, xs, B, 7, NULL, &o) == RA_OK,
              "masked prefill into a window cache: %s", ra_last_error());
        mask = ra_tensor_4d(m, RA_BOOL, B, 1, 1, 8);
        CHECK(ra_layer_forward_cached_mask(NULL, l, cache, ys, xs, B, 1, NULL, &o) ==
                  RA_ERR_UNSUPPORTED && strstr(ra_last_error(), "window cache"), "%s",
              ra_last_error());
        o.non_causal = 0;
        o.window = 2;
        CHECK(ra_layer_forward_cached_mask(NULL, l, cache, ys, xs, B, 1, NULL, &o) ==
                  RA_ERR_ARGUMENT, "options' window: %s", ra_last_error());
        CHECK(ra_layer_forward_cached_mask(NULL, l, cache, ys, xs, B, 1, NULL, NULL) ==
                  RA_ERR_NULL, "options NULL");
    }
    ra_kv_cache_destroy(cache);
    free(x), free(y), free(xs), free(ys), free(types), free(m);
}

static void check_layer(int64_t layer, const fx_file *f)
{
    ra_hf_layer *hl = open_layer(layer, 1, RA_OK);
    if (!hl) return;
    char key[32];
    snprintf(key, sizeof key, "mask%lld", (long long)layer);
    check_mask(hl, f, "token_type_ids", "attention_mask", key);
    snprintf(key, sizeof key, "left_mask%lld", (long long)layer);
    check_mask(hl, f, "left_token_type_ids", "left_attention_mask", key);
    snprintf(key, sizeof key, "long_mask%lld", (long long)layer);
    check_mask(hl, f, "long_token_type_ids", "attention_mask", key);
    check_forward(hl, hl, f, layer, "token_type_ids", "");
    check_forward(hl, hl, f, layer, "long_token_type_ids", "long_"); /* a block longer than W */
    check_cached(hl, hl, f, layer);
    ra_hf_layer_destroy(hl);
}

/* The full layer's masks (no window) reused on the sliding layer, as a
 * port making one mask for every layer does: the sliding layer keeps its
 * window's bound on earlier keys, transformers' sliding result. */
static void check_reused(const fx_file *f)
{
    ra_hf_layer *sliding = open_layer(0, 1, RA_OK), *full = open_layer(1, 1, RA_OK);
    if (sliding && full) {
        check_forward(sliding, full, f, 0, "token_type_ids", "");
        check_forward(sliding, full, f, 0, "long_token_type_ids", "long_");
        check_cached(sliding, full, f, 0);
    }
    ra_hf_layer_destroy(full);
    ra_hf_layer_destroy(sliding);
}

static void test_layers(void)
{
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/fixture.bin", fixture_dir);
    fx_file f;
    if (fx_load(&f, path, err, sizeof err) != 0) {
        CHECK(0, "%s", err);
        return;
    }
    check_layer(0, &f);
    check_layer(1, &f);
    check_reused(&f);
    fx_free(&f);
}

static void test_refused(void)
{
    /* a layer without token_types */
    ra_hf_layer *hl = open_layer(1, 0, RA_OK);
    int64_t tt[6] = {0, 1, 1, 1, 1, 1};
    uint8_t m[36];
    CHECK(ra_hf_token_type_mask(hl, tt, NULL, 1, 6, m) == RA_ERR_ARGUMENT &&
              strstr(ra_hf_last_error(), "token_types"), "%s", ra_hf_last_error());
    ra_hf_layer_destroy(hl);
    /* a block of 5 on the sliding layer (window 4): its first query sees
     * the block's later keys, its last not the first (transformers') */
    hl = open_layer(0, 1, RA_OK);
    CHECK(ra_hf_token_type_mask(hl, tt, NULL, 1, 6, m) == RA_OK, "%s", ra_hf_last_error());
    CHECK(m[1 * 6 + 5] && !m[5 * 6 + 1] && m[5 * 6 + 2] && !m[0 * 6 + 1], "block of 5");
    /* non_causal without a mask: the layer's call refuses it, naming it */
    float x[6 * 32] = {0}, y[6 * 32];
    ra_attention_options ao = ra_attention_options_init();
    ao.non_causal = 1;
    CHECK(ra_layer_forward(NULL, ra_hf_layer_get(hl), y, x, 1, 6, NULL, &ao) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "without an attn_mask"), "%s", ra_last_error());
    /* a mask without non_causal: the causal mask would cut the blocks' later keys */
    ra_tensor tm = ra_tensor_4d(m, RA_BOOL, 1, 1, 6, 6);
    ao.attn_mask = &tm;
    ao.non_causal = 0;
    CHECK(ra_layer_forward(NULL, ra_hf_layer_get(hl), y, x, 1, 6, NULL, &ao) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "without non_causal"), "%s", ra_last_error());
    CHECK(ra_hf_token_type_mask(hl, tt, NULL, 0, 6, m) == RA_ERR_ARGUMENT, "batch 0");
    CHECK(ra_hf_token_type_mask(hl, NULL, NULL, 1, 6, m) == RA_ERR_NULL, "NULL");
    ra_hf_layer_destroy(hl);
    /* another family */
    ra_hf_checkpoint *ckpt = NULL;
    ra_hf_config *config = NULL;
    CHECK(ra_hf_checkpoint_open(&ckpt, "tests/hf/gemma3_window/model.safetensors") == RA_OK,
          "%s", ra_hf_last_error());
    CHECK(ra_hf_config_open(&config, "tests/hf/gemma3_window/config.json") == RA_OK, "%s",
          ra_hf_last_error());
    ra_hf_options o = ra_hf_options_init();
    o.token_types = 1;
    o.layer = 0;
    hl = NULL;
    CHECK(ckpt && config && ra_hf_layer_create(&hl, ckpt, config, &o) == RA_ERR_UNSUPPORTED &&
              !hl && strstr(ra_hf_last_error(), "token_type_ids"), "%s", ra_hf_last_error());
    o.vision = 1;
    CHECK(ckpt && ra_hf_layer_create(&hl, ckpt, config, &o) == RA_ERR_UNSUPPORTED && !hl &&
              strstr(ra_hf_last_error(), "vision"), "%s", ra_hf_last_error());
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);
}

static void each_isa(void)
{
    RUN(test_layers);
}

int main(int argc, char **argv)
{
    if (argc > 1) fixture_dir = argv[1];
    ra_test_each_isa(each_isa);
    RUN(test_refused);
    return ra_test_summary("hf_token_types");
}
