//! The per-operator table of row blocking: for a node and the axis of its output the blocks
//! cut, how each input is read. Rows are independent along that axis: output rows `[s, e)`
//! depend only on rows `[s, e)` of the inputs that carry the axis, and on the whole of the
//! others. An operator without an entry ends a row chain.

use super::super::rules::{ELEMENTWISE, MICROSOFT_ELEMENTWISE, shape_of};
use super::products::{columns, matmul, matmul_integer, per_tensor};
use crate::ir::{Graph, Node};

/// How a row-blocked node reads one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowRead {
    /// The input is absent (an omitted optional input).
    Absent,
    /// Read whole by every block (weights, broadcast operands, the keys and values of
    /// attention, shape operands).
    Whole,
    /// Rows `[s, e)` along this axis of the input.
    Rows(usize),
    /// Rows `[s, e)` along this axis of an input that must also exist whole, so it is made
    /// before the chain (a DynamicQuantizeLinear's, whose scale comes from all of it).
    RowsOfWhole(usize),
}

impl RowRead {
    /// The axis a block reads rows along, if it reads rows.
    pub fn rows(self) -> Option<usize> {
        match self {
            RowRead::Rows(a) | RowRead::RowsOfWhole(a) => Some(a),
            RowRead::Absent | RowRead::Whole => None,
        }
    }
}

/// What a row-blocked node needs besides sliced inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixup {
    /// Nothing: the node's attributes hold for any block.
    None,
    /// A Reshape, Expand or ConstantOfShape: its shape input (at this index) becomes the
    /// block's output shape.
    ShapeTarget(usize),
    /// A DynamicQuantizeLinear: its scale and zero point (outputs 1 and 2) are computed once
    /// from the whole input ([`super::quantize`]), and each block quantizes its rows with a
    /// QuantizeLinear by them. Its other outputs may be read outside the chain.
    WholeScale,
    /// A DynamicQuantizeLinear whose input the chain itself makes (a chain built with
    /// [`super::chain::RowRules::passes`]): its input is read in rows, a pass of the blocks
    /// before the last computes them for their extremes, and the scale and zero point come
    /// from those; each block of the later passes quantizes its rows by them (see
    /// [`super::chain::Pass`]).
    TwoPass,
}

/// The rule of one node for one output axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowRule {
    /// How each input is read, in input order.
    pub reads: Vec<RowRead>,
    /// The per-block adjustment the node needs.
    pub fixup: Fixup,
}

/// Which rules of the table apply: chains built with either are both candidates (a rule that
/// lets a chain grow may also make it worse: a maximal chain through a grouped-query
/// attention's key-value heads has fewer blocks than one of the query heads alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RuleSet {
    /// Operators whose blocked axis keeps its extent.
    Plain,
    /// Also Slice and Concat along other axes, Expand, and Reshapes that merge the blocked
    /// axis with others or split it.
    Extended,
    /// The extended rules, and MatMul and MatMulInteger by a constant along their output's
    /// columns: an attention blocked by heads, each made from its own columns of the
    /// projection weights.
    Heads,
}

/// Reductions whose reduced axes are given by `axes` (attribute, or input 1 from opset 18).
pub(in crate::split) const REDUCTIONS: &[&str] = &[
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL2",
    "ReduceSumSquare",
];

/// The rule of `node` when blocks cut `axis` of its output (of each of a Split's outputs,
/// which share that axis), or `None` when its rows along that axis are not independent (or
/// its rule is not in `set`). `opset` is the default domain's version.
pub fn row_rule(
    graph: &Graph,
    node: &Node,
    axis: usize,
    (opset, set): (i64, RuleSet),
) -> Option<RowRule> {
    let extended = matches!(set, RuleSet::Extended | RuleSet::Heads);
    let heads = set == RuleSet::Heads;
    let out = node.outputs.first().copied().flatten()?;
    // A Split's parts are all blocked; a DynamicQuantizeLinear's scale and zero point are not.
    let several = node.domain.is_empty()
        && matches!(node.op_type.as_str(), "Split" | "DynamicQuantizeLinear");
    if (!several && node.outputs.iter().skip(1).any(Option::is_some)) || !node.subgraphs.is_empty()
    {
        return None;
    }
    let out_shape = shape_of(graph, out)?;
    let rank = out_shape.len();
    if axis >= rank {
        return None;
    }
    let op = node.op_type.as_str();
    let input_shape = |i: usize| {
        node.inputs
            .get(i)
            .copied()
            .flatten()
            .and_then(|v| shape_of(graph, v))
    };
    let simple = |reads: Vec<RowRead>| {
        Some(RowRule {
            reads,
            fixup: Fixup::None,
        })
    };
    let first_only = |n: usize| {
        let mut reads = vec![RowRead::Rows(axis)];
        reads.extend((1..n).map(|i| absent_or(node, i, RowRead::Whole)));
        reads
    };
    match (node.domain.as_str(), op) {
        ("", _) if ELEMENTWISE.contains(&op) => broadcast(graph, node, &out_shape, axis),
        ("com.microsoft", _) if MICROSOFT_ELEMENTWISE.contains(&op) => {
            broadcast(graph, node, &out_shape, axis)
        }
        ("", "Softmax" | "LogSoftmax") => {
            let along = node
                .attr_int("axis")
                .unwrap_or(if opset >= 13 { -1 } else { 1 });
            let along = normalise(along, rank)?;
            // Before opset 13 the operator flattens from `axis` on: rows before it only.
            let independent = if opset >= 13 {
                axis != along
            } else {
                axis < along
            };
            independent.then(|| first_only(1)).and_then(simple)
        }
        ("", "LayerNormalization") | ("com.microsoft", "SimplifiedLayerNormalization") => {
            let along = normalise(node.attr_int("axis").unwrap_or(-1), rank)?;
            (axis < along)
                .then(|| first_only(node.inputs.len()))
                .and_then(simple)
        }
        ("com.microsoft", "SkipLayerNormalization" | "SkipSimplifiedLayerNormalization") => {
            // input, skip, gamma, beta, bias; normalised over the last axis.
            if axis + 1 >= rank {
                return None;
            }
            let mut reads = first_only(node.inputs.len());
            if let Some(skip) = reads.get_mut(1) {
                *skip = aligned(input_shape(1)?.as_slice(), &out_shape, axis)?;
            }
            simple(reads)
        }
        ("", name) if REDUCTIONS.contains(&name) => reduction(graph, node, &out_shape, axis),
        ("", "MatMul" | "MatMulInteger") if heads && axis + 1 == rank => {
            columns(graph, node, &out_shape)
        }
        ("", "MatMul") => matmul(&input_shape(0)?, &input_shape(1)?, &out_shape, axis),
        ("", "MatMulInteger") => {
            let a_zero = match node.inputs.get(2).copied().flatten() {
                Some(_) => Some(input_shape(2)?),
                None => None,
            };
            let (a, b) = (input_shape(0)?, input_shape(1)?);
            let mut rule = matmul_integer(&a, &b, a_zero.as_deref(), &out_shape, axis)?;
            rule.reads[3] = absent_or(node, 3, RowRead::Whole);
            rule.reads.truncate(node.inputs.len());
            Some(rule)
        }
        ("", "QLinearMatMul") => {
            // a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
            let (a, b) = (input_shape(0)?, input_shape(3)?);
            let rule = matmul(&a, &b, &out_shape, axis)?;
            let mut reads = vec![rule.reads[0], RowRead::Whole, RowRead::Whole, rule.reads[1]];
            reads.extend([RowRead::Whole; 4]);
            per_tensor(graph, node, &[1, 2, 6, 7]).then(|| simple(reads))?
        }
        ("com.microsoft", "QGemm") => {
            // A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale, y_zero_point:
            // rows of A, its bias C broadcast like Gemm's.
            if axis != 0 || node.attr_int("transA").unwrap_or(0) != 0 {
                return None;
            }
            let mut reads: Vec<RowRead> = (0..node.inputs.len())
                .map(|i| absent_or(node, i, RowRead::Whole))
                .collect();
            reads[0] = RowRead::Rows(0);
            if let Some(c) = reads.get_mut(6).filter(|r| **r != RowRead::Absent) {
                *c = aligned(&input_shape(6)?, &out_shape, axis)?;
            }
            per_tensor(graph, node, &[1, 2, 7, 8]).then(|| simple(reads))?
        }
        ("", "QuantizeLinear" | "DequantizeLinear") => quantize_linear(graph, node, axis, rank),
        ("", "DynamicQuantizeLinear") => Some(RowRule {
            reads: vec![RowRead::RowsOfWhole(axis)],
            fixup: Fixup::WholeScale,
        }),
        ("com.microsoft", "FusedMatMul") => {
            // alpha · op(A) · op(B): with A neither transposed nor batch-transposed and B's
            // batch axes in place, output rows and batches come from A's (and B's batch
            // axes) as in MatMul; transB only swaps B's last two axes, which are read whole.
            let plain = |name: &str| node.attr_int(name).unwrap_or(0) == 0;
            if !(plain("transA") && plain("transBatchA") && plain("transBatchB")) {
                return None;
            }
            matmul(&input_shape(0)?, &input_shape(1)?, &out_shape, axis)
        }
        ("", "Gemm") => {
            if axis != 0 || node.attr_int("transA").unwrap_or(0) != 0 {
                return None;
            }
            let mut reads = vec![RowRead::Rows(0), RowRead::Whole];
            if node.inputs.get(2).copied().flatten().is_some() {
                reads.push(aligned(&input_shape(2)?, &out_shape, axis)?);
            }
            simple(reads)
        }
        ("", "Transpose") => {
            let perm: Vec<usize> = match node.attr_ints("perm") {
                Some(p) => p
                    .iter()
                    .map(|&a| usize::try_from(a).ok())
                    .collect::<Option<_>>()?,
                None => (0..rank).rev().collect(),
            };
            simple(vec![RowRead::Rows(*perm.get(axis)?)])
        }
        ("", "Squeeze" | "Unsqueeze") => {
            // The axes (attribute, or input 1 from opset 13) hold for any block; a Squeeze
            // without them would also drop the blocked axis of a one-row block.
            let listed = node.attr_ints("axes").is_some()
                || node
                    .inputs
                    .get(1)
                    .copied()
                    .flatten()
                    .is_some_and(|v| graph.values[v].constant.is_some());
            if !listed {
                return None;
            }
            let from = same_axis(&input_shape(0)?, &out_shape, axis)?;
            let mut reads = vec![RowRead::Rows(from)];
            reads.extend((1..node.inputs.len()).map(|i| absent_or(node, i, RowRead::Whole)));
            simple(reads)
        }
        ("", "Split") => {
            // Parts along another axis: each part's rows are the input's rows.
            let along = normalise(node.attr_int("axis").unwrap_or(0), rank)?;
            (axis != along)
                .then(|| first_only(node.inputs.len()))
                .and_then(simple)
        }
        ("", "Slice") if extended => {
            // A Slice along other axes (rotary embeddings' halves): its starts, ends, axes
            // and steps hold for any block.
            let axes = slice_axes(graph, node, opset)?;
            let cut = axes.iter().any(|&a| normalise(a, rank) == Some(axis));
            if cut || axes.iter().any(|&a| normalise(a, rank).is_none()) {
                return None;
            }
            simple(first_only(node.inputs.len()))
        }
        ("", "Concat") if extended => {
            // A Concat along another axis: every part carries the blocked rows.
            let along = normalise(node.attr_int("axis")?, rank)?;
            (along != axis)
                .then(|| (0..node.inputs.len()).map(|i| absent_or(node, i, RowRead::Rows(axis))))
                .map(Iterator::collect)
                .and_then(simple)
        }
        ("", "Reshape") => {
            let (input, out) = (&input_shape(0)?, &out_shape);
            let from = if extended {
                reshaped_axis(input, out, axis)?
            } else {
                same_axis(input, out, axis)?
            };
            Some(RowRule {
                reads: vec![RowRead::Rows(from), RowRead::Whole],
                fixup: Fixup::ShapeTarget(1),
            })
        }
        ("", "Expand") if extended => {
            // Grouped-query attention repeats each key and value head for its query heads: a
            // block of heads expands its own (an input broadcast along the axis is read whole).
            let reads = vec![aligned(&input_shape(0)?, &out_shape, axis)?, RowRead::Whole];
            Some(RowRule {
                reads,
                fixup: Fixup::ShapeTarget(1),
            })
        }
        ("", "ConstantOfShape") => Some(RowRule {
            reads: vec![RowRead::Whole],
            fixup: Fixup::ShapeTarget(0),
        }),
        ("", "Gather") => {
            let data = input_shape(0)?.len();
            let along = normalise(node.attr_int("axis").unwrap_or(0), data)?;
            let reads = gather(input_shape(1)?.len(), along, axis);
            // Rows of data made at run time (a ViT's Q, K and V gathered from one QKV
            // tensor, which siblings read too) gain nothing by themselves: measured on the
            // ViTs, such chains only steer the search away from the attention. Chains whose
            // blocks take all three (windows or heads of attention, each with its own Q, K
            // and V) are built with the extended rules.
            let weights = node.inputs[0].is_some_and(|v| graph.is_model_constant(v));
            (weights || extended || reads[0] == RowRead::Whole).then(|| simple(reads))?
        }
        _ => None,
    }
}

/// The axes a Slice cuts, as given (possibly negative): the `axes` attribute before opset 10,
/// else the constant input 3; when absent, the first as many axes as there are starts.
/// `None` when they are not known before run time.
fn slice_axes(graph: &Graph, node: &Node, opset: i64) -> Option<Vec<i64>> {
    let constant = |i: usize| {
        let v = node.inputs.get(i).copied().flatten()?;
        graph.values[v].constant.as_ref()?.to_i64_vec()
    };
    if opset < 10 {
        return match node.attr_ints("axes") {
            Some(axes) => Some(axes.to_vec()),
            None => Some((0..node.attr_ints("starts")?.len() as i64).collect()),
        };
    }
    match node.inputs.get(3).copied().flatten() {
        Some(_) => constant(3),
        None => Some((0..constant(1)?.len() as i64).collect()),
    }
}

/// `Absent` for an omitted optional input `i`, otherwise `read`.
pub(super) fn absent_or(node: &Node, i: usize, read: RowRead) -> RowRead {
    match node.inputs.get(i).copied().flatten() {
        Some(_) => read,
        None => RowRead::Absent,
    }
}

/// An axis attribute made non-negative, if it is inside the rank.
fn normalise(axis: i64, rank: usize) -> Option<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    usize::try_from(a).ok().filter(|&a| a < rank)
}

/// How an operand broadcast against an output of shape `out` is read when blocks cut `axis`:
/// the operand's aligned axis when it has the full extent, whole when it broadcasts there.
pub(super) fn aligned(input: &[i64], out: &[i64], axis: usize) -> Option<RowRead> {
    let shift = out.len() as i64 - input.len() as i64;
    let at = axis as i64 - shift;
    if at < 0 {
        return Some(RowRead::Whole);
    }
    let at = at as usize;
    match input[at] {
        1 if out[axis] != 1 => Some(RowRead::Whole),
        d if d == out[axis] => Some(RowRead::Rows(at)),
        _ => None,
    }
}

/// Elementwise operators with multidirectional broadcasting.
fn broadcast(graph: &Graph, node: &Node, out: &[i64], axis: usize) -> Option<RowRule> {
    let reads = node
        .inputs
        .iter()
        .map(|input| match *input {
            None => Some(RowRead::Absent),
            Some(v) => aligned(&shape_of(graph, v)?, out, axis),
        })
        .collect::<Option<Vec<_>>>()?;
    Some(RowRule {
        reads,
        fixup: Fixup::None,
    })
}

/// The axes a Reduce node names, as given: its `axes` attribute in the older forms, else its
/// constant input 1; `None` when neither is known.
pub(in crate::split) fn reduction_axes(graph: &Graph, node: &Node) -> Option<Vec<i64>> {
    match node.attr_ints("axes") {
        Some(a) => Some(a.to_vec()),
        None => {
            let v = node.inputs.get(1).copied().flatten()?;
            graph.values[v].constant.as_ref()?.to_i64_vec()
        }
    }
}

/// A reduction over axes other than the blocked one (the decomposed LayerNorm's ReduceMean).
fn reduction(graph: &Graph, node: &Node, out: &[i64], axis: usize) -> Option<RowRule> {
    let input = shape_of(graph, node.inputs.first().copied().flatten()?)?;
    let axes = reduction_axes(graph, node)?;
    if axes.is_empty() {
        return None; // every axis (or none, with noop_with_empty_axes): not row-independent
    }
    let axes: Vec<usize> = axes
        .iter()
        .map(|&a| normalise(a, input.len()))
        .collect::<Option<_>>()?;
    let keep = node.attr_int("keepdims").unwrap_or(1) != 0;
    // The input axis the output axis comes from.
    let from = if keep {
        axis
    } else {
        (0..input.len()).filter(|a| !axes.contains(a)).nth(axis)?
    };
    if axes.contains(&from) || input[from] != out[axis] {
        return None;
    }
    let mut reads = vec![RowRead::Rows(from)];
    reads.extend((1..node.inputs.len()).map(|i| absent_or(node, i, RowRead::Whole)));
    Some(RowRule {
        reads,
        fixup: Fixup::None,
    })
}

/// A QuantizeLinear or DequantizeLinear of a tensor of rank `rank` cut along `axis`: rows of
/// the input; its scale and zero point read whole when per tensor or per channel along another
/// axis. Per channel along the blocked axis, or block quantization, ends the chain.
fn quantize_linear(graph: &Graph, node: &Node, axis: usize, rank: usize) -> Option<RowRule> {
    if node.attr_int("block_size").unwrap_or(0) != 0 {
        return None;
    }
    let scale = shape_of(graph, node.inputs.get(1).copied().flatten()?)?;
    let along = normalise(node.attr_int("axis").unwrap_or(1), rank);
    let whole = match scale.as_slice() {
        [] | [1] => true,
        [_] => along.is_some_and(|a| a != axis),
        _ => false,
    };
    if !whole {
        return None;
    }
    let mut reads = vec![RowRead::Rows(axis), RowRead::Whole];
    reads.extend((2..node.inputs.len()).map(|i| absent_or(node, i, RowRead::Whole)));
    Some(RowRule {
        reads,
        fixup: Fixup::None,
    })
}

/// How a Gather along `along` with indices of rank `indices` reads its data and indices when
/// blocks cut output `axis`: the output's axes are the data's before `along`, the indices',
/// then the data's after `along`.
fn gather(indices: usize, along: usize, axis: usize) -> Vec<RowRead> {
    if axis < along {
        vec![RowRead::Rows(axis), RowRead::Whole]
    } else if axis < along + indices {
        vec![RowRead::Whole, RowRead::Rows(axis - along)]
    } else {
        vec![RowRead::Rows(axis + 1 - indices), RowRead::Whole]
    }
}

/// The input axis of a Squeeze or Unsqueeze that output `axis` is: the same extent with the
/// same number of elements before it.
fn same_axis(input: &[i64], out: &[i64], axis: usize) -> Option<usize> {
    reshaped_axis(input, out, axis).filter(|&i| input[i] == out[axis])
}

/// The input axis of a Reshape whose rows are output `axis`'s, in proportion: with the same
/// number of elements before both, either the same extent, or the output axis the outer part
/// of the input axis (split from it) or the input axis the outer part of the output axis
/// (merged into it). A block of rows is then a contiguous run of the input's rows, scaled by
/// the ratio of the extents (a block of image rows is a run of tokens; a block of two query
/// heads is one key-value head of a grouped-query attention).
fn reshaped_axis(input: &[i64], out: &[i64], axis: usize) -> Option<usize> {
    let before: i64 = out[..axis].iter().product();
    let nested = |short: &[i64], long: i64| {
        let mut product = 1;
        short.iter().any(|&d| {
            product *= d;
            product == long
        })
    };
    let mut prefix = 1;
    for (i, &d) in input.iter().enumerate() {
        if prefix == before && d > 1 && (nested(&out[axis..], d) || nested(&input[i..], out[axis]))
        {
            return Some(i);
        }
        prefix *= d;
        if prefix > before {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_keeps_the_token_axis_worked_by_hand() {
        // [1, 128, 256] → [1, 128, 4, 64]: axis 1 has 1 element before it in both.
        assert_eq!(reshaped_axis(&[1, 128, 256], &[1, 128, 4, 64], 1), Some(1));
        // [1, 4, 128, 32] → [4, 128, 32]: output axis 1 (128) has 4 elements before it, as
        // has input axis 2.
        assert_eq!(reshaped_axis(&[1, 4, 128, 32], &[4, 128, 32], 1), Some(2));
        // [2, 6] → [3, 4]: no axis of the output is an axis of the input.
        assert_eq!(reshaped_axis(&[2, 6], &[3, 4], 0), None);
        // [1, 56, 56, 384] → [3136, 384]: output axis 0 merges input axes 1 and 2, and back.
        assert_eq!(reshaped_axis(&[1, 56, 56, 384], &[3136, 384], 0), Some(1));
        assert_eq!(reshaped_axis(&[3136, 384], &[1, 56, 56, 384], 1), Some(0));
        // Grouped-query heads [1, 2, 2, 128, 32] → [1, 4, 128, 32]: axis 1 merges 2 × 2.
        assert_eq!(
            reshaped_axis(&[1, 2, 2, 128, 32], &[1, 4, 128, 32], 1),
            Some(1)
        );
        // Axis 2 of [1, 56, 56, 384] is the inner part of the merged axis: no run of rows.
        assert_eq!(reshaped_axis(&[3136, 384], &[1, 56, 56, 384], 2), None);
    }

    #[test]
    fn gather_reads_worked_by_hand() {
        // A relative-position bias: table [32, 4] gathered by buckets [128, 128] along axis 0
        // gives [128, 128, 4]; query rows (axis 0) are rows of the buckets, heads (axis 2)
        // are columns of the table.
        assert_eq!(gather(2, 0, 0), [RowRead::Whole, RowRead::Rows(0)]);
        assert_eq!(gather(2, 0, 2), [RowRead::Rows(1), RowRead::Whole]);
        // QKV [3, 1, 4, 65, 24] gathered by the scalar 0 along axis 0: [1, 4, 65, 24], whose
        // axis 2 is the data's axis 3.
        assert_eq!(gather(0, 0, 2), [RowRead::Rows(3), RowRead::Whole]);
        // Data [2, 5, 6] gathered along axis 1 by indices [3]: [2, 3, 6].
        assert_eq!(gather(1, 1, 0), [RowRead::Rows(0), RowRead::Whole]);
        assert_eq!(gather(1, 1, 1), [RowRead::Whole, RowRead::Rows(0)]);
        assert_eq!(gather(1, 1, 2), [RowRead::Rows(2), RowRead::Whole]);
    }

    #[test]
    fn broadcast_operands_are_read_whole() {
        // Bias [256] against [1, 128, 256] cut along axis 1: read whole. A mask
        // [1, 1, 128, 128] against scores [1, 4, 128, 128] cut along axis 2: rows of its
        // axis 2; cut along axis 1 (heads): whole.
        assert_eq!(aligned(&[256], &[1, 128, 256], 1), Some(RowRead::Whole));
        let scores = [1, 4, 128, 128];
        assert_eq!(
            aligned(&[1, 1, 128, 128], &scores, 2),
            Some(RowRead::Rows(2))
        );
        assert_eq!(aligned(&[1, 1, 128, 128], &scores, 1), Some(RowRead::Whole));
        assert_eq!(aligned(&[1, 3, 128, 128], &scores, 1), None);
    }

    #[test]
    fn matmul_integer_rows_read_zero_points_whole_worked_by_hand() {
        // quantize_dynamic's projection: A u8 [1, 128, 128] cut along its token axis 1,
        // B u8 [128, 512], a_zero_point a scalar: rows of A, B and both zero points whole.
        let (a, b, out) = ([1, 128, 128], [128, 512], [1, 128, 512]);
        let rule = matmul_integer(&a, &b, Some(&[][..]), &out, 1).unwrap();
        let (rows, whole) = (RowRead::Rows(1), RowRead::Whole);
        assert_eq!(rule.reads, [rows, whole, whole, whole]);
        // Without a_zero_point: absent.
        let rule = matmul_integer(&a, &b, None, &out, 1).unwrap();
        assert_eq!(rule.reads, [rows, whole, RowRead::Absent, whole]);
        // A per-row zero point [128] of A differs between blocks' rows: no rule.
        assert!(matmul_integer(&a, &b, Some(&[128][..]), &out, 1).is_none());
        // The columns (axis 2) are not row-independent.
        assert!(matmul_integer(&a, &b, Some(&[][..]), &out, 2).is_none());
    }

    #[test]
    fn matmul_rows_read_the_right_side_whole() {
        // Q·Kᵀ: [1,4,128,32] × [1,4,32,128] cut along the query axis 2.
        let rule = matmul(&[1, 4, 128, 32], &[1, 4, 32, 128], &[1, 4, 128, 128], 2).unwrap();
        assert_eq!(rule.reads, vec![RowRead::Rows(2), RowRead::Whole]);
        // Cut along heads: both operands carry axis 1.
        let heads = matmul(&[1, 4, 128, 32], &[1, 4, 32, 128], &[1, 4, 128, 128], 1).unwrap();
        assert_eq!(heads.reads, vec![RowRead::Rows(1), RowRead::Rows(1)]);
        // The column axis is not row-independent.
        assert!(matmul(&[1, 128, 32], &[32, 64], &[1, 128, 64], 2).is_none());
    }
}
