//! Command-line subcommands.

pub mod conformance;
