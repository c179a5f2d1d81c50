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

use super::super::glue::{Glue, op, splice};
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
        for (&id, [scale, zero_point]) in &scales {
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
    let skip = |n: NodeId| replaced.contains(&n);
    let (model, kept, glue) = splice(proto, order, rewrites, &skip, &internal);
    Rewritten {
        model,
        kept,
        parts: copies
            .into_iter()
            .zip(glue)
            .map(|(copies, glue)| Parts {
                copies,
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
/// QuantizeLinear nodes by its whole scale and zero point, named by `scales`); returns, per
/// chain node, its copies' names.
fn block_copies(
    e: &mut Glue,
    (proto, graph): (&ModelProto, &Graph),
    cut: &RowCut,
    scales: &BTreeMap<NodeId, [String; 2]>,
) -> Vec<Vec<String>> {
    let (chain, blocks) = (cut.chain, cut.blocks);
    let old = &proto
        .graph
        .as_ref()
        .expect("a loaded model has a graph")
        .node;
    let position: FxHashMap<NodeId, usize> = chain
        .nodes
        .iter()
        .enumerate()
        .map(|(k, &n)| (n, k))
        .collect();
    let mut copies = vec![Vec::new(); chain.nodes.len()];
    let mut parts = vec![Vec::with_capacity(blocks.len()); chain.outputs.len()];
    let split = match cut.blockwise {
        Some(alignment) => split_reads(e, graph, cut, alignment),
        None => FxHashMap::default(),
    };
    for (b, &block) in blocks.iter().enumerate() {
        let tag = format!("r{b}");
        let mut made: Vec<String> = Vec::with_capacity(chain.nodes.len());
        let mut slices: FxHashMap<(String, usize), String> = split
            .iter()
            .map(|(key, names)| (key.clone(), names[b].clone()))
            .collect();
        for (k, &id) in chain.nodes.iter().enumerate() {
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
                    (RowRead::Whole, Some(v)) => graph.values[v].name.clone(),
                    (RowRead::Rows(axis) | RowRead::RowsOfWhole(axis), Some(v)) => {
                        let inside = graph.values[v]
                            .producer
                            .and_then(|p| position.get(&p).copied());
                        match inside {
                            Some(j) => made[j].clone(),
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
                                        e.slice(&source, bounds, &tag)
                                    })
                                    .clone()
                            }
                        }
                    }
                };
                inputs.push(name);
            }
            let mut source = old[id].clone();
            // A DynamicQuantizeLinear's blocks quantize by the whole scale and zero point.
            if let Some([scale, zero_point]) = scales.get(&id) {
                source = op("QuantizeLinear", Vec::new(), "", "", Vec::new());
                inputs.extend([scale.clone(), zero_point.clone()]);
            }
            // The last node may make several tensors (a Split's parts): one copy of each.
            let outs: Vec<String> = node
                .outputs
                .iter()
                .take(source.output.len())
                .map(|o| o.map_or_else(String::new, |v| e.fresh(&graph.values[v].name, &tag)))
                .collect();
            let out = outs[0].clone();
            let base = if node.name.is_empty() {
                &node.op_type
            } else {
                &node.name
            };
            let node_name = e.fresh(base, &tag);
            if k + 1 == chain.nodes.len() {
                for (o, name) in outs.iter().filter(|n| !n.is_empty()).enumerate() {
                    parts[o].push(name.clone());
                }
            }
            e.nodes.push(NodeProto {
                input: inputs,
                output: outs,
                name: Some(node_name.clone()),
                ..source
            });
            copies[k].push(node_name);
            made.push(out);
        }
    }
    let axis = *chain.axes.last().expect("a chain has nodes") as i64;
    for (&v, parts) in chain.outputs.iter().zip(parts) {
        e.concat(parts, axis, &graph.values[v].name);
    }
    copies
}

/// The names of the scale and zero point of each DynamicQuantizeLinear of the chain: its own
/// outputs', fresh ones for those it omits.
fn whole_scale_names(
    e: &mut Glue,
    graph: &Graph,
    chain: &RowChain,
) -> BTreeMap<NodeId, [String; 2]> {
    let quantizers = chain.nodes.iter().zip(&chain.rules);
    let quantizers = quantizers.filter(|(_, r)| r.fixup == Fixup::WholeScale);
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
