/*
 * fuzz_cli.c — the subcommands attention, rope, freqs and convert-layout,
 * called in-process (cmd_*: they return the exit code, never exit), on
 * argument vectors and small files that the input describes.
 *
 * Input: byte 0 picks the subcommand; then the files are generated (a
 * safetensors checkpoint: names from a list of naming schemes, well- and
 * ill-formed layer numbers included, shapes and dtypes from small lists; an
 * .npy input; int positions, also read as an attention mask; a config.json
 * from a list of keys and values);
 * then each pair of bytes adds one option (from the subcommand's table) and
 * its value (the file for a path option, else from a list of values for that
 * kind), as "--name value" or "--name=value".  The bytes left fill the
 * tensors' data.
 *
 * Checked: the exit code is 0, 1 or 2; after a failure no file but the
 * generated inputs is in the folder (no output, no temporary file).  The
 * subcommands' "ropeattn: ..." lines go to /dev/null unless FUZZ_CLI_STDERR
 * is set (set it to see a reproduced crash's report).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/cli.h"

#define MAX_ARGS 48
#define PATH_LEN 512

static char dir[PATH_LEN];
static int devnull = -1;

typedef struct input {
    const uint8_t *p;
    size_t n;
} input;

static unsigned take(input *in)
{
    if (in->n == 0) return 0;
    in->n--;
    return *in->p++;
}

#define PICK(in, list) (list)[take(in) % (sizeof(list) / sizeof((list)[0]))]

/* The files, by name in dir. */
static const char *const inputs[] = {"w.safetensors", "x.npy", "p.npy", "c.json"};

static void path_of(char *out, const char *name) { snprintf(out, PATH_LEN, "%s/%s", dir, name); }

static void write_file(const char *name, const void *data, size_t len)
{
    char path[PATH_LEN];
    path_of(path, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (len && fwrite(data, 1, len, f) != len) abort();
    fclose(f);
}

static const int64_t dims[] = {1, 2, 4, 8, 16, 32, 64, 0, 3, 5, 128};

/* Element bytes from the input's tail (zeros when it runs out). */
static void fill(uint8_t *data, size_t len, input *in)
{
    for (size_t i = 0; i < len; i++) data[i] = (uint8_t)take(in);
}

static void write_checkpoint(input *in, input *data)
{
    static const char *const prefixes[] = {"", "model.layers.0.self_attn.", "self_attn.",
                                           "model.layers.1.self_attn.", "layers.0.attention.",
                                           "attention.", "model.layers.007.self_attn.",
                                           "model.layers..self_attn.", "layers.-1.self_attn.",
                                           "model.layers.99999999999999999999.self_attn."};
    static const char *const hf[] = {"q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"};
    static const char *const seed[] = {"wq", "wk", "wv", "wo", "q_norm", "k_norm"};
    static const char *const dtypes[] = {"F32", "F32", "F16", "BF16", "F64", "I32"};
    static const int sizes[] = {4, 4, 2, 2, 8, 4};
    char header[4096] = "{";
    static uint8_t blob[1 << 16];
    size_t at = 0;
    unsigned scheme = take(in);
    const char *prefix = prefixes[scheme % 10];
    const char *const *names = scheme & 0x80 ? seed : hf;
    int n = 4 + (int)(take(in) % 5); /* the four projections, maybe biases and norms */
    for (int t = 0; t < n; t++) {
        unsigned d = take(in) % 6;
        int ndim = (int)(take(in) % 4);
        int64_t count = 1, shape[3] = {0};
        for (int i = 0; i < ndim; i++) count *= shape[i] = PICK(in, dims);
        if (ndim == 0 || count > 8192) ndim = 2, shape[0] = 64, shape[1] = 64, count = 4096;
        size_t bytes = (size_t)count * (size_t)sizes[d];
        if (at + bytes > sizeof blob) break;
        fill(blob + at, bytes, data);
        const char *what = t < 4 ? names[t] : t < 6 ? names[t - 4] : names[t - 2];
        const char *kind = t < 4 ? "weight" : t < 6 ? "bias" : "weight";
        size_t used = strlen(header);
        snprintf(header + used, sizeof header - used,
                 "%s\"%s%s.%s\": {\"dtype\": \"%s\", \"shape\": [", t ? ", " : "", prefix, what,
                 kind, dtypes[d]);
        for (int i = 0; i < ndim; i++) {
            used = strlen(header);
            snprintf(header + used, sizeof header - used, "%s%lld", i ? ", " : "",
                     (long long)shape[i]);
        }
        used = strlen(header);
        snprintf(header + used, sizeof header - used, "], \"data_offsets\": [%zu, %zu]}", at,
                 at + bytes);
        at += bytes;
    }
    strcat(header, "}");
    size_t len = strlen(header);
    static uint8_t file[sizeof blob + sizeof header + 8];
    uint64_t hlen = len;
    memcpy(file, &hlen, 8);
    memcpy(file + 8, header, len);
    memcpy(file + 8 + len, blob, at);
    write_file("w.safetensors", file, 8 + len + at);
}

/* An .npy of the given descr and shape, data from the input. */
static void write_npy(const char *name, const char *descr, int size, int ndim,
                      const int64_t *shape, input *data)
{
    static uint8_t file[1 << 17];
    char text[256], dims_text[128] = "";
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        count *= shape[i];
        size_t used = strlen(dims_text);
        snprintf(dims_text + used, sizeof dims_text - used, "%lld,", (long long)shape[i]);
    }
    int len = snprintf(text, sizeof text, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                       descr, dims_text);
    while ((10 + len + 1) % 64) text[len++] = ' ';
    text[len++] = '\n';
    size_t bytes = (size_t)count * (size_t)size;
    if (10 + (size_t)len + bytes > sizeof file) bytes = 0, ndim = 0;
    memcpy(file, "\x93NUMPY\x01\x00", 8);
    file[8] = (uint8_t)(len & 0xff), file[9] = (uint8_t)(len >> 8);
    memcpy(file + 10, text, (size_t)len);
    fill(file + 10 + len, bytes, data);
    write_file(name, file, 10 + (size_t)len + bytes);
}

static void write_inputs(input *in, input *data)
{
    write_checkpoint(in, data);
    int64_t shape[5];
    int ndim = 1 + (int)(take(in) % 5);
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) count *= shape[i] = PICK(in, dims);
    int f8 = take(in) % 8 == 0;
    if (count > 16384) ndim = 3, shape[0] = 1, shape[1] = 2, shape[2] = 64;
    write_npy("x.npy", f8 ? "<f8" : "<f4", f8 ? 8 : 4, ndim, shape, data);
    int64_t pshape[2] = {PICK(in, dims), PICK(in, dims)};
    int i4 = take(in) & 1;
    write_npy("p.npy", i4 ? "<i4" : "<i8", i4 ? 4 : 8, 1 + (int)(take(in) & 1), pshape, data);

    static const char *const keys[] = {"num_attention_heads", "num_key_value_heads", "head_dim",
                                       "hidden_size", "rope_theta", "partial_rotary_factor",
                                       "max_position_embeddings", "sliding_window"};
    static const char *const values[] = {"4", "2", "16", "64", "1", "0", "0.5", "-1", "1e300",
                                         "8", "null", "\"x\"", "3", "32", "4294967297"};
    char json[1024] = "{";
    unsigned mask = take(in);
    for (int k = 0; k < 8; k++)
        if (mask & (1u << k)) {
            size_t used = strlen(json);
            snprintf(json + used, sizeof json - used, "%s\"%s\": %s", used > 1 ? ", " : "",
                     keys[k], PICK(in, values));
        }
    strcat(json, "}");
    write_file("c.json", json, strlen(json));
}

/* ---- options --------------------------------------------------------- */

typedef enum kind { PATH_IN, PATH_OUT, COUNT, NUMBER, BIG, CHOICE, JSON, FLAG } kind;
typedef struct option {
    const char *name;
    kind kind;
    const char *file; /* PATH_IN, PATH_OUT */
} option;

#define ROPE_OPTIONS                                                                       \
    {"--config", PATH_IN, "c.json"}, {"--rope-parameters", JSON, NULL},                    \
        {"--positions", PATH_IN, "p.npy"}, {"--theta", NUMBER, NULL},                      \
        {"--max-position-embeddings", BIG, NULL}, {"--seq-len", BIG, NULL}

static const option attention_options[] = {
    {"--weights", PATH_IN, "w.safetensors"}, {"--input", PATH_IN, "x.npy"},
    {"--output", PATH_OUT, "y.npy"}, {"--layer", BIG, NULL}, {"--n-heads", COUNT, NULL},
    {"--n-kv-heads", COUNT, NULL}, {"--layout", CHOICE, NULL}, {"--start-pos", BIG, NULL},
    {"--threads", COUNT, NULL}, {"--path", CHOICE, NULL}, {"--prefill", COUNT, NULL},
    {"--cache-dtype", CHOICE, NULL}, {"--grad-output", PATH_IN, "x.npy"},
    {"--grads", PATH_OUT, "g.safetensors"}, {"--attention-mask", PATH_IN, "p.npy"},
    {"--packed", FLAG, NULL}, ROPE_OPTIONS};
static const option rope_options[] = {
    {"--input", PATH_IN, "x.npy"}, {"--output", PATH_OUT, "y.npy"}, {"--layout", CHOICE, NULL},
    {"--start-pos", BIG, NULL}, {"--inverse", FLAG, NULL}, {"--threads", COUNT, NULL},
    ROPE_OPTIONS};
static const option freqs_options[] = {
    {"--head-dim", COUNT, NULL}, {"--end", COUNT, NULL}, {"--cos", PATH_OUT, "cos.npy"},
    {"--sin", PATH_OUT, "sin.npy"}, ROPE_OPTIONS};
static const option convert_options[] = {
    {"--weights", PATH_IN, "w.safetensors"}, {"--output", PATH_OUT, "o.safetensors"},
    {"--to", CHOICE, NULL}, {"--config", PATH_IN, "c.json"}, {"--n-heads", COUNT, NULL},
    {"--n-kv-heads", COUNT, NULL}, {"--layer", BIG, NULL}};

typedef struct command {
    const char *name;
    int (*run)(int, char **);
    const option *options;
    int n_options, n_required; /* the first n_required are always given */
} command;

#define OPTIONS(table) table, (int)(sizeof table / sizeof table[0])
static const command commands[] = {
    {"attention", cmd_attention, OPTIONS(attention_options), 3},
    {"rope", cmd_rope, OPTIONS(rope_options), 2},
    {"freqs", cmd_freqs, OPTIONS(freqs_options), 4},
    {"convert-layout", cmd_convert_layout, OPTIONS(convert_options), 3},
};

static const char *value_of(const option *o, input *in, char *path)
{
    static const char *const counts[] = {"1", "2", "4", "8", "16", "3", "0", "64", "", "x"};
    static const char *const numbers[] = {"10000", "1", "0.5", "1e308", "0", "-1", "nan", "inf",
                                          "1e-320", " 1"};
    static const char *const bigs[] = {"0", "1", "7", "4294967295", "4294967296", "-1",
                                       "99999999999999999999", "2147483647", "65536", "+1"};
    static const char *const choices[] = {"half", "interleaved", "flash", "reference", "f16",
                                          "bf16", "f32", "", "HALF"};
    static const char *const jsons[] = {
        "{\"rope_type\": \"linear\", \"factor\": 2}", "{\"rope_type\": \"dynamic\", \"factor\": 1e300}",
        "{\"rope_type\": \"yarn\", \"factor\": 4, \"original_max_position_embeddings\": 1}",
        "{\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4, "
        "\"original_max_position_embeddings\": 8192}",
        "{\"rope_type\": \"longrope\", \"short_factor\": [1, 1], \"long_factor\": [1, 1], "
        "\"original_max_position_embeddings\": 2}",
        "{\"partial_rotary_factor\": 0.25}", "{}", "[", "{\"rope_type\": \"x\"}",
        "{\"rope_theta\": 0}"};
    switch (o->kind) {
    case PATH_IN:
    case PATH_OUT:
        path_of(path, take(in) % 16 ? o->file : PICK(in, inputs));
        return path;
    case COUNT: return PICK(in, counts);
    case NUMBER: return PICK(in, numbers);
    case BIG: return PICK(in, bigs);
    case CHOICE: return PICK(in, choices);
    case JSON: return PICK(in, jsons);
    case FLAG: break;
    }
    return NULL;
}

/* Whether dir holds nothing but the generated inputs. */
static int only_inputs(void)
{
    DIR *d = opendir(dir);
    if (!d) abort();
    int clean = 1;
    for (struct dirent *e; clean && (e = readdir(d)) != NULL;) {
        int known = e->d_name[0] == '.';
        for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
            known |= strcmp(e->d_name, inputs[i]) == 0;
        if (!known) fprintf(stderr, "fuzz_cli: a failed run left %s/%s\n", dir, e->d_name);
        clean = known;
    }
    closedir(d);
    return clean;
}

static void remove_outputs(void)
{
    static const char *const outputs[] = {"y.npy", "g.safetensors", "cos.npy", "sin.npy",
                                          "o.safetensors"};
    char path[PATH_LEN];
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
        path_of(path, outputs[i]);
        unlink(path);
    }
}

/* Removes dir and what is in it, at exit. */
static void remove_dir(void)
{
    char path[PATH_LEN];
    remove_outputs();
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        path_of(path, inputs[i]);
        unlink(path);
    }
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    snprintf(dir, sizeof dir, "%s/fuzz_cli.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) abort();
    atexit(remove_dir);
    if (!getenv("FUZZ_CLI_STDERR")) devnull = open("/dev/null", O_WRONLY);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size)
{
    if (size > 4096) return 0;
    /* Options from the front, tensor data from the back. */
    input in = {bytes, size < 64 ? size : 64}, data = {bytes + in.n, size - in.n};
    const command *c = &commands[take(&in) % 4];
    write_inputs(&in, &data);
    remove_outputs();

    static char paths[MAX_ARGS][PATH_LEN], joined[MAX_ARGS][PATH_LEN + 64];
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = (char *)c->name;
    int n = c->n_required + (int)(take(&in) % 12);
    for (int i = 0; i < n && argc + 2 <= MAX_ARGS; i++) {
        const option *o = &c->options[i < c->n_required ? i : (int)(take(&in) % c->n_options)];
        const char *value = value_of(o, &in, paths[argc]);
        if (!value) {
            argv[argc++] = (char *)o->name;
        } else if (take(&in) % 4 == 0) {
            snprintf(joined[argc], sizeof joined[argc], "%s=%s", o->name, value);
            argv[argc] = joined[argc];
            argc++;
        } else {
            argv[argc++] = (char *)o->name;
            argv[argc++] = (char *)value;
        }
    }
    argv[argc] = NULL;

    int saved = -1;
    if (devnull >= 0) {
        fflush(stderr);
        saved = dup(2);
        dup2(devnull, 2);
    }
    int rc = c->run(argc, argv);
    if (saved >= 0) {
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
    }
    if (rc < 0 || rc > 2) {
        fprintf(stderr, "fuzz_cli: %s returned %d\n", c->name, rc);
        abort();
    }
    if (rc != 0 && !only_inputs()) abort();
    return 0;
}
