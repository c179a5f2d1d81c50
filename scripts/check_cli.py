"""The command line of the checks that plan every model of a folder of generated models.

    from check_cli import parser
    args = parser(__doc__).parse_args()   # --bin BIN --dir DIR --out OUT
"""
import argparse


def parser(doc: str) -> argparse.ArgumentParser:
    """A parser with `--bin` (the onnx-memplan binary), `--dir` (the models and their
    manifest) and `--out` (where plans are written), its description `doc`."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="the onnx-memplan binary")
    ap.add_argument("--dir", required=True, help="the models and their manifest")
    ap.add_argument("--out", required=True, help="where the plans are written")
    return ap
