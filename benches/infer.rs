//! Inference speed on a transformer-encoder-shaped graph of 20k+ nodes (and a 2k one for
//! scale), printed as a table. Run: `cargo bench --bench infer`.

#[path = "../tests/infer_support/mod.rs"]
#[allow(unused_imports)]
mod infer_support;

use std::time::Instant;

use onnx_memplan::infer::{InferOptions, infer_model};
use onnx_memplan::ir::Model;

fn main() {
    println!("| nodes | lower ms | infer ms (best of 5) |");
    println!("|---|---|---|");
    for size in [2_000, 20_000] {
        let (proto, nodes, _) = infer_support::transformer::encoder_model(size);
        let mut options = InferOptions::default();
        options.dims.insert("batch".into(), 2);
        let t = Instant::now();
        let lowered = Model::from_proto(&proto).expect("lowers");
        let lower_ms = t.elapsed().as_secs_f64() * 1e3;
        let best = (0..5)
            .map(|_| {
                let mut model = lowered.clone();
                let t = Instant::now();
                infer_model(&mut model, &options).expect("infers");
                t.elapsed().as_secs_f64() * 1e3
            })
            .fold(f64::INFINITY, f64::min);
        println!("| {nodes} | {lower_ms:.1} | {best:.1} |");
    }
}
