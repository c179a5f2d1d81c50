//! Quality and speed on MiniMalloc's challenging problems: every planner's arena, and `solve`'s
//! defaults (planner `auto`, `--time-limit 10`) against the capacity of 1,048,576 bytes.
//! Prints a markdown table.
//!
//! Data: `$MINIMALLOC_DIR`, else `../shared/benchmarks/minimalloc` next to the crate.
//! `$MINIMALLOC_TIME_LIMIT` (seconds, default 10 like `solve`) is the time limit per problem.
//! `$MINIMALLOC_BIN`, when set, is a MiniMalloc binary (built from its own source, not part of
//! this project) run on each problem in the same run with `--capacity=1048576`; its time is the
//! solver time it prints ("Elapsed time"), falling back to the process's wall time.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use onnx_memplan::plan::csv::read_csv;
use onnx_memplan::plan::{HEURISTICS, PlanOptions, PlannerChoice, max_live_bound, solve, verify};

const CAPACITY: u64 = 1_048_576;

/// Runs MiniMalloc on `problem`: whether it succeeded, and its seconds.
fn minimalloc(bin: &Path, problem: &Path) -> (bool, f64) {
    let start = Instant::now();
    let output = std::process::Command::new(bin)
        .arg(format!("--capacity={CAPACITY}"))
        .arg(format!("--input={}", problem.display()))
        .output();
    let wall = start.elapsed().as_secs_f64();
    let Ok(output) = output else {
        return (false, wall);
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let elapsed = stderr.lines().find_map(|l| {
        l.strip_prefix("Elapsed time ")?
            .strip_suffix('s')?
            .parse()
            .ok()
    });
    (output.status.success(), elapsed.unwrap_or(wall))
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
    let limit: f64 = std::env::var("MINIMALLOC_TIME_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10.0);
    let peer = std::env::var_os("MINIMALLOC_BIN").map(PathBuf::from);
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    files.sort();

    let names: Vec<&str> = HEURISTICS.iter().map(|h| h.name()).collect();
    println!(
        "| problem | buffers | max-live bound | {} | solve peak | solve s | fits? | MiniMalloc s |",
        names.join(" | ")
    );
    println!(
        "|---|---|---|{}---|---|---|---|",
        "---|".repeat(names.len())
    );
    let mut total = Duration::ZERO;
    let mut peer_total = 0.0;
    let mut peer_fits = 0;
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
            planner: PlannerChoice::Auto,
            budget: onnx_memplan::plan::Budget::within(Duration::from_secs_f64(limit)),
            seed: 0,
            capacity: Some(CAPACITY),
        };
        let start = Instant::now();
        let solution = solve(problem, &options).expect("valid problem");
        let elapsed = start.elapsed();
        total += elapsed;
        verify(problem, &solution).expect("the plan verifies");
        let fit = solution.arena <= CAPACITY;
        fits += usize::from(fit);
        row.push(solution.arena.to_string());
        row.push(format!("{:.2}", elapsed.as_secs_f64()));
        row.push(if fit { "yes" } else { "no" }.to_string());
        row.push(peer.as_ref().map_or("-".to_string(), |bin| {
            let (ok, seconds) = minimalloc(bin, path);
            peer_total += seconds;
            peer_fits += usize::from(ok);
            format!("{seconds:.2}{}", if ok { "" } else { " (failed)" })
        }));
        println!("| {} |", row.join(" | "));
    }
    println!(
        "\n{fits}/{} fit {CAPACITY} bytes at solve's defaults, {:.2} s in total",
        files.len(),
        total.as_secs_f64()
    );
    if peer.is_some() {
        println!(
            "MiniMalloc: {peer_fits}/{} fit, {peer_total:.2} s in total (same run); ratio {:.2}",
            files.len(),
            total.as_secs_f64() / peer_total.max(1e-9)
        );
    }
}
