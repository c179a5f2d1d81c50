//! Pairwise byte conflicts: tensors live at the same step must not share bytes unless an
//! alias or in-place claim (checked in `alias`) makes that legal. A tensor waiting in host
//! memory (a transfer's gap) is not resident, and after it comes back it is where the
//! transfer put it.

use std::collections::{HashMap, HashSet};

use super::strided::{byte_ranges, intersect, span};
use crate::emit::{Run, Table, offset_at};

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
        let span = span(e);
        let Some(arena) = e.arena.filter(|_| span > 0) else {
            continue;
        };
        for run in runs {
            let Some(start) = run.offset else { continue };
            for live in &mut live_at[run.first.min(steps - 1)..=run.last.min(steps - 1)] {
                live.push((arena, start, start + span, i));
            }
        }
    }
    let mut exact = Exact {
        table,
        index,
        runs,
        ranges: HashMap::new(),
        pairs: HashMap::new(),
    };
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
                    if end_a <= start_b {
                        continue;
                    }
                    let (ea, eb) = (&table.tensors[a], &table.tensors[b]);
                    if classes[a] == classes[b] {
                        // Views of one parent hold disjoint elements of it.
                        if exact.sibling_views(a, b, step) && reported.insert((a.min(b), a.max(b)))
                        {
                            problems.push(format!(
                                "views '{}' and '{}' of one tensor are both live at step {step} and share bytes",
                                ea.name, eb.name
                            ));
                        }
                        continue;
                    }
                    if (ea.strides.is_some() || eb.strides.is_some()) && !exact.share(a, b, step) {
                        continue;
                    }
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

/// Exact byte sharing of strided views, their rows compared (cached per entry and pair).
struct Exact<'a> {
    table: &'a Table,
    index: &'a HashMap<&'a str, usize>,
    runs: &'a [Vec<Run>],
    ranges: HashMap<(usize, u64), Vec<(u64, u64)>>,
    pairs: HashMap<(usize, usize, u64, u64), bool>,
}

impl Exact<'_> {
    /// Whether entries `a` and `b`, where they are at `step`, write a common byte.
    fn share(&mut self, a: usize, b: usize, step: usize) -> bool {
        let (Some(oa), Some(ob)) = (
            offset_at(&self.runs[a], step),
            offset_at(&self.runs[b], step),
        ) else {
            return false;
        };
        if let Some(&known) = self.pairs.get(&(a, b, oa, ob)) {
            return known;
        }
        let table = self.table;
        let ra = self
            .ranges
            .entry((a, oa))
            .or_insert_with(|| byte_ranges(&table.tensors[a], oa))
            .clone();
        let rb = self
            .ranges
            .entry((b, ob))
            .or_insert_with(|| byte_ranges(&table.tensors[b], ob));
        let shared = intersect(&ra, rb);
        self.pairs.insert((a, b, oa, ob), shared);
        shared
    }

    /// Two strided slice views of one alias class, neither inside the other by `alias_of`,
    /// that write a common byte at `step`.
    fn sibling_views(&mut self, a: usize, b: usize, step: usize) -> bool {
        let view = |e: &crate::emit::TensorEntry| e.strides.is_some() && e.alias_offset.is_some();
        let (ea, eb) = (&self.table.tensors[a], &self.table.tensors[b]);
        view(ea)
            && view(eb)
            && !self.descends(a, b)
            && !self.descends(b, a)
            && self.share(a, b, step)
    }

    /// Whether `a` reaches `b` by following `alias_of`.
    fn descends(&self, mut a: usize, b: usize) -> bool {
        for _ in 0..self.table.tensors.len() {
            let Some(&next) = self.table.tensors[a]
                .alias_of
                .as_deref()
                .and_then(|n| self.index.get(n))
            else {
                return false;
            };
            if next == b {
                return true;
            }
            a = next;
        }
        false
    }
}
