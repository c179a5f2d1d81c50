#!/usr/bin/env bash
# Builds the fuzz targets' seed corpora in fuzz/corpus/ from models/ and real tables (see
# fuzz/seeds.py), plus ../shared's conformance models and MiniMalloc traces when present.
#
#   fuzz/seeds.sh --bin target/release/onnx-memplan
#
# Run from the repository root. Uses the venv at ${VENV:-.ci/venv} (created if missing, with
# onnx installed into it).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${VENV:-.ci/venv}"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    echo "seeds.sh: creating venv $VENV" >&2
    "$PYTHON" -m venv "$VENV" >&2
fi
if ! "$VENV/bin/python" -c "import onnx" 2>/dev/null; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check onnx==1.23.2 >&2
fi
exec "$VENV/bin/python" "$HERE/seeds.py" --shared "$HERE/../../shared" "$@"
