//! Planning a typed model: the order, its liveness, the planners, the checked table.

use std::path::Path;
use std::time::Instant;

use anyhow::{Result, anyhow};

use super::{Options, Planned, ScheduleChoice, Timings, at_bound, file_name, prefix, type_model};
use crate::emit::{self, ModelInfo, Stats, Table, TableOptions};
use crate::ir::Model;
use crate::liveness::{Flips, Liveness, LivenessOptions, analyse_best, analyse_with};
use crate::onnx::proto::ModelProto;
use crate::plan::{self, Budget, PlanOptions, Problem};
use crate::schedule::FrontierLimits;
use crate::{schedule, verify};

/// The liveness of the order `schedule` chooses, and its method: the stored order (whose
/// analysis is given), or the memory-aware search's best under `bound` of `rank` (a quick
/// analysis), kept when `bound` of its full analysis `analyse` beats the stored order's. The
/// search's frontier candidates run within `frontier` (see [`schedule::memory_order`]).
pub(crate) fn chosen_order(
    graph: &crate::ir::Graph,
    (stored, stored_liveness): (&[usize], Liveness),
    (schedule, frontier): (ScheduleChoice, FrontierLimits),
    budget: &Budget,
    (rank, analyse): Analyses,
    bound: &dyn Fn(&Liveness) -> u64,
) -> Result<(Liveness, &'static str)> {
    if schedule == ScheduleChoice::Stored {
        return Ok((stored_liveness, "stored"));
    }
    budget.report_phase("ordering");
    let mut score = |order: &[usize]| rank(order).map(|l| bound(&l));
    let (best, _) = schedule::memory_order(graph, stored, &mut score, frontier)?;
    if best.method == "stored" {
        return Ok((stored_liveness, "stored"));
    }
    let chosen = analyse(&best.order)?;
    if bound(&chosen) < bound(&stored_liveness) {
        Ok((chosen, best.method))
    } else {
        Ok((stored_liveness, "stored"))
    }
}

/// A quick analysis of an order (to rank candidate orders by) and the full one.
pub(crate) type Analyses<'a> = (
    &'a dyn Fn(&[usize]) -> Result<Liveness>,
    &'a dyn Fn(&[usize]) -> Result<Liveness>,
);

/// What a plan is for. A plan that may be written is checked by the independent verifier,
/// its order search runs the frontier search within [`schedule::FRONTIER_LIMITS`], and its
/// liveness flips every slice-alias site ([`Flips::All`]). A split trial, which only ranks a
/// rewrite and is planned again if chosen, is not verified, its frontier search runs within
/// [`schedule::TRIAL_FRONTIER_LIMITS`], and it flips the sites near its peak only
/// ([`Flips::NearPeak`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A plan the pass may write.
    Output,
    /// A split search's trial.
    Trial,
}

impl Purpose {
    /// Which slice-alias sites the liveness analysis flips.
    fn flips(self) -> Flips {
        match self {
            Purpose::Output => Flips::All,
            Purpose::Trial => Flips::NearPeak,
        }
    }

    /// The frontier search's limits.
    fn frontier(self) -> FrontierLimits {
        match self {
            Purpose::Output => schedule::FRONTIER_LIMITS,
            Purpose::Trial => schedule::TRIAL_FRONTIER_LIMITS,
        }
    }
}

/// The pass on a decoded model; the table's `model.sha256` is left empty for the caller.
pub(crate) fn plan_proto(
    path: &Path,
    proto: ModelProto,
    options: &Options,
    budget: &Budget,
) -> Result<Planned> {
    plan_for(path, proto, options, budget, Purpose::Output)
}

/// [`plan_proto`] for `purpose`.
pub(crate) fn plan_for(
    path: &Path,
    proto: ModelProto,
    options: &Options,
    budget: &Budget,
    purpose: Purpose,
) -> Result<Planned> {
    let (original, mut model, report) = type_model(path, proto, &options.infer)?;
    let qdq = options.qdq_in_effect();
    crate::units::mark(&mut model.graph, qdq);
    // Data-dependent counts are planned at their bounds: the model typed there.
    let at_bound = if report.data_dependent.is_empty() {
        None
    } else {
        let mut typed = type_model(path, original.clone(), &at_bound(&options.infer, &report))?.1;
        crate::units::mark(&mut typed.graph, qdq);
        Some(typed)
    };
    let typed = at_bound.as_ref().unwrap_or(&model);
    let graph = &typed.graph;
    let alignment = options.liveness.alignment.max(1);
    let stored = schedule::topological_order(graph).map_err(|e| prefix(path, e))?;
    let stored = schedule::keep_units_together(graph, &stored)?;
    let bound = |l: &Liveness| plan::max_live_bound(&problem_of(l, alignment));
    let counted =
        crate::ranges::data_dependent::nodes_touching_counts(&model.graph, &report.data_dependent)
            .map_err(|e| prefix(path, e))?;
    let liveness_of = |order: &[usize], flips: Flips| {
        let order = &schedule::keep_units_together(graph, order)?;
        if counted.is_empty() {
            analyse_best(graph, order, options.liveness, &bound, flips)
        } else {
            // Sizes vary below the bounds: no strided views, no slice aliases at nodes
            // touching a data-dependent size.
            let fixed_layout = LivenessOptions {
                strided: false,
                blockwise: false,
                ..options.liveness
            };
            analyse_with(graph, order.to_vec(), fixed_layout, &|n| {
                !counted.contains(&n)
            })
        }
    };
    let (quick, best_liveness) = (
        |order: &[usize]| liveness_of(order, Flips::None),
        |order: &[usize]| liveness_of(order, purpose.flips()),
    );
    let stored_liveness = best_liveness(&stored).map_err(|e| prefix(path, e))?;
    let stored_bound = bound(&stored_liveness);
    let (liveness, method) = chosen_order(
        graph,
        (&stored, stored_liveness),
        (options.schedule, purpose.frontier()),
        budget,
        (&quick, &best_liveness),
        &bound,
    )
    .map_err(|e| prefix(path, e))?;
    let mut problem = problem_of(&liveness, alignment);
    let shared = crate::modes::prepare(typed, &liveness, &options.modes, &mut problem)?;

    let plan_started = Instant::now();
    let solution = solve_checked(path, &problem, options, budget)?;
    let plan_ms = plan_started.elapsed().as_secs_f64() * 1e3;

    let mut table = fixed_table(
        path,
        &original,
        typed,
        &liveness,
        (&problem, &solution),
        options,
        (method, stored_bound),
    );
    crate::ranges::data_dependent::mark(
        &mut table,
        &model.graph,
        &report.data_dependent,
        &Default::default(),
    )
    .map_err(|e| prefix(path, e))?;
    crate::modes::finish(
        graph,
        crate::modes::FlatPlan {
            liveness: &liveness,
            shared,
            offsets: &solution.offsets,
        },
        options.liveness,
        &options.modes,
        budget,
        &mut table,
    )
    .map_err(|e| prefix(path, e))?;
    let mut problems = Vec::new();
    if purpose == Purpose::Output {
        problems = verify::check_table(graph, &table);
        verify::check_data_dependent(&model.graph, &table, &mut problems);
    }
    if !problems.is_empty() {
        return Err(anyhow!(
            "bug: the plan for {} failed verification: {}",
            path.display(),
            problems.join("; ")
        ));
    }
    Ok(Planned {
        original,
        model,
        table,
        report,
        timings: Timings {
            plan_ms,
            total_ms: 0.0,
        },
        work: solution.work_spent(),
    })
}

/// Solves `problem` with the chosen planner within `budget`, and checks the offsets with the
/// planner core's own check (the independent verifier runs on the table later).
pub(crate) fn solve_checked(
    path: &Path,
    problem: &Problem,
    options: &Options,
    budget: &Budget,
) -> Result<plan::Solution> {
    let solution = plan::solve(problem, &plan_options(options, budget))
        .map_err(|e| crate::input_error!("{}: cannot plan: {e}", path.display()))?;
    plan::verify(problem, &solution).map_err(|e| {
        anyhow!(
            "bug: planner {} produced an invalid plan: {e}",
            solution.planner
        )
    })?;
    Ok(solution)
}

/// The planner options of the pass.
pub(crate) fn plan_options(options: &Options, budget: &Budget) -> PlanOptions {
    PlanOptions {
        planner: options.planner,
        budget: budget.clone(),
        ..PlanOptions::default()
    }
}

/// The table of a solved plan: the options, the model's identity (`sha256` left empty), the
/// order and the `method` that chose it (with the stored order's bound), the arena, the stats
/// and every tensor at its solved offset.
pub(crate) fn fixed_table(
    path: &Path,
    original: &ModelProto,
    model: &Model,
    liveness: &Liveness,
    (problem, solution): (&Problem, &plan::Solution),
    options: &Options,
    (method, stored_bound): (&str, u64),
) -> Table {
    let graph = &model.graph;
    let alignment = options.liveness.alignment.max(1);
    let table_options = TableOptions {
        alignment,
        inplace: options.liveness.inplace,
        alias: options.liveness.alias,
        include_io: options.liveness.include_io,
        dims: options.infer.dims.clone(),
        input_shapes: options.infer.input_shapes.clone(),
        input_values: options.infer.input_values.clone(),
        specialised_io: options.infer.binds_shapes(),
        ranges: Default::default(),
        // How the Q/DQ nodes ran: as units when any formed (`--qdq units`, outside plans over
        // ranges), else literally.
        qdq: crate::units::has_qdq(graph).then(|| {
            let ran = match graph.units.is_empty() {
                true => crate::units::QdqChoice::Literal,
                false => crate::units::QdqChoice::Units,
            };
            ran.name().to_string()
        }),
    };
    Table {
        format: emit::FORMAT.to_string(),
        model: ModelInfo {
            file: file_name(path),
            sha256: String::new(),
            annotated_sha256: None,
            ir_version: original.ir_version(),
            opsets: model.opsets.0.clone(),
        },
        schedule: liveness.order.clone(),
        arenas: emit::main_arena(solution.arena),
        stats: Stats {
            lower_bound_bytes: solution.lower_bound.max(plan::max_live_bound(problem)),
            naive_bytes: emit::naive_bytes(liveness, &table_options),
            planner: solution.planner.clone(),
            schedule: method.to_string(),
            stored_lower_bound_bytes: stored_bound,
            proven_optimal: solution.proven_optimal,
            searches: solution
                .searches
                .iter()
                .map(|s| emit::SearchEnd {
                    planner: s.planner.clone(),
                    ended_by: s.ended_by.name().to_string(),
                })
                .collect(),
        },
        tensors: emit::tensor_entries(
            graph,
            liveness,
            &emit::member_offsets(liveness, &solution.offsets),
        ),
        options: table_options,
        branches: emit::branch_choices(graph),
        hierarchy: None,
        offload: None,
        partition: None,
        splits: None,
        parametric: None,
        data_dependent: Vec::new(),
    }
}

/// The DSA problem of the analysis: one buffer per group, padded to the alignment, live over
/// the half-open step range `[first, last + 1)`.
pub fn problem_of(liveness: &Liveness, alignment: u64) -> Problem {
    Problem {
        buffers: liveness
            .buffers
            .iter()
            .map(|b| plan::Buffer {
                size: b.bytes.next_multiple_of(alignment),
                start: b.first as u32,
                end: b.last as u32 + 1,
            })
            .collect(),
        alignment,
    }
}
