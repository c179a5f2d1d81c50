//! S1 on a model: the blocks are the analysis's buffers without in-place merging (in-place
//! pairs become reuse candidates the search may take or decline), accesses are the operators'
//! reads and writes; the result is one arena per tier and a table entry per tensor.

use anyhow::Result;

use super::access::tensor_accesses;
use super::hierarchy::{Block, Hierarchy, Outcome, Tier, fill, improve};
use crate::emit::{Arena, HierarchyInfo, TensorEntry, TierInfo, member_offsets, tensor_entries};
use crate::input_error;
use crate::ir::{Graph, NodeId};
use crate::liveness::{Liveness, LivenessOptions, Sharing, analyse};
use crate::plan::budget::{Budget, Ending};

/// The hierarchy plan of a model.
pub struct TierPlan {
    /// One arena per tier, ids in tier order.
    pub arenas: Vec<Arena>,
    /// Every tensor with its tier (arena) and offset.
    pub tensors: Vec<TensorEntry>,
    /// Costs before and after the search.
    pub info: HierarchyInfo,
    /// What ended the improvement search.
    pub ended: Ending,
}

/// Plans the graph's tensors over `tiers` (fastest first) under the execution `order`; the
/// search spends at most `budget`.
pub fn plan_tiers(
    graph: &Graph,
    order: &[NodeId],
    options: LivenessOptions,
    tiers: &[Tier],
    segment: usize,
    budget: &Budget,
) -> Result<TierPlan> {
    let merged = analyse(graph, order.to_vec(), options)?;
    let apart = analyse(
        graph,
        order.to_vec(),
        LivenessOptions {
            inplace: false,
            ..options
        },
    )?;
    let alignment = options.alignment.max(1);
    let (blocks, reuse_of) = blocks(graph, &merged, &apart, alignment);
    let h = Hierarchy {
        blocks,
        tiers: tiers.to_vec(),
        alignment,
    };
    let Outcome { best, cost_initial, cost_final, actions, ended, .. } = improve(&h, segment, budget).map_err(|stuck| {
        let name = apart.buffers[stuck.block]
            .members
            .first()
            .map_or("?", |&(t, _)| graph.values[apart.tensors[t].value].name.as_str());
        input_error!(
            "the tiers cannot hold the plan: at step {} buffer '{name}' ({} bytes) fits in no tier; give a tier more capacity",
            stuck.step,
            h.blocks[stuck.block].size
        )
    })?;
    let mut tensors = tensor_entries(graph, &apart, &member_offsets(&apart, &best.offset));
    for (i, entry) in tensors.iter_mut().enumerate() {
        if let Some(b) = apart.buffer_of[i] {
            entry.arena = Some(best.tier[b]);
        }
    }
    for (b, &(out, of)) in reuse_of
        .iter()
        .enumerate()
        .filter_map(|(b, r)| Some((b, r.as_ref()?)))
    {
        if best.reused[b] {
            tensors[out].inplace_of = Some(graph.values[apart.tensors[of].value].name.clone());
        }
    }
    let arenas = tiers
        .iter()
        .enumerate()
        .map(|(id, t)| Arena {
            id,
            name: t.name.clone(),
            bytes: best.high_water[id],
            tier: Some(TierInfo {
                capacity: t.capacity,
                latency: t.latency,
                bandwidth: t.bandwidth,
            }),
        })
        .collect();
    Ok(TierPlan {
        arenas,
        tensors,
        info: HierarchyInfo {
            segment,
            cost_initial,
            cost_final,
            actions,
            fill: fill(&h, &best),
        },
        ended,
    })
}

/// One block per buffer of `apart`; the in-place pairs `merged` made become reuse candidates
/// where the unmerged buffers allow it. Also returns, per block, the (output, overwritten)
/// tensors of its candidate.
fn blocks(
    graph: &Graph,
    merged: &Liveness,
    apart: &Liveness,
    alignment: u64,
) -> (Vec<Block>, Vec<Option<(usize, usize)>>) {
    let accesses = tensor_accesses(graph, apart);
    let mut blocks: Vec<Block> = apart
        .buffers
        .iter()
        .map(|b| {
            let mut list: Vec<(usize, u64)> = b
                .members
                .iter()
                .flat_map(|&(t, _)| {
                    let bytes = apart.tensors[t].bytes.unwrap_or(0);
                    accesses[t].iter().map(move |a| (a.step, bytes))
                })
                .collect();
            list.sort_unstable();
            Block {
                size: b.bytes.next_multiple_of(alignment),
                first: b.first,
                last: b.last,
                accesses: list,
                reuses: None,
            }
        })
        .collect();
    let mut tensor_of = vec![None; graph.values.len()];
    for (i, t) in apart.tensors.iter().enumerate() {
        tensor_of[t.value] = Some(i);
    }
    let mut reuse_of = vec![None; blocks.len()];
    let mut targeted = vec![false; blocks.len()];
    for (t, sharing) in merged.sharing.iter().enumerate() {
        let Some(Sharing::InPlace { of }) = *sharing else {
            continue;
        };
        let (Some(bt), Some(bu)) = (apart.buffer_of[t], apart.buffer_of[of]) else {
            continue;
        };
        let step = apart.tensors[t].first;
        let producer = graph.values[apart.tensors[t].value].producer;
        let other_reader =
            producer.is_some_and(|p| {
                graph.nodes[p].inputs.iter().flatten().any(|&v| {
                    tensor_of[v].is_some_and(|r| r != of && apart.buffer_of[r] == Some(bu))
                })
            });
        let fits = bt != bu
            && blocks[bt].first == step
            && apart.buffers[bu].last == step
            && apart.offset_in_buffer(t) == Some(0)
            && apart.offset_in_buffer(of) == Some(0)
            && blocks[bt].size <= blocks[bu].size
            && blocks[bt].reuses.is_none()
            && !targeted[bu]
            && !other_reader;
        if fits {
            blocks[bt].reuses = Some(bu);
            targeted[bu] = true;
            reuse_of[bt] = Some((t, of));
        }
    }
    (blocks, reuse_of)
}
