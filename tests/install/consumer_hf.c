/*
 * consumer_hf.c — a program that uses an installed libropeattn_hf, built by
 * tests/test_install.sh as C and as C++, shared and static, through
 * pkg-config and CMake.  It builds layer 1 of the checkpoint in the folder
 * argv[1] names (model.safetensors, config.json), runs it on a few tokens
 * and prints "<model_type>: <n> tensors".
 */
#include <stdio.h>

#include <ropeattn_hf.h>

#define S 3

int main(int argc, char **argv)
{
    char weights[512], config_path[512];
    if (argc != 2) return 2;
    snprintf(weights, sizeof weights, "%s/model.safetensors", argv[1]);
    snprintf(config_path, sizeof config_path, "%s/config.json", argv[1]);
    ra_hf_checkpoint *ckpt = NULL;
    ra_hf_config *config = NULL;
    ra_hf_layer *layer = NULL;
    ra_hf_options o = ra_hf_options_init();
    o.layer = 1;
    o.n_tokens = S;
    if (ra_hf_checkpoint_open(&ckpt, weights) != RA_OK ||
        ra_hf_config_open(&config, config_path) != RA_OK ||
        ra_hf_layer_create(&layer, ckpt, config, &o) != RA_OK) {
        printf("%s\n", ra_hf_last_error());
        return 1;
    }
    const ra_layer_config *c = ra_layer_get_config(ra_hf_layer_get(layer));
    float x[S * 64] = {0}, y[S * 64];
    int ok = c->dim <= 64;
    for (int i = 0; ok && i < S * c->dim; i++) x[i] = (float)(i % 7) - 3.0f;
    ok = ok && ra_layer_forward(NULL, ra_hf_layer_get(layer), y, x, 1, S, NULL, NULL) == RA_OK;
    if (ok)
        printf("%s: %lld tensors\n", ra_hf_config_model_type(config),
               (long long)ra_hf_layer_tensor_count(layer));
    ra_hf_layer_destroy(layer);
    ra_hf_config_close(config);
    ra_hf_checkpoint_close(ckpt);
    return ok ? 0 : 1;
}
