#!/usr/bin/env python3
"""The README's results table: our arena against the peers' on the same networks.

    scripts/peers.sh [--bin target/release/onnx-memplan] [--only NET ...] [--json OUT.json]

(peers.sh makes the venv with the pinned peers and runs this file in it.)

Networks, float32, batch 1, random weights (seeded; nothing is downloaded): torchvision's
mobilenet_v2, resnet50 and efficientnet_b0 at 1x3x224x224, and a BERT from transformers'
BertConfig (4 layers, hidden 256, 4 heads, intermediate 1024) on 1x128 token ids. Columns, in
bytes (see docs/guide/results.md for how each is read):

- ExecuTorch: torch.export -> to_edge -> to_executorch with the default memory planning pass
  (greedy); the sum of the execution plan's `non_const_buffer_sizes` after entry 0 (reserved).
- TFLite Micro: the network converted to .tflite by litert-torch, run once by the tflite_micro
  Python interpreter; the "Arena allocation head" its RecordingMicroAllocator prints.
- onnxruntime: the exported ONNX model in onnxruntime (CPU EP, memory pattern on, the arena
  extending by exactly what is asked); the block the arena is asked for at the start of the
  second run, read from the verbose log: the memory pattern planned from the first run.
- ours: `onnx-memplan plan M.onnx --schedule memory` on the same ONNX file, the table's arenas
  summed; "ours, split" adds `--split auto`.

Each measurement runs in its own process (`peers.py measure PEER NET DIR`), so a peer that is
missing, fails or crashes gives "n/a (reason)" in its cell and the rest of the table stands.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

NETS = ("mobilenet_v2", "resnet50", "efficientnet_b0", "bert")
TITLES = {
    "mobilenet_v2": "MobileNetV2",
    "resnet50": "ResNet-50",
    "efficientnet_b0": "EfficientNet-B0",
    "bert": "BERT 4×256, sequence 128",
}
COLUMNS = ("executorch", "tflite_micro", "onnxruntime", "ours", "ours_split")
HEADERS = ("ExecuTorch", "TFLite Micro", "onnxruntime", "ours", "ours, split")
DISTS = ("torch", "torchvision", "transformers", "onnx", "onnxruntime", "executorch",
         "tflite-micro", "litert-torch", "numpy")
SEQ = 128
OPSET = 17
TIMEOUT_S = 3600


class NotAvailable(Exception):
    """A peer cannot measure this network; the message goes into the table's cell."""


# --- the networks -------------------------------------------------------------------------------

def build(net):
    """The network (eval mode, seeded random weights) and its example inputs."""
    import torch
    torch.manual_seed(0)
    if net == "bert":
        from transformers import BertConfig, BertModel
        cfg = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                         intermediate_size=1024, attn_implementation="eager")

        class Bert(torch.nn.Module):
            """BertModel's last hidden state from token ids alone."""

            def __init__(self):
                super().__init__()
                self.bert = BertModel(cfg, add_pooling_layer=False)

            def forward(self, input_ids):
                return self.bert(input_ids=input_ids).last_hidden_state

        ids = torch.randint(0, cfg.vocab_size, (1, SEQ), generator=torch.Generator().manual_seed(0))
        return Bert().eval(), (ids,)
    import torchvision
    model = getattr(torchvision.models, net)(weights=None)
    return model.eval(), (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0)),)


def onnx_path(net, work):
    """Exports the network to WORK/NET.onnx (once) and returns the path."""
    path = os.path.join(work, f"{net}.onnx")
    if os.path.exists(path):
        return path
    import torch
    model, args = build(net)
    names = ["input_ids"] if net == "bert" else ["input"]
    tmp = path + ".tmp"
    with torch.no_grad():
        try:
            torch.onnx.export(model, args, tmp, opset_version=OPSET, input_names=names,
                              output_names=["output"], dynamo=False)
        except Exception as e:  # the TorchScript exporter may be gone: the dynamo one then
            print(f"peers: TorchScript export failed ({e}); using dynamo=True", file=sys.stderr)
            torch.onnx.export(model, args, tmp, opset_version=OPSET, input_names=names,
                              output_names=["output"], dynamo=True, external_data=False)
    os.replace(tmp, path)
    return path


# --- the peers ----------------------------------------------------------------------------------

def measure_executorch(net, work):
    """Sum of the non-constant buffers of the ExecuTorch program's plan (buffer 0 is reserved)."""
    import torch
    from executorch.exir import to_edge
    model, args = build(net)
    with torch.no_grad():
        ep = torch.export.export(model, args)
    program = to_edge(ep).to_executorch().executorch_program
    sizes = list(program.execution_plan[0].non_const_buffer_sizes)
    return sum(sizes[1:])


def measure_tflite_micro(net, work):
    """TFLite Micro's arena head after one run of the litert-torch conversion."""
    import numpy as np
    path = os.path.join(work, f"{net}.tflite")
    if not os.path.exists(path):
        import litert_torch
        model, args = build(net)
        litert_torch.convert(model, args).export(path + ".tmp.tflite")
        os.replace(path + ".tmp.tflite", path)
    from tflite_micro.python.tflite_micro import runtime
    with open(path, "rb") as f:
        data = f.read()
    # a missing kernel fails here; its name is in the log, which the parent reads
    interp = runtime.Interpreter.from_bytes(data, arena_size=512 << 20)
    _, args = build(net)
    for i, a in enumerate(args):
        det = interp.get_input_details(i)
        interp.set_input(a.numpy().astype(det["dtype"]).reshape(det["shape"]), i)
    interp.invoke()
    sys.stderr.flush()
    interp.print_allocations()  # to fd 2; the parent reads "Arena allocation head N bytes"
    return None


def missing_kernel(log):
    """The builtin operator TFLite Micro found no kernel for, from its log (None if none)."""
    m = re.search(r"Didn't find op for builtin opcode '([A-Za-z_0-9]+)'", log)
    return m.group(1) if m else None


def measure_onnxruntime(net, work):
    """The memory-pattern block onnxruntime asks its CPU arena for at the start of run 2."""
    import numpy as np
    import onnxruntime as ort
    ort.set_default_logger_severity(0)
    # arena_extend_strategy 1 (kSameAsRequested): an extension is exactly the request, so the
    # log shows the pattern's size rather than the next power of two
    ort.create_and_register_allocator(
        ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                          ort.OrtMemType.DEFAULT),
        ort.OrtArenaCfg({"arena_extend_strategy": 1}))
    so = ort.SessionOptions()
    so.enable_mem_pattern = True
    so.log_severity_level = 0
    so.add_session_config_entry("session.use_env_allocators", "1")
    sess = ort.InferenceSession(onnx_path(net, work), so, providers=["CPUExecutionProvider"])
    _, args = build(net)
    feed = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
    sess.run(None, feed)
    print("peers: second run", file=sys.stderr, flush=True)
    sess.run(None, feed)
    print("peers: second run done", file=sys.stderr, flush=True)
    return None


def run_ours(binary, net, work, split):
    """The table's arenas summed, for `plan --schedule memory` (with `--split auto` if split)."""
    tag = "split" if split else "plain"
    table = os.path.join(work, f"{net}.{tag}.memplan.json")
    cmd = [binary, "plan", onnx_path(net, work), "-o", os.path.join(work, f"{net}.{tag}.memplan.onnx"),
           "--table", table, "--schedule", "memory", "--quiet"]
    if split:
        cmd += ["--split", "auto"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise NotAvailable(first_line(r.stderr or f"exit {r.returncode}"))
    with open(table) as f:
        return sum(a["bytes"] for a in json.load(f)["arenas"])


PEERS = {
    "executorch": measure_executorch,
    "tflite_micro": measure_tflite_micro,
    "onnxruntime": measure_onnxruntime,
}


def first_line(e):
    """The first non-empty line of an error, shortened for a table cell."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return (lines[0] if lines else type(e).__name__)[:120]


def measure_main(peer, net, work):
    """`peers.py measure`: one measurement, its result as the last line of stdout (JSON)."""
    try:
        value = PEERS[peer](net, work)
        out = {"bytes": value}
    except NotAvailable as e:
        out = {"na": str(e)}
    except ImportError as e:
        out = {"na": f"not installed ({e.name})"}
    except Exception as e:
        out = {"na": f"{type(e).__name__}: {first_line(e)}"}
    sys.stderr.flush()
    print(json.dumps(out), flush=True)


def read_log(peer, stderr):
    """The figure a peer prints to its log (fd 2), or None."""
    if peer == "tflite_micro":
        m = re.search(r"Arena allocation head (\d+) bytes", stderr)
        return int(m.group(1)) if m else None
    if peer == "onnxruntime":
        second = stderr.split("peers: second run\n", 1)
        if len(second) < 2:
            return None
        second = second[1].split("peers: second run done", 1)[0]
        m = re.search(r"Extending BFCArena for Cpu\..*?\(requested\) num_bytes: (\d+)", second)
        return int(m.group(1)) if m else None
    return None


def measure(peer, net, work):
    """Runs one peer on one network in a child process; bytes, or the 'n/a (...)' cell."""
    try:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "measure", peer, net, work],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"n/a (timed out after {TIMEOUT_S} s)"
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        tail = [ln for ln in r.stderr.splitlines() if ln.strip()][-1:] or [f"exit {r.returncode}"]
        return f"n/a (crashed: {tail[0][:120]})"
    out = json.loads(lines[-1])
    if "na" in out:
        missing = missing_kernel(r.stderr) if peer == "tflite_micro" else None
        return f"no {missing} kernel" if missing else f"n/a ({out['na']})"
    value = out["bytes"] if out["bytes"] is not None else read_log(peer, r.stderr)
    if value is None:
        with open(os.path.join(work, f"{net}.{peer}.log"), "w") as f:
            f.write(r.stderr)
        return f"n/a (no figure in its log, see {net}.{peer}.log)"
    return value


def versions(binary):
    """Versions of everything measured, for the output."""
    from importlib import metadata
    out = {}
    for d in DISTS:
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            out[d] = "not installed"
    try:
        r = subprocess.run([binary, "--version"], capture_output=True, text=True)
        out["onnx-memplan"] = (r.stdout.strip() or r.stderr.strip()).split("\n")[0]
    except OSError as e:
        out["onnx-memplan"] = f"n/a ({e.strerror})"
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run(["git", "-C", here, "describe", "--always", "--dirty"],
                       capture_output=True, text=True)
    if r.returncode == 0:
        out["onnx-memplan commit"] = r.stdout.strip()
    out["python"] = sys.version.split()[0]
    return out


def cell(v):
    """A table cell: bytes with thousands separators, or the n/a text."""
    return f"{v:,}" if isinstance(v, int) else str(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    m = sub.add_parser("measure", help="(internal) one peer on one network")
    m.add_argument("peer", choices=sorted(PEERS))
    m.add_argument("net", choices=NETS)
    m.add_argument("work")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--bin", default=os.path.join(here, "target", "release", "onnx-memplan"))
    ap.add_argument("--only", nargs="+", choices=NETS, help="networks to measure (default: all)")
    ap.add_argument("--peers", nargs="+", choices=COLUMNS, help="columns to measure (default: all)")
    ap.add_argument("--work", help="folder for the exported models (default: a temporary one)")
    ap.add_argument("--json", help="also write the table and versions as JSON here")
    a = ap.parse_args()
    if a.cmd == "measure":
        return measure_main(a.peer, a.net, a.work)

    work = a.work or tempfile.mkdtemp(prefix="peers-")
    os.makedirs(work, exist_ok=True)
    cols = a.peers or COLUMNS
    rows = {}
    for net in a.only or NETS:
        row = {}
        try:
            onnx_path(net, work)
            exported = None
        except Exception as e:
            exported = f"n/a (ONNX export: {type(e).__name__}: {first_line(e)})"
        for col in cols:
            if col in ("ours", "ours_split", "onnxruntime") and exported:
                row[col] = exported
            elif col in ("ours", "ours_split"):
                try:
                    row[col] = run_ours(a.bin, net, work, col == "ours_split")
                except (NotAvailable, OSError) as e:
                    row[col] = f"n/a ({first_line(e)})"
            else:
                row[col] = measure(col, net, work)
            print(f"peers: {net} {col}: {cell(row[col])}", file=sys.stderr, flush=True)
        rows[net] = row

    ver = versions(a.bin)
    print("| network | " + " | ".join(h for c, h in zip(COLUMNS, HEADERS) if c in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for net, row in rows.items():
        print(f"| {TITLES[net]} | " + " | ".join(cell(row[c]) for c in COLUMNS if c in cols) + " |")
    print()
    print("Bytes; float32, batch 1, 224×224 (BERT: 128 token ids); random weights. Versions: "
          + ", ".join(f"{k} {v}" for k, v in ver.items()) + ".")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"columns": list(cols), "rows": rows, "versions": ver}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
