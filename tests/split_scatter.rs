//! Scattered graph inputs: when a split chain's tiles read a graph input, the input is cut
//! into bands that the runtime writes directly, so the whole input is never held while the
//! tiles run. Worked by hand on X[1,2,16,16] → Conv 3×3 stride 2 pad 1 → Relu → Conv 3×3 pad 1
//! → Y[1,4,8,8], cut into 2×1 tiles of Y:
//!
//! - tile row 0 makes Y rows [0,4): the second Conv reads Relu rows [-1,5), so the first Conv
//!   computes [0,5) and reads X rows [0·2−1, 4·2−1+3) = [-1,10), clipped [0,10);
//! - tile row 1 makes Y rows [4,8): Relu rows [3,9) clipped to [3,8), so X rows
//!   [3·2−1, 7·2−1+3) = [5,16);
//! - the bands start where each row of tiles starts reading: X rows [0,5) and [5,16), a Split
//!   of sizes 5 and 11 along H. Tile row 0 reads band 0 and the first 5 rows of band 1 (a
//!   Slice, then a Concat along H); tile row 1 reads band 1 whole. Columns are never cut: the
//!   first Conv reads X columns [-1,16), clipped to all 16.
//!
//! Band 0 is read only by tile row 0, so it is freed before band 1.

mod common;

use common::{
    assert_verifies, assert_verify_refuses, compare_in_onnxruntime, float_info, int64s, model,
    node, read_table, run_cli, wave_init, write_model, writer,
};
use onnx_memplan::onnx::proto::{GraphProto, ModelProto, NodeProto, StringStringEntryProto};
use onnx_memplan::pipeline::load_typed;
use onnx_memplan::split::chain::chain_of;
use onnx_memplan::split::rewrite::{BandSources, Rewritten, rewrite};
use onnx_memplan::split::tiling::tile;

fn conv(input: &str, weight: &str, output: &str, stride: i64) -> NodeProto {
    let n = node("Conv", &[input, weight], &[output]);
    let n = common::with_ints(n, "kernel_shape", &[3, 3]);
    let n = common::with_ints(n, "pads", &[1, 1, 1, 1]);
    common::with_ints(n, "strides", &[stride, stride])
}

/// The chain of the module comment, `channels` wide after the first Conv, on an `h`×`h`
/// input.
fn strided_chain(h: i64, channels: i64) -> ModelProto {
    model(GraphProto {
        name: Some("strided_chain".into()),
        node: vec![
            conv("x", "w1", "c1", 2),
            node("Relu", &["c1"], &["r1"]),
            conv("r1", "w2", "y", 1),
        ],
        input: vec![float_info("x", &[1, 2, h, h])],
        output: vec![float_info("y", &[1, 4, h / 2, h / 2])],
        initializer: vec![
            wave_init("w1", &[channels, 2, 3, 3], 1.0),
            wave_init("w2", &[4, channels, 3, 3], 2.0),
        ],
        ..Default::default()
    })
}

/// The chain of the module comment written to `dir`, and its rewrite in 2×1 tiles with the
/// input scattered.
fn scattered_in_two_rows(dir: &std::path::Path) -> (std::path::PathBuf, Rewritten) {
    let original = dir.join("strided_chain.onnx");
    write_model(&strided_chain(16, 4), &original);
    let (proto, typed, _) = load_typed(&original, &Default::default()).unwrap();
    let graph = &typed.graph;
    let order: Vec<usize> = (0..graph.nodes.len()).collect();
    let chain = chain_of(graph, &order, 17).expect("the three nodes form a chain");
    let tiling = tile(graph, &chain, [2, 1]).unwrap();
    let sources = BandSources {
        scatter_inputs: true,
        made_by_split: &|_| false,
        run_early: false,
    };
    let rewritten = rewrite(&proto, graph, &order, (&chain, &tiling), "split1", &sources);
    (original, rewritten)
}

#[test]
fn graph_input_is_cut_into_bands_where_each_row_of_tiles_starts() {
    let dir = tempfile::tempdir().unwrap();
    let (original, rewritten) = scattered_in_two_rows(dir.path());
    let m = &rewritten.model;

    let scatter = writer(m, "x/split1/band0");
    assert_eq!(scatter.op_type(), "Split");
    assert_eq!(scatter.name(), "x/split1/Scatter");
    assert_eq!(scatter.input[0], "x");
    assert_eq!(scatter.output, ["x/split1/band0", "x/split1/band1"]);
    assert_eq!(int64s(m, &scatter.input[1]), [5, 11]);
    let axis = scatter
        .attribute
        .iter()
        .find(|a| a.name() == "axis")
        .unwrap();
    assert_eq!(axis.i, Some(2));
    let meta: Vec<_> = m
        .metadata_props
        .iter()
        .map(|p| (p.key(), p.value()))
        .collect();
    assert_eq!(meta, [("memplan.scatter", r#"["x/split1/Scatter"]"#)]);
    assert!(
        rewritten.parts[0]
            .glue
            .contains(&"x/split1/Scatter".to_string())
    );

    // Tile row 0's first Conv reads band 0 joined to a 5-row Slice of band 1; tile row 1's
    // reads band 1 itself. Nothing else reads x.
    let conv0 = writer(m, "c1/split1/t0_0");
    let joined = writer(m, &conv0.input[0]);
    assert_eq!(joined.op_type(), "Concat");
    assert_eq!(joined.input[0], "x/split1/band0");
    let head = writer(m, &joined.input[1]);
    assert_eq!(
        (head.op_type(), head.input[0].as_str()),
        ("Slice", "x/split1/band1")
    );
    assert_eq!(int64s(m, &head.input[1]), [0, 0]);
    assert_eq!(int64s(m, &head.input[2]), [5, 16]);
    assert_eq!(writer(m, "c1/split1/t1_0").input[0], "x/split1/band1");
    let readers_of_x = m.graph.as_ref().unwrap().node.iter();
    assert_eq!(
        readers_of_x
            .filter(|n| n.input.contains(&"x".into()))
            .count(),
        1
    );

    let split = dir.path().join("strided_chain.split.onnx");
    write_model(m, &split);
    let annotated = dir.path().join("planned.onnx");
    let run = common::plan_to(&split, &annotated, &[]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let table = dir.path().join("planned.memplan.json");
    let t = read_table(&table);
    let entry = |name: &str| t.tensors.iter().find(|e| e.name == name).unwrap();
    let x = entry("x");
    assert_eq!((x.arena, x.offset), (None, None), "x takes no arena bytes");
    assert_eq!(x.scattered_by.as_deref(), Some("x/split1/Scatter"));
    let (band0, band1) = (entry("x/split1/band0"), entry("x/split1/band1"));
    assert_eq!((band0.first, band1.first), (0, 0));
    assert_eq!(
        (band0.bytes, band1.bytes),
        (Some(2 * 5 * 16 * 4), Some(2 * 11 * 16 * 4))
    );
    assert!(band0.last < band1.last, "band 0 is freed first");
    assert!(band0.offset.is_some() && band1.offset.is_some());
    assert_eq!(t.schedule[0], 0, "the scatter runs first");
    // The table describes the model it was given (the rewrite), which `verify` checks it
    // against.
    assert_verifies(&split, &table);
    compare_in_onnxruntime(&original, &annotated);
}

/// The verifier checks each claim itself: an input may be scattered only by a Split that is
/// its one reader and runs before every other node, and an unclaimed input must be planned.
#[test]
fn verifier_refuses_scatter_claims_the_graph_does_not_bear() {
    let dir = tempfile::tempdir().unwrap();
    let (_, rewritten) = scattered_in_two_rows(dir.path());
    let split = dir.path().join("split.onnx");
    write_model(&rewritten.model, &split);
    let annotated = dir.path().join("planned.onnx");
    assert!(common::plan_to(&split, &annotated, &[]).status.success());
    let table_path = dir.path().join("planned.memplan.json");
    let table: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&table_path).unwrap()).unwrap();
    let tampered = |edit: &dyn Fn(&mut serde_json::Value), needle: &str| {
        let mut t = table.clone();
        edit(&mut t);
        let path = dir.path().join("tampered.json");
        std::fs::write(&path, serde_json::to_string(&t).unwrap()).unwrap();
        assert_verify_refuses(&split, &path, needle);
    };
    let x_entry = |t: &mut serde_json::Value| -> usize {
        let tensors = t["tensors"].as_array().unwrap();
        tensors.iter().position(|e| e["name"] == "x").unwrap()
    };
    // Claimed by a Conv.
    tampered(
        &|t| {
            let i = x_entry(t);
            t["tensors"][i]["scattered_by"] = "Conv_c1/split1/t0_0".into();
        },
        "only a graph input read by nothing but one Split can be",
    );
    // No claim: x must then be planned.
    tampered(
        &|t| {
            let i = x_entry(t);
            t["tensors"][i]
                .as_object_mut()
                .unwrap()
                .remove("scattered_by");
        },
        "'x'",
    );
}

/// A model whose `memplan.scatter` entry names a node that cannot scatter is refused with a
/// one-line error naming the entry, exit 2.
#[test]
fn scatter_metadata_naming_a_node_that_cannot_scatter_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad_scatter.onnx");
    let mut m = strided_chain(16, 4);
    m.metadata_props.push(StringStringEntryProto {
        key: Some("memplan.scatter".into()),
        value: Some(r#"["Relu_r1"]"#.into()),
    });
    write_model(&m, &path);
    let out = dir.path().join("out.onnx");
    let run = run_cli(&["plan", path.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(
        err.contains("memplan.scatter") && err.contains("Relu_r1"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!out.exists());
}

/// `--split auto` scatters the input its first chain reads when inputs are in the arena, and
/// not under `--exclude-io` (the input is then held outside the arena anyway).
#[test]
fn split_auto_scatters_inputs_only_when_they_are_in_the_arena() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("wide.onnx");
    write_model(&strided_chain(64, 32), &original);
    for (extra, scattered) in [(&[][..], true), (&["--exclude-io"][..], false)] {
        let annotated = dir.path().join("wide.memplan.onnx");
        let mut args = vec!["--split", "auto"];
        args.extend(extra);
        let run = common::plan_to(&original, &annotated, &args);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let table = dir.path().join("wide.memplan.json");
        let t = read_table(&table);
        let splits = t.splits.as_ref().unwrap();
        assert!(!splits.chains.is_empty(), "{extra:?}: the chain is split");
        let x = t.tensors.iter().find(|e| e.name == "x").unwrap();
        assert_eq!(x.scattered_by.is_some(), scattered, "{extra:?}");
        assert_eq!(x.arena, None, "{extra:?}");
        assert_verifies(&annotated, &table);
        if scattered {
            compare_in_onnxruntime(&original, &annotated);
        }
    }
}
