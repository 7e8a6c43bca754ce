/* folder.c — where a checkpoint's files are, as transformers'
 * from_pretrained looks for them in a folder (ra_hf_checkpoint_find). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "hf/hf.h"

/* Whether path names a regular file (os.path.isfile). */
static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* out = folder's name (dir_len bytes of it; 0: the current folder) and
 * name, joined by one '/' (none when name is ""); RA_ERR_SIZE when it does
 * not fit in size bytes. */
static ra_status join(char *out, size_t size, const char *folder, size_t dir_len,
                      const char *name)
{
    const char *slash = dir_len && name[0] && folder[dir_len - 1] != '/' ? "/" : "";
    int n = snprintf(out, size, "%.*s%s%s", (int)dir_len, folder, slash, name);
    if (n < 0 || (size_t)n >= size)
        return hf_fail(RA_ERR_SIZE, "%s: the path of %s does not fit in %zu bytes", folder,
                       name[0] ? name : "the weights", size);
    return RA_OK;
}

/* ra_hf_checkpoint_find's work, once its arguments are checked. */
static ra_status find(const char *path, char *weights, char *config, size_t size)
{
    struct stat st;
    size_t dir_len; /* the weights' folder: path's first dir_len bytes */
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* transformers' order: the single file first, then the sharded index */
        dir_len = strlen(path);
        RA_HF_TRY(join(weights, size, path, dir_len, "model.safetensors"));
        if (!is_file(weights))
            RA_HF_TRY(join(weights, size, path, dir_len, "model.safetensors.index.json"));
        if (!is_file(weights))
            return hf_fail(RA_ERR_NOT_FOUND, "%s: a folder with neither model.safetensors nor "
                           "model.safetensors.index.json", path);
    } else {
        const char *slash = strrchr(path, '/');
        dir_len = slash ? (size_t)(slash - path) + 1 : 0;
        RA_HF_TRY(join(weights, size, path, strlen(path), ""));
    }
    RA_HF_TRY(join(config, size, path, dir_len, "config.json"));
    if (!is_file(config)) config[0] = '\0';
    return RA_OK;
}

RA_HF_API ra_status ra_hf_checkpoint_find(const char *path, char *weights, char *config,
                                          size_t size)
{
    hf_reset();
    if (!path || !weights || !config)
        return hf_fail(RA_ERR_NULL, "%s is NULL", !path ? "path" : !weights ? "weights"
                                                                           : "config");
    if (size == 0) return hf_fail(RA_ERR_SIZE, "size is 0");
    weights[0] = config[0] = '\0';
    if (!path[0]) return hf_fail(RA_ERR_ARGUMENT, "path is empty");
    ra_status status = find(path, weights, config, size);
    if (status != RA_OK) weights[0] = config[0] = '\0';
    return status;
}
