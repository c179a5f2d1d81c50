//! The command line: [`main`] parses the arguments, runs the subcommand (one module each) and
//! maps errors to exit codes. `src/main.rs` and the Python package's `onnx-memplan` script both
//! call it.

use std::ffi::OsString;

use clap::{Parser, Subcommand};

use crate::error::is_input_error;

internal_modules!(
    args,
    conformance,
    modes,
    plan,
    progress,
    shapes,
    solve,
    verify
);

/// The exit codes, as `--help` lists them.
const EXIT_CODES: &str = "Exit codes:
  0  success (verify: the table is valid; conformance: at or above the floor)
  1  internal error; verify: the table is invalid; conformance: below the floor
  2  bad input or unsupported model (one line on stderr naming the file, node or tensor)
  3  solve: the --capacity was not met within the limits
  4  solve: the --capacity is impossible (below the lower bound)";

/// Static memory planning for ONNX models.
#[derive(Parser)]
#[command(name = "onnx-memplan", version, about, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Plan a model: write the annotated model and the allocation table.
    Plan(Box<plan::PlanArgs>),
    /// Print the inferred type of every tensor, or write them into the model with -o.
    Shapes(shapes::ShapesArgs),
    /// Check an allocation table against its model.
    Verify(verify::VerifyArgs),
    /// Plan a raw DSA problem (MiniMalloc CSV: id,lower,upper,size).
    Solve(solve::SolveArgs),
    /// Check shape inference against the ONNX node tests' recorded outputs.
    Conformance(conformance::ConformanceArgs),
}

/// Runs the command line `args` (the program name first) and returns the exit code: 0 ok,
/// 2 bad input or unsupported model (one line on stderr), 1 internal error or a failed check,
/// 3 and 4 `solve`'s capacity not met or impossible (listed under `--help`).
pub fn main(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            // --help and --version are "errors" that print to stdout and exit 0.
            let _ = err.print();
            return err.exit_code();
        }
    };
    let result = match &cli.command {
        Command::Plan(args) => plan::run(args),
        Command::Shapes(args) => shapes::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Conformance(args) => conformance::run(args),
        Command::Solve(args) => solve::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            let line = format!("{err:#}").replace('\n', " ");
            if is_input_error(&err) {
                eprintln!("error: {line}");
                2
            } else {
                eprintln!("internal error: {line}");
                1
            }
        }
    }
}
