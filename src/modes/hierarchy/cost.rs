//! S1's cost model: the estimated time of the whole program for a placement.

use super::{Hierarchy, Placement};

/// E(s) = Σ over every operator transfer of `latency + bytes / bandwidth` of the block's tier.
pub fn cost(h: &Hierarchy, p: &Placement) -> f64 {
    h.blocks
        .iter()
        .zip(&p.tier)
        .map(|(b, &t)| {
            let tier = &h.tiers[t];
            b.accesses
                .iter()
                .map(|&(_, bytes)| tier.transfer(bytes))
                .sum::<f64>()
        })
        .sum()
}

/// For each tier, the mean over steps of the fraction of its capacity in use.
pub fn fill(h: &Hierarchy, p: &Placement) -> Vec<f64> {
    let steps = h.steps().max(1);
    let mut used = vec![vec![0u64; steps]; h.tiers.len()];
    for (b, block) in h.blocks.iter().enumerate() {
        // An in-place block shares its predecessor's bytes on its first step.
        let from = block.first + usize::from(p.reused[b]);
        for u in used[p.tier[b]].iter_mut().take(block.last + 1).skip(from) {
            *u += block.size;
        }
    }
    used.iter()
        .zip(&h.tiers)
        .map(|(u, t)| {
            u.iter().map(|&x| x.min(t.capacity) as f64).sum::<f64>()
                / (steps as f64 * t.capacity as f64)
        })
        .collect()
}
