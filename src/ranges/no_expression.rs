//! Why a tensor's size has no expression in the symbols: the message that goes with a tensor
//! planned at its upper bound instead (issue's fallback: say which tensor and why).

use crate::ir::{Dim, Graph, TensorType, ValueId};

/// Producers followed back at most when looking for where the expression was lost.
const MAX_STEPS: usize = 64;

/// True when `ty` has a size expression: a known element size and every dimension one.
pub fn has_expression(ty: Option<&TensorType>) -> bool {
    ty.is_some_and(|t| t.bytes_expr().is_some())
}

/// Why `value` of `graph` has no size expression: where, following its producers back, the
/// expression was lost, and how. An `If` whose branches give different shapes is named with
/// both; otherwise the node that gave a dimension no expression.
pub fn why(graph: &Graph, value: ValueId) -> String {
    let mut origin = value;
    for _ in 0..MAX_STEPS {
        let lost_in = graph.values[origin].producer.and_then(|p| {
            graph.nodes[p]
                .inputs
                .iter()
                .flatten()
                .copied()
                .find(|&i| !has_expression(graph.values[i].tensor_type()))
        });
        match lost_in {
            Some(input) if !is_if(graph, origin) => origin = input,
            _ => break,
        }
    }
    let here = local_reason(graph, origin);
    if origin == value {
        here
    } else {
        format!(
            "its shape derives from '{}': {here}",
            graph.values[origin].name
        )
    }
}

/// True when an `If` node produces `value`.
fn is_if(graph: &Graph, value: ValueId) -> bool {
    graph.values[value]
        .producer
        .is_some_and(|p| graph.nodes[p].op_type == "If")
}

/// The reason at the node that produced `value` from inputs that all have expressions (or
/// from branches).
fn local_reason(graph: &Graph, value: ValueId) -> String {
    let shape_text = |t: Option<&TensorType>| match t.and_then(|t| t.shape.as_ref()) {
        Some(s) => format!(
            "[{}]",
            s.iter().map(Dim::to_string).collect::<Vec<_>>().join(", ")
        ),
        None => "of unknown rank".to_string(),
    };
    let Some(p) = graph.values[value].producer else {
        return format!(
            "it has the shape {} as given",
            shape_text(graph.values[value].tensor_type())
        );
    };
    let node = &graph.nodes[p];
    let label = node.label(p);
    if node.op_type == "If"
        && let Some(k) = node.outputs.iter().position(|&o| o == Some(value))
    {
        let branches: Vec<String> = node
            .subgraphs
            .iter()
            .filter(|s| s.ruled_out.is_none())
            .map(|s| {
                let out = s.graph.outputs.get(k).copied();
                let ty = out.and_then(|o| s.graph.values[o].tensor_type());
                format!("{} {}", s.attribute, shape_text(ty))
            })
            .collect();
        return format!(
            "output {k} of {label}, whose branches give different shapes ({}); no single expression covers both",
            branches.join(" and ")
        );
    }
    format!(
        "{label} gives it the shape {}, with no expression for every dimension",
        shape_text(graph.values[value].tensor_type())
    )
}
