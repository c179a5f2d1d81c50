//! S5's levels: a node holding subgraphs (If branches, Loop and Scan bodies) or calling a
//! model-local function is planned from the inside out. Each body is planned on its own (its tensors' lifetimes in its own steps,
//! its nested bodies as workspaces at their nodes' steps); the node then needs a workspace as
//! large as its largest body, live at the node's step in the enclosing level.

use std::time::Duration;

use super::function::call_body;
use crate::ir::{Graph, Model, NodeId};
use crate::liveness::{LivenessOptions, analyse};
use crate::plan::{self, Buffer, PlanOptions, Problem};
use crate::schedule::topological_order;

/// The planned subgraphs of one node.
#[derive(Clone, Debug, PartialEq)]
pub struct Workspace {
    /// The node (index in its graph).
    pub node: NodeId,
    /// Bytes the node needs while it runs: its largest body.
    pub bytes: u64,
    /// One plan per subgraph attribute.
    pub bodies: Vec<Body>,
}

/// The plan of one subgraph, offsets relative to the workspace start.
#[derive(Clone, Debug, PartialEq)]
pub struct Body {
    /// The attribute holding it (`then_branch`, `body`, ...).
    pub attribute: String,
    /// Bytes its plan needs.
    pub bytes: u64,
    /// Its tensors: (name, bytes, first step, last step, offset).
    pub tensors: Vec<(String, u64, usize, usize, u64)>,
    /// Its own nodes' workspaces: (workspace, step in the body, offset).
    pub nested: Vec<(Workspace, usize, u64)>,
}

/// Prefix of the attribute name recorded for a function call's body.
pub const FUNCTION_BODY: &str = "function:";

/// Plans every node of `graph` that holds subgraphs or calls one of `model`'s functions (its
/// body is recorded under the attribute `function:NAME`); `alignment_of(node)` is the
/// alignment its unit needs. A body whose sizes are not all known is reported in the second
/// list (node label: reason) and left unplanned.
pub fn plan_levels(
    model: &Model,
    graph: &Graph,
    options: LivenessOptions,
    alignment_of: &dyn Fn(NodeId) -> u64,
) -> (Vec<Workspace>, Vec<String>) {
    let mut planned = Vec::new();
    let mut skipped = Vec::new();
    for (id, node) in graph.nodes.iter().enumerate() {
        let alignment = alignment_of(id).max(1);
        let options = LivenessOptions {
            alignment,
            ..options
        };
        let bodies: Result<Vec<Body>, String> = match call_body(model, graph, node) {
            Some(body) => body.and_then(|g| {
                let name = format!("{FUNCTION_BODY}{}", node.op_type);
                // The call's inputs and outputs are the caller's tensors: not in the body.
                let inner = LivenessOptions {
                    include_io: false,
                    ..options
                };
                Ok(vec![plan_body(model, &g, &name, inner)?])
            }),
            None if node.subgraphs.is_empty() => continue,
            None => node
                .subgraphs
                .iter()
                .filter(|s| s.ruled_out.is_none())
                .map(|s| plan_body(model, &s.graph, &s.attribute, options))
                .collect(),
        };
        match bodies {
            Ok(bodies) => planned.push(Workspace {
                node: id,
                bytes: bodies.iter().map(|b| b.bytes).max().unwrap_or(0),
                bodies,
            }),
            Err(e) => skipped.push(format!("{}: {e}", node.label(id))),
        }
    }
    (planned, skipped)
}

fn plan_body(
    model: &Model,
    body: &Graph,
    attribute: &str,
    options: LivenessOptions,
) -> Result<Body, String> {
    let order = topological_order(body).map_err(|e| format!("{e:#}"))?;
    let liveness = analyse(body, order.clone(), options).map_err(|e| format!("{e:#}"))?;
    let step_of = crate::ir::steps_of(&order, body.nodes.len());
    let (inner, skipped) = plan_levels(model, body, options, &|_| options.alignment);
    if let Some(reason) = skipped.first() {
        return Err(reason.clone());
    }
    let alignment = options.alignment.max(1);
    let mut buffers: Vec<Buffer> = liveness
        .buffers
        .iter()
        .map(|b| Buffer {
            size: b.bytes.next_multiple_of(alignment),
            start: b.first as u32,
            end: b.last as u32 + 1,
        })
        .collect();
    buffers.extend(inner.iter().map(|w| {
        let step = step_of[w.node] as u32;
        Buffer {
            size: w.bytes.next_multiple_of(alignment),
            start: step,
            end: step + 1,
        }
    }));
    let problem = Problem { buffers, alignment };
    let options = PlanOptions {
        budget: plan::Budget::within(Duration::from_millis(200)),
        ..PlanOptions::default()
    };
    let solution = plan::solve(&problem, &options).map_err(|e| e.to_string())?;
    plan::verify(&problem, &solution).map_err(|e| format!("bug: invalid body plan: {e}"))?;
    let tensors = liveness
        .tensors
        .iter()
        .enumerate()
        .filter_map(|(t, life)| {
            let b = liveness.buffer_of[t]?;
            let offset = solution.offsets[b] + liveness.offset_in_buffer(t)?;
            let name = body.values[life.value].name.clone();
            Some((name, life.bytes.unwrap_or(0), life.first, life.last, offset))
        })
        .collect();
    let base = liveness.buffers.len();
    let nested = inner
        .into_iter()
        .enumerate()
        .map(|(k, w)| {
            let step = step_of[w.node];
            (w, step, solution.offsets[base + k])
        })
        .collect();
    Ok(Body {
        attribute: attribute.to_string(),
        bytes: solution.arena,
        tensors,
        nested,
    })
}
