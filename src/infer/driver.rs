//! Walks a graph in topological order, binds inputs and symbols, applies the rule of each node
//! and records the results (types, constants, shape values, disagreements with declarations).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use anyhow::{Result, anyhow};

use super::context::{DimsValues, NodeCtx, Output};
use super::{InferOptions, InferReport, constant_nodes, function, input_values, ops};
use crate::bail_input;
use crate::ir::{ConstData, Constant, Dim, Graph, Model, NodeId, Opsets, TensorType, ValueType};
use crate::onnx::proto::FunctionProto;

/// The opset assumed for the default domain when a model does not import it.
const LATEST_OPSET: i64 = 28;

/// What stays the same while inferring one model (or one function body).
pub(crate) struct Env<'a> {
    /// Operator-set versions in effect.
    pub opsets: &'a Opsets,
    /// The model's local functions.
    pub functions: &'a BTreeMap<(String, String), FunctionProto>,
    /// The user's options.
    pub options: &'a InferOptions,
    /// Function-call nesting depth.
    pub depth: usize,
}

/// Infers the whole model.
pub(super) fn infer_model(model: &mut Model, options: &InferOptions) -> Result<InferReport> {
    let mut report = InferReport::default();
    bind_inputs(&mut model.graph, options)?;
    input_values::bind_values(&mut model.graph, &options.input_values)?;
    let env = Env {
        opsets: &model.opsets,
        functions: &model.functions,
        options,
        depth: 0,
    };
    let mut dims = vec![None; model.graph.values.len()];
    infer_graph(&mut model.graph, &mut dims, &env, &mut report)?;
    Ok(report)
}

/// Applies `--input-shape` to the main graph's inputs.
fn bind_inputs(graph: &mut Graph, options: &InferOptions) -> Result<()> {
    for (name, shape) in &options.input_shapes {
        let Some(id) = graph.input_id(name) else {
            bail_input!("--input-shape names '{name}', which is not an input of the graph");
        };
        match &mut graph.values[id].ty {
            Some(ValueType::Tensor(t)) => t.shape = Some(crate::ir::known_shape(shape)),
            _ => bail_input!("--input-shape names '{name}', which is not a typed tensor input"),
        }
    }
    Ok(())
}

/// Infers a subgraph whose outer-scope values come from `parent`; `inputs` override the
/// subgraph's declared input types where given, `input_dims` gives their shape values (a
/// sequence's length, say). Returns what is known of its outputs.
#[allow(clippy::too_many_arguments)]
pub(crate) fn infer_subgraph(
    sub: &mut Graph,
    parent: &Graph,
    parent_dims: &DimsValues,
    inputs: &[Option<ValueType>],
    input_dims: &[Option<Vec<Dim>>],
    env: &Env,
    report: &mut InferReport,
) -> Result<Vec<Output>> {
    let mut dims = vec![None; sub.values.len()];
    for &o in &sub.outer_scope {
        if let Some(pid) = parent.value_id(&sub.values[o].name) {
            let from = &parent.values[pid];
            sub.values[o].ty = from.ty.clone();
            sub.values[o].constant = from.constant.clone();
            dims[o] = parent_dims.get(pid).cloned().flatten();
        }
    }
    for (&vid, ty) in sub.inputs.iter().zip(inputs) {
        let value = &mut sub.values[vid];
        if let Some(ty) = ty {
            value.ty = Some(ty.clone());
        } else if value.ty.is_none() {
            value.ty = value.declared.clone();
        }
        value.constant = None;
    }
    for (&vid, d) in sub.inputs.iter().zip(input_dims) {
        dims[vid] = d.clone();
    }
    infer_graph(sub, &mut dims, env, report)?;
    Ok(sub
        .outputs
        .iter()
        .map(|&o| Output {
            ty: sub.values[o].ty.clone(),
            constant: sub.values[o].constant.as_deref().cloned(),
            dims: dims.get(o).cloned().flatten(),
        })
        .collect())
}

/// Infers every node of `graph` in topological order.
pub(crate) fn infer_graph(
    graph: &mut Graph,
    dims: &mut DimsValues,
    env: &Env,
    report: &mut InferReport,
) -> Result<()> {
    bind_symbols(graph, &env.options.dims);
    for id in topo_order(graph)? {
        infer_node(graph, dims, id, env, report)?;
    }
    Ok(())
}

/// Replaces bound symbols in every type and declaration of the graph.
fn bind_symbols(graph: &mut Graph, bindings: &BTreeMap<String, i64>) {
    if bindings.is_empty() {
        return;
    }
    for value in &mut graph.values {
        for ty in [&mut value.ty, &mut value.declared].into_iter().flatten() {
            bind_type(ty, bindings);
        }
    }
}

fn bind_type(ty: &mut ValueType, bindings: &BTreeMap<String, i64>) {
    match ty {
        ValueType::Tensor(t) | ValueType::SparseTensor(t) => {
            for d in t.shape.iter_mut().flatten() {
                if let Dim::Symbol(s) = d
                    && let Some(&v) = bindings.get(s.as_str())
                {
                    *d = Dim::Known(v);
                }
            }
        }
        ValueType::Sequence(e) | ValueType::Optional(e) | ValueType::Map(_, e) => {
            bind_type(e, bindings)
        }
        ValueType::Opaque => {}
    }
}

/// Kahn's algorithm, taking the lowest stored index among the ready nodes.
fn topo_order(graph: &Graph) -> Result<Vec<NodeId>> {
    let n = graph.nodes.len();
    let mut indegree = vec![0usize; n];
    for value in &graph.values {
        if value.producer.is_some() {
            for &c in &value.consumers {
                indegree[c] += 1;
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<NodeId>> =
        (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(id)) = ready.pop() {
        order.push(id);
        for &out in graph.nodes[id].outputs.iter().flatten() {
            for &c in &graph.values[out].consumers {
                indegree[c] -= 1;
                if indegree[c] == 0 {
                    ready.push(Reverse(c));
                }
            }
        }
    }
    if order.len() < n {
        let on_cycle = node_on_cycle(graph, &indegree);
        bail_input!(
            "the graph has a cycle through {}",
            graph.nodes[on_cycle].label(on_cycle)
        );
    }
    Ok(order)
}

/// Walks back from an unfinished node through unfinished producers until a node repeats.
fn node_on_cycle(graph: &Graph, indegree: &[usize]) -> NodeId {
    let mut seen = vec![false; graph.nodes.len()];
    let mut at = indegree.iter().position(|&d| d > 0).unwrap_or(0);
    while !seen[at] {
        seen[at] = true;
        let node = &graph.nodes[at];
        let next = node
            .inputs
            .iter()
            .flatten()
            .chain(&node.captures)
            .filter_map(|&v| graph.values[v].producer)
            .find(|&p| indegree[p] > 0);
        match next {
            Some(p) => at = p,
            None => break,
        }
    }
    at
}

fn infer_node(
    graph: &mut Graph,
    dims: &mut DimsValues,
    id: NodeId,
    env: &Env,
    report: &mut InferReport,
) -> Result<()> {
    let mut subgraphs = std::mem::take(&mut graph.nodes[id].subgraphs);
    let node = &graph.nodes[id];
    let default_opset = if node.domain.is_empty() {
        LATEST_OPSET
    } else {
        1
    };
    let opset = env.opsets.version(&node.domain).unwrap_or(default_opset);
    let result = {
        let mut ctx = NodeCtx::new(graph, id, opset, dims, &mut subgraphs, env, report);
        run_rule(&mut ctx).map(|()| ctx.outputs)
    };
    graph.nodes[id].subgraphs = subgraphs;
    let outputs = result?;
    check_output_count(graph, id, &outputs)?;
    for (slot, out) in outputs.into_iter().enumerate() {
        let Some(vid) = graph.nodes[id].outputs[slot] else {
            continue;
        };
        record(graph, dims, id, slot, vid, out, (env.options, report))?;
    }
    constant_nodes::mark_folded(graph, id);
    Ok(())
}

fn run_rule(ctx: &mut NodeCtx) -> Result<()> {
    let node = ctx.node();
    if let Some(rule) = ops::rule(&node.domain, &node.op_type) {
        return rule(ctx);
    }
    if function::infer_call(ctx)? {
        return Ok(());
    }
    if ctx.env.options.trust_value_info {
        return trust_declared(ctx);
    }
    // The model's declared output types are a way out, when it declares them.
    let declared = node
        .outputs
        .iter()
        .flatten()
        .all(|&vid| ctx.graph.values[vid].declared.is_some());
    let hint = if declared && node.outputs.iter().flatten().next().is_some() {
        " (the model declares its output types: --trust-value-info uses them)"
    } else {
        ""
    };
    Err(anyhow::Error::new(crate::error::UnsupportedError(format!(
        "{}: no shape rule for this operator{hint}",
        ctx.label_with_domain()
    ))))
}

/// Takes the declared types of the node's outputs (the `trust_value_info` fallback).
fn trust_declared(ctx: &mut NodeCtx) -> Result<()> {
    let node = ctx.node();
    for (slot, out) in node.outputs.iter().enumerate() {
        let Some(vid) = *out else { continue };
        let value = &ctx.graph.values[vid];
        let Some(declared) = value.declared.clone() else {
            return Err(anyhow::Error::new(crate::error::UnsupportedError(format!(
                "{}: no shape rule for this operator and no declared type for output '{}'",
                ctx.label_with_domain(),
                value.name
            ))));
        };
        ctx.set(slot, declared);
    }
    let label = ctx.label();
    ctx.report.trusted.push(label);
    Ok(())
}

/// Refuses a node with more outputs than its operator defines. A rule types every output the
/// operator defines (and that the node has), so outputs left untyped after the last typed one
/// are outputs the operator does not have: a malformed model, not a bug of the rule. A gap
/// before a typed output stays an internal error (`record` reports it).
fn check_output_count(graph: &Graph, id: NodeId, outputs: &[Output]) -> Result<()> {
    let node = &graph.nodes[id];
    let defined = outputs
        .iter()
        .rposition(|o| o.ty.is_some())
        .map_or(0, |i| i + 1);
    let extra = node.outputs[defined.min(node.outputs.len())..]
        .iter()
        .flatten()
        .next();
    if let Some(&vid) = extra {
        bail_input!(
            "{}: {} outputs, but the operator defines {defined} (output '{}' is extra)",
            node.label(id),
            node.outputs.iter().flatten().count(),
            graph.values[vid].name
        );
    }
    Ok(())
}

/// Stores a rule's result for one output value and compares it with the declaration. Typed
/// at the data-dependent bounds, the contents of a count-dependent value are dropped; typed
/// otherwise, a value whose contents are not known is noted in the report.
fn record(
    graph: &mut Graph,
    dims: &mut DimsValues,
    node: NodeId,
    slot: usize,
    vid: usize,
    out: Output,
    (options, report): (&InferOptions, &mut InferReport),
) -> Result<()> {
    let Some(ty) = out.ty else {
        let n = &graph.nodes[node];
        return Err(anyhow!(
            "internal error: the rule for {} set no type for output {slot}",
            n.label(node)
        ));
    };
    let mut constant = out.constant;
    let mut out_dims = out.dims;
    if constant.is_none()
        && let Some(d) = &out_dims
    {
        constant = dims_to_constant(&ty, d);
    }
    let name = &graph.values[vid].name;
    if options.data_dependent_at_bound {
        if options.count_dependent.contains(name) {
            constant = None;
            out_dims = None;
        }
    } else if constant.is_none()
        && !out_dims
            .as_ref()
            .is_some_and(|d| d.iter().all(|d| d.expr().is_some()))
    {
        report.contents_unknown.insert(name.clone());
    }
    let value = &mut graph.values[vid];
    if let Some(declared) = &value.declared
        && disagrees(declared, &ty)
    {
        report.disagreements.push(format!(
            "'{}' ({}): declared {declared}, inferred {ty}",
            value.name,
            graph.nodes[node].label(node)
        ));
    }
    let value = &mut graph.values[vid];
    value.ty = Some(ty);
    value.constant = constant.map(std::sync::Arc::new);
    if vid >= dims.len() {
        dims.resize(vid + 1, None);
    }
    dims[vid] = if value.constant.is_none() {
        out_dims
    } else {
        None
    };
    Ok(())
}

/// A shape value whose dimensions are all known, as a constant of the output's type.
fn dims_to_constant(ty: &ValueType, dims: &[Dim]) -> Option<Constant> {
    let t = ty.as_tensor()?;
    let values: Vec<i64> = dims.iter().map(Dim::value).collect::<Option<_>>()?;
    let shape: Vec<usize> = match t.shape.as_deref()? {
        [] if values.len() == 1 => vec![],
        [_] => vec![values.len()],
        _ => return None,
    };
    let data = ndarray::ArrayD::from_shape_vec(shape, values).ok()?;
    Some(Constant {
        dtype: t.dtype,
        data: ConstData::Int(data),
    })
}

/// True when a declared type contradicts an inferred one (dtype, rank or a known dim).
fn disagrees(declared: &ValueType, inferred: &ValueType) -> bool {
    match (declared, inferred) {
        (ValueType::Tensor(a), ValueType::Tensor(b))
        | (ValueType::SparseTensor(a), ValueType::SparseTensor(b)) => tensor_disagrees(a, b),
        (ValueType::Sequence(a), ValueType::Sequence(b))
        | (ValueType::Optional(a), ValueType::Optional(b)) => disagrees(a, b),
        (ValueType::Map(ka, a), ValueType::Map(kb, b)) => ka != kb || disagrees(a, b),
        (ValueType::Opaque, ValueType::Opaque) => false,
        _ => true,
    }
}

fn tensor_disagrees(a: &TensorType, b: &TensorType) -> bool {
    if a.dtype != b.dtype {
        return true;
    }
    match (&a.shape, &b.shape) {
        (Some(x), Some(y)) => {
            x.len() != y.len()
                || x.iter().zip(y).any(|(p, q)| match (p, q) {
                    (Dim::Known(p), Dim::Known(q)) => p != q,
                    _ => false,
                })
        }
        _ => false,
    }
}
