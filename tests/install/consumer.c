/*
 * consumer.c — a program that uses an installed ropeattn, built by
 * tests/test_install.sh as C (C11) and as C++ (C++17), against the shared
 * and the static library, through pkg-config and through CMake.  It rotates
 * one head and runs one small layer, checks what it can, and prints the
 * library's version.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <ropeattn.h>

#define D 8
#define H 2
#define DIM (H * D)
#define S 3

int main(void)
{
    if (strcmp(ra_version(), RA_VERSION_STRING) != 0) {
        printf("library %s, header %s\n", ra_version(), RA_VERSION_STRING);
        return 1;
    }
    /* RoPE keeps a head's norm. */
    float q[S * D], norm0 = 0, norm1 = 0;
    for (int i = 0; i < S * D; i++) q[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < D; i++) norm0 += q[2 * D + i] * q[2 * D + i];
    ra_rope_config rc = ra_rope_config_default(D);
    ra_rope *rope = NULL;
    if (ra_rope_create(&rope, &rc) != RA_OK) return 1;
    if (ra_rope_apply_f32(NULL, rope, q, 1, S, 1, 0) != RA_OK) return 1;
    for (int i = 0; i < D; i++) norm1 += q[2 * D + i] * q[2 * D + i];
    ra_rope_destroy(rope);
    if (fabsf(norm0 - norm1) > 1e-4f * norm0) return 1;

    /* One layer whose wv and wo are the identity: y's first token is x's. */
    static float wq[DIM * DIM], wk[DIM * DIM], wv[DIM * DIM], wo[DIM * DIM];
    for (int i = 0; i < DIM; i++) wv[i * DIM + i] = wo[i * DIM + i] = 1.0f;
    ra_layer_config lc = ra_layer_config_init();
    lc.dim = DIM;
    lc.n_heads = H;
    lc.rope = &rc;
    ra_layer_weights lw = ra_layer_weights_init();
    lw.wq = wq;
    lw.wk = wk;
    lw.wv = wv;
    lw.wo = wo;
    ra_layer *layer = NULL;
    float x[S * DIM], y[S * DIM];
    for (int i = 0; i < S * DIM; i++) x[i] = (float)i;
    if (ra_layer_create(&layer, &lc, &lw) != RA_OK) return 1;
    ra_status st = ra_layer_forward(NULL, layer, y, x, 1, S, NULL, NULL);
    ra_layer_destroy(layer);
    if (st != RA_OK) return 1;
    for (int i = 0; i < DIM; i++)
        if (fabsf(y[i] - x[i]) > 1e-5f) return 1;
    printf("ropeattn %s\n", ra_version());
    return 0;
}
