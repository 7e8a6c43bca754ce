#!/usr/bin/env bash
# test_family_table.sh — docs/FAMILIES.md's family table and the README's
# lines on the families agree with the library's table (`ropeattn
# families`), transformers' list (tests/hf_sweep/families.json) and the
# sweep's expected verdicts (tests/hf_sweep/expected.tsv):
# tests/hf_sweep/family_table.py --check (`make families-doc` rewrites them).
# And the check fails, naming the family, when the library's table gains or
# loses a row the docs do not show.
#
# Prints "family_table: N passed, N failed" last; exits 1 if anything failed.
SUITE=family_table
source "$(dirname "$0")/shell_common.sh"
if [ ! -x "$RA" ]; then fail "$RA is not built"; summary; fi
CHECK=tests/hf_sweep/family_table.py

if "$PY" "$CHECK" "$RA" --check >"$TMP/out" 2>&1; then pass
else fail "the docs differ from the tables: $(head -c 2000 "$TMP/out")"; fi

# the README stays a user's guide of at most 300 lines (its family lines,
# written from the table, grow with it: shorten them or the prose around)
lines=$(wc -l <README.md)
if [ "$lines" -le 300 ]; then pass
else fail "README.md has $lines lines, more than 300"; fi

# a CLI whose table has one row more (zz_new), or lacks llama's
fake() { # NAME FILTER: $TMP/NAME, a ropeattn whose `families` output goes through FILTER
    printf '#!/bin/sh\n"%s" families | %s\n' "$RA" "$2" >"$TMP/$1"
    chmod +x "$TMP/$1"
}
fake more "sed '\$a zz_new\thalf\truns'"
fake less "grep -vP '^llama\\t'"
for case in "more:zz_new: missing" "less:family llama: the docs say"; do
    name=${case%%:*} want=${case#*:}
    if "$PY" "$CHECK" "$TMP/$name" --check >"$TMP/out" 2>&1; then
        fail "a table with $name rows: the check passed"
    elif grep -q "$want" "$TMP/out"; then pass
    else fail "a table with $name rows: no '$want' in: $(head -c 600 "$TMP/out")"; fi
done
summary
