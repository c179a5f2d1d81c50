//! Execution order: the stored node order when it is topological, else a stable topological sort.

mod memory;
mod topo;

pub use memory::{EXACT_LIMIT, Scheduled, memory_order};
pub use topo::topological_order;
