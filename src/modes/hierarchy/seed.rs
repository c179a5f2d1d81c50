//! A starting point for S1's search that looks past the current step: S1's initial rules give
//! the fastest tier to whichever block comes first, so a large, long-lived block that is
//! rarely touched can hold fast bytes that later, busier blocks needed. Here each block's
//! *density* is the time the fastest tier saves on its accesses per byte-step it occupies;
//! blocks below a density threshold are sent to the slowest tier up front and the rest follow
//! S1's rules. A few thresholds (quantiles of the density) are tried and the cheapest
//! placement is the seed.

use super::Hierarchy;
use super::cost::cost;
use super::place::{Choice, Placement, place};

/// Thresholds tried: the densities at these fractions of the blocks (sorted ascending).
const QUANTILES: [f64; 9] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];

/// The cheapest density-threshold placement, with its choices and E(s); `None` with fewer
/// than two tiers or when no threshold gives a feasible placement.
pub fn density_seed(h: &Hierarchy) -> Option<(Vec<Choice>, Placement, f64)> {
    let (fast, slow) = (h.tiers.first()?, h.tiers.last()?);
    if h.tiers.len() < 2 {
        return None;
    }
    let density: Vec<f64> = h
        .blocks
        .iter()
        .map(|b| {
            let saved: f64 = b
                .accesses
                .iter()
                .map(|&(_, bytes)| slow.transfer(bytes) - fast.transfer(bytes))
                .sum();
            let occupancy = b.size.max(1) as f64 * (b.last + 1 - b.first) as f64;
            saved / occupancy
        })
        .collect();
    let mut sorted: Vec<f64> = density.clone();
    sorted.sort_by(f64::total_cmp);
    let mut best: Option<(Vec<Choice>, Placement, f64)> = None;
    for q in QUANTILES {
        let threshold = sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)];
        let choices: Vec<Choice> = density
            .iter()
            .map(|&d| Choice {
                tier: (d < threshold).then_some(h.tiers.len() - 1),
                ..Choice::default()
            })
            .collect();
        let Ok(placement) = place(h, &choices) else {
            continue;
        };
        let e = cost(h, &placement);
        if best.as_ref().is_none_or(|b| e < b.2) {
            best = Some((choices, placement, e));
        }
    }
    best
}
