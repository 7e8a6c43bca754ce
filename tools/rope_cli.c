/* rope_cli.c — rope settings from config.json, --rope-parameters and flags;
 * --positions files. */
#include "rope_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rope_source_load(const rope_cli *r, rope_source *out)
{
    char msg[CLI_MSG_LEN];
    memset(out, 0, sizeof *out);
    if (r->config_path) {
        if (ra_hf_config_read(r->config_path, &out->config, msg, sizeof msg) != RA_OK)
            return cli_fail(EXIT_FAIL, "%s", msg);
        out->has_config = 1;
    }
    if (r->rope_parameters) {
        if (ra_hf_rope_parse(r->rope_parameters, strlen(r->rope_parameters), &out->rope, msg,
                             sizeof msg) != RA_OK) {
            rope_source_free(out);
            /* "rope parameters: <problem>" names the option instead. */
            static const char prefix[] = "rope parameters: ";
            const char *problem = strncmp(msg, prefix, strlen(prefix)) == 0
                                      ? msg + strlen(prefix) : msg;
            return cli_fail(EXIT_USAGE, "--rope-parameters: %s", problem);
        }
        ra_hf_rope_inherit(&out->rope, &out->config);
    } else {
        /* The config's own rope object, which now belongs to out->rope. */
        out->rope = out->config.rope;
        memset(&out->config.rope, 0, sizeof out->config.rope);
    }
    return 0;
}

void rope_source_free(rope_source *src)
{
    ra_hf_config_free(&src->config);
    ra_hf_rope_free(&src->rope);
    src->has_config = 0;
}

int64_t rope_source_head_dim(const rope_source *src)
{
    const ra_hf_config *c = &src->config;
    if (c->has_head_dim) return c->head_dim;
    if (c->has_hidden_size && c->has_num_attention_heads)
        return c->hidden_size / c->num_attention_heads;
    return 0;
}

/* "rope type yarn needs \"factor\" ..." */
static int missing(const char *command, ra_rope_type type, const char *what)
{
    return cli_fail(EXIT_FAIL, "%s: rope type %s needs %s", command, ra_hf_rope_type_name(type),
                    what);
}

/* A factor list must have one entry per rotating pair. */
static int check_factor_list(const char *command, const char *key, int64_t n,
                             int64_t rotary_dim)
{
    if (n == rotary_dim / 2) return 0;
    return cli_fail(EXIT_FAIL, "%s: longrope %s has %lld entries; rotary_dim %lld needs %lld "
                    "(one per pair)", command, key, (long long)n, (long long)rotary_dim,
                    (long long)(rotary_dim / 2));
}

/* Every key the type needs, from the rope object, the config or a flag. */
static int check_required(const char *command, const ra_hf_rope *rope, int64_t max_positions,
                          int64_t rotary_dim)
{
    ra_rope_type type = rope->type;
    switch (type) {
    case RA_ROPE_DEFAULT:
        return 0;
    case RA_ROPE_LINEAR:
        return rope->has_factor ? 0 : missing(command, type, "\"factor\"");
    case RA_ROPE_DYNAMIC:
        if (!rope->has_factor) return missing(command, type, "\"factor\"");
        if (!max_positions)
            return missing(command, type, "max_position_embeddings (from config.json or "
                           "--max-position-embeddings): the length it scales beyond");
        return 0;
    case RA_ROPE_YARN:
        if (!rope->has_factor && !(rope->has_original_max_position_embeddings && max_positions))
            return missing(command, type, "\"factor\" (or original_max_position_embeddings and "
                           "max_position_embeddings, to derive it)");
        if (!rope->has_original_max_position_embeddings && !max_positions)
            return missing(command, type, "\"original_max_position_embeddings\" (or "
                           "max_position_embeddings, which then stands for it)");
        {
            double fast = rope->params.beta_fast > 0 ? rope->params.beta_fast : 32.0;
            double slow = rope->params.beta_slow > 0 ? rope->params.beta_slow : 1.0;
            if (fast < slow)
                return cli_fail(EXIT_FAIL, "%s: yarn needs beta_fast (%g) >= beta_slow (%g)",
                                command, fast, slow);
        }
        return 0;
    case RA_ROPE_LLAMA3:
        if (!rope->has_factor) return missing(command, type, "\"factor\"");
        if (!rope->has_low_freq_factor) return missing(command, type, "\"low_freq_factor\"");
        if (!rope->has_high_freq_factor) return missing(command, type, "\"high_freq_factor\"");
        if (!rope->has_original_max_position_embeddings)
            return missing(command, type, "\"original_max_position_embeddings\"");
        return 0;
    case RA_ROPE_LONGROPE:
        if (!rope->has_short_factor) return missing(command, type, "\"short_factor\"");
        if (!rope->has_long_factor) return missing(command, type, "\"long_factor\"");
        if (!rope->has_original_max_position_embeddings)
            return missing(command, type, "\"original_max_position_embeddings\" (in the rope "
                           "parameters or at config.json's top level)");
        if (!rope->has_factor && !rope->has_attention_factor && !max_positions)
            return missing(command, type, "\"factor\", \"attention_factor\" or "
                           "max_position_embeddings (factor = max_position_embeddings / "
                           "original_max_position_embeddings)");
        if (check_factor_list(command, "short_factor", rope->n_short_factor, rotary_dim))
            return EXIT_FAIL;
        return check_factor_list(command, "long_factor", rope->n_long_factor, rotary_dim);
    case RA_ROPE_TYPE_COUNT:
        break;
    }
    return cli_fail(EXIT_FAIL, "%s: unknown rope type %d", command, (int)type);
}

int rope_source_single(const char *command, const rope_cli *r, const rope_source *src)
{
    const ra_hf_config *c = &src->config;
    int local = c->family && (c->family->features & RA_HF_LOCAL_ROPE) &&
                ra_hf_layer_window(&c->window, -1) != 0;
    if (!local || r->rope_parameters ||
        (!c->has_rope_local_base_freq && src->rope.type == RA_ROPE_DEFAULT))
        return 0;
    return cli_fail(EXIT_FAIL, "%s: %s gives its sliding layers a rope of their own beside "
                    "the full layers': choose one with --rope-parameters", command,
                    r->config_path);
}

int rope_cli_config(const char *command, const rope_cli *r, const rope_source *src,
                    int64_t head_dim, int64_t default_seq_len, ra_rope_config *out)
{
    const ra_hf_rope *rope = &src->rope;
    const ra_hf_config *c = &src->config;
    if (c->family && (c->family->features & RA_HF_CHATGLM) && c->rope_ratio != 1 && !r->has_theta)
        return cli_fail(EXIT_FAIL, "%s: %s has rope_ratio %g, which ChatGLM3's and GLM-4's code "
                        "multiply the rope base by and ChatGLM2-32K's divides the positions by; "
                        "config.json does not say which: give --theta (%g for the first)",
                        command, r->config_path, c->rope_ratio, 10000.0 * c->rope_ratio);
    *out = rope->params; /* the scaled types' parameters; the rest is set here */
    out->struct_size = sizeof *out;
    out->type = rope->type;
    out->layout = RA_LAYOUT_INTERLEAVED;
    out->head_dim = head_dim;
    out->table_size = 4096;
    out->theta = r->has_theta ? r->theta : rope->has_theta ? rope->theta : 10000.0;

    double prf = rope->has_partial_rotary_factor ? rope->partial_rotary_factor : 1.0;
    /* transformers: int(head_dim * partial_rotary_factor), truncating;
     * GPT-J's config gives the count, rotary_dim. */
    int64_t rotary_dim = (int64_t)((double)head_dim * prf);
    if (!rope->has_partial_rotary_factor && src->config.has_rotary_dim) {
        rotary_dim = src->config.rotary_dim;
        if (rotary_dim > head_dim)
            return cli_fail(EXIT_FAIL, "%s: rotary_dim %lld is more than head_dim %lld",
                            command, (long long)rotary_dim, (long long)head_dim);
    }
    if (rotary_dim <= 0 || rotary_dim % 2 != 0)
        return cli_fail(EXIT_FAIL, "%s: partial_rotary_factor %g with head_dim %lld gives "
                        "rotary_dim %lld; RoPE needs it even and > 0", command, prf,
                        (long long)head_dim, (long long)rotary_dim);
    out->rotary_dim = rotary_dim;

    int64_t max_positions = r->has_max_position_embeddings ? r->max_position_embeddings
                            : src->config.has_max_position_embeddings
                                ? src->config.max_position_embeddings
                                : 0;
    int failed = check_required(command, rope, max_positions, rotary_dim);
    if (failed) return failed;

    if (rope->type == RA_ROPE_DYNAMIC || rope->type == RA_ROPE_YARN ||
        rope->type == RA_ROPE_LONGROPE)
        out->max_position_embeddings = max_positions;
    if (rope->type == RA_ROPE_DYNAMIC || rope->type == RA_ROPE_LONGROPE)
        out->seq_len = r->has_seq_len ? r->seq_len : default_seq_len;
    return 0;
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

int positions_for_batch(const positions_file *p, const char *path, int64_t batch, int64_t seq,
                        int64_t **ids)
{
    int shared = p->ndim == 1 && p->shape[0] == seq;
    int per_row = p->ndim == 2 && p->shape[0] == batch && p->shape[1] == seq;
    if (!shared && !per_row) {
        char shape[256] = "";
        for (int i = 0; i < p->ndim; i++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld",
                     i ? ", " : "", (long long)p->shape[i]);
        return cli_fail(EXIT_FAIL, "%s has shape [%s]; expected [%lld] (seq) or [%lld, %lld] "
                        "(batch, seq)", path, shape, (long long)seq, (long long)batch,
                        (long long)seq);
    }
    *ids = malloc((size_t)(batch * seq) * sizeof **ids);
    if (!*ids) return cli_fail(EXIT_FAIL, "out of memory for the positions");
    for (int64_t b = 0; b < batch; b++)
        memcpy(*ids + b * seq, p->ids + (shared ? 0 : b * seq), (size_t)seq * sizeof **ids);
    return 0;
}
