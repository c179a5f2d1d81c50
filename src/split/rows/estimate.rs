//! The arena estimate of a row chain run in blocks, to rank candidates before the real planner
//! scores the best few.

use super::Blocking;
use super::chain::RowChain;
use crate::emit::Table;
use crate::ir::{Graph, ValueId};
use crate::split::estimate::{crossing, outside_peak, union_bytes};
use rustc_hash::FxHashSet;

/// What a row chain's estimate counts as held around its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// Step by step ([`held_steps`]): the most the plan holds at one step before the blocks run,
    /// and what it holds where they run. Ranking attention chains by the bytes held across
    /// their whole span counted the key and value projections' intermediates, which die
    /// before the blocks run, with the keys and values: a GPT-2 style decoder's attention was
    /// estimated 20 KiB above the arena and never tried (models/bert_tiny at 128 tokens
    /// splits to 229,632 bytes rather than 279,040).
    Steps,
    /// Every byte range live at some step of the chain's span ([`crossing`]). Under a budget,
    /// where chains are sought around the steps whose operands exceed it: counted step by step
    /// there, models/vit_tiny_batch at `--budget 87360` cuts its layers in another order and
    /// leaves a Transpose's operands over the budget.
    Span,
}

/// What the plan holds around a chain (its nodes between steps `start` and `end`), whatever
/// its block count: the peak outside those steps, the most held at one step before the
/// blocks run (0 for [`Held::Span`]), and what is held where they run, the chain's own
/// tensors left out.
pub struct Around {
    outside: u64,
    before: u64,
    at_end: u64,
}

impl Around {
    /// What the plan (its `table`, `live` bytes per step) holds around `chain` at steps
    /// `start..=end`, counted as `held` says.
    pub fn new(
        graph: &Graph,
        (table, live): (&Table, &[u64]),
        chain: &RowChain,
        held: Held,
        [start, end]: [usize; 2],
    ) -> Around {
        let [before, at_end] = match held {
            Held::Steps => held_steps(graph, table, chain, [start, end]),
            Held::Span => [0, crossing(graph, table, &chain.nodes, [start, end])],
        };
        Around {
            outside: outside_peak(live, [start, end]),
            before,
            at_end,
        }
    }
}

/// The estimated arena once the blocking's chain runs in its blocks, with what the plan
/// holds `around` it: the peak outside the chain's steps, the most held at one step before
/// the blocks run, or what is held where they run plus the assembled outputs and one block's
/// working set (with passes before the last, plus the rows the latest of them keeps for the
/// last). Returns that estimate and the chain's own part (without the peak outside), which
/// ranks block counts when an equal peak elsewhere hides the difference.
pub fn estimate(graph: &Graph, around: &Around, blocking: &Blocking) -> (u64, u64) {
    let chain = &blocking.chain;
    let blocks = blocking.blocks.len() as i64;
    let output: u64 = chain.outputs.iter().map(|&v| bytes(graph, v)).sum();
    let all: Vec<usize> = (0..chain.nodes.len()).collect();
    let working = match chain.passes.last() {
        None => block_peak(graph, chain, blocks, &all),
        Some(latest) => {
            let input = graph.nodes[chain.nodes[latest.quantizer]].inputs[0];
            let part = input.map_or(0, |v| bytes(graph, v).div_ceil(blocks.max(1) as u64));
            let passes = chain.passes.iter();
            let peak = passes.map(|p| block_peak(graph, chain, blocks, &p.prefix)).max();
            let last = block_peak(graph, chain, blocks, &all);
            blocking.keep as u64 * part + peak.unwrap_or(0).max(last)
        }
    };
    let inside = around.before.max(around.at_end + output + working);
    (around.outside.max(inside), inside)
}

/// What the plan holds around the chain once its nodes (steps `start..=end`) run as blocks at
/// `end`: the most bytes live at one step before `end`, and those live at `end`, counting
/// neither the chain's own tensors nor the steps' ranges twice (a union of byte ranges, so
/// a tensor written in place of another counts with the bytes it shares). Each tensor the
/// blocks read from outside lives from where it is made to `end`, where they read it.
fn held_steps(
    graph: &Graph,
    table: &Table,
    chain: &RowChain,
    [start, end]: [usize; 2],
) -> [u64; 2] {
    let made: FxHashSet<ValueId> = chain
        .nodes
        .iter()
        .filter_map(|&n| graph.nodes[n].outputs[0])
        .collect();
    let read: FxHashSet<&str> = chain
        .nodes
        .iter()
        .flat_map(|&n| graph.nodes[n].inputs.iter().flatten())
        .filter(|v| !made.contains(v))
        .map(|&v| graph.values[v].name.as_str())
        .collect();
    let names: FxHashSet<&str> = made.iter().map(|&v| graph.values[v].name.as_str()).collect();
    // Each tensor around the chain with its steps there and its byte range.
    let held: Vec<([usize; 2], (usize, u64, u64))> = table
        .tensors
        .iter()
        .filter(|t| !names.contains(t.name.as_str()))
        .filter_map(|t| {
            let last = if read.contains(t.name.as_str()) {
                t.last.max(end)
            } else {
                t.last
            };
            let steps = [t.first.max(start), last.min(end)];
            let range = (t.arena?, t.offset?, t.offset? + t.bytes?);
            (steps[0] <= steps[1] && range.2 > range.1).then_some((steps, range))
        })
        .collect();
    let at = |step: usize| {
        let mut ranges: Vec<(usize, u64, u64)> = held
            .iter()
            .filter(|(s, _)| s[0] <= step && step <= s[1])
            .map(|&(_, r)| r)
            .collect();
        ranges.sort_unstable();
        union_bytes(ranges)
    };
    // The bytes held at a step peak where a tensor starts (or at the first step).
    let mut starts: Vec<usize> = held.iter().map(|(s, _)| s[0]).filter(|&s| s < end).collect();
    starts.push(start.min(end.saturating_sub(1)));
    starts.sort_unstable();
    starts.dedup();
    let before = starts.into_iter().filter(|&s| s < end).map(at).max();
    [before.unwrap_or(0), at(end)]
}

/// The most bytes one block holds at once running the chain's nodes at indices `run` (in
/// order): its live intermediates, the slices a node reads and the node's output, each a
/// `1 / blocks` part of the whole tensor (all of it for a node recomputed whole).
fn block_peak(graph: &Graph, chain: &RowChain, blocks: i64, run: &[usize]) -> u64 {
    // A node recomputed whole makes all of its output in each block.
    let part = |v: ValueId| match graph.values[v].producer {
        Some(p) if chain.whole.contains(&p) => bytes(graph, v),
        _ => bytes(graph, v).div_ceil(blocks.max(1) as u64),
    };
    let n = chain.nodes.len();
    let position = |v: ValueId| {
        graph.values[v]
            .producer
            .and_then(|p| chain.nodes.iter().position(|&c| c == p))
    };
    let mut last_use = vec![0; n];
    for &k in run {
        for v in graph.nodes[chain.nodes[k]].inputs.iter().flatten() {
            if let Some(j) = position(*v) {
                last_use[j] = k;
            }
        }
    }
    let (mut held, mut peak) = (0u64, 0u64);
    for &k in run {
        let id = chain.nodes[k];
        let node = &graph.nodes[id];
        let slices: u64 = chain.rules[k]
            .reads
            .iter()
            .zip(&node.inputs)
            .filter_map(|(r, v)| match (r, v) {
                (r, Some(v)) if r.rows().is_some() && position(*v).is_none() => Some(part(*v)),
                _ => None,
            })
            .sum();
        let out: u64 = node.outputs.iter().flatten().map(|&v| part(v)).sum();
        peak = peak.max(held + slices + out);
        held += out;
        for j in (0..k).filter(|&j| last_use[j] == k) {
            held -= part(graph.nodes[chain.nodes[j]].outputs[0].expect("an output"));
        }
    }
    peak
}

/// Bytes of a value with a known shape and type (0 otherwise).
pub(super) fn bytes(graph: &Graph, value: ValueId) -> u64 {
    let (Some(t), Some(s)) = (
        graph.values[value].tensor_type(),
        crate::split::rules::shape_of(graph, value),
    ) else {
        return 0;
    };
    t.dtype
        .bytes_for(s.iter().product::<i64>().max(0) as u64)
        .unwrap_or(0)
}
