//! S4 on a model: one object per buffer of the analysis (accessed by its members' producers
//! and readers; graph inputs are written at step 0 and graph outputs read at the last step),
//! solved by [`offload::solve`]; the result is one offset per buffer and the transfer list.

use anyhow::Result;

use super::access::tensor_accesses;
use super::offload::{self, Access, Infeasible, Object, Offload, Options};
use crate::emit::{OffloadInfo, Transfer};
use crate::input_error;
use crate::ir::Graph;
use crate::liveness::{Liveness, TensorKind};

/// The budget plan of a model.
pub struct BudgetPlan {
    /// Offset of each buffer of the analysis.
    pub offsets: Vec<u64>,
    /// Device bytes used.
    pub arena: u64,
    /// Budget, transfers, and the baseline's migration.
    pub info: OffloadInfo,
}

/// Plans the analysis's buffers within `budget` device bytes.
pub fn plan_budget(
    graph: &Graph,
    liveness: &Liveness,
    alignment: u64,
    budget: u64,
    options: &Options,
) -> Result<BudgetPlan> {
    let alignment = alignment.max(1);
    let last_step = liveness.order.len().saturating_sub(1);
    let accesses = tensor_accesses(graph, liveness);
    let mut object_of = Vec::with_capacity(liveness.buffers.len());
    let mut objects = Vec::new();
    for b in &liveness.buffers {
        let mut list: Vec<Access> = Vec::new();
        for &(t, _) in &b.members {
            let tensor = &liveness.tensors[t];
            if tensor.kind == TensorKind::Input {
                list.push(Access {
                    step: 0,
                    write: true,
                });
            }
            if tensor.kind == TensorKind::Output {
                list.push(Access {
                    step: last_step,
                    write: false,
                });
            }
            list.extend(accesses[t].iter().map(|a| Access {
                step: a.step,
                write: a.write,
            }));
        }
        list.sort_by_key(|a| (a.step, !a.write));
        list.dedup_by(|b, a| {
            let same = a.step == b.step;
            a.write |= same && b.write;
            same
        });
        let size = b.bytes.next_multiple_of(alignment);
        if size == 0 || list.is_empty() {
            object_of.push(None);
            continue;
        }
        list[0].write = true;
        object_of.push(Some(objects.len()));
        objects.push(Object {
            size,
            accesses: list,
        });
    }
    let problem = Offload {
        objects,
        budget,
        alignment,
    };
    let outcome = offload::solve(&problem, options).map_err(|e| match e {
        Infeasible::Step { step, bytes } => {
            let node = liveness.order[step];
            input_error!(
                "--budget {budget}: too small: step {step}, {}, reads and writes {bytes} bytes at once, so no budget below {bytes} can work",
                graph.nodes[node].label(node)
            )
        }
        Infeasible::NoPlan => input_error!(
            "--budget {budget}: no placement found (every step fits alone, but fragmentation defeats both planners); try a slightly larger budget"
        ),
    })?;
    let stays = &outcome.plan.residency.stays;
    let mut offsets = vec![0; liveness.buffers.len()];
    let mut transfers = Vec::new();
    for (b, o) in object_of.iter().enumerate() {
        let Some(o) = *o else { continue };
        offsets[b] = stays[o].first().map_or(0, |s| s.offset);
        let mut dirty = false;
        let mut list = problem.objects[o].accesses.iter().peekable();
        for pair in stays[o].windows(2) {
            while let Some(a) = list.next_if(|a| a.step <= pair[0].to) {
                dirty |= a.write;
            }
            let (out_after, in_before) = (pair[0].to, pair[1].from);
            let mut held: Vec<String> = liveness.buffers[b]
                .members
                .iter()
                .filter(|&&(t, _)| {
                    let t = &liveness.tensors[t];
                    t.first <= out_after && t.last >= in_before
                })
                .map(|&(t, _)| graph.values[liveness.tensors[t].value].name.clone())
                .collect();
            if held.is_empty() {
                continue;
            }
            let tensor = held.remove(0);
            transfers.push(Transfer {
                tensor,
                aliases: held,
                out_after,
                in_before,
                bytes: problem.objects[o].size,
                copy_out: dirty,
            });
            dirty = false;
        }
    }
    let baseline = outcome.baseline.as_ref();
    Ok(BudgetPlan {
        offsets,
        arena: outcome.plan.arena,
        info: OffloadInfo {
            budget,
            method: outcome.method.to_string(),
            migrated_bytes: outcome.plan.migrated,
            segments_migrated_bytes: outcome.segments_migrated,
            spill_migrated_bytes: outcome.spill_migrated,
            baseline: "farthest next use".into(),
            baseline_migrated_bytes: baseline.map(|p| p.migrated),
            transfers,
        },
    })
}
