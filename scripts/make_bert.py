#!/usr/bin/env python3
"""Write BERT-style encoders with random weights for the split benchmark (kept OUT of the repo).

    scripts/ort_check.sh --help >/dev/null   # once: creates .ci/venv with onnx, onnxruntime, numpy
    .ci/venv/bin/python scripts/make_bert.py /tmp/bert-models
    MEMPLAN_BENCH_MODELS=/tmp/bert-models cargo bench --bench split

Each model: input `x` [1, S, D] (the embeddings) and `mask_bias` [1, 1, 1, S] (the additive
padding mask), L encoder layers (D = 256, 4 heads, feed-forward 1024), output [1, S, D]; S is
fixed in the file. Two forms, as the exporters write them:
  * bert_S.onnx (opset 14): the legacy torch exporter's pattern, LayerNorm decomposed into
    ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add, Erf-based GELU, scale by Div;
  * bert_ln_S.onnx (opset 17): LayerNormalization operators, Tanh-based GELU, scale by Mul.
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D, HEADS, FFN, LAYERS = 256, 4, 1024, 2


class Builder:
    def __init__(self, seed):
        self.nodes, self.inits, self.n = [], [], 0
        self.rng = np.random.default_rng(seed)

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, base, value, dtype=np.float32):
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def weight(self, base, shape):
        return self.const(base, self.rng.standard_normal(shape) * (1.0 / np.sqrt(shape[0])))

    def op(self, op_type, inputs, **attrs):
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out + "/node", **attrs))
        return out


def layer_norm(b, x, fused):
    gamma = b.const("gamma", np.ones(D))
    beta = b.const("beta", np.zeros(D))
    if fused:
        return b.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12)
    mean = b.op("ReduceMean", [x], axes=[-1])
    centred = b.op("Sub", [x, mean])
    var = b.op("ReduceMean", [b.op("Pow", [centred, b.const("two", 2.0)])], axes=[-1])
    std = b.op("Sqrt", [b.op("Add", [var, b.const("eps", 1e-12)])])
    return b.op("Add", [b.op("Mul", [b.op("Div", [centred, std]), gamma]), beta])


def gelu(b, x, fused):
    half = b.op("Mul", [x, b.const("half", 0.5)])
    if fused:  # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
        cube = b.op("Mul", [b.op("Pow", [x, b.const("three", 3.0)]), b.const("c", 0.044715)])
        inner = b.op("Mul", [b.op("Add", [x, cube]), b.const("k", np.sqrt(2 / np.pi))])
        return b.op("Mul", [half, b.op("Add", [b.op("Tanh", [inner]), b.const("one", 1.0)])])
    erf = b.op("Erf", [b.op("Div", [x, b.const("sqrt2", np.sqrt(2.0))])])
    return b.op("Mul", [half, b.op("Add", [erf, b.const("one", 1.0)])])


def dense(b, x, n_in, n_out):
    return b.op("Add", [b.op("MatMul", [x, b.weight("w", (n_in, n_out))]), b.const("bias", np.zeros(n_out) + 0.01)])


def heads(b, x, s, transpose_k=False):
    split = b.op("Reshape", [x, b.const("shape", [1, s, HEADS, D // HEADS], np.int64)])
    perm = [0, 2, 3, 1] if transpose_k else [0, 2, 1, 3]
    return b.op("Transpose", [split], perm=perm)


def encoder_layer(b, x, mask, s, fused):
    q = heads(b, dense(b, x, D, D), s)
    k = heads(b, dense(b, x, D, D), s, transpose_k=True)
    v = heads(b, dense(b, x, D, D), s)
    scores = b.op("MatMul", [q, k])
    scale = np.sqrt(D // HEADS)
    if fused:
        scaled = b.op("Mul", [scores, b.const("scale", 1.0 / scale)])
    else:
        scaled = b.op("Div", [scores, b.const("scale", scale)])
    probs = b.op("Softmax", [b.op("Add", [scaled, mask])], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged = b.op("Reshape", [ctx, b.const("shape", [1, s, D], np.int64)])
    attn = layer_norm(b, b.op("Add", [dense(b, merged, D, D), x]), fused)
    hidden = gelu(b, dense(b, attn, D, FFN), fused)
    return layer_norm(b, b.op("Add", [dense(b, hidden, FFN, D), attn]), fused)


def model(s, fused):
    b = Builder(seed=s + int(fused))
    h = "x"
    for _ in range(LAYERS):
        h = encoder_layer(b, h, "mask_bias", s, fused)
    b.nodes.append(helper.make_node("Identity", [h], ["y"], name="output"))
    graph = helper.make_graph(
        b.nodes,
        f"bert_{'ln_' if fused else ''}{s}",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, D]),
            helper.make_tensor_value_info("mask_bias", TensorProto.FLOAT, [1, 1, 1, s]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, s, D])],
        b.inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17 if fused else 14)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="folder to write the models into")
    ap.add_argument("--seq", type=int, nargs="+", default=[128, 256, 512])
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for s in args.seq:
        for fused in (False, True):
            path = os.path.join(args.out, f"bert_{'ln_' if fused else ''}{s}.onnx")
            onnx.save(model(s, fused), path)
            print(path)


if __name__ == "__main__":
    main()
