//! Quality and speed on MiniMalloc's challenging problems: every planner's arena, and the exact
//! planner against the capacity of 1,048,576 bytes. Prints a markdown table.
//!
//! Data: `$MINIMALLOC_DIR`, else `../shared/benchmarks/minimalloc` next to the crate.
//! `$MINIMALLOC_TIME_LIMIT` (seconds, default 60) bounds the exact search per problem.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use onnx_memplan::plan::csv::read_csv;
use onnx_memplan::plan::{HEURISTICS, PlanOptions, PlannerChoice, max_live_bound, solve, verify};

const CAPACITY: u64 = 1_048_576;

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
    let limit: f64 = std::env::var("MINIMALLOC_TIME_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60.0);
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    files.sort();

    let names: Vec<&str> = HEURISTICS.iter().map(|h| h.name()).collect();
    println!(
        "| problem | buffers | max-live bound | {} | exact peak | exact s | fits? |",
        names.join(" | ")
    );
    println!("|---|---|---|{}---|---|---|", "---|".repeat(names.len()));
    let mut total = Duration::ZERO;
    let mut fits = 0;
    for path in &files {
        let csv = match read_csv(path) {
            Ok(csv) => csv,
            Err(e) => {
                println!("error: {e}");
                continue;
            }
        };
        let problem = &csv.problem;
        let mut row = vec![
            path.file_stem()
                .map_or(String::new(), |s| s.to_string_lossy().into_owned()),
            problem.buffers.len().to_string(),
            max_live_bound(problem).to_string(),
        ];
        for &planner in &HEURISTICS {
            let options = PlanOptions {
                planner,
                ..PlanOptions::default()
            };
            let solution = solve(problem, &options).expect("valid problem");
            verify(problem, &solution).expect("heuristic plan verifies");
            row.push(solution.arena.to_string());
        }
        let options = PlanOptions {
            planner: PlannerChoice::Exact,
            budget: onnx_memplan::plan::Budget::within(Duration::from_secs_f64(limit)),
            seed: 0,
            capacity: Some(CAPACITY),
        };
        let start = Instant::now();
        let solution = solve(problem, &options).expect("valid problem");
        let elapsed = start.elapsed();
        total += elapsed;
        verify(problem, &solution).expect("exact plan verifies");
        let fit = solution.arena <= CAPACITY;
        fits += usize::from(fit);
        row.push(solution.arena.to_string());
        row.push(format!("{:.2}", elapsed.as_secs_f64()));
        row.push(if fit { "yes" } else { "no" }.to_string());
        println!("| {} |", row.join(" | "));
    }
    println!(
        "\n{fits}/{} fit {CAPACITY} bytes; exact search {:.2} s in total",
        files.len(),
        total.as_secs_f64()
    );
}
