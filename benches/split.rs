//! The split stage on every model in models/ (and any extra folder in MEMPLAN_BENCH_MODELS,
//! `:`-separated). Prints markdown tables.
//!
//! Per model, same run: the arena with `--schedule memory` (the baseline) and with
//! `--schedule memory --split auto` (default 10% extra MACs), their ratio, the extra MACs in
//! percent of the model's, the chains split, the whole-pass time of both and their ratio, what
//! ended the split search (the work, never the clock, on a working machine), and whether
//! `--budget` at half the lower bound fits without and with splitting, and the arenas with
//! `--exclude-io` (graph inputs and outputs outside the arena) without and with splitting. Then
//! the geometric mean of the ratio over the CNNs (Conv and no MatMul), over the transformers
//! (MatMul and Softmax: row blocking), over those at 128 tokens or more (the length of the
//! attention's key axis, the last axis of the first Softmax's input) and over all models, what sets the peak after splitting
//! (the step, its node and the largest tensors live there), and for
//! MobileNetV2 the frontier: arena against the allowed extra MACs (5, 10, 20, 40%), with the
//! graph inputs and outputs in the arena (the default) and with `--exclude-io`.
//!
//! Run: `cargo bench --bench split`. BERT-style encoders at 128 to 512 tokens:
//! `.ci/venv/bin/python scripts/make_bert.py /tmp/bert-models`, then
//! `MEMPLAN_BENCH_MODELS=/tmp/bert-models cargo bench --bench split`.

mod common;

/// The binary's allocator (see src/main.rs), so the table times what the command runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::Path;
use std::time::Instant;

use onnx_memplan::pipeline::{Options, Planned, ScheduleChoice, plan_model};
use onnx_memplan::split::{SplitChoice, SplitOptions};

fn options(split: Option<f64>, include_io: bool) -> Options {
    let mut o = Options {
        schedule: ScheduleChoice::Memory,
        split: SplitOptions {
            choice: if split.is_some() {
                SplitChoice::Auto
            } else {
                SplitChoice::Off
            },
            overhead_pct: split.unwrap_or(10.0),
            ..SplitOptions::default()
        },
        ..Options::default()
    };
    o.liveness.include_io = include_io;
    for (name, value) in [("batch", 1), ("sequence", 128), ("seq", 128)] {
        o.infer.dims.insert(name.to_string(), value);
    }
    o
}

/// The plan and the milliseconds it took.
fn timed_plan(path: &Path, options: &Options) -> Result<(Planned, f64), String> {
    let t = Instant::now();
    let planned = plan_model(path, options).map_err(|e| format!("{e:#}"))?;
    Ok((planned, t.elapsed().as_secs_f64() * 1e3))
}

fn arena(p: &Planned) -> u64 {
    p.table.arenas.iter().map(|a| a.bytes).sum()
}

fn extra_pct(p: &Planned) -> f64 {
    p.table.splits.as_ref().map_or(0.0, |s| {
        100.0 * s.extra_macs as f64 / s.total_macs.max(1) as f64
    })
}

/// The attention's key length: the last axis of the first Softmax's input.
fn tokens(p: &Planned) -> Option<i64> {
    let graph = &p.model.graph;
    let softmax = graph.nodes.iter().find(|n| n.op_type == "Softmax")?;
    let input = softmax.inputs.first().copied().flatten()?;
    let ty = graph.values[input].tensor_type()?;
    let shape = onnx_memplan::ir::concrete(ty.shape.as_ref()?)?;
    shape.last().copied()
}

fn geomean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

fn main() {
    println!(
        "| model | arena, --schedule memory | + --split auto | before/after | extra MACs % | chains | ms without | ms with | time with/without | split ended by | --budget 50% of bound, unsplit | split | --exclude-io | + --split auto | before/after |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let (mut cnn, mut transformers, mut all) = (Vec::new(), Vec::new(), Vec::new());
    let mut long = Vec::new();
    let mut mobilenet = None;
    let mut budget_fits = 0;
    let mut peaks = Vec::new();
    for path in common::model_files() {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let (base, base_ms) = match timed_plan(&path, &options(None, true)) {
            Ok(r) => r,
            Err(e) => {
                println!("| {name} | error: {e} |");
                continue;
            }
        };
        let (split, split_ms) = match timed_plan(&path, &options(Some(10.0), true)) {
            Ok(r) => r,
            Err(e) => {
                println!("| {name} | {} | error: {e} |", arena(&base));
                continue;
            }
        };
        let ratio = arena(&base) as f64 / arena(&split).max(1) as f64;
        let half = base.table.stats.lower_bound_bytes / 2;
        let fits = |choice: SplitChoice| {
            let mut o = options(Some(10.0), true);
            o.split.choice = choice;
            o.modes.budget = Some(half);
            if plan_model(&path, &o).is_ok() {
                "fits"
            } else {
                "refused"
            }
        };
        let (unsplit_fits, split_fits) = (fits(SplitChoice::Off), fits(SplitChoice::Auto));
        budget_fits += usize::from(split_fits == "fits");
        let no_io = timed_plan(&path, &options(None, false)).map(|(p, _)| arena(&p));
        let no_io_split = timed_plan(&path, &options(Some(10.0), false)).map(|(p, _)| arena(&p));
        let (no_io, no_io_split) = (no_io.unwrap_or(0), no_io_split.unwrap_or(0));
        let io_ratio = no_io as f64 / no_io_split.max(1) as f64;
        println!(
            "| {name} | {} | {} | {ratio:.2}x | {:.2} | {} | {base_ms:.0} | {split_ms:.0} | {:.1}x | {} | {unsplit_fits} | {split_fits} | {no_io} | {no_io_split} | {io_ratio:.2}x |",
            arena(&base),
            arena(&split),
            extra_pct(&split),
            split.table.splits.as_ref().map_or(0, |s| s.chains.len()),
            split_ms / base_ms.max(1e-3),
            split_ended_by(&split),
        );
        peaks.push(format!("| {name} | {} |", what_sets_the_peak(&split)));
        all.push(ratio);
        let has = |op: &str| base.model.graph.nodes.iter().any(|n| n.op_type == op);
        if has("Conv") && !has("MatMul") {
            cnn.push(ratio);
        }
        if has("MatMul") && has("Softmax") {
            transformers.push(ratio);
            if tokens(&base).is_some_and(|t| t >= 128) {
                long.push(ratio);
            }
        }
        if name.starts_with("mobilenet_v2") {
            mobilenet = Some((path.clone(), arena(&base)));
        }
    }
    println!();
    println!(
        "geometric mean of before/after: CNNs {:.2}x ({} models), transformers {:.2}x ({} models; at 128 tokens or more {:.2}x, {} models), all {:.2}x ({} models)",
        geomean(&cnn),
        cnn.len(),
        geomean(&transformers),
        transformers.len(),
        geomean(&long),
        long.len(),
        geomean(&all),
        all.len()
    );
    println!(
        "--budget at 50% of the lower bound (split auto): {budget_fits} of {} models fit",
        all.len()
    );
    println!();
    println!("What sets the peak after splitting (the step where the live bytes peak)");
    println!();
    println!("| model | step: node, live bytes; the largest tensors live there |");
    println!("|---|---|");
    for row in &peaks {
        println!("{row}");
    }
    let Some((path, base)) = mobilenet else {
        return;
    };
    println!();
    println!("MobileNetV2 frontier (baseline: --schedule memory, {base} bytes with I/O)");
    println!();
    println!(
        "| allowed extra MACs % | arena (I/O in arena) | before/after | extra MACs % | arena, --exclude-io | before/after | extra MACs % | ms |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let io_base = timed_plan(&path, &options(None, false)).map(|(p, _)| arena(&p));
    for pct in [5.0, 10.0, 20.0, 40.0] {
        let with_io = timed_plan(&path, &options(Some(pct), true));
        let without = timed_plan(&path, &options(Some(pct), false));
        match (with_io, without, &io_base) {
            (Ok((a, ms)), Ok((b, _)), Ok(io_base)) => println!(
                "| {pct} | {} | {:.2}x | {:.2} | {} | {:.2}x | {:.2} | {ms:.0} |",
                arena(&a),
                base as f64 / arena(&a).max(1) as f64,
                extra_pct(&a),
                arena(&b),
                *io_base as f64 / arena(&b).max(1) as f64,
                extra_pct(&b),
            ),
            _ => println!("| {pct} | error |"),
        }
    }
}

/// What ended the split search (`work-budget`, `complete`, or `time-limit` when the safety
/// stop fired).
fn split_ended_by(planned: &Planned) -> String {
    let searches = &planned.table.stats.searches;
    let split = searches.iter().find(|s| s.planner == "split");
    split.map_or_else(|| "-".into(), |s| s.ended_by.clone())
}

/// The step of a plan where the live bytes peak: its node, the live bytes, and the four
/// largest tensors of their own (no aliases) live there.
fn what_sets_the_peak(planned: &Planned) -> String {
    let table = &planned.table;
    let live = onnx_memplan::split::estimate::live_bytes(table);
    let Some((step, &bytes)) = live
        .iter()
        .enumerate()
        .max_by_key(|&(s, &b)| (b, usize::MAX - s))
    else {
        return "no steps".into();
    };
    let node = &planned.model.graph.nodes[table.schedule[step]];
    let mut tensors: Vec<(u64, &str, &str)> = table
        .tensors
        .iter()
        .filter(|t| t.first <= step && step <= t.last && t.offset.is_some())
        .filter(|t| t.alias_of.is_none() && t.inplace_of.is_none())
        .map(|t| (t.bytes.unwrap_or(0), t.name.as_str(), t.kind.as_str()))
        .collect();
    tensors.sort_by(|a, b| b.cmp(a));
    let largest: Vec<String> = tensors
        .iter()
        .take(4)
        .map(|(b, name, kind)| format!("{name} ({kind}) {b}"))
        .collect();
    format!(
        "{step}: {} '{}', {bytes} B; {}",
        node.op_type,
        node.name,
        largest.join(", ")
    )
}
