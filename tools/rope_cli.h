/*
 * rope_cli.h — the rope options that `freqs`, `rope` and `attention` share:
 * where the rope settings come from (--config, --rope-parameters, flags),
 * how they become an ra_rope_config, and --positions files.
 *
 * Precedence, highest first: the flags (--theta, --max-position-embeddings,
 * --seq-len), then --rope-parameters (which replaces the config's
 * rope_scaling / rope_parameters object), then config.json, then the
 * defaults (theta 10000, every feature rotates).  A command that reads a
 * checkpoint takes the config.json beside its weights when --config is
 * not given (checkpoint_paths_find), and without either runs only a rope
 * given on the command line (rope_cli_require_rope).
 */
#ifndef RA_TOOLS_ROPE_CLI_H
#define RA_TOOLS_ROPE_CLI_H

#include <stdint.h>

#include "cli.h"
#include "ropeattn_hf.h"
#include "ropeattn_io.h"

typedef struct rope_cli {
    const char *config_path;     /* --config */
    const char *rope_parameters; /* --rope-parameters, JSON text */
    const char *positions_path;  /* --positions */
    double theta;                /* --theta */
    int64_t max_position_embeddings; /* --max-position-embeddings */
    int64_t seq_len;             /* --seq-len */
    int has_theta, has_max_position_embeddings, has_seq_len;
} rope_cli;

/* The option-table entries for a rope_cli r (a struct, not a pointer). */
#define ROPE_CLI_OPTIONS(r)                                                              \
    CLI_STRING_OPTION("--config", &(r).config_path),                                     \
    CLI_STRING_OPTION("--rope-parameters", &(r).rope_parameters),                        \
    CLI_STRING_OPTION("--positions", &(r).positions_path),                               \
    CLI_POSITIVE_OPTION("--theta", &(r).theta, .seen = &(r).has_theta),                  \
    CLI_INT_OPTION("--max-position-embeddings", &(r).max_position_embeddings, 1,         \
                   RA_MAX_POSITION + 1, .seen = &(r).has_max_position_embeddings),        \
    CLI_INT_OPTION("--seq-len", &(r).seq_len, 1, RA_MAX_POSITION + 1, .seen = &(r).has_seq_len)

/* The usage lines for those options (each line starts with two spaces). */
#define ROPE_CLI_USAGE                                                                   \
    "  --config C      Hugging Face config.json: rope_theta, rope_scaling or\n"         \
    "                  rope_parameters, max_position_embeddings,\n"                      \
    "                  original_max_position_embeddings, partial_rotary_factor,\n"       \
    "                  head_dim, hidden_size, num_attention_heads\n"                     \
    "  --rope-parameters JSON\n"                                                         \
    "                  a rope_scaling object, replacing the config's, e.g.\n"           \
    "                  '{\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1,\n" \
    "                  \"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}'\n" \
    "                  types: default, linear, dynamic, yarn, llama3, longrope; it may\n" \
    "                  hold rope_theta and partial_rotary_factor too, and M-RoPE's\n"    \
    "                  mrope_section [t, h, w] (pairs per position component,\n"       \
    "                  summing to rotary_dim / 2) and mrope_interleaved\n"             \
    "  --theta T       RoPE base (default: the rope parameters' or config's\n"         \
    "                  rope_theta, else 10000)\n"                                        \
    "  --max-position-embeddings M\n"                                                    \
    "                  the model's context length (default: config's); dynamic\n"       \
    "                  scales beyond it, yarn and longrope derive factor from it\n"     \
    "  --seq-len L     current sequence length for dynamic and longrope (default:\n"    \
    "                  the largest position + 1, as transformers does)\n"

/* A checkpoint's files, found from --weights W (ra_hf_checkpoint_find: W,
 * or a folder's model.safetensors, else its model.safetensors.index.json,
 * as transformers' from_pretrained takes them) and the config.json beside
 * them, as transformers reads it. */
#define CHECKPOINT_PATH_LEN 4096
typedef struct checkpoint_paths {
    char weights[CHECKPOINT_PATH_LEN], config[CHECKPOINT_PATH_LEN]; /* config: "" for none */
    const char *given; /* W as given */
    int folder;        /* W is a folder */
    const char *config_option; /* names the config read: "--config", or the one beside */
} checkpoint_paths;

/* Fills paths from *weights (W), then points *weights at paths->weights
 * and, when *config (--config) is NULL, *config at paths->config (left NULL
 * where there is none).  On failure prints one message and returns
 * EXIT_FAIL. */
int checkpoint_paths_find(const char **weights, const char **config, checkpoint_paths *paths);

/* The rope settings after reading the files: the config (--config's, else
 * one that says nothing) with --rope-parameters, --theta and
 * --max-position-embeddings applied to it (ra_hf_config_set_...). */
typedef struct rope_source {
    ra_hf_config *config;
    ra_hf_attention_info attention; /* what it says of attention (any layer) */
    int has_config;             /* a config.json was read (--config or the one beside) */
} rope_source;

/* Reads --config and applies the flags.  On failure prints one message and
 * returns the exit code (1 for a bad file, 2 for a bad --rope-parameters). */
int rope_source_load(const rope_cli *r, rope_source *out);
void rope_source_free(rope_source *src);

/* Without a config (src->has_config 0: neither --config nor one beside the
 * weights) the rope must be given on the command line: --theta, or
 * --rope-parameters with rope_theta (never theta 10000 by default for a
 * model).  Else prints "command: no config.json beside W ..." and returns
 * EXIT_USAGE. */
int rope_cli_require_rope(const char *command, const rope_cli *r, const rope_source *src,
                          const checkpoint_paths *paths);

/* The rope configuration for head_dim D (ra_hf_rope_config, for any layer:
 * a config whose sliding layers have a rope of their own is refused unless
 * --rope-parameters names the one wanted), its seq_len --seq-len, else
 * max_position + 1.  out->short_factor and long_factor point into src: keep
 * it until the rope is created.  On failure prints one message, "command:
 * ...", and returns EXIT_FAIL. */
int rope_cli_config(const char *command, const rope_cli *r, const rope_source *src,
                    int64_t head_dim, int64_t max_position, ra_rope_config *out);

/* "command: " and ra_hf_last_error(), printed; returns EXIT_USAGE for
 * RA_ERR_ARGUMENT, else EXIT_FAIL. */
int rope_cli_fail(const char *command, ra_status status);

/* Positions read from --positions: int32 or int64, every value in
 * [0, RA_MAX_POSITION].  ids: count values, malloc'ed; shape as in the file. */
typedef struct positions_file {
    int64_t *ids;
    int64_t count, max;
    int ndim;
    int64_t shape[RA_IO_MAX_DIMS];
} positions_file;

/* On failure prints one message and returns EXIT_FAIL. */
int positions_read(const char *path, positions_file *out);
void positions_free(positions_file *p);

/* Token positions for x of [batch, seq, ...]: p of shape [seq] (shared by
 * every batch row) or [batch, seq] expanded to batch * seq ids (malloc'ed),
 * *components 1; with mrope (M-RoPE's sections: the config's
 * attention.position_components 3) also 3-D positions, [3, seq]
 * or [3, batch, seq] (transformers' position_ids of Qwen2-VL), expanded to
 * [3, batch, seq], *components 3 ([3, seq] with batch 3 is ambiguous:
 * refused); or [4, seq] or [4, batch, seq], Qwen3-VL's text positions
 * then the 3-D ones: the text row goes to *text [batch, seq] (malloc'ed;
 * text NULL: dropped), else *text is NULL.  On failure prints one message
 * and returns EXIT_FAIL. */
int positions_for_batch(const positions_file *p, const char *path, int64_t batch, int64_t seq,
                        int mrope, int64_t **ids, int *components, int64_t **text);

/* The largest of n ids (0 for none): what RoPE must reach. */
int64_t positions_max(const int64_t *ids, int64_t n);

/* 2-D positions (row, column) of a vision encoder's patches from p (read
 * from path): [seq, 2] (every batch row) or [batch, seq, 2], into *ids
 * [batch, seq, 2] (malloc'ed).  0, or a message and the exit status. */
int positions_axial(const positions_file *p, const char *path, int64_t batch, int64_t seq,
                    int64_t **ids);

/* The ra_positions of ids from positions_for_batch, or positions_axial's
 * (components 2) (NULL: start start). */
ra_positions positions_of_ids(const int64_t *ids, int components, int64_t start);

#endif
