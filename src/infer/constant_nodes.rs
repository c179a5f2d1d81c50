//! Which nodes are constants themselves: a deterministic node without subgraphs whose inputs
//! are all model constants computes the same tensors on every run, so a runtime computes them
//! once at load time and keeps them with the weights (onnxruntime's constant folding does the
//! same). Their outputs are marked [`folded`](crate::ir::Value::folded) and never take arena
//! space.

use super::fold::FOLD_LIMIT;
use crate::ir::{Graph, NodeId};

/// Operators whose outputs differ from run to run (or may, as Dropout in training mode).
const NONDETERMINISTIC: &[&str] = &[
    "Bernoulli",
    "Dropout",
    "Multinomial",
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
];

/// Operators whose output is input 0's bytes reinterpreted: of a constant, they copy nothing
/// (exporters write `Identity` of a shared weight), so any size folds.
const VIEWS: &[&str] = &["Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"];

/// Marks the outputs of node `id` as folded exactly when it qualifies: a default-domain operator, not
/// random, holding no subgraph, every given input a model constant, and every output a tensor
/// of at most [`FOLD_LIMIT`] elements (the cap of inference's own constant folding, so a node
/// that would copy a large weight stays a run-time tensor) unless the node is a view.
pub(super) fn mark_folded(graph: &mut Graph, id: NodeId) {
    let folded = qualifies(graph, id);
    let outputs: Vec<_> = graph.nodes[id].outputs.iter().flatten().copied().collect();
    for v in outputs {
        graph.values[v].folded = folded;
    }
}

fn qualifies(graph: &Graph, id: NodeId) -> bool {
    let node = &graph.nodes[id];
    node.domain.is_empty()
        && node.op_type != "Constant"
        && !NONDETERMINISTIC.contains(&node.op_type.as_str())
        && node.subgraphs.is_empty()
        && node
            .inputs
            .iter()
            .flatten()
            .all(|&v| graph.is_model_constant(v))
        && (VIEWS.contains(&node.op_type.as_str())
            || node.outputs.iter().flatten().all(|&v| {
                graph.values[v]
                    .tensor_type()
                    .and_then(|t| {
                        t.shape.as_deref()?.iter().try_fold(1usize, |n, d| {
                            n.checked_mul(usize::try_from(d.value()?).ok()?)
                        })
                    })
                    .is_some_and(|n| n <= FOLD_LIMIT)
            }))
}
