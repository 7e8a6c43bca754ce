/*
 * kvcache_common.h — what the KV-cache tests share (test_kvcache.c,
 * test_kvcache8.c): appending rows at RoPE position 0 (the identity, so a
 * cache holds k and v themselves), the reference rows of a sequence, and
 * the mask cases of decode.  Include after harness.h.
 */
#ifndef RA_TEST_KVCACHE_COMMON_H
#define RA_TEST_KVCACHE_COMMON_H

#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

/* Appends n_new[b] tokens of each sequence, rows from[b] .. of the
 * [B, S, Hkv, D] arrays k and v, at RoPE position 0 (the identity: the cache
 * then holds k and v themselves).  T: the most any sequence takes. */
static ra_status append_rows(ra_kv_cache *cache, const float *k, const float *v, int64_t B,
                             int64_t S, int64_t hkv, int64_t d, const int64_t *from,
                             const int64_t *n_new, int64_t T)
{
    float *kt = calloc((size_t)(B * T * hkv * d), 4), *vt = calloc((size_t)(B * T * hkv * d), 4);
    int64_t *zeros = calloc((size_t)(B * T), 8);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < n_new[b]; t++) {
            memcpy(kt + (b * T + t) * hkv * d, k + (b * S + from[b] + t) * hkv * d, 4 * hkv * d);
            memcpy(vt + (b * T + t) * hkv * d, v + (b * S + from[b] + t) * hkv * d, 4 * hkv * d);
        }
    ra_rope_config rc = ra_rope_config_default(d);
    rc.table_size = 1; /* position 0 only */
    ra_rope *rope;
    ra_status st = ra_rope_create(&rope, &rc);
    ra_tensor tk = ra_tensor_4d(kt, RA_F32, B, T, hkv, d), tv = ra_tensor_4d(vt, RA_F32, B, T, hkv, d);
    ra_positions at = ra_positions_start(0);
    at.ids = zeros;
    if (st == RA_OK) st = ra_kv_cache_append(cache, NULL, rope, NULL, &tk, &tv, &at, n_new);
    ra_rope_destroy(rope);
    free(kt); free(vt); free(zeros);
    return st;
}

/* The reference rows of one sequence: ra_attention on the reference path
 * over its first len tokens, with opts' masks (NULL: none).
 *   q, out: [len, H, D]   k, v: [len, Hkv, D] f32 */
static void reference_rows(float *out, const float *q, const float *k, const float *v,
                           int64_t len, int64_t h, int64_t hkv, int64_t d,
                           const ra_attention_options *opts)
{
    ra_attention_options o = opts ? *opts : ra_attention_options_init();
    o.path = RA_PATH_REFERENCE;
    ra_tensor tq = ra_tensor_4d((void *)q, RA_F32, 1, len, h, d);
    ra_tensor tk = ra_tensor_4d((void *)k, RA_F32, 1, len, hkv, d);
    ra_tensor tv = ra_tensor_4d((void *)v, RA_F32, 1, len, hkv, d);
    ra_tensor to = ra_tensor_4d(out, RA_F32, 1, len, h, d);
    CHECK(ra_attention(NULL, &to, &tq, &tk, &tv, &o) == RA_OK, "reference: %s", ra_last_error());
}

typedef struct mask_case {
    int64_t window, chunk;
    double softcap, scale;
    int sinks; /* nonzero: one sink logit per head, in [-1, 3) */
} mask_case;

static ra_attention_options mask_options(const mask_case *mc, const float *sinks)
{
    ra_attention_options o = ra_attention_options_init();
    o.window = mc->window;
    o.chunk = mc->chunk;
    o.softcap = mc->softcap;
    o.scale = mc->scale;
    o.sinks = mc->sinks ? sinks : NULL;
    return o;
}

#endif
