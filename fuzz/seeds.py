"""Builds the fuzz targets' seed corpora from models/ and real tables (see seeds.sh).

model/         every model of models/ made small: initializers of more than 64 elements become
               graph inputs of the same type (the weights' bytes do not matter to the pass), and
               symbolic input dims are bound (batch 1, sequence 8, others 2); each with option
               flags 0 and 8 (memory schedule), plus the symbolic form; and, when
               ../shared/conformance/onnx-node exists, its node models (flags 0).
ranges/        the symbolic form of every model of models/ (made small the same way), planned
               over ranges with flags 0 (1..2) and 11 (1..513, evaluated at the middle, `--at`).
solve_csv/     the DSA problem of each model's real plan (one row per planned tensor), and
               MiniMalloc's examples from ../shared/benchmarks/minimalloc (first 300 rows).
verify_table/  one seed per base table (the first byte picks it; no edits).
"""

import argparse
import json
import pathlib
import subprocess
import tempfile

import onnx
from onnx import helper, numpy_helper

BOUND = {"batch": 1, "sequence": 8}
KEEP_ELEMENTS = 64


def shrink(model: onnx.ModelProto, bind: bool) -> onnx.ModelProto:
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    kept = []
    moved = []
    for init in graph.initializer:
        count = 1
        for d in init.dims:
            count *= d
        if count > KEEP_ELEMENTS:
            moved.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
        else:
            kept.append(init)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    graph.input.extend(moved)
    if bind:
        for value in list(graph.input) + list(graph.output):
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param"):
                    dim.dim_value = BOUND.get(dim.dim_param, 2)
    return model


def write(folder: pathlib.Path, name: str, data: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


def table_rows(binary: str, model: pathlib.Path, tmp: pathlib.Path) -> list:
    out = tmp / (model.stem + ".memplan.onnx")
    args = [binary, "plan", str(model), "-o", str(out)]
    for name, value in BOUND.items():
        args += ["--dim", f"{name}={value}"]
    subprocess.run(args, check=True, capture_output=True)
    table = json.loads((tmp / (model.stem + ".memplan.json")).read_text())
    return [t for t in table["tensors"] if t.get("offset") is not None and t.get("bytes")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True, help="the onnx-memplan binary")
    parser.add_argument("--models", default="models")
    parser.add_argument("--shared", default="../shared")
    parser.add_argument("--out", default="fuzz/corpus")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    shared = pathlib.Path(args.shared)
    models = sorted(pathlib.Path(args.models).glob("*.onnx"))

    for path in models:
        model = onnx.load(str(path))
        bound = shrink(model, True).SerializeToString()
        write(out / "model", f"{path.stem}.bin", b"\x00" + bound)
        write(out / "model", f"{path.stem}.memory.bin", b"\x08" + bound)
        symbolic = shrink(model, False).SerializeToString()
        write(out / "model", f"{path.stem}.symbolic.bin", b"\x00" + symbolic)
        write(out / "ranges", f"{path.stem}.bin", b"\x00" + symbolic)
        write(out / "ranges", f"{path.stem}.at.bin", b"\x0b" + symbolic)
    conformance = shared / "conformance" / "onnx-node"
    if conformance.is_dir():
        for path in sorted(conformance.glob("*.onnx")):
            data = path.read_bytes()
            if len(data) <= 64 * 1024:
                write(out / "model", f"node_{path.stem}.bin", b"\x00" + data)
    else:
        print(f"seeds.py: {conformance} not found: no conformance seeds")

    with tempfile.TemporaryDirectory() as tmp:
        for path in models:
            rows = table_rows(args.bin, path, pathlib.Path(tmp))
            lines = ["id,lower,upper,size"]
            lines += [f"t{i},{t['first']},{t['last'] + 1},{t['bytes']}" for i, t in enumerate(rows)]
            write(out / "solve_csv", f"{path.stem}.csv", ("\n".join(lines) + "\n").encode())
    minimalloc = shared / "benchmarks" / "minimalloc"
    if minimalloc.is_dir():
        for path in sorted(minimalloc.glob("*/*.csv")):
            lines = path.read_text().splitlines()[:301]
            write(out / "solve_csv", f"minimalloc_{path.parent.name}_{path.stem}.csv", ("\n".join(lines) + "\n").encode())
    else:
        print(f"seeds.py: {minimalloc} not found: no MiniMalloc seeds")

    for base in range(7):
        write(out / "verify_table", f"base{base}.bin", bytes([base]))
    for target in ("model", "solve_csv", "verify_table"):
        print(f"seeds.py: {target}: {len(list((out / target).iterdir()))} seeds")


if __name__ == "__main__":
    main()
