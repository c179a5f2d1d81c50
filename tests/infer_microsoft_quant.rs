//! Shape rules of onnxruntime's quantized and channels-last `com.microsoft` operators, with
//! expectations taken from the contrib operator schemas (docs/ContribOperators.md in
//! microsoft/onnxruntime).

mod node_harness;

use node_harness::{
    BOOL, FLOAT, FLOAT16, INT8, INT16, INT32, In, UINT8, UINT16, int, ints, node, string,
};

const MS: &str = "com.microsoft";

#[test]
fn weight_only_matmuls_take_n_from_the_attribute() {
    // A (..., K) → Y (..., N) in A's type.
    node(MS, "MatMulNBits")
        .inputs(vec![
            In::T("a", FLOAT16, &["batch", "16", "64"]),
            In::T("b", UINT8, &["48", "2", "16"]),
            In::T("s", FLOAT16, &["96"]),
        ])
        .attr(int("K", 64))
        .attr(int("N", 48))
        .attr(int("bits", 4))
        .attr(int("block_size", 32))
        .expect(&["float16 batch×16×48"]);
    node(MS, "MatMulNBits")
        .inputs(vec![
            In::T("a", FLOAT, &["5", "64"]),
            In::T("b", UINT8, &["48", "2", "16"]),
            In::T("s", FLOAT, &["96"]),
        ])
        .attr(int("K", 64))
        .rejects("'N'");
}

#[test]
fn integer_matmuls() {
    node(MS, "MatMulInteger16")
        .inputs(vec![
            In::T("a", INT16, &["3", "4"]),
            In::T("b", INT16, &["4", "5"]),
        ])
        .expect(&["int32 3×5"]);
    node(MS, "MatMulInteger16")
        .inputs(vec![
            In::T("a", UINT16, &["3", "4"]),
            In::T("b", UINT16, &["4", "5"]),
        ])
        .expect(&["uint32 3×5"]);
    // Y has the scales' type T3.
    node(MS, "MatMulIntegerToFloat")
        .inputs(vec![
            In::T("a", UINT8, &["2", "3", "4"]),
            In::T("b", INT8, &["4", "5"]),
            In::T("as", FLOAT16, &[]),
            In::T("bs", FLOAT16, &[]),
        ])
        .expect(&["float16 2×3×5"]);
    node(MS, "DynamicQuantizeMatMul")
        .inputs(vec![
            In::T("a", FLOAT, &["2", "3", "4"]),
            In::T("b", INT8, &["4", "5"]),
            In::T("bs", FLOAT, &[]),
        ])
        .expect(&["float32 2×3×5"]);
    node(MS, "DynamicQuantizeMatMul")
        .inputs(vec![
            In::T("a", FLOAT, &["2", "3", "4"]),
            In::T("b", INT8, &["6", "5"]),
            In::T("bs", FLOAT, &[]),
        ])
        .rejects("inner dimensions");
}

#[test]
fn qgemm_output_is_float_unless_requantized() {
    let inputs = |y: bool| {
        let mut v = vec![
            In::T("a", UINT8, &["3", "4"]),
            In::T("as", FLOAT, &[]),
            In::T("az", UINT8, &[]),
            In::T("b", INT8, &["5", "4"]),
            In::T("bs", FLOAT, &[]),
            In::T("bz", INT8, &[]),
        ];
        if y {
            v.extend([In::Skip, In::T("ys", FLOAT, &[]), In::T("yz", INT8, &[])]);
        }
        v
    };
    node(MS, "QGemm")
        .inputs(inputs(false))
        .attr(int("transB", 1))
        .expect(&["float32 3×5"]);
    node(MS, "QGemm")
        .inputs(inputs(true))
        .attr(int("transB", 1))
        .expect(&["int8 3×5"]);
}

#[test]
fn qlinear_elementwise_and_concat() {
    let scalar = |n: &'static str, t: i32| In::T(n, t, &[]);
    node(MS, "QLinearAdd")
        .inputs(vec![
            In::T("a", UINT8, &["2", "1", "3"]),
            scalar("as", FLOAT),
            scalar("az", UINT8),
            In::T("b", UINT8, &["4", "1"]),
            scalar("bs", FLOAT),
            scalar("bz", UINT8),
            scalar("cs", FLOAT),
            scalar("cz", UINT8),
        ])
        .expect(&["uint8 2×4×3"]);
    node(MS, "QLinearSigmoid")
        .inputs(vec![
            In::T("x", INT8, &["2", "3"]),
            scalar("xs", FLOAT),
            scalar("xz", INT8),
            scalar("ys", FLOAT),
            scalar("yz", INT8),
        ])
        .expect(&["int8 2×3"]);
    node(MS, "QLinearWhere")
        .inputs(vec![
            In::T("c", BOOL, &["2", "1"]),
            In::T("x", UINT8, &["3"]),
            scalar("xs", FLOAT),
            scalar("xz", UINT8),
            In::T("y", UINT8, &["2", "3"]),
            scalar("ys", FLOAT),
            scalar("yz", UINT8),
            scalar("zs", FLOAT),
            scalar("zz", UINT8),
        ])
        .expect(&["uint8 2×3"]);
    node(MS, "QLinearConcat")
        .inputs(vec![
            scalar("ys", FLOAT),
            scalar("yz", UINT8),
            In::T("a", UINT8, &["1", "2", "3"]),
            scalar("as", FLOAT),
            scalar("az", UINT8),
            In::T("b", UINT8, &["1", "4", "3"]),
            scalar("bs", FLOAT),
            scalar("bz", UINT8),
        ])
        .attr(int("axis", 1))
        .expect(&["uint8 1×6×3"]);
    node(MS, "QLinearConcat")
        .inputs(vec![
            scalar("ys", FLOAT),
            scalar("yz", UINT8),
            In::T("a", UINT8, &["1", "2", "3"]),
            scalar("as", FLOAT),
        ])
        .rejects("triples");
}

#[test]
fn integer_reductions() {
    node(MS, "ReduceSumInteger")
        .inputs(vec![In::T("x", INT8, &["2", "3", "4"])])
        .attr(ints("axes", &[1]))
        .attr(int("keepdims", 0))
        .expect(&["int32 2×4"]);
    node(MS, "QLinearReduceMean")
        .inputs(vec![
            In::T("x", UINT8, &["2", "3", "4"]),
            In::T("s", FLOAT, &[]),
            In::T("z", UINT8, &[]),
            In::T("rs", FLOAT, &[]),
            In::T("rz", UINT8, &[]),
        ])
        .attr(ints("axes", &[-1]))
        .expect(&["uint8 2×3×1"]);
}

#[test]
fn quantize_dequantize_and_block_quantized_gather() {
    node(MS, "QuantizeLinear")
        .inputs(vec![
            In::T("x", FLOAT16, &["2", "3"]),
            In::T("s", FLOAT16, &[]),
            In::T("z", INT8, &[]),
        ])
        .expect(&["int8 2×3"]);
    node(MS, "DequantizeLinear")
        .inputs(vec![
            In::T("x", INT8, &["2", "3"]),
            In::T("s", FLOAT16, &[]),
        ])
        .expect(&["float16 2×3"]);
    // uint8 data with 4 bits holds two values per byte along the last axis.
    node(MS, "GatherBlockQuantized")
        .inputs(vec![
            In::T("data", UINT8, &["100", "16"]),
            In::T("ids", INT32, &["batch", "seq"]),
            In::T("scales", FLOAT16, &["100", "1"]),
        ])
        .attr(int("bits", 4))
        .attr(int("block_size", 32))
        .expect(&["float16 batch×seq×32"]);
}

#[test]
fn dynamic_quantize_lstm_outputs_like_lstm() {
    node(MS, "DynamicQuantizeLSTM")
        .inputs(vec![
            In::T("x", FLOAT, &["seq", "2", "4"]),
            In::T("w", INT8, &["2", "4", "32"]),
            In::T("r", INT8, &["2", "8", "32"]),
        ])
        .attr(int("hidden_size", 8))
        .attr(string("direction", "bidirectional"))
        .outputs(3)
        .expect(&["float32 seq×2×2×8", "float32 2×2×8", "float32 2×2×8"]);
}

#[test]
fn channels_last_windows() {
    // NhwcConv: X (N, H, W, C), W (M, C, kH, kW) → (N, oH, oW, M).
    node(MS, "NhwcConv")
        .inputs(vec![
            In::T("x", FLOAT16, &["1", "9", "9", "3"]),
            In::T("w", FLOAT16, &["8", "3", "3", "3"]),
        ])
        .attr(ints("strides", &[2, 2]))
        .attr(ints("pads", &[1, 1, 1, 1]))
        .expect(&["float16 1×5×5×8"]);
    let q = |x: &'static [&'static str]| {
        vec![
            In::T("x", UINT8, x),
            In::T("xs", FLOAT, &[]),
            In::T("xz", UINT8, &[]),
            In::T("w", INT8, &["4", "3", "3", "3"]),
            In::T("ws", FLOAT, &[]),
            In::T("wz", INT8, &[]),
            In::T("ys", FLOAT, &[]),
            In::T("yz", INT8, &[]),
        ]
    };
    node(MS, "QLinearConv")
        .inputs(q(&["1", "7", "7", "3"]))
        .attr(int("channels_last", 1))
        .expect(&["int8 1×5×5×4"]);
    node(MS, "QLinearConv")
        .inputs(q(&["1", "3", "7", "7"]))
        .expect(&["int8 1×4×5×5"]);
    node(MS, "NhwcMaxPool")
        .inputs(vec![In::T("x", UINT8, &["1", "7", "7", "3"])])
        .attr(ints("kernel_shape", &[3, 3]))
        .attr(ints("strides", &[2, 2]))
        .expect(&["uint8 1×3×3×3"]);
    node(MS, "NhwcMaxPool")
        .inputs(vec![In::T("x", UINT8, &["1", "7", "7", "3"])])
        .rejects("kernel_shape");
    let pool = |x: &'static [&'static str]| {
        vec![
            In::T("x", UINT8, x),
            In::T("xs", FLOAT, &[]),
            In::T("xz", UINT8, &[]),
            In::T("ys", FLOAT, &[]),
            In::T("yz", UINT8, &[]),
        ]
    };
    node(MS, "QLinearGlobalAveragePool")
        .inputs(pool(&["1", "5", "6", "4"]))
        .attr(int("channels_last", 1))
        .expect(&["uint8 1×1×1×4"]);
    node(MS, "QLinearGlobalAveragePool")
        .inputs(pool(&["1", "4", "5", "6"]))
        .expect(&["uint8 1×4×1×1"]);
    node(MS, "QLinearAveragePool")
        .inputs(pool(&["1", "7", "7", "4"]))
        .attr(int("channels_last", 1))
        .attr(ints("kernel_shape", &[3, 3]))
        .attr(ints("strides", &[2, 2]))
        .expect(&["uint8 1×3×3×4"]);
}
