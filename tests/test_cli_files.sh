#!/usr/bin/env bash
# test_cli_files.sh — what the CLI does to files: every output replaced or
# none, never an input replaced, only regular files replaced (keeping their
# permission bits), inputs that are not regular files refused without
# blocking, signals and limits that leave no temporary file behind, and
# messages that stay one line.  Each failing run must exit 1..127 (128 + the
# signal for one that a signal ended), print exactly one "ropeattn: " line,
# and leave every file as it was.
#
# Prints "cli_files: N passed, N failed" last; exits 1 if anything failed.
SUITE=cli_files
source "$(dirname "$0")/shell_common.sh"
require_ropeattn_and_numpy
cd "$TMP"

# A seed-named checkpoint (dim 64, 4 heads), X [2, 5, 64], DY, positions and
# a config; and a sharded copy of the checkpoint (wq, wk | wv, wo).
"$PY" - <<'EOF'
import json, struct
import numpy as np
rng = np.random.default_rng(7)
def write_safetensors(path, tensors):
    header, data = {}, b""
    for name, a in tensors:
        raw = a.astype(np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
w = [(n, rng.standard_normal((64, 64)) / 8) for n in ("wq.weight", "wk.weight", "wv.weight", "wo.weight")]
write_safetensors("w.safetensors", w)
write_safetensors("shard1.safetensors", w[:2])
write_safetensors("shard2.safetensors", w[2:])
json.dump({"weight_map": {"wq.weight": "shard1.safetensors", "wk.weight": "shard1.safetensors",
                          "wv.weight": "shard2.safetensors", "wo.weight": "shard2.safetensors"}},
          open("index.json", "w"))
np.save("x.npy", rng.standard_normal((2, 5, 64)).astype(np.float32))
np.save("dy.npy", rng.standard_normal((2, 5, 64)).astype(np.float32))
np.save("pos.npy", np.arange(5, dtype=np.int64))
np.save("q.npy", rng.standard_normal((2, 5, 4, 16)).astype(np.float32))
json.dump({"hidden_size": 64, "num_attention_heads": 4, "rope_theta": 10000.0}, open("config.json", "w"))
EOF
ATTN=(attention --weights w.safetensors --input x.npy --n-heads 4)
GRADS=(--grad-output dy.npy --grads g.safetensors)

# fingerprint FILE...: type, permission bits and content of each file.
fingerprint() {
    local f
    for f in "$@"; do
        if [ -L "$f" ]; then echo "$f -> $(readlink "$f")"; fi
        stat -L -c '%n %F %a' "$f" 2>/dev/null || echo "$f absent"
        [ -f "$f" ] && cksum <"$f"
    done
}
temps_left() { ls -A "$@" 2>/dev/null | grep -c '^\.ropeattn-'; }

# refused NAME FILES -- ARGS...: ropeattn ARGS must fail (exit 1..127) with
# one "ropeattn: " line (matching $EXPECT when it is set), leave each of FILES
# as it was and no temporary file in this folder.  The command runs under the
# prefix in the array PREFIX, if set.
PREFIX=()
EXPECT=
refused() {
    local name=$1; shift
    local files=()
    while [ "$1" != "--" ]; do files+=("$1"); shift; done
    shift
    local before after rc
    before=$(fingerprint "${files[@]}")
    timeout 60 "${PREFIX[@]}" "$RA" "$@" 2>"$TMP/stderr" >/dev/null
    rc=$?
    after=$(fingerprint "${files[@]}")
    if [ "$rc" -eq 124 ]; then fail "$name: still running after 60 s"
    elif [ "$rc" -lt 1 ] || [ "$rc" -gt 127 ]; then fail "$name: exit $rc, expected 1..127"
    elif [ "$(wc -l <"$TMP/stderr")" -ne 1 ] || ! grep -q '^ropeattn: ' "$TMP/stderr"; then
        fail "$name: expected one 'ropeattn: ' line, got: $(cat "$TMP/stderr")"
    elif [ -n "$EXPECT" ] && ! grep -q "$EXPECT" "$TMP/stderr"; then
        fail "$name: expected /$EXPECT/, got: $(cat "$TMP/stderr")"
    elif [ "$before" != "$after" ]; then fail "$name: files changed: $before => $after"
    elif [ "$(temps_left .)" -ne 0 ]; then fail "$name: temporary files left: $(ls -A)"
    else pass
    fi
}

# Old outputs to be kept or replaced.
reset_outputs() {
    echo old-y >y.npy; echo old-g >g.safetensors; echo old-cos >cos.npy; echo old-sin >sin.npy
}
reset_outputs

# ---- 1. all outputs or none ------------------------------------------------
# Y (2.7 kB) fits under an 8 KiB file size limit; G (68 kB) does not: the write
# of the second output fails (EFBIG, not SIGXFSZ), and neither old file changes.
# Under a wrapper the limit would also cut valgrind's own log short: skipped.
if [ -z "${RA_CLI_WRAPPER:-}" ]; then
PREFIX=(sh -c 'ulimit -f 8; exec "$@"' sh) EXPECT='g.safetensors: cannot write file: File too large'
refused "second output over the file size limit" y.npy g.safetensors -- \
    "${ATTN[@]}" --output y.npy "${GRADS[@]}"
PREFIX=(sh -c 'ulimit -f 1; exec "$@"' sh) EXPECT='cos.npy: cannot write file: File too large'
refused "first output over the file size limit" cos.npy sin.npy -- \
    freqs --end 4096 --head-dim 64 --cos cos.npy --sin sin.npy
else
    echo "SKIPPED file size limits: under a wrapper (its log would hit the limit)"
fi
PREFIX=() EXPECT=
mkdir -p folder.safetensors
refused "a folder in the way of the second output" y.npy folder.safetensors -- \
    "${ATTN[@]}" --output y.npy --grad-output dy.npy --grads folder.safetensors
refused "a folder in the way of --sin" cos.npy folder.safetensors -- \
    freqs --end 4 --head-dim 8 --cos cos.npy --sin folder.safetensors
refused "the second output's folder missing" cos.npy -- \
    freqs --end 4 --head-dim 8 --cos cos.npy --sin no/such/folder/sin.npy
# A full disk: a 64 KiB tmpfs (where this machine lets root mount one).
mkdir -p full
if mount -t tmpfs -o size=64k tmpfs full 2>/dev/null; then
    echo small >full/cos.npy; echo small >full/sin.npy
    refused "a full disk" full/cos.npy full/sin.npy -- \
        freqs --end 4096 --head-dim 16 --cos full/cos.npy --sin full/sin.npy
    if [ "$(temps_left full)" -ne 0 ]; then fail "full disk: temporary files left in it"; else pass; fi
    umount full
else
    echo "SKIPPED full disk: cannot mount a tmpfs here"
fi
# Success replaces both.
"$RA" "${ATTN[@]}" --output y.npy "${GRADS[@]}" 2>"$TMP/stderr"
if [ $? -eq 0 ] && [ "$(head -c 6 y.npy)" = $'\x93NUMPY' ] && [ -s g.safetensors ] &&
    [ "$(temps_left .)" -eq 0 ]; then pass
else fail "attention --grads: both outputs written: $(cat "$TMP/stderr")"
fi

# ---- 2. outputs never alias inputs ----------------------------------------
ln -sf w.safetensors wlink.safetensors
ln -f w.safetensors whard.safetensors
refused "--output is --weights" w.safetensors -- "${ATTN[@]}" --output w.safetensors
refused "--output is a symlink to --weights" w.safetensors -- "${ATTN[@]}" --output wlink.safetensors
refused "--output is a hard link to --weights" w.safetensors -- "${ATTN[@]}" --output whard.safetensors
refused "--grads is a shard of --weights INDEX" shard1.safetensors shard2.safetensors -- \
    attention --weights index.json --input x.npy --n-heads 4 --output y.npy --grad-output dy.npy \
    --grads shard2.safetensors
refused "--output is the index" index.json -- \
    attention --weights index.json --input x.npy --n-heads 4 --output index.json
refused "--output is --config" config.json -- \
    attention --weights w.safetensors --input x.npy --config config.json --output config.json
refused "--output is --positions" pos.npy -- "${ATTN[@]}" --positions pos.npy --output pos.npy
refused "--grads is --grad-output" dy.npy -- "${ATTN[@]}" --output y.npy --grad-output dy.npy --grads ./dy.npy
refused "--output is --grads" y.npy -- "${ATTN[@]}" --output y.npy --grad-output dy.npy --grads y.npy
ln -f q.npy qhard.npy
refused "rope --output is a hard link to --input" q.npy -- rope --input q.npy --output qhard.npy
refused "freqs --cos is --positions" pos.npy -- freqs --positions pos.npy --head-dim 8 --cos pos.npy --sin sin.npy
refused "freqs --cos is --sin through ./" cos.npy -- freqs --end 4 --head-dim 8 --cos cos.npy --sin ./cos.npy
refused "convert-layout --output is a symlink to --weights" w.safetensors -- \
    convert-layout --weights w.safetensors --output wlink.safetensors --to half --n-heads 4

# ---- 3. only regular files are replaced ------------------------------------
mkfifo fifo.npy
"$PY" -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock.npy")'
ln -sf /dev/null null.npy
ln -sf fifo.npy fifolink.npy
ln -sf missing.npy dangling.npy
for out in /dev/null fifo.npy sock.npy null.npy fifolink.npy dangling.npy folder.safetensors; do
    refused "--output $out" "$out" -- rope --input q.npy --output "$out"
done
if [ -c /dev/null ]; then pass; else fail "/dev/null is no longer a device"; fi
# A replaced file keeps its permission bits; a symbolic link to a regular
# file stays a link, and the file it names is replaced.
echo old >kept.npy; chmod 640 kept.npy
ln -sf kept.npy keptlink.npy
if "$RA" rope --input q.npy --output kept.npy && [ "$(stat -c %a kept.npy)" = 640 ] &&
    "$RA" rope --input q.npy --output keptlink.npy --theta 500 && [ -L keptlink.npy ] &&
    [ "$(stat -c %a kept.npy)" = 640 ] && [ "$(head -c 6 kept.npy)" = $'\x93NUMPY' ]; then pass
else fail "permission bits or link not kept: $(ls -l kept.npy keptlink.npy)"
fi

# ---- 4. inputs that are not regular files: refused, not waited on ----------
mkfifo fifo.json fifo.safetensors
mkdir -p dir.npy
refused "--config FIFO" y.npy -- "${ATTN[@]}" --output y.npy --config fifo.json
refused "--input FIFO" y.npy -- attention --weights w.safetensors --input fifo.npy --n-heads 4 --output y.npy
refused "--positions FIFO" y.npy -- "${ATTN[@]}" --output y.npy --positions fifo.npy
refused "--weights FIFO" y.npy -- attention --weights fifo.safetensors --input x.npy --n-heads 4 --output y.npy
refused "--weights INDEX FIFO" y.npy -- attention --weights fifo.json --input x.npy --n-heads 4 --output y.npy
ln -sf fifo.safetensors shardfifo.safetensors
echo '{"weight_map": {"wq.weight": "shard1.safetensors", "wv.weight": "shardfifo.safetensors"}}' >fifoindex.json
refused "a shard that is a FIFO" y.npy -- attention --weights fifoindex.json --input x.npy --n-heads 4 --output y.npy
refused "--input folder" y.npy -- attention --weights w.safetensors --input dir.npy --n-heads 4 --output y.npy
refused "--input /dev/zero" y.npy -- attention --weights w.safetensors --input /dev/zero --n-heads 4 --output y.npy
refused "rope --input FIFO" y.npy -- rope --input fifo.npy --output y.npy
refused "freqs --config FIFO" cos.npy sin.npy -- freqs --end 4 --config fifo.json --cos cos.npy --sin sin.npy
refused "convert-layout --weights FIFO" y.npy -- convert-layout --weights fifo.safetensors --output y.npy --to half --n-heads 4

# ---- 6. signals leave nothing behind ---------------------------------------
# freqs writing 2 x 100 MB: each signal arrives at some point of the run,
# counted from when the process has its handler (its SigCgt in /proc: a
# loaded machine can take longer than a delay to start it); it must either
# finish, or end with 128 + the signal and one line, no temporary file, and
# the old files intact, or (a signal after the outputs are in place) the
# line saying so and both new files whole.  Not under a wrapper (valgrind): there the signal meets
# valgrind, and a run ended in its handler leaves OpenBLAS's threads' memory.
handler_set() { # pid signal-number: whether the process catches that signal
    local mask
    mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$mask" ] && (( (0x$mask >> ($2 - 1)) & 1 ))
}
for sig in INT TERM HUP; do
    [ -z "${RA_CLI_WRAPPER:-}" ] || break
    for delay in 0.2 0.5 0.9; do
        reset_outputs
        before=$(fingerprint cos.npy sin.npy)
        "$RA" freqs --end 400000 --head-dim 128 --cos cos.npy --sin sin.npy 2>"$TMP/stderr" &
        pid=$!
        for _ in $(seq 500); do
            handler_set "$pid" "$(kill -l "$sig")" || ! kill -0 "$pid" 2>/dev/null && break
            sleep 0.01
        done
        sleep "$delay"; kill -s "$sig" "$pid" 2>/dev/null
        wait "$pid"; rc=$?
        after=$(fingerprint cos.npy sin.npy)
        code=$((128 + $(kill -l "$sig")))
        if [ "$(temps_left .)" -ne 0 ]; then fail "SIG$sig after $delay s: temporary files left"
        elif [ "$rc" -eq 0 ]; then
            if [ -s "$TMP/stderr" ] || [ "$(head -c 6 cos.npy)" != $'\x93NUMPY' ]; then
                fail "SIG$sig after $delay s: finished, but: $(cat "$TMP/stderr")"
            else pass; fi
        elif [ "$rc" -ne "$code" ] || [ "$(wc -l <"$TMP/stderr")" -ne 1 ] ||
            ! grep -q "^ropeattn: .*SIG$sig" "$TMP/stderr"; then
            fail "SIG$sig after $delay s: exit $rc, stderr: $(cat "$TMP/stderr")"
        elif grep -q "after its outputs were written" "$TMP/stderr"; then
            if [ "$before" != "$after" ] && [ "$(head -c 6 cos.npy)" = $'\x93NUMPY' ] &&
                [ "$(head -c 6 sin.npy)" = $'\x93NUMPY' ] &&
                [ "$(stat -c %s cos.npy)" = "$(stat -c %s sin.npy)" ]; then pass
            else fail "SIG$sig after $delay s: said written, but the outputs are not whole"; fi
        elif [ "$before" != "$after" ]; then fail "SIG$sig after $delay s: old outputs changed"
        else pass
        fi
    done
done
# An output name of NAME_MAX (255) bytes: the temporary name is not longer.
long=$(printf 'y%.0s' $(seq 251)).npy
if "$RA" rope --input q.npy --output "$long" && "$RA" rope --input q.npy --output "$long" --theta 50 &&
    [ -f "$long" ] && [ "$(temps_left .)" -eq 0 ]; then pass
else fail "an output name of 255 bytes"
fi

# ---- 5. an input cut short while mapped: SIGBUS caught ---------------------
# A preloaded mmap() truncates the file it maps to its first 4 KiB page (the
# header stays whole) right after mapping it, as another process might;
# reading the tensors then faults.
if [ -z "${RA_CLI_WRAPPER:-}" ] && command -v cc >/dev/null && ! nm -D "$RA" 2>/dev/null | grep -q __asan; then
    cat >shrink.c <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    void *(*real)(void *, size_t, int, int, int, off_t) = dlsym(RTLD_NEXT, "mmap");
    void *p = real(addr, len, prot, flags, fd, off);
    const char *path = getenv("SHRINK_PATH");
    if (fd >= 0 && p != MAP_FAILED && path && truncate(path, 4096) != 0) abort();
    return p;
}
EOF
    cc -shared -fPIC -o shrink.so shrink.c -ldl
    cp w.safetensors cut.safetensors
    PREFIX=(env LD_PRELOAD="$TMP/shrink.so" SHRINK_PATH=cut.safetensors) EXPECT=SIGBUS
    refused "weights cut short while mapped" y.npy -- \
        attention --weights cut.safetensors --input x.npy --n-heads 4 --output y.npy
    PREFIX=() EXPECT=
else
    echo "SKIPPED SIGBUS: under a wrapper or a sanitizer, or no cc"
fi

# ---- 7. messages stay one line ---------------------------------------------
refused "a newline and an escape in a path" y.npy -- \
    "${ATTN[@]}" --output $'no\nsuch\033[31m/y.npy'
if grep -qF 'no\x0asuch\x1b[31m' "$TMP/stderr"; then pass; else fail "escapes: $(cat "$TMP/stderr")"; fi
refused "a C1 control in an option's value" y.npy -- "${ATTN[@]}" --output y.npy --path $'fl\xc2\x85ash'
if grep -qF 'fl\xc2\x85ash' "$TMP/stderr"; then pass; else fail "C1 escape: $(cat "$TMP/stderr")"; fi

# ---- the standard output and the environment -------------------------------
# A report that cannot be written (a full device) fails the run.
for args in "--help" "--version" "freqs --help"; do
    # shellcheck disable=SC2086
    "$RA" $args >/dev/full 2>"$TMP/stderr"; rc=$?
    if [ "$rc" -eq 1 ] && [ "$(wc -l <"$TMP/stderr")" -eq 1 ] &&
        grep -q '^ropeattn: cannot write the standard output' "$TMP/stderr"; then pass
    else fail "$args >/dev/full: exit $rc, stderr: $(cat "$TMP/stderr")"
    fi
done
# --stats's report that cannot be written (a full device, stdout closed)
# fails the run before the output is replaced; with stdout or stderr closed
# no file takes its descriptor, so no report or progress line lands in Y.
# Under a wrapper (valgrind) the wrapper's own files take the closed
# descriptors before ropeattn starts: the closed cases are skipped there.
closed=(">&-" "2>&-" "<&-")
[ -n "${RA_CLI_WRAPPER:-}" ] && closed=() && echo "SKIPPED closed descriptors: under a wrapper"
for redir in ">/dev/full" "${closed[@]:0:1}"; do
    printf 'old\n' >y.npy
    eval '"$RA" "${ATTN[@]}" --output y.npy --prefill 2 --stats 2>"$TMP/stderr" '"$redir"; rc=$?
    if [ "$rc" -eq 1 ] && [ "$(cat y.npy)" = old ] && [ "$(wc -l <"$TMP/stderr")" -eq 1 ] &&
        grep -q '^ropeattn: cannot write the standard output' "$TMP/stderr"; then pass
    else fail "--stats $redir: exit $rc, y.npy $(head -c 6 y.npy), stderr: $(cat "$TMP/stderr")"
    fi
done
"$RA" "${ATTN[@]}" --output whole.npy --prefill 2 2>/dev/null
for redir in "${closed[@]:1}"; do
    rm -f y.npy
    eval 'RA_PROGRESS_DELAY=0 "$RA" "${ATTN[@]}" --output y.npy --prefill 2 --stats >"$TMP/stats" '"$redir"
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q '^prefill: ' "$TMP/stats" && cmp -s y.npy whole.npy; then pass
    else fail "--stats $redir: exit $rc, stats $(cat "$TMP/stats"), y.npy $(wc -c <y.npy) bytes"
    fi
done
# An unknown RA_FORCE_ISA is a usage error, not ignored.
for isa in bogus AVX512 "" avx512x; do
    RA_FORCE_ISA=$isa "$RA" --version >/dev/null 2>"$TMP/stderr"; rc=$?
    if [ -z "$isa" ] && [ "$rc" -eq 0 ]; then pass # empty: as if unset
    elif [ -n "$isa" ] && [ "$rc" -eq 2 ] && [ "$(wc -l <"$TMP/stderr")" -eq 1 ] &&
        grep -q "^ropeattn: RA_FORCE_ISA must be" "$TMP/stderr"; then pass
    else fail "RA_FORCE_ISA='$isa': exit $rc, stderr: $(cat "$TMP/stderr")"
    fi
done

summary
