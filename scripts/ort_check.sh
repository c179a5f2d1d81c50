#!/usr/bin/env bash
# onnxruntime conformance check for onnx-memplan (see scripts/ort_check.py for what it checks).
#
#   scripts/ort_check.sh --bin target/release/onnx-memplan --models models --out "$(mktemp -d)"
#
# Creates a venv at ${VENV:-.ci/venv} (relative to the current directory) if it is missing, installs
# the pinned onnx / onnxruntime / numpy into it (only when the pins changed), then runs ort_check.py
# with the arguments given. Nothing is built here: build the binary first.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${VENV:-.ci/venv}"
PYTHON="${PYTHON:-python3}"
# versions that install as wheels on CPython 3.11 (x86_64 and aarch64 Linux)
PINS=(onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6)

if [ ! -x "$VENV/bin/python" ]; then
    echo "ort_check.sh: creating venv $VENV" >&2
    if ! "$PYTHON" -m venv "$VENV" >&2; then
        # Debian's python3 needs python3-venv for ensurepip
        if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
            rm -rf "$VENV"
            apt-get install -y -qq python3-venv >&2 || { apt-get update -qq >&2 && apt-get install -y -qq python3-venv >&2; }
            "$PYTHON" -m venv "$VENV" >&2
        else
            echo "ort_check.sh: '$PYTHON -m venv' failed (install python3-venv)" >&2
            exit 1
        fi
    fi
fi

STAMP="$VENV/.ort_check_pins"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "${PINS[*]}" ]; then
    echo "ort_check.sh: installing ${PINS[*]} into $VENV" >&2
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PINS[@]}" >&2
    echo "${PINS[*]}" > "$STAMP"
fi

exec "$VENV/bin/python" "$HERE/ort_check.py" "$@"
