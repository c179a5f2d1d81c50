//! The planner core on hand-worked and third-party problems: S2's worked example from the
//! seeds, MiniMalloc's README example through `solve`, and capacity exit codes.

mod common;

use common::*;
use onnx_memplan::plan::{Buffer, PlanOptions, PlannerChoice, Problem, solve, verify};

/// S2's worked example problem (../shared/seeds/SEEDS.md), alignment 1.
fn s2_problem() -> Problem {
    let spans = [
        (2048, 0, 2),
        (2048, 1, 4),
        (1024, 2, 3),
        (2048, 3, 4),
        (1024, 4, 5),
        (4096, 5, 5),
    ];
    Problem {
        buffers: spans
            .iter()
            .map(|&(size, first, last)| Buffer {
                size,
                start: first,
                end: last + 1,
            })
            .collect(),
        alignment: 1,
    }
}

/// S2's worked example (../shared/seeds/SEEDS.md): output sizes 2048, 2048, 1024, 2048, 1024,
/// 4096 with inclusive lifetimes (0,2) (1,4) (2,3) (3,4) (4,5) (5,5) give offsets
/// 0, 2048, 4096, 0, 4096, 0 and a 5120-byte arena.
#[test]
fn s2_worked_example() {
    let problem = s2_problem();
    let options = PlanOptions {
        planner: PlannerChoice::S2FreeList,
        ..PlanOptions::default()
    };
    let solution = solve(&problem, &options).unwrap();
    assert_eq!(solution.offsets, vec![0, 2048, 4096, 0, 4096, 0]);
    assert_eq!(solution.arena, 5120);
    verify(&problem, &solution).unwrap();
}

/// A plan is needed even when nothing is left of the budget (a large rewritten model on a
/// loaded machine spends its time limit before the planners start): `auto` then still gives
/// greedy-by-size's plan, never every buffer stacked. On S2's worked example greedy-by-size
/// places, by size: 4096 (5,5) at 0; 2048 (0,2) at 0, (1,4) at 2048, (3,4) at 0 (free after
/// step 2); 1024 (2,3) and (4,5) at 4096: a 5120-byte arena, as S2's.
#[test]
fn a_spent_budget_still_gives_the_first_heuristics_plan() {
    let problem = s2_problem();
    let options = PlanOptions {
        planner: PlannerChoice::Auto,
        budget: onnx_memplan::plan::Budget {
            work: 0,
            deadline: Some(std::time::Instant::now()),
            ..onnx_memplan::plan::Budget::unlimited()
        },
        ..PlanOptions::default()
    };
    let solution = solve(&problem, &options).unwrap();
    assert_eq!(solution.planner, "greedy-by-size");
    assert_eq!(solution.offsets, vec![0, 2048, 4096, 0, 4096, 0]);
    assert_eq!(solution.arena, 5120);
    verify(&problem, &solution).unwrap();
}

/// Every planner's answer on the S2 problem passes the verifier, and `auto` is never worse
/// than greedy-by-size.
#[test]
fn every_planner_verifies() {
    let problem = Problem {
        buffers: (0..60u32)
            .map(|i| Buffer {
                size: 64 * u64::from(1 + (i * 7919) % 13),
                start: i % 17,
                end: i % 17 + 1 + (i * 31) % 9,
            })
            .collect(),
        alignment: 64,
    };
    let mut arenas = Vec::new();
    for name in onnx_memplan::plan::planner_names() {
        let options = PlanOptions {
            planner: name.parse().unwrap(),
            budget: onnx_memplan::plan::Budget::within(std::time::Duration::from_millis(200)),
            ..PlanOptions::default()
        };
        let solution = solve(&problem, &options).unwrap();
        verify(&problem, &solution).unwrap_or_else(|e| panic!("{name}: {e}"));
        arenas.push((*name, solution.arena));
    }
    let of = |n: &str| arenas.iter().find(|a| a.0 == n).unwrap().1;
    assert!(of("auto") <= of("greedy-by-size"), "{arenas:?}");
}

/// MiniMalloc's README example fits its capacity of 12 (exit 0, offsets written and
/// disjoint for overlapping lifetimes); capacity 10 is below the max-live bound (exit 4).
#[test]
fn minimalloc_example_through_the_cli() {
    let input = root().join("../shared/benchmarks/minimalloc/examples/input.12.csv");
    if !input.exists() {
        println!("skipped: ../shared/benchmarks/minimalloc not found");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("solution.csv");
    let run = run_cli(&[
        "solve",
        input.to_str().unwrap(),
        "--capacity",
        "12",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let rows: Vec<Vec<u64>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').skip(1).map(|v| v.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 5);
    for (i, a) in rows.iter().enumerate() {
        assert!(a[3] + a[2] <= 12, "row {i} fits the capacity");
        for b in &rows[i + 1..] {
            let live_together = a[0] < b[1] && b[0] < a[1];
            let share_bytes = a[3] < b[3] + b[2] && b[3] < a[3] + a[2];
            assert!(!(live_together && share_bytes), "{a:?} and {b:?} overlap");
        }
    }
    let run = run_cli(&["solve", input.to_str().unwrap(), "--capacity", "10"]);
    assert_eq!(run.status.code(), Some(4));
}

#[test]
fn bad_csv_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.csv");
    std::fs::write(&path, "id,lower,upper,size\nb1,0,x,4\n").unwrap();
    let run = run_cli(&["solve", path.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(2));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("bad.csv:2"), "{err}");
}
