//! Cutting the device memory into segments. Every step's operands must be resident together,
//! each in its own segment, so the layout first reserves, for each rank i, the largest i-th
//! largest unit any single step accesses (this makes every step feasible); the rest of the
//! budget then goes, as in S4, to segments the size of the largest units that still fit.

use super::Offload;
use super::units::Unit;

/// Segment sizes and offsets, largest first.
#[derive(Clone, Debug)]
pub struct Segments {
    /// Bytes of each segment.
    pub sizes: Vec<u64>,
    /// Device offset of each segment.
    pub offsets: Vec<u64>,
}

/// The segment layout for the units under the budget.
pub fn layout(problem: &Offload, units: &[Unit]) -> Result<Segments, String> {
    let steps = units
        .iter()
        .flat_map(|u| u.accesses.last())
        .map(|a| a.step + 1)
        .max()
        .unwrap_or(0);
    let mut at_step: Vec<Vec<u64>> = vec![Vec::new(); steps];
    for u in units {
        for a in &u.accesses {
            at_step[a.step].push(u.size);
        }
    }
    let mut sizes: Vec<u64> = Vec::new();
    let mut widest = (0, 0);
    for (step, operands) in at_step.iter_mut().enumerate() {
        operands.sort_unstable_by(|a, b| b.cmp(a));
        for (i, &size) in operands.iter().enumerate() {
            if i == sizes.len() {
                sizes.push(size);
            } else {
                sizes[i] = sizes[i].max(size);
            }
        }
        let total: u64 = operands.iter().sum();
        if total > widest.1 {
            widest = (step, total);
        }
    }
    let needed: u64 = sizes.iter().sum();
    if needed > problem.budget {
        return Err(format!(
            "a budget of {} bytes is too small: step {} alone accesses {} bytes, and giving every step's operands their own segments needs {needed} bytes",
            problem.budget, widest.0, widest.1
        ));
    }
    let mut rest: Vec<u64> = units.iter().map(|u| u.size).collect();
    rest.sort_unstable_by(|a, b| b.cmp(a));
    for s in &sizes {
        if let Some(k) = rest.iter().position(|r| r == s) {
            rest.remove(k);
        }
    }
    let mut free = problem.budget - needed;
    for size in rest {
        if size <= free && size > 0 {
            sizes.push(size);
            free -= size;
        }
    }
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let mut offsets = Vec::with_capacity(sizes.len());
    let mut at = 0;
    for s in &sizes {
        offsets.push(at);
        at += s;
    }
    Ok(Segments { sizes, offsets })
}
