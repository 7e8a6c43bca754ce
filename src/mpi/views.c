/*
 * views.c — the caller's output views, checked as libropeattn checks an
 * output (ra_tensor_check_output): the ring, its backward and the sharded
 * decode write them only at the end, from their own buffers, so the core
 * never sees them; which blocks the ring computes; and a rank's K/V packed
 * for the ring.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "mpi_internal.h"

ra_status mpi_check_out(const ra_tensor *out, const char *name, const float *lse, int64_t n_lse)
{
    if (!out->data) return mpi_fail(RA_ERR_NULL, "%s: data is NULL", name);
    if (out->stride[3] != 1)
        return mpi_fail(RA_ERR_ARGUMENT, "%s: stride[3] is %lld, must be 1", name,
                        (long long)out->stride[3]);
    /* the axes of extent > 1 from the smallest stride up: each stride past
     * the offsets the axes before it reach (every index its own element) */
    int axes[4], n = 0;
    for (int d = 0; d < 4; d++) {
        if (out->stride[d] < 0)
            return mpi_fail(RA_ERR_ARGUMENT, "%s: stride[%d] is %lld, must be >= 0", name, d,
                            (long long)out->stride[d]);
        if (out->shape[d] == 1) continue;
        int i = n++;
        for (; i > 0 && out->stride[axes[i - 1]] > out->stride[d]; i--) axes[i] = axes[i - 1];
        axes[i] = d;
    }
    int64_t reach = 0, term;
    for (int i = 0; i < n; i++) {
        if (out->stride[axes[i]] <= reach)
            return mpi_fail(RA_ERR_ARGUMENT, "%s: stride[%d] %lld lets written elements share "
                            "an address", name, axes[i], (long long)out->stride[axes[i]]);
        if (__builtin_mul_overflow(out->shape[axes[i]] - 1, out->stride[axes[i]], &term) ||
            __builtin_add_overflow(reach, term, &reach) || reach > PTRDIFF_MAX / 4 - 1)
            return mpi_fail(RA_ERR_OVERFLOW, "%s: its last element's offset overflows", name);
    }
    /* lse [n_lse] and out's span [data, data + reach] share no byte */
    const uintptr_t o0 = (uintptr_t)out->data, o1 = o0 + (uintptr_t)(reach + 1) * sizeof(float);
    const uintptr_t l0 = (uintptr_t)lse, l1 = l0 + (uintptr_t)n_lse * sizeof(float);
    if (lse && l0 < o1 && o0 < l1) return mpi_fail(RA_ERR_ARGUMENT, "lse overlaps %s", name);
    return RA_OK;
}

/* The bytes from a view's first element to past its last (strides >= 0:
 * mpi_check_out's). */
static void span(const ra_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
    int64_t reach = 0;
    for (int d = 0; d < 4; d++) reach += (t->shape[d] - 1) * t->stride[d];
    *lo = (uintptr_t)t->data;
    *hi = *lo + (uintptr_t)(reach + 1) * sizeof(float);
}

ra_status mpi_check_off_masks(const ra_tensor *t, const char *name, const float *lse,
                              int64_t n_lse, const ra_attention_options *o, const float *sinks,
                              int64_t batch, int64_t heads, int64_t seq)
{
    const int docs = o->cu_seqlens && o->n_documents >= 0 && o->n_documents <= seq;
    const struct {
        const void *p;
        uintptr_t bytes;
        const char *what;
    } in[3] = {{sinks, (uintptr_t)heads * sizeof(float), "sinks"},
               {o->padding_mask, (uintptr_t)(batch * seq), "padding_mask"},
               {docs ? o->cu_seqlens : NULL, (uintptr_t)(o->n_documents + 1) * sizeof(int64_t),
                "cu_seqlens"}};
    uintptr_t w[2][2];
    span(t, &w[0][0], &w[0][1]);
    w[1][0] = (uintptr_t)lse;
    w[1][1] = w[1][0] + (uintptr_t)n_lse * sizeof(float);
    for (int i = 0; i < 3; i++) {
        const uintptr_t r0 = (uintptr_t)in[i].p, r1 = r0 + in[i].bytes;
        for (int j = 0; in[i].p && j < (lse ? 2 : 1); j++)
            if (w[j][0] < r1 && r0 < w[j][1])
                return mpi_fail(RA_ERR_ARGUMENT, "%s overlaps %s", j ? "lse" : name, in[i].what);
    }
    return RA_OK;
}

ra_status mpi_check_apart(const ra_tensor *a, const char *an, const ra_tensor *b,
                          const char *bn)
{
    uintptr_t a0, a1, b0, b1;
    span(a, &a0, &a1);
    span(b, &b0, &b1);
    if (a0 < b1 && b0 < a1) return mpi_fail(RA_ERR_ARGUMENT, "%s overlaps %s", an, bn);
    return RA_OK;
}

int64_t mpi_shard_rows(int64_t seq, int P, int o)
{
    int64_t start[2], count[2];
    mpi_chunks(seq, P, o, start, count);
    return count[0] + count[1];
}

ra_status mpi_ring_options(ra_attention_options *o, const ra_attention_options *options,
                           const char *fn, const float **sinks, float **dsinks)
{
    *o = ra_attention_options_init();
    if (options) mpi_options(o, options);
    if (o->path == RA_PATH_REFERENCE)
        return mpi_fail(RA_ERR_UNSUPPORTED, "%s: the reference path (ring attention runs on "
                        "the flash path)", fn);
    *sinks = o->sinks;
    if (dsinks) *dsinks = o->sinks ? o->dsinks : NULL;
    o->sinks = NULL;
    o->dsinks = NULL;
    return RA_OK;
}

ra_status mpi_same_shape(const ra_tensor *a, const char *an, const ra_tensor *b, const char *bn)
{
    for (int d = 0; d < 4; d++)
        if (a->shape[d] != b->shape[d])
            return mpi_fail(RA_ERR_SHAPE, "%s [%lld, %lld, %lld, %lld] and %s [%lld, %lld, "
                            "%lld, %lld] differ", an, (long long)a->shape[0],
                            (long long)a->shape[1], (long long)a->shape[2],
                            (long long)a->shape[3], bn, (long long)b->shape[0],
                            (long long)b->shape[1], (long long)b->shape[2],
                            (long long)b->shape[3]);
    return RA_OK;
}

ra_status mpi_ring_shapes(mpi_ring_shape *s, const ra_tensor *q, const ra_tensor *k,
                          const ra_tensor *v, int64_t seq, int size, int rank)
{
    RA_MPI_TRY(ra_mpi_zigzag(seq, size, rank, s->start, s->count));
    s->seq = seq;
    s->n_local = s->count[0] + s->count[1];
    if (q->dtype != RA_F32) return mpi_fail(RA_ERR_DTYPE, "q must be f32");
    if (!(k->dtype == RA_F32 || k->dtype == RA_F16 || k->dtype == RA_BF16) ||
        v->dtype != k->dtype)
        return mpi_fail(RA_ERR_DTYPE, "k and v must be f32, f16 or bf16, the same");
    RA_MPI_TRY(mpi_same_shape(v, "v", k, "k"));
    for (int d = 0; d < 4; d++)
        if (q->shape[d] < 1 || k->shape[d] < 1 || (d != 2 && k->shape[d] != q->shape[d]))
            return mpi_fail(RA_ERR_SHAPE, "q [%lld, %lld, %lld, %lld] and k [%lld, %lld, %lld, "
                            "%lld] differ in axis %d (or one is not positive)",
                            (long long)q->shape[0], (long long)q->shape[1],
                            (long long)q->shape[2], (long long)q->shape[3],
                            (long long)k->shape[0], (long long)k->shape[1],
                            (long long)k->shape[2], (long long)k->shape[3], d);
    if (q->shape[1] != s->n_local)
        return mpi_fail(RA_ERR_SHAPE, "rank %d holds %lld rows of a sequence of %lld (chunks "
                        "of %lld and %lld tokens), not %lld", rank, (long long)s->n_local,
                        (long long)seq, (long long)s->count[0], (long long)s->count[1],
                        (long long)q->shape[1]);
    s->batch = q->shape[0];
    s->heads = q->shape[2];
    s->kv_heads = k->shape[2];
    s->head_dim = q->shape[3];
    s->kv_dtype = k->dtype;
    s->kv_row = (size_t)(s->kv_heads * s->head_dim) * mpi_dtype_size(k->dtype);
    s->max_rows = 0;
    for (int o = 0; o < size; o++)
        if (mpi_shard_rows(seq, size, o) > s->max_rows) s->max_rows = mpi_shard_rows(seq, size, o);
    if (2 * s->batch * s->max_rows > INT_MAX)
        return mpi_fail(RA_ERR_OVERFLOW, "a K/V message of %lld token rows: more than MPI's "
                        "int count", (long long)(2 * s->batch * s->max_rows));
    return RA_OK;
}

int mpi_block_visible(const ra_attention_options *o, int64_t nq, int64_t nk, int later,
                      int64_t q_start, int64_t k_start)
{
    const int64_t k_last = k_start + nk - 1; /* the block's nearest key to its first query */
    return nq > 0 && nk > 0 && !later && !(o->window && q_start - k_last >= o->window) &&
           !(o->chunk && !o->padding_mask && q_start / o->chunk * o->chunk > k_last);
}

void mpi_ring_signature(mpi_sig sig[MPI_RING_SIG], const mpi_ring_shape *s, int64_t seq,
                        const ra_attention_options *o, const float *sinks)
{
    static const ra_attention_options none; /* a failed rank's: zeros */
    if (!o) o = &none;
    const int64_t n_cu = (o->n_documents + 1) * (int64_t)sizeof(int64_t);
    const mpi_sig all[MPI_RING_SIG] = {
        {"seq", seq, MPI_SIG_INT},
        {"batch", s->batch, MPI_SIG_INT},
        {"heads", s->heads, MPI_SIG_INT},
        {"kv_heads", s->kv_heads, MPI_SIG_INT},
        {"head_dim", s->head_dim, MPI_SIG_INT},
        {"the dtype of k and v", (int64_t)s->kv_dtype, MPI_SIG_DTYPE},
        {"window", o->window, MPI_SIG_INT},
        {"scale", mpi_sig_double(o->scale), MPI_SIG_DOUBLE},
        {"softcap", mpi_sig_double(o->softcap), MPI_SIG_DOUBLE},
        {"chunk", o->chunk, MPI_SIG_INT},
        {"sinks", sinks ? 1 + mpi_hash(sinks, (size_t)s->heads * sizeof(float)) : 0,
         MPI_SIG_ARRAY},
        {"padding_mask",
         o->padding_mask ? 1 + mpi_hash(o->padding_mask, (size_t)(s->batch * seq)) : 0,
         MPI_SIG_ARRAY},
        {"cu_seqlens", o->cu_seqlens ? 1 + mpi_hash(o->cu_seqlens, (size_t)n_cu) : 0,
         MPI_SIG_ARRAY},
        {"dropout", mpi_sig_double(o->dropout), MPI_SIG_FLOAT},
        {"seed", o->dropout > 0.0f ? (int64_t)o->seed : 0, MPI_SIG_UINT64}};
    memcpy(sig, all, sizeof all);
}

int mpi_real_row(const ra_attention_options *o, int64_t seq, int64_t b, const int64_t start[2],
                 const int64_t count[2], int64_t i)
{
    const int64_t pos = i < count[0] ? start[0] + i : start[1] + i - count[0];
    return !o->padding_mask || o->padding_mask[b * seq + pos] != 0;
}

void mpi_pack_kv(char *dst, const ra_tensor *k, const ra_tensor *v)
{
    const size_t esize = mpi_dtype_size(k->dtype), row = (size_t)k->shape[3] * esize;
    const ra_tensor *src[2] = {k, v};
    for (int w = 0; w < 2; w++)
        for (int64_t b = 0; b < k->shape[0]; b++)
            for (int64_t s = 0; s < k->shape[1]; s++)
                for (int64_t h = 0; h < k->shape[2]; h++, dst += row)
                    memcpy(dst, (const char *)src[w]->data +
                                    (size_t)(b * src[w]->stride[0] + s * src[w]->stride[1] +
                                             h * src[w]->stride[2]) * esize,
                           row);
}
