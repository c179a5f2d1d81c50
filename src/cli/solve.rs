//! `onnx-memplan solve PROBLEM.csv`: plan a raw DSA problem in MiniMalloc's CSV format.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::builder::{PossibleValuesParser, TypedValueParser};

use crate::plan::csv::{format_csv, read_csv};
use crate::plan::{Budget, PlanOptions, PlannerChoice, Solution, planner_names, solve, verify};

/// Exit code when the capacity could not be met within the time limit.
pub const EXIT_NOT_MET: i32 = 3;
/// Exit code when the capacity is proven impossible.
pub const EXIT_IMPOSSIBLE: i32 = 4;
/// Exit code when a plan fails its own verification (a bug).
pub const EXIT_BUG: i32 = 1;

/// Arguments of `solve`.
#[derive(Debug, Clone, clap::Args)]
pub struct SolveArgs {
    /// Problem CSV: `id,lower,upper,size`, lifetime `[lower, upper)` (MiniMalloc's format).
    pub problem: PathBuf,
    /// Arena capacity in bytes to fit in; the search stops once it is met.
    #[arg(long)]
    pub capacity: Option<u64>,
    /// Write the solution here: the problem's rows plus an `offset` column.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Planner to run.
    #[arg(
        long,
        default_value = "auto",
        value_parser = PossibleValuesParser::new(planner_names())
            .try_map(|name| name.parse::<PlannerChoice>())
    )]
    pub planner: PlannerChoice,
    /// Seconds of work the searches may spend (30 million work units per second); they stop on
    /// that work, so their result does not depend on the machine's speed or load. A wall-clock
    /// safety stop at ten times this fires only on a machine several times slower than
    /// calibrated.
    #[arg(long, default_value = "10")]
    pub time_limit: f64,
    /// Work units the planner searches may spend (default: 30 million per second of
    /// --time-limit).
    #[arg(long, value_name = "UNITS")]
    pub work: Option<u64>,
    /// Seed for the randomised planners.
    #[arg(long, default_value = "0")]
    pub seed: u64,
}

/// Runs `solve`: prints a one-line summary to stderr, writes the solution if asked, and returns
/// the exit code: 0 when the capacity is met (or none was given), [`EXIT_NOT_MET`] when it was
/// not met within the time limit, [`EXIT_IMPOSSIBLE`] when it is proven impossible, and
/// [`EXIT_BUG`] if the plan fails verification. Bad input is an `Err`.
pub fn run(args: &SolveArgs) -> anyhow::Result<i32> {
    if !args.time_limit.is_finite() || args.time_limit < 0.0 {
        crate::bail_input!("--time-limit must be a non-negative number of seconds");
    }
    let csv = read_csv(&args.problem).map_err(|e| crate::input_error!("{e}"))?;
    let start = Instant::now();
    let mut budget = Budget::for_time(Duration::from_secs_f64(args.time_limit.min(1e9)), start);
    if let Some(work) = args.work {
        budget.work = work;
    }
    let options = PlanOptions {
        planner: args.planner,
        budget,
        seed: args.seed,
        capacity: args.capacity,
    };
    let solution = solve(&csv.problem, &options)
        .map_err(|e| crate::input_error!("{}: cannot plan: {e}", args.problem.display()))?;
    let elapsed = start.elapsed();
    if let Err(e) = verify(&csv.problem, &solution) {
        eprintln!("internal error: the plan fails verification: {e}");
        return Ok(EXIT_BUG);
    }
    let naive: u64 = csv.problem.buffers.iter().map(|b| b.size).sum();
    eprintln!("{}", summary(&solution, naive, args.capacity, elapsed));
    if let Some(path) = &args.output {
        let mut outputs = crate::onnx::Outputs::new();
        outputs.bytes(path, format_csv(&csv, &solution.offsets).as_bytes())?;
        outputs.commit()?;
    }
    Ok(exit_code(&solution, args.capacity))
}

fn exit_code(solution: &Solution, capacity: Option<u64>) -> i32 {
    match capacity {
        Some(c) if solution.arena > c && solution.lower_bound > c => EXIT_IMPOSSIBLE,
        Some(c) if solution.arena > c => EXIT_NOT_MET,
        _ => 0,
    }
}

fn summary(solution: &Solution, naive: u64, capacity: Option<u64>, elapsed: Duration) -> String {
    let saving = if naive > 0 {
        100.0 * (1.0 - solution.arena as f64 / naive as f64)
    } else {
        0.0
    };
    let proof = if solution.proven_optimal {
        "proven optimal"
    } else {
        "not proven optimal"
    };
    let verdict = match capacity {
        None => String::new(),
        Some(c) if solution.arena <= c => format!(", fits capacity {c}"),
        Some(c) if solution.lower_bound > c => format!(", capacity {c} is impossible"),
        Some(c) => format!(", capacity {c} not met in time"),
    };
    let cut: Vec<String> = solution
        .searches
        .iter()
        .filter(|s| s.ended_by != crate::plan::Ending::Complete)
        .map(|s| format!("{} {}", s.planner, s.ended_by.name()))
        .collect();
    let cut = if cut.is_empty() {
        String::new()
    } else {
        format!(" (stopped: {})", cut.join(", "))
    };
    format!(
        "arena {} bytes, lower bound {}, naive {} (saving {saving:.1}%), planner {}, {proof}, {:.1} ms{cut}{verdict}",
        solution.arena,
        solution.lower_bound,
        naive,
        solution.planner,
        elapsed.as_secs_f64() * 1e3
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::path::Path;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: SolveArgs,
    }

    fn parse(argv: &[&str]) -> Result<SolveArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("solve").chain(argv.iter().copied())).map(|c| c.args)
    }

    fn example(dir: &Path) -> PathBuf {
        let path = dir.join("input.12.csv");
        std::fs::write(
            &path,
            "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n",
        )
        .expect("write example");
        path
    }

    #[test]
    fn parses_defaults_and_planner_names() {
        let args = parse(&["p.csv"]).expect("valid");
        assert_eq!(args.planner, PlannerChoice::Auto);
        assert_eq!((args.time_limit, args.seed, args.capacity), (10.0, 0, None));
        let args = parse(&["p.csv", "--planner", "s2-free-list", "-o", "x.csv"]).expect("ok");
        assert_eq!(args.planner, PlannerChoice::S2FreeList);
        assert_eq!(args.output, Some(PathBuf::from("x.csv")));
        assert!(parse(&["p.csv", "--planner", "magic"]).is_err());
    }

    #[test]
    fn solves_writes_and_reports_the_capacity() {
        let dir = tempfile::tempdir().expect("temp dir");
        let problem = example(dir.path());
        let output = dir.path().join("out.csv");
        let mut args = parse(&[problem.to_str().expect("utf-8"), "--capacity", "12"]).expect("ok");
        args.output = Some(output.clone());
        assert_eq!(run(&args).expect("solves"), 0);
        let written = read_csv(&output).expect("output reads back as the same problem");
        assert_eq!(written.problem, read_csv(&problem).expect("input").problem);
        assert!(
            std::fs::read_to_string(&output)
                .expect("text")
                .starts_with("id,lower,upper,size,offset\n")
        );
        args.capacity = Some(11);
        assert_eq!(run(&args).expect("runs"), EXIT_IMPOSSIBLE);
    }

    #[test]
    fn bad_input_is_an_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("bad.csv");
        std::fs::write(&path, "id,lower,upper,size\nx,1,0,4\n").expect("write");
        let args = parse(&[path.to_str().expect("utf-8")]).expect("ok");
        let message = run(&args).expect_err("bad row").to_string();
        assert!(message.contains("bad.csv:2"), "{message}");
        let good = example(dir.path());
        let args = parse(&[good.to_str().expect("utf-8"), "--time-limit=-1"]).expect("ok");
        assert!(run(&args).is_err());
    }

    #[test]
    fn exit_codes_follow_the_capacity() {
        let solution = |arena, lower_bound| Solution {
            offsets: Vec::new(),
            arena,
            planner: String::new(),
            proven_optimal: false,
            lower_bound,
            searches: Vec::new(),
        };
        assert_eq!(exit_code(&solution(10, 8), None), 0);
        assert_eq!(exit_code(&solution(10, 8), Some(10)), 0);
        assert_eq!(exit_code(&solution(10, 8), Some(9)), EXIT_NOT_MET);
        assert_eq!(exit_code(&solution(10, 10), Some(9)), EXIT_IMPOSSIBLE);
    }
}
