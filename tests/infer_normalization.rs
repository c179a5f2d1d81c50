//! Shape rules of the normalization operators (src/infer/ops/normalization.rs), with
//! expectations taken from the ONNX operator schemas, onnxruntime's contrib schemas and
//! onnxruntime itself.

mod node_harness;

use node_harness::{DOUBLE, FLOAT, FLOAT16, In, int, node};

#[test]
fn layer_norm_below_opset_17_takes_the_scale_type() {
    // onnxruntime's contrib LayerNormalization (default domain, since version 1): X: T,
    // Scale: V, B: V, Y: V, Mean/InvStdDev: U. onnxruntime 1.32 gives Y float16 for a float32 X
    // with a float16 scale (and float32 for the reverse), statistics float32 (2, 3, 1).
    node("", "LayerNormalization")
        .opset(16)
        .inputs(vec![
            In::T("x", FLOAT, &["2", "3", "4"]),
            In::T("scale", FLOAT16, &["4"]),
            In::T("b", FLOAT16, &["4"]),
        ])
        .outputs(3)
        .expect(&["float16 2×3×4", "float32 2×3×1", "float32 2×3×1"]);
    node("", "LayerNormalization")
        .opset(16)
        .inputs(vec![
            In::T("x", FLOAT16, &["batch", "seq", "4"]),
            In::T("scale", FLOAT, &["4"]),
        ])
        .expect(&["float32 batch×seq×4"]);
    // stash_type 11 (double) makes the statistics double in onnxruntime.
    node("", "LayerNormalization")
        .opset(16)
        .inputs(vec![
            In::T("x", DOUBLE, &["2", "3", "4"]),
            In::T("scale", DOUBLE, &["4"]),
        ])
        .attr(int("stash_type", 11))
        .outputs(3)
        .expect(&["float64 2×3×4", "float64 2×3×1", "float64 2×3×1"]);
}

#[test]
fn layer_norm_from_opset_17_keeps_the_input_type() {
    // LayerNormalization-17 binds X, Scale, B and Y to one T (onnxruntime rejects a float32 X
    // with a float16 scale); Mean/InvStdDev are U, float by stash_type's default.
    node("", "LayerNormalization")
        .opset(17)
        .inputs(vec![
            In::T("x", FLOAT16, &["2", "3", "4"]),
            In::T("scale", FLOAT16, &["4"]),
            In::T("b", FLOAT16, &["4"]),
        ])
        .attr(int("axis", 1))
        .outputs(3)
        .expect(&["float16 2×3×4", "float32 2×1×1", "float32 2×1×1"]);
}

#[test]
fn rms_norm_takes_the_scale_type() {
    // RMSNormalization-23: X: T, scale: V, Y: V.
    node("", "RMSNormalization")
        .opset(23)
        .inputs(vec![
            In::T("x", FLOAT, &["2", "3", "4"]),
            In::T("scale", FLOAT16, &["4"]),
        ])
        .expect(&["float16 2×3×4"]);
}
