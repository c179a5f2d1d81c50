//! The rewrite: a chain's nodes replaced by one copy per tile (reading Slices of the tensors
//! made before the chain, with per-tile pads), the tiles' parts of the output assembled by
//! Concat under the output's original name.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;

use super::chain::{Chain, Read};
use super::region::{Region, Span, full};
use super::rules::{Rule, shape_of};
use super::tiling::Tiling;
use crate::ir::{Graph, NodeId};
use crate::onnx::proto::{
    AttributeProto, ModelProto, NodeProto, TensorProto, attribute_proto::AttributeType,
};

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
    let slice_inputs = crate::ir::Opsets::from_proto(&proto.opset_import)
        .version("")
        .unwrap_or(1)
        >= 10;
    let mut b = Builder {
        names: Names::of(proto, graph),
        nodes: Vec::new(),
        initializers: Vec::new(),
        constants: HashMap::new(),
        glue: Vec::new(),
        slice_inputs,
        label: label.to_string(),
    };
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
                                    let name = b.slice(&source, held, want, &tag);
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
            let out = b.names.fresh(&format!(
                "{}/{}/{tag}",
                graph.values[node.outputs[0].expect("chain nodes have an output")].name,
                b.label
            ));
            let node_name = b.names.fresh(&format!(
                "{}/{}/{tag}",
                if node.name.is_empty() {
                    &node.op_type
                } else {
                    &node.name
                },
                b.label
            ));
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
                b.names
                    .fresh(&format!("{output_name}/{}/row{}", b.label, tile.at[0]))
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
    let mut model = proto.clone();
    let g = model.graph.as_mut().expect("a loaded model has a graph");
    let mut nodes = Vec::with_capacity(order.len() + b.nodes.len());
    let mut kept = Vec::with_capacity(nodes.capacity());
    let in_chain: HashSet<NodeId> = chain.nodes.iter().copied().collect();
    for &n in order[..end].iter().filter(|n| !in_chain.contains(n)) {
        nodes.push(old[n].clone());
        kept.push(Some(n));
    }
    kept.extend(std::iter::repeat_n(None, b.nodes.len()));
    nodes.append(&mut b.nodes);
    for &n in &order[end..] {
        nodes.push(old[n].clone());
        kept.push(Some(n));
    }
    g.node = nodes;
    g.initializer.append(&mut b.initializers);
    g.value_info.retain(|vi| !internal.contains(vi.name()));
    Rewritten {
        model,
        kept,
        copies,
        glue: b.glue,
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

/// Accumulates the nodes and constants of a rewrite.
struct Builder {
    names: Names,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    constants: HashMap<Vec<i64>, String>,
    glue: Vec<String>,
    slice_inputs: bool,
    label: String,
}

impl Builder {
    /// A Slice of `source` (which holds `held` of its tensor) down to `want`; returns the
    /// new tensor's name.
    fn slice(&mut self, source: &str, held: Region, want: Region, tag: &str) -> String {
        let rel = |s: Span, h: Span| [s.start - h.start, s.end - h.start];
        let [h0, h1] = rel(want[0], held[0]);
        let [w0, w1] = rel(want[1], held[1]);
        let (starts, ends, axes) = (vec![h0, w0], vec![h1, w1], vec![2, 3]);
        let out = self
            .names
            .fresh(&format!("{source}/{}/{tag}/slice", self.label));
        let name = self.names.fresh(&format!("{out}/Slice"));
        let node = if self.slice_inputs {
            let inputs = vec![
                source.to_string(),
                self.constant(starts),
                self.constant(ends),
                self.constant(axes),
            ];
            op("Slice", inputs, &out, &name, Vec::new())
        } else {
            let attributes = vec![
                ints_attribute("starts", starts),
                ints_attribute("ends", ends),
                ints_attribute("axes", axes),
            ];
            op("Slice", vec![source.to_string()], &out, &name, attributes)
        };
        self.nodes.push(node);
        self.glue.push(name);
        out
    }

    /// A Concat of `parts` along `axis` making `out`.
    fn concat(&mut self, parts: Vec<String>, axis: i64, out: &str) {
        let name = self.names.fresh(&format!("{out}/{}/Concat", self.label));
        let axis = AttributeProto {
            name: Some("axis".to_string()),
            r#type: Some(AttributeType::Int as i32),
            i: Some(axis),
            ..Default::default()
        };
        self.nodes.push(op("Concat", parts, out, &name, vec![axis]));
        self.glue.push(name);
    }

    /// An int64 initializer holding `values` (shared between Slices asking the same).
    fn constant(&mut self, values: Vec<i64>) -> String {
        if let Some(name) = self.constants.get(&values) {
            return name.clone();
        }
        let text: Vec<String> = values.iter().map(i64::to_string).collect();
        let name = self
            .names
            .fresh(&format!("{}/const_{}", self.label, text.join("_")));
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.initializers.push(TensorProto {
            dims: vec![values.len() as i64],
            data_type: Some(crate::ir::DType::Int64.to_onnx()),
            name: Some(name.clone()),
            raw_data: Some(Bytes::from(raw)),
            ..Default::default()
        });
        self.constants.insert(values, name.clone());
        name
    }
}

/// A node of the default domain with one output.
pub(super) fn op(
    op_type: &str,
    input: Vec<String>,
    out: &str,
    name: &str,
    attribute: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        input,
        output: vec![out.to_string()],
        name: Some(name.to_string()),
        op_type: Some(op_type.to_string()),
        attribute,
        ..Default::default()
    }
}

/// An integer-list attribute.
pub(super) fn ints_attribute(name: &str, ints: Vec<i64>) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Ints as i32),
        ints,
        ..Default::default()
    }
}

/// Names already taken in the model, and fresh ones.
pub(super) struct Names(HashSet<String>);

impl Names {
    /// The names `proto` (typed as `graph`) already uses.
    pub(super) fn of(proto: &ModelProto, graph: &Graph) -> Names {
        let mut used: HashSet<String> = graph.values.iter().map(|v| v.name.clone()).collect();
        if let Some(g) = &proto.graph {
            used.extend(g.node.iter().map(|n| n.name().to_string()));
            used.extend(g.initializer.iter().map(|t| t.name().to_string()));
        }
        Names(used)
    }

    /// `base`, or `base_2`, `base_3`... whichever is free; taken from now on.
    pub(super) fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut n = 2;
        while self.0.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.0.insert(name.clone());
        name
    }
}
