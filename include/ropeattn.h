/*
 * ropeattn.h — rotary position embedding (RoPE) and LLaMA-style grouped-query
 * causal attention, in C11.  This is the whole public API.
 *
 * Dimension legend used in every shape comment below:
 *   B    batch                       S    sequence length (tokens)
 *   H    query heads                 Hkv  key/value heads (H % Hkv == 0)
 *   D    head_dim (even, 2 or more)  dim  model width (H * D unless a
 *                                         layer sets head_dim)
 *   rep  H / Hkv: query head h reads key/value head h / rep (GQA)
 *
 * Conventions
 *   - Every function that can fail returns ra_status; RA_OK is 0.  Arguments
 *     are validated before anything is written, so a failing call leaves every
 *     caller-owned buffer as it was.  ra_status_string() gives the message,
 *     ra_last_error() what the check found (which argument, which value).
 *   - The library never aborts, exits or prints.
 *   - Sizes are int64_t; a negative or zero size is RA_ERR_SIZE, a product
 *     that does not fit in memory is RA_ERR_OVERFLOW.
 *   - Tensors are row-major.  Weights are in PyTorch nn.Linear layout
 *     [out_features, in_features].
 *
 * Structs that grow (tests/test_abi.c)
 *   - Every struct the API reads as a description or a set of options
 *     (ra_rope_config, ra_positions, ra_attention_options, ra_layer_config,
 *     ra_layer_weights, ra_layer_grads) begins with struct_size, which the
 *     caller sets to sizeof the struct as its header declares it.  The
 *     inline ra_..._init() functions below (and ra_rope_config_default,
 *     ra_rope_config_hf, ra_positions_start) return one zeroed with
 *     struct_size set: start
 *     from them, then set fields.
 *   - New fields only ever go at the end, at or past the size the struct
 *     had in the last release (never in its tail padding), and zero always
 *     means "not used" (the behaviour before the field existed).  So a
 *     program built against an older header (0.3.0 on) keeps its meaning on
 *     a newer library, and a program built against a newer header runs on
 *     an older library as long as the fields that library does not know
 *     are zero; when one is not, the call fails with RA_ERR_UNSUPPORTED
 *     rather than ignore it.  A struct_size smaller than the first
 *     published size is RA_ERR_ARGUMENT.
 *   - No public struct holds another by value (ra_layer_config points at
 *     its rope's config).  ra_tensor, a plain view like DLPack's DLTensor,
 *     keeps its layout.
 *   - Argument order: ra_X_create(&out, ...) makes an X; every function
 *     that takes a context takes it first, then the object it works on (the
 *     X of ra_X_verb, the cache of ra_attention_decode), then its outputs,
 *     its inputs and its options, in that order: ra_layer_forward(ctx,
 *     layer, y, x, ...), ra_kv_cache_append(ctx, cache, rope, ...),
 *     ra_attention_decode(ctx, cache, out, q, ...).  A function without a
 *     context takes its object first (ra_kv_cache_set_scales(cache, ...)).
 *   - Dropout is one pair of fields wherever it applies: dropout (the
 *     probability p, 0 = none, as in inference) and seed.
 *
 * Thread safety (tests/test_concurrency.c, also under ThreadSanitizer)
 *   - An ra_rope and an ra_layer are read-only after creation: any number of
 *     threads may use one at once (a layer's borrowed weights must not
 *     change meanwhile).
 *   - An ra_kv_cache may be read by any number of threads at once
 *     (ra_attention_decode, ra_kv_cache_length, ra_kv_cache_views,
 *     ra_kv_cache_read) while none writes it; ra_kv_cache_append,
 *     ra_kv_cache_attend, ra_layer_forward_cached, ra_kv_cache_set_scales,
 *     ra_kv_cache_reset and ra_kv_cache_destroy write it and need it to
 *     themselves.  So with an ra_kv_pool: ra_attention_decode_paged,
 *     ra_kv_pool_length and ra_kv_pool_free_pages read it; every other
 *     ra_kv_pool_ function writes it.
 *   - An ra_context owns threads and scratch memory: one calling thread at a
 *     time.  Give each application thread its own context.
 *   - Functions that take a context accept NULL and then run on the calling
 *     thread alone, allocating any scratch they need for that call.
 *   - Inputs may be read by any number of calls at once; an output (or an
 *     in-place tensor) belongs to one call at a time.
 *   - There is no other shared state: the SIMD kernels are chosen once
 *     (pthread_once).  The layer's projections call OpenBLAS from the
 *     calling thread; its own thread pool comes on top of yours.
 *
 * Numbers at the edges (tests/test_numerics.c, on every path and ISA)
 *   - Storage: a result is rounded once to its storage dtype, and beyond the
 *     dtype's range it is +-Inf, as PyTorch's .half() makes it (f16:
 *     |x| > 65504; a rotation keeps each pair's norm, so it can grow one
 *     feature by up to sqrt(2): f16 inputs above ~46000 can overflow).  The
 *     call still succeeds; isinf() tells, where data runs that close.
 *   - Attention logits s = q.k / sqrt(D) are formed with q scaled first
 *     (flash, decode) or in double (reference), and every softmax is taken
 *     against its row's maximum: logits anywhere in float32's range (up to
 *     +-3.4e38, and each term q_d k_d / sqrt(D) too) give the softmax with
 *     no overflow and no 0/0.  A logit beyond that range is +-Inf: -Inf
 *     weighs 0; +Inf, or a row whose logits are all -Inf, makes the row
 *     NaN, as a softmax does (with sinks, such a row is 0: the sink takes
 *     all the weight).  A soft-cap keeps every logit finite.  A padding
 *     query's row is 0 whatever its inputs.
 *   - NaN and Inf reach exactly the outputs that depend on them: a NaN in q
 *     row i makes out row i of that head NaN; a NaN or an Inf in k or v at
 *     token j reaches rows i >= j of the heads that read that kv head and no
 *     row before j.  (The reference code's dense masked path spreads it to every row
 *     of the head: scores + mask keeps the NaN, and 0 * NaN = NaN in
 *     probs @ v.)  In RoPE a NaN reaches both features of its pair.
 *   - Positions lie in [0, RA_MAX_POSITION = 2^32], with angles within 1e-6
 *     of exact math throughout (for a base theta >= 1, whose frequencies are
 *     at most 1: a base below 1 is taken, as transformers takes it, and an
 *     angle m f is then within about m f 2^-53, a frequency f up to 1 /
 *     theta); one past is RA_ERR_POSITION, before anything is written.
 *
 * RoPE (the derivation, in one line): choose f(q, m) so that
 *   <f(q, m), f(k, n)> depends only on m - n.  The answer rotates each pair of
 *   features (x_a, x_b) by the angle m * theta_i, theta_i = base^(-2i / d):
 *     x_a' = x_a cos(m theta_i) - x_b sin(m theta_i)
 *     x_b' = x_a sin(m theta_i) + x_b cos(m theta_i)
 *   so that <R_m q, R_n k> = <q, R_(n-m) k>.  The rotation keeps norms.
 *
 * Which features form pair i (ra_layout), for D = 8:
 *
 *   RA_LAYOUT_INTERLEAVED (Meta's LLaMA, GPT-J):
 *     x = [ a0 b0 a1 b1 a2 b2 a3 b3 ]        pair i = (2i, 2i + 1)
 *   RA_LAYOUT_HALF (Hugging Face rotate_half, GPT-NeoX):
 *     x = [ a0 a1 a2 a3 b0 b1 b2 b3 ]        pair i = (i, i + D/2)
 *
 *   Hugging Face stores wq and wk with their rows permuted so that the half
 *   layout gives the same attention as the interleaved layout on the
 *   original weights.
 */
#ifndef ROPEATTN_H
#define ROPEATTN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RA_BUILDING_LIBRARY) && defined(__GNUC__)
#define RA_API __attribute__((visibility("default")))
#else
#define RA_API
#endif

/* The version of this header; ra_version() gives the library's, which
 * may be newer if a program runs against a newer shared library.  From 0.3
 * on, versions add functions and fields ("Structs that grow") and keep the
 * SONAME libropeattn.so.0; NEWS says what changed. */
#define RA_VERSION_MAJOR 0
#define RA_VERSION_MINOR 3
#define RA_VERSION_PATCH 0
/* "MAJOR.MINOR.PATCH" from the three above, the one place the version is
 * written: the Makefile (SONAME, pkg-config, CMake) and python/setup.py
 * read those three lines. */
#define RA_VERSION_STRING                                                              \
    RA_VERSION_STR_(RA_VERSION_MAJOR) "." RA_VERSION_STR_(RA_VERSION_MINOR) "."         \
    RA_VERSION_STR_(RA_VERSION_PATCH)
#define RA_VERSION_STR_(n) RA_VERSION_QUOTE_(n)
#define RA_VERSION_QUOTE_(n) #n

/* ------------------------------------------------------------------------ */
/* Status                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum ra_status {
    RA_OK = 0,
    RA_ERR_NULL,         /* a required pointer is NULL */
    RA_ERR_SIZE,         /* a size is zero or negative */
    RA_ERR_OVERFLOW,     /* sizes whose product does not fit in memory */
    RA_ERR_HEAD_DIM,     /* head_dim (or rotary_dim) is odd */
    RA_ERR_DIM,          /* head_dim 0 and dim not a multiple of n_heads */
    RA_ERR_GQA,          /* n_heads is not a multiple of n_kv_heads */
    RA_ERR_POSITION,     /* a position is negative or above RA_MAX_POSITION */
    RA_ERR_THETA,        /* theta (the rope base) is not a finite number > 0 */
    RA_ERR_ARGUMENT,     /* another argument is out of range (an enum value,
                            a dropout probability, a stride) */
    RA_ERR_UNSUPPORTED,  /* valid, but not supported by this operation */
    RA_ERR_NOMEM,        /* memory allocation failed */
    RA_ERR_THREAD,       /* a thread could not be started */
    RA_ERR_IO,           /* a file could not be opened, read or written */
    RA_ERR_FORMAT,       /* a file is malformed */
    RA_ERR_NOT_FOUND,    /* a named tensor or key is missing */
    RA_ERR_DTYPE,        /* a tensor has a dtype this operation cannot take */
    RA_ERR_SHAPE,        /* a tensor has a shape this operation cannot take */
    RA_ERR_CACHE_FULL,   /* a KV cache has no room for the tokens appended */
    RA_STATUS_COUNT
} ra_status;

/* A static, human-readable sentence for a status; never NULL. */
RA_API const char *ra_status_string(ra_status status);

/* What the calling thread's last call that returned a status found wrong,
 * naming the argument and its value where the check says more than the
 * status does ("ra_layer_config: n_heads 6 is not a multiple of n_kv_heads
 * 4", "sequence 1: 4090 cached + 8 new tokens exceed the capacity 4096");
 * "" when that call succeeded or its status says it all.  Each thread has
 * its own; valid until that thread's next call.  Never NULL. */
RA_API const char *ra_last_error(void);

/* ------------------------------------------------------------------------ */
/* Element types and tensor views                                            */
/* ------------------------------------------------------------------------ */

typedef enum ra_dtype {
    RA_F32 = 0,
    RA_F16 = 1,  /* IEEE binary16 */
    RA_BF16 = 2, /* bfloat16: the top half of a float32 */
    RA_DTYPE_COUNT, /* the dtypes of tensors (ra_tensor, ra_convert): those above */
    /* 8-bit KV-cache storage (ra_kv_cache_create, ra_kv_cache_create_window)
     * and nothing else: every other function refuses them (RA_ERR_DTYPE),
     * and ra_kv_cache_read gives their values in float32.  "KV cache and
     * decoding" below says how values are quantized. */
    RA_I8 = 16,     /* int8 codes, symmetric, a float32 scale per token and kv head */
    RA_F8E4M3 = 17, /* OCP fp8 e4m3 ("e4m3fn") codes, a float32 scale per kv head */
    /* One byte per element, nonzero = true: ra_attention_options' attn_mask
     * only (every other function refuses it, RA_ERR_DTYPE). */
    RA_BOOL = 24
} ra_dtype;

/* Bytes per element (4, 2, or 1 for the 8-bit cache dtypes), or 0 for an
 * unknown dtype. */
RA_API size_t ra_dtype_size(ra_dtype dtype);

/* Conversions round to nearest, ties to even; NaN stays NaN, values beyond
 * the f16 range become +-Inf (as PyTorch's .half() does). */
RA_API float ra_f16_to_f32(uint16_t h);
RA_API uint16_t ra_f32_to_f16(float f);
RA_API float ra_bf16_to_f32(uint16_t h);
RA_API uint16_t ra_f32_to_bf16(float f);

/* dst[i] = (dst_dtype) src[i] for i in [0, n).  dst and src must not
 * overlap (RA_ERR_ARGUMENT), except dst == src with dst_dtype's elements no
 * wider than src_dtype's (f32 to f16 or bf16 in place; wider ones would
 * overwrite elements not yet read). */
RA_API ra_status ra_convert(void *dst, ra_dtype dst_dtype, const void *src,
                            ra_dtype src_dtype, int64_t n);

/*
 * A strided view of a 4-D tensor [B, S, heads, D].  Strides count elements,
 * not bytes; stride[3] must be 1 (the features of one head are contiguous)
 * and the others >= 0.  A view that is read may repeat elements (a zero
 * stride broadcasts); one that is written may not: taking its axes of
 * extent > 1 from the smallest stride up, each stride must exceed the
 * largest offset the axes before it reach, else RA_ERR_ARGUMENT (a zero
 * stride, or interleaved axes, are refused).  Contiguous, transposed and
 * head-major views all qualify.  This lets one call rotate q or k inside a
 * fused QKV buffer or a KV cache.
 */
typedef struct ra_tensor {
    void *data;
    ra_dtype dtype;
    int64_t shape[4];
    int64_t stride[4];
} ra_tensor;

/* A contiguous view: strides {S*heads*D, heads*D, D, 1}. */
RA_API ra_tensor ra_tensor_4d(void *data, ra_dtype dtype, int64_t b, int64_t s,
                              int64_t heads, int64_t d);

/* ------------------------------------------------------------------------ */
/* Execution context                                                         */
/* ------------------------------------------------------------------------ */

typedef struct ra_context ra_context;

/* n_threads: total threads including the caller's, at most 4096; 0 means one
 * per online processor.  The context keeps its workers and a scratch workspace
 * that grows to the largest call and is then reused, so steady-state calls do not
 * allocate.  It does not change OpenBLAS's own thread count. */
RA_API ra_status ra_context_create(ra_context **out, int n_threads);
RA_API void ra_context_destroy(ra_context *ctx); /* NULL is allowed */
RA_API int ra_context_threads(const ra_context *ctx);

/* The SIMD kernels this process uses, chosen once from CPUID and XGETBV:
 * "amx" (AVX-512 with AVX512-BF16 and AMX-BF16), "avx512bf16", "avx512",
 * "avx2", or the 128-bit baseline "sse2" (x86-64) / "neon" (aarch64).  The
 * two bf16 ones differ from avx512 only in attention with q, k and v all
 * bf16 (ra_attention, ra_attention_backward).  Setting RA_FORCE_ISA=amx|avx512bf16|avx512|avx2|base
 * in the environment
 * before the first call caps the choice (the tests use it to run every
 * path); unset or empty, it caps nothing.  Any other value caps the
 * choice at base and makes ra_simd_check_environment fail. */
RA_API const char *ra_simd_name(void);

/* The library's version, "MAJOR.MINOR.PATCH" (RA_VERSION_STRING when it
 * was built). */
RA_API const char *ra_version(void);

/* RA_ERR_ARGUMENT when RA_FORCE_ISA held a value other than amx,
 * avx512bf16, avx512, avx2, base or the empty string when the kernels were chosen, else RA_OK.
 * A program that lets its environment choose should call this first and
 * refuse to run on a failure (the ropeattn tool exits with status 2). */
RA_API ra_status ra_simd_check_environment(void);

/* ------------------------------------------------------------------------ */
/* Meta's LLaMA reference code, one to one                                         */
/* ------------------------------------------------------------------------ */

/* precompute_freqs_cis(dim, end, theta): for m in [0, end), i in [0, dim/2)
 *   cos[m, i] = cos(m * theta^(-2i/dim)), sin[m, i] = sin(...)
 * cos and sin must not overlap (RA_ERR_ARGUMENT).
 * The angle is formed in double and rounded once, so every entry is within
 * 1e-6 of exact math for m up to RA_MAX_POSITION (theta >= 1; see above).
 *   cos, sin: [end, dim/2] */
RA_API ra_status ra_precompute_freqs(float *cos, float *sin, int64_t dim,
                                     int64_t end, double theta);

/* apply_rotary_emb(xq, xk, freqs_cos, freqs_sin), in place, interleaved pairs:
 * token s of every batch row uses table row s.  xq, xk and the tables must
 * not overlap one another (RA_ERR_ARGUMENT; the two tables may).
 *   xq: [B, S, H, D]   xk: [B, S, Hkv, D]   freqs_cos, freqs_sin: [S, D/2] */
RA_API ra_status ra_apply_rotary_emb(float *xq, float *xk, const float *freqs_cos,
                                     const float *freqs_sin, int64_t batch,
                                     int64_t seq, int64_t n_heads,
                                     int64_t n_kv_heads, int64_t head_dim);

/* repeat_kv(x, n_rep): out[b, s, h, :] = x[b, s, h / n_rep, :].
 * Attention in this library never needs it; it exists for parity and tests.
 * out must not overlap x (RA_ERR_ARGUMENT).
 *   x: [B, S, Hkv, D]   out: [B, S, Hkv * n_rep, D] */
RA_API ra_status ra_repeat_kv(float *out, const float *x, int64_t batch,
                              int64_t seq, int64_t n_kv_heads, int64_t head_dim,
                              int64_t n_rep);

/* ------------------------------------------------------------------------ */
/* RoPE                                                                      */
/* ------------------------------------------------------------------------ */

/* Largest position accepted anywhere: angles are exact to ~5e-7 up to here. */
#define RA_MAX_POSITION ((int64_t)1 << 32)

typedef enum ra_layout {
    RA_LAYOUT_INTERLEAVED = 0, /* pairs (2i, 2i + 1): Meta's LLaMA code */
    RA_LAYOUT_HALF = 1,        /* pairs (i, i + D/2): Hugging Face */
    RA_LAYOUT_COUNT
} ra_layout;

/* How the inverse frequencies theta_i and the attention factor are formed:
 * the rope types of Hugging Face's modeling_rope_utils, computed in double.
 * d below is rotary_dim. */
typedef enum ra_rope_type {
    RA_ROPE_DEFAULT = 0, /* theta_i = base^(-2i/d) */
    RA_ROPE_LINEAR,      /* theta_i / factor */
    RA_ROPE_DYNAMIC,     /* NTK: base' = base * ((factor L / L0) - (factor - 1))^(d/(d-2))
                            when L > L0 (L0 = max_position_embeddings) */
    RA_ROPE_YARN,        /* ramp between theta_i / factor and theta_i over the
                            correction range; attention factor 0.1 ln(factor) + 1 */
    RA_ROPE_LLAMA3,      /* Llama 3.1: wavelengths beyond original/low_freq_factor
                            divided by factor, below original/high_freq_factor
                            kept, smooth in between */
    RA_ROPE_LONGROPE,    /* theta_i / ext_i, ext = long_factor when L > L_orig,
                            else short_factor; attention factor
                            sqrt(1 + ln(s) / ln(L_orig)) */
    RA_ROPE_TYPE_COUNT
} ra_rope_type;

/* 2-D (axial) RoPE, as vision encoders rotate an image's patches by their
 * (row, column) place on its grid (docs/ROPE.md).  With d = rotary_dim,
 * q = d / 4 pairs per axis and f_k = theta^(-2k/d) the default rope's
 * frequencies, pair i rotates by one component of the token's position:
 *
 *   RA_AXIAL_ALTERNATE (Pixtral's PixtralVisionRotaryEmbedding):
 *     pair i < q:   row * f_2i           (the even frequencies)
 *     pair q + j:   column * f_(2j+1)    (the odd ones)
 *   RA_AXIAL_SHARED (Qwen2-VL's, Qwen2.5-VL's VisionRotaryEmbedding; Llama 4's
 *     Llama4VisionRotaryEmbedding): each axis a rope of dim d / 2,
 *     theta^(-2j/(d/2)) = f_2j:
 *     pair i < q:   row * f_2i
 *     pair q + j:   column * f_2j
 *   axial_column_first swaps the axes (Llama 4: x, the column, first).
 *
 * Pairs are the layout's: Pixtral and Qwen rotate_half (RA_LAYOUT_HALF),
 * Llama 4 complex pairs (RA_LAYOUT_INTERLEAVED).  Positions are
 * ra_positions.axial_ids; the position is what multiplies the frequency:
 * Pixtral and Qwen the patch's (row, column) in its image (Qwen in its
 * merge blocks' order), Llama 4 (row + 1, column + 1) and its CLS token
 * (0, 0), the identity. */
typedef enum ra_rope_axial {
    RA_AXIAL_NONE = 0,      /* 1-D positions (or M-RoPE's 3-D) */
    RA_AXIAL_ALTERNATE = 1, /* Pixtral */
    RA_AXIAL_SHARED = 2,    /* Qwen2-VL, Qwen2.5-VL, Llama 4 */
    RA_AXIAL_COUNT
} ra_rope_axial;

/* How RoPE is computed: the type, the pairing, the head's size, the base,
 * and the parameters of the scaled types.  Zero means "not given"
 * everywhere, so ra_rope_config_hf() (or _default()) plus the fields a
 * checkpoint sets is a valid description. */
typedef struct ra_rope_config {
    size_t struct_size;    /* sizeof(ra_rope_config) */
    ra_rope_type type;
    ra_layout layout;
    int64_t head_dim;      /* D, even */
    int64_t rotary_dim;    /* features that rotate, even, <= D; 0 means D.
                              Features [rotary_dim, D) pass through unchanged
                              (partial rotary); the half layout pairs
                              (i, i + rotary_dim/2) */
    double theta;          /* base, 10000 in Meta's LLaMA code */
    int64_t table_size;    /* table rows precomputed; later positions are
                              computed on the fly, exactly but slower */
    /* The scaled types' parameters: */
    double factor;                   /* linear, dynamic, yarn, llama3 (required);
                                        yarn, longrope: 0 = max_position_embeddings /
                                        original_max_position_embeddings */
    int64_t original_max_position_embeddings; /* yarn (0: max_position_embeddings),
                                                 llama3, longrope (required) */
    int64_t max_position_embeddings; /* dynamic (required), and yarn/longrope when
                                        the factor or L_orig must be derived */
    int64_t seq_len;                 /* dynamic, longrope: the current sequence
                                        length L (0: not beyond the original).
                                        A rope object is for one L: when a
                                        sequence grows past the original
                                        length, make a rope for the new L, as
                                        transformers recomputes inv_freq
                                        (keys already cached keep the rotation
                                        they were written with).  Positions
                                        of a longer sequence are
                                        RA_ERR_POSITION on every path: from
                                        max(L, L0) on (dynamic), from L_orig
                                        on while L <= L_orig (longrope) */
    double attention_factor;         /* yarn, longrope: 0 = derive */
    double beta_fast, beta_slow;     /* yarn: 0 = 32 and 1; beta_fast >= beta_slow */
    double mscale, mscale_all_dim;   /* yarn: attention factor is
                                        mscale(factor, mscale) / mscale(factor, mscale_all_dim)
                                        when both are set */
    int yarn_no_truncate;            /* yarn: nonzero keeps the correction range
                                        unrounded (transformers' truncate = false) */
    double low_freq_factor, high_freq_factor; /* llama3 (required; low >= high:
                                                 no smoothed band) */
    const double *short_factor;      /* longrope: [rotary_dim / 2], copied */
    const double *long_factor;       /* longrope: [rotary_dim / 2], copied */
    /* M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): a token has three position
     * components, (temporal, height, width), and pair i rotates by
     * pos[c(i)] * theta_i, the component c(i) its section names.  Text
     * tokens have three equal components: the plain rope.  docs/ROPE.md. */
    int64_t mrope_section[3];        /* pairs per component, each >= 0, summing
                                        to rotary_dim / 2; all 0: no sections
                                        (1-D positions only) */
    int mrope_interleaved;           /* 0, chunked (Qwen2-VL, Qwen2.5-VL):
                                          c(i) = 0 for i < s0, 1 for i < s0 + s1,
                                          else 2;
                                        nonzero, interleaved (Qwen3-VL):
                                          c(i) = 1 if i % 3 == 1 and i < 3 s1,
                                          2 if i % 3 == 2 and i < 3 s2, else 0;
                                          needs 3 s1 <= rotary_dim / 2 + 1 and
                                          3 s2 <= rotary_dim / 2, so that each
                                          component gets its s_k pairs */
    /* Proportional RoPE (transformers' rope type "proportional", Gemma 4's
     * full layers): 0, every pair turns; n in [1, rotary_dim / 2], only
     * pairs i < n turn, by the type's theta_i (d stays rotary_dim), and the
     * pairs from n on have frequency 0: they pass through unchanged. */
    int64_t rotating_pairs;
    /* 2-D (axial) RoPE (ra_rope_axial above): the default type only
     * (RA_ERR_UNSUPPORTED otherwise, and with rotating_pairs), no
     * mrope_section (RA_ERR_ARGUMENT), rotary_dim a multiple of 4
     * (RA_ERR_HEAD_DIM: rows and columns take half the pairs each).  Such a
     * rope takes ra_positions.axial_ids only.  A layer (ra_layer_create)
     * takes one on its uncached calls (ra_layer_forward, the training
     * forward and backward, and their phased steps); its cached and paged
     * calls and the KV caches refuse it (RA_ERR_UNSUPPORTED), as
     * ra_layer_create does with kv_lora_rank or positions_are_slots. */
    ra_rope_axial axial;
    int axial_column_first; /* nonzero: the first d / 4 pairs take the column
                               (Llama 4); needs axial */
} ra_rope_config;

/* The two starting points, one per way of storing wq and wk (the layouts
 * drawn at the top of this header); they differ in the layout alone:
 *   ra_rope_config_default(D)  Meta's LLaMA reference code
 *                              (precompute_freqs_cis, apply_rotary_emb):
 *                              RA_LAYOUT_INTERLEAVED.  For weights as Meta
 *                              released them (consolidated.*.pth).
 *   ra_rope_config_hf(D)       Hugging Face transformers' default rope
 *                              (rope_type "default", rotate_half):
 *                              RA_LAYOUT_HALF.  For a checkpoint from the
 *                              Hub (wq, wk permuted): what the Python
 *                              package takes by default, and the CLI
 *                              with a config.json.
 * Both: type RA_ROPE_DEFAULT, every feature rotating (rotary_dim 0:
 * transformers' partial_rotary_factor 1), theta 10000 (LlamaConfig's
 * rope_theta), table_size 4096, the scaled types' parameters zero (no
 * rope_scaling).  Set the fields a config.json gives on top
 * (libropeattn_hf's ra_hf_rope_config reads them all). */
static inline ra_rope_config ra_rope_config_default(int64_t head_dim)
{
    ra_rope_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.head_dim = head_dim;
    c.theta = 10000.0;
    c.table_size = 4096;
    return c;
}

static inline ra_rope_config ra_rope_config_hf(int64_t head_dim)
{
    ra_rope_config c = ra_rope_config_default(head_dim);
    c.layout = RA_LAYOUT_HALF;
    return c;
}

typedef struct ra_rope ra_rope;

/* Parameters out of range for their type give RA_ERR_ARGUMENT, and so do
 * sections that are negative, do not sum to rotary_dim / 2, or (interleaved)
 * do not fit, and mrope_interleaved without sections; and so do parameters
 * whose inverse frequencies are not finite numbers (yarn with
 * theta 1, a factor of 1e-320), whose angles m * theta_i overflow before
 * RA_MAX_POSITION, or whose attention factor is not in (0, FLT_MAX] (yarn
 * with mscale 1e58): every table entry is a finite float32.  A theta, factor
 * or other positive parameter below DBL_MIN (subnormal) is RA_ERR_ARGUMENT
 * too, as the CLI refuses it. */
RA_API ra_status ra_rope_create(ra_rope **out, const ra_rope_config *config);
RA_API void ra_rope_destroy(ra_rope *rope); /* NULL is allowed */
RA_API const ra_rope_config *ra_rope_get_config(const ra_rope *rope);

/* The rope's inverse frequencies, theta_i for i in [0, rotary_dim/2) (a 2-D
 * rope: pair i's, as ra_rope_axial draws them), and its
 * attention factor (1 except for yarn and longrope), which multiplies every
 * cos and sin, as transformers does.
 *   inv_freq: [rotary_dim / 2] */
RA_API ra_status ra_rope_inverse_frequencies(const ra_rope *rope, double *inv_freq);
RA_API double ra_rope_attention_factor(const ra_rope *rope); /* 0 for NULL */

/* Where each token sits.  For token s of batch row b, with t = b * S + s
 * its index among all B * S tokens:
 *   mrope_ids   given: (mrope_ids[t], mrope_ids[stride + t],
 *               mrope_ids[2 stride + t]), the (temporal, height, width)
 *               position of an M-RoPE rope (ra_rope_config.mrope_section);
 *               a rope without sections refuses them (RA_ERR_ARGUMENT), and
 *               so does giving ids too
 *   axial_ids   given: (axial_ids[2 t], axial_ids[2 t + 1]), the (row,
 *               column) position of a 2-D rope (ra_rope_config.axial), which
 *               takes nothing else (RA_ERR_ARGUMENT), as other ropes refuse
 *               them; cu_seqlens, if set, does not change them
 *   ids         given: ids[t]                         (any order, repeats allowed)
 *   cu_seqlens  given: starts[i] (or start) + t - cu_seqlens[i], where
 *               sequence i holds tokens cu_seqlens[i] .. cu_seqlens[i+1] - 1:
 *               a packed ragged batch (x is usually [1, total, heads, D])
 *   otherwise:  starts[b] (or start) + s                (a start per sequence)
 * cu_seqlens has n_seqs + 1 entries, starts at 0, never decreases and ends
 * at B * S.  Positions must lie in [0, RA_MAX_POSITION].  Every mode but
 * mrope_ids gives a token one position m, which an M-RoPE rope reads as
 * (m, m, m): text tokens, the plain rope. */
typedef struct ra_positions {
    size_t struct_size;        /* sizeof(ra_positions) */
    int64_t start;
    const int64_t *ids;        /* [B, S] or NULL */
    const int64_t *starts;     /* [B], or [n_seqs] with cu_seqlens, or NULL */
    const int64_t *cu_seqlens; /* [n_seqs + 1] or NULL */
    int64_t n_seqs;
    const int64_t *mrope_ids;  /* [3, B, S] (component-major, as transformers'
                                  position_ids of Qwen2-VL) or NULL */
    int64_t mrope_stride;      /* elements from one component of mrope_ids to the
                                  next: 0 means B * S (a contiguous [3, B, S]);
                                  else at least B * S */
    const int64_t *axial_ids;  /* [B, S, 2] (row, column), as transformers'
                                  vision position_ids [N, 2], or NULL */
} ra_positions;

/* Positions start, start + 1, ... in every sequence (set ids, starts or
 * cu_seqlens afterwards for the other modes).  NULL positions mean
 * ra_positions_start(0) in ra_rope_apply, ra_layer_forward and
 * ra_layer_forward_train, and continuing from the cache's lengths in
 * ra_layer_forward_cached, ra_kv_cache_append, ra_kv_cache_attend and
 * ra_kv_pool_append. */
static inline ra_positions ra_positions_start(int64_t start)
{
    ra_positions p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.start = start;
    return p;
}

typedef enum ra_direction {
    RA_FORWARD = 0, /* rotate by +angle: a R_m x */
    RA_INVERSE = 1, /* rotate by -angle: a R_m^T x, the transpose of
                       RA_FORWARD and so its backward pass.  a is the rope's
                       attention factor: 1 except for yarn and longrope, where
                       RA_INVERSE after RA_FORWARD gives a^2 x rather than x */
} ra_direction;

/* The tables this rope uses for the given positions, as float32.  For an
 * M-RoPE rope these are the tables of text positions (all three components
 * m), which are the plain rope's.  cos, sin and positions must not overlap
 * (RA_ERR_ARGUMENT; in the two calls below too).
 *   positions: [n]   cos, sin: [n, rotary_dim / 2] */
RA_API ra_status ra_rope_table(const ra_rope *rope, float *cos, float *sin,
                               const int64_t *positions, int64_t n);

/* The same for 3-D positions of an M-RoPE rope: entry (t, i) is the table of
 * position positions[c(i) * n + t] at pair i, c(i) the component that
 * mrope_section gives pair i (transformers' cos/sin after its sections are
 * put together, first half).  A rope without sections: RA_ERR_ARGUMENT.
 *   positions: [3, n]   cos, sin: [n, rotary_dim / 2] */
RA_API ra_status ra_rope_table_mrope(const ra_rope *rope, float *cos, float *sin,
                                     const int64_t *positions, int64_t n);

/* The same for 2-D positions of an axial rope: entry (t, i) is pair i's
 * cos and sin at its axis's component of positions[t] (transformers'
 * cos/sin after recomposition, first half; Llama 4's freqs_ci as cos, sin).
 * Any other rope: RA_ERR_ARGUMENT, as an axial rope is in ra_rope_table and
 * ra_rope_table_mrope.
 *   positions: [n, 2] (row, column)   cos, sin: [n, rotary_dim / 2] */
RA_API ra_status ra_rope_table_axial(const ra_rope *rope, float *cos, float *sin,
                                     const int64_t *positions, int64_t n);

/* Rotates every head of x by its token's position: out = R x (or R^T x).
 * RA_INVERSE is RoPE's backward: for y = ra_rope_apply(x, RA_FORWARD),
 * dL/dx = ra_rope_apply(dL/dy, RA_INVERSE) at the same positions, for every
 * layout, rope type (attention factor included), partial rotary, dtype and
 * position mode (tests/test_rope_backward.c: <a R x, g> = <x, a R^T g>).
 * out and x have the same shape and dtype; out == x (the same data and
 * strides) rotates in place, and otherwise their memory must not overlap
 * (RA_ERR_ARGUMENT).  Computed in float32 and rounded once to the
 * storage dtype, as the reference code's .float() ... .type_as() does; a result
 * beyond the dtype's range is stored as +-Inf (see "Numbers at the edges").
 *   x, out: [B, S, heads, D] */
RA_API ra_status ra_rope_apply(ra_context *ctx, const ra_rope *rope,
                               const ra_tensor *out, const ra_tensor *x,
                               const ra_positions *positions,
                               ra_direction direction);

/* Contiguous float32 in place, start position start_pos: the common case.
 *   x: [B, S, heads, D] */
RA_API ra_status ra_rope_apply_f32(ra_context *ctx, const ra_rope *rope,
                                   float *x, int64_t batch, int64_t seq,
                                   int64_t heads, int64_t start_pos);

/* ------------------------------------------------------------------------ */
/* Causal grouped-query attention                                            */
/* ------------------------------------------------------------------------ */

typedef enum ra_attention_path {
    RA_PATH_AUTO = 0,  /* the fastest path available (flash) */
    RA_PATH_REFERENCE, /* the reference code's masked path: materializes [S, S] scores
                          per head; a readable oracle, O(S^2) memory */
    RA_PATH_FLASH,     /* tiled, online softmax; O(tile) extra memory a thread,
                          and 2 Sk D floats (one kv head's K and V, copied
                          contiguous) when more than one block of queries
                          reads them.  A call of at most 32 query rows per
                          kv head (S H / Hkv: a decoding step's) runs on
                          the decode kernel (ra_attention_decode's sums,
                          within float32 rounding of the tiles') unless it
                          asks for padding, documents, an attn_mask that
                          masks a key the causal mask lets a query see,
                          dropout, non_causal, or K and V of other dtypes
                          or row strides (a padding mask of ones and one
                          document count as none) */
    RA_PATH_COUNT
} ra_attention_path;

/* How ra_attention, ra_attention_forward_lse, ra_attention_backward and
 * the layer's forwards (ra_layer_forward, ra_layer_forward_train) run.
 * NULL options mean ra_attention_options_init(): RA_PATH_AUTO, no dropout
 * (inference), the plain causal mask.
 *
 * Dropout as in training: each probability is zeroed with probability p
 * and the survivors scaled by 1 / (1 - p).  The masks come from a
 * counter-based generator (Philox-4x32-10) keyed by seed and by the
 * element's index, so the same seed gives the same masks whatever the path
 * or thread count.  p = 0 is the identity (inference).  In the layer, p > 0
 * trains: dropout on the attention probabilities and on the output, as
 * LLaMA's attn_dropout and resid_dropout in train mode.
 *
 * Masks and logits, as Hugging Face transformers forms them (docs/MASKS.md);
 * each 0 or NULL means "none", any combination is allowed, and every path
 * gives them the same meaning.  Query i and key j are row indices of the
 * [B, S] grid (padding included).  Query i sees key j when all hold:
 *   causal                 j <= i
 *   window W               i - W < j            (W keys, i's own included)
 *   chunk C                (j - lp) / C == (i - lp) / C, floor division, lp
 *                          the row's count of leading padding tokens
 *                          (Llama 4's chunked attention)
 *   padding_mask           padding_mask[b * S + j] != 0
 *   cu_seqlens             i and j in the same document
 * A query that is itself padding (padding_mask 0) gives a zero output row,
 * lse -Inf and zero gradients, whatever it could see (transformers' sdpa
 * and flash paths give 0 to left-padding rows; its eager path, a mean of
 * v).  Logits: s = scale q.k, then with softcap c, s = c tanh(s / c) (Gemma
 * 2), before the mask.  Sinks (gpt-oss) add one logit per query head to
 * every row's softmax denominator, never masked:
 *   p_j = e^(s_j) / (sum over seen keys e^(s_k) + e^(sinks[h])),
 * so a row's probabilities sum to less than 1, and lse includes the sink. */
typedef struct ra_kv_cache ra_kv_cache;                 /* "KV cache and decoding" */

typedef struct ra_attention_options {
    size_t struct_size;     /* sizeof(ra_attention_options) */
    ra_attention_path path; /* RA_PATH_AUTO (0): the fastest */
    float dropout;          /* p, in [0, 1); 0: none */
    uint64_t seed;          /* the dropout masks' seed */
    double scale;           /* logit scale, finite and > 0; 0: 1 / sqrt(D) */
    double softcap;         /* c > 0: logits capped to (-c, c); 0: none */
    int64_t window;         /* W >= 1: sliding window; 0: none */
    int64_t chunk;          /* C >= 1: chunked attention; 0: none */
    const float *sinks;     /* [H] sink logits, finite; NULL: none */
    float *dsinks;          /* [H] ra_attention_backward's dL/dsinks (overwritten) when
                               sinks are given; NULL: not computed.  Not read elsewhere */
    const uint8_t *padding_mask; /* [B, S], 1 = real token, 0 = padding (Hugging Face's
                                    attention_mask); NULL: none */
    const int64_t *cu_seqlens;   /* [n_documents + 1]: packed documents, the same in every
                                    batch row: 0 = c[0] < c[1] < ... < c[n] = S, document d
                                    is tokens c[d] .. c[d + 1] - 1; NULL: one */
    int64_t n_documents;
    /* Beyond causal decoders (encoders, cross-attention, vision towers;
     * "Non-causal attention, other key lengths and arbitrary masks"
     * below).  0 / NULL: as before. */
    int non_causal;             /* nonzero: no causal mask, every query may see
                                   every key (the other masks still apply) */
    const ra_tensor *attn_mask; /* PyTorch SDPA's attn_mask over [B, H, Sq, Sk],
                                   boolean (RA_BOOL) or additive (f32, f16,
                                   bf16); NULL: none */
    /* nonzero, with non_causal and a window W: the window bounds only the
     * earlier keys, i + Sk - Sq - W < j, as it does under the causal mask,
     * and not the later ones (transformers' sliding layers under a
     * bidirectional mask: Gemma 3's image blocks); 0: both sides.  Without
     * non_causal or a window it changes nothing. */
    int window_earlier_only;
    /* nonzero: the decode calls (ra_attention_decode, ra_attention_decode_lse,
     * ra_attention_decode_paged, ra_kv_cache_attend) on an RA_I8 cache or
     * pool of head_dim D <= 1032 score each query row against the key codes
     * with the row quantized to int8 too, as llama.cpp's q8_0 dot products
     * ("Decoding with quantized queries" below); 0: exact.  Every other call
     * and cache refuses it (RA_ERR_UNSUPPORTED). */
    int quantize_q;
} ra_attention_options;

/* Non-causal attention, other key lengths and arbitrary masks.
 *
 * Key lengths: ra_attention, ra_attention_forward_lse and
 * ra_attention_backward take k and v [B, Sk, Hkv, D] of any length Sk >= 1,
 * Sq (q's) and Sk independent (cross-attention; a prefill of Sq new tokens
 * against Sk keys).  Query i stands at key row i + Sk - Sq (the diagonal
 * aligned bottom-right, as flash-attn and SDPA's causal_lower_right do: the
 * last query sees every key); with Sq = Sk that is i, as always.  The
 * causal mask is then j <= i + Sk - Sq, and a window W keeps
 * i + Sk - Sq - W < j.  With Sq != Sk, padding_mask, cu_seqlens and chunk
 * (which name one sequence) are RA_ERR_UNSUPPORTED: give attn_mask instead.
 *
 * non_causal: no causal mask.  A window W then bounds both sides,
 * |i + Sk - Sq - j| < W (W - 1 keys each way and the query's own: ModernBERT's
 * local attention of L tokens is W = L / 2 + 1); chunks and documents
 * keep a query inside its own, in both directions; padding as above.
 *
 * attn_mask: a 4-D view [B or 1, H or 1, Sq or 1, Sk or 1] (an extent of
 * 1 broadcasts, as does a zero stride; strides count elements and any
 * stride >= 0 is read, the last one included), as SDPA's attn_mask:
 *   RA_BOOL (one byte per element): nonzero = may attend, 0 = masked;
 *   RA_F32, RA_F16, RA_BF16: added to the logits after scale and
 *   soft-cap, s = c tanh(scale q.k / c) + attn_mask[b, h, i, j]; each
 *   value finite or -Inf (NaN or +Inf: RA_ERR_ARGUMENT naming the index).
 * It combines with every other mask of the options (a key is seen when all
 * allow it) and with sinks.  A query that sees no key (all masked, by any
 * combination) gives a zero output row, lse -Inf (with sinks: out 0, lse
 * the sink) and zero gradients, as PyTorch 2.5+'s SDPA gives zeros for
 * fully masked rows; a row whose additive values are all finite but huge
 * negative (transformers' finfo.min) is not fully masked and averages v,
 * as SDPA does.  The flash path skips key tiles the mask leaves empty.
 * The mask is a constant: the backward gives no gradient for it.  Decode
 * and cached calls (ra_attention_decode*, ra_layer_forward_cached, the
 * block calls) refuse attn_mask and non_causal (RA_ERR_UNSUPPORTED), but
 * for ra_layer_forward_cached_mask.
 * attn_mask must not overlap any output (RA_ERR_ARGUMENT). */
static inline ra_attention_options ra_attention_options_init(void)
{
    ra_attention_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    return o;
}

/* out = softmax(q k^T / sqrt(D) + causal mask) v, per query head, with query
 * head h reading key/value head h / (H / Hkv).  Query token i sees key tokens
 * j <= i, and options' masks, scale, soft-cap and sinks apply as described
 * above them.  Softmax in float32; dropout (if any) applies to the probabilities.
 * out is float32 [B, S, H, D]; q [B, S, H, D] and k, v [B, S, Hkv, D] are
 * f32, f16 or bf16 each (16-bit values are widened to float32, exactly, and
 * every sum runs in float32), with one exception: with q, k and v all bf16,
 * the flash path on the "amx" and "avx512bf16" kernels (ra_simd_name) runs
 * q k^T and P v on the CPU's bf16 units (AMX tiles, vdpbf16ps): the products
 * are exact and summed in float32, the softmax is float32, but P is rounded
 * to bf16 before P v (as FlashAttention does), and bf16 subnormals count as
 * zero.  Each output is then within 2^-8 max|v| (v over the keys its row
 * sees; times 1 / (1 - p) with dropout p) of the float32 path's on the
 * same values, plus the float32 sums' own error (seen: 1.3e-3 max|v| at
 * worst; tests/test_attention_bf16.c); the same bits for any thread count
 * still, and |q.k| beyond FLT_MAX is Inf before the scale applies.  RA_FORCE_ISA=avx512 keeps bf16 inputs on the
 * float32 path.  Extreme logits, NaN and Inf: "Numbers at the edges"
 * above.  out's memory must not overlap q's, k's or v's
 * (RA_ERR_ARGUMENT); q, k and v may share one fused buffer. */
RA_API ra_status ra_attention(ra_context *ctx, const ra_tensor *out, const ra_tensor *q,
                              const ra_tensor *k, const ra_tensor *v,
                              const ra_attention_options *options);

/* ra_attention that also keeps what the backward needs: lse[b, h, i] is the
 * natural log of the sum over visible keys j of exp(s_ij), the logits after
 * scale and soft-cap, plus exp(sinks[h]) with sinks, for query row i of head
 * h (before dropout), in float32; -Inf for a padding query.  out is the same
 * bits as ra_attention gives on the same path.  lse must not overlap out, q,
 * k or v (RA_ERR_ARGUMENT).
 *   lse: [B, H, S] float32, contiguous */
RA_API ra_status ra_attention_forward_lse(ra_context *ctx, const ra_tensor *out, float *lse,
                                          const ra_tensor *q, const ra_tensor *k,
                                          const ra_tensor *v,
                                          const ra_attention_options *options);

/* One block of a longer causal attention, for callers that split the
 * sequence themselves (ring attention: libropeattn_mpi; a prefill against
 * keys held elsewhere): query row i is the token at position q_start + i,
 * key row j the one at k_start + j, and query i sees key j when k_start + j
 * <= q_start + i and, with a window W, k_start + j > q_start + i - W, and
 * with chunked attention (chunk C) when both positions are in the same
 * chunk of C positions counted from position 0.  out
 * and lse are ra_attention_forward_lse's over the keys the row sees
 * (options' scale, softcap and sinks as there; a sink joins every block's
 * sum, so a caller that merges blocks passes none and adds it once).  A row
 * that sees no key of the block gets out 0 and lse -Inf (with sinks: the
 * sink), so that blocks merge exactly:
 *   lse = log(sum_b e^(lse_b)),  out = sum_b e^(lse_b - lse) out_b.
 * q_start, k_start in [0, RA_MAX_POSITION] (RA_ERR_POSITION); only their
 * difference matters, and the chunks' origin, position 0.
 *
 * Padding, packed documents and dropout describe the whole sequence of
 * seq tokens the block is part of: options' padding_mask is [B, seq] and
 * cu_seqlens runs from 0 to seq, both indexed by position, so that every
 * block of a split reads the same arrays; the masks apply as in
 * ra_attention (the chunks counted from each row's leading padding), a
 * padding query row gets out 0 and lse -Inf, and a row whose keys in the
 * block are all padding is a row that sees none.  Dropout drops the
 * elements of the whole sequence's [B, H, seq, seq] probabilities that
 * ra_attention's would for the same seed (out_b holds the dropped
 * probabilities times v over the block's undropped sum, so blocks merge as
 * above).  seq is in [0, RA_MAX_POSITION + 1] (RA_ERR_SIZE); with seq > 0
 * the block's rows must lie in the sequence (q_start + Sq <= seq and
 * k_start + Sk <= seq, else RA_ERR_POSITION); seq = 0: no sequence named,
 * and padding_mask, cu_seqlens or dropout is RA_ERR_ARGUMENT.  On the flash path, whatever options.path asks
 * (RA_PATH_REFERENCE: RA_ERR_UNSUPPORTED).  With q_start = k_start = 0 (or
 * no chunk) and Sk = Sq = seq (or seq = 0) the result is
 * ra_attention_forward_lse's, bit for bit.
 *   out, q: [B, Sq, H, D]   k, v: [B, Sk, Hkv, D]   lse: [B, H, Sq] float32,
 *   contiguous; dtypes as ra_attention's, overlaps refused as there */
RA_API ra_status ra_attention_block_lse(ra_context *ctx, const ra_tensor *out, float *lse,
                                        const ra_tensor *q, const ra_tensor *k,
                                        const ra_tensor *v, int64_t q_start, int64_t k_start,
                                        int64_t seq, const ra_attention_options *options);

/* The backward of one block (ra_attention_block_lse's query and key rows,
 * at q_start + i and k_start + j, and its masks): adds to dq the gradient
 * through the keys of this block, and to dk and dv the gradient from these
 * queries, so that blocks summed over a split of the sequence give
 * ra_attention_backward (within float32 rounding: the sums run in another
 * order).  out and lse are the whole attention's, each row's over all its
 * keys (ra_attention_forward_lse's, or the blocks' merge), not the block's:
 * the probabilities are exp(s - lse) and Delta = rowsum(dout * out), as in
 * ra_attention_backward's flash path.  dq, dk and dv are accumulated into
 * (zero them before the first block); options' sinks are already in lse
 * and change nothing here, and dsinks (-sum over the rows of
 * e^(sinks[h] - lse) Delta, no key in it) is RA_ERR_UNSUPPORTED: the
 * caller computes it once.  seq, options, paths and dtypes as
 * ra_attention_block_lse's (its masks, chunk, padding, documents and
 * dropout included; the reference path refused); views and overlaps as
 * ra_attention_backward's.  The same bits for any thread count.
 *   dq, dout, q, out: [B, Sq, H, D]   dk, dv, k, v: [B, Sk, Hkv, D]
 *   lse: [B, H, Sq] */
RA_API ra_status ra_attention_block_backward(ra_context *ctx, const ra_tensor *dq,
                                             const ra_tensor *dk, const ra_tensor *dv,
                                             const ra_tensor *dout, const ra_tensor *q,
                                             const ra_tensor *k, const ra_tensor *v,
                                             const ra_tensor *out, const float *lse,
                                             int64_t q_start, int64_t k_start, int64_t seq,
                                             const ra_attention_options *options);

/* The backward of out = ra_attention(q, k, v, options): given dout = dL/dout,
 * writes dq = dL/dq, dk = dL/dk and dv = dL/dv.  They are overwritten, not
 * accumulated, and are float32 views that must not overlap one another nor
 * any input (RA_ERR_ARGUMENT); views interleaved row by row in one buffer,
 * as dq, dk and dv inside a fused dQKV gradient, do not count as
 * overlapping.  q, k, v and options are what the forward took (each f32,
 * f16 or bf16, widened exactly: the reference path widens a 16-bit q once
 * into scratch, the flash path a block of rows at a time; the gradients
 * are float32 regardless; with q, k and v all bf16 the flash
 * path on the "amx" and "avx512bf16" kernels runs its five GEMMs on the
 * bf16 units instead, as ra_attention does: below); the dropout masks
 * are regenerated from the seed, never stored.  out and lse are what
 * ra_attention_forward_lse wrote for those inputs: the flash path needs
 * both (RA_ERR_NULL without them); the reference path recomputes the
 * probabilities and does not read them (either may be NULL; an out given is
 * still checked).
 *
 * With options' sinks and dsinks, dsinks[h] = dL/dsinks[h] = -sum over b and
 * i of p_sink(b, h, i) rowsum(dout * out)(b, h, i), p_sink = e^(sinks[h] - lse).
 * GQA: dk and dv of kv head g sum the query heads g * rep .. g * rep + rep - 1
 * in that order.  The softmax backward runs in float32, as the forward:
 *   dP = (dout v^T) * mask / (1 - p),  dS = P * (dP - rowsum(P * dP)),
 *   dq = dS k s,  dk = dS^T q s,  dv = (P * mask / (1 - p))^T dout  (s: the
 *   softmax scale, 1 / sqrt(D) unless options give one)
 * Memory: the reference path materializes [S, S] per head; the flash path
 * recomputes the probabilities tile by tile from lse (rowsum(P * dP) is
 * rowsum(dout * out)) and needs O(B H S D) scratch (a dk and a dv per query
 * head, summed over each group at the end) plus O(tile) per thread, never
 * O(S^2).  Either path gives the same bits for any thread count.
 *
 * bf16 units: the products of q, k, v (exact) sum in float32, and each
 * GEMM's float32 operand is rounded to bf16 first, as FlashAttention-2's
 * bf16 backward does: P / (1 - p) (kept) and dout for dv, dout for dP,
 * dS for dq and dk; the softmax, Delta = rowsum(dout * out), dS, dsinks
 * and every sum stay float32, and bf16 subnormals count as zero.  Against
 * the float32 path on the same values, with u = 2^-8 (bf16's rounding), s
 * the softmax scale (1 / sqrt(D) unless options give one), Pd = P * mask /
 * (1 - p) and w_i = (max|v| + max|out|) sum_d |dout_id| / (1 - p):
 *   |err dv_j| <= 2u (Pd^T |dout|)_j,  |err dq_i| <= 2u s max|k| w_i,
 *   |err dk_j| <= 2u s max|q| sum_i P_ij w_i,
 * plus the float32 sums' own error (seen: 0.62, 0.09 and 0.12 of those
 * bounds at worst; tests/test_attention_bf16_backward.c).  dsinks is the
 * float32 path's, bit for bit.
 *   dq, dout, q, out: [B, S, H, D]   dk, dv, k, v: [B, S, Hkv, D]
 *   lse: [B, H, S] */
RA_API ra_status ra_attention_backward(ra_context *ctx, const ra_tensor *dq,
                                       const ra_tensor *dk, const ra_tensor *dv,
                                       const ra_tensor *dout, const ra_tensor *q,
                                       const ra_tensor *k, const ra_tensor *v,
                                       const ra_tensor *out, const float *lse,
                                       const ra_attention_options *options);

/* ------------------------------------------------------------------------ */
/* KV cache and decoding                                                     */
/* ------------------------------------------------------------------------ */

/* One layer's keys and values for generation: K and V, each
 * [B, capacity, Hkv, D] in f32, f16, bf16, int8 or fp8, and a length per sequence
 * (the tokens appended so far).  Keys are stored already rotated.  A
 * token's cache position p is its order of arrival in its sequence (0, 1,
 * ...: what decode's masks count) and it sits in slot p % capacity; its
 * RoPE position is whatever the caller says (ra_positions), so callers may
 * slide windows or evict.
 *
 * Two kinds: ra_kv_cache_create makes a full cache, which holds every token
 * (slot p is token p) until the capacity, past which an append is
 * RA_ERR_CACHE_FULL.  ra_kv_cache_create_window makes a rolling cache for a
 * sliding-window layer (window W: each query sees its own token and the
 * W - 1 before it): capacity = W - 1 + max_new slots used as a ring, so that
 * a conversation of any length takes O(W) memory while positions (and the
 * length) keep counting every token.  One append gives it at most max_new
 * tokens per sequence (RA_ERR_CACHE_FULL beyond: they would overwrite keys
 * of their own windows).
 *
 * 8-bit caches (any kind; a latent cache's row [kr | c] is one row, of
 * one int8 scale, its K and V scales one and the same: fp8's set equal)
 * hold a quarter of an f32 cache's bytes, and decoding reads
 * them as such, dequantizing each row as it is loaded:
 *   RA_I8: each token's row of each kv head (D values x) is stored as
 *     codes c = round(x / s) (to nearest, ties to even; |c| <= 127) with its
 *     own scale s = max|x| / 127 in float32, beside the codes ([B, Hkv,
 *     capacity] scales for K and for V): symmetric, as vLLM's and
 *     llama.cpp's q8_0 caches (whose blocks are 32 values).  A row of
 *     zeros has s = 0; a row that holds a NaN or an Inf is stored as NaN
 *     (s = NaN): it reaches exactly the outputs that read that token.
 *     Error: |x - s c| <= s / 2 = max|x| / 254 per value (about that
 *     much more where s is below FLT_MIN: a row whose max|x| is under
 *     127 FLT_MIN, whose scale keeps fewer bits).
 *   RA_F8E4M3: each value is stored as c = e4m3(x / s) with s the kv
 *     head's scale for K or for V (ra_kv_cache_set_scales; 1 until set, as
 *     vLLM's k_scale and v_scale without calibration): 1 sign, 4 exponent
 *     bits (bias 7) and 3 mantissa bits, rounded to nearest, ties to even;
 *     largest 448, no Inf.  Finite values beyond +-448 s saturate to
 *     +-448 s (as vLLM's and FlashInfer's conversions do); NaN and +-Inf are
 *     stored as NaN (0x7f / 0xff), so that they reach the outputs that read
 *     them as in the other caches.  Error: 2^-4 of |x| (relative) from
 *     2^-6 s up, 2^-10 s below.
 * ra_kv_cache_views refuses an 8-bit cache (RA_ERR_DTYPE: its codes mean
 * nothing without their scales); ra_kv_cache_read gives any cache's tokens
 * in float32. */

RA_API ra_status ra_kv_cache_create(ra_kv_cache **out, int64_t batch, int64_t capacity,
                                    int64_t n_kv_heads, int64_t head_dim, ra_dtype dtype);
/* window, max_new >= 1 (RA_ERR_SIZE); W - 1 + max_new slots. */
RA_API ra_status ra_kv_cache_create_window(ra_kv_cache **out, int64_t batch, int64_t window,
                                           int64_t max_new, int64_t n_kv_heads,
                                           int64_t head_dim, ra_dtype dtype);
/* A latent cache for a latent-attention layer (ra_layer_config.kv_lora_rank
 * r): each token's row holds its rotated shared key, then its latent c,
 * [B, capacity, 1, rope_dim + r] (the views' k; v is the same storage).
 * (r + rope_dim) values a token: 576 for DeepSeek-V3, where per-head keys
 * and values would take 2 * 128 * 192.  Filled by ra_layer_forward_cached
 * of such a layer (ra_kv_cache_append refuses it: RA_ERR_ARGUMENT).
 * ra_attention_decode on it is the absorbed attention core (FlashMLA's):
 * out = softmax(scale q row^T) row for q [B, T, H, rope_dim + r], every
 * head reading each row once; out's last r features are the latent output
 * (its first rope_dim, the same weights applied to the keys' rope parts). */
RA_API ra_status ra_kv_cache_create_latent(ra_kv_cache **out, int64_t batch, int64_t capacity,
                                           int64_t kv_lora_rank, int64_t rope_dim,
                                           ra_dtype dtype);
RA_API void ra_kv_cache_destroy(ra_kv_cache *cache); /* NULL is allowed */
RA_API void ra_kv_cache_reset(ra_kv_cache *cache);   /* every length back to 0 */
/* Tokens appended to sequence b (a window cache holds the last capacity of
 * them), or -1 for a bad argument (ra_last_error says which). */
RA_API int64_t ra_kv_cache_length(const ra_kv_cache *cache, int64_t b);
/* The dtype the cache stores, as created (a latent cache's too). */
RA_API ra_status ra_kv_cache_dtype(const ra_kv_cache *cache, ra_dtype *out);
/* Tokens sequence b can take in its next append (RA_ERR_CACHE_FULL beyond):
 * a full cache's capacity less its length, a window cache's max_new; -1 for
 * a bad argument. */
RA_API int64_t ra_kv_cache_room(const ra_kv_cache *cache, int64_t b);
/* Views of the whole storage, [B, capacity, Hkv, D] each (read-only use):
 * capacity is k->shape[1], and the token at position p, one of the last
 * capacity of its sequence, is at index p % capacity of axis 1 (p itself
 * in a full cache; in a window cache the ring wraps, and the slots of
 * tokens older than length - capacity hold newer ones).  The storage is
 * head-major, [B, Hkv, capacity, D] in memory, so that a decode step reads
 * each kv head's keys as one sequential run: index the views through their
 * strides, never as if contiguous.  Given back to the cache's own calls
 * as a decode's out or an append's q, k or v they are RA_ERR_ARGUMENT. */
RA_API ra_status ra_kv_cache_views(const ra_kv_cache *cache, ra_tensor *k, ra_tensor *v);

/* The keys and values of sequence b's tokens at positions from .. from +
 * n - 1, n = k->shape[1], in float32 (an 8-bit cache's dequantized: s c):
 * what decoding reads.  The cache must still hold them: from >= 0, from +
 * n <= length[b], and in a window cache from >= length[b] - capacity (else
 * RA_ERR_ARGUMENT).  Not for a latent cache (RA_ERR_ARGUMENT: its views
 * are its rows).
 *   k, v: [1, n, Hkv, D] f32 (any strides; written, must not overlap) */
RA_API ra_status ra_kv_cache_read(const ra_kv_cache *cache, int64_t b, int64_t from,
                                  const ra_tensor *k, const ra_tensor *v);

/* An fp8 cache's scales, one per kv head for K and for V: n_scales = Hkv,
 * or 1 for one scale per layer (vLLM's k_scale and v_scale; FlashInfer's
 * per-head scales), each a normal float (>= FLT_MIN, as the CLI's
 * --cache-scale: a subnormal scale keeps fewer bits, and is 0 in a thread
 * that flushes subnormals) and at most FLT_MAX / 448 (448 s must be a
 * float); else RA_ERR_ARGUMENT.  Only on an RA_F8E4M3 cache (RA_ERR_DTYPE) that
 * holds no token, every length 0 (after creation or ra_kv_cache_reset;
 * else RA_ERR_ARGUMENT: the codes stored were made with the old scales).
 * A value x is stored as e4m3(x / s): choose s near max|x| / 448 for the
 * layer's keys (values), or larger. */
RA_API ra_status ra_kv_cache_set_scales(ra_kv_cache *cache, const float *k_scales,
                                        const float *v_scales, int64_t n_scales);

/* Appends n_new[b] tokens to sequence b (NULL: S for every sequence), in one
 * pass: q and k are rotated in place by the tokens' positions, and k and v
 * are written (converted to the cache's dtype; 8-bit caches: quantized as
 * "KV cache and decoding" says) as the tokens at cache
 * positions length[b] .. length[b] + n_new[b] - 1 (16-bit caches: values
 * beyond the dtype's range stored as +-Inf); then the lengths advance.
 * positions NULL continues each sequence: its tokens at RoPE positions
 * length[b], length[b] + 1, ... (as ra_layer_forward_cached).
 * q, k and v are f32, f16 or bf16 each, as ra_attention's: a 16-bit k or v
 * is widened exactly, rotated in float32 and stored from there, so the
 * cache holds the same bits as for the f32 input of the same values
 * (tests/test_kvcache.c); q and k are rotated in place in their own dtype
 * (as ra_rope_apply rounds, once).
 * Token s of sequence b is row s of the inputs (s < n_new[b]).  A sequence
 * that would pass a full cache's capacity, or a window cache's max_new,
 * gives RA_ERR_CACHE_FULL and changes nothing.  q, k and v may be heads
 * of one fused QKV buffer, but no two may share an element
 * (RA_ERR_ARGUMENT; views with different strides must not overlap at all).
 * rope NULL: k is stored as given (keys rotated already, as a phased
 * layer step's are: ra_layer_forward_cached_begin), q is left alone and positions are not read.
 *   q: [B, S, H, D] or NULL    k, v: [B, S, Hkv, D]    f32, f16 or bf16 */
RA_API ra_status ra_kv_cache_append(ra_context *ctx, ra_kv_cache *cache, const ra_rope *rope,
                                    const ra_tensor *q, const ra_tensor *k,
                                    const ra_tensor *v, const ra_positions *positions,
                                    const int64_t *n_new);

/* Attention of the last appended tokens of each sequence against the
 * cache: with n = n_query[b] (at most T and at most length[b], else
 * RA_ERR_ARGUMENT or RA_ERR_SIZE; NULL: T for all), query row t < n of
 * sequence b is the token at cache position p = length[b] - n + t and sees
 * the keys at positions j <= p that options' masks let it see, as
 * ra_attention over the whole sequence would (the same query and key
 * indices): j > p - W (window W), j / C == p / C (chunk C, counted from
 * position 0), with options' scale, softcap and sinks.  Rows t >= n of
 * out are left as they were.  NULL options: causal attention at scale
 * 1 / sqrt(D).  The path is ignored (decode has one).  Refused with
 * RA_ERR_UNSUPPORTED: dropout > 0 (decode is inference), padding_mask and
 * cu_seqlens (the cache's per-sequence lengths replace padding: a sequence
 * holds only its real tokens).  On a window cache of window W the options
 * must set a window or a chunk, the smaller of those set at most W
 * (RA_ERR_ARGUMENT: older keys are gone), and n is at most its max_new
 * (RA_ERR_SIZE); a chunked layer (chunk C) uses a window cache of window C.  Only the keys some row sees are
 * read: a window of W costs O(W), not O(length).  The visible keys are
 * split into chunks across threads (flash-decoding) and the partial softmax
 * sums are merged exactly, in a fixed order: the same bits for any thread
 * count, and for a full and a window cache holding the same tokens.  GQA:
 * each K/V row is read once for its whole group of query heads.  An 8-bit
 * cache's rows are dequantized as they are loaded: scores are (q . c) s_k,
 * and each value row's weight p becomes p s_v; the result is the
 * attention over ra_kv_cache_read's values to float32 rounding.  q may be
 * f32, f16 or bf16 (widened exactly: the same bits as its f32 values
 * give), out is f32, as in ra_attention.
 *   q, out: [B, T, H, D] */
RA_API ra_status ra_attention_decode(ra_context *ctx, const ra_kv_cache *cache,
                                     const ra_tensor *out, const ra_tensor *q,
                                     const int64_t *n_query,
                                     const ra_attention_options *options);

/* ra_attention_decode that also writes each row's lse (as
 * ra_attention_forward_lse defines it) and may place the queries: with
 * q_start NULL, out is ra_attention_decode's, bit for bit.  With q_start
 * [B], query row t < n of sequence b is the token at position q_start[b] +
 * t, which need not be cached here: it sees the cached keys j <= that
 * position (and j > it - W with a window W; (k + j) / C == (k + its) / C
 * with a chunk C, k = k_start[b], NULL: 0), so the cache may hold one
 * contiguous shard of a longer sequence whose tokens it numbers from 0
 * (libropeattn_mpi's sharded decode: q_start = the queries' global position
 * less the shard's first, k_start = that first, where chunks count from).
 * A row that sees no key gets out 0 and lse -Inf (with sinks: the sink).
 * With q_start, |q_start[b]| <= RA_MAX_POSITION and k_start[b] in [0,
 * RA_MAX_POSITION] (RA_ERR_POSITION), n_query[b] need not be at most
 * length[b], and a window cache is RA_ERR_UNSUPPORTED; k_start without
 * q_start is RA_ERR_ARGUMENT.
 *   q, out: [B, T, H, D] (dtypes as ra_attention_decode's)
 *   lse: [B, H, T] float32, contiguous */
RA_API ra_status ra_attention_decode_lse(ra_context *ctx, const ra_kv_cache *cache,
                                         const ra_tensor *out, float *lse, const ra_tensor *q,
                                         const int64_t *n_query, const int64_t *q_start,
                                         const int64_t *k_start,
                                         const ra_attention_options *options);

/* Decoding with quantized queries (ra_attention_options' quantize_q,
 * opt-in; exact is the default).  On an RA_I8 cache or pool, each query
 * row of the decode calls, times the logit scale (in float32), x [D], is
 * quantized as the cache's rows are (once a call): one scale s_q = max|x| /
 * 127 and codes c_q = round(x / s_q) (to nearest, ties to even in any
 * rounding mode, though s_q and x / s_q round as the FP environment says;
 * |c_q| <= 127); a row of zeros has codes 0 and s_q 0, a row holding a
 * NaN or an Inf s_q NaN (its outputs are NaN).  Each score is then
 * ((float)(c_q . c) s_q) s_k, in that order,
 * the integer c_q . c summed exactly (D <= 1032 keeps every partial sum
 * below 2^24): on AVX512-VNNI's vpdpbusd where the CPU has it (the
 * "avx512bf16" and "amx" kernels), else in float32 on the codes' values;
 * the scores are the same bits either way.  Soft-cap, masks, sinks, softmax and values are the
 * exact path's.  Outputs keep their bits across thread counts, and a
 * window cache or a pool gives a full cache's bits; across kernels
 * (ra_simd_name) they may differ in the last bits, as the exact path's do.
 * Error against the exact path, on keys (and queries) with a few channels
 * 20 (10) times the rest, as LLaMA-class models have, logits of RMS 3
 * (tests/test_decode_q8.c): outputs within 3.5e-3 max|v|, logits within
 * 0.062 (RMS 0.009): a row's step max|x| / 127 is set by its outlier
 * channels, and each other channel carries up to half of it.  Every other
 * call (ra_attention, the forward, backward and block calls, the layers),
 * every other cache dtype and D > 1032 refuse quantize_q
 * (RA_ERR_UNSUPPORTED).  Time: docs/perf/2026-12-07-decode-q8.md. */

/* A decoding step in one call: ra_kv_cache_append(ctx, cache, rope, q, k,
 * v, positions, n_new), then ra_attention_decode(ctx, cache, out, q,
 * n_new, options) of the tokens it appended: query row t < n_new[b] of
 * sequence b (NULL: T for all) is the new token at cache position
 * length[b] + t (length before the call) and attends over the cache up to
 * itself, with options' masks; rows t >= n_new[b] of out are left as they
 * were.  out is the same bits as those two calls give; every argument of
 * both is checked before anything is written (a refusal changes neither
 * the cache nor q, k, v, out).  q is required (rotated in place as the
 * append does); out must not overlap q, k or v.
 *   q: [B, T, H, D]  k, v: [B, T, Hkv, D]  (f32, f16 or bf16 each)
 *   out: [B, T, H, D] f32 */
RA_API ra_status ra_kv_cache_attend(ra_context *ctx, ra_kv_cache *cache, const ra_rope *rope,
                                    const ra_tensor *out, const ra_tensor *q,
                                    const ra_tensor *k, const ra_tensor *v,
                                    const ra_positions *positions, const int64_t *n_new,
                                    const ra_attention_options *options);

/* A paged KV pool, for serving many sequences of one layer (vLLM's
 * PagedAttention, FlashInfer's paged cache): n_pages pages of page_size
 * tokens each (any page_size >= 1; 16 as vLLM, or more: bigger pages read
 * a little faster, docs/DESIGN.md), K and V each n_pages * Hkv * page_size
 * rows of D in f32, f16, bf16, int8 or fp8 (8-bit as in a cache: "KV cache
 * and decoding"; int8's scales are per row, fp8's per kv head of the pool,
 * ra_kv_pool_set_scales).  Pages come in groups of 1024 / page_size pages
 * (at least one), each kv head's rows of a group's pages one run, and a
 * sequence's next page is the next of its group while that one is free:
 * so a decode reads a sequence's rows in runs as from a contiguous cache.
 * At most max_sequences sequences live at once, each in a slot of
 * [0, max_sequences) with a block table (its pages, in position order), a
 * length, and a window.  A sequence's id is its slot in the low 32 bits
 * and, above them, how many sequences the slot held before: the first
 * sequence of each slot has the slot's small id, and an id is never
 * reused, so a freed sequence's id is refused by every call (RA_ERR_ARGUMENT
 * naming it freed) where it would have named the slot's next sequence.
 *   - ra_kv_pool_add_sequence makes an empty sequence; window 0 keeps
 *     every token, window W >= 1 is a sliding-window sequence: an append
 *     of n >= 1 tokens first releases the pages whose tokens all lie
 *     before the first key its first new token sees (position length -
 *     W + 1), so a conversation takes about W / page_size + 1 pages.  The
 *     window is per sequence (layers of several windows use one pool each).
 *   - ra_kv_pool_fork makes a sequence that shares every page of its
 *     parent (a common prompt, beams, parallel samples): the pages are
 *     reference counted, and the first append to either sequence copies
 *     the last page if it is partial and still shared (copy on write);
 *     full pages are never written again, so stay shared.
 *   - ra_kv_pool_free_sequence gives its pages back (those no other
 *     sequence holds) and its slot for reuse (not its id).
 * Pages run out as a whole: an append that needs more pages than are free
 * (counting those its windows release) is RA_ERR_CACHE_FULL naming the
 * sequence that needs the most, and changes nothing; so is an add or fork
 * past max_sequences.  Thread safety: as an ra_kv_cache (decodes may run at
 * once; the other calls write the pool and need it to themselves). */
typedef struct ra_kv_pool ra_kv_pool;

/* Every size >= 1 (RA_ERR_SIZE), head_dim even (RA_ERR_HEAD_DIM), n_pages
 * and max_sequences at most INT32_MAX (RA_ERR_OVERFLOW, as too many bytes
 * are); every page is allocated here (appends and forks allocate only
 * block tables). */
RA_API ra_status ra_kv_pool_create(ra_kv_pool **out, int64_t n_pages, int64_t page_size,
                                   int64_t max_sequences, int64_t n_kv_heads, int64_t head_dim,
                                   ra_dtype dtype);
RA_API void ra_kv_pool_destroy(ra_kv_pool *pool); /* NULL is allowed */
/* A new empty sequence's id (in the lowest free slot) into *id; window >= 0. */
RA_API ra_status ra_kv_pool_add_sequence(ra_kv_pool *pool, int64_t window, int64_t *id);
/* A new sequence holding parent's tokens (its pages shared), window and
 * length; its id into *id. */
RA_API ra_status ra_kv_pool_fork(ra_kv_pool *pool, int64_t parent, int64_t *id);
RA_API ra_status ra_kv_pool_free_sequence(ra_kv_pool *pool, int64_t id);
/* Tokens appended to sequence id (a window sequence holds the last ones),
 * or -1 for a bad argument (ra_last_error says which). */
RA_API int64_t ra_kv_pool_length(const ra_kv_pool *pool, int64_t id);
/* Pages no sequence holds (n_pages - this are in use; a page shared by
 * forks counts once), or -1 for a NULL pool. */
RA_API int64_t ra_kv_pool_free_pages(const ra_kv_pool *pool);
/* An fp8 pool's scales, as ra_kv_cache_set_scales: only on an RA_F8E4M3
 * pool (RA_ERR_DTYPE) whose pages are all free (RA_ERR_ARGUMENT). */
RA_API ra_status ra_kv_pool_set_scales(ra_kv_pool *pool, const float *k_scales,
                                       const float *v_scales, int64_t n_scales);

/* ra_kv_cache_append for n_ids sequences of a pool: row i of the inputs
 * is sequence ids[i] (each id once, RA_ERR_ARGUMENT), whose n_new[i]
 * tokens (NULL: S) are rotated and stored as its next positions, in new
 * pages as it needs them; the same dtypes, rotation, rounding and
 * quantization as a cache's, and positions NULL continues each sequence
 * (RoPE positions from its length).  RA_ERR_CACHE_FULL (nothing changed)
 * when the pool lacks the pages.
 *   q: [N, S, H, D] or NULL    k, v: [N, S, Hkv, D]    N = n_ids
 *   (f32, f16 or bf16 each) */
RA_API ra_status ra_kv_pool_append(ra_context *ctx, ra_kv_pool *pool, const ra_rope *rope,
                                   const int64_t *ids, int64_t n_ids, const ra_tensor *q,
                                   const ra_tensor *k, const ra_tensor *v,
                                   const ra_positions *positions, const int64_t *n_new);

/* ra_attention_decode over n_ids sequences of a pool, of any lengths, in
 * one call (continuous batching): row i of q and out is sequence ids[i]
 * (repeats allowed), its query rows the tokens at positions length - n +
 * t, with the same masks, checks and refusals as ra_attention_decode.
 * The result is the same bits as ra_attention_decode on a contiguous cache
 * holding the same tokens, for any thread count and any page size: the
 * same chunks of positions and the same merge, each key's row found
 * through the block table.  A window sequence (window W) needs options
 * with a window or chunk of at most W (RA_ERR_ARGUMENT), and its queries
 * may see back only to the keys kept for its last append's tokens
 * (RA_ERR_SIZE beyond: their pages are released).
 *   q, out: [N, T, H, D] (dtypes as ra_attention_decode's)    N = n_ids */
RA_API ra_status ra_attention_decode_paged(ra_context *ctx, const ra_kv_pool *pool,
                                           const int64_t *ids, int64_t n_ids,
                                           const ra_tensor *out, const ra_tensor *q,
                                           const int64_t *n_query,
                                           const ra_attention_options *options);

/* ------------------------------------------------------------------------ */
/* The attention layer: LLaMA's Attention module                              */
/* ------------------------------------------------------------------------ */

typedef struct ra_layer_config {
    size_t struct_size; /* sizeof(ra_layer_config) */
    int64_t dim;        /* model width: x's and y's last dimension */
    int64_t n_heads;    /* H */
    int64_t n_kv_heads; /* Hkv; 0 means n_heads (LLaMA's None) */
    int64_t head_dim;   /* D; 0 means dim / n_heads (LLaMA's rule).  H * D
                           may differ from dim, as in Qwen3, Gemma or
                           Mistral-Nemo (wq [H * D, dim], wo [dim, H * D]) */
    const ra_rope_config *rope; /* copied at creation; its head_dim is set
                           from the layer's.  NULL: ra_rope_config_default
                           (Meta's interleaved pairs) */
    int no_rope;        /* nonzero: q and k are not rotated (rope ignored;
                           every angle is 0, on every path) — a layer
                           without position information, for ablations
                           (like Hugging Face's no_rope_layers) */
    double norm_eps;    /* epsilon of the q and k norms (weights.q_norm, and
                           qk_l2_norm's) and of weights.o_norm:
                           0 means 1e-6 (Qwen3's rms_norm_eps), else in
                           (0, 1) (RA_ERR_ARGUMENT) */
    int norm_whole;     /* nonzero: q_norm [H * D] and k_norm [Hkv * D] each
                           normalize all of q's (k's) features of a token at
                           once (OLMo 2); 0: one head at a time (Qwen3) */
    int norm_head_weights; /* nonzero: one head at a time, each head with its
                           own D weights: q_norm [H * D], k_norm [Hkv * D]
                           (Cohere, StableLM 2); not with norm_whole
                           (RA_ERR_ARGUMENT); 0: the heads share q_norm [D] */
    int norm_layer;     /* nonzero: the q and k norms are LayerNorms,
                           w * (x - mean) / sqrt(var + norm_eps) (Cohere,
                           StableLM 2), + b where weights.q_norm_bias and
                           k_norm_bias are given (Persimmon); 0: RMSNorms */
    double scale;       /* the softmax scale s in softmax(s q k^T): 0 means
                           1/sqrt(head_dim); else positive, with
                           scale * sqrt(head_dim) at most FLT_MAX
                           (Granite's attention_multiplier, Gemma's
                           query_pre_attn_scalar^-1/2).  Applied to q before
                           RoPE as the factor s sqrt(head_dim), on every path */
    double clip_qkv;    /* 0: none; else positive: q, k and v are clamped to
                           [-clip_qkv, clip_qkv] after their projections and
                           biases, before the norms (OLMo's clip_qkv; after
                           them with clip_after_norm, below) */
    int qk_l2_norm;     /* nonzero: as after RoPE, each head of q and of k is
                           divided by its root mean square, x / sqrt(mean(x^2)
                           + norm_eps), without weights (Llama 4's L2Norm).
                           Computed before RoPE, which keeps a head's RMS, to
                           the same result; a rope whose attention factor is
                           not 1 (yarn, longrope) breaks that: with it,
                           RA_ERR_UNSUPPORTED */
    double temperature_floor; /* 0: none; else positive: q of the token at
                           position p is multiplied by 1 + temperature_scale *
                           log1p(floor((p + 1) / temperature_floor)), Llama
                           4's attention temperature tuning (floor_scale,
                           attn_scale) for its layers without RoPE (p
                           without the + 1: temperature_no_offset).  p is the
                           token's position as given (transformers uses
                           cache_position: the same unless ids are given).
                           The factor at RA_MAX_POSITION must be at most
                           FLT_MAX (else RA_ERR_ARGUMENT); a rope with
                           mrope sections has no one position to take it
                           from: RA_ERR_UNSUPPORTED */
    double temperature_scale; /* finite; used only with temperature_floor */
    /* The masks and logit changes of ra_attention_options that belong to
     * the layer (0: none), given to its attention on every path and in
     * the KV cache: a sliding window (Mistral, Qwen2's upper layers, Gemma
     * 2 and 3's sliding layers, gpt-oss), chunks (Llama 4's RoPE layers)
     * and soft-capped logits (Gemma 2's attn_logit_softcapping).  Sinks
     * are a weight (ra_layer_weights.sinks). */
    int64_t window;     /* W >= 1, or 0 */
    int64_t chunk;      /* C >= 1, or 0 */
    double softcap;     /* c > 0, or 0 */
    /* Multi-head latent attention (DeepSeek-V2 and V3, Kimi K2), when
     * kv_lora_rank r > 0: keys and values come from a latent of r features
     * per token, c = kv_a_norm(x wkv_a[:r]^T), through wkv_b, and one
     * rotated key of qk_rope_head_dim = head_dim - qk_nope_head_dim
     * features, x wkv_a[r:]^T, shared by every head:
     *   q_h = [q_nope_h | q_rope_h]   (head_dim = qk_nope_head_dim + rope)
     *   k_h = [c wkv_b[k rows of h]^T | R k_rope],  v_h = c wkv_b[v rows of h]^T
     * as transformers' DeepseekV3Attention (its qk_head_dim is head_dim
     * here, which must be given, and even).  The rope is over the rope part
     * alone: its head_dim is set to head_dim - qk_nope_head_dim (even, >=
     * 2), its rotary_dim must be 0 or that, and its layout is
     * RA_LAYOUT_INTERLEAVED for rope_interleave (V3's and V2's pairs),
     * RA_LAYOUT_HALF otherwise.
     * n_kv_heads must be 0 or n_heads.  q and k norms, wqkv, clip_qkv,
     * qk_l2_norm and temperature_length are RA_ERR_UNSUPPORTED with it;
     * temperature_floor scales each token's q (Mistral 4's latent layers).  A
     * cached forward needs a latent cache (ra_kv_cache_create_latent): it
     * stores c and the rotated shared key only, and decodes with wkv_b
     * absorbed into the query and the output. */
    int64_t kv_lora_rank;     /* r > 0, or 0: not latent attention */
    int64_t q_lora_rank;      /* > 0: q = wq_b(q_a_norm(wq_a(x))); 0: q = wq(x) */
    int64_t qk_nope_head_dim; /* features of each q and k head that do not rotate, >= 0 */
    int64_t v_head_dim;       /* Dv >= 1, at most head_dim: v's and the
                                 attention output's features per head */
    int norm_after_rope; /* nonzero: the q and k norms (weights.q_norm,
                           k_norm, as the other norm fields shape them) come
                           after RoPE, on the rotated q and k, as
                           HunYuan-V1-Dense's query_layernorm and
                           key_layernorm; 0: before RoPE (Qwen3).  Not with
                           qk_l2_norm, temperature_floor or latent attention
                           (RA_ERR_UNSUPPORTED) */
    int gated_output;   /* nonzero: wq's projection also gives a gate, and
                           the attention's output is multiplied by
                           sigmoid(gate) before weights.o_norm and wo
                           (Qwen3-Next's full-attention layers): wq is
                           [2 H D, dim] (bq [2 H D]), each head h's D query
                           rows 2hD .. 2hD + D - 1, then its D gate rows, as
                           q_proj's output viewed [..., H, 2 D] and chunked;
                           dwq and dbq are shaped so.  With weights.wgate,
                           the gate is x wgate^T (+ bgate) instead (AfMoE's
                           gate_proj; per head or softplus: gate_per_head,
                           gate_softplus) and wq is [H D, dim].  Not with
                           wqkv (RA_ERR_UNSUPPORTED); with latent attention
                           the gate multiplies each head's v_head_dim output
                           features, and without wgate its rows follow each
                           head's in wq_b (wq without q_lora_rank): [H, D +
                           Dv, in], A.X-K2's q_gate_proj */
    int clip_after_norm; /* nonzero: clip_qkv clamps q and k after their
                           norms (weights.q_norm, k_norm), as OLMoE does, v
                           after its projection; 0: before them (OLMo).  Not
                           with norm_after_rope nor qk_l2_norm
                           (RA_ERR_UNSUPPORTED); no effect without clip_qkv
                           or without the norms */
    int temperature_no_offset; /* nonzero, with temperature_floor: q of the
                           token at position p is multiplied by 1 +
                           temperature_scale * log1p(floor(p /
                           temperature_floor)), p itself where Llama 4 takes
                           p + 1: Ministral 3's llama_4_scaling_beta (the
                           scale) over its rope's
                           original_max_position_embeddings (the floor), on
                           every layer, by position ids */
    int v_norm;         /* nonzero: each head of v is divided by its root
                           mean square, v / sqrt(mean(v^2) + norm_eps),
                           without weights, after v's projection, bias and
                           clip_qkv's clamp: what attention reads and a KV
                           cache or pool stores (Gemma 3n's and Gemma 4's
                           v_norm).  Not with latent attention
                           (RA_ERR_UNSUPPORTED) */
    int64_t max_keys;   /* >= 0; 0: no bound.  The most keys a query may
                           attend to (those its masks leave it: its own and
                           the earlier ones, within its window, chunk and
                           document, real under the padding mask; in a
                           cached or paged call, every earlier token
                           appended to its sequence counts).  A call of the
                           layer (forward, cached, paged, train, backward)
                           where some query would attend to more is
                           RA_ERR_UNSUPPORTED, before anything is written:
                           DeepSeek sparse attention's index_topk (its
                           indexer keeps every key up to that many, and
                           selects among more).  A phased cached step
                           (ra_layer_forward_cached_begin: its keys are
                           the caller's cache's): RA_ERR_UNSUPPORTED */
    /* The output gate's shape and activation, with weights.wgate (without
     * it, either set is RA_ERR_ARGUMENT).  Do below is the attention
     * output's features per head: head_dim, or v_head_dim with latent
     * attention. */
    int gate_per_head;  /* nonzero: wgate is [H, dim], one gate per head,
                           multiplying every one of the head's Do output
                           features (LFM3's and Ling's g_proj); 0: wgate is
                           [H * Do, dim], one gate per feature */
    int gate_softplus;  /* nonzero: the output times softplus(gate) =
                           log(1 + e^gate) (gate itself above 20, as
                           torch's F.softplus), instead of sigmoid(gate)
                           (Laguna's g_proj) */
    /* A layer whose key selection goes by key slots (a token's index in its
     * sequence, after the cache's tokens), not by position ids. */
    int positions_are_slots; /* nonzero: every call of the layer (forward,
                           cached, paged, train, backward) where a real
                           query's position (each component of 3-D ids) is
                           not its slot (its index in its row, plus the
                           tokens its cache or pool held before the call;
                           padding queries are not checked) is
                           RA_ERR_UNSUPPORTED, before anything is written;
                           and max_keys counts every slot up to a query's
                           own (padding, other documents and keys outside
                           its window too).  MiniMax-M3's indexer: its
                           blocks are slots while it masks and picks them
                           by position ids, so the dense layer is its
                           answer only there.  A phased cached step
                           (ra_layer_forward_cached_begin):
                           RA_ERR_UNSUPPORTED */
    /* Values scaled by a constant (MiMo-V2-Flash's attention_value_scale). */
    double v_scale;     /* 0 means 1; else nonzero, at most FLT_MAX in size
                           (else RA_ERR_ARGUMENT): v is multiplied
                           by it after its projection, bias, clip_qkv's clamp
                           and v_norm: what attention reads and a KV cache or
                           pool stores, on every path (the gradients of wv,
                           bv and x through it).  Not with latent attention
                           (RA_ERR_UNSUPPORTED) */
    /* q scaled by a power of its position (a scalable softmax: Beam's
     * layers without RoPE): q of the token at position p is multiplied by
     * (1 + (p + 1) / temperature_length) ^ temperature_power, p as given
     * (the position ids), on every path as temperature_floor's factor.
     * The factor at positions 0 .. RA_MAX_POSITION must be a normal float
     * (else RA_ERR_ARGUMENT); with temperature_floor, norm_after_rope,
     * latent attention or a rope with mrope sections: RA_ERR_UNSUPPORTED */
    double temperature_length; /* 0: none; else positive */
    double temperature_power;  /* finite; used only with temperature_length */
    /* Latent attention's latents rescaled (dots.note's Dots3NoteTextAttention:
     * (dim / rank)^1/2): q's latent times q_latent_scale after q_a_norm
     * (with q_lora_rank), c times kv_latent_scale after kv_a_norm, in the
     * cache too.  0: 1; else positive and finite; without latent attention
     * (or q_latent_scale without q_lora_rank): RA_ERR_ARGUMENT.  The shared
     * rotated key may be RMS-normed before RoPE: weights.k_rope_norm. */
    double q_latent_scale;
    double kv_latent_scale;
    /* The q latent read twice (A.X-K2's q_gate_proj): with latent attention
     * and q_lora_rank rq, wq_b reads [q_a_norm(qa) | qa], the q latent qa =
     * x wq_a^T (+ bq_a) after its norm and before it, 2 rq features: wq_b
     * is [rows, 2 rq].  Without q_lora_rank: RA_ERR_ARGUMENT. */
    int q_b_raw_latent;
    /* Windowed encoders (Qwen2.5-VL's window-attention vision layers):
     * > 0, with non_causal, the most tokens a call's document may hold.
     * Each of the layer's calls (forward, train, backward) must give its
     * documents (ra_attention_options.cu_seqlens), none longer; a call
     * without them, or with a longer one, attends past the windows:
     * RA_ERR_ARGUMENT naming max_document, before anything is written.
     * 0: no bound; negative, or without non_causal: RA_ERR_ARGUMENT. */
    int64_t max_document;
    /* Encoders (RoFormer, ModernBERT, ESM-2, vision towers): no causal
     * mask, as ra_attention_options' non_causal (its window both ways),
     * on the layer's uncached calls (forward, train, backward); the
     * cached, paged and phased cached calls refuse it
     * (RA_ERR_UNSUPPORTED).  An attn_mask comes with each call's options. */
    int non_causal;
    /* RoPE on the values too (RoFormer's rotary_value): v rotated at its
     * token's position as k is (after its projection, bias, clip_qkv,
     * v_norm and v_scale), on every path (the KV cache then holds rotated
     * values); the attention's output is not rotated back.  With latent
     * attention, or a rope whose attention factor is not 1 (it would scale
     * v): RA_ERR_UNSUPPORTED. */
    int rope_values;
    /* Each call's attn_mask is its whole mask (ra_hf_options.token_types:
     * Gemma 3's token-type masks): a call with an attn_mask must set
     * options.non_causal too (else RA_ERR_ARGUMENT), so that the layer's
     * causal mask does not cut the mask's later keys.  0: as before. */
    int whole_masks;
} ra_layer_config;

static inline ra_layer_config ra_layer_config_init(void)
{
    ra_layer_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    return c;
}

/* PyTorch nn.Linear weights, [out_features, in_features], float32 (or
 * bfloat16 or float16: dtype, the last field), and their biases: NULL for
 * none (LLaMA's bias=False; Qwen2 has bq, bk and bv).  The layer borrows
 * these pointers: keep them alive while the layer lives.  Their values are
 * read at each call, so an optimizer may update them in place between
 * calls. */
typedef struct ra_layer_weights {
    size_t struct_size; /* sizeof(ra_layer_weights) */
    const float *wq; /* [H * D, dim] ([2 H D, dim]: config.gated_output without wgate;
                        [H, D + Dv, dim] so with latent attention) */
    const float *wk; /* [Hkv * D, dim] */
    const float *wv; /* [Hkv * D, dim] */
    const float *wo; /* [dim, H * D] */
    const float *bq; /* [H * D] ([2 H D]: config.gated_output without wgate) or NULL */
    const float *bk; /* [Hkv * D] or NULL */
    const float *bv; /* [Hkv * D] or NULL */
    const float *bo; /* [dim] or NULL */
    /* RMSNorm weights over each head of q and of k, applied after the
     * projection (and bias) and before RoPE (after it with
     * config.norm_after_rope), as Qwen3 does:
     * q_h = q_norm * q_h / sqrt(mean(q_h^2) + norm_eps).  NULL: none.
     * With config.norm_whole, over all of a token's q (k) at once; with
     * norm_head_weights, head h scaled by its own q_norm[h D .. h D + D);
     * with norm_layer, LayerNorms (the mean subtracted first). */
    const float *q_norm; /* [D] ([H * D] with norm_whole or norm_head_weights) or NULL */
    const float *k_norm; /* [D] ([Hkv * D] with norm_whole or norm_head_weights) or NULL */
    /* q, k and v in one weight, fused per key/value head as GPT-NeoX
     * (query_key_value, Hkv = H: [H, 3, D, dim]), Falcon's
     * new_decoder_architecture and InternLM2 (wqkv) store them: for each of
     * the Hkv groups, the rows of its H / Hkv query heads, then its key
     * head's, then its value head's.  Read in place, never copied.  With
     * wqkv, wq, wk, wv, bq, bk and bv must be NULL (RA_ERR_ARGUMENT); bqkv
     * without wqkv is RA_ERR_ARGUMENT.  (A weight of all of q's rows, then
     * k's, then v's, like Phi-3's qkv_proj, needs no field: point wq, wk
     * and wv at its three parts.) */
    const float *wqkv; /* [Hkv, H / Hkv + 2, D, dim] or NULL */
    const float *bqkv; /* [Hkv, H / Hkv + 2, D] or NULL */
    const float *sinks; /* [H]: attention sinks, one logit per query head in
                           every softmax's denominator (gpt-oss), finite;
                           NULL: none */
    /* Latent attention's (config.kv_lora_rank > 0; NULL otherwise), with
     * Dn = qk_nope_head_dim, Dr = head_dim - Dn, r = kv_lora_rank, rq =
     * q_lora_rank, as transformers names them: q_a_proj, q_a_layernorm,
     * q_b_proj (or wq: q_proj [H * D, dim] when rq is 0), kv_a_proj_with_mqa,
     * kv_a_layernorm, kv_b_proj; wo is o_proj [dim, H * Dv], bo its bias.
     * The norms are RMSNorms of epsilon config.norm_eps.  Each head's rows
     * of wq and wq_b are its Dn features that do not rotate, then its Dr. */
    const float *wq_a;      /* [rq, dim] */
    const float *bq_a;      /* [rq] or NULL */
    const float *q_a_norm;  /* [rq] */
    const float *wq_b;      /* [H * D, rq] ([H, D + Dv, rq]: config.gated_output without
                               wgate; [.., 2 rq]: config.q_b_raw_latent) */
    const float *wkv_a;     /* [r + Dr, dim]: the latent's rows, then the shared key's */
    const float *bkv_a;     /* [r + Dr] or NULL */
    const float *kv_a_norm; /* [r] */
    const float *wkv_b;     /* [H, Dn + Dv, r]: each head's key rows, then its value rows */
    /* The storage of the projection matrices wq, wk, wv, wo and wqkv, as a
     * checkpoint holds them: RA_F32 (0, the default), RA_BF16 or RA_F16
     * (others: RA_ERR_DTYPE).  For a 16-bit dtype those pointers point at
     * uint16_t values, cast: w.wq = (const float *)bf16_wq, 2-byte aligned
     * (RA_ERR_ARGUMENT otherwise), and the layer reads them in place with no
     * float32 copy: each weight is widened exactly to float32 as it is read
     * and multiplied in float32, so the layer's numbers are those of the
     * float32 layer given the widened weights, up to the order of the sums
     * (a decode step of a few tokens reads each weight once, in the
     * library's own kernel; longer inputs run sgemm on panels of rows
     * widened into the context's scratch).  Biases, norms and sinks stay
     * float32; so do the gradients (ra_layer_grads: dwq ... are float32
     * whatever this is, for an optimizer's float32 master weights).  Latent
     * attention (config.kv_lora_rank) takes float32 weights only
     * (RA_ERR_UNSUPPORTED). */
    ra_dtype dtype;
    /* RMSNorm weights over each token's attention output, all its H * D
     * features at once, before wo: o = o_norm * o / sqrt(mean(o^2) +
     * config.norm_eps), BitNet's attn_sub_norm.  NULL: none.  Latent
     * attention: RA_ERR_UNSUPPORTED. */
    const float *o_norm; /* [H * D] or NULL */
    /* The biases of LayerNorm q and k norms (config.norm_layer), shaped as
     * q_norm and k_norm and added after their weights, as torch's
     * nn.LayerNorm with elementwise_affine (Persimmon's q_layernorm and
     * k_layernorm): q_h = q_norm * (q_h - mean) / sqrt(var + norm_eps) +
     * q_norm_bias.  NULL: none.  One without its norm's weight, or without
     * norm_layer, is RA_ERR_ARGUMENT; latent attention: RA_ERR_UNSUPPORTED. */
    const float *q_norm_bias; /* q_norm's shape, or NULL */
    const float *k_norm_bias; /* k_norm's shape, or NULL */
    /* config.gated_output's gate from a projection of its own (AfMoE's
     * gate_proj): the attention's output times sigmoid(x wgate^T (+
     * bgate)) before o_norm and wo, and wq is q's rows alone; Do is the
     * output's features per head (head_dim; v_head_dim with latent
     * attention), config.gate_per_head and gate_softplus change the shape
     * and the activation.  Stored as dtype says, like wq.  NULL: the gate
     * is wq's (Qwen3-Next); without gated_output: RA_ERR_ARGUMENT. */
    const float *wgate; /* [H * Do, dim] ([H, dim]: config.gate_per_head) or NULL */
    /* The output gate's bias, one per head, added to each of the head's
     * gates before the activation (Beam's gate_bias): gate = x wgate^T +
     * bgate[h].  NULL: none; without wgate: RA_ERR_ARGUMENT. */
    const float *bgate; /* [H] or NULL */
    /* Latent attention's shared rotated key RMS-normed (eps config.norm_eps)
     * before RoPE, with these weights (dots.note's k_rope_only_layernorm).
     * NULL: none; without latent attention: RA_ERR_ARGUMENT. */
    const float *k_rope_norm; /* [head_dim - qk_nope_head_dim] or NULL */
} ra_layer_weights;

static inline ra_layer_weights ra_layer_weights_init(void)
{
    ra_layer_weights w;
    memset(&w, 0, sizeof w);
    w.struct_size = sizeof w;
    return w;
}

typedef struct ra_layer ra_layer;

RA_API ra_status ra_layer_create(ra_layer **out, const ra_layer_config *config,
                                 const ra_layer_weights *weights);
/* NULL is allowed.  A layer that unfinished steps hold (ra_layer_forward_begin
 * and the other _begin calls) lives until the last of them is finished or
 * cancelled, which frees it. */
RA_API void ra_layer_destroy(ra_layer *layer);
/* The layer's config, with rope pointing at the layer's copy of its rope's
 * config (the head_dim, n_kv_heads and rope filled in as the layer uses
 * them); valid while the layer lives. */
RA_API const ra_layer_config *ra_layer_get_config(const ra_layer *layer);

/* y = Attention.forward(x): x -> wq, wk, wv (+ their biases) -> heads (->
 * q and k norms) -> RoPE at the given positions -> causal GQA attention
 * (-> * sigmoid(gate) -> o_norm) -> wo (+ bo).  NULL positions means start 0; options: the attention's path
 * and dropout, and the call's padding_mask and cu_seqlens (NULL: inference
 * on RA_PATH_AUTO); the layer's window, chunk, soft-cap and sinks come from
 * its config and weights (set in options: RA_ERR_ARGUMENT).  An attn_mask
 * masks with them; with options' non_causal too (on a layer without
 * config.non_causal and without chunks) the attn_mask is the call's whole
 * mask: the causal mask does not apply, the window bounds only the earlier
 * keys (window_earlier_only: transformers' sliding masks always keep that
 * bound, so a mask made without it is still cut there; non_causal without
 * an attn_mask: RA_ERR_ARGUMENT), as for Gemma 3's image blocks
 * (ra_hf_token_type_mask), on the training forward and backward too.  On
 * a layer with config.whole_masks an attn_mask without non_causal is
 * RA_ERR_ARGUMENT.  The
 * projections use CBLAS.  Positions move RoPE (and Llama 4's temperature):
 * the masks go by token index, as in Meta's LLaMA reference code and
 * transformers.  Packed positions (ra_positions.cu_seqlens) are refused
 * with RA_ERR_UNSUPPORTED: give options.cu_seqlens and position ids.
 *   x: [B, S, dim]   y: [B, S, dim] (must not overlap x: RA_ERR_ARGUMENT) */
RA_API ra_status ra_layer_forward(ra_context *ctx, const ra_layer *layer,
                                  float *y, const float *x, int64_t batch,
                                  int64_t seq, const ra_positions *positions,
                                  const ra_attention_options *options);

/* The layer with a KV cache: appends the S tokens of each sequence to the
 * cache (RoPE at the given positions, NULL: continuing from the cache's
 * length: text positions, which after an image an M-RoPE layer's are not:
 * give them, as transformers adds its rope_deltas) and attends each over
 * everything cached so far.  A prefill is an
 * empty cache and S = P; a decode step is S = 1.  prefill(N) equals
 * prefill(N - k) followed by k decode steps to float32 rounding (the sums
 * run in another order, so not bit for bit).  Inference only.  The
 * layer's window, chunk, soft-cap and sinks apply to the prefill and the
 * steps alike; windows and chunks count tokens in the order they were
 * cached.  A window cache (ra_kv_cache_create_window) serves a layer whose
 * window or chunk is at most the cache's window (else RA_ERR_ARGUMENT), and
 * takes at most max_new tokens a call.  A latent layer (kv_lora_rank) needs
 * a latent cache of its kv_lora_rank and rope part (else RA_ERR_SHAPE; a
 * latent cache for any other layer: RA_ERR_ARGUMENT): a prefill into empty
 * sequences runs the forward (k and v per head, from the latent before a
 * 16-bit cache rounds it) and stores each token's [rotated shared key |
 * latent]; later calls decode with wkv_b absorbed, up to 8 tokens of each
 * sequence at a time.  A prefill into an 8-bit cache attends over the
 * float32 keys and values it has just projected (and stores them quantized
 * for the steps that follow): the flash kernel reads f32, f16 and bf16
 * only, and the unquantized values are the more exact; so there prefill(N)
 * and prefill(N - k) + k steps differ by the cache's quantization, not by
 * float32 rounding alone.
 *   x, y: [B, S, dim] */
RA_API ra_status ra_layer_forward_cached(ra_context *ctx, const ra_layer *layer,
                                         ra_kv_cache *cache, float *y, const float *x,
                                         int64_t batch, int64_t seq,
                                         const ra_positions *positions);

/* ra_layer_forward_cached under a mask of the caller's: options hold an
 * attn_mask (required) over [B or 1, H or 1, S or 1, L + S or 1], the S
 * new queries against every key the sequence then holds, L the tokens
 * cached before the call (the same in every sequence), as
 * ra_attention_options' attn_mask with query i at key L + i; and, as on
 * ra_layer_forward, non_causal at most: the attn_mask is then the whole
 * mask, the layer's causal mask not applied and its window only on the
 * earlier keys, counted from the sequence's start (Gemma 3's image
 * blocks: ra_hf_token_type_mask_cached).  Any other option set:
 * RA_ERR_ARGUMENT.  It runs flash attention over the cache's first L + S
 * slots: a cache holding tokens (the calls after a prefill's first) must
 * be a full (not window) cache of f32, f16 or bf16, and the layer without
 * chunks; an empty window or 8-bit cache, or a chunked layer's empty
 * cache, takes a masked prefill as ra_layer_forward_cached takes a
 * prefill.  Otherwise, or with sequences of different lengths, latent
 * attention, max_keys or positions_are_slots: RA_ERR_UNSUPPORTED.  Later calls without a mask (decode steps) are
 * ra_layer_forward_cached's.  Inference only.
 *   x, y: [B, S, dim] */
RA_API ra_status ra_layer_forward_cached_mask(ra_context *ctx, const ra_layer *layer,
                                              ra_kv_cache *cache, float *y, const float *x,
                                              int64_t batch, int64_t seq,
                                              const ra_positions *positions,
                                              const ra_attention_options *options);

/* The layer over sequences of a paged KV pool (ra_kv_pool_create with the
 * layer's kv heads and head_dim), for serving: continuous batching of
 * prefills and decode steps of any lengths in one call.  Row i of x holds
 * n_new[i] (NULL: S; 0 is allowed) new tokens of sequence ids[i] (each id
 * once; x's rows past them are not read, nor projected), at positions continuing from that sequence's length (or as
 * positions gives them, [N, S] rows as ra_layer_forward_cached's); they
 * are projected, appended to their sequence's pages (ra_kv_pool_append:
 * RoPE fused, the pool's dtype) and each attends over its sequence's
 * tokens through the pool (ra_attention_decode_paged, the layer's window,
 * chunk, soft-cap and sinks).  Every token attends over the stored keys
 * and values, its call's own included: with an f32 pool the same bits as
 * ra_layer_forward_cached's decode steps on a contiguous cache holding the
 * same tokens (its prefill runs the flash kernel: float32 rounding apart),
 * with an 8-bit pool over the quantized rows.  y's rows past a sequence's
 * n_new[i] are 0.  A window sequence must keep what the layer's window or
 * chunk reaches (RA_ERR_ARGUMENT).  When the pool lacks the pages:
 * RA_ERR_CACHE_FULL, and neither the pool nor y changes (nor on any other
 * refusal).  Latent attention: RA_ERR_UNSUPPORTED (its cache holds
 * latents: ra_kv_cache_create_latent).  Inference only.
 *   x, y: [N, S, dim]    N = n_ids */
RA_API ra_status ra_layer_forward_paged(ra_context *ctx, const ra_layer *layer,
                                        ra_kv_pool *pool, const int64_t *ids, int64_t n_ids,
                                        float *y, const float *x, int64_t seq,
                                        const int64_t *n_new, const ra_positions *positions);

/* ------------------------------------------------------------------------ */
/* Training: the layer's forward with a tape, and its backward               */
/* ------------------------------------------------------------------------ */

/* What the backward needs from one training forward, O(S * dim), never
 * O(S^2): the rotated q and k, v and the attention output before wo
 * ([B, S, H or Hkv, D] each), the log-sum-exp of each query row's scaled
 * scores ([B, H, S]; the backward recomputes the probabilities from it),
 * copies of the positions, the padding mask and the documents, the path and
 * dropout, and a pointer to x, which is borrowed: x must stay unchanged until
 * the backward (as the layer's weights, sinks included).  Dropout masks are not
 * stored: the backward regenerates them from the seed.  A tape is made once
 * for one layer and up to max_tokens = B * S tokens (use it only while that
 * layer lives; it may be destroyed before or after the layer), and every
 * forward overwrites it, so a training loop allocates nothing per step.  Size:
 * 4 * max_tokens * (2 H D + 2 Hkv D + H) bytes of activations (and
 * 4 * max_tokens * H D more for gated_output's gate) plus
 * 32 * max_tokens bytes of positions. */
typedef struct ra_layer_tape ra_layer_tape;

RA_API ra_status ra_layer_tape_create(ra_layer_tape **out, const ra_layer *layer,
                                      int64_t max_tokens);
/* NULL is allowed.  A tape that training or backward steps hold
 * (ra_layer_forward_train_begin, ra_layer_backward_begin) lives until the
 * last of them is finished or cancelled, which frees it. */
RA_API void ra_layer_tape_destroy(ra_layer_tape *tape);

/* ra_layer_forward (the same y, bit for bit, for the same arguments) that
 * also fills the tape for ra_layer_backward.  options as there: dropout p
 * applies LLaMA's attn_dropout to the probabilities and resid_dropout to
 * y; p = 0 is the inference forward.
 * batch * seq must be at most the tape's max_tokens (RA_ERR_SIZE); a tape
 * made for another layer is RA_ERR_ARGUMENT.  Packed positions
 * (ra_positions.cu_seqlens): RA_ERR_UNSUPPORTED, as in ra_layer_forward.
 * A call refused by these
 * checks changes neither y nor the tape; one that fails after them (scratch
 * memory: RA_ERR_NOMEM) leaves y as it was and the tape empty, so that
 * ra_layer_backward refuses it (RA_ERR_ARGUMENT) until the next forward.
 *   x: [B, S, dim] (kept by pointer until the backward)
 *   y: [B, S, dim] (must not overlap x: RA_ERR_ARGUMENT) */
RA_API ra_status ra_layer_forward_train(ra_context *ctx, const ra_layer *layer, float *y,
                                        ra_layer_tape *tape, const float *x, int64_t batch,
                                        int64_t seq, const ra_positions *positions,
                                        const ra_attention_options *options);

/* Where ra_layer_backward puts the weights' gradients, float32, shaped as
 * the weights ([out_features, in_features]), biases, norms and sinks.  A
 * bias's, norm's or the sinks' gradient is required where the layer has
 * it, and ignored where it has none. */
typedef struct ra_layer_grads {
    size_t struct_size; /* sizeof(ra_layer_grads) */
    float *dwq;     /* [H * D, dim] */
    float *dwk;     /* [Hkv * D, dim] */
    float *dwv;     /* [Hkv * D, dim] */
    float *dwo;     /* [dim, H * D] */
    int accumulate; /* nonzero: add to what they hold (gradient accumulation
                       over micro-batches); 0: overwrite them */
    float *dbq;     /* [H * D] */
    float *dbk;     /* [Hkv * D] */
    float *dbv;     /* [Hkv * D] */
    float *dbo;     /* [dim] */
    float *dq_norm; /* q_norm's shape */
    float *dk_norm; /* k_norm's shape */
    float *dwqkv;   /* wqkv's shape, for a layer with wqkv (then dwq, dwk,
                       dwv, dbq, dbk and dbv are ignored) */
    float *dbqkv;   /* bqkv's shape */
    float *dsinks;  /* [H], for a layer with sinks */
    /* Latent attention's, shaped as the weights (dwq, dwo and dbo as above;
     * dwk, dwv and the others above are ignored) */
    float *dwq_a, *dbq_a, *dq_a_norm, *dwq_b, *dwkv_a, *dbkv_a, *dkv_a_norm, *dwkv_b;
    float *do_norm; /* [H * D], for a layer with o_norm */
    float *dq_norm_bias; /* q_norm_bias's shape, for a layer with it */
    float *dk_norm_bias; /* k_norm_bias's shape, for a layer with it */
    float *dwgate;       /* wgate's shape, for a layer with wgate */
    float *dbgate;       /* [H], for a layer with bgate */
    float *dk_rope_norm; /* [head_dim - qk_nope_head_dim], for a layer with k_rope_norm */
} ra_layer_grads;

static inline ra_layer_grads ra_layer_grads_init(void)
{
    ra_layer_grads g;
    memset(&g, 0, sizeof g);
    g.struct_size = sizeof g;
    return g;
}

/* The backward of the forward recorded in tape: given dy = dL/dy, writes
 * dx = dL/dx (always overwritten) and the gradients of the weights, biases
 * and norms (overwritten or accumulated, as grads->accumulate says).
 * Dropout masks are regenerated from the forward's seed; the attention's
 * backward runs on the forward's path, recomputing probabilities from the
 * saved log-sum-exp (flash: O(S D) per head, never O(S^2); reference:
 * [S, S] per head), with GQA gradients summed over each group; dq and dk go
 * back through RoPE with RA_INVERSE (and through the q and k norms, with q
 * and k recomputed before them), dv through v_norm (v recomputed before
 * it); the projections' products use CBLAS.
 * Scratch, from the context's workspace: 4 * B * S * (dim + 2 H D + 2 Hkv D)
 * bytes; with q/k norms or qk_l2_norm 4 * B * S * (H D + Hkv D) more, with
 * both (or norms and clip_after_norm) as much again, with clip_qkv
 * 4 * B * S * (H D + 2 Hkv D) more, with gated_output 8 * B * S * H D more,
 * with o_norm 4 * (B * S + 1) * H D more, with v_norm 4 * B * S * Hkv D
 * more; plus the attention backward's.  The tape is left as it was: a second backward with another
 * dy is allowed.  The outputs must not overlap one another, dy, x,
 * or the weights (RA_ERR_ARGUMENT).  A tape serves one thread at a time.
 * Thread count: the same bits for any context (OpenBLAS's own thread count
 * may change the last bits of its products).
 *   dy, dx: [B, S, dim] of the recorded forward */
RA_API ra_status ra_layer_backward(ra_context *ctx, const ra_layer *layer, float *dx,
                                   const ra_layer_grads *grads, const ra_layer_tape *tape,
                                   const float *dy);

/* ------------------------------------------------------------------------ */
/* A layer call in phases: the attention is the caller's                    */
/* ------------------------------------------------------------------------ */

/* A layer call split at its attention, for callers that attend elsewhere
 * (libropeattn_mpi: the tokens are a shard of a longer sequence, whose
 * attention is ring attention over every rank's).  A _begin call takes a
 * layer call's arguments, checks them as that call does and runs the
 * layer up to its attention; the caller then computes the attention from
 * the step's views (ra_layer_step_get_views); ra_layer_step_finish runs
 * the rest of the call.  Composed with ra_attention_forward_lse and
 * ra_attention_backward over the views' tensors and options, a step gives
 * the same bits as the call it splits (tests/test_layer_backward.c):
 *
 *   ra_layer_step *step;
 *   if (ra_layer_forward_begin(&step, ctx, layer, y, x, B, S, pos, opts) == RA_OK) {
 *       const ra_layer_step_views *v = ra_layer_step_get_views(step);
 *       if (ra_attention_forward_lse(ctx, &v->out, v->lse, &v->q, &v->k, &v->v,
 *                                    &v->options) == RA_OK)
 *           ra_layer_step_finish(step); // y: ra_layer_forward's, bit for bit
 *       else
 *           ra_layer_step_cancel(step); // y untouched
 *   }
 *
 * A step owns its buffers (allocated by _begin, freed by finish or
 * cancel: ctx is free for other calls between the phases, and every
 * failure comes at _begin: finish cannot fail for a step _begin gave).
 * Every step must be finished or cancelled, exactly once; a step serves
 * one thread at a time.  A training or backward step holds its tape until
 * then: a training forward over that tape meanwhile is RA_ERR_ARGUMENT.  Latent attention (MLA) layers are
 * RA_ERR_UNSUPPORTED (their k and v differ in width). */
typedef struct ra_layer_step ra_layer_step;

/* What the caller attends with, and where it writes.  The forward steps:
 * q [B, S, H, D], k and v [B, S, Hkv, D] float32, projected, normed and
 * rotated at the call's positions, q scaled so that the attention's
 * default scale is the layer's (read them); out [B, S, H, D] float32 and,
 * but in a cached step, lse [B, H, S] float32 contiguous (write them);
 * options: the layer's window, chunk, soft-cap and sinks with the call's
 * path, dropout, seed, padding_mask and documents (a cached step: the
 * layer's four).  The backward step: q, k, v, out and lse as the forward
 * recorded them in the tape, dout [B, S, H, D] the gradient of the
 * attention's output (read them); dq, dk and dv, shaped as q, k and v
 * (write them: ra_attention_backward's outputs), and options the
 * forward's, with dsinks where the layer has sinks (write them there).
 * Valid until the step is finished or cancelled. */
typedef struct ra_layer_step_views {
    size_t struct_size; /* sizeof(ra_layer_step_views) */
    ra_tensor q, k, v, out;
    float *lse;
    ra_tensor dout, dq, dk, dv; /* the backward step's; zeros in the forward steps */
    ra_attention_options options;
} ra_layer_step_views;

/* ra_layer_forward up to its attention (its arguments, its checks). */
RA_API ra_status ra_layer_forward_begin(ra_layer_step **out, ra_context *ctx,
                                        const ra_layer *layer, float *y, const float *x,
                                        int64_t batch, int64_t seq,
                                        const ra_positions *positions,
                                        const ra_attention_options *options);

/* ra_layer_forward_train up to its attention: q, k, v, out and lse are
 * the tape's, which finish marks filled (cancel leaves it empty, as a
 * failed ra_layer_forward_train does). */
RA_API ra_status ra_layer_forward_train_begin(ra_layer_step **out, ra_context *ctx,
                                              const ra_layer *layer, float *y,
                                              ra_layer_tape *tape, const float *x,
                                              int64_t batch, int64_t seq,
                                              const ra_positions *positions,
                                              const ra_attention_options *options);

/* A cached step without the cache (ra_layer_forward_cached's projections
 * and output): the caller stores k and v where it keeps its keys
 * (ra_kv_cache_append with rope NULL: they are rotated) and writes out,
 * each query row's attention over its whole sequence (e.g.
 * ra_attention_decode).  positions are required (no cache to continue
 * from: NULL is RA_ERR_ARGUMENT); y may be x.  A layer with max_keys or
 * positions_are_slots is RA_ERR_UNSUPPORTED (the keys are the caller's).
 *   x, y: [B, S, dim] */
RA_API ra_status ra_layer_forward_cached_begin(ra_layer_step **out, ra_context *ctx,
                                               const ra_layer *layer, float *y, const float *x,
                                               int64_t batch, int64_t seq,
                                               const ra_positions *positions);

/* ra_layer_backward up to its attention's backward: dout computed from
 * dy; finish takes dq, dk and dv (and dsinks) back to dx and the
 * gradients. */
RA_API ra_status ra_layer_backward_begin(ra_layer_step **out, ra_context *ctx,
                                         const ra_layer *layer, float *dx,
                                         const ra_layer_grads *grads,
                                         const ra_layer_tape *tape, const float *dy);

/* The step's views (NULL for NULL). */
RA_API const ra_layer_step_views *ra_layer_step_get_views(const ra_layer_step *step);

/* The rest of the call from the attention the caller wrote: y (dx and
 * the gradients) written as the whole call writes them; then frees the
 * step.  RA_ERR_NULL for NULL, the one failure. */
RA_API ra_status ra_layer_step_finish(ra_layer_step *step);

/* Frees the step; y, dx and the gradients are left as they were, a
 * training step's tape empty.  NULL is allowed. */
RA_API void ra_layer_step_cancel(ra_layer_step *step);

/* Weight-row permutation between the layouts, per head, for wq or wk
 * [n_heads * D, in_features]: RA_LAYOUT_HALF reorders interleaved rows
 * (a0 b0 a1 b1 ...) into (a0 a1 ... b0 b1 ...), as Hugging Face's Llama
 * conversion does; RA_LAYOUT_INTERLEAVED undoes it.  Rows move as they are,
 * in any dtype.  out must not share a byte with w (not even out == w):
 * RA_ERR_ARGUMENT.
 *   w, out: [n_heads * D, in_features] */
RA_API ra_status ra_permute_rows(void *out, const void *w, ra_dtype dtype,
                                 int64_t n_heads, int64_t head_dim,
                                 int64_t in_features, ra_layout to);

#ifdef __cplusplus
}
#endif

#endif /* ROPEATTN_H */
