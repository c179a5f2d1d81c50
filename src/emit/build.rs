//! Assembling the allocation table from the analysis and the solved offsets.

use super::table::{Arena, BranchChoice, TableOptions, TensorEntry};
use crate::ir::Graph;
use crate::liveness::{Liveness, Sharing};

/// Each tensor's absolute offset when its buffer (of the analysis) starts at
/// `buffer_offsets[buffer]`; `None` for tensors outside the arena.
pub fn member_offsets(liveness: &Liveness, buffer_offsets: &[u64]) -> Vec<Option<u64>> {
    let mut offsets = vec![None; liveness.tensors.len()];
    for (b, buffer) in liveness.buffers.iter().enumerate() {
        for &(t, inner) in &buffer.members {
            offsets[t] = Some(buffer_offsets[b] + inner);
        }
    }
    offsets
}

/// One entry per tensor of the analysis, at the absolute `offsets` (per tensor, in arena 0;
/// `None` outside the arena).
pub fn tensor_entries(
    graph: &Graph,
    liveness: &Liveness,
    offsets: &[Option<u64>],
) -> Vec<TensorEntry> {
    let name_of = |t: usize| graph.values[liveness.tensors[t].value].name.clone();
    // A shared DQ's output names the first unit reading it.
    let mut unit_of = std::collections::HashMap::new();
    for (u, unit) in graph.units.iter().enumerate() {
        for &v in &unit.internal {
            unit_of.entry(v).or_insert(u);
        }
    }
    liveness
        .tensors
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let value = &graph.values[t.value];
            let tensor = value.tensor_type();
            let offset = offsets[i];
            let (inplace_of, mut alias_of, mut alias_offset) = match liveness.sharing[i] {
                Some(Sharing::InPlace { of }) => (Some(name_of(of)), None, None),
                Some(Sharing::Alias { of, offset }) => (None, Some(name_of(of)), offset),
                None => (None, None, None),
            };
            if let Some((of, offset)) = liveness.part_of[i] {
                (alias_of, alias_offset) = (Some(name_of(of)), Some(offset));
            }
            TensorEntry {
                name: value.name.clone(),
                dtype: tensor.map(|t| t.dtype.name().to_string()),
                shape: value.concrete_shape(),
                bytes: t.bytes,
                kind: t.kind.name().to_string(),
                first: t.first,
                last: t.last,
                arena: offset.map(|_| 0),
                offset,
                inplace_of,
                alias_of,
                alias_offset,
                strides: liveness.strides[i].as_deref().map(<[u64]>::to_vec),
                scattered_by: graph
                    .scatter_reading(t.value)
                    .map(|s| graph.nodes[s].name.clone()),
                node_unit: unit_of.get(&t.value).map(|&u| graph.units[u].name.clone()),
                placement: Default::default(),
                symbolic: Default::default(),
            }
        })
        .collect()
}

/// The single flat arena.
pub fn main_arena(bytes: u64) -> Vec<Arena> {
    vec![Arena {
        id: 0,
        name: "main".to_string(),
        bytes,
        tier: None,
    }]
}

/// Bytes of planning every arena tensor in its own buffer, padded to the alignment.
pub fn naive_bytes(liveness: &Liveness, options: &TableOptions) -> u64 {
    liveness
        .tensors
        .iter()
        .enumerate()
        .filter(|(i, _)| liveness.buffer_of[*i].is_some())
        .map(|(_, t)| {
            t.bytes
                .unwrap_or(0)
                .next_multiple_of(options.alignment.max(1))
        })
        .sum()
}

/// The `If` branches of `graph` (and of every subgraph) that inference ruled out, in node order.
pub fn branch_choices(graph: &Graph) -> Vec<BranchChoice> {
    let mut out = Vec::new();
    collect_choices(graph, "", &mut out);
    out
}

fn collect_choices(graph: &Graph, prefix: &str, out: &mut Vec<BranchChoice>) {
    for (id, node) in graph.nodes.iter().enumerate() {
        let name = if node.name.is_empty() {
            format!("{prefix}#{id}")
        } else {
            format!("{prefix}{}", node.name)
        };
        for sub in &node.subgraphs {
            if let Some(reason) = &sub.ruled_out
                && let Some(taken) = node.subgraphs.iter().find(|s| s.ruled_out.is_none())
            {
                out.push(BranchChoice {
                    node: name.clone(),
                    taken: taken.attribute.clone(),
                    reason: reason.clone(),
                });
            }
        }
        for sub in node.subgraphs.iter().filter(|s| s.ruled_out.is_none()) {
            collect_choices(&sub.graph, &format!("{name}/{}/", sub.attribute), out);
        }
    }
}
