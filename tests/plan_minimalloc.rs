//! The planner on MiniMalloc's benchmark problems (`../shared/benchmarks/minimalloc`, or
//! `$MINIMALLOC_DIR`): the README example, a few challenging problems in debug builds and all
//! eleven in release builds, each solved to its capacity and verified.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use onnx_memplan::plan::csv::{parse_csv, read_csv};
use onnx_memplan::plan::{
    PlanOptions, PlannerChoice, Problem, Solution, VerifyError, solve, verify,
};

const CAPACITY: u64 = 1_048_576;

/// MiniMalloc's README example (`examples/input.12.csv`), which fits in 12 bytes.
const EXAMPLE: &str = "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n";

fn data_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MINIMALLOC_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/benchmarks/minimalloc"),
        PathBuf::from,
    );
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("skipped: ../shared/benchmarks/minimalloc not found");
        None
    }
}

fn solve_to(problem: &Problem, planner: PlannerChoice, capacity: u64, seconds: u64) -> Solution {
    let options = PlanOptions {
        planner,
        budget: onnx_memplan::plan::Budget::within(Duration::from_secs(seconds)),
        seed: 0,
        capacity: Some(capacity),
    };
    let solution = solve(problem, &options).expect("valid problem");
    assert_eq!(verify(problem, &solution), Ok(()));
    solution
}

fn challenging(name: &str) -> Option<Problem> {
    let path = data_dir()?.join(format!("challenging/{name}.1048576.csv"));
    Some(read_csv(&path).expect("benchmark reads").problem)
}

#[test]
fn readme_example_fits_in_twelve_bytes() {
    let mut problems = vec![parse_csv(EXAMPLE, "input.12.csv").expect("valid").problem];
    if let Some(dir) = data_dir() {
        let shared = read_csv(&dir.join("examples/input.12.csv")).expect("reads");
        assert_eq!(shared.problem, problems[0]);
        problems.push(shared.problem);
    }
    for problem in &problems {
        for planner in [PlannerChoice::Auto, PlannerChoice::Exact] {
            let solution = solve_to(problem, planner, 12, 5);
            assert_eq!(solution.arena, 12);
            assert!(solution.proven_optimal);
        }
        let impossible = solve_to(problem, PlannerChoice::Exact, 11, 5);
        assert!(impossible.lower_bound > 11, "11 bytes are proven too few");
    }
}

#[test]
fn quick_challenging_problems_fit_the_capacity() {
    for name in ["B", "C", "D", "J"] {
        let Some(problem) = challenging(name) else {
            return;
        };
        let solution = solve_to(&problem, PlannerChoice::Exact, CAPACITY, 60);
        assert!(solution.arena <= CAPACITY, "{name}: {}", solution.arena);
    }
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "takes minutes unoptimised; run with --release"
)]
fn all_challenging_problems_fit_the_capacity_with_solves_default_work() {
    let start = Instant::now();
    for name in ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"] {
        let Some(problem) = challenging(name) else {
            return;
        };
        // `solve`'s defaults: planner auto and the work of `--time-limit 10`; no clock, so the
        // machine's load cannot decide the outcome (the work budget is what ends a search).
        let options = PlanOptions {
            planner: PlannerChoice::Auto,
            budget: onnx_memplan::plan::Budget {
                work: 10 * onnx_memplan::plan::WORK_PER_SECOND,
                ..onnx_memplan::plan::Budget::unlimited()
            },
            seed: 0,
            capacity: Some(CAPACITY),
        };
        let solution = solve(&problem, &options).expect("valid problem");
        assert_eq!(verify(&problem, &solution), Ok(()));
        assert!(solution.arena <= CAPACITY, "{name}: {}", solution.arena);
    }
    println!("all fit in {:.1} s", start.elapsed().as_secs_f64());
}

#[test]
fn verify_catches_an_injected_overlap() {
    let Some(problem) = challenging("C") else {
        return;
    };
    let mut solution = solve_to(&problem, PlannerChoice::Auto, CAPACITY, 60);
    let buffers = &problem.buffers;
    let (a, b) = (0..buffers.len())
        .flat_map(|a| (0..buffers.len()).map(move |b| (a, b)))
        .find(|&(a, b)| a < b && buffers[a].conflicts(&buffers[b]))
        .expect("some buffers conflict");
    solution.offsets[b] = solution.offsets[a];
    let error = verify(&problem, &solution).expect_err("the overlap is caught");
    assert!(
        matches!(error, VerifyError::Overlap { first, second } if first == b || second == b),
        "{error}"
    );
}
