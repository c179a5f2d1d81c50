#!/usr/bin/env python3
"""Write BERT-style encoders with random weights for the split benchmark (kept OUT of the repo).

    scripts/ort_check.sh --help >/dev/null   # once: creates .ci/venv with onnx, onnxruntime, numpy
    .ci/venv/bin/python scripts/make_bert.py /tmp/bert-models
    MEMPLAN_BENCH_MODELS=/tmp/bert-models cargo bench --bench split

Each model: input `x` [1, S, D] (the embeddings) and `mask_bias` [1, 1, 1, S] (the additive
padding mask), L encoder layers (by default D = 256, 4 heads, feed-forward 1024, L = 2), output
[1, S, D]; S is fixed in the file. Two forms, as the exporters write them:
  * bert_S.onnx (opset 14): the legacy torch exporter's pattern, LayerNorm decomposed into
    ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add, Erf-based GELU, scale by Div;
  * bert_ln_S.onnx (opset 17): LayerNormalization operators, Tanh-based GELU, scale by Mul.

`--base` writes BERT-base instead (D = 768, 12 heads, feed-forward 3072, L = 12, and a 30522-word
embedding table gathered from an `input_ids` [1, S] input in place of `x`): about 110 M random
weights, 440 MB of inline initializers, for the streaming benchmark (`cargo bench --bench io`):

    .ci/venv/bin/python scripts/make_bert.py /tmp/bert-base --base --seq 128 --forms ln
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from dataclasses import dataclass


@dataclass(frozen=True)
class Size:
    d: int = 256
    heads: int = 4
    ffn: int = 1024
    layers: int = 2
    vocab: int = 0  # 0: the embeddings are the input `x`


BASE = Size(d=768, heads=12, ffn=3072, layers=12, vocab=30522)


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


def layer_norm(b, x, fused, d):
    gamma = b.const("gamma", np.ones(d))
    beta = b.const("beta", np.zeros(d))
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


def heads(b, x, s, size, transpose_k=False):
    split = b.op("Reshape", [x, b.const("shape", [1, s, size.heads, size.d // size.heads], np.int64)])
    perm = [0, 2, 3, 1] if transpose_k else [0, 2, 1, 3]
    return b.op("Transpose", [split], perm=perm)


def encoder_layer(b, x, mask, s, fused, size):
    d = size.d
    q = heads(b, dense(b, x, d, d), s, size)
    k = heads(b, dense(b, x, d, d), s, size, transpose_k=True)
    v = heads(b, dense(b, x, d, d), s, size)
    scores = b.op("MatMul", [q, k])
    scale = np.sqrt(d // size.heads)
    if fused:
        scaled = b.op("Mul", [scores, b.const("scale", 1.0 / scale)])
    else:
        scaled = b.op("Div", [scores, b.const("scale", scale)])
    probs = b.op("Softmax", [b.op("Add", [scaled, mask])], axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged = b.op("Reshape", [ctx, b.const("shape", [1, s, d], np.int64)])
    attn = layer_norm(b, b.op("Add", [dense(b, merged, d, d), x]), fused, d)
    hidden = gelu(b, dense(b, attn, d, size.ffn), fused)
    return layer_norm(b, b.op("Add", [dense(b, hidden, size.ffn, d), attn]), fused, d)


def embeddings(b, s, fused, size):
    """Word embeddings gathered from `input_ids`, plus position embeddings, normalised."""
    words = b.op("Gather", [b.weight("word_embeddings", (size.vocab, size.d)), "input_ids"])
    summed = b.op("Add", [words, b.weight("position_embeddings", (s, size.d))])
    return layer_norm(b, summed, fused, size.d)


def model(s, fused, size=Size()):
    b = Builder(seed=s + int(fused))
    if size.vocab:
        h = embeddings(b, s, fused, size)
        first = helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, s])
    else:
        h = "x"
        first = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, size.d])
    for _ in range(size.layers):
        h = encoder_layer(b, h, "mask_bias", s, fused, size)
    b.nodes.append(helper.make_node("Identity", [h], ["y"], name="output"))
    graph = helper.make_graph(
        b.nodes,
        f"bert_{'ln_' if fused else ''}{s}",
        [
            first,
            helper.make_tensor_value_info("mask_bias", TensorProto.FLOAT, [1, 1, 1, s]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, s, size.d])],
        b.inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17 if fused else 14)])
    m.ir_version = 8
    if m.ByteSize() < 2**31 - 1:  # the checker refuses in-memory models of 2 GB and more
        onnx.checker.check_model(m, full_check=True)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="folder to write the models into")
    ap.add_argument("--seq", type=int, nargs="+", default=[128, 256, 512])
    ap.add_argument("--forms", nargs="+", choices=["decomposed", "ln"], default=["decomposed", "ln"])
    ap.add_argument("--base", action="store_true", help="BERT-base size with word embeddings")
    args = ap.parse_args()
    size = BASE if args.base else Size()
    os.makedirs(args.out, exist_ok=True)
    for s in args.seq:
        for fused in (False, True):
            if ("ln" if fused else "decomposed") not in args.forms:
                continue
            path = os.path.join(args.out, f"bert_{'ln_' if fused else ''}{s}.onnx")
            onnx.save(model(s, fused, size), path)
            print(path)


if __name__ == "__main__":
    main()
