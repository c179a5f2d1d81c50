#!/usr/bin/env python3
"""onnxruntime check of plans at data-dependent bounds.

    python scripts/ort_bounds.py --bin target/release/onnx-memplan --dir DIR --out OUT

DIR holds models and manifest.json written by scripts/make_detection_models.py. For every model:
plans it (no --dim: the data-dependent counts at their bounds) and verifies the table; for each
of the manifest's `cases` (input values overriding scripts/ort_check.py's seeded feeds; one case
of the seeded feeds alone without), runs the model in onnxruntime with every tensor exposed as
an output, and checks that every tensor's actual shape
is, axis by axis, at most the shape the table plans it at (so its actual bytes fit its slot),
that at least one data-dependent count falls strictly below its bound, and that the annotated
model gives bit-identical outputs. Exits 1 if any check failed.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_check import bit_equal, input_shapes, make_feeds, run  # noqa: E402


def exposed(model):
    """The model with every node output also a graph output (types left to onnxruntime)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for node in m.graph.node:
        for name in node.output:
            if name and name not in have:
                m.graph.output.append(onnx.ValueInfoProto(name=name))
                have.add(name)
    return m.SerializeToString()


def check(path, out_dir, binary, cases):
    name = os.path.basename(path)
    stem = name[: -len(".onnx")]
    out = os.path.join(out_dir, f"{stem}.memplan.onnx")
    table_path = os.path.join(out_dir, f"{stem}.memplan.json")
    subprocess.run([binary, "plan", path, "-o", out, "-q"], check=True)
    subprocess.run([binary, "verify", path, table_path], check=True, capture_output=True)
    with open(table_path) as f:
        table = json.load(f)
    model = onnx.load(path)
    shapes, _ = input_shapes(model, {})
    planned = {t["name"]: t for t in table["tensors"]}
    problems, below = [], 0
    for values in cases:
        feeds = make_feeds(model, shapes, seed=0)
        for k, v in values.items():
            feeds[k] = np.array(v, dtype=feeds[k].dtype).reshape(feeds[k].shape)
        actual = run(exposed(model), feeds, 1)
        for tensor, value in actual.items():
            entry = planned.get(tensor)
            if entry is None or entry.get("shape") is None:
                continue
            shape = list(np.shape(value))
            if len(shape) != len(entry["shape"]) or any(a > b for a, b in zip(shape, entry["shape"])):
                problems.append(f"{tensor}: actual shape {shape} exceeds the planned {entry['shape']}")
            if value.nbytes > entry["bytes"]:
                problems.append(f"{tensor}: {value.nbytes} bytes exceed the planned {entry['bytes']}")
            below += entry.get("upper_bound", False) and value.nbytes < entry["bytes"]
        original = run(path, feeds, 1)
        annotated = run(out, feeds, 1)
        for k, v in original.items():
            if not bit_equal(v, annotated[k]):
                problems.append(f"output {k} differs in the annotated model")
    if not below:
        problems.append("no data-dependent size fell below its bound: the inputs test nothing")
    counts = ", ".join(f"{d['symbol']} <= {d['bound']}" for d in table.get("data_dependent", []))
    status = "FAIL" if problems else "PASS"
    print(f"{status} {name}: {counts}; {len(cases)} input(s), {below} tensor(s) below their "
          f"planned size; arena {table['arenas'][0]['bytes']} bytes")
    for p in problems:
        print(f"    {p}")
    return not problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.dir, "manifest.json")) as f:
        manifest = json.load(f)
    failed = 0
    for name in sorted(os.listdir(a.dir)):
        if name.endswith(".onnx"):
            cases = manifest.get(name, {}).get("cases", [{}])
            failed += not check(os.path.join(a.dir, name), a.out, a.bin, cases)
    print(f"ort_bounds: {failed} failed model(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
