//! The one table of buffer-sharing rules: which operators may write over an input (in-place),
//! which outputs are their input's bytes (alias), and which are slices of another tensor.

use crate::ir::{Graph, Node};

/// How an operator's outputs may share bytes with its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReuseRule {
    /// No sharing.
    None,
    /// Output 0 may take the bytes of one of the listed inputs that dies at this node, when
    /// it has the output's byte size (elementwise kernels read and write the same position).
    InPlace(&'static [usize]),
    /// Output 0 is input 0's bytes, reinterpreted (Reshape-like).
    Alias,
    /// Each input may live inside its slice of output 0 (Concat).
    ConcatSlices,
    /// Each output may be a slice of input 0 (Split).
    SplitSlices,
    /// Output 0 may be one contiguous run of input 0's bytes (Slice with unit steps, Gather
    /// of a single index), where [`view_offset`] finds one.
    SliceView,
}

const UNARY: &[usize] = &[0];
const BINARY: &[usize] = &[0, 1];
const WHERE: &[usize] = &[1, 2];
const FUSED_CONV_SUM: &[usize] = &[3];

/// Default-domain elementwise operators with one data input.
const UNARY_OPS: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "BatchNormalization",
    "BitwiseNot",
    "Cast",
    "CastLike",
    "Ceil",
    "Celu",
    "Clip",
    "Cos",
    "Cosh",
    "Elu",
    "Erf",
    "Exp",
    "Floor",
    "Gelu",
    "HardSigmoid",
    "HardSwish",
    "LeakyRelu",
    "Log",
    "Mish",
    "Neg",
    "Not",
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
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "Trilu",
];

/// Default-domain broadcasting elementwise operators with two data inputs.
const BINARY_OPS: &[&str] = &[
    "Add",
    "And",
    "BitShift",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "Div",
    "Max",
    "Mean",
    "Min",
    "Mod",
    "Mul",
    "Or",
    "Pow",
    "PRelu",
    "Sub",
    "Sum",
    "Xor",
];

/// Default-domain row-wise operators: output 0 has input 0's shape and each row of the output
/// depends only on the same row of the input. Their kernels finish reading a row (max, sum,
/// mean, variance) before writing it at the same positions, so they can run in place.
const ROWWISE_OPS: &[&str] = &[
    "Hardmax",
    "Softmax",
    "LogSoftmax",
    "LayerNormalization",
    "InstanceNormalization",
    "GroupNormalization",
    "LpNormalization",
    "MeanVarianceNormalization",
    "RMSNormalization",
    "SimplifiedLayerNormalization",
];

/// Default-domain operators whose output 0 is a reinterpretation of input 0.
const ALIAS_OPS: &[&str] = &[
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Identity",
    "Dropout",
];

/// `com.microsoft` elementwise and row-wise operators (onnxruntime's fusions) that may
/// overwrite input 0.
const MS_UNARY_OPS: &[&str] = &[
    "FastGelu",
    "Gelu",
    "QuickGelu",
    "BiasGelu",
    "BiasAdd",
    "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization",
    "SimplifiedLayerNormalization",
];

/// The sharing rule of a node: the operator's rule, except that Dropout is an alias only in
/// inference mode (no `training_mode` input, or a constant false one), and a Transpose that
/// only moves size-1 axes is an alias (its output has the input's bytes in the same order).
pub fn node_rule(graph: &Graph, node: &Node) -> ReuseRule {
    let rule = reuse_rule(&node.domain, &node.op_type);
    if node.op_type == "Transpose" && node.domain.is_empty() {
        return if transpose_keeps_layout(graph, node) {
            ReuseRule::Alias
        } else {
            ReuseRule::None
        };
    }
    if node.op_type == "Dropout" && node.domain.is_empty() {
        let training = node.inputs.get(2).copied().flatten().map(|v| {
            graph.values[v]
                .constant
                .as_ref()
                .and_then(|c| c.to_i64_vec())
                .map(|v| v.iter().any(|&x| x != 0))
        });
        if !matches!(training, None | Some(Some(false))) {
            return ReuseRule::None;
        }
    }
    rule
}

/// True when a Transpose leaves every axis longer than 1 in its relative order, so the
/// row-major bytes of input and output are identical.
fn transpose_keeps_layout(graph: &Graph, node: &Node) -> bool {
    let Some(shape) = node
        .inputs
        .first()
        .copied()
        .flatten()
        .and_then(|v| graph.values[v].concrete_shape())
    else {
        return false;
    };
    let perm: Vec<usize> = match node.attr_ints("perm") {
        Some(p) => p
            .iter()
            .map(|&a| usize::try_from(a).unwrap_or(usize::MAX))
            .collect(),
        None => (0..shape.len()).rev().collect(),
    };
    if perm.len() != shape.len() || perm.iter().any(|&a| a >= shape.len()) {
        return false;
    }
    let moved: Vec<usize> = perm.into_iter().filter(|&a| shape[a] != 1).collect();
    moved.is_sorted()
}

/// The sharing rule of an operator.
pub fn reuse_rule(domain: &str, op_type: &str) -> ReuseRule {
    match domain {
        "" => {
            if UNARY_OPS.contains(&op_type) || ROWWISE_OPS.contains(&op_type) {
                ReuseRule::InPlace(UNARY)
            } else if BINARY_OPS.contains(&op_type) {
                ReuseRule::InPlace(BINARY)
            } else if op_type == "Where" {
                ReuseRule::InPlace(WHERE)
            } else if ALIAS_OPS.contains(&op_type) {
                ReuseRule::Alias
            } else if op_type == "Concat" {
                ReuseRule::ConcatSlices
            } else if op_type == "Split" {
                ReuseRule::SplitSlices
            } else if op_type == "Slice" || op_type == "Gather" {
                ReuseRule::SliceView
            } else {
                ReuseRule::None
            }
        }
        "com.microsoft" if MS_UNARY_OPS.contains(&op_type) => ReuseRule::InPlace(UNARY),
        // onnxruntime's FusedConv accumulates the convolution onto its "sum" input Z
        // (input 3), so the output may take Z's bytes.
        "com.microsoft" if op_type == "FusedConv" => ReuseRule::InPlace(FUSED_CONV_SUM),
        _ => ReuseRule::None,
    }
}

/// Where a Slice or Gather output lies inside its data input: the byte offset when the
/// selected elements are one contiguous run of the input's row-major bytes, i.e. every axis
/// before the innermost cut axis selects a single index, every axis after it is whole, and
/// steps are 1. `None` when the layout is not contiguous or any shape or index is unknown.
pub fn view_offset(graph: &Graph, node: &Node) -> Option<u64> {
    let data = node.inputs.first().copied().flatten()?;
    let ty = graph.values[data].tensor_type()?;
    let shape = ty.concrete_shape()?;
    let out = node.outputs.first().copied().flatten()?;
    let out_ty = graph.values[out].tensor_type()?;
    if out_ty.dtype != ty.dtype {
        return None;
    }
    let out_shape = out_ty.concrete_shape()?;
    let (starts, extents) = match node.op_type.as_str() {
        "Slice" => slice_window(graph, node, &shape, &out_shape)?,
        "Gather" => gather_window(graph, node, &shape)?,
        _ => return None,
    };
    let cut = (0..shape.len()).rev().find(|&a| extents[a] != shape[a]);
    if let Some(cut) = cut
        && extents[..cut].iter().any(|&e| e != 1)
    {
        return None;
    }
    let mut stride = 1i64;
    let mut first = 0i64;
    for a in (0..shape.len()).rev() {
        first += starts[a] * stride;
        stride *= shape[a];
    }
    let bits = i64::from(ty.dtype.bits()?);
    let offset_bits = first.checked_mul(bits)?;
    (offset_bits % 8 == 0).then(|| u64::try_from(offset_bits / 8).ok())?
}

/// Per-axis start and extent of a Slice, from its attributes (before opset 10) or constant
/// inputs; only unit steps qualify.
pub fn slice_window(
    graph: &Graph,
    node: &Node,
    shape: &[i64],
    out_shape: &[i64],
) -> Option<(Vec<i64>, Vec<i64>)> {
    let constant = |slot: usize| -> Option<Option<Vec<i64>>> {
        match node.inputs.get(slot).copied().flatten() {
            None => Some(None),
            Some(v) => Some(Some(graph.values[v].constant.as_ref()?.to_i64_vec()?)),
        }
    };
    let (starts, axes, steps) = match node.attr_ints("starts") {
        Some(starts) => (
            starts.to_vec(),
            node.attr_ints("axes").map(<[i64]>::to_vec),
            None,
        ),
        None => (constant(1)??, constant(3)?, constant(4)?),
    };
    let rank = i64::try_from(shape.len()).ok()?;
    let axes = axes.unwrap_or_else(|| (0..rank).take(starts.len()).collect());
    if out_shape.len() != shape.len()
        || axes.len() != starts.len()
        || steps
            .as_ref()
            .is_some_and(|s| s.len() != starts.len() || s.iter().any(|&x| x != 1))
    {
        return None;
    }
    let mut begin = vec![0i64; shape.len()];
    for (&axis, &start) in axes.iter().zip(&starts) {
        let a = usize::try_from(if axis < 0 { axis + rank } else { axis }).ok()?;
        let dim = *shape.get(a)?;
        begin[a] = (if start < 0 { start + dim } else { start }).clamp(0, dim);
    }
    let fits = (0..shape.len()).all(|a| begin[a] + out_shape[a] <= shape[a]);
    fits.then(|| (begin, out_shape.to_vec()))
}

/// Start and extent per axis of a Gather of one constant index (scalar or one element).
fn gather_window(graph: &Graph, node: &Node, shape: &[i64]) -> Option<(Vec<i64>, Vec<i64>)> {
    let indices = node.inputs.get(1).copied().flatten()?;
    let index = match graph.values[indices].constant.as_ref()?.to_i64_vec()?[..] {
        [i] => i,
        _ => return None,
    };
    let rank = i64::try_from(shape.len()).ok()?;
    let axis = node.attr_int("axis").unwrap_or(0);
    let a = usize::try_from(if axis < 0 { axis + rank } else { axis }).ok()?;
    let dim = *shape.get(a)?;
    let index = if index < 0 { index + dim } else { index };
    if !(0..dim).contains(&index) {
        return None;
    }
    let mut starts = vec![0i64; shape.len()];
    let mut extents = shape.to_vec();
    starts[a] = index;
    extents[a] = 1;
    Some((starts, extents))
}

/// The byte offset of each part along `axis` when the parts are contiguous slices of a tensor
/// of shape `whole`: every dimension before `axis` must be 1. `part_extents` are the parts'
/// sizes along the axis; `elem_bits` the element width. `None` when the layout does not make
/// the parts contiguous or the offsets are not whole bytes.
pub fn slice_offsets(
    whole: &[i64],
    axis: usize,
    part_extents: &[i64],
    elem_bits: u32,
) -> Option<Vec<u64>> {
    if axis >= whole.len() || whole[..axis].iter().any(|&d| d != 1) || !elem_bits.is_multiple_of(8)
    {
        return None;
    }
    let inner: i64 = whole[axis + 1..].iter().product();
    let elem_bytes = i64::from(elem_bits / 8);
    let mut offsets = Vec::with_capacity(part_extents.len());
    let mut at = 0i64;
    for &extent in part_extents {
        offsets.push(u64::try_from(at * inner * elem_bytes).ok()?);
        at += extent;
    }
    (at == whole[axis]).then_some(offsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_concat_at_batch_one_is_contiguous() {
        // 1×(2+3)×4×4 float32: the second part starts after 2×16 floats = 128 bytes.
        assert_eq!(
            slice_offsets(&[1, 5, 4, 4], 1, &[2, 3], 32),
            Some(vec![0, 128])
        );
        // Batch 2 interleaves the parts.
        assert_eq!(slice_offsets(&[2, 5, 4, 4], 1, &[2, 3], 32), None);
        // Extents must cover the axis.
        assert_eq!(slice_offsets(&[1, 5], 1, &[2, 2], 32), None);
    }

    #[test]
    fn table_lookups() {
        assert_eq!(reuse_rule("", "Relu"), ReuseRule::InPlace(&[0]));
        assert_eq!(reuse_rule("", "Softmax"), ReuseRule::InPlace(&[0]));
        assert_eq!(reuse_rule("", "Reshape"), ReuseRule::Alias);
        assert_eq!(reuse_rule("", "Conv"), ReuseRule::None);
        assert_eq!(reuse_rule("custom", "Relu"), ReuseRule::None);
        assert_eq!(reuse_rule("", "Cast"), ReuseRule::InPlace(&[0]));
        assert_eq!(
            reuse_rule("com.microsoft", "FusedConv"),
            ReuseRule::InPlace(&[3])
        );
    }
}
