//! The rewrite: a chain's nodes replaced by one copy per tile (reading Slices of the tensors
//! made before the chain, with per-tile pads), the tiles' parts of the output assembled by
//! Concat under the output's original name.

use std::collections::{HashMap, HashSet};

use super::chain::{Chain, Read};
use super::glue::{Glue, ints_attribute};
use super::region::{Region, Span, full};
use super::rules::{Rule, shape_of};
use super::tiling::Tiling;
use crate::ir::{Graph, NodeId};
use crate::onnx::proto::{ModelProto, NodeProto};

/// A model with one chain split.
pub struct Rewritten {
    /// The new model: the old nodes in execution order, the chain replaced by its tiles.
    pub model: ModelProto,
    /// For each node of the new model, the node of the old model it is (`None` for nodes
    /// the split made).
    pub kept: Vec<Option<usize>>,
    /// For each chain node, the names of its copies, one per tile in grid order.
    pub copies: Vec<Vec<String>>,
    /// The Slice and Concat nodes the split added.
    pub glue: Vec<String>,
}

/// Rewrites `proto` (typed as `graph`) so that the chain, which occupies consecutive steps of
/// `order`, runs tile by tile; `label` tags the new names (e.g. `split1`).
pub fn rewrite(
    proto: &ModelProto,
    graph: &Graph,
    order: &[NodeId],
    chain: &Chain,
    tiling: &Tiling,
    label: &str,
) -> Rewritten {
    let old = &proto
        .graph
        .as_ref()
        .expect("a loaded model has a graph")
        .node;
    let end = order
        .iter()
        .position(|&n| n == chain.nodes[chain.nodes.len() - 1])
        .expect("the chain is in the order")
        + 1;
    let mut b = Glue::new(proto, graph, label);
    let mut copies = vec![Vec::new(); chain.nodes.len()];
    let output_name = graph.values[chain.output].name.clone();
    let mut strips = Vec::new();
    let mut row = Vec::new();
    for tile in &tiling.tiles {
        let tag = format!("t{}_{}", tile.at[0], tile.at[1]);
        let mut made: Vec<String> = Vec::with_capacity(chain.nodes.len());
        let mut slices: HashMap<(String, Region), String> = HashMap::new();
        for (k, &id) in chain.nodes.iter().enumerate() {
            let node = &graph.nodes[id];
            let mut inputs = Vec::with_capacity(node.inputs.len());
            let mut pads = None;
            for (i, read) in chain.reads[k].iter().enumerate() {
                let name = match *read {
                    Read::Absent => String::new(),
                    Read::Whole => graph.values[node.inputs[i].expect("present")].name.clone(),
                    Read::Outside | Read::Inside(_) => {
                        let need = tile.reads[k][i].expect("spatial inputs have a region");
                        let (source, held, h, w) = match *read {
                            Read::Inside(j) => {
                                let s = chain.shapes[j];
                                (made[j].clone(), tile.computed[j], s[2], s[3])
                            }
                            _ => {
                                let v = node.inputs[i].expect("present");
                                let s = shape_of(graph, v).expect("chain inputs have shapes");
                                (graph.values[v].name.clone(), full(s[2], s[3]), s[2], s[3])
                            }
                        };
                        let want = [need[0].clip(h), need[1].clip(w)];
                        if i == 0 {
                            pads = Some(pads_of(need, want));
                        }
                        if want == held {
                            source
                        } else {
                            let key = (source.clone(), want);
                            match slices.get(&key) {
                                Some(name) => name.clone(),
                                None => {
                                    let name = b.slice(&source, slice_bounds(held, want), &tag);
                                    slices.insert(key, name.clone());
                                    name
                                }
                            }
                        }
                    }
                };
                inputs.push(name);
            }
            let source = &old[id];
            let out = b.fresh(
                &graph.values[node.outputs[0].expect("chain nodes have an output")].name,
                &tag,
            );
            let node_name = b.fresh(
                if node.name.is_empty() {
                    &node.op_type
                } else {
                    &node.name
                },
                &tag,
            );
            let mut attribute = source.attribute.clone();
            if let (Rule::Window(_), Some(p)) = (&chain.rules[k], pads) {
                attribute.retain(|a| a.name() != "pads" && a.name() != "auto_pad");
                attribute.push(ints_attribute("pads", p.to_vec()));
            }
            b.nodes.push(NodeProto {
                input: inputs,
                output: vec![out.clone()],
                name: Some(node_name.clone()),
                attribute,
                ..source.clone()
            });
            copies[k].push(node_name);
            made.push(out);
        }
        row.push(made[chain.last].clone());
        if row.len() == tiling.grid[1] {
            let strip = if tiling.grid[0] == 1 {
                output_name.clone()
            } else {
                b.fresh(&output_name, &format!("row{}", tile.at[0]))
            };
            if row.len() == 1 {
                strips.push(row.pop().expect("one tile"));
            } else {
                b.concat(std::mem::take(&mut row), 3, &strip);
                strips.push(strip);
            }
        }
    }
    if tiling.grid[0] > 1 {
        b.concat(strips, 2, &output_name);
    } else if tiling.grid[1] == 1 {
        unreachable!("a 1×1 grid is not a split");
    }

    let internal: HashSet<&str> = chain
        .nodes
        .iter()
        .filter_map(|&n| graph.nodes[n].outputs[0])
        .filter(|&v| v != chain.output)
        .map(|v| graph.values[v].name.as_str())
        .collect();
    let in_chain: HashSet<NodeId> = chain.nodes.iter().copied().collect();
    let (model, kept, glue) = b.splice(proto, order, end, &|n| in_chain.contains(&n), &internal);
    Rewritten {
        model,
        kept,
        copies,
        glue,
    }
}

/// The explicit pads of a window tile: how far the region read reaches before and after the
/// part of the input that exists, as ONNX `pads` (begin H, begin W, end H, end W).
fn pads_of(need: Region, want: Region) -> [i64; 4] {
    [
        want[0].start - need[0].start,
        want[1].start - need[1].start,
        need[0].end - want[0].end,
        need[1].end - want[1].end,
    ]
}

/// The Slice bounds (starts, ends, axes H and W) cutting `want` out of a tensor holding
/// `held`.
fn slice_bounds(held: Region, want: Region) -> [Vec<i64>; 3] {
    let rel = |s: Span, h: Span| [s.start - h.start, s.end - h.start];
    let [h0, h1] = rel(want[0], held[0]);
    let [w0, w1] = rel(want[1], held[1]);
    [vec![h0, w0], vec![h1, w1], vec![2, 3]]
}
