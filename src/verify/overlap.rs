//! Pairwise byte conflicts: tensors live at the same step must not share bytes unless an
//! alias or in-place claim (checked in `alias`) makes that legal. A tensor waiting in host
//! memory (a transfer's gap) is not resident, and after it comes back it is where the
//! transfer put it.

use std::collections::{HashMap, HashSet};

use crate::emit::{Run, Table};

/// Checks every pair of placed tensors that are live at a common step and overlap in bytes.
pub fn check_overlaps(
    table: &Table,
    index: &HashMap<&str, usize>,
    classes: &[usize],
    runs: &[Vec<Run>],
    problems: &mut Vec<String>,
) {
    // (class born, step, class overwritten) for every in-place claim.
    let handovers: HashSet<(usize, usize, usize)> = table
        .tensors
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let x = *index.get(e.inplace_of.as_deref()?)?;
            Some((classes[i], e.first, classes[x]))
        })
        .collect();
    let steps = table.schedule.len().max(1);
    // Per step, the resident placed tensors: (arena, start, end, entry).
    let mut live_at: Vec<Vec<(usize, u64, u64, usize)>> = vec![Vec::new(); steps];
    for (i, (e, runs)) in table.tensors.iter().zip(runs).enumerate() {
        let Some(arena) = e.arena.filter(|_| e.extent() > 0) else {
            continue;
        };
        for run in runs {
            let Some(start) = run.offset else { continue };
            for live in &mut live_at[run.first.min(steps - 1)..=run.last.min(steps - 1)] {
                live.push((arena, start, start + e.extent(), i));
            }
        }
    }
    let mut reported = HashSet::new();
    for (step, live) in live_at.iter_mut().enumerate() {
        live.sort_unstable();
        let mut max_end = 0u64;
        let mut arena = None;
        for (k, &(arena_b, start_b, end_b, b)) in live.iter().enumerate() {
            if arena != Some(arena_b) {
                (arena, max_end) = (Some(arena_b), 0);
            }
            if max_end > start_b {
                for &(arena_a, _, end_a, a) in live[..k].iter().rev() {
                    if arena_a != arena_b {
                        break;
                    }
                    if end_a <= start_b || classes[a] == classes[b] {
                        continue;
                    }
                    let (ea, eb) = (&table.tensors[a], &table.tensors[b]);
                    let legal = (ea.first == step
                        && eb.last == step
                        && eb.first < step
                        && handovers.contains(&(classes[a], step, classes[b])))
                        || (eb.first == step
                            && ea.last == step
                            && ea.first < step
                            && handovers.contains(&(classes[b], step, classes[a])));
                    if !legal && reported.insert((a.min(b), a.max(b))) {
                        problems.push(format!(
                            "tensors '{}' and '{}' are both live at step {step} and share bytes",
                            ea.name, eb.name
                        ));
                    }
                }
            }
            max_end = max_end.max(end_b);
        }
    }
}
