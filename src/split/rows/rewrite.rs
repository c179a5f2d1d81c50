//! The row rewrite: each row chain's nodes replaced by one copy per block of rows (reading
//! Slices of the tensors made before the chain, the shape inputs of Reshape and
//! ConstantOfShape resized to the block), the blocks' parts of each output (a Split's several)
//! assembled by Concat along the blocked axis under the output's original name. `Shape` nodes
//! reading chain tensors become initializers (their value is known), so nothing outside the
//! chain needs its intermediates. Shared nodes (see [`super::chain`]) are copied into every
//! block and also kept. Several disjoint chains (repeated layers cut alike) are rewritten at
//! once.

use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;

use super::super::glue::{Glue, int_attribute, op, splice};
use super::super::region::Span;
use super::super::rewrite::{Parts, Rewritten};
use super::chain::RowChain;
use super::quantize;
use super::rules::{Fixup, RowRead};
use crate::ir::{Graph, NodeId};
use crate::onnx::proto::{ModelProto, NodeProto};

/// One row chain to run in blocks.
pub struct RowCut<'a> {
    /// The chain.
    pub chain: &'a RowChain,
    /// Consecutive row ranges covering the chain's rows.
    pub blocks: &'a [Span],
    /// The tag of its new names (e.g. `split1`).
    pub label: String,
    /// The arena alignment when the planner lets blocks write over the rows of a tensor that
    /// died (`LivenessOptions::blockwise`): a run-time tensor read from outside the chain
    /// whose blocks' rows are unbroken runs of its bytes, each starting at a multiple of it,
    /// is then cut by one Split before the first block (each part a view of it, and the
    /// tensor itself dead once split) rather than sliced per block.
    pub blockwise: Option<u64>,
    /// With passes before the last ([`super::chain::Pass`]), how many of the last blocks the
    /// latest of them keeps for the last pass instead of recomputing them.
    pub keep: usize,
}

/// Rewrites `proto` (typed as `graph`, nodes run in `order`) so each chain of `cuts` (their
/// nodes disjoint) runs block by block.
pub fn rewrite_rows(
    proto: &ModelProto,
    graph: &Graph,
    order: &[NodeId],
    cuts: &[RowCut],
) -> Rewritten {
    // Earlier blocks hoisted by the scheduler run where they are needed again.
    let order = &super::sink::sunk(graph, order);
    let mut rewrites = Vec::with_capacity(cuts.len());
    let mut copies = Vec::with_capacity(cuts.len());
    let mut replaced: FxHashSet<NodeId> = FxHashSet::default();
    let mut internal: FxHashSet<&str> = FxHashSet::default();
    // The whole scales and zero points, each computed where its DynamicQuantizeLinear ran
    // (after these, so the rewrites of the cuts and their parts stay aligned).
    let mut scale_rewrites = Vec::new();
    for cut in cuts {
        let chain = cut.chain;
        let mut e = Glue::new(proto, graph, &cut.label);
        let scales = whole_scale_names(&mut e, graph, chain);
        copies.push(block_copies(&mut e, (proto, graph), cut, &scales));
        // A quantizer after a pass of its own takes its scale from that pass, in the rewrite
        // itself.
        let passed: Vec<NodeId> = chain.passes.iter().map(|p| chain.nodes[p.quantizer]).collect();
        let whole = scales.iter().filter(|(id, _)| !passed.contains(id));
        for (&id, [scale, zero_point]) in whole {
            let from = e.nodes.len();
            let node = &graph.nodes[id];
            let x = &graph.values[node.inputs[0].expect("a quantized input")].name;
            let base = if node.name.is_empty() {
                &node.op_type
            } else {
                &node.name
            };
            quantize::scale_and_zero_point(&mut e, x, [scale, zero_point], base);
            let step = order
                .iter()
                .position(|&n| n == id)
                .expect("the chain is in the order");
            scale_rewrites.push((step, e.detach(from)));
        }
        // Shape readers of chain tensors become initializers holding the value inference
        // found.
        e.fold_shapes(graph, &chain.folded);
        replaced.extend(chain.folded.iter().copied());
        // Shared nodes stay whole for their readers outside the chain.
        let shared: FxHashSet<NodeId> = chain.shared.iter().copied().collect();
        let members = chain.nodes.iter().filter(|n| !shared.contains(n));
        replaced.extend(members.clone().copied());
        internal.extend(
            members
                .filter_map(|&n| graph.nodes[n].outputs[0])
                .filter(|v| !chain.outputs.contains(v))
                .map(|v| graph.values[v].name.as_str()),
        );
        let last = *chain.nodes.last().expect("a chain has nodes");
        let end = order
            .iter()
            .position(|&n| n == last)
            .expect("the chain is in the order")
            + 1;
        rewrites.push((end, e));
    }
    rewrites.append(&mut scale_rewrites);
    // Shared nodes whose readers the cuts all replace (repeated layers cut together, each
    // keeping the original for the others) go too.
    let shared: Vec<NodeId> = cuts.iter().flat_map(|c| c.chain.shared.iter().copied()).collect();
    loop {
        let unread = shared.iter().copied().find(|&n| {
            !replaced.contains(&n)
                && graph.nodes[n].outputs.iter().flatten().all(|&v| {
                    let value = &graph.values[v];
                    !value.is_output && value.consumers.iter().all(|c| replaced.contains(c))
                })
        });
        let Some(n) = unread else { break };
        replaced.insert(n);
        let outputs = graph.nodes[n].outputs.iter().flatten();
        internal.extend(outputs.map(|&v| graph.values[v].name.as_str()));
    }
    let skip = |n: NodeId| replaced.contains(&n);
    let (model, kept, glue) = splice(proto, order, rewrites, &skip, &internal);
    Rewritten {
        model,
        kept,
        parts: copies
            .into_iter()
            .zip(glue)
            .map(|((copies, first_pass), glue)| Parts {
                copies,
                first_pass,
                glue,
                pools: Vec::new(),
            })
            .collect(),
        dropped: Vec::new(),
        unsliced: Vec::new(),
    }
}

/// Adds to `e` one copy of the cut's chain per block (reading slices of the tensors made
/// before it, with the Concat assembling each output; a DynamicQuantizeLinear's copies are
/// QuantizeLinear nodes by its whole scale and zero point, named by `scales`), after the
/// chain's passes before the last; returns, per chain node, its copies' names and the names of
/// its copies in those passes (pass by pass, block by block).
fn block_copies(
    e: &mut Glue,
    (proto, graph): (&ModelProto, &Graph),
    cut: &RowCut,
    scales: &BTreeMap<NodeId, [String; 2]>,
) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let (chain, blocks) = (cut.chain, cut.blocks);
    let copier = Copier {
        graph,
        old: &proto
            .graph
            .as_ref()
            .expect("a loaded model has a graph")
            .node,
        chain,
        position: chain
            .nodes
            .iter()
            .enumerate()
            .map(|(k, &n)| (n, k))
            .collect(),
        scales,
    };
    let mut copies = vec![Vec::new(); chain.nodes.len()];
    let mut first_copies = vec![Vec::new(); chain.nodes.len()];
    let mut parts = vec![Vec::with_capacity(blocks.len()); chain.outputs.len()];
    let split = match cut.blockwise {
        Some(alignment) => split_reads(e, graph, cut, alignment),
        None => FxHashMap::default(),
    };
    let mut slices: Vec<Slices> = (0..blocks.len())
        .map(|b| {
            let parts = split.iter();
            parts.map(|(key, names)| (key.clone(), names[b].clone())).collect()
        })
        .collect();
    // The passes before the last: each block's prefix, for the extremes of the pass's
    // quantizer's input; the last `keep` blocks of the last of them keep what it made for the
    // last pass.
    let mut kept: Vec<Vec<Option<String>>> = vec![vec![None; chain.nodes.len()]; blocks.len()];
    for (i, pass) in chain.passes.iter().enumerate() {
        let latest = i + 1 == chain.passes.len();
        let quantizer = chain.nodes[pass.quantizer];
        let input = graph.nodes[quantizer].inputs[0].expect("a quantized input");
        let maker = copier.position[&graph.values[input].producer.expect("made in the chain")];
        // The extremes so far, folded into a running Min and Max right after each block: a
        // block's rows then die with its reductions, which nothing later waits for.
        let mut extremes: [Option<String>; 2] = [None, None];
        for (b, &block) in blocks.iter().enumerate() {
            let tag = match latest {
                true => format!("p{b}"),
                false => format!("pass{i}/p{b}"),
            };
            let mut made = vec![None; chain.nodes.len()];
            let run = (pass.prefix.as_slice(), block, tag.as_str());
            copier.copy(e, run, (&mut made, &mut slices[b]), &mut first_copies);
            let x = made[maker].clone().expect("the prefix makes the input");
            for (k, (reduce, fold)) in [("ReduceMin", "Min"), ("ReduceMax", "Max")]
                .into_iter()
                .enumerate()
            {
                let base = graph.values[input].name.as_str();
                let tagged = |op_type: &str| format!("{tag}/{op_type}");
                let keepdims = vec![int_attribute("keepdims", 0)];
                let mut out = e.add((base, &tagged(reduce)), reduce, vec![x.clone()], keepdims);
                if let Some(so_far) = extremes[k].take() {
                    out = e.add((base, &tagged(fold)), fold, vec![so_far, out], Vec::new());
                }
                extremes[k] = Some(out);
            }
            if latest && b >= blocks.len() - cut.keep {
                kept[b] = made;
            }
        }
        let extremes = extremes.map(|x| x.expect("a chain has blocks"));
        let [scale, zero_point] = &scales[&quantizer];
        let base = copier.base(quantizer);
        quantize::from_extremes(e, extremes, [scale, zero_point], base);
    }
    // The last pass runs the kept blocks first, so the rows they hold die before the other
    // blocks recompute theirs; each node's copies and each output's parts stay in block order.
    let kept_from = blocks.len() - cut.keep;
    let mut names = vec![vec![Vec::new(); chain.nodes.len()]; blocks.len()];
    let mut outputs = vec![Vec::new(); blocks.len()];
    for b in (kept_from..blocks.len()).chain(0..kept_from) {
        let tag = format!("r{b}");
        let mut made = std::mem::take(&mut kept[b]);
        // A kept block runs only the nodes the pass before the last did not: their copies in
        // that pass, the last of each node's copies in passes, are the block's.
        for k in (0..chain.nodes.len()).filter(|&k| made[k].is_some()) {
            let last_pass = first_copies[k].len() - blocks.len();
            names[b][k].push(first_copies[k][last_pass + b].clone());
        }
        let run: Vec<usize> = (0..chain.nodes.len())
            .filter(|&k| made[k].is_none())
            .collect();
        let run = (run.as_slice(), blocks[b], tag.as_str());
        outputs[b] = copier.copy(e, run, (&mut made, &mut slices[b]), &mut names[b]);
    }
    for (names, outs) in names.into_iter().zip(outputs) {
        for (k, names) in names.into_iter().enumerate() {
            copies[k].extend(names);
        }
        for (o, name) in outs.into_iter().filter(|n| !n.is_empty()).enumerate() {
            parts[o].push(name);
        }
    }
    let axis = *chain.axes.last().expect("a chain has nodes") as i64;
    for (&v, parts) in chain.outputs.iter().zip(parts) {
        e.concat(parts, axis, &graph.values[v].name);
    }
    (copies, first_copies)
}

/// A block's slices of the tensors made before its chain, by tensor and axis.
type Slices = FxHashMap<(String, usize), String>;

/// What copying a row chain's nodes into a block reads.
struct Copier<'a> {
    graph: &'a Graph,
    /// The source model's nodes.
    old: &'a [NodeProto],
    chain: &'a RowChain,
    /// Each chain node's index in the chain.
    position: FxHashMap<NodeId, usize>,
    /// The whole scale and zero point of each quantizer of the chain.
    scales: &'a BTreeMap<NodeId, [String; 2]>,
}

impl Copier<'_> {
    /// The name `node`'s copies are based on.
    fn base(&self, node: NodeId) -> &str {
        let node = &self.graph.nodes[node];
        if node.name.is_empty() {
            &node.op_type
        } else {
            &node.name
        }
    }

    /// The chain index of the node making `v`, if the chain makes it.
    fn inside(&self, v: crate::ir::ValueId) -> Option<usize> {
        let producer = self.graph.values[v].producer?;
        self.position.get(&producer).copied()
    }

    /// Adds to `e` a copy of the chain's nodes at indices `run` (in order) for the rows
    /// `block`, tagged `tag`: each reads what an earlier copy of this block `made` (their
    /// outputs, by chain index, which it extends) or a slice of a tensor made before the
    /// chain (`slices`, by tensor and axis, which it extends); each copy's name is appended to
    /// its node's list in `names`. Returns the outputs of the chain's last node's copy (a
    /// Split's several), if it ran.
    fn copy(
        &self,
        e: &mut Glue,
        (run, block, tag): (&[usize], Span, &str),
        (made, slices): (&mut [Option<String>], &mut Slices),
        names: &mut [Vec<String>],
    ) -> Vec<String> {
        let (graph, chain) = (self.graph, self.chain);
        let mut last = Vec::new();
        for &k in run {
            let id = chain.nodes[k];
            let node = &graph.nodes[id];
            let rule = &chain.rules[k];
            let mut inputs = Vec::with_capacity(node.inputs.len());
            for (i, read) in rule.reads.iter().enumerate() {
                let value = node.inputs[i];
                let name = match (*read, value) {
                    (RowRead::Absent, _) | (_, None) => String::new(),
                    (RowRead::Whole, Some(_)) if rule.fixup == Fixup::ShapeTarget(i) => {
                        let out = node.outputs[0].expect("chain nodes have an output");
                        let mut target = crate::split::rules::shape_of(graph, out)
                            .expect("chain outputs have shapes");
                        let axis = chain.axes[k];
                        target[axis] = chain.part(target[axis], block).len();
                        e.constant(target)
                    }
                    // Made whole in the block by a node it recomputes whole, or outside (or
                    // by a quantizer: its whole scale and zero point).
                    (RowRead::Whole, Some(v)) => match self.inside(v) {
                        Some(j) if chain.whole.contains(&chain.nodes[j]) => {
                            made[j].clone().expect("made earlier in the block")
                        }
                        _ => graph.values[v].name.clone(),
                    },
                    (RowRead::Rows(axis) | RowRead::RowsOfWhole(axis), Some(v)) => {
                        match self.inside(v) {
                            Some(j) => made[j].clone().expect("made earlier in the block"),
                            None => {
                                let source = graph.values[v].name.clone();
                                slices
                                    .entry((source.clone(), axis))
                                    .or_insert_with(|| {
                                        let extent = crate::split::rules::shape_of(graph, v)
                                            .expect("chain inputs have shapes")[axis];
                                        let rows = chain.part(extent, block);
                                        let bounds =
                                            [vec![rows.start], vec![rows.end], vec![axis as i64]];
                                        e.slice(&source, bounds, tag)
                                    })
                                    .clone()
                            }
                        }
                    }
                };
                inputs.push(name);
            }
            let mut source = self.old[id].clone();
            // A DynamicQuantizeLinear's blocks quantize by the whole scale and zero point.
            if let Some([scale, zero_point]) = self.scales.get(&id) {
                source = op("QuantizeLinear", Vec::new(), "", "", Vec::new());
                inputs.extend([scale.clone(), zero_point.clone()]);
            }
            // The last node may make several tensors (a Split's parts): one copy of each.
            let outs: Vec<String> = node
                .outputs
                .iter()
                .take(source.output.len())
                .map(|o| o.map_or_else(String::new, |v| e.fresh(&graph.values[v].name, tag)))
                .collect();
            let node_name = e.fresh(self.base(id), tag);
            made[k] = Some(outs[0].clone());
            if k + 1 == chain.nodes.len() {
                last.clone_from(&outs);
            }
            e.nodes.push(NodeProto {
                input: inputs,
                output: outs,
                name: Some(node_name.clone()),
                ..source
            });
            names[k].push(node_name);
        }
        last
    }
}

/// The names of the scale and zero point of each DynamicQuantizeLinear of the chain: its own
/// outputs', fresh ones for those it omits.
fn whole_scale_names(
    e: &mut Glue,
    graph: &Graph,
    chain: &RowChain,
) -> BTreeMap<NodeId, [String; 2]> {
    let quantizers = chain.nodes.iter().zip(&chain.rules);
    let quantizers =
        quantizers.filter(|(_, r)| matches!(r.fixup, Fixup::WholeScale | Fixup::TwoPass));
    quantizers
        .map(|(&id, _)| {
            let node = &graph.nodes[id];
            let name =
                |e: &mut Glue, i: usize, what: &str| match node.outputs.get(i).copied().flatten() {
                    Some(v) => graph.values[v].name.clone(),
                    None => e.fresh(&node.op_type, what),
                };
            (id, [name(e, 1, "scale"), name(e, 2, "zero_point")])
        })
        .collect()
}

/// Cuts each run-time tensor the chain reads from outside along an axis by one Split into the
/// blocks' rows (see [`RowCut::blockwise`]), when every block's rows are an unbroken run of
/// its bytes starting at a multiple of `alignment`; returns the parts by tensor and axis.
fn split_reads(
    e: &mut Glue,
    graph: &Graph,
    cut: &RowCut,
    alignment: u64,
) -> FxHashMap<(String, usize), Vec<String>> {
    let chain = cut.chain;
    let mut found: FxHashMap<(String, usize), Vec<String>> = FxHashMap::default();
    for (k, &id) in chain.nodes.iter().enumerate() {
        for (read, input) in chain.rules[k].reads.iter().zip(&graph.nodes[id].inputs) {
            let (RowRead::Rows(axis), Some(v)) = (*read, *input) else {
                continue;
            };
            let value = &graph.values[v];
            let key = (value.name.clone(), axis);
            let outside = value.producer.is_none_or(|p| !chain.nodes.contains(&p));
            if !outside || found.contains_key(&key) {
                continue;
            }
            if crate::liveness::tensor_kind(graph, v)
                != Some(crate::liveness::TensorKind::Intermediate)
            {
                continue;
            }
            let (Some(shape), Some(bits)) = (
                crate::split::rules::shape_of(graph, v),
                value.tensor_type().and_then(|t| t.dtype.bits()),
            ) else {
                continue;
            };
            let rows: Vec<Span> = cut
                .blocks
                .iter()
                .map(|&b| chain.part(shape[axis], b))
                .collect();
            let sizes: Vec<i64> = rows.iter().map(|r| r.len()).collect();
            // Each block's rows must be an unbroken run of the tensor's bytes, aligned.
            let aligned = crate::liveness::rules::slice_offsets(&shape, axis, &sizes, bits)
                .is_some_and(|offsets| offsets.iter().all(|o| o.is_multiple_of(alignment)));
            if !aligned {
                continue;
            }
            let names: Vec<String> = (0..rows.len())
                .map(|b| e.fresh(&value.name, &format!("r{b}/part")))
                .collect();
            let node = e.names.fresh(&format!("{}/{}/Split", value.name, e.label));
            e.split(&value.name, (axis as i64, sizes), &names, &node);
            found.insert(key, names);
        }
    }
    found
}
