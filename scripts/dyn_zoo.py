#!/usr/bin/env python3
"""Dynamic-quantized transformers other than bert_tiny_dyn, planned with and without the split
(issue 31, item 4's target: >= 2x at sequence 128). Models are built from code with random
weights (fixed seeds), quantized by `onnxruntime.quantization.quantize_dynamic` as users do, and
written under OUT_DIR (default /tmp/dyn_zoo; never committed):

    cargo build --release
    .ci/venv/bin/python scripts/dyn_zoo.py [OUT_DIR] [--overhead 10] [--bin PATH]

  * gpt2_dyn: a GPT-2 style decoder, 128 tokens, D = 128, 2 heads, feed-forward 512, 2 layers,
    pre-LayerNormalization, a causal additive mask, tanh GELU, a final LayerNormalization;
  * vit_dyn: a ViT style encoder on a 1x3x64x128 image in 8x8 patches (128 tokens), D = 128,
    2 heads, feed-forward 512, 2 layers, pre-LayerNormalization, Erf GELU;
  * t5_dyn: a T5 style encoder, 128 tokens, D = 128, 4 heads, feed-forward 512, 2 layers,
    pre-RMSNorm written out as T5 exports it (Pow, ReduceMean, Add, Sqrt, Div, Mul), no biases,
    unscaled scores plus a relative-position bias shared by the layers, ReLU, a final RMSNorm.

For each: `plan --schedule memory` (unsplit) and `plan --schedule memory --split auto` (each plan
is checked by the verifier inside `plan`, and again here by `onnx-memplan verify`), the ratio,
the split model against the quantized model in onnxruntime (graph optimizations off; outputs
must be bit-identical), the split model run inside its arena (scripts/arena_run.py), and the
float model's split for reference.
Prints one Markdown table; exits 1 when any check fails.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from onnxruntime.quantization import QuantType, quantize_dynamic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_bert import Builder, gelu, heads, dense, Size  # noqa: E402

ROOT = os.path.dirname(HERE)
BIN = os.path.join(ROOT, "target", "release", "onnx-memplan")
SIZE = Size(d=128, heads=2, ffn=512, layers=2)


def block(b, x, mask, s, size, fused_gelu):
    """A pre-LayerNormalization transformer block (GPT-2 and ViT order)."""
    d = size.d
    ln = lambda t: b.op("LayerNormalization", [t, b.const("g", np.ones(d)), b.const("b", np.zeros(d))], axis=-1, epsilon=1e-5)
    h = ln(x)
    q = heads(b, dense(b, h, d, d), s, size)
    k = heads(b, dense(b, h, d, d), s, size, transpose_k=True)
    v = heads(b, dense(b, h, d, d), s, size)
    scores = b.op("Mul", [b.op("MatMul", [q, k]), b.const("scale", 1.0 / np.sqrt(d // size.heads))])
    if mask is not None:
        scores = b.op("Add", [scores, mask])
    probs = b.op("Softmax", [scores], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged = b.op("Reshape", [ctx, b.const("shape", [1, s, d], np.int64)])
    x = b.op("Add", [dense(b, merged, d, d), x])
    hidden = gelu(b, dense(b, ln(x), d, size.ffn), fused_gelu)
    return b.op("Add", [dense(b, hidden, size.ffn, d), x])


def rms_norm(b, x, d):
    """T5's RMSNorm as its export writes it: x / sqrt(mean(x^2) + eps), times a weight."""
    var = b.op("ReduceMean", [b.op("Pow", [x, b.const("two", 2.0)])], axes=[-1], keepdims=1)
    scaled = b.op("Div", [x, b.op("Sqrt", [b.op("Add", [var, b.const("eps", 1e-6)])])])
    return b.op("Mul", [b.const("g", np.ones(d)), scaled])


def t5_block(b, x, bias, s, size):
    """A T5 encoder block: pre-RMSNorm, no biases, unscaled scores plus the position bias."""
    d = size.d
    linear = lambda t, n_in, n_out: b.op("MatMul", [t, b.weight("w", (n_in, n_out))])
    h = rms_norm(b, x, d)
    q = heads(b, linear(h, d, d), s, size)
    k = heads(b, linear(h, d, d), s, size, transpose_k=True)
    v = heads(b, linear(h, d, d), s, size)
    probs = b.op("Softmax", [b.op("Add", [b.op("MatMul", [q, k]), bias])], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged = b.op("Reshape", [ctx, b.const("shape", [1, s, d], np.int64)])
    x = b.op("Add", [x, linear(merged, d, d)])
    hidden = b.op("Relu", [linear(rms_norm(b, x, d), d, size.ffn)])
    return b.op("Add", [x, linear(hidden, size.ffn, d)])


def finish(b, h, name, inputs, s, d, rms=False):
    if rms:
        h = rms_norm(b, h, d)
    else:
        h = b.op("LayerNormalization", [h, b.const("g", np.ones(d)), b.const("b", np.zeros(d))], axis=-1, epsilon=1e-5)
    b.nodes.append(helper.make_node("Identity", [h], ["y"], name="output"))
    graph = helper.make_graph(b.nodes, name, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, s, d])], b.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def gpt2(s=128, size=SIZE):
    b = Builder(seed=2)
    causal = np.triu(np.full((s, s), -10000.0, np.float32), 1).reshape(1, 1, s, s)
    mask = b.const("causal", causal)
    h = b.op("Add", ["x", b.weight("position", (s, size.d))])
    for _ in range(size.layers):
        h = block(b, h, mask, s, size, fused_gelu=True)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, size.d])
    return finish(b, h, "gpt2_dyn", [x], s, size.d)


def vit(size=SIZE, hw=(64, 128), patch=8):
    b = Builder(seed=3)
    s = (hw[0] // patch) * (hw[1] // patch)
    w = b.const("patch_w", b.rng.standard_normal((size.d, 3, patch, patch)) * 0.05)
    grid = b.op("Conv", ["pixels", w], kernel_shape=[patch, patch], strides=[patch, patch])
    tokens = b.op("Transpose", [b.op("Reshape", [grid, b.const("shape", [1, size.d, s], np.int64)])], perm=[0, 2, 1])
    h = b.op("Add", [tokens, b.weight("position", (s, size.d))])
    for _ in range(size.layers):
        h = block(b, h, None, s, size, fused_gelu=False)
    x = helper.make_tensor_value_info("pixels", TensorProto.FLOAT, [1, 3, *hw])
    return finish(b, h, "vit_dyn", [x], s, size.d)


def t5(s=128, size=Size(d=128, heads=4, ffn=512, layers=2)):
    b = Builder(seed=4)
    bias = b.const("position_bias", b.rng.standard_normal((1, size.heads, s, s)) * 0.5)
    h = "x"
    for _ in range(size.layers):
        h = t5_block(b, h, bias, s, size)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, size.d])
    return finish(b, h, "t5_dyn", [x], s, size.d, rms=True)


def plan(model, out, extra):
    run = subprocess.run([BIN, "plan", model, "-o", out, "--schedule", "memory", *extra], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"plan {model} {extra}: {run.stderr.strip()}")
    table = out[: -len(".onnx")] + ".memplan.json"
    check = subprocess.run([BIN, "verify", out, table], capture_output=True, text=True)
    return table, json.load(open(table)), check.returncode == 0


def bit_identical(a, b):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sa = ort.InferenceSession(a, so, providers=["CPUExecutionProvider"])
    sb = ort.InferenceSession(b, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in sa.get_inputs()}
    ya, yb = sa.run(None, feed), sb.run(None, feed)
    return all(p.dtype == q.dtype and p.shape == q.shape and p.tobytes() == q.tobytes() for p, q in zip(ya, yb))


def arena_run(model, table):
    run = subprocess.run([sys.executable, os.path.join(HERE, "arena_run.py"), "--model", model, "--table", table], capture_output=True, text=True)
    return run.returncode == 0, (run.stdout + run.stderr).strip().splitlines()[-1:] or [""]


def main():
    global BIN
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", nargs="?", default="/tmp/dyn_zoo")
    ap.add_argument("--overhead", default="10", help="--split-overhead for the split plans")
    ap.add_argument("--bin", default=BIN, help="the onnx-memplan binary (default: target/release)")
    args = ap.parse_args()
    BIN = args.bin
    os.makedirs(args.out_dir, exist_ok=True)
    rows, ok = [], True
    for name, build in [("gpt2_dyn", gpt2), ("vit_dyn", vit), ("t5_dyn", t5)]:
        float_path = os.path.join(args.out_dir, name.replace("_dyn", "") + ".onnx")
        onnx.save(build(), float_path)
        path = os.path.join(args.out_dir, name + ".onnx")
        quantize_dynamic(float_path, path, weight_type=QuantType.QUInt8)
        _, unsplit, v1 = plan(path, os.path.join(args.out_dir, name + ".plan.onnx"), [])
        out = os.path.join(args.out_dir, name + ".split.onnx")
        table_path, split, v2 = plan(path, out, ["--split", "auto", "--split-overhead", args.overhead])
        # The float model before quantization, for reference.
        _, float_split, _ = plan(float_path, os.path.join(args.out_dir, name + ".float.onnx"), ["--split", "auto"])
        s, f = split["splits"], float_split["splits"]
        same = bit_identical(path, out)
        ran, said = arena_run(out, table_path)
        pct = 100.0 * s["extra_macs"] / max(s["total_macs"], 1)
        arena = sum(a["bytes"] for a in unsplit["arenas"])
        rows.append((name, arena, s["arena_after"], arena / s["arena_after"], len(s["chains"]), pct,
                     v1 and v2, same, ran, f"{f['arena_before']:,} -> {f['arena_after']:,}"))
        ok &= v1 and v2 and same and ran
        if not ran:
            print(f"{name}: arena run: {said[0]}", file=sys.stderr)
    print("| model | --schedule memory | --split auto | ratio | chains | extra MACs | verifies | bit-identical | arena run | float model, split |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:,} | {r[2]:,} | {r[3]:.2f}x | {r[4]} | {r[5]:.2f}% | {r[6]} | {r[7]} | {r[8]} | {r[9]} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
