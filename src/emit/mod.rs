//! Outputs of a plan: the allocation table, the annotated model.

mod annotate;
mod build;
pub mod table;

pub use annotate::{annotate, with_inferred_types};
pub use build::{main_arena, naive_bytes, tensor_entries};
pub use table::{Arena, FORMAT, ModelInfo, Stats, Table, TableOptions, TensorEntry};
