/*
 * simd.h — the thin per-ISA layer the kernels are written against (internal).
 *
 * One vector type `vf` of RA_W floats (and `vi` of RA_W int32), built on
 * GCC's vector extensions, so the same kernel source compiles to AVX-512
 * (RA_W 16), AVX2 (8), NEON or baseline SSE2 (4).  The file that includes a
 * kernel template defines the ISA macro and is compiled with that ISA's
 * flags; nothing else in the library uses these instructions, and dispatch
 * (dispatch.c) calls a file's kernels only when the CPU and OS support them.
 * Kernels built on this layer are compiled with -ffp-contract=fast so that
 * a * b + c becomes one FMA.
 */
#ifndef RA_SIMD_H
#define RA_SIMD_H

#include <stdint.h>
#include <string.h>

#if defined(RA_SIMD_AVX512)
#define RA_W 16
#elif defined(RA_SIMD_AVX2)
#define RA_W 8
#else /* RA_SIMD_NEON or the baseline: 128-bit vectors */
#define RA_W 4
#endif

typedef float vf __attribute__((vector_size(RA_W * 4)));
typedef int32_t vi __attribute__((vector_size(RA_W * 4)));

static inline vf vload(const float *p)
{
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(float *p, vf v) { memcpy(p, &v, sizeof v); }

static inline vf vsplat(float x)
{
    vf v = {x};
    return __builtin_shuffle(v, (vi){0}); /* every lane from lane 0: one broadcast */
}

/* Lane-wise select: mask lanes are all ones (true) or zero. */
static inline vf vselect(vi mask, vf a, vf b) { return (vf)((mask & (vi)a) | (~mask & (vi)b)); }

static inline vf vmax(vf a, vf b) { return vselect(a > b, a, b); }

static inline float vreduce_max(vf v)
{
    float m = v[0];
    for (int i = 1; i < RA_W; i++) m = v[i] > m ? v[i] : m;
    return m;
}

static inline float vreduce_add(vf v)
{
    float s = 0.0f;
    for (int i = 0; i < RA_W; i++) s += v[i];
    return s;
}

/* e^x for a vector, relative error ~2e-7; exactly 0 for x < -87.3 (and -Inf),
 * +Inf above 88.7, NaN stays NaN.  2^n * 2^f with f in [-1/2, 1/2]. */
static inline vf vexp(vf x)
{
    const vf log2e = vsplat(1.44269504088896341f);
    vf t = x * log2e;
    vi tiny = t < vsplat(-126.0f), huge = t > vsplat(128.0f);
    t = vselect(tiny, vsplat(-126.0f), t);
    t = vselect(huge, vsplat(128.0f), t);
    vi ni = __builtin_convertvector(t + vselect(t < vsplat(0.0f), vsplat(-0.5f), vsplat(0.5f)), vi);
    vf n = __builtin_convertvector(ni, vf);            /* t rounded to nearest */
    vf f = (t - n) * vsplat(0.693147180559945309f); /* in [-ln2/2, ln2/2] */
    vf p = vsplat(1.0f / 720.0f);
    p = p * f + vsplat(1.0f / 120.0f);
    p = p * f + vsplat(1.0f / 24.0f);
    p = p * f + vsplat(1.0f / 6.0f);
    p = p * f + vsplat(0.5f);
    p = p * f + vsplat(1.0f);
    p = p * f + vsplat(1.0f);
    vi bits = (ni + 127) << 23; /* 2^n, n in [-126, 128] (128 only where huge) */
    vf r = p * (vf)bits;
    r = vselect(tiny, vsplat(0.0f), r);
    r = vselect(huge, vsplat(__builtin_inff()), r);
    return vselect(x != x, x, r);
}

#endif
