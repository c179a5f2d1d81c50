//! Memory-hierarchy mode (S1): S2's six-operator example in one tier gives S2's offsets; on
//! the real models every tensor gets a tier, the plan verifies and the estimated cost drops.

mod common;

use common::*;
use onnx_memplan::onnx::proto::{
    AttributeProto, GraphProto, TensorProto, attribute_proto::AttributeType,
};

fn cast(input: &str, output: &str, to: i64) -> onnx_memplan::onnx::proto::NodeProto {
    let mut n = node("Cast", &[input], &[output]);
    n.attribute.push(AttributeProto {
        name: Some("to".into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(to),
        ..Default::default()
    });
    n
}

/// S2's example: outputs of 2048, 2048, 1024, 2048, 1024 and 4096 bytes; op1 and op2 read
/// op0, op3 reads op2, op4 reads op1 and op3, op5 reads op4. Built from a float16 weight:
/// t0 = RandomUniformLike(w) (1024 × f16; random, so not folded to a constant), t1 = Relu(t0), t2 = Cast(t0, uint8), t3 = Cast(t2, f16),
/// t4 = Equal(t1, t3) (1024 × bool), t5 = Cast(t4, f32), the graph output.
fn s2_model() -> onnx_memplan::onnx::proto::ModelProto {
    let weight = TensorProto {
        name: Some("w".into()),
        dims: vec![1024],
        data_type: Some(10),
        raw_data: Some(vec![0u8; 2048].into()),
        ..Default::default()
    };
    model(GraphProto {
        name: Some("s2".into()),
        node: vec![
            node("RandomUniformLike", &["w"], &["t0"]),
            node("Relu", &["t0"], &["t1"]),
            cast("t0", "t2", 2),
            cast("t2", "t3", 10),
            node("Equal", &["t1", "t3"], &["t4"]),
            cast("t4", "t5", 1),
        ],
        initializer: vec![weight],
        output: vec![float_info("t5", &[1024])],
        ..Default::default()
    })
}

#[test]
fn s2_example_in_one_tier_gives_s2_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (_, table) = plan_written(dir.path(), "s2", &s2_model(), &["--tier", "main:1MiB"]);
    let table = read_table(&table);
    let offsets: Vec<(String, usize, usize, Option<u64>)> = table
        .tensors
        .iter()
        .filter(|t| t.name.starts_with('t'))
        .map(|t| (t.name.clone(), t.first, t.last, t.offset))
        .collect();
    let expected = [
        (0, 2, 0),
        (1, 4, 2048),
        (2, 3, 4096),
        (3, 4, 0),
        (4, 5, 4096),
        (5, 5, 0),
    ];
    for (i, &(first, last, offset)) in expected.iter().enumerate() {
        assert_eq!(offsets[i], (format!("t{i}"), first, last, Some(offset)));
    }
    assert_eq!(table.arenas.len(), 1);
    assert_eq!(table.arenas[0].bytes, 5120);
    let h = table.hierarchy.unwrap();
    assert_eq!(h.cost_initial, h.cost_final);
}

#[test]
fn real_models_get_tiers_and_a_lower_cost() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "mobilenet_v2",
        "resnet_small",
        "bert_tiny",
        "unet_small",
        "vit_tiny",
    ] {
        let model = root().join(format!("models/{name}.onnx"));
        let flat = dir.path().join(format!("{name}.memplan.onnx"));
        let args = ["--dim", "batch=1", "--dim", "sequence=16"];
        let mut plain = vec![
            "plan",
            model.to_str().unwrap(),
            "-o",
            flat.to_str().unwrap(),
        ];
        plain.extend(args);
        assert!(run_cli(&plain).status.success());
        let bound = read_table(&dir.path().join(format!("{name}.memplan.json")))
            .stats
            .lower_bound_bytes;
        let out = dir.path().join(format!("{name}.tiers.onnx"));
        let sram = format!("sram:{}:1:64", bound / 4);
        let mut tiered = vec!["plan", model.to_str().unwrap(), "-o", out.to_str().unwrap()];
        tiered.extend(args);
        tiered.extend(["--tier", &sram, "--tier", "dram:1GiB:200:8"]);
        let run = run_cli(&tiered);
        assert!(
            run.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let table_path = dir.path().join(format!("{name}.tiers.memplan.json"));
        let table = read_table(&table_path);
        assert_eq!(table.arenas.len(), 2);
        assert!(table.arenas[0].bytes <= bound / 4);
        for t in table.tensors.iter().filter(|t| t.offset.is_some()) {
            assert!(matches!(t.arena, Some(0 | 1)), "{name}: {}", t.name);
        }
        let h = table.hierarchy.unwrap();
        assert!(h.cost_final < h.cost_initial, "{name}: {h:?}");
        eprintln!(
            "{name}: E(s) {:.0} -> {:.0} ({:.1}% less), sram {:.0}% full",
            h.cost_initial,
            h.cost_final,
            100.0 * (1.0 - h.cost_final / h.cost_initial),
            100.0 * h.fill[0]
        );
        assert_verifies(&model, &table_path);
    }
}

#[test]
fn bad_tiers_are_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.onnx");
    write_model(&chain_model(), &path);
    for (spec, needle) in [
        ("sram", "wrong number of fields"),
        ("sram:lots", "unknown unit"),
        ("sram:1K:1:0", "bandwidth"),
    ] {
        let run = run_cli(&["plan", path.to_str().unwrap(), "--tier", spec]);
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
    }
    let run = run_cli(&[
        "plan",
        path.to_str().unwrap(),
        "--tier",
        "sram:32",
        "--tier",
        "dram:32",
    ]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(err.contains("fits in no tier"), "{err}");
}
