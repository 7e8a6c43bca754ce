#!/usr/bin/env bash
# test_cli.sh — the ropeattn command line, end to end.
#
# Fixtures are made here by /usr/bin/python3 with numpy (no torch): tiny
# checkpoints (dim 64, H 4, Hkv 2, B 2, S 5) in F32, F16 and BF16 with the
# seed's names, and with Hugging Face names and permuted wq/wk rows; a float64
# numpy reference of the seed's Attention.forward, of RoPE and of the freqs
# tables; and broken files.  Every bad input must end with an exit code in
# 1..127, exactly one line on stderr starting "ropeattn: " and no output file.
#
# Prints "cli: N passed, N failed" last; exits 1 if anything failed.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
RA=$BUILD/ropeattn
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0 failed=0

pass() { passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
summary() { echo "cli: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

if [ ! -x "$RA" ]; then fail "$RA is not built"; summary; fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    fail "$PY with numpy is required (apt-get install python3-numpy)"; summary
fi

# ---- fixtures -------------------------------------------------------------
cat >"$TMP/helper.py" <<'EOF'
"""Fixtures and checks for test_cli.sh (numpy only)."""
import json, struct, sys
import numpy as np

DIM, H, HKV, B, S = 64, 4, 2, 2, 5
D = DIM // H

def bf16_bits(a):
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)

def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)

def encode(a, dtype):
    """Raw bytes and the float64 values the file really holds."""
    if dtype == "F32":
        a = a.astype(np.float32); return a.tobytes(), a.astype(np.float64)
    if dtype == "F16":
        a = a.astype(np.float16); return a.tobytes(), a.astype(np.float64)
    if dtype == "BF16":
        bits = bf16_bits(a); return bits.tobytes(), bf16_values(bits).astype(np.float64)
    if dtype == "I32":
        a = np.round(a * 100).astype(np.int32); return a.tobytes(), None
    raise ValueError(dtype)

def write_safetensors(path, tensors, header_len=None, offsets=None):
    """tensors: list of (name, dtype, shape, raw bytes)."""
    header, data, at = {}, b"", 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [at, at + len(raw)]}
        data += raw; at += len(raw)
    if offsets:
        header[offsets[0]]["data_offsets"] = offsets[1]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", header_len if header_len else len(text)) + text + data)

def permute_rows(w, heads):
    """Interleaved rows (a0 b0 a1 b1 ...) to half rows (a0 a1 ... b0 b1 ...), per head."""
    d = w.shape[0] // heads
    return w.reshape(heads, d // 2, 2, -1).transpose(0, 2, 1, 3).reshape(w.shape)

def rope(x, start, theta, layout, inverse=False):
    """x: [B, S, heads, D] float64."""
    d = x.shape[-1]
    freqs = 1.0 / theta ** (np.arange(0, d, 2)[: d // 2] / d)
    angle = np.outer(np.arange(start, start + x.shape[1]), freqs)[None, :, None, :]
    cos, sin = np.cos(angle), np.sin(angle) * (-1 if inverse else 1)
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        return np.stack([a * cos - b * sin, a * sin + b * cos], axis=-1).reshape(x.shape)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

def seed_attention(x, wq, wk, wv, wo, h, hkv, start=0, theta=10000.0, layout="interleaved"):
    """The seed's Attention.forward in float64.  x: [B, S, dim]."""
    b, s, dim = x.shape; d = dim // h
    q = rope((x @ wq.T).reshape(b, s, h, d), start, theta, layout)
    k = rope((x @ wk.T).reshape(b, s, hkv, d), start, theta, layout)
    v = (x @ wv.T).reshape(b, s, hkv, d)
    k, v = np.repeat(k, h // hkv, axis=2), np.repeat(v, h // hkv, axis=2)
    q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
    scores = scores + np.triu(np.full((s, s), -np.inf), 1)
    p = np.exp(scores - scores.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
    out = (p @ v).transpose(0, 2, 1, 3).reshape(b, s, h * d)
    return out @ wo.T

def weights(seed):
    rng = np.random.default_rng(seed)
    bound = 1 / np.sqrt(DIM)
    shapes = [(H * D, DIM), (HKV * D, DIM), (HKV * D, DIM), (DIM, H * D)]
    return [rng.uniform(-bound, bound, shape) for shape in shapes]

SEED_NAMES = ["wq.weight", "wk.weight", "wv.weight", "wo.weight"]
HF_NAMES = ["q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"]

def checkpoint(path, ws, dtype="F32", names=SEED_NAMES, prefix="", drop=None, bad_dtype=None):
    tensors, held = [], []
    for name, w in zip(names, ws):
        kind = bad_dtype if bad_dtype and name == names[0] else dtype
        raw, values = encode(w, kind)
        held.append(values)
        if name != drop:
            tensors.append((prefix + name, kind, w.shape, raw))
    write_safetensors(path, tensors)
    return held

def gen(out):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (B, S, DIM)).astype(np.float32)
    np.save(f"{out}/x.npy", x)
    np.save(f"{out}/x2d.npy", x[0])
    x64 = x.astype(np.float64)
    ws = weights(1)
    for dtype in ["F32", "F16", "BF16"]:
        held = checkpoint(f"{out}/seed_{dtype}.safetensors", ws, dtype)
        np.save(f"{out}/ref_{dtype}.npy", seed_attention(x64, *held, H, HKV))
    held = [encode(w, "F32")[1] for w in ws]
    np.save(f"{out}/ref_start7_theta500k.npy",
            seed_attention(x64, *held, H, HKV, start=7, theta=500000.0))
    np.save(f"{out}/ref_half.npy", seed_attention(x64, *held, H, HKV, layout="half"))
    hf = [permute_rows(ws[0], H), permute_rows(ws[1], HKV), ws[2], ws[3]]
    checkpoint(f"{out}/hf.safetensors", hf, names=HF_NAMES, prefix="model.layers.0.self_attn.")
    checkpoint(f"{out}/hf_bare.safetensors", hf, names=HF_NAMES, prefix="self_attn.")
    ws1 = weights(2)
    hf1 = [permute_rows(ws1[0], H), permute_rows(ws1[1], HKV), ws1[2], ws1[3]]
    tensors = []
    for layer, layer_ws in [(0, hf), (1, hf1)]:
        for name, w in zip(HF_NAMES, layer_ws):
            tensors.append((f"model.layers.{layer}.self_attn.{name}", "F32", w.shape,
                            w.astype(np.float32).tobytes()))
    write_safetensors(f"{out}/hf_2layers.safetensors", tensors)
    held1 = [encode(w, "F32")[1] for w in ws1]
    np.save(f"{out}/ref_layer1.npy", seed_attention(x64, *held1, H, HKV))
    with open(f"{out}/config.json", "w") as f:
        json.dump({"hidden_size": DIM, "num_attention_heads": H, "num_key_value_heads": HKV,
                   "head_dim": D, "rope_theta": 10000.0, "model_type": "llama"}, f)
    with open(f"{out}/config_theta.json", "w") as f:
        json.dump({"num_attention_heads": H, "rope_theta": 500000.0}, f)
    with open(f"{out}/config_bad_hidden.json", "w") as f:
        json.dump({"hidden_size": 128, "num_attention_heads": H}, f)

    # rope and freqs
    xr = rng.uniform(-1, 1, (2, 6, 3, 8)).astype(np.float32)
    np.save(f"{out}/rope_x.npy", xr)
    for layout in ["interleaved", "half"]:
        np.save(f"{out}/rope_ref_{layout}.npy", rope(xr.astype(np.float64), 3, 10000.0, layout))
    np.save(f"{out}/rope_ref_far.npy", rope(xr.astype(np.float64), 1000000, 500000.0, "half"))
    angle = np.outer(np.arange(100), 1.0 / 10000.0 ** (np.arange(0, 16, 2) / 16))
    np.save(f"{out}/cos_ref.npy", np.cos(angle))
    np.save(f"{out}/sin_ref.npy", np.sin(angle))

    # broken files
    good = open(f"{out}/x.npy", "rb").read()
    open(f"{out}/truncated.npy", "wb").write(good[: len(good) - 100])
    open(f"{out}/badmagic.npy", "wb").write(b"\x93NUMPX" + good[6:])
    np.save(f"{out}/wrongdim.npy", rng.uniform(-1, 1, (B, S, 32)).astype(np.float32))
    np.save(f"{out}/f64.npy", x64)
    np.save(f"{out}/x4d.npy", x.reshape(B, S, H, D))
    np.save(f"{out}/rope_3d.npy", xr[0])
    np.save(f"{out}/rope_odd.npy", rng.uniform(-1, 1, (1, 2, 2, 7)).astype(np.float32))
    seed_tensors = [(n, "F32", w.shape, w.astype(np.float32).tobytes())
                    for n, w in zip(SEED_NAMES, ws)]
    write_safetensors(f"{out}/st_badlen.safetensors", seed_tensors, header_len=1 << 40)
    write_safetensors(f"{out}/st_badoffsets.safetensors", seed_tensors,
                      offsets=("wo.weight", [0, 1 << 30]))
    checkpoint(f"{out}/st_missing.safetensors", ws, drop="wo.weight")
    checkpoint(f"{out}/st_i32.safetensors", ws, bad_dtype="I32")
    write_safetensors(f"{out}/st_notensors.safetensors",
                      [("tok_embeddings.weight", "F32", (2, 2), b"\0" * 16)])
    write_safetensors(f"{out}/st_badshape.safetensors",
                      [(n, "F32", w.shape, w.astype(np.float32).tobytes())
                       for n, w in zip(SEED_NAMES, [ws[0], ws[1][:-1], ws[2], ws[3]])])

def compare(got_path, ref_path, tol):
    got, ref = np.load(got_path), np.load(ref_path)
    if got.dtype != np.float32 or got.shape != ref.shape:
        print(f"{got_path}: {got.dtype} {got.shape}, expected float32 {ref.shape}")
        return 1
    if not np.all(np.isfinite(got)):
        print(f"{got_path}: not finite"); return 1
    err = np.max(np.abs(got.astype(np.float64) - ref)) / np.max(np.abs(ref))
    if err > tol:
        i = np.unravel_index(np.argmax(np.abs(got - ref)), ref.shape)
        print(f"{got_path} vs {ref_path}: rel err {err:.3g} > {tol:g}; worst at {i}: "
              f"{got[i]} vs {ref[i]}")
        return 1
    return 0

def check_bench(path):
    records = json.load(open(path))
    keys = {"name", "shape", "median_seconds", "rate", "limit_name", "fraction"}
    names = [r["name"] for r in records]
    ok = names == ["rmw", "rope_decode_f32"] and all(keys <= set(r) for r in records)
    ok = ok and records[1]["limit_name"] == "rmw" and records[1]["fraction"] > 0
    ok = ok and records[1]["bytes"] == 2 * 4 * 40 * 128 and records[1]["median_seconds"] > 0
    if not ok:
        print(f"unexpected bench records: {records}")
    return 0 if ok else 1

if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "gen": gen(sys.argv[2])
    elif cmd == "compare": sys.exit(compare(sys.argv[2], sys.argv[3], float(sys.argv[4])))
    elif cmd == "slice0":
        np.save(sys.argv[3], np.load(sys.argv[2])[0])
    elif cmd == "bench": sys.exit(check_bench(sys.argv[2]))
EOF
if ! "$PY" "$TMP/helper.py" gen "$TMP"; then fail "fixture generation"; summary; fi
cd "$TMP"

# ---- helpers --------------------------------------------------------------
# expect_ok NAME OUTPUT REF TOL -- ARGS...: runs ropeattn ARGS, then compares
# OUTPUT with REF to relative tolerance TOL.
expect_ok() {
    local name=$1 out=$2 ref=$3 tol=$4; shift 5
    rm -f "$out"
    if ! "$RA" "$@" >"$TMP/stdout" 2>"$TMP/stderr"; then
        fail "$name: exit $? ($(head -c 300 "$TMP/stderr"))"; return
    fi
    if [ -s "$TMP/stderr" ]; then
        fail "$name: wrote to stderr: $(head -c 300 "$TMP/stderr")"; return
    fi
    if "$PY" "$TMP/helper.py" compare "$out" "$ref" "$tol"; then pass; else fail "$name"; fi
}

# expect_error NAME OUTPUT -- ARGS...: ropeattn ARGS must fail cleanly and
# leave OUTPUT (may be "-") absent.
expect_error() {
    local name=$1 out=$2; shift 3
    [ "$out" != - ] && rm -f "$out"
    "$RA" "$@" >"$TMP/stdout" 2>"$TMP/stderr"
    local rc=$? lines
    lines=$(wc -l <"$TMP/stderr")
    if [ "$rc" -lt 1 ] || [ "$rc" -gt 127 ]; then fail "$name: exit code $rc"
    elif [ "$lines" -ne 1 ] || ! grep -q '^ropeattn: ' "$TMP/stderr"; then
        fail "$name: expected one 'ropeattn: ' line on stderr, got: $(head -c 400 "$TMP/stderr")"
    elif [ "$out" != - ] && [ -e "$out" ]; then fail "$name: left $out behind"
    elif ls "$TMP" | grep -q '\.tmp'; then fail "$name: left a temporary file: $(ls "$TMP")"
    else pass
    fi
}

SEED="--weights seed_F32.safetensors --input x.npy --output y.npy"

# ---- attention --------------------------------------------------------------
expect_ok "attention f32 flash" y.npy ref_F32.npy 1e-4 -- attention $SEED --n-heads 4
expect_ok "attention f32 reference path" y.npy ref_F32.npy 1e-4 -- \
    attention $SEED --n-heads 4 --path reference
expect_ok "attention f32, 1 thread" y.npy ref_F32.npy 1e-4 -- \
    attention $SEED --n-heads 4 --n-kv-heads 2 --threads 1
expect_ok "attention f16 weights" y.npy ref_F16.npy 1e-4 -- \
    attention --weights seed_F16.safetensors --input x.npy --output y.npy --n-heads 4
expect_ok "attention bf16 weights" y.npy ref_BF16.npy 1e-4 -- \
    attention --weights seed_BF16.safetensors --input x.npy --output y.npy --n-heads 4
expect_ok "attention --start-pos 7 --theta 500000" y.npy ref_start7_theta500k.npy 1e-4 -- \
    attention $SEED --n-heads 4 --start-pos 7 --theta 500000
expect_ok "attention --layout half on seed names" y.npy ref_half.npy 1e-4 -- \
    attention $SEED --n-heads 4 --layout half
"$PY" "$TMP/helper.py" slice0 ref_F32.npy ref_F32_0.npy
expect_ok "attention 2-D input is batch 1" y2.npy ref_F32_0.npy 1e-4 -- \
    attention --weights seed_F32.safetensors --input x2d.npy --output y2.npy --n-heads 4

# Hugging Face names, permuted rows, half layout by default: same output as
# the seed's names.
"$RA" attention $SEED --n-heads 4 2>/dev/null && mv y.npy y_seed.npy
expect_ok "attention HF names + config = seed names" y.npy y_seed.npy 1e-5 -- \
    attention --weights hf.safetensors --input x.npy --output y.npy --config config.json
expect_ok "attention HF self_attn. names" y.npy y_seed.npy 1e-5 -- \
    attention --weights hf_bare.safetensors --input x.npy --output y.npy --n-heads 4
expect_ok "attention HF --layer 1 of 2" y.npy ref_layer1.npy 1e-4 -- \
    attention --weights hf_2layers.safetensors --input x.npy --output y.npy --n-heads 4 --layer 1
expect_ok "attention HF --layer 0 of 2" y.npy y_seed.npy 1e-5 -- \
    attention --weights hf_2layers.safetensors --input x.npy --output y.npy --config config.json \
    --layer 0
expect_ok "attention rope_theta from config" y.npy ref_start7_theta500k.npy 1e-4 -- \
    attention --weights hf.safetensors --input x.npy --output y.npy --config config_theta.json
expect_ok "attention flags override config" y.npy y_seed.npy 1e-5 -- \
    attention --weights hf.safetensors --input x.npy --output y.npy --config config_theta.json \
    --theta 10000 --n-heads 4

# ---- rope and freqs ---------------------------------------------------------
expect_ok "rope interleaved" r.npy rope_ref_interleaved.npy 1e-5 -- \
    rope --input rope_x.npy --output r.npy --start-pos 3
expect_ok "rope half" r.npy rope_ref_half.npy 1e-5 -- \
    rope --input rope_x.npy --output r.npy --start-pos 3 --layout half --threads 1
expect_ok "rope far positions" r.npy rope_ref_far.npy 1e-5 -- \
    rope --input rope_x.npy --output r.npy --start-pos 1000000 --theta 500000 --layout=half
"$PY" -c 'import numpy as np; np.save("rope_x64.npy", np.load("rope_x.npy").astype(np.float64))'
"$RA" rope --input rope_x.npy --output r.npy --start-pos 5 --layout half 2>/dev/null
expect_ok "rope --inverse undoes rope" back.npy rope_x64.npy 1e-6 -- \
    rope --input r.npy --output back.npy --start-pos 5 --layout half --inverse
expect_ok "freqs cos" c.npy cos_ref.npy 1e-6 -- \
    freqs --head-dim 16 --end 100 --cos c.npy --sin s.npy
if "$PY" "$TMP/helper.py" compare s.npy sin_ref.npy 1e-6; then pass; else fail "freqs sin"; fi

# ---- help, version, demo, bench --------------------------------------------
for cmd in "" attention rope freqs demo bench; do
    if "$RA" $cmd --help >"$TMP/stdout" 2>"$TMP/stderr" && grep -q usage "$TMP/stdout" &&
        [ ! -s "$TMP/stderr" ]; then pass; else fail "ropeattn $cmd --help"; fi
done
if "$RA" --version | grep -qE '^ropeattn [0-9]+\.[0-9]+\.[0-9]+$'; then pass
else fail "--version"; fi
if "$RA" demo --seq 16 >"$TMP/stdout" 2>&1 && grep -q "checks passed" "$TMP/stdout"; then pass
else fail "demo --seq 16: $(tail -n 12 "$TMP/stdout")"; fi
if RA_BENCH_REEXEC=keep "$RA" bench --only rope_decode_f32 --repeats 2 --json \
    >bench.json 2>"$TMP/stderr" && "$PY" "$TMP/helper.py" bench bench.json; then pass
else fail "bench --json: $(head -c 300 "$TMP/stderr")"; fi
if env -u RA_BENCH_REEXEC OPENBLAS_CORETYPE=Haswell "$RA" bench --only rope_decode_f32 \
    --repeats 1 >"$TMP/stdout" 2>&1 &&
    grep -q "re-ran itself without OPENBLAS_CORETYPE=Haswell" "$TMP/stdout"; then pass
else fail "bench re-runs itself without OPENBLAS_CORETYPE: $(head -c 400 "$TMP/stdout")"; fi

# ---- bad input: exit 1..127, one line on stderr, no output ------------------
expect_error "missing input file" y.npy -- attention --weights seed_F32.safetensors \
    --input nope.npy --output y.npy --n-heads 4
expect_error "missing weights file" y.npy -- attention --weights nope.safetensors \
    --input x.npy --output y.npy --n-heads 4
expect_error "truncated npy" y.npy -- attention --weights seed_F32.safetensors \
    --input truncated.npy --output y.npy --n-heads 4
expect_error "bad npy magic" y.npy -- attention --weights seed_F32.safetensors \
    --input badmagic.npy --output y.npy --n-heads 4
expect_error "npy with the wrong dim" y.npy -- attention --weights seed_F32.safetensors \
    --input wrongdim.npy --output y.npy --n-heads 4
expect_error "float64 input" y.npy -- attention --weights seed_F32.safetensors \
    --input f64.npy --output y.npy --n-heads 4
expect_error "4-D attention input" y.npy -- attention --weights seed_F32.safetensors \
    --input x4d.npy --output y.npy --n-heads 4
expect_error "safetensors header length beyond the file" y.npy -- attention \
    --weights st_badlen.safetensors --input x.npy --output y.npy --n-heads 4
expect_error "safetensors data offsets outside the file" y.npy -- attention \
    --weights st_badoffsets.safetensors --input x.npy --output y.npy --n-heads 4
expect_error "an npy file given as weights" y.npy -- attention \
    --weights x.npy --input x.npy --output y.npy --n-heads 4
expect_error "missing tensor" y.npy -- attention --weights st_missing.safetensors \
    --input x.npy --output y.npy --n-heads 4
expect_error "no attention tensors" y.npy -- attention --weights st_notensors.safetensors \
    --input x.npy --output y.npy --n-heads 4
expect_error "I32 weights" y.npy -- attention --weights st_i32.safetensors \
    --input x.npy --output y.npy --n-heads 4
expect_error "weights of the wrong shape" y.npy -- attention --weights st_badshape.safetensors \
    --input x.npy --output y.npy --n-heads 4 --n-kv-heads 2
expect_error "--n-heads not dividing dim" y.npy -- attention $SEED --n-heads 3
expect_error "--n-kv-heads not dividing n_heads" y.npy -- attention $SEED --n-heads 4 --n-kv-heads 3
expect_error "--n-kv-heads not matching wk" y.npy -- attention $SEED --n-heads 4 --n-kv-heads 4
expect_error "no --n-heads and no --config" y.npy -- attention $SEED
expect_error "config hidden_size differs from dim" y.npy -- attention $SEED \
    --config config_bad_hidden.json
expect_error "missing config file" y.npy -- attention $SEED --config nope.json
expect_error "several layers and no --layer" y.npy -- attention \
    --weights hf_2layers.safetensors --input x.npy --output y.npy --n-heads 4
expect_error "--layer that is not there" y.npy -- attention \
    --weights hf_2layers.safetensors --input x.npy --output y.npy --n-heads 4 --layer 2
for bad in 0 -1 abc 2x ""; do
    expect_error "--threads '$bad'" y.npy -- attention $SEED --n-heads 4 --threads "$bad"
done
expect_error "--theta 0" y.npy -- attention $SEED --n-heads 4 --theta 0
expect_error "--theta nan" y.npy -- attention $SEED --n-heads 4 --theta nan
expect_error "--layout sideways" y.npy -- attention $SEED --n-heads 4 --layout sideways
expect_error "--path fast" y.npy -- attention $SEED --n-heads 4 --path fast
expect_error "--start-pos -1" y.npy -- attention $SEED --n-heads 4 --start-pos -1
expect_error "--n-heads with no value" y.npy -- attention $SEED --n-heads
expect_error "unknown option" y.npy -- attention $SEED --n-heads 4 --frobnicate
expect_error "positional argument" y.npy -- attention $SEED --n-heads 4 extra
expect_error "missing --output" - -- attention --weights seed_F32.safetensors --input x.npy \
    --n-heads 4
expect_error "output folder that does not exist" nodir/y.npy -- attention \
    --weights seed_F32.safetensors --input x.npy --output nodir/y.npy --n-heads 4
expect_error "unknown command" - -- frobnicate
expect_error "no command" - --
expect_error "rope: odd head_dim" r.npy -- rope --input rope_odd.npy --output r.npy
expect_error "rope: 3-D input" r.npy -- rope --input rope_3d.npy --output r.npy
expect_error "rope: truncated npy" r.npy -- rope --input truncated.npy --output r.npy
expect_error "rope: --threads 0" r.npy -- rope --input rope_x.npy --output r.npy --threads 0
expect_error "rope: output folder that does not exist" nodir/r.npy -- rope \
    --input rope_x.npy --output nodir/r.npy
expect_error "freqs: odd --head-dim" c.npy -- freqs --head-dim 7 --end 4 --cos c.npy --sin s.npy
expect_error "freqs: --end 0" c.npy -- freqs --head-dim 8 --end 0 --cos c.npy --sin s.npy
expect_error "freqs: --end abc" c.npy -- freqs --head-dim 8 --end abc --cos c.npy --sin s.npy
expect_error "freqs: sin folder missing, so no cos either" c.npy -- \
    freqs --head-dim 8 --end 4 --cos c.npy --sin nodir/s.npy
mkdir -p "$TMP/a_folder"
expect_error "freqs: sin write fails, so cos is removed" c.npy -- \
    freqs --head-dim 8 --end 4 --cos c.npy --sin a_folder
expect_error "freqs: same file twice" c.npy -- freqs --head-dim 8 --end 4 --cos c.npy --sin c.npy
expect_error "demo: unknown option" - -- demo --fast
expect_error "bench: unknown case" - -- bench --only rope_nope
expect_error "bench: --repeats 0" - -- bench --repeats 0

summary
