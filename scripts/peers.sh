#!/usr/bin/env bash
# The README's results table (docs/guide/results.md): our arena against ExecuTorch's, TFLite
# Micro's and onnxruntime's on the same networks.
#
#   cargo build --release && scripts/peers.sh [--only resnet50 ...] [--json peers.json]
#
# Creates a venv at ${PEERS_VENV:-.peers-venv} (relative to the current directory) if it is
# missing, installs the pinned peers into it (only when the pins changed; a few GB: torch's wheel
# from the registry brings its CUDA libraries), then runs scripts/peers.py with the arguments
# given. Nothing is built here: build the binary first.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${PEERS_VENV:-.peers-venv}"
PYTHON="${PYTHON:-python3}"
# a set that resolves together on CPython 3.11, x86_64 Linux (executorch 1.5.1 wants torch 2.14)
PINS=(torch==2.14.1 torchvision==0.29.2 transformers==5.24.0 onnx==1.23.2 onnxruntime==1.32.0
      executorch==1.5.1 tflite-micro==0.dev20261023182759 litert-torch==0.10.0 onnxscript==0.7.2)

if [ ! -x "$VENV/bin/python" ]; then
    echo "peers.sh: creating venv $VENV" >&2
    "$PYTHON" -m venv "$VENV" >&2
fi
STAMP="$VENV/.peers_pins"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "${PINS[*]}" ]; then
    echo "peers.sh: installing ${PINS[*]} into $VENV" >&2
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PINS[@]}" >&2
    echo "${PINS[*]}" > "$STAMP"
fi

exec "$VENV/bin/python" "$HERE/peers.py" "$@"
