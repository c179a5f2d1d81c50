//! Constants stay constants: a node whose inputs are all constants (weight-sharing Identity,
//! Reshape or Cast of an initializer) is a constant itself, outside the arena, as onnxruntime's
//! constant folding makes it; above inference's folding cap (65,536 elements) it stays a
//! run-time tensor, unless it is a view (Identity, Reshape, ...), which copies nothing.

mod common;

use common::*;
use onnx_memplan::onnx::proto::{AttributeProto, GraphProto};

fn cast_to_float() -> AttributeProto {
    AttributeProto {
        name: Some("to".into()),
        r#type: Some(2),
        i: Some(1),
        ..Default::default()
    }
}

/// `y = (x · Identity(W)) · Reshape(Identity(W), [16, 8]) + Cast(k)` over x: 1×8, with a
/// 128-element weight (too big for inference to decode, so only the structure says it is a
/// constant), `c = z · Neg(B)` over a 300×300 weight, above the cap, and `d = z · Identity(B)`,
/// a view of that weight.
fn shared_weights() -> onnx_memplan::onnx::proto::ModelProto {
    let w: Vec<f32> = (0..128).map(|i| i as f32 / 128.0).collect();
    let big = vec![0.001f32; 300 * 300];
    let mut cast = node("Cast", &["k"], &["kf"]);
    cast.attribute.push(cast_to_float());
    model(GraphProto {
        name: Some("shared".into()),
        node: vec![
            node("Identity", &["W"], &["Wt"]),
            node("Reshape", &["Wt", "shape"], &["Wr"]),
            cast,
            node("MatMul", &["x", "Wt"], &["a"]),
            node("MatMul", &["a", "Wr"], &["b"]),
            node("Add", &["b", "kf"], &["y"]),
            node("Neg", &["B"], &["Bt"]),
            node("MatMul", &["z", "Bt"], &["c"]),
            node("Identity", &["B"], &["Bv"]),
            node("MatMul", &["z", "Bv"], &["d"]),
        ],
        initializer: vec![
            float_init("W", &[8, 16], &w),
            int_init("shape", &[2], &[16, 8]),
            int_init("k", &[8], &[1, 2, 3, 4, 5, 6, 7, 8]),
            float_init("B", &[300, 300], &big),
        ],
        input: vec![float_info("x", &[1, 8]), float_info("z", &[1, 300])],
        output: vec![
            float_info("y", &[1, 8]),
            float_info("c", &[1, 300]),
            float_info("d", &[1, 300]),
        ],
        ..Default::default()
    })
}

#[test]
fn nodes_of_constants_are_constants() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table_path) =
        plan_written(dir.path(), "shared", &shared_weights(), &["--exclude-io"]);
    let table = read_table(&table_path);
    let entry = |name: &str| {
        table
            .tensors
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no entry {name}"))
    };
    for name in ["Wt", "Wr", "kf", "Bv"] {
        let e = entry(name);
        assert_eq!(e.kind, "constant", "{name}");
        assert_eq!((e.arena, e.offset), (None, None), "{name}");
    }
    // Neg of the 90,000-element weight is above the cap: a run-time tensor. Identity of the
    // same weight is a view: a constant at any size (checked above).
    assert_eq!(entry("Bt").kind, "intermediate");
    assert!(entry("Bt").offset.is_some());
    // Worked by hand (alignment 64, inputs and outputs excluded): the arena holds a (64 B,
    // steps 3–4), b (32 B → 64, steps 4–5) and Bt (360,000 B, steps 6–7): peak 360,000.
    // With Wt (512 B, live 0–4), Wr (512 B, 1–4) and kf (32 B, 2–5) in the arena it would be
    // the same peak, so check the early steps too: nothing is live at steps 0–2. Bv in the
    // arena would start at step 8.
    assert!(
        table
            .tensors
            .iter()
            .filter(|t| t.offset.is_some())
            .all(|t| (3..8).contains(&t.first)),
        "only a, b and Bt are in the arena"
    );
    assert_eq!(table.arenas[0].bytes, 360_000);
    // The independent verifier agrees (it would refuse a constant in the arena).
    assert_verifies(&path, &table_path);
}

/// Without the big weight, the arena is just a and b (worked by hand: 64 + 64 = 128 bytes at
/// step 4); with the constants in the arena it would be 64 + 64 + 512 + 64 = 704 bytes there.
#[test]
fn the_arena_leaves_folded_constants_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = shared_weights();
    let g = m.graph.as_mut().unwrap();
    g.node.truncate(6);
    g.initializer.truncate(3);
    g.input.truncate(1);
    g.output.truncate(1);
    let (_, table_path) = plan_written(dir.path(), "small", &m, &["--exclude-io"]);
    let table = read_table(&table_path);
    assert_eq!(table.arenas[0].bytes, 128);
    assert_eq!(table.stats.lower_bound_bytes, 128);
}

/// The models in models/ that share weights through Identity (BERT's tied embeddings and
/// its attention weights, ViT's position ids) plan with those tensors as constants, at any
/// size (an Identity is a view).
#[test]
fn model_weight_identities_are_constants() {
    let dir = tempfile::tempdir().unwrap();
    for (stem, extra) in [
        ("unet_small", vec![]),
        ("vit_tiny", vec!["--dim", "batch=1"]),
        (
            "bert_tiny",
            vec!["--dim", "batch=1", "--dim", "sequence=16"],
        ),
    ] {
        let path = root().join(format!("models/{stem}.onnx"));
        let out = dir.path().join(format!("{stem}.memplan.onnx"));
        let mut args = vec!["plan", path.to_str().unwrap(), "-o", out.to_str().unwrap()];
        args.extend(extra);
        let run = run_cli(&args);
        assert!(
            run.status.success(),
            "{stem}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let table = read_table(&dir.path().join(format!("{stem}.memplan.json")));
        let proto = onnx_memplan::onnx::load_model(&path).unwrap();
        let graph = proto.graph.unwrap();
        let identities: Vec<&str> = graph
            .node
            .iter()
            .filter(|n| {
                n.op_type() == "Identity"
                    && graph.initializer.iter().any(|i| i.name() == n.input[0])
            })
            .map(|n| n.output[0].as_str())
            .collect();
        assert!(!identities.is_empty(), "{stem} has Identity of a weight");
        for name in identities {
            let e = table.tensors.iter().find(|t| t.name == name).unwrap();
            assert_eq!(e.kind, "constant", "{stem}: {name}");
            assert_eq!(e.offset, None, "{stem}: {name}");
        }
    }
}
