#!/usr/bin/env python3
"""onnxruntime check of plans at data-dependent bounds, and the plans run inside their arena.

    python scripts/ort_bounds.py --bin target/release/onnx-memplan --dir DIR --out OUT [--only GLOB...]

DIR holds models and manifest.json written by scripts/make_detection_models.py (or any folder of
models, /work/zoo say, with --only choosing among them). For every model: plans it (no --dim:
the data-dependent counts at their bounds) and verifies the table; for each of the manifest's
`cases` (input values overriding scripts/ort_check.py's seeded feeds; one case of the seeded
feeds alone without):
  - runs the model in onnxruntime with every tensor exposed as an output, and checks that every
    tensor's actual shape is, axis by axis, at most the shape the table plans it at (so its
    actual bytes fit its slot);
  - checks that the annotated model gives bit-identical outputs;
  - runs the annotated model for real inside one buffer at the table's offsets
    (scripts/arena_run.py: node by node, dead tensors' bytes poisoned): its outputs must be
    bit-identical to onnxruntime's.
Over the cases, at least one data-dependent size must fall strictly below its bound, and for a
model the manifest gives cases, one must also reach it. Exits 1 if any check failed.
"""
import fnmatch
import json
import os
import subprocess
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from arena_run import run_in_arena  # noqa: E402
from check_cli import parser  # noqa: E402
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


def check_case(path, out, model, table, feeds):
    """Problems of one case, and how many marked tensors fell below / reached their bytes."""
    problems, below, at = [], 0, 0
    planned = {t["name"]: t for t in table["tensors"]}
    for tensor, value in run(exposed(model), feeds, 1).items():
        entry = planned.get(tensor)
        if entry is None or entry.get("shape") is None:
            continue
        shape = list(np.shape(value))
        if len(shape) != len(entry["shape"]) or any(a > b for a, b in zip(shape, entry["shape"])):
            problems.append(f"{tensor}: actual shape {shape} exceeds the planned {entry['shape']}")
        if value.nbytes > entry["bytes"]:
            problems.append(f"{tensor}: {value.nbytes} bytes exceed the planned {entry['bytes']}")
        if entry.get("upper_bound", False):
            below += value.nbytes < entry["bytes"]
            at += value.nbytes == entry["bytes"] > 0
    original = run(path, feeds, 1)
    annotated = run(out, feeds, 1)
    for k, v in original.items():
        if not bit_equal(v, annotated[k]):
            problems.append(f"output {k} differs in the annotated model")
    problem, info = run_in_arena(onnx.load(out), table, feeds)
    if problem or info.get("skipped"):
        problems.append(f"arena run: {problem or 'not run: ' + info['skipped']}")
    else:
        for k, v in original.items():
            if not bit_equal(v, info["outputs"].get(k)):
                problems.append(f"output {k} from the arena differs from onnxruntime's")
    return problems, below, at


def check(path, out_dir, binary, cases, needs_at_bound):
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
    problems, below, at = [], 0, 0
    for values in cases:
        feeds = make_feeds(model, shapes, seed=0)
        for k, v in values.items():
            feeds[k] = np.array(v, dtype=feeds[k].dtype).reshape(feeds[k].shape)
        p, b, a = check_case(path, out, model, table, feeds)
        problems += p
        below += b
        at += a
    if not below:
        problems.append("no data-dependent size fell below its bound: the inputs test nothing")
    if needs_at_bound and not at:
        problems.append("no data-dependent size reached its bound")
    counts = ", ".join(f"{d['symbol']} <= {d['bound']}" for d in table.get("data_dependent", []))
    if len(counts) > 200:
        counts = f"{len(table['data_dependent'])} counts"
    status = "FAIL" if problems else "PASS"
    print(f"{status} {name}: {counts}; {len(cases)} input(s), {below} tensor(s) below and {at} "
          f"at their planned size; ran inside the arena of {table['arenas'][0]['bytes']} bytes")
    for p in problems:
        print(f"    {p}")
    return not problems


def main():
    ap = parser(__doc__)
    ap.add_argument("--only", nargs="*", help="glob patterns choosing models of DIR")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    manifest_path = os.path.join(a.dir, "manifest.json")
    manifest = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
    failed = 0
    for name in sorted(os.listdir(a.dir)):
        if not name.endswith(".onnx") or name.endswith(".memplan.onnx"):
            continue
        if a.only and not any(fnmatch.fnmatch(name, p) for p in a.only):
            continue
        cases = manifest.get(name, {}).get("cases")
        failed += not check(os.path.join(a.dir, name), a.out, a.bin, cases or [{}], bool(cases))
    print(f"ort_bounds: {failed} failed model(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
