/*
 * test_hf_vision.c — the attention layers of vision encoders from their
 * checkpoints (ra_hf_options.vision): Pixtral, Qwen2-VL, Qwen2.5-VL and
 * Llama 4, each a tiny checkpoint saved with its model's tensor names and
 * run by transformers' own attention module in float64
 * (tests/fixtures/make_vision_fixtures.py):
 *   - y, dL/dx and every tensor's gradient (ra_hf_grads_tensor) against
 *     transformers', relative to max|ref|, within 1e-5 (float32 sums over
 *     at most 48 features and 23 keys: ~1e-7 seen on the text layers'
 *     cases; the issue asks 1e-4), images packed as the call's documents
 *     (cu_seqlens), positions (row, column) as ra_positions.axial_ids;
 *   - Qwen2.5-VL's window-attention layer (ra_hf_options.vision_windows):
 *     block 0 of a tower of two, its inputs captured from transformers'
 *     forward (patches in window order, cu_window_seqlens as documents),
 *     three images whose windows are cut by the frame's edges or empty;
 *     ra_hf_vision_windows' window_index, cu_window_seqlens and positions
 *     equal to transformers' (get_vision_window_index, the positions the
 *     tower's rotary tables come from), and its refusals: arrays smaller
 *     than the counts given on entry (RA_ERR_SIZE, nothing written), and
 *     window_size 2^53 - 1 computed without overflow (one window a
 *     frame); the layer's max_document (the largest window's patches)
 *     refusing a call without documents or with whole frames;
 *   - refused, naming what: no layer, a text layer's options, a layer the
 *     checkpoint lacks, a window layer without vision_windows (and
 *     vision_windows on a full one, or without vision), a tensor the
 *     module has no place for, a missing bias, tensors of another width
 *     than the config's, no vision_config.
 * Measured, every SIMD path: y within 1.4e-7 (Pixtral), 4.8e-7 (Qwen2-VL),
 * 2e-7 (Qwen2.5-VL), 4.7e-7 (Llama 4), 2.8e-7 (Qwen2.5-VL's window layer)
 * of transformers', the gradients within 3.5e-7, 8.1e-7, 4.4e-7, 7.5e-7,
 * 5e-7.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "ropeattn.h"
#include "ropeattn_hf.h"

static const char *fixture_dir = "tests/fixtures/vision";

static ra_status open_case(const char *name, ra_hf_checkpoint **ckpt, ra_hf_config **config)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/model.safetensors", fixture_dir, name);
    ra_status st = ra_hf_checkpoint_open(ckpt, path);
    CHECK(st == RA_OK, "%s: %s", name, ra_hf_last_error());
    if (st != RA_OK) return st;
    snprintf(path, sizeof path, "%s/%s/config.json", fixture_dir, name);
    st = ra_hf_config_open(config, path);
    CHECK(st == RA_OK, "%s: %s", name, ra_hf_last_error());
    if (st != RA_OK) ra_hf_checkpoint_close(*ckpt);
    return st;
}

/* Worst |a - b| / max|b| of float32 a against float64 b. */
static double rel_err(const float *a, const double *b, int64_t n)
{
    double diff = 0, ref = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        diff = fmax(diff, fabs(a[i] - b[i]));
        ref = fmax(ref, fabs(b[i]));
    }
    return ref > 0 ? diff / ref : diff;
}

static void run_layer(const char *name, const ra_hf_layer *hl, const fx_file *f)
{
    const fx_tensor *x64 = fx_find(f, "x"), *y64 = fx_find(f, "y"), *dy64 = fx_find(f, "dy"),
                    *dx64 = fx_find(f, "dx"), *pos = fx_find(f, "positions"),
                    *cu = fx_find(f, "cu_seqlens");
    const ra_layer *layer = ra_hf_layer_get(hl);
    const int64_t S = x64->shape[0], n = x64->count;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *dy = malloc(n * sizeof *dy),
          *dx = malloc(n * sizeof *dx);
    for (int64_t i = 0; i < n; i++) x[i] = (float)x64->f64[i], dy[i] = (float)dy64->f64[i];
    ra_positions p = ra_positions_start(0);
    p.axial_ids = pos->i64;
    ra_attention_options o = ra_attention_options_init();
    o.cu_seqlens = cu->i64;
    o.n_documents = cu->count - 1;
    CHECK(ra_layer_forward(NULL, layer, y, x, 1, S, &p, &o) == RA_OK, "%s: forward: %s", name,
          ra_last_error());
    double e = rel_err(y, y64->f64, n);
    CHECK(e <= 1e-5, "%s: y %.3g of max|y|", name, e);
    const int say = ra_test_isa == (int)ra_cpu_isa_max(); /* once: the best path's */
    if (say) printf("%s: y %.2g of max|y| from transformers (float64)\n", name, e);
    ra_layer_tape *tape;
    ra_hf_grads *g;
    CHECK(ra_layer_tape_create(&tape, layer, S) == RA_OK, "%s: tape", name);
    CHECK(ra_hf_grads_create(&g, hl) == RA_OK, "%s: grads", name);
    const int ran = ra_layer_forward_train(NULL, layer, y, tape, x, 1, S, &p, &o) == RA_OK &&
                    ra_layer_backward(NULL, layer, dx, ra_hf_grads_get(g), tape, dy) == RA_OK;
    CHECK(ran, "%s: backward: %s", name, ra_last_error());
    for (int64_t i = 0; !ran && i < n; i++) dx[i] = NAN; /* compared as failed */
    e = rel_err(dx, dx64->f64, n);
    CHECK(e <= 1e-5, "%s: dx %.3g of max|dx|", name, e);
    double worst = e;
    for (int64_t i = 0; i < ra_hf_layer_tensor_count(hl); i++) {
        char key[300];
        snprintf(key, sizeof key, "d:%s", ra_hf_layer_tensor_name(hl, i));
        const fx_tensor *want = fx_find(f, key);
        CHECK(want != NULL, "%s: no gradient %s in the fixture", name, key);
        if (!want) continue;
        e = ran ? rel_err(ra_hf_grads_tensor(g, i), want->f64, want->count) : INFINITY;
        CHECK(e <= 1e-5, "%s: %s %.3g of max", name, key, e);
        worst = fmax(worst, e);
    }
    if (say)
        printf("%s: gradients %.2g of max from transformers' autograd (float64)\n", name, worst);
    ra_hf_grads_destroy(g);
    ra_layer_tape_destroy(tape);
    free(x), free(y), free(dy), free(dx);
}

static void check_case(const char *name, int64_t tensors, int windows)
{
    ra_hf_checkpoint *ckpt;
    ra_hf_config *config;
    if (open_case(name, &ckpt, &config) != RA_OK) return;
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s/fixture.bin", fixture_dir, name);
    fx_file f;
    const int loaded = fx_load(&f, path, err, sizeof err) == 0;
    CHECK(loaded, "%s", err);
    ra_hf_options o = ra_hf_options_init();
    o.vision = 1;
    o.layer = 0;
    o.vision_windows = windows;
    ra_hf_layer *hl = NULL;
    ra_status st = ra_hf_layer_create(&hl, ckpt, config, &o);
    CHECK(st == RA_OK, "%s: %s", name, ra_hf_last_error());
    if (hl) {
        CHECK(ra_hf_layer_tensor_count(hl) == tensors, "%s: %lld tensors", name,
              (long long)ra_hf_layer_tensor_count(hl));
        if (loaded) run_layer(name, hl, &f);
    }
    ra_hf_layer_destroy(hl);
    if (loaded) fx_free(&f);
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);
}

static void test_towers(void)
{
    check_case("pixtral", 4, 0);
    check_case("qwen2_vl", 4, 0);
    check_case("qwen2_5_vl", 4, 0);
    check_case("llama4", 8, 0);
    check_case("qwen2_5_vl_window", 4, 1);
}

/* ra_hf_vision_windows against transformers' (windows.bin, fixture.bin). */
static void test_windows(void)
{
    ra_hf_checkpoint *ckpt;
    ra_hf_config *config;
    const char *name = "qwen2_5_vl_window";
    if (open_case(name, &ckpt, &config) != RA_OK) return;
    char path[512], err[256];
    fx_file f, w;
    snprintf(path, sizeof path, "%s/%s/fixture.bin", fixture_dir, name);
    int loaded = fx_load(&f, path, err, sizeof err) == 0;
    CHECK(loaded, "%s", err);
    snprintf(path, sizeof path, "%s/%s/windows.bin", fixture_dir, name);
    const int loaded_w = fx_load(&w, path, err, sizeof err) == 0;
    CHECK(loaded_w, "%s", err);
    if (loaded && loaded_w) {
        const fx_tensor *grid = fx_find(&w, "grid_thw"), *index = fx_find(&w, "window_index"),
                        *cu = fx_find(&f, "cu_seqlens"), *pos = fx_find(&f, "positions");
        const int64_t n_images = grid->shape[0];
        int64_t counts[3] = {-1, -1, -1}, windowed = -1;
        CHECK(ra_hf_vision_windows(config, grid->i64, n_images, counts, NULL, NULL, NULL) ==
                  RA_OK, "counts: %s", ra_hf_last_error());
        CHECK(counts[0] == pos->shape[0] && counts[1] == index->count &&
                  counts[2] == cu->count - 1, "counts %lld %lld %lld", (long long)counts[0],
              (long long)counts[1], (long long)counts[2]);
        int64_t *wi = calloc(index->count, sizeof *wi), *cw = calloc(cu->count, sizeof *cw),
                *p = calloc(pos->count, sizeof *p);
        CHECK(ra_hf_vision_windows(config, grid->i64, n_images, counts, wi, cw, p) == RA_OK,
              "arrays: %s", ra_hf_last_error());
        CHECK(memcmp(wi, index->i64, index->count * sizeof *wi) == 0, "window_index");
        CHECK(memcmp(cw, cu->i64, cu->count * sizeof *cw) == 0, "cu_window_seqlens");
        CHECK(memcmp(p, pos->i64, pos->count * sizeof *p) == 0, "positions");
        free(wi), free(cw), free(p);
        CHECK(ra_hf_vision_layer_windowed(config, 0, &windowed) == RA_OK && windowed == 1,
              "layer 0 windowed");
        CHECK(ra_hf_vision_layer_windowed(config, 1, &windowed) == RA_OK && windowed == 0,
              "layer 1 full");
        /* refused, naming what */
        const int64_t odd[3] = {1, 5, 4}, zero[3] = {0, 2, 2};
        CHECK(ra_hf_vision_windows(config, odd, 1, counts, NULL, NULL, NULL) ==
                  RA_ERR_ARGUMENT && strstr(ra_hf_last_error(), "spatial_merge_size"),
              "h not a multiple: %s", ra_hf_last_error());
        CHECK(ra_hf_vision_windows(config, zero, 1, counts, NULL, NULL, NULL) ==
                  RA_ERR_ARGUMENT && strstr(ra_hf_last_error(), "grid_thw[0]"),
              "t 0: %s", ra_hf_last_error());
        CHECK(ra_hf_vision_windows(config, grid->i64, 0, counts, NULL, NULL, NULL) ==
                  RA_ERR_ARGUMENT, "no image");
        CHECK(ra_hf_vision_windows(config, NULL, 1, counts, NULL, NULL, NULL) == RA_ERR_NULL,
              "grid NULL");
        /* the two-call pattern with another grid: counts on entry are the arrays' sizes */
        const int64_t one_image[3] = {1, 4, 4};
        int64_t few[3] = {-1, -1, -1};
        CHECK(ra_hf_vision_windows(config, one_image, 1, few, NULL, NULL, NULL) == RA_OK &&
                  few[0] == 16 && few[1] == 4 && few[2] == 1, "one image's counts");
        int64_t small_index[4] = {-1, -1, -1, -1}, small_cu[2], small_pos[32];
        const int64_t kept[3] = {few[0], few[1], few[2]};
        CHECK(ra_hf_vision_windows(config, grid->i64, n_images, few, small_index, small_cu,
                                   small_pos) == RA_ERR_SIZE &&
                  strstr(ra_hf_last_error(), "window_index too small") &&
                  memcmp(few, kept, sizeof kept) == 0 && small_index[0] == -1,
              "arrays too small: %s", ra_hf_last_error());
        CHECK(ra_hf_vision_windows(config, grid->i64, n_images, few, NULL, NULL, small_pos) ==
                  RA_ERR_SIZE && strstr(ra_hf_last_error(), "positions too small"),
              "positions too small: %s", ra_hf_last_error());
        int64_t more[3] = {counts[0], counts[1], counts[2] - 1};
        CHECK(ra_hf_vision_windows(config, grid->i64, n_images, more, NULL, small_cu, NULL) ==
                  RA_ERR_SIZE && strstr(ra_hf_last_error(), "cu_window_seqlens too small"),
              "cu_window_seqlens too small: %s", ra_hf_last_error());
        const int64_t huge[3] = {65536, 65536, 65536};
        CHECK(ra_hf_vision_windows(config, huge, 1, counts, NULL, NULL, NULL) ==
                  RA_ERR_ARGUMENT && strstr(ra_hf_last_error(), "INT32_MAX"),
              "too many patches: %s", ra_hf_last_error());
    }
    if (loaded) fx_free(&f);
    if (loaded_w) fx_free(&w);
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);

    /* window_size smaller than a merged patch: vws 0; another tower */
    ra_hf_config *small, *pix;
    const char *json = "{\"model_type\": \"qwen2_5_vl\", \"vision_config\": {\"model_type\": "
                       "\"qwen2_5_vl\", \"window_size\": 27}}";
    CHECK(ra_hf_config_parse(&small, json, strlen(json)) == RA_OK, "parse");
    const int64_t one[3] = {1, 4, 4};
    int64_t counts[3];
    CHECK(ra_hf_vision_windows(small, one, 1, counts, NULL, NULL, NULL) == RA_ERR_UNSUPPORTED &&
              strstr(ra_hf_last_error(), "window_size 27"), "vws 0: %s", ra_hf_last_error());
    ra_hf_config_close(small);
    /* window_size 2^53 - 1 (the largest integer a config holds; INT64_MAX is
     * refused by the reader): one window a frame, no overflow */
    json = "{\"model_type\": \"qwen2_5_vl\", \"vision_config\": {\"model_type\": "
           "\"qwen2_5_vl\", \"window_size\": 9007199254740991}}";
    CHECK(ra_hf_config_parse(&small, json, strlen(json)) == RA_OK, "parse");
    const int64_t two[6] = {2, 4, 6, 1, 2, 2};
    int64_t cw[4] = {-1, -1, -1, -1};
    int64_t sizes[3] = {0, 0, 3};
    CHECK(ra_hf_vision_windows(small, two, 2, sizes, NULL, cw, NULL) == RA_OK &&
              sizes[0] == 52 && sizes[1] == 13 && sizes[2] == 3 && cw[1] == 24 && cw[2] == 48 &&
              cw[3] == 52, "window_size 2^53 - 1: %s", ra_hf_last_error());
    ra_hf_config_close(small);
    if (open_case("pixtral", &ckpt, &pix) != RA_OK) return;
    CHECK(ra_hf_vision_windows(pix, one, 1, counts, NULL, NULL, NULL) == RA_ERR_UNSUPPORTED &&
              strstr(ra_hf_last_error(), "no window attention"), "pixtral: %s",
          ra_hf_last_error());
    int64_t windowed = -1;
    CHECK(ra_hf_vision_layer_windowed(pix, 0, &windowed) == RA_OK && windowed == 0, "pixtral");
    ra_hf_config_close(pix);
    ra_hf_checkpoint_close(ckpt);
}

/* A window layer's ra_layer_config.max_document: the largest window's
 * patches, (window_size 8 // spatial_merge_size 2 // patch_size 2)^2 2^2 =
 * 16; a call without documents or with whole frames (60 patches) refused. */
static void test_window_bound(void)
{
    ra_hf_checkpoint *ckpt;
    ra_hf_config *config;
    if (open_case("qwen2_5_vl_window", &ckpt, &config) != RA_OK) return;
    ra_hf_options o = ra_hf_options_init();
    o.vision = 1, o.layer = 0, o.vision_windows = 1;
    ra_hf_layer *hl = NULL;
    CHECK(ra_hf_layer_create(&hl, ckpt, config, &o) == RA_OK, "%s", ra_hf_last_error());
    if (hl) {
        const ra_layer *layer = ra_hf_layer_get(hl);
        CHECK(ra_layer_get_config(layer)->max_document == 16, "max_document %lld",
              (long long)ra_layer_get_config(layer)->max_document);
        enum { N = 96, DIM = 48 };
        static float x[N * DIM], y[N * DIM];
        ra_test_fill(x, N * DIM, 1);
        for (int i = 0; i < N * DIM; i++) y[i] = -7.0f;
        static int64_t ids[N * 2]; /* any positions: refused before they matter */
        ra_positions p = ra_positions_start(0);
        p.axial_ids = ids;
        ra_attention_options frames = ra_attention_options_init();
        const int64_t cu[5] = {0, 60, 76, 92, 96}; /* transformers' cu_seqlens */
        frames.cu_seqlens = cu, frames.n_documents = 4;
        CHECK(ra_layer_forward(NULL, layer, y, x, 1, N, &p, NULL) == RA_ERR_ARGUMENT &&
                  strstr(ra_last_error(), "max_document 16"), "no documents: %s",
              ra_last_error());
        CHECK(ra_layer_forward(NULL, layer, y, x, 1, N, &p, &frames) == RA_ERR_ARGUMENT &&
                  strstr(ra_last_error(), "document 0 holds 60"), "frames: %s",
              ra_last_error());
        int written = 0;
        for (int i = 0; i < N * DIM; i++) written |= y[i] != -7.0f;
        CHECK(!written, "nothing written");
    }
    ra_hf_layer_destroy(hl);
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);
}

static int refused(const char *name, ra_hf_options o, ra_status want, const char *says)
{
    ra_hf_checkpoint *ckpt;
    ra_hf_config *config;
    if (open_case(name, &ckpt, &config) != RA_OK) return 0;
    ra_hf_layer *hl = NULL;
    const ra_status st = ra_hf_layer_create(&hl, ckpt, config, &o);
    const int ok = st == want && !hl && strstr(ra_hf_last_error(), says);
    if (!ok) fprintf(stderr, "  %s: status %d: %s\n", name, (int)st, ra_hf_last_error());
    ra_hf_layer_destroy(hl);
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);
    return ok;
}

static void test_refused(void)
{
    ra_hf_options o = ra_hf_options_init();
    o.vision = 1;
    CHECK(refused("pixtral", o, RA_ERR_ARGUMENT, "needs the layer"), "no layer");
    o.layer = 1;
    CHECK(refused("pixtral", o, RA_ERR_NOT_FOUND, "layers.1.attention.q_proj.weight"),
          "a layer the checkpoint lacks");
    CHECK(refused("qwen2_5_vl", o, RA_ERR_UNSUPPORTED, "vision_windows"),
          "a window-attention layer without vision_windows");
    o.layer = 0;
    o.vision_windows = 1;
    CHECK(refused("qwen2_5_vl", o, RA_ERR_ARGUMENT, "vision_windows"),
          "vision_windows on a full-attention layer");
    CHECK(refused("pixtral", o, RA_ERR_ARGUMENT, "vision_windows"), "vision_windows on Pixtral");
    o.vision = 0;
    CHECK(refused("qwen2_5_vl_window", o, RA_ERR_ARGUMENT, "without vision"),
          "vision_windows without vision");
    o.vision = 1;
    o.vision_windows = 0;
    CHECK(refused("pixtral_bias", o, RA_ERR_UNSUPPORTED, "q_proj.bias"), "an unknown tensor");
    CHECK(refused("llama4_nobias", o, RA_ERR_NOT_FOUND, "q_proj.bias"), "a missing bias");
    CHECK(refused("qwen2_vl_width", o, RA_ERR_SHAPE, "embed_dim"), "another width");
    o.n_heads = 4;
    CHECK(refused("qwen2_vl", o, RA_ERR_UNSUPPORTED, "n_heads"), "a text layer's option");
    o.n_heads = 0;
    o.layout = RA_LAYOUT_INTERLEAVED;
    CHECK(refused("llama4", o, RA_ERR_UNSUPPORTED, "layout"), "a layout");

    ra_hf_checkpoint *ckpt;
    ra_hf_config *config, *bare;
    if (open_case("pixtral", &ckpt, &config) != RA_OK) return;
    CHECK(ra_hf_config_parse(&bare, "{\"model_type\": \"llama\"}", 23) == RA_OK, "parse");
    o.layout = -1;
    ra_hf_layer *hl = NULL;
    CHECK(ra_hf_layer_create(&hl, ckpt, bare, &o) == RA_ERR_NOT_FOUND && !hl &&
              strstr(ra_hf_last_error(), "vision_config"), "no vision_config: %s",
          ra_hf_last_error());
    ra_hf_config_close(bare);
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);
}

static void each_isa(void)
{
    RUN(test_towers);
}

int main(int argc, char **argv)
{
    if (argc > 1) fixture_dir = argv[1];
    ra_test_each_isa(each_isa);
    RUN(test_windows);
    RUN(test_window_bound);
    RUN(test_refused);
    return ra_test_summary("hf_vision");
}
