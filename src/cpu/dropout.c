/* dropout.c — Philox-4x32-10 (Salmon et al., SC'11) and dropout masks. */
#include <math.h>

#include "cpu/dropout.h"

void ra_philox4x32(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0;
        c1 = (uint32_t)p1;
        c2 = n2;
        c3 = (uint32_t)p0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

ra_dropout_mask ra_dropout_mask_make(float p, uint64_t seed, uint32_t stream)
{
    ra_dropout_mask m;
    m.seed = seed;
    m.stream = stream;
    m.threshold = (uint32_t)ldexp((double)p, 32); /* p < 1, so below 2^32 */
    m.scale = 1.0f / (1.0f - p);
    return m;
}

void ra_dropout_row(const ra_dropout_mask *mask, uint64_t first, int64_t n, float *mult)
{
    const uint32_t key[2] = {(uint32_t)mask->seed, (uint32_t)(mask->seed >> 32)};
    uint32_t words[4];
    uint64_t block = UINT64_MAX;
    for (int64_t t = 0; t < n; t++) {
        uint64_t index = first + (uint64_t)t;
        if (index / 4 != block) {
            block = index / 4;
            const uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), mask->stream, 0};
            ra_philox4x32(counter, key, words);
        }
        mult[t] = words[index % 4] >= mask->threshold ? mask->scale : 0.0f;
    }
}

void ra_dropout_apply(const ra_dropout_mask *mask, uint64_t first, float *x, int64_t n)
{
    float mult[256];
    for (int64_t done = 0; done < n; done += 256) {
        int64_t len = n - done < 256 ? n - done : 256;
        ra_dropout_row(mask, first + (uint64_t)done, len, mult);
        for (int64_t t = 0; t < len; t++) x[done + t] *= mult[t];
    }
}
