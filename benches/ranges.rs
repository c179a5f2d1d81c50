//! Planning over a range of sizes, through the whole pass (`plan --dim NAME=LO..HI`): the
//! parametric plan evaluated at each size (`--at`) against the plan made for that size alone
//! (`--dim NAME=V`), the upper-bound plan's waste there, and the cost of planning the range
//! against planning one size (the upper corner).
//!
//! Models: bert_tiny with `sequence` in 1..128 (batch 1), and resnet_small and mobilenet_v2
//! with their image's `H` and `W` made symbolic. Sizes v: each symbol at 1, 2, 4, ... clamped
//! into its range, up to its maximum. Every plan here was checked by the verifier (the pass
//! refuses to return an unverified plan). Prints a markdown table per model; every ratio is
//! against plans made in the same run.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use onnx_memplan::pipeline::{Options, plan_model};
use onnx_memplan::plan::{WORK_PER_SECOND, sample_points};

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    run(
        "bert_tiny",
        &root.join("models/bert_tiny.onnx"),
        &[("batch", 1)],
        &[("sequence", 1, 128)],
    );
    for (name, lo, hi) in [("resnet_small", 32, 160), ("mobilenet_v2", 32, 224)] {
        let model =
            common::symbolic_dims::symbolic_image(&root.join(format!("models/{name}.onnx")));
        run(
            &format!("{name} (H, W)"),
            &model,
            &[("batch", 1)],
            &[("H", lo, hi), ("W", lo, hi)],
        );
    }
}

fn run(name: &str, path: &Path, fixed: &[(&str, i64)], ranges: &[(&str, i64, i64)]) {
    // A work budget only: every run does the same work, so timings compare like with like.
    let mut range = Options {
        work: Some(WORK_PER_SECOND / 5),
        time_limit: Duration::from_secs(60),
        ..Options::default()
    };
    range.infer.dims = fixed.iter().map(|&(n, v)| (n.to_string(), v)).collect();
    range.infer.ranges = ranges
        .iter()
        .map(|&(n, lo, hi)| (n.to_string(), (lo, hi)))
        .collect();
    let alone = |point: &BTreeMap<String, i64>| {
        let mut o = range.clone();
        o.infer.ranges.clear();
        o.infer.dims.extend(point.clone());
        o
    };
    let points = sample_points(&range.infer.ranges);
    let upper = points.last().unwrap().clone();

    let best_of = |o: &Options| {
        (0..3)
            .map(|_| {
                let t = Instant::now();
                plan_model(path, o).unwrap();
                t.elapsed()
            })
            .min()
            .unwrap()
    };
    let range_time = best_of(&range);
    let one_time = best_of(&alone(&upper));
    let planned = plan_model(path, &range).unwrap();
    let upper_arena = planned.table.arenas[0].bytes;
    let proof = &planned.table.parametric.as_ref().unwrap().proof;

    println!(
        "\n### {name}: {} tensors, proof {proof}\n",
        planned.table.tensors.len()
    );
    println!(
        "| size | parametric (--at) | plan for the size alone | ratio | upper-bound plan | waste |"
    );
    println!("|---|---|---|---|---|---|");
    let mut worst: f64 = 0.0;
    for point in &points {
        let at = plan_model(
            path,
            &Options {
                at: point.clone(),
                ..range.clone()
            },
        )
        .unwrap()
        .table
        .arenas[0]
            .bytes;
        let alone = plan_model(path, &alone(point)).unwrap().table.arenas[0].bytes;
        let ratio = at as f64 / alone.max(1) as f64;
        worst = worst.max(ratio);
        let text: Vec<String> = point.iter().map(|(s, v)| format!("{s}={v}")).collect();
        println!(
            "| {} | {at} | {alone} | {ratio:.3} | {upper_arena} | {:.2}x |",
            text.join(" "),
            upper_arena as f64 / alone.max(1) as f64
        );
    }
    println!(
        "\nworst ratio {worst:.3} (target ≤ 1.05); planning the range (whole pass): {:.1} ms; one size (the upper corner): {:.1} ms; ratio {:.2}x (target ≤ 5)",
        range_time.as_secs_f64() * 1e3,
        one_time.as_secs_f64() * 1e3,
        range_time.as_secs_f64() / one_time.as_secs_f64().max(1e-9)
    );
}
