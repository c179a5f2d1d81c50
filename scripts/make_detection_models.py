#!/usr/bin/env python3
"""Detection-style models with data-dependent sizes, planned at their proven bounds.

    python scripts/make_detection_models.py OUT_DIR

writes into OUT_DIR, with onnx.helper (opset 17, random weights, fixed seed):
  - nms_head.onnx: boxes [1, 100, 4] and scores [1, 3, 100] -> NonMaxSuppression (at most 10 per
    class) -> the selected boxes (Gather) scaled, and their classes and scores;
  - nonzero_gather.onnx: NonZero of x > 0 over x [4, 8] -> Transpose -> GatherND of the positive
    values -> Add;
  - topk_k.onnx: TopK of x [1, 50] with k a run-time input;
  - topk_min_k.onnx: the positive values of x [200] (NonZero, GatherND), then TopK with
    k = ReduceMin(Concat([30], count)) as torchvision's detection heads compute it (SSDlite:
    at most `topk_candidates`), so the TopK count is bounded by 30, not by the 200 positions;
  - unique.onnx: Unique of a rounded [20] vector, the values doubled and the counts;
  - compress.onnx: the rows of x [6, 5] whose sum is positive (Compress), through Relu;
  - loop_nonzero.onnx: a Loop over the NonZero count of x [16] > 0, gathering each positive
    value (scan output [count, 1]);
  - if_count.onnx: If(count == 0) over the NonZero count of x [8] > 0, the then-branch x tiled
    [32], the else-branch the positive values [count]: both branches planned, at the larger;
and manifest.json: per model the `cases` to run, each the input values replacing seeded
normal floats: inputs whose counts fall below their bounds and inputs that reach them (for
if_count, inputs taking each branch), for scripts/ort_bounds.py, which checks every tensor's
actual shape against the bound the table plans it at and runs the plan inside its arena.
"""
import argparse
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

n = helper.make_node
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def ints(name, values, shape=None):
    a = np.array(values, dtype=np.int64)
    return numpy_helper.from_array(a.reshape(shape) if shape is not None else a, name)


def floats(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.float32), name)


def out_info(name, elem, rank):
    """A graph output whose dims are data-dependent: named `<name>_<axis>`."""
    return helper.make_tensor_value_info(name, elem, [f"{name}_{i}" for i in range(rank)])


def save(out, name, nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, f"{name}.onnx"))


def nms_head(out):
    nodes = [
        n("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "thr"], ["selected"]),
        n("Slice", ["selected", "two", "three", "one"], ["box_col"]),  # [n, 1]
        n("Squeeze", ["box_col", "one"], ["box_idx"]),  # [n]
        n("Slice", ["selected", "one", "two", "one"], ["class_col"]),
        n("Squeeze", ["class_col", "one"], ["classes"]),
        n("Squeeze", ["boxes", "zero"], ["boxes2"]),  # [100, 4]
        n("Gather", ["boxes2", "box_idx"], ["picked"], axis=0),  # [n, 4]
        n("Mul", ["picked", "scale"], ["detections"]),
        n("Squeeze", ["scores", "zero"], ["scores2"]),  # [3, 100]
        n("Slice", ["selected", "one", "three", "one"], ["cls_box"]),  # [n, 2]
        n("GatherND", ["scores2", "cls_box"], ["det_scores"]),  # [n]
    ]
    inits = [ints("max_out", [10]), floats("iou", [0.5]), floats("thr", [1.5]),
             ints("zero", [0]), ints("one", [1]), ints("two", [2]), ints("three", [3]),
             floats("scale", [2.0])]
    save(out, "nms_head", nodes,
         [helper.make_tensor_value_info("boxes", F, [1, 100, 4]),
          helper.make_tensor_value_info("scores", F, [1, 3, 100])],
         [out_info("detections", F, 2),
          out_info("classes", I64, 1),
          out_info("det_scores", F, 1)], inits)


def nonzero_gather(out):
    nodes = [
        n("Greater", ["x", "zero"], ["positive"]),
        n("NonZero", ["positive"], ["where"]),  # [2, n]
        n("Transpose", ["where"], ["coords"], perm=[1, 0]),  # [n, 2]
        n("GatherND", ["x", "coords"], ["values"]),  # [n]
        n("Add", ["values", "one"], ["y"]),
    ]
    save(out, "nonzero_gather", nodes, [helper.make_tensor_value_info("x", F, [4, 8])],
         [out_info("y", F, 1),
          out_info("coords", I64, 2)],
         [floats("zero", 0.0), floats("one", 1.0)])


def topk_k(out):
    nodes = [
        n("Relu", ["x"], ["r"]),
        n("TopK", ["r", "k"], ["values", "indices"], axis=1),  # [1, k]
        n("Mul", ["values", "two"], ["y"]),
    ]
    save(out, "topk_k", nodes,
         [helper.make_tensor_value_info("x", F, [1, 50]), helper.make_tensor_value_info("k", I64, [1])],
         [out_info("y", F, 2), out_info("indices", I64, 2)],
         [floats("two", 2.0)])


def topk_min_k(out):
    nodes = [
        n("Greater", ["x", "zero"], ["positive"]),
        n("NonZero", ["positive"], ["where"]),  # [1, n], n <= 200
        n("Transpose", ["where"], ["coords"], perm=[1, 0]),  # [n, 1]
        n("GatherND", ["x", "coords"], ["values"]),  # [n]
        n("Shape", ["values"], ["count"]),  # [1]
        n("Concat", ["candidates", "count"], ["both"], axis=0),  # [2]
        n("ReduceMin", ["both"], ["least"], keepdims=0),  # scalar: min(30, n)
        n("Reshape", ["least", "one_dim"], ["k"]),  # [1]
        n("TopK", ["values", "k"], ["top", "top_idx"], axis=0),  # [k], k <= 30
        n("Mul", ["top", "two"], ["y"]),
    ]
    save(out, "topk_min_k", nodes, [helper.make_tensor_value_info("x", F, [200])],
         [out_info("y", F, 1), out_info("top_idx", I64, 1)],
         [floats("zero", 0.0), floats("two", 2.0), ints("candidates", [30]),
          ints("one_dim", [1])])


def unique(out):
    nodes = [
        n("Mul", ["x", "two"], ["x2"]),
        n("Round", ["x2"], ["r"]),
        n("Unique", ["r"], ["u", "first", "inverse", "counts"], sorted=1),  # [n]
        n("Mul", ["u", "two"], ["y"]),
    ]
    save(out, "unique", nodes, [helper.make_tensor_value_info("x", F, [20])],
         [out_info("y", F, 1), out_info("counts", I64, 1),
          out_info("inverse", I64, 1)],
         [floats("two", 2.0)])


def compress(out):
    nodes = [
        n("ReduceSum", ["x", "axis1"], ["sums"], keepdims=0),  # [6]
        n("Greater", ["sums", "zero"], ["keep"]),
        n("Compress", ["x", "keep"], ["rows"], axis=0),  # [n, 5]
        n("Relu", ["rows"], ["y"]),
    ]
    save(out, "compress", nodes, [helper.make_tensor_value_info("x", F, [6, 5])],
         [out_info("y", F, 2)], [ints("axis1", [1]), floats("zero", 0.0)])


def loop_nonzero(out):
    body = helper.make_graph(
        [n("Identity", ["cond_in"], ["cond_out"]),
         n("Gather", ["flat_idx", "i"], ["pos"]),  # scalar index of the i-th positive value
         n("Gather", ["x", "pos"], ["value"]),
         n("Mul", ["value", "three"], ["tripled"]),
         n("Unsqueeze", ["tripled", "zero_axis"], ["row"])],  # [1]
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("row", F, [1])])
    nodes = [
        n("Greater", ["x", "zero"], ["positive"]),
        n("NonZero", ["positive"], ["where"]),  # [1, n]
        n("Squeeze", ["where", "zero_axis"], ["flat_idx"]),  # [n]
        n("Shape", ["flat_idx"], ["count_shape"]),
        n("Squeeze", ["count_shape", "zero_axis"], ["trips"]),  # scalar n
        n("Loop", ["trips", "true"], ["rows"], body=body),  # [n, 1]
        n("Relu", ["rows"], ["y"]),
    ]
    save(out, "loop_nonzero", nodes, [helper.make_tensor_value_info("x", F, [16])],
         [out_info("y", F, 2)],
         [floats("zero", 0.0), floats("three", 3.0), ints("zero_axis", [0]),
          numpy_helper.from_array(np.array(True), "true")])


def if_count(out):
    """x [8]; NonZero's count n of the positive values decides If(n == 0): the then-branch
    (no positive value) gives x tiled 4 times [32], the else-branch the positive values [n],
    n <= 8. The branch depends on the count, so both are planned, at the larger: 32."""
    then_branch = helper.make_graph(
        [n("Tile", ["x", "four"], ["tiled"])], "then",
        [], [helper.make_tensor_value_info("tiled", F, [32])])
    else_branch = helper.make_graph(
        [n("Squeeze", ["where", "zero_axis"], ["idx"]),  # [n]
         n("Gather", ["x", "idx"], ["picked"], axis=0)], "else",
        [], [helper.make_tensor_value_info("picked", F, ["n"])])
    nodes = [
        n("Greater", ["x", "zero"], ["positive"]),
        n("NonZero", ["positive"], ["where"]),  # [1, n]
        n("Size", ["where"], ["numel"]),
        n("Equal", ["numel", "none"], ["empty"]),
        n("If", ["empty"], ["chosen"], then_branch=then_branch, else_branch=else_branch),
        n("Mul", ["chosen", "two"], ["y"]),
    ]
    save(out, "if_count", nodes, [helper.make_tensor_value_info("x", F, [8])],
         [out_info("y", F, 1)],
         [floats("zero", 0.0), floats("two", 2.0), ints("four", [4]), ints("zero_axis", [0]),
          ints("none", 0)])


def cases():
    """Per model, inputs whose data-dependent counts fall below their bounds (the seeded
    normal floats, {}, or sparse ones) and inputs that reach them."""
    disjoint = [[2.0 * i, 0.0, 2.0 * i + 1.0, 1.0] for i in range(100)]  # no two overlap
    return {
        # Scores above the 1.5 threshold for every disjoint box: 10 per class, 3 classes.
        "nms_head": [{}, {"boxes": disjoint, "scores": [2.0] * 300}],
        "nonzero_gather": [{}, {"x": [1.0] * 32}],
        "topk_k": [{"k": [7]}, {"k": [50]}],
        # 5 positives (both counts below), about 100 (TopK at its 30), all 200.
        "topk_min_k": [{"x": [1.0] * 5 + [-1.0] * 195}, {}, {"x": [1.0] * 200}],
        "unique": [{}, {"x": [float(i) for i in range(20)]}],
        "compress": [{}, {"x": [1.0] * 30}],
        "loop_nonzero": [{}, {"x": [1.0] * 16}],
        # No positive value (the then-branch runs), some, and all 8 (the else-branch).
        "if_count": [{"x": [-1.0] * 8}, {"x": [1.0, -1.0] * 4}, {"x": [1.0] * 8}],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for make in (nms_head, nonzero_gather, topk_k, topk_min_k, unique, compress, loop_nonzero,
                 if_count):
        make(a.out)
    manifest = {f"{name}.onnx": {"cases": c} for name, c in cases().items()}
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
