/*
 * attention_vision.c — --grid-thw for `ropeattn attention --vision`
 * (attention_vision.h).
 */
#include <stdlib.h>
#include <string.h>

#include "attention_vision.h"
#include "cli.h"

int vision_check_full(const ra_hf_config *config, int64_t layer)
{
    int64_t windowed = 0;
    if (config && ra_hf_vision_layer_windowed(config, layer, &windowed) != RA_OK)
        return 0; /* no vision_config, or another error: the layer's creation names it */
    if (!windowed) return 0;
    return cli_fail(EXIT_FAIL, "attention: vision layer %lld is not in vision_config's "
                    "fullatt_block_indexes: it attends inside windows of the patches in window "
                    "order; give --grid-thw (the images' grid_thw), and --input in that order",
                    (long long)layer);
}

/* Each frame's patches as one document: [1 + sum t] entries. */
static int frame_documents(const int64_t *grid, int64_t n, const char *path,
                           positions_file *documents)
{
    int64_t frames = 0;
    for (int64_t i = 0; i < n; i++) frames += grid[3 * i];
    if (!(documents->ids = malloc((size_t)(frames + 1) * sizeof *documents->ids)))
        return cli_fail(EXIT_FAIL, "out of memory for the documents of %s", path);
    int64_t at = 0, end = 0;
    documents->ids[0] = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t f = 0; f < grid[3 * i]; f++)
            documents->ids[++at] = end += grid[3 * i + 1] * grid[3 * i + 2];
    documents->count = frames + 1;
    documents->ndim = 1;
    documents->shape[0] = frames + 1;
    return 0;
}

int vision_grid_read(const char *path, const ra_hf_config *config, int64_t layer,
                     int64_t batch, int64_t seq, int64_t **ids, positions_file *documents,
                     int *windows)
{
    positions_file grid;
    *ids = NULL;
    memset(documents, 0, sizeof *documents);
    if (positions_read(path, &grid)) return EXIT_FAIL;
    int failed = 0;
    int64_t windowed = 0, counts[3] = {0, 0, 0}, n = grid.ndim == 2 ? grid.shape[0] : 0;
    if (grid.ndim != 2 || grid.shape[1] != 3)
        failed = cli_fail(EXIT_FAIL, "%s: --grid-thw is [n, 3]: (t, h, w) of each image",
                          path);
    else if (!config)
        failed = cli_fail(EXIT_FAIL, "attention: --grid-thw reads vision_config (window_size, "
                          "patch_size, spatial_merge_size): give --config");
    else if (ra_hf_vision_layer_windowed(config, layer, &windowed) != RA_OK ||
             ra_hf_vision_windows(config, grid.ids, n, counts, NULL, NULL, NULL) != RA_OK)
        failed = cli_fail(EXIT_FAIL, "%s", ra_hf_last_error());
    else if (counts[0] != seq)
        failed = cli_fail(EXIT_FAIL, "%s: the images hold %lld patches; --input has %lld a row",
                          path, (long long)counts[0], (long long)seq);
    int64_t *pos = NULL, *index = NULL;
    if (!failed && (!(pos = malloc((size_t)(batch * seq * 2) * sizeof *pos)) ||
                    !(index = malloc((size_t)counts[1] * sizeof *index)) ||
                    (windowed && !(documents->ids = malloc((size_t)(counts[2] + 1) *
                                                           sizeof *documents->ids)))))
        failed = cli_fail(EXIT_FAIL, "out of memory for the windows of %s", path);
    if (!failed &&
        ra_hf_vision_windows(config, grid.ids, n, counts, index,
                             windowed ? documents->ids : NULL, pos) != RA_OK)
        failed = cli_fail(EXIT_FAIL, "%s", ra_hf_last_error());
    if (!failed && windowed) {
        documents->count = counts[2] + 1;
        documents->ndim = 1;
        documents->shape[0] = counts[2] + 1;
    } else if (!failed)
        failed = frame_documents(grid.ids, n, path, documents);
    for (int64_t b = 1; !failed && b < batch; b++) /* each row the same images */
        memcpy(pos + b * seq * 2, pos, (size_t)(seq * 2) * sizeof *pos);
    free(index);
    positions_free(&grid);
    if (failed) {
        free(pos);
        positions_free(documents);
        return failed;
    }
    *ids = pos;
    *windows = (int)windowed;
    return 0;
}
