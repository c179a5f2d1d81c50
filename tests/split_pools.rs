//! Global pools of a tensor a chain reads as bands reduce the bands instead, so a
//! squeeze-and-excitation block does not keep the tensor whole. Worked by hand on
//! X[1,2,16,16] → Conv 3×3 pad 1 → Relu = Y1[1,4,16,16]; S = Sigmoid(Conv 1×1
//! (GlobalAveragePool(Y1)) + ReduceMax(Y1, axes [2,3])); Y = Relu(Conv 3×3 pad 1 (Y1 · S)):
//!
//! - split 1 cuts Conv, Relu into 2×1 tiles: Y1 rows [0,8) and [8,16), assembled by a Concat;
//! - split 2 cuts Mul, Conv, Relu into 4×1 tiles. Y1 is read by those tiles and by the two
//!   pools, so the tiles read the bands, the Concat goes, and each pool becomes one reduction
//!   per band and their combination: the mean ReduceSum(band 0) + ReduceSum(band 1) (axes
//!   [2,3] as an input at opset 17, keepdims 1) divided by 16 · 16 = 256 (an int64 constant
//!   cast to float); the maximum Max(ReduceMax(band 0), ReduceMax(band 1)) (axes as an
//!   attribute: ReduceMax takes them as an input only from opset 18).
//!
//! Tile 3's Mul reads Y1 rows [11,16) (a Slice of band 1, its last read), and both pools run before the chain, so
//! band 0 is freed before tile 3 runs.

mod common;

use common::{
    assert_never_whole, assert_verifies, compare_in_onnxruntime, conv3x3, cut_reading_split1,
    float_info, int64s, model, node, plan_written, read_table, wave_init, write_model, writer,
};
use onnx_memplan::onnx::proto::{GraphProto, ModelProto};

/// The model of the module comment.
fn excited() -> ModelProto {
    let max = node("ReduceMax", &["y1"], &["mx"]);
    let max = common::with_ints(max, "axes", &[2, 3]);
    model(GraphProto {
        name: Some("excited".into()),
        node: vec![
            conv3x3("x", "w1", "c1"),
            node("Relu", &["c1"], &["y1"]),
            node("GlobalAveragePool", &["y1"], &["g"]),
            node("Conv", &["g", "ws"], &["f"]),
            max,
            node("Add", &["f", "mx"], &["e"]),
            node("Sigmoid", &["e"], &["s"]),
            node("Mul", &["y1", "s"], &["m"]),
            conv3x3("m", "w2", "c2"),
            node("Relu", &["c2"], &["y"]),
        ],
        input: vec![float_info("x", &[1, 2, 16, 16])],
        output: vec![float_info("y", &[1, 4, 16, 16])],
        initializer: vec![
            wave_init("w1", &[4, 2, 3, 3], 1.0),
            wave_init("ws", &[4, 4, 1, 1], 3.0),
            wave_init("w2", &[4, 4, 3, 3], 2.0),
        ],
        ..Default::default()
    })
}

/// The inputs of the node writing `output`, checking its operator.
fn inputs_of(m: &ModelProto, output: &str, op: &str) -> Vec<String> {
    let n = writer(m, output);
    assert_eq!(n.op_type(), op, "{output} is made by {}", n.name());
    n.input.clone()
}

#[test]
fn global_pools_of_a_banded_tensor_reduce_its_bands() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("excited.onnx");
    write_model(&excited(), &original);
    let once = cut_reading_split1(&original, (&["c1", "y1"], [2, 1]), "split1", false);
    assert!(once.parts[0].pools.is_empty(), "nothing read as bands yet");
    let split1 = dir.path().join("excited.split1.onnx");
    write_model(&once.model, &split1);
    let assembled = writer(&once.model, "y1");
    assert_eq!(assembled.op_type(), "Concat");
    let bands = assembled.input.clone();
    assert_eq!(bands.len(), 2);

    let twice = cut_reading_split1(&split1, (&["m", "c2", "y"], [4, 1]), "split2", false);
    assert_eq!(twice.dropped, [assembled.name().to_string()]);
    let m = &twice.model;
    let g = m.graph.as_ref().unwrap();
    assert_never_whole(m, "y1");
    // The mean: (ReduceSum(band 0) + ReduceSum(band 1)) / Cast(256).
    let [total, count] = <[String; 2]>::try_from(inputs_of(m, "g", "Div")).unwrap();
    let partials = inputs_of(m, &total, "Sum");
    assert_eq!(partials.len(), 2);
    for (partial, band) in partials.iter().zip(&bands) {
        let reduce = writer(m, partial);
        assert_eq!(reduce.op_type(), "ReduceSum");
        assert_eq!(reduce.input[0], *band);
        assert_eq!(int64s(m, &reduce.input[1]), [2, 3]);
        let keep = reduce.attribute.iter().find(|a| a.name() == "keepdims");
        assert_eq!(keep.and_then(|a| a.i), Some(1));
    }
    let cast = inputs_of(m, &count, "Cast");
    assert_eq!(int64s(m, &cast[0]), [256]);
    // The maximum: Max(ReduceMax(band 0), ReduceMax(band 1)), axes as an attribute.
    let partials = inputs_of(m, "mx", "Max");
    assert_eq!(partials.len(), 2);
    for (partial, band) in partials.iter().zip(&bands) {
        let reduce = writer(m, partial);
        assert_eq!(reduce.op_type(), "ReduceMax");
        assert_eq!(reduce.input.as_slice(), std::slice::from_ref(band));
        let axes = reduce
            .attribute
            .iter()
            .find(|a| a.name() == "axes")
            .unwrap();
        assert_eq!(axes.ints, [2, 3]);
    }
    // The rewrite reports both pools with the nodes replacing them.
    let pools = &twice.parts[0].pools;
    assert_eq!(pools.len(), 2);
    let replaced: usize = pools.iter().map(|p| p.1.len()).sum();
    assert_eq!(
        replaced,
        2 + 1 + 1 + 1 + 2 + 1,
        "two reductions and Sum, Cast, Div; two and Max"
    );
    for name in pools.iter().flat_map(|p| &p.1) {
        assert!(
            g.node.iter().any(|n| n.name() == name),
            "{name} is in the model"
        );
    }

    // Planned: band 0 is freed before tile 3 runs; the table verifies; onnxruntime agrees.
    let (split, table) = plan_written(dir.path(), "excited.split2", m, &[]);
    let annotated = dir.path().join("excited.split2.memplan.onnx");
    let t = read_table(&table);
    let entry = |name: &str| t.tensors.iter().find(|e| e.name == name).unwrap();
    let step_of = |node: &str| common::step_of(&split, &t, node);
    // Tile 3 starts with its Slice of band 1, the last read of that band.
    let read = &writer(m, "m/split2/t3_0").input[0];
    let tile3 = step_of(writer(m, read).name());
    assert_eq!(writer(m, read).input[0], bands[1]);
    assert!(
        entry(&bands[0]).last < tile3,
        "band 0 is freed before tile 3"
    );
    assert_eq!(entry(&bands[1]).last, tile3);
    assert_verifies(&split, &table);
    compare_in_onnxruntime(&original, &annotated);
}
