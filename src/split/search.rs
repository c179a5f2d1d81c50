//! The split search: find the steps that set the peak, grow chains around them, choose each
//! chain's grid within the MAC allowance, rewrite, re-plan, and keep a rewrite only when the
//! arena drops; repeat while it helps.

use std::collections::HashSet;

use anyhow::Result;

use super::candidates::{Candidate, Cut, Pattern, candidates};
use super::chain::Chain;
use super::estimate::{live_bytes, step_operands};
use super::layout::{Layout, NCHW};
use super::macs::graph_macs;
use super::rewrite::{BandSources, Rewritten, rewrite};
use super::layers::{Round, Together, rewrite_layers, together};
use super::rows;
use super::tiling::Tiling;
use super::{Memos, Spend, SplitOptions, TrialOrder, TrialPlan};
use crate::emit::{SourceInfo, SplitChain, SplitNode, SplitPool, SplitsInfo};
use crate::onnx::proto::ModelProto;

/// Candidate splits re-planned per round (the best by estimate).
const TRIALS: usize = 6;
/// Chains split at most.
const MAX_CHAINS: usize = 128;

/// What the search found: the model to plan (its nodes in execution order) and the record of
/// the split (empty `chains` when nothing helped, and then `model` is the input model).
pub struct Outcome {
    /// The rewritten model, or the input model when no split helped.
    pub model: ModelProto,
    /// Under a budget, the bytes the worst step reads and writes while that exceeds the
    /// budget (0 once it fits, and without a budget): with `info.arena_after`, what ranks
    /// outcomes.
    pub over_budget: u64,
    /// The `splits` section of the table (its `source` left for the caller to fill).
    pub info: SplitsInfo,
    /// What the search showed (whether the other searches could find anything else).
    pub shown: super::Shown,
}

type Score = (u64, u64, u64, usize);

/// Told after each round what the search has shown so far ([`super::Shown`]): the pipeline
/// starts the searches that differ in it at once, rather than after this one.
pub type Seen<'a> = &'a dyn Fn(super::Shown);

/// A trial lowering no score may still be taken on trial when its arena is within this
/// fraction (1/n) of the arena before the first cut on trial, and it either recomputes shared
/// nodes or thins the peak (see [`thins`]): the next rounds may then lower the peaks the cut
/// could not (the shared nodes' other readers, the other repeated layers).
const TRIAL_SLACK: u64 = 50;

/// Live bytes within this fraction (1/n) of a peak count as reaching it in [`thins`]: the
/// blocks' small extra tensors move repeated layers' equal peaks by a few bytes.
const NEAR_PEAK: u64 = 1024;

/// The search's state before the first of consecutive cuts taken on trial: a cut that
/// recomputes shared nodes per block lowers nothing while their originals stay for other
/// readers, and a cut of one of several repeated layers lowers nothing while the others peak
/// too; yet either lets the next rounds split the rest. The cuts are kept only once a later
/// round lowers the score below `score`.
struct Trial {
    score: Score,
    current: Option<(ModelProto, TrialPlan)>,
    chains: usize,
    used: u64,
}

/// Whether a plan's live bytes (`after`) thin the peak of `before`: at most [`NEAR_PEAK`]
/// above it, and fewer steps within [`NEAR_PEAK`] of it.
fn thins(before: &[u64], after: &[u64]) -> bool {
    let peak = before.iter().copied().max().unwrap_or(0);
    let margin = peak / NEAR_PEAK;
    let near = |live: &[u64]| live.iter().filter(|&&b| b + margin >= peak).count();
    after.iter().all(|&b| b <= peak + margin) && near(after) < near(before)
}

/// Runs the search from `first`, the plan of the input model `input`; `plan` plans a
/// rewritten model (nodes in execution order) the same way, ordered as asked (a tile trial in
/// its rewrite's order, see [`TrialOrder`]), leaving the model as it was (it may plan the
/// model itself and give it back rather than copy it), or gives `None` when the search's
/// budget is spent (the model then left unspecified), and `spend` charges the
/// estimates that rank the candidates to the same budget: the search then ends with the
/// chains accepted so far. Chains are cut through `cuts`, which the searches of one model
/// share; `seen` hears after each round what the search has shown.
pub fn search(
    input: &ModelProto,
    first: &TrialPlan,
    options: &SplitOptions,
    plan: &dyn Fn(&mut ModelProto, TrialOrder) -> Result<Option<TrialPlan>>,
    (spend, memos, seen): (Spend, &Memos, Seen),
) -> Result<Outcome> {
    let source = &first.model.graph;
    let labels: Vec<(String, String)> = source
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let name = if n.name.is_empty() {
                format!("#{i}")
            } else {
                n.name.clone()
            };
            (name, n.op_type.clone())
        })
        .collect();
    let total_macs = graph_macs(source);
    let allowance = (total_macs as f64 * options.overhead_pct.max(0.0) / 100.0) as u64;
    let arena_before = arena(first);
    let score = |p: &TrialPlan| score_of(p, &live_bytes(&p.table), options.budget);
    let mut used = 0u64;
    let mut chains = Vec::new();
    let mut origin: Vec<Option<usize>> = (0..source.nodes.len()).map(Some).collect();
    let mut current: Option<(ModelProto, TrialPlan)> = None;
    let mut spent = false;
    let mut aim = options.budget.is_none();
    // The state before a reorder and whether the reorder lowered the score, while no split
    // has followed it.
    let mut reordered: Option<(Option<(ModelProto, TrialPlan)>, bool)> = None;
    // The patterns of the cuts accepted so far.
    let mut patterns: HashSet<Pattern> = HashSet::new();
    // The state before a cut taken on trial (see [`Trial`]), while no later round has lowered
    // the score below the one it had.
    let mut on_trial: Option<Trial> = None;
    let (mut saw_rows, mut tried_rows, mut saw_quantizers) = (false, false, false);
    while chains.len() < MAX_CHAINS && !spent {
        let planned = current.as_ref().map_or(first, |c| &c.1);
        let live = live_bytes(&planned.table);
        let best = score_of(planned, &live, options.budget);
        let found = candidates(
            planned,
            &live,
            &origin,
            allowance - used,
            options,
            aim,
            (spend, memos),
        );
        let Ok(mut candidates) = found else {
            break;
        };
        saw_rows |= candidates.iter().any(|c| matches!(c.cut, Cut::Rows(_)));
        saw_quantizers |= candidates.iter().any(|c| match &c.cut {
            Cut::Rows(b) => b.chain.nodes.iter().any(|&n| {
                let node = &planned.model.graph.nodes[n];
                node.op_type == "DynamicQuantizeLinear" && node.domain.is_empty()
            }),
            Cut::Tiles(..) => false,
        });
        let saw = (saw_rows, tried_rows, saw_quantizers);
        seen(super::Shown::of(&chains, saw));
        if best.0 == 0 {
            candidates.retain(|c| c.estimate <= best.1);
        }
        // The best trial that lowers the score, with its score.
        let mut accepted: Option<(usize, Rewritten, TrialPlan, Score)> = None;
        // The least worse trial that may be taken on trial (see [`TRIAL_SLACK`]), with its
        // score, measured from the state before the cuts already on trial.
        let base = on_trial.as_ref().map_or(best, |t| t.score);
        let mut near: Option<(usize, Rewritten, TrialPlan, Score)> = None;
        // Each row trial lowering the round's score, or recomputing shared nodes (alone,
        // such a cut holds them twice; with its alike layers, perhaps not), with its score:
        // the rivals of the chosen cut.
        let mut rivals: Vec<(usize, Score)> = Vec::new();
        let proto = current.as_ref().map_or(input, |c| &c.0);
        let graph = &planned.model.graph;
        for (index, candidate) in candidates.iter().enumerate().take(TRIALS) {
            tried_rows |= matches!(candidate.cut, Cut::Rows(_));
            let mut rewritten =
                rewrite_cut(proto, planned, candidate, (chains.len(), &origin), options);
            let order = match candidate.cut {
                Cut::Tiles(..) => TrialOrder::Written,
                Cut::Rows(_) => options.row_order,
            };
            let Some(trial) = plan(&mut rewritten.model, order)? else {
                spent = true;
                break;
            };
            let bar = accepted.as_ref().map_or(best, |a| a.3);
            let trial_live = live_bytes(&trial.table);
            let scored = score_of(&trial, &trial_live, options.budget);
            let lowers = scored < bar;
            // A repeated layer cut as an earlier one was: its round takes that cut, as the
            // earlier round chose it from its trials; the rounds, and the allowance, go on to
            // the other layers.
            let repeats = lowers && patterns.contains(&candidate.pattern(graph));
            if (scored < best || candidate.shares()) && matches!(candidate.cut, Cut::Rows(_)) {
                rivals.push((index, scored));
            }
            if lowers {
                accepted = Some((index, rewritten, trial, scored));
            } else if scored.0 <= base.0
                && scored.1 <= base.1 + base.1 / TRIAL_SLACK
                && (candidate.shares() || thins(&live, &trial_live))
                && near.as_ref().is_none_or(|n| scored < n.3)
            {
                near = Some((index, rewritten, trial, scored));
                continue;
            }
            if repeats || accepted.as_ref().is_some_and(|a| candidates[a.0].covers) {
                // The target's cover is split as planned, or a layer as its like: no other
                // trial needed.
                break;
            }
        }
        let mut taken_on_trial = false;
        if accepted.is_none()
            && !aim
            && let Some(n) = near
        {
            accepted = Some(n);
            taken_on_trial = true;
        }
        let Some((index, mut rewritten, mut trial, mut scored)) = accepted else {
            if aim {
                // The target's estimates were too hopeful: go on with each chain's best grid.
                aim = false;
                continue;
            }
            // No split lowers the peak: perhaps the order runs earlier blocks ahead of need
            // there. Run the plan's order just in time, kept unless the planner finds it
            // worse (at an equal score the peak may have moved where a split pays).
            if let Some((before, improved)) = reordered.take() {
                // The reorder let no split in: unless it lowered the score itself, the plan
                // before it stands.
                if !improved {
                    current = before;
                }
                break;
            }
            if spent {
                break;
            }
            let proto = current.as_ref().map_or(input, |c| &c.0);
            let (mut model, order) = rows::sink::just_in_time_model(proto, planned);
            let Some(trial) = plan(&mut model, TrialOrder::Searched)? else {
                break;
            };
            if score(&trial) > best {
                break;
            }
            let improved = score(&trial) < best;
            // The cuts on trial stand once the order they let in lowers the score below theirs.
            if on_trial.as_ref().is_some_and(|t| score(&trial) < t.score) {
                on_trial = None;
            }
            origin = order.iter().map(|&n| origin[n]).collect();
            reordered = Some((current.replace((model, trial)), improved));
            continue;
        };
        reordered = None;
        // The layers repeating the chosen cut, cut alike at once when that scores better
        // (without a budget: under one, each layer's cut is judged by the operands it leaves).
        // So are those repeating the best row trial of another pattern that lowers the
        // round's score or shares: cut alone it may lower less, and cut together more (a T5
        // encoder's attention blocked by heads, each block recomputing the attention mask,
        // which then dies rather than being held for the other layers).
        let mut taken = vec![index];
        let round = Round {
            proto,
            planned,
            room: match options.budget {
                None => MAX_CHAINS - chains.len() - 1,
                Some(_) => 0,
            },
            left: allowance - used,
            done: chains.len(),
        };
        let pattern = candidates[index].pattern(graph);
        let rival = rivals
            .iter()
            .filter(|(i, _)| candidates[*i].pattern(graph) != pattern)
            .min_by_key(|(_, s)| *s)
            .map(|&(i, _)| i);
        let mut chosen = index;
        for c in std::iter::once(index).chain(rival) {
            if spent {
                break;
            }
            match together(&candidates, c, &round, options, plan)? {
                Together::Alone => {}
                Together::Spent => spent = true,
                Together::Batch(boxed) => {
                    let batch = *boxed;
                    let together_score = score(&batch.trial);
                    // At an equal score, a rival batch is taken when it leaves the lower
                    // peaks below the first (the next rounds cut those).
                    let rival_ties = c != index
                        && together_score == scored
                        && next_peaks_lower(&batch.trial, &trial);
                    if together_score < scored || rival_ties {
                        // Cut together, the layers may lower what one could not.
                        taken_on_trial &= together_score >= best;
                        (rewritten, trial, scored) = (batch.rewritten, batch.trial, together_score);
                        for (&i, blocking) in batch.taken.iter().zip(batch.blockings) {
                            candidates[i].cut = Cut::Rows(blocking);
                        }
                        (taken, chosen) = (batch.taken, c);
                    }
                }
            }
        }
        if on_trial.as_ref().is_some_and(|t| scored < t.score) {
            on_trial = None;
        }
        let (used_before, chains_before) = (used, chains.len());
        patterns.insert(candidates[chosen].pattern(graph));
        for (&i, parts) in taken.iter().zip(&rewritten.parts) {
            let candidate = &candidates[i];
            used += candidate.extra_macs();
            chains.push(match &candidate.cut {
                Cut::Tiles(chain, tiling) => {
                    record(chain, tiling, parts, graph, &origin, &labels, arena(&trial))
                }
                Cut::Rows(b) => rows::record(b, parts, graph, &origin, &labels, arena(&trial)),
            });
        }
        // A nested chain names the chains before this round whose nodes it cut again.
        let (earlier, new) = chains.split_at_mut(chains_before);
        for chain in new {
            chain.within = rows::nested_in(earlier, chain);
        }
        // A chain whose assembling Concat the new one dropped is read as bands by it; a
        // chain whose Slices of the new one's output it dropped reads the new one as bands.
        let newest = chains.len() - 1;
        for i in 0..newest {
            let glue = &mut chains[i].glue;
            let before = glue.len();
            glue.retain(|g| !rewritten.dropped.contains(g));
            if glue.len() < before {
                chains[i].read_as_bands_by = Some(newest);
            }
            let glue = &mut chains[i].glue;
            let before = glue.len();
            glue.retain(|g| !rewritten.unsliced.contains(g));
            if glue.len() < before {
                chains[newest].read_as_bands_by = Some(i);
            }
        }
        seen(super::Shown::of(&chains, (saw_rows, tried_rows, saw_quantizers)));
        origin = rewritten
            .kept
            .iter()
            .map(|k| k.and_then(|old| origin[old]))
            .collect();
        let before = current.replace((rewritten.model, trial));
        if taken_on_trial && on_trial.is_none() {
            on_trial = Some(Trial {
                score: best,
                current: before,
                chains: chains_before,
                used: used_before,
            });
        }
    }
    if let Some(t) = on_trial {
        // The cut on trial let no later cut lower the score: back to the state before it.
        (current, used) = (t.current, t.used);
        chains.truncate(t.chains);
    }
    let first_score = score(first);
    let mut last = current.as_ref().map_or(first_score, |c| score(&c.1));
    if (last.0, last.1) >= (first_score.0, first_score.1) {
        // Only equal peaks were lowered, not the arena: the rewrite is not kept.
        (current, used, last) = (None, 0, first_score);
        chains.clear();
    }
    let (over_budget, arena_after) = (last.0, last.1);
    let shown = super::Shown::of(&chains, (saw_rows, tried_rows, saw_quantizers));
    let model = current.map_or_else(
        || input.clone(),
        |c| in_schedule_order(&c.0, &c.1.table.schedule),
    );
    Ok(Outcome {
        model,
        over_budget,
        info: SplitsInfo {
            source: SourceInfo {
                file: String::new(),
                sha256: String::new(),
            },
            overhead_pct: options.overhead_pct,
            arena_before,
            arena_after,
            total_macs,
            extra_macs: used,
            chains,
        },
        shown,
    })
}

/// Rewrites the model `proto` (planned as `planned`) with one candidate's cut; its label counts
/// on from `done`, and `origin` maps the nodes to the input model's (`None` for nodes earlier
/// splits made).
fn rewrite_cut(
    proto: &ModelProto,
    planned: &TrialPlan,
    candidate: &Candidate,
    (done, origin): (usize, &[Option<usize>]),
    options: &SplitOptions,
) -> Rewritten {
    let (graph, order) = (&planned.model.graph, &planned.table.schedule);
    match &candidate.cut {
        Cut::Tiles(chain, tiling) => {
            let sources = BandSources {
                scatter_inputs: options.scatter_inputs,
                made_by_split: &|n| origin[n].is_none(),
                run_early: options.early_tiles,
            };
            let label = format!("split{}", done + 1);
            rewrite(proto, graph, order, (chain, tiling), &label, &sources)
        }
        Cut::Rows(blocking) => rewrite_layers(proto, planned, &[blocking], done, options),
    }
}

/// Whether plan `a` holds less than plan `b` below their peak: their live bytes per step,
/// each sorted from the most, compared in order.
fn next_peaks_lower(a: &TrialPlan, b: &TrialPlan) -> bool {
    let descending = |p: &TrialPlan| {
        let mut live = live_bytes(&p.table);
        live.sort_unstable_by(|x, y| y.cmp(x));
        live
    };
    descending(a) < descending(b)
}

/// What the search lowers: under a budget, first the most bytes one step reads and writes
/// while that exceeds the budget, then the arena; otherwise the arena. Then the peak of live
/// bytes, and last how many steps reach it: a rewrite that lowers one of several equal or
/// near-equal peaks (repeated layers, whose difference the arena's alignment hides) is
/// progress though the arena stays, as the next round lowers the next peak.
/// `live` is the plan's live bytes per step ([`live_bytes`]).
fn score_of(planned: &TrialPlan, live: &[u64], budget: Option<u64>) -> Score {
    let floor = match budget {
        Some(b) => step_operands(&planned.model.graph, &planned.table)
            .into_iter()
            .max()
            .filter(|&f| f > b)
            .unwrap_or(0),
        None => 0,
    };
    let peak = live.iter().copied().max().unwrap_or(0);
    (
        floor,
        arena(planned),
        peak,
        live.iter().filter(|&&b| b == peak).count(),
    )
}

/// The total arena bytes of a plan.
pub fn arena(planned: &TrialPlan) -> u64 {
    planned.table.arenas.iter().map(|a| a.bytes).sum()
}

/// The model with its nodes in the plan's execution order (so the order is the stored one).
pub(super) fn in_schedule_order(model: &ModelProto, schedule: &[usize]) -> ModelProto {
    let nodes = &model.graph.as_ref().expect("a loaded model has a graph").node;
    let ordered = schedule.iter().map(|&i| nodes[i].clone()).collect();
    crate::onnx::with_nodes(model, ordered)
}
fn record(
    chain: &Chain,
    tiling: &Tiling,
    parts: &super::rewrite::Parts,
    graph: &crate::ir::Graph,
    origin: &[Option<usize>],
    labels: &[(String, String)],
    arena_after: u64,
) -> SplitChain {
    let region = |r: super::region::Region| [[r[0].start, r[0].end], [r[1].start, r[1].end]];
    let nodes = chain
        .nodes
        .iter()
        .enumerate()
        .map(|(k, &n)| {
            let (node, op_type) = source_label(graph, origin, labels, n);
            let per_position =
                super::macs::macs_per_position(graph, &graph.nodes[n], chain.grids[k]);
            SplitNode {
                node,
                op_type,
                tiles: parts.copies[k].clone(),
                regions: tiling.each().map(|t| region(t.computed(k))).collect(),
                halo: tiling.halo[k],
                extra_macs: per_position * tiling.halo[k].max(0) as u64,
                axis: None,
                token_axis: token_axis(chain.layouts[k]),
                hw_axes: hw_axes(chain.layouts[k]),
                first_pass: Vec::new(),
            }
        })
        .collect();
    SplitChain {
        output: graph.values[chain.output].name.clone(),
        grid: tiling.grid,
        tiles: tiling.each().map(|t| region(t.part())).collect(),
        extra_macs: tiling.extra_macs,
        axis: None,
        token_axis: token_axis(chain.layouts[chain.last]),
        hw_axes: hw_axes(chain.layouts[chain.last]),
        arena_after,
        nodes,
        glue: parts.glue.clone(),
        read_as_bands_by: None,
        within: Vec::new(),
        pools: parts
            .pools
            .iter()
            .map(|(n, by)| {
                let (node, op_type) = source_label(graph, origin, labels, *n);
                SplitPool {
                    node,
                    op_type,
                    by: by.clone(),
                }
            })
            .collect(),
    }
}

/// The token axis of a token-major layout.
fn token_axis(layout: Layout) -> Option<usize> {
    match layout {
        Layout::Tokens(axis) => Some(axis),
        Layout::Grid(_) => None,
    }
}

/// The axes of H and W of a grid layout other than NCHW's.
fn hw_axes(layout: Layout) -> Option<[usize; 2]> {
    match layout {
        Layout::Grid(axes) if layout != NCHW => Some(axes),
        _ => None,
    }
}

/// The name and operator of the input model's node that node `n` of `graph` is (`origin`),
/// else of `n` itself.
pub(super) fn source_label(
    graph: &crate::ir::Graph,
    origin: &[Option<usize>],
    labels: &[(String, String)],
    n: usize,
) -> (String, String) {
    origin[n]
        .map(|o| labels[o].clone())
        .unwrap_or_else(|| (graph.nodes[n].name.clone(), graph.nodes[n].op_type.clone()))
}
