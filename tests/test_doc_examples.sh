#!/usr/bin/env bash
# test_doc_examples.sh — the examples in README.md, docs/ and
# python/README.md keep working: each ```c block that is a whole program
# (it has main) is compiled (C11, -Wall -Wextra -Werror) against include/
# and the plain build's libraries and run; in every other ```c block each
# ra_/RA_ name must be one the headers declare; each ```python block runs
# with Debian's /usr/bin/python3 (numpy, torch 1.13) from the repository
# root, the package built into $TMP from python/.  A block after a line
# "<!-- example: skip, REASON -->" is not run (REASON: what it needs that
# `make test` has not, such as transformers); its names are still checked.
# Sanitizer builds skip it (the examples link the plain libraries).
SUITE=doc_examples
source "$(dirname "$0")/shell_common.sh"
if [ "$BUILD" != "$PWD/build" ]; then
    echo "SKIPPED doc_examples: $BUILD is a sanitizer build; the examples link the plain build"
    summary
fi
for lib in libropeattn.a libropeattn_hf.a; do
    [ -f "$BUILD/$lib" ] || { fail "$BUILD/$lib is not built"; summary; }
done
# Every fenced c or python block as $TMP/ex/N.{c,py}, with N.where
# (file:line) and N.skip (the reason, when marked).
mkdir -p "$TMP/ex"
awk -v dir="$TMP/ex" '
    FNR == 1 { prev = "" }
    !fence && /^```(c|python)$/ {
        fence = 1; n++; ext = substr($0, 4) == "c" ? "c" : "py"
        out = dir "/" n "." ext
        print FILENAME ":" FNR > (dir "/" n ".where")
        if (prev ~ /^<!-- example: skip/) { r = prev; sub(/^<!-- example: skip,? */, "", r); sub(/ *-->$/, "", r); print r > (dir "/" n ".skip") }
        printf "" > out; next
    }
    fence && /^```$/ { fence = 0; close(out); next }
    fence { print > out; next }
    /./ { prev = $0 }
' README.md docs/*.md docs/cli/*.md python/README.md
declared=$(cat include/*.h | grep -oE '\b(ra|RA)_[A-Za-z0-9_]+' | sort -u)
libs="$BUILD/libropeattn_hf.a $BUILD/libropeattn.a $(pkg-config --libs libcjson openblas) -lm -pthread"
python_ready=
build_python() { # the package from python/, into $TMP/py (once)
    [ -n "$python_ready" ] && return "$python_ready"
    if (cd python && "$PY" setup.py -q build_ext -b "$TMP/py" -t "$TMP/py-build") >"$TMP/py.log" 2>&1 &&
        cp python/ropeattn/*.py "$TMP/py/ropeattn/"; then python_ready=0
    else python_ready=1; fail "building the Python package: $(tail -3 "$TMP/py.log")"; fi
    return "$python_ready"
}
for src in $(ls "$TMP"/ex/*.c "$TMP"/ex/*.py 2>/dev/null | sort -V); do
    n=${src%.*} where=$(cat "${src%.*}.where")
    unknown=$(comm -23 <(grep -oE '\b(ra|RA)_[A-Za-z0-9_]+' "$src" | sort -u) <(echo "$declared") | tr '\n' ' ')
    if [ -n "$unknown" ]; then fail "$where: names no header declares: $unknown"; continue; fi
    if [ -f "$n.skip" ]; then echo "SKIPPED $where: $(cat "$n.skip")"; pass; continue; fi
    case $src in
    *.c)
        if ! grep -q 'int main' "$src"; then pass; continue; fi
        if ! cc -std=c11 -Wall -Wextra -Werror -Iinclude "$src" -o "$n" $libs 2>"$TMP/err"; then
            fail "$where: does not compile: $(head -c 600 "$TMP/err")"
        elif ! timeout 60 "$n" >"$TMP/out" 2>&1; then
            fail "$where: exits $?: $(head -c 400 "$TMP/out")"
        else pass; fi ;;
    *.py)
        build_python || continue
        if PYTHONPATH="$TMP/py" timeout 120 "$PY" "$src" >"$TMP/out" 2>&1; then pass
        else fail "$where: $(tail -c 600 "$TMP/out")"; fi ;;
    esac
done
summary
