"""Qwen2.5-VL's window attention (ra_hf_vision_windows): the window order of
a vision tower's patches and its windows, from the images' grid_thw, as
transformers' Qwen2_5_VisionTransformerPretrainedModel forms them
(vision_utils.get_vision_window_index, get_vision_position_ids)."""
import collections
import os

import numpy as np

from . import _ropeattn
from ._arrays import as_array, index_copy
from ._ropeattn import ArgumentError

VisionWindows = collections.namedtuple(
    "VisionWindows", ["window_index", "cu_window_seqlens", "positions", "patch_index"])


def vision_windows(config, grid_thw):
    """The windows of Qwen2.5-VL's vision tower for the images grid_thw,
    as its forward forms them:

      config: config.json's path (a str, bytes or os.PathLike), or a
        checkpoint directory holding one; its vision_config's window_size,
        patch_size and spatial_merge_size m are read (model_type
        qwen2_5_vl's; any other vision encoder: UnsupportedError).
      grid_thw: integers [n, 3], (t, h, w) of each image in patches (h and
        w multiples of m).

    Returns VisionWindows, int64 arrays:
      window_index [N / m^2]: transformers' window_index (groups of m^2
        patches in the processor's order, at each place of the window order);
      cu_window_seqlens [W + 1]: 0, then where each window ends (empty
        windows dropped, as transformers' unique_consecutive does);
      positions [N, 2]: each patch's (row, column) in window order;
      patch_index [N]: the patch (processor's order) at each place of the
        window order: x[patch_index] is what the tower's blocks see, and
        y[np.argsort(patch_index)] puts a block's output back.
    A window-attention layer (not in fullatt_block_indexes:
    Layer.from_pretrained(..., vision=True, vision_windows=True)) runs on
    x[patch_index] with positions and cu_seqlens=cu_window_seqlens; a full
    one on the same order with each frame's patches as a document (or on
    the processor's order with vision_positions("qwen2_vl", ...))."""
    path = os.fsdecode(config)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    grid = as_array(grid_thw, "grid_thw")  # a numpy.ma array refused (its mask was dropped)
    if grid.dtype.kind not in "iu" or grid.ndim != 2 or grid.shape[1] != 3:
        raise ArgumentError(f"grid_thw: expected integers [n, 3], got {grid.dtype} {grid.shape}")
    grid = index_copy(grid, "grid_thw")
    index, cu, positions = _ropeattn.vision_windows(path, grid)
    unit = positions.shape[0] // index.shape[0] if index.shape[0] else 1
    patch_index = (index[:, None] * unit + np.arange(unit)).reshape(-1)
    return VisionWindows(index, cu, positions, patch_index)


__all__ = ["VisionWindows", "vision_windows"]
