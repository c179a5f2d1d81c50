//! The independent plan verifier: re-derives lifetimes, sizes and sharing legality from the
//! model and checks an allocation table against them. It shares no code with the planners or
//! the liveness analysis beyond the operator rule table (a fact about kernels).

mod alias;
mod bounds;
mod branches;
mod ceiling;
mod expr;
mod lifetimes;
mod modes;
mod overlap;
mod range;
mod scatter;
mod strided;
mod units;

use std::collections::HashMap;

use crate::emit::Table;
use crate::ir::{Graph, ValueKind};

pub use bounds::check_data_dependent;
pub use range::EXHAUSTIVE_POINTS;

/// Checks `table` against the typed `graph`; returns every problem found (empty = valid).
pub fn check_table(graph: &Graph, table: &Table) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(steps) = lifetimes::check_schedule(graph, &table.schedule, &mut problems) else {
        return problems;
    };
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, t) in table.tensors.iter().enumerate() {
        if index.insert(t.name.as_str(), i).is_some() {
            problems.push(format!("tensor '{}' is listed twice", t.name));
        }
    }
    for value in &graph.values {
        if value.kind != ValueKind::OuterScope && !index.contains_key(value.name.as_str()) {
            problems.push(format!("tensor '{}' is missing from the table", value.name));
        }
    }
    let scatters = scatter::check_scatters(graph, table, &steps, &mut problems);
    let units = units::check_units(graph, table, &steps, &mut problems);
    for entry in &table.tensors {
        let Some(value) = graph.value(&entry.name) else {
            problems.push(format!("tensor '{}' is not in the model", entry.name));
            continue;
        };
        let facts = (steps.as_slice(), scatters.as_slice(), &units);
        lifetimes::check_entry(graph, value, entry, facts, table, &mut problems);
    }
    branches::check_branches(graph, table, &mut problems);
    let runs = table.runs();
    modes::check_modes(graph, table, &index, &steps, &runs, &mut problems);
    if !problems.is_empty() {
        return problems;
    }
    let facts = (steps.as_slice(), runs.as_slice(), &units);
    let classes = alias::check_claims(graph, table, &index, facts, &mut problems);
    modes::check_moves_together(table, &index, &classes, &mut problems);
    overlap::check_overlaps(table, &index, &classes, &runs, &mut problems);
    problems
}

/// Checks a table planned over ranges (`options.ranges`): the fixed upper-bound plan against
/// `at_max` (the model typed with every symbol at the upper end of its range), and the
/// expressions and parametric offsets for every point against `symbolic` (the model typed
/// over the ranges). Returns the problems found and, when there are none, how the parametric
/// plan was proven (`exhaustive` or `symbolic`).
pub fn check_range_table(
    at_max: &Graph,
    symbolic: &Graph,
    table: &Table,
) -> (Vec<String>, Option<String>) {
    let mut problems = check_table(at_max, table);
    if !problems.is_empty() {
        return (problems, None);
    }
    let proof = range::check_ranges(symbolic, table, &mut problems);
    (problems, proof)
}
