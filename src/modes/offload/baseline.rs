//! The baseline: walk the steps; bring each operand in at the smallest free hole that fits;
//! when none does, evict the resident object (not used at this step) whose next use is
//! farthest away, until one does. Objects leave for good after their last use.

use super::{Offload, Residency, Stay};

/// The baseline's stays, or `None` when some step's operands cannot be made to fit.
pub fn farthest_next_use(problem: &Offload) -> Option<Residency> {
    let objects = &problem.objects;
    let steps = objects.iter().map(|o| o.last() + 1).max().unwrap_or(0);
    let mut accessed: Vec<Vec<usize>> = vec![Vec::new(); steps];
    for (o, obj) in objects.iter().enumerate() {
        for a in &obj.accesses {
            accessed[a.step].push(o);
        }
    }
    let mut stays: Vec<Vec<Stay>> = vec![Vec::new(); objects.len()];
    // Resident objects: (start, end, object, stay start, latest access), sorted by start.
    let mut busy: Vec<(u64, u64, usize, usize, usize)> = Vec::new();
    for (step, needed) in accessed.iter_mut().enumerate() {
        busy.retain(|&(start, _, o, from, last)| {
            let alive = objects[o].last() >= step;
            if !alive {
                stays[o].push(Stay {
                    from,
                    to: last,
                    offset: start,
                });
            }
            alive
        });
        needed.sort_by_key(|&o| std::cmp::Reverse(objects[o].size));
        for &o in needed.iter() {
            if let Some(b) = busy.iter_mut().find(|b| b.2 == o) {
                b.4 = step;
                continue;
            }
            let size = objects[o].size;
            let start = loop {
                if let Some(at) = best_fit(&busy, size, problem.budget, problem.alignment.max(1)) {
                    break at;
                }
                let victim = busy
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| !needed.contains(&b.2))
                    .max_by_key(|(_, b)| next_use(problem, b.2, step))?
                    .0;
                let (start, _, v, from, last) = busy.remove(victim);
                stays[v].push(Stay {
                    from,
                    to: last,
                    offset: start,
                });
            };
            let at = busy.partition_point(|b| b.0 < start);
            busy.insert(at, (start, start + size, o, step, step));
        }
    }
    for (start, _, o, from, last) in busy {
        stays[o].push(Stay {
            from,
            to: last,
            offset: start,
        });
    }
    Some(Residency { stays })
}

/// Step of the object's first access after `step`.
fn next_use(problem: &Offload, o: usize, step: usize) -> usize {
    let accesses = &problem.objects[o].accesses;
    let i = accesses.partition_point(|a| a.step <= step);
    accesses.get(i).map_or(usize::MAX, |a| a.step)
}

/// Start of the smallest free hole of the device that holds `size` bytes.
fn best_fit(
    busy: &[(u64, u64, usize, usize, usize)],
    size: u64,
    budget: u64,
    align: u64,
) -> Option<u64> {
    let mut best: Option<(u64, u64)> = None;
    let mut at: u64 = 0;
    let ends = busy.iter().map(|b| (b.0, b.1)).chain([(budget, budget)]);
    for (start, end) in ends {
        let from = at.next_multiple_of(align);
        if start >= from && start - from >= size && best.is_none_or(|(gap, _)| start - at < gap) {
            best = Some((start - at, from));
        }
        at = at.max(end);
    }
    best.map(|(_, from)| from)
}
