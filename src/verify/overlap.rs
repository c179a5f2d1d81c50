//! Pairwise byte conflicts: tensors live at the same step must not share bytes unless an
//! alias or in-place claim (checked in `alias`) makes that legal. A tensor waiting in host
//! memory (a transfer's gap) is not resident.

use std::collections::{HashMap, HashSet};

use crate::emit::Table;

/// Checks every pair of placed tensors that are live at a common step and overlap in bytes.
pub fn check_overlaps(
    table: &Table,
    index: &HashMap<&str, usize>,
    classes: &[usize],
    away: &[Vec<(usize, usize)>],
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
    let mut live_at: Vec<Vec<usize>> = vec![Vec::new(); steps];
    for (i, e) in table.tensors.iter().enumerate() {
        if e.offset.is_some() && e.extent() > 0 {
            for (step, live) in live_at
                .iter_mut()
                .enumerate()
                .take(e.last.min(steps - 1) + 1)
                .skip(e.first.min(steps - 1))
            {
                if !super::modes::is_away(&away[i], step) {
                    live.push(i);
                }
            }
        }
    }
    let range = |i: usize| {
        let e = &table.tensors[i];
        let start = e.offset.unwrap_or(0);
        (e.arena, start, start + e.extent())
    };
    let mut reported = HashSet::new();
    for (step, live) in live_at.iter_mut().enumerate() {
        live.sort_by_key(|&i| range(i));
        let mut max_end = 0u64;
        let mut arena = None;
        for (k, &b) in live.iter().enumerate() {
            let (arena_b, start_b, end_b) = range(b);
            if arena != Some(arena_b) {
                (arena, max_end) = (Some(arena_b), 0);
            }
            if max_end > start_b {
                for &a in live[..k].iter().rev() {
                    let (arena_a, _, end_a) = range(a);
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
