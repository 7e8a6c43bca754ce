/* checkpoint.c — naming schemes of attention weights and their loading. */
#include "checkpoint.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define NAME_LEN 256

typedef struct naming_scheme {
    const char *prefix; /* before the layer number, or the whole prefix */
    const char *infix;  /* after the layer number; NULL: not per layer */
    const char *names[N_PROJ];
    ra_layout layout;
} naming_scheme;

#define SEED_NAMES {"wq.weight", "wk.weight", "wv.weight", "wo.weight"}
#define HF_NAMES {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"}

static const naming_scheme schemes[] = {
    {"", NULL, SEED_NAMES, RA_LAYOUT_INTERLEAVED},
    {"attention.", NULL, SEED_NAMES, RA_LAYOUT_INTERLEAVED},
    {"layers.", ".attention.", SEED_NAMES, RA_LAYOUT_INTERLEAVED},
    {"", NULL, HF_NAMES, RA_LAYOUT_HALF},
    {"self_attn.", NULL, HF_NAMES, RA_LAYOUT_HALF},
    {"model.layers.", ".self_attn.", HF_NAMES, RA_LAYOUT_HALF},
    {"layers.", ".self_attn.", HF_NAMES, RA_LAYOUT_HALF},
};
#define N_SCHEMES (int)(sizeof schemes / sizeof schemes[0])

static void tensor_name(char *name, const naming_scheme *scheme, int64_t layer, int proj)
{
    if (scheme->infix)
        snprintf(name, NAME_LEN, "%s%lld%s%s", scheme->prefix, (long long)layer,
                 scheme->infix, scheme->names[proj]);
    else
        snprintf(name, NAME_LEN, "%s%s", scheme->prefix, scheme->names[proj]);
}

/* The layer number in name if name is scheme's wq for some layer, else -1. */
static int64_t layer_of(const char *name, const naming_scheme *scheme)
{
    size_t prefix_len = strlen(scheme->prefix);
    if (strncmp(name, scheme->prefix, prefix_len) != 0) return -1;
    const char *digits = name + prefix_len;
    if (!isdigit((unsigned char)digits[0])) return -1;
    char *end;
    long long layer = strtoll(digits, &end, 10);
    size_t infix_len = strlen(scheme->infix);
    if (strncmp(end, scheme->infix, infix_len) != 0) return -1;
    if (strcmp(end + infix_len, scheme->names[PROJ_Q]) != 0) return -1;
    return layer;
}

/* The layers that per-layer names in st cover: how many, lowest, highest. */
typedef struct layer_census {
    int64_t count, lowest, highest;
} layer_census;

static layer_census count_layers(const ra_safetensors *st)
{
    layer_census census = {0, INT64_MAX, -1};
    for (int64_t i = 0; i < ra_safetensors_count(st); i++) {
        const char *name = ra_safetensors_at(st, i)->name;
        for (int s = 0; s < N_SCHEMES; s++) {
            if (!schemes[s].infix) continue;
            int64_t layer = layer_of(name, &schemes[s]);
            if (layer < 0) continue;
            census.count++;
            if (layer < census.lowest) census.lowest = layer;
            if (layer > census.highest) census.highest = layer;
        }
    }
    return census;
}

/* The first scheme (per layer or not, as asked) whose wq is in st. */
static const naming_scheme *find_scheme(const ra_safetensors *st, int per_layer,
                                        int64_t layer)
{
    char name[NAME_LEN];
    for (int s = 0; s < N_SCHEMES; s++) {
        if ((schemes[s].infix != NULL) != per_layer) continue;
        tensor_name(name, &schemes[s], layer, PROJ_Q);
        if (ra_safetensors_find(st, name)) return &schemes[s];
    }
    return NULL;
}

static int no_attention_weights(const char *path)
{
    return cli_fail(EXIT_FAIL,
                    "%s holds no attention weights: expected wq.weight .. wo.weight "
                    "(the seed) or q_proj.weight .. o_proj.weight (Hugging Face), "
                    "optionally under model.layers.N.self_attn.", path);
}

/* Picks the scheme and layer when --layer was not given. */
static int pick_without_layer(const ra_safetensors *st, const char *path,
                              const naming_scheme **scheme, int64_t *layer)
{
    *scheme = find_scheme(st, 0, 0);
    *layer = 0;
    if (*scheme) return 0;
    layer_census census = count_layers(st);
    if (census.count == 0) return no_attention_weights(path);
    if (census.count > 1)
        return cli_fail(EXIT_FAIL,
                        "%s holds attention weights for %lld layers (numbered %lld to %lld): "
                        "choose one with --layer N", path, (long long)census.count,
                        (long long)census.lowest, (long long)census.highest);
    *layer = census.lowest;
    *scheme = find_scheme(st, 1, *layer);
    return 0;
}

/* Picks the scheme for the layer given with --layer. */
static int pick_with_layer(const ra_safetensors *st, const char *path, int64_t layer,
                           const naming_scheme **scheme)
{
    *scheme = find_scheme(st, 1, layer);
    if (*scheme) return 0;
    const naming_scheme *bare = find_scheme(st, 0, 0);
    if (bare) {
        char name[NAME_LEN];
        tensor_name(name, bare, 0, PROJ_Q);
        return cli_fail(EXIT_FAIL,
                        "--layer %lld was given, but %s names one layer only ('%s'): "
                        "leave out --layer", (long long)layer, path, name);
    }
    layer_census census = count_layers(st);
    if (census.count == 0) return no_attention_weights(path);
    return cli_fail(EXIT_FAIL, "%s has no attention weights for layer %lld "
                    "(it has layers numbered %lld to %lld)", path, (long long)layer,
                    (long long)census.lowest, (long long)census.highest);
}

int checkpoint_find_attention(const ra_safetensors *st, const char *path,
                              int64_t layer, attention_tensors *out)
{
    const naming_scheme *scheme;
    int failed = layer < 0 ? pick_without_layer(st, path, &scheme, &layer)
                           : pick_with_layer(st, path, layer, &scheme);
    if (failed) return failed;
    char name[NAME_LEN];
    for (int p = 0; p < N_PROJ; p++) {
        tensor_name(name, scheme, layer, p);
        out->proj[p] = ra_safetensors_find(st, name);
        if (!out->proj[p])
            return cli_fail(EXIT_FAIL, "%s has '%s' but no tensor '%s'", path,
                            out->proj[PROJ_Q]->name, name);
        size_t len = strlen(name); /* "...q_proj.weight" -> "...q_proj.bias" */
        snprintf(name + len - strlen("weight"), NAME_LEN - (len - strlen("weight")), "bias");
        out->bias[p] = ra_safetensors_find(st, name);
    }
    static const char *const qk_norms[] = {"q_norm.weight", "k_norm.weight"};
    const char *wq = out->proj[PROJ_Q]->name;
    int stem = (int)(strlen(wq) - strlen(scheme->names[PROJ_Q]));
    for (int i = 0; i < 2; i++) {
        snprintf(name, NAME_LEN, "%.*s%s", stem, wq, qk_norms[i]);
        out->norm[i] = ra_safetensors_find(st, name);
    }
    out->layout = scheme->layout;
    out->layer = scheme->infix ? layer : -1;
    return 0;
}

int checkpoint_load_f32(const ra_st_tensor *t, const char *path, float **out)
{
    if (t->dtype != RA_ST_F32 && t->dtype != RA_ST_F16 && t->dtype != RA_ST_BF16 &&
        t->dtype != RA_ST_F64)
        return cli_fail(EXIT_FAIL, "tensor '%s' in %s has dtype %s; expected F32, F16, BF16 or F64",
                        t->name, path, ra_st_dtype_name(t->dtype));
    *out = malloc(t->count > 0 ? (size_t)t->count * sizeof(float) : 1);
    if (!*out) return cli_fail(EXIT_FAIL, "out of memory loading '%s' from %s", t->name, path);
    ra_status status = ra_st_tensor_to_f32(t, *out);
    if (status != RA_OK) {
        free(*out);
        *out = NULL;
        return cli_fail(EXIT_FAIL, "cannot convert '%s' in %s to float32: %s", t->name, path,
                        ra_status_string(status));
    }
    return 0;
}
