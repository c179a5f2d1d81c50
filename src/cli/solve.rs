//! `onnx-memplan solve`: plan a raw DSA problem in MiniMalloc's CSV format.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::plan::{self, PlanOptions, PlannerChoice, csv};
use crate::{input_error, onnx};

/// Exit code when the capacity could not be met within the time limit.
pub const EXIT_CAPACITY_NOT_MET: i32 = 3;
/// Exit code when the capacity is proven impossible.
pub const EXIT_CAPACITY_IMPOSSIBLE: i32 = 4;

/// Arguments of `solve`.
#[derive(clap::Args, Debug)]
pub struct SolveArgs {
    /// The problem: CSV with `id,lower,upper,size` rows, lifetime `[lower, upper)`.
    pub problem: PathBuf,
    /// Arena capacity in bytes the solution must fit.
    #[arg(long)]
    pub capacity: Option<u64>,
    /// Write the rows with an `offset` column here.
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Planner: `auto` (portfolio, then exact search) or one planner by name.
    #[arg(long, default_value = "auto")]
    pub planner: PlannerChoice,
    /// Seconds the search may take.
    #[arg(long, default_value_t = 10.0)]
    pub time_limit: f64,
    /// Seed for the randomised planners.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Runs `solve`: 0 when the capacity is met (or none was given), 3 when it was not met within
/// the time limit, 4 when it is proven impossible.
pub fn run(args: &SolveArgs) -> Result<i32> {
    let read = csv::read_csv(&args.problem).map_err(|e| input_error!("{e}"))?;
    let options = PlanOptions {
        planner: args.planner,
        time_limit: Duration::from_secs_f64(args.time_limit.max(0.0)),
        seed: args.seed,
        capacity: args.capacity,
    };
    let started = Instant::now();
    let solution = plan::solve(&read.problem, &options)
        .map_err(|e| input_error!("{}: {e}", args.problem.display()))?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    plan::verify(&read.problem, &solution).map_err(|e| {
        anyhow::anyhow!(
            "bug: {} produced an invalid solution: {e}",
            solution.planner
        )
    })?;
    if let Some(out) = &args.output {
        onnx::write_atomic(out, csv::format_csv(&read, &solution.offsets).as_bytes())?;
    }
    let bound = solution
        .lower_bound
        .max(plan::max_live_bound(&read.problem));
    eprintln!(
        "{}: {} buffers, peak {} bytes, lower bound {bound} bytes, planner {}{}, {ms:.1} ms",
        args.problem.display(),
        read.problem.buffers.len(),
        solution.arena,
        solution.planner,
        if solution.proven_optimal {
            ", optimal"
        } else {
            ""
        },
    );
    Ok(match args.capacity {
        Some(cap) if solution.arena > cap => {
            if bound > cap {
                eprintln!("capacity {cap} bytes is impossible: the lower bound is {bound} bytes");
                EXIT_CAPACITY_IMPOSSIBLE
            } else {
                eprintln!("capacity {cap} bytes not met within the time limit");
                EXIT_CAPACITY_NOT_MET
            }
        }
        _ => 0,
    })
}
