#!/usr/bin/env bash
# test_masks_cli.sh — `ropeattn attention --attention-mask` and `--packed`
# against float64 layers written from transformers' masking_utils
# (tests/families/make_family_cases.py's attention(), with the padding and
# document predicates added here): left and right padding, a row of
# padding only, a window and Llama 4's chunks offset by left padding, and
# packed documents (the same in every row, or each row's own); padding
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
