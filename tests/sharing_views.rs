//! Slice and Gather outputs that are one contiguous run of their input's bytes become slice
//! aliases (docs/format.md, "alias"), and the verifier checks the claimed byte offset.

mod common;

use common::{assert_verify_refuses, float_info, int_init, model, node, plan_written, read_table};
use onnx_memplan::emit::{OffloadInfo, Transfer};
use onnx_memplan::onnx::proto::{GraphProto, ValueInfoProto};

/// x [1,8,16] f32 → Relu a; a is read by
/// - Slice rows 2..6 of axis 1 → s [1,4,16]: contiguous, starts 2×16×4 = 128 bytes in;
/// - Gather index 5 of axis 1 → g [1,16]: contiguous, 5×16×4 = 320 bytes in;
/// - Gather index -3 of axis 1 → k [1,16]: index 5 again, 320 bytes in;
/// - Slice columns 0..8 of axis 2 → h [1,8,8]: eight separate runs, so no alias;
/// - Slice with step 2 of axis 1 → e [1,4,16]: every other row, so no alias.
///
/// Each result then feeds an Exp that is a graph output.
fn views_model() -> GraphProto {
    GraphProto {
        name: Some("views".into()),
        node: vec![
            node("Relu", &["x"], &["a"]),
            node("Slice", &["a", "s_starts", "s_ends", "s_axes"], &["s"]),
            node("Gather", &["a", "g_index"], &["g"]),
            node("Gather", &["a", "k_index"], &["k"]),
            node("Slice", &["a", "h_starts", "h_ends", "h_axes"], &["h"]),
            node(
                "Slice",
                &["a", "h_starts", "s_ends", "s_axes", "e_steps"],
                &["e"],
            ),
            node("Exp", &["s"], &["ys"]),
            node("Exp", &["g"], &["yg"]),
            node("Exp", &["k"], &["yk"]),
            node("Exp", &["h"], &["yh"]),
            node("Exp", &["e"], &["ye"]),
        ]
        .into_iter()
        .map(|mut n| {
            if n.op_type.as_deref() == Some("Gather") {
                n.attribute.push(onnx_memplan::onnx::proto::AttributeProto {
                    name: Some("axis".into()),
                    r#type: Some(2),
                    i: Some(1),
                    ..Default::default()
                });
            }
            n
        })
        .collect(),
        initializer: vec![
            int_init("s_starts", &[1], &[2]),
            int_init("s_ends", &[1], &[6]),
            int_init("s_axes", &[1], &[1]),
            int_init("g_index", &[], &[5]),
            int_init("k_index", &[], &[-3]),
            int_init("h_starts", &[1], &[0]),
            int_init("h_ends", &[1], &[8]),
            int_init("h_axes", &[1], &[2]),
            int_init("e_steps", &[1], &[2]),
        ],
        input: vec![float_info("x", &[1, 8, 16])],
        output: ["ys", "yg", "yk", "yh", "ye"]
            .iter()
            .map(|n| ValueInfoProto {
                name: Some(n.to_string()),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[test]
fn contiguous_slices_and_gathers_alias_their_input() {
    let dir = tempfile::tempdir().unwrap();
    let views = model(views_model());
    let (path, table_path) = plan_written(dir.path(), "views", &views, &["--alignment", "64"]);
    let table = read_table(&table_path);
    let entry = |name: &str| table.tensors.iter().find(|t| t.name == name).unwrap();
    let a = entry("a").offset.unwrap();
    for (name, at) in [("s", 128), ("g", 320), ("k", 320)] {
        let t = entry(name);
        assert_eq!(t.alias_of.as_deref(), Some("a"), "{name}");
        assert_eq!(t.alias_offset, Some(at), "{name}");
        assert_eq!(t.offset, Some(a + at), "{name}");
    }
    for name in ["h", "e"] {
        assert_eq!(entry(name).alias_of, None, "{name}");
    }

    // Claiming the Slice starts one alignment unit later is caught by the verifier.
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&table_path).unwrap()).unwrap();
    for t in json["tensors"].as_array_mut().unwrap() {
        if t["name"] == "s" {
            t["alias_offset"] = 192.into();
            t["offset"] = (a + 192).into();
        }
    }
    std::fs::write(&table_path, serde_json::to_string(&json).unwrap()).unwrap();
    assert_verify_refuses(&path, &table_path, "the slice starts at byte 128, not 192");

    // An alias_offset that no byte address can hold (the verify_table fuzz target's finding:
    // the sum overflowed) is refused as such.
    let huge = u64::MAX;
    assert!(a > 0, "x is placed below a");
    for t in json["tensors"].as_array_mut().unwrap() {
        if t["name"] == "s" {
            t["alias_offset"] = huge.into();
        }
    }
    std::fs::write(&table_path, serde_json::to_string(&json).unwrap()).unwrap();
    assert_verify_refuses(
        &path,
        &table_path,
        &format!("alias_offset {huge} from offset {a} lies past the largest byte address"),
    );
}

#[test]
fn a_transfer_must_move_the_views_with_their_input() {
    // The view `s` (made at step 1, read at step 6) is `a`'s bytes: sending `s` to host
    // memory between steps 1 and 6 while `a` (read at steps 2-5) stays would move bytes
    // that `a` still reads.
    let dir = tempfile::tempdir().unwrap();
    let views = model(views_model());
    let (path, table_path) = plan_written(dir.path(), "views", &views, &[]);
    let mut table = read_table(&table_path);
    let entry = |name: &str| {
        table
            .tensors
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .clone()
    };
    let (a, s) = (entry("a"), entry("s"));
    assert_eq!(s.alias_of.as_deref(), Some("a"));
    assert_eq!((s.first, s.last, a.first, a.last), (1, 6, 0, 5));
    table.offload = Some(OffloadInfo {
        budget: 1 << 20,
        method: "spill".into(),
        migrated_bytes: 0,
        segments_migrated_bytes: None,
        spill_migrated_bytes: None,
        baseline: "farthest next use".into(),
        baseline_migrated_bytes: None,
        transfers: vec![Transfer {
            tensor: "s".into(),
            aliases: Vec::new(),
            out_after: s.first,
            in_before: s.last,
            in_offset: None,
            bytes: s.bytes.unwrap(),
            copy_out: true,
        }],
    });
    std::fs::write(&table_path, serde_json::to_string(&table).unwrap()).unwrap();
    assert_verify_refuses(
        &path,
        &table_path,
        "tensor 'a' holds the bytes of 's' but is not moved with it",
    );
}
