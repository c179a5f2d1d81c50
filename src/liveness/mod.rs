//! Lifetimes of the top-level graph's tensors and their grouping into shared buffers
//! (in-place overwrite, alias, slice alias), following DESIGN.md's definitions.

mod groups;
mod lifetimes;
pub mod rules;

pub use groups::{Buffer, Liveness, LivenessOptions, Sharing, analyse};
pub use lifetimes::{TensorKind, TensorLife, lifetimes};
