#!/usr/bin/env python3
"""Models with dynamic axes for planning over ranges (`plan --dim NAME=LO..HI`).

    python scripts/make_dynamic_models.py OUT_DIR [--models models]

writes into OUT_DIR, with onnx.helper (random weights, fixed seed):
  - decoder_seq.onnx: a GPT-style decoder block over a dynamic `sequence` (embedding, causal
    self-attention with a Trilu mask built from the sequence length, MLP, residuals, LayerNorm);
  - speech_time.onnx: a speech-like encoder over a dynamic `time` axis of 80-bin features
    (two stride-2 1-D convolutions, then a GRU and a projection);
  - resnet_hw.onnx, mobilenet_hw.onnx: models/resnet_small.onnx and models/mobilenet_v2.onnx with
    the image's height and width made the symbols `H` and `W` (strided convolutions and pooling);
  - unet_batch.onnx: models/unet_small.onnx with a dynamic `batch` (its skips need H and W
    multiples of 8, so the batch is its dynamic axis);
  - bert_tiny.onnx: a copy of models/bert_tiny.onnx (dynamic `sequence`, batch bound to 1);
  - vit_tiny_batch.onnx: a copy of models/vit_tiny_batch.onnx (models/vit_tiny.onnx's network
    exported with a dynamic `batch`; the static export bakes the batch into its Reshapes);
and manifest.json: per model the ranges to plan over and three points (min, middle, max) at which
scripts/ort_check.py compares the plan evaluated there with onnxruntime (see .ci/run).
"""
import argparse
import json
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(0)


def weight(name, *shape, scale=0.1):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def decoder(path):
    d, vocab, heads = 64, 100, 4
    hd = d // heads
    n = helper.make_node
    nodes = [
        n("Gather", ["emb", "ids"], ["x0"]),  # [1, S, d]
        n("Shape", ["ids"], ["ids_shape"]),
        n("Gather", ["ids_shape", "one"], ["seq"], axis=0),  # scalar S
        n("LayerNormalization", ["x0", "ln1_g", "ln1_b"], ["h0"], axis=-1),
    ]
    for p in ("q", "k", "v"):
        nodes += [
            n("MatMul", ["h0", f"w{p}"], [f"{p}0"]),
            n("Reshape", [f"{p}0", "split_heads"], [f"{p}1"]),  # [1, S, heads, hd]
            n("Transpose", [f"{p}1"], [f"{p}2"], perm=[0, 2, 1, 3] if p != "k" else [0, 2, 3, 1]),
        ]
    nodes += [
        n("MatMul", ["q2", "k2"], ["scores"]),  # [1, heads, S, S]
        n("Mul", ["scores", "scale"], ["scaled"]),
        # causal mask: ones(S, S) lower triangle -> 0 kept, upper -> -1e4
        n("Unsqueeze", ["seq", "zero"], ["seq1"]),
        n("Concat", ["seq1", "seq1"], ["ss"], axis=0),
        n("ConstantOfShape", ["ss"], ["ones"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
        n("Trilu", ["ones"], ["lower"], upper=0),
        n("Sub", ["lower", "onef"], ["masked"]),  # 0 below, -1 above
        n("Mul", ["masked", "big"], ["bias"]),
        n("Add", ["scaled", "bias"], ["biased"]),
        n("Softmax", ["biased"], ["probs"], axis=-1),
        n("MatMul", ["probs", "v2"], ["ctx0"]),  # [1, heads, S, hd]
        n("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx1", "merge_heads"], ["ctx2"]),
        n("MatMul", ["ctx2", "wo"], ["attn"]),
        n("Add", ["x0", "attn"], ["x1"]),
        n("LayerNormalization", ["x1", "ln2_g", "ln2_b"], ["h1"], axis=-1),
        n("MatMul", ["h1", "w1"], ["up"]),
        n("Relu", ["up"], ["act"]),
        n("MatMul", ["act", "w2"], ["down"]),
        n("Add", ["x1", "down"], ["x2"]),
        n("MatMul", ["x2", "head"], ["logits"]),
    ]
    inits = [
        weight("emb", vocab, d), weight("wq", d, d), weight("wk", d, d), weight("wv", d, d),
        weight("wo", d, d), weight("w1", d, 4 * d), weight("w2", 4 * d, d), weight("head", d, vocab),
        numpy_helper.from_array(np.ones(d, np.float32), "ln1_g"),
        numpy_helper.from_array(np.zeros(d, np.float32), "ln1_b"),
        numpy_helper.from_array(np.ones(d, np.float32), "ln2_g"),
        numpy_helper.from_array(np.zeros(d, np.float32), "ln2_b"),
        ints("split_heads", [1, -1, heads, hd]), ints("merge_heads", [1, -1, d]),
        ints("one", 1), ints("zero", [0]),
        numpy_helper.from_array(np.array(1.0 / np.sqrt(hd), np.float32), "scale"),
        numpy_helper.from_array(np.array(1.0, np.float32), "onef"),
        numpy_helper.from_array(np.array(1e4, np.float32), "big"),
    ]
    graph = helper.make_graph(
        nodes, "decoder_seq",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "sequence"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "sequence", vocab])],
        inits,
    )
    save(graph, path)


def speech(path):
    feats, ch, hidden = 80, 64, 48
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "c1"], ["a1"], kernel_shape=[3], strides=[2], pads=[1, 1]),
        n("Relu", ["a1"], ["r1"]),
        n("Conv", ["r1", "c2"], ["a2"], kernel_shape=[3], strides=[2], pads=[1, 1]),
        n("Relu", ["a2"], ["r2"]),  # [1, ch, T']
        n("Transpose", ["r2"], ["seq"], perm=[2, 0, 1]),  # [T', 1, ch]
        n("GRU", ["seq", "gw", "gr"], ["y", "yh"], hidden_size=hidden),  # y [T', 1, 1, hidden]
        n("Squeeze", ["y", "one_axis"], ["ys"]),  # [T', 1, hidden]
        n("MatMul", ["ys", "proj"], ["logits"]),
    ]
    inits = [
        weight("c1", ch, feats, 3), weight("c2", ch, ch, 3),
        weight("gw", 1, 3 * hidden, ch), weight("gr", 1, 3 * hidden, hidden),
        weight("proj", hidden, 32), ints("one_axis", [1]),
    ]
    graph = helper.make_graph(
        nodes, "speech_time",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, feats, "time"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [None, 1, 32])],
        inits,
    )
    save(graph, path)


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def symbolic_axes(src, path, names):
    """The model at `src` with axes of its first input made symbols (`names`: axis -> name)."""
    model = onnx.load(src)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    for axis, name in names.items():
        dims[axis].dim_param = name
    for out in model.graph.output:  # the output's declared shape is left to inference
        out.type.tensor_type.ClearField("shape")
    onnx.save(model, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--models", default="models")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    decoder(os.path.join(a.out, "decoder_seq.onnx"))
    speech(os.path.join(a.out, "speech_time.onnx"))
    hw = {-2: "H", -1: "W"}
    symbolic_axes(os.path.join(a.models, "resnet_small.onnx"), os.path.join(a.out, "resnet_hw.onnx"), hw)
    symbolic_axes(os.path.join(a.models, "mobilenet_v2.onnx"), os.path.join(a.out, "mobilenet_hw.onnx"), hw)
    # The U-Net's skips need H and W multiples of 8: its dynamic axis is the batch.
    symbolic_axes(os.path.join(a.models, "unet_small.onnx"), os.path.join(a.out, "unet_batch.onnx"),
                  {0: "batch"})
    for name in ("bert_tiny", "vit_tiny_batch"):
        shutil.copyfile(os.path.join(a.models, name + ".onnx"), os.path.join(a.out, name + ".onnx"))
    manifest = {
        "bert_tiny.onnx": {"ranges": {"sequence": [1, 128]}, "fixed": {"batch": 1},
                           "points": [{"sequence": 1}, {"sequence": 50}, {"sequence": 128}]},
        "decoder_seq.onnx": {"ranges": {"sequence": [1, 256]}, "fixed": {},
                             "points": [{"sequence": 1}, {"sequence": 77}, {"sequence": 256}]},
        "speech_time.onnx": {"ranges": {"time": [4, 1000]}, "fixed": {},
                             "points": [{"time": 4}, {"time": 333}, {"time": 1000}]},
        "resnet_hw.onnx": {"ranges": {"H": [32, 160], "W": [32, 160]}, "fixed": {"batch": 1},
                           "points": [{"H": 32, "W": 32}, {"H": 77, "W": 45}, {"H": 160, "W": 160}]},
        "mobilenet_hw.onnx": {"ranges": {"H": [32, 224], "W": [32, 224]}, "fixed": {"batch": 1},
                              "points": [{"H": 32, "W": 32}, {"H": 97, "W": 130}, {"H": 224, "W": 224}]},
        "unet_batch.onnx": {"ranges": {"batch": [1, 4]}, "fixed": {},
                            "points": [{"batch": 1}, {"batch": 3}, {"batch": 4}]},
        "vit_tiny_batch.onnx": {"ranges": {"batch": [1, 8]}, "fixed": {},
                                "points": [{"batch": 1}, {"batch": 5}, {"batch": 8}]},
    }
    with open(os.path.join(a.out, "ranges.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
