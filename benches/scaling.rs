//! Speed on synthetic network-like problems of 1k to 1M buffers: time and arena per planner,
//! and the time of `verify`. Prints a markdown table. The exact planner runs up to 10k buffers
//! and the genetic one up to 100k; both get `$SCALING_TIME_LIMIT` seconds (default 5).

use std::time::{Duration, Instant};

use onnx_memplan::plan::{
    HEURISTICS, PlanOptions, PlannerChoice, lower_bound, solve, synth, verify,
};

fn main() {
    let limit: f64 = std::env::var("SCALING_TIME_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5.0);
    let sizes: Vec<usize> = std::env::var("SCALING_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000, 1_000_000]);
    println!("| buffers | planner | arena | arena / lower bound | plan ms | verify ms |");
    println!("|---|---|---|---|---|---|");
    for &n in &sizes {
        let problem = synth::network_like(n, 42);
        let start = Instant::now();
        let bound = lower_bound(&problem);
        println!(
            "| {n} | lower bound | {bound} | 1.000 | {:.1} | |",
            ms(start.elapsed())
        );
        let mut planners: Vec<PlannerChoice> = HEURISTICS.to_vec();
        if n <= 100_000 {
            planners.push(PlannerChoice::S3Genetic);
        }
        if n <= 10_000 {
            planners.push(PlannerChoice::Exact);
        }
        planners.push(PlannerChoice::Auto);
        for planner in planners {
            let options = PlanOptions {
                planner,
                budget: onnx_memplan::plan::Budget::within(Duration::from_secs_f64(limit)),
                seed: 0,
                capacity: None,
            };
            let start = Instant::now();
            let solution = solve(&problem, &options).expect("valid problem");
            let plan = start.elapsed();
            let start = Instant::now();
            let checked = verify(&problem, &solution);
            let check = start.elapsed();
            if let Err(e) = checked {
                println!("| {n} | {planner} | INVALID: {e} | | | |");
                continue;
            }
            let label = if planner == PlannerChoice::Auto {
                format!("auto ({})", solution.planner)
            } else {
                planner.to_string()
            };
            println!(
                "| {n} | {label} | {} | {:.3} | {:.1} | {:.1} |",
                solution.arena,
                solution.arena as f64 / bound.max(1) as f64,
                ms(plan),
                ms(check)
            );
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
