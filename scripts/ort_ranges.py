#!/usr/bin/env python3
"""onnxruntime check of plans over ranges at three sizes each.

    python scripts/ort_ranges.py --bin target/release/onnx-memplan --dir DIR --out OUT

DIR holds the models and ranges.json written by scripts/make_dynamic_models.py. For every model
and each of its three points (min, middle, max), runs scripts/ort_check.py with the ranges
(`--range NAME=LO..HI`) and the point (`--dim NAME=V`): the tool plans over the ranges and writes
the plan evaluated at the point (`plan --at`), which ort_check compares with onnxruntime (dtypes,
shapes and bytes of every tensor, bit-identical outputs, the table's own consistency, and the
plan run for real inside its arenas at the table's offsets). Exits 1 if
any run failed.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_cli import parser  # noqa: E402


def main():
    a = parser(__doc__).parse_args()
    with open(os.path.join(a.dir, "ranges.json")) as f:
        manifest = json.load(f)
    check = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_check.py")
    failed = 0
    for name, spec in manifest.items():
        for i, point in enumerate(spec["points"]):
            cmd = [sys.executable, check, "--bin", a.bin, "--models", os.path.join(a.dir, name),
                   "--out", os.path.join(a.out, f"{name}.{i}"), "--dim-force"]
            for sym, (lo, hi) in spec["ranges"].items():
                cmd += ["--range", f"{sym}={lo}..{hi}"]
            for sym, v in {**spec["fixed"], **point}.items():
                cmd += ["--dim", f"{sym}={v}"]
            run = subprocess.run(cmd, capture_output=True, text=True)
            lines = [l for l in run.stdout.splitlines() if l.startswith(("PASS", "FAIL", "    "))]
            print("\n".join(lines) or run.stderr.strip(), flush=True)
            failed += run.returncode != 0
    print(f"ort_ranges: {failed} failed run(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
