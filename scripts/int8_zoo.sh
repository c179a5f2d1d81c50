#!/usr/bin/env bash
# The int8 CNN zoo of issue 31 (scripts/int8_zoo.py): torchvision CNNs with random weights,
# quantized by onnxruntime.quantization (QDQ int8, QOperator uint8), planned with and without
# `--split auto`, verified, and checked bit-identical in onnxruntime.
#
#   cargo build --release && scripts/int8_zoo.sh [--only resnet18 ...] [--out /tmp/int8_zoo]
#
# Uses the venv at ${INT8_ZOO_VENV:-/work/venvs/int8-zoo}, creating it and installing the pins
# below when it cannot import them (a few GB: torch's wheel from the registry brings its CUDA
# libraries). A venv that already has them (any versions) is used as it is, never modified.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${INT8_ZOO_VENV:-/work/venvs/int8-zoo}"
PYTHON="${PYTHON:-python3}"
PINS=(torch==2.14.1 torchvision==0.29.2 onnx==1.23.2 onnxruntime==1.32.0 numpy)

if ! "$VENV/bin/python" -c "import torch, torchvision, onnx, onnxruntime.quantization" 2>/dev/null; then
    if [ ! -x "$VENV/bin/python" ]; then
        echo "int8_zoo.sh: creating venv $VENV" >&2
        "$PYTHON" -m venv "$VENV" >&2
    fi
    echo "int8_zoo.sh: installing ${PINS[*]} into $VENV" >&2
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PINS[@]}" >&2
fi

exec "$VENV/bin/python" "$HERE/int8_zoo.py" "$@"
