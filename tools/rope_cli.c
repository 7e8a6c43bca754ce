/* rope_cli.c — rope settings from config.json, --rope-parameters and flags;
 * --positions files. */
#include "rope_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rope_source_load(const rope_cli *r, rope_source *out)
{
    memset(out, 0, sizeof *out);
    ra_status status = r->config_path ? ra_hf_config_open(&out->config, r->config_path)
                                      : ra_hf_config_parse(&out->config, "{}", 2);
    if (status != RA_OK) return cli_fail(EXIT_FAIL, "%s", ra_hf_last_error());
    out->has_config = r->config_path != NULL;
    if (r->rope_parameters &&
        ra_hf_config_set_rope_parameters(out->config, r->rope_parameters,
                                         strlen(r->rope_parameters)) != RA_OK) {
        /* "rope parameters: <problem>" names the option instead. */
        static const char prefix[] = "rope parameters: ";
        const char *msg = ra_hf_last_error();
        const char *problem = strncmp(msg, prefix, strlen(prefix)) == 0 ? msg + strlen(prefix)
                                                                        : msg;
        int code = cli_fail(EXIT_USAGE, "--rope-parameters: %s", problem);
        rope_source_free(out);
        return code;
    }
    if ((r->has_theta && ra_hf_config_set_rope_theta(out->config, r->theta) != RA_OK) ||
        (r->has_max_position_embeddings &&
         ra_hf_config_set_max_position_embeddings(out->config, r->max_position_embeddings) !=
             RA_OK)) {
        int code = cli_fail(EXIT_USAGE, "%s", ra_hf_last_error());
        rope_source_free(out);
        return code;
    }
    out->attention = ra_hf_attention_info_init();
    if (ra_hf_config_attention(out->config, -1, &out->attention) != RA_OK) {
        int code = cli_fail(EXIT_FAIL, "%s", ra_hf_last_error());
        rope_source_free(out);
        return code;
    }
    return 0;
}

void rope_source_free(rope_source *src)
{
    ra_hf_config_close(src->config);
    memset(src, 0, sizeof *src);
}

int checkpoint_paths_find(const char **weights, const char **config, checkpoint_paths *paths)
{
    paths->given = *weights;
    if (ra_hf_checkpoint_find(*weights, paths->weights, paths->config, sizeof paths->weights) !=
        RA_OK)
        return cli_fail(EXIT_FAIL, "%s", ra_hf_last_error());
    paths->folder = strcmp(paths->weights, paths->given) != 0; /* a file is taken as given */
    *weights = paths->weights;
    if (!*config && paths->config[0]) *config = paths->config;
    paths->config_option = *config == paths->config ? "the config.json beside --weights"
                                                    : "--config";
    return 0;
}

int rope_cli_require_rope(const char *command, const rope_cli *r, const rope_source *src,
                          const checkpoint_paths *paths)
{
    double theta;
    if (src->has_config || r->has_theta ||
        (r->rope_parameters && ra_hf_config_rope_theta(src->config, &theta) == RA_OK))
        return 0;
    return cli_fail(EXIT_USAGE, "%s: no config.json %s %s: give --config, or the rope: --theta "
                    "(or --rope-parameters with rope_theta)", command,
                    paths->folder ? "in" : "beside", paths->given);
}

int rope_cli_fail(const char *command, ra_status status)
{
    return cli_fail(status == RA_ERR_ARGUMENT ? EXIT_USAGE : EXIT_FAIL, "%s: %s", command,
                    ra_hf_last_error());
}

int rope_cli_config(const char *command, const rope_cli *r, const rope_source *src,
                    int64_t head_dim, int64_t max_position, ra_rope_config *out)
{
    ra_hf_options o = ra_hf_options_init();
    o.head_dim = head_dim;
    o.max_position = max_position;
    o.seq_len = r->has_seq_len ? r->seq_len : 0;
    ra_status status = ra_hf_rope_config(src->config, &o, out);
    return status == RA_OK ? 0 : cli_fail(EXIT_FAIL, "%s: %s", command, ra_hf_last_error());
}

/* ---- positions ----------------------------------------------------------- */

int positions_read(const char *path, positions_file *out)
{
    char msg[CLI_MSG_LEN];
    ra_npy npy = {0};
    memset(out, 0, sizeof *out);
    if (ra_npy_read(path, &npy, msg, sizeof msg) != RA_OK) return cli_fail(EXIT_FAIL, "%s", msg);
    int failed = 0;
    if (npy.dtype != RA_NPY_I32 && npy.dtype != RA_NPY_I64)
        failed = cli_fail(EXIT_FAIL, "%s must hold int32 ('<i4') or int64 ('<i8') positions",
                          path);
    else if (npy.count == 0)
        failed = cli_fail(EXIT_FAIL, "%s holds no positions", path);
    else if (!(out->ids = malloc((size_t)npy.count * sizeof *out->ids)))
        failed = cli_fail(EXIT_FAIL, "out of memory for the positions in %s", path);
    for (int64_t i = 0; !failed && i < npy.count; i++) {
        int64_t v = npy.dtype == RA_NPY_I32 ? ((const int32_t *)npy.data)[i]
                                            : ((const int64_t *)npy.data)[i];
        if (v < 0 || v > RA_MAX_POSITION)
            failed = cli_fail(EXIT_FAIL, "%s: position %lld (element %lld) is outside [0, %lld]",
                              path, (long long)v, (long long)i, (long long)RA_MAX_POSITION);
        else {
            out->ids[i] = v;
            if (v > out->max) out->max = v;
        }
    }
    if (!failed) {
        out->count = npy.count;
        out->ndim = npy.ndim;
        memcpy(out->shape, npy.shape, sizeof out->shape);
    }
    ra_npy_free(&npy);
    if (failed) positions_free(out);
    return failed;
}

void positions_free(positions_file *p)
{
    free(p->ids);
    memset(p, 0, sizeof *p);
}

int64_t positions_max(const int64_t *ids, int64_t n)
{
    int64_t max = 0;
    for (int64_t i = 0; i < n; i++) max = ids[i] > max ? ids[i] : max;
    return max;
}

ra_positions positions_of_ids(const int64_t *ids, int components, int64_t start)
{
    ra_positions p = ra_positions_start(start);
    if (components == 3) p.mrope_ids = ids;
    else if (components == 2) p.axial_ids = ids;
    else p.ids = ids;
    return p;
}

int positions_axial(const positions_file *p, const char *path, int64_t batch, int64_t seq,
                    int64_t **ids)
{
    const int64_t *d = p->shape;
    const int shared = p->ndim == 2 && d[0] == seq && d[1] == 2;
    const int per_row = p->ndim == 3 && d[0] == batch && d[1] == seq && d[2] == 2;
    if (!shared && !per_row)
        return cli_fail(EXIT_FAIL, "%s: a vision encoder's positions are (row, column) pairs: "
                        "[%lld, 2] or [%lld, %lld, 2]", path, (long long)seq, (long long)batch,
                        (long long)seq);
    *ids = malloc((size_t)(2 * batch * seq) * sizeof **ids);
    if (!*ids) return cli_fail(EXIT_FAIL, "out of memory for the positions");
    for (int64_t b = 0; b < batch; b++)
        memcpy(*ids + 2 * b * seq, p->ids + (per_row ? 2 * b * seq : 0),
               (size_t)(2 * seq) * sizeof **ids);
    return 0;
}

int positions_for_batch(const positions_file *p, const char *path, int64_t batch, int64_t seq,
                        int mrope, int64_t **ids, int *components, int64_t **text)
{
    const int64_t *d = p->shape;
    /* [4, ...]: transformers' text positions, then the 3-D ones (Qwen3-VL) */
    const int rows = p->ndim >= 2 && d[0] == 4 ? 4 : 3;
    int shared = p->ndim == 1 && d[0] == seq;
    int per_row = p->ndim == 2 && d[0] == batch && d[1] == seq;
    int shared3 = p->ndim == 2 && d[0] == rows && d[1] == seq;
    int per_row3 = p->ndim == 3 && d[0] == rows && d[1] == batch && d[2] == seq;
    char shape[256] = "";
    for (int i = 0; i < p->ndim; i++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", i ? ", " : "",
                 (long long)d[i]);
    if (mrope && shared3 && per_row)
        return cli_fail(EXIT_FAIL, "%s has shape [%s]: with batch %d that is 3-D positions or "
                        "a row per sequence; write [%d, %d, %lld] (3-D) or [%lld] (one row for "
                        "all)", path, shape, rows, rows, rows, (long long)seq, (long long)seq);
    if (!mrope && (per_row3 || (shared3 && !per_row)))
        return cli_fail(EXIT_FAIL, "%s has shape [%s]: 3-D positions (temporal, height, width) "
                        "need a rope with mrope_section (Qwen2-VL, Qwen2.5-VL, Qwen3-VL)", path,
                        shape);
    if (!shared && !per_row && !shared3 && !per_row3)
        return cli_fail(EXIT_FAIL, "%s has shape [%s]; expected [%lld] (seq) or [%lld, %lld] "
                        "(batch, seq)%s", path, shape, (long long)seq, (long long)batch,
                        (long long)seq,
                        mrope ? ", or 3-D [3 or 4, seq] or [3 or 4, batch, seq]" : "");
    const int three = mrope && (shared3 || per_row3), with_text = three && rows == 4;
    *components = three ? 3 : 1;
    *ids = malloc((size_t)(*components * batch * seq) * sizeof **ids);
    if (text) *text = with_text ? malloc((size_t)(batch * seq) * sizeof **text) : NULL;
    if (!*ids || (with_text && text && !*text)) {
        free(*ids);
        *ids = NULL;
        if (text) {
            free(*text);
            *text = NULL;
        }
        return cli_fail(EXIT_FAIL, "out of memory for the positions");
    }
    /* [components, batch, seq]; the text positions [batch, seq] */
    const int by_row = three ? per_row3 : per_row; /* per_row wins over shared3 without mrope */
    const int64_t row = by_row ? batch * seq : seq;
    for (int c = 0; c < *components; c++)
        for (int64_t b = 0; b < batch; b++)
            memcpy(*ids + (c * batch + b) * seq,
                   p->ids + (with_text + c) * row + (by_row ? b * seq : 0),
                   (size_t)seq * sizeof **ids);
    for (int64_t b = 0; with_text && text && b < batch; b++)
        memcpy(*text + b * seq, p->ids + (by_row ? b * seq : 0), (size_t)seq * sizeof **text);
    return 0;
}
