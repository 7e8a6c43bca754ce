/*
 * attention_vision.h — `ropeattn attention --vision --grid-thw G.npy`: the
 * images' grid_thw gives a Qwen2.5-VL vision layer its positions and
 * documents as transformers' tower gives them (the patches in window
 * order; a window layer's windows, a full layer's frames), through
 * ra_hf_vision_windows; and a window layer without --grid-thw is refused.
 */
#ifndef RA_TOOLS_ATTENTION_VISION_H
#define RA_TOOLS_ATTENTION_VISION_H

#include <stdint.h>

#include "ropeattn_hf.h"
#include "rope_cli.h"

/* G.npy at path: int32 or int64 [n, 3], (t, h, w) per image.  For x of
 * [batch, seq, dim] (each row the same images, seq their patches): the
 * (row, column) of each patch in window order into *ids (malloc'ed, [batch,
 * seq, 2]); into *documents (ids: [n_documents + 1]) the layer's documents,
 * cu_window_seqlens where *windows (vision layer `layer` is a window
 * layer: 1), else each frame's patches (transformers' cu_seqlens).  On
 * failure prints one message and returns EXIT_FAIL. */
int vision_grid_read(const char *path, const ra_hf_config *config, int64_t layer,
                     int64_t batch, int64_t seq, int64_t **ids, positions_file *documents,
                     int *windows);

/* Without --grid-thw: vision layer `layer` must not be a window layer
 * (refused naming --grid-thw).  Prints one message and returns EXIT_FAIL
 * on failure. */
int vision_check_full(const ra_hf_config *config, int64_t layer);

#endif
