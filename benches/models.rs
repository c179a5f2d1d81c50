//! Plan quality and speed on every model in models/ (and any extra folder given in the
//! MEMPLAN_BENCH_MODELS environment variable, `:`-separated). Prints a markdown table.
//!
//! Columns: tensors; naive bytes; lower bound (max live after sharing, stored order); arena of
//! the `auto` planner; arena / lower bound; greedy-by-size arena with the same sharing
//! (baseline, same run); greedy-by-size without in-place/alias (the TFLite/XLA baseline); arena
//! with `--schedule memory` and its ratio to that baseline; plan ms; whole-pass ms (load, infer,
//! plan, verify, annotate, encode); I/O floor ms (read + decode + encode the same file).
//!
//! Run: `cargo bench --bench models`

mod common;

use std::path::Path;
use std::time::Instant;

use onnx_memplan::liveness::LivenessOptions;
use onnx_memplan::pipeline::{Options, ScheduleChoice, plan_model};
use onnx_memplan::plan::PlannerChoice;
use prost::Message;

fn options(planner: PlannerChoice, sharing: bool, schedule: ScheduleChoice) -> Options {
    let mut o = Options {
        planner,
        schedule,
        liveness: LivenessOptions {
            inplace: sharing,
            alias: sharing,
            ..LivenessOptions::default()
        },
        ..Options::default()
    };
    for (name, value) in [
        ("batch", 1),
        ("sequence", 16),
        ("seq", 16),
        ("height", 224),
        ("width", 224),
    ] {
        o.infer.dims.insert(name.to_string(), value);
    }
    o
}

/// Timed runs per measurement; the fastest counts (for the pass and the I/O floor alike).
const REPEATS: usize = 10;

/// Milliseconds of one run of `f`.
fn timed(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e3
}

/// The fastest of REPEATS whole passes (plan: load, infer, solve, verify; then annotate and
/// encode the output model) and of REPEATS I/O floors (read + decode + encode the same file),
/// run alternately so both see the same machine state.
fn pass_and_floor_ms(path: &Path, options: &Options) -> (f64, f64) {
    let (mut pass, mut floor) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..REPEATS {
        pass = pass.min(timed(|| {
            let p = plan_model(path, options).expect("planned once already");
            std::hint::black_box(p.annotated("x.json").encode_to_vec());
        }));
        floor = floor.min(timed(|| {
            let bytes = std::fs::read(path).expect("read");
            let model = onnx_memplan::onnx::proto::ModelProto::decode(bytes::Bytes::from(bytes))
                .expect("decode");
            std::hint::black_box(model.encode_to_vec());
        }));
    }
    (pass, floor)
}

fn main() {
    println!(
        "| model | tensors | naive | lower bound | arena | arena/LB | optimal | greedy-by-size (same sharing) | greedy-by-size, no sharing | arena, --schedule memory | memory/greedy-no-sharing | plan ms | pass ms | I/O floor ms | pass/floor |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut ratios = Vec::new();
    for path in common::model_files() {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let auto = options(PlannerChoice::Auto, true, ScheduleChoice::Stored);
        let planned = match plan_model(&path, &auto) {
            Ok(p) => p,
            Err(e) => {
                println!("| {name} | error: {e:#} |");
                continue;
            }
        };
        let (pass_ms, floor) = pass_and_floor_ms(&path, &auto);
        let arena_of = |p: &onnx_memplan::pipeline::Planned| p.table.arenas[0].bytes;
        let greedy = plan_model(
            &path,
            &options(PlannerChoice::GreedyBySize, true, ScheduleChoice::Stored),
        )
        .map(|p| arena_of(&p));
        let greedy_plain = plan_model(
            &path,
            &options(PlannerChoice::GreedyBySize, false, ScheduleChoice::Stored),
        )
        .map(|p| arena_of(&p));
        let memory = plan_model(
            &path,
            &options(PlannerChoice::Auto, true, ScheduleChoice::Memory),
        )
        .map(|p| arena_of(&p));
        let s = &planned.table.stats;
        let arena = arena_of(&planned);
        let (greedy, greedy_plain, memory) = (
            greedy.unwrap_or(0),
            greedy_plain.unwrap_or(0),
            memory.unwrap_or(0),
        );
        let ratio = memory as f64 / greedy_plain.max(1) as f64;
        ratios.push(ratio);
        println!(
            "| {name} | {} | {} | {} | {arena} | {:.3} | {} | {greedy} | {greedy_plain} | {memory} | {ratio:.3} | {:.1} | {pass_ms:.1} | {floor:.1} | {:.2} |",
            planned.table.tensors.len(),
            s.naive_bytes,
            s.lower_bound_bytes,
            arena as f64 / s.lower_bound_bytes.max(1) as f64,
            if s.proven_optimal { "yes" } else { "no" },
            planned.timings.plan_ms,
            pass_ms / floor.max(1e-9),
        );
    }
    if !ratios.is_empty() {
        let geo = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
        println!(
            "\ngeometric mean of arena(--schedule memory) / greedy-by-size without sharing: {geo:.3} over {} models",
            ratios.len()
        );
    }
}
