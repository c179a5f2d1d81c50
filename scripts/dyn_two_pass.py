#!/usr/bin/env python3
"""Measurement prototype (issue 31 item 4): bert_tiny_dyn's feed-forward blocks rewritten by hand
in the TWO-PASS row form that `--split auto` does not make yet.

    python scripts/dyn_two_pass.py models/bert_tiny_dyn.onnx OUT.onnx BLOCKS [LAYERS] [KEEP]

(LAYERS: e.g. 0,1, the default)

The second DynamicQuantizeLinear of each FFN quantizes the GELU output (1x128x512 float, 256 KiB)
by a scale from the min and max of ALL of it, so the single-pass row rewrite (which keeps a
DynamicQuantizeLinear's input whole) cannot cut the FFN's peak. Here pass 1 computes each block
of rows of the GELU output (QuantizeLinear of the block's rows of the LayerNorm output by its whole
scale, MatMulInteger, Cast, Mul, Add, GELU) and reduces its min and max; the second scale and zero
point come from the blocks' extremes (Min/Max over blocks, then onnxruntime's arithmetic, as in
src/split/rows/quantize.rs); pass 2 recomputes each block, quantizes it by them and runs the
rest of the layer (MatMulInteger, residual Add, LayerNorm); a Concat assembles the layer output.
Pass 1 repeats the first MatMulInteger: 128x128x512 = 8,388,608 extra MACs per layer, less the
share of the last KEEP blocks, whose GELU rows pass 1 keeps for pass 2 instead.
Dims are fixed at batch 1, sequence 128. Then `onnx-memplan plan OUT.onnx --dim batch=1 --dim sequence=128 --schedule memory
[--split auto]` gives the arena, and onnxruntime compares its outputs with the original's.
"""
import sys, onnx, numpy as np
from onnx import helper, TensorProto, numpy_helper

if len(sys.argv) < 4:
    sys.exit(__doc__)
src, dst, B = sys.argv[1], sys.argv[2], int(sys.argv[3])
layers = [int(l) for l in sys.argv[4].split(",")] if len(sys.argv) > 4 else [0, 1]
# the last KEEP blocks of pass 1 keep their GELU rows for pass 2 (not recomputed)
KEEP = int(sys.argv[5]) if len(sys.argv) > 5 else 0
m = onnx.load(src)
g = m.graph
S = 128
# fix the dims
for i in g.input:
    for d, v in zip(i.type.tensor_type.shape.dim, [1, S]):
        d.ClearField("dim_param"); d.dim_value = v
new_inits = []
def const(name, val, dt=np.float32):
    new_inits.append(numpy_helper.from_array(np.array(val, dtype=dt), name))
    return name
const("tp/zero", 0.0); const("tp/one", 1.0); const("tp/top", 255.0)
def scale_zp(nodes, lo_in, hi_in, s, z, p):
    N = lambda op, ins, out, **kw: nodes.append(helper.make_node(op, ins, [out], name=out + "/n", **kw)) or out
    lo = N("Min", [lo_in, "tp/zero"], p + "/lo"); hi = N("Max", [hi_in, "tp/zero"], p + "/hi")
    rng = N("Sub", [hi, lo], p + "/range"); ratio = N("Div", [rng, "tp/top"], p + "/ratio")
    flat = N("Equal", [hi, lo], p + "/flat"); N("Where", [flat, "tp/one", ratio], s)
    sh = N("Div", [lo, s], p + "/shift"); ini = N("Sub", ["tp/zero", sh], p + "/init")
    b = N("Min", [ini, "tp/top"], p + "/below"); c = N("Max", [b, "tp/zero"], p + "/clamped")
    r = N("Round", [c], p + "/round"); N("Cast", [r], z, to=TensorProto.UINT8)

nodes = list(g.node)
byname = {n.name: n for n in nodes}
removed = set()
added = []
for L in layers:
    pre = f"/bert/encoder/layer.{L}"
    dq1 = byname[f"{pre}/attention/output/LayerNorm/Add_1_output_0_QuantizeLinear"]
    dq2 = byname[f"{pre}/intermediate/intermediate_act_fn/Mul_1_output_0_QuantizeLinear"]
    end = byname[f"{pre}/output/LayerNorm/Add_1"]
    i0, i1 = nodes.index(dq1), nodes.index(end)
    ffn = [n for n in nodes[i0:i1 + 1] if not n.name.endswith("_quant_scales_mul")]
    ffn_i = set(id(n) for n in ffn)
    made = set(o for n in ffn for o in n.output) - {dq1.output[1], dq1.output[2], dq2.output[1], dq2.output[2]}
    x1 = dq1.input[0]
    gelu = dq2.input[0]
    cone = ffn[:ffn.index(dq2)]  # DQL1 .. Mul_1
    rest = ffn[ffn.index(dq2):]
    for n in ffn: removed.add(n.name)
    # DQL1's scale/zp from the whole x1
    mn = f"{pre}/tp/xmin1"; mx = f"{pre}/tp/xmax1"
    added.append(helper.make_node("ReduceMin", [x1], [mn], name=mn + "/n", keepdims=0))
    added.append(helper.make_node("ReduceMax", [x1], [mx], name=mx + "/n", keepdims=0))
    scale_zp(added, mn, mx, dq1.output[1], dq1.output[2], f"{pre}/tp/q1")
    def copy(ns, tag, rows, reuse={}):
        out = {}
        r0, r1 = rows
        sl = f"{pre}/tp/{tag}/x1"
        st = const(f"{pre}/tp/{tag}/st", [r0], np.int64); en = const(f"{pre}/tp/{tag}/en", [r1], np.int64)
        ax = const(f"{pre}/tp/{tag}/ax", [1], np.int64)
        added.append(helper.make_node("Slice", [x1, st, en, ax], [sl], name=sl + "/n"))
        ren = lambda t: (reuse[t] if t in reuse else sl if t == x1
                         else f"{t}/tp/{tag}" if t in made else t)
        for n in ns:
            if n is dq1 or n is dq2:
                q = dq1 if n is dq1 else dq2
                added.append(helper.make_node("QuantizeLinear", [ren(q.input[0]), q.output[1], q.output[2]], [ren(q.output[0])], name=f"{q.name}/tp/{tag}"))
                continue
            c = onnx.NodeProto(); c.CopyFrom(n)
            c.name = f"{n.name}/tp/{tag}"
            del c.input[:]; c.input.extend([ren(t) for t in n.input])
            del c.output[:]; c.output.extend([ren(t) for t in n.output])
            if n.op_type == "Reshape":
                raise SystemExit("reshape in ffn")
            added.append(c)
        return ren
    blocks = [(b * S // B, (b + 1) * S // B) for b in range(B)]
    mins, maxs = [], []
    for b, rows in enumerate(blocks):
        ren = copy(cone, f"pre{b}", rows)
        mins.append(f"{pre}/tp/pre{b}/min"); maxs.append(f"{pre}/tp/pre{b}/max")
        added.append(helper.make_node("ReduceMin", [ren(gelu)], [mins[-1]], name=mins[-1] + "/n", keepdims=0))
        added.append(helper.make_node("ReduceMax", [ren(gelu)], [maxs[-1]], name=maxs[-1] + "/n", keepdims=0))
    added.append(helper.make_node("Min", mins, [f"{pre}/tp/xmin2"], name=f"{pre}/tp/xmin2/n"))
    added.append(helper.make_node("Max", maxs, [f"{pre}/tp/xmax2"], name=f"{pre}/tp/xmax2/n"))
    scale_zp(added, f"{pre}/tp/xmin2", f"{pre}/tp/xmax2", dq2.output[1], dq2.output[2], f"{pre}/tp/q2")
    parts = []
    for b, rows in enumerate(blocks):
        if b >= B - KEEP:
            ren = copy(rest, f"r{b}", rows, reuse={gelu: f"{gelu}/tp/pre{b}"})
        else:
            ren = copy(cone + rest, f"r{b}", rows)
        parts.append(ren(end.output[0]))
    added.append(helper.make_node("Concat", parts, [end.output[0]], name=end.name + "/tp/concat", axis=1))
    # the LN's ReduceMean(axes -1) etc. are row-wise; the Where mask is not in the FFN
# the new nodes first, in their order (each block's nodes together, its min and max right
# after it), each after the producers it waits for; then the rest
kept = added + [n for n in nodes if n.name not in removed]
produced = set(i.name for i in g.input) | set(t.name for t in g.initializer) | set(t.name for t in new_inits) | {""}
producer = {o: n for n in kept for o in n.output}
order, done = [], set()
def emit(n):
    stack = [(n, False)]
    while stack:
        node, ready = stack.pop()
        if id(node) in done:
            continue
        if ready:
            done.add(id(node)); order.append(node); continue
        stack.append((node, True))
        for t in reversed(node.input):
            if t not in produced and t in producer and id(producer[t]) not in done:
                stack.append((producer[t], False))
for n in kept:
    emit(n)
del g.node[:]; g.node.extend(order)
g.initializer.extend(new_inits)
del g.value_info[:]
onnx.save(m, dst)
print(f"{dst}: {len(order)} nodes")
