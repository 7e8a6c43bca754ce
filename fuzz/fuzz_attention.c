/*
 * fuzz_attention.c — ra_attention on fuzzed arguments: batch, sequence
 * (across the flash path's 64-key tiles), heads and GQA ratio, head_dim,
 * f32/f16/bf16 queries, keys and values (all bf16: the bf16 units), strided, broadcast or fused QKV views,
 * dropout, every path, on the calling thread or two; and the options' masks
 * and logit changes, none, one or any combination of them: scale, soft-cap,
 * sliding window, chunks, sinks, padding (left, right or anywhere) and
 * packed documents, at ordinary values and at the edges the API takes.
 *
 * Without dropout each successful result must be the softmax attention of
 * the header, masks included, computed here in double, to within a bound
 * from float32 rounding of the dot products and sums (and of the flash
 * path's tanh); a padding query's row must be exact zeros.  The reference
 * path must give the same bits again, the flash path the same bits on one
 * thread or two, and with dropout the flash path must stay within that
 * bound of the reference.  A failure must be a documented status and leave
 * out as it was; a call whose only fault is a hostile option (a negative
 * window or chunk, a NaN, infinite or negative scale or soft-cap, a
 * non-finite sink, bad cu_seqlens, dsinks without sinks) must be
 * RA_ERR_ARGUMENT.  The inputs are never written, nor dsinks (the
 * backward's); a call built only of valid arguments must succeed.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "fuzz_views.h"
#include "ropeattn.h"

static ra_context *two_threads;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    FUZZ_CHECK(ra_context_create(&two_threads, 2) == RA_OK, "context");
    return 0;
}

/* The model below is this file's own arithmetic: no coverage for it, so
 * that libFuzzer's counters do not slow it down. */
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))

NO_COVERAGE static float elem(const ra_tensor *t, int64_t b, int64_t s, int64_t h, int64_t d)
{
    return load_elem(t->data, t->dtype,
                     b * t->stride[0] + s * t->stride[1] + h * t->stride[2] + d);
}

/* floor(a / b) for b > 0. */
NO_COVERAGE static int64_t floor_div(int64_t a, int64_t b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* The document of token i: the last d with cu_seqlens[d] <= i (0 without). */
NO_COVERAGE static int64_t document(const ra_attention_options *o, int64_t i)
{
    int64_t d = 0;
    while (o->cu_seqlens && o->cu_seqlens[d + 1] <= i) d++;
    return d;
}

NO_COVERAGE static int is_padding(const ra_attention_options *o, int64_t seq, int64_t b, int64_t j)
{
    return o->padding_mask && !o->padding_mask[b * seq + j];
}

/* Whether query i of batch row b sees key j, as the header says; lp is the
 * row's count of leading padding tokens. */
NO_COVERAGE static int sees(const ra_attention_options *o, int64_t seq, int64_t b, int64_t lp,
                            int64_t i, int64_t j)
{
    if (j > i || (o->window && j <= i - o->window) || is_padding(o, seq, b, j)) return 0;
    if (o->chunk && floor_div(j - lp, o->chunk) != floor_div(i - lp, o->chunk)) return 0;
    return document(o, i) == document(o, j);
}

/* out[b, i, h] of the header in double, and how far float32 may stray:
 *   max|v| (2 E + (i + 12) 2^-24 + 1e-6),
 * E a logit's error and max|v| over the keys seen; a logit error e moves
 * the softmax's weights by at most 2e in all.  E = 2 D 2^-24 L, L the
 * largest sum_d |q_d k_d| scale of the row (the dot product in float32,
 * q scaled first), plus with soft-cap c 6e-7 min(c, L): c tanh(s / c)
 * passes the error of s on unamplified (its slope is at most 1), and the
 * flash path's vtanh adds a relative error under 4e-7 of a value at most
 * min(c, |s|), and the roundings of s (1 / c) and of c times tanh 2^-23
 * more of it (under 6e-7 in all).  The sink is one more term of the sum.
 * q, k and v all bf16 may run on the bf16 units, which round each
 * probability to bf16 before P V: 2^-9 max|v| more.  Returns 0 for a padding query, whose row is exact zeros (bound 0). */
NO_COVERAGE static int expected_row(const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                                    const ra_attention_options *o, int64_t b, int64_t i,
                                    int64_t h, double *out, double *bound)
{
    const int64_t S = q->shape[1], D = q->shape[3], kv = h / (q->shape[2] / k->shape[2]);
    const double scale = o->scale ? o->scale : 1.0 / sqrt((double)D), c = o->softcap;
    double qrow[128], logits[128], max = o->sinks ? o->sinks[h] : -INFINITY, sum = 0, big = 0,
           vmax = 0;
    int seen[128];
    for (int64_t d = 0; d < D; d++) out[d] = 0;
    *bound = 0;
    if (is_padding(o, S, b, i)) return 0;
    int64_t lp = 0;
    while (lp < S && is_padding(o, S, b, lp)) lp++;
    for (int64_t d = 0; d < D; d++) qrow[d] = elem(q, b, i, h, d);
    for (int64_t j = 0; j <= i; j++) {
        if (!(seen[j] = sees(o, S, b, lp, i, j))) continue;
        double dot = 0, mag = 0;
        for (int64_t d = 0; d < D; d++) {
            double p = qrow[d] * elem(k, b, j, kv, d);
            dot += p;
            mag += fabs(p);
        }
        logits[j] = c ? c * tanh(dot * scale / c) : dot * scale;
        big = fmax(big, mag * scale);
        max = fmax(max, logits[j]);
    }
    if (o->sinks) sum = exp(o->sinks[h] - max);
    for (int64_t j = 0; j <= i; j++)
        if (seen[j]) sum += (logits[j] = exp(logits[j] - max));
    for (int64_t j = 0; j <= i; j++)
        for (int64_t d = 0; seen[j] && d < D; d++) {
            double x = elem(v, b, j, kv, d);
            out[d] += logits[j] / sum * x;
            vmax = fmax(vmax, fabs(x));
        }
    double logit_err = 2.0 * (double)D * 0x1p-24 * big + (c ? 6e-7 * fmin(c, big) : 0);
    const int bf16 = q->dtype == RA_BF16 && k->dtype == RA_BF16 && v->dtype == RA_BF16;
    *bound = vmax * (2 * logit_err + (double)(i + 12) * 0x1p-24 + 1e-6 + (bf16 ? 0x1p-9 : 0));
    return 1;
}

/* Without dropout (p < 0): flash and reference each within the bound of
 * the model.  With dropout p: flash within twice the bound, scaled by
 * 1 / (1 - p) as the kept probabilities are, of the reference.  Either
 * way a padding query's row is zeros on both paths. */
NO_COVERAGE static void check_rows(const ra_tensor *flash, const ra_tensor *ref,
                                   const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                                   const ra_attention_options *o, float p)
{
    double want[128], bound;
    for (int64_t b = 0; b < q->shape[0]; b++)
        for (int64_t i = 0; i < q->shape[1]; i++)
            for (int64_t h = 0; h < q->shape[2]; h++) {
                int real = expected_row(q, k, v, o, b, i, h, want, &bound);
                for (int64_t d = 0; d < q->shape[3]; d++) {
                    double x = elem(flash, b, i, h, d), y = elem(ref, b, i, h, d);
                    FUZZ_CHECK(real || (x == 0 && y == 0), "padding query out[%lld, %lld, %lld, "
                               "%lld]: flash %.9g, reference %.9g", (long long)b, (long long)i,
                               (long long)h, (long long)d, x, y);
                    if (p > 0) {
                        FUZZ_CHECK(fabs(x - y) <= 2 * bound / (1 - p),
                                   "with dropout %g, flash %.9g and reference %.9g at [%lld, "
                                   "%lld, %lld, %lld]", p, x, y, (long long)b, (long long)i,
                                   (long long)h, (long long)d);
                        continue;
                    }
                    FUZZ_CHECK(fabs(x - want[d]) <= bound && fabs(y - want[d]) <= bound,
                               "out[%lld, %lld, %lld, %lld]: flash %.9g, reference %.9g, "
                               "expected %.9g (bound %.3g)", (long long)b, (long long)i,
                               (long long)h, (long long)d, x, y, want[d], bound);
                }
            }
}

/* The arrays the options point to, [H] sinks and dsinks, [B, S] padding,
 * [n_documents + 1] cu_seqlens, each its exact size (so that AddressSanitizer
 * sees a read past it), or NULL. */
typedef struct fuzz_masks {
    float *sinks, *dsinks;
    uint8_t *padding;
    int64_t *cu_seqlens;
    int64_t heads;
} fuzz_masks;

/* dsinks' contents before the call: the forward must not write them. */
#define DSINKS_UNTOUCHED (-7.25f)

static void *checked_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    FUZZ_CHECK(p != NULL, "out of memory");
    return p;
}

/* dsinks [H] filled with DSINKS_UNTOUCHED. */
static float *new_dsinks(int64_t heads)
{
    float *d = checked_calloc((size_t)heads, sizeof *d);
    for (int64_t h = 0; h < heads; h++) d[h] = DSINKS_UNTOUCHED;
    return d;
}

/* A logit scale 2^e (1 + m / 256), e in [-10, 4], or the least double
 * (0 once the flash path rounds it to float32: every logit 0). */
static double take_scale(fuzz_input *in)
{
    int64_t e = take_range(in, -11, 4), m = take_byte(in);
    return e < -10 ? 0x1p-1074 : ldexp(1 + (double)m / 256, (int)e);
}

/* A soft-cap, a float32: 2^e (1 + m / 256), e in [-4, 7], or an edge the
 * API takes: FLT_MIN (every s / c beyond float32 but s = 0), 2^-100, 2^100,
 * 1e30, FLT_MAX. */
static double take_softcap(fuzz_input *in)
{
    static const double edges[] = {FLT_MIN, 0x1p-100, 0x1p100, (double)1e30f, FLT_MAX};
    int64_t r = take_range(in, 0, 16), m = take_byte(in);
    return r < 12 ? ldexp(1 + (double)m / 256, (int)r - 4) : edges[r - 12];
}

/* A window or chunk length: 1 .. 12, S, a tile of keys and one more, or
 * `largest`. */
static int64_t take_span(fuzz_input *in, int64_t seq, int64_t largest)
{
    const int64_t far[] = {seq > 0 ? seq : 1, 64, 65, largest};
    int64_t r = take_range(in, 0, 15);
    return r < 12 ? 1 + r : far[r - 12];
}

/* Sink logits: (byte - 128) / 16 in [-8, 8), bytes 0 and 255 -FLT_MAX and
 * FLT_MAX (a row then gives all its weight to the sink). */
static float *take_sinks(fuzz_input *in, int64_t heads)
{
    float *s = checked_calloc((size_t)heads, sizeof *s);
    for (int64_t h = 0; h < heads; h++) {
        int x = take_byte(in);
        s[h] = x == 0 ? -FLT_MAX : x == 255 ? FLT_MAX : (float)(x - 128) / 16;
    }
    return s;
}

/* Padding [B, S], per row: none, n leading tokens (left padding), n
 * trailing ones (right padding), or n leading and then any (a byte each,
 * padding one time in four). */
static uint8_t *take_padding(fuzz_input *in, int64_t batch, int64_t seq)
{
    uint8_t *pad = checked_calloc((size_t)(batch * seq), 1);
    for (int64_t b = 0; b < batch; b++) {
        uint8_t *row = pad + b * seq;
        int64_t mode = take_range(in, 0, 3), n = mode ? take_range(in, 0, seq) : 0;
        for (int64_t s = 0; s < seq; s++) row[s] = mode == 2 ? s < seq - n : s >= n;
        for (int64_t s = n; mode == 3 && s < seq; s++) row[s] = take_range(in, 0, 3) != 0;
    }
    return pad;
}

/* *n documents of S tokens, 1 .. 8 or S of them: 0 = c[0] < ... < c[n] = S.
 * Each boundary leaves room for the documents after it. */
static int64_t *take_documents(fuzz_input *in, int64_t seq, int64_t *n)
{
    int64_t r = take_range(in, 0, 8);
    *n = r == 8 ? seq : r + 1 < seq ? r + 1 : seq;
    int64_t *c = checked_calloc((size_t)*n + 1, sizeof *c);
    for (int64_t d = 1; d < *n; d++)
        c[d] = c[d - 1] + 1 + take_range(in, 0, seq - c[d - 1] - (*n - d) - 1);
    c[*n] = seq;
    return c;
}

/* Documents the API refuses, S >= 1: valid ones with one promise broken. */
static void take_bad_documents(fuzz_input *in, ra_attention_options *o, fuzz_masks *m,
                               int64_t seq)
{
    int64_t n, kind = take_range(in, 0, 7);
    free(m->cu_seqlens);
    m->cu_seqlens = take_documents(in, seq, &n);
    o->cu_seqlens = m->cu_seqlens;
    o->n_documents = n;
    if (kind == 0) m->cu_seqlens[0] = 1;              /* not from 0 */
    else if (kind == 1) m->cu_seqlens[n] = seq + 1;   /* past S */
    else if (kind == 2) m->cu_seqlens[n] = seq - 1;   /* short of S */
    else if (kind == 3) o->n_documents = 0;           /* an array of none */
    else if (kind == 4) o->cu_seqlens = NULL;         /* a count without the array */
    else if (kind == 5) o->n_documents = -1;
    else if (kind == 6) {                             /* more documents than tokens */
        free(m->cu_seqlens);
        o->cu_seqlens = m->cu_seqlens = checked_calloc((size_t)seq + 2, sizeof *m->cu_seqlens);
        for (int64_t d = 0; d <= seq + 1; d++) m->cu_seqlens[d] = d;
        o->n_documents = seq + 1;
    } else {                                          /* an empty document */
        int64_t d = 1 + take_range(in, 0, n - 1);
        m->cu_seqlens[d] = m->cu_seqlens[d - 1];
    }
}

/* One option the API refuses with RA_ERR_ARGUMENT, over what *o holds. */
static void take_hostile(fuzz_input *in, ra_attention_options *o, fuzz_masks *m, int64_t seq)
{
    static const int64_t negative[] = {-1, -64, INT64_MIN};
    static const double scales[] = {NAN, INFINITY, -INFINITY, -1.0, 1e39, -0x1p-1074};
    static const double caps[] = {NAN, INFINITY, -INFINITY, -2.0, 0x1p-127, 1e39};
    static const float sinks[] = {NAN, INFINITY, -INFINITY};
    switch (take_range(in, 0, 6)) {
    case 0: o->window = TAKE_ONE_OF(in, negative); break;
    case 1: o->chunk = TAKE_ONE_OF(in, negative); break;
    case 2: o->scale = TAKE_ONE_OF(in, scales); break;
    case 3: o->softcap = TAKE_ONE_OF(in, caps); break;
    case 4: {
        int64_t h = take_range(in, 0, m->heads - 1);
        if (!m->sinks) m->sinks = checked_calloc((size_t)m->heads, sizeof *m->sinks);
        m->sinks[h] = TAKE_ONE_OF(in, sinks);
        o->sinks = m->sinks;
        break;
    }
    case 5: take_bad_documents(in, o, m, seq); break;
    default: /* dsinks without sinks */
        o->sinks = NULL;
        if (!m->dsinks) o->dsinks = m->dsinks = new_dsinks(m->heads);
    }
}

/* The options' masks and logit changes, each there or not by one bit of a
 * byte (a zero byte: none), with dsinks one time in two that sinks are;
 * the byte's top bit adds a hostile value (then returns 1).  Invalid
 * shapes' sizes count as 1: such calls are refused before the options are
 * read. */
static int take_masks(fuzz_input *in, ra_attention_options *o, fuzz_masks *m, int64_t batch,
                      int64_t seq, int64_t heads)
{
    const int64_t B = batch > 0 ? batch : 1, S = seq > 0 ? seq : 1;
    int which = take_byte(in);
    memset(m, 0, sizeof *m);
    m->heads = heads > 0 ? heads : 1;
    if (which & 1) o->scale = take_scale(in);
    if (which & 2) o->softcap = take_softcap(in);
    if (which & 4) o->window = take_span(in, seq, INT64_MAX);
    if (which & 8) o->chunk = take_span(in, seq, INT64_MAX);
    if (which & 16) o->sinks = m->sinks = take_sinks(in, m->heads);
    if (which & 32) o->padding_mask = m->padding = take_padding(in, B, S);
    if (which & 64) o->cu_seqlens = m->cu_seqlens = take_documents(in, S, &o->n_documents);
    if ((which & 16) && take_range(in, 0, 1)) o->dsinks = m->dsinks = new_dsinks(m->heads);
    if (which & 128) take_hostile(in, o, m, S);
    return (which & 128) != 0;
}

static void free_masks(fuzz_masks *m)
{
    free(m->sinks), free(m->dsinks), free(m->padding), free(m->cu_seqlens);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t dims[] = {8, 2, 4, 6, 16, 32, 34, 64, 66, 3};
    fuzz_input in = {data, size};
    int valid = 1;
    ra_tensor q, k, v, out;
    /* Sequences past the flash path's 64-key tile are costly to check:
     * one batch row of small heads. */
    int long_seq = take_range(&in, 0, 15) == 15;
    int64_t batch = long_seq ? 1 : take_size(&in, 2, &valid);
    int64_t seq = long_seq ? 60 + take_range(&in, 0, 12) : take_size(&in, 12, &valid);
    int64_t hkv = take_size(&in, 2, &valid), rep = take_size(&in, 4, &valid);
    int64_t d = long_seq ? 2 << take_range(&in, 0, 3) : TAKE_ONE_OF(&in, dims);
    int64_t heads = hkv * rep + (take_range(&in, 0, 31) == 31 ? 1 : 0);
    if (hkv > 0 && heads % hkv) valid = 0;
    q.dtype = out.dtype = RA_F32;
    k.dtype = (ra_dtype)(take_range(&in, 0, 15) % (RA_DTYPE_COUNT + 1));
    v.dtype = take_range(&in, 0, 3) == 3 ? (ra_dtype)take_range(&in, 0, RA_DTYPE_COUNT) : k.dtype;
    if ((unsigned)k.dtype >= RA_DTYPE_COUNT || (unsigned)v.dtype >= RA_DTYPE_COUNT) valid = 0;
    if (take_range(&in, 0, 3) == 3 && (unsigned)k.dtype < RA_DTYPE_COUNT) q.dtype = k.dtype;
    if (take_range(&in, 0, 31) == 31) q.dtype = RA_DTYPE_COUNT, valid = 0; /* no dtype */
    if (take_range(&in, 0, 31) == 31) out.dtype = RA_F16, valid = 0;
    int64_t qshape[4] = {batch, seq, heads, d}, kshape[4] = {batch, seq, hkv, d};
    memcpy(q.shape, qshape, sizeof qshape);
    memcpy(out.shape, qshape, sizeof qshape);
    memcpy(k.shape, kshape, sizeof kshape);
    memcpy(v.shape, kshape, sizeof kshape);
    if (take_range(&in, 0, 31) == 31) {
        v.shape[1] += 1; /* a shape that does not fit */
        valid = 0;
    }
    if (batch <= 0 || seq <= 0 || hkv <= 0 || heads <= 0) { /* refused before any use */
        q.shape[0] = k.shape[0] = v.shape[0] = out.shape[0] = batch;
    }
    int fused = q.dtype == RA_F32 && k.dtype == RA_F32 && v.dtype == RA_F32 &&
                take_range(&in, 0, 3) == 3;
    void *bufs[4] = {NULL, NULL, NULL, NULL}; /* q, k, v (or one fused), out */
    size_t bytes[4] = {0, 0, 0, 0};
    if (fused && valid) { /* one [B, S, H + 2 Hkv, D] buffer, rows padded */
        int64_t pad = take_range(&in, 0, 3), row = (heads + 2 * hkv) * d + pad;
        bufs[0] = take_buffer(&in, RA_F32, batch * seq * row, &bytes[0]);
        ra_tensor *views[3] = {&q, &k, &v};
        int64_t first[3] = {0, heads * d, (heads + hkv) * d};
        for (int i = 0; i < 3; i++) {
            int64_t st[4] = {seq * row, row, d, 1};
            memcpy(views[i]->stride, st, sizeof st);
            views[i]->data = (float *)bufs[0] + first[i];
        }
    } else {
        ra_tensor *views[3] = {&q, &k, &v};
        for (int i = 0; i < 3; i++) {
            take_strides(&in, views[i], 1, &valid);
            int64_t span = view_span(views[i]);
            bufs[i] = take_buffer(&in, views[i]->dtype, span ? span : 1, &bytes[i]);
            views[i]->data = bufs[i];
        }
    }
    take_strides(&in, &out, 0, &valid);
    int64_t out_span = view_span(&out);
    bufs[3] = take_buffer(&in, RA_F32, out_span ? out_span : 1, &bytes[3]);
    out.data = bufs[3];
    if (take_range(&in, 0, 31) == 31) {
        out.data = q.data; /* out on top of q: refused */
        valid = 0;
    }
    if (view_span(&q) == 0 || view_span(&k) == 0 || view_span(&v) == 0 || out_span == 0) valid = 0;

    ra_attention_options opt = ra_attention_options_init();
    opt.seed = take_bits(&in, 8);
    int p_kind = take_range(&in, 0, 15);
    if (p_kind >= 12) {
        static const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f};
        opt.dropout = ps[p_kind - 12];
    } else if (p_kind == 11) {
        static const float bad[] = {1.0f, -0.25f, NAN, 2.0f};
        opt.dropout = TAKE_ONE_OF(&in, bad);
        valid = 0;
    }
    ra_attention_path path = (ra_attention_path)(take_range(&in, 0, 15) % (RA_PATH_COUNT + 1));
    if ((unsigned)path >= RA_PATH_COUNT) valid = 0;
    opt.path = path;
    ra_context *ctx = take_range(&in, 0, 1) ? two_threads : NULL;
    fuzz_masks masks;
    int hostile = take_masks(&in, &opt, &masks, batch, seq, heads);
    ra_attention_options ref_opt = opt, flash_opt = opt;
    ref_opt.path = RA_PATH_REFERENCE;
    flash_opt.path = RA_PATH_FLASH;

    /* Copies of out for the other runs and of everything for "unchanged". */
    void *orig[4], *ref_out = malloc(bytes[3]), *other_out = malloc(bytes[3]);
    for (int i = 0; i < 4; i++) {
        orig[i] = bufs[i] ? malloc(bytes[i]) : NULL;
        if (bufs[i]) memcpy(orig[i], bufs[i], bytes[i]);
    }
    memcpy(ref_out, bufs[3], bytes[3]);
    memcpy(other_out, bufs[3], bytes[3]);
    ra_tensor out_ref = out, out_other = out;
    if (out.data == bufs[3]) out_ref.data = ref_out, out_other.data = other_out;

    ra_status st = ra_attention(ctx, &out, &q, &k, &v, &opt);
    for (int i = 0; i < 3; i++)
        FUZZ_CHECK(!bufs[i] || memcmp(bufs[i], orig[i], bytes[i]) == 0 || out.data == q.data,
                   "ra_attention wrote to its input %d", i);
    if (valid && hostile)
        FUZZ_CHECK(st == RA_ERR_ARGUMENT, "a hostile option gave status %d", (int)st);
    else if (valid) FUZZ_CHECK(st == RA_OK, "valid arguments refused: %d", (int)st);
    if (st != RA_OK) {
        FUZZ_CHECK(st == RA_ERR_NULL || st == RA_ERR_SIZE || st == RA_ERR_ARGUMENT ||
                       st == RA_ERR_SHAPE || st == RA_ERR_DTYPE || st == RA_ERR_GQA ||
                       st == RA_ERR_OVERFLOW, "undocumented status %d", (int)st);
        for (int i = 0; i < 4; i++)
            FUZZ_CHECK(!bufs[i] || memcmp(bufs[i], orig[i], bytes[i]) == 0,
                       "a refused call (status %d) wrote", (int)st);
    } else {
        ra_status r = ra_attention(NULL, &out_ref, &q, &k, &v, &ref_opt);
        FUZZ_CHECK(r == RA_OK, "the reference path refused what %d took: %d", (int)path, (int)r);
        ra_context *other = ctx ? NULL : two_threads;
        ra_status f = ra_attention(other, &out_other, &q, &k, &v, &flash_opt);
        FUZZ_CHECK(f == RA_OK, "flash refused what %d took: %d", (int)path, (int)f);
        if (path == RA_PATH_REFERENCE)
            FUZZ_CHECK(memcmp(bufs[3], ref_out, bytes[3]) == 0, "the reference is not repeatable");
        else
            FUZZ_CHECK(memcmp(bufs[3], other_out, bytes[3]) == 0,
                       "flash gives other bits on %s", ctx ? "one thread" : "two threads");
        check_rows(&out_other, &out_ref, &q, &k, &v, &opt, p_kind >= 12 ? opt.dropout : -1.0f);
    }
    for (int64_t h = 0; masks.dsinks && h < masks.heads; h++)
        FUZZ_CHECK(masks.dsinks[h] == DSINKS_UNTOUCHED, "ra_attention wrote dsinks[%lld]",
                   (long long)h);
    for (int i = 0; i < 4; i++) free(bufs[i]), free(orig[i]);
    free_masks(&masks);
    free(ref_out);
    free(other_out);
    return 0;
}
