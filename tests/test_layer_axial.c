/*
 * test_layer_axial.c — a layer with a 2-D (axial) rope, the vision towers'
 * (Pixtral: alternate, half pairs; Qwen2-VL / 2.5-VL: shared, half pairs,
 * q/k/v biases; Llama 4: shared, column first, interleaved pairs, biases):
 *   - ra_layer_forward, flash and reference paths, against a double loop
 *     written here (its own angles from docs/ROPE.md's table);
 *   - the training forward bit for bit the forward; the backward's dx and
 *     dwq against central finite differences of the double loop; the tape
 *     keeps its own copy of the positions;
 *   - the refusals: cached, paged and phased cached calls, 1-D positions,
 *     kv_lora_rank and positions_are_slots with a 2-D rope.
 *
 * Dims: B batch, S seq, H heads (= Hkv: the towers are multi-head), D
 * head_dim, dim = H D, T = B S.  The mask: causal, or none (non_causal, as
 * the towers attend); patches at random (row, column).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

enum { B = 2, S = 7, H = 2, D = 8, DIM = H * D, T = B * S };

typedef struct axial_case {
    const char *name;
    ra_rope_axial axial;
    int column_first;
    ra_layout layout;
    int biases;
    int non_causal; /* the towers' bidirectional attention */
} axial_case;

static const axial_case cases[] = {
    {"pixtral", RA_AXIAL_ALTERNATE, 0, RA_LAYOUT_HALF, 0, 0},
    {"qwen2-vl", RA_AXIAL_SHARED, 0, RA_LAYOUT_HALF, 1, 0},
    {"llama4", RA_AXIAL_SHARED, 1, RA_LAYOUT_INTERLEAVED, 1, 0},
    {"pixtral, bidirectional", RA_AXIAL_ALTERNATE, 0, RA_LAYOUT_HALF, 0, 1},
    {"qwen2-vl, bidirectional", RA_AXIAL_SHARED, 0, RA_LAYOUT_HALF, 1, 1},
    {"llama4, bidirectional", RA_AXIAL_SHARED, 1, RA_LAYOUT_INTERLEAVED, 1, 1},
};

typedef struct fixture {
    const axial_case *c;
    float wq[DIM * DIM], wk[DIM * DIM], wv[DIM * DIM], wo[DIM * DIM];
    float bq[DIM], bk[DIM], bv[DIM], bo[DIM];
    float x[T * DIM], dy[T * DIM];
    int64_t ids[T * 2]; /* (row, column) */
    ra_rope_config rope;
    ra_layer_config config;
    ra_layer_weights weights;
} fixture;

static void fixture_make(fixture *f, const axial_case *c)
{
    f->c = c;
    ra_test_fill(f->wq, DIM * DIM, 1);
    ra_test_fill(f->wk, DIM * DIM, 2);
    ra_test_fill(f->wv, DIM * DIM, 3);
    ra_test_fill(f->wo, DIM * DIM, 4);
    ra_test_fill(f->bq, DIM, 5);
    ra_test_fill(f->bk, DIM, 6);
    ra_test_fill(f->bv, DIM, 7);
    ra_test_fill(f->bo, DIM, 8);
    ra_test_fill(f->x, T * DIM, 9);
    ra_test_fill(f->dy, T * DIM, 10);
    uint64_t s = 12345;
    for (int64_t i = 0; i < 2 * T; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        f->ids[i] = (int64_t)((s >> 33) % 40);
    }
    f->rope = ra_rope_config_default(D);
    f->rope.theta = 100.0; /* angles that differ across pairs */
    f->rope.layout = c->layout;
    f->rope.axial = c->axial;
    f->rope.axial_column_first = c->column_first;
    f->config = ra_layer_config_init();
    f->config.dim = DIM, f->config.n_heads = H, f->config.n_kv_heads = H;
    f->config.head_dim = D, f->config.rope = &f->rope;
    f->config.non_causal = c->non_causal;
    f->weights = ra_layer_weights_init();
    f->weights.wq = f->wq, f->weights.wk = f->wk, f->weights.wv = f->wv, f->weights.wo = f->wo;
    if (c->biases)
        f->weights.bq = f->bq, f->weights.bk = f->bk, f->weights.bv = f->bv, f->weights.bo = f->bo;
}

static ra_positions positions_of(const int64_t *ids)
{
    ra_positions p = ra_positions_start(0);
    p.axial_ids = ids;
    return p;
}

/* ---- the double loop ------------------------------------------------------ */

/* Pair i's angle at (row, col), as docs/ROPE.md draws the three kinds:
 * q = D / 4 pairs per axis, f_k = theta^(-2k / D);
 *   alternate: i < q row f_2i, else column f_(2j + 1), j = i - q
 *   shared:    i < q row f_2i, else column f_2j (column first: swapped) */
static double angle_of(const axial_case *c, double theta, int64_t i, int64_t row, int64_t col)
{
    const int64_t q = D / 4;
    const int64_t k = i < q ? 2 * i : c->axial == RA_AXIAL_ALTERNATE ? 2 * (i - q) + 1
                                                                     : 2 * (i - q);
    int64_t first = row, second = col;
    if (c->column_first) first = col, second = row;
    return (double)(i < q ? first : second) * pow(theta, -2.0 * (double)k / D);
}

/* One head's row [D] rotated in place at (row, col). */
static void rope_d(const fixture *f, double *v, int64_t row, int64_t col)
{
    for (int64_t i = 0; i < D / 2; i++) {
        const double a = angle_of(f->c, f->rope.theta, i, row, col);
        const int64_t i0 = f->c->layout == RA_LAYOUT_HALF ? i : 2 * i;
        const int64_t i1 = f->c->layout == RA_LAYOUT_HALF ? i + D / 2 : 2 * i + 1;
        const double x0 = v[i0], x1 = v[i1];
        v[i0] = x0 * cos(a) - x1 * sin(a);
        v[i1] = x0 * sin(a) + x1 * cos(a);
    }
}

/* y [T, DIM] from x, wq (the inputs finite differences move), causal
 * unless the case is not: query i sees keys j < n_i (i + 1, or S). */
static void forward_d(const fixture *f, const double *x, const double *wq, double *y)
{
    static double q[T * DIM], k[T * DIM], v[T * DIM], o[T * DIM];
    const int bias = f->c->biases;
    for (int64_t t = 0; t < T; t++)
        for (int64_t r = 0; r < DIM; r++) {
            double sq = bias ? f->bq[r] : 0, sk = bias ? f->bk[r] : 0, sv = bias ? f->bv[r] : 0;
            for (int64_t i = 0; i < DIM; i++) {
                sq += wq[r * DIM + i] * x[t * DIM + i];
                sk += (double)f->wk[r * DIM + i] * x[t * DIM + i];
                sv += (double)f->wv[r * DIM + i] * x[t * DIM + i];
            }
            q[t * DIM + r] = sq, k[t * DIM + r] = sk, v[t * DIM + r] = sv;
        }
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            rope_d(f, q + t * DIM + h * D, f->ids[2 * t], f->ids[2 * t + 1]);
            rope_d(f, k + t * DIM + h * D, f->ids[2 * t], f->ids[2 * t + 1]);
        }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) {
                double s[S], m = -INFINITY, sum = 0;
                const double *qi = q + (b * S + i) * DIM + h * D;
                const int64_t n_i = f->c->non_causal ? S : i + 1;
                for (int64_t j = 0; j < n_i; j++) {
                    s[j] = 0;
                    for (int64_t d = 0; d < D; d++) s[j] += qi[d] * k[(b * S + j) * DIM + h * D + d];
                    s[j] /= sqrt((double)D);
                    m = fmax(m, s[j]);
                }
                for (int64_t j = 0; j < n_i; j++) sum += s[j] = exp(s[j] - m);
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < n_i; j++) acc += s[j] * v[(b * S + j) * DIM + h * D + d];
                    o[(b * S + i) * DIM + h * D + d] = acc / sum;
                }
            }
    for (int64_t t = 0; t < T; t++)
        for (int64_t r = 0; r < DIM; r++) {
            double acc = bias ? f->bo[r] : 0;
            for (int64_t i = 0; i < DIM; i++) acc += (double)f->wo[r * DIM + i] * o[t * DIM + i];
            y[t * DIM + r] = acc;
        }
}

static double loss_d(const fixture *f, const double *x, const double *wq)
{
    static double y[T * DIM];
    forward_d(f, x, wq, y);
    double l = 0;
    for (int64_t i = 0; i < T * DIM; i++) l += y[i] * f->dy[i];
    return l;
}

/* Worst |g - fd| / max|fd| for the n floats of p (as doubles in pd),
 * which loss_d reads. */
static double fd_error(const fixture *f, double *x, double *wq, double *pd, const float *g,
                       int64_t n)
{
    double worst = 0, scale = 0, fd[DIM * DIM];
    for (int64_t i = 0; i < n; i++) {
        const double keep = pd[i], h = 1e-5;
        pd[i] = keep + h;
        const double up = loss_d(f, x, wq);
        pd[i] = keep - h;
        const double down = loss_d(f, x, wq);
        pd[i] = keep;
        fd[i] = (up - down) / (2 * h);
        scale = fmax(scale, fabs(fd[i]));
    }
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(g[i] - fd[i]));
    return worst / scale;
}

/* ---- the cases ------------------------------------------------------------ */

/* Forward, both paths, against the double loop: float32 sums of a few
 * dozen terms, ~1e-7 of max|y|; 1e-5 leaves a margin.  The training forward
 * is the forward bit for bit; the backward's dx and dwq within 1e-5 of
 * central differences (test_layer_backward.c's tolerance and reasons; the
 * tape's positions are its own: the caller's changed after the forward
 * change nothing). */
static void test_forward_and_gradients(void)
{
    static fixture f;
    static double yd[T * DIM], xd[T * DIM], wqd[DIM * DIM];
    static float y[T * DIM], y2[T * DIM], dx[T * DIM], dwq[DIM * DIM], dwk[DIM * DIM],
        dwv[DIM * DIM], dwo[DIM * DIM], dbq[DIM], dbk[DIM], dbv[DIM], dbo[DIM];
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        fixture_make(&f, &cases[ci]);
        const char *name = f.c->name;
        ra_layer *layer;
        CHECK(ra_layer_create(&layer, &f.config, &f.weights) == RA_OK, "%s: create: %s", name,
              ra_last_error());
        if (!layer) continue;
        for (int64_t i = 0; i < T * DIM; i++) xd[i] = f.x[i];
        for (int64_t i = 0; i < DIM * DIM; i++) wqd[i] = f.wq[i];
        forward_d(&f, xd, wqd, yd);
        float ydf[T * DIM];
        for (int64_t i = 0; i < T * DIM; i++) ydf[i] = (float)yd[i];
        const ra_positions p = positions_of(f.ids);
        const ra_attention_path paths[2] = {RA_PATH_FLASH, RA_PATH_REFERENCE};
        double worst_y = 0;
        for (int pi = 0; pi < 2; pi++) {
            CHECK(ra_layer_forward(NULL, layer, y, f.x, B, S, &p, PATH_OPTS(paths[pi])) == RA_OK,
                  "%s: forward: %s", name, ra_last_error());
            const double e = ra_test_max_rel_diff(y, ydf, T * DIM);
            if (pi == 0) worst_y = e;
            CHECK(e <= 1e-5, "%s: %s path: %.3g of max|y| from the double loop", name,
                  pi ? "reference" : "flash", e);
        }
        CHECK(ra_layer_forward(NULL, layer, y, f.x, B, S, &p, NULL) == RA_OK, "%s: forward",
              name);

        ra_layer_tape *tape;
        CHECK(ra_layer_tape_create(&tape, layer, T) == RA_OK, "%s: tape", name);
        int64_t mine[2 * T];
        memcpy(mine, f.ids, sizeof mine);
        const ra_positions pm = positions_of(mine);
        CHECK(ra_layer_forward_train(NULL, layer, y2, tape, f.x, B, S, &pm, NULL) == RA_OK &&
                  memcmp(y, y2, sizeof y) == 0,
              "%s: the training forward differs from the forward", name);
        for (int64_t i = 0; i < 2 * T; i++) mine[i] += 3; /* the tape's copy is read */
        ra_layer_grads g = ra_layer_grads_init();
        g.dwq = dwq, g.dwk = dwk, g.dwv = dwv, g.dwo = dwo;
        if (f.c->biases) g.dbq = dbq, g.dbk = dbk, g.dbv = dbv, g.dbo = dbo;
        CHECK(ra_layer_backward(NULL, layer, dx, &g, tape, f.dy) == RA_OK, "%s: backward: %s",
              name, ra_last_error());
        const double ex = fd_error(&f, xd, wqd, xd, dx, T * DIM);
        CHECK(ex <= 1e-5, "%s: dx %.3g of max|fd|", name, ex);
        const double ew = fd_error(&f, xd, wqd, wqd, dwq, DIM * DIM);
        CHECK(ew <= 1e-5, "%s: dwq %.3g of max|fd|", name, ew);
        if (ra_test_isa == (int)ra_cpu_isa_max()) /* once: the best path's */
            printf("%s: y %.2g of max|y| (flash), dx %.2g, dwq %.2g of max|fd|\n", name,
                   worst_y, ex, ew);
        ra_layer_tape_destroy(tape);
        ra_layer_destroy(layer);
    }
}

static void test_refusals(void)
{
    static fixture f;
    fixture_make(&f, &cases[1]);
    ra_layer *layer;
    CHECK(ra_layer_create(&layer, &f.config, &f.weights) == RA_OK, "create");
    if (!layer) return;
    static float y[T * DIM];
    int64_t ids1[T] = {0};
    ra_positions p1 = ra_positions_start(0);
    p1.ids = ids1;
    CHECK(ra_layer_forward(NULL, layer, y, f.x, B, S, &p1, NULL) == RA_ERR_ARGUMENT,
          "1-D positions accepted");
    CHECK(ra_layer_forward(NULL, layer, y, f.x, B, S, NULL, NULL) == RA_ERR_ARGUMENT,
          "no positions accepted");
    const ra_positions p = positions_of(f.ids);
    ra_kv_cache *cache;
    CHECK(ra_kv_cache_create(&cache, B, S, H, D, RA_F32) == RA_OK, "cache");
    CHECK(ra_layer_forward_cached(NULL, layer, cache, y, f.x, B, S, &p) == RA_ERR_UNSUPPORTED &&
              strstr(ra_last_error(), "2-D"), "cached: %s", ra_last_error());
    ra_kv_cache_destroy(cache);
    ra_kv_pool *pool;
    CHECK(ra_kv_pool_create(&pool, 4, 8, 2, H, D, RA_F32) == RA_OK, "pool: %s",
          ra_last_error());
    int64_t id = 0, ids[1] = {0};
    CHECK(ra_kv_pool_add_sequence(pool, 0, &id) == RA_OK, "pool add: %s", ra_last_error());
    CHECK(ra_layer_forward_paged(NULL, layer, pool, ids, 1, y, f.x, S, NULL, &p) ==
                  RA_ERR_UNSUPPORTED && strstr(ra_last_error(), "2-D"),
          "paged: %s", ra_last_error());
    ra_kv_pool_destroy(pool);
    ra_layer_step *step = NULL;
    CHECK(ra_layer_forward_cached_begin(&step, NULL, layer, y, f.x, B, S, &p) ==
                  RA_ERR_UNSUPPORTED && !step && strstr(ra_last_error(), "2-D"),
          "phased cached: %s", ra_last_error());
    ra_layer_destroy(layer);

    ra_layer_config c = f.config;
    c.positions_are_slots = 1;
    CHECK(ra_layer_create(&layer, &c, &f.weights) == RA_ERR_UNSUPPORTED &&
              strstr(ra_last_error(), "positions_are_slots"), "positions_are_slots: %s",
          ra_last_error());
    c = f.config;
    c.temperature_floor = 4, c.temperature_scale = 0.1;
    CHECK(ra_layer_create(&layer, &c, &f.weights) == RA_ERR_UNSUPPORTED &&
              strstr(ra_last_error(), "2-D"), "temperature_floor: %s", ra_last_error());
}

static void each_isa(void)
{
    RUN(test_forward_and_gradients);
}

int main(void)
{
    ra_test_each_isa(each_isa);
    RUN(test_refusals);
    return ra_test_summary("test_layer_axial");
}
