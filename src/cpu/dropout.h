/*
 * dropout.h — counter-based dropout masks (internal).  In src/cpu because
 * the kernels draw them as they go; the core makes them.
 *
 * Element `index` of stream `stream` is kept when the Philox-4x32-10 output
 * for (key = seed, counter = {index / 4, stream}) lane index % 4 is at least
 * p * 2^32.  Nothing is stored: any thread, path or pass (a backward) that
 * asks for the same (seed, stream, index) gets the same decision.
 */
#ifndef RA_CPU_DROPOUT_H
#define RA_CPU_DROPOUT_H

#include "internal.h"

enum {
    RA_STREAM_ATTENTION = 0, /* probabilities, index ((b*H + h)*S + i)*S + j */
    RA_STREAM_OUTPUT = 1,    /* layer output, index (b*S + s)*dim + c */
};

typedef struct ra_dropout_mask {
    uint64_t seed;
    uint32_t stream;
    uint32_t threshold; /* p * 2^32: drop when the random word is below */
    float scale;        /* 1 / (1 - p) for survivors */
} ra_dropout_mask;

/* The mask for probability p (0 <= p < 1). */
ra_dropout_mask ra_dropout_mask_make(float p, uint64_t seed, uint32_t stream);

/* mult[t] = 0 or scale for elements first .. first + n - 1. */
void ra_dropout_row(const ra_dropout_mask *mask, uint64_t first, int64_t n, float *mult);

/* x[i] *= mult(first + i) for i in [0, n): applies the mask to a buffer
 * whose element i has index first + i.  Also the mask's backward: the
 * gradient of x * mult is dy * mult. */
void ra_dropout_apply(const ra_dropout_mask *mask, uint64_t first, float *x, int64_t n);

/* The four Philox-4x32-10 words for a counter and key (exposed for tests). */
void ra_philox4x32(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

#endif
