//! onnxruntime's NCHWc layout (`com.microsoft.nchwc`, written at `ORT_ENABLE_ALL`). Shapes are
//! worked by hand from the operators' definitions: blocked channels are padded to the block
//! (8 or 16, read from the model's weights, never from this machine); `scripts/ort_check.py`
//! compares the same rules with onnxruntime on models/ saved at ORT_ENABLE_ALL.

mod infer_support;

use infer_support::*;
use onnx_memplan::infer::InferOptions;
use onnx_memplan::onnx::proto::{ModelProto, OperatorSetIdProto};

const NCHWC: &str = "com.microsoft.nchwc";

/// Puts every node whose op is in `ops` into the nchwc domain and imports it.
fn nchwc(mut m: ModelProto, ops: &[&str]) -> ModelProto {
    for n in &mut m.graph.as_mut().unwrap().node {
        if ops.contains(&n.op_type()) {
            n.domain = Some(NCHWC.into());
        }
    }
    m.opset_import.push(OperatorSetIdProto {
        domain: Some(NCHWC.into()),
        version: Some(1),
    });
    m
}

const BLOCKED: &[&str] = &[
    "ReorderInput",
    "ReorderOutput",
    "Conv",
    "MaxPool",
    "GlobalAveragePool",
    "Upsample",
];

/// x: 1×24×10×10 → ReorderInput → Conv(w: 32×`cin`×3×3, pads 1) → MaxPool 2×2/2 → Upsample ×2
/// → GlobalAveragePool → ReorderOutput(channels 20).
fn chain(cin: &str) -> ModelProto {
    let mut g = G::default()
        .input("x", FLOAT, &["1", "24", "10", "10"])
        .floats("w", &[32, cin.parse().unwrap(), 3, 3])
        .node(
            "ReorderInput",
            &["x"],
            &["xb"],
            vec![a_int("channels_last", 0)],
        )
        .node(
            "Conv",
            &["xb", "w"],
            &["c"],
            vec![a_ints("pads", &[1, 1, 1, 1])],
        )
        .node(
            "MaxPool",
            &["c"],
            &["p"],
            vec![a_ints("kernel_shape", &[2, 2]), a_ints("strides", &[2, 2])],
        )
        .node(
            "Upsample",
            &["p"],
            &["u"],
            vec![a_ints("scales", &[1, 1, 2, 2])],
        )
        .node("GlobalAveragePool", &["u"], &["g"], vec![])
        .node("ReorderOutput", &["g"], &["y"], vec![a_int("channels", 20)])
        .output("y");
    g.graph.node[0].name = Some("reorder".into());
    nchwc(g.model(17), BLOCKED)
}

#[test]
fn blocked_chain_with_blocks_of_16() {
    // The Conv reads 32 input channels: 24 padded to blocks of 16.
    let m = infer(&chain("32"));
    assert_eq!(ty(&m, "xb"), "float32 1×32×10×10");
    assert_eq!(ty(&m, "c"), "float32 1×32×10×10");
    assert_eq!(ty(&m, "p"), "float32 1×32×5×5");
    assert_eq!(ty(&m, "u"), "float32 1×32×10×10");
    assert_eq!(ty(&m, "g"), "float32 1×32×1×1");
    assert_eq!(ty(&m, "y"), "float32 1×20×1×1");
}

#[test]
fn blocked_chain_with_blocks_of_8() {
    // The Conv reads 24 input channels: 24 is already a multiple of 8.
    let m = infer(&chain("24"));
    assert_eq!(ty(&m, "xb"), "float32 1×24×10×10");
    assert_eq!(ty(&m, "c"), "float32 1×32×10×10");
}

/// Without a Conv reading the reordered tensor, the block comes from the filter counts: 40
/// filters (an odd multiple of 8) only fit blocks of 8, so 20 channels pad to 24; with
/// filter counts that are all multiples of 16 the size is ambiguous: an input error.
#[test]
fn block_from_filter_counts() {
    let model = |filters: i64| {
        let mut g = G::default()
            .input("x", FLOAT, &["1", "20", "6", "6"])
            .input("z", FLOAT, &["1", "3", "6", "6"])
            .floats("w", &[filters, 3, 1, 1])
            .node("ReorderInput", &["x"], &["xb"], vec![])
            .node(
                "MaxPool",
                &["xb"],
                &["p"],
                vec![a_ints("kernel_shape", &[2, 2])],
            )
            .node("Conv", &["z", "w"], &["c"], vec![])
            .output("p")
            .output("c");
        g.graph.node[0].name = Some("reorder".into());
        nchwc(g.model(17), BLOCKED)
    };
    let m = infer(&model(40));
    assert_eq!(ty(&m, "xb"), "float32 1×24×6×6");
    assert_eq!(ty(&m, "p"), "float32 1×24×5×5");
    assert_eq!(ty(&m, "c"), "float32 1×40×6×6");
    let err = infer_with(&model(32), &InferOptions::default()).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("node 'reorder'") && msg.contains("block size"),
        "{msg}"
    );
}

/// channels_last: ReorderInput reads `[N, H, W, C]`, ReorderOutput writes it; a depthwise Conv
/// (group = filters, one input channel each) tells the padded count too.
#[test]
fn channels_last_and_depthwise() {
    let mut g = G::default()
        .input("x", FLOAT, &["2", "7", "9", "20"])
        .floats("w", &[24, 1, 3, 3])
        .node(
            "ReorderInput",
            &["x"],
            &["xb"],
            vec![a_int("channels_last", 1)],
        )
        .node(
            "Conv",
            &["xb", "w"],
            &["c"],
            vec![a_int("group", 24), a_ints("strides", &[2, 2])],
        )
        .node(
            "ReorderOutput",
            &["c"],
            &["y"],
            vec![a_int("channels", 20), a_int("channels_last", 1)],
        )
        .output("y");
    g.graph.node[0].name = Some("reorder".into());
    let m = infer(&nchwc(g.model(17), BLOCKED));
    // 20 channels: blocks of 8 give 24, of 16 give 32; the depthwise Conv has 24 filters.
    assert_eq!(ty(&m, "xb"), "float32 2×24×7×9");
    // (7 − 3)/2 + 1 = 3, (9 − 3)/2 + 1 = 4.
    assert_eq!(ty(&m, "c"), "float32 2×24×3×4");
    assert_eq!(ty(&m, "y"), "float32 2×3×4×20");
}
