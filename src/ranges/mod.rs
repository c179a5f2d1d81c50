//! Planning over ranges of sizes (`--dim sequence=1..512`): one table holding two plans that
//! are both valid for every integer point of the ranges.
//!
//! - Inference runs twice: over the ranges (sizes are expressions in the symbols) and with
//!   every symbol at the upper end of its range (concrete sizes).
//! - The order and the buffers come from the model at the upper corner (in-place and whole
//!   aliases; no slice aliases, whose offsets would vary with the sizes). A buffer's size is
//!   the expression of its largest member, which must provably never decrease as a symbol
//!   grows; a buffer holding a tensor with no expression is planned at its size at the upper
//!   corner, its tensors marked `upper_bound` with the reason.
//! - The upper-bound plan is the plan at the upper corner (the table's `offset`s): sizes only
//!   shrink below it. The parametric plan ([`crate::plan::plan_parametric`]) gives every
//!   tensor an `offset_expr` and the table an `arena_expr`.
//! - The independent verifier checks both for every point before anything is written; with
//!   `--at`, the parametric plan evaluated at one point is written as a fixed table instead,
//!   checked by the fixed verifier against the model typed at that point.

pub mod data_dependent;
pub mod no_expression;
mod sizes;

use std::path::Path;

use anyhow::{Result, anyhow};

use crate::emit::{self, Table};
use crate::infer::InferOptions;
use crate::liveness::{Liveness, analyse_with};
use crate::onnx::proto::ModelProto;
use crate::pipeline::{
    Options, Planned, Timings, chosen_order, fixed_table, plan_options, prefix, problem_of,
    solve_checked, type_model,
};
use crate::plan::{self, Budget, ParametricPlan, Point, SymProblem, plan_parametric};
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
            point_of(options)?;
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
        return crate::pipeline::plan_proto(path, proto, &fixed, budget);
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
        options.schedule,
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
    let point = point_of(options)?;
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

/// True when the size of some value of `graph` mentions a symbol of `ranges`.
fn sizes_vary(graph: &crate::ir::Graph, ranges: &crate::symbolic::Ranges) -> bool {
    graph.values.iter().any(|v| {
        v.tensor_type()
            .is_some_and(|t| t.mentions(&|s| ranges.contains_key(s)))
    })
}

/// The options with the range symbols bound to `point`'s values instead.
pub fn bound_at(infer: &InferOptions, point: &Point) -> InferOptions {
    let mut bound = infer.clone();
    bound.ranges.clear();
    bound
        .dims
        .extend(point.iter().map(|(s, &v)| (s.clone(), v)));
    bound
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

/// The `--at` point: every range symbol given a value inside its range.
fn point_of(options: &Options) -> Result<Point> {
    let ranges = &options.infer.ranges;
    for (name, v) in &options.at {
        match ranges.get(name) {
            None => bail_input!(
                "--at {name}={v}: '{name}' is not planned over a range (--dim {name}=LO..HI)"
            ),
            Some(&(lo, hi)) if *v < lo || *v > hi => {
                bail_input!("--at {name}={v}: outside its range {lo}..{hi}")
            }
            _ => {}
        }
    }
    if let Some(name) = ranges.keys().find(|s| !options.at.contains_key(*s)) {
        bail_input!("--at: give '{name}' a value too (every range symbol needs one)");
    }
    Ok(options.at.clone())
}

/// The fixed table of the parametric plan evaluated at `point`: the range table's order and
/// sharing, every size and offset at the point, `graph` the model typed at the point.
fn specialise(
    table: &Table,
    liveness: &Liveness,
    problem: &SymProblem,
    parametric: &ParametricPlan,
    point: &Point,
    graph: &crate::ir::Graph,
) -> Result<Table> {
    let (offsets, arena) = parametric
        .evaluate(point)
        .ok_or_else(|| anyhow!("bug: the parametric plan has no value at {point:?}"))?;
    let concrete = problem.at(point)?;
    let member = emit::member_offsets(liveness, &offsets);
    let mut fixed = table.clone();
    fixed.options.ranges.clear();
    fixed
        .options
        .dims
        .extend(point.iter().map(|(s, &v)| (s.clone(), v)));
    fixed.options.specialised_io = true;
    fixed.parametric = None;
    fixed.arenas = emit::main_arena(arena);
    for (entry, offset) in fixed.tensors.iter_mut().zip(member) {
        let tensor = graph.value(&entry.name).and_then(|v| v.tensor_type());
        entry.shape = tensor.and_then(|t| crate::ir::concrete(t.shape.as_ref()?));
        entry.bytes = tensor.and_then(|t| t.bytes());
        entry.offset = offset;
        entry.symbolic = Default::default();
    }
    let lower = plan::max_live_bound(&concrete);
    fixed.stats.lower_bound_bytes = lower;
    fixed.stats.stored_lower_bound_bytes = lower;
    let align = fixed.options.alignment.max(1);
    fixed.stats.naive_bytes = fixed
        .tensors
        .iter()
        .filter(|t| t.offset.is_some())
        .map(|t| t.bytes.unwrap_or(0).next_multiple_of(align))
        .sum();
    fixed.stats.planner = "parametric".to_string();
    fixed.stats.proven_optimal = arena == lower;
    Ok(fixed)
}
