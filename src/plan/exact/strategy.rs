//! Search heuristics: which section to branch on and in which order to try candidates.
//!
//! The search is complete under any of them, but its running time is heavy-tailed: a heuristic
//! that walks straight into a solution on one problem can thrash on another. So the solver
//! restarts with the next strategy after a node budget (failures found so far stay remembered).

use std::cmp::Reverse;

use super::instance::Instance;

/// How a node branches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Branching {
    /// Pick a section: each candidate covering it at the level, or none. The section is the one
    /// with the fewest candidates covering it (the most crowded on ties).
    FewestCandidates,
    /// As `FewestCandidates`, but the section with the least room to spare.
    MostCrowded,
    /// Each buffer in turn, by floor and then by the strategy's order; a buffer placed at the
    /// same level as the previous one must come later in that order.
    Buffers,
}

/// A branching rule and a candidate order.
pub(super) struct Strategy {
    /// How to branch.
    pub(super) branching: Branching,
    /// Each buffer's position in the order candidates are tried.
    pub(super) rank: Vec<u32>,
}

/// What a candidate order sorts by (each descending; ties by buffer index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    /// The largest total size live in a section the buffer covers.
    Total,
    /// Size × steps live.
    Area,
    /// Steps live.
    Width,
    /// Size.
    Size,
}

/// The portfolio, in the order it is tried: each branching rule with a few orders that put the
/// most constrained buffers (in crowded sections, large or long-lived) first. Buffer branching
/// with these orders follows MiniMalloc's defaults; the section rules are our own.
const PORTFOLIO: [(Branching, [Key; 3]); 8] = {
    use Branching::{Buffers, FewestCandidates, MostCrowded};
    use Key::{Area, Size, Total, Width};
    [
        (Buffers, [Total, Width, Area]),
        (FewestCandidates, [Total, Area, Size]),
        (MostCrowded, [Total, Area, Size]),
        (Buffers, [Width, Area, Total]),
        (Buffers, [Total, Area, Width]),
        (FewestCandidates, [Width, Area, Total]),
        (MostCrowded, [Width, Area, Total]),
        (Buffers, [Area, Width, Total]),
    ]
};

/// The strategies to cycle through, in order.
pub(super) fn strategies(inst: &Instance) -> Vec<Strategy> {
    let n = inst.len();
    let mut load = vec![0u64; inst.sections];
    for b in 0..n {
        for s in inst.lo[b]..inst.hi[b] {
            load[s as usize] += inst.size[b];
        }
    }
    let value = |b: usize, key: Key| -> u128 {
        match key {
            Key::Total => {
                let (lo, hi) = (inst.lo[b] as usize, inst.hi[b] as usize);
                u128::from(load[lo..hi].iter().copied().max().unwrap_or(0))
            }
            Key::Area => u128::from(inst.size[b]) * u128::from(inst.length[b]),
            Key::Width => u128::from(inst.length[b]),
            Key::Size => u128::from(inst.size[b]),
        }
    };
    PORTFOLIO
        .iter()
        .map(|&(branching, keys)| {
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by_cached_key(|&b| (keys.map(|k| Reverse(value(b, k))), b));
            let mut rank = vec![0u32; n];
            for (r, b) in order.into_iter().enumerate() {
                rank[b] = r as u32;
            }
            Strategy { branching, rank }
        })
        .collect()
}
