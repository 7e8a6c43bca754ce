#!/usr/bin/env bash
# test_vision_cli.sh — `ropeattn attention --vision`: the attention layer of
# a checkpoint's vision encoder (tests/fixtures/vision, made by
# tests/fixtures/make_vision_fixtures.py from transformers' own modules in
# float64: Pixtral's and Qwen2-VL's with two images packed (--cu-seqlens),
# Qwen2.5-VL's and Llama 4's with one; Qwen2.5-VL's window layer with
# --grid-thw, three images in window order): y and --grads (dL/dx and each
# tensor's gradient, for dy.npy) against transformers' within 1e-5 of max|ref|
# (float32 sums; seen: y 1.4e-7 to 4.7e-7), --grid-thw on a full layer
# against --positions and the frames' --cu-seqlens, and the refusals.
# Prints "vision_cli: N passed, N failed" last; exits 1 if anything failed.
SUITE=vision_cli
source "$(dirname "$0")/shell_common.sh"
require_ropeattn_and_numpy

F=tests/fixtures/vision
for c in pixtral qwen2_vl qwen2_5_vl llama4 qwen2_5_vl_window; do
    d=$F/$c
    images=(--positions "$d/positions.npy" --cu-seqlens "$d/cu_seqlens.npy")
    [ $c = qwen2_5_vl_window ] && images=(--grid-thw "$d/grid_thw.npy")
    if "$RA" attention --weights "$d" --input "$d/x.npy" --output "$TMP/$c.npy" \
        "${images[@]}" --vision --layer 0 \
        --grad-output "$d/dy.npy" --grads "$TMP/$c.safetensors" 2>"$TMP/err"; then
        if "$PY" - "$TMP/$c.npy" "$d/y.npy" "$TMP/$c.safetensors" "$d/grads.npz" <<'PY'; then
import sys
sys.path.insert(0, "tests")
import numpy as np
from st_read import read_f32
y, want = np.load(sys.argv[1]), np.load(sys.argv[2])
e = np.abs(y - want).max() / np.abs(want).max()
got, ref = read_f32(sys.argv[3]), np.load(sys.argv[4])
g = max(np.abs(got[k].reshape(ref[k].shape) - ref[k]).max() / np.abs(ref[k]).max() for k in ref.files)
print(f"{sys.argv[2]}: y {e:.2g} of max|y|, gradients {g:.2g} of max")
sys.exit(0 if y.shape == want.shape and sorted(got) == sorted(ref.files) and e <= 1e-5
         and g <= 1e-5 else 1)
PY
            pass
        else
            fail "$c: y or gradients"
        fi
    else
        fail "$c: $(cat "$TMP/err")"
    fi
done

d=$F/qwen2_5_vl
args=(--weights "$d" --input "$d/x.npy" --positions "$d/positions.npy" --vision)
attention_refused 2 "needs --layer" "${args[@]}"
attention_refused 2 "\-\-n-heads is not taken" "${args[@]}" --layer 0 --n-heads 3
attention_refused 2 "\-\-prefill is not taken" "${args[@]}" --layer 0 --prefill 4
attention_refused 1 "fullatt_block_indexes" "${args[@]}" --layer 1 --cu-seqlens "$d/cu_seqlens.npy"
attention_refused 1 "(row, column) pairs" --weights "$d" --input "$d/x.npy" --vision --layer 0 \
    --positions "$F/llama4/positions.npy"
attention_refused 2 "needs --positions" --weights "$d" --input "$d/x.npy" --vision --layer 0
attention_refused 2 "cu-seqlens is --vision" --weights "$d" --input "$d/x.npy" --layer 0 \
    --cu-seqlens "$d/cu_seqlens.npy"
attention_refused 1 "cu-seqlens is \[n + 1\]" "${args[@]}" --layer 0 --cu-seqlens "$d/positions.npy"
attention_refused 1 "cu_seqlens" "${args[@]}" --layer 0 --cu-seqlens "$F/qwen2_vl/cu_seqlens.npy"

# --grid-thw on a full layer: the window-order positions and each frame as a
# document, the same as giving them (layer 0 made full by its config)
w=$F/qwen2_5_vl_window
mkdir -p "$TMP/full"
cp "$w/model.safetensors" "$TMP/full/"
"$PY" - "$w" "$TMP/full" <<'PY'
import json, sys
import numpy as np
src, dst = sys.argv[1:]
config = json.load(open(f"{src}/config.json"))
config["vision_config"]["fullatt_block_indexes"] = [0]
json.dump(config, open(f"{dst}/config.json", "w"))
grid = np.load(f"{src}/grid_thw.npy")
np.save(f"{dst}/cu.npy", np.concatenate([[0], np.cumsum(np.repeat(grid[:, 1] * grid[:, 2], grid[:, 0]))]))
PY
if "$RA" attention --weights "$TMP/full" --input "$w/x.npy" --output "$TMP/full_grid.npy" \
        --vision --layer 0 --grid-thw "$w/grid_thw.npy" 2>"$TMP/err" &&
    "$RA" attention --weights "$TMP/full" --input "$w/x.npy" --output "$TMP/full_given.npy" \
        --vision --layer 0 --positions "$w/positions.npy" --cu-seqlens "$TMP/full/cu.npy" \
        2>>"$TMP/err" && cmp -s "$TMP/full_grid.npy" "$TMP/full_given.npy" &&
    ! cmp -s "$TMP/full_grid.npy" "$TMP/qwen2_5_vl_window.npy"; then
    pass
else
    fail "--grid-thw on a full layer: $(cat "$TMP/err")"
fi

# a window layer: only with --grid-thw, and the grid must be the input's
args=(--weights "$w" --input "$w/x.npy" --vision --layer 0)
attention_refused 1 "give --grid-thw" "${args[@]}" --positions "$w/positions.npy" \
    --cu-seqlens "$w/cu_seqlens.npy"
attention_refused 2 "give --grid-thw or --positions" "${args[@]}" --grid-thw "$w/grid_thw.npy" \
    --positions "$w/positions.npy"
attention_refused 2 "grid-thw is --vision's" --weights "$w" --input "$w/x.npy" --layer 0 \
    --grid-thw "$w/grid_thw.npy"
"$PY" -c "import numpy as np; np.save('$TMP/grid2.npy', np.array([[1, 6, 10], [2, 4, 4]]));
np.save('$TMP/grid_odd.npy', np.array([[1, 5, 4]])); np.save('$TMP/grid_2d.npy', np.array([1, 2, 2]))"
attention_refused 1 "hold 92 patches; --input has 96" "${args[@]}" --grid-thw "$TMP/grid2.npy"
attention_refused 1 "multiples of vision_config's spatial_merge_size" "${args[@]}" \
    --grid-thw "$TMP/grid_odd.npy"
attention_refused 1 "grid-thw is \[n, 3\]" "${args[@]}" --grid-thw "$TMP/grid_2d.npy"
attention_refused 1 "no window attention" --weights "$F/qwen2_vl" --input "$F/qwen2_vl/x.npy" --vision \
    --layer 0 --grid-thw "$w/grid_thw.npy"
summary
