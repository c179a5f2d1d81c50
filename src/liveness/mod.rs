//! Lifetimes of the top-level graph's tensors and their grouping into shared buffers
//! (in-place overwrite, alias, slice alias), following the definitions of docs/format.md.

mod choose;
mod grouping;
mod groups;
mod known;
mod lifetimes;
pub mod rules;
mod strided;

pub use choose::{Flips, analyse_best};
pub use groups::{Buffer, Liveness, LivenessOptions, Sharing, analyse, analyse_with};
pub use lifetimes::{TensorKind, TensorLife, lifetimes, tensor_kind};
