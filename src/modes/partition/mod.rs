//! S5: memory sharing across heterogeneous compute units. A partition file assigns nodes to
//! units with their own alignment and dtype rules; every value gets a memory mark saying who
//! writes it, who else reads it (a buffer shared across a unit boundary takes the stricter
//! alignment) and whether it is stored quantised. Subgraphs are planned level by level.

mod function;
mod levels;
mod marks;
mod spec;

pub use levels::{Body, FUNCTION_BODY, Workspace, plan_levels};
pub use marks::{Mark, Marks, Side, lcm, mark};
pub use spec::{Partition, UnitSpec};

#[cfg(test)]
mod tests;
