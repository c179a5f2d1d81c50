//! Execution order: the stored node order when it is topological, else a stable topological sort.

mod frontier;
mod memory;
mod topo;

pub use frontier::{FrontierLimits, FrontierOrder, frontier_order};
pub use memory::{FRONTIER_LIMITS, Scheduled, memory_order};
pub use topo::topological_order;
