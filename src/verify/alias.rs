//! Legality of `alias_of` and `inplace_of` claims, and the alias classes they form.

use std::collections::HashMap;

use crate::emit::Table;
use crate::ir::{Graph, Node, concrete};
use crate::liveness::rules::{ReuseRule, node_rule};

/// Checks every sharing claim; returns, per table entry, the id of its alias class (entries
/// linked by `alias_of` hold the same bytes by construction).
pub fn check_claims(
    graph: &Graph,
    table: &Table,
    index: &HashMap<&str, usize>,
    steps: &[usize],
    problems: &mut Vec<String>,
) -> Vec<usize> {
    let mut parent: Vec<usize> = (0..table.tensors.len()).collect();
    for (a, entry) in table.tensors.iter().enumerate() {
        if let Some(of) = &entry.alias_of {
            match index.get(of.as_str()) {
                Some(&b) => {
                    if let Err(e) = check_alias(graph, table, a, b) {
                        problems.push(format!("tensor '{}' alias_of '{of}': {e}", entry.name));
                    }
                    let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                    parent[ra] = rb;
                }
                None => problems.push(format!("tensor '{}' aliases unknown '{of}'", entry.name)),
            }
        }
    }
    let classes: Vec<usize> = (0..parent.len()).map(|i| find(&mut parent, i)).collect();
    for (a, entry) in table.tensors.iter().enumerate() {
        if let Some(of) = &entry.inplace_of {
            match index.get(of.as_str()) {
                Some(&x) => {
                    if let Err(e) = check_inplace(graph, table, index, &classes, steps, a, x) {
                        problems.push(format!("tensor '{}' inplace_of '{of}': {e}", entry.name));
                    }
                }
                None => problems.push(format!("tensor '{}' overwrites unknown '{of}'", entry.name)),
            }
        }
    }
    classes
}

fn find(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

fn producer<'g>(graph: &'g Graph, name: &str) -> Option<&'g Node> {
    graph.value(name)?.producer.map(|p| &graph.nodes[p])
}

fn input_names<'g>(graph: &'g Graph, node: &Node) -> Vec<Option<&'g str>> {
    node.inputs
        .iter()
        .map(|v| v.map(|v| graph.values[v].name.as_str()))
        .collect()
}

fn output_names<'g>(graph: &'g Graph, node: &Node) -> Vec<Option<&'g str>> {
    node.outputs
        .iter()
        .map(|v| v.map(|v| graph.values[v].name.as_str()))
        .collect()
}

fn check_alias(graph: &Graph, table: &Table, a: usize, b: usize) -> Result<(), String> {
    let (ea, eb) = (&table.tensors[a], &table.tensors[b]);
    let (Some(oa), Some(ob)) = (ea.offset, eb.offset) else {
        return Err("both tensors must be placed".into());
    };
    if ea.arena != eb.arena {
        return Err("different arenas".into());
    }
    match ea.alias_offset {
        None => {
            let node = producer(graph, &ea.name).ok_or("not produced by a node")?;
            if node_rule(graph, node) != ReuseRule::Alias {
                return Err(format!("{} does not alias its input", node.op_type));
            }
            if input_names(graph, node).first().copied().flatten() != Some(eb.name.as_str()) {
                return Err("not the data input of its producer".into());
            }
            if oa != ob || ea.bytes != eb.bytes {
                return Err("a full alias must have the same offset and size".into());
            }
            Ok(())
        }
        Some(k) => {
            if oa != ob + k {
                return Err(format!("offset {oa} is not {ob} + alias_offset {k}"));
            }
            let expected = slice_offset_concat(graph, &ea.name, &eb.name)
                .or_else(|| slice_offset_split(graph, &ea.name, &eb.name))
                .ok_or("no Concat or Split makes it a contiguous slice")?;
            if expected != k {
                return Err(format!("the slice starts at byte {expected}, not {k}"));
            }
            Ok(())
        }
    }
}

/// Byte offset of `part` inside `whole` when `whole` is the Concat of `part` and others.
fn slice_offset_concat(graph: &Graph, part: &str, whole: &str) -> Option<u64> {
    let node = producer(graph, whole)?;
    if node.op_type != "Concat" || !node.domain.is_empty() {
        return None;
    }
    let inputs = input_names(graph, node);
    let k = inputs.iter().position(|n| *n == Some(part))?;
    contiguous_offset(graph, node, whole, &inputs, k)
}

/// Byte offset of `part` inside `whole` when `part` is a Split output of `whole`.
fn slice_offset_split(graph: &Graph, part: &str, whole: &str) -> Option<u64> {
    let node = producer(graph, part)?;
    if node.op_type != "Split" || !node.domain.is_empty() {
        return None;
    }
    if input_names(graph, node).first().copied().flatten() != Some(whole) {
        return None;
    }
    let outputs = output_names(graph, node);
    let k = outputs.iter().position(|n| *n == Some(part))?;
    contiguous_offset(graph, node, whole, &outputs, k)
}

/// Start byte of part `k` of `parts`, laid out along the node's axis inside `whole`; `None`
/// unless every dimension before the axis is 1 (the only layout where slices are contiguous).
fn contiguous_offset(
    graph: &Graph,
    node: &Node,
    whole: &str,
    parts: &[Option<&str>],
    k: usize,
) -> Option<u64> {
    let ty = graph.value(whole)?.tensor_type()?;
    let shape = concrete(ty.shape.as_ref()?)?;
    let rank = shape.len() as i64;
    let axis = node.attr_int("axis").unwrap_or(0);
    let axis = usize::try_from(if axis < 0 { axis + rank } else { axis }).ok()?;
    if axis >= shape.len() || shape[..axis].iter().any(|&d| d != 1) {
        return None;
    }
    let bits = u64::from(ty.dtype.bits()?);
    let row: u64 = shape[axis + 1..].iter().map(|&d| d as u64).product();
    let mut before = 0u64;
    let mut total = 0u64;
    for (i, name) in parts.iter().enumerate() {
        let t = graph.value((*name)?)?.tensor_type()?;
        let extent = concrete(t.shape.as_ref()?)?.get(axis).copied()? as u64;
        if i < k {
            before += extent;
        }
        total += extent;
    }
    if total != shape[axis] as u64 || !(before * row * bits).is_multiple_of(8) {
        return None;
    }
    Some(before * row * bits / 8)
}

fn check_inplace(
    graph: &Graph,
    table: &Table,
    index: &HashMap<&str, usize>,
    classes: &[usize],
    steps: &[usize],
    a: usize,
    x: usize,
) -> Result<(), String> {
    let (ea, ex) = (&table.tensors[a], &table.tensors[x]);
    let value = graph.value(&ea.name).ok_or("not in the model")?;
    let node_id = value.producer.ok_or("not produced by a node")?;
    let node = &graph.nodes[node_id];
    let ReuseRule::InPlace(slots) = node_rule(graph, node) else {
        return Err(format!("{} cannot run in place", node.op_type));
    };
    let inputs = input_names(graph, node);
    if !slots
        .iter()
        .any(|&s| inputs.get(s).copied().flatten() == Some(ex.name.as_str()))
    {
        return Err("not an overwritable input of its producer".into());
    }
    if ex.kind != "intermediate" {
        return Err(format!("cannot overwrite a graph {}", ex.kind));
    }
    if ea.offset != ex.offset || ea.arena != ex.arena || ea.offset.is_none() {
        return Err("must have the overwritten tensor's arena and offset".into());
    }
    if ea.bytes != ex.bytes {
        return Err("sizes differ".into());
    }
    let step = steps[node_id];
    for (i, e) in table.tensors.iter().enumerate() {
        if classes[i] == classes[x] && e.last > step {
            return Err(format!(
                "'{}', which holds the same bytes, is read after step {step}",
                e.name
            ));
        }
    }
    for name in inputs.iter().flatten() {
        if *name != ex.name
            && let Some(&i) = index.get(name)
            && classes[i] == classes[x]
        {
            return Err(format!(
                "input '{name}' of the same node shares the overwritten bytes"
            ));
        }
    }
    Ok(())
}
