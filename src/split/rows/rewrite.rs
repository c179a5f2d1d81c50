//! The row rewrite: a row chain's nodes replaced by one copy per block of rows (reading
//! Slices of the tensors made before the chain, Reshape targets resized to the block), the
//! blocks' parts of the output assembled by Concat along the blocked axis under the output's
//! original name. `Shape` nodes reading chain tensors become initializers (their value is
//! known), so nothing outside the chain needs its intermediates.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;

use super::super::region::Span;
use super::super::rewrite::{Names, Rewritten, ints_attribute, op};
use super::chain::RowChain;
use super::rules::{Fixup, RowRead};
use crate::ir::{DType, Graph, NodeId};
use crate::onnx::proto::{
    AttributeProto, ModelProto, NodeProto, TensorProto, attribute_proto::AttributeType,
};

/// Rewrites `proto` (typed as `graph`, nodes run in `order`) so the chain runs block by block
/// over `blocks` (consecutive row ranges covering the chain's rows); `label` tags new names.
pub fn rewrite_rows(
    proto: &ModelProto,
    graph: &Graph,
    order: &[NodeId],
    chain: &RowChain,
    blocks: &[Span],
    label: &str,
) -> Rewritten {
    let old = &proto
        .graph
        .as_ref()
        .expect("a loaded model has a graph")
        .node;
    let last = *chain.nodes.last().expect("a chain has nodes");
    let end = order
        .iter()
        .position(|&n| n == last)
        .expect("the chain is in the order")
        + 1;
    let opset = crate::ir::Opsets::from_proto(&proto.opset_import)
        .version("")
        .unwrap_or(1);
    let mut e = Emitter {
        names: Names::of(proto, graph),
        nodes: Vec::new(),
        initializers: Vec::new(),
        constants: HashMap::new(),
        glue: Vec::new(),
        slice_inputs: opset >= 10,
        label: label.to_string(),
    };
    let position: HashMap<NodeId, usize> = chain
        .nodes
        .iter()
        .enumerate()
        .map(|(k, &n)| (n, k))
        .collect();
    let mut copies = vec![Vec::new(); chain.nodes.len()];
    let mut parts = Vec::with_capacity(blocks.len());
    for (b, &block) in blocks.iter().enumerate() {
        let tag = format!("r{b}");
        let mut made: Vec<String> = Vec::with_capacity(chain.nodes.len());
        let mut slices: HashMap<(String, usize), String> = HashMap::new();
        for (k, &id) in chain.nodes.iter().enumerate() {
            let node = &graph.nodes[id];
            let rule = &chain.rules[k];
            let mut inputs = Vec::with_capacity(node.inputs.len());
            for (i, read) in rule.reads.iter().enumerate() {
                let value = node.inputs[i];
                let name = match (*read, value) {
                    (RowRead::Absent, _) | (_, None) => String::new(),
                    (RowRead::Whole, Some(_)) if i == 1 && rule.fixup == Fixup::ReshapeTarget => {
                        let out = node.outputs[0].expect("chain nodes have an output");
                        let mut target = crate::split::rules::shape_of(graph, out)
                            .expect("chain outputs have shapes");
                        target[chain.axes[k]] = block.len();
                        e.constant(target)
                    }
                    (RowRead::Whole, Some(v)) => graph.values[v].name.clone(),
                    (RowRead::Rows(axis), Some(v)) => {
                        let inside = graph.values[v]
                            .producer
                            .and_then(|p| position.get(&p).copied());
                        match inside {
                            Some(j) => made[j].clone(),
                            None => {
                                let source = graph.values[v].name.clone();
                                slices
                                    .entry((source.clone(), axis))
                                    .or_insert_with(|| e.slice(&source, axis, block, &tag))
                                    .clone()
                            }
                        }
                    }
                };
                inputs.push(name);
            }
            let source = &old[id];
            let out_name = &graph.values[node.outputs[0].expect("chain nodes have an output")].name;
            let out = e.names.fresh(&format!("{out_name}/{}/{tag}", e.label));
            let base = if node.name.is_empty() {
                &node.op_type
            } else {
                &node.name
            };
            let node_name = e.names.fresh(&format!("{base}/{}/{tag}", e.label));
            e.nodes.push(NodeProto {
                input: inputs,
                output: vec![out.clone()],
                name: Some(node_name.clone()),
                ..source.clone()
            });
            copies[k].push(node_name);
            made.push(out);
        }
        parts.push(made.pop().expect("a chain has nodes"));
    }
    let output_name = graph.values[chain.output].name.clone();
    e.concat(
        parts,
        *chain.axes.last().expect("a chain has nodes"),
        &output_name,
    );

    // Shape readers of chain tensors become initializers holding the value inference found.
    let folded: HashSet<NodeId> = chain.folded.iter().copied().collect();
    for &n in &chain.folded {
        let v = graph.nodes[n].outputs[0].expect("a Shape node has an output");
        let value = graph.values[v]
            .constant
            .as_ref()
            .expect("folded Shape nodes have a known value");
        let dims = value.shape().iter().map(|&d| d as i64).collect();
        let ints = value.to_i64_vec().expect("a shape is integers");
        e.initializers
            .push(int64_tensor(&graph.values[v].name, dims, &ints));
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
    let mut nodes = Vec::with_capacity(order.len() + e.nodes.len());
    let mut kept = Vec::with_capacity(nodes.capacity());
    let skip = |n: &NodeId| position.contains_key(n) || folded.contains(n);
    for &n in order[..end].iter().filter(|n| !skip(n)) {
        nodes.push(old[n].clone());
        kept.push(Some(n));
    }
    kept.extend(std::iter::repeat_n(None, e.nodes.len()));
    nodes.append(&mut e.nodes);
    for &n in order[end..].iter().filter(|n| !skip(n)) {
        nodes.push(old[n].clone());
        kept.push(Some(n));
    }
    g.node = nodes;
    g.initializer.append(&mut e.initializers);
    g.value_info.retain(|vi| !internal.contains(vi.name()));
    Rewritten {
        model,
        kept,
        copies,
        glue: e.glue,
    }
}

/// A 1-D or scalar int64 initializer.
fn int64_tensor(name: &str, dims: Vec<i64>, values: &[i64]) -> TensorProto {
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    TensorProto {
        dims,
        data_type: Some(DType::Int64.to_onnx()),
        name: Some(name.to_string()),
        raw_data: Some(Bytes::from(raw)),
        ..Default::default()
    }
}

/// Accumulates the nodes and constants of a row rewrite.
struct Emitter {
    names: Names,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    constants: HashMap<Vec<i64>, String>,
    glue: Vec<String>,
    slice_inputs: bool,
    label: String,
}

impl Emitter {
    /// Rows `block` of `source` along `axis`; returns the new tensor's name.
    fn slice(&mut self, source: &str, axis: usize, block: Span, tag: &str) -> String {
        let (starts, ends, axes) = (vec![block.start], vec![block.end], vec![axis as i64]);
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
    fn concat(&mut self, parts: Vec<String>, axis: usize, out: &str) {
        let name = self.names.fresh(&format!("{out}/{}/Concat", self.label));
        let axis = AttributeProto {
            name: Some("axis".to_string()),
            r#type: Some(AttributeType::Int as i32),
            i: Some(axis as i64),
            ..Default::default()
        };
        self.nodes.push(op("Concat", parts, out, &name, vec![axis]));
        self.glue.push(name);
    }

    /// An int64 initializer holding `values` (shared between nodes asking the same).
    fn constant(&mut self, values: Vec<i64>) -> String {
        if let Some(name) = self.constants.get(&values) {
            return name.clone();
        }
        let text: Vec<String> = values.iter().map(i64::to_string).collect();
        let name = self
            .names
            .fresh(&format!("{}/const_{}", self.label, text.join("_")));
        self.initializers
            .push(int64_tensor(&name, vec![values.len() as i64], &values));
        self.constants.insert(values, name.clone());
        name
    }
}
