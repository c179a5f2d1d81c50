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
use crate::plan::budget::{Budget, Ending};

/// The budget plan of a model.
pub struct BudgetPlan {
    /// Offset of each tensor of the analysis when it is made (a buffer that came back from
    /// host memory at another offset holds the tensors made after that there).
    pub tensor_offsets: Vec<Option<u64>>,
    /// Device bytes used.
    pub arena: u64,
    /// Budget, transfers, and the baseline's migration.
    pub info: OffloadInfo,
    /// Every search that ran (over all the candidate analyses) and what ended it.
    pub searches: Vec<(&'static str, Ending)>,
}

/// Plans within `budget` device bytes over each candidate analysis of the same order (e.g.
/// with slice aliases, whose larger buffers lower the bound, and without, whose smaller
/// buffers can wait in host memory separately); keeps the plan that migrates least, with the
/// analysis it was made on. When none fits, says why for the most permissive candidate. The
/// candidates share `work` equally.
pub fn plan_budget<'a>(
    graph: &Graph,
    candidates: &[&'a Liveness],
    alignment: u64,
    budget: u64,
    options: &Options,
    work: &Budget,
) -> Result<(BudgetPlan, &'a Liveness)> {
    let mut best: Option<(BudgetPlan, &Liveness)> = None;
    let mut refusal: Option<(Infeasible, &Liveness)> = None;
    let mut searches = Vec::new();
    let share = work.part(1, candidates.len() as u64);
    for &liveness in candidates {
        match plan_one(graph, liveness, alignment, budget, options, &share) {
            Ok(plan) => {
                searches.extend(plan.searches.iter().copied());
                if best
                    .as_ref()
                    .is_none_or(|b| plan.info.migrated_bytes < b.0.info.migrated_bytes)
                {
                    best = Some((plan, liveness));
                }
            }
            Err(why) => {
                let floor = |w: &Infeasible| match *w {
                    Infeasible::Step { bytes, .. } => bytes,
                    Infeasible::NoPlan => 0,
                };
                if refusal.as_ref().is_none_or(|r| floor(&why) < floor(&r.0)) {
                    refusal = Some((why, liveness));
                }
            }
        }
    }
    if let Some((mut plan, liveness)) = best {
        plan.searches = searches;
        return Ok((plan, liveness));
    }
    let (why, liveness) = refusal.expect("at least one candidate");
    Err(match why {
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
    })
}

/// Plans one analysis's buffers within `budget` device bytes.
fn plan_one(
    graph: &Graph,
    liveness: &Liveness,
    alignment: u64,
    budget: u64,
    options: &Options,
    work: &Budget,
) -> Result<BudgetPlan, Infeasible> {
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
    let outcome = offload::solve(&problem, options, work)?;
    let stays = &outcome.plan.residency.stays;
    let mut tensor_offsets = vec![None; liveness.tensors.len()];
    let mut transfers = Vec::new();
    for (b, o) in object_of.iter().enumerate() {
        let Some(o) = *o else {
            for &(t, inner) in &liveness.buffers[b].members {
                tensor_offsets[t] = Some(inner);
            }
            continue;
        };
        for &(t, inner) in &liveness.buffers[b].members {
            let born = liveness.tensors[t].first;
            let stay = stays[o]
                .iter()
                .rev()
                .find(|s| s.from <= born)
                .or(stays[o].first());
            tensor_offsets[t] = Some(stay.map_or(0, |s| s.offset) + inner);
        }
        let mut dirty = false;
        let mut list = problem.objects[o].accesses.iter().peekable();
        for pair in stays[o].windows(2) {
            while let Some(a) = list.next_if(|a| a.step <= pair[0].to) {
                dirty |= a.write;
            }
            let (out_after, in_before) = (pair[0].to, pair[1].from);
            let mut held: Vec<(String, u64)> = liveness.buffers[b]
                .members
                .iter()
                .filter(|&&(t, _)| {
                    let t = &liveness.tensors[t];
                    t.first <= out_after && t.last >= in_before
                })
                .map(|&(t, inner)| (graph.values[liveness.tensors[t].value].name.clone(), inner))
                .collect();
            if held.is_empty() {
                continue;
            }
            let (tensor, inner) = held.remove(0);
            transfers.push(Transfer {
                tensor,
                aliases: held.into_iter().map(|(name, _)| name).collect(),
                out_after,
                in_before,
                in_offset: Some(pair[1].offset + inner),
                bytes: problem.objects[o].size,
                copy_out: dirty,
            });
            dirty = false;
        }
    }
    let baseline = outcome.baseline.as_ref();
    Ok(BudgetPlan {
        tensor_offsets,
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
        searches: outcome.searches,
    })
}
