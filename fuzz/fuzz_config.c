/*
 * fuzz_config.c — the same bytes as a config.json (ra_hf_fields_parse) and
 * as a --rope-parameters object (ra_hf_rope_parse).  A refusal must be
 * RA_ERR_FORMAT with a message and a zeroed result; an acceptance must hold
 * only values of the promised kinds (positive integers, positive numbers,
 * fractions in (0, 1], non-empty factor lists of positive numbers, a
 * layer's sliding window one of none, sliding_window or "another kind"),
 * has_* set exactly for the values present.  Then the parsed rope, as the CLI
 * builds it, goes to ra_rope_create: a rope it accepts must have finite
 * frequencies and attention factor and give finite cos and sin at every
 * position up to RA_MAX_POSITION.  A quantization_config accepted is
 * block FP8 with a sane block and dtype (check_quant); its bias flags 0
 * or 1 (ra_hf_fields.bias).  The bytes are
 * also read as a sharded checkpoint's index (ra_st_index_read).
 */
#define _GNU_SOURCE /* memfd_create (fuzz_file.h) */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_file.h"
#include "fuzz_positions.h"
#include "hf/fields.h"
#include "io/io.h"
#include "ropeattn.h"

static void check_rope(const ra_hf_rope *r)
{
    FUZZ_CHECK((unsigned)r->type < RA_ROPE_TYPE_COUNT, "type %d", (int)r->type);
    FUZZ_CHECK(r->has_type || r->type == RA_ROPE_DEFAULT, "type without has_type");
    FUZZ_CHECK(r->has_theta ? isfinite(r->theta) && r->theta > 0 : r->theta == 0, "theta %g",
               r->theta);
    FUZZ_CHECK(r->has_partial_rotary_factor
                   ? r->partial_rotary_factor > 0 && r->partial_rotary_factor <= 1
                   : r->partial_rotary_factor == 0, "partial_rotary_factor %g",
               r->partial_rotary_factor);
    const ra_rope_config *s = &r->params;
    FUZZ_CHECK(r->has_factor ? isfinite(s->factor) && s->factor > 0 : s->factor == 0,
               "factor %g", s->factor);
    FUZZ_CHECK(r->has_original_max_position_embeddings ? s->original_max_position_embeddings > 0
                                                       : s->original_max_position_embeddings == 0,
               "original_max_position_embeddings");
    FUZZ_CHECK(s->max_position_embeddings == 0 && s->seq_len == 0, "lengths set by the parser");
    const double nonneg[] = {s->beta_fast, s->beta_slow, s->mscale, s->mscale_all_dim};
    for (int i = 0; i < 4; i++) FUZZ_CHECK(isfinite(nonneg[i]) && nonneg[i] >= 0, "%g", nonneg[i]);
    const double pos[] = {s->attention_factor, s->low_freq_factor, s->high_freq_factor};
    for (int i = 0; i < 3; i++) FUZZ_CHECK(isfinite(pos[i]) && pos[i] >= 0, "%g", pos[i]);
    FUZZ_CHECK(s->short_factor == r->short_factor && s->long_factor == r->long_factor,
               "params does not point at the owned lists");
    for (int k = 0; k < 3; k++)
        FUZZ_CHECK(r->has_mrope_section ? s->mrope_section[k] >= 0 &&
                                              s->mrope_section[k] <= INT32_MAX
                                        : s->mrope_section[k] == 0,
                   "mrope_section[%d] %lld", k, (long long)s->mrope_section[k]);
    FUZZ_CHECK(r->has_mrope_interleaved ? s->mrope_interleaved == 0 || s->mrope_interleaved == 1
                                        : s->mrope_interleaved == 0, "mrope_interleaved");
    const double *lists[2] = {r->short_factor, r->long_factor};
    const int64_t lens[2] = {r->n_short_factor, r->n_long_factor};
    const int has[2] = {r->has_short_factor, r->has_long_factor};
    for (int l = 0; l < 2; l++) {
        FUZZ_CHECK(has[l] ? lists[l] != NULL && lens[l] > 0 : lists[l] == NULL && lens[l] == 0,
                   "factor list %d", l);
        for (int64_t i = 0; i < lens[l]; i++)
            FUZZ_CHECK(isfinite(lists[l][i]) && lists[l][i] > 0, "factor %g", lists[l][i]);
    }
}

/* A quantization_config read is block FP8 with a block of positive
 * int32s and a dtype transformers dequantizes to; none read leaves none;
 * one refused (kept for the layer) leaves none but its reason. */
static void check_quant(const ra_hf_quant *q)
{
    if (q->refused)
        FUZZ_CHECK((q->refused == RA_ERR_FORMAT || q->refused == RA_ERR_UNSUPPORTED) &&
                       strncmp(q->reason, "config.json: ", 13) == 0 && !q->present,
                   "quantization refused: status %d, %s", (int)q->refused, q->reason);
    if (!q->present) {
        FUZZ_CHECK(q->block_out == 0 && q->block_in == 0 && q->skip == NULL && q->n_skip == 0,
                   "quantization without quantization_config");
        return;
    }
    FUZZ_CHECK(q->block_out >= 1 && q->block_out <= INT32_MAX && q->block_in >= 1 &&
                   q->block_in <= INT32_MAX, "weight_block_size [%lld, %lld]",
               (long long)q->block_out, (long long)q->block_in);
    FUZZ_CHECK(q->dtype == RA_ST_BF16 || q->dtype == RA_ST_F16 || q->dtype == RA_ST_F32 ||
                   q->dtype == RA_ST_DTYPE_COUNT, "dtype %d", (int)q->dtype);
    FUZZ_CHECK((q->skip != NULL) == (q->n_skip > 0), "modules_to_not_convert");
    for (int64_t i = 0; i < q->n_skip; i++) FUZZ_CHECK(q->skip[i] != NULL, "skip %lld", (long long)i);
}

static void check_config(const ra_hf_fields *c)
{
    check_quant(&c->quant);
    const int64_t ints[] = {c->hidden_size, c->num_attention_heads, c->num_key_value_heads,
                            c->head_dim, c->max_position_embeddings,
                            c->original_max_position_embeddings, c->kv_lora_rank,
                            c->q_lora_rank, c->qk_nope_head_dim, c->qk_rope_head_dim,
                            c->v_head_dim};
    const int has[] = {c->has_hidden_size, c->has_num_attention_heads,
                       c->has_num_key_value_heads, c->has_head_dim,
                       c->has_max_position_embeddings, c->has_original_max_position_embeddings,
                       c->has_kv_lora_rank, c->has_q_lora_rank, c->has_qk_nope_head_dim,
                       c->has_qk_rope_head_dim, c->has_v_head_dim};
    for (int i = 0; i < (int)(sizeof ints / sizeof ints[0]); i++)
        FUZZ_CHECK(has[i] ? ints[i] > 0 && ints[i] < ((int64_t)1 << 53) : ints[i] == 0,
                   "integer field %d: %lld", i, (long long)ints[i]);
    FUZZ_CHECK(c->has_rope_theta ? isfinite(c->rope_theta) && c->rope_theta > 0
                                 : c->rope_theta == 0, "rope_theta %g", c->rope_theta);
    FUZZ_CHECK(c->has_partial_rotary_factor
                   ? c->partial_rotary_factor > 0 && c->partial_rotary_factor <= 1
                   : c->partial_rotary_factor == 0, "partial_rotary_factor");
    check_rope(&c->rope);
    /* latent attention: head_dim is the rope's, qk_rope_head_dim */
    const int mla = c->family && (c->family->features & RA_HF_MLA);
    FUZZ_CHECK(!mla || (c->has_kv_lora_rank && c->head_dim == c->qk_rope_head_dim),
               "latent attention: head_dim %lld", (long long)c->head_dim);
    const ra_hf_window *w = &c->window;
    FUZZ_CHECK(w->has_sliding_window ? w->sliding_window > 0 : w->sliding_window == 0,
               "sliding_window %lld", (long long)w->sliding_window);
    FUZZ_CHECK(w->has_max_window_layers ? w->max_window_layers >= 0 : w->max_window_layers == 0,
               "max_window_layers %lld", (long long)w->max_window_layers);
    FUZZ_CHECK(w->has_layer_types ? w->layer_types != NULL && w->n_layer_types >= 0
                                  : w->layer_types == NULL && w->n_layer_types == 0,
               "layer_types");
    for (int64_t i = 0; i < w->n_layer_types; i++)
        FUZZ_CHECK(w->layer_types[i] <= RA_HF_OTHER_ATTENTION, "layer type %d",
                   (int)w->layer_types[i]);
    for (int64_t layer = -1; layer < 4; layer++) /* a window, none, or another kind */
        for (int no_rope = 0; no_rope <= 1; no_rope++) {
            int slides = ra_hf_layer_slides(w, layer, no_rope);
            FUZZ_CHECK(slides >= -1 && slides <= 1, "layer %lld slides: %d", (long long)layer,
                       slides);
            int64_t window = ra_hf_layer_window(w, layer, no_rope);
            FUZZ_CHECK(window == -1 || window == 0 || window == w->sliding_window,
                       "layer %lld: window %lld", (long long)layer, (long long)window);
            const char *conflict = ra_hf_window_conflict(w, layer, no_rope);
            FUZZ_CHECK(!conflict || strcmp(conflict, "layer_types") == 0 ||
                           strcmp(conflict, "use_sliding_window") == 0 ||
                           strcmp(conflict, "sliding_window_pattern") == 0 ||
                           strcmp(conflict, "sliding_window") == 0,
                       "layer %lld: conflict %s", (long long)layer, conflict);
        }
}

/* The rope the CLI would build (tools/rope_cli.c), for head_dim D: a ra_rope
 * that ra_rope_create accepts must give finite tables everywhere. */
static void create_rope(const ra_hf_rope *r, const ra_hf_fields *c, size_t salt)
{
    int64_t head_dim = c->has_head_dim ? c->head_dim : 64;
    if (head_dim > 512) head_dim = 64;
    int64_t rotary_dim = (int64_t)((double)head_dim * (r->has_partial_rotary_factor
                                                           ? r->partial_rotary_factor : 1.0));
    if (r->type == RA_ROPE_LONGROPE) {
        if (r->n_short_factor != r->n_long_factor || r->n_short_factor > 256) return;
        rotary_dim = head_dim = 2 * r->n_short_factor; /* one factor per pair */
    }
    if (rotary_dim <= 0 || rotary_dim % 2) return;
    ra_rope_config cfg = r->params; /* the scaled types' parameters */
    cfg.struct_size = sizeof cfg;
    cfg.layout = RA_LAYOUT_INTERLEAVED;
    cfg.head_dim = head_dim;
    cfg.type = r->type;
    cfg.rotary_dim = rotary_dim;
    cfg.theta = r->has_theta ? r->theta : 10000.0;
    cfg.table_size = 4;
    cfg.max_position_embeddings = c->max_position_embeddings;
    cfg.seq_len = salt % 3 == 0 ? 0 : (int64_t)(salt * 977 % 300000);
    ra_rope *rope = (ra_rope *)&rope;
    ra_status st = ra_rope_create(&rope, &cfg);
    if (st != RA_OK) {
        FUZZ_CHECK(st == RA_ERR_ARGUMENT || st == RA_ERR_NULL || st == RA_ERR_THETA ||
                       st == RA_ERR_HEAD_DIM, /* a config's odd head_dim */
                   "ra_rope_create: status %d", (int)st);
        FUZZ_CHECK(rope == NULL, "out not NULL after a failure");
        return;
    }
    double inv_freq[256], af = ra_rope_attention_factor(rope);
    FUZZ_CHECK(ra_rope_inverse_frequencies(rope, inv_freq) == RA_OK, "inverse frequencies");
    FUZZ_CHECK(isfinite(af) && af > 0, "attention factor %g", af);
    for (int64_t i = 0; i < rotary_dim / 2; i++)
        FUZZ_CHECK(isfinite(inv_freq[i]) && inv_freq[i] >= 0, "theta_%lld = %g (type %s)",
                   (long long)i, inv_freq[i], ra_hf_rope_type_name(cfg.type));
    /* within a dynamic or longrope rope's length; the position after it refused */
    const int64_t last = rope_last_position(ra_rope_get_config(rope));
    int64_t positions[4] = {0, 1, 4097, RA_MAX_POSITION};
    for (int i = 0; i < 4; i++) positions[i] = positions[i] < last ? positions[i] : last;
    float cos[4 * 256], sin[4 * 256];
    FUZZ_CHECK(ra_rope_table(rope, cos, sin, positions, 4) == RA_OK, "table");
    const int64_t next = last + 1;
    if (last < RA_MAX_POSITION)
        FUZZ_CHECK(ra_rope_table(rope, cos, sin, &next, 1) == RA_ERR_POSITION,
                   "position %lld past the rope's length", (long long)next);
    for (int64_t i = 0; i < 4 * (rotary_dim / 2); i++)
        FUZZ_CHECK(isfinite(cos[i]) && isfinite(sin[i]), "cos/sin not finite at %lld (type %s, "
                   "theta_%lld = %g)", (long long)(i / (rotary_dim / 2)),
                   ra_hf_rope_type_name(cfg.type), (long long)(i % (rotary_dim / 2)),
                   inv_freq[i % (rotary_dim / 2)]);
    /* M-RoPE: an image token's components apart, past the table too */
    int64_t pos3[12] = {0, 1, 4097, RA_MAX_POSITION, 0, 7, 3, 0, 0, 2, RA_MAX_POSITION, 5};
    for (int i = 0; i < 12; i++) pos3[i] = pos3[i] < last ? pos3[i] : last;
    ra_status mst = ra_rope_table_mrope(rope, cos, sin, pos3, 4);
    const int64_t *sec = cfg.mrope_section;
    FUZZ_CHECK(mst == (sec[0] + sec[1] + sec[2] ? RA_OK : RA_ERR_ARGUMENT), "table_mrope: %d",
               (int)mst);
    for (int64_t i = 0; mst == RA_OK && i < 4 * (rotary_dim / 2); i++)
        FUZZ_CHECK(isfinite(cos[i]) && isfinite(sin[i]), "M-RoPE cos/sin not finite at %lld",
                   (long long)i);
    ra_rope_destroy(rope);
}

/* The same bytes as a sharded checkpoint's index: refused with a message
 * naming the file, or a list of distinct plain .safetensors names. */
static void check_index(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    if (!path) return;
    char msg[512];
    ra_st_index index;
    ra_status st = ra_st_index_read(path, &index, msg, sizeof msg);
    if (st != RA_OK) {
        FUZZ_CHECK(st == RA_ERR_FORMAT, "index: status %d: %s", (int)st, msg);
        FUZZ_CHECK(strncmp(msg, path, strlen(path)) == 0, "index message: %s", msg);
        FUZZ_CHECK(index.shards == NULL && index.n_shards == 0, "index not zeroed");
        return;
    }
    FUZZ_CHECK(index.n_shards >= 1 && index.n_shards <= RA_ST_INDEX_MAX_SHARDS, "%lld shards",
               (long long)index.n_shards);
    for (int64_t i = 0; i < index.n_shards; i++) {
        const char *name = index.shards[i];
        size_t len = strlen(name);
        FUZZ_CHECK(len > 12 && strcmp(name + len - 12, ".safetensors") == 0 && name[0] != '.' &&
                       !strchr(name, '/') && !strchr(name, '\\'),
                   "shard name '%s'", name);
        for (int64_t j = 0; j < i; j++)
            FUZZ_CHECK(strcmp(index.shards[j], name) != 0, "'%s' listed twice", name);
    }
    ra_st_index_free(&index);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    char msg[512];
    ra_hf_fields cfg;
    ra_status st = ra_hf_fields_parse(text, size, &cfg, msg, sizeof msg);
    if (st != RA_OK) {
        /* RA_ERR_UNSUPPORTED: a family, or a key, that ropeattn refuses */
        FUZZ_CHECK(st == RA_ERR_FORMAT || st == RA_ERR_UNSUPPORTED, "config: status %d: %s",
                   (int)st, msg);
        FUZZ_CHECK(strncmp(msg, "config.json: ", 13) == 0, "config message: %s", msg);
        FUZZ_CHECK(!cfg.has_rope && cfg.rope.short_factor == NULL && !cfg.has_hidden_size &&
                       !cfg.quant.present && cfg.quant.skip == NULL,
                   "config not zeroed after a failure");
    } else {
        FUZZ_CHECK(msg[0] == '\0', "message after success: %s", msg);
        check_config(&cfg);
        create_rope(&cfg.rope, &cfg, size);
        const ra_hf_bias *bias = &cfg.bias; /* an accepted config's bias keys: flags */
        FUZZ_CHECK((bias->qkv == 0 || bias->qkv == 1) && (bias->o == 0 || bias->o == 1) &&
                       (bias->rule != NULL) == (cfg.family != NULL),
                   "bias: qkv %d, o %d", bias->qkv, bias->o);
    }

    ra_hf_rope rope;
    st = ra_hf_rope_parse(text, size, &rope, msg, sizeof msg);
    if (st != RA_OK) {
        FUZZ_CHECK(st == RA_ERR_FORMAT, "rope: status %d: %s", (int)st, msg);
        FUZZ_CHECK(strncmp(msg, "rope parameters: ", 17) == 0, "rope message: %s", msg);
        FUZZ_CHECK(!rope.has_type && rope.short_factor == NULL && rope.long_factor == NULL,
                   "rope not zeroed after a failure");
    } else {
        FUZZ_CHECK(msg[0] == '\0', "message after success: %s", msg);
        check_rope(&rope);
        ra_hf_rope_inherit(&rope, &cfg); /* as --rope-parameters with --config */
        check_rope(&rope);
        create_rope(&rope, &cfg, size + 1);
    }
    ra_hf_rope_free(&rope);
    ra_hf_fields_free(&cfg);
    check_index(data, size);
    return 0;
}
