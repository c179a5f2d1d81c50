#!/usr/bin/env python3
"""Writes the edge-case models that scripts/ort_check.py checks besides models/, with a manifest
giving each one's bindings:

    python scripts/make_edge_models.py OUT_DIR [--models models]
    scripts/ort_check.sh --bin BIN --models OUT_DIR --manifest OUT_DIR/manifest.json --out CHECK_DIR

- paddle_style.onnx: unknown dims declared as `dim_value: -1` (as Paddle's exporter writes them),
  planned with `--input-shape x=1x3x48x192`; the annotated model must pass
  onnx.checker.check_model(full_check=True) with the bound shapes written into its inputs/outputs.
- vad_like*.onnx: a voice-activity detector's control flow: nested `If`s on the sample-rate input
  `sr` (conditions `sr == 16000` and `sr == 8000`, computed in the main graph); the 16 kHz branch
  runs an LSTM, the 8 kHz branch feeds its LSTM a tensor whose rank (5, from a Slice whose end
  is computed from x's `samples` dim) is wrong for 512 samples, which onnxruntime cannot see
  while `samples` is symbolic; the other rates give zeros. Bound with `--dim samples=512`. Planned without a value (the broken branch is ruled
  out: it fails for these shapes), with `--input-value sr=16000` and with `sr=4000`; ort_check
  compares each If's taken branch in the table with the one onnxruntime takes.
- <model>.ort_all.onnx for each model in --models: saved by onnxruntime at ORT_ENABLE_ALL, with
  its `com.microsoft.nchwc` blocked-layout operators (the block size is this machine's, so these
  are made where they are checked); ort_check compares every inferred shape with onnxruntime's.
- <model>.ort_extended.onnx for each model in --models: saved at ORT_ENABLE_EXTENDED, with
  onnxruntime's `com.microsoft` fusions (FusedConv, FusedGemm, BiasGelu, SkipLayerNormalization,
  ...) and no layout change; `.ci/run` also checks these with `--split auto` (FusedConv tiles).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def paddle_style() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "paddle_style",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, -1, -1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 4, -1, -1])],
        [w, b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def vad_like() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    hidden, feat = 8, 128

    def lstm_weights(prefix):
        return [
            numpy_helper.from_array(
                (0.1 * rng.standard_normal((1, 4 * hidden, feat))).astype(np.float32), prefix + "_W"),
            numpy_helper.from_array(
                (0.1 * rng.standard_normal((1, 4 * hidden, hidden))).astype(np.float32), prefix + "_R"),
        ]

    def ints(name, values):
        return numpy_helper.from_array(np.array(values, dtype=np.int64), name)

    def out_info(name):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, hidden])

    # 16 kHz: x (1x512) -> 4x1x128 -> LSTM -> Y_h (1x1x8) -> 1x8.
    lstm16 = helper.make_graph(
        [
            helper.make_node("Reshape", ["x", "seq_shape"], ["seq16"], name="to_seq16"),
            helper.make_node("LSTM", ["seq16", "l16_W", "l16_R"], ["", "h16"], name="lstm16",
                             hidden_size=hidden),
            helper.make_node("Reshape", ["h16", "out_shape"], ["y16"], name="flat16"),
        ],
        "rate16k", [], [out_info("y16")],
        lstm_weights("l16") + [ints("seq_shape", [4, 1, feat]), ints("out_shape", [1, hidden])],
    )
    # 8 kHz: the LSTM's input gets rank len(shape5[:512 // 100]) = 5 for this input size.
    lstm8 = helper.make_graph(
        [
            helper.make_node("Shape", ["x"], ["xs"], name="shape8"),
            helper.make_node("Gather", ["xs", "one"], ["width"], name="width8", axis=0),
            helper.make_node("Div", ["width", "hundred"], ["rank"], name="rank8"),
            helper.make_node("Reshape", ["rank", "one_elem"], ["end"], name="end8"),
            helper.make_node("Slice", ["shape5", "zero", "end"], ["target"], name="slice8"),
            helper.make_node("Reshape", ["x", "target"], ["seq8"], name="to_seq8"),
            helper.make_node("LSTM", ["seq8", "l8_W", "l8_R"], ["", "h8"], name="lstm8",
                             hidden_size=hidden),
            helper.make_node("Reshape", ["h8", "out8_shape"], ["y8"], name="flat8"),
        ],
        "rate8k", [], [out_info("y8")],
        lstm_weights("l8") + [
            ints("one", 1), ints("hundred", 100), ints("one_elem", [1]), ints("zero", [0]),
            ints("shape5", [1, 1, 4, 1, feat]), ints("out8_shape", [1, hidden]),
        ],
    )
    other = helper.make_graph(
        [helper.make_node("Constant", [], ["y0"], name="zeros",
                          value=numpy_helper.from_array(np.zeros((1, hidden), np.float32)))],
        "other_rate", [], [out_info("y0")],
    )
    inner = helper.make_graph(
        [helper.make_node("If", ["is8k"], ["y_low"], name="if8k", then_branch=lstm8,
                          else_branch=other)],
        "not16k", [], [out_info("y_low")],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Equal", ["sr", "k16000"], ["is16k"], name="eq16k"),
            helper.make_node("Equal", ["sr", "k8000"], ["is8k"], name="eq8k"),
            helper.make_node("If", ["is16k"], ["y"], name="if16k", then_branch=lstm16,
                             else_branch=inner),
        ],
        "vad_like",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "samples"]),
         helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [out_info("y")],
        [ints("k16000", 16000), ints("k8000", 8000)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def ort_saved(src: str, dst: str, level: str) -> None:
    """`src` optimised by onnxruntime at `level` (a GraphOptimizationLevel name), saved to `dst`."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    so.optimized_model_filepath = dst
    so.log_severity_level = 3
    ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--models", help="also save each model of this folder at ORT_ENABLE_ALL "
                    "and ORT_ENABLE_EXTENDED")
    a = ap.parse_args()
    out = a.out
    os.makedirs(out, exist_ok=True)
    manifest = []
    model = paddle_style()
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(out, "paddle_style.onnx"))
    manifest.append({"file": "paddle_style.onnx", "input_shapes": {"x": [1, 3, 48, 192]}})
    model = vad_like()
    onnx.checker.check_model(model, full_check=True)
    for stem, values in [("vad_like", {}), ("vad_like_16k", {"sr": 16000}),
                         ("vad_like_4k", {"sr": 4000})]:
        onnx.save(model, os.path.join(out, stem + ".onnx"))
        manifest.append({"file": stem + ".onnx", "bindings": {"samples": 512},
                         "input_values": values})
    for src in sorted(glob.glob(os.path.join(a.models, "*.onnx")) if a.models else []):
        if src.endswith(".memplan.onnx"):
            continue
        stem = os.path.basename(src)[: -len(".onnx")]
        ort_saved(src, os.path.join(out, stem + ".ort_all.onnx"), "ORT_ENABLE_ALL")
        ort_saved(src, os.path.join(out, stem + ".ort_extended.onnx"), "ORT_ENABLE_EXTENDED")
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"models": manifest}, f, indent=1)
    print(f"make_edge_models: {len(os.listdir(out)) - 1} models in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
