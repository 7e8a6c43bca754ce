#!/usr/bin/env bash
# test_token_types_cli.sh — `ropeattn attention --token-type-ids`: Gemma 3's
# image blocks (tests/fixtures/token_types, made by
# tests/fixtures/make_token_type_fixtures.py from transformers' own
# Gemma3Attention and create_masks_for_vision_model in float64, on
# tests/hf/gemma3_multimodal's checkpoint): the sliding layer 0 and the full
# layer 1, two rows with two image blocks each, one right-padded
# (--attention-mask), against transformers' y within 1e-5 of max|y| on the
# tokens (a padding token's row is 0, as --attention-mask says; seen: 2.5e-7
# and 2.3e-7) and --grads (dL/dx and each tensor's, dy 0 on padding rows)
# against its autograd within 1e-5 of max; a block of 6 on the window-4
# layer (long_y); --prefill 10 then two text decode steps against the
# no-cache Y; and the refusals.
# Prints "token_types_cli: N passed, N failed" last; exits 1 if anything failed.
SUITE=token_types_cli
source "$(dirname "$0")/shell_common.sh"
require_ropeattn_and_numpy

F=tests/fixtures/token_types
W=tests/hf/gemma3_multimodal
close() { # got, want, pad: got within 1e-5 of max|want| on pad's tokens, 0 elsewhere
    "$PY" - "$@" <<'PY'
import sys
import numpy as np
y, want, pad = np.load(sys.argv[1]), np.load(sys.argv[2]), np.load(sys.argv[3]).astype(bool)
e = np.abs(y - want)[pad].max() / np.abs(want).max()
print(f"{sys.argv[1]} vs {sys.argv[2]}: {e:.2g} of max|y|")
sys.exit(0 if y.shape == want.shape and e <= 1e-5 and not y[~pad].any() else 1)
PY
}
"$PY" -c "import numpy as np; np.save('$TMP/ones.npy', np.ones((2, 12), dtype=np.int64))"
for layer in 0 1; do
    # a block of 6 (the window is 4 on layer 0): its queries see all its later keys
    if "$RA" attention --weights "$W" --input "$F/x.npy" --output "$TMP/long$layer.npy" \
        --layer $layer --token-type-ids "$F/long_token_type_ids.npy" \
        --attention-mask "$F/attention_mask.npy" 2>"$TMP/err" &&
        close "$TMP/long$layer.npy" "$F/long_y$layer.npy" "$F/attention_mask.npy"; then
        pass
    else
        fail "layer $layer: a block longer than the window: $(cat "$TMP/err")"
    fi
    # --prefill 10 (the blocks end by token 9), then two text steps: the
    # no-cache Y (float32 sums in another order)
    if "$RA" attention --weights "$W" --input "$F/x.npy" --output "$TMP/whole$layer.npy" \
        --layer $layer --token-type-ids "$F/token_type_ids.npy" 2>"$TMP/err" &&
        "$RA" attention --weights "$W" --input "$F/x.npy" --output "$TMP/pre$layer.npy" \
        --layer $layer --token-type-ids "$F/token_type_ids.npy" --prefill 10 2>"$TMP/err" &&
        close "$TMP/pre$layer.npy" "$TMP/whole$layer.npy" "$TMP/ones.npy"; then
        pass
    else
        fail "layer $layer: --prefill 10: $(cat "$TMP/err")"
    fi
    if "$RA" attention --weights "$W" --input "$F/x.npy" --output "$TMP/y$layer.npy" \
        --layer $layer --token-type-ids "$F/token_type_ids.npy" \
        --attention-mask "$F/attention_mask.npy" 2>"$TMP/err"; then
        if "$PY" - "$TMP/y$layer.npy" "$F/y$layer.npy" "$F/attention_mask.npy" <<'PY'; then
import sys
import numpy as np
y, want, pad = np.load(sys.argv[1]), np.load(sys.argv[2]), np.load(sys.argv[3]).astype(bool)
e = np.abs(y - want)[pad].max() / np.abs(want).max()
print(f"{sys.argv[2]}: y {e:.2g} of max|y|")
sys.exit(0 if y.shape == want.shape and e <= 1e-5 and not y[~pad].any() else 1)
PY
            pass
        else
            fail "layer $layer: y"
        fi
    else
        fail "layer $layer: $(cat "$TMP/err")"
    fi
    # --grads: dy 0 on padding rows (their output and gradient are 0)
    if "$RA" attention --weights "$W" --input "$F/x.npy" --output "$TMP/g$layer.npy" \
        --layer $layer --token-type-ids "$F/token_type_ids.npy" \
        --attention-mask "$F/attention_mask.npy" --grad-output "$F/dy$layer.npy" \
        --grads "$TMP/g$layer.safetensors" 2>"$TMP/err"; then
        if "$PY" - "$TMP/g$layer.safetensors" "$F/grads$layer.npz" <<'PY'; then
import sys
sys.path.insert(0, "tests")
import numpy as np
from st_read import read_f32
got, ref = read_f32(sys.argv[1]), np.load(sys.argv[2])
g = max(np.abs(got[k].reshape(ref[k].shape) - ref[k]).max() / np.abs(ref[k]).max() for k in ref.files)
print(f"{sys.argv[2]}: gradients {g:.2g} of max")
sys.exit(0 if sorted(got) == sorted(ref.files) and g <= 1e-5 else 1)
PY
            pass
        else
            fail "layer $layer: gradients"
        fi
    else
        fail "layer $layer --grads: $(cat "$TMP/err")"
    fi
done

# A full --attention-mask with --token-type-ids: a key is seen where both
# masks let it.  The padding as a full bool mask on the keys [B, 1, 1, S]
# gives transformers' y on the tokens (layers 0 and 1); and on the full
# layer 1, a bool mask and an additive float one give the bytes of
# `--no-causal --attention-mask` over the two joined in numpy (the token
# types' mask as ra_hf_token_type_mask documents it), y and --grads alike.
"$PY" - "$F" "$TMP" <<'PY'
import sys
import numpy as np
F, T = sys.argv[1:3]
tt, pad = np.load(F + "/token_type_ids.npy"), np.load(F + "/attention_mask.npy").astype(bool)
B, S = tt.shape
np.save(T + "/pad_full.npy", pad[:, None, None, :])
keep = np.tril(np.ones((S, S), bool))[None].repeat(B, 0)  # j <= i, or the same image block
for b in range(B):
    block, n = np.full(S, -1), 0
    for i in range(S):
        if tt[b, i] == 1:
            n += i == 0 or tt[b, i - 1] != 1
            block[i] = n
    keep[b] |= (block[:, None] == block[None, :]) & (block[:, None] >= 0)
keep = keep[:, None]
rng = np.random.default_rng(43)
m = rng.random((B, 1, S, S)) < 0.7
np.save(T + "/m_bool.npy", m)
np.save(T + "/c_bool.npy", m & keep)
f = rng.uniform(-1, 1, (1, 4, S, S)).astype(np.float32)
f[..., 3] = -np.inf
np.save(T + "/m_f32.npy", f)
np.save(T + "/c_f32.npy", np.where(keep, f, -np.inf).astype(np.float32))
PY
for layer in 0 1; do
    if "$RA" attention --weights "$W" --input "$F/x.npy" --output "$TMP/yp$layer.npy" \
        --layer $layer --token-type-ids "$F/token_type_ids.npy" \
        --attention-mask "$TMP/pad_full.npy" 2>"$TMP/err" &&
        "$PY" - "$TMP/yp$layer.npy" "$F/y$layer.npy" "$F/attention_mask.npy" <<'PY'; then
import sys
import numpy as np
y, want, pad = np.load(sys.argv[1]), np.load(sys.argv[2]), np.load(sys.argv[3]).astype(bool)
e = np.abs(y - want)[pad].max() / np.abs(want).max()
print(f"{sys.argv[2]}: y {e:.2g} of max|y| (padding as a full mask)")
sys.exit(0 if e <= 1e-5 else 1)
PY
        pass
    else
        fail "layer $layer: padding as a full mask with --token-type-ids: $(cat "$TMP/err")"
    fi
done
for kind in bool f32; do
    grads=()
    [ $kind = bool ] && grads=(--grad-output "$F/dy1.npy")
    if "$RA" attention --weights "$W" --input "$F/x.npy" --output "$TMP/ya.npy" --layer 1 \
        --token-type-ids "$F/token_type_ids.npy" --attention-mask "$TMP/m_$kind.npy" \
        ${grads[@]+"${grads[@]}"} ${grads[@]+--grads "$TMP/ga.safetensors"} 2>"$TMP/err" &&
        "$RA" attention --weights "$W" --input "$F/x.npy" --output "$TMP/yb.npy" --layer 1 \
        --no-causal --attention-mask "$TMP/c_$kind.npy" \
        ${grads[@]+"${grads[@]}"} ${grads[@]+--grads "$TMP/gb.safetensors"} 2>>"$TMP/err" &&
        cmp -s "$TMP/ya.npy" "$TMP/yb.npy" &&
        { [ $kind != bool ] || cmp -s "$TMP/ga.safetensors" "$TMP/gb.safetensors"; }; then
        pass
    else
        fail "$kind full mask with --token-type-ids differs from the joined mask: $(cat "$TMP/err")"
    fi
done

args=(--weights "$W" --input "$F/x.npy" --layer 0 --token-type-ids "$F/token_type_ids.npy")
attention_refused 1 "token 6 is an image token at or after --prefill 4" "${args[@]}" --prefill 4
attention_refused 2 "not run with --no-causal" "${args[@]}" --no-causal
"$PY" -c "import numpy as np; np.save('$TMP/short.npy', np.zeros(12, dtype=np.int64))"
attention_refused 1 "must be \[2, 12\]" --weights "$W" --input "$F/x.npy" --layer 0 \
    --token-type-ids "$TMP/short.npy"
attention_refused 1 "does not read token_type_ids" --weights tests/hf/gemma3_window --input "$F/x.npy" \
    --layer 0 --token-type-ids "$F/token_type_ids.npy"
summary
