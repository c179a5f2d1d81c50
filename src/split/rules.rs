//! The per-operator table of the split stage: how each operator maps a region of its output to
//! the regions of its inputs it reads. An operator without an entry ends a chain.

use super::macs::{conv_weight_input, is_conv};
use super::region::{Region, Span};
use super::rows::rules::REDUCTIONS;
use super::upsample::{self, Upsample};
use crate::ir::{Graph, Node};

/// How an operator reads its inputs, as far as the split axes are concerned.
#[derive(Clone, Debug, PartialEq)]
pub enum Rule {
    /// Output position (h, w) reads position (h, w) of its spatial inputs: elementwise
    /// operators (any input may instead broadcast along H and W and is then read whole),
    /// BatchNormalization (input 0 only), Concat along channels (every input), Slice along
    /// channels (input 0 only: a GhostNet or ShuffleNet channel split).
    Pointwise(Inputs),
    /// A sliding window over input 0 (Conv in every form, MaxPool, AveragePool; a constant
    /// `Pad` of H and W is a 1×1 window that computes nothing); weights, bias and the pad
    /// amounts are read whole.
    Window(Window),
    /// An upsampling of input 0 (Resize by whole factors, ConvTranspose): each tile runs it
    /// on the input its part needs and crops the part; the other inputs are read whole.
    Upsample(Upsample),
    /// A token-major operator of the row table (MatMul or Gemm over rows, a normalisation,
    /// Softmax or reduction over other axes, Transpose, Reshape...) or a Reshape between a
    /// token axis and H × W: output position (h, w) reads the same position of the inputs the
    /// row table reads by rows, the others whole. Which axis holds the positions the chain
    /// resolves ([`super::layout`]).
    Rows,
}

/// Which inputs of a pointwise operator carry the split axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inputs {
    /// Every input is spatial or broadcasts along H and W.
    All,
    /// Input 0 is spatial; the others are per-channel parameters read whole.
    First,
}

/// The geometry of a sliding window on the two split axes, padding resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Kernel extent (rows, columns).
    pub kernel: [i64; 2],
    /// Strides.
    pub strides: [i64; 2],
    /// Dilations.
    pub dilations: [i64; 2],
    /// Padding before row 0 / column 0.
    pub pads_begin: [i64; 2],
    /// Padding after the last row / column.
    pub pads_end: [i64; 2],
}

impl Window {
    /// The input rows and columns the output region reads, before clipping to the input
    /// (negative or past-the-end positions are padding).
    pub fn need(&self, out: Region) -> Region {
        let axis = |a: usize| {
            let span = out[a];
            let start = span.start * self.strides[a] - self.pads_begin[a];
            let end = (span.end - 1) * self.strides[a] - self.pads_begin[a]
                + (self.kernel[a] - 1) * self.dilations[a]
                + 1;
            Span::new(start, end)
        };
        [axis(0), axis(1)]
    }
}

/// Operators whose output element depends only on the same element of each input.
pub(super) const ELEMENTWISE: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Add",
    "And",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "BitShift",
    "BitwiseAnd",
    "BitwiseNot",
    "BitwiseOr",
    "BitwiseXor",
    "Cast",
    "Ceil",
    "Celu",
    "Clip",
    "Cos",
    "Cosh",
    "Div",
    "Dropout",
    "Elu",
    "Equal",
    "Erf",
    "Exp",
    "Floor",
    "Gelu",
    "Greater",
    "GreaterOrEqual",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "IsInf",
    "IsNaN",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "Max",
    "Mean",
    "Min",
    "Mish",
    "Mod",
    "Mul",
    "Neg",
    "Not",
    "Or",
    "PRelu",
    "Pow",
    "Reciprocal",
    "Relu",
    "Round",
    "Selu",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Sub",
    "Sum",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "Where",
    "Xor",
];

/// onnxruntime's fused activations: elementwise (a bias input, when present, broadcasts along
/// the last axis, so the spatial split takes them only without one).
pub(super) const MICROSOFT_ELEMENTWISE: &[&str] = &["Gelu", "FastGelu", "BiasGelu", "QuickGelu"];

/// Token-major operators of the default domain that may join a chain (see [`Rule::Rows`]),
/// besides the reductions.
const ROWS: &[&str] = &[
    "MatMul",
    "Gemm",
    "LayerNormalization",
    "Softmax",
    "LogSoftmax",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Reshape",
    "Flatten",
];

/// Token-major operators of onnxruntime's domain that may join a chain.
const MICROSOFT_ROWS: &[&str] = &[
    "FusedMatMul",
    "SimplifiedLayerNormalization",
    "Gelu",
    "FastGelu",
    "BiasGelu",
    "QuickGelu",
];

/// How an integer operator (QOperator form, `ConvInteger`, a Q or DQ node) splits. Their
/// requantisation is per element (scales and zero points per tensor, or per channel along C),
/// so a tile computes exactly the integers of the original's positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Integer {
    /// A window over input 0, the rest (weights, bias, scales, zero points) read whole.
    /// QLinearConv pads with x's zero point: its copies keep border padding in their `pads`.
    Window,
    /// Pointwise on input 0, the scales and zero points read whole.
    First,
    /// A Q or DQ node: pointwise on input 0, its scale and zero point per tensor or per
    /// channel along C (read whole); block quantization or another axis ends the chain. Per
    /// tensor it is elementwise with scalar operands, so it takes the layout of its
    /// neighbours (a ShuffleNet's channel shuffle quantizes its rank-5 tensors); per channel
    /// along C its tensors are NCHW.
    QuantizeAxis,
    /// Pointwise on every input of the grid, the scalar scales and zero points broadcast
    /// (QLinearAdd and QLinearMul: A and B; QLinearConcat along channels: every X).
    All,
}

/// The integer operators of the split: (domain, operator, how it splits).
const INTEGER: &[(&str, &str, Integer)] = &[
    ("", "QLinearConv", Integer::Window),
    ("", "ConvInteger", Integer::Window),
    ("", "QuantizeLinear", Integer::QuantizeAxis),
    ("", "DequantizeLinear", Integer::QuantizeAxis),
    ("com.microsoft", "QuantizeLinear", Integer::QuantizeAxis),
    ("com.microsoft", "DequantizeLinear", Integer::QuantizeAxis),
    ("com.microsoft", "QLinearAveragePool", Integer::Window),
    ("com.microsoft", "QLinearSigmoid", Integer::First),
    ("com.microsoft", "QLinearLeakyRelu", Integer::First),
    ("com.microsoft", "QLinearAdd", Integer::All),
    ("com.microsoft", "QLinearMul", Integer::All),
    ("com.microsoft", "QLinearConcat", Integer::All),
];

/// The row of [`INTEGER`] of a node.
fn integer(node: &Node) -> Option<Integer> {
    INTEGER
        .iter()
        .find(|(d, op, _)| *d == node.domain && *op == node.op_type)
        .map(|r| r.2)
}

/// Whether a node is an integer operator of the QOperator form whose tensors are NCHW (it has
/// no row rule: its layout is fixed, not followed from its neighbours').
pub fn is_nchw_integer(node: &Node) -> bool {
    matches!(
        integer(node),
        Some(Integer::All | Integer::Window | Integer::First)
    )
}

/// The split rule of an integer operator (see [`Integer`]).
fn integer_rule(graph: &Graph, node: &Node, kind: Integer) -> Option<Rule> {
    match kind {
        Integer::Window => window(graph, node).map(Rule::Window),
        Integer::First => Some(Rule::Pointwise(Inputs::First)),
        Integer::QuantizeAxis => quantize_axis(graph, node),
        Integer::All if node.op_type == "QLinearConcat" => {
            matches!(node.attr_int("axis"), Some(1 | -3)).then_some(Rule::Pointwise(Inputs::All))
        }
        Integer::All => Some(Rule::Pointwise(Inputs::All)),
    }
}

/// The rule of a Q or DQ node: elementwise with scalar operands when its scale is one value
/// (its layout follows its neighbours'); pointwise on an NCHW input 0 when the scale is one
/// per channel along axis 1 (C: the split cuts H and W only); none for block quantization or
/// another axis.
fn quantize_axis(graph: &Graph, node: &Node) -> Option<Rule> {
    if node.attr_int("block_size").unwrap_or(0) != 0 {
        return None;
    }
    let scale = shape_of(graph, node.inputs.get(1).copied().flatten()?)?;
    match scale.as_slice() {
        [] | [1] => Some(Rule::Pointwise(Inputs::All)),
        [_] if matches!(node.attr_int("axis").unwrap_or(1), 1 | -3) => {
            Some(Rule::Pointwise(Inputs::First))
        }
        _ => None,
    }
}

/// The split rule of a node, or `None` when the node cannot be part of a chain. Every spatial
/// tensor involved must be rank 4 (NCHW) with a known shape, and the node must have one output.
pub fn rule_of(graph: &Graph, node: &Node) -> Option<Rule> {
    // onnxruntime's FusedConv (Conv then its activation, elementwise) tiles as a Conv; its
    // optional input Z (added before the activation) would need a tile of its own.
    let fused_conv = is_conv(node) && !node.domain.is_empty() && node.inputs.len() <= 3;
    let fused_activation = node.domain == "com.microsoft"
        && MICROSOFT_ELEMENTWISE.contains(&node.op_type.as_str())
        && node.inputs.iter().flatten().count() == 1;
    let microsoft_rows =
        node.domain == "com.microsoft" && MICROSOFT_ROWS.contains(&node.op_type.as_str());
    let integer = integer(node);
    if (!node.domain.is_empty()
        && !fused_conv
        && !fused_activation
        && !microsoft_rows
        && integer.is_none())
        || node.outputs.iter().flatten().count() != 1
    {
        return None;
    }
    if node.outputs.first().copied().flatten().is_none() || !node.subgraphs.is_empty() {
        return None;
    }
    if let Some(kind) = integer {
        return integer_rule(graph, node, kind);
    }
    let op = node.op_type.as_str();
    match op {
        _ if fused_conv => window(graph, node).map(Rule::Window),
        _ if fused_activation => Some(Rule::Pointwise(Inputs::All)),
        _ if microsoft_rows => Some(Rule::Rows),
        "Conv" | "MaxPool" | "AveragePool" => window(graph, node).map(Rule::Window),
        "Pad" => pad(graph, node).map(Rule::Window),
        "Resize" => upsample::resize(graph, node).map(Rule::Upsample),
        "ConvTranspose" => upsample::conv_transpose(graph, node).map(Rule::Upsample),
        "BatchNormalization" if node.attr_int("training_mode").unwrap_or(0) == 0 => {
            Some(Rule::Pointwise(Inputs::First))
        }
        "Concat" if matches!(node.attr_int("axis"), Some(1 | -3)) => {
            Some(Rule::Pointwise(Inputs::All))
        }
        "Slice" if slices_channels(graph, node) => Some(Rule::Pointwise(Inputs::First)),
        _ if ELEMENTWISE.contains(&op) => Some(Rule::Pointwise(Inputs::All)),
        _ if ROWS.contains(&op) || REDUCTIONS.contains(&op) => Some(Rule::Rows),
        _ => None,
    }
}

/// The concrete shape of a node's input or output value ([`crate::ir::Value::concrete_shape`]).
pub fn shape_of(graph: &Graph, value: usize) -> Option<Vec<i64>> {
    graph.values[value].concrete_shape()
}

/// The window of a 2-D Conv (FusedConv, QLinearConv, ConvInteger), MaxPool or AveragePool (or
/// QLinearAveragePool); `None` for forms the split cannot tile exactly (1-D/3-D windows,
/// MaxPool's Indices output, AveragePool's ceil-mode overhang counted as padding, a
/// channels-last QLinearAveragePool).
fn window(graph: &Graph, node: &Node) -> Option<Window> {
    let input = shape_of(graph, node.inputs.first().copied().flatten()?)?;
    if input.len() != 4 {
        return None;
    }
    let kernel: Vec<i64> = match node.attr_ints("kernel_shape") {
        Some(k) => k.to_vec(),
        None => {
            let weight = shape_of(graph, node.inputs.get(conv_weight_input(node)?).copied()??)?;
            weight.get(2..)?.to_vec()
        }
    };
    if kernel.len() != 2 || kernel.iter().any(|&k| k < 1) {
        return None;
    }
    let average = matches!(node.op_type.as_str(), "AveragePool" | "QLinearAveragePool");
    if node.attr_int("channels_last").unwrap_or(0) != 0 {
        return None;
    }
    if average
        && node.attr_int("ceil_mode").unwrap_or(0) != 0
        && node.attr_int("count_include_pad").unwrap_or(0) != 0
    {
        return None;
    }
    let pair = |name: &str| -> Option<[i64; 2]> {
        match node.attr_ints(name) {
            None => Some([1, 1]),
            Some(&[a, b]) if a >= 1 && b >= 1 => Some([a, b]),
            Some(_) => None,
        }
    };
    let strides = pair("strides")?;
    let dilations = pair("dilations")?;
    let auto_pad = node.attr_string("auto_pad").unwrap_or_default();
    let (pads_begin, pads_end) = match auto_pad.as_str() {
        "" | "NOTSET" => match node.attr_ints("pads") {
            None => ([0, 0], [0, 0]),
            Some(&[hb, wb, he, we]) if [hb, wb, he, we].iter().all(|&p| p >= 0) => {
                ([hb, wb], [he, we])
            }
            Some(_) => return None,
        },
        "VALID" => ([0, 0], [0, 0]),
        "SAME_UPPER" | "SAME_LOWER" => {
            let mut begin = [0; 2];
            let mut end = [0; 2];
            for a in 0..2 {
                let size = input[2 + a];
                let out = (size + strides[a] - 1) / strides[a];
                let total =
                    ((out - 1) * strides[a] + (kernel[a] - 1) * dilations[a] + 1 - size).max(0);
                let small = total / 2;
                (begin[a], end[a]) = if auto_pad == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
            }
            (begin, end)
        }
        _ => return None,
    };
    Some(Window {
        kernel: [kernel[0], kernel[1]],
        strides,
        dilations,
        pads_begin,
        pads_end,
    })
}

/// Whether a Slice of a rank-4 tensor cuts N or C only (its axes known, none of them H or
/// W): it keeps every H × W position, so position (h, w) of its output reads the same one.
fn slices_channels(graph: &Graph, node: &Node) -> bool {
    let rank = node
        .inputs
        .first()
        .copied()
        .flatten()
        .and_then(|v| shape_of(graph, v))
        .map(|s| s.len());
    if rank != Some(4) {
        return false;
    }
    let constant = |i: usize| -> Option<Vec<i64>> {
        let v = node.inputs.get(i).copied().flatten()?;
        graph.values[v].constant.as_ref()?.to_i64_vec()
    };
    // Slice takes its bounds as inputs from opset 10 on, as attributes before; absent axes
    // are the first ones, one per start.
    let attributes = node.inputs.len() == 1;
    let starts = match attributes {
        true => node.attr_ints("starts").map(<[i64]>::to_vec),
        false => constant(1),
    };
    let axes = match (attributes, node.inputs.get(3).copied().flatten()) {
        (true, _) => node.attr_ints("axes").map(<[i64]>::to_vec),
        (false, Some(_)) => match constant(3) {
            Some(axes) => Some(axes),
            None => return false,
        },
        (false, None) => None,
    };
    let Some(starts) = starts else {
        return false;
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    axes.iter().all(|&a| matches!(a, 0 | 1 | -4 | -3))
}

/// The pads of a `Pad` node as ONNX lists them (begin of every axis, then end of every axis):
/// the `pads` attribute before opset 11 (the form with one input), else the constant input 1.
fn pad_amounts(graph: &Graph, node: &Node) -> Option<Vec<i64>> {
    if node.inputs.len() == 1 {
        return node
            .attr_ints("pads")
            .or_else(|| node.attr_ints("paddings"))
            .map(<[i64]>::to_vec);
    }
    let v = node.inputs.get(1).copied().flatten()?;
    graph.values[v].constant.as_ref()?.to_i64_vec()
}

/// A constant-mode `Pad` of a rank-4 tensor on H and W only (no `axes` input, no negative pads)
/// as a window: output position p reads input position p − begin, the positions outside the
/// input being the padding. A tile copy pads only where it touches the border.
fn pad(graph: &Graph, node: &Node) -> Option<Window> {
    let mode = node.attr_string("mode").unwrap_or_default();
    if !(mode.is_empty() || mode == "constant") || node.inputs.get(3).copied().flatten().is_some() {
        return None;
    }
    let input = shape_of(graph, node.inputs.first().copied().flatten()?)?;
    let &[nb, cb, hb, wb, ne, ce, he, we] = pad_amounts(graph, node)?.as_slice() else {
        return None;
    };
    if input.len() != 4 || [nb, cb, ne, ce] != [0; 4] || [hb, wb, he, we].iter().any(|&p| p < 0) {
        return None;
    }
    Some(Window {
        kernel: [1, 1],
        strides: [1, 1],
        dilations: [1, 1],
        pads_begin: [hb, wb],
        pads_end: [he, we],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_need_worked_by_hand() {
        // 3×3, stride 2, pad 1: output rows [2, 4) read input rows 2·2−1 = 3 to 3·2−1+2 = 7.
        let w = Window {
            kernel: [3, 3],
            strides: [2, 2],
            dilations: [1, 1],
            pads_begin: [1, 1],
            pads_end: [1, 1],
        };
        let need = w.need([Span::new(2, 4), Span::new(0, 1)]);
        assert_eq!(need, [Span::new(3, 8), Span::new(-1, 2)]);
        // Dilation 2 widens the reach to (k−1)·d+1 = 5 input positions for one output.
        let dilated = Window {
            dilations: [2, 2],
            strides: [1, 1],
            pads_begin: [2, 2],
            ..w
        };
        assert_eq!(
            dilated.need([Span::new(0, 1), Span::new(5, 6)])[0],
            Span::new(-2, 3)
        );
    }
}
