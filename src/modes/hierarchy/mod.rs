//! S1: step-wise placement over a memory hierarchy. Each block gets a tier and an offset by
//! S1's initial-placement rules, then an improvement search (move, in-place reuse, swap between
//! tiers; later steps re-placed after each action; best state kept per segment of steps)
//! lowers the estimated time E(s) = Σ steps Σ transfers (latency + bytes / bandwidth).

mod cost;
mod level;
mod place;
mod search;
mod seed;
mod tier;

pub use cost::{cost, fill};
pub use place::{Choice, Placement, Stuck, place};
pub use search::{Outcome, improve};
pub use tier::{Tier, parse_tiers};

/// One block to place: a buffer with its lifetime and the transfers operators make on it.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Bytes it takes (a multiple of the alignment).
    pub size: u64,
    /// Step producing it.
    pub first: usize,
    /// Last step it is live.
    pub last: usize,
    /// Every read or write by an operator: (step, bytes moved).
    pub accesses: Vec<(usize, u64)>,
    /// A block that dies at `first` whose space this one may overwrite (in-place).
    pub reuses: Option<usize>,
}

/// The whole problem: blocks, tiers (fastest first) and the offset alignment.
#[derive(Clone, Debug)]
pub struct Hierarchy {
    /// The blocks, in a fixed order (ties within a step are placed in this order).
    pub blocks: Vec<Block>,
    /// The tiers, fastest first.
    pub tiers: Vec<Tier>,
    /// Every offset is a multiple of this (at least 1).
    pub alignment: u64,
}

impl Hierarchy {
    /// Number of steps: one past the last step any block is live.
    pub fn steps(&self) -> usize {
        self.blocks.iter().map(|b| b.last + 1).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
