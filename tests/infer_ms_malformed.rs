//! The com.microsoft and ai.onnx.ml rules reject malformed nodes with errors and never panic:
//! every operator is run on inputs of every rank from 0 to 5, unknown and symbolic dims,
//! several element types and input counts, with and without plausible attributes.

mod node_harness;

use node_harness::{FLOAT, INT64, In, STRING, UINT8, float, floats, int, ints, node, strings};

const OPS: &[(&str, &[&str])] = &[
    (
        "com.microsoft",
        &[
            "FusedConv",
            "FusedGemm",
            "FusedMatMul",
            "TransposeMatMul",
            "Gelu",
            "FastGelu",
            "BiasGelu",
            "QuickGelu",
            "BiasAdd",
            "BiasSoftmax",
            "BiasDropout",
            "FusedMatMulActivation",
            "GemmFastGelu",
            "BiasSplitGelu",
            "Inverse",
            "Trilu",
            "GridSample",
            "GatherND",
            "Range",
            "Attention",
            "DecoderMaskedSelfAttention",
            "QAttention",
            "MultiHeadAttention",
            "DecoderMaskedMultiHeadAttention",
            "GroupQueryAttention",
            "PackedAttention",
            "PackedMultiHeadAttention",
            "LongformerAttention",
            "RotaryEmbedding",
            "GemmaRotaryEmbedding",
            "RelativePositionBias",
            "GatedRelativePositionBias",
            "NhwcConv",
            "NhwcFusedConv",
            "QLinearConv",
            "NhwcMaxPool",
            "QLinearAveragePool",
            "QLinearGlobalAveragePool",
            "MaxpoolWithMask",
            "SkipLayerNormalization",
            "SkipSimplifiedLayerNormalization",
            "EmbedLayerNormalization",
            "GroupNorm",
            "SkipGroupNorm",
            "MatMulNBits",
            "MatMulBnb4",
            "MatMulInteger16",
            "MatMulIntegerToFloat",
            "DynamicQuantizeMatMul",
            "QGemm",
            "QLinearAdd",
            "QLinearMul",
            "QLinearSigmoid",
            "QLinearLeakyRelu",
            "QLinearSoftmax",
            "QLinearWhere",
            "QLinearConcat",
            "QLinearReduceMean",
            "ReduceSumInteger",
            "MulInteger",
            "QuantizeLinear",
            "DequantizeLinear",
            "GatherBlockQuantized",
            "DynamicQuantizeLSTM",
        ],
    ),
    ("", &["SimplifiedLayerNormalization"]),
    (
        "ai.onnx.ml",
        &[
            "LinearClassifier",
            "LinearRegressor",
            "SVMClassifier",
            "SVMRegressor",
            "TreeEnsembleClassifier",
            "TreeEnsembleRegressor",
            "OneHotEncoder",
            "Imputer",
            "CategoryMapper",
            "FeatureVectorizer",
            "DictVectorizer",
            "CastMap",
            "ZipMap",
        ],
    ),
];

const SHAPES: &[&[&str]] = &[
    &[],
    &["2"],
    &["2", "3"],
    &["2", "3", "4"],
    &["2", "3", "4", "5"],
    &["2", "3", "4", "5", "6"],
    &["?", "?", "?"],
    &["n", "m", "k", "j"],
    &["0", "7", "1"],
];

const NAMES: &[&str] = &["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];

#[test]
fn no_rule_panics_on_malformed_nodes() {
    let mut runs = 0;
    for &(domain, ops) in OPS {
        for &op in ops {
            for &shape in SHAPES {
                for elem in [FLOAT, INT64, UINT8, STRING] {
                    for count in [1, 3, 9] {
                        for plausible in [false, true] {
                            let inputs = NAMES[..count]
                                .iter()
                                .map(|&n| In::T(n, elem, shape))
                                .collect();
                            let mut case = node(domain, op).inputs(inputs).outputs(4);
                            if plausible {
                                case = case
                                    .attr(int("num_heads", 2))
                                    .attr(int("kv_num_heads", 1))
                                    .attr(int("N", 4))
                                    .attr(int("axis", 1))
                                    .attr(int("channels_last", 1))
                                    .attr(int("transBatchA", 1))
                                    .attr(ints("kernel_shape", &[2, 2]))
                                    .attr(ints("classlabels_ints", &[0, 1]))
                                    .attr(ints("qkv_hidden_sizes", &[2, 2, 2]))
                                    .attr(ints("inputdimensions", &[1, 2, 3]))
                                    .attr(ints("cats_int64s", &[1, 2]))
                                    .attr(floats("intercepts", &[0.5]))
                                    .attr(strings("string_vocabulary", &["x"]))
                                    .attr(float("alpha", 0.5));
                            }
                            // Errors are fine; a panic fails the test.
                            let _ = case.run();
                            runs += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(runs > 10_000);
}
