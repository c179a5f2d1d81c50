//! Planning over a range of sizes: the parametric plan against a plan made for each size
//! alone, the upper-bound plan's waste, and the cost of planning the range.
//!
//! Models: bert_tiny with `sequence` in 1..128 (batch 1) and resnet_small with its image's
//! `H` and `W` made symbolic in 32..160. The problems are built from the symbolic inference
//! (byte-size expressions) and the lifetimes under the stored order, one buffer per arena
//! tensor (no in-place or alias sharing, which the pass does not yet apply over ranges).
//! Prints a markdown table per model; ratios are against plans made in the same run.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use onnx_memplan::infer::InferOptions;
use onnx_memplan::ir::ValueType;
use onnx_memplan::liveness::{TensorKind, lifetimes};
use onnx_memplan::onnx::proto::{ModelProto, tensor_shape_proto::dimension, type_proto};
use onnx_memplan::pipeline::load_typed;
use onnx_memplan::plan::{
    Budget, PlanOptions, SymBuffer, SymProblem, WORK_PER_SECOND, plan_parametric, sample_points,
    solve, verify,
};
use onnx_memplan::schedule::topological_order;
use prost::Message;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let bert = root.join("models/bert_tiny.onnx");
    run("bert_tiny", &bert, &[("batch", 1)], &[("sequence", 1, 128)]);
    let resnet = symbolic_image(&root.join("models/resnet_small.onnx"));
    run(
        "resnet_small (H, W)",
        &resnet,
        &[("batch", 1)],
        &[("H", 32, 160), ("W", 32, 160)],
    );
}

/// The model with its first input's last two dims renamed `H` and `W`, in a temporary file.
fn symbolic_image(path: &PathBuf) -> tempfile::TempPath {
    let mut proto = ModelProto::decode(std::fs::read(path).unwrap().as_slice()).unwrap();
    let input = &mut proto.graph.as_mut().unwrap().input[0];
    let Some(type_proto::Value::TensorType(t)) = input.r#type.as_mut().unwrap().value.as_mut()
    else {
        panic!("a tensor input");
    };
    let dims = &mut t.shape.as_mut().unwrap().dim;
    let n = dims.len();
    dims[n - 2].value = Some(dimension::Value::DimParam("H".into()));
    dims[n - 1].value = Some(dimension::Value::DimParam("W".into()));
    let file = tempfile::NamedTempFile::with_suffix(".onnx").unwrap();
    std::fs::write(file.path(), proto.encode_to_vec()).unwrap();
    file.into_temp_path()
}

fn run(name: &str, path: &std::path::Path, fixed: &[(&str, i64)], ranges: &[(&str, i64, i64)]) {
    let fixed: BTreeMap<String, i64> = fixed.iter().map(|&(n, v)| (n.into(), v)).collect();
    let symbolic = InferOptions {
        dims: fixed.clone(),
        ranges: ranges
            .iter()
            .map(|&(n, lo, hi)| (n.to_string(), (lo, hi)))
            .collect(),
        ..InferOptions::default()
    };
    let mut at_max = symbolic.clone();
    for &(n, _, hi) in ranges {
        at_max.dims.insert(n.to_string(), hi);
    }
    at_max.ranges.clear();
    let (_, sym, _) = load_typed(path, &symbolic).unwrap();
    let (_, max, _) = load_typed(path, &at_max).unwrap();
    let order = topological_order(&max.graph).unwrap();
    let lives = lifetimes(&max.graph, &order).unwrap();
    let buffers: Vec<SymBuffer> = lives
        .iter()
        .filter(|t| t.kind != TensorKind::Constant && t.bytes.is_some())
        .map(|t| {
            let Some(ValueType::Tensor(ty)) = &sym.graph.values[t.value].ty else {
                panic!("a tensor");
            };
            SymBuffer {
                size: ty.bytes_expr().expect("a byte-size expression"),
                start: t.first as u32,
                end: t.last as u32 + 1,
            }
        })
        .collect();
    let problem = SymProblem {
        buffers,
        alignment: 64,
        ranges: symbolic.ranges.clone(),
    };
    // A work budget only (a fifth of a second's worth): every repetition gets the same work,
    // so the timings compare like with like.
    let options = PlanOptions {
        budget: Budget {
            work: WORK_PER_SECOND / 5,
            deadline: None,
            cancel: None,
            progress: None,
        },
        ..PlanOptions::default()
    };
    let points = sample_points(&problem.ranges);
    let upper = problem.at(points.last().unwrap()).unwrap();

    let best_of = |f: &dyn Fn()| {
        (0..5)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .min()
            .unwrap()
    };
    let one = best_of(&|| {
        solve(&upper, &options).unwrap();
    });
    let range = best_of(&|| {
        plan_parametric(&problem, &options).unwrap();
    });
    let (plan, _) = plan_parametric(&problem, &options).unwrap();
    let upper_arena = solve(&upper, &options).unwrap().arena;

    println!("\n### {name}: {} buffers\n", problem.buffers.len());
    println!(
        "| point | parametric | plan for the point alone | ratio | upper-bound plan | waste |"
    );
    println!("|---|---|---|---|---|---|");
    for point in &points {
        let (offsets, arena) = plan.evaluate(point).unwrap();
        let concrete = problem.at(point).unwrap();
        // The evaluated plan is a valid plan at this point (checked by the planner core's
        // verifier, on the sizes at the point).
        let evaluated = onnx_memplan::plan::Solution {
            offsets,
            arena,
            planner: "parametric".into(),
            proven_optimal: false,
            lower_bound: 0,
            searches: Vec::new(),
        };
        verify(&concrete, &evaluated).expect("the evaluated plan is valid");
        let alone = solve(&concrete, &options).unwrap().arena;
        let text: Vec<String> = point.iter().map(|(s, v)| format!("{s}={v}")).collect();
        println!(
            "| {} | {arena} | {alone} | {:.3} | {upper_arena} | {:.2}x |",
            text.join(" "),
            arena as f64 / alone.max(1) as f64,
            upper_arena as f64 / alone.max(1) as f64
        );
    }
    println!(
        "\nplanning the range: {:.1} ms; one size (the upper corner): {:.1} ms; ratio {:.2}x",
        range.as_secs_f64() * 1e3,
        one.as_secs_f64() * 1e3,
        range.as_secs_f64() / one.as_secs_f64().max(1e-9)
    );
}
