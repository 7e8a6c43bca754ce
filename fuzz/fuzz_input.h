/*
 * fuzz_input.h — turns a fuzzer's bytes into parameters: each take_* reads
 * the next bytes (zeros once they run out), so every input decodes to some
 * call and small mutations move one parameter at a time.
 */
#ifndef RA_FUZZ_INPUT_H
#define RA_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct fuzz_input {
    const uint8_t *p;
    size_t n;
} fuzz_input;

/* The next `bytes` bytes (at most 8), little-endian. */
static inline uint64_t take_bits(fuzz_input *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        uint64_t b = 0;
        if (in->n > 0) {
            b = *in->p++;
            in->n--;
        }
        v |= b << (8 * i);
    }
    return v;
}

static inline int take_byte(fuzz_input *in) { return (int)take_bits(in, 1); }

/* An integer in [lo, hi] (hi - lo < 2^32). */
static inline int64_t take_range(fuzz_input *in, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)(hi - lo) + 1;
    uint64_t v = take_bits(in, span <= 256 ? 1 : span <= 65536 ? 2 : 4);
    return lo + (int64_t)(v % span);
}

/* One of n values. */
#define TAKE_ONE_OF(in, values) \
    ((values)[take_range((in), 0, (int64_t)(sizeof(values) / sizeof((values)[0])) - 1)])

/* A raw double from 8 bytes (any bit pattern: NaN, Inf, subnormals). */
static inline double take_double(fuzz_input *in)
{
    uint64_t bits = take_bits(in, 8);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

#endif
