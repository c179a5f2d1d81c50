//! Row chains: the nodes that can run block by block to make one tensor, found backwards from
//! it. A node joins when its rows along some axis are independent (it has a row rule), every
//! reader of its output has joined and wants the same axis, and the output is not a graph
//! output. Its inputs read along an axis are then wanted along that axis. Tensors wanted but
//! made outside (or read by a node that stays outside) are sliced per block.
//!
//! A cheap producer (elementwise, or moving values: Gather, Transpose, Reshape...) whose
//! output other nodes outside the chain still read (the attention mask every layer adds, T5's
//! relative-position bias) joins as a *shared* node when recomputing it needs fewer run-time
//! bytes than its output holds, counting through cheap producers of its inputs (a boolean mask
//! turned into a float one; a bias gathered from a table by buckets computed from positions).
//! Each block recomputes its rows from slices of those inputs, so the chain holds the small
//! inputs instead of the large output, and the original node stays for its other readers
//! (until a later split takes them too).

use std::collections::BinaryHeap;

use rustc_hash::{FxHashMap, FxHashSet};

use super::rules::{Fixup, RowRead, RowRule, RuleSet, absent_or, row_rule};
use crate::ir::{Graph, NodeId, ValueId};
use crate::liveness::TensorKind;
use crate::split::chain::is_foldable_shape;
use crate::split::region::Span;

/// A chain of row-blocked nodes, in execution order.
#[derive(Clone, Debug)]
pub struct RowChain {
    /// The nodes, in execution order.
    pub nodes: Vec<NodeId>,
    /// Each node's rule (how it reads its inputs).
    pub rules: Vec<RowRule>,
    /// The axis of each node's output the blocks cut.
    pub axes: Vec<usize>,
    /// The rows blocks are made of: every tensor the chain cuts holds a whole number of
    /// them along its axis (the same extent for most nodes; a Reshape merging or splitting the
    /// axis scales it, see [`RowChain::part`]).
    pub rows: i64,
    /// The chain's output: made by the last node, read after the chain.
    pub output: ValueId,
    /// Every output of the last node (a Split makes several), `output` first, each assembled
    /// from the blocks' parts under its own name.
    pub outputs: Vec<ValueId>,
    /// `Shape` nodes outside the chain that read a chain tensor; their value is known, so the
    /// rewrite replaces them by initializers.
    pub folded: Vec<NodeId>,
    /// The shared nodes: recomputed per block and also kept whole for readers outside.
    pub shared: Vec<NodeId>,
    /// The nodes every block recomputes whole: cheap producers of a tensor the blocks read
    /// whole (the attention mask a head block adds to all its query rows), recomputed from
    /// inputs smaller than it so it is not held across the model. Their rules read every
    /// input whole; shared ones also stay for readers outside.
    pub whole: Vec<NodeId>,
    /// The passes of the blocks before the last, earliest first: one per DynamicQuantizeLinear
    /// whose input the chain makes (see [`RowRules::passes`]).
    pub passes: Vec<Pass>,
}

/// A pass of a chain's blocks for one DynamicQuantizeLinear whose input the chain makes: the
/// pass runs, block by block, the nodes making that input (the `prefix`) for their rows'
/// minimum and maximum, and the scale and zero point come from the extremes of all blocks;
/// the later passes, and the last, which runs the whole chain, quantize each block's rows by
/// them. The minimum of the blocks' minima is the whole input's, so the integers are the ones
/// the whole operator makes. A prefix holding an earlier pass's quantizer quantizes by its
/// scale (a pre-norm feed-forward's LayerNorm output, then its GELU output: three passes).
/// A block whose rows the pass before the last keeps is not recomputed in the last; every
/// other block recomputes the prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pass {
    /// The quantizer's index in the chain's nodes.
    pub quantizer: usize,
    /// The indices of the chain's nodes its input is made from, in execution order.
    pub prefix: Vec<usize>,
}

/// The rules a row chain is built by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowRules {
    /// The default domain's opset.
    pub opset: i64,
    /// The rule set of the row table.
    pub set: RuleSet,
    /// Which producers read elsewhere the chain may recompute per block.
    pub recompute: Recompute,
    /// How many of its latest DynamicQuantizeLinear nodes the chain may grow through the input
    /// of, each then quantized after a pass of its own ([`Pass`]) instead of its input made
    /// whole before the chain: 0, 1 (two passes), or [`MAX_PASSES`] - 1.
    pub passes: usize,
}

/// The most passes of a chain's blocks: a pre-norm feed-forward's LayerNorm output and its
/// GELU output each quantized after a pass of their own, then the whole chain.
pub const MAX_PASSES: usize = 3;

/// Which cheap producers a chain may recompute per block while their output stays whole for
/// readers outside it (see [`row_chain`]). A search is made with each: recomputing more
/// lets chains grow, and a greedy search may then end worse (measured on BART: a chain
/// recomputing the decoder's embedding LayerNorm left the encoder's attention whole).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Recompute {
    /// Elementwise operators and those that move values.
    Cheap,
    /// Also reductions and normalizations (a pre-norm layer's LayerNorm, so its whole output
    /// dies once the key and value projections have read it).
    Normalizations,
}

/// A plan's execution order with the step of each node, so [`row_chain`] visits only the
/// steps making a tensor its chain wants rather than every step before its last.
pub struct RowOrder<'a> {
    /// The nodes in execution order.
    pub nodes: &'a [NodeId],
    /// Each node's step (`usize::MAX` for nodes not in the order).
    step_of: Vec<usize>,
}

impl<'a> RowOrder<'a> {
    /// The order `nodes`, with each node's step.
    pub fn new(nodes: &'a [NodeId]) -> RowOrder<'a> {
        let step_of = crate::ir::steps_of(nodes, nodes.iter().max().map_or(0, |&n| n + 1));
        RowOrder { nodes, step_of }
    }

    /// The step of `node`, if it is in the order.
    pub fn step(&self, node: NodeId) -> Option<usize> {
        self.step_of.get(node).copied().filter(|&s| s != usize::MAX)
    }
}

impl From<(i64, RuleSet, Recompute)> for RowRules {
    /// The rules of an opset, a rule set and a recomputation policy, in one pass.
    fn from((opset, set, recompute): (i64, RuleSet, Recompute)) -> RowRules {
        RowRules {
            opset,
            set,
            recompute,
            passes: 0,
        }
    }
}

/// The row chain making the output of the node at step `end` of `order`, cut along `axis` of
/// that output, from nodes at steps `≥ start`, by `rules`; `allowed` says which nodes may be
/// split. `None` unless it has at least two nodes.
pub fn row_chain(
    graph: &Graph,
    order: &RowOrder,
    [start, end]: [usize; 2],
    axis: usize,
    rules: impl Into<RowRules>,
    allowed: &dyn Fn(NodeId) -> bool,
) -> Option<RowChain> {
    let rules: RowRules = rules.into();
    let RowRules { recompute, .. } = rules;
    let table = (rules.opset, rules.set);
    // The DynamicQuantizeLinear nodes quantized after passes of their own, latest first.
    let mut quantizers: Vec<NodeId> = Vec::new();
    let seed = order.nodes[end];
    let output = graph.nodes[seed].outputs.first().copied().flatten()?;
    if crate::split::rules::shape_of(graph, output)?
        .get(axis)
        .copied()?
        < 2
    {
        return None;
    }
    let mut members: FxHashMap<NodeId, (RowRule, usize)> = FxHashMap::default();
    let mut shared: FxHashSet<NodeId> = FxHashSet::default();
    let mut whole: FxHashSet<NodeId> = FxHashSet::default();
    // Axis each tensor is wanted along by the members reading it; `None` when they disagree
    // or one reads it whole.
    let mut wanted: FxHashMap<ValueId, Option<usize>> = FxHashMap::default();
    wanted.insert(output, Some(axis));
    let outputs: Vec<ValueId> = graph.nodes[seed]
        .outputs
        .iter()
        .flatten()
        .copied()
        .collect();
    let mut folded = Vec::new();
    // The steps to visit, latest first: the chain's last, then those making a tensor the
    // chain wants (a step making none would be passed over). Every reader of a tensor runs
    // after its maker, so its entry in `wanted` is final when its maker's step is visited.
    let mut visit = BinaryHeap::from([end]);
    let mut visited = usize::MAX;
    while let Some(step) = visit.pop() {
        if step < start {
            break;
        }
        if step == visited {
            continue;
        }
        visited = step;
        let id = order.nodes[step];
        let node = &graph.nodes[id];
        if !allowed(id) {
            continue;
        }
        let Some(out) = node.outputs.first().copied().flatten() else {
            continue;
        };
        let axis = match wanted.get(&out).copied() {
            Some(Some(axis)) => axis,
            // Read whole by the chain: recomputed whole in each block if that is cheap.
            Some(None) if id != seed => {
                let joined = (&members, &shared, &whole);
                if let Some(share) = whole_member(graph, id, (recompute, &wanted), joined, output) {
                    let rule = whole_rule(node);
                    for v in node.inputs.iter().flatten() {
                        let maker = graph.values[*v].producer.and_then(|p| order.step(p));
                        if let Some(s) = maker.filter(|&s| s < step) {
                            visit.push(s);
                        }
                        wanted.insert(*v, None);
                    }
                    members.insert(id, (rule, 0));
                    whole.insert(id);
                    if share {
                        shared.insert(id);
                    }
                }
                continue;
            }
            _ => continue,
        };
        let mut share = false;
        if id != seed {
            let value = &graph.values[out];
            let readers_inside = value.consumers.iter().all(|c| {
                (members.contains_key(c) && !shared.contains(c)) || is_foldable_shape(graph, *c)
            });
            if value.is_output {
                continue;
            }
            if !readers_inside {
                if !recomputable(graph, id, (recompute, &wanted)) {
                    continue;
                }
                share = true;
            }
        }
        let Some(mut rule) = row_rule(graph, node, axis, table) else {
            continue;
        };
        // Only the last node may make several blocked tensors (a Split's parts); a
        // DynamicQuantizeLinear's scale and zero point are made whole, so it never ends a
        // chain (its output would be assembled whole again).
        let several = node.outputs.iter().flatten().count() > 1;
        let whole_scale = rule.fixup == Fixup::WholeScale;
        if (id != seed && several && !whole_scale) || (id == seed && whole_scale) {
            continue;
        }
        // The walk meets the latest DynamicQuantizeLinear nodes first: with passes, the chain
        // grows through their inputs.
        if whole_scale && quantizers.len() < rules.passes.min(MAX_PASSES - 1) {
            rule = RowRule {
                reads: vec![RowRead::Rows(axis)],
                fixup: Fixup::TwoPass,
            };
            quantizers.push(id);
        }
        // Rows map one to one, but for a Reshape's in proportion (see its rule).
        let extent = crate::split::rules::shape_of(graph, out)?
            .get(axis)
            .copied();
        let reshape = node.op_type == "Reshape" && node.domain.is_empty();
        if rule.reads.iter().zip(&node.inputs).any(|(r, v)| {
            r.rows().is_some() && v.is_some_and(|v| !reshape && dim(graph, v, r) != extent)
        }) {
            continue;
        }
        for (read, input) in rule.reads.iter().zip(&node.inputs) {
            let Some(v) = *input else { continue };
            let want = match *read {
                RowRead::Rows(a) => Some(a),
                _ => None,
            };
            // A tensor read whole is visited too when a cheap node makes it (see
            // [`whole_member`]).
            let producer = graph.values[v].producer;
            let cheap_whole = *read == RowRead::Whole
                && producer.is_some_and(|p| cheap(graph, p, recompute));
            let maker = producer.and_then(|p| order.step(p));
            if let Some(s) = maker.filter(|&s| s < step && (want.is_some() || cheap_whole)) {
                visit.push(s);
            }
            wanted
                .entry(v)
                .and_modify(|w| {
                    if *w != want {
                        *w = None;
                    }
                })
                .or_insert(want);
        }
        members.insert(id, (rule, axis));
        if share {
            shared.insert(id);
        }
    }
    if members.len() < 2 {
        return None;
    }
    // A quantizer whose input the chain does not make takes its scale from the whole input.
    let input_of = |q: NodeId| graph.nodes[q].inputs[0].and_then(|v| graph.values[v].producer);
    quantizers.retain(|&q| {
        if input_of(q).is_some_and(|p| members.contains_key(&p)) {
            return true;
        }
        let entry = members.get_mut(&q).expect("the quantizer joined");
        entry.0 = RowRule {
            reads: vec![RowRead::RowsOfWhole(entry.1)],
            fixup: Fixup::WholeScale,
        };
        false
    });
    // Folded Shape readers: of the members' outputs other than the chain's output and the
    // shared nodes' (which stay).
    let made: FxHashSet<ValueId> = members
        .keys()
        .filter(|n| !shared.contains(n))
        .filter_map(|&n| graph.nodes[n].outputs[0])
        .filter(|&v| v != output)
        .collect();
    for &v in &made {
        for &c in &graph.values[v].consumers {
            if !members.contains_key(&c) && !folded.contains(&c) {
                folded.push(c);
            }
        }
    }
    folded.sort_unstable();
    let mut nodes: Vec<NodeId> = members.keys().copied().collect();
    nodes.sort_unstable_by_key(|&n| order.step(n));
    let (rules, axes): (Vec<RowRule>, Vec<usize>) =
        nodes.iter().map(|n| members[n].clone()).unzip();
    // The rows a block boundary may fall between: every tensor cut holds a whole number of
    // rows of each block.
    let mut rows = 0;
    for (k, &n) in nodes.iter().enumerate() {
        if whole.contains(&n) {
            continue;
        }
        let node = &graph.nodes[n];
        let made = node.outputs[0].and_then(|v| crate::split::rules::shape_of(graph, v));
        rows = gcd(rows, made?.get(axes[k]).copied()?);
        for (read, v) in rules[k].reads.iter().zip(&node.inputs) {
            if let Some(v) = v {
                rows = dim(graph, *v, read).map_or(rows, |d| gcd(rows, d));
            }
        }
    }
    if rows < 2 {
        return None;
    }
    let mut shared: Vec<NodeId> = shared.into_iter().collect();
    shared.sort_unstable();
    let mut whole: Vec<NodeId> = whole.into_iter().collect();
    whole.sort_unstable();
    let passes = quantizers.iter().rev().map(|&q| pass(graph, &nodes, q)).collect();
    Some(RowChain {
        nodes,
        rules,
        axes,
        rows,
        output,
        outputs,
        folded,
        shared,
        whole,
        passes,
    })
}

/// Whether `node`, whose output the chain's `members` read whole, may join them recomputed
/// whole in every block: it is not a graph output, no smaller than the finest block of the
/// chain's `chain_output`, every member reading it reads it whole, and it is
/// [`recomputable`]. `Some(shared)` when it may, `shared` when readers outside the
/// chain (or the originals of `shared` members) keep the original.
fn whole_member(
    graph: &Graph,
    node: NodeId,
    (recompute, held): (Recompute, &FxHashMap<ValueId, Option<usize>>),
    (members, shared, whole): Joined,
    chain_output: ValueId,
) -> Option<bool> {
    let out = graph.nodes[node].outputs.first().copied().flatten()?;
    let value = &graph.values[out];
    // Read by blocked nodes and smaller than the finest block of the chain's output, it
    // weighs less at the peak than the inputs its copies would hold (models/bert_tiny_dyn's
    // mask and the shapes it is expanded to). What a node recomputed whole reads joins it
    // whatever its size.
    let bytes = super::estimate::bytes;
    let for_whole = value.consumers.iter().any(|c| whole.contains(c));
    let small = !for_whole
        && bytes(graph, out) * (super::MOST_BLOCKS as u64) < bytes(graph, chain_output);
    if small || value.is_output || !recomputable(graph, node, (recompute, held)) {
        return None;
    }
    let mut outside = false;
    for &c in &value.consumers {
        match members.get(&c) {
            Some((rule, _)) => {
                let reads = rule.reads.iter().zip(&graph.nodes[c].inputs);
                if reads.filter(|(_, v)| **v == Some(out)).any(|(r, _)| *r != RowRead::Whole) {
                    return None;
                }
                // A shared reader's original stays, and reads the original.
                outside |= shared.contains(&c);
            }
            None => outside |= !is_foldable_shape(graph, c),
        }
    }
    Some(outside)
}

/// The nodes a chain has joined so far, those of them shared and those recomputed whole.
type Joined<'a> = (
    &'a FxHashMap<NodeId, (RowRule, usize)>,
    &'a FxHashSet<NodeId>,
    &'a FxHashSet<NodeId>,
);

/// The rule of a node recomputed whole: every input read whole.
fn whole_rule(node: &crate::ir::Node) -> RowRule {
    let reads = (0..node.inputs.len()).map(|i| absent_or(node, i, RowRead::Whole));
    RowRule {
        reads: reads.collect(),
        fixup: Fixup::None,
    }
}

/// The pass of a chain (its `nodes`, in execution order) for the quantizer `q`: the chain's
/// nodes its input is made from.
fn pass(graph: &Graph, nodes: &[NodeId], q: NodeId) -> Pass {
    let index: FxHashMap<NodeId, usize> = nodes.iter().enumerate().map(|(k, &n)| (n, k)).collect();
    let mut inside = vec![false; nodes.len()];
    let mut stack = vec![q];
    while let Some(n) = stack.pop() {
        for &v in graph.nodes[n].inputs.iter().flatten() {
            let maker = graph.values[v].producer.and_then(|p| index.get(&p).copied());
            if let Some(k) = maker.filter(|&k| !inside[k]) {
                inside[k] = true;
                stack.push(nodes[k]);
            }
        }
    }
    Pass {
        quantizer: index[&q],
        prefix: (0..nodes.len()).filter(|&k| inside[k]).collect(),
    }
}

impl RowChain {
    /// The part of an axis of `extent` that the chain's rows `block` are.
    pub fn part(&self, extent: i64, block: Span) -> Span {
        let per_row = extent / self.rows;
        Span::new(block.start * per_row, block.end * per_row)
    }
}

/// The greatest common divisor (`gcd(0, n) = n`).
fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Operators that move or map values without multiply-accumulates, each with a row rule: a
/// node of these (or an elementwise one) may be recomputed per block.
const CHEAP: &[&str] = &[
    "Gather",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Reshape",
    "ConstantOfShape",
    "Expand",
    "DequantizeLinear",
    "QuantizeLinear",
];

/// Normalizations over the last axes, each with a row rule: linear in their input's size,
/// without multiply-accumulates by weights, so a block may recompute its own rows (a pre-norm
/// layer's LayerNorm, whose whole output the key and value projections also read).
const NORMALIZATIONS: &[(&str, &str)] = &[
    ("", "LayerNormalization"),
    ("", "RMSNormalization"),
    ("com.microsoft", "SimplifiedLayerNormalization"),
];

/// Most producers the search for a node's recomputation cost walks through.
const CONE_LIMIT: usize = 64;

/// Whether a node may be recomputed per block while its output stays for other readers: a
/// cheap operator (elementwise, moving values, a reduction or a normalization) whose
/// recomputation, through producers that are themselves cheap, needs fewer run-time bytes than
/// its output holds, under [`Recompute::Normalizations`] not counting the tensors the chain
/// reads anyway (`held`: a pre-norm layer's input, which its residual Add reads). The chain
/// then holds those inputs (a boolean
/// mask, the positions a relative-position bias is gathered from, the layer's input) instead
/// of the large output.
fn recomputable(
    graph: &Graph,
    node: NodeId,
    (recompute, held): (Recompute, &FxHashMap<ValueId, Option<usize>>),
) -> bool {
    let Some(out) = graph.nodes[node].outputs.first().copied().flatten() else {
        return false;
    };
    if !cheap(graph, node, recompute) || !run_time(graph, out) {
        return false;
    }
    // Under the wider policy, what the chain reads anyway costs nothing more.
    let mut seen: FxHashSet<ValueId> = match recompute {
        Recompute::Cheap => FxHashSet::default(),
        Recompute::Normalizations => held.keys().copied().collect(),
    };
    let mut walked = 0;
    cone_cost(graph, node, (recompute, &mut seen), &mut walked) < super::estimate::bytes(graph, out)
}

/// Whether a node is a cheap operator with one output: elementwise or moving values, and
/// under [`Recompute::Normalizations`] also a reduction or a normalization.
fn cheap(graph: &Graph, node: NodeId, recompute: Recompute) -> bool {
    let n = &graph.nodes[node];
    let op = n.op_type.as_str();
    let wider = recompute == Recompute::Normalizations;
    let default = n.domain.is_empty()
        && (crate::split::rules::ELEMENTWISE.contains(&op)
            || CHEAP.contains(&op)
            || (wider && super::rules::REDUCTIONS.contains(&op)));
    n.outputs.iter().flatten().count() == 1
        && (default || (wider && NORMALIZATIONS.contains(&(n.domain.as_str(), op))))
}

/// Whether a value is made at run time and so takes arena bytes: liveness's own test (not a
/// weight, a `Constant` or a folded value; a value inference knows but did not fold still
/// runs).
fn run_time(graph: &Graph, v: ValueId) -> bool {
    crate::liveness::tensor_kind(graph, v).is_some_and(|k| k != TensorKind::Constant)
}

/// The run-time bytes recomputing `node` reads: each run-time input counts whole, unless a
/// cheap producer recomputes it for less. `seen` keeps shared inputs counted once (and holds
/// those that cost nothing from the start); `walked`
/// caps the producers visited at [`CONE_LIMIT`].
fn cone_cost(
    graph: &Graph,
    node: NodeId,
    (recompute, seen): (Recompute, &mut FxHashSet<ValueId>),
    walked: &mut usize,
) -> u64 {
    *walked += 1;
    let mut cost = 0;
    for &v in graph.nodes[node].inputs.iter().flatten() {
        if !run_time(graph, v) || !seen.insert(v) {
            continue;
        }
        let whole = super::estimate::bytes(graph, v);
        cost += match graph.values[v].producer {
            Some(p) if *walked < CONE_LIMIT && cheap(graph, p, recompute) => {
                whole.min(cone_cost(graph, p, (recompute, seen), walked))
            }
            _ => whole,
        };
    }
    cost
}

/// The extent of the axis a read cuts.
fn dim(graph: &Graph, value: ValueId, read: &RowRead) -> Option<i64> {
    let a = read.rows()?;
    crate::split::rules::shape_of(graph, value)?.get(a).copied()
}
