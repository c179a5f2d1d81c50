//! Shape rules of onnxruntime's `com.microsoft` operators, with expectations taken from the
//! contrib operator schemas (docs/ContribOperators.md in microsoft/onnxruntime).

mod node_harness;

use node_harness::{FLOAT, FLOAT16, In, float, int, ints, node};

const MS: &str = "com.microsoft";

#[test]
fn fused_conv_and_gemm_follow_conv_and_gemm() {
    node(MS, "FusedConv")
        .inputs(vec![
            In::T("x", FLOAT, &["1", "3", "8", "8"]),
            In::T("w", FLOAT, &["4", "3", "3", "3"]),
        ])
        .attr(ints("pads", &[1, 1, 1, 1]))
        .attr(ints("strides", &[2, 2]))
        .expect(&["float32 1×4×4×4"]);
    node(MS, "FusedGemm")
        .inputs(vec![
            In::T("a", FLOAT, &["5", "3"]),
            In::T("b", FLOAT, &["7", "5"]),
        ])
        .attr(int("transA", 1))
        .attr(int("transB", 1))
        .expect(&["float32 3×7"]);
}

#[test]
fn fused_matmul_transposes_matrices_and_batches() {
    // transBatchA moves A's first axis behind its batch axes: [4,2,3,5] → [2,3,4,5];
    // transB swaps B's last two axes: [2,3,7,5] → [2,3,5,7].
    node(MS, "FusedMatMul")
        .inputs(vec![
            In::T("a", FLOAT, &["4", "2", "3", "5"]),
            In::T("b", FLOAT, &["2", "3", "7", "5"]),
        ])
        .attr(int("transBatchA", 1))
        .attr(int("transB", 1))
        .attr(float("alpha", 0.125))
        .expect(&["float32 2×3×4×7"]);
    node(MS, "FusedMatMul")
        .inputs(vec![
            In::T("a", FLOAT16, &["batch", "3", "5"]),
            In::T("b", FLOAT16, &["5"]),
        ])
        .attr(int("transB", 1))
        .expect(&["float16 batch×3"]);
    node(MS, "FusedMatMul")
        .inputs(vec![
            In::T("a", FLOAT, &["2", "3"]),
            In::T("b", FLOAT, &["4", "5"]),
        ])
        .rejects("inner dimensions");
    node(MS, "FusedMatMul")
        .inputs(vec![
            In::T("a", FLOAT, &["2", "3"]),
            In::T("b", FLOAT, &["3", "5"]),
        ])
        .attr(int("transBatchB", 1))
        .rejects("transBatch");
}

#[test]
fn activations_and_bias_fusions_keep_the_input_type() {
    for op in [
        "Gelu",
        "FastGelu",
        "BiasGelu",
        "QuickGelu",
        "BiasSoftmax",
        "BiasAdd",
    ] {
        node(MS, op)
            .inputs(vec![
                In::T("x", FLOAT16, &["batch", "16", "64"]),
                In::T("b", FLOAT16, &["64"]),
                In::T("s", FLOAT16, &["batch", "16", "64"]),
            ])
            .expect(&["float16 batch×16×64"]);
    }
    node(MS, "BiasDropout")
        .inputs(vec![
            In::T("x", FLOAT, &["2", "3", "4"]),
            In::T("b", FLOAT, &["4"]),
        ])
        .outputs(2)
        .expect(&["float32 2×3×4", "bool 2×3×4"]);
}

#[test]
fn inverse_and_trilu_need_matrices() {
    node(MS, "Inverse")
        .inputs(vec![In::T("x", FLOAT, &["2", "3", "3"])])
        .expect(&["float32 2×3×3"]);
    node(MS, "Inverse")
        .inputs(vec![In::T("x", FLOAT, &["2", "3", "4"])])
        .rejects("square");
    node(MS, "Trilu")
        .inputs(vec![
            In::T("x", FLOAT, &["5", "3", "4"]),
            In::I64("k", &[], &[1]),
        ])
        .expect(&["float32 5×3×4"]);
    node(MS, "Trilu")
        .inputs(vec![In::T("x", FLOAT, &["4"])])
        .rejects("rank 1");
}

#[test]
fn simplified_layer_norm_takes_the_scale_type_and_float_statistics() {
    node("", "SimplifiedLayerNormalization")
        .inputs(vec![
            In::T("x", FLOAT, &["2", "3", "8"]),
            In::T("scale", FLOAT16, &["8"]),
        ])
        .outputs(2)
        .expect(&["float16 2×3×8", "float32 2×3×1"]);
    node("", "SimplifiedLayerNormalization")
        .inputs(vec![
            In::T("x", FLOAT, &["2", "3", "8"]),
            In::T("scale", FLOAT, &["3", "8"]),
        ])
        .attr(int("axis", 1))
        .outputs(2)
        .expect(&["float32 2×3×8", "float32 2×1×1"]);
    node("", "SimplifiedLayerNormalization")
        .inputs(vec![
            In::T("x", FLOAT, &["2", "8"]),
            In::T("scale", FLOAT, &["8"]),
        ])
        .attr(int("axis", 2))
        .rejects("axis 2");
}
