//! Multiply-accumulate counts: the cost the split's halo recompute is measured against.

use super::rules::shape_of;
use crate::ir::{Graph, Node};

/// Multiply-accumulates of one node: Conv, FusedConv, QLinearConv and ConvInteger (output
/// elements × input channels per group × kernel), ConvTranspose (input elements × output
/// channels per group × kernel), MatMul, MatMulInteger, QLinearMatMul, Gemm and QGemm (output
/// elements × the reduced dimension); 0 for other operators.
pub fn node_macs(graph: &Graph, node: &Node) -> u64 {
    let shape = |i: usize, output: bool| {
        let list = if output { &node.outputs } else { &node.inputs };
        list.get(i)
            .copied()
            .flatten()
            .and_then(|v| shape_of(graph, v))
    };
    let elements = |s: &[i64]| s.iter().product::<i64>().max(0) as u64;
    let result = match node.op_type.as_str() {
        "Conv" | "FusedConv" | "QLinearConv" | "ConvInteger" => shape(0, true)
            .zip(conv_weight_input(node).and_then(|i| shape(i, false)))
            .map(|(out, w)| elements(&out) * elements(w.get(1..).unwrap_or(&[]))),
        "ConvTranspose" => shape(0, false)
            .zip(shape(1, false))
            .map(|(x, w)| elements(&x) * elements(w.get(1..).unwrap_or(&[]))),
        "MatMul" | "MatMulInteger" | "QLinearMatMul" => shape(0, true)
            .zip(shape(0, false))
            .map(|(out, a)| elements(&out) * a.last().copied().unwrap_or(1).max(0) as u64),
        "Gemm" | "QGemm" => shape(0, true).zip(shape(0, false)).map(|(out, a)| {
            let k = if node.attr_int("transA").unwrap_or(0) != 0 {
                a.first()
            } else {
                a.get(1)
            };
            elements(&out) * k.copied().unwrap_or(1).max(0) as u64
        }),
        _ => None,
    };
    result.unwrap_or(0)
}

/// Multiply-accumulates of the whole top-level graph.
pub fn graph_macs(graph: &Graph) -> u64 {
    graph.nodes.iter().map(|n| node_macs(graph, n)).sum()
}

/// True for a Conv or onnxruntime's FusedConv (a Conv with its activation).
pub fn is_conv(node: &Node) -> bool {
    matches!(
        (node.domain.as_str(), node.op_type.as_str()),
        ("", "Conv") | ("com.microsoft", "FusedConv")
    )
}

/// The input holding a convolution's weights: 3 for QLinearConv (x, its scale and zero point
/// come first), 1 for Conv, FusedConv and ConvInteger; `None` for other operators.
pub fn conv_weight_input(node: &Node) -> Option<usize> {
    match (node.domain.as_str(), node.op_type.as_str()) {
        ("", "QLinearConv") => Some(3),
        ("", "Conv" | "ConvInteger") | ("com.microsoft", "FusedConv") => Some(1),
        _ => None,
    }
}

/// The concrete shape of a node's input 1 (a Conv's or ConvTranspose's weights).
fn weight_shape(graph: &Graph, node: &Node) -> Option<Vec<i64>> {
    node.inputs
        .get(1)
        .copied()
        .flatten()
        .and_then(|v| shape_of(graph, v))
}

/// Multiply-accumulates per output position (one of the output's H × W `grid`, every batch
/// and channel) of a node whose work follows its output positions: Conv and FusedConv, and
/// MatMul and Gemm over token-major rows ([`node_macs`] over the positions); 0 for other
/// operators (a ConvTranspose's work follows its input, see [`input_macs_per_position`]).
pub fn macs_per_position(graph: &Graph, node: &Node, [h, w]: [i64; 2]) -> u64 {
    if node.op_type == "ConvTranspose" {
        return 0;
    }
    node_macs(graph, node) / (h * w).max(1) as u64
}

/// Multiply-accumulates per input position (one row × column, all batches and channels) of a
/// ConvTranspose: the input's batch × input channels × output channels per group × kernel;
/// 0 for other operators.
pub fn input_macs_per_position(graph: &Graph, node: &Node) -> u64 {
    let input = node.inputs[0].and_then(|v| shape_of(graph, v));
    let weight = weight_shape(graph, node);
    match (input, weight) {
        (Some(x), Some(w)) if x.len() == 4 && w.len() == 4 && node.op_type == "ConvTranspose" => {
            (x[0] * w.iter().product::<i64>()).max(0) as u64
        }
        _ => 0,
    }
}
