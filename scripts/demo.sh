#!/usr/bin/env bash
# The main job: build ropeattn and run its demo, build/ropeattn-demo (a
# LLaMA-shaped attention layer on deterministic weights, both attention
# paths, RoPE's properties),
# then the same from Python (python/examples/quickstart.py, checked against
# NumPy).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh demo
make -j"$(nproc)" >/dev/null
build/ropeattn-demo
echo
make -s python >/dev/null
PYTHONPATH=python /usr/bin/python3 python/examples/quickstart.py
