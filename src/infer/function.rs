//! Calls of model-local functions: the body is instantiated for the call (attribute references
//! resolved, omitted optional inputs removed), lowered and inferred with the call's input types.

use std::collections::HashSet;

use anyhow::Result;

use super::context::NodeCtx;
use super::driver::{self, Env};
use crate::ir::{Graph, Opsets};
use crate::onnx::proto::{AttributeProto, FunctionProto, GraphProto, NodeProto, ValueInfoProto};

/// Function calls nested deeper than this are rejected (recursive functions).
const MAX_DEPTH: usize = 64;

/// Infers the node as a call of a model-local function; `false` when no function matches.
pub(crate) fn infer_call(ctx: &mut NodeCtx) -> Result<bool> {
    let node = ctx.node();
    let env = ctx.env;
    let key = (node.domain.clone(), node.op_type.clone());
    let function = env.functions.get(&key).or_else(|| {
        node.domain
            .is_empty()
            .then(|| {
                env.functions
                    .get(&("ai.onnx".to_string(), node.op_type.clone()))
            })
            .flatten()
    });
    let Some(function) = function else {
        return Ok(false);
    };
    if env.depth >= MAX_DEPTH {
        return Err(ctx.error("function calls nest too deeply (recursive function?)"));
    }
    let proto = instantiate(function, ctx);
    let mut body = Graph::from_proto(&proto)
        .map_err(|e| e.context(format!("in the body of function '{}'", function.name())))?;
    let mut dims = vec![None; body.values.len()];
    for (i, name) in function.input.iter().enumerate() {
        let (Some(from), Some(vid)) = (ctx.input_value(i), body.value_id(name)) else {
            continue;
        };
        let value = &mut body.values[vid];
        value.ty = from.ty.clone();
        value.constant = from.constant.clone();
        if let Some(Some(id)) = node.inputs.get(i) {
            dims[vid] = ctx.dims.get(*id).cloned().flatten();
        }
    }
    let mut opsets = env.opsets.clone();
    opsets
        .0
        .extend(Opsets::from_proto(&function.opset_import).0);
    let inner = Env {
        opsets: &opsets,
        functions: env.functions,
        options: env.options,
        depth: env.depth + 1,
    };
    driver::infer_graph(&mut body, &mut dims, &inner, ctx.report).map_err(|e| {
        e.context(format!(
            "in the body of function '{}' called by {}",
            function.name(),
            ctx.label()
        ))
    })?;
    for (slot, &vid) in body.outputs.iter().enumerate() {
        let value = &body.values[vid];
        if let Some(ty) = &value.ty {
            ctx.set(slot, ty.clone());
        }
        if let Some(c) = &value.constant {
            ctx.outputs[slot].constant = Some((**c).clone());
        }
        if let Some(d) = dims.get(vid).cloned().flatten() {
            ctx.set_dims_value(slot, d);
        }
    }
    Ok(true)
}

/// The function body as a graph for this call.
fn instantiate(function: &FunctionProto, ctx: &NodeCtx) -> GraphProto {
    let omitted: HashSet<&str> = function
        .input
        .iter()
        .enumerate()
        .filter(|(i, _)| !ctx.has_input(*i))
        .map(|(_, name)| name.as_str())
        .collect();
    let resolve = |attr: &AttributeProto| -> Option<AttributeProto> {
        let reference = attr.ref_attr_name();
        if reference.is_empty() {
            return Some(attr.clone());
        }
        let found = ctx.attr(reference).or_else(|| {
            function
                .attribute_proto
                .iter()
                .find(|a| a.name() == reference)
        })?;
        let mut a = found.clone();
        a.name = attr.name.clone();
        Some(a)
    };
    let node = |n: &NodeProto| -> NodeProto {
        let mut n = n.clone();
        for input in &mut n.input {
            if omitted.contains(input.as_str()) {
                input.clear();
            }
        }
        n.attribute = n.attribute.iter().filter_map(&resolve).collect();
        n
    };
    let info = |name: &String| ValueInfoProto {
        name: Some(name.clone()),
        ..Default::default()
    };
    GraphProto {
        name: function.name.clone(),
        node: function.node.iter().map(node).collect(),
        input: function
            .input
            .iter()
            .filter(|n| !omitted.contains(n.as_str()))
            .map(info)
            .collect(),
        output: function.output.iter().map(info).collect(),
        ..Default::default()
    }
}
