/*
 * fields_stacks.c — a family whose layers sit in two stacks run in cycles
 * (RA_HF_LAYER_STACKS; HRM-Text's HrmTextModel): for each of H_cycles, the
 * L stack (L_module) runs L_cycles times, then the H stack (H_module) once.
 * Each run of a layer is a cache slot of its own, transformers' layer_idx
 * + cycle_offset:
 *     slot = (h * (L_cycles + 1) + l) * num_layers_per_stack + layer
 * with l < L_cycles for the L stack's runs, l = L_cycles for the H
 * stack's.  ropeattn's layer N is slot N: its weights are those of layer
 * N mod num_layers_per_stack of the stack that runs it.
 *
 * HrmTextConfig saves num_hidden_layers as the slots' count beside
 * num_layers_per_stack; a config without num_layers_per_stack (an older
 * one) has the stack's layers in num_hidden_layers, which the class then
 * multiplies out.
 */
#include <stdint.h>

#include "internal.h"
#include "hf/fields_json.h"
#include "io/io_json.h"
#include "io/io_message.h"

/* key's value, a positive integer, into *value (left as it is when the key
 * is absent or null); *given: whether it was there. */
static ra_status positive_key(const cJSON *root, const char *key, int64_t *value, int *given,
                              const char *name, char *msg, size_t msg_len)
{
    const cJSON *item;
    RA_TRY(ra_io_json_key(root, key, name, &item, msg, msg_len));
    *given = item != NULL;
    if (item != NULL && (!ra_io_json_integer(item, value) || *value < 1))
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: \"%s\" must be a positive integer",
                          name, key);
    return RA_OK;
}

ra_status ra_hf_stacks_read(const cJSON *root, ra_hf_fields *out, const char *name, char *msg,
                            size_t msg_len)
{
    if (!out->family || !(out->family->features & RA_HF_LAYER_STACKS)) return RA_OK;
    int64_t layers = 16; /* HrmTextConfig's defaults */
    int has_layers, has_per_stack, ignored;
    out->h_cycles = 2;
    out->l_cycles = 3;
    RA_TRY(positive_key(root, "H_cycles", &out->h_cycles, &ignored, name, msg, msg_len));
    RA_TRY(positive_key(root, "L_cycles", &out->l_cycles, &ignored, name, msg, msg_len));
    RA_TRY(positive_key(root, "num_hidden_layers", &layers, &has_layers, name, msg, msg_len));
    out->stack_layers = layers;
    RA_TRY(positive_key(root, "num_layers_per_stack", &out->stack_layers, &has_per_stack, name,
                        msg, msg_len));
    if ((double)out->stack_layers * (double)out->h_cycles * (double)(out->l_cycles + 1) >
        INT32_MAX)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT, "%s: num_layers_per_stack * H_cycles * "
                          "(L_cycles + 1) exceeds %d cache slots", name, INT32_MAX);
    const int64_t slots = out->stack_layers * out->h_cycles * (out->l_cycles + 1);
    if (has_per_stack && has_layers && layers != slots)
        return ra_io_fail(msg, msg_len, RA_ERR_FORMAT,
                          "%s: \"num_hidden_layers\" %lld is not num_layers_per_stack * "
                          "H_cycles * (L_cycles + 1) = %lld, the cache slots its model runs",
                          name, (long long)layers, (long long)slots);
    out->num_hidden_layers = slots;
    return RA_OK;
}

const char *ra_hf_stack_layer(const ra_hf_fields *config, int64_t layer, int64_t *index)
{
    if (!config->family || !(config->family->features & RA_HF_LAYER_STACKS)) return NULL;
    const int64_t cycle = layer / config->stack_layers;
    *index = layer % config->stack_layers;
    return cycle % (config->l_cycles + 1) == config->l_cycles ? "H_module" : "L_module";
}
