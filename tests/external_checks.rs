//! One line, always shown by `cargo test` (a `harness = false` test binary prints straight to
//! the terminal): which of the checks against external tools and data the other tests could
//! run here, and why the others are skipped. The conditions are the ones those tests use:
//! onnxruntime (`tests/common::ort_python`: `$MEMPLAN_PYTHON` or `.ci/venv`), the ONNX node
//! conformance data (`../shared/conformance/onnx-node`, tests/conformance.rs), MiniMalloc's
//! benchmark (`$MINIMALLOC_DIR` or `../shared/benchmarks/minimalloc`, tests/plan_minimalloc.rs)
//! and a C compiler (`cc`, tests/c_header.rs). With `MEMPLAN_REQUIRE_EXTERNAL=1` a skip is a
//! failure (exit code 1), for a CI that must run them all.

mod common;

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use common::{ort_python, root};

/// `Ok(what ran)` or `Err(why it is skipped)`, for each external check.
fn checks() -> Vec<(&'static str, Result<String, String>)> {
    let onnxruntime = match ort_python() {
        Some(python) => Ok(python.display().to_string()),
        None => Err(
            "no Python with onnxruntime, onnx and numpy ($MEMPLAN_PYTHON or .ci/venv; scripts/ort_check.sh makes it)"
                .to_string(),
        ),
    };
    let conformance = root().join("../shared/conformance/onnx-node");
    let conformance = if conformance.is_dir() {
        Ok(conformance.display().to_string())
    } else {
        Err(format!("{} not found", conformance.display()))
    };
    let minimalloc = std::env::var_os("MINIMALLOC_DIR").map_or_else(
        || root().join("../shared/benchmarks/minimalloc"),
        PathBuf::from,
    );
    let minimalloc = if minimalloc.is_dir() {
        Ok(minimalloc.display().to_string())
    } else {
        Err(format!("{} not found", minimalloc.display()))
    };
    let cc = match Command::new("cc").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("cc")
            .to_string()),
        _ => Err("no `cc` on PATH (apt-get install gcc)".to_string()),
    };
    vec![
        ("onnxruntime", onnxruntime),
        ("conformance", conformance),
        ("MiniMalloc", minimalloc),
        ("cc", cc),
    ]
}

fn main() -> ExitCode {
    // `cargo test -- --list` and filters are for harness tests: list nothing, run nothing.
    if std::env::args().any(|a| a == "--list") {
        return ExitCode::SUCCESS;
    }
    let checks = checks();
    let ran: Vec<String> = checks
        .iter()
        .filter_map(|(name, r)| r.as_ref().ok().map(|what| format!("{name} ({what})")))
        .collect();
    let skipped: Vec<String> = checks
        .iter()
        .filter_map(|(name, r)| r.as_ref().err().map(|why| format!("{name}: {why}")))
        .collect();
    println!(
        "external checks: ran {}; skipped {}",
        if ran.is_empty() {
            "none".into()
        } else {
            ran.join(", ")
        },
        if skipped.is_empty() {
            "none".into()
        } else {
            skipped.join("; ")
        }
    );
    let strict = std::env::var_os("MEMPLAN_REQUIRE_EXTERNAL").is_some_and(|v| v == "1");
    if strict && !skipped.is_empty() {
        eprintln!("MEMPLAN_REQUIRE_EXTERNAL=1: external checks were skipped");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
