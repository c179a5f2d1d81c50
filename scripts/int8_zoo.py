#!/usr/bin/env python3
"""Int8 CNN zoo for `--split auto` (issue 31): torchvision CNNs with random weights, quantized
as users do, planned with and without the split, every plan verified and every split model
checked bit-identical against its input in onnxruntime.

    scripts/int8_zoo.sh [--only resnet18 mobilenet_v2 ...] [--out /tmp/int8_zoo] [--jobs 2]

(int8_zoo.sh makes the venv this needs; build the binary first: `cargo build --release`.)

Per network: torchvision's architecture with random weights (torch.manual_seed(0); nothing is
downloaded), exported at batch 1 (224x224; the segmentation network too) with the TorchScript
exporter at opset 17, then onnxruntime.quantization.quantize_static with MinMax calibration on 8
fixed-seed N(0, 1) inputs (after onnxruntime's quant_pre_process), per-tensor int8 weights, in two forms: QDQ with int8 activations and
QOperator with uint8 activations (models/make_models.py's settings). Each quantized model is
planned with `plan --schedule memory` and with `--split auto` added, both with the graph input
in the arena and with `--exclude-io`; `verify` checks each written table, and onnxruntime
(graph optimizations off, so each model runs as written) must give byte-identical outputs for
the quantized model and the split annotated model on one N(0, 1) input.

Prints one row per model, form and I/O mode (unsplit arena, split arena, ratio, extra MACs in
percent of the model's, seconds of the split run) and the geometric mean of the ratios per I/O
mode. Models go to --out (default /tmp/int8_zoo), never into the repository. Exit status 1
when a plan fails to verify or an output differs.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import math
import os
import re
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# torchvision builders; the segmentation network's output is its "out" map.
NETWORKS = [
    "resnet18",
    "mobilenet_v2",
    "mobilenet_v3_small",
    "squeezenet1_0",
    "efficientnet_b0",
    "shufflenet_v2_x1_0",
    "mnasnet1_0",
    "lraspp_mobilenet_v3_large",
]
FORMS = [("qdq", "QDQ", "QInt8"), ("qop", "QOperator", "QUInt8")]
SUMMARY = re.compile(r"arena (\d+) bytes")
SPLIT = re.compile(r"split: (\d+) chain\(s\), arena (\d+) -> (\d+) bytes.*?extra MACs \d+ \(([\d.]+)%")


def export(name: str, path: str) -> None:
    """torchvision `name` with random weights, exported at 1x3x224x224."""
    import torch
    import torchvision

    torch.manual_seed(0)
    if name.startswith(("lraspp", "fcn", "deeplab")):
        net = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None)

        class Out(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                return self.inner(x)["out"]

        net = Out(net)
    else:
        net = getattr(torchvision.models, name)(weights=None)
    net.eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        torch.onnx.export(net, (x,), path, opset_version=17, dynamo=False,
                          input_names=["input"], output_names=["output"])


def quantize(src: str, out: str, fmt: str, activation: str) -> None:
    """quant_pre_process (onnxruntime's recommended step: shape inference and constant
    folding), then quantize_static with 8 fixed-seed N(0, 1) calibration inputs."""
    from onnxruntime import quantization as q
    from onnxruntime.quantization.shape_inference import quant_pre_process

    pre = out[: -len(".onnx")] + ".pre.onnx"
    quant_pre_process(src, pre)
    src = pre

    rng = np.random.default_rng(31)
    samples = [rng.standard_normal((1, 3, 224, 224)).astype(np.float32) for _ in range(8)]

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.it = iter(samples)

        def get_next(self):
            x = next(self.it, None)
            return None if x is None else {"input": x}

    q.quantize_static(src, out, Reader(), quant_format=getattr(q.QuantFormat, fmt),
                      activation_type=getattr(q.QuantType, activation),
                      weight_type=q.QuantType.QInt8, per_channel=False,
                      calibrate_method=q.CalibrationMethod.MinMax)


def run(cmd: list[str]) -> str:
    """Runs a command; what it printed (the summary line goes to stderr), or an exception."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return p.stdout + p.stderr


def bit_identical(a: str, b: str) -> bool:
    """Byte-identical outputs of models a and b in onnxruntime (optimizations off)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    x = np.random.default_rng(7).standard_normal((1, 3, 224, 224)).astype(np.float32)
    outs = [ort.InferenceSession(m, so, providers=["CPUExecutionProvider"]).run(None, {"input": x})
            for m in (a, b)]
    return all(p.dtype == q.dtype and np.array_equal(p, q) for p, q in zip(*outs))


def plan(binary: str, model: str, stem: str, io: bool, split: bool) -> dict:
    """One `plan` run, verified: its arena, the split's numbers and seconds."""
    out = f"{stem}.onnx"
    cmd = [binary, "plan", model, "-o", out, "--schedule", "memory"]
    if not io:
        cmd.append("--exclude-io")
    if split:
        cmd += ["--split", "auto"]
    start = time.monotonic()
    said = run(cmd)
    seconds = time.monotonic() - start
    run([binary, "verify", out, f"{stem}.memplan.json"])
    arena = int(SUMMARY.search(said).group(1))
    row = {"arena": arena, "seconds": seconds, "out": out, "chains": 0, "macs_pct": 0.0}
    m = SPLIT.search(said)
    if m:
        row.update(chains=int(m.group(1)), macs_pct=float(m.group(4)))
    return row


def case(binary: str, model: str, stem: str, io: bool) -> dict:
    """Unsplit and split plans of one model in one I/O mode, the split checked in onnxruntime."""
    tag = "io" if io else "exio"
    plain = plan(binary, model, f"{stem}.{tag}.plain", io, False)
    split = plan(binary, model, f"{stem}.{tag}.split", io, True)
    same = split["chains"] == 0 or bit_identical(model, split["out"])
    return {"unsplit": plain["arena"], "split": split["arena"], "macs_pct": split["macs_pct"],
            "chains": split["chains"], "seconds": split["seconds"], "same": same}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/onnx-memplan"))
    ap.add_argument("--out", default="/tmp/int8_zoo")
    ap.add_argument("--only", nargs="*", default=None, help="networks (default: all)")
    ap.add_argument("--forms", nargs="*", default=[f[0] for f in FORMS])
    ap.add_argument("--jobs", type=int, default=2, help="plan runs at once")
    ap.add_argument("--io", choices=["both", "in", "out"], default="both",
                    help="graph input in the arena (in), excluded (out) or both")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    nets = args.only or NETWORKS
    models = []
    for net in nets:
        src = os.path.join(args.out, f"{net}.onnx")
        if not os.path.exists(src):
            export(net, src)
        for form, fmt, activation in FORMS:
            if form not in args.forms:
                continue
            q = os.path.join(args.out, f"{net}_{form}.onnx")
            if not os.path.exists(q):
                quantize(src, q, fmt, activation)
            models.append((net, form, q))
    jobs = {}
    pool = cf.ThreadPoolExecutor(max_workers=max(1, args.jobs))
    for net, form, q in models:
        for io in {"both": (True, False), "in": (True,), "out": (False,)}[args.io]:
            stem = q[: -len(".onnx")]
            jobs[(net, form, io)] = pool.submit(case, args.bin, q, stem, io)
    failed = False
    print("| model | form | I/O | unsplit | `--split auto` | ratio | extra MACs | chains | s |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    ratios = {True: [], False: []}
    # Rows in order as their runs end.
    for (net, form, io), job in jobs.items():
        try:
            r = job.result()
        except Exception as e:  # a failed plan or verify: reported, counted
            failed = True
            print(f"| {net} | {form} | {'arena' if io else 'excluded'} | FAILED: {e} |", flush=True)
            continue
        ratio = r["unsplit"] / r["split"]
        ratios[io].append(ratio)
        flag = "" if r["same"] else " OUTPUTS DIFFER"
        failed |= not r["same"]
        print(f"| {net} | {form} | {'arena' if io else 'excluded'} | {r['unsplit']:,} | "
              f"{r['split']:,} | {ratio:.2f}x | {r['macs_pct']:.2f}% | {r['chains']} | "
              f"{r['seconds']:.0f}{flag} |", flush=True)
    pool.shutdown()
    for io, rs in ratios.items():
        if rs:
            geo = math.exp(sum(math.log(r) for r in rs) / len(rs))
            print(f"geometric mean, I/O {'in the arena' if io else 'excluded'}: {geo:.2f}x "
                  f"over {len(rs)} models")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
