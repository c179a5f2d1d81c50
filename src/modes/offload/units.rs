//! S4's merging: the access trace is walked in step order with consecutive accesses of one
//! object collapsed into one; small objects that follow each other in it while both are live
//! are merged into one unit that moves as a whole.

use super::{Access, Offload};

/// Objects moved and placed together: members at fixed offsets inside the unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    /// Member objects and their offsets inside the unit.
    pub members: Vec<(usize, u64)>,
    /// Bytes of the unit.
    pub size: u64,
    /// Union of the members' accesses, one per step.
    pub accesses: Vec<Access>,
}

/// Objects at most this fraction of the budget count as small.
const SMALL_DIVISOR: u64 = 128;

/// Groups the objects into units (objects without accesses are left out).
pub fn merge(problem: &Offload) -> Vec<Unit> {
    let objects = &problem.objects;
    let small = problem.budget / SMALL_DIVISOR;
    let mut trace: Vec<(usize, usize)> = objects
        .iter()
        .enumerate()
        .flat_map(|(o, obj)| obj.accesses.iter().map(move |a| (a.step, o)))
        .collect();
    trace.sort_unstable();
    trace.dedup_by(|b, a| a.1 == b.1);
    let mut parent: Vec<usize> = (0..objects.len()).collect();
    let mut size: Vec<u64> = objects.iter().map(|o| o.size).collect();
    for pair in trace.windows(2) {
        let (a, b) = (root(&mut parent, pair[0].1), root(&mut parent, pair[1].1));
        let (oa, ob) = (&objects[pair[0].1], &objects[pair[1].1]);
        let overlap = oa.first() <= ob.last() && ob.first() <= oa.last();
        if a != b && overlap && size[a] + size[b] <= small {
            parent[b] = a;
            size[a] += size[b];
        }
    }
    let mut unit_of = vec![usize::MAX; objects.len()];
    let mut units: Vec<Unit> = Vec::new();
    // Objects never accessed never need the device.
    for (o, object) in objects
        .iter()
        .enumerate()
        .filter(|(_, o)| !o.accesses.is_empty())
    {
        let r = root(&mut parent, o);
        if unit_of[r] == usize::MAX {
            unit_of[r] = units.len();
            units.push(Unit {
                members: Vec::new(),
                size: 0,
                accesses: Vec::new(),
            });
        }
        let unit = &mut units[unit_of[r]];
        unit.members.push((o, unit.size));
        unit.size += object.size;
        unit.accesses.extend(&object.accesses);
    }
    for unit in &mut units {
        unit.accesses.sort_by_key(|a| (a.step, !a.write));
        unit.accesses.dedup_by(|b, a| {
            let same = a.step == b.step;
            a.write |= same && b.write;
            same
        });
    }
    units
}

fn root(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}
