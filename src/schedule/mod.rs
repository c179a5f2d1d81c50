//! Execution order: the stored node order when it is topological, else a stable topological sort;
//! memory-aware candidate orders over steps (a QDQ unit is one); an order's work moved just in
//! time; QDQ units kept together.

mod frontier;
mod just_in_time;
mod memory;
#[cfg(test)]
mod test_nodes;
mod steps;
mod topo;
mod units;

pub use frontier::{FrontierLimits, FrontierOrder, frontier_order};
pub use just_in_time::just_in_time;
pub use memory::{FRONTIER_LIMITS, Scheduled, TRIAL_FRONTIER_LIMITS, memory_order};
pub use topo::{scatters_first, topological_order};
pub use units::keep_units_together;
