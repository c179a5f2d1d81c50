//! The subcommands, one module each; `main.rs` only dispatches.

pub mod args;
pub mod conformance;
pub mod modes;
pub mod plan;
pub mod shapes;
pub mod solve;
pub mod verify;
