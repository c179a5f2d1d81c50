//! Shape rules of onnxruntime's `com.microsoft` operators, with expectations taken from the
//! contrib operator schemas (docs/ContribOperators.md in microsoft/onnxruntime).

mod node_harness;

use node_harness::{FLOAT, FLOAT16, INT32, INT64, In, float, int, ints, node};

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
fn bias_split_gelu_halves_the_channels() {
    node(MS, "BiasSplitGelu")
        .inputs(vec![
            In::T("x", FLOAT16, &["2", "256", "1280"]),
            In::T("b", FLOAT16, &["1280"]),
        ])
        .expect(&["float16 2×256×640"]);
    node(MS, "BiasSplitGelu")
        .inputs(vec![
            In::T("x", FLOAT16, &["2", "256", "5"]),
            In::T("b", FLOAT16, &["5"]),
        ])
        .rejects("odd");
}

#[test]
fn range_defaults_delta_to_one() {
    node(MS, "Range")
        .inputs(vec![In::I64("s", &[], &[2]), In::I64("l", &[], &[7])])
        .expect(&["int64 5"]);
    node(MS, "Range")
        .inputs(vec![
            In::I64("s", &[], &[0]),
            In::I64("l", &[], &[7]),
            In::I64("d", &[], &[2]),
        ])
        .expect(&["int64 4"]);
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

#[test]
fn attention_merges_qkv_and_grows_the_past() {
    // input (B, S, D), weights (D, 3·hidden): output (B, S, v_hidden), present
    // (2, B, N, total, head_size).
    node(MS, "Attention")
        .inputs(vec![
            In::T("x", FLOAT, &["batch", "16", "64"]),
            In::T("w", FLOAT, &["64", "192"]),
            In::T("b", FLOAT, &["192"]),
        ])
        .attr(int("num_heads", 4))
        .outputs(2)
        .expect(&["float32 batch×16×64", "float32 2×batch×4×16×16"]);
    node(MS, "Attention")
        .inputs(vec![
            In::T("x", FLOAT, &["2", "5", "16"]),
            In::T("w", FLOAT, &["16", "48"]),
            In::T("b", FLOAT, &["48"]),
            In::Skip,
            In::T("past", FLOAT, &["2", "2", "4", "3", "4"]),
        ])
        .attr(int("num_heads", 4))
        .outputs(2)
        .expect(&["float32 2×5×16", "float32 2×2×4×8×4"]);
    node(MS, "Attention")
        .inputs(vec![
            In::T("x", FLOAT, &["2", "5", "16"]),
            In::T("w", FLOAT, &["16", "40"]),
        ])
        .attr(int("num_heads", 4))
        .attr(ints("qkv_hidden_sizes", &[16, 16, 8]))
        .expect(&["float32 2×5×8"]);
    node(MS, "Attention")
        .inputs(vec![
            In::T("x", FLOAT, &["2", "5", "16"]),
            In::T("w", FLOAT, &["16", "48"]),
        ])
        .attr(ints("qkv_hidden_sizes", &[16, 16]))
        .rejects("qkv_hidden_sizes");
}

#[test]
fn multi_head_attention_outputs_and_caches() {
    // query (B, S, D), key (B, L, D), value (B, L, Dv): output (B, S, Dv), present (B, N, L, H).
    node(MS, "MultiHeadAttention")
        .inputs(vec![
            In::T("q", FLOAT, &["2", "5", "16"]),
            In::T("k", FLOAT, &["2", "7", "16"]),
            In::T("v", FLOAT, &["2", "7", "24"]),
        ])
        .attr(int("num_heads", 4))
        .outputs(3)
        .expect(&["float32 2×5×24", "float32 2×4×7×4", "float32 2×4×7×6"]);
    // With past (B, N, P, H): present (B, N, P + L, H).
    let past = || In::T("pk", FLOAT, &["2", "4", "3", "4"]);
    node(MS, "MultiHeadAttention")
        .inputs(vec![
            In::T("q", FLOAT, &["2", "5", "16"]),
            In::T("k", FLOAT, &["2", "5", "16"]),
            In::T("v", FLOAT, &["2", "5", "16"]),
            In::Skip,
            In::Skip,
            In::Skip,
            past(),
            In::T("pv", FLOAT, &["2", "4", "3", "4"]),
        ])
        .attr(int("num_heads", 4))
        .outputs(4)
        .expect(&[
            "float32 2×5×16",
            "float32 2×4×8×4",
            "float32 2×4×8×4",
            "float32 2×4×5×8",
        ]);
    // Cross attention: key and value already (B, N, L, H).
    node(MS, "MultiHeadAttention")
        .inputs(vec![
            In::T("q", FLOAT, &["2", "5", "16"]),
            In::T("k", FLOAT, &["2", "4", "9", "4"]),
            In::T("v", FLOAT, &["2", "4", "9", "4"]),
        ])
        .attr(int("num_heads", 4))
        .expect(&["float32 2×5×16"]);
    node(MS, "MultiHeadAttention")
        .inputs(vec![In::T("q", FLOAT, &["2", "5", "16"])])
        .rejects("num_heads");
}

#[test]
fn decoder_masked_attention_shares_the_cache() {
    node(MS, "DecoderMaskedMultiHeadAttention")
        .inputs(vec![
            In::T("q", FLOAT16, &["2", "1", "16"]),
            In::T("k", FLOAT16, &["2", "1", "16"]),
            In::T("v", FLOAT16, &["2", "1", "16"]),
            In::Skip,
            In::Skip,
            In::T("pk", FLOAT16, &["2", "4", "64", "4"]),
            In::T("pv", FLOAT16, &["2", "4", "64", "4"]),
            In::I32("psl", &[], &[3]),
        ])
        .attr(int("num_heads", 4))
        .attr(int("past_present_share_buffer", 1))
        .outputs(3)
        .expect(&["float16 2×1×16", "float16 2×4×64×4", "float16 2×4×64×4"]);
}

#[test]
fn group_query_attention_cache_length_is_the_total_length() {
    // query (B, S, N·H), key/value (B, S, kvN·H); present (B, kvN, max(past, total), H).
    let gqa = |past: &'static [&'static str], total: i32| {
        node(MS, "GroupQueryAttention")
            .inputs(vec![
                In::T("q", FLOAT16, &["1", "1", "32"]),
                In::T("k", FLOAT16, &["1", "1", "16"]),
                In::T("v", FLOAT16, &["1", "1", "16"]),
                In::T("pk", FLOAT16, past),
                In::T("pv", FLOAT16, past),
                In::T("seqlens_k", INT32, &["1"]),
                In::I32("total", &[], if total == 8 { &[8] } else { &[5] }),
            ])
            .attr(int("num_heads", 4))
            .attr(int("kv_num_heads", 2))
            .outputs(3)
    };
    gqa(&["1", "2", "7", "8"], 8).expect(&["float16 1×1×32", "float16 1×2×8×8", "float16 1×2×8×8"]);
    gqa(&["1", "2", "16", "8"], 8).expect(&[
        "float16 1×1×32",
        "float16 1×2×16×8",
        "float16 1×2×16×8",
    ]);
    // Packed QKV (B, S, (N + 2·kvN)·H) without past.
    node(MS, "GroupQueryAttention")
        .inputs(vec![
            In::T("qkv", FLOAT, &["1", "5", "64"]),
            In::Skip,
            In::Skip,
            In::Skip,
            In::Skip,
            In::T("seqlens_k", INT32, &["1"]),
            In::I32("total", &[], &[5]),
        ])
        .attr(int("num_heads", 4))
        .attr(int("kv_num_heads", 2))
        .outputs(3)
        .expect(&["float32 1×5×32", "float32 1×2×5×8", "float32 1×2×5×8"]);
    node(MS, "GroupQueryAttention")
        .inputs(vec![
            In::T("qkv", FLOAT, &["1", "5", "60"]),
            In::Skip,
            In::Skip,
            In::Skip,
            In::Skip,
            In::T("s", INT32, &["1"]),
            In::I32("t", &[], &[5]),
        ])
        .attr(int("num_heads", 4))
        .attr(int("kv_num_heads", 2))
        .rejects("not a multiple");
    node(MS, "GroupQueryAttention")
        .inputs(vec![
            In::T("qkv", FLOAT, &["1", "5", "64"]),
            In::Skip,
            In::Skip,
            In::Skip,
            In::Skip,
            In::T("s", INT32, &["1"]),
            In::I32("t", &[], &[5]),
        ])
        .attr(int("num_heads", 0))
        .attr(int("kv_num_heads", 2))
        .rejects("positive");
    node(MS, "GroupQueryAttention")
        .inputs(vec![
            In::T("qkv", FLOAT, &["1", "5", "64"]),
            In::Skip,
            In::Skip,
            In::Skip,
            In::Skip,
            In::T("s", INT32, &["1"]),
            In::I32("t", &[], &[5]),
        ])
        .attr(int("num_heads", 4))
        .attr(int("kv_num_heads", i64::MAX))
        .rejects("overflow");
}

#[test]
fn rotary_and_position_bias() {
    node(MS, "RotaryEmbedding")
        .inputs(vec![
            In::T("x", FLOAT, &["2", "5", "16"]),
            In::T("pos", INT64, &["2", "5"]),
            In::T("cos", FLOAT, &["8", "2"]),
            In::T("sin", FLOAT, &["8", "2"]),
        ])
        .expect(&["float32 2×5×16"]);
    node(MS, "RelativePositionBias")
        .inputs(vec![
            In::T("table", FLOAT, &["32", "4"]),
            In::I64("q", &[], &[5]),
            In::I64("k", &[], &[7]),
        ])
        .expect(&["float32 1×4×5×7"]);
    node(MS, "GatedRelativePositionBias")
        .inputs(vec![
            In::T("q", FLOAT16, &["2", "5", "16"]),
            In::T("qb", FLOAT16, &["16"]),
            In::T("rel", FLOAT16, &["1", "4", "5", "5"]),
            In::T("w", FLOAT16, &["4", "8"]),
            In::T("b", FLOAT16, &["8"]),
            In::T("eco", FLOAT16, &["1", "4", "1", "1"]),
        ])
        .attr(int("num_heads", 4))
        .expect(&["float16 2×4×5×5"]);
}

#[test]
fn skip_and_embed_layer_norms() {
    // output and input_skip_bias_sum like the input; mean and inv_std_var float (B, S, 1).
    node(MS, "SkipLayerNormalization")
        .inputs(vec![
            In::T("x", FLOAT16, &["2", "3", "8"]),
            In::T("s", FLOAT16, &["2", "3", "8"]),
            In::T("g", FLOAT16, &["8"]),
        ])
        .outputs(4)
        .expect(&[
            "float16 2×3×8",
            "float32 2×3×1",
            "float32 2×3×1",
            "float16 2×3×8",
        ]);
    node(MS, "SkipSimplifiedLayerNormalization")
        .inputs(vec![
            In::T("x", FLOAT, &["6", "8"]),
            In::T("s", FLOAT, &["6", "8"]),
            In::T("g", FLOAT, &["8"]),
        ])
        .outputs(3)
        .expect(&["float32 6×8", "float32 6×1", "float32 6×1"]);
    node(MS, "SkipLayerNormalization")
        .inputs(vec![
            In::T("x", FLOAT, &["8"]),
            In::T("s", FLOAT, &["8"]),
            In::T("g", FLOAT, &["8"]),
        ])
        .rejects("rank 1");
    // output (B, S, hidden) in the embeddings' type, mask_index int32 (B).
    node(MS, "EmbedLayerNormalization")
        .inputs(vec![
            In::T("ids", INT32, &["batch", "seq"]),
            In::T("seg", INT32, &["batch", "seq"]),
            In::T("we", FLOAT16, &["100", "32"]),
            In::T("pe", FLOAT16, &["64", "32"]),
            In::T("se", FLOAT16, &["2", "32"]),
            In::T("g", FLOAT16, &["32"]),
            In::T("b", FLOAT16, &["32"]),
        ])
        .outputs(3)
        .expect(&[
            "float16 batch×seq×32",
            "int32 batch",
            "float16 batch×seq×32",
        ]);
}
