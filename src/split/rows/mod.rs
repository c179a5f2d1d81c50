//! Row blocking for transformers: chains whose rows along one axis (tokens, batch × tokens,
//! the query rows of attention) are independent run block by block, so only one block of their
//! intermediates (one block of the attention scores, of the feed-forward hidden layer) is
//! live at a time. Unlike spatial tiles, row blocks overlap nowhere: no halo, no extra MACs.
//!
//! [`rules`] is the per-operator table (which input axes a block of output rows reads; the
//! matrix products' entries in [`products`]),
//! [`chain`] grows chains backwards from a tensor, [`rewrite`] builds the blocked graph and
//! [`estimate`] ranks candidates for the search; [`sink`] gives the rewrite the order it
//! starts from; [`quantize`] computes a DynamicQuantizeLinear's scale and zero point whole
//! for the blocks that quantize their rows by them.

pub mod chain;
pub mod estimate;
pub mod products;
pub mod quantize;
pub mod rewrite;
pub mod rules;
pub mod sink;

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use super::estimate::UNITS_PER_NODE_VISIT;
use super::region::Span;
use super::{Spend, Spent};
use crate::emit::{SplitChain, SplitNode};
use crate::split::TrialPlan;
use chain::{Recompute, RowChain, RowOrder, RowRules, row_chain};
use rules::RuleSet;

/// Both rule sets: each chain is built with each, and both are candidates.
pub const ALL_RULE_SETS: &[RuleSet] = &[RuleSet::Plain, RuleSet::Extended];

/// The plain rule set alone.
pub const PLAIN_RULE_SET: &[RuleSet] = &[RuleSet::Plain];

/// Both rule sets and the one blocking attention by heads.
pub const HEAD_RULE_SETS: &[RuleSet] = &[RuleSet::Plain, RuleSet::Heads];

/// Block counts the search tries.
const BLOCKS: &[i64] = &[2, 4, 8, MOST_BLOCKS];
/// The most blocks the search cuts a chain into.
pub const MOST_BLOCKS: i64 = 16;
/// Steps after a peak step the search looks for a chain's last node.
const REACH: usize = 256;

/// A row chain with its blocks.
#[derive(Clone, Debug)]
pub struct Blocking {
    /// The chain.
    pub chain: RowChain,
    /// The consecutive row ranges, one per block.
    pub blocks: Vec<Span>,
    /// The estimated arena once blocked.
    pub estimate: u64,
    /// The estimate of the chain's own part (without the peak elsewhere).
    pub inside: u64,
    /// The schedule step of the chain's first node of its own (a shared node runs earlier,
    /// where it stays for its other readers).
    pub start: usize,
    /// With passes before the last ([`chain::Pass`]), how many of the last blocks the latest of
    /// them keeps for the last pass (the others recompute its prefix); 0 otherwise.
    pub keep: usize,
    /// The multiply-accumulates the blocks recompute (the prefix of each block not kept).
    pub extra_macs: u64,
}

impl Blocking {
    /// This blocking with as few blocks kept as `allowance` extra MACs allow (its least arena
    /// for that allowance); unchanged without passes before the last.
    pub fn within(&self, graph: &crate::ir::Graph, allowance: u64) -> Blocking {
        if self.chain.passes.is_empty() {
            return self.clone();
        }
        let keep = least_keep(graph, &self.chain, &self.blocks, allowance);
        Blocking {
            keep,
            extra_macs: recomputed_macs(graph, &self.chain, &self.blocks, keep),
            ..self.clone()
        }
    }

    /// The rows the last pass recomputes: those of the blocks the pass before it does not
    /// keep.
    pub fn recomputed_rows(&self) -> i64 {
        recomputed_rows(&self.blocks, self.keep)
    }
}

/// The rows of `blocks` but the last `keep`.
fn recomputed_rows(blocks: &[Span], keep: usize) -> i64 {
    blocks[..blocks.len() - keep].iter().map(|b| b.len()).sum()
}

/// The multiply-accumulates the chain's passes recompute (`keep`: the last blocks the pass
/// before the last keeps).
pub fn recomputed_macs(
    graph: &crate::ir::Graph,
    chain: &RowChain,
    blocks: &[Span],
    keep: usize,
) -> u64 {
    let rows = extra_rows(chain, recomputed_rows(blocks, keep));
    let each = rows.iter().enumerate();
    each.map(|(k, &rows)| node_recomputed_macs(graph, chain, k, rows)).sum()
}

/// Each chain node's rows computed more than once, summed over its runs after the first, when
/// the last pass recomputes `recomputed` rows of the pass before it: every pass before that
/// one runs its prefix on all rows again.
fn extra_rows(chain: &RowChain, recomputed: i64) -> Vec<i64> {
    let mut rows = vec![0; chain.nodes.len()];
    let Some((latest, earlier)) = chain.passes.split_last() else {
        return rows;
    };
    for &k in &latest.prefix {
        rows[k] += recomputed;
    }
    for &k in earlier.iter().flat_map(|p| &p.prefix) {
        rows[k] += chain.rows;
    }
    rows
}

/// The multiply-accumulates chain node `k` repeats when it runs again for `rows` of the
/// chain's rows: its MACs in proportion to the rows.
fn node_recomputed_macs(graph: &crate::ir::Graph, chain: &RowChain, k: usize, rows: i64) -> u64 {
    let macs = crate::split::macs::node_macs(graph, &graph.nodes[chain.nodes[k]]) as u128;
    (macs * rows as u128 / chain.rows as u128) as u64
}

/// The fewest last blocks the pass before the last may keep so the recomputation fits
/// `allowance` (all of them when none fits).
fn least_keep(
    graph: &crate::ir::Graph,
    chain: &RowChain,
    blocks: &[Span],
    allowance: u64,
) -> usize {
    (0..=blocks.len())
        .find(|&keep| recomputed_macs(graph, chain, blocks, keep) <= allowance)
        .unwrap_or(blocks.len())
}

/// The row chains through the `hot` steps of the plan (where the live bytes peak, or under a
/// budget the steps whose operands exceed it), each with its best block count by estimate
/// (`live`: bytes live per step; `held`: what the estimate counts around a chain); `allowed`
/// says which nodes may be split; each chain is
/// built with each rule set of `sets`, recomputing what `recompute` allows, quantizing after
/// passes of their own as many DynamicQuantizeLinear nodes as `passes` says (see
/// [`RowRules::passes`]), with as few blocks kept as `allowance` extra MACs allow. Each
/// chain built and each estimate is charged to `spend`.
pub fn candidates(
    planned: &TrialPlan,
    (live, hot, held): (&[u64], &[usize], estimate::Held),
    allowed: &dyn Fn(usize) -> bool,
    (sets, recompute, passes): (&[RuleSet], Recompute, usize),
    (allowance, spend): (u64, Spend),
) -> Result<Vec<Blocking>, Spent> {
    let graph = &planned.model.graph;
    let order = &planned.table.schedule;
    let steps = RowOrder::new(order);
    let opset = planned.model.opsets.version("").unwrap_or(1);
    let mut seen: HashSet<Vec<usize>> = HashSet::new();
    let mut built: HashMap<(usize, usize, RuleSet), Option<RowChain>> = HashMap::new();
    let mut found = Vec::new();
    for &step in hot {
        let target = order[step];
        for end in step..order.len().min(step + REACH) {
            let Some(out) = graph.nodes[order[end]].outputs.first().copied().flatten() else {
                continue;
            };
            let Some(shape) = super::rules::shape_of(graph, out) else {
                continue;
            };
            for (axis, &set) in (0..shape.len()).flat_map(|a| sets.iter().map(move |s| (a, s))) {
                // Hot steps close together reach the same ends: each chain is built once.
                if let Entry::Vacant(slot) = built.entry((end, axis, set)) {
                    let rules = RowRules {
                        opset,
                        set,
                        recompute,
                        passes,
                    };
                    let chain = row_chain(graph, &steps, [0, end], axis, rules, allowed);
                    let visits = chain.as_ref().map_or(1, |c| c.nodes.len() as u64);
                    if !spend(visits * UNITS_PER_NODE_VISIT) {
                        return Err(Spent);
                    }
                    slot.insert(chain);
                }
                let Some(chain) = &built[&(end, axis, set)] else {
                    continue;
                };
                // A search quantizing after more passes leaves a chain with fewer to the search
                // quantizing after that many: a T5 encoder's attention, cut with one pass, took
                // the allowance its feed-forward needed for two (1.37× rather than 1.83×).
                let fewer = !chain.passes.is_empty() && chain.passes.len() < passes;
                if fewer || !chain.nodes.contains(&target) || !seen.insert(chain.nodes.clone()) {
                    continue;
                }
                // A shared node stays where it is for its other readers: the blocks run from
                // the first node only the chain runs.
                let first = chain.nodes.iter().find(|n| !chain.shared.contains(n));
                let start = steps
                    .step(*first.unwrap_or(&chain.nodes[0]))
                    .expect("chain nodes are scheduled");
                // Passes may spend their share of the allowance left: repeated layers each need
                // one to recompute their blocks.
                let share = match chain.passes.is_empty() {
                    true => allowance,
                    false => allowance / alike_quantizers(graph, chain),
                };
                let tries = BLOCKS.iter().filter(|&&n| n <= chain.rows).count();
                let work = (tries * chain.nodes.len()) as u64 * UNITS_PER_NODE_VISIT;
                if !spend(work) {
                    return Err(Spent);
                }
                let table = &planned.table;
                let around = estimate::Around::new(graph, (table, live), chain, held, [start, end]);
                let best = BLOCKS
                    .iter()
                    .filter(|&&n| n <= chain.rows)
                    .map(|&n| {
                        let blocking = Blocking {
                            chain: chain.clone(),
                            blocks: Span::parts(chain.rows, n),
                            estimate: 0,
                            inside: 0,
                            start,
                            keep: 0,
                            extra_macs: 0,
                        }
                        .within(graph, share);
                        let (estimate, inside) = estimate::estimate(graph, &around, &blocking);
                        (estimate, inside, n, blocking)
                    })
                    .min_by_key(|c| (c.0, c.1, c.3.extra_macs, c.2));
                if let Some((estimate, inside, _, blocking)) = best {
                    found.push(Blocking {
                        estimate,
                        inside,
                        ..blocking
                    });
                }
            }
        }
    }
    Ok(found)
}

/// How many DynamicQuantizeLinear nodes of `graph` are alike to the quantizer of `chain`'s
/// latest pass before the last, itself included: of the same operator, reading a value of the
/// same type made by the same operator (the same place in a repeated layer). A layer already
/// cut has none left.
pub fn alike_quantizers(graph: &crate::ir::Graph, chain: &RowChain) -> u64 {
    let key = |n: crate::ir::NodeId| {
        let node = &graph.nodes[n];
        let value = node.inputs.first().copied().flatten().map(|v| &graph.values[v]);
        let maker = value.and_then(|v| v.producer).map(|p| &graph.nodes[p].op_type);
        (&node.op_type, maker, value.and_then(|v| v.ty.as_ref()))
    };
    let Some(latest) = chain.passes.last() else {
        return 1;
    };
    let own = key(chain.nodes[latest.quantizer]);
    let alike = (0..graph.nodes.len()).filter(|&n| key(n) == own).count();
    alike.max(1) as u64
}

/// The earlier chains (indices into `earlier`) whose tiles or glue the nodes of `chain` are:
/// those a nested row chain cuts again.
pub fn nested_in(earlier: &[SplitChain], chain: &SplitChain) -> Vec<usize> {
    let names: HashSet<&str> = chain.nodes.iter().map(|n| n.node.as_str()).collect();
    let made = |c: &SplitChain| {
        let tiles = c.nodes.iter().flat_map(|n| n.tiles.iter().chain(&n.first_pass));
        c.glue.iter().chain(tiles).any(|t| names.contains(t.as_str()))
    };
    (0..earlier.len()).filter(|&i| made(&earlier[i])).collect()
}

/// The table's record of one accepted row chain (`parts`: what it became); `origin` maps the
/// planned graph's nodes to the source model's, `labels` names the source nodes.
pub fn record(
    blocking: &Blocking,
    parts: &super::rewrite::Parts,
    graph: &crate::ir::Graph,
    origin: &[Option<usize>],
    labels: &[(String, String)],
    arena_after: u64,
) -> SplitChain {
    let chain = &blocking.chain;
    // Rows of each node's output (and of the chain's) along its axis.
    let regions = |n: usize, axis: usize| -> Vec<[[i64; 2]; 2]> {
        let extent = graph.nodes[n].outputs[0]
            .and_then(|v| super::rules::shape_of(graph, v))
            .map_or(chain.rows, |s| s[axis]);
        blocking
            .blocks
            .iter()
            .map(|&b| chain.part(extent, b))
            .map(|r| [[r.start, r.end], [0, 0]])
            .collect()
    };
    let last = chain.nodes.len() - 1;
    let tiles = regions(chain.nodes[last], chain.axes[last]);
    // The passes' prefixes run again: all rows in each later pass before the last, and in the
    // last those of the blocks the pass before it does not keep.
    let extra = extra_rows(chain, blocking.recomputed_rows());
    // The extent of node `k`'s output along `axis`.
    let extent = |k: usize, axis: usize| {
        graph.nodes[chain.nodes[k]].outputs[0]
            .and_then(|v| super::rules::shape_of(graph, v))
            .and_then(|s| s.get(axis).copied())
            .unwrap_or(chain.rows)
    };
    let twice = |k: usize| {
        if chain.whole.contains(&chain.nodes[k]) {
            // Every run after the first makes its whole first axis again (without MACs).
            let runs = parts.copies[k].len() + parts.first_pass.get(k).map_or(0, Vec::len);
            return (extent(k, 0) * runs.saturating_sub(1) as i64, 0);
        }
        let halo = extent(k, chain.axes[k]) / chain.rows * extra[k];
        (halo, node_recomputed_macs(graph, chain, k, extra[k]))
    };
    // A node recomputed whole makes all of its output's first axis in every block.
    let whole = |k: usize| vec![[[0, extent(k, 0)], [0, 0]]; blocking.blocks.len()];
    let nodes = chain
        .nodes
        .iter()
        .enumerate()
        .map(|(k, &n)| {
            let (node, op_type) = super::search::source_label(graph, origin, labels, n);
            let (halo, extra_macs) = twice(k);
            let recomputed = chain.whole.contains(&n);
            SplitNode {
                node,
                op_type,
                tiles: parts.copies[k].clone(),
                regions: match recomputed {
                    true => whole(k),
                    false => regions(n, chain.axes[k]),
                },
                halo,
                extra_macs,
                axis: (!recomputed).then_some(chain.axes[k]),
                token_axis: None,
                hw_axes: None,
                first_pass: parts.first_pass.get(k).cloned().unwrap_or_default(),
            }
        })
        .collect();
    SplitChain {
        output: graph.values[chain.output].name.clone(),
        grid: [blocking.blocks.len(), 1],
        tiles,
        extra_macs: blocking.extra_macs,
        axis: chain.axes.last().copied(),
        token_axis: None,
        hw_axes: None,
        arena_after,
        nodes,
        glue: parts.glue.clone(),
        read_as_bands_by: None,
        within: Vec::new(),
        pools: Vec::new(),
    }
}
