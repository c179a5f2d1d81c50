//! The baseline: walk the steps; bring each operand in at the smallest free hole that fits;
//! when none does, evict the resident object (not used at this step) whose next use is
//! farthest away, until one does. When evictions cannot make room (fragmentation), the device
//! is compacted: everything leaves and the step's operands are packed from offset 0. Objects
//! leave for good after their last use.

use super::{Offload, Residency, Stay};

/// A resident object: its bytes, and the first step and latest access of its stay.
#[derive(Clone, Copy, Debug)]
struct Entry {
    start: u64,
    end: u64,
    object: usize,
    from: usize,
    last: usize,
}

/// The baseline's stays, or `None` when some step's operands exceed the budget.
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
    let close = |stays: &mut Vec<Vec<Stay>>, e: Entry| {
        stays[e.object].push(Stay {
            from: e.from,
            to: e.last,
            offset: e.start,
        });
    };
    let mut busy: Vec<Entry> = Vec::new();
    for (step, needed) in accessed.iter_mut().enumerate() {
        let (dead, alive): (Vec<Entry>, Vec<Entry>) =
            busy.iter().partition(|e| objects[e.object].last() < step);
        for e in dead {
            close(&mut stays, e);
        }
        busy = alive;
        needed.sort_by_key(|&o| std::cmp::Reverse(objects[o].size));
        match admit(problem, &busy, needed, step) {
            Some((next, evicted)) => {
                for e in evicted {
                    close(&mut stays, e);
                }
                busy = next;
            }
            None => {
                for e in busy.drain(..) {
                    close(&mut stays, e);
                }
                let mut at = 0;
                for &o in needed.iter() {
                    let end = at + objects[o].size;
                    if end > problem.budget {
                        return None;
                    }
                    busy.push(Entry {
                        start: at,
                        end,
                        object: o,
                        from: step,
                        last: step,
                    });
                    at = end.next_multiple_of(problem.alignment.max(1));
                }
            }
        }
    }
    for e in busy {
        close(&mut stays, e);
    }
    Some(Residency { stays })
}

/// Makes the step's operands resident by best fit and farthest-next-use eviction; returns the
/// new resident list and the evicted entries, or `None` when evictions cannot make room.
fn admit(
    problem: &Offload,
    busy: &[Entry],
    needed: &[usize],
    step: usize,
) -> Option<(Vec<Entry>, Vec<Entry>)> {
    let mut busy = busy.to_vec();
    let mut evicted = Vec::new();
    for &o in needed {
        if let Some(e) = busy.iter_mut().find(|e| e.object == o) {
            e.last = step;
            continue;
        }
        let size = problem.objects[o].size;
        let start = loop {
            if let Some(at) = best_fit(&busy, size, problem.budget, problem.alignment.max(1)) {
                break at;
            }
            let victim = busy
                .iter()
                .enumerate()
                .filter(|(_, e)| !needed.contains(&e.object))
                .max_by_key(|(_, e)| next_use(problem, e.object, step))?
                .0;
            evicted.push(busy.remove(victim));
        };
        let at = busy.partition_point(|e| e.start < start);
        busy.insert(
            at,
            Entry {
                start,
                end: start + size,
                object: o,
                from: step,
                last: step,
            },
        );
    }
    Some((busy, evicted))
}

/// Step of the object's first access after `step`.
fn next_use(problem: &Offload, o: usize, step: usize) -> usize {
    let accesses = &problem.objects[o].accesses;
    let i = accesses.partition_point(|a| a.step <= step);
    accesses.get(i).map_or(usize::MAX, |a| a.step)
}

/// Start of the smallest free hole of the device that holds `size` bytes.
fn best_fit(busy: &[Entry], size: u64, budget: u64, align: u64) -> Option<u64> {
    let mut best: Option<(u64, u64)> = None;
    let mut at: u64 = 0;
    let ends = busy
        .iter()
        .map(|e| (e.start, e.end))
        .chain([(budget, budget)]);
    for (start, end) in ends {
        let from = at.next_multiple_of(align);
        if start >= from && start - from >= size && best.is_none_or(|(gap, _)| start - at < gap) {
            best = Some((start - at, from));
        }
        at = at.max(end);
    }
    best.map(|(_, from)| from)
}
