//! Deterministic output: the same input and options give byte-identical files whatever the
//! number of threads. Searches stop on a work budget, not on the clock; a run in which the
//! wall-clock safety stop fired says so in its table, and only then may differ.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn run(args: &[&str], threads: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_onnx-memplan"))
        .args(args)
        .env("RAYON_NUM_THREADS", threads)
        .output()
        .expect("the binary runs")
}

/// A MiniMalloc-style trace of `n` buffers with long, overlapping lifetimes (heavier than a
/// network's), from a fixed linear congruential sequence.
fn heavy_trace(path: &Path, n: usize) {
    let mut state: u64 = 42;
    let mut next = |bound: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % bound
    };
    let mut text = String::from("id,lower,upper,size\n");
    for i in 0..n {
        let start = next(n as u64 / 4);
        let length = 1 + next(60);
        let size = 64 * (1 + next(4096));
        text.push_str(&format!("{i},{start},{},{size}\n", start + length));
    }
    std::fs::write(path, text).expect("write the trace");
}

#[test]
fn plan_writes_the_same_bytes_at_one_and_two_threads() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let models: Vec<PathBuf> = std::fs::read_dir(common::root().join("models"))
        .expect("models/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    assert!(models.len() >= 5);
    for model in &models {
        let stem = model.file_stem().unwrap().to_string_lossy().into_owned();
        let mut outputs = Vec::new();
        for threads in ["1", "2"] {
            let out = tmp.path().join(format!("{stem}.{threads}.memplan.onnx"));
            let table = tmp.path().join(format!("{stem}.{threads}.memplan.json"));
            let o = run(
                &[
                    "plan",
                    model.to_str().unwrap(),
                    "-o",
                    out.to_str().unwrap(),
                    "--table",
                    table.to_str().unwrap(),
                    "--schedule",
                    "memory",
                    "--dim",
                    "batch=1",
                    "--dim",
                    "sequence=16",
                ],
                threads,
            );
            assert!(
                o.status.success(),
                "{stem}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let table = std::fs::read_to_string(&table).unwrap();
            outputs.push((table, std::fs::read(&out).unwrap()));
        }
        let timed_out = outputs.iter().any(|(t, _)| t.contains("\"time-limit\""));
        if !timed_out {
            // The table records the annotated model's digest, and that model names the table:
            // the digests differ by the names only (the models are compared below).
            let table = |i: usize| {
                let mut json: serde_json::Value = serde_json::from_str(&outputs[i].0).unwrap();
                let digest = json["model"]
                    .as_object_mut()
                    .unwrap()
                    .remove("annotated_sha256");
                assert!(digest.is_some(), "{stem}: no annotated_sha256");
                json
            };
            assert!(table(0) == table(1), "{stem}: tables differ");
            // The annotated model names its table, which differs by name only.
            let model = |i: usize| {
                String::from_utf8_lossy(&outputs[i].1).replace(&format!(".{}.memplan", i + 1), "")
            };
            assert!(model(0) == model(1), "{stem}: annotated models differ");
        }
    }
}

#[test]
fn solve_cut_by_its_work_budget_gives_the_same_offsets_at_one_and_two_threads() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let trace = tmp.path().join("heavy.csv");
    heavy_trace(&trace, 3000);
    let mut results = Vec::new();
    for threads in ["1", "2", "1", "2"] {
        let out = tmp.path().join(format!("solution.{threads}.csv"));
        let o = run(
            &[
                "solve",
                trace.to_str().unwrap(),
                "--work",
                "100000000",
                "--time-limit",
                "120",
                "-o",
                out.to_str().unwrap(),
            ],
            threads,
        );
        let summary = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{summary}");
        assert!(
            summary.contains("work-budget"),
            "the budget cuts a search: {summary}"
        );
        assert!(!summary.contains("time-limit"), "{summary}");
        results.push(std::fs::read(&out).unwrap());
    }
    assert!(results.windows(2).all(|w| w[0] == w[1]), "solutions differ");
}

/// The budget (S4) and tier (S1) searches stop on `--search-work`, so a run cut short by it
/// writes the same bytes at any thread count; `--search-time` is only their safety stop.
#[test]
fn mode_searches_cut_by_their_work_budget_write_the_same_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let model = common::root().join("models/bert_tiny.onnx");
    let bound = ["--search-time", "120", "--search-work", "3000000"];
    // 2,200,000 B needs the offload search; a 640 KiB SRAM holds a quarter of the flat plan.
    let modes: [(&str, &[&str]); 2] = [
        ("offload-spill", &["--budget", "2200000"]),
        (
            "hierarchy",
            &[
                "--tier",
                "sram:655360:1:64",
                "--tier",
                "dram:1GiB:200:8",
                "--segment",
                "4",
            ],
        ),
    ];
    for (search, mode) in modes {
        let mut outputs = Vec::new();
        for (run_id, threads) in ["1", "2"].into_iter().enumerate() {
            let dir = tmp.path().join(format!("{search}-{run_id}"));
            std::fs::create_dir(&dir).unwrap();
            let out = dir.join("bert.memplan.onnx");
            let mut args = vec!["plan", model.to_str().unwrap(), "-o", out.to_str().unwrap()];
            args.extend(common::BERT_128_UNSPLIT);
            args.extend(bound);
            args.extend(mode);
            let o = run(&args, threads);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let table = std::fs::read_to_string(dir.join("bert.memplan.json")).unwrap();
            let json: serde_json::Value = serde_json::from_str(&table).unwrap();
            let ends: Vec<&str> = json["stats"]["searches"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["planner"] == search)
                .map(|s| s["ended_by"].as_str().unwrap())
                .collect();
            assert!(
                ends.contains(&"work-budget") && !ends.contains(&"time-limit"),
                "{search} is cut by --search-work: {ends:?}"
            );
            outputs.push((table, std::fs::read(&out).unwrap()));
        }
        assert!(outputs[0] == outputs[1], "{search}: the outputs differ");
    }
}
