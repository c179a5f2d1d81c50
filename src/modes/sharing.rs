//! S5 on a model: the partition's marks adjust the DSA problem before it is solved (buffers
//! stored quantised shrink; each buffer is padded to the alignment of every unit touching it;
//! offsets use the least common multiple of all of them; nodes holding subgraphs get a
//! workspace planned level by level), then label the table's tensors.

use anyhow::Result;

use super::partition::{Body, Marks, Partition, Side, Workspace, lcm, mark, plan_levels};
use crate::emit::{BodyEntry, BodyTensor, PartitionInfo, Table, UnitInfo, WorkspaceEntry};
use crate::input_error;
use crate::ir::{DType, Model};
use crate::liveness::{Liveness, LivenessOptions};
use crate::plan::{Buffer, Problem};

/// What the partition decided, kept for labelling the table.
pub struct Shared {
    partition: Partition,
    marks: Marks,
    /// Per tensor of the analysis, the quantised storage it got.
    stored: Vec<Option<(DType, u64)>>,
    /// Workspaces of nodes holding subgraphs, appended to the problem after the buffers.
    workspaces: Vec<(Workspace, usize)>,
    /// Nodes whose subgraphs could not be planned.
    unplanned: Vec<String>,
}

/// Marks the model's graph and adjusts `problem` (one buffer per buffer of `liveness`, then
/// one per workspace).
pub fn prepare(
    model: &Model,
    liveness: &Liveness,
    partition: &Partition,
    alignment: u64,
    problem: &mut Problem,
) -> Result<Shared> {
    let graph = &model.graph;
    let marks = mark(graph, partition, alignment).map_err(|e| input_error!("--partition: {e}"))?;
    let mark_of = |t: usize| marks.values[liveness.tensors[t].value].as_ref();
    let stored: Vec<Option<(DType, u64)>> = (0..liveness.tensors.len())
        .map(|t| {
            let alone =
                liveness.buffer_of[t].is_some_and(|b| liveness.buffers[b].members.len() == 1);
            let own = liveness.sharing[t].is_none();
            mark_of(t).and_then(|m| m.stored).filter(|_| alone && own)
        })
        .collect();
    let mut all = alignment.max(1);
    for (b, buffer) in liveness.buffers.iter().enumerate() {
        let align = buffer
            .members
            .iter()
            .filter_map(|&(t, _)| mark_of(t))
            .fold(alignment.max(1), |a, m| lcm(a, m.alignment));
        let bytes = buffer
            .members
            .iter()
            .map(|&(t, at)| at + stored[t].map_or(liveness.tensors[t].bytes.unwrap_or(0), |s| s.1))
            .max()
            .unwrap_or(0);
        problem.buffers[b].size = bytes.next_multiple_of(align);
        all = lcm(all, align);
    }
    let unit_alignment = |n: usize| {
        lcm(
            alignment.max(1),
            partition.units[marks.node_unit[n]].alignment,
        )
    };
    let body_options = LivenessOptions {
        inplace: false,
        alias: false,
        include_io: true,
        alignment,
        strided: false,
        blockwise: false,
    };
    let (planned, unplanned) = plan_levels(model, graph, body_options, &unit_alignment);
    let step_of = crate::ir::steps_of(&liveness.order, graph.nodes.len());
    let workspaces: Vec<(Workspace, usize)> = planned
        .into_iter()
        .map(|w| {
            let step = step_of[w.node];
            (w, step)
        })
        .collect();
    for (w, step) in &workspaces {
        let align = unit_alignment(w.node);
        all = lcm(all, align);
        let step = *step as u32;
        problem.buffers.push(Buffer {
            size: w.bytes.next_multiple_of(align),
            start: step,
            end: step + 1,
        });
    }
    problem.alignment = all;
    Ok(Shared {
        partition: partition.clone(),
        marks,
        stored,
        workspaces,
        unplanned,
    })
}

/// Labels the table's tensors (indexed like the analysis's) with units, sharing and storage,
/// and records the workspaces at their solved offsets (`offsets` indexed like the problem).
pub fn annotate(liveness: &Liveness, shared: &Shared, offsets: &[u64], table: &mut Table) {
    let name = |side: Side| match side {
        Side::Host => "host".to_string(),
        Side::Unit(u) => shared.partition.units[u].name.clone(),
    };
    for (t, entry) in table.tensors.iter_mut().enumerate() {
        let Some(m) = shared.marks.values[liveness.tensors[t].value].as_ref() else {
            continue;
        };
        let p = &mut entry.placement;
        p.unit = Some(name(m.producer));
        p.shared_with = m.shared_with.iter().map(|&s| name(s)).collect();
        p.alignment = (m.alignment > table.options.alignment && entry.offset.is_some())
            .then_some(m.alignment);
        if let Some((dtype, bytes)) = shared.stored[t] {
            p.stored_dtype = Some(dtype.name().to_string());
            p.stored_bytes = Some(bytes);
        }
    }
    table.partition = Some(PartitionInfo {
        units: shared
            .partition
            .units
            .iter()
            .zip(&shared.marks.nodes_per_unit)
            .map(|(u, &nodes)| UnitInfo {
                name: u.name.clone(),
                alignment: u.alignment,
                quantize_outputs: u.quantize_outputs,
                nodes,
            })
            .collect(),
        workspaces: shared
            .workspaces
            .iter()
            .enumerate()
            .map(|(k, (w, step))| entry(w, *step, offsets[liveness.buffers.len() + k]))
            .collect(),
        unplanned: shared.unplanned.clone(),
    });
}

fn entry(w: &Workspace, step: usize, offset: u64) -> WorkspaceEntry {
    WorkspaceEntry {
        node: w.node,
        step,
        offset,
        bytes: w.bytes,
        bodies: w.bodies.iter().map(body_entry).collect(),
    }
}

fn body_entry(b: &Body) -> BodyEntry {
    BodyEntry {
        attribute: b.attribute.clone(),
        bytes: b.bytes,
        tensors: b
            .tensors
            .iter()
            .map(|(name, bytes, first, last, offset)| BodyTensor {
                name: name.clone(),
                bytes: *bytes,
                first: *first,
                last: *last,
                offset: *offset,
            })
            .collect(),
        workspaces: b
            .nested
            .iter()
            .map(|(w, step, offset)| entry(w, *step, *offset))
            .collect(),
    }
}
