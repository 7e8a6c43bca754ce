/*
 * test_abi.c — the structs that grow (ropeattn.h, "Structs that grow"):
 * each function that reads a versioned struct refuses one whose
 * struct_size is unset or too small, takes one from a newer header whose
 * unknown fields are zero, and refuses one whose unknown fields are set,
 * changing nothing.
 */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

enum { S = 4, H = 2, D = 8, DIM = H * D, EXTRA = 24 };

/* A struct from a "newer header": ours followed by EXTRA more bytes, the
 * last of them set to tail. */
typedef struct {
    _Alignas(16) unsigned char bytes[512];
} grown;

/* Each struct's size in 0.3.0, the first release with struct_size: the
 * offset of its first field added since (each lies at or past it, none in
 * 0.3.0's tail padding), pinned to that release's layout on LP64 targets
 * (x86-64, aarch64). */
#define SIZE_0_3_ROPE offsetof(ra_rope_config, axial)
#define SIZE_0_3_POSITIONS offsetof(ra_positions, axial_ids)
#define SIZE_0_3_OPTIONS offsetof(ra_attention_options, non_causal)
#define SIZE_0_3_LAYER offsetof(ra_layer_config, max_document)
#define SIZE_0_3_WEIGHTS offsetof(ra_layer_weights, dtype) /* without dtype: f32 (layer.c) */
_Static_assert(sizeof(void *) != 8 || (SIZE_0_3_ROPE == 200 && SIZE_0_3_POSITIONS == 64 &&
                                       SIZE_0_3_OPTIONS == 96 && SIZE_0_3_LAYER == 272 &&
                                       sizeof(ra_layer_grads) == 232),
               "a struct's fields before its first added since 0.3.0 moved");

static void *grow(grown *g, const void *s, size_t size, unsigned char tail)
{
    memset(g, 0, sizeof *g);
    memcpy(g->bytes, s, size);
    size_t n = size + EXTRA;
    memcpy(g->bytes, &n, sizeof n);
    g->bytes[n - 1] = tail;
    return g->bytes;
}

/* The struct_size cases, for any call f(struct) -> status: 0 and one byte
 * short of the first published size (first: the struct's size in 0.3.0,
 * below) are RA_ERR_ARGUMENT, that size is fine (an older header's
 * struct) and the bytes past it are not read, a newer header's zeros are
 * fine, a newer header's field set is RA_ERR_UNSUPPORTED. */
#define CHECK_SIZES(type, value, call_with, first)                                 \
    do {                                                                           \
        type v_ = (value);                                                         \
        grown g_;                                                                  \
        v_.struct_size = 0;                                                        \
        CHECK(call_with(&v_) == RA_ERR_ARGUMENT, #type ": struct_size 0");         \
        v_.struct_size = (first) - 1;                                              \
        CHECK(call_with(&v_) == RA_ERR_ARGUMENT, #type ": struct_size short");     \
        v_.struct_size = (first);                                                  \
        CHECK(call_with(&v_) == RA_OK, #type ": an older header's size");          \
        memcpy(g_.bytes, &v_, sizeof v_);                                          \
        memset(g_.bytes + (first), 0xff, sizeof g_.bytes - (first));               \
        CHECK(call_with((const type *)(void *)g_.bytes) == RA_OK,                  \
              #type ": an older header's size, the bytes past it not read");       \
        v_.struct_size = sizeof v_;                                                \
        CHECK(call_with((const type *)grow(&g_, &v_, sizeof v_, 0)) == RA_OK,      \
              #type ": a newer header's zero fields");                             \
        CHECK(call_with((const type *)grow(&g_, &v_, sizeof v_, 1)) ==             \
                  RA_ERR_UNSUPPORTED, #type ": a newer header's field set");       \
        CHECK(call_with(&v_) == RA_OK, #type ": as it is");                        \
    } while (0)

static float wq[DIM * DIM], wk[DIM * DIM], wv[DIM * DIM], wo[DIM * DIM];
static float x[S * DIM], y[S * DIM], dx[S * DIM], dws[4][DIM * DIM];
static float q[S * H * D], k[S * H * D], v[S * H * D], out[S * H * D], lse[H * S];
static ra_rope_config base_rope;
static ra_layer_config base_config;
static ra_layer_weights base_weights;
static ra_layer *layer;
static ra_layer_tape *tape;

static ra_status rope_with(const ra_rope_config *c)
{
    ra_rope *rope = NULL;
    ra_status st = ra_rope_create(&rope, c);
    ra_rope_destroy(rope);
    return st;
}

static ra_status layer_config_with(const ra_layer_config *c)
{
    ra_layer *l = NULL;
    ra_status st = ra_layer_create(&l, c, &base_weights);
    ra_layer_destroy(l);
    return st;
}

static ra_status layer_rope_with(const ra_rope_config *r)
{
    ra_layer_config c = base_config;
    c.rope = r;
    return layer_config_with(&c);
}

static ra_status weights_with(const ra_layer_weights *w)
{
    ra_layer *l = NULL;
    ra_status st = ra_layer_create(&l, &base_config, w);
    ra_layer_destroy(l);
    return st;
}

static ra_status positions_with(const ra_positions *p)
{
    return ra_layer_forward(NULL, layer, y, x, 1, S, p, NULL);
}

static ra_status forward_with(const ra_attention_options *o)
{
    return ra_layer_forward_train(NULL, layer, y, tape, x, 1, S, NULL, o);
}

static ra_status attention_with(const ra_attention_options *o)
{
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, S, H, D), tk = ra_tensor_4d(k, RA_F32, 1, S, H, D);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, 1, S, H, D), to = ra_tensor_4d(out, RA_F32, 1, S, H, D);
    return ra_attention_forward_lse(NULL, &to, lse, &tq, &tk, &tv, o);
}

static ra_status grads_with(const ra_layer_grads *g)
{
    return ra_layer_backward(NULL, layer, dx, g, tape, x);
}

static void setup(void)
{
    for (int i = 0; i < DIM * DIM; i++) {
        wq[i] = wk[i] = (float)((i * 7) % 11 - 5) * 0.05f;
        wv[i] = wo[i] = (float)((i * 5) % 13 - 6) * 0.05f;
    }
    for (int i = 0; i < S * DIM; i++) x[i] = (float)(i % 9) * 0.1f - 0.4f;
    for (int i = 0; i < S * H * D; i++) q[i] = k[i] = v[i] = (float)(i % 5) * 0.2f;
    base_rope = ra_rope_config_default(D);
    base_config = ra_layer_config_init();
    base_config.dim = DIM;
    base_config.n_heads = H;
    base_config.rope = &base_rope;
    base_weights = ra_layer_weights_init();
    base_weights.wq = wq;
    base_weights.wk = wk;
    base_weights.wv = wv;
    base_weights.wo = wo;
    CHECK(ra_layer_create(&layer, &base_config, &base_weights) == RA_OK, "layer");
    CHECK(ra_layer_tape_create(&tape, layer, S) == RA_OK, "tape");
    CHECK(ra_layer_forward_train(NULL, layer, y, tape, x, 1, S, NULL, NULL) == RA_OK, "forward");
}

static void test_struct_sizes(void)
{
    ra_layer_grads grads = ra_layer_grads_init();
    grads.dwq = dws[0];
    grads.dwk = dws[1];
    grads.dwv = dws[2];
    grads.dwo = dws[3];
    CHECK_SIZES(ra_rope_config, base_rope, rope_with, SIZE_0_3_ROPE);
    CHECK_SIZES(ra_rope_config, base_rope, layer_rope_with, SIZE_0_3_ROPE);
    CHECK_SIZES(ra_layer_config, base_config, layer_config_with, SIZE_0_3_LAYER);
    CHECK_SIZES(ra_layer_weights, base_weights, weights_with, SIZE_0_3_WEIGHTS);
    CHECK_SIZES(ra_positions, ra_positions_start(3), positions_with, SIZE_0_3_POSITIONS);
    CHECK_SIZES(ra_attention_options, ra_attention_options_init(), forward_with,
                SIZE_0_3_OPTIONS);
    CHECK_SIZES(ra_attention_options, ra_attention_options_init(), attention_with,
                SIZE_0_3_OPTIONS);
    CHECK_SIZES(ra_layer_grads, grads, grads_with, sizeof(ra_layer_grads));
}

/* A refused struct changes nothing: y stays as it was. */
static void test_refusal_writes_nothing(void)
{
    float before[S * DIM];
    memset(y, 0x5a, sizeof y);
    memcpy(before, y, sizeof y);
    ra_positions p = ra_positions_start(0);
    p.struct_size = 8;
    CHECK(ra_layer_forward(NULL, layer, y, x, 1, S, &p, NULL) == RA_ERR_ARGUMENT, "positions");
    ra_attention_options o = ra_attention_options_init();
    o.struct_size = 0;
    CHECK(ra_layer_forward(NULL, layer, y, x, 1, S, NULL, &o) == RA_ERR_ARGUMENT, "options");
    CHECK(memcmp(y, before, sizeof y) == 0, "a refused call wrote y");
}

/* The defaults the init functions and NULL pointers stand for. */
static void test_defaults(void)
{
    ra_rope_config r = ra_rope_config_default(D);
    CHECK(r.struct_size == sizeof r && r.type == RA_ROPE_DEFAULT &&
              r.layout == RA_LAYOUT_INTERLEAVED && r.theta == 10000.0 && r.table_size == 4096 &&
              r.factor == 0 && r.short_factor == NULL, "ra_rope_config_default");
    ra_positions p = ra_positions_start(5);
    CHECK(p.struct_size == sizeof p && p.start == 5 && !p.ids && !p.starts && !p.cu_seqlens,
          "ra_positions_start");

    /* NULL positions: start 0, in ra_rope_apply and the layer. */
    ra_rope *rope;
    CHECK(ra_rope_create(&rope, &base_rope) == RA_OK, "rope");
    float a[S * H * D], b[S * H * D];
    memcpy(a, q, sizeof a);
    memcpy(b, q, sizeof b);
    ra_tensor ta = ra_tensor_4d(a, RA_F32, 1, S, H, D), tb = ra_tensor_4d(b, RA_F32, 1, S, H, D);
    ra_positions zero = ra_positions_start(0);
    CHECK(ra_rope_apply(NULL, rope, &ta, &ta, NULL, RA_FORWARD) == RA_OK &&
              ra_rope_apply(NULL, rope, &tb, &tb, &zero, RA_FORWARD) == RA_OK &&
              memcmp(a, b, sizeof a) == 0, "rope: NULL positions are start 0");
    ra_rope_destroy(rope);

    /* NULL rope config in a layer: ra_rope_config_default. */
    ra_layer_config c = base_config;
    c.rope = NULL;
    ra_layer *l;
    float y1[S * DIM], y2[S * DIM];
    CHECK(ra_layer_create(&l, &c, &base_weights) == RA_OK, "NULL rope");
    CHECK(ra_layer_forward(NULL, l, y1, x, 1, S, NULL, NULL) == RA_OK &&
              ra_layer_forward(NULL, layer, y2, x, 1, S, NULL, NULL) == RA_OK &&
              memcmp(y1, y2, sizeof y1) == 0, "NULL rope is the default rope");
    ra_layer_destroy(l);
}

/* The layer copies its rope's config: the caller's may go, and
 * ra_layer_get_config points at the layer's, with head_dim resolved. */
static void test_layer_owns_its_rope(void)
{
    ra_rope_config *r = malloc(sizeof *r);
    *r = ra_rope_config_default(0);
    r->theta = 500000.0;
    ra_layer_config c = base_config;
    c.rope = r;
    ra_layer *l;
    CHECK(ra_layer_create(&l, &c, &base_weights) == RA_OK, "create");
    memset(r, 0xff, sizeof *r);
    free(r);
    const ra_layer_config *got = ra_layer_get_config(l);
    CHECK(got && got->struct_size == sizeof *got && got->rope &&
              got->rope->theta == 500000.0 && got->rope->head_dim == D &&
              got->rope->rotary_dim == D && got->n_kv_heads == H,
          "ra_layer_get_config");
    CHECK(ra_layer_forward(NULL, l, y, x, 1, S, NULL, NULL) == RA_OK, "forward");
    ra_layer_destroy(l);
}

/* ra_last_error: the argument and value behind a status, "" after a
 * success; each thread its own. */
static void *fail_in_thread(void *arg)
{
    (void)arg;
    ra_layer_config c = base_config;
    c.n_kv_heads = 3;
    ra_layer *l;
    return (void *)(intptr_t)(ra_layer_create(&l, &c, &base_weights) == RA_ERR_GQA);
}

static void test_last_error(void)
{
    ra_layer_config c = base_config;
    c.struct_size = 0;
    ra_layer *l;
    CHECK(ra_layer_create(&l, &c, &base_weights) == RA_ERR_ARGUMENT &&
              strstr(ra_last_error(), "ra_layer_config: struct_size 0"),
          "struct_size: '%s'", ra_last_error());
    c = base_config;
    c.n_heads = 6;
    c.n_kv_heads = 4;
    c.head_dim = 4;
    CHECK(ra_layer_create(&l, &c, &base_weights) == RA_ERR_GQA &&
              strcmp(ra_last_error(), "ra_layer_config: n_heads 6 is not a multiple of "
                                      "n_kv_heads 4") == 0,
          "GQA: '%s'", ra_last_error());
    CHECK(ra_layer_forward(NULL, layer, y, x, 1, S, NULL, NULL) == RA_OK &&
              ra_last_error()[0] == '\0', "a success clears it: '%s'", ra_last_error());

    ra_kv_cache *cache;
    ra_rope *rope;
    CHECK(ra_kv_cache_create(&cache, 1, S, H, D, RA_F32) == RA_OK, "cache");
    CHECK(ra_rope_create(&rope, &base_rope) == RA_OK, "rope");
    ra_tensor tk = ra_tensor_4d(k, RA_F32, 1, S, H, D), tv = ra_tensor_4d(v, RA_F32, 1, S, H, D);
    ra_positions p = ra_positions_start(0);
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &tk, &tv, &p, NULL) == RA_OK, "fill");
    int64_t one = 1;
    CHECK(ra_kv_cache_append(NULL, cache, rope, NULL, &tk, &tv, &p, &one) ==
                  RA_ERR_CACHE_FULL &&
              strcmp(ra_last_error(), "sequence 0: 4 cached + 1 new tokens exceed the "
                                      "capacity 4") == 0,
          "cache full: '%s'", ra_last_error());

    /* Another thread's failure leaves this thread's detail as it was. */
    pthread_t t;
    void *ok = NULL;
    CHECK(pthread_create(&t, NULL, fail_in_thread, NULL) == 0 && pthread_join(t, &ok) == 0 &&
              ok, "thread");
    CHECK(strstr(ra_last_error(), "capacity 4") != NULL, "another thread's: '%s'",
          ra_last_error());
    ra_rope_destroy(rope);
    ra_kv_cache_destroy(cache);
}

/* Each refusal's detail names the argument and its value (ra_last_error):
 * call must give status, with needle in the detail. */
#define CHECK_DETAIL(call, status, needle)                                       \
    do {                                                                         \
        ra_status st_ = (call);                                                  \
        CHECK(st_ == (status) && strstr(ra_last_error(), (needle)) != NULL,      \
              "%s: status %d, detail '%s' (want '%s')", #call, (int)st_,          \
              ra_last_error(), (needle));                                        \
    } while (0)

/* A success clears the detail a failure left. */
#define CHECK_CLEARS(call)                                                              \
    CHECK(ra_last_error()[0] != '\0' && (call) == RA_OK && ra_last_error()[0] == '\0', \
          "%s: detail '%s' after a success", #call, ra_last_error())

static void test_last_error_names(void)
{
    /* context */
    ra_context *ctx = NULL;
    CHECK_DETAIL(ra_context_create(NULL, 1), RA_ERR_NULL, "out is NULL");
    CHECK_DETAIL(ra_context_create(&ctx, -1), RA_ERR_ARGUMENT, "n_threads -1");
    CHECK_CLEARS(ra_context_create(&ctx, 2));

    /* rope: create */
    ra_rope *rope = NULL;
    ra_rope_config r = base_rope;
    r.head_dim = 7;
    CHECK_DETAIL(ra_rope_create(&rope, &r), RA_ERR_HEAD_DIM, "head_dim 7 is odd");
    r = base_rope;
    r.table_size = -1;
    CHECK_DETAIL(ra_rope_create(&rope, &r), RA_ERR_SIZE, "table_size -1");
    r = base_rope;
    r.rotary_dim = 2 * D;
    CHECK_DETAIL(ra_rope_create(&rope, &r), RA_ERR_ARGUMENT, "rotary_dim 16 exceeds head_dim 8");
    r = base_rope;
    r.theta = -2.0;
    CHECK_DETAIL(ra_rope_create(&rope, &r), RA_ERR_THETA, "theta -2");
    r = base_rope;
    r.type = RA_ROPE_LINEAR;
    CHECK_DETAIL(ra_rope_create(&rope, &r), RA_ERR_ARGUMENT, "linear: factor 0");
    r.type = RA_ROPE_LLAMA3;
    r.factor = 8.0;
    r.low_freq_factor = 1.0;
    CHECK_DETAIL(ra_rope_create(&rope, &r), RA_ERR_ARGUMENT, "high_freq_factor 0");
    r = base_rope;
    r.type = RA_ROPE_YARN;
    CHECK_DETAIL(ra_rope_create(&rope, &r), RA_ERR_ARGUMENT, "max_position_embeddings 0");
    r = base_rope;
    r.type = RA_ROPE_LONGROPE;
    r.original_max_position_embeddings = 4096;
    CHECK_DETAIL(ra_rope_create(&rope, &r), RA_ERR_NULL, "short_factor is NULL");
    r = base_rope;
    r.layout = (ra_layout)7;
    CHECK_DETAIL(ra_rope_create(&rope, &r), RA_ERR_ARGUMENT, "layout 7");
    CHECK_CLEARS(ra_rope_create(&rope, &base_rope));

    /* rope: apply, table */
    float a[S * H * D];
    memcpy(a, q, sizeof a);
    ra_tensor ta = ra_tensor_4d(a, RA_F32, 1, S, H, D), bad = ta;
    bad.shape[1] = 0;
    CHECK_DETAIL(ra_rope_apply(NULL, rope, &bad, &bad, NULL, RA_FORWARD), RA_ERR_SIZE,
                 "x: shape[1] is 0");
    bad = ta;
    bad.stride[3] = 2;
    CHECK_DETAIL(ra_rope_apply(NULL, rope, &ta, &bad, NULL, RA_FORWARD), RA_ERR_ARGUMENT,
                 "x: stride[3] is 2");
    bad = ta;
    bad.stride[1] = 0;
    CHECK_DETAIL(ra_rope_apply(NULL, rope, &bad, &ta, NULL, RA_FORWARD), RA_ERR_ARGUMENT,
                 "out: stride[1] 0");
    CHECK_DETAIL(ra_rope_apply(NULL, rope, &ta, &ta, NULL, (ra_direction)5), RA_ERR_ARGUMENT,
                 "direction 5");
    bad = ra_tensor_4d(a, RA_F32, 1, S, 4, D / 2);
    CHECK_DETAIL(ra_rope_apply(NULL, rope, &bad, &bad, NULL, RA_FORWARD), RA_ERR_SHAPE,
                 "the rope's head_dim 8");
    CHECK_DETAIL(ra_rope_apply_f32(NULL, rope, a, 1, 0, H, 0), RA_ERR_SIZE, "seq 0: must be >= 1");
    CHECK_DETAIL(ra_rope_apply_f32(NULL, NULL, a, 1, S, H, 0), RA_ERR_NULL, "rope is NULL");
    float cs[2 * D], sn[2 * D];
    int64_t pos[2] = {1, -3};
    CHECK_DETAIL(ra_rope_table(rope, cs, sn, pos, 2), RA_ERR_POSITION, "positions[1] is -3");
    bad = ta;
    bad.dtype = RA_BF16;
    CHECK_DETAIL(ra_rope_apply(NULL, rope, &bad, &ta, NULL, RA_FORWARD), RA_ERR_DTYPE,
                 "out's dtype RA_BF16 is not x's RA_F32");
    CHECK_CLEARS(ra_rope_apply(NULL, rope, &ta, &ta, NULL, RA_FORWARD));

    /* the reference code's functions */
    CHECK_DETAIL(ra_precompute_freqs(cs, sn, 7, 2, 10000.0), RA_ERR_HEAD_DIM, "dim 7 is odd");
    CHECK_DETAIL(ra_apply_rotary_emb(a, a, cs, sn, 1, 2, 3, 2, 4), RA_ERR_GQA,
                 "n_heads 3 is not a multiple of n_kv_heads 2");
    CHECK_DETAIL(ra_repeat_kv(a, q, 1, 2, 1, 4, 0), RA_ERR_SIZE, "n_rep 0: must be >= 1");
    CHECK_DETAIL(ra_convert(a, (ra_dtype)9, q, RA_F32, 4), RA_ERR_ARGUMENT, "dst_dtype 9");
    CHECK_DETAIL(ra_permute_rows(a, a, RA_F32, 1, D, 2, RA_LAYOUT_HALF), RA_ERR_ARGUMENT,
                 "out overlaps w");

    /* attention, forward and backward */
    ra_tensor tq = ra_tensor_4d(q, RA_F32, 1, S, H, D), tk = ra_tensor_4d(k, RA_F32, 1, S, H, D);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, 1, S, H, D), to = ra_tensor_4d(out, RA_F32, 1, S, H, D);
    CHECK_DETAIL(ra_attention(NULL, &to, &tq, NULL, &tv, NULL), RA_ERR_NULL, "k is NULL");
    bad = tk;
    bad.dtype = (ra_dtype)5;
    CHECK_DETAIL(ra_attention(NULL, &to, &tq, &bad, &tv, NULL), RA_ERR_ARGUMENT, "k: dtype 5");
    CHECK_DETAIL(ra_attention_forward_lse(NULL, &to, NULL, &tq, &tk, &tv, NULL), RA_ERR_NULL,
                 "lse is NULL");
    CHECK_DETAIL(ra_attention_forward_lse(NULL, &to, q, &tq, &tk, &tv, NULL), RA_ERR_ARGUMENT,
                 "lse overlaps q");
    CHECK_CLEARS(ra_attention_forward_lse(NULL, &to, lse, &tq, &tk, &tv, NULL));
    float g[4][S * H * D];
    ra_tensor tdq = ra_tensor_4d(g[0], RA_F32, 1, S, H, D);
    ra_tensor tdk = ra_tensor_4d(g[1], RA_F32, 1, S, H, D);
    ra_tensor tdv = ra_tensor_4d(g[2], RA_F32, 1, S, H, D);
    ra_tensor tdo = ra_tensor_4d(g[3], RA_F32, 1, S, H, D);
    CHECK_DETAIL(ra_attention_backward(NULL, &tdq, &tdk, &tdv, &tdo, &tq, &tk, &tv, &to, NULL,
                                       NULL),
                 RA_ERR_NULL, "lse is NULL");
    CHECK_DETAIL(ra_attention_backward(NULL, &tdq, &tk, &tdv, &tdo, &tq, &tk, &tv, &to, lse,
                                       NULL),
                 RA_ERR_ARGUMENT, "dk overlaps k");
    bad = ra_tensor_4d(g[1], RA_F32, 1, S - 1, H, D);
    CHECK_DETAIL(ra_attention_backward(NULL, &tdq, &bad, &tdv, &tdo, &tq, &tk, &tv, &to, lse,
                                       NULL),
                 RA_ERR_SHAPE, "dk [1, 3, 2, 8] and k [1, 4, 2, 8] differ");
    bad = tdk;
    bad.dtype = RA_F16;
    CHECK_DETAIL(ra_attention_backward(NULL, &tdq, &bad, &tdv, &tdo, &tq, &tk, &tv, &to, lse,
                                       NULL),
                 RA_ERR_DTYPE, "dk: dtype RA_F16, must be RA_F32");
    CHECK_CLEARS(ra_attention_backward(NULL, &tdq, &tdk, &tdv, &tdo, &tq, &tk, &tv, &to, lse,
                                       NULL));

    /* kv cache: create, append, decode */
    ra_kv_cache *cache = NULL;
    CHECK_DETAIL(ra_kv_cache_create(&cache, 0, S, H, D, RA_F32), RA_ERR_SIZE,
                 "batch 0: must be >= 1");
    CHECK_DETAIL(ra_kv_cache_create(&cache, 1, S, H, 7, RA_F32), RA_ERR_HEAD_DIM,
                 "head_dim 7 is odd");
    CHECK_DETAIL(ra_kv_cache_create(&cache, 1, S, H, D, (ra_dtype)3), RA_ERR_ARGUMENT,
                 "dtype 3");
    CHECK_DETAIL(ra_kv_cache_create(&cache, (int64_t)1 << 40, (int64_t)1 << 40, H, D, RA_F32),
                 RA_ERR_OVERFLOW, "batch 1099511627776 * capacity 1099511627776");
    CHECK_CLEARS(ra_kv_cache_create(&cache, 1, S, H, D, RA_F32));
    ra_positions p = ra_positions_start(0);
    bad = tv;
    bad.dtype = RA_I8;
    CHECK_DETAIL(ra_kv_cache_append(NULL, cache, rope, NULL, &tk, &bad, &p, NULL), RA_ERR_DTYPE,
                 "v: RA_I8 is a KV-cache storage dtype");
    bad.dtype = (ra_dtype)9;
    CHECK_DETAIL(ra_kv_cache_append(NULL, cache, rope, NULL, &tk, &bad, &p, NULL),
                 RA_ERR_ARGUMENT, "v: dtype 9 is not a ra_dtype");
    CHECK_DETAIL(ra_kv_cache_append(NULL, cache, rope, NULL, &tk, &tk, &p, NULL),
                 RA_ERR_ARGUMENT, "k and v share elements");
    float kc[S * H * D], vc[S * H * D], qc[S * H * D];
    memcpy(kc, k, sizeof kc);
    memcpy(vc, v, sizeof vc);
    memcpy(qc, q, sizeof qc);
    ra_tensor tkc = ra_tensor_4d(kc, RA_F32, 1, 2, H, D);
    ra_tensor tvc = ra_tensor_4d(vc, RA_F32, 1, 2, H, D);
    CHECK_CLEARS(ra_kv_cache_append(NULL, cache, rope, NULL, &tkc, &tvc, &p, NULL));
    ra_tensor tqc = ra_tensor_4d(qc, RA_F32, 1, S, H, D);
    CHECK_DETAIL(ra_attention_decode(NULL, cache, &to, &tqc, NULL, NULL), RA_ERR_SIZE,
                 "sequence 0: 4 queries, but 2 tokens cached");
    int64_t n_query = -1;
    CHECK_DETAIL(ra_attention_decode(NULL, cache, &to, &tqc, &n_query, NULL), RA_ERR_ARGUMENT,
                 "n_query[0] is -1");
    bad = to;
    bad.dtype = RA_BF16;
    CHECK_DETAIL(ra_attention_decode(NULL, cache, &bad, &tqc, NULL, NULL), RA_ERR_DTYPE,
                 "out: dtype RA_BF16, must be RA_F32");
    float read_v[H * D];
    ra_tensor tv_read = ra_tensor_4d(read_v, RA_F32, 1, 1, H, D);
    bad = ra_tensor_4d(kc, RA_F16, 1, 1, H, D);
    CHECK_DETAIL(ra_kv_cache_read(cache, 0, 0, &bad, &tv_read), RA_ERR_DTYPE,
                 "k: dtype RA_F16, must be RA_F32");
    ra_tensor tq1 = ra_tensor_4d(qc, RA_F32, 1, 1, H, D), to1 = ra_tensor_4d(out, RA_F32, 1, 1, H, D);
    ra_attention_options dec = ra_attention_options_init();
    dec.dropout = 0.5f;
    CHECK_DETAIL(ra_attention_decode(NULL, cache, &to1, &tq1, NULL, &dec), RA_ERR_UNSUPPORTED,
                 "dropout 0.5 in decode");
    dec = ra_attention_options_init();
    uint8_t real[1] = {1};
    dec.padding_mask = real;
    CHECK_DETAIL(ra_attention_decode(NULL, cache, &to1, &tq1, NULL, &dec), RA_ERR_UNSUPPORTED,
                 "padding_mask in decode");
    dec = ra_attention_options_init();
    int64_t cu[2] = {0, 1};
    dec.cu_seqlens = cu;
    dec.n_documents = 1;
    CHECK_DETAIL(ra_attention_decode(NULL, cache, &to1, &tq1, NULL, &dec), RA_ERR_UNSUPPORTED,
                 "cu_seqlens in decode");
    dec = ra_attention_options_init();
    dec.softcap = -1;
    CHECK_DETAIL(ra_attention_decode(NULL, cache, &to1, &tq1, NULL, &dec), RA_ERR_ARGUMENT,
                 "softcap -1");

    /* window cache: create, append past max_new, decode with a wider reach */
    ra_kv_cache *ring = NULL;
    CHECK_DETAIL(ra_kv_cache_create_window(&ring, 1, 0, 1, H, D, RA_F32), RA_ERR_SIZE,
                 "window 0: must be >= 1");
    CHECK_DETAIL(ra_kv_cache_create_window(&ring, 1, 3, -1, H, D, RA_F32), RA_ERR_SIZE,
                 "max_new -1: must be >= 1");
    CHECK_DETAIL(ra_kv_cache_create_window(&ring, 1, INT64_MAX, 2, H, D, RA_F32),
                 RA_ERR_OVERFLOW, "max_new 2 slots");
    CHECK_CLEARS(ra_kv_cache_create_window(&ring, 1, 3, 1, H, D, RA_F32));
    CHECK_DETAIL(ra_kv_cache_append(NULL, ring, rope, NULL, &tkc, &tvc, &p, NULL),
                 RA_ERR_CACHE_FULL, "sequence 0: 2 new tokens exceed the window cache's "
                 "max_new 1");
    ra_tensor tk1 = ra_tensor_4d(kc, RA_F32, 1, 1, H, D), tv1 = ra_tensor_4d(vc, RA_F32, 1, 1, H, D);
    CHECK_CLEARS(ra_kv_cache_append(NULL, ring, rope, NULL, &tk1, &tv1, &p, NULL));
    CHECK_DETAIL(ra_attention_decode(NULL, ring, &to1, &tq1, NULL, NULL), RA_ERR_ARGUMENT,
                 "window 0, chunk 0: this window cache keeps 3 keys per query");
    dec = ra_attention_options_init();
    dec.window = 4;
    CHECK_DETAIL(ra_attention_decode(NULL, ring, &to1, &tq1, NULL, &dec), RA_ERR_ARGUMENT,
                 "window 4, chunk 0");
    CHECK_CLEARS(ra_kv_cache_append(NULL, ring, rope, NULL, &tk1, &tv1, &p, NULL));
    dec.window = 3;
    ra_tensor tq2 = ra_tensor_4d(qc, RA_F32, 1, 2, H, D), to2 = ra_tensor_4d(out, RA_F32, 1, 2, H, D);
    CHECK_DETAIL(ra_attention_decode(NULL, ring, &to2, &tq2, NULL, &dec), RA_ERR_SIZE,
                 "sequence 0: 2 queries, but the window cache holds the keys of at most "
                 "max_new = 1");

    /* layer: create, forward, forward_cached, tape, forward_train, backward */
    ra_layer *l = NULL;
    CHECK_DETAIL(ra_layer_create(&l, NULL, &base_weights), RA_ERR_NULL, "config is NULL");
    ra_layer_config c = base_config;
    c.norm_eps = 2.0;
    CHECK_DETAIL(ra_layer_create(&l, &c, &base_weights), RA_ERR_ARGUMENT, "norm_eps 2");
    ra_layer_weights w8 = base_weights;
    w8.dtype = RA_I8;
    CHECK_DETAIL(ra_layer_create(&l, &base_config, &w8), RA_ERR_DTYPE,
                 "ra_layer_weights: dtype RA_I8 (the projections take");
    CHECK_DETAIL(ra_layer_forward(NULL, layer, y, x, 0, S, NULL, NULL), RA_ERR_SIZE,
                 "batch 0: must be >= 1");
    CHECK_DETAIL(ra_layer_forward(NULL, layer, y, x, 1, -2, NULL, NULL), RA_ERR_SIZE,
                 "seq -2: must be >= 1");
    CHECK_DETAIL(ra_layer_forward(NULL, layer, NULL, x, 1, S, NULL, NULL), RA_ERR_NULL,
                 "y is NULL");
    CHECK_CLEARS(ra_layer_forward(ctx, layer, y, x, 1, S, NULL, NULL));
    ra_kv_cache *cache2 = NULL;
    CHECK(ra_kv_cache_create(&cache2, 2, S, H, D, RA_F32) == RA_OK, "cache2");
    CHECK_DETAIL(ra_layer_forward_cached(NULL, layer, cache2, y, x, 1, 1, NULL), RA_ERR_SHAPE,
                 "the cache holds batch 2");
    CHECK_DETAIL(ra_layer_forward_cached(NULL, layer, ring, y, x, 1, 1, NULL), RA_ERR_ARGUMENT,
                 "the cache is a window cache of 3 tokens, and the layer's queries see every");
    ra_layer_tape *t2 = NULL;
    CHECK_DETAIL(ra_layer_tape_create(&t2, layer, 0), RA_ERR_SIZE, "max_tokens 0: must be >= 1");
    CHECK_DETAIL(ra_layer_tape_create(&t2, NULL, 1), RA_ERR_NULL, "layer is NULL");
    CHECK_CLEARS(ra_layer_tape_create(&t2, layer, 1));
    CHECK_DETAIL(ra_layer_forward_train(NULL, layer, y, t2, x, 1, S, NULL, NULL), RA_ERR_SIZE,
                 "exceed the tape's max_tokens 1");
    CHECK_DETAIL(ra_layer_forward_train(NULL, layer, y, NULL, x, 1, S, NULL, NULL), RA_ERR_NULL,
                 "tape is NULL");
    CHECK_DETAIL(ra_layer_backward(NULL, layer, dx, NULL, tape, y), RA_ERR_NULL,
                 "grads is NULL");
    ra_layer_grads grads = ra_layer_grads_init();
    grads.dwq = dws[0];
    grads.dwk = dws[1];
    grads.dwv = dws[2];
    CHECK_DETAIL(ra_layer_backward(NULL, layer, dx, &grads, tape, y), RA_ERR_NULL,
                 "dwo is NULL");
    grads.dwo = dws[3];
    CHECK_DETAIL(ra_layer_backward(NULL, layer, dx, &grads, t2, y), RA_ERR_ARGUMENT,
                 "tape holds no forward");
    CHECK_DETAIL(ra_layer_backward(NULL, layer, dx, &grads, tape, dx), RA_ERR_ARGUMENT,
                 "dx overlaps dy");
    grads.dwo = dws[0];
    CHECK_DETAIL(ra_layer_backward(NULL, layer, dx, &grads, tape, y), RA_ERR_ARGUMENT,
                 "dwq overlaps dwo");
    grads.dwo = dws[3];
    CHECK_CLEARS(ra_layer_backward(NULL, layer, dx, &grads, tape, y));

    ra_layer_tape_destroy(t2);
    ra_kv_cache_destroy(cache2);
    ra_kv_cache_destroy(ring);
    ra_kv_cache_destroy(cache);
    ra_rope_destroy(rope);
    ra_context_destroy(ctx);
}

/* setup and most cases reach the SIMD kernels (a forward, a backward, a
 * rope behind each struct they check), so all run on every path
 * (harness.h), each path with a layer and a tape of its own. */
static void simd_cases(void)
{
    RUN(setup);
    RUN(test_struct_sizes);
    RUN(test_refusal_writes_nothing);
    RUN(test_defaults);
    RUN(test_layer_owns_its_rope);
    RUN(test_last_error);
    RUN(test_last_error_names);
    ra_layer_tape_destroy(tape);
    ra_layer_destroy(layer);
}

int main(void)
{
    ra_test_each_isa(simd_cases);
    return ra_test_summary("abi");
}
