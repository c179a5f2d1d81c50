//! Scoring a segment assignment: in each segment the units take turns; when a unit is
//! accessed while another occupies the segment, the occupant leaves (copied out if the host
//! lacks its latest contents, skipped if it is never used again) and comes back before its
//! next access. Two units of one segment accessed at the same step are a conflict.

use super::segments::Segments;
use super::units::Unit;
use super::{Offload, Residency, Stay};

/// Bytes migrated and conflicts of an assignment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Score {
    /// Bytes copied both ways.
    pub migrated: u64,
    /// Steps at which two units of one segment are accessed.
    pub conflicts: u64,
}

/// Scores `assignment` (a segment per unit).
pub fn score(
    problem: &Offload,
    units: &[Unit],
    segments: &Segments,
    assignment: &[usize],
) -> Score {
    walk(problem, units, segments, assignment, |_, _| {})
}

/// The stays of every object under a conflict-free assignment.
pub fn residency(
    problem: &Offload,
    units: &[Unit],
    segments: &Segments,
    assignment: &[usize],
) -> Option<Residency> {
    let mut stays = vec![Vec::new(); problem.objects.len()];
    let score = walk(problem, units, segments, assignment, |u, stay| {
        for &(m, inner) in &units[u].members {
            let object = &problem.objects[m];
            let (from, to) = (stay.from.max(object.first()), stay.to.min(object.last()));
            if from <= to {
                stays[m].push(Stay {
                    from,
                    to,
                    offset: stay.offset + inner,
                });
            }
        }
    });
    for s in &mut stays {
        s.sort_by_key(|s: &Stay| s.from);
    }
    (score.conflicts == 0).then_some(Residency { stays })
}

/// Walks every segment's accesses in step order, reporting each unit stay.
fn walk(
    problem: &Offload,
    units: &[Unit],
    segments: &Segments,
    assignment: &[usize],
    mut on_stay: impl FnMut(usize, Stay),
) -> Score {
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); segments.sizes.len()];
    for (u, &k) in assignment.iter().enumerate() {
        members[k].push(u);
    }
    let mut dirty = vec![false; problem.objects.len()];
    let mut total = Score::default();
    for (k, list) in members.iter().enumerate() {
        let s = walk_segment(problem, units, list, &mut dirty, |u, mut stay| {
            stay.offset = segments.offsets[k];
            on_stay(u, stay)
        });
        total.migrated += s.migrated;
        total.conflicts += s.conflicts;
    }
    total
}

/// Scores the units `members` sharing one segment (`dirty` is scratch, one flag per object).
pub fn score_segment(
    problem: &Offload,
    units: &[Unit],
    members: &[usize],
    dirty: &mut [bool],
) -> Score {
    walk_segment(problem, units, members, dirty, |_, _| {})
}

/// Walks one segment's accesses in step order; stays are reported at offset 0.
fn walk_segment(
    problem: &Offload,
    units: &[Unit],
    members: &[usize],
    dirty: &mut [bool],
    mut on_stay: impl FnMut(usize, Stay),
) -> Score {
    let mut list: Vec<(usize, usize)> = Vec::new();
    for &u in members {
        list.extend(units[u].accesses.iter().map(|a| (a.step, u)));
        for &(m, _) in &units[u].members {
            dirty[m] = false;
        }
    }
    list.sort_unstable();
    let mut score = Score::default();
    // The occupant: unit, first step of its stay, its latest access.
    let mut occupant: Option<(usize, usize, usize)> = None;
    let mut previous: Option<(usize, usize)> = None;
    for &(step, u) in &list {
        if previous.is_some_and(|(s, p)| s == step && p != u) {
            score.conflicts += 1;
        }
        previous = Some((step, u));
        match occupant {
            Some((o, from, _)) if o == u => occupant = Some((o, from, step)),
            _ => {
                if let Some((o, from, last)) = occupant {
                    on_stay(
                        o,
                        Stay {
                            from,
                            to: last,
                            offset: 0,
                        },
                    );
                    score.migrated += evict(problem, &units[o], last, dirty);
                }
                occupant = Some((u, step, step));
            }
        }
        for &(m, _) in &units[u].members {
            let accesses = &problem.objects[m].accesses;
            if let Ok(i) = accesses.binary_search_by_key(&step, |a| a.step) {
                dirty[m] |= accesses[i].write;
            }
        }
    }
    if let Some((o, from, last)) = occupant {
        on_stay(
            o,
            Stay {
                from,
                to: last,
                offset: 0,
            },
        );
    }
    score
}

/// Bytes moved when `unit` leaves after step `last`: for each member used again, the copy out
/// (when the host copy is stale) and the copy back in.
fn evict(problem: &Offload, unit: &Unit, last: usize, dirty: &mut [bool]) -> u64 {
    let Some(next) = unit.accesses.iter().find(|a| a.step > last).map(|a| a.step) else {
        return 0;
    };
    let mut bytes = 0;
    for &(m, _) in &unit.members {
        let object = &problem.objects[m];
        if object.first() <= last && object.last() >= next {
            bytes += object.size * (1 + u64::from(dirty[m]));
            dirty[m] = false;
        }
    }
    bytes
}
