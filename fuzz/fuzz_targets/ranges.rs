//! Fuzz target: plans over ranges of sizes (`plan --dim NAME=LO..HI`, issue 13) — the symbolic
//! inference, the parametric planner, the range verifier and `--at` — on a model file's bytes.
//!
//! Input: the `model` target's format (one byte of flags, then the model file), so the two
//! share a corpus. Every symbolic dim of the graph inputs (up to four) gets the range
//! `LO..HI`: bits 0–1 pick HI from 2 / 7 / 64 / 513, bit 2 makes LO = HI / 2 (else 1), bit 3
//! writes the plan evaluated at the middle of each range (`--at`), bit 4 `--exclude-io`,
//! bit 5 `--no-inplace`, bit 6 `--alignment 1`; always `--time-limit 0.05`.
//!
//! Finding: a panic, or an error that is not an input error (the CLI's exit 1).
#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use onnx_memplan::error::is_input_error;
use onnx_memplan::onnx::proto::{ModelProto, tensor_shape_proto::dimension, type_proto};
use onnx_memplan::pipeline::{Options, plan_model_bytes};
use prost::Message;

/// The first four symbolic dims met in the model's graph inputs.
fn input_symbols(model: &ModelProto) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let inputs = model.graph.iter().flat_map(|g| g.input.iter());
    for input in inputs {
        let Some(type_proto::Value::TensorType(t)) =
            input.r#type.as_ref().and_then(|t| t.value.as_ref())
        else {
            continue;
        };
        for dim in t.shape.iter().flat_map(|s| s.dim.iter()) {
            if let Some(dimension::Value::DimParam(name)) = &dim.value {
                if names.len() < 4 && !name.is_empty() {
                    names.insert(name.clone());
                }
            }
        }
    }
    names
}

fn options(flags: u8, symbols: &BTreeSet<String>) -> Options {
    let mut options = Options {
        time_limit: Duration::from_millis(50),
        ..Options::default()
    };
    let hi = [2, 7, 64, 513][usize::from(flags & 3)];
    let lo = if flags & 4 != 0 { hi / 2 } else { 1 };
    let mut at = BTreeMap::new();
    for name in symbols {
        options.infer.ranges.insert(name.clone(), (lo, hi));
        at.insert(name.clone(), (lo + hi) / 2);
    }
    if flags & 8 != 0 {
        options.at = at;
    }
    options.liveness.include_io = flags & 16 == 0;
    options.liveness.inplace = flags & 32 == 0;
    if flags & 64 != 0 {
        options.liveness.alignment = 1;
    }
    options
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, model)) = data.split_first() else {
        return;
    };
    let Ok(proto) = ModelProto::decode(model) else {
        return; // the model target covers undecodable bytes
    };
    let symbols = input_symbols(&proto);
    if symbols.is_empty() {
        return;
    }
    // A folder that does not exist: external data never resolves to a real file.
    let path = Path::new("/nonexistent-onnx-memplan-fuzz/fuzz.onnx");
    match plan_model_bytes(
        path,
        Bytes::copy_from_slice(model),
        &options(flags, &symbols),
    ) {
        Ok(planned) => {
            let annotated = planned.annotated("fuzz.memplan.json").encode_to_vec();
            assert!(!annotated.is_empty());
            serde_json::to_string(&planned.table).expect("a table encodes as JSON");
        }
        Err(e) => assert!(is_input_error(&e), "internal error: {e:#}"),
    }
});
