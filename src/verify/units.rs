//! QDQ node units: re-derived from the shared rule table (`units::table`) by a matcher of
//! the verifier's own, then checked: each unit's nodes run contiguously, its float tensors
//! are read by nothing outside it.

use std::collections::HashMap;

use crate::emit::Table;
use crate::ir::{DType, Graph, NodeId, ValueId};
use crate::liveness::rules::{ReuseRule, node_rule};
use crate::units::table::{self, DqInputs, QOutputs, Types};

/// The units the table's options call for, as the verifier derives them.
#[derive(Default)]
pub struct UnitFacts {
    /// For each node of a unit, the steps its unit spans.
    pub span: HashMap<NodeId, (usize, usize)>,
    /// For each float tensor inside a unit, the unit's name.
    pub internal: HashMap<ValueId, String>,
    /// For each shared DQ's output, the unit operators reading their own copy of that DQ
    /// instead of it.
    pub copies: HashMap<ValueId, Vec<NodeId>>,
    /// The integer output of each unit that only reinterprets bytes (a Reshape-like operator
    /// whose Q and DQ share scale and zero point), with the integer input its DQ reads: the
    /// output may be a full alias of that input.
    pub reinterprets: HashMap<ValueId, ValueId>,
}

/// One derived unit.
struct Derived {
    name: String,
    op: NodeId,
    nodes: Vec<NodeId>,
    /// DQs whose output other units read too (each unit holds a copy, as onnxruntime's).
    shared: Vec<NodeId>,
    internal: Vec<ValueId>,
    /// (integer output, integer input) of a unit that only reinterprets bytes.
    reinterprets: Option<(ValueId, ValueId)>,
}

/// The units of the graph: every match, each reading its own copy of a DQ that other nodes
/// read too. A DQ output that a node outside every unit reads is not internal to the units
/// holding copies; a unit left with no internal tensor runs as written. Repeated until no
/// unit is dropped.
fn derive_all(graph: &Graph) -> Vec<Derived> {
    let mut units: Vec<Derived> = (0..graph.nodes.len())
        .filter_map(|n| derive(graph, n))
        .collect();
    loop {
        let ops: std::collections::HashSet<NodeId> = units.iter().map(|u| u.op).collect();
        for u in &mut units {
            for &dq in &u.shared {
                let out = graph.nodes[dq].outputs[0].expect("a DQ output");
                if graph.values[out].consumers.iter().any(|c| !ops.contains(c)) {
                    u.internal.retain(|&v| v != out);
                }
            }
        }
        let before = units.len();
        units.retain(|u| !u.internal.is_empty());
        if units.len() == before {
            return units;
        }
    }
}

/// Derives the units when the table says `qdq: units` and checks their placement in the
/// schedule (`steps`: each node's step).
pub fn check_units(
    graph: &Graph,
    table: &Table,
    steps: &[usize],
    problems: &mut Vec<String>,
) -> UnitFacts {
    let mut facts = UnitFacts::default();
    let has_qdq = graph
        .nodes
        .iter()
        .any(|n| table::is_q(n) || table::is_dq(n));
    match (has_qdq, table.options.qdq.as_deref()) {
        (true, Some("units" | "literal")) | (false, None) => {}
        (true, other) => problems.push(format!(
            "options.qdq is {other:?}; a model with Q/DQ nodes needs \"units\" or \"literal\""
        )),
        (false, Some(other)) => problems.push(format!(
            "options.qdq is \"{other}\" for a model without Q/DQ nodes"
        )),
    }
    if table.options.qdq.as_deref() != Some("units") {
        return facts;
    }
    let units = derive_all(graph);
    // Each unit by its operator (one unit per operator node).
    let by_op: HashMap<NodeId, &Derived> = units.iter().map(|u| (u.op, u)).collect();
    for unit in &units {
        let at: Vec<usize> = unit.nodes.iter().map(|&n| steps[n]).collect();
        let (lo, hi) = (
            at.iter().copied().min().unwrap_or(0),
            at.iter().copied().max().unwrap_or(0),
        );
        if hi - lo + 1 != unit.nodes.len() {
            problems.push(format!(
                "the nodes of QDQ unit '{}' run at steps {at:?}, not one after another",
                unit.name
            ));
        }
        for &v in &unit.internal {
            let value = &graph.values[v];
            // A shared DQ's output is read by the units holding a copy of it.
            let holds = |c: &NodeId| {
                unit.nodes.contains(c) || by_op.get(c).is_some_and(|u| u.internal.contains(&v))
            };
            let outside = value.consumers.iter().find(|c| !holds(c));
            if let Some(&c) = outside {
                problems.push(format!(
                    "float tensor '{}' of QDQ unit '{}' is read outside it by {}",
                    value.name,
                    unit.name,
                    graph.nodes[c].label(c)
                ));
            }
            facts.internal.entry(v).or_insert_with(|| unit.name.clone());
        }
        for &n in &unit.nodes {
            facts.span.insert(n, (lo, hi));
        }
        if let Some((out, input)) = unit.reinterprets {
            facts.reinterprets.insert(out, input);
        }
    }
    // A shared DQ runs at its own step and keeps its input until its last reader's unit ends.
    for unit in &units {
        let end = unit.nodes.iter().map(|&n| steps[n]).max().unwrap_or(0);
        for &dq in &unit.shared {
            let span = facts.span.entry(dq).or_insert((steps[dq], steps[dq]));
            span.1 = span.1.max(end);
            let out = graph.nodes[dq].outputs[0].expect("a DQ output");
            facts.copies.entry(out).or_default().push(unit.op);
        }
    }
    facts
}

fn elem(graph: &Graph, v: Option<ValueId>) -> Option<DType> {
    graph.values[v?].tensor_type().map(|t| t.dtype)
}

/// The unit formed around operator `op`, per the rule table.
fn derive(graph: &Graph, op: NodeId) -> Option<Derived> {
    let node = &graph.nodes[op];
    let rule = table::rule_for(node)?;
    if !table::attributes_allow(node) {
        return None;
    }
    let mut dq_nodes = Vec::new();
    let mut shared = Vec::new();
    let mut input_types = Vec::new();
    for (slot, input) in node.inputs.iter().enumerate() {
        let from_dq = input.and_then(|v| {
            let value = &graph.values[v];
            let p = value.producer?;
            if !table::is_dq(&graph.nodes[p]) || value.is_output {
                return None;
            }
            if value.consumers.iter().any(|&c| c != op) {
                shared.push(p);
            }
            Some(p)
        });
        let needed = match rule.dq {
            DqInputs::All => input.is_some(),
            DqInputs::Slots(s) => s.contains(&slot),
        };
        if needed != from_dq.is_some() || dq_nodes.contains(&from_dq) && from_dq.is_some() {
            return None;
        }
        input_types.push(from_dq.map(|d| elem(graph, graph.nodes[d].inputs[0])));
        dq_nodes.push(from_dq);
    }
    if let DqInputs::Slots(s) = rule.dq
        && s.iter().any(|&slot| slot >= node.inputs.len())
    {
        return None;
    }
    if input_types.iter().any(|t| matches!(t, Some(None))) {
        return None;
    }
    let input_types: Vec<Option<DType>> = input_types.into_iter().map(Option::flatten).collect();
    let outputs: Vec<ValueId> = node.outputs.iter().flatten().copied().collect();
    let mut q_nodes = Vec::new();
    for &v in &outputs {
        let value = &graph.values[v];
        if value.consumers.len() == 1 && !value.is_output {
            let c = value.consumers[0];
            if table::is_q(&graph.nodes[c]) && graph.nodes[c].inputs.first() == Some(&Some(v)) {
                q_nodes.push(c);
            }
        }
    }
    let all_q = !outputs.is_empty() && q_nodes.len() == outputs.len();
    let no_q = outputs.iter().all(|&v| {
        graph.values[v]
            .consumers
            .iter()
            .all(|&c| !table::is_q(&graph.nodes[c]))
    });
    if !(all_q || rule.q == QOutputs::Optional && no_q) {
        return None;
    }
    if !all_q {
        q_nodes.clear();
    }
    let mut output_types = Vec::new();
    for &q in &q_nodes {
        output_types.push(elem(
            graph,
            graph.nodes[q].outputs.first().copied().flatten(),
        )?);
    }
    if !table::types_agree(rule.types, &input_types, &output_types) {
        return None;
    }
    let dq_list: Vec<NodeId> = dq_nodes.into_iter().flatten().collect();
    let own: Vec<NodeId> = dq_list
        .iter()
        .copied()
        .filter(|d| !shared.contains(d))
        .collect();
    if rule.types == Types::SameParams {
        let dq = *dq_list.first()?;
        for &q in &q_nodes {
            for slot in [1, 2] {
                let a = graph.nodes[dq].inputs.get(slot).copied().flatten();
                let b = graph.nodes[q].inputs.get(slot).copied().flatten();
                let same = a == b
                    || a.zip(b).is_some_and(|(a, b)| {
                        graph.values[a].constant.is_some()
                            && graph.values[a].constant == graph.values[b].constant
                    });
                if !same {
                    return None;
                }
            }
        }
    }
    let mut internal: Vec<ValueId> = dq_list
        .iter()
        .filter_map(|&d| graph.nodes[d].outputs.first().copied().flatten())
        .collect();
    if all_q {
        internal.extend(outputs);
    }
    // A Reshape-like operator between a DQ and a Q of the same scale and zero point moves no
    // byte: its integer output is its integer input, reinterpreted.
    let reinterprets = match (rule.types, q_nodes.as_slice(), dq_list.first()) {
        (Types::SameParams, [q], Some(&dq)) if node_rule(graph, node) == ReuseRule::Alias => {
            let out = graph.nodes[*q].outputs.first().copied().flatten();
            out.zip(graph.nodes[dq].inputs.first().copied().flatten())
        }
        _ => None,
    };
    let mut nodes = own;
    nodes.push(op);
    nodes.extend(q_nodes);
    Some(Derived {
        name: match node.name.is_empty() {
            true => format!("#{op}"),
            false => node.name.clone(),
        },
        op,
        nodes,
        shared,
        internal,
        reinterprets,
    })
}
