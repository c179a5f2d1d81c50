//! Command-line entry point: parse arguments, run the subcommand, map errors to exit codes
//! (0 ok, 2 bad input or unsupported model, 1 internal error).

use clap::{Parser, Subcommand};

use onnx_memplan::cli;
use onnx_memplan::error::is_input_error;

/// Static memory planning for ONNX models.
#[derive(Parser)]
#[command(name = "onnx-memplan", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Plan a model: write the annotated model and the allocation table.
    Plan(Box<cli::plan::PlanArgs>),
    /// Print the inferred type of every tensor, or write them into the model with -o.
    Shapes(cli::shapes::ShapesArgs),
    /// Check an allocation table against its model.
    Verify(cli::verify::VerifyArgs),
    /// Plan a raw DSA problem (MiniMalloc CSV: id,lower,upper,size).
    Solve(cli::solve::SolveArgs),
    /// Check shape inference against the ONNX node tests' recorded outputs.
    Conformance(cli::conformance::ConformanceArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Plan(args) => cli::plan::run(args),
        Command::Shapes(args) => cli::shapes::run(args),
        Command::Verify(args) => cli::verify::run(args),
        Command::Conformance(args) => cli::conformance::run(args),
        Command::Solve(args) => cli::solve::run(args),
    };
    let code = match result {
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
    };
    std::process::exit(code);
}
