#!/usr/bin/env python3
"""onnxruntime conformance check for onnx-memplan.

    python scripts/ort_check.py --bin target/release/onnx-memplan --models models --out /tmp/ortcheck

For every *.onnx under --models (files named *.memplan.onnx are skipped) this:
  (a) binds the symbolic dims of the model's inputs (names containing "batch" -> 1, anything else
      -> 16, or what --manifest / --dim say) and runs
          BIN plan MODEL -o OUT/<stem>.memplan.onnx --table OUT/<stem>.memplan.json --dim NAME=N ...
      (with --range NAME=LO..HI: `--dim NAME=LO..HI --at NAME=N` instead, the plan over the range
      evaluated at the binding);
  (b) runs onnx.checker.check_model(annotated, full_check=True) and checks that the annotated model
      keeps the original's nodes and initializers and carries the memplan metadata;
  (c) runs the original and the annotated model in onnxruntime (CPU EP, graph optimizations disabled,
      one intra-op thread) on the same seeded random inputs and requires bit-identical outputs;
      when the table has split chains (`plan --split auto`, the annotated model is a rewritten
      model), outputs must be bit-identical or within 1e-5 of the output's largest magnitude, and
      the maximum difference is printed; `BIN verify ANNOTATED TABLE` must accept the table;
  (d) runs a copy of the original (of the annotated model when split) with every intermediate tensor
      made a graph output and checks that
      each table entry of kind input/output/intermediate has exactly the dtype, shape and byte size
      onnxruntime produced (and the annotated model's value_info agrees);
  (e) checks the table itself: every runtime tensor listed exactly once, schedule is a topological
      order, first/last match the schedule, buffers that are live at the same step never share bytes
      unless one is the in-place/alias partner of the other, offsets aligned and inside the arena
      (a strided view: its offset a multiple of its element size, its bytes the elements at its
      strides, so views interleaved with other tensors' elements share no byte);
  (f) runs the annotated (or rewritten) model for real inside its arenas, node by node at the
      table's offsets (scripts/arena_run.py, with dead tensors' bytes poisoned after each step):
      its outputs must be bit-identical to the same run with a private buffer per tensor.
Prints one summary line per model (and the mismatches), exits 1 if any model failed.

With split chains, (b) checks the rewritten model's graph inputs, outputs and metadata, and that
every tile node the table's `splits` names is in it (and each global pool it replaced by
reductions of bands is gone), instead of node-for-node equality.

Random inputs: floats ~ N(0, 1); integer inputs in [0, 100), narrowed to the row count of an
embedding table they index (Gather on an initializer), names with "mask" -> 0/1 (first column 1),
"token_type"/"segment" -> 0/1, "position" -> 0..n-1; bool -> random.
"""
from __future__ import annotations

import argparse
import copy
import fnmatch
import json
import os
import subprocess
import sys
import time
import zlib
from collections import defaultdict

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from arena_run import qdq_units, run_in_arena, subgraph_reads

RUNTIME_KINDS = ("input", "output", "intermediate")
MAX_LIST = 25  # mismatches printed per category


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------
def np_dtype_name(dt: np.dtype) -> str:
    dt = np.dtype(dt)
    if dt.kind in ("O", "U", "S"):
        return "string"
    return dt.name  # float32, float16, float64, int64, int32, int8, uint8, bool, ...


def onnx_elem_to_name(elem: int) -> str | None:
    if elem == onnx.TensorProto.STRING:
        return "string"
    if elem == onnx.TensorProto.BFLOAT16:
        return "bfloat16"
    try:
        return np_dtype_name(helper.tensor_dtype_to_np_dtype(elem))
    except Exception:
        return None


def graph_inputs(model: onnx.ModelProto):
    inits = {i.name for i in model.graph.initializer} | {i.name for i in model.graph.sparse_initializer}
    return [i for i in model.graph.input if i.name not in inits]


def symbolic_dims(model: onnx.ModelProto) -> list[str]:
    names = []
    for vi in graph_inputs(model):
        if not vi.type.HasField("tensor_type"):
            continue
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param and d.dim_param not in names:
                names.append(d.dim_param)
    return names


def default_binding(name: str) -> int:
    return 1 if "batch" in name.lower() else 16


def input_shapes(model, bindings) -> tuple[dict[str, list[int]], list[str]]:
    """Concrete shape of every graph input, and the names of inputs that had anonymous dims."""
    shapes, anonymous = {}, []
    for vi in graph_inputs(model):
        tt = vi.type.tensor_type
        shape = []
        for d in tt.shape.dim:
            if d.HasField("dim_value") and d.dim_value >= 0:  # Paddle writes unknown dims as -1
                shape.append(d.dim_value)
            elif d.HasField("dim_param") and d.dim_param in bindings:
                shape.append(bindings[d.dim_param])
            else:
                shape.append(1)
                if vi.name not in anonymous:
                    anonymous.append(vi.name)
        shapes[vi.name] = shape
    return shapes, anonymous


def index_bounds(model) -> dict[str, int]:
    """For inputs used as Gather indices into an initializer: the size of the gathered axis."""
    inits = {i.name: list(i.dims) for i in model.graph.initializer}
    bounds = {}
    for n in model.graph.node:
        if n.op_type == "Gather" and len(n.input) >= 2 and n.input[0] in inits:
            axis = 0
            for a in n.attribute:
                if a.name == "axis":
                    axis = a.i
            dims = inits[n.input[0]]
            if dims:
                size = dims[axis % len(dims)]
                bounds[n.input[1]] = min(bounds.get(n.input[1], size), size)
    return bounds


def make_feeds(model, shapes, seed, int_high=None) -> dict[str, np.ndarray]:
    bounds = index_bounds(model)
    feeds = {}
    for vi in graph_inputs(model):
        name = vi.name
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        shape = shapes[name]
        elem = vi.type.tensor_type.elem_type
        if elem == onnx.TensorProto.STRING:
            feeds[name] = np.array(["x"] * int(np.prod(shape)), dtype=object).reshape(shape)
            continue
        dt = helper.tensor_dtype_to_np_dtype(elem)
        low = name.lower()
        if dt == np.bool_:
            a = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dt, np.integer):
            if "mask" in low:
                a = rng.integers(0, 2, size=shape)
                if a.ndim >= 1 and a.shape[-1] > 0:
                    a[..., 0] = 1
            elif "token_type" in low or "segment" in low:
                a = rng.integers(0, 2, size=shape)
            elif "position" in low and len(shape) >= 1:
                a = np.broadcast_to(np.arange(shape[-1]), shape).copy()
            else:
                hi = 100 if int_high is None else int_high
                if name in bounds:
                    hi = min(hi, bounds[name])
                if np.iinfo(dt).max < hi:
                    hi = int(np.iinfo(dt).max) + 1
                a = rng.integers(0, max(hi, 1), size=shape)
            a = a.astype(dt)
        elif np.issubdtype(dt, np.floating):
            a = rng.standard_normal(size=shape).astype(dt)
        else:
            a = np.zeros(shape, dtype=dt)
        # np.ascontiguousarray would turn a 0-d scalar into shape (1,)
        feeds[name] = np.array(a, order="C")
    return feeds


def session(path_or_bytes, threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    return ort.InferenceSession(path_or_bytes, so, providers=["CPUExecutionProvider"])


def run(path, feeds, threads) -> dict[str, object]:
    sess = session(path, threads)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def bit_equal(a, b) -> bool:
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return repr(a) == repr(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "O":
        return bool(np.array_equal(a, b))
    return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def close_diff(a, b, rel=1e-5):
    """The largest absolute difference when b is within rel of a's largest magnitude, else None."""
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return None
    if a.dtype != b.dtype or a.shape != b.shape or a.dtype.kind != "f":
        return None
    diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))
    scale = float(np.max(np.abs(a.astype(np.float64)), initial=0.0))
    return diff if diff <= rel * scale else None


def node_reads(node) -> list[str]:
    return [i for i in node.input if i] + sorted(subgraph_reads(node))


def shape_list(a) -> list[int]:
    return [int(d) for d in a.shape]


# ----------------------------------------------------------------------------------------------
# the per-model check
# ----------------------------------------------------------------------------------------------
class Result:
    def __init__(self, name):
        self.name = name
        self.problems: dict[str, list[str]] = defaultdict(list)
        self.notes: list[str] = []
        self.info: dict[str, object] = {}

    def bad(self, cat, msg):
        self.problems[cat].append(msg)

    @property
    def ok(self):
        return not self.problems

    def count(self):
        return sum(len(v) for v in self.problems.values())


def check_one(path: str, a, manifest_entry: dict) -> Result:
    stem = os.path.basename(path)[: -len(".onnx")]
    res = Result(os.path.basename(path))
    t0 = time.time()
    model = onnx.load(path)
    n_nodes = len(model.graph.node)

    # ---- (a) bindings and the tool run -------------------------------------------------------
    bindings = {}
    for d in symbolic_dims(model):
        bindings[d] = default_binding(d)
    bindings.update(manifest_entry.get("bindings", {}))
    for kv in a.dim:
        k, v = kv.split("=", 1)
        if k in bindings or a.dim_force:
            bindings[k] = int(v)
    shapes, anonymous = input_shapes(model, bindings)
    for name, shp in manifest_entry.get("input_shapes", {}).items():
        shapes[name] = list(shp)
        if name in anonymous:
            anonymous.remove(name)
    res.info["bind"] = " ".join(f"{k}={v}" for k, v in bindings.items()) or "-"
    print(f"  {res.name}: binding {res.info['bind']}"
          + (f"; anonymous dims in {anonymous} -> 1 via --input-shape" if anonymous else ""),
          flush=True)

    out_model = os.path.join(a.out, stem + ".memplan.onnx")
    out_table = os.path.join(a.out, stem + ".memplan.json")
    if a.bin:
        for f in (out_model, out_table):
            if os.path.exists(f):
                os.remove(f)
        cmd = [a.bin, "plan", path, "-o", out_model, "--table", out_table]
        ranges = dict(r.split("=", 1) for r in a.range)
        for k, v in bindings.items():
            if k in ranges:  # plan the range, write it evaluated at the binding
                cmd += ["--dim", f"{k}={ranges[k]}", "--at", f"{k}={v}"]
            else:
                cmd += ["--dim", f"{k}={v}"]
        for name in anonymous + list(manifest_entry.get("input_shapes", {})):
            cmd += ["--input-shape", f"{name}=" + "x".join(str(d) for d in shapes[name])]
        for name, value in manifest_entry.get("input_values", {}).items():
            cmd += ["--input-value", f"{name}=" + ",".join(str(v) for v in np.ravel(value))]
        cmd += a.tool_arg
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            res.bad("tool", f"timed out after {a.timeout}s: {' '.join(cmd)}")
            return res
        res.info["stderr"] = p.stderr.strip().splitlines()[-1:] if p.stderr.strip() else []
        if p.returncode != 0:
            tail = "\n      ".join(p.stderr.strip().splitlines()[-8:])
            cat = "unsupported" if p.returncode == 2 else "tool"
            res.bad(cat, f"exit {p.returncode}: {' '.join(cmd)}\n      {tail}")
            return res
    else:  # --no-bin: check an existing table/annotated model in --out (useful while developing)
        if not os.path.exists(out_table):
            res.bad("tool", f"--bin not given and {out_table} does not exist")
            return res
    res.info["tool_s"] = time.time() - t0

    try:
        with open(out_table) as f:
            table = json.load(f)
    except Exception as e:
        res.bad("table", f"cannot read {out_table}: {e}")
        return res
    annotated = None
    if os.path.exists(out_model):
        try:
            annotated = onnx.load(out_model)
        except Exception as e:
            res.bad("annotated", f"cannot load {out_model}: {e}")
    else:
        res.bad("annotated", f"{out_model} was not written")

    split = bool((table.get("splits") or {}).get("chains"))
    # ---- (b) checker + structure of the annotated model --------------------------------------
    if annotated is not None:
        try:
            onnx.checker.check_model(out_model, full_check=True)
        except Exception as e:
            msg = str(e).strip().splitlines()[0][:400]
            try:  # an input model that fails the checker itself (e.g. ORT-fused ops) is not our bug
                onnx.checker.check_model(path, full_check=True)
                res.bad("checker", msg)
            except Exception as e0:
                res.notes.append("checker fails on the input model too: "
                                 + str(e0).strip().splitlines()[0][:200])
        check_annotated_structure(model, annotated, table, res, split)
        if split and a.bin:
            p = subprocess.run([a.bin, "verify", out_model, out_table], capture_output=True,
                               text=True, timeout=a.timeout)
            if p.returncode != 0:
                res.bad("verify", f"`verify` of the rewritten model exits {p.returncode}: "
                                  f"{p.stdout.strip()} {p.stderr.strip()}"[:400])

    # ---- (c) same outputs -------------------------------------------------------------------
    feeds = make_feeds(model, shapes, a.seed, manifest_entry.get("int_high"))
    for name, value in manifest_entry.get("input_values", {}).items():
        feeds[name] = np.asarray(value, dtype=feeds[name].dtype).reshape(feeds[name].shape)
    try:
        ref = run(path, feeds, a.threads)
    except Exception as e:
        res.bad("ort", f"original model does not run in onnxruntime: {str(e).strip()[:300]}")
        return res
    if annotated is not None:
        try:
            got = run(out_model, feeds, a.threads)
            if list(got) != list(ref):
                res.bad("outputs", f"output names differ: {list(ref)} vs {list(got)}")
            worst = 0.0
            for k, v in ref.items():
                if k in got and not bit_equal(v, got[k]):
                    diff = close_diff(v, got[k]) if split else None
                    if diff is None:
                        res.bad("outputs", f"{k}: annotated model's output is not bit-identical")
                    else:
                        worst = max(worst, diff)
            res.info["max_diff"] = worst
        except Exception as e:
            res.bad("outputs", f"annotated model does not run: {str(e).strip()[:300]}")

    # ---- (d) every intermediate from onnxruntime vs the table --------------------------------
    produced = dict(ref)
    produced.update(feeds)
    full = copy.deepcopy(annotated if split and annotated is not None else model)
    have = {o.name for o in full.graph.output}
    extra = []
    for n in full.graph.node:
        for o in n.output:
            if o and o not in have:
                have.add(o)
                extra.append(o)
    full.graph.output.extend(helper.make_empty_tensor_value_info(o) for o in extra)
    full_path = os.path.join(a.out, stem + ".allouts.onnx")
    try:
        if full.ByteSize() > 1_800_000_000:
            onnx.save(full, full_path, save_as_external_data=True,
                      location=stem + ".allouts.data")
            allouts = run(full_path, feeds, a.threads)
        else:
            allouts = run(full.SerializeToString(), feeds, a.threads)
        produced.update(allouts)
    except Exception as e:
        res.bad("ort", f"all-outputs copy does not run: {str(e).strip()[:300]}")
    finally:
        for f in (full_path, os.path.join(a.out, stem + ".allouts.data")):
            if os.path.exists(f):
                os.remove(f)
    check_table_types(table, produced, res, model)
    check_branches(model, table, produced, res)
    if annotated is not None:
        check_value_info(annotated, produced, res)

    # ---- (e) the table on its own -------------------------------------------------------------
    check_table_plan(annotated if split and annotated is not None else model, table, res)

    # ---- (f) the plan run for real inside its arenas ------------------------------------------
    if annotated is not None and not a.no_arena_run:
        problem, arena_info = run_in_arena(annotated, table, feeds)
        if problem:
            res.bad("arena", problem)
        elif arena_info.get("skipped"):
            res.notes.append("arena run skipped: " + arena_info["skipped"])
        else:
            res.info["arena_run"] = "ok"

    res.info["total_s"] = time.time() - t0
    res.info["nodes"] = n_nodes
    res.info["tensors"] = len(table.get("tensors", []))
    arenas = table.get("arenas", [])
    res.info["arena"] = sum(int(x.get("bytes", 0)) for x in arenas)
    st = table.get("stats", {})
    res.info["lb"] = st.get("lower_bound_bytes")
    res.info["naive"] = st.get("naive_bytes")
    res.info["planner"] = st.get("planner")
    return res


def check_branches(model, table, produced, res):
    """Each If the table lists with a taken branch: when its condition is a top-level tensor (an
    If of the main graph, or a nested one whose condition comes from the main graph), the branch
    onnxruntime takes (condition true -> then_branch) must be the table's."""
    for choice in table.get("branches", []):
        graph, node = model.graph, None
        parts = choice["node"].split("/")
        for i, part in enumerate(parts):
            if i % 2 == 1:  # an attribute name between node names
                graph = next((helper.get_attribute_value(at) for at in node.attribute
                              if at.name == part), None)
                if graph is None:
                    break
                continue
            node = next((n for k, n in enumerate(graph.node)
                         if n.name == part or (not n.name and part == f"#{k}")), None)
            if node is None:
                break
        if node is None or node.op_type != "If":
            res.bad("branches", f"{choice['node']}: no such If node")
            continue
        cond = produced.get(node.input[0])
        if cond is None:
            res.notes.append(f"branch of {choice['node']} not checked: condition "
                             f"'{node.input[0]}' is not a top-level tensor")
            continue
        taken = "then_branch" if bool(np.ravel(cond)[0]) else "else_branch"
        if taken != choice["taken"]:
            res.bad("branches", f"{choice['node']}: table takes {choice['taken']}, "
                                f"onnxruntime takes {taken}")
        else:
            res.info["branches_checked"] = res.info.get("branches_checked", 0) + 1


def check_annotated_structure(model, annotated, table, res, split=False):
    def key(n):
        return n.SerializeToString(deterministic=True)

    if split:
        names = {n.name for n in annotated.graph.node}
        chains = table["splits"]["chains"]
        for k, chain in enumerate(chains):
            # A later chain nesting in this one replaces the tiles and glue its nodes name.
            recut = {nd["node"] for later in chains[k + 1:] if k in later.get("within", [])
                     for nd in later["nodes"]}
            for nd in chain.get("nodes", []):
                for tile in nd.get("tiles", []):
                    if tile not in names and tile not in recut:
                        res.bad("annotated", f"split tile node {tile} is not in the rewritten model")
            for glue in chain.get("glue", []):
                if glue not in names and glue not in recut:
                    res.bad("annotated", f"split node {glue} is not in the rewritten model")
            for later in chain.get("within", []):
                if later >= k:
                    res.bad("annotated", f"chain {k} is within chain {later}, not an earlier one")
            for pool in chain.get("pools", []):
                for by in pool["by"]:
                    if by not in names:
                        res.bad("annotated", f"node {by} replacing pool {pool['node']} "
                                             "is not in the rewritten model")
                if pool["node"] in names:
                    res.bad("annotated", f"pool {pool['node']} is still in the rewritten model")
        # An initializer the input model's nodes read must still be read, or be gone.
        def read_by(m):
            return {r for n in m.graph.node for r in node_reads(n)}
        declared = {v.name for v in list(annotated.graph.input) + list(annotated.graph.output)}
        was_read, now_read = read_by(model), read_by(annotated)
        for t in annotated.graph.initializer:
            if t.name in was_read and t.name not in now_read and t.name not in declared:
                res.bad("annotated", f"initializer {t.name} is read by no node of the rewritten model")
    else:
        orig_nodes = sorted(key(n) for n in model.graph.node)
        ann_nodes = sorted(key(n) for n in annotated.graph.node)
        if orig_nodes != ann_nodes:
            res.bad("annotated", f"node set differs from the input model "
                                 f"({len(model.graph.node)} vs {len(annotated.graph.node)} nodes)")
        oi = sorted(i.name for i in model.graph.initializer)
        ai = sorted(i.name for i in annotated.graph.initializer)
        if oi != ai:
            res.bad("annotated", "initializer names differ from the input model")
    for what in ("input", "output"):
        on = [v.name for v in getattr(model.graph, what)]
        an = [v.name for v in getattr(annotated.graph, what)]
        if on != an:
            res.bad("annotated", f"graph {what}s differ: {on[:5]} vs {an[:5]}")
    meta = {p.key: p.value for p in annotated.metadata_props}
    if meta.get("memplan.format") != "onnx-memplan/1":
        res.bad("metadata", f"model metadata memplan.format = {meta.get('memplan.format')!r}")
    for ar in table.get("arenas", []):
        k = f"memplan.arena.{ar.get('id')}.bytes"
        if meta.get(k) != str(ar.get("bytes")):
            res.bad("metadata", f"{k} = {meta.get(k)!r}, table says {ar.get('bytes')}")
    if "memplan.alignment" not in meta:
        res.bad("metadata", "model metadata memplan.alignment missing")
    if "memplan.table" not in meta:
        res.bad("metadata", "model metadata memplan.table missing")
    # per-tensor metadata on value_info / inputs / outputs
    vis = {}
    for v in list(annotated.graph.value_info) + list(annotated.graph.input) + list(annotated.graph.output):
        md = {p.key: p.value for p in getattr(v, "metadata_props", [])}
        if md:
            vis[v.name] = md
    for t in table.get("tensors", []):
        if t.get("arena") is None or t.get("offset") is None:
            continue
        md = vis.get(t["name"])
        if md is None:
            res.bad("metadata", f"{t['name']}: planned tensor has no memplan.* metadata_props")
            continue
        want = {"memplan.arena": str(t["arena"]), "memplan.offset": str(t["offset"]),
                "memplan.bytes": str(t["bytes"]), "memplan.lifetime": f"{t['first']}:{t['last']}"}
        if t.get("inplace_of"):
            want["memplan.inplace_of"] = t["inplace_of"]
        if t.get("alias_of"):
            want["memplan.alias_of"] = t["alias_of"]
        for k, v in want.items():
            if md.get(k) != v:
                res.bad("metadata", f"{t['name']}: {k} = {md.get(k)!r}, table says {v!r}")


def check_table_types(table, produced, res, model=None):
    checked = 0
    inits = {i.name: i for i in model.graph.initializer} if model is not None else {}
    for t in table.get("tensors", []):
        name = t.get("name")
        if t.get("kind") not in RUNTIME_KINDS:
            # constants: checked too when onnxruntime computed them (Constant outputs, folded
            # subgraphs) or when they are initializers
            if name in inits and "dtype" in t and "shape" in t:
                init = inits[name]
                dt = onnx_elem_to_name(init.data_type)
                if t.get("dtype") != dt or t.get("shape") != list(init.dims):
                    res.bad("constant", f"{name}: table {t.get('dtype')}{t.get('shape')}, "
                                        f"initializer {dt}{list(init.dims)}")
                continue
            if name not in produced or "dtype" not in t or "shape" not in t:
                continue
        elif name not in produced:
            res.bad("missing-in-ort", f"{name}: in the table (kind {t.get('kind')}) but onnxruntime "
                                      f"did not produce it")
            continue
        arr = produced[name]
        if not isinstance(arr, np.ndarray):
            res.notes.append(f"{name}: onnxruntime returned a {type(arr).__name__}, not checked")
            continue
        checked += 1
        dt, shp = np_dtype_name(arr.dtype), shape_list(arr)
        if t.get("dtype") != dt:
            res.bad("dtype", f"{name}: table {t.get('dtype')}, onnxruntime {dt}")
        bounded = t.get("upper_bound") and len(t.get("shape", [])) == len(shp) \
            and all(r <= b for r, b in zip(shp, t["shape"]))
        if bounded:
            # planned at a bound of its size (data-dependent counts): the run fits inside it
            if dt != "string" and arr.nbytes > (t.get("bytes") or 0):
                res.bad("bytes", f"{name}: onnxruntime {arr.nbytes} bytes exceed the bound "
                                 f"{t.get('bytes')} ({dt}{shp})")
        elif t.get("shape") != shp:
            res.bad("shape", f"{name}: table {t.get('shape')}, onnxruntime {shp}")
        elif dt != "string" and t.get("bytes") != arr.nbytes:
            res.bad("bytes", f"{name}: table {t.get('bytes')}, onnxruntime {arr.nbytes} "
                             f"({dt}{shp})")
    res.info["checked"] = checked


def check_value_info(annotated, produced, res):
    for v in annotated.graph.value_info:
        if v.name not in produced or not v.type.HasField("tensor_type"):
            continue
        arr = produced[v.name]
        if not isinstance(arr, np.ndarray):
            continue
        tt = v.type.tensor_type
        dt = onnx_elem_to_name(tt.elem_type)
        if dt != np_dtype_name(arr.dtype):
            res.bad("value_info", f"{v.name}: elem_type {dt}, onnxruntime {np_dtype_name(arr.dtype)}")
            continue
        if not tt.HasField("shape"):
            res.bad("value_info", f"{v.name}: no shape")
            continue
        dims = tt.shape.dim
        if len(dims) != arr.ndim or any(d.HasField("dim_value") and d.dim_value != s
                                        for d, s in zip(dims, arr.shape)):
            got = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]
            res.bad("value_info", f"{v.name}: shape {got}, onnxruntime {shape_list(arr)}")


def check_table_plan(model, table, res):
    g = model.graph
    n = len(g.node)
    if table.get("format") != "onnx-memplan/1":
        res.bad("table", f"format = {table.get('format')!r}")
    tensors = table.get("tensors", [])
    by_name = {}
    for t in tensors:
        nm = t.get("name")
        if nm in by_name:
            res.bad("coverage", f"{nm}: listed more than once")
        by_name[nm] = t

    # -- coverage: every tensor the runtime holds, exactly once, with the right kind
    inits = {i.name for i in g.initializer} | {i.name for i in g.sparse_initializer}
    outputs = {o.name for o in g.output}
    inputs = {i.name for i in graph_inputs(model)}
    const_out = {o for nd in g.node if nd.op_type == "Constant" and nd.domain in ("", "ai.onnx")
                 for o in nd.output if o}
    # outputs computed from constants alone (e.g. Identity of an initializer): a planner that folds
    # them may call them constants; either kind is accepted for these
    foldable = set(inits) | const_out
    changed = True
    while changed:
        changed = False
        for nd in g.node:
            if (nd.domain in ("", "ai.onnx") and not nd.op_type.startswith("Random")
                    and nd.op_type not in ("Multinomial", "Bernoulli")
                    and not subgraph_reads(nd) and all(i in foldable for i in nd.input if i)):
                new = {o for o in nd.output if o} - foldable
                if new:
                    foldable |= new
                    changed = True
    dq_out = {o for nd in g.node if nd.op_type == "DequantizeLinear" for o in nd.output if o}
    q_in = {nd.input[0] for nd in g.node if nd.op_type == "QuantizeLinear" and nd.input}
    expected = {}
    for i in inputs:
        expected[i] = "input"
    for nd in g.node:
        for o in nd.output:
            if o:
                expected[o] = ("output" if o in outputs else
                               "constant" if o in const_out else "intermediate")
    for nm, kind in expected.items():
        t = by_name.get(nm)
        if t is None:
            if kind != "constant":
                res.bad("coverage", f"{nm}: {kind} tensor missing from the table")
        elif t.get("kind") == "fused":
            # A float tensor inside a QDQ node unit (options.qdq = units): never in an arena,
            # written by a DequantizeLinear or read by a QuantizeLinear.
            near_qdq = nm in dq_out or nm in q_in
            if (kind != "intermediate" and kind != "constant") or not near_qdq \
                    or table.get("options", {}).get("qdq") != "units" or not t.get("node_unit") \
                    or t.get("arena") is not None or t.get("offset") is not None:
                res.bad("coverage", f"{nm}: kind 'fused' for a {kind} tensor outside a QDQ unit")
        elif t.get("kind") != kind and not (t.get("kind") == "constant" and nm in foldable
                                            and kind in ("intermediate", "output")):
            res.bad("coverage", f"{nm}: kind {t.get('kind')!r}, expected {kind!r}")
    for nm, t in by_name.items():
        if nm not in expected and nm not in inits:
            res.bad("coverage", f"{nm}: in the table but not a tensor of the top-level graph")
        if nm in inits and t.get("kind") != "constant":
            res.bad("coverage", f"{nm}: initializer with kind {t.get('kind')!r}")

    # -- schedule is a permutation and a topological order
    sched = table.get("schedule")
    if not isinstance(sched, list) or sorted(sched) != list(range(n)):
        res.bad("schedule", f"not a permutation of 0..{n - 1}")
        return
    step_of_node = {idx: s for s, idx in enumerate(sched)}
    producer_step = {}
    for s, idx in enumerate(sched):
        for o in g.node[idx].output:
            if o:
                producer_step[o] = s
    available = set(inputs) | inits
    topo_bad = 0
    for s, idx in enumerate(sched):
        nd = g.node[idx]
        for i in node_reads(nd):
            if i not in available and i in producer_step:
                topo_bad += 1
                if topo_bad <= 3:
                    res.bad("schedule", f"step {s} (node {idx} {nd.op_type}) reads {i} before it is "
                                        f"produced (step {producer_step[i]})")
        available |= {o for o in nd.output if o}

    # -- lifetimes recomputed from the schedule. A QDQ unit (options.qdq = units) runs its own
    # copy of each DQ feeding its operator: it reads what the DQ reads, until its last step,
    # and not the DQ's output.
    copied = {}
    last_read = {}
    for at, (_, members, _) in qdq_units(model, table).items():
        dqs = [m for m in members if g.node[m].op_type == "DequantizeLinear"]
        ops = [m for m in members if g.node[m].op_type not in ("DequantizeLinear", "QuantizeLinear")]
        for op in ops:
            copied.setdefault(op, set()).update(o for d in dqs for o in g.node[d].output)
        for d in dqs:
            for i in node_reads(g.node[d]):
                last_read[i] = max(last_read.get(i, -1), at)
    for idx in range(n):
        s = step_of_node[idx]
        for i in node_reads(g.node[idx]):
            if i not in copied.get(idx, ()):
                last_read[i] = max(last_read.get(i, -1), s)
    wider = 0
    for nm, t in by_name.items():
        if t.get("kind") not in RUNTIME_KINDS or nm not in expected:
            continue
        first = 0 if nm in inputs else producer_step.get(nm)
        if first is None:
            continue
        last = max(last_read.get(nm, first), first)
        if nm in outputs:
            last = n - 1
        tf, tl = t.get("first"), t.get("last")
        if not isinstance(tf, int) or not isinstance(tl, int):
            res.bad("lifetime", f"{nm}: first/last missing")
        elif tf > first or tl < last:
            res.bad("lifetime", f"{nm}: table [{tf}, {tl}] does not cover [{first}, {last}]")
        elif (tf, tl) != (first, last):
            wider += 1
    if wider:
        res.notes.append(f"{wider} lifetimes are wider than the schedule requires (safe)")

    # -- buffers: alignment, bounds, no overlap between conflicting tensors of different groups
    opts = table.get("options", {})
    align = int(opts.get("alignment", 64) or 1)
    arenas = {ar.get("id"): int(ar.get("bytes", 0)) for ar in table.get("arenas", [])}
    parent = {}

    def find(x):
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x

    planned = [t for t in tensors if t.get("arena") is not None and t.get("offset") is not None]
    for t in planned:
        nm = t["name"]
        if t.get("arena") not in arenas:
            res.bad("plan", f"{nm}: arena {t.get('arena')} is not in arenas")
            continue
        off, end = footprint(t)
        if off < 0 or end > arenas[t["arena"]]:
            res.bad("plan", f"{nm}: [{off}, {end}) outside arena {t['arena']} "
                            f"({arenas[t['arena']]} bytes)")
        # The offset follows from the view's whole (`alias_of`, plus `alias_offset`), else
        # from the tensor it is written over (`inplace_of`, same offset). An entry with both
        # is written over its input and is a view of a larger tensor (a Concat part written
        # where the Concat's output lies): one group with both.
        partner = t.get("alias_of") or t.get("inplace_of")
        if t.get("inplace_of") and t.get("alias_of") and t["inplace_of"] in by_name:
            parent[find(nm)] = find(t["inplace_of"])
        if partner:
            p = by_name.get(partner)
            if p is None or p.get("offset") is None:
                res.bad("plan", f"{nm}: shares bytes with {partner!r}, which has no buffer")
                continue
            parent[find(nm)] = find(partner)
            shift = int(t.get("alias_offset") or 0) if t.get("alias_of") else 0
            want = int(p["offset"]) + shift
            if p.get("arena") != t.get("arena") or off != want:
                res.bad("plan", f"{nm}: offset {off} (arena {t.get('arena')}), expected {want} "
                                f"(arena {p.get('arena')}) from {partner}")
        elif t.get("strides"):
            if off % max(element_size(t), 1):
                res.bad("plan", f"{nm}: strided offset {off} not a multiple of its element size")
        elif off % align:
            res.bad("plan", f"{nm}: offset {off} not a multiple of alignment {align}")
    overlaps = 0
    by_arena = defaultdict(list)
    for t in planned:
        if int(t.get("bytes") or 0) > 0 and isinstance(t.get("first"), int):
            by_arena[t["arena"]].append(t)
    runs_of = {}

    def runs(t):
        if t["name"] not in runs_of:
            runs_of[t["name"]] = byte_runs(t)
        return runs_of[t["name"]]

    for ar, ts in by_arena.items():
        ts.sort(key=lambda t: t["first"])
        active = []
        for t in ts:
            active = [u for u in active if u["last"] >= t["first"]]
            lo, hi = footprint(t)
            for u in active:
                ulo, uhi = footprint(u)
                if (lo < uhi and ulo < hi and find(t["name"]) != find(u["name"])
                        and share_a_byte(runs(t), runs(u))):
                    overlaps += 1
                    if overlaps <= MAX_LIST:
                        res.bad("overlap", f"{t['name']} [{t['first']},{t['last']}] bytes "
                                           f"[{lo},{hi}) overlaps {u['name']} [{u['first']},{u['last']}]"
                                           f" bytes [{ulo},{uhi}) in arena {ar}")
            active.append(t)
    if overlaps > MAX_LIST:
        res.bad("overlap", f"... {overlaps} overlapping pairs in all")
    lb = table.get("stats", {}).get("lower_bound_bytes")
    if isinstance(lb, int) and arenas and sum(arenas.values()) < lb:
        res.bad("plan", f"arena total {sum(arenas.values())} below the lower bound {lb}")


def element_size(t) -> int:
    """Bytes per element of a table entry (its bytes over its element count)."""
    n = int(np.prod(t.get("shape") or [], dtype=np.int64))
    return int(t.get("bytes") or 0) // n if n else 0


def footprint(t):
    """[start, end) of the bytes a table entry spans: row-major `bytes` from `offset`, or for a
    strided view from `offset` to the end of its last element (docs/format.md)."""
    lo = int(t["offset"])
    strides, shape = t.get("strides"), t.get("shape") or []
    if not strides:
        return lo, lo + int(t["bytes"])
    if any(d == 0 for d in shape):
        return lo, lo
    return lo, lo + sum((d - 1) * s for d, s in zip(shape, strides)) + element_size(t)


def byte_runs(t):
    """The sorted [start, end) runs of bytes holding a table entry's elements: one run for a
    row-major tensor; for a strided view, one per contiguous stretch of its innermost axes."""
    lo, hi = footprint(t)
    strides, shape = t.get("strides"), list(t.get("shape") or [])
    if not strides or lo == hi:
        return [(lo, hi)]
    size = element_size(t)
    # Merge the innermost axes that are contiguous into one run length.
    k, run = len(shape), size
    while k > 0 and strides[k - 1] == run:
        run *= shape[k - 1]
        k -= 1
    starts = np.array([lo], dtype=np.int64)
    for d, s in zip(shape[:k], strides[:k]):
        starts = (starts[:, None] + np.arange(d, dtype=np.int64)[None, :] * s).ravel()
    starts.sort()
    return [(int(a), int(a) + run) for a in starts]


def share_a_byte(a, b) -> bool:
    """True when two sorted lists of [start, end) runs intersect."""
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][0] < b[j][1] and b[j][0] < a[i][1]:
            return True
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return False


# ----------------------------------------------------------------------------------------------
def human(b):
    if not isinstance(b, (int, float)):
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if abs(b) < 1024 or unit == "GB":
            return f"{b:.0f}{unit}" if unit == "B" else f"{b:.2f}{unit}"
        b /= 1024


def outputs_note(info) -> str:
    if info.get("max_diff"):
        return f"outputs within 1e-5 (max difference {info['max_diff']:.3g})"
    return "outputs bit-identical"


def collect(paths, only):
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                files += [os.path.join(root, f) for f in names if f.endswith(".onnx")]
        else:
            files.append(p)
    files = sorted(f for f in files if not f.endswith(".memplan.onnx")
                   and not f.endswith(".allouts.onnx"))
    if only:
        files = [f for f in files if any(fnmatch.fnmatch(os.path.basename(f), o) for o in only)]
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description="onnxruntime conformance check for onnx-memplan",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__)
    ap.add_argument("--bin", help="path to the onnx-memplan binary (omit with --no-bin)")
    ap.add_argument("--no-bin", action="store_true",
                    help="do not run the tool; check OUT/<stem>.memplan.{onnx,json} that exist")
    ap.add_argument("--models", nargs="+", default=["models"], help="model files or directories")
    ap.add_argument("--out", required=True, help="directory for the annotated models and tables")
    ap.add_argument("--manifest", help="zoo manifest.json with per-file bindings / input_shapes")
    ap.add_argument("--only", nargs="*", help="glob patterns on the file name")
    ap.add_argument("--dim", action="append", default=[],
                    help="NAME=N: override the binding of a symbolic dim the model has")
    ap.add_argument("--dim-force", action="store_true", help="pass --dim bindings even if unused")
    ap.add_argument("--range", action="append", default=[],
                    help="NAME=LO..HI: plan that dim over the range and write the plan evaluated "
                         "at its binding (`plan --dim NAME=LO..HI --at NAME=N`)")
    ap.add_argument("--tool-arg", action="append", default=[],
                    help="extra argument passed to `BIN plan` (repeatable)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-arena-run", action="store_true",
                    help="skip (f), the run inside the arenas (slow on very large models)")
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per tool run")
    ap.add_argument("--allow-unsupported", action="store_true",
                    help="a tool exit code 2 (unsupported model) is a skip, not a failure")
    a = ap.parse_args()
    if not a.bin and not a.no_bin:
        ap.error("--bin is required (or --no-bin)")
    if a.bin and not os.path.exists(a.bin):
        ap.error(f"--bin {a.bin} does not exist")
    os.makedirs(a.out, exist_ok=True)
    manifest = {}
    if a.manifest:
        with open(a.manifest) as f:
            m = json.load(f)
        for e in m.get("models", m if isinstance(m, list) else []):
            manifest[os.path.basename(e["file"])] = e
    files = collect(a.models, a.only)
    if not files:
        print("no models found", file=sys.stderr)
        return 1
    print(f"ort_check: {len(files)} models, onnx {onnx.__version__}, onnxruntime {ort.__version__}, "
          f"numpy {np.__version__}", flush=True)
    passed = failed = skipped = 0
    for f in files:
        try:
            r = check_one(f, a, manifest.get(os.path.basename(f), {}))
        except Exception as e:  # a bug in this script or an unreadable model
            r = Result(os.path.basename(f))
            r.bad("crash", f"{type(e).__name__}: {e}")
        i = r.info
        if r.ok:
            passed += 1
            lb, ar = i.get("lb"), i.get("arena")
            ratio = f"{ar / lb:.3f}" if isinstance(lb, int) and lb > 0 else "?"
            print(f"PASS {r.name}: [{i.get('bind')}] {i.get('nodes')} nodes, {i.get('tensors')} "
                  f"tensors ({i.get('checked')} checked vs ORT), arena {human(ar)} / lower bound "
                  f"{human(lb)} = {ratio}, naive {human(i.get('naive'))}, planner {i.get('planner')}, "
                  f"{outputs_note(i)}"
                  + (f", {i['branches_checked']} If branches as in onnxruntime"
                     if "branches_checked" in i else "")
                  + (", ran inside its arenas" if i.get("arena_run") else "")
                  + f" ({i.get('total_s', 0):.1f}s)", flush=True)
        elif a.allow_unsupported and set(r.problems) == {"unsupported"}:
            skipped += 1
            print(f"SKIP {r.name}: unsupported: {r.problems['unsupported'][0]}", flush=True)
        else:
            failed += 1
            cats = ", ".join(f"{k} {len(v)}" for k, v in r.problems.items())
            print(f"FAIL {r.name}: [{i.get('bind', '-')}] {r.count()} problems ({cats})", flush=True)
            for k, v in r.problems.items():
                for msg in v[:MAX_LIST]:
                    print(f"    {k}: {msg}")
                if len(v) > MAX_LIST:
                    print(f"    {k}: ... and {len(v) - MAX_LIST} more")
        for note in r.notes[:5]:
            print(f"    note: {note}")
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
