//! Assembling the allocation table from the analysis and the solved offsets.

use super::table::{Arena, TableOptions, TensorEntry};
use crate::ir::{Graph, concrete};
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
    liveness
        .tensors
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let value = &graph.values[t.value];
            let tensor = value.tensor_type();
            let offset = offsets[i];
            let (inplace_of, alias_of, alias_offset) = match liveness.sharing[i] {
                Some(Sharing::InPlace { of }) => (Some(name_of(of)), None, None),
                Some(Sharing::Alias { of, offset }) => (None, Some(name_of(of)), offset),
                None => (None, None, None),
            };
            TensorEntry {
                name: value.name.clone(),
                dtype: tensor.map(|t| t.dtype.name().to_string()),
                shape: tensor.and_then(|t| concrete(t.shape.as_ref()?)),
                bytes: t.bytes,
                kind: t.kind.name().to_string(),
                first: t.first,
                last: t.last,
                arena: offset.map(|_| 0),
                offset,
                inplace_of,
                alias_of,
                alias_offset,
                placement: Default::default(),
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
