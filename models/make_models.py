#!/usr/bin/env python3
"""Build the small real ONNX models in models/ (random weights, fixed seeds, nothing downloaded).

Re-run (from the repository root), with a venv kept OUTSIDE the repo:

    python3 -m venv /work/venv-torch
    /work/venv-torch/bin/pip install torch torchvision transformers onnx onnxruntime
    /work/venv-torch/bin/python models/make_models.py            # writes models/*.onnx
    /work/venv-torch/bin/python models/make_models.py --only bert_tiny --out /tmp/m
    .ci/venv/bin/python models/make_models.py --quantized   # the quantized ones (no torch)

The committed files were made with:
    Python 3.11.7, torch 2.15.0 (+cu132 wheel, run on CPU), torchvision 0.29.2,
    transformers 5.23.0, onnx 1.23.2, onnxruntime 1.32.0, numpy 2.4.6

Every model is exported with the legacy TorchScript exporter (torch.onnx.export(..., dynamo=False)),
then checked with onnx.checker.check_model(full_check=True) and run once in onnxruntime (CPU).
Re-running with the same versions reproduces the files byte for byte; other versions give
equivalent but not byte-identical files.

Models (what each one exercises in the planner):
  mobilenet_v2.onnx   torchvision mobilenet_v2, 1x3x224x224, opset 17: depthwise convs, Clip (ReLU6),
                      residual Add, GlobalAveragePool, Flatten, Gemm.
  resnet_small.onnx   ResNet-style CNN (torchvision BasicBlock, narrow widths), input batchx3x160x160
                      with a symbolic `batch` dim, opset 13: MaxPool, residual Add + Relu, Flatten, Gemm.
  bert_tiny.onnx      transformers BertModel (hidden 128, 2 layers, 4 heads, vocab 1000), inputs
                      input_ids / attention_mask / token_type_ids [batch, sequence], opset 14: Gather
                      embeddings, LayerNorm decomposition (ReduceMean/Sub/Pow/Sqrt/Div), Erf-based GELU,
                      mask arithmetic (Sub/Mul/Where), Shape/Gather/Unsqueeze/Concat/Reshape chains,
                      MatMul attention with Softmax, Transpose.
  unet_small.onnx     small U-Net, 1x3x128x128, opset 11: MaxPool encoder, Resize (bilinear Upsample and
                      nearest interpolate) + ConvTranspose decoder, channel Concat skip connections,
                      standalone BatchNormalization (post-activation, not foldable), Sigmoid.
  vit_tiny.onnx       torchvision VisionTransformer (64x64 images, patch 8, 2 layers, hidden 96),
                      fully static dims, opset 18: LayerNormalization op, Gelu-as-Erf, attention
                      via MatMul/Softmax, class-token Concat, Gather/Slice.
  bert_tiny_dyn.onnx  bert_tiny.onnx quantized by onnxruntime.quantization.quantize_dynamic (uint8
                      weights; `--quantized`, onnx + onnxruntime only): DynamicQuantizeLinear,
                      MatMulInteger, Cast, Mul by the scales, with the float attention in between.
  mobilenet_v2_qdq.onnx / mobilenet_v2_qop.onnx  mobilenet_v2.onnx statically quantized
                      (quantize_static, `--quantized`; MinMax calibration on 8 seeded N(0,1) inputs,
                      int8 per-tensor weights): QDQ form with int8 activations (DequantizeLinear ->
                      Conv/Add/Gemm -> QuantizeLinear units), QOperator form with uint8 activations
                      (QLinearConv, QLinearAdd, com.microsoft QLinearGlobalAveragePool and QGemm).
  vit_tiny_batch.onnx the same network and weights exported with a dynamic `batch` (the exporter's
                      Shape/Gather/Concat chains instead of constant shapes), for plans over a
                      range of batch sizes (scripts/make_dynamic_models.py).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # --quantized builds need only onnx + onnxruntime
    torch = F = None

    class nn:  # noqa: N801 - lets the torch model classes below be defined (never used)
        Module = object

HERE = os.path.dirname(os.path.abspath(__file__))


def seed(s: int) -> None:
    torch.manual_seed(s)
    np.random.seed(s)


def randomize_bn(module: nn.Module) -> None:
    """Give BatchNorm layers non-trivial running stats so eval-mode outputs are not degenerate."""
    g = torch.Generator().manual_seed(1234)
    for m in module.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 0.5 + 0.75)


def export(model: nn.Module, args: tuple, path: str, *, opset: int, input_names, output_names,
           dynamic_axes=None) -> None:
    model.eval()
    # keep nn.MultiheadAttention off its fused fast path (aten::_native_multi_head_attention has no
    # ONNX export); the exporter then sees the plain MatMul/Softmax decomposition
    if hasattr(torch.backends, "mha"):
        torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad():
        torch.onnx.export(
            model, args, path,
            dynamo=False,
            opset_version=opset,
            input_names=list(input_names),
            output_names=list(output_names),
            dynamic_axes=dynamic_axes,
            do_constant_folding=True,
            export_params=True,
        )


# --------------------------------------------------------------------------------------------
# mobilenet_v2
# --------------------------------------------------------------------------------------------
def make_mobilenet_v2(out: str) -> dict:
    import torchvision
    seed(0)
    m = torchvision.models.mobilenet_v2(weights=None)
    randomize_bn(m)
    x = torch.randn(1, 3, 224, 224)
    export(m, (x,), out, opset=17, input_names=["input"], output_names=["logits"])
    return m, {"input": x.numpy()}


# --------------------------------------------------------------------------------------------
# resnet_small: ResNet-18 layout ([2,2,2,2] BasicBlocks) with widths 24/48/96/192
# --------------------------------------------------------------------------------------------
class ResNetSmall(nn.Module):
    def __init__(self, widths=(24, 48, 96, 192), blocks=(2, 2, 2, 2), num_classes=100):
        super().__init__()
        from torchvision.models.resnet import BasicBlock, conv1x1
        self.inplanes = widths[0]
        self.conv1 = nn.Conv2d(3, widths[0], kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        layers = []
        for i, (w, n) in enumerate(zip(widths, blocks)):
            stride = 1 if i == 0 else 2
            downsample = None
            if stride != 1 or self.inplanes != w:
                downsample = nn.Sequential(conv1x1(self.inplanes, w, stride), nn.BatchNorm2d(w))
            blk = [BasicBlock(self.inplanes, w, stride, downsample)]
            self.inplanes = w
            blk += [BasicBlock(w, w) for _ in range(n - 1)]
            layers.append(nn.Sequential(*blk))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[-1], num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def make_resnet_small(out: str) -> dict:
    seed(1)
    m = ResNetSmall()
    randomize_bn(m)
    x = torch.randn(2, 3, 160, 160)
    export(m, (x,), out, opset=13, input_names=["input"], output_names=["logits"],
           dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    return m, {"input": torch.randn(3, 3, 160, 160).numpy()}  # run with another batch size


# --------------------------------------------------------------------------------------------
# bert_tiny: transformers.BertModel with a small random config
# --------------------------------------------------------------------------------------------
class BertWrapper(nn.Module):
    """Returns plain tensors (last_hidden_state, pooler_output) instead of a ModelOutput."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask, token_type_ids):
        o = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                      token_type_ids=token_type_ids, return_dict=True)
        return o.last_hidden_state, o.pooler_output


def make_bert_tiny(out: str) -> dict:
    from transformers import BertConfig, BertModel
    seed(2)
    cfg = BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=512, max_position_embeddings=128, type_vocab_size=2,
                     hidden_act="gelu", attn_implementation="eager")
    bert = BertModel(cfg, add_pooling_layer=True)
    try:
        bert.set_attn_implementation("eager")
    except Exception:
        pass
    m = BertWrapper(bert)
    b, s = 2, 16
    ids = torch.randint(0, 1000, (b, s), dtype=torch.int64)
    mask = torch.ones(b, s, dtype=torch.int64)
    mask[1, 10:] = 0
    tt = torch.zeros(b, s, dtype=torch.int64)
    tt[:, 8:] = 1
    dyn = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
           "token_type_ids": {0: "batch", 1: "sequence"},
           "last_hidden_state": {0: "batch", 1: "sequence"}, "pooler_output": {0: "batch"}}
    export(m, (ids, mask, tt), out, opset=14,
           input_names=["input_ids", "attention_mask", "token_type_ids"],
           output_names=["last_hidden_state", "pooler_output"], dynamic_axes=dyn)
    # run with other dims than the export example
    ids2 = torch.randint(0, 1000, (1, 24), dtype=torch.int64)
    mask2 = torch.ones(1, 24, dtype=torch.int64)
    mask2[0, 20:] = 0
    return m, {"input_ids": ids2.numpy(), "attention_mask": mask2.numpy(),
            "token_type_ids": torch.zeros(1, 24, dtype=torch.int64).numpy()}


# --------------------------------------------------------------------------------------------
# unet_small
# --------------------------------------------------------------------------------------------
class DoubleConv(nn.Module):
    def __init__(self, cin, cout, post_bn=False):
        super().__init__()
        if post_bn:  # Conv -> ReLU -> BN: the exporter cannot fold this BN into the Conv
            self.body = nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True), nn.BatchNorm2d(cout),
                nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU(inplace=True), nn.BatchNorm2d(cout),
            )
            return
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.body(x)


class UNetSmall(nn.Module):
    def __init__(self, cin=3, classes=4, w=(16, 32, 64, 128)):
        super().__init__()
        self.inc = DoubleConv(cin, w[0])
        self.down1 = DoubleConv(w[0], w[1])
        self.down2 = DoubleConv(w[1], w[2])
        self.down3 = DoubleConv(w[2], w[3])
        self.pool = nn.MaxPool2d(2)
        # decoder: three different upsampling styles
        self.up3 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.dec3 = DoubleConv(w[3] + w[2], w[2])
        self.up2 = nn.ConvTranspose2d(w[2], w[2] // 2, kernel_size=2, stride=2)
        self.dec2 = DoubleConv(w[2] // 2 + w[1], w[1])
        self.dec1 = DoubleConv(w[1] + w[0], w[0], post_bn=True)
        self.head = nn.Conv2d(w[0], classes, 1)

    def forward(self, x):
        x1 = self.inc(x)                   # 16 x128
        x2 = self.down1(self.pool(x1))     # 32 x64
        x3 = self.down2(self.pool(x2))     # 64 x32
        x4 = self.down3(self.pool(x3))     # 128 x16
        y = self.dec3(torch.cat([self.up3(x4), x3], dim=1))
        y = self.dec2(torch.cat([self.up2(y), x2], dim=1))
        y = F.interpolate(y, scale_factor=2.0, mode="nearest")
        y = self.dec1(torch.cat([y, x1], dim=1))
        return torch.sigmoid(self.head(y))


def make_unet_small(out: str) -> dict:
    seed(3)
    m = UNetSmall()
    randomize_bn(m)
    x = torch.randn(1, 3, 128, 128)
    export(m, (x,), out, opset=11, input_names=["image"], output_names=["mask"])
    return m, {"image": x.numpy()}


# --------------------------------------------------------------------------------------------
# vit_tiny (opset 18, static dims)
# --------------------------------------------------------------------------------------------
def make_vit_tiny(out: str) -> dict:
    from torchvision.models.vision_transformer import VisionTransformer
    seed(4)
    m = VisionTransformer(image_size=64, patch_size=8, num_layers=2, num_heads=4, hidden_dim=96,
                          mlp_dim=192, num_classes=10)
    x = torch.randn(1, 3, 64, 64)
    export(m, (x,), out, opset=18, input_names=["pixels"], output_names=["logits"])
    return m, {"pixels": x.numpy()}


# --------------------------------------------------------------------------------------------
# vit_tiny_batch (the same network and weights, exported with a dynamic batch)
# --------------------------------------------------------------------------------------------
def make_vit_tiny_batch(out: str) -> dict:
    from torchvision.models.vision_transformer import VisionTransformer
    seed(4)
    m = VisionTransformer(image_size=64, patch_size=8, num_layers=2, num_heads=4, hidden_dim=96,
                          mlp_dim=192, num_classes=10)
    x = torch.randn(2, 3, 64, 64)
    export(m, (x,), out, opset=18, input_names=["pixels"], output_names=["logits"],
           dynamic_axes={"pixels": {0: "batch"}, "logits": {0: "batch"}})
    return m, {"pixels": x.numpy()}


MODELS = {
    "mobilenet_v2": make_mobilenet_v2,
    "resnet_small": make_resnet_small,
    "bert_tiny": make_bert_tiny,
    "unet_small": make_unet_small,
    "vit_tiny": make_vit_tiny,
    "vit_tiny_batch": make_vit_tiny_batch,
}


# --------------------------------------------------------------------------------------------
# quantized models (onnx + onnxruntime only: `--quantized`)
# --------------------------------------------------------------------------------------------
def make_bert_tiny_dyn(out: str) -> dict:
    """bert_tiny.onnx through onnxruntime.quantization.quantize_dynamic (uint8 weights): each
    MatMul with a weight becomes DynamicQuantizeLinear + MatMulInteger + Cast + Mul by the scales
    (+ the bias Add); the attention's activation MatMuls stay float. Returns the float model's
    path and feeds for the check (outputs compared with the float model's)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    src = os.path.join(HERE, "bert_tiny.onnx")
    quantize_dynamic(src, out, weight_type=QuantType.QUInt8)
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 1000, (1, 24), dtype=np.int64)
    mask = np.ones((1, 24), dtype=np.int64)
    mask[0, 20:] = 0
    return src, {"input_ids": ids, "attention_mask": mask,
                 "token_type_ids": np.zeros((1, 24), dtype=np.int64)}


def make_static_int8(source: str, out: str, fmt: str, activation: str) -> tuple:
    """models/<source>.onnx through onnxruntime.quantization.quantize_static: MinMax calibration
    on 8 fixed-seed N(0, 1) inputs, int8 per-tensor weights, activations of type `activation`
    (QuantType name), in format `fmt` (QuantFormat name: "QDQ" keeps float ops between
    DequantizeLinear/QuantizeLinear pairs, "QOperator" uses QLinearConv/QLinearAdd/QGemm...).
    Returns the float model's path and feeds for the check (one calibration sample)."""
    import onnxruntime as ort
    from onnxruntime import quantization as q
    src = os.path.join(HERE, source + ".onnx")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    inp = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"]).get_inputs()[0]
    rng = np.random.default_rng(31)
    samples = [rng.standard_normal(inp.shape).astype(np.float32) for _ in range(8)]

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.it = iter(samples)

        def get_next(self):
            x = next(self.it, None)
            return None if x is None else {inp.name: x}

    q.quantize_static(src, out, Reader(), quant_format=getattr(q.QuantFormat, fmt),
                      activation_type=getattr(q.QuantType, activation),
                      weight_type=q.QuantType.QInt8, per_channel=False,
                      calibrate_method=q.CalibrationMethod.MinMax)
    return src, {inp.name: samples[0]}


QUANTIZED = {
    "bert_tiny_dyn": make_bert_tiny_dyn,
    # int8 activations, QDQ form: DequantizeLinear -> Conv/Add/Gemm -> QuantizeLinear units
    # (ReLU6 folded into the QuantizeLinear range).
    "mobilenet_v2_qdq": lambda out: make_static_int8("mobilenet_v2", out, "QDQ", "QInt8"),
    # uint8 activations, QOperator form: QLinearConv, QLinearAdd, QLinearGlobalAveragePool, QGemm.
    "mobilenet_v2_qop": lambda out: make_static_int8("mobilenet_v2", out, "QOperator", "QUInt8"),
}


def check_quantized(path: str, reference: str, feeds: dict) -> str:
    """check_model(full_check), one run in onnxruntime, finite outputs of the float model's
    shapes; reports the largest difference from the float model (quantization error)."""
    import onnx
    import onnxruntime as ort
    onnx.checker.check_model(path, full_check=True)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    run = [ort.InferenceSession(p, so, providers=["CPUExecutionProvider"]).run(None, feeds)
           for p in (path, reference)]
    worst = scale = 0.0
    for a, r in zip(*run):
        if a.shape != r.shape or not np.all(np.isfinite(a)):
            raise RuntimeError(f"{path}: output shape {a.shape} vs {r.shape}, or non-finite")
        worst = max(worst, float(np.max(np.abs(a - r))))
        scale = max(scale, float(np.max(np.abs(r))))
    if worst == 0.0:  # quantization always loses something: identical outputs mean no quantization
        raise RuntimeError(f"{path}: outputs identical to the float model's")
    model = onnx.load(path)
    return (f"{len(model.graph.node)} nodes, {os.path.getsize(path) / 1e6:.2f} MB, "
            f"max |quantized - float| {worst:.2g} (max |float| {scale:.2g})")


def check(path: str, module: nn.Module, feeds: dict) -> str:
    import onnx
    import onnxruntime as ort
    onnx.checker.check_model(path, full_check=True)
    model = onnx.load(path)
    opsets = {o.domain or "": o.version for o in model.opset_import}
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    outs = sess.run(None, feeds)
    shapes = ", ".join(f"{o.name}{list(a.shape)}" for o, a in zip(sess.get_outputs(), outs))
    with torch.no_grad():
        ref = module(*[torch.from_numpy(feeds[i.name]) for i in sess.get_inputs()])
    ref = [ref] if isinstance(ref, torch.Tensor) else list(ref)
    worst = 0.0
    for o, a, r in zip(sess.get_outputs(), outs, ref):
        if not np.all(np.isfinite(a)):
            raise RuntimeError(f"{path}: non-finite output {o.name}")
        r = r.numpy()
        if a.shape != r.shape or not np.allclose(a, r, rtol=1e-3, atol=1e-4):
            raise RuntimeError(f"{path}: output {o.name} differs from torch "
                               f"(max abs diff {np.max(np.abs(a - r)) if a.shape == r.shape else 'shape'})")
        worst = max(worst, float(np.max(np.abs(a - r))))
    return (f"opset {opsets.get('', '?')}, {len(model.graph.node)} nodes, "
            f"{os.path.getsize(path) / 1e6:.2f} MB -> {shapes}, max |ort - torch| {worst:.1e}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=HERE, help="output directory (default: models/)")
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS), help="build only these")
    ap.add_argument("--quantized", action="store_true",
                    help="build only the quantized models (from the float ones in models/; "
                         "needs onnx + onnxruntime, not torch)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.quantized:
        failed = 0
        for name, make in QUANTIZED.items():
            path = os.path.join(a.out, name + ".onnx")
            try:
                reference, feeds = make(path)
                print(f"ok   {name}.onnx: {check_quantized(path, reference, feeds)}")
            except Exception as e:  # keep going, report at the end
                failed += 1
                print(f"FAIL {name}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1 if failed else 0
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    failed = 0
    for name in a.only or MODELS:
        path = os.path.join(a.out, name + ".onnx")
        t = time.time()
        try:
            module, feeds = MODELS[name](path)
            info = check(path, module, feeds)
            print(f"ok   {name}.onnx: {info} ({time.time() - t:.1f}s)")
        except Exception as e:  # keep going, report at the end
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
