//! A chain reading the output an earlier split assembled reads that split's parts as bands
//! instead, and the Concat assembling them goes. Worked by hand on X[1,2,16,16] → Conv 3×3
//! pad 1 → Relu = Y1[1,4,16,16] → Conv 3×3 pad 1 → Relu → Add(·, Y1) = Y[1,4,16,16]:
//!
//! - split 1 cuts the first two nodes into 2×1 tiles: Y1 rows [0,8) and [8,16), assembled by
//!   a Concat along H;
//! - split 2 cuts the last three into 4×1 tiles of 4 rows. Tile b's Conv reads Y1 rows
//!   [4b−1, 4b+5), clipped: [0,5) (a Slice of band 0), [3,9) (band 0 rows [3,8) joined to
//!   band 1 row [0,1)), [7,13) (band 0 row [7,8) joined to band 1 rows [0,5)), [11,16) (a
//!   Slice of band 1, rows [3,8)); its Add reads Y1 rows [4b, 4b+4): band 0 rows [0,4) and
//!   [4,8), band 1 rows [0,4) and [4,8).
//!
//! Band 0 is last read by tile 2, so it is freed before tile 3 runs: Y1 is never whole.

mod common;

use common::{
    assert_verifies, compare_in_onnxruntime, float_info, model, node, read_table, wave_init,
    write_model,
};
use onnx_memplan::onnx::proto::{GraphProto, ModelProto, NodeProto};
use onnx_memplan::pipeline::load_typed;
use onnx_memplan::split::chain::chain_of;
use onnx_memplan::split::rewrite::{BandSources, rewrite};
use onnx_memplan::split::tiling::tile;

fn conv(input: &str, weight: &str, output: &str) -> NodeProto {
    let n = node("Conv", &[input, weight], &[output]);
    let n = common::with_ints(n, "kernel_shape", &[3, 3]);
    common::with_ints(n, "pads", &[1, 1, 1, 1])
}

/// The two blocks of the module comment.
fn two_blocks() -> ModelProto {
    model(GraphProto {
        name: Some("two_blocks".into()),
        node: vec![
            conv("x", "w1", "c1"),
            node("Relu", &["c1"], &["y1"]),
            conv("y1", "w2", "c2"),
            node("Relu", &["c2"], &["r2"]),
            node("Add", &["r2", "y1"], &["y"]),
        ],
        input: vec![float_info("x", &[1, 2, 16, 16])],
        output: vec![float_info("y", &[1, 4, 16, 16])],
        initializer: vec![
            wave_init("w1", &[4, 2, 3, 3], 1.0),
            wave_init("w2", &[4, 4, 3, 3], 2.0),
        ],
        ..Default::default()
    })
}

/// The node of `model` that writes `output`.
fn writer<'m>(model: &'m ModelProto, output: &str) -> &'m NodeProto {
    let g = model.graph.as_ref().unwrap();
    g.node
        .iter()
        .find(|n| n.output.iter().any(|o| o == output))
        .unwrap_or_else(|| panic!("no node writes '{output}'"))
}

/// The int64 values of initializer `name`.
fn int64s(model: &ModelProto, name: &str) -> Vec<i64> {
    let g = model.graph.as_ref().unwrap();
    let t = g.initializer.iter().find(|t| t.name() == name).unwrap();
    t.raw_data()
        .chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The rows (along H) a Slice node takes of its input: its starts and ends on H.
fn rows_of(model: &ModelProto, slice: &NodeProto) -> (String, [i64; 2]) {
    assert_eq!(slice.op_type(), "Slice", "{}", slice.name());
    let (starts, ends) = (
        int64s(model, &slice.input[1]),
        int64s(model, &slice.input[2]),
    );
    assert_eq!(int64s(model, &slice.input[3]), [2, 3], "axes H and W");
    assert_eq!([starts[1], ends[1]], [0, 16], "every column");
    (slice.input[0].clone(), [starts[0], ends[0]])
}

#[test]
fn a_chain_reads_an_earlier_splits_parts_as_bands() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("two_blocks.onnx");
    write_model(&two_blocks(), &original);

    // Split 1: the first block in two rows of tiles.
    let (proto, typed, _) = load_typed(&original, &Default::default()).unwrap();
    let graph = &typed.graph;
    let order: Vec<usize> = (0..graph.nodes.len()).collect();
    let first = chain_of(graph, &order[..2], 17).expect("Conv and Relu form a chain");
    let tiling = tile(graph, &first, [2, 1]).unwrap();
    let once = rewrite(
        &proto,
        graph,
        &order,
        (&first, &tiling),
        "split1",
        &BandSources::NONE,
    );
    assert!(once.dropped.is_empty());
    let assembled = writer(&once.model, "y1");
    assert_eq!(assembled.op_type(), "Concat");
    let bands = assembled.input.clone();
    assert_eq!(bands.len(), 2);
    let split1 = dir.path().join("two_blocks.split1.onnx");
    write_model(&once.model, &split1);

    // Split 2: the second block, on the rewritten model, in four rows of tiles.
    let (proto, typed, _) = load_typed(&split1, &Default::default()).unwrap();
    let graph = &typed.graph;
    let order: Vec<usize> = (0..graph.nodes.len()).collect();
    let makes = |name: &str| {
        order
            .iter()
            .copied()
            .find(|&n| graph.values[graph.nodes[n].outputs[0].unwrap()].name == name)
            .unwrap()
    };
    let nodes = [makes("c2"), makes("r2"), makes("y")];
    let second = chain_of(graph, &nodes, 17).expect("Conv, Relu and Add form a chain");
    let tiling = tile(graph, &second, [4, 1]).unwrap();
    let made_by_split = |n: usize| graph.nodes[n].name.contains("/split1/");
    let sources = BandSources {
        scatter_inputs: false,
        made_by_split: &made_by_split,
    };
    let twice = rewrite(
        &proto,
        graph,
        &order,
        (&second, &tiling),
        "split2",
        &sources,
    );
    assert_eq!(twice.dropped, [assembled.name().to_string()]);
    let m = &twice.model;
    let g = m.graph.as_ref().unwrap();
    assert!(
        g.node
            .iter()
            .all(|n| !n.output.contains(&"y1".into()) && !n.input.contains(&"y1".into())),
        "nothing makes or reads Y1 whole"
    );

    // Each tile's Conv: one Slice of a band, or the Concat along H of Slices of both.
    let conv_input = |b: usize| writer(m, &writer(m, &format!("c2/split2/t{b}_0")).input[0]);
    let single = |b: usize| rows_of(m, conv_input(b));
    let joined = |b: usize| {
        let concat = conv_input(b);
        assert_eq!(concat.op_type(), "Concat");
        let axis = concat
            .attribute
            .iter()
            .find(|a| a.name() == "axis")
            .unwrap();
        assert_eq!(axis.i, Some(2));
        let parts: Vec<_> = concat
            .input
            .iter()
            .map(|p| rows_of(m, writer(m, p)))
            .collect();
        parts
    };
    assert_eq!(single(0), (bands[0].clone(), [0, 5]));
    assert_eq!(
        joined(1),
        [(bands[0].clone(), [3, 8]), (bands[1].clone(), [0, 1])]
    );
    assert_eq!(
        joined(2),
        [(bands[0].clone(), [7, 8]), (bands[1].clone(), [0, 5])]
    );
    assert_eq!(single(3), (bands[1].clone(), [3, 8]));
    // Each tile's Add: the tile's own rows of one band.
    let residual = |b: usize| {
        rows_of(
            m,
            writer(m, &writer(m, &format!("y/split2/t{b}_0")).input[1]),
        )
    };
    assert_eq!(residual(0), (bands[0].clone(), [0, 4]));
    assert_eq!(residual(1), (bands[0].clone(), [4, 8]));
    assert_eq!(residual(2), (bands[1].clone(), [0, 4]));
    assert_eq!(residual(3), (bands[1].clone(), [4, 8]));

    // Planned: band 0 is freed before tile 3's Conv runs; the table verifies and the model
    // gives the original's outputs.
    let split2 = dir.path().join("two_blocks.split2.onnx");
    write_model(m, &split2);
    let annotated = dir.path().join("planned.onnx");
    let run = common::plan_to(&split2, &annotated, &[]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let table = dir.path().join("planned.memplan.json");
    let t = read_table(&table);
    let entry = |name: &str| t.tensors.iter().find(|e| e.name == name).unwrap();
    let planned = load_typed(&split2, &Default::default()).unwrap().1.graph;
    let step_of = |node: &str| {
        let id = planned.nodes.iter().position(|n| n.name == node).unwrap();
        t.schedule.iter().position(|&s| s == id).unwrap()
    };
    let tile3 = step_of(writer(m, "c2/split2/t3_0").name());
    assert!(
        entry(&bands[0]).last < tile3,
        "band 0 is freed before tile 3"
    );
    assert!(entry(&bands[1]).last >= tile3);
    assert_verifies(&split2, &table);
    compare_in_onnxruntime(&original, &annotated);
}
