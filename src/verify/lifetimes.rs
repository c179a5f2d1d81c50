//! Schedule validity and per-tensor facts (kind, dtype, shape, bytes, lifetime, placement).

use super::units::UnitFacts;
use crate::emit::{Table, TensorEntry};
use crate::ir::{Graph, NodeId, Value, ValueKind, concrete};

/// Checks that the schedule is a topological permutation of the nodes; returns each node's step.
pub fn check_schedule(
    graph: &Graph,
    schedule: &[usize],
    problems: &mut Vec<String>,
) -> Option<Vec<usize>> {
    let n = graph.nodes.len();
    let mut step = vec![usize::MAX; n];
    if schedule.len() != n {
        problems.push(format!(
            "schedule lists {} nodes, the graph has {n}",
            schedule.len()
        ));
        return None;
    }
    for (s, &node) in schedule.iter().enumerate() {
        if node >= n || step[node] != usize::MAX {
            problems.push(format!(
                "schedule entry {s} ({node}) is out of range or repeated"
            ));
            return None;
        }
        step[node] = s;
    }
    for (s, &node) in schedule.iter().enumerate() {
        let reads = graph.nodes[node]
            .inputs
            .iter()
            .flatten()
            .chain(&graph.nodes[node].captures);
        for &v in reads {
            if let Some(p) = graph.values[v].producer
                && step[p] >= s
            {
                problems.push(format!(
                    "schedule runs {} at step {s} before its input '{}' is produced",
                    graph.nodes[node].label(node),
                    graph.values[v].name
                ));
            }
        }
    }
    Some(step)
}

/// The lifetime `[first, last]` of a value under the schedule, derived directly from the graph;
/// the outputs of the `scatters` are written before the first step, and a node of a QDQ unit
/// writes at its unit's first step and reads until its last (a unit reading its own copy of a
/// shared DQ does not read the DQ's output).
pub fn lifetime(
    graph: &Graph,
    value: &Value,
    steps: &[usize],
    (scatters, units): (&[NodeId], &UnitFacts),
) -> (usize, usize) {
    let end = graph.nodes.len().saturating_sub(1);
    let span = |n: NodeId| units.span.get(&n).copied().unwrap_or((steps[n], steps[n]));
    let first = match value.producer {
        Some(p) if !scatters.contains(&p) => span(p).0,
        _ => 0,
    };
    let mut last = first;
    let copies = graph.value_id(&value.name).and_then(|v| units.copies.get(&v));
    for &c in &value.consumers {
        if copies.is_some_and(|readers| readers.contains(&c)) {
            continue;
        }
        last = last.max(span(c).1);
    }
    if value.is_output {
        last = end;
    }
    (first, last)
}

fn expected_kind(graph: &Graph, value: &Value, fused: bool) -> &'static str {
    let constant_node = value
        .producer
        .is_some_and(|p| graph.nodes[p].op_type == "Constant" && graph.nodes[p].domain.is_empty());
    if fused {
        "fused"
    } else if value.kind == ValueKind::Initializer || constant_node || value.folded {
        "constant"
    } else if value.is_output {
        "output"
    } else if value.kind == ValueKind::Input {
        "input"
    } else {
        "intermediate"
    }
}

/// Checks one entry's facts against the graph.
pub fn check_entry(
    graph: &Graph,
    value: &Value,
    entry: &TensorEntry,
    (steps, scatters, units): (&[usize], &[NodeId], &UnitFacts),
    table: &Table,
    problems: &mut Vec<String>,
) {
    let name = &entry.name;
    let unit = graph.value_id(name).and_then(|v| units.internal.get(&v));
    let kind = expected_kind(graph, value, unit.is_some());
    if entry.node_unit.as_ref() != unit {
        problems.push(format!(
            "tensor '{name}' names QDQ unit {:?}, the model gives {unit:?}",
            entry.node_unit
        ));
    }
    if entry.kind != kind {
        problems.push(format!(
            "tensor '{name}' is listed as {} but is {kind}",
            entry.kind
        ));
    }
    let tensor = value.tensor_type();
    let dtype = tensor.map(|t| t.dtype.name().to_string());
    if entry.dtype != dtype {
        problems.push(format!(
            "tensor '{name}' has dtype {:?}, inferred {dtype:?}",
            entry.dtype
        ));
    }
    let shape = tensor.and_then(|t| concrete(t.shape.as_ref()?));
    if entry.shape != shape {
        problems.push(format!(
            "tensor '{name}' has shape {:?}, inferred {shape:?}",
            entry.shape
        ));
    }
    let bytes = tensor.and_then(|t| t.bytes());
    if entry.bytes != bytes {
        problems.push(format!(
            "tensor '{name}' has {:?} bytes, inferred {bytes:?}",
            entry.bytes
        ));
    }
    let (first, last) = lifetime(graph, value, steps, (scatters, units));
    if (entry.first, entry.last) != (first, last) {
        problems.push(format!(
            "tensor '{name}' has lifetime {}:{}, the schedule gives {first}:{last}",
            entry.first, entry.last
        ));
    }
    let must_plan = match kind {
        "intermediate" => bytes.is_some(),
        "input" => {
            bytes.is_some()
                && table.options.include_io
                && graph.value_id(name).is_none_or(|v| {
                    !scatters
                        .iter()
                        .any(|&s| graph.nodes[s].inputs.first() == Some(&Some(v)))
                })
        }
        "output" => bytes.is_some() && table.options.include_io,
        _ => false,
    };
    match (entry.arena, entry.offset) {
        (Some(arena), Some(offset)) => {
            if kind == "constant" || kind == "fused" {
                problems.push(format!("{kind} tensor '{name}' is placed in an arena"));
            }
            let Some(a) = table.arenas.iter().find(|a| a.id == arena) else {
                problems.push(format!("tensor '{name}' is in unknown arena {arena}"));
                return;
            };
            if let Some(problem) = super::strided::check_strides(entry) {
                problems.push(format!("tensor '{name}': {problem}"));
            }
            let end = offset.checked_add(super::strided::span(entry));
            if end.is_none_or(|e| e > a.bytes) {
                problems.push(format!(
                    "tensor '{name}' ends past arena {arena} ({offset} + {:?} > {})",
                    entry.bytes, a.bytes
                ));
            }
            let alignment = table.options.alignment.max(1);
            // A strided view starts where its part of the parent starts.
            let view = entry.alias_offset.is_some() || entry.strides.is_some();
            if !view && !offset.is_multiple_of(alignment) {
                problems.push(format!(
                    "tensor '{name}' offset {offset} is not a multiple of {alignment}"
                ));
            }
        }
        (None, None) if must_plan => {
            problems.push(format!("tensor '{name}' ({kind}) is not placed"));
        }
        (None, None) => {}
        _ => problems.push(format!(
            "tensor '{name}' has an arena without an offset or the reverse"
        )),
    }
}
