#!/usr/bin/env bash
# setup-hf-venv.sh — the venv of the transformers side, .venv-hf/ (ignored by
# git): PyTorch 2 and transformers from PyPI at tests/hf/requirements.txt's
# pins, for Debian's /usr/bin/python3 (whatever python3 is first on PATH), and
# this repository's Python package installed into it.  About 6 GB (PyPI's
# torch wheel brings CUDA libraries) and a minute or two; not needed by the
# demo nor by scripts/test.sh.  Run again after changing python/: it
# reinstalls the package.
#   bash scripts/setup-hf-venv.sh          (RA_HF_VENV=DIR: another place)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
VENV=${RA_HF_VENV:-$PWD/.venv-hf}
bash scripts/install-deps.sh demo        # the compiler, OpenBLAS, cJSON, Python's headers
dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q 'install ok installed' || {
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get install -y -q --no-install-recommends python3-venv
}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check -r tests/hf/requirements.txt
make -s -j"$(nproc)" build/libropeattn.a build/libropeattn_hf.a
"$VENV/bin/pip" install -q --disable-pip-version-check --no-build-isolation --no-deps \
    --force-reinstall ./python
"$VENV/bin/python" -c 'import ropeattn, torch, transformers
print(f"{ropeattn.__file__}: ropeattn {ropeattn.__version__}, torch {torch.__version__}, "
      f"transformers {transformers.__version__}")'
