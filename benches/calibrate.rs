//! Calibration of the work units: for each planner, the work units it spends and the CPU time
//! the process takes on MiniMalloc's challenging problems, and the nanoseconds one unit stands
//! for. A unit should cost about `1e9 / WORK_PER_SECOND` ns in every planner (see
//! ARCHITECTURE.md, "Work units"). CPU time (user + system, all threads) rather than the clock,
//! so that other work on a shared machine does not count. Prints a markdown table.
//!
//! Data: `$MINIMALLOC_DIR`, else `../shared/benchmarks/minimalloc` next to the crate.
//! `$CALIBRATE_WORK` (units, default 150 million) is the allowance of each search run.

use std::path::PathBuf;

use onnx_memplan::plan::csv::read_csv;
use onnx_memplan::plan::{
    Budget, HEURISTICS, PlanOptions, PlannerChoice, Problem, WORK_PER_SECOND, solve,
};

const CAPACITY: u64 = 1_048_576;

/// CPU seconds this process has used so far (all threads).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Runs `planner` on every problem (the searches with `work` units and the capacity to meet);
/// returns the units spent and the CPU seconds taken, summed. Each run is repeated three times
/// and the fastest kept.
fn measure(problems: &[Problem], planner: PlannerChoice, work: u64) -> (u64, f64) {
    let mut units = 0;
    let mut seconds = 0.0;
    for problem in problems {
        let options = PlanOptions {
            planner,
            budget: Budget {
                work,
                ..Budget::unlimited()
            },
            seed: 0,
            capacity: Some(CAPACITY),
        };
        let mut fastest = f64::INFINITY;
        let mut spent = 0;
        for _ in 0..3 {
            let start = cpu_seconds();
            let solution = solve(problem, &options).expect("valid problem");
            fastest = fastest.min(cpu_seconds() - start);
            spent = solution.searches.iter().map(|s| s.work).sum();
        }
        units += spent;
        seconds += fastest;
    }
    (units, seconds)
}

fn main() {
    let dir = std::env::var_os("MINIMALLOC_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/benchmarks/minimalloc"),
        PathBuf::from,
    );
    let challenging = dir.join("challenging");
    let Ok(entries) = std::fs::read_dir(&challenging) else {
        println!("skipped: {} not found", challenging.display());
        return;
    };
    let work: u64 = std::env::var("CALIBRATE_WORK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150_000_000);
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    files.sort();
    let problems: Vec<Problem> = files
        .iter()
        .filter_map(|p| read_csv(p).ok().map(|csv| csv.problem))
        .collect();
    let target = 1e9 / WORK_PER_SECOND as f64;
    println!(
        "{} problems; target {target:.1} ns a unit (WORK_PER_SECOND = {WORK_PER_SECOND})\n",
        problems.len()
    );
    println!("| planner | units | CPU s | ns a unit | ratio to target |");
    println!("|---|---|---|---|---|");
    let planners = HEURISTICS
        .iter()
        .copied()
        .chain([PlannerChoice::S3Genetic, PlannerChoice::Exact]);
    for planner in planners {
        let (units, seconds) = measure(&problems, planner, work);
        let ns = seconds * 1e9 / units.max(1) as f64;
        println!(
            "| {} | {units} | {seconds:.3} | {ns:.2} | {:.2} |",
            planner.name(),
            ns / target
        );
    }
}
