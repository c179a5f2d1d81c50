//! Per-tensor kind, exact byte size and lifetime `[first, last]` in steps.

use anyhow::Result;

use crate::bail_input;
use crate::ir::{Graph, NodeId, ValueId, ValueKind, ValueType};

/// What a tensor is to the runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// A graph input.
    Input,
    /// A graph output.
    Output,
    /// Produced and consumed inside the graph.
    Intermediate,
    /// A weight or the output of a `Constant` node (not in the arena).
    Constant,
    /// A float tensor inside a QDQ node unit (`graph.units`): the unit's kernel never
    /// materialises it, so it takes no arena bytes.
    Fused,
}

impl TensorKind {
    /// The table spelling: `input`, `output`, `intermediate`, `constant`.
    pub fn name(self) -> &'static str {
        match self {
            TensorKind::Input => "input",
            TensorKind::Output => "output",
            TensorKind::Intermediate => "intermediate",
            TensorKind::Constant => "constant",
            TensorKind::Fused => "fused",
        }
    }
}

/// One tensor the runtime holds.
#[derive(Clone, Debug)]
pub struct TensorLife {
    /// The value in the graph.
    pub value: ValueId,
    /// Its role.
    pub kind: TensorKind,
    /// Exact bytes; `None` for values without a fixed size (strings, sequences, optionals).
    pub bytes: Option<u64>,
    /// Step that produces it (0 for inputs and constants).
    pub first: usize,
    /// Last step that reads it (the last step for graph outputs).
    pub last: usize,
}

/// Kinds, sizes and lifetimes of every value of the graph under the execution `order`.
/// A QDQ node unit runs as one step spanning its nodes' steps: the tensors it writes live
/// from the span's start, those it reads until its end. A tensor whose size depends on an
/// unbound symbol is an input error listing the symbols.
pub fn lifetimes(graph: &Graph, order: &[NodeId]) -> Result<Vec<TensorLife>> {
    let step_of = crate::ir::steps_of(order, graph.nodes.len());
    // The steps a node's unit spans (its own step for a node outside every unit).
    let mut span: Vec<(usize, usize)> = step_of.iter().map(|&s| (s, s)).collect();
    let mut fused = vec![false; graph.values.len()];
    for unit in &graph.units {
        let steps = unit.nodes.iter().map(|&n| step_of[n]);
        let whole = (steps.clone().min().unwrap_or(0), steps.max().unwrap_or(0));
        for &n in &unit.nodes {
            span[n] = whole;
        }
        for &v in &unit.internal {
            fused[v] = true;
        }
    }
    // A unit reads its own copy of a shared DQ: what the DQ reads lives until the last unit
    // reading its output ends, and the DQ's output (planned when nodes outside units read
    // it) lives only for those nodes.
    let mut copy_readers: Vec<Vec<NodeId>> = vec![Vec::new(); graph.values.len()];
    for unit in &graph.units {
        let end = unit.nodes.iter().map(|&n| span[n].1).max().unwrap_or(0);
        for &dq in &unit.shared {
            span[dq].1 = span[dq].1.max(end);
            if let Some(v) = graph.nodes[dq].outputs.first().copied().flatten() {
                copy_readers[v].push(unit.op);
            }
        }
    }
    let last_step = order.len().saturating_sub(1);
    let mut unsized_tensors = Vec::new();
    let mut first_unsized = None;
    let mut symbols = Vec::new();
    let mut tensors = Vec::with_capacity(graph.values.len());
    for (id, value) in graph.values.iter().enumerate() {
        let Some(mut kind) = tensor_kind(graph, id) else {
            continue;
        };
        if fused[id] {
            kind = TensorKind::Fused;
        }
        // A scatter's parts are written by the runtime before the first step.
        let first = match value.producer {
            Some(p) if !graph.scatters.contains(&p) => span[p].0,
            _ => 0,
        };
        let mut last = value
            .consumers
            .iter()
            .filter(|c| !copy_readers[id].contains(c))
            .map(|&c| span[c].1)
            .max()
            .unwrap_or(first)
            .max(first);
        if value.is_output {
            last = last_step;
        }
        let bytes = match &value.ty {
            Some(ValueType::Tensor(t)) => match t.bytes() {
                Some(b) => Some(b),
                None if t.dtype.bits().is_none() => None,
                None => {
                    if !matches!(kind, TensorKind::Constant | TensorKind::Fused) {
                        let shape = t.shape.as_deref().unwrap_or(&[]);
                        for d in shape {
                            if let crate::ir::Dim::Symbol(s) = d
                                && !symbols.contains(s)
                            {
                                symbols.push(s.clone());
                            }
                        }
                        first_unsized.get_or_insert(id);
                        unsized_tensors.push(format!(
                            "'{}' ({})",
                            value.name,
                            value.ty.as_ref().expect("typed")
                        ));
                    }
                    None
                }
            },
            Some(_) => None,
            None if kind == TensorKind::Constant => None,
            None => {
                first_unsized.get_or_insert(id);
                unsized_tensors.push(format!("'{}' (type unknown)", value.name));
                None
            }
        };
        tensors.push(TensorLife {
            value: id,
            kind,
            bytes,
            first,
            last,
        });
    }
    if !unsized_tensors.is_empty() {
        let count = unsized_tensors.len();
        let shown = unsized_tensors
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        let more = if count > 3 {
            format!(" and {} more", count - 3)
        } else {
            String::new()
        };
        let origin = first_unsized
            .and_then(|v| graph.values[v].producer)
            .map(|p| format!(" (the first comes from {})", graph.nodes[p].label(p)))
            .unwrap_or_default();
        let hint = if symbols.is_empty() {
            format!(
                "their sizes depend on values known only at run time{origin}, so no static plan exists; \
                 fix the inputs that decide them with --input-shape NAME=AxB or --dim NAME=N"
            )
        } else {
            let flags: Vec<String> = symbols.iter().map(|s| format!("--dim {s}=N")).collect();
            format!(
                "unbound symbols: {}; bind them with {}",
                symbols.join(", "),
                flags.join(" ")
            )
        };
        bail_input!("cannot size {count} tensor(s): {shown}{more}; {hint}");
    }
    Ok(tensors)
}

/// What a value is to the runtime; `None` for outer-scope references (subgraphs only).
pub fn tensor_kind(graph: &Graph, id: ValueId) -> Option<TensorKind> {
    let value = &graph.values[id];
    Some(if value.kind == ValueKind::OuterScope {
        return None;
    } else if graph.is_model_constant(id) {
        TensorKind::Constant
    } else if value.is_output {
        TensorKind::Output
    } else if value.kind == ValueKind::Input {
        TensorKind::Input
    } else {
        TensorKind::Intermediate
    })
}
