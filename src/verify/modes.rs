//! Checks of the advanced modes' fields: tier capacities, unit alignments, quantised storage,
//! subgraph workspaces (clear of the tensors live at their node's step, their bodies' tensors
//! clear of each other), and under a device budget the transfers (each names a placed tensor
//! live across its gap and not read or written inside it) and the resident bytes of every step.

use std::collections::HashMap;

use crate::emit::{Run, Table, WorkspaceEntry};
use crate::ir::{DType, Graph, ValueKind};
use crate::modes::partition::FUNCTION_BODY;

/// Op types whose first input may be stored quantised.
const QUANTIZERS: [&str; 4] = [
    "QuantizeLinear",
    "DynamicQuantizeLinear",
    "FakeQuantize",
    "FakeQuant",
];

/// The inclusive step ranges each table entry waits in host memory, as its transfers say.
fn away_ranges(table: &Table, index: &HashMap<&str, usize>) -> Vec<Vec<(usize, usize)>> {
    let mut away = vec![Vec::new(); table.tensors.len()];
    for t in table.offload.iter().flat_map(|o| &o.transfers) {
        for name in std::iter::once(&t.tensor).chain(&t.aliases) {
            if let Some(&i) = index.get(name.as_str()) {
                away[i].push((t.out_after + 1, t.in_before.saturating_sub(1)));
            }
        }
    }
    away
}

/// Every tensor holding the same bytes as a transfer's tensor (its alias class) and live at
/// some step of the gap must be named by the transfer: the bytes leave and come back together
/// (a named tensor must then span the whole gap and not be used inside it).
pub fn check_moves_together(
    table: &Table,
    index: &HashMap<&str, usize>,
    classes: &[usize],
    problems: &mut Vec<String>,
) {
    for t in table.offload.iter().flat_map(|o| &o.transfers) {
        let Some(&main) = index.get(t.tensor.as_str()) else {
            continue;
        };
        for (i, e) in table.tensors.iter().enumerate() {
            let in_gap = e.first < t.in_before && e.last > t.out_after;
            if classes[i] == classes[main]
                && in_gap
                && e.name != t.tensor
                && !t.aliases.contains(&e.name)
            {
                problems.push(format!(
                    "tensor '{}' holds the bytes of '{}' but is not moved with it after step {}",
                    e.name, t.tensor, t.out_after
                ));
            }
        }
    }
}

/// Checks tiers, alignments, storage and transfers; `steps[node]` is the node's step.
pub fn check_modes(
    graph: &Graph,
    table: &Table,
    index: &HashMap<&str, usize>,
    steps: &[usize],
    runs: &[Vec<Run>],
    problems: &mut Vec<String>,
) {
    for a in &table.arenas {
        if let Some(t) = a.tier.as_ref().filter(|t| a.bytes > t.capacity) {
            problems.push(format!(
                "arena '{}' uses {} bytes, its tier holds {}",
                a.name, a.bytes, t.capacity
            ));
        }
    }
    for e in &table.tensors {
        if let (Some(align), Some(offset), None) = (e.placement.alignment, e.offset, e.alias_offset)
            && !offset.is_multiple_of(align.max(1))
        {
            problems.push(format!(
                "tensor '{}' offset {offset} is not a multiple of its units' {align}",
                e.name
            ));
        }
        if e.placement.stored_bytes.is_some() || e.placement.stored_dtype.is_some() {
            check_stored(graph, e, problems);
        }
    }
    if table.offload.is_some() {
        check_transfers(graph, table, index, steps, runs, problems);
    }
    for w in table.partition.iter().flat_map(|p| &p.workspaces) {
        check_top_workspace(graph, table, steps, w, problems);
    }
}

/// A top-level workspace: at its node's step, inside arena 0, clear of the live tensors.
fn check_top_workspace(
    graph: &Graph,
    table: &Table,
    steps: &[usize],
    w: &WorkspaceEntry,
    problems: &mut Vec<String>,
) {
    if w.node >= graph.nodes.len() || steps[w.node] != w.step {
        problems.push(format!(
            "workspace of node {} is not at that node's step",
            w.node
        ));
        return;
    }
    let arena = table.arenas.first().map_or(0, |a| a.bytes);
    if w.offset.saturating_add(w.bytes) > arena
        || !w.offset.is_multiple_of(table.options.alignment.max(1))
    {
        problems.push(format!(
            "workspace of node {} lies outside arena 0 or is misaligned",
            w.node
        ));
    }
    for e in &table.tensors {
        let (Some(0), Some(offset)) = (e.arena, e.offset) else {
            continue;
        };
        let live = e.first <= w.step && w.step <= e.last;
        let (w_end, e_end) = (
            w.offset.saturating_add(w.bytes),
            offset.saturating_add(e.extent()),
        );
        if live && offset < w_end && w.offset < e_end && e.extent() > 0 {
            problems.push(format!(
                "tensor '{}' shares bytes with the workspace of node {} at step {}",
                e.name, w.node, w.step
            ));
        }
    }
    check_workspace(graph, w, problems);
}

/// A workspace's bodies: each is a subgraph of the node, fits the workspace, lists every
/// sized tensor of the subgraph once, and keeps tensors live together (and nested
/// workspaces) apart.
fn check_workspace(graph: &Graph, w: &WorkspaceEntry, problems: &mut Vec<String>) {
    let node = &graph.nodes[w.node];
    for b in &w.bodies {
        let what = format!("{} {}", node.label(w.node), b.attribute);
        // A function call's body is instantiated by the planner; only its layout is checked.
        let body = node
            .subgraphs
            .iter()
            .find(|s| s.attribute == b.attribute)
            .map(|s| &s.graph);
        let call =
            b.attribute == format!("{FUNCTION_BODY}{}", node.op_type) && node.subgraphs.is_empty();
        if body.is_none() && !call {
            problems.push(format!("{what}: no such subgraph or function call"));
            continue;
        }
        if b.bytes > w.bytes {
            problems.push(format!(
                "{what}: {} bytes exceed the workspace's {}",
                b.bytes, w.bytes
            ));
        }
        if let Some(g) = body {
            for v in &g.values {
                let constant = matches!(v.kind, ValueKind::Initializer | ValueKind::OuterScope)
                    || v.producer.is_some_and(|p| g.nodes[p].op_type == "Constant")
                    || v.folded;
                let sized = v.tensor_type().and_then(|t| t.bytes());
                let listed = b.tensors.iter().filter(|t| t.name == v.name).count();
                if !constant && sized.is_some() && listed != 1 {
                    problems.push(format!(
                        "{what}: tensor '{}' is listed {listed} times",
                        v.name
                    ));
                }
            }
        }
        let mut spans: Vec<(usize, usize, u64, u64, String)> = Vec::new();
        for t in &b.tensors {
            let bytes = match body {
                Some(g) => g
                    .value(&t.name)
                    .and_then(|v| v.tensor_type())
                    .and_then(|ty| ty.bytes()),
                None => Some(t.bytes),
            };
            if bytes != Some(t.bytes)
                || t.first > t.last
                || t.offset.saturating_add(t.bytes) > b.bytes
            {
                problems.push(format!(
                    "{what}: tensor '{}' has wrong bytes, lifetime or offset",
                    t.name
                ));
            }
            spans.push((
                t.first,
                t.last,
                t.offset,
                t.offset.saturating_add(t.bytes),
                format!("tensor '{}'", t.name),
            ));
        }
        for n in &b.workspaces {
            if body.is_some_and(|g| n.node >= g.nodes.len())
                || n.offset.saturating_add(n.bytes) > b.bytes
            {
                problems.push(format!(
                    "{what}: nested workspace of node {} is out of place",
                    n.node
                ));
                continue;
            }
            spans.push((
                n.step,
                n.step,
                n.offset,
                n.offset.saturating_add(n.bytes),
                format!("workspace of node {}", n.node),
            ));
            if let Some(g) = body {
                check_workspace(g, n, problems);
            }
        }
        for (i, a) in spans.iter().enumerate() {
            for c in &spans[i + 1..] {
                let together = a.0 <= c.1 && c.0 <= a.1;
                if together && a.2 < c.3 && c.2 < a.3 && a.3 > a.2 && c.3 > c.2 {
                    problems.push(format!(
                        "{what}: {} and {} share bytes while both live",
                        a.4, c.4
                    ));
                }
            }
        }
    }
}

fn check_stored(graph: &Graph, e: &crate::emit::TensorEntry, problems: &mut Vec<String>) {
    let Some(value) = graph.value(&e.name) else {
        return;
    };
    let quantised_only = !value.is_output
        && !value.consumers.is_empty()
        && value
            .consumers
            .iter()
            .all(|&c| QUANTIZERS.contains(&graph.nodes[c].op_type.as_str()));
    let expected = e
        .placement
        .stored_dtype
        .as_deref()
        .and_then(DType::from_name)
        .zip(value.tensor_type().and_then(|t| t.elements()))
        .and_then(|(d, n)| d.bytes_for(n));
    if !quantised_only || expected.is_none() || expected != e.placement.stored_bytes {
        problems.push(format!(
            "tensor '{}' is stored as {:?} ({:?} bytes), which only a tensor read solely by quantisation nodes may be ({expected:?} bytes)",
            e.name, e.placement.stored_dtype, e.placement.stored_bytes
        ));
    }
}

fn check_transfers(
    graph: &Graph,
    table: &Table,
    index: &HashMap<&str, usize>,
    steps: &[usize],
    runs: &[Vec<Run>],
    problems: &mut Vec<String>,
) {
    let Some(offload) = &table.offload else {
        return;
    };
    let last_step = table.schedule.len().saturating_sub(1);
    for t in &offload.transfers {
        for name in std::iter::once(&t.tensor).chain(&t.aliases) {
            let Some(&i) = index.get(name.as_str()) else {
                problems.push(format!("transfer of unknown tensor '{name}'"));
                continue;
            };
            let e = &table.tensors[i];
            if e.offset.is_none()
                || t.out_after >= t.in_before
                || t.out_after < e.first
                || t.in_before > e.last
            {
                problems.push(format!(
                    "transfer of '{name}' out after step {} and in before {} does not fit its placed lifetime {}:{}",
                    t.out_after, t.in_before, e.first, e.last
                ));
                continue;
            }
            let Some(value) = graph.value(name) else {
                continue;
            };
            let mut accesses: Vec<usize> = value
                .producer
                .iter()
                .chain(&value.consumers)
                .map(|&n| steps[n])
                .collect();
            if e.kind == "input" {
                accesses.push(0);
            }
            if e.kind == "output" {
                accesses.push(last_step);
            }
            if let Some(s) = accesses
                .into_iter()
                .find(|&s| s > t.out_after && s < t.in_before)
            {
                problems.push(format!(
                    "tensor '{name}' is used at step {s} while it waits in host memory"
                ));
            }
        }
    }
    let away = away_ranges(table, index);
    for (i, ranges) in away.iter().enumerate() {
        let mut sorted = ranges.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0].1 >= w[1].0) {
            problems.push(format!(
                "tensor '{}' has overlapping transfers",
                table.tensors[i].name
            ));
        }
    }
    let arenas = table
        .arenas
        .iter()
        .map(|a| a.bytes)
        .fold(0, u64::saturating_add);
    if arenas > offload.budget {
        problems.push(format!(
            "the arenas take {arenas} bytes, over the budget of {}",
            offload.budget
        ));
    }
    let alignment = table.options.alignment.max(1);
    let mut resident: Vec<Vec<(usize, u64, u64)>> = vec![Vec::new(); table.schedule.len().max(1)];
    for (e, runs) in table.tensors.iter().zip(runs) {
        let Some(arena) = e.arena else {
            continue;
        };
        let capacity = table
            .arenas
            .iter()
            .find(|a| a.id == arena)
            .map_or(0, |a| a.bytes);
        for run in runs {
            let Some(offset) = run.offset else { continue };
            if Some(offset) != e.offset
                && ((e.alias_offset.is_none()
                    && e.strides.is_none()
                    && !offset.is_multiple_of(alignment))
                    || offset.saturating_add(e.extent()) > capacity)
            {
                problems.push(format!(
                    "tensor '{}' comes back at offset {offset}, misaligned or past its arena",
                    e.name
                ));
            }
            for list in &mut resident[run.first.min(last_step)..=run.last.min(last_step)] {
                list.push((arena, offset, offset.saturating_add(e.extent())));
            }
        }
    }
    for (step, mut list) in resident.into_iter().enumerate() {
        list.sort_unstable();
        let (mut total, mut at) = (0u64, (usize::MAX, 0u64));
        for (arena, start, end) in list {
            let from = if arena == at.0 {
                start.max(at.1)
            } else {
                start
            };
            total += end.saturating_sub(from);
            at = (arena, if arena == at.0 { at.1.max(end) } else { end });
        }
        if total > offload.budget {
            problems.push(format!(
                "step {step} keeps {total} bytes resident, over the budget of {}",
                offload.budget
            ));
        }
    }
}
