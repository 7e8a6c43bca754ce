/*
 * engine.c — ra_mpi_engine: ring attention as a layer's attention engine
 * (ra_attention_engine), so that ra_layer_forward, ra_layer_forward_train
 * and ra_layer_backward run context-parallel over a communicator.
 */
#include "mpi/mpi_internal.h"

static ra_status engine_forward(void *user, ra_context *ctx, const ra_tensor *out, float *lse,
                                const ra_tensor *q, const ra_tensor *k, const ra_tensor *v,
                                const ra_attention_options *options)
{
    const ra_mpi_engine *e = user;
    return ra_mpi_attention(ctx, e->comm, out, lse, q, k, v, e->seq, options);
}

static const char *engine_error(void *user)
{
    (void)user;
    return ra_mpi_last_error();
}

RA_MPI_API ra_status ra_mpi_engine_init(ra_mpi_engine *e, MPI_Comm comm, int64_t seq)
{
    mpi_reset();
    if (!e) return mpi_fail(RA_ERR_NULL, "e is NULL");
    if (seq < 1) return mpi_fail(RA_ERR_SIZE, "seq %lld is not positive", (long long)seq);
    e->engine = (ra_attention_engine){.struct_size = sizeof e->engine, .user = e,
                                      .forward = engine_forward, .error = engine_error};
    e->comm = comm;
    e->seq = seq;
    return RA_OK;
}
