#!/usr/bin/env bash
# test_cli_crash.sh — hostile inputs that once ended ropeattn with a signal
# (SIGSEGV, SIGFPE) or a hang: layer numbers written oddly, zero-sized
# tensors and inputs, head counts that do not divide, and every subcommand
# under an address-space limit (ulimit -v), where OpenBLAS 0.3.21 retried its
# buffer allocation forever.  Each must end with an exit code in 1..127,
# exactly one line on stderr starting "ropeattn: " and no output file.
#
# Prints "cli_crash: N passed, N failed" last; exits 1 if anything failed.
SUITE=cli_crash
source "$(dirname "$0")/shell_common.sh"
require_ropeattn_and_numpy

"$PY" - "$TMP" <<'PYEOF' || { fail "fixture generation"; summary; }
import json, struct, sys
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(0)
def st(path, tensors):
    header, data, at = {}, b"", 0
    for name, shape in tensors:
        raw = (rng.standard_normal(int(np.prod(shape))) * 0.1).astype(np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [at, at + len(raw)]}
        data += raw; at += len(raw)
    text = json.dumps(header).encode(); text += b" " * (-len(text) % 8)
    open(f"{out}/{path}", "wb").write(struct.pack("<Q", len(text)) + text + data)
def layer(prefix, q=(64, 64), k=(32, 64), v=(32, 64), o=(64, 64)):
    return [(prefix + "q_proj.weight", q), (prefix + "k_proj.weight", k),
            (prefix + "v_proj.weight", v), (prefix + "o_proj.weight", o)]
for tag, number in [("lead0", "007"), ("beyond_int64", "99999999999999999999"),
                    ("missing", ""), ("plus", "+1"), ("minus", "-1")]:
    st(f"layer_{tag}.safetensors", layer(f"model.layers.{number}.self_attn."))
st("layer_lead0_and_7.safetensors",
   layer("model.layers.007.self_attn.") + layer("model.layers.7.self_attn."))
st("good.safetensors", layer(""))
st("q_rows0.safetensors", layer("", q=(0, 64), o=(64, 0)))
st("q_cols0.safetensors", layer("", q=(64, 0), k=(32, 0), v=(32, 0), o=(0, 64)))
st("all0.safetensors", layer("", q=(0, 0), k=(0, 0), v=(0, 0), o=(0, 0)))
st("k_rows0.safetensors", layer("", k=(0, 64), v=(0, 64)))
np.save(f"{out}/x.npy", rng.standard_normal((2, 5, 64)).astype(np.float32))
np.save(f"{out}/x_tokens0.npy", np.zeros((2, 0, 64), np.float32))
np.save(f"{out}/x_dim0.npy", np.zeros((2, 5, 0), np.float32))
np.save(f"{out}/r.npy", rng.standard_normal((2, 5, 4, 16)).astype(np.float32))
np.save(f"{out}/r_dim0.npy", np.zeros((2, 5, 4, 0), np.float32))
np.save(f"{out}/pos_nan.npy", np.array([0, np.nan, 2, 3, 4], np.float32))
np.save(f"{out}/pos_negative.npy", np.array([0, -1, 2, 3, 4], np.int64))
for name, config in [("heads128", {"num_attention_heads": 128}),
                     ("kv3", {"num_attention_heads": 4, "num_key_value_heads": 3}),
                     ("head_dim2", {"num_attention_heads": 4, "head_dim": 2})]:
    json.dump(config, open(f"{out}/{name}.json", "w"))
PYEOF
cd "$TMP"

# expect_error NAME OUTPUT -- ARGS...: ropeattn ARGS must fail cleanly (exit
# 1..127, one "ropeattn: " line) and leave OUTPUT absent.
expect_error() {
    local name=$1 out=$2; shift 3
    rm -f "$out"
    "$RA" "$@" >"$TMP/stdout" 2>"$TMP/stderr"
    local rc=$?
    if [ "$rc" -lt 1 ] || [ "$rc" -gt 127 ]; then fail "$name: exit code $rc"
    elif [ "$(wc -l <"$TMP/stderr")" -ne 1 ] || ! grep -q '^ropeattn: ' "$TMP/stderr"; then
        fail "$name: expected one 'ropeattn: ' line on stderr, got: $(head -c 400 "$TMP/stderr")"
    elif [ -e "$out" ]; then fail "$name: left $out behind"
    else pass
    fi
}
# expect_message NAME PATTERN -- ARGS...: expect_error on y.npy, and the line
# matches PATTERN.
expect_message() {
    local name=$1 pattern=$2; shift 3
    local before=$failed
    expect_error "$name" y.npy -- "$@"
    [ "$failed" -ne "$before" ] && return
    if grep -q -- "$pattern" "$TMP/stderr"; then pass
    else fail "$name: expected /$pattern/, got: $(head -c 300 "$TMP/stderr")"; fi
}

ATT="attention --input x.npy --output y.npy --n-heads 4 --theta 10000"
CONV="convert-layout --output y.npy --to half --n-heads 4"

# ---- layer numbers: not canonical decimal, refused naming the tensor --------
for tag in lead0 beyond_int64 missing plus minus lead0_and_7; do
    expect_message "attention, layer number $tag" "layer_$tag.safetensors has a malformed layer number" -- \
        $ATT --weights layer_$tag.safetensors
    expect_message "attention --layer 7, layer number $tag" "malformed layer number" -- \
        $ATT --weights layer_$tag.safetensors --layer 7
    expect_message "convert-layout --layer 7, layer number $tag" "malformed layer number" -- \
        $CONV --weights layer_$tag.safetensors --layer 7
done

# ---- zero-sized tensors and inputs, head counts that do not divide ----------
expect_message "attention, wq [0, 64]" "shape \[0, 64\]: it is empty" -- $ATT --weights q_rows0.safetensors
expect_message "attention, wq [64, 0]" "shape \[64, 0\]: it is empty" -- $ATT --weights q_cols0.safetensors
expect_message "attention, wk [0, 64]" "shape \[0, 64\]: it is empty" -- $ATT --weights k_rows0.safetensors
expect_message "attention, every weight [0, 0], X dim 0" "it is empty" -- \
    attention --weights all0.safetensors --input x_dim0.npy --output y.npy --n-heads 4 --theta 10000
for config in heads128 kv3 head_dim2; do
    expect_message "attention, weights [0, 0], config $config" "it is empty" -- \
        attention --weights all0.safetensors --input x_dim0.npy --output y.npy --config $config.json
done
expect_message "attention, 0 tokens" "is empty" -- \
    attention --weights good.safetensors --input x_tokens0.npy --output y.npy --n-heads 4 \
    --theta 10000
expect_message "attention, X dim 0" "last axis 0" -- \
    attention --weights good.safetensors --input x_dim0.npy --output y.npy --n-heads 4 --theta 10000 \
    --layout half
expect_message "convert-layout, wq [0, 64]" "0 rows, not a positive multiple" -- \
    $CONV --weights q_rows0.safetensors
expect_message "convert-layout, wq [64, 0]" "q_proj.weight" -- $CONV --weights q_cols0.safetensors
expect_message "rope, head_dim 0" "is empty" -- rope --input r_dim0.npy --output y.npy
expect_message "rope, NaN positions" "int32" -- rope --input r.npy --output y.npy --positions pos_nan.npy
expect_message "attention, negative position" "outside" -- \
    $ATT --weights good.safetensors --positions pos_negative.npy

# ---- address-space limits: a clear line or success, never a hang -----------
# ASan and valgrind cannot run under ulimit -v.
if [ -n "${RA_CLI_WRAPPER:-}" ] || grep -qa __asan_init "$RA"; then
    echo "cli_crash: the ulimit -v cases skipped (sanitizer or valgrind build)"
else
    # limited NAME KB -- ARGS...: ropeattn ARGS under ulimit -v KB must end
    # within 60 s with 0, or with 1..127 and one "ropeattn: " line.
    limited() {
        local name=$1 kb=$2; shift 3
        rm -f y.npy c.npy s.npy
        (ulimit -v "$kb" && exec timeout -s KILL 60 "$RA" "$@") >/dev/null 2>"$TMP/stderr"
        local rc=$?
        if [ "$rc" -eq 0 ]; then pass
        elif [ "$rc" -gt 127 ]; then fail "$name under ulimit -v $kb: exit $rc (a signal or a hang)"
        elif [ "$(wc -l <"$TMP/stderr")" -ne 1 ] || ! grep -q '^ropeattn: ' "$TMP/stderr"; then
            fail "$name under ulimit -v $kb: exit $rc with: $(head -c 300 "$TMP/stderr")"
        else pass
        fi
    }
    for kb in 60000 120000 250000; do
        limited attention $kb -- attention --weights good.safetensors --input x.npy \
            --output y.npy --n-heads 4 --theta 10000
        limited "attention, 1 thread" $kb -- \
            attention --weights good.safetensors --input x.npy --output y.npy --n-heads 4 \
            --theta 10000 --threads 1
        limited rope $kb -- rope --input r.npy --output y.npy
        limited freqs $kb -- freqs --end 100 --head-dim 16 --cos c.npy --sin s.npy
        limited convert-layout $kb -- $CONV --weights good.safetensors
        RA=$RA_DEMO limited demo $kb --
        RA=$RA_TRAIN_DEMO limited train-demo $kb -- --steps 5
        RA=$RA_BENCH limited bench $kb -- --only rope --repeats 1 --no-torch
    done
    for kb in 600000 2000000; do
        limited attention $kb -- attention --weights good.safetensors --input x.npy \
            --output y.npy --n-heads 4 --theta 10000
        limited rope $kb -- rope --input r.npy --output y.npy
        limited freqs $kb -- freqs --end 100 --head-dim 16 --cos c.npy --sin s.npy
    done
fi

summary
