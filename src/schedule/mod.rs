//! Execution order: the stored node order when it is topological, else a stable topological sort.

mod topo;

pub use topo::topological_order;
