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
pub(crate) mod sizes;

use anyhow::{Result, anyhow};

use crate::bail_input;
use crate::emit::{self, Table};
use crate::infer::InferOptions;
use crate::liveness::Liveness;
use crate::plan::{self, ParametricPlan, Point, SymProblem};

/// True when the size of some value of `graph` mentions a symbol of `ranges`.
pub(crate) fn sizes_vary(graph: &crate::ir::Graph, ranges: &crate::symbolic::Ranges) -> bool {
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

/// The `--at` point `at`: every symbol of `ranges` given a value inside its range.
pub(crate) fn point_of(
    at: &std::collections::BTreeMap<String, i64>,
    ranges: &crate::symbolic::Ranges,
) -> Result<Point> {
    for (name, v) in at {
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
    if let Some(name) = ranges.keys().find(|s| !at.contains_key(*s)) {
        bail_input!("--at: give '{name}' a value too (every range symbol needs one)");
    }
    Ok(at.clone())
}

/// The fixed table of the parametric plan evaluated at `point`: the range table's order and
/// sharing, every size and offset at the point, `graph` the model typed at the point.
pub(crate) fn specialise(
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
        entry.shape = tensor.and_then(crate::ir::TensorType::concrete_shape);
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
