/*
 * kvcache8.c — the 8-bit KV caches' scales: their storage, fp8's setter,
 * and the store of one quantized row (formats: quant8.h; the header's "KV
 * cache and decoding" says what a user sees).
 *
 *   RA_I8 scales: [B, Hkv, capacity] for K and for V, a row's beside its
 *   codes (head-major, as the codes: decode reads both as sequential runs)
 *   RA_F8E4M3 scales: [Hkv] for K and for V
 */
#include <float.h>

#include "kvcache_internal.h"

ra_status ra_kv_cache_scales_alloc(ra_kv_cache *cache, int64_t rows)
{
    if (!ra_dtype_is_cache8(cache->dtype)) return RA_OK;
    const int64_t n = cache->dtype == RA_I8 ? rows : cache->n_kv_heads;
    cache->k_scale = ra_alloc((size_t)n * sizeof(float));
    /* a latent cache's rows are its keys and its values: one set of scales */
    cache->v_scale = cache->k_scale && !cache->latent ? ra_alloc((size_t)n * sizeof(float))
                                                      : cache->k_scale;
    if (!cache->v_scale) return RA_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) cache->k_scale[i] = cache->v_scale[i] = 1.0f;
    return RA_OK;
}

void ra_kv_cache_store8(ra_kv_cache *cache, int which, int64_t b, int64_t g, int64_t slot,
                        void *to, const float *x)
{
    float *scales = (float *)ra_kv_cache_scales(cache, which, b, g);
    if (cache->dtype == RA_I8)
        scales[slot] = ra_quantize_i8(to, x, cache->head_dim);
    else if (ra_quantize_e4m3(to, x, scales[0], cache->head_dim))
        __atomic_store_n(&cache->nan_codes, 1, __ATOMIC_RELAXED);
}

RA_API ra_status ra_kv_cache_set_scales(ra_kv_cache *cache, const float *k_scales,
                                        const float *v_scales, int64_t n_scales)
{
    ra_error_reset();
    if (!cache || !k_scales || !v_scales)
        return ra_fail(RA_ERR_NULL, "%s is NULL", !cache ? "cache" : !k_scales ? "k_scales"
                                                                               : "v_scales");
    if (cache->dtype != RA_F8E4M3)
        return ra_fail(RA_ERR_DTYPE, "ra_kv_cache_set_scales: the cache is not RA_F8E4M3 (an "
                       "int8 cache's scales are each row's own, set as it is appended)");
    if (n_scales != 1 && n_scales != cache->n_kv_heads)
        return ra_fail(RA_ERR_ARGUMENT, "n_scales %lld: must be 1 or the cache's %lld kv heads",
                       (long long)n_scales, (long long)cache->n_kv_heads);
    for (int64_t b = 0; b < cache->batch; b++)
        if (cache->length[b])
            return ra_fail(RA_ERR_ARGUMENT, "sequence %lld holds %lld tokens, quantized with "
                           "the scales set before: reset the cache first", (long long)b,
                           (long long)cache->length[b]);
    if (cache->latent)
        for (int64_t i = 0; i < n_scales; i++)
            if (k_scales[i] != v_scales[i])
                return ra_fail(RA_ERR_ARGUMENT, "a latent cache's rows are its keys and its "
                               "values: k_scales[%lld] %g and v_scales[%lld] %g must be equal",
                               (long long)i, (double)k_scales[i], (long long)i,
                               (double)v_scales[i]);
    RA_TRY(ra_e4m3_scales_check(k_scales, v_scales, n_scales));
    for (int64_t g = 0; g < cache->n_kv_heads; g++) {
        cache->k_scale[g] = k_scales[n_scales == 1 ? 0 : g];
        cache->v_scale[g] = v_scales[n_scales == 1 ? 0 : g];
    }
    return RA_OK;
}
