#!/usr/bin/env bash
# test_masks_cli.sh — `ropeattn attention --attention-mask` and `--packed`
# against float64 layers written from transformers' masking_utils
# (tests/families/make_family_cases.py's attention(), with the padding and
# document predicates added here): left and right padding, a row of
# padding only, a window and Llama 4's chunks offset by left padding, and
# packed documents (the same in every row, or each row's own); full masks
# (bool and additive: SDPA's attn_mask) against those and float64; padding
# tokens' outputs and dL/dx rows are 0; the refusals.
# Prints "masks_cli: N passed, N failed" last; exits 1 if anything failed.
SUITE=masks_cli
source "$(dirname "$0")/shell_common.sh"
require_ropeattn_and_numpy

cat >"$TMP/make.py" <<'PY'
import json, os, sys
import numpy as np
sys.path.insert(0, "tests/families")
import make_family_cases as fc

out = sys.argv[1]
B, S, dim, H, K, D = fc.B, fc.S, 32, 4, 2, 16
rng = np.random.default_rng(20261202)
x = fc.f32(rng.normal(0, 1, (B, S, dim)))
base = {"hidden_size": dim, "num_attention_heads": H, "num_key_value_heads": K,
        "head_dim": D, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5}


def masked(w, f, keep_rows, allowed):
    """fc.attention with allowed [B, S, S] AND-ed into its mask; rows of
    padding queries (keep_rows [B, S] False) zero, as ropeattn documents
    (transformers' sdpa gives 0 to left-padding rows)."""
    with np.errstate(invalid="ignore"):  # a row of padding only: 0 / 0
        y = fc.attention(x, w, dict(f, allowed=allowed))
    return np.where(keep_rows[..., None], y, 0.0)


def save(name, cfg, w, y, args, layer=0):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    fc.write_safetensors(os.path.join(d, "model.safetensors"),
                         fc.named(w, "model.layers.%d.self_attn." % layer))
    np.save(os.path.join(d, "x.npy"), x.astype(np.float32))
    np.save(os.path.join(d, "y.npy"), y)
    json.dump({"layer": layer, "args": args}, open(os.path.join(d, "case.json"), "w"))


# Padding: row 0 has 3 left pads, row 1 2 right pads; then row 1 all padding.
for name, pads in (("padded", [(3, 0), (0, 2)]), ("padding_row", [(4, 0), (S, 0)])):
    mask = np.ones((B, S), dtype=np.int64)
    for b, (left, right) in enumerate(pads):
        mask[b, :left] = 0
        if right:
            mask[b, S - right:] = 0
    real = mask.astype(bool)
    allowed = real[:, None, :] & np.ones((B, S, S), dtype=bool)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "mask.npy"), mask)
    for model, cfg, f in (
            ("llama", dict(base, model_type="llama", rope_theta=1e4), {}),
            ("mistral", dict(base, model_type="mistral", rope_theta=1e4, sliding_window=5),
             {"window": 5})):
        w = fc.weights(dim, H, K, D)
        f = dict(f, H=H, K=K, D=D, inv=fc.inv_freq(1e4, D), layout="half")
        save(name + "_" + model, cfg, w, masked(w, f, real, allowed),
             ["--attention-mask", os.path.join(d, "mask.npy")])
    # Llama 4's chunks of 4 start at the first real token (chunked_overlay's
    # left-padding offset).
    lp = (np.cumsum(mask, -1) == 0).sum(-1)
    i, j = np.arange(S)[:, None], np.arange(S)[None, :]
    chunks = np.stack([(j - lp[b]) // 4 == (i - lp[b]) // 4 for b in range(B)])
    cfg = dict(base, model_type="llama4_text", no_rope_layers=[1], attention_chunk_size=4,
               rope_theta=5e5)
    w = fc.weights(dim, H, K, D)
    f = {"H": H, "K": K, "D": D, "layout": "interleaved", "inv": fc.inv_freq(5e5, D),
         "l2": 1e-5}
    save(name + "_llama4", cfg, w, masked(w, f, real, allowed & chunks),
         ["--attention-mask", os.path.join(d, "mask.npy")])

# Packed documents of 5 and 7 tokens in each row (position ids restart).
pos = np.tile(np.concatenate([np.arange(5), np.arange(7)]), (B, 1))
d = os.path.join(out, "packed")
os.makedirs(d, exist_ok=True)
np.save(os.path.join(d, "positions.npy"), pos)
w = fc.weights(dim, H, K, D)
f = {"H": H, "K": K, "D": D, "inv": fc.inv_freq(1e4, D), "layout": "half", "window": 3}
y = np.zeros((B, S, dim))
for lo, hi in ((0, 5), (5, 12)):  # each document alone, its rope from 0
    y[:, lo:hi] = fc.attention(x[:, lo:hi], w, f)
save("packed_mistral", dict(base, model_type="mistral", rope_theta=1e4, sliding_window=3), w,
     y, ["--positions", os.path.join(d, "positions.npy"), "--packed"])

# Rows that start documents at different tokens (row 0: 5 and 7 tokens, row 1:
# 3 and 9), as transformers masks them: each row's own documents.
rows = [[0, 5, 12], [0, 3, 12]]
pos = np.stack([np.concatenate([np.arange(hi - lo) for lo, hi in zip(c, c[1:])]) for c in rows])
np.save(os.path.join(d, "positions_rows.npy"), pos)
y = np.zeros((B, S, dim))
for b, c in enumerate(rows):
    for lo, hi in zip(c, c[1:]):
        y[b:b + 1, lo:hi] = fc.attention(x[b:b + 1, lo:hi], w, f)
save("packedrows_mistral", dict(base, model_type="mistral", rope_theta=1e4, sliding_window=3),
     w, y, ["--positions", os.path.join(d, "positions_rows.npy"), "--packed"])
PY
if ! "$PY" "$TMP/make.py" "$TMP/cases"; then fail "generating the cases"; summary; fi

field() { "$PY" -c "import json, sys; v = json.load(open(sys.argv[1]))[sys.argv[2]]; \
print(' '.join(v) if isinstance(v, list) else v)" "$1/case.json" "$2"; }
for dir in "$TMP"/cases/*_*/; do
    dir=${dir%/}
    name=$(basename "$dir")
    [ -f "$dir/case.json" ] || continue
    read -r -a extra <<<"$(field "$dir" args)"
    if ! "$RA" attention --weights "$dir/model.safetensors" --config "$dir/config.json" \
        --input "$dir/x.npy" --output "$dir/got.npy" --layer "$(field "$dir" layer)" \
        "${extra[@]}" 2>"$TMP/err"; then
        fail "$name: $(cat "$TMP/err")"; continue
    fi
    if out=$("$PY" -c "
import numpy as np, sys
g, w = np.load(sys.argv[1]), np.load(sys.argv[2])
e = np.max(np.abs(g - w)) / np.max(np.abs(w))
sys.exit(0 if e <= 1e-5 and np.array_equal(g == 0, w == 0) else print(f'differs by {e:.3g}') or 1)
" "$dir/got.npy" "$dir/y.npy"); then pass; else fail "$name: $out"; fi
done

# --grads with padding: the padding tokens' dL/dx rows are exactly 0.
C=$TMP/cases/padded_llama
"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.ones((2, 12, 32), np.float32))" \
    "$TMP/dy.npy"
if "$RA" attention --weights "$C/model.safetensors" --config "$C/config.json" --layer 0 \
    --input "$C/x.npy" --output "$TMP/y.npy" --attention-mask "$TMP/cases/padded/mask.npy" \
    --grad-output "$TMP/dy.npy" --grads "$TMP/g.safetensors" 2>"$TMP/err" &&
    "$PY" -c "
import numpy as np, sys
from st_read import read_f32 as read
dx = read(sys.argv[1])['x']
m = np.load(sys.argv[2]).astype(bool)
sys.exit(0 if np.all(dx[~m] == 0) and np.all(np.abs(dx[m]).sum(-1) > 0) else 1)
" "$TMP/g.safetensors" "$TMP/cases/padded/mask.npy"; then pass
else fail "--grads with --attention-mask: $(cat "$TMP/err")"; fi

# --packed rows that start documents at different tokens, with --grads and
# on the reference path: Y, dL/dx and the weights' gradients of 3 rows (rows
# 0 and 2 alike) those of each row run alone, within 1e-5.
R=$TMP/cases/packedrows_mistral
"$PY" -c "
import numpy as np, sys
rng = np.random.default_rng(7)
for name in ('xr', 'dyr'):
    np.save(sys.argv[1] + '/' + name + '.npy', rng.normal(0, 1, (3, 12, 32)).astype(np.float32))
r = [np.r_[np.arange(5), np.arange(7)], np.r_[np.arange(3), np.arange(9)]]
np.save(sys.argv[1] + '/posr.npy', np.stack([r[0], r[1], r[0]]))
for name in ('xr', 'dyr', 'posr'):  # and each row alone: name_b.npy
    a = np.load(sys.argv[1] + '/' + name + '.npy')
    for b in range(3):
        np.save(sys.argv[1] + '/%s_%d.npy' % (name, b), a[b:b + 1])
" "$TMP"
packed_rows() { # $1: suffix of the files ("" or _b), then more arguments
    local s=$1
    shift
    "$RA" attention --weights "$R/model.safetensors" --config "$R/config.json" --layer 0 \
        --input "$TMP/xr$s.npy" --output "$TMP/yr$s.npy" --positions "$TMP/posr$s.npy" --packed \
        --grad-output "$TMP/dyr$s.npy" --grads "$TMP/gr$s.safetensors" "$@"
}
for path in flash reference; do
    if packed_rows "" --path $path 2>"$TMP/err" && packed_rows _0 --path $path &&
        packed_rows _1 --path $path && packed_rows _2 --path $path && "$PY" -c "
import numpy as np, sys
from st_read import read_f32 as read
t = sys.argv[1]
close = lambda a, b: np.max(np.abs(a - b)) <= 1e-5 * np.max(np.abs(b))
rows = [read(t + '/gr_%d.safetensors' % b) for b in range(3)]
g = read(t + '/gr.safetensors')
y = np.concatenate([np.load(t + '/yr_%d.npy' % b) for b in range(3)])
ok = close(np.load(t + '/yr.npy'), y) and close(g['x'], np.concatenate([r['x'] for r in rows]))
ok &= sorted(g) == sorted(rows[0])
ok &= all(close(g[k], sum(r[k] for r in rows)) for k in g if k != 'x')
sys.exit(0 if ok else 1)
" "$TMP"; then pass
    else fail "--packed rows with different documents, --grads, --path $path: $(cat "$TMP/err")"; fi
done

# Across the ranks of an MPI launch (the CLI built with Open MPI): the same
# cases through ring attention on zig-zag shards, each rank reading the
# whole sequence's mask or positions: its Y the one-process file's bits, or
# within the same 1e-5 of the float64 reference with the same zero rows
# (seen: within 6e-7 of one process's); --grads with padding within 1e-5
# of one process's G.  Settings as tests/test_mpi.sh.
if command -v mpirun >/dev/null 2>&1; then
    mpi_setup
    np=2
    for name in padded_llama padded_llama4 padding_row_mistral packed_mistral packedrows_mistral; do
        dir=$TMP/cases/$name
        np=$((5 - np)) # 3 ranks, then 2, ...
        read -r -a extra <<<"$(field "$dir" args)"
        rm -f "$TMP/mpi.npy"
        if ! "${MPIRUN[@]}" -np $np "$RA" attention --weights "$dir/model.safetensors" \
            --config "$dir/config.json" --input "$dir/x.npy" --output "$TMP/mpi.npy" \
            --layer "$(field "$dir" layer)" --threads 1 "${extra[@]}" </dev/null >/dev/null \
            2>"$TMP/err"; then
            fail "mpirun -np $np $name: $(grep -m1 ropeattn: "$TMP/err")"
        elif ! cmp -s "$TMP/mpi.npy" "$dir/got.npy" &&
            ! "$PY" -c "
import numpy as np, sys
g, w = np.load(sys.argv[1]), np.load(sys.argv[2])
e = np.max(np.abs(g - w)) / np.max(np.abs(w))
sys.exit(0 if e <= 1e-5 and np.array_equal(g == 0, w == 0) else print(f'differs by {e:.3g}') or 1)
" "$TMP/mpi.npy" "$dir/y.npy"; then fail "mpirun -np $np $name: differs"
        else pass; fi
    done
    if "${MPIRUN[@]}" -np 3 "$RA" attention --weights "$C/model.safetensors" \
        --config "$C/config.json" --layer 0 --input "$C/x.npy" --output "$TMP/y3.npy" \
        --attention-mask "$TMP/cases/padded/mask.npy" --grad-output "$TMP/dy.npy" \
        --grads "$TMP/g3.safetensors" --threads 1 </dev/null >/dev/null 2>"$TMP/err" &&
        "$PY" -c "
import numpy as np, sys
from st_read import read_f32 as read
a, b = read(sys.argv[1]), read(sys.argv[2])
sys.exit(0 if sorted(a) == sorted(b) and all(
    np.max(np.abs(a[k] - b[k])) <= 1e-5 * np.max(np.abs(b[k])) and
    np.array_equal(a[k] == 0, b[k] == 0) for k in b) else 1)
" "$TMP/g3.safetensors" "$TMP/g.safetensors"; then pass
    else fail "mpirun --grads with --attention-mask: $(grep -m1 ropeattn: "$TMP/err")"; fi
    # --packed rows with different documents: one ring per group of rows
    if "${MPIRUN[@]}" -np 2 "$RA" attention --weights "$R/model.safetensors" \
        --config "$R/config.json" --layer 0 --input "$TMP/xr.npy" --output "$TMP/yr2.npy" \
        --positions "$TMP/posr.npy" --packed --grad-output "$TMP/dyr.npy" \
        --grads "$TMP/gr2.safetensors" --threads 1 </dev/null >/dev/null 2>"$TMP/err" &&
        "$PY" -c "
import numpy as np, sys
from st_read import read_f32 as read
a, b = read(sys.argv[1]), read(sys.argv[2])
a['y'], b['y'] = np.load(sys.argv[3]), np.load(sys.argv[4])
sys.exit(0 if sorted(a) == sorted(b) and all(
    np.max(np.abs(a[k] - b[k])) <= 1e-5 * np.max(np.abs(b[k])) for k in b) else 1)
" "$TMP/gr2.safetensors" "$TMP/gr.safetensors" "$TMP/yr2.npy" "$TMP/yr.npy"; then pass
    else fail "mpirun --grads with --packed rows: $(grep -m1 ropeattn: "$TMP/err")"; fi
fi

# A full mask (bool or float values: SDPA's attn_mask, the layer call's
# attn_mask).  The layer's own causal mask as a bool [S, S]: the same bytes
# as without it; padding as a [B, 1, S, S] bool mask (no query or key of
# padding): --attention-mask's padding output (each masked query's row 0),
# within 1e-6 of max|y|; documents as a block-diagonal [S, S] mask with the
# same positions: --packed's output, within 1e-6; a random additive float32
# [B, H, S, S] mask (some -inf) and a float16 [S, S] one against the float64
# layer within 1e-5 of max|y| (float32 sums over 12 keys and 32 features).
FM=$TMP/full
mkdir -p "$FM"
"$PY" - "$FM" "$TMP/cases" <<'PY'
import os, sys
import numpy as np
sys.path.insert(0, "tests/families")
sys.path.insert(0, "tests")
import make_family_cases as fc
from st_read import read_f32
fm, cases = sys.argv[1], sys.argv[2]
S = 12
np.save(os.path.join(fm, "causal.npy"), np.tril(np.ones((S, S), bool)))
real = np.load(os.path.join(cases, "padded", "mask.npy")).astype(bool)
np.save(os.path.join(fm, "padding.npy"), real[:, None, :, None] & real[:, None, None, :])
doc = np.array([0] * 5 + [1] * 7)
np.save(os.path.join(fm, "blocks.npy"), doc[:, None] == doc[None, :])
rng = np.random.default_rng(20261207)
add = rng.normal(0, 2, (2, 4, S, S)).astype(np.float32)
add[rng.random(add.shape) < 0.2] = -np.inf
add[..., 0] = 0.0  # every query sees key 0: no row all -inf
np.save(os.path.join(fm, "additive.npy"), add)
add16 = rng.normal(0, 2, (S, S)).astype(np.float16)
np.save(os.path.join(fm, "additive16.npy"), add16)
# the float64 layers: the padded_llama case's weights and x
d = os.path.join(cases, "padded_llama")
x = np.load(os.path.join(d, "x.npy")).astype(np.float64)
t = read_f32(os.path.join(d, "model.safetensors"))
w = {k: t["model.layers.0.self_attn.%s_proj.weight" % k].astype(np.float64) for k in "qkvo"}
f = {"H": 4, "K": 2, "D": 16, "inv": fc.inv_freq(1e4, 16), "layout": "half"}
np.save(os.path.join(fm, "additive_y.npy"), fc.attention(x, w, dict(f, additive=add)))
np.save(os.path.join(fm, "additive16_y.npy"),
        fc.attention(x, w, dict(f, additive=add16.astype(np.float64))))
np.save(os.path.join(fm, "nan.npy"), np.where(np.eye(S) > 0, np.nan, 0).astype(np.float32))
np.save(os.path.join(fm, "wide.npy"), np.ones((2, 1, S, S + 1), bool))
np.save(os.path.join(fm, "ints.npy"), np.ones((2, 1, S, S), np.int64))
np.save(os.path.join(fm, "five.npy"), np.ones((1, 2, 1, S, S), bool))
# batch = seq = 12: a 2-D bool or float mask could be a padding mask [batch, seq]
np.save(os.path.join(fm, "square_x.npy"),
        np.repeat(np.load(os.path.join(cases, "padded_llama", "x.npy"))[:1], S, 0))
np.save(os.path.join(fm, "bool_padding.npy"), np.tile(real[:1], (S, 1)))
np.save(os.path.join(fm, "causal4.npy"), np.tril(np.ones((S, S), bool))[None, None])
# batch 1: a bool mask [S] or [1, S] could be a padding mask [batch, S] too
np.save(os.path.join(fm, "one_x.npy"), np.load(os.path.join(cases, "padded_llama", "x.npy"))[:1])
np.save(os.path.join(fm, "keys1.npy"), real[0])
np.save(os.path.join(fm, "keys2.npy"), real[:1])
np.save(os.path.join(fm, "keys4.npy"), real[:1][None, None])
with open(os.path.join(fm, "causal.npy"), "rb") as src:
    open(os.path.join(fm, "truncated.npy"), "wb").write(src.read()[:-7])
PY
[ $? -eq 0 ] || fail "generating the full masks"
C=$TMP/cases/padded_llama
full_run() { # $1: output, then more arguments
    local o=$1
    shift
    "$RA" attention --weights "$C/model.safetensors" --config "$C/config.json" --layer 0 \
        --input "$C/x.npy" --output "$o" "$@"
}
close() { # got, want, relative tolerance
    "$PY" -c "
import numpy as np, sys
g, w = np.load(sys.argv[1]), np.load(sys.argv[2])
e = np.max(np.abs(g - w)) / np.max(np.abs(w))
sys.exit(0 if e <= float(sys.argv[3]) else print(f'differs by {e:.3g}') or 1)
" "$@"
}
PK=$TMP/cases/packed_mistral
for path in flash reference; do
    if full_run "$FM/plain.npy" --path $path 2>"$TMP/err" &&
        full_run "$FM/causal_y.npy" --path $path --attention-mask "$FM/causal.npy" \
            2>>"$TMP/err" && cmp -s "$FM/plain.npy" "$FM/causal_y.npy"; then pass
    else fail "full mask = the causal mask, --path $path: not the same bytes $(cat "$TMP/err")"; fi
    out=
    if full_run "$FM/pad_ref.npy" --path $path --attention-mask "$TMP/cases/padded/mask.npy" \
        2>"$TMP/err" &&
        full_run "$FM/pad_y.npy" --path $path --attention-mask "$FM/padding.npy" 2>>"$TMP/err" &&
        out=$(close "$FM/pad_y.npy" "$FM/pad_ref.npy" 1e-6); then pass
    else fail "full padding mask = the padding mask, --path $path: $out $(cat "$TMP/err")"; fi
    out=
    if "$RA" attention --weights "$PK/model.safetensors" --config "$PK/config.json" --layer 0 \
        --input "$PK/x.npy" --output "$FM/packed.npy" --path $path --packed \
        --positions "$TMP/cases/packed/positions.npy" 2>"$TMP/err" &&
        "$RA" attention --weights "$PK/model.safetensors" --config "$PK/config.json" --layer 0 \
            --input "$PK/x.npy" --output "$FM/blocks_y.npy" --path $path \
            --positions "$TMP/cases/packed/positions.npy" --attention-mask "$FM/blocks.npy" \
            2>>"$TMP/err" && out=$(close "$FM/blocks_y.npy" "$FM/packed.npy" 1e-6); then pass
    else fail "block-diagonal full mask = --packed, --path $path: $out $(cat "$TMP/err")"; fi
    for a in additive additive16; do
        out=
        if full_run "$FM/${a}_got.npy" --path $path --attention-mask "$FM/$a.npy" 2>"$TMP/err" &&
            out=$(close "$FM/${a}_got.npy" "$FM/${a}_y.npy" 1e-5); then pass
        else fail "$a full mask against float64, --path $path: $out $(cat "$TMP/err")"; fi
    done
done
# --grads with a full mask: the layer's backward takes it (the causal one:
# the same bytes as without it)
"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.ones((2, 12, 32), np.float32))" \
    "$FM/dy.npy"
if full_run "$FM/g_y.npy" --attention-mask "$FM/causal.npy" --grad-output "$FM/dy.npy" \
    --grads "$FM/g_mask.safetensors" 2>"$TMP/err" &&
    full_run "$FM/g_y0.npy" --grad-output "$FM/dy.npy" --grads "$FM/g_plain.safetensors" \
        2>>"$TMP/err" && cmp -s "$FM/g_mask.safetensors" "$FM/g_plain.safetensors"; then pass
else fail "--grads with a full causal mask: not the same bytes $(cat "$TMP/err")"; fi
# hostile full masks: one message line, exit non-zero, an existing output untouched
echo keep >"$FM/kept.npy"
while IFS='|' read -r want args; do
    read -r -a a <<<"$args"
    full_run "$FM/kept.npy" "${a[@]}" 2>"$TMP/err"
    got=$?
    if [ "$got" -eq 0 ]; then fail "$args: exit 0"
    elif ! grep -qF -- "$want" "$TMP/err"; then fail "$args: expected /$want/, got $(cat "$TMP/err")"
    elif [ "$(wc -l <"$TMP/err")" -ne 1 ] || [ "$(cat "$FM/kept.npy")" != keep ]; then
        fail "$args: not one line, or the output touched"
    else pass; fi
done <<EOF
extent 13 for seq (keys)|--attention-mask $FM/wide.npy
is nan: must be finite|--attention-mask $FM/nan.npy
must be [2, 12]|--attention-mask $FM/ints.npy
1 to 4 dimensions|--attention-mask $FM/five.npy
truncated.npy|--attention-mask $FM/truncated.npy
is not run with --prefill|--attention-mask $FM/causal.npy --prefill 4
does not read token_type_ids|--attention-mask $FM/causal.npy --token-type-ids $TMP/cases/padded/mask.npy
EOF

# batch = seq: a 2-D bool mask [12, 12] may be a padding mask [batch, seq]
# (it was read as [seq, seq], exit 0); [1, 1, seq, seq] is the full mask
square() {
    "$RA" attention --weights "$C/model.safetensors" --config "$C/config.json" --layer 0 \
        --input "$FM/square_x.npy" --output "$FM/kept.npy" --attention-mask "$1"
}
if ! square "$FM/bool_padding.npy" 2>"$TMP/err" && grep -qF "with batch = seq" "$TMP/err" &&
    [ "$(wc -l <"$TMP/err")" -eq 1 ] && [ "$(cat "$FM/kept.npy")" = keep ] &&
    square "$FM/causal4.npy" 2>>"$TMP/err"; then pass
else fail "a 2-D bool mask with batch = seq: $(cat "$TMP/err")"; fi
echo keep >"$FM/kept.npy"

# batch 1: a bool mask [12] or [1, 12] may be a padding mask [batch, seq] (it
# was read as a full mask over the keys, the padding tokens' rows computed,
# exit 0); [1, 1, 1, seq] is the full mask
one() {
    "$RA" attention --weights "$C/model.safetensors" --config "$C/config.json" --layer 0 \
        --input "$FM/one_x.npy" --output "$FM/kept.npy" --attention-mask "$1"
}
for m in keys1 keys2; do
    if ! one "$FM/$m.npy" 2>"$TMP/err" && grep -qF "with batch 1" "$TMP/err" &&
        [ "$(wc -l <"$TMP/err")" -eq 1 ] && [ "$(cat "$FM/kept.npy")" = keep ]; then pass
    else fail "a bool mask $m with batch 1: $(cat "$TMP/err")"; fi
done
if one "$FM/keys4.npy" 2>"$TMP/err"; then pass
else fail "a bool mask [1, 1, 1, seq] with batch 1: $(cat "$TMP/err")"; fi
echo keep >"$FM/kept.npy"

# latent attention (DeepSeek-V3's fixture) refuses a full mask, by name
DS=tests/hf/deepseek_v3
"$RA" attention --weights "$DS/model.safetensors" --config "$DS/config.json" --layer 0 \
    --input "$DS/x.npy" --positions "$DS/pos.npy" --output "$FM/kept.npy" \
    --attention-mask "$FM/causal.npy" 2>"$TMP/err"
if [ $? -eq 1 ] && grep -qF "attn_mask with a latent attention layer" "$TMP/err" &&
    [ "$(cat "$FM/kept.npy")" = keep ]; then pass
else fail "a full mask on a latent attention layer: $(cat "$TMP/err")"; fi

# Refusals: one message line, no output written.
"$PY" -c "
import numpy as np, sys
np.save(sys.argv[1], np.full((2, 12), 2))
np.save(sys.argv[2], np.ones((2, 11), np.int64))
" "$TMP/twos.npy" "$TMP/short.npy"
P=$TMP/cases/packed/positions.npy
while IFS='|' read -r code want args; do
    read -r -a a <<<"$args"
    rm -f "$TMP/out.npy"
    "$RA" attention --weights "$C/model.safetensors" --config "$C/config.json" --layer 0 \
        --input "$C/x.npy" --output "$TMP/out.npy" "${a[@]}" 2>"$TMP/err"
    got=$?
    if [ "$got" -ne "$code" ]; then fail "$args: exit $got, expected $code ($(cat "$TMP/err"))"
    elif ! grep -qF -- "$want" "$TMP/err"; then fail "$args: expected /$want/, got $(cat "$TMP/err")"
    elif [ "$(wc -l <"$TMP/err")" -ne 1 ] || [ -e "$TMP/out.npy" ]; then
        fail "$args: not one line, or an output written"
    else pass; fi
done <<EOF
1|a mask holds 0 (padding) and 1|--attention-mask $TMP/twos.npy
1|must be [2, 12]|--attention-mask $TMP/short.npy
2|--packed finds the documents in --positions|--packed
2|not both|--packed --positions $P --attention-mask $TMP/cases/padded/mask.npy
2|is not run with --prefill|--attention-mask $TMP/cases/padded/mask.npy --prefill 4
EOF

# Llama 4's chunks with --packed: transformers counts them by position in
# each document, the layer by place: refused unless they agree (documents
# of 5 and 7 tokens: the second starts at token 5, position 0, chunks of 4).
L4=$TMP/cases/padded_llama4
"$PY" -c "
import numpy as np, sys
np.save(sys.argv[1], np.tile(np.concatenate([np.arange(4), np.arange(8)]), (2, 1)))
" "$TMP/pos48.npy"
rm -f "$TMP/out.npy"
"$RA" attention --weights "$L4/model.safetensors" --config "$L4/config.json" --layer 0 \
    --input "$L4/x.npy" --output "$TMP/out.npy" --positions "$P" --packed 2>"$TMP/err"
if [ $? -eq 1 ] && grep -qF "chunks of 4" "$TMP/err" && [ ! -e "$TMP/out.npy" ]; then pass
else fail "--packed with Llama 4's chunks across a misaligned document: $(cat "$TMP/err")"; fi
if "$RA" attention --weights "$L4/model.safetensors" --config "$L4/config.json" --layer 0 \
    --input "$L4/x.npy" --output "$TMP/out.npy" --positions "$TMP/pos48.npy" --packed 2>"$TMP/err"
then pass; else fail "--packed with Llama 4's chunks, documents on chunk bounds: $(cat "$TMP/err")"; fi
summary
