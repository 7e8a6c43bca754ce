/*
 * attention_masks.c — --attention-mask and --packed for `ropeattn attention`
 * (attention_masks.h).
 */
#include <stdlib.h>
#include <string.h>

#include "attention_masks.h"
#include "cli.h"
#include "ropeattn_io.h"

int attention_mask_read(const char *path, int64_t batch, int64_t seq, uint8_t **out)
{
    char msg[CLI_MSG_LEN];
    ra_npy npy = {0};
    *out = NULL;
    if (ra_npy_read(path, &npy, msg, sizeof msg) != RA_OK) return cli_fail(EXIT_FAIL, "%s", msg);
    int failed = 0;
    int shaped = (npy.ndim == 2 && npy.shape[0] == batch && npy.shape[1] == seq) ||
                 (npy.ndim == 1 && batch == 1 && npy.shape[0] == seq);
    if (npy.dtype != RA_NPY_I32 && npy.dtype != RA_NPY_I64)
        failed = cli_fail(EXIT_FAIL, "%s must hold int32 ('<i4') or int64 ('<i8') values", path);
    else if (!shaped)
        failed = cli_fail(EXIT_FAIL, "%s must be [%lld, %lld] (the input's batch and seq; "
                          "a full mask, [batch, heads, seq, seq], holds bool or float "
                          "values)", path,
                          (long long)batch, (long long)seq);
    else if (!(*out = malloc((size_t)(batch * seq))))
        failed = cli_fail(EXIT_FAIL, "out of memory for the mask in %s", path);
    for (int64_t i = 0; !failed && i < batch * seq; i++) {
        int64_t v = npy.dtype == RA_NPY_I32 ? ((const int32_t *)npy.data)[i]
                                            : ((const int64_t *)npy.data)[i];
        if (v != 0 && v != 1)
            failed = cli_fail(EXIT_FAIL, "%s: element %lld is %lld; a mask holds 0 (padding) "
                              "and 1 (a token)", path, (long long)i, (long long)v);
        else
            (*out)[i] = (uint8_t)v;
    }
    ra_npy_free(&npy);
    if (failed) {
        free(*out);
        *out = NULL;
    }
    return failed;
}

/* Whether token s of row b starts a document. */
static int starts(const int64_t *ids, int64_t seq, int64_t b, int64_t s)
{
    return s == 0 || ids[b * seq + s] != ids[b * seq + s - 1] + 1;
}

/* Row b's document starts into cu [seq + 1], then seq; returns their count. */
static int64_t row_documents(const int64_t *ids, int64_t seq, int64_t b, int64_t *cu)
{
    int64_t n = 0;
    for (int64_t s = 0; s < seq; s++)
        if (starts(ids, seq, b, s)) cu[n++] = s;
    cu[n] = seq;
    return n;
}

int packed_rows_find(const int64_t *ids, int64_t batch, int64_t seq, const char *path,
                     packed_rows *out)
{
    *out = (packed_rows){.seq = seq};
    out->group = malloc((size_t)batch * sizeof *out->group);
    out->n_documents = malloc((size_t)batch * sizeof *out->n_documents);
    out->cu = malloc((size_t)(batch * (seq + 1)) * sizeof *out->cu);
    if (!out->group || !out->n_documents || !out->cu) {
        packed_rows_free(out);
        return cli_fail(EXIT_FAIL, "out of memory for the documents of %s", path);
    }
    for (int64_t b = 0; b < batch; b++) { /* row b's documents, in a new group's place */
        int64_t *cu = out->cu + out->n_groups * (seq + 1);
        const int64_t n = row_documents(ids, seq, b, cu);
        int64_t g = 0;
        while (g < out->n_groups &&
               !(out->n_documents[g] == n &&
                 memcmp(out->cu + g * (seq + 1), cu, (size_t)(n + 1) * sizeof *cu) == 0))
            g++;
        out->group[b] = g;
        if (g == out->n_groups) out->n_documents[out->n_groups++] = n;
    }
    return 0;
}

void packed_rows_free(packed_rows *p)
{
    free(p->group);
    free(p->n_documents);
    free(p->cu);
    *p = (packed_rows){0};
}

/* Group g's rows (row: a batch row's bytes) from full [batch, row] into
 * part [n, row] (gather), or back from part into full; returns n. */
static int64_t move_rows(const packed_rows *p, int64_t g, int64_t batch, size_t row, void *dst,
                         const void *src, int back)
{
    int64_t n = 0;
    for (int64_t b = 0; b < batch; b++) {
        if (p->group[b] != g) continue;
        const size_t to = (size_t)(back ? b : n) * row, from = (size_t)(back ? n : b) * row;
        memcpy((char *)dst + to, (const char *)src + from, row);
        n++;
    }
    return n;
}

ra_status packed_rows_run(const packed_rows *p, int64_t batch, int64_t seq, int64_t width,
                          int components, const float *x, const float *dy, const int64_t *ids,
                          ra_attention_options attention, float *y, float *dx,
                          packed_rows_call call, void *arg)
{
    if (p) {
        attention.cu_seqlens = p->cu;
        attention.n_documents = p->n_documents[0];
    }
    if (!p || p->n_groups == 1) return call(arg, batch, x, dy, ids, &attention, 0, y, dx);
    const size_t row = (size_t)(seq * width) * sizeof(float), id_row = (size_t)seq * sizeof *ids;
    const size_t all = (size_t)batch * row;
    float *xp = malloc(all), *yp = malloc(all);
    float *dyp = dy ? malloc(all) : NULL, *dxp = dy ? malloc(all) : NULL;
    int64_t *idsp = ids ? malloc((size_t)(components * batch) * id_row) : NULL;
    ra_status status = !xp || !yp || (dy && (!dyp || !dxp)) || (ids && !idsp) ? RA_ERR_NOMEM
                                                                              : RA_OK;
    for (int64_t g = 0; status == RA_OK && g < p->n_groups; g++) {
        const int64_t n = move_rows(p, g, batch, row, xp, x, 0);
        if (dy) move_rows(p, g, batch, row, dyp, dy, 0);
        for (int c = 0; ids && c < components; c++) /* [components, n, seq] */
            move_rows(p, g, batch, id_row, idsp + c * n * seq, ids + c * batch * seq, 0);
        attention.cu_seqlens = p->cu + g * (p->seq + 1);
        attention.n_documents = p->n_documents[g];
        status = call(arg, n, xp, dyp, idsp, &attention, g > 0, yp, dxp);
        if (status != RA_OK) break;
        move_rows(p, g, batch, row, y, yp, 1);
        if (dy) move_rows(p, g, batch, row, dx, dxp, 1);
    }
    free(idsp);
    free(dxp);
    free(dyp);
    free(yp);
    free(xp);
    return status;
}

int packed_chunks_align(const int64_t *ids, int64_t batch, int64_t seq, int64_t chunk,
                        const char *path)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t s = 0; s < seq; s++)
            if (starts(ids, seq, b, s) && (s - ids[b * seq + s]) % chunk != 0)
                return cli_fail(EXIT_FAIL, "%s: sequence %lld starts a document at token %lld "
                                "with position %lld; transformers counts a packed document's "
                                "chunks of %lld from its positions, this layer from the "
                                "token's place: they differ unless the two agree modulo %lld",
                                path, (long long)b, (long long)s,
                                (long long)ids[b * seq + s], (long long)chunk, (long long)chunk);
    return 0;
}

int text_positions_plain(const int64_t *text, int64_t batch, int64_t seq, const char *path)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t s = 1; s < seq; s++)
            if (starts(text, seq, b, s))
                return cli_fail(EXIT_FAIL, "%s: the text positions (row 0 of [4, ...]) of "
                                "sequence %lld step from %lld to %lld at token %lld, where "
                                "transformers (given no attention mask) starts a packed "
                                "document: add --packed, or --attention-mask", path,
                                (long long)b, (long long)text[b * seq + s - 1],
                                (long long)text[b * seq + s], (long long)s);
    return 0;
}
