//! The advanced modes on the real models in models/ (batch 1, sequence 16).

use std::collections::BTreeMap;
use std::path::Path;

use onnx_memplan::infer::{InferOptions, infer_model};
use onnx_memplan::ir::{Graph, Model};
use onnx_memplan::liveness::{Liveness, LivenessOptions, analyse};
use onnx_memplan::modes::budget::plan_budget;
use onnx_memplan::modes::hierarchy::parse_tiers;
use onnx_memplan::modes::offload::Options;
use onnx_memplan::modes::tiers::plan_tiers;
use onnx_memplan::onnx::load_model;
use onnx_memplan::schedule::topological_order;

const MODELS: [&str; 5] = [
    "mobilenet_v2",
    "resnet_small",
    "bert_tiny",
    "unet_small",
    "vit_tiny",
];

fn graph(name: &str) -> Graph {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("models/{name}.onnx"));
    let proto = load_model(&path).unwrap();
    let mut model = Model::from_proto(&proto).unwrap();
    let dims = BTreeMap::from([("batch".to_string(), 1), ("sequence".to_string(), 16)]);
    infer_model(
        &mut model,
        &InferOptions {
            dims,
            ..InferOptions::default()
        },
    )
    .unwrap();
    model.graph
}

fn bound(l: &Liveness, alignment: u64) -> u64 {
    let mut live = vec![0u64; l.order.len().max(1)];
    for b in &l.buffers {
        for s in &mut live[b.first..=b.last] {
            *s += b.bytes.next_multiple_of(alignment);
        }
    }
    live.into_iter().max().unwrap_or(0)
}

/// Max over steps of the bytes of the buffers the step's node reads or writes.
fn floor(g: &Graph, l: &Liveness, alignment: u64) -> u64 {
    let mut at = vec![std::collections::BTreeSet::new(); l.order.len()];
    let mut step_of = vec![0; g.nodes.len()];
    for (s, &n) in l.order.iter().enumerate() {
        step_of[n] = s;
    }
    for (t, life) in l.tensors.iter().enumerate() {
        let Some(b) = l.buffer_of[t] else { continue };
        let v = &g.values[life.value];
        for n in v.producer.iter().chain(&v.consumers) {
            at[step_of[*n]].insert(b);
        }
    }
    at.iter()
        .map(|set| {
            set.iter()
                .map(|&b| l.buffers[b].bytes.next_multiple_of(alignment))
                .sum()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn numbers() {
    for name in MODELS {
        let g = graph(name);
        let order = topological_order(&g).unwrap();
        let opts = LivenessOptions::default();
        let l = analyse(&g, order.clone(), opts).unwrap();
        let lb = bound(&l, 64);
        let sram = lb / 4;
        let tiers = parse_tiers(&[format!("sram:{sram}:1:64"), "dram:1GiB:200:8".into()]).unwrap();
        let t = std::time::Instant::now();
        let p = plan_tiers(&g, &order, opts, &tiers, 2).unwrap();
        let h = &p.info;
        eprintln!(
            "{name}: lb {lb} sram {sram}: E {:.0} -> {:.0} ({:.1}%), {} actions, fill {:?}, {:?}",
            h.cost_initial,
            h.cost_final,
            100.0 * (1.0 - h.cost_final / h.cost_initial),
            h.actions,
            h.fill,
            t.elapsed()
        );
        let w = floor(&g, &l, 64);
        eprintln!("  operand floor {w}");
        for frac in [0.5, 0.75, 0.9, 0.95] {
            let budget = w + ((lb - w) as f64 * frac) as u64;
            let t = std::time::Instant::now();
            match plan_budget(&g, &l, 64, budget, &Options::default()) {
                Ok(b) => eprintln!(
                    "  budget {frac}: migrated {} baseline {:?} transfers {} arena {} ({:?})",
                    b.info.migrated_bytes,
                    b.info.baseline_migrated_bytes,
                    b.info.transfers.len(),
                    b.arena,
                    t.elapsed()
                ),
                Err(e) => eprintln!("  budget {frac}: {e}"),
            }
        }
    }
}
