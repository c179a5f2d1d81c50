#!/usr/bin/env python3
"""Run a planned model for real inside its arenas, at the table's offsets.

    python scripts/arena_run.py --model OUT.memplan.onnx --table OUT.memplan.json [--dim NAME=N ...]

The model the table describes (the annotated model; with `--split auto` the rewritten one) runs
node by node in the table's `schedule`. Every tensor the table places in an arena lives only
there: one byte buffer per arena, the tensor at its `offset` (a strided view where the table gives
`strides`). Each node reads its inputs out of the buffer and its outputs are written back into
it; constants and tensors the table leaves out of the arenas (`--exclude-io`) are held aside.
Each node runs in onnxruntime as a one-node model (CPU, graph optimizations off, one thread), so
the arithmetic is onnxruntime's.

To catch a plan that lets a live tensor be overwritten, or relies on bytes after their tensor is
dead, the buffers start filled with 0xFF (NaN for floats), and after each step the bytes of every
tensor read for the last time are refilled with 0xFF, except bytes that a tensor still live covers.

The same node-by-node run with a private buffer per tensor is the reference: the outputs from the
arena must be bit-identical to it. A node whose output is larger than the bytes the table gives
it (a data-dependent size above its bound, say) is a failure too. Prints one line; exits 1 on a
failure. `run_in_arena` is what scripts/ort_check.py calls for its step (f).

A table with QDQ node units (`options.qdq` = `units`: tensors of kind `fused`) runs each unit as
one onnxruntime model: its DequantizeLinear nodes (a DQ that other nodes read too, in each
unit reading it, as a copy), its operator and its QuantizeLinear nodes, at the unit's last
step. The model reads and writes only the unit's integer tensors, at the table's offsets; its
float tensors never exist outside it.

Tables of the tier (`hierarchy`), budget (`offload`) and unit (`partition`) modes move or convert
tensors between steps, which this runner does not model; they are reported as not run.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

POISON = 0xFF
MOVING_MODES = ("hierarchy", "offload", "partition")


def subgraph_reads(node) -> set[str]:
    """Names a node's subgraphs (If/Loop/Scan bodies, recursively) read from the enclosing scope."""
    out = set()

    def walk(g, outer_defined):
        defined = set(outer_defined)
        defined |= {i.name for i in g.input} | {i.name for i in g.initializer}
        defined |= {i.name for i in g.sparse_initializer}
        for n in g.node:
            for i in n.input:
                if i and i not in defined:
                    out.add(i)
            for a in n.attribute:
                for sg in ([a.g] if a.type == onnx.AttributeProto.GRAPH else
                           list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else []):
                    walk(sg, defined)
            defined |= {o for o in n.output if o}
        for o in g.output:
            if o.name and o.name not in defined:
                out.add(o.name)

    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            walk(a.g, set())
        elif a.type == onnx.AttributeProto.GRAPHS:
            for g in a.graphs:
                walk(g, set())
    return out


class ArenaError(Exception):
    """The plan is wrong for this run: an output does not fit the bytes the table gives it."""


def _value_info(name: str, value) -> onnx.ValueInfoProto:
    if isinstance(value, list):  # a sequence of tensors
        elem = helper.np_dtype_to_tensor_dtype(value[0].dtype) if value else onnx.TensorProto.FLOAT
        return helper.make_tensor_sequence_value_info(name, elem, None)
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype),
                                         list(value.shape))


class NodeRunner:
    """Runs single nodes of `model` in onnxruntime, one cached session per node and input types."""

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.constants = {t.name: t for t in model.graph.initializer}
        self.sessions: dict[tuple, ort.InferenceSession] = {}

    def reads(self, node) -> list[str]:
        """The values a node reads: its inputs, then what its subgraphs read from outside."""
        names = [i for i in node.input if i]
        names += sorted(subgraph_reads(node) - set(names))
        return list(dict.fromkeys(names))

    def run(self, index, node, values: dict[str, object], outputs=None) -> dict[str, object]:
        """Runs `node` (or a list of nodes, a QDQ unit, returning only `outputs`)."""
        nodes = node if isinstance(node, list) else [node]
        if outputs is None:
            outputs = [o for n in nodes for o in n.output if o]
        fed = {k: v for k, v in values.items() if k not in self.constants}
        key = (index,) + tuple(
            (k, v.dtype.str, v.shape) if isinstance(v, np.ndarray) else (k, "seq", len(v))
            for k, v in sorted(fed.items()))
        sess = self.sessions.get(key)
        if sess is None:
            graph = helper.make_graph(
                nodes, f"step{index}",
                [_value_info(k, v) for k, v in fed.items()],
                [helper.make_empty_tensor_value_info(o) for o in outputs],
                initializer=[self.constants[k] for k in values if k in self.constants])
            one = helper.make_model(graph, opset_imports=self.model.opset_import,
                                    ir_version=self.model.ir_version)
            one.functions.extend(self.model.functions)
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            so.intra_op_num_threads = 1
            so.inter_op_num_threads = 1
            so.log_severity_level = 3
            sess = ort.InferenceSession(one.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"])
            self.sessions[key] = sess
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(names, fed)))


class Arenas:
    """The arena buffers and where each planned tensor lives in them."""

    def __init__(self, table: dict):
        self.buffers = {a["id"]: np.full(int(a["bytes"]), POISON, dtype=np.uint8)
                        for a in table.get("arenas", [])}
        self.entries = {t["name"]: t for t in table.get("tensors", [])
                        if t.get("arena") is not None and t.get("offset") is not None}
        self.shapes: dict[str, tuple] = {}

    def holds(self, name: str) -> bool:
        return name in self.entries

    def _view(self, entry: dict, dtype: np.dtype, shape: tuple) -> np.ndarray:
        """The tensor's bytes in its arena as an array (numpy refuses a view past the end)."""
        buf = self.buffers[entry["arena"]]
        if int(np.prod(shape, dtype=np.int64)) == 0:
            return np.empty(shape, dtype)
        strides = entry.get("strides")
        if strides is None or tuple(shape) != tuple(entry.get("shape") or ()):
            strides = None  # row-major (a data-dependent size below its bound starts at offset)
        try:
            return np.ndarray(shape, dtype, buf.data, int(entry["offset"]),
                              None if strides is None else tuple(strides))
        except (TypeError, ValueError) as e:
            raise ArenaError(f"'{entry['name']}' does not fit its arena: {e}") from e

    def store(self, name: str, value: np.ndarray) -> None:
        entry = self.entries[name]
        planned = entry.get("bytes")
        if planned is not None and value.nbytes > int(planned):
            raise ArenaError(f"'{name}' is {value.nbytes} bytes, the table gives it {planned}")
        if int(entry["offset"]) + value.nbytes > self.buffers[entry["arena"]].size:
            raise ArenaError(f"'{name}' ends past its arena")
        self._view(entry, value.dtype, value.shape)[...] = value
        self.shapes[name] = (value.dtype, value.shape)

    def load(self, name: str) -> np.ndarray:
        dtype, shape = self.shapes[name]
        return np.array(self._view(self.entries[name], dtype, shape), copy=True)

    def span(self, name: str) -> tuple[int, int, int]:
        """(arena, start, end) covering every byte the tensor may use."""
        e = self.entries[name]
        shape = e.get("shape") or []
        strides = e.get("strides")
        nbytes = int(e.get("bytes") or 0)
        if strides is not None and shape and all(d > 0 for d in shape):
            item = nbytes // max(1, int(np.prod(shape)))
            nbytes = sum((d - 1) * s for d, s in zip(shape, strides)) + item
        return e["arena"], int(e["offset"]), int(e["offset"]) + nbytes

    def poison_dead(self, dead: list[str], live: list[str]) -> None:
        """Refill the bytes of `dead` tensors that no `live` tensor covers."""
        keep: dict[int, list[tuple[int, int]]] = {}
        for name in live:
            a, s, e = self.span(name)
            keep.setdefault(a, []).append((s, e))
        for name in dead:
            a, s, e = self.span(name)
            cuts = sorted(k for k in keep.get(a, []) if k[0] < e and k[1] > s)
            pos = s
            for ks, ke in cuts:
                if ks > pos:
                    self.buffers[a][pos:ks] = POISON
                pos = max(pos, ke)
            if pos < e:
                self.buffers[a][pos:e] = POISON


def run_order(model: onnx.ModelProto, table: dict) -> list[int]:
    """The node indices of `model` step by step: the table's `schedule` indexes the input
    model's nodes, while the annotated model (`memplan.format` in its metadata) already has them
    in the planned order."""
    if any(p.key == "memplan.format" for p in model.metadata_props):
        return list(range(len(model.graph.node)))
    return table.get("schedule") or list(range(len(model.graph.node)))


def fused_tensors(table: dict) -> set[str]:
    """The names of the table's `fused` tensors: the float tensors inside QDQ node units."""
    return {t["name"] for t in table.get("tensors", []) if t.get("kind") == "fused"}


def qdq_units(model: onnx.ModelProto, table: dict) -> dict[int, tuple[str, list[int], list[str]]]:
    """The QDQ units of a table, by the schedule step they run at (the last of their nodes):
    (name, node indices, the integer tensors they write). A unit's operator is a node other
    than a Q or DQ that reads or writes a `fused` tensor; its nodes are the DQs writing its
    inputs (each unit runs its own copy of a DQ that other nodes read too, as onnxruntime
    does), itself and the Qs reading its fused outputs. A unit writes only what its operator
    and Qs write outside it."""
    fused = fused_tensors(table)
    if not fused:
        return {}
    nodes = model.graph.node
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    outputs = {o.name for o in model.graph.output}
    readers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for x in n.input:
            readers.setdefault(x, []).append(i)
    step = {n: s for s, n in enumerate(run_order(model, table))}
    units = {}
    for i, n in enumerate(nodes):
        if n.op_type in ("QuantizeLinear", "DequantizeLinear") \
                or not any(x in fused for x in list(n.input) + list(n.output)):
            continue
        dqs = [producer[x] for x in n.input if x in producer and x not in outputs
               and nodes[producer[x]].op_type == "DequantizeLinear"]
        qs = [q for o in n.output if o in fused for q in readers.get(o, [])]
        members = sorted(set(dqs + [i] + qs), key=lambda m: step[m])
        writes = [o for m in [i] + qs for o in nodes[m].output if o and o not in fused]
        units[max(step[m] for m in [i] + qs)] = (n.name or f"#{i}", members, writes)
    return units


def _live_after(entry: dict, step: int) -> bool:
    """The tensor is read after `step` (graph outputs are read after the last step)."""
    return int(entry.get("last", -1)) > step or entry.get("kind") == "output"


def _execute(model, table, feeds, runner: NodeRunner, arenas: Arenas | None, watch=None):
    """Runs every step; tensors the arenas hold live there, the rest in a dict.

    Returns (graph outputs, every value held aside). With `watch` (every value of a run with
    private buffers), each live tensor in the arenas is compared with it after every step, and
    the first one that changed is raised as an ArenaError naming the step that overwrote it.
    """
    graph = model.graph
    aside: dict[str, object] = {}

    def put(name, value):
        if arenas is not None and arenas.holds(name) and isinstance(value, np.ndarray) \
                and value.dtype.kind not in "OUS":
            arenas.store(name, value)
        else:
            aside[name] = value

    def get(name):
        if name in aside:
            return aside[name]
        if arenas is not None and name in arenas.shapes:
            return arenas.load(name)
        raise ArenaError(f"'{name}' is read before any step wrote it")

    for name, value in feeds.items():
        put(name, value)
    for init in graph.initializer:
        aside.setdefault(init.name, None)  # the runner supplies initializers itself
    schedule = run_order(model, table)
    # The reference run (private buffers) runs every node literally.
    units = qdq_units(model, table) if arenas is not None else {}
    # A unit's DQ whose output is planned (other nodes read it too) also runs at its own step.
    fused = fused_tensors(table)
    in_unit = {m for _, members, _ in units.values() for m in members
               if graph.node[m].op_type != "DequantizeLinear"
               or any(o in fused for o in graph.node[m].output)}
    for step, index in enumerate(schedule):
        node = graph.node[index]
        values = {}
        if step in units:  # the unit's last node: run the whole unit
            _, members, writes = units[step]
            nodes = [graph.node[m] for m in members]
            made = {o for n in nodes for o in n.output}
            reads = [r for n in nodes for r in runner.reads(n) if r not in made]
            for name in dict.fromkeys(reads):
                values[name] = None if name in runner.constants else get(name)
            outs = runner.run(("unit", index), nodes, values, writes)
        elif index in in_unit:
            outs = {}
        else:
            for name in runner.reads(node):
                values[name] = None if name in runner.constants else get(name)
            outs = runner.run(index, node, values)
        for name, value in outs.items():
            put(name, value)
        if arenas is not None:
            dead = [n for n, e in arenas.entries.items()
                    if e.get("last") == step and e.get("kind") != "output"]
            if dead:
                live = [n for n, e in arenas.entries.items()
                        if n in arenas.shapes and _live_after(e, step)]
                arenas.poison_dead(dead, live)
        if watch is not None and arenas is not None:
            for n, e in arenas.entries.items():
                if n in arenas.shapes and _live_after(e, step) \
                        and not _same_bits(arenas.load(n), watch[n]):
                    raise ArenaError(
                        f"'{n}' (written at step {e.get('first')}, read until step "
                        f"{e.get('last')}) was overwritten at step {step} by node "
                        f"'{node.name or node.op_type}' ({node.op_type}, outputs "
                        f"{[o for o in node.output if o]})")
    result = {o.name: get(o.name) for o in graph.output}
    return result, aside


def _same_bits(a, b) -> bool:
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and \
            np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    return repr(a) == repr(b)


def run_in_arena(model: onnx.ModelProto, table: dict, feeds: dict) -> tuple[str | None, dict]:
    """Runs `model` inside its arenas and with private buffers.

    Returns (problem or None, info). info has `outputs` (from the arenas), `steps` and `arena`.
    """
    for mode in MOVING_MODES:
        if table.get(mode):
            return None, {"skipped": f"{mode} tables move tensors between steps"}
    runner = NodeRunner(model)
    info = {"steps": len(run_order(model, table)),
            "arena": sum(int(a["bytes"]) for a in table.get("arenas", []))}
    try:
        private, every = _execute(model, table, feeds, runner, None)
    except Exception as e:  # the model itself does not run node by node: not the plan's fault
        return None, dict(info, skipped=f"node-by-node run fails: {str(e).strip()[:200]}")
    try:
        got, _ = _execute(model, table, feeds, runner, Arenas(table))
    except ArenaError as e:
        return f"in the arena: {e}", info
    info["outputs"] = got
    for name, want in private.items():
        if not _same_bits(want, got.get(name)):
            bad = got.get(name)
            diff = ""
            if isinstance(bad, np.ndarray) and bad.shape == want.shape and want.dtype.kind == "f":
                diff = f", max difference {float(np.nanmax(np.abs(bad - want), initial=0)):.3g}"
                diff += f", {int(np.isnan(bad).sum())} NaN (poisoned bytes read)"
            try:  # run again, checking every live tensor after each step, to name the culprit
                _execute(model, table, feeds, runner, Arenas(table), watch=every)
            except ArenaError as e:
                diff += f"; {e}"
            return f"output '{name}' differs from the run with private buffers{diff}", info
    return None, info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the model the table describes")
    ap.add_argument("--table", required=True)
    ap.add_argument("--dim", action="append", default=[], help="NAME=N for the random inputs")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    from ort_check import input_shapes, make_feeds  # the same random inputs as the ORT check

    model = onnx.load(a.model)
    with open(a.table) as f:
        table = json.load(f)
    bindings = dict((k, int(v)) for k, v in (d.split("=", 1) for d in a.dim))
    bindings.update({k: int(v) for k, v in (table.get("options", {}).get("dims") or {}).items()})
    shapes, _ = input_shapes(model, bindings)
    feeds = make_feeds(model, shapes, a.seed)
    problem, info = run_in_arena(model, table, feeds)
    if info.get("skipped"):
        print(f"{a.model}: not run: {info['skipped']}")
        return 0
    if problem:
        print(f"{a.model}: FAIL {problem}")
        return 1
    print(f"{a.model}: ok, {info['steps']} steps inside {info['arena']} arena bytes, outputs "
          "bit-identical to the run with private buffers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
