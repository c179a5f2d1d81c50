//! Legality of `alias_of` and `inplace_of` claims, and the alias classes they form.

use std::collections::HashMap;

use super::strided::{check_strides, layout, span};
use super::units::UnitFacts;
use crate::emit::{Run, Table, offset_at};
use crate::ir::{Graph, Node, concrete};
use crate::liveness::rules::{ReuseRule, node_rule};

/// Checks every sharing claim; returns, per table entry, the id of its alias class (entries
/// linked by `alias_of` hold the same bytes by construction).
pub fn check_claims(
    graph: &Graph,
    table: &Table,
    index: &HashMap<&str, usize>,
    (steps, runs, units): (&[usize], &[Vec<Run>], &UnitFacts),
    problems: &mut Vec<String>,
) -> Vec<usize> {
    let ctx = Context {
        graph,
        table,
        index,
        steps,
        runs,
        units,
    };
    let mut parent: Vec<usize> = (0..table.tensors.len()).collect();
    for (a, entry) in table.tensors.iter().enumerate() {
        if let Some(of) = &entry.alias_of {
            match index.get(of.as_str()) {
                Some(&b) => {
                    if let Err(e) = check_alias(&ctx, a, b) {
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
                    if let Err(e) = check_inplace(&ctx, &classes, a, x) {
                        problems.push(format!("tensor '{}' inplace_of '{of}': {e}", entry.name));
                    }
                }
                None => problems.push(format!("tensor '{}' overwrites unknown '{of}'", entry.name)),
            }
        }
    }
    classes
}

/// What the claim checks read: the model, the table, names to entries, node steps, and
/// each entry's runs (where it is over time).
#[derive(Clone, Copy)]
struct Context<'a> {
    graph: &'a Graph,
    table: &'a Table,
    index: &'a HashMap<&'a str, usize>,
    steps: &'a [usize],
    runs: &'a [Vec<Run>],
    units: &'a UnitFacts,
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

/// The claim is checked where both tensors exist (the later one's first step); transfers
/// move them together afterwards (see `modes::check_moves_together`).
fn check_alias(ctx: &Context, a: usize, b: usize) -> Result<(), String> {
    let Context {
        graph,
        table,
        runs,
        units,
        ..
    } = *ctx;
    let (ea, eb) = (&table.tensors[a], &table.tensors[b]);
    let step = ea.first.max(eb.first);
    let (Some(oa), Some(ob)) = (offset_at(&runs[a], step), offset_at(&runs[b], step)) else {
        return Err("both tensors must be placed".into());
    };
    if ea.arena != eb.arena {
        return Err("different arenas".into());
    }
    if ea.strides.is_some() || eb.strides.is_some() {
        return check_strided_alias(ctx, a, b, oa, ob);
    }
    match ea.alias_offset {
        None => {
            let node = producer(graph, &ea.name).ok_or("not produced by a node")?;
            // A QDQ unit that only reinterprets bytes aliases the integer input its DQ reads;
            // any other full alias is its producer's output over its data input.
            match graph.value_id(&ea.name).and_then(|v| units.reinterprets.get(&v)) {
                Some(&input) if graph.values[input].name != eb.name => {
                    return Err("not the integer input of its QDQ unit".into());
                }
                Some(_) => {}
                None if node_rule(graph, node) != ReuseRule::Alias => {
                    return Err(format!("{} does not alias its input", node.op_type));
                }
                None if input_names(graph, node).first().copied().flatten()
                    != Some(eb.name.as_str()) =>
                {
                    return Err("not the data input of its producer".into());
                }
                None => {}
            }
            if oa != ob || ea.bytes != eb.bytes {
                return Err("a full alias must have the same offset and size".into());
            }
            Ok(())
        }
        Some(k) => {
            check_alias_offset(oa, ob, k)?;
            let expected = slice_offset_concat(graph, &ea.name, &eb.name)
                .or_else(|| slice_offset_split(graph, &ea.name, &eb.name))
                .or_else(|| slice_offset_view(graph, &ea.name, &eb.name))
                .ok_or("no Concat, Split, Slice or Gather makes it a contiguous slice")?;
            if expected != k {
                return Err(format!("the slice starts at byte {expected}, not {k}"));
            }
            Ok(())
        }
    }
}

/// An alias where either side is a strided view: a full alias keeps the layout (same shape
/// and strides); a slice alias is a part of the Concat making its parent, laid out with the
/// parent's strides from the part's start along the axis, and lies inside the parent.
fn check_strided_alias(ctx: &Context, a: usize, b: usize, oa: u64, ob: u64) -> Result<(), String> {
    let (ea, eb) = (&ctx.table.tensors[a], &ctx.table.tensors[b]);
    if let Some(problem) = check_strides(ea).or_else(|| check_strides(eb)) {
        return Err(problem);
    }
    let parent = layout(eb).ok_or("the parent's layout is unknown")?;
    let Some(k) = ea.alias_offset else {
        let node = producer(ctx.graph, &ea.name).ok_or("not produced by a node")?;
        if node_rule(ctx.graph, node) != ReuseRule::Alias
            || input_names(ctx.graph, node).first().copied().flatten() != Some(eb.name.as_str())
        {
            return Err("not a full alias of its producer's data input".into());
        }
        if oa != ob || ea.shape != eb.shape || ea.strides.as_ref() != Some(&parent) {
            return Err(
                "a full alias of a strided view must have its offset, shape and strides".into(),
            );
        }
        return Ok(());
    };
    check_alias_offset(oa, ob, k)?;
    let node = producer(ctx.graph, &eb.name).ok_or("the parent is not produced by a node")?;
    if node.op_type != "Concat" || !node.domain.is_empty() {
        return Err("only the parts of a Concat are strided views of its output".into());
    }
    let start = concat_start(ctx.graph, node, &ea.name, &eb.name)
        .ok_or("not a part of the Concat making its parent")?;
    if oa.saturating_add(span(ea)) > ob.saturating_add(span(eb)) {
        return Err("the view reaches past its parent".into());
    }
    if ea.strides.as_ref() != Some(&parent) {
        return Err(format!(
            "strides {:?} are not the parent's {parent:?}",
            ea.strides
        ));
    }
    match start.1.checked_mul(parent[start.0]) {
        Some(expected) if expected == k => Ok(()),
        Some(expected) => Err(format!("the part starts at byte {expected}, not {k}")),
        None => Err("the part's start lies past the largest byte address".into()),
    }
}

/// A slice alias at `oa` of a parent at `ob` must start `k` (its `alias_offset`) bytes in.
fn check_alias_offset(oa: u64, ob: u64, k: u64) -> Result<(), String> {
    match ob.checked_add(k) {
        None => Err(format!(
            "alias_offset {k} from offset {ob} lies past the largest byte address"
        )),
        Some(at) if at != oa => Err(format!("offset {oa} is not {ob} + alias_offset {k}")),
        Some(_) => Ok(()),
    }
}

/// The Concat axis and the index along it where `part` starts inside `whole`.
fn concat_start(graph: &Graph, node: &Node, part: &str, whole: &str) -> Option<(usize, u64)> {
    let rank = concrete(graph.value(whole)?.tensor_type()?.shape.as_ref()?)?.len() as i64;
    let axis = node.attr_int("axis").unwrap_or(0);
    let axis = usize::try_from(if axis < 0 { axis + rank } else { axis }).ok()?;
    let inputs = input_names(graph, node);
    let k = inputs.iter().position(|n| *n == Some(part))?;
    let mut start = 0u64;
    for name in &inputs[..k] {
        let t = graph.value((*name)?)?.tensor_type()?;
        start += u64::try_from(*concrete(t.shape.as_ref()?)?.get(axis)?).ok()?;
    }
    Some((axis, start))
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

/// Byte offset of `part` inside `whole` when `part` is a Slice (unit steps) or a one-index
/// Gather of `whole` whose elements are one unbroken run of `whole`'s row-major bytes: the
/// run from the first selected element to the last must hold exactly the selected count.
fn slice_offset_view(graph: &Graph, part: &str, whole: &str) -> Option<u64> {
    let node = producer(graph, part)?;
    if !node.domain.is_empty() || input_names(graph, node).first().copied().flatten() != Some(whole)
    {
        return None;
    }
    let whole_ty = graph.value(whole)?.tensor_type()?;
    let part_ty = graph.value(part)?.tensor_type()?;
    if whole_ty.dtype != part_ty.dtype {
        return None;
    }
    let dims = concrete(whole_ty.shape.as_ref()?)?;
    let count: i64 = concrete(part_ty.shape.as_ref()?)?.iter().product();
    let (low, high) = match node.op_type.as_str() {
        "Slice" => slice_corners(graph, node, &dims)?,
        "Gather" => gather_corners(graph, node, &dims)?,
        _ => return None,
    };
    let linear = |index: &[i64]| {
        index
            .iter()
            .zip(&dims)
            .fold(0i64, |acc, (&i, &d)| acc * d + i)
    };
    let (first, last) = (linear(&low), linear(&high));
    if count <= 0 || last - first + 1 != count {
        return None;
    }
    let bits = i64::from(whole_ty.dtype.bits()?);
    (first * bits % 8 == 0).then(|| u64::try_from(first * bits / 8).ok())?
}

/// First and last selected index (per axis) of a unit-step Slice.
fn slice_corners(graph: &Graph, node: &Node, dims: &[i64]) -> Option<(Vec<i64>, Vec<i64>)> {
    let ints = |slot: usize, attr: &str| -> Option<Vec<i64>> {
        if let Some(values) = node.attr_ints(attr) {
            return Some(values.to_vec());
        }
        let v = node.inputs.get(slot).copied().flatten()?;
        graph.values[v].constant.as_ref()?.to_i64_vec()
    };
    let starts = ints(1, "starts")?;
    let ends = ints(2, "ends")?;
    let rank = dims.len() as i64;
    let axes = ints(3, "axes").unwrap_or_else(|| (0..starts.len() as i64).collect());
    if ints(4, "steps").is_some_and(|s| s.iter().any(|&x| x != 1)) {
        return None;
    }
    if axes.len() != starts.len() || ends.len() != starts.len() {
        return None;
    }
    let mut low = vec![0i64; dims.len()];
    let mut high: Vec<i64> = dims.iter().map(|&d| d - 1).collect();
    for k in 0..axes.len() {
        let axis = if axes[k] < 0 { axes[k] + rank } else { axes[k] };
        let a = usize::try_from(axis).ok()?;
        let d = *dims.get(a)?;
        let clamp = |x: i64| (if x < 0 { x + d } else { x }).clamp(0, d);
        let (s, e) = (clamp(starts[k]), clamp(ends[k]));
        if e <= s {
            return None;
        }
        low[a] = s;
        high[a] = e - 1;
    }
    Some((low, high))
}

/// First and last selected index (per axis) of a Gather of one constant index.
fn gather_corners(graph: &Graph, node: &Node, dims: &[i64]) -> Option<(Vec<i64>, Vec<i64>)> {
    let v = node.inputs.get(1).copied().flatten()?;
    let [index] = graph.values[v].constant.as_ref()?.to_i64_vec()?[..] else {
        return None;
    };
    let axis = node.attr_int("axis").unwrap_or(0);
    let a = usize::try_from(if axis < 0 {
        axis + dims.len() as i64
    } else {
        axis
    })
    .ok()?;
    let d = *dims.get(a)?;
    let index = if index < 0 { index + d } else { index };
    if !(0..d).contains(&index) {
        return None;
    }
    let mut low = vec![0i64; dims.len()];
    let mut high: Vec<i64> = dims.iter().map(|&d| d - 1).collect();
    low[a] = index;
    high[a] = index;
    Some((low, high))
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

fn check_inplace(ctx: &Context, classes: &[usize], a: usize, x: usize) -> Result<(), String> {
    let Context {
        graph,
        table,
        index,
        steps,
        runs,
        ..
    } = *ctx;
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
    let born = offset_at(&runs[a], ea.first);
    if born != offset_at(&runs[x], ea.first) || ea.arena != ex.arena || born.is_none() {
        return Err("must have the overwritten tensor's arena and offset".into());
    }
    if ea.bytes != ex.bytes {
        return Err("sizes differ".into());
    }
    if ea.strides != ex.strides || (ea.strides.is_some() && ea.shape != ex.shape) {
        return Err("the layouts (shape and strides) differ".into());
    }
    let step = steps[node_id];
    // Members of the class that share a byte with the overwritten tensor at the step (the
    // other slices of a split tensor hold other bytes and may live on).
    let overwritten = born.map(|o| (o, o.saturating_add(span(ex))));
    let shares = |i: usize| match (overwritten, offset_at(&runs[i], step)) {
        (Some((lo, hi)), Some(o)) => o < hi && o.saturating_add(span(&table.tensors[i])) > lo,
        _ => true,
    };
    for (i, e) in table.tensors.iter().enumerate() {
        if classes[i] == classes[x] && e.last > step && shares(i) {
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
