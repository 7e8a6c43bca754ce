/*
 * attention_token_types.c — --token-type-ids' mask (attention_token_types.h).
 */
#include <stdlib.h>

#include "attention_token_types.h"
#include "cli.h"
#include "ropeattn_io.h"

/* --prefill P: the cache's later tokens are decode steps of text (as
 * transformers' generate() passes no token_type_ids after its prefill):
 * an image token among them would see fewer keys than the no-cache Y's. */
static int check_prefill(const char *path, const int64_t *types, int64_t batch, int64_t seq,
                         int64_t prefill)
{
    for (int64_t b = 0; prefill && b < batch; b++)
        for (int64_t i = prefill; i < seq; i++)
            if (types[b * seq + i] == 1)
                return cli_fail(EXIT_FAIL, "%s: row %lld's token %lld is an image token at or "
                                "after --prefill %lld: the decode steps are text (transformers' "
                                "generate() gives them no token_type_ids), so its image block "
                                "must lie inside the prefill: give --prefill %lld or more",
                                path, (long long)b, (long long)i, (long long)prefill,
                                (long long)(i + 1));
    return 0;
}

int token_type_mask_read(const char *path, const ra_hf_layer *layer, const uint8_t *pad,
                         int64_t batch, int64_t seq, int64_t prefill, uint8_t **out)
{
    char msg[CLI_MSG_LEN];
    ra_npy npy = {0};
    *out = NULL;
    if (ra_npy_read(path, &npy, msg, sizeof msg) != RA_OK) return cli_fail(EXIT_FAIL, "%s", msg);
    int failed = 0;
    const int shaped = (npy.ndim == 2 && npy.shape[0] == batch && npy.shape[1] == seq) ||
                       (npy.ndim == 1 && batch == 1 && npy.shape[0] == seq);
    int64_t *types = NULL;
    if (npy.dtype != RA_NPY_I32 && npy.dtype != RA_NPY_I64)
        failed = cli_fail(EXIT_FAIL, "%s must hold int32 ('<i4') or int64 ('<i8') values", path);
    else if (!shaped)
        failed = cli_fail(EXIT_FAIL, "%s must be [%lld, %lld] (the input's batch and seq)", path,
                          (long long)batch, (long long)seq);
    else if (!(types = malloc((size_t)(batch * seq) * sizeof *types)) ||
             !(*out = malloc((size_t)(batch * seq * seq))))
        failed = cli_fail(EXIT_FAIL, "out of memory for the mask of %s", path);
    for (int64_t i = 0; !failed && i < batch * seq; i++)
        types[i] = npy.dtype == RA_NPY_I32 ? ((const int32_t *)npy.data)[i]
                                           : ((const int64_t *)npy.data)[i];
    if (!failed) failed = check_prefill(path, types, batch, seq, prefill);
    ra_status status = failed ? RA_OK : ra_hf_token_type_mask(layer, types, pad, batch, seq, *out);
    if (status != RA_OK)
        failed = cli_fail(EXIT_FAIL, "%s: %s", path, ra_hf_last_error());
    free(types);
    ra_npy_free(&npy);
    if (failed) {
        free(*out);
        *out = NULL;
    }
    return failed;
}
