//! The seeds' advanced modes: memory hierarchy (S1), device budget with offload (S4) and
//! heterogeneous compute units (S5), as pure algorithms over small input types.

mod access;
mod apply;
pub mod budget;
pub mod hierarchy;
pub mod offload;
pub mod partition;
pub mod sharing;
pub mod size;
pub mod tiers;

pub use apply::{FlatPlan, ModeOptions, finish, prepare, summary};
