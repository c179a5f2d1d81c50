//! Repeated layers cut alike: once a round has chosen a row chain, the candidates cutting
//! other layers as it does (the same operators, axes and block count) are rewritten and
//! planned with it at once. Cut alone, one of several equal layers lowers nothing while the
//! others peak; cut together, they may.

use std::collections::HashSet;

use anyhow::Result;

use super::candidates::{Candidate, Cut};
use super::rewrite::Rewritten;
use super::rows::rewrite::{RowCut, rewrite_rows};
use super::rows::{self, Blocking};
use super::{SplitOptions, TrialOrder, TrialPlan};
use crate::onnx::proto::ModelProto;

/// Alike layers cut together and planned.
pub struct Batch {
    /// The candidates cut, the chosen one first.
    pub taken: Vec<usize>,
    /// The blocking each is cut by, within its share of the MACs left.
    pub blockings: Vec<Blocking>,
    /// The model with all of them cut.
    pub rewritten: Rewritten,
    /// Its plan.
    pub trial: TrialPlan,
}

/// What cutting a chosen candidate's alike layers together gave.
pub enum Together {
    /// No other candidate cuts a layer alike.
    Alone,
    /// The search's budget ran out planning them.
    Spent,
    /// The layers, cut and planned.
    Batch(Box<Batch>),
}

/// Where a round stands: the model (`proto`, planned as `planned`), how many more chains it
/// may cut (`room`), the MACs left and the chains cut so far.
pub struct Round<'a> {
    /// The model the round cuts.
    pub proto: &'a ModelProto,
    /// Its plan.
    pub planned: &'a TrialPlan,
    /// How many chains beyond the chosen one the round may cut.
    pub room: usize,
    /// The multiply-accumulates the allowance has left.
    pub left: u64,
    /// The chains cut in earlier rounds (new labels count on from it).
    pub done: usize,
}

/// The candidate `chosen` of `candidates` cut together with the others that cut its layers
/// alike, each recomputing at most its share of the MACs left, planned by `plan`. A chain
/// with passes leaves their share to the alike layers the batch does not take (a T5
/// encoder's last feed-forward, which no hot step reached yet).
pub fn together(
    candidates: &[Candidate],
    chosen: usize,
    round: &Round,
    options: &SplitOptions,
    plan: &dyn Fn(&mut ModelProto, TrialOrder) -> Result<Option<TrialPlan>>,
) -> Result<Together> {
    let graph = &round.planned.model.graph;
    let alike = alike(candidates, chosen, graph, round.room);
    if alike.is_empty() {
        return Ok(Together::Alone);
    }
    let layers = match &candidates[chosen].cut {
        Cut::Rows(b) => rows::alike_quantizers(graph, &b.chain),
        Cut::Tiles(..) => 1,
    };
    let share = round.left / (alike.len() as u64).max(layers).max(1);
    let (taken, blockings): (Vec<usize>, Vec<Blocking>) = alike
        .into_iter()
        .map(|(i, b)| (i, b.within(graph, share)))
        .unzip();
    let refs: Vec<&Blocking> = blockings.iter().collect();
    let mut rewritten = rewrite_layers(round.proto, round.planned, &refs, round.done, options);
    Ok(match plan(&mut rewritten.model, options.row_order)? {
        Some(trial) => Together::Batch(Box::new(Batch {
            taken,
            blockings,
            rewritten,
            trial,
        })),
        None => Together::Spent,
    })
}

/// The candidates that cut repeated layers as the row chain `chosen` does, `chosen` first:
/// the same pattern, their own nodes (all but the shared ones) disjoint; at most `room`
/// beyond `chosen`, and none when no other is alike.
fn alike<'c>(
    candidates: &'c [Candidate],
    chosen: usize,
    graph: &crate::ir::Graph,
    room: usize,
) -> Vec<(usize, &'c Blocking)> {
    let Cut::Rows(first) = &candidates[chosen].cut else {
        return Vec::new();
    };
    let pattern = candidates[chosen].pattern(graph);
    // Shared nodes stay in the graph, so chains copying the same ones are disjoint.
    let own = |b: &'c Blocking| {
        let chain = &b.chain;
        chain.nodes.iter().filter(|n| !chain.shared.contains(n))
    };
    let mut used: HashSet<usize> = own(first).copied().collect();
    let mut found = vec![(chosen, first)];
    for (i, c) in candidates.iter().enumerate() {
        if found.len() > room {
            break;
        }
        let Cut::Rows(b) = &c.cut else { continue };
        if i == chosen || c.pattern(graph) != pattern || own(b).any(|n| used.contains(n)) {
            continue;
        }
        used.extend(own(b).copied());
        found.push((i, b));
    }
    if found.len() < 2 {
        found.clear();
    }
    found
}

/// The model `proto` (planned as `planned`) with the row chains of repeated layers
/// (disjoint) cut at once; their labels count on from `done`.
pub fn rewrite_layers(
    proto: &ModelProto,
    planned: &TrialPlan,
    blockings: &[&Blocking],
    done: usize,
    options: &SplitOptions,
) -> Rewritten {
    let rows: Vec<RowCut> = blockings
        .iter()
        .enumerate()
        .map(|(k, b)| RowCut {
            chain: &b.chain,
            blocks: &b.blocks,
            label: format!("split{}", done + k + 1),
            blockwise: options.blockwise,
            keep: b.keep,
        })
        .collect();
    let (graph, order) = (&planned.model.graph, &planned.table.schedule);
    rewrite_rows(proto, graph, order, &rows)
}
