//! Time and memory of `onnx-memplan plan` against the floor of any pass that copies a model
//! and records its SHA-256: the slower of `cp` of the file and `openssl dgst -sha256` of it
//! (the fastest SHA-256 on the machine), measured in the same run. Prints a markdown table.
//!
//! Per model (models/ and every `.onnx` in the `:`-separated folders of MEMPLAN_BENCH_MODELS):
//! the best of ROUNDS interleaved runs of each command, every output written to a fresh path
//! (as `cp` writes one); peak RSS of `plan` from `wait4`. Symbolic dims are bound to
//! `batch=1`, `sequence=128` (models without them ignore the bindings). Targets (issue 12, item 7): files
//! over 50 MB within 1.5× the floor, smaller ones within the floor + 10 ms; peak RSS within
//! 1.1× the file + 50 MB.
//!
//! Run: `cargo bench --bench io`. A BERT-base-size model (434 MB of random weights):
//! `.ci/venv/bin/python scripts/make_bert.py /tmp/bert-base --base --seq 128 --forms ln`, then
//! `MEMPLAN_BENCH_MODELS=/tmp/bert-base cargo bench --bench io`.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;

/// Runs `cmd` to completion: wall time and peak RSS in bytes (`wait4`'s `ru_maxrss`).
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also reports its resource use"
)]
fn measure(cmd: &mut Command) -> (Duration, u64) {
    let started = Instant::now();
    let child = cmd
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = libc::pid_t::try_from(child.id()).expect("a pid");
    let mut status = 0;
    // SAFETY: all-zero is a valid `rusage`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our unreaped child; both pointers are to live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = started.elapsed();
    assert_eq!(waited, pid, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed"
    );
    (elapsed, u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn bench(model: &Path, scratch: &Path) -> String {
    let size = std::fs::metadata(model).expect("model").len();
    let (copy, planned) = (scratch.join("copy.onnx"), scratch.join("m.memplan.onnx"));
    let (mut cp, mut sha, mut plan, mut rss) = (Duration::MAX, Duration::MAX, Duration::MAX, 0);
    for _ in 0..ROUNDS {
        let _ = std::fs::remove_file(&copy);
        cp = cp.min(measure(Command::new("cp").arg(model).arg(&copy)).0);
        sha = sha.min(measure(Command::new("openssl").args(["dgst", "-sha256"]).arg(model)).0);
        for name in ["m.memplan.onnx", "m.memplan.json"] {
            let _ = std::fs::remove_file(scratch.join(name));
        }
        let (t, r) = measure(
            Command::new(env!("CARGO_BIN_EXE_onnx-memplan"))
                .arg("plan")
                .arg(model)
                .arg("-o")
                .arg(&planned)
                .args(["-q", "--dim", "batch=1", "--dim", "sequence=128"]),
        );
        plan = plan.min(t);
        rss = rss.max(r);
    }
    let floor = cp.max(sha);
    let mb = |b: u64| b as f64 / 1e6;
    let big = size > 50_000_000;
    let time_ok = if big {
        ms(plan) <= 1.5 * ms(floor)
    } else {
        ms(plan) <= ms(floor) + 10.0
    };
    let rss_limit = size as f64 * 1.1 + 50e6;
    format!(
        "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2}× | {:+.1} | {} | {:.0} | {:.0} | {} |",
        model.file_name().unwrap_or_default().to_string_lossy(),
        mb(size),
        ms(cp),
        ms(sha),
        ms(plan),
        ms(plan) / ms(floor),
        ms(plan) - ms(floor),
        if time_ok { "yes" } else { "no" },
        mb(rss),
        rss_limit / 1e6,
        if (rss as f64) <= rss_limit {
            "yes"
        } else {
            "no"
        },
    )
}

fn main() {
    let scratch = tempfile::tempdir().expect("scratch folder");
    println!(
        "| model | MB | cp ms | openssl sha256 ms | plan ms | plan / floor | plan − floor ms | time target | peak RSS MB | RSS limit MB | RSS target |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for model in common::model_files() {
        println!("{}", bench(&model, scratch.path()));
    }
    println!(
        "\nfloor = max(cp, openssl dgst -sha256), best of {ROUNDS} interleaved runs each; time \
         target: ≤ 1.5× floor over 50 MB, else ≤ floor + 10 ms; RSS limit: 1.1× file + 50 MB."
    );
}
