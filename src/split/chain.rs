//! Chains: runs of consecutive steps of the schedule whose operators all have a split rule;
//! the tensors they make that are read after the run (or are graph outputs) are the chain's
//! outputs, which the tiles fill part by part.

use rustc_hash::FxHashMap;

use super::layout::{Layout, NCHW, Placed, fixes_layout, input_places, resolve};
use super::rules::{Inputs, Rule, rule_of, shape_of};
use crate::ir::{Graph, NodeId, ValueId};

/// How a chain node reads one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// The input is absent (an omitted optional input).
    Absent,
    /// Read whole by every tile (weights, per-channel parameters, tensors broadcast along H
    /// and W).
    Whole,
    /// A spatial tensor made outside the chain, its positions laid out so: each tile reads a
    /// slice of it.
    Outside(Layout),
    /// A spatial tensor made by the chain node at this position of [`Chain::nodes`].
    Inside(usize),
}

/// A chain of splittable nodes, in execution order.
#[derive(Clone, Debug)]
pub struct Chain {
    /// The nodes, in execution order.
    pub nodes: Vec<NodeId>,
    /// Each node's rule.
    pub rules: Vec<Rule>,
    /// For each node, how it reads each input.
    pub reads: Vec<Vec<Read>>,
    /// Where each node's output keeps its positions.
    pub layouts: Vec<Layout>,
    /// Each node's output H × W.
    pub grids: Vec<[i64; 2]>,
    /// The position in `nodes` of the node making the chain's output.
    pub last: usize,
    /// The chain's output: the last tensor it makes that is read after the chain (or is a
    /// graph output); the tile grid cuts it.
    pub output: ValueId,
    /// The positions in `nodes` of the nodes making the chain's other outputs (intermediates
    /// also read after the chain, such as a U-Net's skips), in execution order.
    pub extra: Vec<usize>,
    /// For each node, the chain nodes and inputs that read its output (`Read::Inside` of it),
    /// in order: what `reads` says, indexed by the node read.
    pub readers: Vec<Vec<(usize, usize)>>,
}

/// A visitor of [`Walker::around`]: it gets a chain's first and last steps and a way to
/// build it, and says whether the chain is worth growing.
pub type ChainVisit<'a, E> =
    dyn FnMut([usize; 2], &dyn Fn() -> Option<Chain>) -> Result<bool, E> + 'a;

/// Most nodes in a chain. Every node between the peak and the chain's ends recomputes its
/// halo, and estimating a chain costs its length times its tiles, so the walk around a peak
/// stops there: deep runs of splittable operators (a reparameterisable network's hundreds of
/// Conv, BatchNormalization and Add nodes) would otherwise make hundreds of thousands of
/// chains per peak.
pub const MAX_CHAIN_NODES: usize = 32;

/// Most nodes in a chain under a budget, where reaching the budget matters more than the
/// estimate: a block whose Concat gathers a long run of convolutions is split whole.
pub const MAX_BUDGET_CHAIN_NODES: usize = 64;

/// What walking the chains around a plan's steps reads, worked out once per plan: for each
/// step of `order`, whether its node stays outside chains ([`stays_outside`]), its rule, and
/// the kernels of the graph's units over the steps ([`Kernels`]). A round walks around
/// hundreds of steps of the same plan.
pub struct Walker<'g> {
    graph: &'g Graph,
    order: &'g [NodeId],
    outside: Vec<bool>,
    rules: Vec<Option<Rule>>,
    kernels: Kernels,
    /// Kernels in steps `[0, s)`, to count a chain's length.
    before: Vec<usize>,
}

impl<'g> Walker<'g> {
    /// The walker of `graph`'s steps in `order`.
    pub fn new(graph: &'g Graph, order: &'g [NodeId]) -> Walker<'g> {
        let outside: Vec<bool> = order.iter().map(|&n| stays_outside(graph, n)).collect();
        let rules = order
            .iter()
            .map(|&n| rule_of(graph, &graph.nodes[n]))
            .collect();
        let kernels = Kernels::of(graph, order, &outside);
        let mut before = vec![0usize; order.len() + 1];
        for s in 0..order.len() {
            before[s + 1] = before[s] + usize::from(!outside[s]) * kernels.weight[s];
        }
        Walker {
            graph,
            order,
            outside,
            rules,
            kernels,
            before,
        }
    }

    /// Walks every chain of at most `max_nodes` kernels made of the nodes at steps `[start,
    /// end]` of the order (less the nodes that stay outside chains, see [`stays_outside`],
    /// which neither start nor end a chain) with `start ≤ peak ≤ end`, taking QDQ node units
    /// whole and counting each as one kernel (see [`Kernels`]), last step by last step, each
    /// from the shortest (first step at `peak`) to the longest. `visit` gets each chain's
    /// first and last steps and a way to build it (`None` when those nodes form no chain),
    /// and says whether the chain is worth growing. When it is not, the walk takes no
    /// earlier first step for that last step: the caller says so when no grid cuts the chain
    /// within the MAC allowance, and prepending nodes leaves the region every node of the
    /// chain computes per tile as it was (regions follow from the chain's output backwards)
    /// while adding the new nodes' recomputed positions, so no grid of a longer chain
    /// recomputes less. `allowed` says which nodes may be split (nodes made by an earlier
    /// split may not); `opset` is the default domain's version.
    pub fn around<E>(
        &self,
        peak: usize,
        allowed: &dyn Fn(NodeId) -> bool,
        (max_nodes, opset): (usize, i64),
        visit: &mut ChainVisit<'_, E>,
    ) -> Result<(), E> {
        let (graph, order, kernels) = (self.graph, self.order, &self.kernels);
        let constant = |step: usize| self.outside[step];
        let rule_at = |step: usize| self.rules[step].as_ref();
        // Token-major and channels-last nodes join only runs that reach an NCHW operator,
        // which fixes where positions are (a plain transformer has none, and its rows are
        // row blocking's).
        let fixes = |step: usize| {
            rule_at(step).is_some_and(|r| fixes_layout(r, &graph.nodes[order[step]]))
        };
        let splittable_with = |step: usize, rows: bool| {
            allowed(order[step])
                && !constant(step)
                && rule_at(step).is_some_and(|r| rows || *r != Rule::Rows)
        };
        // A peak at a constant node (an exporter's Identity of a weight, between the nodes
        // whose tensors make the peak) is spanned by the chains around it.
        if peak >= order.len() || !(splittable_with(peak, true) || constant(peak)) {
            return Ok(());
        }
        let counts = |step: usize| usize::from(!constant(step)) * kernels.weight[step];
        // The run around the peak within `max_nodes` kernels of it either way.
        let reach = |rows: bool| {
            let ok = |step: usize| splittable_with(step, rows) || constant(step);
            let (mut low, mut high, mut n) = (peak, peak, 0);
            while low > 0 && ok(low - 1) && n < max_nodes {
                low -= 1;
                n += counts(low);
            }
            n = 0;
            while high + 1 < order.len() && ok(high + 1) && n < max_nodes {
                high += 1;
                // The kernel of a unit spanning the peak (the peak at a DQ that stays
                // outside) is the peak's own.
                n += counts(high) * usize::from(kernels.spans_from[high] > peak);
            }
            (low, high)
        };
        let (low, high) = reach(true);
        let rows = (low..=high).any(fixes);
        if !rows && !splittable_with(peak, false) && !constant(peak) {
            return Ok(());
        }
        let (low, high) = if rows { (low, high) } else { reach(false) };
        let splittable = |step: usize| splittable_with(step, rows);
        let nodes_in = |start: usize, end: usize| self.before[end + 1] - self.before[start];
        for end in (peak..=high).filter(|&s| splittable(s) && kernels.ends[s]) {
            if nodes_in(peak, end) > max_nodes {
                break;
            }
            // A chain may begin after the peak when the unit it begins spans the peak.
            let begins = |s: usize| kernels.spans_from[s] <= peak && kernels.starts[s];
            for start in (low..=end).rev().filter(|&s| splittable(s) && begins(s)) {
                if nodes_in(start, end) > max_nodes {
                    break;
                }
                let build = || {
                    let nodes: Vec<NodeId> = (start..=end)
                        .filter(|&s| !constant(s))
                        .map(|s| order[s])
                        .collect();
                    chain_of(graph, &nodes, opset)
                };
                if !visit([kernels.spans_from[start], end], &build)? {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// Where chains may begin and end in a schedule, and what each step counts toward a chain's
/// length. A QDQ node unit ([`crate::ir::NodeUnit`]) runs as one integer kernel, so a chain
/// takes it whole: it begins at a unit's first step and ends at its last, never between
/// (a cut there would make the unit's float tensor a chain input or output, planned and
/// sliced). A unit counts as one kernel, as the QOperator node it stands for does, and a
/// DequantizeLinear shared by units counts as none: it materialises nothing, and a chain
/// may begin with it but not end with it (its float output is read after it). The planner
/// runs a unit at one step, so a chain beginning with a unit spans the unit's steps before
/// its first chain node too (the DQs that stay outside chains, see [`stays_outside`]).
/// Without units every step may begin and end a chain and counts as one.
struct Kernels {
    /// Whether a chain may begin at each step.
    starts: Vec<bool>,
    /// The first step a chain beginning at each step spans: the first step of the unit it
    /// begins, or the step itself.
    spans_from: Vec<usize>,
    /// Whether a chain may end at each step.
    ends: Vec<bool>,
    /// What each step counts toward a chain's length (before [`stays_outside`] steps, which
    /// count none).
    weight: Vec<usize>,
}

impl Kernels {
    /// The kernels of `graph`'s units over the steps of `order`, where `outside` says which
    /// steps' nodes stay outside chains ([`stays_outside`]).
    fn of(graph: &Graph, order: &[NodeId], outside: &[bool]) -> Kernels {
        let n = order.len();
        let mut kernels = Kernels {
            starts: vec![true; n],
            spans_from: (0..n).collect(),
            ends: vec![true; n],
            weight: vec![1; n],
        };
        if graph.units.is_empty() {
            return kernels;
        }
        let step_of = crate::ir::steps_of(order, graph.nodes.len());
        for unit in &graph.units {
            for &dq in &unit.shared {
                if let Some(&s) = step_of.get(dq).filter(|&&s| s < n) {
                    kernels.ends[s] = false;
                    kernels.weight[s] = 0;
                }
            }
            let steps: Vec<usize> = unit
                .nodes
                .iter()
                .filter_map(|&node| step_of.get(node).copied().filter(|&s| s < n))
                .filter(|&s| !outside[s])
                .collect();
            let (Some(&first), Some(&last)) = (steps.iter().min(), steps.iter().max()) else {
                continue;
            };
            // The unit's nodes just before its first chain node (a plan runs a unit's nodes
            // together; a stored order may not).
            let mut from = first;
            while from > 0 && unit.nodes.contains(&order[from - 1]) {
                from -= 1;
            }
            kernels.spans_from[first] = from;
            for s in steps {
                kernels.starts[s] = s == first;
                kernels.ends[s] = s == last;
                kernels.weight[s] = usize::from(s == first);
            }
        }
        kernels
    }
}

/// A node whose outputs are known before run time: a constant, or a computation on shapes
/// (TensorFlow-style "same" padding computes its pads from `Shape`s of the tensors it pads;
/// the rewrite replaces a known `Shape` of a tensor the chain no longer makes by its value).
/// A DequantizeLinear of constants (a QDQ model's weights and biases) is one too: each tile's
/// copy of the operator reads it whole, and it joins each copy's node unit.
/// It stays outside chains, so a chain may span the steps where the exporter placed one.
pub fn is_constant(graph: &Graph, node: NodeId) -> bool {
    let n = &graph.nodes[node];
    let dequantizes_constants = n.op_type == "DequantizeLinear"
        && n.inputs
            .iter()
            .flatten()
            .all(|&v| graph.is_model_constant(v));
    dequantizes_constants
        || n.outputs
            .iter()
            .flatten()
            .all(|&v| graph.is_model_constant(v) || graph.values[v].constant.is_some())
}

/// A node a chain spans but leaves out, its output read whole by every tile: one whose
/// values are known before run time ([`is_constant`]), or a DequantizeLinear of a tensor
/// broadcast along H and W (NCHW with H = W = 1: a squeeze-and-excitation block's channel
/// scales, which the block's Mul unit reads). Left in place before the tiles, it is read by
/// every tile's copy of its unit, as a DequantizeLinear that units share.
pub fn stays_outside(graph: &Graph, node: NodeId) -> bool {
    let n = &graph.nodes[node];
    let broadcast =
        |v: ValueId| shape_of(graph, v).is_some_and(|s| s.len() == 4 && s[2..] == [1, 1]);
    let output = n.outputs.first().copied().flatten();
    is_constant(graph, node) || (n.op_type == "DequantizeLinear" && output.is_some_and(broadcast))
}

/// A default-domain `Shape` node whose output value inference knows.
pub fn is_foldable_shape(graph: &Graph, node: NodeId) -> bool {
    let n = &graph.nodes[node];
    n.op_type == "Shape"
        && n.domain.is_empty()
        && n.outputs
            .first()
            .copied()
            .flatten()
            .is_some_and(|v| graph.values[v].constant.is_some())
}

/// The chain made of exactly these nodes, if they form one: every output's positions placed
/// ([`resolve`]: NCHW, or a token axis), every input spatial (sliced per tile) or readable
/// whole, and every tensor made read inside the run or after it (a known `Shape` of it does
/// not count: the rewrite folds it). `opset` is the default domain's version.
pub fn chain_of(graph: &Graph, nodes: &[NodeId], opset: i64) -> Option<Chain> {
    let position: FxHashMap<NodeId, usize> =
        nodes.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let rules: Vec<Rule> = nodes
        .iter()
        .map(|&id| rule_of(graph, &graph.nodes[id]))
        .collect::<Option<_>>()?;
    let placed = resolve(graph, nodes, &rules, opset)?;
    let mut reads = Vec::with_capacity(nodes.len());
    let mut escaping = Vec::new();
    for (k, &id) in nodes.iter().enumerate() {
        let node = &graph.nodes[id];
        let out = node.outputs[0]?;
        let value = &graph.values[out];
        let outside = |c: &NodeId| !position.contains_key(c) && !is_foldable_shape(graph, *c);
        if value.is_output || value.consumers.iter().any(outside) {
            escaping.push(k);
        } else if value.consumers.is_empty() {
            return None;
        }
        let wanted = input_layouts(graph, node, &rules[k], placed[k], opset)?;
        let mut node_reads = Vec::with_capacity(node.inputs.len());
        for (input, want) in node.inputs.iter().zip(wanted) {
            let Some(v) = *input else {
                node_reads.push(Read::Absent);
                continue;
            };
            let inside = graph.values[v]
                .producer
                .and_then(|p| position.get(&p).copied());
            node_reads.push(match (want, inside) {
                (None, None) => Read::Whole,
                (Some(p), Some(j)) if placed[j] == p => Read::Inside(j),
                (Some(p), None) => Read::Outside(p.0),
                _ => return None,
            });
        }
        reads.push(node_reads);
    }
    let (&last, extra) = escaping.split_last()?;
    let mut readers = vec![Vec::new(); nodes.len()];
    for (k, node_reads) in reads.iter().enumerate() {
        for (i, read) in node_reads.iter().enumerate() {
            if let Read::Inside(j) = *read {
                readers[j].push((k, i));
            }
        }
    }
    Some(Chain {
        nodes: nodes.to_vec(),
        rules,
        reads,
        layouts: placed.iter().map(|p| p.0).collect(),
        grids: placed.iter().map(|p| p.1).collect(),
        last,
        output: graph.nodes[nodes[last]].outputs[0]?,
        extra: extra.to_vec(),
        readers,
    })
}

/// Where a chain node reads each input, `None` for inputs read whole (or absent); the node
/// makes its output placed as `placed`. `None` when an input can be neither.
fn input_layouts(
    graph: &Graph,
    node: &crate::ir::Node,
    rule: &Rule,
    placed: Placed,
    opset: i64,
) -> Option<Vec<Option<Placed>>> {
    if !fixes_layout(rule, node) {
        input_places(graph, node, placed, opset)
    } else if placed.0 == NCHW {
        nchw_inputs(graph, node, rule, placed.1)
    } else {
        None
    }
}

/// The NCHW reads of an NCHW operator making an output of H × W `grid`: its spatial inputs
/// (every input of a channel Concat, input 0 of the others) NCHW, unless they broadcast along
/// H and W; the rest whole.
fn nchw_inputs(
    graph: &Graph,
    node: &crate::ir::Node,
    rule: &Rule,
    grid: [i64; 2],
) -> Option<Vec<Option<Placed>>> {
    node.inputs
        .iter()
        .enumerate()
        .map(|(i, input)| {
            let spatial_role = match rule {
                Rule::Pointwise(Inputs::All) => true,
                Rule::Pointwise(Inputs::First) | Rule::Window(_) | Rule::Upsample(_) => i == 0,
                Rule::Rows => return None,
            };
            let Some(v) = *input else { return Some(None) };
            if !spatial_role {
                return Some(None);
            }
            let dims = shape_of(graph, v)?;
            let spatial = match rule {
                Rule::Window(_) | Rule::Upsample(_) => dims.len() == 4,
                _ => dims.len() == 4 && dims[2..] == grid,
            };
            if spatial {
                let input_grid = match rule {
                    Rule::Window(_) | Rule::Upsample(_) => [dims[2], dims[3]],
                    _ => grid,
                };
                Some(Some((NCHW, input_grid)))
            } else {
                broadcasts(&dims).then_some(None)
            }
        })
        .collect()
}

impl Chain {
    /// The value chain node `k` makes.
    pub fn value_of(&self, graph: &Graph, k: usize) -> ValueId {
        graph.nodes[self.nodes[k]].outputs[0].expect("chain nodes have an output")
    }

    /// H × W of input `i` of chain node `k`, when it is read by tiles: its producer's in the
    /// chain; an NCHW input's own; a token-major input's, the reading node's (rows map one to
    /// one).
    pub fn input_grid(&self, graph: &Graph, k: usize, i: usize) -> Option<[i64; 2]> {
        match self.reads[k][i] {
            Read::Inside(j) => Some(self.grids[j]),
            Read::Outside(Layout::Grid([h, w])) => {
                let s = shape_of(graph, graph.nodes[self.nodes[k]].inputs[i]?)?;
                Some([*s.get(h)?, *s.get(w)?])
            }
            Read::Outside(Layout::Tokens(_)) => Some(self.grids[k]),
            Read::Absent | Read::Whole => None,
        }
    }

    /// Whether some tensor of the chain is laid out other than NCHW (token-major, or
    /// channels-last): such chains are cut in bands of whole rows only. A band is one range of
    /// tokens; channels-last layers (ConvNeXt's LayerNorm and Linears) gain as much from bands
    /// as from tiles, and tiles of their many nodes make graphs too large to search.
    pub fn bands_only(&self) -> bool {
        self.layouts.iter().any(|l| *l != NCHW)
            || self
                .reads
                .iter()
                .flatten()
                .any(|r| matches!(r, Read::Outside(l) if *l != NCHW))
    }
}

/// True when a tensor of this shape broadcasts along the last two axes (H and W) of a rank-4
/// tensor: a scalar, or size 1 in both.
fn broadcasts(dims: &[i64]) -> bool {
    match dims.len() {
        0 => true,
        1 => dims[0] == 1,
        n => dims[n - 2] == 1 && dims[n - 1] == 1,
    }
}
