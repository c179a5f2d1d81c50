//! Fuzz target: `solve`'s MiniMalloc CSV reader, then the solve on what it reads (a 10 ms
//! limit), the plan's own verification and the solution's CSV round trip.
//!
//! Finding: a panic, a solve error on a problem the reader accepted (the CLI's exit 1), a plan
//! that fails verification, or a written solution that does not read back as the same problem.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use onnx_memplan::plan::csv::{format_csv, parse_csv};
use onnx_memplan::plan::{Budget, PlanOptions, solve, verify};

fuzz_target!(|data: &[u8]| {
    // `solve` reads the file as UTF-8 text; other bytes are refused before parsing.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(csv) = parse_csv(text, "fuzz.csv") else {
        return;
    };
    let options = PlanOptions {
        budget: Budget::within(Duration::from_millis(10)),
        ..PlanOptions::default()
    };
    let solution = solve(&csv.problem, &options).expect("a problem the reader accepts solves");
    if let Err(e) = verify(&csv.problem, &solution) {
        panic!("planner {} made an invalid plan: {e}", solution.planner);
    }
    let written = format_csv(&csv, &solution.offsets);
    let back = parse_csv(&written, "solution.csv").expect("a written solution reads back");
    assert_eq!(
        back.problem, csv.problem,
        "the solution reads back as the same problem"
    );
});
