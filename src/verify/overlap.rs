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
                live.push((arena, start, start.saturating_add(span), i));
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
                    // Views of one parent are checked once per pair below, not per step.
                    if end_a <= start_b || classes[a] == classes[b] {
                        continue;
                    }
                    let (ea, eb) = (&table.tensors[a], &table.tensors[b]);
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
    check_sibling_views(&mut exact, classes, steps, problems);
}

/// Views of one parent hold disjoint elements of it: every two strided slice views of one
/// alias class, neither inside the other by `alias_of`, must not write a common byte while
/// both are resident. Checked once per pair of resident runs (a view's offset is fixed within
/// a run), at the first step they share.
fn check_sibling_views(
    exact: &mut Exact,
    classes: &[usize],
    steps: usize,
    problems: &mut Vec<String>,
) {
    let table = exact.table;
    let mut views_of: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, e) in table.tensors.iter().enumerate() {
        if e.strides.is_some() && e.alias_offset.is_some() && e.arena.is_some() && span(e) > 0 {
            views_of.entry(classes[i]).or_default().push(i);
        }
    }
    let mut found = Vec::new();
    for views in views_of.values() {
        for (k, &a) in views.iter().enumerate() {
            for &b in &views[k + 1..] {
                if table.tensors[a].arena != table.tensors[b].arena
                    || exact.descends(a, b)
                    || exact.descends(b, a)
                {
                    continue;
                }
                let first_shared = resident_together(&exact.runs[a], &exact.runs[b], steps)
                    .filter(|&step| exact.share(a, b, step))
                    .min();
                if let Some(step) = first_shared {
                    found.push((step, a.min(b), a.max(b)));
                }
            }
        }
    }
    found.sort_unstable();
    for (step, a, b) in found {
        let (ea, eb) = (&table.tensors[a], &table.tensors[b]);
        problems.push(format!(
            "views '{}' and '{}' of one tensor are both live at step {step} and share bytes",
            ea.name, eb.name
        ));
    }
}

/// The first step of each stretch in which both run lists are resident at once.
fn resident_together<'r>(
    a: &'r [Run],
    b: &'r [Run],
    steps: usize,
) -> impl Iterator<Item = usize> + 'r {
    let last = steps - 1;
    a.iter().filter(|r| r.offset.is_some()).flat_map(move |ra| {
        b.iter()
            .filter(|r| r.offset.is_some())
            .filter_map(move |rb| {
                let from = ra.first.max(rb.first).min(last);
                (from <= ra.last.min(last) && from <= rb.last.min(last)).then_some(from)
            })
    })
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
