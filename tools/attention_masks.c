/*
 * attention_masks.c — --attention-mask and --packed for `ropeattn attention`
 * (attention_masks.h).
 */
#include <stdlib.h>
#include <string.h>

#include "attention_masks.h"
#include "cli.h"
#include "io/io.h"

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
        failed = cli_fail(EXIT_FAIL, "%s must be [%lld, %lld] (the input's batch and seq)", path,
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

int packed_documents(const int64_t *ids, int64_t batch, int64_t seq, const char *path,
                     int64_t **cu, int64_t *n)
{
    *n = 0;
    for (int64_t s = 0; s < seq; s++) {
        for (int64_t b = 1; b < batch; b++)
            if (starts(ids, seq, b, s) != starts(ids, seq, 0, s))
                return cli_fail(EXIT_FAIL, "--packed: rows 0 and %lld of %s start documents at "
                                "different tokens (token %lld); run such rows one at a time",
                                (long long)b, path, (long long)s);
        *n += starts(ids, seq, 0, s);
    }
    if (!(*cu = malloc((size_t)(*n + 1) * sizeof **cu)))
        return cli_fail(EXIT_FAIL, "out of memory for the documents of %s", path);
    int64_t d = 0;
    for (int64_t s = 0; s < seq; s++)
        if (starts(ids, seq, 0, s)) (*cu)[d++] = s;
    (*cu)[d] = seq;
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
