//! Every model in models/ plans, verifies, and round-trips: the annotated model decodes again
//! with the same nodes and initializers, and `verify` accepts its table.

mod common;

use std::path::PathBuf;

use common::*;
use onnx_memplan::onnx::load_model;
use prost::Message;

fn models() -> Vec<PathBuf> {
    let mut list: Vec<PathBuf> = std::fs::read_dir(root().join("models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.ends_with(".onnx") && !name.contains(".memplan.")
        })
        .collect();
    list.sort();
    assert!(list.len() >= 4, "models/ holds the reference models");
    list
}

#[test]
fn every_model_plans_verifies_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    for model in models() {
        let stem = model.file_stem().unwrap().to_string_lossy().into_owned();
        let out = dir.path().join(format!("{stem}.memplan.onnx"));
        let table = dir.path().join(format!("{stem}.memplan.json"));
        let run = run_cli(&[
            "plan",
            model.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--dim",
            "batch=1",
            "--dim",
            "sequence=16",
        ]);
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(0), "{stem}: {err}");
        assert!(err.contains("arena"), "{stem}: summary line: {err}");

        let original = load_model(&model).unwrap();
        let annotated = load_model(&out).unwrap();
        let (g0, g1) = (original.graph.unwrap(), annotated.graph.clone().unwrap());
        let mut n0: Vec<Vec<u8>> = g0.node.iter().map(|n| n.encode_to_vec()).collect();
        let mut n1: Vec<Vec<u8>> = g1.node.iter().map(|n| n.encode_to_vec()).collect();
        n0.sort();
        n1.sort();
        assert_eq!(n0, n1, "{stem}: same nodes");
        assert_eq!(g0.initializer, g1.initializer, "{stem}: same initializers");
        let meta = |k: &str| {
            annotated
                .metadata_props
                .iter()
                .find(|p| p.key() == k)
                .map(|p| p.value().to_string())
        };
        assert_eq!(meta("memplan.format").as_deref(), Some("onnx-memplan/1"));
        assert_eq!(meta("memplan.table"), Some(format!("{stem}.memplan.json")));

        let text = std::fs::read_to_string(&table).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let arena = json["arenas"][0]["bytes"].as_u64().unwrap();
        let bound = json["stats"]["lower_bound_bytes"].as_u64().unwrap();
        let naive = json["stats"]["naive_bytes"].as_u64().unwrap();
        assert!(
            bound <= arena && arena <= naive,
            "{stem}: {bound} <= {arena} <= {naive}"
        );
        assert_eq!(
            json["schedule"].as_array().unwrap().len(),
            g0.node.len(),
            "{stem}: schedule covers every node"
        );

        let check = run_cli(&["verify", model.to_str().unwrap(), table.to_str().unwrap()]);
        assert_eq!(
            check.status.code(),
            Some(0),
            "{stem}: verify: {}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
    }
}

#[test]
fn verify_rejects_a_corrupted_table() {
    let dir = tempfile::tempdir().unwrap();
    let model = root().join("models/mobilenet_v2.onnx");
    let out = dir.path().join("m.memplan.onnx");
    let table = dir.path().join("m.memplan.json");
    let run = run_cli(&["plan", model.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(0));
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&table).unwrap()).unwrap();
    // Move the largest intermediate onto another live intermediate's offset.
    let tensors = json["tensors"].as_array().unwrap().clone();
    let live: Vec<&serde_json::Value> = tensors
        .iter()
        .filter(|t| t["kind"] == "intermediate" && t["offset"].is_u64())
        .collect();
    let (a, b) = live
        .iter()
        .flat_map(|a| live.iter().map(move |b| (*a, *b)))
        .find(|(a, b)| {
            a["name"] != b["name"]
                && a["offset"] != b["offset"]
                && a["bytes"].as_u64() <= b["bytes"].as_u64()
                && a["first"].as_u64() <= b["last"].as_u64()
                && b["first"].as_u64() <= a["last"].as_u64()
                && a["inplace_of"].is_null()
                && b["inplace_of"].is_null()
                && a["alias_of"].is_null()
                && b["alias_of"].is_null()
        })
        .expect("two simultaneously live tensors");
    let (name, offset) = (a["name"].clone(), b["offset"].clone());
    for t in json["tensors"].as_array_mut().unwrap() {
        if t["name"] == name {
            t["offset"] = offset.clone();
        }
    }
    std::fs::write(&table, serde_json::to_string(&json).unwrap()).unwrap();
    let check = run_cli(&["verify", model.to_str().unwrap(), table.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&check.stdout).contains("share bytes"));
}

/// `--schedule memory` never raises the bound of the stored order, its plan passes the
/// independent verifier, and the annotated model's nodes follow the chosen schedule.
#[test]
fn memory_schedule_never_raises_the_bound() {
    use onnx_memplan::pipeline::{Options, ScheduleChoice, plan_model};
    for model in models() {
        let stem = model.file_stem().unwrap().to_string_lossy().into_owned();
        let mut options = Options {
            schedule: ScheduleChoice::Memory,
            ..Options::default()
        };
        options.infer.dims.insert("batch".into(), 1);
        options.infer.dims.insert("sequence".into(), 16);
        let planned = plan_model(&model, &options).unwrap();
        let stats = &planned.table.stats;
        assert!(
            stats.lower_bound_bytes <= stats.stored_lower_bound_bytes,
            "{stem}: {} > {}",
            stats.lower_bound_bytes,
            stats.stored_lower_bound_bytes
        );
        let problems = onnx_memplan::verify::check_table(&planned.model.graph, &planned.table);
        assert!(problems.is_empty(), "{stem}: {problems:?}");
        let original = planned.original.graph.as_ref().unwrap();
        let annotated = planned.annotated("t.json");
        let emitted = &annotated.graph.as_ref().unwrap().node;
        for (step, &index) in planned.table.schedule.iter().enumerate() {
            assert_eq!(emitted[step], original.node[index], "{stem}: step {step}");
        }
    }
}
