//! The modes inside the planning pass: [`prepare`] adjusts the DSA problem before it is solved
//! (partition), [`finish`] rewrites the table after the flat plan (partition labels, tiers,
//! budget), [`summary`] adds the mode's outcome to the one-line summary.

use anyhow::Result;

use super::budget::plan_budget;
use super::hierarchy::Tier;
use super::offload;
use super::partition::Partition;
use super::sharing::{self, Shared};
use super::tiers::plan_tiers;
use crate::emit::{OffloadInfo, Table, main_arena, tensor_entries};
use crate::ir::{Graph, Model};
use crate::liveness::{Liveness, LivenessOptions, Sharing, analyse_with};
use crate::plan::Problem;
use crate::plan::budget::{Budget, Ending};

/// Which advanced mode to run, with its settings (the default runs none).
#[derive(Clone, Debug, Default)]
pub struct ModeOptions {
    /// Memory tiers, fastest first (hierarchy mode when not empty).
    pub tiers: Vec<Tier>,
    /// Steps per segment of the hierarchy search.
    pub segment: usize,
    /// Device budget in bytes (offload mode).
    pub budget: Option<u64>,
    /// Compute units (partition mode).
    pub partition: Option<Partition>,
    /// Limits of the offload search (its time limit, `--search-time`, bounds the hierarchy
    /// search too).
    pub offload: offload::Options,
    /// Work units the hierarchy or budget search may spend (`--search-work`; default
    /// [`crate::plan::WORK_PER_SECOND`] per second of the search time).
    pub search_work: Option<u64>,
}

impl ModeOptions {
    /// The budget of a mode's search starting now: `search_work` units (or
    /// [`Budget::for_time`] of the search time), that budget's safety stop, and
    /// `planning`'s cancel flag.
    pub fn search_budget(&self, planning: &Budget) -> Budget {
        let timed = Budget::within(self.offload.time_limit);
        Budget {
            work: self.search_work.unwrap_or(timed.work),
            cancel: planning.cancel.clone(),
            progress: planning.progress.clone(),
            ..timed
        }
    }
}

/// The flat plan a mode starts from: the analysis, the partition's sharing, and the solved
/// problem's offsets.
pub struct FlatPlan<'a> {
    /// The liveness analysis that was planned.
    pub liveness: &'a Liveness,
    /// What partition mode prepared, if it ran.
    pub shared: Option<Shared>,
    /// One offset per buffer of `liveness`.
    pub offsets: &'a [u64],
}

/// Partition mode: marks the graph and adjusts `problem` before it is solved.
pub fn prepare(
    model: &Model,
    liveness: &Liveness,
    modes: &ModeOptions,
    problem: &mut Problem,
) -> Result<Option<Shared>> {
    let alignment = problem.alignment;
    modes
        .partition
        .as_ref()
        .map(|p| sharing::prepare(model, liveness, p, alignment, problem))
        .transpose()
}

/// Rewrites the flat plan's table for the chosen mode; a search gets
/// [`ModeOptions::search_budget`] of `planning` and is listed in `stats.searches`.
pub fn finish(
    graph: &Graph,
    flat: FlatPlan,
    options: LivenessOptions,
    modes: &ModeOptions,
    planning: &Budget,
    table: &mut Table,
) -> Result<()> {
    let FlatPlan {
        liveness,
        shared,
        offsets,
    } = flat;
    if let Some(shared) = &shared {
        sharing::annotate(liveness, shared, offsets, table);
    }
    if !modes.tiers.is_empty() {
        let search = modes.search_budget(planning);
        search.report_phase("tier search");
        let plan = plan_tiers(
            graph,
            &liveness.order,
            options,
            &modes.tiers,
            modes.segment,
            &search,
        )?;
        record_search(table, "hierarchy", plan.ended);
        table.arenas = plan.arenas;
        table.tensors = plan.tensors;
        table.hierarchy = Some(plan.info);
        table.stats.planner = "hierarchy".into();
        table.stats.proven_optimal = false;
    }
    if let Some(budget) = modes.budget {
        let arena = table.arenas.iter().map(|a| a.bytes).sum::<u64>();
        if arena <= budget {
            table.offload = Some(OffloadInfo {
                budget,
                method: "none needed".into(),
                migrated_bytes: 0,
                segments_migrated_bytes: None,
                spill_migrated_bytes: None,
                baseline: "farthest next use".into(),
                baseline_migrated_bytes: Some(0),
                transfers: Vec::new(),
            });
        } else {
            let apart;
            let mut candidates = vec![liveness];
            if liveness.part_of.iter().any(Option::is_some)
                || liveness.sharing.iter().any(|s| {
                    matches!(
                        s,
                        Some(Sharing::Alias {
                            offset: Some(_),
                            ..
                        })
                    )
                })
            {
                apart = analyse_with(graph, liveness.order.clone(), options, &|_| false)?;
                candidates.push(&apart);
            }
            let search = modes.search_budget(planning);
            search.report_phase("budget search");
            let (plan, liveness) = plan_budget(
                graph,
                &candidates,
                options.alignment,
                budget,
                &modes.offload,
                &search,
            )?;
            for &(name, ended) in &plan.searches {
                record_search(table, name, ended);
            }
            table.tensors = tensor_entries(graph, liveness, &plan.tensor_offsets);
            table.arenas = main_arena(plan.arena);
            table.stats.planner = format!("offload-{}", plan.info.method);
            table.stats.proven_optimal = false;
            table.offload = Some(plan.info);
        }
    }
    Ok(())
}

/// Lists a mode's search in the table's `stats.searches`.
fn record_search(table: &mut Table, planner: &str, ended: Ending) {
    table.stats.searches.push(crate::emit::SearchEnd {
        planner: planner.to_string(),
        ended_by: ended.name().to_string(),
    });
}

/// The mode's outcome for the one-line summary (empty when no mode ran).
pub fn summary(table: &Table) -> String {
    let mut s = String::new();
    if let Some(h) = &table.hierarchy {
        let drop = if h.cost_initial > 0.0 {
            100.0 * (1.0 - h.cost_final / h.cost_initial)
        } else {
            0.0
        };
        s += &format!(
            "; E(s) {:.0} -> {:.0} cycles ({drop:.1}% less, {} actions, fastest tier {:.0}% full)",
            h.cost_initial,
            h.cost_final,
            h.actions,
            100.0 * h.fill.first().copied().unwrap_or(0.0)
        );
    }
    if let Some(o) = &table.offload {
        s += &format!(
            "; budget {}: migrated {} bytes in {} transfers ({}; segments {}), {} {}",
            o.budget,
            o.migrated_bytes,
            o.transfers.len(),
            o.method,
            o.segments_migrated_bytes
                .map_or("no plan".into(), |b| format!("{b} bytes")),
            o.baseline,
            o.baseline_migrated_bytes
                .map_or("cannot fit".into(), |b| format!("{b} bytes"))
        );
    }
    if let Some(p) = &table.partition {
        let shared = table
            .tensors
            .iter()
            .filter(|t| !t.placement.shared_with.is_empty())
            .count();
        let quantised = table
            .tensors
            .iter()
            .filter(|t| t.placement.stored_dtype.is_some())
            .count();
        s += &format!(
            "; {} units, {shared} shared buffers, {quantised} stored quantised",
            p.units.len()
        );
    }
    s
}
