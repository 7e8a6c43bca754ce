/*
 * vision_windows.c — Qwen2.5-VL's window attention, as transformers'
 * Qwen2_5_VisionTransformerPretrainedModel runs it: the layers not in
 * vision_config.fullatt_block_indexes attend inside windows.  Its forward
 * permutes the patches (and their rotary positions) by window_index in
 * groups of spatial_merge_size^2 (permute_input_for_window_attn), once,
 * before block 0; every block then sees them in that order, the full layers
 * with the frames as documents (cu_seqlens), the window layers with the
 * windows (cu_window_seqlens).  vision_utils.get_vision_window_index, per
 * image (t, h, w) of grid_thw, in merged units (h / m, w / m):
 *
 *   vws    = window_size // m // patch_size
 *   index  = arange(t * lh * lw).reshape(t, lh, lw) + (the images before)
 *   pad_h  = vws - lh % vws  (a whole window of -100 where vws divides lh)
 *   windows of vws x vws units, row-major over (window row, window column),
 *   each row-major inside; -100 entries dropped;
 *   cu_window_seqlens += running sum of each window's units * m^2,
 *   then unique_consecutive (the empty windows' repeats dropped).
 */
#include <stdio.h>
#include <string.h>

#include "hf/hf.h"

/* transformers' Qwen2_5_VLVisionConfig defaults */
static const int64_t default_fullatt[4] = {7, 15, 23, 31};

ra_status hf_vision_layer_windowed(const ra_hf_config *config, int64_t layer, int *windowed)
{
    const char *type;
    RA_HF_TRY(hf_vision_model_type(config, &type));
    *windowed = 0;
    if (strcmp(type, "qwen2_5_vl_vision") != 0) return RA_OK;
    const char *key = "/vision_config/fullatt_block_indexes";
    int64_t n = 4;
    ra_status st = ra_hf_config_length(config, key, &n);
    if (st != RA_OK && st != RA_ERR_NOT_FOUND) return st;
    const int given = st == RA_OK;
    hf_reset(); /* absent: the default, no failure */
    for (int64_t i = 0; i < n; i++) {
        int64_t v = default_fullatt[i];
        char at[80];
        snprintf(at, sizeof at, "%s/%lld", key, (long long)i);
        if (given && (st = ra_hf_config_int(config, at, &v)) != RA_OK) return st;
        if (v == layer) return RA_OK;
    }
    *windowed = 1;
    return RA_OK;
}

RA_HF_API ra_status ra_hf_vision_layer_windowed(const ra_hf_config *config, int64_t layer,
                                                int64_t *windowed)
{
    hf_reset();
    if (!config || !windowed)
        return hf_fail(RA_ERR_NULL, "ra_hf_vision_layer_windowed: %s is NULL",
                       !config ? "config" : "windowed");
    if (layer < 0)
        return hf_fail(RA_ERR_ARGUMENT, "ra_hf_vision_layer_windowed: layer %lld",
                       (long long)layer);
    int w;
    RA_HF_TRY(hf_vision_layer_windowed(config, layer, &w));
    *windowed = w;
    return RA_OK;
}

/* vision_config's positive integer key (absent: fallback). */
static ra_status vision_int(const ra_hf_config *config, const char *name, int64_t fallback,
                            int64_t *out)
{
    char key[64];
    snprintf(key, sizeof key, "/vision_config/%s", name);
    *out = fallback;
    ra_status st = ra_hf_config_int(config, key, out);
    if (st == RA_ERR_NOT_FOUND) {
        hf_reset(); /* absent: the class default, no failure */
        *out = fallback;
        return RA_OK;
    }
    if (st != RA_OK) return st; /* named there */
    if (*out <= 0)
        return hf_fail(RA_ERR_FORMAT, "%s: \"vision_config.%s\" must be a positive integer",
                       config->path, name);
    return RA_OK;
}

/* The grid, checked: t, h, w >= 1, h and w multiples of m, at most
 * INT32_MAX patches in all (transformers' cu_window_seqlens are int32). */
static ra_status check_grid(const int64_t *grid, int64_t n_images, int64_t m,
                            int64_t *n_patches)
{
    int64_t total = 0;
    for (int64_t i = 0; i < n_images; i++) {
        const int64_t t = grid[3 * i], h = grid[3 * i + 1], w = grid[3 * i + 2];
        if (t < 1 || h < 1 || w < 1 || t > INT32_MAX || h > INT32_MAX || w > INT32_MAX)
            return hf_fail(RA_ERR_ARGUMENT, "ra_hf_vision_windows: grid_thw[%lld] = (%lld, "
                           "%lld, %lld): each of t, h, w must be in [1, INT32_MAX]",
                           (long long)i, (long long)t, (long long)h, (long long)w);
        if (h % m || w % m)
            return hf_fail(RA_ERR_ARGUMENT, "ra_hf_vision_windows: grid_thw[%lld] = (%lld, "
                           "%lld, %lld): h and w must be multiples of vision_config's "
                           "spatial_merge_size %lld", (long long)i, (long long)t, (long long)h,
                           (long long)w, (long long)m);
        if (h * w > INT32_MAX / t || t * h * w > INT32_MAX - total)
            return hf_fail(RA_ERR_ARGUMENT, "ra_hf_vision_windows: more than INT32_MAX "
                           "patches (grid_thw up to image %lld)", (long long)i);
        total += t * h * w;
    }
    *n_patches = total;
    return RA_OK;
}

ra_status hf_vision_window_size(const ra_hf_config *config, int64_t *patches, int64_t *vws,
                                int64_t *m)
{
    const char *type;
    RA_HF_TRY(hf_vision_model_type(config, &type));
    if (strcmp(type, "qwen2_5_vl_vision") != 0)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: a vision encoder of model_type \"%s\" has no "
                       "window attention (Qwen2.5-VL's, qwen2_5_vl_vision, has)", config->path,
                       type);
    int64_t window, patch;
    RA_HF_TRY(vision_int(config, "window_size", 112, &window));
    RA_HF_TRY(vision_int(config, "patch_size", 14, &patch));
    RA_HF_TRY(vision_int(config, "spatial_merge_size", 2, m));
    *vws = window / *m / patch; /* vit_merger_window_size */
    if (*vws < 1)
        return hf_fail(RA_ERR_UNSUPPORTED, "%s: vision_config's window_size %lld // "
                       "spatial_merge_size %lld // patch_size %lld is 0: transformers' "
                       "get_vision_window_index divides by it", config->path, (long long)window,
                       (long long)*m, (long long)patch);
    if (*m > 46340)
        return hf_fail(RA_ERR_FORMAT, "%s: vision_config's spatial_merge_size %lld is beyond "
                       "46340 (its square, the patches of a merged unit, beyond INT32_MAX)",
                       config->path, (long long)*m);
    /* a window's side in patches, vws m, squared; 3037000499^2 < INT64_MAX */
    const int64_t side = *vws > 3037000499 / *m ? 0 : *vws * *m;
    if (patches) *patches = side ? side * side : INT64_MAX;
    return RA_OK;
}

/* Each non-NULL array's capacity (counts on entry, have) against what
 * these images need: RA_ERR_SIZE naming the first too small. */
static ra_status check_capacity(const int64_t have[3], const int64_t need[3],
                                const int64_t *window_index, const int64_t *cu_window_seqlens,
                                const int64_t *positions)
{
    const char *small = window_index && have[1] < need[1]             ? "window_index"
                        : cu_window_seqlens && have[2] < need[2]      ? "cu_window_seqlens"
                        : positions && have[0] < need[0]              ? "positions"
                                                                      : NULL;
    if (!small) return RA_OK;
    return hf_fail(RA_ERR_SIZE, "ra_hf_vision_windows: %s too small: counts on entry (the "
                   "arrays' sizes) %lld, %lld, %lld; these images need %lld, %lld, %lld",
                   small, (long long)have[0], (long long)have[1], (long long)have[2],
                   (long long)need[0], (long long)need[1], (long long)need[2]);
}

/* The windows of frame f of an image of lh x lw merged units: for each
 * window of vws x vws units, row-major, its units row-major (those past
 * the frame's edge dropped); *groups and *windows counted on, *cu the
 * patches so far; the arrays written where given (NULL: only counted). */
static void frame_windows(int64_t f, int64_t lh, int64_t lw, int64_t vws, int64_t m,
                          int64_t base, int64_t *groups, int64_t *windows, int64_t *cu,
                          int64_t *window_index, int64_t *cu_window_seqlens, int64_t *positions)
{
    const int64_t unit = m * m; /* spatial_merge_unit */
    /* transformers pads lh to lh + vws - lh % vws: lh / vws + 1 window rows */
    const int64_t nwh = lh / vws + 1, nww = lw / vws + 1;
    for (int64_t wy = 0; wy < nwh; wy++)
        for (int64_t wx = 0; wx < nww; wx++) {
            int64_t units = 0;
            for (int64_t r = wy * vws; r < lh && r - wy * vws < vws; r++)
                for (int64_t c = wx * vws; c < lw && c - wx * vws < vws; c++, units++) {
                    const int64_t src = f * lh * lw + r * lw + c; /* in the image */
                    if (window_index) window_index[*groups] = base + src;
                    for (int64_t j = 0; positions && j < unit; j++) {
                        /* get_vision_position_ids: block-major (r, c), then
                         * (j / m, j % m) inside the block */
                        int64_t *p = positions + 2 * (*groups * unit + j);
                        p[0] = r * m + j / m;
                        p[1] = c * m + j % m;
                    }
                    ++*groups;
                }
            if (!units) continue; /* all -100: unique_consecutive drops it */
            *cu += units * unit;
            ++*windows;
            if (cu_window_seqlens) cu_window_seqlens[*windows] = *cu;
        }
}

RA_HF_API ra_status ra_hf_vision_windows(const ra_hf_config *config, const int64_t *grid_thw,
                                         int64_t n_images, int64_t counts[3],
                                         int64_t *window_index, int64_t *cu_window_seqlens,
                                         int64_t *positions)
{
    hf_reset();
    if (!config || !grid_thw || !counts)
        return hf_fail(RA_ERR_NULL, "ra_hf_vision_windows: %s is NULL",
                       !config ? "config" : !grid_thw ? "grid_thw" : "counts");
    if (n_images < 1)
        return hf_fail(RA_ERR_ARGUMENT, "ra_hf_vision_windows: n_images %lld (at least one "
                       "image)", (long long)n_images);
    int64_t vws, m;
    RA_HF_TRY(hf_vision_window_size(config, NULL, &vws, &m));
    int64_t n_patches = 0;
    RA_HF_TRY(check_grid(grid_thw, n_images, m, &n_patches));
    /* the counts, then (arrays given) their capacities checked, then the arrays */
    int64_t need[3] = {n_patches, n_patches / (m * m), 0}, base = 0, groups = 0, cu = 0;
    for (int64_t i = 0; i < n_images; i++) {
        const int64_t lh = grid_thw[3 * i + 1] / m, lw = grid_thw[3 * i + 2] / m;
        for (int64_t f = 0; f < grid_thw[3 * i]; f++)
            frame_windows(f, lh, lw, vws, m, 0, &groups, &need[2], &cu, NULL, NULL, NULL);
    }
    if (window_index || cu_window_seqlens || positions)
        RA_HF_TRY(check_capacity(counts, need, window_index, cu_window_seqlens, positions));
    groups = cu = 0;
    int64_t windows = 0;
    if (cu_window_seqlens) cu_window_seqlens[0] = 0;
    for (int64_t i = 0; i < n_images && (window_index || cu_window_seqlens || positions); i++) {
        const int64_t t = grid_thw[3 * i], lh = grid_thw[3 * i + 1] / m,
                      lw = grid_thw[3 * i + 2] / m;
        for (int64_t f = 0; f < t; f++)
            frame_windows(f, lh, lw, vws, m, base, &groups, &windows, &cu, window_index,
                          cu_window_seqlens, positions);
        base += t * lh * lw;
    }
    memcpy(counts, need, sizeof need);
    return RA_OK;
}
