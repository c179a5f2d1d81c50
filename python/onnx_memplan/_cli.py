"""The `onnx-memplan` script of the wheel: the same command line as the Rust binary."""

import signal
import sys


def main() -> None:
    from . import _native

    # Ctrl-C ends the process at once, as it does the native binary.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    sys.exit(_native.cli_main(sys.argv[1:]))
