#!/usr/bin/env bash
# test_python.sh — the Python package (python/) as a user installs it: a
# venv in $TMP over Debian's packages (--system-site-packages: numpy,
# pytest), `pip install --no-index --no-build-isolation ./python` into it
# (offline; the extension links build/libropeattn_hf.a and
# build/libropeattn.a), then pytest on python/tests (test_layer.py finds the
# checkpoints of tests/hf from its own path) and the examples, run from
# $TMP so that the installed package is the one imported.  Skipped for a
# sanitizer build ($BUILD other than build): the extension links the plain
# libraries, whatever $BUILD is.
# Prints "python: N passed, N failed" last, N pytest's counts (and one for
# the install); exits 1 if anything failed.
SUITE=python
source "$(dirname "$0")/shell_common.sh"

# The install lines of README.md and python/README.md are the ones run
# below: a venv of Debian's /usr/bin/python3 (another python3 on PATH has
# no numpy for the build), pip offline (--no-index --no-build-isolation).
for doc in README.md python/README.md; do
    if grep -q '^/usr/bin/python3 -m venv --system-site-packages venv' "$doc" &&
        grep -q '^venv/bin/pip install --no-index --no-build-isolation \./python' "$doc" &&
        ! grep -E '^(python3 -m venv|venv/bin/pip install)' "$doc" |
            grep -vqE '^(/usr/bin/python3 -m venv|venv/bin/pip install --no-index --no-build-isolation)'; then
        pass
    else fail "$doc: its install lines are not the ones this test runs"; fi
done

if [ "$BUILD" != "$PWD/build" ]; then
    echo "SKIPPED python: $BUILD is a sanitizer build; the extension links the plain build/libropeattn.a"
    summary
fi
if ! "$PY" -c 'import numpy, pytest, ensurepip, torch' 2>/dev/null; then
    fail "$PY with numpy, pytest, venv and torch is required (bash scripts/install-deps.sh)"
    summary
fi

venv=$TMP/venv
if ! "$PY" -m venv --system-site-packages "$venv" >"$TMP/venv.log" 2>&1; then
    cat "$TMP/venv.log"; fail "python3 -m venv"; summary
fi
if ! "$venv/bin/pip" install -q --no-index --no-build-isolation ./python >"$TMP/pip.log" 2>&1; then
    cat "$TMP/pip.log"; fail "pip install ./python"; summary
fi
where=$(cd "$TMP" && "$venv/bin/python" -c 'import ropeattn; print(ropeattn.__file__)')
case $where in
    "$venv"/*) pass ;;
    *) fail "import ropeattn found $where, not the venv's" ;;
esac

(cd "$TMP" && "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    --junitxml="$TMP/junit.xml" "$OLDPWD/python/tests")
counts=$("$PY" - "$TMP/junit.xml" <<'PY' 2>/dev/null
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suite = root if root.tag == "testsuite" else root.find("testsuite")
tests, failures = (int(suite.get(a)) for a in ("tests", "failures"))
errors, skipped = int(suite.get("errors")), int(suite.get("skipped"))
print(tests - failures - errors - skipped, failures + errors)
PY
)
if [ -z "$counts" ]; then
    fail "pytest wrote no results ($TMP/junit.xml)"
else
    passed=$((passed + ${counts% *})); failed=$((failed + ${counts#* }))
fi
# Each example (python/examples) runs and exits 0 with the installed package.
for example in python/examples/*.py; do
    if (cd "$TMP" && "$venv/bin/python" "$OLDPWD/$example") >"$TMP/example.out" 2>&1; then pass
    else cat "$TMP/example.out"; fail "$example"; fi
done
summary
