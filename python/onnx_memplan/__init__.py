"""Static memory planning for ONNX models.

    import onnx, onnxsim, onnx_memplan
    model, _ = onnxsim.simplify(onnx.load("model.onnx"))
    plan = onnx_memplan.plan(model, dims={"batch": 1})
    print(plan.summary)
    plan.save("model.memplan.onnx")      # and model.memplan.json beside it

Every intermediate tensor gets a fixed offset in one arena, checked by an independent verifier
before anything is returned. The table's format is docs/format.md of the repository.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._options import plan_flags, python_terms

__all__ = ["plan", "verify", "shapes", "Plan", "InputError", "__version__"]

try:
    from importlib.metadata import version as _version

    __version__ = _version("onnx-memplan")
except Exception:  # pragma: no cover - running from a source tree without metadata
    __version__ = "unknown"

InputError = _native.InputError
InputError.__module__ = __name__


def _call(function: Any, *args: Any) -> Any:
    """Calls the binding; an InputError's message is put in plan()'s terms (keywords instead
    of command-line flags)."""
    try:
        return function(*args)
    except InputError as e:
        raise InputError(python_terms(str(e))) from None

ModelLike = Any  # onnx.ModelProto | bytes | str | os.PathLike
"""A model: an `onnx.ModelProto`, its serialized bytes, or a path to a `.onnx` file."""


def _source(model: ModelLike, base_dir: Any) -> Tuple[Optional[str], Optional[bytes], Optional[str]]:
    """(path, data, base_dir) for the binding."""
    if isinstance(model, (str, os.PathLike)):
        if base_dir is not None:
            raise TypeError("base_dir is for a model given in memory; a file's external data is in its folder")
        return os.fspath(model), None, None
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
    elif hasattr(model, "SerializeToString"):
        data = model.SerializeToString()
    else:
        raise TypeError(f"model must be an onnx.ModelProto, bytes or a path, not {type(model).__name__}")
    return None, data, None if base_dir is None else os.fspath(base_dir)


def _model_out(data: bytes) -> Any:
    """An onnx.ModelProto when the onnx package is importable, else the bytes."""
    try:
        import onnx
    except ImportError:
        return data
    return onnx.load_from_string(data)


class Plan:
    """A verified memory plan of a model (returned by :func:`plan`)."""

    def __init__(self, native: Any) -> None:
        self._native = native
        self._table: Optional[Dict[str, Any]] = None

    @property
    def table(self) -> Dict[str, Any]:
        """The allocation table as a dict: exactly the JSON of `<stem>.memplan.json`."""
        if self._table is None:
            self._table = json.loads(self._native.table_json())
        return self._table

    @property
    def model(self) -> Any:
        """The annotated model (an onnx.ModelProto when onnx is importable, else bytes); its
        metadata names the table `<stem>.memplan.json` (`<stem>`: the model file's, else
        `model`)."""
        model = _model_out(self._native.annotated())
        self._table = None  # a split plan's table names the annotated model
        return model

    @property
    def arena_bytes(self) -> int:
        """Bytes of all arenas together."""
        return sum(a["bytes"] for a in self.table["arenas"])

    @property
    def lower_bound_bytes(self) -> int:
        """No arena is smaller for this order and these buffers."""
        return int(self.table["stats"]["lower_bound_bytes"])

    @property
    def naive_bytes(self) -> int:
        """Bytes without any reuse (each tensor in its own padded buffer)."""
        return int(self.table["stats"]["naive_bytes"])

    @property
    def summary(self) -> str:
        """The one-line summary the command line prints."""
        return str(self._native.summary())

    @property
    def summary_dict(self) -> Dict[str, Any]:
        """The summary as a dict (what `onnx-memplan plan --json` prints)."""
        return dict(json.loads(self._native.summary_json()))

    @property
    def warnings(self) -> List[str]:
        """Declared types that disagree with inference."""
        return list(self._native.warnings())

    def save(self, path: Union[str, "os.PathLike[str]"], table: Union[str, "os.PathLike[str]", None] = None) -> Tuple[str, str]:
        """Writes the annotated model at `path` and the table (default: `<stem>.memplan.json`
        beside it) as `onnx-memplan plan -o path` does; returns both paths."""
        out, tab = _call(self._native.save, os.fspath(path), None if table is None else os.fspath(table))
        self._table = None  # a split plan's table now names the written model
        return os.fspath(out), os.fspath(tab)

    def svg(self, colour_by: str = "kind") -> str:
        """The space-time diagram (steps across, addresses up) as SVG text; `colour_by` is
        `"kind"` or `"tier"`."""
        return str(self._native.svg(colour_by))

    def html(self, colour_by: str = "kind") -> str:
        """The HTML report: the summary, the diagram and the tables."""
        return str(self._native.html(colour_by))

    def header(self, all: bool = False) -> str:
        """The C header of the plan (what `onnx-memplan plan --header` writes): arena sizes,
        the alignment, the model's SHA-256 and the offsets of the graph inputs and outputs, or
        with `all=True` of every placed tensor; macros are prefixed after the model's stem
        (`MODEL` for a model in memory)."""
        return str(self._native.header(all))

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        return f"<onnx_memplan.Plan: {self.summary}>"

    def __str__(self) -> str:
        return self.summary


def plan(
    model: ModelLike,
    *,
    dims: Optional[Mapping[str, Union[int, Tuple[int, int]]]] = None,
    at: Optional[Mapping[str, int]] = None,
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    input_values: Optional[Mapping[str, Union[int, float, Sequence[Union[int, float]]]]] = None,
    trust_value_info: bool = False,
    schedule: str = "stored",
    qdq: str = "units",
    planner: str = "auto",
    alignment: int = 64,
    time_limit: float = 1.0,
    work: Optional[int] = None,
    inplace: bool = True,
    alias: bool = True,
    include_io: bool = True,
    split: Optional[str] = None,
    split_overhead: Optional[float] = None,
    split_time: Optional[float] = None,
    budget: Union[int, str, None] = None,
    search_time: Optional[float] = None,
    search_work: Optional[int] = None,
    tiers: Optional[Sequence[Union[str, Sequence[Any]]]] = None,
    segment: Optional[int] = None,
    partition: Union[Mapping[str, Any], str, "os.PathLike[str]", None] = None,
    header: Union[str, "os.PathLike[str]", None] = None,
    header_all: bool = False,
    base_dir: Union[str, "os.PathLike[str]", None] = None,
) -> Plan:
    """Plans a model's memory: every intermediate tensor at a fixed offset in one arena.

    Runs the same pass as `onnx-memplan plan` (docs/guide/options.md), and the
    plan is checked by the independent verifier before it is returned. Each keyword is one
    flag of the command line, with the same default:

    - model: an onnx.ModelProto, its serialized bytes, or a path. A path's external data is
      read from its folder; for a model in memory, from `base_dir` (default: the current folder).
    - dims: symbolic dimension bindings, e.g. {"batch": 1}, or ranges planned once for every
      size in them, e.g. {"sequence": (1, 512)} (--dim sequence=1..512).
    - at: with ranges, the plan over them evaluated at one size, e.g. {"sequence": 128} (--at):
      a fixed plan and the model specialised to that size.
    - input_shapes: whole input shapes, e.g. {"images": (1, 3, 224, 224)} (--input-shape).
    - input_values: input values to fold, e.g. {"sr": 16000, "ids": [1, 2, 3]}
      (--input-value); the plan then holds only for runs fed those values.
    - trust_value_info: use declared types for operators without a shape rule.
    - schedule: "stored" or "memory" (a memory-aware order with a lower peak).
    - qdq: "units" (each DequantizeLinear -> operator -> QuantizeLinear pattern runs as one
      integer kernel whose float tensors take no arena bytes) or "literal" (every node as
      written) (--qdq).
    - planner: "auto" (best of the portfolio) or one planner by name ("greedy-by-size", ...).
    - alignment: every offset is a multiple of it, in bytes.
    - time_limit: seconds of work the planner searches may spend (30 million work units per
      second; a wall-clock safety stop at ten times this); work: work units the planner
      searches may spend (default: 30 million per second of time_limit).
    - inplace, alias: let elementwise outputs overwrite dying inputs / Reshape-like outputs and
      Concat/Split slices share bytes (False: --no-inplace, --no-alias).
    - include_io: place graph inputs and outputs in the arena (False: --exclude-io).
    - split: "auto" or "off": tile the chains that set the peak (a rewrite of the model, kept
      only when it helps; default "off", or "auto" with a budget); split_overhead: extra
      multiply-accumulates the split may add, percent (default 10); split_time: seconds of
      work the split search may spend (default 16, at 30 million work units per second; a
      wall-clock safety stop at ten times this).
    - budget: device bytes (an int, or a string such as "4MiB"): buffers wait in host memory
      between uses.
    - tiers: memory tiers, fastest first: "NAME:CAPACITY[:LATENCY:BANDWIDTH]" strings or tuples
      such as ("sram", "2MiB", 1, 64); segment: steps per segment of the tier search (default
      2); search_time: seconds the tier or budget search may take at most (default 5, a safety
      stop); search_work: work units it may spend (default: 30 million per second of
      search_time).
    - partition: compute units and node assignments, a dict in the format of the --partition
      file, or that file's path.
    - header: a path: writes the plan's C header there once the plan verified (--header;
      docs/format.md, "C header"); header_all: list every placed tensor in it, not only the
      graph inputs and outputs (--header-all). Plan.header() gives the same text.
    - base_dir: the folder of a ModelProto's or bytes' external-data files.

    Raises InputError (a ValueError) carrying a one-line message for a bad model or option
    (the command line's, naming keywords instead of flags and a model in memory `<model>`), RuntimeError for an internal error. The GIL is released while planning.
    Ctrl-C stops the planner, tier and budget searches at their next check and raises
    KeyboardInterrupt.
    """
    options = dict(
        dims=dims,
        at=at,
        input_shapes=input_shapes,
        input_values=input_values,
        trust_value_info=trust_value_info,
        schedule=schedule,
        qdq=qdq,
        planner=planner,
        alignment=alignment,
        time_limit=time_limit,
        work=work,
        inplace=inplace,
        alias=alias,
        include_io=include_io,
        split=split,
        split_overhead=split_overhead,
        split_time=split_time,
        budget=budget,
        search_time=search_time,
        search_work=search_work,
        tiers=tiers,
        segment=segment,
        partition=partition,
        header=header,
        header_all=header_all,
    )
    path, data, base = _source(model, base_dir)
    partition_json = json.dumps(dict(partition)) if isinstance(partition, Mapping) else None
    native = _call(_native.plan, path, data, base, plan_flags(options), partition_json)
    return Plan(native)


def verify(model: ModelLike, table: Union[Mapping[str, Any], str, "os.PathLike[str]"], *, base_dir: Union[str, "os.PathLike[str]", None] = None) -> List[str]:
    """Checks an allocation table against a model with the independent verifier; returns the
    problems found (empty when the plan is valid). `table` is a dict or a path to the JSON file.
    The table must be for these exact bytes (its SHA-256)."""
    path, data, base = _source(model, base_dir)
    if isinstance(table, Mapping):
        text = json.dumps(dict(table))
    else:
        with open(os.fspath(table), encoding="utf-8") as f:
            text = f.read()
    return list(_call(_native.verify, path, data, base, text))


def shapes(
    model: ModelLike,
    *,
    dims: Optional[Mapping[str, int]] = None,
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    input_values: Optional[Mapping[str, Union[int, float, Sequence[Union[int, float]]]]] = None,
    trust_value_info: bool = False,
    base_dir: Union[str, "os.PathLike[str]", None] = None,
) -> Any:
    """The model with every inferred type written in (graph outputs typed, a value_info entry
    per intermediate), like onnx.shape_inference.infer_shapes; an onnx.ModelProto when onnx is
    importable, else bytes."""
    path, data, base = _source(model, base_dir)
    flags = plan_flags(
        dict(dims=dims, input_shapes=input_shapes, input_values=input_values, trust_value_info=trust_value_info)
    )
    return _model_out(_call(_native.shapes, path, data, base, flags))
