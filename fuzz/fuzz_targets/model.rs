//! Fuzz target: a model file's bytes through the whole pass — decode, lower, infer, schedule,
//! liveness, plan, verify, then the table and the annotated model.
//!
//! Input: one byte of option flags, then the model file (see `fuzz/seeds.sh`). The flags mirror
//! `plan`'s options so that a finding replays with the CLI:
//! bit 0 `--no-inplace`, bit 1 `--no-alias`, bit 2 `--exclude-io`, bit 3 `--schedule memory`,
//! bit 4 `--trust-value-info`, bits 5–6 `--alignment` 64 / 1 / 16 / 256, bit 7 `--split auto
//! --split-time 1`; always `--time-limit 0.05`. (The split search's default safety stop, 60 s,
//! would make one input a minute long; a finding is an input over 10 s.)
//!
//! Finding: a panic, or an error that is not an input error (the CLI's exit 1).
#![no_main]

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use onnx_memplan::error::is_input_error;
use onnx_memplan::pipeline::{Options, ScheduleChoice, plan_model_bytes};
use onnx_memplan::split::SplitChoice;
use prost::Message;

fn options(flags: u8) -> Options {
    let mut options = Options {
        time_limit: Duration::from_millis(50),
        ..Options::default()
    };
    options.liveness.inplace = flags & 1 == 0;
    options.liveness.alias = flags & 2 == 0;
    options.liveness.include_io = flags & 4 == 0;
    if flags & 8 != 0 {
        options.schedule = ScheduleChoice::Memory;
    }
    options.infer.trust_value_info = flags & 16 != 0;
    options.liveness.alignment = [64, 1, 16, 256][usize::from(flags >> 5 & 3)];
    if flags & 128 != 0 {
        options.split.choice = SplitChoice::Auto;
        options.split.search_time = Duration::from_secs(1);
    }
    options
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, model)) = data.split_first() else {
        return;
    };
    // A folder that does not exist: external data never resolves to a real file.
    let path = Path::new("/nonexistent-onnx-memplan-fuzz/fuzz.onnx");
    match plan_model_bytes(path, Bytes::copy_from_slice(model), &options(flags)) {
        Ok(planned) => {
            let annotated = planned.annotated("fuzz.memplan.json").encode_to_vec();
            assert!(!annotated.is_empty());
            serde_json::to_string(&planned.table).expect("a table encodes as JSON");
        }
        Err(e) => assert!(is_input_error(&e), "internal error: {e:#}"),
    }
});
