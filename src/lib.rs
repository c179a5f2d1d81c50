//! onnx-memplan: static memory planning for ONNX models. Every intermediate tensor gets a
//! fixed offset in one arena, and every plan is checked by an independent verifier before it
//! is returned.
//!
//! The front door is [`plan`]: give it a model (a path, bytes or a decoded
//! `ModelProto`) and [`PlanOptions`]; it returns a [`Plan`]
//! holding the allocation table, the annotated model's bytes, and [`Plan::write`]. What the
//! table holds is specified in docs/format.md; the user guide is docs/guide/.
//!
//! ```
//! use onnx_memplan::{PlanOptions, plan};
//!
//! // models/resnet_small.onnx takes batch×3×160×160.
//! let options = PlanOptions::new().dim("batch", 1);
//! let mut plan = plan("models/resnet_small.onnx", &options)?;
//! println!("{}", plan.summary());
//! for tensor in plan.table().tensors.iter().take(3) {
//!     println!("{} at {:?}", tensor.name, tensor.offset);
//! }
//! let model = plan.model_bytes("resnet_small.memplan.json", "resnet_small.memplan.onnx");
//! assert!(!model.is_empty());
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! # Examples
//!
//! Run with `cargo run --release --example NAME` from a checkout:
//!
//! - [`plan_file`](https://github.com/onnx-memplan/onnx-memplan/blob/main/examples/plan_file.rs):
//!   plan a model file, print the arena and the first offsets, write the outputs.
//! - [`plan_bytes`](https://github.com/onnx-memplan/onnx-memplan/blob/main/examples/plan_bytes.rs):
//!   plan serialized bytes with `--split auto` and compare the arenas.
//!
//! # Features
//!
//! - `cli` (default): the `onnx-memplan` binary and its argument parser (pulls in clap). A
//!   library user can turn it off with `default-features = false`.
//! - `internals`: makes the pipeline's stages public (load → lower to `ir` → infer types →
//!   schedule → liveness → solve → verify → emit; see ARCHITECTURE.md) for the crate's own
//!   tests, benches, fuzz targets and the Python binding. They carry no stability promise;
//!   without the feature they are private.

// Without `internals`, the items only the tests, benches and the Python binding use are
// unreachable from the facade; the `internals` build (every test and `clippy --all-targets`)
// is the one that lints them.
#![cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]

mod api;
pub use api::{ModelSource, Plan, PlanOptions, plan};
pub use onnx::proto;

/// The allocation table's types ([`Table`] and its entries); docs/format.md describes every
/// field.
pub mod table {
    pub use crate::emit::table::*;
}
pub use table::Table;

/// Declares the pipeline's modules: public with the `internals` feature, private without it.
macro_rules! internal_modules {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "internals")]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        mod $name;
    )*};
}

// `error` holds `#[macro_export]` macros, which must not come from a macro expansion.
#[cfg(feature = "internals")]
pub mod error;
#[cfg(not(feature = "internals"))]
mod error;

internal_modules!(
    emit, infer, ir, liveness, modes, onnx, pipeline, plan, ranges, schedule, split, symbolic,
    units, verify,
);

/// The Rust blocks of README.md, run as doctests so the README's example stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The Rust blocks of the user guide's runtime chapter, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/guide/runtime.md")]
struct RuntimeGuideDoctests;

#[cfg(feature = "cli")]
pub mod cli;
