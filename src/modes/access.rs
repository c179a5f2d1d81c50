//! Which steps read or write each tensor of an analysis: its producer writes it, each reading
//! node (captures of subgraphs included) reads it once.

use crate::ir::{Graph, NodeId};
use crate::liveness::Liveness;

/// One tensor access by an operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TensorAccess {
    /// The step.
    pub step: usize,
    /// True for the producer's write.
    pub write: bool,
}

/// For each tensor of `liveness`, its accesses in step order.
pub fn tensor_accesses(graph: &Graph, liveness: &Liveness) -> Vec<Vec<TensorAccess>> {
    let step_of = crate::ir::steps_of(&liveness.order, graph.nodes.len());
    let step = |n: NodeId| step_of[n];
    liveness
        .tensors
        .iter()
        .map(|t| {
            let value = &graph.values[t.value];
            let mut list: Vec<TensorAccess> = value
                .producer
                .map(|p| TensorAccess {
                    step: step(p),
                    write: true,
                })
                .into_iter()
                .chain(value.consumers.iter().map(|&c| TensorAccess {
                    step: step(c),
                    write: false,
                }))
                .filter(|a| a.step != usize::MAX)
                .collect();
            list.sort_unstable();
            list.dedup();
            list
        })
        .collect()
}
