/*
 * quickstart.c — the README's tour of the C API, compiled by `make` so that
 * it keeps compiling (and as C++17 by tests/test_install.sh).  Rotates q and k with RoPE, runs causal GQA attention,
 * then the whole Attention layer, forward and backward, checking every
 * status.
 *
 *   cc -Iinclude examples/quickstart.c build/libropeattn.a -lopenblas -lm -pthread
 */
#include <stdio.h>
#include <stdlib.h>

#include "ropeattn.h"

#define TRY(call)                                                            \
    do {                                                                     \
        ra_status s_ = (call);                                               \
        if (s_ != RA_OK) {                                                   \
            fprintf(stderr, "%s: %s\n", #call, ra_status_string(s_));        \
            return 1;                                                        \
        }                                                                    \
    } while (0)

int main(void)
{
    enum { B = 1, S = 16, H = 8, HKV = 2, D = 64, DIM = H * D };
    float *q = (float *)calloc(B * S * H * D, sizeof(float));   /* [B, S, H, D] */
    float *k = (float *)calloc(B * S * HKV * D, sizeof(float)); /* [B, S, HKV, D] */
    float *v = (float *)calloc(B * S * HKV * D, sizeof(float));
    float *out = (float *)calloc(B * S * H * D, sizeof(float));
    float *w = (float *)calloc(DIM * DIM, sizeof(float));       /* [DIM, DIM] */
    float *x = (float *)calloc(B * S * DIM, sizeof(float));     /* [B, S, DIM] */
    float *y = (float *)calloc(B * S * DIM, sizeof(float));
    if (!q || !k || !v || !out || !w || !x || !y) return 1;
    for (int i = 0; i < B * S * H * D; i++) q[i] = (float)(i % 7) * 0.1f;
    for (int i = 0; i < B * S * HKV * D; i++) k[i] = v[i] = (float)(i % 5) * 0.1f;
    for (int i = 0; i < DIM * DIM; i++) w[i] = (float)((i * 37) % 11 - 5) * 0.01f;
    for (int i = 0; i < B * S * DIM; i++) x[i] = (float)(i % 13) * 0.1f;

    /* A context: 2 threads and a reusable workspace (NULL also works). */
    ra_context *ctx;
    TRY(ra_context_create(&ctx, 2));

    /* RoPE: one table for head_dim D, base 10000, the interleaved pairs of
     * Meta's LLaMA code; ra_rope_config_hf(D) for a Hugging Face checkpoint
     * (rotate_half's pairs, as the Python package by default).
     * Structs the API reads start from their _default / _init function,
     * which sets struct_size (ropeattn.h, "Structs that grow"). */
    ra_rope_config rc = ra_rope_config_default(D);
    ra_rope *rope;
    TRY(ra_rope_create(&rope, &rc));
    TRY(ra_rope_apply_f32(ctx, rope, q, B, S, H, 0)); /* q: [B, S, H, D], positions 0.. */
    TRY(ra_rope_apply_f32(ctx, rope, k, B, S, HKV, 0));

    /* Causal GQA attention: query head h reads kv head h / (H / HKV). */
    ra_tensor tq = ra_tensor_4d(q, RA_F32, B, S, H, D), tk = ra_tensor_4d(k, RA_F32, B, S, HKV, D);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, B, S, HKV, D), to = ra_tensor_4d(out, RA_F32, B, S, H, D);
    TRY(ra_attention(ctx, &to, &tq, &tk, &tv, NULL)); /* NULL: the fastest path, no dropout */

    /* LLaMA's Attention module: wq, wk, wv, wo in PyTorch [out, in] layout
     * (here one toy matrix reused; wk/wv only use its first HKV*D rows). */
    ra_layer_config lc = ra_layer_config_init();
    lc.dim = DIM;
    lc.n_heads = H;
    lc.n_kv_heads = HKV;
    lc.rope = &rc;
    ra_layer_weights lw = ra_layer_weights_init();
    lw.wq = lw.wk = lw.wv = lw.wo = w;
    ra_layer *layer;
    TRY(ra_layer_create(&layer, &lc, &lw));
    TRY(ra_layer_forward(ctx, layer, y, x, B, S, NULL, NULL)); /* x, y: [B, S, dim] */
    printf("out[0] = %g, y[0] = %g\n", out[0], y[0]);

    /* Training: a tape made once, a forward that fills it, the backward of
     * L = sum(y * dy) (here dy = x): dx [B, S, dim] and the four dW. */
    float *dx = (float *)calloc(B * S * DIM, sizeof(float));
    float *dw = (float *)calloc(4 * DIM * DIM, sizeof(float));
    if (!dx || !dw) return 1;
    ra_layer_tape *tape;
    TRY(ra_layer_tape_create(&tape, layer, B * S));            /* reused every step */
    ra_attention_options train = ra_attention_options_init();
    train.dropout = 0.1f;
    train.seed = 42;
    TRY(ra_layer_forward_train(ctx, layer, y, tape, x, B, S, NULL, &train));
    ra_layer_grads g = ra_layer_grads_init();
    g.dwq = dw;
    g.dwk = dw + DIM * DIM;
    g.dwv = dw + 2 * DIM * DIM;
    g.dwo = dw + 3 * DIM * DIM;
    TRY(ra_layer_backward(ctx, layer, dx, &g, tape, x));       /* g.accumulate = 1: add */
    printf("dx[0] = %g, dwq[0] = %g\n", dx[0], dw[0]);
    ra_layer_tape_destroy(tape);
    free(dx); free(dw);

    ra_layer_destroy(layer);
    ra_rope_destroy(rope);
    ra_context_destroy(ctx);
    free(q); free(k); free(v); free(out); free(w); free(x); free(y);
    return 0;
}
