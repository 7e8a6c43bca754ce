/*
 * test_layer_max_document.c — ra_layer_config.max_document (a windowed
 * encoder's layer: Qwen2.5-VL's window attention): every uncached call
 * (forward, train, and so backward) must give documents, none longer than
 * the bound; without them, or with a longer one, RA_ERR_ARGUMENT naming
 * max_document, nothing written; at the bound the same bits as the layer
 * without it.  max_document < 0, or without non_causal: RA_ERR_ARGUMENT.
 */
#include <string.h>

#include "harness.h"
#include "ropeattn.h"

enum { DIM = 16, H = 2, D = 8, S = 8, BOUND = 4 };

static float wq[H * D * DIM], wk[H * D * DIM], wv[H * D * DIM], wo[DIM * H * D];
static float x[S * DIM];

static ra_status make_layer(ra_layer **layer, int64_t max_document, int non_causal)
{
    float *const fill[5] = {wq, wk, wv, wo, x}; /* each H D DIM floats, x S DIM */
    for (int i = 0; i < 5; i++) ra_test_fill(fill[i], i < 4 ? H * D * DIM : S * DIM, i + 1);
    ra_rope_config rc = ra_rope_config_default(0);
    ra_layer_config c = ra_layer_config_init();
    c.dim = DIM, c.n_heads = c.n_kv_heads = H, c.head_dim = D, c.rope = &rc;
    c.non_causal = non_causal, c.max_document = max_document;
    ra_layer_weights w = ra_layer_weights_init();
    w.wq = wq, w.wk = wk, w.wv = wv, w.wo = wo;
    *layer = NULL;
    return ra_layer_create(layer, &c, &w);
}

static int refused(ra_status st, const char *says)
{
    return st == RA_ERR_ARGUMENT && strstr(ra_last_error(), "max_document") &&
           strstr(ra_last_error(), says);
}

static int untouched(const float *y)
{
    for (int i = 0; i < S * DIM; i++)
        if (y[i] != -7.0f) return 0;
    return 1;
}

static void test_calls(void)
{
    ra_layer *bounded, *free_;
    CHECK(make_layer(&bounded, BOUND, 1) == RA_OK, "bounded: %s", ra_last_error());
    CHECK(make_layer(&free_, 0, 1) == RA_OK, "free: %s", ra_last_error());
    if (!bounded || !free_) goto done;
    CHECK(ra_layer_get_config(bounded)->max_document == BOUND, "config keeps it");
    float y[S * DIM], want[S * DIM];
    ra_attention_options o = ra_attention_options_init();
    const int64_t at_bound[] = {0, 4, 7, 8}, over[] = {0, 3, 8};
    o.cu_seqlens = at_bound, o.n_documents = 3;
    CHECK(ra_layer_forward(NULL, bounded, y, x, 1, S, NULL, &o) == RA_OK, "at the bound: %s",
          ra_last_error());
    CHECK(ra_layer_forward(NULL, free_, want, x, 1, S, NULL, &o) == RA_OK, "free: %s",
          ra_last_error());
    CHECK(memcmp(y, want, sizeof y) == 0, "the same bits as without the bound");
    for (int i = 0; i < S * DIM; i++) y[i] = -7.0f;
    CHECK(refused(ra_layer_forward(NULL, bounded, y, x, 1, S, NULL, NULL), "without documents"),
          "no options: %s", ra_last_error());
    const ra_attention_options none = ra_attention_options_init();
    CHECK(refused(ra_layer_forward(NULL, bounded, y, x, 1, S, NULL, &none), "without documents"),
          "no documents: %s", ra_last_error());
    o.cu_seqlens = over, o.n_documents = 2;
    CHECK(refused(ra_layer_forward(NULL, bounded, y, x, 1, S, NULL, &o), "document 1 holds 5"),
          "a longer document: %s", ra_last_error());
    CHECK(untouched(y), "nothing written");
    ra_layer_tape *tape = NULL;
    CHECK(ra_layer_tape_create(&tape, bounded, S) == RA_OK, "tape: %s", ra_last_error());
    CHECK(refused(ra_layer_forward_train(NULL, bounded, y, tape, x, 1, S, NULL, &o),
                  "document 1"), "train: %s", ra_last_error());
    CHECK(untouched(y), "nothing written by train");
    ra_layer_tape_destroy(tape);
done:
    ra_layer_destroy(bounded);
    ra_layer_destroy(free_);
}

static void test_config(void)
{
    ra_layer *layer;
    CHECK(refused(make_layer(&layer, -1, 1), "-1") && !layer, "negative: %s", ra_last_error());
    CHECK(refused(make_layer(&layer, BOUND, 0), "non_causal") && !layer, "causal: %s",
          ra_last_error());
}

static void each_isa(void)
{
    RUN(test_calls);
}

int main(void)
{
    ra_test_each_isa(each_isa);
    RUN(test_config);
    return ra_test_summary("layer_max_document");
}
