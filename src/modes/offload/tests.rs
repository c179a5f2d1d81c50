//! A case worked by hand.

use super::*;
use crate::plan::budget::Budget;

fn object(size: u64, steps: &[usize]) -> Object {
    let accesses = steps
        .iter()
        .enumerate()
        .map(|(i, &step)| Access {
            step,
            write: i == 0,
        })
        .collect();
    Object { size, accesses }
}

/// Budget 4096 B. P (2048 B) is used at steps 0 and 5, Q (1024) at 1 and 4, R (1024) at 2
/// and 3, X (1024) at 3 and 4. At step 3 P, Q, R and X are live (5120 B > 4096).
///
/// Baseline: P at 0, Q at 2048, R at 3072; at step 3 X needs room and the farthest next use
/// among P (5) and Q (4) is P's, so P goes out and back: 2 × 2048 = 4096 bytes.
///
/// Segments: every step accesses at most one 2048-byte and one 1024-byte object, so the
/// layout reserves [2048, 1024] and the remaining 1024 B becomes a third segment. P can only
/// sit in the first. X shares a step with Q and with R, so it must go with P (P out and in:
/// 4096 B) or Q and R share a segment and X takes the other: Q leaves after step 1 and comes
/// back before step 4: 2 × 1024 = 2048 bytes, half the baseline. The spill planner finds
/// the same 2048.
#[test]
fn segments_beat_farthest_next_use() {
    let problem = Offload {
        objects: vec![
            object(2048, &[0, 5]),
            object(1024, &[1, 4]),
            object(1024, &[2, 3]),
            object(1024, &[3, 4]),
        ],
        budget: 4096,
        alignment: 64,
    };
    let out = solve(&problem, &Options::default(), &Budget::unlimited()).unwrap();
    assert_eq!(out.segments_migrated, Some(2048));
    assert_eq!(out.plan.migrated, 2048);
    let q = &out.plan.residency.stays[1];
    assert_eq!((q.len(), q[0].to, q[1].from), (2, 1, 4));
    let baseline = out.baseline.unwrap();
    assert_eq!(baseline.migrated, 4096);
    assert_eq!(baseline.residency.stays[0].len(), 2);

    // At 2048 B the segments no longer fit (they need 3072), but spilling does: P goes out
    // after step 0 and Q after step 1 and again after step 3: 4096 + 2048 B, as the baseline.
    let tight = Offload {
        budget: 2048,
        ..problem.clone()
    };
    let out = solve(&tight, &Options::default(), &Budget::unlimited()).unwrap();
    assert_eq!(
        (out.segments_migrated, out.spill_migrated, out.method),
        (None, Some(6144), "spill")
    );
    assert_eq!(out.baseline.unwrap().migrated, 6144);
    // Below 2048 B, steps 0 and 5 cannot hold P at all.
    let err = solve(
        &Offload {
            budget: 1024,
            ..problem
        },
        &Options::default(),
        &Budget::unlimited(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        Infeasible::Step {
            step: 0,
            bytes: 2048
        }
    );
}

/// The checker rejects a stay that misses an access, overlapping residents and overspending.
#[test]
fn checker_catches_bad_residency() {
    let problem = Offload {
        objects: vec![object(2048, &[0, 2]), object(2048, &[1, 2])],
        budget: 4096,
        alignment: 64,
    };
    let stay = |from, to, offset| Stay { from, to, offset };
    let good = Residency {
        stays: vec![vec![stay(0, 2, 0)], vec![stay(1, 2, 2048)]],
    };
    assert_eq!(check(&problem, &good), Ok(0));
    let missing = Residency {
        stays: vec![vec![stay(0, 0, 0)], vec![stay(1, 2, 2048)]],
    };
    assert!(
        check(&problem, &missing)
            .unwrap_err()
            .contains("not resident")
    );
    let overlap = Residency {
        stays: vec![vec![stay(0, 2, 0)], vec![stay(1, 2, 1024)]],
    };
    assert!(
        check(&problem, &overlap)
            .unwrap_err()
            .contains("share bytes")
    );
    let away = Residency {
        stays: vec![vec![stay(0, 0, 0), stay(2, 2, 0)], vec![stay(1, 2, 2048)]],
    };
    assert_eq!(check(&problem, &away), Ok(4096));
    let small = Offload {
        budget: 3072,
        ..problem
    };
    assert!(check(&small, &good).is_err());
}

/// Degenerate inputs: nothing to place, and an object that is never accessed.
#[test]
fn empty_and_unused_objects() {
    let none = Offload {
        objects: Vec::new(),
        budget: 64,
        alignment: 64,
    };
    let out = solve(&none, &Options::default(), &Budget::unlimited()).unwrap();
    assert_eq!(out.plan.migrated, 0);
    let unused = Offload {
        objects: vec![
            Object {
                size: 64,
                accesses: Vec::new(),
            },
            object(64, &[0, 1]),
        ],
        budget: 64,
        alignment: 64,
    };
    let out = solve(&unused, &Options::default(), &Budget::unlimited()).unwrap();
    assert_eq!(
        (out.plan.residency.stays[0].len(), out.plan.migrated),
        (0, 0)
    );
}

/// Budget 128 B, three 64-byte objects: X used at steps 0 and 1, A at 0 and 2, Y at 1 and 2.
/// Each pair meets at some step, so at one fixed offset each they need 192 B; only A has a
/// gap to wait in (step 1). A leaves after step 0 (written there: copied out, 64 B), Y takes
/// its bytes at step 1, and A comes back before step 2 into X's bytes (X died after step 1):
/// 64 B in. 128 B migrated, the same as the farthest-next-use baseline, and A's two stays
/// sit at different offsets.
#[test]
fn a_buffer_comes_back_at_another_offset() {
    let problem = Offload {
        objects: vec![
            object(64, &[0, 1]),
            object(64, &[0, 2]),
            object(64, &[1, 2]),
        ],
        budget: 128,
        alignment: 64,
    };
    let out = solve(&problem, &Options::default(), &Budget::unlimited()).unwrap();
    assert_eq!((out.method, out.plan.migrated), ("spill", 128));
    let a = &out.plan.residency.stays[1];
    assert_eq!((a.len(), a[0].to, a[1].from), (2, 0, 2));
    assert_ne!(a[0].offset, a[1].offset);
    assert_eq!(a[1].offset, out.plan.residency.stays[0][0].offset);
    assert_eq!(out.baseline.unwrap().migrated, 128);
}
