"""Evaluate an onnx-memplan table planned over ranges at one size (docs/format.md, "Plans over
ranges"): every arena tensor's offset and bytes, and the arena.

    python3 memplan_eval.py TABLE.memplan.json sequence=128 [NAME=VALUE ...]

prints one line per arena tensor, `offset bytes name`, then `arena BYTES`.
"""

import json
import re
import sys

TOKEN = re.compile(r"\s*(\d+|[A-Za-z_][A-Za-z0-9_]*|\$\d+|//|[-+*(),])")


def tokens(text):
    out, at = [], 0
    text = text.rstrip()
    while at < len(text):
        m = TOKEN.match(text, at)
        if not m:
            raise ValueError(f"bad expression {text!r} at {at}")
        out.append(m.group(1))
        at = m.end()
    return out


def evaluate(text, symbols, end):
    """The value of `text`; `end(k)` gives `$k`, the end of tensor k's buffer."""
    toks, pos = tokens(text), [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take():
        pos[0] += 1
        return toks[pos[0] - 1]

    def factor():
        t = take()
        if t == "(":
            v = total()
            assert take() == ")"
            return v
        if t == "max":
            assert take() == "("
            v = total()
            while peek() == ",":
                take()
                v = max(v, total())
            assert take() == ")"
            return v
        if t.startswith("$"):
            return end(int(t[1:]))
        return int(t) if t.isdigit() else symbols[t]

    def product():
        v = factor()
        while peek() in ("*", "//"):
            v = v * factor() if take() == "*" else v // factor()  # // floors, as required
        return v

    def total():
        v = -product() if peek() == "-" and take() else product()
        while peek() in ("+", "-"):
            v = v + product() if take() == "+" else v - product()
        return v

    v = total()
    assert pos[0] == len(toks), f"trailing text in {text!r}"
    return v


def plan_at(table, symbols):
    """Offsets and bytes per arena tensor (by table index) and the arena, at `symbols`."""
    align = table["options"]["alignment"]
    tensors = table["tensors"]
    offsets = {}

    def size(k):
        return evaluate(tensors[k]["bytes_expr"], symbols, None)

    def end(k):
        return offset(k) + -(-size(k) // align) * align

    def offset(k):
        if k not in offsets:
            offsets[k] = evaluate(tensors[k]["offset_expr"], symbols, end)
        return offsets[k]

    placed = {k: (offset(k), size(k)) for k, t in enumerate(tensors) if "offset_expr" in t}
    return placed, evaluate(table["parametric"]["arena_expr"], symbols, end)


if __name__ == "__main__":
    table = json.load(open(sys.argv[1]))
    symbols = {k: int(v) for k, v in (a.split("=") for a in sys.argv[2:])}
    placed, arena = plan_at(table, symbols)
    for k, (offset, size) in placed.items():
        print(offset, size, table["tensors"][k]["name"])
    print("arena", arena)
