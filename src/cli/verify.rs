//! `onnx-memplan verify`: check an allocation table against a model, independently.

use std::path::PathBuf;

use anyhow::Result;

use crate::pipeline::{read_table, verify_table};

/// Arguments of `verify`.
#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// The model the table was made for.
    pub model: PathBuf,
    /// The allocation table (`.memplan.json`).
    pub table: PathBuf,
}

/// Runs `verify`; exit code 0 when the table is valid, 1 when it is not.
pub fn run(args: &VerifyArgs) -> Result<i32> {
    let table = read_table(&args.table)?;
    let problems = verify_table(&args.model, &table)?;
    if problems.is_empty() {
        eprintln!(
            "{}: valid plan ({} tensors, arena {} bytes)",
            args.table.display(),
            table.tensors.len(),
            table
                .arenas
                .iter()
                .map(|a| a.bytes)
                .fold(0, u64::saturating_add)
        );
        return Ok(0);
    }
    for p in problems.iter().take(20) {
        println!("{p}");
    }
    eprintln!(
        "{}: INVALID plan, {} problem(s){}",
        args.table.display(),
        problems.len(),
        if problems.len() > 20 {
            " (first 20 shown)"
        } else {
            ""
        }
    );
    Ok(1)
}
