//! The pass over ranges of sizes (`--dim sequence=1..512`, see [`crate::ranges`]): typing at
//! the upper corner and over the ranges, the order, the parametric and upper-bound plans, and
//! both verifiers.

use std::path::Path;

use anyhow::{Result, anyhow};

use super::solve::{chosen_order, fixed_table, plan_options, plan_proto, solve_checked};
use super::{Options, Planned, Timings, prefix, problem_of, type_model};
use crate::infer::InferOptions;
use crate::liveness::{Liveness, analyse_with};
use crate::onnx::proto::ModelProto;
use crate::plan::{self, Budget, Point, SymProblem, plan_parametric};
use crate::ranges::{bound_at, point_of, sizes, sizes_vary, specialise};
use crate::{bail_input, schedule, verify};

/// Plans the model over `options.infer.ranges`; with `options.at`, writes the plan evaluated
/// at that point instead.
pub fn plan_ranges(
    path: &Path,
    proto: ModelProto,
    options: &Options,
    budget: &Budget,
) -> Result<Planned> {
    refuse_unsupported(options)?;
    let ranges = &options.infer.ranges;
    let upper: Point = ranges.iter().map(|(s, &(_, hi))| (s.clone(), hi)).collect();
    let (original, symbolic, report) = type_model(path, proto.clone(), &options.infer)?;
    if !sizes_vary(&symbolic.graph, ranges) {
        // No size depends on the ranges: one plan of fixed sizes holds at every point, and
        // it may share bytes by slices (a plan over ranges may not).
        if !options.at.is_empty() {
            point_of(&options.at, &options.infer.ranges)?;
        }
        let names: Vec<&str> = ranges.keys().map(String::as_str).collect();
        eprintln!(
            "note: no tensor's size depends on {}: planned as one size",
            names.join(", ")
        );
        let fixed = Options {
            infer: InferOptions {
                ranges: Default::default(),
                ..options.infer.clone()
            },
            ..options.clone()
        };
        return plan_proto(path, proto, &fixed, budget);
    }
    let (_, at_max, _) = type_model(path, proto.clone(), &bound_at(&options.infer, &upper))?;
    let graph = &at_max.graph;
    let alignment = options.liveness.alignment.max(1);
    let analyse =
        |order: &[usize]| analyse_with(graph, order.to_vec(), options.liveness, &|_| false);
    let bound = |l: &Liveness| plan::max_live_bound(&problem_of(l, alignment));
    let stored = schedule::topological_order(graph).map_err(|e| prefix(path, e))?;
    let stored_liveness = analyse(&stored).map_err(|e| prefix(path, e))?;
    let stored_bound = bound(&stored_liveness);
    // `--schedule memory`: the order whose peak is lowest at the upper corner, where the
    // upper-bound plan is made; every size below it is planned in the same order.
    let (liveness, method) = chosen_order(
        graph,
        (&stored, stored_liveness),
        (options.schedule, crate::schedule::FRONTIER_LIMITS),
        budget,
        (&analyse, &analyse),
        &bound,
    )
    .map_err(|e| prefix(path, e))?;
    let sized =
        sizes::size(&symbolic.graph, graph, &liveness, ranges).map_err(|e| prefix(path, e))?;
    for (name, reason) in sized.upper_bound_reasons(graph, &liveness) {
        eprintln!("note: '{name}' is planned at its upper bound: {reason}");
    }
    let problem = SymProblem {
        buffers: sized.buffers(&liveness),
        alignment,
        ranges: ranges.clone(),
    };
    let started = std::time::Instant::now();
    let (parametric, _) = plan_parametric(&problem, &plan_options(options, budget))
        .map_err(|e| crate::input_error!("{}: cannot plan over the ranges: {e}", path.display()))?;
    let concrete = problem_of(&liveness, alignment);
    let solution = solve_checked(path, &concrete, options, budget)?;
    let plan_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut table = fixed_table(
        path,
        &original,
        &at_max,
        &liveness,
        (&concrete, &solution),
        options,
        (method, stored_bound),
    );
    table.options.ranges = ranges
        .iter()
        .map(|(s, &(lo, hi))| (s.clone(), [lo, hi]))
        .collect();
    let (_, arena_at_max) = parametric
        .evaluate(&upper)
        .ok_or_else(|| anyhow!("bug: the parametric plan has no value at the upper corner"))?;
    sized.write(&mut table, &liveness, &parametric, arena_at_max);
    let (problems, proof) = verify::check_range_table(graph, &symbolic.graph, &table);
    let Some(proof) = proof.filter(|_| problems.is_empty()) else {
        return Err(anyhow!(
            "bug: the plan over ranges for {} failed verification: {}",
            path.display(),
            problems.join("; ")
        ));
    };
    if let Some(p) = &mut table.parametric {
        p.proof = proof;
    }
    let timings = Timings {
        plan_ms,
        total_ms: 0.0,
    };
    if options.at.is_empty() {
        return Ok(Planned {
            original,
            model: symbolic,
            table,
            report,
            timings,
            work: solution.work_spent(),
        });
    }
    let point = point_of(&options.at, &options.infer.ranges)?;
    let (_, at_point, _) = type_model(path, proto, &bound_at(&options.infer, &point))?;
    let fixed = specialise(
        &table,
        &liveness,
        &problem,
        &parametric,
        &point,
        &at_point.graph,
    )?;
    let problems = verify::check_table(&at_point.graph, &fixed);
    if !problems.is_empty() {
        return Err(anyhow!(
            "bug: the plan for {} evaluated at {point:?} failed verification: {}",
            path.display(),
            problems.join("; ")
        ));
    }
    Ok(Planned {
        original,
        model: at_point,
        table: fixed,
        report,
        timings,
        work: solution.work_spent(),
    })
}

/// Refuses what planning over ranges does not do: the advanced modes, splitting, and range
/// symbols that cannot be written in the expression grammar.
fn refuse_unsupported(options: &Options) -> Result<()> {
    let modes = &options.modes;
    if !modes.tiers.is_empty() || modes.budget.is_some() || modes.partition.is_some() {
        bail_input!("--tier, --budget and --partition plan one size: bind every --dim to a number");
    }
    if options.split.choice != crate::split::SplitChoice::Off {
        bail_input!("--split plans one size: bind every --dim to a number");
    }
    for name in options.infer.ranges.keys() {
        let mut chars = name.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') || name == "max" {
            bail_input!(
                "--dim {name}=LO..HI: a symbol planned over a range must be a name of letters, digits and '_' (it is written in expressions)"
            );
        }
    }
    Ok(())
}
