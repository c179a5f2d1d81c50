//! The offload checker, independent of the planners: every object is resident whenever it is
//! accessed, resident objects never share bytes, resident bytes never exceed the budget; it
//! also counts the bytes migrated.

use super::{Offload, Residency};

/// Checks the stays; returns the bytes migrated (copy-ins, plus copy-outs when the host copy
/// is stale) or the first problem found.
pub fn check(problem: &Offload, residency: &Residency) -> Result<u64, String> {
    let objects = &problem.objects;
    if residency.stays.len() != objects.len() {
        return Err(format!(
            "{} objects, {} stay lists",
            objects.len(),
            residency.stays.len()
        ));
    }
    let steps = objects.iter().map(|o| o.last() + 1).max().unwrap_or(0);
    let mut resident: Vec<Vec<(u64, u64, usize)>> = vec![Vec::new(); steps];
    let mut migrated = 0;
    for (o, (object, stays)) in objects.iter().zip(&residency.stays).enumerate() {
        let mut dirty = false;
        let mut accesses = object.accesses.iter().peekable();
        for (i, stay) in stays.iter().enumerate() {
            if stay.from > stay.to || stay.from < object.first() || stay.to > object.last() {
                return Err(format!(
                    "object {o}: stay {}..{} outside its life",
                    stay.from, stay.to
                ));
            }
            if i > 0 && stays[i - 1].to >= stay.from {
                return Err(format!("object {o}: stays overlap at step {}", stay.from));
            }
            if !stay.offset.is_multiple_of(problem.alignment.max(1))
                || stay.offset + object.size > problem.budget
            {
                return Err(format!(
                    "object {o}: offset {} misaligned or past the budget",
                    stay.offset
                ));
            }
            while let Some(a) = accesses.next_if(|a| a.step <= stay.to) {
                if a.step < stay.from {
                    return Err(format!(
                        "object {o} is accessed at step {} but not resident",
                        a.step
                    ));
                }
                dirty |= a.write;
            }
            if i + 1 < stays.len() {
                migrated += object.size * (1 + u64::from(dirty));
                dirty = false;
            }
            for r in &mut resident[stay.from..=stay.to] {
                r.push((stay.offset, stay.offset + object.size, o));
            }
        }
        if let Some(a) = accesses.next() {
            return Err(format!(
                "object {o} is accessed at step {} but not resident",
                a.step
            ));
        }
    }
    for (step, list) in resident.iter_mut().enumerate() {
        list.sort_unstable();
        for pair in list.windows(2) {
            if pair[0].1 > pair[1].0 {
                return Err(format!(
                    "objects {} and {} are both resident at step {step} and share bytes",
                    pair[0].2, pair[1].2
                ));
            }
        }
        let total: u64 = list.iter().map(|r| r.1 - r.0).sum();
        if total > problem.budget {
            return Err(format!(
                "step {step}: {total} resident bytes exceed the budget {}",
                problem.budget
            ));
        }
    }
    Ok(migrated)
}
