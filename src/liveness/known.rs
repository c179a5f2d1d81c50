//! What one liveness analysis asks of its graph again and again, worked out on first use and
//! kept for the analysis: each value's concrete shape, and where each Slice or Gather output
//! lies in its input. [`super::choose::analyse_best`] runs the grouping walk many times over
//! one order (every set of slice-alias sites it weighs), and each walk asks these of the same
//! tensors; the graph does not change meanwhile, so each answer is computed once.

use std::cell::OnceCell;

use super::rules::view_offset;
use crate::ir::{Graph, NodeId, ValueId};

/// The answers kept for one graph.
pub(super) struct Known<'g> {
    graph: &'g Graph,
    shapes: Vec<OnceCell<Option<Box<[i64]>>>>,
    views: Vec<OnceCell<Option<u64>>>,
}

impl<'g> Known<'g> {
    /// Nothing worked out yet for `graph`.
    pub(super) fn new(graph: &'g Graph) -> Self {
        Known {
            graph,
            shapes: (0..graph.values.len()).map(|_| OnceCell::new()).collect(),
            views: (0..graph.nodes.len()).map(|_| OnceCell::new()).collect(),
        }
    }

    /// Value `v`'s shape when every dimension is known ([`crate::ir::Value::concrete_shape`]).
    pub(super) fn shape(&self, v: ValueId) -> Option<&[i64]> {
        self.shapes[v]
            .get_or_init(|| {
                let shape = self.graph.values[v].concrete_shape()?;
                Some(shape.into_boxed_slice())
            })
            .as_deref()
    }

    /// [`view_offset`] of node `n`.
    pub(super) fn view_offset(&self, n: NodeId) -> Option<u64> {
        *self.views[n].get_or_init(|| view_offset(self.graph, &self.graph.nodes[n]))
    }
}
