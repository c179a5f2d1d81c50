//! Subcommands of the `onnx-memplan` binary, one module each.

pub mod solve;
