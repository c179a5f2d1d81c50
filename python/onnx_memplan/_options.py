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


def _joined(separator: str) -> Callable[[Any], str]:
    """A value, or a sequence of values joined by `separator`, as one word."""
    return lambda v: separator.join(str(x) for x in v) if isinstance(v, (tuple, list)) else str(v)


def _shape(shape: Any) -> str:
    """(1, 3, 224, 224) -> 1x3x224x224; () is a scalar."""
    return "x".join(str(int(d)) for d in shape) or "scalar"


def _named(flag: str, word: Callable[[Any], str]) -> Callable[[Any], List[str]]:
    """{"batch": 1} -> --dim batch=1: a repeated flag, one per name of a mapping."""
    return lambda mapping: [x for name, value in dict(mapping).items() for x in (flag, f"{name}={word(value)}")]


def _repeated(flag: str, word: Callable[[Any], str]) -> Callable[[Any], List[str]]:
    """["sram:2MiB:1:64", ("dram", "1GiB", 200, 8)] -> --tier sram:2MiB:1:64 --tier dram:1GiB:200:8."""
    return lambda items: [x for item in items for x in (flag, word(item))]


def _partition(value: Any) -> List[str]:
    # A dict is passed to the binding as JSON text (see plan()); a path is the CLI's file.
    return [] if isinstance(value, Mapping) else [f"--partition={os.fspath(value)}"]


#: keyword -> (the CLI flag, the keyword's default, how a value becomes flags).
#: A keyword left at None is not passed, so the command line's default applies.
PLAN_OPTIONS: Dict[str, Tuple[str, Any, Callable[[Any], List[str]]]] = {
    # {"batch": 1}, or a range {"sequence": (1, 512)} -> sequence=1..512
    "dims": ("--dim", None, _named("--dim", _joined(".."))),
    # with ranges: {"sequence": 128} -> --at sequence=128
    "at": ("--at", None, _named("--at", str)),
    "input_shapes": ("--input-shape", None, _named("--input-shape", _shape)),
    # {"sr": 16000, "ids": [1, 2, 3]} -> sr=16000, ids=1,2,3
    "input_values": ("--input-value", None, _named("--input-value", _joined(","))),
    "trust_value_info": ("--trust-value-info", False, _switch_on("--trust-value-info")),
    "schedule": ("--schedule", "stored", _value("--schedule")),
    "qdq": ("--qdq", "units", _value("--qdq")),
    "planner": ("--planner", "auto", _value("--planner")),
    "alignment": ("--alignment", 64, _value("--alignment")),
    "time_limit": ("--time-limit", 1.0, _value("--time-limit")),
    "work": ("--work", None, _value("--work")),
    "inplace": ("--no-inplace", True, _switch_off("--no-inplace")),
    "alias": ("--no-alias", True, _switch_off("--no-alias")),
    "include_io": ("--exclude-io", True, _switch_off("--exclude-io")),
    "split": ("--split", None, _value("--split")),
    "split_overhead": ("--split-overhead", None, _value("--split-overhead")),
    "split_time": ("--split-time", None, _value("--split-time")),
    "budget": ("--budget", None, _value("--budget")),
    "search_time": ("--search-time", None, _value("--search-time")),
    "search_work": ("--search-work", None, _value("--search-work")),
    "tiers": ("--tier", None, _repeated("--tier", _joined(":"))),
    "segment": ("--segment", None, _value("--segment")),
    "partition": ("--partition", None, _partition),
    # a path: the C header, written once the plan verified
    "header": ("--header", None, lambda v: [f"--header={os.fspath(v)}"]),
    "header_all": ("--header-all", False, _switch_on("--header-all")),
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


#: The keywords whose flag is repeated, one per name of a mapping (dims={"batch": 1}).
_NAMED = ("dims", "at", "input_shapes", "input_values")


def _keyword_term(flag: str) -> str:
    """The keyword a flag stands for, as a Python caller writes it: --time-limit -> time_limit,
    --no-inplace -> inplace=False, --trust-value-info -> trust_value_info=True."""
    for keyword, (kflag, default, _) in PLAN_OPTIONS.items():
        if kflag == flag:
            if default is True:
                return f"{keyword}=False"
            if default is False:
                return f"{keyword}=True"
            return keyword
    return flag


def _named_value(keyword: str, value: str) -> str:
    """A repeated flag's NAME=VALUE word as the mapping entry it came from."""
    name, _, word = value.partition("=")
    if keyword == "dims" and ".." in word:
        word = "(" + ", ".join(word.split("..", 1)) + ")"
    elif keyword == "input_shapes" and word not in ("", "N"):
        word = "(" + ", ".join(word.split("x")) + ")"
    elif keyword == "input_values" and "," in word:
        word = "[" + word + "]"
    return f"{{{name!r}: {word}}}"


def python_terms(message: str) -> str:
    """An `onnx-memplan plan` error message in plan()'s terms: each flag named as its keyword
    (`bind them with --dim batch=N` -> `bind them with dims={'batch': N}`), a list of possible
    values as Python strings."""
    import re

    flag_to_keyword = {flag: keyword for keyword, (flag, _, _) in PLAN_OPTIONS.items()}

    def clap_arg(m: "re.Match[str]") -> str:  # '--schedule <SCHEDULE>' -> schedule
        return _keyword_term(m.group(1))

    message = re.sub(r"'(--[a-z][a-z-]*)(?: <[^>]*>)?'", clap_arg, message)

    def possible(m: "re.Match[str]") -> str:
        values = ", ".join(repr(v.strip()) for v in m.group(1).split(","))
        return f"(possible values: {values})"

    message = re.sub(r"\[possible values: ([^\]]*)\]", possible, message)

    def named(m: "re.Match[str]") -> str:
        keyword = flag_to_keyword[m.group(1)]
        if m.group(3) is not None:
            return f"{keyword}={_named_value(keyword, m.group(2) + '=' + m.group(3))}"
        return f"{keyword}[{m.group(2)!r}]"

    flags = "|".join(re.escape(PLAN_OPTIONS[k][0]) for k in _NAMED)
    message = re.sub(rf"({flags}) ([A-Za-z_][\w.]*)(?:=([^\s:'\")]+)|(?=:))", named, message)
    # 'batch=one' for dims -> {'batch': 'one'} for dims
    message = re.sub(
        r"'([^'=]+)=([^']*)' for (dims|at|input_shapes|input_values)\b",
        lambda m: f"{{{m.group(1)!r}: {m.group(2)!r}}} for {m.group(3)}",
        message,
    )
    return re.sub(r"(?<![\w-])(--[a-z][a-z-]*)", lambda m: _keyword_term(m.group(1)), message)
