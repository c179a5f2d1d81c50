//! The verifier's own reading of a run-time `k` for `TopK`: the largest value any element of
//! an integer tensor can take, traced back to constants. Detection heads compute
//! `k = ReduceMin(Concat(candidates, count))` (or `Min`), which never exceeds the constant
//! whatever the count.

use crate::ir::{Graph, Value, ValueId};

/// Producers followed at most.
const MAX_STEPS: usize = 32;

/// What is asked of a tensor's elements.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Of {
    /// A ceiling of every element.
    Each,
    /// A ceiling of the smallest element (the tensor must be known to be non-empty).
    Least,
}

/// A ceiling of every element of `v`, when constants fix one.
pub fn ceiling(graph: &Graph, v: ValueId) -> Option<i64> {
    trace(graph, v, Of::Each, MAX_STEPS)
}

fn trace(graph: &Graph, v: ValueId, of: Of, steps: usize) -> Option<i64> {
    let value = graph.values.get(v)?;
    if let Some(constant) = &value.constant {
        if !constant.dtype.is_integer() {
            return None;
        }
        let elements = constant.to_i64_vec()?;
        return match of {
            Of::Each => elements.iter().copied().max(),
            Of::Least => elements.iter().copied().min(),
        };
    }
    if of == Of::Least && !has_elements(value) {
        return None;
    }
    let steps = steps.checked_sub(1)?;
    let node = &graph.nodes[value.producer?];
    if !node.domain.is_empty() {
        return None;
    }
    let given: Vec<ValueId> = node.inputs.iter().flatten().copied().collect();
    let first = *node.inputs.first()?.as_ref()?;
    match node.op_type.as_str() {
        // Same elements, another layout.
        "Identity" | "Reshape" | "Squeeze" | "Unsqueeze" | "Flatten" | "Transpose" => {
            trace(graph, first, of, steps)
        }
        "Concat" => {
            let parts = given.iter().map(|&u| trace(graph, u, of, steps));
            match of {
                // Every part's elements are in it: its smallest is at most any part's.
                Of::Least => parts.flatten().min(),
                Of::Each => parts.collect::<Option<Vec<i64>>>()?.into_iter().max(),
            }
        }
        // Elementwise minimum: no larger than any input there.
        "Min" => given
            .iter()
            .filter_map(|&u| trace(graph, u, Of::Each, steps))
            .min(),
        "ReduceMin" => {
            let x = &graph.values[first];
            let rank_one = x
                .tensor_type()
                .and_then(|t| t.shape.as_ref())
                .is_some_and(|s| s.len() == 1);
            let keeps_all = node.attr_int("noop_with_empty_axes") == Some(1);
            if rank_one && !keeps_all && has_elements(x) {
                // One element: the least of a non-empty vector.
                trace(graph, first, Of::Least, steps)
            } else {
                // Each element is the least of some of the input's.
                trace(graph, first, Of::Each, steps)
            }
        }
        _ => None,
    }
}

/// True when the inferred shape is fully known with no zero dimension.
fn has_elements(value: &Value) -> bool {
    match value.tensor_type().and_then(|t| t.shape.as_ref()) {
        Some(shape) => shape.iter().all(|d| matches!(d.value(), Some(n) if n >= 1)),
        None => false,
    }
}
