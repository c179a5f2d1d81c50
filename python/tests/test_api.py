"""The Python API against the installed wheel: every model of models/, chaining after onnxsim,
onnxslim and onnxruntime's offline optimizer with onnxruntime outputs compared, external data,
bad input, the CLI script of the wheel, tables identical to the CLI's, the GIL and Ctrl-C.
Run by .ci/run in a fresh venv (MEMPLAN_ROOT: the repository)."""

import hashlib
import inspect
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_memplan
from onnx_memplan import _native
from onnx_memplan._options import OUTPUT_FLAGS, PLAN_OPTIONS, plan_flags, python_terms

ROOT = Path(os.environ.get("MEMPLAN_ROOT", Path(__file__).resolve().parents[2]))
MODELS = sorted(p for p in (ROOT / "models").glob("*.onnx") if ".memplan." not in p.name)
# The symbolic dims of models/ (models/make_models.py exports them).
DIMS = {"batch": 1, "sequence": 16}
# The wheel's script, installed beside this interpreter.
CLI = str(Path(sys.executable).parent / "onnx-memplan")


def dims_of(model):
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(str(model), load_external_data=False)
    names = {d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    return {k: v for k, v in DIMS.items() if k in names}


def dim_flags(dims):
    return [x for k, v in dims.items() for x in ("--dim", f"{k}={v}")]


def random_inputs(model):
    feeds = {}
    rng = np.random.default_rng(0)
    inits = {i.name for i in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        t = inp.type.tensor_type
        shape = [d.dim_value if d.dim_value else DIMS[d.dim_param] for d in t.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(t.elem_type)
        if np.issubdtype(dtype, np.integer):
            # Token ids, masks and token types: 0 and 1 are valid for all of them.
            feeds[inp.name] = rng.integers(0, 2, size=shape).astype(dtype)
        else:
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def run_ort(model, feeds):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_runs_identically(model, annotated):
    """onnxruntime gives bit-identical outputs for the model and its annotated copy."""
    feeds = random_inputs(model)
    expected = run_ort(model, feeds)
    got = run_ort(annotated, feeds)
    assert len(expected) == len(got) > 0
    for a, b in zip(expected, got):
        np.testing.assert_array_equal(a, b)


def schema_checked(table):
    """The table, after checking it against the contract's JSON Schema."""
    import jsonschema

    schema = json.loads((ROOT / "docs" / "memplan-table.schema.json").read_text())
    jsonschema.validate(table, schema)
    return table


def without_timings(summary):
    return {k: v for k, v in summary.items() if k not in ("plan_ms", "total_ms")}


def cli(*args, check=False):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, check=check)


def test_every_cli_flag_is_in_the_api():
    flags = dict(_native.plan_flags())
    mapped = {flag for flag, _, _ in PLAN_OPTIONS.values()} | set(OUTPUT_FLAGS)
    assert set(flags) - mapped == set(), "CLI flags the API lacks"
    assert {f for f, _, _ in PLAN_OPTIONS.values()} - set(flags) == set(), "API options the CLI lacks"
    params = inspect.signature(onnx_memplan.plan).parameters
    assert set(params) == set(PLAN_OPTIONS) | {"model", "base_dir"}
    for keyword, (flag, default, to_flags) in PLAN_OPTIONS.items():
        # plan()'s default is the table's, and it means what the CLI's default means: no flag,
        # or the flag with the CLI's own default value.
        assert params[keyword].default == default, keyword
        passed = to_flags(default) if default is not None else []
        value = passed[0].partition("=")[2] if passed else None
        assert passed == [] or (passed[0] == f"{flag}={value}" and same_value(value, flags[flag])), keyword


def same_value(a, b):
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def test_keywords_become_the_cli_flags():
    # Written by hand from the README's flags.
    flags = plan_flags(dict(
        dims={"batch": 1, "sequence": (1, 512)},
        input_shapes={"x": (1, 3, 8, 8), "s": ()},
        input_values={"sr": 16000, "ids": [1, 2, 3]},
        time_limit=-1,
        inplace=False,
        trust_value_info=True,
        tiers=["sram:2MiB:1:64", ("dram", "1GiB", 200, 8)],
        partition="units.json",
    ))
    assert flags == [
        "--dim", "batch=1", "--dim", "sequence=1..512",
        "--input-shape", "x=1x3x8x8", "--input-shape", "s=scalar",
        "--input-value", "sr=16000", "--input-value", "ids=1,2,3",
        "--time-limit=-1", "--no-inplace", "--trust-value-info",
        "--tier", "sram:2MiB:1:64", "--tier", "dram:1GiB:200:8",
        "--partition=units.json",
    ]


def test_input_values_fold_a_reshape_like_the_cli(tmp_path):
    """Reshape(x, shape) with `shape` a graph input: its output size is unknown until the
    value is bound (worked by hand: 16 floats as 2x8, 64 bytes)."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Relu", ["r"], ["y"])],
        "reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    path = tmp_path / "reshape.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(onnx_memplan.InputError):
        onnx_memplan.plan(path)
    plan = onnx_memplan.plan(path, input_values={"shape": [2, 8]})
    table = schema_checked(plan.table)
    assert table["options"]["input_values"] == {"shape": "2,8"}
    assert {t["name"]: t["shape"] for t in table["tensors"]}["y"] == [2, 8]
    # The same names as plan()'s default files (the table records the annotated model's digest,
    # and the annotated model names the table's file).
    run = cli("plan", path, "-o", tmp_path / "reshape.memplan.onnx", "--input-value", "shape=2,8")
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "reshape.memplan.json").read_text()) == table


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_every_model_plans_like_the_cli(path, tmp_path):
    assert len(MODELS) >= 5
    dims = dims_of(path)
    plan = onnx_memplan.plan(path, dims=dims)
    table = schema_checked(plan.table)
    assert table["model"]["file"] == path.name
    assert plan.arena_bytes == sum(a["bytes"] for a in table["arenas"]) > 0
    assert plan.lower_bound_bytes <= plan.arena_bytes <= plan.naive_bytes
    assert onnx_memplan.verify(path, table) == []
    assert plan.summary.startswith(f"{path.name}: arena {plan.arena_bytes} bytes")
    assert plan.svg().lstrip().startswith("<svg") and "<html" in plan._repr_html_().lower()
    # The CLI of the wheel, same options: the same table, and the same summary.
    out = tmp_path / f"{path.stem}.memplan.onnx"
    run = cli("plan", path, "-o", out, "--json", *dim_flags(dims))
    assert run.returncode == 0, run.stderr
    cli_table = json.loads((tmp_path / f"{path.stem}.memplan.json").read_text())
    assert cli_table == table
    assert without_timings(json.loads(run.stdout)) == without_timings(plan.summary_dict)
    # save() writes the files the CLI writes, byte for byte.
    api_dir = tmp_path / "api"
    api_dir.mkdir()
    model_out, table_out = plan.save(api_dir / out.name)
    assert Path(table_out).read_bytes() == (tmp_path / f"{path.stem}.memplan.json").read_bytes()
    assert Path(model_out).read_bytes() == out.read_bytes()
    # .model is the annotated model: it names its table and runs as the input does.
    meta = {p.key: p.value for p in plan.model.metadata_props}
    assert meta["memplan.table"] == Path(table_out).name
    onnx.checker.check_model(plan.model, full_check=True)
    assert_runs_identically(onnx.load(str(path)), plan.model)


def test_split_plan_matches_the_cli(tmp_path):
    """--split auto rewrites resnet_small (one chain tiled): the table describes the annotated,
    rewritten model, by the name and SHA-256 the CLI gives it."""
    path = ROOT / "models" / "resnet_small.onnx"
    plan = onnx_memplan.plan(path, dims={"batch": 1}, split="auto")
    table = schema_checked(plan.table)
    assert table["splits"]["chains"], "resnet_small is split"
    run = cli("plan", path, "-o", tmp_path / "resnet_small.memplan.onnx", "--dim", "batch=1", "--split", "auto")
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "resnet_small.memplan.json").read_text()) == table
    annotated = plan.model.SerializeToString()
    assert annotated == (tmp_path / "resnet_small.memplan.onnx").read_bytes()
    assert table["model"] == {**table["model"], "file": "resnet_small.memplan.onnx",
                              "sha256": hashlib.sha256(annotated).hexdigest()}
    assert onnx_memplan.verify(plan.model, table) == []


def test_model_in_memory_is_named_so(tmp_path):
    model = onnx.load(str(ROOT / "models" / "mobilenet_v2.onnx"))
    plan = onnx_memplan.plan(model)
    assert plan.table["model"]["file"] == ""
    assert plan.summary.startswith("<model>: arena ")
    # Its files are named after the path given to save(), and the same bytes as plan() of bytes.
    model_out, table_out = plan.save(tmp_path / "m.memplan.onnx")
    assert Path(table_out) == tmp_path / "m.memplan.json"
    # Equal but for the annotated model's digest: the saved model names its table file.
    again = onnx_memplan.plan(model.SerializeToString()).table
    del again["model"]["annotated_sha256"], plan.table["model"]["annotated_sha256"]
    assert again == plan.table


def onnxsim_step(model):
    import onnxsim

    simplified, ok = onnxsim.simplify(model)
    assert ok
    return simplified


def onnxslim_step(model):
    import onnxslim

    return onnxslim.slim(model)


def ort_offline_step(model, tmp_path):
    """onnxruntime's offline optimizer at ORT_ENABLE_ALL (com.microsoft fusions, NCHWc)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return onnx.load(opts.optimized_model_filepath)


CHAINS = [
    ("resnet_small", ["onnxsim"]),
    ("mobilenet_v2", ["onnxslim"]),
    ("bert_tiny", ["onnxsim", "onnxslim"]),
    ("vit_tiny", ["onnxslim", "onnxsim"]),
    ("unet_small", ["onnxsim", "ort"]),
]


@pytest.mark.parametrize("stem,steps", CHAINS, ids=lambda c: c if isinstance(c, str) else "+".join(c))
def test_chained_after_simplifiers_outputs_identical(stem, steps, tmp_path):
    original = onnx.load(str(ROOT / "models" / f"{stem}.onnx"))
    model = original
    for step in steps:
        if step == "ort":
            model = ort_offline_step(model, tmp_path)
        else:
            model = {"onnxsim": onnxsim_step, "onnxslim": onnxslim_step}[step](model)
    plan = onnx_memplan.plan(model, dims=dims_of(model))
    assert schema_checked(plan.table)["model"]["file"] == ""
    assert plan.lower_bound_bytes <= plan.arena_bytes <= plan.naive_bytes
    assert onnx_memplan.verify(model, plan.table) == []
    assert_runs_identically(model, plan.model)
    # The tools kept the model's meaning (they may reorder float sums, so not bit for bit).
    feeds = random_inputs(original)
    for a, b in zip(run_ort(original, feeds), run_ort(plan.model, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


def external_model(tmp_path):
    w = np.arange(64, dtype=np.float32).reshape(8, 8)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    onnx.save(model, str(data_dir / "ext.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="ext.bin", size_threshold=0)
    return data_dir


def test_model_proto_with_external_data(tmp_path):
    data_dir = external_model(tmp_path)
    proto = onnx.load(str(data_dir / "ext.onnx"), load_external_data=False)
    assert proto.graph.initializer[0].data_location == TensorProto.EXTERNAL
    plan = onnx_memplan.plan(proto, base_dir=data_dir)
    names = {t["name"]: t for t in plan.table["tensors"]}
    # Worked by hand: w is a constant (no arena); h is 1x8 float32, 32 bytes.
    assert names["w"]["kind"] == "constant" and names["w"]["offset"] is None
    assert names["h"]["bytes"] == 32
    assert onnx_memplan.verify(proto, plan.table, base_dir=data_dir) == []
    # The same model by path plans the same tensors.
    by_path = onnx_memplan.plan(data_dir / "ext.onnx")
    assert by_path.table["tensors"] == plan.table["tensors"]
    # Saved elsewhere, the external data file comes along and the model runs.
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    model_out, _ = plan.save(out_dir / "ext.memplan.onnx")
    assert (out_dir / "ext.bin").read_bytes() == (data_dir / "ext.bin").read_bytes()
    saved = onnx.load(model_out)
    x = np.ones((1, 8), np.float32)
    expected = np.maximum(x @ np.arange(64, dtype=np.float32).reshape(8, 8), 0)
    np.testing.assert_array_equal(run_ort(saved, {"x": x})[0], expected)
    # Without the right base_dir the data is not found: a clear InputError naming the file.
    with pytest.raises(onnx_memplan.InputError, match="ext.bin"):
        onnx_memplan.plan(proto, base_dir=tmp_path)


def test_bad_input_raises_input_error(tmp_path):
    assert issubclass(onnx_memplan.InputError, ValueError)
    with pytest.raises(onnx_memplan.InputError, match="not a valid ONNX model"):
        onnx_memplan.plan(b"not a model")
    with pytest.raises(onnx_memplan.InputError, match="cannot read"):
        onnx_memplan.plan(tmp_path / "missing.onnx")
    resnet = ROOT / "models" / "resnet_small.onnx"
    with pytest.raises(onnx_memplan.InputError, match="unbound symbols: batch"):
        onnx_memplan.plan(resnet)
    with pytest.raises(onnx_memplan.InputError, match="alignment"):
        onnx_memplan.plan(resnet, dims={"batch": 1}, alignment=0)
    with pytest.raises(onnx_memplan.InputError, match="magic"):
        onnx_memplan.plan(resnet, dims={"batch": 1}, planner="magic")
    with pytest.raises(onnx_memplan.InputError, match="lots"):
        onnx_memplan.plan(resnet, dims={"batch": 1}, budget="lots")
    with pytest.raises(onnx_memplan.InputError, match="time_limit"):
        onnx_memplan.plan(resnet, dims={"batch": 1}, time_limit=-1)
    with pytest.raises(TypeError):
        onnx_memplan.plan(12)
    with pytest.raises(onnx_memplan.InputError):
        onnx_memplan.verify(resnet, {"format": "something else"})
    # The message is the CLI's one line, and no file was written.
    run = cli("plan", resnet, "-o", tmp_path / "r.onnx")
    assert run.returncode == 2
    with pytest.raises(onnx_memplan.InputError) as err:
        onnx_memplan.plan(resnet)
    assert python_terms(run.stderr.strip().removeprefix("error: ")) == str(err.value)
    assert "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_verify_reports_a_tampered_table():
    path = ROOT / "models" / "mobilenet_v2.onnx"
    table = onnx_memplan.plan(path).table
    placed = [t for t in table["tensors"]
              if t["offset"] is not None and t["inplace_of"] is None and t["alias_of"] is None]
    # Two tensors live at the same step, moved to the same offset: the verifier must object.
    a, b = next((a, b) for i, a in enumerate(placed) for b in placed[i + 1:]
                if a["first"] <= b["last"] and b["first"] <= a["last"] and a["offset"] != b["offset"])
    b["offset"] = a["offset"]
    problems = onnx_memplan.verify(path, table)
    assert any(a["name"] in p and b["name"] in p for p in problems), problems


def test_shapes_agree_with_onnx_shape_inference():
    path = ROOT / "models" / "resnet_small.onnx"
    typed = onnx_memplan.shapes(path, dims={"batch": 1})
    ref = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    ours = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in typed.graph.value_info}
    theirs = {v.name: [d.dim_value or d.dim_param for d in v.type.tensor_type.shape.dim] for v in ref.graph.value_info}
    assert ours and set(ours) == set(theirs)
    for name, shape in theirs.items():
        assert [1 if d == "batch" else d for d in shape] == ours[name], name


def test_cli_from_the_wheel(tmp_path):
    # The installed wheel is under test, not the checkout's python/ folder.
    assert ROOT / "python" not in Path(onnx_memplan.__file__).resolve().parents
    assert Path(CLI).is_file()
    run = cli("--version", check=True)
    assert run.stdout.strip() == f"onnx-memplan {onnx_memplan.__version__}"
    path = ROOT / "models" / "mobilenet_v2.onnx"
    out = tmp_path / "m.memplan.onnx"
    run = cli("plan", path, "-o", out, check=True)
    assert run.stderr.startswith("mobilenet_v2.onnx: arena ")
    run = cli("verify", path, tmp_path / "m.memplan.json", check=True)
    assert "valid plan" in run.stderr
    # The annotated model plan wrote verifies against its table too (issue 33, item 6).
    run = cli("verify", out, tmp_path / "m.memplan.json")
    assert run.returncode == 0 and "valid plan" in run.stderr, run.stderr
    run = cli("plan", tmp_path / "missing.onnx")
    assert run.returncode == 2 and run.stderr.startswith("error: ") and "missing.onnx" in run.stderr


def fragmenting_model(path, buffers=400, seed=1):
    """A model whose plan the exact planner cannot prove optimal quickly: `buffers` Expand
    outputs of random sizes (64 B to 256 KiB) with random, overlapping lifetimes (each one is
    reduced into a running sum up to 120 steps after it is made)."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("ReduceSum", ["x"], ["c"], keepdims=1)]
    inits, ends, running = [], {}, "c"

    def consume(k, tag):
        nonlocal running
        nodes.append(helper.make_node("ReduceSum", [f"e{k}"], [f"q{k}"], keepdims=1))
        nodes.append(helper.make_node("Add", [running, f"q{k}"], [f"c{k}_{tag}"]))
        running = f"c{k}_{tag}"

    for m in range(buffers):
        inits.append(numpy_helper.from_array(np.array([1, 16 * int(rng.integers(1, 4096))], np.int64), f"s{m}"))
        nodes.append(helper.make_node("Expand", [running, f"s{m}"], [f"e{m}"]))
        ends.setdefault(m + int(rng.integers(1, 120)), []).append(m)
        for k in ends.pop(m, []):
            consume(k, m)
    for k in sorted(k for ks in ends.values() for k in ks):
        consume(k, "end")
    nodes.append(helper.make_node("Identity", [running], ["y"]))
    graph = helper.make_graph(nodes, "fragmenting", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_plan_releases_the_gil(tmp_path):
    path = fragmenting_model(tmp_path / "fragmenting.onnx")
    ticks = []
    done = threading.Event()

    def ticker():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.002)

    thread = threading.Thread(target=ticker)
    thread.start()
    start = time.perf_counter()
    # The exact search spends its whole work budget here (1 to 5 s of one core).
    plan = onnx_memplan.plan(path, planner="exact", work=300_000_000, time_limit=60)
    elapsed = time.perf_counter() - start
    done.set()
    thread.join()
    assert "work-budget" in {s["ended_by"] for s in plan.table["stats"]["searches"]}
    during = [t for t in ticks if start <= t <= start + elapsed]
    # With the GIL held by plan() the ticker would not run at all until it returns; free, it
    # ticks every 2 ms or so (less often on a loaded machine).
    assert elapsed > 0.2 and len(during) >= max(10, elapsed / 0.05), (elapsed, len(during))


def test_ctrl_c_interrupts_a_long_search(tmp_path):
    path = fragmenting_model(tmp_path / "fragmenting.onnx")
    # Ctrl-C raises KeyboardInterrupt, as in an interactive interpreter, whatever the test was
    # launched with (a shell starts background jobs with SIGINT ignored); only the first press
    # raises, so a later one cannot land outside the `raises` block.
    pressed = []

    def on_ctrl_c(signum, frame):
        if not pressed:
            pressed.append(signum)
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    done = threading.Event()

    def press_ctrl_c():
        # Every half second until plan() returns, as a user presses Ctrl-C again when one
        # press goes unseen (one did once, on a machine loaded with four other jobs).
        while not done.wait(0.5):
            os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c)
    start = time.perf_counter()
    presser.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            # Without Ctrl-C this search runs for its 60 s time limit.
            onnx_memplan.plan(path, planner="exact", work=10**15, time_limit=60)
    finally:
        done.set()
        presser.join()
        signal.signal(signal.SIGINT, previous)
    elapsed = time.perf_counter() - start
    assert elapsed < 15, elapsed
    # The interpreter is still usable, and the next plan runs normally.
    assert onnx_memplan.plan(ROOT / "models" / "mobilenet_v2.onnx").arena_bytes > 0


def test_readme_python_chain_runs(tmp_path, monkeypatch):
    """The README's five-line chain, run as written (writing into tmp_path instead of /tmp)."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(block.strip().splitlines()) == 5
    monkeypatch.chdir(ROOT)
    exec(compile(block.replace("/tmp/", f"{tmp_path}/"), "README.md", "exec"), {})
    table = json.loads((tmp_path / "resnet_small.memplan.json").read_text())
    saved = onnx.load(str(tmp_path / "resnet_small.memplan.onnx"))
    assert table["model"]["file"] == "" and table["options"]["dims"] == {"batch": 1}
    assert {p.key: p.value for p in saved.metadata_props}["memplan.table"] == "resnet_small.memplan.json"


def test_header_keyword_writes_the_cli_header(tmp_path):
    path = ROOT / "models" / "mobilenet_v2.onnx"
    run = cli("plan", path, "-o", tmp_path / "cli.memplan.onnx", "--header", tmp_path / "cli.h", "--header-all")
    assert run.returncode == 0, run.stderr
    plan = onnx_memplan.plan(path, header=tmp_path / "py.h", header_all=True)
    written = (tmp_path / "py.h").read_text()
    # The same header as the command line's (the macros prefixed after the model's stem).
    assert written == (tmp_path / "cli.h").read_text() == plan.header(all=True)
    assert "#define MOBILENET_V2_TENSOR_COUNT" in written
    io_only = plan.header()
    assert "#define MOBILENET_V2_TENSOR_COUNT 2\n" in io_only  # input and logits
    # A model in memory: the prefix is MODEL.
    assert "#define MODEL_MEMPLAN_H" in onnx_memplan.plan(path.read_bytes()).header()


def test_errors_name_keywords_not_flags(tmp_path):
    resnet = ROOT / "models" / "resnet_small.onnx"

    def message(*args, **kwargs):
        with pytest.raises(onnx_memplan.InputError) as err:
            onnx_memplan.plan(*args, **kwargs)
        text = str(err.value)
        assert "--" not in text and "\n" not in text, text
        return text

    assert "bind them with dims={'batch': N}" in message(resnet)
    assert "invalid value {'batch': 'one'} for dims" in message(resnet, dims={"batch": "one"})
    # The possible values survive, as Python strings.
    text = message(resnet, dims={"batch": 1}, schedule="fast")
    assert "invalid value 'fast' for schedule" in text and "(possible values: 'stored', 'memory')" in text
    text = message(resnet, dims={"batch": 1}, planner="magic")
    assert "for planner" in text and "exact" in text and "--" not in text, text
    assert message(resnet, dims={"batch": 1}, time_limit=-1).startswith("time_limit must be")
    assert message(resnet, dims={"batch": 1}, budget=0).startswith("budget must be above 0")
    assert "give a range with dims={'NAME': (LO, HI)}" in message(resnet, dims={"batch": 1}, at={"batch": 1})
    # A model in memory is `<model>`, without a folder.
    text = message(resnet.read_bytes())
    assert text.startswith("<model>: cannot size") and "in-memory" not in text, text
    with pytest.raises(onnx_memplan.InputError, match=r"^<model>: not a valid ONNX model"):
        onnx_memplan.plan(b"not a model", base_dir=tmp_path)


def test_verify_accepts_the_annotated_model(tmp_path):
    """verify(plan.model, plan.table) and the files save() wrote; a changed weight is refused."""
    path = ROOT / "models" / "mobilenet_v2.onnx"
    plan = onnx_memplan.plan(path, schedule="memory")
    assert onnx_memplan.verify(plan.model, plan.table) == []
    model_out, table_out = plan.save(tmp_path / "m.memplan.onnx")
    assert onnx_memplan.verify(model_out, table_out) == []
    assert onnx_memplan.verify(path, table_out) == []
    run = cli("verify", model_out, table_out)
    assert run.returncode == 0, run.stderr
    tampered = plan.model
    weight = next(t for t in tampered.graph.initializer if t.raw_data)
    weight.raw_data = bytes([weight.raw_data[0] ^ 0x40]) + weight.raw_data[1:]
    with pytest.raises(onnx_memplan.InputError, match="different file"):
        onnx_memplan.verify(tampered, plan.table)
