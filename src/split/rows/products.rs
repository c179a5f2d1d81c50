//! The row rules of the matrix products: MatMul and MatMulInteger by rows, batches or (by a
//! constant B) columns, and the per-tensor test of the quantized forms' scales.

use super::rules::{Fixup, RowRead, RowRule, absent_or, aligned};
use crate::ir::{Graph, Node};
use crate::split::rules::shape_of;

/// MatMul with numpy broadcasting: blocks of the row axis (second to last) read rows of A and
/// all of B; blocks of a batch axis read that axis of both where they carry it.
pub(super) fn matmul(a: &[i64], b: &[i64], out: &[i64], axis: usize) -> Option<RowRule> {
    let rank = out.len();
    if a.len() < 2 || b.len() < 2 || axis + 1 >= rank {
        return None;
    }
    let reads = if axis + 2 == rank {
        vec![RowRead::Rows(a.len() - 2), RowRead::Whole]
    } else {
        // A batch axis: both operands' batch dims broadcast like an elementwise operator's.
        let batch = &out[..rank - 2];
        vec![
            aligned(&a[..a.len() - 2], batch, axis)?,
            aligned(&b[..b.len() - 2], batch, axis)?,
        ]
    };
    Some(RowRule {
        reads,
        fixup: Fixup::None,
    })
}

/// A MatMul or MatMulInteger by a constant B cut along its output's columns (the last axis):
/// a block of columns reads all of A and those columns of B (an attention projection's
/// heads, each made from its own weight columns); A's zero point is read whole, B's by
/// column when it has one per column. `None` when B is made at run time or broadcasts its
/// columns.
pub(super) fn columns(graph: &Graph, node: &Node, out: &[i64]) -> Option<RowRule> {
    let b = node.inputs.get(1).copied().flatten()?;
    let b_shape = shape_of(graph, b)?;
    if !graph.is_model_constant(b) || b_shape.len() < 2 || b_shape.last() != out.last() {
        return None;
    }
    let mut reads = vec![RowRead::Whole, RowRead::Rows(b_shape.len() - 1)];
    if node.op_type == "MatMulInteger" {
        reads.push(absent_or(node, 2, RowRead::Whole));
        reads.push(match node.inputs.get(3).copied().flatten() {
            None => RowRead::Absent,
            Some(z) => match shape_of(graph, z)?.as_slice() {
                [] | [1] => RowRead::Whole,
                [n] if Some(n) == out.last() => RowRead::Rows(0),
                _ => return None,
            },
        });
        reads.truncate(node.inputs.len());
    }
    Some(RowRule {
        reads,
        fixup: Fixup::None,
    })
}

/// MatMulInteger: MatMul's reads for A and B, then A's zero point (`a_zero`: its shape, if
/// given) read whole when it is one value for the whole tensor (a per-row one differs between
/// blocks: no rule), then B's read whole (per tensor or per column).
pub(super) fn matmul_integer(
    a: &[i64],
    b: &[i64],
    a_zero: Option<&[i64]>,
    out: &[i64],
    axis: usize,
) -> Option<RowRule> {
    if a_zero.is_some_and(|s| s.iter().product::<i64>() != 1) {
        return None;
    }
    let mut rule = matmul(a, b, out, axis)?;
    let a_zero = a_zero.map_or(RowRead::Absent, |_| RowRead::Whole);
    rule.reads.extend([a_zero, RowRead::Whole]);
    Some(rule)
}

/// Whether each present input of `node` among `inputs` (A's and Y's scales and zero points
/// of QLinearMatMul and QGemm) is one value: a per-row one differs between blocks' rows.
pub(super) fn per_tensor(graph: &Graph, node: &Node, inputs: &[usize]) -> bool {
    inputs.iter().all(|&i| match node.inputs.get(i).copied().flatten() {
        None => true,
        Some(v) => shape_of(graph, v).is_some_and(|s| s.iter().product::<i64>() == 1),
    })
}
