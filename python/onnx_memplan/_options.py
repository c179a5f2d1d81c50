"""The one place where plan()'s keyword arguments become `onnx-memplan plan` flags.

Every flag of `onnx-memplan plan` is either a keyword of plan() (PLAN_OPTIONS) or something a
Plan does (OUTPUT_FLAGS); tests/test_api.py fails when a flag is in neither. To add an option:
add its row here and its keyword (same default) to plan() in __init__.py, with a line in
plan()'s docstring.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Mapping, Tuple


def _value(flag: str) -> Callable[[Any], List[str]]:
    """5 -> --flag=5 (one word, so that a value such as -1 is not taken for a flag)."""
    return lambda v: [f"{flag}={v}"]


def _switch_off(flag: str) -> Callable[[Any], List[str]]:
    """A keyword that is True by default and a `--no-...` flag when False."""
    return lambda v: [] if v else [flag]


def _switch_on(flag: str) -> Callable[[Any], List[str]]:
    return lambda v: [flag] if v else []


def _bindings(flag: str) -> Callable[[Any], List[str]]:
    """{"batch": 1} -> --dim batch=1 (a (lo, hi) pair is a range LO..HI)."""

    def to_flags(mapping: Any) -> List[str]:
        out: List[str] = []
        for name, value in dict(mapping).items():
            if isinstance(value, (tuple, list)):
                value = "..".join(str(v) for v in value)
            out += [flag, f"{name}={value}"]
        return out

    return to_flags


def _shapes(flag: str) -> Callable[[Any], List[str]]:
    """{"x": (1, 3, 224, 224)} -> --input-shape x=1x3x224x224 (() is a scalar)."""

    def to_flags(mapping: Any) -> List[str]:
        out: List[str] = []
        for name, shape in dict(mapping).items():
            dims = "x".join(str(int(d)) for d in shape) or "scalar"
            out += [flag, f"{name}={dims}"]
        return out

    return to_flags


def _values(flag: str) -> Callable[[Any], List[str]]:
    """{"sr": 16000, "ids": [1, 2, 3]} -> --input-value sr=16000 --input-value ids=1,2,3."""

    def to_flags(mapping: Any) -> List[str]:
        out: List[str] = []
        for name, value in dict(mapping).items():
            if isinstance(value, (tuple, list)):
                value = ",".join(str(v) for v in value)
            out += [flag, f"{name}={value}"]
        return out

    return to_flags


def _repeated(flag: str) -> Callable[[Any], List[str]]:
    """["sram:2MiB:1:64", ("dram", "1GiB", 200, 8)] -> --tier sram:2MiB:1:64 --tier dram:1GiB:200:8."""

    def to_flags(items: Any) -> List[str]:
        out: List[str] = []
        for item in items:
            if not isinstance(item, str):
                item = ":".join(str(part) for part in item)
            out += [flag, item]
        return out

    return to_flags


def _partition(value: Any) -> List[str]:
    # A dict is passed to the binding as JSON text (see plan()); a path is the CLI's file.
    return [] if isinstance(value, Mapping) else ["--partition", os.fspath(value)]


#: keyword -> (the CLI flag, the keyword's default, how a value becomes flags).
#: A keyword left at None is not passed, so the command line's default applies.
PLAN_OPTIONS: Dict[str, Tuple[str, Any, Callable[[Any], List[str]]]] = {
    "dims": ("--dim", None, _bindings("--dim")),
    "input_shapes": ("--input-shape", None, _shapes("--input-shape")),
    "input_values": ("--input-value", None, _values("--input-value")),
    "trust_value_info": ("--trust-value-info", False, _switch_on("--trust-value-info")),
    "schedule": ("--schedule", "stored", _value("--schedule")),
    "planner": ("--planner", "auto", _value("--planner")),
    "alignment": ("--alignment", 64, _value("--alignment")),
    "time_limit": ("--time-limit", 1.0, _value("--time-limit")),
    "work": ("--work", None, _value("--work")),
    "inplace": ("--no-inplace", True, _switch_off("--no-inplace")),
    "alias": ("--no-alias", True, _switch_off("--no-alias")),
    "include_io": ("--exclude-io", True, _switch_off("--exclude-io")),
    "split": ("--split", None, _value("--split")),
    "split_overhead": ("--split-overhead", None, _value("--split-overhead")),
    "budget": ("--budget", None, _value("--budget")),
    "search_time": ("--search-time", None, _value("--search-time")),
    "search_work": ("--search-work", None, _value("--search-work")),
    "tiers": ("--tier", None, _repeated("--tier")),
    "segment": ("--segment", None, _value("--segment")),
    "partition": ("--partition", None, _partition),
}

#: Flags about files and printing, which a Plan's methods do instead.
OUTPUT_FLAGS: Dict[str, str] = {
    "--output": "Plan.save(path)",
    "--table": "Plan.save(path, table=...)",
    "--svg": "Plan.svg()",
    "--html": "Plan.html() and Plan._repr_html_()",
    "--colour-by": "Plan.svg(colour_by=...) and Plan.html(colour_by=...)",
    "--json": "Plan.summary_dict",
    "--quiet": "plan() prints nothing",
    "--help": "help(onnx_memplan.plan)",
}


def plan_flags(options: Dict[str, Any]) -> List[str]:
    """The `onnx-memplan plan` flags for plan()'s keyword arguments."""
    flags: List[str] = []
    for keyword, value in options.items():
        if value is None:
            continue
        _, _, to_flags = PLAN_OPTIONS[keyword]
        flags += to_flags(value)
    return flags
